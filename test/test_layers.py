"""The package's layers (docs/architecture.md, "Layers"): no upward import, no cycle, no package module or
required dependency imported inside a function, nothing of ROS below the nodes, and the offline tools run where
importing rclpy fails.

Every module of ``marionette_control`` is read as a syntax tree, so an import inside a function counts as much
as one at the top: the layering holds for what the code can import, not only for what it imports at start-up.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "marionette_control"

#: the layers, lowest first; a module may import its own layer and the ones before it (docs/architecture.md)
LAYERS = [
    ("core", ["_core"]),
    ("shared", ["__init__", "validation", "parameters", "resources", "trajectory", "save_path", "latest_worker"]),
    ("mechanics", ["model"]),
    ("lq", ["lq"]),
    ("tracking", ["tracking"]),
    ("ocp", ["ocp"]),
    ("stand-in", ["sim"]),
    ("bags", ["bags"]),
    ("identification", ["identification"]),
    ("ros", ["system_description", "nodes"]),
    ("tools", ["cli", "study"]),
]
LAYER_OF = {name: i for i, (_, names) in enumerate(LAYERS) for name in names}
#: the ROS tools among the tools: they may import nodes/ (the rest of bags/ and cli/ may not)
ROS_TOOLS = {"cli.bringup", "cli.bag_record", "cli.bag_play", "cli.main_job"}
#: top-level packages of ROS (Python side); nothing below nodes/ imports them
ROS = {"rclpy", "rcl_interfaces", "rosidl_runtime_py", "launch", "launch_ros", "launch_testing", "ament_index_python",
       "marionette_interfaces", "builtin_interfaces", "rosgraph_msgs", "action_msgs", "unique_identifier_msgs"}
#: third-party packages a function may import where it is the only user (optional dependencies; the standard
#: library may be imported anywhere)
OPTIONAL = {"casadi", "matplotlib", "rich", "launch", "launch_ros", "launch_testing", "launch_testing_ros", "rclpy",
            "ament_index_python", "pinocchio", "mpl_toolkits"}


def is_ros(root: str) -> bool:
    return root in ROS or root.endswith(("_msgs", "_srvs"))


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def layer(module: str) -> int:
    head = module.split(".")[0]
    if head not in LAYER_OF:
        raise AssertionError(f"marionette_control.{module} is in no layer: add its folder to LAYERS here and to "
                             "docs/architecture.md")
    return LAYER_OF[head]


def imports(path: Path):
    """(imported module, line, inside a function?) of every import of ``path``; package-internal ones without the
    ``marionette_control.`` prefix."""
    tree = ast.parse(path.read_text(), filename=str(path))
    here = module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for a in child.names:
                    found.append((a.name, child.lineno, in_function))
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package[:len(package) - child.level + 1]
                    mod = "marionette_control." + ".".join(base + ([child.module] if child.module else []))
                else:
                    mod = child.module
                if mod in ("marionette_control", "marionette_control.model") or (
                        mod.startswith("marionette_control.") and not child.module):
                    for a in child.names:   # "from marionette_control import _core" names modules
                        found.append((f"{mod}.{a.name}", child.lineno, in_function))
                else:
                    found.append((mod, child.lineno, in_function))
            visit(child, nested)

    visit(tree, False)
    out = []
    for mod, line, in_function in found:
        if mod == "marionette_control" or mod.startswith("marionette_control."):
            mod = mod.removeprefix("marionette_control").lstrip(".") or "__init__"
            # "from marionette_control.model import library": a module, not a name
            if not (PACKAGE / Path(*mod.split("."))).with_suffix(".py").exists() and \
                    not (PACKAGE / Path(*mod.split("."))).is_dir():
                mod = mod.rsplit(".", 1)[0]
            out.append(("internal", mod, line, in_function))
        else:
            out.append(("external", mod, line, in_function))
    return out


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def edges():
    for name, path in MODULES.items():
        for kind, mod, line, in_function in imports(path):
            yield name, path, kind, mod, line, in_function


def test_every_module_is_in_a_layer():
    for name in MODULES:
        layer(name)


def test_no_module_imports_a_higher_layer():
    upward = [f"{p.relative_to(ROOT)}:{line}: {name} ({LAYERS[layer(name)][0]}) imports {mod} "
              f"({LAYERS[layer(mod)][0]})"
              for name, p, kind, mod, line, _ in edges() if kind == "internal" and layer(mod) > layer(name)]
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_only_ros_tools_import_nodes():
    bad = [f"{p.relative_to(ROOT)}:{line}: {name} imports {mod}" for name, p, kind, mod, line, _ in edges()
           if kind == "internal" and mod.split(".")[0] == "nodes" and layer(name) == LAYER_OF["cli"]
           and not any(name == t or name.startswith(t + ".") for t in ROS_TOOLS)]
    assert not bad, "tools that must run without ROS import nodes/:\n" + "\n".join(bad)


def test_nothing_below_the_nodes_imports_ros():
    bad = [f"{p.relative_to(ROOT)}:{line}: {name} imports {mod}" for name, p, kind, mod, line, _ in edges()
           if kind == "external" and is_ros(mod.split(".")[0]) and layer(name) < LAYER_OF["nodes"]]
    assert not bad, "ROS imports below nodes/:\n" + "\n".join(bad)


def test_no_import_inside_a_function_but_optional_dependencies():
    hidden = [f"{p.relative_to(ROOT)}:{line}: {mod}" for name, p, kind, mod, line, in_function in edges()
              if in_function and (kind == "internal" or not (mod.split(".")[0] in OPTIONAL
                                                            or mod.split(".")[0] in sys.stdlib_module_names))]
    assert not hidden, ("imports inside functions (move them to the top; a cycle they dodged is a layering "
                        "error):\n" + "\n".join(hidden))


def test_no_import_cycle():
    graph = {name: set() for name in MODULES}
    for name, _, kind, mod, _, _ in edges():
        if kind == "internal" and mod in graph and mod != name:
            graph[name].add(mod)
    # Tarjan's strongly connected components
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            strong(v)
    assert not cycles, f"import cycles: {cycles}"


#: a sitecustomize that makes every ROS import fail, as on a machine without ROS
NO_ROS = """
import importlib.abc, sys
class _NoRos(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        root = name.split(".")[0]
        if root in {roots!r} or root.endswith(("_msgs", "_srvs")):
            raise ImportError(f"{{name}}: ROS is not installed here")
        return None
sys.meta_path.insert(0, _NoRos())
"""


@pytest.fixture
def no_ros_env(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(NO_ROS.format(roots=sorted(ROS)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", ""), str(ROOT)]).strip(os.pathsep)
    return env


def test_the_blocker_blocks(no_ros_env):
    r = subprocess.run([sys.executable, "-c", "import rclpy"], env=no_ros_env, capture_output=True, text=True)
    assert r.returncode != 0 and "ROS is not installed here" in r.stderr


@pytest.mark.parametrize("tool", ["marionette_control.bags.replay", "marionette_control.bags.summary",
                                  "marionette_control.cli.bag_replay", "marionette_control.cli.bag_summary",
                                  "marionette_control.cli.track_offline", "marionette_control.cli.optimize",
                                  "marionette_control.cli.simulate", "marionette_control.sim.offline_loop"])
def test_offline_tools_import_without_ros(no_ros_env, tool):
    r = subprocess.run([sys.executable, "-c", f"import {tool}"], env=no_ros_env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr


def test_golden_bag_replays_without_ros(no_ros_env, tmp_path):
    """The recorded commands of the golden bag come back from a replay in a process that cannot import rclpy."""
    bag = ROOT / "test" / "data" / "golden" / "bag"
    r = subprocess.run([sys.executable, "-m", "marionette_control.cli.bag_replay", str(bag),
                        "--trajectory", str(ROOT / "test" / "data" / "golden" / "trajectory.npz"), "--compare"],
                       env=no_ros_env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
