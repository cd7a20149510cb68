"""Direct transcription of a trajectory-optimization problem with the DEL equations as constraints.

The nonlinear program of DMOCC (seed 002 §3) in this package's discretization (docs/dmocc.md):

Decision variables (``w``), one block per step k = 0..N−1, then the final multiplier ν:
    [q_{k+1,dyn} (nd); u_k (nU) = (force inputs; ρ_{k+1}); λ_k (m)] ... [ν (m), only with a fixed
    final momentum]. q_0 and ρ_0 come from the fixed initial state x(0) = [q_0; p_0; v_0]; the
    kinematic configurations ρ_{k+1} are the inputs' last nk entries, as in the projection
    optimizer's layout, so (X, U) and the cost are the same objects for both methods.

Equality constraints (``DiscreteSystem.del_residual``, seed 002 (3.6)):
    node k = 0..N−1:  p_k + D₁L_d(q_k, q_{k+1}) + f⁻_k − Dh(q_k)ᵀλ_k = 0 (dynamic rows),
                      h(q_{k+1}) = 0,
    with p_0 the given initial momentum (the momentum boundary condition (3.13)/(3.21) at t_0)
    and p_k = D₂L_d(q_{k−1}, q_k) + f⁺_{k−1} for k ≥ 1; f⁻_k = w⁻Δt F_k, f⁺_k = w⁺Δt F_k the model's
    forcing (thesis (4.12); ``model.forcing_weights``). Under the symmetric rule (w⁺ ≠ 0) p_k, and so
    node k's rows, depend on the force inputs u_{k−1} too; under the thesis rule they do not, and
    those entries are not in the sparsity patterns. Optional final conditions (seed 002 (3.26)):
    the final configuration q_N = q^N (``configuration``; fixed by the variables' bounds, its
    h rows dropped), and with it the final momentum in the multiplier form of (3.13),
    D₂L_d(q_{N−1}, q_N) + f⁺_{N−1} − Dh_dyn(q^N)ᵀν = p^N, and the final kinematic velocities
    (ρ_N − ρ_{N−1})/Δt = v^N (bounds on ρ_{N−1}) (``state``, ``rest``).

Inequality constraints: the problem's constraint sets (:mod:`.constraints`), margin/scale ≥ 0
at every step where a row depends on a variable (state-only rows at k = 0 are fixed by x(0) and
checked when the problem is built; at k = N they are dropped when x_N is fixed).

Objective: the problem's cost without its barriers, h(X, U) (thesis §6.1) — the same function of
(X, U) the projection optimizer minimizes. The states are functions of the variables:
x_k = [q_k; p_k; v_k] with p_k = D₂L_d(q_{k−1}, q_k) + f⁺_{k−1} and v_k = (ρ_k − ρ_{k−1})/Δt.

Derivatives are exact and come from the core and the terms: the constraint Jacobian from the
DEL Jacobian blocks, the Hessian of the Lagrangian σ∇²h + Σ yᵢ∇²gᵢ as per-interval blocks of the
core (``del_hessian``: the curvature of the DEL rows weighted by their multipliers and of the
momenta p_k weighted by every covector on them) plus the per-step blocks of the cost and the
constraints mapped through x_k's Jacobian (E_k below). Everything is assembled by one
``np.bincount`` over precomputed positions into CasADi's column-compressed patterns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from marionette_control.ocp.constraints import InequalityConstraints, LinearConstraints, TensionConstraints
from marionette_control.ocp.cost import Cost
from marionette_control.ocp.terms import Point

FINAL_CONDITIONS = ("free", "configuration", "rest", "state")


class TranscriptionError(ValueError):
    """The problem cannot be transcribed (an unsupported term or constraint, an inconsistent final state)."""


@dataclass
class FinalCondition:
    """What the transcription fixes at t_N: ``kind`` (``FINAL_CONDITIONS``) and the state x^N (nx,).

    ``configuration``: q_N = x^N[:nq];  ``state``: also the momentum (up to the constraint impulse
    at t_N, seed 002 (3.13)) and the kinematic velocities;  ``rest``: ``state`` at the discrete
    rest state of q^N."""

    kind: str = "free"
    state: Optional[np.ndarray] = None


class _Pattern:
    """A column-compressed sparsity pattern assembled from dense blocks placed at global (row, col)
    indices (−1 = not a variable / dropped); ``positions`` of each block's entries (−1: not stored)."""

    def __init__(self, nrow: int, ncol: int, upper: bool = False):
        self.nrow, self.ncol, self.upper = nrow, ncol, upper
        self._rows, self._cols = [], []

    def add(self, rows: np.ndarray, cols: np.ndarray) -> int:
        """Registers a stack of blocks: rows (B, r), cols (B, c); returns its id."""
        self._rows.append(np.asarray(rows))
        self._cols.append(np.asarray(cols))
        return len(self._rows) - 1

    def finish(self):
        keys = []
        for r, c in zip(self._rows, self._cols):
            R = np.broadcast_to(r[:, :, None], (r.shape[0], r.shape[1], c.shape[1]))
            C = np.broadcast_to(c[:, None, :], R.shape)
            ok = (R >= 0) & (C >= 0)
            if self.upper:
                ok &= R <= C
            keys.append(np.where(ok, C.astype(np.int64) * self.nrow + R, -1).ravel())
        allkeys = np.concatenate(keys) if keys else np.zeros(0, np.int64)
        self.keys = np.unique(allkeys[allkeys >= 0])
        self.rows = (self.keys % self.nrow).astype(np.int64)
        self.cols = (self.keys // self.nrow).astype(np.int64)
        self.positions = np.concatenate([np.where(k >= 0, np.searchsorted(self.keys, k), -1) for k in keys]) \
            if keys else np.zeros(0, np.int64)
        self._valid = self.positions >= 0

    @property
    def nnz(self) -> int:
        return self.keys.size

    def values(self, blocks: Sequence[np.ndarray]) -> np.ndarray:
        """The pattern's values from the blocks' values (same order and shapes as registered)."""
        v = np.concatenate([np.asarray(b, dtype=float).ravel() for b in blocks])
        return np.bincount(self.positions[self._valid], weights=v[self._valid], minlength=self.nnz)


class Transcription:
    """The NLP of one problem (module docstring): layout, evaluations and sparsity patterns.

    system : core DiscreteSystem;  cost : the objective (a Cost without barriers);  x0 (nx,) the
    initial state;  constraints : InequalityConstraints sets;  final : FinalCondition;  N steps.
    """

    def __init__(self, system, cost: Cost, x0: np.ndarray, N: int,
                 constraints: Sequence[InequalityConstraints] = (), final: Optional[FinalCondition] = None):
        self.system = system
        model = self.model = system.model
        self.cost = cost
        self.N = N = int(N)
        self.dt = float(system.dt)
        self.n, self.nd, self.nk, self.nu, self.m = model.nq, model.nd, model.nk, model.nu, model.nc
        self.nx, self.nU = model.nx, model.nU
        if cost.nx != self.nx or cost.nU != self.nU or cost.N != N:
            raise TranscriptionError(f"the cost is for nx={cost.nx}, nU={cost.nU}, N={cost.N}; the problem has "
                                     f"nx={self.nx}, nU={self.nU}, N={N}")
        if cost.barriers:
            raise TranscriptionError("the objective has barrier terms: give the constraint sets as inequality "
                                     "constraints (cost.without_barriers())")
        if cost.needs_lambda:
            raise TranscriptionError("cost terms that read the constraint forces are not supported by the "
                                     "transcription (only as inequality constraints)")
        for c in constraints:
            if not isinstance(c, (LinearConstraints, TensionConstraints)):
                raise TranscriptionError(f"constraint set {type(c).__name__} is not supported by the transcription "
                                         "(linear and tension constraints are)")
        self.constraints = list(constraints)
        self.x0 = np.asarray(x0, dtype=float)
        if self.x0.shape != (self.nx,) or not np.all(np.isfinite(self.x0)):
            raise TranscriptionError(f"x0 must be {self.nx} finite numbers (the state [q; p; v]), got shape "
                                     f"{self.x0.shape}")
        self.final = final or FinalCondition()
        if self.final.kind not in FINAL_CONDITIONS:
            raise TranscriptionError(f"final condition {self.final.kind!r} is not one of {', '.join(FINAL_CONDITIONS)}")
        self._layout()
        self._final_condition()
        self._patterns()
        self._cache_key = None

    # -- layout --------------------------------------------------------------------------------------

    def _layout(self):
        N, n, nd, nk, nu, nU, m = self.N, self.n, self.nd, self.nk, self.nu, self.nU, self.m
        self.block = nb = nd + nU + m
        self.fix_momentum = self.final.kind in ("rest", "state") and m > 0
        self.nw = N * nb + (m if self.fix_momentum else 0)
        base = np.arange(N)[:, None] * nb
        none = -np.ones((1, n), np.int64)
        q = np.hstack([base + np.arange(nd), base + nd + nu + np.arange(nk)])   # q_{k+1} (dyn; ρ_{k+1})
        self.q_idx = np.vstack([none, q]).astype(np.int64)                     # (N+1, n)
        self.u_idx = (base + nd + np.arange(nU)).astype(np.int64)               # (N, nU)
        self.lam_idx = (base + nd + nU + np.arange(m)).astype(np.int64)         # (N, m)
        self.nu_idx = (N * nb + np.arange(m)).astype(np.int64) if self.fix_momentum else np.zeros(0, np.int64)
        # Force inputs u_{k-1} of the step before node k (N+1, nu): through f⁺ in p_k (row 0: none); not
        # variables of p_k (-1) when f⁺ = 0 (the thesis rule).
        self.uprev_idx = -np.ones((N + 1, nu), np.int64)
        if self.model.forcing_weights[1] != 0.0:
            self.uprev_idx[1:] = self.u_idx[:, :nu]
        # Local variables of step k's (x_k, u_k, λ_k): (q_{k-1}, q_k, u_{k-1} forces, u_k, λ_k); q_{-1} and
        # the u, λ of N: none.
        qm1 = np.vstack([none, self.q_idx[:-1]])
        uN = np.vstack([self.u_idx, -np.ones((1, nU), np.int64)])
        lN = np.vstack([self.lam_idx, -np.ones((1, m), np.int64)])
        self.step_idx = np.hstack([qm1, self.q_idx, self.uprev_idx, uN, lN])   # (N+1, 2n + nu + nU + m)
        # Variables of the core's interval blocks: (q_j, q_{j+1}, force inputs u_j, λ_j).
        self.interval_idx = np.hstack([self.q_idx[:-1], self.q_idx[1:], self.u_idx[:, :nu], self.lam_idx])
        # Variables of node k's DEL rows: (q_{k-1}, q_k, q_{k+1}, force inputs u_{k-1}, u_k, λ_k).
        self.node_idx = np.hstack([qm1[:-1], self.q_idx[:-1], self.q_idx[1:], self.uprev_idx[:-1],
                                   self.u_idx[:, :nu], self.lam_idx])

    def _final_condition(self):
        n, nd, nk, m, N = self.n, self.nd, self.nk, self.m, self.N
        self.lbw = np.full(self.nw, -np.inf)
        self.ubw = np.full(self.nw, np.inf)
        kind = self.final.kind
        self.xN = None
        if kind == "free":
            return
        xN = self.final.state
        if xN is None:
            raise TranscriptionError(f"final condition '{kind}' needs the final state x^N")
        xN = np.asarray(xN, dtype=float)
        if xN.shape != (self.nx,) or not np.all(np.isfinite(xN)):
            raise TranscriptionError(f"the final state must be {self.nx} finite numbers, got shape {xN.shape}")
        qN = xN[:n]
        if m:
            h, Dh = self.model.constraints(qN)
            if np.max(np.abs(h)) > 1e-8:
                j = int(np.argmax(np.abs(h)))
                raise TranscriptionError(f"the final configuration violates constraint "
                                         f"'{self.model.constraint_names[j]}' (h = {h[j]:.3g}): a fixed final "
                                         "configuration must satisfy h(q^N) = 0")
            self.DhN = Dh[:, :nd]
        if kind == "rest":
            xN = np.asarray(self.system.state_from_configs(qN, qN), dtype=float)
        self.xN = xN
        fixed = self.q_idx[N]
        self.lbw[fixed] = self.ubw[fixed] = qN[np.r_[np.arange(nd), nd + np.arange(nk)]]
        if kind in ("rest", "state") and nk:
            # (ρ_N − ρ_{N−1})/Δt = v^N fixes ρ_{N−1} (x(0)'s ρ_0 when N = 1: then it must agree).
            rho = qN[nd:] - self.dt * xN[n + nd:]
            if N > 1:
                idx = self.q_idx[N - 1, nd:]
                self.lbw[idx] = self.ubw[idx] = rho
            elif np.max(np.abs(rho - self.x0[nd:n])) > 1e-12:
                raise TranscriptionError("with N = 1 the final kinematic velocity is fixed by x(0)")

    # -- point evaluations ---------------------------------------------------------------------------

    def unpack(self, w: np.ndarray):
        """(Q (N+1, nq), U (N, nU), Lam (N, m), ν (m or 0)) of a variable vector w."""
        w = np.asarray(w, dtype=float).ravel()
        n, N = self.n, self.N
        Q = np.empty((N + 1, n))
        Q[0] = self.x0[:n]
        Q[1:] = w[self.q_idx[1:]]
        return Q, w[self.u_idx], w[self.lam_idx], w[self.nu_idx]

    def pack(self, X: np.ndarray, U: np.ndarray, Lam: Optional[np.ndarray] = None) -> np.ndarray:
        """w of a trajectory (X (N+1, nx), U (N, nU), Lam (N, m); ν = 0). X's kinematic configurations
        after x(0) are taken from U (they are the same variables)."""
        w = np.zeros(self.nw)
        w[self.q_idx[1:, :self.nd]] = X[1:, :self.nd]
        w[self.u_idx] = U
        if Lam is not None:
            w[self.lam_idx] = Lam
        return np.clip(w, self.lbw, self.ubw)

    def states(self, Q: np.ndarray, P: np.ndarray) -> np.ndarray:
        """X (N+1, nx) from the configurations Q and momenta P (N, nd) (P[k] = p_{k+1})."""
        n, nd, N = self.n, self.nd, self.N
        X = np.empty((N + 1, self.nx))
        X[:, :n] = Q
        X[0, n:] = self.x0[n:]
        X[1:, n:n + nd] = P
        X[1:, n + nd:] = (Q[1:, nd:] - Q[:-1, nd:]) / self.dt
        return X

    def evaluate(self, w: np.ndarray, jacobian: bool = False) -> dict:
        """The trajectory of w and the DEL residuals (and their Jacobian blocks); cached for the last w."""
        w = np.asarray(w, dtype=float).ravel()
        key = (w.tobytes(), jacobian)
        if self._cache_key is not None and (self._cache_key[0] == key[0] and (self._cache_key[1] or not jacobian)):
            return self._cache
        Q, U, Lam, nu_ = self.unpack(w)
        p0 = self.x0[self.n:self.n + self.nd]
        out = self.system.del_residual(p0, Q, U[:, :self.nu], Lam, jacobian=jacobian)
        ev = dict(Q=Q, U=U, Lam=Lam, nu=nu_, R=out[0], P=out[1])
        if jacobian:
            ev["J"], ev["JP"] = out[2], out[3]
        ev["X"] = self.states(Q, ev["P"])
        ev["point"] = Point(ev["X"], U, Lam, np.zeros((self.N, self.m, self.nx)), np.zeros((self.N, self.m, self.nU)))
        self._cache_key, self._cache = key, ev
        return ev

    # -- the functions of the NLP --------------------------------------------------------------------

    def objective(self, w) -> float:
        ev = self.evaluate(w)
        return float(self.cost.value(ev["X"], ev["U"], ev["Lam"]))

    def constraints_value(self, w) -> np.ndarray:
        """g (ng,): DEL rows, final momentum rows, normalized margins (bounds: ``lbg``, ``ubg``)."""
        ev = self.evaluate(w)
        parts = [ev["R"].ravel()[self._del_rows]]
        if self._final_rows:
            parts.append(self._final_momentum(ev))
        for c, (steps, rows) in zip(self.constraints, self._ineq_rows):
            M = c.margins(ev["point"]) / c.scale
            parts.append(M[steps, rows])
        return np.concatenate(parts)

    def _final_momentum(self, ev) -> np.ndarray:
        r = ev["P"][-1] - self.xN[self.n:self.n + self.nd]
        if self.fix_momentum:
            r = r - self.DhN.T @ ev["nu"]
        return r

    def step_jacobian(self, ev) -> np.ndarray:
        """E (N+1, nx + nU + m, 2n + nu + nU + m): d(x_k, u_k, λ_k)/d(q_{k-1}, q_k, u_{k-1} forces, u_k, λ_k)
        (``step_idx``; module docstring); computed once per point (the gradient, Jacobian and Hessian at one w
        share it)."""
        if "E" in ev:
            return ev["E"]
        n, nd, nk, nq, nx, nu, nU, m, N = self.n, self.nd, self.nk, self.n, self.nx, self.nu, self.nU, self.m, self.N
        c = 2 * n + nu   # first column of (u_k, λ_k)
        E = np.zeros((N + 1, nx + nU + m, c + nU + m))
        E[:, :nq, n:2 * n] = np.eye(n)
        E[1:, nq:nq + nd, :c] = ev["JP"]   # dp_k/d(q_{k-1}, q_k, u_{k-1})
        E[:, nq + nd:nx, n + nd:2 * n] = np.eye(nk) / self.dt
        E[:, nq + nd:nx, nd:n] = -np.eye(nk) / self.dt
        E[:, nx:, c:] = np.eye(nU + m)
        E[0, :nx] = 0.0          # x(0) is fixed
        ev["E"] = E
        return E

    def _step_gradients(self, ev, sigma: float, y_ineq: Sequence[np.ndarray]):
        """G (N+1, nx + nU + m): σ∇h + Σ y ∇margins w.r.t. (x_k, u_k, λ_k); and the Hessian blocks
        Hs (N+1, nx + nU + m, nx + nU + m) of the same without the momenta's curvature."""
        N, nx, nU, m = self.N, self.nx, self.nU, self.m
        d = ev.get("cost_diff")
        if d is None:
            d = ev["cost_diff"] = self.cost.calc_diff(self.cost.create_data(), ev["point"], exact=True)
        G = np.zeros((N + 1, nx + nU + m))
        G[:, :nx] = sigma * d.lx
        G[:N, nx:nx + nU] = sigma * d.lu
        H = np.zeros((N + 1, nx + nU + m, nx + nU + m))
        H[:N, :nx, :nx] = sigma * d.Lxx
        H[N, :nx, :nx] = sigma * d.Lxx_N
        H[:N, nx:nx + nU, nx:nx + nU] = sigma * d.Luu
        if d.Lxu is not None:
            H[:N, :nx, nx:nx + nU] = sigma * d.Lxu
            H[:N, nx:nx + nU, :nx] = sigma * np.swapaxes(np.broadcast_to(d.Lxu, (N, nx, nU)), 1, 2)
        for c, y in zip(self.constraints, y_ineq):
            self._margin_derivatives(c, ev, y, G, H)
        return G, H

    def _margin_derivatives(self, c, ev, y: np.ndarray, G: np.ndarray, H: Optional[np.ndarray]):
        """Adds Σ_r y_kr ∇(margin_kr/scale_r) to G and its Hessian to H (y (N+1, R), zero where unused)."""
        nx, nU, N = self.nx, self.nU, self.N
        ys = y / c.scale
        if isinstance(c, LinearConstraints):
            G[:, :nx] += ys @ c.Gx
            G[:N, nx:nx + nU] += ys[:N] @ c.Gu
            return
        # Tension: margin = (2/Δt) L_k λ_k − T_min (λ the string's multiplier, L its length configuration).
        X, Lam = ev["X"], ev["Lam"]
        j, li = c.cidx, c.lidx
        yc = c.c * ys[:N]                                           # (N, S)
        np.add.at(G, (slice(0, N), li), yc * Lam[:, j])
        np.add.at(G, (slice(0, N), nx + nU + j), yc * X[:N][:, li])
        if H is not None:
            np.add.at(H, (slice(0, N), li, nx + nU + j), yc)
            np.add.at(H, (slice(0, N), nx + nU + j, li), yc)

    def _margin_jacobian(self, c, ev) -> np.ndarray:
        """D (N+1, R, nx + nU + m): d(margin_kr/scale_r)/d(x_k, u_k, λ_k)."""
        nx, nU, m, N = self.nx, self.nU, self.m, self.N
        R = len(c)
        D = np.zeros((N + 1, R, nx + nU + m))
        if isinstance(c, LinearConstraints):
            D[:, :, :nx] = c.Gx / c.scale[:, None]
            D[:N, :, nx:nx + nU] = c.Gu / c.scale[:, None]
            return D
        X, Lam = ev["X"], ev["Lam"]
        r = np.arange(R)
        f = c.c / c.scale
        D[:N, r, c.lidx] = f * Lam[:, c.cidx]
        D[:N, r, nx + nU + c.cidx] = f * X[:N][:, c.lidx]
        return D

    def gradient(self, w) -> np.ndarray:
        """∇h(w) (nw,)."""
        ev = self.evaluate(w, jacobian=True)
        G, _ = self._step_gradients(ev, 1.0, [np.zeros((self.N + 1, len(c))) for c in self.constraints])
        E = self.step_jacobian(ev)
        loc = np.matmul(G[:, None, :], E)[:, 0]
        out = np.zeros(self.nw)
        ok = self.step_idx >= 0
        np.add.at(out, self.step_idx[ok], loc[ok])
        return out

    def jacobian_values(self, w) -> np.ndarray:
        """The constraint Jacobian's nonzeros in ``jac_pattern`` order."""
        ev = self.evaluate(w, jacobian=True)
        blocks = [ev["J"]]
        if self._final_rows:
            blocks.append(ev["JP"][-1])
            if self.fix_momentum:
                blocks.append(-self.DhN.T)
        E = self.step_jacobian(ev)
        for c, (steps, rows) in zip(self.constraints, self._ineq_rows):
            D = self._margin_jacobian(c, ev)
            blocks.append(np.matmul(D, E)[steps, rows])
        return self.jac_pattern.values(blocks)

    def hessian_values(self, w, sigma: float, lam_g: np.ndarray) -> np.ndarray:
        """The Hessian of the Lagrangian σ h + lam_gᵀ g (upper triangle, ``hess_pattern`` order)."""
        ev = self.evaluate(w, jacobian=True)
        N, n, nd, m = self.N, self.n, self.nd, self.m
        lam_g = np.asarray(lam_g, dtype=float).ravel()
        Y = np.zeros((N, nd + m))
        Y.ravel()[self._del_rows] = lam_g[:self._n_del]
        at = self._n_del
        Z = np.zeros((N, nd))
        if self._final_rows:
            Z[-1] += lam_g[at:at + nd]
            at += nd
        y_ineq = []
        for c, (steps, rows) in zip(self.constraints, self._ineq_rows):
            y = np.zeros((N + 1, len(c)))
            y[steps, rows] = lam_g[at:at + steps.size]
            at += steps.size
            y_ineq.append(y)
        G, Hs = self._step_gradients(ev, sigma, y_ineq)
        Z += G[1:, n:n + nd]          # covectors on p_k = P[k-1]: their curvature comes from the core
        Hcore = self.system.del_hessian(ev["Q"], ev["U"][:, :self.nu], ev["Lam"], Y, Z)
        E = self.step_jacobian(ev)
        Hloc = np.matmul(np.swapaxes(E, 1, 2), np.matmul(Hs, E))
        return self.hess_pattern.values([Hcore, Hloc])

    # -- sparsity --------------------------------------------------------------------------------------

    def _patterns(self):
        N, nd, m = self.N, self.nd, self.m
        fixed_q = self.final.kind != "free"
        # DEL rows, without the h rows of the last node when q_N is fixed (they would be constant).
        keep = np.ones((N, nd + m), bool)
        if fixed_q:
            keep[-1, nd:] = False
        self._del_rows = np.flatnonzero(keep.ravel())
        self._n_del = self._del_rows.size
        row_of = -np.ones(N * (nd + m), np.int64)
        row_of[self._del_rows] = np.arange(self._n_del)
        rows = row_of.reshape(N, nd + m)
        ng = self._n_del
        self._final_rows = self.final.kind in ("rest", "state")
        final_rows = np.arange(ng, ng + nd) if self._final_rows else None
        if self._final_rows:
            ng += nd
        # Inequality rows: steps 1..N−1 all rows; step 0 without the state-only (terminal) rows; step N
        # the terminal rows unless x_N is fixed.
        self._ineq_rows = []
        ineq_blocks = []
        for c in self.constraints:
            R = len(c)
            use = np.zeros((N + 1, R), bool)
            use[1:N] = True
            use[0] = ~c.terminal
            use[N] = c.terminal & (self.final.kind == "free")
            steps, rr = np.nonzero(use)
            self._ineq_rows.append((steps, rr))
            ineq_blocks.append((ng + np.arange(steps.size), steps))
            ng += steps.size
        self.ng = ng
        jp = _Pattern(ng, self.nw)
        jp.add(rows, self.node_idx)
        if self._final_rows:
            jp.add(final_rows[None], np.hstack([self.q_idx[N - 1], self.q_idx[N], self.uprev_idx[N]])[None])
            if self.fix_momentum:
                jp.add(final_rows[None], self.nu_idx[None])
        for grow, steps in ineq_blocks:
            jp.add(grow[:, None], self.step_idx[steps])
        jp.finish()
        self.jac_pattern = jp
        hp = _Pattern(self.nw, self.nw, upper=True)
        hp.add(self.interval_idx, self.interval_idx)
        hp.add(self.step_idx, self.step_idx)
        hp.finish()
        self.hess_pattern = hp
        self.lbg = np.zeros(ng)
        self.ubg = np.zeros(ng)
        self.ubg[ng - sum(s.size for s, _ in self._ineq_rows):] = np.inf

    # -- reporting ---------------------------------------------------------------------------------------

    def residuals(self, w) -> dict:
        """Worst violations at w: ``del_residual`` (max |DEL row|), ``final`` (max |final condition|, 0 if
        free), ``violation`` (max(0, −margin/scale))."""
        ev = self.evaluate(w)
        out = {"del_residual": float(np.max(np.abs(ev["R"].ravel()[self._del_rows]), initial=0.0))}
        fin = 0.0
        if self.final.kind != "free":
            fin = float(np.max(np.abs(ev["Q"][-1] - self.xN[:self.n])))
            if self._final_rows:
                fin = max(fin, float(np.max(np.abs(self._final_momentum(ev)), initial=0.0)))
                if self.nk:
                    fin = max(fin, float(np.max(np.abs(ev["X"][-1, self.n + self.nd:] - self.xN[self.n + self.nd:]))))
        out["final"] = fin
        viol = 0.0
        for c, (steps, rows) in zip(self.constraints, self._ineq_rows):
            M = c.margins(ev["point"]) / c.scale
            if steps.size:
                viol = max(viol, float(-np.min(M[steps, rows])))
        out["violation"] = max(0.0, viol)
        return out


__all__ = ["Transcription", "TranscriptionError", "FinalCondition", "FINAL_CONDITIONS"]
