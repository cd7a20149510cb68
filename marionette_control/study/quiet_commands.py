r"""A design for quieter commands that was measured and not kept (docs/tracking.md, "Quiet commands").

It is not a controller option (the quiet feedback, :mod:`marionette_control.tracking.quiet_feedback`, is what was
kept): it makes the commands less quiet than that and loses accuracy and pushes (the figures are in the document,
from ``docs/tracking_safety.py --quiet``). It is kept here as the readable form of what was measured, and runs on the
Python reference of the tick (:func:`quiet_core`: ``fused=False``, the estimator replaced after the trajectory is
taken).

:class:`InnovationScheduledKalman` — the Kalman filter's trust scheduled by its innovation (issue 24 item 4, idea (a)).
Two gain tables along the trajectory (:func:`~marionette_control.tracking.estimation.kalman_gains`): L_q of a quiet
filter (measurement σ_q large: trusts the model) and L of the default one. With the innovation

    ν_k = q_dyn,k − q̂⁻_dyn,k        (nd,)

and its slow mean ν̄ (an exponential mean with time constant ``slow`` s: the model's steady error, e.g. the shoulder's
bias of the realistic plant's hook), the test fails when max_i |ν_k,i − ν̄_{k−1},i| > ``threshold`` (rad), and the
update of tick k uses

    L(k)   while a test failed within the last ``hold`` ticks,     L_q(k)   otherwise.

Shapes: q (nq,), x (nx,), L (N+1, nx, nd).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from marionette_control.tracking.controller import ControllerCore, make_core
from marionette_control.tracking.controller_options import ControllerOptions
from marionette_control.tracking.estimation import KalmanEstimator, kalman_gains
from marionette_control.trajectory import Trajectory
from marionette_control import validation


class InnovationScheduledKalman(KalmanEstimator):
    """The Kalman filter with the quiet gains L_q while its innovations pass the test (module docstring).

    quiet : the quiet filter's measurement σ_q [rad]; threshold : the test's bound [rad]; hold : ticks with the
    default gains after a failed test; slow : the innovation mean's time constant [s]. The other parameters are
    :class:`~marionette_control.tracking.estimation.KalmanEstimator`'s (its noise: the default filter's).
    """

    def __init__(self, system, trajectory: Trajectory, noise, max_gap_steps: int, quiet: float, threshold: float,
                 hold: int, slow: float = 1.0):
        super().__init__(system, trajectory, noise, max_gap_steps)
        m = system.model
        A, B = system.linearize_trajectory(trajectory.X, trajectory.U)
        self.L_default = self.L
        self.L_quiet = kalman_gains(np.asarray(A), np.asarray(B), m.nd, m.nq,
                                    dataclasses.replace(noise, measurement=validation.positive(quiet, "quiet")))
        self.threshold = validation.positive(threshold, "threshold (rad)")
        self.hold = validation.integer(hold, "hold", minimum=0)
        self.beta = math.exp(-trajectory.dt / validation.positive(slow, "slow (s)"))
        self.quiet_ticks = self.ticks = 0
        self.reset()

    def reset(self) -> None:
        super().reset()
        self._since = self.hold + 1   # a run starts quiet
        self._mean = None

    def estimate(self, k, q, q_prev, applied, rho=None):
        """x̂_k (:meth:`KalmanEstimator.estimate`) with the gain table the test chose before this tick's update."""
        quiet = self._since > self.hold
        self.L = self.L_quiet if quiet else self.L_default
        x = super().estimate(k, q, q_prev, applied, rho)
        nu = self.innovation
        if nu is not None:
            mean = nu.copy() if self._mean is None else self._mean
            failed = float(np.max(np.abs(nu - mean))) > self.threshold
            self._mean = self.beta * mean + (1.0 - self.beta) * nu
            self._since = 0 if failed else self._since + 1
            self.ticks += 1
            self.quiet_ticks += quiet
        return x


def quiet_core(desc, options: ControllerOptions, trajectory: Trajectory, **estimator) -> ControllerCore:
    """The controller core of ``options`` (Python reference tick), ``trajectory`` taken, with the Kalman filter
    replaced by :class:`InnovationScheduledKalman` (its keyword arguments ``estimator``)."""
    core = make_core(desc, options, fused=False)
    core.load_trajectory(trajectory, "quiet_commands")
    tracking = core.staging.tracking
    old = tracking.estimator
    tracking.estimator = InnovationScheduledKalman(old.system, trajectory, options.noise, old.max_gap_steps,
                                                   **estimator)
    return core


__all__ = ["InnovationScheduledKalman", "quiet_core"]
