"""Commands that carry the next setpoints (issue 24, docs/tracking.md "Commands that carry the next setpoints").

The stand-in's side (sim/setpoint_stream.py through SimulatedArm.receive_command): a missing command leaves the
drives on the previous command's next points, exactly; the newest command wins for the steps it covers; past its
last point the drives hold; bad commands are refused with an error naming what was wrong. The controller's side
(tracking/lookahead.py): the next points are the plan's increments with the correction continued, within the drives'
limits. Closed loop offline: with 2 % of commands one step late the string stays at its minimum tension with
joint_trajectory commands on three seeds, where forward position commands let it go slack.
"""

from __future__ import annotations

import numpy as np
import pytest

from arm_helpers import wave_motion
from marionette_control.model.library import marionette_arm as arm
from marionette_control.model.limits import from_description
from marionette_control.sim.offline_loop import run_loop
from marionette_control.sim.profile import HardwareProfile
from marionette_control.sim.setpoint_stream import MAX_POINTS, CommandError, check_points, trajectory_points
from marionette_control.sim.simulator import SimulatedArm
from marionette_control.tracking.command_limits import CommandLimits
from marionette_control.tracking.controller import ControllerOptions, make_core
from marionette_control.tracking.lookahead import Lookahead

DT = 0.01
NAMES = ("carriage", "string_length")


@pytest.fixture(scope="module")
def nominal():
    return arm.load_description()


def exact_arm(nominal) -> SimulatedArm:
    """The perfect profile with one step of command delay: a setpoint within a step's reach is reached exactly."""
    return SimulatedArm(HardwareProfile.named("perfect", command_delay_steps=1), DT, nominal)


def ramp(rho0, first: int, n: int, rate=(1e-3, -5e-4)) -> tuple:
    """(steps, points): n setpoints moving by ``rate`` per step from rho0, for steps first … first + n − 1."""
    steps = np.arange(first, first + n)
    return steps, np.asarray(rho0) + np.outer(steps - first + 1, rate)


def run(sim: SimulatedArm, cycles: int) -> np.ndarray:
    """The drives' positions after each of ``cycles`` steps (cycles, nk)."""
    out = []
    for _ in range(cycles):
        sim.step()
        out.append(sim.rho.copy())
    return np.array(out)


def test_a_missing_command_leaves_the_drives_on_the_previous_ones_next_points(nominal):
    sim = exact_arm(nominal)
    rho0 = sim.rho.copy()
    steps, points = ramp(rho0, sim.k + 1, 5)
    sim.receive_command(points, steps)              # cycle 0: setpoints of steps 1 … 5
    sim.step()                                      # step 0: the command has not arrived yet
    np.testing.assert_array_equal(sim.rho, rho0)
    rho = run(sim, 7)                               # steps 1 … 7, no further command
    np.testing.assert_array_equal(rho[:5], points)  # each point at its own step
    np.testing.assert_array_equal(rho[5:], points[[-1, -1]])   # past the last point: hold
    # a forward position command (one setpoint) holds from its arrival on, as before
    sim.receive_command(points[0])
    np.testing.assert_array_equal(run(sim, 3), [points[-1], points[0], points[0]])


def test_the_newest_command_wins_for_the_steps_it_covers(nominal):
    sim = exact_arm(nominal)
    rho0 = sim.rho.copy()
    steps_a, a = ramp(rho0, 1, 6)
    sim.receive_command(a, steps_a)                 # cycle 0: steps 1 … 6
    run(sim, 2)
    steps_b, b = ramp(a[1], 3, 2, rate=(-1e-3, 5e-4))
    sim.receive_command(b, steps_b)                 # cycle 2: steps 3, 4 (arrives at 3)
    rho = run(sim, 4)                               # steps 2 … 5
    np.testing.assert_array_equal(rho, [a[1], b[0], b[1], b[1]])   # not a's points 4, 5 past b's end
    # a command whose first points are past when it arrives: from its arrival, the point of that step
    sim.receive_command(*reversed(ramp(b[1], sim.k - 2, 5)))
    steps_c, c = ramp(b[1], sim.k - 2, 5)
    np.testing.assert_array_equal(run(sim, 3), [b[1], c[3], c[4]])


def test_points_between_steps_are_interpolated_and_a_late_command_takes_its_current_point(nominal):
    sim = exact_arm(nominal)
    rho0 = sim.rho.copy()
    sim.receive_command(np.array([rho0, rho0 + [4e-3, 0.0]]), np.array([0.5, 4.5]))
    rho = run(sim, 6)
    np.testing.assert_allclose(rho[1:5, 0] - rho0[0], [0.5e-3, 1.5e-3, 2.5e-3, 3.5e-3], rtol=0, atol=1e-15)
    # jitter: a command one step late acts from its arrival on the point of that step (FIFO kept)
    late = SimulatedArm(HardwareProfile.named("perfect", command_delay_steps=1, command_jitter_steps=1,
                                              command_jitter_probability=1.0), DT, nominal)
    steps, points = ramp(late.rho, 1, 4)
    late.receive_command(points, steps)             # arrives at step 2: steps 0, 1 keep the setpoint in effect
    rest = late.rho.copy()
    np.testing.assert_array_equal(run(late, 4), [rest, rest, points[1], points[2]])


def test_a_stop_brakes_the_drives_where_they_are_on_the_points_and_a_newer_command_takes_over(nominal):
    sim = SimulatedArm(HardwareProfile.named("realistic", noise_std=(0.0,), encoder_resolution=(0.0,)), DT, nominal)
    steps, points = ramp(sim.rho, 1, 40, rate=(2e-3, 0.0))     # 0.2 m/s on the carriage
    sim.receive_command(points, steps)
    run(sim, 20)
    moving = sim.v.copy()
    assert moving[0] > 0.19
    sim.receive_stop()                                          # arrives at the next step, not before
    run(sim, 1)
    np.testing.assert_array_equal(sim.drives.setpoint, points[19])   # step 20: still the command's point
    stop = sim.drives.stopping_point(sim.rho, sim.v)
    rho = run(sim, 30)
    np.testing.assert_allclose(rho[-1], stop, rtol=0, atol=1e-12)   # at rest where braking at a_max leads
    assert rho[-1][0] < points[-1][0] - 0.01 and np.all(np.abs(np.diff(rho[-5:], axis=0)) < 1e-12)
    steps2, points2 = ramp(sim.rho, sim.k + 1, 3, rate=(-1e-4, 0.0))
    sim.receive_command(points2, steps2)
    assert sim.pending_commands == 1
    run(sim, 6)
    np.testing.assert_allclose(sim.rho, points2[-1], rtol=0, atol=1e-12)


@pytest.mark.parametrize("names, positions, times, match", [
    (["carriage", "elbow"], [[0.1, 0.9]], [1], "names the joints"),
    (["carriage", "carriage"], [[0.1, 0.9]], [1], "names the joints"),
    (list(NAMES), [[0.1]], [1], "point 0 has 1 positions, expected 2"),
    (list(NAMES), [[0.1, 0.9]] * (MAX_POINTS + 1), range(1, MAX_POINTS + 2), f"1 to {MAX_POINTS} points, got 101"),
    (list(NAMES), [], [], "1 to 100 points, got 0"),
])
def test_trajectory_commands_of_other_joints_or_sizes_are_refused(names, positions, times, match):
    with pytest.raises(CommandError, match=match):
        trajectory_points(names, positions, [t * 10_000_000 for t in times], {"carriage": 0, "string_length": 1},
                          0, lambda t: t / 10_000_000)


def test_trajectory_points_are_mapped_by_name_and_timed_at_the_step_they_end(nominal):
    steps, points = trajectory_points(["string_length", "carriage"], [[0.9, 0.1], [0.8, 0.2]],
                                      [20_000_000, 30_000_000], {"carriage": 0, "string_length": 1}, 1_000_000_000,
                                      lambda t: (t - 1_000_000_000) / 10_000_000 + 7)
    np.testing.assert_array_equal(points, [[0.1, 0.9], [0.2, 0.8]])
    np.testing.assert_array_equal(steps, [8.0, 9.0])   # at 2 and 3 steps after step 7: the ends of steps 8, 9


@pytest.mark.parametrize("steps, points, match", [
    ([1.0, 1.0], [[0.1, 0.9], [0.1, 0.9]], "strictly increasing"),
    ([2.0, 1.0], [[0.1, 0.9], [0.1, 0.9]], "strictly increasing"),
    ([1.0, float("nan")], [[0.1, 0.9], [0.1, 0.9]], "strictly increasing"),
    ([1.0, 2.0], [[0.1, 0.9], [0.1, float("nan")]], "point 1 has a non-finite position for string_length"),
    ([1.0], [[0.1, 0.9, 0.3]], r"points \(m, 2\)"),
    (None, [0.1, float("inf")], "2 finite values"),
])
def test_commands_with_bad_times_or_values_are_refused_and_nothing_changes(nominal, steps, points, match):
    with pytest.raises(CommandError, match=match):
        check_points(points, steps, 2, NAMES)
    sim = exact_arm(nominal)
    before = sim.setpoint.copy()
    with pytest.raises(ValueError, match=match):
        sim.receive_command(points, steps)
    run(sim, 3)
    np.testing.assert_array_equal(sim.setpoint, before)
    assert sim.pending_commands == 0


# ---------------------------------------------------------------------------------------------- the controller side

def test_lookahead_continues_the_correction_at_its_last_rate_halved_within_the_limits():
    limits = CommandLimits(np.array([-1.0, -1.0]), np.array([1.0, 1.0]), np.array([1.0, 1.0]),
                           np.array([10.0, 10.0])).for_dt(DT)
    plan = np.outer(np.arange(40), [1e-3, -2e-3])       # u_d(j): constant speeds 0.1 and -0.2 m/s

    def feedforward(j):
        return plan[j]

    look = Lookahead(4)
    rho = plan[9]                                       # the stream on the plan
    first = look.points(plan[10] + [2e-4, 0.0], 10, feedforward, None, limits, rho)
    np.testing.assert_allclose(first, plan[11:15] + [2e-4, 0.0], rtol=0, atol=1e-15)   # no previous: c held
    second = look.points(plan[11] + [3e-4, 0.0], 11, feedforward, None, limits, plan[10] + [2e-4, 0.0])
    gains = np.array([1.0, 1.5, 1.75, 1.875])           # 2 − 2^(1−i)
    np.testing.assert_allclose(second, plan[12:16] + [3e-4, 0.0] + np.outer(gains, [1e-4, 0.0]), rtol=0, atol=1e-15)
    # another plan in effect: the change is not continued
    other_plan = look.points(plan[12] + [5e-4, 0.0], 12, feedforward, "plan", limits, plan[11] + [3e-4, 0.0])
    np.testing.assert_allclose(other_plan, plan[13:17] + [5e-4, 0.0], rtol=0, atol=1e-15)
    # a correction that changed fast: its continuation is clamped to a stream within the drives' limits
    look.points(plan[19] + [0.0, -3e-3], 19, feedforward, None, limits, plan[18])
    u = plan[20] + [0.0, 1e-3]                          # admissible after plan[19]: Δv = 0.1 m/s = a_max Δt
    points = look.points(u, 20, feedforward, None, limits, plan[19])
    v = np.diff(np.vstack([plan[19], u, points]), axis=0) / DT
    a = np.diff(v, axis=0) / DT
    assert np.all(np.abs(a) <= 10.0 + 1e-9) and np.all(np.abs(v) <= 1.0 + 1e-12), (v, a)
    assert a[:, 1].max() > 10.0 - 1e-9                  # the clamp acted (unclamped: 30 m/s² at the first point)


def test_with_late_commands_the_string_stays_taut_with_trajectory_commands_only():
    """The wave on the realistic profile, 2 % of commands one step late, seeds 0-2: joint_trajectory keeps the
    plant's string at or above its minimum tension throughout without abort (measured 0.647-0.688 N, as without
    late commands); forward position commands let it go slack (0 N) on every seed — the rule matters."""
    _, trajectory = wave_motion()
    minimum = float(from_description(arm.load_description()).min_tension[0])
    for seed in (0, 1, 2):
        profile = HardwareProfile.named("realistic", seed=seed, command_jitter_steps=1, command_jitter_probability=0.02)
        lowest = {}
        for interface in ("joint_trajectory", "forward_position"):
            r = run_loop(trajectory, profile, ControllerOptions(command_interface=interface), hold_cycles=0)
            assert not r.aborted, (interface, r.abort_reason)
            lowest[interface] = float(r.tension[r.k <= r.N].min())
        assert lowest["joint_trajectory"] >= minimum and lowest["forward_position"] < minimum, (seed, lowest)


@pytest.mark.parametrize("lost", [2, 6])
def test_the_controller_predicts_the_drives_on_its_points_over_the_ticks_it_missed(nominal, lost):
    """The controller's record of the inputs in effect (tracking.prediction.CommandHistory, what its prediction and
    its commands' stream start from) against the drives of the exact stand-in: ``lost`` joint states from 0.1 s into
    the wave are lost. Over 2 (a gap the estimate bridges) the drives follow the last command's next points, and
    the record says so step by step (before the points were recorded it said the drives held the command's first
    setpoint). Over 6 the controller sends a stop (sample_gap): the record then restarts from that command's first
    setpoint at rest, as a forward position hold does (tracking.tick.Tracking.stopped)."""
    _, trajectory = wave_motion()
    m = nominal.model
    core = make_core(nominal, ControllerOptions(command_interface="joint_trajectory"))
    core.load_trajectory(trajectory, "wave")
    sim = SimulatedArm(HardwareProfile.named("perfect", command_delay_steps=1), trajectory.dt, nominal,
                       q0=trajectory.X[0, :m.nq])
    dt_ns, first, drives, kinds = int(round(trajectory.dt * 1e9)), 10, {}, []
    for cycle in range(first + lost + 5):
        if cycle == 0:
            assert core.start()[0]
        q = sim.measure()
        if not first <= cycle < first + lost:
            res = core.on_joint_state(q, (cycle + 1) * dt_ns, (cycle + 1) * dt_ns)
            kinds.append(res.kind)
            if res.lookahead is not None:
                points = np.vstack([res.command[m.nu:], res.lookahead[:, m.nu:]])
                sim.receive_command(points, cycle + core.delay + np.arange(len(points)))
            elif res.kind == "hold":
                sim.receive_stop()
        sim.step()
        drives[cycle] = sim.rho.copy()   # u_j's kinematic part is ρ_{j+1}: where step j leaves the drives
    history = core.staging.tracking.history
    last = first - 1   # the last command before the gap: the inputs of steps first, first + 1, …
    if lost == 2:
        assert kinds.count("hold") == 0
        for j in range(first, first + lost + 1):
            np.testing.assert_allclose(history.applied(j)[m.nu:], drives[j], atol=1e-12, err_msg=f"step {j}")
        assert np.abs(drives[first + 1] - drives[first]).max() > 1e-4   # the drives moved on the points
    else:
        assert "hold" in kinds
        stop = first + lost + core.delay   # the step the stop (sent at the first sample after the gap) arrives
        for j in (stop - 1, stop):
            np.testing.assert_array_equal(history.applied(j), history.applied(last + core.delay))
        assert np.all(np.asarray(history.stream_state(stop + 1, trajectory.dt)[1]) == 0.0)   # at rest
