"""The optimizer node's parameters and the request defaults they set, free of ROS.

:func:`parameter_specs` lists every parameter of ``marionette_optimizer`` (name, default, description, rule;
``config/optimizer.yaml`` sets them) as :class:`~marionette_control.parameters.ParamSpec` entries, which
``nodes/optimizer.py`` declares; :func:`problem_defaults` and :func:`gain_design` turn parameter values into
what requests are built with (:class:`~.tracking_problem.ProblemDefaults`: time grid, weights by kind,
optimizer options, constraints, motion library; :class:`~marionette_control.lq.gains.GainDesign`: the tracking
gains shipped with every result). Their rules are the classes' own, so a parameter is refused with the reason
the request builder would give.
"""

from __future__ import annotations

from typing import Callable, Optional

from marionette_control import validation
from marionette_control.lq.gains import PER_JOINT, GainDesign
from marionette_control.model import library
from marionette_control.ocp.problem import MARGIN_FAMILIES, RETIME_MODES, ConstraintOptions, RetimeOptions
from marionette_control.ocp.projection import OptimizerOptions, OptionError
from marionette_control.ocp.tracking_problem import ProblemDefaults, WeightDefaults
from marionette_control.parameters import ParamSpec
from marionette_control.validation import InvalidOption

#: the concurrency policies (parameter ``concurrency``; ``nodes/optimizer.py`` says what each does)
POLICIES = ("reject", "queue")
#: the fields of WeightDefaults, in order: the parameters ``weights.<name>``
WEIGHT_PARAMETERS = ("named_configuration", "other_configuration", "momentum", "kinematic_velocity", "force_input",
                     "kinematic_input", "terminal_scale")


def _positive(v) -> Optional[str]:
    msg = validation.problem(v, positive=True, short=True)
    return msg and f"must be {msg}"


def _non_negative(v) -> Optional[str]:
    msg = validation.problem(v, minimum=0.0, short=True)
    return msg and f"must be {msg}"


def parse_schedule(entries) -> tuple:
    """``["quasi_newton:4", "newton"]`` -> (("quasi_newton", 4), ("newton", None)); raises ValueError.

    Each entry is ``method`` or ``method:iterations``; a missing count or 0 means "until
    convergence". The entries' format is read here, the schedule's rules are OptimizerOptions'
    (its OptionError worded with the entry).
    """
    entries = list(entries)
    out = []
    for i, e in enumerate(entries):
        method, _, count = str(e).partition(":")
        try:
            n = int(count) if count else 0
        except ValueError:
            raise ValueError(f"entry {i} ({e!r}): iterations must be an integer") from None
        out.append((method, n or None))
    try:
        return OptimizerOptions(schedule=out).schedule
    except OptionError as err:
        where = f"entry {err.entry} ({entries[err.entry]!r}): " if err.entry is not None else ""
        raise ValueError(where + err.message) from None


def _schedule_check(v) -> Optional[str]:
    try:
        parse_schedule(v)
    except ValueError as e:
        return str(e)
    return None


def _model_check(v) -> Optional[str]:
    return None if v in library.available() else f"unknown model '{v}'; available: {', '.join(library.available())}"


def _fraction(v) -> Optional[str]:
    return None if 0.0 <= v < 1.0 else f"must be a fraction in [0, 1), got {v}"


def _gain_check(name: str) -> Callable:
    """The check of parameter ``tracking_gains.<name>``: GainDesign's rule for that field."""
    def check(v) -> Optional[str]:
        try:
            GainDesign(**{name: v})
        except InvalidOption as e:
            return str(e)
        return None

    return check


#: The optimizer node's parameters of the tracking gains: GainDesign's fields, with what each weighs.
GAIN_PARAMETERS = {
    "dynamic_configuration": "LQR state weight of the dynamic configurations (the arm's angles; every "
                             "configuration of a model without drives); per joint: ..._by_joint",
    "kinematic_configuration": "LQR state weight of the drives' positions (kinematic configurations)",
    "momentum": "LQR state weight of the momenta",
    "kinematic_velocity": "LQR state weight of the drives' velocities",
    "input": "LQR input weight of every input (> 0)",
    "drive_acceleration": "LQR weight of the drives' acceleration deviation [s^4/m^2]: the loop's bandwidth "
                          "against the drives' acceleration limits and encoder noise",
    "terminal_scale": "terminal LQR weights = this times the state weights",
    "angle_integral": "LQI weight of the integral of the arm angles' error [1/(rad^2 s^2)] (0: no integral "
                      "action); the controller recomputes the integral's gains from the design record",
    "delay_steps": "command delay [control periods] the gains are designed for: must equal the controller's "
                   "command_delay_steps (1 with ros2_control), which refuses gains for another delay",
}


def by_joint(entries, name: str) -> dict:
    """{joint: weight} of the parameter ``tracking_gains.<name>_by_joint``'s entries "joint=weight" (a ROS parameter
    holds no mapping); raises GainDesignError (through GainDesign's rule) or ValueError naming the entry."""
    out = {}
    for entry in entries:
        joint, sep, value = str(entry).partition("=")
        joint = joint.strip()
        if not sep or not joint or joint in out:
            raise ValueError(f"tracking_gains.{name}_by_joint: expected distinct entries 'joint=weight', got {entry!r}")
        try:
            out[joint] = float(value)
        except ValueError:
            raise ValueError(f"tracking_gains.{name}_by_joint: the weight of '{joint}' must be a number, got "
                             f"{value.strip()!r}") from None
    GainDesign(**{name: out} if out else {})   # the weights' own rule
    return out


def _by_joint_check(name: str) -> Callable:
    """The check of parameter ``tracking_gains.<name>_by_joint``."""
    def check(v) -> Optional[str]:
        try:
            by_joint(v, name)
        except (ValueError, InvalidOption) as e:
            return str(e)
        return None

    return check


def parameter_specs() -> list[ParamSpec]:
    """Every parameter of the node (see also config/optimizer.yaml)."""
    w, g, d, c, r = WeightDefaults(), GainDesign(), ProblemDefaults(), ConstraintOptions(), RetimeOptions()
    return [
        ParamSpec("model", "marionette_arm", "Model (model-library name) requests optimize for when their model_id "
                  "is empty and model_file is; built at start-up.", check=_model_check, read_only=True),
        ParamSpec("model_file", "", "YAML model file (a file under config/ or an absolute path; a variant file "
                  "such as a calibrated model, docs/calibration.md) built at start-up: requests whose model_id is "
                  "empty or names its model optimize for it, with its limits and hardware joint names; empty: none "
                  "(the model-library model 'model').", read_only=True),
        ParamSpec("dt", d.dt, "Default integrator time step [s] for named motions and for desired points that are "
                  "not evenly spaced (options.dt = 0).", check=_positive),
        ParamSpec("max_steps", d.max_steps, "Largest number of steps N a request may ask for.", minimum=1),
        ParamSpec("min_dt", d.min_dt, "Smallest time step [s] a request may ask for (or its evenly spaced points "
                  "imply): the controller ticks once per step on the arm's joint states (ros2_control loops run at up "
                  "to about 1 kHz).", check=_positive),
        ParamSpec("max_dt", d.max_dt, "Largest time step [s] a request may ask for (or its evenly spaced points "
                  "imply): at 0.1 s the midpoint rule already puts the arm's swinging mode (5.8 rad/s) 8 % low in "
                  "frequency and the controller corrects at 10 Hz; two points 1000 s apart are refused, not taken as "
                  "one step.", check=_positive),
        ParamSpec("max_duration", d.max_duration, "Longest desired motion [s] a request may ask for (the "
                  "controller precomputes its Kalman filter along the whole trajectory; a motion of hours is a "
                  "mistake or holds the optimization slot).", check=_positive),
        ParamSpec("motion_directory", "", "Directory of the motion library (<name>.yaml keyframe motions); empty: "
                  "the package's config/motions."),
        ParamSpec("weights.named_configuration", w.named_configuration, "Default state weight of configurations "
                  "the desired motion names.", check=_non_negative),
        ParamSpec("weights.other_configuration", w.other_configuration, "Default state weight of configurations the "
                  "desired motion does not name (0: left to the optimizer).", check=_non_negative),
        ParamSpec("weights.momentum", w.momentum, "Default state weight of momenta (desired 0).", check=_non_negative),
        ParamSpec("weights.kinematic_velocity", w.kinematic_velocity, "Default state weight of kinematic velocities "
                  "(desired 0).", check=_non_negative),
        ParamSpec("weights.force_input", w.force_input, "Default input weight of force inputs (desired 0; > 0).",
                  check=_positive),
        ParamSpec("weights.kinematic_input", w.kinematic_input, "Default input weight of kinematic inputs (next "
                  "kinematic configurations; > 0).", check=_positive),
        ParamSpec("weights.terminal_scale", w.terminal_scale, "Terminal-cost weights = this times the state "
                  "weights, unless a request names terminal weights.", check=_non_negative),
        ParamSpec("schedule", ["quasi_newton:4", "newton"], "Default method schedule: entries 'method:iterations' "
                  "(methods steepest, quasi_newton, newton); the last entry may omit the count (until convergence).",
                  check=_schedule_check),
        ParamSpec("tolerance", d.tolerance, "Default convergence tolerance on the descent norm |Dh.dxi|.",
                  check=_positive),
        ParamSpec("max_iterations", d.max_iterations, "Default cap on the number of iterations.", minimum=1),
        ParamSpec("deadline_s", 0.0, "Default wall-clock budget of one optimization [s] (0: none); at the deadline "
                  "the best feasible trajectory so far is returned.", check=_non_negative),
        ParamSpec("constraints.enabled", c.enabled, "Enforce the model file's limits (drive range, speed, "
                  "acceleration; string tension >= its minimum) unless a request says otherwise."),
        ParamSpec("constraints.min_tension", 0.0, "Default minimum string tension [N] for every string (0: the "
                  "model file's).", check=_non_negative),
        ParamSpec("constraints.range_margin", c.margins["range"], "Default fraction of each drive's range width "
                  "kept off each end for the feedback (0: none; docs/margins.md).", check=_fraction),
        ParamSpec("constraints.speed_margin", c.margins["speed"], "Default fraction of each drive's speed limit "
                  "kept in reserve for the feedback (0: none; docs/margins.md).", check=_fraction),
        ParamSpec("constraints.acceleration_margin", c.margins["acceleration"], "Default fraction of each drive's "
                  "acceleration limit kept in reserve for the feedback (0: none; docs/margins.md).", check=_fraction),
        ParamSpec("constraints.tension_reserve", c.tension_reserve, "Default tension [N] kept above every string's "
                  "minimum for the feedback (0: none; docs/margins.md).", check=_non_negative),
        ParamSpec("constraints.barrier_weight", c.barrier_weight, "Default final weight of the constraint "
                  "barrier per constraint and second.", check=_positive),
        ParamSpec("retime.mode", r.mode, "Default re-timing of a motion too fast for the arm: 'off' (optimized as "
                  "drawn; the answer says whether it is trackable), 'uniform' (the smallest uniform slow-down at "
                  "which it is), 'warp' (slow only the keyframe intervals that need it); docs/motions.md.",
                  check=_retime_mode),
        ParamSpec("retime.tolerance", r.tolerance, "Default RMS error [rad] each prescribed configuration of a "
                  "trackable optimum may keep.", check=_positive),
        ParamSpec("retime.max_factor", r.max_factor, "Default largest slow-down (duration over drawn duration) a "
                  "re-timing tries.", check=_above_one),
        *(ParamSpec(f"tracking_gains.{name}", getattr(g, name), f"Tracking gains shipped with every result "
                    f"(lq/gains.py, GainDesign): {text}.", check=_gain_check(name))
          for name, text in GAIN_PARAMETERS.items()),
        *(ParamSpec(f"tracking_gains.{name}_by_joint", [], f"Per-joint values of tracking_gains.{name}, "
                    "entries 'joint=weight' naming every dynamic configuration of the model (the arm: shoulder and "
                    f"elbow); empty: tracking_gains.{name} for every joint.", check=_by_joint_check(name))
          for name in PER_JOINT),
        ParamSpec("trajectory_topic", "~/trajectory", "Topic of the latest result (TrackedTrajectory, reliable, "
                  "transient-local, depth 1).", check=lambda v: None if v else "must not be empty", read_only=True),
        ParamSpec("save_directory", "", "Directory for result files (created at start-up if missing): a request's "
                  "save_path is taken relative to it and must resolve inside it; results of requests without "
                  "save_path are saved there too. Empty: nothing is saved and requests with a save_path are refused.",
                  read_only=True),
        ParamSpec("allowed_save_directories", [], "Absolute directories an absolute save_path may point into "
                  "(resolved, symbolic links included); empty: absolute save_paths are refused.", read_only=True),
        ParamSpec("concurrency", "reject", "Policy for requests while an optimization runs: 'reject' (answer busy / "
                  "reject the goal) or 'queue' (wait in order, up to queue_size).",
                  check=lambda v: None if v in POLICIES else f"must be one of {', '.join(POLICIES)}", read_only=True),
        ParamSpec("queue_size", 4, "With concurrency 'queue': how many requests may wait.", minimum=1, maximum=64,
                  read_only=True),
        ParamSpec("qos_depth.service", 100, "History depth of the optimize service's request and response queues: "
                  "requests arriving in one burst while the callbacks are busy (more than 1 + queue_size; a deeper "
                  "burst loses the oldest unseen requests in the middleware).", minimum=2, maximum=10000,
                  read_only=True),
        ParamSpec("qos_depth.action", 100, "History depth of the optimize action's goal, cancel and result service "
                  "queues (as qos_depth.service).", minimum=2, maximum=10000, read_only=True),
    ]


def _retime_mode(v) -> Optional[str]:
    return None if v in RETIME_MODES else f"must be one of {', '.join(RETIME_MODES)}, got {v!r}"


def _above_one(v) -> Optional[str]:
    msg = validation.problem(v, minimum=1.0, short=True)
    return f"must be {msg}" if msg else (None if v > 1.0 else f"must exceed 1, got {v}")


def problem_defaults(values: dict) -> ProblemDefaults:
    """The request defaults of parameter values (by name, as :func:`parameter_specs`); ProblemError (or a
    ValueError from a schedule that does not parse) when they do not fit together."""
    v = values
    weights = WeightDefaults(*(float(v[f"weights.{k}"]) for k in WEIGHT_PARAMETERS))
    directory = v["motion_directory"]
    return ProblemDefaults(dt=float(v["dt"]), weights=weights, schedule=parse_schedule(v["schedule"]),
                           tolerance=float(v["tolerance"]), max_iterations=int(v["max_iterations"]),
                           deadline=float(v["deadline_s"]) or None, max_steps=int(v["max_steps"]),
                           min_dt=float(v["min_dt"]), max_dt=float(v["max_dt"]),
                           max_duration=float(v["max_duration"]),
                           motion_directories=[directory] if directory else (), constraints=constraint_defaults(v),
                           retime=RetimeOptions(mode=v["retime.mode"], tolerance=float(v["retime.tolerance"]),
                                                max_factor=float(v["retime.max_factor"])))


def constraint_defaults(values: dict) -> ConstraintOptions:
    """The constraints a request gets unless it says otherwise, from the ``constraints.*`` parameter values (a
    margin or tension reserve of 0: none; a minimum tension of 0: the model file's)."""
    v = values
    margins = {f: float(v[f"constraints.{f}_margin"]) for f in MARGIN_FAMILIES}
    return ConstraintOptions(enabled=bool(v["constraints.enabled"]), margins=margins,
                             tension_reserve=float(v["constraints.tension_reserve"]),
                             min_tension=float(v["constraints.min_tension"]) or None,
                             barrier_weight=float(v["constraints.barrier_weight"]))


def gain_design(values: dict) -> GainDesign:
    """The tracking gains' design of the ``tracking_gains.*`` parameter values."""
    design = {name: values[f"tracking_gains.{name}"] for name in GAIN_PARAMETERS}
    for name in PER_JOINT:
        design[name] = by_joint(values[f"tracking_gains.{name}_by_joint"], name) or design[name]
    return GainDesign(**design)


__all__ = ["POLICIES", "GAIN_PARAMETERS", "WEIGHT_PARAMETERS", "parse_schedule", "parameter_specs",
           "problem_defaults", "constraint_defaults", "gain_design"]
