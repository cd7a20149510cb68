"""Reproductions of the seeds' optimization and stabilization results (docs/reproductions.md).

    .venv/bin/python docs/reproduce.py swing-up        # seed 001 §VIII-A, Fig. 3 (about 10 s)
    .venv/bin/python docs/reproduce.py stabilization   # seed 001 §VIII-B, Figs. 6-7 (about 15 s)
    .venv/bin/python docs/reproduce.py tracking [--steps 1000]   # thesis §6.7.3.1 (about 30 s)
    .venv/bin/python docs/reproduce.py wave            # thesis §6.7.2 with and without constraints (about 10 s)
    .venv/bin/python docs/reproduce.py all

Each writes PNG figures to docs/img/ and a JSON summary to out/reproductions/<name>.json
(--img-dir, --out-dir to change) and prints the numbers quoted in docs/reproductions.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from marionette_control.cli.demo import seed_gains, seed_walk  # noqa: E402
from marionette_control.ocp.optimizer import solve  # noqa: E402
from marionette_control.ocp.projection import OptimizerOptions  # noqa: E402
from marionette_control.ocp.spec import parse_spec  # noqa: E402
from marionette_control.ocp.spec_problem import solve_spec  # noqa: E402
from benchmarks.optimizer import humanoid_tracking_problem, iteration_seconds, swing_up_problem  # noqa: E402


def say(msg):
    print(f"[reproduce] {msg}", flush=True)


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# ------------------------------------------------------------------ seed 001 §VIII-A


def swing_up(img: Path) -> dict:
    runs, out = {}, {}
    for method in ("newton", "steepest"):
        problem, X0, U0 = swing_up_problem(OptimizerOptions(schedule=(("quasi_newton", 4), (method, None)),
                                                            max_iterations=3000))
        res = solve(problem, X0, U0)
        r = res.result
        runs[method] = r
        out[method] = {"converged": r.converged, "steps": r.steps, "steps_after_quasi_newton": r.steps - 4,
                       "direction_evaluations": r.iterations, "cost": r.cost, "seconds": res.solve_time,
                       "final_descent_norm": r.history[-1].descent_norm,
                       "fallbacks_to_quasi_newton": sum(1 for h in r.history if h.requested != h.method)}
        say(f"swing-up, 4 quasi-Newton then {method}: {out[method]}")
    a, b = runs["newton"], runs["steepest"]
    out["max_state_difference"] = float(np.abs(a.X - b.X).max())
    plt = pyplot()
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.3))
    for name, r in runs.items():
        ax[0].loglog(1 + np.arange(r.iterations), [h.descent_norm for h in r.history],
                     ".-" if name == "newton" else "-", label=f"4 quasi-Newton, then {name} ({r.steps} steps)")
    ax[0].axhline(1e-6, color="k", ls=":", lw=1)
    ax[0].set_xlabel("iteration + 1")
    ax[0].set_ylabel("|Dh(ξ)∘δξ|")
    ax[0].set_title("Convergence (seed 001 Fig. 3: 14 and 653 iterations)")
    ax[0].legend()
    t = problem.t
    ax[1].step(t, problem.Xd[:, 0], "k--", where="post", label="infeasible reference")
    ax[1].plot(t, a.X[:, 0], label="optimized (Newton)")
    ax[1].plot(t, b.X[:, 0], ":", label="optimized (steepest)")
    ax[1].plot(t[:-1], a.U[:, 0] / 10, label="torque / 10")
    ax[1].set_xlabel("t [s]")
    ax[1].set_ylabel("θ [rad]")
    ax[1].set_title(f"Swing-up, cost {a.cost:.4f}")
    ax[1].legend()
    fig.tight_layout()
    fig.savefig(img / "swing_up_convergence.png", dpi=100)
    plt.close(fig)
    return out


# ------------------------------------------------------------------ seed 001 §VIII-B


def stabilization(img: Path) -> dict:
    """Discrete LQR (Q = diag(100 on the 40 configurations, 1 elsewhere), R = I) along the
    10 s string walk; 0.1 rad on a torso rotation at t = 0; closed loop vs open loop."""
    dt, steps = 0.01, 1000
    m, ds, q0, x0, U = seed_walk(dt, steps)
    X, _ = ds.simulate(x0, U)
    A, B = ds.linearize_trajectory(X, U)
    t0 = time.perf_counter()
    K = seed_gains(m, A, B)
    t_lqr = time.perf_counter() - t0
    nd = m.nd
    out = {"lqr_seconds": t_lqr, "cases": {}}
    traj = {}
    for config in ("torso_rz", "torso_ry", "torso_rx"):
        i = m.config_index(config)
        xp = x0.copy()
        xp[i] += 0.1  # the seed's perturbation of the initial condition; the strings re-tension in step 1
        Xo, _ = ds.simulate(xp, U)
        Xc, _ = ds.project(xp, X, U, K)  # closed loop u = U - K (x - X)
        eo = np.linalg.norm(Xo[:, :nd] - X[:, :nd], axis=1)
        ec = np.linalg.norm(Xc[:, :nd] - X[:, :nd], axis=1)
        late = slice(steps // 2, None)
        out["cases"][config] = {
            "integrated_error_open": float(eo.sum() * dt), "integrated_error_closed": float(ec.sum() * dt),
            "mean_error_second_half_open": float(eo[late].mean()), "mean_error_second_half_closed": float(ec[late].mean()),
            "ratio_second_half": float(eo[late].mean() / ec[late].mean()),
            "final_error_open": float(eo[-1]), "final_error_closed": float(ec[-1]),
            "perturbed_config_final_open": float(Xo[-1, i] - X[-1, i]),
            "perturbed_config_final_closed": float(Xc[-1, i] - X[-1, i])}
        traj[config] = (eo, ec, Xo[:, i], Xc[:, i], X[:, i])
        say(f"stabilization, +0.1 rad on {config}: {out['cases'][config]}")
    plt = pyplot()
    t = dt * np.arange(steps + 1)
    fig, ax = plt.subplots(1, 3, figsize=(17, 4.5))
    for config, ls in (("torso_rz", "-"), ("torso_rx", ":")):
        eo, ec = traj[config][:2]
        ax[0].semilogy(t, eo, "C0" + ls, label=f"open loop, {config}")
        ax[0].semilogy(t, ec, "C1" + ls, label=f"closed loop, {config}")
    ax[0].set_xlabel("t [s]")
    ax[0].set_ylabel("|q_dyn − q_dyn,d|")
    ax[0].set_title("Error norm after a 0.1 rad torso perturbation (Fig. 6)")
    ax[0].legend(fontsize=8)
    for j, config in enumerate(("torso_rz", "torso_rx")):
        _, _, xo, xc, xn = traj[config]
        ax[j + 1].plot(t, xn, "k--", label="nominal walk")
        ax[j + 1].plot(t, xo, label="open loop")
        ax[j + 1].plot(t, xc, label="closed loop (discrete LQR)")
        ax[j + 1].set_xlabel("t [s]")
        ax[j + 1].set_ylabel(f"{config} [rad]")
        ax[j + 1].set_title(f"{config} ({'rotation about the vertical axis, Fig. 7' if config == 'torso_rz' else 'pitch'})")
        ax[j + 1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(img / "humanoid_stabilization.png", dpi=100)
    plt.close(fig)
    return out


# ------------------------------------------------------------------ thesis §6.7.3.1


def tracking(img: Path, steps: int) -> dict:
    """Desired = configurations of the simulated walk (momenta, velocities, inputs zero);
    weights of trep's puppet-optimization example; start = strings held still."""
    problem, X0, U0 = humanoid_tracking_problem(steps, OptimizerOptions(max_iterations=60))
    ds, Xd, m = problem.system, problem.Xd, problem.model
    res = solve(problem, X0, U0, callback=lambda h: say(
        f"  iteration {h.iteration}: {h.method} (requested {h.requested}) cost {h.cost:.6f} |Dh∘ζ| "
        f"{h.descent_norm:.2e} λ {h.step_length:.3g} at {h.elapsed:.2f} s"))
    r, total = res.result, res.solve_time
    per = iteration_seconds(r.history)
    qn = [s for h, s in per if h.requested == h.method == "quasi_newton" and h.step_length > 0]
    nw = [s for h, s in per if h.method == "newton" and h.step_length > 0]
    fb = [s for h, s in per if h.requested == "newton" and h.method == "quasi_newton"]
    q_idx = [m.config_index(c) for c in m.config_names[:m.nd]]
    err_start = np.sqrt(np.mean((X0[:, q_idx] - Xd[:, q_idx]) ** 2))
    err_final = np.sqrt(np.mean((r.X[:, q_idx] - Xd[:, q_idx]) ** 2))
    out = {"N": steps, "dt": ds.dt, "reason": r.reason, "converged": r.converged, "steps": r.steps,
           "direction_evaluations": r.iterations, "start_cost": res.initial_cost, "cost": r.cost,
           "final_descent_norm": r.history[-1].descent_norm, "seconds": total,
           "methods": [h.method for h in r.history], "requested": [h.requested for h in r.history],
           "seconds_per_quasi_newton_iteration": float(np.mean(qn)) if qn else None,
           "seconds_per_newton_iteration": float(np.mean(nw)) if nw else None,
           "seconds_per_newton_fallback_iteration": float(np.mean(fb)) if fb else None,
           "rms_dynamic_configuration_error_start": float(err_start),
           "rms_dynamic_configuration_error_final": float(err_final)}
    say(f"tracking: {({k: v for k, v in out.items() if k not in ('methods', 'requested')})}")
    plt = pyplot()
    fig, ax = plt.subplots(1, 3, figsize=(17, 4.5))
    its = np.arange(len(r.history))
    ax[0].semilogy(its, [h.cost - r.cost + 1e-9 for h in r.history], "o-", label="h(ξ_i) − h(ξ*) + 1e-9")
    ax[0].semilogy(its, [h.descent_norm for h in r.history], "s--", label="|Dh∘δξ|")
    for h in r.history:
        ax[0].annotate("N" if h.method == "newton" else "q", (h.iteration, h.descent_norm), fontsize=8)
    ax[0].set_xlabel("iteration (q = quasi-Newton, N = Newton)")
    ax[0].set_title(f"Convergence, N = {steps} (thesis Fig. 6.13)")
    ax[0].legend()
    tt = ds.dt * np.arange(steps + 1)
    for c, col in (("lknee_rx", "C0"), ("rhip_rx", "C1"), ("torso_rx", "C2")):
        i = m.config_index(c)
        ax[1].plot(tt, Xd[:, i], col + "--", lw=1)
        ax[1].plot(tt, r.X[:, i], col, label=c)
    ax[1].set_xlabel("t [s]")
    ax[1].set_ylabel("rad (dashed: desired)")
    ax[1].set_title("Tracked configurations")
    ax[1].legend()
    for c in ("left_leg_string-length", "right_leg_string-length", "left_arm_string-length",
              "right_arm_string-length"):
        i = m.config_index(c)
        ax[2].plot(tt, r.X[:, i], label=c.replace("_string-length", ""))
    ax[2].set_xlabel("t [s]")
    ax[2].set_ylabel("string length [m]")
    ax[2].set_title("Optimized string lengths (synthesized)")
    ax[2].legend()
    fig.tight_layout()
    fig.savefig(img / "humanoid_tracking.png", dpi=100)
    plt.close(fig)
    return out


# ------------------------------------------------------------------ thesis §6.7.2 with the drives' limits


def wave(img: Path) -> dict:
    """The wave spec with and without its model file's limits (the hardware's alone: no reserve for the feedback,
    docs/margins.md), at the animated speed and at twice it (there also with the string tension alone): angles,
    inputs, drive accelerations and string tension side by side."""
    import math

    from marionette_control.cli.plot import drive_motion, string_tensions

    import yaml

    spec_path = ROOT / "config" / "optimize" / "marionette_arm_wave.yaml"
    wave_motion = yaml.safe_load((ROOT / "config" / "motions" / "wave.yaml").read_text())
    data = yaml.safe_load(spec_path.read_text())
    data.pop("output")
    fast = dict(data, motion={"joints": wave_motion["joints"], "angle_unit": "deg", "interpolation": "clamped",
                              "keyframes": [[t / 2.0] + v for t, *v in wave_motion["keyframes"]]})
    runs, out = {}, {}
    hardware = {"margins": {"range": 0.0, "speed": 0.0, "acceleration": 0.0}, "tension_reserve": 0.0}
    variants = {"unconstrained": {"enabled": False}, "constrained": dict(hardware, enabled=True),
                "tension only": dict(hardware, families=["tension"])}   # the model file's limits, no reserve
    for speed, base in (("1x", data), ("2x", fast)):
        for label in variants if speed == "2x" else ("unconstrained", "constrained"):
            spec = parse_spec(dict(base, constraints=variants[label]), str(spec_path))
            t = time.perf_counter()
            res = solve_spec(spec)
            wall = time.perf_counter() - t
            tr = res.trajectory
            motion = drive_motion(tr)
            tension = string_tensions(tr, res.problem.model)["string"]
            key = f"{speed} {label}"
            runs[key] = (tr, motion, tension, res)
            s = res.summary
            out[key] = {"iterations": s["iterations"], "cost": s["cost"], "optimization_s": s["optimization_elapsed"],
                        "wall_s": wall, "converged": s["converged"],
                        "rms_deg": {k: math.degrees(e["rms"]) for k, e in s["tracking_errors"].items()},
                        "max_abs_acceleration": {k: float(np.abs(a).max()) for k, (_, a) in motion.items()},
                        "first_step_acceleration": {k: float(a[0]) for k, (_, a) in motion.items()},
                        "max_abs_speed": {k: float(np.abs(v).max()) for k, (v, _) in motion.items()},
                        "input_range": s["input_ranges"], "min_tension": float(tension.min()),
                        "constraints_satisfied": s["constraints_satisfied"],
                        "active": sorted(r["label"] for r in tr.info["constraints"]["margins"] if r["active_steps"])}
            say(f"{key}: {s['iterations']} iterations, {s['optimization_elapsed']:.2f} s, cost {s['cost']:.6f}, RMS "
                f"{out[key]['rms_deg']} deg, max |a| {out[key]['max_abs_acceleration']}, first-step a "
                f"{out[key]['first_step_acceleration']}, min tension {tension.min():.3f} N, active {out[key]['active']}")
    plt = pyplot()
    fig, axes = plt.subplots(5, 2, figsize=(13, 14), sharex="col")
    colors = {"unconstrained": "C3", "constrained": "C0", "tension only": "C2"}
    lim = runs["1x constrained"][3].problem.limits
    for col, speed in enumerate(("1x", "2x")):
        tr0 = runs[f"{speed} constrained"][0]
        Qd = np.asarray(tr0.info["desired"]["q"])
        t = tr0.t
        for j, name in enumerate(("shoulder", "elbow")):
            axes[0, col].plot(t, np.degrees(Qd[:, j]), "k--", lw=1, label="desired" if j == 0 else None)
        for label, c in colors.items():
            if f"{speed} {label}" not in runs:
                continue
            tr, motion, tension, res = runs[f"{speed} {label}"]
            for j, ls in ((0, "-"), (1, ":")):
                axes[0, col].plot(t, np.degrees(tr.X[:, j]), c, ls=ls, lw=1,
                                  label=f"{label} ({'shoulder' if j == 0 else 'elbow'})")
            axes[1, col].plot(t[1:], tr.U[:, 0], c, lw=1, label=f"carriage, {label}")
            axes[1, col].plot(t[1:], tr.U[:, 1], c, ls=":", lw=1, label=f"string length, {label}")
            axes[2, col].plot(t[:-1], motion["carriage"][1], c, lw=1, label=label)
            axes[3, col].plot(t[:-1], motion["string_length"][1], c, lw=1, label=label)
            axes[4, col].plot(t[:-1], tension, c, lw=1, label=label)
        for v in (lim.lower[1], lim.upper[1], lim.upper[0]):
            axes[1, col].axhline(v, color="r", ls=":", lw=0.8)
        for row, i in ((2, 0), (3, 1)):
            for v in (-lim.max_acceleration[i], lim.max_acceleration[i]):
                axes[row, col].axhline(v, color="r", ls=":", lw=0.8)
        axes[4, col].axhline(lim.min_tension[0], color="r", ls=":", lw=0.8)
        axes[4, col].axhline(0.0, color="k", lw=0.6)
        axes[0, col].set_title(f"wave at {speed} speed: " + "; ".join(
            f"{label} {out[f'{speed} {label}']['iterations']} it, {out[f'{speed} {label}']['optimization_s']:.2f} s"
            for label in colors if f"{speed} {label}" in out), fontsize=9)
        axes[-1, col].set_xlabel("t [s]")
    for row, lab in enumerate(("angle [deg]", "inputs [m]", "carriage accel. [m/s²]", "string accel. [m/s²]",
                               "string tension [N]")):
        axes[row, 0].set_ylabel(lab)
        for col in (0, 1):
            axes[row, col].grid(True, alpha=0.3)
    axes[0, 0].legend(fontsize=7, ncol=2)
    axes[2, 0].legend(fontsize=7)
    axes[2, 1].legend(fontsize=7)
    axes[1, 0].legend(fontsize=6, ncol=2)
    for col in (0, 1):
        axes[2, col].set_ylim(-4 * lim.max_acceleration[0], 4 * lim.max_acceleration[0])
        axes[3, col].set_ylim(-4 * lim.max_acceleration[1], 4 * lim.max_acceleration[1])
    fig.suptitle("Marionette arm wave with and without the drives' and string's limits (red dotted: limits)")
    fig.tight_layout()
    fig.savefig(img / "wave_constraints.png", dpi=90)
    plt.close(fig)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["swing-up", "stabilization", "tracking", "wave", "all"])
    ap.add_argument("--steps", type=int, default=1000, help="tracking horizon N (default 1000 = the thesis's 10 s)")
    ap.add_argument("--img-dir", type=Path, default=ROOT / "docs" / "img")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "out" / "reproductions")
    a = ap.parse_args(argv)
    a.img_dir.mkdir(parents=True, exist_ok=True)
    a.out_dir.mkdir(parents=True, exist_ok=True)
    jobs = {"swing-up": lambda: swing_up(a.img_dir), "stabilization": lambda: stabilization(a.img_dir),
            "tracking": lambda: tracking(a.img_dir, a.steps), "wave": lambda: wave(a.img_dir)}
    for name in (jobs if a.what == "all" else [a.what]):
        res = jobs[name]()
        (a.out_dir / f"{name}.json").write_text(json.dumps(res, indent=1, default=float))
        say(f"wrote {a.out_dir / (name + '.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
