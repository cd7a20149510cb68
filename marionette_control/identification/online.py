"""Online identification for the receding-horizon planner: the last W seconds of measured configurations, fitted on
request, an estimate adopted only when the fit can be trusted (issue 24; docs/mpc.md, "Online identification").

The parameters are fitted by the equation error of the constrained DEL equations along the window (thesis §5.1.3,
thesis (4.36); :mod:`.equation_error`, :func:`~.fit.fit_equation_error`) under the calibrator's prior (the model
file's values with :data:`~.fit.DEFAULT_PRIOR`'s uncertainty, :func:`~.fit.default_prior`). Each window is fitted on
its own from that prior (not from the last estimate): an estimate never feeds on itself.

The default selection is the damping of the dynamic configurations: a window of ordinary motion identifies it (the
joints move, and the velocity-proportional torque is what the wave's data fixes best, docs/mpc.md), while the
masses and inertias are fixed by motion data only up to a common factor (:mod:`.fit`, "Scale") and the hook's
placement moves the string, which the controller's estimate lies on (a plan on another string geometry cannot start
from it; docs/tracking.md, "Damping ×3: where the model error bites").

A fit is adopted only when all of these hold; otherwise the current model is kept and the reason counted
(:attr:`OnlineIdentification.counts`, :data:`REASONS`):

* ``too_short`` — the window is not full of consecutive measured samples yet;
* ``at_rest`` — a configuration whose damping is selected did not move: its RMS speed over the window is below
  :data:`MIN_SPEED` (a velocity-proportional torque is then invisible);
* ``fit_failed`` — the fit refused the data (:class:`~.fit.CalibrationError`: e.g. no node left where the string
  pulls) or the model could not be evaluated along it;
* ``not_converged`` — Gauss–Newton stopped on its iteration limit;
* ``invalid`` — an estimate is not finite, or a mass, inertia or damping not above the fit's physical floor;
* ``model_mismatch`` — the fitted model does not explain the window to the encoders' noise: the whitened residuals'
  χ²/dof (≈ 1 when the noise model holds, :class:`~.fit.Calibration`) exceeds :data:`MAX_CHI2_PER_DOF`. Then a
  parameter that is not selected is wrong too and the selected ones take up its error (measured on 1.5 s windows,
  damping selected: χ²/dof 0.5–2.1 on the damping ×3 plant, whose damping is its only error, on the wave and the
  figure-eight, and the estimates within 1–5 %; on the wave 100–440 on the realistic plant (masses +6 %, hook
  1.5 mm), 170–5300 with the forearm +25 %, 900–24000 with the hook +5 mm, whose damping estimates range from 0 to
  20 N m s/rad; on the figure-eight with the forearm +25 % mostly 12–8900, but 1.9–3.7 in a few windows where the
  mass error hardly shows, with estimates 0.012–0.117 for 0.02);
* ``not_identifiable`` — the data did not shrink an estimate's prior standard deviation
  :data:`~.fit.IDENTIFIABLE_SHRINK`-fold (the calibrator's rule);
* ``unconfirmed`` — the fit passed every check above, but the :data:`CONFIRMATIONS` − 1 fits before it did not all
  pass too: an isolated window that a wrong model happens to explain is not enough (the figure-eight with the forearm
  +25 % above: its passing windows stand alone between windows with χ²/dof in the tens to thousands);
* ``adopted`` — otherwise: this fit's estimates.

Shapes: a measured configuration q (nq,) in the model's configuration order (dynamic, then kinematic, as the
encoders report them: ``ModelParameters.configs``); the window (n ≤ W/Δt, nq), oldest first.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from marionette_control import _core, validation
from marionette_control.identification.fit import POSITIVE_FLOOR, fit_equation_error
from marionette_control.identification.parameters import ModelParameters

#: why a fit was or was not adopted, in the order the checks run (module docstring)
REASONS = ("adopted", "too_short", "at_rest", "fit_failed", "not_converged", "invalid", "model_mismatch",
           "not_identifiable", "unconfirmed")
#: RMS speed [rad/s or m/s] over the window below which a configuration counts as at rest for its damping. Measured
#: on 1.5 s windows of the wave fed forward on the realistic stand-in: the shoulder 0.04–0.82 rad/s (median 0.51),
#: the elbow 0.67–1.95; at rest the encoders' counts and noise differenced at 10 ms give 0.03 rad/s
MIN_SPEED = 0.05
#: Gauss–Newton iterations a fit may take: on the selected linear parameters a window the model explains converges
#: in 2–4 (damping ×3); one that needs more is refused (``not_converged``) instead of holding the planner's thread
FIT_ITERATIONS = 8
#: the largest χ²/dof of the whitened equation error at which a fit is taken to explain its window (module docstring)
MAX_CHI2_PER_DOF = 2.5
#: consecutive fits that must pass every check for the last one to be adopted (module docstring, ``unconfirmed``)
CONFIRMATIONS = 3


@dataclass
class OnlineEstimate:
    """One fit of the window: ``reason`` (one of :data:`REASONS`), the estimates and their standard deviations by
    name (empty when no fit ran), the whitened residuals' χ²/dof (NaN when no fit ran), the fit's wall-clock seconds
    and the window's samples."""

    reason: str
    values: dict = field(default_factory=dict)
    std: dict = field(default_factory=dict)
    chi2_dof: float = math.nan
    seconds: float = 0.0
    samples: int = 0

    @property
    def adopted(self) -> bool:
        return self.reason == "adopted"

    def to_dict(self) -> dict:
        return {"reason": self.reason, "values": dict(self.values), "std": dict(self.std), "chi2_dof": self.chi2_dof,
                "seconds": self.seconds, "samples": self.samples}


class OnlineIdentification:
    """The last ``window`` seconds of measured configurations of the model file ``model_file`` and the fit of the
    parameters ``names`` to them (module docstring).

    Parameters
    ----------
    model_file : the nominal model file (the controller's): the parameters' names, structure and prior
    names : parameter names (``<config>.damping``, ``<body>.mass``, ... :mod:`.parameters`); default: the damping
        of every dynamic configuration
    window : seconds of samples the fit uses (at least ten samples per parameter)
    dt : the sampling period of the measurements [s] (the controller's tick)

    :meth:`record` takes each measured configuration, :meth:`fit` fits the window and adopts or refuses,
    :meth:`propose` is what the planner calls (:class:`~marionette_control.ocp.mpc.RecedingHorizon`): the model
    with the adopted estimates, or None. ``current``: {name: value} the model in use (the file's at first);
    ``counts``: the fits by reason; ``history``: every :class:`OnlineEstimate`.
    """

    def __init__(self, model_file, names: Optional[Sequence[str]] = None, window: float = 1.5, dt: float = 0.01):
        validation.positive(dt, "online identification 'dt'")
        validation.positive(window, "online identification 'window'")
        self.params = ModelParameters(model_file)
        names = list(names) if names else [f"{c}.damping" for c in self.params.dynamic]
        self.parameters = self.params.parameters(names)
        self.names = [p.name for p in self.parameters]
        steps = int(round(window / dt))
        if steps < 10 * len(self.parameters) + 2:
            raise ValueError(f"online identification 'window' {window:g} s holds {steps} samples of {dt:g} s: "
                             f"fitting {len(self.parameters)} parameter(s) needs at least "
                             f"{10 * len(self.parameters) + 2} ({(10 * len(self.parameters) + 2) * dt:g} s)")
        self.dt, self.window = float(dt), float(window)
        self._samples: deque = deque(maxlen=steps)
        self._lock = threading.Lock()   # the planner node records on its executor's thread and fits on another
        self._damped = [self.params.configs.index(p.target) for p in self.parameters if p.kind == "damping"]
        self.current = {p.name: self.params.nominal(p) for p in self.parameters}
        self.counts: Counter = Counter({r: 0 for r in REASONS})
        self.history: list = []

    @property
    def nq(self) -> int:
        return len(self.params.configs)

    def record(self, q) -> None:
        """Appends one measured configuration q (nq,) in model order (a sample with a non-finite value is kept
        as a gap: a window with a gap waits until it has passed). Raises ValueError for another shape."""
        q = np.asarray(q, dtype=float)
        if q.shape != (self.nq,):
            raise ValueError(f"a measured configuration has shape {q.shape}, expected ({self.nq},) in the order "
                             f"{', '.join(self.params.configs)}")
        with self._lock:
            self._samples.append(q.copy())

    def samples(self) -> np.ndarray:
        """The window (n, nq), oldest first."""
        with self._lock:
            return np.array(self._samples).reshape(-1, self.nq)

    def fit(self) -> OnlineEstimate:
        """Fits the window and adopts the estimates when the fit is trustworthy (module docstring); the outcome is
        counted and kept in ``history``."""
        t0 = time.perf_counter()
        Q = self.samples()
        out = self._fit(Q)
        out.seconds, out.samples = time.perf_counter() - t0, len(Q)
        before = self.history[len(self.history) - (CONFIRMATIONS - 1):]
        if out.adopted and (len(before) < CONFIRMATIONS - 1
                            or not all(h.reason in ("adopted", "unconfirmed") for h in before)):
            out.reason = "unconfirmed"
        if out.adopted:
            self.current = dict(out.values)
        self.counts[out.reason] += 1
        self.history.append(out)
        return out

    def _fit(self, Q: np.ndarray) -> OnlineEstimate:
        if len(Q) < self._samples.maxlen or not np.all(np.isfinite(Q)):
            return OnlineEstimate("too_short")
        if self._damped:
            speed = np.sqrt(np.mean((np.diff(Q[:, self._damped], axis=0) / self.dt) ** 2, axis=0))
            if np.any(speed < MIN_SPEED):
                return OnlineEstimate("at_rest")
        try:
            cal = fit_equation_error(self.params, Q, self.dt, self.names, max_iterations=FIT_ITERATIONS)
        except (ValueError, _core.StepError, np.linalg.LinAlgError):   # CalibrationError among the ValueErrors
            return OnlineEstimate("fit_failed")
        values = {e.name: e.estimate for e in cal.estimates}
        std = {e.name: e.std for e in cal.estimates}
        chi2 = cal.chi2 / cal.dof
        if not cal.converged:
            reason = "not_converged"
        elif not all(math.isfinite(v) and math.isfinite(std[p.name]) and (not p.linear or v > POSITIVE_FLOOR)
                     for p, v in zip(self.parameters, values.values())):
            reason = "invalid"
        elif chi2 > MAX_CHI2_PER_DOF:
            reason = "model_mismatch"
        elif not all(e.identifiable for e in cal.estimates):
            reason = "not_identifiable"
        else:
            reason = "adopted"
        return OnlineEstimate(reason, values, std, chi2)

    def model(self, values: Optional[dict] = None):
        """The core model of the file with ``values`` {name: value} (default: ``current``) substituted."""
        values = self.current if values is None else values
        return self.params.model({p: values[p.name] for p in self.parameters})

    def propose(self):
        """The planner's request (:class:`~marionette_control.ocp.mpc.ModelIdentifier`): fits the window; the model
        with the adopted estimates, or None when the fit was refused (the planner keeps its model)."""
        return self.model() if self.fit().adopted else None

    def summary(self) -> dict:
        """{"parameters", "current", "counts", "fit_seconds": {median, p99}} for reports."""
        times = [h.seconds for h in self.history if h.values]
        return {"parameters": list(self.names), "current": dict(self.current), "counts": dict(self.counts),
                "fit_seconds": {"median": float(np.median(times)) if times else None,
                                "p99": float(np.percentile(times, 99)) if times else None}}


#: the kinds of parameter the planner may adopt: the plans keep the controller's model identity and start from its
#: nominal estimate, whose configurations lie on the nominal string and whose momenta are the nominal masses' — a
#: placement moves the string (no plan can start from the estimate: every update fails to step) and a mass or inertia
#: the momenta (docs/tracking.md, "Damping ×3: where the model error bites"); the damping moves neither
PLANNER_KINDS = ("damping",)


def planner_identification(model_file, options, dt: float) -> Optional[OnlineIdentification]:
    """The planner's identification of MPCOptions ``options`` (its ``identify`` names and ``identify_window``) on
    ``model_file`` at the tick ``dt``, or None when ``identify`` is empty (the default: off). Raises ValueError for
    a parameter the planner cannot adopt (:data:`PLANNER_KINDS`) or a window too short."""
    if not options.identify:
        return None
    ident = OnlineIdentification(model_file, options.identify, options.identify_window, dt)
    other = [p.name for p in ident.parameters if p.kind not in PLANNER_KINDS]
    if other:
        raise ValueError(f"MPC option 'identify': the planner can adopt only {', '.join(PLANNER_KINDS)} "
                         f"(<config>.damping), not {', '.join(other)}: the controller's estimate lies on the nominal "
                         "model's string and momenta")
    return ident


__all__ = ["REASONS", "MIN_SPEED", "FIT_ITERATIONS", "MAX_CHI2_PER_DOF", "CONFIRMATIONS", "PLANNER_KINDS", "OnlineEstimate",
           "OnlineIdentification", "planner_identification"]
