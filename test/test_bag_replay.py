"""Fault bags made from the golden bag, replayed offline: the controller's safe behaviour under bad joint states.

Each test writes a real bag (rosbag2, MCAP) in tmp_path: the golden bag with its /joint_states
edited — a gap longer than the watchdog timeout, NaN positions, reordered and missing joint
names, a duplicated stamp, two samples out of order — and the other topics copied unchanged.
The deterministic replay (marionette_control.bags.replay) of each must show

* no garbage command: every command finite and inside the actuator ranges; every tick's
  command equal to the golden replay's command of the same tick index k (same samples, same
  result); every hold command equal to the last tick command sent before it;
* the fault reported: the expected fault kind raised (and counted in the diagnostics status);
* recovery: ticks resume once two good samples Δt apart arrive, the fault clears, and the
  trajectory index keeps following the stamps (missed ticks counted).

Also here: the summary tool on the golden and fault bags, its plot, and the command-line tools.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from marionette_control.bags.bagio import BagWriter, MessageTypes, bag_info, read_bag
from marionette_control.bags.replay import (COMMANDS, JOINT_STATES, ReplayConfig, compare_commands,
                                            first_tick_stamp, recorded_commands, replay_bag)
from marionette_control.bags.summary import format_summary, summarize

GOLDEN = Path(__file__).parent / "data" / "golden"
BAG = GOLDEN / "bag"
TRAJECTORY = GOLDEN / "trajectory.npz"
NS = 1_000_000_000
DT_NS = 10_000_000
LOWER = np.array([-0.3, 0.15])  # carriage, string_length ranges of config/marionette_arm.yaml
UPPER = np.array([0.9, 1.1])


# --------------------------------------------------------------------------------------------- helpers


def stamp_of(msg) -> int:
    return int(msg.header.stamp.sec) * NS + int(msg.header.stamp.nanosec)


@pytest.fixture(scope="module")
def golden():
    res = replay_bag(BAG)
    assert not res.fault_counts
    return {"s0": first_tick_stamp(BAG), "ticks": {e.k: e.command for e in res.ticks}, "result": res,
            "samples": [(m.msg, m.log_time) for m in read_bag(BAG, [JOINT_STATES])]}


def index_of_tick(golden, k: int) -> int:
    """Index in the golden samples of the sample that is tick k."""
    want = golden["s0"] + k * DT_NS
    return next(i for i, (m, _) in enumerate(golden["samples"]) if stamp_of(m) == want)


def write_fault_bag(path: Path, samples) -> Path:
    """The golden bag with /joint_states replaced by ``samples`` [(rosbags JointState, log_time)]."""
    info = bag_info(BAG)
    types = MessageTypes()
    with BagWriter(path, types=types, custom_data=info.custom_data) as w:
        for name, t in info.topics.items():
            w.add_topic(name, t.msgtype, t.offered_qos)
        for m in read_bag(BAG):
            if m.topic != JOINT_STATES:
                w.write(m.topic, m.log_time, m.raw)
        for msg, log_time in samples:
            w.write(JOINT_STATES, log_time, types.serialize(msg, "sensor_msgs/msg/JointState"))
    return path


def replay_fault(path: Path):
    return replay_bag(path, TRAJECTORY)


SPEED = np.array([2.0, 1.5])  # m/s, the drives' speed and acceleration limits (config/marionette_arm.yaml)
ACCELERATION = np.array([15.0, 10.0])


def check_safe(res, golden):
    """No garbage command: finite, in range; every hold equal to the last command sent; the command stream within
    the drives' speed limit throughout and, from tick to tick, their acceleration limit; ticks before the first
    fault equal to the golden ones (the same samples give the same commands). After a fault the commands differ
    from the recording's: the estimate and the commands in flight have been through other samples and holds,
    and in a replay the recorded joint states cannot respond to the commands."""
    last = None
    assert res.sent, "nothing was sent"
    first = next((i for i, e in enumerate(res.events) if e.new_fault or e.missed), len(res.events))  # irregular
    before = {id(e) for e in res.events[:first]}
    ticks = []
    for e in res.sent:
        assert np.all(np.isfinite(e.command)), f"non-finite command {e}"
        assert np.all(e.command >= LOWER) and np.all(e.command <= UPPER), f"command out of range {e}"
        if last is not None:
            assert np.all(np.abs(e.command - last) <= SPEED * DT_NS / NS * (1 + 1e-9)), f"too fast: {e}"
        if e.kind == "tick":
            if id(e) in before:
                np.testing.assert_array_equal(e.command, golden["ticks"][e.k], err_msg=f"tick {e.k}")
            ticks.append(e)
        else:
            assert e.kind == "hold" and last is not None
            np.testing.assert_array_equal(e.command, last, err_msg="hold is not the last command sent")
        last = e.command
    for a, b, c in zip(ticks, ticks[1:], ticks[2:]):  # three consecutive slots
        if c.k - a.k == 2 and all(e is b or e.kind == "tick" for e in res.sent[res.sent.index(a):res.sent.index(c)]):
            acc = (c.command - 2 * b.command + a.command) / (DT_NS / NS) ** 2
            assert np.all(np.abs(acc) <= ACCELERATION * (1 + 1e-6)), f"acceleration {acc} at tick {c.k}"
    assert res.events[-1].fault is None, "the fault did not clear"
    np.testing.assert_allclose(res.sent[-1].command, golden["result"].sent[-1].command, atol=1e-9,
                               err_msg="not back at the final configuration")
    level, message, values = res.status
    assert message == "trajectory finished; holding the final state", message
    return {k: v for k, v in values}


def events_around(res, kind):
    """(index of the first event raising ``kind``, the events from there on)."""
    i = next(i for i, e in enumerate(res.events) if e.new_fault and e.fault == kind)
    return i, res.events[i:]


def replace_sample(msg, **changes):
    return dataclasses.replace(msg, **changes)


# --------------------------------------------------------------------------------------------- fault bags


def test_gap_longer_than_the_watchdog_holds_reports_stale_and_recovers(golden, tmp_path):
    samples = list(golden["samples"])
    first, last = index_of_tick(golden, 50), index_of_tick(golden, 64)
    cut = samples[:first] + samples[last + 1:]  # 150 ms without joint states; state_timeout 50 ms
    res = replay_fault(write_fault_bag(tmp_path / "gap", cut))
    status = check_safe(res, golden)
    i, after = events_around(res, "stale")
    stale = after[0]
    assert stale.source == "watchdog" and stale.kind == "hold"
    assert stale.time_ns - golden["samples"][first - 1][1] > 50_000_000  # raised past the timeout
    holds = [e for e in after if e.source == "watchdog" and e.kind == "hold"]
    assert 8 <= len(holds) <= 11, "one hold command per watchdog period while stale"
    gap = next(e for e in after if e.source == "sample")
    assert gap.kind == "hold" and gap.fault == "sample_gap" and gap.stamp_ns == golden["s0"] + 65 * DT_NS
    rec = next(e for e in after if e.recovered)
    assert rec.kind == "tick" and rec.k == 66 and rec.missed == 16
    assert res.fault_counts == {"stale": 1, "sample_gap": 1}
    assert status["faults.stale"] == "1" and status["missed_ticks"] == "16"
    assert sorted(e.k for e in res.ticks) == [k for k in sorted(golden["ticks"]) if not 50 <= k <= 65]


def test_nan_samples_are_rejected_held_and_recovered(golden, tmp_path):
    samples = list(golden["samples"])
    for k in (60, 61):
        i = index_of_tick(golden, k)
        msg, t = samples[i]
        pos = np.array(msg.position, dtype=float)
        pos[list(msg.name).index("elbow")] = math.nan
        samples[i] = (replace_sample(msg, position=pos), t)
    res = replay_fault(write_fault_bag(tmp_path / "nan", samples))
    check_safe(res, golden)
    i, after = events_around(res, "non_finite")
    # the Kalman filter predicts through the two rejected samples: the next valid one is a tick again
    assert [(e.stamp_ns - golden["s0"]) // DT_NS for e in after[:3]] == [60, 61, 62]
    assert [e.kind for e in after[:3]] == ["hold", "hold", "tick"]
    assert [e.fault for e in after[:2]] == ["non_finite", "non_finite"]
    assert "elbow" in after[0].message and after[2].recovered and after[2].k == 62 and after[2].missed == 2
    assert res.fault_counts == {"non_finite": 2}  # per rejected sample


def test_reordered_joint_names_change_nothing(golden, tmp_path):
    samples = [(replace_sample(m, name=list(m.name)[::-1], position=np.array(m.position)[::-1].copy()), t)
               for m, t in golden["samples"]]
    path = write_fault_bag(tmp_path / "reordered", samples)
    assert list(next(read_bag(path, [JOINT_STATES])).msg.name) == ["string_length", "carriage", "elbow", "shoulder"]
    res = replay_fault(path)
    check_safe(res, golden)
    assert res.fault_counts == {} and not res.holds
    cmp = compare_commands(res.commands(), recorded_commands(BAG), 0.0)
    assert cmp.ok, cmp.describe()


def test_missing_joint_names_are_rejected_held_and_recovered(golden, tmp_path):
    samples = list(golden["samples"])
    for k in (70, 71, 72):
        i = index_of_tick(golden, k)
        msg, t = samples[i]
        keep = [j for j, n in enumerate(msg.name) if n != "elbow"]
        samples[i] = (replace_sample(msg, name=[msg.name[j] for j in keep],
                                     position=np.array(msg.position)[keep].copy()), t)
    res = replay_fault(write_fault_bag(tmp_path / "missing", samples))
    check_safe(res, golden)
    i, after = events_around(res, "missing_names")
    assert "elbow" in after[0].message
    assert [e.kind for e in after[:4]] == ["hold", "hold", "hold", "tick"]
    assert after[3].recovered and after[3].k == 73 and after[3].missed == 3
    assert res.fault_counts == {"missing_names": 3}


def test_duplicated_stamp_is_rejected_and_the_next_tick_recovers(golden, tmp_path):
    samples = list(golden["samples"])
    i = index_of_tick(golden, 80)
    msg, t = samples[i]
    samples.insert(i + 1, (msg, t + 1))  # the same sample again, received 1 ns later
    res = replay_fault(write_fault_bag(tmp_path / "duplicate", samples))
    check_safe(res, golden)
    i, after = events_around(res, "duplicate_stamp")
    assert after[0].kind == "hold" and after[0].stamp_ns == golden["s0"] + 80 * DT_NS
    assert after[1].kind == "tick" and after[1].k == 81 and after[1].recovered and after[1].missed == 0
    assert res.fault_counts == {"duplicate_stamp": 1}
    # exactly one extra (hold) command, everything else as recorded
    recorded = recorded_commands(BAG)
    j = next(n for n, e in enumerate(res.sent) if e.kind == "hold")
    np.testing.assert_array_equal(np.delete(res.commands(), j, axis=0), recorded)


def test_out_of_order_stamps_are_rejected_and_the_controller_recovers(golden, tmp_path):
    samples = list(golden["samples"])
    i = index_of_tick(golden, 90)
    (a, ta), (b, tb) = samples[i], samples[i + 1]
    samples[i], samples[i + 1] = (b, ta), (a, tb)  # tick 91's sample arrives first
    res = replay_fault(write_fault_bag(tmp_path / "swapped", samples))
    check_safe(res, golden)
    i, after = events_around(res, "out_of_order")
    # tick 91 is computed over the missing sample 90 (the filter predicts through it), which then comes too late
    before = res.events[i - 1]
    assert before.stamp_ns == golden["s0"] + 91 * DT_NS and before.kind == "tick" and before.missed == 1
    assert after[0].stamp_ns == golden["s0"] + 90 * DT_NS and after[0].kind == "hold" and after[0].new_fault
    assert after[1].kind == "tick" and after[1].k == 92 and after[1].recovered and after[1].missed == 0
    assert res.fault_counts == {"out_of_order": 1}


def test_stamp_clock_replay_of_the_golden_bag_matches_too(golden):
    res = replay_bag(BAG, config=ReplayConfig(clock="stamp"))
    np.testing.assert_array_equal(res.commands(), golden["result"].commands())


# --------------------------------------------------------------------------------------------- summary, tools


def test_summary_counts_rates_gaps_and_stamp_problems(golden, tmp_path):
    s = summarize(BAG)
    js = s.topic(JOINT_STATES)
    log_times = np.array([t for _, t in golden["samples"]])
    assert js.count == len(golden["samples"]) and abs(js.median_period - 0.01) < 1e-9
    # the rate is the count over the span of the recorded log times (the bag's clock, not this machine's)
    assert js.rate == pytest.approx((len(log_times) - 1) / ((log_times[-1] - log_times[0]) * 1e-9), rel=1e-12)
    assert js.duplicate_stamps == 0 and js.out_of_order_stamps == 0
    assert s.topic(COMMANDS).count == len(recorded_commands(BAG)) and js.qos == "reliable/volatile"
    text = format_summary(s)
    assert JOINT_STATES in text and "sensor_msgs/msg/JointState" in text

    samples = list(golden["samples"])
    first, last = index_of_tick(golden, 50), index_of_tick(golden, 64)
    i = index_of_tick(golden, 100)
    msg, t = samples[i]
    edited = samples[:first] + samples[last + 1:i + 1] + [(msg, t + 1)] + samples[i + 1:]
    j = edited.index(samples[index_of_tick(golden, 120)])
    (a, ta), (b, tb) = edited[j], edited[j + 1]
    edited[j], edited[j + 1] = (b, ta), (a, tb)
    f = summarize(write_fault_bag(tmp_path / "faults", edited), min_gap=0.1).topic(JOINT_STATES)
    assert f.duplicate_stamps == 1 and f.out_of_order_stamps == 1
    assert [round(g.length, 3) for g in f.gaps] == [0.16]
    assert abs(f.max_gap - 0.16) < 1e-9


def test_plot_of_the_recorded_joint_trajectories(tmp_path):
    from marionette_control.cli import bag_summary

    out = tmp_path / "golden.png"
    assert bag_summary.main([str(BAG), "--plot", str(out)]) == 0
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_replay_and_summary_command_lines(golden, tmp_path, capsys):
    from marionette_control.cli import bag_replay, bag_summary

    assert bag_replay.main([str(BAG), "--compare", "--csv", str(tmp_path / "r.csv")]) == 0
    out = capsys.readouterr().out
    assert "commands reproduced; largest difference 0" in out
    assert len((tmp_path / "r.csv").read_text().splitlines()) == len(golden["ticks"]) + 1
    # a bag whose joint states went wrong no longer reproduces the recorded commands
    samples = list(golden["samples"])
    del samples[index_of_tick(golden, 30)]
    bad = write_fault_bag(tmp_path / "lost", samples)
    assert bag_replay.main([str(bad), "--trajectory", str(TRAJECTORY), "--compare"]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH" in out and "(1 missed)" in out
    assert bag_summary.main([str(BAG), "--json"]) == 0
    assert '"count": ' in capsys.readouterr().out
    assert bag_summary.main([str(tmp_path / "nope")]) == 1
    assert "no such bag directory" in capsys.readouterr().err
