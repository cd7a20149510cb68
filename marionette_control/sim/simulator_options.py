"""The simulator node's parameters without ROS: every one as a :class:`~marionette_control.parameters.ParamSpec`.

:func:`parameters` lists them (description, default, validation): the node's own (:data:`NODE_PARAMETERS`),
``profile``, and one hardware parameter per :class:`~marionette_control.sim.profile.HardwareProfile` field
whose default is the chosen profile's value and whose rule is the field's (:func:`profile_parameters`).
``marionette_simulator`` declares them (:func:`marionette_control.nodes.params.declare`); ``config/simulator.yaml``
sets them; :func:`marionette_control.sim.configure.configure` checks the rules between them and builds the arm.
:func:`hardware_profile` and :func:`disturbance_limits` turn the values into the objects the arm takes.
"""

from __future__ import annotations

import dataclasses
import re

from marionette_control import validation
from marionette_control.model.library import marionette_arm as arm
from marionette_control.parameters import ParamSpec
from marionette_control.sim.disturbance import DisturbanceLimits
from marionette_control.sim.profile import PROFILES, HardwareProfile, check_profile_field


def _one_of(*choices):
    def check(value):
        return None if value in choices else f"must be one of {', '.join(choices)}, got {value!r}"
    return check


def _ros_name(value):
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*", value):
        return f"must be a ROS name (letters, digits, '_', '/'-separated tokens), got {value!r}"
    return None


def _finite_list(value):
    if not value or any(not isinstance(v, float) or validation.problem(v) for v in value):
        return f"must be a non-empty list of finite numbers, got {list(value)!r}"
    return None


def _nonempty_names(value):
    if not value or any(not isinstance(v, str) or not v for v in value) or len(set(value)) != len(value):
        return f"must be a non-empty list of distinct joint names, got {list(value)!r}"
    return None


PROFILE_PARAMETER = ParamSpec(
    "profile", "realistic",
    "hardware profile: the defaults of the hardware parameters (plant_model_file, string, command_delay_steps, "
    "command_jitter_steps, command_jitter_probability, drive_mode, encoder_resolution, noise_std, seed): "
    "'realistic' (a plausible real arm: model errors, a string that can go slack, one period of command delay, "
    "acceleration-limited drives, encoder counts and noise) or 'perfect' (the nominal model with its holonomic "
    "string, no delay, no noise, rate-limited drives: exact); a hardware parameter given explicitly overrides its "
    "profile value",
    check=_one_of(*PROFILES), read_only=True)

#: Hardware parameters fixed at start-up (the plant and the generators are built once).
_READ_ONLY_PROFILE_FIELDS = ("plant_model_file", "string", "seed")
PROFILE_FIELDS = tuple(f.name for f in dataclasses.fields(HardwareProfile) if f.name != "name")


def profile_parameters(profile: HardwareProfile) -> list[ParamSpec]:
    """The hardware parameters, one per :class:`HardwareProfile` field, with ``profile``'s values as defaults.

    Description and validation are the field's (``check_profile_field``): one place for each rule.
    """
    specs = []
    for f in dataclasses.fields(HardwareProfile):
        if f.name == "name":
            continue
        default = getattr(profile, f.name)
        default = [float(v) for v in default] if isinstance(default, tuple) else default
        specs.append(ParamSpec(
            f.name, default, f"{f.metadata['description']} (profile default; realistic: "
            f"{_show(PROFILES['realistic'], f.name)}, perfect: {_show(PROFILES['perfect'], f.name)})",
            check=lambda v, name=f.name: check_profile_field(name, v),
            minimum=f.metadata.get("minimum"), maximum=f.metadata.get("maximum"),
            read_only=f.name in _READ_ONLY_PROFILE_FIELDS))
    return specs


def _show(profile: HardwareProfile, name: str) -> str:
    value = getattr(profile, name)
    if isinstance(value, tuple):
        return "[" + ", ".join(f"{v:.4g}" for v in value) + "]"
    return repr(value)


NODE_PARAMETERS = [
    ParamSpec("autostart", True, "configure and activate at start-up, as a hardware driver that is up (the drives "
              "follow commands at once); false: the node starts unconfigured and waits for the lifecycle transitions "
              "(configure: the arm simulated, joint states published, drives braked; activate: the drives follow "
              "commands)", read_only=True),
    ParamSpec("model_file", "marionette_arm.yaml",
              "the nominal model file (docs/models.md), the controller's: it gives the hardware joint names on "
              "joint_states, the command joints and the initial pose; a relative path is looked up in the package's "
              "config/ directory. The simulated plant is plant_model_file (empty: this model).",
              check=lambda v: None if v else "must not be empty", read_only=True),
    ParamSpec("dt", 0.01, "integration time step [s] of the midpoint variational integrator = the cycle of the "
              "simulated driver; use the controller's trajectory time step", minimum=1e-4, maximum=0.1,
              read_only=True),
    ParamSpec("newton_tolerance", 1e-10, "Newton tolerance of each integrator step (residual norm)",
              minimum=1e-14, maximum=1e-4, read_only=True),
    ParamSpec("newton_max_iterations", 50, "Newton iteration cap of each integrator step", minimum=1, maximum=1000,
              read_only=True),
    ParamSpec("publish_rate", 100.0, "joint_states rate [Hz] in simulated time; 1/publish_rate must be a whole "
              "number of steps dt", minimum=0.1, maximum=10000.0, read_only=True),
    ParamSpec("latency", 0.0, "transport delay [s, simulated] between a measurement and its joint_states message "
              "(rounded up to whole steps; the stamp is the measurement time)", minimum=0.0, maximum=1.0),
    ParamSpec("controller_name", "forward_position_controller",
              "name of the ros2_control forward position controller whose commands the simulator takes: "
              "std_msgs/Float64MultiArray on <controller_name>/commands", check=_ros_name, read_only=True),
    ParamSpec("trajectory_controller_name", "joint_trajectory_controller",
              "name of the ros2_control joint_trajectory_controller whose commands the simulator takes as well: "
              "trajectory_msgs/JointTrajectory on <trajectory_controller_name>/joint_trajectory, sampled at every "
              "step (sim/setpoint_stream.py)", check=_ros_name, read_only=True),
    ParamSpec("command_joints", ["carriage", "string_length"],
              "the controller's joints, in the order of the command data (hardware joint names of the model's "
              "kinematic configurations, each exactly once)", check=_nonempty_names, read_only=True),
    ParamSpec("command_timeout", 0.5, "simulated seconds without a valid command after which "
              "command_timeout_action applies; 0: never", minimum=0.0, maximum=3600.0),
    ParamSpec("command_timeout_action", "hold", "on a command timeout: 'hold' brakes the drives to a stop; "
              "'continue' keeps moving to the last setpoint", check=_one_of("hold", "continue")),
    ParamSpec("on_step_error", "hold", "when an integrator step fails (StepError, non-finite or implausible "
              "state): 'hold' retries it with the drives held, then moved back one step, and makes that the "
              "setpoint (reset if both fail); 'reset': back to the initial state",
              check=_one_of("hold", "reset")),
    ParamSpec("max_configuration_change", 0.5, "largest change of a dynamic configuration in one step [rad or m] "
              "accepted from the integrator; a larger jump is a spurious Newton root and handled like a StepError",
              minimum=1e-3, maximum=10.0),
    ParamSpec("initial_pose", "lowered", "initial pose: 'lowered' or 'raised' (the wave's static equilibria of the "
              "nominal model, marionette arm only) or 'custom' (initial_configuration); the drives start there and "
              "the plant rests where its physics puts it", check=_one_of("lowered", "raised", "custom"),
              read_only=True),
    ParamSpec("initial_configuration", list(arm.LOWERED),
              "with initial_pose 'custom': the arm's [shoulder, elbow] angles [rad] (carriage and string length "
              "from the nominal model's static equilibrium), or a full configuration in model order that "
              "satisfies the constraints", check=_finite_list, read_only=True),
    ParamSpec("publish_clock", False, "publish /clock: the simulator is the graph's clock (other nodes use "
              "use_sim_time); simulated time starts at 0", read_only=True),
    ParamSpec("lockstep_timeout", 0.0, "wall seconds each step may wait for the command answering the last "
              "joint_states message, while commands answer them (simulated time stands still meanwhile: a loaded "
              "machine adds no command jitter; for tests, with publish_clock); a controller that stops answering "
              "is waited for once. 0: off, steps paced in real time as a hardware driver's", minimum=0.0,
              maximum=10.0, read_only=True),
    ParamSpec("real_time_factor", 1.0, "simulated seconds per wall-clock second (pacing); other than 1 only with "
              "publish_clock", minimum=0.01, maximum=100.0),
    ParamSpec("marker_rate", 20.0, "visualization_msgs/MarkerArray rate [Hz, simulated] on ~/markers; 0: off",
              minimum=0.0, maximum=1000.0, read_only=True),
    ParamSpec("frame_id", "world", "TF frame of the markers: a frame that coincides with the model's world frame "
              "(for the arm: the URDF root base_link, as config/simulator.yaml sets)",
              check=lambda v: None if v else "must not be empty", read_only=True),
    ParamSpec("joint_states_qos", "reliable", "QoS of joint_states and ~/true_joint_states: 'reliable' (keep last "
              "10, like joint_state_broadcaster; any subscriber connects) or 'sensor_data' (best effort, keep last 5)",
              check=_one_of("reliable", "sensor_data"), read_only=True),
    ParamSpec("disturbance_max_force", DisturbanceLimits.max_force,
              "largest force [N] a ~/disturb request may ask for (larger is refused as implausible)",
              minimum=0.0, maximum=1e4),
    ParamSpec("disturbance_max_impulse", DisturbanceLimits.max_impulse,
              "largest impulse [N s] a ~/disturb request may ask for", minimum=0.0, maximum=1e3),
    ParamSpec("disturbance_max_duration", DisturbanceLimits.max_duration,
              "longest duration [s, simulated] of a ~/disturb force profile", minimum=0.0, maximum=3600.0),
]


def parameters(profile: str = "realistic") -> list[ParamSpec]:
    """Every parameter of the node, the hardware ones with the defaults of ``profile``."""
    return [PROFILE_PARAMETER, *NODE_PARAMETERS, *profile_parameters(HardwareProfile.named(profile))]


#: The parameters with the default profile's values (what ``ros2 param describe`` shows by default).
PARAMETERS = parameters()


def hardware_profile(values: dict) -> HardwareProfile:
    """The :class:`HardwareProfile` the parameter values describe ('custom' when they differ from ``profile``'s)."""
    return HardwareProfile.named(values["profile"], **{name: values[name] for name in PROFILE_FIELDS})


def disturbance_limits(values: dict) -> DisturbanceLimits:
    """The :class:`DisturbanceLimits` of the ``disturbance_max_*`` parameter values."""
    return DisturbanceLimits(values["disturbance_max_force"], values["disturbance_max_impulse"],
                             values["disturbance_max_duration"])
