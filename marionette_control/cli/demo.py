"""Seed 001 §VIII-B on the humanoid marionette, without ROS: its string walk stabilized by time-varying LQR.

A demonstration of the core on an 80-state system in a few seconds (the arm's whole loop across ROS
processes is the main job, ``python -m marionette_control.cli.main_job``); its walk and gains
(``seed_walk``, ``seed_gains``) are also those of docs/reproductions.md §3 (``docs/reproduce.py
stabilization``). Simulates the string-driven walk with the midpoint VI, linearizes the
discrete dynamics along it (exact A(k), B(k)), computes time-varying discrete
LQR gains (Q = diag(100 on the 40 configurations, 1 on momenta and kinematic
velocities), R = I), and compares the closed-loop and open-loop errors from a
start whose torso orientation about the vertical (torso_rz, seed 001: "the
vertical orientation of the torso") is perturbed by 0.1 rad: the open-loop
error persists (nothing restores a yaw), the closed loop converges. Writes a
PNG and a JSON summary.

    python -m marionette_control.cli.demo [--steps 1000] [--dt 0.01] [--perturbation 0.1] [--config torso_rz]
                                          [--out out/demo]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from marionette_control import _core
from marionette_control.model import library
from marionette_control.lq.riccati import tv_lqr
from marionette_control.model.library import humanoid_marionette as hm


def say(msg: str) -> None:
    print(f"[demo] {msg}", flush=True)


def consistent_perturbation(model, q0: np.ndarray, config: str, delta: float) -> np.ndarray:
    """q0 with `config` moved by delta and every string length re-set so h(q) = 0 (strings stay taut)."""
    q = q0.copy()
    q[model.config_index(config)] += delta
    g = model.placements(q)
    for s in hm.STRINGS:
        hook = g[model.frame_index(f"{s}_string_hook"), :3, 3]
        ctrl = g[model.frame_index(f"{s}_string_control"), :3, 3]
        q[model.config_index(f"{s}_string-length")] = np.linalg.norm(hook - ctrl)
    return q


def seed_walk(dt: float = 0.01, steps: int = 1000):
    """Seed 001 §VIII-B's string walk: (model, system, q0 (nq,), x0 (nx,), U (steps, nU))."""
    model = library.get("humanoid_marionette")
    system = _core.DiscreteSystem(model, dt)
    q0 = hm.initial_configuration(model)
    return model, system, q0, system.state_from_configs(q0, q0), hm.string_walk_inputs(model, q0, dt, steps)


def seed_gains(model, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Seed 001 §VIII-B's time-varying LQR gains (N, nU, nx): Q = diag(100 on the configurations,
    1 on momenta and kinematic velocities) = Q_f, R = I."""
    Q = np.diag(np.r_[np.full(model.nq, 100.0), np.ones(model.nd + model.nk)])
    return tv_lqr(A, B, Q, np.eye(model.nU), Q, full_P=False).K


def run(steps: int, dt: float, perturbation: float, out: Path, config: str = "torso_rz") -> dict:
    model, system, q0, x0, U = seed_walk(dt, steps)
    say(f"model {model.name}: {model.nd} dynamic + {model.nk} kinematic configurations, {model.nc} strings, "
        f"state {model.nx}, input {model.nU}")

    t = time.perf_counter()
    X, iterations = system.simulate(x0, U)
    t_sim = time.perf_counter() - t
    h_max = max(np.abs(model.constraints(X[k, :model.nq])[0]).max() for k in range(steps + 1))
    say(f"simulated the walk: {steps} steps of {dt} s in {t_sim:.3f} s ({1e3 * t_sim / steps:.3f} ms/step, "
        f"mean {iterations.mean():.2f} Newton iterations), max |h| = {h_max:.1e}")

    t = time.perf_counter()
    A, B = system.linearize_trajectory(X, U)
    t_lin = time.perf_counter() - t
    say(f"linearized along it: A {A.shape}, B {B.shape} in {t_lin:.3f} s ({1e3 * t_lin / steps:.3f} ms/step)")

    t = time.perf_counter()
    K = seed_gains(model, A, B)
    t_lqr = time.perf_counter() - t
    say(f"time-varying discrete LQR: gains {K.shape} in {t_lqr:.3f} s")

    qp = consistent_perturbation(model, q0, config, perturbation)
    xp = system.state_from_configs(qp, qp)
    X_open, _ = system.simulate(xp, U)
    X_closed, _ = system.project(xp, X, U, K)  # u = U - K (x - X): the closed loop
    nd = model.nd
    err_open = np.linalg.norm(X_open[:, :nd] - X[:, :nd], axis=1)
    err_closed = np.linalg.norm(X_closed[:, :nd] - X[:, :nd], axis=1)
    tail = slice(steps // 2, None)
    summary = {
        "model": model.name, "model_hash": model.hash, "steps": steps, "dt": dt,
        "perturbation": {"config": config, "value": perturbation},
        "simulate_ms_per_step": 1e3 * t_sim / steps, "linearize_ms_per_step": 1e3 * t_lin / steps,
        "lqr_s": t_lqr, "max_constraint_residual": float(h_max),
        "open_loop_error": {"max": float(err_open.max()), "final": float(err_open[-1]),
                            "mean_second_half": float(err_open[tail].mean())},
        "closed_loop_error": {"max": float(err_closed.max()), "final": float(err_closed[-1]),
                              "mean_second_half": float(err_closed[tail].mean())},
    }
    summary["error_ratio_second_half"] = summary["open_loop_error"]["mean_second_half"] / max(
        summary["closed_loop_error"]["mean_second_half"], 1e-300)
    out.mkdir(parents=True, exist_ok=True)
    png = out / "humanoid_lqr.png"
    plot(model, X, X_open, X_closed, err_open, err_closed, dt, png, config)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    say(f"dynamic-configuration error |q - q_d|: open loop final {err_open[-1]:.3e} rad, "
        f"closed loop final {err_closed[-1]:.3e} rad; second-half mean ratio open/closed "
        f"{summary['error_ratio_second_half']:.1f}")
    say(f"wrote {png} and {out / 'summary.json'}")
    return summary


def plot(model, X, X_open, X_closed, err_open, err_closed, dt, path: Path, config: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = dt * np.arange(X.shape[0])
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.5))
    ax[0].semilogy(t, np.maximum(err_open, 1e-16), label="open loop")
    ax[0].semilogy(t, np.maximum(err_closed, 1e-16), label="closed loop (discrete LQR)")
    ax[0].set_xlabel("t [s]")
    ax[0].set_ylabel("|q_dyn - q_dyn,d| [rad, m]")
    ax[0].set_title("Tracking error after a perturbation")
    ax[0].legend()
    i = model.config_index(config)
    ax[1].plot(t, X[:, i], "k--", label="nominal walk")
    ax[1].plot(t, X_open[:, i], label="open loop")
    ax[1].plot(t, X_closed[:, i], label="closed loop")
    ax[1].set_xlabel("t [s]")
    ax[1].set_ylabel(f"{config}")
    ax[1].set_title(f"Perturbed configuration {config}")
    ax[1].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m marionette_control.cli.demo",
        description="Seed 001 §VIII-B without ROS: the humanoid marionette's string walk, its exact linearization and "
                    "time-varying LQR gains; closed against open loop from a start perturbed by --perturbation rad in "
                    "--config. Writes a PNG and a JSON summary into --out.",
        epilog="The arm's whole loop across ROS processes is the main job (python -m marionette_control.cli.main_job); "
               "the same walk and gains: docs/reproductions.md, section 3.")
    p.add_argument("--steps", type=int, default=1000, help="number of steps (default 1000 = 10 s)")
    p.add_argument("--dt", type=float, default=0.01, help="time step [s] (default 0.01)")
    p.add_argument("--perturbation", type=float, default=0.1, help="initial perturbation (default 0.1 rad)")
    p.add_argument("--config", default="torso_rz", help="perturbed configuration (default torso_rz)")
    p.add_argument("--out", type=Path, default=Path("out/demo"), help="output directory (default out/demo)")
    a = p.parse_args(argv)
    if a.steps < 1 or not (a.dt > 0) or not np.isfinite(a.perturbation):
        p.error("--steps must be >= 1, --dt > 0 and --perturbation finite")
    try:
        run(a.steps, a.dt, a.perturbation, a.out, a.config)
    except _core.StepError as e:
        print(f"[demo] error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
