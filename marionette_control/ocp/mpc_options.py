"""The planner node's parameters and set-up, free of ROS: what ``marionette_mpc`` re-plans and how.

:data:`PARAMS` lists every parameter of the receding-horizon planner (``nodes/mpc.py``, ``config/mpc.yaml``)
as :class:`~marionette_control.parameters.ParamSpec` entries; :func:`mpc_options` makes the
:class:`~.mpc.MPCOptions` of their values, :func:`planners` the planner of ``method`` for a motion, :func:`planning_problem` the problem the tracked motion is the
optimum of (a YAML spec's, or the optimizer node's for a request of a library motion), and
:func:`command_inputs` reads the controller's commands by hardware joint name. Each refuses with a
:class:`~marionette_control.parameters.ParameterError` naming the parameter.
"""

from __future__ import annotations

import dataclasses

from marionette_control.model.joint_map import JointMap
from marionette_control.model.limits import from_description
from marionette_control.ocp import request
from marionette_control.ocp.mpc import MPCOptions, RecedingHorizon
from marionette_control.ocp.problem import Problem
from marionette_control.ocp.rti import RealTimeIteration
from marionette_control.ocp.spec import load_spec
from marionette_control.ocp.spec_problem import build_problem
from marionette_control.parameters import ParameterError, ParamSpec
from marionette_control.resources import config_file

_DEFAULTS = MPCOptions()
#: the planner's ways of re-planning (parameter ``method``, :func:`planners`)
METHODS = ("receding_horizon", "rti")


def _method_error(value) -> "str | None":
    return None if value in METHODS else f"parameter 'method' must be one of {', '.join(METHODS)}, got {value!r}"


PARAMS = [
    ParamSpec("method", METHODS[0], "How the plans are made: 'receding_horizon' optimizes the window every 'period' "
              "(ocp/mpc.py RecedingHorizon); 'rti' one real-time iteration at every tick (ocp/rti.py: 'period' is one "
              "tick, the preparation for the next tick runs right after each plan; a plan done after 'deadline' or "
              "its due tick is not published)", check=_method_error, read_only=True),
    ParamSpec("model_file", "marionette_arm.yaml", "YAML model file (under config/ or absolute): the model, the drives' "
              "limits the controller clamps to and the hardware joint names of its commands; the controller's file",
              read_only=True),
    ParamSpec("problem_spec", "", "YAML optimization spec (marionette-optimize's format, under config/ or absolute) "
              "whose optimum the tracked motion is; empty: the optimizer node's problem for a request of the motion "
              "library's 'motion' with its default options", read_only=True),
    ParamSpec("motion", "wave", "Motion library name of the problem when problem_spec is empty", read_only=True),
    ParamSpec("trajectory_file", "", "The tracked motion as a trajectory file (.npz); empty: from trajectory_topic",
              read_only=True),
    ParamSpec("trajectory_topic", "marionette_optimizer/trajectory", "TrackedTrajectory topic of the optimizer "
              "(reliable, transient local): the motion the controller tracks", read_only=True),
    ParamSpec("tracking_topic", "marionette_controller/tracking", "The controller's TrackingState output",
              read_only=True),
    ParamSpec("horizon", _DEFAULTS.horizon, "Receding horizon [s] (shorter at the end of the motion)",
              minimum=0.05, maximum=30.0, read_only=True),
    ParamSpec("period", _DEFAULTS.period, "Time between updates [s, of the controller's ticks]", minimum=0.001,
              maximum=10.0, read_only=True),
    ParamSpec("latency_steps", _DEFAULTS.latency_steps, "Ticks between the estimate an update starts from and the "
              "tick at which the controller first uses its plan (the plan starts at step k + d + latency_steps)",
              minimum=0, maximum=1000, read_only=True),
    ParamSpec("deadline", _DEFAULTS.deadline, "Longest time one update may take [s, on the node's clock: simulated "
              "time under use_sim_time] (prediction, optimization, gains), besides its plan's due tick; "
              "0: no deadline (plans that come too late are refused by the controller)", minimum=0.0, maximum=10.0,
              read_only=True),
    ParamSpec("transport_margin", 0.005, "Time [s] kept for delivering a plan before the tick that uses it",
              minimum=0.0, maximum=1.0, read_only=True),
    ParamSpec("max_iterations", _DEFAULTS.max_iterations, "Descent directions per update at most", minimum=1,
              maximum=1000, read_only=True),
    ParamSpec("drive_acceleration", _DEFAULTS.drive_acceleration, "Weight of the drives' accelerations against the "
              "motion's in the window's cost [s^4/m^2] (ocp/mpc.py MPCOptions)", minimum=0.0, maximum=1e6,
              read_only=True),
    ParamSpec("identify", [], "Model parameters the planner re-identifies online from the measured joint states and "
              "plans on (e.g. [shoulder.damping, elbow.damping]; docs/mpc.md, 'Online identification'); empty: none",
              read_only=True),
    ParamSpec("identify_window", _DEFAULTS.identify_window, "Seconds of measured joint states each online fit uses",
              minimum=0.05, maximum=60.0, read_only=True),
    ParamSpec("identify_period", _DEFAULTS.identify_period, "Time between online fits at least [s, of the "
              "controller's ticks]", minimum=0.001, maximum=60.0, read_only=True),
    ParamSpec("plan_identified_only", _DEFAULTS.plan_identified_only, "With identify: no plan until an identified "
              "model is adopted (the controller's own law acts meanwhile; docs/mpc.md, 'Online identification')",
              read_only=True),
    ParamSpec("joint_states_topic", "joint_states", "The controller's sensor_msgs/JointState topic (sensor-data QoS): "
              "subscribed only with identify, by the model file's hardware joint names", read_only=True),
    ParamSpec("diagnostics_period", 1.0, "Period (s, steady clock) of /diagnostics messages", minimum=0.01,
              maximum=60.0, read_only=True),
    ParamSpec("nice", 10, "Niceness of the updates' thread (os.nice): on a computer whose cores the controller "
              "shares, the planner's updates yield to its ticks; 0: unchanged", minimum=0, maximum=19,
              read_only=True),
    ParamSpec("idle_scheduling", True, "Run the updates' thread under SCHED_IDLE (Linux): any other thread that wakes "
              "up, the controller's and its middleware's included, takes the core from it at once (docs/mpc.md); on "
              "a computer busy with other work the updates then get only its idle time", read_only=True),
]


def mpc_options(values: dict) -> MPCOptions:
    """The MPCOptions of parameter values (``deadline`` 0: None)."""
    try:
        return MPCOptions(horizon=float(values["horizon"]), period=float(values["period"]),
                          latency_steps=int(values["latency_steps"]),
                          deadline=float(values["deadline"]) or None, max_iterations=int(values["max_iterations"]),
                          drive_acceleration=float(values["drive_acceleration"]), identify=tuple(values["identify"]),
                          identify_window=float(values["identify_window"]),
                          identify_period=float(values["identify_period"]),
                          plan_identified_only=bool(values["plan_identified_only"]))
    except ValueError as e:
        raise ParameterError(str(e)) from None


def planners(method: str, problem: Problem, motion, options: MPCOptions, identifier=None) -> tuple:
    """(horizon, rti) for ``motion`` (a Trajectory): with ``method`` 'receding_horizon' the
    :class:`~.mpc.RecedingHorizon` of ``options`` and None; with 'rti' the :class:`~.rti.RealTimeIteration` of
    ``options`` at a period of one tick of ``problem`` and without a deadline of its own (a fixed amount of work per
    tick), and the RecedingHorizon it predicts and checks with; ``identifier``: the online identification of
    ``options.identify`` (:class:`~.mpc.RecedingHorizon`). Raises ValueError for a motion that is not the
    problem's optimum's shape (RecedingHorizon's)."""
    if method == "receding_horizon":
        return RecedingHorizon(problem, motion, options, identifier), None
    if method != "rti":
        raise ParameterError(_method_error(method))
    rti = RealTimeIteration(problem, motion, dataclasses.replace(options, period=problem.dt, deadline=None),
                            identifier)
    return rti.horizon, rti


def planning_problem(values: dict, description) -> Problem:
    """The problem of ``problem_spec``, or the optimizer node's for a request of ``motion`` on the model
    ``description`` (the model file's, with its limits, as the optimizer node builds a ``model_file``: a calibrated
    variant as well): the problem the tracked motion is the optimum of."""
    try:
        if values["problem_spec"]:
            return build_problem(load_spec(config_file(values["problem_spec"])))
        return request.build_problem(description.model, motion_name=values["motion"],
                                     limits=from_description(description))
    except (OSError, ValueError) as e:   # a SpecError, a ProblemError, a file that is not there
        which = "problem_spec" if values["problem_spec"] else "motion"
        raise ParameterError(f"parameter '{which}': {e}") from None


def command_inputs(description) -> dict:
    """{hardware joint name: index into u (model order)} of the drives a position command names (a model
    description's ``hardware.joint_names``, :class:`~marionette_control.model.joint_map.JointMap`)."""
    m = description.model
    names = JointMap.of(m, description.hardware_joints).kinematic_hardware_names
    return {h: m.nu + i for i, h in enumerate(names)}


__all__ = ["METHODS", "PARAMS", "mpc_options", "planners", "planning_problem", "command_inputs"]
