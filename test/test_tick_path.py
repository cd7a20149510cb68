"""The controller's common tick in one native call (``_core.TickPath``) against the Python core it completes.

``ControllerCore.on_serialized`` gives every serialized joint state to the tick path first. It reads the
sample (the gate), checks its stamp, aligns it to the tick grid, finds its predecessor, runs the fused
tick and records the command, but only for an ordinary tick; anything else it leaves untouched (the
filter's state restored) and the Python core decides. What must hold, without ROS:

* the sample buffer (``SampleRing``) and the alignment (``TickAlignment``), the only implementation of
  those rules, do what the core's module docstring says ("Sample/tick alignment"), checked against a
  brute-force statement of it;
* a core with the tick path and one that reads every sample the Python way return identical results,
  sample by sample, on closed loops over the realistic stand-in. The loops cover injected faults,
  samples at twice the tick rate with lost samples, and a path tolerance the arm leaves. Most ticks
  take the tick path, and the tick that leaves the tolerance is declined *after* the kernel ran: the
  identical numbers in the abort's message show the filter was restored.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from marionette_control import _core
from marionette_control.tracking.controller import ControllerOptions, make_core
from marionette_control.sim.profile import HardwareProfile
from marionette_control.sim.simulator import SimulatedArm
from marionette_control.model.joint_map import JointMap
from marionette_control.tracking.joint_states import JointStateParser, JointStateReader

from arm_helpers import bump_trajectory

NS = 1_000_000_000
DT_NS = 10_000_000


# ------------------------------------------------------------------------------------------------ buffer, alignment

def test_ring_keeps_the_last_samples_and_finds_the_predecessor():
    """Random increasing stamps into rings of 2, 3 and 8: the newest, the oldest and, for random targets and
    tolerances, the predecessor are the brute-force ones (closest stamp within ±tol among the samples before the
    newest still stored, the newer of two equally close)."""
    rng = random.Random(5)
    for size in (2, 3, 8):
        ring = _core.SampleRing(size, 2)
        assert ring.count == 0 and ring.latest is None and ring.last_stamp is None and ring.predecessor(0, 10) == -1
        stamps: list[int] = []
        t = -50
        for i in range(60):
            t += rng.choice([1, 2, 5, 10, 10, 10, 30])
            stamps.append(t)
            ring.push(t, np.array([t, i], dtype=float))
            kept = stamps[-size:]
            assert ring.count == len(kept) and ring.last_stamp == t and ring.oldest_stamp == kept[0]
            np.testing.assert_array_equal(ring.latest, [t, i])
            for _ in range(10):
                target, tol = t - rng.randint(-5, 60), rng.randint(0, 8)
                near = [(abs(s - target), -s) for s in kept[:-1] if abs(s - target) <= tol]
                p = ring.predecessor(target, tol)
                if not near:
                    assert p == -1, (size, stamps, target, tol)
                else:
                    assert p >= 0 and ring.at(p)[0] == -min(near)[1], (size, kept, target, tol)
    with pytest.raises(ValueError, match="shape"):
        _core.SampleRing(4, 2).push(0, np.zeros(3))
    with pytest.raises(ValueError, match="at least 2"):
        _core.SampleRing(1, 2)


def test_alignment_follows_the_sample_clock():
    """k = k_prev + max(1, round((s − s_prev)/Δt)) from Δt − tol after the last tick on; tol narrowed to half the
    spacing of samples that come faster; the first tick of a run is 0."""
    a = _core.TickAlignment(10_000, 2_000)
    s = 1_000_000
    assert a.align(s, None, None, None) == (0, 2_000)
    assert a.align(s, s - 10_000, None, None) == (0, 2_000)
    assert a.align(s + 10_000, s, s, 5) == (6, 2_000)
    assert a.align(s + 8_000, s, s, 5) == (6, 2_000)      # early by tol: still the next tick
    assert a.align(s + 7_999, s, s, 5) == (-1, 2_000)     # earlier: between ticks
    assert a.align(s + 14_999, s, s, 5) == (6, 2_000)
    assert a.align(s + 15_000, s, s, 5) == (7, 2_000)     # a slot skipped: counted
    assert a.align(s + 30_400, s, s, 5) == (8, 2_000)
    # samples every 3 µs: tol 1.5 µs, so only one of them falls on each tick's window
    assert a.align(s + 8_400, s + 5_400, s, 5) == (-1, 1_500)
    assert a.align(s + 8_600, s + 5_600, s, 5) == (6, 1_500)
    for dt, tol in ((0, 0), (10, -1), (10, 6)):
        with pytest.raises(ValueError, match="tick alignment"):
            _core.TickAlignment(dt, tol)


# ------------------------------------------------------------------------------------------------ closed loops

class Counted:
    """The core's tick path, its outcomes counted: ticked (an ordinary tick completed), read (declined: the Python
    core took it), refused (the gate refused it)."""

    def __init__(self, path):
        self.path = path
        self.counts = dict.fromkeys(("ticked", "read", "refused"), 0)
        self.last = None

    def __getattr__(self, name):  # the rest of it as it is (set_timing, track)
        return getattr(self.path, name)

    def tick(self, *args):
        got = self.path.tick(*args)
        self.last = "refused" if got is None else "ticked" if len(got) == 5 else "read"
        self.counts[self.last] += 1
        return got


def fault_of(rng, stamp, names, q, data, cdr):
    """One of the faults a sample can carry (the gate's and the Python path's refusals, stamps, truncation)."""
    return rng.choice([
        lambda: cdr(stamp, names, [q[0], np.nan, q[2], q[3]]),
        lambda: cdr(stamp, names[1:], q[1:]),
        lambda: cdr(stamp, names + ["shoulder"], list(q) + [q[0]]),
        lambda: cdr(stamp, names, q + np.array([0.0, 0.0, 0.0, 0.06])),
        lambda: cdr(stamp, names, q + np.array([0.4, 0.0, 0.0, 0.0])),
        lambda: cdr(stamp, names, q + np.array([0.0, 0.0, -3.0, 0.0])),
        lambda: cdr(stamp - DT_NS, names, q),
        lambda: cdr(stamp - 2 * NS, names, q),
        lambda: data[:len(data) // 2],
        lambda: cdr(stamp, names[::-1], q[::-1], "base", little=False),
    ])()


def closed_loop(arm, cdr, options, *, per_step=1, fault_rate=0.0, lost=(), seed=11):
    """Two cores on the bytes of one closed loop over the realistic stand-in (one step of delay): one with the tick
    path (counted), one without; ``per_step`` samples per time step (stamps Δt/per_step apart), faults injected
    into a fraction ``fault_rate`` of them, the samples of the steps in ``lost`` lost. Every result is compared
    (fields exactly, commands and estimates bit for bit). Returns (core with the path, core without, counts,
    faults injected, the outcome of the path at each result whose fault was new)."""
    _, traj = bump_trajectory(0.01, 200, arm.model, options.command_delay_steps)
    reader = JointStateReader(JointMap.of(arm.model, arm.desc.hardware_joints))
    pathed, plain = make_core(arm.desc, options, reader), make_core(arm.desc, options, reader)
    plain.tick_path = None
    pathed.tick_path = counted = Counted(pathed.tick_path)
    parse = JointStateParser(cdr.deserialize).parse
    for core in (pathed, plain):
        core.load_trajectory(traj, "bump")
    sim = SimulatedArm(HardwareProfile.named("realistic", command_delay_steps=options.command_delay_steps), traj.dt,
                       nominal=arm.desc, q0=traj.X[0, :arm.model.nq])
    rng = random.Random(seed)
    names = list(reader.hardware_names)
    stamp = 50 * NS
    faults, at_new_fault = 0, []
    for step in range(traj.N + 40):
        if step == 5:
            assert pathed.start()[0] and plain.start()[0]
        q = sim.measure()
        for i in range(per_step):
            t = stamp + i * DT_NS // per_step
            if step in lost:
                continue
            data = cdr(t, names, q)
            if step > 5 and rng.random() < fault_rate:
                faults += 1
                data = fault_of(rng, t, names, q, data, cdr)
            a = pathed.on_serialized(data, t + 300_000, parse)
            b = plain.on_serialized(data, t + 300_000, parse)
            for field in ("kind", "k", "stamp_ns", "fault", "fault_message", "new_fault", "recovered", "missed",
                          "event"):
                assert getattr(a, field) == getattr(b, field), (step, i, field, getattr(a, field), getattr(b, field))
            assert (a.command is None) == (b.command is None)
            if a.kind == "tick":
                np.testing.assert_array_equal(a.x_hat, b.x_hat)
                np.testing.assert_array_equal(a.x_ref, b.x_ref)
            if a.new_fault:
                at_new_fault.append((a.fault, counted.last))
            if a.command is not None:
                np.testing.assert_array_equal(a.command, b.command)
                sim.receive_command(a.command[arm.model.nu:])
        sim.step()
        stamp += DT_NS
    assert pathed.fault_counts == plain.fault_counts and pathed.ticks == plain.ticks
    np.testing.assert_array_equal(pathed.tracking.history.last, plain.tracking.history.last)
    return pathed, plain, counted.counts, faults, at_new_fault


def test_faulty_samples_give_what_the_python_core_gives(arm, cdr):
    """12 % of the samples faulty (NaN, missing and repeated names, limits, jumps, a slack string, truncated bytes,
    repeated and old stamps, big-endian CDR): identical results; most ticks completed by the tick path (the tick
    after a fault, the start and the ticks past the end are the Python core's)."""
    pathed, _, counts, faults, _ = closed_loop(arm, cdr, ControllerOptions(command_delay_steps=1), fault_rate=0.12)
    assert faults > 15 and len(set(pathed.fault_counts) & {"non_finite", "missing_names", "out_of_limits"}) == 3
    assert pathed.ticks > 150 and counts["ticked"] > 0.6 * pathed.ticks and counts["refused"] > 0.5 * faults


def test_oversampled_samples_with_gaps_give_what_the_python_core_gives(arm, cdr):
    """Samples at twice the tick rate, 5 % faulty, 3 and 8 steps lost (bridged by the filter; longer than it
    bridges: a sample gap, the filter restarts from a predecessor): identical results, the ticks between taken by
    the tick path, the samples between ticks and the ticks after the gaps by the Python core."""
    options = ControllerOptions(command_delay_steps=1, state_timeout=0.05)
    lost = set(range(60, 63)) | set(range(120, 128))
    pathed, _, counts, _, _ = closed_loop(arm, cdr, options, per_step=2, fault_rate=0.05, lost=lost, seed=4)
    assert pathed.missed_ticks >= 10 and pathed.fault_counts.get("sample_gap", 0) >= 1
    assert pathed.ticks > 150 and counts["ticked"] > 0.7 * pathed.ticks and counts["read"] > pathed.ticks


def test_a_tick_beyond_the_path_tolerance_is_declined_after_the_kernel_and_decided_alike(arm, cdr):
    """A path tolerance the arm leaves (6 mrad on the elbow, which it leaves a few ticks into the run): the tick that
    leaves it runs the kernel in the tick path, which declines it; the Python core ticks it again from the restored
    filter and aborts with the same numbers as the core without the tick path (a filter not restored would have
    taken the sample twice)."""
    options = ControllerOptions(command_delay_steps=1, tolerances={"path": {"elbow": 6e-3}})
    pathed, plain, counts, _, at_new_fault = closed_loop(arm, cdr, options)
    assert pathed.aborted and plain.aborted and pathed.fault_counts == {"path_tolerance": 1}
    assert at_new_fault == [("path_tolerance", "read")] and counts["ticked"] >= 3
    assert pathed.active_faults == plain.active_faults


def test_tick_path_refuses_parts_that_do_not_fit(arm):
    """A buffer of another size of q, a kernel without its history: ValueError naming what does not fit; the sample
    must be bytes, and bytes too short to be a JointState are refused (None: the reference path explains)."""
    options = ControllerOptions(command_delay_steps=1)
    core = make_core(arm.desc, options, JointStateReader(JointMap.of(arm.model, arm.desc.hardware_joints)))
    core.load_trajectory(bump_trajectory(0.01, 50, arm.model, 1)[1], "bump")
    gate, kernel = core.checks.gate(arm.names), core.tracking.kernel
    with pytest.raises(ValueError, match="reads 4 configurations, the buffer holds 3"):
        _core.TickPath(gate, _core.SampleRing(8, 3))
    path = _core.TickPath(gate, _core.SampleRing(8, 4))
    with pytest.raises(ValueError, match="needs its command history"):
        path.track(kernel, None)
    with pytest.raises(TypeError):
        path.tick("not bytes", 0, None, None)
    assert path.tick(b"\x00\x01\x00\x00", 0, None, None) is None
