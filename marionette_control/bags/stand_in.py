"""A motion run on the hardware stand-in offline and written as the bag the recorder would have written.

:func:`run_open_loop` sends a trajectory's commands to the stand-in (:class:`~marionette_control.sim.simulator.
SimulatedArm`: its plant, drives, encoders and one-sided string) one per cycle; :func:`write_bag` writes encoder
readings (and commands) as the rosbag2 directory ``marionette-bag-record`` writes from the live graph
(``/joint_states`` sensor_msgs/JointState stamped by their headers, ``/forward_position_controller/commands``
std_msgs/Float64MultiArray), serialized by rosbags. The calibration's tests and benchmark use them: seconds
instead of a ROS graph, the same bytes for the calibrator, which reads only the bag.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
from rosbags.typesys import Stores, get_typestore

from marionette_control.bags.bagio import BagWriter
from marionette_control.model.joint_map import JointMap
from marionette_control.model.library import marionette_arm
from marionette_control.sim.profile import HardwareProfile
from marionette_control.sim.simulator import SimulatedArm
from marionette_control.trajectory import Trajectory

NS = 1_000_000_000
JOINT_STATES = "/joint_states"
COMMANDS = "/forward_position_controller/commands"


def run_open_loop(trajectory: Trajectory, plant: str, seed: int = 0, noise_scale: float = 1.0):
    """The trajectory's commands sent to the stand-in (realistic profile with ``plant``), one per cycle:
    (measured q (N+1, nq), commands (N, nk), true q (N+1, nq), the arm)."""
    profile = HardwareProfile.named("realistic").replace(plant_model_file=plant, seed=seed)
    if noise_scale != 1.0:
        profile = profile.replace(noise_std=tuple(np.asarray(profile.noise_std, dtype=float) * noise_scale))
    nq = marionette_arm.load_description().model.nq
    arm = SimulatedArm(profile, trajectory.dt, q0=trajectory.X[0, :nq])
    nu = trajectory.U.shape[1] - arm.nk
    Q, Qt, C = [], [], []
    for k in range(trajectory.N):
        Q.append(arm.measure())
        Qt.append(arm.q.copy())
        C.append(trajectory.U[k, nu:])
        arm.receive_command(trajectory.U[k, nu:])
        arm.step()
    Q.append(arm.measure())
    Qt.append(arm.q.copy())
    return np.array(Q), np.array(C), np.array(Qt), arm


def write_bag(path: Path, description, dt: float, Q: np.ndarray, commands: Optional[np.ndarray] = None,
              t0_ns: int = 1_000 * NS, keep: Optional[np.ndarray] = None, topic: str = JOINT_STATES) -> Path:
    """A bag of the joint states Q (N+1, nq; the samples where ``keep`` is True) at t0 + k dt and the commands
    (answering sample k, logged 1 ms after it)."""
    ts = get_typestore(Stores.ROS2_KILTED)
    T = ts.types
    names = JointMap.of(description.model, description.hardware_joints).hardware_names
    with BagWriter(path) as bag:
        bag.add_topic(topic, "sensor_msgs/msg/JointState")
        if commands is not None:
            bag.add_topic(COMMANDS, "std_msgs/msg/Float64MultiArray")
        for k, q in enumerate(Q):
            if keep is not None and not keep[k]:
                continue
            stamp = t0_ns + int(round(k * dt * NS))
            sec, nanosec = divmod(stamp, NS)
            msg = T["sensor_msgs/msg/JointState"](
                header=T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec),
                                                frame_id=""),
                name=list(names), position=np.asarray(q, dtype=float), velocity=np.zeros(len(names)),
                effort=np.array([]))
            bag.write(topic, stamp + 100_000, bytes(ts.serialize_cdr(msg, "sensor_msgs/msg/JointState")))
            if commands is not None and k < len(commands):
                layout = T["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
                cmd = T["std_msgs/msg/Float64MultiArray"](layout=layout, data=np.asarray(commands[k], dtype=float))
                bag.write(COMMANDS, stamp + 1_000_000, bytes(ts.serialize_cdr(cmd, "std_msgs/msg/Float64MultiArray")))
    return path
