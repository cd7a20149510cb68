r"""The tension guard: every command keeps the predicted string tension above its floor, within the drives' limits.

A string pulls and never pushes. The optimizer keeps the tension of the *planned* motion above the minimum
(``ocp.constraints.TensionConstraints``), but the feedback adds its correction on top of the plan — after a push,
with encoder noise in the estimate, on an arm that is not the model — and can ask for a drive motion that slackens
the string. The guard predicts the tension the command will produce and, where it would fall below the floor, moves
the command the least distance that restores it.

The command u of step j (the law's, with the integral's term, faded in at a run's start: :mod:`.tick`) acts on the
predicted state x̂_j. The tension of string s over the step, T_s = (2/Δt) L λ_s (docs/constraint_forces.md), is a
function of (x_j, u_j) with exact derivatives from the step's implicit function (thesis §A.2.5,
``DiscreteSystem.linearize(x, u, constraint_forces=True)``). The guard solves that step at (x̂_j, clip(u)) and
linearizes there, in u (L is x̂_j's string length, not an input):

    T_s(u') ≈ T_s + a_sᵀ (u' − clip(u)) = c_s + a_sᵀ u',      a_s = ∂T_s/∂u = (2/Δt) L ∂λ_s/∂u   (nU,)

(:func:`~marionette_control.model.strings.tension_gradients`). Linearized at the command itself, not along the
trajectory: off the trajectory — an arm that is not the model, a start, a push — the trajectory's linearization
predicted the tension with errors of 0.13 N (realistic stand-in) to 3.7 N (damping ×3) standard deviation, the
nonlinear step 0.04–0.15 N (docs/tracking.md, "Tension guard"); a guard acting on the former's false alarms
broke the loop.

The floor of string s is its minimum tension (the model file's ``min_tension``) plus the controller's
``tension_reserve`` — but never above the tension the feed-forward alone would give at this state,
T_s(clip(u_d)) ≈ c_s + a_sᵀ clip(u_d) (u_d: the law's feed-forward, the motion's, a plan's or the hold past the
end):

    F_s = min(T_min,s + reserve, c_s + a_sᵀ clip(u_d))

so the guard takes from the feedback's correction whatever would take the string below its floor, and never more
than the whole correction: the feed-forward command always meets the floor, the guard never fights the plan.

That floor follows the feed-forward below the minimum, where the arm's predicted state is far from the plan's (the
re-timed elbow swings at a turn: the feed-forward's tension −7 to −11 N, the guard stood aside and the plant's
string went to 0.49 N). While the controller's record of the drives is *confirmed* — each drive's measured position
ρ_k (the sample's kinematic configurations) within ``record_tolerance`` of the position the commands sent put it at
(ρ_k of :meth:`~.prediction.CommandHistory.stream_state`) — the prediction's inputs are the ones that acted, and the
floor does not go below the minimum:

    F_s = min(T_min,s + reserve, max(T_min,s, c_s + a_sᵀ clip(u_d)))      (record confirmed)

A command that arrived late or was lost, or a drive that lags its commands, shows as a disagreement (a step of
the drive's motion, millimetres, against the encoders' tens of µm); from it on, for ``record_hold`` ticks after the
last disagreement, the floor is the feed-forward's as above: predicting from commands that did not act when sent,
a floor under the minimum fought the feed-forward's catch-up and the loop left its path tolerance on 5 of 12 seeds
with 10 % of commands a cycle late, on none with the record's check (docs/tracking.md, "Issue 24's two dips").
The same check tells the state estimate where the drives are (:mod:`.estimation`: at the record's positions while
confirmed), so it runs before the estimate (:meth:`~.tick.Tracking.estimate_predict`). A floor of the plan's own
tension instead (along the trajectory, at x_d) does not know the arm's state: on a harsh
closed loop (two steps of delay, 20 % of commands late, lost samples, a re-planned window;
``test/test_tick_kernel.py``) such a guard held the string against the feedback for tens of ticks in a row until the
path tolerance aborted (plant tension down to −5 N), where this one moved 13–26 commands and tracked to the end as
without a guard. With the stream clamp's box [lo, hi] (:meth:`~.command_limits.CommandLimits.box`:
clamp(u) = clip(u, lo, hi), within the acceleration budget's bounds where they meet the drives' limits,
:mod:`.acceleration_budget`), the guard acts when T_s(clip(u)) < F_s; it then replaces u by the point of the box
nearest to u (Euclidean, in the input's units) on which the predicted tension is F_s:

    min ‖u' − u‖²   s.t.   lo ≤ u' ≤ hi,   a_sᵀ u' ≥ F_s − c_s

whose solution is u' = clip(u + μ a_s, lo, hi) with the μ > 0 at which a_sᵀ u' = F_s − c_s (KKT; the left side is
piecewise linear and nondecreasing in μ, with a break where a component meets its bound: the breaks are sorted
and the segment holding the root interpolated exactly). When no point of the box reaches the floor (the drives
cannot restore the tension within their limits this step) u' is the point of the box of highest predicted tension.
The clamp that follows then leaves u' where it is. Several strings are taken one after another, the sweep
repeated (at most once per string) until none is below its floor.

Without feedback (``feedback=False``, feed-forward only) the guard is off: that mode measures what the plan alone
does. The compiled tick (:mod:`.native_tick`) runs the same operations in the same order; this module is its
readable reference (``test/test_tick_kernel.py``).

Shapes: x (nx,); u, u_d, lo, hi, a_s (nU,); F, T_min (S,); ρ (nk,).
"""

from __future__ import annotations

import math

import numpy as np

from marionette_control import validation
from marionette_control.model.strings import string_tensions, tension_gradients

#: The record's tolerance in standard deviations of the filter's drive-encoder noise σ_ρ (``estimator_noise.actuator``,
#: 1e-4 m: tolerance 0.3 mm); its hold is the command delay d (the commands in flight the prediction steps through
#: were sent on the record that disagreed). Measured on the realistic stand-in: measured minus recorded drive
#: positions 12 µm (median), 42–68 µm at most over a run (the winch's 30.7 µm count and 15 µm noise); with a command
#: a cycle late 4–20 mm (99th percentile to largest) (docs/tracking.md, "Issue 24's two dips").
RECORD_SIGMAS = 3.0


def _dot(a: list, b: list) -> float:
    s = 0.0
    for x, y in zip(a, b):
        s += x * y
    return s


def _clip(y: list, a: list, mu: float, lo: list, hi: list) -> list:
    """clip(y + μ a, lo, hi) componentwise."""
    out = []
    for yi, ai, l, h in zip(y, a, lo, hi):
        z = yi + mu * ai
        out.append(l if z < l else h if z > h else z)
    return out


def raise_to_floor(y: list, a: list, b: float, lo: list, hi: list) -> list:
    """The point clip(y + μ a, lo, hi), μ ≥ 0, of the box [lo, hi] nearest to y with aᵀ· ≥ b, or the box's point
    of largest aᵀ· when none reaches b (module docstring); y, a, lo, hi : nU floats. Assumes aᵀ clip(y) < b."""
    breaks = []
    tail = 0.0  # the slope of aᵀ clip(y + μ a) past every break
    for yi, ai, l, h in zip(y, a, lo, hi):
        if ai == 0.0:
            continue
        bound = h if ai > 0.0 else l
        if math.isinf(bound):
            tail += ai * ai
        for m in ((l - yi) / ai, (h - yi) / ai):
            if 0.0 < m < math.inf:
                breaks.append(m)
    breaks.sort()
    mu0, g0 = 0.0, _dot(a, _clip(y, a, 0.0, lo, hi))
    for m in breaks:
        g = _dot(a, _clip(y, a, m, lo, hi))
        if g >= b:
            return _clip(y, a, mu0 + (b - g0) * (m - mu0) / (g - g0), lo, hi)
        mu0, g0 = m, g
    if tail > 0.0:
        return _clip(y, a, mu0 + (b - g0) / tail, lo, hi)
    return _clip(y, a, mu0, lo, hi)


class TensionGuard:
    """The guard of one controller (module docstring).

    system : the ``_core.DiscreteSystem`` of the tracked trajectory; strings : the model's
    :class:`~marionette_control.model.limits.ModelLimits` (its strings' constraint and length indices and minimum
    tensions); reserve : N above the minimum; limits : the drives' CommandLimits for the system's Δt;
    record_tolerance : m (rad), the largest disagreement of a measured drive position with the command record that
    confirms the record; record_hold : ticks the record stays unconfirmed after a disagreement (module docstring).
    ``acted`` : whether the last :meth:`project` moved the command; ``confirmed`` : whether the record is.
    """

    def __init__(self, system, strings, reserve: float, limits, record_tolerance: float, record_hold: int):
        self.system = system
        self.constraint_index = np.asarray(strings.string_index, dtype=int)
        self.length_index = np.asarray(strings.string_length, dtype=int)
        self.minimum = np.asarray(strings.min_tension, dtype=float).tolist()
        self.reserve = float(reserve)
        self.limits = limits
        self.record_tolerance = validation.nonnegative(record_tolerance, "the guard's record tolerance")
        self.record_hold = validation.integer(record_hold, "the guard's record hold (ticks)", minimum=0)
        self.acted = False
        self.start_run()

    def start_run(self) -> None:
        """A new run: the record (the hold at the measured drives) is confirmed."""
        self._since = self.record_hold + 1

    def confirm(self, rho_measured, rho_record) -> bool:
        """Whether the command record is confirmed at this tick, given the measured drive positions ρ_k (nk,) and
        the record's (nk,) (module docstring); also :attr:`confirmed`."""
        agree = all(abs(a - b) <= self.record_tolerance for a, b in zip(rho_measured, rho_record))
        self._since = self._since + 1 if agree else 0
        return self.confirmed

    @property
    def confirmed(self) -> bool:
        return self._since > self.record_hold

    def tensions(self, x: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(T (S,), ∂T/∂u (S, nU)) of the step from x (nx,) under u (nU,). Raises ``_core.StepError`` when the model
        cannot take the step."""
        _, _, _, lam, lam_x, lam_u = self.system.linearize(x, u, constraint_forces=True)
        X, Lam = x[None, :], lam[None, :]
        ci, li, dt = self.constraint_index, self.length_index, self.system.dt
        T = string_tensions(X, Lam, ci, li, dt)[0]
        return T, tension_gradients(X, Lam, lam_x[None], lam_u[None], ci, li, dt)[1][0]

    def project(self, u: np.ndarray, u_ff: np.ndarray, x: np.ndarray, rho, v, inner=None) -> bool:
        """The command u (nU,) on the predicted state x (nx,) it acts on, in place, against the law's feed-forward
        u_ff (nU,), with the drives' stream state (ρ_j, v_j) (nk each) of the clamp and the acceleration budget's
        bounds ``inner`` (None: none; :mod:`.acceleration_budget`) (module docstring); whether it acted (also
        :attr:`acted`). Raises ``_core.StepError`` when the model cannot take the step."""
        lo, hi = self.limits.box(rho, v, inner)
        y = u.tolist()
        uc = [l if z < l else h if z > h else z for z, l, h in zip(y, lo, hi)]
        uf = [l if z < l else h if z > h else z for z, l, h in zip(u_ff.tolist(), lo, hi)]
        T, Tu = self.tensions(x, np.array(uc))
        rows, floors = [], []
        for s, minimum in enumerate(self.minimum):
            a = Tu[s].tolist()
            c = float(T[s]) - _dot(a, uc)
            rows.append((a, c))
            feedforward = c + _dot(a, uf)
            floors.append(min(minimum + self.reserve, max(minimum, feedforward) if self.confirmed else feedforward))
        acted = False
        for _ in range(len(rows)):
            moved = False
            for (a, c), floor in zip(rows, floors):
                b = floor - c
                if _dot(a, _clip(y, a, 0.0, lo, hi)) >= b:
                    continue
                y = raise_to_floor(y, a, b, lo, hi)
                moved = True
            acted = acted or moved
            if not moved:
                break
        if acted:
            u[:] = y
        self.acted = acted
        return acted


__all__ = ["RECORD_SIGMAS", "TensionGuard", "raise_to_floor"]
