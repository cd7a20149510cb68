"""The descent direction of a barrier problem on the linearized constraints (interior-point practice).

The projection-operator optimizer (:mod:`.projection`) finds its direction ζ = (z, v) as the
minimizer of a quadratic model on the linearized dynamics (thesis (6.29)-(6.30)): with barrier
terms (:class:`~.constraints.BarrierTerm`) the model holds the barrier's curvature at the
current margins c only, μΔt β''(c) DcᵀDc. Where the direction moves a margin by more than c
(a limit the model sees only through that curvature) the projected trial crosses the limit and
the line search cuts the step of the *whole* trajectory — one step of the 800 of the wave (the
carriage's first-step acceleration) then decides the step length of every iteration.

This module keeps the barrier itself, not its second-order expansion, on the linearized margins
c + Dc∘ζ: the direction is the minimizer of

.. math::
    m(\\zeta) = Dg\\circ\\zeta + \\tfrac12 q(\\zeta, \\zeta)
        + \\sum_{k,r} \\mu\\Delta t\\,\\big[\\beta(c_{kr} + d_{kr}) - \\beta(c_{kr})
        - \\beta'(c_{kr}) d_{kr} - \\tfrac12 \\beta''(c_{kr}) d_{kr}^2\\big],
    \\qquad d = Dc\\circ\\zeta / \\text{scale},

i.e. Dh∘ζ + ½ q_h(ζ, ζ) + μΔt Σ β(c + d) up to a constant (q_h: the model without the barrier's
curvature), subject to z(k+1) = A z(k) + B v(k), z(0) = 0. Damped Newton iterations solve it,
each one LQ problem of the same form as the ordinary direction (the core's Riccati sweep) with the
barrier's gradient and curvature at the linearized margins c + d_j; the first one, from ζ = 0,
*is* the ordinary direction. A step keeps every linearized margin of the exact logarithm above
(1 − τ) times its value (fraction to the boundary) and decreases m. Since m is convex on the
linearized dynamics (q is positive definite there: the LQ sweep checked it) and m(0) = 0, any
ζ with m(ζ) < 0 is a descent direction of g: Dg∘ζ ≤ m(ζ) − m(0) < 0.

When the model's own direction already minimizes m (the barrier differs from its quadratic
expansion along it by less than ``rtol`` of the model's decrease) no further LQ is solved. Measured
on the wave (``docs/reproductions.md`` §4d): one extra LQ solve per direction on average (~1 ms at
N = 800), and the constrained optimization needs as many iterations as the unconstrained one (8).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from marionette_control.ocp.constraints import BarrierTerm, barrier
from marionette_control.lq.riccati import IndefiniteGammaError, tv_lq
from marionette_control.ocp.terms import Point, TermData


@dataclass
class _Rows:
    """One barrier term's rows on the linearization: normalized margins c (N+1, R) at the point (1 where
    a row is unused, masked by ``used``), scale (R,), weight f = μΔt, and β', β'' at c (the term's δ)."""

    term: BarrierTerm
    c: np.ndarray
    used: np.ndarray
    scale: np.ndarray
    f: float
    d1: np.ndarray
    d2: np.ndarray

    @classmethod
    def at(cls, term: BarrierTerm, point: Point) -> "_Rows":
        C = term.normalized_margins(point)
        used = np.isfinite(C)
        c = np.where(used, C, 1.0)
        _, d1, d2 = barrier(c, term.delta, 2)
        return cls(term, c, used, term.constraints.scale, term.weight * term.dt, d1, d2)

    def shift(self, point: Point, Z: np.ndarray, V: np.ndarray) -> np.ndarray:
        """d = Dc∘ζ / scale (N+1, R), zero where unused."""
        D = self.term.constraints.margin_derivative(point, Z, V) / self.scale
        return np.where(self.used, D, 0.0)

    def excess(self, d: np.ndarray) -> float:
        """Σ f [β(c + d) − β(c) − β'(c) d − ½ β''(c) d²] over the used rows (+inf outside the log's domain)."""
        u = self.used
        c, dd = self.c[u], d[u]
        v = barrier(c + dd, self.term.delta) - barrier(c, self.term.delta) - self.d1[u] * dd - 0.5 * self.d2[u] * dd * dd
        return self.f * float(v.sum())

    def correction(self, point: Point, d: np.ndarray) -> TermData:
        """Gradient and curvature of the excess at d (the barrier at c + d minus its expansion at c), as the
        term's derivatives (margin units)."""
        _, e1, e2 = barrier(self.c + d, self.term.delta, 2)
        s = self.scale
        a = np.where(self.used, self.f * (e1 - self.d1 - self.d2 * d) / s, 0.0)
        b = np.where(self.used, self.f * (e2 - self.d2) / (s * s), 0.0)
        out = TermData()
        self.term.constraints.contract(point, a, b, False, out)
        return out

    def max_step(self, d: np.ndarray, dd: np.ndarray, tau: float) -> float:
        """The largest α ≤ 1 that keeps every logarithmic margin c + d + α dd ≥ (1 − τ)(c + d)."""
        if self.term.delta > 0:
            return 1.0      # the quadratic extension is finite everywhere
        c = (self.c + d)[self.used]
        step = dd[self.used]
        shrink = step < 0
        return min(1.0, float(np.min(tau * c[shrink] / -step[shrink], initial=np.inf)))


def _add_blocks(model, extra: Sequence[TermData]):
    """(Q, S, R, Qf) of ``model`` plus the blocks of ``extra`` (new arrays)."""
    Q, S, R, Qf = model.Q, model.S, model.R, model.Qf
    for e in extra:
        Q = Q + e.Lxx
        if e.Lxu is not None:
            S = e.Lxu if S is None else S + e.Lxu
        if e.Luu is not None:
            R = R + e.Luu
        if e.Lxx_N is not None:
            Qf = Qf + e.Lxx_N
    return Q, S, R, Qf


def barrier_direction(A: np.ndarray, B: np.ndarray, model, lx: np.ndarray, lu: np.ndarray, Z: np.ndarray,
                      V: np.ndarray, barriers: Sequence[BarrierTerm], point: Point, iterations: int,
                      fraction_to_boundary: float, rtol: float = 1e-3):
    """(Z, V, Newton iterations taken) minimizing m (module docstring) from the ordinary direction (Z, V).

    A (N, nx, nx), B (N, nx, nU): the linearization; ``model``: the quadratic model (an object with Q,
    S, R, Qf and ``apply``, :class:`~.projection.QuadraticModel`) whose direction is (Z (N+1, nx), V (N,
    nU)); lx (N+1, nx), lu (N, nU): Dg; ``barriers``: the barrier terms of the problem at their current
    weight and δ, ``point`` (with λ's derivatives when a term reads them). At most ``iterations`` Newton
    iterations (the ordinary direction counts as the first); stops when an iteration's predicted decrease
    of m is below ``rtol`` times the first one's, or after the first when it already minimizes m (module
    docstring).
    """
    rows = [_Rows.at(t, point) for t in barriers]
    nx = Z.shape[1]
    zx, zu = np.zeros_like(Z), np.zeros_like(V)          # ζ_j
    hx, hu = np.zeros_like(Z), np.zeros_like(V)          # q ζ_j
    ds = [np.zeros_like(r.c) for r in rows]              # d_j of every term
    m, quad = 0.0, 0.0                                    # m(ζ_j), ½ ζ_j·q ζ_j
    gx, gu = lx, lu                                       # ∇m(ζ_j)
    dx, du = Z, V                                         # the Newton step from ζ_j
    first = None
    taken = 0
    for j in range(iterations):
        predicted = -float(np.sum(gx * dx) + np.sum(gu * du))
        if predicted <= 0:
            break
        first = predicted if first is None else first
        if predicted < rtol * first and j > 0:
            break
        steps = [r.shift(point, dx, du) for r in rows]
        alpha = min([r.max_step(d, s, fraction_to_boundary) for r, d, s in zip(rows, ds, steps)] + [1.0])
        qx, qu = model.apply(dx, du)
        lin = float(np.sum(lx * dx) + np.sum(lu * du))
        cross = float(np.sum(hx * dx) + np.sum(hu * du))
        curv = float(np.sum(qx * dx) + np.sum(qu * du))
        while alpha > 1e-4:
            q_new = quad + alpha * cross + 0.5 * alpha * alpha * curv
            excess = sum(r.excess(d + alpha * s) for r, d, s in zip(rows, ds, steps))
            m_new = float(np.sum(lx * zx) + np.sum(lu * zu)) + alpha * lin + q_new + excess
            if m_new < m:
                break
            alpha *= 0.5
        else:
            break
        full_model_step = j == 0 and alpha == 1.0
        zx, zu = zx + alpha * dx, zu + alpha * du
        hx, hu = hx + alpha * qx, hu + alpha * qu
        ds = [d + alpha * s for d, s in zip(ds, steps)]
        m, quad = m_new, q_new
        taken += 1
        # The model's own full step, along which the barrier differs from its quadratic expansion by less than
        # rtol of the model's decrease: the model already describes the barrier there, and a Newton step on m
        # (an LQ solve) would change the direction by a relative amount of that order.
        if j == iterations - 1 or (full_model_step and abs(excess) < rtol * first):
            break
        extra = [r.correction(point, d) for r, d in zip(rows, ds)]
        gx = lx + hx + sum(e.lx for e in extra)
        gu = lu + hu + sum(e.lu for e in extra)
        Q, S, R, Qf = _add_blocks(model, extra)
        try:
            sol = tv_lq(A, B, Q, S, R, gx[:-1], gu, Qf, gx[-1], check_inputs=False, full_P=False)
        except IndefiniteGammaError:
            break
        dx, du = sol.rollout(np.zeros(nx))
    return zx, zu, taken


__all__ = ["barrier_direction"]
