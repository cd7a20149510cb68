"""The ROS 2 node set of marionette_control, described once (docs/architecture.md, "ROS graph").

Two programs start the nodes: ``launch/marionette_arm*.launch.py`` for ``ros2 launch`` on a
ROS install, and ``marionette_bringup`` (:mod:`marionette_control.cli.bringup`) on machines
without ``launch`` (PyPI-only set-ups). Both take the arguments of :data:`ARGUMENTS` (launch
arguments ``name:=value``; bringup options ``--name-with-dashes``), call :func:`node_set` and
turn each :class:`NodeDescription` into a process, so they cannot drift apart;
``test/test_system_description.py`` checks that they do, that every executable is an entry point
of ``setup.py`` and that every parameter file exists.

Variants
--------
``hardware``
    ``marionette_optimizer``, ``marionette_controller`` and ``robot_state_publisher``; the arm's
    driver (ros2_control with a joint_state_broadcaster and a forward position controller:
    ``config/ros2_controllers.yaml``) is started elsewhere.
``sim``
    the same plus ``marionette_simulator``, which stands in for the driver: it publishes
    ``joint_states`` and takes the forward position controller's commands.

Arguments (:data:`ARGUMENTS`; launch ``name:=value``, bringup ``--name-with-dashes``)
-------------------------------------------------------------------------------------
``namespace``
    every node in this namespace (topics, services and parameters are relative, so two arms
    run side by side on one graph: ``namespace:=arm1`` and ``namespace:=arm2``);
    robot_state_publisher prefixes its TF frames with ``<namespace>/`` and the simulator's
    markers use the prefixed root frame. ``/diagnostics`` and ``/clock`` stay global (status
    names carry the namespace; one simulated clock per graph).
``use_sim_time``
    every node runs on ``/clock``. In the sim variant the simulator publishes it
    (``publish_clock``); on the hardware another simulator does (Gazebo with gz_ros2_control).
``real_time_factor`` (sim only)
    simulated seconds per wall-clock second; other than 1 only together with ``use_sim_time``.
``autostart``
    the controller configures and activates at start-up and starts tracking as soon as it has a
    trajectory (its ``autostart`` parameter). The simulator has an ``autostart`` parameter of its own
    (default true: it comes up configured and active, as a driver that is up), which this argument
    leaves alone.
``mpc``
    also start ``marionette_mpc`` (``config/mpc.yaml``): receding-horizon re-planning of the motion the
    controller tracks, from its ``~/tracking`` output, plans on ``marionette_mpc/plan`` (the
    controller's ``plan_topic``); docs/mpc.md.
``robot_state_publisher``
    start robot_state_publisher with the arm's URDF (TF of arm, carriage and winch); false
    where the hardware's own bringup runs one.
``rviz``
    start RViz with ``config/marionette_arm.rviz`` (the robot model, TF and the simulator's
    markers: arm, string, carriage), fixed frame the URDF's root.
``simulator_params_file`` (sim only), ``optimizer_params_file``, ``controller_params_file``
    a parameter file that replaces the node's file under ``config/`` (keyed ``/**`` or by
    node name).
``log_level``
    ROS log level of every node.

Parameters of a node come from its files (in order), then from the inline ``parameters`` that
the arguments set. The package's parameter files are keyed ``/**``, so namespaced nodes read them.

This module imports neither rclpy nor launch (only :func:`generate_launch_description` does,
lazily), so tools and tests can read the description anywhere.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Optional

from marionette_control.model.urdf import parse_urdf
from marionette_control.resources import PACKAGE, config_file

VARIANTS = ("hardware", "sim")
LOG_LEVELS = ("debug", "info", "warn", "error", "fatal")
URDF_FILE = "marionette_arm.urdf"
RVIZ_FILE = "marionette_arm.rviz"


@dataclass(frozen=True)
class NodeDescription:
    """One node of the system.

    name : ROS node name.
    executable : ``ros2 run`` executable (for this package: a ``setup.py`` console script).
    entry_point : ``module:function`` the executable runs (bringup runs it with this Python); None for
        another package's executable (robot_state_publisher, rviz2), which bringup runs from the ament index.
    parameter_files : files applied in order: names under the package's ``config/`` or absolute paths.
    package : the ROS package of the executable.
    namespace : "" (root) or an absolute namespace ("/arm1").
    parameters : inline parameters applied after the files.
    remappings : (from, to) topic/service remappings.
    arguments : command-line arguments before ``--ros-args`` (rviz2's ``-d FILE -f FRAME``).
    log_level : ROS log level.
    """

    name: str
    executable: str
    entry_point: Optional[str]
    parameter_files: tuple[str, ...]
    description: str
    package: str = PACKAGE
    namespace: str = ""
    parameters: Mapping[str, Any] = field(default_factory=dict)
    remappings: tuple[tuple[str, str], ...] = ()
    arguments: tuple[str, ...] = ()
    log_level: str = "info"

    @property
    def module(self) -> str:
        return self.entry_point.split(":", 1)[0]

    @property
    def function(self) -> str:
        return self.entry_point.split(":", 1)[1]


SIMULATOR = NodeDescription(
    name="marionette_simulator",
    executable="marionette_simulator",
    entry_point="marionette_control.nodes.simulator:main",
    parameter_files=("simulator.yaml",),
    description="the hardware stand-in (plant, command delay, drives, encoders: docs/simulator.md); joint_states "
                "out, forward position controller commands in",
)
OPTIMIZER = NodeDescription(
    name="marionette_optimizer",
    executable="marionette_optimizer",
    entry_point="marionette_control.nodes.optimizer:main",
    parameter_files=("optimizer.yaml",),
    description="trajectory optimization on request (service and action)",
)
CONTROLLER = NodeDescription(
    name="marionette_controller",
    executable="marionette_controller",
    entry_point="marionette_control.nodes.controller:main",
    parameter_files=("controller.yaml",),
    description="real-time tracking: joint_states in, actuator commands out",
)
MPC = NodeDescription(
    name="marionette_mpc",
    executable="marionette_mpc",
    entry_point="marionette_control.nodes.mpc:main",
    parameter_files=("mpc.yaml",),
    description="receding-horizon re-planning: the controller's tracking state in, plans out (docs/mpc.md)",
)
ROBOT_STATE_PUBLISHER = NodeDescription(
    name="robot_state_publisher",
    executable="robot_state_publisher",
    entry_point=None,
    parameter_files=(),
    package="robot_state_publisher",
    description="TF of the arm's URDF from joint_states (robot_description on its topic for RViz)",
)
RVIZ = NodeDescription(
    name="rviz2",
    executable="rviz2",
    entry_point=None,
    parameter_files=(),
    package="rviz2",
    description="RViz with config/marionette_arm.rviz: robot model, TF, the simulator's markers",
)

_VARIANT_NODES = {
    "hardware": (OPTIMIZER, CONTROLLER),
    "sim": (SIMULATOR, OPTIMIZER, CONTROLLER),
}
#: launch/bringup argument that replaces a node's parameter file
PARAMS_FILE_ARGUMENT = {SIMULATOR.name: "simulator_params_file", OPTIMIZER.name: "optimizer_params_file",
                        CONTROLLER.name: "controller_params_file"}


@dataclass(frozen=True)
class Argument:
    """A launch argument (and bringup option): name, default as launch passes it (text), kind, description.

    kind : "bool" (true/false), "float", "namespace", "file" (a path; "" = the package's), "level" (log level).
    """

    name: str
    default: str
    kind: str
    description: str
    variants: tuple[str, ...] = VARIANTS


ARGUMENTS = (
    Argument("namespace", "", "namespace", "ROS namespace of every node (e.g. arm1; two arms on one graph each get "
             "their own); empty: the root namespace"),
    Argument("use_sim_time", "false", "bool", "true: every node runs on /clock (sim: the simulator publishes it; "
             "hardware: another simulator does, e.g. Gazebo with gz_ros2_control)"),
    Argument("real_time_factor", "1.0", "float", "simulated seconds per wall-clock second (other than 1 needs "
             "use_sim_time)", ("sim",)),
    Argument("autostart", "false", "bool", "true: the controller starts tracking as soon as it has a trajectory"),
    Argument("mpc", "false", "bool", "true: start marionette_mpc, which re-plans the tracked motion from the "
             "controller's estimate several times a second (docs/mpc.md)"),
    Argument("robot_state_publisher", "true", "bool", "start robot_state_publisher with the arm's URDF (false where "
             "the hardware's bringup runs one)"),
    Argument("rviz", "false", "bool", "true: start RViz with config/marionette_arm.rviz (arm, string, carriage)"),
    Argument("simulator_params_file", "", "file", "parameter file of marionette_simulator (empty: the package's "
             "config/simulator.yaml)", ("sim",)),
    Argument("optimizer_params_file", "", "file", "parameter file of marionette_optimizer (empty: the package's "
             "config/optimizer.yaml)"),
    Argument("controller_params_file", "", "file", "parameter file of marionette_controller (empty: the package's "
             "config/controller.yaml)"),
    Argument("log_level", "info", "level", f"ROS log level of every node ({', '.join(LOG_LEVELS)})"),
)


def arguments(variant: str) -> list[Argument]:
    """The launch arguments of a variant."""
    check_variant(variant)
    return [a for a in ARGUMENTS if variant in a.variants]


class DescriptionError(ValueError):
    """An invalid variant or argument; the message says what is allowed."""


def check_variant(variant: str) -> None:
    if variant not in _VARIANT_NODES:
        raise DescriptionError(f"unknown variant '{variant}'; expected one of {', '.join(VARIANTS)}")


_NAMESPACE = re.compile(r"/?([A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*)?/?")


def normalize_namespace(namespace: str) -> str:
    """"" (root) or "/a/b" from "a/b", "/a/b" or "a/b/"; raises DescriptionError for an invalid ROS namespace."""
    if not _NAMESPACE.fullmatch(namespace):
        raise DescriptionError(f"namespace must be ROS name tokens (letters, digits, '_', not starting with a "
                               f"digit) separated by '/', got {namespace!r}")
    stripped = namespace.strip("/")
    return f"/{stripped}" if stripped else ""


def frame_prefix(namespace: str) -> str:
    """The TF frame prefix of a namespace ("arm1/" for "/arm1", "" for the root)."""
    ns = normalize_namespace(namespace).strip("/")
    return f"{ns}/" if ns else ""


def node_set(variant: str = "sim", *, namespace: str = "", use_sim_time: bool = False, real_time_factor: float = 1.0,
             autostart: bool = False, mpc: bool = False, robot_state_publisher: bool = True, rviz: bool = False,
             simulator_params_file: str = "", optimizer_params_file: str = "", controller_params_file: str = "",
             log_level: str = "info") -> list[NodeDescription]:
    """THE node set of a variant for the arguments of :data:`ARGUMENTS` (keyword = argument name).

    Both the launch files and the bringup start exactly these nodes.
    """
    check_variant(variant)
    rtf = float(real_time_factor)
    if not (math.isfinite(rtf) and 0.01 <= rtf <= 100.0):
        raise DescriptionError(f"real_time_factor must be in [0.01, 100] (the simulator's range), got "
                               f"{real_time_factor!r}")
    if variant == "hardware" and rtf != 1.0:
        raise DescriptionError("real_time_factor applies to the sim variant only: on the hardware time runs as the "
                               "clock (the wall clock, or the /clock of another simulator) says")
    if variant == "hardware" and simulator_params_file:
        raise DescriptionError("simulator_params_file applies to the sim variant only (no simulator on the hardware)")
    if rtf != 1.0 and not use_sim_time:
        raise DescriptionError(f"real_time_factor {rtf} needs use_sim_time: with wall-clock stamps the simulation "
                               "must run in real time")
    check_log_level(log_level)
    ns = normalize_namespace(namespace)
    prefix = frame_prefix(ns)
    files = {SIMULATOR.name: simulator_params_file, OPTIMIZER.name: optimizer_params_file,
             CONTROLLER.name: controller_params_file}
    root = _urdf_root()
    nodes = []
    for node in _VARIANT_NODES[variant]:
        params = dict(node.parameters)
        if use_sim_time:
            params["use_sim_time"] = True
            if node is SIMULATOR:
                params["publish_clock"] = True
                params["real_time_factor"] = rtf
        if node is SIMULATOR and prefix:
            params["frame_id"] = prefix + root
        if node is CONTROLLER and autostart:
            params["autostart"] = True
        own_file = files[node.name]
        if own_file:
            if not os.path.isfile(own_file):
                raise DescriptionError(f"{PARAMS_FILE_ARGUMENT[node.name]}: no such file {own_file!r}")
        nodes.append(replace(node, namespace=ns, parameters=params, log_level=log_level,
                             parameter_files=(os.path.abspath(own_file),) if own_file else node.parameter_files))
    timed = {"use_sim_time": True} if use_sim_time else {}
    if mpc:
        nodes.append(replace(MPC, namespace=ns, parameters=timed, log_level=log_level))
    if robot_state_publisher:
        rsp = {"robot_description": config_file(URDF_FILE).read_text(), **timed}
        if prefix:
            rsp["frame_prefix"] = prefix
        nodes.append(replace(ROBOT_STATE_PUBLISHER, namespace=ns, parameters=rsp, log_level=log_level))
    if rviz:
        nodes.append(replace(RVIZ, namespace=ns, parameters=timed, log_level=log_level,
                             arguments=("-d", str(config_file(RVIZ_FILE)), "-f", prefix + root)))
    return nodes


def _urdf_root() -> str:
    """The URDF's root link: the frame the model's world coincides with (RViz's fixed frame)."""

    return parse_urdf(config_file(URDF_FILE)).root


def parse_bool(text: str, name: str) -> bool:
    """A launch argument's boolean ('true'/'false', any case; also 1/0)."""
    t = str(text).strip().lower()
    if t in ("true", "1", "yes", "on"):
        return True
    if t in ("false", "0", "no", "off"):
        return False
    raise DescriptionError(f"{name} must be true or false, got {text!r}")


def parse_argument(argument: Argument, text: str):
    """The typed value of an argument's text (as launch passes it); raises DescriptionError."""
    if argument.kind == "bool":
        return parse_bool(text, argument.name)
    if argument.kind == "float":
        try:
            return float(text)
        except ValueError:
            raise DescriptionError(f"{argument.name} must be a number, got {text!r}") from None
    if argument.kind == "level":
        return check_log_level(text)
    if argument.kind == "namespace":
        normalize_namespace(text)
    return text


def options_from_launch_arguments(variant: str, values: Mapping[str, str]) -> dict:
    """node_set keyword arguments from launch-argument texts (unknown names are an error)."""
    known = {a.name: a for a in arguments(variant)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise DescriptionError(f"unknown launch argument(s) {', '.join(unknown)} for variant '{variant}'")
    return {name: parse_argument(known[name], text) for name, text in values.items()}


def check_log_level(level: str) -> str:
    if level not in LOG_LEVELS:
        raise DescriptionError(f"log level must be one of {', '.join(LOG_LEVELS)}, got {level!r}")
    return level


# ------------------------------------------------------------------------------------ config files


def parameter_file_paths(node: NodeDescription) -> list[Path]:
    """The node's parameter files as absolute paths (:func:`~marionette_control.resources.config_file`)."""
    return [config_file(f) for f in node.parameter_files]


def format_parameter_value(value: Any) -> str:
    """A value as the YAML text of ``--ros-args -p name:=value``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else (".nan" if value != value else ("-.inf" if value < 0 else ".inf"))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_parameter_value(v) for v in value) + "]"
    raise TypeError(f"cannot pass a parameter of type {type(value).__name__}: {value!r}")


def ros_arguments(node: NodeDescription) -> list[str]:
    """The ``--ros-args ...`` of a node as a separate process: name, namespace, files, inline parameters,
    remappings, log level."""
    args = ["--ros-args", "-r", f"__node:={node.name}"]
    if node.namespace:
        args += ["-r", f"__ns:={node.namespace}"]
    for p in parameter_file_paths(node):
        args += ["--params-file", str(p)]
    for name, value in node.parameters.items():
        args += ["-p", f"{name}:={format_parameter_value(value)}"]
    for src, dst in node.remappings:
        args += ["-r", f"{src}:={dst}"]
    args += ["--log-level", check_log_level(node.log_level)]
    return args


def find_executable(node: NodeDescription) -> Optional[str]:
    """Path of another package's executable (``<prefix>/lib/<package>/<executable>`` from the ament index, as
    ``ros2 run`` finds it), or None where the package is not installed."""
    try:
        from ament_index_python.packages import get_package_prefix

        path = Path(get_package_prefix(node.package)) / "lib" / node.package / node.executable
    except (ImportError, LookupError, OSError, ValueError):
        return None
    return str(path) if path.is_file() and os.access(path, os.X_OK) else None


# ------------------------------------------------------------------------------------ launch


def generate_launch_description(variant: str):
    """The ``launch.LaunchDescription`` of a variant (needs ``launch`` and ``launch_ros``).

    The launch files call this; the node list comes from :func:`node_set` at launch time,
    after the launch arguments are known.
    """
    from launch.actions import DeclareLaunchArgument, OpaqueFunction
    from launch.substitutions import LaunchConfiguration

    from launch import LaunchDescription

    declared = [DeclareLaunchArgument(a.name, default_value=a.default, description=a.description)
                for a in arguments(variant)]

    def _nodes(context, *args, **kwargs):
        from launch_ros.actions import Node

        values = {a.name: LaunchConfiguration(a.name).perform(context) for a in arguments(variant)}
        actions = []
        for node in node_set(variant, **options_from_launch_arguments(variant, values)):
            files = [str(p) for p in parameter_file_paths(node)]  # the bringup's lookup
            actions.append(Node(
                package=node.package,
                executable=node.executable,
                name=node.name,
                namespace=node.namespace or "/",
                output="screen",
                emulate_tty=True,
                parameters=files + ([dict(node.parameters)] if node.parameters else []),
                remappings=list(node.remappings),
                arguments=[*node.arguments, "--ros-args", "--log-level", node.log_level],
            ))
        return actions

    return LaunchDescription(declared + [OpaqueFunction(function=_nodes)])
