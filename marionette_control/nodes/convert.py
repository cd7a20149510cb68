"""Message ⇄ numpy conversions shared by the nodes (no ROS graph objects here, only message types).

* :class:`JointStateReader` turns a ``sensor_msgs/JointState`` into the model's
  configuration vector by *name* (the hardware's joint names map onto model
  configuration names), refusing malformed messages with a specific reason.
* :class:`JointStateParser` reads the fields the controller needs (stamp, names,
  positions) straight from a JointState's serialized (CDR) bytes: the controller's
  raw subscription, without rclpy's conversion into a Python message object;
  :func:`multi_array_bytes` writes its command the same way.
* :func:`trajectory_to_msg` / :func:`trajectory_from_msg` convert between
  :class:`~marionette_control.trajectory.Trajectory` and
  ``marionette_interfaces/TrackedTrajectory`` (row-major flattened arrays,
  gains ``gains[(k*nU + j)*nx + i] = K[k, j, i]``, their design record as JSON in
  ``gains_design``, and the configuration and actuator views as
  ``trajectory_msgs/JointTrajectory``: :func:`joint_trajectory`).
* :func:`plan_to_msg` / :func:`plan_from_msg` convert between a receding-horizon
  :class:`~marionette_control.tracking.plan_switch.Plan` and ``marionette_interfaces/Plan``
  (its window as a TrackedTrajectory without the views); :func:`disturb_request` makes the
  simulator's ``~/disturb`` request of a scripted push.
"""

from __future__ import annotations

import json
import math
import struct
from typing import Callable, Optional

import numpy as np

from marionette_control.lq.gains import GAIN_DESIGN
from marionette_control.trajectory import Trajectory, TrajectoryError


class JointStateError(ValueError):
    """A joint-state message cannot be used; ``kind`` is a short machine-readable category."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class JointStateReader:
    """Maps JointState messages onto a model's configurations.

    Parameters
    ----------
    config_names : list of str
        The model's configuration names, in model order.
    joint_names : dict, optional
        hardware joint name -> model configuration name (default: identical names).
    """

    def __init__(self, config_names, joint_names: Optional[dict] = None):
        self.config_names = list(config_names)
        mapping = dict(joint_names) if joint_names else {n: n for n in self.config_names}
        unknown = sorted(set(mapping.values()) - set(self.config_names))
        if unknown:
            raise ValueError(f"joint-name mapping targets unknown configurations: {', '.join(unknown)}")
        missing = sorted(set(self.config_names) - set(mapping.values()))
        if missing:
            raise ValueError(f"no hardware joint is mapped to configuration(s): {', '.join(missing)}")
        if len(set(mapping.values())) != len(mapping):
            raise ValueError("two hardware joints map to the same configuration")
        self.hardware_to_index = {hw: self.config_names.index(cfg) for hw, cfg in mapping.items()}
        self.hardware_names = [hw for cfg in self.config_names for hw, c in mapping.items() if c == cfg]
        # fast path: the name list of the last good message and, per configuration, its index in that message
        self._names: Optional[list] = None
        self._order: list[int] = []

    def read(self, msg) -> np.ndarray:
        """q (n,) from a JointState; raises JointStateError (missing/duplicate/NaN/length mismatch).

        A message with exactly the names (same order) of the last good one takes a short path (one
        list comparison, no per-name lookups): the controller's tick calls this on every sample.
        """
        names, pos = msg.name, msg.position
        if len(pos) != len(names):
            raise JointStateError("malformed", f"joint state has {len(names)} names but {len(pos)} positions")
        if isinstance(names, list) and names == self._names:
            q = [pos[j] for j in self._order]
            if all(map(math.isfinite, q)):
                return np.array(q, dtype=float)
        return self._read_by_name(list(names), pos)

    def _read_by_name(self, names: list, pos) -> np.ndarray:
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise JointStateError("duplicate_names", f"joint state names repeated: {', '.join(dup)}")
        order = [-1] * len(self.config_names)
        for j, name in enumerate(names):
            i = self.hardware_to_index.get(name)
            if i is None:
                continue
            if not math.isfinite(pos[j]):
                raise JointStateError("non_finite", f"joint '{name}' position is {pos[j]}")
            order[i] = j
        if min(order) < 0:
            present = set(names)
            missing = [n for n in self.hardware_names if n not in present]
            raise JointStateError("missing_names", f"joint state lacks joint(s): {', '.join(missing)}")
        self._names, self._order = names, order
        return np.array([pos[j] for j in order], dtype=float)


NS = 1_000_000_000


class JointStateSample:
    """What the controller reads of a sensor_msgs/JointState: ``stamp_ns``, ``name``, ``position``."""

    __slots__ = ("stamp_ns", "name", "position")

    def __init__(self, stamp_ns: int, name: list, position):
        self.stamp_ns, self.name, self.position = stamp_ns, name, position


class JointStateParser:
    """sensor_msgs/JointState from its serialized bytes, without building an rclpy message.

    Converting a received JointState into rclpy's Python message runs the generated message
    classes' constructors and setters (header, stamp, names, three arrays): on this project's
    machines ~30 µs warm and ~250 µs when the code has been idle for a tick period, more than the
    whole tracking law. This reads only the header stamp, the names and the positions of the
    plain CDR encoding (XCDR1, the encoding ROS 2's rmw implementations write; little or big
    endian) with ``struct``, and decodes the names only when their bytes differ from the last
    message's (the same list object is returned otherwise). Any other encapsulation, or bytes
    that do not parse, go through ``fallback`` (rclpy's ``deserialize_message``), whose errors
    propagate.

    Layout (offsets from the end of the 4-byte encapsulation header, each primitive aligned to
    its size): int32 sec, uint32 nanosec, string frame_id (uint32 length with the NUL, bytes),
    sequence<string> name (uint32 count, then each string aligned to 4), sequence<float64>
    position (uint32 count, the doubles aligned to 8); velocity and effort follow (not read).
    """

    _FORMATS = {b"\x00\x01": "<", b"\x00\x00": ">"}  # encapsulation ids CDR_LE, CDR_BE

    def __init__(self, fallback: Optional[Callable] = None):
        self._fallback = fallback
        self._names_raw = None
        self._names: list = []
        self._structs: dict = {}

    def _struct(self, fmt: str) -> struct.Struct:
        st = self._structs.get(fmt)
        if st is None:
            st = self._structs[fmt] = struct.Struct(fmt)
        return st

    def parse(self, data) -> JointStateSample:
        """The sample of serialized JointState ``data`` (bytes)."""
        order = self._FORMATS.get(bytes(data[:2]))
        if order is not None:
            try:
                return self._parse_cdr(data, order)
            except (struct.error, IndexError, UnicodeDecodeError, ValueError):
                pass  # not what it claims to be: rclpy's deserializer decides (and explains)
        if self._fallback is None:
            raise ValueError(f"joint state bytes with encapsulation {bytes(data[:2]).hex()} are not plain CDR")
        msg = self._fallback(data)
        st = msg.header.stamp
        return JointStateSample(st.sec * NS + st.nanosec, list(msg.name), msg.position)

    def _parse_cdr(self, data, order: str) -> JointStateSample:
        u32 = self._struct(order + "I").unpack_from
        sec, nanosec, flen = self._struct(order + "iII").unpack_from(data, 4)
        off = (16 + flen + 3) & ~3  # payload offset 12 + frame_id bytes, aligned to 4 (+4 header)
        count, = u32(data, off)
        start = off = off + 4
        for _ in range(count):
            n, = u32(data, off)
            off = (off + 4 + n + 3) & ~3
        raw = data[start:off]
        if raw != self._names_raw:
            names, i = [], start
            for _ in range(count):
                n, = u32(data, i)
                names.append(bytes(data[i + 4:i + 3 + n]).decode() if n else "")
                i = (i + 4 + n + 3) & ~3
            self._names_raw, self._names = raw, names
        npos, = u32(data, off)
        off += 4
        off += -(off - 4) % 8  # doubles aligned to 8 within the payload
        position = self._struct(f"{order}{npos}d").unpack_from(data, off)
        return JointStateSample(sec * NS + nanosec, self._names, position)


#: The serialized std_msgs/Float64MultiArray up to its data (plain CDR, little endian): encapsulation CDR_LE,
#: layout.dim (empty: count 0), layout.data_offset 0; the data's count, padding and doubles follow per message.
_MULTI_ARRAY_LE = b"\x00\x01\x00\x00" + struct.pack("<II", 0, 0)


def multi_array_bytes(values: np.ndarray) -> bytes:
    """std_msgs/Float64MultiArray with ``data`` = ``values`` (n,) and an empty layout, serialized (plain CDR, little
    endian, what rmw writes): a publisher sends these bytes as the message without building one (the controller's
    command, every tick; rclpy's conversion of a message costs more than this in the tick's cold path)."""
    data = np.asarray(values, dtype="<f8")
    # (the doubles start 8-aligned within the payload; an empty sequence has none to align)
    return _MULTI_ARRAY_LE + struct.pack("<I4x" if data.size else "<I", data.size) + data.tobytes()


def _flat(values) -> np.ndarray:
    return np.asarray(values, dtype=float)


def joint_trajectory(names, dt: float, positions: np.ndarray, velocities: Optional[np.ndarray] = None):
    """A ``trajectory_msgs/JointTrajectory``: joint ``names``, point k at time_from_start k·dt with positions
    (K, len(names)) row k and, if given, velocities (K, len(names)) row k."""
    from builtin_interfaces.msg import Duration
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    jt = JointTrajectory()
    jt.joint_names = list(names)
    for k, row in enumerate(positions.tolist()):
        t = k * dt
        p = JointTrajectoryPoint()
        p.positions = row
        if velocities is not None:
            p.velocities = velocities[k].tolist()
        p.time_from_start = Duration(sec=int(t), nanosec=int(round((t - int(t)) * 1e9)) % 1_000_000_000)
        jt.points.append(p)
    return jt


def trajectory_to_msg(traj: Trajectory, msg_type, config_names, stamp=None, joint_trajectory_names=None,
                      actuator_joints=(), views: bool = True):
    """TrackedTrajectory message of a trajectory, with its views for standard tools: ``configurations`` (every
    configuration, named ``joint_trajectory_names`` or ``config_names``) and ``actuators`` (the kinematic
    configurations, the last len(``actuator_joints``) of ``config_names``, named by their hardware joint names
    ``actuator_joints``, with the state's kinematic velocities; empty without ``actuator_joints``); ``views``
    False: both left empty (a plan for the controller, which reads the arrays only)."""
    m = msg_type()
    if stamp is not None:
        m.header.stamp = stamp
    m.model_id = traj.model_name
    m.model_hash = traj.model_hash
    m.dt = float(traj.dt)
    m.state_names = list(traj.state_names)
    m.input_names = list(traj.input_names)
    m.configuration_names = list(config_names)
    m.num_steps = traj.N
    m.states = traj.X.ravel().tolist()
    m.inputs = traj.U.ravel().tolist()
    m.gains = [] if traj.K is None else traj.K.ravel().tolist()
    design = traj.info.get(GAIN_DESIGN)
    m.gains_design = json.dumps(design) if design is not None else ""
    m.cost = float(traj.info.get("cost", float("nan")))
    if not views:
        return m
    nq, nk = len(config_names), len(actuator_joints)
    m.configurations = joint_trajectory(joint_trajectory_names or config_names, traj.dt, traj.X[:, :nq])
    if nk:  # x = [q; p; v]: the kinematic configurations end q, their velocities end x
        m.actuators = joint_trajectory(actuator_joints, traj.dt, traj.X[:, nq - nk:nq], traj.X[:, -nk:])
    return m


def trajectory_from_msg(msg) -> Trajectory:
    """Trajectory from a TrackedTrajectory message; raises TrajectoryError on inconsistent sizes."""
    N = int(msg.num_steps)
    nx, nU = len(msg.state_names), len(msg.input_names)
    X, U, K = _flat(msg.states), _flat(msg.inputs), _flat(msg.gains)
    if X.size != (N + 1) * nx or U.size != N * nU:
        raise TrajectoryError(f"trajectory message sizes: {X.size} states and {U.size} inputs do not match "
                              f"num_steps={N}, {nx} state names, {nU} input names")
    if K.size not in (0, N * nU * nx):
        raise TrajectoryError(f"trajectory message has {K.size} gain entries, expected 0 or {N * nU * nx}")
    info = {} if not math.isfinite(msg.cost) else {"cost": float(msg.cost)}
    if msg.gains_design:
        try:
            design = json.loads(msg.gains_design)
        except json.JSONDecodeError as e:
            raise TrajectoryError(f"trajectory message's gains_design is not JSON ({e})") from None
        if not isinstance(design, dict):
            raise TrajectoryError(f"trajectory message's gains_design must be a JSON object, got {msg.gains_design!r}")
        info[GAIN_DESIGN] = design
    return Trajectory(dt=float(msg.dt), X=X.reshape(N + 1, nx), U=U.reshape(N, nU),
                      state_names=list(msg.state_names), input_names=list(msg.input_names),
                      model_name=msg.model_id, model_hash=msg.model_hash,
                      K=K.reshape(N, nU, nx) if K.size else None, info=info)


def plan_to_msg(plan, msg_type, stamp=None):
    """``marionette_interfaces/Plan`` (``msg_type``) of a :class:`~marionette_control.tracking.plan_switch.Plan`;
    ``stamp``: the stamp of the joint state its estimate came from."""
    m = msg_type()
    if stamp is not None:
        m.header.stamp = stamp
    m.run, m.start, m.sequence = int(plan.run), int(plan.start), int(plan.sequence)
    m.estimate_tick = max(0, int(plan.estimate_tick))
    m.trajectory = trajectory_to_msg(plan.trajectory, type(m.trajectory), (), views=False)
    return m


def plan_from_msg(msg):
    """The :class:`~marionette_control.tracking.plan_switch.Plan` of a ``marionette_interfaces/Plan``; raises
    TrajectoryError on inconsistent sizes (the controller checks the rest)."""
    from marionette_control.tracking.plan_switch import Plan

    return Plan(int(msg.start), trajectory_from_msg(msg.trajectory), int(msg.run), int(msg.sequence),
                int(msg.estimate_tick))


def disturb_request(push, start_ns: int, request_type):
    """The simulator's ``~/disturb`` request (``request_type``: marionette_interfaces/srv/Disturb.Request) of a
    scripted :class:`~marionette_control.sim.offline_loop.Push`, starting at ``start_ns`` in the time base of the
    /joint_states stamps (e.g. the stamp of the controller's tick 0 + push.tick·dt)."""
    req = request_type(body=push.body, profile=push.profile, duration=float(push.duration))
    req.force.x, req.force.y, req.force.z = (float(v) for v in push.force)
    req.impulse.x, req.impulse.y, req.impulse.z = (float(v) for v in push.impulse)
    req.start_time.sec, req.start_time.nanosec = divmod(int(start_ns), 1_000_000_000)
    return req
