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
        theta = np.asarray(theta, dtype=float)
        values = self._values(theta)
        model = self.params.model(values, kinematic=self.geometry)
        system = _core.DiscreteSystem(model, self.dt)
        plain = self.params.model(values)
        names, nd, nq, W = model.config_names, self.nd, model.nq, self.W
        nx, nU, nu = model.nx, model.nU, model.nu
        measured = self._measured(theta)
        col = {c: names.index(c) for c in names}
        kin = [c for c in names[nd:]]
        # the columns of a model configuration in the measured table, or the value of a placement's configuration
        place = {translation_config(p.target, p.axis): v for p, v in values.items()
                 if p.kind in ("center_of_mass", "translation")}
        increments = self._linear_models(theta, values)
        n_w, p_n = len(self.starts), len(theta)
        err = np.empty((n_w, W + 1, nd))
        jt = np.empty((n_w, W + 1, nd, p_n))
        js = np.empty((n_w, W + 1, nd, 2 * nd))
        lam = np.empty((n_w, W, model.nc))
        for w, k in enumerate(self.starts):
            rho = np.array([[place[c] if c in place else measured[j, self.params.configs.index(c)] for c in kin]
                            for j in range(k - 1, k + W + 1)])
            x0 = np.empty(nx)
            x0[:nd] = states[w, :nd]
            x0[nd:nq] = rho[1]
            x0[nq:nq + nd] = states[w, nd:]
            x0[nq + nd:] = (rho[1] - rho[0]) / self.dt
            U = np.zeros((W, nU))
            U[:, nu:] = rho[2:]
            X, _, Lam = system.simulate(x0, U, True)
            A, B = system.linearize_trajectory(X, U)
            lam[w] = Lam
            # sensitivities S (nx, p + 2 nd)
            S = np.zeros((nx, p_n + 2 * nd))
            S[:nd, p_n:p_n + nd] = np.eye(nd)
            S[nq:nq + nd, p_n + nd:] = np.eye(nd)
            dU = np.zeros((nU, p_n + 2 * nd))
            for i, p in enumerate(self.parameters):
                if p.kind in ("center_of_mass", "translation"):
                    c = col[translation_config(p.target, p.axis)]
                    S[c, i] = 1.0
                    dU[nu + c - nd, i] = 1.0
                elif p.kind == "offset":
                    c = col[p.target]
                    if c >= nd:         # a drive's offset moves the inputs the window is driven with
                        S[c, i] = -1.0
                        dU[nu + c - nd, i] = -1.0
            Qplain = X[:, [col[c] for c in plain.config_names]]
            da, db = increments(Qplain)                            # (p, W, nd) each
            traj_err = [X[0, :nd] - measured[k, :nd]]
            sens = [S[:nd].copy()]
            for j in range(W):
                S = A[j] @ S + B[j] @ dU
                for i in np.flatnonzero([p.linear for p in self.parameters]):
                    S[:, i] += A[j][:, nq:nq + nd] @ da[i, j]
                    S[nq:nq + nd, i] += db[i, j]
                traj_err.append(X[j + 1, :nd] - measured[k + j + 1, :nd])
                sens.append(S[:nd].copy())
            err[w] = traj_err
            sens = np.array(sens)
            for i, p in enumerate(self.parameters):
                if p.kind == "offset" and col[p.target] < nd:   # the measured dynamic configuration itself
                    sens[:, col[p.target], i] += 1.0
            jt[w] = sens[:, :, :p_n]
            js[w] = sens[:, :, p_n:]
        return OutputErrorPoint(err, jt, js, lam)

    def _linear_models(self, theta, values):
        """A function of simulated plain-model configurations (W + 1, nq) giving (da, db) (p, W, nd): ∂a_j/∂θ_i,
        ∂b_j/∂θ_i for the linear parameters (zeros for the others), by the affine increments (module docstring)."""
        lin = [(i, p) for i, p in enumerate(self.parameters) if p.linear]
        base = self.params.model(values)
        steps = {i: (abs(theta[i]) if theta[i] else LINEAR_STEP[p.kind]) for i, p in lin}
        moved = {i: self.params.model({**values, p: theta[i] + steps[i]}) for i, p in lin}
        systems = {None: _core.DiscreteSystem(base, self.dt), **{i: _core.DiscreteSystem(mdl, self.dt)
                                                                   for i, mdl in moved.items()}}
        nd, m = self.nd, base.nc

        def ab(system, Qw):
            Wn = len(Qw) - 1
            R, P = system.del_residual(np.zeros(nd), Qw, np.zeros((Wn, system.model.nu)), np.zeros((Wn, m)))
            a = R[:, :nd].copy()
            a[1:] -= P[:-1]
            return a, P

        def increments(Qw):
            Wn = len(Qw) - 1
            da = np.zeros((len(self.parameters), Wn, nd))
            db = np.zeros_like(da)
            a0, b0 = ab(systems[None], Qw)
            for i, _ in lin:
                a1, b1 = ab(systems[i], Qw)
                da[i], db[i] = (a1 - a0) / steps[i], (b1 - b0) / steps[i]
            return da, db

        return increments
