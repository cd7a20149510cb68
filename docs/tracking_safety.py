"""The figures of docs/tracking.md's "Tension guard", "Start", "Quiet commands" and "Plant family" sections.

    .venv/bin/python docs/tracking_safety.py [--motions wave,bow,figure_eight] [--seeds 0,1,2]

The motions are optimized with the arm's spec (``config/optimize/marionette_arm_wave.yaml`` with ``motion.name``)
and tracked offline (``marionette_control.sim.offline_loop.run_loop``: the controller node's tick logic against
the stand-in) on the realistic profile, closed loop and feed-forward only:

* start and guard: the wave on every seed with the default controller, without the start blend
  (``start_blend: 0``) and without the tension guard (the core built without the model's strings): the plant
  string's lowest tension during the motion and over its first 0.1 s, the ticks the guard moved, the RMS;
* quiet commands: the RMS of the commanded drive accelerations' deviation from the plan's
  (``LoopResult.commands_summary``) with the default and with the acceleration budget (``feedback_acceleration``)
  of 5 m/s², on the wave and with three times the encoder noise;
* a quieter estimate: the wave with the Kalman filter's σ_q raised, the integral weight raised (to keep the
  accuracy), and both: RMS, the carriage's acceleration deviation, aborts with 2 % and 10 % of late commands on
  every seed;
* the plant family: every motion on the realistic profile with the plant files of ``config/plants/``, three
  times the encoder noise and drives at 0.6 of their acceleration (``drive_acceleration``), seed 0: closed and
  feed-forward-only RMS per joint, aborts, the lowest plant tension.

Every run is seeded, so the figures repeat exactly.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

import numpy as np

from marionette_control import _core
from marionette_control.lq.gains import GainDesign, design_gains
from marionette_control.model.library import marionette_arm as arm
from marionette_control.model.limits import from_description
from marionette_control.ocp.spec import load_spec
from marionette_control.ocp.spec_problem import solve_spec
from marionette_control.resources import config_file
from marionette_control.sim.offline_loop import run_loop
from marionette_control.sim.profile import HardwareProfile
from marionette_control.tracking.command_limits import CommandLimits
from marionette_control.tracking.controller import ControllerCore, ControllerOptions
from marionette_control.tracking.estimation import EstimatorNoise
from marionette_control.tracking.sample_checks import SampleChecks

REALISTIC = HardwareProfile.named("realistic")
FAMILY = {"forearm_heavy": dict(plant_model_file="plants/forearm_heavy.yaml"),
          "damping_x3": dict(plant_model_file="plants/damping_x3.yaml"),
          "hook_out_5mm": dict(plant_model_file="plants/hook_out_5mm.yaml"),
          "encoder noise ×3": dict(noise_std=tuple(3 * np.asarray(REALISTIC.noise_std))),
          "drives' acceleration ×0.6": dict(drive_acceleration=0.6)}


def optimized(name: str):
    spec = load_spec(config_file("optimize", "marionette_arm_wave.yaml"), {"motion.name": name})
    return solve_spec(spec).trajectory


def unguarded_core(desc, options: ControllerOptions) -> ControllerCore:
    """The default core but for the tension guard (no strings given)."""
    limits = from_description(desc)
    return ControllerCore(desc.model, lambda q: np.asarray(q, dtype=float), CommandLimits.from_limits(limits),
                          SampleChecks(desc.model, limits, options.plausibility), options)


def run(trajectory, profile, desc, limits, guard: bool = True, **options) -> dict:
    opts = ControllerOptions(command_delay_steps=profile.command_delay_steps, **options)
    core = None
    if not guard:
        core = unguarded_core(desc, opts)
        core.load_trajectory(trajectory, "motion")
    return run_loop(trajectory, profile, opts, desc, core=core).record(limits)


def rms(record: dict) -> str:
    return " / ".join(f"{v['rms_deg']:.2f}" for v in record["errors"].values())


def start_and_guard(trajectory, desc, limits, seeds) -> None:
    print("| variant | seed | RMS shoulder / elbow [°] | lowest tension [N] (first 0.1 s) | guard ticks |")
    print("|---|---|---|---|---|")
    for label, kw in (("default", {}), ("no start blend", dict(start_blend=0.0)), ("no tension guard",
                                                                                 dict(guard=False)),
                      ("feed-forward only", dict(feedback=False))):
        for seed in seeds:
            r = run(trajectory, REALISTIC.replace(seed=seed), desc, limits, **kw)
            state = "abort" if r["aborted"] else rms(r)
            print(f"| {label} | {seed} | {state} | {r['tension_min_n']['motion']:.3f} "
                  f"({r['tension_min_start_n']:.3f}) | {r['guarded_ticks']} |", flush=True)


def quiet_commands(trajectory, desc, limits) -> None:
    print("| plant | acceleration budget | RMS shoulder / elbow [°] | carriage, string: acceleration - plan's, RMS "
          "(max) [m/s²] |")
    print("|---|---|---|---|")
    for plant, profile in (("realistic", REALISTIC), ("encoder noise ×3", REALISTIC.replace(**FAMILY[
            "encoder noise ×3"]))):
        for budget in (0.0, 5.0, 2.0):
            r = run(trajectory, profile, desc, limits, feedback_acceleration=budget)
            state = "abort" if r["aborted"] else rms(r)
            acc = ", ".join(f"{c['acceleration_deviation_rms']:.2f} ({c['acceleration_deviation_max']:.1f})"
                            for c in r["commands"].values())
            print(f"| {plant} | {budget:g} | {state} | {acc} |", flush=True)


#: the quieter estimate traded against the integral's weight (docs/tracking.md, "Quiet commands"): (label,
#: EstimatorNoise changes, GainDesign changes)
QUIETER = (("default", {}, {}),
           ("σ_q 8e-3, w_i 5e6", dict(measurement=8e-3), dict(angle_integral=5e6)),
           ("σ_q 8e-3", dict(measurement=8e-3), {}),
           ("σ_q 4e-3", dict(measurement=4e-3), {}),
           ("w_i 5e6", {}, dict(angle_integral=5e6)))
LATE = {"2 % late": dict(command_jitter_steps=1, command_jitter_probability=0.02),
        "10 % late": dict(command_jitter_steps=1, command_jitter_probability=0.10)}


def quieter_estimate(trajectory, desc, limits, seeds) -> None:
    """The wave with a Kalman filter that trusts the model more (a larger σ_q) and/or the integral weight raised:
    chatter, RMS, and aborts with late commands on every seed."""
    system = _core.DiscreteSystem(desc.model, trajectory.dt)
    print("| estimator and integral | realistic: RMS [°], carriage acceleration - plan's RMS [m/s²] | "
          + " | ".join(f"{k}: aborts of {len(seeds)}" for k in LATE) + " |")
    print("|---|---|" + "---|" * len(LATE))
    for label, noise, design in QUIETER:
        traj = design_gains(system, trajectory.X, trajectory.U, dataclasses.replace(
            GainDesign.of(trajectory), **design)).attach(trajectory)
        estimator = dataclasses.replace(EstimatorNoise(), **noise)
        r = run(traj, REALISTIC, desc, limits, noise=estimator)
        aborts = [sum(run(traj, REALISTIC.replace(seed=seed, **late), desc, limits, noise=estimator)["aborted"]
                      for seed in seeds) for late in LATE.values()]
        print(f"| {label} | {rms(r)}, {r['commands']['carriage']['acceleration_deviation_rms']:.2f} | "
              + " | ".join(str(a) for a in aborts) + " |", flush=True)


def plant_family(motions: dict, desc, limits) -> None:
    print("| motion | plant | closed loop RMS shoulder / elbow [°] | feed-forward only | lowest tension closed "
          "(feed-forward only) [N] | guard ticks |")
    print("|---|---|---|---|---|---|")
    for name, trajectory in motions.items():
        for plant, changes in FAMILY.items():
            profile = REALISTIC.replace(**changes)
            c = run(trajectory, profile, desc, limits)
            o = run(trajectory, profile, desc, limits, feedback=False)
            worse = [j for j in c["errors"] if c["errors"][j]["rms_deg"] > o["errors"][j]["rms_deg"]]
            state = "abort" if c["aborted"] else rms(c) + (f" (worse: {', '.join(worse)})" if worse else "")
            print(f"| {name} | {plant} | {state} | {'abort' if o['aborted'] else rms(o)} | "
                  f"{c['tension_min_n']['motion']:.3f} ({o['tension_min_n']['motion']:.3f}) | "
                  f"{c['guarded_ticks']} |", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--motions", default="wave,bow,figure_eight")
    ap.add_argument("--seeds", default="0,1,2")
    args = ap.parse_args(argv)
    desc = arm.load_description()
    limits = from_description(desc)
    motions = {name: optimized(name) for name in args.motions.split(",")}
    seeds = [int(s) for s in args.seeds.split(",")]
    wave = motions.get("wave") or optimized("wave")
    print("Start and tension guard, the wave on the realistic profile:")
    start_and_guard(wave, desc, limits, seeds)
    print("\nQuiet commands, the wave, seed 0:")
    quiet_commands(wave, desc, limits)
    print("\nA quieter estimate, the wave (late commands on every seed):")
    quieter_estimate(wave, desc, limits, seeds)
    print("\nThe plant family, seed 0:")
    plant_family(motions, desc, limits)
    return 0


if __name__ == "__main__":
    sys.exit(main())
