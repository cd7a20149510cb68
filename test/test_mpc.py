"""Receding-horizon re-optimization (ocp/mpc.py) on the wave, ROS-free.

The window of the problem, its cost-to-go terminal term and the warm start make the motion's optimum
the window's optimum: re-optimizing the unperturbed motion converges at once to it. The prediction to
a plan's first step is the controller's own (the perfect arm: to the integrator's tolerance). A push
during the wave on the realistic stand-in, replayed in the offline loop: with re-planning the arm is
back within 1° of the motion about twice as fast as with the LQR alone or faster, every command within the
drives' limits and the string taut. An update past its deadline hands over nothing, and the loop is
then exactly the LQR loop.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from marionette_control.tracking.controller import ControllerOptions
from marionette_control.lq.gains import GainDesign, design_gains
from marionette_control.tracking.command_limits import CommandLimits
from marionette_control.tracking.plan_switch import PlannedLaw
from marionette_control.tracking.prediction import CommandHistory
from marionette_control.tracking.law import TrackingLaw
from marionette_control.ocp.mpc import Deadline, MPCOptions, RecedingHorizon, predict_start, window_cost
from marionette_control.sim.offline_loop import run_loop, scripted_push
from marionette_control.sim.profile import HardwareProfile
from marionette_control.ocp.terms import Point
from marionette_control.trajectory import Trajectory, TrajectoryError

from arm_helpers import wave_motion
from test_plan_switch import Loop

#: the push of the evidence: a 0.1 s half sine of 0.6 N on the forearm in the arm's plane, 5.6 s into the wave
#: (after its two passages where the realistic arm is up to 1.2° off without any push: docs/mpc.md). The LQR alone
#: does not bring the arm back from it (the drives saturate, the arm swings 25° off); 0.5 N is about the largest
#: push it recovers from, slowly.
PUSH = scripted_push(5.6, 0.01)
#: the LQR alone without the path tolerance's abort: whether it brings the arm back at all
UNBOUNDED_PATH = {"path": {"shoulder": 0.0, "elbow": 0.0}}


@pytest.fixture(scope="module")
def wave():
    """The wave's optimum converged to |Dh∘ζ| < 1e-9: the costate identity below holds at a stationary point, to
    about the descent norm's precision (the spec's 1e-6, reached from the unconstrained optimum at 4e-7, leaves
    the window's gradient 1.5e-3 from the costate; at 1e-9 it is within 1e-4)."""
    return wave_motion(tolerance=1e-9)


@pytest.mark.parametrize("horizon", [1.0, 2.0])
def test_reoptimizing_the_unperturbed_motion_converges_at_once_to_it(wave, horizon):
    """From the motion's own state, warm-started from the motion (and from a previous plan shifted in time), an
    update converges in one or two Newton iterations to the motion's window (to the optimizer's tolerance)."""
    problem, motion = wave
    mpc = RecedingHorizon(problem, motion, MPCOptions(horizon=horizon, deadline=None))
    previous = None
    for start in (100, 110, 400, 650, 780):
        up = mpc.plan(start, motion.X[start], run=1, previous=previous)
        assert up.reason == "converged" and up.feasible and up.iterations <= 2, up.to_dict()
        n = min(mpc.H, motion.N - start)
        assert up.steps == n and up.plan.start == start and up.plan.N == n
        tr = up.plan.trajectory
        np.testing.assert_allclose(tr.X, motion.X[start:start + n + 1], rtol=0, atol=1e-7)
        np.testing.assert_allclose(tr.U, motion.U[start:start + n], rtol=0, atol=1e-7)
        assert tr.info["gain_design"]["delay_steps"] == 1 and tr.K.shape == (n, 2, 8)
        assert math.isclose(tr.t0, motion.t0 + start * motion.dt)
        previous = up.plan
    assert mpc.plan(795, motion.X[795], run=1).reason == "end_of_motion"


def test_the_window_sees_the_rest_of_the_motion_through_its_cost_to_go(wave):
    """The window's cost at the states projected from x(0) = x* + ε e_i with the motion's gains changes by
    g_jᵀ(ε e_i) to first order (central differences; 1e-3 relative: the costate is the gradient at a stationary
    point, and the motion is one to the optimizer's tolerance): g_j, the cost-to-go's gradient at step j, comes
    through the window's terminal term from the steps beyond it; and the whole motion's window is the problem."""
    problem, motion = wave
    mpc = RecedingHorizon(problem, motion, MPCOptions(horizon=1.0, deadline=None, drive_acceleration=0.0))
    whole = window_cost(problem.cost, 0, motion.N, None)
    assert whole.value(motion.X, motion.U, problem.system.constraint_forces_trajectory(motion.X, motion.U)) == \
        pytest.approx(problem.cost.value(motion.X, motion.U,
                                         problem.system.constraint_forces_trajectory(motion.X, motion.U)), rel=1e-14)
    j = 300
    cost, n = mpc.window(j)
    s = slice(j, j + n)
    system = mpc.system

    def J(x0):
        X, U = (np.asarray(a) for a in system.project(x0, motion.X[j:j + n + 1], motion.U[s], motion.K[s])[:2])
        return cost.value(X, U, system.constraint_forces_trajectory(X, U))

    model = problem.model
    for i in (model.nd + model.nk, model.nd + model.nk + 1):   # the momenta: a consistent perturbation
        eps = 1e-5
        e = np.zeros(model.nx)
        e[i] = eps
        fd = (J(motion.X[j] + e) - J(motion.X[j] - e)) / (2 * eps)
        # (the costate is the gradient at a stationary point; the motion is one to the optimizer's tolerance)
        assert fd == pytest.approx(mpc.g[j, i], rel=1e-3), (i, fd, mpc.g[j, i])


def test_the_prediction_to_a_plans_start_is_the_controllers(wave):
    """On the exact plant the state predicted from tick k through the commands in flight and the law (with a
    pending plan from its start) is the controller's estimate at that step. The motion's gains here have no
    integral action: the planner does not know the controller's integral of the angle errors (on the exact plant
    it changes the prediction by 1e-6), so with it the prediction is that close, not exact."""
    problem, motion = wave
    motion = design_gains(problem.system, motion.X, motion.U,
                          dataclasses.replace(GainDesign.of(motion), angle_integral=0.0)).attach(motion)
    mpc = RecedingHorizon(problem, motion, MPCOptions(horizon=1.0, deadline=None))
    loop = Loop(motion)
    core = loop.core
    while (res := loop.tick()).k < 150:
        pass
    tr = core.tracking
    up = mpc.update(150, res.x_hat, tr.history, tr.law, core.run, tr.limits)
    assert core.offer_plan(up.plan)[0]        # starts at step 156, pending
    while (res := loop.tick()).k < 153:
        pass
    predicted = predict_start(mpc.system, tr.limits, tr.history, 153, res.x_hat, tr.law.preview(core.pending_plan),
                              160)
    while (res := loop.tick()).k < 160:
        pass
    assert core.plan_counts["switched"] == 1
    np.testing.assert_allclose(res.x_hat, predicted, rtol=0, atol=1e-8)


def _command_limits_hold(result, limits, dt):
    """Every command sent is within the drives' range; the stream of setpoints within speed and acceleration (the
    hardware's limits, which the controller's clamp keeps: the plans keep the reserve for the feedback inside them,
    the feedback's corrections may use it)."""
    nu = len(result.commands[0]) - len(limits.kinematic)
    rho = result.commands[:, nu:]
    assert np.all(rho >= limits.lower - 1e-12) and np.all(rho <= limits.upper + 1e-12)
    v = np.diff(rho, axis=0) / dt
    assert np.all(np.abs(v) <= limits.max_velocity * (1 + 1e-9))
    a = np.diff(v, axis=0) / dt
    assert np.all(np.abs(a) <= limits.max_acceleration * (1 + 1e-6))


@pytest.mark.parametrize("force", [0.5, 0.6])
def test_a_push_is_recovered_faster_with_replanning(wave, force):
    """The scripted push on the realistic stand-in (model error, delay, noise, drive dynamics): time from the push
    until the arm stays within 1° of the motion, LQR alone (without the path tolerance, which would abort it) vs
    LQR with plans every 0.1 s over a 1 s horizon. Measured 2026-11-28: 0.5 N: the LQR takes 0.55 s, the plans
    0.28 s; 0.6 N: the LQR 0.94 s, the plans 0.28 s (asserted: at least 1.75× as fast). The LQR comes back from
    0.6 N by its integral's anti-windup: integrating through the drives' saturation it never does (144° off, the
    string slack; 0.5 N: 0.66 s). With plans every command is within the drives' limits and the string stays
    taut."""
    problem, motion = wave
    push = scripted_push(5.6, motion.dt, force)
    profile = HardwareProfile.named("realistic")
    lqr = run_loop(motion, profile, ControllerOptions(tolerances=UNBOUNDED_PATH), pushes=[push])
    mpc = run_loop(motion, profile, ControllerOptions(), pushes=[push],
                   mpc=RecedingHorizon(problem, motion, MPCOptions(horizon=1.0, deadline=None)))
    t_lqr, t_mpc = lqr.recovery_time(push.tick), mpc.recovery_time(push.tick)
    assert not mpc.aborted and t_mpc is not None and 0 < t_mpc < 0.6, t_mpc
    assert t_lqr is not None and t_lqr >= 1.75 * t_mpc, (t_lqr, t_mpc)
    if force == 0.6:
        wound = run_loop(motion, profile, ControllerOptions(tolerances=UNBOUNDED_PATH, anti_windup=False),
                         pushes=[push])
        assert wound.recovery_time(push.tick) is None
    # the push was felt: several degrees off the motion
    assert np.degrees(np.abs(mpc.angle_errors()[push.tick:]).max()) > 2.0
    _command_limits_hold(mpc, problem.hardware_limits, motion.dt)
    assert np.all(mpc.tension[~np.isnan(mpc.tension)] > 0.0)   # taut: the string pulls at every step
    record = mpc.mpc
    assert record["switched"] >= 0.75 * record["offered"] and record["offered"] >= 70, record
    # (anytime: after the push an update may end at its iteration budget with the best feasible plan so far)
    assert {u["reason"] for u in record["updates"] if u["planned"]} <= {"converged", "max_iterations"}


class FirstUpdateLost(RecedingHorizon):
    """A planner whose first update after ``tick`` reaches no controller (its plan dropped: an update that missed
    its deadline, say); it records every update's seed and the constraint margin of the seed."""

    def __init__(self, *args, tick: int):
        super().__init__(*args)
        self.tick, self.lost, self.seeds_margin, self.states = tick, None, {}, {}

    def warm_start(self, start, steps, x0, previous=None):
        X, U = super().warm_start(start, steps, x0, previous)
        _, _, Lam = self.system.simulate(X[0], U, constraint_forces=True)
        point = Point(X, U, Lam)
        self.seeds_margin[start] = {type(c).__name__: float(np.nanmin(c.margins(point) / c.scale))
                                    for c in self.problem.constraints}
        return X, U

    def plan(self, start, x0, *args, **kwargs):
        self.states[start] = x0.copy()
        up = super().plan(start, x0, *args, **kwargs)
        if self.lost is None and start > self.tick:
            self.lost, up.plan, up.reason = start, None, "lost"
        return up


@pytest.fixture(scope="module")
def lost_after_push(wave):
    """(planner, loop result): the push of the evidence with re-planning whose first update from an estimate after
    it (the one that needs most iterations) is lost."""
    problem, motion = wave
    end_of_push = PUSH.tick + round(PUSH.duration / motion.dt)
    mpc = FirstUpdateLost(problem, motion, MPCOptions(horizon=1.0, deadline=None), tick=end_of_push)
    return mpc, run_loop(motion, HardwareProfile.named("realistic"), ControllerOptions(), pushes=[PUSH], mpc=mpc)


def test_after_a_push_updates_start_inside_the_constraints_even_when_one_is_lost(wave, lost_after_push):
    """The main job's failure (docs/mpc.md): the first update after the push did not arrive, and the next ones,
    warm-started from the plan made before the push, started far outside the constraints and came back infeasible.
    Seeded from the pushed state (the projection, or the controller's clamped tracking with weaker gains), every
    update starts inside the drives' limits and nearly every one inside the tension's too; each after the push has
    a plan, and the arm is back within 1° in half a second."""
    problem, motion = wave
    mpc, r = lost_after_push
    after = {u["start"]: u for u in r.mpc["updates"] if u["start"] > mpc.tick}
    assert mpc.lost == min(after) and after[mpc.lost]["reason"] == "lost"
    # inside the drives' limits always; the string's tension too but where the arm's own swing slackens it at the
    # first step whatever the drives do within their limits (the optimizer then finds a plan that keeps it taut)
    margins = mpc.seeds_margin
    assert all(m["LinearConstraints"] > 0 for m in margins.values()), margins
    assert sum(m["TensionConstraints"] > 0 for s, m in margins.items() if s > mpc.tick) >= len(after) - 2, margins
    assert all(u["planned"] for s, u in after.items() if s != mpc.lost and u["reason"] != "end_of_motion"), after
    t = r.recovery_time(PUSH.tick)
    assert not r.aborted and t is not None and t < 0.6, t
    _command_limits_hold(r, problem.hardware_limits, motion.dt)
    assert np.all(r.tension[~np.isnan(r.tension)] > 0.0)


def test_the_clamped_warm_start_is_the_trajectory_of_its_inputs(wave, lost_after_push):
    """Tracked with the inputs clamped to the drives' limits, the warm start's states are the simulation of its
    (clamped) inputs from x0, which the optimizer re-simulates, and its drive setpoints keep the limits."""
    problem, motion = wave
    mpc, _ = lost_after_push
    x0 = mpc.states[mpc.lost]   # the pushed arm
    X, U, K = mpc.reference(mpc.lost, mpc.H)
    Xt, Ut, Lam = mpc.tracked(x0, X, U, K)   # the gains' answer to the push: the drives' limits clamp it
    Xs, _, Lam_s = mpc.system.simulate(x0, Ut, constraint_forces=True)
    np.testing.assert_allclose(Xt, Xs, rtol=0, atol=1e-9)   # (the DEL step's Newton tolerance: 1e-10)
    np.testing.assert_allclose(Lam, Lam_s, rtol=1e-6, atol=1e-9)
    m = problem.model
    rho = np.vstack([x0[m.nd:m.nq], Ut[:, m.nu:]])
    v = np.diff(rho, axis=0) / motion.dt
    limits = problem.limits
    assert np.all(np.abs(v) <= limits.max_velocity * (1 + 1e-9))
    a = np.diff(np.vstack([x0[m.nq + m.nd:], v]), axis=0) / motion.dt
    assert np.all(np.abs(a) <= limits.max_acceleration * (1 + 1e-6))
    assert np.max(np.abs(a)) >= 0.99 * np.min(limits.max_acceleration)   # (the clamp acted)
    # the core's loop is the controller's clamp and the DEL step, step by step (the step's Newton from the same
    # start: 2e-14 measured)
    x, drives = x0, mpc._drives
    for i in range(U.shape[0]):
        u = drives.clamp(U[i] - K[i] @ (x - X[i]), x[m.nd:m.nq], x[m.nq + m.nd:])
        np.testing.assert_allclose(Ut[i], u, rtol=0, atol=1e-12)
        x = mpc.system.step(x, u)[0]
        np.testing.assert_allclose(Xt[i + 1], x, rtol=0, atol=1e-12)
    # limits of ±inf are none (CommandLimits.unlimited): the loop is then the plain tracking; NaN is refused
    free = CommandLimits.unlimited(m.nU, m.nk)
    Xf, Uf, _ = mpc.system.project_clamped(x0, X, U, K, free.lower, free.upper, free.rate, free.acceleration,
                                           motion.dt)
    np.testing.assert_allclose(Uf[0], U[0] - K[0] @ (x0 - X[0]), rtol=0, atol=1e-12)
    assert np.all(np.isfinite(Xf)) and np.abs(Uf - Ut).max() > 1e-3   # the clamp acted above, not here
    with pytest.raises(ValueError, match=r"rate \(drive speed limits\) contains nan at index 1"):
        mpc.system.project_clamped(x0, X, U, K, free.lower, free.upper, np.array([1.0, np.nan]), free.acceleration,
                                   motion.dt)


class CountingClock:
    """A clock that advances ``tick`` seconds at every reading: deterministic time for a deadline."""

    def __init__(self, tick: float):
        self.t, self.tick = 0.0, tick

    def __call__(self) -> float:
        self.t += self.tick
        return self.t


def test_a_deadline_on_another_clock_stops_the_update_with_its_best_plan_so_far(wave, lost_after_push):
    """The deadline is a due time on any clock (the planner node's: ROS time, simulated under use_sim_time). After
    a push an update needs several iterations: on a clock that runs out during them it stops with the best
    constraint-satisfying trajectory so far as its plan (anytime); on one that has passed the due time by the end
    it hands over nothing."""
    problem, motion = wave
    pushed, _ = lost_after_push
    # the arm right after the push, for the window that needs most iterations among those starting up to 6 steps
    # earlier (with integral action the first update after this push converges in 5 iterations, too few for a
    # clock read a few times per iteration to run out during them with the gains' reserve left; 8 are enough)
    x0 = pushed.states[pushed.lost]
    mpc = RecedingHorizon(problem, motion, MPCOptions(horizon=1.0, deadline=None))
    full, j = max(((mpc.plan(pushed.lost - back, x0, run=1), pushed.lost - back) for back in range(7)),
                  key=lambda update: update[0].iterations)
    assert full.reason in ("converged", "max_iterations") and full.iterations >= 8, full
    clock = CountingClock(1e-3)
    up = mpc.plan(j, x0, run=1, deadline=Deadline(0.03, clock))
    assert up.reason == "deadline" and 1 <= up.iterations < full.iterations and up.plan is not None, up
    # (no better than the converged plan, to the optimizer's tolerance: |Dh∘ζ| < 1e-6 leaves the cost ~1e-7 open)
    assert up.feasible and clock.t < 0.03 and up.cost >= full.cost * (1 - 1e-6)
    late = mpc.plan(j, x0, run=1, deadline=Deadline(0.001, CountingClock(1e-3)))
    assert late.plan is None and late.reason == "deadline_missed"


def test_updates_past_their_deadline_hand_over_nothing(wave):
    """An update that overruns its deadline returns no plan (``deadline_missed``); the offline loop then runs the
    LQR's commands exactly."""
    problem, motion = wave
    tight = RecedingHorizon(problem, motion, MPCOptions(horizon=2.0, deadline=1e-5, latency_steps=1))
    up = tight.plan(300, motion.X[300], run=1)
    assert up.plan is None and up.reason == "deadline_missed" and up.elapsed > 1e-5
    lqr = run_loop(motion, HardwareProfile.named("realistic"), ControllerOptions())
    r = run_loop(motion, HardwareProfile.named("realistic"), ControllerOptions(), mpc=tight)
    assert r.mpc["offered"] == 0 and len(r.mpc["updates"]) >= 70
    assert {u["reason"] for u in r.mpc["updates"]} == {"deadline_missed", "end_of_motion"}
    np.testing.assert_array_equal(r.commands, lqr.commands)


def test_options_and_inputs_are_checked(wave):
    problem, motion = wave
    with pytest.raises(ValueError, match="MPC option 'horizon' must be a finite number > 0, got 0"):
        MPCOptions(horizon=0)
    with pytest.raises(ValueError, match="MPC option 'latency_steps' must be an integer >= 0, got 1.5"):
        MPCOptions(latency_steps=1.5)
    with pytest.raises(ValueError, match="MPC option 'deadline' must be None or a finite number of seconds > 0"):
        MPCOptions(deadline=float("inf"))
    with pytest.raises(ValueError, match="the MPC deadline 0.05 s is longer than its latency of 2 steps \\(0.02 s\\)"
                                         ": every plan would arrive after its first step; raise latency_steps to at "
                                         "least 5"):
        MPCOptions(deadline=0.05, latency_steps=2).check_timing(0.01)
    with pytest.raises(TrajectoryError, match="the motion has 400 steps of 0.01 s, the problem 800"):
        RecedingHorizon(problem, Trajectory.for_model(problem.model, 0.01, motion.X[:401], motion.U[:400]))
    # the plans' gains are designed like the motion's (its record): here for no command delay, which a controller
    # with one step of delay refuses, and an update from its command history says so
    other_delay = design_gains(problem.system, motion.X, motion.U, GainDesign(delay_steps=0)).attach(motion)
    mpc = RecedingHorizon(problem, other_delay, MPCOptions(deadline=None))
    assert mpc.gains.delay_steps == 0
    with pytest.raises(ValueError, match="the controller's command history has a delay of 1 step\\(s\\), the "
                                         "plans' gains are designed for 0"):
        mpc.update(300, motion.X[300], CommandHistory(2, 2, 1), PlannedLaw(TrackingLaw(problem.model, other_delay)),
                   1, CommandLimits.unlimited(2, 2).for_dt(0.01))
    mpc = RecedingHorizon(problem, motion, MPCOptions(deadline=None))
    with pytest.raises(ValueError, match="the predicted state at step 300 has non-finite shoulder = nan"):
        mpc.plan(300, np.full(8, np.nan), run=1)
    with pytest.raises(ValueError, match="the predicted state at step 300 has shape \\(7,\\), expected \\(8,\\)"):
        mpc.plan(300, np.zeros(7), run=1)
    x = motion.X[300].copy()
    x[0] += 0.3   # off the closed chain: the string's length no longer fits
    assert mpc.plan(300, x, run=1).reason == "step_failed"
