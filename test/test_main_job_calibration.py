"""The main job's ``--calibrate`` without ROS (marionette_control/cli/main_job/calibration.py), and the optimizer's
``model_file`` (a calibrated variant is usable by the optimizer and the controller).

The whole ``--calibrate`` run takes several minutes of machine time (two node graphs, five runs of 8 s, the fit):
its parts are tested here, the whole is run by hand (docs/calibration.md). The bag the calibration reads is written
(``bags/stand_in.write_bag``) from an offline closed-loop run of the identification motion on the realistic
stand-in: the encoder readings the controller read and the commands it sent.
"""

from __future__ import annotations

import numpy as np
import pytest

from marionette_control.bags.stand_in import write_bag
from marionette_control.cli.main_job import calibration as C
from marionette_control.cli.main_job import job as J
from marionette_control.cli.main_job.report import markdown
from marionette_control.identification.excitation import SCALE_STD, WEIGHED
from marionette_control.identification.parameters import ModelParameters
from marionette_control.model.library import marionette_arm as arm
from marionette_control.model.limits import from_description
from marionette_control.model.yaml_model import load_packaged_model
from marionette_control.ocp import request as P
from marionette_control.ocp.optimizer import solve
from marionette_control.ocp.optimizer_options import parameter_specs
from marionette_control.ocp.problem import ProblemError
from marionette_control.resources import config_file
from marionette_control.sim.offline_loop import run_loop
from marionette_control.sim.profile import HardwareProfile
from marionette_control.tracking.controller import ControllerOptions, make_core
from marionette_control.tracking.controller_options import controller_options

PLANT = HardwareProfile.named("realistic").plant_model_file


@pytest.fixture(scope="module")
def plant():
    return ModelParameters(config_file(PLANT))


def test_the_links_are_weighed_with_a_fixed_reading_error(plant):
    w = C.weighed_masses(plant)
    assert set(w) == set(WEIGHED)
    assert w == C.weighed_masses(plant)                   # the same draw every run
    for name, v in w.items():
        assert v["truth"] == plant.nominal(plant.parameter(name)) and v["std"] == SCALE_STD
        assert abs(v["reading"] - v["truth"]) < 3 * SCALE_STD and round(v["reading"], 4) == v["reading"]  # 0.1 g
    assert any(v["reading"] != v["truth"] for v in w.values())
    assert w["upper_arm.mass"]["truth"] == pytest.approx(0.212)   # the plant's, not the nominal file's 0.200


def test_the_optimizer_builds_a_model_file_with_its_limits_and_joint_names():
    assert "model_file" in {s.name for s in parameter_specs()}
    models = P.RequestModels()
    name = models.add_file(PLANT)      # a variant file (base + overrides), as a calibrated model is
    model, limits, joints = models.get(name)
    assert name == "marionette_arm_plant" and model.config_names == arm.load_description().model.config_names
    nominal = from_description(arm.load_description())
    np.testing.assert_array_equal(limits.upper, nominal.upper)
    assert joints == ["carriage", "string_length"]
    assert models.get("marionette_arm")[0].name == "marionette_arm"     # the library's models stay
    with pytest.raises(ProblemError, match="model file 'no_such_model.yaml' cannot be built"):
        models.add_file("no_such_model.yaml")


@pytest.mark.slow
def test_a_bag_of_the_identification_run_calibrates_a_model_the_nodes_use(tmp_path, plant):
    """The issue's bounds on the realistic stand-in (damping within 15 %, the hook within 0.5 mm, each inside 3σ),
    the masses as weighed, a variant file the optimizer and the controller build, and the report's records."""
    desc = arm.load_description()
    problem = P.build_problem(desc.model, motion_name="identify")
    trajectory = solve(problem, problem.X0, problem.U0).trajectory
    profile = HardwareProfile.named("realistic")
    run = run_loop(trajectory, profile, ControllerOptions(command_delay_steps=profile.command_delay_steps))
    assert not run.aborted
    write_bag(tmp_path / "bag", desc, trajectory.dt, run.Q_measured, run.commands[:, -desc.model.nk:])
    nominal = ModelParameters(config_file(arm.CONFIG_FILE))
    weighed = C.weighed_masses(plant)
    cal, fit, variant = C.calibrate_bag(nominal, tmp_path / "bag", trajectory.dt, weighed, tmp_path / "cal.yaml")
    assert fit["command_delay_steps"] == profile.command_delay_steps
    params = C.parameter_record(cal, plant)
    for name in ("shoulder.damping", "elbow.damping"):
        p = params[name]
        assert abs(p["estimate"] - p["truth"]) <= min(0.15 * p["truth"], 3 * p["std"]), (name, p)
    for axis in "yz":
        p = params[f"hook.translation.{axis}"]
        assert p["identifiable"] and abs(p["estimate"] - p["truth"]) <= min(5e-4, 3 * p["std"]), p
    for name in WEIGHED:
        assert params[name]["known"] and abs(params[name]["estimate"] - weighed[name]["reading"]) < SCALE_STD
    assert not params["hook.translation.x"]["identifiable"]      # out of the plane: no motion excites it
    # the variant file: the optimizer builds it under its name with its limits, the controller takes its trajectory
    models = P.RequestModels()
    name = models.add_file(str(variant))
    model, limits, _ = models.get(name)
    assert name == "marionette_arm_calibrated"
    wave = P.build_problem(model, motion_name="wave", limits=limits)
    result = solve(wave, wave.X0, wave.U0).trajectory
    core = make_core(load_packaged_model(variant), ControllerOptions(command_delay_steps=1))
    core.load_trajectory(result, "calibrated")
    # the report's records
    summary = {"shoulder": {"rms_deg": 0.3, "max_deg": 0.6}, "elbow": {"rms_deg": 0.9, "max_deg": 2.0}}
    better = {"shoulder": {"rms_deg": 0.1, "max_deg": 0.2}, "elbow": {"rms_deg": 0.3, "max_deg": 0.5}}
    tracking = C.tracking_record({"closed_loop": summary, "open_loop": summary},
                                 {"closed_loop": better, "open_loop": better})
    assert tracking["rms_ratio"]["open_loop"]["elbow"] == pytest.approx(3.0)
    report = {"started": "now", "calibration": {
        "identification": {"ticks": int(run.k.size), "tracking": run.summary()}, "bag": "bag",
        "model_file": str(variant), "fit": fit, "weighed": weighed, "weighed_note": "fixed seed",
        "parameters": params, "tracking": tracking,
        "push_recovery": {"lqr_s": None, "mpc_s": 0.24},
        "push_string_tension": {"push_lqr": {"string": {"lowest_N": 0.0, "minimum_N": 0.5}},
                                "push_mpc": {"string": {"lowest_N": 0.69, "minimum_N": 0.5}}}}}
    text = markdown(report)
    assert "## Calibration" in text and "| hook.translation.z [m] |" in text and "3.00×" in text
    assert "- mpc_s: 0.24 s; string 0.690 N (minimum 0.5 N)" in text and "- lqr_s: never; string 0.000 N" in text


def test_the_calibrated_runs_closed_loop_trusts_the_model_as_the_fit_says(tmp_path):
    """The second node graph's closed-loop controller gets the calibration's ``estimator_noise.momentum``
    (test/test_calibrated_feedback.py measures what it changes); the feed-forward controller and a graph without it
    keep their configured filter."""
    def values(lines, node):
        args = dict(lines)["bringup"]
        return {a.split(":=")[0].split(":", 1)[1]: a.split(":=")[1] for f, a in zip(args, args[1:])
                if f == "-p" and a.startswith(node + ":")}
    lines = J.command_lines("realistic", 1, 0.5, tmp_path, False, None, "wave", estimator_momentum=1.5e-5)
    closed = values(lines, J.CLOSED)
    noise = controller_options({"estimator_noise.momentum": float(closed["estimator_noise.momentum"])},
                               arm.load_description()).noise
    assert noise.momentum == 1.5e-5 and "." in closed["estimator_noise.momentum"]   # a YAML float, not a string
    assert not any("estimator_noise" in a for a in dict(lines)[J.FEEDFORWARD])
    assert "estimator_noise.momentum" not in values(J.command_lines("realistic", 1, 0.5, tmp_path, False, None,
                                                                    "wave"), J.CLOSED)
