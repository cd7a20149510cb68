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
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from marionette_control import _core  # noqa: E402
from marionette_control.model import library  # noqa: E402
from marionette_control.study import integrators as I  # noqa: E402

VI = I.MIDPOINT_VI
LABELS = {**{name: s.label for name, s in I.SCHEMES.items()}, VI: "midpoint VI (core)"}
COLORS = {"explicit_euler": "tab:red", "semi_implicit_euler": "tab:orange", "stormer_verlet": "tab:green",
          "stormer_verlet_half_step": "tab:olive", "rk4": "tab:purple", VI: "tab:blue",
          "semi_implicit_euler+baumgarte": "tab:brown", "semi_implicit_euler+projection": "tab:pink"}
ORDERS = {**{name: s.order for name, s in I.SCHEMES.items()}, VI: 2}
ALL = [*I.SCHEMES, VI]

DT = 0.01                     # step of the long runs (the humanoid demo's step, cli/demo.py)
BAUMGARTE_ALPHA = 10.0        # 1/s; alpha dt = 0.1
WORK_AT = 10.0                # s, time of the energy = string work + own error split (humanoid)
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
        if run.v is not None:
            # where the energy changes: share of sum |E_{k+1} - E_k| taken in the 10% fastest steps
            speed, dE = np.abs(run.v[1:]).max(axis=1), np.abs(np.diff(r["err"]))
            fast = speed > np.percentile(speed, 90)
            r["energy_change_share_fastest_10pct"] = float(dE[fast].sum() / max(dE.sum(), 1e-300))
            r["speed_p50_p90_max"] = [float(np.percentile(speed, 50)), float(np.percentile(speed, 90)),
                                      float(speed.max())]
        if d.model.nc:
            h = I.constraint_series(run, d)
            r.update(h=h, h_max=float(h.max()), h_final=float(h[-1]))
            if run.v is not None and not (project or d.baumgarte):  # W is lambda's work: plain schemes only
                # at t = WORK_AT (before any explicit run blows up, where the quadrature of W fails)
                k = min(int(round(WORK_AT / DT)), run.steps)
                W = I.constraint_work(run, d)
                r["work_at"] = {"t": k * DT, "energy_error": float(r["err"][k]), "constraint_work": float(W[k]),
                                "own_error": float(r["err"][k] - W[k])}
                if not run.stopped:
                    r["work_final"] = float(W[-1])
        out[name] = r
        say(f"  {name}: {public(r)}")
    return out


# ------------------------------------------------------------------ observed order


def orders(case, T: float, dts) -> dict:
    dyn, q0, v0 = case
    q_ref, _ = I.reference_solution(dyn, q0, v0, T, 1e-13)
    q_loose, _ = I.reference_solution(dyn, q0, v0, T, 1e-11)
    out = {"T": T, "dts": list(map(float, dts)),
           "reference_change_1e-11_to_1e-13": float(np.abs(q_ref - q_loose).max()),
           "reference_constraint_residual": dyn.constraint_residual(q_ref), "schemes": {}}
    fit = dts <= FIT_FROM * (1 + 1e-12)
    for name in ALL:
        e = I.final_errors(name, dyn, q0, v0, T, dts, q_ref)
        local = np.log(e[:-1] / e[1:]) / np.log(dts[:-1] / dts[1:])
        out["schemes"][name] = {"errors": e.tolist(), "order": I.observed_order(dts[fit], e[fit]),
                                "local_orders": local.tolist(), "expected": ORDERS[name]}
        say(f"  {name}: order {out['schemes'][name]['order']:.3f} (expected {ORDERS[name]}), errors {e}")
    return out


def verlet_energy_scaling(case, T: float = 5.0) -> dict:
    """Störmer-Verlet's energy error E(T) - E0 at dt = DT and DT/2: it falls as dt^2."""
    dyn, q0, v0 = case
    E0 = dyn.energy(q0, v0)
    out = {}
    for dt in (DT, DT / 2):
        run = I.integrate("stormer_verlet", dyn, q0, v0, dt, int(round(T / dt)))
        out[f"{dt:g}"] = float(I.energy_series(run, dyn)[1][-1] - E0)
    say(f"  Störmer-Verlet E({T:g} s) - E0: {out}")
    return out


def rk4_small_step_check(case, T: float, dt: float) -> float:
    """max |q_RK4(T; dt) - q_DOP853(T)|: the reference cross-checked by a much smaller fixed step."""
    dyn, q0, v0 = case
    q_ref, _ = I.reference_solution(dyn, q0, v0, T, 1e-13)
    run = I.integrate("rk4", dyn, q0, v0, dt, int(round(T / dt)))
    return float(np.abs(run.q[-1] - q_ref).max())


# ------------------------------------------------------------------ cost


def best_of(repeats: int, fn) -> float:
    """Smallest wall time of ``repeats`` calls of fn() (other processes share the machine)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def costs(case, steps: int, repeats: int = 3) -> dict:
    """Per step: evaluations and wall time (best of ``repeats``, one core), every scheme from the same
    start; the VI both as one ``simulate`` call (loop in C++) and one ``DiscreteSystem.step`` call
    per step; and one ``forward_dynamics`` call along the RK4 run's states."""
    dyn, q0, v0 = case
    model = dyn.model
    out = {}
    for name in ALL:
        runs = [I.integrate(name, dyn, q0, v0, DT, steps) for _ in range(repeats)]
        out[name] = {"evaluations_per_step": runs[0].evaluations / steps,
                     "us_per_step": 1e6 * min(r.seconds for r in runs) / steps}
    system = _core.DiscreteSystem(model, DT)
    q_full = dyn.configuration(q0)
    x0 = np.concatenate([q_full, (_core.mass_matrix(model, q_full) @ dyn.velocity(v0))[: model.nd], np.zeros(model.nk)])
    u = np.concatenate([np.zeros(model.nu), dyn.rho])

    def step_loop():
        x = x0
        for _ in range(steps):
            x = system.step(x, u)[0]

    out[VI]["us_per_step_python_loop"] = 1e6 * best_of(repeats, step_loop) / steps
    run = I.integrate("rk4", dyn, q0, v0, DT, steps)
    states = [(dyn.configuration(q), dyn.velocity(v)) for q, v in zip(run.q, run.v)]
    zero_u, zero_k = np.zeros(model.nu), np.zeros(model.nk)

    def calls():
        for q, v in states:
            _core.forward_dynamics(model, q, v, zero_u, zero_k)

    out["forward_dynamics_us"] = 1e6 * best_of(repeats, calls) / len(states)
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
    """'bounded' when the window drift is below 10% of the largest error, else its direction."""
    if abs(r["drift"]) < 0.1 * r["max_abs"]:
        return " (bounded)"
    if np.sign(r["drift"]) != np.sign(r["final"]):
        return " (wanders)"
    return " (gains)" if r["final"] > 0 else " (loses)"


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
        ax.set_xticks(dts, [f"{dt:g}" for dt in dts])
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


# ------------------------------------------------------------------ tables (the numbers the document quotes)


def tables(summary: dict) -> str:
    order, lines = summary["order"], []
    lines.append("| scheme | expected | double pendulum | humanoid | evaluations / step (DP, humanoid) |")
    lines.append("|---|---|---|---|---|")
    cost = summary.get("cost", {})
    for name in ALL:
        dp, hu = order["double_pendulum"]["schemes"][name], order["humanoid"]["schemes"][name]
        ev = ", ".join(f"{cost[c][name]['evaluations_per_step']:.2f}" for c in ("double_pendulum", "humanoid")) \
            if cost else "-"
        lines.append(f"| {LABELS[name]} | {ORDERS[name]} | {dp['order']:.2f} | {hu['order']:.2f} | {ev} |")
    lines.append("")
    lines.append("| scheme | DP max abs dE | DP dE at end | DP drift | humanoid max abs dE | humanoid dE at end |"
                 f" max abs h | stopped | dE, W, own at {WORK_AT:g} s |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for name, hu in summary["humanoid"].items():
        dp = summary["double_pendulum_energy"].get(name)
        dp_cols = f"{dp['max_abs']:.3g} | {dp['final']:.3g} | {dp['drift']:.3g}" if dp else "- | - | -"
        w = hu.get("work_at")
        split = "-" if w is None else f"{w['energy_error']:.3g}, {w['constraint_work']:.3g}, {w['own_error']:.3g}"
        lines.append(f"| {label_of(name)} | {dp_cols} | {hu['max_abs']:.3g} | {hu['final']:.3g} | "
                     f"{hu['h_max']:.3g} | {hu['stopped'] or '-'} | {split} |")
    if cost:
        lines.append("")
        lines.append("| scheme | DP us/step | humanoid us/step |")
        lines.append("|---|---|---|")
        for name in ALL:
            lines.append(f"| {LABELS[name]} | {cost['double_pendulum'][name]['us_per_step']:.1f} | "
                         f"{cost['humanoid'][name]['us_per_step']:.0f} |")
        lines.append(f"| midpoint VI, one DiscreteSystem.step call per step | "
                     f"{cost['double_pendulum'][VI]['us_per_step_python_loop']:.1f} | "
                     f"{cost['humanoid'][VI]['us_per_step_python_loop']:.0f} |")
        lines.append(f"| one forward_dynamics call | {cost['double_pendulum']['forward_dynamics_us']:.1f} | "
                     f"{cost['humanoid']['forward_dynamics_us']:.0f} |")
    return "\n".join(lines)


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
    pend = long_runs((I.ContinuousDynamics(library.get("pendulum")), np.array([2.5]), np.zeros(1)), pend_steps, ALL)
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
    for system, case in (("double_pendulum", dp_case), ("humanoid", hum_case)):
        res[system]["rk4_dt_1e-4_vs_reference"] = rk4_small_step_check(case, ORDER_T[system], 1e-4)
        say(f"  {system}: RK4 at dt = 1e-4 against the reference: {res[system]['rk4_dt_1e-4_vs_reference']:.2e}")
    summary["humanoid_verlet_energy_error_at_5s"] = verlet_energy_scaling(hum_case)
    plot_orders(args.img_dir, res)

    summary.update(double_pendulum_energy={k: public(v) for k, v in dp.items()},
                   pendulum_energy={k: public(v) for k, v in pend.items()},
                   humanoid={k: public(v) for k, v in hum.items()}, order=res)
    if not args.quick:
        say("cost per step")
        summary["load_average_before_cost"] = os.getloadavg()
        summary["cost"] = {"double_pendulum": costs(dp_case, 5000), "humanoid": costs(hum_case, 500)}
    summary["seconds"] = time.perf_counter() - started
    print(tables(summary))
    path = args.out_dir / "summary.json"
    path.write_text(json.dumps(summary, indent=1))
    say(f"wrote {path} and docs figures in {summary['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
