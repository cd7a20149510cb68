"""The DEL equations of a whole configuration trajectory (``DiscreteSystem.del_residual``, ``del_hessian``).

These are the equality constraints of direct transcription (seed 002 (3.6), docs/dmocc.md). Checked:

1. Consistency with the integrator: along a simulated trajectory with its multipliers the
   residuals vanish to the Newton tolerance and P[k] is the simulated momentum p_{k+1} (the
   integrator solves exactly these equations, one step at a time).
2. The Jacobian blocks J (w.r.t. q_{k-1}, q_k, q_{k+1}, u_{k-1}, u_k, lambda_k) and JP (w.r.t. q_k,
   q_{k+1}, u_k) against central differences of the residuals, on random constrained trees with
   kinematic configurations under both forcing rules (``random_trees.systems()``; the u_{k-1} blocks,
   through f+, vanish under the thesis rule), the humanoid marionette (40 configurations, 6
   strings) and the marionette arm, at points off the solution too (the functions are closed-form,
   no Newton solve inside: 5-point differences at eps = 1e-4 have truncation ~1e-13 here,
   tolerance 1e-8 relative).
3. The Hessian of Y.R + Z.P, assembled from the interval blocks, against central differences
   of the assembled gradient (Y.J + Z.JP), symmetric; linear in (Y, Z).
4. Bad arguments get specific errors.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from marionette_control import _core
from marionette_control.model import library
from marionette_control.model.library import humanoid_marionette as hm
from random_trees import assert_close, central_fd, systems

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
FD_RTOL = 1e-8


def split(model, X, U):
    """(p0 (nd,), Q (N+1, nq), Uf (N, nu)) of a state trajectory X (N+1, nx), U (N, nU)."""
    return X[0, model.nq:model.nq + model.nd], X[:, :model.nq], U[:, :model.nu]


def assembled_gradient(model, J, JP, Y, Z):
    """(gQ (N+1, nq), gU (N, nu), gL (N, m)): the gradient of sum Y.R + Z.P from the blocks (reference loop)."""
    n, nu = model.nq, model.nu
    N = J.shape[0]
    gQ, gU, gL = np.zeros((N + 1, n)), np.zeros((N, nu)), np.zeros((N, model.nc))
    for k in range(N):
        g = Y[k] @ J[k]
        if k > 0:
            gQ[k - 1] += g[:n]
            gU[k - 1] += g[3 * n:3 * n + nu]
        gQ[k] += g[n:2 * n]
        gQ[k + 1] += g[2 * n:3 * n]
        gU[k] += g[3 * n + nu:3 * n + 2 * nu]
        gL[k] += g[3 * n + 2 * nu:]
        gp = Z[k] @ JP[k]
        gQ[k] += gp[:n]
        gQ[k + 1] += gp[n:2 * n]
        gU[k] += gp[2 * n:]
    return gQ, gU, gL


def assembled_hessian(model, H):
    """The full Hessian over v = (Q flat, Uf flat, Lam flat) from the interval blocks (reference loop)."""
    n, nu, m = model.nq, model.nu, model.nc
    N = H.shape[0]
    size = (N + 1) * n + N * (nu + m)
    out = np.zeros((size, size))
    for j in range(N):
        idx = np.r_[j * n:(j + 2) * n,
                    (N + 1) * n + j * nu + np.arange(nu),
                    (N + 1) * n + N * nu + j * m + np.arange(m)].astype(int)
        out[np.ix_(idx, idx)] += H[j]
    return out


def check_del_derivatives(sys, p0, Q, Uf, Lam, rng):
    model = sys.model
    n, nu, m = model.nq, model.nu, model.nc
    N = Q.shape[0] - 1
    R, P, J, JP = sys.del_residual(p0, Q, Uf, Lam, jacobian=True)
    R0, P0 = sys.del_residual(p0, Q, Uf, Lam)
    np.testing.assert_array_equal(R, R0)
    np.testing.assert_array_equal(P, P0)
    assert J.shape == (N, model.nd + m, 3 * n + 2 * nu + m) and JP.shape == (N, model.nd, 2 * n + nu)
    assert np.all(J[0, :, :n] == 0.0) and np.all(J[0, :, 3 * n:3 * n + nu] == 0.0), \
        "node 0 does not depend on a configuration or input before q_0"
    assert np.all(J[:, model.nd:, :2 * n] == 0.0) and np.all(J[:, model.nd:, 3 * n:] == 0.0), \
        "the h rows depend on q_{k+1} only"
    if model.forcing == "thesis":
        assert np.all(J[:, :, 3 * n:3 * n + nu] == 0.0) and np.all(JP[:, :, 2 * n:] == 0.0), \
            "f+ = 0: the momenta do not depend on the inputs"

    # Each block against central differences of R and P in its own variables.
    for k in range(N):
        def rk(v, slot):
            Qv, Uv, Lv = Q.copy(), Uf.copy(), Lam.copy()
            if slot < 3:
                Qv[k - 1 + slot] = v
            elif slot < 5:
                Uv[k - 4 + slot] = v
            else:
                Lv[k] = v
            return sys.del_residual(p0, Qv, Uv, Lv)[0][k]

        points = [Q[k - 1] if k > 0 else None, Q[k], Q[k + 1], Uf[k - 1] if k > 0 else None, Uf[k], Lam[k]]
        cols = np.cumsum([0, n, n, n, nu, nu, m])
        for slot, v in enumerate(points):
            if v is None:
                continue
            assert_close(J[k][:, cols[slot]:cols[slot + 1]], central_fd(lambda vv: rk(vv, slot), v, 1e-4, 5),
                         FD_RTOL, f"dR[{k}]/d{['q_k-1', 'q_k', 'q_k+1', 'u_k-1', 'u_k', 'lambda_k'][slot]}")

        def pk(v, slot):
            Qv, Uv = Q.copy(), Uf.copy()
            if slot < 2:
                Qv[k + slot] = v
            else:
                Uv[k] = v
            return sys.del_residual(p0, Qv, Uv, Lam)[1][k]

        cols = np.cumsum([0, n, n, nu])
        for slot, v in enumerate([Q[k], Q[k + 1], Uf[k]]):
            assert_close(JP[k][:, cols[slot]:cols[slot + 1]], central_fd(lambda vv: pk(vv, slot), v, 1e-4, 5),
                         FD_RTOL, f"dP[{k}]/d{['q_k', 'q_k+1', 'u_k'][slot]}")

    # The Hessian of Y.R + Z.P against differences of the assembled gradient.
    Y = rng.normal(size=R.shape)
    Z = rng.normal(size=P.shape)
    H = sys.del_hessian(Q, Uf, Lam, Y, Z)
    assert H.shape == (N, 2 * n + nu + m, 2 * n + nu + m)
    full = assembled_hessian(model, H)
    sizes = ((N + 1) * n, N * nu, N * m)

    def unpack(v):
        a, b = sizes[0], sizes[0] + sizes[1]
        return v[:a].reshape(N + 1, n), v[a:b].reshape(N, nu), v[b:].reshape(N, m)

    def gradient(v):
        Qv, Uv, Lv = unpack(v)
        _, _, Jv, JPv = sys.del_residual(p0, Qv, Uv, Lv, jacobian=True)
        return np.concatenate([g.ravel() for g in assembled_gradient(model, Jv, JPv, Y, Z)])

    v0 = np.concatenate([Q.ravel(), Uf.ravel(), Lam.ravel()])
    assert_close(full, central_fd(gradient, v0, 1e-4, 5), 1e-7, "Hessian of Y.R + Z.P")
    assert_close(full, full.T, 1e-12, "Hessian symmetric")
    # Linear in (Y, Z); without Z the momentum weights are zero.
    HY = sys.del_hessian(Q, Uf, Lam, Y)
    HZ = sys.del_hessian(Q, Uf, Lam, np.zeros_like(Y), Z)
    assert_close(H, HY + HZ, 1e-12, "Hessian linear in (Y, Z)")


def check_consistent_with_simulation(sys, X, U, Lam):
    model = sys.model
    p0, Q, Uf = split(model, X, U)
    R, P = sys.del_residual(p0, Q, Uf, Lam)
    # Newton stops at |G| <= tolerance (max-norm of the dynamic rows and of h).
    assert np.max(np.abs(R)) <= 10 * sys.tolerance, f"residual along a simulated trajectory {np.max(np.abs(R)):.3e}"
    assert_close(P, X[1:, model.nq:model.nq + model.nd], 1e-11, "P vs the simulated momenta")


# ------------------------------------------------------------------ random constrained trees


@SETTINGS
@given(case=systems())
def test_del_residual_and_derivatives_on_random_trees(case):
    sys, model = case.sys, case.model
    X = np.vstack([case.X, sys.step(case.x, case.u)[0]])
    U = np.vstack([case.U, case.u]) if case.U.size else case.u[None]
    _, _, Lam = sys.simulate(X[0], U, constraint_forces=True)
    check_consistent_with_simulation(sys, X, U, Lam)
    # Off the solution: perturbed configurations, inputs and multipliers.
    rng = case.rng
    p0, Q, Uf = split(model, X, U)
    Q = Q + 0.05 * rng.normal(size=Q.shape)
    Uf = Uf + 0.1 * rng.normal(size=Uf.shape)
    Lam = Lam + 0.1 * rng.normal(size=Lam.shape)
    check_del_derivatives(sys, p0 + 0.1 * rng.normal(size=p0.shape), Q, Uf, Lam, rng)


# ------------------------------------------------------------------ the humanoid marionette and the arm


def test_humanoid_del_equations():
    model = library.get("humanoid_marionette")
    q0 = hm.initial_configuration(model)
    sys = _core.DiscreteSystem(model, 0.01, tolerance=1e-12)
    U = hm.string_walk_inputs(model, q0, 0.01, 30)
    X, _, Lam = sys.simulate(sys.state_from_configs(q0, q0), U, constraint_forces=True)
    assert model.nc == 6 and model.nk > 0
    check_consistent_with_simulation(sys, X, U, Lam)
    p0, Q, Uf = split(model, X, U)
    # Derivatives over the last 3 steps (the full-trajectory Hessian check is O((N n)^2)).
    check_del_derivatives(sys, X[27, model.nq:model.nq + model.nd], Q[27:], Uf[27:], Lam[27:],
                          np.random.default_rng(5))


@pytest.mark.parametrize("forcing", ["thesis", "symmetric"])
def test_marionette_arm_del_equations(forcing):
    model = library.get("marionette_arm", forcing=forcing)
    sys = _core.DiscreteSystem(model, 0.01, tolerance=1e-12)
    q = np.zeros(model.nq)
    from marionette_control.ocp.tracking_problem import consistent_configuration, rest_state

    q = consistent_configuration(model, np.r_[0.3, 0.6, np.zeros(model.nq - 2)])
    x0 = rest_state(sys, q)
    U = np.tile(np.r_[np.zeros(model.nu), q[model.nd:]], (20, 1))
    U[:, model.nu] += 0.02 * np.sin(np.linspace(0, 3, 20))
    X, _, Lam = sys.simulate(x0, U, constraint_forces=True)
    check_consistent_with_simulation(sys, X, U, Lam)
    p0, Q, Uf = split(model, X, U)
    check_del_derivatives(sys, p0, Q, Uf, Lam, np.random.default_rng(3))


# ------------------------------------------------------------------ bad arguments


def test_bad_del_arguments_get_specific_errors():
    model = library.get("pendulum")
    sys = _core.DiscreteSystem(model, 0.1)
    Q = np.zeros((4, 1))
    Uf = np.zeros((3, 1))
    Lam = np.zeros((3, 0))
    p0 = np.zeros(1)
    with pytest.raises(ValueError, match="Q needs at least 2 rows"):
        sys.del_residual(p0, Q[:1], Uf[:0], Lam[:0])
    with pytest.raises(ValueError, match=r"Uf \(force inputs"):
        sys.del_residual(p0, Q, np.zeros((2, 1)), Lam)
    with pytest.raises(ValueError, match=r"p0 \(initial momentum"):
        sys.del_residual(np.zeros(2), Q, Uf, Lam)
    bad = Q.copy()
    bad[2, 0] = np.nan
    with pytest.raises(ValueError, match="Q"):
        sys.del_residual(p0, bad, Uf, Lam)
    with pytest.raises(ValueError, match=r"Y \(covectors"):
        sys.del_hessian(Q, Uf, Lam, np.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"Z \(covectors"):
        sys.del_hessian(Q, Uf, Lam, np.zeros((3, 1)), np.zeros((2, 1)))
