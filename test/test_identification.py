"""Calibration from the arm's own data (marionette_control.identification): exact parameter derivatives against
finite differences, the physics the fit rests on (the DEL residual's linearity, the common factor no motion can
fix), the estimates against the stand-in's true plants from recorded bags — inside their reported 3σ — and the
refusals and honest answers for bad data."""

from __future__ import annotations

import json

import numpy as np
import pytest

from marionette_control import _core
from marionette_control.bags.stand_in import run_open_loop, write_bag
from marionette_control.cli import calibrate as cli
from marionette_control.identification.calibration import calibrate, default_parameters
from marionette_control.identification.equation_error import (
    EquationError,
    parameter_values,
)
from marionette_control.identification.fit import Prior, noise_levels
from marionette_control.identification.output_error import OutputError
from marionette_control.identification.parameters import ModelParameters, ParameterError
from marionette_control.identification.recording import (
    RecordingError,
    from_bag,
    from_table,
)
from marionette_control.model.yaml_model import load_model_file
from marionette_control.ocp.spec import load_spec
from marionette_control.ocp.spec_problem import solve_spec
from marionette_control.resources import config_file

NAMES = ["upper_arm.mass", "forearm.mass", "upper_arm.center_of_mass.z", "forearm.center_of_mass.z",
         "upper_arm.inertia.xx", "forearm.inertia.xx", "shoulder.damping", "elbow.damping",
         "hook.translation.y", "hook.translation.z"]


@pytest.fixture(scope="module")
def params():
    return ModelParameters(config_file("marionette_arm.yaml"))


@pytest.fixture(scope="module")
def wave():
    """The optimized wave (the motion commands of these recordings)."""
    return solve_spec(load_spec(config_file("optimize", "marionette_arm_wave.yaml"))).trajectory


@pytest.fixture(scope="module")
def realistic(wave):
    return run_open_loop(wave, "marionette_arm_plant.yaml", seed=0)


def test_the_builder_builds_the_file_unchanged_and_values_as_a_variant_file_would(params, tmp_path):
    assert params.model({}).hash == params.description.model.hash
    ps = params.parameters(["forearm.mass", "forearm.center_of_mass.z", "hook.translation.z", "elbow.damping"])
    built = params.model(dict(zip(ps, [0.17, -0.12, -0.203, 0.02])))
    f = tmp_path / "v.yaml"
    f.write_text(f"name: marionette_arm\nbase: {config_file('marionette_arm.yaml')}\noverrides:\n"
                 "  masses: {forearm: {mass: 0.17, center_of_mass: [0, 0, -0.12]}}\n"
                 "  placements: {hook: {translation: [0, 0, -0.203]}}\n  damping: {elbow: 0.02}\n")
    assert built.hash == load_model_file(f).model.hash


def test_parameter_names_are_checked(params):
    with pytest.raises(ParameterError, match="'nose' has no mass"):
        params.parameter("nose.mass")
    with pytest.raises(ParameterError, match="not a dynamic configuration"):
        params.parameter("carriage.damping")
    with pytest.raises(ParameterError, match="not a parameter name"):
        params.parameter("forearm.weight")


def test_equation_error_jacobian_matches_finite_differences(params, realistic):
    Q = realistic[0][200:260]
    ps = params.parameters(NAMES + ["shoulder.offset", "string_length.offset"])
    ee = EquationError(params, Q, 0.01, ps)
    th = parameter_values(params, ps)
    pt = ee.evaluate(th)
    for i, p in enumerate(ps):
        h = 1e-6 * max(1e-2, abs(th[i]))
        up, down = th.copy(), th.copy()
        up[i] += h
        down[i] -= h
        fd = (ee.evaluate(up).error - ee.evaluate(down).error) / (2 * h)
        scale = np.abs(fd).max()
        assert np.abs(pt.jacobian[:, :, i] - fd).max() <= 1e-6 * scale, p.name


def test_linear_increments_do_not_depend_on_the_step(params, realistic):
    """The DEL residual is affine in a mass, an inertia, a damping coefficient (thesis (3.7)-(3.12), (3.19)):
    its increment over a step s, divided by s, is the same for every s — the derivative the fit uses."""
    Q = realistic[2][100:140]
    N = len(Q) - 1

    def residual(values):
        model = params.model(values)
        R, _ = _core.DiscreteSystem(model, 0.01).del_residual(np.zeros(2), Q, np.zeros((N, 0)), np.zeros((N, 1)))
        return R[1:, :2]

    base = residual({})
    for p in params.parameters(["forearm.mass", "elbow.damping", "upper_arm.inertia.xx"]):
        v = params.nominal(p)
        small, large = ((residual({p: v + s}) - base) / s for s in (1e-3 * v, 2.0 * v))
        assert np.allclose(small, large, rtol=1e-6, atol=1e-9 * np.abs(large).max()), p.name


def test_output_error_sensitivities_match_finite_differences(params, realistic):
    ps = params.parameters(NAMES + ["carriage.offset"])
    oe = OutputError(params, realistic[0], 0.01, ps, starts=[150, 400], W=15)
    th = parameter_values(params, ps)
    x = oe.initial_states(th)
    pt = oe.evaluate(th, x)
    for i, p in enumerate(ps):
        h = 1e-6 * max(1e-2, abs(th[i]))
        up, down = th.copy(), th.copy()
        up[i] += h
        down[i] -= h
        fd = (oe.evaluate(up, x).error - oe.evaluate(down, x).error) / (2 * h)
        assert np.abs(pt.jacobian_theta[..., i] - fd).max() <= 1e-6 * np.abs(fd).max(), p.name
    for j in range(4):
        up, down = x.copy(), x.copy()
        up[1, j] += 1e-7
        down[1, j] -= 1e-7
        fd = (oe.evaluate(th, up).error - oe.evaluate(th, down).error)[1] / 2e-7
        assert np.abs(pt.jacobian_state[1, ..., j] - fd).max() <= 1e-6 * np.abs(fd).max()


def test_no_motion_fixes_a_common_factor_of_masses_inertias_and_damping(params, realistic):
    """Scaling every linear parameter scales the DEL residual and its Newton matrix alike: the equation error, a
    configuration error, does not change (why weighed masses are needed for absolute values)."""
    ps = params.parameters(NAMES)
    ee = EquationError(params, realistic[0][300:400], 0.01, ps)
    th = parameter_values(params, ps)
    scaled = np.where([p.linear for p in ps], 1.37 * th, th)
    a, b = ee.evaluate(th), ee.evaluate(scaled)
    assert np.abs(a.error - b.error).max() <= 1e-12
    assert np.allclose(b.multipliers[ee.nodes], 1.37 * a.multipliers[ee.nodes], rtol=1e-9)


def test_noise_levels_from_third_differences():
    rng = np.random.default_rng(1)
    t = np.arange(2000) * 0.01
    smooth = np.c_[np.sin(2 * t), 0.3 * np.cos(3 * t)]
    sigma = np.array([2e-4, 5e-5])
    est = noise_levels(smooth + rng.normal(0, sigma, smooth.shape))
    assert np.allclose(est, sigma, rtol=0.1)


def _check(calibration, truth: ModelParameters, names, rel, absolute):
    """Every estimate inside its reported 3σ of the truth; the named ones also within the stated error."""
    out = {}
    for e in calibration.estimates:
        t = truth.nominal(truth.parameter(e.name))
        assert abs(e.estimate - t) <= 3 * e.std, (e.name, e.estimate, t, e.std)
        out[e.name] = (e.estimate, t)
    for n in names:
        est, t = out[n]
        if n in absolute:
            assert abs(est - t) <= absolute[n], (n, est, t)
        else:
            assert abs(est - t) <= rel[n] * abs(t), (n, est, t)
    return out


TARGETS = {"shoulder.damping": 0.15, "elbow.damping": 0.15}
GEOMETRY = {"hook.translation.y": 5e-4, "hook.translation.z": 5e-4}


@pytest.mark.slow
@pytest.mark.parametrize("plant", ["marionette_arm_plant.yaml", "plants/forearm_heavy.yaml",
                                   "plants/damping_x3.yaml", "plants/hook_out_5mm.yaml"])
def test_calibration_from_a_bag_recovers_the_stand_ins_plant(params, wave, plant, tmp_path):
    """From a bag of the stand-in's encoders: the string's attachment within 0.5 mm, damping within 15 %, every
    estimate inside its 3σ; without weighing, the masses are not identified (the common factor) and say so."""
    Q, C, _, _ = run_open_loop(wave, plant, seed=1)
    bag = write_bag(tmp_path / "bag", params.description, 0.01, Q, C)
    recording = from_bag(bag, params.description, 0.01)
    truth = ModelParameters(config_file(plant))
    calibration, report = calibrate(params, recording, NAMES)
    _check(calibration, truth, list(TARGETS) + list(GEOMETRY), TARGETS, GEOMETRY)
    for n in ("upper_arm.mass", "forearm.mass"):
        assert not report["parameters"][n]["identifiable"]
    assert report["command_delay_steps"] == 1       # ros2_control's period, as the stand-in applies it


@pytest.mark.slow
def test_weighed_masses_fix_the_rest(params, realistic, tmp_path):
    """With both links weighed (1 g), centres of mass, inertias and damping are identified: within 3σ of the
    plant's and within 6 mm / 10 % / 5 %."""
    truth = ModelParameters(config_file("marionette_arm_plant.yaml"))
    priors = {n: Prior(truth.nominal(truth.parameter(n)), 0.001, known=True)
              for n in ("upper_arm.mass", "forearm.mass")}
    recording = table(tmp_path, realistic[0], params)
    calibration, _ = calibrate(params, recording, NAMES, priors)
    _check(calibration, truth, NAMES[2:],
           {"upper_arm.inertia.xx": 0.10, "forearm.inertia.xx": 0.10, "shoulder.damping": 0.05,
            "elbow.damping": 0.05},
           {"upper_arm.center_of_mass.z": 6e-3, "forearm.center_of_mass.z": 6e-3, **GEOMETRY})


def table(tmp_path, Q, params, dt=0.01):
    """A Recording of arrays, through the table reader a user's CSV/NPZ goes through."""
    f = tmp_path / "recording.npz"
    np.savez(f, t=np.arange(len(Q)) * dt, q=Q)
    return from_table(f, params.description, dt)


@pytest.mark.slow
def test_the_cli_calibrates_a_bag_with_dropped_samples_and_writes_a_usable_model(params, wave, tmp_path, capsys):
    """marionette-calibrate as a user runs it, on a bag that lost 5 % of its joint states: exit 0, every estimate
    inside its 3σ, the variant file loads as a model file with the estimates, the report names the gaps."""
    Q, C, _, _ = run_open_loop(wave, "marionette_arm_plant.yaml", seed=2)
    keep = np.random.default_rng(0).random(len(Q)) > 0.05
    bag = write_bag(tmp_path / "bag", params.description, 0.01, Q, C, keep=keep)
    out, report = tmp_path / "arm_calibrated.yaml", tmp_path / "report.json"
    code = cli.main([str(bag), "--parameters", *NAMES, "-o", str(out), "--json", str(report)])
    assert code == 0, capsys.readouterr().err
    rep = json.loads(report.read_text())
    assert any("without a sample" in n for n in rep["notes"])
    truth = ModelParameters(config_file("marionette_arm_plant.yaml"))
    for name, p in rep["parameters"].items():
        assert abs(p["estimate"] - truth.nominal(truth.parameter(name))) <= 3 * p["std"], name
    calibrated = ModelParameters(out)
    for name in ("elbow.damping", "hook.translation.z"):
        assert calibrated.nominal(calibrated.parameter(name)) == pytest.approx(rep["parameters"][name]["estimate"],
                                                                                rel=1e-5)
    assert "not identifiable" in out.read_text() and "identified" in out.read_text()


@pytest.mark.slow
def test_poor_data_gives_honest_uncertainty(params, wave, tmp_path):
    """Encoder noise ×3: every estimate still inside its (wider) 3σ. A parameter no planar motion excites (the
    hook's offset out of the arm's plane): reported not identifiable, its uncertainty the prior's, never invented."""
    Q, _, _, _ = run_open_loop(wave, "marionette_arm_plant.yaml", seed=3, noise_scale=3.0)
    calibration, report = calibrate(params, table(tmp_path, Q, params), NAMES + ["hook.translation.x"])
    _check(calibration, ModelParameters(config_file("marionette_arm_plant.yaml")), [], {}, {})
    out_of_plane = report["parameters"]["hook.translation.x"]
    assert not out_of_plane["identifiable"] and out_of_plane["std"] >= 0.4 * out_of_plane["prior_std"]


def test_unusable_recordings_are_refused_naming_what_is_missing(params, realistic, tmp_path):
    Q = realistic[0]
    bag = write_bag(tmp_path / "other_topic", params.description, 0.01, Q, topic="/arm/joint_states")
    with pytest.raises(RecordingError, match="no /joint_states in the bag .it has /arm/joint_states"):
        from_bag(bag, params.description, 0.01)
    with pytest.raises(RecordingError, match="too short"):
        calibrate(params, table(tmp_path, Q[:30], params), NAMES)
    rest = np.repeat(Q[:1], 400, axis=0)
    with pytest.raises(RecordingError, match="did not move"):
        calibrate(params, table(tmp_path, rest, params), NAMES)
    with pytest.raises(RecordingError, match="lacks the joint.s. elbow"):
        from_bag(_renamed_bag(tmp_path / "renamed", params, Q), params.description, 0.01)


def _renamed_bag(path, params, Q):
    """A bag whose joint states name the elbow 'wrist': a recording of another arm."""
    desc = params.description
    renamed = type(desc)(desc.name, desc.path, desc.model, desc.description, desc.strings,
                         {("wrist" if h == "elbow" else h): c for h, c in desc.hardware_joints.items()},
                         desc.actuators, desc.urdf, desc.raw)
    return write_bag(path, renamed, 0.01, Q)


def test_default_parameters_of_the_arm(params):
    """What a planar arm's motion can excite: each link's mass, centre of mass along it, inertia about its joint,
    the joints' damping and the string's two attachments (the hook on the forearm, the rail the carriage rides)."""
    assert default_parameters(params) == [
        "upper_arm.mass", "upper_arm.center_of_mass.z", "upper_arm.inertia.xx", "forearm.mass",
        "forearm.center_of_mass.z", "forearm.inertia.xx", "shoulder.damping", "elbow.damping",
        "hook.translation.x", "hook.translation.y", "hook.translation.z",
        "rail.translation.x", "rail.translation.y", "rail.translation.z"]
