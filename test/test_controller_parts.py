"""The controller's parts, each on its own: limits, estimators, predictor and commands in flight, tolerances,
plausibility checks, gain design (the core that composes them: test_controller_node.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from marionette_control.tracking.estimation import EstimatorNoise, KalmanEstimator, LegendreEstimator, kalman_gains
from marionette_control.lq.gains import (GAIN_DESIGN, TERMINAL_STEPS, GainDesign, check_gains, design_gains,
                                              gain_delay, integral_gains)
from marionette_control.tracking.integral_action import SATURATION, AngleIntegral
from marionette_control.tracking.command_limits import CommandLimits
from marionette_control.tracking.prediction import CommandHistory, DelayPredictor
from marionette_control.lq.riccati import tv_lq, tv_lqr
from marionette_control.tracking.sample_checks import PlausibilityOptions, SampleChecks
from marionette_control.tracking.tolerances import Tolerances, check_tolerance
from marionette_control.model.limits import from_description
from marionette_control.model.library import marionette_arm as ma
from marionette_control.sim.setpoint_stream import SetpointStream

from arm_helpers import bump_trajectory

DT = 0.01


@pytest.fixture(scope="module")
def arm():
    """The arm's model file, its system, and a trajectory without gains (test/arm_helpers.py's sin² bump)."""
    desc = ma.load_description()
    ds, traj = bump_trajectory(DT, 200)
    return desc, desc.model, ds, traj


# --------------------------------------------------------------------------------------------- limits


def test_clamped_command_streams_respect_range_speed_and_acceleration(arm):
    """Any command sequence, clamped step by step from the stream's own state, stays within every limit."""
    desc, m, _, _ = arm
    lim = CommandLimits.from_limits(from_description(desc)).for_dt(DT)
    rng = np.random.default_rng(7)
    rho, v = np.array([0.3, 0.8]), np.zeros(2)
    for _ in range(2000):
        wanted = rho + rng.normal(0.0, 0.05, 2) + (rng.random(2) < 0.01) * rng.normal(0.0, 5.0, 2)  # some far off
        u = lim.clamp(wanted.copy(), rho, v)
        w = (u - rho) / DT
        assert np.all(u >= lim.lower - 1e-12) and np.all(u <= lim.upper + 1e-12)
        assert np.all(np.abs(w) <= lim.rate * (1 + 1e-9))
        inside = (u > lim.lower + 1e-9) & (u < lim.upper - 1e-9)  # the range wins over the acceleration
        assert np.all(np.abs(w - v)[inside] <= lim.acceleration[inside] * DT * (1 + 1e-9))
        rho, v = u, w


def test_a_command_within_the_limits_is_unchanged_and_the_range_wins(arm):
    desc, m, _, _ = arm
    lim = CommandLimits.from_limits(from_description(desc)).for_dt(DT)
    rho, v = np.array([0.3, 0.8]), np.array([0.5, -0.2])
    u = rho + v * DT + np.array([1e-4, -1e-4])  # accelerations of 1 m/s²
    np.testing.assert_array_equal(lim.clamp(u.copy(), rho, v), u)
    np.testing.assert_allclose(lim.clamp(np.array([5.0, 0.5]), np.array([1.0, 0.5]), np.zeros(2)), [0.9, 0.5])
    np.testing.assert_array_equal(lim.hold(np.array([-1.0, 0.5])), [-0.3, 0.5])
    assert np.array_equal(lim.acceleration, [15.0, 10.0]) and np.array_equal(lim.rate, [2.0, 1.5])
    with pytest.raises(ValueError, match="needs the time step"):
        CommandLimits.from_limits(from_description(desc)).clamp(u.copy(), rho, v)
    with pytest.raises(ValueError, match="lower limit above upper"):
        CommandLimits(np.ones(2), np.zeros(2), np.ones(2))
    with pytest.raises(ValueError, match="speed and acceleration limits must be > 0"):
        CommandLimits(np.zeros(2), np.ones(2), np.ones(2), np.array([1.0, 0.0]))


# --------------------------------------------------------------------------------------------- estimators


def test_both_estimators_are_exact_on_the_integrators_own_trajectory(arm):
    """To rounding: 1e-10 (velocities are differences of positions divided by Δt)."""
    _, m, ds, tr = arm
    legendre, kalman = LegendreEstimator(ds), KalmanEstimator(ds, tr)
    applied = lambda j: tr.U[j]  # noqa: E731
    for k in range(0, 120):
        q_prev = tr.X[k - 1, :m.nq] if k else tr.X[0, :m.nq]
        x_k = kalman.estimate(k, tr.X[k, :m.nq], q_prev, applied)
        np.testing.assert_allclose(x_k, tr.X[k], rtol=0, atol=1e-10)
        if k:
            np.testing.assert_allclose(legendre.estimate(k, tr.X[k, :m.nq], q_prev, applied), tr.X[k], atol=1e-10)
    assert legendre.estimate(5, tr.X[5, :m.nq], None, applied) is None


def test_kalman_filter_beats_the_legendre_transform_on_noisy_encoders(arm):
    """Joint encoders with σ = 1 mrad, drive encoders with 10 µm: the filter's momentum errors are a fraction
    of the transform's, its angle errors no larger than the noise, and its drive velocities (differences of
    the measured drive positions in both) the same (200 steps, seeded; the expected momentum ratio is ~0.1)."""
    _, m, ds, tr = arm
    rng = np.random.default_rng(11)
    sigma = np.array([1e-3, 1e-3, 1e-5, 1e-5])
    noisy = tr.X[:, :m.nq] + rng.normal(0.0, 1.0, (tr.N + 1, m.nq)) * sigma
    kalman, legendre = KalmanEstimator(ds, tr, EstimatorNoise(1e-3, 1e-4, 1e-5)), LegendreEstimator(ds)
    e_k, e_l = [], []
    for k in range(1, tr.N + 1):
        e_k.append(kalman.estimate(k, noisy[k], noisy[k - 1], lambda j: tr.U[j]) - tr.X[k])
        e_l.append(legendre.estimate(k, noisy[k], noisy[k - 1], None) - tr.X[k])
    rms_k, rms_l = (np.sqrt(np.mean(np.array(e)[20:] ** 2, axis=0)) for e in (e_k, e_l))
    nd, nq = m.nd, m.nq
    assert np.all(rms_k[nq:nq + nd] < 0.3 * rms_l[nq:nq + nd]), (rms_k, rms_l)
    assert np.all(rms_k[:nd] < 1.2e-3), rms_k
    np.testing.assert_allclose(rms_k[nq + nd:], rms_l[nq + nd:], rtol=0.05)


def test_kalman_gains_agree_with_the_covariance_recursion_written_out(arm):
    """L(k) against a plain transcription of the filter equations (P⁻ = APAᵀ + W, L = P⁻Cᵀ(CP⁻Cᵀ + V)⁻¹,
    C = [I_nd 0]: the dynamic configurations are measured, the drive positions are inputs)."""
    _, m, ds, tr = arm
    A, B = (np.asarray(a) for a in ds.linearize_trajectory(tr.X, tr.U))
    noise = EstimatorNoise(2e-3, 3e-4, 5e-5)
    L = kalman_gains(A, B, m.nd, m.nq, noise)
    C = np.hstack([np.eye(m.nd), np.zeros((m.nd, m.nx - m.nd))])
    G = np.zeros((m.nx, m.nd))
    G[m.nq:m.nq + m.nd] = np.eye(m.nd)
    W = lambda k: noise.momentum ** 2 * G @ G.T + noise.actuator ** 2 * B[k] @ B[k].T  # noqa: E731
    V = noise.measurement ** 2 * np.eye(m.nd)
    P = np.zeros((m.nx, m.nx))
    for _ in range(2000):  # the stationary filter at rest (A(0), B(0))
        Pm = A[0] @ P @ A[0].T + W(0)
        P = Pm - Pm @ C.T @ np.linalg.inv(C @ Pm @ C.T + V) @ C @ Pm
    Pm = A[0] @ P @ A[0].T + W(0)
    for k in range(tr.N + 1):
        Lk = Pm @ C.T @ np.linalg.inv(C @ Pm @ C.T + V)
        np.testing.assert_allclose(L[k], Lk, rtol=1e-6, atol=1e-9, err_msg=f"L({k})")
        P = (np.eye(m.nx) - Lk @ C) @ Pm
        if k < tr.N:
            Pm = A[k] @ P @ A[k].T + W(k)


def test_kalman_bridges_a_gap_by_prediction_and_restarts_after_a_long_one(arm):
    _, m, ds, tr = arm
    kalman = KalmanEstimator(ds, tr, max_gap_steps=3)
    applied = lambda j: tr.U[j]  # noqa: E731
    kalman.estimate(10, tr.X[10, :m.nq], tr.X[9, :m.nq], applied)
    np.testing.assert_allclose(kalman.estimate(13, tr.X[13, :m.nq], None, applied), tr.X[13], atol=1e-10)
    assert kalman.estimate(17, tr.X[17, :m.nq], None, applied) is None  # 4 steps: restart needs a predecessor
    np.testing.assert_allclose(kalman.estimate(17, tr.X[17, :m.nq], tr.X[16, :m.nq], applied), tr.X[17], atol=1e-10)
    with pytest.raises(ValueError, match="estimator noise 'momentum' must be a finite number > 0"):
        EstimatorNoise(momentum=0.0)


# --------------------------------------------------------------------------------------------- prediction


def test_command_history_answers_which_input_is_in_effect():
    h = CommandHistory(nU=2, nk=2, delay_steps=1, size=8)
    h.start(np.array([0.1, 0.9]))
    np.testing.assert_array_equal(h.applied(0), [0.1, 0.9])  # before the first command: the hold
    h.sent(0, np.array([0.2, 0.9]))
    h.sent(1, np.array([0.3, 0.9]))
    h.sent(4, np.array([0.6, 0.9]))  # slots 2, 3 sent nothing: the drives keep the command of slot 1
    expected = {0: 0.1, 1: 0.2, 2: 0.3, 3: 0.3, 4: 0.3, 5: 0.6, 9: 0.6}
    for j, rho in expected.items():
        assert h.applied(j)[0] == rho, j
    rho, v = h.stream_state(4, DT)  # the stream continued by the input of step 4: ρ_4 = u_3, v_4 = (u_3 − u_2)/Δt
    assert rho[0] == 0.3 and v[0] == pytest.approx(0.0)  # the same command over steps 2 and 3: standing still
    rho, v = h.stream_state(2, DT)
    assert rho[0] == 0.2 and v[0] == pytest.approx(10.0)
    with pytest.raises(ValueError, match="command for slot 3 after one for slot 4"):
        h.sent(3, np.zeros(2))
    assert h.last_slot == 4 and h.last[0] == 0.6


def test_a_command_that_carries_points_is_in_effect_as_the_stand_ins_drives_follow_it():
    """Joint-trajectory commands (tracking.lookahead) with ticks that send nothing: the input the history says is in
    effect over every step is the setpoint the stand-in's independent rule (sim.setpoint_stream) gives the drives —
    the next points of the last command over the missed steps, its last point held past them; a forward position
    command (no points) is held."""
    rng = np.random.default_rng(7)
    d, nu, nk = 1, 1, 2
    h = CommandHistory(nU=nu + nk, nk=nk, delay_steps=d, size=32)
    h.start(np.zeros(nu + nk))
    stream = SetpointStream(nk)
    for s in [0, 1, 2, 5, 6, 7, 15, 16, 19, 20, 22]:   # 3–4, 8–14, 17–18 and 21 send nothing
        u = rng.normal(size=nu + nk)
        points = rng.normal(size=(int(rng.integers(0, 6)), nu + nk))   # 0: a forward position command
        h.sent(s, u)
        h.carries(points)
        rows = np.vstack([u, points])[:, nu:]
        stream.receive(s + d + np.arange(len(rows)), rows, arrival=s + d)
    for j in range(d, 30):
        np.testing.assert_array_equal(h.applied(j)[nu:], stream.setpoint(j), err_msg=f"step {j}")
    h.carries(np.zeros((0, nu + nk)))   # detached: the last command held
    np.testing.assert_array_equal(h.applied(29), h.last)
    with pytest.raises(ValueError, match=r"command points.*shape"):
        h.carries(np.zeros((2, nu)))
    with pytest.raises(ValueError, match="without a command"):
        CommandHistory(nU=3, nk=2, delay_steps=1).carries(np.zeros((1, 3)))


def test_predictor_steps_the_model_through_the_commands_in_flight(arm):
    _, m, ds, tr = arm
    limits = CommandLimits.unlimited(m.nU, m.nk).for_dt(DT)
    for d in (0, 1, 3):
        h = CommandHistory(m.nU, m.nk, d)
        h.start(tr.X[0, m.nd:m.nq].copy())
        for s in range(40):
            h.sent(s, tr.U[s + d])  # what a delay-compensating controller sends at slot s
        np.testing.assert_allclose(DelayPredictor(ds, d, limits).predict(40, tr.X[40], h), tr.X[40 + d], atol=1e-10)
    # a command beyond what the drives can do in a step: they are predicted as far as their limits take them
    slow = CommandLimits(np.full(2, -np.inf), np.full(2, np.inf), np.full(2, 0.5), np.full(2, 1.0)).for_dt(DT)
    h = CommandHistory(m.nU, m.nk, 1)
    h.start(tr.X[40, m.nd:m.nq].copy())
    h.sent(39, tr.X[40, m.nd:m.nq] + [0.05, -0.05])
    x = DelayPredictor(ds, 1, slow).predict(40, tr.X[40], h)
    rho, v = tr.X[40, m.nd:m.nq], tr.X[40, m.nq + m.nd:]
    np.testing.assert_allclose(x[m.nd:m.nq], rho + v * DT + np.sign([0.05, -0.05]) * 1.0 * DT ** 2, atol=1e-15)


# --------------------------------------------------------------------------------------------- tolerances


def test_tolerance_checks_are_per_configuration_and_zero_means_unchecked():
    names = ["a", "b", "c"]
    tol = np.array([0.1, 0.0, 0.2])
    assert check_tolerance(np.array([0.1, 5.0, -0.2]), tol, names) is None  # at the bound is within
    v = check_tolerance(np.array([0.05, 0.0, -0.5]), tol, names)
    assert (v.index, v.name, v.error, v.tolerance) == (2, "c", -0.5, 0.2)
    v = check_tolerance(np.array([0.3, 0.0, -0.5]), tol, names)  # 3x beyond its tolerance beats 2.5x
    assert v.name == "a" and "a is +0.3 from the start (tolerance 0.1" in v.describe("start")
    assert check_tolerance(np.array([np.nan, 0.0, 0.0]), tol, names).name == "a"
    t = Tolerances(np.zeros(3), tol, np.zeros(3), 1.0, names)
    assert t.check("path", np.array([0.0, 9.0, 0.0])) is None and t.check("goal", np.ones(3)) is None
    assert t.check("start", np.array([0.0, 9.0, 0.0])) is None and t.check("path", np.array([0.2, 0, 0])).name == "a"
    with pytest.raises(ValueError, match="path tolerance of b must be finite and >= 0"):
        Tolerances(np.zeros(3), np.array([0.1, -1.0, 0.0]), np.zeros(3), 1.0, names)
    with pytest.raises(ValueError, match=r"goal tolerances have shape \(2,\), expected \(3,\)"):
        Tolerances(np.zeros(3), np.zeros(3), np.zeros(2), 1.0, names)


# --------------------------------------------------------------------------------------------- plausibility


def test_plausibility_limits_come_from_the_urdf_and_the_actuators(arm):
    desc, m, _, _ = arm
    lower, upper, vmax = from_description(desc).configuration_limits()
    np.testing.assert_array_equal(lower, [-0.5, -0.2, -0.3, 0.15])
    np.testing.assert_array_equal(upper, [2.6, 2.6, 0.9, 1.1])
    np.testing.assert_array_equal(vmax, [8.0, 8.0, 2.0, 1.5])


def test_plausibility_checks_each_kind(arm):
    desc, m, _, tr = arm
    checks = SampleChecks(m, from_description(desc), PlausibilityOptions())
    q = tr.X[50, :m.nq]
    assert checks.check(q, tr.X[49, :m.nq], DT) is None
    assert checks.check(q + [0.0, 2.7, 0, 0], None, DT)[0] == "out_of_limits"  # elbow beyond 2.6 + 0.05
    kind, message = checks.check(q + [1000.0, 0, 0, 0], q, DT)
    assert kind == "out_of_limits" and "shoulder = 1000" in message
    kind, message = checks.check(q + [0.19, 0, 0, 0], q, DT)
    assert kind == "implausible_jump" and "shoulder moved +0.19" in message and "at most 0.18" in message
    assert checks.check(q + [0.17, 0, 0, 0], q, DT)[0] == "chain_inconsistent"  # within reach, off the string
    assert checks.check(q + [0.19, 0, 0, 0], q, 1.0)[0] == "chain_inconsistent"  # a second later it could be there
    h, Dh = m.constraints(q + [0, 0, 0, 0.009])
    assert abs(h[0]) / np.linalg.norm(Dh) < 0.01 and checks.check(q + [0, 0, 0, 0.009], q, DT) is None
    kind, message = checks.check(q + [0, 0, 0, 0.011], q, DT)
    assert kind == "chain_inconsistent" and "'string'" in message
    with pytest.raises(ValueError, match="'velocity_factor' must be finite and > 0"):
        PlausibilityOptions(velocity_factor=0.0)


# --------------------------------------------------------------------------------------------- gains


def test_designed_gains_are_the_lqr_of_the_stated_weights_and_carry_their_record(arm):
    _, m, ds, tr = arm
    design = GainDesign(dynamic_configuration=50.0, drive_acceleration=0.0, angle_integral=0.0, delay_steps=2)
    gains = design_gains(ds, tr.X, tr.U, design)
    Q, R = design.weights(m)
    A, B = ds.linearize_trajectory(tr.X, tr.U)
    np.testing.assert_allclose(gains.K, tv_lqr(A, B, np.diag(Q), np.diag(R), np.diag(Q)).K, rtol=1e-12, atol=1e-12)
    traj = gains.attach(tr)
    assert traj.info[GAIN_DESIGN]["delay_steps"] == 2 and traj.info[GAIN_DESIGN]["state_weights"][0] == 50.0
    assert gain_delay(traj) == 2 and check_gains(traj, 2) is None
    with pytest.raises(ValueError, match="designed for a command delay of 2 step.*compensates 1"):
        check_gains(traj, 1)
    assert "no design record" in check_gains(tr, 1) and gain_delay(tr) is None
    for bad, key, message in (({"input": 0.0}, "input", "gain design weight 'input' must be > 0"),
                              ({"momentum": float("nan")}, "momentum", "gain design weight 'momentum' must be finite"),
                              ({"drive_acceleration": -1e-4}, "drive_acceleration", "must be >= 0"),
                              ({"angle_integral": -1.0}, "angle_integral", "must be >= 0"),
                              ({"dynamic_configuration": "heavy"}, "dynamic_configuration", "must be a number"),
                              ({"delay_steps": -1}, "delay_steps", "delay_steps must be an integer >= 0"),
                              ({"delay_steps": 1.5}, "delay_steps", "delay_steps must be an integer >= 0")):
        with pytest.raises(ValueError, match=message) as e:
            GainDesign(**bad)
        assert e.value.key == f"tracking_gains.{key}"    # the front ends' key: spec section, node parameter


def test_the_acceleration_weight_is_the_lqr_cost_of_the_drives_acceleration(arm):
    """The gains with the acceleration term equal the LQR of the system augmented with the previous kinematic
    configuration (there the acceleration is a linear function of state and input) — an independent form."""
    _, m, ds, tr = arm
    design = GainDesign(drive_acceleration=1e-4, angle_integral=0.0, delay_steps=1)
    K = design_gains(ds, tr.X, tr.U, design).K
    A, B = (np.asarray(a) for a in ds.linearize_trajectory(tr.X, tr.U))
    nx, nk, nd, nq = m.nx, m.nk, m.nd, m.nq
    Q, R = design.weights(m)
    # z = [x; ρ_{k−1}]: δa_k = (δu − 2δρ_k + δρ_{k−1})/Δt² (δv_k = (δρ_k − δρ_{k−1})/Δt is then redundant but kept)
    N = tr.N
    Az = np.zeros((N, nx + nk, nx + nk))
    Bz = np.zeros((N, nx + nk, m.nU))
    Az[:, :nx, :nx], Bz[:, :nx] = A, B
    Az[:, nx:, nd:nq] = np.eye(nk)
    Mz = np.zeros((nk, nx + nk))
    Mz[:, nd:nq], Mz[:, nx:] = -2 * np.eye(nk) / DT ** 2, np.eye(nk) / DT ** 2
    Mu = np.eye(nk) / DT ** 2
    w = design.drive_acceleration
    Qz = np.zeros((nx + nk, nx + nk))
    Qz[:nx, :nx] = np.diag(Q)
    Sz = w * Mz.T @ Mu
    Kz = tv_lq(Az, Bz, Qz + w * Mz.T @ Mz, Sz, np.diag(R) + w * Mu.T @ Mu, None, None,
               np.pad(np.diag(Q), ((0, nk), (0, nk))), None).K
    # on consistent states (δv = (δρ − δρ_prev)/Δt) both laws give the same input
    rng = np.random.default_rng(2)
    for k in (0, 60, 150):
        dx = 1e-3 * rng.standard_normal(nx)
        drho_prev = dx[nd:nq] - DT * dx[nq + nd:]
        np.testing.assert_allclose(K[k] @ dx, Kz[k] @ np.r_[dx, drho_prev], rtol=1e-6, atol=1e-9)


# --------------------------------------------------------------------------------------------- integral action


def test_integral_gains_give_the_optimal_inputs_of_the_augmented_problem(arm):
    """K and K_z of the LQI design reproduce the minimiser of the augmented LQ problem (x with the angle error's
    integral z, the acceleration cross term, the stationary terminal cost-to-go) solved as one dense least-squares
    problem over all inputs at once — an independent form of the Riccati recursion's answer — and do not fade out
    over the last steps (the terminal cost-to-go is stationary)."""
    _, m, ds, tr = arm
    n_steps = 40
    X, U = tr.X[:n_steps + 1], tr.U[:n_steps]
    design = GainDesign(drive_acceleration=1e-3, angle_integral=1e6)
    gains = design_gains(ds, X, U, design)
    assert gains.K.shape == (n_steps, m.nU, m.nx) and gains.K_z.shape == (n_steps, m.nU, m.nd)
    A, B = (np.asarray(a) for a in ds.linearize_trajectory(X, U))
    nx, nd, nU = m.nx, m.nd, m.nU
    n = nx + nd
    Aa = [np.block([[A[k], np.zeros((nx, nd))], [DT * np.eye(nd, nx), np.eye(nd)]]) for k in range(n_steps)]
    Ba = [np.vstack([B[k], np.zeros((nd, nU))]) for k in range(n_steps)]
    Q, R = design.weights(m)
    Mx = np.zeros((m.nk, nx))
    Mx[:, m.nd:m.nq], Mx[:, m.nq + m.nd:] = -np.eye(m.nk) / DT ** 2, -np.eye(m.nk) / DT
    Mu = np.zeros((m.nk, nU))
    Mu[:, m.nu:] = np.eye(m.nk) / DT ** 2
    # stage cost |W ξ_k|² + |Wu u_k|² + w_a |Mx δx_k + Mu u_k|², terminal |Wf ξ_N|²: stack the residuals
    rng = np.random.default_rng(4)
    xi0 = np.r_[1e-3 * rng.standard_normal(nx), 1e-4 * rng.standard_normal(nd)]
    Phi, Gam = [np.eye(n)], [np.zeros((n, nU * n_steps))]  # ξ_k = Phi_k ξ_0 + Gam_k u
    for k in range(n_steps):
        G = Aa[k] @ Gam[-1]
        G[:, k * nU:(k + 1) * nU] += Ba[k]
        Phi.append(Aa[k] @ Phi[-1])
        Gam.append(G)
    W = np.sqrt(np.r_[Q, np.full(nd, design.angle_integral)])
    rows, rhs = [], []
    for k in range(n_steps):
        E = np.zeros((nU, nU * n_steps))
        E[:, k * nU:(k + 1) * nU] = np.eye(nU)
        for Mlin, Mu_k in ((W[:, None] * np.eye(n), np.zeros((n, nU))),
                           (np.sqrt(design.drive_acceleration) * np.hstack([Mx, np.zeros((m.nk, nd))]),
                            np.sqrt(design.drive_acceleration) * Mu)):
            rows.append(Mlin @ Gam[k] + Mu_k @ E)
            rhs.append(-Mlin @ Phi[k] @ xi0)
        rows.append(np.sqrt(R)[:, None] * E)
        rhs.append(np.zeros(nU))
    # terminal: the stationary cost-to-go of the last step's dynamics (the Riccati recursion written out, from
    # the stage weights as the terminal weights, over gains.TERMINAL_STEPS steps)
    Qs = np.diag(W ** 2)
    Qs[:nx, :nx] += design.drive_acceleration * Mx.T @ Mx
    Ss = np.zeros((n, nU))
    Ss[:nx] = design.drive_acceleration * Mx.T @ Mu
    Rs = np.diag(R) + design.drive_acceleration * Mu.T @ Mu
    P, Af, Bf = np.diag(W ** 2), Aa[-1], Ba[-1]
    for _ in range(TERMINAL_STEPS):
        G = Bf.T @ P @ Af + Ss.T
        P = Qs + Af.T @ P @ Af - G.T @ np.linalg.solve(Rs + Bf.T @ P @ Bf, G)
        P = 0.5 * (P + P.T)
    Lf = np.linalg.cholesky(P).T  # |Lf ξ|² = ξᵀ P ξ
    rows.append(Lf @ Gam[-1])
    rhs.append(-Lf @ Phi[-1] @ xi0)
    u_opt = np.linalg.lstsq(np.vstack(rows), np.concatenate(rhs), rcond=None)[0].reshape(n_steps, nU)
    xi = xi0.copy()
    for k in range(n_steps):
        u = -gains.K[k] @ xi[:nx] - gains.K_z[k] @ xi[nx:]
        np.testing.assert_allclose(u, u_opt[k], rtol=1e-6, atol=1e-9 * np.max(np.abs(u_opt)))
        xi = Aa[k] @ xi + Ba[k] @ u
    last = design_gains(ds, tr.X, tr.U, design)  # the whole bump: the gains at its end are those before it
    size = np.abs(last.K_z).max(axis=(1, 2))
    assert size[-1] > 0.5 * size[-20:].mean()  # with the stage weights as terminal weights: 0 at the last step
    # the integral changes K too: designed together, not added to the gains without it
    without = design_gains(ds, X, U, GainDesign(drive_acceleration=1e-3, angle_integral=0.0))
    assert without.K_z is None and not np.allclose(without.K, gains.K, rtol=1e-3)


def test_integral_gains_are_recomputed_from_the_record_and_must_reproduce_its_gains(arm):
    _, m, ds, tr = arm
    traj = design_gains(ds, tr.X, tr.U, GainDesign(angle_integral=2e5)).attach(tr)
    assert traj.info[GAIN_DESIGN]["angle_integral"] == 2e5
    np.testing.assert_array_equal(integral_gains(ds, traj), design_gains(ds, tr.X, tr.U,
                                                                        GainDesign(angle_integral=2e5)).K_z)
    assert integral_gains(ds, design_gains(ds, tr.X, tr.U, GainDesign(angle_integral=0.0)).attach(tr)) is None
    assert integral_gains(ds, tr) is None  # no record: the gains are used as they are, without integral
    # a record from before integral action (no angle_integral) describes gains designed without it
    old = dict(design_gains(ds, tr.X, tr.U, GainDesign(angle_integral=0.0)).attach(tr).info[GAIN_DESIGN])
    del old["angle_integral"]
    legacy = dataclasses.replace(traj, info={GAIN_DESIGN: old})
    assert GainDesign.of(legacy).angle_integral == 0.0 and integral_gains(ds, legacy) is None
    tampered = dataclasses.replace(traj, K=traj.K * 1.01)
    with pytest.raises(ValueError, match="not those of their design record"):
        integral_gains(ds, tampered)


def test_weights_by_joint_weigh_each_joint_and_travel_in_the_record(arm, tmp_path):
    """A weight given by joint name is that joint's diagonal entry (angle and integral); the same value for every
    joint by name is the scalar design; the record reproduces the gains after a save and load; a mapping that does
    not name the model's dynamic configurations, or a bad weight in it, is refused with its key."""
    _, m, ds, tr = arm
    joints = m.config_names[:m.nd]
    same = {n: 2e3 for n in joints}
    uniform = design_gains(ds, tr.X, tr.U, GainDesign(dynamic_configuration=2e3, angle_integral=1e6))
    by_name = design_gains(ds, tr.X, tr.U, GainDesign(dynamic_configuration=same,
                                                      angle_integral={n: 1e6 for n in joints}))
    np.testing.assert_array_equal(by_name.K, uniform.K)
    np.testing.assert_array_equal(by_name.K_z, uniform.K_z)
    design = GainDesign(dynamic_configuration={joints[0]: 5e3, joints[1]: 1e3},
                        angle_integral={joints[0]: 3e6, joints[1]: 1e6})
    Q, _ = design.weights(m)
    assert Q[:m.nd].tolist() == [5e3, 1e3] and design.per_joint(m, "angle_integral").tolist() == [3e6, 1e6]
    gains = design_gains(ds, tr.X, tr.U, design)
    assert not np.allclose(gains.K, uniform.K)
    back = type(tr).load(gains.attach(tr).save(tmp_path / "t.npz"), m)
    assert GainDesign.of(back) == design
    np.testing.assert_allclose(integral_gains(ds, back), gains.K_z, rtol=1e-12, atol=0)
    with pytest.raises(ValueError, match=r"must name the model's dynamic configurations \['shoulder', 'elbow'\]") as e:
        design_gains(ds, tr.X, tr.U, GainDesign(dynamic_configuration={"shoulder": 1e3}))
    assert e.value.key == "tracking_gains.dynamic_configuration"
    for bad, key, message in (({"angle_integral": {"elbow": -1.0}}, "angle_integral.elbow", "must be >= 0"),
                              ({"dynamic_configuration": {}}, "dynamic_configuration", "by joint must map"),
                              ({"dynamic_configuration": {1: 2.0}}, "dynamic_configuration", "by joint must map")):
        with pytest.raises(ValueError, match=message) as e:
            GainDesign(**bad)
        assert e.value.key == f"tracking_gains.{key}"


def test_the_integral_integrates_measured_angle_errors_and_acts_through_its_gains():
    K_z = np.arange(3 * 2 * 2, dtype=float).reshape(3, 2, 2)  # N = 3, nU = 2 (both kinematic), nd = 2
    part = AngleIntegral(K_z, 0.01, nk=2, hand_over=0.02)
    q_ref = np.array([0.5, -0.2, 0.3, 0.9])
    for k in range(3):
        part.update(k, q_ref + np.array([1e-3, -2e-3, 5.0, 5.0]), q_ref, k + 1)  # the drives' entries are not integrated
    np.testing.assert_allclose(part.z, [3e-5, -6e-5], rtol=1e-12)
    u = np.ones(2)
    part.apply(1, u, None)
    np.testing.assert_allclose(u, 1.0 - K_z[1] @ part.z, rtol=1e-12)
    # past the end: from the last command sent to the law's hold in hand_over / dt = 2 steps, then the hold
    last, hold = np.array([0.2, 0.7]), np.array([0.3, 0.9])
    for j, expected in ((3, 0.5 * (last + hold)), (4, hold), (5, hold)):
        u = hold.copy()
        part.apply(j, u, last if j == 3 else u + 1.0)  # only the first command past the end is handed over from
        np.testing.assert_allclose(u, expected, rtol=1e-12)
    part.update(4, q_ref + 1.0, q_ref, 5)  # past N: the integral stays
    np.testing.assert_allclose(part.z, [3e-5, -6e-5], rtol=1e-12)
    part.reset()
    assert not part.z.any()
    u = hold.copy()
    part.apply(3, u, last)  # a new run hands over from its own last command
    np.testing.assert_allclose(u, 0.5 * (last + hold), rtol=1e-12)
    with pytest.raises(ValueError, match=r"shape \(N, nU, nd\)"):
        AngleIntegral(np.zeros((3, 2)), 0.01, 2)


def test_the_integral_is_held_while_it_would_push_into_a_saturation():
    """Anti-windup (integral_action): after a command the limits cut by more than SATURATION, a tick's error is left
    out when its term −K_z(j) Δz would push the command further along the cut, and integrated when it would relieve
    it; a command sent as the law asked (rounding aside) holds nothing; a run's start clears the cut, a switch's
    carry-over keeps it."""
    K_z = np.zeros((3, 2, 2))
    K_z[:, 0, 0] = K_z[:, 1, 1] = 100.0  # the carriage answers the shoulder's integral, the winch the elbow's
    part = AngleIntegral(K_z, 0.01, nk=2)
    q_ref, u_law = np.zeros(4), np.array([0.40, 0.60])
    part.note_command(u_law, u_law - np.array([0.0, 1e-4]))  # the clamp took 0.1 mm off the winch's command
    np.testing.assert_allclose(part.cut, [0.0, 1e-4], rtol=1e-9)
    part.update(0, np.array([0.0, -2e-3, 0.0, 0.0]), q_ref, 1)  # −K_z Δz = +2e-3 on the winch: further into the cut
    assert part.held and not part.z.any()
    other = AngleIntegral(K_z, 0.01, nk=2)
    other.carry_over(part)
    np.testing.assert_array_equal(other.cut, part.cut)
    part.update(1, np.array([1e-3, 2e-3, 0.0, 0.0]), q_ref, 2)  # back out of it: integrated
    assert not part.held
    np.testing.assert_allclose(part.z, [1e-5, 2e-5], rtol=1e-12)
    part.note_command(u_law, u_law + 1e-13)  # the clamp's rounding of ρ + (u − ρ): no saturation
    assert not part.cut.any()
    part.update(2, np.array([0.0, -2e-3, 0.0, 0.0]), q_ref, 2)
    assert not part.held
    np.testing.assert_allclose(part.z, [1e-5, 0.0], atol=1e-18)
    part.note_command(u_law, u_law - 2 * SATURATION)
    part.reset()
    assert not part.cut.any() and not part.z.any()


def test_integral_action_removes_the_plant_models_offset_and_leaves_a_perfect_arm_exact():
    """On the realistic plant (hook, masses, damping off the model) the state feedback on the nominal estimate
    leaves the true angles off the trajectory on average; the integral of the measured angle errors removes most of
    that mean on this 2 s motion (asserted: the largest joint's < 1/2 of it; the largest joint's RMS smaller — the
    elbow's alone is not: 2.50 mrad with the integral against 2.30 without, 2.50 against 2.55 with the filter's
    previous drive-encoder noise of 1e-5 m, issue 24). On the
    perfect arm (the model, one period of command delay) the closed loop is exact with the integral as without it
    (after its first step, which moves before the first command acts)."""
    from marionette_control.tracking.controller import ControllerOptions
    from marionette_control.sim.offline_loop import run_loop
    from marionette_control.sim.profile import HardwareProfile

    ds, tr = bump_trajectory(DT, 200)
    means, rms = {}, {}
    for wi in (0.0, GainDesign().angle_integral):
        traj = design_gains(ds, tr.X, tr.U, GainDesign(angle_integral=wi)).attach(tr)
        r = run_loop(traj, HardwareProfile.named("realistic"), ControllerOptions())
        assert not r.aborted
        e = r.angle_errors()
        means[wi], rms[wi] = np.max(np.abs(e.mean(axis=0))), np.sqrt(np.mean(e ** 2, axis=0))
        if wi:  # past the end the hand-over keeps the string taut
            assert r.tension[r.k > r.N].min() > 0.5, r.tension[r.k > r.N].min()
        perfect = run_loop(traj, HardwareProfile.named("perfect", command_delay_steps=1), ControllerOptions())
        # the first step moves before the first command acts (one period late): 0.2 mrad, which the loop then removes
        assert np.max(np.abs(perfect.angle_errors())) < 3e-4 and np.max(np.abs(perfect.angle_errors()[100:])) < 1e-5
    wi = GainDesign().angle_integral
    assert means[wi] < means[0.0] / 2 and rms[wi].max() < rms[0.0].max(), (means, rms)
