"""Real-time iteration: one projection-operator step of the receding-horizon problem at every controller tick.

:class:`~.mpc.RecedingHorizon` optimizes each window to convergence, ten times a second. A real-time iteration
(the scheme of Diehl, Bock and Schlöder: not in the thesis, built here from its parts) does one step of the
projection-operator method (thesis ch. 6, Algorithm 1) per tick instead, on the same window problem — the same
terms, constraint barriers and terminal cost-to-go (:meth:`~.mpc.RecedingHorizon.window`) — and hands its
iterate to the controller as the plan of the next tick. Each tick's work is split around the sample:

1. **Prepare** (before the sample, :meth:`RealTimeIteration.prepare`, for the plan starting at step j). The
   previous iterate shifted by one step to the window j … j + n, its tail extended with the motion's optimum
   (:meth:`~.mpc.RecedingHorizon.reference`) and projected from the iterate's last state (thesis (6.10)): ξ̄, a
   trajectory of the model. Along ξ̄: the exact linearization A(k), B(k) with the constraint forces' derivatives
   (thesis (4.37)); the tracking gains the plan will carry (:func:`~marionette_control.lq.gains.design_gains` on
   that linearization), which are also the projection's gains (any stabilizing K defines a projection, thesis
   §6.2); the cost's derivatives on the window problem with its barriers at their final weight — the exact
   logarithm when ξ̄ satisfies every constraint, Hauser and Saccon's quadratic extension while it does not
   (:meth:`~.projection.ProjectionOptimizer.stage_cost`); the backward sweep of the LQ problem (6.29)–(6.30) of
   the quasi-Newton model (thesis §6.5.4, the sweep of thesis (B.4),
   :meth:`~.projection.ProjectionOptimizer.direction_lq`), and the descent direction ζ_d of the window problem:
   its rollout from δx(0) = 0 (thesis §6.5.1), corrected where it would cross a limit the model sees only through
   the barrier's curvature (:func:`~.barrier_direction.barrier_direction`: the barrier on the linearized margins,
   further LQ solves only then; 1.01–1.04 solves per tick on average on the wave, docs/benchmarks.md).
2. **Feedback** (after the sample, :meth:`RealTimeIteration.feedback`). From the controller's estimate x̂_k,
   predicted to j = k + d + ``latency_steps`` (1: the next tick's command) the way the controller will go there
   (:meth:`~.mpc.RecedingHorizon.predict`: the commands in flight, then its law), the LQ solution rolled out from
   δx(0) = x̂_j − x̄(0) gives the answer to the new state, L δx(0) (its rollout less the rollout from 0): the
   initial-value embedding, the LQ problem of thesis (6.29) with its initial state at the estimate instead of
   δx(0) = 0. The new iterate is the projection from x̂_j, ξ = P(ξ̄ + L δx(0) + γ ζ_d) with x(0) = x̂_j. The only
   search is the one that keeps the iterate safe: γ in :data:`STEP_LENGTHS`, the first whose projection satisfies
   every constraint (the drives' range, speed and acceleration and the string's tension, :mod:`.constraints`) and,
   from an interior ξ̄, keeps every margin above (1 − τ) of ξ̄'s (the optimizer's fraction to the boundary τ: an
   iterate on a limit leaves the barrier no room); then γ in :data:`CLAMPED_STEP_LENGTHS` tracked with every input
   clamped inside the drives' limits (:meth:`~.mpc.RecedingHorizon.tracked`): after a push the answer to the new
   state can ask a drive for more than its acceleration at the first step whatever γ is. One rollout and usually
   one projection per tick. The rejected candidates are what made a tick's time vary (docs/benchmarks.md, "the
   update's tail"), so their work is bounded: a candidate of :data:`STEP_LENGTHS` that leaves a constraint within
   its first :data:`PREFIX_STEPS` steps is rejected from those steps (the projection is causal: they are its first
   steps), not projected whole — every one after the first, and the first too after a tick that did not take the
   full step; the clamped tracking is the core's loop (``DiscreteSystem.project_clamped``); and on a tick without a
   plan the iterate the next tick starts from — the candidate with the largest least margin, which may be one
   rejected early — is completed by the next preparation, after the answer. The candidate taken and the iterate are
   those of every candidate projected whole (``test/test_rti.py``).
3. **Plan.** The iterate with the prepared gains is the plan of steps j … j + n
   (:class:`~marionette_control.tracking.plan_switch.Plan`), handed over only when it satisfies every
   constraint (``infeasible`` otherwise: the controller keeps the plan it has, whose steps run a second ahead);
   the iterate is the next tick's start either way. Then the next tick's preparation (step 1 for j + 1) runs,
   before its sample arrives.

Repeated at a fixed start and state, δx(0) = 0 after the first tick and the steps are the quasi-Newton
projection-operator method on the window's last barrier problem, so the iterate converges to the window's optimum,
the plan a converged :meth:`~.mpc.RecedingHorizon.plan` returns (``test/test_rti.py``; a large kick that the clamp
puts on a drive's limit is left slowly, docs/mpc.md); with the state moving, each tick's plan is one iteration
closer to the optimum of the window it starts, and the constraints are checked on every plan handed over. The work
per tick is bounded: no deadline.

Shapes: states x (nx,), inputs u (nU,); a window of n steps has X (n+1, nx), U (n, nU), K (n, nU, nx).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Optional

import numpy as np

from marionette_control import _core
from marionette_control.lq.gains import TrackingGains, design_gains
from marionette_control.lq.riccati import LQSolution
from marionette_control.ocp.barrier_direction import barrier_direction
from marionette_control.ocp.mpc import MPCOptions, RecedingHorizon, Update
from marionette_control.ocp.problem import Problem
from marionette_control.ocp.projection import ProjectionOptimizer
from marionette_control.ocp.terms import Point
from marionette_control.tracking.command_limits import CommandLimits
from marionette_control.tracking.plan_switch import Plan, PlannedLaw
from marionette_control.tracking.prediction import CommandHistory
from marionette_control.trajectory import Trajectory

#: The scalings γ of the descent part of the direction tried in turn after a sample, the first whose projection
#: satisfies every constraint is the iterate (module docstring, step 2); 0: the answer to the new state alone.
STEP_LENGTHS = (1.0, 0.5, 0.25, 0.0)
#: The same for the direction tracked with the inputs clamped to the drives' limits, tried after those
#: (:meth:`RealTimeIteration._candidates`).
CLAMPED_STEP_LENGTHS = (1.0, 0.0)
#: A candidate of :data:`STEP_LENGTHS` whose projection leaves a constraint in its first this many steps by more
#: than the feasibility tolerance plus :data:`PREFIX_BAND` (normalized margin) is rejected without the rest of its
#: projection (:meth:`RealTimeIteration._prefix_leaves`; every one after the first, and the first too after a tick
#: that did not take the full step): after a push the answer to the new state asks a drive for more than its speed
#: or acceleration within the first steps whatever γ is. (The clamped candidates are not checked so: they keep the
#: drives' limits by construction and, measured, pass their first steps.)
PREFIX_STEPS = 10
#: far above the rounding between the margins of a prefix and those of the whole projection (≈ 1e-15)
PREFIX_BAND = 1e-6
#: the mark of a candidate skipped after its first steps in :meth:`RealTimeIteration.feedback`'s list of those tried
_SKIPPED = object()


def rti_options(horizon: float = 1.0, dt: float = 0.01, **changes) -> MPCOptions:
    """The :class:`~.mpc.MPCOptions` of a real-time iteration: a plan every tick (period ``dt``), used from the
    next tick on (latency 1 step), no deadline (a fixed amount of work), over ``horizon`` seconds."""
    return MPCOptions(horizon=horizon, period=dt, latency_steps=1, deadline=None, **changes)


@dataclass
class Prepared:
    """A tick's preparation (module docstring, step 1) for the window of ``steps`` steps from step ``start``.

    X (n+1, nx), U (n, nU): the shifted iterate ξ̄ made a trajectory; gains: the tracking gains along it (K
    (n, nU, nx)); lq: the LQ solution of the quadratic model; Z0 (n+1, nx), V0 (n, nU): its rollout from
    δx(0) = 0; Zd, Vd: the descent direction (the barrier on the linearized margins minimized from (Z0, V0),
    :func:`~.barrier_direction.barrier_direction`); solves: the LQ problems solved for it (1: (Z0, V0) itself);
    optimizer: the window's :class:`~.projection.ProjectionOptimizer`; margins: the normalized margins of every
    constraint row and step along ξ̄ (flat, ``ProjectionOptimizer.margins``); feasible: whether ξ̄ satisfies every
    constraint; seconds: the preparation's wall-clock time."""

    start: int
    steps: int
    X: np.ndarray
    U: np.ndarray
    gains: TrackingGains
    lq: LQSolution
    Z0: np.ndarray
    V0: np.ndarray
    Zd: np.ndarray
    Vd: np.ndarray
    solves: int
    optimizer: ProjectionOptimizer
    margins: np.ndarray
    feasible: bool
    seconds: float


class RealTimeIteration:
    """One projection-operator iteration of the receding-horizon problem per controller tick (module docstring).

    Parameters
    ----------
    problem : Problem
        The motion's optimization problem.
    motion : Trajectory
        Its optimum with its gains (the trajectory the controller tracks), as for
        :class:`~.mpc.RecedingHorizon`, whose window, reference, prediction and constraint checks this uses.
    options : MPCOptions
        :func:`rti_options` (a plan every tick: ``period`` one time step); the window's length is ``horizon``.

    identifier :
        The online identification of ``options.identify`` (:class:`~.mpc.RecedingHorizon`'s).

    The interface the offline closed loop drives (``sim/offline_loop.py``): ``options``, ``period``, ``motion``,
    :meth:`update`, :meth:`observe`, :meth:`identify`.
    """

    def __init__(self, problem: Problem, motion: Trajectory, options: Optional[MPCOptions] = None,
                 identifier=None):
        options = options or rti_options(dt=problem.dt)
        _, period = options.steps(problem.dt)
        if period != 1:
            raise ValueError(f"a real-time iteration plans every tick: MPC option 'period' must be one time step "
                             f"({problem.dt:g} s), got {options.period:g} s ({period} steps)")
        if options.deadline is not None:
            raise ValueError(f"a real-time iteration does a fixed amount of work per tick: MPC option 'deadline' "
                             f"must be None, got {options.deadline!r}")
        if options.plan_identified_only:
            raise ValueError("MPC option 'plan_identified_only' is the receding horizon's: a real-time iteration "
                             "carries its iterate from tick to tick and plans from the first")
        self.horizon = RecedingHorizon(problem, motion, options, identifier)
        for start in range(self.horizon.N):   # every window built before the first tick (RecedingHorizon.window)
            self.horizon.window(start)
        self.options = options
        self.motion = self.horizon.motion
        self.period = 1
        self.observe, self.identify = self.horizon.observe, self.horizon.identify
        self.identifications = self.horizon.identifications
        self._tolerance = self.horizon.optimizer_options.feasibility_tolerance
        self._iterate: Optional[Plan] = None
        self._settle = None   # what completes an infeasible tick's iterate (feedback), run on first use (iterate)
        self._full_step_taken = True   # whether the last feedback took the full step (step_1)
        self.prepared: Optional[Prepared] = None
        self.updates = 0

    @property
    def system(self):
        """The horizon's system: the model it plans on (an identified one once adopted, :mod:`.mpc`)."""
        return self.horizon.system

    @property
    def iterate(self) -> Optional[Plan]:
        """The last iterate (handed over or not). After a tick without a plan whose best iterate needs projections
        the feedback skipped (:meth:`feedback`), those are made here, on first use: by the next preparation."""
        if self._settle is not None:
            settle, self._settle = self._settle, None
            self._iterate = settle()
        return self._iterate

    @iterate.setter
    def iterate(self, plan: Optional[Plan]) -> None:
        self._iterate, self._settle = plan, None

    def reset(self) -> None:
        """Forget the iterate and the preparation (a new run of the controller)."""
        self.iterate = self.prepared = None
        self._full_step_taken = True

    # ---------------------------------------------------------------------------------- before the sample

    def prepare(self, start: int) -> Optional[Prepared]:
        """The preparation for the plan starting at step ``start`` (module docstring, step 1), kept for
        :meth:`feedback`; None (nothing kept) when fewer than ``options.min_steps`` steps of the motion remain.
        Raises ValueError for a start outside the motion, ``_core.StepError`` when the model cannot step along
        the shifted iterate nor along the motion's optimum."""
        t0 = time.perf_counter()
        h = self.horizon
        if isinstance(start, bool) or not isinstance(start, (int, np.integer)) or not 0 <= start <= h.N:
            raise ValueError(f"the plan's start step must be an integer in 0..{h.N} (the motion's steps), got "
                             f"{start!r}")
        iterate = self.iterate   # completed here when the feedback left it to the preparation
        cost, n = h.window(start)
        self.prepared = None
        if n < self.options.min_steps:
            return None
        previous = iterate if iterate is not None and iterate.start <= start else None
        try:
            X, U = self._trajectory(start, n, previous)
        except _core.StepError:
            if previous is None:
                raise
            X, U = self._trajectory(start, n, None)   # the shifted iterate's tail left the model's reach
        A, B, Lam, Lam_x, Lam_u = self.system.linearize_trajectory(X, U, constraint_forces=True)
        A, B = np.asarray(A), np.asarray(B)
        gains = design_gains(self.system, X, U, h.gains, (A, B))
        opt = h.optimizer_options
        optimizer = ProjectionOptimizer(self.system, cost, opt)
        point = Point(X, U, Lam, Lam_x, Lam_u)
        margins = optimizer.margins(point)
        feasible = float(np.min(margins, initial=np.inf)) >= -self._tolerance
        stage = optimizer.stage_cost(1.0, feasible, opt.barrier_delta)
        lq, model, lx, lu, _ = optimizer.direction_lq("quasi_newton", X, U, A, B, gains.K, point, stage)
        Z0, V0 = lq.rollout(np.zeros(X.shape[1]))
        Zd, Vd, solves = barrier_direction(A, B, model, lx, lu, Z0, V0, stage.barriers, point,
                                           opt.barrier_iterations, opt.fraction_to_boundary)
        self.prepared = Prepared(start, n, X, U, gains, lq, Z0, V0, Zd, Vd, max(1, solves), optimizer,
                                 margins, feasible, time.perf_counter() - t0)
        return self.prepared

    def _trajectory(self, start: int, steps: int, previous: Optional[Plan]) -> tuple:
        """(X (n+1, nx), U (n, nU)): the reference of the window (:meth:`~.mpc.RecedingHorizon.reference`: the
        iterate ``previous`` shifted, its tail the motion's) projected with its gains (thesis (6.10)) from the
        first state the iterate does not reach: the iterate is a trajectory of the model already, and its projection
        from its own states is itself (one step of the model at a tick of a long motion, the whole window without
        an iterate)."""
        X, U, K = self.horizon.reference(start, steps, previous)
        seam = 0 if previous is None else min(steps, max(0, previous.end - start))
        if seam < steps:
            X[seam:], U[seam:] = self.system.project(X[seam], X[seam:], U[seam:], K[seam:])
        return X, U

    # ---------------------------------------------------------------------------------- after the sample

    def feedback(self, start: int, x0: np.ndarray, run: int, estimate_tick: int = -1) -> Update:
        """The plan of the steps from ``start`` on of the controller's run ``run`` from the predicted state x0 (nx,)
        at that step (module docstring, step 2): the preparation for ``start`` (made now when there is none), one
        direction, the projection. ``Update.reason`` is ``step_<γ>`` (the step length taken), ``infeasible`` (no
        plan: the best iterate is kept for the next tick), ``end_of_motion`` or ``step_failed``; ``Update.solve`` is
        the direction and projections' time, ``Update.setup`` the preparation's; ``Update.iterations`` 1. Raises ValueError for a state that is not a finite state of the model; never for
        one the model cannot step from (``step_failed``)."""
        t0, c0 = time.perf_counter(), time.thread_time()
        h = self.horizon
        x0 = h.checked_state(x0, f"the predicted state at step {start}")
        self.updates += 1
        p = self.prepared
        try:
            if p is None or p.start != start:
                p = self.prepare(start)
            if p is None:
                return Update(None, "end_of_motion", start, 0, elapsed=time.perf_counter() - t0,
                              cpu=time.thread_time() - c0)
            h.check_on_constraints(x0, start)
        except _core.StepError:
            return Update(None, "step_failed", start, elapsed=time.perf_counter() - t0, cpu=time.thread_time() - c0)
        t1 = time.perf_counter()
        Z1, V1 = p.lq.rollout(x0 - p.X[0])
        Xe, Ue = p.X + Z1 - p.Z0, p.U + V1 - p.V0     # ξ̄ + L δx(0): the answer to the new state
        reason, tried = "infeasible", []
        # an interior iterate's step keeps every margin above (1 − τ) of ξ̄'s (fraction to the boundary, as the
        # optimizer's line search): an iterate on a limit leaves the barrier no room (module docstring, step 2)
        floor = (1.0 - h.optimizer_options.fraction_to_boundary) * p.margins if p.feasible else None
        for candidate in self._candidates():
            name, _, _, clamped = candidate
            if not clamped and (tried or not self._full_step_taken) and self._prefix_leaves(p, x0, Xe, Ue, candidate):
                tried.append((candidate, _SKIPPED))
                continue
            projected = self._projected(p, x0, Xe, Ue, candidate)
            tried.append((candidate, projected))
            if projected is None:
                continue
            _, _, M, margin = projected
            if margin >= -self._tolerance and (clamped or floor is None or bool(np.all(M >= floor))):
                reason = name
                break
        self._full_step_taken = reason == "step_1"
        t2 = time.perf_counter()
        out = Update(None, reason, start, p.steps, iterations=p.solves, setup=p.seconds, solve=t2 - t1,
                     feasible=reason != "infeasible")
        seq = self.updates
        skipped = any(r is _SKIPPED for _, r in tried)
        if not out.feasible and skipped and any(r not in (None, _SKIPPED) for _, r in tried):
            # no plan, and the best iterate (the next tick's start) needs the skipped projections: made after the
            # answer, when the next preparation first reads the iterate (:attr:`iterate`)
            self.iterate = None
            self._settle = lambda: self._iterate_of(self._best(tried, p, x0, Xe, Ue, complete=True), p, start, run,
                                                    seq, estimate_tick, out.reason)
        else:
            self.iterate = self._iterate_of(self._best(tried, p, x0, Xe, Ue, complete=not out.feasible), p, start,
                                            run, seq, estimate_tick, out.reason)
            if self.iterate is None:
                out.reason = "step_failed"
            elif out.feasible:
                out.plan = self.iterate
        out.elapsed, out.cpu = time.perf_counter() - t0, time.thread_time() - c0
        return out

    def _prefix_leaves(self, p: Prepared, x0: np.ndarray, Xe: np.ndarray, Ue: np.ndarray, candidate) -> bool:
        """Whether the projection of ``candidate`` (:meth:`_candidates`) from x0 (nx,) leaves a constraint in its
        first :data:`PREFIX_STEPS` steps by more than the feasibility tolerance plus :data:`PREFIX_BAND`: those
        steps are the whole projection's first steps (thesis (6.10) is causal: bit for bit, each projection starts
        its steps' solves afresh), and their margins some of its margins, so such a candidate, which the constraint
        check of the whole projection rejects, is not projected further."""
        _, gamma, project, _ = candidate
        m = min(PREFIX_STEPS, p.steps)
        try:
            X, U, Lam = (np.asarray(a) for a in project(x0, Xe[:m + 1] + gamma * p.Zd[:m + 1],
                                                        Ue[:m] + gamma * p.Vd[:m], p.gains.K[:m]))
        except _core.StepError:
            return False   # the whole projection fails too, and says so
        margin = float(np.min(p.optimizer.margins(Point(X, U, Lam)), initial=np.inf))
        return margin < -(self._tolerance + PREFIX_BAND)

    @staticmethod
    def _projected(p: Prepared, x0: np.ndarray, Xe: np.ndarray, Ue: np.ndarray, candidate) -> Optional[tuple]:
        """(X (n+1, nx), U (n, nU), the normalized margins M (flat, ``ProjectionOptimizer.margins``), their
        minimum) of ``candidate`` (:meth:`_candidates`) from x0; None when the model cannot step through it."""
        _, gamma, project, _ = candidate
        try:
            X, U, Lam = (np.asarray(a) for a in project(x0, Xe + gamma * p.Zd, Ue + gamma * p.Vd, p.gains.K))
        except _core.StepError:
            return None
        M = p.optimizer.margins(Point(X, U, Lam))
        return X, U, M, float(np.min(M, initial=np.inf))

    def _best(self, tried: list, p: Prepared, x0: np.ndarray, Xe: np.ndarray, Ue: np.ndarray,
              complete: bool) -> Optional[tuple]:
        """(X, U, margin) of the first of the ``tried`` candidates (in :meth:`_candidates`' order) with the largest
        least margin, None when the model stepped through none. A candidate skipped after its first steps
        (:meth:`_prefix_leaves`) is projected here when ``complete``; without (a candidate was taken) it is
        left out: its least margin is below the tolerance, the taken one's above."""
        best, best_margin = None, -math.inf
        for candidate, projected in tried:
            if projected is _SKIPPED:
                if not complete:
                    continue
                projected = self._projected(p, x0, Xe, Ue, candidate)
            if projected is not None and projected[3] > best_margin:
                best, best_margin = projected, projected[3]
        return None if best is None else (best[0], best[1], best_margin)

    def _iterate_of(self, best: Optional[tuple], p: Prepared, start: int, run: int, seq: int, estimate_tick: int,
                    reason: str) -> Optional[Plan]:
        """The iterate (X, U, margin) ``best`` of the update ``seq`` as a plan with the prepared gains; None for
        None."""
        if best is None:
            return None
        h = self.horizon
        traj = p.gains.attach(Trajectory.for_model(
            h.identity, h.dt, best[0], best[1], t0=self.motion.t0 + start * h.dt,
            info={"rti": {"sequence": seq, "reason": reason, "margin": best[2]}}))
        return Plan(start, traj, run, seq, estimate_tick)

    def _candidates(self):
        """(reason, γ, projection, clamped) in the order :meth:`feedback` tries them: the projection operator (thesis (6.10),
        the core's) of the direction with its descent part scaled by each of :data:`STEP_LENGTHS`, then the full
        step and the answer to the new state alone tracked with every input clamped inside the drives' limits
        (:meth:`~.mpc.RecedingHorizon.tracked`, a projection through the controller's clamp): the LQ model sees the
        limits only through the barrier's curvature at ξ̄, and after a push its answer to the new state can ask
        a drive for more than its acceleration at the first step whatever the step length."""
        system, tracked = self.system, self.horizon.tracked
        for gamma in STEP_LENGTHS:
            yield (f"step_{gamma:g}", gamma, lambda x0, X, U, K: system.project(x0, X, U, K, constraint_forces=True),
                   False)
        for gamma in CLAMPED_STEP_LENGTHS:
            yield f"clamped_{gamma:g}", gamma, tracked, True

    def update(self, k: int, x_hat: np.ndarray, history: CommandHistory, law: PlannedLaw, run: int,
               limits: CommandLimits, pending: Optional[Plan] = None) -> Update:
        """One tick (module docstring): the controller's estimate x̂_k (nx,) of tick k of run ``run`` predicted to the
        plan's start j = k + d + 1 (:meth:`~.mpc.RecedingHorizon.predict`, through ``history``, ``law`` with
        ``pending`` and ``limits`` as the controller has them), :meth:`feedback`, then :meth:`prepare` for j + 1.
        ``Update.elapsed`` (wall clock) and ``Update.cpu`` (the thread's CPU time) are the time from the estimate to
        the plan, ``Update.prepare`` and ``Update.prepare_cpu`` the preparation after it (the sums are the tick's
        work)."""
        t0, c0 = time.perf_counter(), time.thread_time()
        if self.iterate is not None and self.iterate.run != run:
            self.reset()
        try:
            j, x0 = self.horizon.predict(k, x_hat, history, law, limits, pending)
        except _core.StepError:
            self.updates += 1
            return Update(None, "step_failed", k + history.delay + 1, elapsed=time.perf_counter() - t0,
                          cpu=time.thread_time() - c0)
        out = self.feedback(j, x0, run, k)
        t1, c1 = time.perf_counter(), time.thread_time()
        out.elapsed, out.cpu = t1 - t0, c1 - c0
        self.horizon.take_identified()   # the preparation and the plans after it on an identified model (.mpc)
        try:
            self.prepare(j + 1)
        except _core.StepError:
            self.prepared = None   # the next feedback prepares again, and says so if it fails
        out.prepare, out.prepare_cpu = time.perf_counter() - t1, time.thread_time() - c1
        return out


__all__ = ["STEP_LENGTHS", "CLAMPED_STEP_LENGTHS", "Prepared", "RealTimeIteration", "rti_options"]
