"""The controller's options and parameters: :class:`ControllerOptions` and the parameter specs they come from.

A controller parameter lives here and in ``config/controller.yaml`` only: :data:`PARAMS` lists every
parameter of the ``marionette_controller`` node with its default, description and range
(:class:`~marionette_control.parameters.ParamSpec`, free of ROS; ``nodes/controller.py`` declares them),
:func:`tolerance_params` the per-joint tolerances of a model file, and :func:`controller_options` turns
parameter values into the :class:`ControllerOptions` the core (:mod:`.controller`) is built with — for
the node, the bag replay and the offline tools alike. :func:`load_packaged_model` resolves the
``model_file`` parameter, :func:`command_permutation` the ``command_joints`` one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from marionette_control import validation
from marionette_control.model.joint_map import JointMap, JointMapError
from marionette_control.model.yaml_model import ModelDescription
from marionette_control.parameters import ParameterError, ParamSpec
from marionette_control.tracking.estimation import ESTIMATORS, EstimatorNoise
from marionette_control.tracking.lookahead import MAX_LOOKAHEAD
from marionette_control.tracking.plan_switch import SwitchTolerance
from marionette_control.tracking.quiet_feedback import QuietOptions
from marionette_control.tracking.sample_checks import PlausibilityOptions
from marionette_control.tracking.tolerances import default_tolerances


#: What a tick's command is: one setpoint (ros2_control's forward position controller) or a short trajectory
#: (its joint_trajectory_controller; :mod:`.lookahead`).
COMMAND_INTERFACES = ("forward_position", "joint_trajectory")

#: The longest command delay the controller compensates (steps).
MAX_DELAY_STEPS = 10


@dataclass
class ControllerOptions:
    """The controller's policy: timing, delay, estimator, feedback, checks and tolerances.

    state_timeout : s; an older joint state is stale (> 0)
    stamp_tolerance : fraction of Δt the spacing of a tick's samples may deviate, in [0, 0.5)
    command_delay_steps : d, steps between a joint state and the step its command moves (ros2_control: 1)
    estimator : "kalman" or "legendre" (:mod:`.estimation`)
    noise : EstimatorNoise of the Kalman filter
    feedback : False: feed-forward only (u = u_d(k+d)), to measure what the feedback adds
    plausibility : PlausibilityOptions
    tolerances : {"start"|"path"|"goal": {configuration name: tolerance}} overriding
        :func:`~.tolerances.default_tolerances` (0 = unchecked); goal_time : s
    buffer_size : samples kept to find a tick's predecessor (>= 2)
    stats_window : ticks over which compute-time statistics are reported
    switch_tolerance : how far a plan's first state may be from the predicted state at its first step
    tension_reserve : N above each string's minimum tension (the model file's ``min_tension``) the tension guard
        keeps the predicted tension (:mod:`.tension_guard`; >= 0)
    start_blend : s over which the feedback is faded in at a run's start (:mod:`.start_blend`; 0: none)
    feedback_acceleration : m/s² (rad/s²) the feedback may move a drive's commanded acceleration from the plan's
        (:mod:`.acceleration_budget`; 0: unbounded)
    anti_windup : the integral action is held for a tick after a command the budget, the guard or the clamp moved
        (:mod:`.integral_action`, "Anti-windup"); False: it integrates through saturation
    quiet : QuietOptions of the quiet feedback (:mod:`.quiet_feedback`: the feedback on the arm's own state lagged,
        stepped aside after a surprise; cutoff 0: off)
    command_interface : "forward_position" (a tick's command is one setpoint) or "joint_trajectory" (it carries
        ``command_lookahead`` next setpoints: :mod:`.lookahead`, ``TickResult.lookahead``)
    command_lookahead : points after the first a joint_trajectory command carries (1 … MAX_LOOKAHEAD)
    """

    state_timeout: float = 0.05
    stamp_tolerance: float = 0.1
    command_delay_steps: int = 1
    estimator: str = "kalman"
    noise: EstimatorNoise = field(default_factory=EstimatorNoise)
    feedback: bool = True
    plausibility: PlausibilityOptions = field(default_factory=PlausibilityOptions)
    tolerances: dict = field(default_factory=dict)
    goal_time: float = 1.0
    buffer_size: int = 64
    stats_window: int = 2048
    switch_tolerance: SwitchTolerance = field(default_factory=SwitchTolerance)
    tension_reserve: float = 0.1
    start_blend: float = 0.5
    feedback_acceleration: float = 0.0
    anti_windup: bool = True
    quiet: QuietOptions = field(default_factory=QuietOptions)
    command_interface: str = "forward_position"
    command_lookahead: int = 10

    def __post_init__(self):
        validation.nonnegative(self.tension_reserve, "tension_reserve (N)")
        validation.nonnegative(self.start_blend, "start_blend (s)")
        validation.nonnegative(self.feedback_acceleration, "feedback_acceleration (m/s^2)")
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"estimator must be one of {', '.join(ESTIMATORS)}, got {self.estimator!r}")
        validation.integer(self.command_delay_steps, "command_delay_steps", minimum=0, maximum=MAX_DELAY_STEPS)
        validation.integer(self.buffer_size, "buffer_size", minimum=2)
        if self.command_interface not in COMMAND_INTERFACES:
            raise ValueError(f"command_interface must be one of {', '.join(COMMAND_INTERFACES)}, got "
                             f"{self.command_interface!r}")
        validation.integer(self.command_lookahead, "command_lookahead", minimum=1, maximum=MAX_LOOKAHEAD)
        unknown = set(self.tolerances) - {"start", "path", "goal"}
        if unknown:
            raise ValueError(f"tolerances: unknown kind(s) {', '.join(sorted(unknown))} (start, path, goal)")


def _choice(*options):
    """A ParamSpec check: the value is one of ``options``."""
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
    ParamSpec("plan_topic", "marionette_mpc/plan", "marionette_interfaces/Plan topic of a receding-horizon planner "
              "(marionette_mpc): windows of the trajectory being tracked, taken at their first step (docs/mpc.md); "
              "empty: no plans", read_only=True),
    ParamSpec("joint_states_topic", "joint_states", "sensor_msgs/JointState topic (sensor-data QoS)",
              read_only=True),
    ParamSpec("command_topic", "forward_position_controller/commands",
              "std_msgs/Float64MultiArray command topic (ros2_control forward position controller; with "
              "command_interface forward_position)", read_only=True),
    ParamSpec("command_interface", ControllerOptions.command_interface, "What a command is: 'forward_position' "
              "(one setpoint per drive on command_topic, std_msgs/Float64MultiArray) or 'joint_trajectory' (the "
              "setpoint and the next command_lookahead ones, trajectory_msgs/JointTrajectory on trajectory_command_topic: a late or "
              "lost command leaves the drives following the previous one's next points; docs/tracking.md 'Commands "
              "that carry the next setpoints')", check=_choice(*COMMAND_INTERFACES), read_only=True),
    ParamSpec("command_lookahead", ControllerOptions.command_lookahead, "Setpoints after the first a joint_trajectory "
              "command carries: the command continued along the plan's feed-forward, within the drives' limits",
              minimum=1, maximum=MAX_LOOKAHEAD, read_only=True),
    ParamSpec("trajectory_command_topic", "joint_trajectory_controller/joint_trajectory",
              "trajectory_msgs/JointTrajectory command topic (ros2_control joint_trajectory_controller; with "
              "command_interface joint_trajectory)", read_only=True),
    ParamSpec("command_joints", ["carriage", "string_length"], "Hardware joint names of the kinematic "
              "configurations in the order of the command's data (the forward position controller's 'joints')",
              read_only=True),
    ParamSpec("command_delay_steps", ControllerOptions.command_delay_steps, "Control periods between a joint state "
              "and the step its command moves the drives: 1 with ros2_control (the forward position controller writes "
              "a command at its next update), 0 when the driver applies a command within the cycle it arrives; the "
              "controller predicts the state through the commands in flight and refuses gains designed for another "
              "delay", minimum=0, maximum=MAX_DELAY_STEPS, read_only=True),
    ParamSpec("estimator", ControllerOptions.estimator, "State estimate from the measured configurations: 'kalman' "
              "(time-varying Kalman filter on the exact linearization along the trajectory) or 'legendre' (the "
              "discrete Legendre transform of two samples: exact on exact data, differentiates encoder noise)",
              check=_choice(*ESTIMATORS), read_only=True),
    ParamSpec("estimator_noise.measurement", EstimatorNoise.measurement, "Kalman filter: standard deviation of a "
              "measured configuration [rad or m] (encoder noise and quantization, and what the model cannot "
              "explain)", minimum=1e-9, maximum=1.0, read_only=True),
    ParamSpec("estimator_noise.momentum", EstimatorNoise.momentum, "Kalman filter: standard deviation per step of a "
              "dynamic momentum [N m s] (model error: masses, damping, geometry)", minimum=1e-9, maximum=10.0,
              read_only=True),
    ParamSpec("estimator_noise.actuator", EstimatorNoise.actuator, "Kalman filter: standard deviation per step of a "
              "drive's position against its command [m]", minimum=1e-9, maximum=1.0, read_only=True),
    ParamSpec("tension_reserve", ControllerOptions.tension_reserve, "The tension guard keeps the string tension the "
              "command is predicted to produce (the model's step from the predicted state, linearized in the command with "
              "the exact multiplier derivatives) at least this much above "
              "the string's min_tension of the model file [N], moving the command the least within the drives' "
              "limits (docs/tracking.md, 'Tension guard'); with feedback only", minimum=0.0, maximum=100.0,
              read_only=True),
    ParamSpec("start_blend", ControllerOptions.start_blend, "Seconds over which the feedback (the gains' and the "
              "integral's share of the command) is faded in at a run's start: the arm's start offset and the drives' "
              "lag behind a plan at its acceleration limit are corrected once the plan eases off (docs/tracking.md "
              "'Start'); 0: the full law from the first tick", minimum=0.0, maximum=60.0, read_only=True),
    ParamSpec("feedback_acceleration", ControllerOptions.feedback_acceleration, "The feedback may move each drive's "
              "commanded acceleration at most this far from the plan's [m/s^2, rad/s^2]: encoder noise through the "
              "estimate and the gains is bounded there (docs/tracking.md 'Quiet commands'); 0: unbounded",
              minimum=0.0, maximum=1000.0, read_only=True),
    ParamSpec("anti_windup", ControllerOptions.anti_windup, "The integral action (angle_integral of the gains' design) "
              "does not integrate a tick's error after a command the acceleration budget, the tension guard or the "
              "drives' limits moved: while the drives cannot do what the law asks the integral would wind up "
              "(docs/tracking.md 'Anti-windup'); false: it integrates through saturation", read_only=True),
    ParamSpec("quiet_feedback.cutoff", QuietOptions.cutoff, "The feedback on the arm's own state (the joint angles "
              "and momenta the filter estimates from the encoders) passes a first-order lag of this cutoff [Hz]: "
              "encoder noise reaches the commands less (docs/tracking.md 'Quiet commands'); stepped aside for "
              "quiet_feedback.hold after a surprise; 0: off (the default: with 10 Hz the wave's commands are 42-46 % quieter "
              "and its tracking as good, but the arm comes back from some pushes 0.2-0.3 s later)", minimum=0.0,
              maximum=1000.0, read_only=True),
    ParamSpec("quiet_feedback.detector_measurement", QuietOptions.detector_measurement, "The surprise detector's "
              "Kalman filter: standard deviation of a measured joint angle [rad] (larger than the estimator's: it "
              "trusts the model, so a force the model does not know shows in its innovation)", minimum=1e-9,
              maximum=1.0, read_only=True),
    ParamSpec("quiet_feedback.threshold", QuietOptions.threshold, "A surprise: the detector's innovation more than "
              "this [rad] from its mean over the last 0.1 s (a push)", minimum=1e-9, maximum=1.0, read_only=True),
    ParamSpec("quiet_feedback.drive_threshold", QuietOptions.drive_threshold, "A surprise: a drive measured more than "
              "this [m or rad] from the command in effect (a command applied late or lost)", minimum=1e-9,
              maximum=1.0, read_only=True),
    ParamSpec("quiet_feedback.hold", QuietOptions.hold, "Seconds without the lag after a surprise", minimum=0.0,
              maximum=60.0, read_only=True),
    ParamSpec("feedback", ControllerOptions.feedback, "false: feed-forward only (u = u_d(k + command_delay_steps), "
              "the gains unused), to measure what the feedback adds; checks, limits and tolerances stay",
              read_only=True),
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
    ParamSpec("state_timeout", ControllerOptions.state_timeout, "A joint state older than this (s, on the node's "
              "clock) is stale: hold and report", minimum=1e-4, maximum=60.0),
    ParamSpec("stamp_tolerance", ControllerOptions.stamp_tolerance, "Tolerance of the spacing of the two samples of "
              "a tick around dt, as a fraction of dt (< 0.5; below half the sample period when sampling faster than "
              "1/dt)", minimum=0.0, maximum=0.49),
    ParamSpec("watchdog_period", 0.01, "Period (s, ROS time) of the stale-data check; while stale and running the "
              "hold command is repeated at this period", minimum=1e-3, maximum=1.0, read_only=True),
    ParamSpec("diagnostics_period", 0.5, "Period (s, steady clock) of /diagnostics messages (every active fault "
              "kind with its count)", minimum=0.01, maximum=60.0, read_only=True),
    ParamSpec("autostart", False, "Configure and activate (start tracking) at start-up, and activate whenever a "
              "trajectory is taken while inactive (e.g. the optimizer's first result); false: the node starts "
              "unconfigured and waits for the lifecycle transitions or ~/start"),
    ParamSpec("publish_tracking", True, "Publish ~/tracking (marionette_interfaces/TrackingState, one per tick)"),
    ParamSpec("fault_log_throttle", 1.0, "Minimum interval (s) between log lines about the same fault kind",
              minimum=0.0, maximum=3600.0),
    ParamSpec("realtime_priority", 0, "SCHED_FIFO priority (1-99) for every thread of the node's process that "
              "exists after start-up (DDS receive threads, executor), for a short, steady joint-state-to-command "
              "latency on a busy machine; 0 = the default scheduler (the default: an explicit choice on the robot's "
              "computer, not implied by permission, since containers and CI run as root). Needs CAP_SYS_NICE or an "
              "rtprio limit; when refused the node warns and runs without", minimum=0, maximum=99, read_only=True),
    ParamSpec("trajectory_wait", 5.0, "Seconds ~/start and ~/execute wait for the optimizer's latched trajectory "
              "when none has arrived yet (a controller started or restarted a moment ago: discovery and the "
              "transient-local sample take a while); then refused with what was seen (no publisher, no sample, a "
              "refused trajectory)", minimum=0.0, maximum=300.0, read_only=True),
    ParamSpec("execute.concurrency", "reject", "~/execute while a goal runs: 'reject' a second goal, or 'queue' it "
              "(up to execute.queue_size, first come first served); never retargets the running goal",
              check=_choice("reject", "queue"), read_only=True),
    ParamSpec("execute.queue_size", 4, "~/execute goals that may wait behind the running one (concurrency "
              "'queue')", minimum=0, maximum=100, read_only=True),
    ParamSpec("execute.feedback_ticks", 10, "~/execute feedback: ticks per message (and one at each change of "
              "phase)", minimum=1, maximum=10000, read_only=True),
    ParamSpec("execute.optimizer_action", "marionette_optimizer/optimize_action", "The optimizer's action "
              "(marionette_interfaces/action/OptimizeTrajectory) that ~/execute goals with a motion_name or desired "
              "configurations are optimized through", read_only=True),
    ParamSpec("executor", "events", "rclpy executor: 'events' (rclpy.experimental.EventsExecutor, lower "
              "overhead per message) or 'single_threaded'", check=_choice("events", "single_threaded"),
              read_only=True),
]

#: parameters that shape the core's commands (the rest are about transport, logging and scheduling)
CORE_PARAMS = {"state_timeout", "stamp_tolerance", "command_delay_steps", "command_interface", "command_lookahead",
               "estimator", "estimator_noise.measurement",
               "estimator_noise.momentum", "estimator_noise.actuator", "feedback", "tension_reserve", "start_blend",
               "feedback_acceleration", "anti_windup", "quiet_feedback.cutoff", "quiet_feedback.detector_measurement",
               "quiet_feedback.threshold", "quiet_feedback.drive_threshold", "quiet_feedback.hold",
               "plausibility.limit_margin",
               "plausibility.velocity_factor", "plausibility.jump_margin", "plausibility.chain_tolerance",
               "constraints.goal_time"}

#: per joint tolerances, joint_trajectory_controller style: constraints.<hardware joint>.<name> -> tolerance kind
TOLERANCE_PARAMS = {"start": "start", "trajectory": "path", "goal": "goal"}


def core_values(values: dict) -> dict:
    """The entries of parameter values that shape the core's commands (:data:`CORE_PARAMS`, tolerances)."""
    return {k: v for k, v in values.items() if k in CORE_PARAMS or k.startswith("constraints.")}


def tolerance_params(desc: ModelDescription) -> list[ParamSpec]:
    """``constraints.<joint>.{start,trajectory,goal}`` of every hardware joint of the model file (defaults:
    :func:`~.tolerances.default_tolerances`; 0 = unchecked)."""
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


def controller_param_defaults(desc: ModelDescription) -> dict:
    """{name: default} of every parameter of the node for a model description."""
    return {s.name: s.default for s in PARAMS + tolerance_params(desc)}


def controller_options(values: dict, desc: ModelDescription) -> ControllerOptions:
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
            feedback=bool(v["feedback"]), tension_reserve=float(v["tension_reserve"]),
            start_blend=float(v["start_blend"]), feedback_acceleration=float(v["feedback_acceleration"]),
            anti_windup=bool(v["anti_windup"]), command_interface=v["command_interface"],
            command_lookahead=int(v["command_lookahead"]),
            quiet=QuietOptions(*(float(v[f"quiet_feedback.{n}"]) for n in (
                "cutoff", "detector_measurement", "threshold", "drive_threshold", "hold"))),
            plausibility=PlausibilityOptions(*(float(v[f"plausibility.{n}"]) for n in (
                "limit_margin", "velocity_factor", "jump_margin", "chain_tolerance"))),
            tolerances=tolerances, goal_time=float(v["constraints.goal_time"]))
    except ValueError as e:
        raise ParameterError(str(e)) from None


def command_permutation(model, hardware_joints: dict, command_joints: list) -> np.ndarray:
    """Indices into u (nU,) giving the command's data in ``command_joints`` order.

    hardware_joints : {hardware name: configuration name}; command_joints : hardware names of the
    kinematic configurations, each once. Raises ParameterError naming what is wrong.
    """
    if model.nu:
        raise ParameterError(f"model '{model.name}' has {model.nu} force input(s); the position command "
                             "interface carries only kinematic configurations")
    try:
        return model.nu + JointMap.of(model, hardware_joints).command_order(command_joints)
    except JointMapError as e:
        raise ParameterError(f"parameter 'command_joints' {e}") from None
