"""Commands in flight and the state at the time a command takes effect (delay compensation).

With ros2_control the command computed from the joint state of cycle k is picked up by the
forward position controller at its next update and written at cycle k+1: it moves the drives
over step k+1 → k+2, i.e. it is the input u_{k+d} with d = ``command_delay_steps`` = 1
(u_j = ρ_{j+1}, thesis §3.6). The input u_k that acts meanwhile was sent one tick earlier: it
is *in flight*. :class:`CommandHistory` keeps the commands sent and answers which input is in
effect over step j; :class:`DelayPredictor` steps the estimate x̂_k through the model with
those inputs to x̂_{k+d} (thesis (4.36): the exact model is the predictor), the state the new
command acts on, so the tracking law uses the reference and gains of index k+d; the new command
continues the stream of commands within the drives' limits (:meth:`CommandHistory.stream_state`).
"""

from __future__ import annotations

import numpy as np

from marionette_control import _core, validation


#: The commands sent, by tick slot, and the input in effect over each step (compiled: the fused tick of
#: :mod:`.native_tick` reads the commands in flight from it). A command sent at slot s (the tick index of the
#: sample it answered, or the slot a hold command fell in) is the input from step s + d on, until a later one
#: replaces it (the forward position controller keeps its last command); before the first command of a run the
#: drives hold ``start``'s input. A joint_trajectory command (:mod:`.lookahead`) carries the inputs of the steps after
#: its first: over the steps no later command reached, the drives follow them and then hold the last one.
#: ``CommandHistory(nU, nk, delay_steps, size=32)``; ``start(hold)``, ``sent(slot, u)`` (u copied; slots never
#: decrease), ``carries(points)`` ((m, nU): the points of the last command sent), ``applied(j)`` (the input of step j:
#: the last command sent at a slot s <= j − d, or its point j − d − s),
#: ``stream_state(j, dt)`` (ρ_j, v_j of the setpoint stream a command for step j continues: the limits apply to
#: this stream, so a drive that fell behind catches up with a stream that stayed smooth), ``carry_over(other,
#: shift)``, ``copy()``, ``last_slot``, ``last``, ``delay``.
CommandHistory = _core.CommandHistory


class DelayPredictor:
    """x̂_{k+d} = f(…f(x̂_k, u_k)…, u_{k+d−1}) with the commands in flight (module docstring).

    The drives are taken to follow each command as far as their limits allow from where they are:
    u_j is the command in effect clamped from the predicted drive state (ρ_j, v_j)
    (:meth:`~.command_limits.CommandLimits.clamp`), so a drive that lags its commands (a command that
    arrived a cycle late, a trajectory at the acceleration limit) is predicted lagging.

    ``system`` : _core.DiscreteSystem (the model the trajectory and gains are for); ``delay_steps`` = d;
    ``limits`` : the drives' CommandLimits for the system's Δt.
    """

    def __init__(self, system, delay_steps: int, limits):
        self.system = system
        self.delay = validation.integer(delay_steps, "command delay (steps)", minimum=0)
        self.limits = limits
        m = system.model
        self._nd, self._nq = m.nd, m.nq
        self._u = np.empty(m.nU)

    def predict(self, k: int, x_hat: np.ndarray, history: CommandHistory) -> np.ndarray:
        """x̂_{k+d} (nx,) from x̂_k (nx,); raises ``_core.StepError`` when the model cannot take a step."""
        x = x_hat
        nd, nq, u = self._nd, self._nq, self._u
        for j in range(k, k + self.delay):
            u[:] = history.applied(j)
            self.limits.clamp(u, x[nd:nq], x[nq + nd:])
            x = self.system.step(x, u)[0]
        return x
