"""Optimizer group: projection-operator trajectory optimization and the Riccati sweeps (issue 4).

Scenarios (benchmarks/peers/trep_optimizer.py measures trep.discopt on the same ones):

* ``pendulum.swing_up.{newton,steepest}``: seed 001 §VIII-A (Δt = 0.1, N = 100, θ_ref = 0
  then π, Q = diag(1000, 1), R = 50, from the hanging trajectory), 4 quasi-Newton
  iterations then Newton or steepest descent to |Dh∘ζ| < 1e-6: wall time to convergence
  (median of repeated runs for Newton, one run for steepest), steps, cost.
* ``humanoid.tracking``: thesis §6.7.3 in the style of trep's puppet-optimization example:
  desired = the configurations of the simulated string walk (momenta, kinematic velocities
  and inputs zero), Q = 100 on the 22 dynamic configurations and 1 on the rest, R = 0.1,
  N steps of 0.01 s (N = 200; 60 with --quick), from the initial pose with the strings
  held still; 4 quasi-Newton iterations then Newton: seconds per quasi-Newton and per
  Newton iteration (mean over a run's iterations of each kind, median of 3 runs (1 with
  --quick); requested Newton iterations that fell back to quasi-Newton on an indefinite
  model are reported separately), the time to convergence and the cost after the first
  iteration (the same start and line search as trep, so it must agree).
* ``humanoid.tracking.threads{1,2}``: the same solve with ``threads`` = 1 and 2 (the core's loops over the
  steps split over two workspaces, issue 28), the two alternating in every round so that the shared
  machine's load falls on both alike: seconds per accepted iteration (median over the rounds of a run's mean)
  and the batch linearization and contracted second order of the 200 steps alone (medians over rounds).
  Both are solved by :func:`marionette_control.ocp.optimizer.solve`; the times are its solver's call alone
  (``Result.solve_time``: the tracking gains and the result record it adds afterwards are not timed).
* ``humanoid.tracking_1000.{time_to_convergence,iteration}``: the same tracking at N = 1000 (the thesis's
  3D-marionette tracking, §6.7.3, issue 28), one run (not with --quick).
* ``humanoid.tv_lqr_1000`` / ``tv_lq_1000``: the 1000-step LQR of the projection gains
  (Q = R = I) and the LQ of a descent direction on the walk's linearization (80 states,
  18 inputs), as a caller makes them (validation and output allocation included),
  computing what trep's ``solve_tv_lqr``/``solve_tv_lq`` return (every gain, P(0) only:
  ``full_P=False``); variants with every P(k) (``@full_P``) and as the optimizer calls
  them (no input checks, output arrays reused).
"""

from __future__ import annotations

import statistics

import numpy as np

from benchmarks.registry import Context, Figure, benchmark_group, median_ms, time_once

PEER = "trep-optimizer"


def swing_up_problem(options=None):
    """(problem, X0, U0): seed 001 §VIII-A's swing-up (no inequality constraints; ``options``:
    OptimizerOptions) from the hanging trajectory."""
    from marionette_control.model import library
    from marionette_control.ocp.problem import ConstraintOptions, build

    N, dt = 100, 0.1
    Xd = np.zeros((N + 1, 2))
    Xd[N // 2:, 0] = np.pi
    Q = np.array([1000.0, 1.0])
    problem = build(library.get("pendulum"), dt, np.arange(N + 1) * dt, Xd, np.zeros((N, 1)), np.zeros(2), Q,
                    np.array([50.0]), Q, constraints=ConstraintOptions(enabled=False), options=options)
    return problem, np.zeros((N + 1, 2)), np.zeros((N, 1))


def humanoid_tracking_problem(N: int, options=None):
    """(problem, X0, U0): thesis §6.7.3's tracking of the simulated string walk (module docstring; no inequality
    constraints; ``options``: OptimizerOptions) from the initial pose with the strings held still."""
    from marionette_control import _core
    from marionette_control.model import library
    from marionette_control.model.library import humanoid_marionette as hm
    from marionette_control.ocp.problem import ConstraintOptions, build

    m = library.get("humanoid_marionette")
    dt = 0.01
    ds = _core.DiscreteSystem(m, dt)
    q0 = hm.initial_configuration(m)
    x0 = ds.state_from_configs(q0, q0)
    Xw, _ = ds.simulate(x0, hm.string_walk_inputs(m, q0, dt, N))
    Xd = np.zeros_like(Xw)
    Xd[:, :m.nq] = Xw[:, :m.nq]
    Q = np.r_[np.full(m.nd, 100.0), np.ones(m.nk), np.ones(m.nd), np.ones(m.nk)]
    U0 = np.tile(q0[m.nd:], (N, 1))
    X0, _ = ds.simulate(x0, U0)
    problem = build(m, dt, np.arange(N + 1) * dt, Xd, np.zeros((N, m.nU)), x0, Q, np.full(m.nU, 0.1), Q,
                    constraints=ConstraintOptions(enabled=False), options=options, system=ds)
    return problem, X0, U0


def iteration_seconds(history):
    """Per-iteration wall times from the records' elapsed stamps (the first from the start)."""
    out, prev = [], 0.0
    for h in history:
        out.append((h, h.elapsed - prev))
        prev = h.elapsed
    return out


def _thread_figures(ctx: Context, N: int, problem, X0, U0) -> list[Figure]:
    """``humanoid.tracking.threads{1,2}.*`` (module docstring): threads 1 and 2 alternating, first one then the
    other, then the reverse."""
    import dataclasses

    from marionette_control.ocp.optimizer import solve

    rounds, batch_rounds = (1, 3) if ctx.quick else (4, 12)
    ctx.log(f"optimizer: humanoid tracking with threads 1 and 2, N = {N} ({rounds} rounds of solves, "
            f"{batch_rounds} of batch loops)")
    base, ds = problem.options, problem.system
    Z = np.random.default_rng(0).standard_normal((N, ds.model.nx))
    per_it = {1: [], 2: []}
    loops = {(kind, th): [] for kind in ("linearize", "second_order") for th in (1, 2)}
    for i in range(max(rounds, batch_rounds)):
        for th in ((1, 2) if i % 2 == 0 else (2, 1)):
            if i < rounds:
                problem.options = dataclasses.replace(base, threads=th)
                r = solve(problem, X0, U0).result
                per_it[th].append(statistics.mean(s for h, s in iteration_seconds(r.history) if h.step_length > 0))
            loops[("linearize", th)] += time_once(lambda: ds.linearize_trajectory(X0, U0, threads=th), 1, 0)
            loops[("second_order", th)] += time_once(
                lambda: ds.second_order_trajectory(X0, U0, Z, None, threads=th), 1, 0)
    problem.options = base
    out = []
    for th in (1, 2):
        times = per_it[th]
        out.append(Figure(f"humanoid.tracking.threads{th}.iteration", statistics.median(times), "s", "optimizer", None,
                          f"threads={th}: seconds per accepted iteration of the N = {N} tracking (mean over a run), "
                          f"median of {len(times)} runs alternating with threads={3 - th} (min {min(times):.3g}, "
                          f"max {max(times):.3g})"))
        for kind in ("linearize", "second_order"):
            ms = loops[(kind, th)]
            out.append(Figure(f"humanoid.tracking.threads{th}.{kind}", median_ms(ms), "ms", "optimizer", None,
                              f"threads={th}: the core's batch {kind.replace('_', ' ')} of the {N} steps, median of "
                              f"{len(ms)} calls alternating with threads={3 - th} (min {1e3 * min(ms):.3g} ms, "
                              f"max {1e3 * max(ms):.3g} ms)"))
    return out


def _tracking_1000(ctx: Context) -> list[Figure]:
    """``humanoid.tracking_1000.*``: the §6.7.3 tracking (module docstring) at N = 1000 (10 s of the walk), one
    run: the time to convergence (the solver's call alone) and the mean seconds per accepted iteration."""
    from marionette_control.ocp.optimizer import solve
    from marionette_control.ocp.projection import OptimizerOptions

    N = 1000
    ctx.log(f"optimizer: humanoid tracking, N = {N}, 4 quasi-Newton then Newton to convergence (one run)")
    problem, X0, U0 = humanoid_tracking_problem(N, OptimizerOptions(max_iterations=40))
    res = solve(problem, X0, U0)
    r = res.result
    note = (f"N = {N} steps of 0.01 s: {r.reason} after {r.steps} steps ({[h.method[0] for h in r.history]}), cost "
            f"{r.cost:.8f} (start {res.initial_cost:.6f}), {r.projections} line-search projections; one run")
    per = [s for h, s in iteration_seconds(r.history) if h.step_length > 0]
    return [Figure("humanoid.tracking_1000.time_to_convergence", res.solve_time, "s", "optimizer", None, note),
            Figure("humanoid.tracking_1000.iteration", statistics.mean(per), "s", "optimizer", None,
                   f"mean seconds per accepted iteration of the same run; {note}")]


@benchmark_group("optimizer", "projection-operator optimizer (pendulum swing-up, humanoid tracking) and Riccati sweeps")
def optimizer(ctx: Context) -> list[Figure]:
    from marionette_control.lq import riccati as ric
    from marionette_control.ocp.optimizer import solve
    from marionette_control.ocp.projection import OptimizerOptions

    figs: list[Figure] = []

    def fig(name, value, unit, notes):
        figs.append(Figure(name, float(value), unit, "optimizer", None, notes))

    # -- pendulum swing-up -------------------------------------------------------------------
    runs = {"newton": 2 if ctx.quick else 7, "steepest": 0 if ctx.quick else 1}
    for method, reps in runs.items():
        if reps == 0:
            continue
        ctx.log(f"optimizer: pendulum swing-up, 4 quasi-Newton then {method} ({reps} runs)")
        problem, X0, U0 = swing_up_problem(OptimizerOptions(schedule=(("quasi_newton", 4), (method, None)),
                                                            max_iterations=3000))
        results, times = [], []
        for _ in range(reps + (1 if reps > 1 else 0)):  # a warm-up run when repeating
            res = solve(problem, X0, U0)
            results.append(res.result)
            times.append(res.solve_time)
        if reps > 1:
            results, times = results[1:], times[1:]
        r = results[-1]
        note = (f"4 quasi-Newton then {method} to |Dh∘ζ| < 1e-6; converged={r.converged}, {r.steps} steps "
                f"({r.iterations} direction evaluations), cost {r.cost:.10f}; "
                + (f"median of {reps} runs" if reps > 1 else "one run"))
        fig(f"pendulum.swing_up.{method}.time_to_convergence", statistics.median(times), "s", note)
        fig(f"pendulum.swing_up.{method}.steps", r.steps, "iterations", note)
        fig(f"pendulum.swing_up.{method}.cost", r.cost, "cost", note)

    # -- humanoid tracking (thesis §6.7.3 style) -------------------------------------------------
    N = 60 if ctx.quick else 200
    runs = 1 if ctx.quick else 3
    ctx.log(f"optimizer: humanoid tracking, N = {N}, 4 quasi-Newton then Newton to convergence ({runs} runs)")
    problem, X0, U0 = humanoid_tracking_problem(N, OptimizerOptions(max_iterations=40))
    results, totals = [], []
    for _ in range(runs):  # the same deterministic run repeated: medians over the runs
        res = solve(problem, X0, U0)
        results.append(res.result)
        totals.append(res.solve_time)
    r, total, start_cost = results[0], statistics.median(totals), res.initial_cost
    pers = [iteration_seconds(res.history) for res in results]
    kinds = {"quasi_newton": lambda h: h.requested == h.method == "quasi_newton",
             "newton": lambda h: h.method == "newton",
             "newton_fallback": lambda h: h.requested == "newton" and h.method == "quasi_newton"}
    what = {"quasi_newton": "quasi-Newton iteration (linearization, projection gains, LQ, Armijo projections)",
            "newton": "Newton iteration (linearization, projection gains, adjoint, contracted second order, LQ, "
                      "Armijo projections)",
            "newton_fallback": "requested Newton iteration whose model was indefinite, completed as quasi-Newton "
                               "(includes the wasted second-order work)"}
    for kind, sel in kinds.items():
        means = [statistics.mean(secs) for secs in ([s for h, s in per if sel(h) and h.step_length > 0]
                                                    for per in pers) if secs]
        if means:
            count = sum(1 for h, _ in pers[0] if sel(h) and h.step_length > 0)
            fig(f"humanoid.tracking.{kind}_iteration", statistics.median(means), "s",
                f"one {what[kind]} of the §6.7.3-style tracking, N = {N} steps of 0.01 s; mean over the "
                f"{count} iterations of a run, median of {runs} runs")
    fig("humanoid.tracking.time_to_convergence", total, "s",
        f"N = {N}: {r.reason} after {r.steps} steps ({[h.method[0] for h in r.history]}), cost {r.cost:.8f}, "
        f"{r.projections} line-search projections; median of {runs} runs")
    if r.history:
        fig("humanoid.tracking.cost_after_first_iteration", r.history[0].cost, "cost",
            f"cost after the first quasi-Newton step (start {start_cost:.6f}), N = {N}")

    figs += _thread_figures(ctx, N, problem, X0, U0)
    if not ctx.quick:
        figs += _tracking_1000(ctx)

    # -- 1000-step Riccati sweeps -----------------------------------------------------------------
    from benchmarks.core import humanoid_setup

    ctx.log("optimizer: 1000-step TV-LQR / LQ on the walk's linearization")
    m, dsh, x0, U = humanoid_setup(1000)
    X, _ = dsh.simulate(x0, U)
    A, B = dsh.linearize_trajectory(X, U)
    n, mu = m.nx, m.nU
    I_x, I_u = np.eye(n), np.eye(mu)
    q, rr = np.ones((1000, n)), np.ones((1000, mu))
    reps = 3 if ctx.quick else 11
    lqr_reuse = ric.tv_lqr(A, B, I_x, I_u, I_x, full_P=False)
    lq_reuse = ric.tv_lq(A, B, I_x, None, I_u, q, rr, I_x, np.ones(n), full_P=False)
    cases = [
        ("humanoid.tv_lqr_1000", lambda: ric.tv_lqr(A, B, I_x, I_u, I_x, full_P=False),
         "tv_lqr(A, B, Q = I, R = I, Qf = I, full_P=False): validation + sweep + new K (1000, 18, 80) and P(0), "
         "what trep's solve_tv_lqr computes and returns"),
        ("humanoid.tv_lqr_1000@full_P",
         lambda: ric.tv_lqr(A, B, I_x, I_u, I_x),
         "tv_lqr(A, B, Q = I, R = I, Qf = I): also every P(k), a new (1001, 80, 80) array (51 MB)"),
        ("humanoid.tv_lqr_1000@no_check,reused_out",
         lambda: ric.tv_lqr(A, B, I_x, I_u, I_x, check_inputs=False, out=lqr_reuse, full_P=False),
         "as the optimizer calls it: check_inputs=False, full_P=False, output arrays reused"),
        ("humanoid.tv_lq_1000", lambda: ric.tv_lq(A, B, I_x, None, I_u, q, rr, I_x, np.ones(n), full_P=False),
         "tv_lq(A, B, Q = I, S = None, R = I, q, r, Qf = I, qf, full_P=False): the LQ of a descent direction, "
         "new K, C, b, c and P(0)"),
        ("humanoid.tv_lq_1000@full_P", lambda: ric.tv_lq(A, B, I_x, None, I_u, q, rr, I_x, np.ones(n)),
         "as humanoid.tv_lq_1000 with every P(k)"),
        ("humanoid.tv_lq_1000@no_check,reused_out",
         lambda: ric.tv_lq(A, B, I_x, None, I_u, q, rr, I_x, np.ones(n), check_inputs=False, out=lq_reuse,
                           full_P=False),
         "as the optimizer calls it: check_inputs=False, full_P=False, output arrays reused"),
    ]
    for name, fn, note in cases:
        fig(name, median_ms(time_once(fn, reps)), "ms", f"{note}; median of {reps} after a warm-up; the "
            f"core's sweep (structured: 44 dense rows, 62 nonzero columns, 62 panel rows) on scipy's BLAS")
    args = ric._validate_problem(A, B, I_x, I_u, I_x, check_values=False)
    fig("humanoid.tv_lqr_1000.numpy_reference", median_ms(time_once(
        lambda: ric._sweep_numpy(*args[:9], linear=False), max(3, reps // 3))), "ms",
        "the dense numpy recursion kept as the reference implementation (riccati._sweep_numpy), for scale")

    peer = ctx.peer(PEER)
    if peer is not None:
        for f in peer.get("figures", []):
            figs.append(Figure(f["name"], f["value"], f["unit"], "optimizer", "trep", f.get("notes", "")))
    return figs
