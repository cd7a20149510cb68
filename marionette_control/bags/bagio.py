"""Reading and writing rosbag2 directories (metadata.yaml + MCAP) without rosbag2_py or rclpy.

What ``ros2 bag record`` writes and ``ros2 bag play/info`` read: a directory with
``metadata.yaml`` (rosbag2 version 9, storage ``mcap``) and one MCAP file (profile
``ros2``, ``ros2msg`` schemas, CDR messages, each channel's ``offered_qos_profiles``).
Writing and reading go through ``rosbags`` (docs/architecture.md, "Files"); this module adds
what the tools need around it and imports no ROS package, so offline tools and tests
run anywhere:

* :class:`MessageTypes` — message definitions and RIHS01 type hashes: the ``.msg`` files
  installed with the message packages (``<prefix>/share/<pkg>/msg``, the prefixes of
  ``AMENT_PREFIX_PATH`` and this Python's prefix, as ``ros2 bag`` reads them), falling back to
  rosbags' built-in ROS 2 Kilted store; CDR (de)serialization.
* :class:`BagWriter` — a rosbags writer with **periodic chunk flushes**: every
  ``flush_interval`` seconds the open MCAP chunk is closed and handed to the OS (and, with
  ``fsync``, to the disk), so a process killed without warning (SIGKILL, power loss) leaves
  every message written before the last flush in complete chunks; :func:`repair` turns such a
  file back into a complete bag.
* :func:`read_bag` / :func:`bag_info` — messages in log-time order and per-topic metadata.
* QoS conversions between the rosbag2 metadata form and rosbags' :class:`~rosbags.interfaces.Qos`.

Guarantees of a bag written by :class:`BagWriter` (the recorder's, see ``recorder.py``)
---------------------------------------------------------------------------------------
1. ``close()`` (normal end, SIGINT, SIGTERM) writes the last chunk, the MCAP summary and
   footer, then ``metadata.yaml`` (via a temporary file renamed into place): the bag is
   complete and finalized, readable by rosbags and by the ``mcap`` reader.
2. Killed without ``close()`` (SIGKILL, crash): ``metadata.yaml`` is missing and the MCAP file
   has no summary; every message written before the last completed flush is in a complete
   chunk (a flush happens at least every ``flush_interval`` seconds while messages arrive and
   whenever a chunk reaches 1 MiB). :func:`repair` recovers exactly those messages (and any
   later complete chunk), with their topics, types, definitions and QoS, into a finalized bag.
   Without ``fsync`` the chunks are in the OS page cache: they survive the process, not a
   power loss; with ``fsync`` they survive both.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import threading
import time
from io import BytesIO, StringIO
from pathlib import Path
from typing import Iterable, Iterator, Optional, Sequence

import yaml
from mcap.exceptions import EndOfFile
from mcap.records import Channel, Chunk, Message, Schema
from mcap.stream_reader import StreamReader, breakup_chunk
from rosbags.interfaces import (
    Qos,
    QosDurability,
    QosHistory,
    QosLiveliness,
    QosReliability,
    QosTime,
)
from rosbags.rosbag2 import Reader, StoragePlugin, Writer
from rosbags.rosbag2.metadata import parse_qos as _parse
from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.base import Nodetype

#: Infinite duration as rmw writes it in QoS profiles (RMW_DURATION_INFINITE: sec, nsec).
INFINITE_DURATION = (9223372036, 854775807)
NS = 1_000_000_000


class BagError(RuntimeError):
    """A bag cannot be written, read or repaired; the message says which bag and why."""


# ================================================================================== message types


def _share_dirs() -> list[Path]:
    """``share`` directories to search for ``<pkg>/msg/<Type>.msg`` (ament prefixes, then this Python's)."""
    prefixes = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    prefixes += [sys.prefix, sys.base_prefix]
    out, seen = [], set()
    for p in prefixes:
        d = Path(p) / "share"
        if d.is_dir() and d not in seen:
            seen.add(d)
            out.append(d)
    return out


def _referenced_types(fields) -> set[str]:
    """Message types a rosbags field list refers to (nested in arrays and sequences too)."""

    out = set()

    def visit(desc):
        kind, arg = desc
        if kind == Nodetype.NAME:
            out.add(arg)
        elif kind in (Nodetype.ARRAY, Nodetype.SEQUENCE):
            visit(arg[0])

    for _, desc in fields:
        visit(desc)
    return out


class MessageTypes:
    """Message definitions, type hashes and CDR conversion for the types a bag holds.

    Definitions come from installed ``.msg`` files first (what ``ros2 bag record`` stores), then
    from rosbags' ROS 2 Kilted store (the distribution of the PyPI wheels).
    """

    def __init__(self, share_dirs: Optional[Sequence[Path]] = None):
        self.store = get_typestore(Stores.ROS2_KILTED)
        self.share_dirs = list(share_dirs) if share_dirs is not None else _share_dirs()
        self._local: set[str] = set()

    def _msg_file(self, msgtype: str) -> Optional[Path]:
        pkg, kind, name = msgtype.split("/")
        for d in self.share_dirs:
            f = d / pkg / kind / f"{name}.msg"
            if f.is_file():
                return f
        return None

    def ensure(self, msgtype: str) -> None:
        """Registers ``msgtype`` (``pkg/msg/Name``) and its dependencies; BagError when unknown."""
        if msgtype.count("/") != 2:
            raise BagError(f"message type '{msgtype}' is not of the form package/msg/Name")

        todo, found = [msgtype], {}
        while todo:
            t = todo.pop()
            if t in found or t in self._local:
                continue
            f = self._msg_file(t)
            if f is None:
                if t in self.store.fielddefs:
                    continue
                raise BagError(f"no definition of message type '{t}': no {t.replace('/msg/', '/msg/')}.msg under "
                               f"{', '.join(str(d) for d in self.share_dirs) or '(no share directory)'} and not a "
                               "ROS 2 Kilted type")
            types = get_types_from_msg(f.read_text(), t)
            found.update(types)
            for _, (_, fields) in types.items():
                todo.extend(_referenced_types(fields))
        if found:
            # a locally installed definition replaces the built-in one (it is what the publishers use)
            for t in found:
                self.store.fielddefs.pop(t, None)
                self.store.types.pop(t, None)
            self.store.register(found)
            self._local.update(found)

    def register_definition(self, msgtype: str, msgdef: str) -> None:
        """Registers ``msgtype`` from a bag's own ``ros2msg`` definition (with its dependencies)."""

        if msgtype in self._local or not msgdef:
            return
        found = get_types_from_msg(msgdef, msgtype)
        for t in found:
            self.store.fielddefs.pop(t, None)
            self.store.types.pop(t, None)
        self.store.register(found)
        self._local.update(found)

    def definition(self, msgtype: str) -> tuple[str, str]:
        """(message definition text in rosbag2's ``ros2msg`` form, RIHS01 type hash)."""
        self.ensure(msgtype)
        msgdef, _ = self.store.generate_msgdef(msgtype, ros_version=2)
        return msgdef, self.store.hash_rihs01(msgtype)

    def deserialize(self, data, msgtype: str):
        self.ensure(msgtype)
        return self.store.deserialize_cdr(data, msgtype)

    def serialize(self, msg, msgtype: str) -> bytes:
        self.ensure(msgtype)
        return bytes(self.store.serialize_cdr(msg, msgtype))


# ================================================================================== QoS


def qos_to_dict(qos) -> dict:
    """rosbags Qos -> the mapping rosbag2 writes under ``offered_qos_profiles`` (version 9)."""
    return {
        "history": qos.history.name.lower(), "depth": int(qos.depth),
        "reliability": qos.reliability.name.lower(), "durability": qos.durability.name.lower(),
        "deadline": {"sec": qos.deadline.sec, "nsec": qos.deadline.nsec},
        "lifespan": {"sec": qos.lifespan.sec, "nsec": qos.lifespan.nsec},
        "liveliness": qos.liveliness.name.lower(),
        "liveliness_lease_duration": {"sec": qos.liveliness_lease_duration.sec,
                                      "nsec": qos.liveliness_lease_duration.nsec},
        "avoid_ros_namespace_conventions": bool(qos.avoid_ros_namespace_conventions),
    }


def qos_from_values(history: int, depth: int, reliability: int, durability: int, deadline_ns: int,
                    lifespan_ns: int, liveliness: int, lease_ns: int, avoid_ros_namespace_conventions: bool):
    """rosbags Qos from rmw enum values (history, reliability, durability, liveliness) and durations in ns.

    The rmw enums (rmw/types.h) and rosbags' enums share their integer values; a duration of
    2**63 - 1 ns or more (rclpy's Infinite) is stored as RMW_DURATION_INFINITE.
    """

    def dur(ns):
        ns = int(ns)
        if ns >= 2**63 - 1 or ns < 0:
            return QosTime(*INFINITE_DURATION)
        return QosTime(*divmod(ns, NS))

    def enum(cls, v):
        try:
            return cls(int(v))
        except ValueError:
            return cls.UNKNOWN

    return Qos(enum(QosHistory, history), int(depth), enum(QosReliability, reliability),
               enum(QosDurability, durability), dur(deadline_ns), dur(lifespan_ns), enum(QosLiveliness, liveliness),
               dur(lease_ns), bool(avoid_ros_namespace_conventions))


def parse_qos(text_or_list) -> list:
    """rosbags Qos list from metadata (a YAML string or list of mappings, rosbag2 version 8 or 9)."""

    if not text_or_list:
        return []
    return list(_parse(text_or_list))


# ================================================================================== writing


class BagWriter:
    """A rosbag2 (version 9, MCAP) writer with periodic flushes; see the module's guarantees.

    Parameters
    ----------
    path : the bag directory to create (must not exist).
    flush_interval : seconds between chunk flushes while messages arrive (> 0; ``math.inf``: only
        rosbags' own 1 MiB chunks).
    fsync : also ``os.fsync`` the MCAP file at every flush (survives power loss; slower).
    types : MessageTypes to take definitions from (default: a new one).
    custom_data : str -> str stored in metadata.yaml's ``custom_data``.

    Thread-safe: one lock serializes writes, flushes and close.
    """

    def __init__(self, path, flush_interval: float = 1.0, fsync: bool = False,
                 types: Optional[MessageTypes] = None, custom_data: Optional[dict] = None):
        if not flush_interval > 0:
            raise BagError(f"flush_interval must be > 0 seconds, got {flush_interval}")
        self.path = Path(path)
        if self.path.exists():
            raise BagError(f"{self.path} exists already; a bag is never overwritten")
        self.flush_interval = float(flush_interval)
        self.fsync = bool(fsync)
        self.types = types or MessageTypes()
        self._writer = Writer(self.path, version=9, storage_plugin=StoragePlugin.MCAP)
        for k, v in (custom_data or {}).items():
            self._writer.set_custom_data(str(k), str(v))
        self._lock = threading.Lock()
        self._writer.open()
        storage = self._writer.storage
        if not (hasattr(storage, "close_chunk") and hasattr(storage, "bio") and hasattr(storage, "chunk")):
            # rosbags' MCAP storage writer is what we flush; refuse loudly if its layout changed.
            self._writer.abort()
            raise BagError(f"rosbags {_rosbags_version()}: its MCAP writer has no close_chunk/bio/chunk; periodic "
                           "flushing (crash safety) needs the layout of rosbags 0.10-0.11")
        self.mcap_path = Path(storage.path)
        self.connections: dict[str, object] = {}
        self.counts: dict[str, int] = {}
        self._last_flush = time.monotonic()
        self._dirty = False
        self.flushes = 0
        self.closed = False

    def add_topic(self, topic: str, msgtype: str, offered_qos: Sequence = (), rihs01: Optional[str] = None):
        """Adds a topic (once); offered_qos: rosbags Qos list (the publishers' offers)."""
        with self._lock:
            if topic in self.connections:
                raise BagError(f"topic {topic} is already in bag {self.path}")
            msgdef, local_hash = self.types.definition(msgtype)
            conn = self._writer.add_connection(topic, msgtype, msgdef=msgdef, rihs01=rihs01 or local_hash,
                                               offered_qos_profiles=list(offered_qos))
            self.connections[topic] = conn
            self.counts[topic] = 0
            self._dirty = True
            return conn

    def write(self, topic: str, timestamp_ns: int, data) -> None:
        """Writes one serialized (CDR) message of ``topic`` at ``timestamp_ns`` (log time)."""
        with self._lock:
            if self.closed:
                raise BagError(f"bag {self.path} is closed")
            self._writer.write(self.connections[topic], int(timestamp_ns), data)
            self.counts[topic] += 1
            self._dirty = True
            if time.monotonic() - self._last_flush >= self.flush_interval:
                self._flush_locked()

    def flush(self) -> bool:
        """Closes the open chunk and hands the file to the OS (and disk with fsync); True if anything was new."""
        with self._lock:
            if self.closed:
                return False
            return self._flush_locked()

    def flush_if_due(self) -> bool:
        """flush() when ``flush_interval`` has passed since the last one (for a periodic timer)."""
        with self._lock:
            if self.closed or time.monotonic() - self._last_flush < self.flush_interval:
                return False
            return self._flush_locked()

    def _flush_locked(self) -> bool:
        self._last_flush = time.monotonic()
        if not self._dirty:
            return False
        storage = self._writer.storage
        if storage.chunk.bio.tell():
            storage.close_chunk()
        storage.bio.flush()
        if self.fsync:
            os.fsync(storage.bio.fileno())
        self._dirty = False
        self.flushes += 1
        return True

    def close(self) -> None:
        """Finalizes the MCAP file and writes metadata.yaml (idempotent)."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._writer.close()
            if self.fsync:
                for f in (self.mcap_path, self.path / "metadata.yaml"):
                    fd = os.open(f, os.O_RDONLY)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)

    @property
    def message_count(self) -> int:
        return sum(self.counts.values())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _rosbags_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rosbags")
    except PackageNotFoundError:  # pragma: no cover
        return "?"


# ================================================================================== reading


@dataclasses.dataclass
class TopicInfo:
    """One topic of a bag: name, type, message count, offered QoS (rosbags Qos list), RIHS01 hash."""

    name: str
    msgtype: str
    count: int
    offered_qos: list
    type_hash: str = ""


@dataclasses.dataclass
class BagInfo:
    """What metadata.yaml (or the MCAP summary) says about a bag."""

    path: Path
    topics: dict
    start_ns: int
    end_ns: int
    message_count: int
    custom_data: dict
    files: list
    version: int = 9
    storage: str = "mcap"

    @property
    def duration(self) -> float:
        return max(0, self.end_ns - self.start_ns) / NS


@dataclasses.dataclass
class BagMessage:
    """One message: topic, type, log time (ns), raw CDR bytes and (lazily) the deserialized message."""

    topic: str
    msgtype: str
    log_time: int
    raw: bytes
    _types: MessageTypes = dataclasses.field(repr=False, default=None)
    _msg: object = dataclasses.field(repr=False, default=None)

    @property
    def msg(self):
        if self._msg is None:
            self._msg = self._types.deserialize(self.raw, self.msgtype)
        return self._msg


def _check_bag_dir(path: Path) -> None:
    if not path.exists():
        raise BagError(f"{path}: no such bag directory")
    if not path.is_dir():
        raise BagError(f"{path} is not a bag directory (rosbag2 bags are directories with metadata.yaml)")
    if not (path / "metadata.yaml").is_file():
        hint = ""
        if any(path.glob("*.mcap")):
            hint = (" — the recorder was probably killed before it could finish the bag; recover it with "
                    f"'marionette-bag-record --repair {path}'")
        raise BagError(f"{path}: no metadata.yaml{hint}")


def _open_reader(path: Path):
    _check_bag_dir(path)
    try:
        reader = Reader(path)
        reader.open()
    except Exception as e:  # rosbags raises several types; name the bag and the reason
        raise BagError(f"{path}: cannot open bag: {e}") from e
    return reader


def bag_info(path) -> BagInfo:
    """Topics, counts, QoS and times of a bag (from its metadata)."""
    path = Path(path)
    reader = _open_reader(path)
    try:
        topics = {}
        for c in reader.connections:
            ext = c.ext
            prev = topics.get(c.topic)
            count = c.msgcount + (prev.count if prev else 0)
            topics[c.topic] = TopicInfo(c.topic, c.msgtype, count, list(getattr(ext, "offered_qos_profiles", [])),
                                        c.digest or "")
        meta = yaml.safe_load((path / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
        custom = meta.get("custom_data") or {}
        return BagInfo(path, topics, reader.start_time if reader.message_count else 0,
                       reader.end_time if reader.message_count else 0, reader.message_count, dict(custom),
                       list(meta.get("relative_file_paths", [])), int(meta.get("version", 0)),
                       str(meta.get("storage_identifier", "")))
    finally:
        reader.close()


def read_bag(path, topics: Optional[Iterable[str]] = None, types: Optional[MessageTypes] = None,
             start_ns: Optional[int] = None, stop_ns: Optional[int] = None) -> Iterator[BagMessage]:
    """Messages of ``topics`` (default all) in log-time order, with their raw CDR bytes.

    Types are registered from the bag's own message definitions (the bag is self-describing),
    so a bag of types not installed here still reads.
    """
    path = Path(path)
    types = types or MessageTypes(share_dirs=[])
    reader = _open_reader(path)
    try:
        wanted = None if topics is None else set(topics)
        conns = [c for c in reader.connections if wanted is None or c.topic in wanted]
        if wanted is not None:
            missing = sorted(wanted - {c.topic for c in reader.connections})
            if missing:
                raise BagError(f"{path}: no topic {', '.join(missing)} in the bag (it has "
                               f"{', '.join(sorted({c.topic for c in reader.connections}))})")
        for c in conns:
            types.register_definition(c.msgtype, c.msgdef.data)
        for conn, t, raw in reader.messages(connections=conns, start=start_ns, stop=stop_ns):
            yield BagMessage(conn.topic, conn.msgtype, int(t), bytes(raw), types)
    finally:
        reader.close()


# ================================================================================== repair


@dataclasses.dataclass
class RepairReport:
    """What :func:`repair` found: messages per topic, whether the file was already complete, the tail lost."""

    path: Path
    counts: dict
    finalized: bool
    truncated_bytes: int
    backup: Optional[Path]

    @property
    def message_count(self) -> int:
        return sum(self.counts.values())


MCAP_MAGIC = b"\x89MCAP0\r\n"


def _parse_record(data: bytes) -> list:
    """The mcap records of one complete top-level record (opcode, length, body), chunks not broken up."""

    out = []
    it = StreamReader(BytesIO(data), skip_magic=True, emit_chunks=True).records
    try:
        for rec in it:
            out.append(rec)
    except EndOfFile:  # the reader looks for a next record after the only one
        pass
    return out


def repair(path, keep_backup: bool = True) -> RepairReport:
    """Rebuilds a bag whose recorder was killed: a finalized MCAP file and metadata.yaml.

    Reads the MCAP file record by record up to the end of its last complete record (an
    incomplete chunk at the tail is dropped: it was being written when the process died) and
    writes every recovered message, with its topic, type, definition and offered QoS, into a
    new finalized bag that replaces the old file. The old file is kept as ``<name>.mcap.damaged``
    unless ``keep_backup`` is False. A bag that already has metadata.yaml and a readable MCAP is
    left alone (``finalized`` True).
    """

    path = Path(path)
    if not path.is_dir():
        raise BagError(f"{path}: no such bag directory")
    mcaps = sorted(path.glob("*.mcap"))
    if len(mcaps) != 1:
        raise BagError(f"{path}: expected one .mcap file, found {len(mcaps)}")
    src = mcaps[0]
    if (path / "metadata.yaml").is_file():
        try:
            info = bag_info(path)
            for _ in read_bag(path):
                pass
            return RepairReport(path, {n: t.count for n, t in info.topics.items()}, True, 0, None)
        except BagError:
            pass  # metadata present but the file is unusable: rebuild it
    size = src.stat().st_size
    schemas, channels, messages = {}, {}, []
    good_end = 0
    with open(src, "rb") as f:
        magic = f.read(8)
        if len(magic) == 8 and magic != MCAP_MAGIC:
            raise BagError(f"{src} is not an MCAP file (no MCAP magic at its start)")
        good_end = 8
        # Top-level records one by one: a record is used only when all of its bytes are in the file
        # (the one being written when the process died is not); mcap parses each complete record.
        while True:
            head = f.read(9)
            if len(head) < 9:
                break
            length = int.from_bytes(head[1:], "little")
            if length > size - good_end - 9:
                break  # torn: the file ends inside this record
            body = f.read(length)
            try:
                parsed = _parse_record(head + body)
            except Exception:  # a record whose bytes do not parse: the file is damaged from here on
                break
            for rec in parsed:
                for r in (breakup_chunk(rec) if isinstance(rec, Chunk) else [rec]):
                    if isinstance(r, Schema):
                        schemas[r.id] = r
                    elif isinstance(r, Channel):
                        channels[r.id] = r
                    elif isinstance(r, Message):
                        messages.append(r)
            good_end += 9 + length
            if head[0] == 0x02:  # footer: the file was complete after all
                break
    if not channels:
        raise BagError(f"{src}: no complete chunk in the file ({size} bytes): nothing to recover (the recorder "
                       "was killed before its first flush)")
    # written next to the bag under the bag's own name: rosbags names the MCAP file (and the
    # metadata's file list) after the directory
    tmp_parent = path.parent / f".{path.name}.repair-tmp"
    if tmp_parent.exists():
        raise BagError(f"{tmp_parent} exists (left by an interrupted repair?): remove it and try again")
    tmp_parent.mkdir()
    tmp = tmp_parent / path.name
    types = MessageTypes(share_dirs=[])
    counts = {}
    try:
        writer = BagWriter(tmp, flush_interval=math.inf, types=types)
        by_channel = {}
        for cid in sorted(channels):
            ch = channels[cid]
            schema = schemas.get(ch.schema_id)
            if schema is None:
                raise BagError(f"{src}: channel {ch.topic} refers to schema {ch.schema_id}, which is not in the file")
            types.register_definition(schema.name, schema.data.decode())
            qos = parse_qos(ch.metadata.get("offered_qos_profiles", ""))
            if ch.topic not in writer.connections:
                writer.add_topic(ch.topic, schema.name, qos)
                counts[ch.topic] = 0
            by_channel[cid] = ch.topic
        messages.sort(key=lambda m: m.log_time)
        for m in messages:
            topic = by_channel[m.channel_id]
            writer.write(topic, m.log_time, m.data)
            counts[topic] += 1
        writer.close()
    except BaseException:
        import shutil

        shutil.rmtree(tmp_parent, ignore_errors=True)
        raise
    backup = None
    if keep_backup:
        backup = src.with_name(src.name + ".damaged")
        os.replace(src, backup)
    else:
        src.unlink()
    os.replace(tmp / f"{path.name}.mcap", path / f"{path.name}.mcap")
    os.replace(tmp / "metadata.yaml", path / "metadata.yaml")
    os.rmdir(tmp)
    os.rmdir(tmp_parent)
    return RepairReport(path, counts, False, size - good_end, backup)


def dump_yaml(data) -> str:
    s = StringIO()
    yaml.safe_dump(data, s, sort_keys=False)
    return s.getvalue()
