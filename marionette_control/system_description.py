"""The ROS 2 node set of marionette_control, described once (ARCHITECTURE.md, "ROS graph").

Two programs start the nodes: ``launch/marionette_arm*.launch.py`` for ``ros2 launch`` on a
ROS install, and ``marionette_bringup`` (:mod:`marionette_control.cli.bringup`) on machines
without ``launch`` (PyPI-only set-ups). Both call :func:`node_set` and turn each
:class:`NodeDescription` into a process, so they cannot drift apart; ``test/test_system_description.py``
checks that they do call it, that every executable is an entry point of ``setup.py`` and that
every parameter file exists.

Variants
--------
``hardware``
    ``marionette_optimizer`` and ``marionette_controller``; the arm's driver (ros2_control with
    a joint_state_broadcaster and a forward position controller) is started elsewhere.
``sim``
    the same plus ``marionette_simulator``, which stands in for the driver: it publishes
    ``/joint_states`` and takes the forward position controller's commands.

Options (launch arguments / bringup flags)
------------------------------------------
``use_sim_time`` (sim only)
    the simulator publishes ``/clock`` (``publish_clock: true``) and every node runs on it
    (``use_sim_time: true``).
``real_time_factor`` (sim only)
    simulated seconds per wall-clock second; other than 1 only together with ``use_sim_time``.
``log_level``
    ROS log level of every node.

Parameters of a node come from its files under ``config/`` (in order), then from the inline
``parameters`` that the options set. Parameter files are keyed by the node names below.

This module imports neither rclpy nor launch (only :func:`generate_launch_description` does,
lazily), so tools and tests can read the description anywhere.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

PACKAGE = "marionette_control"
VARIANTS = ("hardware", "sim")
LOG_LEVELS = ("debug", "info", "warn", "error", "fatal")


@dataclass(frozen=True)
class NodeDescription:
    """One node of the system.

    name : ROS node name (the key of its section in the parameter files).
    executable : ``ros2 run`` / console-script name (``setup.py`` entry point).
    entry_point : ``module:function`` the executable runs (bringup runs it with this Python).
    parameter_files : file names under the package's ``config/`` directory, applied in order.
    parameters : inline parameters applied after the files.
    remappings : (from, to) topic/service remappings.
    """

    name: str
    executable: str
    entry_point: str
    parameter_files: tuple[str, ...]
    description: str
    parameters: Mapping[str, Any] = field(default_factory=dict)
    remappings: tuple[tuple[str, str], ...] = ()

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
    description="the hardware stand-in (plant, command delay, drives, encoders: docs/simulator.md); /joint_states "
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
    description="real-time tracking: /joint_states in, actuator commands out",
)

_VARIANT_NODES = {
    "hardware": (OPTIMIZER, CONTROLLER),
    "sim": (SIMULATOR, OPTIMIZER, CONTROLLER),
}

# Launch arguments (name, default as launch passes it: a string, description). Bringup has
# the same options as flags (--sim-time, --real-time-factor, --log-level).
LAUNCH_ARGUMENTS = {
    "hardware": (
        ("log_level", "info", f"ROS log level of every node ({', '.join(LOG_LEVELS)})"),
    ),
    "sim": (
        ("use_sim_time", "false", "true: the simulator publishes /clock and every node runs on simulated time"),
        ("real_time_factor", "1.0", "simulated seconds per wall-clock second (other than 1 needs use_sim_time)"),
        ("log_level", "info", f"ROS log level of every node ({', '.join(LOG_LEVELS)})"),
    ),
}


class DescriptionError(ValueError):
    """An invalid variant or option; the message says what is allowed."""


def node_set(variant: str = "sim", *, use_sim_time: bool = False, real_time_factor: float = 1.0) -> list[NodeDescription]:
    """THE node set of a variant, with the inline parameters its options imply.

    Both the launch files and the bringup start exactly these nodes.
    """
    if variant not in _VARIANT_NODES:
        raise DescriptionError(f"unknown variant '{variant}'; expected one of {', '.join(VARIANTS)}")
    rtf = float(real_time_factor)
    if not (math.isfinite(rtf) and 0.01 <= rtf <= 100.0):
        raise DescriptionError(f"real_time_factor must be in [0.01, 100] (the simulator's range), got "
                               f"{real_time_factor!r}")
    if variant == "hardware" and (use_sim_time or rtf != 1.0):
        raise DescriptionError("use_sim_time and real_time_factor apply to the sim variant only: on the hardware "
                               "the wall clock is the only clock")
    if rtf != 1.0 and not use_sim_time:
        raise DescriptionError(f"real_time_factor {rtf} needs use_sim_time: with wall-clock stamps the simulation "
                               "must run in real time")
    nodes = []
    for node in _VARIANT_NODES[variant]:
        params = dict(node.parameters)
        if use_sim_time:
            params["use_sim_time"] = True
            if node is SIMULATOR:
                params["publish_clock"] = True
                params["real_time_factor"] = rtf
        nodes.append(replace(node, parameters=params))
    return nodes


def parse_bool(text: str, name: str) -> bool:
    """A launch argument's boolean ('true'/'false', any case; also 1/0)."""
    t = str(text).strip().lower()
    if t in ("true", "1", "yes", "on"):
        return True
    if t in ("false", "0", "no", "off"):
        return False
    raise DescriptionError(f"{name} must be true or false, got {text!r}")


def options_from_launch_arguments(variant: str, values: Mapping[str, str]) -> dict:
    """node_set keyword arguments from launch-argument strings (unknown names are an error)."""
    known = {a[0] for a in LAUNCH_ARGUMENTS[variant]}
    unknown = sorted(set(values) - known)
    if unknown:
        raise DescriptionError(f"unknown launch argument(s) {', '.join(unknown)} for variant '{variant}'")
    opts: dict = {}
    if "use_sim_time" in values:
        opts["use_sim_time"] = parse_bool(values["use_sim_time"], "use_sim_time")
    if "real_time_factor" in values:
        try:
            opts["real_time_factor"] = float(values["real_time_factor"])
        except ValueError:
            raise DescriptionError(f"real_time_factor must be a number, got {values['real_time_factor']!r}") from None
    return opts


def check_log_level(level: str) -> str:
    if level not in LOG_LEVELS:
        raise DescriptionError(f"log level must be one of {', '.join(LOG_LEVELS)}, got {level!r}")
    return level


# ------------------------------------------------------------------------------------ config files


def config_dirs() -> list[Path]:
    """Where ``config/`` may be, in lookup order.

    The source tree (editable installs, ``./run``, ``colcon --symlink-install``), the ament
    share directory of an installed package, the install prefix derived from this file
    (``<prefix>/lib/pythonX.Y/site-packages/marionette_control/``) and ``sys.prefix``.
    """
    here = Path(__file__).resolve()
    dirs = [here.parents[1] / "config"]
    try:
        from ament_index_python.packages import get_package_share_directory

        dirs.append(Path(get_package_share_directory(PACKAGE)) / "config")
    except (ImportError, LookupError, OSError):  # no ament index, not in it, or AMENT_PREFIX_PATH unset
        pass
    if len(here.parents) > 4:
        dirs.append(here.parents[4] / "share" / PACKAGE / "config")
    dirs.append(Path(sys.prefix) / "share" / PACKAGE / "config")
    unique = []
    for d in dirs:
        if d not in unique:
            unique.append(d)
    return unique


def config_file(name: str | os.PathLike) -> Path:
    """Absolute path of a file named relative to ``config/`` (an absolute path is returned as is)."""
    p = Path(name)
    if p.is_absolute():
        if not p.exists():
            raise FileNotFoundError(f"file {p} does not exist")
        return p
    tried = config_dirs()
    for d in tried:
        if (d / p).exists():
            return d / p
    raise FileNotFoundError(f"config file {p} not found in {', '.join(map(str, tried))}")


def parameter_file_paths(node: NodeDescription, config_dir: str | os.PathLike | None = None) -> list[Path]:
    """The node's parameter files as absolute paths (in ``config_dir`` if given)."""
    if config_dir is not None:
        paths = [Path(config_dir) / f for f in node.parameter_files]
        missing = [str(p) for p in paths if not p.exists()]
        if missing:
            raise FileNotFoundError(f"parameter file(s) of {node.name} missing: {', '.join(missing)}")
        return paths
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


def ros_arguments(node: NodeDescription, config_dir: str | os.PathLike | None = None,
                  log_level: str | None = None) -> list[str]:
    """The ``--ros-args ...`` of a node as a separate process: name, files, inline parameters, remappings."""
    args = ["--ros-args", "-r", f"__node:={node.name}"]
    for p in parameter_file_paths(node, config_dir):
        args += ["--params-file", str(p)]
    for name, value in node.parameters.items():
        args += ["-p", f"{name}:={format_parameter_value(value)}"]
    for src, dst in node.remappings:
        args += ["-r", f"{src}:={dst}"]
    if log_level is not None:
        args += ["--log-level", check_log_level(log_level)]
    return args


# ------------------------------------------------------------------------------------ launch


def generate_launch_description(variant: str):
    """The ``launch.LaunchDescription`` of a variant (needs ``launch`` and ``launch_ros``).

    The launch files call this; the node list comes from :func:`node_set` at launch time,
    after the launch arguments are known.
    """
    from launch import LaunchDescription
    from launch.actions import DeclareLaunchArgument, OpaqueFunction
    from launch.substitutions import LaunchConfiguration

    if variant not in _VARIANT_NODES:
        raise DescriptionError(f"unknown variant '{variant}'; expected one of {', '.join(VARIANTS)}")
    arguments = [DeclareLaunchArgument(name, default_value=default, description=text)
                 for name, default, text in LAUNCH_ARGUMENTS[variant]]

    def _nodes(context, *args, **kwargs):
        from launch_ros.actions import Node

        values = {name: LaunchConfiguration(name).perform(context) for name, _, _ in LAUNCH_ARGUMENTS[variant]}
        log_level = check_log_level(values.pop("log_level"))
        try:
            from ament_index_python.packages import get_package_share_directory

            config_dir = Path(get_package_share_directory(PACKAGE)) / "config"
        except Exception:  # a source-tree run without an ament index: same lookup as the bringup
            config_dir = None
        actions = []
        for node in node_set(variant, **options_from_launch_arguments(variant, values)):
            actions.append(Node(
                package=PACKAGE,
                executable=node.executable,
                name=node.name,
                output="screen",
                emulate_tty=True,
                parameters=[str(p) for p in parameter_file_paths(node, config_dir)]
                + ([dict(node.parameters)] if node.parameters else []),
                remappings=list(node.remappings),
                arguments=["--ros-args", "--log-level", log_level],
            ))
        return actions

    return LaunchDescription(arguments + [OpaqueFunction(function=_nodes)])
