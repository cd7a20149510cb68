"""The recorder and the player: bags that ros2 bag tools and two independent readers agree on, and crash safety.

* Without ROS: the writer's periodic flushes leave complete chunks that ``repair`` turns back into a
  complete bag after a kill (a torn record at the tail is dropped), and a finished bag is left alone.
* Across processes (isolated graph): the recorder (``python -m marionette_control.cli.bag_record``)
  records three topics with different QoS from this test's publishers; stopped by SIGTERM in the
  middle of a stream, its bag is finalized and complete up to the signal, reads the same through
  ``rosbags`` and through ``mcap`` + ``mcap-ros2-support``, and stores each topic's offered QoS and
  type hash. Killed with SIGKILL, ``--repair`` recovers every message older than the flush interval.
* The player publishes the recorded bytes with the recorded relative timing (rate factor, topic
  selection, loop, /clock in bag time).
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from marionette_control.bags.bagio import BagError, BagWriter, bag_info, qos_from_values, read_bag, repair
from marionette_control.nodes.bag_recorder import RecorderProcess

GOLDEN_BAG = Path(__file__).parent / "data" / "golden" / "bag"
NS = 1_000_000_000


def mcap_messages(bag: Path) -> list:
    """(topic, log_time, raw bytes, decoded message) of a bag's MCAP file, read by the mcap packages."""
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    (path,) = bag.glob("*.mcap")
    out = []
    with open(path, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        for schema, channel, message, decoded in reader.iter_decoded_messages(log_time_order=True):
            out.append((channel.topic, message.log_time, bytes(message.data), decoded))
    return out


# --------------------------------------------------------------------------------------------- no ROS


def _joint_state_bytes(types, i: int) -> bytes:
    from rosbags.typesys.stores.ros2_kilted import (builtin_interfaces__msg__Time as Time,
                                                    sensor_msgs__msg__JointState as JointState,
                                                    std_msgs__msg__Header as Header)

    msg = JointState(Header(Time(i, 0), "base"), ["a", "b"], np.array([float(i), -float(i)]), np.zeros(0),
                     np.zeros(0))
    return types.serialize(msg, "sensor_msgs/msg/JointState")


def test_repair_recovers_every_flushed_chunk_and_drops_a_torn_tail(tmp_path):
    qos = qos_from_values(1, 10, 1, 1, 2**63 - 1, 2**63 - 1, 1, 2**63 - 1, False)  # reliable, transient local
    w = BagWriter(tmp_path / "live", flush_interval=3600.0)
    w.add_topic("/js", "sensor_msgs/msg/JointState", [qos])
    for i in range(150):
        w.write("/js", i * 1000, _joint_state_bytes(w.types, i))
        if i in (49, 119):
            assert w.flush()
    # a process killed now: what is on disk, as the OS has it, plus the first half of the chunk
    # that was being written when it died
    killed = tmp_path / "killed"
    shutil.copytree(tmp_path / "live", killed)
    flushed = (killed / "live.mcap").stat().st_size
    w.flush()  # the third chunk (messages 120-149), which the killed process did not finish writing
    third = (tmp_path / "live" / "live.mcap").read_bytes()[flushed:]
    assert third[0] == 0x06  # a chunk record
    with open(killed / "live.mcap", "ab") as f:
        f.write(third[:len(third) // 2])
    w.close()
    assert not (killed / "metadata.yaml").exists()
    with pytest.raises(BagError, match="marionette-bag-record --repair"):
        list(read_bag(killed))
    shutil.move(killed / "live.mcap", killed / "killed.mcap")  # the directory was renamed: still repairable
    rep = repair(killed)
    assert not rep.finalized and rep.counts == {"/js": 120} and rep.truncated_bytes == len(third) // 2
    assert rep.backup.name == "killed.mcap.damaged"
    msgs = list(read_bag(killed))
    assert [m.msg.header.stamp.sec for m in msgs] == list(range(120))
    assert [m.log_time for m in msgs] == [i * 1000 for i in range(120)]
    assert bag_info(killed).topics["/js"].offered_qos == [qos]
    assert [raw for _, _, raw, _ in mcap_messages(killed)] == [m.raw for m in msgs]
    # the complete original is left alone
    assert repair(tmp_path / "live").finalized
    assert len(list(read_bag(tmp_path / "live"))) == 150


def test_repair_without_any_flushed_chunk_says_so(tmp_path):
    w = BagWriter(tmp_path / "early", flush_interval=3600.0)
    w.add_topic("/js", "sensor_msgs/msg/JointState")
    w.write("/js", 1, _joint_state_bytes(w.types, 1))
    shutil.copytree(tmp_path / "early", tmp_path / "copy")
    w.close()
    with pytest.raises(BagError, match="no complete chunk"):
        repair(tmp_path / "copy")


# --------------------------------------------------------------------------------------------- ROS

import rclpy  # noqa: E402

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray, String  # noqa: E402

from ros_helpers import isolated_ros, wait_for  # noqa: E402


class Source:
    """Publishers in the test process: a numbered JointState stream (reliable), a latched String
    (reliable, transient local) and a best-effort Float64MultiArray."""

    def __init__(self):
        self.context = rclpy.context.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("bag_source", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        n = self.node
        self.js = n.create_publisher(JointState, "/joint_states", QoSProfile(depth=100,
                                                                              reliability=ReliabilityPolicy.RELIABLE))
        self.latched = n.create_publisher(String, "/latched", QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL))
        self.lossy = n.create_publisher(Float64MultiArray, "/lossy", QoSProfile(
            depth=10, reliability=ReliabilityPolicy.BEST_EFFORT))
        self.sent = []  # indices published so far

    def publish(self, i: int):
        m = JointState()
        m.header.stamp.sec, m.header.stamp.nanosec = 1000 + i // 1000, (i % 1000) * 1_000_000
        m.name = ["shoulder", "elbow"]
        m.position = [float(i), 0.5 * i]
        self.js.publish(m)
        if i % 10 == 0:
            self.lossy.publish(Float64MultiArray(data=[float(i)]))
        self.sent.append(i)

    def stream(self, stop: threading.Event, period: float = 0.004):
        i = 0
        while not stop.is_set():
            self.publish(i)
            i += 1
            time.sleep(period)

    def close(self):
        self.executor.shutdown()
        self.node.destroy_node()
        self.context.try_shutdown()


def flushed_on_disk(bag, snapshot) -> int:
    """The highest joint-state index the live recording has on disk: a copy of it, repaired and read.

    The recorder only appends, so whatever the copy holds the file still holds when the recorder is
    killed afterwards."""

    def recovered():
        shutil.rmtree(snapshot, ignore_errors=True)
        shutil.copytree(bag, snapshot)
        repair(snapshot, keep_backup=False)
        return [int(m.msg.position[0]) for m in read_bag(snapshot, ["/joint_states"])]

    found = []
    assert wait_for(lambda: found.append(max(recovered(), default=-1)) or found[-1] >= 0, 20.0), (
        "no flushed chunk with a joint state on disk")
    return found[-1]


def run_until_signal(tmp_path, sig) -> dict:
    """Records a stream and signals the recorder mid-stream; what the test needs to judge the bag."""
    bag = tmp_path / "bag"
    with isolated_ros() as env:
        src = Source()
        proc = None
        try:
            src.latched.publish(String(data="latched before the recorder started"))
            rec = RecorderProcess(bag, ["/joint_states", "/latched", "/lossy"], ["--flush-interval", "0.2"],
                                  env=env).start()
            proc, log = rec.proc, rec.log_path
            assert rec.wait_recording(timeout=40.0), rec.output()
            assert wait_for(lambda: src.js.get_subscription_count() > 0, 10.0)
            stop = threading.Event()
            th = threading.Thread(target=src.stream, args=(stop,))
            th.start()
            time.sleep(1.0)
            flushed = flushed_on_disk(bag, tmp_path / "snapshot") if sig == signal.SIGKILL else None
            before = src.sent[-1]  # published before the signal
            os.killpg(proc.pid, sig)
            time.sleep(0.3)  # the stream goes on after the signal
            stop.set()
            th.join()
            code = proc.wait(20.0)
        finally:
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            if proc is not None:
                rec.stop()  # closes its log
            src.close()
    return {"bag": bag, "code": code, "log": log.read_text(), "before": before, "flushed": flushed}


def test_sigterm_mid_stream_leaves_a_complete_bag_that_both_readers_agree_on(tmp_path):
    r = run_until_signal(tmp_path, signal.SIGTERM)
    bag, log = r["bag"], r["log"]
    assert r["code"] == 0, log
    assert "SIGTERM: stopping" in log and (bag / "metadata.yaml").is_file()
    info = bag_info(bag)
    assert info.version == 9 and info.storage == "mcap"
    msgs = list(read_bag(bag))
    js = [m for m in msgs if m.topic == "/joint_states"]
    idx = [int(m.msg.position[0]) for m in js]
    # complete up to the signal: every message published before it, in order, without a hole
    assert idx == list(range(len(idx))) and idx[-1] >= r["before"], (idx[-5:], r["before"])
    assert js[0].msg.name == ["shoulder", "elbow"] and js[0].msg.header.stamp.sec == 1000
    latched = [m.msg.data for m in msgs if m.topic == "/latched"]
    assert latched == ["latched before the recorder started"]
    assert any(m.topic == "/lossy" for m in msgs)
    assert info.topics["/joint_states"].count == len(js)
    # the independent reader sees the same messages, bytes and log times
    other = mcap_messages(bag)
    assert [(t, lt, raw) for t, lt, raw, _ in other] == [(m.topic, m.log_time, m.raw) for m in msgs]
    for (_, _, _, dec), m in zip(other, msgs):
        if m.topic == "/joint_states":
            assert list(dec.name) == list(m.msg.name) and list(dec.position) == list(m.msg.position)
            assert (dec.header.stamp.sec, dec.header.stamp.nanosec) == (m.msg.header.stamp.sec,
                                                                      m.msg.header.stamp.nanosec)
    # offered QoS and type hashes as the publishers announced them
    q = {t: (v.offered_qos[0].reliability.name, v.offered_qos[0].durability.name) for t, v in info.topics.items()}
    assert q == {"/joint_states": ("RELIABLE", "VOLATILE"), "/latched": ("RELIABLE", "TRANSIENT_LOCAL"),
                 "/lossy": ("BEST_EFFORT", "VOLATILE")}
    assert all(len(v.offered_qos) == 1 for v in info.topics.values())
    assert info.topics["/joint_states"].type_hash == \
        "RIHS01_a13ee3a330e346c9d87b5aa18d24e11690752bd33a0350f11c5882bc9179260e"
    meta = (bag / "metadata.yaml").read_text()
    assert "offered_qos_profiles" in meta and "transient_local" in meta and "best_effort" in meta


def test_sigkill_then_repair_recovers_everything_older_than_the_flush_interval(tmp_path):
    r = run_until_signal(tmp_path, signal.SIGKILL)
    bag = r["bag"]
    assert r["code"] == -signal.SIGKILL
    assert not (bag / "metadata.yaml").exists()
    with pytest.raises(BagError, match="--repair"):
        bag_info(bag)
    from marionette_control.cli import bag_record

    assert bag_record.main(["--repair", str(bag)]) == 0
    js = list(read_bag(bag, ["/joint_states"]))
    idx = [int(m.msg.position[0]) for m in js]
    assert idx == list(range(len(idx)))
    # everything that was on disk before the kill (seen in a repaired copy taken then) is recovered
    assert idx[-1] >= r["flushed"], (idx[-1], r["flushed"], r["before"])
    assert [raw for t, _, raw, _ in mcap_messages(bag) if t == "/joint_states"] == [m.raw for m in js]
    assert bag_info(bag).topics["/latched"].offered_qos[0].durability.name == "TRANSIENT_LOCAL"


def test_player_keeps_relative_timing_rate_selection_loop_and_clock():
    from rosgraph_msgs.msg import Clock

    from marionette_control.nodes.bag_player import Player

    info = bag_info(GOLDEN_BAG)
    msgs = list(read_bag(GOLDEN_BAG, ["/joint_states"]))
    offset = msgs[-60].log_time - info.start_ns  # the last 60 joint states (~0.6 s)
    expected = msgs[-60:]
    with isolated_ros():
        ctx_sub, ctx_pub = rclpy.context.Context(), rclpy.context.Context()
        rclpy.init(context=ctx_sub)
        rclpy.init(context=ctx_pub)
        sub_node = rclpy.create_node("play_probe", context=ctx_sub)
        pub_node = rclpy.create_node("play_source", context=ctx_pub)
        ex = SingleThreadedExecutor(context=ctx_sub)
        ex.add_node(sub_node)
        got, clocks = [], []
        reliable = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        sub_node.create_subscription(JointState, "/replayed", got.append, reliable, raw=True)
        sub_node.create_subscription(Clock, "/clock", lambda m: clocks.append(m.clock.sec * NS + m.clock.nanosec),
                                     reliable)
        stop = threading.Event()
        player = Player(pub_node, GOLDEN_BAG, topics=["/joint_states"], rate=2.0, loop=True, clock_hz=50.0,
                        start_offset_ns=offset, wait_for_subscribers=20.0, remap={"/joint_states": "/replayed"},
                        log=lambda s: None)
        result = {}
        th = threading.Thread(target=lambda: result.update(stats=player.play(stop.is_set)))
        try:
            th.start()
            assert wait_for(lambda: len(got) >= 2 * len(expected), 30.0,
                            spin=lambda: ex.spin_once(timeout_sec=0.01)), len(got)
            stop.set()
            th.join(10.0)
        finally:
            stop.set()
            ex.shutdown()
            sub_node.destroy_node()
            pub_node.destroy_node()
            ctx_sub.try_shutdown()
            ctx_pub.try_shutdown()
    stats = result["stats"]
    assert stats.loops >= 1 and stats.stopped
    first = list(got[:len(expected)])
    assert first == [m.raw for m in expected], "the recorded bytes, unchanged"
    assert list(got[len(expected):2 * len(expected)]) == first, "looped"
    # timing at rate 2, in bag time: each message is scheduled at its log time's offset / 2 (the second loop
    # after the first's end), and none goes out before its time. How late they go out is the machine's
    # (bag_play reports it; no wall-clock bound is asserted here).
    t_bag = (np.array([m.log_time for m in expected]) - expected[0].log_time) / NS
    schedule = np.array(stats.schedule)
    np.testing.assert_allclose(schedule[:len(expected)], t_bag / 2.0, rtol=0, atol=1e-9)
    np.testing.assert_allclose(np.diff(schedule[len(expected):2 * len(expected)]), np.diff(t_bag) / 2.0, rtol=0,
                               atol=1e-9)
    assert schedule[len(expected)] > schedule[len(expected) - 1], "the second loop starts after the first ends"
    assert min(stats.lateness) >= 0.0, "no message went out ahead of its schedule"
    # /clock in bag time, never ahead of a message's log time when that message arrives
    assert clocks[0] == expected[0].log_time and expected[-1].log_time in clocks
    assert all(expected[0].log_time <= c <= expected[-1].log_time for c in clocks)
