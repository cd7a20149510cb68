"""Calibrating a model file from a recording: the default parameters of a model, the two fits in order, the report.

:func:`calibrate` checks the recording (:mod:`.recording`), fits the equation error (:func:`~.fit.fit_equation_error`,
the DEL step's Newton correction at the measurements) and refines it on the output error of short windows
(:func:`~.fit.refine_output_error`, which removes the equation error's errors-in-variables bias), and returns the
:class:`~.fit.Calibration` with a JSON-ready report (:func:`report`; from :func:`calibrate` also ``estimator_noise``,
the model error per step the fit leaves as the tracking controller's Kalman filter takes it, :mod:`.model_error`). :func:`default_parameters` is what a model's
motion can excite: every body's mass, its centre of mass along its link, its inertia about the joint that turns it,
the damping of every dynamic configuration and the placement of the constant frames the strings hang from.
"""

from __future__ import annotations

import time
from typing import Mapping, Optional, Sequence

import numpy as np

from marionette_control.identification.fit import Calibration, Prior, fit_equation_error, refine_output_error
from marionette_control.identification.model_error import momentum_noise
from marionette_control.identification.parameters import AXES, INERTIA_AXES, ModelParameters
from marionette_control.identification.recording import Recording

#: steps per output-error window (0.3 s at the arm's 10 ms): long enough for the dynamics to show, short enough
#: that a window's simulation stays near the measurements from its fitted start
DEFAULT_WINDOW = 30


def default_parameters(params: ModelParameters) -> list[str]:
    """The parameter names :func:`calibrate` fits unless told otherwise (module docstring)."""
    model = params.description.model
    names = model.frame_names
    parents = model.frame_parents
    transforms = model.frame_transforms
    out = []
    for frame in model.masses:
        link_index = parents[names.index(frame)]
        # a body moved by no dynamic configuration (the carriage on its drive) has no dynamics to identify
        moved, i = False, names.index(frame)
        while i >= 0:
            c = model.frame_configs[i]
            moved |= c >= 0 and c < model.nd
            i = parents[i]
        if not moved:
            continue
        body = frame.removesuffix("_inertial")
        out.append(f"{body}.mass")
        if frame.endswith("_inertial"):
            lo, hi = params.body_extent(frame)
            out.append(f"{body}.center_of_mass.{AXES[int(np.argmax(hi - lo))]}")
        axis = next((transforms[j] for j in _ancestors(parents, link_index) if transforms[j][0] == "r"), None)
        if axis is not None:
            out.append(f"{body}.inertia.{INERTIA_AXES['xyz'.index(axis[1])]}")
    out += [f"{c}.damping" for c in params.dynamic]
    for _, kind, f1, f2, _ in model.constraint_frames:
        for f in (f1, f2):
            const = next((names[j] for j in _ancestors(parents, names.index(f)) if transforms[j] == "const"), None)
            if const is not None and const not in model.masses and const not in ("world",):
                for a in AXES:
                    name = f"{const}.translation.{a}"
                    if name not in out:
                        out.append(name)
    return out


def _ancestors(parents, i):
    while i >= 0:
        yield i
        i = parents[i]


def calibrate(params: ModelParameters, recording: Recording, names: Optional[Sequence[str]] = None,
              priors: Optional[Mapping[str, Prior]] = None, refine: bool = True,
              window: int = DEFAULT_WINDOW) -> tuple[Calibration, dict]:
    """Fits ``names`` (default :func:`default_parameters`) of ``params``'s model to ``recording``; returns the
    calibration and its report (:func:`report`). Raises RecordingError/CalibrationError naming what is missing."""
    names = list(names) if names is not None else default_parameters(params)
    if recording.config_names != params.configs:
        raise ValueError(f"the recording's configurations {recording.config_names} are not the model's "
                         f"{params.configs}")
    recording.check(len(names))
    t0 = time.perf_counter()
    first = fit_equation_error(params, recording.Q, recording.dt, names, priors=priors)
    t1 = time.perf_counter()
    result = refine_output_error(params, recording.Q, recording.dt, first, priors=priors, W=window) if refine \
        else first
    t2 = time.perf_counter()
    rep = report(result, recording, first)
    sigma_p = momentum_noise(params, result, recording.Q, recording.dt)
    rep["estimator_noise"] = {"momentum": float(np.max(sigma_p)),
                              "per_configuration": dict(zip(params.dynamic, map(float, sigma_p)))}
    rep["timing_s"] = {"equation_error": t1 - t0, "output_error": t2 - t1}
    return result, rep


def report(calibration: Calibration, recording: Recording, equation_error: Optional[Calibration] = None) -> dict:
    """The JSON record of a calibration: every parameter (nominal, estimate, std, prior std, identifiable), the
    fit's statistics, the recording's checks, the combinations the data fixes."""
    tension = calibration.multipliers
    rep = {
        "source": recording.source,
        "samples": int(np.sum(recording.measured)),
        "ticks": recording.N + 1,
        "dt": recording.dt,
        "held_fraction": recording.held_fraction(),
        "notes": list(recording.notes),
        "command_delay_steps": recording.command_delay_steps(),
        "sensor_noise": dict(zip(recording.config_names, map(float, calibration.noise))),
        "nodes": calibration.nodes,
        "chi2_per_dof": calibration.chi2 / calibration.dof,
        "tension_n": {"min": float(np.nanmin(tension)) if np.isfinite(tension).any() else None,
                      "median": float(np.nanmedian(tension)) if np.isfinite(tension).any() else None},
        "parameters": {e.name: e.to_dict() for e in calibration.estimates},
        "scale_note": calibration.scale_note,
        "determined_combinations": [{"std_prior_units": (1.0 / sv if sv > 0 else None), "weights": w}
                                    for sv, w in calibration.directions],
    }
    if equation_error is not None and equation_error is not calibration:
        rep["equation_error"] = {e.name: e.estimate for e in equation_error.estimates}
    return rep
