r"""Quiet commands: the feedback on the arm's own state low-passed, and stepped aside when the arm is surprised.

Encoder noise reaches the commands through the estimate of the arm's dynamic state (the joint angles and momenta
the filter takes from the joint encoders) and the gains on it; the drives' part of the state the law acts on (their
positions and velocities, predicted from the commands in flight) carries no encoder noise but the law's own command
recursion. On the wave 90 % of the power of the carriage's commanded acceleration minus the plan's is above 10 Hz
(docs/tracking.md, "Quiet commands"). So only the dynamic part of the feedback is low-passed. With the state
x = [q_dyn; ρ; p; v] (``model/state_layout.py``), δx = x̂_{k+d} − x_d(j) and the law (:mod:`.law`, thesis §6.7.2)

    u(j) = u_d(j) − K_kin(j) δx_kin − K_dyn(j) δx_dyn,          δx_dyn = (q_dyn, p) parts, δx_kin = (ρ, v) parts,

the command becomes

    g_j = K_dyn(j) δx_dyn,     y_j = y_{j−1} + α (g_j − y_{j−1}),     α = 1 − exp(−2π f_c Δt)
    u(j) ← u(j) + g_j − y_j                                     (the dynamic feedback replaced by its first-order lag)

with y_j = g_j (no lag) at a run's first step, past the end of the trajectory, while a re-planned window is in effect
(its own law, :mod:`.plan_switch`), and for ``hold`` steps after a *surprise*. Why the surprise: the lag costs the loop
phase near its bandwidth, and while the drives saturate — a push on the arm — that is the difference between
recovering and not (measured: with the lag alone the wave loses all four of docs/tracking.md's pushes; with the lag
stepped aside from 0–5 steps after the push for 1.5 s it recovers them as fast as without it, from 8 steps on it does
not). A detector must see a push within a few steps. The controller's filter cannot: it follows the encoders, and its
innovations on the realistic plant are dominated by the model's error (up to 6 mrad, a push 2–4). A filter that
trusts the model sees the push in its innovation within 4–5 steps. So the **surprise detector** is a second Kalman
filter along the trajectory (:class:`~.estimation.KalmanEstimator`, the same steps and inputs as the controller's,
its joint measurement σ_s = ``detector_measurement``), with innovation ν_k = q_dyn,k − q̂ˢ⁻_dyn,k and its mean

    m_k = β m_{k−1} + (1 − β) ν_k,     β = exp(−Δt / τ),  τ = :data:`MEAN_TIME`     (m = ν at its first update)

(the model's slowly varying error: the realistic plant's hook puts the shoulder's innovation 6 mrad off), and the test
of tick k fails — a surprise — when

    max_i |ν_k,i − m_{k−1},i| > ``threshold``            a force the model does not know (a push, a collision), once
                                                         armed (k ≥ ``armed_from``: the start blend's steps, while the
                                                         detector settles), or
    max_i |ρ_k,i − ρ_cmd,k,i| > ``drive_threshold``       the drives not where the commands in effect put them (a
                                                         command applied late or lost: ρ_cmd,k = the input of step k−1)

Shapes: q (nq,), x (nx,), u (nU,), K (N, nU, nx).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from marionette_control import validation
from marionette_control.model.state_layout import state_by_kind
from marionette_control.tracking.estimation import KalmanEstimator
from marionette_control.trajectory import Trajectory

#: τ of the detector's innovation mean [s]
MEAN_TIME = 0.1


@dataclass(frozen=True)
class QuietOptions:
    """The quiet feedback's parameters (module docstring).

    cutoff : f_c [Hz] of the dynamic feedback's lag (0: off, the law as it is: the default, docs/tracking.md "Quiet
        commands" says why; 10: the design measured there)
    detector_measurement : σ_s [rad] of the surprise detector's filter
    threshold : [rad] of the innovation test
    drive_threshold : [m or rad] of the drives' test
    hold : [s] without the lag after a surprise
    """

    cutoff: float = 0.0
    detector_measurement: float = 8e-3
    threshold: float = 2.5e-3
    drive_threshold: float = 1e-4
    hold: float = 1.5

    def __post_init__(self):
        validation.nonnegative(self.cutoff, "quiet_feedback.cutoff (Hz)")
        validation.positive(self.detector_measurement, "quiet_feedback.detector_measurement (rad)")
        validation.positive(self.threshold, "quiet_feedback.threshold (rad)")
        validation.positive(self.drive_threshold, "quiet_feedback.drive_threshold (m)")
        validation.nonnegative(self.hold, "quiet_feedback.hold (s)")

    @property
    def active(self) -> bool:
        return self.cutoff > 0


def dynamic_parts(model) -> np.ndarray:
    """Indices of the dynamic state's components (q_dyn and p) in x (2 nd,)."""
    return np.flatnonzero(state_by_kind(model, dynamic_configuration=1, kinematic_configuration=0, momentum=1,
                                        kinematic_velocity=0))


class QuietFeedback:
    """The lag of the dynamic feedback and the surprise detector along one trajectory (module docstring).

    trajectory : the motion (X (N+1, nx), K (N, nU, nx)); detector : the detector's filter (a KalmanEstimator with
    measurement σ_s along ``trajectory``); options : QuietOptions; armed_from : the tick from which the innovation test
    counts.
    """

    def __init__(self, trajectory: Trajectory, detector: KalmanEstimator, options: QuietOptions, armed_from: int):
        model_nd = detector.nd
        self.trajectory = trajectory
        self.detector = detector
        self.options = options
        dt = trajectory.dt
        self.alpha = 1.0 - math.exp(-2.0 * math.pi * options.cutoff * dt)
        self.beta = math.exp(-dt / MEAN_TIME)
        self.hold_steps = int(round(options.hold / dt))
        self.armed_from = int(armed_from)
        self.nd, self.nu = model_nd, detector.nu
        self.dynamic = dynamic_parts(detector.system.model)
        self.surprises = 0  # ticks whose test failed, over the object's life
        self._mean: Optional[np.ndarray] = None
        self._since = self.hold_steps + 1
        self._y: Optional[np.ndarray] = None
        self._j = -2

    def reset_detector(self) -> None:
        """The detector's filter initialises with the controller's (a new run, a switch, after a failure)."""
        self.detector.reset()
        self._mean = None

    def start_run(self) -> None:
        """A new run: no surprise, the lag starts at the feedback."""
        self._since = self.hold_steps + 1
        self._y = None

    @property
    def surprised(self) -> bool:
        """A test failed within the last ``hold`` steps: the lag is stepped aside."""
        return self._since <= self.hold_steps

    def observe(self, k: int, q: np.ndarray, q_prev: Optional[np.ndarray], applied: Callable,
                rho: Optional[np.ndarray] = None) -> None:
        """The detector's estimate of tick k (as the controller's, :meth:`KalmanEstimator.estimate`, ``rho`` as
        there) and its test (of the measured drives)."""
        d = self.detector
        d.estimate(k, q, q_prev, applied, rho)
        nu = d.innovation
        if nu is None:   # the filter initialised
            self._mean = None
            return
        mean = nu.copy() if self._mean is None else self._mean
        drive = max(abs(a - b) for a, b in zip(q[self.nd:].tolist(), applied(k - 1)[self.nu:].tolist()))
        failed = ((k >= self.armed_from and float(np.max(np.abs(nu - mean))) > self.options.threshold)
                  or drive > self.options.drive_threshold)
        self._mean = self.beta * mean + (1.0 - self.beta) * nu
        if failed:
            self._since = 0
            self.surprises += 1
        else:
            self._since = min(self._since + 1, self.hold_steps + 1)

    def apply(self, j: int, u: np.ndarray, x: np.ndarray, lagged: bool) -> None:
        """u (nU,) of step j on the state x (nx,), in place: the dynamic feedback replaced by its lag when
        ``lagged`` (the motion's law in effect, j < N, with feedback) and no surprise; otherwise y_j = g_j."""
        if not lagged or j >= self.trajectory.N:
            self._y = None
            return
        tr = self.trajectory
        i = self.dynamic
        g = tr.K[j][:, i] @ (x[i] - tr.X[j][i])
        if self._y is None or j != self._j + 1 or self.surprised:
            self._y = g
        else:
            self._y = self._y + self.alpha * (g - self._y)
        self._j = j
        u += g - self._y


__all__ = ["MEAN_TIME", "QuietFeedback", "QuietOptions", "dynamic_parts"]
