"""Executed constraint margins of a run on the stand-in: what the drives and the plant's string actually did.

The optimizer reports the margins of its plan (thesis §6.6, the limits of the model file's ``actuators`` and
strings); these are what happened when a controller ran it, computed the same way for the offline loop
(:meth:`~marionette_control.sim.offline_loop.LoopResult.record`) and for the main job's cross-process runs
(``cli/main_job/analysis.py``), by :func:`executed_margins`:

* commands: the stream of setpoints the controller sent, one per tick, against the drives' range, speed
  |Δρ|/Δt and acceleration |Δ²ρ|/Δt²;
* drives: the plant's true drive positions ρ_k, step by step, against the same limits;
* string tension: the *plant's* (T = 2 L λ/Δt of each of its steps, 0 while a one-sided string is slack,
  :mod:`marionette_control.sim.strings`) against the string's minimum, with its lowest value and, when the run
  says which steps were slack, the time slack.

Time is tick time: tick k measures the state of step k, the command it sends is the drives' setpoint from step
k + delay on (reached at state k + delay + 1), and the tension of step j is over j → j+1, timed at its start.
Each run is split at the trajectory's end N: ``motion`` (the commands of ticks 0 … N, the states and steps up to
state N: what the optimizer kept within the limits) and ``after_end`` (the final state held).

A margin is positive when the limit holds (``limit − |value|``, ``value − minimum``), in the limit's unit, and
counted satisfied within the optimizer's feasibility tolerance times the constraint's scale (the rules, shared
with the controller's ``~/execute`` result: :mod:`marionette_control.model.margins`).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from marionette_control.model.margins import drive_margins, tension_margins

PARTS = ("motion", "after_end")
#: the start of a motion over which its string tension is reported apart [s]: where a kick of the first commands
#: shows (docs/tracking.md, "Start")
START_S = 0.1


def start_tension(t: np.ndarray, tension: np.ndarray, start: float = START_S) -> Optional[float]:
    """The lowest string tension [N] over the steps timed 0 ≤ t ≤ ``start`` s into the motion: t (p,) [s], tension
    (p,) or (p, strings) [N]; None without such a step."""
    sel = (t >= -1e-9) & (t <= start + 1e-9)
    return float(np.min(tension[sel])) if np.size(tension) and sel.any() else None


def executed_margins(limits, dt: float, N: int, delay: int, ticks: np.ndarray, commands: np.ndarray,
                     steps: np.ndarray, drives: np.ndarray, tension_steps: np.ndarray, tension: np.ndarray,
                     slack: Optional[np.ndarray] = None) -> dict:
    """The executed margins of a run (module docstring), during the motion and after its end:
    {"motion" | "after_end": {"commands", "drives": {drive: {range, speed, acceleration}}, "string_tension":
    {string: ...}}}.

    limits : ModelLimits; dt [s]; N : the trajectory's steps; delay : the command delay [steps];
    ticks (n,), commands (n, nk) : the commands sent (the drives' setpoints) and their ticks;
    steps (m,), drives (m, nk) : the plant's true drive positions and the indices of their states;
    tension_steps (p,), tension (p, strings) [N], slack (p, strings) bool or None : the plant's strings over
    steps j → j+1.
    """
    out = {}
    for part, keep in zip(PARTS, (lambda s: s <= N, lambda s: s > N)):
        c, d, s = keep(ticks), keep(steps), keep(tension_steps + 1)
        out[part] = {"commands": drive_margins(limits, commands[c], ticks[c] + delay + 1, dt),
                     "drives": drive_margins(limits, drives[d], steps[d], dt),
                     "string_tension": tension_margins(limits, tension_steps[s], tension[s], dt,
                                                       None if slack is None else slack[s])}
    return out


def tracking_failures(closed: dict, opened: dict, minimum: float) -> list:
    """What a closed-loop run and its feed-forward-only twin (issue 24, the motion library's checks) fail, as
    readable reasons; [] when both pass: no abort (either run), the plant's string at or above ``minimum`` [N] and
    never slack during the closed loop's motion, its first :data:`START_S` included; the closed loop's RMS no worse
    than feed-forward only's on every joint; the closed loop's commands and the drives' true motion within the
    drives' range, speed and acceleration. closed, opened : ``LoopResult.record`` of the two runs."""
    out = [f"{run} aborted: {r['abort_reason']}" for run, r in (("closed loop", closed), ("feed-forward only", opened))
           if r["aborted"]]
    lowest, start = closed["tension_min_n"]["motion"], closed["tension_min_start_n"]
    if lowest is not None and lowest < minimum:
        out.append(f"string at {lowest:.3f} N, below its {minimum:g} N minimum")
    if start is not None and start < minimum:
        out.append(f"string at {start:.3f} N over the first {START_S:g} s, below its {minimum:g} N minimum")
    if closed["slack_s"]["motion"] > 0.0:
        out.append(f"string slack for {closed['slack_s']['motion']:.3f} s")
    for joint, e in closed["errors"].items():
        if e["rms_deg"] > opened["errors"][joint]["rms_deg"]:
            out.append(f"{joint}: closed loop RMS {e['rms_deg']:.3f}° above feed-forward only's "
                       f"{opened['errors'][joint]['rms_deg']:.3f}°")
    for part in ("commands", "drives"):
        for drive, m in closed["margins"]["motion"][part].items():
            out += [f"{part} of the {drive} beyond its {kind} limit by {-margin['margin']:.3g}"
                    for kind, margin in m.items() if not margin["satisfied"]]
    return out
