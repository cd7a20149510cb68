"""Plans: re-optimized windows of the tracked motion, the rules a plan must meet, and the law over plans.

A receding-horizon planner (:mod:`marionette_control.ocp.mpc`) sends the controller a :class:`Plan`: a window of
trajectory with its gains, (X (n+1, nx), U (n, nU), K (n, nU, nx)), for the steps
``start`` … ``start`` + n of the tracked motion (the tick index of the controller's run), made
for one model and one run. The controller core schedules and takes plans with the same
mechanism that switches trajectories (:meth:`~.controller.ControllerCore.offer_plan`: one
pending switch, taken at its tick or refused there); this module holds what is particular to
plans:

* :func:`check_plan` — the rules a plan must meet when offered, besides those of every trajectory
  (model, gains, their command delay: ``ControllerCore.check_trajectory``): the motion's Δt, a
  start step ≥ 0, an end within the motion;
* :func:`off_state` — the rule at its first step: when the controller computes the command for
  step j = ``start`` (at tick j − d, on the state x̂_j predicted through the commands in flight),
  the plan must start at that state within :class:`SwitchTolerance`, otherwise it was made for
  another state (e.g. a push acted after the estimate it was predicted from) and is refused;
* :class:`PlannedLaw` — the tracking law of thesis §6.7.2 over the motion and the plan in effect,

      u(j) = U_p(j − s) − K_p(j − s)(x̂_j − X_p(j − s)),    s = the plan's start,

  on the active plan within its steps, and on the motion's own trajectory (the *base*) elsewhere:
  after the active plan's last step (a planner that stopped updating) the law is the motion's again.

At the switch the command is the plan's u(s) on the state it was made for: the planner's window
starts at the predicted state with the drives' position and velocity, and its acceleration
constraint includes that first step (:mod:`marionette_control.ocp.constraints`), so the command stream continues within
the drives' limits without a jump (``test/test_plan_switch.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from marionette_control import validation
from marionette_control.model.state_layout import STATE_KINDS, state_by_kind
from marionette_control.tracking.law import TrackingLaw
from marionette_control.trajectory import Trajectory

#: Why a plan was refused (``ControllerCore.plan_rejections`` keys): not tracking, for another run of the
#: controller, for another model or unusable (``invalid``), its first command already computed (``late``), not
#: at the predicted state at its first step (``off_state``), replaced by a newer offer or a trajectory switch
#: before it started (``superseded``).
REJECTIONS = ("not_running", "run", "invalid", "late", "off_state", "superseded")


@dataclass(frozen=True)
class Plan:
    """A re-optimized window of the motion with its gains, for the steps ``start`` … ``start`` + N of one run.

    start : the step index (tick index of the controller's run) of X[0]; trajectory : X (N+1, nx), U (N, nU),
    K (N, nU, nx), with the model identity, Δt and the gains' design record (its ``t0`` = the motion's t0 +
    start Δt); run : the controller's run it is for (``ControllerCore.run``, ``TrackingState.run``);
    sequence : the planner's update number (≥ 1); estimate_tick : the tick of the state estimate it was
    predicted from (-1: unknown).
    """

    start: int
    trajectory: Trajectory
    run: int
    sequence: int = 1
    estimate_tick: int = -1

    @property
    def N(self) -> int:
        return self.trajectory.N

    @property
    def end(self) -> int:
        """The step index of the plan's last state (its last input is for step end − 1)."""
        return self.start + self.trajectory.N

    def describe(self) -> str:
        return f"plan {self.sequence} (run {self.run}, steps {self.start}..{self.end})"


@dataclass(frozen=True)
class SwitchTolerance:
    """How far the predicted state at a plan's first step may be from the plan's X[0], by kind of component.

    dynamic_configuration : rad (the arm's joints);  kinematic_configuration : m (the drives' positions);
    momentum : N m s;  kinematic_velocity : m/s. The drives' velocity over the latency of an update changes with
    the feedback's answers to the ticks in between (up to a few 0.1 m/s on the realistic arm): a plan made for a
    drive velocity further off than 0.1 m/s is refused, since its gains would answer the difference with a jerk
    of the drives that a string feels (measured in docs/mpc.md); a push moves the arm's momenta.
    """

    dynamic_configuration: float = 0.05
    kinematic_configuration: float = 0.005
    momentum: float = 0.05
    kinematic_velocity: float = 0.1

    def __post_init__(self):
        for name in STATE_KINDS:
            validation.positive(getattr(self, name), f"switch tolerance '{name}'")

    def vector(self, model) -> np.ndarray:
        """The tolerance of every state component (nx,), in the state layout [q_dyn; q_kin; p; v]."""
        return state_by_kind(model, **{name: getattr(self, name) for name in STATE_KINDS})


def check_plan(plan: Plan, motion: Trajectory) -> None:
    """Raises ValueError saying what is wrong (a predicate of the plan: "ends at step …") when ``plan`` cannot be a
    window of ``motion`` (Δt, start, end).

    The model and the gains are checked as for every trajectory (``ControllerCore.check_trajectory``)."""
    tr = plan.trajectory
    if isinstance(plan.start, bool) or not isinstance(plan.start, (int, np.integer)) or plan.start < 0:
        raise ValueError(f"has start step {plan.start!r}, expected an integer >= 0")
    if not math.isclose(tr.dt, motion.dt, rel_tol=1e-9):
        raise ValueError(f"has dt {tr.dt:g} s, the tracked motion {motion.dt:g} s")
    if tr.K is None:
        raise ValueError("carries no gains K")
    if plan.end > motion.N:
        raise ValueError(f"ends at step {plan.end}, after the motion's last step {motion.N}")


def off_state(plan: Plan, x: np.ndarray, tolerance: np.ndarray, names) -> Optional[str]:
    """Why ``plan`` does not start at the predicted state x (nx,) within ``tolerance`` (nx,), or None."""
    off = np.abs(x - plan.trajectory.X[0]) - tolerance
    if not np.any(off > 0):
        return None
    i = int(np.argmax(off))
    return (f"{plan.describe()} starts at {names[i]} = {plan.trajectory.X[0, i]:.6g}, the predicted state at step "
            f"{plan.start} has {x[i]:.6g} (tolerance {tolerance[i]:g}): it was made for another state")


class PlannedLaw:
    """The tracking law over the motion and the plan in effect (module docstring); the interface of
    :class:`~.law.TrackingLaw` (``N``, ``trajectory``, ``feedback``, ``reference(k)``, ``command(j, x)``).

    Parameters
    ----------
    base : TrackingLaw
        The law on the motion's trajectory (the plan of last resort).
    """

    def __init__(self, base: TrackingLaw):
        self.base = base
        self.active: Optional[Plan] = None
        self.previous: Optional[Plan] = None   # the plan before the active one (references of ticks before it)
        self._dx = np.empty(base.trajectory.X.shape[1])

    @property
    def N(self) -> int:
        return self.base.N

    @property
    def trajectory(self) -> Trajectory:
        """The base trajectory (the motion)."""
        return self.base.trajectory

    @property
    def feedback(self) -> bool:
        return self.base.feedback

    def install(self, plan: Plan) -> None:
        """``plan`` is in effect from its first step on (the switch: its rules are the core's)."""
        self.previous, self.active = self.active, plan

    def clear(self) -> None:
        """No plan in effect (a new run)."""
        self.previous = self.active = None

    def reference(self, k: int) -> np.ndarray:
        """x_d(k) (nx,) of the plan in effect at step k (the newest that started at or before k and has not ended)."""
        for p in (self.active, self.previous):
            if p is not None and p.start <= k <= p.end:
                return p.trajectory.X[k - p.start]
        return self.base.reference(k)

    def command(self, j: int, x: np.ndarray) -> np.ndarray:
        """u(j) (nU,), a new array, for the state x (nx,) the command acts on."""
        p = self.active
        if p is not None and p.start <= j < p.end:
            return self._law(p, j, x)
        return self.base.command(j, x)

    def feedforward(self, j: int) -> np.ndarray:
        """u_d(j) (nU,) of the law in effect at step j (the plan's, the motion's, the hold past the end); a view."""
        p = self.active
        if p is not None and p.start <= j < p.end:
            return p.trajectory.U[j - p.start]
        return self.base.feedforward(j)

    def preview(self, pending: Optional[Plan]) -> Callable[[int, np.ndarray], np.ndarray]:
        """u(j, x) as the law will give it once ``pending`` (None: none) is in effect: a planner's prediction of
        the commands the controller sends before its next plan takes over
        (:func:`~marionette_control.ocp.mpc.predict_start`)."""
        if pending is None:
            return self.command

        def law(j: int, x: np.ndarray) -> np.ndarray:
            if pending.start <= j < pending.end:
                return self._law(pending, j, x)
            return self.command(j, x)
        return law

    def _law(self, p: Plan, j: int, x: np.ndarray) -> np.ndarray:
        tr, i = p.trajectory, j - p.start
        if not self.base.feedback:
            return tr.U[i].copy()
        np.subtract(x, tr.X[i], out=self._dx)
        return tr.U[i] - tr.K[i] @ self._dx


__all__ = ["Plan", "PlannedLaw", "SwitchTolerance", "REJECTIONS", "check_plan", "off_state"]
