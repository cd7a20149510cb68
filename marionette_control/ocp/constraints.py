"""Inequality constraints of a trajectory and the barrier that turns them into a cost term.

Constraints (margins ≥ 0 when satisfied, in the limit's physical unit; ``rows`` name them):

=================  ===========================================================  ==========
family             margin at step k                                             steps
=================  ===========================================================  ==========
``range``          ρ_{k+1,i} − min_i,  max_i − ρ_{k+1,i}   (ρ_{k+1} = u_k)        0..N−1
``speed``          v_max,i ∓ s_{k,i},  s_k = (ρ_{k+1} − ρ_k)/Δt                  0..N−1
``acceleration``   a_max,i ∓ a_{k,i},  a_k = (s_k − v_k)/Δt                     0..N−1
``configuration``  q_{k,i} − lower_i,  upper_i − q_{k,i}  (joint limits)         0..N
``force``          u_{k,i} − lower_i,  upper_i − u_{k,i}  (force inputs)         0..N−1
``tension``        T_{k,j} − T_min,j,  T_{k,j} = 2 L_{k,j} λ_{k,j} / Δt           0..N−1
=================  ===========================================================  ==========

ρ are the kinematic configurations (drives: thesis §3.6), v_k = (ρ_k − ρ_{k−1})/Δt their
velocities in the state, so s_k = v_{k+1}: the speed and acceleration a step commands, the step
from the initial state (v_0 = 0 at rest) included. λ_k (m,) are step k's constraint forces
(thesis (4.36), paired with Dh(q_k)); for a string h = |p_hook − p_top|² − L² the tension is
T_k = 2 L_k λ_k / Δt, positive when the string pulls (the core's convention). All families but
the tension are linear in (x_k, u_k) (:class:`LinearConstraints`); the tension is not
(:class:`TensionConstraints`, derivatives from the core's λ_x, λ_u and, in the Newton model,
its contracted D²λ).

A constraint set contracts any scalar function of its margins into cost derivatives
(``contract``), which is all a term needs; :class:`BarrierTerm` is that term for the
approximate log barrier of Hauser & Saccon (thesis reference [16], CDC 2006):

.. math::
    \\beta_\\delta(c) = -\\log c \\;(c > \\delta), \\qquad
    \\beta_\\delta(c) = \\tfrac12\\left[\\left(\\tfrac{c - 2\\delta}{\\delta}\\right)^2 - 1\\right] - \\log\\delta
    \\;(c \\le \\delta),

C² at c = δ and finite for infeasible c, applied to the normalized margins c = margin/scale with
weight μΔt per constraint and step (a time integral of the barrier, independent of Δt).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from marionette_control import validation
from marionette_control.model.strings import string_tensions, tension_gradients
from marionette_control.ocp.terms import Term

FAMILIES = ("range", "speed", "acceleration", "configuration", "force", "tension")


@dataclass(frozen=True)
class ConstraintRow:
    """One scalar constraint: ``family`` (table above), ``component`` (configuration, input or string
    name), ``side`` (``lower``: value ≥ limit, ``upper``: value ≤ limit), ``limit`` and ``unit`` (SI),
    ``scale`` (the margin that counts as "well inside": the normalization of the barrier)."""

    family: str
    component: str
    side: str
    limit: float
    unit: str
    scale: float

    @property
    def label(self) -> str:
        rel = ">=" if self.side == "lower" else "<="
        quantity = {"speed": "speed", "acceleration": "acceleration", "tension": "tension"}.get(self.family, "")
        what = f"{self.component} {quantity}".strip()
        return f"{what} {rel} {self.limit:g}{(' ' + self.unit) if self.unit else ''}"


class InequalityConstraints:
    """A set of scalar constraints evaluated at every step (see the module docstring).

    ``rows`` (R,); ``terminal`` (R,) bool: the row also applies to x_N (state-only rows);
    ``needs_lambda``. Subclasses implement :meth:`margins` and :meth:`contract`.
    """

    needs_lambda = False

    def __init__(self, rows: Sequence[ConstraintRow], terminal: Optional[np.ndarray] = None):
        self.rows = tuple(rows)
        self.scale = np.array([r.scale for r in self.rows], dtype=float)
        self.terminal = np.zeros(len(self.rows), bool) if terminal is None else np.asarray(terminal, bool)

    def __len__(self) -> int:
        return len(self.rows)

    def margins(self, point) -> np.ndarray:
        """Margins (N+1, R) in physical units (≥ 0 satisfied); row N is NaN where a row has no terminal part."""
        raise NotImplementedError  # pragma: no cover

    def margin_derivative(self, point, Z: np.ndarray, V: np.ndarray) -> np.ndarray:
        """The margins' first-order change along a direction ζ = (Z (N+1, nx), V (N, nU)) at ``point``:
        (N+1, R), row N zero where a row has no terminal part (what :meth:`contract` differentiates)."""
        raise NotImplementedError  # pragma: no cover

    def contract(self, point, a: np.ndarray, b: np.ndarray, exact: bool, data) -> None:
        """Derivatives of Σ_{k,r} B_kr(margin_kr) into ``data`` (a TermData), given a = B' and b = B''
        (N+1, R) at the margins (row N only where ``terminal``; NaN-free, zero where unused)."""
        raise NotImplementedError  # pragma: no cover


class LinearConstraints(InequalityConstraints):
    """Constraints whose margins are affine: margin_k = Gx x_k + Gu u_k + g0 (rows with Gu = 0 may be
    terminal). Gx (R, nx), Gu (R, nU), g0 (R,)."""

    def __init__(self, rows, Gx, Gu, g0, terminal=None):
        super().__init__(rows, terminal)
        self.Gx, self.Gu, self.g0 = (np.asarray(a, dtype=float) for a in (Gx, Gu, g0))
        if np.any(self.terminal & np.any(self.Gu != 0, axis=1)):
            raise ValueError("a terminal constraint row may not depend on the inputs")
        # The Hessian of Σ_r B_r(margin_r) is Σ_r B_r'' g_r g_rᵀ with g_r = (Gx_r, Gu_r): one product of the
        # weights B'' (N, R) with the rows' outer products (R, (nx + nU)²) gives every step's blocks.
        G = np.hstack([self.Gx, self.Gu])
        self._outer = np.einsum("ri,rj->rij", G, G).reshape(len(self.rows), -1)
        self._outer_x = np.einsum("ri,rj->rij", self.Gx, self.Gx).reshape(len(self.rows), -1)
        self._has_u = bool(np.any(self.Gu != 0))

    def margins(self, point):
        X, U = point.X, point.U
        M = np.full((X.shape[0], len(self.rows)), np.nan)
        M[:-1] = X[:-1] @ self.Gx.T + U @ self.Gu.T + self.g0
        t = self.terminal
        M[-1, t] = self.Gx[t] @ X[-1] + self.g0[t]
        return M

    def margin_derivative(self, point, Z, V):
        D = np.zeros((Z.shape[0], len(self.rows)))
        D[:-1] = Z[:-1] @ self.Gx.T + V @ self.Gu.T
        t = self.terminal
        D[-1, t] = self.Gx[t] @ Z[-1]
        return D

    def contract(self, point, a, b, exact, data):
        N, nx = point.U.shape[0], point.X.shape[1]
        nU = point.U.shape[1]
        data.lx = a @ self.Gx
        data.lu = a[:-1] @ self.Gu
        H = (b[:-1] @ self._outer).reshape(N, nx + nU, nx + nU)
        data.Lxx = H[:, :nx, :nx]
        if self._has_u:
            data.Lxu, data.Luu = H[:, :nx, nx:], H[:, nx:, nx:]
        if self.terminal.any():
            data.Lxx_N = (b[-1] @ self._outer_x).reshape(nx, nx)


class TensionConstraints(InequalityConstraints):
    """T_{k,j} − T_min,j ≥ 0 for strings j: T = (2/Δt) L λ with L = q[length_j] and λ = λ[constraint_j].

    Derivatives: ∇T = (2/Δt)(λ e_L + L ∇λ) from the core's Lam_x, Lam_u; the exact Hessian of a
    function B of the margin is B''∇T∇Tᵀ + B'(2/Δt)(e_L∇λᵀ + ∇λ e_Lᵀ) plus B'(2/Δt)L D²λ, which goes
    to the core as the covector w = B'(2/Δt)L on λ_k.
    """

    needs_lambda = True

    def __init__(self, strings: Sequence[str], constraint_index, length_index, min_tension, dt: float,
                 scale: float = 1.0):
        min_tension = np.asarray(min_tension, dtype=float)
        rows = [ConstraintRow("tension", s, "lower", float(t), "N", scale) for s, t in zip(strings, min_tension)]
        super().__init__(rows)
        self.cidx = np.asarray(constraint_index, dtype=int)
        self.lidx = np.asarray(length_index, dtype=int)
        self.min_tension = min_tension
        self.dt = float(dt)
        self.c = 2.0 / dt

    def tension(self, point) -> np.ndarray:
        """T (N, n_strings) [N]."""
        if point.Lam is None:
            raise ValueError("the tension constraints need the constraint forces (Point.Lam)")
        return string_tensions(point.X[:-1], point.Lam, self.cidx, self.lidx, self.dt)

    def margins(self, point):
        M = np.full((point.X.shape[0], len(self.rows)), np.nan)
        M[:-1] = self.tension(point) - self.min_tension
        return M

    def _gradients(self, point):
        """(∇_x T (N, S, nx), ∇_u T (N, S, nU)) from the core's λ_x, λ_u (class docstring)."""
        if point.Lam_x is None:
            raise ValueError("the tension constraints' derivatives need Point.Lam_x and Point.Lam_u")
        return tension_gradients(point.X[:-1], point.Lam, point.Lam_x, point.Lam_u, self.cidx, self.lidx, self.dt)

    def margin_derivative(self, point, Z, V):
        Tx, Tu = self._gradients(point)
        D = np.zeros((Z.shape[0], len(self.rows)))
        D[:-1] = np.einsum("ksi,ki->ks", Tx, Z[:-1]) + np.einsum("ksi,ki->ks", Tu, V)
        return D

    def contract(self, point, a, b, exact, data):
        X = point.X
        N, nx = point.U.shape[0], X.shape[1]
        c, j, li = self.c, self.cidx, self.lidx
        Tx, Tu = self._gradients(point)                     # (N, S, nx), (N, S, nU)
        T = np.concatenate([Tx, Tu], axis=2)                # (N, S, nx + nU)
        a, b = a[:-1], b[:-1]
        gx = np.zeros_like(X)
        g = np.einsum("ks,ksi->ki", a, T)
        gx[:-1] = g[:, :nx]
        data.lx, data.lu = gx, g[:, nx:]
        H = np.matmul(T.transpose(0, 2, 1), b[:, :, None] * T)             # Σ_s b ∇T ∇Tᵀ
        if exact:
            # B' (2/Δt)(e_L ∇λᵀ + ∇λ e_Lᵀ): the string length's row and column of every step.
            ac = c * a
            lam_xu = np.concatenate([point.Lam_x[:, j, :], point.Lam_u[:, j, :]], axis=2)    # (N, S, nx + nU)
            for s_, i in enumerate(li):
                cross = ac[:, s_, None] * lam_xu[:, s_, :]
                H[:, i, :] += cross
                H[:, :, i] += cross
            w = np.zeros((N, point.Lam.shape[1]))
            np.add.at(w, (slice(None), j), ac * X[:-1, li])
            data.w = w
        data.Lxx, data.Lxu, data.Luu = H[:, :nx, :nx], H[:, :nx, nx:], H[:, nx:, nx:]


# --------------------------------------------------------------------------------------------- building


def linear_constraints(model, limits, dt: float, families: Sequence[str],
                       units: Optional[dict] = None) -> Optional[LinearConstraints]:
    """The linear families of ``families`` for ``model`` from ``limits`` (``model.limits.ModelLimits``):
    range, speed and acceleration rows for every kinematic configuration with finite limits,
    configuration and force rows for finite bounds. None when there is no row.

    ``units`` maps configuration names to their unit (``m``, ``rad``) for the labels.
    """
    nd, nq, nu = model.nd, model.nq, model.nu
    nx, nU = model.nx, model.nU
    units = units or {}
    rows, gx, gu, g0, term = [], [], [], [], []

    def add(family, component, side, limit, unit, scale, xcoef=None, ucoef=None, terminal=False):
        sign = 1.0 if side == "lower" else -1.0
        x, u = np.zeros(nx), np.zeros(nU)
        for i, v in (xcoef or {}).items():
            x[i] += sign * v
        for i, v in (ucoef or {}).items():
            u[i] += sign * v
        rows.append(ConstraintRow(family, component, side, float(limit), unit, float(scale)))
        gx.append(x)
        gu.append(u)
        g0.append(-sign * float(limit))
        term.append(terminal)

    for i, name in enumerate(limits.kinematic):
        rho, v, un = nd + i, nq + nd + i, nu + i        # ρ_k in x, v_k in x, ρ_{k+1} in u
        unit = units.get(name, "")
        lo, hi = limits.lower[i], limits.upper[i]
        if "range" in families and np.isfinite(lo) and np.isfinite(hi):
            for side, lim in (("lower", lo), ("upper", hi)):
                add("range", name, side, lim, unit, hi - lo, ucoef={un: 1.0})
        vmax = limits.max_velocity[i]
        if "speed" in families and np.isfinite(vmax):
            for side, lim in (("lower", -vmax), ("upper", vmax)):
                add("speed", name, side, lim, f"{unit}/s", vmax, xcoef={rho: -1.0 / dt}, ucoef={un: 1.0 / dt})
        amax = limits.max_acceleration[i]
        if "acceleration" in families and np.isfinite(amax):
            for side, lim in (("lower", -amax), ("upper", amax)):
                add("acceleration", name, side, lim, f"{unit}/s^2", amax,
                    xcoef={rho: -1.0 / dt ** 2, v: -1.0 / dt}, ucoef={un: 1.0 / dt ** 2})
    if "configuration" in families:
        for i, name in enumerate(model.config_names):
            lo, hi = limits.config_lower[i], limits.config_upper[i]
            if np.isfinite(lo) and np.isfinite(hi):
                for side, lim in (("lower", lo), ("upper", hi)):
                    add("configuration", name, side, lim, units.get(name, ""), hi - lo, xcoef={i: 1.0},
                        terminal=True)
    if "force" in families:
        for i, name in enumerate(list(model.discrete_input_names)[:nu]):
            lo, hi = limits.force_lower[i], limits.force_upper[i]
            for side, lim in (("lower", lo), ("upper", hi)):
                if np.isfinite(lim):
                    width = hi - lo if np.isfinite(hi - lo) else max(abs(lim), 1.0)
                    add("force", name, side, lim, "", width, ucoef={i: 1.0})
    if not rows:
        return None
    return LinearConstraints(rows, np.array(gx), np.array(gu), np.array(g0), np.array(term))


def tension_constraints(limits, dt: float) -> Optional[TensionConstraints]:
    """T ≥ T_min for every string of ``limits`` (None when the model has no string)."""
    if not limits.strings:
        return None
    return TensionConstraints(limits.strings, limits.string_index, limits.string_length, limits.min_tension, dt)


# --------------------------------------------------------------------------------------------- barrier


def barrier(c: np.ndarray, delta: float, order: int = 0):
    """β_δ(c) (module docstring) and, with ``order`` 2, its first and second derivatives.

    δ = 0 is the exact log barrier (+inf for c ≤ 0)."""
    c = np.asarray(c, dtype=float)
    if delta > 0:
        inside = c > delta
        safe = np.where(inside, c, 1.0)
        r = (c - 2.0 * delta) / delta
        v = np.where(inside, -np.log(safe), 0.5 * (r * r - 1.0) - np.log(delta))
        if order == 0:
            return v
        d1 = np.where(inside, -1.0 / safe, r / delta)
        d2 = np.where(inside, 1.0 / (safe * safe), 1.0 / (delta * delta))
        return v, d1, d2
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.where(c > 0, -np.log(np.where(c > 0, c, 1.0)), np.inf)
        if order == 0:
            return v
        return v, -1.0 / c, 1.0 / (c * c)


class BarrierTerm(Term):
    """μ Δt Σ_k Σ_r β_δ(margin_kr / scale_r): inequality constraints as a cost (module docstring).

    constraints : an :class:`InequalityConstraints`;  weight : μ > 0;  delta : δ ≥ 0;  dt : Δt.
    :meth:`with_weight` gives the same term at another μ, δ (the optimizer lowers them, thesis [16]).
    """

    def __init__(self, constraints: InequalityConstraints, weight: float, delta: float, dt: float,
                 name: Optional[str] = None):
        super().__init__(name or f"barrier:{','.join(sorted({r.family for r in constraints.rows}))}")
        validation.positive(weight, "the barrier weight")
        validation.nonnegative(delta, "the barrier threshold delta")
        self.constraints, self.weight, self.delta, self.dt = constraints, float(weight), float(delta), float(dt)
        self.needs_lambda = self.has_curvature = constraints.needs_lambda

    def with_weight(self, weight: float, delta: Optional[float] = None) -> "BarrierTerm":
        out = copy.copy(self)
        out.weight = float(weight)
        if delta is not None:
            out.delta = float(delta)
        return out

    def normalized_margins(self, point) -> np.ndarray:
        """margin/scale (N+1, R) of every row and step; +inf where a row has no terminal part."""
        M = self.constraints.margins(point)
        C = M / self.constraints.scale
        C[-1, ~self.constraints.terminal] = np.inf         # no terminal part: β(∞) is taken as 0 below
        return C

    def calc(self, data, point):
        C = self.normalized_margins(point)
        used = C != np.inf
        v = np.zeros_like(C)
        v[used] = barrier(C[used], self.delta)
        data.value = self.weight * self.dt * float(v.sum())
        return data.value

    def calc_diff(self, data, point, exact=True):
        C = self.normalized_margins(point)
        used = C != np.inf
        a, b = np.zeros_like(C), np.zeros_like(C)
        _, d1, d2 = barrier(C[used], self.delta, 2)
        s = np.broadcast_to(self.constraints.scale, C.shape)[used]
        f = self.weight * self.dt
        a[used], b[used] = f * d1 / s, f * d2 / (s * s)
        self.constraints.contract(point, a, b, exact, data)


__all__ = ["FAMILIES", "ConstraintRow", "InequalityConstraints", "LinearConstraints", "TensionConstraints",
           "linear_constraints", "tension_constraints", "barrier", "BarrierTerm"]
