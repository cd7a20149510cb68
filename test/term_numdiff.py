"""The finite-difference twin of a cost term (tests only): same calc / calc_diff contract, derivatives by
central differences.

Each term's per-step function ℓ_k depends on (x_k, u_k) alone (and on λ_k, itself a function of
(x_k, u_k) through the step), and m on x_N. So

* the gradient entry (k, i) is a central difference of the term's *value* perturbing x_k[i] (or
  u_k[i]) alone;
* the Hessian column i of every step at once is a central difference of the term's *analytic
  gradient* perturbing component i of every state (input) together: row k of lx changes only with
  (x_k, u_k).

When the term reads the constraint forces, every perturbed point gets its own λ (and λ_x, λ_u)
from the core, so the differences see λ's dependence on (x, u) as the optimizer does. The exact
Hessian to compare with is then the term's blocks plus W[k]ᵀD²λ_k, which the core contracts
(``second_order_trajectory`` with Z = 0).
"""

from __future__ import annotations

import numpy as np

from marionette_control.ocp.terms import Point


class NumDiffTerm:
    """A term's derivatives by central differences (module docstring)."""

    def __init__(self, term, system=None, eps: float = 1e-6):
        self.term, self.system, self.eps = term, system, eps

    def point(self, X, U, derivatives: bool = False) -> Point:
        if not self.term.needs_lambda:
            return Point(X, U)
        if derivatives:
            _, _, Lam, Lam_x, Lam_u = self.system.linearize_trajectory(X, U, constraint_forces=True)
            return Point(X, U, Lam, Lam_x, Lam_u)
        return Point(X, U, self.system.constraint_forces_trajectory(X, U))

    def value(self, X, U) -> float:
        return self.term.calc(self.term.create_data(), self.point(X, U))

    def gradients(self, X, U):
        """(lx (N+1, nx), lu (N, nU)) from differences of the value."""
        e = self.eps
        lx, lu = np.zeros_like(X), np.zeros_like(U)
        for A, out, pert in ((X, lx, lambda d: (X + d, U)), (U, lu, lambda d: (X, U + d))):
            for idx in np.ndindex(*A.shape):
                d = np.zeros_like(A)
                d[idx] = e
                out[idx] = (self.value(*pert(d)) - self.value(*pert(-d))) / (2 * e)
        return lx, lu

    def analytic_gradients(self, X, U):
        d = self.term.create_data()
        self.term.calc_diff(d, self.point(X, U, derivatives=True), exact=True)
        lx = np.zeros_like(X) if d.lx is None else d.lx
        lu = np.zeros_like(U) if d.lu is None else d.lu
        return lx, lu

    def hessians(self, X, U):
        """(Lxx (N+1, nx, nx) with the terminal block last, Lxu (N, nx, nU), Luu (N, nU, nU)) from
        differences of the analytic gradient."""
        e = self.eps
        N, nx, nU = U.shape[0], X.shape[1], U.shape[1]
        Lxx, Lux = np.zeros((N + 1, nx, nx)), np.zeros((N, nU, nx))
        Lxu, Luu = np.zeros((N, nx, nU)), np.zeros((N, nU, nU))
        for i in range(nx):
            d = np.zeros_like(X)
            d[:, i] = e
            (gxp, gup), (gxm, gum) = self.analytic_gradients(X + d, U), self.analytic_gradients(X - d, U)
            Lxx[:, :, i] = (gxp - gxm) / (2 * e)
            Lux[:, :, i] = (gup - gum) / (2 * e)
        for j in range(nU):
            d = np.zeros_like(U)
            d[:, j] = e
            (gxp, gup), (gxm, gum) = self.analytic_gradients(X, U + d), self.analytic_gradients(X, U - d)
            Lxu[:, :, j] = (gxp - gxm)[:-1] / (2 * e)
            Luu[:, :, j] = (gup - gum) / (2 * e)
        return Lxx, Lxu, Luu, Lux
