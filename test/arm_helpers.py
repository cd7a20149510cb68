"""A small limit-respecting trajectory of the marionette arm, shared by the controller tests."""

from __future__ import annotations

import numpy as np

from marionette_control import _core, models
from marionette_control.control.gains import GainDesign, design_gains
from marionette_control.control.trajectory import Trajectory
from marionette_control.models import marionette_arm as ma


def bump_trajectory(dt: float = 0.01, steps: int = 200, model=None, delay=None) -> tuple:
    """(DiscreteSystem, Trajectory): the arm simulated from rest at its lowered equilibrium, carriage and string
    length moved smoothly (sin² bump: +10 cm, −8 cm) and back; with gains designed for ``delay`` steps of command
    delay (``GainDesign`` defaults) unless ``delay`` is None."""
    m = model or models.get("marionette_arm")
    ds = _core.DiscreteSystem(m, dt)
    q0 = ma.static_equilibrium(m, *ma.LOWERED).q
    s = np.sin(np.pi * np.arange(1, steps + 1) / steps) ** 2
    U = np.stack([q0[2] + 0.10 * s, q0[3] - 0.08 * s], axis=1)
    X, _ = ds.simulate(ds.state_from_configs(q0, q0), U)
    traj = Trajectory.for_model(m, dt, X, U)
    if delay is not None:
        traj = design_gains(ds, X, U, GainDesign(delay_steps=delay)).attach(traj)
    return ds, traj
