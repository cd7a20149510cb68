"""The figures of docs/calibration.md's "Feedback after calibration": what the closed loop adds once the model is
calibrated, and where its error comes from.

    .venv/bin/python docs/calibrated_feedback.py [--out out/reproductions/calibrated_feedback.json] [--seeds 0 1 2]

For each plant (damping ×3, the realistic profile's, forearm +25 %, hook +5 mm): the identification motion tracked
closed loop on it (noise seed 0), calibrated from the encoder readings as ``docs/calibration_figures.py`` does (the
links weighed), the wave re-optimized on the calibrated model (the job's reserve, gains included) and tracked on the
same plant on each noise seed (RMS of the true angles against the calibrated optimum, degrees):

- ``feed_forward``: feedback off (no encoder reading reaches a command: the same on every seed);
- ``closed_default``: the controller's default Kalman filter (``estimator_noise.momentum`` 1e-3 N m s, sized for
  the nominal model's errors); ``closed_calibrated``: its model noise the calibration's (``model_error``; what the
  main job's calibrated run uses);
- ablations, to apportion the closed loop's error (each names what it removes; they patch the tick for this
  measurement only): ``..._no_integral`` without the integral action's term (``lq.gains.integral_gains`` → none),
  ``calibrated_drives_commanded`` the filter taking the drives where they were commanded instead of their encoder
  readings (the Python tick, ``fused=False``), ``true_state`` exact encoders with the Legendre estimate (the state
  to the calibration's error).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
from pathlib import Path
from unittest import mock

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from calibration_figures import FAMILY, NOMINAL, REALISTIC_PLANT, calibrated, optimized, tracked  # noqa: E402
from marionette_control.identification.model_error import momentum_noise  # noqa: E402
from marionette_control.identification.parameters import ModelParameters  # noqa: E402
from marionette_control.resources import config_file  # noqa: E402
from marionette_control.sim.offline_loop import run_loop  # noqa: E402
from marionette_control.sim.profile import HardwareProfile  # noqa: E402
from marionette_control.tracking import tick  # noqa: E402
from marionette_control.tracking.controller import ControllerOptions, make_core  # noqa: E402
from marionette_control.tracking.estimation import EstimatorNoise, KalmanEstimator  # noqa: E402

PLANTS = (FAMILY[0], REALISTIC_PLANT, *FAMILY[1:])


def drives_commanded(estimate):
    """KalmanEstimator.estimate with the drives' readings replaced by the commands in effect over the last step."""
    def patched(self, k, q, q_prev, applied):
        if k > 0:
            q = np.array(q)
            q[self.nd:] = applied(k - 1)[self.nu:]
        return estimate(self, k, q, q_prev, applied)
    return patched


def run(wave, desc, plant: str, seed: int, noise=None, integral=True, commanded=False, exact=False) -> list:
    profile = HardwareProfile.named("realistic", plant_model_file=plant, seed=seed)
    if exact:
        profile = dataclasses.replace(profile, encoder_resolution=(0.0,), noise_std=(0.0,))
    options = ControllerOptions(command_delay_steps=profile.command_delay_steps, noise=noise or EstimatorNoise(),
                                estimator="legendre" if exact else "kalman")
    with contextlib.ExitStack() as stack:
        if not integral:
            stack.enter_context(mock.patch.object(tick, "integral_gains", return_value=None))
        if commanded:
            stack.enter_context(mock.patch.object(KalmanEstimator, "estimate",
                                                  drives_commanded(KalmanEstimator.estimate)))
        core = make_core(desc, options, fused=not commanded)
        core.load_trajectory(wave, "offline")
        result = run_loop(wave, profile, options, desc=desc, core=core)
    if result.aborted:
        return None
    return [round(v["rms_deg"], 5) for v in result.summary().values()]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("out/reproductions/calibrated_feedback.json"))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = p.parse_args(argv)
    work = args.out.parent / "calibrated_feedback"
    work.mkdir(parents=True, exist_ok=True)
    nominal = ModelParameters(config_file(NOMINAL))
    desc = nominal.description
    identify = optimized(desc, "identify")
    record = {}
    for plant in PLANTS:
        ident = tracked(identify, desc, plant, 0)
        cal, _, variant = calibrated(nominal, ident, identify.dt, ModelParameters(config_file(plant)),
                                     work / f"{Path(plant).stem}.yaml")
        sigma = momentum_noise(nominal, cal, ident.Q_measured, identify.dt)
        trust = EstimatorNoise(momentum=float(np.max(sigma)))
        wave = optimized(variant, "wave")
        rec = {"sigma_p": sigma.tolist(), "feed_forward": [round(v["rms_deg"], 5) for v in tracked(
            wave, variant, plant, 0, feedback=False).summary().values()], "seeds": {}}
        for seed in args.seeds:
            rec["seeds"][seed] = {
                "closed_default": run(wave, variant, plant, seed),
                "closed_default_no_integral": run(wave, variant, plant, seed, integral=False),
                "closed_calibrated": run(wave, variant, plant, seed, trust),
                "closed_calibrated_no_integral": run(wave, variant, plant, seed, trust, integral=False),
                "calibrated_drives_commanded": run(wave, variant, plant, seed, trust, commanded=True),
                "calibrated_drives_commanded_no_integral": run(wave, variant, plant, seed, trust, integral=False,
                                                               commanded=True)}
        rec["true_state"] = run(wave, variant, plant, 0, exact=True)
        rec["true_state_no_integral"] = run(wave, variant, plant, 0, integral=False, exact=True)
        record[plant] = rec
        print(f"\n## {plant}: sigma_p {', '.join(f'{s:.3g}' for s in sigma)} N m s; feed-forward "
              + " / ".join(f"{v:.4f}" for v in rec["feed_forward"]) + "; true state "
              + " / ".join(f"{v:.4f}" for v in rec["true_state"]) + " (no integral "
              + " / ".join(f"{v:.4f}" for v in rec["true_state_no_integral"]) + ")", flush=True)
        for name in rec["seeds"][args.seeds[0]]:
            values = np.array([rec["seeds"][s][name] for s in args.seeds])
            print(f"| {name} | " + " | ".join(f"{lo:.4f}–{hi:.4f}" for lo, hi in zip(values.min(0), values.max(0)))
                  + " |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
