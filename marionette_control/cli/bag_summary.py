"""marionette-bag-summary: topics, counts, rates, gaps of a bag; PNG of its joint trajectories.

    marionette-bag-summary BAG [--json] [--gap-factor F] [--min-gap S]
                           [--plot OUT.png [--trajectory T.npz] [--align-stamp S] [--model-file FILE]]
    python -m marionette_control.cli.bag_summary ...      (same)

Prints one line per topic: count, mean rate, median period, largest gap, number of gaps
(intervals longer than F median periods, default 3, and at least --min-gap seconds), header
stamps that repeat or go backwards, offered QoS and type (``marionette_control/bags/summary.py``).
``--plot`` draws the recorded /joint_states against the trajectory file (default: the one named
in the bag's metadata, if any) with the controller's commands.

Exit status: 0 done, 1 unreadable bag or failed plot, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys

from marionette_control.model.yaml_model import load_packaged_model
from marionette_control.bags.bagio import BagError
from marionette_control.bags.replay import trajectory_of_bag
from marionette_control.bags.summary import format_summary, plot_joint_trajectories, summarize
from marionette_control.trajectory import TrajectoryError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="marionette-bag-summary", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bag", help="bag directory")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--gap-factor", type=float, default=3.0, metavar="F", help="gap = interval > F median periods")
    p.add_argument("--min-gap", type=float, default=0.0, metavar="S", help="and longer than S seconds")
    p.add_argument("--plot", metavar="PNG", help="write a plot of the recorded joint trajectories")
    p.add_argument("--trajectory", metavar="NPZ", help="trajectory file to plot against (default: the bag's)")
    p.add_argument("--no-trajectory", action="store_true", help="plot the recording alone")
    p.add_argument("--align-stamp", type=float, metavar="S",
                   help="stamp (s) of the trajectory's t = 0 (default: the controller's first tick)")
    p.add_argument("--model-file", default="marionette_arm.yaml",
                   help="model file whose hardware joint names map /joint_states onto configurations")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        s = summarize(args.bag, args.gap_factor, args.min_gap)
    except BagError as e:
        print(f"marionette-bag-summary: error: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(s.to_dict(), indent=2, default=float))
    else:
        print(format_summary(s))
    if args.plot:
        try:
            traj = None
            if not args.no_trajectory:
                if args.trajectory or "marionette.trajectory_file" in s.custom_data:
                    traj, _ = trajectory_of_bag(args.bag, args.trajectory)
            mapping = None
            try:
                mapping = dict(load_packaged_model(args.model_file).hardware_joints)
            except (OSError, ValueError):
                pass  # plot by joint name
            out = plot_joint_trajectories(args.bag, args.plot, traj, args.align_stamp, mapping)
        except (BagError, TrajectoryError, ValueError, OSError) as e:
            print(f"marionette-bag-summary: error: cannot plot: {e}", file=sys.stderr)
            return 1
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
