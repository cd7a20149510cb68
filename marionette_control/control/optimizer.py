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

Optimized initial condition (thesis §6.3.2.1, ``free_initial_state``): instead
of δx(0) = 0 the descent direction starts from the minimizer of the LQ value
V*(δx(0)) = δx(0)ᵀP(0)δx(0) + 2b(0)ᵀδx(0) + c(0) (thesis (6.18)),
δx(0) = −P(0)⁻¹b(0), so x_{i+1}(0) = x_i(0) + λδx(0). The projection keeps
x(0) = x̄(0), so g = h∘P and its Newton model are unchanged. The thesis
restricts this to unconstrained systems (a constrained x(0) + λδx(0) is in
general inadmissible); models with holonomic constraints are refused. As in
the reference implementation (trep's ``DOptimizer.optimize_ic``) the cost on
x(0) is the running cost ℓ(x(0), u(0), 0); ``initial_state_weight`` adds
½(x(0) − x_d(0))ᵀW₀(x(0) − x_d(0)) to h.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from marionette_control import _core
from marionette_control.control.cost import TrackingCost
from marionette_control.control.riccati import IndefiniteGammaError, tv_lq, tv_lqr

METHODS = ("steepest", "quasi_newton", "newton")


def _initial_weight(w, nx: int) -> np.ndarray:
    w = np.asarray(w, dtype=float)
    if w.ndim == 1:
        if w.shape != (nx,):
            raise ValueError(f"initial_state_weight has {w.shape[0]} entries, expected {nx} (one per state)")
        w = np.diag(w)
    if w.shape != (nx, nx):
        raise ValueError(f"initial_state_weight has shape {w.shape}, expected ({nx},) or ({nx}, {nx})")
    if not np.all(np.isfinite(w)) or not np.allclose(w, w.T, rtol=0, atol=1e-12 * max(1.0, np.abs(w).max())):
        raise ValueError("initial_state_weight must be finite and symmetric")
    if np.linalg.eigvalsh(w).min() < -1e-12 * max(1.0, np.abs(w).max()):
        raise ValueError("initial_state_weight must be positive semi-definite")
    return w


@dataclass
class OptimizerOptions:
    """Settings of :class:`ProjectionOptimizer`.

    schedule : sequence of (method, iterations); the last entry's count may be
        None (= until convergence). Default: 4 quasi-Newton iterations, then Newton.
    tolerance : stop when |Dh∘ζ| < tolerance (thesis L2377: 1e-6).
    max_iterations : descent-direction evaluations at most (the converged one counts).
    armijo_beta, armijo_alpha, armijo_max_steps : Algorithm 3 (λ = β^m, sufficient
        decrease α λ Dh∘ζ, at most this many trials).
    projection_Q, projection_R : scalar weights of the LQR that gives the projection
        gains (thesis L1838: identity).
    deadline : seconds; at the deadline the best trajectory so far is returned
        (reason "deadline").
    free_initial_state : optimize x(0) too (thesis §6.3.2.1); unconstrained models only.
    threads : worker threads for speculative Armijo trials (λ, βλ, ... projected at
        once, each on its own DiscreteSystem; the accepted step is the one a sequential
        search accepts). Default 1; None: the usable cores, at most 4. Small problems
        (N·nx < 2000) always run on one thread. On this project's shared 2-vCPU
        machines neither this nor splitting the linearization and second order of a
        trajectory across threads measured a consistent gain (hence the default); on
        machines with free cores the speculative trials shorten the first iterations,
        whose early trials fail part-way.
    initial_state_weight : optional extra weight W₀ ((nx,) or (nx, nx), PSD) of
        ½(x(0) − x_d(0))ᵀW₀(x(0) − x_d(0)) added to the cost; only with
        ``free_initial_state`` (with a fixed x(0) it is a constant).
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
    free_initial_state: bool = False
    initial_state_weight: Optional[object] = None
    threads: Optional[int] = 1

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
        if not isinstance(self.free_initial_state, (bool, np.bool_)):
            raise ValueError(f"free_initial_state must be True or False, got {self.free_initial_state!r}")
        if self.threads is not None and (isinstance(self.threads, bool) or int(self.threads) != self.threads
                                         or self.threads < 1):
            raise ValueError(f"threads must be None or an integer >= 1, got {self.threads!r}")
        if self.initial_state_weight is not None and not self.free_initial_state:
            raise ValueError("initial_state_weight only acts when free_initial_state=True "
                             "(with a fixed x(0) it adds a constant to the cost)")

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
    """One descent-direction evaluation.

    cost : h after the iteration's step (before it for the final, converged record);
    descent_norm : |Dh∘ζ| of the direction (the termination measure, thesis L2377);
    step_length : the accepted Armijo λ (0 for the converged record);
    method : the model actually used; requested : the schedule's method (they
    differ when Newton fell back to quasi-Newton on an indefinite model).
    """

    iteration: int
    cost: float
    descent_norm: float
    step_length: float
    method: str
    elapsed: float
    requested: str = ""


@dataclass
class OptimizationResult:
    """Outcome of an optimization: the best feasible trajectory and the history.

    ``reason`` is one of "converged", "max_iterations", "deadline", "cancelled",
    "line_search_failed", "not_a_descent_direction". ``iterations`` counts the
    descent-direction evaluations (the final converged check included);
    ``steps`` the accepted line-search steps.
    """

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

    @property
    def steps(self) -> int:
        return sum(1 for h in self.history if h.step_length > 0)


class OptimizationStopped(Exception):
    """Raised inside an iteration when the deadline passed or a cancel was requested."""


@dataclass
class QuadraticModel:
    """The model q of thesis (6.29): per-step Q (N, nx, nx) or (nx, nx), S (N, nx, nU) or None,
    R (N, nU, nU) or (nU, nU), terminal Qf (nx, nx), and the extra weight ``Q0`` on δx(0)
    (``initial_state_weight``; None if absent). In the ½ convention of the cost,
    q(ζ, ζ) = D²h∘(ζ, ζ) for quasi-Newton and D²g∘(ζ, ζ) for Newton (Prop. 6)."""

    method: str
    Q: np.ndarray
    S: Optional[np.ndarray]
    R: np.ndarray
    Qf: np.ndarray
    Q0: Optional[np.ndarray] = None

    def value(self, Z: np.ndarray, V: np.ndarray) -> float:
        """q(ζ, ζ) for ζ = (Z (N+1, nx), V (N, nU))."""
        z = Z[:-1]
        Q = self.Q if self.Q.ndim == 3 else self.Q[None]
        R = self.R if self.R.ndim == 3 else self.R[None]
        val = np.einsum("ki,kij,kj->", z, np.broadcast_to(Q, (z.shape[0],) + Q.shape[1:]), z)
        val += np.einsum("ki,kij,kj->", V, np.broadcast_to(R, (V.shape[0],) + R.shape[1:]), V)
        if self.S is not None:
            val += 2.0 * np.einsum("ki,kij,kj->", z, self.S, V)
        val += Z[-1] @ self.Qf @ Z[-1]
        if self.Q0 is not None:
            val += Z[0] @ self.Q0 @ Z[0]
        return float(val)


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
        if self.options.free_initial_state and model.nc > 0:
            raise ValueError(
                f"free_initial_state: model '{model.name}' has {model.nc} holonomic constraint(s); the optimized "
                f"initial condition of thesis §6.3.2.1 applies to unconstrained systems only (x(0) + λδx(0) "
                f"would in general violate h(q(0)) = 0)")
        self._W0 = (None if self.options.initial_state_weight is None
                    else _initial_weight(self.options.initial_state_weight, model.nx))
        self._Qp = self.options.projection_Q * np.eye(model.nx)
        self._Rp = self.options.projection_R * np.eye(model.nU)
        threads = self.options.threads
        if threads is None:
            try:
                threads = len(os.sched_getaffinity(0))
            except AttributeError:  # pragma: no cover - not Linux
                threads = os.cpu_count() or 1
            threads = max(1, min(4, threads))
        self._threads = int(threads)
        self._pool = None
        self._systems = [system]
        if self._threads > 1:
            # A DiscreteSystem serves one thread at a time (internal mutex): one per worker.
            self._systems += [_core.DiscreteSystem(model, system.dt, tolerance=system.tolerance,
                                                   max_iterations=system.max_iterations)
                              for _ in range(self._threads - 1)]

    # -- parallel per-step work ------------------------------------------------------------------

    def _parallel(self, N: int) -> bool:
        return self._threads > 1 and N * self.system.model.nx >= 2000

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self._threads, thread_name_prefix="optimizer")
        return self._pool

    def linearize(self, X: np.ndarray, U: np.ndarray):
        """A (N, nx, nx), B (N, nx, nU) along (X, U) (the core's batch linearization)."""
        return self.system.linearize_trajectory(X, U)

    def second_order(self, X: np.ndarray, U: np.ndarray, Z: np.ndarray):
        """Z[k]ᵀD²f along (X, U) as (xx, xu, uu) (Z: (N, nx), z(k+1) for step k)."""
        return self.system.second_order_trajectory(X, U, Z)

    # -- cost with the optional initial-state term -----------------------------------------------

    def objective(self, X: np.ndarray, U: np.ndarray) -> float:
        """h(ξ): the tracking cost plus ½(x(0) − x_d(0))ᵀW₀(x(0) − x_d(0)) when W₀ is set."""
        v = self.cost.value(X, U)
        if self._W0 is not None:
            e0 = X[0] - self.cost.Xd[0]
            v += 0.5 * e0 @ self._W0 @ e0
        return v

    def gradients(self, X: np.ndarray, U: np.ndarray):
        """(lx (N+1, nx), lu (N, nU)): ∂ℓ/∂x(k) (lx[N] = Dm), ∂ℓ/∂u(k), with the W₀ term in lx[0]."""
        lx, lu = self.cost.gradients(X, U)
        if self._W0 is not None:
            lx[0] += self._W0 @ (X[0] - self.cost.Xd[0])
        return lx, lu

    # -- building blocks ---------------------------------------------------------------------------

    def projection_gains(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        """K(k) of the projection operator from LQR on the linearization (thesis (6.10), L1838)."""
        return tv_lqr(A, B, self._Qp, self._Rp, self._Qp, check_inputs=False, full_P=False).K

    def project(self, x0: np.ndarray, Xbar: np.ndarray, Ubar: np.ndarray, K: np.ndarray):
        """P(ξ̄): the feasible trajectory tracking ξ̄ with u = ū − K(x − x̄), x(0) = x0 (thesis (6.10))."""
        return self.system.project(x0, Xbar, Ubar, K)

    def adjoint(self, X, U, A, B, K, lx=None, lu=None) -> np.ndarray:
        """z (N+1, nx) of Prop. 7: z(N) = Dm, z(k) = ℓ_x − Kᵀℓ_u + (A − BK)ᵀ z(k+1)."""
        if lx is None:
            lx, lu = self.gradients(X, U)
        N = U.shape[0]
        z = np.empty_like(lx)
        z[N] = lx[N]
        for k in range(N - 1, -1, -1):
            zk = A[k].T @ z[k + 1]
            zk -= K[k].T @ (lu[k] + B[k].T @ z[k + 1])
            zk += lx[k]
            z[k] = zk
        return z

    def quadratic_model(self, method: str, X, U, A, B, K, lx=None, lu=None) -> QuadraticModel:
        """The model q of ``method`` at ξ = (X, U) (thesis §6.5.2-6.5.4).

        Newton: Q = ℓ_xx + z(k+1)ᵀf_xx, S = ℓ_xu + z(k+1)ᵀf_xu, R = ℓ_uu + z(k+1)ᵀf_uu,
        Q(N) = D²m with the adjoint of Prop. 7 (only the contraction zᵀD²f is formed, by the core).
        """
        c = self.cost
        nx, nU = X.shape[1], U.shape[1]
        if method == "steepest":
            return QuadraticModel(method, np.eye(nx), None, np.eye(nU), np.eye(nx))
        if method == "quasi_newton":
            return QuadraticModel(method, c.Q, None, c.R, c.Qf, self._W0)
        if method == "newton":
            z = self.adjoint(X, U, A, B, K, lx, lu)
            fxx, fxu, fuu = self.second_order(X, U, z[1:])
            fxx += c.Q
            fuu += c.R
            return QuadraticModel(method, fxx, fxu, fuu, c.Qf, self._W0)
        raise ValueError(f"unknown method {method!r}; use one of {', '.join(METHODS)}")

    def descent_direction(self, method: str, X, U, A, B, K):
        """(Z, V, Dh∘ζ, method used) for the quadratic model of ``method`` (thesis §6.5, Algorithm 2).

        Newton falls back to quasi-Newton when its model is not positive definite on the
        tangent space (an indefinite Γ(k) in the LQ sweep, or with a free x(0) an
        indefinite P(0)).
        """
        lx, lu = self.gradients(X, U)
        nx = X.shape[1]
        free = self.options.free_initial_state
        used = method
        while True:
            model = self.quadratic_model(used, X, U, A, B, K, lx, lu)
            try:
                sol = tv_lq(A, B, model.Q, model.S, model.R, lx[:-1], lu, model.Qf, lx[-1], check_inputs=False,
                            full_P=False)
                dx0 = self._initial_direction(sol, model) if free else np.zeros(nx)
                break
            except IndefiniteGammaError:
                if used != "newton":
                    raise
                used = "quasi_newton"
        Z, V = sol.rollout(dx0)
        slope = float(np.einsum("ki,ki->", lx, Z) + np.einsum("ki,ki->", lu, V))
        return Z, V, slope, used

    @staticmethod
    def _initial_direction(sol, model: QuadraticModel) -> np.ndarray:
        """δx(0) = −P(0)⁻¹b(0), the minimizer of V*(δx(0)) (thesis (6.18), §6.3.2.1)."""
        P0 = sol.P[0] if model.Q0 is None else sol.P[0] + model.Q0
        b0 = sol.b[0]
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

    # -- the algorithm -----------------------------------------------------------------------------

    def optimize(self, X: np.ndarray, U: np.ndarray, callback: Optional[Callable[[IterationRecord], None]] = None,
                 should_stop: Optional[Callable[[], bool]] = None) -> OptimizationResult:
        """Runs Algorithm 1 from the trajectory (X, U) (e.g. a simulation).

        The start is made feasible by simulating U from X[0]. ``callback`` receives an
        :class:`IterationRecord` after every iteration; ``should_stop`` is polled
        between steps (cancellation). X[0] stays fixed unless ``free_initial_state``.
        """
        opt = self.options
        t_start = time.perf_counter()
        X = np.array(X, dtype=float)
        U = np.array(U, dtype=float)
        # Make sure the starting point is a feasible trajectory of this system.
        X, _ = self.system.simulate(X[0].copy(), U)
        cost = self.objective(X, U)
        history = []

        def check_stop():
            if should_stop is not None and should_stop():
                raise OptimizationStopped("cancelled")
            if opt.deadline is not None and time.perf_counter() - t_start > opt.deadline:
                raise OptimizationStopped("deadline")

        def record(i, c, slope, step, method, requested):
            history.append(IterationRecord(i, float(c), abs(slope), step, method, time.perf_counter() - t_start,
                                           requested))
            if callback:
                callback(history[-1])

        converged, reason = False, "max_iterations"
        try:
            for i in range(opt.max_iterations):
                check_stop()
                A, B = self.linearize(X, U)
                K = self.projection_gains(A, B)
                requested = opt.method_at(i)
                Z, V, slope, method = self.descent_direction(requested, X, U, A, B, K)
                if abs(slope) < opt.tolerance:
                    converged, reason = True, "converged"
                    record(i, cost, slope, 0.0, method, requested)
                    break
                if slope >= 0 and method == "newton":
                    # Cannot happen with a positive-definite model; kept as the reference
                    # implementation's safeguard (trep falls back on a positive slope).
                    Z, V, slope, method = self.descent_direction("quasi_newton", X, U, A, B, K)
                if slope >= 0:
                    reason = "not_a_descent_direction"
                    break
                check_stop()
                step, X_new, U_new, cost_new = self._armijo(X, U, Z, V, K, cost, slope, check_stop)
                if step is None:
                    reason = "line_search_failed"
                    break
                X, U, cost = X_new, U_new, cost_new
                record(i, cost, slope, step, method, requested)
        except OptimizationStopped as stop:
            reason = str(stop)
        return OptimizationResult(X=X, U=U, cost=float(cost), converged=converged, reason=reason, history=history,
                                  elapsed=time.perf_counter() - t_start)

    def _armijo(self, X, U, Z, V, K, cost, slope, check_stop):
        """Algorithm 3: λ = β^m until P(ξ + λζ) exists and h decreases by at least α λ Dh∘ζ.

        With worker threads the trials run in groups (λ, βλ, ...) at once; the first
        acceptable λ of the sequence is taken, as in the sequential search."""
        opt = self.options
        lams = [opt.armijo_beta ** m for m in range(opt.armijo_max_steps)]

        def trial(ds, lam):
            Xb = X + lam * Z
            try:
                Xn, Un = ds.project(Xb[0], Xb, U + lam * V, K)
            except _core.StepError:
                return None
            cn = self.objective(Xn, Un)
            if np.isfinite(cn) and cn < cost + opt.armijo_alpha * lam * slope:
                return lam, Xn, Un, cn
            return None

        group = len(self._systems) if self._parallel(U.shape[0]) else 1
        for start in range(0, len(lams), group):
            check_stop()
            batch = lams[start:start + group]
            if group == 1:
                results = [trial(self.system, batch[0])]
            else:
                futures = [self._executor().submit(trial, ds, lam) for ds, lam in zip(self._systems, batch)]
                results = [f.result() for f in futures]
            for res in results:
                if res is not None:
                    return res
        return None, X, U, cost

    def close(self) -> None:
        """Stops the worker threads (also done at interpreter exit)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


def tracking_gains(system: "_core.DiscreteSystem", X: np.ndarray, U: np.ndarray, Q=None, R=None, Qf=None):
    """Time-varying discrete LQR gains K (N, nU, nx) along (X, U) for the controller.

    Weights default to Q = R = I (thesis L1838); vectors are per-component weights.
    """
    model = system.model
    Q = np.eye(model.nx) if Q is None else (np.diag(Q) if np.ndim(Q) == 1 else np.asarray(Q, float))
    R = np.eye(model.nU) if R is None else (np.diag(R) if np.ndim(R) == 1 else np.asarray(R, float))
    Qf = Q if Qf is None else (np.diag(Qf) if np.ndim(Qf) == 1 else np.asarray(Qf, float))
    A, B = system.linearize_trajectory(X, U)
    return tv_lqr(A, B, Q, R, Qf, full_P=False).K
