"""The suite's markers and the one rule for tests that need ROS 2.

Markers (registered here, so ``--strict-markers`` accepts them; select with ``-m``)
-----------------------------------------------------------------------------------
``ros``
    The test needs the ROS 2 Python stack (rclpy and the built marionette_interfaces): it runs
    nodes in process or starts node processes. A test module whose body imports rclpy,
    marionette_interfaces or a message package is a ROS module: all its tests carry the marker
    and, where rclpy is missing, the module is skipped before it is imported (saying so; with
    rclpy but without the interfaces the build is broken and the imports fail loudly). Tests in other modules that need ROS say ``@pytest.mark.ros`` (or the module sets
    ``pytestmark = pytest.mark.ros``) and are skipped the same way.
``slow``
    The test starts a complete system (bringup's node set, one or two of them, or the main job) or
    runs a motion in real time: 5 to 20 s each on the project's 2-core machine.

A launch test (a module-level ``generate_test_description``, collected by launch_testing's plugin
where it is installed) carries both markers.

Examples: ``./run tests -m "not slow"`` (a quick pass), ``./run tests -m "ros and not slow"``,
``./run tests -m "not ros"`` (what runs without a ROS installation).

No test asserts wall-clock rates or delays (house rule): tests count events or bound simulated
time; timing figures live in ``benchmarks/``. Timeouts in tests only guard against hangs.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path

import pytest

# ros_helpers' and sample_fixtures' fixtures for every test module (pytest takes fixtures from conftest's namespace);
# neither imports a ROS module, so this works where ROS is missing
from ros_helpers import node_processes
from sample_fixtures import arm, cdr

__all__ = ["arm", "cdr", "node_processes"]

#: Root modules whose import makes a test module a ROS module.
ROS_MODULES = ("rclpy", "marionette_interfaces")
ROS_MODULE_SUFFIXES = ("_msgs", "_srvs")


def pytest_configure(config):
    config.addinivalue_line("markers", "ros: needs the ROS 2 Python stack (rclpy, built marionette_interfaces); "
                                       "skipped where it is missing")
    config.addinivalue_line("markers", "slow: starts a complete system or runs a motion in real time, 5-20 s "
                                       "each (deselect with -m 'not slow')")


@functools.lru_cache(maxsize=None)
def ros_missing() -> str | None:
    """Why the ROS 2 Python stack cannot be used here, or None when it can.

    Only a missing rclpy skips: with rclpy but without marionette_interfaces the build is broken,
    and the ROS modules fail loudly on their imports instead of hiding it."""
    if importlib.util.find_spec("rclpy") is None:
        return ("ROS 2 Python stack not installed: no module 'rclpy' (./run installs requirements/ros.txt; on a ROS "
                "install: source its setup.bash)")
    return None


def _is_ros_module_name(name: str) -> bool:
    root = name.split(".", 1)[0]
    return root in ROS_MODULES or root.endswith(ROS_MODULE_SUFFIXES)


def imports_ros(path: Path) -> bool:
    """True when the module's body (not a function, not a guarded ``try``) imports a ROS module: it cannot be
    imported without ROS. A launch test (a module-level ``generate_test_description``) is left to
    launch_testing's own collector."""
    if is_launch_test(path):
        return False
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in tree.body:
        if isinstance(node, ast.Import) and any(_is_ros_module_name(a.name) for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and _is_ros_module_name(node.module):
            return True
    return False


class RosModule(pytest.Module):
    """A test module that imports ROS at its top: marked ``ros``, skipped whole where ROS is missing."""

    def collect(self):
        reason = ros_missing()
        if reason is not None:
            pytest.skip(reason, allow_module_level=True)
        return super().collect()


def pytest_pycollect_makemodule(module_path, parent):
    if module_path.name.startswith("test_") and imports_ros(module_path):
        module = RosModule.from_parent(parent, path=module_path)
        module.add_marker(pytest.mark.ros)
        return module
    return None


@functools.lru_cache(maxsize=None)
def is_launch_test(path: Path) -> bool:
    """A launch test module (a module-level ``generate_test_description``), collected by launch_testing's plugin
    as a file, not a module: its module-level ``pytestmark`` does not reach its items."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return any(isinstance(n, ast.FunctionDef) and n.name == "generate_test_description" for n in tree.body)


def pytest_collection_modifyitems(config, items):
    # (runs before ``-m`` deselects: a launch test starts a complete system, so it is ``ros`` and ``slow``)
    for item in items:
        if item.path.name.startswith("test_") and item.get_closest_marker("ros") is None and is_launch_test(item.path):
            item.add_marker(pytest.mark.ros)
            item.add_marker(pytest.mark.slow)
    reason = ros_missing()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if item.get_closest_marker("ros") is not None:
            item.add_marker(skip)
