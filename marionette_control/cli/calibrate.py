"""marionette-calibrate: fit a model file's physical parameters to the arm's own recorded data.

    marionette-calibrate RECORDING [--model FILE] [--dt S] [--parameters NAME ...] [--add NAME ...]
                         [--known NAME=VALUE[+-STD] ...] [--prior NAME=MEAN+-STD ...] [-o VARIANT.yaml]
                         [--json REPORT.json] [--window STEPS] [--equation-error-only]
                         [--joint-states TOPIC] [--commands TOPIC] [--command-joints NAME ...]
    python -m marionette_control.cli.calibrate ...     (same)

RECORDING is a rosbag2 directory (``/joint_states`` and the command topic, as ``marionette-bag-record`` or
``ros2 bag record`` write them) or a table (``.npz`` with ``t`` and ``q``, or ``.csv`` with ``t`` and one column
per configuration: ``marionette_control/identification/recording.py``). The fit
(``marionette_control/identification/``, thesis §5.1.3): the DEL equations' residual along the measurements, then
the simulation error over short windows, both with exact derivatives, under a prior (the model file's values and
their uncertainty) — masses, centres of mass, inertias, joint damping and the string's attachment points by
default (``--parameters`` to choose; names like ``forearm.mass``, ``elbow.damping``, ``hook.translation.z``).

Motion alone fixes the masses only up to a common factor (no force is measured): weigh the links and give them
with ``--known upper_arm.mass=0.212+-0.001``; without, the masses stay near the model file's and are reported as
not identifiable. ``-o`` writes the calibrated model as a variant file (``base:`` the model, ``overrides:`` the
estimates, their standard deviations in comments) for the nodes' ``model_file``; ``--json`` the full report.

Exit status: 0 calibrated, 1 the recording cannot calibrate the model (the message says what is missing),
2 bad arguments or files.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from marionette_control.identification.calibration import DEFAULT_WINDOW, calibrate, default_parameters
from marionette_control.identification.fit import CalibrationError, Prior, default_prior
from marionette_control.identification.parameters import ModelParameters, ParameterError
from marionette_control.identification.recording import RecordingError, bag_time_step, from_bag, from_table
from marionette_control.identification.variant import write_variant
from marionette_control.model.yaml_model import ModelFileError
from marionette_control.resources import config_file

_VALUE = re.compile(r"^\s*([^=\s]+)\s*=\s*([-+0-9.eE]+)\s*(?:(?:\+-|±)\s*([0-9.eE+-]+))?\s*$")


def _assignments(items, what: str, need_std: bool) -> dict:
    """``NAME=VALUE[+-STD]`` → {name: (value, std or None)}."""
    out = {}
    for item in items or ():
        m = _VALUE.match(item)
        if not m:
            raise ValueError(f"{what}: expected NAME=VALUE{'+-STD' if need_std else '[+-STD]'}, got {item!r}")
        name, value, std = m.group(1), float(m.group(2)), m.group(3)
        if need_std and std is None:
            raise ValueError(f"{what} {name}: give the uncertainty, e.g. {name}={value}+-{abs(value) * 0.1:g}")
        out[name] = (value, float(std) if std is not None else None)
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="marionette-calibrate", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Method and formats: marionette_control/identification/ and docs/calibration.md.")
    p.add_argument("recording", help="rosbag2 directory, or a .npz/.csv table of times and configurations")
    p.add_argument("--model", default="marionette_arm.yaml",
                   help="the model file to calibrate (relative names under config/; default marionette_arm.yaml)")
    p.add_argument("--dt", type=float, help="the recording's time step [s] (default: its median sample spacing)")
    p.add_argument("--parameters", nargs="+", metavar="NAME", help="the parameters to fit (default: the model's "
                   "masses, centres of mass, inertias, damping, string attachments)")
    p.add_argument("--add", nargs="+", metavar="NAME", default=[], help="parameters to fit besides the default "
                   "ones (e.g. shoulder.offset)")
    p.add_argument("--known", nargs="+", metavar="NAME=VALUE[+-STD]", default=[],
                   help="measured values (e.g. weighed masses; default uncertainty 0.5 %%)")
    p.add_argument("--prior", nargs="+", metavar="NAME=MEAN+-STD", default=[], help="other prior beliefs")
    p.add_argument("-o", "--output", help="write the calibrated model as a variant model file (.yaml)")
    p.add_argument("--json", help="write the report (every parameter, the fit's statistics) as JSON")
    p.add_argument("--window", type=int, default=DEFAULT_WINDOW, help=f"steps per output-error window "
                   f"(default {DEFAULT_WINDOW})")
    p.add_argument("--equation-error-only", action="store_true", help="skip the output-error refinement")
    p.add_argument("--joint-states", default="/joint_states", help="joint-state topic of a bag")
    p.add_argument("--commands", default="/forward_position_controller/commands", help="command topic of a bag")
    p.add_argument("--command-joints", nargs="+", help="hardware names of the command's entries")
    return p


def _print_table(calibration, rep) -> None:
    print(f"[calibrate] {rep['source']}: {rep['samples']} samples, {rep['nodes']} nodes, chi^2/dof "
          f"{rep['chi2_per_dof']:.3g}, string tension {rep['tension_n']['min']:.3g}..{rep['tension_n']['median']:.3g} "
          f"N (min..median)" if rep["tension_n"]["min"] is not None else "")
    if rep["command_delay_steps"] is not None:
        print(f"[calibrate] command delay: {rep['command_delay_steps']} step(s)")
    for e in calibration.estimates:
        state = "known" if e.known else ("identified" if e.identifiable else "not identifiable")
        print(f"  {e.name:32s} {e.estimate: .6g} ± {e.std:.2g} {e.unit:10s} (file {e.nominal:.6g}; {state})")
    if calibration.scale_note:
        print(f"[calibrate] note: {calibration.scale_note}")
    for n in rep["notes"]:
        print(f"[calibrate] {n}")


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        known = _assignments(args.known, "--known", need_std=False)
        beliefs = _assignments(args.prior, "--prior", need_std=True)
        params = ModelParameters(config_file(args.model))
        names = list(args.parameters or default_parameters(params)) + list(args.add)
        for n in list(known) + list(beliefs):
            if n not in names:
                names.append(n)
        priors = {}
        for n, (v, sd) in beliefs.items():
            priors[n] = Prior(v, sd)
        for n, (v, sd) in known.items():
            priors[n] = Prior(v, sd if sd is not None else 0.005 * abs(v) or default_prior(params, params.parameter(n)).std,
                              known=True)
        params.parameters(names)   # every name checked before the recording is read
        path = Path(args.recording)
        if path.is_dir():
            recording = from_bag(path, params.description, args.dt or bag_time_step(path, args.joint_states),
                                 args.joint_states, args.commands, args.command_joints)
        else:
            recording = from_table(path, params.description, args.dt)
    except (ValueError, OSError, ModelFileError, ParameterError) as e:
        if isinstance(e, RecordingError):
            print(f"marionette-calibrate: {e}", file=sys.stderr)
            return 1
        print(f"marionette-calibrate: {e}", file=sys.stderr)
        return 2
    try:
        calibration, rep = calibrate(params, recording, names, priors, refine=not args.equation_error_only,
                                     window=args.window)
    except (RecordingError, CalibrationError) as e:
        print(f"marionette-calibrate: {e}", file=sys.stderr)
        return 1
    _print_table(calibration, rep)
    if args.output:
        out = write_variant(params, calibration, args.output, source=recording.source)
        print(f"[calibrate] wrote {out}")
    if args.json:
        Path(args.json).write_text(json.dumps(rep, indent=2, default=float) + "\n")
        print(f"[calibrate] wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
