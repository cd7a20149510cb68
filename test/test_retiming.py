"""Re-timing motions too fast for the arm (ocp/retiming.py) and the trackability it decides by (ocp/trackability.py).

Evidence:
* the wave at twice its speed is not trackable as drawn: its optimum rides the drives' (reserved) speed and
  acceleration limits and misses the motion by more than the tolerance; re-timed uniformly, it becomes
  trackable, every drive limit with its reserve and the tension floor hold at every step (recomputed from the
  trajectory, not the constraint code), and the factor is not larger than needed: within 5 % of the smallest
  trackable one an independent bisection finds here (whole steps between the drawn timing and the wave's own,
  which is twice as slow and trackable; trackability recomputed from the trajectory);
* the warp slows only the keyframe intervals that need it: it is trackable, no longer than the uniform
  re-timing, and the interval the drawn optimum follows best keeps (nearly) its timing;
* a trackable motion is not re-timed; with re-timing off the result says what limits a too-fast motion;
* a cancel ends the search with the smallest trackable timing found so far;
* re-timing needs keyframes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from arm_helpers import physical
from marionette_control.ocp.problem import DEFAULT_TRACKING_TOLERANCE, ProblemError
from marionette_control.ocp.retiming import Timing, solve_retimed
from marionette_control.ocp.spec import load_spec, parse_spec
from marionette_control.ocp.spec_problem import build_problem, solve_spec
from marionette_control.resources import config_dir

WAVE_SPEC = config_dir() / "optimize" / "marionette_arm_wave.yaml"
TOL = 1e-6   # the optimizer's feasibility tolerance on normalized margins
WAVE = yaml.safe_load((config_dir() / "motions" / "wave.yaml").read_text())


def wave_spec(stretch: float, retime="off", **retime_options):
    """The wave spec with the wave's keyframes at ``stretch`` times their drawn times (0.5: twice as fast)."""
    data = yaml.safe_load(WAVE_SPEC.read_text())
    data.pop("output")
    data["motion"] = {"joints": WAVE["joints"], "angle_unit": "deg", "interpolation": "clamped",
                      "keyframes": [[t * stretch] + v for t, *v in WAVE["keyframes"]]}
    data["retime"] = dict(mode=retime, **retime_options)
    return parse_spec(data, str(WAVE_SPEC))


def within_reserved_limits(problem, X, U) -> bool:
    """Every drive range, speed and acceleration limit less its margin, and the tension floor, at every step."""
    lim = problem.limits
    rho, speed, acc, tension = physical(problem.system, X, U)
    return bool(np.all(rho >= lim.lower - 1e-9) and np.all(rho <= lim.upper + 1e-9)
                and np.all(np.abs(speed) <= lim.max_velocity * (1 + TOL))
                and np.all(np.abs(acc) <= lim.max_acceleration * (1 + TOL))
                and tension.min() >= lim.min_tension[0] - TOL)


def trackable_here(result) -> bool:
    """Trackability recomputed from the trajectory: within the reserved limits, and the RMS error of each arm
    angle against the desired motion within the default tolerance."""
    p, tr = result.problem, result.trajectory
    rms = np.sqrt(np.mean((tr.X[:, :2] - p.Xd[:, :2]) ** 2, axis=0))
    return within_reserved_limits(p, tr.X, tr.U) and bool(np.all(rms <= DEFAULT_TRACKING_TOLERANCE))


@pytest.fixture(scope="module")
def fast_wave_uniform():
    return solve_spec(wave_spec(0.5, "uniform", precision=0.01))


def test_timing_stretches_keyframe_intervals_to_whole_steps():
    drawn = np.array([0.0, 0.4, 1.2, 2.0])
    u = Timing.uniform(drawn, 250, 0.01)
    np.testing.assert_allclose(u.times(), drawn * 1.25)
    assert u.steps == 250 and u.factor == pytest.approx(1.25)
    w = Timing.warp(drawn, np.array([0.0, 1.0, 0.5]), 2.0, 0.01)
    times = w.times()
    assert times[-1] == pytest.approx(round(times[-1] / 0.01) * 0.01, abs=1e-12)
    spans = np.diff(times) / np.diff(drawn)
    np.testing.assert_allclose(spans / spans[0], [1.0, 2.0, 1.5])      # 1 + (s − 1) w, then a common stretch
    assert 1.0 <= spans[0] < 1.0 + 0.01 / drawn[-1]                     # the stretch to whole steps is tiny
    assert w.to_dict()["keyframe_times"] == times.tolist()


@pytest.mark.slow
def test_twice_as_fast_wave_is_retimed_to_the_smallest_trackable_factor(fast_wave_uniform):
    res = fast_wave_uniform
    r = res.retiming
    assert r is not None and r.found and not r.stopped and r.mode == "uniform"
    # as drawn: not trackable, riding the drives' reserved speed and acceleration limits
    assert not r.drawn.trackable and max(r.drawn.rms.values()) > DEFAULT_TRACKING_TOLERANCE
    ridden = {label.split(" ")[1] for label, _ in r.drawn.limiting if label.startswith(("carriage", "string_length"))}
    assert {"speed", "acceleration"} <= ridden, r.drawn.limiting
    # re-timed: trackable, every drive limit with its reserve and the tension floor hold (recomputed)
    assert res.summary["trackable"] and res.summary["retime_factor"] == r.factor > 1.0
    assert trackable_here(res)
    assert res.problem.N == r.timing.steps and res.trajectory.info["retiming"]["factor"] == r.factor
    np.testing.assert_allclose(res.problem.keyframes.times, r.timing.times())
    # an independent bisection over whole steps between the drawn timing (400 steps) and the wave's own (800)
    N0 = build_problem(wave_spec(0.5)).N
    lo, hi = N0, 2 * N0
    assert not trackable_here(solve_spec(wave_spec(0.5)))
    assert trackable_here(solve_spec(wave_spec(1.0)))
    while hi - lo > 0.025 * hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if trackable_here(solve_spec(wave_spec(0.5 * mid / N0))) else (mid, hi)
    smallest = hi / N0
    print(f"\nthe wave at twice its speed: re-timed by {r.factor:.4f} in {len(r.trials)} solves; independent "
          f"bisection: {lo / N0:.4f} (not trackable) .. {smallest:.4f} (trackable)")
    assert r.factor == pytest.approx(smallest, rel=0.05)
    assert r.factor > lo / N0 * (1 - 0.01)          # not faster than the test found possible


@pytest.mark.slow
def test_warp_slows_only_the_intervals_that_need_it(fast_wave_uniform):
    res = solve_spec(wave_spec(0.5, "warp"))
    r = res.retiming
    assert r.found and r.mode == "warp" and res.summary["trackable"] and trackable_here(res)
    assert r.factor <= fast_wave_uniform.retiming.factor + 1e-9
    spans = np.array(r.timing.to_dict()["segment_factors"])
    assert r.weights.max() == 1.0 and r.weights.min() < 0.5
    calm = int(np.argmin(r.weights))
    assert spans[calm] < spans.max()                                    # slowed less than the worst interval
    assert spans[calm] == pytest.approx(1 + (spans.max() - 1) * r.weights[calm], abs=0.01)
    print(f"\nwarp: {r.factor:.4f} (uniform {fast_wave_uniform.retiming.factor:.4f}); interval factors "
          f"{np.round(spans, 3).tolist()}")


def test_a_trackable_motion_is_not_retimed():
    res = solve_spec(load_spec(WAVE_SPEC, {"retime": "uniform"}))
    r = res.retiming
    assert r.drawn.trackable and r.found and r.factor == 1.0 and len(r.trials) == 1
    assert res.problem.N == 800 and "trackable as drawn" in r.describe()


def test_with_retiming_off_the_result_says_what_limits_a_too_fast_motion():
    res = solve_spec(wave_spec(0.5))
    verdict = res.trajectory.info["trackability"]
    assert res.retiming is None and not res.summary["trackable"] and not verdict["trackable"]
    assert verdict["feasible"] and max(verdict["rms"].values()) > DEFAULT_TRACKING_TOLERANCE
    assert verdict["limiting"] and verdict["message"].startswith("not trackable: misses the motion by")
    assert any(label.startswith("carriage acceleration") for label, _ in verdict["limiting"])


def test_a_cancel_ends_the_search_with_the_smallest_trackable_timing_so_far():
    said = []
    stop = {"now": False}

    def log(message):
        said.append(message)
        if message.startswith("re-timing: ") and ": trackable" in message:
            stop["now"] = True

    res = solve_spec(wave_spec(0.5, "uniform"), log=log, should_stop=lambda: stop["now"])
    r = res.retiming
    assert r.found and r.stopped and "search stopped early" in r.describe()
    tried = [t for t in r.trials if t.verdict.trackable]
    assert len(tried) == 1 and r.factor == tried[0].factor == pytest.approx(1.5)
    assert res.summary["trackable"] and res.problem.N == round(1.5 * 400)


def test_retiming_needs_keyframes():
    p = build_problem(load_spec(WAVE_SPEC, {"retime": "uniform"}))
    p.keyframes = None
    with pytest.raises(ProblemError, match="re-timing needs the desired motion as keyframes") as err:
        solve_retimed(p, p.X0, p.U0)
    assert err.value.key == "retime.mode"
    assert math.isclose(p.retime.tolerance, DEFAULT_TRACKING_TOLERANCE)
