"""The tracking law (control layer): feed-forward plus feedback, hold at the end, model identity; closing the
loop from measured configurations reproduces the projection operator's feedback."""

import numpy as np
import pytest

from marionette_control import _core
from marionette_control.model import library
from marionette_control.tracking.estimation import LegendreEstimator
from marionette_control.lq.gains import GainDesign, design_gains
from marionette_control.tracking.law import TrackingLaw, open_and_closed_loop
from marionette_control.trajectory import Trajectory, TrajectoryError
from marionette_control.model.library import humanoid_marionette as hm


@pytest.fixture(scope="module")
def walk():
    m = library.get("humanoid_marionette")
    ds = _core.DiscreteSystem(m, 0.01)
    q0 = hm.initial_configuration(m)
    U = hm.string_walk_inputs(m, q0, 0.01, 200)
    X, _ = ds.simulate(ds.state_from_configs(q0, q0), U)
    gains = design_gains(ds, X, U, GainDesign(dynamic_configuration=100.0, kinematic_configuration=100.0,
                                              drive_acceleration=0.0, angle_integral=0.0, delay_steps=0))
    return m, ds, gains.attach(Trajectory.for_model(m, 0.01, X, U))


def test_law_is_feed_forward_minus_gain_times_error(walk):
    m, ds, tr = walk
    law = TrackingLaw(m, tr)
    rng = np.random.default_rng(3)
    for j in (0, 57, tr.N - 1):
        dx = 1e-3 * rng.standard_normal(m.nx)
        np.testing.assert_allclose(law.command(j, tr.X[j] + dx), tr.U[j] - tr.K[j] @ dx, rtol=0, atol=1e-15)
        np.testing.assert_array_equal(law.command(j, tr.X[j]), tr.U[j])
    feed_forward = TrackingLaw(m, tr, feedback=False)
    np.testing.assert_array_equal(feed_forward.command(57, tr.X[57] + 0.1), tr.U[57])


def test_measured_configuration_feedback_reproduces_the_projection(walk):
    """Closing the loop with q only (Legendre transform) equals feedback of the true state."""
    m, ds, tr = walk
    law, estimator = TrackingLaw(m, tr), LegendreEstimator(ds)
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
        x_hat = estimator.estimate(k, x[:m.nq], q_prev, None) if k else x0
        u = law.command(k, x_hat)
        np.testing.assert_allclose(u, U_ref[k], atol=1e-8)
        q_prev = x[:m.nq]
        x = ds.step(x, u)[0]
    err_closed = np.abs(X_ref[:, :m.nd] - tr.X[:, :m.nd]).max(axis=1)
    err_open = np.abs(X_open[:, :m.nd] - tr.X[:, :m.nd]).max(axis=1)
    assert err_closed[-50:].mean() < 0.5 * err_open[-50:].mean()


def test_holds_the_final_state_after_the_end(walk):
    m, ds, tr = walk
    law = TrackingLaw(m, tr)
    u = law.command(tr.N + 5, tr.X[-1] + 0.01)
    np.testing.assert_allclose(u[m.nu:], tr.X[-1, m.nd:m.nq])
    np.testing.assert_array_equal(law.reference(tr.N + 5), tr.X[-1])


def test_refuses_other_models_and_missing_gains(walk):
    m, ds, tr = walk
    other = library.get("humanoid_marionette", damping=0.3)
    with pytest.raises(TrajectoryError, match="different version of model 'humanoid_marionette'"):
        TrackingLaw(other, tr)
    no_gains = Trajectory.for_model(m, 0.01, tr.X, tr.U)
    with pytest.raises(ValueError, match="no tracking gains"):
        TrackingLaw(m, no_gains)
