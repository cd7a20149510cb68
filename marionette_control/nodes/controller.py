"""marionette_controller: real-time tracking of an optimized trajectory from /joint_states.

A thin adapter around :class:`marionette_control.control.controller_core.ControllerCore`
(the tick logic, its parts — plausibility checks, Kalman filter, delay predictor, tracking law,
limits, tolerances — alignment policy and fault handling are documented there; a bag replay and
the offline closed loop run the same object without ROS).

Graph
-----
subscribes
    ``joint_states_topic`` (sensor_msgs/JointState, sensor-data QoS) — measured configurations,
    mapped onto the model by *name* (``hardware.joint_names`` of the model file), so the
    order of names in a message does not matter; taken serialized, and only the stamp, names and
    positions are read (:class:`~marionette_control.nodes.convert.JointStateParser`: rclpy's
    conversion into a message object cost more than the tracking law);
    ``trajectory_topic`` (marionette_interfaces/TrackedTrajectory, reliable + transient local,
    depth 1) — the optimizer's result; ``/clock`` under ``use_sim_time``.
publishes
    ``command_topic`` (std_msgs/Float64MultiArray, reliable, depth 10) — ros2_control's forward
    position controller convention: ``data`` = the next kinematic configurations ρ in the order
    of ``command_joints`` (hardware names; default [carriage, string_length], as the
    simulator's); with ``command_delay_steps`` = d the command answering the joint state of
    cycle k is the input of step k + d;
    ``~/tracking`` (std_msgs/Float64MultiArray) — one message per tick for plotting: ``data``
    = [stamp (s), k, |x̂ − x_d|, compute time (µs), x̂ (nx), x_d (nx), u (nU)], component names
    in ``layout.dim[0].label`` (comma-separated); x̂ is the estimate of tick k, u the command sent;
    ``/diagnostics`` (diagnostic_msgs/DiagnosticArray) — one status "marionette_controller:
    tracking" every ``diagnostics_period`` and when a fault is raised or cleared (at most every
    0.1 s): state, every active fault kind with its message (``faults.active``, ``fault.<kind>``)
    and the count of every kind raised (``faults.<kind>``), goal, tracking error, estimate,
    per-tick compute time, missed ticks, counters.
services
    ``~/start``, ``~/stop`` (std_srvs/Trigger). A start is refused while the arm is outside the
    start tolerance of the trajectory's initial configuration.

Times: the watchdog runs on the node's ROS clock (it follows ``/clock`` when
``use_sim_time`` is set); sample ages compare joint-state stamps with that clock.
Under ``use_sim_time`` that clock reads 0 until the first ``/clock`` message arrives;
joint states that arrive before it (another topic, discovered and delivered on its
own) cannot be judged, so they are skipped and counted (``samples_before_clock`` in
/diagnostics), not reported as ``future_stamp``. Diagnostics and log throttling use the
steady clock, so they continue while a simulation clock is paused.

Tick path: the joint-state callback reads the clock, parses the sample, runs the core and
publishes the command first; ~/tracking, log lines and diagnostics follow. Start-up moves
everything allocated so far out of the garbage collector's reach (``gc.freeze``) so a
collection during a tick stays short. The process stops on SIGINT/SIGTERM with status 0
(:mod:`marionette_control.nodes.process`).

Trajectories: a file (``trajectory_file``) or the optimizer's topic; one made for another
model (name, hash or names differ), without gains, or with gains designed for another command
delay (``gains_design``, :mod:`marionette_control.control.gains`) is refused with a logged error
and in /diagnostics, and the node keeps running with its current trajectory; gains without a
design record are used with a warning. Loading one precomputes the Kalman filter's gains along
it. A trajectory that arrives while tracking is pending until the next start. Tracking begins
on ``~/start`` (or ``autostart``) at the next tick; the message's ``header.stamp`` is not used
as a start time.

Parameters are listed in :data:`PARAMS` and :func:`tolerance_params` (each with its
description) and in ``config/controller.yaml``.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from array import array
from typing import Optional

import numpy as np

from marionette_control.control.controller_core import (ControllerCore, ControllerOptions, TickResult,
                                                        default_tolerances, make_core)
from marionette_control.control.estimation import ESTIMATORS, EstimatorNoise
from marionette_control.control.sample_checks import PlausibilityOptions
from marionette_control.control.trajectory import Trajectory, TrajectoryError
from marionette_control.nodes.convert import JointStateParser, JointStateReader, trajectory_from_msg
from marionette_control.nodes.names import status_name
from marionette_control.nodes.params import ParameterError, ParamSpec, declare

NODE_NAME = "marionette_controller"
NS = 1_000_000_000
DIAGNOSTICS_MIN_INTERVAL = 0.1  # s between event-driven diagnostics messages


def _choice(*options):
    def check(value):
        return None if value in options else f"must be one of {', '.join(options)}"
    return check


PARAMS = [
    ParamSpec("model_file", "marionette_arm.yaml", "YAML model file (a file under config/ or an absolute path; "
              "format of config/marionette_arm.yaml): the model, the /joint_states names (hardware.joint_names), "
              "the actuator limits (actuators) and, from its URDF, the joint limits the plausibility checks use; the "
              "same file the simulator's nominal model is", read_only=True),
    ParamSpec("trajectory_file", "", "Trajectory file (.npz, Trajectory.save) loaded at start-up and whenever the "
              "parameter is set; refused (and reported) when made for another model, without gains or with gains "
              "designed for another command delay; empty = none"),
    # topic names are relative: a namespaced node (two arms on one graph) finds its own optimizer and hardware
    ParamSpec("trajectory_topic", "marionette_optimizer/trajectory",
              "TrackedTrajectory topic of the optimizer (reliable, transient local)", read_only=True),
    ParamSpec("joint_states_topic", "joint_states", "sensor_msgs/JointState topic (sensor-data QoS)",
              read_only=True),
    ParamSpec("command_topic", "forward_position_controller/commands",
              "std_msgs/Float64MultiArray command topic (ros2_control forward position controller)", read_only=True),
    ParamSpec("command_joints", ["carriage", "string_length"], "Hardware joint names of the kinematic "
              "configurations in the order of the command's data (the forward position controller's 'joints')",
              read_only=True),
    ParamSpec("command_delay_steps", 1, "Control periods between a joint state and the step its command moves the "
              "drives: 1 with ros2_control (the forward position controller writes a command at its next update), 0 "
              "when the driver applies a command within the cycle it arrives; the controller predicts the state "
              "through the commands in flight and refuses gains designed for another delay", minimum=0, maximum=10,
              read_only=True),
    ParamSpec("estimator", "kalman", "State estimate from the measured configurations: 'kalman' (time-varying "
              "Kalman filter on the exact linearization along the trajectory) or 'legendre' (the discrete Legendre "
              "transform of two samples: exact on exact data, differentiates encoder noise)",
              check=lambda v: None if v in ESTIMATORS else f"must be one of {', '.join(ESTIMATORS)}", read_only=True),
    ParamSpec("estimator_noise.measurement", EstimatorNoise.measurement, "Kalman filter: standard deviation of a "
              "measured configuration [rad or m] (encoder noise and quantization, and what the model cannot "
              "explain)", minimum=1e-9, maximum=1.0, read_only=True),
    ParamSpec("estimator_noise.momentum", EstimatorNoise.momentum, "Kalman filter: standard deviation per step of a "
              "dynamic momentum [N m s] (model error: masses, damping, geometry)", minimum=1e-9, maximum=10.0,
              read_only=True),
    ParamSpec("estimator_noise.actuator", EstimatorNoise.actuator, "Kalman filter: standard deviation per step of a "
              "drive's position against its command [m]", minimum=1e-9, maximum=1.0, read_only=True),
    ParamSpec("feedback", True, "false: feed-forward only (u = u_d(k + command_delay_steps), the gains unused), to "
              "measure what the feedback adds; checks, limits and tolerances stay", read_only=True),
    ParamSpec("plausibility.limit_margin", PlausibilityOptions.limit_margin, "A joint state outside a joint's "
              "URDF limits or a drive's range by more than this [rad or m] is implausible: hold and report",
              minimum=0.0, maximum=10.0, read_only=True),
    ParamSpec("plausibility.velocity_factor", PlausibilityOptions.velocity_factor, "A change since the last "
              "accepted joint state larger than velocity_factor x the joint's velocity limit x the time between them "
              "(+ jump_margin) is implausible", minimum=1.0, maximum=100.0, read_only=True),
    ParamSpec("plausibility.jump_margin", PlausibilityOptions.jump_margin, "Allowance of the jump check for "
              "encoder noise and quantization [rad or m]", minimum=0.0, maximum=10.0, read_only=True),
    ParamSpec("plausibility.chain_tolerance", PlausibilityOptions.chain_tolerance, "A joint state whose distance "
              "from the closed chain's constraint surface (|h|/|Dh|; for the string about its slack or stretch in m) "
              "exceeds this is implausible", minimum=1e-6, maximum=10.0, read_only=True),
    ParamSpec("constraints.goal_time", ControllerOptions.goal_time, "Time [s] after the trajectory's end within "
              "which every configuration must be within its goal tolerance (else goal_tolerance is reported)",
              minimum=0.0, maximum=3600.0, read_only=True),
    ParamSpec("state_timeout", 0.05, "A joint state older than this (s, on the node's clock) is stale: hold and "
              "report", minimum=1e-4, maximum=60.0),
    ParamSpec("stamp_tolerance", 0.1, "Tolerance of the spacing of the two samples of a tick around dt, as a "
              "fraction of dt (< 0.5; below half the sample period when sampling faster than 1/dt)",
              minimum=0.0, maximum=0.49),
    ParamSpec("watchdog_period", 0.01, "Period (s, ROS time) of the stale-data check; while stale and running the "
              "hold command is repeated at this period", minimum=1e-3, maximum=1.0, read_only=True),
    ParamSpec("diagnostics_period", 0.5, "Period (s, steady clock) of /diagnostics messages (every active fault "
              "kind with its count)", minimum=0.01, maximum=60.0, read_only=True),
    ParamSpec("autostart", False, "Start tracking as soon as a trajectory is loaded"),
    ParamSpec("publish_tracking", True, "Publish ~/tracking (one numeric message per tick, for plotting)"),
    ParamSpec("fault_log_throttle", 1.0, "Minimum interval (s) between log lines about the same fault kind",
              minimum=0.0, maximum=3600.0),
    ParamSpec("realtime_priority", 0, "SCHED_FIFO priority (1-99) for every thread of the node's process that "
              "exists after start-up (DDS receive threads, executor), for a short, steady joint-state-to-command "
              "latency on a busy machine; 0 = the default scheduler (the default: an explicit choice on the robot's "
              "computer, not implied by permission, since containers and CI run as root). Needs CAP_SYS_NICE or an "
              "rtprio limit; when refused the node warns and runs without", minimum=0, maximum=99, read_only=True),
    ParamSpec("executor", "events", "rclpy executor: 'events' (rclpy.experimental.EventsExecutor, lower "
              "overhead per message) or 'single_threaded'", check=_choice("events", "single_threaded"),
              read_only=True),
]

#: parameters that shape the core's commands (the rest are about transport, logging and scheduling)
CORE_PARAMS = {"state_timeout", "stamp_tolerance", "command_delay_steps", "estimator", "estimator_noise.measurement",
               "estimator_noise.momentum", "estimator_noise.actuator", "feedback", "plausibility.limit_margin",
               "plausibility.velocity_factor", "plausibility.jump_margin", "plausibility.chain_tolerance",
               "constraints.goal_time"}

#: per joint tolerances, joint_trajectory_controller style: constraints.<hardware joint>.<name> -> tolerance kind
TOLERANCE_PARAMS = {"start": "start", "trajectory": "path", "goal": "goal"}


def core_values(values: dict) -> dict:
    """The entries of parameter values that shape the core's commands (:data:`CORE_PARAMS`, tolerances)."""
    return {k: v for k, v in values.items() if k in CORE_PARAMS or k.startswith("constraints.")}


def tolerance_params(desc) -> list[ParamSpec]:
    """``constraints.<joint>.{start,trajectory,goal}`` of every hardware joint of the model file (defaults:
    ``controller_core.default_tolerances``; 0 = unchecked)."""
    defaults = default_tolerances(desc.model)
    specs = []
    for hw, cfg in desc.hardware_joints.items():
        unit = "rad" if desc.model.config_names.index(cfg) < desc.model.nd else "m"
        for name, kind in TOLERANCE_PARAMS.items():
            what = {"start": "tracking starts only with the joint within this of the trajectory's start",
                    "trajectory": "a tracking error beyond this aborts tracking (hold and report)",
                    "goal": "within constraints.goal_time after the end the error must be within this"}[name]
            specs.append(ParamSpec(f"constraints.{hw}.{name}", float(defaults[kind][cfg]),
                                   f"{what} [{unit}]; 0 = unchecked", minimum=0.0, maximum=100.0, read_only=True))
    return specs


def controller_param_defaults(desc) -> dict:
    """{name: default} of every parameter of the node for a model description."""
    return {s.name: s.default for s in PARAMS + tolerance_params(desc)}


def controller_options(values: dict, desc) -> ControllerOptions:
    """The ControllerOptions of parameter values {name: value} (missing ones: the declared defaults)."""
    defaults = controller_param_defaults(desc)
    unknown = set(values) - set(defaults)
    if unknown:
        raise ParameterError(f"unknown controller parameter(s) {', '.join(sorted(unknown))}")
    v = {**defaults, **values}
    tolerances: dict = {}
    for hw, cfg in desc.hardware_joints.items():
        for name, kind in TOLERANCE_PARAMS.items():
            tolerances.setdefault(kind, {})[cfg] = float(v[f"constraints.{hw}.{name}"])
    try:
        return ControllerOptions(
            state_timeout=float(v["state_timeout"]), stamp_tolerance=float(v["stamp_tolerance"]),
            command_delay_steps=int(v["command_delay_steps"]), estimator=v["estimator"],
            noise=EstimatorNoise(float(v["estimator_noise.measurement"]), float(v["estimator_noise.momentum"]),
                                 float(v["estimator_noise.actuator"])),
            feedback=bool(v["feedback"]),
            plausibility=PlausibilityOptions(*(float(v[f"plausibility.{n}"]) for n in (
                "limit_margin", "velocity_factor", "jump_margin", "chain_tolerance"))),
            tolerances=tolerances, goal_time=float(v["constraints.goal_time"]))
    except ValueError as e:
        raise ParameterError(str(e)) from None


def load_model_description(model_file: str):
    """ModelDescription of ``model_file`` (relative names are looked up under config/, as the simulator does)."""
    from marionette_control.model.yaml_model import load_model_file
    from marionette_control.system_description import config_file

    return load_model_file(config_file(model_file))


def core_from_description(desc, values: Optional[dict] = None) -> ControllerCore:
    """The ControllerCore the node runs for a model description and parameter values (also for replaying
    recorded joint states: feed ``core.on_joint_state(msg, stamp_ns, receive_ns)`` and ``core.on_watchdog(now_ns)``
    in time order)."""
    reader = JointStateReader(desc.model.config_names, desc.hardware_joints)
    return make_core(desc, controller_options(values or {}, desc), reader.read)


def command_permutation(model, hardware_joints: dict, command_joints: list) -> np.ndarray:
    """Indices into u (nU,) giving the command's data in ``command_joints`` order.

    hardware_joints : {hardware name: configuration name}; command_joints : hardware names of the
    kinematic configurations, each once. Raises ParameterError naming what is wrong.
    """
    if model.nu:
        raise ParameterError(f"model '{model.name}' has {model.nu} force input(s); the position command "
                             "interface carries only kinematic configurations")
    kin = list(model.config_names[model.nd:])
    to_hw = {c: h for h, c in hardware_joints.items()}
    wanted = sorted(to_hw[c] for c in kin)
    if sorted(command_joints) != wanted:
        raise ParameterError(f"parameter 'command_joints' must list each kinematic joint once ({', '.join(wanted)}), "
                             f"got {list(command_joints)}")
    return np.array([model.nu + kin.index(hardware_joints[h]) for h in command_joints])


def set_realtime_priority(priority: int) -> Optional[str]:
    """Puts every thread of this process under SCHED_FIFO at ``priority``; returns an error text or None.

    Threads created later keep the default scheduler (call after the executor has spun once).
    """
    failed = []
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setscheduler(int(tid), os.SCHED_FIFO, os.sched_param(priority))
        except ProcessLookupError:
            continue  # the thread ended meanwhile
        except OSError as e:
            failed.append(f"thread {tid}: {e.strerror}")
    if failed:
        return (f"could not set SCHED_FIFO priority {priority} ({'; '.join(failed[:2])}"
                f"{', ...' if len(failed) > 2 else ''}): needs CAP_SYS_NICE or an rtprio limit (ulimit -r)")
    return None


def _ros():
    """Imports of the ROS stack (kept out of module import so the helpers above import without rclpy)."""
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
    from rclpy.clock import Clock, ClockType
    from rclpy.node import Node
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
    from rcl_interfaces.msg import SetParametersResult
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray, MultiArrayDimension
    from std_srvs.srv import Trigger

    return locals()


def make_node_class():
    """The node class (defined on first use, so importing this module does not need rclpy)."""
    r = _ros()
    Node = r["Node"]

    class ControllerNode(Node):
        """The ROS adapter: messages ⇄ ControllerCore."""

        def __init__(self, **kwargs):
            super().__init__(NODE_NAME, **kwargs)
            self._staged: Optional[tuple[str, Trajectory]] = None
            self.add_on_set_parameters_callback(self._check_trajectory_file)
            self.p = declare(self, PARAMS, on_change=self._on_param)
            p = self.p
            try:
                desc = load_model_description(p["model_file"])
            except (OSError, ValueError) as e:
                raise ParameterError(f"parameter 'model_file': {e}") from None
            model = self.model = desc.model
            self.hardware_joints = dict(desc.hardware_joints)
            p.update(declare(self, tolerance_params(desc)))
            self.core = core_from_description(desc, core_values(p))
            self._perm = command_permutation(model, self.hardware_joints, list(p["command_joints"]))
            # the command's data is u itself when command_joints lists the inputs in model order (the default)
            self._perm_is_identity = self._perm.tolist() == list(range(model.nU))

            reliable = r["QoSProfile"](depth=10, reliability=r["ReliabilityPolicy"].RELIABLE)
            latched = r["QoSProfile"](depth=1, reliability=r["ReliabilityPolicy"].RELIABLE,
                                      durability=r["DurabilityPolicy"].TRANSIENT_LOCAL)
            self._cmd_pub = self.create_publisher(r["Float64MultiArray"], p["command_topic"], reliable)
            self._track_pub = self.create_publisher(r["Float64MultiArray"], "~/tracking", reliable)
            self._diag_pub = self.create_publisher(r["DiagnosticArray"], "/diagnostics", reliable)
            # raw: the callback gets the serialized message and reads what it needs (JointStateParser)
            self.create_subscription(r["JointState"], p["joint_states_topic"], self._on_joint_state,
                                     r["qos_profile_sensor_data"], raw=True)
            from rclpy.serialization import deserialize_message
            self._parse_joint_state = JointStateParser(
                lambda data: deserialize_message(data, r["JointState"])).parse
            from marionette_interfaces.msg import TrackedTrajectory
            self._trajectory_sub = self.create_subscription(TrackedTrajectory, p["trajectory_topic"],
                                                            self._on_trajectory_msg, latched)
            self.create_service(r["Trigger"], "~/start", self._on_start)
            self.create_service(r["Trigger"], "~/stop", self._on_stop)
            self.create_timer(p["watchdog_period"], self._on_watchdog)
            self._steady = r["Clock"](clock_type=r["ClockType"].STEADY_TIME)
            self.create_timer(p["diagnostics_period"], self._publish_diagnostics, clock=self._steady)

            # reused messages (the tick path assigns data and publishes)
            self._cmd_msg = r["Float64MultiArray"]()
            self._track_msg = r["Float64MultiArray"]()
            labels = (["stamp", "k", "error_norm", "compute_us"] + [f"xhat.{n}" for n in model.state_names]
                      + [f"xref.{n}" for n in model.state_names] + [f"u.{n}" for n in model.discrete_input_names])
            self._track_buf = np.zeros(len(labels))
            self._track_msg.layout.dim = [r["MultiArrayDimension"](label=",".join(labels), size=len(labels),
                                                                   stride=len(labels))]
            self._last_diag = 0.0
            self._last_log: dict[str, float] = {}
            # the node's clock read without building a Time (rclpy's Clock.now() validates one per call)
            self._clock_handle = self.get_clock().handle
            self.samples_before_clock = 0

            self.get_logger().info(
                f"model '{model.name}' (hash {model.hash}); joint states on {p['joint_states_topic']}, commands "
                f"[{', '.join(self.command_joint_names())}] on {p['command_topic']}")
            if p["trajectory_file"]:
                self._load_file(p["trajectory_file"])

        # ------------------------------------------------------------------------------ tick path

        def _on_joint_state(self, data: bytes) -> None:
            """A serialized JointState: the tick path. What the command does not need (tracking, logs,
            diagnostics) comes after its publication."""
            now = self._clock_handle.get_now().nanoseconds
            if now == 0 and self._waiting_for_clock():
                return
            try:
                msg = self._parse_joint_state(data)
            except Exception as e:  # bytes no deserializer reads (no publisher of the type writes them)
                res = self.core.on_undecodable(f"joint state could not be deserialized: {e}")
            else:
                res = self.core.on_joint_state(msg, msg.stamp_ns, now)
            if res.command is not None:
                self._send(res.command)
            if res.kind == "tick" and self.p["publish_tracking"]:
                self._publish_tracking(res)
            if res.new_fault or res.recovered:
                self._report(res)

        def _waiting_for_clock(self) -> bool:
            """True while the node follows /clock (use_sim_time) and no time has arrived on it yet.

            rclpy's ROS clock reads 0 under use_sim_time until its first /clock message, and /clock and
            /joint_states are separate topics (discovered and delivered independently), so the first joint
            states can arrive first: judged against time 0 they would be "future_stamp" faults although
            nothing is wrong. They cannot be checked for age either, so they are counted and skipped.
            """
            if not self.get_clock().ros_time_is_active:
                return False
            self.samples_before_clock += 1
            return True

        def _send(self, u: np.ndarray) -> None:
            # (an array('d') is what the message stores; from bytes it is one copy, no per-element conversion)
            self._cmd_msg.data = array("d", (u if self._perm_is_identity else u[self._perm]).tobytes())
            self._cmd_pub.publish(self._cmd_msg)

        def _publish_tracking(self, res: TickResult) -> None:
            b, nx = self._track_buf, self.model.nx
            dx = res.x_hat - res.x_ref
            b[0], b[1], b[2], b[3] = res.stamp_ns / NS, res.k, float(np.sqrt(dx @ dx)), res.compute_ns / 1e3
            b[4:4 + nx] = res.x_hat
            b[4 + nx:4 + 2 * nx] = res.x_ref
            b[4 + 2 * nx:] = res.command
            self._track_msg.data = array("d", b.tobytes())
            self._track_pub.publish(self._track_msg)

        def _on_watchdog(self) -> None:
            res = self.core.on_watchdog(self._clock_handle.get_now().nanoseconds)
            if res.command is not None:
                self._send(res.command)
            if res.new_fault:
                self._report(res)

        # ------------------------------------------------------------------------------ faults, diagnostics

        def _report(self, res: TickResult) -> None:
            """Logs a raised or cleared fault (throttled per kind) and publishes diagnostics soon."""
            now = time.monotonic()
            log = self.get_logger()
            key = "recovered" if res.recovered else res.fault
            if now - self._last_log.get(key, -1e9) >= self.p["fault_log_throttle"]:
                self._last_log[key] = now
                if res.recovered:
                    log.info(f"joint states valid again: {res.fault_message}")
                else:
                    action = "holding the actuators" if self.core.running else "not running"
                    count = self.core.fault_counts.get(key, 0)
                    text = f"joint-state fault {key} (#{count} of this kind): {res.fault_message}; {action}"
                    # (rclpy refuses different severities from one call site)
                    if key in ("sample_gap", "no_data"):
                        log.warning(text)
                    else:
                        log.error(text)
            if now - self._last_diag >= DIAGNOSTICS_MIN_INTERVAL:
                self._publish_diagnostics()

        def _publish_diagnostics(self) -> None:
            level, message, values = self.core.status()
            if self.samples_before_clock:
                values.append(("samples_before_clock", str(self.samples_before_clock)))
            st = r["DiagnosticStatus"](level=bytes([level]), name=status_name(self, "tracking"), message=message,
                                       hardware_id=self.model.name,
                                       values=[r["KeyValue"](key=k, value=v) for k, v in values])
            arr = r["DiagnosticArray"](status=[st])
            arr.header.stamp = self.get_clock().now().to_msg()
            self._diag_pub.publish(arr)
            self._last_diag = time.monotonic()

        # ------------------------------------------------------------------------------ trajectories

        def _install(self, traj: Trajectory, source: str) -> bool:
            try:
                msg = self.core.load_trajectory(traj, source)
            except (TrajectoryError, ValueError) as e:
                self.get_logger().error(f"refused trajectory: {e}")
                self._publish_diagnostics()
                return False
            self.get_logger().info(msg)
            if self.p["autostart"] and not self.core.running:
                ok, text = self.core.start()
                if ok:
                    self.get_logger().info(f"autostart: {text}")
                else:
                    self.get_logger().warning(f"autostart: {text}")
            self._publish_diagnostics()
            return True

        def _load_file(self, path: str) -> bool:
            try:
                traj = Trajectory.load(path)
            except TrajectoryError as e:
                self.core.trajectory_error = str(e)
                self.get_logger().error(f"refused trajectory: {e}")
                self._publish_diagnostics()
                return False
            return self._install(traj, path)

        def _on_trajectory_msg(self, msg) -> None:
            source = f"from {self._trajectory_sub.topic_name}"
            try:
                traj = trajectory_from_msg(msg)
            except (TrajectoryError, ValueError) as e:
                self.core.trajectory_error = f"{source}: {e}"
                self.get_logger().error(f"refused trajectory {source}: {e}")
                self._publish_diagnostics()
                return
            self._install(traj, source)

        def _check_trajectory_file(self, params):
            """Refuses a runtime trajectory_file whose trajectory would be refused (reason = why)."""
            for prm in params:
                if prm.name == "trajectory_file" and hasattr(self, "core") and prm.value:
                    try:
                        traj = Trajectory.load(prm.value)
                        self.core.check_trajectory(traj)
                    except (TrajectoryError, ValueError, TypeError) as e:
                        return r["SetParametersResult"](successful=False, reason=str(e))
                    self._staged = (prm.value, traj)
            return r["SetParametersResult"](successful=True)

        def _on_param(self, name, value) -> None:
            if name == "trajectory_file" and hasattr(self, "core") and value:
                staged, self._staged = self._staged, None
                if staged is not None and staged[0] == value:
                    self._install(staged[1], value)
                else:
                    self._load_file(value)
            elif name == "state_timeout" and hasattr(self, "core"):
                self.core.set_timing(state_timeout=value)
            elif name == "stamp_tolerance" and hasattr(self, "core"):
                self.core.set_timing(stamp_tolerance=value)

        # ------------------------------------------------------------------------------ services

        def _on_start(self, request, response):
            response.success, response.message = self.core.start()
            if response.success:
                self.get_logger().info(f"start: {response.message}")
            else:
                self.get_logger().warning(f"start refused: {response.message}")
            self._publish_diagnostics()
            return response

        def _on_stop(self, request, response):
            response.success, response.message, hold = self.core.stop()
            if hold is not None:
                self._send(hold)
            self.get_logger().info(f"stop: {response.message}")
            self._publish_diagnostics()
            return response

        def command_joint_names(self) -> list[str]:
            """Hardware names of the command's data entries, in order."""
            to_hw = {c: h for h, c in self.hardware_joints.items()}
            m = self.model
            return [to_hw[m.config_names[m.nd + int(i) - m.nu]] for i in self._perm]

    return ControllerNode


def make_executor(node):
    """The executor of the ``executor`` parameter."""
    if node.p["executor"] == "events":
        from rclpy.experimental import EventsExecutor
        return EventsExecutor()
    from rclpy.executors import SingleThreadedExecutor
    return SingleThreadedExecutor()


def make_node():
    """The node, with everything allocated so far (rclpy, numpy, the model, a trajectory file) moved out of
    the garbage collector's reach (``gc.freeze``): a full collection then walks only what was allocated
    since instead of every object of the process (~50 000 objects, 9-17 ms here), so one that falls into a tick stays short.
    Done before the executor spins, so the pause delays no message."""
    node = make_node_class()()
    gc.collect()
    gc.freeze()
    return node


def apply_realtime_priority(node, executor) -> None:
    """``realtime_priority``, once the executor's threads exist (after its first spin)."""
    priority = node.p["realtime_priority"]
    if priority:
        error = set_realtime_priority(priority)
        if error:
            node.get_logger().warning(f"realtime_priority: {error}; running with the default scheduler")
        else:
            node.get_logger().info(f"realtime_priority: all threads SCHED_FIFO {priority}")


def main(args=None) -> int:
    """Runs the node until SIGINT/SIGTERM (:func:`marionette_control.nodes.process.run_node`)."""
    from marionette_control.nodes.process import run_node

    return run_node(NODE_NAME, make_node, make_executor, args, started=apply_realtime_priority)


if __name__ == "__main__":
    sys.exit(main())
