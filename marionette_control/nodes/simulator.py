"""``marionette_simulator``: the hardware stand-in, a thin ROS adapter around :class:`SimulatedArm`.

What it does
------------
The arm itself (plant model, command delay, drives, encoders, disturbances) is
:class:`~marionette_control.sim.simulator.SimulatedArm`, configured by a
:class:`~marionette_control.sim.profile.HardwareProfile`. Everything else that needs no ROS lives beside it
in ``sim/``: the parameters (:mod:`marionette_control.sim.simulator_options`), the configure step that checks them and
builds the arm (:mod:`marionette_control.sim.configure`) and the time base (:mod:`marionette_control.sim.schedule`).
This node declares the parameters, turns messages into arrays and back, and paces the integrator steps.
Every ``dt`` of simulated time it takes one step, and every ``1/publish_rate`` it publishes
what the encoders read on ``joint_states`` stamped with the step's time, and the plant's true
configuration on ``~/true_joint_states`` (for evaluation only: a controller must not use it).

Lifecycle (a lifecycle node, as ros2_control's hardware components are: docs/simulator.md says why)
-----------------------------------------------------------------------------------------------------
The states are those a ros2_control hardware component passes through, so a controller meets the
stand-in as it meets the driver (``ros2 lifecycle set /marionette_simulator <transition>``):

``unconfigured``
    parameters declared, ``/diagnostics``; no arm, nothing published, no /clock (simulated time paused).
``configure``
    builds the arm from the parameters (plant, profile, initial pose; a parameter that does not work
    fails the transition with its reason) and starts stepping it: ``joint_states`` (the encoders can be
    read), the true state, markers, ``/clock``, the services. The drives are braked: commands are
    refused (counted, with a throttled warning), as a component's command interfaces are unavailable
    while it is inactive.
``activate``
    releases the brakes: the drives follow the commands.
``deactivate``
    brakes the drives to a stop (pending commands dropped) and refuses commands again; the arm is still
    simulated and read.
``cleanup``
    releases the arm, publishers, subscription, services and the step timer. Simulated time continues at
    the next configure where it stopped (with ``publish_clock`` it is the graph's clock, which must not
    run back); the arm starts again at rest in its initial pose.
``shutdown``
    from any state, also when the process is stopped.

``autostart`` (default true) configures and activates at start-up, as a driver that is up: the
bringup, the launch files and the main job run it that way.

Profiles
--------
``profile`` (read-only) chooses the defaults of the hardware parameters (``plant_model_file``,
``command_delay_steps``, ``command_jitter_steps``, ``command_jitter_probability``, ``drive_mode``,
``encoder_resolution``, ``noise_std``, ``seed``): ``realistic`` (default: the plant
``config/marionette_arm_plant.yaml``, one period of command delay as with ros2_control, drives
within their speed and acceleration limits, encoder counts and noise) or ``perfect`` (the
nominal model, no delay, no noise, rate-limited drives: the published positions are the
integrator's configurations exactly, so a controller at the same Δt recovers the state by the
discrete Legendre transform bit for bit). A hardware parameter given explicitly (parameter file,
``-p``) overrides the profile's value; the node then reports the profile as ``custom``.
``config/simulator.yaml`` therefore sets ``profile`` only; docs/simulator.md explains each value.

Command convention (the hardware driver's, ros2_control ``forward_command_controller``)
---------------------------------------------------------------------------------------
``std_msgs/Float64MultiArray`` on ``<controller_name>/commands`` (default
``forward_position_controller/commands``, in the node's namespace), ``data`` = one position per joint of the
controller's ``joints`` list, in that order (parameter ``command_joints``, default
``[carriage, string_length]``). ``layout`` is ignored, as the forward command controller ignores
it. A command received while step k is the current one is the drives' setpoint from step
k + ``command_delay_steps`` on. Commands with the wrong length or a non-finite value are refused
with a throttled warning; the last valid command stays. Out-of-range targets are saturated (with
a throttled warning), as a drive with position limits does.

The hardware side of ros2_control's ``joint_trajectory_controller`` too: ``trajectory_msgs/JointTrajectory`` on
``<trajectory_controller_name>/joint_trajectory`` (default ``joint_trajectory_controller/joint_trajectory``),
positions only, every drive named once in ``joint_names``. A point is where the drives are to be at its time
(``header.stamp`` + ``time_from_start``; a zero stamp: from the current step's stamp), so it is the setpoint of the
step ending then; the drives sample the newest command that has arrived at every step, between points linearly,
past the last point holding it (:mod:`marionette_control.sim.setpoint_stream`: a late or lost command leaves them
on the previous command's next points). A trajectory without points is a stop, as for
joint_trajectory_controller: the drives brake to a stop where they are when it takes effect. Commands naming other
joints, with points of another length, times not increasing, non-finite values or more than 100 points
(``MAX_POINTS``) are refused with a throttled warning naming what was wrong; the node keeps running.

Time
----
``publish_clock: true``: the simulator is the graph's clock. Simulated time starts at 0 (at the
first timer tick), advances ``dt`` per step and is published on ``/clock`` after every step;
steps are paced against the steady clock at ``real_time_factor`` simulated seconds per wall
second. Other nodes run with ``use_sim_time: true``. ``publish_clock: false``: step k is stamped
t₀ + k·dt on the wall clock and taken when the wall clock reaches that stamp (``real_time_factor``
must be 1 and ``use_sim_time`` false). :class:`~marionette_control.sim.schedule.StepSchedule` anchors t₀
at the first tick and re-anchors whenever the simulation falls more than ``MAX_LAG`` behind (a stall of the process or
the machine) or the clock steps: simulated time then skips ahead, and the stamps follow the
clock again instead of lagging it from then on. ``latency`` delays each joint-state message by
that much simulated time (whole steps; the stamp stays the measurement's time). A command timeout
(``command_timeout``, simulated seconds, 0 = none) applies ``command_timeout_action`` once: ``hold``
brakes the drives to a stop, ``continue`` keeps moving to the last setpoint.

Interfaces
----------
* publishes ``joint_states`` (sensor_msgs/JointState: hardware joint names of the model file,
  encoder positions), ``~/true_joint_states`` (sensor_msgs/JointState, same names and stamp: the
  plant's true positions q_k and velocities (q_k − q_{k−1})/dt, and as the effort of a string's length
  joint the string's tension [N] over the last step, 0 for the other joints; evaluation only), ``/clock``
  (rosgraph_msgs/Clock, if ``publish_clock``), ``~/markers`` (visualization_msgs/MarkerArray:
  links, string, masses of the plant; if ``marker_rate`` > 0), ``/diagnostics``
  (diagnostic_msgs/DiagnosticArray, 1 Hz wall: simulated time, profile, counters, the string's lowest tension
  ``tension_min_n``, time slack ``slack_s`` and ``slack_episodes`` since configure);
* subscribes ``<controller_name>/commands`` (std_msgs/Float64MultiArray, reliable) and
  ``<trajectory_controller_name>/joint_trajectory`` (trajectory_msgs/JointTrajectory, reliable);
* services (while configured) ``~/reset`` (std_srvs/Trigger: the initial rest state, drives there, pending
  commands, measurements and disturbances dropped; time keeps running) and ``~/disturb``
  (marionette_interfaces/Disturb: push a body of the plant), and the lifecycle services.

Parameters: see :func:`marionette_control.sim.simulator_options.parameters` (each with description, default and validation) and
``config/simulator.yaml``.
"""

from __future__ import annotations

import math
import time
from typing import Optional

import numpy as np
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Point, Vector3
from rcl_interfaces.msg import SetParametersResult
from rclpy.clock import Clock, ClockType
from rclpy.lifecycle import LifecycleState, TransitionCallbackReturn
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import JointState
from std_msgs.msg import ColorRGBA, Float64MultiArray
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import Marker, MarkerArray

from marionette_interfaces.srv import Disturb
from marionette_control.nodes.lifecycle import ManagedNode, logged_transition
from marionette_control.nodes.names import status_name
from marionette_control.nodes.params import declare
from marionette_control.nodes.process import run_node
from marionette_control.parameters import ParameterError
from marionette_control.sim.configure import SimulatorConfig, configure
from marionette_control.sim.disturbance import DisturbanceError
from marionette_control.sim.simulator_options import (NODE_PARAMETERS, PROFILE_FIELDS, PROFILE_PARAMETER, disturbance_limits,
                                            hardware_profile, profile_parameters)
from marionette_control.sim.profile import HardwareProfile
from marionette_control.sim.schedule import NANOSECONDS, AnswerGate, MeasurementQueue, StepSchedule
from marionette_control.sim.setpoint_stream import CommandError, trajectory_points
from marionette_control.sim.simulator import SimulatedArm, StepFault

NODE_NAME = "marionette_simulator"

_FAULT_ACTIONS = {
    "held": "held the drives where they are (the new setpoint)",
    "backed_off": "moved the drives back one step (the new setpoint)",
    "reset": "reset the simulation to its initial state",
}


def _stamp(t_ns: int):
    return Time(sec=t_ns // NANOSECONDS, nanosec=t_ns % NANOSECONDS)


class SimulatorNode(ManagedNode):
    """The ROS adapter around :class:`SimulatedArm`: lifecycle, parameters, pacing, messages, services."""

    MAX_STEPS_PER_TICK = 50          # keeps each timer callback short
    MAX_LAG = 0.25                   # wall seconds behind schedule before the time base re-anchors

    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        self.sim: Optional[SimulatedArm] = None
        # added first: rclpy runs the latest-added on-set callback first, so declare's checks of type, range and
        # read-only come first and this one judges only well-formed values
        self.add_on_set_parameters_callback(self._check_runtime_rules)
        # the profile first: its values are the defaults of the hardware parameters declared next
        profile_name = declare(self, [PROFILE_PARAMETER])["profile"]
        self.values = declare(self, NODE_PARAMETERS + profile_parameters(HardwareProfile.named(profile_name)),
                              on_change=self._on_parameter_change)
        self.values["profile"] = profile_name
        self.dt = self.values["dt"]
        self.dt_ns = round(self.dt * NANOSECONDS)
        wall = not self.values["publish_clock"]
        # the time base outlives configurations: simulated time (with publish_clock the graph's clock) pauses while
        # the node is unconfigured and continues at the next configure, never running back
        self.schedule = StepSchedule(self.dt_ns, round(self.MAX_LAG * NANOSECONDS), wall_stamps=wall,
                                     real_time_factor=self.values["real_time_factor"])
        self._pace_clock = time.time_ns if wall else time.monotonic_ns
        self._steps_before = 0           # steps taken under earlier configurations
        self.cfg: Optional[SimulatorConfig] = None
        self.engaged = False             # active: the drives take commands (ros2_control: command interfaces)
        self._steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", QoSProfile(depth=10))
        self.create_timer(1.0, self._publish_diagnostics, clock=self._steady)
        self._start_up(self.values["autostart"], on_inactive="the drives stay braked",
                       waiting="configure and activate it (lifecycle services)")

    # ---------------------------------------------------------------- lifecycle (ros2_control's hardware states)

    @logged_transition
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            cfg = configure(self.values, self.get_parameter("use_sim_time").value)
        except ParameterError as e:
            return self._done(f"configure failed: {e}", ok=False, level="error")
        self.cfg, self.sim = cfg, cfg.arm
        self.queue = MeasurementQueue()
        self.commands_accepted = self.commands_rejected = self.commands_saturated = self.commands_refused = 0
        self.disturbances = 0
        self.last_command_k: Optional[int] = None
        self.timed_out = False
        self.last_fault: Optional[StepFault] = None
        self.answers = AnswerGate(round(self.values["lockstep_timeout"] * NANOSECONDS))
        self._wall_start = time.monotonic()

        js_qos = qos_profile_sensor_data if self.values["joint_states_qos"] == "sensor_data" else QoSProfile(depth=10)
        self.joint_state_pub = self._keep(self.destroy_publisher,
                                          self.create_publisher(JointState, "joint_states", js_qos))
        self.true_state_pub = self._keep(self.destroy_publisher,
                                         self.create_publisher(JointState, "~/true_joint_states", js_qos))
        self.clock_pub = (self._keep(self.destroy_publisher, self.create_publisher(ClockMsg, "/clock",
                                                                                   QoSProfile(depth=10)))
                          if self.values["publish_clock"] else None)
        self.marker_pub = (self._keep(self.destroy_publisher, self.create_publisher(MarkerArray, "~/markers",
                                                                                    QoSProfile(depth=1)))
                           if cfg.marker_every else None)
        self.command_topic = f"{self.values['controller_name']}/commands"
        self._keep(self.destroy_subscription, self.create_subscription(
            Float64MultiArray, self.command_topic, self._on_command,
            QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)))
        self.trajectory_topic = f"{self.values['trajectory_controller_name']}/joint_trajectory"
        self._keep(self.destroy_subscription, self.create_subscription(
            JointTrajectory, self.trajectory_topic, self._on_trajectory,
            QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)))
        self._keep(self.destroy_service, self.create_service(Trigger, "~/reset", self._on_reset))
        self._keep(self.destroy_service, self.create_service(Disturb, "~/disturb", self._on_disturb))
        self._marker_frames = self._marker_layout()
        self.schedule.anchored = False   # the first tick anchors the time base, at the step simulated time is at
        period = max(self.dt / self.values["real_time_factor"], 1e-3)
        self._keep(self.destroy_timer, self.create_timer(period, self._on_tick, clock=self._steady))

        p = cfg.profile
        return self._done(
            f"configured: simulating '{self.sim.plant.model.name}' (profile {p.name}: command delay "
            f"{p.command_delay_steps} steps, drives {p.drive_mode}) for the nominal model "
            f"'{cfg.description.model.name}' with dt={self.dt:g} s; joint_states {', '.join(cfg.joint_names)} at "
            f"{1.0 / (cfg.publish_every * self.dt):g} Hz; commands on {self.resolve_topic_name(self.command_topic)} "
            f"for {list(self.values['command_joints'])} and {self.resolve_topic_name(self.trajectory_topic)}; "
            + (f"publishing /clock at real-time factor {self.values['real_time_factor']:g}"
               if self.clock_pub else "wall-clock stamps") + "; the drives braked until activated")

    @logged_transition
    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        super().on_activate(state)
        self.engaged = True
        self.last_command_k = None
        self.timed_out = False
        return self._done(f"active: the drives follow the commands on {self.resolve_topic_name(self.command_topic)}")

    @logged_transition
    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        super().on_deactivate(state)
        self.engaged = False
        self.sim.hold()
        return self._done("inactive: the drives braked to a stop; commands are refused until activated (joint "
                          "states are still published)")

    @logged_transition
    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        super().on_cleanup(state)
        self._release()
        return self._done("unconfigured: released the arm, publishers, subscription, services and timer (simulated "
                          "time paused)")

    @logged_transition
    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._release()
        return self._done("shut down")

    @logged_transition
    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._release()
        return self._done("error in a transition: released everything (unconfigured)", level="error")

    def _release(self) -> None:
        self._release_entities()
        if self.sim is not None:  # the next configuration starts one step later: no stamp is published twice
            self._steps_before += self.sim.k + 1
        self.cfg = self.sim = None
        self.engaged = False

    # ---------------------------------------------------------------- time and stepping

    @property
    def k(self) -> int:
        """Steps since the node started (simulated time is k dt with publish_clock)."""
        return self._steps_before + (self.sim.k if self.sim is not None else 0)

    def _stamp_of(self, arm_step: int) -> int:
        """The stamp of step ``arm_step`` of the configured arm (its ``k``)."""
        return self.schedule.stamp_ns(self._steps_before + arm_step)

    @property
    def now_ns(self) -> int:
        """Stamp of the current step."""
        return self.schedule.stamp_ns(self.k)

    def _on_tick(self) -> None:
        if self.sim is None:  # a period the executor had taken before cleanup destroyed the timer
            return
        now = self._pace_clock()
        if not self.schedule.anchored:   # the time base starts with the first tick, not at construction
            self.schedule.anchor(self.k, now)
            self._after_step()
            return
        wait, resumed = self.answers.hold(now)
        if wait:
            return   # simulated time stands still until the controller has answered (AnswerGate)
        if resumed:
            self.schedule.anchor(self.k + 1, now)
        steps, skipped_ns = self.schedule.due(self.k, now)
        if skipped_ns:
            rtf = self.schedule.real_time_factor
            effect = (f"the stamps jump {skipped_ns / NANOSECONDS:+.3f} s to follow the wall clock again (the arm is "
                      "not simulated in the gap)" if self.schedule.wall_stamps else
                      f"simulated time, the graph's clock, now runs {skipped_ns / rtf / NANOSECONDS:.3f} s (wall) "
                      "later")
            self.get_logger().warning(
                f"the simulation was {skipped_ns / rtf / NANOSECONDS:+.3f} s (wall) off its schedule at "
                f"real_time_factor {rtf:g} (a stall of this process or the machine, or a clock step); re-anchored "
                f"the time base: {effect}", throttle_duration_sec=5.0)
        for _ in range(min(steps, self.MAX_STEPS_PER_TICK)):
            self._step_once()
            if self.answers.pending:
                break

    def _step_once(self) -> None:
        fault = self.sim.step()
        if fault is not None:
            self.last_fault = fault
            if fault.action == "reset":
                self.queue.clear()
            self.get_logger().error(
                f"integrator step at t={self.now_ns / NANOSECONDS:.3f} s failed: {fault.message}; "
                + _FAULT_ACTIONS[fault.action], throttle_duration_sec=1.0)
        self._after_step()

    def _after_step(self) -> None:
        now = self.now_ns
        if self.clock_pub is not None:
            self.clock_pub.publish(ClockMsg(clock=_stamp(now)))
        if self.k % self.cfg.publish_every == 0:
            delay_steps = math.ceil(self.values["latency"] * NANOSECONDS / self.dt_ns - 1e-9)
            self.queue.push(now + delay_steps * self.dt_ns, now, self.sim.measure().tolist())
            effort = np.zeros(len(self.cfg.joint_names))
            effort[list(self.sim.limits.string_length)] = np.nan_to_num(self.sim.tension())
            true = JointState(name=self.cfg.joint_names, position=self.sim.q.tolist(),
                              velocity=self.sim.true_velocities().tolist(), effort=effort.tolist())
            true.header.stamp = _stamp(now)
            self.true_state_pub.publish(true)
        for stamp, positions in self.queue.pop_due(now):
            msg = JointState(name=self.cfg.joint_names, position=positions)
            msg.header.stamp = _stamp(stamp)
            self.joint_state_pub.publish(msg)
            self.answers.sample_published()
        if self.marker_pub is not None and self.k % self.cfg.marker_every == 0:
            self.marker_pub.publish(self._markers(now))
        timeout = self.values["command_timeout"]
        if (timeout > 0.0 and not self.timed_out and self.last_command_k is not None
                and (self.k - self.last_command_k) * self.dt > timeout):
            self.timed_out = True
            if self.values["command_timeout_action"] == "hold":
                self.sim.hold()
            self.get_logger().warning(
                f"no valid command on {self.command_topic} or {self.trajectory_topic} for {timeout:g} s: "
                + ("braking the drives to a stop" if self.values["command_timeout_action"] == "hold"
                   else "continuing to the last setpoint"))

    # ---------------------------------------------------------------- commands and services

    def _engaged(self, topic: str) -> bool:
        """The drives take commands (active); else the command on ``topic`` is refused with a throttled warning."""
        if self.sim is None:  # a message the executor had taken before cleanup destroyed the subscription
            return False
        if not self.engaged:
            self.commands_refused += 1
            self.get_logger().warning(
                f"refused a command on {topic}: the simulator is {self.lifecycle_state}, its drives "
                "braked (ros2_control: no command interfaces until the hardware is activated)",
                throttle_duration_sec=2.0)
        return self.engaged

    def _rejected(self, message: str) -> None:
        self.commands_rejected += 1
        self.get_logger().warning(f"{message}; keeping the last valid command", throttle_duration_sec=2.0)

    def _on_command(self, msg) -> None:
        if not self._engaged(self.command_topic):
            return
        data = msg.data
        n = len(self.cfg.command_index)
        if len(data) != n:
            return self._rejected(f"refused a command with {len(data)} values on {self.command_topic}: expected {n} "
                                  f"({', '.join(self.values['command_joints'])})")
        values = np.asarray(data, dtype=float)
        if not np.all(np.isfinite(values)):
            return self._rejected(f"refused a command with non-finite values {values.tolist()} on "
                                  f"{self.command_topic}")
        target = np.empty(self.sim.nk)
        target[self.cfg.command_index] = values
        if self.sim.receive_command(target):
            saturated = self.sim.limits.saturate(target)[self.cfg.command_index]
            self._saturated(f"command {values.tolist()} outside the actuator range: saturated to {saturated.tolist()}")
        self._accepted(self.command_topic)

    def _on_trajectory(self, msg) -> None:
        """A joint_trajectory_controller command: its points are the setpoints of the steps ending at their times
        (header stamp + time_from_start; a zero stamp: from the current step), sampled at every step
        (:mod:`marionette_control.sim.setpoint_stream`); no points: a stop."""
        if not self._engaged(self.trajectory_topic):
            return
        if not msg.points:   # joint_trajectory_controller's stop: the drives brake to a stop
            self.sim.receive_stop()
            return self._accepted(self.trajectory_topic)
        stamp = msg.header.stamp.sec * NANOSECONDS + msg.header.stamp.nanosec or self.now_ns
        try:
            steps, points = trajectory_points(
                msg.joint_names, [p.positions for p in msg.points],
                [p.time_from_start.sec * NANOSECONDS + p.time_from_start.nanosec for p in msg.points],
                self.cfg.drive_index, stamp, lambda t: self.schedule.steps_at(t) - self._steps_before)
            saturated = self.sim.receive_command(points, steps)
        except CommandError as e:
            return self._rejected(f"refused a command on {self.trajectory_topic}: {e}")
        if saturated:
            self._saturated(f"a trajectory command on {self.trajectory_topic} outside the actuator range: saturated")
        self._accepted(self.trajectory_topic)

    def _saturated(self, message: str) -> None:
        self.commands_saturated += 1
        self.get_logger().warning(message, throttle_duration_sec=2.0)

    def _accepted(self, topic: str) -> None:
        self.commands_accepted += 1
        self.answers.command_received()
        self.last_command_k = self.k
        if self.timed_out:
            self.timed_out = False
            self.get_logger().info(f"commands on {topic} resumed")

    def _on_reset(self, request, response):
        if self.sim is None:  # a request the executor had taken before cleanup destroyed the service
            response.success, response.message = False, f"refused: the simulator is {self.lifecycle_state}"
            return response
        self.sim.reset()
        self.queue.clear()
        self.last_command_k = None
        self.timed_out = False
        response.success = True
        response.message = (f"reset to the initial configuration {np.round(self.sim.q, 6).tolist()} "
                            f"({', '.join(self.cfg.joint_names)}) at t={self.now_ns / NANOSECONDS:.3f} s")
        self.get_logger().info(response.message)
        return response

    def _on_disturb(self, request, response):
        if self.sim is None:  # as in _on_reset
            response.success, response.message = False, f"refused: the simulator is {self.lifecycle_state}"
            return response
        start_ns = request.start_time.sec * NANOSECONDS + request.start_time.nanosec
        start_time = None
        if start_ns:
            start_time = (self.schedule.step_at(start_ns) - self._steps_before) * self.dt  # the arm's own time
        force = [request.force.x, request.force.y, request.force.z]
        impulse = [request.impulse.x, request.impulse.y, request.impulse.z]
        try:
            d = self.sim.disturb(request.body, request.profile, force=force, duration=request.duration,
                                 impulse=impulse, start_time=start_time)
        except DisturbanceError as e:
            response.success = False
            response.message = f"refused: {e}"
            self.get_logger().warning(f"~/disturb {response.message}")
            return response
        self.disturbances += 1
        total = d.impulse(self.dt)
        response.success = True
        response.start = _stamp(self._stamp_of(d.start_step))
        response.end = _stamp(self._stamp_of(d.end_step))
        response.total_impulse = Vector3(x=float(total[0]), y=float(total[1]), z=float(total[2]))
        response.message = (f"{d.profile} push on {d.body} for {len(d.forces)} step(s) from "
                            f"t={self._stamp_of(d.start_step) / NANOSECONDS:.3f} s, total impulse "
                            f"{np.round(total, 6).tolist()} N s (world x, y, z)")
        self.get_logger().info(response.message)
        return response

    # ---------------------------------------------------------------- parameters

    def _check_runtime_rules(self, params):
        """On-set: the rules between parameters and with the arm (start-up values: configure checks them)."""
        if not hasattr(self, "values"):
            return SetParametersResult(successful=True)
        for p in params:
            if p.name == "real_time_factor" and not self.values["publish_clock"] and p.value != 1.0:
                return SetParametersResult(successful=False, reason="real_time_factor other than 1 needs "
                                           "publish_clock: true (wall-clock stamps must run in real time)")
            if p.name in ("encoder_resolution", "noise_std") and self.sim is not None:  # (else: configure checks)
                try:
                    HardwareProfile(**{p.name: tuple(p.value)}).per_config(p.name, self.sim.nq)
                except ValueError as e:
                    return SetParametersResult(successful=False, reason=f"parameter '{p.name}': {e}")
        return SetParametersResult(successful=True)

    def _on_parameter_change(self, name, value) -> None:
        """Applies an accepted runtime change (latency, command_timeout_action: read where used)."""
        if name == "real_time_factor":
            self.schedule.set_real_time_factor(value, self.k, self._pace_clock())
        elif name == "command_timeout":
            self.timed_out = False
        elif self.sim is None:
            return  # unconfigured: configure reads the values
        elif name in PROFILE_FIELDS:
            self.sim.set_profile(hardware_profile(self.values))
        elif name == "on_step_error":
            self.sim.on_step_error = value
        elif name == "max_configuration_change":
            self.sim.max_configuration_change = float(value)
        elif name.startswith("disturbance_max_"):
            self.sim.disturbance_limits = disturbance_limits(self.values)

    # ---------------------------------------------------------------- markers and diagnostics

    def _marker_layout(self):
        m = self.sim.plant.model
        g = np.asarray(m.placements(self.sim.q))
        parents = list(m.frame_parents)
        links = [(parents[i], i) for i in range(len(parents))
                 if parents[i] >= 0 and np.linalg.norm(g[i, :3, 3] - g[parents[i], :3, 3]) > 1e-9]
        strings = [(m.frame_index(s.frame1), m.frame_index(s.frame2)) for s in self.sim.plant.strings]
        masses = [m.frame_index(name) for name in m.masses]
        return links, strings, masses

    def _markers(self, now_ns: int):
        links, strings, masses = self._marker_frames
        g = np.asarray(self.sim.plant.model.placements(self.sim.q))

        def point(i):
            p = g[i, :3, 3]
            return Point(x=float(p[0]), y=float(p[1]), z=float(p[2]))

        def marker(mid, ns, kind, scale, color, points):
            mk = Marker(ns=ns, id=mid, type=kind, action=Marker.ADD, points=points,
                        color=ColorRGBA(r=color[0], g=color[1], b=color[2], a=1.0))
            mk.header.frame_id = self.values["frame_id"]
            mk.header.stamp = _stamp(now_ns)
            mk.pose.orientation.w = 1.0
            mk.scale.x = mk.scale.y = mk.scale.z = scale
            return mk

        return MarkerArray(markers=[
            marker(0, "links", Marker.LINE_LIST, 0.015, (0.85, 0.55, 0.2), [point(i) for ij in links for i in ij]),
            marker(1, "strings", Marker.LINE_LIST, 0.004, (0.9, 0.1, 0.1), [point(i) for ij in strings for i in ij]),
            marker(2, "masses", Marker.SPHERE_LIST, 0.035, (0.3, 0.3, 0.35), [point(i) for i in masses]),
        ])

    def _publish_diagnostics(self) -> None:
        status = DiagnosticStatus(name=status_name(self, "simulation"))
        state = self.lifecycle_state
        pairs = {"lifecycle_state": state, "transition": self.transition_message}
        if self.sim is None:
            status.level = DiagnosticStatus.ERROR if self._transition_failed else DiagnosticStatus.OK
            status.message = {"unconfigured": "unconfigured: configure (lifecycle)"}.get(state, state)
            if self._transition_failed:
                status.message += f" ({self.transition_message})"
            pairs["steps"] = str(self.k)
            stamp = self.get_clock().now().to_msg()
        else:
            status.hardware_id = self.sim.plant.model.name
            self._arm_status(status, pairs)
            stamp = _stamp(self.now_ns)
        status.values = [KeyValue(key=k, value=v) for k, v in pairs.items()]
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = stamp
        self.diag_pub.publish(msg)

    def _arm_status(self, status: DiagnosticStatus, pairs: dict) -> None:
        """Level, message and values of the configured arm."""
        wall = time.monotonic() - self._wall_start
        if self.last_fault is not None:
            status.level = DiagnosticStatus.WARN
            status.message = f"last integrator fault ({self.last_fault.action}): {self.last_fault.message}"
        elif self.timed_out:
            status.level = DiagnosticStatus.WARN
            status.message = "command timeout"
        else:
            status.level = DiagnosticStatus.OK
            status.message = "running" if self.engaged else "inactive: the drives braked, commands refused"
        p = self.sim.profile
        pairs.update({
            "sim_time": f"{self.now_ns / NANOSECONDS:.6f}",
            "steps": str(self.k),
            "achieved_real_time_factor": f"{self.sim.steps * self.dt / wall:.3f}" if wall > 0 else "nan",
            "time_base_reanchors": str(self.schedule.reanchors),
            "lockstep_waits": str(self.answers.waits),
            "lockstep_timeouts": str(self.answers.timeouts),
            "profile": p.name,
            "plant": self.sim.plant.path,
            "command_delay_steps": str(p.command_delay_steps),
            "drive_mode": p.drive_mode,
            "noise_std": str(list(p.noise_std)),
            "encoder_resolution": str(list(p.encoder_resolution)),
            "commands_accepted": str(self.commands_accepted),
            "commands_rejected": str(self.commands_rejected),
            "commands_refused_inactive": str(self.commands_refused),
            "commands_saturated": str(self.commands_saturated),
            "commands_pending": str(self.sim.pending_commands),
            "last_command_step": "none" if self.last_command_k is None else str(self.last_command_k),
            "disturbances": str(self.disturbances),
            "step_errors": str(self.sim.step_errors),
            "string": p.string,
            "tension_min_n": f"{self.sim.tension_min_n:.4f}",
            "slack_s": f"{self.sim.slack_s:.3f}",
            "slack_episodes": str(self.sim.slack_episodes),
            "command_timed_out": str(self.timed_out).lower(),
            "actuator_positions": str(np.round(self.sim.rho, 6).tolist()),
            "actuator_setpoints": str(np.round(self.sim.setpoint, 6).tolist()),
        })

def main(args=None) -> int:
    """Entry point of ``marionette_simulator`` (``ros2 run marionette_control marionette_simulator``)."""
    return run_node(NODE_NAME, SimulatorNode, args=args)


if __name__ == "__main__":
    raise SystemExit(main())
