"""Trajectory tracking from measured configurations (the controller's tick logic, without ROS).

State estimate (ARCHITECTURE.md, thesis §6.7.2): only configurations are
measured; the momentum follows from two consecutive samples by the discrete
Legendre transform p_k = D₂L_d(q_{k−1}, q_k) + f⁺ (f⁺ = 0) and the kinematic
velocities by v_k = (ρ_k − ρ_{k−1})/Δt — exact in the integrator's own terms,
so no differentiation filter is needed. The command is

    u(k) = u_d(k) − K(k) (x̂(k) − x_d(k)),

clamped to the actuator limits (position range and rate of every kinematic
configuration, range of every force input). Past the end of the trajectory
the controller holds the final state: ρ_next = ρ_d(N), forces u_d(N−1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from marionette_control.control.trajectory import Trajectory


@dataclass
class ActuatorLimits:
    """Limits of the discrete inputs u = [force inputs; next kinematic configurations].

    lower, upper : ndarray (nU,)  position range of each input (force inputs: force range)
    rate : ndarray (nk,)          max |ρ_{k+1} − ρ_k| / Δt of each kinematic configuration (inf = none)
    """

    lower: np.ndarray
    upper: np.ndarray
    rate: np.ndarray

    @classmethod
    def unlimited(cls, nU: int, nk: int) -> "ActuatorLimits":
        return cls(np.full(nU, -np.inf), np.full(nU, np.inf), np.full(nk, np.inf))

    def __post_init__(self):
        self.lower = np.asarray(self.lower, dtype=float)
        self.upper = np.asarray(self.upper, dtype=float)
        self.rate = np.asarray(self.rate, dtype=float)
        if self.lower.shape != self.upper.shape or self.lower.ndim != 1:
            raise ValueError(f"lower/upper limits must be vectors of one size, got {self.lower.shape}, "
                             f"{self.upper.shape}")
        if np.any(np.isnan(self.lower)) or np.any(np.isnan(self.upper)) or np.any(np.isnan(self.rate)):
            raise ValueError("actuator limits must not be NaN")
        bad = np.flatnonzero(self.lower > self.upper)
        if bad.size:
            raise ValueError(f"actuator lower limit above upper limit for input index {int(bad[0])}")
        if np.any(self.rate <= 0):
            raise ValueError("actuator rate limits must be > 0")


class TrackingController:
    """Discrete LQR tracking of a trajectory with gains (Trajectory.K).

    Parameters
    ----------
    system : _core.DiscreteSystem
        The model's one-step map (its Δt must equal the trajectory's).
    trajectory : Trajectory
        Must carry gains K and belong to ``system.model``.
    limits : ActuatorLimits, optional
    """

    def __init__(self, system, trajectory: Trajectory, limits: Optional[ActuatorLimits] = None):
        model = system.model
        trajectory.check_model(model)
        if trajectory.K is None:
            raise ValueError("the trajectory has no tracking gains K; compute them with "
                             "marionette_control.control.optimizer.tracking_gains")
        if abs(trajectory.dt - system.dt) > 1e-12 * max(1.0, system.dt):
            raise ValueError(f"trajectory time step {trajectory.dt} differs from the system's {system.dt}")
        self.system = system
        self.trajectory = trajectory
        self.nd, self.nk, self.nu, self.nq = model.nd, model.nk, model.nu, model.nq
        self.limits = limits or ActuatorLimits.unlimited(model.nU, model.nk)
        if self.limits.lower.shape != (model.nU,) or self.limits.rate.shape != (model.nk,):
            raise ValueError(f"actuator limits sized {self.limits.lower.shape}/{self.limits.rate.shape}, expected "
                             f"({model.nU},)/({model.nk},)")
        self._hold = np.concatenate([trajectory.U[-1, :self.nu], trajectory.X[-1, self.nd:self.nq]])
        self._dx = np.empty(model.nx)
        # the rate limit as a bound on one step, and work vectors of clamp() (the tick path allocates little)
        self._step = self.limits.rate * system.dt
        self._lo = np.empty(model.nk)
        self._hi = np.empty(model.nk)
        self.last_command: Optional[np.ndarray] = None

    @property
    def N(self) -> int:
        return self.trajectory.N

    def estimate(self, q_prev: np.ndarray, q: np.ndarray) -> np.ndarray:
        """x̂ = [q; D₂L_d(q_prev, q); (ρ − ρ_prev)/Δt] (nx,)."""
        return self.system.state_from_configs(q_prev, q)

    def command(self, k: int, q_prev: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(u, x̂) for tick k from the last two measured configurations; u is clamped to the limits."""
        x_hat = self.estimate(q_prev, q)
        if k >= self.N:
            u = self._hold.copy()
        else:
            tr = self.trajectory
            np.subtract(x_hat, tr.X[k], out=self._dx)
            u = tr.U[k] - tr.K[k] @ self._dx
        return self.clamp(u, q[self.nd:]), x_hat

    def clamp(self, u: np.ndarray, rho_now: np.ndarray) -> np.ndarray:
        """Applies the rate limit of kinematic inputs from the current ρ, then the position range.

        The range is applied last so a command never leaves it, even when the
        measured ρ is outside it (the rate limit then yields to the range).
        """
        lim = self.limits
        rho_next = u[self.nu:]
        # (np.clip(x, lo, hi) is maximum then minimum; the ufuncs themselves cost a fraction of np.clip's call)
        np.subtract(rho_now, self._step, out=self._lo)
        np.add(rho_now, self._step, out=self._hi)
        np.maximum(rho_next, self._lo, out=rho_next)
        np.minimum(rho_next, self._hi, out=rho_next)
        np.maximum(u, lim.lower, out=u)
        np.minimum(u, lim.upper, out=u)
        self.last_command = u
        return u

    def safe_command(self, rho_now: np.ndarray) -> np.ndarray:
        """The command that holds the kinematic configurations where they are (faults)."""
        u = np.concatenate([np.zeros(self.nu), np.asarray(rho_now, dtype=float)])
        np.clip(u, self.limits.lower, self.limits.upper, out=u)
        return u


def open_and_closed_loop(system, trajectory: Trajectory, x0: np.ndarray):
    """Simulates a trajectory's inputs open loop and with its gains closed loop from x0.

    Returns (X_open, X_closed, U_closed); the closed loop uses the true state.
    """
    X_open, _ = system.simulate(x0, trajectory.U)
    X_closed, U_closed = system.project(x0, trajectory.X, trajectory.U, trajectory.K)
    return X_open, X_closed, U_closed

