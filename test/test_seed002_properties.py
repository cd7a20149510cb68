"""Seed 002's exact properties, checked for this package's constraints and coordinates.

Null-space identities (seed 002 §2–3) along simulated constrained trajectories of the marionette arm
(a string with kinematic carriage and length) and of a closed loop (physics_helpers.closed_rotor), with
this package's pairing of λ_k with Dh(q_k) and its forcing f⁻ = Δt F, f⁺ = 0 (docs/dmocc.md):

* a null-space matrix P(q_k) of G = Dh_dyn(q_k): G P = 0 with full column rank nd − m ((2.5), (3.7));
* the discrete null-space method (3.8): Pᵀ[p_k + D₁L_d(q_k, q_{k+1}) + Δt F_k] = 0 — the DEL rows without
  the constraint force lie in range(Gᵀ), so projecting them eliminates λ; and λ_k = R_dᵀ[...] with
  R_d = Gᵀ(GGᵀ)⁻¹ (3.14)–(3.15) is the core's multiplier;
* the projection (3.17) Q = I − Gᵀ(G M⁻¹ Gᵀ)⁻¹ G M⁻¹: Q Gᵀ = 0, Q² = Q, and the projected momentum
  satisfies the momentum-level constraint G M⁻¹ Q p = 0 (3.19).

Momentum maps without load (Props. 4.1, 5.2–5.7: exactly conserved when the motion is induced by shape
changes only), on a free-floating two-body system (base: x, y, z, then yaw–pitch–roll ψ, β, γ; a
forearm on a hinge driven by an internal torque; no gravity). In these coordinates the midpoint L_d is
invariant under the translations and under rotations about the world z axis (linear in x, y and a shift
of ψ), so the linear momentum and L_z are conserved exactly (to the Newton tolerance); rotations about x
or y act non-linearly on the Euler angles, so L_x, L_y are conserved only up to the integrator's O(Δt²)
error — bounded and without drift — where seed 002's director formulation conserves them exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import null_space

from marionette_control import _core
from marionette_control.model import library
from marionette_control.ocp.tracking_problem import consistent_configuration, rest_state
from marionette_control.model import SystemBuilder
from physics_helpers import ROTOR_Q0, closed_rotor, continuous_momentum, tangent_velocity


def _arm_trajectory():
    model = library.get("marionette_arm")
    system = _core.DiscreteSystem(model, 0.01, tolerance=1e-12)
    q = consistent_configuration(model, np.r_[0.3, 0.6, np.zeros(model.nq - 2)])
    N = 150
    U = np.tile(np.r_[np.zeros(model.nu), q[model.nd:]], (N, 1))
    t = np.arange(1, N + 1) * 0.01
    U[:, model.nu] += 0.05 * np.sin(3 * t)
    U[:, model.nu + 1] -= 0.03 * np.sin(2 * t)
    X, _, Lam = system.simulate(rest_state(system, q), U, constraint_forces=True)
    return model, system, X, U, Lam


def _rotor_trajectory():
    model = closed_rotor(forced=True)
    system = _core.DiscreteSystem(model, 0.01, tolerance=1e-12)
    v0 = tangent_velocity(model, ROTOR_Q0, np.array([1.0, 0.5, 0.0, -0.5]))
    x0 = np.concatenate([ROTOR_Q0, continuous_momentum(model, ROTOR_Q0, v0)])
    t = np.arange(300) * 0.01
    U = np.column_stack([0.3 * np.sin(3 * t), 0.2 * np.cos(2 * t)])
    X, _, Lam = system.simulate(x0, U, constraint_forces=True)
    return model, system, X, U, Lam


@pytest.mark.parametrize("make", [_arm_trajectory, _rotor_trajectory], ids=["marionette_arm", "closed_rotor"])
def test_null_space_identities(make):
    """Tolerances: 1e-12 for the algebraic identities (relative to |G|, |M|), 1e-9 for the projected DEL
    rows (Newton tolerance 1e-12 on rows of size ~1); non-vacuous: the unprojected rows and λ are ≥ 1e-3."""
    model, system, X, U, Lam = make()
    nq, nd, m = model.nq, model.nd, model.nc
    Q, Uf = X[:, :nq], U[:, :model.nu]
    R = system.del_residual(X[0, nq:nq + nd], Q, Uf, np.zeros_like(Lam))[0][:, :nd]   # p_k + D1Ld + dt F_k
    assert np.abs(R).max() > 1e-3 and np.abs(Lam).max() > 1e-3
    for k in range(0, Q.shape[0] - 1, 7):
        G = model.constraints(Q[k])[1][:, :nd]
        P = null_space(G)
        assert P.shape == (nd, nd - m)
        assert np.abs(G @ P).max() < 1e-12 * max(1.0, np.abs(G).max())
        assert np.abs(P.T @ R[k]).max() < 1e-9                               # (3.8): λ eliminated
        Rd = G.T @ np.linalg.inv(G @ G.T)                                      # (3.15)
        np.testing.assert_allclose(Rd.T @ R[k], Lam[k], rtol=1e-8, atol=1e-10)  # (3.14): the core's λ_k
        M = np.asarray(model.lagrangian(Q[k], np.zeros(nq))["Lvv"])[:nd, :nd]
        Mi = np.linalg.inv(M)
        Qp = np.eye(nd) - G.T @ np.linalg.inv(G @ Mi @ G.T) @ G @ Mi            # (3.17)
        scale = np.abs(Qp).max()
        assert np.abs(Qp @ G.T).max() < 1e-12 * scale * max(1.0, np.abs(G).max())
        np.testing.assert_allclose(Qp @ Qp, Qp, rtol=0, atol=1e-12 * scale ** 2)
        p = X[k, nq:nq + nd]
        assert np.abs(G @ Mi @ Qp @ p).max() < 1e-12 * max(1.0, np.abs(p).max())   # (3.19)


def _floating_two_body():
    b = SystemBuilder("floating_two_body", gravity=(0.0, 0.0, 0.0), forcing="thesis")   # seed 002's rule
    b.frame("px", "world", "tx", config="x")
    b.frame("py", "px", "ty", config="y")
    b.frame("pz", "py", "tz", config="z")
    b.frame("yaw", "pz", "rz", config="psi")
    b.frame("pitch", "yaw", "ry", config="beta")
    b.frame("base", "pitch", "rx", config="gamma", mass=3.0, inertia=(0.2, 0.3, 0.4))
    b.frame("shoulder", "base", "ty", value=0.4)
    b.frame("arm", "shoulder", "rx", config="hinge")
    b.frame("hand", "arm", "tz", value=-0.6, mass=1.0, inertia=(0.02, 0.03, 0.01))
    b.config_force("hinge", input="shape_torque")
    return b.build()


def _angular_generators(q):
    """ξ_Q (3, nq): the velocity of q under the world rotation about e_x, e_y, e_z (through the origin)."""
    x, psi, beta = q[:3], q[3], q[4]
    cz, sz, cy, sy = np.cos(psi), np.sin(psi), np.cos(beta), np.sin(beta)
    # world angular velocity of the base per (ψ̇, β̇, γ̇): e_z, Rz e_y, Rz Ry e_x
    Jw = np.column_stack([[0, 0, 1], [-sz, cz, 0], [cz * cy, sz * cy, -sy]])
    out = np.zeros((3, q.size))
    for i in range(3):
        e = np.eye(3)[i]
        out[i, :3] = np.cross(e, x)
        out[i, 3:6] = np.linalg.solve(Jw, e)
    return out


def test_momentum_maps_without_load():
    """Shape torque only, 40 s from a tumbling start at Δt = 0.005 and 0.0025 (Newton tolerance 1e-11). Linear
    momentum and L_z: |change| ≤ 5e-9 over the run (measured 4.6e-10, 9.1e-10: the Newton tolerance
    accumulated). L_x, L_y: |change| ≤ 2e-6 of |L| at Δt = 0.005 and ≈ 4× smaller at Δt/2 (second order;
    measured 1.1e-6 and 2.7e-7), and no drift: the last quarter's error at most 1.5× the first quarter's."""
    model = _floating_two_body()
    assert model.nu == 1 and model.config_names[3] == "psi"
    q0 = np.array([0.3, -0.2, 0.1, 0.2, 0.3, -0.1, 0.4])
    v0 = np.array([0.1, 0.2, -0.1, 0.8, -0.5, 0.6, 0.3])
    p0 = np.asarray(model.lagrangian(q0, v0)["Lv"])
    rel = []
    for dt, N in ((0.005, 8000), (0.0025, 16000)):
        system = _core.DiscreteSystem(model, dt, tolerance=1e-11)
        t = np.arange(N) * dt
        X, _ = system.simulate(np.r_[q0, p0], (1.5 * np.sin(2.0 * t))[:, None])
        Q, P = X[:, :7], X[:, 7:]
        linear = P[:, :3]
        L = np.array([_angular_generators(q) @ p for q, p in zip(Q, P)])
        exact = max(np.abs(linear - linear[0]).max(), np.abs(L[:, 2] - L[0, 2]).max())
        print(f"\ndt {dt}: linear momentum and L_z change at most {exact:.1e}")
        assert exact <= 5e-9
        err = np.abs(L[:, :2] - L[0, :2]).max(axis=1) / np.linalg.norm(L[0])
        assert np.ptp(Q[:, 6]) > 1.0 and np.ptp(Q[:, 3]) > 1.0          # the shape and the base moved
        quarter = N // 4
        assert err[-quarter:].max() <= 1.5 * err[:quarter].max()
        rel.append(err.max())
    print(f"\nL_x, L_y relative error: {rel[0]:.2e} (dt 0.005), {rel[1]:.2e} (dt 0.0025)")
    assert rel[0] <= 2e-6 and 3.0 < rel[0] / rel[1] < 5.0
