"""One solve of an optimization problem: the projection operator or DMOCC from a start, and one result record.

:func:`solve` is the solve sequence every caller shares — the spec tool (:func:`.spec_problem.solve_spec`),
the optimizer node (``nodes/optimizer.py``), the benchmarks and the reproductions: it evaluates the start
(X0, U0) (its cost without barriers and its largest constraint violation), runs the problem's method —
the projection-operator optimizer (thesis ch. 6, :mod:`.projection`) or DMOCC (direct transcription solved by
IPOPT, seed 002 §3, :mod:`.dmocc`) — designs the tracking gains along the result
(:meth:`~.problem.Problem.with_gains`) and leaves the one record of :mod:`.report` in the trajectory's
``info``. It returns a :class:`Result`.

Start (``problem.start``, :data:`~.problem.STARTS`): with inequality constraints the projection operator's
iterates stay inside them once one is (:mod:`.projection`), so from a start that satisfies them the path of
iterates can end at a limit it cannot get around: the reach-and-point motion from the arm hanging still
(``config/motions/reach_point.yaml``) presses the carriage against its range end for 3.7 s and misses the
motion by 46° (a line search that finds no decrease), while the optimum, well inside the range, is reached
from the unconstrained optimum in 4 iterations. So by default (``unconstrained``) the problem without its
inequality constraints is solved first from the start — an initial-trajectory stage of the run, reported in
``stages`` — and the constrained one from that optimum, whose first iterates the barrier's quadratic
extension brings inside the constraints (``docs/python_api.md``); when that stage does not converge (nor reach
its iteration cap) the constrained problem starts from the start itself. On every motion of the library where
both converge they reach the same optimum (``docs/motions.md``). ``initial``: the constrained problem straight
from the start. DMOCC starts from the start (IPOPT needs no feasible start).

Anytime: ``should_stop()`` is polled every iteration (cancel) and the deadline bounds the solver; either way
the best trajectory so far comes back (one that satisfies the constraints when the start or an iterate did,
:mod:`.projection`; ``summary['constraints_satisfied']`` says whether it does).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from marionette_control.ocp.dmocc import OPTIMIZATION_METHODS, DmoccOptions, solve_problem
from marionette_control.ocp.embedding import StageResult
from marionette_control.ocp.problem import Problem
from marionette_control.ocp.projection import IterationRecord, OptimizationResult, ProjectionOptimizer
from marionette_control.ocp.report import ConvergenceHistory, convergence_history, record
from marionette_control.trajectory import Trajectory

#: the shortest budget (s) a deadline leaves the solver, when the run before it used up the rest
MIN_BUDGET = 1e-3
#: the name of the unconstrained stage in a result's ``stages``
UNCONSTRAINED_STAGE = "without inequality constraints"


@dataclass
class Result:
    """What a solve produced (one shape for every caller).

    problem : the :class:`~.problem.Problem` solved;  method : ``projection`` or ``dmocc``
    result : the solver's :class:`~.projection.OptimizationResult` (a :class:`~.dmocc.DmoccResult` with
        DMOCC's statistics)
    trajectory : the result (X, U) with its tracking gains K, their design record and the :mod:`.report` record
        in ``info``
    initial_cost, initial_violation : the start's cost without barriers and largest normalized constraint
        violation
    stages : the initial-trajectory stages that made the start (embedding, relaxation, penalty, as given; then the
        optimum without the inequality constraints, module docstring)
    retiming : the :class:`~.retiming.Retiming` when the solve re-timed the motion (:func:`.retiming.solve_retimed`)
    solve_time : s of the solver's calls alone (the projection optimizer with its unconstrained stage, or DMOCC's
        transcription and IPOPT): what a benchmark times
    """

    problem: Problem
    method: str
    result: OptimizationResult
    trajectory: Trajectory
    initial_cost: float
    initial_violation: float
    stages: list = field(default_factory=list)
    solve_time: float = 0.0
    retiming: Optional[object] = None

    @property
    def summary(self) -> dict:
        """The record's summary (:mod:`.report`)."""
        return self.trajectory.info["summary"]

    @property
    def history(self) -> ConvergenceHistory:
        """The iterations in per-iterate form (an answer's ConvergenceData)."""
        return convergence_history(self.result, self.initial_cost, self.initial_violation)


def solve(problem: Problem, X0: np.ndarray, U0: np.ndarray, method: Optional[str] = None, *,
          dmocc: Optional[DmoccOptions] = None, deadline: Optional[float] = None, started: Optional[float] = None,
          stages: Sequence = (), callback: Optional[Callable[[IterationRecord], None]] = None,
          should_stop: Optional[Callable[[], bool]] = None, log: Optional[Callable[[str], None]] = None,
          stage_callback: Optional[Callable[[str, IterationRecord], None]] = None) -> Result:
    """Solves ``problem`` from the dynamically feasible start (X0 (N+1, nx), U0 (N, nU)) (module docstring).

    method : ``projection`` or ``dmocc`` (:data:`~.dmocc.OPTIMIZATION_METHODS`); None: the problem's own
        (``problem.method``).
    dmocc : DMOCC's settings (default: IPOPT capped at the problem's ``max_iterations``); their deadline is the
        solve's.
    deadline : s from ``started`` (a ``time.perf_counter()`` reading; default: now) the solver may run until
        (at least :data:`MIN_BUDGET`), the unconstrained stage's included; None: the problem's options' own, counted
        from ``started`` with an unconstrained stage, else from the solver's start.
    stages : the initial-trajectory stages that made the start, reported with the result.
    callback(record) : after every iteration of the final solve;  stage_callback(stage, record) : after every
    iteration of the unconstrained stage (module docstring, "Start");  should_stop() : polled every iteration
    (cancel);  log(message) : the start's cost and the solver, before it runs.
    """
    started = time.perf_counter() if started is None else started
    method = problem.method if method is None else method
    if method not in OPTIMIZATION_METHODS:
        raise ValueError(f"unknown optimization method {method!r}; use one of {', '.join(OPTIMIZATION_METHODS)}")
    optimizer = ProjectionOptimizer(problem.system, problem.cost, problem.options)
    initial_cost, initial_violation = optimizer.evaluate(X0, U0)
    say = log or (lambda message: None)
    say(f"initial trajectory cost {initial_cost:.6g}" + (f", largest constraint violation {initial_violation:.3g}"
                                                         if sum(len(c) for c in problem.constraints) else ""))
    stages = list(stages)
    t = time.perf_counter()
    if method == "projection" and problem.start == "unconstrained" and problem.constraints:
        if deadline is None and problem.options.deadline is not None:   # the stage's time counts too
            deadline = problem.options.deadline
        X0, U0, stage = _unconstrained_stage(problem, X0, U0, deadline, started, stage_callback, should_stop)
        stages.append(stage)
        say(f"{UNCONSTRAINED_STAGE}: {stage.result.reason} after {stage.result.iterations} iterations (cost "
            f"{stage.result.cost:.6g}); the constrained problem from "
            + ("there" if X0 is stage.result.X else "the initial trajectory"))
    if deadline is not None:
        optimizer.options = dataclasses.replace(
            problem.options, deadline=max(deadline - (time.perf_counter() - started), MIN_BUDGET))
    if method == "dmocc":
        options = dmocc if dmocc is not None else DmoccOptions(max_iterations=optimizer.options.max_iterations)
        options = dataclasses.replace(options, deadline=optimizer.options.deadline)
        say(f"DMOCC (IPOPT), final condition {options.final}")
        result = solve_problem(problem, X0, U0, options, callback, should_stop)
    else:
        result = optimizer.optimize(X0, U0, callback=callback, should_stop=should_stop)
    solve_time = time.perf_counter() - t
    trajectory = problem.with_gains(result.X, result.U)
    trajectory.info.update(record(problem, result, method, initial_cost, time.perf_counter() - started, stages))
    return Result(problem, method, result, trajectory, initial_cost, initial_violation, stages, solve_time)


def _unconstrained_stage(problem: Problem, X0: np.ndarray, U0: np.ndarray, deadline: Optional[float], started: float,
                         callback, should_stop) -> tuple:
    """(X, U, StageResult): the optimum of ``problem`` without its inequality constraints from (X0, U0), the
    constrained solve's start (module docstring, "Start"); (X0, U0) themselves when the stage neither converged nor
    reached its iteration cap (stopped by cancel or deadline, or a line search that found no decrease: the
    wave-like elbow swings slowed to 7.77 s stall at cost 9679 that way, where the optimum costs 8.74, and the
    constrained solve from there stalls too)."""
    options = problem.options
    if deadline is not None:
        options = dataclasses.replace(options, deadline=max(deadline - (time.perf_counter() - started), MIN_BUDGET))
    optimizer = ProjectionOptimizer(problem.system, problem.cost.without_barriers(), options)
    result = optimizer.optimize(X0, U0, callback=None if callback is None else
                                (lambda record: callback(UNCONSTRAINED_STAGE, record)), should_stop=should_stop)
    stage = StageResult(UNCONSTRAINED_STAGE, result)
    if result.reason not in ("converged", "max_iterations"):
        return X0, U0, stage
    return result.X, result.U, stage


__all__ = ["Result", "solve", "MIN_BUDGET", "UNCONSTRAINED_STAGE"]
