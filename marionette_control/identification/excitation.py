"""An identification motion the optimizer designs: feasible for the arm, informative for the calibration.

    python -m marionette_control.identification.excitation [--out config/motions/identify.yaml] [--seed 0]
                                                          [--candidates 24] [--refinements 12] [--json FILE]

**Candidates.** Each is a sum of sines of the marionette arm's angles (:class:`SumOfSines`) about a centre in the
workspace the string can hold, reached from and left for the lowered pose the simulator starts from by smooth
ramps, so that the motion starts and ends at rest::

    θ_j(t) = r_j + w_j(t) (c_j − r_j) + v(t) Σ_h a_jh sin(2π h f₀ (t − hold) + φ_jh),   j ∈ {shoulder, elbow}, h = 1 … H

(r the rest pose, c the centre, f₀ = 1/(duration − 2 hold)). The windows are raised cosines: w_j carries the arm
to the centre over ``ramp`` s after ``hold`` s at rest and back before the end, the elbow's leading the
shoulder's by ``lead`` s on the way up and trailing it on the way down (near the lowered pose, a shoulder raised
before the forearm puts the arm where the string holds it barely or not at all, ``docs/models.md``'s poses, and
the forearm swung up while the shoulder still hangs is not a motion the string can make); v fades the sines in
over ``fade`` s once the centre is reached and out before the way back. A candidate is kept only when every pose of its
keyframe motion (sampled every 20 ms) is a static equilibrium the string holds within the reserved drive ranges,
with the tension at least :data:`MIN_TENSION` and a string moment arm of at least :data:`HOLD_MOMENT_ARM`
(:func:`holdable`; ``docs/models.md``: a pose is held when the string's force balances gravity).

**Feasible.** The package's optimizer makes each candidate a trajectory of the nominal model within the drives'
range, speed and acceleration and with the string's tension at least :data:`MIN_TENSION` at every step (the
model file's minimum plus a margin, for the stand-in's one-sided string), keeping :data:`MARGINS` of every drive
limit in reserve for the feedback: an optimization spec (:func:`spec_data`, ``ocp/spec.py``'s format, like
``config/optimize/marionette_arm_wave.yaml``) solved by :func:`~marionette_control.ocp.spec_problem.solve_spec`.

**Informative.** The information the calibration draws from a recording of the optimized trajectory
(:func:`information`): the equation error's exact Jacobian J (:mod:`.equation_error`) at the nominal parameters
along the noise-free trajectory, whitened by the covariance the realistic encoders' noise gives it
(:func:`encoder_noise`; the fit's weighting, :mod:`.fit`), in the units of the calibration's prior (S its
standard deviations, the links' masses weighed, :func:`weighed_priors`):

    F = S Jᵀ C⁻¹ J S,      criterion  log det(I + F)

— the log of the volume by which the data shrinks the prior's uncertainty (Bayesian D-optimality). Directions the
data cannot fix whatever the motion add log 1 = 0, so the criterion rewards only the combinations a motion can
identify: the common scale of the inertial parameters and the damping (no force is measured; :mod:`.fit`) and
the out-of-plane placements stay at their prior for every candidate. The candidate with the largest criterion
wins; perturbations of the best then refine it (:meth:`Designer.search`).

A candidate counts only when its optimum converges, keeps every constraint and follows the motion within
:data:`TRACKING_TOLERANCE`: the shipped motion is one the arm can make as drawn. And since the motion is recorded
before the model is calibrated, a candidate becomes the best only when the nominal model's controller tracks its
optimum closed loop, without aborting, on the realistic stand-in with each plant of :data:`STAND_INS`
(:meth:`Designer.tracked`, the offline closed loop): a motion only the right model could follow would not be
recorded on the arm it is meant to calibrate.

**The motion file.** The winner's keyframes, every :data:`KEY_STEP` s, are ``config/motions/identify.yaml``
(:func:`motion_text`), with a header that says what it excites and its figures against the wave; the optimizer
node optimizes it by its name (``motion_name: identify``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

import numpy as np

from marionette_control import _core
from marionette_control.identification.calibration import default_parameters
from marionette_control.identification.equation_error import EquationError, parameter_values
from marionette_control.identification.fit import Prior, _Whitening, default_prior
from marionette_control.identification.parameters import ModelParameters
from marionette_control.model.library import marionette_arm as arm
from marionette_control.model.library.source import ModelSource
from marionette_control.model.limits import load_limits
from marionette_control.model.motion import KeyframeMotion, make_motion
from marionette_control.ocp.problem import ConstraintOptions
from marionette_control.ocp.spec import SpecError, load_spec, parse_spec
from marionette_control.ocp.spec_problem import solve_spec
from marionette_control.resources import config_file
from marionette_control.sim.offline_loop import run_loop
from marionette_control.sim.profile import HardwareProfile
from marionette_control.tracking.controller import ControllerOptions
from marionette_control.trajectory import Trajectory

JOINTS = ("shoulder", "elbow")
DURATION = 8.0           # s: as long as the wave, so that the main job's runs take the same time
DT = 0.01                # s: the controller's and the simulator's step
KEY_STEP = 0.1           # s between the shipped keyframes (12 per period of the fastest harmonic)
HARMONICS = 6            # h = 1 … 6 of f₀ = 1/7.4 Hz: up to 0.81 Hz, below the arm's swinging mode (0.92 Hz)
#: the workspace of the centres (deg): inside the poses the string holds with a taut string (docs/models.md)
CENTRE_BOX = ((30.0, 80.0), (75.0, 120.0))
#: the largest amplitude of the first harmonic (deg); harmonic h gets at most this / sqrt(h)
AMPLITUDE = (35.0, 35.0)
#: N: the string's tension floor of the optimized motion: the model file's 0.5 N and 0.2 N of margin (the stand-in's
#: string is one-sided, and a slack string is not the model the calibration fits); the lowered pose it starts and
#: ends at rest in holds the arm with 0.81 N, which bounds it. It is the floor itself: the optimizer's default
#: ``tension_reserve`` on top of it (0.8 N) leaves the rest pose 0.01 N, and the optimum then fails its line search
MIN_TENSION = 0.7
#: fractions of the drives' range, speed and acceleration kept in reserve for the feedback
MARGINS = {"range": 0.05, "speed": 0.3, "acceleration": 0.3}
#: m: every pose of the motion is held at rest (with at least MIN_TENSION) with at least this string moment arm
HOLD_MOMENT_ARM = 0.1
#: the plants of the stand-in the motion must be tracked on closed loop by the nominal model's controller (the
#: realistic profile's and the plant family's, docs/simulator.md)
STAND_INS = ("marionette_arm_plant.yaml", "plants/damping_x3.yaml", "plants/forearm_heavy.yaml",
             "plants/hook_out_5mm.yaml")
#: the links' masses a user weighs (their prior standard deviation: a kitchen scale's gram)
WEIGHED = ("upper_arm.mass", "forearm.mass")
SCALE_STD = 0.001
CANDIDATES = 32
REFINEMENTS = 16
#: rad: the RMS error each joint of a candidate's optimum may keep against its motion, so that the motion is one the
#: arm follows as drawn (half the closed loop's RMS target of 0.5°, docs/tracking.md)
TRACKING_TOLERANCE = math.radians(0.25)


# ============================================================================ candidates


def _window(t: np.ndarray, duration: float, start: float, ramp: float) -> np.ndarray:
    """(n,): 0 before ``start``, a raised cosine up to 1 over ``ramp`` s, 1, and down likewise to 0 at
    ``duration − start``."""
    up = np.clip(np.minimum(t - start, duration - start - t) / ramp, 0.0, 1.0)
    return 0.5 - 0.5 * np.cos(np.pi * up)


@dataclass(frozen=True)
class SumOfSines:
    """A candidate (module docstring): angles in rad, ``amplitudes`` and ``phases`` (2, H) per joint and
    harmonic, ``centre`` and ``rest`` (2,)."""

    centre: tuple
    amplitudes: tuple
    phases: tuple
    rest: tuple = arm.LOWERED
    duration: float = DURATION
    hold: float = 0.3
    ramp: float = 1.0
    lead: float = 0.3
    fade: float = 0.6

    @property
    def base_frequency(self) -> float:
        return 1.0 / (self.duration - 2.0 * self.hold)

    def angles(self, t) -> np.ndarray:
        """θ(t) (n, 2) [rad] at times t (n,)."""
        t = np.asarray(t, dtype=float)
        a, phi = np.asarray(self.amplitudes), np.asarray(self.phases)
        h = np.arange(1, a.shape[1] + 1)
        arg = 2.0 * np.pi * self.base_frequency * np.outer(t - self.hold, h)          # (n, H)
        sines = np.stack([np.sin(arg + phi[j]) @ a[j] for j in range(2)], axis=1)     # (n, 2)
        w = np.stack([_window(t, self.duration, self.hold + self.lead, self.ramp),
                      _window(t, self.duration, self.hold, self.ramp)], axis=1)       # shoulder, elbow
        v = _window(t, self.duration, self.hold + self.lead + self.ramp, self.fade)[:, None]
        rest = np.asarray(self.rest)
        return rest + w * (np.asarray(self.centre) - rest) + v * sines

    def keyframes(self, step: float = KEY_STEP) -> tuple[np.ndarray, np.ndarray]:
        """(t (K,), θ (K, 2)): the candidate's keyframes every ``step`` s."""
        t = step * np.arange(round(self.duration / step) + 1)
        return t, self.angles(t)

    @classmethod
    def random(cls, rng: np.random.Generator, harmonics: int = HARMONICS) -> "SumOfSines":
        """A candidate drawn uniformly: centre in :data:`CENTRE_BOX`, amplitudes up to :data:`AMPLITUDE`/√h, phases."""
        centre = tuple(math.radians(rng.uniform(*box)) for box in CENTRE_BOX)
        scale = np.radians(AMPLITUDE)[:, None] / np.sqrt(np.arange(1, harmonics + 1))[None, :]
        amplitudes = rng.uniform(0.0, 1.0, (2, harmonics)) * scale
        phases = rng.uniform(0.0, 2.0 * np.pi, (2, harmonics))
        return cls(centre, _nested(amplitudes), _nested(phases))

    def perturbed(self, rng: np.random.Generator, size: float) -> "SumOfSines":
        """A neighbour: centre moved by up to ``size`` of its box, amplitudes scaled by up to 1 ± size (within
        their bounds), phases turned by up to ±π·size."""
        box = np.radians(CENTRE_BOX)
        centre = np.clip(np.asarray(self.centre) + size * rng.uniform(-1, 1, 2) * (box[:, 1] - box[:, 0]),
                         box[:, 0], box[:, 1])
        a = np.asarray(self.amplitudes)
        bound = np.radians(AMPLITUDE)[:, None] / np.sqrt(np.arange(1, a.shape[1] + 1))[None, :]
        amplitudes = np.clip(a * (1.0 + size * rng.uniform(-1, 1, a.shape)), 0.0, bound)
        phases = np.asarray(self.phases) + np.pi * size * rng.uniform(-1, 1, a.shape)
        return SumOfSines(tuple(centre), _nested(amplitudes), _nested(phases), self.rest, self.duration, self.hold,
                          self.ramp, self.lead, self.fade)

    def to_dict(self) -> dict:
        """Degrees and seconds, for the motion file's header and the search record."""
        return {"centre_deg": [round(math.degrees(c), 3) for c in self.centre],
                "amplitudes_deg": [[round(math.degrees(v), 3) for v in row] for row in self.amplitudes],
                "phases_rad": [[round(v, 4) for v in row] for row in self.phases],
                "base_frequency_hz": self.base_frequency, "hold_s": self.hold, "ramp_s": self.ramp,
                "lead_s": self.lead, "fade_s": self.fade}


def _nested(a: np.ndarray) -> tuple:
    return tuple(tuple(float(v) for v in row) for row in a)


def reserved_limits(model, min_tension: float = MIN_TENSION, margins: Optional[Mapping] = None):
    """The arm's limits less the reserve: its model file's drive limits shrunk by ``margins`` and the tension
    floor ``min_tension`` (:class:`~marionette_control.ocp.problem.ConstraintOptions`, the optimizer's rule)."""
    options = ConstraintOptions(min_tension=min_tension, margins=dict(MARGINS if margins is None else margins),
                                tension_reserve=0.0)
    return options.limits(model, load_limits(ModelSource.registered("marionette_arm")))


@dataclass
class Holding:
    """Whether every pose of a motion is held at rest by the string (:func:`holdable`): ``ok``; the worst
    ``tension`` [N], ``moment_arm`` [m] and drive ``range_margin`` [m] (negative: outside) over the poses; the
    first pose that fails (deg) and why."""

    ok: bool
    tension: float
    moment_arm: float
    range_margin: float
    failure: str = ""


def holdable(model, motion: KeyframeMotion, limits, dt: float = 0.02) -> Holding:
    """Checks every pose of ``motion`` sampled every ``dt`` s: a static equilibrium of the arm
    (``marionette_arm.static_equilibrium``) with the carriage and the string inside ``limits``' ranges, the tension
    at least :data:`MIN_TENSION` and the string's moment arm |Dh_dyn|/(2L) at least :data:`HOLD_MOMENT_ARM`."""
    _, angles = motion.sample(dt)
    tension, moment, margin, failure = math.inf, math.inf, math.inf, ""
    for shoulder, elbow in angles:
        pose = f"({math.degrees(shoulder):.1f}°, {math.degrees(elbow):.1f}°)"
        try:
            eq = arm.static_equilibrium(model, shoulder, elbow)
        except ValueError as e:
            return Holding(False, -math.inf, 0.0, -math.inf, f"{pose}: {e}")
        rho = eq.q[model.nd:]
        m = float(np.min(np.minimum(rho - limits.lower, limits.upper - rho)))
        r = float(np.linalg.norm(model.constraints(eq.q)[1][0, :model.nd]) / (2.0 * eq.q[3]))
        if not failure and (m < 0 or eq.tension < MIN_TENSION or r < HOLD_MOMENT_ARM):
            failure = f"{pose}: drive range margin {m:.3f} m, tension {eq.tension:.2f} N, moment arm {r:.3f} m"
        tension, moment, margin = min(tension, eq.tension), min(moment, r), min(margin, m)
    return Holding(not failure, tension, moment, margin, failure)


# ============================================================================ feasible: the optimizer


def spec_data(times: np.ndarray, angles: np.ndarray, max_iterations: int = 100, deadline: float = 300.0) -> dict:
    """The optimization spec of a keyframe motion of the arm's angles (``ocp/spec.py``'s format): the wave's spec
    (thesis §6.7.2 weights, a static equilibrium at the start, a constant-input initial trajectory) with the
    identification motion's reserve (:data:`MIN_TENSION`, :data:`MARGINS`)."""
    return {"description": "identification motion candidate (marionette_control.identification.excitation)",
            "model": "marionette_arm", "dt": DT,
            "motion": {"keyframes": [[float(t), *map(float, row)] for t, row in zip(times, angles)],
                       "joints": list(JOINTS), "momenta": "zero"},
            "initial_state": {"consistent": ["carriage", "string_length"], "equilibrium": True},
            "initial_trajectory": {"method": "simulate"},
            "weights": {"state": {"default": 0.01, "shoulder": 100, "elbow": 100}, "input": {"default": 0.01}},
            "optimizer": {"schedule": [["quasi_newton", 4], ["newton", None]], "tolerance": 1e-6,
                          "max_iterations": int(max_iterations), "deadline": float(deadline)},
            "constraints": {"min_tension": MIN_TENSION, "tension_reserve": 0.0, "margins": dict(MARGINS)},
            "tracking_gains": {"delay_steps": 1}}


def optimize(times: np.ndarray, angles: np.ndarray, max_iterations: int = 100) -> Trajectory:
    """The optimized trajectory of a keyframe motion (:func:`spec_data`), gains included."""
    return solve_spec(parse_spec(spec_data(times, angles, max_iterations), "<identification motion>")).trajectory


# ============================================================================ informative: the information


def encoder_noise(profile: HardwareProfile) -> np.ndarray:
    """σ (nq,): the standard deviation of an encoder reading's error, read-out noise and quantization (a count δ
    adds δ²/12), of the profile's encoders."""
    return np.sqrt(np.asarray(profile.noise_std) ** 2 + np.asarray(profile.encoder_resolution) ** 2 / 12.0)


def weighed_priors(params: ModelParameters, names: Sequence[str], weighed: Mapping[str, float] | None = None,
                  scale_std: float = SCALE_STD) -> dict:
    """{name: Prior}: the calibration's default priors, the ``weighed`` masses {name: reading} (default: the model
    file's values of :data:`WEIGHED`) known to ``scale_std``."""
    weighed = dict(weighed) if weighed is not None else {n: params.nominal(params.parameter(n)) for n in WEIGHED}
    priors = {n: default_prior(params, params.parameter(n)) for n in names}
    priors.update({n: Prior(v, scale_std, known=True) for n, v in weighed.items()})
    return priors


@dataclass
class Information:
    """What a recording of a trajectory tells the calibration (module docstring), all (p,) in ``names`` order:

    log_det : log det(I + F), the criterion; std : the posterior standard deviations [SI] (what the fit reports);
    prior_std [SI]; data_std : the standard deviations with the data's unidentifiable directions held at their
    prior mean (the precision of what the data does fix); singular : the whitened Jacobian's singular values in
    prior units (data's information per direction, best first); free : (p, r) an orthonormal basis, in prior units,
    of the r directions the data leaves free (singular value below 1e-9 of the largest)."""

    names: list
    log_det: float
    std: np.ndarray
    prior_std: np.ndarray
    data_std: np.ndarray
    singular: np.ndarray
    free: np.ndarray

    @property
    def null(self) -> int:
        return self.free.shape[1]

    def identifiable(self, shrink: float = 3.0) -> np.ndarray:
        """(p,) bool: the data shrinks the prior's standard deviation at least ``shrink``-fold (:mod:`.fit`'s rule)."""
        return self.std * shrink <= self.prior_std

    def to_dict(self) -> dict:
        return {"log_det": self.log_det, "null_directions": self.null,
                "singular_values_prior_units": [float(v) for v in self.singular],
                "parameters": {n: {"std": float(s), "prior_std": float(p), "data_std": float(d),
                                   "identifiable": bool(i)}
                               for n, s, p, d, i in zip(self.names, self.std, self.prior_std, self.data_std,
                                                        self.identifiable())}}


def information(params: ModelParameters, Q: np.ndarray, dt: float, names: Sequence[str], priors: Mapping[str, Prior],
                sigma: np.ndarray) -> Information:
    """The information of a recording of the configurations Q (N+1, nq) sampled every dt with encoder noise σ
    (nq,) about the parameters ``names`` under ``priors`` (module docstring), at the model file's values."""
    parameters = params.parameters(names)
    ee = EquationError(params, Q, dt, parameters)
    point = ee.evaluate(parameter_values(params, parameters))
    s = np.array([priors[n].std for n in names])
    J = _Whitening(point, np.maximum(sigma, 1e-12)).apply(point.jacobian.reshape(-1, len(names))) * s
    F = J.T @ J
    posterior = np.linalg.inv(F + np.eye(len(names)))           # prior units
    _, singular, Vt = np.linalg.svd(J, full_matrices=False)
    free = singular <= 1e-9 * singular[0]
    N = Vt[free].T                                               # (p, r): the directions the data leaves free
    conditional = posterior
    if N.size:      # the posterior given those directions at their prior mean
        PN = posterior @ N
        conditional = posterior - PN @ np.linalg.solve(N.T @ PN, PN.T)
    return Information(list(names), float(np.linalg.slogdet(F + np.eye(len(names)))[1]),
                       np.sqrt(np.diag(posterior)) * s, s, np.sqrt(np.maximum(np.diag(conditional), 0.0)) * s,
                       singular, N)


# ============================================================================ the design


@dataclass
class Candidate:
    """One evaluated candidate: its design, keyframes (t (K,), θ (K, 2)), the optimized trajectory, its
    information (None when it failed before), why it failed, and ``tracked`` (:meth:`Designer.tracked`, for the
    candidates that became the best)."""

    design: SumOfSines
    times: np.ndarray
    angles: np.ndarray
    trajectory: Optional[Trajectory] = None
    information: Optional[Information] = None
    failure: str = ""
    seconds: float = 0.0

    tracked: dict = field(default_factory=dict)

    @property
    def score(self) -> float:
        return self.information.log_det if self.information is not None and not self.failure else -math.inf

    def to_dict(self) -> dict:
        out = {"design": self.design.to_dict(),
               "log_det": None if self.information is None else self.information.log_det,
               "failure": self.failure, "seconds": round(self.seconds, 2), "tracked": self.tracked}
        if self.trajectory is not None:
            s = self.trajectory.info["summary"]
            out.update(converged=s["converged"], iterations=s["iterations"],
                       constraints_satisfied=s["constraints_satisfied"],
                       rms_deg={j: math.degrees(v["rms"]) for j, v in s["tracking_errors"].items()})
        return out


@dataclass
class Designer:
    """Evaluates candidates on one model file and noise model (module docstring).

    params : the nominal model's :class:`ModelParameters`; names : the parameters to identify (default: the
    calibration's, :func:`~.calibration.default_parameters`); priors (default :func:`weighed_priors`); sigma : the
    encoders' noise (default: the realistic profile's, :func:`encoder_noise`)."""

    params: ModelParameters
    names: list = None
    priors: dict = None
    sigma: np.ndarray = None
    log: Callable[[str], None] = field(default=lambda msg: None)

    def __post_init__(self):
        self.names = list(self.names or default_parameters(self.params))
        self.priors = self.priors or weighed_priors(self.params, self.names)
        self.sigma = self.sigma if self.sigma is not None else encoder_noise(HardwareProfile.named("realistic"))
        self.model = self.params.description.model
        self.limits = reserved_limits(self.model)

    def information(self, trajectory: Trajectory) -> Information:
        """:func:`information` of a trajectory of the nominal model (its configurations, noise-free)."""
        return information(self.params, trajectory.X[:, :self.model.nq], trajectory.dt, self.names, self.priors,
                           self.sigma)

    def motion(self, times: np.ndarray, angles: np.ndarray, name: str = "identify") -> KeyframeMotion:
        return make_motion(name, JOINTS, times, angles)

    def evaluate(self, design: SumOfSines) -> Candidate:
        """Holds, optimizes and scores one candidate: it fails when a pose of its keyframe motion is not held at
        rest, or when its optimum does not converge, violates a constraint or does not follow the motion within
        :data:`TRACKING_TOLERANCE` (RMS, each joint)."""
        t0 = time.perf_counter()
        times, angles = design.keyframes()
        c = Candidate(design, times, angles)
        held = holdable(self.model, self.motion(times, angles), self.limits)
        if not held.ok:
            c.failure = f"not held at rest: {held.failure}"
        else:
            try:
                c.trajectory = optimize(times, angles)
            except (_core.StepError, SpecError) as e:      # the integrator fails on an iterate of a wild candidate
                c.failure = f"the optimizer failed: {e}"
                c.seconds = time.perf_counter() - t0
                return c
            summary = c.trajectory.info["summary"]
            worst = max(summary["tracking_errors"].items(), key=lambda item: item[1]["rms"])
            if not summary["converged"]:
                c.failure = f"the optimizer did not converge ({c.trajectory.info['reason']})"
            elif not summary["constraints_satisfied"]:
                c.failure = f"the optimum violates a constraint by {summary['max_violation']:.3g}"
            elif worst[1]["rms"] > TRACKING_TOLERANCE:
                c.failure = f"the optimum is {math.degrees(worst[1]['rms']):.2f}° RMS off the motion ({worst[0]})"
            else:
                c.information = self.information(c.trajectory)
        c.seconds = time.perf_counter() - t0
        return c

    def tracked(self, trajectory: Trajectory) -> dict:
        """{plant: {aborted, reason, rms_deg, max_deg, slack_s}}: the trajectory tracked closed loop offline by the
        nominal model's controller on the realistic stand-in with each plant of :data:`STAND_INS`
        (:func:`~marionette_control.sim.offline_loop.run_loop`): the motion is recorded before the model is
        calibrated, so it must be one the controller of a wrong model tracks."""
        out = {}
        for plant in STAND_INS:
            profile = HardwareProfile.named("realistic", plant_model_file=plant)
            r = run_loop(trajectory, profile, ControllerOptions(command_delay_steps=profile.command_delay_steps),
                         desc=self.params.description)
            errors = r.summary()
            out[plant] = {"aborted": bool(r.aborted), "reason": r.abort_reason,
                          "rms_deg": {j: round(v["rms_deg"], 3) for j, v in errors.items()},
                          "max_deg": round(max(v["max_deg"] for v in errors.values()), 3),
                          "slack_s": float(np.sum(np.any(r.slack[r.k <= r.N], axis=1)) * r.dt)}
            if r.aborted:
                break
        return out

    def _better(self, c: Candidate, best: Optional[Candidate]) -> Candidate:
        """``c`` if it scores above ``best`` and its closed loop runs on every stand-in (:meth:`tracked`; checked
        only then, where it decides), else ``best``."""
        if best is not None and c.score <= best.score:
            return best
        if c.information is not None and not c.failure:
            c.tracked = self.tracked(c.trajectory)
            aborted = [(p, t["reason"]) for p, t in c.tracked.items() if t["aborted"]]
            if aborted:
                c.failure = f"the closed loop aborts on {aborted[0][0]}: {aborted[0][1]}"
                return best if best is not None else c
        return c

    def search(self, seed: int = 0, candidates: int = CANDIDATES, refinements: int = REFINEMENTS,
               max_draws: int = 50) -> tuple[Candidate, list]:
        """The best of ``candidates`` random candidates held at rest (at most ``max_draws`` draws each), then
        ``refinements`` perturbations of the best so far (shrinking); (best, every candidate evaluated)."""
        rng = np.random.default_rng(seed)
        tried: list = []
        best = None
        for i in range(candidates):
            for _ in range(max_draws):
                design = SumOfSines.random(rng)
                if holdable(self.model, self.motion(*design.keyframes()), self.limits).ok:
                    break
            else:
                raise RuntimeError(f"no candidate the string holds in {max_draws} draws: widen CENTRE_BOX or lower "
                                   "AMPLITUDE")
            c = self.evaluate(design)
            tried.append(c)
            best = self._better(c, best)
            self.log(f"candidate {i + 1}/{candidates}: log det {c.score:.2f}{' (' + c.failure + ')' if c.failure else ''}"
                     f"; best {best.score:.2f} ({c.seconds:.1f} s)")
        for i in range(refinements):
            size = 0.3 * (1.0 - i / max(refinements, 1)) + 0.05
            c = self.evaluate(best.design.perturbed(rng, size))
            tried.append(c)
            best = self._better(c, best)
            self.log(f"refinement {i + 1}/{refinements} (size {size:.2f}): log det {c.score:.2f}"
                     f"{' (' + c.failure + ')' if c.failure else ''}; best {best.score:.2f}")
        if best.information is None:
            raise RuntimeError("no candidate was held at rest, feasible and followed: "
                               + "; ".join(c.failure for c in tried[:3]))
        return best, tried


def wave_trajectory() -> Trajectory:
    """The wave as ``config/optimize/marionette_arm_wave.yaml`` optimizes it (the comparison)."""
    return solve_spec(load_spec(config_file("optimize", "marionette_arm_wave.yaml"))).trajectory


# ============================================================================ the motion file


def _figures(final: Candidate, wave: Information) -> list[str]:
    """The header's table: per parameter the prior's standard deviation and, for the wave and this motion, the
    posterior's (what the fit reports) and the data's alone along what it fixes (:class:`Information`)."""
    info = final.information
    lines = [f"#   {'parameter':27s} {'prior':>8s} | {'wave':>8s} {'data':>8s} | {'identify':>8s} {'data':>8s}",
             "#   " + "-" * 77]
    for i, n in enumerate(info.names):
        mark = "" if info.identifiable()[i] else "  (not identifiable)"
        lines.append(f"#   {n:27s} {info.prior_std[i]:8.2g} | {wave.std[i]:8.2g} {wave.data_std[i]:8.2g} | "
                     f"{info.std[i]:8.2g} {info.data_std[i]:8.2g}{mark}")
    return lines


def motion_text(final: Candidate, wave: Information, seed: int, candidates: int,
                refinements: int) -> str:
    """The YAML text of the identification motion (module docstring)."""
    info, tr = final.information, final.trajectory
    s = tr.info["summary"]
    d = final.design.to_dict()
    lines = [
        "# Identification motion of the marionette arm (issue 25): what the calibration (marionette-calibrate,",
        "# docs/calibration.md) learns most from. What it shows: the arm raised from the lowered pose into the",
        "# workspace the string holds, then both joints swinging as a sum of sines (harmonics of",
        f"# {d['base_frequency_hz']:.4f} Hz up to {HARMONICS * d['base_frequency_hz']:.2f} Hz, below the arm's swinging "
        "mode), and lowered back to rest, in 8 s.",
        "# What it excites: the shoulder's and the elbow's accelerations (the links' inertias about the joints),",
        "# their speeds (damping), angles over the workspace (the links' first moments against gravity) and the",
        "# string's direction over a wide range (the hook and the rail), more than the wave does. Motion data cannot",
        "# fix a common factor of the inertial parameters and the damping (no force is measured): weighing the links",
        "# fixes the masses, not that factor (docs/calibration.md).",
        "# Designed by the optimizer (marionette_control/identification/excitation.py; regenerate with",
        f"#   python -m marionette_control.identification.excitation --out config/motions/identify.yaml --seed {seed}",
        f"#   --candidates {candidates} --refinements {refinements}):",
        "# the sum of sines with the largest log det(I + F) (F: the calibration's information in prior units,",
        "# the links' masses weighed to 1 g, the realistic encoders' noise) among random candidates held at rest",
        "# everywhere, each made feasible by the optimizer and followed by its optimum within "
        f"{math.degrees(TRACKING_TOLERANCE):g} deg RMS. Optimized",
        f"# (dt {DT:g} s): {s['iterations']} iterations, converged {s['converged']}; string tension >= {MIN_TENSION:g} N, "
        f"drive reserve {MARGINS}; RMS off the motion "
        + ", ".join(f"{j} {math.degrees(v['rms']):.3f} deg" for j, v in s["tracking_errors"].items()) + ".",
        f"# log det(I + F): identify {info.log_det:.1f}, wave {wave.log_det:.1f}; the data's information per "
        "direction (singular values, prior units): identify "
        + ", ".join(f"{v:.3g}" for v in info.singular[:len(info.singular) - info.null]) + "; wave "
        + ", ".join(f"{v:.3g}" for v in wave.singular[:len(wave.singular) - wave.null]) + ".",
        "# Predicted standard deviations, SI units (one 8 s recording of the noise-free optimum, the equation error's",
        f"# Jacobian): the posterior's (what the fit reports; along the {info.null} directions no motion fixes, the common",
        "# scale first, it is the prior's) and the data's (those directions held at the prior mean):",
        *_figures(final, wave),
        "# Tracked closed loop offline by the nominal model's controller on the realistic stand-in with each plant "
        "(RMS, max deg):",
        *(f"#   {plant:28s} " + ", ".join(f"{j} {v:.2f}" for j, v in t["rms_deg"].items())
          + f"; max {t['max_deg']:.2f}; string slack {t['slack_s']:.2f} s" for plant, t in final.tracked.items()),
        f"# Design: centre {d['centre_deg']} deg, amplitudes {d['amplitudes_deg']} deg, phases {d['phases_rad']} rad.",
        "format: keyframe-motion/1",
        "name: identify",
        "description: identification motion (sum of sines designed for the calibration, 8 s)",
        f"joints: [{', '.join(JOINTS)}]",
        "angle_unit: deg",
        "time_unit: s",
        "spline: clamped",
        "keyframes:",
    ]
    lines += [f"  - [{t:.2f}, {math.degrees(a):.4f}, {math.degrees(b):.4f}]" for t, (a, b) in
              zip(final.times, final.angles)]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("config/motions/identify.yaml"), help="motion file to write")
    p.add_argument("--seed", type=int, default=0, help="seed of the random candidates")
    p.add_argument("--candidates", type=int, default=CANDIDATES, help="random candidates")
    p.add_argument("--refinements", type=int, default=REFINEMENTS, help="perturbations of the best")
    p.add_argument("--json", type=Path, help="write the search's record (every candidate, the figures) as JSON")
    args = p.parse_args(argv)
    if args.candidates < 1 or args.refinements < 0:
        p.error("--candidates must be >= 1 and --refinements >= 0")

    def say(msg):
        print(f"[excitation] {msg}", flush=True)

    designer = Designer(ModelParameters(config_file("marionette_arm.yaml")), log=say)
    say(f"parameters: {', '.join(designer.names)}")
    wave = designer.information(wave_trajectory())
    say(f"the wave: log det {wave.log_det:.2f}")
    final, tried = designer.search(args.seed, args.candidates, args.refinements)
    say(f"identify: log det {final.information.log_det:.2f} (wave {wave.log_det:.2f})")
    args.out.write_text(motion_text(final, wave, args.seed, args.candidates, args.refinements))
    say(f"wrote {args.out}")
    if args.json:
        args.json.write_text(json.dumps({"wave": wave.to_dict(), "identify": final.information.to_dict(),
                                         "design": final.design.to_dict(),
                                         "candidates": [c.to_dict() for c in tried]}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
