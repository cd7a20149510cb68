"""Two complete marionette systems on one ROS graph, in namespaces arm1 and arm2, do not interfere.

Each system is a bringup (simulator on its 'perfect' profile, optimizer, controller with
autostart) in its own namespace, both on one isolated graph (one ROS_DOMAIN_ID). Only arm1 is
asked for a trajectory (the wave, from /arm1/marionette_optimizer/optimize). Shown by counting
messages, not by timing:

* the graph: every node of both systems in its namespace, one publisher per joint-state and
  command topic, nothing on the root names (/joint_states, /forward_position_controller/commands);
* arm1's optimizer publishes on its own latched topic only, arm1's controller takes that trajectory,
  starts tracking and commands arm1's simulator, whose arm moves;
* meanwhile arm2's controller has no trajectory, publishes no tracking sample and no command, and
  arm2's simulated arm stays at rest;
* /diagnostics carries both controllers' statuses under their namespaced names.

arm1 runs on its simulator's clock in lock-step with its controller, arm2 on the wall clock (:data:`LOCKSTEP`).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from marionette_interfaces.msg import TrackedTrajectory, TrackingState
from marionette_interfaces.srv import OptimizeTrajectory
from ros_helpers import isolated_ros, node_processes, wait_for  # noqa: F401  (fixture)

pytestmark = pytest.mark.slow

ARMS = ("arm1", "arm2")
NODES = ("marionette_simulator", "marionette_optimizer", "marionette_controller")
TICKS = 100  # tracking samples of arm1 to see before judging
#: arm1, the system that tracks, on its simulator's clock in lock-step with its controller (as test_closed_loop.py):
#: what is judged here is where messages go, and a machine that stalls a process for a quarter of a second (a CI run
#: under load went 29 ticks without a current sample, the arm held while its trajectory ran on, and the path
#: tolerance ended the run at tick 122) must not decide it. /clock is global (one simulated clock per graph): arm2, which
#: never tracks, runs on the wall clock and does not listen to it.
LOCKSTEP = ("--use-sim-time", "-p", "marionette_simulator:lockstep_timeout:=1.0")


class Probe:
    """Subscriptions to both systems' topics, counting what arrives per namespace."""

    def __init__(self, context):
        self.node = rclpy.create_node("namespace_probe", context=context)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.lock = threading.Lock()
        self.got = {(arm, what): [] for arm in ARMS for what in ("tracking", "commands", "true", "trajectory")}
        self.statuses = {}   # diagnostic status name -> its latest message (what a failure reports)
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        for arm in ARMS:
            self._sub(TrackingState, f"/{arm}/marionette_controller/tracking", (arm, "tracking"), 1000)
            self._sub(Float64MultiArray, f"/{arm}/forward_position_controller/commands", (arm, "commands"), 1000)
            self._sub(JointState, f"/{arm}/marionette_simulator/true_joint_states", (arm, "true"), 1000)
            self._sub(TrackedTrajectory, f"/{arm}/marionette_optimizer/trajectory", (arm, "trajectory"), latched)
        self.node.create_subscription(DiagnosticArray, "/diagnostics",
                                      lambda m: self.statuses.update((s.name, s.message) for s in m.status), 100)
        self.optimize = {arm: self.node.create_client(OptimizeTrajectory, f"/{arm}/marionette_optimizer/optimize")
                         for arm in ARMS}

    def _sub(self, kind, topic, key, qos):
        def store(msg):
            with self.lock:
                self.got[key].append(msg)
        self.node.create_subscription(kind, topic, store, qos)

    def count(self, arm, what) -> int:
        with self.lock:
            return len(self.got[(arm, what)])

    def spin_until(self, predicate, timeout) -> bool:
        """Spins until predicate() holds; the timeout only guards against a hang."""
        return wait_for(predicate, timeout, spin=lambda: self.executor.spin_once(timeout_sec=0.02))

    def close(self):
        self.node.destroy_node()
        self.executor.shutdown()


def _warnings(log_path) -> str:
    """The warning and error lines of a bringup's log (what a failure shows of the nodes)."""
    with open(log_path) as log:
        return "".join(line for line in log if "[WARN]" in line or "[ERROR]" in line)


def test_two_namespaced_systems_on_one_graph_do_not_interfere(node_processes):  # noqa: F811
    with isolated_ros() as env:
        logs = {}
        for arm, timing in (("arm1", LOCKSTEP), ("arm2", ())):
            logs[arm] = node_processes("marionette_control.cli.bringup", [
                "--sim", "--namespace", arm, "--autostart", "-p", "marionette_simulator:profile:=perfect",
                "-p", "marionette_simulator:command_delay_steps:=1", *timing], env).log_path
        context = rclpy.context.Context()
        rclpy.init(context=context)
        probe = Probe(context)
        try:
            graph = lambda: set(probe.node.get_node_names_and_namespaces())  # noqa: E731
            wanted = {(n, f"/{arm}") for n in NODES for arm in ARMS}
            # (the lifecycle controller subscribes and publishes once it is configured, and every endpoint is
            # discovered on its own: wait for each one the checks below count)
            assert probe.spin_until(lambda: wanted <= graph() and all(
                probe.count(arm, "true") and c.service_is_ready()
                and probe.node.count_subscribers(f"/{arm}/joint_states") >= 1
                and probe.node.count_publishers(f"/{arm}/forward_position_controller/commands") >= 1
                and probe.node.count_subscribers(f"/{arm}/marionette_optimizer/trajectory") >= 1
                for arm, c in probe.optimize.items()), 60.0), (
                f"nodes on the graph: {sorted(graph())}")
            n = probe.node
            for arm in ARMS:
                assert n.count_publishers(f"/{arm}/joint_states") == 1, "one simulator per namespace"
                assert n.count_subscribers(f"/{arm}/joint_states") >= 1, "the controller listens in its namespace"
                assert n.count_publishers(f"/{arm}/forward_position_controller/commands") == 1
                assert n.count_subscribers(f"/{arm}/marionette_optimizer/trajectory") >= 1
            for root in ("/joint_states", "/forward_position_controller/commands", "/marionette_optimizer/trajectory"):
                assert n.count_publishers(root) == 0 and n.count_subscribers(root) == 0, f"{root} is used"

            future = probe.optimize["arm1"].call_async(OptimizeTrajectory.Request(motion_name="wave"))
            assert probe.spin_until(future.done, 120.0), "arm1's optimizer did not answer"
            assert future.result().success, future.result().message
            assert probe.spin_until(lambda: probe.count("arm1", "tracking") >= TICKS, 60.0), (
                f"arm1's controller did not track its optimizer's trajectory ({probe.count('arm1', 'tracking')} "
                f"samples): its status {probe.statuses.get('arm1/marionette_controller: tracking')!r}; warnings of "
                f"arm1's nodes:\n{_warnings(logs['arm1'])}")
            probe.spin_until(lambda: False, 0.2)  # take what is already in flight

            with probe.lock:
                got = {k: list(v) for k, v in probe.got.items()}
            assert len(got[("arm1", "trajectory")]) == 1 and len(got[("arm2", "trajectory")]) == 0
            assert len(got[("arm1", "commands")]) >= TICKS
            assert len(got[("arm2", "tracking")]) == 0 and len(got[("arm2", "commands")]) == 0, (
                "arm2's controller has no trajectory: it must neither track nor command")
            q1 = np.array([m.position for m in got[("arm1", "true")]])
            q2 = np.array([m.position for m in got[("arm2", "true")]])
            assert np.ptp(q1[:, 0]) > 0.05, "arm1's shoulder follows the wave"
            assert len(q2) >= TICKS and np.ptp(q2, axis=0).max() < 1e-6, "arm2 stays at rest"
            assert {"arm1/marionette_controller: tracking", "arm2/marionette_controller: tracking"} <= probe.statuses.keys()
        finally:
            probe.close()
            context.try_shutdown()
