"""The cost of a trajectory as a sum of terms (thesis §6.1; Crocoddyl's cost sum).

.. math::
    h(\\xi) = \\sum_{\\text{terms}} \\Big(\\sum_{k=0}^{N-1} \\ell_t(x_k, u_k, \\lambda_k) + m_t(x_N)\\Big)

:class:`Cost` holds named terms (:mod:`.terms`, :mod:`.constraints`), checks that their sizes
agree, and adds their values and derivatives (``calc``, ``calc_diff`` into a :class:`CostData`).
The optimizer reads only this: gradients, the blocks of the quadratic model, the λ-covector W
of the Newton model. :func:`tracking_cost` builds the quadratic tracking cost of thesis §6.1
from Python (Q, R, Qf as vectors or matrices); the ½ is the reference implementation's
convention (seed 001's pendulum cost 13297.3789 is stated in it).
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

import numpy as np

from marionette_control.ocp.constraints import BarrierTerm
from marionette_control.ocp.terms import InputTracking, Point, StateTracking, Term, TerminalState


def _add(total, part):
    """total + part for optional blocks (None = 0; a matrix broadcasts over steps); never aliases ``part``."""
    if part is None:
        return total
    if total is None:
        return np.array(part, dtype=float)
    if total.shape == part.shape or total.ndim > part.ndim:
        total += part
        return total
    return total + part


class CostData:
    """Sum of the terms' values and derivatives (fields as :class:`~.terms.TermData`) and each term's data."""

    def __init__(self, cost: "Cost"):
        self.terms = {t.name: t.create_data() for t in cost.terms}
        self.value = 0.0
        self.values = {}
        self.lx = self.lu = self.Lxx = self.Lxu = self.Luu = self.Lxx_N = self.W = None
        self.exact = None


class Cost:
    """A sum of cost terms with agreeing sizes (nx, nU, N).

    Attributes: ``terms`` (tuple), ``nx``, ``nU``, ``N``, ``needs_lambda`` (some term reads the
    constraint forces), ``has_curvature`` (some term's exact second derivatives differ from its
    Gauss-Newton form), ``barriers`` (the terms that carry inequality constraints).
    """

    def __init__(self, terms: Iterable[Term], nx: Optional[int] = None, nU: Optional[int] = None,
                 N: Optional[int] = None):
        self.terms = tuple(terms)
        if not self.terms:
            raise ValueError("a cost needs at least one term")
        names = [t.name for t in self.terms]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"cost terms must have distinct names; repeated: {', '.join(dup)}")
        sizes = {"nx": nx, "nU": nU, "N": N}
        for t in self.terms:
            for k in sizes:
                v = getattr(t, k)
                if v is None:
                    continue
                if sizes[k] is None:
                    sizes[k] = v
                elif sizes[k] != v:
                    raise ValueError(f"cost term '{t.name}' has {k} = {v}, the others {sizes[k]}")
        missing = [k for k, v in sizes.items() if v is None]
        if missing:
            raise ValueError(f"the cost's terms do not fix {', '.join(missing)}: pass them to Cost")
        self.nx, self.nU, self.N = sizes["nx"], sizes["nU"], sizes["N"]
        self.needs_lambda = any(t.needs_lambda for t in self.terms)
        self.has_curvature = any(t.has_curvature for t in self.terms)
        self.barriers = tuple(t for t in self.terms if isinstance(t, BarrierTerm))

    # -- composition --------------------------------------------------------------------------------

    def term(self, name: str) -> Term:
        for t in self.terms:
            if t.name == name:
                return t
        raise KeyError(f"no cost term '{name}' (terms: {', '.join(t.name for t in self.terms)})")

    def without_barriers(self) -> "Cost":
        """The cost without its constraint barriers (the objective the constraints restrict)."""
        keep = [t for t in self.terms if t not in self.barriers]
        return Cost(keep, self.nx, self.nU, self.N)

    def replaced(self, terms: Sequence[Term]) -> "Cost":
        """The same cost with the named terms replaced by ``terms`` (matched by name) or added."""
        new = {t.name: t for t in terms}
        out = [new.pop(t.name, t) for t in self.terms]
        return Cost(out + list(new.values()), self.nx, self.nU, self.N)

    def reference(self) -> tuple[np.ndarray, np.ndarray]:
        """(X_d (N+1, nx), U_d (N, nU)): the desired trajectory of the tracking terms (the first
        :class:`~.terms.StateTracking` and :class:`~.terms.InputTracking`; zero where there is none)."""
        Xd, Ud = np.zeros((self.N + 1, self.nx)), np.zeros((self.N, self.nU))
        for t in self.terms:
            if isinstance(t, StateTracking):
                Xd = t.Xd
                break
        for t in self.terms:
            if isinstance(t, InputTracking):
                Ud = t.Ud
                break
        return Xd, Ud

    # -- evaluation ---------------------------------------------------------------------------------

    def create_data(self) -> CostData:
        return CostData(self)

    def calc(self, data: CostData, point: Point) -> float:
        """h(ξ) at ``point``; ``data.values`` has each term's value."""
        total = 0.0
        for t in self.terms:
            v = t.calc(data.terms[t.name], point)
            data.values[t.name] = v
            total += v
        data.value = total
        return total

    def calc_diff(self, data: CostData, point: Point, exact: bool = True) -> CostData:
        """Sums of the terms' derivatives at ``point`` (``exact``: see :mod:`.terms`)."""
        lx = np.zeros_like(point.X)
        lu = np.zeros_like(point.U)
        Lxx = Lxu = Luu = Lxx_N = W = None
        for t in self.terms:
            d = data.terms[t.name]
            t.calc_diff(d, point, exact)
            if d.lx is not None:
                lx += d.lx
            if d.lu is not None:
                lu += d.lu
            Lxx, Lxu, Luu = _add(Lxx, d.Lxx), _add(Lxu, d.Lxu), _add(Luu, d.Luu)
            Lxx_N, W = _add(Lxx_N, d.Lxx_N), _add(W, d.w)
        z = np.zeros
        data.lx, data.lu = lx, lu
        data.Lxx = Lxx if Lxx is not None else z((self.nx, self.nx))
        data.Lxu = Lxu
        data.Luu = Luu if Luu is not None else z((self.nU, self.nU))
        data.Lxx_N = Lxx_N if Lxx_N is not None else z((self.nx, self.nx))
        data.W = W
        data.exact = exact
        return data

    def value(self, X: np.ndarray, U: np.ndarray, Lam: Optional[np.ndarray] = None) -> float:
        """h(X, U) (with the constraint forces Lam (N, m) when a term needs them)."""
        return self.calc(self.create_data(), Point(np.asarray(X, float), np.asarray(U, float), Lam))

    def gradients(self, X: np.ndarray, U: np.ndarray, Lam=None, Lam_x=None, Lam_u=None):
        """(lx (N+1, nx) with lx[N] = Dm, lu (N, nU))."""
        d = self.calc_diff(self.create_data(), Point(np.asarray(X, float), np.asarray(U, float), Lam, Lam_x, Lam_u))
        return d.lx, d.lu


def tracking_cost(Xd, Ud, Q, R, Qf=None) -> Cost:
    """The quadratic tracking cost of thesis §6.1 as three terms (``state``, ``input``, ``terminal``).

    Xd (N+1, nx), Ud (N, nU); Q (nx,) or (nx, nx), R (nU,) or (nU, nU), Qf (default Q) PSD weights.
    """
    Xd = np.asarray(Xd, dtype=float)
    Ud = np.asarray(Ud, dtype=float)
    if Xd.ndim != 2 or Ud.ndim != 2 or Xd.shape[0] != Ud.shape[0] + 1:
        raise ValueError(f"desired trajectory shapes {Xd.shape}, {Ud.shape}: expected (N+1, nx), (N, nU)")
    return Cost([StateTracking(Xd, Q), InputTracking(Ud, R), TerminalState(Xd[-1], Q if Qf is None else Qf,
                                                                           Ud.shape[0])])


__all__ = ["Cost", "CostData", "tracking_cost"]
