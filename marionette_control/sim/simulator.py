"""The hardware stand-in without ROS: the arm as a controller meets it on the robot.

:class:`SimulatedArm` integrates a *plant* model with the core's midpoint variational integrator
(``_core.DiscreteSystem.step``, thesis (4.36)) and puts between it and the controller what real
hardware puts there. Each effect is a field of :class:`HardwareProfile`; ``HardwareProfile.named``
gives the two profiles the package ships: ``"realistic"`` (the default of the simulator node) and
``"perfect"`` (the nominal model, no delay, no noise, rate-limited drives: the simulator as it was
before these effects existed, for tests that need exactness). ``marionette_simulator``
(``nodes/simulator.py``) is a thin ROS adapter around this module; ``docs/simulator.md`` gives the
default numbers and why they were chosen.

One cycle
---------
Cycle k runs between the measurement of q_k and the integrator step k → k+1::

    q_meas = arm.measure()             # q_k as the encoders report it
    arm.receive_command(rho_target)    # the controller's answer, received during cycle k
    arm.step()                         # drives, then x_{k+1} = f(x_k, u_k); k += 1

Plant
-----
``plant_model_file`` names a model file (``docs/models.md``) with the same configurations, joint
names and actuators as the nominal model the optimizer and controller use, but physical
parameters of its own: ``config/marionette_arm_plant.yaml`` is the nominal arm with the errors a
careful CAD model has (masses, inertias, centres of mass, hook position, joint damping). The
controller never sees it. An empty name is the nominal model itself.

Command timing (ros2_control)
-----------------------------
With ros2_control the joint_state_broadcaster publishes the state read at cycle k; the forward
position controller picks a command up at its next update and writes it at cycle k+1, so a
command answering q_k moves the drives during step k+1 → k+2. A command received during cycle k
takes effect at step k + ``command_delay_steps`` (0: the step k → k+1, as if the controller ran
inside the driver), plus, with probability ``command_jitter_probability``, 1 … ``command_jitter_steps``
extra steps (seeded). Commands keep their order (one topic delivers in order): a command never
takes effect before an earlier one.

Drives (``drive_mode``; limits from the plant file's ``actuators`` section)
--------------------------------------------------------------------------
Each kinematic configuration ρ is a position drive. Per step it receives the setpoint r_{k+1}
(the last command in effect) and moves from ρ_k with speed v_k = (ρ_k − ρ_{k−1})/Δt to ρ_{k+1};
a_max, v_max are its acceleration and speed limits, [ρ_min, ρ_max] its range (always applied
last, as a hard stop).

``cyclic_position`` (default; a servo drive in cyclic synchronous position mode with a setpoint
interpolator): the setpoints are samples of a motion. The drive estimates the stream's speed
w = clip((r_{k+1} − r_k)/Δt, ±v_max) and its lag behind the stream D = (r_{k+1} − wΔt) − ρ_k,
and closes the lag in the frame moving with the stream no faster than it can brake:

    v* = w + sign(D) · s_brake(|D|)
    v_{k+1} = clip(v*, max(v_k − a_max Δt, −v_max, −s_brake(ρ_k − ρ_min)),
                       min(v_k + a_max Δt, v_max, s_brake(ρ_max − ρ_k)))
    ρ_{k+1} = ρ_k + v_{k+1} Δt

s_brake(d) is the largest relative speed s from which slowing by a_max Δt per step covers no more
than d, this step included: the distance Δt Σ_{j=0..n} (s − j a_max Δt), n = ⌊s/(a_max Δt)⌋, is
linear in s between multiples of a_max Δt, so

    n = ⌊(sqrt(1 + 8d/(a_max Δt²)) − 1)/2⌋,   s_brake(d) = (d + a_max Δt² n(n+1)/2) / ((n+1) Δt)

(at most d/Δt: a gap within one step's reach is closed exactly). A stream moving at constant
speed, a stationary setpoint included, is therefore reached without overshoot. A stream that
respects the limits is followed exactly once the drive is on it (D = 0, v* = w is admissible,
ρ_{k+1} = r_{k+1}); a stream that does not is followed as closely as the limits allow, never
braking to a stop at each setpoint. The drive also brakes in time for the ends of its range (a
drive's software position limits), so it never meets the hard stop at speed.

``profile_position`` (a drive in profile position mode: every setpoint is a point-to-point
move): w = 0 in the law above, so the drive brakes to a stop at every setpoint; following a
moving stream it lags by the distance it needs to stop, about v²/(2 a_max) (0.03 m for the
carriage at 1 m/s). This was the simulator's ``limit_acceleration`` model (whose continuous
braking distance s²/(2a) + sΔt/2 overshot by up to a_max Δt²/8; the discrete one here does not).

``rate_limited`` (ideal servo, the ``perfect`` profile): |ρ_{k+1} − ρ_k| ≤ v_max Δt, no
acceleration limit; a setpoint within one step's reach is applied exactly.

Encoders
--------
The published position of configuration i is round((q_i + n_i)/δ_i)·δ_i with n_i ~ N(0, σ_i²)
(``noise_std`` σ, ``encoder_resolution`` δ, one value per configuration in model order, or one
value for all; δ = 0: no quantization). Noise and jitter come from one seeded generator each.

Disturbances
------------
:meth:`SimulatedArm.disturb` pushes a body (a frame of the plant with a mass, moved by a dynamic
configuration) with a force fixed in world coordinates: an ``impulse`` (delivered within one
step), a ``constant`` force or a ``half_sine`` F·sin(π t/T) over a duration. The plant model
carries a body wrench with three force inputs on every such body (thesis (3.19): F = J_bᵀ W,
forcing f⁻ = Δt F at the step's midpoint, thesis (4.12a)); each step sets W = [R_bᵀ F; 0] with
R_b the body's orientation at q_k. Without a disturbance these inputs are zero and the step is
the plant's own, bit for bit.

Faults
------
A step fails with a ``_core.StepError``, a non-finite state or an implausible jump (a dynamic
configuration moving more than ``max_configuration_change`` in one step: Newton converged to a
spurious root, e.g. with the string pulled past the arm's reach). With ``on_step_error="hold"``
the step is retried with the drives held (ρ_{k+1} = ρ_k), then backed off (ρ_{k+1} = ρ_{k−1}),
and the result becomes the setpoint; if neither works, or with ``"reset"``, the arm is reset.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
from scipy.optimize import minimize, root

from marionette_control import _core
from marionette_control.model.builder import SystemBuilder
from marionette_control.model.limits import ModelLimits, from_description
from marionette_control.model.yaml_model import ModelDescription, load_model_file
from marionette_control.model.library import marionette_arm as arm
from marionette_control.resources import config_file

DRIVE_MODES = ("cyclic_position", "profile_position", "rate_limited")
DISTURBANCE_PROFILES = ("impulse", "constant", "half_sine")
NOMINAL_MODEL_FILE = arm.CONFIG_FILE

# Encoders of the arm (docs/simulator.md): 14-bit absolute magnetic encoders on the joints, 4096-count
# encoders on the carriage motor (GT2 belt, 20-tooth pulley: 40 mm per turn) and on the winch
# (20 mm spool radius: 125.7 mm of string per turn); read-out noise about half a count on each.
_JOINT_COUNT = 2.0 * math.pi / 16384
_CARRIAGE_COUNT = 0.040 / 4096
_WINCH_COUNT = 2.0 * math.pi * 0.020 / 4096


def _per_config_check(value, maximum: float) -> Optional[str]:
    if len(value) == 0 or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                                  and 0.0 <= v <= maximum for v in value):
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
    if isinstance(default, float) and not (isinstance(value, (int, float)) and math.isfinite(value)):
        return f"expected a finite number, got {value!r}"
    if isinstance(default, str) and not isinstance(value, str):
        return f"expected text, got {value!r}"
    lo, hi = f.metadata.get("minimum"), f.metadata.get("maximum")
    if lo is not None and value < lo or hi is not None and value > hi:
        return f"must be within {lo} … {hi}, got {value!r}"
    check = f.metadata.get("check")
    return check(value) if check is not None else None


PROFILES: dict[str, HardwareProfile] = {
    "realistic": HardwareProfile(name="realistic", plant_model_file="marionette_arm_plant.yaml"),
    "perfect": HardwareProfile(name="perfect", plant_model_file="", command_delay_steps=0, drive_mode="rate_limited",
                               encoder_resolution=(0.0,), noise_std=(0.0,)),
}


# ============================================================================ drives


class Drives:
    """Position drives of the kinematic configurations (arrays (nk,)), the laws of the module docstring.

    limits : the plant's actuator limits; mode : one of DRIVE_MODES; dt : step [s].
    ``setpoint`` is r_{k+1}, the position the drive is commanded to; ``advance`` gives ρ_{k+1}.
    """

    def __init__(self, limits: ModelLimits, mode: str, dt: float):
        self.limits = limits
        self.mode = mode
        self.dt = float(dt)
        a = limits.max_acceleration
        self._a = a
        self._finite_a = np.isfinite(a)
        self.setpoint = np.zeros(a.size)
        self._previous = np.zeros(a.size)   # setpoint of the previous step (the stream's last sample)

    def reset(self, rho: np.ndarray) -> None:
        """At rest at ρ; the setpoint is ρ."""
        self.setpoint = np.array(rho, dtype=float)
        self._previous = self.setpoint.copy()

    def command(self, setpoint: np.ndarray) -> None:
        self.setpoint = np.array(setpoint, dtype=float)

    def hold(self, rho: np.ndarray, v: np.ndarray) -> None:
        """A stationary setpoint where the drive comes to rest braking at its limit (ρ itself if
        ``rate_limited``): the drives stop without turning back."""
        self.setpoint = self.stopping_point(rho, v)
        self._previous = self.setpoint.copy()

    def _brake_speed(self, gap: np.ndarray) -> np.ndarray:
        """s_brake(gap) (nk,): largest speed from which the drive stops within |gap| (this step included)."""
        a_dt2 = np.where(self._finite_a, self._a, 1.0) * self.dt ** 2
        d = np.abs(gap)
        n = np.floor((np.sqrt(1.0 + 8.0 * d / a_dt2) - 1.0) / 2.0)
        n = np.where(a_dt2 * n * (n + 1.0) / 2.0 > d, n - 1.0, n)   # round-off of the square root
        s = (d + a_dt2 * n * (n + 1.0) / 2.0) / ((n + 1.0) * self.dt)
        return np.where(self._finite_a, s, np.inf)

    def advance(self, rho: np.ndarray, v: np.ndarray) -> np.ndarray:
        """ρ_{k+1} (nk,) from ρ_k and v_k = (ρ_k − ρ_{k−1})/Δt towards the setpoint."""
        lim, dt, r = self.limits, self.dt, self.setpoint
        if self.mode == "rate_limited":
            e = r - rho
            reach = lim.max_velocity * dt
            within = np.abs(e) <= reach * (1.0 + 1e-9)
            nxt = np.where(within, r, rho + np.clip(e, -reach, reach))
        else:
            vmax = lim.max_velocity
            w = np.zeros_like(r) if self.mode == "profile_position" else np.clip((r - self._previous) / dt, -vmax, vmax)
            lag = (r - w * dt) - rho
            relative = np.sign(lag) * np.minimum(np.abs(lag) / dt, self._brake_speed(lag))   # s_brake ≤ |D|/Δt
            a_dt = np.where(self._finite_a, self._a * dt, np.inf)
            # the window of admissible speeds: acceleration, speed, and braking in time for the range's ends
            lo = np.maximum(np.maximum(v - a_dt, -vmax), -self._brake_speed(rho - lim.lower))
            hi = np.minimum(np.minimum(v + a_dt, vmax), self._brake_speed(lim.upper - rho))
            speed = np.clip(w + relative, lo, np.maximum(hi, lo))
            nxt = rho + speed * dt
            nxt = np.where(np.abs(nxt - r) <= 1e-12 * np.maximum(1.0, np.abs(r)), r, nxt)
        self._previous = r.copy()
        return np.clip(nxt, lim.lower, lim.upper)

    def stopping_point(self, rho: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Where the drive comes to rest braking at its limit from ρ_k, v_k (ρ itself for ``rate_limited``)."""
        if self.mode == "rate_limited":
            return np.array(rho, dtype=float)
        a_dt = np.where(self._finite_a, self._a * self.dt, np.inf)
        n = np.floor(np.abs(v) / a_dt)   # further steps at decreasing speed |v| − j a Δt > 0
        distance = self.dt * (n * np.abs(v) - a_dt * n * (n + 1) / 2.0)
        return self.limits.saturate(rho + np.sign(v) * distance)


# ============================================================================ rest configurations


def rest_configuration(model: _core.Model, q: np.ndarray, tolerance: float = 1e-11) -> np.ndarray:
    """The configuration (nq,) at which ``model`` rests with the kinematic configurations of ``q``.

    A static equilibrium: ∂V/∂q_d = Dh_dᵀ μ and h(q) = 0 (V = ``model.energy(q, 0)``, d the dynamic
    configurations), the stable one near ``q``. It is found as the minimum of V on the constraint set
    (SLSQP with the core's exact gradients), then the equations are solved to round-off (MINPACK's
    hybrid method, started with the Jacobian [[∂²V/∂q_d², −Dh_dᵀ], [Dh_d, 0]] that omits the string's
    curvature μ·∂²h and corrected by its rank-one updates). ``q`` is returned unchanged when it already
    is a rest configuration (relative residual below ``tolerance``), so a model's own rest poses stay
    bit for bit. Raises ValueError when none is found within the tolerance.
    """
    q = np.array(q, dtype=float)
    nd, nc, nq = model.nd, model.nc, model.nq
    zero = np.zeros(nq)
    if _rest_residual(model, q) <= tolerance:
        return q

    def full(qd):
        return np.concatenate([qd, q[nd:]])

    def gradient(qd):   # ∂V/∂q_d = −∂L/∂q_d at rest
        return -np.asarray(model.lagrangian(full(qd), zero, 1)["Lq"])[:nd]

    constraints = []
    if nc:
        constraints = [{"type": "eq", "fun": lambda qd: np.asarray(model.constraints(full(qd))[0]),
                        "jac": lambda qd: np.asarray(model.constraints(full(qd))[1])[:, :nd]}]
    def failed(why: str) -> ValueError:
        return ValueError(f"no rest configuration of '{model.name}' found near {np.round(q, 6).tolist()} with the "
                          f"kinematic configurations held ({why})")

    try:
        res = minimize(lambda qd: model.energy(full(qd), zero), q[:nd], jac=gradient, constraints=constraints,
                       method="SLSQP", options={"ftol": 1e-14, "maxiter": 500})
    except ValueError as e:   # the core refuses a non-finite iterate
        raise failed(str(e)) from None
    qd = res.x

    def kkt(z):
        qz = full(z[:nd])
        g = -np.asarray(model.lagrangian(qz, zero, 1)["Lq"])[:nd]
        if not nc:
            return g
        h, dh = (np.asarray(a) for a in model.constraints(qz))
        return np.concatenate([g - dh[:, :nd].T @ z[nd:], h])

    def kkt_jacobian(z):
        qz = full(z[:nd])
        vqq = -np.asarray(model.lagrangian(qz, zero, 2)["Lqq"])[:nd, :nd]
        if not nc:
            return vqq
        jd = np.asarray(model.constraints(qz)[1])[:, :nd]
        return np.block([[vqq, -jd.T], [jd, np.zeros((nc, nc))]])

    z0 = qd
    if nc:
        jd = np.asarray(model.constraints(full(qd))[1])[:, :nd]
        z0 = np.concatenate([qd, np.linalg.lstsq(jd.T, gradient(qd), rcond=None)[0]])
    try:
        sol = root(kkt, z0, jac=kkt_jacobian, method="hybr", options={"xtol": 1e-15})
        rest = full(sol.x[:nd])
        residual = _rest_residual(model, rest)
    except ValueError as e:
        raise failed(str(e)) from None
    if not residual <= tolerance:
        raise failed(f"residual {residual:.2g}; {res.message}; {sol.message}")
    return rest


def _rest_residual(model: _core.Model, q: np.ndarray) -> float:
    """Residual of ∂V/∂q_d = Dh_dᵀ μ (least-squares μ) relative to |∂V/∂q_d|, and |h(q)|."""
    nd = model.nd
    g = -np.asarray(model.lagrangian(q, np.zeros(model.nq), 1)["Lq"])[:nd]
    if not model.nc:
        return float(np.linalg.norm(g))
    scale = max(float(np.linalg.norm(g)), 1e-300)
    h, dh = (np.asarray(a) for a in model.constraints(q))
    jd = dh[:, :nd]
    mu = np.linalg.lstsq(jd.T, g, rcond=None)[0]
    return max(float(np.linalg.norm(g - jd.T @ mu)) / scale, float(np.max(np.abs(h))))


# ============================================================================ disturbances


@dataclass(frozen=True)
class DisturbanceLimits:
    """Bounds beyond which a disturbance request is refused as implausible (SI units)."""

    max_force: float = 50.0       # N, peak of a force profile
    max_impulse: float = 5.0      # N s
    max_duration: float = 10.0    # s


@dataclass(frozen=True)
class Disturbance:
    """A scheduled push: body, world-frame forces (n, 3) for the steps start_step … start_step + n − 1."""

    body: str
    profile: str
    start_step: int
    forces: np.ndarray

    @property
    def end_step(self) -> int:
        return self.start_step + len(self.forces)

    def impulse(self, dt: float) -> np.ndarray:
        """Total impulse (3,) [N s]: Δt Σ F_j (the forcing of thesis (4.12a))."""
        return dt * self.forces.sum(axis=0)


class DisturbanceError(ValueError):
    """A disturbance request that cannot be applied; the message says what was wrong and what is expected."""


def _disturbance_inputs(plant: _core.Model) -> dict[str, tuple[int, list[str]]]:
    """{body frame: (frame index, [its three force input names])} for every frame with a mass moved by a
    dynamic configuration."""
    dynamic = set(range(plant.nd))
    bodies = {}
    for name in plant.masses:
        i = plant.frame_index(name)
        configs, j = set(), i
        while j >= 0:
            c = plant.frame_configs[j]
            if c >= 0:
                configs.add(c)
            j = plant.frame_parents[j]
        if configs & dynamic:
            bodies[name] = (i, [f"disturbance_{name}_f{axis}" for axis in "xyz"])
    return bodies


def _with_disturbance_inputs(plant: _core.Model, bodies: dict) -> _core.Model:
    b = SystemBuilder.from_model(plant)
    for name, (_, inputs) in bodies.items():
        b.body_wrench(name, [*inputs, 0.0, 0.0, 0.0], name=f"disturbance_{name}")
    return b.build()


# ============================================================================ the arm


@dataclass(frozen=True)
class StepFault:
    """A failed integrator step and what the arm did about it: 'held', 'backed_off' or 'reset'."""

    message: str
    action: str


class ImplausibleStep(RuntimeError):
    """The integrator converged, but to a state the arm cannot reach in one step (a spurious Newton root)."""


def _model_file(name: str | os.PathLike) -> Path:
    p = Path(name)
    return p if p.is_absolute() else config_file(str(p))


def load_plant(profile: HardwareProfile, nominal: ModelDescription) -> ModelDescription:
    """The plant description of ``profile``, checked against ``nominal`` (same configurations, joint names,
    kinematic flags, constraints and actuators); the nominal description when ``plant_model_file`` is empty."""
    if not profile.plant_model_file:
        return nominal
    try:
        plant = load_model_file(_model_file(profile.plant_model_file))
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot load the plant model: {e}") from None
    pm, nm = plant.model, nominal.model
    for what, a, b in (("configurations", pm.config_names, nm.config_names),
                       ("kinematic flags", list(pm.kinematic), list(nm.kinematic)),
                       ("constraints", pm.constraint_names, nm.constraint_names),
                       ("hardware joint names", plant.hardware_joints, nominal.hardware_joints),
                       ("actuators", plant.actuators, nominal.actuators)):
        if a != b:
            raise ValueError(f"the plant model {plant.path}: its {what} {a} differ from the nominal model "
                             f"{nominal.path}'s {b}; the plant must be the same machine with other numbers")
    return plant


class SimulatedArm:
    """The plant under a :class:`HardwareProfile`: commands in, encoder readings out (see the module docstring).

    Parameters
    ----------
    profile : HardwareProfile
    dt : float
        Integration step and cycle [s] (the controller's trajectory time step).
    nominal : ModelDescription, optional
        The model the controller uses (default ``config/marionette_arm.yaml``); the plant must match its names.
    q0 : ndarray (nq,), optional
        Initial configuration (default: the arm's 'lowered' rest pose of the nominal model); see :meth:`reset`.
    newton_tolerance, newton_max_iterations : the integrator's Newton settings.
    on_step_error : 'hold' or 'reset'; max_configuration_change : largest accepted |Δq_d| per step [rad or m].
    disturbance_limits : DisturbanceLimits

    Attributes: ``k`` (steps taken since construction; :meth:`reset` does not rewind it), ``t`` = k Δt,
    ``plant`` (ModelDescription), ``model`` (the plant's core model with the disturbance inputs),
    ``system`` (its DiscreteSystem), ``drives``, ``steps``, ``step_errors``.
    """

    def __init__(self, profile: HardwareProfile, dt: float, nominal: Optional[ModelDescription] = None,
                 q0: Optional[np.ndarray] = None, newton_tolerance: float = 1e-10, newton_max_iterations: int = 50,
                 on_step_error: str = "hold", max_configuration_change: float = 0.5,
                 disturbance_limits: DisturbanceLimits = DisturbanceLimits()):
        if on_step_error not in ("hold", "reset"):
            raise ValueError(f"on_step_error must be 'hold' or 'reset', got {on_step_error!r}")
        self.nominal = nominal if nominal is not None else arm.load_description()
        self.plant = load_plant(profile, self.nominal)
        self._bodies = _disturbance_inputs(self.plant.model)
        self.model = _with_disturbance_inputs(self.plant.model, self._bodies)
        m = self.model
        self.nd, self.nk, self.nq, self.nu = m.nd, m.nk, m.nq, m.nu
        self.dt = float(dt)
        self.system = _core.DiscreteSystem(m, self.dt, newton_tolerance, newton_max_iterations)
        inputs = list(m.input_names)
        self._body_inputs = {b: [inputs.index(n) for n in names] for b, (_, names) in self._bodies.items()}
        self.limits = from_description(self.plant)
        self.on_step_error = on_step_error
        self.max_configuration_change = float(max_configuration_change)
        self.disturbance_limits = disturbance_limits
        self.profile = profile
        self.drives = Drives(self.limits, profile.drive_mode, self.dt)
        self._set_measurement(profile)
        seeds = np.random.SeedSequence(None if profile.seed < 0 else profile.seed).spawn(2)
        self._noise_rng, self._jitter_rng = (np.random.default_rng(s) for s in seeds)
        self._pending: collections.deque = collections.deque()   # (effective step, setpoint (nk,))
        self._last_effective = 0
        self._disturbances: list[Disturbance] = []
        self._u = np.zeros(m.nU)
        self._tension = np.full(len(self.limits.strings), np.nan)
        self.k = 0
        self.steps = 0
        self.step_errors = 0
        if q0 is None:
            q0 = arm.static_equilibrium(self.nominal.model, *arm.LOWERED).q
        self.reset(q0)

    # ---------------------------------------------------------------- state

    @property
    def t(self) -> float:
        return self.k * self.dt

    @property
    def x(self) -> np.ndarray:
        return self._x

    @property
    def q(self) -> np.ndarray:
        return self._x[: self.nq]

    @property
    def rho(self) -> np.ndarray:
        return self._x[self.nd: self.nq]

    @property
    def v(self) -> np.ndarray:
        return self._x[self.nq + self.nd:]

    @property
    def setpoint(self) -> np.ndarray:
        """The drives' setpoint in effect (nk,)."""
        return self.drives.setpoint

    @property
    def pending_commands(self) -> int:
        return len(self._pending)

    @property
    def bodies(self) -> list[str]:
        """Frames :meth:`disturb` can push."""
        return list(self._bodies)

    def true_state(self) -> np.ndarray:
        """x_k = [q; p; v] of the plant (nx,), in the nominal model's state layout (same names)."""
        return self._x.copy()

    def true_velocities(self) -> np.ndarray:
        """(q_k − q_{k−1})/Δt (nq,): every configuration's mean velocity over the last step."""
        return (self._x[: self.nq] - self._q_previous) / self.dt

    def reset(self, q0: Optional[np.ndarray] = None, settle: bool = True) -> None:
        """Puts the arm at rest: drives at q0's kinematic configurations, setpoint there, no command pending,
        no disturbance. With ``settle`` the dynamic configurations are the plant's rest pose nearest q0
        (:func:`rest_configuration`; q0 itself when it is one, e.g. a rest pose of the nominal model on the
        nominal plant); otherwise exactly q0 (which must satisfy the constraints), starting with the discrete
        rest momenta. ``q0`` None: the last initial configuration. Time (``k``) keeps running.
        """
        if q0 is not None:
            q0 = np.array(q0, dtype=float)
            if q0.shape != (self.nq,) or not np.all(np.isfinite(q0)):
                raise ValueError(f"q0 must be {self.nq} finite values ({', '.join(self.model.config_names)}), "
                                 f"got {q0.tolist()}")
            if settle:
                q0 = rest_configuration(self.model, q0)
            elif self.model.nc:
                h = np.max(np.abs(np.asarray(self.model.constraints(q0)[0])))
                if h > 1e-6:
                    raise ValueError(f"q0 violates the constraints {', '.join(self.model.constraint_names)} "
                                     f"(residual {h:.3g} > 1e-6)")
            self.q0 = q0
            self.x0 = np.asarray(self.system.state_from_configs(q0, q0), dtype=float)
        self._x = self.x0.copy()
        self._q_previous = self.q0.copy()
        self._u[: self.nu] = 0.0
        self.drives.reset(self.rho)
        self._pending.clear()
        self._last_effective = self.k
        self._disturbances.clear()

    def set_profile(self, profile: HardwareProfile) -> None:
        """Changes the effects at run time; the plant and the seed are fixed at construction."""
        for name in ("plant_model_file", "seed"):
            if getattr(profile, name) != getattr(self.profile, name):
                raise ValueError(f"{name} cannot change while the arm runs (construct a new SimulatedArm)")
        self._set_measurement(profile)
        self.drives.mode = profile.drive_mode
        self.profile = profile

    def _set_measurement(self, profile: HardwareProfile) -> None:
        self._resolution = profile.per_config("encoder_resolution", self.nq)
        self._noise = profile.per_config("noise_std", self.nq)
        self._quantized = self._resolution > 0.0
        self._safe_resolution = np.where(self._quantized, self._resolution, 1.0)

    # ---------------------------------------------------------------- the cycle

    def measure(self) -> np.ndarray:
        """q_k as the encoders report it (nq,), model configuration order (a new array)."""
        q = self._x[: self.nq].copy()
        if np.any(self._noise > 0.0):
            q += self._noise_rng.normal(0.0, 1.0, self.nq) * self._noise
        if np.any(self._quantized):
            q = np.where(self._quantized, np.round(q / self._safe_resolution) * self._safe_resolution, q)
        return q

    def receive_command(self, targets: np.ndarray) -> bool:
        """A position command (nk,) for the kinematic configurations, received during the current cycle.

        Saturated to the drives' range (returns True when it was); takes effect at step
        k + command_delay_steps (+ jitter), never before a command received earlier.
        """
        targets = np.asarray(targets, dtype=float)
        if targets.shape != (self.nk,) or not np.all(np.isfinite(targets)):
            raise ValueError(f"a command has {self.nk} finite values "
                             f"({', '.join(self.model.config_names[self.nd:])}), got {targets.tolist()}")
        saturated = self.limits.saturate(targets)
        p = self.profile
        delay = p.command_delay_steps
        if p.command_jitter_steps and p.command_jitter_probability and \
                self._jitter_rng.random() < p.command_jitter_probability:
            delay += int(self._jitter_rng.integers(1, p.command_jitter_steps + 1))
        effective = max(self.k + delay, self._last_effective)
        self._last_effective = effective
        self._pending.append((effective, saturated))
        return bool(np.any(saturated != targets))

    def hold(self) -> None:
        """The drives stop where they can (braking at their limits), dropping pending commands."""
        self._pending.clear()
        self._last_effective = self.k
        self.drives.hold(self.rho, self.v)

    def step(self) -> Optional[StepFault]:
        """Advances one cycle: commands now in effect, drives, disturbances, x_{k+1} = f(x_k, u_k); k += 1.

        Returns None, or the fault (the arm has then recovered; see the module docstring).
        """
        while self._pending and self._pending[0][0] <= self.k:
            self.drives.command(self._pending.popleft()[1])
        self._apply_disturbances()
        rho_next = self.drives.advance(self.rho, self.v)
        q_before = self._x[: self.nq].copy()
        fault = None
        try:
            self._x = self._checked_step(rho_next)
        except (_core.StepError, FloatingPointError, ImplausibleStep) as e:
            fault = self._recover(str(e))
        self._q_previous = q_before if fault is None or fault.action != "reset" else self.q0.copy()
        self.k += 1
        self.steps += 1
        return fault

    def _checked_step(self, rho_next: np.ndarray) -> np.ndarray:
        self._u[self.nu:] = rho_next
        x, _, lam = self.system.step(self._x, self._u)
        if not np.all(np.isfinite(x)):
            raise FloatingPointError("the integrator returned a non-finite state")
        jump = float(np.max(np.abs(x[: self.nd] - self._x[: self.nd]), initial=0.0))
        if jump > self.max_configuration_change:
            raise ImplausibleStep(f"the step moved a dynamic configuration by {jump:.3g} > max_configuration_change "
                                  f"{self.max_configuration_change:g} (a spurious Newton root: the motion is too fast "
                                  "for dt, or the arm ran into the end of its string)")
        lim = self.limits
        self._tension = 2.0 * self._x[list(lim.string_length)] * np.asarray(lam)[list(lim.string_index)] / self.dt
        return x

    def tension(self) -> np.ndarray:
        """The strings' tensions over the last step [N] (strings,; ``limits.strings`` order): T = 2 L λ/Δt from the
        plant step's multipliers λ and the string length L at its start (docs/constraint_forces.md; > 0 pulling).
        NaN before the first step."""
        return self._tension.copy()

    def _recover(self, message: str) -> StepFault:
        self.step_errors += 1
        if self.on_step_error == "hold":
            back = self.limits.saturate(self.rho - self.v * self.dt)
            for action, rho_next in (("held", self.rho.copy()), ("backed_off", back)):
                try:
                    self._x = self._checked_step(rho_next)
                except (_core.StepError, FloatingPointError, ImplausibleStep) as e:
                    message += f"; with the actuators {action.replace('_', ' ')}: {e}"
                else:
                    self._pending.clear()
                    self._last_effective = self.k
                    self.drives.reset(self.rho)
                    return StepFault(message, action)
        self.reset()
        return StepFault(message, "reset")

    # ---------------------------------------------------------------- disturbances

    def disturb(self, body: str, profile: str = "constant", force=(0.0, 0.0, 0.0), duration: float = 0.0,
                impulse=(0.0, 0.0, 0.0), start_time: Optional[float] = None) -> Disturbance:
        """Schedules a push on ``body`` with a force fixed in world coordinates; returns what was scheduled.

        profile 'impulse': ``impulse`` (3,) [N s] delivered within one step (duration must be 0);
        'constant': ``force`` (3,) [N] for ``duration`` [s]; 'half_sine': F(t) = force·sin(π t/duration).
        Durations are whole steps (rounded; at least one). ``start_time`` [s, the arm's time t, rounded up to a
        step]: None starts at the current step; a time more than half a step past is refused. Raises
        DisturbanceError naming the problem.
        """
        lim = self.disturbance_limits
        if body not in self._bodies:
            raise DisturbanceError(f"unknown body {body!r}: disturbances act on a frame of the plant with a mass "
                                   f"moved by a dynamic configuration ({', '.join(self._bodies) or 'none'})")
        if profile not in DISTURBANCE_PROFILES:
            raise DisturbanceError(f"unknown profile {profile!r} (profiles: {', '.join(DISTURBANCE_PROFILES)})")
        force, impulse = (np.asarray(v, dtype=float) for v in (force, impulse))
        for name, v in (("force", force), ("impulse", impulse)):
            if v.shape != (3,) or not np.all(np.isfinite(v)):
                raise DisturbanceError(f"{name} must be 3 finite numbers (world x, y, z), got {v.tolist()}")
        duration = float(duration)
        if not math.isfinite(duration) or duration < 0.0:
            raise DisturbanceError(f"duration must be a finite number >= 0 s, got {duration}")
        if start_time is not None and not math.isfinite(start_time):
            raise DisturbanceError(f"start_time must be finite, got {start_time}")
        if start_time is not None and start_time < self.t - 0.5 * self.dt:
            raise DisturbanceError(f"start_time {start_time:.6g} s is in the past (now {self.t:.6g} s); "
                                   "give a later time, or none to start at the next step")
        if profile == "impulse":
            if duration != 0.0 or np.any(force):
                raise DisturbanceError("an impulse is delivered within one step: give 'impulse' [N s], with force 0 "
                                       "and duration 0")
            size = float(np.linalg.norm(impulse))
            if size > lim.max_impulse:
                raise DisturbanceError(f"impulse {size:.4g} N s exceeds the plausible {lim.max_impulse:g} N s")
            forces = (impulse / self.dt)[None, :]
        else:
            if np.any(impulse):
                raise DisturbanceError(f"profile '{profile}' takes 'force' [N] and 'duration' [s]; 'impulse' must be 0")
            size = float(np.linalg.norm(force))
            if size > lim.max_force:
                raise DisturbanceError(f"force {size:.4g} N exceeds the plausible {lim.max_force:g} N")
            if duration > lim.max_duration:
                raise DisturbanceError(f"duration {duration:g} s exceeds the plausible {lim.max_duration:g} s")
            n = int(round(duration / self.dt))
            if n < 1:
                raise DisturbanceError(f"duration {duration:g} s is shorter than one step ({self.dt:g} s)")
            if profile == "constant":
                forces = np.tile(force, (n, 1))
            else:  # the half sine sampled at the step midpoints, where the forcing acts (thesis (4.12a))
                forces = np.sin(np.pi * (np.arange(n) + 0.5) / n)[:, None] * force
        start = self.k if start_time is None else max(self.k, int(math.ceil(start_time / self.dt - 1e-6)))
        d = Disturbance(body, profile, start, forces)
        self._disturbances.append(d)
        return d

    def _apply_disturbances(self) -> None:
        if not self._disturbances:
            return
        self._u[: self.nu] = 0.0
        self._disturbances = [d for d in self._disturbances if d.end_step > self.k]
        active = [d for d in self._disturbances if d.start_step <= self.k]
        if not active:
            return
        g = np.asarray(self.model.placements(self._x[: self.nq]))
        for d in active:
            frame, _ = self._bodies[d.body]
            # the wrench is in the body's coordinates: W = R_b^T F_world
            self._u[self._body_inputs[d.body]] += g[frame, :3, :3].T @ d.forces[self.k - d.start_step]


class MeasurementQueue:
    """Joint-state samples waiting for their transport latency: (release time, stamp, positions), in time order."""

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


__all__ = ["HardwareProfile", "PROFILES", "DRIVE_MODES", "DISTURBANCE_PROFILES", "check_profile_field", "Drives",
           "rest_configuration", "Disturbance", "DisturbanceLimits", "DisturbanceError", "StepFault",
           "ImplausibleStep", "load_plant", "SimulatedArm", "MeasurementQueue"]
