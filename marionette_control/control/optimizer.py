"""Projection-operator trajectory optimization in discrete time (thesis ch. 6, Algorithm 1).

Every iterate ξ_i = (X, U) is a feasible trajectory of the one-step map. An
iteration

1. linearizes along ξ_i (exact A(k), B(k) from the core) and computes the
   projection gains K(k) by time-varying LQR (Q = R = I by default, thesis L1838);
2. finds a descent direction ζ = (z, v) on the linearization,
   z(k+1) = A z(k) + B v(k), z(0) = 0 (fixed initial condition), by the LQ
   problem (6.29)-(6.30): minimize 2 Dh∘ζ + q(ζ, ζ) where the quadratic model q is
   * ``steepest``: Q = I, S = 0, R = I (§6.5.3),
   * ``quasi_newton``: ℓ_xx, ℓ_xu, ℓ_uu, m_xx (§6.5.4),
   * ``newton``: ℓ_xx + z(k+1)ᵀf_xx, ℓ_xu + z(k+1)ᵀf_xu, ℓ_uu + z(k+1)ᵀf_uu with the
     adjoint z(N) = Dm, z(k) = ℓ_x − Kᵀℓ_u + (A − BK)ᵀ z(k+1) (Prop. 6/7); only
     the contraction zᵀD²f is formed (by the core). When this model is not
     positive definite (an indefinite Γ(k) in the LQ sweep) the iteration falls
     back to quasi-Newton;
3. stops when |Dh∘ζ| < tolerance (thesis L2377);
4. Armijo line search (Algorithm 3): λ = β^m, accept ξ_{i+1} = P(ξ_i + λζ) when the
   projection succeeds (the perturbed trajectory is stabilizable by K: the VI
   step converges) and h(ξ_{i+1}) < h(ξ_i) + α λ Dh∘ζ.

Anytime: the optimization can stop at a deadline or on a cancel request and
return the best feasible trajectory so far.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from marionette_control import _core
from marionette_control.control.cost import TrackingCost
from marionette_control.control.riccati import IndefiniteGammaError, tv_lq, tv_lqr

METHODS = ("steepest", "quasi_newton", "newton")


@dataclass
class OptimizerOptions:
    """Settings of :class:`ProjectionOptimizer`.

    schedule : sequence of (method, iterations); the last entry's count may be
        None (= until convergence). Default: 4 quasi-Newton iterations, then Newton.
    """

    schedule: Sequence = (("quasi_newton", 4), ("newton", None))
    tolerance: float = 1e-6
    max_iterations: int = 500
    armijo_beta: float = 0.7
    armijo_alpha: float = 1e-5
    armijo_max_steps: int = 30
    projection_Q: float = 1.0
    projection_R: float = 1.0
    deadline: Optional[float] = None

    def __post_init__(self):
        sched = []
        for i, entry in enumerate(self.schedule):
            try:
                method, count = entry
            except (TypeError, ValueError):
                raise ValueError(f"schedule entry {i} must be (method, iterations), got {entry!r}") from None
            if method not in METHODS:
                raise ValueError(f"schedule entry {i}: unknown method {method!r}; use one of {', '.join(METHODS)}")
            if count is not None and (int(count) != count or count < 0):
                raise ValueError(f"schedule entry {i}: iterations must be a non-negative integer or None")
            if count is None and i != len(self.schedule) - 1:
                raise ValueError("only the last schedule entry may run until convergence (None)")
            sched.append((method, None if count is None else int(count)))
        if not sched:
            raise ValueError("the method schedule is empty")
        self.schedule = tuple(sched)
        for name in ("tolerance", "projection_Q", "projection_R"):
            v = getattr(self, name)
            if not (np.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be finite and > 0, got {v}")
        if not (0 < self.armijo_beta < 1) or not (0 < self.armijo_alpha < 1):
            raise ValueError("armijo_beta and armijo_alpha must lie in (0, 1)")
        if self.max_iterations < 0 or self.armijo_max_steps < 1:
            raise ValueError("max_iterations must be >= 0 and armijo_max_steps >= 1")
        if self.deadline is not None and not (self.deadline > 0):
            raise ValueError(f"deadline must be > 0 seconds, got {self.deadline}")

    def method_at(self, iteration: int) -> str:
        """Method of the schedule for a 0-based iteration number."""
        start = 0
        for method, count in self.schedule:
            if count is None or iteration < start + count:
                return method
            start += count
        return self.schedule[-1][0]


@dataclass
class IterationRecord:
    iteration: int
    cost: float
    descent_norm: float
    step_length: float
    method: str
    elapsed: float


@dataclass
class OptimizationResult:
    """Outcome of an optimization: the best feasible trajectory and the history."""

    X: np.ndarray
    U: np.ndarray
    cost: float
    converged: bool
    reason: str
    history: list = field(default_factory=list)
    elapsed: float = 0.0

    @property
    def iterations(self) -> int:
        return len(self.history)


class OptimizationStopped(Exception):
    """Raised inside an iteration when the deadline passed or a cancel was requested."""


class ProjectionOptimizer:
    """Algorithm 1 of the thesis on a core ``DiscreteSystem`` and a :class:`TrackingCost`."""

    def __init__(self, system: "_core.DiscreteSystem", cost: TrackingCost, options: Optional[OptimizerOptions] = None):
        self.system = system
        self.cost = cost
        self.options = options or OptimizerOptions()
        model = system.model
        if cost.Xd.shape[1] != model.nx or cost.Ud.shape[1] != model.nU:
            raise ValueError(f"cost is for nx={cost.Xd.shape[1]}, nU={cost.Ud.shape[1]}; model '{model.name}' has "
                             f"nx={model.nx}, nU={model.nU}")
        self._Qp = self.options.projection_Q * np.eye(model.nx)
        self._Rp = self.options.projection_R * np.eye(model.nU)

    # -- building blocks ---------------------------------------------------------------------------

    def projection_gains(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        """K(k) of the projection operator from LQR on the linearization (thesis (6.10), L1838)."""
        return tv_lqr(A, B, self._Qp, self._Rp, self._Qp, check_inputs=False).K

    def project(self, x0: np.ndarray, Xbar: np.ndarray, Ubar: np.ndarray, K: np.ndarray):
        """P(ξ̄): the feasible trajectory tracking ξ̄ with u = ū − K(x − x̄) (thesis (6.10))."""
        return self.system.project(x0, Xbar, Ubar, K)

    def descent_direction(self, method: str, X, U, A, B, K):
        """(Z, V, Dh∘ζ, method used) for the quadratic model of ``method`` (thesis §6.5)."""
        c = self.cost
        lx, lu = c.gradients(X, U)
        N, nx, nU = U.shape[0], X.shape[1], U.shape[1]
        used = method
        if method == "newton":
            z = np.empty((N + 1, nx))
            z[N] = lx[N]
            for k in range(N - 1, -1, -1):
                z[k] = lx[k] - K[k].T @ lu[k] + (A[k] - B[k] @ K[k]).T @ z[k + 1]
            fxx, fxu, fuu = self.system.second_order_trajectory(X, U, z[1:])
            Q = c.Q[None] + fxx
            S = fxu
            R = c.R[None] + fuu
            try:
                sol = tv_lq(A, B, Q, S, R, lx[:-1], lu, c.Qf, lx[N], check_inputs=False)
            except IndefiniteGammaError:
                used = "quasi_newton"
        if used == "steepest":
            sol = tv_lq(A, B, np.eye(nx), None, np.eye(nU), lx[:-1], lu, np.eye(nx), lx[N], check_inputs=False)
        elif used == "quasi_newton":
            sol = tv_lq(A, B, c.Q, None, c.R, lx[:-1], lu, c.Qf, lx[N], check_inputs=False)
        Z, V = sol.rollout(np.zeros(nx))
        slope = float(np.einsum("ki,ki->", lx, Z) + np.einsum("ki,ki->", lu, V))
        return Z, V, slope, used

    # -- the algorithm -----------------------------------------------------------------------------

    def optimize(self, X: np.ndarray, U: np.ndarray, callback: Optional[Callable[[IterationRecord], None]] = None,
                 should_stop: Optional[Callable[[], bool]] = None) -> OptimizationResult:
        """Runs Algorithm 1 from the feasible trajectory (X, U) (e.g. a simulation).

        ``callback`` receives an :class:`IterationRecord` after every iteration;
        ``should_stop`` is polled between steps (cancellation). The initial
        state X[0] stays fixed.
        """
        opt = self.options
        t_start = time.perf_counter()
        X = np.array(X, dtype=float)
        U = np.array(U, dtype=float)
        x0 = X[0].copy()
        # Make sure the starting point is a feasible trajectory of this system.
        X, _ = self.system.simulate(x0, U)
        cost = self.cost.value(X, U)
        history = []

        def check_stop():
            if should_stop is not None and should_stop():
                raise OptimizationStopped("cancelled")
            if opt.deadline is not None and time.perf_counter() - t_start > opt.deadline:
                raise OptimizationStopped("deadline")

        converged, reason = False, "max_iterations"
        try:
            for i in range(opt.max_iterations):
                check_stop()
                A, B = self.system.linearize_trajectory(X, U)
                K = self.projection_gains(A, B)
                Z, V, slope, method = self.descent_direction(opt.method_at(i), X, U, A, B, K)
                if abs(slope) < opt.tolerance:
                    converged, reason = True, "converged"
                    history.append(IterationRecord(i, cost, abs(slope), 0.0, method, time.perf_counter() - t_start))
                    if callback:
                        callback(history[-1])
                    break
                if slope >= 0:
                    reason = "not_a_descent_direction"
                    break
                step, X_new, U_new, cost_new = self._armijo(x0, X, U, Z, V, K, cost, slope, check_stop)
                if step is None:
                    reason = "line_search_failed"
                    break
                X, U, cost = X_new, U_new, cost_new
                history.append(IterationRecord(i, cost, abs(slope), step, method, time.perf_counter() - t_start))
                if callback:
                    callback(history[-1])
        except OptimizationStopped as stop:
            reason = str(stop)
        return OptimizationResult(X=X, U=U, cost=cost, converged=converged, reason=reason, history=history,
                                  elapsed=time.perf_counter() - t_start)

    def _armijo(self, x0, X, U, Z, V, K, cost, slope, check_stop):
        opt = self.options
        lam = 1.0
        for _ in range(opt.armijo_max_steps):
            check_stop()
            try:
                Xn, Un = self.project(x0, X + lam * Z, U + lam * V, K)
            except _core.StepError:
                lam *= opt.armijo_beta
                continue
            cn = self.cost.value(Xn, Un)
            if np.isfinite(cn) and cn < cost + opt.armijo_alpha * lam * slope:
                return lam, Xn, Un, cn
            lam *= opt.armijo_beta
        return None, X, U, cost


def tracking_gains(system: "_core.DiscreteSystem", X: np.ndarray, U: np.ndarray, Q=None, R=None, Qf=None):
    """Time-varying discrete LQR gains K (N, nU, nx) along (X, U) for the controller.

    Weights default to Q = R = I (thesis L1838); vectors are per-component weights.
    """
    model = system.model
    Q = np.eye(model.nx) if Q is None else (np.diag(Q) if np.ndim(Q) == 1 else np.asarray(Q, float))
    R = np.eye(model.nU) if R is None else (np.diag(R) if np.ndim(R) == 1 else np.asarray(R, float))
    Qf = Q if Qf is None else (np.diag(Qf) if np.ndim(Qf) == 1 else np.asarray(Qf, float))
    A, B = system.linearize_trajectory(X, U)
    return tv_lqr(A, B, Q, R, Qf).K
