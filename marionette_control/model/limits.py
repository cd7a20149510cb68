"""The physical limits of a model, read in one place: drives, strings, joints, force inputs.

Every reader of limits (the optimizer's constraints, the simulator's drive model, the
controller's clamp, reports and plots) takes them from :func:`load_limits` /
:func:`limits_of`, so a model file states each limit once:

* **drives** — the ``actuators`` section of a YAML model file (``docs/models.md``): position
  range, speed and acceleration of each kinematic (prescribed) configuration;
* **strings** — the minimum tension of every string (a distance constraint whose length is a
  kinematic configuration, :mod:`.strings`): ``min_tension`` of the file's string entry, else
  :data:`DEFAULT_MIN_TENSION` (a string can only pull; a small positive floor keeps it taut
  with a margin, so a real string on the optimized trajectory never goes slack);
* **joints** — ``<limit lower upper velocity>`` of the URDF joints a model file builds on (optional
  configuration bounds: they bound configurations only when a problem asks for them; with the
  velocities, the controller's plausibility checks of measured joint states). A URDF joint of a
  drive (the carriage; the winch, whose joint is the string's length) states that drive's range
  and speed a second time, for robot_state_publisher and ros2_control: it must agree with the
  ``actuators`` entry (:func:`from_description` refuses a file where it does not);
* **force inputs** — none are known from a file; problems may bound them.

Arrays are aligned with the model's layout (thesis §3.6: q = [dynamic; kinematic]); an absent
limit is ±inf. Units are SI (m, rad, m/s, m/s², N).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from marionette_control import _core
from marionette_control.model.strings import string_constraints
from marionette_control.model.urdf import joint_limits

#: Minimum string tension [N] where a model file does not state one.
DEFAULT_MIN_TENSION = 0.5


@dataclass(frozen=True)
class ActuatorLimits:
    """Range, speed and acceleration limits of one prescribed (kinematic) configuration, SI units."""

    min: float
    max: float
    max_velocity: float
    max_acceleration: Optional[float] = None

    def contains(self, value: float) -> bool:
        return self.min <= value <= self.max


@dataclass(frozen=True)
class ModelLimits:
    """Limits of one model, aligned with its layout (absent limits are ±inf).

    Attributes
    ----------
    model_name : str
    kinematic : tuple of the nk kinematic configuration names (model order)
    lower, upper, max_velocity, max_acceleration : ndarray (nk,)
        Drive range [m or rad], speed [/s] and acceleration [/s²] of each kinematic configuration.
    strings : tuple of string (constraint) names;  string_index : their constraint indices (into λ)
    string_length : their length configuration indices (into q)
    min_tension : ndarray (n_strings,) [N]
    config_lower, config_upper : ndarray (nq,)  joint limits (URDF ``<limit>``)
    config_max_velocity : ndarray (nq,)  joint velocity limits (URDF ``<limit velocity>``)
    force_lower, force_upper : ndarray (nu,)  force-input bounds
    drives : {configuration: ActuatorLimits}  the file's entries, for reports
    """

    model_name: str
    kinematic: tuple
    lower: np.ndarray
    upper: np.ndarray
    max_velocity: np.ndarray
    max_acceleration: np.ndarray
    strings: tuple
    string_index: tuple
    string_length: tuple
    min_tension: np.ndarray
    config_lower: np.ndarray
    config_upper: np.ndarray
    config_max_velocity: np.ndarray
    force_lower: np.ndarray
    force_upper: np.ndarray
    drives: dict = field(default_factory=dict)

    def saturate(self, rho: np.ndarray) -> np.ndarray:
        """Kinematic configurations ρ (nk,) clipped to the drives' range."""
        return np.clip(rho, self.lower, self.upper)

    def input_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) (nU,) of the discrete inputs u = [force inputs; ρ_next]."""
        return np.r_[self.force_lower, self.lower], np.r_[self.force_upper, self.upper]

    def configuration_limits(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(lower, upper, max_velocity), each (nq,) in model order: the range and speed of every configuration
        as the machine bounds it — a joint's URDF ``<limit>``, a drive's ``actuators`` entry; ±inf where none
        is known. (What a measured configuration can plausibly be, the controller's sample checks.)"""
        lower, upper, speed = self.config_lower.copy(), self.config_upper.copy(), self.config_max_velocity.copy()
        drives = slice(lower.size - len(self.kinematic), lower.size)    # q = [dynamic; kinematic]
        lower[drives], upper[drives], speed[drives] = self.lower, self.upper, self.max_velocity
        return lower, upper, speed

    def with_min_tension(self, values) -> "ModelLimits":
        """A copy with other minimum tensions: one number for every string or one per string."""
        v = np.broadcast_to(np.asarray(values, dtype=float), (len(self.strings),)).copy()
        return dataclasses.replace(self, min_tension=v)

    def with_config_bounds(self, lower: np.ndarray, upper: np.ndarray) -> "ModelLimits":
        return dataclasses.replace(self, config_lower=np.asarray(lower, float), config_upper=np.asarray(upper, float))

    def with_force_bounds(self, lower: np.ndarray, upper: np.ndarray) -> "ModelLimits":
        return dataclasses.replace(self, force_lower=np.asarray(lower, float), force_upper=np.asarray(upper, float))

    def to_dict(self) -> dict:
        """JSON-able summary (trajectory metadata, reports): finite limits only."""
        def finite(a):
            return [None if not math.isfinite(v) else float(v) for v in a]

        return {
            "drives": {n: {"min": finite([self.lower[i]])[0], "max": finite([self.upper[i]])[0],
                           "max_velocity": finite([self.max_velocity[i]])[0],
                           "max_acceleration": finite([self.max_acceleration[i]])[0]}
                       for i, n in enumerate(self.kinematic)},
            "min_tension": {s: float(t) for s, t in zip(self.strings, self.min_tension)},
        }


def limits_of(model: "_core.Model", actuators: Optional[dict] = None, min_tension: Optional[dict] = None,
              joint_limits: Optional[dict] = None, joint_velocities: Optional[dict] = None) -> ModelLimits:
    """The limits of ``model`` from a description's parts.

    actuators : {kinematic configuration: ActuatorLimits-like (min, max, max_velocity, max_acceleration)}
    min_tension : {string name: N}; strings not named get :data:`DEFAULT_MIN_TENSION`
    joint_limits : {configuration: (lower, upper)};  joint_velocities : {configuration: max |velocity|}
    Raises ValueError naming an entry that does not fit the model.
    """
    nd, nk, nq = model.nd, model.nk, model.nq
    kinematic = tuple(model.config_names[nd:])
    lo, hi, vmax, amax = (np.full(nk, v) for v in (-np.inf, np.inf, np.inf, np.inf))
    drives = {}
    for name, a in (actuators or {}).items():
        if name not in kinematic:
            raise ValueError(f"actuator limits given for '{name}', which is not a kinematic configuration of model "
                             f"'{model.name}' (kinematic: {', '.join(kinematic) or 'none'})")
        i = kinematic.index(name)
        lo[i], hi[i], vmax[i] = a.min, a.max, a.max_velocity
        if a.max_acceleration is not None:
            amax[i] = a.max_acceleration
        drives[name] = ActuatorLimits(a.min, a.max, a.max_velocity, a.max_acceleration)
    strings = string_constraints(model)
    names = [s.name for s in strings]
    unknown = sorted(set(min_tension or {}) - set(names))
    if unknown:
        raise ValueError(f"minimum tension given for {', '.join(unknown)}, not a string of model '{model.name}' "
                         f"(strings: {', '.join(names) or 'none'})")
    tension = np.array([float((min_tension or {}).get(n, DEFAULT_MIN_TENSION)) for n in names])
    clo, chi, cvel = np.full(nq, -np.inf), np.full(nq, np.inf), np.full(nq, np.inf)
    for name, (a, b) in (joint_limits or {}).items():
        if name not in model.config_names:
            raise ValueError(f"joint limits given for '{name}', not a configuration of model '{model.name}'")
        i = model.config_index(name)
        clo[i], chi[i] = a, b
    for name, v in (joint_velocities or {}).items():
        if name not in model.config_names:
            raise ValueError(f"a joint velocity limit given for '{name}', not a configuration of model "
                             f"'{model.name}'")
        if not v > 0:
            raise ValueError(f"the velocity limit of '{name}' must be > 0, got {v}")
        cvel[model.config_index(name)] = v
    constraint_names = list(model.constraint_names)
    return ModelLimits(
        model.name, kinematic, lo, hi, vmax, amax, tuple(names), tuple(constraint_names.index(n) for n in names),
        tuple(model.config_index(s.length) for s in strings), tension, clo, chi, cvel, np.full(model.nu, -np.inf),
        np.full(model.nu, np.inf), drives)


def from_description(desc) -> ModelLimits:
    """The limits a loaded YAML model file states (``yaml_model.ModelDescription``).

    URDF ``<limit>``: ``lower``/``upper`` bound a joint unless both are 0 (a continuous joint's, or none
    stated); ``velocity`` 0 means unspecified. Raises ValueError where a drive's URDF joint and its
    ``actuators`` entry state different ranges or speeds (``yaml_model.load_model_file`` refuses such a
    file).
    """
    joints, velocities = {}, {}
    if desc.urdf is not None:

        rename = ((desc.raw.get("urdf") or {}).get("rename") or {})
        for joint, lim in joint_limits(desc.urdf).items():
            config = rename.get(joint, joint)
            if config not in desc.model.config_names:
                continue
            if "lower" in lim and "upper" in lim and not lim["lower"] == lim["upper"] == 0.0:
                joints[config] = (lim["lower"], lim["upper"])
            if lim.get("velocity", 0.0) > 0:
                velocities[config] = lim["velocity"]
            if config in desc.actuators:
                _check_drive_joint(desc, joint, config, joints.get(config), velocities.get(config))
    tensions = {s.name: s.min_tension for s in desc.strings if s.min_tension is not None}
    return limits_of(desc.model, desc.actuators, tensions, joints, velocities)


def _check_drive_joint(desc, joint: str, config: str, bounds: Optional[tuple], velocity: Optional[float]) -> None:
    """A drive's URDF ``<limit>`` must state what its ``actuators`` entry states (where it states anything)."""
    a = desc.actuators[config]
    differ = []
    if bounds is not None and (bounds[0] != a.min or bounds[1] != a.max):
        differ.append(f"range [{bounds[0]:g}, {bounds[1]:g}] against [{a.min:g}, {a.max:g}]")
    if velocity is not None and velocity != a.max_velocity:
        differ.append(f"velocity {velocity:g} against max_velocity {a.max_velocity:g}")
    if differ:
        raise ValueError(f"{desc.path}: actuators.{config}: the URDF <limit> of joint '{joint}' states other limits "
                         f"of this drive ({'; '.join(differ)}): make them equal (the URDF's are what "
                         "robot_state_publisher and ros2_control read, the actuators' what the optimizer, simulator "
                         "and controller enforce)")


def load_limits(source) -> ModelLimits:
    """The limits of a model source (``models.source.ModelSource``): its YAML file's, or for a registered
    model the file its module describes it with (``load_description()``, e.g. the marionette arm); a
    registered model without a file has default string tensions and no other limits."""
    desc = source.description()
    return from_description(desc) if desc is not None else limits_of(source.build())


__all__ = ["DEFAULT_MIN_TENSION", "ActuatorLimits", "ModelLimits", "limits_of", "from_description", "load_limits"]
