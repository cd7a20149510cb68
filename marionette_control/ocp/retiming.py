"""Re-timing a desired motion the arm cannot follow: the smallest slow-down at which it becomes trackable.

An animator draws keyframes without regard to the hardware; when the optimum of the motion as drawn is not
*trackable* (:mod:`.trackability`: within its reserved limits and the tracking tolerance), the motion is too
fast for the drives or the string, and the honest answer is the motion the arm *can* make: the same keys, later.
This module finds it, through the arm's own dynamics: every timing tried is optimized by :func:`.optimizer.solve`
on the discrete Euler–Lagrange equations (thesis (4.36)) with every constraint, so "trackable" means what the
projection operator finds, not what a kinematic estimate suggests.

Like a time-optimal path parameterization (TOPP-RA, Pham & Pham, IEEE T-RO 34(3) 2018) the geometry of the
motion — its keyframes, :class:`~.tracking_problem.Keyframes` — is kept apart from its timing; unlike it, the
feasibility of a timing is not a set of per-point constraints on the path speed but the optimizer's verdict on
the whole motion, so the timing is a small family searched by bisection:

* ``uniform``: every keyframe interval stretched by one factor s ≥ 1 (the keys at s·t_i). Search: s = 1 first;
  if the drawn motion is not trackable, s grows by :data:`GROWTH` until it is (at most ``max_factor``), then
  bisection on the whole number of steps N' of the re-timed motion between the largest untrackable and the
  smallest trackable N' found, until they are within ``precision`` (relative) of each other. The factor
  returned is N'dt/T of a timing that *was* found trackable; under the assumption that slower is never harder
  (trackability monotone in s, which the library's motions show, ``docs/motions.md``), no factor below
  (1 − precision) times it is trackable.
* ``warp``: interval i stretched by 1 + (s − 1)·w_i, one s searched as above. The weights w_i ∈ [0, 1] come from
  the optimum of the drawn motion: the stress of interval i is the larger of its RMS tracking error over the
  tolerance and the fraction of its steps at which some constraint is active, clipped to 1, and w = stress /
  max stress; so an interval the drawn optimum follows within the tolerance, off every limit, keeps its timing,
  and the worst one is slowed by s. If the warp is not trackable at s = ``max_factor`` the uniform search is
  run instead (a stress pattern that moved elsewhere).

Every timing's duration is a whole number of steps: the re-timed interval lengths are scaled up together to the
next multiple of dt (:meth:`Timing.times`). Each trial is a full solve from the front end's initial trajectory
(``Problem.rebuild``); a deadline or cancel ends the search with the smallest trackable timing found so far (else
the last one tried), and the record says it was stopped. The result is the trajectory of the chosen timing with
:class:`Retiming` in its ``info["retiming"]``: the factor, the re-timed keyframe times, the verdicts at the drawn
and at the chosen timing (what limited the motion) and every trial.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from marionette_control.ocp.optimizer import Result, solve
from marionette_control.ocp.problem import ACTIVE_MARGIN, Problem, ProblemError
from marionette_control.ocp.trackability import Verdict, assess

#: factor by which the slow-down grows until the motion is trackable (then bisection)
GROWTH = 1.5


@dataclass(frozen=True)
class Timing:
    """A timing of keyframes drawn at ``drawn`` (K,) s: interval i lasts ``segment_factors[i]`` times as long
    ((K−1,), each ≥ 1), then every interval a little longer so the duration is a whole number of steps of ``dt``."""

    drawn: np.ndarray
    segment_factors: np.ndarray
    dt: float

    @classmethod
    def uniform(cls, drawn: np.ndarray, steps: int, dt: float) -> "Timing":
        """Every interval stretched alike to a motion of ``steps`` steps."""
        drawn = np.asarray(drawn, float)
        factor = steps * dt / drawn[-1]
        return cls(drawn, np.full(drawn.size - 1, factor), dt)

    @classmethod
    def warp(cls, drawn: np.ndarray, weights: np.ndarray, s: float, dt: float) -> "Timing":
        """Interval i stretched by 1 + (s − 1)·weights[i] (module docstring)."""
        return cls(np.asarray(drawn, float), 1.0 + (s - 1.0) * np.asarray(weights, float), dt)

    def times(self) -> np.ndarray:
        """The re-timed keyframe times (K,) from 0; the last a whole number of steps."""
        spans = np.diff(self.drawn) * self.segment_factors
        total = spans.sum()
        steps = math.ceil(total / self.dt - 1e-9)
        return np.concatenate([[0.0], np.cumsum(spans * (steps * self.dt / total))])

    @property
    def steps(self) -> int:
        return int(round(self.times()[-1] / self.dt))

    @property
    def factor(self) -> float:
        """The re-timed duration over the drawn one."""
        return float(self.times()[-1] / self.drawn[-1])

    def to_dict(self) -> dict:
        times = self.times()
        return {"factor": self.factor, "duration": float(times[-1]), "drawn_duration": float(self.drawn[-1]),
                "keyframe_times": times.tolist(), "drawn_keyframe_times": self.drawn.tolist(),
                "segment_factors": (np.diff(times) / np.diff(self.drawn)).tolist()}


@dataclass
class Trial:
    """One timing tried: its factor, steps, verdict and how its solve ended."""

    factor: float
    steps: int
    verdict: Verdict
    reason: str

    def to_dict(self) -> dict:
        name, rms = self.verdict.worst
        return {"factor": self.factor, "steps": self.steps, "trackable": self.verdict.trackable,
                "feasible": self.verdict.feasible, "worst": name, "worst_rms": rms, "reason": self.reason}


@dataclass
class Retiming:
    """What the re-timing found (module docstring).

    mode : ``uniform`` or ``warp`` (the search run last: ``uniform`` when the warp fell back to it);
    requested : the mode asked for;  drawn : the :class:`~.trackability.Verdict` of the motion as drawn;
    timing : the chosen :class:`Timing`;  verdict : the chosen timing's;  found : a trackable timing was found;
    stopped : a deadline or cancel ended the search;  trials : every :class:`Trial`, in order;
    weights : (K−1,) the warp's interval weights (None for uniform);  limit : why the search stopped growing
    (e.g. the largest factor, or a duration the front end refuses).
    """

    mode: str
    requested: str
    drawn: Verdict
    timing: Timing
    verdict: Verdict
    found: bool
    stopped: bool = False
    trials: list = field(default_factory=list)
    weights: Optional[np.ndarray] = None
    limit: str = ""

    @property
    def factor(self) -> float:
        return self.timing.factor

    def describe(self) -> str:
        """What the animator reads: "motion needs 1.3× its duration: ..." (or that it needs none)."""
        if self.drawn.trackable:
            return f"motion is trackable as drawn ({self.drawn.describe()})"
        drawn = self.drawn.describe().removeprefix("not trackable: ")
        duration = f"{self.timing.drawn[-1]:.3g} s → {self.timing.times()[-1]:.3g} s"
        how = "slowed where it needs it" if self.mode == "warp" else "slowed uniformly"
        if self.found:
            return (f"motion needs {self.factor:.3g}× its duration ({duration}, {how}): as drawn it {drawn}"
                    + (" (search stopped early: a shorter timing may be trackable)" if self.stopped else ""))
        stop = "search stopped (deadline or cancel)" if self.stopped else self.limit
        return f"motion is not trackable even at {self.factor:.3g}× its duration ({stop}): as drawn it {drawn}"

    def to_dict(self) -> dict:
        return {"mode": self.mode, "requested": self.requested, "found": self.found, "stopped": self.stopped,
                "factor": self.factor, "timing": self.timing.to_dict(), "drawn": self.drawn.to_dict(),
                "verdict": self.verdict.to_dict(), "trials": [t.to_dict() for t in self.trials],
                "weights": None if self.weights is None else np.asarray(self.weights).tolist(), "limit": self.limit,
                "message": self.describe()}


def verdict_of(result: Result) -> Verdict:
    """The :class:`~.trackability.Verdict` of a solve (its record's ``trackability``)."""
    info = result.trajectory.info
    return assess(info["summary"], info["constraints"], result.problem.retime.tolerance)


def interval_stress(result: Result, drawn: np.ndarray) -> np.ndarray:
    """(K−1,) the stress of each keyframe interval of the motion as drawn (module docstring, ``warp``): the larger
    of its RMS tracking error over the tolerance (the worst prescribed configuration) and the fraction of its
    steps at which a constraint is active, clipped to [0, 1]."""
    p, tr = result.problem, result.trajectory
    idx = [p.model.config_index(j) for j in p.tracked]
    error = tr.X[:, idx] - p.Xd[:, idx]
    point = p.point(tr.X, tr.U)
    active = np.zeros(p.N + 1, bool)
    for c in p.constraints:
        M = c.margins(point) / c.scale
        active |= np.any(np.nan_to_num(M, nan=np.inf) < ACTIVE_MARGIN, axis=1)
    t = p.t - p.t[0]
    stress = np.zeros(drawn.size - 1)
    for i, (a, b) in enumerate(zip(drawn[:-1], drawn[1:])):
        sel = (t >= a - 1e-9) & ((t < b - 1e-9) if i < drawn.size - 2 else (t <= b + 1e-9))
        if not sel.any():
            continue
        rms = float(np.sqrt(np.mean(error[sel] ** 2, axis=0)).max()) if idx else 0.0
        stress[i] = min(1.0, max(rms / p.retime.tolerance, float(active[sel].mean())))
    return stress


class _Search:
    """The trials of one re-timing: solves timings through the problem's front end (``Problem.rebuild``) and keeps
    the smallest trackable one."""

    def __init__(self, problem: Problem, solve_problem: Callable[[Problem], Result], should_stop, log):
        self.problem = problem
        self.keyframes = problem.keyframes
        self.solve_problem = solve_problem
        self.should_stop = should_stop or (lambda: False)
        self.say = log or (lambda message: None)
        self.trials: list = []
        self.best: Optional[tuple] = None       # (Timing, Result) of the smallest trackable timing
        self.last: Optional[tuple] = None
        self.stopped = False
        self.limit = ""

    def attempt(self, timing: Timing) -> Optional[bool]:
        """Solves ``timing``: True trackable, False not, None when it could not be tried (stopped, refused)."""
        if self.stopped:
            return None
        try:
            problem = self.problem.rebuild(self.keyframes.retimed(timing.times()))
        except ProblemError as e:
            self.limit = f"{timing.factor:.3g}x is refused: {e}"
            return None
        result = self.solve_problem(problem)
        verdict = verdict_of(result)
        self.trials.append(Trial(timing.factor, timing.steps, verdict, result.result.reason))
        self.last = (timing, result)
        if result.result.reason in ("cancelled", "deadline") or self.should_stop():
            self.stopped = True
        name, rms = verdict.worst
        self.say(f"re-timing: {timing.factor:.4g}× ({timing.times()[-1]:.3g} s): "
                 f"{'trackable' if verdict.trackable else 'not trackable'} ({name} {math.degrees(rms):.3g}° RMS"
                 f"{'' if verdict.feasible else ', constraints violated'}; {result.result.reason})")
        if verdict.trackable and (self.best is None or timing.factor < self.best[0].factor):
            self.best = (timing, result)
        return verdict.trackable if not self.stopped or verdict.trackable else None

    def bracket(self, make: Callable[[float], Timing], max_factor: float) -> Optional[tuple]:
        """(lo, hi) of the parameter of ``make`` (s ≥ 1; s = 1 the drawn timing, already known untrackable) with
        make(lo) untrackable and make(hi) trackable, growing by GROWTH up to ``max_factor``; None if none is
        trackable (or the search stopped)."""
        lo = 1.0
        while lo < max_factor:
            hi = min(lo * GROWTH, max_factor)
            ok = self.attempt(make(hi))
            if ok is None:
                return None
            if ok:
                return lo, hi
            lo = hi
        if not self.limit:
            self.limit = f"the largest slow-down tried is max_factor = {max_factor:g}"
        return None

    def bisect(self, make: Callable[[float], Timing], lo: float, hi: float, precision: float,
               as_steps: bool) -> None:
        """Narrows (lo untrackable, hi trackable) to ``precision`` relative width: on whole steps (``as_steps``:
        make takes a step count) or on the parameter s."""
        while True:
            if as_steps:
                if hi - lo <= max(1, math.floor(precision * hi)):
                    return
                mid = (lo + hi) // 2
            else:
                if hi - lo <= precision * hi:
                    return
                mid = 0.5 * (lo + hi)
            ok = self.attempt(make(mid))
            if ok is None:
                return
            lo, hi = (lo, mid) if ok else (mid, hi)


def solve_retimed(problem: Problem, X0: np.ndarray, U0: np.ndarray, *, stages: Sequence = (),
                  deadline: Optional[float] = None, started: Optional[float] = None,
                  callback=None, stage_callback=None, should_stop: Optional[Callable[[], bool]] = None,
                  log: Optional[Callable[[str], None]] = None, **solve_options) -> Result:
    """Solves ``problem`` from (X0, U0) and, when its ``retime`` mode asks and the motion as drawn is not trackable,
    re-times it (module docstring). Returns the :class:`~.optimizer.Result` of the chosen timing with
    ``result.retiming`` and ``info["retiming"]`` (:class:`Retiming`) and the summary's ``retime_factor``; with mode
    ``off`` (or a trackable motion) the solve of the motion as drawn (its record's ``trackability`` says whether
    it is trackable). ``deadline`` (s from ``started``) covers the whole search; the other arguments are
    :func:`~.optimizer.solve`'s. Raises ProblemError (key ``retime.mode``) when re-timing is asked for a motion
    without keyframes."""
    mode = problem.retime.mode
    started = time.perf_counter() if started is None else started
    if mode != "off" and (problem.keyframes is None or problem.rebuild is None):
        raise ProblemError("re-timing needs the desired motion as keyframes (a motion, keyframes or points), not a "
                           "sampled trajectory", key="retime.mode")

    def solve_problem(p: Problem, X=None, U=None, given_stages=()) -> Result:
        return solve(p, p.X0 if X is None else X, p.U0 if U is None else U, stages=given_stages, deadline=deadline,
                     started=started, callback=callback, stage_callback=stage_callback, should_stop=should_stop,
                     log=log, **solve_options)

    first = solve_problem(problem, X0, U0, stages)
    drawn = verdict_of(first)
    if mode == "off" or drawn.trackable:
        if mode != "off":
            timing = Timing.uniform(problem.keyframes.times, problem.N, problem.dt)
            _attach(first, Retiming(mode, mode, drawn, timing, drawn, True,
                                    trials=[Trial(1.0, problem.N, drawn, first.result.reason)]))
        return first
    say = log or (lambda message: None)
    say(f"the motion as drawn is {drawn.describe()}; re-timing ({mode})")
    search = _Search(problem, solve_problem, should_stop, log)
    search.trials.append(Trial(1.0, problem.N, drawn, first.result.reason))
    opts, drawn_times, dt = problem.retime, problem.keyframes.times, problem.dt
    weights = None
    run = mode

    def warped(s: float) -> Timing:
        return Timing.warp(drawn_times, weights, s, dt)

    def stretched(s: float) -> Timing:
        return Timing.uniform(drawn_times, _steps(problem.N, s), dt)

    def of_steps(n: int) -> Timing:
        return Timing.uniform(drawn_times, n, dt)

    if mode == "warp":
        stress = interval_stress(first, drawn_times)
        if stress.max() > 0:
            weights = stress / stress.max()
            found = search.bracket(warped, opts.max_factor)
            if found is not None:
                search.bisect(warped, *found, opts.precision, as_steps=False)
        if search.best is None and not search.stopped:
            run, weights, search.limit = "uniform", None, ""
            say("re-timing: the warp was not trackable; slowing the motion uniformly")
    if run == "uniform":
        found = search.bracket(stretched, opts.max_factor)
        if found is not None:
            search.bisect(of_steps, *(_steps(problem.N, s) for s in found), opts.precision, as_steps=True)
    timing, result = search.best or search.last or (Timing.uniform(drawn_times, problem.N, dt), first)
    retiming = Retiming(run, mode, drawn, timing, verdict_of(result), search.best is not None, search.stopped,
                        search.trials, weights, search.limit)
    say(retiming.describe())
    _attach(result, retiming)
    return result


def _steps(N: int, s: float) -> int:
    """The whole number of steps of a motion of N steps slowed by s (rounded up)."""
    return math.ceil(N * s - 1e-9)


def _attach(result: Result, retiming: Retiming) -> None:
    result.retiming = retiming
    result.trajectory.info["retiming"] = retiming.to_dict()
    result.trajectory.info["summary"]["retime_factor"] = retiming.factor


__all__ = ["GROWTH", "Timing", "Trial", "Retiming", "verdict_of", "interval_stress", "solve_retimed"]
