"""One trajectory-optimization problem, ROS-free: what is optimized, under which limits, and how.

A :class:`Problem` is the single description every front end builds — YAML specs
(:mod:`.spec`), optimization requests (:mod:`.request`, what the optimizer node receives) and
Python (:func:`build`) — and every consumer reads (the optimizer, the trajectory file's
metadata, the reports):

* the model, its discrete system at Δt, the time grid and the desired trajectory (X_d, U_d);
* the initial state x(0);
* the cost: a :class:`~.cost.Cost` of terms — state tracking, input tracking, terminal state
  (thesis §6.1), optionally the initial-state weight (§6.3.2.1), and one barrier term per group of
  inequality constraints (:mod:`.constraints`);
* the inequality constraints (:class:`ConstraintOptions` says which, from the model's limits,
  :mod:`marionette_control.model.limits`): drive range, speed and acceleration (the step from the
  initial rest state included), string tension ≥ its minimum, optional joint limits and force
  bounds;
* whether a motion too fast for the arm is re-timed (:class:`RetimeOptions`, :mod:`.retiming`), and what
  counts as following it (:mod:`.trackability`);
* the optimizer options (method schedule, tolerances, deadline, barrier method) and the design of
  the tracking gains computed along the optimum (a :class:`~marionette_control.lq.gains.GainDesign`: weights by kind
  and the controller's command delay; :meth:`Problem.with_gains`, the one place that computes
  them for a result, with the design record the controller checks).

Rules are checked once, here and in the classes they belong to (:class:`ConstraintOptions`,
:class:`~.projection.OptimizerOptions`, :class:`~marionette_control.lq.gains.GainDesign`, the weights'
:func:`marionette_control.validation.weight`); a violation raises :class:`ProblemError` (or the option class's own
:class:`~marionette_control.validation.InvalidOption`) whose ``key`` names the offending option in this
module's vocabulary (``constraints.min_tension``), which each front end words in its own terms
(a spec key, a request field).

Constraint margins (:func:`constraint_report`) are reported per constraint row: the worst margin
(≥ 0 satisfied, in the limit's unit), where it occurs (step k, time t_k), and where the
constraint is active (margin within 1 % of its scale), so a result can say honestly what
could not be followed; with the hardware's own limit, the reserve kept from it for the feedback
and the worst margin to the hardware's limit.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Sequence

import numpy as np

from marionette_control import _core, validation
from marionette_control.lq.gains import GainDesign, GainDesignError, design_gains
from marionette_control.model.limits import ModelLimits, limits_of
from marionette_control.model.margins import FEASIBILITY_TOLERANCE
from marionette_control.ocp.constraints import (
    FAMILIES,
    BarrierTerm,
    InequalityConstraints,
    linear_constraints,
    tension_constraints,
)
from marionette_control.ocp.cost import Cost
from marionette_control.ocp.projection import OptimizerOptions
from marionette_control.ocp.terms import InputTracking, Point, StateTracking, TerminalState
from marionette_control.trajectory import Trajectory
from marionette_control.validation import InvalidOption

#: Families enforced by default: what the drives and strings physically cannot exceed.
DEFAULT_FAMILIES = ("range", "speed", "acceleration", "tension")
#: Families a reserve (margin) can be kept from: the drives' limits.
MARGIN_FAMILIES = ("range", "speed", "acceleration")
#: The reserve the default problem keeps for the tracking controller's feedback: fractions of the drives' range
#: width (off each end), speed and acceleration limits, and a tension floor this many newtons above each
#: string's minimum. The rule's result (``docs/margins.md``, "The rule"; ``docs/margin_measurements.py
#: --search``): the smallest reserve, on the grid of :data:`RESERVE_STEPS`, at which every motion of the library
#: tracks on the realistic hardware profile (three noise seeds) and the plant family's motions on its plants, closed
#: loop and feed-forward only, without abort, with the string at or above its minimum and the closed loop no worse
#: than feed-forward only on any joint (``test/test_margins_rule.py``).
DEFAULT_MARGINS = {"range": 0.01, "speed": 0.25, "acceleration": 0.25}
DEFAULT_TENSION_RESERVE = 0.1
#: The grid the reserve is searched on (``docs/margins.md``, "The rule"): multiples of these steps from 0, per
#: family (fractions of the drive limits; newtons for ``tension``).
RESERVE_STEPS = {"range": 0.01, "speed": 0.05, "acceleration": 0.05, "tension": 0.05}
#: How the solve starts (:mod:`.optimizer`): from the optimum without the inequality constraints, or from the
#: initial trajectory itself.
STARTS = ("unconstrained", "initial")
#: How a desired motion the arm cannot follow is re-timed (:mod:`.retiming`).
RETIME_MODES = ("off", "uniform", "warp")
#: rad: the RMS error over the motion each prescribed configuration of a trackable optimum may keep
#: (:mod:`.trackability`: half the closed loop's RMS target of 0.5°, docs/tracking.md).
DEFAULT_TRACKING_TOLERANCE = math.radians(0.25)
#: Normalized margin (margin/scale) below which a constraint counts as active in reports.
ACTIVE_MARGIN = 1e-2


class ProblemError(InvalidOption):
    """An optimization problem cannot be set up; the message says what was wrong and what was expected.

    ``key`` (optional) names the offending option in the problem description's vocabulary
    (``constraints.min_tension``, ``weights.input``), for front ends to word in their own terms.
    """


@dataclass
class ConstraintOptions:
    """Which inequality constraints a problem enforces, and how (thesis ref. [16]; :mod:`.constraints`).

    enabled : False: none (the optimization of thesis ch. 6 as it was).
    families : subset of ``range``, ``speed``, ``acceleration``, ``tension``, ``configuration``,
        ``force`` (default: the first four; ``configuration`` bounds the joints by ``joint_limits``,
        ``force`` the force inputs by ``force_bounds``).
    min_tension : N; one number for every string, or {string: N}; None: the model file's.
    margins : {family: fraction in [0, 1)}: a reserve kept from each drive limit (``range``: that
        fraction of the range width off each end; ``speed``, ``acceleration``: the limit scaled by
        1 − fraction), leaving the tracking controller room for its corrections. A family not named
        keeps its default (:data:`DEFAULT_MARGINS`); 0 keeps no reserve.
    tension_reserve : N ≥ 0 kept above every string's minimum tension for the feedback: the optimum's
        tension floor is min_tension + tension_reserve (default :data:`DEFAULT_TENSION_RESERVE`).
    joint_limits : {configuration: (lower, upper)} for ``configuration``; None: the URDF's.
    force_bounds : {force input: (lower, upper)} for ``force`` (±inf for a one-sided bound).
    barrier_weight : μ > 0, the barrier's final weight per constraint and second (its bias on the
        optimum: about μ·Δt per active constraint and step).
    tolerance : feasibility tolerance on the normalized margins (margin/scale ≥ −tolerance).
    """

    enabled: bool = True
    families: Sequence[str] = DEFAULT_FAMILIES
    min_tension: Optional[object] = None
    margins: Mapping[str, float] = field(default_factory=dict)
    tension_reserve: float = DEFAULT_TENSION_RESERVE
    joint_limits: Optional[Mapping[str, tuple]] = None
    force_bounds: Mapping[str, tuple] = field(default_factory=dict)
    barrier_weight: float = 1e-3
    tolerance: float = FEASIBILITY_TOLERANCE

    def __post_init__(self):
        if not isinstance(self.enabled, (bool, np.bool_)):
            raise ProblemError(f"constraints.enabled must be true or false, got {self.enabled!r}",
                               key="constraints.enabled")
        fam = [str(f) for f in self.families]
        bad = [f for f in fam if f not in FAMILIES]
        if bad:
            raise ProblemError(f"unknown constraint famil{'y' if len(bad) == 1 else 'ies'} {', '.join(bad)} "
                               f"(families: {', '.join(FAMILIES)})", key="constraints.families")
        if len(set(fam)) != len(fam):
            raise ProblemError(f"constraint families repeat: {fam}", key="constraints.families")
        self.families = tuple(fam)
        if self.min_tension is not None:
            values = self.min_tension.values() if isinstance(self.min_tension, Mapping) else [self.min_tension]
            for v in values:
                _number(v, "constraints.min_tension", "the minimum tension", "a minimum tension in N", minimum=0.0)
        margins = dict(DEFAULT_MARGINS)
        if not isinstance(self.margins, Mapping):
            raise ProblemError(f"expected {{family: fraction}}, got {self.margins!r}", key="constraints.margins")
        for f, v in dict(self.margins).items():
            if f not in MARGIN_FAMILIES:
                raise ProblemError(f"a margin applies to range, speed or acceleration, not {f!r}",
                                   key=f"constraints.margins.{f}")
            v = _number(v, f"constraints.margins.{f}", f"the {f} margin", "a fraction", minimum=0.0)
            if v >= 1.0:
                raise ProblemError(f"a margin is a fraction of the limit in [0, 1), got {v}",
                                   key=f"constraints.margins.{f}")
            margins[f] = v
        self.margins = margins
        self.tension_reserve = _number(self.tension_reserve, "constraints.tension_reserve", "the tension reserve",
                                       "a tension reserve in N", minimum=0.0)
        for key, bounds in (("joint_limits", self.joint_limits or {}), ("force_bounds", self.force_bounds)):
            for name, pair in bounds.items():
                try:
                    lo, hi = (float(v) for v in pair)
                except (TypeError, ValueError):
                    raise ProblemError(f"expected [lower, upper], got {pair!r}", key=f"constraints.{key}.{name}") \
                        from None
                if math.isnan(lo) or math.isnan(hi) or not lo < hi:
                    raise ProblemError(f"expected lower < upper, got [{lo}, {hi}]", key=f"constraints.{key}.{name}")
        _number(self.barrier_weight, "constraints.barrier_weight", "the barrier weight", "a barrier weight",
                positive=True)
        _number(self.tolerance, "constraints.tolerance", "the feasibility tolerance", "a feasibility tolerance",
                positive=True)

    def limits(self, model, limits: ModelLimits, reserve: bool = True) -> ModelLimits:
        """The model's limits with these options applied (minimum tension, margins and tension reserve, joint and
        force bounds); without ``reserve`` the limits of the hardware alone (no margin, no tension reserve).
        Raises ProblemError naming the option when a name does not fit the model."""
        out = limits
        if self.min_tension is not None:
            if isinstance(self.min_tension, Mapping):
                unknown = sorted(set(self.min_tension) - set(limits.strings))
                if unknown:
                    raise ProblemError(f"{', '.join(unknown)}: not a string of model '{model.name}' (strings: "
                                       f"{', '.join(limits.strings) or 'none'})", key="constraints.min_tension")
                values = [float(self.min_tension.get(s, t)) for s, t in zip(limits.strings, limits.min_tension)]
            else:
                if not limits.strings and "tension" in self.families:
                    raise ProblemError(f"model '{model.name}' has no string", key="constraints.min_tension")
                values = float(self.min_tension)
            out = out.with_min_tension(values)
        if reserve and self.tension_reserve:
            out = out.with_min_tension(out.min_tension + self.tension_reserve)
        m = self.margins if reserve else {}
        if any(m.values()):
            lo, hi = out.lower.copy(), out.upper.copy()
            shrink = m.get("range", 0.0) * (hi - lo)
            finite = np.isfinite(shrink)
            lo[finite] += shrink[finite]
            hi[finite] -= shrink[finite]
            out = dataclasses.replace(out, lower=lo, upper=hi,
                                      max_velocity=out.max_velocity * (1.0 - m.get("speed", 0.0)),
                                      max_acceleration=out.max_acceleration * (1.0 - m.get("acceleration", 0.0)))
        if self.joint_limits is not None:
            lo, hi = np.full(model.nq, -np.inf), np.full(model.nq, np.inf)
            for name, (a, b) in self.joint_limits.items():
                if name not in model.config_names:
                    raise ProblemError(f"'{name}' is not a configuration of model '{model.name}' (configurations: "
                                       f"{', '.join(model.config_names)})", key=f"constraints.joint_limits.{name}")
                lo[model.config_index(name)], hi[model.config_index(name)] = a, b
            out = out.with_config_bounds(lo, hi)
        if self.force_bounds:
            forces = list(model.discrete_input_names)[:model.nu]
            lo, hi = np.full(model.nu, -np.inf), np.full(model.nu, np.inf)
            for name, (a, b) in self.force_bounds.items():
                if name not in forces:
                    raise ProblemError(f"'{name}' is not a force input of model '{model.name}' (force inputs: "
                                       f"{', '.join(forces) or 'none'})", key=f"constraints.force_bounds.{name}")
                lo[forces.index(name)], hi[forces.index(name)] = a, b
            out = out.with_force_bounds(lo, hi)
        elif "force" in self.families:
            raise ProblemError("family 'force' needs force_bounds", key="constraints.force_bounds")
        return out

    def to_dict(self) -> dict:
        return {"enabled": bool(self.enabled), "families": list(self.families),
                "min_tension": self.min_tension if not isinstance(self.min_tension, Mapping)
                else dict(self.min_tension), "margins": dict(self.margins),
                "tension_reserve": self.tension_reserve, "barrier_weight": self.barrier_weight,
                "tolerance": self.tolerance}


@dataclass
class RetimeOptions:
    """Whether and how a solve re-times a desired motion it cannot follow (:mod:`.retiming`).

    mode : ``off`` (solve the motion as drawn; the result still says whether it is trackable), ``uniform`` (the
        smallest uniform slow-down at which it is), ``warp`` (slow only the keyframe intervals that need it);
        :data:`RETIME_MODES`.
    tolerance : rad > 0: the RMS error over the motion every prescribed configuration of a trackable optimum may
        keep (:mod:`.trackability`; default :data:`DEFAULT_TRACKING_TOLERANCE`).
    max_factor : > 1: the largest slow-down (duration / drawn duration) tried.
    precision : in (0, 0.5]: the search stops when the smallest trackable factor is known to this relative
        width (a found factor f is within f·precision of the smallest the search could find).
    """

    mode: str = "off"
    tolerance: float = DEFAULT_TRACKING_TOLERANCE
    max_factor: float = 4.0
    precision: float = 0.01

    def __post_init__(self):
        if self.mode not in RETIME_MODES:
            raise ProblemError(f"expected one of {', '.join(RETIME_MODES)}, got {self.mode!r}", key="retime.mode")
        self.tolerance = _number(self.tolerance, "retime.tolerance", "the tracking tolerance", "an angle in rad",
                                 positive=True)
        self.max_factor = _number(self.max_factor, "retime.max_factor", "the largest slow-down", "a factor > 1",
                                  minimum=1.0)
        if self.max_factor <= 1.0:
            raise ProblemError(f"the largest slow-down must exceed 1, got {self.max_factor}", key="retime.max_factor")
        self.precision = _number(self.precision, "retime.precision", "the search's precision", "a fraction",
                                 positive=True)
        if self.precision > 0.5:
            raise ProblemError(f"the search's precision is a fraction in (0, 0.5], got {self.precision}",
                               key="retime.precision")

    def to_dict(self) -> dict:
        return {"mode": self.mode, "tolerance": self.tolerance, "max_factor": self.max_factor,
                "precision": self.precision}


def _number(value, key: str, name: str, kind: str, minimum: Optional[float] = None, positive: bool = False):
    """``value`` as a float: ``kind`` of thing (else "expected <kind>"), then finite and within the bounds
    (:func:`marionette_control.validation.scalar`, naming it ``name``); ProblemError with ``key``."""
    try:
        if isinstance(value, bool):
            raise TypeError
        v = float(value)
    except (TypeError, ValueError):
        raise ProblemError(f"expected {kind}, got {value!r}", key=key) from None
    return validation.scalar(v, name, minimum=minimum, positive=positive, error=ProblemError, key=key)


def config_units(model) -> dict:
    """Unit of every configuration: ``rad`` (drives a rotation), ``m`` (a translation or a string length), or
    ``""`` (drives nothing else known)."""
    units = {n: "" for n in model.config_names}
    for kind, c in zip(model.frame_transforms, model.frame_configs):
        if c >= 0:
            units[model.config_names[c]] = "rad" if kind.startswith("r") else "m"
    for n, u in units.items():
        if not u and n.endswith("length"):
            units[n] = "m"
    return units


def constraint_sets(model, limits: ModelLimits, dt: float, families: Sequence[str]) -> list:
    """The constraint groups (:class:`~.constraints.InequalityConstraints`) of ``families`` for ``model``."""
    out = []
    lin = linear_constraints(model, limits, dt, families, config_units(model))
    if lin is not None:
        out.append(lin)
    if "tension" in families:
        ten = tension_constraints(limits, dt)
        if ten is not None:
            out.append(ten)
    return out


# --------------------------------------------------------------------------------------------- the problem


@dataclass
class Problem:
    """An optimization problem (module docstring).

    Attributes
    ----------
    model, system : the core Model and its DiscreteSystem at ``dt``
    t : (N+1,) times;  Xd (N+1, nx), Ud (N, nU): desired trajectory;  x0 (nx,): initial state
    Q (nx,), R (nU,), Qf (nx,) : diagonal tracking weights (also in ``cost``'s terms)
    cost : Cost (tracking terms and constraint barriers)
    constraints : list of InequalityConstraints (the rows the barriers carry; empty without)
    constraint_options : ConstraintOptions;  limits : ModelLimits after the options (the reserve for the
    feedback included: what the constraints enforce);  hardware_limits : the same without the reserve (margins,
    tension reserve): the hardware's own
    options : OptimizerOptions;  gains : GainDesign of the tracking gains shipped with a result
    tracked : the configurations the desired motion prescribes;  source : where it came from
    X0 (N+1, nx), U0 (N, nU), initial_cost : the initial trajectory and its cost (without barriers),
    when the front end builds one (requests do; specs choose among methods in :func:`~.spec_problem.initial_trajectory`)
    method : the optimizer (``projection``, ``dmocc``);  start : where the solve starts (:data:`STARTS`,
    :mod:`.optimizer`)
    retime : :class:`RetimeOptions`;  keyframes : the desired motion's
    :class:`~.tracking_problem.Keyframes` when it was given as keyframes (what re-timing stretches), else None;
    rebuild(keyframes) : the front end's builder of this problem for other keyframes (the same options, a
    Problem with its X0, U0), which :mod:`.retiming` calls; None where the front end cannot
    """

    model: "_core.Model"
    system: "_core.DiscreteSystem"
    t: np.ndarray
    Xd: np.ndarray
    Ud: np.ndarray
    x0: np.ndarray
    Q: np.ndarray
    R: np.ndarray
    Qf: np.ndarray
    cost: Cost
    constraints: list
    constraint_options: ConstraintOptions
    limits: ModelLimits
    options: OptimizerOptions
    gains: GainDesign
    tracked: list
    source: str = ""
    X0: Optional[np.ndarray] = None          # a feasible initial trajectory, when the front end made one
    U0: Optional[np.ndarray] = None
    initial_cost: float = math.nan
    method: str = "projection"               # or "dmocc" (ocp/dmocc.py): which optimizer solves it
    start: str = "unconstrained"             # or "initial" (STARTS; ocp/optimizer.py): where the solve starts
    retime: RetimeOptions = field(default_factory=RetimeOptions)
    keyframes: Optional["Keyframes"] = None  # noqa: F821 (ocp/tracking_problem.py, which imports this module)
    rebuild: Optional[Callable] = None
    hardware_limits: Optional[ModelLimits] = None

    @property
    def N(self) -> int:
        return self.Ud.shape[0]

    @property
    def dt(self) -> float:
        return float(self.system.dt)

    @property
    def named(self) -> list:
        return self.tracked

    def with_gains(self, X: np.ndarray, U: np.ndarray, info: Optional[dict] = None) -> Trajectory:
        """The trajectory (X, U) with its tracking gains K (N, nU, nx) designed along it by :attr:`gains` and
        their record in ``info[gains.GAIN_DESIGN]`` (the one place they are computed for a result)."""
        trajectory = Trajectory.for_model(self.model, self.dt, X, U, t0=float(self.t[0]), info=info)
        return design_gains(self.system, trajectory.X, trajectory.U, self.gains).attach(trajectory)

    def point(self, X, U, Lam=None) -> Point:
        """The :class:`~.terms.Point` of (X, U): with the constraint forces (computed when not given) if a
        constraint reads them."""
        if Lam is None and any(c.needs_lambda for c in self.constraints):
            Lam = self.system.constraint_forces_trajectory(X, U)
        return Point(np.asarray(X, float), np.asarray(U, float), Lam)

    def tracking_errors(self, X: np.ndarray) -> dict:
        """RMS and max |error| of every prescribed configuration against the desired motion."""
        out = {}
        for j in self.tracked:
            i = self.model.config_index(j)
            e = X[:, i] - self.Xd[:, i]
            out[j] = {"rms": float(np.sqrt(np.mean(e ** 2))), "max": float(np.abs(e).max())}
        return out

    def constraint_report(self, X, U, Lam=None) -> list:
        """:func:`constraint_report` of (X, U) on this problem's constraints, with the hardware's limits."""
        return constraint_report(self.constraints, self.point(X, U, Lam), self.t, self.constraint_options.tolerance,
                                 self.hardware_rows())

    def hardware_rows(self) -> dict:
        """{(family, component, side): the hardware's limit} of this problem's constraint rows (the limit without
        the reserve kept for the feedback)."""
        hardware = self.hardware_limits or self.limits
        sets = constraint_sets(self.model, hardware, self.dt, self.constraint_options.families) \
            if self.constraints else []
        return {(r.family, r.component, r.side): r.limit for c in sets for r in c.rows}

    def summary(self) -> dict:
        """JSON-able description of the constraint set (trajectory metadata): the options, the hardware's
        ``limits`` and the ``reserved`` ones the constraints enforce, the rows."""
        rows = [dict(family=r.family, component=r.component, side=r.side, limit=r.limit, unit=r.unit)
                for c in self.constraints for r in c.rows]
        return {"options": self.constraint_options.to_dict(), "limits": (self.hardware_limits or self.limits).to_dict(),
                "reserved": self.limits.to_dict(), "rows": rows}


def constraint_report(constraints: Sequence[InequalityConstraints], point: Point, t: np.ndarray,
                      tolerance: float, hardware: Optional[Mapping] = None) -> list:
    """Per constraint row: the worst margin and where, whether it holds, where it is active.

    Returns dicts: family, component, side, limit, unit, label, ``margin`` (the worst, in the
    limit's unit), ``normalized`` (margin/scale), ``step`` and ``time`` where it occurs,
    ``satisfied`` (normalized ≥ −tolerance), ``active_steps`` (count with normalized < 0.01) and
    ``active_intervals`` ([t_first, t_last] runs of consecutive active steps); ``hardware_limit``
    (the row's limit without the reserve for the feedback: ``hardware`` {(family, component, side):
    limit}, the row's own limit where it has none), ``reserve`` (|limit − hardware_limit|) and
    ``hardware_margin`` (the worst margin to the hardware's limit: margin + reserve).
    """
    out = []
    hardware = hardware or {}
    for c in constraints:
        M = c.margins(point)
        for j, row in enumerate(c.rows):
            col = M[:, j] if c.terminal[j] else M[:-1, j]
            k = int(np.nanargmin(col))
            worst = float(col[k])
            active = np.flatnonzero(col / row.scale < ACTIVE_MARGIN)
            limit = float(hardware.get((row.family, row.component, row.side), row.limit))
            reserve = abs(row.limit - limit)
            out.append({"family": row.family, "component": row.component, "side": row.side, "limit": row.limit,
                        "unit": row.unit, "label": row.label, "margin": worst, "normalized": worst / row.scale,
                        "step": k, "time": float(t[k]), "satisfied": bool(worst / row.scale >= -tolerance),
                        "active_steps": int(active.size), "active_intervals": _intervals(active, t),
                        "hardware_limit": limit, "reserve": reserve, "hardware_margin": worst + reserve})
    return out


def _intervals(steps: np.ndarray, t: np.ndarray) -> list:
    runs = []
    for k in steps:
        if runs and k == runs[-1][1] + 1:
            runs[-1][1] = k
        else:
            runs.append([k, k])
    return [[float(t[a]), float(t[b])] for a, b in runs]


# --------------------------------------------------------------------------------------------- building


def build(model, dt: float, t: np.ndarray, Xd: np.ndarray, Ud: np.ndarray, x0: np.ndarray, Q, R, Qf,
          tracked: Sequence[str] = (), constraints: Optional[ConstraintOptions] = None,
          limits: Optional[ModelLimits] = None, options: Optional[OptimizerOptions] = None,
          gains: Optional[GainDesign] = None, source: str = "", system=None) -> Problem:
    """A :class:`Problem` from its parts (the Python front end; specs and requests end here too).

    Q (nx,), R (nU,) > 0, Qf (nx,): diagonal tracking weights; ``gains``: the design of the tracking gains
    (:class:`~marionette_control.lq.gains.GainDesign`, default its defaults); ``limits``: the model's
    (:func:`marionette_control.model.limits.load_limits`; default: those the core model alone
    implies, i.e. default string tensions); raises ProblemError (with ``key``) on a rule violation.
    """
    constraints = constraints if constraints is not None else ConstraintOptions()
    options = options or OptimizerOptions()
    gains = gains if gains is not None else GainDesign()
    if not isinstance(gains, GainDesign):
        raise ProblemError(f"the tracking gains' design must be a GainDesign, got {type(gains).__name__}",
                           key="tracking_gains")
    try:
        gains.weights(model)   # the weights given by joint name the model's joints
    except GainDesignError as e:
        raise ProblemError(str(e), key=e.key) from None
    system = system or _core.DiscreteSystem(model, dt)
    limits = limits or limits_of(model)
    Q, R, Qf = (np.asarray(w, dtype=float) for w in (Q, R, Qf))
    for name, r in zip(model.discrete_input_names, R):
        validation.weight(r, f"the input weight of '{name}'", positive=True, error=ProblemError, key="weights.input")
    N = Ud.shape[0]
    terms = [StateTracking(Xd, Q), InputTracking(Ud, R), TerminalState(Xd[-1], Qf, N)]
    effective = constraints.limits(model, limits)
    hardware = constraints.limits(model, limits, reserve=False)
    sets = constraint_sets(model, effective, dt, constraints.families) if constraints.enabled else []
    for i, c in enumerate(sets):
        terms.append(BarrierTerm(c, constraints.barrier_weight, 0.0, dt))
    cost = Cost(terms, model.nx, model.nU, N)
    options = dataclasses.replace(options, feasibility_tolerance=constraints.tolerance)
    problem = Problem(model, system, np.asarray(t, float), Xd, Ud, np.asarray(x0, float), Q, R, Qf, cost, sets,
                      constraints, effective, options, gains, list(tracked), source, hardware_limits=hardware)
    if sets:
        _check_initial_state(problem)
    return problem


def _check_initial_state(problem: Problem) -> None:
    """The fixed x(0) must satisfy the state-only constraints (they hold at k = 0 whatever is optimized)."""
    X = np.tile(problem.x0, (2, 1))
    for c in problem.constraints:
        if c.needs_lambda:
            continue
        M = c.margins(Point(X, np.zeros((1, problem.model.nU))))[-1]
        for j, row in enumerate(c.rows):
            if c.terminal[j] and M[j] / row.scale < -problem.constraint_options.tolerance:
                raise ProblemError(f"the initial state violates {row.label} (margin {M[j]:.4g})",
                                   key="constraints.joint_limits")


__all__ = ["ProblemError", "ConstraintOptions", "DEFAULT_FAMILIES", "MARGIN_FAMILIES", "DEFAULT_MARGINS",
           "DEFAULT_TENSION_RESERVE", "RESERVE_STEPS", "STARTS", "RETIME_MODES", "DEFAULT_TRACKING_TOLERANCE",
           "RetimeOptions", "ACTIVE_MARGIN", "Problem", "build",
           "constraint_sets", "constraint_report", "config_units"]
