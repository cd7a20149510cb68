"""Tests of marionette_control.lq.riccati (thesis app. B.2.2-B.2.3, (B.4)).

Evidence, strongest first:
* tv_lq against an independent dense solve of the same finite-horizon problem
  (inputs stacked, states eliminated through the dynamics, quadratic minimised
  by a linear solve), on hypothesis-generated systems;
* the convexity check against the eigenvalues of that dense Hessian;
* closed-form DARE solutions (scalar; double integrator derived by hand below) and the
  long-horizon limit of tv_lqr;
* the error paths: every message names the array, the step and what was expected.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from marionette_control.lq.riccati import (
    IndefiniteGammaError,
    NotStabilizableError,
    dlqr,
    find_indefinite_step,
    tv_lq,
    tv_lqr,
)

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------------ dense reference


def dense_lq(A, B, Q, S, R, q, r, Qf, qf, x0):
    """Minimise the (B.4) cost over U = (u_0, ..., u_{N-1}) by one dense linear solve.

    States are eliminated: w = [x_0; ...; x_N; u_0; ...; u_{N-1}] = T U + t0.  The cost
    is w^T W w + 2 l^T w = U^T H U + 2 g^T U + const.  Returns (U*, J*, H, const, g).
    Per-step arrays must be full stacks here (no broadcasting, no None).
    """
    N, n, _ = A.shape
    m = B.shape[2]
    nx, nu = (N + 1) * n, N * m
    Fx = np.zeros((nx, n))
    Gu = np.zeros((nx, nu))
    Fx[:n] = np.eye(n)
    for k in range(N):
        rows, nxt = slice(k * n, (k + 1) * n), slice((k + 1) * n, (k + 2) * n)
        Fx[nxt] = A[k] @ Fx[rows]
        Gu[nxt] = A[k] @ Gu[rows]
        Gu[nxt, k * m:(k + 1) * m] += B[k]
    T = np.vstack([Gu, np.eye(nu)])
    t0 = np.concatenate([Fx @ x0, np.zeros(nu)])
    W = np.zeros((nx + nu, nx + nu))
    lin = np.zeros(nx + nu)
    for k in range(N):
        xs, us = slice(k * n, (k + 1) * n), slice(nx + k * m, nx + (k + 1) * m)
        W[xs, xs] = Q[k]
        W[xs, us] = S[k]
        W[us, xs] = S[k].T
        W[us, us] = R[k]
        lin[xs] = q[k]
        lin[us] = r[k]
    W[N * n:, N * n:][:n, :n] = Qf
    lin[N * n:nx] = qf
    H = T.T @ W @ T
    g = T.T @ (W @ t0 + lin)
    const = t0 @ W @ t0 + 2 * lin @ t0
    U = -np.linalg.solve(H, g)
    J = const + g @ U
    return U.reshape(N, m), J, H, const, g


def lq_cost(X, U, Q, S, R, q, r, Qf, qf):
    """The (B.4) cost of a given trajectory, term by term."""
    J = 0.0
    for k in range(U.shape[0]):
        x, u = X[k], U[k]
        J += x @ Q[k] @ x + 2 * x @ S[k] @ u + u @ R[k] @ u + 2 * (q[k] @ x + r[k] @ u)
    return J + X[-1] @ Qf @ X[-1] + 2 * qf @ X[-1]


def random_problem(rng, N, n, m, *, margin=0.1):
    """Random LQ problem with jointly positive-definite [[Q, S], [S^T, R]] (>= margin I)."""
    A = rng.standard_normal((N, n, n)) / np.sqrt(n)
    B = rng.standard_normal((N, n, m))
    M = rng.standard_normal((N, n + m, n + m))
    Wk = M @ M.transpose(0, 2, 1) / (n + m) + margin * np.eye(n + m)
    Q = np.ascontiguousarray(Wk[:, :n, :n])
    S = np.ascontiguousarray(Wk[:, :n, n:])
    R = np.ascontiguousarray(Wk[:, n:, n:])
    F = rng.standard_normal((n, n))
    Qf = F @ F.T / n + margin * np.eye(n)
    q = rng.standard_normal((N, n))
    r = rng.standard_normal((N, m))
    qf = rng.standard_normal(n)
    x0 = rng.standard_normal(n)
    return A, B, Q, S, R, q, r, Qf, qf, x0


sizes = dict(N=st.integers(1, 6), n=st.integers(1, 4), m=st.integers(1, 3),
             seed=st.integers(0, 2**32 - 1))


# ------------------------------------------------------------- tv_lq vs dense solve


@SETTINGS
@given(**sizes)
def test_tv_lq_matches_dense_solve(N, n, m, seed):
    rng = np.random.default_rng(seed)
    A, B, Q, S, R, q, r, Qf, qf, x0 = random_problem(rng, N, n, m)
    U_ref, J_ref, H, const, g = dense_lq(A, B, Q, S, R, q, r, Qf, qf, x0)

    sol = tv_lq(A, B, Q, S, R, q, r, Qf, qf)
    X, U = sol.rollout(x0)

    scale_U = max(1.0, np.abs(U_ref).max())
    np.testing.assert_allclose(U, U_ref, rtol=0, atol=1e-9 * scale_U)
    # Scale of V: its terms; J* itself may be near 0 by cancellation.
    scale_J = abs(const) + abs(g @ U_ref.ravel()) + 1e-300
    V = x0 @ sol.P[0] @ x0 + 2 * sol.b[0] @ x0 + sol.c[0]
    assert abs(V - J_ref) <= 1e-9 * scale_J
    assert abs(sol.value(x0) - J_ref) <= 1e-9 * scale_J
    # The rollout is a trajectory of the dynamics whose cost is the optimal value.
    for k in range(N):
        np.testing.assert_allclose(X[k + 1], A[k] @ X[k] + B[k] @ U[k], atol=1e-12 * (
            1 + np.abs(X).max()))
    assert abs(lq_cost(X, U, Q, S, R, q, r, Qf, qf) - J_ref) <= 1e-9 * scale_J
    assert sol.K.shape == (N, m, n) and sol.C.shape == (N, m)
    assert sol.P.shape == (N + 1, n, n) and sol.b.shape == (N + 1, n)
    assert sol.c.shape == (N + 1,) and sol.c[N] == 0.0
    np.testing.assert_array_equal(sol.b[N], qf)


@SETTINGS
@given(**sizes, which=st.sampled_from(["Q", "S", "R", "q", "r"]))
def test_broadcast_weight_equals_stacked_weight(N, n, m, seed, which):
    """A weight given without the step axis is the same weight at every step."""
    rng = np.random.default_rng(seed)
    args = dict(zip("A B Q S R q r Qf qf".split(),
                    random_problem(rng, N, n, m)[:9]))
    for name in ("Q", "S", "R"):  # step 0's weights at every step: jointly PD
        args[name] = np.broadcast_to(args[name][0], args[name].shape).copy()
    const = args[which][0]
    stacked = dict(args, **{which: np.broadcast_to(const, args[which].shape).copy()})
    broadcast = dict(args, **{which: const})
    s1, s2 = tv_lq(**stacked), tv_lq(**broadcast)
    for name in "KCPbc":
        np.testing.assert_array_equal(getattr(s1, name), getattr(s2, name))


@SETTINGS
@given(**sizes)
def test_none_linear_terms_mean_zero(N, n, m, seed):
    rng = np.random.default_rng(seed)
    A, B, Q, S, R, q, r, Qf, qf, _ = random_problem(rng, N, n, m)
    s0 = tv_lq(A, B, Q, None, R, None, None, Qf, None)
    sz = tv_lq(A, B, Q, np.zeros_like(S), R, np.zeros_like(q), np.zeros_like(r), Qf,
               np.zeros(n))
    for name in "KCPbc":
        np.testing.assert_array_equal(getattr(s0, name), getattr(sz, name))
    assert not s0.C.any() and not s0.b.any() and not s0.c.any()


# ------------------------------------------------------------------ tv_lqr


@SETTINGS
@given(**sizes)
def test_tv_lqr_is_tv_lq_without_cross_or_linear_terms(N, n, m, seed):
    rng = np.random.default_rng(seed)
    A, B, Q, S, R, q, r, Qf, qf, x0 = random_problem(rng, N, n, m)
    lqr = tv_lqr(A, B, Q, R, Qf)
    lq = tv_lq(A, B, Q, np.zeros_like(S), R, np.zeros_like(q), np.zeros_like(r), Qf,
               np.zeros(n))
    np.testing.assert_allclose(lqr.K, lq.K, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(lqr.P, lq.P, rtol=1e-13, atol=1e-13)
    # ... and its value x0^T P0 x0 is the dense optimum of the pure LQR problem.
    Z = np.zeros_like
    _, J_ref, _, _, _ = dense_lq(A, B, Q, Z(S), R, Z(q), Z(r), Qf, Z(qf), x0)
    assert abs(x0 @ lqr.P[0] @ x0 - J_ref) <= 1e-9 * max(abs(J_ref), 1e-300)


@SETTINGS
@given(**sizes)
def test_P_exactly_symmetric(N, n, m, seed):
    rng = np.random.default_rng(seed)
    A, B, Q, S, R, q, r, Qf, qf, _ = random_problem(rng, N, n, m)
    B = B * 10.0 ** rng.uniform(-3, 3)  # unbalanced scales stress the roundoff
    P = tv_lqr(A, B, Q, R, Qf).P
    np.testing.assert_array_equal(P, P.transpose(0, 2, 1))
    P = tv_lq(A, B, Q, S, R, q, r, Qf, qf).P
    np.testing.assert_array_equal(P, P.transpose(0, 2, 1))


def test_tv_lqr_terminal_and_one_step_by_hand():
    # N = 1, scalar: Gamma = r + b^2 qf, K = b qf a / Gamma, P0 = q + a^2 qf - K^2 Gamma.
    a, b, q, r, qf = 1.3, 0.7, 2.0, 0.5, 3.0
    sol = tv_lqr([[[a]]], [[[b]]], [[q]], [[r]], [[qf]])
    gamma = r + b * b * qf
    K = b * qf * a / gamma
    assert sol.K[0, 0, 0] == pytest.approx(K, rel=1e-15)
    assert sol.P[0, 0, 0] == pytest.approx(q + a * a * qf - K * K * gamma, rel=1e-14)
    assert sol.P[1, 0, 0] == qf


def test_check_inputs_false_gives_same_result():
    rng = np.random.default_rng(3)
    A, B, Q, S, R, q, r, Qf, qf, _ = random_problem(rng, 5, 3, 2)
    s1 = tv_lq(A, B, Q, S, R, q, r, Qf, qf)
    s2 = tv_lq(A, B, Q, S, R, q, r, Qf, qf, check_inputs=False)
    for name in "KCPbc":
        np.testing.assert_array_equal(getattr(s1, name), getattr(s2, name))


def test_check_inputs_false_still_refuses_wrong_shapes():
    """Unchecked inputs go straight to the core, whose binding names the array of a wrong shape."""
    rng = np.random.default_rng(4)
    A, B, Q, S, R, q, r, Qf, qf, _ = random_problem(rng, 5, 3, 2)
    with pytest.raises(ValueError, match=r"Q has shape \(3, 2\)"):
        tv_lq(A, B, np.ones((3, 2)), S, R, q, r, Qf, qf, check_inputs=False)
    with pytest.raises(ValueError, match=r"R has shape"):
        tv_lqr(A, B, Q, np.eye(3), Qf, check_inputs=False)


# -------------------------------------------------------- convexity (Newton model check)


@SETTINGS
@given(**sizes, shift=st.floats(-1.0, 2.0))
def test_gamma_check_is_convexity_of_dense_problem(N, n, m, seed, shift):
    """All Gamma(k) PD  <=>  the dense Hessian in U is PD (indefinite Q, R allowed)."""
    rng = np.random.default_rng(seed)
    A, B, _, S, _, q, r, _, qf, x0 = random_problem(rng, N, n, m)
    sym = lambda M: 0.5 * (M + np.swapaxes(M, -1, -2))  # noqa: E731
    Q = sym(rng.standard_normal((N, n, n)))              # indefinite, like a Newton model
    R = sym(rng.standard_normal((N, m, m))) + shift * 2.0 * np.eye(m)
    S = 0.3 * S
    Qf = sym(rng.standard_normal((n, n)))
    _, _, H, _, _ = dense_lq(A, B, Q, S, R, q, r, Qf, qf, x0)
    eig = np.linalg.eigvalsh(H)
    assume(abs(eig).min() > 1e-6 * abs(eig).max())        # stay off the boundary
    step = find_indefinite_step(A, B, Q, S, R, Qf)
    if eig[0] > 0:
        assert step is None
        U_ref, J_ref, _, const, g = dense_lq(A, B, Q, S, R, q, r, Qf, qf, x0)
        sol = tv_lq(A, B, Q, S, R, q, r, Qf, qf)
        _, U = sol.rollout(x0)
        cond = eig[-1] / eig[0]
        np.testing.assert_allclose(U, U_ref, rtol=0,
                                   atol=1e-12 * cond * max(1.0, np.abs(U_ref).max()))
    else:
        assert step is not None and 0 <= step < N
        with pytest.raises(IndefiniteGammaError) as info:
            tv_lq(A, B, Q, S, R, q, r, Qf, qf)
        assert info.value.step == step
        assert f"step k={step}" in str(info.value)


def test_indefinite_gamma_names_the_step():
    N = 5
    R = np.ones((N, 1, 1))
    R[2] = -100.0  # Gamma(2) = -100 + P(3) < 0; Gamma(3), Gamma(4) are fine
    args = (np.ones((N, 1, 1)), np.ones((N, 1, 1)), np.eye(1))
    with pytest.raises(IndefiniteGammaError, match=r"not positive definite at step k=2") as e:
        tv_lqr(*args, R, np.eye(1))
    assert isinstance(e.value, np.linalg.LinAlgError)
    assert e.value.step == 2 and e.value.order == 1
    assert find_indefinite_step(*args, None, R, np.eye(1)) == 2
    with pytest.raises(IndefiniteGammaError, match="step k=2"):
        tv_lq(*args, None, R, None, None, np.eye(1), None)


def test_indefinite_gamma_reports_leading_minor():
    R = np.diag([1.0, -1.0, 1.0])[None]          # minor of order 2 fails
    with pytest.raises(IndefiniteGammaError, match="order 2 ") as e:
        tv_lqr(np.eye(2)[None], np.zeros((1, 2, 3)), np.eye(2), R, np.eye(2))
    assert e.value.order == 2 and e.value.step == 0


def test_overflow_raises_instead_of_returning_garbage():
    N = 400
    A = np.full((N, 1, 1), 1e3)
    with pytest.raises(FloatingPointError, match="step k="):
        tv_lqr(A, np.full((N, 1, 1), 1e-200), np.eye(1), np.eye(1), np.eye(1))


# -------------------------------------------------------------------------- dlqr


@pytest.mark.parametrize("a,b,q,r", [(1.2, 0.5, 1.0, 2.0), (0.5, 1.0, 3.0, 0.1),
                                     (-2.0, 0.3, 0.0, 1.0), (1.0, 1.0, 1.0, 1.0)])
def test_scalar_dare_closed_form(a, b, q, r):
    # p = q + a^2 p - a^2 b^2 p^2 / (r + b^2 p)  <=>  b^2 p^2 + (r - a^2 r - q b^2) p - q r = 0;
    # the stabilizing solution is the non-negative root.
    beta = r - a * a * r - q * b * b
    p = (-beta + np.sqrt(beta * beta + 4 * b * b * q * r)) / (2 * b * b)
    k = a * b * p / (r + b * b * p)
    sol = dlqr([[a]], [[b]], [[q]], [[r]])
    assert sol.P[0, 0] == pytest.approx(p, rel=1e-10)
    assert sol.K[0, 0] == pytest.approx(k, rel=1e-10)
    assert abs(a - b * k) < 1
    K, P = sol  # unpacks as (K, P)
    assert K is sol.K and P is sol.P


def double_integrator_dare():
    """Closed form for A = [[1, 1], [0, 1]], B = [0, 1]^T, Q = I, R = 1.

    With P = [[a, b], [b, c]]: A^T P A = [[a, a+b], [a+b, a+2b+c]], B^T P A = [b, b+c],
    Gamma = 1 + c.  The DARE's three entries give
        (1,1): b^2 = 1 + c,
        (1,2): a = b (b + c) / (1 + c) = (b^2 + b - 1) / b,
        (2,2): 1 + a + 2b = (b + c)^2 / (1 + c)  =>  b^4 - b^3 - 3b^2 - b + 1 = 0.
    The quartic is palindromic: with y = b + 1/b, y^2 - y - 5 = 0, y = (1 + sqrt 21)/2
    (b > 1 for c > 0), b = (y + sqrt(y^2 - 4))/2 = (y + sqrt(y + 1))/2.
    Then K = [b, b + c] / (1 + c) = [1/b, 1 + 1/b - 1/b^2].
    """
    y = (1 + np.sqrt(21.0)) / 2
    b = (y + np.sqrt(y + 1)) / 2
    c = b * b - 1
    a = b + 1 - 1 / b
    return np.array([[a, b], [b, c]]), np.array([[1 / b, 1 + 1 / b - 1 / b ** 2]])


def test_double_integrator_dare_closed_form():
    P_ref, K_ref = double_integrator_dare()
    A = np.array([[1.0, 1.0], [0.0, 1.0]])
    B = np.array([[0.0], [1.0]])
    sol = dlqr(A, B, np.eye(2), np.eye(1))
    np.testing.assert_allclose(sol.P, P_ref, rtol=1e-12)
    np.testing.assert_allclose(sol.K, K_ref, rtol=1e-12)
    np.testing.assert_allclose(K_ref, [[0.42208, 1.24392]], atol=1e-5)  # sanity of algebra


def test_tv_lqr_long_horizon_converges_to_dlqr():
    P_ref, K_ref = double_integrator_dare()
    N = 200
    A = np.broadcast_to([[1.0, 1.0], [0.0, 1.0]], (N, 2, 2))
    B = np.broadcast_to([[0.0], [1.0]], (N, 2, 1))
    sol = tv_lqr(A, B, np.eye(2), np.eye(1), np.zeros((2, 2)))
    np.testing.assert_allclose(sol.P[0], P_ref, rtol=1e-10)
    np.testing.assert_allclose(sol.K[0], K_ref, rtol=1e-10)
    # and the terminal end is the one-step problem, far from the limit
    assert not np.allclose(sol.K[-1], K_ref, rtol=1e-2)


def test_dlqr_matches_tv_lqr_limit_random():
    rng = np.random.default_rng(7)
    n, m, N = 4, 2, 400
    A = rng.standard_normal((n, n))
    B = rng.standard_normal((n, m))
    F = rng.standard_normal((n, n))
    Q = F @ F.T + 0.1 * np.eye(n)
    R = np.diag([1.0, 2.0])
    sol = dlqr(A, B, Q, R)
    lim = tv_lqr(np.broadcast_to(A, (N, n, n)), np.broadcast_to(B, (N, n, m)), Q, R, Q)
    np.testing.assert_allclose(lim.P[0], sol.P, rtol=1e-9)
    np.testing.assert_allclose(lim.K[0], sol.K, rtol=1e-9, atol=1e-12)
    assert np.max(np.abs(np.linalg.eigvals(A - B @ sol.K))) < 1


def test_dlqr_not_stabilizable():
    A = np.diag([2.0, 0.5])
    B = np.array([[0.0], [1.0]])
    with pytest.raises(NotStabilizableError, match="not stabilizable") as e:
        dlqr(A, B, np.eye(2), np.eye(1))
    assert isinstance(e.value, np.linalg.LinAlgError)
    np.testing.assert_allclose(e.value.eigenvalues, [2.0])
    assert "2" in str(e.value)


def test_dlqr_unit_circle_mode_unseen_by_Q():
    # Stabilizable but the marginal mode is invisible to Q = 0: no stabilizing solution.
    A = np.diag([1.0, 0.5])
    B = np.eye(2)
    with pytest.raises(np.linalg.LinAlgError, match="unit circle"):
        dlqr(A, B, np.zeros((2, 2)), np.eye(2))


@pytest.mark.parametrize("R,match", [
    (np.array([[1.0, 0.0], [0.0, -1.0]]), "R must be symmetric positive definite"),
    (np.array([[1.0, 0.5], [0.0, 1.0]]), "R must be symmetric"),
    (np.eye(3), r"R has shape \(3, 3\), expected \(2, 2\)"),
])
def test_dlqr_bad_R(R, match):
    with pytest.raises(ValueError, match=match):
        dlqr(np.eye(2), np.eye(2), np.eye(2), R)


def test_dlqr_bad_Q():
    with pytest.raises(ValueError, match="Q must be symmetric positive semidefinite"):
        dlqr(np.eye(2), np.eye(2), -np.eye(2), np.eye(2))


# -------------------------------------------------------------------- validation


def _ok(N=8, n=4, m=2):
    rng = np.random.default_rng(0)
    return dict(zip("A B Q S R q r Qf qf".split(), random_problem(rng, N, n, m)[:9]))


def lqr_args(p):
    return {k: p[k] for k in ("A", "B", "Q", "R", "Qf")}


def test_ragged_per_step_list_names_the_step():
    p = _ok()
    Q = [np.eye(4) for _ in range(8)]
    Q[3] = np.zeros((4, 5))
    with pytest.raises(ValueError, match=r"Q\[3\] has shape \(4, 5\), expected \(4, 4\)"):
        tv_lqr(**dict(lqr_args(p), Q=Q))


def test_per_step_list_is_accepted():
    p = _ok()
    s1 = tv_lqr(**dict(lqr_args(p), Q=list(p["Q"])))
    s2 = tv_lqr(**lqr_args(p))
    np.testing.assert_array_equal(s1.K, s2.K)


@pytest.mark.parametrize("name,value,match", [
    ("A", np.zeros((8, 4)), r"A has shape \(8, 4\), expected \(N, n, n\)"),
    ("A", np.zeros((8, 4, 3)), r"A has shape \(8, 4, 3\), expected \(N, n, n\)"),
    ("B", np.zeros((7, 4, 2)), r"B has shape \(7, 4, 2\), expected \(N, n, m\) = \(8, 4, m\)"),
    ("B", np.zeros((8, 3, 2)), r"B has shape \(8, 3, 2\)"),
    ("Q", np.zeros((8, 4, 5)), r"Q\[k\] has shape \(4, 5\), expected \(4, 4\)"),
    ("Q", np.zeros((6, 4, 4)), r"Q has 6 steps .* horizon from A is N=8"),
    ("Q", np.zeros((3, 3)), r"Q has shape \(3, 3\), expected \(8, 4, 4\) .* or \(4, 4\)"),
    ("R", np.zeros((8, 3, 3)), r"R\[k\] has shape \(3, 3\), expected \(2, 2\)"),
    ("Qf", np.zeros((4, 5)), r"Qf has shape \(4, 5\), expected \(4, 4\)"),
])
def test_shape_errors(name, value, match):
    args = lqr_args(_ok())
    args[name] = value
    with pytest.raises(ValueError, match=match):
        tv_lqr(**args)


@pytest.mark.parametrize("name,value,match", [
    ("S", np.zeros((8, 2, 4)), r"S\[k\] has shape \(2, 4\), expected \(4, 2\)"),
    ("q", np.zeros((8, 3)), r"q\[k\] has shape \(3,\), expected \(4,\)"),
    ("r", np.zeros(4), r"r has shape \(4,\), expected \(8, 2\) .* or \(2,\)"),
    ("qf", np.zeros(3), r"qf has shape \(3,\), expected \(4,\)"),
])
def test_shape_errors_lq_terms(name, value, match):
    args = _ok()
    args[name] = value
    with pytest.raises(ValueError, match=match):
        tv_lq(**args)


def test_nan_names_array_step_and_entry():
    p = _ok()
    A = p["A"].copy()
    A[7, 2, 3] = np.nan
    with pytest.raises(ValueError, match=r"A contains NaN at step 7 \(entry \[2, 3\]\)"):
        tv_lqr(**dict(lqr_args(p), A=A))


@pytest.mark.parametrize("name,index,value,match", [
    ("B", (5, 0, 1), np.inf, r"B contains \+inf at step 5"),
    ("Qf", (1, 1), -np.inf, r"Qf contains -inf at entry \[1, 1\]"),
    ("q", (2, 0), np.nan, r"q contains NaN at step 2 \(entry \[0\]\)"),
    ("r", (0, 1), np.nan, r"r contains NaN at step 0"),
    ("S", (4, 3, 1), np.nan, r"S contains NaN at step 4"),
])
def test_nonfinite_errors(name, index, value, match):
    args = _ok()
    args[name] = args[name].copy()
    args[name][index] = value
    with pytest.raises(ValueError, match=match):
        tv_lq(**args)


def test_asymmetric_weights_rejected():
    p = _ok()
    Q = p["Q"].copy()
    Q[4, 0, 1] += 1e-3
    with pytest.raises(ValueError, match=r"Q\[4\] must be symmetric"):
        tv_lqr(**dict(lqr_args(p), Q=Q))
    R = np.array([[1.0, 0.2], [0.0, 1.0]])
    with pytest.raises(ValueError, match=r"R must be symmetric"):
        tv_lqr(**dict(lqr_args(p), R=R))
    Qf = p["Qf"].copy()
    Qf[0, 3] += 1.0
    with pytest.raises(ValueError, match=r"Qf must be symmetric"):
        tv_lqr(**dict(lqr_args(p), Qf=Qf))


def test_roundoff_asymmetry_tolerated():
    p = _ok()
    Q = p["Q"].copy()
    Q[4, 0, 1] *= 1 + 1e-14
    tv_lqr(**dict(lqr_args(p), Q=Q))


def test_complex_and_missing_inputs_rejected():
    p = lqr_args(_ok())
    with pytest.raises(ValueError, match="A is complex"):
        tv_lqr(**dict(p, A=p["A"] + 0j))
    with pytest.raises(ValueError, match="Q is required"):
        tv_lqr(**dict(p, Q=None))


def test_rollout_and_value_validate_x0():
    sol = tv_lq(**_ok())
    with pytest.raises(ValueError, match=r"x0 has shape \(3,\), expected \(4,\)"):
        sol.rollout(np.zeros(3))
    with pytest.raises(ValueError, match="x0 contains non-finite"):
        sol.value(np.array([0.0, np.nan, 0.0, 0.0]))


def test_strided_and_fortran_inputs_used_in_place():
    """Views of one stacked [A B] and Fortran-ordered weights give identical results."""
    rng = np.random.default_rng(11)
    A, B, Q, S, R, q, r, Qf, qf, x0 = random_problem(rng, 6, 4, 2)
    AB = np.concatenate([A, B], axis=2)
    Av, Bv = AB[:, :, :4], AB[:, :, 4:]
    Rf = np.ascontiguousarray(R.transpose(0, 2, 1)).transpose(0, 2, 1)  # F-ordered R[k]
    assert Rf[0].flags.f_contiguous and not Rf[0].flags.c_contiguous
    ref = tv_lq(A, B, Q, S, R, q, r, Qf, qf)
    got = tv_lq(Av, Bv, Q, S, Rf, q, r, np.asfortranarray(Qf), qf)
    for name in "KCPbc":
        np.testing.assert_allclose(getattr(got, name), getattr(ref, name),
                                   rtol=1e-13, atol=1e-13)
    assert np.shares_memory(got.A, AB) and np.shares_memory(got.B, AB)
    # a layout BLAS cannot take (every other column) is copied, still correct
    wide = np.zeros((6, 4, 8))
    wide[:, :, ::2] = A
    got = tv_lq(wide[:, :, ::2], B, Q, S, R, q, r, Qf, qf)
    np.testing.assert_allclose(got.K, ref.K, rtol=1e-13, atol=1e-13)


def test_out_reuses_arrays_of_previous_solution():
    rng = np.random.default_rng(5)
    p1 = dict(zip("A B Q S R q r Qf qf".split(), random_problem(rng, 6, 3, 2)[:9]))
    p2 = dict(zip("A B Q S R q r Qf qf".split(), random_problem(rng, 6, 3, 2)[:9]))
    first = tv_lq(**p1)
    ref = tv_lq(**p2)
    again = tv_lq(**p2, out=first)
    for name in "KCPbc":
        assert getattr(again, name) is getattr(first, name)
        np.testing.assert_array_equal(getattr(again, name), getattr(ref, name))
    lqr1 = tv_lqr(**lqr_args(p1))
    lqr2 = tv_lqr(**lqr_args(p2), out=lqr1)
    assert lqr2.P is lqr1.P
    np.testing.assert_array_equal(lqr2.K, tv_lqr(**lqr_args(p2)).K)
    with pytest.raises(ValueError, match=r"out.K has shape \(6, 2, 3\).*\(5, 2, 3\)"):
        tv_lqr(**lqr_args(_ok(N=5, n=3, m=2)), out=lqr1)


# ------------------------------------------------------------ P(0) only (full_P=False)


@SETTINGS
@given(**sizes)
def test_full_P_false_keeps_P0_and_the_same_gains(N, n, m, seed):
    """full_P=False: the same K, C, b, c bit for bit and P(0) alone, shape (1, n, n)."""
    p = dict(zip("A B Q S R q r Qf qf".split(), random_problem(np.random.default_rng(seed), N, n, m)[:9]))
    full, short = tv_lq(**p), tv_lq(**p, full_P=False)
    assert short.P.shape == (1, n, n)
    np.testing.assert_array_equal(short.P[0], full.P[0])
    for name in "KCbc":
        np.testing.assert_array_equal(getattr(short, name), getattr(full, name))
    x0 = np.random.default_rng(seed + 1).standard_normal(n)
    assert short.value(x0) == full.value(x0)
    lqr_full, lqr_short = tv_lqr(**lqr_args(p)), tv_lqr(**lqr_args(p), full_P=False)
    np.testing.assert_array_equal(lqr_short.K, lqr_full.K)
    np.testing.assert_array_equal(lqr_short.P, lqr_full.P[:1])


def test_full_P_false_value_at_later_step_refused():
    p = dict(zip("A B Q S R q r Qf qf".split(), random_problem(np.random.default_rng(3), 4, 2, 1)[:9]))
    sol = tv_lq(**p, full_P=False)
    with pytest.raises(ValueError, match=r"kept P\(0\) only.*k=2.*full_P=True"):
        sol.value(np.ones(2), k=2)


def test_full_P_false_failures_still_diagnosed():
    """The indefinite step and the overflow are reported as with the full history."""
    N = 5
    R = np.ones((N, 1, 1))
    R[2] = -100.0
    args = (np.ones((N, 1, 1)), np.ones((N, 1, 1)), np.eye(1))
    with pytest.raises(IndefiniteGammaError, match="step k=2"):
        tv_lqr(*args, R, np.eye(1), full_P=False)
    with pytest.raises(IndefiniteGammaError, match="step k=2"):
        tv_lq(*args, None, R, None, None, np.eye(1), None, full_P=False)
    A = np.full((400, 1, 1), 1e3)
    B = np.full((400, 1, 1), 1e-200)
    with pytest.raises(FloatingPointError, match=r"not finite at step k=\d+") as full:
        tv_lqr(A, B, np.eye(1), np.eye(1), np.eye(1))
    with pytest.raises(FloatingPointError, match=r"not finite at step k=\d+") as short:
        tv_lqr(A, B, np.eye(1), np.eye(1), np.eye(1), full_P=False)
    assert str(short.value) == str(full.value)
    Q = np.ones((3, 1, 1))
    Q[0] = np.inf  # unchecked: only P(0) becomes non-finite, no Gamma fails
    args = (np.ones((3, 1, 1)), np.ones((3, 1, 1)), Q, np.eye(1), np.eye(1))
    with pytest.raises(FloatingPointError, match="non-finite values at step k=0"):
        tv_lqr(*args, check_inputs=False)
    with pytest.raises(FloatingPointError, match=r"P\(0\) is not finite; solve with full_P=True"):
        tv_lqr(*args, check_inputs=False, full_P=False)


def test_full_P_false_out_reuse_and_empty_horizon():
    rng = np.random.default_rng(9)
    p1 = dict(zip("A B Q S R q r Qf qf".split(), random_problem(rng, 6, 3, 2)[:9]))
    p2 = dict(zip("A B Q S R q r Qf qf".split(), random_problem(rng, 6, 3, 2)[:9]))
    first = tv_lqr(**lqr_args(p1), full_P=False)
    again = tv_lqr(**lqr_args(p2), out=first, full_P=False)
    assert again.P is first.P and again.K is first.K
    np.testing.assert_array_equal(again.P[0], tv_lqr(**lqr_args(p2)).P[0])
    with pytest.raises(ValueError, match=r"out.P has shape \(1, 3, 3\).*\(7, 3, 3\)"):
        tv_lqr(**lqr_args(p2), out=first)
    Qf = np.diag([2.0, 3.0])
    empty = tv_lqr(np.zeros((0, 2, 2)), np.zeros((0, 2, 1)), np.eye(2), np.eye(1), Qf, full_P=False)
    np.testing.assert_array_equal(empty.P, Qf[None])
