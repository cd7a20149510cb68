"""~/execute without ROS (marionette_control/tracking/execution.py): goals checked field by field, the goal's
tolerances, its phases and result on the controller core driving the simulated arm, the admission policy.

The result's numbers are checked against independent evidence: the measured angles' errors against the plant's
true ones (their difference is the encoders' noise), and the string tension of the estimate against the
trajectory's own (on the exact stand-in the estimate is the trajectory).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from marionette_control.lq.gains import GainDesign, design_gains
from marionette_control.model.library import marionette_arm as ma
from marionette_control.model.limits import from_description
from marionette_control.model.margins import string_tensions
from marionette_control.sim.profile import HardwareProfile
from marionette_control.sim.simulator import SimulatedArm
from marionette_control.tracking import execution as E
from marionette_control.tracking.controller import ControllerOptions, make_core
from marionette_control.tracking.plan_switch import Plan
from marionette_control.tracking.tolerances import Tolerances
from marionette_control.trajectory import Trajectory

from arm_helpers import bump_trajectory

NS = 1_000_000_000
NAMES = ["shoulder", "elbow", "carriage", "string_length"]


@pytest.fixture(scope="module")
def desc():
    return ma.load_description()


def bump_for(delay: int) -> Trajectory:
    """The bump with gains for ``delay`` steps of command delay (no integral action: a plan that is the motion's own
    window then changes no command, test/test_plan_switch.py)."""
    ds, traj = bump_trajectory(0.01, 200)
    return design_gains(ds, traj.X, traj.U, GainDesign(delay_steps=delay, angle_integral=0.0)).attach(traj)


@pytest.fixture(scope="module")
def bump():
    """The bump for the realistic stand-in (one step of command delay, as ros2_control)."""
    return bump_for(1)


@pytest.fixture(scope="module")
def exact():
    """The bump for the exact stand-in (no command delay)."""
    return bump_for(0)


def execute(desc, traj, profile: str, path=(), goal=(), goal_time=0.0, offers=None, seed=0):
    """Runs one goal on the simulated arm of ``profile`` with the core the node builds; (execution, core, true
    arm angles at the ticks (n, nd), the ticks)."""
    hw = HardwareProfile.named(profile)
    core = make_core(desc, ControllerOptions(command_delay_steps=hw.command_delay_steps))
    if profile == "realistic":
        hw = dataclasses.replace(hw, seed=seed)
    model = desc.model
    sim = SimulatedArm(hw, traj.dt, nominal=desc, q0=traj.X[0, :model.nq])
    stamp, dt_ns = NS, int(round(traj.dt * NS))
    ex = E.Execution(NAMES[:model.nd], feedback_ticks=25)
    truth, batches = [], []

    def cycle():
        nonlocal stamp
        q, x_true = sim.measure(), sim.true_state()
        res = core.on_joint_state(q, stamp, stamp)
        if res.kind == "tick" and ex.phase in ("waiting_for_start", "tracking", "holding"):
            if ex.on_tick(res.k, core.intake.latest, res.command, res.x_hat):
                batches.append(ex.batch())
            truth.append(x_true[:model.nd])
            for plan in (offers or {}).get(res.k, ()):
                core.offer_plan(plan)
        if res.command is not None:
            sim.receive_command(res.command[model.nu:])
        sim.step()
        stamp += dt_ns

    for _ in range(20):
        cycle()
    assert core.load_trajectory(traj, "test").startswith("took")
    assert E.start_refusal(core.tolerances, core.intake.latest, traj) is None
    tolerances = E.goal_tolerances(core.tolerances, NAMES, path, goal, goal_time)
    assert core.start()[0]
    ex.begin(traj, tolerances, "test", core.run, core.delay, core.fault_counts)
    for _ in range(traj.N + 300):
        cycle()
        if ex.done or not core.running:
            break
    if not ex.done:
        ex.finish(*E.run_outcome(core.aborted, core.active_faults, False))
    ex.count_faults(core.fault_counts)
    return ex, core, np.array(truth), batches


def test_a_goal_tracked_exactly_succeeds_with_the_trajectorys_own_tension(desc, exact):
    """On the exact stand-in the estimate is the trajectory: errors vanish, the tension of the estimate is the
    trajectory's (solved from its own states and inputs), the commands' margins are the trajectory's."""
    bump = exact
    ex, core, _, batches = execute(desc, bump, "perfect")
    res = ex.result(from_description(desc), core.tracking.system)
    assert res.success and res.code == E.SUCCESSFUL and res.message == ""
    assert res.num_steps == bump.N and res.last_tick == bump.N and res.ticks == bump.N + 1
    assert max(res.rms_error) < 1e-9 and max(res.max_error) < 1e-9
    # feedback: the first tick (tracking begins), full batches of 25, the batch of the change to holding
    assert [len(b.ticks) for b in batches[:9]] == [1] + [25] * 8
    np.testing.assert_array_equal(np.concatenate([b.ticks for b in batches]), np.arange(bump.N + 1))
    assert max(np.abs(b.error).max() for b in batches) < 1e-9
    rows = {(r["family"], r["component"]): r for r in res.margins}
    assert set(rows) == {(f, d) for f in ("range", "speed", "acceleration") for d in ("carriage", "string_length")} \
        | {("tension", "string")}
    limits = from_description(desc)
    Lam = core.tracking.system.constraint_forces_trajectory(bump.X, bump.U)
    T = string_tensions(limits, bump.X, Lam, bump.dt)[:, 0]
    assert rows[("tension", "string")]["margin"] == pytest.approx(T.min() - 0.5, abs=1e-6)
    assert rows[("tension", "string")]["satisfied"] and rows[("tension", "string")]["side"] == "lower"
    speed = np.abs(np.diff(bump.U[:, 0])).max() / bump.dt
    assert rows[("speed", "carriage")]["margin"] == pytest.approx(limits.max_velocity[0] - speed, abs=1e-9)
    assert res.faults == {}


@pytest.mark.parametrize("seed", [0, 1])
def test_the_results_rms_is_the_true_angles_within_the_encoders_noise(desc, bump, seed):
    """On the realistic stand-in the result's RMS (measured angles) agrees with the plant's true angles' RMS within
    what the encoders add (quantization and noise: well below 0.01°), on two noise seeds."""
    ex, core, truth, _ = execute(desc, bump, "realistic", seed=seed)
    res = ex.result(from_description(desc), core.tracking.system)
    assert res.success, res.message
    k = ex.k[:ex._n]
    true_errors = truth[k <= bump.N] - bump.X[k[k <= bump.N], :2]
    true_rms = np.sqrt(np.mean(true_errors ** 2, axis=0))
    assert np.degrees(np.abs(np.array(res.rms_error) - true_rms)).max() < 0.01, (res.rms_error, true_rms)
    assert max(res.rms_error) > 1e-4  # the plant is not the model: there is something to measure


def test_a_goals_tighter_path_tolerance_ends_it_and_names_the_joint(desc, bump):
    ex, core, _, _ = execute(desc, bump, "realistic", path=[("elbow", 0.004)])
    res = ex.result()
    assert res.code == E.PATH_TOLERANCE_VIOLATED and "elbow" in res.message and "(measured)" in res.message
    assert res.last_tick < bump.N and res.ticks == res.last_tick + 1  # (the plant rests 0.0066 rad off at k = 0)


def test_a_goal_out_of_its_goal_tolerance_after_goal_time_fails(desc, bump):
    ex, _, _, _ = execute(desc, bump, "realistic", goal=[("elbow", 1e-7)], goal_time=0.05)
    assert ex.code == E.GOAL_TOLERANCE_VIOLATED and "elbow" in ex.message and "0.05 s after the end" in ex.message
    assert ex.result().last_tick == bump.N + 5


def test_plans_in_effect_leave_the_goal_on_its_motion(desc, exact):
    """A plan (the motion's own window) taken during the goal: the goal ends as without it, its feedback's desired
    angles are the motion's."""
    bump = exact
    s = slice(50, 90)
    part = Trajectory.for_model(desc.model, bump.dt, bump.X[50:91], bump.U[s], K=bump.K[s], t0=0.5, info=bump.info)
    ex, core, _, batches = execute(desc, bump, "perfect", offers={30: [Plan(50, part, 1, 1)]})
    assert core.plan_counts["switched"] == 1 and ex.result().success
    k = np.concatenate([b.ticks for b in batches])
    np.testing.assert_array_equal(np.concatenate([b.desired for b in batches]), bump.X[np.minimum(k, bump.N), :2])


def test_trajectory_fields_are_checked_by_name(desc):
    model = desc.model
    ok = dict(model=model, model_id=model.name, model_hash=model.hash, dt=0.01, stamp_ns=0,
              arrays={"states": np.zeros(8), "inputs": np.zeros(2), "gains": np.zeros(0)})
    E.check_trajectory_fields(**ok)
    for change, code, words in ((dict(model_id="pendulum"), E.INVALID_JOINTS, "trajectory.model_id 'pendulum'"),
                                (dict(model_hash="sha256:0"), E.INVALID_JOINTS, "trajectory.model_hash"),
                                (dict(dt=-0.01), E.INVALID_GOAL, "trajectory.dt (s) must be a finite number > 0"),
                                (dict(dt=math.nan), E.INVALID_GOAL, "trajectory.dt"),
                                (dict(arrays={"states": [0.0, math.nan]}), E.INVALID_GOAL,
                                 "trajectory.states[1] is nan"),
                                (dict(stamp_ns=5), E.INVALID_GOAL, "trajectory.header.stamp")):
        with pytest.raises(E.GoalError, match=None) as info:
            E.check_trajectory_fields(**{**ok, **change})
        assert info.value.code == code and words in str(info.value), str(info.value)


def test_goal_sources_and_tolerances():
    assert E.goal_source(False, "wave", False) == "motion_name"
    for args in ((False, "", False), (True, "wave", False)):
        with pytest.raises(E.GoalError, match="exactly one of trajectory"):
            E.goal_source(*args)
    own = Tolerances(np.array([0.05, 0.05, 0.02, 0.02]), np.array([0.3, 0.3, 0.0, 0.0]),
                     np.array([0.1, 0.1, 0.0, 0.0]), 1.0, NAMES)
    t = E.goal_tolerances(own, NAMES, [("elbow", 0.01), ("shoulder", 0.0), ("carriage", 0.005)],
                          [("shoulder", 0.5)], 0.0)
    np.testing.assert_array_equal(t.path, [0.3, 0.01, 0.005, 0.0])   # tighter only; 0 keeps; unchecked -> the goal's
    np.testing.assert_array_equal(t.goal, own.goal)                  # a looser goal tolerance does not loosen
    assert t.goal_time == 1.0 and E.goal_tolerances(own, NAMES, (), (), 2.5).goal_time == 2.5
    for path, code, words in (([("wrist", 0.1)], E.INVALID_JOINTS, "path_tolerance[0].name 'wrist'"),
                              ([("elbow", -0.1)], E.INVALID_GOAL, "path_tolerance[0].position"),
                              ([("elbow", 0.1), ("elbow", 0.2)], E.INVALID_GOAL, "path_tolerance[1].name 'elbow' is "
                                                                                 "given twice")):
        with pytest.raises(E.GoalError) as info:
            E.goal_tolerances(own, NAMES, path, (), 0.0)
        assert info.value.code == code and words in str(info.value)
    with pytest.raises(E.GoalError, match="goal_time_tolerance"):
        E.goal_tolerances(own, NAMES, (), (), -1.0)


def test_start_refusals_and_what_the_controller_saw(desc, bump):
    own = Tolerances(np.full(4, 0.05), np.zeros(4), np.zeros(4), 1.0, NAMES)
    assert "no joint state" in E.start_refusal(own, None, bump)
    far = bump.X[0, :4] + np.array([0.2, 0, 0, 0])
    assert "shoulder is +0.2 from the start" in E.start_refusal(own, far, bump)
    topic = "/marionette_optimizer/trajectory"
    assert "no publisher on " + topic in E.no_trajectory_reason(topic, 0, 0, "", 5.0)
    assert "1 publisher(s) on " + topic + " but no sample received within 5 s" in \
        E.no_trajectory_reason(topic, 1, 0, "", 5.0)
    assert "refused: made for model 'pendulum'" in E.no_trajectory_reason(topic, 1, 1, "made for model 'pendulum'", 0)


def test_the_admission_policy():
    q = E.GoalQueue("reject", 4)
    assert q.admit("a") is None and "busy" in q.admit("b") and q.first("a")
    q.release("a")
    assert q.admit("b") is None
    q = E.GoalQueue("queue", 1)
    assert q.admit("a") is None and q.admit("b") is None and "1 goal(s) wait" in q.admit("c")
    assert q.first("a") and not q.first("b")
    q.release("a")
    assert q.first("b")
    with pytest.raises(ValueError, match="execute.concurrency"):
        E.GoalQueue("preempt", 1)


def test_run_outcomes():
    assert E.run_outcome(True, {"path_tolerance": "shoulder is +0.4"}, False)[0] == E.PATH_TOLERANCE_VIOLATED
    assert E.run_outcome(False, {}, True)[0] == E.CANCELED
    assert E.run_outcome(False, {}, False)[0] == E.ABORTED
    ex = E.Execution(["shoulder", "elbow"])
    ex.finish(E.CANCELED, "canceled")
    ex.finish(E.SUCCESSFUL, "")
    assert ex.code == E.CANCELED and not ex.on_tick(0, np.zeros(4), np.zeros(2), np.zeros(8))
    with pytest.raises(ValueError, match="phase"):
        ex.set_phase("flying")
