"""marionette-plot: PNG figures of an optimized trajectory and of its simulations.

    marionette-plot TRAJ.npz [--simulation SIM.npz] [-o DIR] [--only convergence,configurations,inputs,error]
    python -m marionette_control.cli.plot ...     (same)

Figures (written to DIR, default: beside the trajectory file, named ``<stem>_<figure>.png``):

* ``convergence`` — cost and descent norm |Dh∘δξ| against the iteration, every stage of the run
  (embedding rounds, relaxed problem, final optimization) in turn (like thesis Fig. 6.7);
* ``configurations`` — desired against optimized configurations, one panel each (like Fig. 6.10);
  configurations the motion does not prescribe (e.g. the carriage) are drawn without a desired curve;
* ``inputs`` — the synthesized inputs (like Fig. 6.11), with the actuator limits when known;
* ``error`` (needs ``--simulation`` from marionette-simulate) — norm of the configuration error of
  the closed- and open-loop runs from the perturbed state (like seed 001 Fig. 6), and the
  tracked configurations of both runs against the optimized and desired ones (like Fig. 4).

Exit status: 0 written, 2 bad arguments or files.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

FIGURES = ("convergence", "configurations", "inputs", "error")


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _scale(unit: str):
    """(factor, label) for plotting a configuration: radians as degrees."""
    return (180.0 / np.pi, "deg") if unit == "rad" else (1.0, unit)


def plot_convergence(traj, path: Path) -> Path:
    plt = _pyplot()
    info = traj.info
    stages = [(s["stage"], s.get("history", [])) for s in info.get("stages", [])]
    stages.append(("optimization", info.get("history", [])))
    fig, (ax_c, ax_d) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True)
    offset = 0
    for i, (name, hist) in enumerate(stages):
        if not hist:
            continue
        it = offset + np.arange(len(hist))
        cost = np.array([h["cost"] for h in hist])
        dn = np.array([h["descent_norm"] for h in hist])
        newton = np.array([h["method"] == "newton" for h in hist])
        line, = ax_c.semilogy(it, cost, "o-", ms=3, label=name)
        ax_d.semilogy(it, np.maximum(dn, 1e-300), "o-", ms=3, color=line.get_color())
        if newton.any():
            ax_d.semilogy(it[newton], np.maximum(dn[newton], 1e-300), "s", ms=6, mfc="none",
                          color=line.get_color())
        if i:
            for ax in (ax_c, ax_d):
                ax.axvline(offset - 0.5, color="0.7", lw=0.8)
        offset += len(hist)
    tol = info.get("optimizer", {}).get("tolerance")
    if tol:
        ax_d.axhline(tol, color="k", ls="--", lw=0.8, label=f"tolerance {tol:g}")
    ax_c.set_ylabel("cost h(ξ)")
    ax_d.set_ylabel("descent norm |Dh∘δξ|")
    ax_d.set_xlabel("iteration (all stages in turn; squares: Newton)")
    ax_c.legend(fontsize=8)
    ax_d.legend(fontsize=8)
    ax_c.set_title(f"{traj.model_name}: convergence ({'converged' if info.get('converged') else info.get('reason', '')}"
                   f", final cost {info.get('cost', float('nan')):.6g})")
    ax_c.grid(True, which="both", alpha=0.3)
    ax_d.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_configurations(traj, path: Path) -> Path:
    plt = _pyplot()
    info = traj.info
    desired = info.get("desired") or {}
    configs = desired.get("configs") or traj.state_names[: _nq(traj)]
    tracked = set(desired.get("tracked") or [])
    Qd = np.asarray(desired["q"]) if "q" in desired else None
    units = info.get("config_units") or {}
    t = traj.t
    n = len(configs)
    fig, axes = plt.subplots(n, 1, figsize=(8, 1.9 * n + 0.8), sharex=True, squeeze=False)
    for i, name in enumerate(configs):
        ax = axes[i, 0]
        f, unit = _scale(units.get(name, ""))
        if Qd is not None and name in tracked:
            ax.plot(t, f * Qd[:, i], "--", color="0.4", label="desired")
        ax.plot(t, f * traj.X[:, i], color="C0", label="optimized")
        ax.set_ylabel(f"{name} [{unit}]" if unit else name)
        ax.grid(True, alpha=0.3)
        if i == 0:
            ax.legend(fontsize=8, loc="best")
    axes[-1, 0].set_xlabel("t [s]")
    axes[0, 0].set_title(f"{traj.model_name}: desired and optimized configurations")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_inputs(traj, path: Path) -> Path:
    plt = _pyplot()
    limits = (traj.info.get("summary") or {}).get("actuator_limits") or {}
    units = traj.info.get("config_units") or {}
    n = len(traj.input_names)
    fig, axes = plt.subplots(n, 1, figsize=(8, 1.9 * n + 0.8), sharex=True, squeeze=False)
    t = traj.t[1:]  # U[k] sets the kinematic configuration at t[k+1]
    for i, name in enumerate(traj.input_names):
        ax = axes[i, 0]
        cfg = name[:-5] if name.endswith("_next") else None
        unit = units.get(cfg, "") if cfg else ""
        f, unit = _scale(unit)
        ax.plot(t, f * traj.U[:, i], color="C1")
        if cfg in limits:
            lo, hi = limits[cfg]["limits"]
            for v in (lo, hi):
                ax.axhline(f * v, color="r", ls=":", lw=1)
            ax.set_title(f"limits [{lo:g}, {hi:g}]", fontsize=8, loc="right")
        ax.set_ylabel(f"{name} [{unit}]" if unit else name)
        ax.grid(True, alpha=0.3)
    axes[-1, 0].set_xlabel("t [s]")
    axes[0, 0].set_title(f"{traj.model_name}: synthesized inputs", loc="left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_error(sim_path, path: Path) -> Path:
    from marionette_control.cli.simulate import load_simulation

    plt = _pyplot()
    data, meta = load_simulation(sim_path)
    t = data["t"]
    names = meta["state_names"]
    cfgs = meta["error_configs"]
    cols = [names.index(c) for c in cfgs]
    desired = meta.get("desired") or {}
    tracked = list(desired.get("tracked") or cfgs)
    units = meta.get("config_units") or {}
    fig, axes = plt.subplots(1 + len(tracked), 1, figsize=(8, 2.4 * (1 + len(tracked)) + 0.6), sharex=True,
                             squeeze=False)
    ax = axes[0, 0]
    for key, label, color in (("X_closed", "closed loop", "C0"), ("X_open", "open loop", "C3")):
        e = np.linalg.norm(data[key][:, cols] - data["X_ref"][:, cols], axis=1)
        ax.semilogy(t, np.maximum(e, 1e-16), color=color, label=label)
    ax.set_ylabel(f"|q - q_ref| ({', '.join(cfgs)})", fontsize=8)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(f"{meta['model_name']}: error from the perturbed initial state")
    Qd = np.asarray(desired["q"]) if "q" in desired else None
    for j, name in enumerate(tracked):
        ax = axes[1 + j, 0]
        i = names.index(name)
        f, unit = _scale(units.get(name, ""))
        if Qd is not None:
            ax.plot(t, f * Qd[:, desired["configs"].index(name)], "--", color="0.5", label="desired (infeasible)")
        ax.plot(t, f * data["X_ref"][:, i], color="k", lw=1, label="optimized (feasible reference)")
        ax.plot(t, f * data["X_closed"][:, i], color="C0", label="closed loop")
        ax.plot(t, f * data["X_open"][:, i], color="C3", label="open loop")
        ax.set_ylabel(f"{name} [{unit}]" if unit else name)
        ax.grid(True, alpha=0.3)
        if j == 0:
            ax.legend(fontsize=7)
    axes[-1, 0].set_xlabel("t [s]")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _nq(traj) -> int:
    return sum(1 for n in traj.state_names if not n.startswith(("p_", "v_")))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="marionette-plot", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trajectory", help="trajectory file (.npz, from marionette-optimize)")
    p.add_argument("--simulation", help="simulation file (.npz, from marionette-simulate -o) for the error figure")
    p.add_argument("-o", "--output-dir", help="directory of the PNGs (default: the trajectory file's)")
    p.add_argument("--only", help=f"comma-separated subset of {', '.join(FIGURES)} (default: all that apply)")
    return p


def main(argv=None) -> int:
    from marionette_control.control.trajectory import Trajectory, TrajectoryError

    parser = build_parser()
    args = parser.parse_args(argv)
    which = list(FIGURES)
    if args.only:
        which = [w.strip() for w in args.only.split(",") if w.strip()]
        bad = [w for w in which if w not in FIGURES]
        if bad:
            parser.error(f"--only: unknown figure(s) {', '.join(bad)} (figures: {', '.join(FIGURES)})")
        if "error" in which and not args.simulation:
            parser.error("the error figure needs --simulation SIM.npz (from marionette-simulate -o)")
    elif not args.simulation:
        which.remove("error")
    try:
        traj = Trajectory.load(args.trajectory)
    except TrajectoryError as e:
        print(f"marionette-plot: error: {e}", file=sys.stderr)
        return 2
    out = Path(args.output_dir) if args.output_dir else Path(args.trajectory).resolve().parent
    out.mkdir(parents=True, exist_ok=True)
    stem = Path(args.trajectory).stem
    written = []
    try:
        for w in which:
            target = out / f"{stem}_{w}.png"
            if w == "convergence":
                written.append(plot_convergence(traj, target))
            elif w == "configurations":
                written.append(plot_configurations(traj, target))
            elif w == "inputs":
                written.append(plot_inputs(traj, target))
            else:
                written.append(plot_error(args.simulation, target))
    except (ValueError, KeyError) as e:
        print(f"marionette-plot: error: {e}", file=sys.stderr)
        return 2
    for p in written:
        print(f"[plot] wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
