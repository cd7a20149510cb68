"""The figures of docs/benchmarks.md "Re-planning every tick" (issue 28, item 4): the real-time iteration against the
10 Hz receding-horizon planner and the LQR alone, offline.

Every run is the offline closed loop (``sim/offline_loop.run_loop``: the controller core and the hardware stand-in,
cycle by cycle) on the ``realistic`` profile (a seed for its noise), the controller without its path tolerance's
abort (so that a run that loses the arm still says how far it went), tracking the optimum of
``config/optimize/marionette_arm_wave.yaml`` with ``motion.name`` (``--motions``), and planning on that spec's
problem; with ``--problem request`` the optimizer node's problem for a request of the motion with its default
options instead (:func:`~marionette_control.ocp.request.build_problem`, solved as the node solves it), and its optimum:
what the main job tracks and its planner plans on (``problem_spec`` empty), bit for bit (docs/mpc.md, "Why the main
job recovers slower"). The two differ in their weights, not their constraints: the request's default weighs the
angles 1000 and the momenta 1, the spec 100 and 0.01.

* ``lqr`` — the controller alone;
* ``lqr_plan_gains`` — the controller alone with the gains a plan carries (the motion's design without the integral
  action, :attr:`~marionette_control.ocp.mpc.RecedingHorizon.gains`): what a plan's tracking is without the
  integral that a plan suspends (docs/mpc.md, "The push at 3.0 s");
* ``mpc10`` — :class:`~marionette_control.ocp.mpc.RecedingHorizon` with the planner node's defaults (a plan every
  0.1 s over 1 s, used 5 ticks after its estimate) but no deadline: every update runs to convergence, so the
  run does not depend on this machine's load;
* ``rti`` — :class:`~marionette_control.ocp.rti.RealTimeIteration`: a plan every tick over 1 s, used at the next.

Plants (``--plants``, each on the first seed; the realistic plant gets every seed): the family's
(``damping_x3``, ``hook_out_5mm``, ``forearm_heavy``), and ``nominal``: the realistic profile (noise, encoders,
delay, one-sided string) with the nominal model itself as the plant, so that plant and planner differ in nothing
but the noise.

Models (``--model``): by default the planners and the controller plan and track on the nominal model
(``config/marionette_arm.yaml``). ``--model FILE`` takes a model file instead (a variant such as
``calibrated_model.yaml``): the problem, its optimum with the controller's gains, and the planners' system are built
on it, the controller's model is it; the plant is still the profile's. ``--model calibrated``: each plant's own
calibrated model, from an identification run on that plant's stand-in
(:func:`~marionette_control.cli.main_job.calibration.calibrate_stand_in`: the main job's ``--calibrate`` offline; the
calibrator reads the run's bag and the weighed masses, never the plant file); the JSON records its parameters.

Pushes: the main job's (``offline_loop.scripted_push``: a 0.1 s half sine of 0.6 N on the forearm) at 5.6 s and
3.0 s, and none. Per run: the recovery time to within 1° of the motion (simulated time), the intervals in which an
angle is more than 1° off the motion (``over_bound_s``; the same run without the push bounds a push's recovery from
below: ``floor`` in the summary, the time from the push to the unpushed run's last such interval), the plant's lowest string
tension during the motion, RMS angle errors, plans offered / taken / refused, and for the planners the wall-clock
and CPU time per update (the RTI: feedback — estimate to plan — and preparation; the sum is a tick's work), the
controller core's own compute time per tick and its ``offer_plan`` (the hand-off), with the machine's load
average; for the RTI also the feedback's CPU time per outcome (``cpu_by_reason``: the ticks that try more than one
candidate were its tail, docs/benchmarks.md). Times are wall clock on a machine shared with other jobs (the load
average is printed), never asserted.

    .venv/bin/python docs/rti_measurements.py [--seeds 0 1 2] [--motions wave bow] [--plants ...]
        [--problem spec|request] [--variants lqr mpc10 rti] [--settle-cycles 20 ...] [--model FILE|calibrated]
        [--json PATH]

``--settle-cycles``: the arm rests that many cycles before tracking starts (default 20), each drawing one encoder
reading from the seed's noise generator, so that each count is the same seed's noise from another point: a run on
the graph meets the simulator's generator wherever the job's earlier runs and its waits left it (seeded once, at the
simulator's configure).

The runs of docs/benchmarks.md set ``OPENBLAS_NUM_THREADS=1`` (recorded in the JSON): the controller and the planner
share one process here, and one BLAS thread keeps numpy's pool out of the timings.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from marionette_control.cli.main_job.calibration import calibrate_stand_in, parameter_record
from marionette_control.identification.parameters import ModelParameters
from marionette_control.lq.gains import design_gains
from marionette_control.model.library import marionette_arm as arm
from marionette_control.model.limits import from_description
from marionette_control.model.yaml_model import load_packaged_model
from marionette_control.ocp import request
from marionette_control.ocp.mpc import MPCOptions, RecedingHorizon
from marionette_control.ocp.retiming import solve_retimed
from marionette_control.ocp.rti import RealTimeIteration, rti_options
from marionette_control.ocp.spec import load_spec
from marionette_control.ocp.spec_problem import solve_spec
from marionette_control.resources import config_file
from marionette_control.sim.offline_loop import run_loop, scripted_push
from marionette_control.sim.profile import HardwareProfile
from marionette_control.tracking.controller import ControllerOptions, make_core

UNBOUNDED_PATH = {"path": {"shoulder": 0.0, "elbow": 0.0}}
PLANTS = {"realistic": {}, "damping_x3": dict(plant_model_file="plants/damping_x3.yaml"),
          "hook_out_5mm": dict(plant_model_file="plants/hook_out_5mm.yaml"),
          "forearm_heavy": dict(plant_model_file="plants/forearm_heavy.yaml"),
          "nominal": dict(plant_model_file=arm.CONFIG_FILE)}
VARIANTS = ("lqr", "lqr_plan_gains", "mpc10", "rti")
#: where the planned problem and the tracked optimum come from (``--problem``, module docstring)
PROBLEMS = ("spec", "request")
#: the offline loop's default rest before tracking starts [cycles] (``run_loop``'s ``settle_cycles``)
SETTLE_CYCLES = 20
#: the recovery's bound: an angle within it of the motion is back [°]
BOUND_DEG = 1.0


def solved(motion: str, source: str = "spec", model_file: str = ""):
    """(problem, its optimum with its gains) for ``motion``: the spec's or the optimizer node's (``source``), on the
    model file ``model_file`` (default: the nominal model), as the optimizer node builds a request's ``model_file``
    and a spec its ``model.file``."""
    if source == "request":
        model, limits = arm.load_description().model, None
        if model_file:
            models = request.RequestModels()
            model, limits, _ = models.get(models.add_file(model_file))
        problem = request.build_problem(model, motion_name=motion, limits=limits)
        return problem, solve_retimed(problem, problem.X0, problem.U0).trajectory
    overrides = {"motion.name": motion, **({"model": {"file": str(Path(model_file).resolve())}} if model_file else {})}
    result = solve_spec(load_spec(config_file("optimize", "marionette_arm_wave.yaml"), overrides))
    return result.problem, result.trajectory


def calibrated(plant: str, directory: Path) -> tuple[str, dict]:
    """(the variant file, its parameters' record) of the nominal model calibrated from an identification run on
    ``plant``'s stand-in (the realistic profile's noise and delay; module docstring)."""
    profile = HardwareProfile.named("realistic", **PLANTS[plant])
    cal, fit, variant = calibrate_stand_in(profile, directory / f"calibrated_{plant}.yaml")
    record = parameter_record(cal, ModelParameters(config_file(profile.plant_model_file)))
    return str(variant), {"chi2_per_dof": fit["chi2_per_dof"], "parameters": record}


def planner(variant: str, problem, motion):
    if variant == "mpc10":
        return RecedingHorizon(problem, motion, MPCOptions(deadline=None))
    if variant == "rti":
        return RealTimeIteration(problem, motion, rti_options(dt=motion.dt))
    return None


def plan_gains(problem, motion):
    """The motion with the gains a plan carries instead of its own (its design without the integral action)."""
    rh = RecedingHorizon(problem, motion, MPCOptions(deadline=None))
    return design_gains(rh.system, motion.X, motion.U, rh.gains).attach(motion)


def over_bound(r) -> list:
    """[[from, to], ...] s: the intervals of the motion (k ≤ N) in which an angle is more than BOUND_DEG off it."""
    k = r.k[r.k <= r.N]
    out = np.any(np.abs(np.degrees(r.angle_errors())) > BOUND_DEG, axis=1)
    edges = np.flatnonzero(np.diff(np.concatenate(([0], out.astype(int), [0]))))
    return [[float(k[a] * r.dt), float(k[b - 1] * r.dt)] for a, b in zip(edges[::2], edges[1::2])]


def floor(unpushed: dict, push_time: float):
    """The recovery's lower bound for a push at ``push_time`` from the unpushed run's record: seconds from the push
    to the end of its last interval over the bound after the push (0: none)."""
    last = [b for a, b in unpushed["over_bound_s"] if b >= push_time]
    return max(0.0, max(last) + unpushed["dt"] - push_time) if last else 0.0


def ms(values) -> dict:
    a = 1e3 * np.asarray(values, dtype=float)
    return {"median": float(np.median(a)), "p99": float(np.percentile(a, 99)), "max": float(a.max())} if a.size else {}


def run(problem, motion, variant: str, plant: str, seed: int, push_time, settle: int = SETTLE_CYCLES,
        model_file: str = "") -> dict:
    """One closed-loop run; ``settle``: the cycles the arm rests before tracking starts, each drawing one encoder
    reading from the noise generator (so a different count starts the run at another point of the seed's noise);
    ``model_file``: the controller's model (default: the nominal model; ``problem`` and ``motion`` built on it)."""
    desc = load_packaged_model(model_file) if model_file else arm.load_description()
    profile = HardwareProfile.named("realistic", seed=seed, **PLANTS[plant])
    options = ControllerOptions(tolerances=UNBOUNDED_PATH, command_delay_steps=profile.command_delay_steps)
    core = make_core(desc, options)
    core.load_trajectory(plan_gains(problem, motion) if variant == "lqr_plan_gains" else motion, "motion")
    handoff = []
    offer = core.offer_plan

    def timed_offer(plan):
        t = time.perf_counter()
        out = offer(plan)
        handoff.append(time.perf_counter() - t)
        return out

    core.offer_plan = timed_offer
    pushes = [] if push_time is None else [scripted_push(push_time, motion.dt, 0.6)]
    mpc = planner(variant, problem, motion)
    t0 = time.perf_counter()
    r = run_loop(motion, profile, options, desc, core=core, pushes=pushes, mpc=mpc, settle_cycles=settle)
    wall = time.perf_counter() - t0
    rec = r.record(from_description(desc))
    out = {"variant": variant, "plant": plant, "seed": seed, "settle_cycles": settle, "push_s": push_time,
           "model_file": model_file or None,
           "aborted": rec["aborted"],
           "recovery_s": r.recovery_time(pushes[0].tick) if pushes else None,
           "over_bound_s": over_bound(r), "dt": r.dt,
           "tension_min_n": rec["tension_min_n"]["motion"], "slack_s": rec["slack_s"]["motion"],
           "rms_deg": {k: v["rms_deg"] for k, v in rec["errors"].items()},
           "max_deg": {k: v["max_deg"] for k, v in rec["errors"].items()},
           "tick_compute_ms": {k: 1e3 * v for k, v in core.compute_times.stats().items() if k != "count"},
           "run_wall_s": wall}
    if mpc is not None:
        ups = [u for u in r.mpc["updates"] if u["reason"] != "end_of_motion"]
        out.update(offered=r.mpc["offered"], switched=r.mpc["switched"],
                   rejected={k: v for k, v in r.mpc["rejected"].items() if v},
                   reasons={k: sum(u["reason"] == k for u in ups) for k in sorted({u["reason"] for u in ups})},
                   update_ms=ms([u["elapsed"] for u in ups]), cpu_ms=ms([u["cpu"] for u in ups]),
                   handoff_ms=ms(handoff))
        if variant == "rti":
            out.update(prepare_ms=ms([u["prepare"] for u in ups]),
                       tick_ms=ms([u["elapsed"] + u["prepare"] for u in ups]),
                       tick_cpu_ms=ms([u["cpu"] + u["prepare_cpu"] for u in ups]),
                       lq_solves_mean=float(np.mean([u["iterations"] for u in ups])),
                       cpu_by_reason={k: dict(count=sum(u["reason"] == k for u in ups),
                                              **ms([u["cpu"] for u in ups if u["reason"] == k]))
                                      for k in sorted({u["reason"] for u in ups})})
    return out


def row(r: dict) -> str:
    rec = "never" if r["recovery_s"] is None else f"{r['recovery_s']:.2f}"
    rec = "—" if r["push_s"] is None else rec
    rms = " / ".join(f"{v:.2f}" for v in r["rms_deg"].values())
    upd = ""
    if "update_ms" in r and r["update_ms"]:
        u = r["update_ms"]
        upd = f"{u['median']:.2f} / {u['p99']:.2f}"
        if "tick_ms" in r:
            t = r["tick_ms"]
            c, tc = r["cpu_ms"], r["tick_cpu_ms"]
            upd += (f" (CPU {c['median']:.2f} / {c['p99']:.2f}; whole tick {t['median']:.2f} / {t['p99']:.2f}, CPU "
                    f"{tc['median']:.2f} / {tc['p99']:.2f})")
        upd += f", {r['switched']}/{r['offered']} taken"
        if r["variant"] == "rti":
            upd += f", {r['reasons'].get('infeasible', 0)} infeasible"
    seed = r["seed"] if r["settle_cycles"] == SETTLE_CYCLES else f"{r['seed']}, rest {r['settle_cycles']}"
    return (f"| {r['plant']} | {seed} | {'none' if r['push_s'] is None else r['push_s']} | {r['variant']} | "
            f"{'abort' if r['aborted'] else rec} | {r['tension_min_n']:.3f} | {rms} | {upd} |")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--motions", nargs="+", default=["wave", "bow"], help="the first gets every seed and plant")
    ap.add_argument("--plants", nargs="*", default=["damping_x3", "hook_out_5mm"])
    ap.add_argument("--problem", choices=PROBLEMS, default="spec", help="the problem planned on and its optimum "
                    "tracked: the spec's, or the optimizer node's for a request of the motion (the main job's)")
    ap.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS), help="the runs of each case")
    ap.add_argument("--settle-cycles", type=int, nargs="+", default=[SETTLE_CYCLES], help="rest cycles before "
                    "tracking starts, each a run of every seed on the first motion and the realistic plant: the same "
                    "seed's noise from another point, as a run on the graph meets it (docs/mpc.md)")
    ap.add_argument("--model", default="", help="plan and track on this model file instead of the nominal one, or "
                    "'calibrated': on each plant's model calibrated from its own identification run (module docstring)")
    ap.add_argument("--json", default=None, help="write every run's record here")
    args = ap.parse_args(argv)
    results = {"started": datetime.now(timezone.utc).isoformat(timespec="seconds"), "load_start": os.getloadavg(),
               "problem": args.problem, "model": args.model or None,
               "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS"), "runs": []}
    print(f"load average at start: {os.getloadavg()}, OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}")
    print("| motion | plant | seed | push [s] | variant | recovery to 1° [s] | lowest tension [N] | RMS shoulder / "
          "elbow [°] | update median / p99 [ms] (RTI: estimate to plan, its CPU; the whole tick), plans taken |")
    print("|---|---|---|---|---|---|---|---|---|")
    cases = []
    first = args.motions[0]
    for seed in args.seeds:
        for push in (5.6, 3.0, None):
            for settle in args.settle_cycles:
                cases.append((first, "realistic", seed, push, settle))
    for plant in args.plants:
        for push in (5.6, 3.0, None):
            cases.append((first, plant, args.seeds[0], push, SETTLE_CYCLES))
    for other in args.motions[1:]:
        for push in (None, "middle"):
            cases.append((other, "realistic", args.seeds[0], push, SETTLE_CYCLES))
    problems, models = {}, {}
    workdir = tempfile.TemporaryDirectory(prefix="calibrated_")
    for motion_name, plant, seed, push, settle in cases:
        if args.model == "calibrated" and plant not in models:
            models[plant], record = calibrated(plant, Path(workdir.name))
            results.setdefault("calibrations", {})[plant] = record
        model_file = models.get(plant, "" if args.model == "calibrated" else args.model)
        if (motion_name, model_file) not in problems:
            problems[motion_name, model_file] = solved(motion_name, args.problem, model_file)
        problem, motion = problems[motion_name, model_file]
        if push == "middle":
            push = round(0.5 * motion.N * motion.dt, 1)
        for variant in args.variants:
            r = run(problem, motion, variant, plant, seed, push, settle, model_file)
            r["motion"] = motion_name
            results["runs"].append(r)
            print(f"| {motion_name} " + row(r), flush=True)
    workdir.cleanup()
    results["load_end"] = os.getloadavg()
    print(f"load average at end: {os.getloadavg()}")
    summary(results["runs"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)


def summary(runs: list) -> None:
    """Per motion, plant, variant and push over the seeds: recoveries, their floors (the unpushed run's, ``floor``),
    lowest tension, times."""
    print("\n| motion | plant | variant | push [s] | recovery [s], seeds | floor: unpushed run [s] | lowest tension [N] | "
          "update median / p99 [ms] over the seeds |")
    print("|---|---|---|---|---|---|---|---|")
    unpushed = {(r["motion"], r["plant"], r["variant"], r["seed"], r["settle_cycles"]): r for r in runs
                if r["push_s"] is None}
    groups: dict = {}
    for r in runs:
        groups.setdefault((r["motion"], r["plant"], r["variant"], r["push_s"] is None, r["push_s"] or 0.0), []).append(r)
    for (motion, plant, variant, _, push), sel in groups.items():
        recs = ", ".join("—" if r["push_s"] is None else "never" if r["recovery_s"] is None else
                         f"{r['recovery_s']:.2f}" for r in sel)
        floors = "—"
        if sel[0]["push_s"] is not None:
            base = [unpushed.get((motion, plant, variant, r["seed"], r["settle_cycles"])) for r in sel]
            floors = ", ".join("?" if b is None else f"{floor(b, r['push_s']):.2f}" for b, r in zip(base, sel))
        t = min(r["tension_min_n"] for r in sel)
        times = ""
        if variant in ("mpc10", "rti"):
            key = "tick_ms" if variant == "rti" else "update_ms"
            med = statistics.median(r[key]["median"] for r in sel)
            p99 = max(r[key]["p99"] for r in sel)
            times = f"{med:.2f} / {p99:.2f} (worst seed's p99)"
            if variant == "rti":
                fb = max(r["update_ms"]["p99"] for r in sel)
                times += f"; feedback p99 {fb:.2f}"
        print(f"| {motion} | {plant} | {variant} | {sel[0]['push_s'] or 'none'} | {recs} | {floors} | {t:.3f} | "
              f"{times} |")
    if any(math.isnan(r["tension_min_n"]) for r in runs):
        print("(a NaN tension: the string was slack throughout)")


if __name__ == "__main__":
    main()
