r"""What limits the feedback on a plant far from the model (docs/tracking.md, "Plant family": damping ×3).

On the stand-in with three times the model's joint damping the LQ law's shoulder is worse than feed-forward only.
This module separates the candidate causes by giving one part of the loop the plant's own model at a time; the
motion is the wave's optimum on the nominal model (``config/optimize/marionette_arm_wave.yaml``), the stand-in
the realistic profile with a plant file, every run seeded (:func:`~marionette_control.sim.offline_loop.run_loop`):

* ``feed_forward``: u = u_d(k + d), no feedback;
* ``lqr``: the default controller (its estimate, prediction and gains on the nominal model);
* ``lqr_on_plant``: the same controller built on the plant's model file — the Kalman filter, the predictor and
  the gains (:func:`~marionette_control.lq.gains.design_gains` along the same X, U) all know the true damping —
  tracking the same nominal optimum;
* ``planner``: the nominal controller with the receding-horizon planner on the nominal model (docs/mpc.md);
* ``planner_on_plant``: the nominal controller with the receding-horizon planner (:mod:`~marionette_control.ocp.mpc`,
  ``MPCOptions(horizon=1.0)``, an update every 0.1 s run to convergence) whose plans are optimized, warm-started
  and given gains on the plant's model (:class:`PlannerOn`);
* ``planner_fitted``: the planner's model fitted at every update from the last ``window`` seconds of the joint
  states the controller received (:class:`OnlineFit`: the equation error of :mod:`~marionette_control.identification.fit`,
  thesis §5.1.3). It fits the joints' damping and the hook's placement in the arm's plane (masses, centres of
  mass and inertias stay the file's, which the links' scale gives) and the plans adopt the damping only.

The plans keep the controller's model identity: the controller tracks them with its own estimate, whose
configurations lie on the nominal model's string and whose momenta (thesis (4.13): p_k = D₂L_d(q_{k−1}, q_k) +
f⁺) are the nominal model's. A changed damping moves the momenta by f⁺ = ½Δt F only (the symmetric forcing) and
leaves the string where it is; a changed hook moves the string, so that no plan can start from the estimate (every
update fails to step), and a changed mass moves the momenta by its share of M(q) q̇. Hence the two cases that
give a plant's file to the controller or the planner (``lqr_on_plant``, ``planner_on_plant``) are meaningful for
a plant that differs in its forces only (damping ×3): with another geometry the nominal motion's states are off
the plant model's string (the controller aborts, the planner never plans).

Shapes: q (nq,) in model order; errors in degrees (RMS over the motion's ticks).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import deque
from typing import Optional, Sequence

import numpy as np

from marionette_control import _core
from marionette_control.identification.fit import CalibrationError, fit_equation_error
from marionette_control.identification.parameters import ModelParameters
from marionette_control.lq.gains import GainDesign, design_gains
from marionette_control.model.library import marionette_arm as arm
from marionette_control.model.limits import from_description
from marionette_control.ocp.mpc import RecedingHorizon
from marionette_control.ocp.mpc_options import MPCOptions
from marionette_control.resources import config_file
from marionette_control.sim.offline_loop import LoopResult, run_loop
from marionette_control.sim.profile import HardwareProfile
from marionette_control.tracking.controller_options import ControllerOptions
from marionette_control.trajectory import Trajectory

#: the parameters :class:`OnlineFit` estimates, and those of them its plans adopt (module docstring)
FITTED = ("shoulder.damping", "elbow.damping", "hook.translation.y", "hook.translation.z")
ADOPTED = ("shoulder.damping", "elbow.damping")
CASES = ("feed_forward", "lqr", "lqr_on_plant", "planner", "planner_on_plant", "planner_fitted")


def system_of(model, like: _core.DiscreteSystem) -> _core.DiscreteSystem:
    """A DiscreteSystem of ``model`` with ``like``'s Δt and Newton settings."""
    return _core.DiscreteSystem(model, like.dt, tolerance=like.tolerance, max_iterations=like.max_iterations)


class PlannerOn(RecedingHorizon):
    """The receding horizon whose plans' dynamics are ``model``'s (same configurations, constraints and Δt as
    the problem's; module docstring): the optimizer, the warm start, the start's prediction and the plans' gains
    use :attr:`system`, which :meth:`use` replaces. The window's terminal cost-to-go stays the nominal
    motion's."""

    def __init__(self, problem, motion: Trajectory, options: MPCOptions, model=None):
        super().__init__(problem, motion, options)
        if model is not None:
            self.use(model)

    def use(self, model) -> None:
        self.system = system_of(model, self.system)


class OnlineFit(PlannerOn):
    """A :class:`PlannerOn` whose model is fitted before every update from the last ``window`` s of the joint
    states given to :meth:`observe` (module docstring). ``fits``: (tick, {name: estimate}, seconds the fit
    took) per fit."""

    def __init__(self, problem, motion: Trajectory, options: MPCOptions, params: ModelParameters,
                 window: float = 1.5, names: Sequence[str] = FITTED, adopted: Sequence[str] = ADOPTED):
        super().__init__(problem, motion, options)
        self.params = params
        self.parameters = params.parameters(names)
        self.adopted = [p for p in self.parameters if p.name in adopted]
        steps = int(round(window / problem.dt)) if math.isfinite(window) else 0
        if steps < 3:
            raise ValueError(f"window {window!r} s holds {steps} joint states of {problem.dt:g} s: the fit needs three "
                             "consecutive ones at least")
        self.samples: deque = deque(maxlen=steps)
        self.fits: list = []

    def observe(self, q: np.ndarray) -> None:
        """One joint state q (nq,) in model order (the offline loop gives its planner each: RecedingHorizon.observe)."""
        self.samples.append(np.array(q, dtype=float))

    def fit(self) -> Optional[dict]:
        """{Parameter: estimate} fitted to the window of joint states (None while it is not full or when the
        fit refuses the data)."""
        if len(self.samples) < self.samples.maxlen:
            return None
        try:
            cal = fit_equation_error(self.params, np.array(self.samples), self.dt, [p.name for p in self.parameters])
        except CalibrationError:
            return None
        return dict(zip(self.parameters, (float(v) for v in cal.theta)))

    def update(self, k: int, x_hat: np.ndarray, *args, **kwargs):
        t0 = time.perf_counter()
        values = self.fit()
        if values is not None:
            self.use(self.params.model({p: values[p] for p in self.adopted}))
            self.fits.append((k, {p.name: v for p, v in values.items()}, time.perf_counter() - t0))
        return super().update(k, x_hat, *args, **kwargs)


def restamped(trajectory: Trajectory, desc, design: Optional[GainDesign] = None) -> Trajectory:
    """``trajectory`` (X, U unchanged) for the controller of another model file ``desc`` of the same arm, with
    gains designed along it on that model (``design``: the trajectory's own record)."""
    out = dataclasses.replace(trajectory, model_name=desc.model.name, model_hash=desc.model.hash)
    design = design or GainDesign.of(trajectory)
    return design_gains(_core.DiscreteSystem(desc.model, trajectory.dt), trajectory.X, trajectory.U,
                        design).attach(out)


def rms_deg(result: LoopResult, N: int) -> list[float]:
    """RMS [°] of each dynamic configuration's true error over the motion's N + 1 ticks."""
    e = np.degrees(result.angle_errors())
    e = e[~np.isnan(e).any(axis=1)][:N + 1]
    return [float(v) for v in np.sqrt(np.mean(e ** 2, axis=0))]


def run_case(case: str, problem, motion: Trajectory, plant_file: str, seed: int = 0, window: float = 1.5) -> dict:
    """One case of :data:`CASES` on the realistic profile with ``plant_file`` (under config/) and noise seed
    ``seed``: {"rms_deg": [shoulder, elbow], "aborted", "tension_min_n", "fits"} (fits: the last estimates and
    the median fit time, ``planner_fitted`` only)."""
    if case not in CASES:
        raise ValueError(f"unknown case {case!r} ({', '.join(CASES)})")
    profile = HardwareProfile.named("realistic", plant_model_file=plant_file, seed=seed)
    nominal = arm.load_description()
    options = ControllerOptions(command_delay_steps=profile.command_delay_steps, feedback=case != "feed_forward")
    mpc_options = MPCOptions(horizon=1.0, deadline=None)
    fits = None
    if case == "lqr_on_plant":
        plant = arm.load_description(config_file(plant_file))
        result = run_loop(restamped(motion, plant), profile, options, desc=plant)
    elif case in ("planner", "planner_on_plant"):
        model = arm.load_description(config_file(plant_file)).model if case == "planner_on_plant" else None
        result = run_loop(motion, profile, options, mpc=PlannerOn(problem, motion, mpc_options, model))
    elif case == "planner_fitted":
        planner = OnlineFit(problem, motion, mpc_options, ModelParameters(config_file("marionette_arm.yaml")),
                            window)
        result = run_loop(motion, profile, options, mpc=planner)   # the loop gives the planner every joint state
        fits = {"last": planner.fits[-1][1] if planner.fits else None, "count": len(planner.fits),
                "median_s": float(np.median([f[2] for f in planner.fits])) if planner.fits else None}
    else:
        result = run_loop(motion, profile, options)
    record = result.record(from_description(nominal))
    return {"rms_deg": rms_deg(result, motion.N), "aborted": bool(result.aborted),
            "tension_min_n": record["tension_min_n"]["motion"], "fits": fits}
