"""Optimization specs: schema checks naming file and key, the problem they build, and the run."""

import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from marionette_control import _core
from marionette_control.model import library
from marionette_control.lq.gains import GainDesign, design_gains
from marionette_control.resources import config_dir
from marionette_control.ocp.spec import SpecError, load_spec, parse_spec
from marionette_control.ocp.spec_problem import build_problem, solve_spec
from marionette_control.ocp.tracking_problem import weights_by_name
from marionette_control.trajectory import Trajectory, TrajectoryError

CONFIGS = sorted((config_dir() / "optimize").glob("*.yaml"))

PENDULUM = """\
model: pendulum
dt: 0.05
motion:
  joints: [theta]
  interpolation: cosine
  keyframes: [[0.0, 0.0], [0.5, 0.0], [1.5, 1.5], [2.0, 1.5]]
weights:
  state: {default: 0.01, theta: 100}
  input: {torque: 0.1}
optimizer:
  max_iterations: 50
"""


def write(tmp_path, text, name="spec.yaml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_the_shipped_specs_load_and_build_their_problems():
    assert {p.stem for p in CONFIGS} >= {"pendulum_swingup", "cart_pendulum_swingup", "marionette_arm_wave"}
    for p in CONFIGS:
        spec = load_spec(p)
        prob = build_problem(spec)
        assert prob.Xd.shape == (prob.N + 1, prob.model.nx) and prob.Ud.shape == (prob.N, prob.model.nU)
        assert prob.N * spec.dt == pytest.approx(prob.t[-1])
        assert np.all(prob.Q >= 0)
        # the designed gains, for one step of delay: GainDesign's defaults, the arm's own (the shoulder by joint)
        arm = {"dynamic_configuration": {"shoulder": 5000.0, "elbow": 1000.0}, "angle_integral": 3.0e6}
        assert prob.gains == GainDesign(**(arm if p.stem == "marionette_arm_wave" else {}))


@pytest.mark.parametrize("edit, key, message", [
    ("surprise: 1\n", "surprise", "unknown key"),
    ("dt: -0.01\n", "dt", "must be > 0"),
    ("optimizer: {schedule: [[newton, null], [steepest, 3]]}\n", "optimizer.schedule[0]", "only the last"),
    ("optimizer: {schedule: [[gradient, 3]]}\n", "optimizer.schedule[0]", "unknown method 'gradient'"),
    ("optimizer: {tolerance: 0}\n", "optimizer.tolerance", "must be finite and > 0"),
    ("optimizer: {armijo: {beta: 1.5}}\n", "optimizer.armijo.beta", "must be in (0, 1)"),
    ("optimizer: {deadline: -1}\n", "optimizer.deadline", "finite and > 0"),
    ("optimizer: {max_iterations: 2.5}\n", "optimizer.max_iterations", "integer"),
    ("initial_trajectory: {method: guess}\n", "initial_trajectory.method", "expected one of"),
    ("initial_trajectory: {method: simulate, file: x.npz}\n", "initial_trajectory.file", "only used with method file"),
    ("initial_trajectory: {method: embedding, embedding: {weights: [10, 1]}}\n", "initial_trajectory.embedding",
     "must increase"),
    ("initial_trajectory: {method: embedding, embedding: {start: nowhere}}\n", "initial_trajectory.embedding.start",
     "simulate or desired"),
    ("weights: {state: {theta: -1}}\n", "weights.state.theta", "must be >= 0"),
    ("tracking_gains: {velocity: {}}\n", "tracking_gains.velocity", "unknown key"),
    ("tracking_gains: {input: 0}\n", "tracking_gains.input", "must be > 0"),
    ("tracking_gains: {dynamic_configuration: -1}\n", "tracking_gains.dynamic_configuration", "must be >= 0"),
    ("tracking_gains: {drive_acceleration: .nan}\n", "tracking_gains.drive_acceleration", "must be finite"),
    ("tracking_gains: {delay_steps: 0.5}\n", "tracking_gains.delay_steps", "must be an integer >= 0"),
    ("tracking_gains: {delay_steps: -1}\n", "tracking_gains.delay_steps", "must be an integer >= 0"),
    ("tracking_gains: {angle_integral: {shoulder: -1}}\n", "tracking_gains.angle_integral.shoulder", "must be >= 0"),
    ("tracking_gains: {angle_integral: {}}\n", "tracking_gains.angle_integral", "by joint must map"),
    ("optimizer: {start: middle}\n", "optimizer.start", "expected one of unconstrained, initial"),
    ("retime: sometimes\n", "retime.mode", "expected one of off, uniform, warp"),
    ("retime: {mode: uniform, max_factor: 1}\n", "retime.max_factor", "must exceed 1"),
    ("retime: {mode: warp, tolerance: 0}\n", "retime.tolerance", "must be > 0"),
    ("retime: {mode: warp, precision: 0.7}\n", "retime.precision", "in (0, 0.5]"),
    ("retime: {mode: uniform, speed: 2}\n", "retime.speed", "unknown key"),
    ("retime: uniform\ninitial_trajectory: {method: file, file: spec.yaml}\n", "retime",
     "not initial_trajectory.method file"),
])
def test_schema_errors_name_the_file_and_the_key(tmp_path, edit, key, message):
    base = PENDULUM
    top = edit.split(":")[0]
    if top in ("optimizer", "weights", "dt"):
        base = "\n".join(line for line in base.splitlines() if not line.startswith(top)
                         and not (top == "optimizer" and line.startswith("  max_iterations"))
                         and not (top == "weights" and line.startswith(("  state", "  input")))) + "\n"
    p = write(tmp_path, base + edit)
    with pytest.raises(SpecError) as err:
        load_spec(p)
    text = str(err.value)
    assert text.startswith(f"{p}: {key}") and message in text, text


@pytest.mark.parametrize("motion, key, message", [
    ("motion: {name: wave, keyframes: [[0, 1], [1, 2]], joints: [theta]}", "motion", "exactly one of"),
    ("motion: {name: no_such_motion}", "motion.name", "no motion named 'no_such_motion'"),
    ("motion: {joints: [theta], keyframes: [[0, 0], [0, 1]]}", "motion.keyframes[1][0]", "increase strictly"),
    ("motion: {joints: [theta], keyframes: [[0, 0, 1], [1, 1, 1]]}", "motion.keyframes[0]", "expected [t, theta]"),
    ("motion: {joints: [theta], keyframes: [[0, 0], [1, 1]], interpolation: bezier}", "motion.interpolation",
     "expected one of"),
    ("motion: {file: missing.yaml}", "motion.file", "no such file"),
    ("motion: {name: wave, joints: [theta]}", "motion.joints", "only used with inline keyframes"),
])
def test_motion_errors_name_the_key(tmp_path, motion, key, message):
    text = "model: pendulum\ndt: 0.05\n" + motion + "\n"
    p = write(tmp_path, text)
    with pytest.raises(SpecError, match=None) as err:
        load_spec(p)
    assert str(err.value).startswith(f"{p}: {key}") and message in str(err.value), str(err.value)


def test_name_checks_against_the_model_name_the_key(tmp_path):
    cases = [
        ("weights: {state: {shouldr: 1}}", "weights.state.shouldr", "matches no name"),
        ("weights: {input: {'q_*': 1}}", "weights.input.q_*", "matches no name"),
        ("initial_state: {configs: {phi: 1}}", "initial_state.configs.phi", "not a configuration"),
        ("initial_trajectory: {method: simulate, inputs: {force: 1}}", "initial_trajectory.inputs.force",
         "not an input"),
    ]
    for extra, key, message in cases:
        p = write(tmp_path, "model: pendulum\ndt: 0.05\nmotion: {joints: [theta], keyframes: [[0, 0], [1, 1]]}\n"
                  + extra + "\n")
        spec = load_spec(p)
        with pytest.raises(SpecError) as err:
            if "inputs" in extra:
                solve_spec(spec)
            else:
                build_problem(spec)
        assert str(err.value).startswith(f"{p}: {key}") and message in str(err.value), str(err.value)
    p = write(tmp_path, "model: pendulum\ndt: 0.05\nmotion: {joints: [phi], keyframes: [[0, 0], [1, 1]]}\n")
    with pytest.raises(SpecError, match="'phi' is not a configuration of model 'pendulum'"):
        build_problem(load_spec(p))
    p = write(tmp_path, "model: no_such_model\ndt: 0.05\nmotion: {joints: [phi], keyframes: [[0, 0], [1, 1]]}\n")
    with pytest.raises(SpecError, match="model: unknown model 'no_such_model'"):
        build_problem(load_spec(p))


def test_duplicate_keys_and_overrides(tmp_path):
    p = write(tmp_path, PENDULUM + "dt: 0.1\n")
    with pytest.raises(SpecError, match="duplicate key 'dt'"):
        load_spec(p)
    p = write(tmp_path, PENDULUM)
    spec = load_spec(p, {"optimizer.max_iterations": 7, "weights.state.p_theta": 2.0, "optimizer.deadline": 30})
    assert spec.optimizer.max_iterations == 7 and spec.deadline == 30
    prob = build_problem(spec)
    np.testing.assert_array_equal(prob.Q, [100.0, 2.0])
    assert spec.raw["optimizer"]["max_iterations"] == 7


def test_weight_resolution_default_patterns_then_exact_names():
    names = ["shoulder", "elbow", "carriage", "p_shoulder", "p_elbow", "v_carriage"]
    w = weights_by_name(np.ones(len(names)), names, {"default": 0.5, "p_*": 2.0, "p_elbow": 3.0, "*er": 7.0})
    np.testing.assert_array_equal(w, [7.0, 0.5, 0.5, 7.0, 3.0, 0.5])


def test_desired_trajectory_from_inline_keyframes(tmp_path):
    spec = load_spec(write(tmp_path, PENDULUM))
    prob = build_problem(spec)
    th = prob.Xd[:, 0]
    assert prob.N == 40 and prob.tracked == ["theta"]
    # cosine easing: exact at the keys, half-way at the middle of a segment, flat at the keys
    np.testing.assert_allclose(th[[0, 10, 30, 40]], [0.0, 0.0, 1.5, 1.5], atol=1e-15)
    assert th[20] == pytest.approx(0.75, abs=1e-12)
    assert th[11] - th[10] < 0.02 * 1.5 and np.all(np.diff(th) >= -1e-15)
    np.testing.assert_array_equal(prob.Xd[:, 1], 0.0)       # momenta zero (thesis §6.7.2) by default
    spec = load_spec(write(tmp_path, PENDULUM), {"motion.momenta": "legendre"})
    prob2 = build_problem(spec)
    system = _core.DiscreteSystem(prob2.model, spec.dt)
    np.testing.assert_allclose(prob2.Xd[25], system.state_from_configs(prob2.Xd[24, :1], prob2.Xd[25, :1]))
    assert abs(prob2.Xd[20, 1]) > 0.1


def test_wave_problem_and_equilibrium_initial_state():
    spec = load_spec(config_dir() / "optimize" / "marionette_arm_wave.yaml")
    prob = build_problem(spec)
    m = prob.model
    assert prob.N == 800 and prob.tracked == ["shoulder", "elbow"]
    np.testing.assert_allclose(np.degrees(prob.Xd[0, :2]), [0.0, 35.0], atol=1e-9)
    np.testing.assert_array_equal(prob.Xd[:, 2:], 0.0)     # carriage, length, momenta, velocities: zero
    # The initial state is the lowered pose held by the string: it matches the arm module's own
    # equilibrium (an independent computation) and does not move when the inputs are held.
    from marionette_control.model.library import marionette_arm as ma

    eq = ma.static_equilibrium(m, *ma.LOWERED)
    np.testing.assert_allclose(prob.x0[:4], eq.q, atol=1e-8)
    assert abs(m.constraints(prob.x0[:4])[0][0]) < 1e-12
    X, _ = prob.system.simulate(prob.x0, np.tile(prob.x0[2:4], (50, 1)))
    assert np.abs(X[:, :4] - prob.x0[:4]).max() < 1e-9
    assert (prob.Q[:2] == 100).all() and (prob.Q[2:] == 0.01).all()


def test_the_specs_tracking_gains_reach_the_saved_file(tmp_path):
    """The tracking_gains section is the GainDesign of the saved gains: K designed with it, its record in the file
    (what the controller checks its command delay against)."""
    spec = load_spec(write(tmp_path, PENDULUM + "tracking_gains: {dynamic_configuration: 50, momentum: 2, input: 0.5, "
                                                "delay_steps: 2}\n"))
    assert spec.gains == GainDesign(dynamic_configuration=50.0, momentum=2.0, input=0.5, delay_steps=2)
    res = solve_spec(spec)
    back = Trajectory.load(res.trajectory.save(tmp_path / "out.npz"), library.get("pendulum"))
    record = back.info["gain_design"]
    assert record["delay_steps"] == 2 and record["state_weights"] == [50.0, 2.0] and record["input_weights"] == [0.5]
    np.testing.assert_allclose(back.K, design_gains(res.problem.system, back.X, back.U, spec.gains).K, rtol=1e-12,
                               atol=1e-12)
    assert not np.allclose(back.K, design_gains(res.problem.system, back.X, back.U, GainDesign()).K)


def test_solve_writes_gains_and_statistics_into_the_trajectory(tmp_path):
    spec = load_spec(write(tmp_path, PENDULUM))
    stages = []
    res = solve_spec(spec, callback=lambda stage, rec: stages.append((stage, rec)))
    tr = res.trajectory
    assert res.result.converged and tr.info["converged"] and tr.info["reason"] == "converged"
    assert len(stages) == res.result.iterations == tr.info["iterations"] == len(tr.info["history"])
    assert {s for s, _ in stages} == {"optimization"}
    prob = res.problem
    assert tr.info["cost"] == pytest.approx(prob.cost.value(tr.X, tr.U), rel=1e-12)
    assert tr.info["cost"] < 0.05 * res.initial_cost
    h = tr.info["history"]
    assert [r["iteration"] for r in h] == list(range(len(h)))
    assert h[-1]["descent_norm"] < 1e-6 and all(r["method"] in ("steepest", "quasi_newton", "newton") for r in h)
    # K are the designed gains along the optimum (GainDesign's defaults: no tracking_gains section), with their
    # record
    np.testing.assert_allclose(tr.K, design_gains(prob.system, tr.X, tr.U, GainDesign()).K, rtol=1e-12, atol=1e-12)
    assert tr.info["gain_design"]["delay_steps"] == 1 and tr.info["gain_design"]["state_weights"] == [1000.0, 1.0]
    assert tr.info["model_source"] == {"kind": "registry", "name": "pendulum", "params": {}}
    assert tr.info["summary"]["tracking_errors"]["theta"]["rms"] < 0.1
    # the file round-trips and is refused for another model
    path = tr.save(tmp_path / "out.npz")
    back = Trajectory.load(path, library.get("pendulum"))
    np.testing.assert_array_equal(back.K, tr.K)
    assert back.info["history"] == tr.info["history"]
    with pytest.raises(TrajectoryError, match="made for model 'pendulum', not 'double_pendulum'"):
        Trajectory.load(path, library.get("double_pendulum"))
    with pytest.raises(TrajectoryError, match="different version of model 'pendulum'"):
        Trajectory.load(path, library.get("pendulum", length=2.0))


def test_solve_stops_at_the_deadline_or_on_cancel_with_a_feasible_trajectory(tmp_path):
    spec = load_spec(write(tmp_path, PENDULUM))
    calls = []
    res = solve_spec(spec, callback=lambda s, r: calls.append(r), should_stop=lambda: len(calls) >= 2)
    assert res.result.reason == "cancelled" and len(calls) == 2 and not res.trajectory.info["converged"]
    X, _ = res.problem.system.simulate(res.problem.x0, res.trajectory.U)
    np.testing.assert_allclose(X, res.trajectory.X, atol=1e-10)
    assert res.trajectory.K.shape == (res.problem.N, 1, 2)
    # The optimization gets at least 1 ms of the spent deadline; a callback that takes 2 ms per iteration
    # (not the solver's speed: it converges in about 1 ms) makes the deadline pass by the second iteration.
    res = solve_spec(load_spec(write(tmp_path, PENDULUM), {"optimizer.deadline": 1e-4}),
                callback=lambda stage, record: time.sleep(0.002))
    assert res.result.reason == "deadline"


def test_initial_trajectory_methods(tmp_path):
    legendre = {"motion.momenta": "legendre"}
    base = load_spec(write(tmp_path, PENDULUM), legendre)
    reference = solve_spec(base)
    for method in ("simulate", "desired", "embedding"):
        spec = load_spec(write(tmp_path, PENDULUM), dict(legendre, **{"initial_trajectory.method": method}))
        res = solve_spec(spec)
        assert res.result.converged, method
        assert res.trajectory.info["cost"] == pytest.approx(reference.trajectory.info["cost"], rel=1e-6)
        if method == "embedding":
            assert res.stages and res.trajectory.info["stages"][0]["stage"].startswith("embedding 1/3")
        if method == "desired":   # the LQR-tracked desired motion starts closer than the hanging pendulum
            assert res.initial_cost < 0.9 * reference.initial_cost
    prev = solve_spec(base).trajectory.save(tmp_path / "prev.npz")
    spec = load_spec(write(tmp_path, PENDULUM), dict(legendre, **{"initial_trajectory.method": "file",
                                                                   "initial_trajectory.file": str(prev)}))
    res = solve_spec(spec)
    assert res.result.iterations == 1 and res.result.converged      # warm start at the optimum
    with pytest.raises(SpecError, match="initial_trajectory.file: .*has 40 steps of 0.05 s; the problem has 20"):
        solve_spec(load_spec(write(tmp_path, PENDULUM), {"initial_trajectory.method": "file", "dt": 0.1,
                                                     "initial_trajectory.file": str(prev)}))


def test_retime_and_start_are_read(tmp_path):
    """``retime`` as a mode (a bare ``off`` YAML reads as false) or a mapping; ``optimizer.start``; both reach the
    problem; re-timing a trajectory file is refused (it has no keyframes to stretch)."""
    spec = load_spec(write(tmp_path, PENDULUM + "retime: off\n"))
    assert spec.retime.mode == "off" and spec.start == "unconstrained"
    spec = load_spec(write(tmp_path, PENDULUM), {"retime": {"mode": "warp", "tolerance": 0.01, "max_factor": 3},
                                                 "optimizer.start": "initial"})
    p = build_problem(spec)
    assert (p.retime.mode, p.retime.tolerance, p.retime.max_factor, p.start) == ("warp", 0.01, 3.0, "initial")
    assert p.keyframes.joints == ("theta",) and p.keyframes.interpolation == "cosine"
    np.testing.assert_array_equal(p.keyframes.times, [0.0, 0.5, 1.5, 2.0])
    twice = p.rebuild(p.keyframes.retimed(2 * p.keyframes.times))
    assert twice.N == 2 * p.N and twice.X0.shape == (2 * p.N + 1, 2) and twice.retime == p.retime
    np.testing.assert_allclose(twice.Xd[::2, 0], p.Xd[:, 0], atol=1e-12)   # the same keys, later
    prev = solve_spec(load_spec(write(tmp_path, PENDULUM))).trajectory.save(tmp_path / "prev.npz")
    with pytest.raises(SpecError, match="retime: re-timing needs the motion as keyframes"):
        load_spec(write(tmp_path, "model: pendulum\ndt: 0.05\nmotion: {trajectory: prev.npz}\nretime: uniform\n"))
    assert prev.is_file()


def test_parse_spec_from_a_mapping():
    spec = parse_spec({"model": {"name": "double_pendulum", "params": {"damping": 0.1}}, "dt": 0.01,
                       "motion": {"joints": ["theta1"], "keyframes": [[0, 0], [0.1, 0.2]]}})
    prob = build_problem(spec)
    assert prob.model.name == "double_pendulum" and prob.N == 10
    with pytest.raises(SpecError, match="<spec>: model: give either name"):
        parse_spec({"model": {"name": "a", "file": "b"}, "dt": 0.1, "motion": {"name": "wave"}})
