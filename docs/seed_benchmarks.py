"""Seed 002's and seed 004's optimal-control benchmarks (docs/reproductions.md §6, §7).

    .venv/bin/python docs/seed_benchmarks.py sphere     # seed 002 §7.1 (a few seconds)
    .venv/bin/python docs/seed_benchmarks.py cartpole   # seed 004 App. A, both readings, its Euler scheme (~30 s)
    .venv/bin/python docs/seed_benchmarks.py two-link   # seed 004 §8 (about 20 s)
    .venv/bin/python docs/seed_benchmarks.py all

Each writes a PNG to docs/img/ and a JSON summary to out/reproductions/<name>.json and prints the numbers
quoted in docs/reproductions.md. The specs are config/optimize/seed002_sphere.yaml, seed004_cartpole.yaml
and seed004_two_link.yaml; the cost definitions and the seeds' own discretizations are in
marionette_control/study/seed_costs.py. The cart-pole's explicit-Euler reference (the seed's
integrator, every step's force free) is transcribed here in CasADi (requirements/dmocc.txt).
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

from marionette_control.ocp.dmocc import DmoccOptions  # noqa: E402
from marionette_control.ocp.optimizer import solve  # noqa: E402
from marionette_control.ocp.spec import load_spec  # noqa: E402
from marionette_control.ocp.spec_problem import build_problem, initial_trajectory, solve_spec  # noqa: E402
from marionette_control.resources import config_dir  # noqa: E402
from marionette_control.study.seed_costs import (  # noqa: E402
    cartpole_seed_cost,
    director_turn_effort,
    rest_to_rest_effort,
    two_link_costates,
)

SPECS = config_dir() / "optimize"


def say(msg):
    print(f"[seed_benchmarks] {msg}", flush=True)


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


# ------------------------------------------------------------------ seed 002 §7.1


def sphere(img: Path) -> dict:
    spec = load_spec(SPECS / "seed002_sphere.yaml")
    d, t_d = timed(lambda: solve_spec(load_spec(SPECS / "seed002_sphere.yaml", {"method": "dmocc", "dmocc.final": "rest"})))
    p, t_p = timed(lambda: solve_spec(spec))
    h, N = spec.dt, d.problem.N
    mass = 27000 * 4 / 3 * np.pi * 0.05 ** 3
    J = 0.4 * mass * 0.05 ** 2
    trans = rest_to_rest_effort(mass, np.sqrt(6.0), N, h, False)
    rot = rest_to_rest_effort(J, 6 * np.pi, N, h, False)
    rot_seed, theta_seed = director_turn_effort(J, 6 * np.pi, N, h)
    out = {"dmocc_effort": h * float(np.sum(d.trajectory.U ** 2)), "dmocc_iterations": d.result.iterations,
           "dmocc_seconds": t_d, "dmocc_final_error": d.result.final_error,
           "projection_effort": h * float(np.sum(p.trajectory.U ** 2)), "projection_iterations": p.result.iterations,
           "projection_seconds": t_p, "projection_final_error": float(np.abs(p.trajectory.X[-1] - p.problem.Xd[-1]).max()),
           "translation": trans, "rotation": rot, "seed_rotation": rot_seed, "seed_discretization": trans + rot_seed,
           "seed_printed": 533.5767, "max_beta_gamma": float(np.abs(d.trajectory.X[:, 4:6]).max())}
    say(json.dumps(out, indent=1))
    plt = pyplot()
    t = np.arange(N + 1) * h
    X, U = d.trajectory.X, d.trajectory.U
    fig, ax = plt.subplots(1, 3, figsize=(16, 4.2))
    for i, n in enumerate("xyz"):
        ax[0].plot(t, X[:, i], label=n)
    ax[0].set(xlabel="t [s]", ylabel="centre of mass [m]", title="seed 002 §7.1 sphere: translation")
    ax[0].legend()
    ax[1].plot(t, X[:, 3], "o-", ms=3, label="ψ, this package (midpoint in the chart's angles)")
    ax[1].plot(t, theta_seed, "s--", ms=3, label="θ, seed 002's discretization (director chord)")
    ax[1].set(xlabel="t [s]", ylabel="rotation about (−1, 1, 1)/√3 [rad]", title="the three turns")
    ax[1].legend(fontsize=8)
    tk = t[:-1]
    ax[2].step(tk, np.linalg.norm(U[:, :3], axis=1), where="post", label="|force| [N]")
    ax[2].step(tk, 100 * np.linalg.norm(U[:, 3:], axis=1), where="post", label="100 × |torque| [N m]")
    ax[2].set(xlabel="t [s]", title=f"inputs (effort {out['dmocc_effort']:.4f}; seed 002: 533.5767)")
    ax[2].legend()
    fig.tight_layout()
    fig.savefig(img / "seed002_sphere.png", dpi=110)
    return out


# ------------------------------------------------------------------ seed 004 App. A


def euler_cartpole(sign: float, scheme: str = "euler") -> float:
    """Seed 004 App. A in its own discretization: x = (θ, r, θ̇, ṙ), x_{n+1} = x_n + Δt f(x_n, F_n) (explicit
    Euler, (A.7); ``rk4`` for comparison), every F_n free, cost (A.13)-(A.17), from x_0 = (π, −1, 0, 0).
    ``sign`` −1: (A.1)-(A.2) as printed (the bob at r − l sin θ); +1: the mirrored coupling. IPOPT."""
    import casadi as ca

    Mc, m, l, g, dt, N = 2.0, 1.0, 1.0, 9.81, 0.01, 200

    def f(x, F):
        th, thd, rd = x[0], x[2], x[3]
        A = ca.vertcat(ca.horzcat(Mc + m, sign * m * l * ca.cos(th)), ca.horzcat(sign * m * ca.cos(th), m * l))
        b = ca.vertcat(F + sign * m * l * thd ** 2 * ca.sin(th), m * g * ca.sin(th))
        acc = ca.solve(A, b)
        return ca.vertcat(thd, rd, acc[1], acc[0])

    xs, us = ca.MX.sym("x", 4), ca.MX.sym("u")
    if scheme == "euler":
        step = xs + dt * f(xs, us)
    else:
        k1 = f(xs, us)
        k2 = f(xs + dt / 2 * k1, us)
        k3 = f(xs + dt / 2 * k2, us)
        step = xs + dt / 6 * (k1 + 2 * k2 + 2 * k3 + f(xs + dt * k3, us))
    F = ca.Function("step", [xs, us], [step])
    opti = ca.Opti()
    X, U = opti.variable(4, N + 1), opti.variable(1, N)
    opti.subject_to(X[:, 0] == ca.DM([np.pi, -1, 0, 0]))
    opti.subject_to(X[:, 1:] == F.map(N)(X[:, :-1], U))
    J = 0.5e5 * ca.sumsqr(X[:, N]) + 0.5 * dt * ca.sumsqr(U)
    opti.minimize(J)
    opti.set_initial(X, np.tile([[np.pi], [-1], [0], [0]], (1, N + 1)))
    opti.solver("ipopt", {"print_time": False}, {"print_level": 0, "sb": "yes"})
    return float(opti.solve().value(J))


def cartpole(img: Path) -> dict:
    out, runs = {}, {}
    for reading, keys, target in (("mirrored", None, np.pi), ("literal", [[0.0, -1.0, 0.0], [2.0, 0.0, -np.pi]], -np.pi)):
        for method in ("projection", "dmocc"):
            over = {"method": method} if keys is None else {"method": method, "motion.keyframes": keys}
            r, secs = timed(lambda: solve_spec(load_spec(SPECS / "seed004_cartpole.yaml", over)))
            J = cartpole_seed_cost(r.problem.model, r.trajectory.X, r.trajectory.U, r.problem.dt, theta_target=target)
            out[f"{reading}.{method}"] = {"seed_cost": J, "iterations": r.result.iterations, "seconds": secs,
                                          "converged": r.result.converged}
            runs[(reading, method)] = r
    for reading, sign in (("literal", -1.0), ("mirrored", 1.0)):
        out[f"{reading}.seed_euler_optimum"] = euler_cartpole(sign, "euler")
        out[f"{reading}.rk4_optimum"] = euler_cartpole(sign, "rk4")
    say(json.dumps(out, indent=1))
    plt = pyplot()
    fig, ax = plt.subplots(1, 3, figsize=(16, 4.2))
    for reading, style in (("mirrored", "-"), ("literal", "--")):
        r = runs[(reading, "dmocc")]
        t = r.trajectory.t
        lab = f"{reading} ({out[reading + '.dmocc']['seed_cost']:.2f})"
        ax[0].plot(t, r.trajectory.X[:, 0], style, label=lab)
        ax[1].plot(t, r.trajectory.X[:, 1], style, label=lab)
        ax[2].step(t[:-1], r.trajectory.U[:, 0], style, where="post", label=lab)
    ax[0].set(xlabel="t [s]", ylabel="cart r [m]", title="seed 004 App. A cart-pole: cart")
    ax[1].set(xlabel="t [s]", ylabel="θ [rad] (0 hanging)", title="pendulum")
    ax[2].set(xlabel="t [s]", ylabel="F [N]", title="force (seed 004's best: 345.02)")
    for a in ax:
        a.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(img / "seed004_cartpole.png", dpi=110)
    return out


# ------------------------------------------------------------------ seed 004 §8


SEED_T5 = {"state": [-0.027597, 3.068603, 0.477425, 0.009792], "costates": [-0.203408, 0.019078, -0.209560, 0.019651]}


def two_link(img: Path) -> dict:
    spec = load_spec(SPECS / "seed004_two_link.yaml", {"method": "dmocc"})
    problem = build_problem(spec)
    X0, U0, _ = initial_trajectory(spec, problem)
    run = solve(problem, X0, U0, dmocc=DmoccOptions())            # the spec's method, DMOCC: soft final state
    soft, t_soft = run.result, run.solve_time
    rest = solve(problem, soft.X, soft.U, dmocc=DmoccOptions(final="rest"))   # x_N imposed, from it
    r, t_rest = rest.result, rest.solve_time
    p, t_p = timed(lambda: solve_spec(load_spec(SPECS / "seed004_two_link.yaml")))
    dt, model = problem.dt, problem.model
    lam, H = two_link_costates(model, r.X, r.U, dt)
    k = problem.N // 2
    v5 = np.linalg.solve(np.asarray(model.lagrangian(r.X[k, :2], np.zeros(2))["Lvv"]), r.X[k, 2:])
    out = {"dmocc_soft_cost": soft.cost, "dmocc_soft_iterations": soft.iterations, "dmocc_soft_seconds": t_soft,
           "projection_cost": p.result.cost, "projection_iterations": p.result.iterations, "projection_seconds": t_p,
           "dmocc_rest_effort": 0.5 * dt * float(np.sum(r.U[:, 0] ** 2 + 0.5 * r.U[:, 1] ** 2)),
           "dmocc_rest_iterations": r.iterations, "dmocc_rest_seconds": t_rest, "final_error": r.final_error,
           "state_t5": np.r_[r.X[k, :2], v5].tolist(), "costates_t5": (0.5 * (lam[k - 2] + lam[k - 1])).tolist(),
           "seed_t5": SEED_T5, "H_mean": float(H.mean()), "H_ptp": float(np.ptp(H)),
           "H_ptp_inner": float(np.ptp(H[100:-100]))}
    say(json.dumps(out, indent=1))
    plt = pyplot()
    t = np.arange(problem.N + 1) * dt
    V = np.array([np.linalg.solve(np.asarray(model.lagrangian(x[:2], np.zeros(2))["Lvv"]), x[2:]) for x in r.X])
    fig, ax = plt.subplots(1, 3, figsize=(16, 4.2))
    ax[0].plot(t, r.X[:, 0], label="θ1")
    ax[0].plot(t, r.X[:, 1], label="θ2")
    ax[0].plot(t, V[:, 0], label="θ̇1")
    ax[0].plot(t, V[:, 1], label="θ̇2")
    ax[0].plot([5] * 4, SEED_T5["state"], "kx", ms=8, label="seed 004 Table 10.1 (t = 5 s)")
    ax[0].set(xlabel="t [s]", title="seed 004 §8 two-link arm: state")
    ax[0].legend(fontsize=8)
    ax[1].step(t[:-1], r.U[:, 0], where="post", label="u1")
    ax[1].step(t[:-1], r.U[:, 1], where="post", label="u2")
    ax[1].set(xlabel="t [s]", ylabel="torque [N m]", title=f"controls (cost {out['dmocc_rest_effort']:.5f})")
    ax[1].legend()
    tm = (np.arange(1, problem.N - 1) + 0.5) * dt
    ax[2].plot(tm, H)
    ax[2].axhline(-0.09238, color="k", ls=":", label="seed's t = 5 s row")
    ax[2].set(xlabel="t [s]", ylabel="H", title=f"Hamiltonian (spread {out['H_ptp']:.1e})")
    ax[2].legend()
    fig.tight_layout()
    fig.savefig(img / "seed004_two_link.png", dpi=110)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("which", choices=["sphere", "cartpole", "two-link", "all"])
    ap.add_argument("--img-dir", type=Path, default=ROOT / "docs" / "img")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "out" / "reproductions")
    a = ap.parse_args(argv)
    a.img_dir.mkdir(parents=True, exist_ok=True)
    a.out_dir.mkdir(parents=True, exist_ok=True)
    jobs = {"sphere": sphere, "cartpole": cartpole, "two-link": two_link}
    for name in (list(jobs) if a.which == "all" else [a.which]):
        res = jobs[name](a.img_dir)
        (a.out_dir / f"seed_{name}.json").write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
