"""The controller's tick over one trajectory: the parts that depend on it, composed, and what a call returns.

:class:`Tracking` holds the parts that depend on one trajectory (each tested on its own):

========================  ===========================================================================
estimator                 x̂_k from the measured configurations (:mod:`.estimation`: Kalman filter on
                          the exact linearization, or the plain discrete Legendre transform)
integral action           z, the integral of the measured angles' error, and its term −K_z z of the law
                          (:mod:`.integral_action`; the gains' design record asks for it); held while it
                          would push further into what the budget, the guard or the clamp took off
                          the last command (anti-windup)
predictor                 x̂_{k+d} through the DEL step with the commands in flight (:mod:`.prediction`)
control law               u = u_d(k+d) − K(k+d)(x̂_{k+d} − x_d(k+d)) over the motion and the plans handed
                          over (:mod:`.law`, :mod:`.plan_switch`)
quiet feedback            the law's feedback on the arm's own state through a first-order lag, stepped aside
                          for a while after a surprise detector's test fails (:mod:`.quiet_feedback`)
start blend               the feedback faded in over a run's first ``start_blend`` s (:mod:`.start_blend`)
acceleration budget       the drives' commanded acceleration within ``feedback_acceleration`` of the plan's
                          (:mod:`.acceleration_budget`)
tension guard             the command moved the least distance that keeps the predicted string tension at
                          its floor, within the drives' limits (:mod:`.tension_guard`)
limits                    range, speed and acceleration of the drives from x̂_{k+d} (:mod:`.command_limits`)
========================  ===========================================================================

One tick (thesis §6.7.2), for the sample q_k that is tick k of the run (the sample checks before it: :mod:`.intake`)::

    record check(q_k's drives) → x̂_k = estimate(q_k) (and the surprise detector's) → x̂_{k+d} = predict(x̂_k) → u = quiet(law(k+d, x̂_{k+d}))
        → u = u − K_z(k+d) z_k
        → u = blend(u) → u = budget(u) → u = guard(u, x̂_{k+d}) → u = clamp(u, the command stream)
        → tolerance(x̂_k − x_d(k))
        → sent; remembered as the input of step k+d

(the record check, with a tension guard: whether the drive encoders confirm the command record; while they do, the
estimate's last step ends at the record's drive positions and the guard's floor holds the minimum,
:mod:`.tension_guard`)

d = ``command_delay_steps``: with ros2_control the command answering the joint state of cycle
k moves the drives from cycle k+1 on (:mod:`.prediction`). With the Kalman estimator the chain
from the estimate to the clamped command is one native call (:mod:`.native_tick`; ``fused=False``:
the parts one by one, the reference it is tested against); a tick where a plan is due calls its two
halves with the plan's switch rule in between.

The tolerance of tick k (:mod:`.tolerances`) is the start tolerance at k = 0, the path tolerance for k < N and the
goal tolerance past the end until the goal is reached (:meth:`Tracking.tolerance_at`); the core decides what a
violation means (:mod:`.faults`: leaving the start or path tolerance ends the run, missing the goal is reported).

On a fault while running the controller sends the **hold command** (:meth:`Tracking.hold_command`):
force inputs 0 and the kinematic configurations held at the last command sent (where the
position-controlled actuators are going), or at the last valid measurement when nothing has been sent
yet — in the actuator range (:meth:`~.command_limits.CommandLimits.hold`); it is remembered as the input
in effect from its slot on (the estimate predicts through it).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import numpy as np

from marionette_control import _core
from marionette_control.lq.gains import integral_gains
from marionette_control.tracking.acceleration_budget import AccelerationBudget
from marionette_control.tracking.command_limits import CommandLimits
from marionette_control.tracking.estimation import KalmanEstimator, LegendreEstimator
from marionette_control.tracking.integral_action import SATURATION, AngleIntegral
from marionette_control.tracking.law import TrackingLaw
from marionette_control.tracking.native_tick import make_kernel, set_plan
from marionette_control.tracking.controller_options import ControllerOptions
from marionette_control.tracking.plan_switch import Plan, PlannedLaw
from marionette_control.tracking.quiet_feedback import QuietFeedback
from marionette_control.tracking.prediction import CommandHistory, DelayPredictor
from marionette_control.tracking.start_blend import StartBlend
from marionette_control.tracking.tension_guard import RECORD_SIGMAS, TensionGuard
from marionette_control.tracking.tolerances import Tolerances, Violation
from marionette_control.trajectory import Trajectory


class TickResult:
    """What one call of the core produced.

    kind : "tick" (tracking command computed), "hold" (hold command after a fault or gap),
           "none" (nothing to send: idle, not a tick slot, or no command possible yet).
    command : ndarray (nU,) [force inputs; ρ_next] in model order, or None.
    k : tick index of a "tick" (k ≥ N: holding the final state), else -1.
    x_hat, x_ref : ndarray (nx,) estimate x̂_k and reference x_d(k) of a "tick", else None.
    fault, fault_message : the fault this call raised, else the latest active one (None when healthy).
    new_fault : this call raised a fault kind that was not active before (log it).
    recovered : this call cleared sample faults (log it).
    missed : tick slots skipped just before this tick.
    compute_ns : time spent in the call (perf_counter_ns).
    event : a trajectory event of this call (taken, switched, a switch refused: its message), else "".
    plan_event : a plan refused at this tick (its message), else "" (switches are counted, not reported).
    guarded : the tension guard moved this tick's command (:mod:`.tension_guard`).
    lookahead : ndarray (L, nU) the inputs of the L steps after the command's (:mod:`.lookahead`) with
        ``command_interface`` joint_trajectory and a "tick", else None (a one-point command).
    """

    __slots__ = ("kind", "command", "k", "stamp_ns", "x_hat", "x_ref", "fault", "fault_message", "new_fault",
                 "recovered", "missed", "compute_ns", "event", "plan_event", "guarded", "lookahead")

    def __init__(self, kind="none", command=None, stamp_ns=0):
        self.kind = kind
        self.command = command
        self.k = -1
        self.stamp_ns = stamp_ns
        self.x_hat = None
        self.x_ref = None
        self.fault = None
        self.fault_message = ""
        self.new_fault = False
        self.recovered = False
        self.missed = 0
        self.compute_ns = 0
        self.event = ""
        self.plan_event = ""
        self.guarded = False
        self.lookahead = None


class Tracking:
    """The parts that depend on one trajectory (module docstring): law (over it and the plans handed over),
    estimator, predictor, command history, limits, the tolerances of its ticks, ``integral``
    (:mod:`.integral_action`, or None: no feedback or no integral in the gains' design), ``blend`` (the start blend,
    :mod:`.start_blend`), ``budget`` (:mod:`.acceleration_budget`), ``guard`` (:mod:`.tension_guard`, or None: no
    feedback or no string), ``quiet`` (:mod:`.quiet_feedback`, or None: no feedback or ``quiet_feedback.cutoff`` 0, the default);
    and ``kernel``, the
    same parts fused into one native call (:mod:`.native_tick`; the integral's z is then ``kernel.z``, whether the guard
    acted ``kernel.guarded``), or None (the Legendre estimator, or ``fused=False``): the parts are called one by one
    then. :meth:`build` makes them for a trajectory."""

    def __init__(self, system, law: PlannedLaw, estimator, predictor: DelayPredictor, limits: CommandLimits,
                 tolerances: Tolerances, warning: Optional[str], integral: Optional[AngleIntegral] = None,
                 kernel=None, blend: Optional[StartBlend] = None, guard: Optional[TensionGuard] = None,
                 budget: Optional[AccelerationBudget] = None, quiet: Optional[QuietFeedback] = None):
        self.system = system
        self.quiet = quiet
        self.tolerances = tolerances
        self.integral = integral
        self.law = law
        self.estimator = estimator
        self.predictor = predictor
        self.history = CommandHistory(system.model.nU, system.model.nk, predictor.delay)
        self.limits = limits
        self.warning = warning
        self.kernel = kernel
        self.blend = blend or StartBlend(0)
        self.guard = guard
        self.budget = budget or AccelerationBudget(math.inf, system.model.nu, system.dt)

    @classmethod
    def build(cls, model, law: TrackingLaw, warning: Optional[str], options: ControllerOptions,
              limits: CommandLimits, tolerances: Tolerances, max_gap_steps: int, fused: bool,
              strings=None) -> "Tracking":
        """The parts tracking ``law``'s trajectory needs (the Kalman filter's gains along it: the costly part).

        ``warning`` : the trajectory's gain warning; ``limits`` : the drives' (any dt); ``tolerances`` : the ones its
        ticks are checked against; ``max_gap_steps`` : the longest gap the Kalman filter bridges; ``fused`` : with the
        Kalman estimator, the native tick (:mod:`.native_tick`); ``strings`` : the model's
        :class:`~marionette_control.model.limits.ModelLimits` (its strings and their minimum tension; None or no
        string: no tension guard). Raises ValueError or ``_core.StepError`` when the trajectory cannot be tracked
        here.
        """
        trajectory = law.trajectory
        system = _core.DiscreteSystem(model, trajectory.dt)
        limits = limits.for_dt(trajectory.dt)
        delay = int(options.command_delay_steps)
        if options.estimator == "kalman":
            estimator = KalmanEstimator(system, trajectory, options.noise, max_gap_steps=max_gap_steps)
        else:
            estimator = LegendreEstimator(system)
        K_z = integral_gains(system, trajectory) if options.feedback else None
        integral = None if K_z is None else AngleIntegral(K_z, trajectory.dt, model.nk,
                                                          saturation=SATURATION if options.anti_windup else math.inf)
        blend = StartBlend(int(round(options.start_blend / trajectory.dt)) if options.feedback else 0)
        budget = AccelerationBudget(options.feedback_acceleration if options.feedback and options.feedback_acceleration
                                    else math.inf, model.nu, trajectory.dt)
        guard = None
        if options.feedback and strings is not None and len(strings.strings):
            guard = TensionGuard(system, strings, options.tension_reserve, limits,
                                 RECORD_SIGMAS * options.noise.actuator, delay)
        quiet = None
        if options.feedback and options.quiet.active:
            detector = KalmanEstimator(system, trajectory, dataclasses.replace(
                options.noise, measurement=options.quiet.detector_measurement), max_gap_steps=max_gap_steps)
            quiet = QuietFeedback(trajectory, detector, options.quiet, armed_from=blend.steps)
        kernel = (make_kernel(system, law, estimator, limits, delay, integral, tolerances, blend, guard, budget, quiet)
                  if fused and options.estimator == "kalman" else None)
        return cls(system, PlannedLaw(law), estimator, DelayPredictor(system, delay, limits), limits, tolerances,
                   warning, integral, kernel, blend, guard, budget, quiet)

    def reset_estimate(self) -> None:
        """The next estimate initialises the estimator and the surprise detector (a new run, a switch, after a
        failure)."""
        self.estimator.reset()
        if self.quiet is not None:
            self.quiet.reset_detector()
        if self.kernel is not None:
            self.kernel.reset()

    def start_run(self, hold: np.ndarray) -> None:
        """A new run (not a switch's): the drives hold ``hold`` (nU,) until the first command, the estimate
        initialises, the integral starts at 0, the feedback is faded in (the start blend)."""
        self.history.start(hold)
        self.reset_estimate()
        if self.integral is not None:
            self.integral.reset()
        self.blend.arm(True)
        if self.guard is not None:
            self.guard.start_run()
        if self.quiet is not None:
            self.quiet.start_run()
        if self.kernel is not None:
            self.kernel.reset_integral()
            self.kernel.start_run(True)

    def carry_over(self, old: "Tracking", k: int) -> None:
        """A switch from ``old`` at its tick k: its commands in flight, its integral and its start blend go on here
        (the model's offset is the arm's, not the trajectory's; the blend is the run's); the estimate initialises."""
        self.history.carry_over(old.history, k)
        if self.integral is not None and old.integral is not None:
            self.integral.carry_over(old.integral)
            if self.kernel is not None and old.kernel is not None:
                self.kernel.carry_integral(old.kernel)
        self.blend.carry_over(old.blend, k)
        if self.kernel is not None and old.kernel is not None:
            self.kernel.carry_blend(old.kernel, k)
        self.reset_estimate()

    def hold_command(self, ticked: bool, measured: Optional[np.ndarray]) -> Optional[np.ndarray]:
        """The hold command (nU,) (module docstring): at the last command sent when the run has ``ticked``, else at
        the ``measured`` configurations (nq,); None without either."""
        model = self.system.model
        last = self.history.last if ticked else None
        if last is not None:
            return self.limits.hold(last[model.nu:])
        return None if measured is None else self.limits.hold(measured[model.nd:])

    def held(self, slot: int, u: np.ndarray) -> None:
        """The hold command u (nU,) sent at tick slot ``slot`` is the input from there on (never before the last
        command sent)."""
        self.history.sent(max(slot, self.history.last_slot or 0), u)

    def stopped(self, slot: int, hold: np.ndarray) -> None:
        """A stop sent at tick slot ``slot`` instead of the hold command ``hold`` (nU,) (joint_trajectory's empty
        trajectory, :mod:`.lookahead`): recorded as the forward position hold is (:meth:`held`), with the points of
        the command it interrupts forgotten, so the commands after it restart from that command's first setpoint at
        rest. (The drives followed those points until the stop and then braked; a stream continued from the braking
        drives reverses their deceleration within a step and was measured to slacken the string:
        docs/tracking.md, "Commands that carry the next setpoints".)"""
        if self.history.last_slot is not None:
            self.history.carries(np.empty((0, self.history.last.size)))
        self.held(slot, hold)

    def tolerance_at(self, k: int, goal_reached: bool) -> Optional[str]:
        """The tolerance tick k is checked against: "start" (k = 0), "path" (k < N), "goal" (k ≥ N, until
        ``goal_reached``) or None."""
        if k == 0:
            return "start"
        if k < self.N:
            return "path"
        return None if goal_reached else "goal"

    def violation(self, which: str, x_hat: np.ndarray, x_ref: np.ndarray) -> Optional[Violation]:
        """The worst violation of the ``which`` tolerance by the configurations of x̂_k − x_d(k) (nx each), or
        None."""
        nq = self.system.model.nq
        err = [a - b for a, b in zip(x_hat.tolist()[:nq], x_ref.tolist())]  # (floats: see check_tolerance)
        return self.tolerances.check(which, err)

    def tick(self, k: int, q: np.ndarray, q_prev: Optional[np.ndarray], x_ref: np.ndarray) -> tuple:
        """(x̂_k, x̂_{k+d}, u, finite, within) of tick k (the module docstring's chain from the estimate to the
        clamped command; x_ref = x_d(k), the integral's reference); within: True when the fused tick found
        x̂_k − x_ref within the tolerance of tick k, else None (not checked, or possibly violated: the caller's
        :mod:`.tolerances` check decides); (None, None, None, False, None) when the estimate needs ``q_prev`` and
        it is None. Raises ``_core.StepError`` when a model step fails."""
        if self.kernel is not None:
            x_hat, x_pred, u, finite, within = self.kernel.tick(k, q, q_prev, self.history, x_ref)
            return x_hat, x_pred, u, finite, within or None
        x_hat, x_pred = self.estimate_predict(k, q, q_prev)
        if x_hat is None:
            return None, None, None, False, None
        return (x_hat, x_pred, *self.command(k, q, x_ref, x_pred, x_hat), None)

    def estimate_predict(self, k: int, q: np.ndarray, q_prev: Optional[np.ndarray]) -> tuple:
        """(x̂_k, x̂_{k+d}), or (None, None) when the estimate needs ``q_prev`` and it is None."""
        if self.kernel is not None:
            return self.kernel.estimate_predict(k, q, q_prev, self.history)
        rho = None
        if self.guard is not None:  # the drive encoders against the command record: the guard's floor and the estimate
            record = self.history.stream_state(k, self.system.dt)[0]
            if self.guard.confirm(q[self.system.model.nd:], record):
                rho = np.asarray(record, dtype=float)
        x_hat = self.estimator.estimate(k, q, q_prev, self.history.applied, rho)
        if x_hat is None:
            return None, None
        if self.quiet is not None:
            self.quiet.observe(k, q, q_prev, self.history.applied, rho)
        return x_hat, self.predictor.predict(k, x_hat, self.history)

    def command(self, k: int, q: np.ndarray, x_ref: np.ndarray, x: np.ndarray, x_hat: np.ndarray) -> tuple:
        """(u, finite) of tick k: the law's command for step j = k + d on the state x it acts on, its dynamic feedback
        lagged (:mod:`.quiet_feedback`), with the integral
        of the measured q (nq,) against x_ref = x_d(k) (suspended while a plan covers j), its feedback faded in at a
        run's start, its drive accelerations within the budget of the plan's, kept at the strings' tension floor by
        the guard and clamped to continue the command stream (the integral held while it would push further into
        what they took off the last command: :mod:`.integral_action`, "Anti-windup"); finite: u and x̂_k are."""
        if self.kernel is not None:
            return self.kernel.command(k, q, x_ref, x, self.history, x_hat)
        j = k + self.predictor.delay
        u = self.law.command(j, x)
        p = self.law.active
        planned = p is not None and p.start <= j < p.end
        if self.quiet is not None:
            self.quiet.apply(j, u, x, self.law.feedback and not planned)
        if self.integral is not None:
            if not planned:  # suspended while a plan (its own LQR) is in effect
                self.integral.update(k, q, x_ref, j)
                self.integral.apply(j, u, self.history.last)
        u_ff = self.law.feedforward(j)
        self.blend.apply(j, u, u_ff)
        u_law = u.copy()
        stream = self.history.stream_state(j, self.system.dt)
        bounds = self.budget.bounds(j, self.law.feedforward, *stream)
        self.budget.apply(u, bounds)
        if self.guard is not None:
            self.guard.project(u, u_ff, x, *stream, bounds)
        self.limits.clamp(u, *stream)
        if self.integral is not None:
            self.integral.note_command(u_law, u)
        return u, all(map(math.isfinite, u.tolist())) and all(map(math.isfinite, x_hat.tolist()))

    @property
    def surprises(self) -> int:
        """The quiet feedback's surprises so far (ticks whose detector test failed; 0 without the quiet feedback)."""
        if self.kernel is not None:
            return self.kernel.surprises
        return 0 if self.quiet is None else self.quiet.surprises

    @property
    def guarded(self) -> bool:
        """Whether the tension guard moved the last command computed."""
        if self.kernel is not None:
            return self.kernel.guarded
        return self.guard is not None and self.guard.acted

    def install_plan(self, plan: Plan) -> None:
        """``plan`` is in effect from its first step on."""
        self.law.install(plan)
        if self.kernel is not None:
            set_plan(self.kernel, plan)

    def clear_plans(self) -> None:
        """No plan in effect (a new run)."""
        self.law.clear()
        if self.kernel is not None:
            self.kernel.clear_plan()

    @property
    def trajectory(self) -> Trajectory:
        return self.law.trajectory

    @property
    def N(self) -> int:
        return self.law.N
