"""Projection-operator trajectory optimization in discrete time (thesis ch. 6, Algorithm 1).

Every iterate ξ_i = (X, U) is a feasible trajectory of the one-step map. The cost h is a
:class:`~marionette_control.ocp.cost.Cost`, a sum of terms with values and exact
derivatives (:mod:`.terms`, :mod:`.constraints`). An iteration

1. linearizes along ξ_i (exact A(k), B(k) from the core; with the constraint forces λ_k and
   their derivatives when a term reads them) and computes the projection gains K(k) by
   time-varying LQR (Q = R = I by default, thesis (6.10));
2. finds a descent direction ζ = (z, v) on the linearization,
   z(k+1) = A z(k) + B v(k), z(0) = 0 (fixed initial condition), by the LQ
   problem (6.29)-(6.30): minimize 2 Dh∘ζ + q(ζ, ζ) where the quadratic model q is
   * ``steepest``: Q = I, S = 0, R = I (§6.5.3),
   * ``quasi_newton``: the terms' ℓ_xx, ℓ_xu, ℓ_uu, m_xx (§6.5.4; for non-quadratic terms
     their positive semi-definite Gauss-Newton part),
   * ``newton``: ℓ_xx + z(k+1)ᵀf_xx + w(k)ᵀλ_xx, ... with the adjoint z(N) = Dm,
     z(k) = ℓ_x − Kᵀℓ_u + (A − BK)ᵀ z(k+1) (Prop. 6/7) and the terms' covector w(k) on λ_k;
     only the contraction zᵀD²f + wᵀD²λ is formed (by the core). When this model is not
     positive definite (an indefinite Γ(k) in the LQ sweep) the iteration falls back to
     quasi-Newton;
3. stops when |Dh∘ζ| < tolerance (thesis §6.5: 1e-6);
4. Armijo line search (Algorithm 3): λ = β^m, accept ξ_{i+1} = P(ξ_i + λζ) when the
   projection succeeds (the perturbed trajectory is stabilizable by K: the VI
   step converges) and h(ξ_{i+1}) < h(ξ_i) + α λ Dh∘ζ. The search starts one step of the sequence
   above the previous iteration's accepted λ (λ₀ = min(1, λ_prev/β)), not at 1: on a stiff problem the
   steps far from the optimum are short for many iterations in a row and every trial above them is a
   projection (N steps of the integrator) rejected. Measured (``docs/benchmarks.md``, issue 28): the cart-pole's
   138 projections in 36 iterations become 56 in the same 36, the two-link arm's 1582 in 137 become 220 in 111;
   a step may still grow by one factor 1/β per iteration, and jumps straight to 1 when the Newton model is
   first used. ``armijo_restart`` restores λ₀ = 1 at every iteration.

Newton's model is indefinite far from the optimum (the adjoint is large there), and finding that out costs
its second-order sweep. After a requested Newton iteration fell back to quasi-Newton, Newton is tried
again only once |Dg∘ζ| has fallen below ``NEWTON_RETRY`` times its value at that failure (the iterations
in between are quasi-Newton, recorded as falling back). Measured on the cart-pole: 32 second-order
sweeps, 26 of them on indefinite models, become 11, in the same 36 iterations. The sweep itself is formed
from the last step backwards, chunk by chunk, with the LQ sweep of the tail checked in between
(:meth:`ProjectionOptimizer._newton_terms`): Γ(k) depends on the steps k..N−1 alone, so an indefinite
model is found where the whole sweep would find it, before the contractions of the earlier steps are
formed (the humanoid tracking's two indefinite models fail at k = 186 and 161 of 200); the tails' sweeps
continue from chunk to chunk into the direction's sweep (:class:`_TailSweep`).

The arrays the core writes every iteration (linearization, gains, the direction's LQ solution, the Newton
model) are allocated once per solve (:class:`_Workspace`), not per call: fresh pages of these sizes cost their
zeroing by the kernel at every touch.

Inequality constraints (barrier method, thesis reference [16]: Hauser & Saccon, CDC 2006)
    A cost with :class:`~.constraints.BarrierTerm` s is minimized as a sequence of barrier
    problems g = h + μ_s Δt Σ β(c): the barrier weight starts at ``barrier_start`` times the
    terms' own (final) weight μ and is multiplied by ``barrier_decrease`` whenever the current
    problem is solved to |Dg∘ζ| < max(tolerance, ``barrier_centering`` μ_s Δt), until it
    reaches μ; the last problem is solved to ``tolerance``. The schedule's Newton iterations
    are quasi-Newton before the last problem. If the line search stalls against a limit, the
    weight is raised again (at most ``MAX_RETREATS`` times in a row). The iterate carries over
    from problem to problem.

    Hauser and Saccon's approximate barrier: until an iterate satisfies every constraint
    (normalized margin ≥ −``feasibility_tolerance``) the barrier is their quadratic extension
    below ``barrier_delta``, finite outside the constraints, so the first iterates may leave
    them — also from a start that satisfies them, as the early, far-reaching steps of a
    projection-operator optimization do (measured on the wave: they follow the unconstrained
    path, which crosses the carriage's range for two iterations; an interior path that may
    not cross needs several iterations more, and with the string tension alone it stalls:
    ``docs/reproductions.md`` §4d). From the first iterate that satisfies every constraint
    the barrier is the exact logarithm and the line search accepts only trajectories that
    satisfy every constraint: every later iterate does, and the returned trajectory does.

    The direction of a barrier problem minimizes the model with the barrier of the linearized
    margins (:mod:`.barrier_direction`, up to ``barrier_iterations`` LQ solves), so that a
    limit the quadratic model would cross does not cut the step of the whole trajectory.

Anytime: the optimization can stop at a deadline or on a cancel request (or end without
converging) and return the best trajectory so far: feasible for the dynamics, and for the
constraints when one was found — the current iterate once one iterate satisfied them, before
that the start if it satisfies them. ``OptimizationResult.feasible`` says whether the returned
trajectory satisfies every constraint (False only when neither the start nor an iterate did).

Optimized initial condition (thesis §6.3.2.1, ``free_initial_state``): instead
of δx(0) = 0 the descent direction starts from the minimizer of the LQ value
V*(δx(0)) = δx(0)ᵀP(0)δx(0) + 2b(0)ᵀδx(0) + c(0) (thesis (6.18)),
δx(0) = −P(0)⁻¹b(0), so x_{i+1}(0) = x_i(0) + λδx(0). The projection keeps
x(0) = x̄(0), so g = h∘P and its Newton model are unchanged. The thesis
restricts this to unconstrained systems (a constrained x(0) + λδx(0) is in
general inadmissible); models with holonomic constraints are refused. As in
the reference implementation (trep's ``DOptimizer.optimize_ic``) the cost on
x(0) is the running cost ℓ(x(0), u(0), 0); an :class:`~.terms.InitialState` term adds
½(x(0) − x_d(0))ᵀW₀(x(0) − x_d(0)).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from marionette_control import _core, validation
from marionette_control.ocp import blas_threads
from marionette_control.ocp.barrier_direction import barrier_direction
from marionette_control.ocp.cost import Cost
from marionette_control.lq.riccati import IndefiniteGammaError, LQRSolution, LQSolution, tv_lq, tv_lqr
from marionette_control.ocp.terms import InitialState, Point
from marionette_control.validation import InvalidOption

METHODS = ("steepest", "quasi_newton", "newton")
#: Newton is tried again after an indefinite model once |Dg∘ζ| is below this fraction of its value then.
NEWTON_RETRY = 0.5
#: Steps of the Newton model's last chunk, the first one formed and checked (:meth:`ProjectionOptimizer._newton_terms`).
NEWTON_TAIL_STEPS = 16
#: Line-search failures in a row answered by raising the barrier weight (one factor 1/barrier_decrease each).
MAX_RETREATS = 3
#: Bytes of the linearization's A (N·nx² doubles) from which a solve writes into a workspace (:class:`_Workspace`).
#: Smaller arrays come from the process's heap, whose pages stay mapped from call to call: there the workspace
#: saves nothing (measured on the swing-up and the cart-pole: the same times within a few per cent).
WORKSPACE_BYTES = 1 << 22


class OptionError(InvalidOption):
    """An invalid optimizer option: ``option`` (also its ``key``) names it (an :class:`OptimizerOptions` field,
    or ``schedule[i]``, ``schedule[i].method``, ``schedule[i].iterations`` for entry ``entry`` = i of the
    schedule), ``message`` says what is wrong without naming it. Front ends word ``option`` in their
    own terms (a spec key, a request field, a parameter entry); ``str()`` is ``"<option>: <message>"``."""

    def __init__(self, option: str, message: str, entry: Optional[int] = None):
        super().__init__(f"{option}: {message}", key=option)
        self.option, self.message, self.entry = option, message, entry


@dataclass
class OptimizerOptions:
    """Settings of :class:`ProjectionOptimizer`.

    schedule : sequence of (method, iterations); the last entry's count may be
        None (= until convergence). Default: 4 quasi-Newton iterations, then Newton.
    tolerance : stop when |Dh∘ζ| < tolerance (thesis §6.5: 1e-6).
    max_iterations : descent-direction evaluations at most (the converged one counts).
    armijo_beta, armijo_alpha, armijo_max_steps : Algorithm 3 (λ = β^m, sufficient
        decrease α λ Dh∘ζ, at most this many trials).
    armijo_restart : start every line search at λ = 1 (Algorithm 3 as printed); default False: at
        min(1, λ_prev/β), one step of the sequence above the previous accepted λ (module docstring).
    projection_Q, projection_R : scalar weights of the LQR that gives the projection
        gains (thesis (6.10): identity).
    deadline : seconds; at the deadline the best trajectory so far is returned
        (reason "deadline").
    free_initial_state : optimize x(0) too (thesis §6.3.2.1); unconstrained models only.
    threads : threads of the core's loops over the trajectory's steps, which are independent
        given the trajectory: the linearization (with the constraint forces' derivatives) and
        the contracted second order, each thread with its own workspace on the shared model
        (``DiscreteSystem.linearize_trajectory(..., threads=)``); the projection is a recursion
        and runs on one. The result agrees with one thread's to rounding. Default 1; None: the
        usable cores, at most 4. Small problems (N·nx < 2000) always run on one thread, where
        starting the threads costs more than it saves.
    barrier_start, barrier_decrease, barrier_centering, barrier_delta : the barrier
        method for inequality constraints (module docstring): first weight = barrier_start ×
        the barrier terms' weight (≥ 1), factor per problem (0, 1), centering tolerance factor
        (> 0), the quadratic extension's threshold δ until an iterate satisfies the constraints
        (> 0). No effect on a cost without barrier terms.
    barrier_iterations : LQ solves per direction of a barrier problem (≥ 1; 1: the quadratic
        model's direction alone), :mod:`.barrier_direction`. Not with ``free_initial_state``.
    fraction_to_boundary : τ in (0, 1): once feasible, a step may shrink no normalized margin
        below (1 − τ) times its value (interior-point practice; IPOPT uses τ ≥ 0.99): an
        iterate that lands on a limit leaves the next projections no room and stalls them.
    feasibility_tolerance : a normalized constraint margin ≥ −this counts as satisfied (> 0).
    warm_start : the start is the optimum of a nearby problem (a receding horizon's previous plan,
        :mod:`.mpc`): when it satisfies every constraint, only the last barrier problem is solved, with
        the exact logarithm from the first iterate on (the barrier schedule and the approximate
        barrier would first pull it off the central path it is near). A start outside the
        constraints is solved as from a cold start. Default False.
    """

    schedule: Sequence = (("quasi_newton", 4), ("newton", None))
    tolerance: float = 1e-6
    max_iterations: int = 500
    armijo_beta: float = 0.7
    armijo_alpha: float = 1e-5
    armijo_max_steps: int = 30
    armijo_restart: bool = False
    projection_Q: float = 1.0
    projection_R: float = 1.0
    deadline: Optional[float] = None
    free_initial_state: bool = False
    threads: Optional[int] = 1
    barrier_start: float = 30.0
    barrier_decrease: float = 0.1
    barrier_centering: float = 1000.0
    barrier_delta: float = 0.1
    fraction_to_boundary: float = 0.9
    feasibility_tolerance: float = 1e-6
    barrier_iterations: int = 5
    warm_start: bool = False

    def __post_init__(self):
        """The one check of every optimizer option (OptionError names the option)."""
        sched = []
        for i, entry in enumerate(self.schedule):
            try:
                method, count = entry
            except (TypeError, ValueError):
                raise OptionError(f"schedule[{i}]", f"expected (method, iterations), got {entry!r}", i) from None
            if method not in METHODS:
                raise OptionError(f"schedule[{i}].method", f"unknown method {method!r}; use one of {', '.join(METHODS)}",
                                  i)
            if count is not None and not _is_integer(count, 0):
                raise OptionError(f"schedule[{i}].iterations", f"expected an integer >= 0 or None (until convergence), "
                                                               f"got {count!r}", i)
            if count is None and i != len(self.schedule) - 1:
                raise OptionError(f"schedule[{i}].iterations", "only the last entry of the schedule may run until "
                                                               "convergence", i)
            sched.append((method, None if count is None else int(count)))
        if not sched:
            raise OptionError("schedule", "the method schedule is empty")
        self.schedule = tuple(sched)
        for name in ("tolerance", "projection_Q", "projection_R", "barrier_centering", "barrier_delta",
                     "feasibility_tolerance"):
            _require(name, validation.problem(getattr(self, name), positive=True, short=True))
        _require("barrier_start", validation.problem(self.barrier_start, minimum=1.0, short=True))
        for name in ("fraction_to_boundary", "barrier_decrease", "armijo_beta", "armijo_alpha"):
            v = getattr(self, name)
            if validation.problem(v, positive=True) or v >= 1:
                raise OptionError(name, f"must be in (0, 1), got {v!r}")
        for name, low in (("max_iterations", 0), ("armijo_max_steps", 1), ("barrier_iterations", 1)):
            if not _is_integer(getattr(self, name), low):
                raise OptionError(name, f"expected an integer >= {low}, got {getattr(self, name)!r}")
            setattr(self, name, int(getattr(self, name)))
        if self.deadline is not None:
            _require("deadline", validation.problem(self.deadline, positive=True, short=True), "None or ")
        for name in ("free_initial_state", "warm_start", "armijo_restart"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise OptionError(name, f"expected True or False, got {getattr(self, name)!r}")
        if self.threads is not None and not _is_integer(self.threads, 1):
            raise OptionError("threads", f"expected None or an integer >= 1, got {self.threads!r}")
        self.threads = None if self.threads is None else int(self.threads)

    def method_at(self, iteration: int) -> str:
        """Method of the schedule for a 0-based iteration number."""
        start = 0
        for method, count in self.schedule:
            if count is None or iteration < start + count:
                return method
            start += count
        return self.schedule[-1][0]


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """Σ a·b over every entry (a directional derivative Dh∘ζ)."""
    return float(np.vdot(a, b))


def _is_integer(value, low: int) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer, float, np.floating)):
        return False
    return math.isfinite(value) and value == int(value) and value >= low


def _require(option: str, problem: Optional[str], alternative: str = "") -> None:
    """OptionError naming ``option`` when :func:`marionette_control.validation.problem` found a ``problem``."""
    if problem:
        raise OptionError(option, f"must be {alternative}{problem}")


@dataclass
class IterationRecord:
    """One descent-direction evaluation.

    cost : h after the iteration's step (before it for the final, converged record), the cost
    without the constraint barriers; descent_norm : |Dg∘ζ| of the direction on the barrier
    problem being solved (the termination measure, thesis §6.5); step_length : the accepted
    Armijo λ (0 for the converged record); method : the model actually used; requested : the
    schedule's method (they differ when Newton fell back to quasi-Newton on an indefinite
    model); barrier : the barrier terms' value, barrier_weight : their weight μ_s (0 without
    constraints); violation : the largest constraint violation, max(0, −margin/scale).
    """

    iteration: int
    cost: float
    descent_norm: float
    step_length: float
    method: str
    elapsed: float
    requested: str = ""
    barrier: float = 0.0
    barrier_weight: float = 0.0
    violation: float = 0.0


@dataclass
class OptimizationResult:
    """Outcome of an optimization: the best trajectory and the history.

    ``reason`` is one of "converged", "max_iterations", "deadline", "cancelled",
    "line_search_failed", "not_a_descent_direction". ``iterations`` counts the
    descent-direction evaluations (the final converged check included);
    ``steps`` the accepted line-search steps; ``projections`` the line searches' trial projections
    P(ξ + λζ) (each N steps of the integrator; the accepted ones included). ``cost`` is h without the constraint
    barriers; ``feasible`` whether (X, U) satisfies every inequality constraint within the
    feasibility tolerance (always True without constraints), ``violation`` its largest
    normalized violation.
    """

    X: np.ndarray
    U: np.ndarray
    cost: float
    converged: bool
    reason: str
    history: list = field(default_factory=list)
    elapsed: float = 0.0
    feasible: bool = True
    violation: float = 0.0
    Lam: Optional[np.ndarray] = None
    projections: int = 0

    @property
    def iterations(self) -> int:
        return len(self.history)

    @property
    def steps(self) -> int:
        return sum(1 for h in self.history if h.step_length > 0)


class OptimizationStopped(Exception):
    """Raised inside an iteration when the deadline passed or a cancel was requested."""


@dataclass
class QuadraticModel:
    """The model q of thesis (6.29): per-step Q (N, nx, nx) or (nx, nx), S (N, nx, nU) or None,
    R (N, nU, nU) or (nU, nU), terminal Qf (nx, nx). In the ½ convention of the cost,
    q(ζ, ζ) = D²h∘(ζ, ζ) for quasi-Newton and D²g∘(ζ, ζ) for Newton (Prop. 6)."""

    method: str
    Q: np.ndarray
    S: Optional[np.ndarray]
    R: np.ndarray
    Qf: np.ndarray

    def apply(self, Z: np.ndarray, V: np.ndarray):
        """(qx (N+1, nx), qu (N, nU)): the model's matrix times ζ = (Z, V), so q(ζ, ζ) = Σ qx·Z + Σ qu·V."""
        z = Z[:-1]
        qx = np.empty_like(Z)
        qx[:-1] = z @ self.Q if self.Q.ndim == 2 else np.einsum("kij,kj->ki", self.Q, z)
        qx[-1] = self.Qf @ Z[-1]
        qu = V @ self.R if self.R.ndim == 2 else np.einsum("kij,kj->ki", self.R, V)
        if self.S is not None:
            if self.S.ndim == 2:
                qx[:-1] += V @ self.S.T
                qu += z @ self.S
            else:
                qx[:-1] += np.einsum("kij,kj->ki", self.S, V)
                qu += np.einsum("kji,kj->ki", self.S, z)
        return qx, qu

    def value(self, Z: np.ndarray, V: np.ndarray) -> float:
        """q(ζ, ζ) for ζ = (Z (N+1, nx), V (N, nU))."""
        z = Z[:-1]
        Q = self.Q if self.Q.ndim == 3 else self.Q[None]
        R = self.R if self.R.ndim == 3 else self.R[None]
        val = np.einsum("ki,kij,kj->", z, np.broadcast_to(Q, (z.shape[0],) + Q.shape[1:]), z)
        val += np.einsum("ki,kij,kj->", V, np.broadcast_to(R, (V.shape[0],) + R.shape[1:]), V)
        if self.S is not None:
            S = np.broadcast_to(self.S, (z.shape[0],) + self.S.shape[-2:])
            val += 2.0 * np.einsum("ki,kij,kj->", z, S, V)
        val += Z[-1] @ self.Qf @ Z[-1]
        return float(val)


@dataclass
class _Iterate:
    """The current iterate: trajectory, its constraint forces, cost parts and feasibility."""

    X: np.ndarray
    U: np.ndarray
    Lam: Optional[np.ndarray]
    objective: float       # g = h + barriers at the current barrier weight
    cost: float            # h without barriers
    barrier: float
    violation: float
    margins: Optional[np.ndarray] = None   # normalized margins of every constraint row and step (flat)


@dataclass
class _Direction:
    """A descent direction ζ = (Z, V), Dg∘ζ, the method used, its quadratic model and Dg = (lx, lu)."""

    Z: np.ndarray
    V: np.ndarray
    slope: float
    method: str
    model: QuadraticModel
    lx: np.ndarray
    lu: np.ndarray


class _Workspace:
    """The arrays the core's calls of one solve write every iteration, allocated once per :meth:`ProjectionOptimizer.optimize`
    for N steps, nx states, nU inputs and m constraint forces: the linearization A (N, nx, nx), B (N, nx, nU) (with
    ``lam`` also Lam (N, m), Lam_x (N, m, nx), Lam_u (N, m, nU)), the projection gains (an LQR solution, P(0) only),
    the direction's LQ solution (P(0) only) and the Newton model's contractions (N, nx, nx), (N, nx, nU), (N, nU, nU).
    A new (1000, 80, 80) array is 51 MB of fresh pages: their zeroing by the kernel took a tenth of the humanoid
    tracking's solve at N = 1000 (``docs/benchmarks.md``, issue 28). Used from ``WORKSPACE_BYTES`` of A on. Each
    array is overwritten by the next iteration's call; nothing read after its iteration lives here (the iterates
    come from the projections)."""

    def __init__(self, N: int, nx: int, nU: int, m: int, lam: bool):
        e = np.empty
        self.N = N
        self.AB = (e((N, nx, nx)), e((N, nx, nU))) + ((e((N, m)), e((N, m, nx)), e((N, m, nU))) if lam else ())
        self.gains = LQRSolution(K=e((N, nU, nx)), P=e((1, nx, nx)))
        self.lq = LQSolution(K=e((N, nU, nx)), C=e((N, nU)), P=e((1, nx, nx)), b=e((N + 1, nx)), c=e(N + 1),
                             A=self.AB[0], B=self.AB[1])
        self.newton = (e((N, nx, nx)), e((N, nx, nU)), e((N, nU, nU)))


class _TailSweep:
    """The LQ sweep (6.29)-(6.30) of a Newton model that is formed from the last step backwards
    (:meth:`ProjectionOptimizer._newton_terms`), continued chunk by chunk: the steps k0..k1−1 of a new chunk are
    swept from P(k1), b(k1) of the sweep of the steps after them, so the checks of the tails and the final sweep
    together sweep every step once (before: 1 + 25/200 + 75/200 + 175/200 sweeps of a positive-definite model of
    the humanoid tracking at N = 200). The recursion from P(k1) is the one a single sweep from N runs (P(k1) is
    exactly symmetric, so the sweep's symmetrization of its terminal weight leaves it as it is); c(k) is offset
    to c(N) = 0 as a single sweep's. ``out``: the LQ solution's arrays (N steps, P(0) only) or None."""

    def __init__(self, A, B, lx, lu, Qf, out: Optional[LQSolution]):
        N, nx, nU = B.shape
        e = np.empty
        self.out = out or LQSolution(K=e((N, nU, nx)), C=e((N, nU)), P=e((1, nx, nx)), b=e((N + 1, nx)), c=e(N + 1),
                                     A=A, B=B)
        self.A, self.B, self.lx, self.lu = A, B, lx, lu
        self.N = self.k1 = N
        self.P1, self.b1 = Qf, lx[-1]

    def sweep(self, k0: int, Q, S, R) -> None:
        """Sweeps the steps k0..k1−1 (``Q``, ``S``, ``R``: the model's per-step arrays from step k0 on); raises
        IndefiniteGammaError naming the step counted from 0."""
        k1, o = self.k1, self.out
        n = k1 - k0
        c1 = o.c[k1] if k1 < self.N else 0.0
        # the outputs of steps k0..k1 (tv_lq's out: only its arrays are read)
        part = LQSolution(K=o.K[k0:k1], C=o.C[k0:k1], P=o.P, b=o.b[k0:k1 + 1], c=o.c[k0:k1 + 1], A=None, B=None)
        try:
            tv_lq(self.A[k0:k1], self.B[k0:k1], Q[:n], S[:n], R[:n], self.lx[k0:k1], self.lu[k0:k1], self.P1, self.b1,
                  check_inputs=False, out=part, full_P=False)
        except IndefiniteGammaError as e:
            raise IndefiniteGammaError(k0 + e.step, e.order, self.B.shape[2]) from None
        o.c[k0:k1 + 1] += c1
        self.P1, self.b1, self.k1 = o.P[0].copy(), o.b[k0].copy(), k0

    def solution(self) -> LQSolution:
        """The solution once the sweep reached step 0."""
        o = self.out
        return LQSolution(K=o.K, C=o.C, P=o.P, b=o.b, c=o.c, A=self.A, B=self.B)


class ProjectionOptimizer:
    """Algorithm 1 of the thesis on a core ``DiscreteSystem`` and a :class:`~.cost.Cost`."""

    def __init__(self, system: "_core.DiscreteSystem", cost: Cost, options: Optional[OptimizerOptions] = None):
        self.system = system
        self.cost = cost
        self.options = options or OptimizerOptions()
        model = system.model
        if cost.nx != model.nx or cost.nU != model.nU:
            raise ValueError(f"cost is for nx={cost.nx}, nU={cost.nU}; model '{model.name}' has "
                             f"nx={model.nx}, nU={model.nU}")
        if self.options.free_initial_state and model.nc > 0:
            raise ValueError(
                f"free_initial_state: model '{model.name}' has {model.nc} holonomic constraint(s); the optimized "
                f"initial condition of thesis §6.3.2.1 applies to unconstrained systems only (x(0) + λδx(0) "
                f"would in general violate h(q(0)) = 0)")
        if not self.options.free_initial_state and any(isinstance(t, InitialState) for t in cost.terms):
            raise ValueError("an initial-state weight only acts when free_initial_state=True (with a fixed x(0) "
                             "it adds a constant to the cost)")
        self._Qp = self.options.projection_Q * np.eye(model.nx)
        self._Rp = self.options.projection_R * np.eye(model.nU)
        self._barriers = cost.barriers
        self._lam = cost.needs_lambda
        self._data = cost.create_data()
        self._projections = 0   # the current optimization's line-search projections (OptimizationResult)
        self._ws: Optional[_Workspace] = None   # the arrays of the solve in progress (optimize)
        threads = self.options.threads
        if threads is None:
            try:
                threads = len(os.sched_getaffinity(0))
            except AttributeError:  # pragma: no cover - not Linux
                threads = os.cpu_count() or 1
            threads = max(1, min(4, threads))
        self._threads = int(threads)

    # -- the core's evaluations ---------------------------------------------------------------------

    def _step_threads(self, N: int) -> int:
        """Threads of the core's loops over N independent steps (``threads``; one below N·nx = 2000)."""
        return self._threads if N * self.system.model.nx >= 2000 else 1

    def _buffers(self, N: int) -> Optional[_Workspace]:
        """The workspace of the solve in progress when it is for N steps, else None (new arrays)."""
        ws = self._ws
        return ws if ws is not None and ws.N == N else None

    def linearize(self, X: np.ndarray, U: np.ndarray):
        """A (N, nx, nx), B (N, nx, nU) along (X, U) (the core's batch linearization)."""
        ws = self._buffers(U.shape[0])
        return self.system.linearize_trajectory(X, U, threads=self._step_threads(U.shape[0]),
                                                out=None if ws is None else ws.AB[:2])

    def point(self, X: np.ndarray, U: np.ndarray, Lam=None, derivatives: bool = False) -> Point:
        """The :class:`~.terms.Point` the cost is evaluated at; with the constraint forces (and, with
        ``derivatives``, their derivatives) from the core when a term reads them."""
        if not self._lam:
            return Point(X, U)
        threads = self._step_threads(U.shape[0])
        if derivatives:
            _, _, Lam, Lam_x, Lam_u = self.system.linearize_trajectory(X, U, constraint_forces=True, threads=threads)
            return Point(X, U, Lam, Lam_x, Lam_u)
        if Lam is None:
            Lam = self.system.constraint_forces_trajectory(X, U, threads=threads)
        return Point(X, U, Lam)

    def second_order(self, X: np.ndarray, U: np.ndarray, Z: np.ndarray, W: Optional[np.ndarray] = None, out=None):
        """Z[k]ᵀD²f (+ W[k]ᵀD²λ_k) along (X, U) as (xx, xu, uu) (Z: (N, nx), z(k+1) for step k); ``out``: None or
        the three arrays to write them into."""
        return self.system.second_order_trajectory(X, U, Z, W, threads=self._step_threads(U.shape[0]), out=out)

    def projection_gains(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        """K(k) of the projection operator from LQR on the linearization (thesis (6.10))."""
        ws = self._buffers(A.shape[0])
        return tv_lqr(A, B, self._Qp, self._Rp, self._Qp, check_inputs=False, full_P=False,
                      out=None if ws is None else ws.gains).K

    def project(self, x0: np.ndarray, Xbar: np.ndarray, Ubar: np.ndarray, K: np.ndarray):
        """P(ξ̄): the feasible trajectory tracking ξ̄ with u = ū − K(x − x̄), x(0) = x0 (thesis (6.10)).

        Returns (X, U), or (X, U, Lam) when a cost term reads the constraint forces."""
        return self.system.project(x0, Xbar, Ubar, K, constraint_forces=self._lam)

    # -- cost ----------------------------------------------------------------------------------------

    def objective(self, X: np.ndarray, U: np.ndarray, Lam: Optional[np.ndarray] = None) -> float:
        """h(ξ): the cost with its terms as given (barriers at their own weight)."""
        return self.cost.calc(self._data, self.point(X, U, Lam))

    def gradients(self, X: np.ndarray, U: np.ndarray):
        """(lx (N+1, nx), lu (N, nU)): ∂ℓ/∂x(k) (lx[N] = Dm), ∂ℓ/∂u(k) (total derivatives)."""
        d = self.cost.calc_diff(self._data, self.point(X, U, derivatives=True), exact=False)
        return d.lx, d.lu

    def evaluate(self, X: np.ndarray, U: np.ndarray, Lam: Optional[np.ndarray] = None) -> tuple[float, float]:
        """(h, violation) of a trajectory: the cost without its barriers and the largest normalized
        constraint violation (0 without constraints)."""
        it = self._cost_at(self.cost, X, U, Lam)
        return it.cost, it.violation

    def _cost_at(self, cost: Cost, X, U, Lam) -> _Iterate:
        """The iterate (X, U) on ``cost`` (the barrier problem being solved)."""
        data = cost.create_data()
        p = self.point(X, U, Lam)
        g = cost.calc(data, p)
        if not cost.barriers:
            return _Iterate(X, U, p.Lam, g, g, 0.0, 0.0)
        barrier = sum(data.values[t.name] for t in cost.barriers)
        C = self.margins(p)
        return _Iterate(X, U, p.Lam, g, g - barrier, barrier, max(0.0, -float(C.min(initial=np.inf))), C)

    def margins(self, point: Point) -> np.ndarray:
        """The normalized margins margin/scale of every constraint row at every step it applies to (flat)."""
        parts = []
        for t in self._barriers:
            c = t.constraints
            M = c.margins(point) / c.scale
            parts += [M[:-1].ravel(), M[-1, c.terminal]]
        return np.concatenate(parts) if parts else np.zeros(0)

    def violation(self, point: Point) -> float:
        """max(0, −margin/scale) over every constraint row and step (0 without constraints)."""
        return max(0.0, -float(self.margins(point).min(initial=np.inf)))

    # -- building blocks ---------------------------------------------------------------------------

    def adjoint(self, X, U, A, B, K, lx=None, lu=None) -> np.ndarray:
        """z (N+1, nx) of Prop. 7: z(N) = Dm, z(k) = ℓ_x − Kᵀℓ_u + (A − BK)ᵀ z(k+1)."""
        if lx is None:
            lx, lu = self.gradients(X, U)
        lx, lu = np.ascontiguousarray(lx), np.ascontiguousarray(lu)
        return _core._closed_loop_adjoint(A, B, K, lx[:-1], lu, lx[-1])

    def quadratic_model(self, method: str, X, U, A, B, K, point: Optional[Point] = None,
                        cost: Optional[Cost] = None, data=None,
                        tail_check: Optional[Callable] = None) -> QuadraticModel:
        """The model q of ``method`` at ξ = (X, U) (thesis §6.5.2-6.5.4) on ``cost`` (default: the
        optimizer's); ``data``: the cost's derivatives at ``point`` when already computed (exact for
        Newton; for quasi-Newton they are recomputed in Gauss-Newton form unless every term's two
        forms agree).

        Newton: Q = ℓ_xx + z(k+1)ᵀf_xx + w(k)ᵀλ_xx, S = ℓ_xu + ..., R = ℓ_uu + ..., Q(N) = D²m
        with the adjoint of Prop. 7 (only the contractions are formed, by the core). With
        ``tail_check(k0, Q, S, R)`` (the model's per-step arrays of steps k0..N−1) the contractions
        are formed from the last step backwards, chunk by chunk (:meth:`_newton_terms`), and
        ``tail_check`` may stop the construction by raising (an indefinite model, :meth:`_direction`).
        """
        nx, nU = X.shape[1], U.shape[1]
        if method == "steepest":
            return QuadraticModel(method, np.eye(nx), None, np.eye(nU), np.eye(nx))
        if method not in ("quasi_newton", "newton"):
            raise ValueError(f"unknown method {method!r}; use one of {', '.join(METHODS)}")
        cost = cost or self.cost
        point = point or self.point(X, U, derivatives=True)
        exact = method == "newton"
        d = data
        if d is None or (d.exact != exact and cost.has_curvature):
            d = cost.calc_diff(cost.create_data(), point, exact=exact)
        if method == "quasi_newton":
            return QuadraticModel(method, d.Lxx, d.Lxu, d.Luu, d.Lxx_N)
        z = self.adjoint(X, U, A, B, K, d.lx, d.lu)
        return QuadraticModel(method, *self._newton_terms(X, U, z[1:], d, tail_check), d.Lxx_N)

    def _newton_terms(self, X, U, Z, d, tail_check: Optional[Callable]) -> tuple:
        """(Q (N, nx, nx), S (N, nx, nU), R (N, nU, nU)) of the Newton model: the core's contractions
        Z[k]ᵀD²f + W[k]ᵀD²λ plus the cost's Hessians (``d``: its derivatives, W its covectors on λ).

        With ``tail_check`` the steps are computed in chunks from the end: the last ``NEWTON_TAIL_STEPS``
        (at least N/8), then chunks twice as long as the one before, and after every chunk but the one
        that reaches k = 0 ``tail_check(k0, Q[k0:], S[k0:], R[k0:])`` sees the model of the steps computed
        so far. Γ(k) of the LQ sweep depends on the steps k..N−1 alone (the sweep eliminates u(k) from
        the last step backwards, :class:`~marionette_control.lq.riccati.IndefiniteGammaError`), so a
        sweep of the tail finds an indefinite Γ(k) there exactly as the sweep of the whole model does,
        and a check that raises saves the contractions of the steps before the tail. Measured on the
        humanoid tracking (thesis §6.7.3, N = 200): its indefinite Newton models fail at k = 186 and 161,
        found after the contractions of 25 and 75 steps instead of 200. :meth:`direction_lq`'s checks continue
        one sweep from chunk to chunk (:class:`_TailSweep`), so a model that passes is swept once in all
        (``docs/benchmarks.md``, issue 28). The arrays are the ones a single call gives, number for number (the
        steps are independent given the trajectory); during :meth:`optimize` they are the solve's workspace
        (:class:`_Workspace`), overwritten by the next Newton model."""
        W = d.W
        N, nx, nU = U.shape[0], X.shape[1], U.shape[1]
        ws = self._buffers(N)
        fxx, fxu, fuu = ws.newton if ws is not None else (np.empty((N, nx, nx)), np.empty((N, nx, nU)),
                                                          np.empty((N, nU, nU)))

        def terms(k0: int, k1: int) -> None:
            out = (fxx[k0:k1], fxu[k0:k1], fuu[k0:k1])
            self.second_order(X[k0:k1 + 1], U[k0:k1], Z[k0:k1], None if W is None else W[k0:k1], out=out)
            for f, L in zip(out, (d.Lxx, d.Lxu, d.Luu)):
                if L is not None:
                    f += L[k0:k1] if L.ndim == 3 else L

        if tail_check is None:
            terms(0, N)
            return fxx, fxu, fuu
        k1, size = N, max(NEWTON_TAIL_STEPS, N // 8)
        while k1 > 0:
            k0 = max(0, k1 - size)
            terms(k0, k1)
            if k0 > 0:
                tail_check(k0, fxx[k0:], fxu[k0:], fuu[k0:])
            k1, size = k0, 2 * size
        return fxx, fxu, fuu

    def descent_direction(self, method: str, X, U, A, B, K, point: Optional[Point] = None,
                          cost: Optional[Cost] = None):
        """(Z, V, Dh∘ζ, method used) for the quadratic model of ``method`` (thesis §6.5, Algorithm 2).

        Newton falls back to quasi-Newton when its model is not positive definite on the
        tangent space (an indefinite Γ(k) in the LQ sweep, or with a free x(0) an
        indefinite P(0)); quasi-Newton to steepest descent when rounding breaks Γ(k) > 0.
        """
        d = self._direction(method, X, U, A, B, K, point, cost)
        return d.Z, d.V, d.slope, d.method

    def _direction(self, method: str, X, U, A, B, K, point: Optional[Point], cost: Optional[Cost]) -> "_Direction":
        """:meth:`descent_direction` with the model and gradient it was computed from."""
        sol, model, lx, lu, dx0 = self.direction_lq(method, X, U, A, B, K, point, cost)
        Z, V = sol.rollout(dx0)
        return _Direction(Z, V, _dot(lx, Z) + _dot(lu, V), model.method, model, lx, lu)

    def direction_lq(self, method: str, X, U, A, B, K, point: Optional[Point] = None, cost: Optional[Cost] = None):
        """(sol, model, lx (N+1, nx), lu (N, nU), δx(0) (nx,)): the LQ problem (6.29)–(6.30) of ``method``'s quadratic
        model at ξ = (X, U) solved backwards (thesis (B.4): its gains and affine terms, ``sol`` an
        :class:`~marionette_control.lq.riccati.LQSolution`, whose ``rollout(δx(0))`` is the direction from δx(0)),
        the model actually used (``model.method``: Newton falls back as :meth:`descent_direction` says), the
        cost's gradient Dg = (lx, lu) on ``cost`` (default: the optimizer's) at ``point``, and the direction's
        δx(0): 0, or with ``free_initial_state`` the minimizer of thesis (6.18)."""
        cost = cost or self.cost
        point = point or self.point(X, U, derivatives=True)
        d = cost.calc_diff(cost.create_data(), point, exact=method == "newton")
        lx, lu = d.lx, d.lu
        free = self.options.free_initial_state
        used = method
        nx = X.shape[1]

        ws = self._buffers(U.shape[0])
        while True:
            try:
                if used == "newton":
                    # the tails' sweeps, continued to step 0 (_TailSweep): every step swept once
                    tail = _TailSweep(A, B, lx, lu, d.Lxx_N, None if ws is None else ws.lq)
                    model = self.quadratic_model(used, X, U, A, B, K, point, cost, d, tail.sweep)
                    tail.sweep(0, model.Q, model.S, model.R)
                    sol = tail.solution()
                else:
                    model = self.quadratic_model(used, X, U, A, B, K, point, cost, d)
                    sol = tv_lq(A, B, model.Q, model.S, model.R, lx[:-1], lu, model.Qf, lx[-1], check_inputs=False,
                                full_P=False, out=None if ws is None else ws.lq)
                dx0 = self._initial_direction(sol, model) if free else np.zeros(nx)
                break
            except IndefiniteGammaError:
                # Newton's model need not be positive definite; the quasi-Newton one is in exact
                # arithmetic, but a barrier's curvature near a limit (~1/margin²) can swamp R(k) in
                # Γ(k) by rounding: then the identity model of steepest descent.
                if used == "steepest":
                    raise
                used = "quasi_newton" if used == "newton" else "steepest"
        return sol, model, lx, lu, dx0

    def _barrier_step(self, d: "_Direction", A, B, point: Point, cost: Cost) -> tuple:
        """(Z, V, Dg∘ζ) of the barrier problem ``cost``: the minimizer of the model with the barrier of the
        linearized margins (:mod:`.barrier_direction`) from the direction ``d``."""
        opt = self.options
        if opt.barrier_iterations == 1 or opt.free_initial_state or not cost.barriers:
            return d.Z, d.V, d.slope
        Z, V, _ = barrier_direction(A, B, d.model, d.lx, d.lu, d.Z, d.V, cost.barriers, point,
                                    opt.barrier_iterations, opt.fraction_to_boundary)
        return Z, V, _dot(d.lx, Z) + _dot(d.lu, V)

    @staticmethod
    def _initial_direction(sol, model: QuadraticModel) -> np.ndarray:
        """δx(0) = −P(0)⁻¹b(0), the minimizer of V*(δx(0)) (thesis (6.18), §6.3.2.1)."""
        P0, b0 = sol.P[0], sol.b[0]
        try:
            L = np.linalg.cholesky(P0)
        except np.linalg.LinAlgError:
            if model.method == "newton":
                # V* is unbounded below in δx(0): the Newton model is not convex here.
                raise IndefiniteGammaError(0, 1, P0.shape[0]) from None
            # A PSD P(0) that is singular (a direction of x(0) the cost does not see):
            # the minimum-norm minimizer.
            return -np.linalg.lstsq(P0, b0, rcond=None)[0]
        return -np.linalg.solve(L.T, np.linalg.solve(L, b0))

    # -- barrier problems --------------------------------------------------------------------------

    def barrier_weights(self) -> list:
        """The barrier problems' weights as multiples of the terms' own weight μ: ``barrier_start``,
        times ``barrier_decrease`` while above 1, then 1 ([1] without barriers)."""
        opt = self.options
        if not self._barriers:
            return [1.0]
        f = opt.barrier_start
        out = []
        while f > 1.0:
            out.append(f)
            f *= opt.barrier_decrease
        return out + [1.0]

    def stage_cost(self, factor: float, feasible: bool, delta: float) -> Cost:
        """The cost with every barrier at ``factor`` × its weight: the exact logarithm once the iterate is
        feasible, Hauser–Saccon's quadratic extension below ``delta`` before."""
        if not self._barriers:
            return self.cost
        delta = 0.0 if feasible else delta
        return self.cost.replaced([t.with_weight(factor * t.weight, delta) for t in self._barriers])

    # -- the algorithm -----------------------------------------------------------------------------

    def _linearized(self, X, U):
        """(A, B, point with the constraint forces' derivatives) along (X, U): one batch call of the core."""
        if not self._lam:
            A, B = self.linearize(X, U)
            return A, B, Point(X, U)
        ws = self._buffers(U.shape[0])
        A, B, Lam, Lam_x, Lam_u = self.system.linearize_trajectory(X, U, constraint_forces=True,
                                                                   threads=self._step_threads(U.shape[0]),
                                                                   out=None if ws is None else ws.AB)
        return A, B, Point(X, U, Lam, Lam_x, Lam_u)

    def optimize(self, X: np.ndarray, U: np.ndarray, callback: Optional[Callable[[IterationRecord], None]] = None,
                 should_stop: Optional[Callable[[], bool]] = None) -> OptimizationResult:
        """Runs Algorithm 1 from the trajectory (X, U) (e.g. a simulation).

        The start is made feasible by simulating U from X[0]. ``callback`` receives an
        :class:`IterationRecord` after every iteration; ``should_stop`` is polled
        between steps (cancellation). X[0] stays fixed unless ``free_initial_state``.
        numpy's and scipy's BLAS run one thread each meanwhile (:mod:`.blas_threads`).
        """
        U = np.array(U, dtype=float)
        model = self.system.model
        with blas_threads.single_threaded():
            if U.shape[0] * model.nx ** 2 * 8 >= WORKSPACE_BYTES:
                self._ws = _Workspace(U.shape[0], model.nx, model.nU, model.nc, self._lam)
            try:
                return self._optimize(X, U, callback, should_stop)
            finally:
                self._ws = None

    def _optimize(self, X: np.ndarray, U: np.ndarray, callback: Optional[Callable[[IterationRecord], None]],
                  should_stop: Optional[Callable[[], bool]]) -> OptimizationResult:
        """:meth:`optimize`'s Algorithm 1."""
        opt = self.options
        t_start = time.perf_counter()
        self._projections = 0
        U = np.array(U, dtype=float)
        x0 = np.array(X[0], dtype=float)
        # Make sure the starting point is a feasible trajectory of this system.
        if self._lam:
            X, _, Lam = self.system.simulate(x0, U, constraint_forces=True)
        else:
            X, Lam = self.system.simulate(x0, U)[0], None
        tol_feasible = opt.feasibility_tolerance
        factors = self.barrier_weights()
        stage, delta = 0, opt.barrier_delta
        # The approximate barrier until an iterate satisfies the constraints (module docstring); the start
        # is what a stop returns until then, if it satisfies them.
        feasible = not self._barriers
        cost = self.stage_cost(factors[stage], feasible, delta)
        it = self._cost_at(cost, X, U, Lam)
        fallback = it if self._barriers and it.violation <= tol_feasible else None
        if fallback is not None and opt.warm_start:
            factors, feasible = [1.0], True
            cost = self.stage_cost(factors[stage], feasible, delta)
            it = self._cost_at(cost, X, U, Lam)
        history = []
        mu_dt = (self._barriers[0].weight if self._barriers else 0.0) * self.system.dt

        def check_stop():
            if should_stop is not None and should_stop():
                raise OptimizationStopped("cancelled")
            if opt.deadline is not None and time.perf_counter() - t_start > opt.deadline:
                raise OptimizationStopped("deadline")

        def record(i, slope, step, method, requested):
            weight = factors[stage] * self._barriers[0].weight if self._barriers else 0.0
            history.append(IterationRecord(i, float(it.cost), abs(slope), step, method, time.perf_counter() - t_start,
                                           requested, float(it.barrier), weight, float(it.violation)))
            if callback:
                callback(history[-1])

        converged, reason = False, "max_iterations"
        retreats = 0
        first_step = 0          # the line search's first trial is β^first_step
        indefinite_at = None    # |Dg∘ζ| when the last requested Newton model was indefinite
        last_slope = math.inf
        try:
            for i in range(opt.max_iterations):
                check_stop()
                A, B, point = self._linearized(it.X, it.U)
                K = self.projection_gains(A, B)
                requested = opt.method_at(i)
                if requested == "newton" and stage < len(factors) - 1:
                    # Before the last barrier problem the adjoint carries large barrier gradients and the
                    # Newton model is rarely positive definite (measured on the wave: 7 of 7 fell back):
                    # quasi-Newton, without the wasted second-order evaluation.
                    requested = "quasi_newton"
                asked = requested
                if requested == "newton" and indefinite_at is not None and abs(last_slope) > NEWTON_RETRY * indefinite_at:
                    asked = "quasi_newton"     # the model was indefinite not long ago (module docstring)
                while True:
                    d = self._direction(asked, it.X, it.U, A, B, K, point, cost)
                    slope, method = d.slope, d.method
                    if asked == "newton":
                        indefinite_at = None if method == "newton" else abs(slope)
                    last_slope = slope
                    last = stage == len(factors) - 1
                    if abs(slope) >= (opt.tolerance if last else max(opt.tolerance, opt.barrier_centering
                                                                       * factors[stage] * mu_dt)):
                        break
                    # This barrier problem is solved: the next one (a lower weight; while infeasible, a
                    # steeper extension) starts from the same iterate, linearization and gains.
                    if not feasible and it.violation <= tol_feasible:
                        # solved at an iterate inside the constraints (a start inside them, e.g. the unconstrained
                        # optimum): from now on the exact log barrier, as after a step (below)
                        feasible = True
                    elif not feasible:
                        delta *= opt.barrier_decrease
                        if delta < 1e-9:
                            reason = "infeasible"
                            raise OptimizationStopped(reason)
                    elif last:
                        break
                    else:
                        stage += 1
                    cost = self.stage_cost(factors[stage], feasible, delta)
                    it = self._cost_at(cost, it.X, it.U, it.Lam)
                if abs(slope) < opt.tolerance and last and feasible:
                    converged, reason = True, "converged"
                    record(i, slope, 0.0, method, requested)
                    break
                if slope >= 0 and method == "newton":
                    # Cannot happen with a positive-definite model; kept as the reference
                    # implementation's safeguard (trep falls back on a positive slope).
                    d = self._direction("quasi_newton", it.X, it.U, A, B, K, point, cost)
                    slope, method = d.slope, d.method
                if slope >= 0:
                    reason = "not_a_descent_direction"
                    break
                Z, V, step_slope = self._barrier_step(d, A, B, point, cost)
                check_stop()
                if method == "newton" and (not history or history[-1].method != "newton"):
                    first_step = 0     # Newton's own step length is 1
                new = self._armijo(it, Z, V, K, step_slope, cost, feasible, check_stop,
                                   0 if opt.armijo_restart else first_step)
                if new is None and self._barriers and feasible and retreats < MAX_RETREATS:
                    # Stalled against a limit (the model misses a constraint's curvature there): a larger
                    # barrier weight pushes the iterate back towards the central path.
                    retreats += 1
                    factors.insert(stage, factors[stage] / opt.barrier_decrease)
                    cost = self.stage_cost(factors[stage], feasible, delta)
                    it = self._cost_at(cost, it.X, it.U, it.Lam)
                    continue
                if new is None:
                    reason = "line_search_failed"
                    break
                retreats = 0
                step, it = new
                first_step = max(0, round(math.log(step) / math.log(opt.armijo_beta)) - 1)
                if not feasible and it.violation <= tol_feasible:
                    feasible = True   # from now on the exact log barrier, and only feasible iterates
                    cost = self.stage_cost(factors[stage], feasible, delta)
                    it = self._cost_at(cost, it.X, it.U, it.Lam)
                record(i, slope, step, method, requested)
        except OptimizationStopped as stop:
            reason = str(stop)
        if not feasible and fallback is not None:
            it = fallback
        return OptimizationResult(X=it.X, U=it.U, cost=float(it.cost), converged=converged, reason=reason,
                                  history=history, elapsed=time.perf_counter() - t_start,
                                  feasible=bool(it.violation <= tol_feasible), violation=float(it.violation),
                                  Lam=it.Lam, projections=self._projections)

    def _armijo(self, it: _Iterate, Z, V, K, slope, cost: Cost, feasible: bool, check_stop, first: int = 0):
        """Algorithm 3: λ = β^m, m = first, first + 1, ..., until P(ξ + λζ) exists and g decreases by at least
        α λ Dg∘ζ; once the iterate satisfies the constraints, the trial must too. Returns (λ, iterate) or None."""
        opt = self.options
        X, U = it.X, it.U
        for m in range(first, first + opt.armijo_max_steps):
            check_stop()
            lam = opt.armijo_beta ** m
            Xb = X + lam * Z
            self._projections += 1
            try:
                out = self.project(Xb[0], Xb, U + lam * V, K)
            except _core.StepError:
                continue
            new = self._cost_at(cost, out[0], out[1], out[2] if self._lam else None)
            if not np.isfinite(new.objective) or new.objective >= it.objective + opt.armijo_alpha * lam * slope:
                continue
            if feasible and self._barriers and (new.violation > opt.feasibility_tolerance or np.any(
                    new.margins < (1.0 - opt.fraction_to_boundary) * it.margins)):
                continue
            return lam, new
        return None
