"""Tests of the marionette_interfaces package (messages, service, action).

They need the ROS 2 Python stack (rclpy) and the built interfaces: on a
machine without ROS, ``./run``'s set-up installs requirements/ros.txt and runs
scripts/build_interfaces.sh; in a ROS workspace, ``colcon build``. Without
rclpy the module is skipped; with rclpy but without the interfaces it fails,
saying how to build them.

The in-process ROS tests use their own rclpy Context, localhost-only discovery
and a ROS_DOMAIN_ID derived from the process id, so they neither talk to the
network nor see parallel test processes.
"""

import os
import time

import numpy as np
import pytest

import rclpy

from builtin_interfaces.msg import Duration  # noqa: E402
from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

try:
    from marionette_interfaces.action import ExecuteMotion
    from marionette_interfaces.action import OptimizeTrajectory as OptimizeTrajectoryAction
    from marionette_interfaces.msg import JointTolerance
    from marionette_interfaces.msg import (ConstraintReport, ConvergenceData, OptimizationOptions, Plan, Retiming,
                                          TrackedTrajectory, TrackingState)
    from marionette_interfaces.srv import OptimizeTrajectory
except ImportError as exc:  # pragma: no cover - environment problem, reported clearly
    raise ImportError(
        "marionette_interfaces is not importable although rclpy is: build it with "
        "scripts/build_interfaces.sh (PyPI set-up, run by ./run) or `colcon build` "
        f"on a ROS install. Original error: {exc}"
    ) from exc


# --------------------------------------------------------------------------
# helpers


def make_tracked_trajectory(num_steps=3, nx=4, nu=2, with_gains=True):
    """A small TrackedTrajectory with distinct values in every array.

    Layout (see TrackedTrajectory.msg): states (N+1)×nx, inputs N×nu,
    gains N×nu×nx, all row-major; q is the first nq = nx // 2 states.
    """
    dt = 0.01
    nq = nx // 2
    X = np.arange((num_steps + 1) * nx, dtype=float).reshape(num_steps + 1, nx) * 0.5
    U = -np.arange(num_steps * nu, dtype=float).reshape(num_steps, nu) - 0.25
    K = np.arange(num_steps * nu * nx, dtype=float).reshape(num_steps, nu, nx) * 1e-3

    msg = TrackedTrajectory()
    msg.header.stamp.sec = 12
    msg.header.stamp.nanosec = 345
    msg.model_id = "marionette_arm"
    msg.model_hash = "sha256:0123abcd"
    msg.dt = dt
    msg.configuration_names = [f"q{i}" for i in range(nq)]
    msg.state_names = [f"q/q{i}" for i in range(nq)] + [f"p/q{i}" for i in range(nx - nq)]
    msg.input_names = [f"u{j}" for j in range(nu)]
    msg.num_steps = num_steps
    msg.states = X.ravel()
    msg.inputs = U.ravel()
    msg.gains = K.ravel() if with_gains else []
    msg.cost = 1.5
    msg.configurations.joint_names = list(msg.configuration_names)
    for k in range(num_steps + 1):
        t_ns = round(k * dt * 1e9)
        msg.configurations.points.append(
            JointTrajectoryPoint(
                positions=X[k, :nq].tolist(),
                time_from_start=Duration(sec=t_ns // 10**9, nanosec=t_ns % 10**9),
            )
        )
    return msg, X, U, K


def unique_domain_id():
    """A ROS_DOMAIN_ID in 10..99 that differs between concurrent test processes."""
    return 10 + os.getpid() % 90


@pytest.fixture
def ros_context(monkeypatch):
    """An initialized, isolated rclpy Context, shut down after the test."""
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    monkeypatch.setenv("ROS_DOMAIN_ID", str(unique_domain_id()))
    context = rclpy.context.Context()
    rclpy.init(context=context)
    try:
        yield context
    finally:
        context.try_shutdown()


# --------------------------------------------------------------------------
# construction and field contract


def test_message_fields_and_types():
    fields = TrackedTrajectory.get_fields_and_field_types()
    assert fields == {
        "header": "std_msgs/Header",
        "model_id": "string",
        "model_hash": "string",
        "dt": "double",
        "state_names": "sequence<string>",
        "input_names": "sequence<string>",
        "configuration_names": "sequence<string>",
        "num_steps": "uint32",
        "states": "sequence<double>",
        "inputs": "sequence<double>",
        "gains": "sequence<double>",
        "gains_design": "string",
        "cost": "double",
        "configurations": "trajectory_msgs/JointTrajectory",
        "actuators": "trajectory_msgs/JointTrajectory",
    }
    assert TrackingState.get_fields_and_field_types() == {
        "header": "std_msgs/Header", "tick": "uint32", "num_steps": "uint32", "missed_ticks": "uint32",
        "state_names": "sequence<string>", "desired": "sequence<double>", "estimated": "sequence<double>",
        "error": "sequence<double>", "error_norm": "double", "command_joints": "sequence<string>",
        "command": "sequence<double>", "compute_time": "double", "active_faults": "sequence<string>",
        "run": "uint32", "plan": "uint32", "plan_switches": "uint32", "plan_rejections": "uint32",
    }
    assert Plan.get_fields_and_field_types() == {
        "header": "std_msgs/Header", "run": "uint32", "start": "uint32", "sequence": "uint32",
        "estimate_tick": "uint32", "trajectory": "marionette_interfaces/TrackedTrajectory",
    }

    convergence = ConvergenceData()
    assert convergence.iterations == 0 and not convergence.converged
    assert list(convergence.costs) == [] and list(convergence.methods) == []
    assert ConvergenceData.REASON_CONVERGED == "converged"
    assert ConvergenceData.REASON_DEADLINE == "deadline"
    assert set(ConvergenceData.get_fields_and_field_types()) == {
        "iterations", "costs", "descent_norms", "step_lengths", "methods", "violations",
        "elapsed_s", "converged", "termination_reason",
    }
    assert ConvergenceData.REASON_INFEASIBLE == "infeasible"
    assert ConstraintReport.get_fields_and_field_types() == {
        "family": "string", "component": "string", "side": "string", "limit": "double", "unit": "string",
        "hardware_limit": "double", "reserve": "double", "label": "string", "worst_margin": "double",
        "normalized_margin": "double", "step": "uint32",
        "time_s": "double", "satisfied": "boolean", "active_steps": "uint32",
        "active_from_s": "sequence<double>", "active_to_s": "sequence<double>",
    }
    assert ConstraintReport.FAMILY_TENSION == "tension" and ConstraintReport.SIDE_LOWER == "lower"

    options = OptimizationOptions(
        methods=[OptimizationOptions.METHOD_QUASI_NEWTON, OptimizationOptions.METHOD_NEWTON],
        method_iterations=[4, 0],
        state_weight_names=["q/shoulder"],
        state_weights=[10.0],
        tolerance=1e-8,
        deadline_s=30.0,
    )
    assert list(options.methods) == ["quasi_newton", "newton"]
    assert list(options.method_iterations) == [4, 0]
    default = OptimizationOptions()
    # A default-constructed message means "all node defaults".
    assert default.tolerance == 0.0 and default.max_iterations == 0
    assert default.deadline_s == 0.0 and default.dt == 0.0
    assert list(default.methods) == [] and list(default.state_weights) == []
    # Constraints: "" = the node's default (on); zero numbers = defaults.
    assert default.constraints == "" and list(default.constraint_families) == []
    assert default.min_tension == 0.0 and default.barrier_weight == 0.0
    assert default.range_margin == default.speed_margin == default.acceleration_margin == 0.0
    assert (OptimizationOptions.CONSTRAINTS_ON, OptimizationOptions.CONSTRAINTS_OFF) == ("on", "off")
    # The reserve for the feedback and re-timing: "" and zeros = the node's defaults.
    assert default.tension_reserve == 0.0 and default.reserve == "" and OptimizationOptions.RESERVE_OFF == "off"
    assert default.retime == "" and default.retime_tolerance == 0.0 and default.max_retime_factor == 0.0
    assert (OptimizationOptions.RETIME_OFF, OptimizationOptions.RETIME_UNIFORM, OptimizationOptions.RETIME_WARP) \
        == ("off", "uniform", "warp")
    assert Retiming.get_fields_and_field_types() == {
        "trackable": "boolean", "trackable_as_drawn": "boolean", "tolerance": "double",
        "configurations": "sequence<string>", "rms_errors": "sequence<double>",
        "rms_errors_as_drawn": "sequence<double>", "mode": "string", "found": "boolean", "factor": "double",
        "duration_s": "double", "drawn_duration_s": "double", "keyframe_times": "sequence<double>",
        "drawn_keyframe_times": "sequence<double>", "limited_by": "sequence<string>", "message": "string",
    }


def test_execute_motion_is_follow_joint_trajectory_for_the_arm():
    """~/execute's action (ExecuteMotion): FollowJointTrajectory's goal tolerances and error codes, the controller's
    own codes and phases, each the value of the ROS-free rules (tracking/execution.py) that the node sends."""
    from marionette_control.tracking import execution as E

    R, F = ExecuteMotion.Result, ExecuteMotion.Feedback
    codes = {getattr(R, name): name.lower().replace("_", " ") for name in dir(R)
             if name.isupper() and isinstance(getattr(R, name), int)}
    assert codes == E.CODES
    assert (R.SUCCESSFUL, R.INVALID_GOAL, R.INVALID_JOINTS, R.PATH_TOLERANCE_VIOLATED,
            R.GOAL_TOLERANCE_VIOLATED) == (0, -1, -2, -4, -5)  # FollowJointTrajectory's
    phases = {getattr(F, name) for name in dir(F) if name.startswith("PHASE_")}
    assert phases == set(E.PHASES)
    goal = ExecuteMotion.Goal.get_fields_and_field_types()
    assert goal == {"trajectory": "marionette_interfaces/TrackedTrajectory", "motion_name": "string",
                    "desired": "trajectory_msgs/JointTrajectory", "options": "marionette_interfaces/OptimizationOptions",
                    "path_tolerance": "sequence<marionette_interfaces/JointTolerance>",
                    "goal_tolerance": "sequence<marionette_interfaces/JointTolerance>",
                    "goal_time_tolerance": "builtin_interfaces/Duration"}
    assert JointTolerance.get_fields_and_field_types() == {"name": "string", "position": "double"}
    result = ExecuteMotion.Result.get_fields_and_field_types()
    assert result["margins"] == "sequence<marionette_interfaces/ConstraintReport>"
    assert {"rms_error", "max_error", "faults", "fault_counts", "error_string"} <= set(result)
    feedback = F.get_fields_and_field_types()
    assert {"phase", "ticks", "desired", "actual", "error", "active_faults", "plan"} <= set(feedback)


def test_service_and_action_types_are_coherent():
    request = OptimizeTrajectory.Request(motion_name="wave", model_id="marionette_arm")
    assert isinstance(request.desired, JointTrajectory)
    assert isinstance(request.options, OptimizationOptions)
    response = OptimizeTrajectory.Response()
    assert isinstance(response.trajectory, TrackedTrajectory)
    assert isinstance(response.convergence, ConvergenceData)
    assert response.success is False and response.message == ""
    assert response.constraints_satisfied is False and list(response.constraints) == []
    assert response.max_violation == 0.0
    assert isinstance(response.retiming, Retiming) and response.retiming.factor == 0.0

    # The action's goal and result carry the same fields as the service.
    goal_fields = OptimizeTrajectoryAction.Goal.get_fields_and_field_types()
    result_fields = OptimizeTrajectoryAction.Result.get_fields_and_field_types()
    assert goal_fields == OptimizeTrajectory.Request.get_fields_and_field_types()
    assert result_fields == OptimizeTrajectory.Response.get_fields_and_field_types()
    assert OptimizeTrajectoryAction.Feedback.get_fields_and_field_types() == {
        "iteration": "uint32",
        "cost": "double",
        "descent_norm": "double",
        "violation": "double",
        "barrier_weight": "double",
        "step_length": "double",
        "method": "string",
        "elapsed_s": "double",
    }
    OptimizeTrajectoryAction.Goal(desired=JointTrajectory(joint_names=["shoulder", "elbow"]))
    OptimizeTrajectoryAction.Result(success=True, message="ok")
    OptimizeTrajectoryAction.Feedback(iteration=3, method="newton")


def test_bad_field_values_are_rejected():
    # Since ROS 2 Iron field checks are off unless asked for (constructor
    # argument or ROS_PYTHON_CHECK_FIELDS=1); older rosidl always checks and
    # has no such argument.
    try:
        msg = TrackedTrajectory(check_fields=True)
    except AssertionError:
        msg = TrackedTrajectory()
    with pytest.raises(AssertionError):
        msg.num_steps = -1  # uint32
    with pytest.raises(AssertionError):
        msg.states = ["not", "numbers"]
    with pytest.raises(AssertionError):
        msg.state_names = [1, 2]


# --------------------------------------------------------------------------
# serialization


@pytest.mark.parametrize("with_gains", [True, False])
def test_tracked_trajectory_serialization_round_trip(with_gains):
    msg, X, U, K = make_tracked_trajectory(num_steps=3, nx=4, nu=2, with_gains=with_gains)
    data = serialize_message(msg)
    assert isinstance(data, bytes) and len(data) > 0
    back = deserialize_message(data, TrackedTrajectory)

    assert back == msg
    assert back.header.stamp.sec == 12 and back.header.stamp.nanosec == 345
    assert (back.model_id, back.model_hash, back.dt, back.cost) == (
        "marionette_arm", "sha256:0123abcd", 0.01, 1.5)
    assert list(back.state_names) == ["q/q0", "q/q1", "p/q0", "p/q1"]
    assert list(back.input_names) == ["u0", "u1"]
    assert list(back.configuration_names) == ["q0", "q1"]

    n, nx, nu = back.num_steps, len(back.state_names), len(back.input_names)
    assert n == 3
    np.testing.assert_array_equal(np.asarray(back.states).reshape(n + 1, nx), X)
    np.testing.assert_array_equal(np.asarray(back.inputs).reshape(n, nu), U)
    if with_gains:
        np.testing.assert_array_equal(np.asarray(back.gains).reshape(n, nu, nx), K)
    else:
        assert len(back.gains) == 0

    view = back.configurations
    assert list(view.joint_names) == list(back.configuration_names)
    assert len(view.points) == n + 1
    assert list(view.points[2].positions) == X[2, :2].tolist()
    assert view.points[2].time_from_start.nanosec == 20_000_000


def test_gain_design_record_travels_with_the_trajectory():
    """trajectory_to_msg/trajectory_from_msg carry the gains' design record (the command delay they are for)."""
    from marionette_control import _core
    from marionette_control.model import library
    from marionette_control.lq.gains import GAIN_DESIGN, GainDesign, design_gains
    from marionette_control.trajectory import Trajectory, TrajectoryError
    from marionette_control.nodes.convert import trajectory_from_msg, trajectory_to_msg

    m = library.get("pendulum")
    ds = _core.DiscreteSystem(m, 0.1)
    X, _ = ds.simulate(np.array([0.3, 0.0]), np.zeros((5, m.nU)))
    traj = design_gains(ds, X, np.zeros((5, m.nU)), GainDesign(delay_steps=2)).attach(
        Trajectory.for_model(m, 0.1, X, np.zeros((5, m.nU))))
    msg = trajectory_to_msg(traj, TrackedTrajectory, m.config_names)
    back = trajectory_from_msg(deserialize_message(serialize_message(msg), TrackedTrajectory))
    assert back.info[GAIN_DESIGN] == traj.info[GAIN_DESIGN] and back.info[GAIN_DESIGN]["delay_steps"] == 2
    no_record = trajectory_to_msg(Trajectory.for_model(m, 0.1, X, np.zeros((5, m.nU)), K=traj.K), TrackedTrajectory,
                                  m.config_names)
    assert no_record.gains_design == "" and GAIN_DESIGN not in trajectory_from_msg(no_record).info
    msg.gains_design = "{not json"
    with pytest.raises(TrajectoryError, match="gains_design is not JSON"):
        trajectory_from_msg(msg)


def test_a_plan_travels_as_a_window_without_views():
    """plan_to_msg/plan_from_msg: start, run, sequence, estimate tick, the window's arrays and gain record; the
    configurations and actuators views stay empty (the controller reads the arrays)."""
    from marionette_control import _core
    from marionette_control.model import library
    from marionette_control.lq.gains import GainDesign, design_gains
    from marionette_control.tracking.plan_switch import Plan as PlanRecord
    from marionette_control.trajectory import Trajectory
    from marionette_control.nodes.convert import plan_from_msg, plan_to_msg

    m = library.get("pendulum")
    ds = _core.DiscreteSystem(m, 0.1)
    X, _ = ds.simulate(np.array([0.3, 0.0]), np.zeros((5, m.nU)))
    traj = design_gains(ds, X, np.zeros((5, m.nU)), GainDesign(delay_steps=1)).attach(
        Trajectory.for_model(m, 0.1, X, np.zeros((5, m.nU))))
    msg = plan_to_msg(PlanRecord(40, traj, run=3, sequence=12, estimate_tick=34), Plan)
    assert len(msg.trajectory.configurations.points) == 0 and len(msg.trajectory.actuators.points) == 0
    back = plan_from_msg(deserialize_message(serialize_message(msg), Plan))
    assert (back.start, back.run, back.sequence, back.estimate_tick, back.end) == (40, 3, 12, 34, 45)
    np.testing.assert_array_equal(back.trajectory.X, traj.X)
    np.testing.assert_array_equal(back.trajectory.K, traj.K)
    assert back.trajectory.info["gain_design"] == traj.info["gain_design"]


def test_request_and_feedback_serialization_round_trip():
    desired = JointTrajectory(
        joint_names=["shoulder", "elbow"],
        points=[JointTrajectoryPoint(positions=[0.1, 0.2], time_from_start=Duration(sec=1))],
    )
    request = OptimizeTrajectory.Request(
        desired=desired,
        model_id="marionette_arm",
        options=OptimizationOptions(methods=["newton"], method_iterations=[0], tolerance=1e-6),
        save_path="/tmp/out.npz",
    )
    assert deserialize_message(serialize_message(request), OptimizeTrajectory.Request) == request
    feedback = OptimizeTrajectoryAction.Feedback(
        iteration=7, cost=0.5, descent_norm=1e-4, step_length=1.0, method="newton", elapsed_s=2.5)
    assert deserialize_message(
        serialize_message(feedback), OptimizeTrajectoryAction.Feedback) == feedback


# --------------------------------------------------------------------------
# in-process ROS: service and action of the new types


def _spin_until(executor, future, timeout_s):
    deadline = time.monotonic() + timeout_s
    while not future.done() and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.05)
    return future.done()


def test_service_call_in_process(ros_context):
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    trajectory, _, _, _ = make_tracked_trajectory()
    received = []

    def handle(request, response):
        received.append(request)
        response.success = True
        response.message = f"optimized '{request.motion_name}' for {request.model_id}"
        response.trajectory = trajectory
        response.convergence = ConvergenceData(
            iterations=1, costs=[2.0, 1.5], converged=True,
            termination_reason=ConvergenceData.REASON_CONVERGED)
        return response

    server_node = Node("test_interfaces_server", context=ros_context)
    client_node = Node("test_interfaces_client", context=ros_context)
    executor = SingleThreadedExecutor(context=ros_context)
    try:
        server_node.create_service(OptimizeTrajectory, "optimize_trajectory", handle)
        client = client_node.create_client(OptimizeTrajectory, "optimize_trajectory")
        executor.add_node(server_node)
        executor.add_node(client_node)
        assert client.wait_for_service(timeout_sec=10.0), "service never became available"

        future = client.call_async(
            OptimizeTrajectory.Request(motion_name="wave", model_id="marionette_arm"))
        assert _spin_until(executor, future, 10.0), "no response within 10 s"
        response = future.result()
        assert response.success
        assert response.message == "optimized 'wave' for marionette_arm"
        assert response.trajectory == trajectory
        assert response.convergence.termination_reason == "converged"
        assert len(received) == 1 and received[0].motion_name == "wave"
    finally:
        executor.shutdown()
        server_node.destroy_node()
        client_node.destroy_node()


def test_action_goal_feedback_result_in_process(ros_context):
    from rclpy.action import ActionClient, ActionServer
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    trajectory, _, _, _ = make_tracked_trajectory()

    def execute(goal_handle):
        for i in range(1, 4):
            goal_handle.publish_feedback(OptimizeTrajectoryAction.Feedback(
                iteration=i, cost=1.0 / i, descent_norm=10.0 ** -i, step_length=1.0,
                method="newton", elapsed_s=0.01 * i))
        goal_handle.succeed()
        return OptimizeTrajectoryAction.Result(
            success=True, message="converged", trajectory=trajectory,
            convergence=ConvergenceData(iterations=3, converged=True))

    server_node = Node("test_interfaces_action_server", context=ros_context)
    client_node = Node("test_interfaces_action_client", context=ros_context)
    executor = SingleThreadedExecutor(context=ros_context)
    server = ActionServer(server_node, OptimizeTrajectoryAction, "optimize", execute)
    client = ActionClient(client_node, OptimizeTrajectoryAction, "optimize")
    feedback = []
    try:
        executor.add_node(server_node)
        executor.add_node(client_node)
        assert client.wait_for_server(timeout_sec=10.0), "action server never became available"

        send = client.send_goal_async(
            OptimizeTrajectoryAction.Goal(motion_name="wave"),
            feedback_callback=lambda msg: feedback.append(msg.feedback))
        assert _spin_until(executor, send, 10.0), "goal not answered within 10 s"
        goal_handle = send.result()
        assert goal_handle.accepted
        result_future = goal_handle.get_result_async()
        assert _spin_until(executor, result_future, 10.0), "no result within 10 s"
        result = result_future.result().result
        assert result.success and result.message == "converged"
        assert result.trajectory == trajectory
        assert result.convergence.iterations == 3
        # Feedback may race the result; what arrived must be in order and intact.
        assert [f.iteration for f in feedback] == list(range(1, len(feedback) + 1))
        assert all(f.method == "newton" for f in feedback)
    finally:
        client.destroy()
        server.destroy()
        executor.shutdown()
        server_node.destroy_node()
        client_node.destroy_node()
