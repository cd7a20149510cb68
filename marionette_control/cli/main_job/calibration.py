"""The main job's calibration (``--calibrate``) without ROS: what the calibrator is given, and its record.

The calibrator (:func:`marionette_control.identification.calibration.calibrate`) reads the identification run's
bag and the nominal model file, never the plant file. Besides, the main job gives it the two links' masses as a
user's kitchen scale would read them (:func:`weighed_masses`): the plant's masses plus one reading error each,
drawn from N(0, (1 g)²) with the fixed seed :data:`SCALE_SEED`, stated with the scale's uncertainty of 1 g
(:data:`~marionette_control.identification.excitation.SCALE_STD`). The plant file's values of the parameters
(``truth``) are read for the report only (:func:`parameter_record`).

:func:`calibrate_stand_in` is the same path offline, in seconds: the identification motion tracked closed loop on
the stand-in (``sim/offline_loop``), written as the bag the job's recorder writes (``bags/stand_in``), calibrated
as above; the planners' measurements on a calibrated model use it (docs/mpc.md, "Plans on the calibrated model").
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from marionette_control.bags.stand_in import write_bag
from marionette_control.identification.calibration import calibrate, default_parameters
from marionette_control.identification.excitation import SCALE_STD, WEIGHED, weighed_priors
from marionette_control.identification.fit import Calibration
from marionette_control.identification.parameters import ModelParameters
from marionette_control.identification.recording import from_bag
from marionette_control.identification.variant import write_variant
from marionette_control.model.library import marionette_arm as arm
from marionette_control.ocp.optimizer import solve
from marionette_control.ocp.request import build_problem
from marionette_control.resources import config_file
from marionette_control.sim.offline_loop import run_loop
from marionette_control.sim.profile import HardwareProfile
from marionette_control.tracking.controller import ControllerOptions

#: the seed of the scale's reading errors: one fixed draw, so that every run of the job weighs alike
SCALE_SEED = 25


def weighed_masses(plant: ModelParameters, names: Sequence[str] = WEIGHED, std: float = SCALE_STD,
                   seed: int = SCALE_SEED) -> dict:
    """{name: {reading, std, truth}} [kg]: the plant's masses ``names`` as a scale of uncertainty ``std`` reads
    them (module docstring), to its display's 0.1 g."""
    errors = np.random.default_rng(seed).normal(0.0, std, len(names))
    out = {}
    for name, error in zip(names, errors):
        truth = plant.nominal(plant.parameter(name))
        out[name] = {"reading": round(truth + float(error), 4), "std": std, "truth": truth}
    return out


def calibrate_bag(nominal: ModelParameters, bag: Path, dt: float, weighed: dict, out: Path
                  ) -> tuple[Calibration, dict, Path]:
    """Calibrates ``nominal``'s :func:`~marionette_control.identification.calibration.default_parameters` from a
    bag (the joint states and commands of the identification run, sampled every ``dt`` s) with the ``weighed``
    masses (:func:`weighed_masses`) known; writes the calibrated model as the variant file ``out``. (calibration,
    the calibrator's report, the variant file)."""
    recording = from_bag(bag, nominal.description, dt)
    names = default_parameters(nominal)
    readings = {n: w["reading"] for n, w in weighed.items()}
    priors = weighed_priors(nominal, names, readings, scale_std=next(iter(weighed.values()))["std"])
    calibration, report = calibrate(nominal, recording, names, priors)
    return calibration, report, write_variant(nominal, calibration, out, source=str(bag))


def calibrate_stand_in(profile: HardwareProfile, out: Path) -> tuple[Calibration, dict, Path]:
    """The nominal model file calibrated offline from the identification motion (``config/motions/identify.yaml``,
    the optimizer's default request) tracked closed loop by the nominal controller on the stand-in of ``profile``
    (its plant, noise seed and delay), the run's encoder readings and commands written as the bag ``out``'s stem +
    ``_bag`` beside ``out``, the links weighed from ``profile``'s plant (:func:`weighed_masses`); writes the variant
    file ``out``. (calibration, the calibrator's report, the variant file); RuntimeError if the run aborts."""
    desc = arm.load_description()
    problem = build_problem(desc.model, motion_name="identify")
    trajectory = solve(problem, problem.X0, problem.U0).trajectory
    run = run_loop(trajectory, profile, ControllerOptions(command_delay_steps=profile.command_delay_steps), desc)
    if run.aborted:
        raise RuntimeError(f"the identification run on the {profile.name} stand-in aborted")
    bag = write_bag(out.with_name(out.stem + "_bag"), desc, trajectory.dt, run.Q_measured,
                    run.commands[:, -desc.model.nk:])
    nominal = ModelParameters(config_file(arm.CONFIG_FILE))
    plant = ModelParameters(config_file(profile.plant_model_file or arm.CONFIG_FILE))
    return calibrate_bag(nominal, bag, trajectory.dt, weighed_masses(plant), out)


def parameter_record(calibration: Calibration, plant: ModelParameters) -> dict:
    """``report.json``'s ``calibration.parameters``: {name: {nominal, estimate, std, truth, identifiable, known,
    unit}} in SI units, ``truth`` the plant file's value."""
    return {e.name: {"nominal": e.nominal, "estimate": e.estimate, "std": e.std,
                     "truth": plant.nominal(plant.parameter(e.name)), "identifiable": e.identifiable,
                     "known": e.known, "unit": e.unit}
            for e in calibration.estimates}


def tracking_record(nominal: dict, calibrated: dict) -> dict:
    """``calibration.tracking``: {nominal, calibrated} runs' {closed_loop, open_loop} error summaries ({joint:
    {rms_deg, max_deg}}), and ``rms_ratio`` {run: {joint: nominal RMS / calibrated RMS}} (above 1: better
    calibrated)."""
    ratio = {run: {j: (nominal[run][j]["rms_deg"] / v["rms_deg"] if v["rms_deg"] > 0 else None)
                   for j, v in calibrated[run].items()} for run in calibrated}
    return {"nominal": nominal, "calibrated": calibrated, "rms_ratio": ratio}
