"""The innovation-scheduled filter docs/tracking.md's "Quiet commands" measured and did not keep
(marionette_control/study/quiet_commands.py), against its definition: while its test passes it is the Kalman filter
of the quiet σ_q (to rounding, estimate by estimate); once the test fails it takes the default gains for ``hold``
ticks.
"""

from __future__ import annotations

import numpy as np

from arm_helpers import bump_trajectory
from marionette_control.study.quiet_commands import InnovationScheduledKalman
from marionette_control.tracking.estimation import EstimatorNoise, KalmanEstimator


def _samples(traj, rng, steps):
    nq = traj.X.shape[1] // 2
    return [traj.X[k, :nq] + np.r_[rng.normal(scale=2e-4, size=2), 0.0, 0.0] for k in range(steps)]


def test_the_scheduled_filter_is_the_quiet_one_while_its_test_passes_and_the_default_after_a_failure():
    system, traj = bump_trajectory(0.01, 120, delay=1)
    noise = EstimatorNoise()
    quiet = 8e-3
    applied = traj.U.__getitem__
    qs = _samples(traj, np.random.default_rng(5), 60)
    passing = InnovationScheduledKalman(system, traj, noise, 5, quiet=quiet, threshold=1.0, hold=20)
    reference = KalmanEstimator(system, traj, EstimatorNoise(measurement=quiet), 5)
    for k, q in enumerate(qs):
        np.testing.assert_allclose(passing.estimate(k, q, None, applied), reference.estimate(k, q, None, applied),
                                   rtol=0, atol=1e-12)
    assert passing.quiet_ticks == passing.ticks == len(qs) - 1
    failing = InnovationScheduledKalman(system, traj, noise, 5, quiet=quiet, threshold=1e-12, hold=20)
    default = KalmanEstimator(system, traj, noise, 5)
    for k, q in enumerate(qs[:3]):
        failing.estimate(k, q, None, applied)
    # k = 0 starts the run; the updates of k = 1, 2 are quiet (a run starts so); the first innovation is its own
    # mean, the second's test fails
    assert failing.L is failing.L_quiet and failing.quiet_ticks == failing.ticks == 2
    for k in range(3, 3 + 20):
        failing.estimate(k, qs[k], None, applied)
        assert failing.L is failing.L_default
    assert failing.quiet_ticks == 2 and failing.ticks == 22
    np.testing.assert_array_equal(failing.L_default, default.L)
