"""marionette_controller: the tick logic without ROS, and the node across processes.

The ROS-free part drives :class:`ControllerCore` directly (alignment of samples to ticks,
oversampling, gaps, hold at the end, pending trajectories). The cross-process part starts
the node in its own process on an isolated graph (private ROS_DOMAIN_ID, localhost
discovery) and plays the hardware from the test process: a fake joint-state publisher, the
command subscriber, /diagnostics, the start/stop services and, under use_sim_time, /clock.
Every node process is stopped at the end of its test.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from marionette_control import _core
from marionette_control.model import library
from marionette_control.tracking.controller import ERROR, OK, WARN, ControllerCore, ControllerOptions
from marionette_control.tracking.estimation import EstimatorNoise, KalmanEstimator, LegendreEstimator
from marionette_control.lq.gains import integral_gains
from marionette_control.tracking.integral_action import AngleIntegral
from marionette_control.tracking.command_limits import CommandLimits
from marionette_control.tracking.prediction import CommandHistory, DelayPredictor
from marionette_control.tracking.quiet_feedback import QuietFeedback
from marionette_control.tracking.sample_checks import SampleChecks
from marionette_control.tracking.start_blend import StartBlend
from marionette_control.tracking.tension_guard import RECORD_SIGMAS, TensionGuard
from marionette_control.tracking.law import TrackingLaw
from marionette_control.trajectory import Trajectory, TrajectoryError
from marionette_control.model.joint_map import JointMap
from marionette_control.model.limits import from_description
from marionette_control.model.library import marionette_arm as ma
from marionette_control.tracking.joint_states import JointStateReader

from arm_helpers import bump_trajectory

NS = 1_000_000_000
DT = 0.01
DT_NS = 10_000_000


# --------------------------------------------------------------------------------------------- fixtures


def arm_trajectory(dt: float = DT, steps: int = 200, model=None, delay: int = 1) -> tuple:
    """(DiscreteSystem, Trajectory with gains designed for ``delay``): test/arm_helpers.py's sin² bump."""
    return bump_trajectory(dt, steps, model, delay)


class Composed:
    """One tick by hand from the parts the core composes: estimator → predictor → law (with the integral of the
    measured angle errors the gains' design record asks for, held while it would push into a saturation; its feedback on the
    arm's own state lagged unless the surprise detector's test failed lately) → the start blend → the
    tension guard (``guard``: the node's core has one, from the model file's strings) → limits, the commands remembered in a
    CommandHistory (what the core must reproduce exactly, given the same samples)."""

    def __init__(self, arm, traj, delay: int, estimator: str, guard: bool = False):
        ds = _core.DiscreteSystem(arm.model, traj.dt)
        self.ds, self.delay, self.nd = ds, delay, arm.model.nd
        self.estimator = KalmanEstimator(ds, traj) if estimator == "kalman" else LegendreEstimator(ds)
        self.history = CommandHistory(arm.model.nU, arm.model.nk, delay)
        self.limits = arm.limits.for_dt(traj.dt)
        self.predictor = DelayPredictor(ds, delay, self.limits)
        self.law = TrackingLaw(arm.model, traj)
        self.integral = AngleIntegral(integral_gains(ds, traj), traj.dt, arm.model.nk)
        self.blend = StartBlend(int(round(ControllerOptions().start_blend / traj.dt)))
        options = ControllerOptions()
        self.guard = (TensionGuard(ds, from_description(arm.desc), options.tension_reserve, self.limits,
                                   RECORD_SIGMAS * options.noise.actuator, delay) if guard else None)
        quiet = ControllerOptions().quiet   # off by default: None
        self.quiet = (QuietFeedback(traj, KalmanEstimator(ds, traj, EstimatorNoise(
            measurement=quiet.detector_measurement)), quiet, armed_from=self.blend.steps) if quiet.active else None)

    def tick(self, k: int, q_prev, q) -> tuple[np.ndarray, np.ndarray]:
        if k == 0:
            self.history.start(self.limits.hold(q[self.nd:]))
            self.blend.arm(True)
            if self.quiet is not None:
                self.quiet.start_run()
        j = k + self.delay
        rho = None   # the drive positions the estimate's last step ends at: the record while the encoders confirm it
        if self.guard is not None:
            record = self.history.stream_state(k, self.ds.dt)[0]
            rho = np.asarray(record) if self.guard.confirm(q[self.nd:], record) else None
        x_hat = self.estimator.estimate(k, q, q_prev, self.history.applied, rho)
        x_pred = self.predictor.predict(k, x_hat, self.history)
        u = self.law.command(j, x_pred)
        if self.quiet is not None:
            self.quiet.observe(k, q, q_prev, self.history.applied, rho)
            self.quiet.apply(j, u, x_pred, True)
        self.integral.update(k, q, self.law.reference(k), j)
        self.integral.apply(j, u, self.history.last)
        self.blend.apply(j, u, self.law.feedforward(j))
        u_law = u.copy()
        stream = self.history.stream_state(j, self.ds.dt)
        if self.guard is not None:
            self.guard.project(u, self.law.feedforward(j), x_pred, *stream)
        self.limits.clamp(u, *stream)
        self.integral.note_command(u_law, u)
        self.history.sent(k, u)
        return u, x_hat


@pytest.fixture(scope="module")
def arm():
    desc = ma.load_description()
    ds, traj = arm_trajectory(delay=0)
    _, traj1 = arm_trajectory(delay=1)
    limits = CommandLimits.from_limits(from_description(desc))
    return SimpleNamespace(desc=desc, model=desc.model, ds=ds, traj=traj, traj1=traj1, limits=limits)


def measured(traj, i: int) -> np.ndarray:
    """A 'measured' configuration near the trajectory (off by a small, sample-dependent amount)."""
    return traj.X[min(i, traj.N), :4] + 1e-3 * np.array([1.0, -0.5, 0.3, -0.2]) * np.cos(0.3 * i)


NAMES_CORE = ("shoulder", "elbow", "carriage", "string_length")


def js(q, names=NAMES_CORE):
    return SimpleNamespace(name=list(names), position=[float(v) for v in q])


def make_core(arm, traj=None, delay: int = 0, estimator: str = "legendre", **kw):
    """A core over the arm's model file (limits, plausibility checks) with ``traj`` (default: the fixture's for
    ``delay``) loaded."""
    options = ControllerOptions(command_delay_steps=delay, estimator=estimator, **kw)
    checks = SampleChecks(arm.model, from_description(arm.desc), options.plausibility)
    core = ControllerCore(arm.model, JointStateReader(JointMap.of(arm.model, arm.desc.hardware_joints)).read,
                          arm.limits, checks, options)
    core.load_trajectory(traj if traj is not None else (arm.traj1 if delay else arm.traj), "test")
    return core


# --------------------------------------------------------------------------------------------- ROS-free core


@pytest.mark.parametrize("delay, estimator", [(0, "legendre"), (1, "kalman"), (2, "kalman")])
def test_core_ticks_equal_the_composed_parts_and_hold_at_the_end(arm, delay, estimator):
    traj = arm_trajectory(delay=delay)[1]
    core = make_core(arm, traj, delay, estimator)
    reference = Composed(arm, traj, delay, estimator)
    assert core.start()[0]
    t0 = 5 * NS
    # the Legendre estimate needs a sample one step earlier: its first tick is the second sample after start
    first = 1 if estimator == "legendre" else 0
    for i in range(0, traj.N + 30):
        q = measured(traj, i)
        names = ("string_length", "carriage", "elbow", "shoulder") if i % 2 else None
        msg = js(q[::-1], names) if names else js(q)  # reordered names map by name
        res = core.on_joint_state(msg, t0 + i * DT_NS, t0 + i * DT_NS + 300_000)
        if i < first:
            assert res.kind == "none" and res.fault is None
            continue
        u, x_hat = reference.tick(i - first, measured(traj, i - 1) if i else None, q)
        assert res.kind == "tick" and res.k == i - first and res.fault is None
        # (with the Kalman filter the core's tick is the fused native one: its products round like Eigen's, not
        # numpy's; test_tick_kernel.py holds the two to 1e-12 over closed loops)
        np.testing.assert_allclose(res.command, u, rtol=0, atol=1e-12)
        np.testing.assert_allclose(res.x_hat, x_hat, rtol=0, atol=1e-12)
    assert core.start() == (False, "already running; stop first")
    assert core.finished and core.status()[1].startswith("trajectory finished")
    # the final kinematic configuration, approached within the drives' limits from their measured positions (which
    # carry the samples' sub-millimetre ripple here)
    np.testing.assert_allclose(res.command, traj.X[-1, 2:4], atol=1e-2)
    assert core.missed_ticks == 0 and core.compute_stats()["count"] == traj.N + 30 - first
    assert dict(core.status()[2])["goal"] == "reached"


def test_core_oversampled_joint_states_tick_every_dt(arm):
    core = make_core(arm, stamp_tolerance=0.2)
    core.start()
    t0, step = 7 * NS, DT_NS // 5  # 500 Hz samples, 100 Hz ticks
    ticks = []
    for j in range(60):
        q = measured(arm.traj, j // 5) + 1e-5 * (j % 5)
        res = core.on_joint_state(js(q), t0 + j * step, t0 + j * step)
        if res.kind == "tick":
            ticks.append((j, res.k))
        assert res.kind in ("tick", "none") and res.fault is None
    assert ticks == [(5 * (k + 1), k) for k in range(len(ticks))] and len(ticks) == 11


def test_core_gap_holds_then_recovers_and_counts_missed_ticks(arm):
    """The Legendre estimate needs two samples dt apart: a gap holds (sample_gap) until they are there again."""
    core = make_core(arm)
    core.start()
    t = lambda i: 9 * NS + i * DT_NS  # noqa: E731
    for i in range(4):
        last = core.on_joint_state(js(measured(arm.traj, i)), t(i), t(i))
    res = core.on_joint_state(js(measured(arm.traj, 6)), t(6), t(6))  # samples 4, 5 lost
    assert res.kind == "hold" and res.fault == "sample_gap" and res.new_fault
    np.testing.assert_array_equal(res.command, last.command)  # held at the last command sent
    assert core.status()[0] == WARN
    res = core.on_joint_state(js(measured(arm.traj, 7)), t(7), t(7))
    assert res.kind == "tick" and res.recovered and res.k == 6 and res.missed == 3
    assert core.missed_ticks == 3 and core.status()[0] == OK


def test_a_run_starts_on_a_current_sample_not_on_one_that_queued(arm):
    """Samples that queued while the node was busy starting arrive back to back, each a period younger than the one
    before: none of them is the run's first tick, the current one is. A steady transport latency of two periods
    (every sample as old) costs one sample; no latency, none."""
    t = lambda i: 9 * NS + i * DT_NS  # noqa: E731
    for latency, arrivals, first in (
            (0, [t(i) for i in range(4, 9)], 4),                     # current samples: the first one ticks
            (0, [t(8) + i * 1000 for i in range(4, 9)] + [t(9), t(10)], 8),  # 4..7 queued till t(8): 8 ticks
            (2 * DT_NS, [t(i) + 2 * DT_NS for i in range(4, 9)], 5)):        # steady 20 ms: one passed over
        core = make_core(arm, delay=1, estimator="kalman")
        for i in range(4):
            core.on_joint_state(js(measured(arm.traj1, 0)), t(i), t(i) + latency)
        assert core.start()[0]
        ticks = []
        for i, now in enumerate(arrivals, start=4):
            res = core.on_joint_state(js(measured(arm.traj1, 0)), t(i), now)
            ticks += [i] if res.kind == "tick" else []
        assert ticks and ticks[0] == first and ticks == list(range(first, first + len(ticks))), (latency, ticks)
        assert core.start_skipped == first - 4 and dict(core.status()[2])["start_skipped"] == str(first - 4)


def test_kalman_core_bridges_a_short_gap_with_the_commands_in_flight(arm):
    """The filter predicts through lost samples (the inputs in effect meanwhile are known), so a short gap
    is no fault: the tick after it equals the composed parts predicting through the same steps."""
    core = make_core(arm, delay=1, estimator="kalman")
    reference = Composed(arm, arm.traj1, 1, "kalman")
    core.start()
    t = lambda i: 9 * NS + i * DT_NS  # noqa: E731
    for i in list(range(0, 5)) + [7, 8]:  # samples 5, 6 lost: ticks 5, 6 missed
        res = core.on_joint_state(js(measured(arm.traj1, i)), t(i), t(i))
        u, x_hat = reference.tick(i, None, measured(arm.traj1, i))
        assert res.kind == "tick" and res.fault is None and res.k == i
        np.testing.assert_allclose(res.command, u, rtol=0, atol=1e-12)   # the native tick and the parts: rounding
    assert core.missed_ticks == 2 and core.fault_counts == {}


def tail(traj, j: int, source_info=None) -> Trajectory:
    """The trajectory from its step j on (states j..N, inputs and gains j..N-1): a plan that starts at tick j."""
    return Trajectory(dt=traj.dt, X=traj.X[j:], U=traj.U[j:], state_names=traj.state_names,
                      input_names=traj.input_names, model_name=traj.model_name, model_hash=traj.model_hash,
                      K=traj.K[j:], info=dict(traj.info))


def test_core_refuses_unusable_trajectories_and_stages_new_ones_while_running(arm):
    core = make_core(arm)
    other = Trajectory.for_model(library.get("pendulum"), DT, np.zeros((3, 2)), np.zeros((2, 1)),
                                 K=np.zeros((2, 1, 2)))
    with pytest.raises(TrajectoryError, match="file.npz: trajectory was made for model 'pendulum', not "
                                              "'marionette_arm'"):
        core.load_trajectory(other, "file.npz")
    assert core.tracking.trajectory is arm.traj and "pendulum" in core.status()[1]
    no_gains = Trajectory.for_model(arm.model, DT, arm.traj.X, arm.traj.U)
    with pytest.raises(ValueError, match="no tracking gains"):
        core.load_trajectory(no_gains)
    with pytest.raises(ValueError, match="gains were designed for a command delay of 1 step.*compensates 0"):
        core.load_trajectory(arm.traj1, "delay1.npz")
    assert core.staged is None and core.trajectory_counts["refused"] == 3
    unrecorded = Trajectory.for_model(arm.model, DT, arm.traj.X, arm.traj.U, K=arm.traj.K)
    assert "carry no design record" in core.load_trajectory(unrecorded, "old.npz")  # used as it is, with a warning
    assert "no design record" in dict(core.status()[2])["trajectory_warning"]
    assert core.load_trajectory(arm.traj, "test").startswith("took trajectory test")  # idle: taken at once
    core.start()
    _, t2 = arm_trajectory(0.02, 50, delay=0)
    assert "tracking test continues" in core.load_trajectory(t2, "new")  # running: staged only
    assert core.dt == DT and core.trajectory_source == "test" and core.staged.source == "new"
    values = dict(core.status()[2])
    assert values["trajectory_staged"] == "new" and values["trajectory"] == "test"
    core.stop()  # idle, and no sample says where the arm is: taken
    assert core.dt == 0.02 and core.trajectory_source == "new" and core.staged is None
    assert core.trajectory_counts == {"staged": 4, "taken": 4, "switched": 0, "refused": 3}  # make_core loaded one


def test_core_never_retargets_while_running_and_switches_only_on_request(arm):
    """A trajectory given while tracking waits; the commands follow the first one. A switch request to a plan that
    starts where the arm is takes it from the next tick on, with the commands in flight carried over: switching to
    the remainder of the same plan changes no command at all; one to a plan that starts elsewhere is refused."""
    t = lambda i: 40 * NS + i * DT_NS  # noqa: E731
    plain, switching = (make_core(arm, arm.traj1, delay=1, estimator="legendre") for _ in range(2))
    for core in (plain, switching):
        core.on_joint_state(js(measured(arm.traj1, 0)), t(0), t(0))
        assert core.start()[0]
    elsewhere = tail(arm.traj1, 150)  # starts where the arm will be at tick 150, not now
    for i in range(1, 60):
        if i == 20:
            assert "continues" in switching.load_trajectory(elsewhere, "far")
            ok, message = switching.switch_trajectory()
            assert not ok and "is not where it starts" in message
        if i == 40:  # the remainder of the same plan from the next tick on (sample i is tick i - 1): where the arm is
            switching.load_trajectory(tail(arm.traj1, 39), "remainder")
            ok, message = switching.switch_trajectory()
            assert ok and "at tick 39" in message, message
        q = measured(arm.traj1, i)
        a, b = plain.on_joint_state(js(q), t(i), t(i)), switching.on_joint_state(js(q), t(i), t(i))
        assert a.kind == b.kind == "tick"
        np.testing.assert_array_equal(b.command, a.command)
        assert b.k == (a.k if i < 40 else a.k - 39), (i, a.k, b.k)
        if i == 40:
            assert b.event.startswith("switched at tick 39 to trajectory remainder") and b.k == 0
    assert switching.trajectory_source == "remainder" and switching.tracking.N == arm.traj1.N - 39
    assert switching.trajectory_counts == {"staged": 3, "taken": 1, "switched": 1, "refused": 1}
    assert dict(switching.status()[2])["trajectory_event"].startswith("switched at tick 39")


def test_core_takes_a_staged_trajectory_when_idle_once_the_arm_is_at_its_start(arm):
    t = lambda i: 50 * NS + i * DT_NS  # noqa: E731
    core = make_core(arm)
    core.on_joint_state(js(measured(arm.traj, 0)), t(0), t(0))
    later = tail(arm.traj, 150)
    message = core.load_trajectory(later, "later")
    assert "not taken: the arm is not where it starts" in message and core.trajectory_source == "test"
    assert core.switch_trajectory() == (False, "switch refused: " + message)
    res = core.on_joint_state(js(measured(arm.traj, 150)), t(100), t(100))  # a second later the arm is there
    assert res.event.startswith("took trajectory later") and core.trajectory_source == "later"
    assert core.switch_trajectory() == (False, "switch refused: no trajectory is staged")


def test_core_rejects_bad_samples_with_specific_kinds(arm):
    core = make_core(arm, state_timeout=0.05)
    assert core.on_watchdog(NS).fault == "no_data"
    core.start()
    t = lambda i: 20 * NS + i * DT_NS  # noqa: E731
    core.on_joint_state(js(measured(arm.traj, 0)), t(0), t(0))
    good = core.on_joint_state(js(measured(arm.traj, 1)), t(1), t(1))
    q1 = measured(arm.traj, 1)
    cases = [
        (js([np.nan, 0, 0, 0]), t(2), "non_finite"),
        (js([0, 0, 0], ("shoulder", "elbow", "carriage")), t(2), "missing_names"),
        (js([0, 0, 0, 0, 0], NAMES_CORE + ("elbow",)), t(2), "duplicate_names"),
        (SimpleNamespace(name=["shoulder", "elbow", "carriage", "string_length"], position=[0.0] * 3), t(2),
         "malformed"),
        (js(q1), t(1), "duplicate_stamp"),
        (js(q1), t(0), "out_of_order"),
        (js(q1), t(2) - NS, "stale"),
        (js(q1), t(2) + NS, "future_stamp"),
        (js(q1 + [1000.0, 0, 0, 0]), t(2), "out_of_limits"),  # a shoulder reading of 1000 rad
        (js(q1 + [0.3, 0, 0, 0]), t(2), "implausible_jump"),  # 0.3 rad in 10 ms: > 2 x 8 rad/s x 0.01 s + 0.02
        (js(q1 + [0, 0, 0, 0.03]), t(2), "chain_inconsistent"),  # the string 3 cm longer than the hook is far
    ]
    for msg, stamp, kind in cases:
        res = core.on_joint_state(msg, stamp, t(2))
        assert (res.kind, res.fault) == ("hold", kind), res.fault_message
        np.testing.assert_array_equal(res.command, good.command)
        assert core.status()[0] == ERROR
    res = core.on_joint_state(js(measured(arm.traj, 2)), t(2), t(2))
    assert res.kind == "tick" and res.recovered and res.k == 1
    stale = core.on_watchdog(t(2) + NS)
    assert stale.fault == "stale" and stale.kind == "hold" and stale.new_fault
    assert not core.on_watchdog(t(2) + NS + DT_NS).new_fault  # one episode, repeated hold
    assert core.fault_counts == {"no_data": 1, "non_finite": 1, "missing_names": 1, "malformed": 1,
                                 "duplicate_stamp": 1, "out_of_order": 1, "stale": 2, "future_stamp": 1,
                                 "duplicate_names": 1, "out_of_limits": 1, "implausible_jump": 1,
                                 "chain_inconsistent": 1}


def test_a_late_sample_after_stale_holds_is_a_tick_whose_command_follows_the_holds(arm):
    """Under load the joint states reach the node late: the watchdog declares them stale and holds at the slot of
    its clock's time, then a sample stamped before that slot (but younger than state_timeout) arrives. Its tick
    is computed; the command follows the holds already sent (the drives get it after them), and later ticks go
    on (this sequence of a loaded main job once raised 'command for slot 6 after one for slot 10')."""
    core = make_core(arm, delay=1, estimator="kalman", state_timeout=0.05)
    t = lambda i: 20 * NS + i * DT_NS  # noqa: E731
    core.on_joint_state(js(measured(arm.traj1, 0)), t(-1), t(-1))  # the arm at the start
    assert core.start()[0]
    for i in range(3):
        assert core.on_joint_state(js(measured(arm.traj1, i)), t(i), t(i)).kind == "tick"
    hold = core.on_watchdog(t(2) + 80_000_000)  # 80 ms after tick 2's sample: stale, hold at slot 10
    assert (hold.kind, hold.fault) == ("hold", "stale") and core.tracking.history.last_slot == 10
    late = core.on_joint_state(js(measured(arm.traj1, 6)), t(6), t(6) + 40_000_000)  # 40 ms old: valid
    assert late.kind == "tick" and late.k == 6 and late.recovered
    assert core.tracking.history.last_slot == 10
    np.testing.assert_array_equal(core.tracking.history.applied(10 + 1), late.command)
    for i in range(11, 14):
        res = core.on_joint_state(js(measured(arm.traj1, i)), t(i), t(i))
        assert res.kind == "tick" and res.k == i and core.tracking.history.last_slot == i


def test_status_reports_every_active_fault_with_its_count(arm):
    core = make_core(arm, state_timeout=0.05)
    core.start()
    t = lambda i: 20 * NS + i * DT_NS  # noqa: E731
    core.on_joint_state(js(measured(arm.traj, 0)), t(0), t(0))
    core.on_joint_state(js(measured(arm.traj, 1)), t(1), t(1))
    for i, q in ((2, measured(arm.traj, 2) + [1000.0, 0, 0, 0]), (3, measured(arm.traj, 3) + [1000.0, 0, 0, 0]),
                 (4, [np.nan, 0, 0, 0])):
        core.on_joint_state(js(q), t(i), t(i))
    core.on_watchdog(t(12))  # 100 ms without a valid sample: stale as well
    level, message, values = core.status()
    values = dict(values)
    assert level == ERROR and values["faults.active"] == "out_of_limits, non_finite, stale"
    assert (values["faults.out_of_limits"], values["faults.non_finite"], values["faults.stale"]) == ("2", "1", "1")
    assert "1000" in values["fault.out_of_limits"] and "elbow" not in values["fault.out_of_limits"]
    assert all(kind in message for kind in ("out_of_limits", "non_finite", "stale")) and "(holding)" in message
    res = core.on_joint_state(js(measured(arm.traj, 13)), t(13), t(13))  # the gap to 12 ms: no predecessor
    assert res.fault == "sample_gap" and dict(core.status()[2])["faults.active"] == ("out_of_limits, non_finite, "
                                                                                      "stale, sample_gap")
    res = core.on_joint_state(js(measured(arm.traj, 14)), t(14), t(14))
    assert res.kind == "tick" and res.recovered and dict(core.status()[2])["faults.active"] == ""
    assert all(k in res.fault_message for k in ("out_of_limits", "non_finite", "stale", "sample_gap"))


@pytest.mark.parametrize("delay, estimator", [(0, "legendre"), (1, "kalman")])
def test_start_path_and_goal_tolerances(arm, delay, estimator):
    """Tracking does not start far from x_d(0); leaving the path tolerance aborts it (hold, report) until the
    next start; missing the goal tolerance goal_time after the end is reported while the final state is held.
    (With the Kalman filter the fused tick checks the tolerances first: the same faults, at the same ticks.)"""
    t = lambda i: 30 * NS + i * DT_NS  # noqa: E731
    core = make_core(arm, delay=delay, estimator=estimator)
    assert (core.tracking.kernel is not None) == (estimator == "kalman")
    off = ma.static_equilibrium(arm.model, ma.LOWERED[0], ma.LOWERED[1] + 0.19).q  # the arm at rest elsewhere
    assert core.on_joint_state(js(off), t(0), t(0)).fault is None
    ok, message = core.start()
    assert not ok and "is not where the trajectory starts" in message and not core.running, message
    t = lambda i: 31 * NS + i * DT_NS  # noqa: E731  (a second later: back at the start)
    core.on_joint_state(js(measured(arm.traj, 0)), t(1), t(1))
    assert core.start()[0]

    core.on_joint_state(js(measured(arm.traj, 0)), t(2), t(2))  # tick 0
    for i in range(3, 7):  # the arm drifts (consistently with its string) to the elbow 0.36 rad off: beyond 0.3
        q = ma.static_equilibrium(arm.model, ma.LOWERED[0], ma.LOWERED[1] + 0.09 * (i - 2)).q
        res = core.on_joint_state(js(q), t(i), t(i))
    assert res.kind == "hold" and res.fault == "path_tolerance" and "elbow" in res.fault_message
    assert core.state_name() == "aborted" and not core.running and core.status()[0] == ERROR
    assert core.on_joint_state(js(q), t(7), t(7)).command is None  # nothing sent after
    assert dict(core.status()[2])["faults.active"] == "path_tolerance"  # valid samples do not clear it
    assert core.stop()[0] and core.status()[0] == OK  # stop (or start) does

    goal = make_core(arm, tolerances={"goal": {"shoulder": 1e-3}}, goal_time=0.1, delay=delay, estimator=estimator)
    goal.start()
    traj = goal.tracking.trajectory
    settled_off = traj.X[-1, :4] + [5e-3, 0, 0, 0]  # at the end the shoulder stays 5 mrad off
    for i in range(goal.tracking.N + 15):
        q = measured(traj, i) if i <= goal.tracking.N else settled_off
        res = goal.on_joint_state(js(q), t(i), t(i))
        assert res.kind in ("tick", "none")
        if res.kind == "tick" and res.k < goal.tracking.N + 10:
            assert res.fault is None, res.fault_message
    assert res.fault == "goal_tolerance" and dict(goal.status()[2])["goal"] == "missed"
    assert goal.running and res.kind == "tick"  # the final state is still held


def test_core_counts_an_undecodable_sample_as_malformed(arm):
    core = make_core(arm)
    core.start()
    t = lambda i: 20 * NS + i * DT_NS  # noqa: E731
    core.on_joint_state(js(measured(arm.traj, 0)), t(0), t(0))
    good = core.on_joint_state(js(measured(arm.traj, 1)), t(1), t(1))

    def parse(data):
        raise ValueError(f"{len(data)} bytes are no JointState")

    res = core.on_serialized(b"bad bytes", t(2), parse)
    assert (res.kind, res.fault, res.new_fault) == ("hold", "malformed", True)
    assert res.fault_message == "joint state could not be deserialized: 9 bytes are no JointState"
    np.testing.assert_array_equal(res.command, good.command)
    assert core.samples == 3 and core.rejected == 1


def test_reader_short_path_agrees_with_the_lookup_by_name(arm):
    """The reader's short path (names as in the last good message) gives what the lookup by name gives."""
    names = list(arm.desc.hardware_joints)
    q = measured(arm.traj, 3)

    def fresh():
        return JointStateReader(JointMap.of(arm.model, arm.desc.hardware_joints))

    reader = fresh()
    order = [3, 0, 2, 1]
    msgs = [js(q, NAMES_CORE), js(q + 1e-3, NAMES_CORE),  # the same names twice: the second takes the short path
            js([q[i] for i in order], [NAMES_CORE[i] for i in order]),  # reordered
            SimpleNamespace(name=list(NAMES_CORE) + ["gripper"], position=list(q) + [np.nan]),  # an unmapped NaN
            SimpleNamespace(name=list(NAMES_CORE) + ["gripper"], position=list(q) + [np.nan])]
    for m in msgs:
        got = reader.read(m)
        assert got.dtype == float and got.shape == (4,)
        np.testing.assert_array_equal(got, fresh().read(m))
    reader.read(js(q, NAMES_CORE))
    with pytest.raises(ValueError) as e:  # a NaN in a mapped joint, on the short path's names
        reader.read(js([q[0], np.nan, q[2], q[3]], NAMES_CORE))
    assert e.value.kind == "non_finite" and "'elbow'" in str(e.value)
    with pytest.raises(ValueError) as e:
        reader.read(SimpleNamespace(name=list(NAMES_CORE), position=list(q[:3])))
    assert e.value.kind == "malformed"
    assert sorted(names) == sorted(NAMES_CORE)


try:  # the core tests above run without ROS; those below need rclpy (and then the built interfaces)
    import rclpy
except ImportError:
    rclpy = None
if rclpy is not None:
    from diagnostic_msgs.msg import DiagnosticArray
    from rcl_interfaces.msg import Parameter as ParameterMsg
    from rcl_interfaces.msg import ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import JointState
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState, GetState
    from std_msgs.msg import Float64MultiArray
    from std_srvs.srv import Trigger

    from marionette_control.nodes.convert import trajectory_to_msg
    from ros_helpers import interrupt, isolated_ros, node_processes, stop, wait_for  # noqa: F401

    from marionette_interfaces.msg import TrackedTrajectory, TrackingState


@pytest.mark.ros
def test_joint_state_parser_reads_what_rclpy_deserializes():
    """The controller's raw-subscription parser against rclpy's deserializer (little endian, as rclpy writes)
    and rosbags' big-endian CDR; other encapsulations and unreadable bytes go to the fallback."""
    import random

    from rclpy.serialization import deserialize_message, serialize_message

    from marionette_control.tracking.joint_states import JointStateParser

    parser = JointStateParser(lambda data: deserialize_message(data, JointState))
    rng = random.Random(5)
    for _ in range(300):
        m = JointState()
        m.header.stamp.sec, m.header.stamp.nanosec = rng.randint(-2**31, 2**31 - 1), rng.randint(0, NS - 1)
        m.header.frame_id = "f" * rng.randint(0, 9)  # every padding of the strings that follow
        m.name = ["j" * rng.randint(0, 6) + ("é" if rng.random() < 0.2 else "") + str(i)
                  for i in range(rng.randint(0, 6))]
        m.position = [rng.uniform(-1e3, 1e3) for _ in range(rng.randint(0, 6))]
        m.velocity = [1.0] * rng.randint(0, 2)
        sample = parser.parse(serialize_message(m))
        assert (sample.stamp_ns, sample.name, list(sample.position)) == (
            m.header.stamp.sec * NS + m.header.stamp.nanosec, list(m.name), list(m.position))
    data = serialize_message(m)
    assert parser.parse(data).name is parser.parse(data).name  # names decoded once while they repeat

    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_KILTED)
    Time, Header = ts.types["builtin_interfaces/msg/Time"], ts.types["std_msgs/msg/Header"]
    big = ts.types["sensor_msgs/msg/JointState"](
        header=Header(stamp=Time(sec=12, nanosec=345), frame_id="base"), name=["shoulder", "elbow"],
        position=np.array([0.25, -1.5]), velocity=np.array([]), effort=np.array([]))
    data = bytes(ts.serialize_cdr(big, "sensor_msgs/msg/JointState", little_endian=False))
    assert data[:2] == b"\x00\x00"
    sample = parser.parse(data)
    assert (sample.stamp_ns, sample.name, list(sample.position)) == (12 * NS + 345, ["shoulder", "elbow"],
                                                                     [0.25, -1.5])

    seen = []
    fallback = JointStateParser(lambda data: seen.append(data) or m)
    other = b"\x00\x07" + serialize_message(m)[2:]  # another encapsulation id (XCDR2): not read here
    truncated = b"\x00\x01\x00\x00\x01"
    assert fallback.parse(other).name == list(m.name) and fallback.parse(truncated).name == list(m.name)
    assert seen == [other, truncated]
    with pytest.raises(Exception):
        parser.parse(truncated)  # the deserializer's error
    with pytest.raises(ValueError, match="not plain CDR"):
        JointStateParser().parse(other)

    from marionette_control.nodes.convert import multi_array_bytes  # the command, serialized by hand

    u = np.array([0.3, -1.25, 7.0])
    assert list(deserialize_message(multi_array_bytes(u), Float64MultiArray).data) == list(u)

    from trajectory_msgs.msg import JointTrajectory

    from marionette_control.nodes.convert import command_trajectory_bytes  # the joint_trajectory command

    for names, points, stamp, first in ((["carriage", "string_length"], np.random.default_rng(1).random((11, 2)),
                                         1_795_853_151_730_515_524, 2),
                                        (["carriage", "string_length"], np.zeros((0, 2)), 0, 0),   # a stop
                                        (["a", "bcdefg", "hi"], np.array([[1.0, -2.0, 3.5]]), 5, 7)):
        m = deserialize_message(command_trajectory_bytes(names, stamp, first, 0.01, points), JointTrajectory)
        assert m.header.stamp.sec * 10**9 + m.header.stamp.nanosec == stamp and m.header.frame_id == ""
        assert list(m.joint_names) == names and [list(p.positions) for p in m.points] == points.tolist()
        assert [p.time_from_start.sec * 10**9 + p.time_from_start.nanosec for p in m.points] == \
            [(first + i) * 10_000_000 for i in range(len(points))]
        assert not any(len(p.velocities) or len(p.accelerations) or len(p.effort) for p in m.points)


@pytest.mark.ros
def test_diagnostics_wait_for_the_next_command_while_joint_states_arrive(arm, tmp_path):
    """In process: the diagnostics timer only marks them due while joint states arrive; the next sample's callback
    publishes them after its command (the message takes ~0.5 ms to build, which must not delay a command); a
    whole period without a sample publishes them from the timer, at every period after."""
    from rclpy.lifecycle import TransitionCallbackReturn
    from rclpy.parameter import Parameter
    from rclpy.serialization import serialize_message

    from marionette_control.nodes.controller import ControllerNode

    path = arm.traj1.save(tmp_path / "bump.npz")
    with isolated_ros():
        context = rclpy.Context()
        rclpy.init(context=context)
        node = ControllerNode(context=context, parameter_overrides=[
            Parameter("trajectory_file", value=str(path)), Parameter("diagnostics_period", value=60.0)])
        try:
            assert node.trigger_configure() == node.trigger_activate() == TransitionCallbackReturn.SUCCESS
            calls = []
            send, publish = node._send, node._publish_diagnostics
            node._send = lambda *a: calls.append("command") or send(*a)
            node._publish_diagnostics = lambda: calls.append("diagnostics") or publish()
            now = node.get_clock().now().nanoseconds

            def sample(i):
                m = JointState(name=list(NAMES_CORE), position=[float(v) for v in measured(arm.traj1, i)])
                m.header.stamp.sec, m.header.stamp.nanosec = divmod(now + i * DT_NS, NS)
                return serialize_message(m)

            node._on_joint_state(sample(0))
            node._on_joint_state(sample(1))
            assert calls == ["command"] * 2 and node.core.ticks == 2
            node._on_diagnostics_timer()
            assert calls == ["command"] * 2  # due, not published
            node._on_joint_state(sample(2))
            assert calls == ["command"] * 3 + ["diagnostics"]
            node._on_joint_state(sample(3))
            assert calls[-1] == "command"  # published once per period
            del calls[:]
            node._on_diagnostics_timer()
            node._on_diagnostics_timer()  # a whole period without a sample: the timer publishes
            node._on_diagnostics_timer()
            assert calls == ["diagnostics"] * 2
        finally:
            node.destroy_node()
            context.try_shutdown()


@pytest.mark.ros
def test_node_time_reads_the_nodes_ros_clock():
    """NodeTime (the tick path's clock read): the system clock while ROS time is not active, bracketed by the node's
    own clock reads; the node's clock once use_sim_time is set, at construction or at run time (0 before any
    /clock message, as rclpy's), and the system clock again when it is cleared."""
    from rclpy.parameter import Parameter

    from marionette_control.nodes.node_time import NodeTime

    with isolated_ros():
        context = rclpy.Context()
        rclpy.init(context=context)
        plain = rclpy.create_node("node_time_plain", context=context)
        sim = rclpy.create_node("node_time_sim", context=context,
                                parameter_overrides=[Parameter("use_sim_time", value=True)])
        try:
            t, ts = NodeTime(plain), NodeTime(sim)
            assert t.system and not ts.system and ts.now_ns() == 0 == sim.get_clock().now().nanoseconds
            for _ in range(100):
                a = plain.get_clock().now().nanoseconds
                b = t.now_ns()
                assert a <= b <= plain.get_clock().now().nanoseconds
            assert plain.set_parameters([Parameter("use_sim_time", value=True)])[0].successful
            assert not t.system and t.now_ns() == 0 == plain.get_clock().now().nanoseconds
            assert plain.set_parameters([Parameter("use_sim_time", value=False)])[0].successful
            a = plain.get_clock().now().nanoseconds
            assert t.system and a <= t.now_ns() <= plain.get_clock().now().nanoseconds
        finally:
            plain.destroy_node()
            sim.destroy_node()
            context.try_shutdown()


@pytest.mark.ros
def test_command_order_follows_command_joints(arm):
    from marionette_control.tracking.controller_options import command_permutation
    from marionette_control.nodes.params import ParameterError

    hw = arm.desc.hardware_joints
    np.testing.assert_array_equal(command_permutation(arm.model, hw, ["carriage", "string_length"]), [0, 1])
    np.testing.assert_array_equal(command_permutation(arm.model, hw, ["string_length", "carriage"]), [1, 0])
    with pytest.raises(ParameterError, match="must list each kinematic joint once"):
        command_permutation(arm.model, hw, ["carriage", "elbow"])


# --------------------------------------------------------------------------------------------- across processes


NODE = "/marionette_controller"
MODULE = "marionette_control.nodes.controller"
COMMANDS = "/forward_position_controller/commands"
NAMES = ["shoulder", "elbow", "carriage", "string_length"]
CONFIG = Path(__file__).resolve().parents[1] / "config" / "controller.yaml"


class Rig:
    """The hardware side in the test process: joint states out, commands/diagnostics in, services, /clock."""

    def __init__(self):
        self.context = rclpy.context.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("fake_hardware", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        n = self.node
        reliable = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        self.js_pub = n.create_publisher(JointState, "/joint_states", reliable)
        self.clock_pub = n.create_publisher(Clock, "/clock", reliable)
        self.traj_pub = n.create_publisher(
            TrackedTrajectory, "/marionette_optimizer/trajectory",
            QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL))
        self.commands, self.tracking, self.diagnostics = [], [], []
        n.create_subscription(Float64MultiArray, COMMANDS, lambda m: self.commands.append(np.array(m.data)), reliable)
        n.create_subscription(TrackingState, f"{NODE}/tracking", self.tracking.append, reliable)
        n.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, reliable)
        self.start_client = n.create_client(Trigger, f"{NODE}/start")
        self.stop_client = n.create_client(Trigger, f"{NODE}/stop")
        self.switch_client = n.create_client(Trigger, f"{NODE}/switch_trajectory")
        self.param_client = n.create_client(SetParameters, f"{NODE}/set_parameters")
        self.change_state_client = n.create_client(ChangeState, f"{NODE}/change_state")
        self.get_state_client = n.create_client(GetState, f"{NODE}/get_state")

    def _on_diag(self, msg):
        for st in msg.status:
            if st.name.startswith("marionette_controller"):
                self.diagnostics.append((st.level[0] if isinstance(st.level, bytes) else st.level, st.message,
                                         {kv.key: kv.value for kv in st.values}))

    def spin(self):
        self.executor.spin_once(timeout_sec=0.005)

    def until(self, predicate, timeout=5.0, what="condition") -> None:
        assert wait_for(predicate, timeout, spin=self.spin), f"timed out waiting for {what}"

    def settle(self, seconds):
        wait_for(lambda: False, seconds, spin=self.spin)

    def connect(self, log_path, sim_time=False, configure=True):
        """Waits for the node; unless told not to, configures it (lifecycle) and waits until its joint-state
        subscription, command publisher and (sim_time) clock subscription are matched."""
        # every service this rig calls: a request sent before its server is discovered is lost (get_state answered
        # nothing within 5 s in a full-suite run on the loaded machine)
        ok = self.start_client.wait_for_service(timeout_sec=20.0) and all(
            c.wait_for_service(timeout_sec=5.0) for c in (self.change_state_client, self.get_state_client))
        assert ok, f"controller did not come up; log:\n{log_path.read_text()}"
        if not configure:
            return
        assert self.transition(Transition.TRANSITION_CONFIGURE), f"configure failed; log:\n{log_path.read_text()}"
        self.until(lambda: self.js_pub.get_subscription_count() > 0 and self.node.count_publishers(COMMANDS) > 0
                   and (not sim_time or self.clock_pub.get_subscription_count() > 0), 10.0, "discovery")

    def transition(self, transition_id: int) -> bool:
        """A lifecycle transition through the node's ~/change_state service; whether it succeeded."""
        fut = self.change_state_client.call_async(ChangeState.Request(transition=Transition(id=transition_id)))
        self.executor.spin_until_future_complete(fut, timeout_sec=10.0)
        assert fut.done(), "change_state did not answer"
        return fut.result().success

    def state(self) -> str:
        fut = self.get_state_client.call_async(GetState.Request())
        self.executor.spin_until_future_complete(fut, timeout_sec=5.0)
        assert fut.done(), "get_state did not answer"
        return fut.result().current_state.label

    def call(self, client, timeout=5.0):
        fut = client.call_async(Trigger.Request())
        self.executor.spin_until_future_complete(fut, timeout_sec=timeout)
        assert fut.done(), "service did not answer"
        return fut.result()

    def set_param(self, name, value: str):
        req = SetParameters.Request(parameters=[ParameterMsg(name=name, value=ParameterValue(
            type=ParameterType.PARAMETER_STRING, string_value=value))])
        fut = self.param_client.call_async(req)
        self.executor.spin_until_future_complete(fut, timeout_sec=5.0)
        return fut.result().results[0]

    def clock(self, t_ns):
        m = Clock()
        m.clock.sec, m.clock.nanosec = divmod(int(t_ns), NS)
        self.clock_pub.publish(m)

    def send(self, q, stamp_ns, names=NAMES):
        m = JointState()
        m.header.stamp.sec, m.header.stamp.nanosec = divmod(int(stamp_ns), NS)
        m.name = list(names)
        m.position = [float(v) for v in q]
        self.js_pub.publish(m)

    def now_ns(self):
        return time.time_ns()

    def last_diag(self):
        return self.diagnostics[-1] if self.diagnostics else (None, "", {})

    def diag_until(self, predicate, timeout=5.0, what="diagnostics"):
        start = len(self.diagnostics)
        self.until(lambda: any(predicate(*d) for d in self.diagnostics[start:]), timeout, what)

    def close(self):
        self.node.destroy_node()
        self.executor.shutdown()
        self.context.try_shutdown()


@pytest.fixture
def rig_env():
    with isolated_ros() as env:
        rig = Rig()
        try:
            yield rig, env
        finally:
            rig.close()


def controller(node_processes, env, tmp_path, **params):
    """Starts the node with config/controller.yaml and overrides; (process, log path)."""
    args = ["--ros-args", "--params-file", str(CONFIG), "-p", "diagnostics_period:=0.1"]
    for k, v in params.items():
        args += ["-p", f"{k}:={v}"]
    proc = node_processes(MODULE, args, env)
    logs = sorted(tmp_path.glob("controller_*.log"))
    return proc, logs[-1]


def check_alive_then_stop(proc, log):
    """The node is still running and exits cleanly on SIGINT (alone: no SIGTERM or SIGKILL needed)."""
    assert proc.poll() is None, f"controller died; log:\n{log.read_text()}"
    code = interrupt(proc)
    assert code == 0, f"controller exit code {code} after SIGINT; log:\n{log.read_text()}"


@pytest.mark.ros
@pytest.mark.parametrize("executor", ["events", "single_threaded"])
def test_tracks_a_file_trajectory_with_the_tracking_controllers_commands_and_start_stop(
        arm, rig_env, node_processes, tmp_path, executor):
    """The node (default parameters: one step of command delay, Kalman filter) sends exactly what the parts
    composed by hand compute from the same samples."""
    rig, env = rig_env
    path = arm.traj1.save(tmp_path / "wave.npz")
    reference = Composed(arm, arm.traj1, 1, "kalman", guard=True)
    rt = {"realtime_priority": 10} if executor == "events" else {}  # applied, or refused with a warning
    proc, log = controller(node_processes, env, tmp_path, trajectory_file=str(path), state_timeout=1.0,
                           executor=executor, **rt)
    rig.connect(log)
    base = [rig.now_ns() + 50_000_000]

    def send(i, names=NAMES, q=None, resync=False):
        """Sample i, stamped Δt after sample i − 1. ``resync``: the first sample after a start call, which may have
        held the test up: it and those after it stay current, as a driver's would (a run's first tick passes over
        samples a period old). Within a run the stamps stay consecutive even when the test falls behind (they are
        well within state_timeout), as the reference's ticks assume."""
        stamp = base[0] + i * DT_NS
        late = rig.now_ns() - stamp
        if resync and late > DT_NS // 2:
            base[0] += late
            stamp += late
        while rig.now_ns() < stamp:
            rig.spin()
        q = measured(arm.traj1, i) if q is None else q
        order = [NAMES.index(n) for n in names]
        rig.send(q[order], stamp, names)

    # idle: samples produce no command
    for i in range(3):
        send(i)
    rig.settle(0.1)
    assert rig.commands == []
    rig.diag_until(lambda lvl, msg, v: v.get("state") == "idle" and v.get("samples_received") == "3", what="idle")

    ok = rig.call(rig.start_client)
    assert ok.success, ok.message
    assert not rig.call(rig.start_client).success  # already running
    for i in range(3, 33):
        names = NAMES[::-1] if i % 3 == 0 else NAMES  # reordered names are mapped by name
        send(i, names, resync=i == 3)
        rig.until(lambda: len(rig.commands) == i - 2, 2.0, f"command for sample {i}")
        u, x_hat = reference.tick(i - 3, measured(arm.traj1, i - 1), measured(arm.traj1, i))
        np.testing.assert_array_equal(rig.commands[-1], u, err_msg=f"the command answering sample {i}")
    rig.until(lambda: len(rig.tracking) == 30, 2.0, "tracking messages")
    tr = rig.tracking[-1]
    assert tr.tick == 29 and tr.num_steps == 200 and tr.header.stamp.sec * NS + tr.header.stamp.nanosec == base[0] + 32 * DT_NS
    np.testing.assert_array_equal(tr.estimated, x_hat)
    np.testing.assert_array_equal(tr.desired, arm.traj1.X[29])
    np.testing.assert_array_equal(tr.error, x_hat - arm.traj1.X[29])
    assert tr.error_norm == pytest.approx(np.linalg.norm(x_hat - arm.traj1.X[29]), rel=1e-12)
    assert list(tr.state_names) == list(arm.model.state_names) and list(tr.command_joints) == NAMES[2:]
    np.testing.assert_array_equal(tr.command, rig.commands[-1])
    assert tr.compute_time > 0 and list(tr.active_faults) == [] and tr.missed_ticks == 0

    stop = rig.call(rig.stop_client)
    assert stop.success and "stopped at tick 29" in stop.message
    rig.until(lambda: len(rig.commands) == 31, 2.0, "hold command on stop")
    np.testing.assert_array_equal(rig.commands[-1], rig.commands[-2])
    for i in range(33, 36):
        send(i)
    rig.settle(0.1)
    assert len(rig.commands) == 31  # stopped: no commands
    refused = rig.call(rig.start_client)  # the arm is where tick 32 left it, far from the start: refused
    assert not refused.success and "not where the trajectory starts" in refused.message
    start = arm.traj1.X[0, :4]
    send(80, q=start)  # half a second later the arm is back at the start
    assert rig.call(rig.start_client).success  # restart from k = 0
    send(81, q=measured(arm.traj1, 0), resync=True)
    rig.until(lambda: len(rig.commands) == 32, 2.0, "first command after restart")
    u, _ = Composed(arm, arm.traj1, 1, "kalman", guard=True).tick(0, start, measured(arm.traj1, 0))
    np.testing.assert_array_equal(rig.commands[-1], u)
    rig.diag_until(lambda lvl, msg, v: lvl == OK and v.get("state") == "running" and v.get("tick") == "0"
                   and float(v.get("compute_time_p99_us", "nan")) > 0, what="running diagnostics")
    check_alive_then_stop(proc, log)
    assert ("realtime_priority:" in log.read_text()) == bool(rt)


@pytest.mark.ros
def test_refuses_a_trajectory_for_another_model_and_keeps_running(arm, rig_env, node_processes, tmp_path):
    rig, env = rig_env
    pend = library.get("pendulum")
    wrong = Trajectory.for_model(pend, DT, np.zeros((3, pend.nx)), np.zeros((2, pend.nU)),
                                 K=np.zeros((2, pend.nU, pend.nx))).save(tmp_path / "pendulum.npz")
    heavy = library.get("marionette_arm", gravity=11.0)
    _, other_version = arm_trajectory(model=heavy)
    proc, log = controller(node_processes, env, tmp_path, trajectory_file=str(wrong))
    rig.connect(log)
    rig.diag_until(lambda lvl, msg, v: lvl >= WARN and v.get("state") == "no_trajectory"
                   and "made for model 'pendulum', not 'marionette_arm'" in v.get("trajectory_error", ""),
                   what="refusal in diagnostics")
    res = rig.call(rig.start_client)
    assert not res.success and "no trajectory loaded" in res.message and "pendulum" in res.message
    # at runtime the parameter set itself is refused, with the reason
    res = rig.set_param("trajectory_file", str(wrong))
    assert not res.successful and "made for model 'pendulum'" in res.reason
    # the optimizer's topic: another version of the arm is refused, the right one accepted
    rig.traj_pub.publish(trajectory_to_msg(other_version, TrackedTrajectory, heavy.config_names))
    rig.diag_until(lambda lvl, msg, v: "different version of model 'marionette_arm'" in v.get("trajectory_error", ""),
                   what="refusal of another version")
    rig.traj_pub.publish(trajectory_to_msg(arm.traj1, TrackedTrajectory, arm.model.config_names))
    rig.diag_until(lambda lvl, msg, v: v.get("state") == "idle" and v.get("trajectory_error") == ""
                   and v.get("trajectory") == "from /marionette_optimizer/trajectory"
                   and v.get("steps") == "200", what="accepted trajectory")
    assert rig.call(rig.start_client).success
    check_alive_then_stop(proc, log)
    text = log.read_text()
    assert "refused trajectory" in text and "made for model 'pendulum', not 'marionette_arm'" in text


@pytest.mark.ros
def test_faults_hold_and_recover_under_sim_time(arm, rig_env, node_processes, tmp_path):
    """Each joint-state fault → hold command + diagnostics fault → recovery; everything on /clock."""
    rig, env = rig_env
    path = arm.traj1.save(tmp_path / "wave.npz")
    proc, log = controller(node_processes, env, tmp_path, trajectory_file=str(path), use_sim_time="true",
                           state_timeout=0.2, fault_log_throttle=0.0)
    rig.connect(log, sim_time=True)
    t0 = 1000 * NS
    rig.clock(t0)
    state = {"i": 0}

    def sample(i=None, q=None, names=NAMES, stamp=None, clock=True):
        """Sends sample i (default: the next slot, which it takes) with /clock at its slot time."""
        if i is None:
            i = state["i"]
            state["i"] += 1
        stamp = t0 + i * DT_NS if stamp is None else stamp
        if clock:
            rig.clock(t0 + i * DT_NS)
        rig.send(measured(arm.traj1, i) if q is None else q, stamp, names)

    def expect_commands(n, what):
        rig.until(lambda: len(rig.commands) == n, 3.0, what)

    def tick(what):
        i = state["i"]
        n = len(rig.commands)
        sample()
        expect_commands(n + 1, what)
        return i

    def fault(kind, **kw):
        n = len(rig.commands)
        last = rig.commands[-1].copy()
        sample(**kw)
        expect_commands(n + 1, f"hold command after {kind}")
        np.testing.assert_array_equal(rig.commands[-1], last)  # held at the last command
        rig.diag_until(lambda lvl, msg, v: lvl == ERROR and v.get("fault") == kind and "(holding)" in msg,
                       what=f"{kind} in diagnostics")

    def recover(kind, gap):
        if gap:  # the rejected sample took a slot: the next one has no predecessor dt before it
            n = len(rig.commands)
            sample()
            expect_commands(n + 1, f"gap hold after {kind}")
        k = tick(f"recovery after {kind}") - 1
        rig.diag_until(lambda lvl, msg, v: lvl == OK and v.get("fault") == "" and v.get("tick") == str(k),
                       what=f"recovery from {kind}")

    sample()  # sample 0 before start
    assert rig.call(rig.start_client).success
    for _ in range(3):
        tick("tracking")

    fault("non_finite", q=np.array([0.0, np.nan, 0.1, 0.9]))
    recover("non_finite", gap=True)
    fault("missing_names", q=measured(arm.traj1, 0)[:3], names=NAMES[:3])
    recover("missing_names", gap=True)
    fault("malformed", q=measured(arm.traj1, 0)[:3], names=NAMES)  # 4 names, 3 positions
    recover("malformed", gap=True)
    fault("duplicate_stamp", i=state["i"] - 1, clock=False)
    recover("duplicate_stamp", gap=False)
    fault("out_of_order", i=state["i"] - 3, clock=False)
    recover("out_of_order", gap=False)
    fault("stale", stamp=t0 + (state["i"] - 50) * DT_NS)
    recover("stale", gap=True)

    # the watchdog follows /clock: wall time alone makes nothing stale ...
    n = len(rig.commands)
    rig.settle(0.5)
    assert len(rig.commands) == n and rig.last_diag()[2].get("fault") == ""
    # ... advancing /clock past the timeout does: hold commands, stale fault
    rig.clock(t0 + (state["i"] + 40) * DT_NS)
    rig.diag_until(lambda lvl, msg, v: v.get("fault") == "stale" and "no valid joint state" in v.get("fault_message"),
                   what="stale by /clock")
    assert len(rig.commands) > n
    np.testing.assert_array_equal(rig.commands[-1], rig.commands[n - 1])
    state["i"] += 41
    recover("stale (watchdog)", gap=True)
    assert int(rig.last_diag()[2]["missed_ticks"]) >= 40

    # stamps on the wall clock while the node follows /clock
    fault("future_stamp", stamp=rig.now_ns())
    recover("future_stamp", gap=True)
    check_alive_then_stop(proc, log)
    text = log.read_text()
    for kind in ("non_finite", "missing_names", "malformed", "duplicate_stamp", "out_of_order", "stale",
                 "future_stamp"):
        assert f"joint-state fault {kind}" in text, kind


@pytest.mark.ros
def test_joint_states_before_the_first_clock_are_skipped_not_faults(arm, rig_env, node_processes, tmp_path):
    """Under use_sim_time the node's clock reads 0 until its first /clock message; joint states that come
    first (separate topics, delivered independently) are counted, not judged: no future_stamp fault."""
    rig, env = rig_env
    path = arm.traj1.save(tmp_path / "wave.npz")
    proc, log = controller(node_processes, env, tmp_path, trajectory_file=str(path), use_sim_time="true")
    rig.connect(log, sim_time=True)
    t0 = 50 * NS
    counted = lambda: int(rig.last_diag()[2].get("samples_before_clock", 0))  # noqa: E731
    sent = 0
    # the simulator's stamps, its /clock not (yet) seen. Joint states are best effort: one sent before the
    # controller's reader has matched the rig's writer is dropped, so send until five were counted.
    while counted() < 5 and sent < 50:
        rig.send(measured(arm.traj1, sent), t0 + sent * DT_NS)
        sent += 1
        rig.settle(0.05)
    assert counted() >= 5, f"{counted()} of {sent} joint states counted before the clock"
    level, message, values = rig.last_diag()
    assert values["fault"] == "" and values["samples_received"] == "0" and level != ERROR, message
    for i in range(sent, sent + 3):  # with the clock: received and checked as usual
        rig.clock(t0 + i * DT_NS)
        rig.send(measured(arm.traj1, i), t0 + i * DT_NS)
        rig.settle(0.02)
    rig.diag_until(lambda lvl, msg, v: v.get("samples_received") == "3" and v.get("fault") == "", what="received")
    check_alive_then_stop(proc, log)
    assert "future_stamp" not in log.read_text()


@pytest.mark.ros
def test_lifecycle_transitions_across_processes(arm, rig_env, node_processes, tmp_path):
    """configure / activate / deactivate / cleanup / shutdown through the lifecycle_msgs services: commands and
    ~/tracking only while active, the hold command on deactivate and shutdown, a refused activation stays inactive,
    a run that a tolerance aborts deactivates the node, cleanup releases the outputs, and a trajectory_file set at
    run time is checked before it acts."""
    rig, env = rig_env
    path = arm.traj1.save(tmp_path / "bump.npz")
    # (no sample goes stale here: the counts of commands below are exact, and a test process held up for a second
    # between two samples on a loaded machine would have the watchdog add hold commands)
    proc, log = controller(node_processes, env, tmp_path, trajectory_file=str(path), state_timeout=3.0)
    rig.connect(log, configure=False)
    assert rig.state() == "unconfigured" and rig.node.count_publishers(COMMANDS) == 0, "no outputs before configure"
    rig.diag_until(lambda lvl, msg, v: v.get("lifecycle_state") == "unconfigured", what="unconfigured status")
    # a runtime trajectory_file is checked when set (unconfigured: that it is a trajectory file) and acts after
    res = rig.set_param("trajectory_file", str(tmp_path / "missing.npz"))
    assert not res.successful and "missing.npz" in res.reason
    assert rig.transition(Transition.TRANSITION_CONFIGURE) and rig.state() == "inactive"
    rig.until(lambda: rig.js_pub.get_subscription_count() > 0 and rig.node.count_publishers(COMMANDS) > 0, 10.0,
              "discovery")
    sent = {"i": 0, "base": rig.now_ns() + 50_000_000}

    def send(q=None, n=1):
        for _ in range(n):
            i = sent["i"]
            sent["i"] += 1
            stamp = sent["base"] + i * DT_NS
            late = rig.now_ns() - stamp
            if late > DT_NS // 2:  # the test was held up (a transition): the samples stay current, as a driver's
                sent["base"] += late
                stamp += late
            while rig.now_ns() < stamp:
                rig.spin()
            rig.send(measured(arm.traj1, min(i, 5)) if q is None else q, stamp)

    send(n=3)
    rig.diag_until(lambda lvl, msg, v: v.get("lifecycle_state") == "inactive" and v.get("samples_received") == "3",
                   what="inactive, receiving")
    assert rig.commands == [] and rig.tracking == [], "inactive: no outputs"

    assert rig.transition(Transition.TRANSITION_ACTIVATE) and rig.state() == "active"
    send(n=5)
    rig.until(lambda: len(rig.commands) == 5 and len(rig.tracking) == 5, 3.0, "commands while active")
    assert rig.transition(Transition.TRANSITION_DEACTIVATE) and rig.state() == "inactive"
    rig.until(lambda: len(rig.commands) == 6, 3.0, "the hold command on deactivate")
    np.testing.assert_array_equal(rig.commands[-1], rig.commands[-2])
    send(n=3)
    rig.settle(0.1)
    assert len(rig.commands) == 6 and len(rig.tracking) == 5, "inactive again: silent"

    # the arm far from the start: activation is refused and the node stays inactive, saying why
    off = ma.static_equilibrium(arm.model, ma.LOWERED[0], ma.LOWERED[1] + 0.19).q
    sent["i"] += 50  # half a second later (a plausible move)
    send(q=off)
    assert not rig.transition(Transition.TRANSITION_ACTIVATE) and rig.state() == "inactive"
    rig.diag_until(lambda lvl, msg, v: lvl == WARN and "activation refused" in v.get("transition", "")
                   and "not where the trajectory starts" in v.get("transition", ""), what="refused activation")

    # cleanup releases the outputs; configure again reloads the trajectory file
    assert rig.transition(Transition.TRANSITION_CLEANUP) and rig.state() == "unconfigured"
    rig.until(lambda: rig.node.count_publishers(COMMANDS) == 0, 5.0, "the command publisher gone")
    assert rig.transition(Transition.TRANSITION_CONFIGURE) and rig.state() == "inactive"
    rig.until(lambda: rig.node.count_publishers(COMMANDS) > 0, 5.0, "the command publisher back")
    rig.diag_until(lambda lvl, msg, v: v.get("trajectory") == str(path) and v.get("state") == "idle",
                   what="the trajectory reloaded")

    # a run that leaves the path tolerance is aborted: hold, and the node deactivates itself
    start = arm.traj1.X[0, :4]
    sent["i"] += 50
    send(q=start, n=2)
    assert rig.call(rig.start_client).success and rig.state() == "active"  # ~/start: the activate transition
    send(q=start, n=2)
    rig.until(lambda: len(rig.commands) == 8, 3.0, "commands after the restart")
    for j in range(1, 5):  # the arm drifts, consistently with its string, 0.09 rad per sample: beyond 0.3 rad
        send(q=ma.static_equilibrium(arm.model, arm.traj1.X[0, 0], arm.traj1.X[0, 1] + 0.09 * j).q)
    rig.diag_until(lambda lvl, msg, v: v.get("lifecycle_state") == "inactive" and v.get("state") == "aborted"
                   and "path_tolerance" in v.get("faults.active", ""), what="aborted and inactive")
    assert rig.state() == "inactive"

    # shutdown from active: the hold command, then finalized and silent
    assert rig.call(rig.stop_client).success  # clears the run fault
    sent["i"] += 50
    send(q=start, n=2)
    assert rig.transition(Transition.TRANSITION_ACTIVATE)
    n = len(rig.commands)
    send(q=start, n=2)
    rig.until(lambda: len(rig.commands) == n + 2, 3.0, "ticking")
    n += 2
    assert rig.transition(Transition.TRANSITION_ACTIVE_SHUTDOWN) and rig.state() == "finalized"
    rig.until(lambda: len(rig.commands) == n + 1, 3.0, "the hold command on shutdown")
    np.testing.assert_array_equal(rig.commands[-1], rig.commands[-2])
    send(q=start, n=3)
    rig.settle(0.1)
    assert len(rig.commands) == n + 1
    start_again = rig.call(rig.start_client)
    assert not start_again.success and "finalized" in start_again.message
    check_alive_then_stop(proc, log)


@pytest.mark.ros
@pytest.mark.parametrize("executor", ["events", "single_threaded"])
def test_start_finds_the_latched_trajectory_and_says_what_it_saw(arm, rig_env, node_processes, tmp_path, executor):
    """The trajectory topic is subscribed from the unconfigured state on; without a trajectory ~/start waits
    trajectory_wait (a coroutine: the executor goes on meanwhile) and then says what it saw (here: a publisher, no
    sample); once one is published, a start takes it on the first try."""
    rig, env = rig_env
    proc, log = controller(node_processes, env, tmp_path, trajectory_wait=0.3, executor=executor)
    rig.connect(log, configure=False)
    rig.until(lambda: rig.traj_pub.get_subscription_count() > 0, 10.0, "the trajectory subscription, unconfigured")
    refused = rig.call(rig.start_client)
    assert not refused.success and re.search(r"no trajectory loaded: 1 publisher\(s\) on /marionette_optimizer/"
                                             r"trajectory but no sample received within 0\.\d s", refused.message), \
        refused.message
    assert rig.state() == "inactive"
    rig.traj_pub.publish(trajectory_to_msg(arm.traj1, TrackedTrajectory, arm.model.config_names))
    started = rig.call(rig.start_client)
    assert started.success and "started tracking from /marionette_optimizer/trajectory" in started.message, \
        started.message
    check_alive_then_stop(proc, log)


@pytest.mark.ros
@pytest.mark.parametrize("executor", ["events", "single_threaded"])
def test_cleanup_amid_samples_and_watchdog_periods_leaves_the_node_running(arm, rig_env, node_processes, tmp_path,
                                                                          executor):
    """Configure and cleanup, ten times, each cleanup right after a burst of joint states and under a 1 ms watchdog
    (the main job cleans its controllers up after every run): a sample or a watchdog period the executor took
    before cleanup destroyed its subscription or timer finds no core and is dropped; the node keeps running and
    exits cleanly (it died of an AttributeError in the watchdog before)."""
    rig, env = rig_env
    path = arm.traj1.save(tmp_path / "bump.npz")
    proc, log = controller(node_processes, env, tmp_path, trajectory_file=str(path), watchdog_period=0.001,
                           executor=executor)
    rig.connect(log, configure=False)
    for _ in range(10):
        assert rig.transition(Transition.TRANSITION_CONFIGURE), log.read_text()
        rig.until(lambda: rig.js_pub.get_subscription_count() > 0, 10.0, "the joint-state subscription")
        for _ in range(20):
            rig.send(measured(arm.traj1, 0), rig.now_ns())
        assert rig.transition(Transition.TRANSITION_CLEANUP), log.read_text()
    check_alive_then_stop(proc, log)
