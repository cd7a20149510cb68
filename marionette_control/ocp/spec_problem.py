"""The problem a YAML spec describes, its initial trajectory, and the spec's run (``marionette-optimize``).

:func:`build_problem` turns a checked :class:`~.spec.OptimizationSpec` into the one problem description,
:class:`~.problem.Problem`: the desired trajectory of its motion (a motion file, a trajectory file or inline
keyframes), the initial state (the spec's overrides, optionally a static equilibrium, made consistent with the
constraints), the cost weights by kind overridden by name, the constraints from the model file's limits, the
optimizer options and the tracking gains' design (the steps and defaults shared with requests are
:mod:`.tracking_problem`'s). :func:`initial_trajectory` finds the start by the spec's method (simulate,
desired, dynamic embedding, string relaxation, constraint penalty; thesis §6.6, :mod:`.embedding`; or a file).
:func:`solve_spec` runs a spec: problem, initial trajectory, :func:`~.optimizer.solve` under the spec's deadline
for the whole run, and the record (:mod:`.report`) with the spec itself (``spec``: path and content) and how to
rebuild its model (``model_source``). Every error is a :class:`~.spec.SpecError` naming the file and the key.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Callable, Optional

import numpy as np

from marionette_control import _core
from marionette_control.model.limits import load_limits
from marionette_control.model.motion import MotionError, load_motion
from marionette_control.ocp.embedding import (
    EmbeddingError,
    desired_projection,
    embed,
    relax_strings,
    run_constraint_penalty,
    run_dynamic_embedding,
    run_string_relaxation,
)
from marionette_control.ocp.optimizer import Result
from marionette_control.ocp.problem import Problem, ProblemError, build
from marionette_control.ocp.retiming import solve_retimed
from marionette_control.ocp.projection import IterationRecord
from marionette_control.ocp.spec import DEFAULTS, OptimizationSpec
from marionette_control.ocp.tracking_problem import (
    Keyframes,
    UnknownWeightName,
    configuration_trajectory,
    consistent_configuration,
    cost_weights,
    desired_trajectory,
    free_configurations,
    hold_inputs,
    initial_trajectory as simulated_trajectory,
    rest_state,
    static_equilibrium,
    terminal_velocity_weight,
)
from marionette_control.trajectory import Trajectory, TrajectoryError

def _unknown_weight(spec: OptimizationSpec, e: UnknownWeightName):
    spec.fail(f"{e.group}.{e.key}", f"matches no name (names: {', '.join(e.names)})")


def spec_keyframes(spec: OptimizationSpec) -> Optional[Keyframes]:
    """The spec's motion as :class:`~.tracking_problem.Keyframes` (a motion file or inline keyframes; None for a
    trajectory file)."""
    m = spec.motion
    if m.kind == "trajectory":
        return None
    if m.kind == "file":
        try:
            return Keyframes.of_motion(load_motion(m.path))
        except MotionError as e:
            spec.fail("motion", str(e))
    return Keyframes(tuple(m.joints), m.times, m.values, m.interpolation)


def desired_configurations(spec: OptimizationSpec, model, keyframes: Optional[Keyframes] = None) -> tuple:
    """(t (N+1,), Q_d (N+1, nq), joints) of the spec's motion, or of ``keyframes`` when given (a re-timing);
    unprescribed configurations are 0."""
    m = spec.motion
    if keyframes is None and m.kind == "trajectory":
        try:
            tr = Trajectory.load(m.path, model)
        except TrajectoryError as e:
            spec.fail("motion.trajectory", str(e))
        if abs(tr.dt - spec.dt) > 1e-12 * spec.dt:
            spec.fail("motion.trajectory", f"the trajectory's dt is {tr.dt}, the spec's dt is {spec.dt}")
        return tr.t - tr.t0, tr.X[:, :model.nq].copy(), list(model.config_names)
    keyframes = keyframes or spec_keyframes(spec)
    joints = list(keyframes.joints)
    try:
        t, values = keyframes.sample(spec.dt)
    except MotionError as e:
        spec.fail("motion" if m.kind == "file" else "motion.keyframes", str(e))
    for j in joints:
        if j not in model.config_names:
            spec.fail("motion", f"'{j}' is not a configuration of model '{model.name}' (configurations: "
                                f"{', '.join(model.config_names)})")
    return t, configuration_trajectory(model, joints, values), joints


def _config_indices(spec: OptimizationSpec, model, key: str, names: list) -> list:
    for i, name in enumerate(names):
        if name not in model.config_names:
            spec.fail(f"{key}[{i}]", f"not a configuration of model '{model.name}'")
    return [model.config_index(n) for n in names]


def initial_configuration(spec: OptimizationSpec, model, Qd: np.ndarray, joints: list) -> np.ndarray:
    """q(0) (nq,): the desired one with the spec's overrides, optionally at a static equilibrium, consistent."""
    q0 = Qd[0].copy()
    for name, v in spec.initial_configs.items():
        if name not in model.config_names:
            spec.fail(f"initial_state.configs.{name}", f"not a configuration of model '{model.name}' "
                                                       f"(configurations: {', '.join(model.config_names)})")
        q0[model.config_index(name)] = v
    free = None if spec.consistent is None else _config_indices(spec, model, "initial_state.consistent",
                                                                 spec.consistent)
    if spec.equilibrium:
        try:
            q0 = static_equilibrium(model, q0, free_configurations(model, joints) if free is None else free)
        except ProblemError as e:
            spec.fail("initial_state.equilibrium", f"{e} (name the configurations to move in initial_state."
                                                   "consistent)")
    try:
        return consistent_configuration(model, q0, joints, free)
    except ProblemError as e:
        spec.fail("initial_state.consistent", str(e))


def build_problem(spec: OptimizationSpec, model=None, keyframes: Optional[Keyframes] = None) -> Problem:
    """The :class:`~.problem.Problem` of a spec: desired trajectory, initial state, cost, constraints, gains,
    re-timing; of the spec with its motion's ``keyframes`` replaced (re-timed) when given. Its ``rebuild`` makes
    the same problem for other keyframes, with the spec's initial trajectory (:mod:`.retiming`)."""
    if model is None:
        try:
            model = spec.model.build()
        except (KeyError, ValueError, OSError) as e:
            spec.fail("model", e.args[0] if isinstance(e, KeyError) and e.args else str(e))
    system = _core.DiscreteSystem(model, spec.dt)
    keyframes = keyframes or spec_keyframes(spec)
    t, Qd, joints = desired_configurations(spec, model, keyframes)
    if keyframes is None:
        tr = Trajectory.load(spec.motion.path, model)
        Xd, Ud = tr.X.copy(), tr.U.copy()
    else:
        Xd, Ud = desired_trajectory(system, Qd, spec.motion.momenta)
    x0 = rest_state(system, initial_configuration(spec, model, Qd, joints))

    w = spec.weights
    try:
        Q, R, Qf = cost_weights(model, joints, DEFAULTS.weights, w["state"], w["input"], w["terminal"], "weights.")
    except UnknownWeightName as e:
        _unknown_weight(spec, e)
    if w["terminal_velocity"] is not None:
        try:
            Qf = terminal_velocity_weight(model, Xd[-1], w["terminal_velocity"], Qf, "weights.terminal_velocity")
        except UnknownWeightName as e:
            _unknown_weight(spec, e)
    try:
        limits = load_limits(spec.model)
    except (ValueError, OSError) as e:
        spec.fail("model", f"its limits cannot be read: {e}")
    options = spec.optimizer if spec.deadline is None else dataclasses.replace(spec.optimizer, deadline=spec.deadline)
    try:
        problem = build(model, spec.dt, t, Xd, Ud, x0, Q, R, Qf, joints, spec.constraints, limits, options,
                        spec.gains, spec.motion.kind, system)
    except ProblemError as e:
        spec.fail(e.key or "constraints", str(e))
    problem.method, problem.start, problem.retime, problem.keyframes = spec.method, spec.start, spec.retime, keyframes
    if keyframes is not None:
        problem.rebuild = lambda other: _with_start(spec, build_problem(spec, model, other))
    return problem


def _with_start(spec: OptimizationSpec, problem: Problem) -> Problem:
    """``problem`` with the spec's initial trajectory as its X0, U0 (a re-timed problem's start)."""
    problem.X0, problem.U0, _ = initial_trajectory(spec, problem)
    return problem


def _constant_inputs(spec: OptimizationSpec, problem: Problem) -> np.ndarray:
    model = problem.model
    names = list(model.discrete_input_names)
    for name in spec.initial.inputs:
        if name not in names:
            spec.fail(f"initial_trajectory.inputs.{name}", f"not an input of model '{model.name}' "
                                                           f"(inputs: {', '.join(names)})")
    return hold_inputs(model, problem.x0, problem.N, spec.initial.inputs)


def initial_trajectory(spec: OptimizationSpec, problem: Problem, callback=None, should_stop=None, deadline=None,
                       log=None):
    """(X, U, stages): the spec's initial trajectory of the original model (feasible for the dynamics; the
    inequality constraints are the final optimization's)."""
    model, system = problem.model, problem.system
    method = spec.initial.method
    say = log or (lambda msg: None)
    try:
        if method == "simulate":
            U = _constant_inputs(spec, problem)
            return simulated_trajectory(system, problem.x0, U), U, []
        if method == "desired":
            X, U = desired_projection(system, problem.x0, problem.Xd, problem.Ud)
            return X, U, []
        if method == "file":
            try:
                tr = Trajectory.load(spec.initial.file, model)
            except TrajectoryError as e:
                spec.fail("initial_trajectory.file", str(e))
            if tr.N != problem.N or abs(tr.dt - spec.dt) > 1e-12 * spec.dt:
                spec.fail("initial_trajectory.file", f"the trajectory has {tr.N} steps of {tr.dt} s; the problem "
                                                     f"has {problem.N} of {spec.dt} s")
            return simulated_trajectory(system, problem.x0, tr.U), tr.U.copy(), []
        if method == "embedding":
            emb = embed(model)
            say(f"dynamic embedding: fictitious inputs {', '.join(emb.fictitious_inputs)}")
            U0 = _constant_inputs(spec, problem)
            init = run_dynamic_embedding(emb, spec.dt, problem.cost, problem.x0, spec.initial.embedding, U=U0,
                                         callback=callback, should_stop=should_stop, deadline=deadline)
            say(f"dynamic embedding: {init.reason}; forces removed and projected onto '{model.name}'")
            return init.X, init.U, init.stages
        if method == "penalty":
            names = spec.initial.penalty_constraints
            say(f"constraint penalty: {', '.join(names)} replaced by the cost 1/2 w |h|^2")
            init = run_constraint_penalty(model, names, spec.dt, problem.cost, problem.x0, spec.initial.penalty,
                                          callback, should_stop, deadline)
            say(f"constraint penalty: {init.reason}; projected onto '{model.name}'")
            return init.X, init.U, init.stages
        # relaxation
        rel = relax_strings(model, spec.initial.relax_strings)
        say(f"string relaxation: {', '.join(s.name for s in rel.strings)} replaced by forces "
            f"{', '.join(rel.extra_inputs)}")
        opts = spec.initial.relaxation
        lim = problem.limits
        ranges = {c: (lo, hi) for c, lo, hi in zip(lim.kinematic, lim.lower, lim.upper)
                  if np.isfinite(lo) and np.isfinite(hi)}
        if ranges and not opts.bounds:   # keep the restored carriages within the drives' ranges
            opts = dataclasses.replace(opts, bounds=ranges)
        init = run_string_relaxation(rel, spec.dt, problem.cost, problem.x0, opts, callback, should_stop, deadline)
        return init.X, init.U, init.stages
    except (EmbeddingError, ProblemError) as e:
        spec.fail(f"initial_trajectory ({method})", str(e))
    except _core.StepError as e:
        spec.fail(f"initial_trajectory ({method})", f"the initial trajectory cannot be simulated: {e}")


def solve_spec(spec: OptimizationSpec, callback: Optional[Callable[[str, IterationRecord], None]] = None,
               should_stop: Optional[Callable[[], bool]] = None, log: Optional[Callable[[str], None]] = None,
               model=None) -> Result:
    """Runs a spec: problem, initial trajectory, optimization, tracking gains (module docstring).

    ``callback(stage, record)`` is called after every iteration of every stage; ``log(message)``
    receives progress messages; ``should_stop()`` is polled (cancel). The spec's deadline covers
    the whole run; on a deadline or cancel the best trajectory so far is returned (:mod:`.optimizer`).
    ``model``: the spec's model, already built.
    """
    t_start = time.perf_counter()
    say = log or (lambda msg: None)
    problem = build_problem(spec, model)
    model = problem.model
    rows = sum(len(c) for c in problem.constraints)
    say(f"model '{model.name}': {model.nx} states, {model.nU} inputs; {problem.N} steps of {spec.dt} s; initial "
        f"trajectory by {spec.initial.method}; "
        + (f"{rows} constraints ({', '.join(sorted({r.family for c in problem.constraints for r in c.rows}))})"
           if rows else "no inequality constraints"))
    remaining = None if spec.deadline is None else spec.deadline - (time.perf_counter() - t_start)
    X, U, stages = initial_trajectory(spec, problem, callback, should_stop, remaining, say)
    try:
        result = solve_retimed(problem, X, U, dmocc=spec.dmocc, deadline=spec.deadline, started=t_start,
                               stages=stages,
                               callback=None if callback is None else (lambda rec: callback("optimization", rec)),
                               should_stop=should_stop, log=say, stage_callback=callback)
    except ProblemError as e:
        spec.fail(e.key or "retime", str(e))
    result.trajectory.info.update(spec={"path": os.path.abspath(spec.path), "content": _jsonable(spec.raw)},
                                  model_source=spec.model.to_dict())
    return result


def _jsonable(x: Any):
    """``x`` with numpy scalars and arrays as Python numbers and lists (a spec's content, for JSON)."""
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    return x


__all__ = ["build_problem", "spec_keyframes", "desired_configurations", "initial_configuration", "initial_trajectory",
           "solve_spec"]
