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
counted satisfied within the optimizer's feasibility tolerance (``ConstraintOptions.tolerance`` times the
constraint's scale: the range width, the speed or acceleration limit, 1 N).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from marionette_control.ocp.problem import ConstraintOptions

PARTS = ("motion", "after_end")


def _worst(margins: np.ndarray, times: np.ndarray, unit: str, scale: float) -> dict:
    """{margin, time_s, unit, satisfied}: the smallest margin and its time (module docstring for 'satisfied')."""
    i = int(np.argmin(margins))
    return {"margin": float(margins[i]), "time_s": float(times[i]), "unit": unit,
            "satisfied": bool(margins[i] >= -ConstraintOptions.tolerance * scale)}


def consecutive_runs(index: np.ndarray) -> list[slice]:
    """Slices of an increasing integer sequence where it steps by exactly 1 (a gap: a lost sample)."""
    if index.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(index) != 1) + 1
    bounds = np.r_[0, breaks, index.size]
    return [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


def drive_margins(limits, rho: np.ndarray, index: np.ndarray, dt: float) -> dict:
    """{drive: {range, speed, acceleration}} worst margins of positions ρ (n, nk) sampled at the step indices
    ``index`` (n,) (speed and acceleration only across consecutive steps), each {margin, time_s, unit,
    satisfied}. limits : model.limits.ModelLimits."""
    out = {}
    if index.size == 0:
        return out
    t = index * dt
    for j, drive in enumerate(limits.kinematic):
        r = rho[:, j]
        entry = {"range": _worst(np.minimum(r - limits.lower[j], limits.upper[j] - r), t, "m",
                                 limits.upper[j] - limits.lower[j])}
        speed, accel = [], []
        for s in consecutive_runs(index):
            v = np.diff(r[s]) / dt
            speed.append((limits.max_velocity[j] - np.abs(v), t[s][1:]))
            accel.append((limits.max_acceleration[j] - np.abs(np.diff(v)) / dt, t[s][2:]))
        for key, parts, unit, scale in (("speed", speed, "m/s", limits.max_velocity[j]),
                                        ("acceleration", accel, "m/s²", limits.max_acceleration[j])):
            values = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0)
            if values.size:
                entry[key] = _worst(values, np.concatenate([p[1] for p in parts]), unit, scale)
        out[drive] = entry
    return out


def tension_margins(limits, steps: np.ndarray, tension: np.ndarray, dt: float,
                    slack: Optional[np.ndarray] = None) -> dict:
    """{string: {margin, time_s, unit, satisfied, lowest_N, minimum_N[, slack_s]}} of the tensions (p, strings) [N]
    over the steps ``steps`` (p,) (step j: j → j+1, timed jΔt) against the strings' minimum; ``slack_s``, the time
    [s] over which the string was slack, when ``slack`` (p, strings) bool says which steps were. Strings without a
    sample are left out. limits : ModelLimits."""
    out = {}
    if steps.size == 0:
        return out
    for i, name in enumerate(limits.strings):
        minimum = float(limits.min_tension[i])
        T = tension[:, i]
        out[name] = {**_worst(T - minimum, steps * dt, "N", 1.0), "lowest_N": float(T.min()), "minimum_N": minimum}
        if slack is not None:
            out[name]["slack_s"] = float(np.count_nonzero(slack[:, i]) * dt)
    return out


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
