"""The main job's evaluation without ROS (marionette_control/cli/main_job/analysis.py): errors of the true angles
matched by stamp, executed margins (marionette_control/sim/margins.py, shared with the offline loop), the plant's
string tension, the targets.

Checked against an offline run of the controller on the realistic stand-in (its true states and tensions are
known) and signals whose answers are known by construction.
"""

from __future__ import annotations

import numpy as np
import pytest

from marionette_control.cli.main_job import analysis as A
from marionette_control.tracking.controller import ControllerOptions
from marionette_control.model.margins import consecutive_runs, drive_margins
from marionette_control.sim.offline_loop import run_loop
from marionette_control.sim.profile import HardwareProfile
from marionette_control.model.limits import from_description
from marionette_control.model.library import marionette_arm as ma

from arm_helpers import bump_trajectory

NS = 1_000_000_000
DT = 0.01


def run_as_recorded(result, dt: float, stamp0: int = 7 * NS, lost_truth=(), lost_ticks=()) -> A.RunData:
    """RunData of an offline run as the main job would record it: ticks with stamps, true states of every step
    (the string length's effort at step j: the tension over step j − 1, as the simulator publishes it), some
    true states and ticks lost in transport."""
    dt_ns = int(round(dt * NS))
    keep = np.array([i for i in range(len(result.k)) if i not in lost_ticks])
    steps = np.array([i for i in range(1, len(result.k)) if i not in lost_truth])
    effort = np.zeros((steps.size, 4))
    effort[:, 3] = result.tension[steps - 1, 0]
    return A.RunData(name="closed_loop", controller="c", feedback=True, k=result.k[keep],
                     stamp_ns=stamp0 + result.k[keep] * dt_ns, x_hat=result.X_hat[keep], u=result.commands[keep],
                     compute_us=np.ones(keep.size), fault_ticks=0, truth_stamp_ns=stamp0 + steps * dt_ns,
                     truth_q=result.X_true[steps, :4], truth_effort=effort, latency_ms=np.zeros(0))


def test_errors_are_the_true_angles_matched_by_stamp_against_the_trajectory():
    """On an offline run of the realistic stand-in, the evaluation's errors are the plant's true angles minus the
    trajectory at each tick (LoopResult.angle_errors), with lost messages skipped, never the estimate; the
    tension is the plant's, each step's at the step's start."""
    system, traj = bump_trajectory(DT, 120, delay=1)
    result = run_loop(traj, HardwareProfile.named("realistic"), ControllerOptions(command_delay_steps=1), hold_cycles=5)
    run = run_as_recorded(result, DT, lost_truth=(3, 40), lost_ticks=(7,))
    limits = from_description(ma.load_description())
    ev = A.evaluate(run, traj.X, DT, 2, limits)
    expected = result.angle_errors()
    keep = np.array([i for i in range(1, traj.N + 1) if i not in (3, 40, 7)])  # (tick 0: no true state kept)
    np.testing.assert_array_equal(ev.k, keep)
    np.testing.assert_array_equal(ev.errors, expected[keep])
    estimate_errors = result.X_hat[keep, :2] - traj.X[keep, :2]
    assert np.max(np.abs(ev.errors - estimate_errors)) > 1e-4  # the realistic estimate is not the truth
    steps = [i for i in range(1, len(result.k)) if i not in (3, 40)]
    np.testing.assert_array_equal(ev.step, steps)
    summary = A.error_summary(ev.errors, ["shoulder", "elbow"])
    assert summary["elbow"]["max_deg"] == pytest.approx(np.degrees(np.abs(expected[keep, 1]).max()))
    t, T = ev.tension["string"]
    np.testing.assert_array_equal(np.round(t / DT).astype(int), np.array(steps) - 1)
    np.testing.assert_array_equal(T, result.tension[np.array(steps) - 1, 0])
    executed = A.executed_margins(ev, limits, 1, traj.N)
    lowest = executed["motion"]["string_tension"]["string"]["lowest_N"]
    assert lowest == T[t / DT + 1 <= traj.N].min() and executed["after_end"]["string_tension"]["string"]["margin"] == \
        pytest.approx(T[t / DT + 1 > traj.N].min() - 0.5)
    # the offline loop's own record of the same run (the same function): the same where the samples are the same
    # (the recording has no true state of step 0 and no tension over the last step; the loop knows the slack time)
    mine = A.executed_margins(A.evaluate(run_as_recorded(result, DT), traj.X, DT, 2, limits), limits, 1, traj.N)
    loop = result.record(limits)["margins"]
    assert all(mine[part]["commands"] == loop[part]["commands"] for part in ("motion", "after_end"))
    assert mine["after_end"]["drives"] == loop["after_end"]["drives"]
    assert mine["motion"]["string_tension"]["string"] == \
        {k: v for k, v in loop["motion"]["string_tension"]["string"].items() if k != "slack_s"}


def test_drive_margins_of_a_known_motion():
    """ρ(t) = 0.2 + 0.3 t² on the carriage (speed 0.6 t, acceleration 0.6) against its limits."""
    limits = from_description(ma.load_description())
    j = np.arange(0, 101)
    t = j * DT
    rho = np.c_[0.2 + 0.3 * t ** 2, np.full(t.size, 0.5)]
    m = drive_margins(limits, rho, j, DT)["carriage"]
    # nearest its range at the end: 0.5 m against the upper end (0.9 m), nearer than 0.2 m to the lower (−0.3 m)
    assert m["range"]["margin"] == pytest.approx(limits.upper[0] - 0.5) and m["range"]["time_s"] == 1.0
    v_last = 0.3 * (t[-1] ** 2 - t[-2] ** 2) / DT
    assert m["speed"]["margin"] == pytest.approx(limits.max_velocity[0] - v_last)
    assert m["acceleration"]["margin"] == pytest.approx(limits.max_acceleration[0] - 0.6, abs=1e-9)
    assert all(v["satisfied"] for v in m.values())
    # a lost sample: no speed or acceleration across the gap (a jump of 5 m there is not a speed)
    rho[50:, 0] += 5.0
    gap = np.r_[j[:50], j[50:] + 1]
    m = drive_margins(limits, rho, gap, DT)["carriage"]
    assert m["speed"]["satisfied"] and not m["range"]["satisfied"]
    assert consecutive_runs(gap) == [slice(0, 50), slice(50, 101)]


def test_targets():
    closed = {"shoulder": {"rms_deg": 0.3, "max_deg": 0.7}, "elbow": {"rms_deg": 0.4, "max_deg": 1.2}}
    opened = {"shoulder": {"rms_deg": 0.29, "max_deg": 0.6}, "elbow": {"rms_deg": 1.3, "max_deg": 2.3}}
    t = A.issue_targets(closed, opened)
    assert t["worst_open_loop_joint"] == "elbow" and t["open_to_closed_rms_ratio"] == pytest.approx(3.25)
    assert t["met"] == {"rms": True, "max": True, "ratio": True, "feedback_not_worse": False}
    exact = {n: {"rms_deg": 0.0, "max_deg": 0.0} for n in closed}
    assert A.issue_targets(exact, exact)["open_to_closed_rms_ratio"] is None
