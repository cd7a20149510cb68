"""The controller never commands a slack string and starts smoothly (issue 24, point 4).

* The tension guard (tracking/tension_guard.py): its tension derivative in the command is the finite difference
  of the step's tension; its projection is the nearest point of the clamp's box on the tension floor (against
  scipy's SLSQP on the same problem); the native tick's guard (``_core.TickKernel.guard``) is the Python
  reference's to 1e-12, acting on the same commands; its floor goes below the minimum only while the drive
  encoders disagree with the command record (and d ticks after); with 10 % of commands a cycle late the wave
  tracks to its end (seeds where a floor held at the minimum aborted).
* The state estimate's last step ends at the command record's drive positions while the drive encoders confirm it,
  at the measured ones otherwise (native and reference alike); the re-timed elbow swings with three times the
  encoder noise keep the string (slow).
* The wave on the realistic profile (the one-sided string) on three encoder-noise seeds: no abort, the plant's
  string at or above its minimum tension throughout, the first 0.1 s included (the start blend), the commands
  within the drives' limits, and the tracking targets (closed loop RMS ≤ 0.5°, max ≤ 2°, the elbow's RMS at
  least 3× below feed-forward only; closed ≤ open on every joint).
* The plant family (config/plants/, three times the encoder noise, drives at 0.6 of their acceleration), on the wave and two other library motions
  (slow): no abort, tension at or above the minimum, closed loop ≤ feed-forward only on every joint (three noise
  seeds for the noise); damping ×3 is the case the LQ law does not meet (docs/tracking.md, "Plant family"), kept
  as a strict expected failure. (The wave with three times the encoder noise was one until the Kalman filter's
  drive-encoder noise became 1e-4 m: its string dipped to 0.35-0.47 N on seeds 0, 1 and 4 of 0-5.)
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from arm_helpers import check_tracking_safe, closed_and_open, wave_motion
from marionette_control.model.library import marionette_arm as ma
from marionette_control.model.limits import from_description
from marionette_control.ocp.spec import load_spec
from marionette_control.ocp.spec_problem import solve_spec
from marionette_control.resources import config_file
from marionette_control.sim.offline_loop import run_loop
from marionette_control.sim.profile import PLANT_FAMILY, PLANT_FAMILY_MOTIONS, PLANT_FAMILY_SEEDS, HardwareProfile
from marionette_control.tracking.controller import ControllerOptions, make_core
from marionette_control.tracking.tension_guard import raise_to_floor

TOL = 1e-12


@pytest.fixture(scope="module")
def wave():
    return wave_motion()[1]


@pytest.fixture(scope="module")
def cores(wave):
    """The fused core and the Python reference on the wave, loaded (not started)."""
    desc = ma.load_description()
    out = []
    for fused in (True, False):
        core = make_core(desc, ControllerOptions(command_delay_steps=1), fused=fused)
        core.load_trajectory(wave, "wave")
        out.append(core)
    return out


def _samples(wave, count=12, seed=0):
    """(j, x, u, u_ff, rho, v): states along the wave pushed off it, commands pushed off the plan (the carriage
    and the string length by up to ±1 cm), the stream state one step behind."""
    rng = np.random.default_rng(seed)
    m = ma.marionette_arm()
    for j in np.linspace(5, wave.N - 5, count).astype(int):
        x = wave.X[j] + np.r_[rng.normal(0, 0.01, m.nq), rng.normal(0, 0.05, m.nx - m.nq)]
        u_ff = wave.U[j]
        u = u_ff + np.r_[np.zeros(m.nu), rng.uniform(-0.01, 0.01, m.nk)]
        rho, v = wave.U[j - 1, m.nu:], (wave.U[j - 1, m.nu:] - wave.U[j - 2, m.nu:]) / wave.dt
        yield j, x, u, u_ff, rho, v


def test_the_tension_derivative_is_the_finite_difference(cores, wave):
    guard = cores[1].tracking.guard
    for _, x, u, *_ in _samples(wave, 6):
        T, Tu = guard.tensions(x, u)
        for i in range(len(u)):
            h = 1e-6
            e = np.zeros(len(u))
            e[i] = h
            fd = (guard.tensions(x, u + e)[0] - guard.tensions(x, u - e)[0]) / (2 * h)
            np.testing.assert_allclose(Tu[:, i], fd, rtol=1e-5, atol=1e-4)


def test_the_projection_is_the_nearest_point_of_the_box_on_the_floor():
    rng = np.random.default_rng(3)
    checked = 0
    for _ in range(40):
        n = 4
        lo, hi = -rng.uniform(0.1, 1, n), rng.uniform(0.1, 1, n)
        y, a = rng.uniform(-1.5, 1.5, n), rng.normal(0, 1, n)
        best = float(np.sum(np.where(a > 0, a * hi, a * lo)))    # the box's highest a.y'
        b = float(a @ np.clip(y, lo, hi)) + rng.uniform(0.05, 1.2) * (best - float(a @ np.clip(y, lo, hi)))
        out = np.array(raise_to_floor(y.tolist(), a.tolist(), b, lo.tolist(), hi.tolist()))
        assert np.all(out >= lo - 1e-12) and np.all(out <= hi + 1e-12)
        if b > best:  # out of reach: the box's point of highest predicted tension
            np.testing.assert_allclose(a @ out, best, atol=1e-9)
            continue
        ref = minimize(lambda z: np.sum((z - y) ** 2), np.clip(y, lo, hi), jac=lambda z: 2 * (z - y),
                       bounds=list(zip(lo, hi)), constraints=[{"type": "ineq", "fun": lambda z: a @ z - b,
                                                               "jac": lambda z: a}],
                       method="SLSQP", options={"ftol": 1e-14, "maxiter": 500})
        assert ref.success
        np.testing.assert_allclose(a @ out, b, atol=1e-9)
        np.testing.assert_allclose(out, ref.x, atol=1e-6)
        checked += 1
    assert checked >= 20


def test_the_native_guard_is_the_reference(cores, wave):
    fused, parts = cores
    kernel, guard = fused.tracking.kernel, parts.tracking.guard
    acted = 0
    for j, x, u, u_ff, rho, v in _samples(wave, 24, seed=5):
        native, native_acted = kernel.guard(u, u_ff, x, rho, v)
        ref = u.copy()
        assert guard.project(ref, u_ff, x, rho.tolist(), v.tolist()) == native_acted
        np.testing.assert_allclose(native, ref, rtol=0, atol=TOL)
        acted += native_acted
    assert 0 < acted < 24


def test_the_record_check_confirms_within_its_tolerance_and_holds_after_a_disagreement(cores):
    guard = cores[1].tracking.guard
    tol, hold = guard.record_tolerance, guard.record_hold
    assert tol == pytest.approx(3 * ControllerOptions().noise.actuator) and hold == 1  # the command delay
    rho = np.array([0.1, 0.3])
    guard.start_run()
    assert guard.confirmed and guard.confirm(rho + 0.9 * tol, rho)
    assert not guard.confirm(rho + [0.0, -1.1 * tol], rho)    # one drive off: a late or lost command, a lagging drive
    assert [guard.confirm(rho, rho) for _ in range(hold + 1)] == [False] * hold + [True]
    guard.start_run()


def test_the_floor_is_below_the_minimum_only_while_the_record_is_unconfirmed(cores, wave):
    """With a minimum above the feed-forward's predicted tension (the swings' turn): the record confirmed, the guard
    raises the command's linearized tension to the minimum where its box allows; unconfirmed, never above the
    feed-forward's."""
    guard = cores[1].tracking.guard
    minimum, reached = guard.minimum, 0
    try:
        for j, x, u, u_ff, rho, v in _samples(wave, 12, seed=3):
            lo, hi = guard.limits.box(rho, v)
            uc = np.clip(u, lo, hi)
            T, Tu = guard.tensions(x, uc)
            a, c = Tu[0], T[0] - Tu[0] @ uc
            feedforward = c + a @ np.clip(u_ff, lo, hi)
            guard.minimum = [feedforward + 0.2]
            out = {}
            for confirmed in (True, False):
                guard._since = guard.record_hold + 1 if confirmed else 0
                y = u.copy()
                guard.project(y, u_ff, x, rho.tolist(), v.tolist())
                out[confirmed] = c + a @ np.clip(y, lo, hi)
            assert out[False] <= max(T[0], feedforward) + 1e-9
            assert out[True] >= out[False] - 1e-9
            reached += out[True] >= feedforward + 0.2 - 1e-9
    finally:
        guard.minimum = minimum
        guard.start_run()
    assert reached >= 6, reached


def test_the_estimate_ends_its_step_at_the_record_the_encoders_confirm(cores, wave):
    """Drives read within the record's tolerance: the estimate is the one of drives at the record (their noise stays
    out of the momenta); a drive off by more: the measured positions (a late command, a lagging drive); the native
    tick's estimate is the reference's either way."""
    m = ma.marionette_arm()
    tol = cores[1].tracking.guard.record_tolerance
    q0 = wave.X[0, :m.nq]
    record = wave.X[0, m.nd:m.nq]   # the drives hold their first positions until the first command acts
    estimates = {}
    for offset in (0.0, 0.9, 1.1):
        q1 = q0 + np.r_[1e-4, -2e-4, offset * tol, -offset * tol]
        out = []
        for core in cores:
            tr = core.tracking
            tr.start_run(tr.limits.hold(record))
            tr.estimate_predict(0, q0, None)
            out.append(tr.estimate_predict(1, q1, q0)[0])
        np.testing.assert_allclose(out[0], out[1], rtol=0, atol=TOL)
        estimates[offset] = out[1]
    for core in cores:   # the record confirmed again for the tests after this one
        core.tracking.start_run(core.tracking.limits.hold(record))
    np.testing.assert_array_equal(estimates[0.9], estimates[0.0])
    assert np.max(np.abs(estimates[1.1][m.nq:] - estimates[0.0][m.nq:])) > 1e-6


@pytest.mark.slow
def test_the_swings_with_three_times_the_encoder_noise_keep_the_string():
    """The re-timed elbow swings with three times the encoder noise, seed 0: the string at or above its minimum (0.35 N
    while the estimate ended its steps at the measured drive positions; docs/tracking.md, "Issue 24's two dips")."""
    spec = load_spec(config_file("optimize", "marionette_arm_wave.yaml"),
                     {"motion.name": "elbow_swings", "retime.mode": "uniform"})
    profile = HardwareProfile.named("realistic", seed=0, **PLANT_FAMILY["noise_x3"])
    limits = from_description(ma.load_description())
    record = run_loop(solve_spec(spec).trajectory, profile,
                      ControllerOptions(command_delay_steps=profile.command_delay_steps)).record(limits)
    assert not record["aborted"], record["abort_reason"]
    assert record["tension_min_n"]["motion"] >= float(limits.min_tension[0]), record["tension_min_n"]


@pytest.mark.parametrize("seed", [1, 2])
def test_late_commands_unconfirm_the_record_and_the_loop_tracks(wave, seed):
    """10 % of commands a cycle late (the native tick): the record check hands the floor back to the feed-forward
    and the wave tracks to its end (a floor held at the minimum throughout aborted these seeds, 6 of 0-11;
    docs/tracking.md, "Issue 24's two dips")."""
    profile = HardwareProfile.named("realistic", seed=seed, command_jitter_steps=1, command_jitter_probability=0.1)
    result = run_loop(wave, profile, ControllerOptions(command_delay_steps=profile.command_delay_steps))
    assert not result.aborted, result.abort_reason


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_wave_keeps_the_string_and_its_targets(wave, seed):
    limits = from_description(ma.load_description())
    closed, opened = closed_and_open(wave, HardwareProfile.named("realistic", seed=seed))
    c = check_tracking_safe(closed, opened, limits)
    o = opened.summary()
    assert max(e["rms_deg"] for e in c["errors"].values()) <= 0.5
    assert max(e["max_deg"] for e in c["errors"].values()) <= 2.0
    assert o["elbow"]["rms_deg"] >= 3.0 * c["errors"]["elbow"]["rms_deg"], (o, c["errors"])


@pytest.fixture(scope="module")
def motions(wave):
    out = {"wave": wave}
    for name in ("bow", "figure_eight"):
        spec = load_spec(config_file("optimize", "marionette_arm_wave.yaml"), {"motion.name": name})
        out[name] = solve_spec(spec).trajectory
    return out


DAMPING_X3 = ("damping x3: the LQ law alone's shoulder is worse than feed-forward only and the string dips below its "
              "minimum; with the planner planning only on an identified model beside it the three motions pass "
              "(test_online_identification.py)")


#: The cases the LQ law alone does not meet, and why (docs/tracking.md, "Plant family")
FAMILY_MISSES = {
    ("wave", "damping_x3"): DAMPING_X3, ("bow", "damping_x3"): DAMPING_X3, ("figure_eight", "damping_x3"): DAMPING_X3}


@pytest.mark.slow
@pytest.mark.parametrize("motion,plant", [
    pytest.param(m, p, marks=pytest.mark.xfail(strict=True, reason=FAMILY_MISSES[m, p])) if (m, p) in FAMILY_MISSES
    else (m, p) for m in PLANT_FAMILY_MOTIONS for p in PLANT_FAMILY])
def test_the_plant_family(motions, motion, plant):
    limits = from_description(ma.load_description())
    for seed in PLANT_FAMILY_SEEDS.get(plant, (0,)):
        profile = HardwareProfile.named("realistic", seed=seed, **PLANT_FAMILY[plant])
        check_tracking_safe(*closed_and_open(motions[motion], profile), limits)
