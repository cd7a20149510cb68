"""The 40-configuration humanoid marionette (thesis §5.3, §6.7.3; seed 001 §VIII-B).

The seeds give its size, strings and scenario (22 dynamic and 18 kinematic
configurations, 6 strings, the string inputs +-0.1 sin(0.6 pi t), the LQR weights);
geometry, masses, names and initial pose are those of the thesis's public
reference implementation (trep 1.0.2's ``trep.puppets.Puppet``, the marionette of
the example seed 001 §VIII-B names), so results can be compared number for number
(test/test_trep_crosscheck.py): 22 dynamic configurations (torso 6, hips 3+3,
knees, shoulders 3+3, elbows), 18 kinematic ones (x, y and length of 6
strings), 6 string constraints, damping 0.2 on every dynamic configuration,
gravity (0, 0, -9.8), total mass 18.75 kg. Discrete state 80, input 18.
"""

from __future__ import annotations

import math

import numpy as np

from marionette_control.model import SystemBuilder

DESCRIPTION = (
    "Seed 001's 40-configuration humanoid marionette: a torso with 6 free coordinates, 3-axis hips and shoulders, "
    "knees and elbows (22 dynamic configurations), hanging from 6 strings whose top points (x, y) and lengths are "
    "kinematic (18), damping 0.2; 80 states, 18 inputs."
)

STRINGS = ("left_leg", "right_leg", "left_arm", "right_arm", "upper_torso", "lower_torso")
DAMPING = 0.2
LIMB_MASS = (1.5, (0.3, 0.3, 0.1))
ARM_MASS = (0.5, (0.05, 0.05, 0.01))


def _chain(b: SystemBuilder, parent: str, steps, last_name: str) -> str:
    """Adds a chain of primitive frames; steps are (transform, config or None, value). Returns the last frame."""
    name = parent
    for i, (transform, config, value) in enumerate(steps):
        new = last_name if i == len(steps) - 1 else f"{last_name}_{transform}"
        b.frame(new, name, transform, config=config, value=value)
        name = new
    return name


def _limb(b: SystemBuilder, parent: str, s: str, names: tuple, offset_x: float, upper: tuple, lower: tuple,
          mass: tuple, end: tuple, string: str, hook_on_upper: bool) -> None:
    """A 3-axis joint, an upper link, a 1-axis joint about x, a lower link and a fixed end frame.

    names = (joint, upper link, hinge, lower link, end); upper/lower = (mass offset, link end) along z;
    end = (transform, value) of the end frame; the string hook sits 0.1 m along y of the upper or
    lower link's end.
    """
    joint, up, hinge, low, tip = names
    b.frame(f"{s}{joint}", parent, "tx", value=offset_x)
    _chain(b, f"{s}{joint}", [(ax, f"{s}{joint}_{ax}", 0.0) for ax in ("rz", "ry", "rx")], f"{s}{up}")
    b.frame(f"{s}{up}_mass", f"{s}{up}", "tz", value=upper[0], mass=mass[0], inertia=mass[1])
    b.frame(f"{s}{up}_end", f"{s}{up}", "tz", value=upper[1])
    b.frame(f"{s}{low}", f"{s}{up}_end", "rx", config=f"{s}{hinge}_rx")
    b.frame(f"{s}{low}_mass", f"{s}{low}", "tz", value=lower[0], mass=mass[0], inertia=mass[1])
    b.frame(f"{s}{low}_end", f"{s}{low}", "tz", value=lower[1])
    _chain(b, f"{s}{low}_end", [("rz", None, 0.0), ("ry", None, 0.0), ("rx", None, 0.0)], f"{s}{tip}")
    b.frame(f"{s}{tip}_end", f"{s}{tip}", end[0], value=end[1])
    hook_parent = f"{s}{up}_end" if hook_on_upper else f"{s}{low}_end"
    b.const_frame(f"{string}_string_hook", hook_parent, translation=(0.0, 0.1, 0.0))


LEG = ("hip", "femur", "knee", "tibia", "foot")
ARM = ("shoulder", "humerus", "elbow", "radius", "hand")


def humanoid_marionette(damping: float = DAMPING, gravity: float = 9.8):
    """Builds the model (module docstring)."""
    b = SystemBuilder("humanoid_marionette", gravity=(0.0, 0.0, -gravity), forcing="thesis")
    _chain(b, "world", [("tx", "torso_tx", 0.0), ("ty", "torso_ty", 0.0), ("tz", "torso_tz", 0.0),
                        ("rz", "torso_rz", 0.0), ("ry", "torso_ry", 0.0), ("rx", "torso_rx", 0.0)], "pelvis")
    b.mass("pelvis", 10.0, (1.0, 1.0, 1.0))
    _limb(b, "pelvis", "l", LEG, -0.10000000633343277, (-0.2000000071819642, -0.4000000143639284),
          (-0.20000000406340365, -0.4000000081268073), LIMB_MASS, ("ty", 0.20298699715253277), "left_leg", True)
    _limb(b, "pelvis", "r", LEG, 0.10000000072551045, (-0.20000000746930935, -0.4000000149386187),
          (-0.20000000524335476, -0.40000001048670952), LIMB_MASS, ("ty", 0.20000000361419676), "right_leg", True)
    b.frame("spine_top", "pelvis", "tz", value=0.49134332092915983)
    b.frame("neck", "spine_top", "tz", value=0.04500002226970809)
    _chain(b, "neck", [("rz", None, 0.0), ("ry", None, 0.0), ("rx", None, 0.0), ("tz", None, 0.044999991144167348)],
           "head")
    b.frame("head_center", "head", "tz", value=0.090000011865579349, mass=0.75, inertia=(0.08, 0.08, 0.08))
    b.frame("head_end", "head_center", "tz", value=0.079999981957211988)
    _limb(b, "spine_top", "l", ARM, -0.15811387592769632, (-0.12499999805011695, -0.24999999610023391),
          (-0.12882950452903394, -0.25765900905806788), ARM_MASS, ("tz", -0.090000006491074078), "left_arm", False)
    _limb(b, "spine_top", "r", ARM, 0.15811388178161004, (-0.12500000646915005, -0.2500000129383001),
          (-0.12882950288909756, -0.25765900577819512), ARM_MASS, ("tz", -0.089999998759819969), "right_arm", False)
    b.const_frame("upper_torso_string_hook", "spine_top", translation=(-0.1, 0.0, 0.0))
    b.const_frame("lower_torso_string_hook", "spine_top", translation=(0.1, 0.0, 0.0))
    b.frame("string_plane", "world", "tz", value=2.0)
    for s in STRINGS:
        b.config(f"{s}_string-x", kinematic=True)
        b.config(f"{s}_string-y", kinematic=True)
        b.config(f"{s}_string-length", kinematic=True)
        b.frame(f"{s}_string_x", "string_plane", "tx", config=f"{s}_string-x")
        b.frame(f"{s}_string_control", f"{s}_string_x", "ty", config=f"{s}_string-y")
        b.distance_constraint(f"{s}_string_hook", f"{s}_string_control", f"{s}_string-length", name=f"{s}_string")
    model_configs_dynamic = [
        "torso_tx", "torso_ty", "torso_tz", "torso_rz", "torso_ry", "torso_rx",
        "lhip_rz", "lhip_ry", "lhip_rx", "lknee_rx", "rhip_rz", "rhip_ry", "rhip_rx", "rknee_rx",
        "lshoulder_rz", "lshoulder_ry", "lshoulder_rx", "lelbow_rx",
        "rshoulder_rz", "rshoulder_ry", "rshoulder_rx", "relbow_rx",
    ]
    if damping:
        b.damping(model_configs_dynamic, damping)
    return b.build()


def initial_configuration(model) -> np.ndarray:
    """The reference implementation's initial pose (seed 001 §VIII-B scenario), each string's control point straight
    above its hook, h(q0) = 0."""
    q = np.zeros(model.nq)
    idx = model.config_index
    q[idx("torso_rx")] = -0.05
    q[idx("lelbow_rx")] = q[idx("relbow_rx")] = 1.57
    q[idx("lhip_rx")] = q[idx("rhip_rx")] = math.pi / 2 - 0.6
    q[idx("lknee_rx")] = q[idx("rknee_rx")] = -math.pi / 2 + 0.6
    g = model.placements(q)
    plane_z = g[model.frame_index("string_plane"), 2, 3]
    for s in STRINGS:
        hook = g[model.frame_index(f"{s}_string_hook"), :3, 3]
        q[idx(f"{s}_string-x")] = hook[0]
        q[idx(f"{s}_string-y")] = hook[1]
        q[idx(f"{s}_string-length")] = plane_z - hook[2]
    return q


def string_walk_inputs(model, q0: np.ndarray, dt: float, steps: int) -> np.ndarray:
    """Seed 001's walking inputs U (steps, nU): rho_{k+1} from the time t_k = k dt at the start of step k.

    Every kinematic configuration keeps its initial value except the leg and arm string lengths,
    which oscillate by +-0.1 sin(0.6 pi t) (left leg -, right leg +, left arm +, right arm -).
    """
    nd = model.nd
    rho0 = np.asarray(q0, dtype=float)[nd:]
    kin = model.config_names[nd:]
    t = dt * np.arange(steps)
    U = np.tile(rho0, (steps, 1))
    wave = 0.1 * np.sin(0.6 * math.pi * t)
    for name, sign in (("left_leg", -1.0), ("right_leg", 1.0), ("left_arm", 1.0), ("right_arm", -1.0)):
        U[:, kin.index(f"{name}_string-length")] += sign * wave
    return np.hstack([np.zeros((steps, model.nu)), U])
