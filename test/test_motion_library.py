"""The motion library (config/motions/): motions of different character that the arm as built can make.

Evidence, for every motion of the library:
* its poses can be held: every pose sampled every 20 ms is a static equilibrium the string holds (tension at
  least the optimizer's floor, min_tension + tension_reserve) with the carriage and the string inside their
  ranges less the reserve kept for the feedback, and a string moment arm about the joints of at least 0.1 m
  (docs/models.md explains the geometry on the wave's poses);
* it optimizes with the package's own tool (``marionette-optimize`` on the arm's spec with ``motion.name``):
  it converges and is trackable as drawn (ocp/trackability.py) — or, drawn too fast for the drives
  (``elbow_swings``), it is re-timed uniformly and trackable at its factor; every result keeps the drives'
  range, speed and acceleration within their limits less the margins and the string tension at or above its
  floor at every step (recomputed from the trajectory and the VI step's multipliers, not the constraint code).

* tracked offline on the realistic profile (three noise seeds), it keeps the string at or above its minimum
  throughout, the start included, and the drives within their limits, without abort, and the closed loop is no
  worse than feed-forward only on any joint (test/arm_helpers.py, ``check_tracking_safe``).
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

from arm_helpers import check_tracking_safe, closed_and_open, physical
from marionette_control import _core
from marionette_control.cli import optimize
from marionette_control.model.library import marionette_arm as ma
from marionette_control.model.limits import from_description, load_limits
from marionette_control.model.library.source import ModelSource
from marionette_control.model.motion import load_motion
from marionette_control.ocp.problem import ConstraintOptions
from marionette_control.ocp.tracking_problem import default_motion_directories, find_motion, motion_names
from marionette_control.resources import config_dir
from marionette_control.sim.profile import HardwareProfile
from marionette_control.trajectory import Trajectory

LIBRARY = motion_names(default_motion_directories())
#: motions drawn faster than the drives can follow: re-timed (the rest are trackable as drawn)
TOO_FAST = {"elbow_swings"}
WAVE_SPEC = config_dir() / "optimize" / "marionette_arm_wave.yaml"
TOL = 1e-6   # the optimizer's feasibility tolerance on normalized margins


@pytest.fixture(scope="module")
def model():
    return ma.marionette_arm()


def test_the_library_has_motions_of_different_character():
    assert len(LIBRARY) >= 6 and {"wave", "elbow_swings"} <= set(LIBRARY)
    for name in LIBRARY:
        text = find_motion(name, default_motion_directories()).read_text()
        assert text.startswith("#") and "shows" in text.split("format:")[0], f"{name}: say what it shows"


@pytest.mark.parametrize("name", LIBRARY)
def test_every_pose_is_a_static_equilibrium_the_string_holds(model, name):
    motion = load_motion(find_motion(name, default_motion_directories()))
    limits = ConstraintOptions().limits(model, load_limits(ModelSource.registered("marionette_arm")))
    _, angles = motion.sample(0.02)
    carriage, length, tension, arm = [], [], [], []
    for s, e in angles:
        eq = ma.static_equilibrium(model, s, e)
        carriage.append(eq.q[2])
        length.append(eq.q[3])
        tension.append(eq.tension)
        arm.append(np.linalg.norm(model.constraints(eq.q)[1][0, :2]) / (2 * eq.q[3]))
    rho = np.column_stack([carriage, length])
    assert np.all(rho >= limits.lower) and np.all(rho <= limits.upper), (rho.min(axis=0), rho.max(axis=0))
    assert min(tension) >= limits.min_tension[0], min(tension)
    assert min(arm) >= 0.1, min(arm)


@pytest.fixture(scope="module")
def optimized(tmp_path_factory):
    """name -> (exit code, Trajectory or None, what the tool printed): the library motion optimized with the
    package's tool on the arm's spec (re-timed uniformly when drawn too fast), once per test process."""
    cache = {}

    def solve(name: str):
        if name not in cache:
            out = tmp_path_factory.mktemp(name) / f"{name}.npz"
            args = [str(WAVE_SPEC), "--set", f"motion.name={name}", "-o", str(out), "--progress", "quiet"]
            if name in TOO_FAST:   # as docs/motions.md tells a user: the default re-timing precision
                args += ["--retime", "uniform"]
            text = io.StringIO()
            with contextlib.redirect_stdout(text):
                code = optimize.main(args)
            cache[name] = (code, Trajectory.load(out, ma.marionette_arm()) if code == 0 else None, text.getvalue())
        return cache[name]
    return solve


def _slow_if_too_fast(names) -> list:
    return [pytest.param(n, marks=pytest.mark.slow) if n in TOO_FAST else n for n in names]


@pytest.mark.parametrize("name", _slow_if_too_fast(LIBRARY))
def test_every_motion_optimizes_within_the_reserved_limits(optimized, name):
    code, tr, text = optimized(name)
    assert code == 0
    info = tr.info
    assert info["summary"]["trackable"] and info["trackability"]["feasible"]
    if name in TOO_FAST:
        r = info["retiming"]
        assert r["found"] and not r["drawn"]["trackable"] and r["factor"] > 1.0
        assert f"motion needs {r['factor']:.3g}× its duration" in text
    else:
        assert info["converged"] and "retiming" not in info and "the motion is trackable" in text
    check_limits(tr)


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in TOO_FAST else n for n in LIBRARY])
def test_every_motion_tracks_safely_on_the_realistic_profile(optimized, name):
    """The optimized motion tracked offline on the realistic stand-in (one-sided string, plant model error, delay,
    encoder counts and noise) with three noise seeds: no abort, the string at or above its minimum throughout
    (the start included), commands and the drives' true motion within their limits, closed loop RMS ≤ feed-forward
    only on every joint (arm_helpers.check_tracking_safe)."""
    code, tr, _ = optimized(name)
    assert code == 0
    limits = from_description(ma.load_description())
    for seed in (0, 1, 2):
        check_tracking_safe(*closed_and_open(tr, HardwareProfile.named("realistic", seed=seed)), limits)


def check_limits(tr: Trajectory) -> None:
    """The trajectory keeps the reserved limits its record states (recomputed from X, U and the VI multipliers)."""
    reserved = tr.info["constraints"]["set"]["reserved"]
    rho, speed, acc, tension = physical(_core.DiscreteSystem(ma.marionette_arm(), tr.dt), tr.X, tr.U)
    for i, name in enumerate(("carriage", "string_length")):
        d = reserved["drives"][name]
        assert d["min"] - 1e-9 <= rho[:, i].min() and rho[:, i].max() <= d["max"] + 1e-9, name
        assert np.abs(speed[:, i]).max() <= d["max_velocity"] * (1 + TOL), name
        assert np.abs(acc[:, i]).max() <= d["max_acceleration"] * (1 + TOL), name
    assert tension.min() >= reserved["min_tension"]["string"] - TOL
