"""DMOCC group: the projection operator, DMOCC and CasADi + IPOPT on the same discrete problems (issue 15).

Problems (each from the same start, the projection optimizer's initial trajectory):

* ``pendulum``: seed 001 §VIII-A's swing-up (the optimizer group's: Δt = 0.1, N = 100, Q = diag(1000, 1),
  R = 50, Q_f = Q, from hanging at rest; optimum 13297.37889);
* ``cartpole``: seed 004 App. A (``config/optimize/seed004_cartpole.yaml``: N = 200, soft terminal
  state; optimum 308.8219);
* ``two_link``: seed 004 §8's two-link arm (``config/optimize/seed004_two_link.yaml``: N = 1000, effort with a
  soft terminal state; optimum 0.3220448), from the keyframes made dynamically feasible;
* ``humanoid``: the optimizer group's humanoid tracking (thesis §6.7.3 style, :func:`benchmarks.optimizer.
  humanoid_tracking_problem`) shortened to N = 20 (0.2 s): the peer's symbolic set-up of N = 200 did not end
  within 10 minutes; at N = 20 it takes about 75 s. The projection operator and the peer only (one peer run).
* ``wave``: the marionette arm's 8 s wave (``config/optimize/marionette_arm_wave.yaml``: N = 800, the
  string constraint, 14 drive-range, speed, acceleration and string-tension rows per step).

Methods (both through :func:`~marionette_control.ocp.optimizer.solve`): ``projection`` (the projection
operator with the problem's options: the wave's limits by its barrier), ``dmocc`` (IPOPT on the core's exact
derivatives through Python callbacks, :mod:`marionette_control.ocp.dmocc`) and the peer
``casadi+ipopt`` (:mod:`benchmarks.casadi_del`: the same DEL transcribed in CasADi symbols, CasADi's
automatic derivatives, the same variables, start and IPOPT options; checked against the core first).
Figures per problem and method (the projection operator's iterations and projections include its unconstrained
stage, ``Result.stages``, which its time includes too): ``time_to_solution`` (s, median of repeated runs; ours the solver's call,
``Result.solve_time``: from the problem and start to the result, the NLP's construction included, the tracking
gains and result record after it not; the peer's IPOPT solve alone, its expression
graph and ``nlpsol`` set-up reported apart as ``peer_setup``), ``iterations``, ``cost``,
``constraint_violation`` (largest normalized inequality violation), for the transcriptions ``del_residual``,
for the projection operator ``projections_per_iteration`` (its line searches' trials). The peer's time appears
twice (``<problem>.projection.time_to_solution@casadi+ipopt`` and ``<problem>.dmocc.time_to_solution@casadi+ipopt``)
so that the runner reports both ratios.

The peer ``crocoddyl`` (``benchmarks/peers/crocoddyl_fddp.py``, its own venv, ``ctx.peer``) adds FDDP where
its model fits — the pendulum swing-up, the cart-pole and the two-link arm, with Crocoddyl's own Pinocchio models
and integrators (so its optimum is that of another discretization of the same cost), not the wave or the humanoid
(kinematic strings) — paired
with the projection operator's time as ``<problem>.projection.time_to_solution@crocoddyl_fddp...``.
"""

from __future__ import annotations

import statistics

import numpy as np

from benchmarks.registry import Context, Figure, benchmark_group

PEER = "casadi+ipopt"


def _pendulum():
    from benchmarks.optimizer import swing_up_problem

    return (*swing_up_problem(), {}, {"theta": 0})


def _from_spec(name, damping, forces):
    def make():
        from marionette_control.ocp.spec import load_spec
        from marionette_control.ocp.spec_problem import build_problem, initial_trajectory
        from marionette_control.resources import config_dir

        spec = load_spec(config_dir() / "optimize" / name)
        problem = build_problem(spec)
        X0, U0, _ = initial_trajectory(spec, problem)
        return problem, X0, U0, damping, forces
    return make


#: The humanoid's horizon here (module docstring).
HUMANOID_N = 20


def _humanoid():
    from benchmarks.optimizer import humanoid_tracking_problem
    from marionette_control.model.library.humanoid_marionette import DAMPING

    problem, X0, U0 = humanoid_tracking_problem(HUMANOID_N)
    m = problem.model
    return problem, X0, U0, {c: DAMPING for c in m.config_names[:m.nd]}, {}    # on every dynamic configuration


PROBLEMS = {
    "pendulum": _pendulum,
    "cartpole": _from_spec("seed004_cartpole.yaml", {}, {"cart": 0}),
    "two_link": _from_spec("seed004_two_link.yaml", {"theta1": 0.2}, {"theta1": 0, "theta2": 1}),
    "humanoid": _humanoid,
    "wave": _from_spec("marionette_arm_wave.yaml", {"shoulder": 0.02, "elbow": 0.01}, {}),
}
#: Problems solved by the projection operator and the peer only (module docstring).
NO_DMOCC = ("humanoid",)


def _median_run(fn, reps):
    """(the last run's Result, the solver's times of ``reps`` runs)."""
    out, times = None, []
    for _ in range(reps):
        out = fn()
        times.append(out.solve_time)
    return out, times


def _spread(times):
    return f"median of {len(times)} runs (min {min(times):.4g} s, max {max(times):.4g} s)"


@benchmark_group("dmocc", "projection operator, DMOCC and CasADi + IPOPT on the pendulum swing-up, the "
                          "cart-pole, the two-link arm, the humanoid (N = 20) and the constrained wave")
def dmocc(ctx: Context) -> list[Figure]:
    import casadi as ca

    from benchmarks import casadi_del
    from marionette_control.ocp.dmocc import DmoccOptions
    from marionette_control.ocp.optimizer import solve

    figs: list[Figure] = []

    def fig(name, value, unit, notes, peer=None):
        figs.append(Figure(name, float(value), unit, "dmocc", peer, notes))

    reps = {"pendulum": 3 if ctx.quick else 9, "cartpole": 3 if ctx.quick else 7, "two_link": 1 if ctx.quick else 3,
            "humanoid": 1 if ctx.quick else 3, "wave": 1 if ctx.quick else 3}
    for name, make in PROBLEMS.items():
        problem, X0, U0, damping, forces = make()
        ctx.log(f"dmocc: {name} (N = {problem.N}, {reps[name]} runs per method)")
        Lam0 = problem.system.constraint_forces_trajectory(X0, U0) if problem.model.nc else np.zeros((problem.N, 0))

        def projection():
            return solve(problem, X0, U0, "projection")

        def transcription():
            return solve(problem, X0, U0, "dmocc", dmocc=DmoccOptions())

        methods = (("projection", projection),) + ((("dmocc", transcription),) if name not in NO_DMOCC else ())
        for method, fn in methods:
            fn()                                                    # warm-up
            run, times = _median_run(fn, reps[name])
            r = run.result
            staged = [st.result for st in run.stages]       # the projection's unconstrained stage, timed too
            iterations = r.iterations + sum(x.iterations for x in staged)
            note = (f"{r.reason} after {iterations} iterations" + (f" ({r.iterations} after an unconstrained stage)"
                                                                    if staged else "")
                    + f", cost {r.cost:.10g}; {_spread(times)}")
            fig(f"{name}.{method}.time_to_solution", statistics.median(times), "s", note)
            fig(f"{name}.{method}.iterations", iterations, "iterations", note)
            fig(f"{name}.{method}.cost", r.cost, "cost", note)
            fig(f"{name}.{method}.constraint_violation", r.violation, "normalized", note)
            if method == "dmocc":
                fig(f"{name}.dmocc.del_residual", r.del_residual, "residual", note)
            else:
                projections = r.projections + sum(x.projections for x in staged)
                fig(f"{name}.projection.projections_per_iteration", projections / max(1, iterations),
                    "projections", f"{projections} line-search projections in {iterations} iterations "
                    f"(issue 28: ≤ 1.5)")

        sm = casadi_del.symbolic_model(ca, problem.model, problem.dt, damping, forces)
        check = casadi_del.check_against_core(ca, sm, problem.model, problem.system, X0, U0, Lam0)
        ipopt = DmoccOptions().ipopt_options()
        peer_runs = 1 if name in NO_DMOCC else reps[name] + 1          # the first a warm-up when repeating
        runs = [casadi_del.solve(ca, sm, problem, X0, U0, Lam0, ipopt) for _ in range(peer_runs)]
        runs = runs[1:] if peer_runs > 1 else runs
        r = runs[-1]
        solve_times, setups = [x.solve for x in runs], [x.setup for x in runs]
        note = (f"{r.status} after {r.iterations} IPOPT iterations, cost {r.cost:.10g}; IPOPT solve only, "
                f"{_spread(solve_times)}; the same DEL as the core's (largest difference on the start "
                f"{check:.1e})")
        for method, _ in methods:
            fig(f"{name}.{method}.time_to_solution@{PEER}", statistics.median(solve_times), "s", note, PEER)
        fig(f"{name}.peer_setup", statistics.median(setups), "s",
            f"the peer's expression graph and nlpsol creation before its solve; {_spread(setups)}", PEER)
        fig(f"{name}.peer.iterations", r.iterations, "iterations", note, PEER)
        fig(f"{name}.peer.cost", r.cost, "cost", note, PEER)
        fig(f"{name}.peer.constraint_violation", r.violation, "normalized", note, PEER)
        fig(f"{name}.peer.del_residual", r.del_residual, "residual", note, PEER)
    croc = ctx.peer("crocoddyl")
    if croc is not None:
        for f in croc.get("figures", []):
            fig(f["name"], f["value"], f["unit"], f.get("notes", ""), "crocoddyl")
    return figs
