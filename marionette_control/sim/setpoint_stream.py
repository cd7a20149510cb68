"""The drives' setpoint at each cycle from the commands received: single setpoints and short trajectories.

A drive in cyclic synchronous position mode (:mod:`.drives`) takes one setpoint per cycle. What the controller
sends are *commands*, each a short trajectory of setpoints for consecutive steps (ros2_control's
joint_trajectory_controller: the hardware side samples the latest trajectory it has at every cycle; the forward
position controller's command is the one-point case):

* a command is received at a cycle and *arrives* (is first usable) at step e = k + ``command_delay_steps``
  (+ jitter) of the hardware profile, never before a command received earlier (:meth:`.SimulatedArm.receive_command`);
* its points p_0 … p_{m−1} (nk each) are the setpoints of steps s_0 < … < s_{m−1} (real numbers: the points' own
  times on the cycle grid; between two points the setpoint is interpolated linearly, the sampling of
  joint_trajectory_controller with positions only);
* at step k the newest command that has arrived (e ≤ k) and whose first point is due (s_0 ≤ k) gives the setpoint
  p(k); past its last point the setpoint is p_{m−1} (the drive holds, as after a forward position command); an
  older command governs the steps before a newer one takes over. A command all of whose points are past when it
  arrives gives its last point.

So a command that arrives late (jitter) or not at all leaves the drives following the previous command's next
points instead of holding its first one (docs/tracking.md, "Commands that carry the next setpoints").
A forward position command is one point due at its arrival: the drives' setpoint from that step on. A *stop*
(joint_trajectory_controller's empty trajectory) brakes the drives to a stop at its arrival (:meth:`.Drives.hold`)
and holds them there until a newer command takes over.
"""

from __future__ import annotations

import collections
import math
from typing import Optional

import numpy as np

#: The most points a command may carry (a joint_trajectory_controller command of the tracking controller carries
#: 1 + ``command_lookahead`` ≤ 1 + 50; a longer one is a mistake of the sender, not a plan the drives can use).
MAX_POINTS = 100


class CommandError(ValueError):
    """A command the drives cannot take: the message names the field and what was expected."""


def check_points(points, steps, nk: int, names) -> np.ndarray:
    """The points of a command as an (m, nk) array, checked: ``points`` (nk,) a setpoint (``steps`` None) or (m, nk)
    with ``steps`` (m,) strictly increasing, 1 ≤ m ≤ :data:`MAX_POINTS`, all finite. names : the drives' names (for
    the message). Raises :class:`CommandError`."""
    p = np.asarray(points, dtype=float)
    if steps is None:
        if p.shape != (nk,) or not np.all(np.isfinite(p)):
            raise CommandError(f"a command has {nk} finite values ({', '.join(names)}), got {p.tolist()}")
        return p[None, :]
    s = np.asarray(steps, dtype=float)
    if p.ndim != 2 or p.shape[1] != nk or s.shape != (p.shape[0],):
        raise CommandError(f"a trajectory command has points (m, {nk}) ({', '.join(names)}) and m step times, got "
                           f"points {p.shape} and times {s.shape}")
    if not 1 <= p.shape[0] <= MAX_POINTS:
        raise CommandError(f"a trajectory command has 1 to {MAX_POINTS} points, got {p.shape[0]}")
    if not np.all(np.isfinite(s)) or np.any(np.diff(s) <= 0.0):
        raise CommandError(f"a trajectory command's point times must be finite and strictly increasing, got "
                           f"{s.tolist()} steps")
    bad = np.argwhere(~np.isfinite(p))
    if bad.size:
        i, j = bad[0]
        raise CommandError(f"a trajectory command's point {int(i)} has a non-finite position for {names[j]}: "
                           f"{p[i, j]}")
    return p


def trajectory_points(joint_names, positions, times_ns, command_index, stamp_ns: int, step_of):
    """(steps (m,), points (m, nk)) of a joint_trajectory_controller command (trajectory_msgs/JointTrajectory's
    content): ``joint_names`` its joints, ``positions`` (m lists) each point's positions in that order,
    ``times_ns`` (m,) each point's time_from_start [ns], ``stamp_ns`` its header stamp; command_index : {hardware
    joint name: kinematic index} of the drives (every one must be named, each once); step_of : stamp [ns] → the
    (real) step of that stamp; a point is where the drives are to be at its time, so it is the setpoint of the step
    before, the one ending then. Raises :class:`CommandError` for other joints, positions of another length or too
    many points (the times and values are checked by :func:`check_points`)."""
    names = list(joint_names)
    if sorted(names) != sorted(command_index) or len(set(names)) != len(names):
        raise CommandError(f"a trajectory command names the joints {sorted(command_index)} once each, got {names}")
    m = len(positions)
    if not 1 <= m <= MAX_POINTS:
        raise CommandError(f"a trajectory command has 1 to {MAX_POINTS} points, got {m}")
    points = np.empty((m, len(names)))
    order = [command_index[n] for n in names]
    for i, p in enumerate(positions):
        if len(p) != len(names):
            raise CommandError(f"a trajectory command's point {i} has {len(p)} positions, expected {len(names)} "
                               f"({', '.join(names)})")
        points[i, order] = p
    steps = np.array([step_of(stamp_ns + int(t)) - 1.0 for t in times_ns])
    return steps, points


class SetpointStream:
    """The commands received and the setpoint they give at each step (module docstring); nk drives.

    ``receive(steps, points, arrival)`` : steps (m,) increasing, points (m, nk), or both None: a stop;
    ``setpoint(k)`` : (nk,) or None (no command governs step k yet, or a stop does: the drives keep the setpoint they
    have); ``stopping(k)`` : a stop takes effect at step k; ``clear()`` drops every command.
    """

    def __init__(self, nk: int):
        self.nk = int(nk)
        self._commands: collections.deque = collections.deque()   # (effective step, steps (m,), points (m, nk))
        self.last_arrival = -math.inf

    def clear(self) -> None:
        self._commands.clear()

    def receive(self, steps: np.ndarray, points: np.ndarray, arrival: int) -> None:
        """A command whose points ``points`` (m, nk) are the setpoints of ``steps`` (m,) (both None: a stop),
        arriving at step ``arrival`` (no earlier than the last command's; the caller keeps that order)."""
        self.last_arrival = arrival
        effective = arrival if steps is None else max(arrival, math.ceil(float(steps[0]) - 1e-9))
        while self._commands and self._commands[-1][0] >= effective:
            self._commands.pop()   # superseded before it took effect
        self._commands.append((effective, None if steps is None else np.asarray(steps, dtype=float),
                               None if points is None else np.asarray(points, dtype=float)))

    def stopping(self, k: int) -> bool:
        """A stop takes effect at step k (after :meth:`setpoint` of step k)."""
        return bool(self._commands) and self._commands[0][0] == k and self._commands[0][1] is None

    def pending(self, k: int) -> list[int]:
        """The steps at which the commands received take effect, those after step k (increasing)."""
        return [e for e, _, _ in self._commands if e > k]

    def setpoint(self, k: int) -> Optional[np.ndarray]:
        """The setpoint (nk,) of step k (a new array), or None when no command governs it; commands that a newer
        one has replaced by step k are dropped (call with non-decreasing k)."""
        commands = self._commands
        while len(commands) > 1 and commands[1][0] <= k:
            commands.popleft()
        if not commands or commands[0][0] > k or commands[0][1] is None:
            return None
        _, steps, points = commands[0]
        if k >= steps[-1]:
            return points[-1].copy()
        return np.array([np.interp(k, steps, points[:, i]) for i in range(self.nk)])
