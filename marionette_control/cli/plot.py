"""marionette-plot: PNG figures of an optimized trajectory and of its simulations.

    marionette-plot TRAJ.npz [--simulation SIM.npz] [-o DIR]
                    [--only convergence,configurations,inputs,drives,tension,error]
    python -m marionette_control.cli.plot ...     (same)

Figures (written to DIR, default: beside the trajectory file, named ``<stem>_<figure>.png``):

* ``convergence`` — cost and descent norm |Dh∘δξ| against the iteration, every stage of the run
  (embedding rounds, relaxed problem, final optimization) in turn (like thesis Fig. 6.7);
* ``configurations`` — desired against optimized configurations, one panel each (like Fig. 6.10);
  configurations the motion does not prescribe (e.g. the carriage) are drawn without a desired curve;
* ``inputs`` — the synthesized inputs (like Fig. 6.11), with the drives' range limits when known;
* ``drives`` — speed and acceleration of every kinematic configuration (the drives), as the
  trajectory commands them step by step (the first step from the initial state included), with
  their limits;
* ``tension`` — the tension of every string (from the constraint forces of each step, recomputed
  with the model the file records) with its minimum; a string cannot push, so T < 0 is
  physically impossible;
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

from marionette_control import _core
from marionette_control.cli.simulate import load_simulation
from marionette_control.model import library
from marionette_control.model.library.source import ModelSource
from marionette_control.model.strings import string_constraints
from marionette_control.trajectory import Trajectory, TrajectoryError

FIGURES = ("convergence", "configurations", "inputs", "drives", "tension", "error")


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


def _limits(traj) -> dict:
    """The hardware's limits the trajectory was optimized within (trajectory metadata; {} for older files)."""
    return ((traj.info.get("constraints") or {}).get("set") or {}).get("limits") or {}


def _limit_lines(ax, f, lo, hi):
    for v in (lo, hi):
        if v is not None:
            ax.axhline(f * v, color="r", ls=":", lw=1)


def plot_inputs(traj, path: Path) -> Path:
    plt = _pyplot()
    drives = _limits(traj).get("drives") or {}
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
        lim = drives.get(cfg) or {}
        if lim.get("min") is not None or lim.get("max") is not None:
            _limit_lines(ax, f, lim.get("min"), lim.get("max"))
            ax.set_title(f"range [{lim.get('min')}, {lim.get('max')}]", fontsize=8, loc="right")
        ax.set_ylabel(f"{name} [{unit}]" if unit else name)
        ax.grid(True, alpha=0.3)
    axes[-1, 0].set_xlabel("t [s]")
    axes[0, 0].set_title(f"{traj.model_name}: synthesized inputs", loc="left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def drive_motion(traj) -> dict:
    """{configuration: (speed (N,), acceleration (N,))} the trajectory commands: s_k = (ρ_{k+1} − ρ_k)/Δt,
    a_k = (s_k − v_k)/Δt with ρ_{k+1} = u_k and v_k the state's velocity (ocp/constraints.py)."""
    names = list(traj.state_names)
    out = {}
    for j, name in enumerate(traj.input_names):
        if not name.endswith("_next"):
            continue
        cfg = name[:-5]
        rho = traj.X[:-1, names.index(cfg)]
        v = traj.X[:-1, names.index(f"v_{cfg}")]
        s = (traj.U[:, j] - rho) / traj.dt
        out[cfg] = (s, (s - v) / traj.dt)
    return out


def plot_drives(traj, path: Path) -> Path:
    plt = _pyplot()
    drives = _limits(traj).get("drives") or {}
    units = traj.info.get("config_units") or {}
    motion = drive_motion(traj)
    if not motion:
        raise ValueError(f"model '{traj.model_name}' has no kinematic configuration (drive) to plot")
    fig, axes = plt.subplots(len(motion), 2, figsize=(11, 2.2 * len(motion) + 0.8), sharex=True, squeeze=False)
    t = traj.t[:-1]
    for i, (cfg, (s, a)) in enumerate(motion.items()):
        f, unit = _scale(units.get(cfg, ""))
        lim = drives.get(cfg) or {}
        for ax, y, what, key, u in ((axes[i, 0], s, "speed", "max_velocity", f"{unit}/s"),
                                    (axes[i, 1], a, "acceleration", "max_acceleration", f"{unit}/s²")):
            ax.plot(t, f * y, color="C2")
            if lim.get(key) is not None:
                _limit_lines(ax, f, -lim[key], lim[key])
                peak = np.abs(y).max() / lim[key]
                ax.set_title(f"limit ±{lim[key]:g}; peak {100 * peak:.0f} % of it", fontsize=8, loc="right")
            ax.set_ylabel(f"{cfg} {what} [{u}]", fontsize=8)
            ax.grid(True, alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("t [s] (step k from t_k)")
    fig.suptitle(f"{traj.model_name}: commanded drive speed and acceleration", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def string_tensions(traj, model=None) -> dict:
    """{string: tension (N,) [N]}: T_k = 2 L_k λ_k / Δt of every step (the core's constraint forces)."""

    model = model or _trajectory_model(traj)
    traj.check_model(model)
    system = _core.DiscreteSystem(model, traj.dt)
    Lam = system.constraint_forces_trajectory(traj.X, traj.U)
    names = list(model.constraint_names)
    return {s.name: 2.0 * traj.X[:-1, model.config_index(s.length)] * Lam[:, names.index(s.name)] / traj.dt
            for s in string_constraints(model)}


def _trajectory_model(traj):
    source = traj.info.get("model_source")
    if source:
        return ModelSource.from_dict(source).build()
    return library.get(traj.model_name)


def plot_tension(traj, path: Path, model=None) -> Path:
    plt = _pyplot()
    tensions = string_tensions(traj, model)
    if not tensions:
        raise ValueError(f"model '{traj.model_name}' has no string to plot the tension of")
    minimum = _limits(traj).get("min_tension") or {}
    fig, axes = plt.subplots(len(tensions), 1, figsize=(8, 1.9 * len(tensions) + 0.8), sharex=True, squeeze=False)
    t = traj.t[:-1]
    for i, (name, T) in enumerate(tensions.items()):
        ax = axes[i, 0]
        ax.plot(t, T, color="C4")
        ax.axhline(0.0, color="k", lw=0.6)
        if name in minimum:
            ax.axhline(minimum[name], color="r", ls=":", lw=1)
            ax.set_title(f"minimum {minimum[name]:g} N; lowest {T.min():.3g} N", fontsize=8, loc="right")
        ax.set_ylabel(f"{name} [N]", fontsize=8)
        ax.grid(True, alpha=0.3)
    axes[-1, 0].set_xlabel("t [s]")
    axes[0, 0].set_title(f"{traj.model_name}: string tension (T < 0: the string would have to push)", loc="left",
                         fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_error(sim_path, path: Path) -> Path:
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
    p.add_argument("--only", help=f"comma-separated subset of {', '.join(FIGURES)} (default: all that apply: drives "
                                  "for models with kinematic configurations, tension for models with strings)")
    return p


def main(argv=None) -> int:
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
    if not args.only:   # all that apply to this model
        if not any(n.endswith("_next") for n in traj.input_names):
            which.remove("drives")
        if not _limits(traj).get("min_tension"):
            which.remove("tension")
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
            elif w == "drives":
                written.append(plot_drives(traj, target))
            elif w == "tension":
                written.append(plot_tension(traj, target))
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
