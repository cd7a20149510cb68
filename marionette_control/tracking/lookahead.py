"""The next setpoints a command carries: the tick's command continued along the plan, within the drives' limits.

With ``command_interface: joint_trajectory`` a tick's command is a short trajectory (ros2_control's
joint_trajectory_controller): the input u(j) of step j = k + d that the tick computed (its kinematic part the drives'
positions one step ahead, ρ_{j+1}: thesis §3.6), then ``command_lookahead``
inputs for the steps after it. The hardware side samples the latest trajectory it has at every cycle
(:mod:`marionette_control.sim.setpoint_stream` in the stand-in), so a command that arrives late or not at all leaves
the drives following the previous command's next points instead of holding its first — the jerk on the string of a
late forward position command (docs/tracking.md, "Commands that carry the next setpoints").

The next points are the plan's feed-forward u_d (:meth:`.plan_switch.PlannedLaw.feedforward`: the plan in effect,
the hold past the end) plus the tick's feedback correction c(j) = u(j) − u_d(j) continued at its last rate, the
continuation halved every step::

    u(j+i) = clamp( u_d(j+i) + c(j) + (2 − 2^(1−i)) Δc(j) )      i = 1 … L,   Δc(j) = c(j) − c(j−1)

each clamped (:meth:`~.command_limits.CommandLimits.clamp`) from the stream state the point before leaves (ρ_{j+i},
v_{j+i} = (ρ_{j+i} − ρ_{j+i−1})/Δt, from the state u(j) was clamped from), so the points are a stream the drives can
follow exactly. Δc(j) = 0 when the previous command was not the previous step's (a run's first tick, a missed tick,
a hold) or the plan in effect changed. Why this rule (docs/tracking.md, measured on the wave and the bow): the
correction moves by up to ~0.5 mm per step on the wave, so a point that holds it (Δc taken 0) leaves a step in the
setpoints' second difference where the next command takes over (10 % of commands one step late: 0.38–0.61 N
lowest tension); continuing its rate for one step removes it (0.665–0.681 N, as without late commands); continuing
it undamped over a command two steps late overshoots where the correction turns (0.05 N once), halving it keeps
that bounded (2 Δc at most). The plan alone (the correction dropped) is worse than holding (0 N).
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from marionette_control.tracking.command_limits import CommandLimits

#: The longest lookahead a command carries (points after the first; sim.setpoint_stream.MAX_POINTS bounds a
#: command's points at the receiving end).
MAX_LOOKAHEAD = 50


class Lookahead:
    """The next ``count`` inputs after each tick's command (module docstring); remembers the last correction."""

    def __init__(self, count: int):
        self.count = int(count)
        # the continuation's factors 2 − 2^(1−i), i = 1 … count
        self._gain = (2.0 - 2.0 ** (1.0 - np.arange(1, self.count + 1)))[:, None]
        self._last: Optional[tuple] = None    # (j, plan in effect, c(j)) of the last command

    def reset(self) -> None:
        """Forgets the last correction (the next command's Δc is 0)."""
        self._last = None

    def points(self, u: np.ndarray, j: int, feedforward: Callable[[int], np.ndarray], plan, limits: CommandLimits,
               rho) -> np.ndarray:
        """(count, nU) the inputs u(j+1) … u(j+count) after the command u (nU,) for step j.

        feedforward : j → u_d(j) (nU,); plan : the plan in effect (any object; a change resets Δc); limits : the
        drives' limits for the trajectory's Δt (:meth:`CommandLimits.for_dt`); rho : (nk,) ρ_j of the stream state u
        was clamped from (:meth:`~.prediction.CommandHistory.stream_state`).
        """
        nu, dt = u.size - limits.nk, limits.dt
        c = u - feedforward(j)
        last = self._last
        change = c - last[2] if last is not None and last[0] == j - 1 and last[1] is plan else 0.0 * c
        self._last = (j, plan, c)
        out = np.array([feedforward(j + i) for i in range(1, self.count + 1)])
        out += c + self._gain * change
        previous, current = list(rho), u[nu:].tolist()
        for w in out:   # (on Python floats: CommandLimits.clamp's own)
            limits.clamp(w, current, [(a - b) / dt for a, b in zip(current, previous)])
            previous, current = current, w[nu:].tolist()
        return out
