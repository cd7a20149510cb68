"""Fixtures of the tests of the controller's sample path (conftest makes them every module's): the arm's model
and hardware names, and serialized JointStates written by rosbags' CDR serializer (an encoder independent of the
controller's readers). No ROS module is imported."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from marionette_control.model.limits import from_description
from marionette_control.model.library import marionette_arm as ma
from marionette_control.model.joint_map import JointMap
from marionette_control.tracking.joint_states import JointStateReader

NS = 1_000_000_000


@pytest.fixture(scope="module")
def cdr():
    """write(stamp_ns, names, position, frame_id="", little=True) -> the bytes of a sensor_msgs/JointState;
    write.deserialize: rosbags' reader of them."""
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_KILTED)
    T = ts.types
    JointState = T["sensor_msgs/msg/JointState"]

    def write(stamp_ns: int, names, position, frame_id: str = "", little: bool = True) -> bytes:
        sec, nanosec = divmod(int(stamp_ns), NS)
        msg = JointState(header=T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec),
                                                          frame_id=frame_id),
                         name=list(names), position=np.asarray(position, dtype=float), velocity=np.zeros(len(names)),
                         effort=np.array([]))
        return bytes(ts.serialize_cdr(msg, "sensor_msgs/msg/JointState", little_endian=little))

    write.deserialize = lambda data: ts.deserialize_cdr(data, "sensor_msgs/msg/JointState")
    return write


@pytest.fixture(scope="module")
def arm():
    """The marionette arm: desc, model, limits and its hardware joint names (model order)."""
    desc = ma.load_description()
    return SimpleNamespace(desc=desc, model=desc.model, limits=from_description(desc),
                           names=list(JointStateReader(JointMap.of(desc.model, desc.hardware_joints)).hardware_names))
