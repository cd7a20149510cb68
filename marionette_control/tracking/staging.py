"""Trajectories and plans handed to the controller: checked, staged, taken, switched (never retargeted on its own).

Every trajectory the core is given (``ControllerCore.load_trajectory``: a file, the optimizer's topic, a bag
replay) is checked (model, gains, their command delay) and **staged**; a refused one never replaces anything. A
staged trajectory is **taken** (it becomes the one a start tracks) only while the core is idle (not running) and
only if it starts where the arm is: the latest valid sample within the start tolerance of its initial
configuration (or no sample yet, or no trajectory loaded: a start checks the start tolerance again). While idle
this is tried at once, on every valid sample and at a start, so it is taken as soon as the arm is there. While
tracking, a new trajectory only waits: it is taken by an explicit **switch** (:meth:`Staging.request_switch`, the
core's ``switch_trajectory``), which checks the start tolerance against the latest sample when asked and again at
the tick it happens, and then tracks the new trajectory from its k = 0 at that tick, keeping the commands in
flight of the old one (the predictor and the limits continue the same command stream). A switch is scheduled at a
tick of the running run (``at_tick``; default the next tick), which is where a re-planner's "switch at tick j to
this plan" fits. Each event (staged, taken, switched, refused) is counted and its message kept for the
diagnostics; the call that produced it says so (``TickResult.event``).

Plans (receding-horizon re-planning, :mod:`marionette_control.ocp.mpc`) use the same mechanism: one pending switch
at a time, taken at its tick or refused there. A :class:`~.plan_switch.Plan` is a window of the motion being
tracked, for the steps start … end of this run (``run``: counted up at every start and trajectory switch) with its
gains. :meth:`Staging.offer_plan` (the core's ``offer_plan``) checks it as every trajectory (model, gains, their
command delay) and as a window (:func:`~.plan_switch.check_plan`), refuses it when its first command has already
been computed (``late``: tick start − d is past) or it is for another run, and schedules it for tick start − d
(replacing a pending plan, ``superseded``; a pending trajectory switch wins). At that tick, on the state
x̂_{start} predicted through the commands in flight, it is taken if it starts there within
``ControllerOptions.switch_tolerance`` (:func:`~.plan_switch.off_state`), else refused, and the law keeps the plan
it has; a tick that skipped it refuses it as ``late``. The run is not re-indexed and the commands in flight stay;
the law (:class:`~.plan_switch.PlannedLaw`) and the references of the tolerances and ``x_ref`` are the plan's from
its first step to its last, the motion's again after it. Offers, switches and rejections by reason are counted
(``plans.*`` in the core's status, :mod:`.status`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from marionette_control import _core
from marionette_control.lq.gains import check_gains
from marionette_control.tracking.law import TrackingLaw
from marionette_control.tracking.plan_switch import REJECTIONS, Plan, SwitchTolerance, check_plan, off_state
from marionette_control.tracking.tick import Tracking
from marionette_control.tracking.tolerances import Tolerances
from marionette_control.trajectory import ModelIdentity, Trajectory, TrajectoryError

#: Trajectory events counted in the diagnostics (module docstring).
TRAJECTORY_EVENTS = ("staged", "taken", "switched", "refused")


@dataclass
class StagedTrajectory:
    """A checked trajectory waiting to be taken: its tracking law, where it came from, a warning on its gains."""

    trajectory: Trajectory
    source: str
    law: TrackingLaw
    warning: Optional[str]

    def describe(self) -> str:
        t = self.trajectory
        what = f"trajectory {self.source} ({t.N} steps, dt {t.dt:g} s, model '{t.model_name}')"
        return what + (f" [{self.warning}]" if self.warning else "")


@dataclass
class Switch:
    """A requested switch at tick ``at_tick`` of the run: to a trajectory (``tracking``, built from ``staged``),
    which replaces the running one, or to a ``plan``, a window of the running one."""

    at_tick: int
    tracking: Optional[Tracking] = None
    staged: Optional[StagedTrajectory] = None
    plan: Optional[Plan] = None

    def describe(self) -> str:
        what = self.plan.describe() if self.plan is not None else self.staged.source
        return f"{what} (switching at tick {self.at_tick})"


class Staging:
    """The trajectory tracked, the one staged, the switch pending; the run they belong to; events and counts.

    Parameters
    ----------
    model : _core.Model
    delay : the command delay (steps) the trajectories' gains must be designed for
    feedback : False: the laws are feed-forward only
    switch_tolerance : how far a plan may start from the predicted state at its first step
    tolerances : the controller's (the start tolerance decides where the arm must be)
    build : callable(StagedTrajectory) -> Tracking, the parts tracking it (raises ValueError or
        ``_core.StepError`` when it cannot be tracked)
    installed : callable(Tracking), told whenever a trajectory is taken or switched to

    Attributes
    ----------
    tracking : the Tracking of the trajectory taken (None: none yet); ``source`` its source
    staged : the StagedTrajectory waiting (None: none); ``switch``: the Switch pending (None: none)
    error : why the last trajectory was refused ("" once one is staged); ``last_event``: the last event's message
    counts : {event: count} (:data:`TRAJECTORY_EVENTS`); ``run``: the run (counted up at every start and switch)
    plan_counts : {"offered", "switched": count}; ``plan_rejections``: {reason: count}; ``plan_rejection``: the
        last one ("reason: message")
    """

    def __init__(self, model, delay: int, feedback: bool, switch_tolerance: SwitchTolerance, tolerances: Tolerances,
                 build: Callable[[StagedTrajectory], Tracking], installed: Callable[[Tracking], None]):
        self.model = model
        self._identity = ModelIdentity.of(model)   # what a plan is checked against (plans come ten times a second)
        self.delay = delay
        self.feedback = feedback
        self._switch_tol = switch_tolerance.vector(model)
        self.tolerances = tolerances
        self._build = build
        self._installed = installed
        self.tracking: Optional[Tracking] = None
        self.source = ""
        self.staged: Optional[StagedTrajectory] = None
        self.switch: Optional[Switch] = None
        self.error = ""
        self.last_event = ""
        self.counts = dict.fromkeys(TRAJECTORY_EVENTS, 0)
        self.run = 0
        self.plan_counts = {"offered": 0, "switched": 0}
        self.plan_rejections = dict.fromkeys(REJECTIONS, 0)
        self.plan_rejection = ""

    # ----------------------------------------------------------------------------------------- trajectories

    def check(self, trajectory: Trajectory, source: str = "") -> StagedTrajectory:
        """The staged form of ``trajectory`` (its law and gain warning); raises TrajectoryError/ValueError when
        it is unusable here (another model, no gains, gains for another command delay). Cheap: the estimator is
        built only when the trajectory is taken."""
        law = TrackingLaw(self.model, trajectory, feedback=self.feedback)
        return StagedTrajectory(trajectory, source, law, check_gains(trajectory, self.delay))

    def load(self, trajectory: Trajectory, source: str, running: bool, q: Optional[np.ndarray]) -> str:
        """Checks and stages ``trajectory``, taking it at once when not ``running`` and it starts at ``q`` (the
        latest valid sample, None: none); returns what happened. Raises TrajectoryError/ValueError (with ``source``
        in the message) when it is unusable here; nothing changes then (counted as refused)."""
        try:
            staged = self.check(trajectory, source)
        except (TrajectoryError, ValueError) as e:
            self.refuse(source, e)
            raise type(e)(self.error) from None
        self.error = ""
        self.staged = staged
        self.event("staged", f"staged {staged.describe()}")
        if running:
            return self.event("staged", f"staged {staged.describe()}: tracking {self.source} continues; it is taken "
                                        "when tracking ends or on a switch request", count=False)
        return self.take_if_idle(q)[1]

    def refuse(self, source: str, error: Exception) -> None:
        """Records a trajectory refused before it could be staged (unusable here, or a file or message that does
        not hold one): the reason stays in the status until a trajectory is staged."""
        self.error = f"{source}: {error}" if source else str(error)
        self.event("refused", f"refused {source or 'trajectory'}: {error}")

    def event(self, kind: str, message: str, count: bool = True) -> str:
        """Records the event ``kind`` (counted unless ``count`` is False) and its message; returns the message."""
        if count:
            self.counts[kind] += 1
        self.last_event = message
        return message

    def far_from_start(self, staged: StagedTrajectory, q: Optional[np.ndarray]) -> Optional[str]:
        """Why the arm at ``q`` is not where ``staged`` starts (start tolerance), or None (also for no q)."""
        if q is None:
            return None
        far = self.tolerances.check("start", q - staged.trajectory.X[0, :self.model.nq])
        return None if far is None else f"the arm is not where it starts: {far.describe('start')}"

    def take_if_idle(self, q: Optional[np.ndarray]) -> tuple[bool, str]:
        """Idle: takes the staged trajectory if it starts at ``q`` (or q is unknown, or nothing is taken yet)."""
        staged = self.staged
        why = self.far_from_start(staged, q) if self.tracking is not None else None
        if why is not None:
            return False, self.event("staged", f"staged {staged.describe()}, not taken: {why}; it is taken when the "
                                               "arm is there", count=False)
        try:
            tracking = self._build(staged)
        except (ValueError, _core.StepError) as e:
            self.staged = None
            self.error = f"{staged.source}: {e}"
            return False, self.event("refused", f"refused {staged.describe()}: {e}")
        self.staged = None
        self._install(tracking, staged.source)
        return True, self.event("taken", f"took {staged.describe()}")

    def _install(self, tracking: Tracking, source: str) -> None:
        self.tracking = tracking
        self.source = source
        self._installed(tracking)

    def request_switch(self, running: bool, k: Optional[int], q: Optional[np.ndarray],
                       at_tick: Optional[int] = None) -> tuple[bool, str]:
        """A client's request to take the staged trajectory; (accepted, message).

        Idle (not ``running``): taken now if it starts at ``q``, the latest valid sample. Running (``k``: the run's
        last tick, None: none yet): scheduled for tick ``at_tick`` of the run (default: the next tick), if it starts
        at ``q`` (checked again at that tick); from that tick on it is tracked from its k = 0. Refused without a
        staged trajectory.
        """
        staged = self.staged
        if staged is None:
            return False, self.event("refused", "switch refused: no trajectory is staged")
        if not running:
            ok, message = self.take_if_idle(q)
            if not ok and self.staged is not None:
                message = self.event("refused", f"switch refused: {message}")
            return ok, message
        why = self.far_from_start(staged, q)
        if why is not None:
            return False, self.event("refused", f"switch to {staged.describe()} refused: {why}")
        try:
            tracking = self._build(staged)
        except (ValueError, _core.StepError) as e:
            self.staged = None
            return False, self.event("refused", f"switch to {staged.describe()} refused: {e}")
        at = (0 if k is None else k + 1) if at_tick is None else int(at_tick)
        self.staged = None
        if self.switch is not None and self.switch.plan is not None:
            self.reject_plan("superseded", f"{self.switch.plan.describe()} was replaced by a switch to "
                                           f"{staged.describe()}")
        self.switch = Switch(at, tracking, staged)
        return True, self.event("staged", f"switching to {staged.describe()} at tick {at} of the run "
                                          f"(tracking {self.source})", count=False)

    def due(self, k: int) -> Optional[Switch]:
        """The pending switch, taken off, when tick ``k`` is at or past its tick; else None."""
        sw = self.switch
        if sw is None or k < sw.at_tick:
            return None
        self.switch = None
        return sw

    def switch_to(self, sw: Switch, k: int, q: np.ndarray) -> tuple[bool, str]:
        """The trajectory switch ``sw`` at tick ``k`` of the run, on the sample q: (switched, event message).
        Switched: the new trajectory is tracked, with the old one's commands in flight and integral, in a new
        run; refused when the arm is not where it starts."""
        why = self.far_from_start(sw.staged, q)
        if why is not None:
            return False, self.event("refused", f"switch to {sw.staged.describe()} refused at tick {k}: {why}")
        sw.tracking.carry_over(self.tracking, k)
        self._install(sw.tracking, sw.staged.source)
        self.run += 1
        return True, self.event("switched", f"switched at tick {k} to {sw.staged.describe()}")

    def end_run(self, q: Optional[np.ndarray]) -> None:
        """Tracking ended: a pending switch ends with it (its trajectory is staged again, its plan refused), and a
        staged trajectory that starts at ``q`` is taken."""
        sw, self.switch = self.switch, None
        if sw is not None and sw.plan is not None:
            self.reject_plan("not_running", f"tracking ended before {sw.plan.describe()} started")
        elif sw is not None:
            self.staged = sw.staged
        if self.staged is not None:
            self.take_if_idle(q)

    # ----------------------------------------------------------------------------------------- plans

    def offer_plan(self, plan: Plan, running: bool, k: Optional[int]) -> tuple[bool, str]:
        """A re-optimized window of the motion being tracked (module docstring); (accepted, message). ``k`` : the
        run's last tick (None: none yet).

        Accepted: scheduled for tick ``plan.start`` − d, where it is taken if it starts at the predicted state.
        Refused at once (counted by reason, the message says why): not ``running``, for another run, unusable here
        (another model, Δt, no gains or gains for another delay, outside the motion), late (its first command
        already computed), or while a trajectory switch is pending.
        """
        self.plan_counts["offered"] += 1
        if not running:
            return self.reject_plan("not_running", f"{plan.describe()} arrived while not tracking")
        if plan.run != self.run:
            return self.reject_plan("run", f"{plan.describe()} is for run {plan.run}, this is run {self.run}")
        try:
            check_plan(plan, self.tracking.trajectory)
        except ValueError as e:
            return self.reject_plan("invalid", f"{plan.describe()} {e}")
        try:
            # a trajectory's checks, without building a law for it (a plan's is the PlannedLaw's)
            plan.trajectory.check_model(self._identity)
            warning = check_gains(plan.trajectory, self.delay)
        except ValueError as e:
            return self.reject_plan("invalid", f"{plan.describe()}: {e}")
        if warning is not None:
            return self.reject_plan("invalid", f"{plan.describe()}: its gains carry no design record")
        at = plan.start - self.delay
        if k is not None and at <= k:
            return self.reject_plan("late", f"{plan.describe()} arrived after tick {k}, which computed the command "
                                            f"for step {k + self.delay}: its first command (step {plan.start}) was "
                                            f"due at tick {at}")
        pending = self.switch
        if pending is not None:
            if pending.plan is None:
                return self.reject_plan("superseded", f"{plan.describe()} arrived while a switch to "
                                                      f"{pending.describe()} is pending")
            self.reject_plan("superseded", f"{pending.plan.describe()} was replaced by {plan.describe()} before it "
                                           "started")
        self.switch = Switch(at, plan=plan)
        return True, f"{plan.describe()} scheduled for tick {at}"

    def refuse_plan(self, message: str) -> tuple[bool, str]:
        """A plan message that does not hold a plan (inconsistent sizes, say): offered and refused as ``invalid``."""
        self.plan_counts["offered"] += 1
        return self.reject_plan("invalid", message)

    def reject_plan(self, reason: str, message: str) -> tuple[bool, str]:
        """Counts a plan refused for ``reason`` (:data:`~.plan_switch.REJECTIONS`); (False, "reason: message")."""
        self.plan_rejections[reason] += 1
        self.plan_rejection = f"{reason}: {message}"
        return False, self.plan_rejection

    def skipped(self, sw: Switch, k: int) -> str:
        """The plan of ``sw`` refused as ``late``: tick ``k`` came after its tick; the message."""
        return self.reject_plan("late", f"{sw.plan.describe()}: tick {sw.at_tick}, which computes its first "
                                        f"command, was skipped (tick {k})")[1]

    def take_plan(self, plan: Plan, x: np.ndarray) -> str:
        """``plan`` takes over at its first step if it starts at x (nx,), the state predicted there: "" (counted as
        switched); else its refusal's message (``off_state``)."""
        why = off_state(plan, x, self._switch_tol, self.model.state_names)
        if why is not None:
            return self.reject_plan("off_state", why)[1]
        self.tracking.install_plan(plan)
        self.plan_counts["switched"] += 1
        return ""

    @property
    def pending_plan(self) -> Optional[Plan]:
        """The plan scheduled to take over (None: none)."""
        return None if self.switch is None else self.switch.plan
