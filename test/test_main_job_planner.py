"""The main job's planner plans on the problem of the motion the job tracks (issue 28; docs/mpc.md, "Why the main
job recovers slower than offline").

The job requests ``--motion``'s optimum from the optimizer node and tracks it; its planner (``marionette_mpc`` in a
process of its own with ``--mpc``, in the re-planned controller's process with ``--mpc rti``) builds the optimizer
node's problem for a request of its ``motion`` parameter (``ocp/mpc_options.planning_problem``). Read here from the
``-p`` arguments of the job's command lines (:func:`~marionette_control.cli.main_job.job.command_lines`) over the
planner's defaults, that problem must be the request's of the job's motion. The bow (7 s) against the default
wave (8 s): a planner left on the wave refuses the bow's optimum, and on an 8 s motion it would plan the wave's
angles.
"""

from __future__ import annotations

import numpy as np
import pytest

from marionette_control.cli.main_job.job import PLANNER, REPLANNED, command_lines
from marionette_control.model.yaml_model import load_packaged_model
from marionette_control.ocp import request
from marionette_control.ocp.mpc_options import PARAMS, planning_problem
from marionette_control.resources import config_file


def planner_values(lines: list, mpc: str) -> dict:
    """The planner's parameter values: its defaults, with the ``-p`` arguments of its process in ``lines`` (bringup's
    NODE:NAME:=VALUE for the planner of ``--mpc``; NAME:=VALUE, for every node of the process that declares it, in
    the re-planned controller's process of ``--mpc rti``)."""
    args = dict(lines)["bringup" if mpc == "receding_horizon" else REPLANNED]
    values = {p.name: p.default for p in PARAMS}
    for flag, item in zip(args, args[1:]):
        if flag != "-p":
            continue
        name, value = item.split(":=", 1)
        if mpc == "receding_horizon":
            node, _, name = name.partition(":")
            if node != PLANNER:
                continue
        if name in values:
            values[name] = value
    return values


@pytest.mark.parametrize("mpc", ["receding_horizon", "rti"])
def test_the_main_jobs_planner_plans_on_the_request_problem_of_the_motion_it_tracks(mpc, tmp_path):
    values = planner_values(command_lines("realistic", 1, 0.25, tmp_path, False, mpc, "bow"), mpc)
    desc = load_packaged_model(values["model_file"])
    model = desc.model
    problem = planning_problem(values, desc)
    bow = request.build_problem(model, motion_name="bow")
    assert problem.N == bow.N == 700
    np.testing.assert_array_equal(problem.Xd, bow.Xd)
    np.testing.assert_array_equal(problem.Q, bow.Q)


@pytest.mark.parametrize("mpc", ["receding_horizon", "rti"])
def test_on_a_model_file_the_planner_plans_on_the_optimizer_nodes_problem_of_that_file(mpc, tmp_path):
    """With ``--calibrate`` the second graph's nodes read the calibrated model file (a variant: ``base`` +
    ``overrides``, here the realistic plant's file standing in for one): the planner and the re-planned controller
    get it too, and the planner's problem is the optimizer node's for that file, its limits included (the drives'
    limits are the file's, not the model's bare defaults)."""
    variant = str(config_file("marionette_arm_plant.yaml"))
    lines = command_lines("realistic", 1, 0.25, tmp_path, False, mpc, "bow", model_file=variant)
    values = planner_values(lines, mpc)
    assert values["model_file"] == variant
    assert f"model_file:={variant}" in dict(lines)[REPLANNED]
    problem = planning_problem(values, load_packaged_model(variant))
    models = request.RequestModels()
    model, limits, _ = models.get(models.add_file(variant))
    node = request.build_problem(model, motion_name="bow", limits=limits)
    assert problem.model.hash == model.hash != load_packaged_model("marionette_arm.yaml").model.hash
    np.testing.assert_array_equal(problem.Xd, node.Xd)
    np.testing.assert_array_equal(problem.hardware_limits.upper, limits.upper)
    assert np.all(np.isfinite(problem.hardware_limits.max_velocity))


def test_without_mpc_the_job_starts_no_planner(tmp_path):
    lines = dict(command_lines("realistic", 1, 0.5, tmp_path, True, None, "bow"))
    assert REPLANNED not in lines and "--mpc" not in lines["bringup"]
    assert set(lines) == {"bringup", "marionette_controller_feedforward", "recorder"}
