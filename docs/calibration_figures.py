"""The figures of docs/calibration.md: the calibration from the wave and from the identification motion.

    .venv/bin/python docs/calibration_figures.py [--out out/reproductions/calibration_figures.json] [--seeds 0 1 2]

Every motion is optimized as the main job's ``--calibrate`` has the optimizer node optimize it
(``ocp.request.build_problem`` with the node's defaults and the identification motion's reserve of the drive limits,
``ocp.optimizer.solve``; the gains included) and tracked offline by the controller node's tick logic
on the hardware stand-in (``sim.offline_loop``: the realistic profile, the plant of the profile or of the plant
family, one noise seed per run). The calibration (``identification.calibrate``) reads only the encoder readings
of the run and the nominal model file; the links' masses are given as the main job gives them
(``cli/main_job/calibration.weighed_masses``: the plant's plus a fixed-seed reading error, ±1 g). Printed:

1. the information each motion gives (``identification.excitation.information`` on its noise-free optimum):
   the criterion log det(I + F) and the data's information per direction;
2. for the wave and the identification motion, seeds 0–2 on the realistic stand-in (tracked closed loop, as the
   main job records it): per parameter the fit's standard deviation, its error against the plant, and the data's
   standard deviation with the directions no motion fixes held at the prior (predicted, noise-free optimum);
3. the wave re-optimized on each calibrated model and tracked closed loop and feed-forward only on the plant it
   was calibrated on, against the nominal model's (RMS of the true angles, degrees);
4. the same from the identification motion on the plant family (damping ×3, forearm +25 %, hook +5 mm).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from marionette_control.cli.main_job.calibration import weighed_masses  # noqa: E402
from marionette_control.identification import excitation as E  # noqa: E402
from marionette_control.identification.calibration import calibrate, default_parameters  # noqa: E402
from marionette_control.identification.parameters import ModelParameters  # noqa: E402
from marionette_control.identification.recording import Recording  # noqa: E402
from marionette_control.identification.variant import write_variant  # noqa: E402
from marionette_control.model.limits import from_description  # noqa: E402
from marionette_control.model.yaml_model import load_model_file  # noqa: E402
from marionette_control.ocp import request as P  # noqa: E402
from marionette_control.ocp.optimizer import solve  # noqa: E402
from marionette_control.resources import config_file  # noqa: E402
from marionette_control.sim.offline_loop import run_loop  # noqa: E402
from marionette_control.sim.profile import HardwareProfile  # noqa: E402
from marionette_control.tracking.controller import ControllerOptions  # noqa: E402

NOMINAL = "marionette_arm.yaml"
REALISTIC_PLANT = HardwareProfile.named("realistic").plant_model_file
FAMILY = ("plants/damping_x3.yaml", "plants/forearm_heavy.yaml", "plants/hook_out_5mm.yaml")


def optimized(desc, motion: str):
    """The motion optimized for the model of ``desc`` as the main job's ``--calibrate`` has the optimizer node do
    it: its default problem with the identification motion's reserve of the drive limits."""
    reserve = P.RequestOptions(**{f"{family}_margin": v for family, v in E.MARGINS.items()})
    problem = P.build_problem(desc.model, motion_name=motion, options=reserve, limits=from_description(desc))
    return solve(problem, problem.X0, problem.U0).trajectory


def tracked(trajectory, desc, plant: str, seed: int, feedback: bool = True):
    profile = HardwareProfile.named("realistic", plant_model_file=plant, seed=seed)
    options = ControllerOptions(command_delay_steps=profile.command_delay_steps, feedback=feedback)
    return run_loop(trajectory, profile, options, desc=desc)


def calibrated(nominal: ModelParameters, run, dt: float, plant: ModelParameters, path: Path):
    """(calibration, report, variant description) from the encoder readings of an offline run."""
    recording = Recording(dt, 0.0, run.Q_measured, list(nominal.configs), None, "offline run")
    names = default_parameters(nominal)
    weighed = {n: w["reading"] for n, w in weighed_masses(plant).items()}
    cal, report = calibrate(nominal, recording, names, E.weighed_priors(nominal, names, weighed))
    return cal, report, load_model_file(write_variant(nominal, cal, path, source="offline run"))


def rms(run) -> dict:
    return {j: round(v["rms_deg"], 4) for j, v in run.summary().items()}


def before_after(nominal_desc, variant_desc, plant: str, seed: int) -> dict:
    """The wave on the nominal and on the calibrated model, closed loop and feed-forward only, on ``plant``."""
    out = {}
    for name, desc in (("nominal", nominal_desc), ("calibrated", variant_desc)):
        wave = optimized(desc, "wave")
        out[name] = {"closed_loop": rms(tracked(wave, desc, plant, seed)),
                     "open_loop": rms(tracked(wave, desc, plant, seed, feedback=False))}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("out/reproductions/calibration_figures.json"))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = p.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    work = args.out.parent / "calibration_figures"
    work.mkdir(exist_ok=True)
    nominal = ModelParameters(config_file(NOMINAL))
    desc = nominal.description
    designer = E.Designer(nominal)
    record: dict = {"information": {}, "fits": {}, "before_after": {}, "family": {}}
    motions = {m: optimized(desc, m) for m in ("wave", "identify")}

    print("## 1. Information (noise-free optimum, the realistic encoders, the links weighed)\n")
    info = {m: designer.information(tr) for m, tr in motions.items()}
    for m, i in info.items():
        k = len(i.singular) - i.null
        record["information"][m] = i.to_dict()
        print(f"- {m}: log det(I + F) = {i.log_det:.1f}; singular values " + ", ".join(f"{v:.3g}" for v in
                                                                                       i.singular[:k]))

    plant = ModelParameters(config_file(REALISTIC_PLANT))
    truth = {n: plant.nominal(plant.parameter(n)) for n in designer.names}
    print("\n## 2. Fits on the realistic stand-in (tracked closed loop), seeds " + ", ".join(map(str, args.seeds)))
    for m, tr in motions.items():
        fits = []
        for seed in args.seeds:
            t0 = time.perf_counter()
            run = tracked(tr, desc, REALISTIC_PLANT, seed)
            cal, report, variant = calibrated(nominal, run, tr.dt, plant, work / f"{m}_{seed}.yaml")
            fits.append({"seed": seed, "chi2_per_dof": report["chi2_per_dof"], "seconds": time.perf_counter() - t0,
                         "tracking": rms(run), "estimates": {e.name: e.estimate for e in cal.estimates},
                         "std": {e.name: e.std for e in cal.estimates},
                         "identifiable": {e.name: e.identifiable for e in cal.estimates},
                         "before_after": before_after(desc, variant, REALISTIC_PLANT, seed)})
            print(f"  {m} seed {seed}: {fits[-1]['seconds']:.0f} s, chi^2/dof {report['chi2_per_dof']:.3g}",
                  flush=True)
        record["fits"][m] = fits
    print("\n| parameter | truth | " + " | ".join(f"{m}: std | {m}: error (seeds) | {m}: data std" for m in motions)
          + " |\n|---|---|" + "---|---|---|" * len(motions))
    for n in designer.names:
        cells = []
        for m in motions:
            fits = record["fits"][m]
            errors = ", ".join(f"{f['estimates'][n] - truth[n]:+.2g}" for f in fits)
            ok = "" if all(f["identifiable"][n] for f in fits) else " (n.i.)"
            cells.append(f"{np.mean([f['std'][n] for f in fits]):.2g}{ok} | {errors} | "
                         f"{info[m].data_std[info[m].names.index(n)]:.2g}")
        print(f"| {n} | {truth[n]:.5g} | " + " | ".join(cells) + " |")

    print("\n## 3. The wave before and after, on the realistic stand-in (RMS deg, shoulder / elbow)\n")
    print("| calibrated from | seed | nominal closed | nominal feed-forward | calibrated closed | "
          "calibrated feed-forward |\n|---|---|---|---|---|---|")
    for m in motions:
        for f in record["fits"][m]:
            b = f["before_after"]
            print(f"| {m} | {f['seed']} | " + " | ".join(
                " / ".join(f"{v:.3f}" for v in b[model][run].values())
                for model in ("nominal", "calibrated") for run in ("closed_loop", "open_loop")) + " |")

    print("\n## 4. From the identification motion on the plant family (seed 0)\n")
    print("| plant | identification run | nominal closed | nominal feed-forward | calibrated closed | "
          "calibrated feed-forward |\n|---|---|---|---|---|---|")
    for name in FAMILY:
        other = ModelParameters(config_file(name))
        run = tracked(motions["identify"], desc, name, 0)
        cal, report, variant = calibrated(nominal, run, motions["identify"].dt, other,
                                          work / f"family_{Path(name).stem}.yaml")
        b = before_after(desc, variant, name, 0)
        record["family"][name] = {"tracking": rms(run), "aborted": bool(run.aborted), "before_after": b,
                                  "estimates": {e.name: e.estimate for e in cal.estimates},
                                  "std": {e.name: e.std for e in cal.estimates},
                                  "truth": {n: other.nominal(other.parameter(n)) for n in designer.names}}
        print(f"| {name} | " + " / ".join(f"{v:.2f}" for v in rms(run).values()) + " | " + " | ".join(
            " / ".join(f"{v:.3f}" for v in b[model][r].values())
            for model in ("nominal", "calibrated") for r in ("closed_loop", "open_loop")) + " |", flush=True)
    args.out.write_text(json.dumps(record, indent=2, default=float) + "\n")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
