"""Live replay: publish a bag's messages on the graph with their original relative timing (``ros2 bag play``).

:class:`Player` publishes the recorded CDR bytes unchanged (raw publishers: header stamps
and contents are exactly the recorded ones) at

    wall time = t₀ + (log time − bag start) / rate,

where t₀ is when playback starts and "bag start" the log time of the first played
message (``start_offset`` skips that far into the bag). Options: topic selection
(``topics``/``exclude``), remapping, ``rate``, ``loop``, a ``delay`` before the first
message, waiting for subscribers, and a ``/clock``.

QoS: each topic's publisher takes the QoS the recorded publishers offered (reliable and
transient-local only when every recorded offer was), history keep-last ``qos_depth``; at
the end the player waits (at most ``ack_timeout``) until reliable subscribers acknowledged
every message, so the last messages are not lost by tearing the publishers down.

Clock (``clock_hz``)
--------------------
The player then also publishes ``/clock`` (rosgraph_msgs/Clock) in bag time: once at the
start (bag start, before the ``delay``), every ``1/clock_hz`` of bag time, and immediately
before each message with that message's log time. Nodes with ``use_sim_time`` therefore see
the same clock reading at each message as the recorder did when it logged it — what the
deterministic offline replay (``replay.py``) uses as "now". A recorded ``/clock`` topic is
not played when the player makes its own.

Lateness (how far behind its scheduled wall time each message went out) is measured and
reported; it is the only timing difference between a live replay and the recording.
"""

from __future__ import annotations

import itertools
import re
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional

import numpy as np
from rosbags.interfaces import QosDurability, QosReliability
from rosgraph_msgs.msg import Clock

from marionette_control import validation
from marionette_control.bags.bagio import NS, BagError, MessageTypes, bag_info, read_bag
from marionette_control.nodes.bag_recorder import message_class
from marionette_control.nodes.process import StopFlag

NODE_NAME = "marionette_bag_player"


def publisher_qos(offers, depth: int):
    """rclpy QoSProfile for replaying a topic recorded with these offered profiles (rosbags Qos list)."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    reliable = not offers or all(o.reliability == QosReliability.RELIABLE for o in offers)
    transient = bool(offers) and all(o.durability == QosDurability.TRANSIENT_LOCAL for o in offers)
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth,
                      reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL if transient else DurabilityPolicy.VOLATILE)


def parse_remap(items: Iterable[str]) -> dict:
    """['FROM:=TO', ...] -> {FROM: TO} (ValueError on a malformed item)."""
    out = {}
    for item in items or ():
        src, sep, dst = item.partition(":=")
        if not sep or not src or not dst:
            raise ValueError(f"a remapping is FROM:=TO, got {item!r}")
        out[src if src.startswith("/") else "/" + src] = dst if dst.startswith("/") else "/" + dst
    return out


@dataclass
class PlayStats:
    """What a playback did: messages per (output) topic, clock messages, and per message its scheduled time
    (``schedule``: wall seconds after the start of playback, (log time − bag start)/rate plus the loops before)
    and its lateness (s, how long after that it went out)."""

    counts: dict = field(default_factory=dict)
    clock_messages: int = 0
    schedule: list = field(default_factory=list)
    lateness: list = field(default_factory=list)
    loops: int = 0
    stopped: bool = False
    unacked: list = field(default_factory=list)

    @property
    def message_count(self) -> int:
        return sum(self.counts.values())

    def lateness_summary(self) -> str:
        if not self.lateness:
            return "no messages"
        a = np.asarray(self.lateness) * 1e3
        return f"lateness median {np.median(a):.3f} ms, p99 {np.percentile(a, 99):.3f} ms, max {a.max():.3f} ms"


class Player:
    """Publishes a bag on the graph (see the module docstring).

    Parameters
    ----------
    node : rclpy Node to publish with (its clock is not used: playback runs on the wall clock).
    bag : bag directory.
    topics : topics to play (default all); exclude : regular expression of topics not played.
    rate : playback speed factor (> 0). loop : start over at the end until stopped.
    clock_hz : publish /clock at this rate of bag time (and before each message); None: no clock.
    start_offset_ns : skip this much of the bag (from its first message's log time).
    delay : seconds between setting up (and the first /clock) and the first message.
    wait_for_subscribers : seconds to wait until every publisher has a subscriber (0: don't wait).
    remap : {recorded topic: published topic}.
    """

    def __init__(self, node, bag, topics: Optional[Iterable[str]] = None, exclude: Optional[str] = None,
                 rate: float = 1.0, loop: bool = False, clock_hz: Optional[float] = None, start_offset_ns: int = 0,
                 delay: float = 0.0, wait_for_subscribers: float = 0.0, remap: Optional[dict] = None,
                 qos_depth: int = 1000, ack_timeout: float = 2.0, log: Callable[[str], None] = print):
        validation.positive(rate, "rate")
        if clock_hz is not None:
            validation.positive(clock_hz, "the clock rate [Hz]")
        if start_offset_ns < 0 or delay < 0 or wait_for_subscribers < 0:
            raise ValueError("start offset, delay and wait time must be >= 0")
        self.node = node
        self.info = bag_info(bag)
        self.bag = self.info.path
        wanted = set(self.info.topics) if topics is None else {t if t.startswith("/") else "/" + t for t in topics}
        missing = sorted(wanted - set(self.info.topics))
        if missing:
            raise BagError(f"{self.bag}: no topic {', '.join(missing)} in the bag (it has "
                           f"{', '.join(sorted(self.info.topics))})")
        ex = re.compile(exclude) if exclude else None
        if ex is not None:
            wanted = {t for t in wanted if not ex.search(t)}
        if clock_hz is not None and "/clock" in wanted:
            wanted.discard("/clock")
            log("not playing the recorded /clock: the player publishes its own")
        self.topics = sorted(wanted)
        self.rate = float(rate)
        self.loop = bool(loop)
        self.clock_hz = clock_hz
        self.start_offset_ns = int(start_offset_ns)
        self.delay = float(delay)
        self.wait_for_subscribers = float(wait_for_subscribers)
        self.remap = dict(remap or {})
        self.ack_timeout = float(ack_timeout)
        self.log = log
        self.publishers = {}
        skipped = []
        for t in self.topics:
            ti = self.info.topics[t]
            try:
                cls = message_class(ti.msgtype)
            except ImportError as e:
                skipped.append(t)
                log(f"warning: {e}; {t} is not played")
                continue
            out = self.remap.get(t, t)
            self.publishers[t] = (out, node.create_publisher(cls, out, publisher_qos(ti.offered_qos, qos_depth)))
        self.topics = [t for t in self.topics if t not in skipped]
        self._clock_pub = None
        if clock_hz is not None:
            from rclpy.qos import QoSProfile, ReliabilityPolicy

            self._Clock = Clock
            self._clock_pub = node.create_publisher(Clock, "/clock",
                                                    QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE))
        self._last_clock = None

    # ------------------------------------------------------------------------------------------------

    def _publish_clock(self, t_ns: int, stats: PlayStats) -> None:
        m = self._Clock()
        m.clock.sec, m.clock.nanosec = divmod(int(t_ns), NS)
        self._clock_pub.publish(m)
        self._last_clock = t_ns
        stats.clock_messages += 1

    def _wait_for_subscribers(self, should_stop) -> bool:
        pubs = [p for _, p in self.publishers.values()] + ([self._clock_pub] if self._clock_pub else [])
        end = time.monotonic() + self.wait_for_subscribers
        while time.monotonic() < end and not should_stop():
            if all(p.get_subscription_count() > 0 for p in pubs):
                return True
            time.sleep(0.02)
        lonely = [out for out, p in self.publishers.values() if p.get_subscription_count() == 0]
        if self._clock_pub is not None and self._clock_pub.get_subscription_count() == 0:
            lonely.append("/clock")
        if lonely:
            self.log(f"warning: no subscriber of {', '.join(lonely)} after {self.wait_for_subscribers:g} s; playing "
                     "anyway")
        return not lonely

    def play(self, should_stop: Callable[[], bool] = lambda: False) -> PlayStats:
        """Plays the bag (all loops) until its end or ``should_stop()``; returns the statistics."""
        stats = PlayStats(counts={self.publishers[t][0]: 0 for t in self.topics})
        if self.wait_for_subscribers > 0:
            self._wait_for_subscribers(should_stop)
        first = self.info.start_ns + self.start_offset_ns
        types = MessageTypes(share_dirs=[])
        period = None if self.clock_hz is None else int(round(NS / self.clock_hz))
        if self._clock_pub is not None:
            self._publish_clock(first, stats)
        # opening the bag and parsing its definitions takes a while: done before the clock starts
        pending = self._open(first, types)
        if self.delay > 0:
            self._sleep_until(time.monotonic() + self.delay, should_stop)
        t0 = time.monotonic()
        loop_start = 0.0  # wall seconds from t0 to the start of this loop
        while not should_stop() and pending is not None:
            messages, head = pending
            next_tick = first + (period or 0)
            span = 0
            for m in itertools.chain([head], messages):
                span = m.log_time - first
                while period is not None and next_tick < m.log_time:
                    if not self._sleep_until(t0 + loop_start + (next_tick - first) / NS / self.rate, should_stop):
                        break
                    self._publish_clock(next_tick, stats)
                    next_tick += period
                target = t0 + loop_start + span / NS / self.rate
                if not self._sleep_until(target, should_stop):
                    break
                if self._clock_pub is not None and (self._last_clock is None or m.log_time > self._last_clock):
                    self._publish_clock(m.log_time, stats)
                out, pub = self.publishers[m.topic]
                pub.publish(m.raw)
                stats.schedule.append(target - t0)
                stats.lateness.append(time.monotonic() - target)
                stats.counts[out] += 1
            if should_stop():
                break
            stats.loops += 1
            if not self.loop:
                break
            end_of_loop = loop_start + (span + (period or 0)) / NS / self.rate
            pending = self._open(first, types)
            # the next loop starts one clock period (or nothing) after the last message, or now if reopening
            # the bag took longer
            loop_start = max(end_of_loop, time.monotonic() - t0)
            self._last_clock = None
        stats.stopped = should_stop()
        stats.unacked = self._wait_acked()
        return stats

    def _open(self, first: int, types):
        """(iterator over the remaining messages, first message) from bag time ``first``; None when empty."""
        it = read_bag(self.bag, self.topics, types, start_ns=first)
        head = next(it, None)
        return None if head is None else (it, head)

    def _wait_acked(self) -> list:
        from rclpy.duration import Duration
        from rclpy.qos import ReliabilityPolicy

        unacked = []
        for out, pub in self.publishers.values():
            if pub.qos_profile.reliability == ReliabilityPolicy.RELIABLE and pub.get_subscription_count() > 0:
                if not pub.wait_for_all_acked(Duration(nanoseconds=int(self.ack_timeout * NS))):
                    unacked.append(out)
        return unacked

    @staticmethod
    def _sleep_until(target: float, should_stop) -> bool:
        """Sleeps until monotonic time ``target``; False if stopped first."""
        while True:
            if should_stop():
                return False
            left = target - time.monotonic()
            if left <= 0:
                return True
            time.sleep(min(left, 0.05))


def run_player(bag, topics=None, exclude=None, rate=1.0, loop=False, clock_hz=None, start_offset_ns=0, delay=0.0,
               wait_for_subscribers=0.0, remap=None, qos_depth=1000, ros_args=None,
               log: Callable[[str], None] = print) -> PlayStats:
    """Plays a bag in its own rclpy context until the end or SIGINT/SIGTERM; returns the statistics."""
    import rclpy
    from rclpy.signals import SignalHandlerOptions

    stop = StopFlag()
    context = rclpy.Context()
    rclpy.init(args=ros_args, context=context, signal_handler_options=SignalHandlerOptions.NO)
    node = None
    try:
        node = rclpy.create_node(NODE_NAME, context=context)
        player = Player(node, bag, topics, exclude, rate, loop, clock_hz, start_offset_ns, delay, wait_for_subscribers,
                        remap, qos_depth, log=log)
        log(f"playing {', '.join(player.topics)} from {player.bag} at rate {rate:g}"
            + (f", /clock at {clock_hz:g} Hz" if clock_hz else "") + (", looping" if loop else ""))
        stats = player.play(lambda: bool(stop))
        counts = ", ".join(f"{t} {n}" for t, n in stats.counts.items())
        log(f"{'stopped by ' + stop.name if stop else 'done'}: published {stats.message_count} messages ({counts})"
            + (f" and {stats.clock_messages} /clock" if clock_hz else "") + f"; {stats.lateness_summary()}")
        if stats.unacked:
            log(f"warning: not every subscriber acknowledged the last messages of {', '.join(stats.unacked)}")
        return stats
    finally:
        if node is not None:
            node.destroy_node()
        context.try_shutdown()
        stop.restore()
