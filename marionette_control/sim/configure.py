"""The simulator node's configure step without ROS: the rules between its parameters, and the arm they build.

:func:`configure` (ros2_controllers' configure step) loads the nominal model, checks what one parameter alone
cannot (``dt`` against ``publish_rate``, the clock parameters, the command joints against the model's drives,
the initial pose against the drives' range, the profile against the plant) and builds the
:class:`~marionette_control.sim.simulator.SimulatedArm`; a value that does not work raises
:class:`~marionette_control.parameters.ParameterError` naming the parameter. The parameters themselves are
:mod:`marionette_control.sim.simulator_options`'.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from marionette_control.model.joint_map import JointMap, JointMapError
from marionette_control.model.library import marionette_arm as arm
from marionette_control.model.limits import from_description
from marionette_control.model.yaml_model import ModelDescription, load_packaged_model
from marionette_control.parameters import ParameterError
from marionette_control.sim.simulator_options import disturbance_limits, hardware_profile
from marionette_control.sim.plant import load_plant
from marionette_control.sim.profile import HardwareProfile
from marionette_control.sim.schedule import NANOSECONDS
from marionette_control.sim.simulator import SimulatedArm


@dataclass
class SimulatorConfig:
    """Everything derived from the parameters at start-up (ros2_controllers' configure step)."""

    description: ModelDescription      # the nominal model
    profile: HardwareProfile
    arm: SimulatedArm
    q0: np.ndarray                     # the initial configuration of the nominal model (drives start here)
    joint_names: list
    command_index: np.ndarray          # command data[i] -> kinematic index command_index[i]
    drive_index: dict                  # {hardware name of a drive: its kinematic index}
    publish_every: int
    marker_every: int                  # 0: no markers


def steps_per_period(rate: float, dt: float) -> int:
    """Integer n with n·dt = 1/rate; raises ValueError when 1/rate is not a whole number of steps."""
    n = 1.0 / (rate * dt)
    k = round(n)
    if k < 1 or abs(n - k) > 1e-6 * max(1.0, n):
        raise ValueError(f"1/rate = {1.0 / rate:.6g} s is not a whole number of integration steps dt = {dt:g} s")
    return int(k)


def configure(values: dict, use_sim_time: bool = False) -> SimulatorConfig:
    """Validates the cross-parameter rules and builds the arm; raises ParameterError naming the parameter."""
    try:
        desc = load_packaged_model(values["model_file"])
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
        if values["lockstep_timeout"] > 0.0:
            raise ParameterError(f"parameter 'lockstep_timeout' is {values['lockstep_timeout']} but publish_clock is "
                                 "false: waiting for the controller stops simulated time, which only a simulator "
                                 "that is the graph's clock can do (set publish_clock: true)")
        if values["real_time_factor"] != 1.0:
            raise ParameterError(f"parameter 'real_time_factor' is {values['real_time_factor']} but publish_clock is "
                                 "false: with wall-clock stamps the simulation must run in real time (set "
                                 "publish_clock: true to run faster or slower)")
        if use_sim_time:
            raise ParameterError("parameter 'use_sim_time' is true but publish_clock is false: the simulator would "
                                 "wait for a clock nobody publishes; set publish_clock: true (the simulator is "
                                 "the clock) or use_sim_time: false")

    joints = JointMap.of(m, desc.hardware_joints)
    joint_names = joints.hardware_names
    kin_hw = joints.kinematic_hardware_names
    try:
        command_index = joints.command_order(list(values["command_joints"]))
    except JointMapError as e:
        raise ParameterError(f"parameter 'command_joints' {e} (model '{m.name}')") from None

    q0 = _initial_configuration(desc, values["initial_pose"], values["initial_configuration"])
    lim = from_description(desc)
    rho0 = q0[m.nd:]
    outside = [f"{kin_hw[i]}={rho0[i]:.4g} (range {lim.lower[i]:g}..{lim.upper[i]:g})"
               for i in range(m.nk) if not (lim.lower[i] <= rho0[i] <= lim.upper[i])]
    if outside:
        raise ParameterError(f"parameter 'initial_configuration': the initial actuator positions are outside "
                             f"their range: {', '.join(outside)}")

    profile = hardware_profile(values)
    for name in ("encoder_resolution", "noise_std"):
        try:
            profile.per_config(name, m.nq)
        except ValueError as e:
            raise ParameterError(f"parameter '{name}': {e} ({', '.join(joint_names)})") from None
    try:
        load_plant(profile, desc)
    except ValueError as e:
        raise ParameterError(f"parameter 'plant_model_file': {e}") from None
    try:
        sim = SimulatedArm(profile, dt, desc, q0=q0, newton_tolerance=values["newton_tolerance"],
                           newton_max_iterations=values["newton_max_iterations"],
                           on_step_error=values["on_step_error"],
                           max_configuration_change=values["max_configuration_change"],
                           disturbance_limits=disturbance_limits(values))
    except ValueError as e:   # the plant cannot rest with the drives at the initial pose
        raise ParameterError(f"parameter 'initial_configuration': {e}") from None
    return SimulatorConfig(desc, profile, sim, q0, joint_names, command_index, {h: i for i, h in enumerate(kin_hw)},
                           publish_every, marker_every)


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
