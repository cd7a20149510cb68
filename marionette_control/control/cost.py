"""Quadratic tracking cost of a discrete trajectory (thesis §6.1, L1543).

.. math::
    h(\\xi) = \\sum_{k=0}^{N-1} \\ell(x_k, u_k, k) + m(x_N), \\quad
    \\ell = \\tfrac12 (x - x_d(k))^T Q (x - x_d(k)) + \\tfrac12 (u - u_d(k))^T R (u - u_d(k)), \\quad
    m = \\tfrac12 (x - x_d(N))^T Q_f (x - x_d(N))

(the ½ is the reference implementation's convention; seed 001's pendulum cost
13297.3789 is stated in it). Q, R, Qf are symmetric positive semi-definite
(per-component weights when given as vectors).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def _weight(w, n: int, what: str) -> np.ndarray:
    w = np.asarray(w, dtype=float)
    if w.ndim == 1:
        if w.shape != (n,):
            raise ValueError(f"{what} weights have {w.shape[0]} entries, expected {n}")
        w = np.diag(w)
    if w.shape != (n, n):
        raise ValueError(f"{what} weight matrix has shape {w.shape}, expected ({n}, {n})")
    if not np.all(np.isfinite(w)):
        raise ValueError(f"{what} weights must be finite")
    if not np.allclose(w, w.T, rtol=0, atol=1e-12 * max(1.0, np.abs(w).max())):
        raise ValueError(f"{what} weight matrix must be symmetric")
    if np.linalg.eigvalsh(w).min() < -1e-12 * max(1.0, np.abs(w).max()):
        raise ValueError(f"{what} weights must be positive semi-definite")
    return w


@dataclass
class TrackingCost:
    """Tracking cost of (X, U) against a desired (Xd, Ud).

    Parameters
    ----------
    Xd : ndarray, shape (N+1, nx)
    Ud : ndarray, shape (N, nU)
    Q : ndarray, shape (nx,) or (nx, nx)
    R : ndarray, shape (nU,) or (nU, nU)
    Qf : ndarray, optional, shape (nx,) or (nx, nx); defaults to Q
    """

    Xd: np.ndarray
    Ud: np.ndarray
    Q: np.ndarray
    R: np.ndarray
    Qf: np.ndarray = None

    def __post_init__(self):
        self.Xd = np.asarray(self.Xd, dtype=float)
        self.Ud = np.asarray(self.Ud, dtype=float)
        if self.Xd.ndim != 2 or self.Ud.ndim != 2 or self.Xd.shape[0] != self.Ud.shape[0] + 1:
            raise ValueError(f"desired trajectory shapes {self.Xd.shape}, {self.Ud.shape}: expected (N+1, nx), (N, nU)")
        if not (np.all(np.isfinite(self.Xd)) and np.all(np.isfinite(self.Ud))):
            raise ValueError("the desired trajectory contains non-finite values")
        nx, nU = self.Xd.shape[1], self.Ud.shape[1]
        self.Q = _weight(self.Q, nx, "state")
        self.R = _weight(self.R, nU, "input")
        self.Qf = self.Q.copy() if self.Qf is None else _weight(self.Qf, nx, "terminal state")

    @property
    def N(self) -> int:
        return self.Ud.shape[0]

    def value(self, X: np.ndarray, U: np.ndarray) -> float:
        """h(ξ)."""
        dx = X[:-1] - self.Xd[:-1]
        du = U - self.Ud
        ef = X[-1] - self.Xd[-1]
        return 0.5 * (np.einsum("ki,ij,kj->", dx, self.Q, dx) + np.einsum("ki,ij,kj->", du, self.R, du)
                      + ef @ self.Qf @ ef)

    def gradients(self, X: np.ndarray, U: np.ndarray):
        """(lx (N+1, nx) with lx[N] = Dm, lu (N, nU)): the gradients of ℓ(k) and m."""
        lx = np.empty_like(X)
        lx[:-1] = (X[:-1] - self.Xd[:-1]) @ self.Q
        lx[-1] = self.Qf @ (X[-1] - self.Xd[-1])
        lu = (U - self.Ud) @ self.R
        return lx, lu
