"""The humanoid marionette of seed 001 §VIII-B (model/library/humanoid_marionette.py) built in trep 1.0.2 (peer side).

Imported by trep_marionette.py and make_trep_reference.py, which run with the
peer venv's interpreter (.venv-peer-trep, see install_trep.sh); nothing here
imports marionette_control.

- build_model(): the frame tree of model/library/humanoid_marionette.py, frame by frame;
- set_initial_pose(): seed 001's pose, each string's control point straight
  above its hook and its length = the hook-control distance;
- walk_inputs(): seed 001's string-walk inputs with the same formula and time
  convention as marionette_control.model.library.humanoid_marionette.string_walk_inputs
  (rho_{k+1} = rho(t_k), t_k = k dt at the start of step k);
- make_mvi(): a MidpointVI started at rest (q0 = q1 = pose) with the state at t = 0;
- puppet_check(): compares build_model() with trep's own trep.puppets.Puppet (the
  model of trep's TASE 2012 marionette example; its OpenGL imports stubbed out).
- names: state / input names in trep's order, spelled as marionette_control's
  model.state_names / discrete_input_names so data can be mapped by name.
"""

from __future__ import annotations

import math
import sys
import types

import numpy as np
import trep
from trep import const_txyz, rx, ry, rz, tx, ty, tz

STRINGS = ("left_leg", "right_leg", "left_arm", "right_arm", "upper_torso", "lower_torso")
POSE = {"torso_rx": -0.05, "lelbow_rx": 1.57, "relbow_rx": 1.57,
        "lhip_rx": math.pi / 2 - 0.6, "rhip_rx": math.pi / 2 - 0.6,
        "lknee_rx": -math.pi / 2 + 0.6, "rknee_rx": -math.pi / 2 + 0.6}
DT = 0.01


def build_model() -> trep.System:
    """The frame tree of marionette_control.model.library.humanoid_marionette, frame by frame."""
    pel = [10, 1, 1, 1]
    fem = tib = [1.5, 0.3, 0.3, 0.1]
    hum = rad = [0.5, 0.05, 0.05, 0.01]
    head = [0.75, 0.08, 0.08, 0.08]
    frames = [
        tx('torso_tx'), [ty('torso_ty'), [tz('torso_tz'), [rz('torso_rz'), [ry('torso_ry'), [
            rx('torso_rx', name='pelvis', mass=pel), [
                tx(-0.10000000633343277, name='lhip'), [
                    rz('lhip_rz'), [ry('lhip_ry'), [rx('lhip_rx', name='lfemur'), [
                        tz(-0.2000000071819642, name='lfemur_mass', mass=fem),
                        tz(-0.4000000143639284, name='lfemur_end'), [
                            rx('lknee_rx', name='ltibia'), [
                                tz(-0.20000000406340365, name='ltibia_mass', mass=tib),
                                tz(-0.4000000081268073, name='ltibia_end'), [
                                    rz(0.0), [ry(0.0), [rx(0.0, name='lfoot'), [
                                        ty(0.20298699715253277, name='lfoot_end')]]]]],
                            const_txyz((0, 0.1, 0), name='left_leg_string_hook')]]]]],
                tx(0.10000000072551045, name='rhip'), [
                    rz('rhip_rz'), [ry('rhip_ry'), [rx('rhip_rx', name='rfemur'), [
                        tz(-0.20000000746930935, name='rfemur_mass', mass=fem),
                        tz(-0.4000000149386187, name='rfemur_end'), [
                            rx('rknee_rx', name='rtibia'), [
                                tz(-0.20000000524335476, name='rtibia_mass', mass=tib),
                                tz(-0.40000001048670952, name='rtibia_end'), [
                                    rz(0.0), [ry(0.0), [rx(0.0, name='rfoot'), [
                                        ty(0.20000000361419676, name='rfoot_end')]]]]],
                            const_txyz((0, 0.1, 0), name='right_leg_string_hook')]]]]],
                tz(0.49134332092915983, name='spine_top'), [
                    tz(0.04500002226970809, name='neck'), [
                        rz(0.0), [ry(0.0), [rx(0.0, name='neck_joint'), [
                            tz(0.044999991144167348, name='head'), [
                                tz(0.090000011865579349, name='head_center', mass=head), [
                                    tz(0.079999981957211988, name='head_end')]]]]]],
                    tx(-0.15811387592769632, name='lshoulder'), [
                        rz('lshoulder_rz'), [ry('lshoulder_ry'), [rx('lshoulder_rx', name='lhumerus'), [
                            tz(-0.12499999805011695, name='lhumerus_mass', mass=hum),
                            tz(-0.24999999610023391, name='lhumerus_end'), [
                                rx('lelbow_rx', name='lradius'), [
                                    tz(-0.12882950452903394, name='lradius_mass', mass=rad),
                                    tz(-0.25765900905806788, name='lradius_end'), [
                                        rz(0.0), [ry(0.0), [rx(0.0, name='lhand'), [
                                            tz(-0.090000006491074078, name='lhand_end')]]],
                                        const_txyz((0, 0.1, 0), name='left_arm_string_hook')]]]]]]],
                    tx(0.15811388178161004, name='rshoulder'), [
                        rz('rshoulder_rz'), [ry('rshoulder_ry'), [rx('rshoulder_rx', name='rhumerus'), [
                            tz(-0.12500000646915005, name='rhumerus_mass', mass=hum),
                            tz(-0.2500000129383001, name='rhumerus_end'), [
                                rx('relbow_rx', name='rradius'), [
                                    tz(-0.12882950288909756, name='rradius_mass', mass=rad),
                                    tz(-0.25765900577819512, name='rradius_end'), [
                                        rz(0.0), [ry(0.0), [rx(0.0, name='rhand'), [
                                            tz(-0.089999998759819969, name='rhand_end')]]],
                                        const_txyz((0, 0.1, 0), name='right_arm_string_hook')]]]]]]],
                    const_txyz((-0.1, 0, 0), name='upper_torso_string_hook'),
                    const_txyz((0.1, 0, 0), name='lower_torso_string_hook')]]]]]]],
        tz(2.0, name='string_plane'), [
            item for S in STRINGS for item in (
                tx(S + '_string-x', kinematic=True), [
                    ty(S + '_string-y', kinematic=True, name=S + '_string_control')])],
    ]
    system = trep.System()
    system.import_frames(frames)
    for S in STRINGS:
        trep.constraints.Distance(system, S + '_string_hook', S + '_string_control',
                                  S + '_string-length', name=S + '_string')
    trep.potentials.Gravity(system, (0, 0, -9.8))
    trep.forces.Damping(system, 0.2)
    return system


def set_initial_pose(system: trep.System) -> np.ndarray:
    """Seed 001's pose; returns q0 in trep's configuration order."""
    system.q = {q.name: POSE.get(q.name, 0.0) for q in system.dyn_configs}
    for S in STRINGS:
        pos = system.get_frame(S + '_string_hook').p()
        system.get_config(S + '_string-x').q = pos[0]
        system.get_config(S + '_string-y').q = pos[1]
    for S in STRINGS:
        system.get_config(S + '_string-length').q = system.get_constraint(S + '_string').get_actual_distance()
    return np.array(system.q, dtype=float)


def walk_inputs(system: trep.System, q0: np.ndarray, dt: float, steps: int) -> np.ndarray:
    """U (steps, nk): rho_{k+1} from t_k = k dt, the formula of string_walk_inputs (no force inputs here)."""
    nd = system.nQd
    U = np.tile(np.asarray(q0, dtype=float)[nd:], (steps, 1))
    t = dt * np.arange(steps)
    wave = 0.1 * np.sin(0.6 * math.pi * t)
    for name, sign in (("left_leg", -1.0), ("right_leg", 1.0), ("left_arm", 1.0), ("right_arm", -1.0)):
        U[:, system.get_config(name + "_string-length").k_index] += sign * wave
    return U


def make_mvi(system: trep.System, q0: np.ndarray, dt: float = DT, tolerance: float = 1e-10,
             num_threads=None) -> trep.MidpointVI:
    """MidpointVI at rest in q0 with its current state (q2, p2) at t = 0: q_{-1} = q_0 = q0."""
    mvi = trep.MidpointVI(system, tolerance=tolerance, num_threads=num_threads)
    mvi.initialize_from_configs(-dt, q0, 0.0, q0)
    return mvi


def state_names(system: trep.System) -> list[str]:
    return ([q.name for q in system.configs] + ["p_" + q.name for q in system.dyn_configs]
            + ["v_" + q.name for q in system.kin_configs])


def input_names(system: trep.System) -> list[str]:
    return [u.name for u in system.inputs] + [q.name + "_next" for q in system.kin_configs]


def simulate(system: trep.System, mvi: trep.MidpointVI, U: np.ndarray, dt: float = DT):
    """X (N+1, nX) in DSystem's layout [Q; p; v], Newton iterations (N,), from mvi's current state at t = 0."""
    N = len(U)
    X = np.zeros((N + 1, system.nQ + system.nQd + system.nQk))
    X[0, :system.nQ] = mvi.q2
    X[0, system.nQ:system.nQ + system.nQd] = mvi.p2
    X[0, system.nQ + system.nQd:] = 0.0  # at rest: (rho_0 - rho_{-1}) / dt
    iters = np.zeros(N, dtype=int)
    for k in range(N):
        iters[k] = mvi.step((k + 1) * dt, (), U[k])
        X[k + 1] = np.concatenate([mvi.q2, mvi.p2, mvi.v2])
    return X, iters


def _stub_visual():
    for name in ("OpenGL", "OpenGL.GL", "OpenGL.GLU", "OpenGL.GLUT"):
        sys.modules.setdefault(name, types.ModuleType(name))
    vis = types.ModuleType("trep.visual")
    vis.VisualItem3D = object
    sys.modules["trep.visual"] = vis


def puppet_check(steps: int = 50, dt: float = DT) -> dict:
    """build_model() against trep.puppets.Puppet: names, frame positions, a `steps`-step scenario trajectory."""
    _stub_visual()
    import trep.puppets as puppets

    ref = build_model()
    q0 = set_initial_pose(ref)
    pup = puppets.Puppet(joint_forces=False, string_forces=False, string_constraints=True)
    out = {"same_config_names": sorted(q.name for q in ref.configs) == sorted(q.name for q in pup.configs),
           "nQd": ref.nQd, "nQk": ref.nQk, "nc": len(ref.constraints)}
    qd = {q.name: v for q, v in zip(ref.configs, q0)}
    pup.q = {q.name: qd[q.name] for q in pup.configs}
    out["max_frame_position_diff"] = max(
        float(np.max(np.abs(f.p() - pup.get_frame(f.name).p())))
        for f in ref.frames if f.name is not None and pup.get_frame(f.name) is not None)
    trajs = []
    for s in (ref, pup):
        q0s = np.array([qd[q.name] for q in s.configs])
        mvi = make_mvi(s, q0s, dt, num_threads=1)
        X, _ = simulate(s, mvi, walk_inputs(s, q0s, dt, steps), dt)
        trajs.append({q.name: X[:, i] for i, q in enumerate(s.configs)})
    out[f"max_q_diff_after_{steps}_steps"] = float(max(np.max(np.abs(trajs[0][n] - trajs[1][n])) for n in trajs[0]))
    return out
