"""Recording topics of the live ROS 2 graph into a rosbag2 directory (what ``ros2 bag record`` does).

:class:`Recorder` subscribes to the chosen topics with **raw** subscriptions (the CDR
bytes are written as they arrive, never deserialized) and writes them with
:class:`~marionette_control.bags.bagio.BagWriter` into ``<bag>/metadata.yaml`` +
``<bag>/<bag>.mcap`` (rosbag2 version 9, MCAP storage).

Topics
------
A topic is subscribed as soon as a publisher of it is discovered (its type comes from the
graph). Its **offered QoS** — the QoS profile of every publisher known at that moment (from
the publishers' endpoint info, as ``ros2 bag record`` does) — is stored in the bag
(``offered_qos_profiles`` in metadata.yaml and in the MCAP channel), and so is the type
hash the publishers announce. The subscription's own QoS is adapted to the offers like
rosbag2's: reliable only if every publisher is reliable (a reliable subscription cannot
match a best-effort publisher), transient-local only if every publisher is, history
keep-last ``qos_depth``. A publisher that appears later with a QoS the subscription cannot
match is reported (once per topic). With ``all_topics`` every topic of the graph is recorded
(except those matching ``exclude``), including ones that appear later.

Times
-----
A message's log time is the recorder node's clock at reception (``ros2 bag record``'s
convention): the system clock, or ``/clock`` with ``use_sim_time`` (0 before the first
``/clock`` message arrives). Header stamps are inside the messages, untouched.

Stopping and what is guaranteed
-------------------------------
* SIGINT and SIGTERM (and ``duration``, ``max_messages``) stop recording **cleanly**: the
  handlers only set a flag; the main loop then keeps taking messages until the
  subscriptions have been idle for ``drain_idle`` seconds (at most ``drain_max``), so messages
  already delivered to this process are written, then closes the bag (last chunk, MCAP
  summary and footer, metadata.yaml). Exit status 0. A second signal skips the draining
  (the bag is still closed cleanly).
* Killed without warning (SIGKILL, a crash, power loss): every message written before the
  last periodic flush (at most ``flush_interval`` seconds old, default 1 s; ``fsync`` also makes
  it survive power loss) is in complete MCAP chunks, and ``marionette-bag-record --repair BAG``
  (:func:`~marionette_control.bags.bagio.repair`) rebuilds a complete bag from them. Messages
  of the last ``flush_interval`` seconds may be lost then, and only then.
"""

from __future__ import annotations

import importlib
import re
import signal
import sys
import time
from pathlib import Path
from typing import Callable, Iterable, Optional

from marionette_control.bags.bagio import BagError, BagWriter, MessageTypes, qos_from_values
from marionette_control.nodes.process import StopFlag

NODE_NAME = "marionette_bag_recorder"


def message_class(msgtype: str):
    """The Python message class of ``pkg/msg/Name`` (ImportError naming the package when not installed)."""
    parts = msgtype.split("/")
    if len(parts) != 3:
        raise ImportError(f"message type '{msgtype}' is not of the form package/msg/Name")
    pkg, kind, name = parts
    try:
        module = importlib.import_module(f"{pkg}.{kind}")
        return getattr(module, name)
    except (ImportError, AttributeError) as e:
        raise ImportError(f"cannot record {msgtype}: its Python message package '{pkg}' is not importable here "
                          f"({e})") from None


def offered_qos(endpoint):
    """rosbags Qos of a publisher's endpoint info (rclpy TopicEndpointInfo)."""
    q = endpoint.qos_profile
    return qos_from_values(q.history.value, q.depth, q.reliability.value, q.durability.value,
                           q.deadline.nanoseconds, q.lifespan.nanoseconds, q.liveliness.value,
                           q.liveliness_lease_duration.nanoseconds, q.avoid_ros_namespace_conventions)


def adapted_qos(offers, depth: int):
    """The subscription QoS that matches every offer (rosbag2's adaptation); rclpy QoSProfile."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    rel = [o.qos_profile.reliability for o in offers]
    dur = [o.qos_profile.durability for o in offers]
    reliable = bool(rel) and all(r == ReliabilityPolicy.RELIABLE for r in rel)
    transient = bool(dur) and all(d == DurabilityPolicy.TRANSIENT_LOCAL for d in dur)
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth,
                      reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL if transient else DurabilityPolicy.VOLATILE)


class Recorder:
    """Records topics of the graph a node sees into a bag (see the module docstring).

    Parameters
    ----------
    node : rclpy Node to subscribe with (its clock stamps the messages).
    path : bag directory to create.
    topics : topic names to record (exact names).
    all_topics : record every topic (``topics`` is then ignored).
    regex : also record topics whose name matches this regular expression.
    exclude : regular expression of topics never recorded.
    flush_interval, fsync : see :class:`BagWriter`.
    qos_depth : history depth of the subscriptions.
    custom_data : stored in metadata.yaml's ``custom_data``.
    log : callable(str) for progress lines.
    """

    def __init__(self, node, path, topics: Iterable[str] = (), all_topics: bool = False, regex: Optional[str] = None,
                 exclude: Optional[str] = None, flush_interval: float = 1.0, fsync: bool = False,
                 qos_depth: int = 1000, custom_data: Optional[dict] = None, log: Callable[[str], None] = print):
        self.node = node
        self.topics = [self._full(t) for t in topics]
        self.all_topics = bool(all_topics)
        self.regex = re.compile(regex) if regex else None
        self.exclude = re.compile(exclude) if exclude else None
        if not (self.topics or self.all_topics or self.regex):
            raise ValueError("nothing to record: give topics, a regex or all_topics")
        if qos_depth < 1:
            raise ValueError(f"qos_depth must be >= 1, got {qos_depth}")
        self.qos_depth = int(qos_depth)
        self.log = log
        self.writer = BagWriter(path, flush_interval=flush_interval, fsync=fsync, types=MessageTypes(),
                                custom_data=custom_data)
        self.path = self.writer.path
        self.subscriptions: dict[str, object] = {}
        self._qos: dict[str, object] = {}
        self._warned: set[str] = set()
        self.received = 0
        self.errors: list[str] = []
        self._me = (node.get_name(), node.get_namespace())

    @staticmethod
    def _full(topic: str) -> str:
        return topic if topic.startswith("/") else "/" + topic

    def wanted(self, topic: str) -> bool:
        if self.exclude is not None and self.exclude.search(topic):
            return False
        return self.all_topics or topic in self.topics or (self.regex is not None and bool(self.regex.search(topic)))

    def _publishers(self, topic: str) -> list:
        return [e for e in self.node.get_publishers_info_by_topic(topic)
                if (e.node_name, e.node_namespace) != self._me]

    def discover(self) -> None:
        """Subscribes to wanted topics whose publishers have appeared (call periodically)."""
        for topic, types in self.node.get_topic_names_and_types():
            if not self.wanted(topic):
                continue
            offers = self._publishers(topic)
            if topic in self.subscriptions:
                self._check_late_publishers(topic, offers)
                continue
            if not offers:
                continue  # only subscribers so far (or only our own publisher): nothing to record yet
            if len(types) != 1:
                if topic not in self._warned:
                    self._warned.add(topic)
                    self._error(f"topic {topic} has several types ({', '.join(types)}): not recorded")
                continue
            self._subscribe(topic, types[0], offers)

    def _subscribe(self, topic: str, msgtype: str, offers: list) -> None:
        try:
            cls = message_class(msgtype)
        except ImportError as e:
            if topic not in self._warned:
                self._warned.add(topic)
                self._error(str(e))
            return
        hashes = {str(o.topic_type_hash) for o in offers if getattr(o, "topic_type_hash", None) is not None}
        hashes.discard("")
        type_hash = hashes.pop() if len(hashes) == 1 else None
        try:
            self.writer.add_topic(topic, msgtype, [offered_qos(o) for o in offers], rihs01=type_hash)
        except BagError as e:
            if topic not in self._warned:
                self._warned.add(topic)
                self._error(f"topic {topic}: {e}")
            return
        qos = adapted_qos(offers, self.qos_depth)
        self._qos[topic] = qos
        self.subscriptions[topic] = self.node.create_subscription(
            cls, topic, lambda raw, info, _t=topic: self._on_message(_t, raw), qos, raw=True)
        self.log(f"recording {topic} ({msgtype}, {len(offers)} publisher(s), subscription "
                 f"{qos.reliability.name.lower()}/{qos.durability.name.lower()})")

    def _check_late_publishers(self, topic: str, offers: list) -> None:
        from rclpy.qos import DurabilityPolicy, ReliabilityPolicy

        qos = self._qos[topic]
        for o in offers:
            q = o.qos_profile
            bad = ((qos.reliability == ReliabilityPolicy.RELIABLE and q.reliability != ReliabilityPolicy.RELIABLE)
                   or (qos.durability == DurabilityPolicy.TRANSIENT_LOCAL
                       and q.durability != DurabilityPolicy.TRANSIENT_LOCAL))
            if bad and topic not in self._warned:
                self._warned.add(topic)
                self._error(f"topic {topic}: publisher {o.node_namespace.rstrip('/')}/{o.node_name} appeared with "
                            f"{q.reliability.name.lower()}/{q.durability.name.lower()} QoS, which the recording "
                            f"subscription ({qos.reliability.name.lower()}/{qos.durability.name.lower()}) cannot "
                            "match: its messages are not recorded")

    def _on_message(self, topic: str, raw: bytes) -> None:
        self.writer.write(topic, self.node.get_clock().now().nanoseconds, raw)
        self.received += 1

    def _error(self, text: str) -> None:
        self.errors.append(text)
        self.log(f"warning: {text}")

    def missing_topics(self) -> list[str]:
        """Requested topics that never had a publisher (so are not in the bag)."""
        return [t for t in self.topics if t not in self.writer.connections]

    def close(self) -> None:
        """Destroys the subscriptions and finalizes the bag (idempotent)."""
        for sub in self.subscriptions.values():
            try:
                self.node.destroy_subscription(sub)
            except Exception:  # the node may already be gone; the bag must still be closed
                pass
        self.subscriptions = {}
        self.writer.close()


def run_recorder(path, topics=(), all_topics=False, regex=None, exclude=None, use_sim_time=False,
                 flush_interval=1.0, fsync=False, qos_depth=1000, duration: Optional[float] = None,
                 max_messages: Optional[int] = None, drain_idle: float = 0.1, drain_max: float = 1.0,
                 discovery_period: float = 0.1, custom_data: Optional[dict] = None, ros_args=None,
                 log: Callable[[str], None] = print) -> int:
    """Runs a recorder until SIGINT/SIGTERM, ``duration`` (s, wall clock) or ``max_messages``; returns 0.

    Owns rclpy's initialization (with its own signal handlers, so a signal never interrupts
    a write: rclpy's would shut the context down under the subscriptions).
    """
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from rclpy.signals import SignalHandlerOptions

    stop = StopFlag()
    context = rclpy.Context()
    rclpy.init(args=ros_args, context=context, signal_handler_options=SignalHandlerOptions.NO)
    node = recorder = executor = None
    try:
        overrides = [Parameter("use_sim_time", value=True)] if use_sim_time else []
        node = rclpy.create_node(NODE_NAME, context=context, parameter_overrides=overrides)
        recorder = Recorder(node, path, topics, all_topics, regex, exclude, flush_interval, fsync, qos_depth,
                            custom_data, log)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        what = "all topics" if all_topics else ", ".join(recorder.topics + ([f"/{regex}/"] if regex else []))
        log(f"recording {what} into {recorder.path}")
        t0 = time.monotonic()
        next_discovery = 0.0
        while not stop:
            now = time.monotonic()
            if now >= next_discovery:
                recorder.discover()
                next_discovery = now + discovery_period
            executor.spin_once(timeout_sec=0.02)
            recorder.writer.flush_if_due()
            if duration is not None and time.monotonic() - t0 >= duration:
                log(f"duration {duration:g} s reached")
                break
            if max_messages is not None and recorder.received >= max_messages:
                log(f"{recorder.received} messages received (max_messages {max_messages})")
                break
        if stop:
            log(f"{stop.name}: stopping")
        if stop.count < 2:  # drain what has been delivered to this process
            end = time.monotonic() + drain_max
            last_count, idle_since = recorder.received, time.monotonic()
            while time.monotonic() < end and stop.count < 2:
                executor.spin_once(timeout_sec=min(0.01, drain_idle))
                if recorder.received != last_count:
                    last_count, idle_since = recorder.received, time.monotonic()
                elif time.monotonic() - idle_since >= drain_idle:
                    break
        return 0
    finally:
        if recorder is not None:
            recorder.close()
            w = recorder.writer
            counts = ", ".join(f"{t} {n}" for t, n in w.counts.items()) or "no topics"
            log(f"wrote {w.message_count} messages to {recorder.path} ({counts})")
            missing = recorder.missing_topics()
            if missing:
                log(f"warning: no publisher of {', '.join(missing)} was seen: not in the bag")
        if executor is not None:
            executor.shutdown()
        if node is not None:
            node.destroy_node()
        context.try_shutdown()
        stop.restore()


class RecorderProcess:
    """Runs ``python -m marionette_control.cli.bag_record`` as a child process (for jobs and scripts).

    ``with RecorderProcess(bag, ["/joint_states"], env=env) as rec: ...`` starts it, and the exit
    stops it with SIGINT (clean close) and waits; ``rec.wait_recording(topics)`` waits until the
    recorder reports that it subscribed to those topics. Output goes to ``log_path`` (default
    ``<bag>.log`` beside the bag).
    """

    def __init__(self, path, topics=(), extra_args=(), env=None, log_path=None, python=None):
        self.path = Path(path)
        self.topics = list(topics)
        self.args = [python or sys.executable, "-m", "marionette_control.cli.bag_record", "-o", str(self.path),
                     *list(extra_args), *self.topics]
        self.env = env
        self.log_path = Path(log_path) if log_path else self.path.with_name(self.path.name + ".log")
        self.proc = None
        self.returncode = None

    def start(self):
        import subprocess

        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.args, env=self.env, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        return self

    def output(self) -> str:
        try:
            return self.log_path.read_text()
        except OSError:
            return ""

    def wait_recording(self, topics=None, timeout: float = 20.0) -> bool:
        """True once the recorder reports recording every one of ``topics`` (default: those it was given)."""
        topics = [Recorder._full(t) for t in (self.topics if topics is None else topics)]
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            out = self.output()
            if all(f"recording {t} (" in out for t in topics):
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.05)
        return False

    def stop(self, sig=signal.SIGINT, timeout: float = 15.0) -> int:
        """Signals the recorder (SIGINT: clean close) and waits; SIGKILL after ``timeout``."""
        import os
        import subprocess

        if self.proc is None:
            return -1
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5.0)
        self._log.close()
        self.returncode = self.proc.returncode
        return self.returncode

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False
