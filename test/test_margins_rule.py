"""The reserve kept for the feedback is the rule's result (docs/margins.md, "The rule"; issue 24 item 2).

The rule: the smallest reserve, on the grid of ``RESERVE_STEPS`` and at least one step in every family, at which every motion of the library tracks on the
realistic profile (seeds 0-2) and the plant family's motions track on its plants (damping ×3 aside), closed loop and
feed-forward only, with no abort, the string at or above its minimum throughout and the closed loop no worse than
feed-forward only on any joint (``sim.margins.tracking_failures``), found by ``docs/margin_measurements.py
--search``. That the configured reserve passes every run is asserted by the library's and the family's own tests
at the default (test_motion_library.py's tracking test, test_tracking_safety.py's plant family); here, lean (the
whole search takes minutes), that it is on the grid, that it passes the runs that bind it as the search runs them,
and that one step below it, in each family above its first step, fails the run that binds that family (the
search's table, docs/margins.md). Lowering any family of the default fails the second; a rule that moved (a lower reserve would do)
fails the third: run the search again.
"""

from __future__ import annotations

import pytest

from arm_helpers import closed_and_open
from marionette_control.model.library import marionette_arm as ma
from marionette_control.model.limits import from_description
from marionette_control.ocp.problem import DEFAULT_MARGINS, DEFAULT_TENSION_RESERVE, RESERVE_STEPS
from marionette_control.ocp.spec import load_spec
from marionette_control.ocp.spec_problem import solve_spec
from marionette_control.resources import config_file
from marionette_control.sim.margins import tracking_failures
from marionette_control.sim.profile import PLANT_FAMILY, HardwareProfile

CONFIGURED = dict(DEFAULT_MARGINS, tension=DEFAULT_TENSION_RESERVE)
#: family -> (motion, plant of the family or None: the realistic profile, seed): the run that fails one grid step
#: below the configured reserve in that family (docs/margins.md, the search's table); a family not named here is
#: at its first step, the least the rule keeps
BINDING = {"speed": ("elbow_swings", None, 0), "acceleration": ("elbow_swings", None, 0),
           "tension": ("elbow_swings", None, 1)}


def test_the_configured_reserve_is_on_the_rules_grid():
    for family, value in CONFIGURED.items():
        steps = value / RESERVE_STEPS[family]
        assert steps == pytest.approx(round(steps), abs=1e-9) and round(steps) >= 1, (family, value)
        assert family in BINDING or round(steps) == 1, (family, value)


def failures(reserve: dict, motion: str, plant, seed: int) -> list:
    """What ``motion``, optimized as the search does (the arm's spec with ``reserve``, re-timed uniformly to 0.02)
    and tracked on the realistic profile with ``plant``'s change (None: none) and ``seed``, fails of the rule's
    checks (``tracking_failures``)."""
    spec = load_spec(config_file("optimize", "marionette_arm_wave.yaml"), {
        "motion.name": motion, "retime.mode": "uniform", "retime.precision": 0.02,
        "constraints.margins": {f: reserve[f] for f in DEFAULT_MARGINS}, "constraints.tension_reserve":
        reserve["tension"]})
    trajectory = solve_spec(spec).trajectory
    profile = HardwareProfile.named("realistic", seed=seed, **(PLANT_FAMILY[plant] if plant else {}))
    limits = from_description(ma.load_description())
    closed, opened = closed_and_open(trajectory, profile)
    return tracking_failures(closed.record(limits), opened.record(limits), float(limits.min_tension[0]))


@pytest.mark.slow
@pytest.mark.parametrize("motion,plant,seed", sorted(set(BINDING.values()), key=str))
def test_the_configured_reserve_passes_the_binding_runs(motion, plant, seed):
    """The runs that bind the reserve pass at the configured reserve as the search runs them (the library's and
    the family's tests check every run, the motions optimized as a user would)."""
    assert not failures(CONFIGURED, motion, plant, seed)


@pytest.mark.slow
@pytest.mark.parametrize("family", list(BINDING))
def test_one_grid_step_below_the_configured_reserve_fails(family):
    """The run that binds ``family`` fails the rule's checks with the reserve one step lower in ``family``."""
    motion, plant, seed = BINDING[family]
    reserve = dict(CONFIGURED, **{family: CONFIGURED[family] - RESERVE_STEPS[family]})
    assert failures(reserve, motion, plant, seed), (
        f"{family} {reserve[family]:g} passes {motion} ({plant or 'realistic'}, seed {seed}): the rule may give a "
        "lower reserve; run docs/margin_measurements.py --search")
