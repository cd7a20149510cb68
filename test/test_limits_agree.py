"""One place for limits (issue 11 item 4): the optimizer's constraints, the simulator's drives and the
controller's command clamp (and its plausibility checks) see the model file's numbers, all three through
``model.limits``, so a trajectory optimized within the limits is executed as optimized.

Each reader is taken as its user builds it: the optimizer's constraint rows from a YAML spec naming the model
file (:func:`~marionette_control.ocp.spec_problem.build_problem`, the rows the barrier method enforces: the
hardware's limits less the reserve kept for the feedback, ``ConstraintOptions``' margins, whose hardware
limits are the file's), the
simulated hardware's drives (:class:`~marionette_control.sim.simulator.SimulatedArm`), and the
controller core the node and the offline loop build (:func:`~marionette_control.tracking.controller.make_core`).
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from marionette_control.tracking.controller import make_core
from marionette_control.sim.profile import HardwareProfile
from marionette_control.sim.simulator import SimulatedArm
from marionette_control.ocp.spec import SpecError, parse_spec
from marionette_control.ocp.spec_problem import build_problem
from marionette_control.model.yaml_model import ModelFileError, load_model_file
from marionette_control.resources import config_file

KINDS = ("lower", "upper", "max_velocity", "max_acceleration")


def optimizer_limits(model_file) -> dict:
    """{kind: (nk,)} of the constraint rows the optimizer enforces for the wave on ``model_file``."""
    spec = parse_spec({"model": {"file": str(model_file)}, "dt": 0.01, "motion": {"name": "wave"},
                       "initial_state": {"consistent": ["carriage", "string_length"], "equilibrium": True}},
                      str(model_file.parent / "spec.yaml"))
    problem = build_problem(spec)
    drives = list(problem.model.config_names[problem.model.nd:])
    hardware = problem.hardware_rows()
    out = {k: np.full(len(drives), np.nan) for k in KINDS}
    for c in problem.constraints:
        for row in c.rows:
            kind = {("range", "lower"): "lower", ("range", "upper"): "upper", ("speed", "upper"): "max_velocity",
                    ("acceleration", "upper"): "max_acceleration"}.get((row.family, row.side))
            if kind is not None:
                out[kind][drives.index(row.component)] = hardware[(row.family, row.component, row.side)]
    # the lower speed and acceleration rows mirror the upper ones
    for family, kind in (("speed", "max_velocity"), ("acceleration", "max_acceleration")):
        lows = {r.component: -hardware[(r.family, r.component, r.side)] for c in problem.constraints for r in c.rows
                if r.family == family and r.side == "lower"}
        np.testing.assert_array_equal([lows[d] for d in drives], out[kind])
    # and the rows enforced are those limits less the reserve (fractions of the range width, speed, acceleration)
    m = problem.constraint_options.margins
    width = out["upper"] - out["lower"]
    enforced = {("range", "lower"): out["lower"] + m["range"] * width,
                ("range", "upper"): out["upper"] - m["range"] * width,
                ("speed", "upper"): out["max_velocity"] * (1 - m["speed"]),
                ("acceleration", "upper"): out["max_acceleration"] * (1 - m["acceleration"])}
    for c in problem.constraints:
        for row in c.rows:
            if (row.family, row.side) in enforced:
                assert row.limit == pytest.approx(enforced[(row.family, row.side)][drives.index(row.component)])
    return out


def simulator_limits(desc, profile: str) -> dict:
    drives = SimulatedArm(HardwareProfile.named(profile), 0.01, nominal=desc).drives.limits
    return {k: np.asarray(getattr(drives, k), float) for k in KINDS}


def controller_limits(desc) -> dict:
    core = make_core(desc)
    clamp, nu, nd = core.limits, desc.model.nu, desc.model.nd
    # the plausibility checks bound a measured drive position by the same range (widened by their margin)
    margin = core.options.plausibility.limit_margin
    np.testing.assert_allclose(core.checks.lower[nd:] + margin, clamp.lower[nu:], rtol=0, atol=1e-15)
    np.testing.assert_allclose(core.checks.upper[nd:] - margin, clamp.upper[nu:], rtol=0, atol=1e-15)
    return {"lower": clamp.lower[nu:], "upper": clamp.upper[nu:], "max_velocity": clamp.rate,
            "max_acceleration": clamp.acceleration}


def assert_all_see(desc, model_file, expected: dict, profiles=("perfect",)):
    seen = {"optimizer": optimizer_limits(model_file), "controller": controller_limits(desc)}
    for p in profiles:
        seen[f"simulator ({p})"] = simulator_limits(desc, p)
    for who, limits in seen.items():
        for k in KINDS:
            np.testing.assert_array_equal(limits[k], expected[k], err_msg=f"{who}: {k}")


def copy_arm(tmp_path):
    for name in ("marionette_arm.yaml", "marionette_arm.urdf"):
        shutil.copy(config_file(name), tmp_path / name)
    return tmp_path / "marionette_arm.yaml", tmp_path / "marionette_arm.urdf"


def replace_once(path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new))


def test_optimizer_simulator_and_controller_see_the_model_files_limits():
    """config/marionette_arm.yaml: carriage −0.30…0.90 m, 2 m/s, 15 m/s²; winch 0.15…1.10 m, 1.5 m/s, 10 m/s² —
    the same arrays in the three readers, and in the realistic profile's plant (its own file, same drives)."""
    path = config_file("marionette_arm.yaml")
    expected = {"lower": [-0.30, 0.15], "upper": [0.90, 1.10], "max_velocity": [2.0, 1.5],
                "max_acceleration": [15.0, 10.0]}
    assert_all_see(load_model_file(path), path, expected, profiles=("perfect", "realistic"))


def test_one_number_changed_in_a_copied_model_file_changes_all_three(tmp_path):
    yaml_file, _ = copy_arm(tmp_path)
    replace_once(yaml_file, "max_velocity: 2.0, max_acceleration: 15.0", "max_velocity: 2.0, max_acceleration: 12.5")
    expected = {"lower": [-0.30, 0.15], "upper": [0.90, 1.10], "max_velocity": [2.0, 1.5],
                "max_acceleration": [12.5, 10.0]}
    assert_all_see(load_model_file(yaml_file), yaml_file, expected)


def test_a_drive_limit_stated_twice_must_agree_and_then_changes_all_three(tmp_path):
    """The winch's speed is in the actuators section and in the URDF's <limit> of joint string_length (the string's
    length): changed in one of them only, the file is refused naming both values (by the loader every reader goes
    through, the optimizer's spec included); changed in both, all three see the new number."""
    yaml_file, urdf_file = copy_arm(tmp_path)
    replace_once(yaml_file, "max: 1.10, max_velocity: 1.5,", "max: 1.10, max_velocity: 1.2,")
    message = (rf"{yaml_file}: actuators.string_length: the URDF <limit> of joint 'string_length' states other "
               r"limits of this drive \(velocity 1.5 against max_velocity 1.2\)")
    with pytest.raises(ModelFileError, match=message):
        load_model_file(yaml_file)
    with pytest.raises(SpecError, match=message):
        optimizer_limits(yaml_file)
    replace_once(urdf_file, 'upper="1.10" velocity="1.5"', 'upper="1.10" velocity="1.2"')
    expected = {"lower": [-0.30, 0.15], "upper": [0.90, 1.10], "max_velocity": [2.0, 1.2],
                "max_acceleration": [15.0, 10.0]}
    assert_all_see(load_model_file(yaml_file), yaml_file, expected)
    replace_once(urdf_file, '<limit lower="-0.30" upper="0.90"', '<limit lower="-0.25" upper="0.90"')
    with pytest.raises(ModelFileError, match=r"actuators.carriage: the URDF <limit> of joint 'carriage' states other "
                                             r"limits of this drive \(range \[-0.25, 0.9\] against \[-0.3, 0.9\]\)"):
        load_model_file(yaml_file)
