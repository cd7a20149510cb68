"""Keyframe motions (marionette_control.model.motion): the wave of thesis §6.7.2, the C² spline, sampling at
the optimizer's dt, the desired trajectory, and the file errors."""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest

from marionette_control.model.motion import (MotionError, desired_configurations, desired_states, load_motion,
                                             make_motion)
from marionette_control.model.library import get
from marionette_control.model.library.marionette_arm import LOWERED, RAISED
from marionette_control.resources import config_file

WAVE = config_file("motions", "wave.yaml")


@pytest.fixture(scope="module")
def wave():
    return load_motion(WAVE)


def test_wave_file(wave):
    assert wave.name == "wave"
    assert wave.joints == ("shoulder", "elbow")
    assert wave.duration == 8.0
    np.testing.assert_allclose(wave.values[0], LOWERED, atol=1e-15)
    np.testing.assert_allclose(wave.values[-1], LOWERED, atol=1e-15)
    assert RAISED in [tuple(v) for v in wave.values]


def test_wave_raises_waves_three_times_and_lowers(wave):
    t, v = wave.sample(0.01)
    shoulder, elbow = np.degrees(v[:, 0]), np.degrees(v[:, 1])
    raised = (t >= 2.6) & (t <= 5.6)
    assert np.all(np.abs(shoulder[raised] - 80.0) < 1.0)
    assert shoulder[t <= 0.4].max() < 1.0 and shoulder[t >= 7.6].max() < 1.0
    # Three waves: three elbow maxima above 105° while raised, separated by minima below 70°.
    e = elbow[raised]
    peaks = [i for i in range(1, e.size - 1) if e[i] > e[i - 1] and e[i] >= e[i + 1] and e[i] > 105.0]
    troughs = [i for i in range(1, e.size - 1) if e[i] < e[i - 1] and e[i] <= e[i + 1] and e[i] < 70.0]
    assert len(peaks) == 3 and len(troughs) == 3


def test_spline_interpolates_is_c2_and_starts_and_ends_at_rest(wave):
    np.testing.assert_allclose(wave.evaluate(wave.times), wave.values, atol=1e-12)
    np.testing.assert_allclose(wave.evaluate(np.array([0.0, wave.duration]), 1), 0.0, atol=1e-12)
    eps = 1e-7
    for tk in wave.times[1:-1]:
        for d in (0, 1, 2):  # value, velocity, acceleration continuous across each knot
            left, right = wave.evaluate(tk - eps, d), wave.evaluate(tk + eps, d)
            assert np.abs(left - right).max() < 1e-4 * (1 + np.abs(left).max()), (tk, d)


def test_sampling_at_dt(wave):
    t, v = wave.sample(0.01)
    assert t.shape == (801,) and v.shape == (801, 2)
    assert t[-1] == pytest.approx(8.0, abs=1e-12)
    t2, _ = wave.sample(0.05)
    assert t2.size == 161
    with pytest.raises(MotionError, match=r"lasts 8.0 s, which is not a whole number of steps of dt = 0.03"):
        wave.sample(0.03)
    with pytest.raises(MotionError, match="dt must be a positive number"):
        wave.sample(0.0)
    with pytest.raises(MotionError, match=r"times must lie in \[0, 8.0\]"):
        wave.evaluate(8.5)


def test_desired_trajectory_zeroes_everything_but_the_angles(wave):
    """Thesis §6.7.2: carriage, string length, velocities and momenta are 0 in the desired trajectory."""
    model = get("marionette_arm")
    t, X = desired_states(model, wave, 0.01)
    assert X.shape == (801, model.nx) and model.nx == 8
    _, v = wave.sample(0.01)
    np.testing.assert_array_equal(X[:, :2], v)
    np.testing.assert_array_equal(X[:, 2:], 0.0)
    _, Q = desired_configurations(model, wave, 0.01)
    np.testing.assert_array_equal(Q, X[:, :4])


def test_names_map_motion_joints_to_configurations():
    model = get("marionette_arm")
    m = make_motion("w", ["arm_shoulder", "arm_elbow"], [0.0, 1.0], [[0.0, 0.5], [0.2, 0.7]])
    with pytest.raises(MotionError, match=r"joint 'arm_shoulder' is not a configuration of model 'marionette_arm'"):
        desired_states(model, m, 0.1)
    _, X = desired_states(model, m, 0.1, names={"arm_shoulder": "shoulder", "arm_elbow": "elbow"})
    np.testing.assert_allclose(X[-1, :2], [0.2, 0.7], atol=1e-14)


def write(tmp_path, text: str):
    p = tmp_path / "motion.yaml"
    p.write_text(textwrap.dedent(text))
    return p


def test_frame_numbers_and_mapping_rows_equal_seconds_and_lists(tmp_path):
    a = load_motion(write(tmp_path, """
        name: a
        joints: [shoulder, elbow]
        angle_unit: deg
        time_unit: frame
        fps: 24
        keyframes:
          - {t: 0, shoulder: 0, elbow: 10}
          - {t: 12, shoulder: 45, elbow: 20}
          - {t: 48, shoulder: 90, elbow: 0}
    """))
    b = make_motion("b", ["shoulder", "elbow"], [0.0, 0.5, 2.0], np.radians([[0, 10], [45, 20], [90, 0]]))
    np.testing.assert_allclose(a.times, b.times, atol=1e-15)
    np.testing.assert_allclose(a.evaluate(np.linspace(0, 2, 9)), b.evaluate(np.linspace(0, 2, 9)), atol=1e-14)


def test_natural_spline_has_zero_end_acceleration():
    m = make_motion("n", ["x"], [0.0, 1.0, 3.0], [[0.0], [1.0], [0.5]], spline="natural")
    np.testing.assert_allclose(m.evaluate(np.array([0.0, 3.0]), 2), 0.0, atol=1e-12)


def test_times_start_at_the_first_key():
    m = make_motion("s", ["x"], [2.0, 3.0], [[0.0], [1.0]])
    np.testing.assert_array_equal(m.times, [0.0, 1.0])


@pytest.mark.parametrize("body, pattern", [
    ("joints: [a]\nkeyframes: [[0, 1], [1, 2]]\n", r"missing key 'name'"),
    ("name: m\njoints: [a]\nkeyframes: [[0, 1], [1, 2]]\ntempo: 3\n", r"tempo: unknown key"),
    ("name: m\nformat: keyframe-motion/9\njoints: [a]\nkeyframes: [[0, 1], [1, 2]]\n", r"format: unsupported"),
    ("name: m\njoints: [a, a]\nkeyframes: [[0, 1, 1], [1, 2, 2]]\n", r"joints: joint names must be distinct"),
    ("name: m\njoints: []\nkeyframes: []\n", r"joints: at least one joint"),
    ("name: m\njoints: [a]\nangle_unit: grad\nkeyframes: [[0, 1], [1, 2]]\n", r"angle_unit: expected deg or rad"),
    ("name: m\njoints: [a]\ntime_unit: frame\nkeyframes: [[0, 1], [1, 2]]\n", r"fps: time_unit: frame needs fps"),
    ("name: m\njoints: [a]\nfps: 24\nkeyframes: [[0, 1], [1, 2]]\n", r"fps: fps is only used with time_unit"),
    ("name: m\njoints: [a]\nspline: linear\nkeyframes: [[0, 1], [1, 2]]\n", r"spline: expected one of clamped"),
    ("name: m\njoints: [a]\nkeyframes: [[0, 1]]\n", r"keyframes: a motion needs at least 2 keyframes"),
    ("name: m\njoints: [a]\nkeyframes: [[0, 1], [0, 2]]\n", r"keyframes\[1\]: times must increase strictly"),
    ("name: m\njoints: [a]\nkeyframes: [[0, 1], [1, 2, 3]]\n", r"keyframes\[1\]: expected \[t, a\] \(2 numbers\)"),
    ("name: m\njoints: [a]\nkeyframes: [[0, 1], [1, x]]\n", r"keyframes\[1\]\[1\] \(a\): expected a number, got 'x'"),
    ("name: m\njoints: [a]\nkeyframes: [[0, 1], [1, .inf]]\n", r"keyframes\[1\]\[1\] \(a\): expected a finite"),
    ("name: m\njoints: [a]\nkeyframes: [[-1, 1], [1, 2]]\n", r"keyframes\[0\]\[0\] \(t\): must be >= 0"),
    ("name: m\njoints: [a, b]\nkeyframes: [{t: 0, a: 1}, {t: 1, a: 2, b: 0}]\n", r"keyframes\[0\]: missing key 'b'"),
    ("name: m\njoints: [a]\nkeyframes: [{t: 0, a: 1, c: 2}, {t: 1, a: 2}]\n", r"keyframes\[0\].c: unknown key"),
    ("name: m\njoints: [a]\nkeyframes: [5, 6]\n", r"keyframes\[0\]: expected \[t, values...\]"),
    ("name: m\njoints: [a]\nkeyframes: [{t: 0, a: 1, a: 2}, {t: 1, a: 2}]\n", r"invalid YAML: .*duplicate key 'a'"),
])
def test_motion_file_errors_name_file_and_key(tmp_path, body, pattern):
    p = write(tmp_path, body)
    with pytest.raises(MotionError, match=pattern) as info:
        load_motion(p)
    assert str(info.value).startswith(str(p) + ": ")


def test_degrees_are_converted(wave):
    assert wave.values[:, 0].max() == pytest.approx(math.radians(80.0), abs=1e-15)
