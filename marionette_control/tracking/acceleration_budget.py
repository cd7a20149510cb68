r"""The feedback's acceleration budget: how far the commands' drive accelerations may stray from the plan's.

The feedback answers encoder noise too: through the Kalman filter's momenta and the gains it reaches the commands
as a chatter of the drives' acceleration around the plan's — on the wave on the realistic stand-in 2.2 m/s² RMS on
the carriage (5.2 m/s² with three times the encoder noise), up to 17 m/s² (docs/tracking.md, "Quiet commands"). Drives and strings wear under that, and the string's tension follows the drives' acceleration (1 m/s²
of the winch is about 0.85 N on the wave). A filter on the commands that takes it out costs the loop its phase
(a first-order 20 Hz low-pass: the elbow's RMS 0.31° → 0.36°); so instead the budget bounds what the feedback may
add to the plan's acceleration, and lets everything within the bound through untouched:

    | (ρ_{j+1} − ρ_j)/Δt² − v_j/Δt − a_d(j) | ≤ b,     a_d(j) = (ρ_d(j+1) − 2ρ_d(j) + ρ_d(j−1))/Δt²

for each drive, ρ_{j+1} the command of step j (the kinematic part of u_j, thesis §3.6), (ρ_j, v_j) the command
stream it continues (:meth:`~.prediction.CommandHistory.stream_state`, the state the drives' clamp works from) and
a_d the acceleration of the law's feed-forward u_d (the motion's, the plan's in effect, the hold past the end, the
drives at rest at x_d(0) before the start: ``feedforward``). So the commanded acceleration stays within b of the
plan's, and the optimizer's reserve on the drives' acceleration (the plan's margin to the drives' limit) is what
the feedback may use of it. The bound is ``feedback_acceleration`` (m/s² or rad/s², one for every drive; 0: none,
the default). It is a saturation of the LQ law's commands, whose recursion through the predictor has a gain of
about 1.7 per tick: on the wave 5 m/s² keeps the figures, but 2 m/s² loses the loop, and 5 m/s² loses a bump with
1 mrad of joint noise (docs/tracking.md, "Quiet commands") — hence off by default.
The command's drive positions are clipped to

    [ρ_j + v_j Δt + c − b Δt²,  ρ_j + v_j Δt + c + b Δt²],    c = ρ_d(j+1) − 2ρ_d(j) + ρ_d(j−1)

after the law (and the start blend) and before the tension guard, whose box includes them
(:meth:`~.command_limits.CommandLimits.box`); the drives' own limits (the clamp after it) win where the two do
not meet. Without feedback (feed-forward only) there is no budget. The compiled tick (:mod:`.native_tick`) runs the
same operations; this class is its readable reference.
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import numpy as np


class AccelerationBudget:
    """The bound b on each drive's acceleration against the plan's (module docstring).

    budget : b [m/s² or rad/s²] (> 0; math.inf: none); nu : the model's force inputs (the drives follow them in u);
    dt : the time step.
    """

    def __init__(self, budget: float, nu: int, dt: float):
        self.budget = float(budget)
        self._nu = int(nu)
        self._dt = float(dt)
        self.step = self.budget * self._dt * self._dt  # b Δt², the compiled tick's

    @property
    def active(self) -> bool:
        return math.isfinite(self.budget)

    def bounds(self, j: int, feedforward: Callable[[int], np.ndarray], rho, v) -> Optional[tuple[list, list]]:
        """(lo, hi) (nk floats each) of the drives' positions the command of step j may have, from the command
        stream's (ρ_j, v_j) (nk each) and the law's ``feedforward`` u_d (module docstring); None without a budget."""
        if not self.active:
            return None
        nu, dt, step = self._nu, self._dt, self.step
        f0, f1, f2 = (feedforward(i)[nu:].tolist() for i in (j, j - 1, j - 2))
        lo, hi = [], []
        for r, w, a, b, c in zip(rho, v, f0, f1, f2):
            base, second = r + w * dt, a - 2.0 * b + c
            lo.append(base + (second - step))
            hi.append(base + (second + step))
        return lo, hi

    def apply(self, u: np.ndarray, bounds: Optional[tuple[list, list]]) -> None:
        """The drives' positions of u (nU,) clipped to ``bounds`` (:meth:`bounds`), in place."""
        if bounds is None:
            return
        nu = self._nu
        for i, (lo, hi) in enumerate(zip(*bounds)):
            x = float(u[nu + i])
            u[nu + i] = lo if x < lo else hi if x > hi else x


__all__ = ["AccelerationBudget"]
