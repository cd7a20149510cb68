"""The identification motion the optimizer designs (marionette_control/identification/excitation.py) and the shipped
config/motions/identify.yaml.

Evidence: the candidates start and end at rest in the lowered pose with the elbow leading; the holding check agrees
with the arm's static equilibria (the wave is held everywhere, the straight hanging pose is not); the information's
free directions are the physics': a common scale of the inertial base parameters and the damping leaves a recorded
trajectory satisfying the DEL equations exactly (derived here from the planar arm's base parameters, not from the
Jacobian), and the out-of-plane placements enter only to second order; the shipped motion is held, optimized,
followed, tracked on the stand-in family without aborting, and more informative than the wave.
"""

from __future__ import annotations

import numpy as np
import pytest

from marionette_control.identification import excitation as E
from marionette_control.identification.equation_error import EquationError, parameter_values
from marionette_control.identification.parameters import ModelParameters
from marionette_control.model.library import marionette_arm as arm
from marionette_control.model.motion import load_motion
from marionette_control.resources import config_file

L1 = -0.25   # m: the elbow below the shoulder along the upper arm (docs/models.md: shoulder → elbow 0.25 m)


@pytest.fixture(scope="module")
def designer():
    return E.Designer(ModelParameters(config_file("marionette_arm.yaml")))


@pytest.fixture(scope="module")
def shipped():
    return load_motion(config_file("motions", "identify.yaml"))


@pytest.fixture(scope="module")
def identify(shipped):
    """The shipped motion optimized as the design optimized it."""
    return E.optimize(shipped.times, shipped.values)


@pytest.fixture(scope="module")
def wave():
    return E.wave_trajectory()


def test_a_candidate_starts_and_ends_at_rest_with_the_elbow_leading():
    d = E.SumOfSines.random(np.random.default_rng(3))
    t = np.linspace(0.0, d.duration, 8001)
    theta = d.angles(t)
    rest = np.array(arm.LOWERED)
    for edge in (t <= d.hold, t >= d.duration - d.hold):
        np.testing.assert_allclose(theta[edge], np.broadcast_to(rest, theta[edge].shape), atol=1e-12)
    velocity = np.gradient(theta, t, axis=0)
    assert np.all(np.abs(velocity[[0, -1]]) < 1e-6)
    # the elbow's window opens `lead` s before the shoulder's and closes `lead` s after it
    up = (t > d.hold) & (t <= d.hold + d.lead)
    assert np.allclose(theta[up, 0], rest[0]) and not np.allclose(theta[up, 1], rest[1])
    times, values = d.keyframes()
    assert times[-1] == pytest.approx(E.DURATION) and np.allclose(np.diff(times), E.KEY_STEP)
    np.testing.assert_allclose(values, d.angles(times))


def test_holding_agrees_with_the_static_equilibria(designer):
    wave = load_motion(config_file("motions", "wave.yaml"))
    held = E.holdable(designer.model, wave, designer.limits)
    assert held.ok, held.failure
    assert held.tension >= E.MIN_TENSION and held.moment_arm >= E.HOLD_MOMENT_ARM and held.range_margin >= 0
    hanging = designer.motion(np.array([0.0, 1.0]), np.zeros((2, 2)))
    bad = E.holdable(designer.model, hanging, designer.limits)
    assert not bad.ok and "(0.0°, 0.0°)" in bad.failure


def test_a_common_scale_of_the_base_parameters_leaves_the_del_equations_satisfied(designer, identify):
    """The planar arm's base parameters (m1 c1 + m2 l1, I1 + m1 c1² + m2 l1², m2 c2, I2 + m2 c2²) and the damping,
    scaled by 1.1 with the masses fixed: the optimized trajectory (exact for the nominal model) satisfies the DEL
    equations of the scaled model too — to the integrator's tolerance, whereas 1 % on one inertia alone does not."""
    p = designer.params
    names = ["upper_arm.center_of_mass.z", "upper_arm.inertia.xx", "forearm.center_of_mass.z", "forearm.inertia.xx",
             "shoulder.damping", "elbow.damping"]
    parameters = p.parameters(names)
    c1, I1, c2, I2, d1, d2 = parameter_values(p, parameters)
    m1, m2 = (p.nominal(p.parameter(n)) for n in E.WEIGHED)
    s = 1.1
    c1s = (s * (m1 * c1 + m2 * L1) - m2 * L1) / m1
    I1s = s * (I1 + m1 * c1 ** 2 + m2 * L1 ** 2) - m1 * c1s ** 2 - m2 * L1 ** 2
    c2s = s * c2
    I2s = s * (I2 + m2 * c2 ** 2) - m2 * c2s ** 2
    ee = EquationError(p, identify.X[:, :p.description.model.nq], identify.dt, parameters)
    scaled = ee.evaluate([c1s, I1s, c2s, I2s, s * d1, s * d2]).error
    nominal = ee.evaluate([c1, I1, c2, I2, d1, d2]).error
    one_inertia = ee.evaluate([c1, 1.01 * I1, c2, I2, d1, d2]).error
    assert np.max(np.abs(nominal)) < 1e-9
    assert np.max(np.abs(scaled)) < 1e-9
    assert np.max(np.abs(one_inertia)) > 1e3 * np.max(np.abs(scaled))


def test_the_free_directions_are_the_scale_the_link_masses_and_the_out_of_plane_placements(designer, identify):
    info = designer.information(identify)
    names = info.names
    assert info.null == 5     # the common scale, each link's mass behind its first moment, hook.x, rail.x
    free = info.free

    def in_free(v):
        v = v / np.linalg.norm(v)
        return np.linalg.norm(v - free @ (free.T @ v)) < 1e-6

    for n in ("hook.translation.x", "rail.translation.x"):
        assert in_free(np.eye(len(names))[names.index(n)])
    # the scale direction of the test above, to first order, in prior units
    p = designer.params
    value = {n: p.nominal(p.parameter(n)) for n in names}
    m1, m2 = value["upper_arm.mass"], value["forearm.mass"]
    c1, c2 = value["upper_arm.center_of_mass.z"], value["forearm.center_of_mass.z"]
    dc1 = (m1 * c1 + m2 * L1) / m1
    direction = {"upper_arm.center_of_mass.z": dc1,
                 "upper_arm.inertia.xx": value["upper_arm.inertia.xx"] + m1 * c1 ** 2 + m2 * L1 ** 2 - 2 * m1 * c1 * dc1,
                 "forearm.center_of_mass.z": c2,
                 "forearm.inertia.xx": value["forearm.inertia.xx"] - m2 * c2 ** 2,
                 "shoulder.damping": value["shoulder.damping"], "elbow.damping": value["elbow.damping"]}
    v = np.array([direction.get(n, 0.0) for n in names]) / info.prior_std
    assert in_free(v)
    assert not in_free(np.eye(len(names))[names.index("forearm.inertia.xx")])
    # what the data leaves free keeps its prior; what it fixes shrinks
    for n, std, prior, ok in zip(names, info.std, info.prior_std, info.identifiable()):
        assert std <= prior * (1 + 1e-9), n
    assert info.identifiable()[names.index("hook.translation.z")]
    assert not info.identifiable()[names.index("hook.translation.x")]
    assert info.log_det == pytest.approx(float(np.sum(np.log1p(info.singular ** 2))), rel=1e-9)


def test_the_shipped_motion_is_held_followed_and_more_informative_than_the_wave(designer, shipped, identify, wave):
    assert shipped.name == "identify" and shipped.duration == pytest.approx(E.DURATION)
    np.testing.assert_allclose(shipped.values[[0, -1]], [arm.LOWERED, arm.LOWERED], atol=1e-6)
    held = E.holdable(designer.model, shipped, designer.limits)
    assert held.ok, held.failure
    s = identify.info["summary"]
    assert s["converged"] and s["constraints_satisfied"]
    assert all(v["rms"] <= E.TRACKING_TOLERANCE for v in s["tracking_errors"].values())
    ours, theirs = designer.information(identify), designer.information(wave)
    assert ours.null == theirs.null
    k = len(ours.singular) - ours.null
    assert ours.log_det > theirs.log_det + 3.0
    assert ours.singular[k - 1] > 3.0 * theirs.singular[k - 1]     # the weakest direction the data fixes
    text = config_file("motions", "identify.yaml").read_text()
    assert text.startswith("#") and "shows" in text.split("format:")[0] and "excites" in text.split("format:")[0]
    assert f"identify {ours.log_det:.1f}" in text and f"wave {theirs.log_det:.1f}" in text


@pytest.mark.slow
def test_the_shipped_motion_is_tracked_closed_loop_on_every_stand_in(designer, identify):
    """The motion is recorded before calibrating: the nominal model's controller tracks it on each plant of the
    family without aborting (the string slack at most 0.1 s: the hook 5 mm out leaves it slack at the start)."""
    tracked = designer.tracked(identify)
    assert set(tracked) == set(E.STAND_INS)
    for plant, t in tracked.items():
        assert not t["aborted"], (plant, t["reason"])
        assert t["max_deg"] < 20.0 and t["slack_s"] <= 0.1, (plant, t)


@pytest.mark.slow
def test_the_search_keeps_the_best_candidate_that_is_held_feasible_followed_and_tracked(designer, wave, tmp_path):
    best, tried = designer.search(seed=5, candidates=2, refinements=1)
    assert len(tried) == 3 and best in tried
    assert best.information is not None and not best.failure and best.tracked
    assert all(c.score <= best.score for c in tried)
    assert not any(t["aborted"] for t in best.tracked.values())
    text = E.motion_text(best, designer.information(wave), 5, 2, 1)
    assert "--seed 5" in text and text.count("\n  - [") == len(best.times)
    (tmp_path / "identify.yaml").write_text(text)
    np.testing.assert_allclose(load_motion(tmp_path / "identify.yaml").values, best.angles, atol=1e-5)  # 1e-4 deg
