r"""Integral action on the measured arm angles: the part of the law that removes the model's offset.

The Kalman filter (:mod:`.estimation`) keeps its estimate on the *nominal* model — its step puts
the arm on the nominal string constraint for the measured drive positions — so on an arm whose
hook, masses or damping differ from the model the measured angles sit off the estimate by a
slowly varying amount, and a state feedback on x̂ drives the biased estimate, not the arm, onto
the trajectory (docs/tracking.md). The encoders measure the true angles; this part integrates
their error against the reference,

    z ← z + Δt (q_d,k − q_d,ref(k))          at every tick k ≤ N (q_d: the dynamic configurations, measured)

and the command for step j = k + d gets the integral's term of the LQI law (:mod:`marionette_control.lq.gains`),

    u(j) = u_law(j) − K_z(j) z,    j < N

Past the end (j ≥ N) the law holds the final configuration of the *model* without feedback. The loop
had moved the drives away from the model's positions to hold the *arm* on the trajectory (on the
realistic stand-in the carriage 2 cm off the model's), and going back at the drives' acceleration limit
slackened the string for a step (−0.74 N on the realistic stand-in); so past the end the kinematic
command is handed over from the last one of the trajectory, ρ_e, to the law's hold ρ_h linearly over
``hand_over`` seconds T (n = T/Δt steps),

    ρ(N + i) = ρ_h + (1 − min(1, (i + 1)/n)) (ρ_e − ρ_h)          (the string stays taut: 0.7 N at least)

**Anti-windup: the integral is held while the commands saturate.** The law's command is not always the one sent:
the stream clamp keeps it within the drives' range, speed and acceleration (:mod:`.command_limits`), the tension
guard raises it to the string's floor (:mod:`.tension_guard`), the acceleration budget bounds the feedback
(:mod:`.acceleration_budget`). While one of them moves it, the error the integral sees is one the command cannot act
on, and integrating it only stores a correction that comes out, too late and too large, once the limit lets go
(windup). So a tick's error is integrated only when the last command computed was sent as the law (with its
start blend) asked, within ``SATURATION`` (1 nm or 1 nrad; rounding is 10⁻¹⁶ m):

    z ← z + Δt (q_d,k − q_d,ref(k))     unless |u_sent(k−1) − u_law(k−1)|_∞ > SATURATION     (conditional integration)

(:meth:`AngleIntegral.note_command`, after each command; reset with z at a run's start, carried over with it on a
switch). Measured on the elbow swings re-timed to 1.375× on the realistic stand-in (docs/tracking.md, "Plant
family"): the plan rides 75 % of the drives' acceleration limits and the feedback's correction meets the limits
over a few ticks of each swing; integrating through them wound z up to 4.8 mrad s in 0.15 s (the elbow's, against
≤ 3.2 mrad s held), the carriage met its limit next, and the loop swung into a growing oscillation that left the path
tolerance at 4.8 s on every noise seed. Held, the loop tracks them (no abort, string ≥ 0.58 N); the library's other
motions, which hardly saturate, keep their figures to 0.01°.

K_z (N, nU, nd) is designed together with the trajectory's K from its design record
(:func:`~marionette_control.lq.gains.integral_gains`). After tick k, z is the design's z_{k+1} (the integral up to
the last measurement), the state the command of step k + 1 acts on: exact for the d = 1 of
ros2_control; for d > 1 the d − 1 predicted errors in between are left out. z starts at 0 with a
run; a switch to another trajectory keeps it (the model's offset is the arm's, not the trajectory's),
as the commands in flight are kept, so switching to the remainder of the same trajectory changes no
command. While a re-planned window (:mod:`marionette_control.ocp.mpc`) is in effect the integral is suspended (neither
integrated nor applied): a plan's gains are the LQR without integral, designed for its window, and a
planner in another process does not know z. The integral is not part of the feed-forward-only mode
(``feedback=False``). A perfect model tracks exactly without it and leaves z at 0, so the term does
nothing there.

Shapes: q, q_ref (nq or more,), z (nd,), K_z (N, nU, nd).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

#: |u_sent − u_law|_∞ above which a command counts as saturated (m, rad or N; module docstring, "Anti-windup")
SATURATION = 1e-9


class AngleIntegral:
    """z and the integral term of the law (module docstring).

    Parameters
    ----------
    K_z : ndarray (N, nU, nd)
        The integral's gains along the trajectory.
    dt : time step (s)
    nk : number of kinematic inputs (the drives' positions, last in u)
    hand_over : T (s), past the end (module docstring); ``hand_over_steps`` = n, its steps
    """

    def __init__(self, K_z: np.ndarray, dt: float, nk: int, hand_over: float = 0.2):
        K_z = np.asarray(K_z, dtype=float)
        if K_z.ndim != 3:
            raise ValueError(f"integral gains must have shape (N, nU, nd), got {K_z.shape}")
        self.K_z = K_z
        self.nd = K_z.shape[2]
        self.dt = float(dt)
        self.z = np.zeros(self.nd)
        self._nu = K_z.shape[1] - int(nk)
        self.hand_over_steps = max(1, int(round(hand_over / self.dt)))
        self._end: Optional[np.ndarray] = None
        self.held = False  # the last command was saturated: the next update is skipped (anti-windup)
        self.saturation = SATURATION

    @property
    def N(self) -> int:
        return self.K_z.shape[0]

    def reset(self) -> None:
        """A new run: z = 0, not held."""
        self.z[:] = 0.0
        self._end = None
        self.held = False

    def carry_over(self, other: "AngleIntegral") -> None:
        """Continues ``other``'s integral and whether it is held (a switch of trajectory mid-run)."""
        self.z[:] = other.z
        self.held = other.held

    def update(self, k: int, q: np.ndarray, q_ref: np.ndarray) -> None:
        """Adds tick k's error of the measured dynamic configurations q[:nd] against the reference q_ref[:nd]
        (k ≤ N; after the end the integral stays), unless :attr:`held` (the last command saturated)."""
        if k <= self.N and not self.held:
            nd = self.nd
            self.z += self.dt * (q[:nd] - q_ref[:nd])

    def note_command(self, u_law: np.ndarray, u_sent: np.ndarray) -> None:
        """The command of a tick: the law's u_law (nU,) (with the integral's term and the start blend) and the one sent
        u_sent (nU,) after the budget, the guard and the clamp; the next :meth:`update` is held when they differ by
        more than :data:`SATURATION` (module docstring, "Anti-windup")."""
        held = False
        for a, b in zip(u_law.tolist(), u_sent.tolist()):
            if abs(b - a) > self.saturation:
                held = True
        self.held = held

    def apply(self, j: int, u: np.ndarray, last: Optional[np.ndarray]) -> None:
        """The command u (nU,) of step j in place: u −= K_z(j) z for j < N; past the end the hand-over from the last
        command of the trajectory (``last``, the last command sent: the one of step N − 1 at the first call past
        the end) to the law's hold u (module docstring)."""
        if j < self.N:
            u -= self.K_z[j] @ self.z
            return
        nu = self._nu
        if self._end is None:
            if last is None:
                return
            self._end = np.array(last[nu:])
        w = 1.0 - min(1.0, (j - self.N + 1) / self.hand_over_steps)
        u[nu:] += w * (self._end - u[nu:])
