"""The fit: parameters that make the DEL equations hold along a recording, with honest uncertainty.

Statistical model. The encoders report q̃_k = q_k + ε_k with independent noise of standard deviation σ_j per
configuration (:func:`noise_levels` estimates it from the recording). The equation error ε (:mod:`.equation_error`,
the DEL step's Newton correction at the measured configurations) is then, to first order, ε(θ) + G n with
G = ∂ε/∂q̃: every node depends on three samples, so neighbouring nodes' noise is correlated, and its covariance
C = G Σ Gᵀ is banded. The fit is the maximum a posteriori estimate under a Gaussian prior θ ~ N(θ₀, diag(s²))
(the model file's values and their uncertainty, :class:`Prior`):

    minimize  ½ |L⁻¹ ε(θ)|² + ½ |(θ − θ₀)/s|²,     C = L Lᵀ

by Gauss–Newton with the exact Jacobians, re-weighting C at every iterate and halving a step that leaves the
physical bounds (masses, inertias and damping > 0) or does not lower the objective.

Scale. Motion data without a measured force cannot fix a common factor of the masses, inertias and damping: the
string's tension is unknown and gravity scales with the masses, so the dynamics — and ε — are the same for
s·θ_lin (the geometry unchanged). The data's information along that direction is exactly 0; the factor is the
prior's (or a weighed mass's, ``known``), and :attr:`Calibration.scale_note` says so.

Uncertainty: the posterior covariance (JᵀJ)⁻¹ of the whitened problem, scaled by the reduced χ² when the noise
model underestimates the residuals. A parameter is *identifiable* when the data shrinks its prior standard
deviation at least :data:`IDENTIFIABLE_SHRINK`-fold; the others stay near their prior and are reported as not
identifiable, with the data's combinations that do fix them (:attr:`Calibration.directions`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

import numpy as np
from scipy.linalg import cholesky_banded, solve_banded
from scipy.optimize import least_squares

from marionette_control.identification.equation_error import EquationError, EquationErrorPoint
from marionette_control.identification.output_error import OutputError
from marionette_control.identification.parameters import ModelParameters, Parameter

#: the default prior standard deviation of each kind: what a careful CAD model and a data sheet leave open
DEFAULT_PRIOR = {"mass": ("relative", 0.10), "inertia": ("relative", 0.20), "damping": ("relative", 1.0),
                 "center_of_mass": ("absolute", 0.010), "translation": ("absolute", 0.005),
                 "offset": ("absolute", 0.01)}
#: a parameter is identifiable when the data shrinks its prior standard deviation at least this many times
IDENTIFIABLE_SHRINK = 3.0
#: lower bound of masses, inertias and damping (kg, kg m², N m s/rad): physical consistency
POSITIVE_FLOOR = 1e-9


class CalibrationError(ValueError):
    """The data cannot calibrate the model; the message says what is missing."""


@dataclass(frozen=True)
class Prior:
    """θ ~ N(mean, std²) for one parameter; ``known`` marks a measured value (e.g. a weighed mass)."""

    mean: float
    std: float
    known: bool = False


def default_prior(params: ModelParameters, p: Parameter) -> Prior:
    """The model file's value with :data:`DEFAULT_PRIOR`'s uncertainty."""
    mean = params.nominal(p)
    how, size = DEFAULT_PRIOR[p.kind]
    std = size * abs(mean) if how == "relative" else size
    if std <= 0:                 # a relative prior of a zero value: an absolute one on the kind's scale
        std = {"mass": 0.05, "inertia": 1e-4, "damping": 0.01}[p.kind]
    return Prior(mean, std)


def noise_levels(Q: np.ndarray) -> np.ndarray:
    """σ (nq,): each configuration's sensor noise, from the recording itself.

    Sampled at the control rate a motion is smooth, so the third differences of the samples are the noise's:
    Δ³ε has variance 20 σ² for white ε. A robust estimate (the median absolute deviation, for the rare
    fast drive reversal) over the rows where four consecutive samples exist."""
    Q = np.asarray(Q, dtype=float)
    d3 = np.diff(Q, n=3, axis=0)
    d3 = d3[np.all(np.isfinite(d3), axis=1)]
    if len(d3) < 10:
        raise CalibrationError(f"too few consecutive samples to estimate the sensor noise ({len(d3)} runs of four)")
    mad = np.median(np.abs(d3 - np.median(d3, axis=0)), axis=0)
    return 1.4826 * mad / math.sqrt(20.0)


@dataclass
class ParameterEstimate:
    """One fitted parameter (SI units): the model file's value, the estimate, its standard deviation, the prior's,
    and whether the data determined it (``identifiable``)."""

    name: str
    unit: str
    nominal: float
    estimate: float
    std: float
    prior_std: float
    identifiable: bool
    known: bool = False

    def to_dict(self) -> dict:
        return {"nominal": self.nominal, "estimate": self.estimate, "std": self.std, "prior_std": self.prior_std,
                "identifiable": self.identifiable, "known": self.known, "unit": self.unit}


@dataclass
class Calibration:
    """The result of :func:`fit_equation_error`.

    parameters : the fitted parameters; estimates : one :class:`ParameterEstimate` each; theta (p,), covariance
    (p, p); noise (nq,) the sensor noise used; chi2, dof : the whitened residuals' sum of squares and degrees of
    freedom (χ²/dof ≈ 1 when the noise model holds); directions : [(data's standard deviation, {name:
    weight})] the parameter combinations the data fixes, best first; tension (N,) the string tension estimates
    [N] per node (NaN where unused); iterations; scale_note; converged : the Gauss–Newton iteration stopped on
    its step tolerance or at a point no step lowers (not on its iteration limit).
    """

    parameters: list
    estimates: list
    theta: np.ndarray
    covariance: np.ndarray
    noise: np.ndarray
    chi2: float
    dof: int
    directions: list
    multipliers: np.ndarray
    iterations: int
    scale_note: str
    nodes: int = 0
    converged: bool = True

    def estimate(self, name: str) -> ParameterEstimate:
        return next(e for e in self.estimates if e.name == name)

    def values(self) -> dict:
        """{name: estimate}."""
        return {e.name: e.estimate for e in self.estimates}


class _Whitening:
    """L⁻¹ for the banded covariance C = G Σ Gᵀ of the projected residuals (rows node by node, r per node).

    Node k uses samples k−1, k, k+1, so nodes k and k + d (d ≤ 2) share 3 − d samples: the covariance block of
    nodes k0 and k1 = k0 + d is Σ_b G_{k1, b−d} Σ G_{k0, b}ᵀ over the shared sample blocks b = d … 2."""

    def __init__(self, pt: EquationErrorPoint, sigma: np.ndarray):
        g = pt.noise_gain * sigma                          # (K, r, 3, nq): noise-scaled sensitivities
        K, r = pt.error.shape
        self.band = 3 * r
        ab = np.zeros((self.band, K * r))                  # lower banded storage: ab[i, j] = C[j + i, j]
        where = {int(k): i for i, k in enumerate(pt.nodes)}
        for i0, k in enumerate(pt.nodes):
            for d in range(3):
                i1 = where.get(int(k) + d)
                if i1 is None:
                    continue
                block = sum(g[i1, :, b - d] @ g[i0, :, b].T for b in range(d, 3))   # (r, r): C[(i1, ·), (i0, ·)]
                for a in range(r):
                    for c in range(r):
                        row, col = i1 * r + a, i0 * r + c
                        if row >= col:
                            ab[row - col, col] = block[a, c]
        ab[0] = np.maximum(ab[0], 1e-12 * max(float(np.max(ab[0])), 1e-300))
        self.L = cholesky_banded(ab, lower=True)

    def apply(self, x: np.ndarray) -> np.ndarray:
        """L⁻¹ x for x (K·r,) or (K·r, p)."""
        return solve_banded((self.band - 1, 0), self.L, x)


def fit_equation_error(params: ModelParameters, Q: np.ndarray, dt: float, names: Sequence[str],
                       priors: Optional[Mapping[str, Prior]] = None, noise: Optional[np.ndarray] = None,
                       max_iterations: int = 30, tolerance: float = 1e-3, start=None) -> Calibration:
    """Fits the parameters ``names`` to the configurations Q (N+1, nq) sampled every dt (module docstring).

    priors : {name: Prior} (default :func:`default_prior`); noise : σ (nq,) of the sensors (default
    :func:`noise_levels` of Q). Raises CalibrationError when the recording is unusable.
    """
    parameters = params.parameters(names)
    priors = {p.name: (priors or {}).get(p.name) or default_prior(params, p) for p in parameters}
    ee = EquationError(params, Q, dt, parameters)
    if len(ee.nodes) < 10 * len(parameters):
        raise CalibrationError(f"the recording has {len(ee.nodes)} usable nodes (three consecutive samples each) "
                               f"for {len(parameters)} parameters: record at least {10 * len(parameters)}")
    sigma = np.asarray(noise if noise is not None else noise_levels(Q), dtype=float)
    sigma = np.maximum(sigma, 1e-12)
    mean = np.array([priors[p.name].mean for p in parameters])
    s = np.array([priors[p.name].std for p in parameters])
    lower = np.array([POSITIVE_FLOOR if p.linear else -np.inf for p in parameters])
    theta = np.clip(mean if start is None else np.asarray(start, dtype=float), lower, np.inf)

    cache: dict = {}

    def point(th) -> EquationErrorPoint:
        key = th.tobytes()
        if key not in cache:
            cache.clear()
            cache[key] = ee.evaluate(th)
        return cache[key]

    W = None

    def residual(th):
        return np.concatenate([W.apply(point(th).error.ravel()), (th - mean) / s])

    def jacobian(th):
        return np.vstack([W.apply(point(th).jacobian.reshape(-1, len(th))), np.diag(1.0 / s)])

    def gauss_newton(theta):
        """Gauss-Newton, re-weighting at every iterate, halving a step that leaves the physical bounds or does not
        lower the objective; returns (θ, evaluations, converged: stopped on the step tolerance or where no step
        lowers the objective)."""
        nonlocal W
        evaluations = 0
        for _ in range(max_iterations):
            W = _Whitening(point(theta), sigma)
            r = residual(theta)
            step = np.linalg.lstsq(jacobian(theta), -r, rcond=None)[0]
            alpha, before = 1.0, float(r @ r)
            while alpha > 1e-4:
                trial = theta + alpha * step
                if np.all(trial > lower):
                    evaluations += 1
                    if float(np.sum(residual(trial) ** 2)) < before:
                        break
                alpha *= 0.5
            else:
                return theta, evaluations, True
            theta = trial
            if np.max(np.abs(alpha * step) / s) < tolerance:
                return theta, evaluations, True
        return theta, evaluations, False

    theta, iterations, converged = gauss_newton(theta)
    # nodes where the fitted model needs the string to push are not the holonomic model's (a slack string,
    # marionette_control.sim.strings): they are left out and the fit repeated from where it ended
    slack = np.flatnonzero(np.any(point(theta).multipliers[ee.nodes] <= 0.0, axis=1))
    if len(slack):
        ee.nodes = np.delete(ee.nodes, slack)
        cache.clear()
        theta, more, converged = gauss_newton(theta)
        iterations += more
    W = _Whitening(point(theta), sigma)
    pt = point(theta)
    J = jacobian(theta)
    r = residual(theta)
    p = len(theta)
    n_data = len(r) - p
    chi2 = float(np.sum(r[:n_data] ** 2))
    dof = max(n_data - p, 1)
    covariance = np.linalg.inv(J.T @ J) * max(1.0, chi2 / dof)
    lengths = _string_lengths(params, Q)
    tension = 2.0 * lengths[:-1, None] * pt.multipliers / dt if lengths is not None else pt.multipliers
    linear = [q.name for q in parameters if q.linear]
    note = ("the masses, inertias and damping are fixed by the data only up to a common factor (no force is "
            "measured: gravity and the string's tension scale with the masses); that factor is the prior's"
            + (" and the known (weighed) values'" if any(priors[n].known for n in linear) else "")) if linear else ""
    out = _calibration(params, parameters, priors, theta, covariance, J[:n_data] * s, sigma, chi2, dof, tension,
                       iterations, note, len(pt.nodes))
    out.converged = converged
    return out


def _calibration(params, parameters, priors, theta, covariance, data_jacobian, noise, chi2, dof, multipliers,
                 iterations, note, nodes) -> Calibration:
    """The result record: estimates with their standard deviations and identifiability, the data's directions
    (singular vectors of the data's Jacobian in prior units, ``data_jacobian`` (rows, p))."""
    std = np.sqrt(np.diag(covariance))
    _, sv, Vt = np.linalg.svd(data_jacobian, full_matrices=False)
    directions = [(float(v), {q.name: float(c) for q, c in zip(parameters, row) if abs(c) > 0.05})
                  for v, row in zip(sv, Vt)]
    estimates = [ParameterEstimate(q.name, q.unit, params.nominal(q), float(v), float(sd), float(priors[q.name].std),
                                   bool(sd * IDENTIFIABLE_SHRINK <= priors[q.name].std), priors[q.name].known)
                 for q, v, sd in zip(parameters, theta, std)]
    return Calibration(parameters, estimates, np.asarray(theta), covariance, noise, chi2, dof, directions,
                       multipliers, iterations, note, nodes)


def _string_lengths(params: ModelParameters, Q: np.ndarray) -> Optional[np.ndarray]:
    """The first string's length column of Q (N+1,), or None when its length is not a configuration."""
    frames = params.description.model.constraint_frames
    for _, kind, _, _, length in frames:
        if kind == "distance" and isinstance(length, str) and length in params.configs:
            return np.asarray(Q)[:, params.configs.index(length)]
    return None


def window_starts(Q: np.ndarray, W: int, multipliers: Optional[np.ndarray] = None) -> np.ndarray:
    """First nodes of consecutive windows of W steps (samples k − 1 … k + W all measured), skipping windows where
    the equation error's multipliers (N, m) say the string did not pull (a slack string is not the holonomic
    model's, :mod:`marionette_control.sim.strings`)."""
    ok = np.all(np.isfinite(np.asarray(Q, dtype=float)), axis=1)
    starts, k = [], 1
    while k + W < len(ok):
        span = slice(k - 1, k + W + 1)
        pulls = multipliers is None or np.all(np.nan_to_num(multipliers[k:k + W], nan=1.0) > 0)
        if ok[span].all() and pulls:
            starts.append(k)
            k += W + 1
        else:
            k += 1
    return np.array(starts, dtype=int)


def refine_output_error(params: ModelParameters, Q: np.ndarray, dt: float, first: Calibration,
                        priors: Optional[Mapping[str, Prior]] = None, W: int = 30,
                        state_iterations: int = 6) -> Calibration:
    """The output-error refinement of an equation-error fit ``first`` (:mod:`.output_error`): θ fitted to the
    measured dynamic configurations (independent samples: weights 1/σ) under the same prior, each window's initial
    state (q_dyn, p) eliminated (variable projection): for every θ it is the Gauss–Newton solution of its own
    window, and θ's Jacobian is the window's, projected off the span of the state's (Kaufman) — so the covariance
    of θ has the windows' states marginalized."""
    parameters = first.parameters
    priors = {p.name: (priors or {}).get(p.name) or default_prior(params, p) for p in parameters}
    mean = np.array([priors[p.name].mean for p in parameters])
    s = np.array([priors[p.name].std for p in parameters])
    nd = params.description.model.nd
    sigma = np.maximum(first.noise[:nd], 1e-12)
    starts = window_starts(Q, W, first.multipliers)
    if len(starts) == 0:
        raise CalibrationError(f"no window of {W} steps with every sample measured and the string pulling")
    oe = OutputError(params, Q, dt, parameters, starts, W)
    lower = np.array([POSITIVE_FLOOR if p.linear else -np.inf for p in parameters])
    memo = {"states": oe.initial_states(first.theta)}
    cache: dict = {}

    def solved(th):
        """(residual rows (n_w, (W+1) nd), projected θ-Jacobian (n_w, (W+1) nd, p)) at the windows' best states."""
        key = th.tobytes()
        if key in cache:
            return cache[key]
        states = memo["states"].copy()
        for _ in range(state_iterations):
            pt = oe.evaluate(th, states)
            r = (pt.error / sigma).reshape(len(starts), -1)
            Js = (pt.jacobian_state / sigma[None, None, :, None]).reshape(len(starts), r.shape[1], -1)
            step = np.array([np.linalg.lstsq(Js[w], -r[w], rcond=None)[0] for w in range(len(starts))])
            states = states + step
            if np.max(np.abs(step[:, :nd]) / sigma) < 1e-3:
                break
        pt = oe.evaluate(th, states)
        memo["states"] = states
        r = (pt.error / sigma).reshape(len(starts), -1)
        Js = (pt.jacobian_state / sigma[None, None, :, None]).reshape(len(starts), r.shape[1], -1)
        Jt = (pt.jacobian_theta / sigma[None, None, :, None]).reshape(len(starts), r.shape[1], -1)
        proj = np.array([Jt[w] - Js[w] @ np.linalg.lstsq(Js[w], Jt[w], rcond=None)[0] for w in range(len(starts))])
        cache.clear()
        cache[key] = (r, proj)
        return cache[key]

    def residual(th):
        return np.r_[solved(th)[0].ravel(), (th - mean) / s]

    def jacobian(th):
        proj = solved(th)[1]
        return np.vstack([proj.reshape(-1, len(th)), np.diag(1.0 / s)])

    res = least_squares(residual, np.clip(first.theta, lower, np.inf), jac=jacobian, method="trf", x_scale=s,
                        bounds=(lower, np.inf))
    theta = res.x
    J = jacobian(theta)
    r = residual(theta)
    n_data = len(r) - len(theta)
    chi2 = float(np.sum(r[:n_data] ** 2))
    dof = max(n_data - len(theta) - len(starts) * 2 * nd, 1)
    covariance = np.linalg.inv(J.T @ J) * max(1.0, chi2 / dof)
    return _calibration(params, parameters, priors, theta, covariance, J[:n_data] * s, first.noise, chi2, dof,
                        first.multipliers, first.iterations + res.nfev, first.scale_note, first.nodes)
