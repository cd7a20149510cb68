"""The optimizer node against a hostile or careless peer on the graph (issue 13, "Why"), across processes.

ROS 2 has no authentication by default: anything on the graph can call the optimizer's service and
action and set its parameters. The node runs in its own process with a ``save_directory``; the test
process plays the peer:

* ``save_path`` attacks: an absolute path outside, ``..`` escapes, a symbolic link out of the
  directory, overwriting an existing file, creating directories outside; each must be refused with
  its reason, with the file system untouched;
* widening the confinement at run time through the parameter services: refused (read-only);
* a flood of concurrent service requests and of action goals: every request is answered (busy or
  rejected explicitly when the policy cannot admit it), none is lost;

and after each, the node still serves a good request.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import rclpy
from builtin_interfaces.msg import Duration
from rcl_interfaces.srv import SetParameters
from rclpy.action import ActionClient
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from marionette_interfaces.action import OptimizeTrajectory as OptimizeAction
from marionette_interfaces.msg import OptimizationOptions
from marionette_interfaces.srv import OptimizeTrajectory as OptimizeService
from ros_helpers import isolated_ros, start_node, stop, wait_for

FLOOD = 20  # the reproduction: 20 concurrent requests, 11 answered, 9 never


def small_request(cls=OptimizeService.Request, **fields):
    """A valid pendulum request that optimizes in a few milliseconds."""
    jt = JointTrajectory(joint_names=["theta"])
    for k, q in enumerate((0.0, 0.1, 0.2)):
        jt.points.append(JointTrajectoryPoint(positions=[q], time_from_start=Duration(nanosec=100_000_000 * k)))
    return cls(model_id="pendulum", desired=jt, **fields)


def busy_request(cls=OptimizeService.Request, seconds: float = 1.0):
    """A request that keeps the optimizer busy for ``seconds`` (steepest descent stopped by its deadline)."""
    req = small_request(cls)
    jt = JointTrajectory(joint_names=["theta"])
    for k in range(101):
        jt.points.append(JointTrajectoryPoint(positions=[0.0 if k < 50 else math.pi],
                                              time_from_start=Duration(sec=k // 10, nanosec=(k % 10) * 100_000_000)))
    req.desired = jt
    req.options = OptimizationOptions(methods=["steepest"], method_iterations=[0], tolerance=1e-12,
                                      max_iterations=100000, deadline_s=seconds, input_weight_names=["torque"],
                                      input_weights=[50.0])
    return req


class Peer:
    """An rclpy node in the test process: service clients, an action client, parameter access."""

    def __init__(self, context, clients: int = 1):
        self.node = rclpy.create_node("adversarial_peer", context=context)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        # One client per concurrent caller. Each keeps as many responses as the flood has requests: rmw_fastrtps
        # delivers every response of a service to every client's response reader (each picks its own when it
        # takes), so a default client (keep last 10) can lose its own answer under more than 10 others arriving
        # first. That is the caller's queue, not the node's; the node's are the qos_depth parameters.
        qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=2 * clients, reliability=ReliabilityPolicy.RELIABLE)
        self.clients = [self.node.create_client(OptimizeService, "/marionette_optimizer/optimize", qos_profile=qos)
                        for _ in range(clients)]
        self.action = ActionClient(self.node, OptimizeAction, "/marionette_optimizer/optimize_action",
                                   goal_service_qos_profile=qos, result_service_qos_profile=qos,
                                   cancel_service_qos_profile=qos)
        self.parameters = self.node.create_client(SetParameters, "/marionette_optimizer/set_parameters")

    def wait_ready(self) -> bool:
        """True once every client has had an answer: wait_for_service only sees the request path matched, and a
        response sent before the client's response reader is matched would be lost in discovery, not by the node."""
        if not (all(c.wait_for_service(timeout_sec=20.0) for c in self.clients)
                and self.action.wait_for_server(timeout_sec=10.0) and self.parameters.wait_for_service(timeout_sec=10.0)):
            return False
        for client in self.clients:
            future = client.call_async(small_request())
            if not self.spin_until(future.done, 20.0):
                return False
        return True

    def spin_until(self, predicate, timeout: float) -> bool:
        return wait_for(predicate, timeout, spin=lambda: self.executor.spin_once(timeout_sec=0.02))

    def result(self, future, timeout: float = 30.0):
        """The future's result; the timeout only guards against a hang (nothing is asserted about time)."""
        assert self.spin_until(future.done, timeout), "no answer"
        return future.result()

    def call(self, request, timeout: float = 30.0):
        return self.result(self.clients[0].call_async(request), timeout)

    def close(self):
        self.action.destroy()
        self.node.destroy_node()
        self.executor.shutdown()


def snapshot(root: Path) -> dict:
    """Every file and directory under root with its content (to show that nothing changed)."""
    return {p.relative_to(root): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


@pytest.fixture
def optimizer(tmp_path, request):
    """(peer, save_directory, tmp_path): the optimizer node process with a save directory, and a peer."""
    params = getattr(request, "param", {})
    results = tmp_path / "results"
    args = ["--ros-args", "-p", "model:=pendulum", "-p", f"save_directory:={results}"]
    for k, v in params.items():
        args += ["-p", f"{k}:={v}"]
    log = tmp_path / "optimizer.log"
    with isolated_ros() as env:
        proc = start_node("marionette_control.nodes.optimizer", args, env, log)
        context = rclpy.context.Context()
        rclpy.init(context=context)
        peer = None
        try:
            peer = Peer(context, clients=FLOOD)
            assert peer.wait_ready(), f"the optimizer did not come up; log:\n{log.read_text()}"
            yield peer, results, tmp_path
            assert proc.poll() is None, f"the optimizer died; log:\n{log.read_text()}"
            still = peer.call(small_request(save_path="still_serving.npz"))
            assert still.success, still.message
            assert (results / "still_serving.npz").is_file()
        finally:
            if peer is not None:
                peer.close()
            context.try_shutdown()
            assert stop(proc) == 0, log.read_text()


def test_save_path_attacks_are_refused_and_write_nothing(optimizer):
    peer, results, tmp = optimizer
    outside = tmp / "outside"
    outside.mkdir()
    (outside / "victim.npz").write_bytes(b"precious")
    (results / "link").symlink_to(outside, target_is_directory=True)
    (results / "existing.npz").write_bytes(b"earlier result")
    attacks = {
        "absolute path outside": (str(outside / "abs.npz"), "absolute paths are not allowed"),
        "absolute path overwriting": (str(outside / "victim.npz"), "absolute paths are not allowed"),
        "dot-dot escape": ("../outside/escaped.npz", "outside the directory"),
        "deep dot-dot escape": ("../" * 30 + "tmp/escaped.npz", "outside the directory"),
        "directories created outside": ("../outside/new/dirs/x.npz", "outside the directory"),
        "symbolic link out": ("link/through.npz", "outside the directory"),
        "existing file": ("existing.npz", "exists; set overwrite"),
        "not a trajectory file": ("startup.sh", "must end in .npz"),
    }
    before_out, before_in = snapshot(outside), snapshot(results)
    wrong = []
    for name, (path, reason) in attacks.items():
        res = peer.call(small_request(save_path=path))
        if res.success or not res.message.startswith("invalid request: save_path") or reason not in res.message:
            wrong.append(f"{name}: success={res.success}, {res.message!r} (expected {reason!r})")
    assert not wrong, "\n".join(wrong)
    assert snapshot(outside) == before_out, "nothing written, created or replaced outside save_directory"
    assert snapshot(results) == before_in, "nothing written inside either (every request was refused before the run)"
    assert not (tmp / "outside" / "new").exists()

    # the same through the action: the goal is aborted with the reason
    handle = peer.result(peer.action.send_goal_async(small_request(OptimizeAction.Goal, save_path="../x.npz")))
    assert handle.accepted
    res = peer.result(handle.get_result_async())
    assert not res.result.success and "outside the directory" in res.result.message
    assert not (tmp / "x.npz").exists()

    # overwriting is a request's explicit choice
    res = peer.call(small_request(save_path="existing.npz", overwrite=True))
    assert res.success and "saved to" in res.message, res.message
    assert (results / "existing.npz").read_bytes()[:2] == b"PK", "replaced by the .npz result"


def test_the_confinement_cannot_be_widened_at_run_time(optimizer):
    peer, results, tmp = optimizer
    for name, value in (("save_directory", str(tmp)), ("allowed_save_directories", [str(tmp)])):
        req = SetParameters.Request(parameters=[Parameter(name, value=value).to_parameter_msg()])
        res = peer.result(peer.parameters.call_async(req))
        assert not res.results[0].successful and "read-only" in res.results[0].reason, (name, res.results[0])
    res = peer.call(small_request(save_path="../widened.npz"))
    assert not res.success and "outside the directory" in res.message
    assert not (tmp / "widened.npz").exists()


POLICIES = [({}, 0), ({"concurrency": "queue", "queue_size": 4}, 4)]


def start_running(peer):
    """A goal that keeps the optimizer busy until canceled (steepest descent on the arm's wave without its
    inequality constraints: thousands of iterations); returns its handle once it runs."""
    feedback = []
    goal = OptimizeAction.Goal(model_id="marionette_arm", motion_name="wave")
    goal.options = OptimizationOptions(methods=["steepest"], method_iterations=[0], tolerance=1e-12,
                                       max_iterations=100000, constraints="off")
    handle = peer.result(peer.action.send_goal_async(goal, feedback_callback=feedback.append))
    assert handle.accepted and peer.spin_until(lambda: feedback, 20.0), "the first goal did not start"
    return handle


@pytest.mark.parametrize("optimizer, waiting", POLICIES, indirect=["optimizer"], ids=["reject", "queue"])
def test_every_concurrent_service_request_is_answered(optimizer, waiting):
    """FLOOD clients call at once while an optimization runs: the policy's waiting places are taken, every
    other request is answered busy at once, and the waiting ones are answered when their turn comes."""
    peer, _, _ = optimizer
    running = start_running(peer)
    futures = [c.call_async(small_request()) for c in peer.clients]
    assert peer.spin_until(lambda: sum(f.done() for f in futures) >= FLOOD - waiting, 60.0), (
        f"{sum(not f.done() for f in futures)} of {FLOOD} requests unanswered while the first goal runs")
    refused = [f.result() for f in futures if f.done()]
    assert len(refused) == FLOOD - waiting and all(not a.success and a.message.startswith("busy") for a in refused)
    peer.result(running.cancel_goal_async())
    assert peer.spin_until(lambda: all(f.done() for f in futures), 60.0), "a waiting request was never answered"
    assert sum(f.result().success for f in futures) == waiting
    assert peer.result(running.get_result_async()).result.success


@pytest.mark.parametrize("optimizer, waiting", POLICIES, indirect=["optimizer"], ids=["reject", "queue"])
def test_every_concurrent_action_goal_gets_a_response_and_each_accepted_one_a_result(optimizer, waiting):
    peer, _, _ = optimizer
    running = start_running(peer)
    goals = [peer.action.send_goal_async(small_request(OptimizeAction.Goal)) for _ in range(FLOOD)]
    assert peer.spin_until(lambda: all(g.done() for g in goals), 60.0), (
        f"{sum(not g.done() for g in goals)} of {FLOOD} goals got no response")
    accepted = [g.result() for g in goals if g.result().accepted]
    assert len(accepted) == waiting, "goals beyond the policy are rejected explicitly"
    peer.result(running.cancel_goal_async())
    results = [h.get_result_async() for h in accepted + [running]]
    assert peer.spin_until(lambda: all(r.done() for r in results), 60.0), "an accepted goal got no result"
    assert all(r.result().result.success for r in results)
