"""The hardware profile: what stands between the controller and the simulated plant, one field per effect.

:class:`HardwareProfile` lists the effects :class:`~marionette_control.sim.simulator.SimulatedArm` puts
between the controller and the plant, each a documented field whose metadata carries its description and
validation (:func:`check_profile_field`, the one place of these rules; the simulator node declares its
hardware parameters from them, :mod:`marionette_control.sim.simulator_options`). :data:`PROFILES` holds the two
profiles the package ships: ``"realistic"`` (the default of the simulator node) and ``"perfect"`` (the
nominal model with its holonomic string, no delay, no noise, rate-limited drives: the simulator as it was
before these effects existed, for tests that need exactness). ``docs/simulator.md`` gives the default numbers and
why they were chosen.

Command timing (ros2_control)
-----------------------------
With ros2_control the joint_state_broadcaster publishes the state read at cycle k; the forward
position controller picks a command up at its next update and writes it at cycle k+1, so a
command answering q_k moves the drives during step k+1 → k+2. A command received during cycle k
takes effect at step k + ``command_delay_steps`` (0: the step k → k+1, as if the controller ran
inside the driver), plus, with probability ``command_jitter_probability``, 1 … ``command_jitter_steps``
extra steps (seeded). Commands keep their order (one topic delivers in order): a command never
takes effect before an earlier one.

Encoders
--------
The published position of configuration i is round((q_i + n_i)/δ_i)·δ_i with n_i ~ N(0, σ_i²)
(``noise_std`` σ, ``encoder_resolution`` δ, one value per configuration in model order, or one
value for all; δ = 0: no quantization). Noise and jitter come from one seeded generator each.

The drive laws of ``drive_mode`` are :mod:`marionette_control.sim.drives`'; the plant of
``plant_model_file`` is :mod:`marionette_control.sim.plant`'s; its strings, one-sided or holonomic (``string``),
:mod:`marionette_control.sim.strings`'.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from marionette_control import validation
from marionette_control.sim.drives import DRIVE_MODES
from marionette_control.sim.strings import STRING_MODES

# Encoders of the arm (docs/simulator.md): 14-bit absolute magnetic encoders on the joints, 4096-count
# encoders on the carriage motor (GT2 belt, 20-tooth pulley: 40 mm per turn) and on the winch
# (20 mm spool radius: 125.7 mm of string per turn); read-out noise about half a count on each.
_JOINT_COUNT = 2.0 * math.pi / 16384
_CARRIAGE_COUNT = 0.040 / 4096
_WINCH_COUNT = 2.0 * math.pi * 0.020 / 4096


def _per_config_check(value, maximum: float) -> Optional[str]:
    if len(value) == 0 or any(validation.problem(v, minimum=0.0, maximum=maximum) for v in value):
        return f"must be one value, or one per configuration, each finite and within 0 … {maximum:g}; got {list(value)}"
    return None


def _profile_field(default, description: str, check=None, **limits):
    return field(default=default, metadata={"description": description, "check": check, **limits})


@dataclass(frozen=True)
class HardwareProfile:
    """What stands between the controller and the plant; each field one documented effect.

    Fields carry their description and validation in ``dataclasses.fields(HardwareProfile)[i].metadata``
    (the simulator node declares its parameters from them). Per-configuration tuples hold one value
    for every configuration or one per configuration in the model's order (q = [dynamic; kinematic]).
    """

    name: str = _profile_field("custom", "the profile's name (realistic, perfect, or custom after changes)")
    plant_model_file: str = _profile_field(
        "", "model file of the simulated plant (docs/models.md; relative names under config/): the nominal "
        "model's configurations, joint names and actuators with physical parameters of its own; '': the nominal "
        "model itself")
    string: str = _profile_field(
        "one_sided", "the plant's strings: 'one_sided' (they pull and never push: a string goes slack when holding its "
        "length would take a push, and catches with an inelastic jerk when the arm reaches its length again; "
        "sim/strings.py) or 'holonomic' (held at their length, pulling or pushing: the nominal model's physics)",
        check=lambda v: None if v in STRING_MODES else f"must be one of {', '.join(STRING_MODES)}, got {v!r}")
    command_delay_steps: int = _profile_field(
        1, "a command received during cycle k takes effect at step k + command_delay_steps (1: ros2_control's "
        "read-update-write cycle; 0: within the same cycle)", minimum=0, maximum=100)
    command_jitter_steps: int = _profile_field(
        0, "largest random extra delay of a command [steps], drawn uniformly from 1..command_jitter_steps with "
        "probability command_jitter_probability", minimum=0, maximum=100)
    command_jitter_probability: float = _profile_field(
        0.0, "probability that a command is delayed by extra steps (0: never)", minimum=0.0, maximum=1.0)
    drive_mode: str = _profile_field(
        "cyclic_position", "drive law: 'cyclic_position' (follows the setpoint stream within speed and "
        "acceleration limits), 'profile_position' (brakes to a stop at every setpoint), 'rate_limited' (speed "
        "limit only, ideal)",
        check=lambda v: None if v in DRIVE_MODES else f"must be one of {', '.join(DRIVE_MODES)}, got {v!r}")
    drive_acceleration: float = _profile_field(
        1.0, "the drives' acceleration limit as a fraction of the plant file's actuators' max_acceleration: drives "
        "weaker than the controller and the optimizer are told (a worn belt, a weaker supply; the plant family, "
        "docs/simulator.md); 1: as specified", minimum=0.05, maximum=1.0)
    encoder_resolution: tuple = _profile_field(
        (_JOINT_COUNT, _JOINT_COUNT, _CARRIAGE_COUNT, _WINCH_COUNT),
        "encoder count [rad or m] of each published configuration (model order, or one value for all); "
        "0: no quantization", check=lambda v: _per_config_check(v, 1.0))
    noise_std: tuple = _profile_field(
        (0.5 * _JOINT_COUNT, 0.5 * _JOINT_COUNT, 0.5 * _CARRIAGE_COUNT, 0.5 * _WINCH_COUNT),
        "standard deviation of Gaussian read-out noise [rad or m] of each published configuration (model order, "
        "or one value for all), added before quantization", check=lambda v: _per_config_check(v, 1.0))
    seed: int = _profile_field(0, "seed of the noise and jitter generators; -1: from the operating system",
                               minimum=-1, maximum=2**31 - 1)

    def __post_init__(self):
        for name in ("encoder_resolution", "noise_std"):
            value = getattr(self, name)
            if not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(np.atleast_1d(np.asarray(value, dtype=float)).tolist()))
        for f in dataclasses.fields(self):
            error = check_profile_field(f.name, getattr(self, f.name))
            if error:
                raise ValueError(f"HardwareProfile.{f.name}: {error}")

    @classmethod
    def named(cls, name: str, **changes) -> "HardwareProfile":
        """The shipped profile ``name`` ('realistic' or 'perfect'), with ``changes`` applied (then named 'custom')."""
        if name not in PROFILES:
            raise ValueError(f"unknown hardware profile {name!r} (profiles: {', '.join(PROFILES)})")
        return PROFILES[name].replace(**changes)

    def replace(self, **changes) -> "HardwareProfile":
        """A validated copy with ``changes``; named 'custom' unless a name is given or nothing changed."""
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ValueError(f"unknown HardwareProfile field(s) {', '.join(sorted(unknown))}")
        changes = {k: (tuple(v) if isinstance(getattr(self, k), tuple) and isinstance(v, (list, np.ndarray)) else v)
                   for k, v in changes.items()}
        if any(changes[k] != getattr(self, k) for k in changes) and "name" not in changes:
            changes["name"] = "custom"
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict:
        """The fields as plain values (for reports and parameter files)."""
        return {f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v)
                for f in dataclasses.fields(self)}

    def per_config(self, name: str, nq: int) -> np.ndarray:
        """``encoder_resolution`` or ``noise_std`` as an array (nq,); raises ValueError on a length mismatch."""
        value = np.asarray(getattr(self, name), dtype=float)
        if value.size == 1:
            return np.full(nq, float(value[0]))
        if value.size != nq:
            raise ValueError(f"{name} has {value.size} values; the model has {nq} configurations (give one value "
                             "for all, or one per configuration)")
        return value


def check_profile_field(name: str, value) -> Optional[str]:
    """The error text for an invalid value of a :class:`HardwareProfile` field, or None (the one place of these rules)."""
    f = next((f for f in dataclasses.fields(HardwareProfile) if f.name == name), None)
    if f is None:
        return f"unknown field {name!r}"
    default = f.default
    if isinstance(value, bool):
        return f"expected {type(default).__name__}, got {value!r}"
    if isinstance(default, int) and not isinstance(value, int):
        return f"expected an integer, got {value!r}"
    if isinstance(default, float) and (problem := validation.problem(value)):
        return f"expected {problem}"
    if isinstance(default, str) and not isinstance(value, str):
        return f"expected text, got {value!r}"
    lo, hi = f.metadata.get("minimum"), f.metadata.get("maximum")
    if lo is not None and value < lo or hi is not None and value > hi:
        return f"must be within {lo} … {hi}, got {value!r}"
    check = f.metadata.get("check")
    return check(value) if check is not None else None


PROFILES: dict[str, HardwareProfile] = {
    "realistic": HardwareProfile(name="realistic", plant_model_file="marionette_arm_plant.yaml", string="one_sided"),
    "perfect": HardwareProfile(name="perfect", plant_model_file="", string="holonomic", command_delay_steps=0,
                               drive_mode="rate_limited", encoder_resolution=(0.0,), noise_std=(0.0,)),
}
#: The plant family of issue 24 (docs/tracking.md, "Plant family"): changes to the realistic profile, each checked
#: alone — the forearm 25 % heavier, the string's hook 5 mm further out, three times the encoder noise, the drives
#: at 0.6 of the controller's acceleration limit, three times the joint damping (``config/plants/``).
PLANT_FAMILY: dict[str, dict] = {
    "forearm_heavy": dict(plant_model_file="plants/forearm_heavy.yaml"),
    "hook_out_5mm": dict(plant_model_file="plants/hook_out_5mm.yaml"),
    "noise_x3": dict(noise_std=tuple(3.0 * np.asarray(PROFILES["realistic"].noise_std))),
    "drives_x0.6": dict(drive_acceleration=0.6),
    "damping_x3": dict(plant_model_file="plants/damping_x3.yaml"),
}
#: Noise seeds a plant of the family is checked on: one whose error is the noise on three (one seed passes or fails
#: by the draw), the others on seed 0.
PLANT_FAMILY_SEEDS: dict[str, tuple] = {"noise_x3": (0, 1, 2)}
#: The library motions (config/motions/) the family is checked on: the wave and two of other character.
PLANT_FAMILY_MOTIONS = ("wave", "bow", "figure_eight")
