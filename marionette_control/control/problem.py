"""Optimization requests → optimization problems (ROS-free; the optimizer node is a thin adapter around this).

A request names a model, a desired motion (a keyframe motion from the motion library, or
sampled configuration trajectories), cost weights by component name, a method schedule,
tolerance, iteration cap, deadline and time step. :func:`build_problem` validates all of it
and returns an :class:`OptimizationProblem`: the desired trajectory at the integrator's time
step, the tracking cost, the optimizer options and a feasible initial trajectory. Every invalid
input raises :class:`ProblemError` whose message says what was wrong, where, and what was
expected.

Desired trajectory (thesis §6.7.2)
    The named configurations follow the desired motion, sampled at ``t_k = k dt`` (linear
    interpolation between the given points, which reproduces them exactly when they lie on the
    grid; keyframe motions are sampled from their C² spline). Every other state component
    (configurations not named, momenta, kinematic velocities) is 0 in the desired state; the
    desired input is 0 for force inputs and the desired next kinematic configuration for
    kinematic inputs.

Weights
    Defaults per kind of component (:class:`WeightDefaults`): configurations named by the
    desired motion are weighted heavily, the others not at all ("the others are left to the
    optimizer"; the thesis weights only the arm angles heavily), momenta and kinematic
    velocities lightly. A request overrides any component by name. State weights must be
    finite and >= 0; input weights finite and > 0 (every LQ subproblem needs R positive
    definite). Terminal weights default to the running state weights times
    ``terminal_scale``.

Time step
    The request's dt if > 0; otherwise, for sampled points, their spacing when they are evenly
    spaced (to 1e-6 relative), else the default dt; for a named motion the default dt. The
    duration must be a whole number of steps.

Initial trajectory (thesis §6.7.2)
    The desired initial configuration (unnamed configurations 0) made consistent with the
    constraints, at rest (p = 0, v = 0), simulated with constant inputs (force inputs 0,
    kinematic configurations held). Models with constraints are made consistent by a function
    registered for the model (:data:`CONSISTENT_CONFIGURATION`; the marionette arm's sets the
    string length to the hook–carriage distance) or, generically, by Gauss–Newton steps of
    minimal norm on the configurations the desired motion does not name (kinematic ones first).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np

from marionette_control import _core
from marionette_control.control.cost import TrackingCost
from marionette_control.control.optimizer import METHODS, OptimizationResult, OptimizerOptions, tracking_gains
from marionette_control.control.trajectory import Trajectory


class ProblemError(ValueError):
    """A request cannot be turned into an optimization problem; the message says why."""


# --------------------------------------------------------------------------------------------- defaults


@dataclass
class WeightDefaults:
    """Diagonal cost weights by kind of component (used where a request names no weight)."""

    named_configuration: float = 1000.0
    other_configuration: float = 0.0
    momentum: float = 1.0
    kinematic_velocity: float = 0.01
    force_input: float = 1.0
    kinematic_input: float = 0.01
    terminal_scale: float = 1.0

    def __post_init__(self):
        for name in ("named_configuration", "other_configuration", "momentum", "kinematic_velocity",
                     "terminal_scale"):
            _check_weight(getattr(self, name), f"default weight '{name}'", positive=False)
        for name in ("force_input", "kinematic_input"):
            _check_weight(getattr(self, name), f"default weight '{name}'", positive=True)


@dataclass
class GainWeights:
    """Diagonal LQR weights of the tracking gains by kind of component (thesis L1838: Q = R = I)."""

    configuration: float = 1.0
    momentum: float = 1.0
    kinematic_velocity: float = 1.0
    input: float = 1.0

    def __post_init__(self):
        for name in ("configuration", "momentum", "kinematic_velocity", "input"):
            _check_weight(getattr(self, name), f"tracking-gain weight '{name}'", positive=True)

    def vectors(self, model) -> tuple[np.ndarray, np.ndarray]:
        """(Q (nx,), R (nU,)) for ``model``."""
        Q = np.r_[np.full(model.nq, self.configuration), np.full(model.nd, self.momentum),
                  np.full(model.nk, self.kinematic_velocity)]
        return Q, np.full(model.nU, self.input)


@dataclass
class ProblemDefaults:
    """What a request leaves open (zero or empty fields)."""

    dt: float = 0.01
    weights: WeightDefaults = field(default_factory=WeightDefaults)
    schedule: Sequence = (("quasi_newton", 4), ("newton", None))
    tolerance: float = 1e-6
    max_iterations: int = 200
    deadline: Optional[float] = None
    max_steps: int = 20000
    motion_directories: Sequence = ()

    def __post_init__(self):
        if not (isinstance(self.dt, (int, float)) and math.isfinite(self.dt) and self.dt > 0):
            raise ProblemError(f"default dt must be finite and > 0, got {self.dt!r}")
        if self.max_steps < 1:
            raise ProblemError(f"max_steps must be >= 1, got {self.max_steps}")
        try:
            OptimizerOptions(schedule=self.schedule, tolerance=self.tolerance, max_iterations=self.max_iterations,
                             deadline=self.deadline)
        except ValueError as e:
            raise ProblemError(f"default optimizer options: {e}") from None


# --------------------------------------------------------------------------------------------- request


@dataclass
class DesiredMotion:
    """Sampled configuration trajectories (the ROS-free form of a JointTrajectory).

    joint_names : configuration names (a subset of the model's).
    times : (K,) times of the points in seconds (strictly increasing; time runs from the first).
    positions : K sequences of len(joint_names) positions (validated here, may be ragged).
    """

    joint_names: Sequence[str]
    times: Sequence[float]
    positions: Sequence[Sequence[float]]


@dataclass
class RequestOptions:
    """The optimization options of a request (fields as in marionette_interfaces/OptimizationOptions).

    Zero or empty fields mean "use the default".
    """

    state_weight_names: Sequence[str] = ()
    state_weights: Sequence[float] = ()
    input_weight_names: Sequence[str] = ()
    input_weights: Sequence[float] = ()
    terminal_weight_names: Sequence[str] = ()
    terminal_weights: Sequence[float] = ()
    methods: Sequence[str] = ()
    method_iterations: Sequence[int] = ()
    tolerance: float = 0.0
    max_iterations: int = 0
    deadline_s: float = 0.0
    dt: float = 0.0


# --------------------------------------------------------------------------------------------- problem


@dataclass
class OptimizationProblem:
    """Everything :class:`~marionette_control.control.optimizer.ProjectionOptimizer` needs, plus provenance.

    Attributes
    ----------
    model : core Model;  system : core DiscreteSystem at ``dt``
    t : (N+1,) times;  Xd : (N+1, nx), Ud : (N, nU) desired trajectory
    cost : TrackingCost;  options : OptimizerOptions
    X0 : (N+1, nx), U0 : (N, nU) feasible initial trajectory;  initial_cost : h(X0, U0)
    named : configuration names the desired motion prescribes;  source : "motion '<name>'" or "desired"
    """

    model: "_core.Model"
    system: "_core.DiscreteSystem"
    dt: float
    t: np.ndarray
    Xd: np.ndarray
    Ud: np.ndarray
    cost: TrackingCost
    options: OptimizerOptions
    X0: np.ndarray
    U0: np.ndarray
    initial_cost: float
    named: list
    source: str

    @property
    def N(self) -> int:
        return self.Ud.shape[0]


# --------------------------------------------------------------------------------------------- helpers


def _check_weight(value, what: str, positive: bool) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ProblemError(f"{what} must be a number, got {value!r}") from None
    if not math.isfinite(v):
        raise ProblemError(f"{what} must be finite, got {v}")
    if positive and v <= 0:
        raise ProblemError(f"{what} must be > 0 (the LQ subproblems need R positive definite), got {v}")
    if v < 0:
        raise ProblemError(f"{what} must be >= 0, got {v}")
    return v


def _finite_option(value, what: str) -> float:
    v = float(value)
    if not math.isfinite(v) or v < 0:
        raise ProblemError(f"options.{what} must be finite and >= 0 (0: default), got {v}")
    return v


_MOTION_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


def find_motion(name: str, directories: Sequence) -> Path:
    """Path of motion ``name`` (``<dir>/<name>.yaml``) in the motion library directories."""
    if not _MOTION_NAME.match(name) or name.endswith(".yaml"):
        raise ProblemError(f"motion name {name!r} is not a library name (letters, digits, '_', '-', '.'; "
                           "no path and no .yaml suffix)")
    for d in directories:
        p = Path(d) / f"{name}.yaml"
        if p.is_file():
            return p
    known = sorted({p.stem for d in directories if Path(d).is_dir() for p in Path(d).glob("*.yaml")})
    where = ", ".join(str(d) for d in directories) or "(no motion directory configured)"
    raise ProblemError(f"unknown motion '{name}'; available: {', '.join(known) or 'none'} (searched {where})")


def default_motion_directories() -> list[Path]:
    """The package's ``config/motions`` (source tree or ``<prefix>/share``), if it exists."""
    from marionette_control.models.marionette_arm import config_path

    try:
        return [config_path("motions")]
    except FileNotFoundError:
        return []


def _time_step(requested: float, default: float, times: Optional[np.ndarray]) -> float:
    if requested > 0:
        return requested
    if times is not None:
        steps = np.diff(times)
        mean = float(steps.mean())
        if np.all(np.abs(steps - mean) <= 1e-6 * mean):
            return mean
    return default


def _num_steps(duration: float, dt: float, what: str, max_steps: int) -> int:
    n = int(round(duration / dt))
    if n < 1 or abs(n * dt - duration) > 1e-6 * dt:
        raise ProblemError(f"{what} lasts {duration:.9g} s, which is not a whole number of steps of dt = {dt:.9g} s "
                           "(set options.dt to a divisor of the duration)")
    if n > max_steps:
        raise ProblemError(f"{what} needs {n} steps of dt = {dt:.9g} s, more than the node's limit of {max_steps}")
    return n


def sample_desired(model, desired: DesiredMotion, dt_request: float, defaults: ProblemDefaults):
    """Validates sampled desired points and resamples them at dt: (dt, t (N+1,), Qd (N+1, nq), named)."""
    names = [str(n) for n in desired.joint_names]
    n_points = len(desired.positions)
    if n_points == 0 and not names:
        raise ProblemError("the desired motion is empty: give motion_name or desired with joint_names and at least "
                           "2 points")
    if not names:
        raise ProblemError("desired.joint_names is empty: name the configurations the points give positions for")
    unknown = [n for n in names if n not in model.config_names]
    if unknown:
        raise ProblemError(f"desired.joint_names: {', '.join(repr(n) for n in unknown)} "
                           f"{'is not a configuration' if len(unknown) == 1 else 'are not configurations'} of model "
                           f"'{model.name}' (configurations: {', '.join(model.config_names)})")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ProblemError(f"desired.joint_names repeats {', '.join(dup)}")
    if n_points < 2:
        raise ProblemError(f"the desired motion has {n_points} point(s); at least 2 are needed (a start and an end)")
    if len(desired.times) != n_points:
        raise ProblemError(f"desired has {n_points} points but {len(desired.times)} times")
    times = np.asarray(desired.times, dtype=float)
    if not np.all(np.isfinite(times)):
        i = int(np.flatnonzero(~np.isfinite(times))[0])
        raise ProblemError(f"desired.points[{i}].time_from_start is not finite")
    bad = np.flatnonzero(np.diff(times) <= 0)
    if bad.size:
        i = int(bad[0]) + 1
        raise ProblemError(f"desired.points[{i}].time_from_start = {times[i]:.9g} s does not increase strictly "
                           f"(point {i - 1} is at {times[i - 1]:.9g} s): times must be strictly increasing")
    P = np.empty((n_points, len(names)))
    for i, row in enumerate(desired.positions):
        if len(row) != len(names):
            raise ProblemError(f"desired.points[{i}].positions has {len(row)} values, expected {len(names)} (one per "
                               f"joint name: {', '.join(names)})")
        P[i] = row
        if not np.all(np.isfinite(P[i])):
            j = int(np.flatnonzero(~np.isfinite(P[i]))[0])
            raise ProblemError(f"desired.points[{i}].positions[{j}] ({names[j]}) is {P[i, j]}: positions must be "
                               "finite")
    times = times - times[0]
    dt = _time_step(dt_request, defaults.dt, times)
    n = _num_steps(float(times[-1]), dt, "the desired motion", defaults.max_steps)
    t = dt * np.arange(n + 1)
    Qd = np.zeros((n + 1, model.nq))
    for j, name in enumerate(names):
        Qd[:, model.config_index(name)] = np.interp(t, times, P[:, j])
    return dt, t, Qd, names


def sample_motion(model, name: str, dt_request: float, defaults: ProblemDefaults):
    """A library motion sampled at dt: (dt, t (N+1,), Qd (N+1, nq), named)."""
    from marionette_control.model.motion import MotionError, desired_configurations, load_motion

    directories = list(defaults.motion_directories) or default_motion_directories()
    path = find_motion(name, directories)
    try:
        motion = load_motion(path)
    except MotionError as e:
        raise ProblemError(f"motion '{name}' cannot be loaded: {e}") from None
    dt = _time_step(dt_request, defaults.dt, None)
    n = _num_steps(motion.duration, dt, f"motion '{name}'", defaults.max_steps)
    try:
        t, Qd = desired_configurations(model, motion, dt)
    except MotionError as e:  # (the Python API's hint "map it with names=" means nothing to a request)
        reason = str(e).replace("; map it with names=", "")
        raise ProblemError(f"motion '{name}' does not fit model '{model.name}': {reason}") from None
    assert t.size == n + 1
    return dt, t, Qd, list(motion.joints)


def _named_weights(names: Sequence[str], values: Sequence[float], components: Sequence[str], what: str,
                   positive: bool) -> dict:
    names = [str(n) for n in names]
    if len(names) != len(values):
        raise ProblemError(f"options.{what}_weight_names has {len(names)} entries but options.{what}_weights has "
                           f"{len(values)}: they must have the same length")
    unknown = [n for n in names if n not in components]
    if unknown:
        raise ProblemError(f"options.{what}_weight_names: unknown component(s) {', '.join(repr(n) for n in unknown)}; "
                           f"the model's {'inputs' if what == 'input' else 'states'} are {', '.join(components)}")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ProblemError(f"options.{what}_weight_names repeats {', '.join(dup)}")
    return {n: _check_weight(v, f"options.{what}_weights entry for '{n}'", positive) for n, v in zip(names, values)}


def weight_vectors(model, named: Sequence[str], defaults: WeightDefaults, options: RequestOptions):
    """(Q (nx,), R (nU,), Qf (nx,)): defaults by kind, overridden by the request's weights by name."""
    named = set(named)
    Q = np.r_[[defaults.named_configuration if c in named else defaults.other_configuration
               for c in model.config_names],
              np.full(model.nd, defaults.momentum), np.full(model.nk, defaults.kinematic_velocity)]
    R = np.r_[np.full(model.nu, defaults.force_input), np.full(model.nk, defaults.kinematic_input)]
    states, inputs = list(model.state_names), list(model.discrete_input_names)
    for n, w in _named_weights(options.state_weight_names, options.state_weights, states, "state", False).items():
        Q[states.index(n)] = w
    for n, w in _named_weights(options.input_weight_names, options.input_weights, inputs, "input", True).items():
        R[inputs.index(n)] = w
    Qf = defaults.terminal_scale * Q
    for n, w in _named_weights(options.terminal_weight_names, options.terminal_weights, states, "terminal",
                               False).items():
        Qf[states.index(n)] = w
    return Q, R, Qf


def optimizer_options(options: RequestOptions, defaults: ProblemDefaults) -> OptimizerOptions:
    """OptimizerOptions from the request's schedule, tolerance, iteration cap and deadline (0/empty: defaults)."""
    methods, counts = list(options.methods), list(options.method_iterations)
    if len(methods) != len(counts):
        raise ProblemError(f"options.methods has {len(methods)} entries but options.method_iterations has "
                           f"{len(counts)}: they must have the same length")
    if methods:
        for i, m in enumerate(methods):
            if m not in METHODS:
                raise ProblemError(f"options.methods[{i}] = {m!r} is not a method; use one of {', '.join(METHODS)}")
        for i, c in enumerate(counts[:-1]):
            if int(c) == 0:
                raise ProblemError(f"options.method_iterations[{i}] = 0 ('until convergence') is only allowed for the "
                                   "last method of the schedule")
        schedule = [(m, int(c) if int(c) > 0 else None) for m, c in zip(methods, counts)]
    else:
        schedule = list(defaults.schedule)
    tol = _finite_option(options.tolerance, "tolerance") or defaults.tolerance
    max_it = int(options.max_iterations) or defaults.max_iterations
    deadline = _finite_option(options.deadline_s, "deadline_s") or defaults.deadline
    try:
        return OptimizerOptions(schedule=schedule, tolerance=tol, max_iterations=max_it, deadline=deadline)
    except ValueError as e:
        raise ProblemError(f"options: {e}") from None


# --------------------------------------------------------------------------------------------- consistency


def _arm_consistent(model, q: np.ndarray, named: Sequence[str]) -> np.ndarray:
    from marionette_control.models import marionette_arm

    return marionette_arm.consistent_configuration(model, q[model.config_index("shoulder")],
                                                   q[model.config_index("elbow")], q[model.config_index("carriage")])


#: Model name -> function(model, q (nq,), named configuration names) -> q satisfying the constraints.
CONSISTENT_CONFIGURATION: dict[str, Callable] = {"marionette_arm": _arm_consistent}


def consistent_configuration(model, q: np.ndarray, named: Sequence[str], tolerance: float = 1e-12,
                             max_iterations: int = 50) -> np.ndarray:
    """q made to satisfy h(q) = 0, changing as little as possible (see the module docstring)."""
    q = np.array(q, dtype=float)
    if model.nc == 0:
        return q
    special = CONSISTENT_CONFIGURATION.get(model.name)
    if special is not None:
        try:
            return np.asarray(special(model, q, named), dtype=float)
        except ValueError as e:
            raise ProblemError(f"the desired initial configuration cannot be made consistent with the constraints of "
                               f"model '{model.name}': {e}") from None
    named = set(named)
    free_kin = [i for i, c in enumerate(model.config_names) if model.kinematic[i] and c not in named]
    free = [i for i, c in enumerate(model.config_names) if c not in named]
    for cols in (free_kin, free, list(range(model.nq))):
        if not cols:
            continue
        x = q.copy()
        for _ in range(max_iterations):
            h, Dh = model.constraints(x)
            if np.abs(h).max() <= tolerance:
                return x
            J = Dh[:, cols]
            step, *_ = np.linalg.lstsq(J, h, rcond=None)
            x[cols] -= step
        h = model.constraints(x)[0]
        if np.abs(h).max() <= 1e3 * tolerance:
            return x
    raise ProblemError(f"the desired initial configuration cannot be made consistent with the constraints "
                       f"{', '.join(model.constraint_names)} of model '{model.name}' (Gauss-Newton did not converge)")


def initial_trajectory(system, q0: np.ndarray, N: int) -> tuple[np.ndarray, np.ndarray]:
    """(X0, U0): rest at q0 (p = 0, v = 0) simulated with force inputs 0 and kinematic configurations held."""
    model = system.model
    x0 = np.r_[q0, np.zeros(model.nd + model.nk)]
    kin = [i for i, k in enumerate(model.kinematic) if k]
    U0 = np.zeros((N, model.nU))
    U0[:, model.nu:] = q0[kin]
    try:
        X0, _ = system.simulate(x0, U0)
    except _core.StepError as e:
        raise ProblemError(f"the initial trajectory (the desired initial configuration held with constant inputs) "
                           f"cannot be simulated: {e}") from None
    return X0, U0


# --------------------------------------------------------------------------------------------- the builder


def build_problem(model, motion_name: str = "", desired: Optional[DesiredMotion] = None,
                  options: Optional[RequestOptions] = None,
                  defaults: Optional[ProblemDefaults] = None) -> OptimizationProblem:
    """Validates a request and builds its optimization problem (raises ProblemError).

    ``motion_name`` (a motion library name) takes precedence over ``desired``.
    """
    options = options or RequestOptions()
    defaults = defaults or ProblemDefaults()
    dt_request = _finite_option(options.dt, "dt")
    if motion_name:
        dt, t, Qd, named = sample_motion(model, motion_name, dt_request, defaults)
        source = f"motion '{motion_name}'"
    else:
        if desired is None:
            raise ProblemError("the desired motion is empty: give motion_name or desired with joint_names and at "
                               "least 2 points")
        dt, t, Qd, named = sample_desired(model, desired, dt_request, defaults)
        source = "desired"
    N = t.size - 1
    Q, R, Qf = weight_vectors(model, named, defaults.weights, options)
    opt = optimizer_options(options, defaults)
    Xd = np.zeros((N + 1, model.nx))
    Xd[:, :model.nq] = Qd
    kin = [i for i, k in enumerate(model.kinematic) if k]
    Ud = np.zeros((N, model.nU))
    Ud[:, model.nu:] = Qd[1:, kin]
    cost = TrackingCost(Xd, Ud, Q, R, Qf)
    system = _core.DiscreteSystem(model, dt)
    q0 = consistent_configuration(model, Qd[0], named)
    X0, U0 = initial_trajectory(system, q0, N)
    return OptimizationProblem(model=model, system=system, dt=dt, t=t, Xd=Xd, Ud=Ud, cost=cost, options=opt, X0=X0,
                               U0=U0, initial_cost=float(cost.value(X0, U0)), named=named, source=source)


# --------------------------------------------------------------------------------------------- results

REASONS = {"converged": "converged", "max_iterations": "max_iterations", "deadline": "deadline",
           "cancelled": "canceled", "canceled": "canceled", "line_search_failed": "line_search_failed"}


@dataclass
class ConvergenceHistory:
    """Per-iterate arrays (entry 0 = the initial trajectory, entry i = after iteration i).

    descent_norms[i] is |Dh∘ζ| evaluated at iterate i (NaN for the last iterate unless the
    run stopped by converging, the only case in which it is evaluated there).
    """

    iterations: int
    costs: list
    descent_norms: list
    step_lengths: list
    methods: list
    elapsed: float
    converged: bool
    reason: str


def convergence_history(result: OptimizationResult, initial_cost: float) -> ConvergenceHistory:
    """The history of ``result`` in per-iterate form; the reason in the interface's vocabulary."""
    records = list(result.history)
    check = records.pop() if result.converged and records else None
    costs = [float(initial_cost)] + [float(r.cost) for r in records]
    norms = [float(r.descent_norm) for r in records] + [float(check.descent_norm) if check else math.nan]
    steps = [0.0] + [float(r.step_length) for r in records]
    methods = [""] + [r.method for r in records]
    reason = REASONS.get(result.reason, "error")
    return ConvergenceHistory(len(records), costs, norms, steps, methods, float(result.elapsed), bool(result.converged),
                              reason)


def tracked_trajectory(problem: OptimizationProblem, result: OptimizationResult, gains: GainWeights,
                       info: Optional[dict] = None) -> Trajectory:
    """The result as a :class:`Trajectory` with time-varying LQR tracking gains K (N, nU, nx)."""
    Q, R = gains.vectors(problem.model)
    K = tracking_gains(problem.system, result.X, result.U, Q=Q, R=R)
    meta = {"cost": float(result.cost), "iterations": len(result.history), "converged": bool(result.converged),
            "termination_reason": REASONS.get(result.reason, result.reason), "source": problem.source,
            "gain_weights": {"configuration": gains.configuration, "momentum": gains.momentum,
                             "kinematic_velocity": gains.kinematic_velocity, "input": gains.input}}
    meta.update(info or {})
    return Trajectory.for_model(problem.model, problem.dt, result.X, result.U, K=K, info=meta)


__all__ = ["ProblemError", "WeightDefaults", "GainWeights", "ProblemDefaults", "DesiredMotion", "RequestOptions",
           "OptimizationProblem", "build_problem", "sample_desired", "sample_motion", "weight_vectors",
           "optimizer_options", "consistent_configuration", "initial_trajectory", "find_motion",
           "default_motion_directories", "CONSISTENT_CONFIGURATION", "ConvergenceHistory", "convergence_history",
           "tracked_trajectory", "REASONS"]
