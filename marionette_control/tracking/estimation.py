r"""State estimation from measured configurations for the tracking controller.

Only configurations q are measured (encoders: quantized and noisy); the controller needs the
discrete state x = [q; p; v] (docs/architecture.md, "Discrete state and input"). Two estimators:

:class:`LegendreEstimator` — the plain estimate (thesis §6.7.2): from two configurations Δt apart,

    x̂_k = [q_k; D₂L_d(q_{k−1}, q_k) + f⁺; (ρ_k − ρ_{k−1})/Δt]        (discrete Legendre transform)

(f⁺ = f⁺(q_{k−1}, q_k, u_{k−1}) the model's forcing at the end of the step, thesis (4.13); zero under
the thesis rule, ½Δt·F under the symmetric one, with the force inputs u_{k−1} in effect over it)

exact for exact measurements, but it differentiates them: encoder noise σ becomes momentum
noise of about M·√2·σ/Δt.

:class:`KalmanEstimator` — a time-varying Kalman filter on the exact linearization
(A(k), B(k)) = Df(x_d(k), u_d(k)) along the trajectory (seed 001 §V; thesis (4.37)), with
the prediction through the exact model and the gains precomputed when the trajectory is
loaded, so a tick costs one DEL step and one (nx × nd) product. The kinematic configurations
ρ are the drives' positions: measured by the drives' own encoders (fine: tens of µm), and the
input of each step is by definition the drive position it ends at (u_{k−1} = ρ_k, thesis
§3.6). So the last step before a measurement is taken with the *measured* ρ_k — what the
drives actually did, whatever their limits, lag or a command that arrived a cycle late made
of the commands — and the filter estimates the dynamic part:

    x̂⁻_k = f(x̂_{k−1}, ρ_k)                              (midpoint VI step, thesis (4.36))
    x̂_k  = x̂⁻_k + L(k) (q_d,k − q̂⁻_d,k)                 (q_d: the dynamic configurations)

While the drive encoders confirm the controller's command record (every drive within 3 σ_ρ of the position
the commands sent put it at, and no disagreement over the last d ticks: the tension guard's record check,
:mod:`.tension_guard`; a model without strings has no guard and no check), that step ends at the record's
positions instead: the drives did what was sent, and the
encoders' noise (σ_ρ, a quantum of tens of µm) then stays out of the momenta — a winch read 0.1 mm off is, over one
step, an acceleration of 1 m/s² in the model, and through the estimated momenta a string tension the guard
mispredicted by up to 0.4 N (docs/tracking.md, "Issue 24's two dips"). A command a cycle late or a drive that lags
shows as a disagreement, and the measured positions are taken as before.

Steps without a measurement (a gap) are taken with the commands in effect then
(:class:`~marionette_control.tracking.prediction.CommandHistory`). The gains come from the
filter's covariance recursion along the trajectory,

    P⁻(k+1) = A(k) P(k) A(k)ᵀ + W(k),     W(k) = E Σ_p Eᵀ + B(k) Σ_ρ B(k)ᵀ
    L(k)    = P⁻(k) Cᵀ (C P⁻(k) Cᵀ + V)⁻¹,   P(k) = (I − L(k) C) P⁻(k),   C = [I_nd 0]

where Σ_p (per step; E puts it on the momenta) stands for the model's errors (masses, damping,
hook position), Σ_ρ for the drive encoders' noise, which enters through B(k) as the input it
is, and V = σ_q² I for the joint encoders' noise and quantization (a quantum Δ: variance
Δ²/12) and what of the configurations the model cannot explain. P(0) is the stationary
covariance of the arm resting at x_d(0) (the recursion run at (A(0), B(0)) until it
settles). The filter starts a run from the measured configurations and x_d(0)'s momenta and
velocities (the trajectory starts at rest, and the controller's start tolerance holds the
arm near x_d(0)), so on a noise-free arm that is the model both estimators agree to
rounding. A gap of missed samples is bridged by prediction alone (up to ``max_gap_steps``);
a longer one re-initialises from two samples Δt apart.

Shapes: q (nq,), x (nx,), L (N+1, nx, nd).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from marionette_control import validation
from marionette_control.trajectory import Trajectory

#: name of each estimator (the controller's ``estimator`` parameter)
ESTIMATORS = ("kalman", "legendre")


@dataclass(frozen=True)
class EstimatorNoise:
    """Noise model of :class:`KalmanEstimator`: standard deviations in SI units (rad, m, N·m·s).

    measurement : of each measured dynamic configuration (joint encoder noise and quantization,
        √(σ² + Δ²/12), and what of the configurations the model cannot explain)
    momentum : per step, of each dynamic momentum (model error: masses, damping)
    actuator : of each measured kinematic configuration (the drive encoders' noise and quantization, and a drive's
        position against its command; 1e-4: the stand-in's winch encoder reads with 18 µm (47 µm with three times its
        noise), and 1e-5 let that noise slacken the string, docs/tracking.md "State estimation")
    """

    measurement: float = 2e-3
    momentum: float = 1e-3
    actuator: float = 1e-4

    def __post_init__(self):
        for name in ("measurement", "momentum", "actuator"):
            validation.positive(getattr(self, name), f"estimator noise '{name}'")


class LegendreEstimator:
    """x̂_k by the discrete Legendre transform of q_{k−1}, q_k (module docstring); needs both at every tick."""

    name = "legendre"
    needs_predecessor = True

    def __init__(self, system):
        self.system = system

    def reset(self) -> None:
        """Nothing to forget: every estimate uses only its two samples."""

    def estimate(self, k: int, q: np.ndarray, q_prev: Optional[np.ndarray], applied: Callable,
                 rho: Optional[np.ndarray] = None) -> Optional[np.ndarray]:
        """x̂_k (nx,) from q_{k−1} = ``q_prev``, q_k and the force inputs of ``applied(k − 1)``; None without
        ``q_prev``. ``rho`` (the record's drive positions, :meth:`KalmanEstimator.estimate`) does not enter: the
        transform differentiates two measured samples."""
        if q_prev is None:
            return None
        return legendre_state(self.system, k, q, q_prev, applied)


class KalmanEstimator:
    """Time-varying Kalman filter along a trajectory (module docstring).

    Parameters
    ----------
    system : _core.DiscreteSystem
    trajectory : Trajectory
        The reference (x_d, u_d) whose linearization the gains are computed on.
    noise : EstimatorNoise
    max_gap_steps : int
        Largest number of steps bridged by prediction alone; after a longer gap the next
        estimate re-initialises from two samples Δt apart (>= 1).
    """

    name = "kalman"
    needs_predecessor = False

    def __init__(self, system, trajectory: Trajectory, noise: EstimatorNoise = EstimatorNoise(),
                 max_gap_steps: int = 5):
        self.system = system
        self.noise = noise
        self.max_gap_steps = validation.integer(max_gap_steps, "max_gap_steps", minimum=1)
        m = system.model
        self.nd, self.nq, self.nu = m.nd, m.nq, m.nu
        A, B = system.linearize_trajectory(trajectory.X, trajectory.U)
        self.L = kalman_gains(np.asarray(A), np.asarray(B), m.nd, m.nq, noise)
        self._u = np.empty(m.nU)
        self._rest = np.array(trajectory.X[0, m.nq:])  # momenta and velocities of x_d(0): tracking starts there
        self._x: Optional[np.ndarray] = None
        self._k = 0
        self._dy = np.empty(m.nd)
        self.innovation: Optional[np.ndarray] = None  # ν_k (nd,) of the last estimate's update; None: it initialised

    def reset(self) -> None:
        """The next estimate initialises the filter from two samples."""
        self._x = None

    def estimate(self, k: int, q: np.ndarray, q_prev: Optional[np.ndarray], applied: Callable,
                 rho: Optional[np.ndarray] = None) -> Optional[np.ndarray]:
        """x̂_k (nx,) after the measurement q_k; ``applied(j)`` is the commanded input (nU,) in effect over step j;
        ``rho`` (nk,) the drive positions the last step ends at (None: the measured q_k's; the command record's
        while the drive encoders confirm it: module docstring).

        Steps since the last estimate are predicted with the applied inputs; :attr:`innovation` is then the update's
        q_dyn,k − q̂⁻_dyn,k (a view, overwritten by the next update), None after an initialisation. The first estimate of a run
        (k = 0) is [q; the momenta and velocities of x_d(0)]: tracking starts from the trajectory's initial
        state (the start tolerance checks the configurations), so no noisy difference of two samples enters
        the filter; the first after a gap longer than ``max_gap_steps`` is the Legendre estimate of
        ``q_prev``, q (None without ``q_prev``). Raises ``_core.StepError`` when the model cannot step it.
        """
        x = self._x
        nd = self.nd
        self.innovation = None
        if x is None and k == 0:
            x = np.concatenate([q, self._rest])
        elif x is None or not 0 < k - self._k <= self.max_gap_steps:
            if q_prev is None:
                return None
            x = legendre_state(self.system, k, q, q_prev, applied)
        else:
            step = self.system.step
            for j in range(self._k, k - 1):
                x = step(x, applied(j))[0]
            u = self._u
            u[:] = applied(k - 1)
            u[self.nu:] = q[nd:] if rho is None else rho  # where the drives were measured, or the confirmed record
            x = step(x, u)[0]
            L = self.L[min(k, len(self.L) - 1)]
            np.subtract(q[:nd], x[:nd], out=self._dy)
            x = x + L @ self._dy
            self.innovation = self._dy
        self._x, self._k = x, k
        return x


def legendre_state(system, k: int, q: np.ndarray, q_prev: np.ndarray, applied: Callable) -> np.ndarray:
    """x̂_k (nx,) by the discrete Legendre transform of q_{k−1}, q_k with the force inputs of the step between
    them (``applied(k − 1)``'s first nu entries; asked for only when they enter, through f⁺ ≠ 0)."""
    model = system.model
    u_prev = applied(k - 1)[:model.nu] if model.nu and model.forcing_weights[1] else None
    return system.state_from_configs(q_prev, q, u_prev)


def kalman_gains(A: np.ndarray, B: np.ndarray, nd: int, nq: int, noise: EstimatorNoise,
                 settle_steps: int = 500) -> np.ndarray:
    """Gains L (N+1, nx, nd) of the filter's covariance recursion (module docstring).

    A : (N, nx, nx), B : (N, nx, nU) — the linearization along the trajectory; L(k) is the gain of the
    measurement of step k (L(N) is used past the end). P(0) is the recursion at (A(0), B(0)) after
    ``settle_steps``, or earlier once it changes by < 1e-12 relative.
    """
    N, nx, _ = A.shape
    nk = nq - nd
    Bk = B[:, :, B.shape[2] - nk:]  # force inputs are known exactly: only the drive positions are measured
    Wp = np.zeros((nx, nx))
    Wp[nq:nq + nd, nq:nq + nd] = noise.momentum ** 2 * np.eye(nd)
    Sr = noise.actuator ** 2 * np.eye(nk)
    V = noise.measurement ** 2 * np.eye(nd)

    def update(Pm):
        S = Pm[:nd, :nd] + V
        L = np.linalg.solve(S, Pm[:nd, :]).T  # P⁻Cᵀ S⁻¹ (S and P⁻ symmetric)
        P = Pm - L @ Pm[:nd, :]
        return L, 0.5 * (P + P.T)

    def predict(P, k):
        Pm = A[k] @ P @ A[k].T + Wp + Bk[k] @ Sr @ Bk[k].T
        return 0.5 * (Pm + Pm.T)

    P = np.zeros((nx, nx))
    for _ in range(settle_steps):
        _, P_new = update(predict(P, 0))
        done = np.max(np.abs(P_new - P)) <= 1e-12 * max(np.max(np.abs(P_new)), 1e-300)
        P = P_new
        if done:
            break
    L = np.empty((N + 1, nx, nd))
    Pm = predict(P, 0)
    for k in range(N + 1):
        L[k], P = update(Pm)
        if k < N:
            Pm = predict(P, k)
    return L
