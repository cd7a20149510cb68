"""marionette-bag-play: publish a bag's messages on the live graph with their original relative timing.

    marionette-bag-play BAG [--topics TOPIC ...] [-x REGEX] [-r RATE] [-l] [--clock [HZ]]
                        [--start-offset S] [--delay S] [--wait-for-subscribers S]
                        [--remap FROM:=TO ...] [--qos-depth N] [--ros-args ...]
    python -m marionette_control.cli.bag_play ...      (same)

Publishes the recorded bytes unchanged (details: ``marionette_control/nodes/bag_player.py``).
``--clock`` publishes /clock in bag time (default 100 Hz, and before every message) for
nodes running with use_sim_time. Ctrl-C or SIGTERM stop the playback.

Exit status: 0 played (or stopped), 1 failed, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from decimal import Decimal, InvalidOperation

from marionette_control.bags.bagio import BagError
from marionette_control.cli.common import split_ros_args
from marionette_control.nodes.bag_player import parse_remap, run_player


def _seconds_to_ns(text: str) -> int:
    try:
        v = Decimal(text)
    except InvalidOperation:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not v >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 seconds, got {text}")
    return int(v * 1_000_000_000)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="marionette-bag-play", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bag", help="bag directory (metadata.yaml + MCAP)")
    p.add_argument("--topics", nargs="+", metavar="TOPIC", help="play only these topics (default all)")
    p.add_argument("-x", "--exclude", metavar="REGEX", help="do not play topics matching this regular expression")
    p.add_argument("-r", "--rate", type=float, default=1.0, help="playback speed factor (default 1)")
    p.add_argument("-l", "--loop", action="store_true", help="start over at the end until stopped")
    p.add_argument("--clock", nargs="?", type=float, const=100.0, metavar="HZ",
                   help="publish /clock in bag time at HZ (default 100) and before every message")
    p.add_argument("--start-offset", type=_seconds_to_ns, default=0, metavar="S",
                   help="start S seconds into the bag (nanosecond precision)")
    p.add_argument("--delay", type=float, default=0.0, metavar="S", help="wait S seconds before the first message")
    p.add_argument("--wait-for-subscribers", type=float, default=0.0, metavar="S",
                   help="wait up to S seconds until every played topic has a subscriber")
    p.add_argument("--remap", nargs="+", default=[], metavar="FROM:=TO", help="publish a topic under another name")
    p.add_argument("--qos-depth", type=int, default=1000, metavar="N", help="publisher history depth (default 1000)")
    return p


def main(argv=None) -> int:
    argv, ros_args = split_ros_args(argv)
    parser = build_parser()
    args = parser.parse_args(argv)

    try:
        remap = parse_remap(args.remap)
    except ValueError as e:
        parser.error(str(e))

    def log(text):
        print(f"[bag_play] {text}", flush=True)

    try:
        run_player(args.bag, args.topics, args.exclude, args.rate, args.loop, args.clock, args.start_offset, args.delay,
                   args.wait_for_subscribers, remap, args.qos_depth, ros_args=["marionette-bag-play", *ros_args],
                   log=log)
    except (BagError, ValueError) as e:
        print(f"marionette-bag-play: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
