"""The output error: the model simulated over short windows from the measured past against the measurements, with
exact sensitivities (thesis (4.36)–(4.38)).

The equation error (:mod:`.equation_error`) evaluates the model at the noisy measured configurations, so the
noise enters its regressors too (errors in variables: the momenta and accelerations it uses are differences of
noisy samples) and biases the fit a little. The output error does not: each window w of W steps starts from a
state (q_dyn, p) that is a free parameter of the fit (a nuisance, initialized from the measurements), is driven by
the measured drive positions (the kinematic configurations, thesis §3.6), and is compared with the measured
dynamic configurations only::

    ε_{w,j} = q_dyn(k_w + j; θ, x_w) − q̃_dyn(k_w + j),    j = 0 … W.

Sensitivities along the simulated window (exact, no finite differences), S_j = ∂x_j/∂(θ, x_w) (nx, ·):

    S_{j+1} = A_j S_j + B_j ∂u_j/∂θ + A_j[:, p] Δa_j + E_p Δb_j

with A_j, B_j the exact linearization of the step (thesis (4.37)–(4.38), ``linearize_trajectory``); placements
(kinematic configurations of the model built by :class:`~.parameters.ParametrizedBuilder`) enter through the state
and the inputs; a linear parameter θ_i (mass, inertia, damping) changes the step's equation p_j + a_j(q_j, q_{j+1})
− Dh(q_j)ᵀλ_j = 0 by ∂a_j/∂θ_i — the same as a change of p_j by that amount, hence A_j[:, p] — and the next
momentum p_{j+1} = b_j(q_j, q_{j+1}) by ∂b_j/∂θ_i, where a_j = D₁L_d + Δt F and b_j = D₂L_d (thesis (4.8), (4.12a))
are affine in θ_i, so their increments over a unit change are their derivatives exactly (``del_residual`` on the
simulated configurations).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from marionette_control import _core
from marionette_control.identification.equation_error import LINEAR_STEP
from marionette_control.identification.parameters import ModelParameters, Parameter, translation_config


@dataclass
class OutputErrorPoint:
    """The output error at (θ, window states).

    error : (n_windows, W + 1, nd) simulated minus measured dynamic configurations; jacobian_theta :
    (n_windows, W + 1, nd, p); jacobian_state : (n_windows, W + 1, nd, 2 nd) with respect to the window's own
    initial (q_dyn, p); tension_sign : (n_windows, W) the sign of the simulated multipliers (a window where the
    string would push is not one the holonomic model describes).
    """

    error: np.ndarray
    jacobian_theta: np.ndarray
    jacobian_state: np.ndarray
    multipliers: np.ndarray


class OutputError:
    """Windows of W steps starting at ``starts`` (each k_w ≥ 1 with samples k_w − 1 … k_w + W measured).

    Parameters
    ----------
    params, Q, dt, parameters : as :class:`~.equation_error.EquationError`
    starts : (n_windows,) first node of each window; W : steps per window
    """

    def __init__(self, params: ModelParameters, Q: np.ndarray, dt: float, parameters: Sequence[Parameter],
                 starts: Sequence[int], W: int):
        self.params = params
        self.parameters = list(parameters)
        self.Q = np.asarray(Q, dtype=float)
        self.dt = float(dt)
        self.W = int(W)
        self.starts = np.asarray(starts, dtype=int)
        m = params.description.model
        self.nd, self.nq, self.nk = m.nd, m.nq, m.nk
        for k in self.starts:
            if k < 1 or k + self.W >= len(self.Q) or not np.all(np.isfinite(self.Q[k - 1:k + self.W + 1])):
                raise ValueError(f"window at {k} needs samples {k - 1} … {k + self.W}, all measured")
        self.geometry = {}
        for p in self.parameters:
            if p.kind in ("center_of_mass", "translation"):
                self.geometry.setdefault(p.target, []).append(p.axis)

    def initial_states(self, theta: np.ndarray) -> np.ndarray:
        """(n_windows, 2 nd): (q_dyn, p) of each window from the measurements (the discrete Legendre transform of
        samples k_w − 1, k_w, thesis (4.36)'s p_k), the nuisances' starting values."""
        model = self.params.model(self._values(theta))
        system = _core.DiscreteSystem(model, self.dt)
        Q = self._measured(theta)
        out = []
        for k in self.starts:
            x = system.state_from_configs(Q[k - 1], Q[k])
            out.append(np.r_[x[:self.nd], x[self.nq:self.nq + self.nd]])
        return np.array(out)

    def _values(self, theta) -> dict:
        return {p: float(v) for p, v in zip(self.parameters, theta)}

    def _measured(self, theta) -> np.ndarray:
        Q = self.Q.copy()
        for p, v in zip(self.parameters, theta):
            if p.kind == "offset":
                Q[:, self.params.configs.index(p.target)] -= v
        return Q

    def evaluate(self, theta: Sequence[float], states: np.ndarray) -> OutputErrorPoint:
        """The output error and its sensitivities at θ (p,) and the windows' initial states (n_windows, 2 nd)."""
        theta = np.asarray(theta, dtype=float)
        values = self._values(theta)
        model = self.params.model(values, kinematic=self.geometry)
        system = _core.DiscreteSystem(model, self.dt)
        names, nd, nq, W = model.config_names, self.nd, model.nq, self.W
        nx, nU, nu = model.nx, model.nU, model.nu
        measured = self._measured(theta)
        col = {c: names.index(c) for c in names}
        place = {translation_config(p.target, p.axis): v for p, v in values.items()
                 if p.kind in ("center_of_mass", "translation")}
        source = [(True, place[c]) if c in place else (False, self.params.configs.index(c)) for c in names[nd:]]
        n_w, p_n = len(self.starts), len(theta)
        # the windows simulated from their states, driven by the measured drives (placements: their values)
        Xs, Us, lam = [], [], np.empty((n_w, W, model.nc))
        for w, k in enumerate(self.starts):
            rows = measured[k - 1:k + W + 1]
            rho = np.column_stack([np.full(W + 2, v) if fixed else rows[:, v] for fixed, v in source])
            x0 = np.concatenate([states[w, :nd], rho[1], states[w, nd:], (rho[1] - rho[0]) / self.dt])
            U = np.zeros((W, nU))
            U[:, nu:] = rho[2:]
            X, _, lam[w] = system.simulate(x0, U, True)
            Xs.append(X)
            Us.append(U)
        X = np.array(Xs)                                               # (n_w, W + 1, nx)
        # the linear parameters' increments of a_j = D1 L_d + dt F and b_j = D2 L_d along every window at once
        plain_cols = [col[c] for c in self.params.configs]
        da, db = self._increments(theta, values, X[:, :, plain_cols])  # (n_lin, n_w, W, nd) each
        lin = np.flatnonzero([p.linear for p in self.parameters])
        # initial sensitivities and the inputs' dependence on θ (placements, drive offsets)
        S0 = np.zeros((nx, p_n + 2 * nd))
        S0[:nd, p_n:p_n + nd] = np.eye(nd)
        S0[nq:nq + nd, p_n + nd:] = np.eye(nd)
        dU = np.zeros((nU, p_n + 2 * nd))
        measured_offset = []
        for i, p in enumerate(self.parameters):
            if p.kind in ("center_of_mass", "translation"):
                c = col[translation_config(p.target, p.axis)]
                S0[c, i] = 1.0
                dU[nu + c - nd, i] = 1.0
            elif p.kind == "offset":
                c = col[p.target]
                if c >= nd:             # a drive's offset moves the inputs the window is driven with
                    S0[c, i] = -1.0
                    dU[nu + c - nd, i] = -1.0
                else:                   # the measured dynamic configuration itself
                    measured_offset.append((c, i))
        sens = np.empty((n_w, W + 1, nd, p_n + 2 * nd))
        for w in range(n_w):
            A, B = system.linearize_trajectory(X[w], Us[w])
            BdU = B @ dU                                               # (W, nx, ·)
            Ap = A[:, :, nq:nq + nd]                                   # (W, nx, nd): the momentum columns
            S = S0.copy()
            sens[w, 0] = S[:nd]
            for j in range(W):
                S = A[j] @ S + BdU[j]
                S[:, lin] += Ap[j] @ da[:, w, j].T
                S[nq:nq + nd, lin] += db[:, w, j].T
                sens[w, j + 1] = S[:nd]
        for c, i in measured_offset:
            sens[:, :, c, i] += 1.0
        err = X[:, :, :nd] - np.array([measured[k:k + W + 1, :nd] for k in self.starts])
        return OutputErrorPoint(err, sens[..., :p_n], sens[..., p_n:], lam)

    def _increments(self, theta, values, Qw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(da, db) (n_lin, n_w, W, nd): ∂a_j/∂θ_i and ∂b_j/∂θ_i of the linear parameters along the windows'
        configurations Qw (n_w, W + 1, nq) of the plain model, by the affine increments (module docstring). The
        windows are laid end to end in one ``del_residual`` call per model; the intervals across a seam are not
        used."""
        lin = [(i, p) for i, p in enumerate(self.parameters) if p.linear]
        n_w, W1, nq = Qw.shape
        flat = Qw.reshape(-1, nq)
        n = len(flat) - 1
        nd = self.nd
        inner = np.array([w * W1 + j for w in range(n_w) for j in range(W1 - 1)])   # interval w, j -> global

        def ab(model):
            R, P = _core.DiscreteSystem(model, self.dt).del_residual(
                np.zeros(nd), flat, np.zeros((n, model.nu)), np.zeros((n, model.nc)))
            a = R[:, :nd].copy()
            a[1:] -= P[:-1]
            return a[inner].reshape(n_w, W1 - 1, nd), P[inner].reshape(n_w, W1 - 1, nd)

        a0, b0 = ab(self.params.model(values))
        da = np.empty((len(lin), n_w, W1 - 1, nd))
        db = np.empty_like(da)
        for r, (i, p) in enumerate(lin):
            step = abs(theta[i]) if theta[i] else LINEAR_STEP[p.kind]
            a1, b1 = ab(self.params.model({**values, p: theta[i] + step}))
            da[r], db[r] = (a1 - a0) / step, (b1 - b0) / step
        return da, db
