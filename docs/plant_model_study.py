"""The figures of docs/tracking.md's "Plant family" paragraph on damping ×3: what limits the feedback there.

    .venv/bin/python docs/plant_model_study.py [--plants plants/damping_x3.yaml,...] [--seeds 0,1]
        [--cases feed_forward,lqr,...] [--window 1.5]

Each case of ``marionette_control.study.plant_model`` (its docstring says what each gives the plant's model to)
on the wave's optimum, the realistic profile with each plant file, every seed (the cases that give the plant's file to the controller or the planner on
damping ×3 only): RMS shoulder / elbow [°], abort,
the plant string's lowest tension during the motion [N]; for ``planner_fitted`` the last fitted parameters and
the median time per fit. The runs are seeded: the figures repeat but for the fits' times (about 5 min for the
default plants and seeds on one core).
"""

from __future__ import annotations

import argparse

from marionette_control.ocp.spec import load_spec
from marionette_control.ocp.spec_problem import solve_spec
from marionette_control.resources import config_file
from marionette_control.study.plant_model import CASES, run_case

#: the cases that give the plant's file to the controller or the planner, and the plants they apply to
ON_PLANT = ("lqr_on_plant", "planner_on_plant")
FORCES_ONLY = ("plants/damping_x3.yaml",)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plants", default="plants/damping_x3.yaml,plants/hook_out_5mm.yaml,marionette_arm_plant.yaml")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--window", type=float, default=1.5, help="s of joint states each online fit uses")
    args = ap.parse_args()
    solved = solve_spec(load_spec(config_file("optimize", "marionette_arm_wave.yaml")))
    print("| plant | seed | case | RMS shoulder / elbow [°] | aborted | lowest tension [N] | fitted (last) |")
    print("|---|---|---|---|---|---|---|")
    for plant in args.plants.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            for case in args.cases.split(","):
                if case in ON_PLANT and plant not in FORCES_ONLY:
                    continue  # the plant's geometry is not the model's (study.plant_model's docstring)
                r = run_case(case, solved.problem, solved.trajectory, plant, seed, args.window)
                fits = r["fits"]
                fitted = "" if not fits or not fits["last"] else (
                    ", ".join(f"{k} {v:.4g}" for k, v in fits["last"].items())
                    + f" ({fits['count']} fits, median {1e3 * fits['median_s']:.0f} ms)")
                s, e = r["rms_deg"]
                print(f"| {plant} | {seed} | {case} | {s:.3f} / {e:.3f} | {'yes' if r['aborted'] else 'no'} | "
                      f"{r['tension_min_n']:.3f} | {fitted} |", flush=True)


if __name__ == "__main__":
    main()
