"""Receding-horizon re-optimization (model predictive control) of a tracked motion, ROS-free.

The controller tracks the optimum of a :class:`~.problem.Problem` with time-varying LQR
(:mod:`marionette_control.tracking.law`), which corrects small errors only: after a push the linear feedback saturates
the drives and the stored trajectory stops being a good reference. :class:`RecedingHorizon`
re-plans the rest of the motion from where the arm is, several times a second:

1. **Start.** From the controller's estimate x̂_k of tick k, :func:`predict_start` steps the model
   (the DEL step, thesis (4.36)) to the step j at which the new plan takes effect: through the
   commands already sent (in flight, :mod:`marionette_control.tracking.prediction`) and then through the commands the
   controller will send meanwhile under the plan it has (:meth:`~marionette_control.tracking.plan_switch.PlannedLaw.preview`),
   the way the controller clamps and predicts them. j = k + d + ``latency_steps``: the controller
   uses a plan first at tick j − d, so the update has ``latency_steps`` ticks to arrive
   (:meth:`RecedingHorizon.update` does both steps).
2. **Window.** The problem restricted to the steps j … j + n, n = min(H, N − j) (H the
   ``horizon``): the same terms (:func:`window_cost`) — state and input tracking of the desired
   trajectory's window, and the same constraint barriers (the drives' range, speed and
   acceleration, the step from x(0)'s drive velocity included, and the string tension;
   :mod:`.constraints`) — from x(0) = the predicted state. Where the window ends before the
   motion, its terminal term is the rest of the motion's optimal cost expanded to second order
   about the optimum (:class:`~.terms.TerminalValue` with the costate and the Gauss–Newton
   Hessian of the cost-to-go, :func:`cost_to_go`); at the motion's end it is the problem's own
   terminal term. So the window sees what comes after it, and the motion's optimum restricted to
   the window is stationary for the window: an undisturbed arm's update converges at once to the
   trajectory it has (``test/test_mpc.py``).
3. **Warm start.** A seed that satisfies every constraint, so that the optimizer starts from the last
   barrier problem with the exact logarithm and every iterate after it can be a plan
   (:meth:`RecedingHorizon.warm_start`). The candidates (:meth:`RecedingHorizon.seeds`), in order: the
   previous plan shifted to the window, padded beyond its end with the motion's optimum, tracked from x(0)
   with its gains (the projection operator, thesis (6.10)); then tracked the way the controller does, each
   input clamped to the drives' range, speed and acceleration (:meth:`~marionette_control.tracking.command_limits.CommandLimits.clamp`, a
   ``WARM_START_RESERVE`` inside the limits), with the gains scaled by each of ``SEED_GAIN_SCALES``; then the
   same for the motion's optimum alone. The first that satisfies every constraint (the string's tension
   included) is the seed, else the one closest to it. After a push the full gains' answer asks the drives for
   more than their limits or lets the string go slack; weaker feedback keeps it taut (docs/mpc.md). Then
   optimized (:class:`~.projection.ProjectionOptimizer` with ``warm_start``; quasi-Newton directions by
   default, ``MPCOptions.schedule``).
4. **Anytime, under a deadline.** The plan is due at a tick (:class:`Deadline`: a due time on a clock — the
   wall clock offline, ``MPCOptions.deadline`` from the update's start; in the planner node the ROS clock,
   simulated time under ``use_sim_time``). The optimization stops when ``GAINS_RESERVE`` of the time is left
   or after ``max_iterations``; the update returns the best trajectory that satisfies the constraints, or
   nothing (``infeasible``); an update that overran its deadline returns nothing (``deadline_missed``: its
   plan would arrive late).
5. **Plan.** The window's trajectory with the tracking gains designed for it and the controller's
   command delay (:func:`~marionette_control.lq.gains.design_gains`), the step it starts at and the model identity: a
   :class:`~marionette_control.tracking.plan_switch.Plan`, which the controller switches to at its first step
   (:meth:`~marionette_control.tracking.controller.ControllerCore.offer_plan`, :mod:`marionette_control.tracking.plan_switch`).

**Online identification** (``MPCOptions.identify``, off by default; docs/mpc.md, "Online identification"). With
a :class:`ModelIdentifier` (:class:`marionette_control.identification.online.OnlineIdentification`: the last
``identify_window`` s of measured configurations, the equation error of thesis §5.1.3) the planner is given every
measured configuration (:meth:`RecedingHorizon.observe`) and, between updates, asks for a fit at most every
``identify_period`` s (:meth:`RecedingHorizon.identify`). A model it adopts is prepared there — its
:class:`_core.DiscreteSystem` and the terminal cost-to-go along the motion on it (:func:`cost_to_go`, 5 ms on the
wave) — and taken at the start of the next update (:meth:`RecedingHorizon.take_identified`: by
:meth:`RecedingHorizon.update`; by the planner node before its prediction, when no update runs; by the real-time
iteration, :mod:`.rti`, after its next plan, before it prepares the one after), so that the window's dynamics, the
prediction to the plan's start, the warm start's tracking, the plan's gains and the terminal term are all the
identified model's; the windows are rebuilt on it. The plans keep the controller's model identity (the controller
tracks them with its own, nominal estimate): only parameters that leave the configurations, the momenta's masses
and the string's geometry unchanged (the damping) may be adopted, which
:func:`~marionette_control.identification.online.planner_identification` ensures. With
``plan_identified_only`` the planner plans nothing until it has adopted a model (``awaiting_model``): the
controller's own law tracks the motion meanwhile, with its integral action, which a plan suspends, and on a plant
no fit explains the planner never plans — the controller runs as without it. On the family's damping ×3 plant
that is both better than the LQR alone and than plans from the first update (docs/mpc.md, "Online
identification").

The drives' acceleration term (``MPCOptions.drive_acceleration``) is the one term the window adds to
the problem's: ½ w_a |a_k − a*_k|² against the motion's own drive accelerations a*_k, zero along the
motion (so the motion stays the window's optimum) and the same weight the tracking gains put on the
drives' acceleration (:mod:`marionette_control.lq.gains`): without it a re-plan corrects a push's error with drive
accelerations that let the string go slack (measured, with the other defaults, in docs/mpc.md).

Shapes: states x (nx,), inputs u (nU,); a plan of n steps has X (n+1, nx), U (n, nU), K (n, nU, nx).
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional, Protocol

import numpy as np

from marionette_control import _core, validation
from marionette_control.ocp.constraints import BarrierTerm
from marionette_control.ocp.cost import Cost
from marionette_control.lq.gains import GainDesign, check_gains, design_gains
from marionette_control.tracking.command_limits import CommandLimits
from marionette_control.ocp.projection import OptimizerOptions, ProjectionOptimizer
from marionette_control.tracking.plan_switch import Plan, PlannedLaw
from marionette_control.tracking.prediction import CommandHistory
from marionette_control.ocp.problem import ConstraintOptions, Problem
from marionette_control.lq.riccati import tv_lq
from marionette_control.model.state_layout import drive_acceleration
from marionette_control.ocp.terms import (
    InputTracking,
    OutputTracking,
    Point,
    StateTracking,
    TerminalState,
    TerminalValue,
)
from marionette_control.trajectory import ModelIdentity, Trajectory, TrajectoryError

#: Fraction of each drive limit (of the range's width, the speed, the acceleration) a clamped warm start keeps
#: clear of it: the exact log barrier needs a start strictly inside.
WARM_START_RESERVE = 0.01
#: The scalings of the gains with which the warm start's clamped candidates track their reference, in order of
#: preference (:meth:`RecedingHorizon.seeds`): after a push the full gains can ask for drive motions that let the
#: string go slack, weaker feedback or none can keep it taut (docs/mpc.md).
SEED_GAIN_SCALES = (1.0, 0.5, 0.0)
#: Fraction of an update's time left after its warm start kept for the gains' design: the optimization stops when
#: less is left (the design takes about as long as one iteration's linearization).
GAINS_RESERVE = 0.15
#: The largest residual |h(q)| of the model's holonomic constraints (thesis §3.3) at a predicted state an update
#: plans from; predicted states, stepped by the DEL step, meet them to its Newton tolerance [m]
CHAIN_TOLERANCE = 1e-6


class Deadline:
    """When an update's plan is due: ``due`` on ``clock`` (a function returning seconds on any clock: the wall
    clock offline, the ROS clock the planner node runs on, simulated time under ``use_sim_time``).

    An update stops optimizing when little of it is left (:data:`GAINS_RESERVE`) and hands nothing over once it
    has passed (module docstring, step 4)."""

    def __init__(self, due: float, clock: Callable[[], float]):
        self.due, self.clock = float(due), clock

    @classmethod
    def wall(cls, seconds: float, start: Optional[float] = None) -> "Deadline":
        """``seconds`` of wall clock (``time.perf_counter``) from ``start`` (default: now)."""
        return cls((time.perf_counter() if start is None else start) + seconds, time.perf_counter)

    def left(self) -> float:
        """Seconds left before the plan is due (< 0: past)."""
        return self.due - self.clock()


@dataclass(frozen=True)
class MPCOptions:
    """Settings of :class:`RecedingHorizon` (module docstring).

    horizon : s, the window's length H (shorter at the end of the motion)
    period : s between updates (the rate is 1/period)
    latency_steps : ticks between the estimate an update starts from and the tick at which the controller first
        uses its plan (the plan starts at step k + delay + latency_steps); at least the deadline in steps
    deadline : s per update (prediction, set-up, optimization, gains): of wall clock when an update is given no
        :class:`Deadline`, on the planner node's clock there (besides its plan's due tick); None: none (an iteration
        budget only, for reproducible offline runs). The default leaves 15 ms of the 50 ms latency for the
        transport of the estimate and of the plan between processes
    max_iterations : descent directions per update at most
    tolerance : the optimizer's convergence tolerance |Dg∘ζ|
    schedule : the optimizer's method schedule; quasi-Newton by default: from a warm start near the optimum it
        needs as many iterations as Newton on the wave and each costs half (no second-order derivatives;
        docs/mpc.md)
    drive_acceleration : w_a ≥ 0, weight of ½ w_a |a_k − a*_k|² on the drives' accelerations a_k against the
        motion's a*_k (s⁴/m², the tracking gains' acceleration weight in the cost's ½ convention; 0: none)
    min_steps : no update when fewer steps of the motion remain after the plan's start
    identify : names of the model parameters the planner re-identifies online (module docstring; e.g.
        ``("shoulder.damping", "elbow.damping")``); empty: none (the default)
    identify_window : s of measured configurations each fit uses
    identify_period : s between fits at least (a fit runs after an update, its model is taken by the next)
    plan_identified_only : with ``identify``: no plan until a model is adopted (``awaiting_model``: the controller's
        own law, its integral action included, acts meanwhile), then plans on it (module docstring)

    The plans' tracking gains are the problem's (``Problem.gains``, whose ``delay_steps`` is the controller's
    command delay).
    """

    horizon: float = 1.0
    period: float = 0.1
    latency_steps: int = 5
    deadline: Optional[float] = 0.035
    max_iterations: int = 10
    tolerance: float = 1e-6
    schedule: tuple = (("quasi_newton", None),)
    drive_acceleration: float = 3.0e-4
    min_steps: int = 10
    identify: tuple = ()
    identify_window: float = 1.5
    identify_period: float = 0.1
    plan_identified_only: bool = False

    def __post_init__(self):
        validation.nonnegative(self.drive_acceleration, "MPC option 'drive_acceleration'")
        if isinstance(self.identify, str) or not all(isinstance(n, str) and n for n in self.identify):
            raise ValueError(f"MPC option 'identify' must be a sequence of parameter names (e.g. "
                             f"['shoulder.damping', 'elbow.damping']), got {self.identify!r}")
        object.__setattr__(self, "identify", tuple(self.identify))
        if self.plan_identified_only and not self.identify:
            raise ValueError("MPC option 'plan_identified_only' needs the parameters to identify in 'identify' (e.g. "
                             "['shoulder.damping', 'elbow.damping'])")
        for name in ("horizon", "period", "tolerance", "identify_window", "identify_period"):
            validation.positive(getattr(self, name), f"MPC option '{name}'")
        if self.deadline is not None and validation.problem(self.deadline, positive=True):
            raise ValueError(f"MPC option 'deadline' must be None or a finite number of seconds > 0, got "
                             f"{self.deadline!r}")
        for name, low in (("latency_steps", 0), ("max_iterations", 1), ("min_steps", 1)):
            validation.integer(getattr(self, name), f"MPC option '{name}'", minimum=low)
        # the optimizer's own check of the schedule, in its words
        OptimizerOptions(schedule=self.schedule, tolerance=self.tolerance)

    def steps(self, dt: float) -> tuple[int, int]:
        """(H, period) in steps of ``dt`` (at least one each)."""
        return max(1, int(round(self.horizon / dt))), max(1, int(round(self.period / dt)))

    def check_timing(self, dt: float) -> None:
        """Raises ValueError when the deadline does not fit in the latency (the plan would always be late)."""
        if self.deadline is not None and self.deadline > self.latency_steps * dt + 1e-12:
            raise ValueError(f"the MPC deadline {self.deadline:g} s is longer than its latency of {self.latency_steps} "
                             f"steps ({self.latency_steps * dt:g} s): every plan would arrive after its first step; "
                             f"raise latency_steps to at least {math.ceil(self.deadline / dt - 1e-9)}")


@dataclass
class Update:
    """The outcome of one update: ``plan`` (None: no update) and why (``reason``: the optimizer's reason —
    converged, max_iterations, deadline, line_search_failed, ... — or ``end_of_motion``, ``infeasible``,
    ``deadline_missed``, ``step_failed``, ``awaiting_model``), with the wall-clock times [s] of its parts and the CPU time of the
    thread that ran it (``cpu``: the computation without the waits a loaded machine adds), the iterations,
    the window's steps and the result's cost (without barriers). A real-time iteration (:mod:`.rti`) also records
    ``prepare`` and ``prepare_cpu``: the wall-clock and CPU time of the preparation for the next tick it did after
    its plan (``elapsed`` and ``cpu`` are the time from the estimate to the plan)."""

    plan: Optional[Plan]
    reason: str
    start: int
    steps: int = 0
    iterations: int = 0
    elapsed: float = 0.0
    setup: float = 0.0
    solve: float = 0.0
    gains: float = 0.0
    prepare: float = 0.0
    prepare_cpu: float = 0.0
    cpu: float = 0.0
    cost: float = math.nan
    feasible: bool = False

    def to_dict(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "plan"} | {"planned": self.plan is not None}


def cost_to_go(system, cost: Cost, X: np.ndarray, U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(g (N+1, nx), P (N+1, nx, nx)): gradient and Gauss–Newton Hessian of the optimal cost-to-go V_k(x) of
    ``cost`` (a problem's, with its barriers at their final weight) along (X, U), an optimum of it.

    g is the costate g_k = ℓ_x(k) + A(k)ᵀ g_{k+1}, g_N = Dm (at a stationary point the adjoint of thesis
    Prop. 7 for any gains); P the Riccati matrices of the LQ problem of thesis (B.4) on the cost's
    Gauss–Newton blocks, which in the cost's ½ convention is the Hessian of V_k:
    V_k(x̄_k + δ) ≈ V_k(x̄_k) + g_kᵀδ + ½ δᵀP_kδ.
    """
    X, U = np.asarray(X, float), np.asarray(U, float)
    if cost.needs_lambda:
        A, B, Lam, Lam_x, Lam_u = system.linearize_trajectory(X, U, constraint_forces=True)
        point = Point(X, U, Lam, Lam_x, Lam_u)
    else:
        A, B = system.linearize_trajectory(X, U)
        point = Point(X, U)
    A, B = np.asarray(A), np.asarray(B)
    d = cost.calc_diff(cost.create_data(), point, exact=False)
    P = tv_lq(A, B, d.Lxx, d.Lxu, d.Luu, None, None, d.Lxx_N, None, full_P=True).P
    g = np.empty_like(X)
    g[-1] = d.lx[-1]
    for k in range(U.shape[0] - 1, -1, -1):
        g[k] = d.lx[k] + A[k].T @ g[k + 1]
    return g, np.asarray(P)


def window_cost(cost: Cost, start: int, steps: int, terminal) -> Cost:
    """The terms of ``cost`` (a problem's: tracking, terminal state, constraint barriers) on the steps
    start … start + steps; ``terminal`` (a term with N = steps) replaces the terminal state term unless the window
    ends at the cost's last step. Raises ValueError for a term that has no window (initial-state weight, penalty)."""
    end = start + steps
    if not (0 <= start and 0 < steps and end <= cost.N):
        raise ValueError(f"window {start}..{end} is not within the cost's {cost.N} steps")
    terms = []
    for t in cost.terms:
        if isinstance(t, StateTracking):
            terms.append(StateTracking(t.Xd[start:end + 1], t.Q, t.name))
        elif isinstance(t, InputTracking):
            terms.append(InputTracking(t.Ud[start:end], t.R, t.name))
        elif isinstance(t, OutputTracking):
            terms.append(OutputTracking(t.Gx, t.Gu, t.Yd[start:end], t.W, t.name))
        elif isinstance(t, TerminalState):
            terms.append(TerminalState(t.xd, t.Qf, steps, t.name) if end == cost.N else terminal)
        elif isinstance(t, BarrierTerm):
            terms.append(t)   # the same rows at every step: no window needed
        else:
            raise ValueError(f"cost term '{t.name}' ({type(t).__name__}) has no receding-horizon window")
    return Cost(terms, cost.nx, cost.nU, steps)


def predict_start(system, limits, history: CommandHistory, k: int, x_hat: np.ndarray,
                  law: Callable[[int, np.ndarray], np.ndarray], j: int) -> np.ndarray:
    """x̂_j (nx,) predicted from x̂_k (nx,) through the DEL step (thesis (4.36)) the way the controller will go there.

    ``history`` holds the commands the controller sent up to tick k (:class:`~marionette_control.tracking.prediction.CommandHistory`, not
    changed); the commands of the ticks k+1 … j−d−1 are predicted as the controller will compute them: the law
    (``law(i, x)``, e.g. :meth:`~marionette_control.tracking.plan_switch.PlannedLaw.preview`) on the predicted state, clamped from the command
    stream (:meth:`~marionette_control.tracking.prediction.CommandHistory.stream_state`). Over each step the input in effect is clamped to the
    drives' limits from the predicted drive state (:class:`~marionette_control.tracking.prediction.DelayPredictor`'s rule). ``limits``:
    :class:`~marionette_control.tracking.command_limits.CommandLimits` for Δt. Raises ``_core.StepError`` when the model cannot take a step.
    """
    m = system.model
    nd, nq, dt = m.nd, m.nq, system.dt
    h = history.copy()
    d = h.delay
    x = np.asarray(x_hat, dtype=float)
    u = np.empty(m.nU)
    for i in range(k, j):
        if i - d > k:
            c = law(i, x)
            limits.clamp(c, *h.stream_state(i, dt))
            h.sent(i - d, c)
        u[:] = h.applied(i)
        limits.clamp(u, x[nd:nq], x[nq + nd:])
        x = system.step(x, u)[0]
    return x


class ModelIdentifier(Protocol):
    """What the planner needs of an online identification (module docstring;
    :class:`marionette_control.identification.online.OnlineIdentification`)."""

    def record(self, q: np.ndarray) -> None:
        """One measured configuration q (nq,) in model order."""

    def propose(self):
        """A model fitted to the recent configurations to plan on (same configurations, constraints and string
        geometry as the problem's), or None to keep the current one."""


class RecedingHorizon:
    """Re-optimizes the rest of a motion over a receding horizon (module docstring).

    Parameters
    ----------
    problem : Problem
        The motion's optimization problem (its cost, constraints, model and Δt).
    motion : Trajectory
        Its optimum (the trajectory the controller tracks). The plans' gains are designed the way the motion's
        were (its design record, :meth:`~marionette_control.lq.gains.GainDesign.of`: the weights and the
        controller's command delay); without gains, they and the plans' are the problem's ``gains``.
    options : MPCOptions
    identifier : ModelIdentifier
        The online identification of ``options.identify`` (module docstring); required when that is not empty,
        refused otherwise.
    """

    def __init__(self, problem: Problem, motion: Trajectory, options: MPCOptions = MPCOptions(),
                 identifier: Optional[ModelIdentifier] = None):
        if bool(options.identify) != (identifier is not None):
            raise ValueError("MPC option 'identify' " + (
                f"names {', '.join(options.identify)} but the planner was given no identifier (make it with "
                "marionette_control.identification.online.planner_identification)" if options.identify else
                "is empty but the planner was given an identifier: name the parameters it identifies"))
        model = problem.model
        motion.check_model(model)
        if motion.N != problem.N or not math.isclose(motion.dt, problem.dt, rel_tol=1e-9):
            raise TrajectoryError(f"the motion has {motion.N} steps of {motion.dt:g} s, the problem {problem.N} of "
                                  f"{problem.dt:g} s: it is not this problem's optimum")
        self.problem = problem
        self.options = options
        self.model = model
        self.identity = ModelIdentity.of(model)
        self.dt = problem.dt
        self.N = problem.N
        self.system = _core.DiscreteSystem(model, problem.dt, tolerance=problem.system.tolerance,
                                           max_iterations=problem.system.max_iterations)
        self.gains = (GainDesign.of(motion) if motion.K is not None else None) or problem.gains
        if motion.K is None:
            motion = design_gains(self.system, motion.X, motion.U, self.gains).attach(motion)
        check_gains(motion, self.gains.delay_steps)
        # a plan's gains are the LQR without integral: the controller suspends its integral while a plan is in effect
        # (integral_action), and a planner in another process does not know it
        self.gains = dataclasses.replace(self.gains, angle_integral=0.0)
        self.motion = motion
        self.H, self.period = options.steps(self.dt)
        self.cost = problem.cost
        if options.drive_acceleration > 0:
            Mx, Mu = drive_acceleration(model, self.dt)
            a = motion.X[:-1] @ Mx.T + motion.U @ Mu.T
            self.cost = problem.cost.replaced([OutputTracking(Mx, Mu, a, np.full(model.nk, options.drive_acceleration),
                                                              name="drive_acceleration")])
        self.g, self.P = cost_to_go(self.system, self.cost, motion.X, motion.U)
        self.optimizer_options = dataclasses.replace(
            problem.options, schedule=options.schedule, max_iterations=options.max_iterations,
            tolerance=options.tolerance, warm_start=True, deadline=None, threads=1)
        reserve = {f: WARM_START_RESERVE for f in ("range", "speed", "acceleration")}
        self._drives = CommandLimits.from_limits(ConstraintOptions(margins=reserve).limits(model, problem.limits)
                                                 ).for_dt(self.dt)
        self.updates = 0
        self._windows: dict = {}   # start step -> the window's cost (window)
        self.identifier = identifier
        self.identify_steps = max(1, int(round(options.identify_period / self.dt)))
        self.identifications: list = []   # (tick, adopted, seconds of the fit and the model's preparation)
        self._last_fit: Optional[int] = None
        self._pending: Optional[tuple] = None   # (system, g, P) of an adopted model, taken by the next update
        self.identified = False   # an adopted model was taken: the plans are on it
        self._pending_lock = threading.Lock()   # the planner node fits on a thread of its own (nodes/mpc.py)

    # ---------------------------------------------------------------------------------- online identification

    def observe(self, q: np.ndarray) -> None:
        """Gives the identifier (if any) one measured configuration q (nq,) in model order."""
        if self.identifier is not None:
            self.identifier.record(q)

    def identify(self, k: int) -> Optional[bool]:
        """Between updates, after tick k: asks the identifier for a model when ``identify_period`` has passed
        since the last fit (None: no fit due or no identifier; a tick before the last fit's is a new run) and, when
        it proposes one, prepares it — its system and the terminal cost-to-go along the motion on it
        (:func:`cost_to_go`) — for the next update (True). May run on another thread than the updates."""
        if self.identifier is None or (self._last_fit is not None and 0 <= k - self._last_fit < self.identify_steps):
            return None
        t0 = time.perf_counter()
        self._last_fit = k
        model = self.identifier.propose()
        if model is not None:
            system = _core.DiscreteSystem(model, self.dt, tolerance=self.system.tolerance,
                                          max_iterations=self.system.max_iterations)
            prepared = (system, *cost_to_go(system, self.cost, self.motion.X, self.motion.U))
            with self._pending_lock:
                self._pending = prepared
        self.identifications.append((k, model is not None, time.perf_counter() - t0))
        return model is not None

    def take_identified(self) -> None:
        """Plans on the model :meth:`identify` prepared, if any (the windows are rebuilt on it)."""
        with self._pending_lock:
            pending, self._pending = self._pending, None
        if pending is not None:
            self.system, self.g, self.P = pending
            self._windows.clear()
            self.identified = True

    # ---------------------------------------------------------------------------------- the window

    def window(self, start: int) -> tuple[Cost, int]:
        """(the window's cost, its steps n) for a plan starting at step ``start`` (n = 0: none is left). A window
        depends on the motion alone: each is built once (building one checks its terms' weights, 0.6 ms on the
        arm) and kept (at most one per step of the motion: its terms are views of the motion's references, plus
        the terminal term's nx × nx Hessian)."""
        n = min(self.H, self.N - start)
        if n <= 0:
            return None, 0
        cost = self._windows.get(start)
        if cost is None:
            end = start + n
            terminal = TerminalValue(self.motion.X[end], self.g[end], self.P[end], n, name="terminal")
            cost = self._windows[start] = window_cost(self.cost, start, n, terminal)
        return cost, n

    def reference(self, start: int, steps: int, previous: Optional[Plan] = None) -> tuple:
        """(X (n+1, nx), U (n, nU), K (n, nU, nx)) for the window: the previous plan shifted to it, padded with the
        motion's optimum beyond its end (the optimum alone without a previous plan that covers ``start``)."""
        end = start + steps
        mo = self.motion
        X, U, K = mo.X[start:end + 1].copy(), mo.U[start:end].copy(), mo.K[start:end].copy()
        if previous is not None and previous.start <= start < previous.end:
            a = start - previous.start
            b = min(previous.N, a + steps)
            pt = previous.trajectory
            X[:b - a + 1], U[:b - a], K[:b - a] = pt.X[a:b + 1], pt.U[a:b], pt.K[a:b]
        return X, U, K

    def seeds(self, start: int, steps: int, x0: np.ndarray, previous: Optional[Plan] = None):
        """The warm start's candidates (module docstring, step 3), in order of preference: for the previous plan
        shifted to the window (:meth:`reference`), then for the motion alone, the reference tracked from x0 with its
        gains (the projection operator, thesis (6.10)), then with its gains scaled by each of
        ``SEED_GAIN_SCALES`` and every input clamped to the drives' limits (:meth:`tracked`). Yields
        (X, U, Lam (n, m)) for each that the model can step through."""
        refs = [self.reference(start, steps, previous)]
        if previous is not None and previous.start <= start < previous.end:
            refs.append(self.reference(start, steps))
        for X, U, K in refs:
            try:
                yield tuple(np.asarray(a) for a in self.system.project(x0, X, U, K, constraint_forces=True))
            except _core.StepError:
                pass   # the gains' answer to a push can be a motion the model cannot step through
            for scale in SEED_GAIN_SCALES:
                try:
                    yield self.tracked(x0, X, U, scale * K)
                except _core.StepError:
                    pass

    def worst_margin(self, X: np.ndarray, U: np.ndarray, Lam: np.ndarray) -> float:
        """The smallest margin of the problem's constraints along (X, U) with the multipliers Lam, in units of each
        row's scale (> 0: every constraint satisfied)."""
        point = Point(X, U, Lam)
        return min((float(np.nanmin(c.margins(point) / c.scale)) for c in self.problem.constraints), default=np.inf)

    def warm_start(self, start: int, steps: int, x0: np.ndarray, previous: Optional[Plan] = None) -> tuple:
        """(X (n+1, nx), U (n, nU)): the first of :meth:`seeds` that satisfies every constraint, else the one
        closest to satisfying them (the largest :meth:`worst_margin`). Raises ``_core.StepError`` when the model
        can step through none."""
        best, best_margin = None, -np.inf
        for X, U, Lam in self.seeds(start, steps, x0, previous):
            margin = self.worst_margin(X, U, Lam)
            if margin > 0:
                return X, U
            if margin > best_margin:
                best, best_margin = (X, U), margin
        if best is None:
            raise _core.StepError(f"the model cannot step from the predicted state at step {start} along any "
                                  "warm start")
        return best

    def tracked(self, x0: np.ndarray, X: np.ndarray, U: np.ndarray, K: np.ndarray) -> tuple:
        """(X, U, Lam (n, m)): (X, U) tracked from x0 with the gains K and every input clamped to the drives'
        limits (less the warm-start reserve), as the controller does: u_i = clamp(U_i − K_i(x_i − X_i)) from the
        drive state of x_i (:meth:`~marionette_control.tracking.command_limits.CommandLimits.clamp`); Lam the
        steps' multipliers. The core's loop (``DiscreteSystem.project_clamped``), each step solved as
        ``DiscreteSystem.step`` solves it."""
        d = self._drives
        return self.system.project_clamped(x0, X, U, K, d.lower, d.upper, d.rate, d.acceleration, d.dt)

    # ---------------------------------------------------------------------------------- one update

    def checked_state(self, x, what: str) -> np.ndarray:
        """x as a float array; raises ValueError naming ``what`` unless it is a finite state (nx,) of the model."""
        x = np.asarray(x, dtype=float)
        if x.shape != (self.model.nx,):
            raise ValueError(f"{what} has shape {x.shape}, expected ({self.model.nx},) (the state of model "
                             f"'{self.model.name}': {', '.join(self.model.state_names)})")
        bad = np.flatnonzero(~np.isfinite(x))
        if bad.size:
            raise ValueError(f"{what} has non-finite {self.model.state_names[int(bad[0])]} = {x[bad[0]]}")
        return x

    def check_on_constraints(self, x0: np.ndarray, start: int) -> None:
        """Raises ``_core.StepError`` when the predicted state x0 (nx,) at step ``start`` is off the model's holonomic
        constraints by more than :data:`CHAIN_TOLERANCE` (no plan can start there)."""
        if np.max(np.abs(self.model.constraints(x0[:self.model.nq])[0]), initial=0.0) > CHAIN_TOLERANCE:
            raise _core.StepError(f"the predicted state at step {start} is off the model's constraints")

    def predict(self, k: int, x_hat: np.ndarray, history: CommandHistory, law: PlannedLaw, limits: CommandLimits,
                pending: Optional[Plan] = None) -> tuple[int, np.ndarray]:
        """(j, x0 (nx,)): the step j = k + d + ``latency_steps`` an update from the controller's state estimate x̂_k
        (nx,) of tick k plans from, and x̂_k predicted there (:func:`predict_start`) through the commands the
        controller sent up to tick k (``history``) and those its law (``law``, with the plan ``pending`` in effect
        from its start) will send, each clamped to the controller's ``limits`` (CommandLimits for Δt). Raises
        ValueError for an estimate that is not a finite state or a history of another delay than the gains',
        ``_core.StepError`` when the model cannot step through the prediction."""
        x_hat = self.checked_state(x_hat, f"the estimate of tick {k}")
        d = history.delay
        if d != self.gains.delay_steps:
            raise ValueError(f"the controller's command history has a delay of {d} step(s), the plans' gains are "
                             f"designed for {self.gains.delay_steps}")
        j = k + d + self.options.latency_steps
        return j, predict_start(self.system, limits, history, k, x_hat, law.preview(pending), j)

    def update(self, k: int, x_hat: np.ndarray, history: CommandHistory, law: PlannedLaw, run: int,
               limits: CommandLimits, pending: Optional[Plan] = None,
               should_stop: Optional[Callable[[], bool]] = None, deadline: Optional[Deadline] = None) -> Update:
        """One update from the controller's state estimate x̂_k (nx,) of tick k of its run ``run`` (module
        docstring): :meth:`predict`, then :meth:`plan` under ``deadline`` (default: ``options.deadline`` of wall
        clock from this call). Never raises for a state the model cannot step from."""
        t0, c0 = time.perf_counter(), time.thread_time()
        if deadline is None and self.options.deadline is not None:
            deadline = Deadline.wall(self.options.deadline, t0)
        self.take_identified()
        if self.options.plan_identified_only and not self.identified:
            self.updates += 1
            return Update(None, "awaiting_model", k + history.delay + self.options.latency_steps,
                          elapsed=time.perf_counter() - t0, cpu=time.thread_time() - c0)
        try:
            j, x0 = self.predict(k, x_hat, history, law, limits, pending)
        except _core.StepError:
            self.updates += 1
            return Update(None, "step_failed", k + history.delay + self.options.latency_steps,
                          elapsed=time.perf_counter() - t0, cpu=time.thread_time() - c0)
        return self.plan(j, x0, run, pending or law.active, k, should_stop, (t0, c0), deadline)

    def plan(self, start: int, x0: np.ndarray, run: int, previous: Optional[Plan] = None, estimate_tick: int = -1,
             should_stop: Optional[Callable[[], bool]] = None, started: Optional[tuple] = None,
             deadline: Optional[Deadline] = None) -> Update:
        """The plan for the steps from ``start`` on of the controller's run ``run``, from the predicted state x0
        (nx,) at that step, warm-started from ``previous`` (module docstring). ``started``: (perf_counter(),
        thread_time()) the update's times count from (default: now); ``deadline``: when the plan is due (default:
        ``options.deadline`` of wall clock from ``started``). Never raises for a state the model cannot step from:
        the update then returns no plan (``step_failed``)."""
        t0, c0 = (time.perf_counter(), time.thread_time()) if started is None else started
        opt = self.options
        if deadline is None and opt.deadline is not None:
            deadline = Deadline.wall(opt.deadline, t0)
        x0 = self.checked_state(x0, f"the predicted state at step {start}")
        self.updates += 1
        seq = self.updates
        cost, n = self.window(start)
        if n < opt.min_steps:
            return Update(None, "end_of_motion", start, n, elapsed=time.perf_counter() - t0, cpu=time.thread_time() - c0)
        try:
            self.check_on_constraints(x0, start)
            X, U = self.warm_start(start, n, x0, previous)
        except _core.StepError:
            return Update(None, "step_failed", start, n, elapsed=time.perf_counter() - t0, cpu=time.thread_time() - c0)
        t1 = time.perf_counter()
        stop = should_stop
        if deadline is not None:
            # the gains' design after the optimization takes about as long as one of its iterations' linearization
            reserve = GAINS_RESERVE * deadline.left()

            def stop():
                return deadline.left() < reserve or (should_stop is not None and should_stop())
        res = ProjectionOptimizer(self.system, cost, self.optimizer_options).optimize(X, U, should_stop=stop)
        t2 = time.perf_counter()
        reason = res.reason
        if reason == "cancelled" and deadline is not None and deadline.left() < reserve:
            reason = "deadline"
        out = Update(None, reason, start, n, iterations=res.iterations, setup=t1 - t0, solve=t2 - t1,
                     cost=res.cost, feasible=res.feasible)
        late = deadline is not None and deadline.left() <= 0
        if late or not res.feasible:
            out.reason, out.elapsed, out.cpu = "deadline_missed" if late else "infeasible", t2 - t0, time.thread_time() - c0
            return out
        gains = design_gains(self.system, res.X, res.U, self.gains)
        t3 = time.perf_counter()
        out.gains, out.elapsed, out.cpu = t3 - t2, t3 - t0, time.thread_time() - c0
        if deadline is not None and deadline.left() <= 0:
            out.reason = "deadline_missed"
            return out
        traj = gains.attach(Trajectory.for_model(self.identity, self.dt, res.X, res.U, t0=self.motion.t0 + start * self.dt,
                                                 info={"mpc": {"sequence": seq, "reason": reason,
                                                               "iterations": res.iterations, "cost": res.cost}}))
        out.plan = Plan(start, traj, run, seq, estimate_tick)
        return out


__all__ = ["WARM_START_RESERVE", "SEED_GAIN_SCALES", "GAINS_RESERVE", "CHAIN_TOLERANCE", "Deadline", "MPCOptions",
           "ModelIdentifier", "RecedingHorizon", "Update", "cost_to_go", "window_cost", "predict_start"]
