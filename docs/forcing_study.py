"""The forcing discretizations measured (docs/integrator_study.md, "Forcing discretization"; issue 27).

    .venv/bin/python docs/forcing_study.py [--out out/forcing_study] [--quick]

Prints the numbers that section quotes and writes them to <out>/summary.json:

1. convergence against the continuous dynamics (marionette_control.study.forcing: DOP853 at 1e-12 on the core's
   forward dynamics) of the thesis rule (f- = dt F, f+ = 0, thesis (4.12a)) and the symmetric one
   (f- = f+ = dt F / 2), the orders over dt = 2e-3 … 2.5e-4 and the errors at the package's dt = 0.01;
2. the wave (config/optimize/marionette_arm_wave.yaml, and its keyframes at twice the speed) optimized on the
   nominal arm with each rule: iterations, cost, the error against the desired angles, and how far the optimized
   angles are from what the continuous arm does with the same drive motion (the drives' node values through a
   C2 spline, from the same state at rest);
3. the controller in closed loop (and feed-forward only) on the stand-in (marionette_control.sim.offline_loop,
   profile 'realistic'), the controller's model and trajectory with each rule, the plant with each rule, on the
   realistic plant and the plant family of config/plants/.

Every run is deterministic (the profiles are seeded). --quick skips the twice-as-fast wave and the plant family.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import yaml
from scipy.interpolate import CubicSpline

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from marionette_control.model import FORCING_RULES  # noqa: E402
from marionette_control.model.library import marionette_arm as arm  # noqa: E402
from marionette_control.ocp.spec import parse_spec  # noqa: E402
from marionette_control.ocp.spec_problem import solve_spec  # noqa: E402
from marionette_control.sim.offline_loop import run_loop  # noqa: E402
from marionette_control.sim.profile import HardwareProfile  # noqa: E402
from marionette_control.study import forcing as study  # noqa: E402
from marionette_control.tracking.controller import ControllerOptions  # noqa: E402

SPEC = ROOT / "config" / "optimize" / "marionette_arm_wave.yaml"
PLANTS = ["marionette_arm_plant.yaml"] + [f"plants/{p.name}" for p in sorted((ROOT / "config" / "plants").glob("*.yaml"))]


def say(msg):
    print(f"[forcing_study] {msg}", flush=True)


def convergence() -> dict:
    out = {}
    for name, case in study.forced_cases().items():
        res = study.convergence(case)
        q_ref = case.reference()
        coarse = {rule: [float(np.abs(case.vi_final(rule, dt) - q_ref).max()) for dt in (0.01, 0.005)]
                  for rule in FORCING_RULES}
        out[name] = {rule: {"errors": res[rule]["errors"].tolist(), "order": res[rule]["order"],
                            "errors_at_0.01_0.005": coarse[rule]} for rule in FORCING_RULES}
        say(f"{name}: " + "; ".join(f"{r} order {out[name][r]['order']:.3f}, errors "
                                    + " ".join(f"{e:.2e}" for e in out[name][r]["errors"])
                                    + f", at dt 0.01 / 0.005: {coarse[r][0]:.2e} / {coarse[r][1]:.2e}"
                                    for r in FORCING_RULES))
    return out


def continuous_deviation(model, X: np.ndarray, dt: float) -> dict:
    """max and RMS over the nodes of |q_d(t_k) - X[k, :nd]| (rad), q_d of the continuous arm (DOP853, 1e-12) whose
    kinematic configurations follow the C2 spline through X's (clamped to X's first and last kinematic velocity),
    from X[0] (at rest)."""
    nd, nq = model.nd, model.nq
    t = dt * np.arange(len(X))
    spline = CubicSpline(t, X[:, nd:nq], bc_type=((1, X[0, nq + nd:]), (1, X[-1, nq + nd:])))
    fns = (spline, spline.derivative(1), spline.derivative(2))
    qd0 = np.zeros(nq)
    qd0[nd:] = X[0, nq + nd:]
    err = []
    q, qdot = X[0, :nq], qd0
    for k in range(len(X) - 1):   # node by node, so every node's error is measured
        shifted = tuple(lambda s, f=f, k=k: f(s + k * dt) for f in fns)
        qd, vd = study.continuous_solution(model, q, qdot, dt, None, shifted)
        q, qdot = np.concatenate([qd, spline((k + 1) * dt)]), np.concatenate([vd, fns[1]((k + 1) * dt)])
        err.append(np.abs(qd - X[k + 1, :nd]))
    err = np.array(err)
    return {"max_rad": float(err.max()), "rms_rad": float(np.sqrt(np.mean(err ** 2)))}


def wave_specs(quick: bool) -> dict:
    data = yaml.safe_load(SPEC.read_text())
    data.pop("output")
    specs = {"1x": data}
    if not quick:
        motion = yaml.safe_load((ROOT / "config" / "motions" / "wave.yaml").read_text())
        specs["2x"] = dict(data, motion={"joints": motion["joints"], "angle_unit": "deg", "interpolation": "clamped",
                                         "keyframes": [[t / 2.0] + v for t, *v in motion["keyframes"]]})
    return specs


def optimize(quick: bool) -> tuple[dict, dict]:
    out, trajectories = {}, {}
    for speed, data in wave_specs(quick).items():
        for rule in FORCING_RULES:
            spec = parse_spec(dict(data, model={"name": "marionette_arm", "params": {"forcing": rule}}), str(SPEC))
            res = solve_spec(spec)
            tr, s = res.trajectory, res.summary
            dev = continuous_deviation(res.problem.model, tr.X, tr.dt)
            e = tr.X[:, :2] - res.problem.Xd[:, :2]
            out[f"{speed} {rule}"] = {"iterations": s["iterations"], "cost": s["cost"], "converged": s["converged"],
                                      "rms_vs_desired_deg": np.degrees(np.sqrt(np.mean(e ** 2, axis=0))).tolist(),
                                      "continuous_deviation": dev}
            trajectories[(speed, rule)] = tr
            say(f"wave {speed}, {rule}: {s['iterations']} iterations, cost {s['cost']:.6f}, RMS vs desired "
                f"{np.degrees(np.sqrt(np.mean(e ** 2, axis=0))).round(4).tolist()} deg; continuous arm vs optimized "
                f"angles: max {np.degrees(dev['max_rad']):.4f} deg, RMS {np.degrees(dev['rms_rad']):.4f} deg")
    return out, trajectories


def plant_file(base: str, rule: str, where: Path) -> str:
    """A model file that is ``base`` (in config/) with the forcing ``rule`` (absolute path)."""
    p = where / f"{Path(base).stem}_{rule}.yaml"
    p.write_text(yaml.safe_dump({"name": f"{Path(base).stem}_{rule}", "base": str(ROOT / "config" / base),
                                 "forcing": rule}))
    return str(p)


def track(trajectories: dict, quick: bool, where: Path) -> dict:
    out = {}
    plants = PLANTS[:1] if quick else PLANTS
    for (speed, rule), tr in trajectories.items():
        desc = arm.load_description(forcing=rule)
        for plant in plants:
            for plant_rule in FORCING_RULES:
                if speed != "1x" and plant != PLANTS[0]:
                    continue
                profile = HardwareProfile.named("realistic").replace(
                    plant_model_file=plant_file(plant, plant_rule, where))
                closed = run_loop(tr, profile, ControllerOptions(), desc).summary()
                row = {"closed": closed}
                if plant == PLANTS[0]:
                    row["open"] = run_loop(tr, profile, ControllerOptions(feedback=False), desc).summary()
                key = f"{speed} controller {rule}, plant {Path(plant).stem} {plant_rule}"
                out[key] = row
                say(f"{key}: closed loop RMS " + ", ".join(f"{n} {v['rms_deg']:.4f}" for n, v in closed.items())
                    + (" deg; open loop RMS " + ", ".join(f"{n} {v['rms_deg']:.4f}" for n, v in row["open"].items())
                       if "open" in row else " deg"))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "out" / "forcing_study"))
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    where = Path(args.out)
    where.mkdir(parents=True, exist_ok=True)
    summary = {"convergence": convergence()}
    summary["wave"], trajectories = optimize(args.quick)
    summary["tracking"] = track(trajectories, args.quick, where)
    (where / "summary.json").write_text(json.dumps(summary, indent=1))
    say(f"wrote {where / 'summary.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
