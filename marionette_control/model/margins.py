"""Executed margins: how close a motion that ran came to a model's limits (the drives' range, speed and acceleration,
the strings' minimum tension).

The optimizer keeps its trajectories inside these limits (its constraints, thesis ref. [16]; ``ocp/constraints.py``
reports the margins of a plan); what a controller sent and what the arm did are judged here by the same rules, for
the main job's report (the simulator's true states) and the controller's ``~/execute`` result (the commands it sent
and its estimate). A margin is positive while the limit holds (``limit − |value|``, ``value − minimum``), in the
limit's unit; a limit counts as kept when margin / scale ≥ −:data:`FEASIBILITY_TOLERANCE`, the optimizer's
feasibility tolerance on its normalized margins (the scales of its constraints: the range width, the speed or
acceleration limit, 1 N).

String tension (thesis (4.36), ``docs/constraint_forces.md``): a midpoint step applies the impulse −Dh(q_k)ᵀλ_k, so
the string's mean tension over step k is T_k = 2 L_k λ_k / Δt with L_k its length configuration.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

#: the optimizer's feasibility tolerance on normalized margins (margin / scale ≥ −tolerance: kept)
FEASIBILITY_TOLERANCE = 1e-6


def worst(margins: np.ndarray, times: np.ndarray, unit: str, scale: float) -> dict:
    """The smallest of ``margins`` (n,) with its time (``times`` (n,), s): {margin, time_s, unit, satisfied}
    (satisfied within :data:`FEASIBILITY_TOLERANCE` of ``scale``)."""
    i = int(np.argmin(margins))
    return {"margin": float(margins[i]), "time_s": float(times[i]), "unit": unit,
            "satisfied": bool(margins[i] >= -FEASIBILITY_TOLERANCE * scale)}


def consecutive_runs(index: np.ndarray) -> list[slice]:
    """Slices of an increasing integer sequence where it steps by exactly 1 (a gap: a lost sample)."""
    if index.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(index) != 1) + 1
    bounds = np.r_[0, breaks, index.size]
    return [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


def drive_margins(limits, rho: np.ndarray, index: np.ndarray, dt: float) -> dict:
    """{drive: {range, speed, acceleration}} worst margins of positions ρ (n, nk) sampled at the step indices
    ``index`` (n,) (speed |Δρ|/Δt and acceleration |Δ²ρ|/Δt² only across consecutive steps), each a
    :func:`worst` record with the ``side`` of the limit ("lower" or "upper") and its value (``limit``). limits :
    :class:`~marionette_control.model.limits.ModelLimits`."""
    out = {}
    if index.size == 0:
        return out
    t = index * dt
    for j, drive in enumerate(limits.kinematic):
        r = rho[:, j]
        below, above = r - limits.lower[j], limits.upper[j] - r
        entry = {"range": worst(np.minimum(below, above), t, "m", limits.upper[j] - limits.lower[j])}
        lower = below.min() <= above.min()
        entry["range"].update(side="lower" if lower else "upper",
                              limit=float(limits.lower[j] if lower else limits.upper[j]))
        speed, accel = [], []
        for s in consecutive_runs(index):
            v = np.diff(r[s]) / dt
            speed.append((limits.max_velocity[j] - np.abs(v), t[s][1:]))
            accel.append((limits.max_acceleration[j] - np.abs(np.diff(v)) / dt, t[s][2:]))
        for key, parts, unit, scale in (("speed", speed, "m/s", limits.max_velocity[j]),
                                        ("acceleration", accel, "m/s²", limits.max_acceleration[j])):
            values = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0)
            if values.size:
                entry[key] = {**worst(values, np.concatenate([p[1] for p in parts]), unit, scale), "side": "upper",
                              "limit": float(scale)}
        out[drive] = entry
    return out


def string_tensions(limits, X: np.ndarray, Lam: np.ndarray, dt: float) -> np.ndarray:
    """T (N, strings) [N]: T_k = 2 L_k λ_k / Δt of every step k (module docstring) from the states X (≥ N, nx)
    and the constraint forces Lam (N, m) of the steps (``DiscreteSystem.constraint_forces_trajectory``), in the
    order of ``limits.strings``."""
    N = Lam.shape[0]
    return 2.0 * X[:N, list(limits.string_length)] * Lam[:, list(limits.string_index)] / dt


def tension_margins(limits, steps: np.ndarray, tension: np.ndarray, dt: float,
                    slack: Optional[np.ndarray] = None) -> dict:
    """{string: {margin, time_s, unit, satisfied, side, limit, lowest_N, minimum_N[, slack_s]}} of the tensions
    (p, strings) [N] over the steps ``steps`` (p,) (step j: j → j+1, timed jΔt) against the strings' minimum;
    ``slack_s``, the time [s] over which the string was slack, when ``slack`` (p, strings) bool says which steps
    were. Empty without a sample. limits : ModelLimits."""
    out = {}
    if steps.size == 0:
        return out
    for i, name in enumerate(limits.strings):
        minimum = float(limits.min_tension[i])
        T = tension[:, i]
        out[name] = {**worst(T - minimum, steps * dt, "N", 1.0), "side": "lower", "limit": minimum,
                     "lowest_N": float(T.min()), "minimum_N": minimum}
        if slack is not None:
            out[name]["slack_s"] = float(np.count_nonzero(slack[:, i]) * dt)
    return out
