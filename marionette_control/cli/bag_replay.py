"""marionette-bag-replay: feed a bag's /joint_states through the controller's tick logic, offline and deterministic.

    marionette-bag-replay BAG [--trajectory T.npz] [--start auto|first|STAMP_NS] [--clock log_time|stamp]
                          [--latency S] [--state-timeout S] [--stamp-tolerance F] [--watchdog-period S]
                          [--model-file FILE] [--command-joints J ...] [--joint-states TOPIC]
                          [--compare] [--tolerance T] [--csv OUT.csv]
    python -m marionette_control.cli.bag_replay ...      (same)

Runs :func:`marionette_control.bags.replay.replay_bag` (no ROS transport): the commands the
controller would have sent, its faults and recoveries. Parameters default to those stored in the
bag's metadata (``custom_data``), else to the controller node's defaults; the trajectory defaults
to the one the bag names. ``--start auto`` starts tracking where the recorded controller had its
first tick (its ``~/tracking`` topic), else before the first sample.

``--compare`` also compares the commands with the recorded command topic and exits 1 when they
differ by more than ``--tolerance`` (default 1e-9) or in number.

Exit status: 0 done (and matching with --compare), 1 mismatch or error, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import sys

from marionette_control.bags.bagio import BagError, bag_info
from marionette_control.bags.replay import (
    COMMANDS,
    ReplayConfig,
    compare_commands,
    recorded_commands,
    replay_bag,
)
from marionette_control.trajectory import TrajectoryError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="marionette-bag-replay", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bag", help="bag directory")
    p.add_argument("--trajectory", metavar="NPZ", help="trajectory file (default: the one the bag names)")
    p.add_argument("--start", default="auto", help="auto, first, or the stamp (ns) of the first tick")
    p.add_argument("--clock", choices=("log_time", "stamp"), help="the controller's 'now' at a sample")
    p.add_argument("--latency", type=float, help="with --clock stamp: now = stamp + latency (s)")
    p.add_argument("--state-timeout", type=float, help="controller parameter state_timeout (s)")
    p.add_argument("--stamp-tolerance", type=float, help="controller parameter stamp_tolerance (fraction of dt)")
    p.add_argument("--watchdog-period", type=float, help="controller parameter watchdog_period (s)")
    p.add_argument("--model-file", help="controller parameter model_file")
    p.add_argument("--command-joints", nargs="+", help="controller parameter command_joints")
    p.add_argument("--joint-states", default="/joint_states", metavar="TOPIC", help="joint-state topic")
    p.add_argument("--compare", action="store_true", help="compare with the recorded commands")
    p.add_argument("--tolerance", type=float, default=1e-9, help="largest allowed difference (default 1e-9)")
    p.add_argument("--csv", metavar="OUT", help="write every sent command: time_ns,stamp_ns,source,kind,k,fault,...")
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)

    if args.start in ("auto", "first"):
        start = None if args.start == "auto" else "first"
    else:
        try:
            start = int(args.start)
        except ValueError:
            parser.error(f"--start must be auto, first or a stamp in ns, got {args.start!r}")
    try:
        info = bag_info(args.bag)
        config = ReplayConfig.from_custom_data(
            info.custom_data, model_file=args.model_file, command_joints=args.command_joints,
            state_timeout=args.state_timeout, stamp_tolerance=args.stamp_tolerance,
            watchdog_period=args.watchdog_period, clock=args.clock, latency=args.latency)
        res = replay_bag(args.bag, args.trajectory, config, start, args.joint_states)
    except (BagError, TrajectoryError, ValueError, OSError) as e:
        print(f"marionette-bag-replay: error: {e}", file=sys.stderr)
        return 1
    sent = res.sent
    print(f"replayed {res.samples} joint states of {info.path} ({res.watchdog_calls} watchdog calls, clock "
          f"{config.clock}): {len(res.ticks)} ticks ({sum(e.missed for e in res.ticks)} missed), {len(res.holds)} "
          f"hold commands, {len(sent)} commands sent")
    if res.started_at_stamp is not None:
        print(f"tracking started before the sample stamped {res.started_at_stamp / 1e9:.6f} s")
    for t, kind, msg in res.faults_raised():
        print(f"  fault at {t / 1e9:.3f} s: {kind}: {msg}")
    for t, msg in res.recoveries():
        print(f"  at {t / 1e9:.3f} s: {msg}")
    level, message, _ = res.status
    print(f"final status: {message}")
    if args.csv:
        import csv

        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["time_ns", "stamp_ns", "source", "kind", "k", "fault"] + list(res.command_joints))
            for e in sent:
                w.writerow([e.time_ns, e.stamp_ns, e.source, e.kind, e.k, e.fault or ""] + [repr(float(v))
                                                                                            for v in e.command])
        print(f"wrote {args.csv}")
    if args.compare:
        if COMMANDS not in info.topics:
            print(f"marionette-bag-replay: error: --compare: no {COMMANDS} in the bag", file=sys.stderr)
            return 1
        cmp = compare_commands(res.commands(), recorded_commands(args.bag), args.tolerance)
        print(f"against the recorded {COMMANDS}: {cmp.describe()}")
        return 0 if cmp.ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
