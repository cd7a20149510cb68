"""DMOCC: direct transcription solved by IPOPT (marionette_control.ocp.dmocc, .transcription).

Evidence:
* the NLP's gradient, constraint Jacobian and Hessian of the Lagrangian against central
  differences of its own functions, on a piece of the constrained wave with every final condition
  under both forcing rules, and on a damped, torque-driven double pendulum under the symmetric rule
  (whose momenta depend on the previous step's torques through f+) (the core's blocks are checked
  in test_del_equations.py);
* DMOCC and the projection optimizer reach the same optimum from the same start: the seed 001
  pendulum swing-up (13297.37889; cost to 1e-9 relative, trajectories to 1e-7) and the marionette
  arm's constrained wave (drive and tension limits; the projection's barrier at weight 1e-5, whose
  bias is below 1e-7 relative here: cost to 1e-6 relative, configurations to 1e-3), where DMOCC's
  trajectory satisfies every limit, recomputed independently of the constraint code;
* a fixed final state (the swing-up ending at rest upright), which the projection operator can
  only approach through terminal weights: met to 1e-9 by a trajectory that satisfies the dynamics
  step by step (the core's one-step map);
* the spec (``method: dmocc``, ``marionette-optimize SPEC --set method=dmocc``), the request
  (``methods: ["dmocc"]``) and Python select it; the result is a trajectory file with LQR gains;
* cancellation stops IPOPT; bad options get specific errors.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

pytest.importorskip("casadi")

from marionette_control import _core  # noqa: E402
from marionette_control.model import library  # noqa: E402
from marionette_control.cli import optimize as cli  # noqa: E402
from marionette_control.ocp import request as R  # noqa: E402
from marionette_control.ocp.cost import tracking_cost  # noqa: E402
from marionette_control.ocp.dmocc import DmoccOptions, DmoccSolver, solve_problem  # noqa: E402
from marionette_control.ocp.projection import OptimizerOptions, ProjectionOptimizer  # noqa: E402
from marionette_control.ocp.optimizer import solve  # noqa: E402
from marionette_control.ocp.spec import SpecError, load_spec  # noqa: E402
from marionette_control.ocp.spec_problem import build_problem, initial_trajectory, solve_spec  # noqa: E402
from marionette_control.resources import config_dir  # noqa: E402
from marionette_control.trajectory import Trajectory  # noqa: E402
from marionette_control.ocp.transcription import FinalCondition, Transcription, TranscriptionError  # noqa: E402
from random_trees import central_fd  # noqa: E402
from test_constraints import assert_within_limits  # noqa: E402
from test_optimizer import SWING_UP_COST, feasible, swing_up  # noqa: E402

WAVE_SPEC = config_dir() / "optimize" / "marionette_arm_wave.yaml"
SWING_SPEC = config_dir() / "optimize" / "pendulum_swingup.yaml"


# ------------------------------------------------------------------ the NLP's derivatives


def _dense(pattern, values, shape):
    A = np.zeros(shape)
    A[pattern.rows, pattern.cols] = values
    return A


@pytest.mark.parametrize("forcing", ["thesis", "symmetric"])
@pytest.mark.parametrize("final", ["free", "configuration", "rest", "state"])
def test_nlp_derivatives_match_finite_differences(final, forcing):
    """Gradient, Jacobian (and its pattern) and Hessian of the Lagrangian of 6 steps of the constrained wave."""
    spec = load_spec(WAVE_SPEC, {"model": {"name": "marionette_arm", "params": {"forcing": forcing}}})
    problem = build_problem(spec)
    assert problem.model.forcing == forcing
    X0, U0, _ = initial_trajectory(spec, problem)
    N, k0 = 6, 100
    X, U = X0[k0:k0 + N + 1].copy(), U0[k0:k0 + N].copy()
    m = problem.model
    cost = tracking_cost(problem.Xd[k0:k0 + N + 1], problem.Ud[k0:k0 + N], np.ones(m.nx), np.ones(m.nU))
    xN = X[-1] + np.r_[np.zeros(m.nq), 0.01 * np.ones(m.nd + m.nk)]
    nlp = Transcription(problem.system, cost, X[0], N, problem.constraints,
                        None if final == "free" else FinalCondition(final, xN))
    assert nlp.constraints and any(c.needs_lambda for c in nlp.constraints)   # tension rows included
    w = nlp.pack(X, U, problem.system.constraint_forces_trajectory(X, U))
    check_nlp_derivatives(nlp, w)


@pytest.mark.parametrize("final", ["free", "state"])
def test_nlp_derivatives_with_force_inputs_and_symmetric_forcing(final):
    """The same checks on 6 steps of a damped double pendulum driven by two torques under the symmetric forcing:
    p_k = D2 Ld + f+_{k-1} depends on u_{k-1}, so node k's rows, the states' Jacobian E and the final momentum
    row have u_{k-1} entries (absent from the patterns under the thesis rule)."""
    m = library.get("double_pendulum", damping=0.3, forcing="symmetric")
    ds = _core.DiscreteSystem(m, 0.05, tolerance=1e-12)
    N = 6
    rng = np.random.default_rng(4)
    U = rng.uniform(-1.0, 1.0, (N, m.nU))
    X, _ = ds.simulate(np.array([0.4, -0.3, 0.2, 0.1]), U)
    cost = tracking_cost(X + 0.1, U + 0.2, np.ones(m.nx), np.ones(m.nU))
    condition = None if final == "free" else FinalCondition(final, X[-1] + 0.01)
    nlp = Transcription(ds, cost, X[0], N, (), condition)
    thesis = Transcription(_core.DiscreteSystem(library.get("double_pendulum", damping=0.3), 0.05), cost, X[0], N,
                           (), condition)
    assert nlp.jac_pattern.nnz > thesis.jac_pattern.nnz
    check_nlp_derivatives(nlp, nlp.pack(X, U))


def check_nlp_derivatives(nlp, w):
    """Gradient, Jacobian (with its pattern) and Hessian of the Lagrangian at w (perturbed in its free entries)
    against central differences of the NLP's own functions."""
    rng = np.random.default_rng(1)
    free = nlp.lbw != nlp.ubw
    w = w + 1e-3 * rng.normal(size=w.shape) * free
    g = nlp.gradient(w)
    np.testing.assert_allclose(g, central_fd(nlp.objective, w, 1e-5, 5), rtol=0, atol=1e-8 * np.abs(g).max())
    J = _dense(nlp.jac_pattern, nlp.jacobian_values(w), (nlp.ng, nlp.nw))
    fdJ = central_fd(nlp.constraints_value, w, 1e-5, 5)
    np.testing.assert_allclose(J, fdJ, rtol=0, atol=1e-8 * np.abs(J).max())
    assert np.all(fdJ[J == 0.0] == 0.0) or np.abs(fdJ[J == 0.0]).max() < 1e-9   # the pattern misses nothing
    y, s = rng.normal(size=nlp.ng), 0.7
    H = _dense(nlp.hess_pattern, nlp.hessian_values(w, s, y), (nlp.nw, nlp.nw))
    assert np.all(np.tril(H, -1) == 0.0)                   # IPOPT gets the upper triangle
    H = H + np.triu(H, 1).T

    def lagrangian_gradient(v):
        return s * nlp.gradient(v) + _dense(nlp.jac_pattern, nlp.jacobian_values(v), (nlp.ng, nlp.nw)).T @ y

    np.testing.assert_allclose(H[np.ix_(free, free)], central_fd(lagrangian_gradient, w, 1e-5, 5)[np.ix_(free, free)],
                               rtol=0, atol=1e-7 * np.abs(H).max())


# ------------------------------------------------------------------ same optimum as the projection operator


def test_swing_up_reaches_the_projection_optimum():
    ds, cost, X0, U0 = swing_up()
    nlp = Transcription(ds, cost, X0[0], 100)
    r = DmoccSolver(nlp).solve(X0, U0)
    # |Dh∘ζ| < tolerance bounds the distance to the optimum by about sqrt(tolerance / smallest curvature)
    # (~2e-6 at 1e-8 here): to compare trajectories to 1e-7 the projection operator stops at 1e-12.
    p = ProjectionOptimizer(ds, cost, OptimizerOptions(tolerance=1e-12)).optimize(X0, U0)
    assert r.converged and r.status == "Solve_Succeeded" and p.converged
    assert r.cost == pytest.approx(SWING_UP_COST, rel=1e-8)
    assert abs(r.cost - p.cost) <= 1e-9 * p.cost
    assert np.abs(r.X - p.X).max() < 1e-7 and np.abs(r.U - p.U).max() < 1e-7
    assert r.del_residual < 1e-9 and feasible(ds, r.X, r.U)
    assert r.iterations == len(r.history) > 0 and r.elapsed > 0
    print(f"\nswing-up: DMOCC {r.cost:.9f} ({r.iterations} IPOPT iterations, {r.elapsed:.3f} s), projection "
          f"{p.cost:.9f} ({p.iterations} iterations, {p.elapsed:.3f} s)")


def test_swing_up_with_symmetric_forcing_reaches_the_projection_optimum():
    """Under the symmetric forcing too (the torque's impulse split between the step's ends, so the momenta and the
    DEL rows depend on the previous torque) both methods reach one optimum, a little off the thesis rule's."""
    _, cost, X0, U0 = swing_up()
    ds = _core.DiscreteSystem(library.get("pendulum", forcing="symmetric"), 0.1, tolerance=1e-10)
    r = DmoccSolver(Transcription(ds, cost, X0[0], 100)).solve(X0, U0)
    # (tolerance 1e-8 stops the projection at 6e-7 from the optimum here, with the cost already equal to 1e-12)
    p = ProjectionOptimizer(ds, cost, OptimizerOptions(tolerance=1e-10)).optimize(X0, U0)
    assert r.converged and p.converged
    assert abs(r.cost - p.cost) <= 1e-9 * p.cost and abs(p.cost - SWING_UP_COST) > 1e-6 * SWING_UP_COST
    assert np.abs(r.X - p.X).max() < 1e-7 and np.abs(r.U - p.U).max() < 1e-7
    assert r.del_residual < 1e-9 and feasible(ds, r.X, r.U)
    print(f"\nswing-up, symmetric forcing: DMOCC {r.cost:.9f} ({r.iterations} IPOPT iterations), projection "
          f"{p.cost:.9f} ({p.iterations} iterations); thesis rule {SWING_UP_COST}")


def test_constrained_wave_reaches_the_projection_optimum():
    spec = load_spec(WAVE_SPEC, {"constraints.barrier_weight": 1e-5})
    problem = build_problem(spec)
    X0, U0, _ = initial_trajectory(spec, problem)
    r = solve_problem(problem, X0, U0)
    p = solve_spec(spec)
    assert r.converged and r.feasible and p.result.converged and p.result.feasible
    assert abs(r.cost - p.result.cost) <= 1e-6 * p.result.cost
    # The projection's iterates stay strictly inside the limits (barrier): its cost is not below the optimum.
    assert r.cost <= p.result.cost * (1 + 1e-9)
    nq = problem.model.nq
    assert np.abs(r.X[:, :nq] - p.trajectory.X[:, :nq]).max() < 1e-3
    assert r.del_residual < 1e-8
    assert_within_limits(problem, r.X, r.U)
    print(f"\nconstrained wave: DMOCC {r.cost:.9f} ({r.iterations} IPOPT iterations, {r.elapsed:.2f} s), projection "
          f"{p.result.cost:.9f} ({p.result.iterations} iterations)")


# ------------------------------------------------------------------ a hard final condition


def test_fixed_final_state_is_met():
    """A minimum-effort swing-up: ½ Σ R u_k² (no tracking), from hanging at rest to rest upright at t_N
    (x_N = the discrete rest at θ = π). The projection operator has no way to impose x_N (only terminal
    weights); the free problem's optimum is to stay hanging."""
    ds, _, X0, U0 = swing_up()
    N = 100
    cost = tracking_cost(np.zeros((N + 1, 2)), np.zeros((N, 1)), np.zeros(2), np.array([1.0]))
    target = np.array([np.pi, 0.0])
    nlp = Transcription(ds, cost, X0[0], N, final=FinalCondition("rest", target))
    r = DmoccSolver(nlp).solve(X0, U0)
    assert r.converged and r.final == "rest"
    assert r.final_error < 1e-9
    np.testing.assert_allclose(r.X[-1], ds.state_from_configs(target[:1], target[:1]), rtol=0, atol=1e-9)
    assert r.del_residual < 1e-9 and feasible(ds, r.X, r.U)
    # Simulating its inputs open loop from x(0) reaches the target too (over 10 s of an unstable end).
    Xs, _ = ds.simulate(X0[0], r.U)
    assert np.abs(Xs[-1] - r.X[-1]).max() < 1e-4
    free = ProjectionOptimizer(ds, cost).optimize(X0, U0)
    assert free.cost == 0.0 and np.abs(free.X[-1] - target).max() > 3.0
    print(f"\nfinal state: {r.X[-1]} after {r.iterations} IPOPT iterations, effort {r.cost:.4f}")


def test_inconsistent_final_configuration_is_refused():
    arm = library.get("marionette_arm")
    spec = load_spec(WAVE_SPEC)
    problem = build_problem(spec, arm)
    with pytest.raises(TranscriptionError, match="final configuration violates constraint"):
        Transcription(problem.system, problem.cost.without_barriers(), problem.x0, problem.N,
                      final=FinalCondition("configuration", np.zeros(arm.nx)))


# ------------------------------------------------------------------ front ends


def test_spec_and_cli_select_dmocc(tmp_path):
    out, summary = tmp_path / "swing.npz", tmp_path / "summary.json"
    assert cli.main([str(SWING_SPEC), "--set", "method=dmocc", "--set", "dmocc.tolerance=1e-9", "-o", str(out),
                     "--summary-json", str(summary), "--progress", "quiet"]) == 0
    tr = Trajectory.load(out, library.get("pendulum"))
    assert tr.K is not None and tr.K.shape == (tr.N, 1, 2)
    assert tr.info["method"] == "dmocc" and tr.info["dmocc"]["ipopt_status"] == "Solve_Succeeded"
    s = json.loads(summary.read_text())
    assert s["converged"] and s["del_residual"] < 1e-9 and s["max_violation"] == 0.0
    projection = solve_spec(load_spec(SWING_SPEC, {"optimizer.tolerance": 1e-9}))
    assert s["cost"] == pytest.approx(projection.result.cost, rel=1e-6)


def test_request_selects_dmocc():
    pendulum = library.get("pendulum")
    desired = R.DesiredMotion(["theta"], [0.1 * k for k in range(101)], [[0.0 if k < 50 else math.pi]
                                                                         for k in range(101)])
    p = R.build_problem(pendulum, desired=desired, options=R.RequestOptions(
        input_weight_names=["torque"], input_weights=[50.0], methods=["dmocc"], method_iterations=[0]))
    assert p.method == "dmocc"
    res = solve(p, p.X0, p.U0)
    r = res.result
    assert r.converged and r.cost == pytest.approx(SWING_UP_COST, rel=1e-8)
    traj = res.trajectory
    assert traj.K.shape == (100, 1, 2)
    with pytest.raises(R.ProblemError, match="'dmocc' is a method of its own"):
        R.build_problem(pendulum, desired=desired, options=R.RequestOptions(methods=["quasi_newton", "dmocc"],
                                                                              method_iterations=[4, 0]))


def test_cancel_stops_ipopt():
    ds, cost, X0, U0 = swing_up()
    seen = []
    r = DmoccSolver(Transcription(ds, cost, X0[0], 100)).solve(X0, U0, callback=seen.append,
                                                               should_stop=lambda: len(seen) >= 3)
    assert r.reason == "cancelled" and not r.converged and len(seen) == 3
    assert r.X.shape == X0.shape


# ------------------------------------------------------------------ bad options


@pytest.mark.parametrize("kwargs, match", [
    ({"tolerance": 0.0}, "tolerance must be a finite number > 0"),
    ({"constraint_tolerance": float("nan")}, "constraint_tolerance must be a finite number > 0"),
    ({"max_iterations": -1}, "max_iterations must be an integer >= 0"),
    ({"deadline": 0}, "deadline must be > 0"),
    ({"final": "upright"}, "final must be one of free, configuration, rest, state"),
    ({"final_state": [0.0, 0.0]}, "final_state is given but final is 'free'"),
    ({"hessian": "bfgs"}, "hessian must be one of exact, limited_memory"),
    ({"print_level": 13}, "print_level must be an integer in 0..12"),
    ({"ipopt": ["tol"]}, "ipopt options must be a mapping"),
])
def test_bad_options_get_specific_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DmoccOptions(**kwargs)


@pytest.mark.parametrize("overrides, match", [
    ({"method": "ipopt"}, r"method: expected one of projection, dmocc, got 'ipopt'"),
    ({"dmocc.final": "rest"}, r"dmocc: only used with method dmocc \(method is projection\)"),
    ({"method": "dmocc", "dmocc.tol": 1e-6}, r"dmocc.tol: unknown key"),
    ({"method": "dmocc", "dmocc.hessian": "bfgs"}, r"dmocc: hessian must be one of exact, limited_memory"),
])
def test_bad_spec_keys_get_specific_errors(overrides, match):
    with pytest.raises(SpecError, match=match):
        load_spec(SWING_SPEC, overrides)


def test_bad_guess_and_transcription_arguments():
    ds, cost, X0, U0 = swing_up()
    solver = DmoccSolver(Transcription(ds, cost, X0[0], 100))
    with pytest.raises(ValueError, match=r"initial guess has shapes X \(100, 2\)"):
        solver.solve(X0[:-1], U0)
    bad = X0.copy()
    bad[3, 0] = np.nan
    with pytest.raises(ValueError, match="NaN or inf"):
        solver.solve(bad, U0)
    with pytest.raises(TranscriptionError, match="N=50"):
        Transcription(ds, cost, X0[0], 50)
    with pytest.raises(TranscriptionError, match="needs the final state"):
        Transcription(ds, cost, X0[0], 100, final=FinalCondition("rest"))
    with pytest.raises(TranscriptionError, match="not one of"):
        Transcription(ds, cost, X0[0], 100, final=FinalCondition("upright", np.zeros(2)))
