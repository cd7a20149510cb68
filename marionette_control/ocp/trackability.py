"""Whether an optimum follows its desired motion: the definition a result is judged and re-timed by.

An optimum (X, U) of a tracking problem is **trackable** when

1. it satisfies every inequality constraint of its problem within the feasibility tolerance, the reserve kept
   for the feedback included (the drives' margins and the tension reserve,
   :class:`~marionette_control.ocp.problem.ConstraintOptions`): what the drives and the string can do with the
   controller's corrections on top; and
2. every configuration the desired motion prescribes follows it within ``tolerance``: the RMS over the motion's
   samples of q_j(t_k) − q_d,j(t_k), k = 0..N, is at most the tolerance for every prescribed j (default 0.25°,
   :data:`~marionette_control.ocp.problem.DEFAULT_TRACKING_TOLERANCE`: half the closed loop's RMS target of
   0.5°, ``docs/tracking.md``, so the animator's motion, not the optimizer's compromise, dominates what the
   arm shows).

Why the RMS over the whole motion and not the error at the keyframes alone: where the optimum anticipates a fast
part (it starts moving before the keys ask, since the string must first take up the load) and where it
settles after it, the error lies between the keys; the error at the keys scatters with where they fall on the
time grid and is not monotone in the timing (measured on the wave at twice its speed, ``docs/motions.md``),
while the RMS over the motion falls steadily as the motion is slowed down, which is what a search for the
smallest slow-down needs (:mod:`.retiming`).

:func:`assess` reads both from a result's record (:mod:`.report`: ``summary.tracking_errors`` and
``constraints``) and names what limits the motion: the constraint rows the optimum rides (active at some step,
the most active first). Every record carries its :class:`Verdict` (``trackability``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class Verdict:
    """Whether an optimum is trackable (module docstring) and why.

    trackable : both conditions hold;  feasible : condition 1;  rms : {prescribed configuration: RMS error (rad)};
    tolerance : rad;  limiting : [(constraint label, active steps)] of the rows the optimum rides, most active
    first.
    """

    trackable: bool
    feasible: bool
    rms: dict
    tolerance: float
    limiting: list = field(default_factory=list)

    @property
    def worst(self) -> tuple:
        """(configuration, RMS error in rad) of the configuration followed least closely (("", 0) without any)."""
        return max(self.rms.items(), key=lambda item: item[1], default=("", 0.0))

    def limits_text(self, count: int = 4) -> str:
        """The constraints it rides, in words ("carriage speed <= 2 m/s (120 steps), ...")."""
        if not self.limiting:
            return "no constraint active"
        more = f", and {len(self.limiting) - count} more" if len(self.limiting) > count else ""
        return ", ".join(f"{label} ({steps} steps)" for label, steps in self.limiting[:count]) + more

    def describe(self) -> str:
        """One sentence: trackable or not, by how much, and what limits it."""
        name, rms = self.worst
        error = f"{name} {math.degrees(rms):.3g}° RMS (tolerance {math.degrees(self.tolerance):.3g}°)" if name else \
            "no prescribed configuration"
        if self.trackable:
            return f"trackable: {error}; riding {self.limits_text()}" if self.limiting else f"trackable: {error}"
        why = [] if self.feasible else ["violates its constraints"]
        if name and rms > self.tolerance:
            why.append(f"misses the motion by {error}")
        return f"not trackable: {' and '.join(why)}" + (f"; riding {self.limits_text()}" if self.limiting else "")

    def to_dict(self) -> dict:
        return {"trackable": self.trackable, "feasible": self.feasible, "rms": dict(self.rms),
                "tolerance": self.tolerance, "limiting": [list(item) for item in self.limiting],
                "message": self.describe()}


def assess(summary: dict, constraints: dict, tolerance: float) -> Verdict:
    """The :class:`Verdict` of a result from its record's ``summary`` (``tracking_errors``) and ``constraints``
    (:func:`~marionette_control.ocp.report.constraints_record`), with the tracking tolerance (rad)."""
    rms = {name: float(e["rms"]) for name, e in summary["tracking_errors"].items()}
    feasible = bool(constraints.get("feasible", True))
    rows = [r for r in constraints.get("margins") or () if r["active_steps"]]
    limiting = [(r["label"], int(r["active_steps"])) for r in sorted(rows, key=lambda r: -r["active_steps"])]
    trackable = feasible and all(v <= tolerance for v in rms.values())
    return Verdict(trackable, feasible, rms, float(tolerance), limiting)


__all__ = ["Verdict", "assess"]
