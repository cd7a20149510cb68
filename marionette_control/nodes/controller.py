"""marionette_controller: real-time tracking of an optimized trajectory from /joint_states (a lifecycle node).

A thin adapter around :class:`marionette_control.tracking.controller.ControllerCore`
(the tick logic, its parts — plausibility checks, Kalman filter, delay predictor, tracking law,
limits, tolerances — trajectory staging, alignment policy and fault handling are documented there;
a bag replay and the offline closed loop run the same object without ROS).

Lifecycle (rclpy.lifecycle: the ``lifecycle_msgs`` services ``~/change_state``, ``~/get_state``, ...)
-----------------------------------------------------------------------------------------------------
A controller is switched the way ros2_control switches controllers:

``unconfigured`` (at start-up)
    parameters declared; ``/diagnostics``, the services and the action below run, and the trajectory topic is
    subscribed (its latest message kept: the optimizer's latched sample arrives whenever discovery brings it);
    nothing else.
``configure``
    loads the model file (``model_file``: model, hardware joint names, actuator limits, joint limits of
    the plausibility checks), builds the core and its derived structures (limits, checks, tolerances),
    declares the per-joint tolerances, subscribes to the joint states, creates the command and ``~/tracking``
    publishers (lifecycle publishers: silent until active), loads ``trajectory_file`` and stages the trajectory
    topic's latest message. A model file that does not load fails the transition (the reason is logged and in
    /diagnostics); a refused trajectory file does not (the node is configured without it).
``activate``
    starts tracking the loaded trajectory (the start tolerance: the arm must be where it starts) and
    enables the outputs; refused (the transition fails, the node stays inactive, the reason is logged and
    in /diagnostics) without a trajectory or with the arm elsewhere. Active = tracking: when a run ends on
    its own (a path or start tolerance aborts it) the node deactivates itself.
``deactivate``
    sends the hold command (the drives stay where the last command put them), stops tracking and
    silences the outputs.
``cleanup``
    releases the core, the trajectory, subscriptions, publishers and the watchdog (back to unconfigured).
``shutdown`` (from any state)
    holds first if active, then releases; also run when the process is stopped (SIGINT/SIGTERM).

``~/start`` and ``~/stop`` (std_srvs/Trigger) are conveniences over the transitions: start configures
when unconfigured and activates — without a trajectory yet it first waits up to ``trajectory_wait`` s for the
optimizer's latched one, and a refusal says what it saw (no publisher, no sample, a refused trajectory:
:func:`~marionette_control.tracking.execution.no_trajectory_reason`); stop deactivates (and clears a run fault
when inactive). ``autostart`` configures and activates at start-up, and activates whenever a trajectory is taken
while inactive (the optimizer's first result, say).

Trajectories (never retargeted while tracking)
----------------------------------------------
From ``trajectory_file`` (at configure and whenever the parameter is set) or the optimizer's topic: each
is checked (model name, hash and names, gains and the command delay they were designed for) and staged;
a refused one is logged and reported, and nothing changes. A staged trajectory is taken only while the
controller is not tracking and only if it starts where the arm is (the start tolerance); while tracking
it waits until tracking ends, or until a client calls ``~/switch_trajectory`` (std_srvs/Trigger), which
takes it at the next tick if it starts where the arm is, keeping the commands in flight. Staged, taken,
switched and refused trajectories are logged and counted in /diagnostics (``trajectory_staged``,
``trajectory_event``, ``trajectories.<event>``).

Plans (receding-horizon re-planning, docs/mpc.md)
-------------------------------------------------
``plan_topic`` (marionette_interfaces/Plan, from ``marionette_mpc``): each plan is a window of the
trajectory being tracked for the steps start … end of the current run; it is offered to the core
(:meth:`~marionette_control.tracking.controller.ControllerCore.offer_plan`), which schedules it for
tick start − d and takes it there if it starts at the state predicted for that step — the same switch
mechanism as ``~/switch_trajectory``, without re-indexing the run. Refusals (late, another run or
model, gains for another delay, off the predicted state, superseded, not tracking) are logged
(throttled) and counted by reason in /diagnostics (``plans.*``, ``plan_last_rejection``); the run, the
plan in effect and the counts are in every ``~/tracking`` message.

Graph (topic names relative to the node's namespace)
-----------------------------------------------------
subscribes
    ``joint_states_topic`` (sensor_msgs/JointState, sensor-data QoS) — measured configurations,
    mapped onto the model by *name* (``hardware.joint_names`` of the model file), so the
    order of names in a message does not matter; taken serialized, and only the stamp, names and
    positions are read: a plain sample in one native call with its plausibility checks, and an
    ordinary tick with it (the core's tick path, :mod:`marionette_control.tracking.controller`), any other by
    :class:`~marionette_control.tracking.joint_states.JointStateParser` and the Python checks (rclpy's
    conversion into a message object cost more than the tracking law);
    ``trajectory_topic`` (marionette_interfaces/TrackedTrajectory, reliable + transient local,
    depth 1) — the optimizer's result; ``plan_topic`` (marionette_interfaces/Plan, reliable, depth 10) —
    re-optimized windows of it; ``/clock`` under ``use_sim_time``.
publishes
    ``command_topic`` (std_msgs/Float64MultiArray, reliable, depth 10) — ros2_control's forward
    position controller convention: ``data`` = the next kinematic configurations ρ in the order
    of ``command_joints`` (hardware names; default [carriage, string_length], as the
    simulator's); with ``command_delay_steps`` = d the command answering the joint state of
    cycle k is the input of step k + d; only while active; with ``command_interface``
    forward_position (the default);
    ``trajectory_command_topic`` (trajectory_msgs/JointTrajectory, reliable, depth 10) instead with
    ``command_interface`` joint_trajectory — ros2_control's joint_trajectory_controller convention: a tick's command
    and the next ``command_lookahead`` setpoints (:mod:`marionette_control.tracking.lookahead`: the plan's
    feed-forward with the feedback correction continued), positions only, ``joint_names`` = ``command_joints``,
    header stamp = the joint state's, point i at time_from_start (d + 1 + i)·Δt (when the drives are to be there);
    a hold is a trajectory without points (joint_trajectory_controller's stop: the drives, which may be ahead of the
    last command on its points, brake to a stop where they are). The receiving side samples the latest trajectory at
    every cycle, so a late or lost command leaves the drives following the previous one's next points
    (docs/tracking.md, "Commands that carry the next setpoints");
    ``~/tracking`` (marionette_interfaces/TrackingState, reliable) — one message per tick: header
    stamp = the joint state's, tick k, x_d(k), x̂_k and their difference with the state names, the
    command as sent with its joint names, compute time, active faults, the run, the plan in effect and
    the plans' counts; only while active;
    ``/diagnostics`` (diagnostic_msgs/DiagnosticArray) — one status "marionette_controller:
    tracking" every ``diagnostics_period`` (while joint states arrive, after the command of the first
    sample past it: building the message never delays a command) and when a fault is raised or cleared
    or a trajectory event happens (at most every 0.1 s): lifecycle state, tracking state, every active fault kind
    with its message (``faults.active``, ``fault.<kind>``) and the count of every kind raised
    (``faults.<kind>``), trajectories, goal, tracking error, estimate, per-tick compute time,
    missed ticks, counters.
services, actions
    ``~/start``, ``~/stop``, ``~/switch_trajectory`` (std_srvs/Trigger) and the lifecycle services;
    ``~/execute`` (marionette_interfaces/action/ExecuteMotion, below); the optimizer's action
    (``execute.optimizer_action``) as a client.

~/execute (control_msgs/FollowJointTrajectory's model; the rules: :mod:`marionette_control.tracking.execution`)
---------------------------------------------------------------------------------------------------------------
A goal is admitted by ``execute.concurrency`` (a second one rejected, or queued up to ``execute.queue_size``; never
retargeting the one that runs), then in turn: configured if needed (refused while a run of its own, ~/start or
autostart, is active), its trajectory checked (a goal's TrackedTrajectory) or optimized through the optimizer's
action (feedback forwarded), checked against the arm (the start tolerance), taken and started (activate); every
tick of its run is measured and judged (:class:`~marionette_control.tracking.execution.Execution`), a feedback
message goes out per ``execute.feedback_ticks`` ticks; its end (its tolerances, the core's, a cancel, a stop)
deactivates (hold) and the result follows. Cancel holds at once. A goal that cannot run is accepted and ended with
its error code and the reason (a rejected goal could carry none). The waiting (the queue, the optimization, the
run) is done by coroutines in a reentrant callback group, so the ticks go on meanwhile.

Times: the watchdog runs on the node's ROS clock (it follows ``/clock`` when
``use_sim_time`` is set); sample ages compare joint-state stamps with that clock.
Under ``use_sim_time`` that clock reads 0 until the first ``/clock`` message arrives;
joint states that arrive before it (another topic, discovered and delivered on its
own) cannot be judged, so they are skipped and counted (``samples_before_clock`` in
/diagnostics), not reported as ``future_stamp``. Diagnostics and log throttling use the
steady clock, so they continue while a simulation clock is paused.

Tick path: the joint-state callback reads the clock, parses the sample, runs the core and
publishes the command first; ~/tracking, log lines and diagnostics follow. Configuring and
activating move everything allocated so far out of the garbage collector's reach
(``gc.freeze``) so a collection during a tick stays short. The process stops on SIGINT/SIGTERM
with status 0 (:mod:`marionette_control.nodes.process`).

Parameters are listed in :data:`marionette_control.tracking.controller_options.PARAMS` and
:func:`~marionette_control.tracking.controller_options.tolerance_params` (each with its description) and in
``config/controller.yaml``. They are validated when set (a ``trajectory_file`` that would be
refused is refused as a parameter, with the reason) and act only once accepted (post-set callback).
"""

from __future__ import annotations

import gc
import os
import sys
import time
from array import array
from typing import Optional

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import SetParametersResult
from rclpy.action import ActionClient, ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.executors import SingleThreadedExecutor
from rclpy.experimental import EventsExecutor
from rclpy.lifecycle import LifecycleState, TransitionCallbackReturn
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rclpy.serialization import deserialize_message
from rclpy.task import Future
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from marionette_interfaces.action import ExecuteMotion
from marionette_interfaces.action import OptimizeTrajectory as OptimizeAction
from marionette_interfaces.msg import ConstraintReport, Plan, TrackedTrajectory, TrackingState
from marionette_control.model.yaml_model import load_packaged_model
from marionette_control.model.joint_map import JointMap
from marionette_control.model.limits import from_description
from marionette_control.nodes.convert import (command_trajectory_bytes, duration_s, execution_feedback,
                                              execution_result, multi_array_bytes, plan_from_msg, stamp_ns,
                                              trajectory_from_msg)
from marionette_control.nodes.lifecycle import SUCCESS, ManagedNode, logged_transition
from marionette_control.nodes.names import status_name
from marionette_control.nodes.node_time import NodeTime
from marionette_control.nodes.params import declare
from marionette_control.nodes.process import run_node, set_realtime_priority
from marionette_control.parameters import ParameterError
from marionette_control.tracking import execution as E
from marionette_control.tracking.controller import ERROR, OK, WARN, ControllerCore, TickResult, core_from_description
from marionette_control.tracking.joint_states import NS, JointStateParser
from marionette_control.tracking.controller_options import (PARAMS, command_permutation, core_values,
                                                 tolerance_params)
from marionette_control.trajectory import Trajectory, TrajectoryError

NODE_NAME = "marionette_controller"
DIAGNOSTICS_MIN_INTERVAL = 0.1  # s between event-driven diagnostics messages


RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
#: the optimizer's result topic: the latest trajectory, kept for late subscribers
LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)


def freeze_garbage() -> None:
    """Moves everything allocated so far (rclpy, numpy, the model, a trajectory and its filter) out of the garbage
    collector's reach (``gc.freeze``): a full collection then walks only what was allocated since instead of every
    object of the process (~50 000 objects, 9-17 ms here), so one that falls into a tick stays short. Called when
    the node is built, configured and activated: never on the tick path."""
    gc.collect()
    gc.freeze()


class ControllerNode(ManagedNode):
    """The ROS adapter: lifecycle transitions, messages ⇄ ControllerCore (see the module docstring)."""

    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        self.core: Optional[ControllerCore] = None
        self._checked_file: Optional[tuple[str, Trajectory]] = None
        # added before declare: rclpy runs the latest-added on-set callback first, so declare's checks of type,
        # range and read-only come first and this one judges only well-formed values
        self.add_on_set_parameters_callback(self._check_trajectory_file)
        self.p = declare(self, PARAMS, on_change=self._on_param)
        self._active = False
        self._taken_seen = 0
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", RELIABLE)
        self._steady = Clock(clock_type=ClockType.STEADY_TIME)
        self._diagnostics_due = False
        self.create_timer(self.p["diagnostics_period"], self._on_diagnostics_timer, clock=self._steady)
        # what waits (~/start for the latched trajectory, ~/execute goals) runs in this group: a waiting coroutine
        # holds its group, and the joint states, trajectories and timers it waits for are in the default one
        self._waiting = ReentrantCallbackGroup()
        self.create_service(Trigger, "~/start", self._on_start, callback_group=self._waiting)
        self.create_service(Trigger, "~/stop", self._on_stop)
        self.create_service(Trigger, "~/switch_trajectory", self._on_switch)
        # trajectories from the unconfigured state on: the optimizer's latched sample arrives whenever discovery
        # brings it, and configure stages the latest one (a start right after an optimization finds it)
        self._trajectory_sub = self.create_subscription(TrackedTrajectory, self.p["trajectory_topic"],
                                                        self._on_trajectory_msg, LATCHED)
        self._trajectory_msg: Optional[TrackedTrajectory] = None
        self._trajectory_msgs = 0
        self._waited = 0.0
        self._start_goals()
        self._last_diag = 0.0
        self._last_log: dict[str, float] = {}
        self._time = NodeTime(self)
        self.samples_before_clock = 0
        self._start_up(self.p["autostart"], on_inactive="not tracking yet; it activates when a trajectory is taken",
                       waiting="configure and activate it (lifecycle services) or call ~/start")

    # ------------------------------------------------------------------------------ lifecycle transitions

    @logged_transition
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            self._configure()
        except ParameterError as e:
            self._release()
            return self._done(f"configure failed: {e}", ok=False, level="error")
        freeze_garbage()
        tr = self.core.tracking
        return self._done(f"configured: model '{self.model.name}' (hash {self.model.hash}); joint states on "
                          f"{self.resolve_topic_name(self.p['joint_states_topic'])}, commands "
                          f"[{', '.join(self.command_joint_names())}] on "
                          f"{self.resolve_topic_name(self.p['command_topic'])}; "
                          + (f"trajectory {self.core.trajectory_source} ({tr.N} steps)" if tr else "no trajectory yet"))

    def _configure(self) -> None:
        """Model, core, per-joint tolerances, publishers, subscriptions, watchdog, trajectory file; raises
        ParameterError naming the parameter that does not work."""
        p = self.p
        try:
            desc = load_packaged_model(p["model_file"])
        except (OSError, ValueError) as e:
            raise ParameterError(f"parameter 'model_file': {e}") from None
        self.model = desc.model
        self.joints = JointMap.of(desc.model, desc.hardware_joints)
        new = [spec for spec in tolerance_params(desc) if not self.has_parameter(spec.name)]
        if new:  # (read-only: declared once, at the first configure, from the model file's hardware joints)
            p.update(declare(self, new))
        core = core_from_description(desc, core_values(p))
        self._perm = command_permutation(self.model, desc.hardware_joints, list(p["command_joints"]))
        # the command's data is u itself when command_joints lists the inputs in model order (the default)
        self._perm_is_identity = self._perm.tolist() == list(range(self.model.nU))
        self._command_names = self.command_joint_names()
        self.core = core
        self._taken_seen = 0
        self._trajectory_commands = p["command_interface"] == "joint_trajectory"
        self._cmd_pub = self._keep(self.destroy_lifecycle_publisher, self.create_lifecycle_publisher(
            *((JointTrajectory, p["trajectory_command_topic"]) if self._trajectory_commands
              else (Float64MultiArray, p["command_topic"])), RELIABLE))
        self._track_pub = self._keep(self.destroy_lifecycle_publisher,
                                     self.create_lifecycle_publisher(TrackingState, "~/tracking", RELIABLE))
        # raw: the callback gets the serialized message and reads what it needs (the core's tick path, else
        # JointStateParser)
        self._keep(self.destroy_subscription, self.create_subscription(
            JointState, p["joint_states_topic"], self._on_joint_state, qos_profile_sensor_data, raw=True))
        self._parse_joint_state = JointStateParser(lambda data: deserialize_message(data, JointState)).parse
        self._limits = from_description(desc)
        if p["plan_topic"]:
            self._plan_sub = self._keep(self.destroy_subscription, self.create_subscription(
                Plan, p["plan_topic"], self._on_plan, RELIABLE))
        self._keep(self.destroy_timer, self.create_timer(p["watchdog_period"], self._on_watchdog))
        # reused messages (the tick path assigns data and publishes)
        self._sent = np.zeros(0)  # the last command as sent (command_joints order)
        self._track_msg = TrackingState(state_names=list(self.model.state_names),
                                        command_joints=self.command_joint_names())
        if p["trajectory_file"]:
            self._load_file(p["trajectory_file"])
        if self._trajectory_msg is not None:  # the topic's latest, received before configure (or a cleanup)
            self._stage_msg(self._trajectory_msg)

    def _release(self) -> None:
        """Destroys what configure created; the node is back to what it was unconfigured."""
        self._release_entities()
        self.core = None
        self._active = False

    @logged_transition
    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        core = self.core
        if core.tracking is None and core.staged is None:
            topic = self._trajectory_sub.topic_name
            why = E.no_trajectory_reason(topic, self.count_publishers(topic), self._trajectory_msgs,
                                         core.trajectory_error, self._waited)
            return self._done(f"activation refused: {why}", ok=False, level="warning")
        # the lifecycle publishers (commands, ~/tracking) before the run: a sample may tick in another thread (the
        # start service's callback group is reentrant) as soon as the core runs, and an inactive publisher would
        # drop its command while the core counts it as sent
        freeze_garbage()
        super().on_activate(state)
        ok, message = core.start()
        if not ok:
            super().on_deactivate(state)
            return self._done(f"activation refused: {message}", ok=False, level="warning")
        self._active = True
        return self._done(f"active: {message}")

    @logged_transition
    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        message = self._hold_and_stop()
        super().on_deactivate(state)  # silences the lifecycle publishers
        return self._done(f"inactive: {message}")

    def _hold_and_stop(self) -> str:
        """Stops tracking (the hold command, while the outputs are still enabled) and ends a goal whose run it was;
        what happened."""
        core = self.core
        message = self._stop_run()
        if self._running is not None:
            aborted = core is not None and core.aborted
            self._end_goal(*E.run_outcome(aborted, core.active_faults if core is not None else {},
                                          self._running.cancel_requested))
        return message

    def _stop_run(self) -> str:
        """Stops tracking (sending the hold command while the outputs are still enabled); what happened."""
        self._active = False
        if self.core is None or not self.core.running:
            return "not tracking (nothing to hold)"
        _, message, hold = self.core.stop()
        if hold is not None:
            self._send(hold)
        return message

    @logged_transition
    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        super().on_cleanup(state)
        self._release()
        return self._done("unconfigured: released the model, the trajectory, subscriptions and publishers")

    @logged_transition
    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        message = self._hold_and_stop() if self._active else "not tracking"
        self._release()
        return self._done(f"shut down ({message})")

    @logged_transition
    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._hold_and_stop()
        self._release()
        return self._done("error in a transition: released everything (unconfigured)", ok=True, level="error")

    # ------------------------------------------------------------------------------ tick path

    def _on_joint_state(self, data: bytes) -> None:
        """A serialized JointState: the tick path. What the command does not need (tracking, logs,
        diagnostics) comes after its publication."""
        now = self._time.now_ns()
        if now == 0 and self._waiting_for_clock():
            return
        core = self.core
        if core is None:  # a sample the executor had taken before cleanup destroyed the subscription
            return
        res = core.on_serialized(data, now, self._parse_joint_state)
        if res.command is not None:
            self._send(res.command, res.lookahead, res.stamp_ns)
        if res.kind == "tick" and self.p["publish_tracking"]:
            self._publish_tracking(res)
        if res.kind == "tick" and self._running is not None:
            self._goal_tick(res)
        if res.new_fault or res.recovered:
            self._report(res)
        if res.event:
            self._trajectory_event(res.event)
        if res.plan_event:
            self._plan_refused(res.plan_event)
        if self._active and not core.running:  # the run ended on its own (a tolerance aborted it)
            self.trigger_deactivate()
        if self._diagnostics_due:
            self._diagnostics_due = False
            self._publish_diagnostics()

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

    def _send(self, u: np.ndarray, lookahead: Optional[np.ndarray] = None, stamp: int = 0) -> None:
        """Publishes u (nU,) as the command, in command_joints order; with ``command_interface`` joint_trajectory
        with the next inputs ``lookahead`` (L, nU) (a tick's: points at (d + 1 + i)·Δt after the stamp of its joint
        state ``stamp`` [ns], where the drives are to be) or, without, as a trajectory without points (a hold: the
        drives stop where they are, which may be past u on the last command's points)."""
        sent = u if self._perm_is_identity else u[self._perm]
        if not self._trajectory_commands:
            self._cmd_pub.publish(multi_array_bytes(sent))  # serialized: rclpy publishes the bytes as they are
        elif lookahead is None:   # a hold: joint_trajectory_controller's stop (the drives may be ahead of u)
            self._cmd_pub.publish(command_trajectory_bytes(self._command_names, 0, 0, 0.0, np.zeros((0, len(sent)))))
        else:
            points = np.vstack([u, lookahead])[:, self._perm]
            self._cmd_pub.publish(command_trajectory_bytes(self._command_names, stamp, self.core.delay + 1,
                                                           self.core.dt, points))
        # The command's receiver first: the middleware has just woken its thread, which Linux tends to queue on
        # this CPU, behind this thread's work that follows (~/tracking, logs, diagnostics). Measured across
        # processes (benchmark group ros): the command's arrival 0.1 ms sooner at the median, 0.2 ms at p99.
        os.sched_yield()
        self._sent = sent

    def _publish_tracking(self, res: TickResult) -> None:
        m = self._track_msg
        m.header.stamp.sec, m.header.stamp.nanosec = divmod(res.stamp_ns, NS)
        m.tick, m.num_steps, m.missed_ticks = res.k, self.core.tracking.N, res.missed
        dx = res.x_hat - res.x_ref
        m.desired = array("d", res.x_ref.tobytes())
        m.estimated = array("d", res.x_hat.tobytes())
        m.error = array("d", dx.tobytes())
        m.error_norm = float(np.sqrt(dx @ dx))
        m.command = array("d", self._sent.tobytes())  # as sent
        m.compute_time = res.compute_ns / NS
        core = self.core
        m.active_faults = list(core.active_faults)
        active = core.tracking.law.active
        m.run, m.plan = core.run, 0 if active is None else active.sequence
        m.plan_switches = core.plan_counts["switched"]
        m.plan_rejections = sum(core.plan_rejections.values())
        self._track_pub.publish(m)

    def _on_watchdog(self) -> None:
        core = self.core
        if core is None:  # a period the executor had taken before cleanup destroyed the timer
            return
        res = core.on_watchdog(self._time.now_ns())
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

    def _on_diagnostics_timer(self) -> None:
        """Every ``diagnostics_period``: the next joint state's callback publishes /diagnostics after its command,
        so that they never delay one (a message takes ~0.5 ms to build on this project's machines: on its own
        timer it would hold up every sample it met); a whole period without a joint state (idle, stale data)
        publishes them here."""
        if self._diagnostics_due:
            self._publish_diagnostics()
        self._diagnostics_due = True

    def _publish_diagnostics(self) -> None:
        state = self.lifecycle_state
        if self.core is None:
            level, message, values = OK, {"unconfigured": "unconfigured: configure (lifecycle) or call ~/start",
                                          "finalized": "shut down"}.get(state, state), []
        else:
            level, message, values = self.core.status()
        if self._transition_failed:
            level = max(level, ERROR if state == "unconfigured" else WARN)
            message += f" ({self.transition_message})"
        values = [("lifecycle_state", state), ("transition", self.transition_message)] + values
        if self.samples_before_clock:
            values.append(("samples_before_clock", str(self.samples_before_clock)))
        st = DiagnosticStatus(level=bytes([level]), name=status_name(self, "tracking"), message=message,
                              hardware_id=self.model.name if self.core is not None else "",
                              values=[KeyValue(key=k, value=v) for k, v in values])
        arr = DiagnosticArray(status=[st])
        arr.header.stamp = self.get_clock().now().to_msg()
        self._diag_pub.publish(arr)
        self._last_diag = time.monotonic()

    # ------------------------------------------------------------------------------ trajectories

    def _stage(self, traj: Trajectory, source: str) -> None:
        try:
            message = self.core.load_trajectory(traj, source)
        except (TrajectoryError, ValueError) as e:
            self.get_logger().error(f"refused trajectory: {e}")
            self._publish_diagnostics()
            return
        if self.core.staged is not None and self.core.running:
            message += " (~/switch_trajectory takes it now)"
        self._trajectory_event(message)

    def _trajectory_event(self, message: str) -> None:
        """Logs a trajectory event, publishes diagnostics and, with autostart, activates on a trajectory taken while
        inactive."""
        self.get_logger().info(message)
        taken = self.core.trajectory_counts["taken"]
        if taken != self._taken_seen:
            self._taken_seen = taken
            if self.p["autostart"] and self.lifecycle_state == "inactive":
                self.trigger_activate()
        self._publish_diagnostics()

    def _load_file(self, path: str) -> None:
        try:
            traj = Trajectory.load(path)
        except TrajectoryError as e:
            self.core.refuse(path, e)
            self.get_logger().error(f"refused trajectory: {e}")
            self._publish_diagnostics()
            return
        self._stage(traj, path)

    def _on_trajectory_msg(self, msg) -> None:
        """The optimizer's topic: kept (configure stages the latest) and, configured, staged now; the trajectory a
        goal of ~/execute had optimized is that goal's, not a new one."""
        self._trajectory_msgs += 1
        self._trajectory_msg = msg
        if self.core is None:
            return
        if self._goal_states is not None and np.array_equal(np.asarray(msg.states), self._goal_states):
            self.get_logger().info(f"the trajectory on {self._trajectory_sub.topic_name} is the one ~/execute had "
                                   "optimized for its goal: not staged again")
            return
        self._stage_msg(msg)

    def _stage_msg(self, msg) -> None:
        source = f"from {self._trajectory_sub.topic_name}"
        try:
            traj = trajectory_from_msg(msg)
        except (TrajectoryError, ValueError) as e:
            self.core.refuse(source, e)
            self.get_logger().error(f"refused trajectory {source}: {e}")
            self._publish_diagnostics()
            return
        self._stage(traj, source)

    def _on_plan(self, msg) -> None:
        """A plan from the planner: offered to the core (refusals logged, throttled, and counted)."""
        if self.core is None:
            return
        try:
            plan = plan_from_msg(msg)
        except (TrajectoryError, ValueError) as e:
            ok, message = self.core.refuse_plan(f"plan {msg.sequence} from {self._plan_sub.topic_name}: {e}")
        else:
            ok, message = self.core.offer_plan(plan)
        if not ok:
            self._plan_refused(message)

    def _plan_refused(self, message: str) -> None:
        now = time.monotonic()
        if now - self._last_log.get("plan", -1e9) >= self.p["fault_log_throttle"]:
            self._last_log["plan"] = now
            self.get_logger().warning(f"plan refused ({sum(self.core.plan_rejections.values())} so far): {message}")
        if now - self._last_diag >= DIAGNOSTICS_MIN_INTERVAL:
            self._publish_diagnostics()

    # ------------------------------------------------------------------------------ parameters

    def _check_trajectory_file(self, params) -> SetParametersResult:
        """On-set: refuses a ``trajectory_file`` that would be refused (reason = why). Configured, the file is
        checked against the model; unconfigured, only that it is a trajectory file (configure checks the rest).
        The start-up value is judged at configure, where a refusal is reported without ending the node."""
        for prm in params:
            if prm.name != "trajectory_file" or not prm.value or not hasattr(self, "p"):
                continue
            try:
                traj = Trajectory.load(prm.value)
                if self.core is not None:
                    self.core.check_trajectory(traj)
            except (TrajectoryError, ValueError, TypeError) as e:
                return SetParametersResult(successful=False, reason=f"parameter 'trajectory_file': {e}")
            self._checked_file = (prm.value, traj)
        return SetParametersResult(successful=True)

    def _on_param(self, name, value) -> None:
        """Post-set: what an accepted change does (the trajectory is staged like any other)."""
        if self.core is None:
            return  # read at configure
        if name == "trajectory_file" and value:
            checked, self._checked_file = self._checked_file, None
            if checked is not None and checked[0] == value:
                self._stage(checked[1], value)
            else:
                self._load_file(value)
        elif name == "state_timeout":
            self.core.set_timing(state_timeout=value)
        elif name == "stamp_tolerance":
            self.core.set_timing(stamp_tolerance=value)

    # ------------------------------------------------------------------------------ services

    async def _on_start(self, request, response):
        """Convenience over the transitions: configure (when unconfigured) and activate; without a trajectory yet,
        waits up to ``trajectory_wait`` for the optimizer's latched one first."""
        state = self.lifecycle_state
        if state == "active":
            response.success, response.message = False, "already running; stop first"
        elif state not in ("unconfigured", "inactive"):
            response.success, response.message = False, f"cannot start from lifecycle state '{state}'"
        elif self._queue.ids:
            response.success, response.message = False, "a goal of ~/execute is being executed; cancel it first"
        elif state == "unconfigured" and self.trigger_configure() != SUCCESS:
            response.success, response.message = False, self.transition_message
        else:
            await self._trajectory_ready()
            if self.lifecycle_state != "inactive":  # (the wait let other requests in)
                response.success, response.message = False, f"lifecycle state '{self.lifecycle_state}' meanwhile"
                return response
            response.success = self.trigger_activate() == SUCCESS
            response.message = self.transition_message
        return response

    def _has_trajectory(self) -> bool:
        core = self.core
        return core is not None and (core.tracking is not None or core.staged is not None)

    async def _trajectory_ready(self) -> None:
        """Configured without a trajectory and none refused: waits up to ``trajectory_wait`` s until one is taken or
        staged, or a trajectory message arrives and is refused (``_waited``: how long it waited)."""
        self._waited = 0.0
        if self._has_trajectory() or self.core.trajectory_error or self.p["trajectory_wait"] <= 0.0:
            return
        received, t0 = self._trajectory_msgs, time.monotonic()
        await self._until(lambda: self.core is None or self._has_trajectory() or self._trajectory_msgs > received,
                          self.p["trajectory_wait"])
        self._waited = round(time.monotonic() - t0, 1)

    async def _until(self, predicate, timeout: Optional[float], poll: float = 0.02) -> bool:
        """Waits (without blocking the executor) until ``predicate()`` or ``timeout`` s (None: no limit) on the steady
        clock; whether it came true."""
        end = None if timeout is None else time.monotonic() + timeout
        while not predicate():
            if end is not None and time.monotonic() >= end:
                return False
            await self._sleep(poll)
        return True

    def _sleep(self, seconds: float) -> Future:
        """A future done after ``seconds`` (a one-shot timer on the steady clock: it runs under use_sim_time too)."""
        done = Future()
        timer = None

        def fire():
            self.destroy_timer(timer)
            if not done.done():
                done.set_result(True)
        timer = self.create_timer(seconds, fire, callback_group=self._waiting, clock=self._steady)
        return done

    def _on_stop(self, request, response):
        """Convenience over the transitions: deactivate (holding); inactive, clears a run fault (an aborted run)."""
        response.success = True
        if self.lifecycle_state == "active":
            self.trigger_deactivate()
            response.message = self.transition_message
        elif self.core is not None:
            response.message = self.core.stop()[1]
            self._publish_diagnostics()
        else:
            response.message = f"was not running (lifecycle state '{self.lifecycle_state}')"
        return response

    def _on_switch(self, request, response):
        """Takes the staged trajectory (ControllerCore.switch_trajectory): now when idle, at the next tick when
        tracking; only if it starts where the arm is."""
        if self.core is None:
            response.success, response.message = False, f"not configured (lifecycle state '{self.lifecycle_state}')"
            return response
        response.success, response.message = self.core.switch_trajectory()
        if not response.success:
            self.get_logger().warning(response.message)
            self._publish_diagnostics()
        else:
            self._trajectory_event(response.message)
        return response

    # ------------------------------------------------------------------------------ ~/execute

    def _start_goals(self) -> None:
        """The ~/execute action server and the optimizer's action client (:mod:`marionette_control.tracking.
        execution` has the rules; the callbacks are in the waiting group)."""
        p = self.p
        self._queue = E.GoalQueue(p["execute.concurrency"], p["execute.queue_size"])
        self._goals: dict = {}                 # goal id -> _Goal
        self._running: Optional[_Goal] = None  # the goal whose run the core tracks
        self._goal_states: Optional[np.ndarray] = None  # the states of the last trajectory a goal had optimized
        self._optimizer = ActionClient(self, OptimizeAction, p["execute.optimizer_action"],
                                       callback_group=self._waiting)
        self._execute_server = ActionServer(self, ExecuteMotion, "~/execute", execute_callback=self._execute,
                                            goal_callback=self._on_goal, cancel_callback=self._on_cancel,
                                            callback_group=self._waiting)

    def _on_goal(self, request) -> GoalResponse:
        """Admission (``execute.concurrency``): a goal beyond what the policy admits is rejected (logged); every
        check that can say what is wrong runs after acceptance, so its result carries the reason."""
        key = id(request)  # the goal handle's request is this object (rclpy), kept alive by its _Goal
        why = self._queue.admit(key)
        if why is not None:
            self.get_logger().warning(f"~/execute goal rejected: {why}")
            return GoalResponse.REJECT
        self._goals[key] = _Goal(key, request, E.Execution([], self.p["execute.feedback_ticks"]))
        return GoalResponse.ACCEPT

    def _on_cancel(self, handle) -> CancelResponse:
        """Cancel: a running goal holds at once (deactivate: the hold command), an optimization is canceled, a
        queued goal leaves the queue; each answers CANCELED."""
        goal = self._goal_of(handle)
        if goal is None:
            return CancelResponse.REJECT
        goal.cancel_requested = True
        if goal is self._running and self.lifecycle_state == "active":
            self.trigger_deactivate()
        elif goal.optimization is not None:
            goal.optimization.cancel_goal_async()
        return CancelResponse.ACCEPT

    def _goal_of(self, handle) -> Optional["_Goal"]:
        return next((g for g in self._goals.values() if g.handle is handle), None)

    async def _execute(self, handle):
        """One goal (module docstring of :mod:`marionette_control.tracking.execution`): admitted, its turn, its
        trajectory (optimized if asked), the start, the run, the result."""
        goal = self._goals[id(handle.request)]
        goal.handle, goal.accepted = handle, time.monotonic()
        try:
            await self._run_goal(handle, goal)
        except Exception as e:  # answered, never swallowed: the client gets the reason
            self.get_logger().error(f"~/execute goal failed: {type(e).__name__}: {e}")
            goal.execution.finish(E.ABORTED, f"internal error: {type(e).__name__}: {e}")
            if goal is self._running:
                self.trigger_deactivate()
        finally:
            self._queue.release(goal.key)
            self._goals.pop(goal.key, None)
            if self._running is goal:
                self._running = None
        ex = goal.execution
        if ex.code is None:
            ex.finish(*E.run_outcome(False, {}, goal.cancel_requested))
        core = self.core
        system = core.tracking.system if core is not None and core.tracking is not None else None
        result = execution_result(ex.result(self._limits if core is not None else None, system),
                                  ExecuteMotion.Result, ConstraintReport)
        if ex.code == E.SUCCESSFUL:
            handle.succeed()
        elif ex.code == E.CANCELED and handle.is_cancel_requested:
            handle.canceled()
        else:
            handle.abort()
        text = f"~/execute goal ended: {E.CODES[ex.code]}" + (f": {ex.message}" if ex.message else "")
        if ex.code == E.SUCCESSFUL:  # (rclpy refuses different severities from one call site)
            self.get_logger().info(text)
        else:
            self.get_logger().warning(text)
        return result

    async def _run_goal(self, handle, goal: "_Goal") -> None:
        request = handle.request
        self._feedback(goal)
        await self._until(lambda: self._queue.first(goal.key) or goal.cancel_requested, None)
        if goal.cancel_requested:
            return goal.execution.finish(E.CANCELED, "canceled while queued")
        try:
            source = E.goal_source(request.trajectory.num_steps > 0, request.motion_name,
                                   len(request.desired.points) > 0)
            if self.core is None and self.trigger_configure() != SUCCESS:
                raise E.GoalError(f"the controller could not be configured: {self.transition_message}", E.NOT_READY)
            # the arm angles' joint names are the model file's, known once configured
            goal.execution = E.Execution(self.joints.hardware_names[:self.model.nd], self.p["execute.feedback_ticks"])
            # configured a moment ago: the first joint state comes once discovery has matched the driver
            await self._until(lambda: self.core is None or self.core.intake.latest is not None,
                              self.p["trajectory_wait"])
            if self.lifecycle_state != "inactive":
                raise E.GoalError(f"the controller is {self.lifecycle_state} (tracking a run of its own: ~/start or "
                                  "autostart); stop it first", E.NOT_READY)
            core = self.core
            tolerances = E.goal_tolerances(
                core.tolerances, self.joints.hardware_names,
                [(t.name, t.position) for t in request.path_tolerance],
                [(t.name, t.position) for t in request.goal_tolerance], duration_s(request.goal_time_tolerance))
            if source == "trajectory":
                trajectory, label = self._goal_trajectory(request.trajectory), "the goal's trajectory"
            else:
                trajectory = await self._optimize(goal, request)
                label = f"motion '{request.motion_name}'" if request.motion_name else "the goal's desired motion"
        except E.GoalError as e:
            return goal.execution.finish(e.code, str(e))
        if trajectory is None or goal.execution.done:
            return
        self._start_goal(goal, trajectory, tolerances, label)
        if not goal.execution.done:
            await goal.ended

    def _goal_trajectory(self, msg) -> Trajectory:
        """A goal's TrackedTrajectory, checked field by field and as the topic's are (GoalError)."""
        E.check_trajectory_fields(self.model, msg.model_id, msg.model_hash, msg.dt, stamp_ns(msg.header.stamp),
                                  {"states": msg.states, "inputs": msg.inputs, "gains": msg.gains})
        try:
            trajectory = trajectory_from_msg(msg)
            self.core.check_trajectory(trajectory)
        except (TrajectoryError, ValueError) as e:
            raise E.GoalError(f"trajectory: {e}") from None
        return trajectory

    async def _optimize(self, goal: "_Goal", request) -> Optional[Trajectory]:
        """The goal's motion through the optimizer's action (phase optimizing; its feedback forwarded)."""
        ex = goal.execution
        ex.set_phase("optimizing")
        self._feedback(goal)
        name = self.resolve_service_name(self.p["execute.optimizer_action"])
        if not await self._until(self._optimizer.server_is_ready, self.p["trajectory_wait"]):
            raise E.GoalError(f"no optimizer action server {name} was discovered within {self.p['trajectory_wait']:g} "
                              "s (is marionette_optimizer running in this namespace?)", E.OPTIMIZATION_FAILED)
        order = OptimizeAction.Goal(motion_name=request.motion_name, desired=request.desired,
                                    model_id=self.model.name, options=request.options)
        sent = self._optimizer.send_goal_async(order, feedback_callback=lambda m: self._optimizer_feedback(goal, m))
        await sent
        optimization = sent.result()
        if not optimization.accepted:
            raise E.GoalError(f"{name} rejected the optimization (busy with another one: its concurrency policy)",
                              E.OPTIMIZATION_FAILED)
        goal.optimization = optimization
        answer = optimization.get_result_async()
        await answer
        goal.optimization = None
        result = answer.result().result
        if goal.cancel_requested:
            ex.finish(E.CANCELED, "canceled while optimizing")
            return None
        if not result.success:
            raise E.GoalError(f"the optimizer: {result.message}", E.OPTIMIZATION_FAILED)
        try:
            trajectory = trajectory_from_msg(result.trajectory)
            self.core.check_trajectory(trajectory)
        except (TrajectoryError, ValueError) as e:
            raise E.GoalError(f"the optimizer's trajectory cannot be tracked here: {e}", E.OPTIMIZATION_FAILED) \
                from None
        self._goal_states = np.asarray(result.trajectory.states)
        return trajectory

    def _start_goal(self, goal: "_Goal", trajectory: Trajectory, tolerances, label: str) -> None:
        """Takes the goal's trajectory and starts its run, or ends the goal saying why not."""
        core, ex = self.core, goal.execution
        if self.lifecycle_state != "inactive":
            return ex.finish(E.NOT_READY, f"the controller is {self.lifecycle_state}; stop it first")
        why = E.start_refusal(core.tolerances, core.intake.latest, trajectory)
        if why is not None:
            code = E.NOT_READY if core.intake.latest is None else E.START_TOLERANCE_VIOLATED
            return ex.finish(code, why)
        message = core.load_trajectory(trajectory, label)
        if core.tracking is None or core.tracking.trajectory is not trajectory:
            code = E.INVALID_GOAL if message.startswith("refused") else E.NOT_READY
            return ex.finish(code, f"the trajectory was not taken: {message}")
        self.get_logger().info(f"~/execute: {message}")
        self._taken_seen = core.trajectory_counts["taken"]  # (autostart starts nothing for it: the goal does)
        ex.begin(trajectory, tolerances, label, core.run + 1, core.delay, core.fault_counts)
        self._running = goal
        if self.trigger_activate() != SUCCESS:
            self._running = None
            return ex.finish(E.NOT_READY, self.transition_message)
        ex.run = core.run
        self._feedback(goal)

    def _goal_tick(self, res: TickResult) -> None:
        """A tick of the running goal's run: measured, judged, a feedback batch when due; the goal's own end (its
        tolerances) stops the run (hold)."""
        goal = self._running
        ex = goal.execution
        if ex.done:
            return
        goal.stamp = res.stamp_ns
        if ex.on_tick(res.k, self.core.intake.latest, res.command, res.x_hat):
            self._feedback(goal, ex.batch())
        if ex.done:
            self.trigger_deactivate()

    def _end_goal(self, code: int, message: str) -> None:
        """The running goal's run ended (the first end counts: a goal that ended itself keeps its outcome)."""
        goal, self._running = self._running, None
        goal.execution.finish(code, message)
        if self.core is not None:
            goal.execution.count_faults(self.core.fault_counts)
        goal.ended.set_result(True)

    def _feedback(self, goal: "_Goal", batch=None) -> None:
        if goal.handle is None:
            return
        ex = goal.execution
        msg = ExecuteMotion.Feedback(joint_names=ex.names, num_steps=ex.N if ex.trajectory is not None else 0,
                                     elapsed_s=time.monotonic() - goal.accepted)
        execution_feedback(msg, ex.phase, batch, goal.stamp)
        if self.core is not None:
            msg.active_faults = list(self.core.active_faults)
            law = self.core.tracking.law if self.core.tracking is not None else None
            msg.plan = 0 if law is None or law.active is None else law.active.sequence
        goal.handle.publish_feedback(msg)

    def _optimizer_feedback(self, goal: "_Goal", message) -> None:
        if goal.handle is None:
            return
        msg = ExecuteMotion.Feedback(phase=goal.execution.phase, joint_names=goal.execution.names,
                                     optimizer_iteration=message.feedback.iteration,
                                     optimizer_cost=message.feedback.cost,
                                     elapsed_s=time.monotonic() - goal.accepted)
        goal.handle.publish_feedback(msg)

    def command_joint_names(self) -> list[str]:
        """Hardware names of the command's data entries, in order."""
        kin = self.joints.kinematic_hardware_names
        return [kin[int(i) - self.model.nu] for i in self._perm]


class _Goal:
    """An admitted ~/execute goal: its key (the id of its request, which it keeps), Execution, action handle, the
    optimization it waits for, whether the client asked to cancel, when it was accepted, its last tick's stamp, and
    the future its run's end completes."""

    def __init__(self, key: int, request, execution: E.Execution):
        self.key, self.request, self.execution = key, request, execution
        self.handle = None
        self.optimization = None
        self.cancel_requested = False
        self.accepted = time.monotonic()
        self.stamp = 0
        self.ended = Future()  # done when its run ends


def make_executor(node):
    """The executor of the ``executor`` parameter."""
    return EventsExecutor() if node.p["executor"] == "events" else SingleThreadedExecutor()


def make_node() -> ControllerNode:
    """The node (configured and active with ``autostart``), then :func:`freeze_garbage` before the executor spins,
    so the pause delays no message."""
    node = ControllerNode()
    freeze_garbage()
    return node


def shutdown(node: ControllerNode) -> None:
    """When the process stops: the lifecycle shutdown (the hold command if tracking, then release), unless the
    node is finalized already or the context is gone."""
    if node.context.ok() and node.lifecycle_state in ("unconfigured", "inactive", "active"):
        node.trigger_shutdown()


def apply_realtime_priority(node, executor, below=()) -> None:
    """``realtime_priority``, once the executor's threads exist (after its first spin); the threads of kernel ids
    ``below`` one level lower (:func:`~marionette_control.nodes.process.set_realtime_priority`)."""
    priority = node.p["realtime_priority"]
    if priority:
        below = list(below)
        error = set_realtime_priority(priority, below)
        if error:
            node.get_logger().warning(f"realtime_priority: {error}; running with the default scheduler")
        else:
            lower = f", threads {below} at {max(1, priority - 1)}" if below else ""
            node.get_logger().info(f"realtime_priority: all threads SCHED_FIFO {priority}{lower}")


def main(args=None) -> int:
    """Runs the node until SIGINT/SIGTERM (:func:`marionette_control.nodes.process.run_node`)."""
    return run_node(NODE_NAME, make_node, make_executor, args, started=apply_realtime_priority, cleanup=shutdown)


if __name__ == "__main__":
    sys.exit(main())
