"""Actuator limits of the discrete inputs and the command clamp that enforces them.

The kinematic configurations ρ are set by position-controlled drives with a range, a speed
limit and an acceleration limit (the model file's ``actuators`` section, read by
:mod:`marionette_control.model.limits` — the one reader of limits, whose
:class:`~marionette_control.model.limits.ModelLimits` the optimizer's constraints and the
simulator's drives take too). A command is the next kinematic configuration
ρ_{j+1} = u_j[nu:] (thesis §3.6: the kinematic inputs are the configurations one step ahead),
so in discrete terms, with v_j = (ρ_j − ρ_{j−1})/Δt the drive's velocity over the step before,

    |ρ_{j+1} − ρ_j| ≤ v_max Δt,    |(ρ_{j+1} − ρ_j)/Δt − v_j| ≤ a_max Δt,    lower ≤ ρ_{j+1} ≤ upper.

:meth:`CommandLimits.clamp` enforces these from the kinematic state (ρ_j, v_j) the drive will
be in when the command takes effect (the predicted state when commands are delayed:
:mod:`marionette_control.tracking.prediction`), so a drive that follows streamed setpoints
within the same limits executes the commands exactly. Priorities: the speed limit is
applied after the acceleration limit (a drive that is somehow faster than its limit is
slowed, whatever the acceleration), the range last (a command never leaves it, even when
ρ_j is outside it). Force inputs are limited to their range only.

Each of these is a clip of one input and their composition is a clip too, so the clamp is the projection
onto a box: clamp(u) = min(max(u, lo), hi) with (lo, hi) = :meth:`CommandLimits.box` (ρ_j, v_j), the clamp of
−∞ and +∞ (up to the rounding of ρ_j + (u − ρ_j)). The tension guard (:mod:`.tension_guard`) projects
within that box.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from marionette_control import validation
from marionette_control.model.limits import ModelLimits


@dataclass
class CommandLimits:
    """Limits of the discrete inputs u = [force inputs; next kinematic configurations].

    lower, upper : ndarray (nU,)    range of each input (force inputs: force range)
    rate : ndarray (nk,)            speed limit v_max of each kinematic configuration (inf: none)
    acceleration : ndarray (nk,)    acceleration limit a_max of each kinematic configuration (inf: none)
    dt : float                      time step the per-step bounds are for (set by :meth:`for_dt`)
    """

    lower: np.ndarray
    upper: np.ndarray
    rate: np.ndarray
    acceleration: np.ndarray = None
    dt: float = 0.0

    @classmethod
    def unlimited(cls, nU: int, nk: int) -> "CommandLimits":
        return cls(np.full(nU, -np.inf), np.full(nU, np.inf), np.full(nk, np.inf), np.full(nk, np.inf))

    @classmethod
    def from_limits(cls, limits: ModelLimits) -> "CommandLimits":
        """The limits of a model's discrete inputs from its :class:`~marionette_control.model.limits.ModelLimits`:
        the drives' range, speed and acceleration, the force inputs' bounds (±inf where none is known)."""
        return cls(*limits.input_bounds(), limits.max_velocity.copy(), limits.max_acceleration.copy())

    def __post_init__(self):
        self.lower = np.asarray(self.lower, dtype=float)
        self.upper = np.asarray(self.upper, dtype=float)
        self.rate = np.asarray(self.rate, dtype=float)
        self.acceleration = (np.full(self.rate.shape, np.inf) if self.acceleration is None
                             else np.asarray(self.acceleration, dtype=float))
        if self.lower.shape != self.upper.shape or self.lower.ndim != 1:
            raise ValueError(f"lower/upper limits must be vectors of one size, got {self.lower.shape}, "
                             f"{self.upper.shape}")
        if self.rate.ndim != 1 or self.acceleration.shape != self.rate.shape or self.rate.size > self.lower.size:
            raise ValueError(f"rate and acceleration limits must be vectors of one size (nk <= nU = "
                             f"{self.lower.size}), got {self.rate.shape}, {self.acceleration.shape}")
        for name in ("lower", "upper", "rate", "acceleration"):
            if np.any(np.isnan(getattr(self, name))):
                raise ValueError(f"actuator {name} limits must not be NaN")
        bad = np.flatnonzero(self.lower > self.upper)
        if bad.size:
            raise ValueError(f"actuator lower limit above upper limit for input index {int(bad[0])}")
        if np.any(self.rate <= 0) or np.any(self.acceleration <= 0):
            raise ValueError("actuator speed and acceleration limits must be > 0")
        nk = self.rate.size
        self._nu = self.lower.size - nk
        self.dt = validation.nonnegative(self.dt, "the time step of actuator limits")
        # per-step bounds of clamp: a_max dt², ±v_max dt (dt = 0: not for clamping, see for_dt)
        with np.errstate(invalid="ignore"):
            self._a_step_list = (self.acceleration * self.dt ** 2).tolist()
            self._v_step_list = (self.rate * self.dt).tolist()
        self._lower_list, self._upper_list = self.lower.tolist(), self.upper.tolist()

    @property
    def nk(self) -> int:
        return self.rate.size

    def check_sizes(self, model) -> None:
        """Raises ValueError unless these limits are sized for ``model``'s inputs."""
        if self.lower.shape != (model.nU,) or self.rate.shape != (model.nk,):
            raise ValueError(f"actuator limits sized {self.lower.shape}/{self.rate.shape}, expected "
                             f"({model.nU},)/({model.nk},) for model '{model.name}'")

    def for_dt(self, dt: float) -> "CommandLimits":
        """A copy whose :meth:`clamp` works on steps of ``dt``."""
        return CommandLimits(self.lower.copy(), self.upper.copy(), self.rate.copy(), self.acceleration.copy(),
                              float(dt))

    def clamp(self, u: np.ndarray, rho, v) -> np.ndarray:
        """Clamps u (nU,) in place to the limits from the kinematic state (ρ_j, v_j) (nk each: arrays or
        sequences of floats) it acts on; returns u.

        The step e = ρ_{j+1} − ρ_j is limited to v_j Δt ± a_max Δt², then to ±v_max Δt; then the whole
        input to its range (module docstring). Needs :attr:`dt` (:meth:`for_dt`).
        """
        if not self.dt > 0:
            raise ValueError("CommandLimits.clamp needs the time step: use limits.for_dt(dt)")
        # on Python floats: the tick path calls this twice, and for a few drives numpy's per-call cost dominates
        nu, dt = self._nu, self.dt
        if isinstance(rho, np.ndarray):
            rho, v = rho.tolist(), v.tolist()
        values = u.tolist()
        for i, (r, w, a_step, v_step) in enumerate(zip(rho, v, self._a_step_list, self._v_step_list)):
            e = values[nu + i] - r
            lo, hi = w * dt - a_step, w * dt + a_step
            e = lo if e < lo else hi if e > hi else e
            e = -v_step if e < -v_step else v_step if e > v_step else e
            values[nu + i] = r + e
        u[:] = [lo if x < lo else hi if x > hi else x for x, lo, hi in zip(values, self._lower_list, self._upper_list)]
        return u

    def box(self, rho, v, inner=None) -> tuple[list, list]:
        """(lo, hi) (nU floats each): the clamp's box from the kinematic state (ρ_j, v_j) (nk each) — the clamp of
        u = −∞ and +∞ (module docstring), or with ``inner`` = (lo, hi) (nk floats each) of the next kinematic
        configurations the clamp of those (the drives' limits win where the two do not meet); lo ≤ hi. Needs
        :attr:`dt`."""
        if not self.dt > 0:
            raise ValueError("CommandLimits.box needs the time step: use limits.for_dt(dt)")
        nu, dt = self._nu, self.dt
        lo, hi = self._lower_list[:], self._upper_list[:]
        for i, (r, w, a_step, v_step) in enumerate(zip(rho, v, self._a_step_list, self._v_step_list)):
            e_lo, e_hi = w * dt - a_step, w * dt + a_step
            if inner is not None:
                i_lo, i_hi = inner[0][i] - r, inner[1][i] - r
                e_lo, e_hi = (e_lo if i_lo < e_lo else e_hi if i_lo > e_hi else i_lo,
                              e_lo if i_hi < e_lo else e_hi if i_hi > e_hi else i_hi)
            e_lo = -v_step if e_lo < -v_step else v_step if e_lo > v_step else e_lo
            e_hi = -v_step if e_hi < -v_step else v_step if e_hi > v_step else e_hi
            lower, upper = lo[nu + i], hi[nu + i]
            a, b = r + e_lo, r + e_hi
            lo[nu + i] = lower if a < lower else upper if a > upper else a
            hi[nu + i] = lower if b < lower else upper if b > upper else b
        return lo, hi

    def hold(self, rho: np.ndarray) -> np.ndarray:
        """The command that holds the kinematic configurations at ρ (nk,): force inputs 0, ρ in range (nU,)."""
        u = np.concatenate([np.zeros(self._nu), np.asarray(rho, dtype=float)])
        return np.minimum(np.maximum(u, self.lower), self.upper)
