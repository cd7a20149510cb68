"""What a bag holds: topics, counts, rates, gaps, stamp problems; plots of recorded joint trajectories.

:func:`summarize` reads a bag once and returns, per topic, the message count, the span and
mean rate of its log times, the median period, the largest gap and every gap longer than
``gap_factor`` median periods (and at least ``min_gap`` seconds); for messages with a
``header`` it also counts stamps that repeat or go backwards (what the controller rejects as
``duplicate_stamp`` / ``out_of_order``). :func:`format_summary` prints it as a table.

:func:`plot_joint_trajectories` draws every recorded joint position of ``/joint_states``
against header stamps, with the trajectory file's configurations over it (the trajectory's
t = 0 placed at the controller's first tick, read from its ``~/tracking`` topic, unless an
alignment is given) and the controller's commands on the kinematic joints; joint-state
gaps are shaded.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Optional

import numpy as np

from marionette_control.bags.bagio import NS, MessageTypes, bag_info, read_bag
from marionette_control.bags.replay import TRACKING, first_tick_stamp, recorded_ticks
from marionette_control.trajectory import Trajectory


@dataclasses.dataclass
class Gap:
    """A gap between consecutive messages of a topic: start (log time, s from the bag start) and length (s)."""

    start: float
    length: float


@dataclasses.dataclass
class TopicSummary:
    name: str
    msgtype: str
    count: int
    qos: str
    first: float = math.nan  # s from the bag start (log time)
    last: float = math.nan
    rate: float = math.nan  # messages per second over [first, last]
    median_period: float = math.nan
    max_gap: float = math.nan
    gaps: list = dataclasses.field(default_factory=list)
    duplicate_stamps: int = 0
    out_of_order_stamps: int = 0
    has_header: bool = False


@dataclasses.dataclass
class BagSummary:
    path: Path
    start_ns: int
    duration: float
    message_count: int
    size_bytes: int
    topics: list
    custom_data: dict

    def topic(self, name: str) -> TopicSummary:
        for t in self.topics:
            if t.name == name:
                return t
        raise KeyError(name)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["path"] = str(self.path)
        return d


def _qos_text(offers) -> str:
    if not offers:
        return "-"
    parts = sorted({f"{o.reliability.name.lower()}/{o.durability.name.lower()}" for o in offers})
    return ",".join(parts)


def summarize(bag, gap_factor: float = 3.0, min_gap: float = 0.0) -> BagSummary:
    """Per-topic counts, rates, gaps and stamp problems of a bag (see the module docstring)."""
    info = bag_info(bag)
    times: dict[str, list] = {t: [] for t in info.topics}
    stamps: dict[str, list] = {t: [] for t in info.topics}
    types = MessageTypes(share_dirs=[])
    has_header: dict[str, bool] = {}
    for m in read_bag(info.path, types=types):
        times[m.topic].append(m.log_time)
        if m.msgtype not in has_header:  # deserialize only messages that carry a std_msgs/Header
            fields = types.store.fielddefs[m.msgtype][1]
            has_header[m.msgtype] = bool(fields) and fields[0][0] == "header"
        if has_header[m.msgtype]:
            s = m.msg.header.stamp
            stamps[m.topic].append(int(s.sec) * NS + int(s.nanosec))
    t0 = info.start_ns
    out = []
    for name in sorted(info.topics):
        ti = info.topics[name]
        ts = TopicSummary(name, ti.msgtype, len(times[name]), _qos_text(ti.offered_qos))
        t = np.asarray(times[name], dtype=np.int64)
        if t.size:
            ts.first, ts.last = (t[0] - t0) / NS, (t[-1] - t0) / NS
        if t.size >= 2:
            d = np.diff(t) / NS
            span = (t[-1] - t[0]) / NS
            ts.rate = (t.size - 1) / span if span > 0 else math.inf
            ts.median_period = float(np.median(d))
            i = int(np.argmax(d))
            ts.max_gap = float(d[i])
            limit = max(gap_factor * ts.median_period, min_gap)
            ts.gaps = [Gap((t[j] - t0) / NS, float(d[j])) for j in np.flatnonzero(d > limit)]
        s = np.asarray(stamps[name], dtype=np.int64)
        if s.size:
            ts.has_header = True
            ds = np.diff(s)
            ts.duplicate_stamps = int(np.sum(ds == 0))
            ts.out_of_order_stamps = int(np.sum(ds < 0))
        out.append(ts)
    size = sum(f.stat().st_size for f in info.path.iterdir() if f.is_file())
    return BagSummary(info.path, info.start_ns, info.duration, info.message_count, size, out, info.custom_data)


def format_summary(s: BagSummary, max_gaps: int = 5) -> str:
    """Human-readable table of a BagSummary."""
    lines = [f"bag        {s.path}",
             f"size       {s.size_bytes / 1024:.1f} KiB, {s.message_count} messages, {s.duration:.3f} s "
             f"from {s.start_ns / NS:.3f} s"]
    if s.custom_data:
        lines.append("custom     " + ", ".join(f"{k}={v}" for k, v in sorted(s.custom_data.items())))
    w = max([len(t.name) for t in s.topics] + [5])
    lines.append(f"{'topic':<{w}}  {'count':>6}  {'rate Hz':>8}  {'period ms':>9}  {'max gap ms':>10}  "
                 f"{'gaps':>4}  {'dup':>3}  {'back':>4}  {'qos':<18}  type")
    for t in s.topics:
        def f(v, scale=1.0, fmt="{:.2f}"):
            return "-" if not math.isfinite(v) else fmt.format(v * scale)
        stamp = (f"{t.duplicate_stamps:>3}  {t.out_of_order_stamps:>4}" if t.has_header else f"{'-':>3}  {'-':>4}")
        lines.append(f"{t.name:<{w}}  {t.count:>6}  {f(t.rate):>8}  {f(t.median_period, 1e3, '{:.3f}'):>9}  "
                     f"{f(t.max_gap, 1e3, '{:.3f}'):>10}  {len(t.gaps):>4}  {stamp}  {t.qos:<18}  {t.msgtype}")
    for t in s.topics:
        if t.gaps:
            shown = ", ".join(f"{g.length * 1e3:.1f} ms at {g.start:.3f} s" for g in t.gaps[:max_gaps])
            more = f" (+{len(t.gaps) - max_gaps} more)" if len(t.gaps) > max_gaps else ""
            lines.append(f"gaps in {t.name}: {shown}{more}")
    return "\n".join(lines)


# ============================================================================================ plot


def joint_state_arrays(bag, topic: str = "/joint_states") -> tuple[np.ndarray, dict]:
    """(stamps in s (n,), {joint name: positions (n,) with NaN where a message lacks the joint})."""
    msgs = [m.msg for m in read_bag(bag, [topic])]
    t = np.array([int(m.header.stamp.sec) * NS + int(m.header.stamp.nanosec) for m in msgs], dtype=np.int64) / NS
    names = []
    for m in msgs:
        for n in m.name:
            if n not in names:
                names.append(n)
    pos = {n: np.full(len(msgs), np.nan) for n in names}
    for i, m in enumerate(msgs):
        for n, v in zip(m.name, m.position):
            pos[n][i] = v
    return t, pos


def plot_joint_trajectories(bag, out, trajectory=None, align_stamp: Optional[float] = None,
                            joint_names: Optional[dict] = None, title: Optional[str] = None) -> Path:
    """PNG of the recorded joint positions against a trajectory file's configurations.

    trajectory : Trajectory or path (optional); align_stamp : stamp (s) of the trajectory's t = 0
    (default: the first tick in ``~/tracking``, else the first joint state); joint_names :
    {hardware joint: configuration name} (default: the same names).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    info = bag_info(bag)
    t, pos = joint_state_arrays(bag)
    if not len(t):
        raise ValueError(f"{info.path}: no /joint_states messages to plot")
    traj = Trajectory.load(trajectory) if isinstance(trajectory, (str, Path)) else trajectory
    if align_stamp is None:
        s0 = first_tick_stamp(bag) if TRACKING in info.topics else None
        align_stamp = s0 / NS if s0 is not None else float(t[0])
    mapping = dict(joint_names or {})
    names = list(pos)
    fig, axes = plt.subplots(len(names), 1, figsize=(9, 2.1 * len(names) + 0.8), sharex=True, squeeze=False)
    ticks = recorded_ticks(bag) if TRACKING in info.topics else []
    order = np.argsort(t, kind="stable")
    dt_med = float(np.median(np.diff(t[order]))) if len(t) > 1 else 0.0
    for ax, name in zip(axes[:, 0], names):
        ax.plot(t - align_stamp, pos[name], ".", ms=2.5, color="C0", label="recorded")
        cfg = mapping.get(name, name)
        if traj is not None and cfg in traj.state_names:
            j = traj.state_names.index(cfg)
            ax.plot(traj.t, traj.X[:, j], "-", lw=1.2, color="C1", label="trajectory")
        if ticks and name in ticks[0].joints:  # the command as sent, by hardware joint name
            j = ticks[0].joints.index(name)
            ts = np.array([t.stamp_ns for t in ticks]) / NS - align_stamp
            ax.step(ts, [t.command[j] for t in ticks], where="post", lw=0.9, color="C2", label="command")
        if dt_med > 0:
            d = np.diff(t[order])
            for j in np.flatnonzero(d > 3 * dt_med):
                ax.axvspan(t[order][j] - align_stamp, t[order][j + 1] - align_stamp, color="C3", alpha=0.15, lw=0)
        ax.set_ylabel(name)
        ax.grid(True, alpha=0.3)
    handles = {}
    for ax in axes[:, 0]:
        for h, lbl in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lbl, h)
    axes[0, 0].legend(handles.values(), handles.keys(), loc="upper right", fontsize=8, ncol=3)
    axes[-1, 0].set_xlabel(f"time from the trajectory start (s; stamp {align_stamp:.3f} s)")
    fig.suptitle(title or f"{info.path.name}: recorded joint states" + (" against the trajectory" if traj else ""))
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
