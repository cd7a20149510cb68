"""Seed 002's and seed 004's optimal-control benchmarks in this package's coordinates (docs/reproductions.md).

* Seed 002 §7.1, the rigid sphere: the chart of ``rigid_sphere`` keeps the three turns away from the
  Euler singularity that every world-aligned chain crosses; DMOCC's rest-to-rest optimum equals this
  discretization's optimum computed independently (the dynamics are linear along the axis of rotation:
  an equality-constrained least-squares problem, 533.5830683); the projection operator reaches it
  through the terminal weight; the seed's own discretization (director chord, forces split over both
  nodes) of the same motion gives its printed 533.5767, which explains the difference.
* Seed 004 App. A, the cart-pole: both methods reach one optimum below the seed's best 345.02 under its
  cost definition (evaluated exactly: velocities from the momenta by the mass matrix at q_N) in the
  reading of its equations that its numbers fit; the literal reading of (A.1)-(A.2) has its optimum
  above it (the seed's printed equations disagree in one sign).
* Seed 004 §8, the two-link arm: the mass matrix is (8.2) with the consistent off-diagonal; both methods
  reach the same optimum; the state and the costates at t = 5 s match Table 10.1 and the Hamiltonian
  is constant along the optimum.
"""

from __future__ import annotations

import numpy as np
import pytest

from marionette_control.model import library
from marionette_control.ocp.spec import load_spec
from marionette_control.ocp.spec_problem import build_problem, initial_trajectory, solve_spec
from marionette_control.resources import config_dir
from marionette_control.model.library.seed_models import axis_frame
from marionette_control.study.seed_costs import (
    cartpole_seed_cost,
    director_turn_effort,
    rest_to_rest_effort,
    two_link_costates,
)

casadi = pytest.importorskip("casadi")

from marionette_control.ocp.dmocc import DmoccSolver, solve_problem  # noqa: E402
from marionette_control.ocp.transcription import FinalCondition, Transcription  # noqa: E402

SPECS = config_dir() / "optimize"
SEED002_COST = 533.5767          # seed 002 §7.1
SEED004_BEST = 345.02            # seed 004 Table A.1, case G


def _rodrigues(axis, angle):
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    K = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K


# ------------------------------------------------------------------ seed 002 §7.1: the rigid sphere


def test_sphere_chart_keeps_the_turns_away_from_the_euler_singularity():
    """World z-y-x angles reach pitch = π/2 (|R₂₀| = 1) at θ = 2π/3 of every turn about (−1, 1, 1)/√3;
    the model's chart follows the same rotations with ψ = θ and β = γ = 0."""
    axis = np.array([-1.0, 1.0, 1.0])
    theta = np.linspace(0, 6 * np.pi, 6001)
    r20 = np.array([_rodrigues(axis, t)[2, 0] for t in theta])
    assert r20.min() == pytest.approx(-1.0, abs=1e-6)
    assert theta[np.argmin(r20)] == pytest.approx(2 * np.pi / 3, abs=2e-3)
    m = library.get("rigid_sphere")
    body = m.frame_index("body")
    for t in (0.3, 2 * np.pi / 3, 5.0, 6 * np.pi):
        q = np.array([0.1, 0.2, 0.3, t, 0.0, 0.0])
        g = m.placements(q)[body]
        np.testing.assert_allclose(g[:3, :3], _rodrigues(axis, t), atol=1e-12)
        np.testing.assert_allclose(g[:3, 3], q[:3], atol=1e-12)
    C = axis_frame(axis)
    np.testing.assert_allclose(C.T @ C, np.eye(3), atol=1e-12)
    np.testing.assert_allclose(C[:, 2], axis / np.linalg.norm(axis), atol=1e-12)


def _sphere_parts():
    m = library.get("rigid_sphere")
    mass = 27000 * 4 / 3 * np.pi * 0.05 ** 3
    return m, mass, 0.4 * mass * 0.05 ** 2


def test_sphere_dmocc_optimum_is_this_discretizations_optimum():
    """Rest to rest with x_N fixed: translation and the turn about the axis decouple and are linear in these
    coordinates, so the discrete optimum is a least-squares problem per axis (√6 m, 6π rad):
    533.5514726 + 0.0315957 = 533.5830683. DMOCC matches it to 1e-9 relative with β = γ = 0."""
    m, mass, J = _sphere_parts()
    expected = rest_to_rest_effort(mass, np.sqrt(6.0), 30, 0.1, False) + \
        rest_to_rest_effort(J, 6 * np.pi, 30, 0.1, False)
    assert expected == pytest.approx(533.5830683, abs=1e-6)
    spec = load_spec(SPECS / "seed002_sphere.yaml", {"method": "dmocc", "dmocc.final": "rest"})
    r = solve_spec(spec)
    U = r.trajectory.U
    effort = 0.1 * np.sum(U ** 2)
    assert r.result.converged and r.result.final_error < 1e-9 and r.result.del_residual < 1e-9
    assert effort == pytest.approx(expected, rel=1e-9)
    assert np.abs(r.trajectory.X[:, 4:6]).max() < 1e-6             # beta, gamma stay 0
    np.testing.assert_allclose(r.trajectory.X[-1, :6], [0, 1, 2, 6 * np.pi, 0, 0], atol=1e-9)
    # The projection operator, the final state by the spec's terminal weight 1e8: 2e-6 below.
    p = solve_spec(load_spec(SPECS / "seed002_sphere.yaml"))
    assert p.result.converged
    p_effort = 0.1 * np.sum(p.trajectory.U ** 2)
    assert expected - 5e-3 < p_effort < expected
    assert np.abs(p.trajectory.X[-1, :6] - [0, 1, 2, 6 * np.pi, 0, 0]).max() < 1e-5
    print(f"\nsphere: DMOCC {effort:.7f}, projection (terminal weight 1e8) {p_effort:.7f}, seed 002 {SEED002_COST}")


def test_seed002_discretization_reproduces_its_printed_cost():
    """The seed's discretization of the same optimal motion: forces split h/2 over both nodes (3.10) — which
    leaves the translation's optimum unchanged — and the directors' midpoint Lagrangian, which for a turn by
    Δθ about a fixed axis is J(1 − cos Δθ)/h (the chord, not the arc: per-step increments of up to 0.9 rad
    make it softer than ½JΔθ²/h). Its optimum is the printed 533.5767."""
    _, mass, J = _sphere_parts()
    N, h = 30, 0.1
    trans = rest_to_rest_effort(mass, np.sqrt(6.0), N, h, True)
    assert trans == pytest.approx(rest_to_rest_effort(mass, np.sqrt(6.0), N, h, False), rel=1e-12)
    rot, theta = director_turn_effort(J, 6 * np.pi, N, h)
    assert np.abs(np.diff(theta)).max() > 0.8
    assert rot == pytest.approx(0.0251806, abs=1e-6)
    assert round(trans + rot, 4) == SEED002_COST
    print(f"\nseed 002's discretization: translation {trans:.7f} + rotation {rot:.7f} = {trans + rot:.7f}")


# ------------------------------------------------------------------ seed 004 App. A: the cart-pole


@pytest.mark.parametrize("method", ["projection", "dmocc"])
def test_cartpole_reaches_below_the_seeds_best_cost(method):
    """Both methods: 308.8219 under the seed's cost (≤ 345.02), the spec's cost equal to it to 1e-8 relative
    (the terminal velocity weight is exact at the rest target up to third order; measured 1.1e-9), the same
    optimum."""
    r = solve_spec(load_spec(SPECS / "seed004_cartpole.yaml", {"method": method}))
    model = r.problem.model
    J = cartpole_seed_cost(model, r.trajectory.X, r.trajectory.U, 0.01)
    assert r.result.converged
    assert J <= SEED004_BEST
    assert J == pytest.approx(308.82189, abs=1e-4)
    assert abs(J - r.result.cost) < 1e-8 * J
    assert abs(r.trajectory.X[-1, 1] - np.pi) < 1e-2 and abs(r.trajectory.X[-1, 0]) < 1e-3
    print(f"\ncart-pole ({method}): seed-defined cost {J:.6f} (seed 004's best {SEED004_BEST}), "
          f"{r.result.iterations} iterations")


def test_cartpole_literal_reading_has_a_higher_optimum():
    """(A.1)-(A.2) as printed put the pendulum on the other side (upright at θ = −π here): the optimum of that
    problem is 380.165 by both methods — above 345.02, and the seed's own explicit-Euler discretization of it
    has its optimum at 355.39 (docs/reproductions.md), so its published costs belong to the mirrored reading."""
    keys = [[0.0, -1.0, 0.0], [2.0, 0.0, -np.pi]]
    costs = []
    for method in ("projection", "dmocc"):
        r = solve_spec(load_spec(SPECS / "seed004_cartpole.yaml", {"method": method, "motion.keyframes": keys}))
        assert r.result.converged
        costs.append(cartpole_seed_cost(r.problem.model, r.trajectory.X, r.trajectory.U, 0.01, theta_target=-np.pi))
    assert costs[0] == pytest.approx(costs[1], rel=1e-8)
    assert costs[0] == pytest.approx(380.1649, abs=1e-3)


# ------------------------------------------------------------------ seed 004 §8: the two-link arm


def test_two_link_mass_matrix_is_the_consistent_form():
    """M(q) of the model = seed 004 (8.2) with M₁₂ = (m₂/4)(L₂² + 2L₁L₂cos θ₂) + I_G2 (the printed form
    lacks the 2, which (8.3)'s Coriolis terms contradict)."""
    m = library.get("two_link_arm")
    m1 = m2 = 0.5
    L1, L2 = 2.0, 0.5
    I1, I2 = m1 * L1 ** 2 / 12, m2 * L2 ** 2 / 12
    for th2 in (0.05, 1.0, 3.07):
        M = np.asarray(m.lagrangian(np.array([0.4, th2]), np.zeros(2))["Lvv"])
        c = np.cos(th2)
        expected = [[m1 / 4 * L1 ** 2 + m2 * (L1 ** 2 + L1 * L2 * c + L2 ** 2 / 4) + I1 + I2,
                     m2 / 4 * (L2 ** 2 + 2 * L1 * L2 * c) + I2],
                    [m2 / 4 * (L2 ** 2 + 2 * L1 * L2 * c) + I2, m2 / 4 * L2 ** 2 + I2]]
        np.testing.assert_allclose(M, expected, rtol=0, atol=1e-12)
        assert abs(M[0, 1] - (m2 / 4 * (L2 ** 2 + L1 * L2 * c) + I2)) > 0.05


def test_two_link_optimum_matches_seed_table_10_1():
    """The spec's problem (soft final state, weight 1e6) by both methods: one optimum 0.3220448 (the
    projection operator needs 100+ iterations on this two-time-scale problem, DMOCC about 20); with x_N
    imposed (DMOCC, final = rest, from it): 0.3220449. At t = 5 s the state and costates agree with the
    seed's Table 10.1 (GPOPS, collocation) to 3e-3, and the Hamiltonian is constant to 6e-4 (measured 5.8e-4
    over the whole 10 s, 3e-4 away from the fast ends) at the value the seed's t = 5 s row gives (−0.0924)."""
    spec = load_spec(SPECS / "seed004_two_link.yaml", {"method": "dmocc"})
    problem = build_problem(spec)
    X0, U0, _ = initial_trajectory(spec, problem)
    soft = solve_problem(problem, X0, U0)
    assert soft.converged and soft.cost == pytest.approx(0.3220448, abs=2e-7)
    p = solve_spec(load_spec(SPECS / "seed004_two_link.yaml"))
    assert p.result.converged and p.result.cost == pytest.approx(soft.cost, rel=1e-6)
    nlp = Transcription(problem.system, problem.cost.without_barriers(), problem.x0, problem.N,
                        final=FinalCondition("rest", problem.Xd[-1]))
    r = DmoccSolver(nlp).solve(soft.X, soft.U)
    assert r.converged and r.final_error < 1e-9 and r.del_residual < 1e-9
    dt = problem.dt
    J = 0.5 * dt * float(np.sum(r.U[:, 0] ** 2 + 0.5 * r.U[:, 1] ** 2))
    assert J == pytest.approx(0.3220449, abs=2e-7)
    model = problem.model
    k = 500
    v5 = np.linalg.solve(np.asarray(model.lagrangian(r.X[k, :2], np.zeros(2))["Lvv"]), r.X[k, 2:])
    seed_state = np.array([-0.027597, 3.068603, 0.477425, 0.009792])
    seed_costates = np.array([-0.203408, 0.019078, -0.209560, 0.019651])
    np.testing.assert_allclose(np.r_[r.X[k, :2], v5], seed_state, atol=3e-3)
    lam, H = two_link_costates(model, r.X, r.U, dt)
    lam5 = 0.5 * (lam[k - 2] + lam[k - 1])            # midpoints of the intervals around t = 5 s
    np.testing.assert_allclose(lam5, seed_costates, atol=1e-3)
    assert np.ptp(H) < 6e-4 and abs(H.mean() - (-0.09238)) < 5e-4
    print(f"\ntwo-link: cost {J:.7f}; state at 5 s {np.r_[r.X[k, :2], v5].round(5)}, costates {lam5.round(5)}; "
          f"H = {H.mean():.5f} ± {np.ptp(H) / 2:.1e}")


# ------------------------------------------------------------------ the spec's terminal velocity weight


def test_terminal_velocity_weight_is_the_velocity_penalty():
    """weights.terminal_velocity W: the momentum block of Q_f is M⁻¹WM⁻¹ at the desired final configuration,
    so ½ pᵀ Q_f,pp p = ½ vᵀ W v with v = M(q_d)⁻¹ p; the configurations' terminal weights stay; a name that is
    not a dynamic configuration is refused, naming the key."""
    from marionette_control.ocp.spec import SpecError

    spec = load_spec(SPECS / "seed004_cartpole.yaml")
    problem = build_problem(spec)
    model = problem.model
    Qf = np.asarray(problem.Qf)
    M = np.asarray(model.lagrangian(problem.Xd[-1, :2], np.zeros(2))["Lvv"])
    p = np.array([0.3, -0.7])
    v = np.linalg.solve(M, p)
    assert 0.5 * p @ Qf[2:, 2:] @ p == pytest.approx(0.5 * 1e5 * v @ v, rel=1e-12)
    np.testing.assert_allclose(np.diag(Qf)[:2], [1e5, 1e5])
    assert np.abs(Qf[:2, 2:]).max() == 0.0 and abs(Qf[2, 3]) > 1e3        # coupled through M
    with pytest.raises(SpecError, match=r"weights.terminal_velocity.p_cart: matches no name"):
        build_problem(load_spec(SPECS / "seed004_cartpole.yaml", {"weights.terminal_velocity": {"p_cart": 1.0}}))
    summary = solve_spec(load_spec(SPECS / "seed004_cartpole.yaml")).summary
    assert summary["converged"] and summary["max_violation"] == 0.0
    assert 1e-4 < summary["final_state_error"] < 1e-2        # the soft terminal state: 4.4e-3 rad short of upright
