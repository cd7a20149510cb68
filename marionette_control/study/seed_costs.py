"""The seeds' benchmark costs and their own discretizations, for ``docs/reproductions.md`` (seeds 002, 004).

Not part of the package's API: the tests (``test/test_seed_benchmarks.py``) and ``docs/seed_benchmarks.py``
use these to state this package's results under the seeds' definitions and to recompute the seeds'
published numbers from their own discretizations.

* :func:`rest_to_rest_effort`: min h Σ τ_n² of a linear rest-to-rest transfer, with this package's forcing
  (f⁻ = hτ, thesis (4.12a)) or seed 002's (h/2 τ on both nodes, (3.10)–(3.11)); the rigid sphere of
  seed 002 §7.1 decouples into such transfers (translation; the turn about a fixed axis).
* :func:`director_turn_effort`: the same turn in seed 002's director formulation, whose midpoint discrete
  Lagrangian about a fixed axis is J(1 − cos Δθ)/h.
* :func:`cartpole_seed_cost`: seed 004 (A.13)–(A.17) evaluated on a trajectory of the ``cart_pendulum``.
* :func:`two_link_costates`: the continuous costates and Hamiltonian of seed 004 §8.3 along a discrete
  optimum of the ``two_link_arm``.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

#: Seed 004 §8.3's control weights γ = (1, 0.5).
TWO_LINK_GAMMA = np.diag([1.0, 0.5])


def rest_to_rest_effort(inertia: float, distance: float, N: int, h: float, split: bool) -> float:
    """min h Σ τ_n² subject to I(q_{n+1} − 2q_n + q_{n−1})/h = impulse at node n (n = 0..N, q_{−1} = q_0 and
    q_{N+1} = q_N: at rest at both ends), q_0 = 0, q_N = ``distance``. ``split``: impulse h/2 (τ_{n−1} + τ_n)
    (seed 002); otherwise h τ_n (this package). One KKT solve; raises if the equations are not met."""
    nv = 2 * N - 1                                  # τ_0..τ_{N−1}, q_1..q_{N−1}
    A, b = np.zeros((N + 1, nv)), np.zeros(N + 1)

    def add(row, j, c):
        if 1 <= j <= N - 1:
            A[row, N + j - 1] += c
        elif j == N:
            b[row] -= c * distance

    for k in range(N + 1):
        if k < N:                                   # momentum after the node: I(q_{k+1} − q_k)/h
            add(k, k + 1, inertia / h)
            add(k, k, -inertia / h)
        if k > 0:                                   # minus the momentum before it
            add(k, k, -inertia / h)
            add(k, k - 1, inertia / h)
        if split:
            if k < N:
                A[k, k] -= h / 2
            if k > 0:
                A[k, k - 1] -= h / 2
        elif k < N:
            A[k, k] -= h
    H = np.zeros((nv, nv))
    H[:N, :N] = 2 * h * np.eye(N)
    K = np.block([[H, A.T], [A, np.zeros((N + 1, N + 1))]])
    sol = np.linalg.lstsq(K, np.r_[np.zeros(nv), b], rcond=None)[0]
    if np.abs(A @ sol[:nv] - b).max() > 1e-9:
        raise RuntimeError("the rest-to-rest equations have no solution")
    return float(h * np.sum(sol[:N] ** 2))


def director_turn_effort(inertia: float, angle: float, N: int, h: float) -> tuple[float, np.ndarray]:
    """min h Σ τ_n² of a rest-to-rest turn by ``angle`` about a fixed axis in seed 002's discretization: the
    directors' midpoint L_d = J(1 − cos Δθ)/h (isotropic body, E_I = J/2, (4.2)–(4.3)), momentum
    D₂L_d = J sin Δθ / h, forces split over both nodes (3.10), momentum conditions (3.21). Returns (effort,
    θ (N+1,)). SLSQP from the uniform turn."""

    def split(z):
        return np.r_[0.0, z[:N - 1], angle], z[N - 1:]

    def equations(z):
        th, tau = split(z)
        p = inertia * np.sin(np.diff(th)) / h
        return np.r_[p[0] - h / 2 * tau[0], p[1:] - p[:-1] - h / 2 * (tau[:-1] + tau[1:]), p[-1] + h / 2 * tau[-1]]

    z0 = np.r_[np.linspace(0, angle, N + 1)[1:-1], np.zeros(N)]
    res = minimize(lambda z: h * np.sum(split(z)[1] ** 2), z0,
                   jac=lambda z: np.r_[np.zeros(N - 1), 2 * h * split(z)[1]],
                   constraints=[{"type": "eq", "fun": equations}], method="SLSQP",
                   options={"ftol": 1e-14, "maxiter": 500})
    if not res.success or np.abs(equations(res.x)).max() > 1e-9:
        raise RuntimeError(f"the director turn did not converge: {res.message}")
    return float(res.fun), split(res.x)[0]


def cartpole_seed_cost(model, X: np.ndarray, U: np.ndarray, dt: float, theta_target: float = np.pi,
                       weight: float = 1e5) -> float:
    """Seed 004 (A.13)–(A.17) on a ``cart_pendulum`` trajectory (x = [cart, theta; p_cart, p_theta]): ½ Σ dt F²
    + ½ weight |(θ_N − θ_f, r_N, θ̇_N, ṙ_N)|², the velocities from the momenta by the mass matrix at q_N (the
    continuous Legendre transform), θ's error against the upright ``theta_target``."""
    q, p = X[-1, :2], X[-1, 2:]
    v = np.linalg.solve(np.asarray(model.lagrangian(q, np.zeros(2))["Lvv"]), p)
    e = np.r_[q - [0.0, theta_target], v]
    return 0.5 * dt * float(np.sum(U ** 2)) + 0.5 * weight * float(e @ e)


def two_link_costates(model, X: np.ndarray, U: np.ndarray, dt: float, m2: float = 0.5, L1: float = 2.0,
                      L2: float = 0.5, c1: float = 0.2, c2: float = 0.0):
    """Costates and Hamiltonian of seed 004 §8.3 (H = λᵀf + ½uᵀΓu, state (θ, θ̇)) along a discrete optimum.

    From ∂H/∂u = 0: λ_v = −M Γ u; from the costate equation of λ_v: λ_q = −λ̇_v − (∂C/∂v)ᵀ Γ u, with C of
    (8.3). Evaluated at the midpoints of intervals 1..N−2 (q̄, (q_{k+1} − q_k)/Δt, u_k), λ̇_v by central
    differences. Returns (λ (N−2, 4) = (λ_θ1, λ_θ2, λ_θ̇1, λ_θ̇2), H (N−2,))."""
    q = 0.5 * (X[1:, :2] + X[:-1, :2])
    v = (X[1:, :2] - X[:-1, :2]) / dt
    M = np.array([model.lagrangian(qk, np.zeros(2))["Lvv"] for qk in q])
    GU = U @ TWO_LINK_GAMMA
    lv = -np.einsum("kij,kj->ki", M, GU)
    s = np.sin(q[:, 1])
    C = np.column_stack([-0.5 * L1 * L2 * m2 * v[:, 1] * s * (2 * v[:, 0] + v[:, 1]) + c1 * v[:, 0],
                         0.5 * L1 * L2 * m2 * v[:, 0] ** 2 * s + c2 * v[:, 1]])
    dC = np.stack([np.column_stack([-L1 * L2 * m2 * s * v[:, 1] + c1, -L1 * L2 * m2 * s * (v[:, 0] + v[:, 1])]),
                   np.column_stack([L1 * L2 * m2 * s * v[:, 0], np.full_like(s, c2)])], axis=1)
    k = slice(1, -1)
    lq = -(lv[2:] - lv[:-2]) / (2 * dt) - np.einsum("kji,kj->ki", dC[k], GU[k])
    H = (np.einsum("ki,ki->k", lq, v[k]) - 0.5 * np.einsum("ki,ki->k", U[k], GU[k])
         + np.einsum("ki,ki->k", GU[k], C[k]))
    return np.hstack([lq, lv[k]]), H
