"""The hardware stand-in without ROS: the arm as a controller meets it on the robot.

:class:`SimulatedArm` integrates a *plant* model (:mod:`.plant`) with the core's midpoint variational
integrator (``_core.DiscreteSystem.step``, thesis (4.36)) and puts between it and the controller what real
hardware puts there, each effect a field of a :class:`~marionette_control.sim.profile.HardwareProfile`:
command delay and jitter, encoder counts and noise (:mod:`.profile`), position drives within their limits
(:mod:`.drives`), and pushes on the plant's bodies (:mod:`.disturbance`). ``marionette_simulator``
(``nodes/simulator.py``) is a thin ROS adapter around it; ``docs/simulator.md`` gives the default numbers
and why they were chosen.

One cycle
---------
Cycle k runs between the measurement of q_k and the integrator step k → k+1::

    q_meas = arm.measure()             # q_k as the encoders report it
    arm.receive_command(rho_target)    # the controller's answer, received during cycle k
    arm.step()                         # drives, then x_{k+1} = f(x_k, u_k); k += 1

Strings
-------
The step is :class:`~marionette_control.sim.strings.PlantStep`'s: with ``string: one_sided`` (the realistic
profile) a string pulls and never pushes. When holding its length would take a push (T < 0) it goes slack and
the arm flies free; when the arm reaches the string's length again it catches with an inelastic jerk
(:mod:`marionette_control.sim.strings` has the scheme). ``tension()`` is 0 while a string is slack, ``slack()``
tells which strings were over the last step, and the arm counts ``tension_min_n`` (the lowest tension of any
step so far), ``slack_steps`` (steps with a string slack; ``slack_s`` in seconds) and ``slack_episodes``
(times a string went slack). With ``string: holonomic`` (the perfect profile) the string holds its length
whatever it takes, and a negative tension is a push the real string could not give.

Faults
------
A step fails with a ``_core.StepError``, a non-finite state or an implausible jump (a dynamic
configuration moving more than ``max_configuration_change`` in one step: Newton converged to a
spurious root, e.g. with the string pulled past the arm's reach; seed 001 §VII). With
``on_step_error="hold"`` the step is retried with the drives held (ρ_{k+1} = ρ_k), then backed off
(ρ_{k+1} = ρ_{k−1}), and the result becomes the setpoint; if neither works, or with ``"reset"``, the arm
is reset.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional

import numpy as np

from marionette_control import _core
from marionette_control.model.library import marionette_arm as arm
from marionette_control.model.limits import from_description
from marionette_control.model.yaml_model import ModelDescription
from marionette_control.sim.disturbance import (Disturbance, DisturbanceLimits, disturbance_inputs,
                                                with_disturbance_inputs)
from marionette_control.sim.drives import Drives
from marionette_control.sim.plant import load_plant, rest_configuration
from marionette_control.sim.profile import HardwareProfile
from marionette_control.sim.setpoint_stream import SetpointStream, check_points
from marionette_control.sim.strings import PlantStep


@dataclass(frozen=True)
class StepFault:
    """A failed integrator step and what the arm did about it: 'held', 'backed_off' or 'reset'."""

    message: str
    action: str


class ImplausibleStep(RuntimeError):
    """The integrator converged, but to a state the arm cannot reach in one step (a spurious Newton root)."""


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
    ``system`` (its DiscreteSystem, every constraint held), ``drives``, ``steps``, ``step_errors``; since
    construction: ``tension_min_n`` (the lowest string tension of any step [N], NaN before the first),
    ``slack_steps`` (steps over which a string was slack), ``slack_s``, ``slack_episodes`` (a string went slack).
    """

    def __init__(self, profile: HardwareProfile, dt: float, nominal: Optional[ModelDescription] = None,
                 q0: Optional[np.ndarray] = None, newton_tolerance: float = 1e-10, newton_max_iterations: int = 50,
                 on_step_error: str = "hold", max_configuration_change: float = 0.5,
                 disturbance_limits: DisturbanceLimits = DisturbanceLimits()):
        if on_step_error not in ("hold", "reset"):
            raise ValueError(f"on_step_error must be 'hold' or 'reset', got {on_step_error!r}")
        self.nominal = nominal if nominal is not None else arm.load_description()
        self.plant = load_plant(profile, self.nominal)
        self._bodies = disturbance_inputs(self.plant.model)
        self.model = with_disturbance_inputs(self.plant.model, self._bodies)
        m = self.model
        self.nd, self.nk, self.nq, self.nu = m.nd, m.nk, m.nq, m.nu
        self.dt = float(dt)
        inputs = list(m.input_names)
        self._body_inputs = {b: [inputs.index(n) for n in names] for b, (_, names) in self._bodies.items()}
        self.limits = from_description(self.plant)
        self._strings = PlantStep(m, self.dt, self.limits.string_index, self.limits.string_length, profile.string,
                                  newton_tolerance, newton_max_iterations)
        self.system = self._strings.system
        self.on_step_error = on_step_error
        self.max_configuration_change = float(max_configuration_change)
        self.disturbance_limits = disturbance_limits
        self.profile = profile
        self.drives = Drives(replace(self.limits, max_acceleration=self.limits.max_acceleration
                                     * profile.drive_acceleration), profile.drive_mode, self.dt)
        self._set_measurement(profile)
        seeds = np.random.SeedSequence(None if profile.seed < 0 else profile.seed).spawn(2)
        self._noise_rng, self._jitter_rng = (np.random.default_rng(s) for s in seeds)
        self._stream = SetpointStream(self.nk)   # the commands received (:mod:`.setpoint_stream`)
        self._disturbances: list[Disturbance] = []
        self._u = np.zeros(m.nU)
        self._tension = np.full(len(self.limits.strings), np.nan)
        self._slack = np.zeros(len(self.limits.strings), dtype=bool)
        self.tension_min_n = math.nan
        self.slack_steps = 0
        self.slack_episodes = 0
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
    def slack_s(self) -> float:
        """Time [s] over which a string was slack, since construction."""
        return self.slack_steps * self.dt

    @property
    def pending_commands(self) -> int:
        """Commands received that have not taken effect yet."""
        return len(self._stream.pending(self.k))

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
        no disturbance, the strings taut. With ``settle`` the dynamic configurations are the plant's rest pose
        nearest q0
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
        self._slack[:] = False
        self.drives.reset(self.rho)
        self._stream.clear()
        self._disturbances.clear()

    def set_profile(self, profile: HardwareProfile) -> None:
        """Changes the effects at run time; the plant and the seed are fixed at construction."""
        for name in ("plant_model_file", "string", "seed"):
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

    def receive_command(self, targets: np.ndarray, steps: Optional[np.ndarray] = None) -> bool:
        """A position command for the kinematic configurations, received during the current cycle k: ``targets``
        (nk,) a setpoint (the forward position controller's command), or (m, nk) the setpoints of ``steps`` (m,)
        (increasing step numbers of this arm, real: a joint_trajectory_controller command;
        :mod:`.setpoint_stream`).

        Saturated to the drives' range (returns True when a point was); arrives at step k + command_delay_steps
        (+ jitter), never before a command received earlier; a setpoint takes effect there, a trajectory's points
        at their own steps from there on. Raises ValueError (:func:`.setpoint_stream.check_points`) for a
        command of the wrong shape, non-finite values or steps not increasing.
        """
        points = check_points(targets, steps, self.nk, self.model.config_names[self.nd:])
        saturated = self.limits.saturate(points)
        arrival = self._arrival()
        self._stream.receive(np.array([arrival]) if steps is None else np.asarray(steps, dtype=float), saturated,
                             arrival)
        return bool(np.any(saturated != points))

    def receive_stop(self) -> None:
        """A stop received during the current cycle (joint_trajectory_controller's empty trajectory): arriving as a
        command does, the drives brake to a stop there (:meth:`hold` then) and stay until a newer command."""
        arrival = self._arrival()
        self._stream.receive(None, None, arrival)

    def _arrival(self) -> int:
        """The step a command received now arrives at: k + command_delay_steps (+ jitter), never before the last."""
        p = self.profile
        delay = p.command_delay_steps
        if p.command_jitter_steps and p.command_jitter_probability and \
                self._jitter_rng.random() < p.command_jitter_probability:
            delay += int(self._jitter_rng.integers(1, p.command_jitter_steps + 1))
        return max(self.k + delay, self._stream.last_arrival)

    def hold(self) -> None:
        """The drives stop where they can (braking at their limits), dropping pending commands."""
        self._stream.clear()
        self.drives.hold(self.rho, self.v)

    def step(self) -> Optional[StepFault]:
        """Advances one cycle: commands now in effect, drives, disturbances, x_{k+1} = f(x_k, u_k); k += 1.

        Returns None, or the fault (the arm has then recovered; see the module docstring).
        """
        setpoint = self._stream.setpoint(self.k)
        if self._stream.stopping(self.k):
            self.drives.hold(self.rho, self.v)
        elif setpoint is not None:
            self.drives.command(setpoint)
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
        step = self._strings.step(self._x, self._u, self._slack)
        x = step.x
        if not np.all(np.isfinite(x)):
            raise FloatingPointError("the integrator returned a non-finite state")
        jump = float(np.max(np.abs(x[: self.nd] - self._x[: self.nd]), initial=0.0))
        if jump > self.max_configuration_change:
            raise ImplausibleStep(f"the step moved a dynamic configuration by {jump:.3g} > max_configuration_change "
                                  f"{self.max_configuration_change:g} (a spurious Newton root: the motion is too fast "
                                  "for dt, or the arm ran into the end of its string)")
        self._tension, self._slack = step.tension, step.slack
        if step.tension.size:
            self.tension_min_n = float(np.fmin(self.tension_min_n, step.tension.min()))
        self.slack_steps += int(step.slack.any())
        self.slack_episodes += int(step.released.sum())
        return x

    def tension(self) -> np.ndarray:
        """The strings' tensions over the last step [N] (strings,; ``limits.strings`` order): T = 2 L λ/Δt from the
        plant step's multipliers λ and the string length L at its start (docs/constraint_forces.md; > 0 pulling;
        0 for a slack string). NaN before the first step."""
        return self._tension.copy()

    def slack(self) -> np.ndarray:
        """Which strings were slack over the last step (strings,) bool (``limits.strings`` order)."""
        return self._slack.copy()

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
                    self._stream.clear()
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
        d = Disturbance.requested(body, profile, force, duration, impulse, start_time, bodies=self._bodies, k=self.k,
                                  dt=self.dt, limits=self.disturbance_limits)
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

