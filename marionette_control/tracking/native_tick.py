"""The controller's tick in one call of the compiled core: the parts of :mod:`.tick` fused.

For the Kalman estimator (the default) one tick k of the controller is, with d the command delay
(thesis §6.7.2, (4.36); the modules named hold each rule in its readable form)::

    x̂⁻_k    = f(…f(x̂_{k'}, u_{k'})…, [u_{k−1} forces; ρ measured])    filter prediction  (.estimation)
    x̂_k     = x̂⁻_k + L(k) (q_dyn,k − x̂⁻_dyn,k)                          measurement update (.estimation)
    x̂_{k+d} = f(…f(x̂_k, clamp(u_k))…, clamp(u_{k+d−1}))               commands in flight (.prediction)
    u        = u_d(k+d) − K(k+d)(x̂_{k+d} − x_d(k+d))                    the law, motion or plan (.law,
                                                                         .plan_switch)
    u       += g − y,  y += α (g − y),  g = K_dyn(k+d) δx_dyn             the dynamic feedback lagged unless the
                                                                         surprise detector's test failed lately
                                                                         (.quiet_feedback; the detector's filter
                                                                         steps with the estimate's)
    z       += Δt (q_dyn,k − x_d,dyn(k));  u −= K_z(k+d) z               integral action (.integral_action;
                                                                         past the end the hand-over; held
                                                                         after a saturated command)
    u        = u_d + (1 − s(k+d))(u − u_d)                              a run's start: the feedback faded in
                                                                         (.start_blend)
    ρ        = clip(ρ, the budget around the plan's acceleration)       the feedback's acceleration budget
                                                                         (.acceleration_budget)
    u        = guard(u, x̂_{k+d})                                        the tension of the step (x̂_{k+d}, u)
                                                                         kept at its floor (.tension_guard)
    u        = clamp(u, ρ_{k+d}, v_{k+d})                               the command stream (.command_limits)

and whether u and x̂_k are finite. ``_core.TickKernel`` does all of it in one native call, without
the GIL, allocating nothing but its three output arrays; :class:`.controller.ControllerCore`
uses it whenever the estimator is the Kalman filter and keeps the Python parts (which the Legendre
estimator, the planner's predictions and the tests use) as the reference it must agree with
(``test/test_tick_kernel.py``: to 1e-12 over whole closed-loop runs on the realistic stand-in, with
delays, late commands, gaps and plan switches).

Why one call: at 100 Hz the node's code has been idle for 10 ms before every tick, and on a shared
machine each distinct code path then starts cold (tens of µs per numpy call or call into the core);
the same ticks back to back take a fraction of the time. The fewer paths a tick touches, the less
it pays.

The tick also says whether x̂_k is within the tolerance of tick k (start, path or goal, :mod:`.tolerances`:
|x̂_k,i − x_d,i(k)| ≤ tol_i for every checked i); only when it is not does the Python check run, to find and
describe the worst violation, and decide.

An ordinary tick of a serialized sample is one native call from the bytes on: ``_core.TickPath``
(``cpp/include/marionette/tick_path.hpp``) reads and checks the sample (``_core.SampleGate``,
:meth:`.sample_checks.SampleChecks.gate`), checks its stamp, buffers it (``_core.SampleRing``),
aligns it to the tick grid (``_core.TickAlignment``), runs this kernel and records the command in the
history (``_core.CommandHistory``, which the kernel reads the commands in flight from). It completes
only a tick with nothing to decide; any other sample it leaves untouched (the filter's state restored
when the kernel ran) to :class:`.controller.ControllerCore`, which stays the reference: a run's
first tick, faults and recoveries, ticks past the end, a switch or a plan (a tick where a plan is due
uses the kernel's two halves, ``estimate_predict`` and ``command``, with
:func:`~.plan_switch.off_state` in between; while a plan is in effect the reference x_d(k) is the
law's), and a tick whose estimate leaves its tolerance or whose command is not finite
(``test/test_tick_path.py``).

The integral action is the kernel's ``TickKernel::integral`` (``cpp/src/tick_kernel.cpp``) after the
law and before the clamp, its reference :class:`~.integral_action.AngleIntegral` as
:meth:`.tick.Tracking.command` calls it (suspended while a plan covers the step); z lives
in the kernel (``reset_integral`` at a run's start, ``carry_integral`` on a switch).
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from marionette_control import _core

from marionette_control.tracking.acceleration_budget import AccelerationBudget
from marionette_control.tracking.estimation import KalmanEstimator
from marionette_control.tracking.integral_action import AngleIntegral
from marionette_control.tracking.command_limits import CommandLimits
from marionette_control.tracking.plan_switch import Plan
from marionette_control.tracking.quiet_feedback import QuietFeedback
from marionette_control.tracking.start_blend import StartBlend
from marionette_control.tracking.tension_guard import TensionGuard
from marionette_control.tracking.tolerances import Tolerances
from marionette_control.tracking.law import TrackingLaw


def make_kernel(system, law: TrackingLaw, estimator: KalmanEstimator, limits: CommandLimits,
                delay: int, integral: Optional[AngleIntegral] = None,
                tolerances: Optional[Tolerances] = None, blend: Optional[StartBlend] = None,
                guard: Optional[TensionGuard] = None,
                budget: Optional[AccelerationBudget] = None,
                quiet: Optional[QuietFeedback] = None) -> "_core.TickKernel":
    """The fused tick of ``law``'s trajectory (its X, U, K and feedback switch), ``estimator``'s filter gains
    L (N+1, nx, nd) and gap bridging, the drives' ``limits``, the command delay, ``integral``'s gains K_z
    and hand-over and anti-windup threshold (None: no integral action), the ``tolerances`` its tick checks x̂_k − x_d(k) against
    (None: none), the start ``blend``'s steps (None: none), the tension ``guard``'s strings, minimum tensions,
    reserve and record check (None: none), the acceleration ``budget`` (None: none) and the ``quiet`` feedback's detector gains, lag and
    tests (None: none), over ``system``."""
    tr = law.trajectory
    K_z, steps, saturation = ((None, 1, math.inf) if integral is None
                              else (integral.K_z, integral.hand_over_steps, integral.saturation))
    bounds = None if tolerances is None else np.stack([tolerances.start, tolerances.path, tolerances.goal])
    strings = (None,) * 4 if guard is None else (np.asarray(guard.minimum), guard.reserve, guard.constraint_index,
                                                  guard.length_index)
    quiet_args = None if quiet is None else (quiet.detector.L, quiet.alpha, quiet.beta, quiet.options.threshold,
                                             quiet.options.drive_threshold, quiet.hold_steps, quiet.armed_from)
    return _core.TickKernel(system, tr.X, tr.U, tr.K, law.feedback, estimator.L, estimator.max_gap_steps,
                            limits.lower, limits.upper, limits.rate, limits.acceleration, int(delay), K_z, steps,
                            bounds, 0 if blend is None else blend.steps, *strings,
                            math.inf if budget is None or not budget.active else budget.step, saturation, quiet_args,
                            None if guard is None else (guard.record_tolerance, guard.record_hold))


def set_plan(kernel: "_core.TickKernel", plan: Plan) -> None:
    """The kernel's law is ``plan``'s from its first step to its last (:class:`~.plan_switch.PlannedLaw`)."""
    tr = plan.trajectory
    kernel.set_plan(int(plan.start), tr.X, tr.U, tr.K)


__all__ = ["make_kernel", "set_plan"]
