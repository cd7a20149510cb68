"""Start, path and goal tolerances of trajectory tracking (as joint_trajectory_controller has them).

Pure checks of the configuration error e = q̂ − q_d against per-configuration tolerances,
tested on their own; the controller core decides what a violation means:

* **start** (before and at the first tick): tracking does not start with the arm far from
  q_d(0) — the feedback would jump at the first tick, and the trajectory's initial state,
  the arm at rest there, is what the feed-forward assumes;
* **path** (every tick k < N): |q̂_k − q_d(k)| beyond the path tolerance aborts tracking
  (hold and report);
* **goal** (k >= N): the error must come within the goal tolerance within ``goal_time``
  seconds after the end, otherwise the goal is missed (reported; the final state is held
  either way).

A tolerance of 0 leaves that configuration unchecked (joint_trajectory_controller's
convention). Shapes: error and tolerances (nq,), in model order. :func:`make_tolerances` sets them
for a model: :data:`TOLERANCE_DEFAULTS` by kind of configuration, overridden per configuration
(the controller's ``constraints.<joint>.*`` parameters, :mod:`.controller_options`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from marionette_control import validation


@dataclass(frozen=True)
class Violation:
    """The configuration that is furthest beyond its tolerance: index, name, error, tolerance."""

    index: int
    name: str
    error: float
    tolerance: float

    def describe(self, what: str) -> str:
        return (f"{self.name} is {self.error:+.4g} from the {what} (tolerance {self.tolerance:g}; rad for angles, "
                "m for lengths)")


def check_tolerance(error, tolerance, names: Sequence[str]) -> Optional[Violation]:
    """The worst violation of |error| <= tolerance among checked configurations (tolerance > 0), or None.

    error, tolerance : (nq,) arrays or sequences of floats. "Worst" is the largest ratio |error| / tolerance; a
    non-finite error violates every checked tolerance.
    """
    worst, worst_ratio = None, 1.0
    # on Python floats: the controller checks every tick, and numpy's per-call cost dominates for a few joints
    if isinstance(error, np.ndarray):
        error = error.tolist()
    if isinstance(tolerance, np.ndarray):
        tolerance = tolerance.tolist()
    for i, (e, tol) in enumerate(zip(error, tolerance)):
        if tol > 0.0:
            ratio = abs(e) / tol if math.isfinite(e) else math.inf
            if ratio > worst_ratio:
                worst, worst_ratio = i, ratio
    if worst is None:
        return None
    return Violation(worst, names[worst], float(error[worst]), float(tolerance[worst]))


@dataclass
class Tolerances:
    """Per-configuration tolerances (nq,) of start, path and goal, and the goal time (s); 0 = unchecked."""

    start: np.ndarray
    path: np.ndarray
    goal: np.ndarray
    goal_time: float = 0.0
    names: list = field(default_factory=list)

    @classmethod
    def none(cls, names: Sequence[str]) -> "Tolerances":
        n = len(names)
        return cls(np.zeros(n), np.zeros(n), np.zeros(n), 0.0, list(names))

    def __post_init__(self):
        n = len(self.names)
        for what in ("start", "path", "goal"):
            v = np.asarray(getattr(self, what), dtype=float)
            if v.shape != (n,):
                raise ValueError(f"{what} tolerances have shape {v.shape}, expected ({n},) for {', '.join(self.names)}")
            for name, x in zip(self.names, v.tolist()):
                if validation.problem(x, minimum=0.0):
                    raise ValueError(f"{what} tolerance of {name} must be finite and >= 0 (0: unchecked), got {x}")
            setattr(self, what, v)
        self._lists = {what: getattr(self, what).tolist() for what in ("start", "path", "goal")}
        self.goal_time = validation.nonnegative(self.goal_time, "goal_time (s)")

    def check(self, kind: str, error) -> Optional[Violation]:
        """The worst violation of the ``kind`` ("start", "path" or "goal") tolerances by ``error`` ((nq,) array or
        sequence of floats), or None."""
        return check_tolerance(error, self._lists[kind], self.names)


#: Default tolerances by kind of configuration: (dynamic in rad, kinematic in m), 0 = unchecked.
TOLERANCE_DEFAULTS = {"start": (0.05, 0.02), "path": (0.3, 0.0), "goal": (0.1, 0.0)}


def default_tolerances(model) -> dict:
    """{kind: {configuration name: tolerance}} of :data:`TOLERANCE_DEFAULTS` for ``model``."""
    names = list(model.config_names)
    return {kind: {n: (dyn if i < model.nd else kin) for i, n in enumerate(names)}
            for kind, (dyn, kin) in TOLERANCE_DEFAULTS.items()}


def make_tolerances(model, overrides: dict, goal_time: float) -> Tolerances:
    """Tolerances of ``model``: :func:`default_tolerances` replaced by ``overrides`` ({kind: {name: value}})."""
    values = default_tolerances(model)
    names = list(model.config_names)
    for kind, by_name in overrides.items():
        for name, v in by_name.items():
            if name not in names:
                raise ValueError(f"{kind} tolerance given for '{name}', which is no configuration of "
                                 f"'{model.name}' ({', '.join(names)})")
            values[kind][name] = float(v)
    return Tolerances(*(np.array([values[kind][n] for n in names]) for kind in ("start", "path", "goal")),
                      goal_time=float(goal_time), names=names)
