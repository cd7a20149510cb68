"""Writes test/data/trep_humanoid_reference.npz: independent cross-check data computed with trep 1.0.2.

    .venv-peer-trep/bin/python benchmarks/peers/make_trep_reference.py [--out FILE] [--steps N]

(benchmarks/peers/install_trep.sh sets up .venv-peer-trep.) test/test_trep_crosscheck.py
compares marionette_control's core with this file; it does not need trep.

Contents (arrays in trep's order, with their names in marionette_control's spelling
so the test maps them by name; trep orders the kinematic configurations x, y of
every string, then the lengths, ours x, y, length string by string):

humanoid (seed 001 §VIII-B, marionette_control.model.library.humanoid_marionette; hand-built model,
checked against trep.puppets.Puppet, the result stored in meta):
  h_state_names (80), h_input_names (18), h_q0 (40) the initial pose,
  h_U (N, 18) inputs rho_{k+1} = rho(t_k), t_k = k dt (string_walk_inputs' formula),
  h_X (N+1, 80) the trajectory in DSystem's layout [Q; p; v] from q_{-1} = q_0 = pose,
  h_lin_steps (3,), h_A (3, 80, 80), h_B (3, 80, 18): DSystem.fdx / fdu at those steps,
  h_so_steps (2,), h_so_z (2, 80): fixed random covectors; h_so_xx (2, 80, 80), h_so_xu (2, 80, 18),
  h_so_uu (2, 18, 18): DSystem.fdxdx(z), fdxdu(z), fdudu(z) at those steps (z^T D2f);
pendulum (seed 001 §II-A: m = l = 1, g = 9.8, x = [0.2, 0.5], u = 0.8, dt = 0.1):
  p_x, p_u, p_q2, p_p2, p_A (2, 2), p_B (2, 1), p_H (2, 3, 3): for each output (q2, p2)
  its Hessian over (q1, p1, u1);
meta: JSON text (versions, tolerances, the model check, what produced the file).

Newton tolerances are tightened from trep's defaults (1e-10) to TOL for the DEL's
2-norm and for every constraint |h_i|, so the stored values are converged well
below the tests' tolerances.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

import numpy as np
import trep
import trep.discopt as discopt

import trep_humanoid as th

ROOT = Path(__file__).resolve().parent.parent.parent
TOL = 1e-13


def tight_mvi(system, tolerance=TOL):
    for c in system.constraints:
        c.tolerance = tolerance
    return trep.MidpointVI(system, tolerance=tolerance, num_threads=1)


def humanoid(steps: int, lin_steps, so_steps):
    system = th.build_model()
    q0 = th.set_initial_pose(system)
    U = th.walk_inputs(system, q0, th.DT, steps)
    mvi = tight_mvi(system)
    mvi.initialize_from_configs(-th.DT, q0, 0.0, q0)
    X, iters = th.simulate(system, mvi, U, th.DT)
    dsys = discopt.DSystem(tight_mvi(system), th.DT * np.arange(steps + 1))
    A, B = [], []
    for k in lin_steps:
        dsys.set(X[k], U[k], k)
        assert np.allclose(dsys.f(), X[k + 1], rtol=0, atol=1e-12), "re-solved step differs from the trajectory"
        A.append(dsys.fdx())
        B.append(dsys.fdu())
    Z = np.random.default_rng(20240601).standard_normal((len(so_steps), dsys.nX))
    xx, xu, uu = [], [], []
    for z, k in zip(Z, so_steps):
        dsys.set(X[k], U[k], k)
        xx.append(dsys.fdxdx(z))
        xu.append(dsys.fdxdu(z))
        uu.append(dsys.fdudu(z))
    out = {
        "h_state_names": np.array(th.state_names(system)), "h_input_names": np.array(th.input_names(system)),
        "h_q0": q0, "h_U": U, "h_X": X, "h_iterations": iters,
        "h_lin_steps": np.array(lin_steps), "h_A": np.array(A), "h_B": np.array(B),
        "h_so_steps": np.array(so_steps), "h_so_z": Z,
        "h_so_xx": np.array(xx), "h_so_xu": np.array(xu), "h_so_uu": np.array(uu),
    }
    return out


def pendulum():
    m, l, g = 1.0, 1.0, 9.8
    x, u, dt = np.array([0.2, 0.5]), np.array([0.8]), 0.1
    system = trep.System()
    system.import_frames([trep.rx("theta", name="pendulum"), [trep.tz(-l, name="bob", mass=m)]])
    trep.potentials.Gravity(system, (0, 0, -g))
    trep.forces.ConfigForce(system, "theta", "torque")
    dsys = discopt.DSystem(tight_mvi(system, 1e-14), np.array([0.0, dt]))
    dsys.set(x, u, 0)
    H = []
    for i in range(2):
        e = np.eye(2)[i]
        H.append(np.block([[dsys.fdxdx(e), dsys.fdxdu(e)], [dsys.fdxdu(e).T, dsys.fdudu(e)]]))
    xn = dsys.f()
    return {"p_x": x, "p_u": u, "p_dt": np.array(dt), "p_q2": np.array(xn[0]), "p_p2": np.array(xn[1]),
            "p_A": dsys.fdx(), "p_B": dsys.fdu(), "p_H": np.array(H)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "test" / "data" / "trep_humanoid_reference.npz")
    ap.add_argument("--steps", type=int, default=120)
    a = ap.parse_args()
    lin_steps, so_steps = [0, 50, a.steps - 1], [0, 60]
    data = humanoid(a.steps, lin_steps, so_steps)
    data.update(pendulum())
    meta = {
        "producer": "benchmarks/peers/make_trep_reference.py",
        "trep": trep.__version__, "python": platform.python_version(), "numpy": np.__version__,
        "peer_patch": "benchmarks/peers/patch_trep.py (Python 3 port of the PyPI sdist; numerics untouched)",
        "newton_tolerance": TOL, "constraint_tolerance": TOL, "pendulum_tolerance": 1e-14,
        "dt": th.DT, "steps": a.steps, "trep_num_threads": 1,
        "time_convention": "state at t=0 from q_{-1}=q_0=pose; step k: t_k=k dt -> t_{k+1}, rho_{k+1}=rho(t_k)",
        "model_check_vs_trep_puppets": th.puppet_check(),
    }
    data["meta"] = np.array(json.dumps(meta))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(a.out, **data)
    print(f"wrote {a.out} ({os.path.getsize(a.out) / 1024:.0f} kB)", file=sys.stderr)
    print(json.dumps(meta, indent=1))


if __name__ == "__main__":
    main()
