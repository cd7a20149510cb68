"""The main job's figures: arm angles (thesis Fig. 6.10), actuators with their limits (Fig. 6.11), error after a push.

Every curve of a run is the simulator's true state (:class:`~.analysis.Evaluated`), never the controller's
estimate; the commanded drive positions are the setpoints the controller sent, drawn at the step they are
for (the command of tick k moves the drives over step k + d, d the command delay, and ends it at k + d + 1).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np

from marionette_control.cli.main_job.analysis import Evaluated
from marionette_control.cli.plot import _limit_lines, _pyplot

STYLES = ("-", "--", "-.", ":")


def plot_angles(runs: dict[str, Evaluated], names: list, X_opt: np.ndarray, X_des: np.ndarray, dt: float,
                path: Path, title: str) -> Path:
    """Per arm joint: desired, optimized and every run's true angle (left), the runs' errors (right).

    runs : {label: Evaluated}; names : the dynamic configurations' names; X_opt, X_des (N+1, ≥nd)."""
    plt = _pyplot()
    nd = len(names)
    fig, ax = plt.subplots(nd, 2, figsize=(13, 3.1 * nd), sharex=True, squeeze=False)
    t = np.arange(len(X_opt)) * dt
    for i, name in enumerate(names):
        a, e = ax[i, 0], ax[i, 1]
        a.plot(t, np.degrees(X_des[:, i]), "k:", lw=1.2, label="desired (animator)")
        a.plot(t, np.degrees(X_opt[:, i]), color="0.55", lw=2.5, label="optimized (feasible)")
        for j, (label, ev) in enumerate(runs.items()):
            a.plot(ev.t, np.degrees(ev.q[:, i]), color=f"C{j}", ls=STYLES[j % 4], lw=1, label=f"{label} (true)")
            rms = float(np.degrees(np.sqrt(np.mean(ev.errors[:, i] ** 2))))
            e.plot(ev.t, np.degrees(ev.errors[:, i]), color=f"C{j}", lw=1, label=f"{label}: RMS {rms:.2f}°")
        e.axhline(0.0, color="k", lw=0.5)
        a.set_ylabel(f"{name} [deg]")
        e.set_ylabel(f"{name} error [deg]")
        a.legend(loc="best", fontsize=7)
        e.legend(loc="best", fontsize=7)
        a.grid(True, alpha=0.3)
        e.grid(True, alpha=0.3)
    for a in ax[-1]:
        a.set_xlabel("t [s]")
    ax[0, 0].set_title("true arm angles of the simulated arm", loc="left", fontsize=9)
    ax[0, 1].set_title("true angle − optimized", loc="left", fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_actuators(runs: dict[str, Evaluated], model, limits, X_opt: np.ndarray, dt: float, delay: int,
                   path: Path, title: str) -> Path:
    """Per drive (columns): position with its range, speed and acceleration with their limits — optimized, the
    first run's commands and every run's true drive; last row: the plant's string tension with its minimum."""
    plt = _pyplot()
    nd, nk, nu = model.nd, model.nk, model.nu
    fig = plt.figure(figsize=(13, 11))
    grid = fig.add_gridspec(4, nk)
    t_opt = np.arange(len(X_opt)) * dt
    first = next(iter(runs))
    for j, drive in enumerate(limits.kinematic):
        rho_opt = X_opt[:, nd + j]
        axes = [fig.add_subplot(grid[r, j]) for r in range(3)]
        v_opt = np.diff(rho_opt) / dt
        for ax, y, tt in ((axes[0], rho_opt, t_opt), (axes[1], v_opt, t_opt[1:]),
                          (axes[2], np.diff(v_opt) / dt, t_opt[2:])):
            ax.plot(tt, y, color="0.55", lw=2.5, label="optimized")
        run = runs[first].run
        rk = run.k.astype(float)
        cmd = run.u[:, nu + j]
        tc = (rk + delay + 1) * dt
        cont = np.diff(run.k) == 1
        axes[0].plot(tc, cmd, color="k", lw=0.8, ls="--", label=f"commanded ({first})")
        vc = np.diff(cmd) / dt
        axes[1].plot(tc[1:][cont], vc[cont], color="k", lw=0.8, ls="--", label=f"commanded ({first})")
        ac = np.diff(vc) / dt
        axes[2].plot(tc[2:][cont[1:] & cont[:-1]], ac[cont[1:] & cont[:-1]], color="k", lw=0.8, ls="--",
                     label=f"commanded ({first})")
        for i, (label, ev) in enumerate(runs.items()):
            step, rho = ev.step, ev.run.truth_q[:, nd + j]
            ts = step * dt
            ok = np.diff(step) == 1
            v = np.diff(rho) / dt
            axes[0].plot(ts, rho, color=f"C{i}", lw=1, ls=STYLES[i % 4], label=f"{label} (true)")
            axes[1].plot(ts[1:][ok], v[ok], color=f"C{i}", lw=1, ls=STYLES[i % 4], label=f"{label} (true)")
            both = ok[1:] & ok[:-1]
            axes[2].plot(ts[2:][both], (np.diff(v) / dt)[both], color=f"C{i}", lw=1, ls=STYLES[i % 4],
                         label=f"{label} (true)")
        _limit_lines(axes[0], 1.0, limits.lower[j], limits.upper[j])
        _limit_lines(axes[1], 1.0, -limits.max_velocity[j], limits.max_velocity[j])
        _limit_lines(axes[2], 1.0, -limits.max_acceleration[j], limits.max_acceleration[j])
        for ax, what in zip(axes, ("position [m]", "speed [m/s]", "acceleration [m/s²]")):
            ax.set_ylabel(f"{drive} {what}", fontsize=8)
            ax.grid(True, alpha=0.3)
        axes[0].set_title(f"range {limits.lower[j]:g} … {limits.upper[j]:g} m, speed ±{limits.max_velocity[j]:g} "
                          f"m/s, acceleration ±{limits.max_acceleration[j]:g} m/s² (red)", fontsize=8, loc="left")
        axes[0].legend(loc="best", fontsize=7)
    ax = fig.add_subplot(grid[3, :])
    for i, (label, ev) in enumerate(runs.items()):
        for name, (tt, T) in ev.tension.items():
            ax.plot(tt, T, color=f"C{i}", lw=1, ls=STYLES[i % 4], label=f"{label}: {name} (plant), lowest "
                    f"{T.min():.2f} N")
    for name, minimum in zip(limits.strings, limits.min_tension):
        ax.axhline(minimum, color="r", ls=":", lw=1)
    ax.set_ylabel("string tension [N]", fontsize=8)
    ax.set_xlabel("t [s]")
    ax.set_title(f"tension of the simulated plant's string (minimum {', '.join(f'{m:g}' for m in limits.min_tension)} "
                 "N, red)", fontsize=8, loc="left")
    ax.legend(loc="best", fontsize=7)
    ax.grid(True, alpha=0.3)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_push_error(runs: dict[str, Evaluated], push_time: float, recovery: dict[str, Optional[float]],
                    path: Path, title: str) -> Path:
    """The largest joint error of every run against time, the 1° band, the push and each run's recovery."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(11, 4))
    for i, (label, ev) in enumerate(runs.items()):
        worst = np.degrees(np.max(np.abs(ev.errors), axis=1))
        r = recovery.get(label)
        text = "never within 1° again" if r is None else f"within 1° from {r:.2f} s after the push"
        ax.plot(ev.t, worst, color=f"C{i}", lw=1, label=f"{label}: {text}")
        if r is not None:
            ax.axvline(push_time + r, color=f"C{i}", ls="--", lw=0.8)
    ax.axhline(1.0, color="r", ls=":", lw=1, label="1° (the recovery bound)")
    ax.axvline(push_time, color="k", lw=1, label=f"push at {push_time:g} s")
    ax.set_yscale("log")
    ax.set_xlabel("t [s]")
    ax.set_ylabel("max over joints |true − optimized| [deg]")
    ax.legend(loc="best", fontsize=8)
    ax.grid(True, alpha=0.3, which="both")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
