"""The ROS user's path across processes (issue 26): start right after an optimization, also after a ``kill -9`` and a
restart of the controller, and ``~/execute`` (marionette_interfaces/action/ExecuteMotion).

One system for the module, as the main job runs it (``--sim`` node set on the simulator's clock at half real time,
the simulator in lock-step with the controller, the realistic stand-in): the simulator and the optimizer through
``marionette_bringup --only``, the controller as its own process with the bringup's arguments (so it can be killed
and started again). The tests run in file order on it; the client is a test node on its own rclpy context, calling
the same services and action the ``ros2`` CLI lines of docs/robot.md call.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from rclpy.action import ActionClient
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from diagnostic_msgs.msg import DiagnosticArray
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Trigger
from builtin_interfaces.msg import Duration
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from marionette_control import _core
from marionette_control import system_description as sd
from marionette_control.lq.gains import GainDesign, design_gains
from marionette_control.model import library
from marionette_control.trajectory import Trajectory
from marionette_control.cli.main_job import analysis as A
from marionette_control.nodes.convert import trajectory_from_msg, trajectory_to_msg
from marionette_interfaces.action import ExecuteMotion
from marionette_interfaces.msg import TrackedTrajectory, TrackingState
from marionette_interfaces.srv import OptimizeTrajectory

from ros_helpers import ProbeNode, isolated_ros, stop

pytestmark = [pytest.mark.slow]

CTL, SIM, OPT = "/marionette_controller", "/marionette_simulator", "/marionette_optimizer"
NS = 1_000_000_000
RTF = 0.5


def controller_command() -> list:
    """The controller's command line as ``marionette_bringup --sim --use-sim-time`` runs it."""
    node = next(n for n in sd.node_set("sim", use_sim_time=True, real_time_factor=RTF) if n.name == sd.CONTROLLER.name)
    code = f"import sys; from {node.module} import {node.function} as main; sys.exit(main())"
    return [sys.executable, "-c", code, *sd.ros_arguments(node)]


class System:
    """The processes, and the test's client with what it records."""

    def __init__(self, env: dict, logs):
        self.env, self.logs, self.procs = env, logs, []
        self.start("bringup", [sys.executable, "-m", "marionette_control.cli.bringup", "--sim", "--use-sim-time",
                               "--real-time-factor", str(RTF), "--only", "marionette_simulator",
                               "marionette_optimizer", "-p", "marionette_simulator:marker_rate:=0.0",
                               "-p", "marionette_simulator:lockstep_timeout:=1.0"])
        self.controller = self.start("controller", controller_command())
        self.probe = ProbeNode("execute_client")
        n = self.probe.node
        reliable = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        self.joint_states, self.truth, self.ticks, self.commands = [], [], [], []
        n.create_subscription(JointState, "/joint_states", self.joint_states.append, 10)
        n.create_subscription(JointState, f"{SIM}/true_joint_states", self.truth.append, reliable)
        n.create_subscription(TrackingState, f"{CTL}/tracking", self.ticks.append, reliable)
        n.create_subscription(Float64MultiArray, "/forward_position_controller/commands",
                              lambda m: self.commands.append(np.array(m.data)), reliable)
        self.lifecycle: list = []   # the controller's lifecycle state in each of its /diagnostics
        n.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, reliable)
        self.trajectory: list = []
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        n.create_subscription(TrackedTrajectory, f"{OPT}/trajectory", self.trajectory.append, latched)
        self.optimize = n.create_client(OptimizeTrajectory, f"{OPT}/optimize")
        self.start_srv = n.create_client(Trigger, f"{CTL}/start")
        self.stop_srv = n.create_client(Trigger, f"{CTL}/stop")
        self.reset = n.create_client(Trigger, f"{SIM}/reset")
        self.execute = ActionClient(n, ExecuteMotion, f"{CTL}/execute")

    def _on_diagnostics(self, msg):
        for st in msg.status:
            if st.name.startswith("marionette_controller"):
                self.lifecycle.append({kv.key: kv.value for kv in st.values}.get("lifecycle_state"))

    def start(self, name: str, argv: list) -> subprocess.Popen:
        log = open(self.logs / f"{name}_{len(self.procs)}.log", "w")
        p = subprocess.Popen(argv, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(p)
        return p

    def spin_until(self, predicate, timeout: float, what: str):
        self.probe.spin_until(predicate, timeout, what)

    def trigger(self, client, what: str, timeout: float = 30.0):
        """One request, no retry: the answer (success or not)."""
        self.spin_until(client.service_is_ready, 30.0, f"service {what}")
        future = client.call_async(Trigger.Request())
        self.spin_until(future.done, timeout, f"an answer from {what}")
        return future.result()

    def reset_arm(self):
        assert self.trigger(self.reset, "simulator reset").success
        seen = len(self.truth)
        self.spin_until(lambda: len(self.truth) >= seen + 50, 30.0, "the arm settled after the reset")

    def send(self, goal, feedback=None):
        """Sends a goal; its client goal handle (accepted or not)."""
        self.spin_until(self.execute.server_is_ready, 30.0, "the ~/execute server")
        future = self.execute.send_goal_async(goal, feedback_callback=feedback)
        self.spin_until(future.done, 30.0, "the goal's acceptance")
        return future.result()

    def result(self, handle, timeout: float = 120.0):
        future = handle.get_result_async()
        self.spin_until(future.done, timeout, "the goal's result")
        return future.result()

    def close(self):
        self.probe.close()
        for p in reversed(self.procs):
            stop(p)


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    logs = tmp_path_factory.mktemp("execute")
    with isolated_ros() as env:
        s = System(env, logs)
        try:
            s.spin_until(lambda: len(s.joint_states) >= 10, 60.0, "joint states from the simulator")
            yield s
        finally:
            s.close()


def test_start_right_after_an_optimization_and_after_a_kill_and_restart(system):
    """bringup → optimize → ~/start at once (no sleep, no retry) succeeds; so does a start right after the
    controller was killed with SIGKILL and started again (it waits for the optimizer's latched trajectory)."""
    s = system
    s.spin_until(s.optimize.service_is_ready, 60.0, "the optimizer's service")
    future = s.optimize.call_async(OptimizeTrajectory.Request(motion_name="wave"))
    s.spin_until(future.done, 300.0, "the optimization")
    assert future.result().success, future.result().message
    started = s.trigger(s.start_srv, "~/start")
    assert started.success, started.message
    assert s.trigger(s.stop_srv, "~/stop").success

    os.killpg(s.controller.pid, signal.SIGKILL)
    s.controller.wait(30)
    s.lifecycle.clear()
    s.controller = s.start("controller", controller_command())
    # the killed process's endpoints stay in the graph until their lease ends, so "the service is there" says
    # nothing: the new process is up when it reports (unconfigured; the killed one was inactive)
    s.spin_until(lambda: "unconfigured" in s.lifecycle, 60.0, "the restarted controller's first /diagnostics")
    s.start_srv = s.probe.node.create_client(Trigger, f"{CTL}/start")
    restarted = s.trigger(s.start_srv, "~/start of the restarted controller")
    assert restarted.success, restarted.message
    assert s.trigger(s.stop_srv, "~/stop").success


def test_execute_a_motion_by_name_runs_to_the_end_with_feedback_and_the_main_jobs_rms(system):
    """The goal of docs/robot.md's ``ros2 action send_goal ... "{motion_name: wave}" --feedback``: optimized,
    tracked to the end, feedback in every phase, and a result whose RMS per joint matches the main job's evaluation
    of the same run (the simulator's true angles, cli/main_job/analysis.py) within the encoders' noise."""
    s = system
    s.reset_arm()
    feedback = []
    s.ticks.clear()
    truth_from = len(s.truth)
    handle = s.send(ExecuteMotion.Goal(motion_name="wave"), lambda m: feedback.append(m.feedback))
    assert handle.accepted
    res = s.result(handle)
    r = res.result
    assert r.success and r.error_code == ExecuteMotion.Result.SUCCESSFUL, r.error_string
    phases = list(dict.fromkeys(f.phase for f in feedback))
    assert phases[:2] == ["queued", "optimizing"] and phases[-2:] == ["tracking", "holding"], phases
    ticks = np.concatenate([np.array(f.ticks, dtype=int) for f in feedback if f.ticks])
    assert ticks[0] == 0 and np.all(np.diff(ticks) == 1) and ticks[-1] == r.last_tick >= r.num_steps
    assert r.ticks == r.last_tick + 1 and list(r.joint_names) == ["shoulder", "elbow"]
    families = {(m.family, m.component) for m in r.margins}
    assert ("tension", "string") in families and ("acceleration", "carriage") in families
    # the main job's evaluation of this run: true angles against the optimized trajectory at every tick
    s.spin_until(lambda: s.trajectory and len(s.ticks) >= r.ticks, 10.0, "the run's ~/tracking")
    traj = trajectory_from_msg(s.trajectory[-1])
    run = [t for t in s.ticks if t.run == r.run]
    truth = s.truth[truth_from:]
    stamp = np.array([t.header.stamp.sec * NS + t.header.stamp.nanosec for t in run])
    data = A.RunData("execute", "marionette_controller", True, np.array([t.tick for t in run]), stamp,
                     np.array([t.estimated for t in run]), np.array([t.command for t in run]), np.zeros(len(run)), 0,
                     np.array([m.header.stamp.sec * NS + m.header.stamp.nanosec for m in truth]),
                     np.array([m.position for m in truth]), np.array([m.effort for m in truth]), np.zeros(0))
    k, q = data.true_at_ticks()
    sel = k <= traj.N
    true_rms = np.sqrt(np.mean((q[sel, :2] - traj.X[k[sel], :2]) ** 2, axis=0))
    assert sel.sum() > 0.95 * (traj.N + 1), "a true state for (nearly) every tick of the motion"
    assert np.degrees(np.abs(np.array(r.rms_error) - true_rms)).max() < 0.02, (np.degrees(r.rms_error),
                                                                                np.degrees(true_rms))
    assert np.degrees(max(r.rms_error)) < 0.5  # issue 12's bound holds here too


def test_a_second_goal_is_rejected_and_cancel_holds_the_arm(system):
    """execute.concurrency 'reject' (the default): a second goal while one tracks is rejected and the first goes on
    unchanged; canceling it holds the arm where it was (the drives stay at the last command) and answers CANCELED."""
    s = system
    s.reset_arm()
    feedback = []
    first = s.send(ExecuteMotion.Goal(trajectory=s.trajectory[-1]), lambda m: feedback.append(m.feedback))
    assert first.accepted
    s.spin_until(lambda: any(f.ticks and f.ticks[-1] >= 150 for f in feedback), 60.0, "tracking past tick 150")
    second = s.send(ExecuteMotion.Goal(motion_name="wave"))
    assert not second.accepted
    seen = max(f.ticks[-1] for f in feedback if f.ticks)
    s.spin_until(lambda: max(f.ticks[-1] for f in feedback if f.ticks) >= seen + 50, 30.0, "the first goes on")
    future = first.cancel_goal_async()
    s.spin_until(future.done, 10.0, "the cancel's answer")
    r = s.result(first).result
    assert r.error_code == ExecuteMotion.Result.CANCELED and not r.success and "holding" in r.error_string
    assert 150 < r.last_tick < r.num_steps
    n = len(s.commands)
    hold = s.commands[-1]
    truth_from = len(s.truth)
    s.spin_until(lambda: len(s.truth) >= truth_from + 60, 30.0, "the arm after the cancel")
    assert all(np.array_equal(c, hold) for c in s.commands[n:]), "only the hold command after the cancel"
    drives = np.array([m.position[2:4] for m in s.truth[-10:]])
    np.testing.assert_allclose(drives, np.tile(hold, (10, 1)), atol=2e-3)


def test_goals_the_arm_cannot_start_and_absurd_goals_are_refused_naming_why(system):
    """Away from x_d(0): START_TOLERANCE_VIOLATED naming the joint; another model, a NaN, a negative time step, two
    sources, a NaN in desired angles: refused with the field named, and nothing moves."""
    s = system
    s.reset_arm()
    base = s.trajectory[-1]
    traj = trajectory_from_msg(base)
    moved = len(s.commands)
    R = ExecuteMotion.Result

    def refused(goal):
        handle = s.send(goal)
        assert handle.accepted  # accepted, then ended with the reason (a rejection could carry none)
        return s.result(handle, 30.0).result

    k0 = 300
    part = type(traj)(dt=traj.dt, X=traj.X[k0:], U=traj.U[k0:], state_names=traj.state_names,
                      input_names=traj.input_names, model_name=traj.model_name, model_hash=traj.model_hash,
                      K=traj.K[k0:], info=traj.info)
    r = refused(ExecuteMotion.Goal(trajectory=trajectory_to_msg(part, TrackedTrajectory, traj.state_names[:4])))
    assert r.error_code == R.START_TOLERANCE_VIOLATED and "not where the trajectory starts" in r.error_string
    assert any(f"{j} is " in r.error_string for j in ("shoulder", "elbow", "carriage", "string_length")), r.error_string

    def changed(**fields):
        msg = trajectory_to_msg(traj, TrackedTrajectory, traj.state_names[:4])
        for k, v in fields.items():
            setattr(msg, k, v)
        return msg

    states = np.array(base.states)
    states[17] = np.nan
    for goal, code, words in (
            (ExecuteMotion.Goal(trajectory=changed(model_id="pendulum")), R.INVALID_JOINTS, "trajectory.model_id"),
            (ExecuteMotion.Goal(trajectory=changed(states=states.tolist())), R.INVALID_GOAL, "trajectory.states[17]"),
            (ExecuteMotion.Goal(trajectory=changed(dt=-0.01)), R.INVALID_GOAL, "trajectory.dt"),
            (ExecuteMotion.Goal(trajectory=base, motion_name="wave"), R.INVALID_GOAL, "exactly one of")):
        r = refused(goal)
        assert r.error_code == code and words in r.error_string, (r.error_code, r.error_string)
    points = [JointTrajectoryPoint(positions=[p], time_from_start=Duration(sec=t))
              for t, p in ((0, 0.0), (1, math.nan))]
    r = refused(ExecuteMotion.Goal(desired=JointTrajectory(joint_names=["shoulder"], points=points)))
    assert r.error_code == R.OPTIMIZATION_FAILED and "desired.points[1].positions[0]" in r.error_string, r.error_string
    assert len(s.commands) == moved, "no refused goal moved the arm"


def test_a_queued_goal_waits_its_turn_and_is_judged_where_the_arm_then_is(system):
    """execute.concurrency 'queue' (the controller restarted with it): a goal sent while another runs waits (phase
    queued) and never retargets the first, which runs to its end; its turn comes where the first left the arm, away
    from its own start, so it ends with START_TOLERANCE_VIOLATED, saying so."""
    s = system
    stop(s.controller)
    s.lifecycle.clear()
    s.controller = s.start("controller", controller_command() + ["-p", "execute.concurrency:=queue"])
    s.spin_until(lambda: "unconfigured" in s.lifecycle, 60.0, "the controller restarted with the queue")
    s.execute = ActionClient(s.probe.node, ExecuteMotion, f"{CTL}/execute")
    s.reset_arm()
    traj = trajectory_from_msg(s.trajectory[-1])
    steps = 100   # the wave's first second, with its own gains (the controller checks them against their design)
    model = library.get("marionette_arm")
    part = Trajectory.for_model(model, traj.dt, traj.X[:steps + 1], traj.U[:steps])
    part = design_gains(_core.DiscreteSystem(model, traj.dt), part.X, part.U, GainDesign.of(traj)).attach(part)
    goal = ExecuteMotion.Goal(trajectory=trajectory_to_msg(part, TrackedTrajectory, traj.state_names[:4]))
    later = []
    first = s.send(goal)
    second = s.send(goal, lambda m: later.append(m.feedback.phase))
    assert first.accepted and second.accepted
    r1, r2 = s.result(first).result, s.result(second).result
    assert r1.success and r1.last_tick >= steps, r1.error_string
    assert later and later[0] == "queued" and "tracking" not in later
    assert r2.error_code == ExecuteMotion.Result.START_TOLERANCE_VIOLATED, (r2.error_code, r2.error_string)
    assert "not where the trajectory starts" in r2.error_string
