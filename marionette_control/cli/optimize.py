"""marionette-optimize: optimize a desired motion from a YAML spec into a trajectory file.

    marionette-optimize SPEC.yaml [-o OUT.npz] [--set KEY=VALUE ...] [--deadline S]
                        [--max-iterations N] [--retime off|uniform|warp]
                        [--progress auto|live|plain|quiet] [--summary-json PATH]
    python -m marionette_control.cli.optimize ...     (same)

Runs the spec (format: ``marionette_control/ocp/spec.py``; examples in ``config/optimize/``; the run:
``marionette_control/ocp/spec_problem.py``): initial trajectory, projection-operator optimization (or
DMOCC with ``method: dmocc``), time-varying LQR tracking gains designed by
the spec's ``tracking_gains`` (``marionette_control/lq/gains.py``); writes the trajectory
file (``marionette_control/trajectory.py``) with K, the gains' design record and the
optimizer's statistics in its ``info``, and prints a summary (iterations, cost, RMS error of every
prescribed configuration, input ranges, the reserve kept for the feedback, every inequality
constraint's worst margin, where it occurs and where it is active, and whether the motion is
trackable: ``marionette_control/ocp/trackability.py``).

``--retime MODE`` re-times a motion too fast for the arm (the spec's ``retime``;
``marionette_control/ocp/retiming.py``): ``uniform`` finds the smallest uniform slow-down at which it
is trackable, ``warp`` slows only the keyframe intervals that need it; the summary then says e.g.
"motion needs 1.09× its duration (4 s → 4.37 s, slowed uniformly): as drawn it misses the motion by
shoulder 0.513° RMS (tolerance 0.25°); riding carriage acceleration >= -11.25 m/s^2 (47 steps), ...".

``--set`` overrides a spec key before checking (dotted path, YAML value), e.g.
``--set optimizer.max_iterations=5 --set weights.state.elbow=1e3``. Progress is a live line on a
terminal and one line per iteration otherwise. Ctrl-C (or the deadline) stops the optimization
and saves the best feasible trajectory so far; a second Ctrl-C aborts.

Exit status: 0 trajectory written (converged or stopped), 1 run failed, 2 bad spec or arguments.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

import yaml

from marionette_control.cli.progress import MODES, Progress
from marionette_control.ocp.problem import RETIME_MODES
from marionette_control.ocp.spec import SpecError, load_spec
from marionette_control.ocp.spec_problem import solve_spec
from marionette_control.model.yaml_model import StrictLoader


def parse_set(items) -> dict:
    """``KEY=VALUE`` strings -> {dotted key: YAML value}."""
    out = {}
    for item in items or ():
        if "=" not in item:
            raise ValueError(f"--set expects KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        key = key.strip()
        if not key or any(not part for part in key.split(".")):
            raise ValueError(f"--set: bad key {key!r}")
        try:
            out[key] = yaml.load(value, Loader=StrictLoader) if value.strip() else None
        except yaml.YAMLError as e:
            raise ValueError(f"--set {key}: value is not YAML: {e}") from None
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="marionette-optimize", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Spec format: marionette_control/ocp/spec.py; examples: config/optimize/.")
    p.add_argument("spec", help="optimization spec (YAML)")
    p.add_argument("-o", "--output", help="trajectory file to write (.npz; default: the spec's output, else "
                                          "<spec name>.npz in the working directory)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a spec key (dotted path, YAML value); repeatable")
    p.add_argument("--deadline", type=float, help="overall time limit in seconds (overrides the spec)")
    p.add_argument("--max-iterations", type=int, help="iteration limit of the final optimization (overrides the spec)")
    p.add_argument("--retime", choices=RETIME_MODES, help="re-time a motion too fast for the arm: uniform (the "
                                                          "smallest uniform slow-down) or warp (only where needed); "
                                                          "overrides the spec's retime mode")
    p.add_argument("--progress", choices=MODES, default="auto", help="progress display (default: live on a "
                                                                     "terminal, plain lines otherwise)")
    p.add_argument("--summary-json", help="also write the summary as JSON to this file")
    p.add_argument("--debug", action="store_true", help="show the traceback of a failed run")
    return p


def _summary_lines(result, out: Path) -> list:
    s = result.summary
    lines = [f"wrote {out}",
             f"{'converged' if s['converged'] else 'stopped (' + s['reason'] + ')'} after {s['iterations']} "
             f"iterations ({s['iterations_total']} including the initial-trajectory stages) in {s['elapsed']:.1f} s",
             f"cost {s['initial_cost']:.6g} (initial trajectory) -> {s['cost']:.6g}"]
    for name, e in s["tracking_errors"].items():
        lines.append(f"  {name}: RMS error {e['rms']:.3e}, max {e['max']:.3e} (vs the desired motion)")
    for name, (lo, hi) in s["input_ranges"].items():
        lines.append(f"  input {name}: [{lo:.4g}, {hi:.4g}]")
    return lines + reserve_lines(s) + constraint_lines(result.trajectory.info.get("constraints") or {}) + \
        [retiming_line(result.trajectory.info)]


def reserve_lines(summary: dict) -> list:
    """The reserve kept for the feedback (margins, tension reserve), one line."""
    r = summary.get("reserve") or {}
    margins = ", ".join(f"{f} {100 * v:g} %" for f, v in (r.get("margins") or {}).items() if v)
    tension = r.get("tension_reserve") or 0.0
    if not margins and not tension:
        return ["reserve for the feedback: none"]
    return [f"reserve for the feedback: {margins or 'no drive margin'}"
            + (f"; tension {tension:g} N above the minimum" if tension else "")]


def retiming_line(info: dict) -> str:
    """Whether the motion is trackable, and with re-timing what it needs (``info['retiming']``)."""
    if info.get("retiming"):
        return info["retiming"]["message"]
    return f"the motion is {info['trackability']['message']}" + \
        ("" if info["trackability"]["trackable"] else " (--retime uniform finds the duration it needs)")


def constraint_lines(constraints: dict) -> list:
    """The constraint report of a result: every row's worst margin, where, and where it is active."""
    rows = constraints.get("margins") or []
    if not rows:
        return ["no inequality constraints"]
    ok = constraints.get("feasible", True)
    lines = [f"constraints: {'all satisfied' if ok else 'VIOLATED'} (largest normalized violation "
             f"{constraints.get('violation', 0.0):.3g}); worst margins:"]
    for r in rows:
        unit = f" {r['unit']}" if r["unit"] else ""
        active = ""
        reserve = f" (hardware {r['hardware_limit']:.4g}{unit}, margin to it {r['hardware_margin']:.4g}{unit})" \
            if r.get("reserve") else ""
        if r["active_steps"]:
            spans = ", ".join(f"{a:.2f}-{b:.2f} s" if b > a else f"{a:.2f} s" for a, b in r["active_intervals"][:4])
            more = ", ..." if len(r["active_intervals"]) > 4 else ""
            active = f"; active at {r['active_steps']} step(s): {spans}{more}"
        flag = "" if r["satisfied"] else "  VIOLATED"
        lines.append(f"  {r['label']}: worst margin {r['margin']:.4g}{unit} at t = {r['time']:.2f} s (step "
                     f"{r['step']}){reserve}{active}{flag}")
    return lines


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        overrides = parse_set(args.set)
    except ValueError as e:
        parser.error(str(e))
    if args.deadline is not None:
        if not args.deadline > 0:
            parser.error("--deadline must be > 0 seconds")
        overrides["optimizer.deadline"] = args.deadline
    if args.max_iterations is not None:
        if args.max_iterations < 0:
            parser.error("--max-iterations must be >= 0")
        overrides["optimizer.max_iterations"] = args.max_iterations
    if args.retime is not None:
        overrides["retime.mode"] = args.retime
    try:
        spec = load_spec(args.spec, overrides)
    except SpecError as e:
        print(f"marionette-optimize: error: {e}", file=sys.stderr)
        return 2
    out = Path(args.output or spec.output or Path(args.spec).with_suffix(".npz").name)

    stop = {"requested": False}

    def on_sigint(signum, frame):
        if stop["requested"]:
            raise KeyboardInterrupt
        stop["requested"] = True
        progress.log("stop requested: finishing with the best trajectory so far (Ctrl-C again aborts)")

    progress = Progress(sys.stdout, args.progress)
    previous = None
    try:
        previous = signal.signal(signal.SIGINT, on_sigint)
    except ValueError:  # not the main thread: no signal handling
        pass
    try:
        result = solve_spec(spec, callback=progress.update, should_stop=lambda: stop["requested"], log=progress.log)
    except SpecError as e:
        progress.close()
        print(f"marionette-optimize: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        progress.close()
        print("marionette-optimize: aborted", file=sys.stderr)
        return 1
    except Exception as e:  # a failed run: say what failed (the traceback with --debug)
        progress.close()
        if args.debug:
            raise
        print(f"marionette-optimize: error: the optimization failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    progress.close()
    path = result.trajectory.save(out)
    for line in _summary_lines(result, path):
        progress.log(line)
    if args.summary_json:
        Path(args.summary_json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.summary_json).write_text(json.dumps(dict(result.summary, output=str(path)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
