"""Issue 12's targets on the realistic stand-in, measured on the constrained wave: docs/tracking.md, "The targets".

    .venv/bin/python docs/tracking_targets.py [--out out/reproductions/tracking_targets.json]

Optimizes the wave as the optimizer node does today (constraints on: every drive limit and the string tension
hold along it) and tracks it offline with the controller node's tick logic on the hardware stand-in
(``marionette_control.sim.offline_loop``), closed loop and feed-forward only (``feedback: false``), and prints
the tables quoted in docs/tracking.md:

1. the realistic default, three noise seeds: the errors of the true angles, and the ratio of feed-forward-only
   to closed-loop RMS on the joint where feed-forward only errs most;
2. where the error comes from: the one-period command delay alone, then with each other effect of the profile
   (drives, encoders, plant model) added alone;
3. the estimate's bias on the realistic plant against the closed loop's mean error, with and without the
   integral action;
4. gain designs around the default (angle weight, drive-acceleration weight, per joint; integral action on the
   angles with the Kalman filter's measurement noise) on the realistic profile, with 1 mrad of joint-encoder
   noise, and with 2 % and 10 % of commands a cycle late (the machine's jitter the main job meets), worst of
   three seeds;
5. the runs aborted with 10 % of commands late over twelve seeds, for the previous default and the integral
   designs around the default;
6. the recovery of the LQR alone from docs/mpc.md's push on the forearm (several forces and times).

Every run is seeded, so the figures repeat on any machine.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))
sys.path.insert(0, str(ROOT))

from tracking_measurements import fmt, wave, write_json  # noqa: E402

from marionette_control import _core  # noqa: E402
from marionette_control.tracking.controller import ControllerOptions  # noqa: E402
from marionette_control.tracking.estimation import EstimatorNoise  # noqa: E402
from marionette_control.lq.gains import GainDesign, design_gains  # noqa: E402
from marionette_control.sim.offline_loop import run_loop, scripted_push  # noqa: E402
from marionette_control.sim.profile import HardwareProfile  # noqa: E402
from marionette_control.model.library import marionette_arm as arm  # noqa: E402

SEEDS = (0, 1, 2)
REALISTIC = HardwareProfile.named("realistic")
DELAY = HardwareProfile.named("perfect", command_delay_steps=1)
SOURCES = {
    "delay alone": DELAY,
    "delay + drives (cyclic_position)": DELAY.replace(drive_mode="cyclic_position"),
    "delay + encoders (counts and noise)": DELAY.replace(encoder_resolution=REALISTIC.encoder_resolution,
                                                        noise_std=REALISTIC.noise_std),
    "delay + plant model": DELAY.replace(plant_model_file=REALISTIC.plant_model_file),
    "realistic (all)": REALISTIC,
}
SCENARIOS = {
    "realistic": REALISTIC,
    "1 mrad joint noise": REALISTIC.replace(noise_std=(1e-3, 1e-3) + REALISTIC.noise_std[2:]),
    "2 % late commands": REALISTIC.replace(command_jitter_steps=1, command_jitter_probability=0.02),
    "10 % late commands": REALISTIC.replace(command_jitter_steps=1, command_jitter_probability=0.1),
}


PREVIOUS = GainDesign(drive_acceleration=3e-4, angle_integral=0.0)  # the default before integral action
NOISE_1 = EstimatorNoise(measurement=1e-3)
#: name: (gain design, the Kalman filter's noise model)
DESIGNS = {
    "without integral: angles 1e3, acc. 3e-4, 1 mrad (previous default)": (PREVIOUS, NOISE_1),
    "without integral: angles 1e4, acc. 3e-4, 1 mrad": (replace(PREVIOUS, dynamic_configuration=1e4), NOISE_1),
    "without integral: shoulder 1e4, elbow 5e3, acc. 5e-4, 1 mrad":
        (GainDesign(dynamic_configuration={"shoulder": 1e4, "elbow": 5e3}, drive_acceleration=5e-4, angle_integral=0.0),
         NOISE_1),
    "integral 1e5, acc. 3e-4, 1 mrad": (replace(PREVIOUS, angle_integral=1e5), NOISE_1),
    "integral 1e6, acc. 3e-4, 1 mrad": (replace(PREVIOUS, angle_integral=1e6), NOISE_1),
    "integral 1e6, acc. 1e-3, 3 mrad": (GainDesign(drive_acceleration=1e-3, angle_integral=1e6),
                                        EstimatorNoise(measurement=3e-3)),
    "integral 1e6, acc. 1e-2, 1 mrad": (GainDesign(drive_acceleration=1e-2, angle_integral=1e6), NOISE_1),
    "integral 2e6, acc. 1.5e-2, 2 mrad": (GainDesign(drive_acceleration=1.5e-2, angle_integral=2e6), EstimatorNoise()),
    "integral 2e6, acc. 2e-2, 2 mrad": (GainDesign(drive_acceleration=2e-2, angle_integral=2e6), EstimatorNoise()),
    "integral 2.5e6, acc. 2e-2, 2 mrad (default)": (GainDesign(), EstimatorNoise()),
    "integral 3e6, acc. 2e-2, 2 mrad": (GainDesign(drive_acceleration=2e-2, angle_integral=3e6), EstimatorNoise()),
    "integral 4e6, acc. 2e-2, 2 mrad": (GainDesign(drive_acceleration=2e-2, angle_integral=4e6), EstimatorNoise()),
}
#: rows of table 5: late commands over more seeds
LATE_DESIGNS = ("without integral: angles 1e3, acc. 3e-4, 1 mrad (previous default)",
                "integral 2e6, acc. 1.5e-2, 2 mrad", "integral 2e6, acc. 2e-2, 2 mrad",
                "integral 2.5e6, acc. 2e-2, 2 mrad (default)", "integral 3e6, acc. 2e-2, 2 mrad",
                "integral 4e6, acc. 2e-2, 2 mrad")
LATE_SEEDS = tuple(range(12))
#: rows of table 6 (pushes) and the pushes: (force N, time s)
PUSH_DESIGNS = ("without integral: angles 1e3, acc. 3e-4, 1 mrad (previous default)",
                "integral 2e6, acc. 2e-2, 2 mrad", "integral 2.5e6, acc. 2e-2, 2 mrad (default)",
                "integral 3e6, acc. 2e-2, 2 mrad")
PUSHES = ((0.5, 5.6), (0.55, 5.6), (0.5, 3.0), (0.6, 5.6))


def closed_and_open(traj, profile, seeds=SEEDS, noise=EstimatorNoise()):
    """[(closed summary, open summary, closed run aborted)] over the seeds; ``noise``: the Kalman filter's."""
    out = []
    for seed in seeds:
        p = profile.replace(seed=seed)
        c = run_loop(traj, p, ControllerOptions(command_delay_steps=p.command_delay_steps, noise=noise))
        o = run_loop(traj, p, ControllerOptions(command_delay_steps=p.command_delay_steps, feedback=False))
        out.append((c.summary(), o.summary(), c.aborted))
    return out


def ratio(closed, opened):
    worst = max(opened, key=lambda n: opened[n]["rms_deg"])
    return worst, opened[worst]["rms_deg"] / closed[worst]["rms_deg"]


def final_table(traj) -> dict:
    print("\n1. realistic default, whole wave, RMS (max) shoulder / elbow [deg]")
    rows = []
    for seed, (c, o, _) in zip(SEEDS, closed_and_open(traj, REALISTIC)):
        joint, r = ratio(c, o)
        rows.append({"seed": seed, "closed_loop": c, "open_loop": o, "ratio": r, "ratio_joint": joint})
        print(f"   seed {seed}: closed {fmt(c)} | feed-forward only {fmt(o)} | open/closed on the {joint} {r:.2f}")
    return {"runs": rows}


def sources_table(traj) -> dict:
    print("\n2. where the error comes from (seed 0): closed | feed-forward only, RMS (max) shoulder / elbow [deg]")
    out = {}
    for name, profile in SOURCES.items():
        (c, o, _), = closed_and_open(traj, profile, (0,))
        out[name] = {"closed_loop": c, "open_loop": o}
        print(f"   {name:38s} {fmt(c)} | {fmt(o)}")
    return out


def bias_table(traj, system) -> dict:
    """Mean and spread of the estimate's error and of the closed loop's error on the realistic plant, with the
    default's integral action and with the previous default (no integral)."""
    print("\n3. realistic, seed 0, shoulder / elbow [deg]")
    out = {}
    previous = design_gains(system, traj.X, traj.U, PREVIOUS).attach(traj)
    for name, t, noise in (("default (integral)", traj, EstimatorNoise()), ("previous default", previous, NOISE_1)):
        r = run_loop(t, REALISTIC, ControllerOptions(noise=noise))
        sel = r.k <= r.N
        est = np.degrees(r.X_hat[sel, :2] - r.X_true[sel, :2])
        err = np.degrees(r.angle_errors())
        out[name] = {"estimate_minus_true_mean_deg": est.mean(0).tolist(),
                     "estimate_minus_true_std_deg": est.std(0).tolist(),
                     "closed_loop_error_mean_deg": err.mean(0).tolist(),
                     "closed_loop_error_std_deg": err.std(0).tolist()}
        print(f"   {name:20s} estimate − true: mean {est.mean(0)[0]:+.3f} / {est.mean(0)[1]:+.3f}, std "
              f"{est.std(0)[0]:.3f} / {est.std(0)[1]:.3f}; closed-loop error: mean {err.mean(0)[0]:+.3f} / "
              f"{err.mean(0)[1]:+.3f}, std {err.std(0)[0]:.3f} / {err.std(0)[1]:.3f}")
    return out


def designs_table(traj, system) -> dict:
    print("\n4. gain designs, worst of three seeds: RMS shoulder / elbow [deg] (max), open/closed ratio on the "
          "elbow; 'x n': n runs aborted (path tolerance)")
    print("   " + " " * 66 + " | ".join(f"{s:30s}" for s in SCENARIOS))
    out = {}
    for name, (design, noise) in DESIGNS.items():
        t = design_gains(system, traj.X, traj.U, design).attach(traj)
        row = {}
        for s, profile in SCENARIOS.items():
            runs = closed_and_open(t, profile, noise=noise)
            row[s] = {"shoulder_rms_deg": max(c["shoulder"]["rms_deg"] for c, _, _ in runs),
                      "elbow_rms_deg": max(c["elbow"]["rms_deg"] for c, _, _ in runs),
                      "max_deg": max(max(v["max_deg"] for v in c.values()) for c, _, _ in runs),
                      "ratio": min(ratio(c, o)[1] for c, o, _ in runs),
                      "aborted": sum(a for _, _, a in runs)}
        out[name] = row
        print(f"   {name:66s} " + " | ".join(
            f"{v['shoulder_rms_deg']:.3f} / {v['elbow_rms_deg']:.3f} ({v['max_deg']:5.2f}) {v['ratio']:.2f}"
            + (f" x{v['aborted']}" if v["aborted"] else "   ") for v in row.values()))
    return out


def late_table(traj, system) -> dict:
    """Runs aborted with 10 % of commands a cycle late, over :data:`LATE_SEEDS`."""
    print(f"\n5. 10 % late commands, {len(LATE_SEEDS)} seeds: runs aborted, worst RMS of the others")
    out = {}
    profile = SCENARIOS["10 % late commands"]
    for name in LATE_DESIGNS:
        design, noise = DESIGNS[name]
        t = design_gains(system, traj.X, traj.U, design).attach(traj)
        runs = [run_loop(t, profile.replace(seed=s), ControllerOptions(noise=noise)) for s in LATE_SEEDS]
        kept = [r.summary() for r in runs if not r.aborted]
        worst = max((v["rms_deg"] for c in kept for v in c.values()), default=float("nan"))
        out[name] = {"aborted": sum(r.aborted for r in runs), "runs": len(runs), "worst_rms_deg": worst}
        print(f"   {name:66s} {out[name]['aborted']:2d} of {len(runs)}, worst RMS of the others {worst:.3f}")
    return out


def push_table(traj, system) -> dict:
    """Recovery from docs/mpc.md's push (LQR alone, seed 0, no path tolerance so that a run is not cut short)."""
    print("\n6. pushes on the forearm (force N at time s), LQR alone: seconds until back within 1° to the end "
          "('-': never), largest error after the push [deg]")
    out = {}
    unbounded = {"path": {n: 0.0 for n in system.model.config_names}}
    for name in PUSH_DESIGNS:
        design, noise = DESIGNS[name]
        t = design_gains(system, traj.X, traj.U, design).attach(traj)
        row = {}
        for force, at in PUSHES:
            push = scripted_push(at, traj.dt, force)
            r = run_loop(t, REALISTIC, ControllerOptions(noise=noise, tolerances=unbounded), pushes=[push])
            row[f"{force:g} N at {at:g} s"] = {"recovery_s": r.recovery_time(push.tick),
                                             "max_deg": float(np.degrees(np.abs(r.angle_errors()[push.tick:]).max()))}
        out[name] = row
        print(f"   {name:66s} " + " | ".join(
            f"{k}: {'-' if v['recovery_s'] is None else format(v['recovery_s'], '.2f')} ({v['max_deg']:.1f})"
            for k, v in row.items()))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT.parent / "out" / "reproductions" / "tracking_targets.json"))
    args = ap.parse_args(argv)
    traj = wave()
    system = _core.DiscreteSystem(arm.load_description().model, traj.dt)
    shipped = design_gains(system, traj.X, traj.U, GainDesign()).attach(traj)  # what the optimizer ships
    report = {"final": final_table(shipped), "sources": sources_table(shipped), "bias": bias_table(shipped, system),
              "designs": designs_table(traj, system), "late": late_table(traj, system),
              "pushes": push_table(traj, system)}
    write_json(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
