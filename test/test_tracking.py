"""Tracking controller (control layer): exact state estimate, feedback law, limits, hold, model identity."""

import numpy as np
import pytest

from marionette_control import _core, models
from marionette_control.control.optimizer import tracking_gains
from marionette_control.control.tracking import ActuatorLimits, TrackingController, open_and_closed_loop
from marionette_control.control.trajectory import Trajectory, TrajectoryError
from marionette_control.models import humanoid_marionette as hm


@pytest.fixture(scope="module")
def walk():
    m = models.get("humanoid_marionette")
    ds = _core.DiscreteSystem(m, 0.01)
    q0 = hm.initial_configuration(m)
    U = hm.string_walk_inputs(m, q0, 0.01, 200)
    X, _ = ds.simulate(ds.state_from_configs(q0, q0), U)
    K = tracking_gains(ds, X, U, Q=np.r_[np.full(m.nq, 100.0), np.ones(m.nd + m.nk)])
    return m, ds, Trajectory.for_model(m, 0.01, X, U, K=K)


def test_estimate_from_configurations_is_exact_on_the_integrators_trajectory(walk):
    m, ds, tr = walk
    ctrl = TrackingController(ds, tr)
    for k in (1, 50, 199):
        x_hat = ctrl.estimate(tr.X[k - 1, :m.nq], tr.X[k, :m.nq])
        np.testing.assert_allclose(x_hat, tr.X[k], rtol=0, atol=1e-12)


def test_measured_configuration_feedback_reproduces_the_projection(walk):
    """Closing the loop with q only (Legendre transform) equals feedback of the true state."""
    m, ds, tr = walk
    ctrl = TrackingController(ds, tr)
    q_pert = tr.X[0, :m.nq].copy()
    q_pert[m.config_index("torso_rx")] += 0.05
    for s in hm.STRINGS:  # keep the strings taut
        g = m.placements(q_pert)
        d = g[m.frame_index(f"{s}_string_hook"), :3, 3] - g[m.frame_index(f"{s}_string_control"), :3, 3]
        q_pert[m.config_index(f"{s}_string-length")] = np.linalg.norm(d)
    x0 = ds.state_from_configs(q_pert, q_pert)
    X_open, X_ref, U_ref = open_and_closed_loop(ds, tr, x0)
    x, q_prev = x0, q_pert
    for k in range(tr.N):
        u, x_hat = ctrl.command(k, q_prev, x[:m.nq]) if k else (tr.U[0] - tr.K[0] @ (x0 - tr.X[0]), x0)
        np.testing.assert_allclose(u, U_ref[k], atol=1e-8)
        q_prev = x[:m.nq]
        x = ds.step(x, u)[0]
    err_closed = np.abs(X_ref[:, :m.nd] - tr.X[:, :m.nd]).max(axis=1)
    err_open = np.abs(X_open[:, :m.nd] - tr.X[:, :m.nd]).max(axis=1)
    assert err_closed[-50:].mean() < 0.5 * err_open[-50:].mean()


def test_limits_clamp_position_and_rate(walk):
    m, ds, tr = walk
    lower = np.full(m.nU, -np.inf)
    upper = np.full(m.nU, np.inf)
    i = m.discrete_input_names.index("left_arm_string-length_next")
    lower[i], upper[i] = 0.5, 0.6
    ctrl = TrackingController(ds, tr, ActuatorLimits(lower, upper, np.full(m.nk, 0.2)))
    rho_now = tr.X[10, m.nd:m.nq]
    u = ctrl.clamp(np.r_[np.zeros(m.nu), rho_now + 1.0], rho_now)
    assert 0.5 <= u[i] <= 0.6  # the range wins even when the measured length is outside it
    others = np.arange(m.nk) != (i - m.nu)
    np.testing.assert_allclose(u[m.nu:][others], rho_now[others] + 0.2 * 0.01)


def test_holds_the_final_state_after_the_end(walk):
    m, ds, tr = walk
    ctrl = TrackingController(ds, tr)
    u, _ = ctrl.command(tr.N + 5, tr.X[-2, :m.nq], tr.X[-1, :m.nq])
    np.testing.assert_allclose(u[m.nu:], tr.X[-1, m.nd:m.nq])


def test_refuses_other_models_and_missing_gains(walk):
    m, ds, tr = walk
    other = _core.DiscreteSystem(models.get("humanoid_marionette", damping=0.3), 0.01)
    with pytest.raises(TrajectoryError, match="different version of model 'humanoid_marionette'"):
        TrackingController(other, tr)
    no_gains = Trajectory.for_model(m, 0.01, tr.X, tr.U)
    with pytest.raises(ValueError, match="no tracking gains"):
        TrackingController(ds, no_gains)
    with pytest.raises(ValueError, match="lower limit above upper"):
        ActuatorLimits(np.ones(m.nU), np.zeros(m.nU), np.ones(m.nk))
