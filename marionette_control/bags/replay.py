"""Deterministic offline replay: recorded ``/joint_states`` through the controller's tick logic, no ROS transport.

:func:`replay` feeds joint-state samples — from a bag (:func:`replay_bag`) or any list of
``(message, time)`` — through exactly the object the ``marionette_controller`` node wraps,
:class:`~marionette_control.tracking.controller.ControllerCore`, built the way the node
builds it (model file, joint-name mapping, actuator limits, ``state_timeout``,
``stamp_tolerance``), and returns every command the node would have published on its
command topic, in the node's ``command_joints`` order, with what produced it.

Emulating the node
------------------
* A sample is ``core.on_joint_state(msg, stamp, now)`` with ``stamp`` its header stamp and
  ``now`` the node clock at reception. The bag's log time is the recorder's clock at
  reception — the same clock the controller reads when both run on the same clock (ROS time,
  or ``/clock`` with ``use_sim_time``) — so ``now`` = log time by default (``clock="log_time"``);
  ``clock="stamp"`` uses stamp + ``latency`` instead (a bag recorded on another clock).
* The watchdog timer (``watchdog_period`` on the node's ROS clock) is ``core.on_watchdog(t)``
  at every multiple of the period between consecutive samples' ``now`` (the clock is taken to
  advance continuously between samples; a watchdog instant equal to a sample's ``now`` runs
  first). Its hold commands are sent like the node's.
* Start: ``start`` = ``"first"`` starts tracking before the first sample (``autostart`` with a
  trajectory file); an integer stamp (ns) starts it just before the first sample stamped at or
  after it — so a recording whose first tick was at stamp s₀ (``first_tick_stamp``, read from
  the controller's ``~/tracking`` topic) is reproduced tick for tick whenever the live
  controller was started.

The node's only other command is the hold it sends once on a ``~/stop`` call, which a bag
of joint states cannot contain.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from pathlib import Path
from typing import Iterable, NamedTuple, Optional, Sequence, Union

import numpy as np

from marionette_control.model.yaml_model import load_packaged_model
from marionette_control.bags.bagio import NS, BagError, bag_info, read_bag
from marionette_control.tracking.controller import core_from_description
from marionette_control.tracking.controller_options import command_permutation, controller_param_defaults
from marionette_control.trajectory import Trajectory

JOINT_STATES = "/joint_states"
COMMANDS = "/forward_position_controller/commands"
TRACKING = "/marionette_controller/tracking"
TRACKING_TYPE = "marionette_interfaces/msg/TrackingState"
#: metadata.yaml custom_data keys a recording may carry for its replay
CUSTOM_TRAJECTORY = "marionette.trajectory_file"
CUSTOM_TRAJECTORY_SHA256 = "marionette.trajectory_sha256"
CUSTOM_PARAM_PREFIX = "marionette.controller."


@dataclasses.dataclass
class ReplayConfig:
    """The controller node's parameters that matter for its commands (defaults: the node's).

    ``parameters`` : the other parameters that shape the core's commands ({name: value}, e.g.
    ``command_delay_steps``, ``estimator``, ``constraints.shoulder.trajectory``;
    ``tracking.options.core_values``); missing ones take the node's defaults.
    """

    model_file: str = "marionette_arm.yaml"
    command_joints: Sequence[str] = ("carriage", "string_length")
    state_timeout: float = 0.05
    stamp_tolerance: float = 0.1
    watchdog_period: float = 0.01
    clock: str = "log_time"
    latency: float = 0.0
    parameters: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def from_custom_data(cls, custom: dict, **overrides) -> "ReplayConfig":
        """Config from a bag's ``custom_data`` (``marionette.controller.<param>`` keys), then overrides."""
        kw = {}
        fields = {f.name for f in dataclasses.fields(cls)} - {"parameters"}
        for f in dataclasses.fields(cls):
            v = custom.get(CUSTOM_PARAM_PREFIX + f.name)
            if v is None or f.name == "parameters":
                continue
            if f.name == "command_joints":
                kw[f.name] = [s.strip() for s in v.strip("[]").split(",") if s.strip()]
            elif f.name in ("model_file", "clock"):
                kw[f.name] = v
            else:
                kw[f.name] = float(v)
        extra = {k[len(CUSTOM_PARAM_PREFIX):]: v for k, v in custom.items()
                 if k.startswith(CUSTOM_PARAM_PREFIX) and k[len(CUSTOM_PARAM_PREFIX):] not in fields}
        if extra:
            kw["parameters"] = _typed_parameters(extra, kw.get("model_file", cls.model_file))
        kw.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**kw)

    def custom_data(self) -> dict:
        """The ``custom_data`` entries that record this config in a bag."""
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "parameters":
                out.update({CUSTOM_PARAM_PREFIX + k: str(x) for k, x in v.items()})
            else:
                out[CUSTOM_PARAM_PREFIX + f.name] = ",".join(v) if f.name == "command_joints" else str(v)
        return out

    def core_values(self) -> dict:
        """The node parameter values the core is built from (``tracking.controller.core_from_description``)."""
        return {**self.parameters, "state_timeout": self.state_timeout, "stamp_tolerance": self.stamp_tolerance}


def _typed_parameters(texts: dict, model_file: str) -> dict:
    """{name: value} of parameter texts, typed as the node declares them (bool, int, float, text)."""
    defaults = controller_param_defaults(load_packaged_model(model_file))
    out = {}
    for name, text in texts.items():
        if name not in defaults:
            raise BagError(f"custom_data names an unknown controller parameter '{name}'")
        d = defaults[name]
        out[name] = (text.lower() == "true" if isinstance(d, bool) else int(text) if isinstance(d, int)
                     else float(text) if isinstance(d, float) else text)
    return out


@dataclasses.dataclass
class ReplayEvent:
    """One call of the core that sent a command or changed the fault state.

    source : "sample" or "watchdog"; time_ns : the clock reading (now); stamp_ns : the sample's stamp
    (0 for the watchdog); kind : "tick" / "hold" / "none"; command : ndarray in command_joints order
    (None: nothing sent); k : tick index (-1 unless a tick); fault, message : the active fault
    after the call; new_fault, recovered : the call raised / cleared a fault; missed : skipped slots.
    """

    source: str
    time_ns: int
    stamp_ns: int
    kind: str
    command: Optional[np.ndarray]
    k: int
    fault: Optional[str]
    message: str
    new_fault: bool
    recovered: bool
    missed: int


@dataclasses.dataclass
class ReplayResult:
    """Everything a replay produced (events only for calls that sent or changed something)."""

    events: list
    command_joints: list
    samples: int
    watchdog_calls: int
    fault_counts: dict
    status: tuple
    started_at_stamp: Optional[int]

    @property
    def sent(self) -> list:
        """Events that sent a command, in order."""
        return [e for e in self.events if e.command is not None]

    def commands(self) -> np.ndarray:
        """(n, len(command_joints)) every command sent, in order (the command topic's data)."""
        s = self.sent
        return np.array([e.command for e in s]) if s else np.zeros((0, len(self.command_joints)))

    @property
    def ticks(self) -> list:
        return [e for e in self.events if e.kind == "tick"]

    @property
    def holds(self) -> list:
        return [e for e in self.events if e.kind == "hold"]

    def faults_raised(self) -> list:
        """(time_ns, kind, message) of every newly raised fault."""
        return [(e.time_ns, e.fault, e.message) for e in self.events if e.new_fault]

    def recoveries(self) -> list:
        return [(e.time_ns, e.message) for e in self.events if e.recovered]


def _stamp_ns(msg) -> int:
    s = msg.header.stamp
    return int(s.sec) * NS + int(s.nanosec)


def make_core(trajectory: Trajectory, config: ReplayConfig, source: str = "replay"):
    """(ControllerCore, command permutation) built like the node builds them."""
    desc = load_packaged_model(config.model_file)
    core = core_from_description(desc, config.core_values())
    core.load_trajectory(trajectory, source)
    perm = command_permutation(desc.model, dict(desc.hardware_joints), list(config.command_joints))
    return core, perm


def replay(samples: Iterable, trajectory: Trajectory, config: Optional[ReplayConfig] = None,
           start: Union[str, int] = "first", core=None) -> ReplayResult:
    """Replays ``samples`` — (JointState-like message, log_time_ns) pairs in reception order.

    ``core`` : a ready (trajectory loaded, not running) ControllerCore to use instead of a new one
    (tests substitute a changed controller this way).
    """
    config = config or ReplayConfig()
    if config.clock not in ("log_time", "stamp"):
        raise ValueError(f"clock must be 'log_time' or 'stamp', got {config.clock!r}")
    if not config.watchdog_period > 0:
        raise ValueError(f"watchdog_period must be > 0, got {config.watchdog_period}")
    if core is None:
        core, perm = make_core(trajectory, config)
    else:
        _, perm = make_core(trajectory, config)
    period = int(round(config.watchdog_period * NS))
    latency = int(round(config.latency * NS))
    events = []
    next_watchdog = None
    n_samples = n_watchdog = 0
    started_at = None
    start_stamp = None if start == "first" else int(start)
    if start == "first":
        ok, text = core.start()
        if not ok:
            raise ValueError(f"cannot start the controller: {text}")
        started_at = -1

    def record(source, now, stamp, res):
        if res.command is None and not res.new_fault and not res.recovered:
            return
        cmd = None if res.command is None else np.asarray(res.command, dtype=float)[perm]
        events.append(ReplayEvent(source, now, stamp, res.kind, cmd, res.k, res.fault, res.fault_message,
                                  res.new_fault, res.recovered, res.missed))

    for msg, log_time in samples:
        stamp = _stamp_ns(msg)
        now = int(log_time) if config.clock == "log_time" else stamp + latency
        if next_watchdog is None:
            next_watchdog = (now // period + 1) * period
        while next_watchdog <= now:
            record("watchdog", next_watchdog, 0, core.on_watchdog(next_watchdog))
            n_watchdog += 1
            next_watchdog += period
        if start_stamp is not None and started_at is None and stamp >= start_stamp:
            ok, text = core.start()
            if not ok:
                raise ValueError(f"cannot start the controller: {text}")
            started_at = stamp
        record("sample", now, stamp, core.on_joint_state(msg, stamp, now))
        n_samples += 1
    return ReplayResult(events, list(config.command_joints), n_samples, n_watchdog, dict(core.fault_counts),
                        core.status(), started_at if started_at not in (None, -1) else None)


# ============================================================================================ bags


class RecordedTick(NamedTuple):
    """One recorded tick of the controller (its ``~/tracking`` TrackingState): the joint state's stamp (ns), the
    tick k, the command as sent (in the order of ``joints``, the command's hardware joint names)."""

    stamp_ns: int
    k: int
    command: np.ndarray
    joints: list


def _tracking_states(bag, topic: str):
    """The TrackingState messages of ``topic`` (BagError for a recording of another type on it: ~/tracking was a
    Float64MultiArray before TrackingState)."""
    info = bag_info(bag)
    kind = info.topics[topic].msgtype if topic in info.topics else TRACKING_TYPE
    if kind != TRACKING_TYPE:
        raise BagError(f"{info.path}: {topic} holds {kind}, not {TRACKING_TYPE} (a recording of an older "
                       "controller); replay it with start='first' or an explicit start stamp")
    for m in read_bag(bag, [topic]):
        yield m.msg


def first_tick_stamp(bag, topic: str = TRACKING) -> Optional[int]:
    """Stamp (ns) of the first tick k = 0 in a recording of the controller's ``~/tracking`` topic (None: none)."""
    for msg in _tracking_states(bag, topic):
        if msg.tick == 0:
            return _stamp_ns(msg)
    return None


def joint_state_samples(bag, topic: str = JOINT_STATES) -> list:
    """[(message, log_time_ns)] of a bag's joint states, in log-time (reception) order."""
    return [(m.msg, m.log_time) for m in read_bag(bag, [topic])]


def recorded_commands(bag, topic: str = COMMANDS) -> np.ndarray:
    """(n, m) the data of every recorded command message, in order."""
    rows = [np.asarray(m.msg.data, dtype=float) for m in read_bag(bag, [topic])]
    return np.array(rows) if rows else np.zeros((0, 0))


def recorded_ticks(bag, topic: str = TRACKING) -> list[RecordedTick]:
    """Every tick recorded on the controller's ``~/tracking`` topic, in order."""
    return [RecordedTick(_stamp_ns(msg), int(msg.tick), np.asarray(msg.command, dtype=float), list(msg.command_joints))
            for msg in _tracking_states(bag, topic)]


def trajectory_of_bag(bag, trajectory: Optional[Union[str, Path]] = None) -> tuple[Trajectory, Path]:
    """The trajectory a recording used: ``trajectory`` if given, else the bag's custom_data entry
    (resolved relative to the bag's parent directory), checked against the recorded SHA-256."""
    info = bag_info(bag)
    if trajectory is None:
        name = info.custom_data.get(CUSTOM_TRAJECTORY)
        if not name:
            raise BagError(f"{info.path}: no {CUSTOM_TRAJECTORY} in its custom_data: give the trajectory file")
        path = Path(name) if Path(name).is_absolute() else info.path.parent / name
        want = info.custom_data.get(CUSTOM_TRAJECTORY_SHA256)
        if want and file_sha256(path) != want:
            raise BagError(f"{path} is not the trajectory {info.path} was recorded with (SHA-256 differs)")
    else:
        path = Path(trajectory)
    return Trajectory.load(path), path


def file_sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def replay_bag(bag, trajectory: Optional[Union[str, Path, Trajectory]] = None, config: Optional[ReplayConfig] = None,
               start: Union[str, int, None] = None, topic: str = JOINT_STATES, core=None) -> ReplayResult:
    """Replays a bag's joint states; config from its custom_data unless given; start from its
    recorded first tick (``~/tracking``) when present, else ``"first"``."""
    info = bag_info(bag)
    if config is None:
        config = ReplayConfig.from_custom_data(info.custom_data)
    if not isinstance(trajectory, Trajectory):
        trajectory, _ = trajectory_of_bag(bag, trajectory)
    if start is None:
        start = first_tick_stamp(bag) if TRACKING in info.topics else None
        start = "first" if start is None else start
    return replay(joint_state_samples(bag, topic), trajectory, config, start, core=core)


@dataclasses.dataclass
class Comparison:
    """Replayed against recorded commands: counts, largest difference, first index beyond tolerance."""

    replayed: int
    recorded: int
    max_abs_error: float
    first_mismatch: Optional[int]
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.replayed == self.recorded and self.first_mismatch is None

    def describe(self) -> str:
        if self.ok:
            return (f"{self.replayed} commands reproduced; largest difference {self.max_abs_error:.3g} "
                    f"(tolerance {self.tolerance:g})")
        what = [f"{self.replayed} replayed vs {self.recorded} recorded commands"]
        if self.first_mismatch is not None:
            what.append(f"first difference beyond {self.tolerance:g} at command {self.first_mismatch}")
        what.append(f"largest difference {self.max_abs_error:.3g}")
        return "MISMATCH: " + "; ".join(what)


def compare_commands(replayed: np.ndarray, recorded: np.ndarray, tolerance: float = 1e-9) -> Comparison:
    """Compares two command sequences element by element (over the common length)."""
    replayed, recorded = np.asarray(replayed, float), np.asarray(recorded, float)
    n = min(len(replayed), len(recorded))
    if n and replayed.shape[1:] != recorded.shape[1:]:
        return Comparison(len(replayed), len(recorded), math.inf, 0, tolerance)
    if n == 0:
        return Comparison(len(replayed), len(recorded), 0.0, None, tolerance)
    err = np.abs(replayed[:n] - recorded[:n])
    err = np.where(np.isnan(err), np.inf, err)
    row = err.max(axis=1)
    bad = np.flatnonzero(row > tolerance)
    return Comparison(len(replayed), len(recorded), float(row.max()), int(bad[0]) if bad.size else None, tolerance)
