"""One node description for the launch files and the bringup (marionette_control/system_description.py).

* the node sets, their executables (setup.py entry points) and parameter files (config/, keyed
  ``/**``), the arguments (namespace, use_sim_time on both variants, per-node parameter files,
  autostart, robot_state_publisher, rviz) and what each one does to the nodes;
* the launch files call system_description and nothing else: checked on their syntax tree, and
  by running them against stand-ins for launch/launch_ros (this machine has no launch), which
  must yield the same nodes, namespaces, files, parameters, remappings and arguments as the
  bringup's commands; every launch argument is a bringup option;
* the RViz configuration and the ros2_control controllers file against the nodes and the URDF;
* the bringup's supervisor (signal forwarding, stop-all, output prefixes) with dummy children;
* the bringup across processes: the node set comes up on an isolated graph, in the root
  namespace and in a namespace, and SIGINT leaves no child behind;
* a real launch of launch/marionette_arm_sim.launch.py (namespaced) where launch, launch_ros and
  an ament install of the package exist (skipped otherwise, saying why).

Two complete namespaced systems on one graph: test/test_namespaced_systems.py.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest
import yaml

from marionette_control import system_description as sd
from marionette_control.cli import bringup
from marionette_control.resources import config_file
from ros_helpers import wait_for

ROOT = Path(__file__).resolve().parents[1]
LAUNCH_FILES = {"hardware": ROOT / "launch" / "marionette_arm.launch.py",
                "sim": ROOT / "launch" / "marionette_arm_sim.launch.py"}
ALL_NODES = ("marionette_simulator", "marionette_optimizer", "marionette_controller")
OWN_NODES = {"hardware": ALL_NODES[1:], "sim": ALL_NODES}


def console_scripts() -> dict:
    """{name: 'module:function'} of setup.py's console_scripts, read from its syntax tree."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "entry_points":
            scripts = ast.literal_eval(node.value)["console_scripts"]
            return dict(re.fullmatch(r"\s*(\S+)\s*=\s*(\S+)\s*", s).groups() for s in scripts)
    raise AssertionError("setup.py has no entry_points")


# ============================================================================ the description


def test_node_sets_of_the_variants():
    assert [n.name for n in sd.node_set("hardware")] == [*OWN_NODES["hardware"], "robot_state_publisher"]
    assert [n.name for n in sd.node_set("sim")] == [*ALL_NODES, "robot_state_publisher"]
    plain = {n.name: n for n in sd.node_set("sim")}
    assert all(not plain[name].parameters and plain[name].namespace == "" for name in ALL_NODES)
    rsp = plain["robot_state_publisher"]
    assert rsp.package == "robot_state_publisher" and rsp.entry_point is None
    assert rsp.parameters == {"robot_description": (ROOT / "config" / "marionette_arm.urdf").read_text()}
    timed = {n.name: n.parameters for n in sd.node_set("sim", use_sim_time=True, real_time_factor=4.0)}
    assert all(p["use_sim_time"] is True for p in timed.values())
    assert timed["marionette_simulator"] == {"use_sim_time": True, "publish_clock": True, "real_time_factor": 4.0}
    for kwargs, match in [(dict(variant="robot"), "unknown variant"),
                          (dict(variant="hardware", use_sim_time=True, real_time_factor=2.0), "sim variant only"),
                          (dict(variant="sim", real_time_factor=3.0), "needs use_sim_time"),
                          (dict(variant="sim", use_sim_time=True, real_time_factor=0.0), r"\[0.01, 100\]"),
                          (dict(variant="sim", namespace="2arms"), "namespace must be ROS name tokens"),
                          (dict(variant="sim", namespace="arm 1"), "namespace must be ROS name tokens"),
                          (dict(variant="sim", controller_params_file="/no/such.yaml"), "controller_params_file"),
                          (dict(variant="hardware", simulator_params_file=__file__), "sim variant only"),
                          (dict(variant="sim", log_level="loud"), "log level must be one of")]:
        variant = kwargs.pop("variant")
        with pytest.raises(sd.DescriptionError, match=match):
            sd.node_set(variant, **kwargs)


def test_hardware_variant_accepts_use_sim_time_for_an_external_simulator():
    """Gazebo with gz_ros2_control publishes /clock: every node follows it, no simulator of ours starts."""
    nodes = sd.node_set("hardware", use_sim_time=True, rviz=True)
    assert [n.name for n in nodes] == [*OWN_NODES["hardware"], "robot_state_publisher", "rviz2"]
    assert all(n.parameters["use_sim_time"] is True for n in nodes)
    assert not any("publish_clock" in n.parameters for n in nodes)


def test_namespace_reaches_every_node_the_tf_prefix_and_the_markers():
    nodes = {n.name: n for n in sd.node_set("sim", namespace="arm1", rviz=True)}
    assert {n.namespace for n in nodes.values()} == {"/arm1"}
    assert nodes["robot_state_publisher"].parameters["frame_prefix"] == "arm1/"
    assert nodes["marionette_simulator"].parameters == {"frame_id": "arm1/base_link"}
    assert nodes["rviz2"].arguments[-2:] == ("-f", "arm1/base_link")
    args = sd.ros_arguments(nodes["marionette_controller"])
    assert args[:5] == ["--ros-args", "-r", "__node:=marionette_controller", "-r", "__ns:=/arm1"]
    assert [sd.normalize_namespace(t) for t in ("arm1", "/arm1", "arm1/", "/a/b", "", "/")] == [
        "/arm1", "/arm1", "/arm1", "/a/b", "", ""]
    assert "-r" not in sd.ros_arguments(sd.node_set("sim")[0])[3:], "root namespace: no __ns remap"


def test_per_node_parameter_files_replace_the_package_files(tmp_path):
    mine = tmp_path / "my_controller.yaml"
    mine.write_text("/**:\n  ros__parameters: {autostart: true}\n")
    nodes = {n.name: n for n in sd.node_set("sim", controller_params_file=str(mine), autostart=True)}
    assert nodes["marionette_controller"].parameter_files == (str(mine),)
    assert sd.parameter_file_paths(nodes["marionette_controller"]) == [mine]
    assert nodes["marionette_controller"].parameters == {"autostart": True}
    assert nodes["marionette_optimizer"].parameter_files == ("optimizer.yaml",)


def test_every_executable_is_a_setup_py_entry_point_and_its_module_exists():
    scripts = console_scripts()
    for variant in sd.VARIANTS:
        for node in sd.node_set(variant, rviz=True):
            if node.entry_point is None:
                assert node.package != sd.PACKAGE, f"{node.name}: a node of this package needs an entry point"
                continue
            assert scripts.get(node.executable) == node.entry_point, (
                f"{node.name}: setup.py console_scripts has {node.executable} = {scripts.get(node.executable)}, "
                f"the description says {node.entry_point}")
            spec = importlib.util.find_spec(node.module)
            assert spec is not None and spec.origin and Path(spec.origin).is_file(), f"no module {node.module}"
            source = Path(spec.origin).read_text()
            assert re.search(rf"^def {node.function}\(", source, re.MULTILINE), f"{node.module} has no {node.function}()"
    assert scripts["marionette_bringup"] == "marionette_control.cli.bringup:main"


def test_other_packages_executables_are_declared_in_package_xml():
    """rosdep installs what the launch files start (robot_state_publisher, rviz2)."""
    import xml.etree.ElementTree as ET

    exec_depends = {e.text for e in ET.parse(ROOT / "package.xml").getroot().iter("exec_depend")}
    for node in sd.node_set("sim", rviz=True):
        assert node.package == sd.PACKAGE or node.package in exec_depends, node.package


@pytest.mark.parametrize("name", ALL_NODES)
def test_every_parameter_file_exists_and_is_keyed_for_any_namespace(name):
    node = next(n for n in sd.node_set("sim") if n.name == name)
    for path in sd.parameter_file_paths(node):
        data = yaml.safe_load(path.read_text())
        assert isinstance(data, dict) and list(data) == ["/**"], (
            f"{path}: top-level keys {sorted(data)}; '/**' so that a namespaced node reads it")
        assert set(data["/**"]) == {"ros__parameters"}, f"{path} must hold only ros__parameters"


def test_topic_names_are_relative():
    """Names a namespaced node resolves in its namespace: no parameter default starts with '/'."""
    from marionette_control.ocp import mpc_options, optimizer_options as optimizer
    from marionette_control.sim import simulator_options as simulator
    from marionette_control.tracking import controller_options as controller

    specs = controller.PARAMS + optimizer.parameter_specs() + simulator.PARAMETERS + mpc_options.PARAMS
    topics = {s.name: s.default for s in specs if s.name.endswith(("_topic", "controller_name"))}
    assert topics and not [f"{k} = {v}" for k, v in topics.items() if v.startswith("/")]
    controller_yaml = yaml.safe_load((ROOT / "config" / "controller.yaml").read_text())["/**"]["ros__parameters"]
    assert not [k for k, v in controller_yaml.items() if k.endswith("_topic") and v.startswith("/")]


def test_simulator_parameter_file_matches_the_declared_parameters():
    from marionette_control.sim.simulator_options import PARAMETERS, PROFILE_FIELDS

    text = (ROOT / "config" / "simulator.yaml").read_text()
    params = yaml.safe_load(text)["/**"]["ros__parameters"]
    declared = {p.name: p for p in PARAMETERS}
    # the hardware parameters take their defaults from `profile`: set in the file they would override every profile,
    # so the file documents them in comments instead
    assert set(params) == set(declared) - set(PROFILE_FIELDS), (
        "config/simulator.yaml lists every declared parameter but the profile's, nothing else")
    assert all(f"#   {name} " in text for name in PROFILE_FIELDS)
    for name, value in params.items():
        assert declared[name].validate(value) is None, (name, value)


# ============================================================================ RViz and ros2_control files


def test_rviz_configuration_shows_the_urdf_tf_and_the_simulators_markers():
    from marionette_control.model.urdf import parse_urdf
    from marionette_control.nodes.simulator import NODE_NAME

    rviz = yaml.safe_load((ROOT / "config" / sd.RVIZ_FILE).read_text())
    manager = rviz["Visualization Manager"]
    displays = {d["Class"]: d for d in manager["Displays"]}
    assert set(displays) >= {"rviz_default_plugins/RobotModel", "rviz_default_plugins/TF",
                             "rviz_default_plugins/MarkerArray"}
    model = displays["rviz_default_plugins/RobotModel"]
    assert model["Description Source"] == "Topic"
    assert model["Description Topic"]["Value"] == "robot_description", "robot_state_publisher's topic, relative"
    assert model["Description Topic"]["Durability Policy"] == "Transient Local"
    markers = displays["rviz_default_plugins/MarkerArray"]["Topic"]
    assert markers["Value"] == f"{NODE_NAME}/markers", "the simulator's ~/markers, relative"
    assert markers["Reliability Policy"] == "Reliable", "the simulator publishes reliably"
    root = parse_urdf(ROOT / "config" / sd.URDF_FILE).root
    assert manager["Global Options"]["Fixed Frame"] == root
    sim = yaml.safe_load((ROOT / "config" / "simulator.yaml").read_text())["/**"]["ros__parameters"]
    assert sim["frame_id"] == root, "the markers are drawn in the URDF's root frame"


def test_ros2_controllers_example_matches_the_controller_the_simulator_and_the_urdf():
    from marionette_control.model.urdf import parse_urdf
    from marionette_control.tracking.controller_options import PARAMS

    data = yaml.safe_load((ROOT / "config" / "ros2_controllers.yaml").read_text())
    manager = data["/**/controller_manager"]["ros__parameters"]
    assert manager["joint_state_broadcaster"]["type"] == "joint_state_broadcaster/JointStateBroadcaster"
    assert manager["forward_position_controller"]["type"] == "forward_command_controller/ForwardCommandController"
    forward = data["/**/forward_position_controller"]["ros__parameters"]
    assert forward["interface_name"] == "position"
    controller = yaml.safe_load((ROOT / "config" / "controller.yaml").read_text())["/**"]["ros__parameters"]
    simulator = yaml.safe_load((ROOT / "config" / "simulator.yaml").read_text())["/**"]["ros__parameters"]
    assert forward["joints"] == controller["command_joints"] == simulator["command_joints"]
    assert controller["command_topic"] == f"{simulator['controller_name']}/commands" == (
        "forward_position_controller/commands"), "the controller's commands reach the forward position controller"
    assert next(p.default for p in PARAMS if p.name == "command_topic") == controller["command_topic"]
    robot = parse_urdf(ROOT / "config" / sd.URDF_FILE)
    assert all(robot.joint(j).type == "prismatic" for j in forward["joints"])
    assert manager["update_rate"] * simulator["dt"] == pytest.approx(1.0), "one update per controller step"


def test_parameter_values_are_formatted_as_ros_yaml():
    f = sd.format_parameter_value
    assert [f(True), f(2), f(1.0), f("a'b"), f([1.0, 2.5]), f(["x", "y"])] == [
        "true", "2", "1.0", "'a''b'", "[1.0, 2.5]", "['x', 'y']"]
    assert yaml.safe_load(f([0.1, "n"])) == [0.1, "n"]


# ============================================================================ launch files


@pytest.mark.parametrize("variant", sd.VARIANTS)
def test_launch_files_build_their_nodes_from_system_description(variant):
    """Syntax tree: generate_launch_description returns system_description.generate_launch_description(VARIANT)."""
    path = LAUNCH_FILES[variant]
    tree = ast.parse(path.read_text())
    imports = [n for n in tree.body if isinstance(n, ast.ImportFrom)]
    assert any(n.module == "marionette_control" and any(a.name == "system_description" for a in n.names)
               for n in imports), f"{path.name} must import marionette_control.system_description"
    consts = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
              for t in n.targets if isinstance(t, ast.Name) and isinstance(n.value, ast.Constant)}
    assert consts.get("VARIANT") == variant
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "generate_launch_description")
    ret = fn.body[-1]
    assert isinstance(ret, ast.Return) and isinstance(ret.value, ast.Call)
    assert ast.unparse(ret.value.func) == "system_description.generate_launch_description"
    assert [ast.unparse(a) for a in ret.value.args] == ["VARIANT"]
    calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert calls == {"system_description.generate_launch_description"}, (
        f"{path.name} must not build nodes itself: calls {sorted(calls)}")


class _Recorder:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


class _LaunchConfiguration:
    def __init__(self, name):
        self.name = name

    def perform(self, context):
        return context.launch_configurations[self.name]


@pytest.fixture
def stub_launch(monkeypatch, tmp_path):
    """Stand-ins for launch, launch_ros and ament_index_python (this machine has none of the first two).

    The ament index knows this package (share/config) and robot_state_publisher and rviz2 (executables under
    lib/<package>/), so the bringup finds them as on a ROS install."""
    share = tmp_path / "share"
    (share / "config").mkdir(parents=True)
    for f in ("simulator.yaml", "optimizer.yaml", "controller.yaml"):
        (share / "config" / f).write_text("{}\n")
    prefixes = {}
    for package in ("robot_state_publisher", "rviz2"):
        exe = tmp_path / package / "lib" / package / package
        exe.parent.mkdir(parents=True)
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
        prefixes[package] = str(tmp_path / package)

    def prefix(package):
        if package not in prefixes:
            raise LookupError(package)
        return prefixes[package]

    mods = {
        "launch": dict(LaunchDescription=type("LaunchDescription", (_Recorder,), {})),
        "launch.actions": dict(DeclareLaunchArgument=type("DeclareLaunchArgument", (_Recorder,), {}),
                               OpaqueFunction=type("OpaqueFunction", (_Recorder,), {})),
        "launch.substitutions": dict(LaunchConfiguration=_LaunchConfiguration),
        "launch_ros": {},
        "launch_ros.actions": dict(Node=type("Node", (_Recorder,), {})),
        "ament_index_python": {},
        "ament_index_python.packages": dict(get_package_share_directory=lambda pkg: str(share),
                                            get_package_prefix=prefix),
    }
    for name, attrs in mods.items():
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, m)
    return share, prefixes


def _run_launch_file(variant, arguments):
    spec = importlib.util.spec_from_file_location(f"launch_file_{variant}", LAUNCH_FILES[variant])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ld = module.generate_launch_description()
    actions = ld.args[0]
    declared = {a.args[0]: a.kwargs["default_value"] for a in actions if type(a).__name__ == "DeclareLaunchArgument"}
    opaque = [a for a in actions if type(a).__name__ == "OpaqueFunction"]
    assert len(opaque) == 1
    context = types.SimpleNamespace(launch_configurations={**declared, **arguments})
    return declared, opaque[0].kwargs["function"](context)


def _bringup_argv(variant, arguments):
    """The bringup options that mirror launch arguments {name: text}."""
    argv = [f"--{variant}"]
    by_name = {a.name: a for a in sd.ARGUMENTS}
    for name, text in arguments.items():
        a = by_name[name]
        option = "--" + name.replace("_", "-")
        if a.kind == "bool":
            argv.append(option if sd.parse_bool(text, name) else "--no-" + option[2:])
        else:
            argv += [option, text]
    return argv


@pytest.mark.parametrize("variant, arguments", [
    ("hardware", {}),
    ("sim", {}),
    ("sim", {"use_sim_time": "true", "real_time_factor": "5.0", "log_level": "debug"}),
    ("hardware", {"use_sim_time": "true", "namespace": "arm1", "rviz": "true", "autostart": "true"}),
    ("sim", {"namespace": "arm2", "robot_state_publisher": "false", "controller_params_file": "<tmp>/mine.yaml"}),
])
def test_launch_files_and_bringup_start_the_same_nodes(stub_launch, tmp_path, variant, arguments):
    _, prefixes = stub_launch
    (tmp_path / "mine.yaml").write_text("/**:\n  ros__parameters: {autostart: true}\n")
    arguments = {k: v.replace("<tmp>", str(tmp_path)) for k, v in arguments.items()}
    declared, nodes = _run_launch_file(variant, arguments)
    assert declared == {a.name: a.default for a in sd.arguments(variant)}
    expected = sd.node_set(variant, **sd.options_from_launch_arguments(variant, arguments))
    assert [n.kwargs["name"] for n in nodes] == [e.name for e in expected]
    for launched, node in zip(nodes, expected):
        kw = launched.kwargs
        assert (kw["package"], kw["executable"], kw["namespace"]) == (node.package, node.executable,
                                                                      node.namespace or "/")
        files = [f for f in kw["parameters"] if isinstance(f, str)]
        # one lookup for the launch files and the bringup (marionette_control.resources): the same files
        assert files == [str(config_file(f)) for f in node.parameter_files]
        inline = [p for p in kw["parameters"] if isinstance(p, dict)]
        assert inline == ([dict(node.parameters)] if node.parameters else [])
        assert kw["remappings"] == list(node.remappings)
        assert kw["arguments"] == [*node.arguments, "--ros-args", "--log-level", arguments.get("log_level", "info")]

    # the bringup's commands for the same options: the same nodes, namespaces, files, parameters and arguments
    plan = bringup.child_specs(bringup.build_parser().parse_args(_bringup_argv(variant, arguments)))
    assert not plan.skipped
    assert [s.name for s in plan.specs] == [n.kwargs["name"] for n in nodes]
    for spec, node in zip(plan.specs, expected):
        args = spec.argv
        if node.entry_point is None:
            assert args[0] == str(Path(prefixes[node.package]) / "lib" / node.package / node.executable)
            assert args[1:args.index("--ros-args")] == list(node.arguments)
        else:
            assert args[:2] == [sys.executable, "-c"] and f"from {node.module} import {node.function}" in args[2]
        ros = args[args.index("--ros-args"):]
        assert ros == sd.ros_arguments(node), "bringup passes exactly the description's arguments"
        files = [ros[i + 1] for i, a in enumerate(ros) if a == "--params-file"]
        assert files == [str(config_file(f)) for f in node.parameter_files]
        inline = [ros[i + 1] for i, a in enumerate(ros) if a == "-p"]
        assert inline == [f"{k}:={sd.format_parameter_value(v)}" for k, v in node.parameters.items()]


def test_every_launch_argument_is_a_bringup_option():
    parser = bringup.build_parser()
    options = {o for action in parser._actions for o in action.option_strings}
    for variant in sd.VARIANTS:
        for a in sd.arguments(variant):
            assert "--" + a.name.replace("_", "-") in options, a.name
            parsed = parser.parse_args([f"--{variant}"])
            assert getattr(parsed, a.name) == sd.parse_argument(a, a.default), f"{a.name}: the same default"


def test_bringup_leaves_out_what_is_not_installed_and_refuses_rviz_then(monkeypatch):
    """On a PyPI-only machine (no robot_state_publisher, no rviz2 in an ament index)."""
    monkeypatch.setattr(sd, "find_executable", lambda node: None)
    plan = bringup.child_specs(bringup.build_parser().parse_args(["--sim"]))
    assert [s.name for s in plan.specs] == list(ALL_NODES)
    assert "robot_state_publisher is not installed" in plan.skipped["robot_state_publisher"]
    with pytest.raises(sd.DescriptionError, match="--rviz: rviz2 is not installed"):
        bringup.child_specs(bringup.build_parser().parse_args(["--sim", "--rviz"]))


def test_bringup_overrides_apply_to_the_named_node_only(tmp_path):
    extra = tmp_path / "extra.yaml"
    extra.write_text("/**:\n  ros__parameters: {}\n")
    args = bringup.build_parser().parse_args([
        "--sim", "-p", "marionette_simulator:noise_std:=[0.01]", "-r", "marionette_controller:joint_states:=/js",
        "--params-file", str(extra), "--log-level", "warn", "--only", "marionette_simulator", "marionette_controller"])
    specs = {s.name: s.argv for s in bringup.child_specs(args).specs}
    assert set(specs) == {"marionette_simulator", "marionette_controller"}
    sim, ctl = specs["marionette_simulator"], specs["marionette_controller"]
    assert "noise_std:=[0.01]" in sim and "noise_std:=[0.01]" not in ctl
    assert "joint_states:=/js" in ctl and "joint_states:=/js" not in sim
    assert all(str(extra) in a and a[a.index("--log-level") + 1] == "warn" for a in (sim, ctl))
    for bad in (["-p", "marionette_nobody:x:=1"], ["--only", "marionette_nobody"], ["-p", "missing_separator"],
                ["--hardware", "--real-time-factor", "2"], ["--hardware", "--simulator-params-file", str(extra)],
                ["--params-file", str(tmp_path / "none.yaml")], ["--namespace", "9lives"],
                ["--controller-params-file", str(tmp_path / "none.yaml")]):
        with pytest.raises(SystemExit) as exc:
            bringup.main(["--dry-run"] + bad)
        assert exc.value.code == 2, bad


# ============================================================================ supervisor


SUPERVISOR = textwrap.dedent("""
    import sys
    from marionette_control.cli.bringup import ChildSpec, Supervisor
    py = sys.executable
    def child(name, body):
        return ChildSpec(name, [py, "-c", "import signal, sys, time\\n" + body])
    sleeper = ("print('up', flush=True)\\n"
               "try:\\n    time.sleep(60)\\nexcept KeyboardInterrupt:\\n    print('stopped', flush=True)")
    kind = sys.argv[1]
    children = [child("a", sleeper), child("b", sleeper)]
    if kind == "dies":
        children.append(child("c", "print('failing', flush=True); time.sleep(0.5); sys.exit(3)"))
    if kind == "stubborn":
        children.append(child("c", "signal.signal(signal.SIGINT, signal.SIG_IGN)\\nprint('up', flush=True)\\n"
                                   "time.sleep(60)"))
    sys.exit(Supervisor(children, stop_timeout=float(sys.argv[2])).run())
""")


def _child_pids(output: str) -> dict:
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"\[bringup\] started (\S+) \(pid (\d+)\)", output)}


def _alive(pid: int) -> bool:
    """True while the process exists and is not a zombie (an orphan's exit status may wait for init)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _supervise(kind: str, stop_timeout: float = 5.0, interrupt_after: float | None = None):
    proc = subprocess.Popen([sys.executable, "-c", SUPERVISOR, kind, str(stop_timeout)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        if interrupt_after is not None:
            end = time.monotonic() + 10.0
            time.sleep(interrupt_after)
            os.killpg(proc.pid, signal.SIGINT)  # as a terminal would: the supervisor's group only
            while proc.poll() is None and time.monotonic() < end:
                time.sleep(0.05)
        out, _ = proc.communicate(timeout=20.0)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, out


def test_supervisor_forwards_sigint_prefixes_output_and_leaves_no_child():
    code, out = _supervise("plain", interrupt_after=1.5)
    pids = _child_pids(out)
    assert set(pids) == {"a", "b"}, out
    assert "[a] up" in out and "[b] up" in out and "[a] stopped" in out and "[b] stopped" in out, out
    assert code == 0, out
    assert not [n for n, p in pids.items() if _alive(p)]


def test_supervisor_stops_everyone_when_a_child_dies():
    code, out = _supervise("dies")
    pids = _child_pids(out)
    assert "[c] failing" in out and "c (pid" in out and "exited with status 3" in out, out
    assert "[a] stopped" in out and "[b] stopped" in out, out
    assert code == 3
    assert not [n for n, p in pids.items() if _alive(p)]


def test_supervisor_escalates_to_sigterm_for_a_child_that_ignores_sigint():
    code, out = _supervise("stubborn", stop_timeout=0.5, interrupt_after=1.5)
    assert "sending SIGTERM" in out and "c (pid" in out and "signal SIGTERM" in out, out
    assert "sending SIGKILL" not in out, "SIGTERM after stop_timeout was enough: the escalation went step by step"
    assert out.index("stopping") < out.index("sending SIGTERM") < out.index("exited with signal SIGTERM")
    assert code == 1
    assert not [n for n, p in _child_pids(out).items() if _alive(p)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux only")
def test_children_die_with_a_killed_supervisor():
    proc = subprocess.Popen([sys.executable, "-c", SUPERVISOR, "plain", "5"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines = []
    try:
        while len(_child_pids("".join(lines))) < 2:
            line = proc.stdout.readline()
            assert line, "".join(lines)
            lines.append(line)
        pids = _child_pids("".join(lines))
        proc.kill()  # SIGKILL: no handler runs; the kernel sends the children SIGTERM
        proc.wait()
        assert wait_for(lambda: not any(_alive(p) for p in pids.values()), 5.0), pids
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ============================================================================ bringup across processes

from ros_helpers import isolated_ros, ros_env, start_node, stop  # noqa: E402


def _bringup_and_check(tmp_path, args, expected_nodes, namespace=""):
    """Starts bringup, waits until every node of ``expected_nodes`` is on the graph in ``namespace`` and joint states
    arrive on ``<namespace>/joint_states``, then stops it with SIGINT; returns bringup's output."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState

    env = ros_env()
    log = tmp_path / "bringup.log"
    proc = start_node("marionette_control.cli.bringup", args, env, log)
    try:
        with isolated_ros(int(env["ROS_DOMAIN_ID"])):
            context = rclpy.context.Context()
            rclpy.init(context=context)
            node = rclpy.create_node("bringup_probe", context=context)
            try:
                got = []
                node.create_subscription(JointState, f"{namespace}/joint_states", got.append, 10)
                ex = SingleThreadedExecutor(context=context)
                ex.add_node(node)
                names = lambda: set(node.get_node_names_and_namespaces())  # noqa: E731
                wanted = {(n, namespace or "/") for n in expected_nodes}
                # the children's own start-up lines too: a concurrent test on the same domain id
                # must not make this pass early
                up = lambda: all(f"[{n}] [INFO]" in log.read_text() for n in expected_nodes)  # noqa: E731
                ok = wait_for(lambda: wanted <= names() and got and up(), 30.0,
                              spin=lambda: ex.spin_once(timeout_sec=0.05))
                assert ok and proc.poll() is None, f"nodes {sorted(names())}, {len(got)} joint states\n{log.read_text()}"
                ex.shutdown()
            finally:
                node.destroy_node()
                context.try_shutdown()
    finally:
        code = stop(proc)
    out = log.read_text()
    pids = _child_pids(out)
    assert set(pids) == set(expected_nodes), out
    assert code == 0, out
    assert not [n for n, p in pids.items() if _alive(p)], out
    assert "[bringup] all nodes stopped" in out
    return out


@pytest.mark.ros
def test_bringup_simulator_alone_comes_up_and_stops_on_sigint(tmp_path):
    out = _bringup_and_check(tmp_path, ["--sim", "--only", "marionette_simulator"], ["marionette_simulator"])
    assert "[marionette_simulator] [INFO]" in out


@pytest.mark.ros
@pytest.mark.slow
def test_bringup_starts_the_sim_node_set_and_stops_every_child_on_sigint(tmp_path):
    out = _bringup_and_check(tmp_path, ["--sim", "--sim-time", "--real-time-factor", "2.0"], list(ALL_NODES))
    for name in ALL_NODES:
        assert f"[{name}]" in out


@pytest.mark.ros
@pytest.mark.slow
def test_bringup_in_a_namespace_puts_every_node_and_topic_there(tmp_path):
    out = _bringup_and_check(tmp_path, ["--sim", "--namespace", "arm1", "--autostart"], list(ALL_NODES),
                             namespace="/arm1")
    assert "in namespace /arm1" in out


# ============================================================================ real launch (ROS installs)


def _launch_unavailable() -> str | None:
    try:
        import launch
        import launch_ros  # noqa: F401
    except ImportError as e:
        return f"launch/launch_ros not installed ({e.name}): a PyPI-only machine has no ros2 launch"
    if not hasattr(launch, "LaunchService"):
        return "the installed 'launch' is not ROS 2's launch (the PyPI package of that name is unrelated)"
    try:
        from ament_index_python.packages import get_package_share_directory

        get_package_share_directory("marionette_control")
    except Exception as e:
        return f"marionette_control is not installed in an ament index (colcon build; source install/setup.bash): {e}"
    return None


LAUNCH_RUNNER = textwrap.dedent("""
    import sys
    from launch import LaunchDescription, LaunchService
    from launch.actions import IncludeLaunchDescription
    from launch.launch_description_sources import PythonLaunchDescriptionSource
    ls = LaunchService()
    ls.include_launch_description(IncludeLaunchDescription(
        PythonLaunchDescriptionSource(sys.argv[1]),
        launch_arguments={"use_sim_time": "true", "namespace": "arm1"}.items()))
    sys.exit(ls.run())
""")


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.skipif(_launch_unavailable() is not None, reason=str(_launch_unavailable()))
def test_sim_launch_file_starts_the_node_set_in_its_namespace(tmp_path):
    import rclpy
    from ament_index_python.packages import get_package_share_directory
    from rclpy.executors import SingleThreadedExecutor
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import JointState

    launch_file = Path(get_package_share_directory("marionette_control")) / "launch" / "marionette_arm_sim.launch.py"
    env = ros_env()
    log = tmp_path / "launch.log"
    proc = subprocess.Popen([sys.executable, "-c", LAUNCH_RUNNER, str(launch_file)], env=env,
                            stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        with isolated_ros(int(env["ROS_DOMAIN_ID"])):
            context = rclpy.context.Context()
            rclpy.init(context=context)
            node = rclpy.create_node("launch_probe", context=context)
            try:
                got, clock = [], []
                node.create_subscription(JointState, "/arm1/joint_states", got.append, 10)
                node.create_subscription(Clock, "/clock", clock.append, 10)
                ex = SingleThreadedExecutor(context=context)
                ex.add_node(node)
                names = lambda: set(node.get_node_names_and_namespaces())  # noqa: E731
                wanted = {(n, "/arm1") for n in (*ALL_NODES, "robot_state_publisher")}
                ok = wait_for(lambda: wanted <= names() and got and clock, 30.0,
                              spin=lambda: ex.spin_once(timeout_sec=0.05))
                assert ok, f"nodes {sorted(names())}\n{log.read_text()}"
                ex.shutdown()
            finally:
                node.destroy_node()
                context.try_shutdown()
    finally:
        assert stop(proc) == 0, log.read_text()
