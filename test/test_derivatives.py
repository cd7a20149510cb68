"""Derivatives of the core: Lagrangian, constraints and the midpoint-VI one-step map.

Evidence (docs/architecture.md, "Evidence"):

1. Seed 001's forced pendulum (§II-A, §IV-A, §V): x = [0.2, 0.5], u = [0.8],
   dt = 0.1, Newton tolerance 1e-13. q_{k+1}, p_{k+1}, A, B and the two Hessians over
   (theta_k, p_k, u_k), assembled from ``second_order_full``, equal the reference values to
   1e-9 absolute; the values themselves are derived from seed 001 (6a)-(6b) and §IV-A without the
   core (the Hessians as differences of the closed-form gradient) and checked against the digits
   the paper prints.
2. Random trees drawn by hypothesis (``random_trees.systems()``, described there), every
   differentiated step solved to the Newton tolerance ``random_trees.newton_tolerance``.

Tolerances. Every comparison uses one norm: for an exact array E and its check C,
``max|E - C| <= rtol * max(1, max|E|)`` (entry-wise max over the whole array).

==========================================================  ======  =======================
check                                                       rtol    FD
==========================================================  ======  =======================
L_q, L_v vs FD of L; L_qq, L_qv (both ways), L_vv vs FD of  1e-8    5-point, step 1e-3
L_q, L_v; Dh vs FD of h (model.lagrangian / constraints)
A, B vs FD of the compiled step                             1e-7    5-point at 1e-4 and
                                                                    5e-5, extrapolated
fxx, fxu (from A and from B), fuu (second_order_full) vs    1e-6    5-point, step 1e-4
FD of the analytic A, B (``linearize``)
z^T D2f (second_order_contracted) vs sum_i z_i f..[i]       1e-10   -
z^T D2f vs FD of z^T A, z^T B                               1e-6    5-point, step 1e-4
D2f o (d, d) (second_order_directional) vs d^T (tensor) d   1e-10   -
D2f o (d, d) vs the second central difference of f along    1e-6    h from 0.128 to 0.004,
d, Richardson-extrapolated twice (O(h^6))                           best-agreeing pair
discrete_momentum(q_k, q_{k+1}), state_from_configs vs the  1e-12   -
solved x_{k+1}; linearize's x_{k+1} vs step's
simulate / linearize_trajectory / second_order_trajectory   1e-9    -
vs the per-step entry points (they start Newton from
different guesses, so they agree to the Newton tolerance)
symmetry of L_qq, L_vv (1e-12), fxx[i], fuu[i] (1e-10)
==========================================================  ======  =======================

Measured over ~19,000 drawn systems (3,000 per test), the worst error was below 0.25 of its
tolerance; the FD steps are chosen so that truncation and the Newton noise (about tolerance
/ step) both stay far below it. The file runs in about 10 s with the default example counts (150 per test, 60 for the batch test).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings

from marionette_control import _core
from marionette_control.model import SystemBuilder, library
from marionette_control.model.library import humanoid_marionette as hm
from random_trees import EPS, assert_close, central_fd, richardson_fd, second_difference, step_fn, systems

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


# ------------------------------------------------------------------ seed 001 pendulum

THETA_NEXT = 0.24713619415557164
P_NEXT = 0.36272388311143233
A_REF = np.array([[0.9533343385552316, 0.09766671692776158],
                  [-0.9333132288953667, 0.9533343385552316]])
B_REF = np.array([[0.009766671692776159], [0.09533343385552318]])
H_THETA_REF = np.array([[1.0120961266252502e-02, 5.06048063312625e-04, 5.0604806331262514e-05],
                        [5.06048063312625e-04, 2.5302403165631254e-05, 2.5302403165631254e-06],
                        [5.0604806331262514e-05, 2.5302403165631254e-06, 2.5302403165631256e-07]])
H_P_REF = np.array([[2.0241922532505005e-01, 1.01209612662525e-02, 1.0120961266252503e-03],
                    [1.01209612662525e-02, 5.06048063312625e-04, 5.060480633126251e-05],
                    [1.0120961266252503e-03, 5.060480633126251e-05, 5.060480633126251e-06]])


def pendulum_model():
    """Seed 001's pendulum from the model library, or built here if the library cannot be imported yet."""
    try:
        from marionette_control.model.library.pendulum import pendulum
    except ModuleNotFoundError:  # models/__init__ registers every model; some may not exist yet
        b = SystemBuilder("pendulum", gravity=(0.0, 0.0, -9.8))
        b.frame("pendulum", "world", "rx", config="theta")
        b.frame("bob", "pendulum", "tz", value=-1.0, mass=1.0)
        b.config_force("theta", input="torque")
        return b.build()
    return pendulum()


def test_pendulum_regression():
    model = pendulum_model()
    assert list(model.state_names) == ["theta", "p_theta"]
    sys = _core.DiscreteSystem(model, 0.1, tolerance=1e-13)
    x, u = np.array([0.2, 0.5]), np.array([0.8])
    x_next, _, lam = sys.step(x, u)
    assert lam.shape == (0,)
    np.testing.assert_allclose(x_next, [THETA_NEXT, P_NEXT], rtol=0, atol=1e-9)
    xl, A, B = sys.linearize(x, u)
    np.testing.assert_allclose(xl, [THETA_NEXT, P_NEXT], rtol=0, atol=1e-9)
    np.testing.assert_allclose(A, A_REF, rtol=0, atol=1e-9)
    np.testing.assert_allclose(B, B_REF, rtol=0, atol=1e-9)
    fxx, fxu, fuu = sys.second_order_full(x, u)
    assert fxx.shape == (2, 2, 2) and fxu.shape == (2, 2, 1) and fuu.shape == (2, 1, 1)
    for i, ref in enumerate((H_THETA_REF, H_P_REF)):
        H = np.block([[fxx[i], fxu[i]], [fxu[i].T, fuu[i]]])  # over (theta_k, p_k, u_k)
        np.testing.assert_allclose(H, ref, rtol=0, atol=1e-9, err_msg=f"Hessian of output {i}")



def seed001_pendulum_step(th, p, u, g=9.8, dt=0.1):
    """θ_{k+1}, p_{k+1} and the gradients of both over (θ_k, p_k, u_k), from seed 001 alone, without the core.

    θ_{k+1} solves (6a) by scalar Newton, p_{k+1} is (6b); the gradients follow from (6a)-(6b) by the
    implicit function theorem with the slot derivatives of §IV-A: D₁D₁L_d = D₂D₂L_d = 1/Δt − (gΔt/4) cos θ̄,
    D₂D₁L_d = D₁D₂L_d = −1/Δt − (gΔt/4) cos θ̄, D₃F⁻ = Δt."""
    th1 = th
    for _ in range(50):   # (6a): p - (th1 - th)/dt - (g dt/2) sin((th1 + th)/2) + u dt = 0
        r = p - (th1 - th) / dt - 0.5 * g * dt * np.sin(0.5 * (th1 + th)) + u * dt
        th1 -= r / (-1.0 / dt - 0.25 * g * dt * np.cos(0.5 * (th1 + th)))
    p1 = (th1 - th) / dt - 0.5 * g * dt * np.sin(0.5 * (th1 + th))   # (6b)
    c = np.cos(0.5 * (th1 + th))
    d11, d21 = 1.0 / dt - 0.25 * g * dt * c, -1.0 / dt - 0.25 * g * dt * c
    # (6a) differentiated: d21 dth1 + d11 dth + dp + dt du = 0; (6b): dp1 = d21 dth + d11 dth1
    dth1 = np.array([-d11, -1.0, -dt]) / d21
    dp1 = d11 * dth1 + np.array([d21, 0.0, 0.0])
    return th1, p1, dth1, dp1, d11, d21


def test_pendulum_reference_values_solve_seed_001():
    """The reference values above are seed 001's pendulum (§II-A, §IV-A) to 16 digits, derived here
    without the core (:func:`seed001_pendulum_step`): θ_{k+1}, p_{k+1}, A and B to 1e-14; the Hessians
    as central differences (step 1e-4) of that closed-form gradient to 1e-9. Every value the paper
    prints (4 digits, §II-A and §IV-A) is the computed one to within one unit of its last digit (the
    paper truncates)."""
    z = np.array([0.2, 0.5, 0.8])   # (θ_k, p_k, u_k)
    th1, p1, dth1, dp1, d11, d21 = seed001_pendulum_step(*z)
    A, B = np.array([dth1[:2], dp1[:2]]), np.array([[dth1[2]], [dp1[2]]])
    assert abs(th1 - THETA_NEXT) <= 1e-14 and abs(p1 - P_NEXT) <= 1e-14
    np.testing.assert_allclose(A, A_REF, rtol=0, atol=1e-14)
    np.testing.assert_allclose(B, B_REF, rtol=0, atol=1e-14)
    h, E = 1e-4, np.eye(3)
    for out, ref in ((2, H_THETA_REF), (3, H_P_REF)):
        H = np.array([(seed001_pendulum_step(*(z + h * e))[out] - seed001_pendulum_step(*(z - h * e))[out]) / (2 * h)
                      for e in E])
        np.testing.assert_allclose(H, ref, rtol=0, atol=1e-9)
    printed = [(th1, 0.2471, 4), (p1, 0.3627, 4), (d11, 9.7610, 4), (d21, -10.2389, 4),
               (A[0, 0], 0.9533, 4), (A[0, 1], 0.0976, 4), (A[1, 0], -0.9333, 4), (A[1, 1], 0.9533, 4),
               (B[0, 0], 0.00976, 5), (B[1, 0], 0.09533, 5)]
    for value, shown, digits in printed:
        assert abs(value - shown) < 10.0 ** -digits, (value, shown)

# ------------------------------------------------------------------ model-level derivatives


@SETTINGS
@given(case=systems())
def test_lagrangian_derivatives_match_finite_differences(case):
    model, rng = case.model, case.rng
    q = case.x[: model.nq]
    v = rng.uniform(-1.0, 1.0, model.nq)
    d = model.lagrangian(q, v, 2)
    eps = 1e-3  # 5-point stencil: no Newton solve here, only rounding
    assert_close(d["Lq"], central_fd(lambda qq: model.lagrangian(qq, v, 0)["L"], q, eps, 5), 1e-8, "Lq")
    assert_close(d["Lv"], central_fd(lambda vv: model.lagrangian(q, vv, 0)["L"], v, eps, 5), 1e-8, "Lv")
    assert_close(d["Lqq"], central_fd(lambda qq: model.lagrangian(qq, v, 1)["Lq"], q, eps, 5), 1e-8, "Lqq")
    # Lqv[i, j] = d2L/dq_i dv_j = d(Lv_j)/dq_i; the FD axis is last, hence the transpose.
    assert_close(d["Lqv"], central_fd(lambda qq: model.lagrangian(qq, v, 1)["Lv"], q, eps, 5).T, 1e-8, "Lqv")
    assert_close(d["Lqv"], central_fd(lambda vv: model.lagrangian(q, vv, 1)["Lq"], v, eps, 5), 1e-8, "Lqv (via Lq)")
    assert_close(d["Lvv"], central_fd(lambda vv: model.lagrangian(q, vv, 1)["Lv"], v, eps, 5), 1e-8, "Lvv")
    for key in ("Lqq", "Lvv"):
        assert_close(d[key], d[key].T, 1e-12, f"{key} symmetric")


@SETTINGS
@given(case=systems())
def test_constraint_jacobian_matches_finite_differences(case):
    model = case.model
    assume(model.nc > 0)
    q = case.x[: model.nq] + case.rng.uniform(-0.1, 0.1, model.nq)  # off the manifold too
    h, Dh = model.constraints(q)
    assert h.shape == (model.nc,) and Dh.shape == (model.nc, model.nq)
    assert_close(Dh, central_fd(lambda qq: model.constraints(qq)[0], q, 1e-3, 5), 1e-8, "Dh")


# ------------------------------------------------------------------ one-step map, first order


@SETTINGS
@given(case=systems())
def test_first_order_matches_finite_differences(case):
    model, sys, x, u = case.model, case.sys, case.x, case.u
    n, nd = model.nq, model.nd
    x_next, iters, lam = sys.step(x, u)
    assert lam.shape == (model.nc,)
    if model.nc:
        assert np.max(np.abs(model.constraints(x_next[:n])[0])) <= sys.tolerance
    xl, A, B = sys.linearize(x, u)
    assert A.shape == (model.nx, model.nx) and B.shape == (model.nx, model.nU)
    assert_close(x_next, xl, 1e-12, "linearize x_next vs step")
    assert np.all(A[:, n + nd:] == 0.0), "the step does not depend on the kinematic velocities v_k"
    assert_close(A, richardson_fd(step_fn(sys, u=u), x), 1e-7, "A = df/dx")
    assert_close(B, richardson_fd(step_fn(sys, x=x), u), 1e-7, "B = df/du")

    # Discrete Legendre transform: p_{k+1} = D2 Ld(q_k, q_{k+1}) + f+(q_k, q_{k+1}, u_k) (f+ = 0: thesis rule).
    q_k, q_next, u_f = x[:n], x_next[:n], u[:model.nu]
    assert_close(x_next[n: n + nd], sys.discrete_momentum(q_k, q_next, u_f), 1e-12, "discrete_momentum vs p_{k+1}")
    assert_close(x_next, sys.state_from_configs(q_k, q_next, u_f), 1e-12, "state_from_configs vs x_{k+1}")
    if model.forcing == "thesis":
        assert_close(x_next, sys.state_from_configs(q_k, q_next), 1e-12, "f+ = 0: no inputs needed")
    # The kinematic rows are exact: q_kin' = rho_next, v' = (rho_next - rho_k)/dt.
    np.testing.assert_array_equal(x_next[nd:n], u[model.nu:])


# ------------------------------------------------------------------ one-step map, second order


@SETTINGS
@given(case=systems())
def test_second_order_full_matches_fd_of_linearization(case):
    sys, x, u = case.sys, case.x, case.u
    nx, nU = case.model.nx, case.model.nU
    fxx, fxu, fuu = sys.second_order_full(x, u)
    assert fxx.shape == (nx, nx, nx) and fxu.shape == (nx, nx, nU) and fuu.shape == (nx, nU, nU)
    dA_dx = central_fd(lambda xx: sys.linearize(xx, u)[1], x, EPS, 5)   # [i, j, k] = d2 f_i / dx_j dx_k
    dA_du = central_fd(lambda uu: sys.linearize(x, uu)[1], u, EPS, 5)   # [i, j, l] = d2 f_i / dx_j du_l
    dB_dx = central_fd(lambda xx: sys.linearize(xx, u)[2], x, EPS, 5)   # [i, l, j] = d2 f_i / du_l dx_j
    dB_du = central_fd(lambda uu: sys.linearize(x, uu)[2], u, EPS, 5)   # [i, l, m] = d2 f_i / du_l du_m
    assert_close(fxx, dA_dx, 1e-6, "fxx vs FD of A in x")
    assert_close(fxu, dA_du, 1e-6, "fxu vs FD of A in u")
    assert_close(fxu, dB_dx.transpose(0, 2, 1), 1e-6, "fxu vs FD of B in x")
    assert_close(fuu, dB_du, 1e-6, "fuu vs FD of B in u")
    assert_close(fxx, fxx.transpose(0, 2, 1), 1e-10, "fxx[i] symmetric")
    assert_close(fuu, fuu.transpose(0, 2, 1), 1e-10, "fuu[i] symmetric")


@SETTINGS
@given(case=systems())
def test_contracted_second_order(case):
    sys, x, u, rng = case.sys, case.x, case.u, case.rng
    z = rng.normal(size=case.model.nx)
    xx, xu, uu = sys.second_order_contracted(x, u, z)
    fxx, fxu, fuu = sys.second_order_full(x, u)
    assert_close(xx, np.einsum("i,ijk->jk", z, fxx), 1e-10, "z^T fxx")
    assert_close(xu, np.einsum("i,ijk->jk", z, fxu), 1e-10, "z^T fxu")
    assert_close(uu, np.einsum("i,ijk->jk", z, fuu), 1e-10, "z^T fuu")
    for block, fd, what in (
            (xx, central_fd(lambda xv: z @ sys.linearize(xv, u)[1], x, EPS, 5), "xx vs FD of z^T A in x"),
            (xu, central_fd(lambda uv: z @ sys.linearize(x, uv)[1], u, EPS, 5), "xu vs FD of z^T A in u"),
            (xu, central_fd(lambda xv: z @ sys.linearize(xv, u)[2], x, EPS, 5).T, "xu vs FD of z^T B in x"),
            (uu, central_fd(lambda uv: z @ sys.linearize(x, uv)[2], u, EPS, 5), "uu vs FD of z^T B in u")):
        assert_close(block, fd, 1e-6, f"z^T D2f {what}")


@SETTINGS
@given(case=systems())
def test_directional_second_order(case):
    sys, x, u, rng = case.sys, case.x, case.u, case.rng
    dx = rng.uniform(-1.0, 1.0, case.model.nx)
    du = rng.uniform(-1.0, 1.0, case.model.nU)
    d2 = sys.second_order_directional(x, u, dx, du)
    fxx, fxu, fuu = sys.second_order_full(x, u)
    quad = (np.einsum("ijk,j,k->i", fxx, dx, dx) + 2.0 * np.einsum("ijk,j,k->i", fxu, dx, du)
            + np.einsum("ijk,j,k->i", fuu, du, du))
    assert_close(d2, quad, 1e-10, "D2f o (d, d) vs d^T (full tensor) d")

    along = second_difference(lambda h: sys.step(x + h * dx, u + h * du)[0])
    assert_close(d2, along, 1e-6, "D2f o (d, d) vs second central difference of f along d")


# ------------------------------------------------------------------ batch entry points


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(case=systems())
def test_batch_entry_points_equal_per_step(case):
    model, sys, rng = case.model, case.sys, case.rng
    X0, U = case.X, case.U
    X, iters = sys.simulate(X0[0], U)
    assert X.shape == X0.shape and iters.shape == (len(U),)
    x = X0[0]
    for k in range(len(U)):
        x_next, _, _ = sys.step(X[k], U[k])
        assert_close(X[k + 1], x_next, 1e-9, f"simulate row {k + 1} vs step(X[{k}], U[{k}])")
        x = sys.step(x, U[k])[0]
        assert_close(X[k + 1], x, 1e-9, f"simulate row {k + 1} vs repeated step")

    A, B = sys.linearize_trajectory(X, U)
    assert A.shape == (len(U), model.nx, model.nx) and B.shape == (len(U), model.nx, model.nU)
    Z = rng.normal(size=(len(U), model.nx))
    xx, xu, uu = sys.second_order_trajectory(X, U, Z)
    for k in range(len(U)):
        xn, Ak, Bk = sys.linearize(X[k], U[k])
        assert_close(X[k + 1], xn, 1e-9, f"linearize x_next at step {k}")
        assert_close(A[k], Ak, 1e-9, f"linearize_trajectory A[{k}]")
        assert_close(B[k], Bk, 1e-9, f"linearize_trajectory B[{k}]")
        c = sys.second_order_contracted(X[k], U[k], Z[k])
        assert_close(xx[k], c[0], 1e-9, f"second_order_trajectory xx[{k}]")
        assert_close(xu[k], c[1], 1e-9, f"second_order_trajectory xu[{k}]")
        assert_close(uu[k], c[2], 1e-9, f"second_order_trajectory uu[{k}]")
    # The same loops split over threads, each with its own workspace: the one-thread result to rounding.
    threads = min(3, len(U))
    for one, split, what in ((A, sys.linearize_trajectory(X, U, threads=threads)[0], "A"),
                             (xx, sys.second_order_trajectory(X, U, Z, threads=threads)[0], "xx"),
                             (uu, sys.second_order_trajectory(X, U, Z, threads=threads)[2], "uu")):
        assert_close(one, split, 1e-12, f"{what} with threads={threads}")
    if model.nc:
        assert_close(sys.constraint_forces_trajectory(X, U), sys.constraint_forces_trajectory(X, U, threads=threads),
                     1e-12, f"constraint forces with threads={threads}")


def test_batch_loops_write_into_given_arrays():
    """``out``: linearize_trajectory and second_order_trajectory write into the given arrays (also slices along
    the steps, as the optimizer's chunks) and return them, the numbers of new arrays; arrays of the wrong shape,
    layout or dtype are refused naming ``out``."""
    m = library.get("humanoid_marionette")
    sys = _core.DiscreteSystem(m, 0.01)
    q0 = hm.initial_configuration(m)
    U = hm.string_walk_inputs(m, q0, 0.01, 6)
    X, _ = sys.simulate(sys.state_from_configs(q0, q0), U)
    N, nx, nU = len(U), m.nx, m.nU
    fresh = sys.linearize_trajectory(X, U, constraint_forces=True)
    out = tuple(np.full(a.shape, np.nan) for a in fresh)
    given = sys.linearize_trajectory(X, U, constraint_forces=True, out=out)
    assert all(g is o and np.array_equal(g, f) for g, o, f in zip(given, out, fresh))
    Z = np.random.default_rng(0).normal(size=(N, nx))
    fresh = sys.second_order_trajectory(X, U, Z)
    whole = (np.empty((N + 2, nx, nx)), np.empty((N + 2, nx, nU)), np.empty((N + 2, nU, nU)))
    tail = tuple(a[2:] for a in whole)
    given = sys.second_order_trajectory(X, U, Z, out=tail)
    assert all(np.shares_memory(g, w) and np.array_equal(g, f) for g, w, f in zip(given, whole, fresh))
    bad = ((np.empty((N, nx, nx)),), (np.empty((N, nx, nx)), np.empty((N, nx, nU + 1))),
           (np.empty((N, nx, nx), dtype=np.float32), np.empty((N, nx, nU))),
           (np.empty((nx, nx, N)).transpose(2, 0, 1), np.empty((N, nx, nU))), [np.empty((N, nx, nx)), np.empty((N, nx, nU))])
    for o in bad:
        with pytest.raises(ValueError, match="out"):
            sys.linearize_trajectory(X, U, out=o)


def test_batch_loops_solve_where_the_next_state_is_not_the_solution():
    """The batch loops take X[k+1] as step k's solution when it solves the step (the multipliers from the DEL
    residual, one evaluation) and solve by Newton from it otherwise: on the humanoid marionette (6 strings:
    the multipliers' least squares) with X[5] moved off the trajectory, steps 4 (X[5] is not its solution) and
    5 (starts off the trajectory, X[6] is not its solution) and every other step equal the per-step entry
    points, which solve from q_{k+1} = q_k, to their Newton tolerance."""
    m = library.get("humanoid_marionette")
    sys = _core.DiscreteSystem(m, 0.01)
    q0 = hm.initial_configuration(m)
    U = hm.string_walk_inputs(m, q0, 0.01, 8)
    X, _ = sys.simulate(sys.state_from_configs(q0, q0), U)
    X[5, :m.nd] += 1e-3
    A, B, Lam, Lam_x, Lam_u = sys.linearize_trajectory(X, U, constraint_forces=True)
    Z = np.random.default_rng(3).normal(size=(len(U), m.nx))
    xx, xu, uu = sys.second_order_trajectory(X, U, Z)
    assert_close(sys.constraint_forces_trajectory(X, U), Lam, 1e-12, "constraint_forces_trajectory vs linearize's")
    for k in range(len(U)):
        _, Ak, Bk, lam, lam_x, lam_u = sys.linearize(X[k], U[k], constraint_forces=True)
        for exact, check, what in ((Ak, A[k], "A"), (Bk, B[k], "B"), (lam, Lam[k], "Lam"), (lam_x, Lam_x[k], "Lam_x"),
                                   (lam_u, Lam_u[k], "Lam_u")):
            assert_close(exact, check, 1e-9, f"{what}[{k}]")
        for exact, check, what in zip(sys.second_order_contracted(X[k], U[k], Z[k]), (xx[k], xu[k], uu[k]),
                                      ("xx", "xu", "uu")):
            assert_close(exact, check, 1e-9, f"{what}[{k}]")


def test_threaded_batch_raises_the_earliest_failing_step():
    """A failure in a later thread's chunk does not hide an earlier step's: the error is the one a sequential
    loop meets first; a bad thread count is refused by name."""
    pendulum = library.get("pendulum")
    U = np.zeros((12, 1))
    X, _ = _core.DiscreteSystem(pendulum, 0.1).simulate(np.array([0.3, 0.0]), U)
    sys = _core.DiscreteSystem(pendulum, 0.1, max_iterations=2)   # too few for a momentum off by 50
    bad = X.copy()
    bad[3, 1] = bad[10, 1] = 50.0
    for threads in (1, 3):
        with pytest.raises(_core.StepError, match="step 3 failed"):
            sys.linearize_trajectory(bad, U, threads=threads)
    bad[3] = X[3]
    with pytest.raises(_core.StepError, match="step 10 failed"):
        sys.second_order_trajectory(bad, U, np.ones((12, 2)), threads=3)
    with pytest.raises(ValueError, match=r"threads must be an integer in \[1, 256\]"):
        sys.linearize_trajectory(X, U, threads=0)
