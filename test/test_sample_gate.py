"""The controller's native sample path (``_core.SampleGate``) against the Python path it compiles.

The gate reads a serialized JointState (plain little-endian CDR), maps it by joint name and applies
the plausibility checks in one call; anything it does not pass goes the Python way
(``tracking.joint_states.JointStateParser`` → ``JointStateReader`` → ``tracking.sample_checks.SampleChecks``),
which decides and explains. What must hold, and is checked here without ROS (the messages are
written by rosbags' CDR serializer, an encoder independent of both readers):

* every sample the gate passes gives exactly the stamp and q the Python path gives;
* every sample the Python path refuses, the gate refuses too (it may refuse more: big-endian CDR,
  which the Python path then reads).

The controller's whole tick path over the gate (``_core.TickPath``) is held to the Python core in
``test_tick_path.py``.

The command the controller publishes is serialized by hand too (``nodes.convert.multi_array_bytes``):
rosbags reads it back.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from marionette_control.tracking.sample_checks import SampleChecks
from marionette_control.model.library import marionette_arm as ma
from marionette_control.model.joint_map import JointMap
from marionette_control.tracking.joint_states import JointStateParser, JointStateReader

NS = 1_000_000_000
DT_NS = 10_000_000


def reference(arm, cdr, hardware_joints=None):
    """The Python path: parser (fallback: rosbags' deserializer), reader, checks."""
    reader = JointStateReader(JointMap.of(arm.model, hardware_joints or arm.desc.hardware_joints))
    return JointStateParser(cdr.deserialize), reader, SampleChecks(arm.model, arm.limits)


def python_path(parser, reader, checks, data: bytes, last):
    """(stamp_ns, q) the Python path accepts, else the reason (fault kind or the exception's type)."""
    try:
        sample = parser.parse(data)
    except Exception as e:  # noqa: BLE001 (what the core calls malformed)
        return type(e).__name__
    try:
        q = reader.read(sample)
    except ValueError as e:
        return e.kind
    stamp, q_last = (None, None) if last is None else last
    if stamp is not None and sample.stamp_ns <= stamp:
        return "stamp"
    bad = checks.check(q, q_last, 0.0 if stamp is None else (sample.stamp_ns - stamp) / NS)
    return bad[0] if bad is not None else (sample.stamp_ns, q)


def test_gate_passes_exactly_what_the_python_path_reads(arm, cdr):
    """Plain samples with every padding of the frame id, names in any order, extra joints (one NaN): the gate's
    stamp and q are the Python path's, bit for bit; names given again take the cached order."""
    rng = random.Random(3)
    q0 = ma.static_equilibrium(arm.model, *ma.LOWERED).q
    renamed = {f"arm/{n}": c for n, c in arm.desc.hardware_joints.items()}
    for mapping in (None, renamed):
        parser, reader, checks = reference(arm, cdr, mapping)
        gate = checks.gate(reader.hardware_names)
        for i in range(200):
            names = list(reader.hardware_names) + (["gripper", "wrist_é"][:rng.randint(0, 2)])
            position = list(q0 + rng.uniform(-1e-3, 1e-3)) + [float("nan"), 0.5][:len(names) - 4]
            order = list(range(len(names)))
            if i % 3:
                rng.shuffle(order)
            stamp = rng.randint(-2**31, 2**31 - 1) * NS + rng.randint(0, NS - 1)
            data = cdr(stamp, [names[j] for j in order], [position[j] for j in order], "f" * rng.randint(0, 9))
            got = gate.read(data, None, None)
            want = python_path(parser, reader, checks, data, None)
            assert got is not None, f"refused {names} in order {order}"
            assert got[0] == want[0] and got[1].dtype == float and got[1].shape == (4,)
            np.testing.assert_array_equal(got[1], want[1])
            again = gate.read(data, got[0] - DT_NS, got[1])  # the cached name order, with the jump check
            assert again is not None and again[0] == got[0]


def test_gate_refuses_every_sample_the_python_path_refuses(arm, cdr):
    """Each refusal of the Python path, one by one: the gate refuses it too (and big-endian CDR, which only the
    Python path reads)."""
    parser, reader, checks = reference(arm, cdr)
    gate = checks.gate(reader.hardware_names)
    names = list(reader.hardware_names)
    q = ma.static_equilibrium(arm.model, *ma.LOWERED).q
    t = 100 * NS
    last = (t - DT_NS, q)
    good = cdr(t, names, q)
    non_utf8 = good.replace(b"carriage\x00", b"carri\xffge\x00")
    cases = {
        "non_finite": cdr(t, names, [q[0], np.nan, q[2], q[3]]),
        "missing_names": cdr(t, names[:3], q[:3]),
        "duplicate_names": cdr(t, names + ["elbow"], list(q) + [q[1]]),
        "malformed": cdr(t, names, q)[:-48],  # truncated inside the positions (the last 40 bytes: velocity, effort)
        "out_of_limits": cdr(t, names, q + np.array([0.0, 0.0, 5.0, 0.0])),
        "implausible_jump": cdr(t, names, q + np.array([0.3, 0.0, 0.0, 0.0])),
        "chain_inconsistent": cdr(t, names, q + np.array([0.0, 0.0, 0.0, 0.05])),
        "stamp": cdr(t - DT_NS, names, q),  # the core: duplicate_stamp
        "utf8": non_utf8,
        "other_encapsulation": b"\x00\x07" + good[2:],
    }
    for kind, data in cases.items():
        before = None if kind in ("out_of_limits", "chain_inconsistent") else last  # (else also a jump)
        want = python_path(parser, reader, checks, data, before)
        assert isinstance(want, str), f"{kind}: the Python path accepted it"
        if kind not in ("malformed", "utf8", "other_encapsulation"):
            assert want == kind
        assert gate.read(data, *(before or (None, None))) is None, kind
    assert gate.read(good, *last) is not None
    big = cdr(t, names, q, little=False)
    assert gate.read(big, *last) is None
    np.testing.assert_array_equal(python_path(parser, reader, checks, big, last)[1], q)
    with pytest.raises(ValueError, match="expected"):
        gate.read(good, t - DT_NS, q[:3])


def test_command_bytes_are_the_float64_multi_array_rosbags_reads(cdr):
    """The controller's command, serialized by hand: rosbags' deserializer reads the data back bit for bit, and
    rosbags' serializer writes the same bytes (but for the padding, which both leave free)."""
    from rosbags.typesys import Stores, get_typestore

    from marionette_control.nodes.convert import multi_array_bytes

    ts = get_typestore(Stores.ROS2_KILTED)
    T = ts.types
    for u in (np.array([0.125, -1e-300]), np.arange(5.0) / 3, np.zeros(0)):
        data = multi_array_bytes(u)
        m = ts.deserialize_cdr(data, "std_msgs/msg/Float64MultiArray")
        assert list(m.layout.dim) == [] and m.layout.data_offset == 0
        np.testing.assert_array_equal(m.data, u)
        ref = bytes(ts.serialize_cdr(T["std_msgs/msg/Float64MultiArray"](
            layout=T["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0), data=u), "std_msgs/msg/Float64MultiArray"))
        assert len(ref) == len(data) and ref[:16] == data[:16] and ref[20:] == data[20:]


def test_gate_construction_refuses_what_does_not_fit(arm):
    from marionette_control import _core

    checks = SampleChecks(arm.model, arm.limits)
    with pytest.raises(ValueError, match="4 configurations"):
        checks.gate(arm.names[:3])
    with pytest.raises(ValueError, match="named twice"):
        checks.gate(["shoulder", "shoulder", "carriage", "string_length"])
    with pytest.raises(ValueError, match="NaN"):
        _core.SampleGate(arm.model, arm.names, checks.lower * np.nan, checks.upper, checks.speed, 0.02, 0.01)
