"""The planner with online identification on the plant family (docs/mpc.md, "Online identification").

For each motion × plant × noise seed, on the realistic profile with the plant's file: feed-forward only, the LQR
alone (the default controller), the 10 Hz planner (``MPCOptions(horizon=1.0, deadline=None)``: an iteration budget
only, reproducible) and the same planner re-identifying the joints' damping from the last 1.5 s of joint states
(``identify``), and that planner planning only once a model is adopted (``identified_only``:
``plan_identified_only``); RMS and maximum error per joint over the motion, aborts, the plant string's lowest
tension, the estimates the planner ended on and the fit times.

    .venv/bin/python docs/online_identification.py [--motions wave,bow,figure_eight] [--plants ...] [--seeds 0,1,2]
        [--cases feed_forward,lqr,planner,planner_identified,identified_only] [--json out.json]

The runs are seeded: the figures repeat but for the fits' times (about 15 min for the defaults on one core).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from marionette_control.identification.online import planner_identification
from marionette_control.identification.parameters import ModelParameters
from marionette_control.model.library import marionette_arm as arm
from marionette_control.model.limits import from_description
from marionette_control.ocp.mpc import MPCOptions, RecedingHorizon
from marionette_control.ocp.spec import load_spec
from marionette_control.ocp.spec_problem import solve_spec
from marionette_control.resources import config_file
from marionette_control.sim.offline_loop import run_loop
from marionette_control.sim.profile import HardwareProfile
from marionette_control.tracking.controller_options import ControllerOptions

PLANTS = {"damping_x3": "plants/damping_x3.yaml", "realistic": "marionette_arm_plant.yaml",
          "forearm_heavy": "plants/forearm_heavy.yaml", "hook_out_5mm": "plants/hook_out_5mm.yaml"}
CASES = ("feed_forward", "lqr", "planner", "planner_identified", "identified_only")
#: motions drawn too fast for the drives: re-timed uniformly (test/test_motion_library.py)
TOO_FAST = {"elbow_swings"}
DAMPING = ("shoulder.damping", "elbow.damping")


def solve(name: str):
    """(problem, trajectory) of the library motion ``name`` on the arm's spec (re-timed when too fast)."""
    overrides = {"motion.name": name}
    if name in TOO_FAST:
        overrides |= {"retime.mode": "uniform", "retime.precision": 0.05}
    result = solve_spec(load_spec(config_file("optimize", "marionette_arm_wave.yaml"), overrides))
    return result.problem, result.trajectory


def run_case(case: str, problem, motion, plant: str, seed: int) -> dict:
    profile = HardwareProfile.named("realistic", plant_model_file=PLANTS[plant], seed=seed)
    options = ControllerOptions(command_delay_steps=profile.command_delay_steps, feedback=case != "feed_forward")
    mpc, identifier = None, None
    if case.startswith("planner") or case == "identified_only":
        mpc_options = MPCOptions(horizon=1.0, deadline=None, identify=DAMPING if case != "planner" else (),
                                 plan_identified_only=case == "identified_only")
        identifier = planner_identification(config_file("marionette_arm.yaml"), mpc_options, motion.dt)
        mpc = RecedingHorizon(problem, motion, mpc_options, identifier)
    t0 = time.perf_counter()
    result = run_loop(motion, profile, options, mpc=mpc)
    record = result.record(from_description(arm.load_description()))
    out = {"rms_deg": {j: e["rms_deg"] for j, e in record["errors"].items()},
           "max_deg": {j: e["max_deg"] for j, e in record["errors"].items()},
           "aborted": bool(record["aborted"]), "tension_min_n": record["tension_min_n"]["motion"],
           "seconds": time.perf_counter() - t0}
    if identifier is not None:
        prepare = [s for _, adopted, s in mpc.identifications if adopted]
        out["identification"] = identifier.summary() | {
            "identify_seconds": {"median": float(np.median(prepare)) if prepare else None,
                                 "p99": float(np.percentile(prepare, 99)) if prepare else None}}
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--motions", default="wave,bow,figure_eight,elbow_swings")
    ap.add_argument("--plants", default=",".join(PLANTS))
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)
    truth = {p: ModelParameters(config_file(f)) for p, f in PLANTS.items()}
    rows = []
    for name in args.motions.split(","):
        problem, motion = solve(name)
        for plant in args.plants.split(","):
            values = {n: truth[plant].nominal(truth[plant].parameter(n)) for n in DAMPING}
            for seed in (int(s) for s in args.seeds.split(",")):
                for case in args.cases.split(","):
                    r = run_case(case, problem, motion, plant, seed) | {"motion": name, "plant": plant, "seed": seed,
                                                                       "case": case, "plant_damping": values}
                    rows.append(r)
                    ident = r.get("identification", {})
                    print(name, plant, seed, case, " / ".join(f"{v:.3f}" for v in r["rms_deg"].values()),
                          "abort" if r["aborted"] else "", f"T>={r['tension_min_n']:.3f}",
                          {k: round(v, 4) for k, v in ident.get("current", {}).items()},
                          ident.get("counts", ""), ident.get("fit_seconds", ""), flush=True)
                    if args.json:
                        with open(args.json, "w") as f:
                            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
