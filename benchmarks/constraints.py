"""Constraints group: the barrier method's cost next to the unconstrained optimization (issue 11).

Scenarios (same machine, same run, interleaved so load changes hit both alike):

* ``wave.{unconstrained,constrained}``: ``config/optimize/marionette_arm_wave.yaml`` (thesis
  §6.7.2: 800 steps of 0.01 s) from its constant-input initial trajectory, without constraints
  and with the model file's (drive range, speed and acceleration, string tension ≥ 0.5 N): wall
  time of the optimization to convergence (median of the runs), iterations, cost; and the ratio
  constrained / unconstrained of the medians (target ≤ 2).
* ``wave_2x.constrained``: the wave's keyframes at twice the speed, impossible within the limits:
  time, iterations, and the RMS tracking error of the best constrained trajectory.
* ``wave_2x.tension_only``: the same with only ``families: [tension]`` (the string must pull with
  0.5 N, the drives unconstrained): time, iterations, cost, lowest tension.
* ``humanoid.tension``: the humanoid marionette tracking problem of the optimizer group
  (benchmarks/optimizer.py, N = 200; 60 with --quick) with tension ≥ 0.5 N on all six strings,
  next to the same problem unconstrained (where two strings would push): time to convergence
  (target ≤ 30 s), iterations, lowest tension.
"""

from __future__ import annotations

import math
import statistics
import time

import numpy as np

from benchmarks.registry import Context, Figure, benchmark_group

WAVE = "config/optimize/marionette_arm_wave.yaml"


def _wave_runs(spec, repeats: int):
    """[(seconds, result)] of the optimization of a spec's problem from its initial trajectory."""
    from marionette_control.ocp.projection import ProjectionOptimizer
    from marionette_control.ocp.spec_problem import build_problem, initial_trajectory

    p = build_problem(spec)
    X0, U0, _ = initial_trajectory(spec, p)
    opt = ProjectionOptimizer(p.system, p.cost, p.options)
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        r = opt.optimize(X0, U0)
        out.append((time.perf_counter() - t, r, p))
    return out


@benchmark_group("constraints", "inequality constraints (barrier method): constrained vs unconstrained optimizations")
def constraints(ctx: Context) -> list[Figure]:
    from marionette_control.ocp.spec import load_spec, parse_spec

    figs: list[Figure] = []

    def fig(name, value, unit, notes):
        figs.append(Figure(name, float(value), unit, "constraints", None, notes))

    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    repeats = 2 if ctx.quick else 5
    ctx.log(f"constraints: the wave with and without constraints, {repeats} interleaved runs each")
    specs = {"unconstrained": load_spec(root / WAVE, {"constraints.enabled": False}),
             "constrained": load_spec(root / WAVE)}
    times = {k: [] for k in specs}
    last = {}
    for _ in range(repeats):
        for k, spec in specs.items():
            (t, r, p), = _wave_runs(spec, 1)
            times[k].append(t)
            last[k] = (r, p)
    for k in specs:
        r, p = last[k]
        rms = {n: math.degrees(e["rms"]) for n, e in p.tracking_errors(r.X).items()}
        note = (f"{WAVE} ({'constraints off' if k == 'unconstrained' else 'the model file limits'}): {r.reason}, "
                f"{r.iterations} iterations ({''.join(h.method[0] for h in r.history)}), cost {r.cost:.6f}, RMS "
                f"{', '.join(f'{n} {v:.4f} deg' for n, v in rms.items())}, constraints satisfied {r.feasible}; "
                f"median of {repeats} runs")
        fig(f"wave.{k}.time_to_convergence", statistics.median(times[k]), "s", note)
        fig(f"wave.{k}.iterations", r.iterations, "iterations", note)
        fig(f"wave.{k}.cost", r.cost, "cost", note)
    fig("wave.constrained_over_unconstrained", statistics.median(times["constrained"])
        / statistics.median(times["unconstrained"]), "ratio", "median times of the same run (target <= 2)")

    import yaml

    ctx.log("constraints: the wave at twice its speed, constrained")
    wave = yaml.safe_load((root / "config" / "motions" / "wave.yaml").read_text())
    data = yaml.safe_load((root / WAVE).read_text())
    data["motion"] = {"joints": wave["joints"], "angle_unit": "deg", "interpolation": "clamped",
                      "keyframes": [[t / 2.0] + v for t, *v in wave["keyframes"]]}
    data.pop("output")
    fast = parse_spec(data, str(root / WAVE))
    runs = _wave_runs(fast, 1 if ctx.quick else 3)
    t, r, p = runs[-1]
    rms = {n: math.degrees(e["rms"]) for n, e in p.tracking_errors(r.X).items()}
    active = sorted({row["label"] for row in p.constraint_report(r.X, r.U, r.Lam) if row["active_steps"]})
    note = (f"the wave's keyframes at 2x speed (4 s): {r.reason}, {r.iterations} iterations, cost {r.cost:.6f}, "
            f"constraints satisfied {r.feasible}; active: {'; '.join(active)}; median of {len(runs)} runs")
    fig("wave_2x.constrained.time_to_convergence", statistics.median(x[0] for x in runs), "s", note)
    fig("wave_2x.constrained.iterations", r.iterations, "iterations", note)
    for n, v in rms.items():
        fig(f"wave_2x.constrained.rms_{n}", v, "deg", note)

    ctx.log("constraints: the wave at twice its speed, string tension only")
    data["constraints"] = {"families": ["tension"]}
    runs = _wave_runs(parse_spec(data, str(root / WAVE)), 1 if ctx.quick else 3)
    t, r, p = runs[-1]
    tension = p.constraints[0].margins(p.point(r.X, r.U, r.Lam))[:-1] + p.limits.min_tension
    note = (f"the wave's keyframes at 2x speed, constraints: families [tension] (string tension >= 0.5 N, drives "
            f"free): {r.reason}, {r.iterations} iterations, cost {r.cost:.6f}, lowest tension {tension.min():.3f} N, "
            f"constraints satisfied {r.feasible}; median of {len(runs)} runs")
    fig("wave_2x.tension_only.time_to_convergence", statistics.median(x[0] for x in runs), "s", note)
    fig("wave_2x.tension_only.iterations", r.iterations, "iterations", note)
    fig("wave_2x.tension_only.cost", r.cost, "cost", note)
    fig("wave_2x.tension_only.min_tension", float(tension.min()), "N", note)

    figs += _humanoid(ctx)
    return figs


def _humanoid(ctx: Context) -> list[Figure]:
    from benchmarks.optimizer import humanoid_tracking_problem
    from marionette_control.ocp.constraints import BarrierTerm, tension_constraints
    from marionette_control.ocp.projection import OptimizerOptions, ProjectionOptimizer
    from marionette_control.ocp.terms import Point
    from marionette_control.model.limits import limits_of

    N = 60 if ctx.quick else 200
    ctx.log(f"constraints: humanoid tracking, N = {N}, with and without tension >= 0.5 N on the six strings")
    problem, X0, U0 = humanoid_tracking_problem(N)
    ds, cost = problem.system, problem.cost
    ten = tension_constraints(limits_of(ds.model), ds.dt)
    figs = []
    for label, c in (("unconstrained", cost), ("tension", cost.replaced([BarrierTerm(ten, 1e-3, 0.0, ds.dt)]))):
        opt = ProjectionOptimizer(ds, c, OptimizerOptions(max_iterations=100))
        t = time.perf_counter()
        r = opt.optimize(X0, U0)
        el = time.perf_counter() - t
        T = ten.margins(Point(r.X, r.U, ds.constraint_forces_trajectory(r.X, r.U)))[:-1] + ten.min_tension
        note = (f"humanoid marionette tracking (benchmarks/optimizer.py), N = {N} steps of 0.01 s, "
                f"{'no constraints' if label == 'unconstrained' else 'tension >= 0.5 N on all six strings'}: "
                f"{r.reason}, {r.iterations} iterations, cost {r.cost:.6f}; lowest tension per string "
                f"{', '.join(f'{v:.2f}' for v in T.min(axis=0))} N; one run"
                + ("; target <= 30 s" if label == "tension" else ""))
        figs.append(Figure(f"humanoid.{label}.time_to_convergence", el, "s", "constraints", None, note))
        figs.append(Figure(f"humanoid.{label}.iterations", r.iterations, "iterations", "constraints", None, note))
        figs.append(Figure(f"humanoid.{label}.min_tension", float(np.min(T)), "N", "constraints", None, note))
    return figs
