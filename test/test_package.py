"""package.xml declares what a rosdep-only install needs to run the tools and ``colcon test``.

Every module that the package, its launch files or its tests import is found on its syntax tree
and mapped to the rosdep key that provides it; the key must be declared (an exec_depend for the
package, an exec_depend or a test_depend for the tests). Keys rosdistro does not define come from
the repository's rosdep.yaml, which must define them. A new import without a key here fails with
its name.
"""

from __future__ import annotations

import ast
import configparser
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml
from catkin_pkg.package import parse_package

ROOT = Path(__file__).resolve().parents[1]

#: import name -> rosdep key (None: optional, the code runs without it and says so)
ROSDEP_KEYS = {
    "numpy": "python3-numpy", "scipy": "python3-scipy", "yaml": "python3-yaml", "matplotlib": "python3-matplotlib",
    "rosbags": "python3-rosbags-pip", "mcap": "python3-mcap-pip", "mcap_ros2": "python3-mcap-ros2-support-pip",
    "pytest": "python3-pytest", "hypothesis": "python3-hypothesis", "pinocchio": "pinocchio",
    "rich": None,  # cli.progress draws its table with rich when installed, plain lines otherwise
    "casadi": "python3-casadi-pip",  # method dmocc only (ocp/dmocc.py imports it when a DMOCC solve runs)
    "catkin_pkg": "python3-catkin-pkg",
    "threadpoolctl": "python3-threadpoolctl-pip",  # ocp/blas_threads.py (the optimizer runs without it)
}
#: ROS packages are their own keys
ROS_PACKAGES = ("rclpy", "launch", "launch_ros", "launch_testing", "launch_testing_ros", "ament_index_python",
                "marionette_interfaces", "rcl_interfaces", "builtin_interfaces", "rosgraph_msgs", "action_msgs",
                "domain_coordinator")
LOCAL = {"marionette_control", "benchmarks"}


def imported_roots(*dirs: Path) -> set:
    roots = set()
    for d in dirs:
        for path in d.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.Import):
                    roots.update(a.name.split(".")[0] for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    roots.add(node.module.split(".")[0])
    tests = {p.stem for p in (ROOT / "test").glob("*.py")}   # the suite's own modules (shared fixtures, helpers)
    return {r for r in roots if r not in sys.stdlib_module_names and r not in LOCAL and r not in tests}


def key_of(module: str):
    if module in ROSDEP_KEYS:
        return ROSDEP_KEYS[module]
    if module in ROS_PACKAGES or module.endswith(("_msgs", "_srvs")):
        return module
    raise AssertionError(f"import '{module}' has no rosdep key in test/test_package.py: declare it in package.xml "
                         "and map it here")


def declared(kind: str) -> set:
    return {e.text.strip() for e in ET.parse(ROOT / "package.xml").getroot().iter(kind)}


def test_package_imports_are_exec_depends():
    exec_depends = declared("exec_depend")
    missing = {m: key_of(m) for m in imported_roots(ROOT / "marionette_control", ROOT / "launch")
               if key_of(m) is not None and key_of(m) not in exec_depends}
    assert not missing, f"package.xml lacks exec_depend(s): {missing}"


def test_test_imports_are_declared():
    depends = declared("exec_depend") | declared("test_depend")
    missing = {m: key_of(m) for m in imported_roots(ROOT / "test")
               if key_of(m) is not None and key_of(m) not in depends}
    assert not missing, f"package.xml lacks test_depend(s): {missing}"


def test_pip_keys_are_defined_in_the_repositorys_rosdep_source():
    keys = yaml.safe_load((ROOT / "rosdep.yaml").read_text())
    for key in sorted((declared("exec_depend") | declared("test_depend"))):
        if key.endswith("-pip"):
            assert key in keys, f"{key} is declared in package.xml but not defined in rosdep.yaml"
            for platform in ("debian", "ubuntu"):
                assert keys[key][platform]["pip"]["packages"], (key, platform)
    requirements = "".join((ROOT / "requirements" / f).read_text() for f in ("core.txt", "test.txt", "dmocc.txt"))
    for key, spec in keys.items():
        for package in spec["ubuntu"]["pip"]["packages"]:
            assert package.replace(" ", "") in requirements.replace(" ", ""), (
                f"{key}: {package} is not the version range of requirements/ (one pin for both set-ups)")


def exec_depends_in(environment: dict) -> set:
    """The exec_depend keys rosdep installs in ``environment`` (the conditions evaluated as it does)."""
    package = parse_package(ROOT / "package.xml")
    package.evaluate_conditions(environment)
    return {d.name for d in package.exec_depends if d.evaluated_condition}


def test_rviz_is_optional_and_ros2_launch_is_declared():
    """A headless robot computer (MARIONETTE_HEADLESS=true) gets no rviz2 and so no Qt; every set-up gets ros2launch,
    which runs the launch files."""
    default, headless = exec_depends_in({}), exec_depends_in({"MARIONETTE_HEADLESS": "true"})
    assert "rviz2" in default and "rviz2" not in headless
    assert default - headless == {"rviz2"} and "ros2launch" in headless


def test_console_scripts_go_to_lib_for_ros2_run_and_are_linked_onto_the_venvs_path(tmp_path):
    """setup.cfg installs the console scripts where ``ros2 run`` finds them (lib/marionette_control) on a colcon
    install; scripts/link_tools.sh (run by ./run's set-up) links them into the venv's bin, dropping stale links."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    assert cfg["develop"]["script_dir"] == cfg["install"]["install_scripts"] == "$base/lib/marionette_control"
    venv = tmp_path / "venv"
    scripts = venv / "lib" / "marionette_control"
    scripts.mkdir(parents=True)
    (venv / "bin").mkdir()
    tool = scripts / "marionette-optimize"
    tool.write_text("#!/bin/sh\necho optimize\n")
    tool.chmod(0o755)
    os.symlink("../lib/marionette_control/marionette-gone", venv / "bin" / "marionette-gone")
    subprocess.run([str(ROOT / "scripts" / "link_tools.sh")], env={**os.environ, "VENV": str(venv)}, check=True)
    link = venv / "bin" / "marionette-optimize"
    assert os.readlink(link) == "../lib/marionette_control/marionette-optimize"
    assert subprocess.run([str(link)], capture_output=True, text=True, check=True).stdout == "optimize\n"
    assert not os.path.lexists(venv / "bin" / "marionette-gone")
