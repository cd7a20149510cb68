"""Integrator study (docs/integrator_study.md): seed 004 §5.2 schemes beside the midpoint VI.

    .venv/bin/python docs/integrator_study.py            # every figure and number (about 3 min, one core)
    .venv/bin/python docs/integrator_study.py --quick    # shorter horizons, for trying changes (about 30 s)

Writes docs/img/integrators_*.png and out/integrator_study/summary.json (--img-dir, --out-dir to
change) and prints the numbers docs/integrator_study.md quotes. The schemes and measurements are in
marionette_control.study.integrators.
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

from marionette_control import _core, models  # noqa: E402
from marionette_control.study import integrators as I  # noqa: E402

VI = I.MIDPOINT_VI
LABELS = {**{name: s.label for name, s in I.SCHEMES.items()}, VI: "midpoint VI (core)"}
COLORS = {"explicit_euler": "tab:red", "semi_implicit_euler": "tab:orange", "stormer_verlet": "tab:green",
          "stormer_verlet_half_step": "tab:olive", "rk4": "tab:purple", VI: "tab:blue",
          "semi_implicit_euler+baumgarte": "tab:brown", "semi_implicit_euler+projection": "tab:pink"}
ORDERS = {**{name: s.order for name, s in I.SCHEMES.items()}, VI: 2}
ALL = [*I.SCHEMES, VI]

DT = 0.01                     # step of the long runs (the README's humanoid step)
BAUMGARTE_ALPHA = 10.0        # 1/s; alpha dt = 0.1
ORDER_T = {"double_pendulum": 2.0, "humanoid": 1.0}
ORDER_DTS = {"double_pendulum": 0.02 / 2.0 ** np.arange(6), "humanoid": 0.02 / 2.0 ** np.arange(5)}
FIT_FROM = 0.005              # slopes fitted over dt <= FIT_FROM (RK4 is pre-asymptotic at 0.01-0.02 on the pendulum)


def say(msg):
    print(f"[integrator_study] {msg}", flush=True)


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def drift(err) -> float:
    """Mean of the last 10% minus mean of the first 10% of an error series."""
    w = max(len(err) // 10, 1)
    return float(err[-w:].mean() - err[:w].mean())


def energy_summary(run, dyn, E0: float) -> dict:
    """Energy error against the exact initial energy E0 = E(q0, qdot0) (the VI's series starts at dt/2)."""
    t, E = I.energy_series(run, dyn)
    err = E - E0
    return {"t": t, "err": err, "E0": E0, "max_abs": float(np.abs(err).max()), "final": float(err[-1]),
            "drift": drift(err), "steps": run.steps, "stopped": run.stopped,
            "evaluations_per_step": run.evaluations / max(run.steps, 1), "seconds": run.seconds}


def public(d: dict) -> dict:
    """The JSON-worthy part of a summary (no arrays)."""
    return {k: v for k, v in d.items() if not isinstance(v, np.ndarray)}


# ------------------------------------------------------------------ long runs: energy (and h)


def long_runs(case, steps: int, schemes, variants=()) -> dict:
    """Every scheme (and each (name, scheme, 'baumgarte' | 'projection') variant) for ``steps`` steps of DT.

    Constrained systems also get h(q_k) and, for plain explicit runs, the work W of the constraint
    forces on the velocity drift (``integrators.constraint_work``): E(T) - E0 - W(T) is the
    scheme's own energy error."""
    dyn, q0, v0 = case
    E0 = dyn.energy(q0, v0)
    runs = [(name, name, dyn, False) for name in schemes]
    for name, scheme, kind in variants:
        d = I.ContinuousDynamics(dyn.model, rho=dyn.rho, baumgarte=BAUMGARTE_ALPHA if kind == "baumgarte" else 0.0)
        runs.append((name, scheme, d, kind == "projection"))
    out = {}
    for name, scheme, d, project in runs:
        run = I.integrate(scheme, d, q0, v0, DT, steps, project=project)
        r = energy_summary(run, d, E0)
        if d.model.nc:
            h = I.constraint_series(run, d)
            r.update(h=h, h_max=float(h.max()), h_final=float(h[-1]))
            if run.v is not None and not (project or d.baumgarte):  # W is lambda's work: plain schemes only
                r["constraint_work_final"] = float(I.constraint_work(run, d)[-1])
                r["own_energy_error_final"] = r["final"] - r["constraint_work_final"]
        out[name] = r
        say(f"  {name}: {public(r)}")
    return out


# ------------------------------------------------------------------ observed order


def orders(case, T: float, dts) -> dict:
    dyn, q0, v0 = case
    q_ref, _ = I.reference_solution(dyn, q0, v0, T, 1e-13)
    q_loose, _ = I.reference_solution(dyn, q0, v0, T, 1e-11)
    out = {"T": T, "dts": list(map(float, dts)), "reference_change_1e-11_to_1e-13": float(np.abs(q_ref - q_loose).max()),
           "reference_constraint_residual": dyn.constraint_residual(q_ref), "schemes": {}}
    fit = dts <= FIT_FROM * (1 + 1e-12)
    for name in ALL:
        e = I.final_errors(name, dyn, q0, v0, T, dts, q_ref)
        local = np.log(e[:-1] / e[1:]) / np.log(dts[:-1] / dts[1:])
        out["schemes"][name] = {"errors": e.tolist(), "order": I.observed_order(dts[fit], e[fit]),
                                "local_orders": local.tolist(), "expected": ORDERS[name]}
        say(f"  {name}: order {out['schemes'][name]['order']:.3f} (expected {ORDERS[name]}), errors {e}")
    return out


def rk4_small_step_check(case, T: float, dt: float) -> float:
    """max |q_RK4(T; dt) - q_DOP853(T)|: the reference cross-checked by a much smaller fixed step."""
    dyn, q0, v0 = case
    q_ref, _ = I.reference_solution(dyn, q0, v0, T, 1e-13)
    run = I.integrate("rk4", dyn, q0, v0, dt, int(round(T / dt)))
    return float(np.abs(run.q[-1] - q_ref).max())


# ------------------------------------------------------------------ cost


def costs(case, steps: int) -> dict:
    """Per step: evaluations and wall time (this process, one core), every scheme from the same start;
    the VI both as one ``simulate`` call (loop in C++) and one ``DiscreteSystem.step`` call per step."""
    dyn, q0, v0 = case
    model = dyn.model
    out = {}
    for name in ALL:
        run = I.integrate(name, dyn, q0, v0, DT, steps)
        out[name] = {"evaluations_per_step": run.evaluations / run.steps, "us_per_step": 1e6 * run.seconds / run.steps}
    system = _core.DiscreteSystem(model, DT)
    q_full = dyn.configuration(q0)
    x = np.concatenate([q_full, (_core.mass_matrix(model, q_full) @ dyn.velocity(v0))[: model.nd], np.zeros(model.nk)])
    u = np.concatenate([np.zeros(model.nu), dyn.rho])
    start = time.perf_counter()
    for _ in range(steps):
        x = system.step(x, u)[0]
    out[VI]["us_per_step_python_loop"] = 1e6 * (time.perf_counter() - start) / steps
    v_full = dyn.velocity(v0)
    zero_u, zero_k = np.zeros(model.nu), np.zeros(model.nk)
    n = max(steps // 2, 100)
    start = time.perf_counter()
    for _ in range(n):
        _core.forward_dynamics(model, q_full, v_full, zero_u, zero_k)
    out["forward_dynamics_us"] = 1e6 * (time.perf_counter() - start) / n
    say(f"  {out}")
    return out


# ------------------------------------------------------------------ figures


def envelope(t, y, width: float):
    """(window centres, max |y| per window of ``width`` seconds): readable curves from 10^5 points."""
    n = max(int(round(width / (t[1] - t[0]))), 1)
    m = len(y) // n
    if m == 0:
        return t, np.abs(y)
    return t[: m * n].reshape(m, n).mean(axis=1), np.abs(y[: m * n]).reshape(m, n).max(axis=1)


def label_of(name: str) -> str:
    return LABELS.get(name) or name.replace("semi_implicit_euler+", "semi-implicit Euler + ")


def sign_note(r: dict) -> str:
    return "" if r["max_abs"] < 1e-3 else (" (gains)" if r["final"] > 0 else " (loses)")


def plot_double_pendulum(img: Path, dp: dict, pend: dict, steps: int):
    plt = pyplot()
    fig, ax = plt.subplots(1, 2, figsize=(13, 4.6), gridspec_kw={"width_ratios": [1.6, 1]})
    for a, runs, width in ((ax[0], dp, 5.0), (ax[1], pend, 1.0)):
        for name, r in runs.items():
            tc, env = envelope(r["t"], r["err"], width)
            a.semilogy(tc, env, color=COLORS[name], lw=1.0, label=label_of(name) + sign_note(r))
        a.set_xlabel("t [s]")
        a.grid(True, which="major", alpha=0.3)
    ax[0].set_ylabel("max |E - E0| per window [J]")
    ax[0].set_title(f"Double pendulum, Δt = {DT} s, {steps} steps (E0 = {dp[VI]['E0']:.2f} J; 5-s windows)")
    ax[0].legend(fontsize=8, loc="lower right")
    ax[1].set_title("Control: single pendulum, f = f(q) (1-s windows)")
    ax[1].legend(fontsize=7, loc="center right")
    fig.tight_layout()
    fig.savefig(img / "integrators_double_pendulum_energy.png", dpi=110)
    plt.close(fig)


def plot_orders(img: Path, res: dict):
    plt = pyplot()
    from matplotlib.ticker import NullFormatter

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    for ax, (system, r) in zip(axes, res.items()):
        dts = np.array(r["dts"])
        for name, s in r["schemes"].items():
            ax.loglog(dts, s["errors"], "o-", color=COLORS[name], ms=4,
                      label=f"{LABELS[name]}: {s['order']:.2f} (expected {s['expected']})")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("Δt [s]")
        ax.set_ylabel(f"max |q(T) - q_ref(T)| at T = {r['T']:g} s")
        ax.set_title(f"{system.replace('_', ' ')}: observed order (fitted for Δt ≤ {FIT_FROM})")
        ax.legend(fontsize=7.5, loc="lower right")
        ax.grid(True, which="major", alpha=0.3)
    fig.tight_layout()
    fig.savefig(img / "integrators_order.png", dpi=110)
    plt.close(fig)


def plot_humanoid(img: Path, hum: dict, steps: int):
    plt = pyplot()
    fig, ax = plt.subplots(1, 2, figsize=(13, 4.8))
    for name, r in hum.items():
        tc, env = envelope(r["t"], r["err"], 1.0)
        ax[0].semilogy(tc, env, color=COLORS[name], lw=1.0, label=label_of(name) + sign_note(r))
        th, hev = envelope(DT * np.arange(len(r["h"])), r["h"], 1.0)
        ax[1].semilogy(th, np.maximum(hev, 1e-17), color=COLORS[name], lw=1.0, label=label_of(name))
    ax[0].set_xlabel("t [s]")
    ax[0].set_ylabel("max |E - E0| per 1-s window [J]")
    ax[0].set_title(f"Humanoid marionette (strings held, no damping), Δt = {DT} s, {steps} steps")
    ax[0].legend(fontsize=7.5, loc="lower right")
    ax[1].axhline(1e-10, color="k", ls=":", lw=1)
    ax[1].text(0.02, 2e-10, "VI Newton tolerance 1e-10", fontsize=8, transform=ax[1].get_yaxis_transform())
    ax[1].set_xlabel("t [s]")
    ax[1].set_ylabel("max_i |h_i(q)| per 1-s window [m²]")
    ax[1].set_title("String constraint residual (h = |p_hook - p_top|² - length²)")
    for a in ax:
        a.grid(True, which="major", alpha=0.3)
    fig.tight_layout()
    fig.savefig(img / "integrators_humanoid.png", dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------ main


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="10x shorter long runs and no cost timing loops")
    ap.add_argument("--img-dir", type=Path, default=ROOT / "docs" / "img")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "out" / "integrator_study")
    args = ap.parse_args(argv)
    args.img_dir.mkdir(parents=True, exist_ok=True)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    scale = 10 if args.quick else 1
    dp_steps, pend_steps, hum_steps = 100_000 // scale, 10_000 // scale, 10_000 // scale
    started = time.perf_counter()
    dp_case, hum_case = I.double_pendulum_case(), I.humanoid_case()
    summary = {"dt": DT, "baumgarte_alpha": BAUMGARTE_ALPHA, "humanoid_kick": I.HUMANOID_KICK,
               "humanoid_E0": hum_case[0].energy(hum_case[1], hum_case[2])}

    say(f"double pendulum, {dp_steps} steps of {DT} s")
    dp = long_runs(dp_case, dp_steps, ALL)
    say(f"single pendulum (control), {pend_steps} steps")
    pend = long_runs((I.ContinuousDynamics(models.get("pendulum")), np.array([2.5]), np.zeros(1)), pend_steps, ALL)
    plot_double_pendulum(args.img_dir, dp, pend, dp_steps)

    say(f"humanoid, {hum_steps} steps of {DT} s")
    hum = long_runs(hum_case, hum_steps, ALL, variants=[
        ("semi_implicit_euler+baumgarte", "semi_implicit_euler", "baumgarte"),
        ("semi_implicit_euler+projection", "semi_implicit_euler", "projection")])
    plot_humanoid(args.img_dir, hum, hum_steps)

    res = {}
    for system, case in (("double_pendulum", dp_case), ("humanoid", hum_case)):
        say(f"observed order, {system}")
        res[system] = orders(case, ORDER_T[system], ORDER_DTS[system])
    res["double_pendulum"]["rk4_dt_1e-4_vs_reference"] = rk4_small_step_check(dp_case, ORDER_T["double_pendulum"], 1e-4)
    plot_orders(args.img_dir, res)

    summary.update(double_pendulum_energy={k: public(v) for k, v in dp.items()},
                   pendulum_energy={k: public(v) for k, v in pend.items()},
                   humanoid={k: public(v) for k, v in hum.items()}, order=res)
    if not args.quick:
        say("cost per step")
        summary["cost"] = {"double_pendulum": costs(dp_case, 5000), "humanoid": costs(hum_case, 500)}
    summary["seconds"] = time.perf_counter() - started
    path = args.out_dir / "summary.json"
    path.write_text(json.dumps(summary, indent=1))
    say(f"wrote {path} and docs figures in {summary['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
