"""Message ⇄ numpy conversions shared by the nodes (no ROS graph objects here, only message types).

* :func:`multi_array_bytes` writes the controller's command as serialized (CDR) bytes, without a
  message object (the joint states are read the same way:
  :class:`~marionette_control.tracking.joint_states.JointStateParser`).
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
from typing import Optional

import numpy as np
from builtin_interfaces.msg import Duration
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from marionette_control.lq.gains import GAIN_DESIGN
from marionette_control.tracking.plan_switch import Plan
from marionette_control.trajectory import Trajectory, TrajectoryError


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


def command_trajectory_bytes(names, stamp: int, first: int, dt: float, points: np.ndarray) -> bytes:
    """trajectory_msgs/JointTrajectory with header stamp ``stamp`` [ns] (empty frame_id), ``joint_names`` = ``names``
    and point i (of ``points`` (m, len(names))) at time_from_start (first + i)·dt with positions only, serialized
    (plain CDR, little endian): the controller's joint_trajectory command without building the message (rclpy's
    classes: 134 µs for 11 points, and 71 µs to serialize them). Every item is aligned to its size from the payload's
    start (after the 4-byte encapsulation)."""
    out = bytearray(b"\x00\x01\x00\x00")

    def align(n: int) -> None:
        out.extend(b"\x00" * (-(len(out) - 4) % n))

    sec, nanosec = divmod(int(stamp), 1_000_000_000)
    out += struct.pack("<iII", sec, nanosec, 1) + b"\x00"          # stamp, frame_id "" (length 1: its NUL)
    align(4)
    out += struct.pack("<I", len(names))
    for name in names:
        align(4)
        text = name.encode()
        out += struct.pack("<I", len(text) + 1) + text + b"\x00"
    align(4)
    out += struct.pack("<I", len(points))
    for i, row in enumerate(np.asarray(points, dtype="<f8")):
        align(4)
        out += struct.pack("<I", row.size)
        align(8)
        out += row.tobytes()
        align(4)
        out += b"\x00" * 12                                        # velocities, accelerations, effort: empty
        t_sec, t_nanosec = divmod(round((first + i) * dt * 1e9), 1_000_000_000)
        out += struct.pack("<iI", t_sec, t_nanosec)
    return bytes(out)


def _flat(values) -> np.ndarray:
    return np.asarray(values, dtype=float)


def joint_trajectory(names, dt: float, positions: np.ndarray, velocities: Optional[np.ndarray] = None):
    """A ``trajectory_msgs/JointTrajectory``: joint ``names``, point k at time_from_start k·dt with positions
    (K, len(names)) row k and, if given, velocities (K, len(names)) row k."""
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


def plan_to_msg(plan: Plan, msg_type, stamp=None):
    """``marionette_interfaces/Plan`` (``msg_type``) of a :class:`~marionette_control.tracking.plan_switch.Plan`;
    ``stamp``: the stamp of the joint state its estimate came from."""
    m = msg_type()
    if stamp is not None:
        m.header.stamp = stamp
    m.run, m.start, m.sequence = int(plan.run), int(plan.start), int(plan.sequence)
    m.estimate_tick = max(0, int(plan.estimate_tick))
    m.trajectory = trajectory_to_msg(plan.trajectory, type(m.trajectory), (), views=False)
    return m


def plan_from_msg(msg) -> Plan:
    """The :class:`~marionette_control.tracking.plan_switch.Plan` of a ``marionette_interfaces/Plan``; raises
    TrajectoryError on inconsistent sizes (the controller checks the rest)."""
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


def stamp_ns(stamp) -> int:
    """A builtin_interfaces/Time as integer nanoseconds."""
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def duration_s(duration) -> float:
    """A builtin_interfaces/Duration in seconds."""
    return float(duration.sec) + 1e-9 * float(duration.nanosec)


def execution_feedback(msg, phase: str, batch=None, stamp: int = 0) -> None:
    """Fills an ``ExecuteMotion.Feedback`` ``msg`` with the phase and a :class:`~marionette_control.tracking.execution.
    Batch` of ticks (row-major arrays, len(ticks) x nd), stamped with the batch's last joint state (ns)."""
    msg.phase = phase
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(int(stamp), 1_000_000_000)
    if batch is None:
        msg.ticks, msg.desired, msg.actual, msg.error = [], [], [], []
        return
    msg.ticks = [int(k) for k in batch.ticks]
    msg.desired = batch.desired.ravel().tolist()
    msg.actual = batch.actual.ravel().tolist()
    msg.error = batch.error.ravel().tolist()


def execution_result(result, msg_type, report_type):
    """The ``ExecuteMotion.Result`` (``msg_type``) of an :class:`~marionette_control.tracking.execution.
    ExecutionResult`; its margins as ``report_type`` (ConstraintReport) rows."""
    m = msg_type(error_code=int(result.code), error_string=result.message, success=result.success,
                 trajectory_source=result.source, run=int(result.run), ticks=int(result.ticks),
                 last_tick=int(result.last_tick), num_steps=int(result.num_steps),
                 joint_names=list(result.joint_names), rms_error=[float(v) for v in result.rms_error],
                 max_error=[float(v) for v in result.max_error])
    for r in result.margins:
        label = (f"{r['component']} {r['family']} {'>=' if r['side'] == 'lower' else '<='} {r['limit']:g} {r['unit']}"
                 + (" (the commands)" if r["family"] != "tension" else " (the estimate)"))
        m.margins.append(report_type(family=r["family"], component=r["component"], side=r["side"],
                                     limit=float(r["limit"]), unit=r["unit"], label=label,
                                     worst_margin=float(r["margin"]), normalized_margin=float(r["normalized"]),
                                     step=max(0, int(r["tick"])), time_s=float(r["time_s"]),
                                     satisfied=bool(r["satisfied"])))
    m.faults = list(result.faults)
    m.fault_counts = [int(v) for v in result.faults.values()]
    return m
