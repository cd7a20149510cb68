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

Exact derivatives, no finite differences (of r; ε's Jacobian is −[G⁻¹ ∂r/∂θ]_q, Gauss–Newton's, which leaves
out the change of G, a term of the size of the residual itself):

* **Linear parameters** (masses, principal inertias, damping): R is affine in each of them (thesis
  (3.7)–(3.12), (3.19): T = ½ m |v|² + ½ ωᵀ I ω, V = m g·p, F = −c q̇), so the increment of R (λ fixed) over a
  change s of θ_i, divided by s, *is* ∂R/∂θ_i for every s — the same number whatever s (a test holds it to
  rounding), not an approximation.
* **Placements** (centres of mass, constant frames such as the hook): the model is built with those
  translations as kinematic configurations (thesis §3.6) held at their values; ∂r_k/∂t is the sum of the core's
  Jacobian columns of that configuration at q_{k−1}, q_k and q_{k+1} (``del_residual(..., jacobian=True)``, the
  multiplier term at the step's λ_k included).
* **Sensor offsets** (measured = true + o): ∂r_k/∂o = −(the same sum for the measured configuration).

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
        G = np.concatenate([J0[K][:, :, [2 * nq + j for j in dyn]], J0[K][:, :, 3 * nq + nu:]], axis=2)
        step = np.linalg.solve(G, -R0[K][..., None])[..., 0]             # (K, nd + m): (delta q, lambda)
        lam = np.full((N, m), np.nan)
        lam[K] = step[:, nd:]
        R, _, J, _ = system.del_residual(np.zeros(nd), Q, zeros_u, np.where(np.isfinite(lam), lam, 0.0), True)
        dr = self._jacobian(theta, values, model, Q, J)[K]              # (K, nd + m, p)
        jacobian = -np.linalg.solve(G, dr)[:, :nd]
        cols = np.array([model.config_names.index(c) for c in self.params.configs])
        Jq = np.stack([J[K][:, :, b * nq + cols] for b in range(3)], axis=2)     # (K, nd + m, 3, nq)
        gain = -np.linalg.solve(G, Jq.reshape(len(K), nd + m, -1))[:, :nd].reshape(len(K), nd, 3, len(cols))
        return EquationErrorPoint(step[:, :nd], jacobian, gain, lam, K)

    def _jacobian(self, theta, values, model, Q, J) -> np.ndarray:
        """dr/dθ (N, nd + m, p): linear parameters by the increment of R, placements and offsets through the
        configuration columns of the core's Jacobian J (N, nd + m, 3 nq + nu + m)."""
        N, nd, m, nq = len(Q) - 1, self.nd, self.m, model.nq
        names = model.config_names
        out = np.zeros((N, nd + m, len(self.parameters)))

        def config_columns(name: str) -> np.ndarray:
            j = names.index(name)
            return J[:, :, j] + J[:, :, nq + j] + J[:, :, 2 * nq + j]

        plain = self.params.model(values)
        Qp = Q[:, [names.index(c) for c in plain.config_names]]   # without the placements' configurations

        def residual(model) -> np.ndarray:
            R, _ = _core.DiscreteSystem(model, self.dt).del_residual(
                np.zeros(nd), Qp, np.zeros((N, model.nu)), np.zeros((N, m)))
            return R[:, :nd]

        base = None
        for i, p in enumerate(self.parameters):
            if p.linear:
                # R is affine in a linear parameter: its increment over any step s is s times the derivative
                s = abs(theta[i]) if theta[i] else LINEAR_STEP[p.kind]
                base = residual(plain) if base is None else base
                out[:, :nd, i] = (residual(self.params.model({**values, p: theta[i] + s})) - base) / s
            elif p.kind == "offset":
                out[:, :, i] = -config_columns(p.target)
            else:
                out[:, :, i] = config_columns(translation_config(p.target, p.axis))
        return out


def parameter_values(params: ModelParameters, parameters: Sequence[Parameter],
                     values: Mapping[str, float] | None = None) -> np.ndarray:
    """θ (p,) with the model file's values, replaced by ``values`` {name: value} where given."""
    values = dict(values or {})
    return np.array([values.get(p.name, params.nominal(p)) for p in parameters])
