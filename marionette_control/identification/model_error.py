r"""The model error a calibration leaves, as the Kalman filter's process noise: what the fit's standard errors say
about how far the calibrated model's step can be from the arm's.

The tracking controller's Kalman filter (:mod:`marionette_control.tracking.estimation`) adds a process noise Σ_p per
step to each dynamic momentum for the model's errors; its default (``estimator_noise.momentum`` 1e-3 N·m·s) is sized
for the nominal file's. After a calibration the parameters θ are known to their covariance Cov(θ) (:mod:`.fit`), and
the equation error's exact parameter Jacobian (:mod:`.equation_error`, thesis (4.36)) carries that to the one-step
prediction: at node k of the recording the configuration error of a step has the covariance

    Σ_ε,k = J_k Cov(θ) J_kᵀ                     (nd × nd; J_k = ∂ε_k/∂θ, rad or m)

and a momentum error δp at the start of a step moves the next configuration by Δt M⁻¹ δp (the midpoint step's
p_k ≈ M (q_{k+1} − q_k)/Δt, thesis (4.8)), so the momentum error per step is

    Σ_p,k = M_k Σ_ε,k M_k / Δt²                 (M_k: the dynamic block of the calibrated model's mass matrix at q_k)

:func:`momentum_noise` is its RMS over the recording's nodes, per dynamic configuration (N·m·s). It is first
order, as the filter is: a parameter the motion does not excite at first order — the hook's and the rail's
position out of the arm's plane, reported not identifiable and held at its prior — adds nothing here, though a
draw from its prior (5 mm) would move the step at second order (through the string's length) by more than the
identified parameters' errors do. It treats a fixed parameter error as white noise from step to step, as the
filter's Σ_p does; it is the uncertainty the data leaves, not an unmodelled effect the fit could not see (a χ²/dof
well above 1 says there is one; :func:`momentum_noise` then scales the covariance by it).
"""

from __future__ import annotations

import numpy as np

from marionette_control import _core
from marionette_control.identification.equation_error import EquationError
from marionette_control.identification.fit import Calibration
from marionette_control.identification.parameters import ModelParameters


def momentum_noise(params: ModelParameters, calibration: Calibration, Q: np.ndarray, dt: float) -> np.ndarray:
    """σ_p (nd,) [N·m·s per step]: the calibrated model's momentum error per step over the recording ``Q``
    ((N+1, nq), the configurations the calibration was fitted to, NaN rows missing) sampled every ``dt`` s (module
    docstring); ``params`` is the model file the calibration started from."""
    error = EquationError(params, Q, dt, calibration.parameters)
    point = error.evaluate(calibration.theta)
    covariance = calibration.covariance * max(1.0, calibration.chi2 / calibration.dof)
    J = point.jacobian                                                        # (K, nd, p)
    S = np.einsum("kip,pq,kjq->kij", J, covariance, J)                        # (K, nd, nd)
    model = params.model(dict(zip(calibration.parameters, calibration.theta)))
    nd = model.nd
    variance = np.zeros(nd)
    for k, Sk in zip(point.nodes, S):
        M = _core.mass_matrix(model, error.Q[k])[:nd, :nd]   # the recording's order is the model's
        variance += np.diag(M @ Sk @ M.T)
    return np.sqrt(variance / (len(point.nodes) * dt ** 2))
