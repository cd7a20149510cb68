"""Inequality constraints in the projection-operator optimizer (issue 11; thesis ref. [16]).

Evidence:
* the wave (config/optimize/marionette_arm_wave.yaml) optimized with the model file's limits alone
  (no reserve for the feedback: the constraint machinery on the hardware's limits) satisfies every
  limit at every step — range, speed, acceleration (the first step from rest
  included), string tension ≥ its minimum — checked against the physical quantities recomputed
  here (tension from the VI step's own multiplier, not the constraint code), and still tracks the
  animation (RMS stated below); without constraints the same spec commands the carriage from
  rest at ~70 m/s² (the issue's measurement);
* the wave at twice its speed is impossible within the limits: the constrained optimum
  satisfies them all and its report names the constraints it rides and the tracking errors;
  unconstrained, the optimum leaves the range, exceeds the accelerations several times and
  needs the string to push;
* by default the wave keeps the reserve for the feedback: every limit less its margin, the tension
  floor min_tension + tension_reserve, checked on the physical quantities, reported with the
  hardware's limits; the reserve costs tracking but leaves the wave trackable;
* deadline and cancel return trajectories that satisfy the constraints; a start that violates
  them is reported as such until an iterate satisfies them; cancelled during the unconstrained
  stage (the default start) the result is the start;
* the Newton model with barrier terms (linear and tension) is the second derivative of the
  projected cost g = h∘P (central differences, as for the unconstrained model);
* from a start that satisfies the constraints the iterates stay inside them and can end at a limit they
  cannot get around: reach-and-point from the hanging arm presses the carriage against its range end and misses
  the motion by tens of degrees; from the unconstrained optimum (the default start) the constrained optimum is
  reached in a few iterations;
* bad constraint options get specific errors in specs, requests and Python.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from marionette_control.model import library
from marionette_control.ocp import request as R
from marionette_control.ocp.projection import OptimizerOptions, ProjectionOptimizer
from marionette_control.ocp.problem import DEFAULT_MARGINS, DEFAULT_TENSION_RESERVE, ConstraintOptions
from marionette_control.resources import config_dir
from marionette_control.ocp.spec import SpecError, load_spec, parse_spec
from marionette_control.ocp.spec_problem import build_problem, initial_trajectory, solve_spec
from marionette_control.ocp.problem import ProblemError
from marionette_control.model.limits import load_limits
from arm_helpers import physical
from marionette_control.model.library.source import ModelSource

WAVE_SPEC = config_dir() / "optimize" / "marionette_arm_wave.yaml"
LIMITS = load_limits(ModelSource.registered("marionette_arm"))
TOL = 1e-6   # the optimizer's feasibility tolerance on normalized margins
#: the spec overrides that keep no reserve for the feedback: the hardware's limits alone
NO_RESERVE = {"constraints.margins": {"range": 0.0, "speed": 0.0, "acceleration": 0.0},
              "constraints.tension_reserve": 0.0}


def fast_wave_spec(speed: float, constraints=None):
    """The wave's keyframes at ``speed`` times their speed, in the wave spec."""
    wave = yaml.safe_load((config_dir() / "motions" / "wave.yaml").read_text())
    data = yaml.safe_load(WAVE_SPEC.read_text())
    data["motion"] = {"joints": wave["joints"], "angle_unit": "deg", "interpolation": "clamped",
                      "keyframes": [[round(t / speed, 6)] + v for t, *v in wave["keyframes"]]}
    data.pop("output")
    if constraints is not None:
        data["constraints"] = constraints
    return parse_spec(data, str(WAVE_SPEC))


def assert_within_limits(problem, X, U, lim=LIMITS):
    rho_next, speed, acc, tension = physical(problem.system, X, U)
    eps = 1e-9
    for i in range(2):
        assert lim.lower[i] - eps <= rho_next[:, i].min() and rho_next[:, i].max() <= lim.upper[i] + eps
        assert np.abs(speed[:, i]).max() <= lim.max_velocity[i] * (1 + TOL)
        assert np.abs(acc[:, i]).max() <= lim.max_acceleration[i] * (1 + TOL)
    assert tension.min() >= lim.min_tension[0] - TOL
    return rho_next, speed, acc, tension


@pytest.fixture(scope="module")
def wave_runs():
    on = solve_spec(load_spec(WAVE_SPEC, NO_RESERVE))
    off = solve_spec(load_spec(WAVE_SPEC, {"constraints.enabled": False}))
    return on, off


def test_wave_with_constraints_satisfies_every_limit_and_tracks(wave_runs):
    """Constrained by the hardware's limits alone: every limit at every step; RMS tracking error ≤ 0.06°
    (shoulder) and ≤ 0.02° (elbow), as without constraints (0.045°, 0.015°). Unconstrained: 70 m/s² from rest in
    the first step."""
    on, off = wave_runs
    assert on.result.converged and on.result.feasible and on.summary["constraints_satisfied"]
    _, speed, acc, tension = assert_within_limits(on.problem, on.trajectory.X, on.trajectory.U)
    assert abs(acc[0, 0]) <= 15.0 * (1 + TOL)            # the first step from rest (v_0 = 0)
    rms = {k: math.degrees(e["rms"]) for k, e in on.summary["tracking_errors"].items()}
    assert rms["shoulder"] < 0.06 and rms["elbow"] < 0.02, rms
    print(f"\nwave with constraints: RMS {rms}, cost {on.result.cost:.6f} ({on.result.iterations} iterations), "
          f"min tension {tension.min():.3f} N, max |a| {np.abs(acc).max(axis=0)}")
    # the report: every row satisfied; the first-step acceleration is the active one
    rows = on.trajectory.info["constraints"]["margins"]
    assert rows and all(r["satisfied"] for r in rows)
    active = {r["label"] for r in rows if r["active_steps"]}
    assert "carriage acceleration >= -15 m/s^2" in active
    # Without constraints the same spec violates the carriage's acceleration limit in the first step.
    assert not off.trajectory.info["constraints"]["margins"]
    _, _, acc_off, _ = physical(off.problem.system, off.trajectory.X, off.trajectory.U)
    assert abs(acc_off[0, 0]) > 60.0
    assert on.result.cost == pytest.approx(off.result.cost, rel=2e-3)   # the limits cost little tracking


def test_wave_keeps_the_reserve_for_the_feedback_by_default(wave_runs):
    """The default problem: every drive limit less its margin and the tension floor min_tension + tension_reserve
    hold at every step (the physical quantities, recomputed), each report row gives the hardware's limit, the
    reserve and the margin to the hardware (≥ the reserve); the reserve costs tracking (the optimum with the
    hardware's limits alone, fewer constraints, is cheaper) but the wave stays trackable."""
    res = solve_spec(load_spec(WAVE_SPEC))
    p = res.problem
    assert res.result.converged and res.summary["constraints_satisfied"] and res.summary["trackable"]
    assert res.summary["reserve"] == {"margins": DEFAULT_MARGINS, "tension_reserve": DEFAULT_TENSION_RESERVE}
    m = DEFAULT_MARGINS
    width = LIMITS.upper - LIMITS.lower
    np.testing.assert_allclose(p.limits.lower, LIMITS.lower + m["range"] * width)
    np.testing.assert_allclose(p.limits.upper, LIMITS.upper - m["range"] * width)
    np.testing.assert_allclose(p.limits.max_velocity, LIMITS.max_velocity * (1 - m["speed"]))
    np.testing.assert_allclose(p.limits.max_acceleration, LIMITS.max_acceleration * (1 - m["acceleration"]))
    np.testing.assert_allclose(p.limits.min_tension, LIMITS.min_tension + DEFAULT_TENSION_RESERVE)
    assert_within_limits(p, res.trajectory.X, res.trajectory.U, p.limits)
    for r in res.trajectory.info["constraints"]["margins"]:
        assert r["hardware_margin"] == pytest.approx(r["margin"] + r["reserve"])
        assert r["hardware_margin"] >= r["reserve"] - TOL * abs(r["limit"])
    rows = {(r["family"], r["component"], r["side"]): r for r in res.trajectory.info["constraints"]["margins"]}
    assert rows[("tension", "string", "lower")]["hardware_limit"] == LIMITS.min_tension[0]
    assert rows[("acceleration", "carriage", "upper")]["hardware_limit"] == LIMITS.max_acceleration[0]
    on, _ = wave_runs
    assert on.result.cost < res.result.cost
    assert res.trajectory.info["constraints"]["set"]["limits"]["min_tension"] == {"string": LIMITS.min_tension[0]}


def test_fast_wave_gets_the_best_constrained_trajectory_and_an_honest_report():
    """Twice the speed: unconstrained, the optimum leaves the string's range, accelerates the drives several
    times beyond their limits and makes the string push; constrained, every limit holds, the report names
    what the trajectory rides, and the tracking errors say what could not be followed."""
    off = solve_spec(fast_wave_spec(2.0, {"enabled": False}))
    rho_next, speed, acc, tension = physical(off.problem.system, off.trajectory.X, off.trajectory.U)
    assert rho_next[:, 1].max() > LIMITS.upper[1]
    assert (np.abs(acc).max(axis=0) > 5 * LIMITS.max_acceleration).all()
    assert tension.min() < 0
    on = solve_spec(fast_wave_spec(2.0))
    assert on.result.feasible and on.summary["constraints_satisfied"]
    assert_within_limits(on.problem, on.trajectory.X, on.trajectory.U)
    rows = on.trajectory.info["constraints"]["margins"]
    active = {r["label"]: r for r in rows if r["active_steps"]}
    assert len(active) >= 3
    for r in active.values():
        assert r["active_intervals"] and all(a <= b for a, b in r["active_intervals"])
    errors = on.summary["tracking_errors"]
    slow = solve_spec(load_spec(WAVE_SPEC)).summary["tracking_errors"]
    assert errors["shoulder"]["rms"] > 3 * slow["shoulder"]["rms"]      # what could not be followed
    print(f"\nfast wave: RMS {[math.degrees(e['rms']) for e in errors.values()]} deg; active: {sorted(active)}")


def test_fast_wave_with_the_tension_alone_converges_between_the_unconstrained_and_fully_constrained_optima():
    """Twice the speed with ``families: [tension]``: the optimization converges (it stalled at cost ~3e4 while
    every iterate had to keep the string taut, docs/reproductions.md §4d), the string pulls with at least
    its 0.5 N at every step (tension from the VI step's own multiplier), the minimum is active where the
    unconstrained optimum makes the string push, and the cost lies between the unconstrained optimum's and
    that with every drive limit too (fewer constraints cannot cost more)."""
    ten = solve_spec(fast_wave_spec(2.0, {"families": ["tension"]}))
    assert ten.result.converged and ten.result.feasible
    *_, tension = physical(ten.problem.system, ten.trajectory.X, ten.trajectory.U)
    floor = LIMITS.min_tension[0] + DEFAULT_TENSION_RESERVE      # the minimum and the reserve for the feedback
    assert ten.problem.limits.min_tension[0] == pytest.approx(floor)
    assert tension.min() >= floor - TOL
    assert tension.min() < floor + 0.05                          # active
    off = solve_spec(fast_wave_spec(2.0, {"enabled": False}))
    full = solve_spec(fast_wave_spec(2.0))
    assert off.result.cost < ten.result.cost < full.result.cost
    print(f"\nfast wave, tension only: {ten.result.iterations} iterations, cost {ten.result.cost:.6f} (unconstrained "
          f"{off.result.cost:.6f}, every limit {full.result.cost:.6f}), min tension {tension.min():.4f} N")


def test_cancel_and_deadline_return_constraint_satisfying_trajectories():
    """Straight from the initial trajectory (``optimizer.start: initial``): the first iterates may leave the
    constraints (the approximate barrier); once one satisfies them all later ones do. A stop returns the last
    iterate when it satisfies them, else the start (which does). From the unconstrained optimum (the default), a
    cancel during the unconstrained stage returns the start, and one after it a trajectory inside."""
    spec = load_spec(WAVE_SPEC, {"optimizer.start": "initial"})
    p = build_problem(spec)
    for stop_after in (1, 3):
        calls = []
        res = solve_spec(spec, callback=lambda s, r: calls.append(r), should_stop=lambda: len(calls) >= stop_after)
        assert res.result.reason == "cancelled" and res.result.feasible
        inside = [r.violation == 0.0 for r in calls]
        assert inside == sorted(inside)                 # never back outside once inside
        assert_within_limits(res.problem, res.trajectory.X, res.trajectory.U)
        if not inside[-1]:
            # the start: the constant-input simulation of the spec's initial trajectory
            X0, U0, _ = initial_trajectory(spec, p)
            assert np.array_equal(res.trajectory.U, U0)
    assert calls[0].violation > 0 and calls[-1].violation == 0.0   # measured: outside for two iterations
    spec = load_spec(WAVE_SPEC)
    X0, U0, _ = initial_trajectory(spec, build_problem(spec))
    stages = []
    res = solve_spec(spec, callback=lambda s, r: stages.append(s), should_stop=lambda: len(stages) >= 2)
    assert stages == ["without inequality constraints"] * 2 and res.result.reason == "cancelled"
    assert np.array_equal(res.trajectory.U, U0) and res.result.feasible
    stages.clear()
    res = solve_spec(spec, callback=lambda s, r: stages.append(s), should_stop=lambda: "optimization" in stages)
    assert stages[-1] == "optimization" and stages.count("optimization") == 1 and res.result.reason == "cancelled"
    assert res.result.feasible
    assert_within_limits(res.problem, res.trajectory.X, res.trajectory.U, res.problem.limits)
    res = solve_spec(load_spec(WAVE_SPEC, {"optimizer.deadline": 0.3}))
    assert res.result.reason in ("deadline", "converged") and res.result.feasible
    assert_within_limits(res.problem, res.trajectory.X, res.trajectory.U)


def test_the_unconstrained_optimum_starts_where_the_hanging_arm_gets_stuck():
    """Reach-and-point on the hardware's limits: straight from the hanging arm (``optimizer.start: initial``) the
    barrier's interior iterates push the carriage to its 0.9 m range end, where they stay (hundreds of active
    steps) with the arm far below the motion (RMS > 20°) and the cost thousands of times the optimum's; from the
    optimum without the inequality constraints (the default), which lies inside the range, the constrained
    optimum is reached (converged, RMS < 0.1°) and satisfies every limit."""
    over = dict(NO_RESERVE, **{"motion.name": "reach_point", "optimizer.max_iterations": 15})
    stuck = solve_spec(load_spec(WAVE_SPEC, dict(over, **{"optimizer.start": "initial"})))
    good = solve_spec(load_spec(WAVE_SPEC, over))
    rms = {name: [math.degrees(r.summary["tracking_errors"][j]["rms"]) for j in ("shoulder", "elbow")]
           for name, r in (("stuck", stuck), ("good", good))}
    rows = {r["label"]: r for r in stuck.trajectory.info["constraints"]["margins"]}
    assert rows["carriage <= 0.9 m"]["active_steps"] > 200 and min(rms["stuck"]) > 20.0
    assert good.result.converged and max(rms["good"]) < 0.1 and stuck.result.cost > 1000 * good.result.cost
    assert [s["stage"] for s in good.trajectory.info["stages"]] == ["without inequality constraints"]
    assert good.trajectory.info["stages"][0]["converged"]
    assert_within_limits(good.problem, good.trajectory.X, good.trajectory.U)
    print(f"\nreach_point: from the hanging arm RMS {rms['stuck']} deg, from the unconstrained optimum {rms['good']}")


def test_a_start_that_violates_the_constraints_is_reported_until_one_iterate_satisfies_them(wave_runs):
    """From the unconstrained optimum (70 m/s² in the first step): with no iteration allowed the result says
    no constraint-satisfying trajectory was found; given iterations, the barrier's quadratic extension
    brings it inside and it converges to the constrained optimum."""
    on, off = wave_runs
    p = on.problem
    X, U = off.trajectory.X, off.trajectory.U
    r0 = ProjectionOptimizer(p.system, p.cost, OptimizerOptions(max_iterations=0)).optimize(X, U)
    assert not r0.feasible and r0.violation > 1.0
    r = ProjectionOptimizer(p.system, p.cost, p.options).optimize(X, U)
    assert r.feasible and r.converged
    assert r.cost == pytest.approx(on.result.cost, rel=1e-4)
    assert_within_limits(p, r.X, r.U)


@pytest.mark.parametrize("families", [("range", "speed", "acceleration"), ("tension",)])
def test_newton_model_with_barriers_is_second_derivative_of_projected_cost(families):
    """Prop. 6/7 with barrier terms: the Newton model (ℓ_xx + zᵀf_xx + wᵀλ_xx ...) equals D²g∘(ζ, ζ) of
    g = (h + barriers)∘P by central differences, at an iterate of the constrained wave."""
    spec = load_spec(WAVE_SPEC, {"constraints.families": list(families)})
    p = build_problem(spec)
    X0, U0 = p.system.simulate(p.x0, np.tile(p.x0[2:4], (p.N, 1)))[0], np.tile(p.x0[2:4], (p.N, 1))
    opt = ProjectionOptimizer(p.system, p.cost, OptimizerOptions(max_iterations=4))
    r = opt.optimize(X0, U0)
    assert r.feasible and r.steps == 4      # an iterate inside the constraints, well before the optimum
    X, U = r.X, r.U
    A, B = p.system.linearize_trajectory(X, U)
    K = opt.projection_gains(A, B)
    Z, V, slope, _ = opt.descent_direction("quasi_newton", X, U, A, B, K)
    scale = max(np.abs(Z).max(), np.abs(V).max())
    Z, V, slope = Z / scale, V / scale, slope / scale
    q_newton = opt.quadratic_model("newton", X, U, A, B, K).value(Z, V)

    def g(e):
        return opt.objective(*opt.project(X[0] + e * Z[0], X + e * Z, U + e * V, K))

    eps = 1e-4
    g0, gp, gm = g(0.0), g(eps), g(-eps)
    assert (gp - gm) / (2 * eps) == pytest.approx(slope, rel=1e-5)
    assert (gp - 2 * g0 + gm) / eps ** 2 == pytest.approx(q_newton, rel=1e-4)


# ------------------------------------------------------------------------ bad options


@pytest.mark.parametrize("section, key, message", [
    ({"families": ["range", "torque"]}, "constraints.families", "unknown constraint family torque"),
    ({"families": ["range", "range"]}, "constraints.families", "repeat"),
    ({"min_tension": -1}, "constraints.min_tension", "must be >= 0"),
    ({"min_tension": {"rope": 1.0}}, "constraints.min_tension", "rope: not a string of model 'marionette_arm'"),
    ({"margins": {"speed": 1.2}}, "constraints.margins.speed", "in [0, 1)"),
    ({"margins": {"tension": 0.1}}, "constraints.margins.tension", "applies to range, speed or acceleration"),
    ({"joint_limits": {"wrist": [0, 1]}}, "constraints.joint_limits.wrist", "not a configuration"),
    ({"joint_limits": {"elbow": [1, 0]}}, "constraints.joint_limits.elbow", "lower < upper"),
    ({"families": ["force"]}, "constraints.force_bounds", "needs force_bounds"),
    ({"force_bounds": {"carriage_next": [-1, 1]}, "families": ["force"]}, "constraints.force_bounds.carriage_next",
     "not a force input"),
    ({"margins": [0.1]}, "constraints.margins", "expected a mapping"),
    ({"tension_reserve": -0.1}, "constraints.tension_reserve", "must be >= 0"),
    ({"tension_reserve": "some"}, "constraints.tension_reserve", "expected a tension reserve in N"),
    ({"barrier_weight": 0}, "constraints.barrier_weight", "must be > 0"),
    ({"tolerance": -1e-3}, "constraints.tolerance", "must be > 0"),
    ({"enabled": "yes"}, "constraints.enabled", "true or false"),
    ({"surprise": 1}, "constraints.surprise", "unknown key"),
])
def test_bad_constraint_options_in_a_spec_name_the_key(section, key, message):
    data = yaml.safe_load(WAVE_SPEC.read_text())
    data["constraints"] = section
    with pytest.raises(SpecError) as err:
        build_problem(parse_spec(data, str(WAVE_SPEC)))
    text = str(err.value)
    assert text.startswith(f"{WAVE_SPEC}: {key}") and message in text, text


@pytest.mark.parametrize("fields, message", [
    (dict(constraints="maybe"), 'options.constraints must be "" (default), "on" or "off"'),
    (dict(constraint_families=["tension", "wrench"]), "options.constraint_families: unknown constraint family wrench"),
    (dict(min_tension=-0.5), "options.min_tension must be finite and >= 0"),
    (dict(speed_margin=1.5), "options.speed_margin: a margin is a fraction of the limit in [0, 1)"),
    (dict(tension_reserve=-0.1), "options.tension_reserve must be finite and >= 0"),
    (dict(reserve="on"), 'options.reserve must be "" (the node\'s default reserve) or "off"'),
    (dict(barrier_weight=math.nan), "options.barrier_weight must be finite and >= 0"),
    (dict(constraint_families=["configuration"], constraints="on"), None),
])
def test_bad_constraint_options_in_a_request_name_the_field(fields, message):
    arm = library.get("marionette_arm")
    if message is None:   # valid: the URDF's joint limits bound the arm
        p = R.build_problem(arm, motion_name="wave", options=R.RequestOptions(**fields))
        labels = [r.label for c in p.constraints for r in c.rows]
        assert "shoulder <= 2.6 rad" in labels and "elbow >= -0.2 rad" in labels
        return
    with pytest.raises(ProblemError) as err:
        R.build_problem(arm, motion_name="wave", options=R.RequestOptions(**fields))
    assert message in str(err.value), str(err.value)


def test_the_reserve_in_every_front_end():
    """The reserve for the feedback is part of the problem description: the defaults (DEFAULT_MARGINS,
    DEFAULT_TENSION_RESERVE) unless a spec, a request or Python says otherwise; a family not named keeps its
    default; a request's ``reserve: off`` keeps none but the fields it gives; the hardware's limits stay in the
    problem beside the reserved ones."""
    arm = library.get("marionette_arm")
    default = R.build_problem(arm, motion_name="wave")
    assert default.constraint_options.margins == DEFAULT_MARGINS
    assert default.constraint_options.tension_reserve == DEFAULT_TENSION_RESERVE
    assert default.limits.min_tension[0] == pytest.approx(LIMITS.min_tension[0] + DEFAULT_TENSION_RESERVE)
    assert default.hardware_limits.min_tension[0] == LIMITS.min_tension[0]
    np.testing.assert_array_equal(default.hardware_limits.max_velocity, LIMITS.max_velocity)
    some = R.build_problem(arm, motion_name="wave", options=R.RequestOptions(speed_margin=0.4, tension_reserve=0.05))
    assert some.constraint_options.margins == dict(DEFAULT_MARGINS, speed=0.4)
    assert some.constraint_options.tension_reserve == 0.05
    off = R.build_problem(arm, motion_name="wave", options=R.RequestOptions(reserve="off", range_margin=0.02))
    assert off.constraint_options.margins == {"range": 0.02, "speed": 0.0, "acceleration": 0.0}
    assert off.constraint_options.tension_reserve == 0.0
    np.testing.assert_array_equal(off.limits.max_acceleration, LIMITS.max_acceleration)
    spec = build_problem(load_spec(WAVE_SPEC, {"constraints.margins": {"acceleration": 0.5},
                                               "constraints.tension_reserve": 0.0}))
    assert spec.constraint_options.margins == dict(DEFAULT_MARGINS, acceleration=0.5)
    np.testing.assert_allclose(spec.limits.max_acceleration, 0.5 * LIMITS.max_acceleration)
    np.testing.assert_array_equal(spec.limits.min_tension, LIMITS.min_tension)
    assert ConstraintOptions(margins={"range": 0.0}).margins == dict(DEFAULT_MARGINS, range=0.0)


def test_bad_constraint_options_in_python_raise_with_the_key():
    with pytest.raises(ProblemError, match="unknown constraint family") as err:
        ConstraintOptions(families=("range", "slack"))
    assert err.value.key == "constraints.families"
    with pytest.raises(ProblemError, match="expected a minimum tension in N") as err:
        ConstraintOptions(min_tension="strong")
    assert err.value.key == "constraints.min_tension"
    with pytest.raises(ProblemError, match="expected \\[lower, upper\\]") as err:
        ConstraintOptions(force_bounds={"torque": 3.0})
    assert err.value.key == "constraints.force_bounds.torque"
