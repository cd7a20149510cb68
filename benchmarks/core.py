"""Core group: the humanoid marionette's one-step map and its derivatives (issue 2).

Scenario: seed 001 §VIII-B (``docs/models.md``, humanoid_marionette): 22 dynamic +
18 kinematic configurations, 6 strings, dt = 0.01, start at rest
(q0 = q1 = the initial pose), string-walk inputs, 1000 steps; Newton tolerance
1e-10 (trep's default). Per-step figures are medians over every step of the
trajectory (single calls at the states of a simulated trajectory, so each call
solves that step's DEL from the cold guess q_{k+1} = q_k, as trep's DSystem.set
does); whole-trajectory figures are medians over repeated calls. Every
derivative figure includes the step's Newton solve (the same holds for the
peer's). Times include the Python call (argument conversion) — the way they are
used. The constraint-force variants (lambda_k and its derivatives with the first
order, a covector W of lambda in the second order; issue 11) are timed in the same
run as the plain calls, and their ratio to them is reported. So is the same model
with the symmetric forcing (``humanoid.symmetric.*``; f- = f+ = dt F/2 instead of
thesis (4.12a)'s f- = dt F, f+ = 0, issue 27; the humanoid's forces are its joint
damping): the same calls along its own simulated trajectory, each paired with the
thesis model's call (per step: the two calls at step k back to back; whole
trajectories: interleaved), and the medians of the ratios symmetric / thesis.
"""

from __future__ import annotations

import statistics

import numpy as np

from benchmarks.registry import Context, Figure, benchmark_group, median_ms, time_calls, time_once

DT = 0.01
TOLERANCE = 1e-10


def humanoid_setup(steps: int, forcing: str = "thesis"):
    from marionette_control import _core
    from marionette_control.model import library
    from marionette_control.model.library import humanoid_marionette as hm

    m = library.get("humanoid_marionette", forcing=forcing)
    q0 = hm.initial_configuration(m)
    U = hm.string_walk_inputs(m, q0, DT, steps)
    ds = _core.DiscreteSystem(m, DT, tolerance=TOLERANCE)
    x0 = ds.state_from_configs(q0, q0)
    return m, ds, x0, U


def interleaved(plain, variant, repeats: int) -> tuple[list[float], list[float]]:
    """Wall times (s) of ``plain()`` and ``variant()`` called alternately ``repeats`` times each (after one
    warm-up call of each), so that a change of the machine's load affects both alike."""
    plain()
    variant()
    a, b = [], []
    for _ in range(repeats):
        a += time_once(plain, 1, warmup=0)
        b += time_once(variant, 1, warmup=0)
    return a, b


def paired(plain, variant, indices, sweeps: int) -> tuple[list[float], list[float]]:
    """Per-call wall times (s) of ``plain(i)`` and ``variant(i)``, the two calls at each index back to back (which
    one goes first alternates, so that neither gains from caches the other warmed), over ``sweeps`` sweeps of
    ``indices`` (after one warm-up call of each)."""
    indices = list(indices)
    plain(indices[0])
    variant(indices[0])
    a, b = [], []
    for s in range(sweeps):
        for j, i in enumerate(indices):
            if (j + s) % 2:
                b += time_calls(variant, (i,), 1, warmup=0)
                a += time_calls(plain, (i,), 1, warmup=0)
            else:
                a += time_calls(plain, (i,), 1, warmup=0)
                b += time_calls(variant, (i,), 1, warmup=0)
    return a, b


def median_ratio(variant: list[float], plain: list[float]) -> float:
    """Median over the interleaved pairs of variant / plain time."""
    return float(statistics.median(v / p for v, p in zip(variant, plain)))


@benchmark_group("core", "humanoid marionette: VI step, first-order and contracted second-order linearization")
def core(ctx: Context) -> list[Figure]:
    steps = 200 if ctx.quick else 1000
    sweeps = 2 if ctx.quick else 5
    repeats = 3 if ctx.quick else 15
    so_repeats = 2 if ctx.quick else 5
    m, ds, x0, U = humanoid_setup(steps)
    X, iters = ds.simulate(x0, U)
    Z = np.random.default_rng(1).standard_normal((steps, m.nx))
    W = np.random.default_rng(2).standard_normal((steps, m.nc))
    ks = range(steps)
    per = f"median over {steps} steps x {{}} sweeps of single calls"
    whole = f"median of {{}} calls on the {steps}-step trajectory"
    figs: list[Figure] = []

    def fig(name, value, unit, notes):
        figs.append(Figure(name, value, unit, "core", None, notes))

    _, dss, xs0, _ = humanoid_setup(steps, "symmetric")
    Xs, iters_s = dss.simulate(xs0, U)
    sym = "the symmetric forcing's model along its own trajectory, each call paired with the thesis model's; "

    ctx.log(f"core: humanoid, {steps} steps, per-step sweeps (thesis and symmetric forcing paired)")
    for name, call, n, notes in (
            ("vi_step", lambda d, X_, k: d.step(X_[k], U[k]), sweeps, "ds.step(x_k, u_k); {}; target <= 0.3 ms"),
            ("first_order", lambda d, X_, k: d.linearize(X_[k], U[k]), sweeps,
             "ds.linearize(x_k, u_k) -> x_{{k+1}}, A, B (incl. the step); {}; target <= 0.3 ms"),
            ("second_order_contracted", lambda d, X_, k: d.second_order_contracted(X_[k], U[k], Z[k]),
             max(1, sweeps // 2), "ds.second_order_contracted(x_k, u_k, z_k) -> z^T D2f (xx, xu, uu), incl. step and "
                                  "first order; {}; target <= 3 ms")):
        t, ts = paired(lambda k: call(ds, X, k), lambda k: call(dss, Xs, k), ks, n)
        fig(f"humanoid.{name}", median_ms(t), "ms", notes.format(per.format(n)))
        fig(f"humanoid.symmetric.{name}", median_ms(ts), "ms", sym + notes.format(per.format(n)))
        fig(f"humanoid.symmetric.{name}.ratio", median_ratio(ts, t), "x",
            f"humanoid.{name}: symmetric / thesis forcing, median of the ratios of the paired calls")

    ctx.log("core: humanoid, whole-trajectory calls")
    t_sim = time_once(lambda: ds.simulate(x0, U), repeats)
    t_lin, t_lin_cf = interleaved(lambda: ds.linearize_trajectory(X, U),
                                  lambda: ds.linearize_trajectory(X, U, constraint_forces=True), repeats)
    t_so, t_so_w = interleaved(lambda: ds.second_order_trajectory(X, U, Z),
                               lambda: ds.second_order_trajectory(X, U, Z, W), so_repeats)
    t_cf = time_once(lambda: ds.constraint_forces_trajectory(X, U), repeats)
    fig("humanoid.vi_step.from_simulate", median_ms(t_sim, steps), "ms",
        f"ds.simulate total / {steps}; " + whole.format(repeats))
    fig("humanoid.first_order.from_linearize_trajectory", median_ms(t_lin, steps), "ms",
        f"ds.linearize_trajectory total / {steps} (each step at its solution X[k+1]); " + whole.format(repeats))
    fig("humanoid.second_order_contracted.from_second_order_trajectory", median_ms(t_so, steps), "ms",
        f"ds.second_order_trajectory total / {steps}; " + whole.format(so_repeats))
    fig("humanoid.first_order_constraint_forces.from_linearize_trajectory", median_ms(t_lin_cf, steps), "ms",
        f"ds.linearize_trajectory(X, U, constraint_forces=True) total / {steps}: A, B, Lam, Lam_x, Lam_u; "
        + whole.format(repeats))
    fig("humanoid.first_order_constraint_forces.overhead", median_ratio(t_lin_cf, t_lin), "x",
        "linearize_trajectory with constraint_forces=True / without: median of the ratios of interleaved calls")
    fig("humanoid.second_order_contracted_lambda.from_second_order_trajectory", median_ms(t_so_w, steps), "ms",
        f"ds.second_order_trajectory(X, U, Z, W) total / {steps}: Z^T D2f + W^T D2lambda; " + whole.format(so_repeats))
    fig("humanoid.second_order_contracted_lambda.overhead", median_ratio(t_so_w, t_so), "x",
        "second_order_trajectory with W / without: median of the ratios of interleaved calls")
    fig("humanoid.constraint_forces.from_constraint_forces_trajectory", median_ms(t_cf, steps), "ms",
        f"ds.constraint_forces_trajectory(X, U) total / {steps} (each step at its solution X[k+1]); "
        + whole.format(repeats))
    fig(f"humanoid.simulate_{steps}", median_ms(t_sim), "ms", f"ds.simulate, {steps} steps; " + whole.format(repeats))
    fig(f"humanoid.linearize_{steps}", median_ms(t_lin), "ms",
        f"ds.linearize_trajectory, {steps} steps; " + whole.format(repeats))
    fig("humanoid.newton_iterations", float(statistics.median(iters)), "iterations",
        "median Newton iterations per step in ds.simulate (guess: linear extrapolation)")
    cold_iters = [ds.step(X[k], U[k])[1] for k in ks]
    fig("humanoid.newton_iterations.cold", float(statistics.median(cold_iters)), "iterations",
        "median Newton iterations per single ds.step call (cold guess q_{k+1} = q_k)")

    ctx.log("core: humanoid, whole-trajectory calls, thesis and symmetric forcing interleaved")
    for what, call, reps in (("simulate", lambda d, X_: d.simulate(X_[0], U), repeats),
                             ("linearize_trajectory", lambda d, X_: d.linearize_trajectory(X_, U), repeats),
                             ("second_order_trajectory", lambda d, X_: d.second_order_trajectory(X_, U, Z),
                              so_repeats)):
        t_th, t_sy = interleaved(lambda: call(ds, X), lambda: call(dss, Xs), reps)
        fig(f"humanoid.symmetric.{what}", median_ms(t_sy, steps), "ms",
            f"ds.{what} total / {steps}; " + sym + whole.format(reps))
        fig(f"humanoid.symmetric.{what}.ratio", median_ratio(t_sy, t_th), "x",
            f"ds.{what}: symmetric / thesis forcing, median of the ratios of interleaved calls")
    fig("humanoid.symmetric.newton_iterations", float(statistics.median(iters_s)), "iterations",
        "median Newton iterations per step in ds.simulate, symmetric forcing")

    peer = ctx.peer("trep")
    if peer is not None:
        for f in peer.get("figures", []):
            if f["name"].startswith("humanoid."):
                figs.append(Figure(f["name"], f["value"], f["unit"], "core", "trep", f.get("notes", "")))
    return figs
