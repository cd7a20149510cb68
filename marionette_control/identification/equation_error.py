"""The equation error: how far the measured configurations are from satisfying the constrained DEL equations, in
configuration units, with its exact Jacobian with respect to the parameters (thesis (4.36), §5.1.3; seed 002 (3.6)).

For measured configurations q_0 … q_N (N+1, nq) — the kinematic ones (carriage, string length) included, as the
encoders report them — node k = 1 … N−1 of the forced constrained DEL equations reads
(``DiscreteSystem.del_residual``)::

    R_k(θ, λ_k) = D₂L_d(q_{k−1}, q_k) + D₁L_d(q_k, q_{k+1}) + Δt F_k − Dh(q_k)ᵀ λ_k     (nd: the dynamic rows)
    H_k(θ)      = h(q_{k+1})                                                        (m: the closure of the chains)

with the midpoint discrete Lagrangian (thesis (4.8)) and the forcing f⁻ = Δt F(q̄, q̇) (thesis (4.12a)). The step
of the integrator solves r_k = (R_k, H_k) = 0 for (q_{k+1,dyn}, λ_k) given q_{k−1}, q_k and the drives' q_{k+1,kin}
(thesis (4.36)). The equation error of node k is that step's Newton correction at the measured q_{k+1}:

    ε_k = −[G_k⁻¹ r_k]_q  (nd, rad or m),     G_k = ∂r_k/∂(q_{k+1,dyn}, λ_k)  (nd + m square)

— by how much the model's one-step prediction from the measured past differs from the measured q_{k+1}, to first
order. The multipliers (the string's tension, T = 2 L λ/Δt) are unknowns of the step like q_{k+1}: ε_k does not
depend on a value chosen for them. In configuration units the error is independent of a common factor of the
masses, inertias and damping (R and ∂R/∂q scale together), which motion data cannot fix (:mod:`.fit`), and the
sensor noise reaches it the same way whatever the parameters: the fit's weights follow from the encoders.

Exact derivatives, no finite differences: with G y = −r (y = (δq, λ)), dy/dθ = −G⁻¹ (∂r/∂θ at the step's λ +
(∂G_q/∂θ) δq), where G_q is G's configuration block:

* **Linear parameters** (masses, principal inertias, damping): R is affine in each of them (thesis
  (3.7)–(3.12), (3.19): T = ½ m |v|² + ½ ωᵀ I ω, V = m g·p, F = −c q̇), so the increment of R (λ fixed) over a
  change s of θ_i, divided by s, *is* ∂R/∂θ_i for every s — the same number whatever s (a test holds it to
  rounding), not an approximation.
* **Placements** (centres of mass, constant frames such as the hook): the model is built with those
  translations as kinematic configurations (thesis §3.6) held at their values; ∂r_k/∂t is the sum of the core's
  Jacobian columns of that configuration at q_{k−1}, q_k and q_{k+1} (``del_residual(..., jacobian=True)``, the
  multiplier term at the step's λ_k included).
* **Sensor offsets** (measured = true + o): ∂r_k/∂o = −(the same sum for the measured configuration).
* **The Newton matrix's change** (∂G_q/∂θ) δq: for linear parameters the increment of the core's Jacobian
  contracted with δq; for placements and offsets the mixed blocks of the interval Hessians of node k's own
  residual (``del_hessian``, one contraction per row).

Shapes: K nodes (the valid k: q_{k−1}, q_k, q_{k+1} measured), ε (K, nd), its Jacobian (K, nd, p), its sensitivity
to the three samples (K, nd, 3, nq).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from marionette_control import _core
from marionette_control.identification.parameters import ModelParameters, Parameter, translation_config


#: the step of a linear parameter's increment where its value is 0 (any step gives the same derivative)
LINEAR_STEP = {"mass": 0.1, "inertia": 1e-3, "damping": 0.01}


@dataclass
class EquationErrorPoint:
    """The equation error at one parameter vector (module docstring).

    error : (K, nd) ε at ``nodes``; jacobian : (K, nd, p) ∂ε/∂θ; noise_gain : (K, nd, 3, nq) ∂ε/∂(q̃_{k−1}, q̃_k,
    q̃_{k+1}), how the measurement noise enters; multipliers : (N, m) the step's λ_k (NaN where unused).
    """

    error: np.ndarray
    jacobian: np.ndarray
    noise_gain: np.ndarray
    multipliers: np.ndarray
    nodes: np.ndarray


class EquationError:
    """The DEL equation error of a recording as a function of the parameters (module docstring).

    Parameters
    ----------
    params : ModelParameters of the model file the recording was measured on (its names and structure)
    Q : (N+1, nq) measured configurations in the model's configuration order, NaN rows for missing samples
    dt : the time step of the recording [s]
    parameters : the parameters θ is a vector of (in this order)
    """

    def __init__(self, params: ModelParameters, Q: np.ndarray, dt: float, parameters: Sequence[Parameter]):
        self.params = params
        self.parameters = list(parameters)
        self.Q = np.asarray(Q, dtype=float)
        self.dt = float(dt)
        m = params.description.model
        self.nd, self.nq, self.m = m.nd, m.nq, m.nc
        if self.Q.ndim != 2 or self.Q.shape[1] != self.nq or self.Q.shape[0] < 3:
            raise ValueError(f"Q must have shape (N+1 >= 3, {self.nq}), got {self.Q.shape}")
        ok = np.all(np.isfinite(self.Q), axis=1)
        N = len(self.Q) - 1
        self.nodes = np.array([k for k in range(1, N) if ok[k - 1] and ok[k] and ok[k + 1]], dtype=int)
        self.geometry = {}      # frame -> axes made kinematic
        for p in self.parameters:
            if p.kind in ("center_of_mass", "translation"):
                self.geometry.setdefault(p.target, [])
                self.geometry[p.target].append(p.axis)
        self._config_index = {c: i for i, c in enumerate(m.config_names)}

    def _values(self, theta: np.ndarray) -> dict:
        return {p: float(v) for p, v in zip(self.parameters, theta)}

    def _configurations(self, theta: np.ndarray, model) -> np.ndarray:
        """The measured configurations with the offsets removed, in ``model``'s order (the placements' kinematic
        configurations at their values); missing samples are filled by the nearest measured one (they enter no
        used node)."""
        Q = self.Q.copy()
        for p, v in zip(self.parameters, theta):
            if p.kind == "offset":
                Q[:, self._config_index[p.target]] -= v
        bad = ~np.all(np.isfinite(Q), axis=1)
        if bad.any():
            good = np.flatnonzero(~bad)
            nearest = good[np.clip(np.searchsorted(good, np.flatnonzero(bad)), 0, len(good) - 1)]
            Q[bad] = Q[nearest]
        names = model.config_names
        out = np.empty((len(Q), len(names)))
        values = self._values(theta)
        for j, name in enumerate(names):
            if name in self._config_index:
                out[:, j] = Q[:, self._config_index[name]]
            else:   # a placement's kinematic configuration: its value
                out[:, j] = next(v for p, v in values.items() if p.kind in ("center_of_mass", "translation")
                                 and translation_config(p.target, p.axis) == name)
        return out

    def evaluate(self, theta: Sequence[float]) -> EquationErrorPoint:
        """The equation error and its Jacobian at θ (p,)."""
        theta = np.asarray(theta, dtype=float)
        values = self._values(theta)
        model = self.params.model(values, kinematic=self.geometry)
        system = _core.DiscreteSystem(model, self.dt)
        Q = self._configurations(theta, model)
        N, nd, m, nq, nu = len(Q) - 1, self.nd, self.m, model.nq, model.nu
        zeros_u = np.zeros((N, nu))
        K = self.nodes
        R0, _, J0, _ = system.del_residual(np.zeros(nd), Q, zeros_u, np.zeros((N, m)), True)
        # G_k = d(R_k, H_k)/d(q_{k+1,dyn}, lambda_k): the step's Newton matrix at the measured configurations
        dyn = [model.config_names.index(c) for c in self.params.dynamic]
        G = np.concatenate([J0[K][:, :, [2 * nq + j for j in dyn]], J0[K][:, :, 3 * nq + 2 * nu:]], axis=2)
        step = np.linalg.solve(G, -R0[K][..., None])[..., 0]             # (K, nd + m): (delta q, lambda)
        lam = np.full((N, m), np.nan)
        lam[K] = step[:, nd:]
        Lam = np.where(np.isfinite(lam), lam, 0.0)
        R, _, J, _ = system.del_residual(np.zeros(nd), Q, zeros_u, Lam, True)
        dq = np.zeros((N, nd))
        dq[K] = step[:, :nd]
        dr, dG = self._jacobian(theta, values, model, system, Q, Lam, J, dq)
        # G y = -r  =>  dy/dθ = -G^-1 (dr/dθ at the step's λ + (dG_q/dθ) δq)
        jacobian = -np.linalg.solve(G, dr[K] + dG[K])[:, :nd]
        cols = np.array([model.config_names.index(c) for c in self.params.configs])
        Jq = np.stack([J[K][:, :, b * nq + cols] for b in range(3)], axis=2)     # (K, nd + m, 3, nq)
        gain = -np.linalg.solve(G, Jq.reshape(len(K), nd + m, -1))[:, :nd].reshape(len(K), nd, 3, len(cols))
        return EquationErrorPoint(step[:, :nd], jacobian, gain, lam, K)

    def _jacobian(self, theta, values, model, system, Q, Lam, J, dq) -> tuple[np.ndarray, np.ndarray]:
        """(dr/dθ, (dG_q/dθ) δq), each (N, nd + m, p), at the step's multipliers Lam (N, m) and corrections dq
        (N, nd): linear parameters by the increments of R and of its Jacobian (R is affine in them), placements and
        offsets through the configuration columns of the core's Jacobian J (N, nd + m, 3 nq + 2 nu + m) and, for the
        change of the Newton matrix, of its interval Hessians (``del_hessian``, contracted row by row)."""
        N, nd, m, nq = len(Q) - 1, self.nd, self.m, model.nq
        names = model.config_names
        p_n = len(self.parameters)
        dr = np.zeros((N, nd + m, p_n))
        dG = np.zeros((N, nd + m, p_n))
        dyn = [names.index(c) for c in self.params.dynamic]

        def config_columns(name: str) -> np.ndarray:
            j = names.index(name)
            return J[:, :, j] + J[:, :, nq + j] + J[:, :, 2 * nq + j]

        plain = self.params.model(values)
        Qp = Q[:, [names.index(c) for c in plain.config_names]]   # without the placements' configurations
        npl = plain.nq

        def residual(model_):
            R_, _, J_, _ = _core.DiscreteSystem(model_, self.dt).del_residual(
                np.zeros(nd), Qp, np.zeros((N, model_.nu)), Lam, True)
            # the dynamic rows and the Newton matrix's configuration block contracted with dq
            return R_[:, :nd], np.einsum("kij,kj->ki", J_[:, :nd, 2 * npl:2 * npl + nd], dq)

        base = None
        hessians = None
        for i, p in enumerate(self.parameters):
            if p.linear:
                # R and its Jacobian are affine in a linear parameter: their increments over any step s are s times
                # the derivatives
                s = abs(theta[i]) if theta[i] else LINEAR_STEP[p.kind]
                base = residual(plain) if base is None else base
                moved = residual(self.params.model({**values, p: theta[i] + s}))
                dr[:, :nd, i] = (moved[0] - base[0]) / s
                dG[:, :nd, i] = (moved[1] - base[1]) / s
                continue
            hessians = self._row_hessians(system, Q, Lam) if hessians is None else hessians
            j = names.index(p.target if p.kind == "offset" else translation_config(p.target, p.axis))
            sign = -1.0 if p.kind == "offset" else 1.0
            dr[:, :, i] = sign * config_columns(names[j])
            # d/dθ of dr/dq_{k+1,dyn}: the mixed block of the interval Hessians (θ enters q_k and q_{k+1})
            mixed = hessians[:, :, j, :][..., [nq + d for d in dyn]] + hessians[:, :, nq + j, :][..., [nq + d for d in dyn]]
            dG[:, :, i] = sign * np.einsum("kid,kd->ki", mixed, dq)
        return dr, dG

    def _row_hessians(self, system, Q, Lam) -> np.ndarray:
        """(N, nd + m, 2 nq + nu + m, 2 nq + nu + m): row i, interval k: the Hessian of node k's own residual
        r_k = a_k + c_k (its D₁L_d, forcing and constraint terms and h(q_{k+1}); not b_{k−1} = D₂L_d(q_{k−1}, q_k),
        which does not depend on q_{k+1}) over (q_k, q_{k+1}, u_k, λ_k). ``del_hessian`` contracts Σ Y_k·R_k +
        Z_k·P_k; with Y = e_i at every node and Z_k = −Y_{k+1} the b terms cancel."""
        N, rows = len(Q) - 1, self.nd + self.m
        out = []
        for i in range(rows):
            Y = np.zeros((N, rows))
            Y[:, i] = 1.0
            Z = np.zeros((N, self.nd))
            if i < self.nd:
                Z[:-1, i] = -1.0
            out.append(system.del_hessian(Q, np.zeros((N, system.model.nu)), Lam, Y, Z))
        return np.stack(out, axis=1)


def parameter_values(params: ModelParameters, parameters: Sequence[Parameter],
                     values: Mapping[str, float] | None = None) -> np.ndarray:
    """θ (p,) with the model file's values, replaced by ``values`` {name: value} where given."""
    values = dict(values or {})
    return np.array([values.get(p.name, params.nominal(p)) for p in parameters])
