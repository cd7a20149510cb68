"""The hardware stand-in's effects on the optimized wave, open loop (docs/simulator.md, "Measured effects").

    .venv/bin/python docs/simulator_effects.py [--img-dir docs/img] [--out-dir out/reproductions]

Optimizes the wave (config/motions/wave.yaml) on the nominal arm, then replays its commands open loop
(the command of tick k is received in cycle k, as the controller sends it) through
``SimulatedArm`` with one effect at a time and with the realistic profile, and reports the true arm
angles' error against the optimized trajectory and how closely the drives followed the command
stream. Writes docs/img/simulator_drives.png (the carriage under the two acceleration-limited drive
laws) and out/reproductions/simulator.json, and prints the table quoted in docs/simulator.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from marionette_control.model import library  # noqa: E402
from marionette_control.ocp import request as P  # noqa: E402
from marionette_control.ocp.projection import ProjectionOptimizer  # noqa: E402
from marionette_control.sim.profile import HardwareProfile  # noqa: E402
from marionette_control.sim.simulator import SimulatedArm  # noqa: E402

QUIET = dict(noise_std=(0.0,), encoder_resolution=(0.0,))
VARIANTS = {   # name: profile (noise and counts do not change an open-loop run: they are measurement only)
    "perfect (today's simulator)": HardwareProfile.named("perfect"),
    "command delay 1 step": HardwareProfile.named("perfect", command_delay_steps=1),
    "drives: cyclic_position": HardwareProfile.named("perfect", drive_mode="cyclic_position"),
    "drives: profile_position (old limit_acceleration)": HardwareProfile.named("perfect",
                                                                              drive_mode="profile_position"),
    "plant marionette_arm_plant.yaml": HardwareProfile.named("perfect", plant_model_file="marionette_arm_plant.yaml"),
    "realistic (all of them)": HardwareProfile.named("realistic", **QUIET),
}


def replay(profile: HardwareProfile, X: np.ndarray, U: np.ndarray, dt: float) -> dict:
    """True configurations (N+1, nq) and drive positions of an open-loop replay of U through the stand-in."""
    sim = SimulatedArm(profile, dt, q0=X[0, :4])
    Q = [sim.q.copy()]
    for k in range(U.shape[0]):
        sim.measure()
        sim.receive_command(U[k, -2:])
        fault = sim.step()
        if fault is not None:
            raise RuntimeError(f"{profile.name}: step {k} failed: {fault.message}")
        Q.append(sim.q.copy())
    return {"Q": np.array(Q)}


def stats(e: np.ndarray) -> dict:
    return {"rms": float(np.sqrt(np.mean(e ** 2))), "max": float(np.max(np.abs(e)))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--img-dir", type=Path, default=ROOT / "docs" / "img")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "out" / "reproductions")
    args = ap.parse_args(argv)
    model = library.get("marionette_arm")
    prob = P.build_problem(model, motion_name="wave")
    res = ProjectionOptimizer(prob.system, prob.cost, prob.options).optimize(prob.X0, prob.U0)
    X, U, dt = res.X, res.U, prob.dt
    commanded = U[:, -2:]
    acc = np.diff(np.vstack([X[:1, 2:4], commanded]), 2, axis=0) / dt ** 2
    out = {"steps": int(U.shape[0]), "dt": dt,
           "commanded_peak_acceleration": {"carriage": float(np.abs(acc[:, 0]).max()),
                                           "string_length": float(np.abs(acc[:, 1]).max())},
           "variants": {}}
    runs = {}
    print("| stand-in | shoulder RMS / max | elbow RMS / max | carriage following RMS / max | "
          "string following RMS / max |")
    print("|---|---|---|---|---|")
    for name, profile in VARIANTS.items():
        Q = replay(profile, X, U, dt)["Q"]
        runs[name] = Q
        err = np.degrees(Q[:, :2] - X[:, :2])
        follow = (Q[1:, 2:4] - commanded) * 1e3   # mm: drive position against the setpoint it was sent for
        row = {"shoulder_deg": stats(err[:, 0]), "elbow_deg": stats(err[:, 1]),
               "carriage_following_mm": stats(follow[:, 0]), "string_following_mm": stats(follow[:, 1])}
        out["variants"][name] = row
        print(f"| {name} | {row['shoulder_deg']['rms']:.2f}° / {row['shoulder_deg']['max']:.2f}° | "
              f"{row['elbow_deg']['rms']:.2f}° / {row['elbow_deg']['max']:.2f}° | "
              f"{row['carriage_following_mm']['rms']:.2f} / {row['carriage_following_mm']['max']:.2f} mm | "
              f"{row['string_following_mm']['rms']:.2f} / {row['string_following_mm']['max']:.2f} mm |")
    print("commanded peak acceleration [m/s²]:", out["commanded_peak_acceleration"])

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = dt * np.arange(U.shape[0] + 1)
    cyc = runs["drives: cyclic_position"]
    pro = runs["drives: profile_position (old limit_acceleration)"]
    n = int(round(2.0 / dt))
    fig, ax = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    ax[0].plot(t[1:n + 1], commanded[:n, 0], "k--", label="commanded (optimized wave)")
    ax[0].plot(t[:n + 1], cyc[:n + 1, 2], label="cyclic_position (default)")
    ax[0].plot(t[:n + 1], pro[:n + 1, 2], label="profile_position (stops at every setpoint)")
    ax[0].set_ylabel("carriage [m]")
    ax[0].legend(fontsize=8)
    ax[1].plot(t[1:n + 1], 1e3 * (cyc[1:n + 1, 2] - commanded[:n, 0]), label="cyclic_position")
    ax[1].plot(t[1:n + 1], 1e3 * (pro[1:n + 1, 2] - commanded[:n, 0]), label="profile_position")
    ax[1].set_ylabel("carriage − command [mm]")
    ax[1].set_xlabel("t [s]")
    ax[1].legend(fontsize=8)
    fig.suptitle("Acceleration-limited drives (15 m/s²) on the optimized wave's carriage commands")
    fig.tight_layout()
    args.img_dir.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.img_dir / "simulator_drives.png", dpi=100)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "simulator.json").write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
