"""Request → optimization problem (ocp/request.py), without ROS."""

import math

import numpy as np
import pytest

from marionette_control.model import library
from marionette_control.ocp import request as P
from marionette_control.lq.gains import GainDesign, design_gains
from marionette_control.ocp.optimizer import solve
from marionette_control.ocp.projection import IterationRecord, OptimizationResult
from marionette_control.ocp.report import convergence_history
from marionette_control.ocp.request import DesiredMotion, ProblemDefaults, ProblemError, RequestOptions

SEED_COST = 13297.3789  # seed 001 §VIII-A swing-up (docs/reproductions.md §1)


@pytest.fixture(scope="module")
def pendulum():
    return library.get("pendulum")


@pytest.fixture(scope="module")
def arm():
    return library.get("marionette_arm")


def swing_up(n=100, dt=0.1):
    return DesiredMotion(["theta"], [k * dt for k in range(n + 1)], [[0.0 if k < n // 2 else math.pi]
                                                                    for k in range(n + 1)])


def test_seed_001_swing_up_through_the_builder(pendulum):
    p = P.build_problem(pendulum, desired=swing_up(), options=RequestOptions(input_weight_names=["torque"],
                                                                              input_weights=[50.0]))
    assert p.dt == pytest.approx(0.1) and p.N == 100 and p.source == "desired"
    np.testing.assert_array_equal(p.Q, [1000.0, 1.0])
    np.testing.assert_array_equal(p.R, [50.0])
    np.testing.assert_array_equal(p.Qf, p.Q)
    assert [t.name for t in p.cost.terms] == ["state", "input", "terminal"]   # no limits: no constraint
    np.testing.assert_array_equal(p.X0, 0.0)  # hanging at rest is an equilibrium
    res = solve(p, p.X0, p.U0)
    r = res.result
    assert r.converged and r.cost == pytest.approx(SEED_COST, rel=1e-8)
    h = convergence_history(r, p.initial_cost)
    assert h.reason == "converged" and h.converged
    assert len(h.costs) == len(h.descent_norms) == len(h.step_lengths) == len(h.methods) == h.iterations + 1
    assert h.costs[0] == pytest.approx(p.initial_cost) and h.costs[-1] == pytest.approx(r.cost)
    assert h.descent_norms[-1] < p.options.tolerance and h.methods[0] == "" and h.step_lengths[0] == 0.0
    traj = res.trajectory
    traj.check_model(pendulum)
    assert traj.K.shape == (100, 1, 2) and traj.info["termination_reason"] == "converged"
    # designed gains for a model without drives: the dynamic-configuration weight on theta, the record shipped
    design = traj.info["gain_design"]
    assert design["delay_steps"] == 1 and design["state_weights"] == [1000.0, 1.0] and design["input_weights"] == [1.0]
    np.testing.assert_array_equal(traj.K, design_gains(p.system, traj.X, traj.U, GainDesign()).K)


def test_resampling_interpolates_and_infers_the_time_step(pendulum):
    coarse = DesiredMotion(["theta"], [1.0, 1.1, 1.2], [[0.0], [0.2], [0.6]])  # time runs from the first point
    dt, t, Qd, named = P.sample_desired(pendulum, coarse, 0.0, ProblemDefaults())
    assert dt == pytest.approx(0.1) and named == ["theta"]
    np.testing.assert_allclose(Qd[:, 0], [0.0, 0.2, 0.6])
    dt, t, Qd, _ = P.sample_desired(pendulum, coarse, 0.05, ProblemDefaults())
    np.testing.assert_allclose(t, [0.0, 0.05, 0.1, 0.15, 0.2])
    np.testing.assert_allclose(Qd[:, 0], [0.0, 0.1, 0.2, 0.4, 0.6])
    uneven = DesiredMotion(["theta"], [0.0, 0.1, 0.4], [[0.0], [0.1], [0.4]])
    dt, t, Qd, _ = P.sample_desired(pendulum, uneven, 0.0, ProblemDefaults(dt=0.05))
    assert dt == 0.05 and t.size == 9
    np.testing.assert_allclose(Qd[:, 0], t)


def test_arm_wave_problem(arm):
    p = P.build_problem(arm, motion_name="wave")
    assert p.N == 800 and p.dt == 0.01 and p.named == ["shoulder", "elbow"] and p.source == "motion 'wave'"
    # Weights by kind (thesis §6.7.2: only the arm angles weighted heavily).
    np.testing.assert_array_equal(p.Q, [1000, 1000, 0, 0, 1, 1, 0.01, 0.01])
    np.testing.assert_array_equal(p.R, [0.01, 0.01])
    np.testing.assert_allclose(p.Xd[0, :2], np.radians([0.0, 35.0]), atol=1e-12)
    np.testing.assert_array_equal(p.Xd[:, 2:], 0.0)
    # The initial trajectory: the desired initial angles with the string made taut, at the discrete rest
    # [q0; D2Ld(q0, q0); 0], inputs held.
    np.testing.assert_allclose(p.X0[0, :2], p.Xd[0, :2], atol=1e-12)
    np.testing.assert_array_equal(p.X0[0], p.system.state_from_configs(p.X0[0, :4], p.X0[0, :4]))
    np.testing.assert_array_equal(p.X0[0, 6:], 0.0)
    # The carriage and string hold the first pose at rest (static equilibrium): the initial
    # trajectory, inputs held, stays there.
    assert p.X0[0, 2] > 0 and p.X0[0, 3] > 0
    assert np.abs(p.X0[:, :4] - p.X0[0, :4]).max() < 1e-6
    np.testing.assert_array_equal(p.U0, np.tile(p.X0[0, 2:4], (800, 1)))
    assert max(abs(arm.constraints(x[:arm.nq])[0][0]) for x in p.X0) < 1e-9
    assert p.initial_cost == pytest.approx(p.cost.without_barriers().value(p.X0, p.U0))


def test_weights_by_name_override_the_defaults(arm):
    opts = RequestOptions(state_weight_names=["carriage", "p_elbow"], state_weights=[5.0, 0.0],
                          input_weight_names=["string_length_next"], input_weights=[3.0],
                          terminal_weight_names=["shoulder"], terminal_weights=[7.0])
    defaults = P.WeightDefaults(terminal_scale=2.0)
    Q, R, Qf = P.weight_vectors(arm, ["shoulder", "elbow"], defaults, opts)
    np.testing.assert_array_equal(Q, [1000, 1000, 5, 0, 1, 0, 0.01, 0.01])
    np.testing.assert_array_equal(R, [0.01, 3.0])
    np.testing.assert_array_equal(Qf, [7, 2000, 10, 0, 2, 0, 0.02, 0.02])


def test_desired_kinematic_inputs_follow_the_desired_kinematic_configurations(arm):
    d = DesiredMotion(["shoulder", "elbow", "carriage"], [0.0, 0.1, 0.2], [[0.0, 0.6, 0.1], [0.0, 0.6, 0.2],
                                                                          [0.0, 0.6, 0.3]])
    p = P.build_problem(arm, desired=d, options=RequestOptions(dt=0.05))
    np.testing.assert_allclose(p.Ud[:, 0], [0.15, 0.2, 0.25, 0.3])  # carriage_{k+1}
    np.testing.assert_array_equal(p.Ud[:, 1], 0.0)
    assert p.X0[0, 2] == pytest.approx(0.1)  # the named carriage is kept by the arm's consistency function


def test_consistency_sets_the_free_string_length_and_keeps_the_rest(arm):
    from marionette_control.ocp.tracking_problem import consistent_configuration
    from marionette_control.model.library import marionette_arm

    q = np.array([0.3, 0.9, 0.1, 0.0])  # string length far off (0, as in a desired trajectory)
    expected = marionette_arm.consistent_configuration(arm, *q[:3])
    for named in (["shoulder", "elbow"], ["shoulder", "elbow", "carriage"]):
        qc = consistent_configuration(arm, q, named)
        np.testing.assert_array_equal(qc[:3], q[:3])
        assert abs(arm.constraints(qc)[0][0]) < 1e-12 and qc[3] == pytest.approx(expected[3], abs=1e-12)
    # Without a free string length, Gauss-Newton moves the carriage (the only free configuration).
    qc = consistent_configuration(arm, expected + [0, 0, 0, 0.05], free=[2])
    np.testing.assert_array_equal(qc[[0, 1, 3]], expected[[0, 1, 3]] + [0, 0, 0.05])
    assert abs(arm.constraints(qc)[0][0]) < 1e-10


def test_schedule_and_options(pendulum):
    d = ProblemDefaults(tolerance=1e-5, max_iterations=7, deadline=3.0)
    o = P.optimizer_options(RequestOptions(), d)
    assert o.schedule == (("quasi_newton", 4), ("newton", None)) and o.tolerance == 1e-5
    assert o.max_iterations == 7 and o.deadline == 3.0
    o = P.optimizer_options(RequestOptions(methods=["steepest", "newton"], method_iterations=[2, 0], tolerance=1e-3,
                                           max_iterations=9, deadline_s=0.5), d)
    assert o.schedule == (("steepest", 2), ("newton", None)) and o.tolerance == 1e-3
    assert o.max_iterations == 9 and o.deadline == 0.5


def test_convergence_history_of_a_stopped_run():
    recs = [IterationRecord(0, 5.0, 10.0, 1.0, "quasi_newton", 0.1), IterationRecord(1, 4.0, 3.0, 0.5, "newton", 0.2)]
    r = OptimizationResult(X=np.zeros((2, 1)), U=np.zeros((1, 1)), cost=4.0, converged=False, reason="cancelled",
                           history=recs, elapsed=0.3)
    h = convergence_history(r, 6.0)
    assert h.reason == "canceled" and h.iterations == 2 and not h.converged
    assert h.costs == [6.0, 5.0, 4.0] and h.step_lengths == [0.0, 1.0, 0.5]
    assert h.methods == ["", "quasi_newton", "newton"]
    assert h.descent_norms[:2] == [10.0, 3.0] and math.isnan(h.descent_norms[2])
    r.reason = "not_a_descent_direction"
    assert convergence_history(r, 6.0).reason == "error"
    r.reason = "deadline"
    assert convergence_history(r, 6.0).reason == "deadline"


GOOD = DesiredMotion(["theta"], [0.0, 0.1, 0.2], [[0.0], [0.1], [0.2]])


@pytest.mark.parametrize("kwargs, message", [
    (dict(desired=DesiredMotion(["shoulder"], [0, 1], [[0], [1]])), "'shoulder' is not a configuration"),
    (dict(desired=DesiredMotion(["theta"], [0, 0.2, 0.1], [[0], [1], [2]])), "points[2].time_from_start"),
    (dict(desired=DesiredMotion(["theta"], [0, math.nan], [[0], [1]])), "points[1].time_from_start is not finite"),
    (dict(desired=DesiredMotion(["theta"], [0, 0.1], [[0], [math.nan]])), "positions[0] (theta) is nan"),
    (dict(desired=DesiredMotion(["theta"], [0, 0.1], [[0], [1, 2]])), "points[1].positions has 2 values"),
    (dict(desired=DesiredMotion(["theta"], [0, 0.1, 0.2], [[0], [1]])), "2 points but 3 times"),
    (dict(desired=DesiredMotion([], [], [])), "the desired motion is empty"),
    (dict(), "the desired motion is empty"),
    (dict(motion_name="nope"), "unknown motion 'nope'"),
    (dict(motion_name="wave/../x"), "is not a library name"),
    (dict(desired=GOOD, options=RequestOptions(state_weight_names=["theta"], state_weights=[-2.0])), "must be >= 0"),
    (dict(desired=GOOD, options=RequestOptions(input_weight_names=["torque"], input_weights=[-1.0])), "must be > 0"),
    (dict(desired=GOOD, options=RequestOptions(terminal_weight_names=["x"], terminal_weights=[1.0])),
     "terminal_weight_names: unknown component(s) 'x'"),
    (dict(desired=GOOD, options=RequestOptions(state_weight_names=["theta", "theta"], state_weights=[1.0, 2.0])),
     "repeats theta"),
    (dict(desired=GOOD, options=RequestOptions(methods=["newton", "steepest"], method_iterations=[0, 3])),
     "options.method_iterations[0]: only the last entry of the schedule may run until convergence"),
    (dict(desired=GOOD, options=RequestOptions(methods=["gradient"], method_iterations=[0])),
     "options.methods[0]: unknown method 'gradient'"),
    (dict(desired=GOOD, options=RequestOptions(tolerance=-1.0)), "options.tolerance must be finite and >= 0"),
    (dict(desired=GOOD, options=RequestOptions(dt=-0.1)), "options.dt must be finite and >= 0"),
    (dict(desired=GOOD, options=RequestOptions(dt=math.inf)), "options.dt must be finite"),
    (dict(desired=GOOD, options=RequestOptions(dt=0.03)), "not a whole number of steps"),
])
def test_invalid_requests_are_refused_with_specific_messages(pendulum, kwargs, message):
    with pytest.raises(ProblemError) as e:
        P.build_problem(pendulum, **kwargs)
    assert message in str(e.value)


@pytest.mark.parametrize("desired, dt, message", [
    # two points 1000 s apart are evenly spaced: their spacing would be a single 1000 s step
    (DesiredMotion(["theta"], [0.0, 1000.0], [[0.0], [0.1]]), 0.0,
     "desired.points[].time_from_start (evenly spaced: their spacing is taken as the time step): the time step "
     "1000 s is above max_dt = 0.1 s"),
    (GOOD, 0.5, "options.dt: the time step 0.5 s is above max_dt = 0.1 s"),
    (GOOD, 1e-4, "options.dt: the time step 0.0001 s is below min_dt = 0.001 s"),
    (DesiredMotion(["theta"], [0.0, 0.1, 1000.0], [[0.0], [0.1], [0.2]]), 0.0,
     "the desired motion (desired.points[0..2]) lasts 1000 s, more than max_duration = 120 s"),
    (DesiredMotion(["theta"], [0.0, 30.0], [[0.0], [0.1]]), 0.001,
     "the desired motion (desired.points[0..1]) needs 30000 steps of dt = 0.001 s, more than the node's limit of "
     "max_steps = 20000"),
])
def test_implausible_time_grids_are_refused_naming_the_field_the_value_and_the_bound(pendulum, desired, dt, message):
    with pytest.raises(ProblemError) as e:
        P.build_problem(pendulum, desired=desired, options=RequestOptions(dt=dt))
    assert message in str(e.value)


def test_the_time_grid_bounds_are_the_defaults_and_apply_to_named_motions(arm):
    with pytest.raises(ProblemError, match=r"options.dt: the time step 0.2 s is above max_dt = 0.1 s"):
        P.build_problem(arm, motion_name="wave", options=RequestOptions(dt=0.2))
    with pytest.raises(ProblemError, match=r"motion 'wave' lasts 8 s, more than max_duration = 5 s"):
        P.build_problem(arm, motion_name="wave", defaults=ProblemDefaults(max_duration=5.0))
    with pytest.raises(ProblemError, match=r"default dt 0.5 s must lie in \[min_dt, max_dt\]"):
        ProblemDefaults(dt=0.5)
    assert ProblemDefaults(dt=0.5, max_dt=1.0).check_time_grid(0.5, 2.0, "options.dt", "x") == 4


def test_defaults_are_validated():
    with pytest.raises(ProblemError, match="default weight 'force_input' must be > 0"):
        P.WeightDefaults(force_input=0.0)
    with pytest.raises(ProblemError, match="default dt"):
        ProblemDefaults(dt=0.0)
    with pytest.raises(ProblemError, match="default optimizer options"):
        ProblemDefaults(schedule=(("newton", None), ("steepest", 2)))


def test_retime_fields_reach_the_problem_and_bad_ones_are_named(arm, pendulum):
    """``retime``, ``retime_tolerance`` and ``max_retime_factor`` (""/0: the node's defaults); the motion's
    keyframes stay with the problem and its ``rebuild`` makes the same request for re-timed ones (at the
    request's time step); errors name the field."""
    p = P.build_problem(arm, motion_name="beckon", options=RequestOptions(retime="warp", retime_tolerance=0.01))
    assert (p.retime.mode, p.retime.tolerance) == ("warp", 0.01)
    assert p.retime.max_factor == ProblemDefaults().retime.max_factor
    assert p.keyframes.joints == ("shoulder", "elbow") and p.keyframes.interpolation == "clamped"
    slower = p.rebuild(p.keyframes.retimed(1.5 * p.keyframes.times))
    assert slower.N == round(1.5 * p.N) and slower.dt == p.dt and slower.X0.shape == (slower.N + 1, 8)
    assert slower.source == p.source and slower.retime == p.retime
    points = P.build_problem(pendulum, desired=swing_up(10), options=RequestOptions(retime="uniform"))
    assert points.keyframes.interpolation == "linear" and points.dt == pytest.approx(0.1)
    twice = points.rebuild(points.keyframes.retimed(2 * points.keyframes.times))
    np.testing.assert_allclose(twice.Xd[::2, 0], points.Xd[:, 0], atol=1e-12)   # the points, twice as far apart
    for fields, message in ((dict(retime="sometimes"), "options.retime: expected one of off, uniform, warp"),
                            (dict(retime_tolerance=-1.0), "options.retime_tolerance must be finite and >= 0"),
                            (dict(max_retime_factor=0.5), "options.max_retime_factor: the largest slow-down")):
        with pytest.raises(ProblemError) as err:
            P.build_problem(arm, motion_name="wave", options=RequestOptions(**fields))
        assert message in str(err.value), str(err.value)
    with pytest.raises(ProblemError, match="lasts 600 s, more than max_duration = 120 s"):
        p.rebuild(p.keyframes.retimed(600.0 / p.keyframes.duration * p.keyframes.times))
