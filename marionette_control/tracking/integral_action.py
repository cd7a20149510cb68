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

**Anti-windup: the integral is held while it would push into a saturation.** The law's command is not always the
one sent: the stream clamp keeps it within the drives' range, speed and acceleration (:mod:`.command_limits`), the
tension guard raises it to the string's floor (:mod:`.tension_guard`), the acceleration budget bounds the feedback
(:mod:`.acceleration_budget`). What they took off the last command (tick k − 1, step j − 1),

    c = u_law(j−1) − u_sent(j−1)     (nU; 0 when |c|_∞ ≤ ``SATURATION``, 1 nm or 1 nrad: the clamp's rounding is 10⁻¹⁶)

(u_law with the integral's term and the start blend; :meth:`AngleIntegral.note_command`), is a correction the drives
or the string could not make. An integral that keeps adding errors in that direction only stores a correction that
comes out, too late and too large, once the limit lets go (windup). So tick k's increment Δz = Δt (q_d,k −
q_d,ref(k)) is left out when its share of the command of step j = k + d would push further along c
(conditional integration, the integrator clamping of PI anti-windup, for several inputs):

    z ← z + Δz     unless  −(K_z(j) Δz) · c > 0      (j < N; past the end the integral is not applied)

and integrated when it would relieve the saturation or there is none. Reset with z at a run's start (c = 0), carried
over with it on a switch. Holding the integral whenever a command was moved, whatever the direction, is not enough:
the 3 s bump on damping ×3 (the start's commands clamped while the drives catch up with the plan) lost its
integral's correction and slackened the string (0.00 N, against 0.63 N integrating through and with this rule).

Measured on the elbow swings re-timed to 1.375× on the realistic stand-in (docs/tracking.md, "Anti-windup"): the
plan rides 75 % of the drives' acceleration limits and the feedback's correction meets the limits over a few ticks of
each swing; integrating through them wound the elbow's z up to 4.8 mrad s in 0.15 s, the carriage met its limit
next, and the loop swung into a growing oscillation that left the path tolerance at 4.8 s on every noise seed. With
the rule the loop tracks them; the library's other motions, which hardly saturate, keep their figures to 0.01°.

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

#: |u_law − u_sent|_∞ above which a command counts as saturated (m, rad or N; module docstring, "Anti-windup")
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
    saturation : |u_law − u_sent|_∞ above which a command counts as saturated (:data:`SATURATION`; math.inf: never,
        the integral winds up through saturation)
    """

    def __init__(self, K_z: np.ndarray, dt: float, nk: int, hand_over: float = 0.2, saturation: float = SATURATION):
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
        self.cut = np.zeros(K_z.shape[1])  # c: what the budget, guard and clamp took off the last command
        self.held = False  # the last update was left out (anti-windup)
        self.saturation = float(saturation)
        if not self.saturation > 0:
            raise ValueError(f"saturation must be > 0 (math.inf: never held), got {saturation!r}")

    @property
    def N(self) -> int:
        return self.K_z.shape[0]

    def reset(self) -> None:
        """A new run: z = 0, c = 0."""
        self.z[:] = 0.0
        self._end = None
        self.cut[:] = 0.0
        self.held = False

    def carry_over(self, other: "AngleIntegral") -> None:
        """Continues ``other``'s integral and its last command's c (a switch of trajectory mid-run)."""
        self.z[:] = other.z
        self.cut[:] = other.cut
        self.held = other.held

    def update(self, k: int, q: np.ndarray, q_ref: np.ndarray, j: int) -> None:
        """Adds tick k's error of the measured dynamic configurations q[:nd] against the reference q_ref[:nd]
        (k ≤ N; after the end the integral stays), unless its term in the command of step j would push further along
        the last command's c (module docstring, "Anti-windup"; :attr:`held` says whether it was left out)."""
        self.held = False
        if k > self.N:
            return
        nd = self.nd
        dz = self.dt * (q[:nd] - q_ref[:nd])
        if j < self.N and -float((self.K_z[j] @ dz) @ self.cut) > 0.0:
            self.held = True
            return
        self.z += dz

    def note_command(self, u_law: np.ndarray, u_sent: np.ndarray) -> None:
        """The command of a tick: the law's u_law (nU,) (with the integral's term and the start blend) and the one sent
        u_sent (nU,) after the budget, the guard and the clamp: c = u_law − u_sent, or 0 when no entry exceeds
        :attr:`saturation` (module docstring, "Anti-windup")."""
        np.subtract(u_law, u_sent, out=self.cut)
        if not np.max(np.abs(self.cut)) > self.saturation:
            self.cut[:] = 0.0

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
