"""Trajectories of the marionette arm shared by the tests: a small limit-respecting bump, the wave, the physical
drive motion and string tension of a trajectory, and the safety checks of a closed-loop run against feed-forward
only (:func:`closed_and_open`, :func:`check_tracking_safe`)."""

from __future__ import annotations

import functools
from typing import Optional

import numpy as np

from marionette_control import _core
from marionette_control.model import library
from marionette_control.lq.gains import GainDesign, design_gains
from marionette_control.trajectory import Trajectory
from marionette_control.model.library import marionette_arm as ma
from marionette_control.resources import config_file
from marionette_control.sim.margins import tracking_failures
from marionette_control.sim.offline_loop import run_loop
from marionette_control.tracking.controller_options import ControllerOptions


def bump_trajectory(dt: float = 0.01, steps: int = 200, model=None, delay=None) -> tuple:
    """(DiscreteSystem, Trajectory): the arm simulated from rest at its lowered equilibrium, carriage and string
    length moved smoothly (sin² bump: +10 cm, −8 cm) and back; with gains designed for ``delay`` steps of command
    delay (``GainDesign`` defaults) unless ``delay`` is None."""
    m = model or library.get("marionette_arm")
    ds = _core.DiscreteSystem(m, dt)
    q0 = ma.static_equilibrium(m, *ma.LOWERED).q
    s = np.sin(np.pi * np.arange(1, steps + 1) / steps) ** 2
    U = np.stack([q0[2] + 0.10 * s, q0[3] - 0.08 * s], axis=1)
    X, _ = ds.simulate(ds.state_from_configs(q0, q0), U)
    traj = Trajectory.for_model(m, dt, X, U)
    if delay is not None:
        traj = design_gains(ds, X, U, GainDesign(delay_steps=delay)).attach(traj)
    return ds, traj


@functools.lru_cache(maxsize=2)
def wave_motion(tolerance: Optional[float] = None) -> tuple:
    """(Problem, Trajectory): config/optimize/marionette_arm_wave.yaml (the 8 s wave, constrained) and its optimum
    with gains for one step of command delay (the spec's), solved once per test process (about 0.2 s);
    ``tolerance``: the optimizer's convergence tolerance on |Dh∘ζ| instead of the spec's (a more precisely
    stationary optimum)."""
    from marionette_control.ocp.spec import load_spec
    from marionette_control.ocp.spec_problem import solve_spec

    overrides = {} if tolerance is None else {"optimizer.tolerance": tolerance}
    result = solve_spec(load_spec(config_file("optimize", "marionette_arm_wave.yaml"), overrides))
    return result.problem, result.trajectory


def physical(system, X: np.ndarray, U: np.ndarray) -> tuple:
    """(ρ_{k+1} (N, nk), speed (N, nk), acceleration (N, nk), string tension (N,)) of an arm trajectory, recomputed
    from X, U and the VI step's own multiplier (T = 2 L λ/Δt), independently of the optimizer's constraint code.
    system : the arm's DiscreteSystem at the trajectory's Δt."""
    m, dt = system.model, system.dt
    rho, v = X[:, m.nd:m.nq], X[:, m.nq + m.nd:]
    speed = (U[:, m.nu:] - rho[:-1]) / dt
    acc = (speed - v[:-1]) / dt
    tension = np.array([ma.string_tension(X[k, :m.nq], system.step(X[k], U[k])[2], dt) for k in range(U.shape[0])])
    return U[:, m.nu:], speed, acc, tension


def closed_and_open(trajectory: Trajectory, profile) -> list:
    """[closed loop, feed-forward only] LoopResults of ``trajectory`` on the HardwareProfile ``profile`` with the
    default controller (its command delay the profile's)."""
    return [run_loop(trajectory, profile, ControllerOptions(command_delay_steps=profile.command_delay_steps,
                                                            feedback=fb)) for fb in (True, False)]


def check_tracking_safe(closed, opened, limits) -> dict:
    """Asserts of a closed-loop run and its feed-forward-only twin (issue 24): no abort, the plant's string at or
    above its minimum tension and never slack during the motion, its first 0.1 s included; closed loop RMS ≤
    feed-forward only on every joint; the commands sent and the drives' true motion within the drives' range, speed
    and acceleration (``sim.margins.tracking_failures``). limits : the nominal ModelLimits. Returns the closed
    loop's ``LoopResult.record``."""
    c, o = closed.record(limits), opened.record(limits)
    failures = tracking_failures(c, o, float(limits.min_tension[0]))
    assert not failures, failures
    return c
