"""The position drives of the simulated arm: how a kinematic configuration follows its setpoints.

Each kinematic configuration ρ is a position drive (thesis: a kinematic configuration is prescribed, the
motors set it). Per step it receives the setpoint r_{k+1} (the last command in effect) and moves from ρ_k
with speed v_k = (ρ_k − ρ_{k−1})/Δt to ρ_{k+1}; a_max, v_max are its acceleration and speed limits,
[ρ_min, ρ_max] its range (always applied last, as a hard stop). The limits are the plant file's
``actuators`` section (:func:`marionette_control.model.limits.from_description`).

``cyclic_position`` (default; a servo drive in cyclic synchronous position mode with a setpoint
interpolator): the setpoints are samples of a motion. The drive estimates the stream's speed
w = clip((r_{k+1} − r_k)/Δt, ±v_max) and its lag behind the stream D = (r_{k+1} − wΔt) − ρ_k,
and closes the lag in the frame moving with the stream no faster than it can brake::

    v* = w + sign(D) · s_brake(|D|)
    v_{k+1} = clip(v*, max(v_k − a_max Δt, −v_max, −s_brake(ρ_k − ρ_min)),
                       min(v_k + a_max Δt, v_max, s_brake(ρ_max − ρ_k)))
    ρ_{k+1} = ρ_k + v_{k+1} Δt

s_brake(d) is the largest relative speed s from which slowing by a_max Δt per step covers no more
than d, this step included: the distance Δt Σ_{j=0..n} (s − j a_max Δt), n = ⌊s/(a_max Δt)⌋, is
linear in s between multiples of a_max Δt, so::

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
"""

from __future__ import annotations

import numpy as np

from marionette_control.model.limits import ModelLimits

DRIVE_MODES = ("cyclic_position", "profile_position", "rate_limited")


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
