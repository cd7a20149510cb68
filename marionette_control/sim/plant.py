"""The simulated plant: the model the stand-in integrates, and where it rests.

``plant_model_file`` (a :class:`~marionette_control.sim.profile.HardwareProfile` field) names a model file
(``docs/models.md``) with the same configurations, joint names and actuators as the nominal model the
optimizer and controller use, but physical parameters of its own: ``config/marionette_arm_plant.yaml`` is
the nominal arm with the errors a careful CAD model has (masses, inertias, centres of mass, hook position,
joint damping). The controller never sees it. An empty name is the nominal model itself.
:func:`load_plant` loads and checks it against the nominal model.

:func:`rest_configuration` is the plant's static equilibrium with the drives held: where the arm comes to
rest when the drives start at a pose of the nominal model.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize, root

from marionette_control import _core
from marionette_control.model.yaml_model import ModelDescription, load_packaged_model
from marionette_control.sim.profile import HardwareProfile


def load_plant(profile: HardwareProfile, nominal: ModelDescription) -> ModelDescription:
    """The plant description of ``profile``, checked against ``nominal`` (same configurations, joint names,
    kinematic flags, constraints and actuators); the nominal description when ``plant_model_file`` is empty.
    A relative ``plant_model_file`` is looked up in ``config/`` (:func:`marionette_control.resources.config_file`)."""
    if not profile.plant_model_file:
        return nominal
    try:
        plant = load_packaged_model(profile.plant_model_file)
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot load the plant model: {e}") from None
    pm, nm = plant.model, nominal.model
    for what, a, b in (("configurations", pm.config_names, nm.config_names),
                       ("kinematic flags", list(pm.kinematic), list(nm.kinematic)),
                       ("constraints", pm.constraint_names, nm.constraint_names),
                       ("hardware joint names", plant.hardware_joints, nominal.hardware_joints),
                       ("actuators", plant.actuators, nominal.actuators)):
        if a != b:
            raise ValueError(f"the plant model {plant.path}: its {what} {a} differ from the nominal model "
                             f"{nominal.path}'s {b}; the plant must be the same machine with other numbers")
    return plant


def rest_configuration(model: _core.Model, q: np.ndarray, tolerance: float = 1e-11) -> np.ndarray:
    """The configuration (nq,) at which ``model`` rests with the kinematic configurations of ``q``.

    A static equilibrium: ∂V/∂q_d = Dh_dᵀ μ and h(q) = 0 (V = ``model.energy(q, 0)``, d the dynamic
    configurations), the stable one near ``q``. It is found as the minimum of V on the constraint set
    (SLSQP with the core's exact gradients), then the equations are solved to round-off (MINPACK's
    hybrid method, started with the Jacobian [[∂²V/∂q_d², −Dh_dᵀ], [Dh_d, 0]] that omits the string's
    curvature μ·∂²h and corrected by its rank-one updates). ``q`` is returned unchanged when it already
    is a rest configuration (relative residual below ``tolerance``), so a model's own rest poses stay
    bit for bit. Raises ValueError when none is found within the tolerance.
    """
    q = np.array(q, dtype=float)
    nd, nc, nq = model.nd, model.nc, model.nq
    zero = np.zeros(nq)
    if _rest_residual(model, q) <= tolerance:
        return q

    def full(qd):
        return np.concatenate([qd, q[nd:]])

    def gradient(qd):   # ∂V/∂q_d = −∂L/∂q_d at rest
        return -np.asarray(model.lagrangian(full(qd), zero, 1)["Lq"])[:nd]

    constraints = []
    if nc:
        constraints = [{"type": "eq", "fun": lambda qd: np.asarray(model.constraints(full(qd))[0]),
                        "jac": lambda qd: np.asarray(model.constraints(full(qd))[1])[:, :nd]}]

    def failed(why: str) -> ValueError:
        return ValueError(f"no rest configuration of '{model.name}' found near {np.round(q, 6).tolist()} with the "
                          f"kinematic configurations held ({why})")

    try:
        res = minimize(lambda qd: model.energy(full(qd), zero), q[:nd], jac=gradient, constraints=constraints,
                       method="SLSQP", options={"ftol": 1e-14, "maxiter": 500})
    except ValueError as e:   # the core refuses a non-finite iterate
        raise failed(str(e)) from None
    qd = res.x

    def kkt(z):
        qz = full(z[:nd])
        g = -np.asarray(model.lagrangian(qz, zero, 1)["Lq"])[:nd]
        if not nc:
            return g
        h, dh = (np.asarray(a) for a in model.constraints(qz))
        return np.concatenate([g - dh[:, :nd].T @ z[nd:], h])

    def kkt_jacobian(z):
        qz = full(z[:nd])
        vqq = -np.asarray(model.lagrangian(qz, zero, 2)["Lqq"])[:nd, :nd]
        if not nc:
            return vqq
        jd = np.asarray(model.constraints(qz)[1])[:, :nd]
        return np.block([[vqq, -jd.T], [jd, np.zeros((nc, nc))]])

    z0 = qd
    if nc:
        jd = np.asarray(model.constraints(full(qd))[1])[:, :nd]
        z0 = np.concatenate([qd, np.linalg.lstsq(jd.T, gradient(qd), rcond=None)[0]])
    try:
        sol = root(kkt, z0, jac=kkt_jacobian, method="hybr", options={"xtol": 1e-15})
        rest = full(sol.x[:nd])
        residual = _rest_residual(model, rest)
    except ValueError as e:
        raise failed(str(e)) from None
    if not residual <= tolerance:
        raise failed(f"residual {residual:.2g}; {res.message}; {sol.message}")
    return rest


def _rest_residual(model: _core.Model, q: np.ndarray) -> float:
    """Residual of ∂V/∂q_d = Dh_dᵀ μ (least-squares μ) relative to |∂V/∂q_d|, and |h(q)|."""
    nd = model.nd
    g = -np.asarray(model.lagrangian(q, np.zeros(model.nq), 1)["Lq"])[:nd]
    if not model.nc:
        return float(np.linalg.norm(g))
    scale = max(float(np.linalg.norm(g)), 1e-300)
    h, dh = (np.asarray(a) for a in model.constraints(q))
    jd = dh[:, :nd]
    mu = np.linalg.lstsq(jd.T, g, rcond=None)[0]
    return max(float(np.linalg.norm(g - jd.T @ mu)) / scale, float(np.max(np.abs(h))))
