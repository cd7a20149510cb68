"""Optimization requests → optimization problems (ROS-free; the optimizer node is a thin adapter around this).

A request names a model, a desired motion (a keyframe motion from the motion library, or
sampled configuration trajectories), cost weights by component name, a method schedule,
tolerance, iteration cap, deadline, time step and the inequality constraints (on/off, families,
minimum string tension, margins). :func:`build_problem` translates it into the one problem
description, :class:`~.problem.Problem`, with a feasible initial trajectory (``X0``, ``U0``).
Every invalid input raises :class:`ProblemError` whose message says what was wrong, where (the
request field), and what was expected.

The steps and their defaults (desired trajectory, weights by kind, optimizer options, initial
state at the discrete rest, initial trajectory) are shared with the YAML specs and documented in
:mod:`.tracking_problem`; the solve and its result record are :mod:`.optimizer`'s and :mod:`.report`'s, the
same for both. What is particular to requests:

Desired motion
    A motion library name (the keyframe motion's C² spline sampled at dt), or sampled points,
    linearly interpolated at t_k = k dt (which reproduces them exactly when they lie on the grid).

Weights
    Overrides name components exactly (no patterns); terminal overrides apply to
    ``terminal_scale`` times the running state weights.

Time step
    The request's dt if > 0; otherwise, for sampled points, their spacing when they are evenly
    spaced (to 1e-6 relative), else the default dt; for a named motion the default dt. The
    duration must be a whole number of steps. Time step, duration and number of steps must be
    plausible (:meth:`~.tracking_problem.ProblemDefaults.check_time_grid`: the node's ``min_dt``,
    ``max_dt``, ``max_duration``, ``max_steps``); a refusal names the field the value came from.

Initial state
    The desired initial configuration made consistent with the constraints by the default free
    configurations, then, for constrained models, held at rest: a static equilibrium solved for the
    kinematic configurations the motion does not name (falling back to the consistent
    configuration when there is none).

Constraints
    ``constraints`` "" (the node's default, on), "on" or "off"; ``constraint_families`` (empty:
    the default set); ``min_tension`` (0: the model file's); the reserve kept for the feedback:
    ``range_margin``, ``speed_margin``, ``acceleration_margin`` (fractions of the drive limits) and
    ``tension_reserve`` (N above the minimum tension), each 0: the node's default; ``reserve`` ""
    (the node's default reserve) or "off" (none but the fields given > 0); ``barrier_weight`` (0:
    default). Rules: :class:`~.problem.ConstraintOptions`.

Re-timing
    ``retime`` "" (the node's default mode), "off", "uniform" or "warp"; ``retime_tolerance`` (rad,
    0: the node's) and ``max_retime_factor`` (0: the node's). The motion's keyframes (a library
    motion's, or the points) are kept with the problem, and its ``rebuild`` makes the request's
    problem for re-timed keyframes (:mod:`.retiming`). Rules: :class:`~.problem.RetimeOptions`.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from marionette_control import _core, validation
from marionette_control.lq.gains import GainDesign
from marionette_control.model import library
from marionette_control.model.joint_map import JointMap
from marionette_control.model.library.source import ModelSource
from marionette_control.model.limits import from_description, limits_of, load_limits
from marionette_control.model.motion import (
    KeyframeMotion,
    MotionError,
    desired_configurations,
    load_motion,
    sample_times,
)
from marionette_control.model.yaml_model import load_packaged_model
from marionette_control.ocp.problem import (
    MARGIN_FAMILIES,
    ConstraintOptions,
    Problem,
    ProblemError,
    RetimeOptions,
    build,
)
from marionette_control.ocp.projection import OptimizerOptions
from marionette_control.ocp.tracking_problem import (
    Keyframes,
    ProblemDefaults,
    WeightDefaults,
    configuration_trajectory,
    consistent_configuration,
    cost_weights,
    desired_trajectory,
    find_motion,
    free_configurations,
    hold_inputs,
    initial_trajectory,
    motion_names,
    rest_state,
    static_equilibrium,
)

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
    constraints: str = ""
    constraint_families: Sequence[str] = ()
    min_tension: float = 0.0
    range_margin: float = 0.0
    speed_margin: float = 0.0
    acceleration_margin: float = 0.0
    barrier_weight: float = 0.0
    tension_reserve: float = 0.0
    reserve: str = ""
    retime: str = ""
    retime_tolerance: float = 0.0
    max_retime_factor: float = 0.0


CONSTRAINT_SWITCH = ("", "on", "off")
RESERVE_SWITCH = ("", "off")


# --------------------------------------------------------------------------------------------- helpers


def _finite_option(value, what: str) -> float:
    """A request's number field whose 0 means "the default": finite and >= 0."""
    return validation.number(value, f"options.{what}", minimum=0.0, short=True, note=" (0: default)",
                             error=ProblemError)


_MOTION_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


def _time_step(requested: float, default: float, times: Optional[np.ndarray]) -> tuple[float, str]:
    """(dt, the request field it came from) (module docstring, "Time step")."""
    if requested > 0:
        return requested, "options.dt"
    if times is not None:
        steps = np.diff(times)
        mean = float(steps.mean())
        if np.all(np.abs(steps - mean) <= 1e-6 * mean):
            return mean, "desired.points[].time_from_start (evenly spaced: their spacing is taken as the time step)"
    return default, "the optimizer's dt parameter (options.dt = 0)"


def _check_time_grid(duration: float, dt: float, dt_from: str, what: str, defaults: ProblemDefaults) -> None:
    """Refuses an implausible time grid or one that does not divide the duration (before anything is sampled)."""
    defaults.check_time_grid(dt, duration, dt_from, what)
    try:
        sample_times(duration, dt, what)
    except MotionError as e:
        raise ProblemError(f"{e} (set options.dt to a divisor of the duration)") from None


def desired_keyframes(model, desired: DesiredMotion) -> Keyframes:
    """Validates sampled desired points: the :class:`~.tracking_problem.Keyframes` they are (linearly
    interpolated, times from the first point)."""
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
    return Keyframes(tuple(names), times - times[0], P, "linear")


def sample_desired(model, desired: DesiredMotion, dt_request: float, defaults: ProblemDefaults):
    """Validates sampled desired points and resamples them at dt: (dt, t (N+1,), Qd (N+1, nq), named)."""
    return _sample_points(model, desired_keyframes(model, desired), dt_request, defaults)


def _sample_points(model, keyframes: Keyframes, dt_request: float, defaults: ProblemDefaults):
    times = keyframes.times
    dt, dt_from = _time_step(dt_request, defaults.dt, times)
    _check_time_grid(float(times[-1]), dt, dt_from, f"the desired motion (desired.points[0..{times.size - 1}])",
                     defaults)
    t, values = keyframes.sample(dt)
    return dt, t, configuration_trajectory(model, keyframes.joints, values), list(keyframes.joints)


def library_motion(name: str, defaults: ProblemDefaults) -> KeyframeMotion:
    """The motion library's motion ``name`` (:meth:`~.tracking_problem.ProblemDefaults.motion_library`)."""
    if not _MOTION_NAME.match(name) or name.endswith(".yaml"):
        raise ProblemError(f"motion name {name!r} is not a library name (letters, digits, '_', '-', '.'; "
                           "no path and no .yaml suffix)")
    directories = defaults.motion_library()
    path = find_motion(name, directories)
    if path is None:
        where = ", ".join(str(d) for d in directories) or "(no motion directory configured)"
        raise ProblemError(f"unknown motion '{name}'; available: {', '.join(motion_names(directories)) or 'none'} "
                           f"(searched {where})")
    try:
        return load_motion(path)
    except MotionError as e:
        raise ProblemError(f"motion '{name}' cannot be loaded: {e}") from None


def sample_motion(model, name: str, dt_request: float, defaults: ProblemDefaults):
    """A library motion sampled at dt: (dt, t (N+1,), Qd (N+1, nq), named)."""
    return _sample_motion(model, name, library_motion(name, defaults), dt_request, defaults)


def _sample_motion(model, name: str, motion: KeyframeMotion, dt_request: float, defaults: ProblemDefaults):
    dt, dt_from = _time_step(dt_request, defaults.dt, None)
    _check_time_grid(motion.duration, dt, dt_from, f"motion '{name}'", defaults)
    try:
        t, Qd = desired_configurations(model, motion, dt)
    except MotionError as e:  # (the Python API's hint "map it with names=" means nothing to a request)
        reason = str(e).replace("; map it with names=", "")
        raise ProblemError(f"motion '{name}' does not fit model '{model.name}': {reason}") from None
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
    return {n: validation.weight(v, f"options.{what}_weights entry for '{n}'", positive=positive, error=ProblemError)
            for n, v in zip(names, values)}


def weight_vectors(model, named: Sequence[str], defaults: WeightDefaults, options: RequestOptions):
    """(Q (nx,), R (nU,), Qf (nx,)): defaults by kind, overridden by the request's weights by name."""
    states, inputs = list(model.state_names), list(model.discrete_input_names)
    return cost_weights(
        model, named, defaults,
        state=_named_weights(options.state_weight_names, options.state_weights, states, "state", False),
        input=_named_weights(options.input_weight_names, options.input_weights, inputs, "input", True),
        terminal=_named_weights(options.terminal_weight_names, options.terminal_weights, states, "terminal", False))


def optimizer_options(options: RequestOptions, defaults: ProblemDefaults) -> OptimizerOptions:
    """OptimizerOptions from the request's schedule, tolerance, iteration cap and deadline (0/empty: defaults)."""
    methods, counts = list(options.methods), list(options.method_iterations)
    if methods == ["dmocc"]:   # DMOCC (ocp/dmocc.py): no schedule; its iteration cap is max_iterations
        if any(int(c) > 0 for c in counts):
            raise ProblemError(f"options.method_iterations {counts}: DMOCC has no method schedule; cap its "
                               "IPOPT iterations with options.max_iterations and send method_iterations empty")
        methods, counts = [], []
    elif "dmocc" in methods:
        raise ProblemError("options.methods: 'dmocc' is a method of its own, not a schedule entry: send "
                           "methods ['dmocc'] alone")
    if len(methods) != len(counts):
        raise ProblemError(f"options.methods has {len(methods)} entries but options.method_iterations has "
                           f"{len(counts)}: they must have the same length")
    try:
        return defaults.optimizer_options(
            schedule=[(str(m), int(c) if int(c) > 0 else None) for m, c in zip(methods, counts)] or None,
            tolerance=_finite_option(options.tolerance, "tolerance") or None,
            max_iterations=int(options.max_iterations) or None,
            deadline=_finite_option(options.deadline_s, "deadline_s") or None)
    except ProblemError as e:
        raise ProblemError(f"options.{_request_field(e.key)}: {e}", key=e.key) from None


def constraint_options(options: RequestOptions, defaults: ConstraintOptions) -> ConstraintOptions:
    """ConstraintOptions from the request's constraint fields (empty/0: the defaults); errors name the field."""
    switch = str(options.constraints)
    if switch not in CONSTRAINT_SWITCH:
        raise ProblemError(f"options.constraints must be \"\" (default), \"on\" or \"off\", got {switch!r}")
    kw = {}
    if switch:
        kw["enabled"] = switch == "on"
    if list(options.constraint_families):
        kw["families"] = [str(f) for f in options.constraint_families]
    fields = {"min_tension": "min_tension", "barrier_weight": "barrier_weight"}
    for name, attr in fields.items():
        v = _finite_option(getattr(options, name), name)
        if v:
            kw[attr] = v
    switch = str(options.reserve)
    if switch not in RESERVE_SWITCH:
        raise ProblemError(f"options.reserve must be \"\" (the node's default reserve) or \"off\", got {switch!r}")
    margins = {f: 0.0 for f in MARGIN_FAMILIES} if switch == "off" else dict(defaults.margins)
    kw["tension_reserve"] = 0.0 if switch == "off" else defaults.tension_reserve
    for family in MARGIN_FAMILIES:
        v = _finite_option(getattr(options, f"{family}_margin"), f"{family}_margin")
        if v:
            margins[family] = v
    kw["margins"] = margins
    v = _finite_option(options.tension_reserve, "tension_reserve")
    if v:
        kw["tension_reserve"] = v
    try:
        return dataclasses.replace(defaults, **kw)
    except ProblemError as e:
        raise ProblemError(f"options.{_request_field(e.key)}: {e}", key=e.key) from None


def retime_options(options: RequestOptions, defaults: RetimeOptions) -> RetimeOptions:
    """RetimeOptions from the request's re-timing fields (empty/0: the defaults); errors name the field."""
    kw = {}
    if str(options.retime):
        kw["mode"] = str(options.retime)
    for name, attr in (("retime_tolerance", "tolerance"), ("max_retime_factor", "max_factor")):
        v = _finite_option(getattr(options, name), name)
        if v:
            kw[attr] = v
    try:
        return dataclasses.replace(defaults, **kw)
    except ProblemError as e:
        raise ProblemError(f"options.{_request_field(e.key)}: {e}", key=e.key) from None


def _request_field(key: Optional[str]) -> str:
    """The OptimizationOptions field of a problem-description key (``constraints.margins.speed`` ->
    ``speed_margin``)."""
    key = key or ""
    if key.startswith("constraints.margins."):
        return key.rsplit(".", 1)[1] + "_margin"
    entry = re.fullmatch(r"optimizer\.schedule\[(\d+)\]\.(method|iterations)", key)
    if entry:   # one entry of the schedule: its method and iteration count are two parallel fields
        return f"{'methods' if entry[2] == 'method' else 'method_iterations'}[{entry[1]}]"
    return {"constraints.families": "constraint_families", "constraints.enabled": "constraints",
            "weights.input": "input_weights", "optimizer.schedule": "methods", "optimizer.deadline": "deadline_s",
            "retime.mode": "retime", "retime.tolerance": "retime_tolerance", "retime.max_factor": "max_retime_factor"
            }.get(key, key.replace("constraints.", "").replace("optimizer.", ""))


def request_limits(model):
    """The limits of a registered model (its model file's, :func:`~marionette_control.model.limits.load_limits`)."""
    if model.name in library.available():
        return load_limits(ModelSource.registered(model.name))
    return limits_of(model)


def actuator_joints(model) -> list[str]:
    """The hardware joint names of ``model``'s kinematic configurations, in model order: the names on the arm's
    ``/joint_states`` and command topics (its model file's ``hardware.joint_names``; for a model without a file,
    the configuration names; :class:`~marionette_control.model.joint_map.JointMap`)."""
    desc = ModelSource.registered(model.name).description() if model.name in library.available() else None
    return JointMap.of(model, desc.hardware_joints if desc is not None else None).kinematic_hardware_names


class RequestModels:
    """The models requests name (model-library names), each built once with its limits and the hardware names
    of its drives, and the model files :meth:`add_file` built under their models' names (which take precedence
    over the library's); safe to share between threads."""

    def __init__(self):
        self._models: dict = {}
        self._lock = threading.Lock()

    def add_file(self, path: str) -> str:
        """Builds the model file ``path`` (absolute, or a name under ``config/``: ``load_packaged_model``, as every
        node's ``model_file``; a variant file such as a calibrated model works too) with its limits and hardware
        joint names, and returns its model's name; ProblemError when it does not load."""
        try:
            desc = load_packaged_model(path)
        except (ValueError, OSError) as e:
            raise ProblemError(f"model file '{path}' cannot be built: {e}") from None
        joints = JointMap.of(desc.model, desc.hardware_joints).kinematic_hardware_names
        with self._lock:
            self._models[desc.model.name] = (desc.model, from_description(desc), joints)
        return desc.model.name

    def get(self, name: str) -> tuple:
        """(model, limits, :func:`actuator_joints`) of a model-library name; ProblemError when there is no such
        model or it does not build."""
        with self._lock:
            if name not in self._models:
                if name not in library.available():
                    raise ProblemError(f"unknown model '{name}'; available: {', '.join(library.available())}")
                try:
                    model = library.get(name)
                    self._models[name] = (model, request_limits(model), actuator_joints(model))
                except Exception as e:  # a model file that does not load is the request's problem to hear about
                    raise ProblemError(f"model '{name}' cannot be built: {e}") from None
            return self._models[name]


# --------------------------------------------------------------------------------------------- the builder


def build_problem(model, motion_name: str = "", desired: Optional[DesiredMotion] = None,
                  options: Optional[RequestOptions] = None, defaults: Optional[ProblemDefaults] = None,
                  gains: Optional[GainDesign] = None, limits=None,
                  retimed: Optional[tuple] = None) -> Problem:
    """Validates a request and builds its :class:`~.problem.Problem` with a feasible initial trajectory
    (``X0``, ``U0``, ``initial_cost``) (raises ProblemError).

    ``motion_name`` (a motion library name) takes precedence over ``desired``. ``gains``: the design of
    the tracking gains shipped with the result (default:
    :class:`~marionette_control.lq.gains.GainDesign`'s; the optimizer node's ``tracking_gains.*`` parameters).
    ``limits``: the model's limits (default: the registered model's file, :func:`request_limits`).
    ``retimed``: (keyframes, dt, source) of a re-timing of the request's motion, which then replaces it (the
    problem's ``rebuild``, :mod:`.retiming`).
    """
    options = options or RequestOptions()
    defaults = defaults or ProblemDefaults()
    dt_request = _finite_option(options.dt, "dt")
    if retimed is not None:
        keyframes, dt, source = retimed
        _check_time_grid(keyframes.duration, dt, f"the time step of {source}", f"{source}, re-timed", defaults)
        t, values = keyframes.sample(dt)
        Qd, named = configuration_trajectory(model, keyframes.joints, values), list(keyframes.joints)
    elif motion_name:
        motion = library_motion(motion_name, defaults)
        dt, t, Qd, named = _sample_motion(model, motion_name, motion, dt_request, defaults)
        keyframes, source = Keyframes.of_motion(motion), f"motion '{motion_name}'"
    else:
        if desired is None:
            raise ProblemError("the desired motion is empty: give motion_name or desired with joint_names and at "
                               "least 2 points")
        keyframes = desired_keyframes(model, desired)
        dt, t, Qd, named = _sample_points(model, keyframes, dt_request, defaults)
        source = "desired"
    retime = retime_options(options, defaults.retime)
    Q, R, Qf = weight_vectors(model, named, defaults.weights, options)
    opt = optimizer_options(options, defaults)
    constraints = constraint_options(options, defaults.constraints)
    system = _core.DiscreteSystem(model, dt)
    Xd, Ud = desired_trajectory(system, Qd)
    try:
        q0 = consistent_configuration(model, Qd[0], named)
    except ProblemError as e:
        raise ProblemError(f"the desired initial configuration cannot be made consistent with the constraints: "
                           f"{e}") from None
    free = free_configurations(model, named)
    if model.nc and free:
        # Start where the machine rests: the motion's first pose held still by the actuators it does
        # not name (for the arm: the carriage and string holding the lowered pose, as the simulator starts).
        try:
            q0 = static_equilibrium(model, q0, free)
        except ProblemError:
            pass  # no rest state reachable by those actuators: start from the consistent configuration
    x0 = rest_state(system, q0)
    try:
        problem = build(model, dt, t, Xd, Ud, x0, Q, R, Qf, named, constraints,
                        limits if limits is not None else request_limits(model), opt, gains, source, system)
    except ProblemError as e:
        raise ProblemError(f"options.{_request_field(e.key)}: {e}" if e.key else str(e), key=e.key) from None
    problem.U0 = hold_inputs(model, x0, t.size - 1)
    problem.X0 = initial_trajectory(system, x0, problem.U0)
    problem.initial_cost = float(problem.cost.without_barriers().value(problem.X0, problem.U0))
    if list(options.methods) == ["dmocc"]:
        problem.method = "dmocc"
    problem.retime, problem.keyframes = retime, keyframes
    problem.rebuild = lambda other: build_problem(model, options=options, defaults=defaults, gains=gains,
                                                  limits=limits, retimed=(other, dt, source))
    return problem


__all__ = ["ProblemError", "WeightDefaults", "ProblemDefaults", "DesiredMotion", "RequestOptions",
           "build_problem", "desired_keyframes", "library_motion", "sample_desired", "sample_motion",
           "weight_vectors", "optimizer_options", "constraint_options", "retime_options", "request_limits",
           "actuator_joints", "RequestModels"]
