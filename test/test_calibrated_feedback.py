"""The feedback after a calibration (issue 25; docs/calibration.md, "Feedback after calibration").

The main job's ``--calibrate`` path offline: the identification motion tracked closed loop on a plant of the family
(noise seed 0), its encoder readings written as a bag and calibrated as the job does (``calibrate_bag``: the links
weighed), the wave re-optimized on the calibrated model with the job's reserve, then tracked on the same plant on noise
seeds 0-2: feed-forward only, closed loop with the default Kalman filter, and closed loop with the filter's model
noise the calibration's (``fit.estimator_noise``, :mod:`marionette_control.identification.model_error`).

What is asserted: the calibration's model noise agrees with parameter draws from the fit's covariance pushed through
the model; trusting it lowers the closed loop's floor on every joint and seed; with the true state (exact encoders,
the Legendre estimate) the law beats feed-forward on every joint, so what keeps the closed loop above feed-forward
with the stand-in's encoders is their noise through the estimate and the integral. The issue's "with damping x3 the
feedback is better than none on every joint after calibration" is a strict expected failure: not reached on this
stand-in's sensors (the figures are in docs/calibration.md).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from marionette_control import _core
from marionette_control.bags.stand_in import write_bag
from marionette_control.cli.main_job import calibration as C
from marionette_control.identification.equation_error import EquationError
from marionette_control.identification.excitation import MARGINS
from marionette_control.identification.model_error import momentum_noise
from marionette_control.identification.parameters import ModelParameters
from marionette_control.identification.recording import from_bag
from marionette_control.model.library import marionette_arm as arm
from marionette_control.model.limits import from_description
from marionette_control.model.yaml_model import load_model_file
from marionette_control.ocp import request as P
from marionette_control.ocp.optimizer import solve
from marionette_control.resources import config_file
from marionette_control.sim.offline_loop import run_loop
from marionette_control.sim.profile import HardwareProfile
from marionette_control.tracking.controller import ControllerOptions
from marionette_control.tracking.estimation import EstimatorNoise

pytestmark = pytest.mark.slow

SEEDS = (0, 1, 2)
DAMPING_X3 = "plants/damping_x3.yaml"
PLANTS = (DAMPING_X3, "plants/hook_out_5mm.yaml")


def optimized(desc, motion: str):
    """``motion`` optimized for ``desc``'s model with the reserve every optimization of ``--calibrate`` keeps."""
    reserve = P.RequestOptions(**{f"{family}_margin": v for family, v in MARGINS.items()})
    problem = P.build_problem(desc.model, motion_name=motion, options=reserve, limits=from_description(desc))
    return solve(problem, problem.X0, problem.U0).trajectory


def rms(trajectory, desc, plant: str, seed: int, feedback: bool = True, exact: bool = False, **options) -> np.ndarray:
    """(shoulder, elbow) RMS [deg] of the true angles; ``exact``: encoders without counts or noise."""
    profile = HardwareProfile.named("realistic", plant_model_file=plant, seed=seed)
    if exact:
        profile = dataclasses.replace(profile, encoder_resolution=(0.0,), noise_std=(0.0,))
    run = run_loop(trajectory, profile, ControllerOptions(command_delay_steps=profile.command_delay_steps,
                                                          feedback=feedback, **options), desc=desc)
    assert not run.aborted, run.abort_reason
    s = run.summary()
    return np.array([s["shoulder"]["rms_deg"], s["elbow"]["rms_deg"]])


@pytest.fixture(scope="module")
def identify():
    return optimized(arm.load_description(), "identify")


@pytest.fixture(scope="module")
def calibrated(request, identify, tmp_path_factory):
    """(plant, the calibrated description, its wave, the calibration, the fit's report, the recording)."""
    plant = request.param
    desc = arm.load_description()
    work = tmp_path_factory.mktemp("calibrated")
    profile = HardwareProfile.named("realistic", plant_model_file=plant, seed=0)
    run = run_loop(identify, profile, ControllerOptions(command_delay_steps=profile.command_delay_steps), desc=desc)
    write_bag(work / "bag", desc, identify.dt, run.Q_measured, run.commands[:, -desc.model.nk:])
    nominal = ModelParameters(config_file(arm.CONFIG_FILE))
    weighed = C.weighed_masses(ModelParameters(config_file(plant)))
    cal, fit, variant = C.calibrate_bag(nominal, work / "bag", identify.dt, weighed, work / "calibrated.yaml")
    model = load_model_file(variant)
    recording = from_bag(work / "bag", desc, identify.dt)
    return plant, model, optimized(model, "wave"), cal, fit, recording


@pytest.mark.parametrize("calibrated", [DAMPING_X3], indirect=True)
def test_the_calibrations_model_noise_is_that_of_parameters_drawn_from_its_covariance(calibrated):
    """σ_p by the equation error's exact parameter Jacobian against draws of θ from the fit's covariance, each
    pushed through the model's step (ε(θ) − ε(θ̂), to momentum by the mass matrix), on the first 2 s; the
    parameters the motion does not excite at first order are held (identification/model_error.py)."""
    _, _, _, cal, fit, recording = calibrated
    nominal = ModelParameters(config_file(arm.CONFIG_FILE))
    Q, dt = recording.Q[:201], recording.dt
    sigma = momentum_noise(nominal, cal, Q, dt)
    assert fit["estimator_noise"]["momentum"] == pytest.approx(
        max(fit["estimator_noise"]["per_configuration"].values()))
    assert 0 < fit["estimator_noise"]["momentum"] < 1e-4        # the default (the nominal model's) is 1e-3
    error = EquationError(nominal, Q, dt, cal.parameters)
    eps0 = error.evaluate(cal.theta).error
    model = nominal.model(dict(zip(cal.parameters, cal.theta)))
    M = np.stack([_core.mass_matrix(model, Q[k])[:model.nd, :model.nd] for k in error.nodes])
    draws = np.random.default_rng(3).multivariate_normal(cal.theta, cal.covariance, 60)
    # out of the plane of the motion (the hook's and the rail's x): no first-order effect, left at the estimate
    blind = [i for i, p in enumerate(cal.parameters) if p.kind == "translation" and p.axis == 0]
    assert {cal.estimates[i].name for i in blind} == {"hook.translation.x", "rail.translation.x"}
    assert not any(cal.estimates[i].identifiable for i in blind)
    draws[:, blind] = cal.theta[blind]
    dp = np.stack([np.einsum("kij,kj->ki", M, error.evaluate(th).error - eps0) / dt for th in draws])
    sampled = np.sqrt(np.mean(dp ** 2, axis=(0, 1)))
    np.testing.assert_allclose(sigma, sampled, rtol=0.3)        # 60 draws: the sampled RMS to about ±10 %


@pytest.mark.parametrize("calibrated", PLANTS, indirect=True)
def test_trusting_the_calibration_lowers_the_closed_loops_floor(calibrated):
    plant, model, wave, _, fit, _ = calibrated
    trust = EstimatorNoise(momentum=fit["estimator_noise"]["momentum"])
    for seed in SEEDS:
        default = rms(wave, model, plant, seed)
        trusted = rms(wave, model, plant, seed, noise=trust)
        assert np.all(trusted < 0.85 * default), (seed, trusted, default)


@pytest.mark.parametrize("calibrated", PLANTS, indirect=True)
def test_with_the_true_state_the_law_beats_feed_forward_on_every_joint(calibrated):
    """Exact encoders: the Legendre estimate is the state (to the calibration's error); the noise then cannot be
    what is left."""
    plant, model, wave, _, _, _ = calibrated
    feed_forward = rms(wave, model, plant, 0, feedback=False)
    closed = rms(wave, model, plant, 0, exact=True, estimator="legendre")
    assert np.all(closed < feed_forward), (closed, feed_forward)


@pytest.mark.xfail(strict=True, reason="issue 25: with the stand-in's encoders the closed loop on damping x3 stays "
                   "above feed-forward only after calibration (0.0055-0.0061 deg / 0.0061-0.0069 deg against 0.0016 / "
                   "0.0030 deg, seeds 0-2): the encoders' noise through the estimate and the integral; "
                   "docs/calibration.md")
@pytest.mark.parametrize("calibrated", [DAMPING_X3], indirect=True)
def test_after_calibration_on_damping_x3_the_feedback_beats_none_on_every_joint(calibrated):
    plant, model, wave, _, fit, _ = calibrated
    trust = EstimatorNoise(momentum=fit["estimator_noise"]["momentum"])
    feed_forward = rms(wave, model, plant, 0, feedback=False)
    for seed in SEEDS:
        assert np.all(rms(wave, model, plant, seed, noise=trust) <= feed_forward)
