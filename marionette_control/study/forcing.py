r"""The forcing discretizations of the midpoint VI against a continuous-time reference.

This module serves the "Forcing" section of ``docs/integrator_study.md`` (numbers printed by
``docs/forcing_study.py``) and ``test/test_forcing.py``; the core does not use it.

The forces :math:`F(q, \dot q, u)` (damping, force inputs, body wrenches; thesis (3.19)) act over a step as
the impulse :math:`\Delta t\,F(\bar q, \dot q, u_k)` at the midpoint of the midpoint discrete Lagrangian
(thesis (4.8)); a model's forcing rule (``Model.forcing``, ``builder.FORCING_RULES``) splits it between the
step's ends, :math:`f^- = w^-\Delta t F`, :math:`f^+ = w^+\Delta t F` (thesis (4.12)):

* ``thesis``: :math:`w^- = 1, w^+ = 0` (thesis (4.12a)). The configurations are first order in
  :math:`\Delta t` as soon as :math:`F` depends on the velocity (damping) or is taken at the midpoint.
* ``symmetric``: :math:`w^- = w^+ = \tfrac12`, the midpoint rule on the virtual work; for
  :math:`L = \tfrac12 \dot q^T M \dot q - V` with constant :math:`M` the step is the implicit midpoint rule,
  second order.

Cases (``forced_cases``), each with a force that depends on the velocity and, but for the arm, one that varies
in time; T = 2 s:

* ``pendulum``: seed 001's pendulum (``library.get('pendulum')``) with damping 0.3 N m s and the torque
  :math:`u(t) = 0.7 \sin 2t`, from :math:`(\theta, \dot\theta) = (1, 0.5)`;
* ``double_pendulum``: damping 0.05 on both joints and torques :math:`(1.5 \sin 2t, -0.8 \cos 3t)`, from
  :math:`q = (1.2, -0.8)`, :math:`\dot q = (0.5, 1)`;
* ``double_pendulum_heavy``: damping 0.5, no torques, same start;
* ``marionette_arm``: the arm with its joint damping (shoulder 0.02, elbow 0.01 N m s/rad), the carriage and
  the string length prescribed by sinusoids about a pose on the string, started with a velocity tangent to
  it.

Reference: scipy's DOP853 (rtol = atol = 1e-12) on the core's continuous dynamics
(``_core.forward_dynamics``, thesis (A.1)-(A.3): the dynamic configurations are the state, the kinematic
ones follow their prescribed functions). The VI starts from :math:`p_0 = \partial L/\partial \dot q` of the
same start, takes :math:`u_k = u(t_k + \Delta t/2)` (the force at the step's midpoint, where the forcing
evaluates it) and :math:`\rho_{k+1} = \rho(t_{k+1})`, Newton tolerance 1e-11 (1e-12 stalls on rounding of
the momenta); the error is
:math:`\max_i |q_i(T) - q_{\mathrm{ref},i}(T)|` over the dynamic configurations.

Shapes: configurations ``q`` (nq,), dynamic parts (nd,), force inputs (nu,), kinematic (nk,).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
from scipy.integrate import solve_ivp

from marionette_control import _core
from marionette_control.model import FORCING_RULES, library
from marionette_control.model.library import marionette_arm as arm
from marionette_control.study.integrators import observed_order

T_FINAL = 2.0
#: Time steps of the convergence study (each divides T_FINAL).
DTS = np.array([2e-3, 1e-3, 5e-4, 2.5e-4])

Signal = Callable[[float], np.ndarray]


def continuous_solution(model: _core.Model, q0, qdot0, T: float, u_of_t: Optional[Signal] = None,
                        rho_fns: Optional[tuple[Signal, Signal, Signal]] = None, tolerance: float = 1e-12):
    """(q_d(T), qdot_d(T)) (nd,) of the continuous constrained dynamics by DOP853 (rtol = atol = ``tolerance``).

    q0, qdot0 : (nq,) or (nd,) start (the dynamic parts are used); u_of_t(t) : force inputs (nu,) (None: zero);
    rho_fns : (rho, rhod, rhodd) of t, each (nk,), the prescribed kinematic configurations (required when
    nk > 0).
    """
    nd, nk, nu = model.nd, model.nk, model.nu
    if nk and rho_fns is None:
        raise ValueError(f"model '{model.name}' has {nk} kinematic configurations: give rho_fns")
    zero_u, zero_k = np.zeros(nu), np.zeros(nk)

    def rhs(t, y):
        if nk:
            rho, rhod, rhodd = (f(t) for f in rho_fns)
            q, v, a = np.concatenate([y[:nd], rho]), np.concatenate([y[nd:], rhod]), rhodd
        else:
            q, v, a = y[:nd], y[nd:], zero_k
        u = zero_u if u_of_t is None else u_of_t(t)
        qdd, _ = _core.forward_dynamics(model, q, v, u, a)
        return np.concatenate([y[nd:], qdd[:nd]])

    y0 = np.concatenate([np.asarray(q0, float)[:nd], np.asarray(qdot0, float)[:nd]])
    sol = solve_ivp(rhs, (0.0, T), y0, method="DOP853", rtol=tolerance, atol=tolerance)
    if not sol.success:
        raise RuntimeError(f"continuous integration of '{model.name}' failed: {sol.message}")
    return sol.y[:nd, -1], sol.y[nd:, -1]


@dataclass(frozen=True)
class ForcedCase:
    """A model (by registry name and parameters), a consistent start and the signals that drive it.

    q0, qdot0 (nq,): h(q0) = 0 and Dh(q0) qdot0 = 0; u_of_t(t) (nu,); rho_fns (rho, rhod, rhodd) or None.
    """

    name: str
    registry: str
    params: dict
    q0: np.ndarray
    qdot0: np.ndarray
    u_of_t: Optional[Signal] = None
    rho_fns: Optional[tuple[Signal, Signal, Signal]] = None

    def model(self, forcing: str = FORCING_RULES[0]) -> _core.Model:
        return library.get(self.registry, forcing=forcing, **self.params)

    def reference(self, T: float = T_FINAL, tolerance: float = 1e-12) -> np.ndarray:
        """q_d(T) (nd,) of the continuous dynamics (``continuous_solution``)."""
        return continuous_solution(self.model(), self.q0, self.qdot0, T, self.u_of_t, self.rho_fns, tolerance)[0]

    def inputs(self, model: _core.Model, dt: float, steps: int) -> np.ndarray:
        """U (steps, nU): u_k = u(t_k + dt/2), rho_{k+1} = rho(t_{k+1})."""
        U = np.zeros((steps, model.nU))
        for k in range(steps):
            if model.nu:
                U[k, :model.nu] = self.u_of_t((k + 0.5) * dt)
            if model.nk:
                U[k, model.nu:] = self.rho_fns[0]((k + 1) * dt)
        return U

    def vi_final(self, forcing: str, dt: float, T: float = T_FINAL, tolerance: float = 1e-11) -> np.ndarray:
        """q_d(T) (nd,) of the midpoint VI with ``forcing`` from x_0 = [q0; dL/dqdot(q0, qdot0); rhod(0)]."""
        model = self.model(forcing)
        steps = int(round(T / dt))
        if abs(steps * dt - T) > 1e-9 * T:
            raise ValueError(f"dt = {dt} does not divide T = {T}")
        p0 = np.asarray(model.lagrangian(self.q0, self.qdot0, 1)["Lv"])[:model.nd]
        x0 = np.concatenate([self.q0, p0, self.qdot0[model.nd:]])
        X, _ = _core.DiscreteSystem(model, dt, tolerance, 50).simulate(x0, self.inputs(model, dt, steps))
        return X[-1, :model.nd]


def _arm_case() -> ForcedCase:
    model = library.get("marionette_arm")
    # shoulder 0.6, elbow 0.9 rad, carriage 0.4 m; the string length closes the chain
    q0 = arm.consistent_configuration(model, 0.6, 0.9, 0.4)
    c0, l0 = q0[model.nd:]

    def rho(t):
        return np.array([c0 + 0.08 * np.sin(2.0 * t), l0 + 0.05 * np.sin(3.0 * t)])

    def rhod(t):
        return np.array([0.16 * np.cos(2.0 * t), 0.15 * np.cos(3.0 * t)])

    def rhodd(t):
        return np.array([-0.32 * np.sin(2.0 * t), -0.45 * np.sin(3.0 * t)])

    # (0.3, -0.5) rad/s made tangent to the string: the least change of the joint rates with Dh qdot = 0
    _, Dh = model.constraints(q0)
    Dd, Dk = Dh[:, :model.nd], Dh[:, model.nd:]
    v = np.array([0.3, -0.5])
    v = v - Dd.T @ np.linalg.solve(Dd @ Dd.T, Dd @ v + Dk @ rhod(0.0))
    return ForcedCase("marionette_arm", "marionette_arm", {}, q0, np.concatenate([v, rhod(0.0)]),
                      rho_fns=(rho, rhod, rhodd))


def forced_cases() -> dict[str, ForcedCase]:
    """The cases of the study by name (module docstring)."""
    dp_q0, dp_v0 = np.array([1.2, -0.8]), np.array([0.5, 1.0])
    return {
        "pendulum": ForcedCase("pendulum", "pendulum", {"damping": 0.3}, np.array([1.0]), np.array([0.5]),
                               u_of_t=lambda t: np.array([0.7 * np.sin(2.0 * t)])),
        "double_pendulum": ForcedCase(
            "double_pendulum", "double_pendulum", {"damping": 0.05}, dp_q0, dp_v0,
            u_of_t=lambda t: np.array([1.5 * np.sin(2.0 * t), -0.8 * np.cos(3.0 * t)])),
        "double_pendulum_heavy": ForcedCase("double_pendulum_heavy", "double_pendulum",
                                            {"damping": 0.5, "torques": False}, dp_q0, dp_v0),
        "marionette_arm": _arm_case(),
    }


def convergence(case: ForcedCase, dts=DTS, T: float = T_FINAL, rules=FORCING_RULES) -> dict:
    """{rule: {"errors": max |q_d(T) - q_ref(T)| per dt (len(dts),), "order": log-log slope}}."""
    q_ref = case.reference(T)
    out = {}
    for rule in rules:
        errors = np.array([np.abs(case.vi_final(rule, dt, T) - q_ref).max() for dt in dts])
        out[rule] = {"errors": errors, "order": observed_order(dts, errors)}
    return out


__all__ = ["ForcedCase", "forced_cases", "continuous_solution", "convergence", "DTS", "T_FINAL"]
