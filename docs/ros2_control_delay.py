"""What a ros2_control controller plugin would gain here: the wave with one period of command delay against none.

    .venv/bin/python docs/ros2_control_delay.py [--seeds 0 1 2] [--json out/reproductions/ros2_control_delay.json]

The table of docs/ros2_control.md. Today the controller is a node behind ros2_control's forward position
controller: the command answering the joint state of cycle k is written at cycle k + 1, one period late
(``command_delay_steps: 1``, docs/tracking.md). As a controller plugin its update would read the state interfaces
and write the command interfaces in the same cycle: no period late (``command_delay_steps: 0``). Everything else
stays: the stand-in's realistic profile (its plant, servo drives, encoders) and the plant family of config/plants/
(the realistic profile with each of those plant files).

For each plant and delay: the constrained wave (config/optimize/marionette_arm_wave.yaml, the optimizer's gains
recomputed for the delay with the spec's gain design), tracked offline with the controller node's tick logic on
the stand-in (``marionette_control.sim.offline_loop.run_loop``), closed loop and feed-forward only (``feedback:
false``): RMS of the true angles (shoulder / elbow, over the motion), the ratio feed-forward / closed loop on the
joint where feed-forward errs most, and the plant's lowest string tension in the closed loop (0.5 N is the minimum
the optimizer keeps; the stand-in's string goes slack rather than push, and the time it is slack follows). Each
cell is the worst over the noise seeds. Every run is seeded: the table repeats exactly.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from marionette_control import _core  # noqa: E402
from marionette_control.lq.gains import GainDesign, design_gains  # noqa: E402
from marionette_control.ocp.spec import load_spec  # noqa: E402
from marionette_control.ocp.spec_problem import solve_spec  # noqa: E402
from marionette_control.resources import config_file  # noqa: E402
from marionette_control.sim.offline_loop import run_loop  # noqa: E402
from marionette_control.sim.profile import HardwareProfile  # noqa: E402
from marionette_control.tracking.controller import ControllerOptions  # noqa: E402

#: the plants: the realistic profile's own, then the family of config/plants/
PLANTS = {"realistic": "", "forearm +25 %": "plants/forearm_heavy.yaml", "damping ×3": "plants/damping_x3.yaml",
          "hook +5 mm": "plants/hook_out_5mm.yaml"}
#: the controller as a node behind the forward position controller (today), and as a controller plugin
DELAYS = {"node, today": 1, "plugin": 0}


def wave_for_delays() -> dict:
    """{delay: the constrained wave with gains for that command delay} (one optimization)."""
    result = solve_spec(load_spec(config_file("optimize", "marionette_arm_wave.yaml")))
    traj = result.trajectory
    design = GainDesign.of(traj)
    system = _core.DiscreteSystem(result.problem.system.model, traj.dt)
    return {d: design_gains(system, traj.X, traj.U, replace(design, delay_steps=d)).attach(traj)
            for d in sorted(set(DELAYS.values()))}


def measure(traj, plant: str, delay: int, seed: int) -> dict:
    """Closed loop and feed-forward only on the realistic profile with ``plant`` and ``delay``."""
    profile = HardwareProfile.named("realistic").replace(command_delay_steps=delay, seed=seed)
    if plant:
        profile = profile.replace(plant_model_file=plant)
    out = {}
    for name, feedback in (("closed", True), ("open", False)):
        run = run_loop(traj, profile, ControllerOptions(command_delay_steps=delay, feedback=feedback))
        e = np.degrees(run.angle_errors())
        motion = run.k <= run.N
        out[name] = {"rms_deg": np.sqrt(np.mean(e ** 2, axis=0)).tolist(), "max_deg": np.abs(e).max(axis=0).tolist(),
                     "aborted": bool(run.aborted), "lowest_tension_N": float(run.tension[motion].min()),
                     "slack_s": float(np.count_nonzero(run.slack[motion].any(axis=1)) * run.dt)}
    worst = int(np.argmax(out["open"]["rms_deg"]))
    out["ratio"] = out["open"]["rms_deg"][worst] / out["closed"]["rms_deg"][worst]
    return out


def table(seeds=(0, 1, 2), plants=PLANTS, delays=DELAYS) -> list[dict]:
    """One row per plant and delay: the worst over ``seeds`` of every figure."""
    trajectories = wave_for_delays()
    rows = []
    for plant_name, plant in plants.items():
        for delay_name, delay in delays.items():
            runs = [measure(trajectories[delay], plant, delay, seed) for seed in seeds]
            rows.append({"plant": plant_name, "controller": delay_name, "command_delay_steps": delay,
                         "closed_rms_deg": np.max([r["closed"]["rms_deg"] for r in runs], axis=0).tolist(),
                         "open_rms_deg": np.max([r["open"]["rms_deg"] for r in runs], axis=0).tolist(),
                         "closed_max_deg": np.max([r["closed"]["max_deg"] for r in runs], axis=0).tolist(),
                         "ratio": min(r["ratio"] for r in runs),
                         "lowest_tension_N": min(r["closed"]["lowest_tension_N"] for r in runs),
                         "slack_s": max(r["closed"]["slack_s"] for r in runs),
                         "aborted": sum(r["closed"]["aborted"] or r["open"]["aborted"] for r in runs),
                         "seeds": list(seeds)})
    return rows


def markdown(rows: list[dict]) -> str:
    lines = ["| plant | command delay | closed loop RMS (max) | feed-forward RMS | ratio | lowest tension (slack) | "
             "aborted |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        closed = " / ".join(f"{a:.3f}° ({m:.2f}°)" for a, m in zip(r["closed_rms_deg"], r["closed_max_deg"]))
        opened = " / ".join(f"{a:.3f}°" for a in r["open_rms_deg"])
        lines.append(f"| {r['plant']} | {r['command_delay_steps']} ({r['controller']}) | {closed} | {opened} | "
                     f"{r['ratio']:.2f} | {r['lowest_tension_N']:.2f} N ({r['slack_s']:.2f} s) | {r['aborted']} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="noise seeds (default 0 1 2)")
    p.add_argument("--json", type=Path, default=ROOT / "out" / "reproductions" / "ros2_control_delay.json",
                   help="where the rows are written")
    args = p.parse_args(argv)
    rows = table(tuple(args.seeds))
    print(markdown(rows))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(rows, indent=1))
    print(f"\n(rows in {args.json})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
