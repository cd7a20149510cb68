"""The calibrated model as a variant model file: the nominal file as ``base:`` and the estimates as ``overrides:``
(``docs/models.md``, "Variants of a model file"), with every estimate's standard deviation, identifiability and
the data it came from in comments — a file a user reads, commits and hands to the nodes (``model_file``).

Physical consistency on the way out: a fitted principal moment of inertia that would break the triangle
inequality with the moments the fit did not touch (a tube's I_xx = I_yy: fitting I_xx alone can exceed
I_yy + I_zz) raises the untouched moment to the smallest consistent value, and the file says so.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Optional

import numpy as np

from marionette_control.identification.fit import Calibration
from marionette_control.identification.parameters import INERTIA_AXES, ModelParameters


def _num(v: float) -> str:
    return f"{v:.6g}"


def _vector(values) -> str:
    return "[" + ", ".join(_num(v) for v in values) + "]"


def _comment(est) -> str:
    state = "known" if est.known else ("identified" if est.identifiable else "not identifiable: near its prior")
    return f"{est.name} = {_num(est.estimate)} ± {_num(est.std)} {est.unit} ({state}; file: {_num(est.nominal)})"


def variant_text(params: ModelParameters, calibration: Calibration, path: str | os.PathLike, source: str = "",
                 name: Optional[str] = None) -> str:
    """The text of the variant model file to be written at ``path`` (its ``base`` relative to it)."""
    path = Path(path)
    base = os.path.relpath(Path(params.path).resolve(), path.resolve().parent)
    if base.startswith(".."):        # the nominal file is not beside or below the variant: name it absolutely
        base = str(Path(params.path).resolve())
    nominal = params.description
    by_target: dict = {}
    for p, est in zip(calibration.parameters, calibration.estimates):
        by_target.setdefault((p.kind if p.kind in ("damping", "translation", "offset") else "mass", p.target),
                             []).append((p, est))
    lines = [f"# Calibrated from {source or 'a recording'} by marionette-calibrate on "
             f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC (marionette_control.identification).",
             f"# Fit: {calibration.nodes} nodes, chi^2/dof = {calibration.chi2 / calibration.dof:.3g}; sensor noise "
             + ", ".join(f"{n} {_num(s)}" for n, s in zip(params.configs, calibration.noise)) + "."]
    if calibration.scale_note:
        lines.append("# Note: " + calibration.scale_note + ".")
    masses, placements, damping, notes = [], [], [], []
    for (kind, target), items in sorted(by_target.items()):
        comments = [_comment(est) for _, est in items]
        if kind == "mass":
            m, inertia = params.mass_of(target)
            com = params.frame_translation(target) if target in params.description.model.frame_names and \
                target.endswith("_inertial") else None
            for p, est in items:
                if p.kind == "mass":
                    m = est.estimate
                elif p.kind == "inertia":
                    inertia[p.axis] = est.estimate
                elif p.kind == "center_of_mass":
                    com[p.axis] = est.estimate
            fitted = {p.axis for p, _ in items if p.kind == "inertia"}
            for i in range(3):
                others = [j for j in range(3) if j != i]
                excess = inertia[i] - inertia[others[0]] - inertia[others[1]]
                if i in fitted and excess > 0:
                    raise_j = next((j for j in others if j not in fitted), None)
                    if raise_j is not None:
                        inertia[raise_j] += excess
                        notes.append(f"{target}: inertia.{INERTIA_AXES[raise_j]} raised to {_num(inertia[raise_j])} "
                                     f"so that the fitted inertia.{INERTIA_AXES[i]} is physical (triangle inequality)")
            if np.linalg.norm(params.frame_rotation(target) - np.eye(3)) > 1e-12:
                raise ValueError(f"{target}: its principal axes are not the link's: the variant file needs the full "
                                 "inertia tensor, which this writer does not produce")
            body = target.removesuffix("_inertial")
            entry = {"mass": _num(m), "inertia": _vector(inertia)}
            if com is not None:
                entry["center_of_mass"] = _vector(com)
            masses.append((body, entry, comments))
        elif kind == "translation":
            t = params.frame_translation(target)
            for p, est in items:
                t[p.axis] = est.estimate
            placements.append((target, {"translation": _vector(t)}, comments))
        elif kind == "damping":
            damping.append((target, _num(items[0][1].estimate), comments))
        else:   # offsets calibrate the sensors, not the model
            notes += [f"sensor offset {c} (subtract from the readings; not a model parameter)" for c in comments]
    lines += [f"name: {name or nominal.name + '_calibrated'}",
              f"description: {nominal.name} calibrated from {source or 'a recording'}",
              f"base: {base}", "overrides:"]
    if masses:
        lines.append("  masses:")
        for body, entry, comments in masses:
            lines += [f"    # {c}" for c in comments]
            lines.append(f"    {body}: {{" + ", ".join(f"{k}: {v}" for k, v in entry.items()) + "}")
    if placements:
        lines.append("  placements:")
        for frame, entry, comments in placements:
            lines += [f"    # {c}" for c in comments]
            lines.append(f"    {frame}: {{" + ", ".join(f"{k}: {v}" for k, v in entry.items()) + "}")
    if damping:
        lines.append("  damping:")
        for config, value, comments in damping:
            lines += [f"    # {c}" for c in comments]
            lines.append(f"    {config}: {value}")
    if notes:
        lines += [""] + [f"# {n}" for n in notes]
    return "\n".join(lines) + "\n"


def write_variant(params: ModelParameters, calibration: Calibration, path: str | os.PathLike, source: str = "",
                  name: Optional[str] = None) -> Path:
    """Writes :func:`variant_text` to ``path`` and returns it; the file loads as a model file (checked)."""
    path = Path(path)
    path.write_text(variant_text(params, calibration, path, source, name))
    ModelParameters(path)      # the file must load: a model file error here is this writer's
    return path

