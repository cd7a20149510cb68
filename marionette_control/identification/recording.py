"""Measured configurations and commands on the tick grid: what a calibration reads, and the checks it needs.

A recording is the arm's encoder readings q̃_k (N+1, nq) at t_k = t_0 + k Δt in the model's configuration order —
NaN rows where a sample is missing — and, when recorded, the commands sent (the drives' setpoints). Sources:

* a rosbag2 directory as the package's recorder writes it (:func:`from_bag`): ``/joint_states``
  (sensor_msgs/JointState, mapped onto the model by the hardware joint names of its model file,
  :mod:`marionette_control.model.joint_map`, stamped by their headers) and, if present, the command topic
  (std_msgs/Float64MultiArray, in the order of ``command_joints``);
* a table (:func:`from_table`): ``.npz`` with ``t`` (n,) and ``q`` (n, nq) (optional ``commands`` (n, nk)), or
  ``.csv`` with a header ``t,<configuration names…>`` (optional ``cmd_<drive>`` columns).

Samples are placed on the grid by their stamps (nearest tick; a second sample for one tick is a duplicate and
refused); ticks without a sample stay NaN and take no part in the nodes that would need them. The checks
(:meth:`Recording.check`) refuse, naming what is missing: a recording too short for the parameters, joints the
model does not have (a recording of another model), no motion at all.
"""

from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from marionette_control.bags.bagio import BagError, bag_info, read_bag
from marionette_control.model.joint_map import JointMap

NS = 1_000_000_000
JOINT_STATES = "/joint_states"
COMMANDS = "/forward_position_controller/commands"


class RecordingError(ValueError):
    """A recording a calibration cannot use; the message says what is missing and where."""


@dataclass
class Recording:
    """Measured configurations on the tick grid.

    dt : the grid's step [s]; t0 : time of sample 0 [s]; Q : (N+1, nq) configurations in ``config_names`` order
    (NaN: no sample); commands : (N+1, nk) the setpoint each tick's command sent (NaN: none), or None;
    source : where it came from (for the calibrated model file's comments).
    """

    dt: float
    t0: float
    Q: np.ndarray
    config_names: list
    commands: Optional[np.ndarray] = None
    source: str = ""
    notes: list = field(default_factory=list)

    @property
    def N(self) -> int:
        return len(self.Q) - 1

    @property
    def measured(self) -> np.ndarray:
        """(N+1,) True where the tick has a sample."""
        return np.all(np.isfinite(self.Q), axis=1)

    def held_fraction(self, tolerance: float = 1e-6) -> float:
        """The share of measured steps in which no configuration moved (a hold teaches the fit nothing of the
        dynamics)."""
        ok = self.measured
        d = np.abs(np.diff(self.Q, axis=0))
        both = ok[1:] & ok[:-1]
        if not both.any():
            return 1.0
        return float(np.mean(np.all(d[both] <= tolerance, axis=1)))

    def check(self, n_parameters: int, minimum_per_parameter: int = 20) -> None:
        """Refuses a recording that cannot calibrate ``n_parameters`` (RecordingError naming what is missing)."""
        ok = self.measured
        triples = int(np.sum(ok[:-2] & ok[1:-1] & ok[2:]))
        need = minimum_per_parameter * n_parameters
        if triples < need:
            raise RecordingError(f"{self.source}: too short: {triples} runs of three consecutive samples for "
                                 f"{n_parameters} parameters (need {need}: record at least "
                                 f"{math.ceil((need + 2) * self.dt)} s without gaps)")
        if self.held_fraction() > 0.98:
            raise RecordingError(f"{self.source}: the arm did not move (in {100 * self.held_fraction():.0f} % of the "
                                 "steps no configuration changed): record the identification motion")

    def command_delay_steps(self, max_steps: int = 5) -> Optional[int]:
        """The command delay d (steps) that best explains the drives' measured positions: the setpoint sent at tick
        k is the drive's position at k + 1 + d (thesis §3.6: the command is the next kinematic configuration;
        ros2_control adds d = 1). None without recorded commands."""
        if self.commands is None:
            return None
        nk = self.commands.shape[1]
        rho = self.Q[:, -nk:]
        best, best_err = None, math.inf
        for d in range(max_steps + 1):
            shift = 1 + d
            a, b = self.commands[:len(rho) - shift], rho[shift:]
            ok = np.all(np.isfinite(a), axis=1) & np.all(np.isfinite(b), axis=1)
            if ok.sum() < 10:
                continue
            err = float(np.median(np.abs(a[ok] - b[ok])))
            if err < best_err:
                best, best_err = d, err
        return best


def _grid(stamps: np.ndarray, dt: float, source: str) -> tuple[float, np.ndarray]:
    """(t0, tick index of each stamp); refuses duplicates and samples off the grid by more than 30 % of Δt."""
    t0 = float(stamps.min())
    k = np.rint((stamps - t0) / dt).astype(int)
    off = np.abs(stamps - t0 - k * dt)
    if np.any(off > 0.3 * dt):
        i = int(np.argmax(off))
        raise RecordingError(f"{source}: sample at t = {stamps[i] - t0:.4f} s is {off[i] * 1e3:.1f} ms off the "
                             f"{dt * 1e3:g} ms tick grid: give the recording's time step")
    _, counts = np.unique(k, return_counts=True)
    if np.any(counts > 1):
        raise RecordingError(f"{source}: {int(np.sum(counts > 1))} ticks have two samples (duplicated messages?)")
    return t0, k


def from_bag(path: str | os.PathLike, description, dt: float, joint_states: str = JOINT_STATES,
             commands: Optional[str] = COMMANDS, command_joints: Optional[Sequence[str]] = None) -> Recording:
    """A recording from a rosbag2 directory (module docstring) for a model description (its hardware joint names).

    dt : the tick grid's step (the controller's and the simulator's Δt); command_joints : the hardware names of
    the command's entries (default: the drives in model order). RecordingError for a bag without the joint-state
    topic, with joints the model does not have, or without a sample."""
    path = Path(path)
    source = str(path)
    try:
        info = bag_info(path)
    except BagError as e:
        raise RecordingError(str(e)) from None
    if joint_states not in info.topics:
        raise RecordingError(f"{source}: no {joint_states} in the bag (it has {', '.join(sorted(info.topics))})")
    model = description.model
    joints = JointMap.of(model, description.hardware_joints)
    stamps, logs, rows = [], [], []
    for m in read_bag(path, [joint_states]):
        msg = m.msg
        names = list(msg.name)
        missing = [h for h in joints.hardware_names if h not in names]
        if missing:
            raise RecordingError(f"{source}: {joint_states} lacks the joint(s) {', '.join(missing)} of model "
                                 f"'{model.name}' (it names {', '.join(names)}): a recording of another model?")
        pos = np.asarray(msg.position, dtype=float)
        rows.append([pos[names.index(h)] for h in joints.hardware_names])
        stamps.append(msg.header.stamp.sec + msg.header.stamp.nanosec / NS)
        logs.append(m.log_time)
    if not rows:
        raise RecordingError(f"{source}: {joint_states} holds no message")
    t0, k = _grid(np.array(stamps), dt, source)
    Q = np.full((int(k.max()) + 1, model.nq), np.nan)
    Q[k] = np.array(rows)
    cmd = None
    notes = []
    if commands and commands in info.topics:
        order = joints.command_order(command_joints or joints.kinematic_hardware_names)
        cmd = np.full((len(Q), model.nk), np.nan)
        # a command answers the latest sample received before it: it is that sample's tick's command
        received = np.asarray(logs)                     # read_bag yields in log-time order
        for m in read_bag(path, [commands]):
            i = int(np.searchsorted(received, m.log_time, side="right")) - 1
            if i < 0:
                continue
            data = np.asarray(m.msg.data, dtype=float)
            if len(data) != model.nk:
                raise RecordingError(f"{source}: a command on {commands} has {len(data)} entries, the model "
                                     f"'{model.name}' has {model.nk} drives")
            row = np.empty(model.nk)
            row[order] = data
            cmd[k[i]] = row
    elif commands:
        notes.append(f"no {commands} in the bag: the command delay is not estimated")
    gaps = int(np.sum(~np.all(np.isfinite(Q), axis=1)))
    if gaps:
        notes.append(f"{gaps} tick(s) without a sample")
    return Recording(dt, t0, Q, list(model.config_names), cmd, source, notes)


def bag_time_step(path: str | os.PathLike, joint_states: str = JOINT_STATES) -> float:
    """The median spacing of a bag's joint-state stamps [s] (the tick grid's step when none is given)."""
    try:
        stamps = sorted(m.msg.header.stamp.sec + m.msg.header.stamp.nanosec / NS
                        for m in read_bag(path, [joint_states]))
    except BagError as e:
        raise RecordingError(str(e)) from None
    if len(stamps) < 3:
        raise RecordingError(f"{path}: {len(stamps)} messages on {joint_states}")
    return float(np.median(np.diff(stamps)))


def from_table(path: str | os.PathLike, description, dt: Optional[float] = None) -> Recording:
    """A recording from ``.npz`` (``t``, ``q``, optional ``commands``) or ``.csv`` (``t`` and one column per
    configuration, optional ``cmd_<drive>``); dt default: the median step of ``t``."""
    path = Path(path)
    source = str(path)
    model = description.model
    names = list(model.config_names)
    if path.suffix == ".npz":
        with np.load(path) as z:
            if "t" not in z or "q" not in z:
                raise RecordingError(f"{source}: needs arrays 't' and 'q' (has {', '.join(z.files)})")
            t, q = np.asarray(z["t"], dtype=float), np.asarray(z["q"], dtype=float)
            c = np.asarray(z["commands"], dtype=float) if "commands" in z else None
        if q.ndim != 2 or q.shape[1] != model.nq or len(t) != len(q):
            raise RecordingError(f"{source}: q must have shape (len(t), {model.nq}) for model '{model.name}' "
                                 f"({', '.join(names)}), got {q.shape} with {len(t)} times")
    elif path.suffix == ".csv":
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            missing = [n for n in ["t"] + names if n not in header]
            if missing:
                raise RecordingError(f"{source}: no column {', '.join(missing)} (model '{model.name}' needs t and "
                                     f"{', '.join(names)}; the file has {', '.join(header)})")
            rows = list(reader)
        t = np.array([float(r["t"]) for r in rows])
        q = np.array([[float(r[n]) if r[n] != "" else np.nan for n in names] for r in rows])
        drives = [f"cmd_{n}" for n in names[model.nd:]]
        c = (np.array([[float(r[n]) if r[n] != "" else np.nan for n in drives] for r in rows])
             if all(n in header for n in drives) else None)
    else:
        raise RecordingError(f"{source}: a table is .npz or .csv, got '{path.suffix}'")
    if len(t) < 3:
        raise RecordingError(f"{source}: {len(t)} samples")
    step = float(dt) if dt is not None else float(np.median(np.diff(np.sort(t))))
    t0, k = _grid(t, step, source)
    Q = np.full((int(k.max()) + 1, model.nq), np.nan)
    Q[k] = q
    cmd = None
    if c is not None:
        cmd = np.full((len(Q), model.nk), np.nan)
        cmd[k] = c
    return Recording(step, t0, Q, names, cmd, source)
