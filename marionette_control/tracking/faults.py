"""The controller's faults: their kinds and levels, and the record of the active ones and their counts.

Faults never reach the actuators as garbage. Two families (:data:`SAMPLE_FAULTS`, :data:`RUN_FAULTS`):

Sample faults reject the sample, with a specific ``kind`` (:mod:`.intake` finds them): its stamp is
older than ``state_timeout`` (``stale``) or ahead of the clock by more than that (``future_stamp``:
e.g. ``use_sim_time`` set on one side only), equals the previous accepted stamp (``duplicate_stamp``)
or precedes it (``out_of_order``); its content is unusable — the injected ``read`` raises a
ValueError with a ``kind`` (:class:`~.joint_states.JointStateReader`: ``non_finite``,
``missing_names``, ``duplicate_names``, ``malformed`` = names/positions of different length); or it
is implausible (``out_of_limits``, ``implausible_jump``, ``chain_inconsistent``: :mod:`.sample_checks`).
Joint names are mapped by *name*, so a reordered message is valid and gives the same q. The watchdog
reports ``stale`` when no sample arrived within ``state_timeout`` (``no_data`` before the first one).
A tick whose predecessor is missing holds with ``sample_gap``; a model step that fails on the estimate
(``estimation_failed``) or a non-finite command (``invalid_command``) holds too. These clear
(``recovered``) on the next computed tick (while idle: the next valid sample); trajectory time does
not pause meanwhile.

Run faults end tracking (hold, report) and stay active until the next start or stop:
``start_tolerance`` (the arm is not where the trajectory starts), ``path_tolerance`` (the estimate left
the path tolerance). ``goal_tolerance`` (not within the goal tolerance ``goal_time`` after the end) is
reported while the final state is held.

Every active fault kind is reported with its count (:class:`Faults`, ``ControllerCore.status``), not
only the latest. On a fault while running the core returns the **hold command**
(:meth:`~.tick.Tracking.hold_command`).
"""

from __future__ import annotations

from typing import Optional

# Levels of diagnostic_msgs/DiagnosticStatus (the tracking layer does not import ROS).
OK, WARN, ERROR, STALE = 0, 1, 2, 3

#: Fault kinds that clear on the next computed tick (while idle: the next valid sample), and their level.
SAMPLE_FAULTS = {
    "stale": ERROR, "future_stamp": ERROR, "duplicate_stamp": ERROR, "out_of_order": ERROR,
    "non_finite": ERROR, "missing_names": ERROR, "duplicate_names": ERROR, "malformed": ERROR, "invalid": ERROR,
    "out_of_limits": ERROR, "implausible_jump": ERROR, "chain_inconsistent": ERROR,
    "invalid_command": ERROR, "estimation_failed": ERROR, "no_data": STALE, "sample_gap": WARN,
}
#: Fault kinds of a run (tracking ended or goal missed), active until the next start or stop, and their level.
RUN_FAULTS = {"start_tolerance": ERROR, "path_tolerance": ERROR, "goal_tolerance": ERROR}
FAULT_LEVELS = {**SAMPLE_FAULTS, **RUN_FAULTS}


class Faults:
    """The active faults ``active`` {kind: message}, in the order raised, and ``counts`` {kind: raised so far}.

    The methods fill the fault fields of a call's result (``fault``, ``fault_message``, ``new_fault``,
    ``recovered`` of :class:`~.tick.TickResult`).
    """

    def __init__(self):
        self.active: dict[str, str] = {}
        self.counts: dict[str, int] = {}

    @property
    def latest(self) -> Optional[str]:
        """The latest active fault kind (None when healthy)."""
        return next(reversed(self.active)) if self.active else None

    @property
    def message(self) -> str:
        """The message of the latest active fault ("" when healthy)."""
        return self.active[self.latest] if self.active else ""

    def raise_fault(self, res, kind: str, message: str) -> None:
        """``kind`` is active with ``message`` (the latest), counted; ``res`` reports it (``new_fault``: it was not
        active before)."""
        res.new_fault = kind not in self.active
        self.active.pop(kind, None)
        self.active[kind] = message
        self.counts[kind] = self.counts.get(kind, 0) + 1
        res.fault, res.fault_message = kind, message

    def report_active(self, res) -> None:
        """``res`` reports the latest active fault unless it reports one already."""
        if res.fault is None and self.active:
            res.fault, res.fault_message = self.latest, self.message

    def clear_sample_faults(self, res) -> None:
        """The sample faults clear (``res.recovered``, its message lists them); ``res`` reports what stays active."""
        cleared = [k for k in self.active if k in SAMPLE_FAULTS]
        if cleared:
            res.recovered = True
            res.fault_message = "recovered from " + "; ".join(f"{k}: {self.active.pop(k)}" for k in cleared)
        if self.active:
            res.fault = self.latest
            if not cleared:
                res.fault_message = self.message

    def clear_run_faults(self) -> None:
        for k in RUN_FAULTS:
            self.active.pop(k, None)

    def level(self) -> int:
        """The highest level of the active faults (OK when none)."""
        return max((FAULT_LEVELS.get(k, ERROR) for k in self.active), default=OK)

    def describe(self) -> str:
        """Every active fault, the latest first: "kind: message; ..."."""
        return "; ".join(f"{k}: {m}" for k, m in reversed(self.active.items()))
