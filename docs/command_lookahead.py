"""Commands that carry the next setpoints against forward position commands: docs/tracking.md, "Commands that carry
the next setpoints".

    .venv/bin/python docs/command_lookahead.py [--motions wave,bow,reach_point]   (about 1.5 minutes)

Optimizes each library motion on the wave's spec (``marionette-optimize config/optimize/marionette_arm_wave.yaml
--set motion.name=NAME``) and tracks it offline on the realistic stand-in (``marionette_control.sim.offline_loop``)
with the default controller, ``command_interface`` forward_position and joint_trajectory, three noise seeds, and
prints

1. with 0 / 2 % / 10 % of commands 1 (or 1–2) steps late: the plant's lowest string tension during the motion, the
   ticks below the 0.5 N minimum, aborts and the RMS errors (ranges over the seeds);
2. with 2 / 3 / 5 / 8 joint states lost, or queued and delivered back to back with the next, from 0.1 s into the
   motion (driven cycle by cycle as ``run_loop`` does, no command going out for a missing sample): the lowest
   tension and the ticks below 0.5 N per seed.

Every run is seeded, so the figures repeat on any machine.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from marionette_control.cli import optimize  # noqa: E402
from marionette_control.model.library import marionette_arm as ma  # noqa: E402
from marionette_control.model.limits import from_description  # noqa: E402
from marionette_control.resources import config_file  # noqa: E402
from marionette_control.sim.offline_loop import run_loop  # noqa: E402
from marionette_control.sim.profile import HardwareProfile  # noqa: E402
from marionette_control.sim.simulator import SimulatedArm  # noqa: E402
from marionette_control.tracking.controller import ControllerOptions, make_core  # noqa: E402
from marionette_control.trajectory import Trajectory  # noqa: E402

INTERFACES = ("forward_position", "joint_trajectory")
SEEDS = (0, 1, 2)
MINIMUM = 0.5   # N, the string's min_tension in config/marionette_arm.yaml
NS = 1_000_000_000


def optimized(name: str, directory: Path) -> Trajectory:
    out = directory / f"{name}.npz"
    args = [str(config_file("optimize", "marionette_arm_wave.yaml")), "--set", f"motion.name={name}", "-o", str(out),
            "--progress", "quiet"]
    with contextlib.redirect_stdout(io.StringIO()):
        if optimize.main(args) != 0:
            raise SystemExit(f"{name}: the optimizer failed")
    return Trajectory.load(out, ma.marionette_arm())


def late_commands(name: str, trajectory: Trajectory, limits) -> None:
    for share, steps in ((0.0, 1), (0.02, 1), (0.02, 2), (0.1, 1), (0.1, 2)):
        for interface in INTERFACES:
            runs = []
            for seed in SEEDS:
                profile = HardwareProfile.named("realistic", seed=seed, command_jitter_steps=steps,
                                                command_jitter_probability=share)
                r = run_loop(trajectory, profile, ControllerOptions(command_interface=interface))
                record, tension = r.record(limits), r.tension[r.k <= r.N]
                runs.append((record["tension_min_n"]["motion"], int(np.sum(tension < MINIMUM)), record["aborted"],
                             record["errors"]["shoulder"]["rms_deg"], record["errors"]["elbow"]["rms_deg"]))
            t, below, aborted, shoulder, elbow = zip(*runs)
            print(f"{name:12s} {share:4.0%} late, 1-{steps} steps  {interface:16s} lowest {min(t):.3f}-{max(t):.3f} N, "
                  f"{min(below)}-{max(below)} ticks below, {sum(aborted)} aborts, RMS {min(shoulder):.3f}-"
                  f"{max(shoulder):.3f} / {min(elbow):.3f}-{max(elbow):.3f} deg", flush=True)


def interrupted(trajectory: Trajectory, seed: int, interface: str, n: int, mode: str, at: float = 0.1) -> tuple:
    """(lowest tension [N], ticks below the minimum) of a run whose joint states of ticks at/dt … at/dt + n − 1 are
    lost, or (``mode`` "queued") delivered back to back with the next one."""
    desc = ma.load_description()
    core = make_core(desc, ControllerOptions(command_interface=interface))
    core.load_trajectory(trajectory, "interrupted")
    arm = SimulatedArm(HardwareProfile.named("realistic", seed=seed), trajectory.dt, nominal=desc,
                       q0=trajectory.X[0, :desc.model.nq])
    dt_ns, nu, first = int(round(trajectory.dt * NS)), desc.model.nu, int(round(at / trajectory.dt))
    settle, queue, tensions = 20, [], []
    for cycle in range(settle + trajectory.N + 1):
        if cycle == settle and not core.start()[0]:
            raise SystemExit("the controller did not start")
        samples = [(arm.measure(), NS + cycle * dt_ns, cycle)]
        if cycle >= settle and first <= cycle - settle < first + n:
            queue += samples if mode == "queued" else []
            samples = []
        elif queue:
            samples, queue = queue + samples, []
        for q, stamp, sampled in samples:
            res = core.on_joint_state(q, stamp, NS + cycle * dt_ns)
            if res.lookahead is not None:   # the command's steps are those of the sample it answers
                points = np.vstack([res.command[nu:], res.lookahead[:, nu:]])
                arm.receive_command(points, sampled + core.delay + np.arange(len(points)))
            elif res.command is not None and core.lookahead is not None:
                arm.receive_stop()
            elif res.command is not None:
                arm.receive_command(res.command[nu:])
        arm.step()
        if cycle >= settle:
            tensions.append(arm.tension()[0])
    return min(tensions), int(np.sum(np.array(tensions) < MINIMUM))


def lost_samples(name: str, trajectory: Trajectory) -> None:
    for mode in ("lost", "queued"):
        for n in (2, 3, 5, 8):
            for interface in INTERFACES:
                runs = [interrupted(trajectory, seed, interface, n, mode) for seed in SEEDS]
                text = "  ".join(f"{t:.2f} N ({b} below)" for t, b in runs)
                print(f"{name:12s} {n} {mode:6s} {interface:16s} {text}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--motions", default="wave,bow,reach_point", help="library motions, comma-separated")
    args = ap.parse_args(argv)
    limits = from_description(ma.load_description())
    with tempfile.TemporaryDirectory() as d:
        motions = {name: optimized(name, Path(d)) for name in args.motions.split(",")}
    for name, trajectory in motions.items():
        late_commands(name, trajectory, limits)
    for name, trajectory in motions.items():
        lost_samples(name, trajectory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
