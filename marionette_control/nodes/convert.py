"""Message ⇄ numpy conversions shared by the nodes (no ROS graph objects here, only message types).

* :class:`JointStateReader` turns a ``sensor_msgs/JointState`` into the model's
  configuration vector by *name* (the hardware's joint names map onto model
  configuration names), refusing malformed messages with a specific reason.
* :func:`trajectory_to_msg` / :func:`trajectory_from_msg` convert between
  :class:`~marionette_control.control.trajectory.Trajectory` and
  ``marionette_interfaces/TrackedTrajectory`` (row-major flattened arrays,
  gains ``gains[(k*nU + j)*nx + i] = K[k, j, i]``).
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from marionette_control.control.trajectory import Trajectory, TrajectoryError


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
        self._q = np.empty(len(self.config_names))

    def read(self, msg) -> np.ndarray:
        """q (n,) from a JointState; raises JointStateError (missing/duplicate/NaN/length mismatch)."""
        names = list(msg.name)
        pos = msg.position
        if len(pos) != len(names):
            raise JointStateError("malformed", f"joint state has {len(names)} names but {len(pos)} positions")
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise JointStateError("duplicate_names", f"joint state names repeated: {', '.join(dup)}")
        found = 0
        q = self._q
        for name, value in zip(names, pos):
            i = self.hardware_to_index.get(name)
            if i is None:
                continue
            if not math.isfinite(value):
                raise JointStateError("non_finite", f"joint '{name}' position is {value}")
            q[i] = value
            found += 1
        if found != len(self.config_names):
            present = set(names)
            missing = [n for n in self.hardware_names if n not in present]
            raise JointStateError("missing_names", f"joint state lacks joint(s): {', '.join(missing)}")
        return q.copy()


def _flat(values) -> np.ndarray:
    return np.asarray(values, dtype=float)


def trajectory_to_msg(traj: Trajectory, msg_type, config_names, stamp=None, joint_trajectory_names=None):
    """TrackedTrajectory message of a trajectory (configurations also as a JointTrajectory view)."""
    from builtin_interfaces.msg import Duration
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

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
    m.cost = float(traj.info.get("cost", float("nan")))
    jt = JointTrajectory()
    jt.joint_names = list(joint_trajectory_names or config_names)
    nq = len(config_names)
    for k in range(traj.N + 1):
        t = k * traj.dt
        p = JointTrajectoryPoint()
        p.positions = traj.X[k, :nq].tolist()
        p.time_from_start = Duration(sec=int(t), nanosec=int(round((t - int(t)) * 1e9)) % 1_000_000_000)
        jt.points.append(p)
    m.configurations = jt
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
    return Trajectory(dt=float(msg.dt), X=X.reshape(N + 1, nx), U=U.reshape(N, nU),
                      state_names=list(msg.state_names), input_names=list(msg.input_names),
                      model_name=msg.model_id, model_hash=msg.model_hash,
                      K=K.reshape(N, nU, nx) if K.size else None, info=info)
