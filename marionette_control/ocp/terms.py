"""Cost terms of a trajectory functional: values and exact derivatives (thesis §6.1, §6.5).

The optimizer minimizes a sum of terms (:class:`~marionette_control.ocp.cost.Cost`)

.. math::
    h(\\xi) = \\sum_{k=0}^{N-1} \\ell(x_k, u_k, \\lambda_k) + m(x_N),

where λ_k (m,) are the constraint forces of step k (thesis (4.36); a function of (x_k, u_k)
through the step). Every term follows one contract, after Crocoddyl's cost models:

``create_data(N)``
    a :class:`TermData` sized for N steps;
``calc(data, point)``
    the term's value at a :class:`Point` (fills ``data.value``, returns it);
``calc_diff(data, point, exact=True)``
    its derivatives along the trajectory (fills the :class:`TermData` fields):
    ``lx`` (N+1, nx) with ``lx[N]`` = ∂m/∂x_N, ``lu`` (N, nU) — total derivatives of the
    per-step function (λ_k's dependence on (x_k, u_k) included by the chain rule);
    ``Lxx``, ``Lxu``, ``Luu`` — the second derivatives of ℓ(k), each ``None`` (zero), one
    matrix for every step, or an array with one per step; ``Lxx_N`` (nx, nx) of m; and ``w``
    (N, m) or None, the term's covector on λ_k (∂ℓ/∂λ_k). With ``exact`` the blocks are the
    exact second derivatives *except* the curvature of λ itself, wᵀD²λ_k, which the core adds
    in the Newton model (``second_order_trajectory(X, U, Z, W)``); without it they are the
    positive semi-definite Gauss–Newton part the quasi-Newton model uses (thesis §6.5.4).
    For quadratic terms the two coincide.

Each term's derivatives are checked against central differences of its value (and of its
gradient for the Hessians) by one generic test over all terms (``test/test_terms.py``).

Terms here: :class:`StateTracking`, :class:`TerminalState`, :class:`TerminalValue` (a cost-to-go,
the end of a receding horizon), :class:`InputTracking`, :class:`OutputTracking` (a linear output such as
the drives' accelerations, :func:`~marionette_control.model.state_layout.drive_acceleration`),
:class:`InitialState` (the optimized initial condition's weight, thesis §6.3.2.1) and
:class:`ConstraintPenalty` (the h² penalty of constraint relaxation, thesis §6.6.2). The
inequality constraints and their barrier are in :mod:`.constraints`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from marionette_control import validation


@dataclass
class Point:
    """Where terms are evaluated: a trajectory and, when a term needs them, its constraint forces.

    X (N+1, nx), U (N, nU); Lam (N, m) the multipliers λ_k of each step (``calc``), Lam_x
    (N, m, nx) and Lam_u (N, m, nU) their derivatives (``calc_diff``), all from the core
    (``DiscreteSystem.project``/``linearize_trajectory`` with ``constraint_forces=True``).
    """

    X: np.ndarray
    U: np.ndarray
    Lam: Optional[np.ndarray] = None
    Lam_x: Optional[np.ndarray] = None
    Lam_u: Optional[np.ndarray] = None

    @property
    def N(self) -> int:
        return self.U.shape[0]


class TermData:
    """Value and derivatives of one term along a trajectory (module docstring; ``None`` = zero)."""

    __slots__ = ("value", "lx", "lu", "Lxx", "Lxu", "Luu", "Lxx_N", "w")

    def __init__(self):
        self.value = 0.0
        self.lx = self.lu = self.Lxx = self.Lxu = self.Luu = self.Lxx_N = self.w = None


class Term:
    """Base of the cost terms: ``name``, the sizes it knows, and the calc / calc_diff contract.

    ``nx``, ``nU``, ``N`` are None where the term does not fix them (a state term knows no nU);
    the :class:`~marionette_control.ocp.cost.Cost` that sums terms checks they agree.
    ``needs_lambda``: the term reads the constraint forces (the optimizer then asks the core for
    them); ``has_curvature``: its exact second derivatives differ from the Gauss-Newton form.
    """

    needs_lambda = False
    has_curvature = False

    def __init__(self, name: str, nx: Optional[int] = None, nU: Optional[int] = None, N: Optional[int] = None):
        self.name, self.nx, self.nU, self.N = name, nx, nU, N

    def create_data(self) -> TermData:
        return TermData()

    def calc(self, data: TermData, point: Point) -> float:  # pragma: no cover - interface
        raise NotImplementedError

    def calc_diff(self, data: TermData, point: Point, exact: bool = True) -> None:  # pragma: no cover
        raise NotImplementedError

    def value(self, point: Point) -> float:
        """calc on a fresh data object."""
        return self.calc(self.create_data(), point)

    def on_inputs(self, columns: np.ndarray, nU: int) -> "Term":
        """The term on a model variant whose nU inputs include these at ``columns`` (thesis §6.6: the
        embedded and relaxed systems); a term that reads no input is unchanged."""
        if self.nU is None:
            return self
        raise NotImplementedError(f"term '{self.name}' cannot be moved to a model variant")

    def __repr__(self):
        return f"{type(self).__name__}({self.name!r})"


def weight_matrix(w, n: int, what: str) -> np.ndarray:
    """A symmetric positive semi-definite weight (n, n) from a vector (n,) (its diagonal) or a matrix.

    The one check of weight shapes and definiteness (the rules by name, e.g. input weights > 0,
    are the problem builder's)."""
    w = np.asarray(w, dtype=float)
    if w.ndim == 1:
        if w.shape != (n,):
            raise ValueError(f"{what} weights have {w.shape[0]} entries, expected {n}")
        w = np.diag(w)
    if w.shape != (n, n):
        raise ValueError(f"{what} weight matrix has shape {w.shape}, expected ({n}, {n})")
    if not np.all(np.isfinite(w)):
        raise ValueError(f"{what} weights must be finite")
    scale = max(1.0, np.abs(w).max())
    if not np.allclose(w, w.T, rtol=0, atol=1e-12 * scale):
        raise ValueError(f"{what} weight matrix must be symmetric")
    if np.linalg.eigvalsh(w).min() < -1e-12 * scale:
        raise ValueError(f"{what} weights must be positive semi-definite")
    return w


def _reference(ref, shape: tuple, what: str) -> np.ndarray:
    ref = np.asarray(ref, dtype=float)
    if ref.shape != shape:
        raise ValueError(f"{what} has shape {ref.shape}, expected {shape}")
    if not np.all(np.isfinite(ref)):
        raise ValueError(f"{what} contains non-finite values")
    return ref


# --------------------------------------------------------------------------------------------- quadratic terms


class StateTracking(Term):
    """½ (x_k − x_d(k))ᵀ Q (x_k − x_d(k)) for k = 0..N−1 (thesis §6.1; the ½ is trep's convention).

    Xd (N+1, nx) (row N unused here), Q (nx,) or (nx, nx) PSD.
    """

    def __init__(self, Xd, Q, name: str = "state"):
        Xd = np.asarray(Xd, dtype=float)
        if Xd.ndim != 2:
            raise ValueError(f"the desired states have shape {Xd.shape}, expected (N+1, nx)")
        super().__init__(name, nx=Xd.shape[1], N=Xd.shape[0] - 1)
        self.Xd = _reference(Xd, Xd.shape, "the desired states")
        self.Q = weight_matrix(Q, self.nx, "state")

    def calc(self, data, point):
        dx = point.X[:-1] - self.Xd[:-1]
        data.value = 0.5 * float(np.vdot(dx @ self.Q, dx))
        return data.value

    def calc_diff(self, data, point, exact=True):
        lx = np.zeros_like(point.X)
        lx[:-1] = (point.X[:-1] - self.Xd[:-1]) @ self.Q
        data.lx, data.Lxx = lx, self.Q


class TerminalState(Term):
    """m(x_N) = ½ (x_N − x_d(N))ᵀ Q_f (x_N − x_d(N)) (thesis §6.1). xd (nx,), Qf (nx,) or (nx, nx) PSD."""

    def __init__(self, xd, Qf, N: int, name: str = "terminal"):
        xd = np.asarray(xd, dtype=float)
        super().__init__(name, nx=xd.shape[0], N=N)
        self.xd = _reference(xd, (self.nx,), "the desired final state")
        self.Qf = weight_matrix(Qf, self.nx, "terminal state")

    def calc(self, data, point):
        e = point.X[-1] - self.xd
        data.value = 0.5 * float(e @ self.Qf @ e)
        return data.value

    def calc_diff(self, data, point, exact=True):
        lx = np.zeros_like(point.X)
        lx[-1] = self.Qf @ (point.X[-1] - self.xd)
        data.lx, data.Lxx_N = lx, self.Qf


class TerminalValue(Term):
    """m(x_N) = gᵀ(x_N − x̄) + ½ (x_N − x̄)ᵀ P (x_N − x̄): a cost-to-go in place of the terminal state weight.

    The second-order expansion about x̄ of the optimal cost of the steps beyond a horizon (the value
    function V of the LQ problem of thesis (B.4) along an optimum: P its Hessian, g its gradient, which at a
    stationary point is the costate, thesis Prop. 7). A receding horizon that ends with it
    (:mod:`.mpc`) sees the rest of the motion to second order, and the optimum of the whole problem
    restricted to the window is stationary for the window. xbar (nx,), g (nx,), P (nx,) or (nx, nx) PSD.
    """

    def __init__(self, xbar, g, P, N: int, name: str = "terminal"):
        xbar = np.asarray(xbar, dtype=float)
        super().__init__(name, nx=xbar.shape[0], N=N)
        self.xbar = _reference(xbar, (self.nx,), "the expansion point")
        self.g = _reference(g, (self.nx,), "the cost-to-go gradient")
        self.P = weight_matrix(P, self.nx, "cost-to-go")

    def calc(self, data, point):
        e = point.X[-1] - self.xbar
        data.value = float(self.g @ e + 0.5 * (e @ self.P @ e))
        return data.value

    def calc_diff(self, data, point, exact=True):
        lx = np.zeros_like(point.X)
        lx[-1] = self.g + self.P @ (point.X[-1] - self.xbar)
        data.lx, data.Lxx_N = lx, self.P


class InputTracking(Term):
    """½ (u_k − u_d(k))ᵀ R (u_k − u_d(k)) for k = 0..N−1 (thesis §6.1). Ud (N, nU), R (nU,) or (nU, nU)."""

    def __init__(self, Ud, R, name: str = "input"):
        Ud = np.asarray(Ud, dtype=float)
        if Ud.ndim != 2:
            raise ValueError(f"the desired inputs have shape {Ud.shape}, expected (N, nU)")
        super().__init__(name, nU=Ud.shape[1], N=Ud.shape[0])
        self.Ud = _reference(Ud, Ud.shape, "the desired inputs")
        self.R = weight_matrix(R, self.nU, "input")

    def calc(self, data, point):
        du = point.U - self.Ud
        data.value = 0.5 * float(np.vdot(du @ self.R, du))
        return data.value

    def calc_diff(self, data, point, exact=True):
        data.lu, data.Luu = (point.U - self.Ud) @ self.R, self.R

    def on_inputs(self, columns, nU):
        Ud = np.zeros((self.N, nU))
        Ud[:, columns] = self.Ud
        R = np.zeros((nU, nU))
        R[np.ix_(columns, columns)] = self.R
        return InputTracking(Ud, R, self.name)


class OutputTracking(Term):
    """½ (y_k − y_d(k))ᵀ W (y_k − y_d(k)) for k = 0..N−1 of a linear output y_k = Gx x_k + Gu u_k.

    E.g. the drives' accelerations (:func:`~marionette_control.model.state_layout.drive_acceleration`), whose
    deviation from a reference a receding horizon weights (:mod:`.mpc`). Gx (r, nx), Gu (r, nU), Yd (N, r),
    W (r,) or (r, r) PSD.
    """

    def __init__(self, Gx, Gu, Yd, W, name: str = "output"):
        Gx, Gu, Yd = (np.asarray(a, dtype=float) for a in (Gx, Gu, Yd))
        if Gx.ndim != 2 or Gu.ndim != 2 or Yd.ndim != 2 or not Gx.shape[0] == Gu.shape[0] == Yd.shape[1]:
            raise ValueError(f"output maps and reference have shapes {Gx.shape}, {Gu.shape}, {Yd.shape}: expected "
                             "(r, nx), (r, nU), (N, r)")
        super().__init__(name, nx=Gx.shape[1], nU=Gu.shape[1], N=Yd.shape[0])
        self.Gx, self.Gu = Gx, Gu
        self.Yd = _reference(Yd, Yd.shape, "the desired outputs")
        self.W = weight_matrix(W, Gx.shape[0], name)
        self._Lxx, self._Lxu, self._Luu = Gx.T @ self.W @ Gx, Gx.T @ self.W @ Gu, Gu.T @ self.W @ Gu

    def residuals(self, point: Point) -> np.ndarray:
        """y_k − y_d(k) (N, r)."""
        return point.X[:-1] @ self.Gx.T + point.U @ self.Gu.T - self.Yd

    def calc(self, data, point):
        e = self.residuals(point)
        data.value = 0.5 * float(np.vdot(e @ self.W, e))
        return data.value

    def calc_diff(self, data, point, exact=True):
        We = self.residuals(point) @ self.W
        lx = np.zeros_like(point.X)
        lx[:-1] = We @ self.Gx
        data.lx, data.lu = lx, We @ self.Gu
        data.Lxx, data.Lxu, data.Luu = self._Lxx, self._Lxu, self._Luu


class InitialState(Term):
    """½ (x_0 − x_d(0))ᵀ W₀ (x_0 − x_d(0)): the weight on an optimized initial condition (thesis §6.3.2.1).

    Only meaningful when the optimizer moves x(0) (``free_initial_state``); with a fixed x(0) it is a
    constant, which the optimizer refuses. x0d (nx,), W0 (nx,) or (nx, nx) PSD.
    """

    def __init__(self, x0d, W0, N: int, name: str = "initial_state"):
        x0d = np.asarray(x0d, dtype=float)
        super().__init__(name, nx=x0d.shape[0], N=N)
        self.x0d = _reference(x0d, (self.nx,), "the desired initial state")
        self.W0 = weight_matrix(W0, self.nx, "initial_state")

    def calc(self, data, point):
        e = point.X[0] - self.x0d
        data.value = 0.5 * float(e @ self.W0 @ e)
        return data.value

    def calc_diff(self, data, point, exact=True):
        lx = np.zeros_like(point.X)
        lx[0] = self.W0 @ (point.X[0] - self.x0d)
        Lxx = np.zeros((point.N, self.nx, self.nx))
        Lxx[0] = self.W0
        data.lx, data.Lxx = lx, Lxx


# --------------------------------------------------------------------------------------------- h² penalty


class ConstraintPenalty(Term):
    """½ w Σ_j h_j(q_k)² for k = 0..N: holonomic constraints relaxed into a cost (thesis §6.6.2).

    A model variant without some constraints of ``model`` (same configurations) is optimized with
    this penalty on the removed ones, raised until |h| is negligible; the result is then projected
    onto the constrained model. h, Dh and Σ_j c_j D²h_j come from the core (``model.constraints``,
    ``model.constraint_hessian``). Exact Hessian w (Dhᵀ Dh + Σ_j h_j D²h_j); Gauss–Newton w DhᵀDh.

    model : the core model that has the constraints (the problem's states start with its nq
    configurations);  constraints : their names;  weight : w > 0.
    """

    has_curvature = True

    def __init__(self, model, constraints: Sequence[str], weight: float, name: str = "constraint_penalty"):
        super().__init__(name)
        names = list(model.constraint_names)
        missing = [c for c in constraints if c not in names]
        if missing:
            raise ValueError(f"penalty on {', '.join(missing)}: not constraints of model '{model.name}' "
                             f"(constraints: {', '.join(names) or 'none'})")
        validation.positive(weight, "the constraint penalty weight")
        self.model = model
        self.rows = [names.index(c) for c in constraints]
        self.constraints = list(constraints)
        self.weight = float(weight)
        self.nq = model.nq

    def _h(self, X):
        rows = self.rows
        out = []
        for x in X:
            h, Dh = self.model.constraints(x[:self.nq])
            out.append((h[rows], Dh[rows]))
        return out

    def residuals(self, X) -> np.ndarray:
        """h of the penalized constraints at every step, (N+1, n_penalized)."""
        return np.array([h for h, _ in self._h(X)])

    def calc(self, data, point):
        data.value = 0.5 * self.weight * float(np.sum(self.residuals(point.X) ** 2))
        return data.value

    def calc_diff(self, data, point, exact=True):
        nq, w = self.nq, self.weight
        nx = point.X.shape[1]
        lx = np.zeros_like(point.X)
        Lxx = np.zeros((point.N + 1, nx, nx))
        weights = np.zeros(self.model.nc)
        for k, (x, (h, Dh)) in enumerate(zip(point.X, self._h(point.X))):
            lx[k, :nq] = w * (h @ Dh)
            Lxx[k, :nq, :nq] = w * (Dh.T @ Dh)
            if exact:
                weights[self.rows] = w * h
                Lxx[k, :nq, :nq] += self.model.constraint_hessian(x[:nq], weights)
        data.lx, data.Lxx, data.Lxx_N = lx, Lxx[:-1], Lxx[-1]


__all__ = ["Point", "TermData", "Term", "weight_matrix", "StateTracking", "TerminalState", "TerminalValue",
           "InputTracking", "OutputTracking", "InitialState", "ConstraintPenalty"]
