"""The hardware stand-in without ROS (marionette_control.sim): every effect measured.

Delays are counted in cycles, noise and quantization measured statistically with seeded generators,
drive limits checked at every step of random and structured setpoint streams, the plant checked against
physics (statics against dynamics, superposition of small parameter errors, damping that changes the
motion but not the statics), disturbances against impulse-momentum, and the 'perfect' profile against an
independent loop of the core's step with today's rate-limited servo law, bit for bit.
"""

from __future__ import annotations

import dataclasses
import math
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marionette_control import _core
from marionette_control.sim.disturbance import DisturbanceError
from marionette_control.sim.drives import DRIVE_MODES, Drives
from marionette_control.sim.plant import _rest_residual, rest_configuration
from marionette_control.sim.profile import HardwareProfile
from marionette_control.sim.schedule import MeasurementQueue
from marionette_control.sim.simulator import SimulatedArm
from marionette_control.model.builder import without_constraints
from marionette_control.model.limits import from_description
from marionette_control.model.yaml_model import load_model_file
from marionette_control.model.library import marionette_arm as arm
from marionette_control.resources import config_file

DT = 0.01


@pytest.fixture(scope="module")
def nominal():
    return arm.load_description()


@pytest.fixture(scope="module")
def limits(nominal):
    return from_description(nominal)


def quiet(name: str = "perfect", **changes) -> HardwareProfile:
    """A shipped profile without measurement effects (for tests of the other effects)."""
    return HardwareProfile.named(name, noise_std=(0.0,), encoder_resolution=(0.0,), **changes)


# ============================================================================ profiles


def test_named_profiles_and_their_numbers():
    real, perfect = HardwareProfile.named("realistic"), HardwareProfile.named("perfect")
    assert real.name == "realistic" and real.plant_model_file == "marionette_arm_plant.yaml"
    assert real.command_delay_steps == 1 and real.drive_mode == "cyclic_position" and real.string == "one_sided"
    np.testing.assert_allclose(real.encoder_resolution, [2 * np.pi / 16384] * 2 + [0.04 / 4096, 2 * np.pi * 0.02 / 4096])
    np.testing.assert_allclose(real.noise_std, np.array(real.encoder_resolution) / 2)
    assert perfect.as_dict() == {"name": "perfect", "plant_model_file": "", "string": "holonomic",
                                 "command_delay_steps": 0, "command_jitter_steps": 0, "command_jitter_probability": 0.0,
                                 "drive_mode": "rate_limited", "drive_acceleration": 1.0, "encoder_resolution": [0.0],
                                 "noise_std": [0.0],
                                 "seed": 0}
    changed = HardwareProfile.named("realistic", command_delay_steps=2)
    assert changed.name == "custom" and changed.command_delay_steps == 2
    assert HardwareProfile.named("realistic", command_delay_steps=1).name == "realistic"
    assert HardwareProfile.named("perfect", noise_std=[0.001]).noise_std == (0.001,)  # lists become tuples


@pytest.mark.parametrize("changes, match", [
    (dict(drive_mode="servo"), "drive_mode: must be one of cyclic_position, profile_position, rate_limited"),
    (dict(command_delay_steps=-1), "command_delay_steps: must be within 0 … 100"),
    (dict(command_delay_steps=1.5), "command_delay_steps: expected an integer"),
    (dict(command_jitter_probability=1.5), "command_jitter_probability: must be within"),
    (dict(noise_std=(0.001, -0.001)), "noise_std: must be one value, or one per configuration"),
    (dict(encoder_resolution=(float("nan"),)), "encoder_resolution: must be one value"),
    (dict(seed=True), "seed: expected int"),
    (dict(bogus=1), "unknown HardwareProfile field"),
])
def test_profile_validation_names_the_field(changes, match):
    with pytest.raises(ValueError, match=match):
        HardwareProfile.named("realistic", **changes)


def test_unknown_profile_and_per_configuration_lengths(nominal):
    with pytest.raises(ValueError, match="unknown hardware profile 'ideal'.*realistic, perfect"):
        HardwareProfile.named("ideal")
    with pytest.raises(ValueError, match="noise_std has 3 values; the model has 4 configurations"):
        SimulatedArm(HardwareProfile.named("perfect", noise_std=(0.1, 0.1, 0.1)), DT, nominal)


def test_plant_must_be_the_same_machine(tmp_path, nominal):
    other = tmp_path / "other.yaml"
    other.write_text(textwrap.dedent(f"""
        base: {config_file('marionette_arm.yaml')}
        hardware: {{joint_names: {{shoulder_joint: shoulder, elbow: elbow, carriage: carriage,
                                   string_length: string_length}}}}
        """))
    with pytest.raises(ValueError, match="hardware joint names .* differ from the nominal model"):
        SimulatedArm(HardwareProfile.named("perfect", plant_model_file=str(other)), DT, nominal)
    with pytest.raises(ValueError, match="cannot load the plant model: .*no_such_plant.yaml"):
        SimulatedArm(HardwareProfile.named("perfect", plant_model_file="no_such_plant.yaml"), DT, nominal)


# ============================================================================ perfect = today's simulation


def todays_simulation(system, q0, commands, limits):
    """The simulator before the stand-in's effects, independently: a command received in cycle k is the target
    of step k, the servo moves at most max_velocity*dt per step (exactly onto a reachable target), range last."""
    nd, nq = system.model.nd, system.model.nq
    x = np.asarray(system.state_from_configs(q0, q0))
    target, reach = q0[nd:nq].copy(), limits.max_velocity * system.dt
    states = []
    for cmd in commands:
        if cmd is not None:
            target = np.clip(cmd, limits.lower, limits.upper)
        rho = x[nd:nq]
        e = target - rho
        nxt = np.where(np.abs(e) <= reach * (1.0 + 1e-9), target, rho + np.clip(e, -reach, reach))
        x = system.step(x, np.clip(nxt, limits.lower, limits.upper))[0]
        states.append(x)
    return np.array(states)


def test_perfect_profile_is_todays_simulation_bit_for_bit(nominal, limits):
    rng = np.random.default_rng(3)
    q0 = arm.static_equilibrium(nominal.model, *arm.RAISED).q
    commands = []
    lo, hi = q0[2:] - [0.1, 0.02], q0[2:] + [0.1, 0.0]
    rho = q0[2:].copy()
    for k in range(400):  # small steps, steps beyond one step's reach, gaps
        if k % 7 == 3:
            commands.append(None)
            continue
        jump = (k % 50 == 10) * np.array([0.08 * (-1) ** (k // 50), 0.0])
        rho = np.clip(rho + rng.normal(0.0, [0.004, 0.002]) + jump, lo, hi)
        commands.append(rho.copy())
    expected = todays_simulation(_core.DiscreteSystem(nominal.model, DT), q0, commands, limits)
    sim = SimulatedArm(HardwareProfile.named("perfect"), DT, nominal, q0=q0)
    np.testing.assert_array_equal(sim.measure(), q0)
    for k, cmd in enumerate(commands):
        if cmd is not None:
            sim.receive_command(cmd)
        assert sim.step() is None
        np.testing.assert_array_equal(sim.true_state(), expected[k])
        np.testing.assert_array_equal(sim.measure(), expected[k][:4])
    assert np.ptp(expected[:, 0]) > 0.05, "the arm moved"


# ============================================================================ command timing


def first_moving_step(sim: SimulatedArm, command) -> int:
    """Cycles from receiving ``command`` until the drives first move (0: during the step of the same cycle)."""
    rho = sim.rho.copy()
    sim.receive_command(command)
    for cycles in range(20):
        sim.step()
        if np.any(sim.rho != rho):
            return cycles
    raise AssertionError("the drives never moved")


@pytest.mark.parametrize("delay", [0, 1, 3])
def test_command_delay_in_steps(nominal, delay):
    sim = SimulatedArm(quiet(command_delay_steps=delay), DT, nominal)
    for _ in range(5):
        sim.step()
    assert first_moving_step(sim, sim.rho + [0.01, 0.0]) == delay


def test_default_delay_is_one_period_like_ros2_control(nominal):
    sim = SimulatedArm(quiet("realistic"), DT, nominal)
    assert first_moving_step(sim, sim.rho + [0.001, 0.0]) == 1


def test_jitter_is_seeded_bounded_and_keeps_the_order(nominal):
    def delays(seed, probability):
        sim = SimulatedArm(quiet(command_delay_steps=1, command_jitter_steps=2, command_jitter_probability=probability,
                                 seed=seed), DT, nominal)
        out = []
        for _ in range(1000):   # a command every 4th cycle: the order rule never binds here
            sim.receive_command(sim.rho)
            out.append(sim._stream.last_arrival - sim.k)
            for _ in range(4):
                sim.step()
        return np.array(out)

    d = delays(5, 0.3)
    assert set(d.tolist()) == {1, 2, 3} and np.array_equal(d, delays(5, 0.3))
    assert not np.array_equal(d, delays(6, 0.3))
    jittered = np.mean(d > 1)
    assert abs(jittered - 0.3) < 4 * math.sqrt(0.3 * 0.7 / d.size), jittered   # binomial, 4 sigma
    assert abs(np.mean(d == 3) - 0.15) < 4 * math.sqrt(0.15 * 0.85 / d.size)    # extra steps uniform in 1..2
    # FIFO: a late command never takes effect after a later one
    sim = SimulatedArm(quiet(command_jitter_steps=5, command_jitter_probability=0.5, seed=1), DT, nominal)
    for _ in range(100):
        sim.receive_command(sim.rho)
        sim.step()
        steps = sim._stream.pending(sim.k - 1)
        assert steps == sorted(steps)


# ============================================================================ encoders


def test_noise_std_measured_statistically(nominal):
    sigma = np.array([1e-3, 2e-3, 5e-4, 1e-4])
    sim = SimulatedArm(HardwareProfile.named("perfect", noise_std=tuple(sigma), seed=11), DT, nominal)
    err = np.array([sim.measure() - sim.q for _ in range(20000)])
    n = err.shape[0]
    np.testing.assert_allclose(err.std(axis=0), sigma, rtol=4 / math.sqrt(2 * n))   # std of a std, 4 sigma
    assert np.all(np.abs(err.mean(axis=0)) < 4 * sigma / math.sqrt(n))
    assert np.max(np.abs(np.corrcoef(err.T) - np.eye(4))) < 4 / math.sqrt(n), "independent per joint"
    same = SimulatedArm(HardwareProfile.named("perfect", noise_std=tuple(sigma), seed=11), DT, nominal)
    np.testing.assert_array_equal(same.measure(), err[0] + sim.q)


def test_quantization_measured_statistically(nominal):
    res = np.array(HardwareProfile.named("realistic").encoder_resolution)
    rng = np.random.default_rng(2)
    sim = SimulatedArm(HardwareProfile.named("perfect", encoder_resolution=tuple(res)), DT, nominal)
    errors = []
    for _ in range(4000):  # the true configuration moves through many counts: the error is uniform
        sim.receive_command(np.clip(sim.rho + rng.normal(0, 0.003, 2), [0.05, 0.9], [0.2, 1.0]))
        sim.step()
        q, meas = sim.q, sim.measure()
        np.testing.assert_allclose(meas / res, np.round(meas / res), rtol=0, atol=1e-6)   # whole counts
        assert np.all(np.abs(meas - q) <= res / 2 * (1 + 1e-9))
        errors.append(meas - q)
    err = np.array(errors)
    np.testing.assert_allclose(err.std(axis=0), res / math.sqrt(12), rtol=0.06)


def test_default_measurement_error_is_noise_and_counts(nominal):
    p = HardwareProfile.named("realistic", plant_model_file="", seed=4)
    sim = SimulatedArm(p, DT, nominal)
    err = np.array([sim.measure() - sim.q for _ in range(20000)])
    res, sigma = np.array(p.encoder_resolution), np.array(p.noise_std)
    # Sheppard: quantizing a noisy signal whose noise is not small against the count adds count^2/12
    np.testing.assert_allclose(err.std(axis=0), np.sqrt(sigma ** 2 + res ** 2 / 12), rtol=0.05)


# ============================================================================ drives


def run_drive(limits, mode, stream, rho0, v0=(0.0, 0.0)):
    """Positions (n, nk) of a drive fed ``stream`` (n, nk), asserting the speed, acceleration and range limits."""
    d = Drives(limits, mode, DT)
    d.reset(np.asarray(rho0, dtype=float))
    rho, v, out = np.array(rho0, dtype=float), np.array(v0, dtype=float), []
    for r in stream:
        d.command(r)
        nxt = d.advance(rho, v)
        speed = (nxt - rho) / DT
        assert np.all(np.abs(speed) <= limits.max_velocity * (1 + 1e-12))
        if mode != "rate_limited":
            assert np.all(np.abs(speed - v) <= limits.max_acceleration * DT * (1 + 1e-9) + 1e-12)
        assert np.all(nxt >= limits.lower) and np.all(nxt <= limits.upper)
        rho, v = nxt, speed
        out.append(rho)
    return np.array(out)


def admissible_stream(limits, rng, n, rho0):
    """A setpoint stream (n, nk) from rest at rho0 within 80 % of the speed and acceleration limits and 0.1 of the
    range: rho0 + Σ_i A_i (1 − cos(ω_i t)), whose speed and acceleration are at most Σ A_i ω_i and Σ A_i ω_i²."""
    t = (np.arange(n) + 1.0) * DT
    out = np.tile(np.asarray(rho0, dtype=float), (n, 1))
    for j in range(out.shape[1]):
        omega = rng.uniform(0.5, 12.0, 3)
        amp = rng.uniform(-1.0, 1.0, 3)
        room = min(rho0[j] - limits.lower[j], limits.upper[j] - rho0[j]) - 0.1
        amp *= min(0.8 * limits.max_velocity[j] / np.sum(np.abs(amp) * omega),
                   0.8 * limits.max_acceleration[j] / np.sum(np.abs(amp) * omega ** 2), room / (2 * np.sum(np.abs(amp))))
        out[:, j] += np.sum(amp * (1.0 - np.cos(np.outer(t, omega))), axis=1)
    return out


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_a_stream_within_the_limits_is_followed_exactly(limits, seed):
    rng = np.random.default_rng(seed)
    rho0 = np.array([0.3, 0.6])
    stream = admissible_stream(limits, rng, 300, rho0)
    np.testing.assert_array_equal(run_drive(limits, "cyclic_position", stream, rho0), stream)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), mode=st.sampled_from(DRIVE_MODES))
def test_any_stream_keeps_the_limits(limits, seed, mode):
    rng = np.random.default_rng(seed)
    jumps = rng.normal(0.0, 0.05, (300, 2)) * (rng.random((300, 1)) < 0.2)
    stream = np.clip(np.array([0.3, 0.6]) + np.cumsum(jumps, axis=0) + rng.normal(0, 0.01, (300, 2)),
                     limits.lower - 0.1, limits.upper + 0.1)   # the drive saturates too
    run_drive(limits, mode, stream, [0.3, 0.6])   # asserts the limits at every step


@pytest.mark.parametrize("mode", ["cyclic_position", "profile_position"])
def test_a_step_is_reached_without_overshoot(limits, mode):
    for target in (0.65, 0.3005, -0.25):
        out = run_drive(limits, mode, np.tile([target, 0.6], (120, 1)), [0.3, 0.6])
        direction = np.sign(target - 0.3)
        assert np.all(direction * (out[:, 0] - target) <= 0.0), "never past the target"
        assert out[-1, 0] == target, "arrives exactly"
        # the fastest possible: accelerate, (cruise,) brake; within one step of the time-optimal profile
        a, v = limits.max_acceleration[0], limits.max_velocity[0]
        d = abs(target - 0.3)
        t_opt = 2 * math.sqrt(d / a) if d < v * v / a else d / v + v / a
        assert np.argmax(out[:, 0] == target) + 1 <= math.ceil(t_opt / DT) + 2


def test_a_ramp_is_caught_up_without_overshoot_and_then_followed_exactly(limits):
    """A setpoint stream jumping from rest to 1 m/s (100 m/s² in one step): the cyclic-position drive accelerates
    at its limit, closes the lag without passing the stream and stays on it; the profile-position drive lags by
    its braking distance for as long as the stream moves."""
    stream = np.array([[-0.2 + 0.01 * (k + 1), 0.6] for k in range(80)])
    cyclic = run_drive(limits, "cyclic_position", stream, [-0.2, 0.6])
    lag = stream[:, 0] - cyclic[:, 0]
    assert np.all(lag >= 0.0), "never ahead of the stream"
    on = int(np.argmax(lag == 0.0))
    assert on > 0 and np.all(lag[on:] == 0.0)
    # catching up from rest to 1 m/s at 15 m/s²: about 2 v/a (speed up past v, come back), i.e. 14 steps here
    assert on <= math.ceil(2 * 1.0 / limits.max_acceleration[0] / DT) + 2
    profile = run_drive(limits, "profile_position", stream, [-0.2, 0.6])
    steady = (stream[:, 0] - profile[:, 0])[-20:]
    a = limits.max_acceleration[0]
    np.testing.assert_allclose(steady, 1.0 ** 2 / (2 * a), rtol=0.2)   # the braking distance v²/(2a)


def test_hold_stops_without_turning_back(limits):
    for v in (0.3, 1.0, 2.0, -1.7):
        d = Drives(limits, "cyclic_position", DT)
        rho, speed = np.array([0.2, 0.6]), np.array([v, 0.0])
        d.hold(rho, speed)
        path = [rho[0]]
        for _ in range(60):
            nxt = d.advance(rho, speed)
            speed, rho = (nxt - rho) / DT, nxt
            path.append(rho[0])
        steps = np.diff(path)
        assert np.all(np.sign(v) * steps >= 0), "monotone: no reversal"
        assert np.all(np.abs(np.diff(steps)) <= limits.max_acceleration[0] * DT ** 2 * (1 + 1e-9))
        assert rho[0] == d.setpoint[0] and speed[0] == 0.0


# ============================================================================ plant


def plant_variant(tmp_path, name, overrides: str):
    p = tmp_path / f"{name}.yaml"
    p.write_text(f"name: {name}\nbase: {config_file('marionette_arm.yaml')}\noverrides:\n"
                 + textwrap.indent(overrides, "  "))
    return load_model_file(p)


PLANT_PARTS = {
    "masses": textwrap.dedent("""\
        masses:
          upper_arm: {mass: 0.212, center_of_mass: [0.0, 0.0, -0.127], inertia: [1.24e-3, 1.24e-3, 2.4e-5]}
          forearm: {mass: 0.160, center_of_mass: [0.0, 0.0, -0.116], inertia: [8.8e-4, 8.8e-4, 1.8e-5]}
        """),
    "hook": "placements: {hook: {translation: [0.0, 0.001, -0.2015]}}\n",
    "damping": "damping: {shoulder: 0.03, elbow: 0.015}\n",
}


def test_plant_rest_pose_differs_from_the_nominal_as_its_errors_predict(tmp_path, nominal):
    q_nom = arm.static_equilibrium(nominal.model, *arm.LOWERED).q
    plant = load_model_file(config_file("marionette_arm_plant.yaml"))
    q_plant = rest_configuration(plant.model, q_nom)
    shift = q_plant - q_nom
    assert np.all(shift[2:] == 0.0), "same actuator positions"
    assert 1e-4 < np.abs(shift[:2]).max() < 0.02, "a visible but moderate shift (rad)"
    assert _rest_residual(plant.model, q_plant) < 1e-11 < _rest_residual(plant.model, q_nom)
    parts = {k: rest_configuration(plant_variant(tmp_path, k, v).model, q_nom) - q_nom for k, v in PLANT_PARTS.items()}
    # damping changes the motion, never the statics: the nominal rest pose is returned bit for bit
    assert np.all(parts["damping"] == 0.0)
    # small errors superpose: the parts add up to the whole (to second order in the errors)
    np.testing.assert_allclose(parts["masses"] + parts["hook"], shift, rtol=0.05, atol=2e-5)
    # more weight further out on the same string: the string pulls harder
    def tension(model, q):
        g = -np.asarray(model.lagrangian(q, np.zeros(4), 1)["Lq"])[:2]
        jd = np.asarray(model.constraints(q)[1])[0, :2]
        return -2.0 * float(jd @ g / (jd @ jd)) * q[3]
    heavier = plant_variant(tmp_path, "masses", PLANT_PARTS["masses"]).model
    assert tension(heavier, q_nom + parts["masses"]) > 1.03 * tension(nominal.model, q_nom) > 0


def test_plant_dynamics_come_to_rest_at_the_computed_rest_pose(tmp_path, nominal):
    """Statics against dynamics: released from the nominal rest pose, a heavily damped copy of the plant (damping
    does not move rest poses) settles where rest_configuration says the plant rests."""
    q_nom = arm.static_equilibrium(nominal.model, *arm.LOWERED).q
    damped = plant_variant(tmp_path, "damped_plant", PLANT_PARTS["masses"] + PLANT_PARTS["hook"]
                           + "damping: {shoulder: 0.4, elbow: 0.2}\n")
    start = arm.consistent_configuration(damped.model, *q_nom[:3])   # the moved hook needs another string length
    expected = rest_configuration(damped.model, start)
    sim = SimulatedArm(HardwareProfile.named("perfect"), DT, damped, q0=start)
    sim.reset(start, settle=False)
    for _ in range(1500):
        sim.step()
    np.testing.assert_allclose(sim.q, expected, rtol=0, atol=1e-7)


def test_plant_damping_error_speeds_up_the_decay_by_its_ratio(tmp_path, nominal):
    def decay_rate(desc):
        sim = SimulatedArm(HardwareProfile.named("perfect"), DT, desc)
        sim.disturb("forearm_inertial", "impulse", impulse=(0.0, 0.02, 0.0))
        energy = []
        for _ in range(400):
            sim.step()
            energy.append(desc.model.energy(sim.q, sim.true_velocities()) - desc.model.energy(sim.q0, np.zeros(4)))
        e = np.array(energy[20:])   # a 1e-3 J swing decays about 100-fold per 2 s: far above round-off here
        return -np.polyfit(np.arange(e.size) * DT, np.log(e), 1)[0]

    ratio = decay_rate(plant_variant(tmp_path, "damped", PLANT_PARTS["damping"])) / decay_rate(nominal)
    assert abs(ratio - 1.5) < 0.1, ratio


def test_rest_configuration_errors():
    model = arm.load_description().model
    with pytest.raises(ValueError, match="no rest configuration"):
        rest_configuration(model, np.array([0.0, 0.0, 5.0, 0.2]))   # the string cannot reach


# ============================================================================ disturbances


CART_PENDULUM = """
name: cart_pendulum_test
kinematic: [cart]
frames:
  - {name: cart_frame, parent: world, transform: ty, config: cart}
  - {name: pole, parent: cart_frame, transform: rx, config: theta}
  - {name: bob, parent: pole, transform: tz, value: -0.5, mass: 0.4}
actuators:
  cart: {min: -1.0, max: 1.0, max_velocity: 1.0, max_acceleration: 5.0}
"""


@pytest.fixture(scope="module")
def pendulum(tmp_path_factory):
    p = tmp_path_factory.mktemp("pendulum") / "cart_pendulum.yaml"
    p.write_text(CART_PENDULUM)
    return load_model_file(p)


def test_impulse_changes_the_momentum_by_its_moment(pendulum):
    """An impulse J (world +y) on the bob hanging at rest: the midpoint rule's momentum balance over the step,
    p_1 − p_0 = Δt (l F − m g l sin θ_mid) with F = J/Δt (thesis (4.12a), forcing at the midpoint; the force is
    held in the bob's coordinates over the step, so its moment arm stays l)."""
    sim = SimulatedArm(HardwareProfile.named("perfect"), DT, pendulum, q0=np.zeros(2))
    assert sim.bodies == ["bob"]
    d = sim.disturb("bob", "impulse", impulse=(0.0, 0.01, 0.0))
    assert d.start_step == sim.k and len(d.forces) == 1
    sim.step()
    theta_mid = 0.5 * sim.q[0]
    expected = 0.5 * 0.01 - DT * 0.4 * 9.81 * 0.5 * math.sin(theta_mid)
    np.testing.assert_allclose(sim.x[2], expected, rtol=1e-9)
    sim.step()
    assert not np.any(sim._u[: sim.nu]), "one step only"


def test_force_profiles_deliver_their_impulse_in_world_coordinates(pendulum):
    sim = SimulatedArm(HardwareProfile.named("perfect"), DT, pendulum, q0=np.zeros(2))
    const = sim.disturb("bob", "constant", force=(0.0, 2.0, 0.0), duration=0.1)
    np.testing.assert_allclose(const.impulse(DT), [0.0, 0.2, 0.0], rtol=1e-12)
    half = sim.disturb("bob", "half_sine", force=(0.0, 0.0, 3.0), duration=0.2)
    n = 20   # midpoint samples of a half sine: dt F / sin(pi / 2n) = 2 F T / pi to O(1/n^2)
    np.testing.assert_allclose(half.impulse(DT), [0.0, 0.0, DT * 3.0 / math.sin(math.pi / (2 * n))], rtol=1e-12)
    assert abs(half.impulse(DT)[2] - 2 * 3.0 * 0.2 / math.pi) < 3.0 * 0.2 * (math.pi / (2 * n)) ** 2
    # world coordinates: with the pendulum swung out, the force on the bob stays along world +y
    sim.reset(np.array([0.6, 0.0]), settle=False)
    sim.disturb("bob", "constant", force=(0.0, 1.0, 0.0), duration=0.01)
    sim._apply_disturbances()
    r = sim.model.placements(sim.q)[sim.model.frame_index("bob")][:3, :3]
    np.testing.assert_allclose(r @ sim._u[:3], [0.0, 1.0, 0.0], atol=1e-15)


def test_disturbance_timing_and_reset(nominal):
    sim = SimulatedArm(HardwareProfile.named("perfect"), DT, nominal)
    for _ in range(10):
        sim.step()
    d = sim.disturb("forearm_inertial", "constant", force=(0.0, 1.0, 0.0), duration=0.05, start_time=0.2)
    assert (d.start_step, d.end_step) == (20, 25)
    rest = sim.true_state()
    while sim.k < 20:
        sim.step()
        np.testing.assert_array_equal(sim.true_state(), rest)   # nothing before the start
    sim.step()
    assert sim.true_state()[5] != rest[5], "pushed"
    while sim.k < 26:
        sim.step()
    assert not np.any(sim._u[: sim.nu]), "inputs back to zero after the end"
    sim.disturb("upper_arm_inertial", "constant", force=(1.0, 0.0, 0.0), duration=1.0)
    sim.reset()
    assert not sim._disturbances and not np.any(sim._u[: sim.nu])
    assert sim.disturb("forearm_inertial", "impulse", impulse=(0, 0.01, 0)).start_step == sim.k
    with pytest.raises(DisturbanceError, match=r"start_time 0.1 s is in the past \(now 0.26 s\)"):
        sim.disturb("forearm_inertial", "impulse", impulse=(0, 0.01, 0), start_time=0.1)


@pytest.mark.parametrize("kwargs, match", [
    (dict(body="carriage", profile="impulse", impulse=(0, 0.1, 0)), "unknown body 'carriage'.*upper_arm_inertial"),
    (dict(body="forearm", profile="impulse", impulse=(0, 0.1, 0)), "unknown body 'forearm'"),
    (dict(body="forearm_inertial", profile="kick"), "unknown profile 'kick'"),
    (dict(body="forearm_inertial", force=(0, float("nan"), 0), duration=0.1), "force must be 3 finite numbers"),
    (dict(body="forearm_inertial", force=(0, 1), duration=0.1), "force must be 3 finite numbers"),
    (dict(body="forearm_inertial", force=(0, 500, 0), duration=0.1), "force 500 N exceeds the plausible 50 N"),
    (dict(body="forearm_inertial", profile="impulse", impulse=(9, 0, 0)), "impulse 9 N s exceeds the plausible"),
    (dict(body="forearm_inertial", profile="impulse", impulse=(0, 1, 0), duration=0.1), "delivered within one step"),
    (dict(body="forearm_inertial", force=(0, 1, 0), duration=0.001), "shorter than one step"),
    (dict(body="forearm_inertial", force=(0, 1, 0), duration=60.0), "duration 60 s exceeds the plausible 10 s"),
    (dict(body="forearm_inertial", force=(0, 1, 0), duration=float("inf")), "duration must be a finite number"),
    (dict(body="forearm_inertial", force=(0, 1, 0), duration=0.1, impulse=(0, 1, 0)), "'impulse' must be 0"),
])
def test_bad_disturbances_are_refused_with_specific_errors(nominal, kwargs, match):
    sim = SimulatedArm(HardwareProfile.named("perfect"), DT, nominal)
    kwargs = {"profile": "constant", **kwargs}
    with pytest.raises(DisturbanceError, match=match):
        sim.disturb(**kwargs)
    assert not sim._disturbances


# ============================================================================ faults, reset, state


def test_infeasible_target_is_held_short_of_the_edge(nominal):
    """A string commanded longer than the arm reaches: the step fails, the drives hold, the run goes on."""
    slow = dataclasses.replace(from_description(nominal), max_velocity=np.array([2.0, 0.5]))
    sim = SimulatedArm(HardwareProfile.named("perfect"), DT, nominal, on_step_error="hold")
    sim.limits = sim.drives.limits = slow
    q0 = sim.q.copy()
    sim.receive_command(np.array([q0[2], 1.1]))
    states, faults = [sim.q.copy()], []
    for _ in range(150):
        f = sim.step()
        faults += [f] if f else []
        states.append(sim.q.copy())
    assert faults and faults[0].action == "held" and "no_convergence" in faults[0].message
    assert sim.step_errors == len(faults)
    np.testing.assert_array_equal(sim.setpoint, sim.rho)   # the setpoint is where the drives stopped
    assert q0[3] < sim.rho[1] < 1.1
    assert np.max(np.abs(nominal.model.constraints(sim.q)[0])) < 1e-8, "the string constraint still holds"
    assert np.abs(np.diff(np.array(states)[:, :2], axis=0)).max() < 0.5


def test_spurious_roots_are_faults_and_recovery_keeps_the_state_plausible(nominal):
    """At full winch speed Newton can 'converge' radians away near the stretched pose: never accepted."""
    for policy in ("hold", "reset"):
        sim = SimulatedArm(HardwareProfile.named("perfect"), DT, nominal, on_step_error=policy)
        q0 = sim.q.copy()
        sim.receive_command(np.array([q0[2], 1.1]))
        states, faults = [q0], []
        for _ in range(100):
            f = sim.step()
            faults += [f] if f else []
            states.append(sim.q.copy())
        assert faults and all(f.action in ("held", "backed_off", "reset") for f in faults)
        if policy == "reset":
            assert faults[0].action == "reset"
        resets = [i for i, q in enumerate(states) if i and np.array_equal(q, q0)]
        assert all(np.abs(states[i][:2] - states[i - 1][:2]).max() < 0.5
                   for i in range(1, len(states)) if i not in resets)
        assert np.max(np.abs(nominal.model.constraints(sim.q)[0])) < 1e-8


def test_reset_true_state_and_velocities(nominal):
    sim = SimulatedArm(HardwareProfile.named("realistic"), DT, nominal)
    x0 = sim.true_state()
    assert np.all(sim.true_velocities() == 0.0)
    sim.receive_command(sim.rho + [0.05, -0.02])
    q_prev = sim.q.copy()
    for _ in range(30):
        q_prev = sim.q.copy()
        sim.step()
    np.testing.assert_allclose(sim.true_velocities(), (sim.q - q_prev) / DT, rtol=0, atol=0)
    np.testing.assert_array_equal(sim.true_velocities()[2:], sim.v)   # the state's kinematic velocities
    k = sim.k
    sim.reset()
    np.testing.assert_array_equal(sim.true_state(), x0)
    assert sim.k == k and sim.pending_commands == 0 and np.array_equal(sim.setpoint, x0[2:4])
    with pytest.raises(ValueError, match="q0 must be 4 finite values"):
        sim.reset(np.array([0.0, np.nan, 0.1, 0.9]))
    with pytest.raises(ValueError, match="a command has 2 finite values"):
        sim.receive_command(np.array([0.1]))


def test_profile_changes_at_run_time(nominal):
    sim = SimulatedArm(HardwareProfile.named("realistic"), DT, nominal)
    assert np.any(sim.measure() != sim.q)
    sim.set_profile(sim.profile.replace(noise_std=(0.0,), encoder_resolution=(0.0,), drive_mode="rate_limited"))
    np.testing.assert_array_equal(sim.measure(), sim.q)
    assert sim.drives.mode == "rate_limited"
    with pytest.raises(ValueError, match="plant_model_file cannot change"):
        sim.set_profile(sim.profile.replace(plant_model_file=""))


def test_measurement_queue():
    q = MeasurementQueue()
    q.push(30, 0, [1.0])
    q.push(40, 10, [2.0])
    assert list(q.pop_due(29)) == []
    assert list(q.pop_due(35)) == [(0, [1.0])]
    assert list(q.pop_due(100)) == [(10, [2.0])] and len(q) == 0


def test_string_tension_at_rest_is_the_static_one(nominal):
    """SimulatedArm.tension(): at rest at the lowered pose the string carries the weight's pull along the chain's
    constraint gradient, T = −2 L (∇hᵀ g)/|∇h|² from the gravity torques g (the statics; the plant's multipliers
    give it through T = 2 L λ/Δt); NaN before the first step."""
    q = arm.static_equilibrium(nominal.model, *arm.LOWERED).q
    sim = SimulatedArm(HardwareProfile.named("perfect"), DT, nominal, q0=q)
    sim.reset(q, settle=False)
    assert np.isnan(sim.tension()).all()
    for _ in range(5):
        sim.step()
    g = -np.asarray(nominal.model.lagrangian(q, np.zeros(4), 1)["Lq"])[:2]
    jd = np.asarray(nominal.model.constraints(q)[1])[0, :2]
    static = -2.0 * float(jd @ g / (jd @ jd)) * q[3]
    assert static > 0
    np.testing.assert_allclose(sim.tension(), [static], rtol=1e-6)


# ============================================================================ one-sided string


def arm_with_damping(tmp_path, shoulder: float, elbow: float) -> str:
    """A plant file: the nominal arm with this joint damping [N m s/rad] (docs/models.md, variants)."""
    path = tmp_path / f"arm_damping_{shoulder:g}_{elbow:g}.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: arm_damping
        description: the nominal arm with other joint damping
        base: {config_file('marionette_arm.yaml')}
        overrides:
          damping: {{shoulder: {shoulder}, elbow: {elbow}}}
        """))
    return str(path)


def pay_out(profile: HardwareProfile, length: float, steps: int):
    """From rest at the lowered pose, the winch pays out ``length`` [m] at once (rate-limited drives: 1.5 m/s,
    faster than the arm can fall after it) and holds; the arm's configurations (steps + 1, nq), tensions and slack
    flags (steps,) of every step, the arm."""
    sim = SimulatedArm(profile, DT)
    sim.receive_command(sim.rho + [0.0, length])
    q, tension, slack = [sim.q.copy()], [], []
    for _ in range(steps):
        assert sim.step() is None
        q.append(sim.q.copy())
        tension.append(sim.tension()[0])
        slack.append(sim.slack()[0])
    return np.array(q), np.array(tension), np.array(slack), sim


def free_energy(model, q: np.ndarray) -> np.ndarray:
    """E_{k+1/2} (steps,) of the arm without its string (the free double pendulum) at the midpoints of q (steps+1,
    nq), with the mean velocities over each step; the drives' velocities left out (they carry no mass)."""
    v = np.diff(q, axis=0) / DT
    v[:, 2:] = 0.0
    return np.array([model.energy(0.5 * (a + b), w) for a, b, w in zip(q[:-1], q[1:], v)])


def test_a_string_paid_out_faster_than_the_arm_falls_goes_slack_and_catches(tmp_path):
    """Paying out 3 cm at once on the undamped arm: the string goes slack (tension 0), the arm flies free conserving
    the free double pendulum's energy, reaches the string's length again and catches: the catch takes out the
    kinetic energy of the stretching velocity, ½(Dh q̇)²/(Dh M⁻¹ Dhᵀ), and the string pulls from then on. The
    holonomic plant instead pushes the arm down with the string (tension < 0) and ends elsewhere."""
    plant = arm_with_damping(tmp_path, 0.0, 0.0)
    one_sided = quiet(string="one_sided", plant_model_file=plant)
    q, tension, slack, sim = pay_out(one_sided, 0.03, 60)
    free = without_constraints(sim.model, ["string"])
    caught = 11   # slack over steps 0 … 10 (one episode), taut again from step 11 on
    np.testing.assert_array_equal(np.flatnonzero(slack), np.arange(caught))
    assert sim.slack_episodes == 1
    assert sim.slack_steps == 11 and sim.slack_s == pytest.approx(0.11) and sim.tension_min_n == 0.0
    assert np.all(tension[slack] == 0.0) and np.all(tension[~slack] > 0.0)
    h = np.array([sim.model.constraints(qk)[0][0] for qk in q])   # |p_hook − p_carriage|² − L²
    assert np.all(h[1:caught] < 0.0) and np.all(np.abs(h[caught + 1:]) < 1e-9)
    # free flight (the drives stopped after 5 steps): the free double pendulum's energy, to 1e-5 relative
    energy = free_energy(free, q)
    flight = energy[5:caught]
    assert np.ptp(flight) < 1e-5 * flight[0]
    # the catch: the energy lost is the stretching velocity's (the free step's velocity over the catch step, at its
    # midpoint), within 3 % (the catch happens within a step); then conserved again on the string
    x = SimulatedArm(one_sided, DT)
    x.receive_command(x.rho + [0.0, 0.03])
    for _ in range(caught):
        x.step()
    x_free = np.asarray(_core.DiscreteSystem(free, DT).step(x.true_state(), np.r_[np.zeros(x.nu), x.rho])[0])
    q_mid, v = 0.5 * (x.q + x_free[:4]), (x_free[:4] - x.q) / DT
    mass = np.asarray(free.lagrangian(q_mid, v, 2)["Lvv"])[:2, :2]
    dh = np.asarray(sim.model.constraints(q_mid)[1])[0, :2]
    predicted = 0.5 * (dh @ v[:2]) ** 2 / (dh @ np.linalg.solve(mass, dh))
    lost = energy[caught - 1] - energy[caught + 1]
    assert lost == pytest.approx(predicted, rel=0.03) and lost > 0.03 * energy[0]
    assert np.ptp(energy[caught + 1:]) < 1e-5 * energy[0]
    # the holonomic string pushes the arm down instead (the old stand-in): the angles part by degrees
    q_h, tension_h, slack_h, sim_h = pay_out(quiet(string="holonomic", plant_model_file=plant), 0.03, 60)
    assert not slack_h.any() and sim_h.slack_steps == 0 and sim_h.tension_min_n == tension_h.min() < -5.0
    assert np.degrees(np.abs(q_h[:, :2] - q[:, :2]).max()) > 5.0


def test_free_flight_loses_the_energy_the_damping_dissipates(tmp_path):
    """Paying out 8 cm: the hanging arm's hook never reaches the string's length again, so the arm swings free for
    the whole run; its free double pendulum energy falls by the damping's work Σ Δt cᵢ q̇ᵢ² (midpoint velocities,
    the forcing of thesis (4.12a)) within 3 %."""
    c = np.array([0.05, 0.02])
    q, tension, slack, sim = pay_out(quiet(string="one_sided", plant_model_file=arm_with_damping(tmp_path, *c)),
                                     0.08, 150)
    assert slack.all() and np.all(tension == 0.0) and sim.slack_episodes == 1 and sim.slack_s == pytest.approx(1.5)
    energy = free_energy(without_constraints(sim.model, ["string"]), q[6:])   # the drives stopped
    work = DT * (np.diff(q[6:, :2], axis=0) / DT) ** 2 @ c
    dissipated = work[1:-1].sum() + 0.5 * (work[0] + work[-1])   # from midpoint to midpoint
    assert energy[0] - energy[-1] == pytest.approx(dissipated, rel=0.03) and dissipated > 0.03 * energy[0]


def test_a_string_that_never_goes_slack_is_the_holonomic_plant_bit_for_bit(nominal):
    """The realistic arm (one-sided string) and the same arm with a holonomic string under a slow command stream
    that keeps the string taut: the same states and tensions, bit for bit, and no slack counted."""
    runs = []
    for string in ("one_sided", "holonomic"):
        sim = SimulatedArm(HardwareProfile.named("realistic", string=string), DT, nominal)
        rho0, states, tensions = sim.rho.copy(), [], []
        for k in range(150):
            sim.receive_command(rho0 + 0.04 * np.sin(np.pi * k / 150) * np.array([1.0, -0.5]))
            sim.step()
            states.append(sim.true_state())
            tensions.append(sim.tension())
        runs.append((np.array(states), np.array(tensions), sim))
    (x1, t1, s1), (x2, t2, s2) = runs
    np.testing.assert_array_equal(x1, x2)
    np.testing.assert_array_equal(t1, t2)
    assert t1.min() > 0.5 and s1.slack_steps == s1.slack_episodes == 0 and s1.tension_min_n == t1.min()
    assert s1.profile.string == "one_sided" and s2.profile.string == "holonomic"


def test_the_string_mode_is_a_fixed_profile_field(nominal):
    with pytest.raises(ValueError, match="HardwareProfile.string: must be one of one_sided, holonomic, got 'loose'"):
        HardwareProfile.named("realistic", string="loose")
    sim = SimulatedArm(HardwareProfile.named("realistic"), DT, nominal)
    with pytest.raises(ValueError, match="string cannot change while the arm runs"):
        sim.set_profile(sim.profile.replace(string="holonomic"))
    assert np.isnan(sim.tension_min_n) and sim.slack_s == 0.0
