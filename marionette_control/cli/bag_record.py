"""marionette-bag-record: record topics of the live graph into a rosbag2 directory (metadata.yaml + MCAP).

    marionette-bag-record [-o BAG] [-a] [-e REGEX] [-x REGEX] [--use-sim-time] [--flush-interval S]
                          [--fsync] [--qos-depth N] [--duration S] [--max-messages N]
                          [--custom KEY=VALUE ...] [TOPIC ...] [--ros-args ...]
    marionette-bag-record --repair BAG
    python -m marionette_control.cli.bag_record ...      (same)

Records with raw subscriptions and stores each topic's offered QoS, like ``ros2 bag record``
(details and guarantees: ``marionette_control/nodes/bag_recorder.py``). Stop with Ctrl-C or SIGTERM:
the bag is closed cleanly (exit status 0). After a SIGKILL or crash, ``--repair BAG`` rebuilds
a complete bag from every chunk flushed before the kill (at most ``--flush-interval`` old).

Exit status: 0 recorded (or repaired), 1 failed, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import re
import sys
import time

from marionette_control.bags.bagio import BagError, repair
from marionette_control.cli.common import split_ros_args
from marionette_control.nodes.bag_recorder import run_recorder


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="marionette-bag-record", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("topics", nargs="*", metavar="TOPIC", help="topics to record")
    p.add_argument("-o", "--output", help="bag directory to create (default rosbag2_YYYY_MM_DD-HH_MM_SS)")
    p.add_argument("-a", "--all", action="store_true", help="record every topic (also ones that appear later)")
    p.add_argument("-e", "--regex", help="also record topics matching this regular expression")
    p.add_argument("-x", "--exclude", help="never record topics matching this regular expression")
    p.add_argument("--use-sim-time", action="store_true", help="log times from /clock instead of the system clock")
    p.add_argument("--flush-interval", type=float, default=1.0, metavar="S",
                   help="seconds between chunk flushes: at most this much is lost on SIGKILL (default 1)")
    p.add_argument("--fsync", action="store_true", help="fsync at every flush (survives power loss)")
    p.add_argument("--qos-depth", type=int, default=1000, metavar="N", help="subscription history depth (default 1000)")
    p.add_argument("--duration", type=float, metavar="S", help="stop after S seconds (wall clock)")
    p.add_argument("--max-messages", type=int, metavar="N", help="stop after N messages")
    p.add_argument("--custom", action="append", default=[], metavar="KEY=VALUE",
                   help="store KEY: VALUE in metadata.yaml's custom_data; repeatable")
    p.add_argument("--repair", metavar="BAG", help="rebuild BAG after its recorder was killed, then exit")
    return p


def main(argv=None) -> int:
    argv, ros_args = split_ros_args(argv)
    parser = build_parser()
    args = parser.parse_args(argv)

    if args.repair:
        if args.topics or args.all or args.regex:
            parser.error("--repair takes only the bag")
        try:
            rep = repair(args.repair)
        except BagError as e:
            print(f"marionette-bag-record: error: {e}", file=sys.stderr)
            return 1
        if rep.finalized:
            print(f"{rep.path} is complete already ({rep.message_count} messages); nothing to repair")
        else:
            counts = ", ".join(f"{t} {n}" for t, n in rep.counts.items())
            print(f"repaired {rep.path}: recovered {rep.message_count} messages ({counts}); "
                  f"{rep.truncated_bytes} bytes of an unfinished chunk dropped"
                  + (f"; the damaged file is kept as {rep.backup}" if rep.backup else ""))
        return 0
    if not (args.topics or args.all or args.regex):
        parser.error("give topics to record, --all or --regex")
    if not args.flush_interval > 0:
        parser.error("--flush-interval must be > 0")
    if args.qos_depth < 1:
        parser.error("--qos-depth must be >= 1")
    custom = {}
    for item in args.custom:
        k, sep, v = item.partition("=")
        if not sep or not k:
            parser.error(f"--custom expects KEY=VALUE, got {item!r}")
        custom[k] = v
    out = args.output or time.strftime("rosbag2_%Y_%m_%d-%H_%M_%S")

    def log(text):
        print(f"[bag_record] {text}", flush=True)

    try:
        return run_recorder(out, args.topics, args.all, args.regex, args.exclude, args.use_sim_time,
                            args.flush_interval, args.fsync, args.qos_depth, args.duration, args.max_messages,
                            custom_data=custom, ros_args=["marionette-bag-record", *ros_args], log=log)
    except (BagError, ValueError, re.error) as e:
        print(f"marionette-bag-record: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
