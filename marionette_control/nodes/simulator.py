"""``marionette_simulator``: the arm integrated by the core, standing in for the hardware driver.

What it does
------------
Every ``dt`` of simulated time the node advances the model one midpoint-VI step
(``_core.DiscreteSystem.step``, thesis (4.36)) with the kinematic inputs
u_k = ρ_{k+1} (carriage, string_length) chosen by the actuator model below, and every
``1/publish_rate`` it publishes the integrator's configuration q_k on ``joint_states``
stamped with t_k = t_0 + k·dt. The stamps are exactly the integrator's times and the
positions exactly its configurations (plus noise, if asked for), so a controller that runs
at the same Δt recovers the state by the discrete Legendre transform
p_k = D₂L_d(q_{k−1}, q_k) bit for bit when ``noise_std`` is 0 (test_simulator_node.py
checks this across processes).

Command convention (the hardware driver's, ros2_control ``forward_command_controller``)
---------------------------------------------------------------------------------------
``std_msgs/Float64MultiArray`` on ``<controller_name>/commands`` (default
``/forward_position_controller/commands``), ``data`` = one position per joint of the
controller's ``joints`` list, in that order (parameter ``command_joints``, default
``[carriage, string_length]``: m along the rail, m of string). ``layout`` is ignored, as the
forward command controller ignores it. A command is a *target*: each step the actuators move
towards it at most ``max_velocity``·dt (and, with ``limit_acceleration``, change speed by at
most ``max_acceleration``·dt), and never leave their ``[min, max]`` range; limits come from the
model file's ``actuators`` section. A target within one step's reach is applied exactly, so a
controller that already respects the limits (TrackingController.clamp) gets ρ_{k+1} = u_k.
A command is used from the next step on (a zero-order hold). Commands with the wrong length
or a non-finite value are refused with a throttled warning; the last valid command stays.
Out-of-range targets are saturated (with a throttled warning), as a servo would.

Why the integration stays well posed: the kinematic configurations are prescribed
(thesis §3.6), so each step solves the constrained DEL equations for the dynamic ones with
ρ_{k+1} given; rate limits keep ρ_{k+1} within reach of the Newton iteration. Where a
target is still infeasible (e.g. a string longer than the arm can stretch) the step raises
``StepError``, or Newton converges to a spurious root radians away (near the stretched,
singular pose); a jump larger than ``max_configuration_change`` counts as a failed step too.
The node logs the fault (throttled), counts it in the diagnostics and, with
``on_step_error: hold``, retries the step with the actuators held, then moved back one step,
and makes the result the new target (the arm stops short of the edge); if neither works,
or with ``on_step_error: reset``, the state is reset to the initial one. The node keeps
running either way.

Time
----
``publish_clock: true``: the simulator is the graph's clock. Simulated time starts at 0,
advances ``dt`` per step and is published on ``/clock`` after every step; steps are paced
against the steady clock at ``real_time_factor`` simulated seconds per wall second (e.g. 5
in tests). Other nodes run with ``use_sim_time: true``. ``publish_clock: false``: stamps
are the wall clock at start-up plus k·dt, paced in real time (``real_time_factor`` must be 1
and ``use_sim_time`` false). ``latency`` delays each joint-state message by that much
simulated time (rounded up to whole steps; the stamp stays the measurement's time). A
command timeout (``command_timeout``, simulated seconds, 0 = none) applies
``command_timeout_action`` once: ``hold`` stops the actuators where they are,
``continue`` keeps moving to the last target. In a closed loop the controller has
dt/real_time_factor of wall time to answer q_k before step k → k+1 is taken; a later
command is used one step late, so run closed-loop tests at factors the machine can serve.

Interfaces
----------
* publishes ``joint_states`` (sensor_msgs/JointState: hardware joint names of the model file,
  positions only), ``/clock`` (rosgraph_msgs/Clock, if ``publish_clock``), ``~/markers``
  (visualization_msgs/MarkerArray: links, string, masses; if ``marker_rate`` > 0),
  ``/diagnostics`` (diagnostic_msgs/DiagnosticArray, 1 Hz wall: simulated time, counters of
  steps, accepted/rejected/saturated commands, step errors);
* subscribes ``<controller_name>/commands`` (std_msgs/Float64MultiArray, reliable);
* service ``~/reset`` (std_srvs/Trigger): initial state, target = initial actuator positions,
  pending measurements dropped; time keeps running forward.

Parameters: see ``PARAMETERS`` (each with description, default and validation) and
``config/simulator.yaml``.
"""

from __future__ import annotations

import collections
import math
import re
import time
from dataclasses import dataclass
from typing import Optional

import numpy as np

from marionette_control import _core
from marionette_control.model.yaml_model import ModelDescription, load_model_file
from marionette_control.models import marionette_arm as arm
from marionette_control.nodes.params import ParameterError, ParamSpec, declare
from marionette_control.nodes.process import run_node
from marionette_control.system_description import config_file

NODE_NAME = "marionette_simulator"
NANOSECONDS = 1_000_000_000


# ============================================================================ ROS-free simulation


@dataclass
class ActuatorModel:
    """Position servos of the kinematic configurations (arrays of shape (nk,), SI units).

    lower, upper : position range; max_velocity : rate limit (inf: none);
    max_acceleration : speed-change limit (inf: none), used when ``limit_acceleration``.
    """

    lower: np.ndarray
    upper: np.ndarray
    max_velocity: np.ndarray
    max_acceleration: np.ndarray
    limit_acceleration: bool = False

    @classmethod
    def from_description(cls, desc: ModelDescription, limit_acceleration: bool = False) -> "ActuatorModel":
        """Limits of the model file's ``actuators`` section (missing entries: unlimited)."""
        m = desc.model
        names = m.config_names[m.nd:]
        lo, hi, vmax, amax = (np.full(len(names), v) for v in (-np.inf, np.inf, np.inf, np.inf))
        for i, name in enumerate(names):
            spec = desc.actuators.get(name)
            if spec is not None:
                lo[i], hi[i], vmax[i] = spec.min, spec.max, spec.max_velocity
                if spec.max_acceleration is not None:
                    amax[i] = spec.max_acceleration
        return cls(lo, hi, vmax, amax, limit_acceleration)

    def saturate(self, target: np.ndarray) -> np.ndarray:
        return np.clip(target, self.lower, self.upper)

    def next_positions(self, rho: np.ndarray, v: np.ndarray, target: np.ndarray, dt: float) -> np.ndarray:
        """ρ_{k+1} (nk,) moving from ρ_k (speed v_k) towards ``target`` within the limits.

        Rate limit: |ρ_{k+1} − ρ_k| ≤ max_velocity·dt; a target within reach is returned exactly.
        With ``limit_acceleration`` the speed also changes by at most max_acceleration·dt and
        is kept under the discrete braking speed (about sqrt(2·a·|e|)), so the servo stops at the target.
        The range is applied last, so ρ_{k+1} never leaves it.
        """
        e = target - rho
        if self.limit_acceleration:
            a = self.max_acceleration
            # braking speed of the discrete servo: from speed s, slowing by a*dt per step covers
            # s^2/(2a) + s*dt/2 (this step included), which must not exceed the distance left |e|
            brake = np.sqrt((0.5 * a * dt) ** 2 + 2.0 * a * np.abs(e)) - 0.5 * a * dt
            vlim = np.minimum(self.max_velocity, brake)
            speed = np.clip(e / dt, -vlim, vlim)
            speed = np.clip(speed, v - a * dt, v + a * dt)
            nxt = rho + speed * dt
            nxt = np.where(np.abs(nxt - target) <= 1e-12 * np.maximum(1.0, np.abs(target)), target, nxt)
        else:
            reach = self.max_velocity * dt
            within = np.abs(e) <= reach * (1.0 + 1e-9)
            nxt = np.where(within, target, rho + np.clip(e, -reach, reach))
        return np.clip(nxt, self.lower, self.upper)


@dataclass(frozen=True)
class StepFault:
    """A failed integrator step and what the simulation did about it: 'held', 'backed_off' or 'reset'."""

    message: str
    action: str


class ImplausibleStep(RuntimeError):
    """The integrator converged, but to a state the arm cannot reach in one step (a spurious Newton root)."""


class Simulation:
    """The model under actuator targets: x_{k+1} = f(x_k, u_k) with u_k = [0 (force inputs); ρ_{k+1}].

    Parameters
    ----------
    system : _core.DiscreteSystem
    q0 : ndarray (nq,)
        Initial configuration (satisfying the constraints); the initial state is the discrete
        rest state x_0 = [q0; D₂L_d(q0, q0); 0] (``state_from_configs(q0, q0)``), which the
        integrator keeps exactly when q0 is a static equilibrium and the actuators hold.
    actuators : ActuatorModel
    on_step_error : 'hold' or 'reset'
    max_configuration_change : float
        Largest |q_{k+1} − q_k| of a dynamic configuration accepted from one step [rad or m].
        Near a singular configuration (the arm stretched straight along its string) Newton can
        converge to a root several radians away; such a step is treated like a StepError.

    A step fails with a StepError, a non-finite state or an implausible jump. With 'hold' the
    simulation then retries the step with the actuators held (ρ_{k+1} = ρ_k), then backed off
    to where they were one step earlier (ρ_{k+1} = ρ_{k−1}, away from the edge it ran into),
    and makes the result's ρ the new target; if neither works, or with 'reset', it returns to
    the initial state. Either way the step is completed and the state satisfies the constraints.
    """

    def __init__(self, system, q0: np.ndarray, actuators: ActuatorModel, on_step_error: str = "hold",
                 max_configuration_change: float = 0.5):
        m = system.model
        self.system = system
        self.nd, self.nk, self.nu, self.nq = m.nd, m.nk, m.nu, m.nq
        self.dt = float(system.dt)
        self.actuators = actuators
        self.on_step_error = on_step_error
        self.max_configuration_change = float(max_configuration_change)
        self.q0 = np.array(q0, dtype=float)
        self.x0 = np.asarray(system.state_from_configs(self.q0, self.q0), dtype=float)
        self._u = np.zeros(m.nU)
        self.steps = 0
        self.step_errors = 0
        self.reset()

    @property
    def q(self) -> np.ndarray:
        return self.x[: self.nq]

    @property
    def rho(self) -> np.ndarray:
        return self.x[self.nd: self.nq]

    @property
    def v(self) -> np.ndarray:
        return self.x[self.nq + self.nd:]

    def reset(self) -> None:
        """Initial state; target = initial actuator positions."""
        self.x = self.x0.copy()
        self.target = self.x0[self.nd: self.nq].copy()

    def set_target(self, target: np.ndarray) -> bool:
        """Sets the actuator target (nk,), saturated to the range; returns True if it was saturated."""
        target = np.asarray(target, dtype=float)
        self.target = self.actuators.saturate(target)
        return bool(np.any(self.target != target))

    def hold(self) -> None:
        """Target = where the actuators are now."""
        self.target = self.rho.copy()

    def step(self) -> Optional[StepFault]:
        """Advances one step; returns None, or the fault (the simulation has then recovered)."""
        self.steps += 1
        rho_next = self.actuators.next_positions(self.rho, self.v, self.target, self.dt)
        try:
            self.x = self._checked_step(rho_next)
        except (_core.StepError, FloatingPointError, ImplausibleStep) as e:
            return self._recover(str(e))
        return None

    def _checked_step(self, rho_next: np.ndarray) -> np.ndarray:
        self._u[self.nu:] = rho_next
        x, _, _ = self.system.step(self.x, self._u)
        if not np.all(np.isfinite(x)):
            raise FloatingPointError("the integrator returned a non-finite state")
        jump = float(np.max(np.abs(x[: self.nd] - self.x[: self.nd]), initial=0.0))
        if jump > self.max_configuration_change:
            raise ImplausibleStep(f"the step moved a dynamic configuration by {jump:.3g} > max_configuration_change "
                                  f"{self.max_configuration_change:g} (a spurious Newton root: the motion is too fast "
                                  "for dt, or the arm ran into the end of its string)")
        return x

    def _recover(self, message: str) -> StepFault:
        self.step_errors += 1
        if self.on_step_error == "hold":
            back = self.actuators.saturate(self.rho - self.v * self.dt)
            for action, rho_next in (("held", self.rho.copy()), ("backed_off", back)):
                try:
                    self.x = self._checked_step(rho_next)
                except (_core.StepError, FloatingPointError, ImplausibleStep) as e:
                    message += f"; with the actuators {action.replace('_', ' ')}: {e}"
                else:
                    self.hold()
                    return StepFault(message, action)
        self.reset()
        return StepFault(message, "reset")


class MeasurementQueue:
    """Joint-state samples waiting for their latency: (release time, stamp, positions), in time order."""

    def __init__(self):
        self._items: collections.deque = collections.deque()

    def push(self, release_ns: int, stamp_ns: int, positions: list) -> None:
        self._items.append((release_ns, stamp_ns, positions))

    def pop_due(self, now_ns: int):
        """Yields (stamp_ns, positions) of every sample released by ``now_ns``."""
        while self._items and self._items[0][0] <= now_ns:
            _, stamp, pos = self._items.popleft()
            yield stamp, pos

    def clear(self) -> None:
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


def steps_per_period(rate: float, dt: float) -> int:
    """Integer n with n·dt = 1/rate; raises ValueError when 1/rate is not a whole number of steps."""
    n = 1.0 / (rate * dt)
    k = round(n)
    if k < 1 or abs(n - k) > 1e-6 * max(1.0, n):
        raise ValueError(f"1/rate = {1.0 / rate:.6g} s is not a whole number of integration steps dt = {dt:g} s")
    return int(k)


# ============================================================================ parameters


def _one_of(*choices):
    def check(value):
        return None if value in choices else f"must be one of {', '.join(choices)}, got {value!r}"
    return check


def _ros_name(value):
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*", value):
        return f"must be a ROS name (letters, digits, '_', '/'-separated tokens), got {value!r}"
    return None


def _finite_list(value):
    if not value or not all(isinstance(v, float) and math.isfinite(v) for v in value):
        return f"must be a non-empty list of finite numbers, got {list(value)!r}"
    return None


def _nonempty_names(value):
    if not value or any(not isinstance(v, str) or not v for v in value) or len(set(value)) != len(value):
        return f"must be a non-empty list of distinct joint names, got {list(value)!r}"
    return None


PARAMETERS = [
    ParamSpec("model_file", "marionette_arm.yaml",
              "YAML model file (docs/models.md); a relative path is looked up in the package's config/ directory. "
              "Gives the model, the hardware joint names on joint_states and the actuator limits.",
              check=lambda v: None if v else "must not be empty", read_only=True),
    ParamSpec("dt", 0.01, "integration time step [s] of the midpoint variational integrator; use the controller's "
              "trajectory time step so its state estimate is exact", minimum=1e-4, maximum=0.1, read_only=True),
    ParamSpec("newton_tolerance", 1e-10, "Newton tolerance of each integrator step (residual norm)",
              minimum=1e-14, maximum=1e-4, read_only=True),
    ParamSpec("newton_max_iterations", 50, "Newton iteration cap of each integrator step", minimum=1, maximum=1000,
              read_only=True),
    ParamSpec("publish_rate", 100.0, "joint_states rate [Hz] in simulated time; 1/publish_rate must be a whole "
              "number of steps dt", minimum=0.1, maximum=10000.0, read_only=True),
    ParamSpec("noise_std", 0.0, "standard deviation of Gaussian noise added to every published position "
              "[rad or m]; 0: the exact integrator configurations", minimum=0.0, maximum=1.0),
    ParamSpec("noise_seed", -1, "seed of the noise generator; -1: from the operating system", minimum=-1,
              maximum=2**31 - 1, read_only=True),
    ParamSpec("latency", 0.0, "delay [s, simulated] between a measurement and its joint_states message "
              "(rounded up to whole steps; the stamp is the measurement time)", minimum=0.0, maximum=1.0),
    ParamSpec("controller_name", "forward_position_controller",
              "name of the ros2_control forward position controller whose commands the simulator takes: "
              "std_msgs/Float64MultiArray on <controller_name>/commands", check=_ros_name, read_only=True),
    ParamSpec("command_joints", ["carriage", "string_length"],
              "the controller's joints, in the order of the command data (hardware joint names of the model's "
              "kinematic configurations, each exactly once)", check=_nonempty_names, read_only=True),
    ParamSpec("command_timeout", 0.5, "simulated seconds without a valid command after which "
              "command_timeout_action applies; 0: never", minimum=0.0, maximum=3600.0),
    ParamSpec("command_timeout_action", "hold", "on a command timeout: 'hold' stops the actuators where they "
              "are; 'continue' keeps moving to the last target", check=_one_of("hold", "continue")),
    ParamSpec("limit_acceleration", False, "also apply the actuators' max_acceleration (speed changes at most "
              "max_acceleration*dt per step, braking before the target); off: position range and rate only, "
              "as the controller assumes"),
    ParamSpec("on_step_error", "hold", "when an integrator step fails (StepError, non-finite or implausible "
              "state): 'hold' retries it with the actuators held, then moved back one step, and makes that the "
              "target (reset if both fail); 'reset': back to the initial state",
              check=_one_of("hold", "reset")),
    ParamSpec("max_configuration_change", 0.5, "largest change of a dynamic configuration in one step [rad or m] "
              "accepted from the integrator; a larger jump is a spurious Newton root and handled like a StepError",
              minimum=1e-3, maximum=10.0),
    ParamSpec("initial_pose", "lowered", "initial pose: 'lowered' or 'raised' (the wave's static equilibria, "
              "marionette arm only) or 'custom' (initial_configuration)",
              check=_one_of("lowered", "raised", "custom"), read_only=True),
    ParamSpec("initial_configuration", list(arm.LOWERED),
              "with initial_pose 'custom': the arm's [shoulder, elbow] angles [rad] (carriage and string length "
              "from the static equilibrium, so the arm starts at rest), or a full configuration in model order "
              "that satisfies the constraints", check=_finite_list, read_only=True),
    ParamSpec("publish_clock", False, "publish /clock: the simulator is the graph's clock (other nodes use "
              "use_sim_time); simulated time starts at 0", read_only=True),
    ParamSpec("real_time_factor", 1.0, "simulated seconds per wall-clock second (pacing); other than 1 only with "
              "publish_clock", minimum=0.01, maximum=100.0),
    ParamSpec("marker_rate", 20.0, "visualization_msgs/MarkerArray rate [Hz, simulated] on ~/markers; 0: off",
              minimum=0.0, maximum=1000.0, read_only=True),
    ParamSpec("frame_id", "world", "TF frame of the markers: a frame that coincides with the model's world frame "
              "(for the arm: the URDF root base_link, as config/simulator.yaml sets)",
              check=lambda v: None if v else "must not be empty", read_only=True),
    ParamSpec("joint_states_qos", "reliable", "QoS of joint_states: 'reliable' (keep last 10, like "
              "joint_state_broadcaster; any subscriber connects) or 'sensor_data' (best effort, keep last 5)",
              check=_one_of("reliable", "sensor_data"), read_only=True),
]


@dataclass
class SimulatorConfig:
    """Everything derived from the parameters at start-up (ros2_controllers' configure step)."""

    description: ModelDescription
    q0: np.ndarray
    joint_names: list
    command_index: np.ndarray          # command data[i] -> kinematic index command_index[i]
    publish_every: int
    marker_every: int                  # 0: no markers


def configure(values: dict, use_sim_time: bool = False) -> SimulatorConfig:
    """Validates the cross-parameter rules and builds the model; raises ParameterError naming the parameter."""
    try:
        path = config_file(values["model_file"])
        desc = load_model_file(path)
    except (OSError, ValueError) as e:
        raise ParameterError(f"parameter 'model_file': {e}") from e
    m = desc.model
    if m.nk == 0:
        raise ParameterError(f"parameter 'model_file': model '{m.name}' has no kinematic configurations; the "
                             "simulator takes position commands for kinematic configurations")
    dt = values["dt"]
    if abs(dt * NANOSECONDS - round(dt * NANOSECONDS)) > 1e-3:
        raise ParameterError(f"parameter 'dt' must be a whole number of nanoseconds, got {dt!r}")
    try:
        publish_every = steps_per_period(values["publish_rate"], dt)
    except ValueError as e:
        raise ParameterError(f"parameter 'publish_rate': {e}") from None
    marker_every = 0
    if values["marker_rate"] > 0:
        marker_every = max(1, round(1.0 / (values["marker_rate"] * dt)))
    if not values["publish_clock"]:
        if values["real_time_factor"] != 1.0:
            raise ParameterError(f"parameter 'real_time_factor' is {values['real_time_factor']} but publish_clock is "
                                 "false: with wall-clock stamps the simulation must run in real time (set "
                                 "publish_clock: true to run faster or slower)")
        if use_sim_time:
            raise ParameterError("parameter 'use_sim_time' is true but publish_clock is false: the simulator would "
                                 "wait for a clock nobody publishes; set publish_clock: true (the simulator is "
                                 "the clock) or use_sim_time: false")

    to_hw = desc.config_to_hardware
    joint_names = [to_hw[c] for c in m.config_names]
    kin_hw = [to_hw[c] for c in m.config_names[m.nd:]]
    cmd = list(values["command_joints"])
    if sorted(cmd) != sorted(kin_hw):
        raise ParameterError(f"parameter 'command_joints' must name each kinematic joint of '{m.name}' exactly once "
                             f"({', '.join(kin_hw)}), got {cmd}")
    command_index = np.array([kin_hw.index(n) for n in cmd], dtype=int)

    q0 = _initial_configuration(desc, values["initial_pose"], values["initial_configuration"])
    act = ActuatorModel.from_description(desc)
    rho0 = q0[m.nd:]
    outside = [f"{kin_hw[i]}={rho0[i]:.4g} (range {act.lower[i]:g}..{act.upper[i]:g})"
               for i in range(m.nk) if not (act.lower[i] <= rho0[i] <= act.upper[i])]
    if outside:
        raise ParameterError(f"parameter 'initial_configuration': the initial actuator positions are outside "
                             f"their range: {', '.join(outside)}")
    return SimulatorConfig(desc, q0, joint_names, command_index, publish_every, marker_every)


def _is_arm(desc: ModelDescription) -> bool:
    m = desc.model
    return (m.config_names == list(arm.DYNAMIC + arm.KINEMATIC) and arm.STRING in m.constraint_names
            and arm.HOOK_FRAME in m.frame_names and arm.CARRIAGE_FRAME in m.frame_names)


def _initial_configuration(desc: ModelDescription, pose: str, values: list) -> np.ndarray:
    m = desc.model
    is_arm = _is_arm(desc)
    if pose in ("lowered", "raised"):
        if not is_arm:
            raise ParameterError(f"parameter 'initial_pose': '{pose}' is a pose of the marionette arm; model "
                                 f"'{m.name}' needs initial_pose 'custom' with a full initial_configuration")
        angles = arm.LOWERED if pose == "lowered" else arm.RAISED
        return arm.static_equilibrium(m, *angles).q
    v = np.array(values, dtype=float)
    if is_arm and v.size == m.nd:
        try:
            return arm.static_equilibrium(m, *v).q
        except ValueError as e:
            raise ParameterError(f"parameter 'initial_configuration': {e}") from None
    if v.size != m.nq:
        sizes = f"{m.nd} arm angles or " if is_arm else ""
        raise ParameterError(f"parameter 'initial_configuration' must have {sizes}{m.nq} values "
                             f"({', '.join(m.config_names)}), got {v.size}")
    if m.nc:
        h = np.asarray(m.constraints(v)[0], dtype=float)
        if np.max(np.abs(h)) > 1e-6:
            raise ParameterError(f"parameter 'initial_configuration' violates the constraints "
                                 f"{', '.join(m.constraint_names)}: residual {np.max(np.abs(h)):.3g} > 1e-6")
    return v


# ============================================================================ the node

try:  # the node needs rclpy; the simulation above does not
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
    from geometry_msgs.msg import Point
    from rclpy.clock import Clock, ClockType
    from rclpy.node import Node
    from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
    from rosgraph_msgs.msg import Clock as ClockMsg
    from sensor_msgs.msg import JointState
    from std_msgs.msg import ColorRGBA, Float64MultiArray
    from std_srvs.srv import Trigger
    from visualization_msgs.msg import Marker, MarkerArray
except ImportError as _import_error:  # pragma: no cover - only without ROS
    Node = object
    _ROS_IMPORT_ERROR: Optional[ImportError] = _import_error
else:
    _ROS_IMPORT_ERROR = None


_FAULT_ACTIONS = {
    "held": "held the actuators where they are (the new target)",
    "backed_off": "moved the actuators back one step (the new target)",
    "reset": "reset the simulation to its initial state",
}


def _stamp(t_ns: int):
    from builtin_interfaces.msg import Time

    return Time(sec=t_ns // NANOSECONDS, nanosec=t_ns % NANOSECONDS)


class SimulatorNode(Node):
    """The ROS adapter around :class:`Simulation`: parameters, pacing, messages, service."""

    MAX_STEPS_PER_TICK = 50          # keeps each timer callback short
    MAX_LAG = 0.25                   # wall seconds behind schedule before the schedule is reset

    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        self.values = declare(self, PARAMETERS, on_change=self._on_parameter_change)
        self.add_on_set_parameters_callback(self._check_runtime_rules)
        use_sim_time = self.get_parameter("use_sim_time").value
        self.cfg = configure(self.values, use_sim_time)
        desc = self.cfg.description
        m = desc.model
        self.nd, self.nk = m.nd, m.nk
        self.dt = self.values["dt"]
        self.dt_ns = round(self.dt * NANOSECONDS)
        system = _core.DiscreteSystem(m, self.dt, self.values["newton_tolerance"],
                                      self.values["newton_max_iterations"])
        act = ActuatorModel.from_description(desc, self.values["limit_acceleration"])
        self.sim = Simulation(system, self.cfg.q0, act, self.values["on_step_error"],
                              self.values["max_configuration_change"])
        seed = self.values["noise_seed"]
        self.rng = np.random.default_rng(None if seed < 0 else seed)
        self.queue = MeasurementQueue()

        # time: step k is at t0 + k*dt
        self.k = 0
        self.t0_ns = 0 if self.values["publish_clock"] else time.time_ns()
        self._rebase_schedule()

        # counters (diagnostics)
        self.commands_accepted = self.commands_rejected = self.commands_saturated = 0
        self.last_command_ns: Optional[int] = None
        self.timed_out = False
        self.last_fault: Optional[StepFault] = None
        self._wall_start = time.monotonic()

        js_qos = qos_profile_sensor_data if self.values["joint_states_qos"] == "sensor_data" else QoSProfile(depth=10)
        self.joint_state_pub = self.create_publisher(JointState, "joint_states", js_qos)
        self.clock_pub = (self.create_publisher(ClockMsg, "/clock", QoSProfile(depth=10))
                          if self.values["publish_clock"] else None)
        self.marker_pub = (self.create_publisher(MarkerArray, "~/markers", QoSProfile(depth=1))
                           if self.cfg.marker_every else None)
        self.diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", QoSProfile(depth=10))
        self.command_topic = f"{self.values['controller_name']}/commands"
        self.create_subscription(Float64MultiArray, self.command_topic, self._on_command,
                                 QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
        self.create_service(Trigger, "~/reset", self._on_reset)
        self._marker_frames = self._marker_layout()

        steady = Clock(clock_type=ClockType.STEADY_TIME)
        period = max(self.dt / self.values["real_time_factor"], 1e-3)
        self.create_timer(period, self._on_tick, clock=steady)
        self.create_timer(1.0, self._publish_diagnostics, clock=steady)

        self._after_step()  # the initial configuration at t0
        self.get_logger().info(
            f"simulating '{m.name}' with dt={self.dt:g} s; joint_states {', '.join(self.cfg.joint_names)} at "
            f"{1.0 / (self.cfg.publish_every * self.dt):g} Hz; commands on "
            f"{self.resolve_topic_name(self.command_topic)} for {list(self.values['command_joints'])}; "
            + (f"publishing /clock at real-time factor {self.values['real_time_factor']:g}"
               if self.clock_pub else "wall-clock stamps"))

    # ---------------------------------------------------------------- time and stepping

    @property
    def now_ns(self) -> int:
        """Simulated time of the current step."""
        return self.t0_ns + self.k * self.dt_ns

    def _rebase_schedule(self) -> None:
        self._sched_wall = time.monotonic()
        self._sched_k = self.k

    def _on_tick(self) -> None:
        rtf = self.values["real_time_factor"]
        due = self._sched_k + int((time.monotonic() - self._sched_wall) * rtf / self.dt)
        behind = due - self.k
        if behind * self.dt / rtf > self.MAX_LAG:
            self.get_logger().warning(
                f"the simulation is {behind * self.dt / rtf:.2f} s (wall) behind real_time_factor {rtf:g}; "
                "skipping ahead (lower real_time_factor or dt load)", throttle_duration_sec=5.0)
            self._rebase_schedule()
            behind = 1
        for _ in range(min(behind, self.MAX_STEPS_PER_TICK)):
            self._step_once()

    def _step_once(self) -> None:
        fault = self.sim.step()
        self.k += 1
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
            q = self.sim.q
            noise = self.values["noise_std"]
            if noise > 0.0:
                q = q + self.rng.normal(0.0, noise, q.shape)
            delay_steps = math.ceil(self.values["latency"] * NANOSECONDS / self.dt_ns - 1e-9)
            self.queue.push(now + delay_steps * self.dt_ns, now, q.tolist())
        for stamp, positions in self.queue.pop_due(now):
            msg = JointState(name=self.cfg.joint_names, position=positions)
            msg.header.stamp = _stamp(stamp)
            self.joint_state_pub.publish(msg)
        if self.marker_pub is not None and self.k % self.cfg.marker_every == 0:
            self.marker_pub.publish(self._markers(now))
        timeout = self.values["command_timeout"]
        if (timeout > 0.0 and not self.timed_out and self.last_command_ns is not None
                and now - self.last_command_ns > timeout * NANOSECONDS):
            self.timed_out = True
            if self.values["command_timeout_action"] == "hold":
                self.sim.hold()
            self.get_logger().warning(
                f"no valid command on {self.command_topic} for {timeout:g} s: "
                + ("holding the actuators where they are" if self.values["command_timeout_action"] == "hold"
                   else "continuing to the last target"))

    # ---------------------------------------------------------------- commands and service

    def _on_command(self, msg) -> None:
        data = msg.data
        n = len(self.cfg.command_index)
        if len(data) != n:
            self.commands_rejected += 1
            self.get_logger().warning(
                f"refused a command with {len(data)} values on {self.command_topic}: expected {n} "
                f"({', '.join(self.values['command_joints'])}); keeping the last valid command",
                throttle_duration_sec=2.0)
            return
        values = np.asarray(data, dtype=float)
        if not np.all(np.isfinite(values)):
            self.commands_rejected += 1
            self.get_logger().warning(
                f"refused a command with non-finite values {values.tolist()} on {self.command_topic}; keeping the "
                "last valid command", throttle_duration_sec=2.0)
            return
        target = np.empty(self.nk)
        target[self.cfg.command_index] = values
        if self.sim.set_target(target):
            self.commands_saturated += 1
            self.get_logger().warning(
                f"command {values.tolist()} outside the actuator range: saturated to "
                f"{self.sim.target[self.cfg.command_index].tolist()}", throttle_duration_sec=2.0)
        self.commands_accepted += 1
        self.last_command_ns = self.now_ns
        if self.timed_out:
            self.timed_out = False
            self.get_logger().info(f"commands on {self.command_topic} resumed")

    def _on_reset(self, request, response):
        self.sim.reset()
        self.queue.clear()
        self.last_command_ns = None
        self.timed_out = False
        response.success = True
        response.message = (f"reset to the initial configuration {np.round(self.sim.q, 6).tolist()} "
                            f"({', '.join(self.cfg.joint_names)}) at t={self.now_ns / NANOSECONDS:.3f} s")
        self.get_logger().info(response.message)
        return response

    # ---------------------------------------------------------------- parameters

    def _check_runtime_rules(self, params):
        from rcl_interfaces.msg import SetParametersResult

        for p in params:
            if p.name == "real_time_factor" and not self.values["publish_clock"] and p.value != 1.0:
                return SetParametersResult(successful=False, reason="real_time_factor other than 1 needs "
                                           "publish_clock: true (wall-clock stamps must run in real time)")
        return SetParametersResult(successful=True)

    def _on_parameter_change(self, name, value) -> None:
        """Applies an accepted runtime change (noise_std, latency, command_timeout_action: read where used)."""
        if name == "real_time_factor":
            self._rebase_schedule()
        elif name == "command_timeout":
            self.timed_out = False
        elif name == "limit_acceleration":
            self.sim.actuators.limit_acceleration = bool(value)
        elif name == "on_step_error":
            self.sim.on_step_error = value
        elif name == "max_configuration_change":
            self.sim.max_configuration_change = float(value)

    # ---------------------------------------------------------------- markers and diagnostics

    def _marker_layout(self):
        m = self.cfg.description.model
        q = self.cfg.q0
        g = np.asarray(m.placements(q))
        parents = list(m.frame_parents)
        links = [(parents[i], i) for i in range(len(parents))
                 if parents[i] >= 0 and np.linalg.norm(g[i, :3, 3] - g[parents[i], :3, 3]) > 1e-9]
        strings = [(m.frame_index(s.frame1), m.frame_index(s.frame2)) for s in self.cfg.description.strings]
        masses = [m.frame_index(name) for name in m.masses]
        return links, strings, masses

    def _markers(self, now_ns: int):
        links, strings, masses = self._marker_frames
        g = np.asarray(self.cfg.description.model.placements(self.sim.q))

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
        wall = time.monotonic() - self._wall_start
        status = DiagnosticStatus(name=f"{self.get_name()}: simulation", hardware_id=self.cfg.description.model.name)
        if self.last_fault is not None:
            status.level = DiagnosticStatus.WARN
            status.message = f"last integrator fault ({self.last_fault.action}): {self.last_fault.message}"
        elif self.timed_out:
            status.level = DiagnosticStatus.WARN
            status.message = "command timeout"
        else:
            status.level = DiagnosticStatus.OK
            status.message = "running"
        pairs = {
            "sim_time": f"{self.now_ns / NANOSECONDS:.6f}",
            "steps": str(self.sim.steps),
            "achieved_real_time_factor": f"{self.k * self.dt / wall:.3f}" if wall > 0 else "nan",
            "commands_accepted": str(self.commands_accepted),
            "commands_rejected": str(self.commands_rejected),
            "commands_saturated": str(self.commands_saturated),
            "step_errors": str(self.sim.step_errors),
            "command_timed_out": str(self.timed_out).lower(),
            "actuator_positions": str(np.round(self.sim.rho, 6).tolist()),
            "actuator_targets": str(np.round(self.sim.target, 6).tolist()),
        }
        status.values = [KeyValue(key=k, value=v) for k, v in pairs.items()]
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = _stamp(self.now_ns)
        self.diag_pub.publish(msg)


def main(args=None) -> int:
    """Entry point of ``marionette_simulator`` (``ros2 run marionette_control marionette_simulator``)."""
    if _ROS_IMPORT_ERROR is not None:
        raise SystemExit(f"{NODE_NAME} needs rclpy and the message packages: {_ROS_IMPORT_ERROR}")
    return run_node(NODE_NAME, SimulatorNode, args=args)


if __name__ == "__main__":
    raise SystemExit(main())
