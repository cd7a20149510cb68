"""marionette-track-offline: the controller in closed loop with the simulated arm, without a ROS graph.

    marionette-track-offline TRAJ.npz [--model FILE] [--profile realistic|perfect] [--plant FILE]
                             [--hardware FIELD=VALUE ...] [-p PARAM=VALUE ...] [--design FIELD=VALUE ...] [--open-loop]
                             [--json PATH] [--csv PATH]
    python -m marionette_control.cli.track_offline ...     (same)

Runs :func:`marionette_control.sim.offline_loop.run_loop`: the controller node's tick logic
(built from its model file, ``config/marionette_arm.yaml`` unless ``--model``, and the controller parameters) against the hardware
stand-in's :class:`~marionette_control.sim.simulator.SimulatedArm` with a hardware
profile, cycle by cycle as ros2_control runs them, and prints the RMS and largest error of the
arm's true angles against the trajectory (degrees), the plant string's lowest tension (during the motion, after it
and over its first 0.1 s) and time slack (the realistic profile's string is one-sided: it goes slack rather than
push, ``docs/simulator.md``), the ticks whose command the tension guard moved, and the RMS of the commanded drive
accelerations' deviation from the plan's (``LoopResult.record``).

* ``--model FILE`` is the controller's model file (its ``model_file`` parameter: ``-p model_file=FILE``; an absolute
  path or a name under ``config/``), e.g. the calibrated variant ``marionette-calibrate -o`` writes, whose
  re-optimized trajectory is made for it. The trajectory must be made for the controller's model.
* ``--plant FILE`` simulates this plant model (``--hardware plant_model_file=FILE``; relative names under
  ``config/``, e.g. the plant family's ``plants/damping_x3.yaml``).
* ``--hardware FIELD=VALUE`` changes a field of the profile (``HardwareProfile``: e.g.
  ``command_delay_steps=0``, ``noise_std=0.001``, ``plant_model_file=``, ``drive_mode=rate_limited``,
  ``seed=3``); tuples take comma-separated values.
* ``-p NAME=VALUE`` sets a controller parameter as ``ros2 param`` would (the node's names:
  ``estimator=legendre``, ``command_delay_steps=0``, ``estimator_noise.momentum=0.002``,
  ``constraints.elbow.trajectory=0.5``, ``feedback=false``, ...). Unless given,
  ``command_delay_steps`` follows the profile's.
* ``--design FIELD=VALUE`` recomputes the trajectory's gains with these ``GainDesign`` weights
  (``marionette_control.lq.gains``; the delay is the controller's), to tune them without the
  optimizer. Without it the file's gains are used (and refused when designed for another delay).
* ``--open-loop`` also runs feed-forward only (the same commands without the gains) and prints the
  ratio of the open- to the closed-loop RMS on the joint where open loop errs most.
* ``--json PATH`` writes the controller's model file, the profile, the controller parameters and per run (``closed_loop``, ``open_loop``)
  ``LoopResult.record``: ``errors`` ({joint: {rms_deg, max_deg}}), ``aborted``, ``abort_reason``, ``ticks``,
  ``tension_min_n`` and ``slack_s`` during the motion and after it, and the executed worst ``margins``
  (range, speed, acceleration per drive of the commands and of the drives' true motion, and the string's
  tension; :mod:`marionette_control.sim.margins`, as the main job's report).

Exit status: 0 run, 1 the controller refused or aborted, 2 bad arguments or file (a plant file included).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

import numpy as np

from marionette_control import _core
from marionette_control.lq.gains import GainDesign, check_gains, design_gains
from marionette_control.model.library import marionette_arm as arm
from marionette_control.model.limits import from_description
from marionette_control.resources import config_file
from marionette_control.sim.offline_loop import LoopResult, run_loop
from marionette_control.sim.plant import load_plant
from marionette_control.sim.profile import PROFILES, HardwareProfile
from marionette_control.tracking.controller_options import controller_options, controller_param_defaults, core_values
from marionette_control.trajectory import Trajectory, TrajectoryError


def _assignments(items: list, what: str) -> dict:
    out = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"{what}: expected NAME=VALUE, got {item!r}")
        out[name.strip()] = value.strip()
    return out


def _typed(text: str, like):
    """``text`` as the type of ``like`` (bool, int, float, tuple of floats, text)."""
    if isinstance(like, bool):
        if text.lower() not in ("true", "false"):
            raise ValueError(f"expected true or false, got {text!r}")
        return text.lower() == "true"
    if isinstance(like, int):
        return int(text)
    if isinstance(like, float):
        return float(text)
    if isinstance(like, tuple):
        return tuple(float(v) for v in text.split(","))
    return text


def build_profile(name: str, changes: dict) -> HardwareProfile:
    base = HardwareProfile.named(name)
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
    typed = {}
    for k, v in changes.items():
        if k not in fields:
            raise ValueError(f"--hardware: unknown HardwareProfile field {k!r} (fields: {', '.join(fields)})")
        typed[k] = _typed(v, fields[k])
    return base.replace(**typed)


def controller_values(params: dict, desc, profile: HardwareProfile) -> dict:
    """Typed controller parameter values: the node's names and types; command_delay_steps from the profile."""
    defaults = controller_param_defaults(desc)
    values = {"command_delay_steps": profile.command_delay_steps}
    for k, v in params.items():
        if k not in defaults:
            raise ValueError(f"-p: unknown controller parameter {k!r}")
        values[k] = _typed(v, defaults[k])
    return core_values(values)


def format_result(title: str, result: LoopResult, record: dict) -> str:
    """The human-readable lines of a run; ``record`` its :meth:`LoopResult.record`."""
    rows = [f"{title}: {len(result.k)} ticks, status: {result.status[1]}"]
    for name, s in record["errors"].items():
        rows.append(f"  {name:10s} RMS {s['rms_deg']:7.3f} deg   max {s['max_deg']:7.3f} deg")
    low, slack = record["tension_min_n"], record["slack_s"]
    parts = [f"{low[p]:.3f} N {label}" for p, label in (("motion", "during the motion"), ("after_end", "after it"))
             if low[p] is not None]
    if parts:
        rows.append(f"  string: lowest tension {', '.join(parts)}; slack {slack['motion']:.3f} s during the motion, "
                    f"{slack['after_end']:.3f} s after it")
    if record["tension_min_start_n"] is not None:
        rows.append(f"  first 0.1 s: lowest tension {record['tension_min_start_n']:.3f} N; tension guard acted on "
                    f"{record['guarded_ticks']} ticks")
    rows.append("  commanded acceleration - plan's, RMS (max): " + ", ".join(
        f"{n} {c['acceleration_deviation_rms']:.2f} ({c['acceleration_deviation_max']:.1f})"
        for n, c in record["commands"].items()))
    if result.fault_counts:
        rows.append("  faults: " + ", ".join(f"{k} {v}" for k, v in sorted(result.fault_counts.items())))
    return "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="marionette-track-offline", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trajectory", help="trajectory file (.npz) made for the controller's model (--model)")
    ap.add_argument("--model", metavar="FILE", help="the controller's model file (-p model_file=FILE; absolute or "
                    "under config/, e.g. a calibrated variant; default marionette_arm.yaml)")
    ap.add_argument("--profile", default="realistic", choices=sorted(PROFILES), help="hardware profile")
    ap.add_argument("--plant", metavar="FILE", help="plant model file (--hardware plant_model_file=FILE; relative "
                    "names under config/, e.g. plants/damping_x3.yaml)")
    ap.add_argument("--hardware", action="append", metavar="FIELD=VALUE", help="change a profile field")
    ap.add_argument("-p", "--param", action="append", metavar="NAME=VALUE", help="controller parameter")
    ap.add_argument("--design", action="append", metavar="FIELD=VALUE", help="recompute the gains (GainDesign)")
    ap.add_argument("--open-loop", action="store_true", help="also run feed-forward only and compare")
    ap.add_argument("--json", metavar="PATH", help="write the report as JSON (per run: errors, abort, string, margins)")
    ap.add_argument("--csv", metavar="PATH", help="write k, true and estimated states, commands per tick")
    args = ap.parse_args(argv)
    try:
        params = _assignments(args.param, "-p")
        if args.model is not None:
            if "model_file" in params:
                raise ValueError("--model and -p model_file=... both name the controller's model; give one")
            params["model_file"] = args.model
        desc = arm.load_description(config_file(params.get("model_file") or "marionette_arm.yaml"))
        traj = Trajectory.load(args.trajectory, desc.model)
        hardware = _assignments(args.hardware, "--hardware")
        if args.plant is not None:
            if "plant_model_file" in hardware:
                raise ValueError("--plant and --hardware plant_model_file=... both name the plant; give one")
            hardware["plant_model_file"] = args.plant
        profile = build_profile(args.profile, hardware)
        load_plant(profile, desc)   # a plant file that cannot be the arm: a bad argument
        values = controller_values(params, desc, profile)
        options = controller_options(values, desc)
        design_changes = _assignments(args.design, "--design")
        if design_changes:
            base = GainDesign(delay_steps=options.command_delay_steps)
            unknown = [k for k in design_changes if not hasattr(base, k)]
            if unknown:
                raise ValueError(f"--design: unknown GainDesign field(s) {', '.join(unknown)}")
            typed = {k: _typed(v, getattr(base, k)) for k, v in design_changes.items()}
            system = _core.DiscreteSystem(desc.model, traj.dt)
            traj = design_gains(system, traj.X, traj.U, dataclasses.replace(base, **typed)).attach(traj)
        check_gains(traj, options.command_delay_steps)
    except (TrajectoryError, ValueError, OSError) as e:
        print(f"marionette-track-offline: {e}", file=sys.stderr)
        return 2
    try:
        closed = run_loop(traj, profile, options, desc)
        opened = run_loop(traj, profile, dataclasses.replace(options, feedback=False), desc) if args.open_loop else None
    except (RuntimeError, ValueError) as e:
        print(f"marionette-track-offline: {e}", file=sys.stderr)
        return 1
    print(f"profile {profile.name}: " + ", ".join(f"{k}={v}" for k, v in profile.as_dict().items() if k != "name"))
    limits = from_description(desc)
    report = {"model_file": str(desc.path), "profile": profile.as_dict(), "controller": values,
              "closed_loop": closed.record(limits)}
    print(format_result("closed loop", closed, report["closed_loop"]))
    if opened is not None:
        report["open_loop"] = opened.record(limits)
        print(format_result("feed-forward only (open loop)", opened, report["open_loop"]))
        o, c = report["open_loop"]["errors"], report["closed_loop"]["errors"]
        joint = max(o, key=lambda n: o[n]["rms_deg"])
        ratio = o[joint]["rms_deg"] / max(c[joint]["rms_deg"], 1e-300)
        print(f"open / closed loop RMS on {joint} (where open loop errs most): {ratio:.2f}")
        report["ratio"] = {"joint": joint, "open_over_closed": ratio}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    if args.csv:
        names = traj.state_names
        header = ["k"] + [f"true.{n}" for n in names] + [f"estimate.{n}" for n in names] + \
                 [f"command.{n}" for n in traj.input_names]
        np.savetxt(args.csv, np.column_stack([closed.k, closed.X_true, closed.X_hat, closed.commands]),
                   delimiter=",", header=",".join(header), comments="")
    return 1 if closed.aborted else 0


if __name__ == "__main__":
    sys.exit(main())
