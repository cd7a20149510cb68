"""Systems, closed forms and reference integrators for test_physics.py.

Everything here is independent of the code under test except the model
descriptions (built with SystemBuilder) and ``_core.forward_dynamics`` (integrated
by scipy's DOP853 in ``study.forcing.continuous_solution``), which test_physics
checks against Tedrake's closed form before relying on it.

Systems
* ``rotor``: a hub on a free rotation ``psi`` about the vertical axis (gravity
  along -z) carrying two off-axis hanging arms (rx joints a1, a2, a further ry
  joint b2), optionally closed into a loop by a distance constraint between
  two of its masses and forced by torques on the shape joints a1 and b2.
  The Lagrangian, the forces and the constraint are invariant under psi ->
  psi + c, so p_psi is a Noether momentum.
* ``carriage``: a body hanging from a string whose top rides on a carriage:
  the carriage position ``cx`` (tx) and the string length ``len`` are
  kinematic; the body (tx ``bx``, tz ``bz``, mass) carries a second mass on an
  ry joint ``phi``; one distance constraint |p_bob - p_carriage|^2 = len^2.
  Prescribed carriage/length motion: ``carriage_rho`` and its derivatives.
* ``two_string_body``: a 3-D rigid body (6 dynamic configurations, rz-ry-rx
  angles) hanging from two strings with kinematic lengths whose tops ride on
  two carriages (4 kinematic configurations, 2 constraints).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from marionette_control import _core
from marionette_control.model import SystemBuilder
from marionette_control.study.forcing import continuous_solution

G = 9.81


# ------------------------------------------------------------------ systems


def rotor(forced: bool = True, length: float | None = None, psi_torque: bool = False) -> _core.Model:
    """The psi-symmetric system; ``length`` closes the loop m1-m3 (None: open tree).

    Configurations [psi, a1, a2, b2]; inputs [u1 (on a1), u2 (on b2)] if forced,
    then [upsi] (a torque on psi, which breaks the symmetry) if ``psi_torque``.
    """
    b = SystemBuilder("rotor", gravity=(0.0, 0.0, -G), forcing="thesis")
    b.frame("hub", "world", "rz", config="psi", mass=2.0, inertia=(0.05, 0.05, 0.1))
    b.frame("s1", "hub", "ty", value=0.3)
    b.frame("l1", "s1", "rx", config="a1")
    b.frame("m1", "l1", "tz", value=-0.7, mass=0.8, inertia=(0.01, 0.02, 0.03))
    b.frame("s2", "hub", "ty", value=-0.3)
    b.frame("l2", "s2", "rx", config="a2")
    b.frame("m2", "l2", "tz", value=-0.6, mass=1.2, inertia=(0.02, 0.01, 0.01))
    b.frame("l3", "m2", "ry", config="b2")
    b.frame("m3", "l3", "tx", value=0.4, mass=0.5)
    if forced:
        b.config_force("a1", input="u1")
        b.config_force("b2", input="u2")
    if psi_torque:
        b.config_force("psi", input="upsi")
    if length is not None:
        b.distance_constraint("m1", "m3", length)
    return b.build()


ROTOR_Q0 = np.array([0.0, 0.5, -0.4, 0.3])


def closed_rotor(forced: bool = True, psi_torque: bool = False) -> _core.Model:
    """``rotor`` closed by the m1-m3 distance at ROTOR_Q0 (so ROTOR_Q0 is consistent)."""
    open_tree = rotor(forced=False)
    P = open_tree.placements(ROTOR_Q0)
    names = open_tree.frame_names
    d = np.linalg.norm(P[names.index("m1"), :3, 3] - P[names.index("m3"), :3, 3])
    return rotor(forced=forced, length=float(d), psi_torque=psi_torque)


def tangent_velocity(model: _core.Model, q, v) -> np.ndarray:
    """v projected onto the null space of Dh(q) (all configurations dynamic)."""
    _, Dh = model.constraints(np.asarray(q, float))
    if Dh.shape[0] == 0:
        return np.asarray(v, float)
    return v - Dh.T @ np.linalg.solve(Dh @ Dh.T, Dh @ v)


def carriage() -> _core.Model:
    """Configurations [bx, bz, phi | cx, len] (dynamic | kinematic), one constraint, no inputs."""
    b = SystemBuilder("carriage_pendulum", gravity=(0.0, 0.0, -G), forcing="thesis")
    b.frame("carriage", "world", "tx", config="cx", kinematic=True)
    b.frame("bx", "world", "tx", config="bx")
    b.frame("bob", "bx", "tz", config="bz", mass=1.0, inertia=(0.01, 0.01, 0.01))
    b.frame("arm", "bob", "ry", config="phi")
    b.frame("tip", "arm", "tz", value=-0.5, mass=0.5)
    b.config("len", kinematic=True)
    b.distance_constraint("carriage", "bob", "len")
    return b.build()


def carriage_rho(t: float, amplitude: float = 1.0) -> np.ndarray:
    """Prescribed [cx, len] at time t (smooth; cx(0) = 0, len(0) = 1)."""
    a = amplitude
    return np.array([0.3 * a * np.sin(1.5 * t), 1.0 + 0.2 * a * np.sin(2.0 * t)])


def carriage_rhod(t: float, amplitude: float = 1.0) -> np.ndarray:
    a = amplitude
    return np.array([0.45 * a * np.cos(1.5 * t), 0.4 * a * np.cos(2.0 * t)])


def carriage_rhodd(t: float, amplitude: float = 1.0) -> np.ndarray:
    a = amplitude
    return np.array([-0.675 * a * np.sin(1.5 * t), -0.8 * a * np.sin(2.0 * t)])


def carriage_start(model: _core.Model) -> tuple[np.ndarray, np.ndarray]:
    """Consistent (q0, qdot0) at t = 0: h(q0) = 0 and Dh(q0) qdot0 = 0 (with the prescribed rhodot)."""
    nd = model.nd
    q0 = np.concatenate([[0.3, -np.sqrt(1.0 - 0.3**2), 0.4], carriage_rho(0.0)])
    _, Dh = model.constraints(q0)
    vd = np.array([0.5, 0.0, -1.0])
    # Solve the velocity constraint for bz's rate.
    rest = Dh[0, :nd] @ vd + Dh[0, nd:] @ carriage_rhod(0.0)
    vd[1] = -rest / Dh[0, 1]
    return q0, np.concatenate([vd, carriage_rhod(0.0)])


def two_string_body() -> tuple[_core.Model, np.ndarray, Callable]:
    """3-D body on two strings; returns (model, consistent q0, rho(t))."""
    b = SystemBuilder("two_string_body", gravity=(0.0, 0.0, -G), forcing="thesis")
    b.frame("fx", "world", "tx", config="x")
    b.frame("fy", "fx", "ty", config="y")
    b.frame("fz", "fy", "tz", config="z")
    b.frame("yaw", "fz", "rz", config="c")
    b.frame("pitch", "yaw", "ry", config="b")
    b.frame("body", "pitch", "rx", config="a", mass=1.0, inertia=(0.02, 0.05, 0.06))
    b.frame("att1", "body", "tx", value=0.3)
    b.frame("att2", "body", "tx", value=-0.3)
    b.frame("top1", "world", "tx", config="cx1", kinematic=True)
    b.frame("c2", "world", "tx", config="cx2", kinematic=True)
    b.frame("top2", "c2", "ty", value=0.2)
    b.config("len1", kinematic=True)
    b.config("len2", kinematic=True)
    b.distance_constraint("top1", "att1", "len1")
    b.distance_constraint("top2", "att2", "len2")
    model = b.build()
    L0 = float(np.sqrt(0.1**2 + 1.0))  # both strings at the start

    def rho(t):
        return np.array([0.3 + 0.2 * np.sin(2.0 * t), -0.3 + 0.25 * np.sin(2.5 * t),
                         L0 + 0.15 * np.sin(3.0 * t), L0 - 0.1 * np.sin(2.0 * t)])

    q0 = np.concatenate([[0.0, 0.1, -1.0, 0.0, 0.0, 0.0], rho(0.0)])
    return model, q0, rho


# ------------------------------------------------------------------ closed forms (Tedrake, seed 003)


def tedrake_mass_matrix(q, m1, m2, l1, l2):
    """M(q) of the point-mass double pendulum, theta2 relative; q (..., 2) -> (..., 2, 2)."""
    c2 = np.cos(np.asarray(q)[..., 1])
    M = np.empty(np.shape(c2) + (2, 2))
    M[..., 0, 0] = (m1 + m2) * l1**2 + m2 * l2**2 + 2 * m2 * l1 * l2 * c2
    M[..., 0, 1] = M[..., 1, 0] = m2 * l2**2 + m2 * l1 * l2 * c2
    M[..., 1, 1] = m2 * l2**2
    return M


def tedrake_coriolis(q, qd, m1, m2, l1, l2):
    """Tedrake's C(q, qdot) (one valid choice; only C qdot matters)."""
    s2 = np.sin(q[1])
    k = m2 * l1 * l2 * s2
    return np.array([[0.0, -k * (2 * qd[0] + qd[1])],
                     [0.5 * k * (2 * qd[0] + qd[1]), -0.5 * k * qd[0]]])


def tedrake_gravity(q, m1, m2, l1, l2, g):
    """tau_g(q) = -dU/dq."""
    s1, s12 = np.sin(q[0]), np.sin(q[0] + q[1])
    return -g * np.array([(m1 + m2) * l1 * s1 + m2 * l2 * s12, m2 * l2 * s12])


def tedrake_potential(q, m1, m2, l1, l2, g):
    """U(q), q (..., 2)."""
    q = np.asarray(q)
    return -(m1 + m2) * g * l1 * np.cos(q[..., 0]) - m2 * g * l2 * np.cos(q[..., 0] + q[..., 1])


def double_pendulum_hamiltonian(X, m1, m2, l1, l2, g):
    """H(q, p) = 1/2 p^T M(q)^{-1} p + U(q) for state rows X[:, :4] = [q1, q2, p1, p2].

    This is the energy at the integrator's phase-space point through the
    continuous Legendre transform v = M(q)^{-1} p (vectorised over rows).
    """
    q, p = X[:, :2], X[:, 2:4]
    M = tedrake_mass_matrix(q, m1, m2, l1, l2)
    v = np.linalg.solve(M, p[..., None])[..., 0]
    return 0.5 * np.einsum("ki,ki->k", p, v) + tedrake_potential(q, m1, m2, l1, l2, g)


# ------------------------------------------------------------------ helpers


def loglog_slope(dts, errors) -> float:
    """Least-squares slope of log(error) against log(dt)."""
    return float(np.polyfit(np.log(dts), np.log(errors), 1)[0])


def continuous_momentum(model: _core.Model, q, qdot) -> np.ndarray:
    """Dynamic rows of dL/dqdot (the continuous Legendre transform)."""
    return np.asarray(model.lagrangian(np.asarray(q, float), np.asarray(qdot, float), 1)["Lv"])[: model.nd]


def integrate_continuous(model: _core.Model, q0, qdot0, T: float, u_of_t=None, rho_fns=None):
    """(q_d(T), qdot_d(T)) of the continuous constrained dynamics by DOP853 (rtol = atol = 1e-12), the dynamic
    configurations the state, the kinematic ones following ``rho_fns = (rho, rhod, rhodd)``
    (``study.forcing.continuous_solution``)."""
    return continuous_solution(model, q0, qdot0, T, u_of_t, rho_fns, tolerance=1e-12)
