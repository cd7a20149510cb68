"""The integrator study (docs/integrator_study.md, ``marionette_control.study.integrators``).

The explicit schemes of seed 004 §5.2 run on ``_core.forward_dynamics``; the midpoint VI is the
core's ``DiscreteSystem``. Each test states its tolerance; "measured" quotes the value when the
test was written. The VI's own properties (energy over 10^5 steps, Noether momenta, agreement
with DOP853) are tested in test_physics.py; here they are tested beside the explicit schemes.

1. ``test_study_dynamics_match_tedrake``: the study's f on the double pendulum is Tedrake's
   manipulator form (seed 003); test_physics checks ``forward_dynamics`` itself, this checks the
   study's wrapper (configuration, zero torques, held kinematics).
2. ``test_observed_order_double_pendulum``: fitted slope of the error at T against dt within
   +-0.3 of each scheme's order.
3. ``test_verlet_velocity_and_symplecticity_control``: on the single pendulum (f independent of
   qdot, constant mass) both Störmer-Verlet variants coincide and both "symplectic" schemes keep a
   bounded energy error; on the double pendulum the same schemes lose energy.
4. ``test_energy_vi_bounded_explicit_euler_grows``: 10^4 steps of the double pendulum.
5. ``test_constraint_residual_vi_at_tolerance_explicit_drift``: the humanoid marionette.
6. ``test_stabilization_variants``: Baumgarte's term and the projection do what the module says.
7. ``test_bad_arguments``: specific errors.
"""

from __future__ import annotations

import numpy as np
import pytest

from marionette_control import _core
from marionette_control.model import library
from marionette_control.study import integrators as I
from physics_helpers import tedrake_coriolis, tedrake_gravity, tedrake_mass_matrix, tedrake_potential

VI = I.MIDPOINT_VI
EXPLICIT = list(I.SCHEMES)
DP = dict(m1=1.0, m2=1.0, l1=1.0, l2=1.0)


@pytest.fixture(scope="module")
def double_pendulum():
    return I.double_pendulum_case()


@pytest.fixture(scope="module")
def humanoid():
    return I.humanoid_case()


def energy_errors(run, dyn, E0):
    return I.energy_series(run, dyn)[1] - E0


def window_drift(err) -> float:
    w = len(err) // 10
    return float(err[-w:].mean() - err[:w].mean())


def test_study_dynamics_match_tedrake(double_pendulum):
    """At 20 random states (|q| <= pi, |qdot| <= 5), the study's acceleration equals
    M^{-1}(tau_g - C qdot) of Tedrake's closed form (m = l = 1, g = 9.8) to 1e-11 absolute, and
    its energy equals 1/2 qdot^T M qdot + U to 1e-11 (measured <= 2e-14)."""
    dyn, _, _ = double_pendulum
    rng = np.random.default_rng(3)
    for _ in range(20):
        q, v = rng.uniform(-np.pi, np.pi, 2), rng.uniform(-5.0, 5.0, 2)
        M = tedrake_mass_matrix(q, **DP)
        expected = np.linalg.solve(M, tedrake_gravity(q, g=9.8, **DP) - tedrake_coriolis(q, v, **DP) @ v)
        np.testing.assert_allclose(dyn.acceleration(q, v), expected, rtol=0, atol=1e-11)
        assert dyn.energy(q, v) == pytest.approx(0.5 * v @ M @ v + tedrake_potential(q, g=9.8, **DP), abs=1e-11)


ORDER_T, ORDER_DTS = 1.0, np.array([0.005, 0.0025, 0.00125])


@pytest.fixture(scope="module")
def dp_reference(double_pendulum):
    dyn, q0, v0 = double_pendulum
    return I.reference_solution(dyn, q0, v0, ORDER_T)[0]


@pytest.mark.parametrize("scheme", EXPLICIT + [VI])
def test_observed_order_double_pendulum(scheme, double_pendulum, dp_reference):
    """Double pendulum from rest at (2, -1) rad, error max_i |q_i(T) - q_ref,i| at T = 1 s for
    dt = 0.005, 0.0025, 0.00125 against DOP853 (rtol = atol = 1e-13: it moves by 2e-12 from
    rtol 1e-11, against a smallest error of 1.9e-10, RK4 at dt = 0.00125): the least-squares
    log-log slope is within +-0.3 of the scheme's order (1: Euler, semi-implicit Euler, half-step
    Verlet; 2: Verlet, VI; 4: RK4). Measured 0.95, 1.00, 1.95, 0.99, 4.09, 2.00 in the order of
    the parameters. Errors also decrease monotonically."""
    dyn, q0, v0 = double_pendulum
    errors = I.final_errors(scheme, dyn, q0, v0, ORDER_T, ORDER_DTS, dp_reference)
    expected = 2 if scheme == VI else I.SCHEMES[scheme].order
    slope = I.observed_order(ORDER_DTS, errors)
    print(f"{scheme}: errors {errors}, slope {slope:.3f} (expected {expected})")
    assert np.all(np.diff(errors) < 0), errors
    assert slope == pytest.approx(expected, abs=0.3)


def test_verlet_velocity_and_symplecticity_control(double_pendulum):
    """Single pendulum (seed 001, m = l = 1) from rest at 2.5 rad, dt = 0.01, 5000 steps (50 s):
    f does not depend on qdot, so the two Verlet variants give the same trajectory (to 1e-12;
    they differ only in the velocity fed to f), and semi-implicit Euler and Störmer-Verlet are the
    symplectic maps of a separable Hamiltonian: their energy error oscillates without drift,
    |window drift| <= 5% of max |E - E0| (measured 0.9% and 0.1%), while explicit Euler's
    grows (E(50 s) - E0 > 10 J).

    Double pendulum (M(q) not constant, f quadratic in qdot), dt = 0.01, 1000 steps (10 s): the
    same schemes are no longer symplectic. Verlet loses energy steadily, E(10 s) - E0 < -0.1 J
    (measured -0.49 J, 160 times its pendulum error); semi-implicit Euler's error exceeds 1 J
    (measured 6.6 J). (A short horizon: the motion is chaotic and longer runs depend on roundoff.)"""
    dyn = I.ContinuousDynamics(library.get("pendulum"))
    q0, v0 = np.array([2.5]), np.zeros(1)
    E0 = dyn.energy(q0, v0)
    a = I.integrate("stormer_verlet", dyn, q0, v0, 0.01, 5000)
    b = I.integrate("stormer_verlet_half_step", dyn, q0, v0, 0.01, 5000)
    np.testing.assert_allclose(a.q, b.q, rtol=0, atol=1e-12)
    for scheme in ("semi_implicit_euler", "stormer_verlet"):
        err = energy_errors(I.integrate(scheme, dyn, q0, v0, 0.01, 5000), dyn, E0)
        print(f"pendulum {scheme}: max |dE| {np.abs(err).max():.3e}, drift {window_drift(err):.3e}")
        assert abs(window_drift(err)) <= 0.05 * np.abs(err).max()
    assert energy_errors(I.integrate("explicit_euler", dyn, q0, v0, 0.01, 5000), dyn, E0)[-1] > 10.0

    dyn, q0, v0 = double_pendulum
    E0 = dyn.energy(q0, v0)
    sv = energy_errors(I.integrate("stormer_verlet", dyn, q0, v0, 0.01, 1000), dyn, E0)
    sie = energy_errors(I.integrate("semi_implicit_euler", dyn, q0, v0, 0.01, 1000), dyn, E0)
    print(f"double pendulum: Verlet dE(10 s) {sv[-1]:.3e}, semi-implicit Euler max |dE| {np.abs(sie).max():.3e}")
    assert sv[-1] < -0.1
    assert np.abs(sie).max() > 1.0


def test_energy_vi_bounded_explicit_euler_grows(double_pendulum):
    """Double pendulum from rest at (2, -1) rad (E0 = 2.86 J), dt = 0.01, 10^4 steps (100 s).

    VI (energy at the step midpoints, ``energy_series``): max |E - E0| <= 0.3 J (measured 0.19 J)
    and |mean(last 10%) - mean(first 10%)| <= 0.02 J (measured 1.2e-3 J): bounded, no drift.
    Explicit Euler: the energy grows by more than 20 J (the potential energy ranges over 58.8 J;
    measured: the mean of the last 10% is 101 J above E0, every sample > 85 J): the pendulum ends
    up whirling. Both counts of work are checked: N + 1 nodes, N evaluations of f."""
    dyn, q0, v0 = double_pendulum
    E0 = dyn.energy(q0, v0)
    N = 10_000
    vi = I.integrate(VI, dyn, q0, v0, 0.01, N)
    ee = I.integrate("explicit_euler", dyn, q0, v0, 0.01, N)
    assert vi.steps == ee.steps == N and ee.evaluations == N and vi.evaluations >= N
    e_vi, e_ee = energy_errors(vi, dyn, E0), energy_errors(ee, dyn, E0)
    print(f"VI: max |dE| {np.abs(e_vi).max():.3e}, drift {window_drift(e_vi):.3e}; "
          f"explicit Euler: last-10% mean {e_ee[-N // 10:].mean():.3e}, min {e_ee[-N // 10:].min():.3e}")
    assert np.abs(e_vi).max() <= 0.3
    assert abs(window_drift(e_vi)) <= 0.02
    assert e_ee[-N // 10:].min() > 20.0


def test_constraint_residual_vi_at_tolerance_explicit_drift(humanoid):
    """Humanoid marionette, strings held, no damping, kicked start (``humanoid_case``),
    dt = 0.01, 200 steps (2 s).

    VI: max_i |h_i(q_k)| <= 1e-10 (its Newton tolerance) at every node (measured 4e-15).
    Every explicit scheme drifts: max |h| over the last quarter > 100 x that tolerance and more
    than 1.5 times the first quarter's (measured: Euler 6.3e-3 / 3.3e-3, semi-implicit 5.2e-2 / 1.1e-2,
    Verlet 3.6e-3 / 3.8e-4, half-step Verlet 2.0e-2 / 3.7e-3, RK4 3.3e-8 / 7.3e-9 m^2).
    Störmer-Verlet's energy error is the work of the string forces on the drift velocity:
    |E(T) - E0 - W(T)| <= 5% of |E(T) - E0| (measured 0.7%, E(T) - E0 = 2.2e-2 J)."""
    dyn, q0, v0 = humanoid
    tolerance = 1e-10
    h_vi = I.constraint_series(I.integrate(VI, dyn, q0, v0, 0.01, 200), dyn)
    assert h_vi.max() <= tolerance, h_vi.max()
    for scheme in EXPLICIT:
        run = I.integrate(scheme, dyn, q0, v0, 0.01, 200)
        h = I.constraint_series(run, dyn)
        first, last = h[:50].max(), h[-50:].max()
        print(f"{scheme}: max |h| first quarter {first:.2e}, last quarter {last:.2e}")
        assert last > 100 * tolerance and last > 1.5 * first
        if scheme == "stormer_verlet":
            dE = energy_errors(run, dyn, dyn.energy(q0, v0))[-1]
            W = I.constraint_work(run, dyn)[-1]
            print(f"  E(T) - E0 = {dE:.3e} J, W(T) = {W:.3e} J")
            assert abs(dE - W) <= 0.05 * abs(dE)


def test_stabilization_variants(humanoid):
    """Baumgarte (alpha = 10/s): at a state off the manifold (50 semi-implicit Euler steps), the
    added acceleration d satisfies A d = -2 alpha A qdot - alpha^2 h (to 1e-9 relative) and M d lies
    in the range of A^T (its M^{-1}-orthogonal complement is < 1e-10 relative): the minimum-M-norm
    correction. Over 200 steps it keeps max |h| below a tenth of plain semi-implicit Euler's
    (measured 2.7e-3 vs 5.2e-2 m^2).

    Projection: after every step max |h| <= 1e-10 and A qdot = 0 (to 1e-12), and the velocity
    projection never adds kinetic energy (checked at the off-manifold state)."""
    dyn, q0, v0 = humanoid
    model, nd, alpha = dyn.model, dyn.nd, 10.0
    off = I.integrate("semi_implicit_euler", dyn, q0, v0, 0.01, 50)
    q, v = off.q[-1], off.v[-1]
    stab = I.ContinuousDynamics(model, rho=dyn.rho, baumgarte=alpha)
    d = stab.acceleration(q, v) - dyn.acceleration(q, v)
    h, Dh = model.constraints(dyn.configuration(q))
    A = Dh[:, :nd]
    target = -2.0 * alpha * (A @ v) - alpha**2 * h
    np.testing.assert_allclose(A @ d, target, rtol=1e-9, atol=1e-9 * np.abs(target).max())
    M = _core.mass_matrix(model, dyn.configuration(q))[:nd, :nd]
    Md = M @ d
    in_range = A.T @ np.linalg.lstsq(A.T, Md, rcond=None)[0]
    assert np.abs(Md - in_range).max() <= 1e-10 * np.abs(Md).max()

    h_plain = I.constraint_series(I.integrate("semi_implicit_euler", dyn, q0, v0, 0.01, 200), dyn).max()
    h_stab = I.constraint_series(I.integrate("semi_implicit_euler", stab, q0, v0, 0.01, 200), stab).max()
    print(f"max |h| over 2 s: plain {h_plain:.2e}, Baumgarte {h_stab:.2e}")
    assert h_stab < 0.1 * h_plain

    run = I.integrate("semi_implicit_euler", dyn, q0, v0, 0.01, 200, project=True)
    assert I.constraint_series(run, dyn).max() <= 1e-10
    for qk, vk in zip(run.q[1:], run.v[1:]):
        assert np.abs(model.constraints(dyn.configuration(qk))[1][:, :nd] @ vk).max() <= 1e-12
    qp, vp = dyn.project(q, v)
    Mp = _core.mass_matrix(model, dyn.configuration(qp))[:nd, :nd]
    assert 0.5 * vp @ Mp @ vp <= 0.5 * v @ Mp @ v


def test_bad_arguments(humanoid):
    dyn, q0, v0 = humanoid
    with pytest.raises(ValueError, match="18 kinematic configurations: give rho"):
        I.ContinuousDynamics(dyn.model)
    with pytest.raises(ValueError, match=r"rho must have shape \(18,\)"):
        I.ContinuousDynamics(dyn.model, rho=np.zeros(3))
    with pytest.raises(ValueError, match="baumgarte must be finite and >= 0"):
        I.ContinuousDynamics(dyn.model, rho=dyn.rho, baumgarte=-1.0)
    with pytest.raises(ValueError, match="no constraints to stabilize"):
        I.ContinuousDynamics(library.get("pendulum"), baumgarte=1.0)
    with pytest.raises(ValueError, match="projection needs a one-step scheme"):
        I.integrate("stormer_verlet", dyn, q0, v0, 0.01, 2, project=True)
    with pytest.raises(ValueError, match="keeps h\\(q\\) = 0 by itself"):
        I.integrate(VI, dyn, q0, v0, 0.01, 2, project=True)
    with pytest.raises(ValueError, match="does not divide"):
        I.final_errors("rk4", dyn, q0, v0, 1.0, [0.3], q0)
    with pytest.raises(KeyError, match="unknown scheme 'leapfrog'"):
        I.integrate("leapfrog", dyn, q0, v0, 0.01, 2)
