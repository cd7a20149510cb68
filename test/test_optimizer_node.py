"""marionette_optimizer across processes: the node in its own process, clients in the test process.

One node process serves the whole module (started once: process start and discovery cost
about a second); every test talks to it through its own isolated ROS graph (private
ROS_DOMAIN_ID, localhost discovery), and the process is always stopped at the end. The
optimizations are kept short: the arm's 8 s wave (800 steps, about a second) and seed 001's
pendulum swing-up (100 steps, a fraction of a second); cancel and deadline use steepest
descent on the pendulum, which needs hundreds of iterations.
"""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import time

import numpy as np
import pytest

import rclpy  # noqa: E402

from action_msgs.msg import GoalStatus  # noqa: E402
from builtin_interfaces.msg import Duration  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

from marionette_control import _core  # noqa: E402
from marionette_control.model import library  # noqa: E402
from marionette_control.tracking.controller import ControllerOptions, make_core  # noqa: E402
from marionette_control.lq.gains import PER_JOINT, GainDesign, design_gains  # noqa: E402
from marionette_control.ocp.spec import load_spec  # noqa: E402
from marionette_control.resources import config_file  # noqa: E402
from marionette_control.trajectory import Trajectory  # noqa: E402
from marionette_control.nodes.convert import trajectory_from_msg  # noqa: E402
from marionette_control.ocp.problem import DEFAULT_MARGINS, DEFAULT_TENSION_RESERVE  # noqa: E402
from marionette_control.ocp.tracking_problem import default_motion_directories, motion_names  # noqa: E402
from ros_helpers import isolated_ros, node_processes, ros_env, start_node, stop, wait_for  # noqa: E402,F401

from marionette_interfaces.action import OptimizeTrajectory as OptimizeAction  # noqa: E402
from marionette_interfaces.msg import ConvergenceData, OptimizationOptions, TrackedTrajectory  # noqa: E402
from marionette_interfaces.srv import OptimizeTrajectory as OptimizeService  # noqa: E402

SERVICE = "/marionette_optimizer/optimize"
ACTION = "/marionette_optimizer/optimize_action"
TOPIC = "/marionette_optimizer/trajectory"
FEEDBACK_TOPIC = ACTION + "/_action/feedback"
SEED_COST = 13297.3789  # seed 001 §VIII-A swing-up (docs/reproductions.md §1)


class Client:
    """An rclpy node in the test process with the optimizer's service, action and a spin helper."""

    def __init__(self, context):
        self.context = context
        self.node = rclpy.create_node("optimizer_test_client", context=context)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.service = self.node.create_client(OptimizeService, SERVICE)
        self.action = ActionClient(self.node, OptimizeAction, ACTION)
        # The feedback topic read directly: rclpy's ActionClient drops the feedback that arrives after the
        # goal's result (topic and result service are separate channels), which a fast optimization's last
        # messages often do.
        self.feedback_messages = []
        self.node.create_subscription(OptimizeAction.Impl.FeedbackMessage, FEEDBACK_TOPIC, self.feedback_messages.append,
                                      QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1000,
                                                 reliability=ReliabilityPolicy.RELIABLE))

    def feedback_of(self, handle) -> list:
        """The feedback messages of a goal received so far, in order."""
        return [m.feedback for m in self.feedback_messages if bytes(m.goal_id.uuid) == bytes(handle.goal_id.uuid)]

    def wait(self, future, timeout: float):
        self.executor.spin_until_future_complete(future, timeout_sec=timeout)
        assert future.done(), f"no answer within {timeout} s"
        return future.result()

    def call(self, request, timeout: float = 30.0):
        return self.wait(self.service.call_async(request), timeout)

    def send_goal(self, goal, feedback=None, timeout: float = 10.0):
        return self.wait(self.action.send_goal_async(goal, feedback_callback=feedback), timeout)

    def spin_until(self, predicate, timeout: float) -> bool:
        return wait_for(predicate, timeout, spin=lambda: self.executor.spin_once(timeout_sec=0.02))

    def close(self):
        self.action.destroy()
        self.node.destroy_node()
        self.executor.shutdown()


@pytest.fixture(scope="module")
def optimizer(tmp_path_factory):
    """(client, tmp dir): the node process (default model marionette_arm) and a connected client."""
    tmp = tmp_path_factory.mktemp("optimizer")
    with isolated_ros() as env:
        proc = start_node("marionette_control.nodes.optimizer", ["--ros-args", "-p", f"save_directory:={tmp}"], env,
                          tmp / "optimizer.log")
        context = rclpy.context.Context()
        rclpy.init(context=context)
        client = None
        try:
            client = Client(context)
            ready = client.service.wait_for_service(timeout_sec=20.0) and client.action.wait_for_server(
                timeout_sec=10.0)
            assert ready, f"optimizer did not come up; log:\n{(tmp / 'optimizer.log').read_text()}"
            # Action feedback is volatile: wait until the feedback publisher is discovered too.
            assert client.spin_until(lambda: client.node.count_publishers(FEEDBACK_TOPIC) > 0, 10.0)
            yield client, tmp
            assert proc.poll() is None, f"optimizer died; log:\n{(tmp / 'optimizer.log').read_text()}"
        finally:
            if client is not None:
                client.close()
            context.try_shutdown()
            code = stop(proc)
            assert code == 0, f"optimizer exited with {code}; log:\n{(tmp / 'optimizer.log').read_text()}"


# --------------------------------------------------------------------------------------------- requests


def duration(t: float) -> Duration:
    ns = round(t * 1e9)
    return Duration(sec=ns // 10**9, nanosec=ns % 10**9)


def swing_up(n: int = 100, dt: float = 0.1) -> JointTrajectory:
    """Seed 001's desired pendulum motion: theta = 0 for k < n/2, pi afterwards."""
    jt = JointTrajectory(joint_names=["theta"])
    for k in range(n + 1):
        jt.points.append(JointTrajectoryPoint(positions=[0.0 if k < n // 2 else math.pi],
                                              time_from_start=duration(k * dt)))
    return jt


def pendulum_request(cls=OptimizeService.Request, **options):
    req = cls(model_id="pendulum", desired=swing_up())
    req.options = OptimizationOptions(input_weight_names=["torque"], input_weights=[50.0], **options)
    return req


def slow_pendulum_goal(**options):
    """Steepest descent on the swing-up: about 600 iterations and 0.25 s here, so it can be canceled or run out
    of time."""
    return pendulum_request(OptimizeAction.Goal, methods=["steepest"], method_iterations=[0], tolerance=1e-12,
                            max_iterations=100000, **options)


def check_feasible(msg: TrackedTrajectory, model_name: str):
    """The trajectory is one of the model's (every step is an integrator step) and carries gains.

    Checked step by step: an open-loop re-simulation of the whole swing-up would amplify the
    integrator's Newton tolerance exponentially near the upright equilibrium."""
    model = library.get(model_name)
    traj = trajectory_from_msg(msg)
    traj.check_model(model)
    N, nx, nU = traj.N, model.nx, model.nU
    assert traj.K is not None and traj.K.shape == (N, nU, nx) and np.all(np.isfinite(traj.K))
    system = _core.DiscreteSystem(model, traj.dt)
    X = np.array([system.step(traj.X[k], traj.U[k])[0] for k in range(N)])
    np.testing.assert_allclose(X, traj.X[1:], rtol=0, atol=1e-8)
    if model.nc:
        assert max(np.abs(model.constraints(x[:model.nq])[0]).max() for x in traj.X) < 1e-8
    return model, traj


def check_history(c: ConvergenceData, constrained: bool = False):
    n = c.iterations
    for arr in (c.costs, c.descent_norms, c.step_lengths, c.methods, c.violations):
        assert len(arr) == n + 1
    assert c.step_lengths[0] == 0.0 and c.methods[0] == ""
    if constrained:
        # The first iterates may leave the constraints (the approximate barrier); once one satisfies them every
        # later one does, the result included. The barrier problems' objective decreases, the tracking cost
        # alone may rise slightly when the barrier weight falls (the iterate moves closer to a limit).
        inside = [v == 0.0 for v in c.violations[1:]]
        assert inside and inside == sorted(inside) and inside[-1]
        assert c.costs[-1] <= min(c.costs) * (1 + 1e-3)
    else:
        assert all(b <= a for a, b in zip(c.costs, c.costs[1:])), "costs must decrease"


# --------------------------------------------------------------------------------------------- tests


def test_service_optimizes_the_arm_wave_and_saves_it(optimizer):
    client, tmp = optimizer
    path = tmp / "wave.npz"
    res = client.call(OptimizeService.Request(motion_name="wave", save_path="wave.npz"), timeout=60.0)
    assert res.success, res.message
    assert res.convergence.converged and res.convergence.termination_reason == ConvergenceData.REASON_CONVERGED
    check_history(res.convergence, constrained=True)
    model, traj = check_feasible(res.trajectory, "marionette_arm")
    assert traj.N == 800 and traj.dt == pytest.approx(0.01)
    # The model file's limits hold (by default) less the reserve kept for the feedback (the node's defaults:
    # ConstraintOptions'): the report has every constraint row, all satisfied, with the hardware's limit and the
    # reserve, and the carriage's first step from rest stays within its 15 m/s^2.
    assert res.constraints_satisfied and res.max_violation == 0.0
    rows = {c.label: c for c in res.constraints}
    acc, floor = 15.0 * (1 - DEFAULT_MARGINS["acceleration"]), 0.5 + DEFAULT_TENSION_RESERVE
    assert {f"carriage acceleration >= {-acc:g} m/s^2", f"string tension >= {floor:g} N"} <= set(rows)
    assert rows[f"carriage acceleration >= {-acc:g} m/s^2"].hardware_limit == -15.0
    assert rows[f"string tension >= {floor:g} N"].reserve == pytest.approx(DEFAULT_TENSION_RESERVE)
    assert len(res.constraints) == 13 and all(c.satisfied and c.worst_margin >= 0 for c in res.constraints)
    # the wave is trackable as drawn (no re-timing asked for): the answer says so
    assert res.retiming.trackable and res.retiming.trackable_as_drawn and res.retiming.factor == 1.0
    assert res.retiming.duration_s == pytest.approx(8.0) and res.retiming.mode == ""
    assert list(res.retiming.configurations) == ["shoulder", "elbow"] and "trackable" in res.message
    acc0 = ((traj.U[0, 0] - traj.X[0, 2]) / traj.dt - traj.X[0, 6]) / traj.dt
    assert abs(acc0) <= 15.0 * (1 + 1e-6)
    assert "constraints satisfied" in res.message
    # The drives' feed-forward for a stock joint_trajectory_controller: the hardware joint names, one point per
    # state, the kinematic configurations with their velocities (the state's v_k = (rho_k - rho_{k-1})/dt), within
    # the drives' speed limits (2 m/s carriage, 1.5 m/s winch)
    act = res.trajectory.actuators
    assert act.joint_names == ["carriage", "string_length"] and len(act.points) == traj.N + 1
    P = np.array([p.positions for p in act.points])
    V = np.array([p.velocities for p in act.points])
    T = np.array([p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in act.points])
    np.testing.assert_array_equal(P, traj.X[:, 2:4])
    np.testing.assert_array_equal(V, traj.X[:, 6:8])
    np.testing.assert_allclose(V[1:], np.diff(P, axis=0) / traj.dt, rtol=0, atol=1e-9)
    np.testing.assert_allclose(T, np.arange(traj.N + 1) * traj.dt, rtol=0, atol=1e-9)
    assert np.all(np.abs(V) <= np.array([2.0, 1.5]) * (1 + 1e-6))
    # The optimized angles follow the wave closely (the initial trajectory just hangs).
    from marionette_control.model.motion import desired_states, load_motion
    from marionette_control.model.library.marionette_arm import load_description

    _, Xd = desired_states(model, load_motion(config_file("motions", "wave.yaml")), 0.01)
    assert np.abs(traj.X[:, :2] - Xd[:, :2]).max() < 0.05
    assert res.trajectory.cost == pytest.approx(res.convergence.costs[-1])
    assert "converged" in res.message and str(path) in res.message
    saved = Trajectory.load(path, model)
    np.testing.assert_array_equal(saved.X, traj.X)
    np.testing.assert_array_equal(saved.K, traj.K)
    # The gains are designed for the arm and one step of command delay (the node's tracking_gains.* parameters,
    # GainDesign's defaults) and carry their record, in the message and in the file; a controller compensating
    # that delay accepts them without a warning, one configured for another delay refuses them.
    designed = design_gains(_core.DiscreteSystem(model, traj.dt), traj.X, traj.U, GainDesign())
    np.testing.assert_allclose(traj.K, designed.K, rtol=1e-9, atol=1e-12)
    assert traj.info["gain_design"] == saved.info["gain_design"] == designed.info
    assert designed.info["delay_steps"] == 1
    desc = load_description()
    loaded = make_core(desc, ControllerOptions(command_delay_steps=1)).load_trajectory(traj, "the result")
    assert loaded.startswith("took trajectory") and "design record" not in loaded, loaded
    with pytest.raises(ValueError, match=r"designed for a command delay of 1 step\(s\), but this controller "
                                         r"compensates 2"):
        make_core(desc, ControllerOptions(command_delay_steps=2)).load_trajectory(traj, "the result")


def test_service_reproduces_seed_001_swing_up_cost(optimizer):
    client, _ = optimizer
    res = client.call(pendulum_request())
    assert res.success, res.message
    assert res.convergence.converged
    assert res.convergence.costs[-1] == pytest.approx(SEED_COST, rel=1e-8)
    check_history(res.convergence)
    check_feasible(res.trajectory, "pendulum")


def test_service_solves_the_swing_up_by_dmocc_to_the_same_optimum(optimizer):
    """methods = ["dmocc"]: direct transcription with IPOPT (seed 002 §3) through the same service reaches the
    projection operator's optimum (seed 001 §VIII-A cost, 1e-6 relative), a model trajectory with gains; an
    iteration count for it is refused (DMOCC has no schedule) and the node still serves."""
    client, _ = optimizer
    res = client.call(pendulum_request(methods=["dmocc"]), timeout=60.0)
    assert res.success, res.message
    assert res.convergence.converged and "dmocc" in res.message.lower()
    assert res.convergence.costs[-1] == pytest.approx(SEED_COST, rel=1e-6)
    assert set(res.convergence.methods[1:]) == {"dmocc"}
    check_feasible(res.trajectory, "pendulum")
    bad = client.call(pendulum_request(methods=["dmocc"], method_iterations=[5]))
    assert not bad.success and "method_iterations [5]" in bad.message and "max_iterations" in bad.message
    assert client.call(pendulum_request()).success


def test_action_publishes_feedback_and_returns_the_result(optimizer):
    client, _ = optimizer
    handle = client.send_goal(pendulum_request(OptimizeAction.Goal))
    assert handle.accepted
    res = client.wait(handle.get_result_async(), 30.0)
    assert res.status == GoalStatus.STATUS_SUCCEEDED, res.result.message
    result = res.result
    assert result.success and result.convergence.converged
    check_feasible(result.trajectory, "pendulum")
    # One message per iteration, in order, matching the result's history. The pendulum's iterations
    # take milliseconds, so a busy client may lose some (feedback is volatile, KEEP_LAST 10).
    n = result.convergence.iterations
    assert client.spin_until(lambda: (client.feedback_of(handle) or [None])[-1] is not None
                             and client.feedback_of(handle)[-1].iteration == n, 5.0)  # may trail the result
    feedback = client.feedback_of(handle)
    its = [f.iteration for f in feedback]
    assert its == sorted(set(its)) and its[0] >= 1 and len(its) >= min(n, 5)
    for f in feedback:
        assert f.cost == pytest.approx(result.convergence.costs[f.iteration])
        assert f.method == result.convergence.methods[f.iteration]
        assert f.step_length == pytest.approx(result.convergence.step_lengths[f.iteration])
    assert all(f.method in ("quasi_newton", "newton") for f in feedback)
    assert all(f.elapsed_s > 0 for f in feedback)


def test_cancel_returns_the_best_trajectory_so_far_and_busy_requests_are_refused(optimizer):
    client, _ = optimizer
    feedback = []
    handle = client.send_goal(slow_pendulum_goal(), feedback=lambda m: feedback.append(m.feedback))
    assert handle.accepted
    assert client.spin_until(lambda: len(feedback) >= 3, 20.0), "no feedback from the running goal"
    # One optimization at a time (policy 'reject'): the service answers busy, a second goal is rejected.
    busy = client.call(pendulum_request(), timeout=10.0)
    assert not busy.success and busy.message.startswith("busy")
    second = client.send_goal(pendulum_request(OptimizeAction.Goal))
    assert not second.accepted
    cancel = client.wait(handle.cancel_goal_async(), 10.0)
    assert len(cancel.goals_canceling) == 1
    res = client.wait(handle.get_result_async(), 10.0)
    assert res.status == GoalStatus.STATUS_CANCELED
    result = res.result
    assert result.success, result.message
    assert result.convergence.termination_reason == ConvergenceData.REASON_CANCELED == "canceled"
    assert not result.convergence.converged and result.convergence.iterations >= 3
    assert result.convergence.costs[-1] < result.convergence.costs[0]
    assert result.trajectory.cost == pytest.approx(result.convergence.costs[-1])
    check_history(result.convergence)
    check_feasible(result.trajectory, "pendulum")
    assert "canceled" in result.message
    assert result.constraints_satisfied and list(result.constraints) == []   # the pendulum has no limits
    # It serves again right away.
    again = client.call(pendulum_request())
    assert again.success, again.message


def test_deadline_returns_the_best_trajectory_so_far(optimizer):
    client, _ = optimizer
    handle = client.send_goal(slow_pendulum_goal(deadline_s=0.1))   # (a float: rosidl takes an int's bits)
    res = client.wait(handle.get_result_async(), 20.0)
    assert res.status == GoalStatus.STATUS_SUCCEEDED
    result = res.result
    assert result.success, result.message
    # stopped by the deadline on the optimizer's own clock, long before its iteration cap
    assert result.convergence.termination_reason == ConvergenceData.REASON_DEADLINE
    assert result.convergence.elapsed_s >= 0.1 and result.convergence.iterations < 100000
    assert 1 <= result.convergence.iterations and result.convergence.costs[-1] < result.convergence.costs[0]
    check_feasible(result.trajectory, "pendulum")
    assert "deadline" in result.message


def _request(**kw):
    options = kw.pop("options", {})
    req = OptimizeService.Request(model_id=kw.pop("model_id", "pendulum"), **kw)
    req.options = OptimizationOptions(**options)
    return req


def _desired(names, rows, times=None):
    times = times if times is not None else [0.1 * k for k in range(len(rows))]
    return JointTrajectory(joint_names=names, points=[
        JointTrajectoryPoint(positions=r, time_from_start=duration(t)) for r, t in zip(rows, times)])


GOOD = [[0.0], [0.1], [0.2]]
BAD_REQUESTS = {
    "unknown joint": (_request(desired=_desired(["elbow"], GOOD)), "'elbow' is not a configuration of model"),
    "non-monotonic times": (_request(desired=_desired(["theta"], GOOD, times=[0.0, 0.2, 0.1])),
                            "points[2].time_from_start = 0.1 s does not increase strictly"),
    "repeated time": (_request(desired=_desired(["theta"], GOOD, times=[0.0, 0.1, 0.1])), "does not increase strictly"),
    "NaN position": (_request(desired=_desired(["theta"], [[0.0], [math.nan], [0.2]])),
                     "points[1].positions[0] (theta) is nan"),
    "infinite position": (_request(desired=_desired(["theta"], [[0.0], [math.inf], [0.2]])), "must be finite"),
    "negative state weight": (_request(desired=_desired(["theta"], GOOD), options=dict(
        state_weight_names=["p_theta"], state_weights=[-1.0])), "entry for 'p_theta' must be >= 0, got -1"),
    "zero input weight": (_request(desired=_desired(["theta"], GOOD), options=dict(
        input_weight_names=["torque"], input_weights=[0.0])), "must be > 0"),
    "NaN weight": (_request(desired=_desired(["theta"], GOOD), options=dict(
        state_weight_names=["theta"], state_weights=[math.nan])), "must be finite"),
    "unknown weight name": (_request(desired=_desired(["theta"], GOOD), options=dict(
        state_weight_names=["q/theta"], state_weights=[1.0])), "unknown component(s) 'q/theta'"),
    "weight sizes": (_request(desired=_desired(["theta"], GOOD), options=dict(
        input_weight_names=["torque"], input_weights=[1.0, 2.0])), "must have the same length"),
    "position sizes": (_request(desired=_desired(["theta"], [[0.0], [0.1, 0.2], [0.3]])),
                       "points[1].positions has 2 values, expected 1"),
    "schedule sizes": (_request(desired=_desired(["theta"], GOOD), options=dict(
        methods=["newton"], method_iterations=[1, 0])), "options.methods has 1 entries"),
    "unknown method": (_request(desired=_desired(["theta"], GOOD), options=dict(
        methods=["gradient"], method_iterations=[0])), "options.methods[0]: unknown method 'gradient'"),
    "negative tolerance": (_request(desired=_desired(["theta"], GOOD), options=dict(tolerance=-1.0)),
                           "options.tolerance must be finite and >= 0"),
    "NaN deadline": (_request(desired=_desired(["theta"], GOOD), options=dict(deadline_s=math.nan)),
                     "options.deadline_s"),
    "dt not dividing": (_request(desired=_desired(["theta"], GOOD), options=dict(dt=0.03)),
                        "not a whole number of steps of dt = 0.03"),
    "unknown motion": (_request(model_id="", motion_name="tango"),
                       f"unknown motion 'tango'; available: {', '.join(motion_names(default_motion_directories()))}"),
    "motion path": (_request(model_id="", motion_name="../secrets"), "is not a library name"),
    "motion for another model": (_request(motion_name="wave"), "joint 'shoulder' is not a configuration"),
    "unknown model": (_request(model_id="marionette_leg", motion_name="wave"), "unknown model 'marionette_leg'"),
    "empty desired": (_request(), "the desired motion is empty"),
    "one point": (_request(desired=_desired(["theta"], [[0.0]])), "at least 2 are needed"),
    "no joint names": (_request(desired=_desired([], [[], []])), "joint_names is empty"),
    "repeated joint": (_request(desired=_desired(["theta", "theta"], [[0.0, 0.0], [0.1, 0.1]])), "repeats theta"),
    "too many steps": (_request(desired=_desired(["theta"], [[0.0], [0.0]], times=[0.0, 30.0]), options=dict(
        dt=0.001)), "more than the node's limit"),
    "points 1000 s apart": (_request(desired=_desired(["theta"], [[0.0], [0.1]], times=[0.0, 1000.0])),
                            "the time step 1000 s is above max_dt = 0.1 s"),
    "too long": (_request(desired=_desired(["theta"], [[0.0], [0.1]], times=[0.0, 1000.0]), options=dict(dt=0.01)),
                 "lasts 1000 s, more than max_duration = 120 s"),
    "absolute save path": (_request(desired=_desired(["theta"], GOOD), save_path="/proc/marionette/x.npz"),
                           "absolute paths are not allowed"),
    "constraint switch": (_request(desired=_desired(["theta"], GOOD), options=dict(constraints="sometimes")),
                          'options.constraints must be "" (default), "on" or "off"'),
    "constraint family": (_request(desired=_desired(["theta"], GOOD), options=dict(constraint_families=["slack"])),
                          "options.constraint_families: unknown constraint family slack"),
    "negative min tension": (_request(model_id="marionette_arm", motion_name="wave", options=dict(
        min_tension=-1.0)), "options.min_tension must be finite and >= 0"),
    "margin above 1": (_request(model_id="marionette_arm", motion_name="wave", options=dict(
        acceleration_margin=1.0)), "options.acceleration_margin: a margin is a fraction of the limit in [0, 1)"),
    "tension without strings": (_request(desired=_desired(["theta"], GOOD), options=dict(min_tension=1.0)),
                                "options.min_tension: model 'pendulum' has no string"),
}


def test_every_bad_request_is_answered_specifically_and_the_node_still_serves(optimizer):
    client, _ = optimizer
    failures = []
    for name, (request, expected) in BAD_REQUESTS.items():
        res = client.call(request, timeout=10.0)
        if res.success or expected not in res.message or not res.message.startswith("invalid request"):
            failures.append(f"{name}: success={res.success}, message={res.message!r}, expected {expected!r}")
        assert res.trajectory.num_steps == 0 and len(res.trajectory.states) == 0
        assert res.convergence.termination_reason == ConvergenceData.REASON_ERROR
    assert not failures, "\n".join(failures)
    # An invalid goal is accepted and aborted with the message.
    goal = OptimizeAction.Goal(model_id="pendulum", desired=_desired(["theta"], GOOD, times=[0.0, 0.2, 0.1]))
    handle = client.send_goal(goal)
    assert handle.accepted
    res = client.wait(handle.get_result_async(), 10.0)
    assert res.status == GoalStatus.STATUS_ABORTED and not res.result.success
    assert "does not increase strictly" in res.result.message
    good = client.call(_request(desired=_desired(["theta"], GOOD)))
    assert good.success, good.message


def test_latest_result_reaches_a_late_subscriber(optimizer):
    client, _ = optimizer
    res = client.call(_request(desired=_desired(["theta"], [[0.0], [0.3], [0.5], [0.6]])))
    assert res.success, res.message
    received = []
    qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
    sub = client.node.create_subscription(TrackedTrajectory, TOPIC, received.append, qos)
    try:
        assert client.spin_until(lambda: received, 10.0), "the late subscriber got nothing"
        time.sleep(0.2)
        client.executor.spin_once(timeout_sec=0.1)
        assert len(received) == 1, "only the latest result is kept"
        msg = received[0]
        assert msg.num_steps == res.trajectory.num_steps == 3
        assert list(msg.states) == list(res.trajectory.states) and list(msg.gains) == list(res.trajectory.gains)
        assert msg.model_id == "pendulum" and msg.model_hash == library.get("pendulum").hash
    finally:
        client.node.destroy_subscription(sub)


def test_queue_policy_and_graceful_shutdown(node_processes):
    """concurrency:=queue admits one waiting request; SIGINT stops the run and still answers its client."""
    env = ros_env()
    proc = node_processes("marionette_control.nodes.optimizer", [
        "--ros-args", "-p", "model:=pendulum", "-p", "concurrency:=queue", "-p", "queue_size:=1"], env)
    with isolated_ros(int(env["ROS_DOMAIN_ID"])):
        context = rclpy.context.Context()
        rclpy.init(context=context)
        client = Client(context)
        try:
            assert client.service.wait_for_service(timeout_sec=20.0) and client.action.wait_for_server(timeout_sec=10)
            feedback = []
            running = client.send_goal(slow_pendulum_goal(), feedback=lambda m: feedback.append(m.feedback))
            assert running.accepted and client.spin_until(lambda: feedback, 20.0)
            waiting = client.send_goal(pendulum_request(OptimizeAction.Goal))
            assert waiting.accepted, "the queue has room for one request"
            full = client.call(OptimizeService.Request(desired=swing_up()), timeout=10.0)
            assert not full.success and full.message.startswith("busy: the queue is full")
            client.wait(running.cancel_goal_async(), 10.0)
            assert client.wait(running.get_result_async(), 10.0).status == GoalStatus.STATUS_CANCELED
            res = client.wait(waiting.get_result_async(), 20.0)
            assert res.status == GoalStatus.STATUS_SUCCEEDED and res.result.convergence.converged
            assert res.result.convergence.costs[-1] == pytest.approx(SEED_COST, rel=1e-8)

            feedback.clear()
            last = client.send_goal(slow_pendulum_goal(), feedback=lambda m: feedback.append(m.feedback))
            assert last.accepted and client.spin_until(lambda: feedback, 20.0)
            os.killpg(proc.pid, signal.SIGINT)
            res = client.wait(last.get_result_async(), 10.0)
            assert res.status == GoalStatus.STATUS_ABORTED
            assert res.result.success and "shutting down" in res.result.message
            assert res.result.convergence.termination_reason == ConvergenceData.REASON_CANCELED
            check_feasible(res.result.trajectory, "pendulum")
            assert proc.wait(10.0) == 0
        finally:
            client.close()
            context.try_shutdown()


# --------------------------------------------------------------------------------------------- parameters


def test_parameters_are_declared_documented_and_validated():
    """In-process: config/optimizer.yaml loads, every parameter has a description, bad values are refused."""
    from rclpy.parameter import Parameter

    from marionette_control.nodes.optimizer import OptimizerNode
    from marionette_control.ocp.optimizer_options import parameter_specs

    with isolated_ros():
        context = rclpy.context.Context()
        rclpy.init(context=context)
        params = str(config_file("optimizer.yaml"))
        node = OptimizerNode(context=context, cli_args=["--ros-args", "--params-file", params])
        try:
            names = [s.name for s in parameter_specs()]
            assert len(names) == len(set(names))
            for d in node.describe_parameters(names):
                assert len(d.description) > 20, d.name
            assert node.get_parameter("schedule").value == ["quasi_newton:4", "newton"]
            assert node.get_parameter("trajectory_topic").value == "~/trajectory"
            refused = {
                "weights.force_input": 0.0,  # R must be positive definite
                "weights.momentum": -1.0,
                "tolerance": float("nan"),
                "schedule": ["newton", "steepest:3"],  # only the last entry may run until convergence
                "dt": 0.0,
                "model": "pendulum",  # read-only
                "concurrency": "queue",  # read-only
                "tracking_gains.input": 0.0,  # GainDesign's rules
                "tracking_gains.drive_acceleration": -1.0,
                "tracking_gains.delay_steps": -1,
                "tracking_gains.dynamic_configuration_by_joint": ["shoulder=5000", "elbow=-1"],
                "tracking_gains.angle_integral_by_joint": ["shoulder 5000"],
            }
            for name, value in refused.items():
                result = node.set_parameters([Parameter(name, value=value)])[0]
                assert not result.successful and name in result.reason, (name, result.reason)
            # the rules between values: the default dt within [min_dt, max_dt]
            result = node.set_parameters([Parameter("max_dt", value=0.005)])[0]
            assert not result.successful and "default dt 0.01 s must lie in [min_dt, max_dt]" in result.reason
            assert node.set_parameters([Parameter("weights.momentum", value=2.0)])[0].successful
            assert node._defaults().weights.momentum == 2.0
            # the tracking gains' parameters are GainDesign's fields and the per-joint values of PER_JOINT's; the
            # defaults (config/optimizer.yaml) are the arm's design, the one of its spec
            assert {n.removeprefix("tracking_gains.") for n in names if n.startswith("tracking_gains.")} == {
                f.name for f in dataclasses.fields(GainDesign)} | {f"{n}_by_joint" for n in PER_JOINT}
            assert node._gains() == load_spec(config_file("optimize", "marionette_arm_wave.yaml")).gains
            assert node._gains().dynamic_configuration == {"shoulder": 5000.0, "elbow": 1000.0}
            changes = [Parameter("tracking_gains.delay_steps", value=2),
                       Parameter("tracking_gains.dynamic_configuration", value=50.0),
                       Parameter("tracking_gains.dynamic_configuration_by_joint", Parameter.Type.STRING_ARRAY, []),
                       Parameter("tracking_gains.angle_integral_by_joint", value=["shoulder=4e6", "elbow=2e6"])]
            assert all(r.successful for r in node.set_parameters(changes))
            assert node._gains() == GainDesign(dynamic_configuration=50.0, angle_integral={"shoulder": 4e6, "elbow": 2e6},
                                               delay_steps=2)
        finally:
            node.stop()
            node.destroy_node()
            context.try_shutdown()


def test_invalid_start_up_parameters_end_the_node_with_a_message(tmp_path):
    import subprocess
    import sys

    env = ros_env()
    for args, expected in ((["-p", "dt:=-0.1"], "parameter 'dt': must be finite and > 0"),
                           (["-p", "model:=nope"], "unknown model 'nope'"),
                           (["-p", "concurrency:=parallel"], "must be one of reject, queue"),
                           (["-p", "tracking_gains.input:=0.0"], "parameter 'tracking_gains.input': gain design "
                                                                  "weight 'input' must be > 0")):
        run = subprocess.run([sys.executable, "-m", "marionette_control.nodes.optimizer", "--ros-args", *args],
                             env=env, capture_output=True, text=True, timeout=30)
        assert run.returncode == 2 and expected in run.stderr, (args, run.stderr)
