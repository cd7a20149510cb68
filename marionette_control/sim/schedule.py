"""The simulator node's time base without ROS: when steps are due, what they are stamped, and when samples go out.

:class:`StepSchedule` paces the integrator steps against a clock and stamps them (simulated time from 0 when
the simulator is the graph's clock; the wall clock otherwise, re-anchored after a stall or a clock step).
:class:`AnswerGate` is the lock-step with a controller: a step waits for the command answering the last
joint-state message. :class:`MeasurementQueue` holds joint-state samples for their transport latency.
``nodes/simulator.py`` ("Time") says how the node uses them.
"""

from __future__ import annotations

import collections
from typing import Optional

NANOSECONDS = 1_000_000_000


class StepSchedule:
    """When integrator steps are due, and the stamp each step carries.

    Steps are paced on a clock reading ``now`` (ns): the steady clock when the simulator is the
    graph's clock, the wall clock when stamps are wall-clock times. An anchor (k_a, c_a) says
    step k_a is due at c_a; step k is due at c_a + (k − k_a)·dt/rtf and, with wall-clock stamps,
    is stamped c_a + (k − k_a)·dt (rtf = 1 there), with simulated-time stamps k·dt.

    :meth:`due` re-anchors (and says so) when the simulation is more than ``max_lag_ns`` behind
    or ahead of the clock: the next step is then due now, simulated time skips the gap, and the
    stamps track the clock again. Without it, a stall (e.g. a process that starts 0.3 s late)
    would leave every later wall-clock stamp 0.3 s older than the clock it is compared with.
    """

    def __init__(self, dt_ns: int, max_lag_ns: int, wall_stamps: bool, real_time_factor: float = 1.0):
        self.dt_ns = int(dt_ns)
        self.max_lag_ns = int(max_lag_ns)
        self.wall_stamps = bool(wall_stamps)
        self.real_time_factor = float(real_time_factor)
        self.anchored = False
        self.reanchors = 0
        self._k = 0
        self._c = 0

    def anchor(self, k: int, now_ns: int) -> None:
        """Step ``k`` is due at ``now_ns``."""
        self._k, self._c = int(k), int(now_ns)
        self.anchored = True

    def set_real_time_factor(self, factor: float, k: int, now_ns: int) -> None:
        self.real_time_factor = float(factor)
        self.anchor(k + 1, now_ns + round(self.dt_ns / factor))

    def stamp_ns(self, k: int) -> int:
        """The stamp of step k (nanoseconds)."""
        if self.wall_stamps:
            return self._c + (k - self._k) * self.dt_ns
        return k * self.dt_ns

    def steps_at(self, stamp_ns: int) -> float:
        """The step (real: between two steps' stamps) whose stamp ``stamp_ns`` is."""
        base = self._c - self._k * self.dt_ns if self.wall_stamps else 0
        return (stamp_ns - base) / self.dt_ns

    def step_at(self, stamp_ns: int) -> int:
        """The first step whose stamp is at or after ``stamp_ns``."""
        base = self._c - self._k * self.dt_ns if self.wall_stamps else 0
        return -((base - stamp_ns) // self.dt_ns)

    def due(self, k: int, now_ns: int) -> tuple[int, int]:
        """(steps to take now, the current step being k; simulated time not integrated [ns], 0 unless re-anchored).

        After a re-anchor one step is due now: with wall-clock stamps it carries the clock's time, the gap
        (the time skipped, negative after the clock stepped back) is not simulated."""
        behind_ns = (now_ns - self._c) * self.real_time_factor - (k - self._k) * self.dt_ns
        if abs(behind_ns / self.real_time_factor) <= self.max_lag_ns:
            return max(0, int(behind_ns // self.dt_ns)), 0
        self.anchor(k + 1, now_ns)
        self.reanchors += 1
        return 1, int(behind_ns) - self.dt_ns


class AnswerGate:
    """Lock-step with a controller (parameter ``lockstep_timeout``): the next step waits until the last
    ``joint_states`` message has been answered by a command, while commands answer them.

    ros2_control applies a command computed from the state of cycle k at cycle k+1 (``command_delay_steps``).
    On a loaded machine a controller process may not be scheduled within one period, so some commands act a
    cycle later still: command jitter, an effect of its own (``command_jitter_steps``). With the simulator as
    the graph's clock, waiting for the answer stops simulated time while the controller computes, so a test
    measures the control law under the profile's delay, not the machine's load. A controller that stops
    answering (stopped, idle, gone) is waited for at most ``timeout_ns`` once; steps are then paced as usual
    until its commands resume. Only meaningful when the controller answers every message (its Δt = the
    publishing period). A command carries no stamp, so any command answers the latest message: messages a
    controller had queued when it began answering stay queued (a constant extra delay, zero for a controller
    that keeps up while idle, as marionette_controller does), but the delay can no longer grow under load.
    """

    def __init__(self, timeout_ns: int):
        self.timeout_ns = int(timeout_ns)
        self.published = 0      # joint_states messages published
        self.answered = 0       # messages published before the last accepted command
        self.live = False       # commands answer the messages
        self.waits = 0          # messages whose answer was waited for
        self.timeouts = 0       # waits that gave up
        self._since: Optional[int] = None

    def sample_published(self) -> None:
        self.published += 1

    def command_received(self) -> None:
        self.answered = self.published
        self.live = True

    @property
    def pending(self) -> bool:
        """The last message is not answered yet, while commands answer them."""
        return bool(self.timeout_ns) and self.live and self.answered < self.published

    def hold(self, now_ns: int) -> tuple[bool, bool]:
        """(wait: the next step must wait for an answer, resumed: a wait just ended, the pacing restarts now);
        ``now_ns`` reads the pacing clock."""
        if not self.pending:
            resumed, self._since = self._since is not None, None
            return False, resumed
        if self._since is None:
            self._since = now_ns
            self.waits += 1
        if now_ns - self._since < self.timeout_ns:
            return True, False
        self.timeouts += 1
        self.live, self._since = False, None
        return False, True


class MeasurementQueue:
    """Joint-state samples waiting for their transport latency: (release time, stamp, positions), in time order."""

    def __init__(self):
        self._items: collections.deque = collections.deque()

    def push(self, release_ns: int, stamp_ns: int, positions: list) -> None:
        self._items.append((release_ns, stamp_ns, positions))

    def pop_due(self, now_ns: int):
        """Yields (stamp_ns, positions) of every sample released by ``now_ns``."""
        while self._items and self._items[0][0] <= now_ns:
            _, stamp, pos = self._items.popleft()
            yield stamp, pos

    def clear(self) -> None:
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)
