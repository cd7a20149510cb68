"""The quiet feedback (marionette_control/tracking/quiet_feedback.py, off by default; here at 10 Hz): its lag and its
surprise detector against their definitions, the native tick against the Python reference, and in closed loop on the
realistic stand-in.

* The lag: the command minus the law's is g − y, g = K_dyn δx_dyn, y the first-order lag of g with
  α = 1 − exp(−2π f_c Δt), restarted at g after a gap; none (y = g) while surprised, while a plan is in effect
  (``lagged`` False) and past the end.
* The detector: its filter is the Kalman filter of σ_s along the trajectory (to rounding); a jump of an encoder
  reading beyond the threshold is a surprise once armed (not before), a drive measured away from its command from the
  first update on; the lag is stepped aside for ``hold`` s after it.
* Closed loop, the wave on the realistic profile: the carriage's acceleration deviation from the plan's at least 35 %
  below the law without the lag on seeds 0 and 1, the wave's targets kept (RMS ≤ 0.5°, max ≤ 2°, feed-forward only
  ≥ 3× the closed loop's RMS on the elbow), no surprise; pushed (0.5 N at 5.6 s), the detector fires and the arm is
  back within 1° in less than 1 s (the law without the lag: 0.55 s; with the lag never stepped aside it never is).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from arm_helpers import bump_trajectory, wave_motion
from marionette_control.model.library import marionette_arm as arm
from marionette_control.sim.offline_loop import run_loop, scripted_push
from marionette_control.tracking.controller import make_core
from marionette_control.sim.profile import HardwareProfile
from marionette_control.sim.simulator import SimulatedArm
from marionette_control.tracking.controller_options import ControllerOptions
from marionette_control.tracking.estimation import EstimatorNoise, KalmanEstimator
from marionette_control.tracking.law import TrackingLaw
from marionette_control.tracking.quiet_feedback import MEAN_TIME, QuietFeedback, QuietOptions, dynamic_parts

TOL = 1e-12
#: the controller with the quiet feedback's lag at 10 Hz (off by default)
QUIET = ControllerOptions(quiet=QuietOptions(cutoff=10.0))


def _quiet(system, traj, armed_from=0, **options):
    opts = QuietOptions(**options)
    detector = KalmanEstimator(system, traj, EstimatorNoise(measurement=opts.detector_measurement), max_gap_steps=5)
    return QuietFeedback(traj, detector, opts, armed_from)


def test_the_dynamic_parts_are_the_angles_and_their_momenta():
    system, _ = bump_trajectory(0.01, 20, delay=1)
    np.testing.assert_array_equal(dynamic_parts(system.model), [0, 1, 4, 5])   # [q_dyn (2); ρ (2); p (2); v (2)]


def test_the_lag_against_its_definition():
    system, traj = bump_trajectory(0.01, 120, delay=1)
    law = TrackingLaw(system.model, traj)
    quiet = _quiet(system, traj, cutoff=10.0)
    alpha = 1.0 - math.exp(-2.0 * math.pi * 10.0 * traj.dt)
    rng = np.random.default_rng(2)
    dyn = [0, 1, 4, 5]
    y = None
    for j in range(40):
        x = traj.X[j] + rng.normal(scale=[2e-3, 2e-3, 1e-3, 1e-3, 1e-3, 1e-3, 1e-2, 1e-2])
        u = law.command(j, x)
        before = u.copy()
        quiet.apply(j, u, x, lagged=True)
        g = traj.K[j][:, dyn] @ (x - traj.X[j])[dyn]
        y = g if y is None else y + alpha * (g - y)
        np.testing.assert_allclose(u - before, g - y, rtol=0, atol=TOL)
    # the law's command (y = g): not lagged (a plan in effect), past the end, at a gap's first step, surprised
    def unchanged(j, lagged=True):
        x = traj.X[min(j, traj.N)] + 1e-3
        u = law.command(j, x)
        before = u.copy()
        quiet.apply(j, u, x, lagged)
        return np.array_equal(u, before)

    assert unchanged(40, lagged=False) and unchanged(traj.N) and unchanged(60)
    assert not unchanged(61)   # lagged again from the gap's first step on
    quiet._since = 0           # a surprise
    assert unchanged(62) and unchanged(63)


def _samples(traj, steps, rng):
    nq = traj.X.shape[1] // 2
    return [traj.X[k, :nq] + np.r_[rng.normal(scale=2e-4, size=2), 0.0, 0.0] for k in range(steps)]


def test_the_detector_is_the_quiet_filter_and_fires_on_a_jump_or_a_drive_off_its_command():
    system, traj = bump_trajectory(0.01, 120, delay=1)
    applied = traj.U.__getitem__
    qs = _samples(traj, 80, np.random.default_rng(4))
    reference = KalmanEstimator(system, traj, EstimatorNoise(measurement=8e-3), max_gap_steps=5)
    quiet = _quiet(system, traj, armed_from=10, hold=0.2)
    assert quiet.hold_steps == 20 and quiet.beta == pytest.approx(math.exp(-traj.dt / MEAN_TIME))
    for k, q in enumerate(qs[:30]):
        quiet.observe(k, q, None, applied)
        np.testing.assert_allclose(quiet.detector._x, reference.estimate(k, q, None, applied), rtol=0, atol=TOL)
    assert quiet.surprises == 0 and not quiet.surprised
    jump = qs[30].copy()
    jump[1] += 0.01   # an elbow reading 10 mrad off: 4× the threshold
    quiet.observe(30, jump, None, applied)
    assert quiet.surprised and quiet.surprises == 1
    for k in range(31, 31 + 20):
        quiet.observe(k, qs[k], None, applied)
        assert quiet.surprised, k   # within hold (the jump's own innovation decays through the filter)
    for k in range(51, 75):
        quiet.observe(k, qs[k], None, applied)
    assert not quiet.surprised
    late = qs[75].copy()
    late[2] += 2e-4   # the carriage 0.2 mm from its command
    surprises = quiet.surprises
    quiet.observe(75, late, None, applied)
    assert quiet.surprised and quiet.surprises == surprises + 1
    # before it is armed the same jump is no surprise; a drive off its command is one from the first update on
    early = _quiet(system, traj, armed_from=10)
    for k, q in enumerate(qs[:5]):
        early.observe(k, q + (np.r_[0.0, 0.01, 0.0, 0.0] if k == 4 else 0.0), None, applied)
    assert early.surprises == 0
    early.observe(5, qs[5] + np.r_[0.0, 0.0, 2e-4, 0.0], None, applied)
    assert early.surprises == 1


@pytest.mark.parametrize("field, value", [("cutoff", -1.0), ("detector_measurement", 0.0), ("threshold", -1e-3),
                                          ("drive_threshold", 0.0), ("hold", -0.1)])
def test_bad_options_are_refused_naming_the_parameter(field, value):
    with pytest.raises(ValueError, match=f"quiet_feedback.{field}"):
        QuietOptions(**{field: value})


def _deviation(r):
    return r.commands_summary()["carriage"]["acceleration_deviation_rms"]


def _run(wave, profile, options, **kw):
    """The run and its core's surprises."""
    core = make_core(arm.load_description(), options)
    core.load_trajectory(wave, "wave")
    return run_loop(wave, profile, options, core=core, **kw), core.staging.tracking.surprises


@pytest.mark.parametrize("seed", [0, 1])
def test_the_wave_is_quieter_and_keeps_its_targets(seed):
    _, wave = wave_motion()
    profile = HardwareProfile.named("realistic", seed=seed)
    loud = run_loop(wave, profile, ControllerOptions())
    quiet, surprises = _run(wave, profile, QUIET)
    opened = run_loop(wave, profile, ControllerOptions(feedback=False))
    assert not quiet.aborted and surprises == 0
    assert _deviation(quiet) < 0.65 * _deviation(loud), (_deviation(quiet), _deviation(loud))
    s, so = quiet.summary(), opened.summary()
    assert all(v["rms_deg"] <= 0.5 and v["max_deg"] <= 2.0 for v in s.values()), s
    assert so["elbow"]["rms_deg"] >= 3.0 * s["elbow"]["rms_deg"], (s, so)


def test_a_push_is_a_surprise_and_the_arm_recovers():
    _, wave = wave_motion()
    push = scripted_push(5.6, wave.dt, 0.5)
    options = ControllerOptions(quiet=QUIET.quiet,
                                tolerances={"path": {n: 0.0 for n in arm.load_description().model.config_names}})
    r, surprises = _run(wave, HardwareProfile.named("realistic"), options, pushes=[push])
    back = r.recovery_time(push.tick)
    assert surprises > 0
    assert back is not None and back < 1.0, back


def test_the_native_tick_agrees_with_the_python_reference_while_the_lag_acts_and_after_a_surprise():
    """test_tick_kernel.py's agreement with the lag acting and stepped aside: no command late, the bump pushed at
    tick 100; per tick both cores' commands agree to 1e-12, the reference's history taking the fused core's commands
    (test_tick_kernel.py's docstring says why)."""
    _, traj = bump_trajectory(0.01, 200, delay=1)
    desc = arm.load_description()
    fused, parts = make_core(desc, QUIET), make_core(desc, QUIET, fused=False)
    for core in (fused, parts):
        core.load_trajectory(traj, "bump")
    plant = SimulatedArm(HardwareProfile.named("realistic", seed=3), traj.dt, nominal=desc,
                         q0=traj.X[0, :desc.model.nq])
    stamp, dt_ns = 10 ** 9, 10 ** 7
    lagged = ticks = 0
    for cycle in range(traj.N + 20):
        if cycle == 5:
            assert fused.start()[0] and parts.start()[0]
        q = plant.measure()
        a, b = fused.on_joint_state(q, stamp, stamp), parts.on_joint_state(q, stamp, stamp)
        if a.kind == "tick":
            ticks += 1
            np.testing.assert_allclose(a.command, b.command, rtol=0, atol=TOL)
            np.testing.assert_allclose(a.x_hat, b.x_hat, rtol=0, atol=TOL)
            quiet = parts.tracking.quiet
            lagged += quiet._y is not None and not quiet.surprised and a.k + 1 < traj.N
            history = parts.tracking.history
            history.sent(history.last_slot, a.command)
            if a.k == 100:
                plant.disturb("forearm_inertial", "half_sine", force=(0.0, 0.5, 0.0), duration=0.1)
        if a.command is not None:
            plant.receive_command(a.command[desc.model.nu:])
        plant.step()
        stamp += dt_ns
    assert fused.tracking.surprises == parts.tracking.surprises > 0
    assert lagged >= 90, (lagged, ticks)   # the ticks before the push (the hold after it: 150)
