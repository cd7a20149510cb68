"""The record of an optimization's result: what a trajectory file's ``info`` holds and what an answer says.

:func:`record` is the one shape every solve leaves in its trajectory's ``info``
(:func:`~marionette_control.ocp.optimizer.solve`; the spec tool adds the spec and the model's source):

``summary``
    cost, initial_cost, iterations, converged, reason, elapsed (s, the whole run), optimization_elapsed (the
    solver's own), iterations_total (with the initial-trajectory stages), tracking_errors (RMS and max per
    prescribed configuration), input_ranges, constraints_satisfied, max_violation, final_state_error
    (max |x_N − x_d(N)|), ``reserve`` (the margins and tension reserve kept for the feedback), ``trackable``
    (:mod:`.trackability`); with DMOCC del_residual and final_error; with re-timing (:mod:`.retiming`) the
    ``retime_factor``.
``cost``, ``iterations``, ``converged``, ``reason`` (the optimizer's word), ``termination_reason`` (the
interface's, :data:`REASONS`), ``elapsed``, ``source`` (the desired motion), ``method``
    the summary's headline.
``history``
    one record per iteration of the solve (:func:`record_dict`: iteration, cost, descent_norm, step_length,
    method, elapsed; requested where the method fell back; barrier, barrier_weight, violation with constraints).
``stages``
    each initial-trajectory optimization (stage, iterations, cost, reason, extra_weight, max_extra_input, history).
``weights``, ``desired``, ``config_units``, ``optimizer``
    the diagonals Q, R, Q_f; the configuration names, q_d (N+1, nq) and the prescribed ones; the unit of every
    configuration; the optimizer's schedule, tolerance, iteration cap and deadline.
``constraints``
    feasible, violation, the constraint set with the hardware's limits and the reserved ones, and every constraint
    row's worst margin, where and where active, its reserve and worst margin to the hardware's limit
    (:func:`constraints_record`, :func:`~marionette_control.ocp.problem.constraint_report`).
``trackability``
    whether the result follows its motion within the tracking tolerance and its constraints, and what limits it
    (:func:`~marionette_control.ocp.trackability.assess`); ``retime`` the re-timing options; with re-timing,
    ``retiming`` (:meth:`~marionette_control.ocp.retiming.Retiming.to_dict`, added by :mod:`.retiming`).
``dmocc``
    with DMOCC, the solver's statistics (:meth:`~marionette_control.ocp.dmocc.DmoccResult.info`).

A request's answer reads the same result in per-iterate form (:class:`ConvergenceHistory`, the fields of
``marionette_interfaces/ConvergenceData``) and in words (:func:`describe`, :func:`constraint_summary`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from marionette_control.ocp.problem import Problem, config_units
from marionette_control.ocp.projection import IterationRecord, OptimizationResult
from marionette_control.ocp.trackability import assess

#: The optimizer's termination reasons in the interface's vocabulary (ConvergenceData.REASON_*).
REASONS = {"converged": "converged", "max_iterations": "max_iterations", "deadline": "deadline",
           "cancelled": "canceled", "canceled": "canceled", "line_search_failed": "line_search_failed",
           "infeasible": "infeasible"}


def record_dict(r: IterationRecord) -> dict:
    """An iteration record as stored in a trajectory file's ``history``."""
    d = {"iteration": int(r.iteration), "cost": float(r.cost), "descent_norm": float(r.descent_norm),
         "step_length": float(r.step_length), "method": r.method, "elapsed": float(r.elapsed)}
    requested = getattr(r, "requested", "")
    if requested:
        d["requested"] = requested
    if r.barrier_weight:
        d.update(barrier=float(r.barrier), barrier_weight=float(r.barrier_weight), violation=float(r.violation))
    return d


def input_ranges(model, U: np.ndarray) -> dict:
    """{input name: [min, max]} of the inputs U (N, nU)."""
    return {n: [float(U[:, i].min()), float(U[:, i].max())] for i, n in enumerate(model.discrete_input_names)}


def constraints_record(problem: Problem, result: OptimizationResult) -> dict:
    """The constraint part of the record: feasibility, the constraint set and every row's margins."""
    return {"feasible": bool(result.feasible), "violation": float(result.violation),
            "set": problem.summary(), "margins": problem.constraint_report(result.X, result.U, result.Lam)}


def reserve(problem: Problem) -> dict:
    """The reserve a problem keeps for the feedback: {margins: {family: fraction}, tension_reserve: N} (none when
    its constraints are off)."""
    o = problem.constraint_options
    if not problem.constraints:
        return {"margins": {}, "tension_reserve": 0.0}
    return {"margins": dict(o.margins), "tension_reserve": float(o.tension_reserve)}


def record(problem: Problem, result: OptimizationResult, method: str, initial_cost: float, elapsed: float,
           stages: Sequence = ()) -> dict:
    """The record of ``result`` (module docstring): a solve of ``problem`` by ``method`` from a start of cost
    ``initial_cost`` (without barriers) reached through the initial-trajectory ``stages``; ``elapsed`` (s) the
    whole run."""
    model = problem.model
    summary = {
        "cost": float(result.cost), "initial_cost": float(initial_cost), "iterations": result.iterations,
        "converged": bool(result.converged), "reason": result.reason, "elapsed": elapsed,
        "optimization_elapsed": float(result.elapsed),
        "iterations_total": result.iterations + sum(s.result.iterations for s in stages),
        "tracking_errors": problem.tracking_errors(result.X),
        "input_ranges": input_ranges(model, result.U),
        "constraints_satisfied": bool(result.feasible), "max_violation": float(result.violation),
        "final_state_error": float(np.abs(result.X[-1] - problem.Xd[-1]).max()),
        "reserve": reserve(problem),
    }
    constraints = constraints_record(problem, result)
    verdict = assess(summary, constraints, problem.retime.tolerance)
    summary["trackable"] = verdict.trackable
    options = problem.options
    info = {
        "summary": summary,
        "cost": summary["cost"], "iterations": result.iterations, "converged": summary["converged"],
        "reason": result.reason, "termination_reason": REASONS.get(result.reason, result.reason),
        "elapsed": elapsed, "source": problem.source, "method": method,
        "history": [record_dict(r) for r in result.history],
        "stages": [dict(s.summary(), history=[record_dict(r) for r in s.result.history]) for s in stages],
        "weights": {"state": problem.Q.tolist(), "input": problem.R.tolist(), "terminal": problem.Qf.tolist()},
        "desired": {"configs": list(model.config_names), "q": problem.Xd[:, :model.nq].tolist(),
                    "tracked": problem.tracked},
        "config_units": config_units(model),
        "constraints": constraints,
        "trackability": verdict.to_dict(),
        "retime": problem.retime.to_dict(),
        "optimizer": {"schedule": [list(e) for e in options.schedule], "tolerance": options.tolerance,
                      "max_iterations": options.max_iterations, "deadline": options.deadline},
    }
    if method == "dmocc":
        info["dmocc"] = result.info()
        summary.update(del_residual=result.del_residual, final_error=result.final_error)
    return info


# --------------------------------------------------------------------------------------------- the answer


@dataclass
class ConvergenceHistory:
    """Per-iterate arrays (entry 0 = the initial trajectory, entry i = after iteration i).

    descent_norms[i] is |Dh∘ζ| evaluated at iterate i (NaN for the last iterate unless the
    run stopped by converging, the only case in which it is evaluated there); violations[i] the
    iterate's largest normalized constraint violation.
    """

    iterations: int
    costs: list
    descent_norms: list
    step_lengths: list
    methods: list
    elapsed: float
    converged: bool
    reason: str
    violations: list = dataclasses.field(default_factory=list)


def convergence_history(result: OptimizationResult, initial_cost: float, initial_violation: float = 0.0) \
        -> ConvergenceHistory:
    """The history of ``result`` in per-iterate form; the reason in the interface's vocabulary."""
    records = list(result.history)
    check = records.pop() if result.converged and records else None
    costs = [float(initial_cost)] + [float(r.cost) for r in records]
    norms = [float(r.descent_norm) for r in records] + [float(check.descent_norm) if check else math.nan]
    steps = [0.0] + [float(r.step_length) for r in records]
    methods = [""] + [r.method for r in records]
    violations = [float(initial_violation)] + [float(r.violation) for r in records]
    reason = REASONS.get(result.reason, "error")
    return ConvergenceHistory(len(records), costs, norms, steps, methods, float(result.elapsed), bool(result.converged),
                              reason, violations)


def constraint_summary(constraints: dict) -> str:
    """A sentence on a record's ``constraints``: satisfied or not, and the ones the result rides."""
    rows = constraints["margins"]
    if not rows:
        return "no inequality constraints"
    if not constraints["feasible"]:
        bad = [r["label"] for r in rows if not r["satisfied"]]
        return (f"NO constraint-satisfying trajectory found yet: {', '.join(bad)} violated (largest normalized "
                f"violation {constraints['violation']:.3g})")
    active = [f"{r['label']} ({r['active_steps']} steps)" for r in rows if r["active_steps"]]
    return (f"all {len(rows)} constraints satisfied" + (f"; active: {', '.join(active)}" if active else ""))


def describe(problem: Problem, method: str, h: ConvergenceHistory, initial_cost: float, cost: float) -> str:
    """How a solve of ``problem`` by ``method`` from a start of ``initial_cost`` to ``cost`` ended, in one
    sentence (an answer's message)."""
    iters = f"{h.iterations} iteration{'s' if h.iterations != 1 else ''}"
    costs = f"cost {initial_cost:.6g} -> {cost:.6g}"
    tol = problem.options.tolerance
    if method == "dmocc":   # its descent norms are IPOPT's dual infeasibility (ocp/dmocc.py)
        iters = f"{iters} of DMOCC (IPOPT)"
        measure = f"dual infeasibility {h.descent_norms[-1]:.3g}"
    else:
        measure = f"|Dh.dxi| = {h.descent_norms[-1]:.3g} < {tol:g}"
    head = {
        "converged": f"converged after {iters} ({costs}, {measure})",
        "max_iterations": f"stopped at the iteration cap after {iters} without converging ({costs}); the "
                          "trajectory is feasible",
        "deadline": f"deadline of {problem.options.deadline or 0:g} s reached after {iters}: best feasible trajectory so far "
                    f"({costs})",
        "canceled": f"canceled after {iters}: best feasible trajectory so far ({costs})",
        "line_search_failed": f"the line search found no decrease after {iters}: best feasible trajectory so far "
                              f"({costs})",
        "infeasible": f"no trajectory satisfying the constraints was found after {iters} ({costs})",
    }.get(h.reason, f"stopped after {iters} without a descent direction: best feasible trajectory so far ({costs})")
    return (f"{head} in {h.elapsed:.3g} s; {problem.source}, {problem.N} steps of dt = {problem.dt:g} s on model "
            f"'{problem.model.name}'")


__all__ = ["REASONS", "record", "reserve", "record_dict", "input_ranges", "constraints_record", "ConvergenceHistory",
           "convergence_history", "constraint_summary", "describe"]
