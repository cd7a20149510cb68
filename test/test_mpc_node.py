"""marionette_mpc in process: what it makes of the controller's ~/tracking messages, good and bad.

The node is built in this process on a private context (no graph traffic is needed: its callback is
called with the messages a controller would publish) and its plans are caught on ``~/plan`` by a
subscription of the same context. A controller tracking the wave exactly (estimates on the motion,
the motion's commands) gets a plan every 0.1 s of ticks that starts where the motion is; messages that
do not fit (other state names, command joints, another trajectory, a plan the node did not make, an
estimate too old to plan from) are skipped and counted by reason, and the node keeps going. With ``method`` 'rti'
every tick's estimate gets a plan (one real-time iteration); a method it does not know is refused at start-up.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import rclpy
from rclpy.parameter import Parameter

from marionette_interfaces.msg import Plan as PlanMsg
from marionette_interfaces.msg import TrackingState
from marionette_control.nodes.convert import plan_from_msg
from marionette_control.nodes.mpc import MPCNode
from marionette_control.parameters import ParameterError

from arm_helpers import wave_motion
from marionette_control.identification.online import CONFIRMATIONS
from marionette_control.model.joint_map import JointMap
from marionette_control.model.yaml_model import load_packaged_model
from marionette_control.sim.offline_loop import run_loop
from marionette_control.sim.profile import HardwareProfile
from marionette_control.tracking.controller_options import ControllerOptions
from sensor_msgs.msg import JointState
from ros_helpers import isolated_ros

NS = 1_000_000_000


@pytest.fixture(scope="module")
def wave(tmp_path_factory):
    problem, motion = wave_motion()
    return problem, motion, motion.save(tmp_path_factory.mktemp("mpc_node") / "wave.npz")


@contextlib.contextmanager
def planner_node(path, **overrides):
    """The node on the wave's problem without a deadline, on the default scheduler, with ``overrides``."""
    values = {"trajectory_file": str(path), "problem_spec": "optimize/marionette_arm_wave.yaml", "deadline": 0.0,
              "nice": 0, "idle_scheduling": False, **overrides}
    with isolated_ros():
        context = rclpy.Context()
        rclpy.init(context=context)
        try:
            n = MPCNode(context=context, parameter_overrides=[Parameter(k, value=v) for k, v in values.items()])
        except BaseException:
            context.try_shutdown()
            raise
        plans = []
        n.create_subscription(PlanMsg, "~/plan", plans.append, 10)
        executor = rclpy.executors.SingleThreadedExecutor(context=context)
        executor.add_node(n)
        n.plans_received, n.executor_for_test = plans, executor
        try:
            yield n
        finally:
            n.stop_updates()
            executor.shutdown()
            n.destroy_node()
            context.try_shutdown()


@pytest.fixture
def node(wave, request):
    with planner_node(wave[2], idle_scheduling=getattr(request, "param", False)) as n:
        yield n


def tracking(node, motion, k: int, run: int = 1, plan: int = 0, age: float = 0.0) -> TrackingState:
    """The TrackingState of tick k of a controller following the motion exactly (stamped ``age`` s ago)."""
    m = TrackingState(state_names=list(motion.state_names), command_joints=["carriage", "string_length"])
    stamp = node.get_clock().now().nanoseconds - int(age * NS)
    m.header.stamp.sec, m.header.stamp.nanosec = divmod(stamp, NS)
    m.tick, m.num_steps, m.run, m.plan = k, motion.N, run, plan
    m.desired = motion.X[k].tolist()
    m.estimated = motion.X[k].tolist()
    m.command = motion.U[min(k + 1, motion.N - 1)].tolist()   # sent at tick k: the input of step k + 1
    return m


def feed(node, *messages) -> None:
    """The node's callback on each message in turn, each update it starts finished before the next message."""
    for msg in messages:
        node._on_tracking(msg)
        assert node.wait_updates(60.0)


def spin_until(node, predicate) -> None:
    for _ in range(200):
        node.executor_for_test.spin_once(timeout_sec=0.01)
        if predicate():
            return
    raise AssertionError("timed out")


def test_a_controller_on_the_motion_gets_plans_that_start_on_it(node, wave):
    _, motion, _ = wave
    feed(node, *(tracking(node, motion, k) for k in range(0, 21)))
    stats = node.statistics()
    assert stats["updates"] == 3 and stats["published"] == 3, stats   # ticks 0, 10, 20
    spin_until(node, lambda: len(node.plans_received) == 3)
    plans = [plan_from_msg(m) for m in node.plans_received]
    assert [(p.start, p.run, p.sequence, p.estimate_tick) for p in plans] == [(6, 1, 1, 0), (16, 1, 2, 10),
                                                                            (26, 1, 3, 20)]
    for p in plans:
        assert p.N == 100 and p.trajectory.info["gain_design"]["delay_steps"] == 1
    # from the motion's own states and commands: the motion's window (to the optimizer's tolerance). Not the first:
    # before a run's first command the drives are taken to hold still (as the controller takes them), while the
    # wave's carriage starts at once
    for p in plans[1:]:
        np.testing.assert_allclose(p.trajectory.X, motion.X[p.start:p.end + 1], rtol=0, atol=1e-6)
    assert np.abs(plans[0].trajectory.X[0, 2] - motion.X[6, 2]) > 1e-3
    assert node.skipped == dict.fromkeys(node.skipped, 0)


def test_messages_that_do_not_fit_are_skipped_and_counted(node, wave):
    _, motion, _ = wave
    bad_names = tracking(node, motion, 0)
    bad_names.state_names = list(motion.state_names[::-1])
    node._on_tracking(bad_names)
    non_finite = tracking(node, motion, 0)
    non_finite.estimated = [float("nan")] * motion.X.shape[1]
    node._on_tracking(non_finite)
    bad_joints = tracking(node, motion, 0)
    bad_joints.command_joints = ["winch", "carriage"]
    node._on_tracking(bad_joints)
    short = tracking(node, motion, 0)
    short.command = [0.1]
    node._on_tracking(short)
    other = tracking(node, motion, 0)
    other.num_steps = 300
    node._on_tracking(other)
    shifted = tracking(node, motion, 3)
    shifted.desired = motion.X[4].tolist()          # the controller tracks something else than the motion
    node._on_tracking(shifted)
    feed(node, *(tracking(node, motion, k) for k in range(0, 10)))
    feed(node, tracking(node, motion, 10, plan=7))      # a plan this node did not make
    feed(node, *(tracking(node, motion, k) for k in range(11, 20)))
    node.options = type(node.options)(**{**node.options.__dict__, "deadline": 0.035})
    feed(node, tracking(node, motion, 20, age=1.0))     # a second old: too late to plan from
    assert node.skipped == {"no_motion": 0, "invalid_message": 4, "other_trajectory": 2, "unknown_plan": 1,
                            "superseded": 0, "stale_estimate": 1}, node.skipped
    stats = node.statistics()
    assert stats["updates"] == 1 and stats["published"] == 1, stats      # tick 0 of the good run only
    feed(node, tracking(node, motion, 30, run=2))       # a new run: planned from its first message on
    assert node.run == 2 and node.statistics()["updates"] == 2


@pytest.mark.parametrize("node", [True], indirect=True)
def test_updates_run_on_a_thread_of_their_own_under_sched_idle(node, wave):
    """idle_scheduling: the updates' thread only (Linux sets the policy per thread): the executor's thread, which
    records the controller's commands and keeps the clock, stays on the default scheduler."""
    import os
    import threading

    _, motion, _ = wave
    assert os.sched_getscheduler(node._worker.native_id) == os.SCHED_IDLE
    assert os.sched_getscheduler(threading.get_native_id()) == os.SCHED_OTHER
    feed(node, *(tracking(node, motion, k) for k in range(0, 11)))
    assert node.statistics()["published"] == 2


def _hold_updates(node):
    """(started, release): the node's updates wait for ``release`` once started (the worker stays busy)."""
    import threading

    started, release = threading.Event(), threading.Event()
    plan = node.mpc.plan

    def held(*args, **kwargs):
        started.set()
        assert release.wait(60.0)
        return plan(*args, **kwargs)

    node.mpc.plan = held
    return started, release


def test_an_estimate_due_while_an_update_runs_waits_and_a_newer_one_replaces_it(node, wave):
    _, motion, _ = wave
    started, release = _hold_updates(node)
    for k in range(0, 10):
        node._on_tracking(tracking(node, motion, k))
    assert started.wait(60.0)                                   # tick 0's update runs (held)
    for k in range(10, 21):
        node._on_tracking(tracking(node, motion, k))            # tick 10's waits; tick 20's replaces it
    assert node.skipped["superseded"] == 1
    release.set()
    assert node.wait_updates(60.0)
    stats = node.statistics()
    assert stats["updates"] == 2 and stats["published"] == 2, stats
    spin_until(node, lambda: len(node.plans_received) == 2)
    assert [plan_from_msg(m).estimate_tick for m in node.plans_received] == [0, 20]


def test_a_plan_finished_after_the_controller_started_another_run_is_not_published(node, wave):
    _, motion, _ = wave
    started, release = _hold_updates(node)
    node._on_tracking(tracking(node, motion, 0))
    assert started.wait(60.0)
    node._on_tracking(tracking(node, motion, 0, run=2))         # a new run while run 1's update is computed
    release.set()
    assert node.wait_updates(60.0)
    stats = node.statistics()
    # run 1's plan computed but dropped; run 2's tick 0 planned and published
    assert stats["updates"] == 2 and stats["published"] == 1 and node.skipped["superseded"] == 1, (stats, node.skipped)
    spin_until(node, lambda: len(node.plans_received) == 1)
    assert plan_from_msg(node.plans_received[0]).run == 2


def test_with_method_rti_every_tick_gets_a_plan_from_one_real_time_iteration(wave):
    """method 'rti' (ocp/rti.py): an update per tick, its plan starting at k + d + latency_steps and published, the
    preparation for the next tick timed apart; a controller on the motion gets the motion's window back. The
    estimates are stamped a minute ahead: the plans' due times are not what this checks (no wall-clock rates)."""
    _, motion, path = wave
    with planner_node(path, method="rti", latency_steps=1) as n:
        for k in range(0, 21):     # each plan received before the next tick (the subscription keeps 10)
            feed(n, tracking(n, motion, k, age=-60.0))
            spin_until(n, lambda: len(n.plans_received) == k + 1)
        stats = n.statistics()
        assert stats["updates"] == 21 and stats["published"] == 21, stats
        # a feasible iterate every tick (the first, from drives held before the run's first command, clamped)
        assert all(r.startswith(("step_", "clamped_")) for r in stats["reasons"]), stats
        assert stats["prepare_ms"]["max"] > 0 and n.skipped == dict.fromkeys(n.skipped, 0)
    plans = [plan_from_msg(m) for m in n.plans_received]
    assert [(p.start, p.sequence, p.estimate_tick) for p in plans] == [(k + 2, k + 1, k) for k in range(21)]
    # one iteration per tick works off what the drives' hold before the run's first command put between the first
    # plans and the motion: the plans come back to the motion's window
    gaps = [float(np.abs(p.trajectory.X - motion.X[p.start:p.end + 1]).max()) for p in plans]
    print("largest difference from the motion's window per plan:", gaps)
    assert gaps[-1] < 1e-4 and gaps[-1] < 0.1 * gaps[0], gaps


def test_a_method_it_does_not_know_is_refused_at_start_up(wave):
    with pytest.raises(ParameterError, match="parameter 'method' must be one of receding_horizon, rti, got 'rtx'"):
        with planner_node(wave[2], method="rtx"):
            pass


def test_with_identify_the_node_fits_the_joint_states_after_an_update_and_plans_on_the_fit(wave):
    """docs/mpc.md, "Online identification": the joint states by hardware name (a sample missing by its stamp is a
    gap the window waits out), the fit on a thread of its own after an update, its model taken by the next."""
    _, motion, path = wave
    with planner_node(path, identify=["shoulder.damping", "elbow.damping"]) as node:
        check_identification(node, motion)


def check_identification(node, motion) -> None:
    seen: list = []
    run_loop(motion, HardwareProfile.named("realistic", plant_model_file="plants/damping_x3.yaml", seed=1),
             ControllerOptions(feedback=False), settle_cycles=0, hold_cycles=0, observers=[seen.append])
    names = JointMap.of(node.model, load_packaged_model("marionette_arm.yaml").hardware_joints).hardware_names
    t0 = node.get_clock().now().nanoseconds

    def joint_states(ticks):
        for i in ticks:
            msg = JointState(name=list(reversed(names)), position=list(reversed(seen[i].tolist())))
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(t0 + i * 10_000_000, NS)
            node._on_joint_state(msg)

    joint_states([*range(200, 300), *range(301, 351)])        # sample 300 lost: 150 stamps, a gap in the window
    mpc, nominal = node.mpc, node.mpc.system
    feed(node, *(tracking(node, motion, k) for k in range(0, 11)))   # updates at ticks 0 and 10, a fit after each
    assert node._fitter.wait_idle(60.0)
    assert node.identifier.counts["too_short"] >= 1 and node.identifier.counts["adopted"] == 0
    joint_states(range(351, 451))                              # the gap has left the 1.5 s window
    for k in range(11, 11 + 10 * CONFIRMATIONS, 10):           # a fit after each update, confirmed by the third
        feed(node, *(tracking(node, motion, i) for i in range(k, k + 10)))
        assert node._fitter.wait_idle(60.0)
        joint_states(range(440 + k, 450 + k))
    assert node.identifier.counts["adopted"] == 1, node.identifier.counts
    assert node.identifier.current == pytest.approx({"shoulder.damping": 0.06, "elbow.damping": 0.03}, rel=0.03)
    assert mpc.system is nominal                               # taken by the next update
    feed(node, *(tracking(node, motion, i) for i in range(11 + 10 * CONFIRMATIONS, 21 + 10 * CONFIRMATIONS)))
    assert mpc.system is not nominal and mpc.system.model.hash == node.identifier.model().hash
    assert node.statistics()["published"] == 3 + CONFIRMATIONS   # every update planned


def test_identify_with_method_rti_is_refused_at_start_up(wave):
    with pytest.raises(ParameterError, match="online identification is for method 'receding_horizon', not 'rti'"):
        with planner_node(wave[2], method="rti", identify=["elbow.damping"]):
            pass
