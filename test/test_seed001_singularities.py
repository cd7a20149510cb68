"""Seed 001 §VII reproduced: where the midpoint VI's one-step map and its linearization do not exist.

A. The spherical pendulum in the paper's chart q = (phi, theta): theta the polar angle from the
   downward vertical (gravity's direction), phi the azimuth, L = 1/2 m r^2 (thetadot^2 +
   sin^2 theta phidot^2) + m g r cos theta (seed 001 §VII-A). Built as rz(phi) -> ry(theta) -> a point
   mass at -r along z, so the core's M_{k+1} = D2 D1 L_d (8) is the paper's matrix. Its determinant
   is (34):

       det M_{k+1} = m^2 r^3 / (4 dt^2) sin^2(thetabar) [dt^2 g cos(thetabar)
                     + r (2 + cos(theta_k + theta_{k+1})) (phi_k - phi_{k+1})^2 + 4 r],  thetabar = mean theta,

   zero where theta_k + theta_{k+1} = n pi (the chart's singularity, any dt) and where the bracket
   vanishes, which needs dt >= sqrt(4 r / g) (the paper's bound). The bracket's phi term is >= 0
   (2 + cos >= 1), so below the bound the bracket is >= 4 r - g dt^2 > 0 for every phi step: the
   bound alone rules the bracket out (the paper's extra bound lambda* on |phi_k - phi_{k+1}| is not
   needed below it).
B. The Cartesian constrained pendulum: q = (x, y), no gravity, h = x^2 + y^2 - l^2 (seed 001
   §VII-B). M_{k+1} = -m/dt I is regular, Dh(q_{k+1}) M^-1 Dh(q_k)^T = -(4 dt/m)(x_{k+1} x_k +
   y_{k+1} y_k) vanishes when the pendulum turns a quarter turn in one step. (The paper prints
   -m/dt^2 I and 4 dt^2/m: its §VII-B L_d omits the factor dt of (3a), which (34) keeps;
   docs/thesis_corrections.md. The singular set is the same.)

M_{k+1} and the constraint Jacobians come from the core's DEL Jacobian (DiscreteSystem.del_residual,
columns q_{k+1} and lambda_k), so the closed forms are compared with the core's own matrices; the
core's diagnosis is the StepError reason (``singular_mass_matrix``, ``singular_constraint_matrix``,
midpoint_vi.cpp's check of the Newton matrix, seed 001 §VII). Guidance in docs/reproductions.md §9.
"""

from __future__ import annotations

import numpy as np
import pytest

from marionette_control import _core
from marionette_control.model import SystemBuilder

# Not unit values, so every factor of (34) is exercised.
MASS, RADIUS, GRAVITY = 0.7, 1.3, 9.8
DT_BOUND = np.sqrt(4.0 * RADIUS / GRAVITY)  # seed 001 §VII-A: the bracket can vanish only for dt >= this


def spherical_pendulum() -> _core.Model:
    """Seed 001 §VII-A's chart: phi (azimuth about the vertical), theta (polar angle from straight down)."""
    b = SystemBuilder("spherical_pendulum", gravity=(0.0, 0.0, -GRAVITY))
    b.frame("azimuth", "world", "rz", config="phi")
    b.frame("polar", "azimuth", "ry", config="theta")
    b.frame("bob", "polar", "tz", value=-RADIUS, mass=MASS)
    return b.build()


def gimbal_pendulum() -> _core.Model:
    """The same pendulum in a chart whose singular set is the horizontal (rx then ry, both about horizontal
    axes): the chart of choice for motion about the bottom."""
    b = SystemBuilder("gimbal_pendulum", gravity=(0.0, 0.0, -GRAVITY))
    b.frame("roll", "world", "rx", config="alpha")
    b.frame("pitch", "roll", "ry", config="beta")
    b.frame("bob", "pitch", "tz", value=-RADIUS, mass=MASS)
    return b.build()


def det_34(q0: np.ndarray, q1: np.ndarray, dt: float) -> float:
    """Seed 001 (34) for q = (phi, theta)."""
    (phi0, th0), (phi1, th1) = q0, q1
    tb = 0.5 * (th0 + th1)
    bracket = dt**2 * GRAVITY * np.cos(tb) + RADIUS * (2.0 + np.cos(th0 + th1)) * (phi0 - phi1) ** 2 + 4 * RADIUS
    return MASS**2 * RADIUS**3 / (4 * dt**2) * np.sin(tb) ** 2 * bracket


def interval(system: _core.DiscreteSystem, q0: np.ndarray, q1: np.ndarray):
    """(p0, p1, M_{k+1}, Dh(q1), Dh(q0)) of the interval [q0, q1] from the core's DEL Jacobian: p0 = -D1 L_d - the
    momentum that makes q1 the DEL solution with lambda = 0, p1 = D2 L_d, M_{k+1} = D2 D1 L_d."""
    model = system.model
    n, nd, m = model.nq, model.nd, len(model.constraint_names)
    R, P, J, _ = system.del_residual(np.zeros(nd), np.array([q0, q1]), np.zeros((1, model.nu)), np.zeros((1, m)),
                                     jacobian=True)
    M = J[0, :nd, 2 * n:3 * n]
    return -R[0, :nd], P[0], M, J[0, nd:, 2 * n:3 * n], -J[0, :nd, 3 * n + model.nu:].T


def linearize_interval(system: _core.DiscreteSystem, q0, q1):
    """The core's linearization of the step from x_k = (q0, p0) whose DEL solution is q1 (Newton starts there)."""
    p0, p1, *_ = interval(system, q0, q1)
    X = np.array([np.concatenate([q0, p0]), np.concatenate([q1, p1])])
    return system.linearize_trajectory(X, np.zeros((1, system.model.nu + system.model.nk)))


# ------------------------------------------------------------------------ A. spherical pendulum, M_{k+1}


@pytest.fixture(scope="module")
def sphere():
    return spherical_pendulum()


@pytest.mark.parametrize("dt", [0.01, 0.1, 2.0 * DT_BOUND])
def test_core_mass_matrix_determinant_is_34(sphere, dt):
    system = _core.DiscreteSystem(sphere, dt)
    rng = np.random.default_rng(7)
    scale = (MASS * RADIUS**2 / dt) ** 2
    for _ in range(20):
        q0 = rng.uniform(-np.pi, np.pi, 2)
        q1 = q0 + rng.uniform(-0.5, 0.5, 2)
        _, _, M, _, _ = interval(system, q0, q1)
        assert abs(np.linalg.det(M) - det_34(q0, q1, dt)) <= 1e-12 * scale * (1 + (q0[0] - q1[0]) ** 2)


@pytest.mark.parametrize("theta_k", [0.0, 0.4])
def test_configurations_symmetric_about_the_pole_make_m_singular(sphere, theta_k):
    """theta_k + theta_{k+1} = 0: (34)'s sin^2 factor vanishes for every dt and every phi step. The one-step map is
    not a function there (every phi_{k+1} solves the DEL equations), and the core says so."""
    dt = 0.05
    system = _core.DiscreteSystem(sphere, dt)
    q0, q1 = np.array([0.3, theta_k]), np.array([0.3, -theta_k])
    p0, _, M, _, _ = interval(system, q0, q1)
    assert det_34(q0, q1, dt) == 0.0 and np.linalg.matrix_rank(M) == 1
    for phi1 in (-1.0, 0.3, 2.0):  # the same (q_k, p_k) reaches all of them
        R, _ = system.del_residual(p0, np.array([q0, [phi1, -theta_k]]), np.zeros((1, 0)), np.zeros((1, 0)))
        assert np.abs(R).max() <= 1e-13
    with pytest.raises(_core.StepError, match=r"M_\{k\+1\} = D2D1Ld \+ D2f- is singular") as info:
        linearize_interval(system, q0, q1)
    assert info.value.reason == "singular_mass_matrix"


def test_the_bracket_of_34_vanishes_only_above_the_dt_bound(sphere):
    """At dt = 1.2 sqrt(4r/g) the core's det M_{k+1} (pure pendular motion, phi_k = phi_{k+1}) changes sign at
    thetabar = arccos(-4r/(g dt^2)), where the core diagnoses a singular M_{k+1}; at dt = 0.99 sqrt(4r/g) it keeps
    the sign of sin^2(thetabar) for every thetabar and every phi step, bounded below by (4r - g dt^2) times the
    prefactor."""
    def core_bracket(system, tb, dphi, dt, half=0.05):
        q0, q1 = np.array([0.0, tb + half]), np.array([dphi, tb - half])
        _, _, M, _, _ = interval(system, q0, q1)
        return np.linalg.det(M) / (MASS**2 * RADIUS**3 / (4 * dt**2) * np.sin(tb) ** 2)

    dt = 1.2 * DT_BOUND
    above = _core.DiscreteSystem(sphere, dt)
    root = np.arccos(-4 * RADIUS / (GRAVITY * dt**2))
    lo, hi = 0.5 * np.pi, np.pi - 1e-3
    assert core_bracket(above, lo, 0.0, dt) > 0 > core_bracket(above, hi, 0.0, dt)
    for _ in range(60):  # bisection on the core's determinant
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if core_bracket(above, mid, 0.0, dt) > 0 else (lo, mid)
    assert abs(lo - root) <= 1e-9
    with pytest.raises(_core.StepError) as info:
        linearize_interval(above, np.array([0.0, root + 0.05]), np.array([0.0, root - 0.05]))
    assert info.value.reason == "singular_mass_matrix"

    dt = 0.99 * DT_BOUND
    below = _core.DiscreteSystem(sphere, dt)
    floor = 4 * RADIUS - GRAVITY * dt**2
    rng = np.random.default_rng(3)
    worst = min(core_bracket(below, tb, dphi, dt)
                for tb, dphi in zip(rng.uniform(0.05, np.pi - 0.05, 200), rng.uniform(-2.0, 2.0, 200)))
    assert floor > 0 and worst >= floor * (1 - 1e-9)
    assert core_bracket(below, np.pi - 1e-4, 0.0, dt) == pytest.approx(floor, rel=1e-6)  # the infimum


def test_a_swing_through_the_bottom_is_regular_in_a_chart_without_a_pole_there(sphere):
    """The guidance: the same planar swing that puts the polar chart's consecutive configurations symmetric about its
    pole linearizes without trouble in a chart whose singular set is the horizontal."""
    dt, amplitude = 0.05, 0.4
    polar = _core.DiscreteSystem(sphere, dt)
    with pytest.raises(_core.StepError) as info:
        linearize_interval(polar, np.array([0.0, amplitude * dt]), np.array([0.0, -amplitude * dt]))
    assert info.value.reason == "singular_mass_matrix"
    gimbal = _core.DiscreteSystem(gimbal_pendulum(), dt)
    # The same points: theta about y at phi = 0 is beta in the gimbal chart (alpha = 0).
    A, _ = linearize_interval(gimbal, np.array([0.0, amplitude * dt]), np.array([0.0, -amplitude * dt]))[:2]
    assert np.all(np.isfinite(A)) and abs(np.linalg.det(A[0])) == pytest.approx(1.0, rel=1e-9)  # symplectic


# ----------------------------------------------------------- B. Cartesian constrained pendulum, Dh M^-1 Dh^T

ROD = 0.8


@pytest.fixture(scope="module")
def cartesian():
    b = SystemBuilder("cartesian_pendulum", gravity=(0.0, 0.0, 0.0))
    b.frame("slider", "world", "tx", config="x")
    b.frame("bob", "slider", "ty", config="y", mass=MASS)
    b.distance_constraint("bob", "world", ROD, name="rod")
    return b.build()


def test_constraint_matrix_is_the_closed_form(cartesian):
    dt = 0.1
    system = _core.DiscreteSystem(cartesian, dt)
    rng = np.random.default_rng(11)
    for _ in range(10):
        a, b = rng.uniform(-np.pi, np.pi, 2)
        q0, q1 = ROD * np.array([np.cos(a), np.sin(a)]), ROD * np.array([np.cos(b), np.sin(b)])
        _, _, M, dh1, dh0 = interval(system, q0, q1)
        np.testing.assert_allclose(M, -MASS / dt * np.eye(2), rtol=1e-15, atol=0)  # always invertible
        S = dh1 @ np.linalg.solve(M, dh0.T)
        assert S[0, 0] == pytest.approx(-4 * dt / MASS * (q1 @ q0), rel=1e-13, abs=1e-15)


def test_a_quarter_turn_in_one_step_makes_the_constraint_matrix_singular(cartesian):
    """Dh(q_k) and Dh(q_{k+1}) orthogonal: the core's linearization stops with singular_constraint_matrix (M_{k+1}
    itself is regular); an eighth of a turn per step linearizes."""
    dt = 0.5
    system = _core.DiscreteSystem(cartesian, dt)
    with pytest.raises(_core.StepError, match=r"Dh\(q_\{k\+1\}\) M\^-1 Dh\(q_k\)\^T is singular") as info:
        linearize_interval(system, np.array([ROD, 0.0]), np.array([0.0, ROD]))
    assert info.value.reason == "singular_constraint_matrix"
    A, _ = linearize_interval(system, np.array([ROD, 0.0]), ROD * np.array([np.cos(np.pi / 4), np.sin(np.pi / 4)]))[:2]
    assert np.all(np.isfinite(A))
