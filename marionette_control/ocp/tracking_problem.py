"""The trajectory-tracking problem (thesis §6.7.2): the steps and defaults both front ends share.

Two front ends turn a desired motion, weights and options into the one problem description,
:class:`~marionette_control.ocp.problem.Problem`: optimization requests (:mod:`.request`, used
by the optimizer node) and YAML specs (:mod:`.spec`, :mod:`.spec_problem`, used by ``marionette-optimize``). Each
checks its own input's shape and words its errors in its own terms (request fields, spec keys);
the steps below and their defaults are common, and this is the one place that documents them (the
rules of constraints and optimizer options are checked in :mod:`.problem` and
:class:`~.projection.OptimizerOptions`).

Desired trajectory
    The configurations the desired motion names follow it, sampled at t_k = k dt, k = 0..N (the
    duration must be a whole number of steps); every other configuration is 0. A motion given as
    keyframes (a motion file, inline keyframes, sampled points) is kept as :class:`Keyframes` with
    the problem, which re-timing stretches (:mod:`.retiming`). Momenta and
    kinematic velocities are 0 (``momenta="zero"``, the thesis's choice), or the discrete
    Legendre transform of consecutive desired configurations (``"legendre"``). Desired inputs:
    force inputs 0, kinematic inputs the next desired kinematic configuration
    (:func:`desired_trajectory`).

Cost weights (diagonal, :class:`WeightDefaults`)
    By kind of component: configurations the motion names 1000, the others 0 (left to the
    optimizer; the thesis weights only the arm angles heavily), momenta 1, kinematic velocities
    0.01, force inputs 1, kinematic inputs 0.01; terminal weights = ``terminal_scale`` (1) times
    the state weights. Front ends override them by name (:func:`weights_by_name`). State
    weights must be >= 0, input weights > 0 (every LQ subproblem needs R positive definite).

Tracking gains (:class:`~marionette_control.lq.gains.GainDesign`)
    Time-varying LQR along the optimum with the weights by kind and the command delay of a
    :class:`~marionette_control.lq.gains.GainDesign` (its defaults: designed for the arm and one step of delay,
    ``docs/tracking.md``), computed for every result by :meth:`~.problem.Problem.with_gains`
    (:func:`~marionette_control.lq.gains.design_gains`) and shipped with their design record.

Optimizer (:class:`ProblemDefaults`)
    4 quasi-Newton iterations, then Newton until |Dh∘ζ| < 1e-6; at most 200 iterations; no
    deadline. Time step 0.01 s where the front end gives none.

Plausible time grids (:meth:`ProblemDefaults.check_time_grid`, for requests from the graph)
    The time step in [``min_dt``, ``max_dt``] = [1 ms, 0.1 s], the duration at most
    ``max_duration`` = 120 s and at most ``max_steps`` = 20000 steps. Why: the controller ticks
    once per step on the joint states of the arm's control loop (ros2_control loops run at up to
    about 1 kHz; the simulator publishes at 100 Hz), so a shorter step has no joint state to
    answer; at 0.1 s the midpoint rule already puts the arm's swinging mode (ω ≈ 5.8 rad/s with
    the string, a 1.1 s period) 8 % low in frequency (5.3 rad/s), and feedback at 10 Hz cannot
    correct within that mode, so a longer step plans a motion the arm does not make. A trajectory
    is one motion: two minutes at 0.01 s is 12 000 steps, which the controller's Kalman filter
    precomputes in about half a second when it takes the trajectory; hours of trajectory are a
    mistake (e.g. two desired points 1000 s apart would be a single 1000 s step) or an attempt to
    hold the single optimization slot.

Initial state
    The desired initial configuration, made consistent with the constraints by moving the
    configurations that are free to move (default: the kinematic configurations the motion
    does not name; failing that every configuration it does not name; failing that all): a
    free string length is set to its string's length (exact), then Gauss–Newton steps of
    minimal norm (:func:`consistent_configuration`). Optionally (specs) the free configurations
    are first solved for a static equilibrium (:func:`static_equilibrium`). The state is the
    discrete rest state x0 = [q0; D₂L_d(q0, q0); 0] (:func:`rest_state`): the state of the
    midpoint integrator resting at q0, which it keeps exactly where q0 is an equilibrium
    (p = 0 is rest only for the continuous system).

Initial trajectory (thesis §6.7.2)
    x0 simulated with constant inputs: force inputs 0, kinematic configurations held at their
    values in x0 (:func:`hold_inputs`, :func:`initial_trajectory`).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional, Sequence

import numpy as np
from scipy.interpolate import CubicSpline
from scipy.optimize import least_squares

from marionette_control import _core, validation
from marionette_control.model.motion import KeyframeMotion, sample_times
from marionette_control.model.state_layout import input_by_kind, state_by_kind
from marionette_control.model.strings import string_constraints
from marionette_control.ocp.problem import ConstraintOptions, ProblemError, RetimeOptions
from marionette_control.ocp.projection import OptimizerOptions, OptionError
from marionette_control.resources import config_file

MOMENTA = ("zero", "legendre")
INTERPOLATIONS = ("clamped", "natural", "not-a-knot", "linear", "cosine")


class UnknownWeightName(ProblemError):
    """A weight override whose key matches no component name (``group`` and ``key`` say which)."""

    def __init__(self, group: str, key: str, names: Sequence[str]):
        super().__init__(f"{group}: '{key}' matches no name (names: {', '.join(names)})")
        self.group, self.key, self.names = group, key, list(names)


# --------------------------------------------------------------------------------------------- defaults


@dataclass
class WeightDefaults:
    """Diagonal cost weights by kind of component (see the module docstring)."""

    named_configuration: float = 1000.0
    other_configuration: float = 0.0
    momentum: float = 1.0
    kinematic_velocity: float = 0.01
    force_input: float = 1.0
    kinematic_input: float = 0.01
    terminal_scale: float = 1.0

    def __post_init__(self):
        for name in ("named_configuration", "other_configuration", "momentum", "kinematic_velocity",
                     "terminal_scale", "force_input", "kinematic_input"):
            validation.weight(getattr(self, name), f"default weight '{name}'",
                              positive=name in ("force_input", "kinematic_input"), error=ProblemError)

    def vectors(self, model, named: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(Q (nx,), R (nU,)) for ``model`` when the desired motion names the configurations ``named``: laid out
        by kind (:mod:`marionette_control.model.state_layout`), the named configurations then set apart."""
        Q = state_by_kind(model, dynamic_configuration=self.other_configuration,
                          kinematic_configuration=self.other_configuration, momentum=self.momentum,
                          kinematic_velocity=self.kinematic_velocity)
        Q[[i for i, c in enumerate(model.config_names) if c in set(named)]] = self.named_configuration
        R = input_by_kind(model, force_input=self.force_input, kinematic_input=self.kinematic_input)
        return Q, R


def default_motion_directories() -> list[Path]:
    """The package's ``config/motions`` (:mod:`marionette_control.resources`), if it exists."""
    try:
        return [config_file("motions")]
    except FileNotFoundError:
        return []


@dataclass
class ProblemDefaults:
    """What a front end leaves open (see the module docstring).

    ``min_dt``, ``max_dt`` (s), ``max_duration`` (s) and ``max_steps`` bound the time grid a
    request may ask for (:meth:`check_time_grid`; the module docstring says why these values);
    ``motion_directories`` is the motion library (default: :func:`default_motion_directories`);
    ``constraints`` the inequality constraints a request gets unless it says otherwise
    (:class:`~.problem.ConstraintOptions`), ``retime`` its re-timing (:class:`~.problem.RetimeOptions`).
    """

    dt: float = 0.01
    weights: WeightDefaults = field(default_factory=WeightDefaults)
    schedule: Sequence = (("quasi_newton", 4), ("newton", None))
    tolerance: float = 1e-6
    max_iterations: int = 200
    deadline: Optional[float] = None
    max_steps: int = 20000
    min_dt: float = 1e-3
    max_dt: float = 0.1
    max_duration: float = 120.0
    motion_directories: Sequence = ()
    constraints: ConstraintOptions = field(default_factory=ConstraintOptions)
    retime: RetimeOptions = field(default_factory=RetimeOptions)

    def __post_init__(self):
        for name in ("dt", "min_dt", "max_dt", "max_duration"):
            validation.number(getattr(self, name), f"default {name}", positive=True, short=True, error=ProblemError)
        validation.integer(self.max_steps, "max_steps", minimum=1, error=ProblemError)
        if not self.min_dt <= self.dt <= self.max_dt:
            raise ProblemError(f"default dt {self.dt:g} s must lie in [min_dt, max_dt] = [{self.min_dt:g}, "
                               f"{self.max_dt:g}] s")
        try:
            self.optimizer_options()
        except ProblemError as e:
            raise ProblemError(f"default optimizer options: {e.key.removeprefix('optimizer.')}: {e}") from None

    def optimizer_options(self, **given) -> OptimizerOptions:
        """OptimizerOptions: these defaults replaced by the ``given`` OptimizerOptions fields (None: default).
        A violated rule raises ProblemError with the key ``optimizer.<option>`` (OptionError's option)."""
        base = dict(schedule=self.schedule, tolerance=self.tolerance, max_iterations=self.max_iterations,
                    deadline=self.deadline)
        base.update({k: v for k, v in given.items() if v is not None})
        try:
            return OptimizerOptions(**base)
        except OptionError as e:
            raise ProblemError(e.message, key=f"optimizer.{e.option}") from None

    def check_time_grid(self, dt: float, duration: float, dt_from: str, what: str) -> int:
        """N, the number of steps of dt (s) a motion of ``duration`` (s) takes, checked against the bounds
        (``min_dt`` <= dt <= ``max_dt``, duration <= ``max_duration``, N <= ``max_steps``; in this order).

        ``dt_from`` names where dt came from (the request's field, e.g. ``options.dt``), ``what`` the motion
        (e.g. ``the desired motion (desired.points)``). Raises ProblemError naming the field, the value and the
        bound (to a relative 1e-9: times given in decimal, like 0.1 s, are not exact in binary). Whether the
        duration is a whole number of steps is the sampler's rule (``model.motion.sample_times``).
        """
        rounding = 1e-9
        if dt < self.min_dt * (1 - rounding):
            raise ProblemError(f"{dt_from}: the time step {dt:.9g} s is below min_dt = {self.min_dt:g} s (the "
                               "controller ticks once per step, on the arm's joint states)", key="dt")
        if dt > self.max_dt * (1 + rounding):
            raise ProblemError(f"{dt_from}: the time step {dt:.9g} s is above max_dt = {self.max_dt:g} s (a coarser "
                               "step plans a motion the arm does not make)", key="dt")
        if duration > self.max_duration * (1 + rounding):
            raise ProblemError(f"{what} lasts {duration:.9g} s, more than max_duration = {self.max_duration:g} s",
                               key="duration")
        n = round(duration / dt)
        if n > self.max_steps:
            raise ProblemError(f"{what} needs {n} steps of dt = {dt:.9g} s, more than the node's limit of "
                               f"max_steps = {self.max_steps}", key="steps")
        return n

    def motion_library(self) -> list[Path]:
        """The motion library directories."""
        return list(self.motion_directories) or default_motion_directories()


# --------------------------------------------------------------------------------------------- desired trajectory


def find_motion(name: str, directories: Sequence) -> Optional[Path]:
    """``<dir>/<name>.yaml`` in the first of ``directories`` that has it, or None."""
    for d in directories:
        p = Path(d) / f"{name}.yaml"
        if p.is_file():
            return p
    return None


def motion_names(directories: Sequence) -> list[str]:
    """Names of the motions in the library ``directories``, sorted."""
    return sorted({p.stem for d in directories if Path(d).is_dir() for p in Path(d).glob("*.yaml")})


def sample_keyframes(times: np.ndarray, values: np.ndarray, dt: float,
                     interpolation: str = "linear") -> tuple[np.ndarray, np.ndarray]:
    """Keyframes (times (K,) from 0, strictly increasing; values (K, J)) sampled at t_k = k dt.

    ``interpolation``: ``linear``; ``cosine`` (eased: zero velocity at every key); or a C² cubic
    spline through all keys, ``clamped`` (zero velocity at the ends), ``natural`` or
    ``not-a-knot``. Returns (t (N+1,), values (N+1, J)); raises MotionError when the duration is
    not a whole number of steps.
    """
    t = sample_times(float(times[-1]), dt, "the desired motion")
    if interpolation in ("linear", "cosine"):
        i = np.clip(np.searchsorted(times, t, side="right") - 1, 0, len(times) - 2)
        s = np.clip((t - times[i]) / (times[i + 1] - times[i]), 0.0, 1.0)
        if interpolation == "cosine":
            s = 0.5 * (1.0 - np.cos(np.pi * s))
        return t, values[i] + s[:, None] * (values[i + 1] - values[i])
    if interpolation not in INTERPOLATIONS:
        raise ValueError(f"interpolation must be one of {', '.join(INTERPOLATIONS)}, got {interpolation!r}")
    return t, CubicSpline(times, values, axis=0, bc_type=interpolation)(np.clip(t, 0.0, times[-1]))


@dataclass(frozen=True)
class Keyframes:
    """A desired motion as keyframes, as drawn: what re-timing stretches (:mod:`.retiming`).

    joints : the prescribed configurations (J names);  times : (K,) s from 0, strictly increasing;
    values : (K, J) in SI units;  interpolation : how they are sampled (:func:`sample_keyframes`,
    :data:`INTERPOLATIONS`: a motion file's spline type, or ``linear`` for sampled points).
    """

    joints: tuple
    times: np.ndarray
    values: np.ndarray
    interpolation: str = "clamped"

    @classmethod
    def of_motion(cls, motion: KeyframeMotion) -> "Keyframes":
        """The keyframes of a motion file (:class:`~marionette_control.model.motion.KeyframeMotion`), sampled by
        its C² spline."""
        return cls(tuple(motion.joints), np.asarray(motion.times, float), np.asarray(motion.values, float),
                   motion.spline_type)

    @property
    def duration(self) -> float:
        return float(self.times[-1])

    def sample(self, dt: float) -> tuple[np.ndarray, np.ndarray]:
        """(t (N+1,), values (N+1, J)) at t_k = k dt (:func:`sample_keyframes`)."""
        return sample_keyframes(self.times, self.values, dt, self.interpolation)

    def retimed(self, times: np.ndarray) -> "Keyframes":
        """The same keys at other ``times`` (K,) (strictly increasing, from 0)."""
        times = np.asarray(times, dtype=float)
        if times.shape != self.times.shape or times[0] != 0.0 or np.any(np.diff(times) <= 0):
            raise ValueError(f"re-timed keyframes need {self.times.size} strictly increasing times from 0, got "
                             f"{times.tolist()}")
        return Keyframes(self.joints, times, self.values, self.interpolation)


def configuration_trajectory(model, joints: Sequence[str], values: np.ndarray) -> np.ndarray:
    """Q_d (N+1, nq): the columns of ``values`` (N+1, len(joints)) on the configurations ``joints``, the others 0."""
    Qd = np.zeros((values.shape[0], model.nq))
    Qd[:, [model.config_index(j) for j in joints]] = values
    return Qd


def desired_trajectory(system, Qd: np.ndarray, momenta: str = "zero") -> tuple[np.ndarray, np.ndarray]:
    """(X_d (N+1, nx), U_d (N, nU)) of desired configurations Q_d (N+1, nq) (module docstring)."""
    model = system.model
    if momenta not in MOMENTA:
        raise ValueError(f"momenta must be one of {', '.join(MOMENTA)}, got {momenta!r}")
    N = Qd.shape[0] - 1
    Xd = np.zeros((N + 1, model.nx))
    Xd[:, :model.nq] = Qd
    if momenta == "legendre":
        Xd[0] = system.state_from_configs(Qd[0], Qd[0])
        for k in range(1, N + 1):
            Xd[k] = system.state_from_configs(Qd[k - 1], Qd[k])
    kin = [i for i, k in enumerate(model.kinematic) if k]
    Ud = np.zeros((N, model.nU))
    Ud[:, model.nu:] = Qd[1:, kin]
    return Xd, Ud


# --------------------------------------------------------------------------------------------- weights


def weights_by_name(base: np.ndarray, names: Sequence[str], overrides: Mapping[str, float],
                    group: str = "weights") -> np.ndarray:
    """``base`` (n,) with entries replaced by name: key ``default`` sets every entry, then glob patterns
    (in mapping order), then exact names. Raises UnknownWeightName for a key that matches no name."""
    names = list(names)
    w = np.array(base, dtype=float)
    if "default" in overrides:
        w[:] = overrides["default"]
    exact = []
    for k, v in overrides.items():
        if k == "default":
            continue
        if k in names:
            exact.append((k, v))
            continue
        hits = [i for i, n in enumerate(names) if fnmatch.fnmatchcase(n, k)]
        if not hits:
            raise UnknownWeightName(group, k, names)
        w[hits] = v
    for k, v in exact:
        w[names.index(k)] = v
    return w


def cost_weights(model, named: Sequence[str], defaults: WeightDefaults, state: Optional[Mapping[str, float]] = None,
                 input: Optional[Mapping[str, float]] = None, terminal: Optional[Mapping[str, float]] = None,
                 prefix: str = ""):
    """(Q (nx,), R (nU,), Qf (nx,)): the defaults by kind, overridden by name (:func:`weights_by_name`;
    the terminal overrides apply to ``terminal_scale`` times the final Q). An UnknownWeightName's group
    is ``prefix`` + ``state``, ``input`` or ``terminal``."""
    states, inputs = list(model.state_names), list(model.discrete_input_names)
    Q0, R0 = defaults.vectors(model, named)
    Q = weights_by_name(Q0, states, state or {}, f"{prefix}state")
    R = weights_by_name(R0, inputs, input or {}, f"{prefix}input")
    Qf = weights_by_name(defaults.terminal_scale * Q, states, terminal or {}, f"{prefix}terminal")
    return Q, R, Qf


def terminal_velocity_weight(model, xd: np.ndarray, velocity: Mapping[str, float], Qf: np.ndarray,
                             group: str = "terminal_velocity") -> np.ndarray:
    """Qf (nx, nx): the terminal weight ``Qf`` (nx,) whose momentum block is replaced by weights on the
    *velocities* of the dynamic configurations: ½ (v − v_d)ᵀ W (v − v_d) with v = M(q_d)⁻¹ p, i.e. the block
    M⁻¹ W M⁻¹ (M the dynamic block of the mass matrix at the desired final configuration; exact where
    q_N = q_d and the kinematic velocities are the desired ones — the Hessian of a velocity penalty at a rest
    target, as seed 004 App. A states its terminal cost). ``velocity`` maps dynamic configuration names (or
    ``default``, glob patterns) to weights ≥ 0; the momenta's weights in ``Qf`` are discarded."""
    nq, nd = model.nq, model.nd
    W = weights_by_name(np.zeros(nd), list(model.config_names)[:nd], velocity, group)
    M = np.asarray(model.lagrangian(np.asarray(xd[:nq], float), np.zeros(nq))["Lvv"])[:nd, :nd]
    Minv = np.linalg.inv(M)
    out = np.diag(np.asarray(Qf, dtype=float))
    p = slice(nq, nq + nd)
    out[p, p] = Minv @ np.diag(W) @ Minv
    return 0.5 * (out + out.T)


# --------------------------------------------------------------------------------------------- initial state


def free_configurations(model, named: Sequence[str]) -> list[int]:
    """Indices of the kinematic configurations the desired motion does not name (moved first to fit q0)."""
    return [i for i, c in enumerate(model.config_names) if model.kinematic[i] and c not in named]


def _satisfy_constraints(model, q: np.ndarray, free: list, tolerance: float, max_iterations: int) -> np.ndarray:
    """q moved on ``free`` towards h(q) = 0: free string lengths set exactly, then minimal-norm Gauss-Newton."""
    x = np.array(q, dtype=float)
    g = model.placements(x)
    for s in string_constraints(model):
        i = model.config_index(s.length)
        if i in free:
            x[i] = np.linalg.norm(g[model.frame_index(s.frame1), :3, 3] - g[model.frame_index(s.frame2), :3, 3])
    for _ in range(max_iterations):
        h, Dh = model.constraints(x)
        if np.abs(h).max() <= tolerance:
            break
        x[free] -= np.linalg.lstsq(Dh[:, free], h, rcond=None)[0]
    return x


def consistent_configuration(model, q: np.ndarray, named: Sequence[str] = (), free: Optional[Sequence[int]] = None,
                             tolerance: float = 1e-12, max_iterations: int = 50) -> np.ndarray:
    """q (nq,) made to satisfy h(q) = 0 (|h| <= 1e3 tolerance) by moving configurations that are free to move.

    ``free`` (indices) are those; by default the kinematic configurations the desired motion
    (``named``) does not name, then every configuration it does not name, then all (the first
    set that works). Free string lengths are set to the hook-to-control distance, the rest by
    Gauss-Newton steps of minimal norm with the exact Dh. Raises ProblemError when no set works.
    """
    q = np.array(q, dtype=float)
    if model.nc == 0:
        return q
    if free is not None:
        candidates = [list(free)]
    else:
        unnamed = [i for i, c in enumerate(model.config_names) if c not in named]
        candidates = [c for c in (free_configurations(model, named), unnamed, list(range(model.nq))) if c]
    for cols in candidates:
        x = _satisfy_constraints(model, q, cols, tolerance, max_iterations)
        if np.abs(model.constraints(x)[0]).max() <= 1e3 * tolerance:
            return x
    moved = ", ".join(model.config_names[i] for i in candidates[-1]) if candidates and candidates[-1] else "nothing"
    raise ProblemError(f"moving {moved} does not satisfy the constraints {', '.join(model.constraint_names)} of "
                       f"model '{model.name}' (Gauss-Newton did not converge)")


def static_equilibrium(model, q: np.ndarray, free: Sequence[int], tolerance: float = 1e-8) -> np.ndarray:
    """q (nq,) with the configurations ``free`` (indices) solved for a static equilibrium with h(q) = 0.

    Solves dL/dq_d(q, 0) + Dh_d(q)^T lam = 0, h(q) = 0 for (q[free], lam) by least squares
    (scipy, finite-difference Jacobian: a set-up computation, not part of the dynamics). Raises
    ProblemError when the residual stays above ``tolerance``.
    """
    free = list(free)
    if not free:
        raise ProblemError("no configuration is free to reach a static equilibrium")
    nd, nc = model.nd, model.nc
    zero_v = np.zeros(model.nq)

    def residual(z):
        qq = np.array(q, dtype=float)
        qq[free] = z[:len(free)]
        lq = np.asarray(model.lagrangian(qq, zero_v, 1)["Lq"])[:nd]
        h, Dh = model.constraints(qq)
        return np.concatenate([lq + Dh[:, :nd].T @ z[len(free):], h]) if nc else lq

    z0 = np.concatenate([np.asarray(q, dtype=float)[free], np.zeros(nc)])
    sol = least_squares(residual, z0, xtol=1e-15, ftol=1e-15, gtol=1e-15, max_nfev=200 * (len(z0) + 1))
    res = float(np.linalg.norm(residual(sol.x)))
    if res > tolerance:
        raise ProblemError(f"no static equilibrium found by moving {', '.join(model.config_names[i] for i in free)} "
                           f"(residual {res:.3g})")
    out = np.array(q, dtype=float)
    out[free] = sol.x[:len(free)]
    return out


def rest_state(system, q: np.ndarray) -> np.ndarray:
    """The discrete rest state x (nx,) = [q; D₂L_d(q, q); 0] at configuration q (nq,) (module docstring)."""
    return np.asarray(system.state_from_configs(q, q), dtype=float)


# --------------------------------------------------------------------------------------------- initial trajectory


def hold_inputs(model, x0: np.ndarray, N: int, inputs: Optional[Mapping[str, float]] = None) -> np.ndarray:
    """Constant inputs (N, nU): force inputs 0, kinematic configurations held at their values in x0 (nx,),
    then ``inputs`` (discrete input name -> value) where given."""
    u = np.zeros(model.nU)
    kin = [i for i, k in enumerate(model.kinematic) if k]
    u[model.nu:] = np.asarray(x0, dtype=float)[kin]
    names = list(model.discrete_input_names)
    for name, v in (inputs or {}).items():
        u[names.index(name)] = v
    return np.tile(u, (N, 1))


def initial_trajectory(system, x0: np.ndarray, U: np.ndarray) -> np.ndarray:
    """X (N+1, nx): x0 (nx,) simulated with inputs U (N, nU); ProblemError when a step fails."""
    try:
        return system.simulate(x0, U)[0]
    except _core.StepError as e:
        raise ProblemError(f"simulating the initial trajectory from x(0) failed: {e}") from None


__all__ = ["UnknownWeightName", "WeightDefaults", "ProblemDefaults", "Keyframes",
           "default_motion_directories", "find_motion", "motion_names", "sample_keyframes",
           "configuration_trajectory", "desired_trajectory", "weights_by_name", "cost_weights",
           "free_configurations", "consistent_configuration", "static_equilibrium", "rest_state", "hold_inputs",
           "initial_trajectory", "MOMENTA", "INTERPOLATIONS"]
