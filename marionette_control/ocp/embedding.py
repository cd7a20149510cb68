"""Initial trajectories by changing the system (thesis §6.6): dynamic embedding and string relaxation.

Projection-operator optimization converges to a local minimum near its initial trajectory, so a
desired motion the system can only reach through a singularity (the pendulum on a cart must pass
the horizontal, where moving the cart exerts no torque, thesis §6.7.1) or through a long detour
needs a better start than "simulate with constant inputs". Both techniques of §6.6 optimize a
*modified* system that can follow the desired motion easily and transform the result back:

Dynamic embedding (§6.6.1)
    Every dynamic configuration gets a fictitious generalized force input (the embedded system is
    fully actuated, so tracking is easy). The embedded system is optimized with a small weight on
    the fictitious inputs; the optimization is repeated from the previous solution with the
    weight raised until the fictitious forces are unused (``max |u_fictitious| <=
    unused_tolerance``). The forces are then removed and the trajectory is projected onto the
    original system (thesis (6.10) with LQR gains on the original linearization), which gives a
    feasible initial trajectory of the original problem. The default weights 1e-2, 1e2, 1e6 are
    those of the reference implementation's pendulum-on-a-cart example.

String relaxation (§6.6.2, strings as applied forces)
    In a string-driven system each string constraint (a distance constraint whose length is a
    kinematic configuration) models a force applied at the string's hook. The constraint is
    replaced by a body wrench with three force inputs on the hook frame; the relaxed system is
    optimized (optionally with dynamic embedding too); the result is transformed back by placing
    each string's control point (its kinematic carriage configurations) on the line of the
    optimized force, so the string is collinear with the force, and setting the string length to
    the hook-to-control-point distance, so h(q) = 0 exactly at every step. The transformed
    trajectory is projected onto the constrained system.

Constraint penalty (§6.6.2, internal closed chains)
    Constraints that model the structure (a closed kinematic chain) rather than an actuator are
    removed and replaced by the cost term ½ w Σ h(q)² (:class:`~.terms.ConstraintPenalty`); the
    relaxed model is optimized round after round with w raised until the constraint error is
    negligible, and the result is projected onto the constrained model
    (:func:`run_constraint_penalty`).

Variants are built from the model's own description (:meth:`SystemBuilder.from_model
<marionette_control.model.SystemBuilder.from_model>`): forces are added to it and string
constraints removed, so every model can be varied, however it was described (builder, YAML,
URDF). The strings are read from the model (:func:`~marionette_control.model.strings.string_constraints`).

The stages optimize the cost without its inequality constraints (the barrier terms, which refer
to the original model's inputs and constraint forces); the final optimization of the original
model enforces them, starting from the stages' result whether or not it satisfies them.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from marionette_control import _core, validation
from marionette_control.ocp.cost import Cost
from marionette_control.ocp.projection import (
    IterationRecord,
    OptimizationResult,
    OptimizerOptions,
    ProjectionOptimizer,
)
from marionette_control.lq.riccati import tv_lqr
from marionette_control.ocp.terms import ConstraintPenalty, InputTracking
from marionette_control.ocp.tracking_problem import hold_inputs
from marionette_control.model.builder import SystemBuilder, without_constraints
from marionette_control.model.strings import StringConstraint, string_constraints

FICTITIOUS_SUFFIX = "_fictitious"
WRENCH_AXES = ("fx", "fy", "fz")


class EmbeddingError(RuntimeError):
    """A model variant cannot be built or a trajectory cannot be mapped between variants."""


def _build(builder: SystemBuilder, what: str) -> "_core.Model":
    try:
        return builder.build()
    except ValueError as e:
        raise EmbeddingError(f"building {what} failed: {e}") from e


# --------------------------------------------------------------------------------------------- input maps


def _column_map(from_names: Sequence[str], to_names: Sequence[str]) -> np.ndarray:
    """Indices into ``to_names`` of every name of ``from_names``."""
    index = {n: i for i, n in enumerate(to_names)}
    missing = [n for n in from_names if n not in index]
    if missing:
        raise EmbeddingError(f"input(s) {', '.join(missing)} missing from the variant's inputs")
    return np.array([index[n] for n in from_names], dtype=int)


class _Variant:
    """Common part of the two variants: same states, inputs a superset of the original's."""

    original: "_core.Model"
    variant: "_core.Model"
    extra_inputs: tuple

    def _init_maps(self):
        if list(self.original.state_names) != list(self.variant.state_names):
            raise EmbeddingError(f"variant of model '{self.original.name}' changed the state layout")
        self._cols = _column_map(self.original.discrete_input_names, self.variant.discrete_input_names)
        self._extra = _column_map(self.extra_inputs, self.variant.discrete_input_names)

    def to_variant(self, U: np.ndarray, extra: Optional[np.ndarray] = None) -> np.ndarray:
        """Inputs (N, nU) of the original model as inputs of the variant (extra inputs 0 or ``extra``)."""
        U = np.asarray(U, dtype=float)
        if U.ndim != 2 or U.shape[1] != self.original.nU:
            raise EmbeddingError(f"inputs have shape {U.shape}, expected (N, {self.original.nU}) for model "
                                 f"'{self.original.name}'")
        out = np.zeros((U.shape[0], self.variant.nU))
        out[:, self._cols] = U
        if extra is not None:
            out[:, self._extra] = extra
        return out

    def to_original(self, Uv: np.ndarray) -> np.ndarray:
        """Inputs of the variant with the extra inputs dropped."""
        Uv = np.asarray(Uv, dtype=float)
        if Uv.ndim != 2 or Uv.shape[1] != self.variant.nU:
            raise EmbeddingError(f"inputs have shape {Uv.shape}, expected (N, {self.variant.nU}) for the variant")
        return Uv[:, self._cols].copy()

    def extra(self, Uv: np.ndarray) -> np.ndarray:
        """The extra inputs' columns (N, n_extra) of variant inputs."""
        return np.asarray(Uv, dtype=float)[:, self._extra]

    def variant_cost(self, cost: Cost, extra_weight) -> Cost:
        """The original cost (without its constraint barriers) on the variant, plus
        ½ extra_weight |u_extra|² (term ``extra_inputs``; ``extra_inputs_2`` ... for a variant of a variant)."""
        nU = self.variant.nU
        terms = [t.on_inputs(self._cols, nU) for t in cost.without_barriers().terms]
        R = np.zeros(nU)
        R[self._extra] = np.broadcast_to(np.asarray(extra_weight, dtype=float), (len(self._extra),))
        names = {t.name for t in terms}
        name = next(n for n in (f"extra_inputs{'' if i < 2 else f'_{i}'}" for i in range(1, len(names) + 2))
                    if n not in names)
        terms.append(InputTracking(np.zeros((cost.N, nU)), R, name=name))
        return Cost(terms, cost.nx, nU, cost.N)


@dataclass
class Embedding(_Variant):
    """A model and its dynamic embedding (fictitious force on every dynamic configuration).

    ``fictitious_inputs[i]`` is the force on configuration ``configs[i]``.
    """

    original: "_core.Model"
    variant: "_core.Model"
    configs: tuple
    extra_inputs: tuple

    def __post_init__(self):
        self._init_maps()

    @property
    def embedded(self) -> "_core.Model":
        return self.variant

    @property
    def fictitious_inputs(self) -> tuple:
        return self.extra_inputs


def embed(model: "_core.Model", configs: Optional[Sequence[str]] = None,
          suffix: str = FICTITIOUS_SUFFIX) -> Embedding:
    """The dynamic embedding of ``model`` (thesis §6.6.1).

    Parameters
    ----------
    model : core Model (any; its description is copied, the model itself is not changed).
    configs : dynamic configurations that get a force (default: all of them).
    suffix : the force input on configuration ``c`` is named ``c + suffix``.

    Returns
    -------
    Embedding
        ``embedded`` has the same states as ``model`` and its inputs plus one force input per
        configuration of ``configs``.
    """
    dynamic = [c for c, kin in zip(model.config_names, model.kinematic) if not kin]
    configs = list(dynamic if configs is None else configs)
    for c in configs:
        if c not in model.config_names:
            raise EmbeddingError(f"embedding: '{c}' is not a configuration of model '{model.name}' "
                                 f"(configurations: {', '.join(model.config_names)})")
        if c not in dynamic:
            raise EmbeddingError(f"embedding: '{c}' is kinematic (prescribed); only dynamic configurations take "
                                 "forces")
    if not configs:
        raise EmbeddingError(f"embedding: model '{model.name}' has no dynamic configuration")
    inputs = [f"{c}{suffix}" for c in configs]
    clash = sorted(set(inputs) & set(model.input_names))
    if clash:
        raise EmbeddingError(f"embedding: model '{model.name}' already has input(s) {', '.join(clash)}")
    b = SystemBuilder.from_model(model)
    for c, u in zip(configs, inputs):
        b.config_force(c, input=u, name=u)
    embedded = _build(b, f"the dynamic embedding of model '{model.name}'")
    return Embedding(model, embedded, tuple(configs), tuple(inputs))


# --------------------------------------------------------------------------------------------- projections


def projection_gains(system: "_core.DiscreteSystem", X: np.ndarray, U: np.ndarray, q_weight: float = 1.0,
                     r_weight: float = 1.0) -> np.ndarray:
    """LQR gains K (N, nU, nx) on the linearization along (X, U) (thesis (6.10), Q = R = I by default)."""
    model = system.model
    A, B = system.linearize_trajectory(X, U)
    Q = q_weight * np.eye(model.nx)
    return tv_lqr(A, B, Q, r_weight * np.eye(model.nU), Q, check_inputs=False, full_P=False).K


def project_onto(system: "_core.DiscreteSystem", x0: np.ndarray, X: np.ndarray, U: np.ndarray, what: str = "",
                 q_weight: float = 1.0, r_weight: float = 1.0):
    """P(X, U) on ``system`` from x0 with gains from the linearization along (X, U): a feasible trajectory.

    (X, U) need not be feasible (a desired motion, a trajectory of a variant), but every step
    x(k+1) = f(X[k], U[k]) must be solvable. Raises EmbeddingError naming ``what`` otherwise.
    """
    X = np.asarray(X, dtype=float)
    U = np.asarray(U, dtype=float)
    try:
        K = projection_gains(system, X, U, q_weight, r_weight)
        return system.project(np.asarray(x0, dtype=float), X, U, K)
    except _core.StepError as e:
        raise EmbeddingError(f"projecting {what or 'the trajectory'} onto model '{system.model.name}' failed: "
                             f"{e}") from e
    except np.linalg.LinAlgError as e:
        raise EmbeddingError(f"projection gains along {what or 'the trajectory'} on model "
                             f"'{system.model.name}' failed: {e}") from e


def desired_projection(system: "_core.DiscreteSystem", x0: np.ndarray, Xd: np.ndarray, Ud: np.ndarray):
    """The feasible trajectory that tracks the desired one with LQR feedback (a generic initial trajectory)."""
    return project_onto(system, x0, Xd, Ud, "the desired trajectory")


# --------------------------------------------------------------------------------------------- staged runs


@dataclass
class StageResult:
    """One optimization of a staged run (an embedding round, the relaxed problem, ...)."""

    stage: str
    result: OptimizationResult
    extra_weight: Optional[float] = None
    max_extra: Optional[float] = None
    max_constraint_error: Optional[float] = None

    def summary(self) -> dict:
        r = self.result
        d = {"stage": self.stage, "iterations": r.iterations, "cost": float(r.cost), "converged": bool(r.converged),
             "reason": r.reason, "elapsed": float(r.elapsed)}
        if self.extra_weight is not None:
            d["extra_weight"] = float(self.extra_weight)
        if self.max_extra is not None:
            d["max_extra_input"] = float(self.max_extra)
        if self.max_constraint_error is not None:
            d["max_constraint_error"] = float(self.max_constraint_error)
        return d


StageCallback = Callable[[str, IterationRecord], None]


class _Clock:
    """Remaining time of an overall deadline, shared by the stages of a run."""

    def __init__(self, deadline: Optional[float]):
        self.deadline = deadline
        self.start = time.perf_counter()

    def remaining(self) -> Optional[float]:
        if self.deadline is None:
            return None
        return self.deadline - (time.perf_counter() - self.start)

    def options(self, base: OptimizerOptions) -> OptimizerOptions:
        rem = self.remaining()
        if rem is None:
            return base
        return dataclasses.replace(base, deadline=max(rem, 1e-3))

    def expired(self) -> bool:
        rem = self.remaining()
        return rem is not None and rem <= 0


def _run_stage(system, cost, options, X, U, stage, callback, should_stop, clock) -> OptimizationResult:
    opt = ProjectionOptimizer(system, cost, clock.options(options))
    cb = None if callback is None else (lambda rec: callback(stage, rec))
    return opt.optimize(X, U, callback=cb, should_stop=should_stop)


@dataclass
class EmbeddingOptions:
    """Settings of :func:`run_dynamic_embedding`.

    weights : fictitious-input weights of the successive rounds (raised until the forces are unused;
        the run stops after the first round whose ``max |u_fictitious| <= unused_tolerance``).
    unused_tolerance : a fictitious force below this everywhere (in the configuration's force
        units, N or N m) counts as unused.
    optimizer : options of every round (its deadline is replaced by the run's remaining time).
    start : initial trajectory of the first round: ``"given"`` (a simulation of the inputs passed
        to the run, by default from x0 with zero forces and the kinematic configurations held: the
        reference implementation's choice) or ``"desired"`` (the desired trajectory projected onto
        the embedded system with LQR feedback; closer, but the projection of a far-from-feasible
        desired trajectory can fail).
    """

    weights: Sequence[float] = (1e-2, 1e2, 1e6)
    unused_tolerance: float = 1e-3
    optimizer: OptimizerOptions = field(default_factory=lambda: OptimizerOptions(max_iterations=40))
    start: str = "given"

    def __post_init__(self):
        w = [float(v) for v in self.weights]
        if not w or any(validation.problem(v, positive=True) for v in w):
            raise ValueError(f"embedding weights must be a non-empty list of positive numbers, got {self.weights}")
        if any(b <= a for a, b in zip(w, w[1:])):
            raise ValueError(f"embedding weights must increase from round to round, got {w}")
        self.weights = tuple(w)
        validation.positive(self.unused_tolerance, "unused_tolerance")
        if self.start not in ("desired", "given"):
            raise ValueError(f"embedding start must be 'desired' or 'given', got {self.start!r}")


@dataclass
class InitialTrajectory:
    """A feasible trajectory of the original model and how it was found."""

    X: np.ndarray
    U: np.ndarray
    stages: list
    unused: bool = True
    reason: str = ""

    def summary(self) -> list:
        return [s.summary() for s in self.stages]


def run_dynamic_embedding(embedding: Embedding, dt: float, cost: Cost, x0: np.ndarray,
                          options: Optional[EmbeddingOptions] = None, U: Optional[np.ndarray] = None,
                          callback: Optional[StageCallback] = None, should_stop: Optional[Callable[[], bool]] = None,
                          deadline: Optional[float] = None) -> InitialTrajectory:
    """Dynamic embedding (thesis §6.6.1): rounds with rising fictitious-force weight, then removal.

    ``cost`` is the tracking cost of the *original* model; U inputs of the original model to
    start from (with ``options.start == "given"``; default :func:`hold_inputs`; X is
    re-simulated from x0). Returns a feasible trajectory of the original model: the last
    round's trajectory without the fictitious forces, projected onto the original system.
    ``unused`` tells whether the forces fell below the tolerance (when not, e.g. at the deadline,
    the projection is still returned). ``callback(stage, record)`` after every iteration.
    """
    options = options or EmbeddingOptions()
    clock = _Clock(deadline)
    sys_e = _core.DiscreteSystem(embedding.embedded, dt)
    sys_o = _core.DiscreteSystem(embedding.original, dt)
    x0 = np.asarray(x0, dtype=float)
    if options.start == "given":
        if U is None:
            U = hold_inputs(embedding.original, x0, cost.N)
        Xe, Ue = sys_e.simulate(x0, embedding.to_variant(U))[0], embedding.to_variant(U)
    else:
        Xd, Ud = cost.reference()
        Xe, Ue = desired_projection(sys_e, x0, Xd, embedding.to_variant(Ud))
    stages = []
    unused, reason = False, "rounds exhausted"
    for i, w in enumerate(options.weights):
        if clock.expired() or (should_stop is not None and should_stop()):
            reason = "deadline" if clock.expired() else "cancelled"
            break
        stage = f"embedding {i + 1}/{len(options.weights)} (fictitious weight {w:g})"
        res = _run_stage(sys_e, embedding.variant_cost(cost, w), options.optimizer, Xe, Ue, stage, callback,
                         should_stop, clock)
        Xe, Ue = res.X, res.U
        fmax = float(np.abs(embedding.extra(Ue)).max())
        stages.append(StageResult(stage, res, w, fmax))
        if res.reason in ("deadline", "cancelled"):
            # An interrupted round proves nothing about the forces (they start at zero).
            reason = res.reason
            break
        if fmax <= options.unused_tolerance:
            unused, reason = True, "fictitious forces unused"
            break
    Xo, Uo = project_onto(sys_o, x0, Xe, embedding.to_original(Ue), "the embedded solution without its "
                                                                     "fictitious forces")
    return InitialTrajectory(Xo, Uo, stages, unused, reason)


# --------------------------------------------------------------------------------------------- string relaxation


@dataclass(frozen=True)
class RelaxedString:
    """A string replaced by a wrench: ``hook`` (on the puppet) and ``control`` (moved by ``carriage``
    kinematic configurations) frames, its kinematic ``length`` configuration and the three force
    inputs of the wrench on the hook (hook-frame coordinates)."""

    name: str
    hook: str
    control: str
    length: str
    carriage: tuple
    inputs: tuple


def _ancestor_configs(model, frame: str) -> list:
    """Configuration indices driving ``frame`` or one of its ancestors (root first)."""
    parents, configs = model.frame_parents, model.frame_configs
    f = model.frame_index(frame)
    out = []
    while f >= 0:
        if configs[f] >= 0:
            out.append(configs[f])
        f = parents[f]
    return out[::-1]


@dataclass
class Relaxation(_Variant):
    """A string-driven model and its relaxation (strings replaced by wrenches on their hooks)."""

    original: "_core.Model"
    variant: "_core.Model"
    strings: tuple
    extra_inputs: tuple

    def __post_init__(self):
        self._init_maps()

    @property
    def relaxed(self) -> "_core.Model":
        return self.variant

    # -- relaxed -> constrained ---------------------------------------------------------------------

    def string_forces(self, X: np.ndarray, U: np.ndarray) -> np.ndarray:
        """World-frame string forces F[k, j] = R_hook(q(k)) f_j(k), shape (N, n_strings, 3).

        The wrench inputs of step k are in hook-frame coordinates; they are rotated with the
        configuration at the start of the step, so that a force along the string at q(k) maps
        back to exactly that string (see :meth:`restore`).
        """
        m = self.variant
        X = np.asarray(X, dtype=float)
        U = np.asarray(U, dtype=float)
        N = U.shape[0]
        out = np.empty((N, len(self.strings), 3))
        hooks = [m.frame_index(s.hook) for s in self.strings]
        cols = [_column_map(s.inputs, m.discrete_input_names) for s in self.strings]
        for k in range(N):
            g = m.placements(X[k, :m.nq])
            for j, (h, c) in enumerate(zip(hooks, cols)):
                out[k, j] = g[h, :3, :3] @ U[k, c]
        return out

    def _place_control(self, q: np.ndarray, s: RelaxedString, force: np.ndarray, rho_prev: np.ndarray,
                       min_force: float, bounds: dict) -> np.ndarray:
        """Carriage configurations that put the control point on the ray from the hook along ``force``.

        Keeps ``rho_prev`` when the force is (almost) zero or when no carriage position on the
        pulling side of the hook lies on that line (a string cannot push); clips to ``bounds``.
        """
        m = self.original
        idx = [m.config_index(c) for c in s.carriage]
        norm = np.linalg.norm(force)
        if norm <= min_force or not idx:
            return rho_prev
        d = force / norm
        proj = np.eye(3) - np.outer(d, d)
        hook, ctrl = m.frame_index(s.hook), m.frame_index(s.control)
        rho = rho_prev.copy()
        qq = q.copy()
        for _ in range(30):
            qq[idx] = rho
            g = m.placements(qq)
            e = proj @ (g[ctrl, :3, 3] - g[hook, :3, 3])
            J = proj @ self._control_jacobian(m, g, ctrl, idx)
            # Damped least squares: the carriage may be redundant along the line (a 2-D carriage and a
            # force in its plane); the damping keeps it near where it was.
            step = np.linalg.solve(J.T @ J + 1e-12 * np.eye(len(idx)), J.T @ e)
            rho = rho - step
            if np.linalg.norm(step) < 1e-12 * (1.0 + np.linalg.norm(rho)):
                break
        qq[idx] = rho
        g = m.placements(qq)
        r = g[ctrl, :3, 3] - g[hook, :3, 3]
        if not np.all(np.isfinite(rho)) or d @ r <= 0 or np.linalg.norm(proj @ r) > 1e-6 * (1 + np.linalg.norm(r)):
            return rho_prev
        for i, c in enumerate(s.carriage):
            if c in bounds:
                lo, hi = bounds[c]
                rho[i] = min(max(rho[i], lo), hi)
        return rho

    @staticmethod
    def _control_jacobian(m, g: np.ndarray, ctrl: int, idx: list) -> np.ndarray:
        """d p_control / d q[idx] (3, len(idx)) from the frame placements (exact for primitive joints)."""
        J = np.zeros((3, len(idx)))
        where = {ci: col for col, ci in enumerate(idx)}
        f = ctrl
        p = g[ctrl, :3, 3]
        parents, configs, kinds = m.frame_parents, m.frame_configs, m.frame_transforms
        while f >= 0:
            c = configs[f]
            if c in where:
                axis = g[parents[f], :3, "xyz".index(kinds[f][1])]
                # A translation moves the point along the axis; a rotation (about an axis through
                # the frame's origin) moves it by axis x (p - origin).
                J[:, where[c]] = axis if kinds[f][0] == "t" else np.cross(axis, p - g[f, :3, 3])
            f = parents[f]
        return J

    def restore(self, X: np.ndarray, U: np.ndarray, dt: float, x0: Optional[np.ndarray] = None,
                bounds: Optional[dict] = None, min_force: float = 1e-9):
        """Transforms a relaxed trajectory into a trajectory of the constrained model (thesis §6.6.2).

        Dynamic configurations are kept. Each string's carriage configurations are placed so that
        the string lies along the optimized force (:meth:`string_forces`, the force of step k at
        configuration k, the last step's at N) and the string length is set to the hook-to-control
        distance, so h(q(k)) = 0 at every k. Where the force is zero or points away from every
        reachable control point (a string cannot push) the carriage stays where it was.
        ``x0`` (a constrained state) fixes configuration 0 and the starting carriage; ``bounds``
        maps carriage configuration names to (min, max). Momenta and kinematic velocities follow
        from consecutive configurations (discrete Legendre transform), the next-kinematic inputs
        from the configurations, the force inputs are kept. The result is generally not a
        feasible trajectory: project it (:func:`project_onto`).
        """
        m = self.original
        X = np.asarray(X, dtype=float)
        U = np.asarray(U, dtype=float)
        bounds = dict(bounds or {})
        N = U.shape[0]
        F = self.string_forces(X, U)
        Q = X[:, :m.nq].copy()
        if x0 is not None:
            Q[0] = np.asarray(x0, dtype=float)[:m.nq]
        for j, s in enumerate(self.strings):
            idx = [m.config_index(c) for c in s.carriage]
            li = m.config_index(s.length)
            hook, ctrl = m.frame_index(s.hook), m.frame_index(s.control)
            rho = Q[0, idx].copy()
            for k in range(N + 1):
                if k > 0 or x0 is None:
                    rho = self._place_control(Q[k], s, F[min(k, N - 1), j], rho, min_force, bounds)
                    Q[k, idx] = rho
                g = m.placements(Q[k])
                Q[k, li] = np.linalg.norm(g[ctrl, :3, 3] - g[hook, :3, 3])
        system = _core.DiscreteSystem(m, dt)
        Uc = self.to_original(U)
        kin = [i for i, kk in enumerate(m.kinematic) if kk]
        Uc[:, m.nu:] = Q[1:, kin]
        Xc = np.empty((N + 1, m.nx))
        Xc[0] = np.asarray(x0, dtype=float) if x0 is not None else system.state_from_configs(Q[0], Q[0])
        for k in range(1, N + 1):   # the Legendre transform with the step's force inputs (f+, thesis (4.12))
            Xc[k] = system.state_from_configs(Q[k - 1], Q[k], Uc[k - 1, :m.nu])
        return Xc, Uc


def _relaxed_string(model: "_core.Model", string: StringConstraint) -> RelaxedString:
    """The string with its hook (the frame moved by dynamic configurations), control frame and carriage."""
    moving = [any(not model.kinematic[c] for c in _ancestor_configs(model, f)) for f in (string.frame1, string.frame2)]
    if moving[0] == moving[1]:
        raise EmbeddingError(f"string '{string.name}': exactly one of its frames ('{string.frame1}', "
                             f"'{string.frame2}') must move with dynamic configurations (the hook)")
    hook, control = (string.frame1, string.frame2) if moving[0] else (string.frame2, string.frame1)
    carriage = tuple(model.config_names[c] for c in _ancestor_configs(model, control))
    inputs = tuple(f"{string.name}_{a}" for a in WRENCH_AXES)
    return RelaxedString(string.name, hook, control, string.length, carriage, inputs)


def relax_strings(model: "_core.Model", strings: Optional[Sequence[str]] = None) -> Relaxation:
    """The relaxation of a string-driven model (thesis §6.6.2).

    Parameters
    ----------
    model : core Model with strings (distance constraints whose length is a kinematic configuration).
    strings : names of the strings to relax (default: all of them).

    Returns
    -------
    Relaxation
        ``relaxed`` has the same states as ``model``; each relaxed string's constraint is replaced
        by a body wrench on its hook frame with force inputs ``<string>_fx``, ``_fy``, ``_fz``
        (hook-frame coordinates).
    """
    found = {s.name: s for s in string_constraints(model)}
    if strings is not None:
        missing = sorted(set(strings) - set(found))
        if missing:
            raise EmbeddingError(f"model '{model.name}' has no string named {', '.join(missing)} (constraints: "
                                 f"{', '.join(model.constraint_names) or 'none'}; a string is a distance "
                                 "constraint with a kinematic length)")
    selected = [s for s in found.values() if strings is None or s.name in strings]
    if not selected:
        raise EmbeddingError(f"model '{model.name}' has no string (distance constraint with a kinematic length)")
    relaxed_strings = [_relaxed_string(model, s) for s in selected]
    b = SystemBuilder.from_model(model)
    for rs in relaxed_strings:
        b.remove_constraint(rs.name)
        b.body_wrench(rs.hook, list(rs.inputs) + [0.0, 0.0, 0.0], name=f"{rs.name}_wrench")
    relaxed = _build(b, f"the string relaxation of model '{model.name}'")
    extra = tuple(i for s in relaxed_strings for i in s.inputs)
    return Relaxation(model, relaxed, tuple(relaxed_strings), extra)


@dataclass
class RelaxationOptions:
    """Settings of :func:`run_string_relaxation`.

    force_weight : input weight of the wrench force inputs in the relaxed problem.
    optimizer : options of the relaxed optimization.
    embedding : also embed the relaxed system (fictitious forces on every dynamic configuration,
        thesis §6.6.2 last paragraph) with these options; None for plain relaxation.
    bounds : carriage configuration name -> (min, max) for the transformation back (actuator ranges).
    """

    force_weight: float = 1e-2
    optimizer: OptimizerOptions = field(default_factory=lambda: OptimizerOptions(max_iterations=40))
    embedding: Optional[EmbeddingOptions] = None
    bounds: dict = field(default_factory=dict)

    def __post_init__(self):
        validation.positive(self.force_weight, "force_weight")


def run_string_relaxation(relaxation: Relaxation, dt: float, cost: Cost, x0: np.ndarray,
                          options: Optional[RelaxationOptions] = None, callback: Optional[StageCallback] = None,
                          should_stop: Optional[Callable[[], bool]] = None,
                          deadline: Optional[float] = None) -> InitialTrajectory:
    """Constraint relaxation for string-driven systems (thesis §6.6.2).

    Optimizes the relaxed system (from the desired trajectory projected onto it; with dynamic
    embedding of the relaxed system too when ``options.embedding`` is set), transforms the
    result back (:meth:`Relaxation.restore`) and projects it onto the constrained system from
    ``x0`` (nx,). ``cost`` is the original model's cost.
    """
    options = options or RelaxationOptions()
    clock = _Clock(deadline)
    x0 = np.asarray(x0, dtype=float)
    rcost = relaxation.variant_cost(cost, options.force_weight)
    sys_r = _core.DiscreteSystem(relaxation.relaxed, dt)
    stages = []
    if options.embedding is not None:
        init = run_dynamic_embedding(embed(relaxation.relaxed), dt, rcost, x0, options.embedding, callback=callback,
                                     should_stop=should_stop, deadline=clock.remaining())
        stages += init.stages
        Xr, Ur = init.X, init.U
    else:
        Xr, Ur = desired_projection(sys_r, x0, *rcost.reference())
    if not clock.expired():
        res = _run_stage(sys_r, rcost, options.optimizer, Xr, Ur, "relaxed strings", callback, should_stop, clock)
        stages.append(StageResult("relaxed strings", res, options.force_weight,
                                  float(np.abs(relaxation.extra(res.U)).max())))
        Xr, Ur = res.X, res.U
    Xc, Uc = relaxation.restore(Xr, Ur, dt, x0=x0, bounds=options.bounds)
    sys_c = _core.DiscreteSystem(relaxation.original, dt)
    Xp, Up = project_onto(sys_c, x0, Xc, Uc, "the restored string trajectory")
    return InitialTrajectory(Xp, Up, stages, True, "strings restored")


# --------------------------------------------------------------------------------------------- h² penalty


@dataclass
class PenaltyOptions:
    """Settings of :func:`run_constraint_penalty`.

    weights : penalty weights w of the successive rounds, rising (the run stops after the first round
        whose max |h| ≤ ``tolerance``).
    tolerance : constraint error counted as negligible (the constraint's units: m² for a distance).
    optimizer : options of every round.
    """

    weights: Sequence[float] = (1e2, 1e4, 1e6)
    tolerance: float = 1e-6
    optimizer: OptimizerOptions = field(default_factory=lambda: OptimizerOptions(max_iterations=40))

    def __post_init__(self):
        w = [float(v) for v in self.weights]
        if not w or any(validation.problem(v, positive=True) for v in w) or any(b <= a for a, b in zip(w, w[1:])):
            raise ValueError(f"penalty weights must be positive and increase from round to round, got {self.weights}")
        self.weights = tuple(w)
        validation.positive(self.tolerance, "the penalty tolerance")


def run_constraint_penalty(model: "_core.Model", constraints: Sequence[str], dt: float, cost: Cost, x0: np.ndarray,
                           options: Optional[PenaltyOptions] = None, callback: Optional[StageCallback] = None,
                           should_stop: Optional[Callable[[], bool]] = None,
                           deadline: Optional[float] = None) -> InitialTrajectory:
    """Constraint relaxation by penalty (thesis §6.6.2, for internal closed chains).

    The constraints ``constraints`` are removed from ``model`` and replaced by the cost term
    ½ w Σ h(q_k)² (:class:`~.terms.ConstraintPenalty`); the relaxed model is optimized from the desired
    trajectory projected onto it, round after round with w raised (``options.weights``) until
    max |h| ≤ ``options.tolerance``; the result is projected onto ``model`` from ``x0`` (nx,).
    """
    options = options or PenaltyOptions()
    clock = _Clock(deadline)
    try:
        relaxed = without_constraints(model, constraints)
    except ValueError as e:
        raise EmbeddingError(str(e)) from e
    sys_r = _core.DiscreteSystem(relaxed, dt)
    base = cost.without_barriers()
    X, U = desired_projection(sys_r, x0, *base.reference())
    stages, reason = [], "rounds exhausted"
    penalty = ConstraintPenalty(model, constraints, options.weights[0])
    for i, w in enumerate(options.weights):
        if clock.expired() or (should_stop is not None and should_stop()):
            reason = "deadline" if clock.expired() else "cancelled"
            break
        stage = f"penalty {i + 1}/{len(options.weights)} (weight {w:g})"
        penalty = ConstraintPenalty(model, constraints, w)
        res = _run_stage(sys_r, base.replaced([penalty]), options.optimizer, X, U, stage, callback, should_stop,
                         clock)
        X, U = res.X, res.U
        hmax = float(np.abs(penalty.residuals(X)).max())
        stages.append(StageResult(stage, res, w, max_constraint_error=hmax))
        if res.reason in ("deadline", "cancelled"):
            reason = res.reason
            break
        if hmax <= options.tolerance:
            reason = "constraint error negligible"
            break
    Xp, Up = project_onto(_core.DiscreteSystem(model, dt), x0, X, U, "the penalized trajectory")
    return InitialTrajectory(Xp, Up, stages, reason == "constraint error negligible", reason)
