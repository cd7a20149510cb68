"""Keyframe motions: an animator's desired joint angles as keyframes, interpolated by C² cubic splines.

Thesis §6.7.2: the desired motion of the marionette arm was animated with key-frames "without
regard to the dynamics"; the animated angles are the desired angles, and every other state
component (the string's carriage and length, velocities, momenta) is set to zero in the
desired trajectory.

Motion file (YAML; ``config/motions/wave.yaml`` is an example)::

    format: keyframe-motion/1     # optional; the only version so far
    name: wave                    # required
    description: free text        # optional
    joints: [shoulder, elbow]     # required: configuration names, the column order of list rows
    angle_unit: deg               # deg or rad (default rad); applies to every joint column
    time_unit: s                  # s (default) or frame (then fps is required; t = frame / fps)
    fps: 24                       # only with time_unit: frame
    spline: clamped               # clamped (default): zero velocity at the first and last key;
                                  # natural: zero acceleration there; not-a-knot
    keyframes:                    # strictly increasing times; one row per key, either
      - [0.0, 0.0, 35.0]          #   a list [t, value per joint in 'joints' order], or
      - {t: 0.5, shoulder: 0.0, elbow: 35.0}   # a mapping with t and every joint

An animator's export (a table of frame numbers and joint angles) drops in as list rows with
``time_unit: frame`` and the export's ``fps``. The spline is a cubic spline through all keys
(scipy ``CubicSpline``): twice continuously differentiable on the whole interval, which is what
the thesis's kinematic inputs need (§3.6, footnote 4: C² so accelerations exist). Time runs
from the first key (t = 0 at the first key whatever its time in the file).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
from scipy.interpolate import CubicSpline

from marionette_control import _core
from marionette_control.model.yaml_model import Checker, read_yaml

FORMAT = "keyframe-motion/1"
SPLINES = {"clamped": "clamped", "natural": "natural", "not-a-knot": "not-a-knot"}
_KEYS = ("format", "name", "description", "joints", "angle_unit", "time_unit", "fps", "spline", "keyframes")


class MotionError(ValueError):
    """An invalid motion (file); the message names the file and the key."""


@dataclass(frozen=True)
class KeyframeMotion:
    """Keyframes (times (K,) in s from the first key, values (K, J) in SI units) and their C² spline."""

    name: str
    joints: tuple[str, ...]
    times: np.ndarray
    values: np.ndarray
    spline_type: str = "clamped"
    description: str = ""
    source: str = "<memory>"
    _spline: CubicSpline = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_spline", CubicSpline(self.times, self.values, axis=0,
                                                        bc_type=SPLINES[self.spline_type]))

    @property
    def duration(self) -> float:
        return float(self.times[-1])

    def evaluate(self, t, derivative: int = 0) -> np.ndarray:
        """Spline values (or derivative 1, 2) at times t (scalar or (N,)), shape (N, J) (or (J,) for a scalar).

        Times outside [0, duration] are an error (no extrapolation of an animation)."""
        arr = np.asarray(t, dtype=float)
        eps = 1e-9 * max(1.0, self.duration)
        if np.any(arr < -eps) or np.any(arr > self.duration + eps):
            raise MotionError(f"motion '{self.name}': times must lie in [0, {self.duration}] s, got "
                              f"[{arr.min()}, {arr.max()}]")
        if derivative not in (0, 1, 2, 3):
            raise ValueError("derivative must be 0, 1, 2 or 3")
        return self._spline(np.clip(arr, 0.0, self.duration), derivative)

    def sample(self, dt: float) -> tuple[np.ndarray, np.ndarray]:
        """Samples at t_k = k dt, k = 0..N with N dt = duration: (t (N+1,), values (N+1, J)).

        The duration must be a whole number of steps (to 1e-9 relative), so the last sample is the last key.
        """
        t = self.sample_times(dt)
        return t, self.evaluate(t)

    def sample_times(self, dt: float) -> np.ndarray:
        return sample_times(self.duration, dt, f"motion '{self.name}'")


def sample_times(duration: float, dt: float, what: str = "the motion") -> np.ndarray:
    """t_k = k dt, k = 0..N, shape (N+1,), with N dt = ``duration`` (to 1e-9 relative).

    Raises MotionError naming ``what`` when the duration is not a whole number (>= 1) of steps.
    """
    if not (isinstance(dt, (int, float)) and math.isfinite(dt) and dt > 0):
        raise MotionError(f"dt must be a positive number, got {dt!r}")
    n = round(duration / dt)
    if n < 1 or abs(n * dt - duration) > 1e-9 * max(1.0, duration):
        raise MotionError(f"{what} lasts {duration} s, which is not a whole number of steps of dt = {dt} s")
    return dt * np.arange(n + 1)


def make_motion(name: str, joints: Sequence[str], times, values, spline: str = "clamped", description: str = "",
                source: str = "<memory>") -> KeyframeMotion:
    """Validates keyframes (times (K,) strictly increasing, values (K, J) finite) and builds the motion."""
    c = Checker(source, MotionError)
    joints = tuple(joints)
    if not joints or len(set(joints)) != len(joints):
        c.fail("joints", f"expected distinct joint names, got {list(joints)}")
    t = np.asarray(times, dtype=float)
    v = np.asarray(values, dtype=float)
    if t.ndim != 1 or t.size < 2:
        c.fail("keyframes", f"a motion needs at least 2 keyframes, got {t.size}")
    if v.shape != (t.size, len(joints)):
        c.fail("keyframes", f"values must have shape ({t.size}, {len(joints)}), got {v.shape}")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(v))):
        c.fail("keyframes", "times and values must be finite")
    bad = np.flatnonzero(np.diff(t) <= 0)
    if bad.size:
        i = int(bad[0]) + 1
        c.fail(f"keyframes[{i}]", f"times must increase strictly: {t[i]} after {t[i - 1]}")
    if spline not in SPLINES:
        c.fail("spline", f"expected one of {', '.join(SPLINES)}, got {spline!r}")
    return KeyframeMotion(name, joints, t - t[0], v, spline, description, source)


def load_motion(path: str | os.PathLike) -> KeyframeMotion:
    """Reads and validates a motion file (format in the module docstring); errors name the file and the key."""
    path = os.fspath(path)
    data = read_yaml(path, MotionError)
    c = Checker(path, MotionError)
    c.mapping(data, "", required=("name", "joints", "keyframes"), optional=_KEYS)
    if data.get("format", FORMAT) != FORMAT:
        c.fail("format", f"unsupported format {data['format']!r} (supported: {FORMAT})")
    name = c.name(data["name"], "name")
    description = data.get("description", "")
    if not isinstance(description, str):
        c.fail("description", "expected text")
    joints = [c.name(j, f"joints[{i}]") for i, j in enumerate(c.list(data["joints"], "joints"))]
    if not joints:
        c.fail("joints", "at least one joint is needed")
    if len(set(joints)) != len(joints):
        c.fail("joints", f"joint names must be distinct, got {joints}")
    unit = data.get("angle_unit", "rad")
    if unit not in ("deg", "rad"):
        c.fail("angle_unit", f"expected deg or rad, got {unit!r}")
    time_unit = data.get("time_unit", "s")
    if time_unit not in ("s", "frame"):
        c.fail("time_unit", f"expected s or frame, got {time_unit!r}")
    if time_unit == "frame":
        if "fps" not in data:
            c.fail("fps", "time_unit: frame needs fps (frames per second)")
        fps = c.number(data["fps"], "fps", positive=True)
    else:
        if "fps" in data:
            c.fail("fps", "fps is only used with time_unit: frame")
        fps = 1.0
    spline = data.get("spline", "clamped")
    if spline not in SPLINES:
        c.fail("spline", f"expected one of {', '.join(SPLINES)}, got {spline!r}")
    rows = c.list(data["keyframes"], "keyframes")
    times, values = [], []
    for i, row in enumerate(rows):
        key = f"keyframes[{i}]"
        if isinstance(row, dict):
            c.mapping(row, key, required=("t", *joints))
            times.append(c.number(row["t"], f"{key}.t", minimum=0.0))
            values.append([c.number(row[j], f"{key}.{j}") for j in joints])
        elif isinstance(row, list):
            if len(row) != len(joints) + 1:
                c.fail(key, f"expected [t, {', '.join(joints)}] ({len(joints) + 1} numbers), got {len(row)}")
            times.append(c.number(row[0], f"{key}[0] (t)", minimum=0.0))
            values.append([c.number(v, f"{key}[{k + 1}] ({j})") for k, (j, v) in enumerate(zip(joints, row[1:]))])
        else:
            c.fail(key, f"expected [t, values...] or a mapping with t and the joints, got {row!r}")
    scale = math.pi / 180.0 if unit == "deg" else 1.0
    return make_motion(name, joints, np.array(times) / fps, np.array(values, dtype=float).reshape(-1, len(joints))
                       * scale, spline, description, path)


# --------------------------------------------------------------------------------------------- desired trajectories


def _columns(model: _core.Model, motion: KeyframeMotion, names: Mapping[str, str] | None) -> list[int]:
    names = dict(names or {})
    cols = []
    for j in motion.joints:
        config = names.get(j, j)
        if config not in model.config_names:
            raise MotionError(f"{motion.source}: joint '{j}' is not a configuration of model '{model.name}' "
                              f"(configurations: {', '.join(model.config_names)}); map it with names=")
        cols.append(model.config_names.index(config))
    return cols


def desired_configurations(model: _core.Model, motion: KeyframeMotion, dt: float,
                           names: Mapping[str, str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(t (N+1,), Q_d (N+1, nq)): the motion's joints sampled at dt, every other configuration 0 (thesis §6.7.2).

    ``names`` maps motion joint names to configuration names where they differ (e.g. hardware names).
    """
    cols = _columns(model, motion, names)
    t, values = motion.sample(dt)
    Q = np.zeros((t.size, model.nq))
    Q[:, cols] = values
    return t, Q


def desired_states(model: _core.Model, motion: KeyframeMotion, dt: float,
                   names: Mapping[str, str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(t (N+1,), X_d (N+1, nx)) with x = [q; p; v]: the motion's angles, carriage/string length, momenta and
    kinematic velocities 0, as the thesis sets the desired trajectory of the marionette arm (§6.7.2)."""
    t, Q = desired_configurations(model, motion, dt, names)
    X = np.zeros((t.size, model.nx))
    X[:, : model.nq] = Q
    return t, X


__all__ = ["KeyframeMotion", "MotionError", "make_motion", "load_motion", "sample_times", "desired_configurations",
           "desired_states", "FORMAT"]
