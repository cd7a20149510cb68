"""Re-planning on the calibrated model (issue 28 item 4 × issue 25; docs/mpc.md, "Plans on the calibrated model").

Plans suspend the controller's integral action, so on the realistic stand-in plans made on the nominal model carry
the plant's offset from it: the 10 Hz planner's recovery from the 0.6 N push at 3.0 s is the unpushed run's
floor, about 2.7 s, against the issue's 0.5 s. Calibrated the honest way — the identification motion tracked on the
stand-in, its bag calibrated with the links weighed (``cli/main_job/calibration.calibrate_stand_in``; the
calibrator never reads the plant file) — the problem, its optimum and gains, the planner's system and the
controller's model all on the calibrated file, the same planner meets the targets: ≤ 0.5 s after the push at 3.0 s
and ≤ 0.28 s after the push at 5.6 s, the string at or above its minimum tension.
"""

from __future__ import annotations

import pytest

from marionette_control.cli.main_job.calibration import calibrate_stand_in
from marionette_control.model.library import marionette_arm as arm
from marionette_control.model.limits import from_description
from marionette_control.model.yaml_model import load_packaged_model
from marionette_control.ocp import request
from marionette_control.ocp.mpc import MPCOptions, RecedingHorizon
from marionette_control.ocp.retiming import solve_retimed
from marionette_control.sim.offline_loop import run_loop, scripted_push
from marionette_control.sim.profile import HardwareProfile
from marionette_control.tracking.controller import ControllerOptions

PROFILE = HardwareProfile.named("realistic")
#: the issue's recovery targets to within 1° of the motion [s] per push time [s] (issue 28 item 4)
TARGETS = {3.0: 0.5, 5.6: 0.28}


def tracked(model_file=None):
    """(description, the wave's problem and optimum) on ``model_file`` (default: the nominal model) as the
    optimizer node solves a request of the wave with its default options."""
    if model_file is None:
        desc, limits = arm.load_description(), None
    else:
        desc = load_packaged_model(model_file)
        models = request.RequestModels()
        _, limits, _ = models.get(models.add_file(str(model_file)))
    problem = request.build_problem(desc.model, motion_name="wave", limits=limits)
    return desc, problem, solve_retimed(problem, problem.X0, problem.U0).trajectory


def pushed(desc, problem, motion, push_time: float):
    """(recovery [s] or None, lowest string tension during the motion [N], its minimum [N]): the 10 Hz planner's
    run (no deadline) with the 0.6 N push at ``push_time``, the controller on ``desc``, the plant the profile's."""
    push = scripted_push(push_time, motion.dt, 0.6)
    options = ControllerOptions(command_delay_steps=PROFILE.command_delay_steps)
    r = run_loop(motion, PROFILE, options, desc, pushes=[push],
                 mpc=RecedingHorizon(problem, motion, MPCOptions(deadline=None)))
    limits = from_description(desc)
    return r.recovery_time(push.tick), r.record(limits)["tension_min_n"]["motion"], float(limits.min_tension.min())


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    _, _, variant = calibrate_stand_in(PROFILE, tmp_path_factory.mktemp("calibration") / "calibrated_model.yaml")
    return tracked(variant)


@pytest.mark.parametrize("push_time", sorted(TARGETS))
def test_plans_on_the_calibrated_model_recover_within_the_issues_targets(calibrated, push_time):
    """Measured 2026-11-28 (request's problem, seeds 0-2): 0.24 s at 3.0 s and 0.25 s at 5.6 s calibrated; on the
    nominal model 2.68 s and 0.28 s. At 3.0 s the nominal model's plans miss the target (the offset), asserted."""
    recovery, tension, minimum = pushed(*calibrated, push_time)
    assert recovery is not None and recovery <= TARGETS[push_time], recovery
    assert tension >= minimum, (tension, minimum)
    if push_time == 3.0:
        nominal = pushed(*tracked(), push_time)[0]
        assert nominal is None or nominal > TARGETS[push_time] > recovery, (nominal, recovery)
