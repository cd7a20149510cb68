"""YAML model files: trees, strings, kinematic configurations, springs, damping, force inputs.

A model file is a YAML mapping; every key is checked (unknown keys, wrong types, non-finite or
out-of-range numbers, missing parents, unknown frames and configurations, duplicate names and
duplicate mapping keys are errors naming the file and the key, e.g.
``arm.yaml: frames[2].parent: unknown frame 'uper_arm'``). The format (``docs/models.md`` has
a worked example)::

    name: double_pendulum_on_a_string   # required; the model's name
    description: free text               # optional
    gravity: [0, 0, -9.81]               # optional, m/s^2 (default [0, 0, -9.81])
    forcing: symmetric                   # optional: the forcing discretization, symmetric (default:
                                         # f- = f+ = dt F / 2) or thesis (f- = dt F, f+ = 0)
    urdf:                                # optional: the tree (or part of it) from a URDF
      file: arm.urdf                     #   path relative to this file
      rename: {joint_a: config_a}        #   optional: URDF joint -> configuration name
      friction: ignore                   #   optional: ignore (default, warns) | refuse <dynamics friction>
    kinematic: [carriage]                # configurations that are prescribed (thesis §3.6)
    frames:                              # frames, parents before children
      - {name: link1, parent: world, transform: rx, config: theta1}   # driven primitive
      - {name: mass1, parent: link1, transform: tz, value: -1.0,      # constant primitive
         mass: 1.0, inertia: [0, 0, 0]}                              # mass at the origin,
                                                                      # principal inertias
      - {name: hook, parent: link1, translation: [0, 0.1, -0.9],     # constant SE(3) offset,
         rpy: [0, 0, 0]}                                              # R = Rz Ry Rx (URDF)
    strings:                             # distance constraints |p_from - p_to| = length
      - {name: string, from: hook, to: carriage, length: string_length,  # kinematic length
         min_tension: 0.5}                                                # N (default 0.5; optimizer
                                                                          # constraint T >= min_tension)
      - {name: rod, from: a, to: b, length: 0.5}                          # fixed length
    springs:                             # V = 1/2 k (|p1 - p2| - rest_length)^2
      - {name: s1, frame1: a, frame2: b, stiffness: 10.0, rest_length: 0.2}
    config_springs:                      # V = 1/2 k (q - neutral)^2
      - {name: s2, config: theta1, stiffness: 1.0, neutral: 0.0}
    damping: {theta1: 0.1, theta2: 0.1}  # F = -c qdot on dynamic configurations
    forces:                              # force inputs: F_config = u_input
      - {config: theta1, input: torque1}
    plane_constraints:                   # point_frame's origin on the plane through plane_frame
      - {name: floor, plane_frame: world, axis: z, point_frame: foot}     # normal to its axis
    hardware:                            # optional: /joint_states name -> configuration name
      joint_names: {shoulder_joint: shoulder}
    actuators:                           # optional: limits of kinematic configurations (a URDF joint's
      carriage: {min: -0.3, max: 0.9, max_velocity: 1.0, max_acceleration: 5.0}   # <limit> must agree)

A file may instead describe a variant of another one (e.g. the physical arm against the nominal
model the optimizer uses)::

    name: arm_as_built
    base: arm.yaml                       # every key of arm.yaml not given here is taken from it
    overrides:                           # physical parameters by name, replacing the base's
      masses:                            #   URDF links with an <inertial>, or frames with a mass
        forearm: {mass: 0.16, center_of_mass: [0, 0, -0.115], inertia: [8.6e-4, 8.6e-4, 1.8e-5]}
      placements:                        #   URDF links (their joint's origin) or constant frames
        hook: {translation: [0, 0.001, -0.202]}
      damping: {shoulder: 0.03}          #   total viscous damping of a dynamic configuration

Overrides change numbers only, never the structure (frames, configurations, constraints and
names stay those of the base), and every name they use must exist.

A string whose ``length`` names a configuration declares it kinematic (a string length has no
inertia). A URDF joint of that name (after ``urdf.rename``) is the string's length too, not a tree
joint: a prismatic joint to a massless leaf link, which the URDF carries so that every
``/joint_states`` name exists there (the winch of ``config/marionette_arm.urdf``); the model is the
same with or without it. Numbers may be written ``1e-3`` as well as ``1.0e-3``. Units are SI.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import yaml

from marionette_control import _core
from marionette_control.model.builder import DEFAULT_FORCING, FORCING_RULES, PRIMITIVES, SystemBuilder, rotation_rpy
from marionette_control.model.limits import ActuatorLimits, from_description
from marionette_control.resources import config_file
from marionette_control.model.urdf import (FRICTION_OPTIONS, Inertial, UrdfError, UrdfRobot, add_urdf, inertia_problem,
                                           parse_urdf, without_length_joint)


class ModelFileError(ValueError):
    """An invalid model file; the message is ``<file>: <key path>: <problem>``."""


# --------------------------------------------------------------------------------------------- YAML reading


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys and reads ``1e-3`` as a number.

    (PyYAML follows YAML 1.1, where ``1e-3`` without a dot is a string and a repeated key
    silently overwrites the first: both are mistakes nobody means in a model or motion file.)
    """


StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


def _construct_mapping(loader: StrictLoader, node: yaml.MappingNode, deep: bool = False):
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first on line {seen[key] + 1})", key_node.start_mark)
        seen[key] = key_node.start_mark.line
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


#: parsed files by (path, modification time, size): a model is often built many times from one file (the
#: calibration builds one per parameter change), and parsing is most of a build's time
_PARSED: dict[tuple, Any] = {}


def read_yaml(path: str | os.PathLike, error: type[ValueError] = ValueError) -> Any:
    """Reads a YAML file with :class:`StrictLoader`; errors name the file (and line). Returns a fresh copy of
    the parsed data: a file unchanged since it was last read (same modification time and size) is not parsed
    again."""
    path = os.fspath(path)
    try:
        st = os.stat(path)
        key = (os.path.abspath(path), st.st_mtime_ns, st.st_size)
        if key not in _PARSED:
            with open(path, encoding="utf-8") as f:
                _PARSED[key] = yaml.load(f, Loader=StrictLoader)
    except OSError as e:
        raise error(f"{path}: cannot read: {e}") from None
    except yaml.YAMLError as e:
        raise error(f"{path}: invalid YAML: {e}") from None
    return copy.deepcopy(_PARSED[key])


class Checker:
    """Type and range checks that name the file and the key path in their errors."""

    def __init__(self, path: str, error: type[ValueError] = ModelFileError):
        self.path = path
        self.error = error

    def fail(self, key: str, problem: str):
        raise self.error(f"{self.path}: {key}: {problem}" if key else f"{self.path}: {problem}")

    def mapping(self, value, key: str, required: tuple = (), optional: tuple = ()) -> dict:
        if not isinstance(value, dict):
            self.fail(key, f"expected a mapping, got {type(value).__name__}")
        allowed = set(required) | set(optional)
        for k in value:
            if k not in allowed:
                self.fail(_join(key, k), f"unknown key (allowed: {', '.join(sorted(map(str, allowed)))})")
        for k in required:
            if k not in value:
                self.fail(key, f"missing key '{k}'")
        return value

    def table(self, value, key: str) -> dict:
        """A mapping with free keys (names): only its type is checked here."""
        if not isinstance(value, dict):
            self.fail(key, f"expected a mapping, got {type(value).__name__}")
        return value

    def list(self, value, key: str) -> list:
        if not isinstance(value, list):
            self.fail(key, f"expected a list, got {type(value).__name__}")
        return value

    def name(self, value, key: str) -> str:
        if not isinstance(value, str) or not value.strip():
            self.fail(key, f"expected a non-empty name, got {value!r}")
        return value

    def number(self, value, key: str, minimum: float | None = None, positive: bool = False) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(key, f"expected a number, got {value!r}")
        x = float(value)
        if not math.isfinite(x):
            self.fail(key, f"expected a finite number, got {value!r}")
        if positive and x <= 0:
            self.fail(key, f"must be > 0, got {x}")
        if minimum is not None and x < minimum:
            self.fail(key, f"must be >= {minimum}, got {x}")
        return x

    def vector(self, value, key: str, n: int, minimum: float | None = None) -> np.ndarray:
        if not isinstance(value, list) or len(value) != n:
            self.fail(key, f"expected a list of {n} numbers, got {value!r}")
        return np.array([self.number(v, f"{key}[{i}]", minimum) for i, v in enumerate(value)])

    def boolean(self, value, key: str) -> bool:
        if not isinstance(value, bool):
            self.fail(key, f"expected true or false, got {value!r}")
        return value


def _join(key: str, sub) -> str:
    return f"{key}.{sub}" if key else str(sub)


# --------------------------------------------------------------------------------------------- description


@dataclass(frozen=True)
class StringSpec:
    """A string: distance constraint between two frames with a fixed length (float) or a kinematic one (name)."""

    name: str
    frame1: str
    frame2: str
    length: float | str
    min_tension: float | None = None


@dataclass
class ModelDescription:
    """A loaded model file: the core model plus what the core does not keep.

    ``hardware_joints`` maps a hardware joint name (``/joint_states``) to a configuration name
    (identity for every configuration unless the file says otherwise); ``strings`` and
    ``urdf`` let tools draw and inspect the model.
    """

    name: str
    path: str
    model: _core.Model
    description: str = ""
    strings: list[StringSpec] = field(default_factory=list)
    hardware_joints: dict[str, str] = field(default_factory=dict)
    actuators: dict[str, ActuatorLimits] = field(default_factory=dict)
    urdf: UrdfRobot | None = None
    raw: dict = field(default_factory=dict)

    @property
    def config_to_hardware(self) -> dict[str, str]:
        return {v: k for k, v in self.hardware_joints.items()}


_TOP = ("name", "description", "gravity", "forcing", "urdf", "kinematic", "frames", "strings", "springs", "config_springs",
        "damping", "forces", "plane_constraints", "hardware", "actuators", "base", "overrides")
_AXIS = {"x": 0, "y": 1, "z": 2, 0: 0, 1: 1, 2: 2}
#: Longest chain of ``base`` files (deeper is a mistake, usually a cycle).
MAX_BASE_DEPTH = 8


# --------------------------------------------------------------------------------------------- base and overrides


def _read_with_base(path: str, chain: tuple = ()) -> tuple[dict, list]:
    """The file's mapping with its ``base`` chain resolved, and the ``overrides`` of the chain (base first).

    Keys of a file replace its base's; a relative ``urdf.file`` of a base stays relative to the base.
    Returns (data without ``base``/``overrides``, [(Checker of the file, overrides mapping), ...]).
    """
    data = read_yaml(path, ModelFileError)
    c = Checker(path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        c.fail("", f"the file must contain a mapping, got {type(data).__name__}")
    data = dict(data)
    patches = []
    if "base" in data:
        base = c.name(data.pop("base"), "base")
        bpath = base if os.path.isabs(base) else os.path.join(os.path.dirname(os.path.abspath(path)), base)
        here = os.path.abspath(path)
        if os.path.abspath(bpath) in chain + (here,):
            c.fail("base", f"'{base}' is this file or one of its bases (a cycle)")
        if len(chain) >= MAX_BASE_DEPTH:
            c.fail("base", f"more than {MAX_BASE_DEPTH} nested base files")
        merged, patches = _read_with_base(bpath, chain + (here,))
        urdf = merged.get("urdf")
        if isinstance(urdf, dict) and isinstance(urdf.get("file"), str) and not os.path.isabs(urdf["file"]):
            merged["urdf"] = {**urdf, "file": os.path.join(os.path.dirname(os.path.abspath(bpath)), urdf["file"])}
        merged.update(data)
        data = merged
    if "overrides" in data:
        patches = patches + [(c, data.pop("overrides"))]
    return data, patches


class _Overrides:
    """The ``overrides`` of a file and its bases, merged by name (later files win), applied while building.

    masses : {body: {mass, center_of_mass, inertia}}, placements : {frame: {translation, rpy, value}},
    damping : {configuration: coefficient}. Each entry remembers the key path that introduced it, for
    errors; :meth:`check_used` reports every name that matched nothing.
    """

    def __init__(self, patches: list):
        self.masses: dict[str, dict] = {}
        self.placements: dict[str, dict] = {}
        self.damping: dict[str, float] = {}
        self.where: dict[tuple[str, str], tuple[Checker, str]] = {}
        self.used: set[tuple[str, str]] = set()
        for c, ov in patches:
            c.mapping(ov, "overrides", optional=("masses", "placements", "damping"))
            for name, spec in c.table(ov.get("masses", {}) or {}, "overrides.masses").items():
                key = f"overrides.masses.{name}"
                c.mapping(spec, key, optional=("mass", "center_of_mass", "inertia"))
                entry = self.masses.setdefault(c.name(name, key), {})
                if "mass" in spec:
                    entry["mass"] = c.number(spec["mass"], f"{key}.mass", minimum=0.0)
                if "center_of_mass" in spec:
                    entry["center_of_mass"] = c.vector(spec["center_of_mass"], f"{key}.center_of_mass", 3)
                if "inertia" in spec:
                    n = len(spec["inertia"]) if isinstance(spec["inertia"], list) else 3
                    entry["inertia"] = c.vector(spec["inertia"], f"{key}.inertia", 6 if n == 6 else 3)
                self.where[("masses", name)] = (c, key)
            for name, spec in c.table(ov.get("placements", {}) or {}, "overrides.placements").items():
                key = f"overrides.placements.{name}"
                c.mapping(spec, key, optional=("translation", "rpy", "value"))
                entry = self.placements.setdefault(c.name(name, key), {})
                for k in ("translation", "rpy"):
                    if k in spec:
                        entry[k] = c.vector(spec[k], f"{key}.{k}", 3)
                if "value" in spec:
                    entry["value"] = c.number(spec["value"], f"{key}.value")
                self.where[("placements", name)] = (c, key)
            for name, coef in c.table(ov.get("damping", {}) or {}, "overrides.damping").items():
                key = f"overrides.damping.{name}"
                self.damping[c.name(name, key)] = c.number(coef, key, minimum=0.0)
                self.where[("damping", name)] = (c, key)

    def fail(self, kind: str, name: str, problem: str):
        c, key = self.where[(kind, name)]
        c.fail(key, problem)

    def apply_urdf(self, robot: UrdfRobot, joint_config: dict[str, str]) -> UrdfRobot:
        """The robot with overridden link inertials, joint origins and joint damping (damping set to 0 here;
        the damping table carries the overriding total)."""
        links = dict(robot.links)
        for name, spec in self.masses.items():
            link = links.get(name)
            if link is None:
                continue
            if link.inertial is None:
                self.fail("masses", name, f"URDF link '{name}' has no <inertial> to override")
            self.used.add(("masses", name))
            old = link.inertial
            if "inertia" in spec:
                tensor = self._inertia_tensor(name, spec["inertia"], old.inertia)
            else:
                tensor = old.inertia
            new = Inertial(spec.get("mass", old.mass), spec.get("center_of_mass", old.xyz), old.rpy, tensor)
            links[name] = dataclasses.replace(link, inertial=new)
        joints = []
        for j in robot.joints:
            spec = self.placements.get(j.child)
            if spec is not None:
                if "value" in spec:
                    self.fail("placements", j.child, f"URDF link '{j.child}' hangs from joint '{j.name}': give its "
                                                     "origin as translation and rpy, not value")
                self.used.add(("placements", j.child))
                j = dataclasses.replace(j, xyz=spec.get("translation", j.xyz), rpy=spec.get("rpy", j.rpy))
            if joint_config.get(j.name) in self.damping:
                j = dataclasses.replace(j, damping=0.0)
            joints.append(j)
        if robot.root in self.placements:
            self.fail("placements", robot.root, f"'{robot.root}' is the URDF's root link: it has no joint origin")
        return dataclasses.replace(robot, links=links, joints=joints)

    def _inertia_tensor(self, name: str, values: np.ndarray, old: np.ndarray) -> np.ndarray:
        if values.size == 3:
            if np.count_nonzero(old - np.diag(np.diag(old))):
                self.fail("masses", name, "the URDF inertia has off-diagonal terms: give all six "
                                          "[ixx, ixy, ixz, iyy, iyz, izz]")
            return np.diag(values)
        ixx, ixy, ixz, iyy, iyz, izz = values
        tensor = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
        problem = inertia_problem(tensor)
        if problem is not None:
            self.fail("masses", name, f"{problem} (given {values.tolist()})")
        return tensor

    def apply_frame(self, fr: dict, key: str) -> dict:
        """A ``frames`` entry with its overridden mass and placement (a copy when anything changed)."""
        name = fr.get("name")
        mass, place = self.masses.get(name), self.placements.get(name)
        if mass is None and place is None:
            return fr
        fr = dict(fr)
        if mass is not None:
            self.used.add(("masses", name))
            if "mass" not in fr:
                self.fail("masses", name, f"{key} has no mass to override")
            if "center_of_mass" in mass:
                self.fail("masses", name, "a frame's mass sits at the frame's origin: move the frame with "
                                          "overrides.placements instead of center_of_mass")
            if "inertia" in mass and mass["inertia"].size != 3:
                self.fail("masses", name, "a frame's inertia is its three principal moments [Ixx, Iyy, Izz]")
            fr.update({k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in mass.items()})
        if place is not None:
            self.used.add(("placements", name))
            driven = "config" in fr
            const = fr.get("transform", "const") == "const"
            if driven:
                self.fail("placements", name, f"{key} is driven by configuration '{fr['config']}': it has no "
                                              "constant placement")
            if const and "value" in place or not const and ({"translation", "rpy"} & set(place)):
                self.fail("placements", name, f"{key} is a " + ("constant SE(3) frame: give translation and rpy"
                                                                if const else "constant primitive: give value"))
            fr.update({k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in place.items()})
        return fr

    def check_used(self) -> None:
        for kind, table, what in (("masses", self.masses, "a URDF link with an <inertial> nor a frame with a mass"),
                                  ("placements", self.placements, "a URDF link nor a frame")):
            for name in table:
                if (kind, name) not in self.used:
                    self.fail(kind, name, f"'{name}' is neither {what} of the model")


def load_model_file(path: str | os.PathLike, builder: type = SystemBuilder, **overrides) -> ModelDescription:
    """Loads and validates a YAML model file and builds its core model.

    ``overrides`` replace top-level keys before validation (e.g. ``gravity=[0, 0, -9.8]``,
    ``hardware={"joint_names": {...}}``), so callers can vary a parameter without copying the file.
    ``builder`` is the :class:`~marionette_control.model.builder.SystemBuilder` (sub)class the model is built
    with, constructed as ``builder(name, gravity=...)``: a subclass may build the same description differently
    (the calibration turns constant placements into kinematic configurations to differentiate with respect to
    them, :mod:`marionette_control.identification.geometry`).
    """
    path = os.fspath(path)
    data, patches = _read_with_base(path)
    c = Checker(path)
    for k, v in overrides.items():
        if k not in _TOP or k == "base":
            raise ModelFileError(f"{path}: override '{k}' is not a model-file key (keys: "
                                 f"{', '.join(t for t in _TOP if t != 'base')})")
        if k == "overrides":
            patches.append((c, v))
        else:
            data[k] = v
    c.mapping(data, "", required=("name",), optional=_TOP)
    patch = _Overrides(patches)
    name = c.name(data["name"], "name")
    description = data.get("description", "")
    if not isinstance(description, str):
        c.fail("description", "expected text")
    gravity = c.vector(data.get("gravity", [0.0, 0.0, -9.81]), "gravity", 3)
    forcing = data.get("forcing", DEFAULT_FORCING)
    if forcing not in FORCING_RULES:
        c.fail("forcing", f"expected one of {', '.join(FORCING_RULES)}, got {forcing!r}")
    b = builder(name, gravity=gravity).forcing(forcing)

    frames: set[str] = {"world"}
    configs: dict[str, str] = {}  # config name -> key where it was introduced
    kinematic: set[str] = set()
    robot = None

    # --- kinematic declarations (checked against the configurations once all are known) ---
    kin_list = c.list(data.get("kinematic", []), "kinematic")
    for i, k in enumerate(kin_list):
        c.name(k, f"kinematic[{i}]")
        if k in kinematic:
            c.fail(f"kinematic[{i}]", f"'{k}' is listed twice")
        kinematic.add(k)

    # --- URDF tree ---
    if "urdf" in data:
        u = c.mapping(data["urdf"], "urdf", required=("file",), optional=("rename", "friction"))
        ufile = c.name(u["file"], "urdf.file")
        friction = u.get("friction", "ignore")
        if friction not in FRICTION_OPTIONS:
            c.fail("urdf.friction", f"expected one of {', '.join(FRICTION_OPTIONS)}, got {friction!r}")
        upath = ufile if os.path.isabs(ufile) else os.path.join(os.path.dirname(os.path.abspath(path)), ufile)
        rename = c.table(u.get("rename", {}) or {}, "urdf.rename")
        for j, cname in rename.items():
            c.name(cname, f"urdf.rename.{j}")
        try:
            robot = parse_urdf(upath)
            moving = robot.moving_joints
            for j in rename:
                if j not in moving:
                    c.fail(f"urdf.rename.{j}", f"'{j}' is not a moving joint of {ufile} (moving joints: "
                                               f"{', '.join(moving)})")
            joint_config = {j: rename.get(j, j) for j in moving}
            robot = patch.apply_urdf(robot, joint_config)
            # A joint named like a string's kinematic length is that length (the winch), not a tree joint: the
            # URDF has it so that every /joint_states name exists there (robot_state_publisher, ros2_control);
            # the string below declares the configuration, as without it.
            strings_entry = data.get("strings")
            lengths = {s.get("length") for s in strings_entry if isinstance(s, dict)} if isinstance(
                strings_entry, list) else set()
            tree = robot
            for j in moving:
                if joint_config[j] in lengths:
                    tree = without_length_joint(tree, j)
            tree_joints = tree.moving_joints
            kin_joints = [j for j in tree_joints if joint_config[j] in kinematic]
            # add_urdf reports frame collisions; every URDF link becomes a frame of that name
            created: set[str] = set()
            mapping = add_urdf(b, tree, kinematic=kin_joints, rename={j: c for j, c in rename.items()
                                                                        if j in tree_joints}, created=created,
                               friction=friction)
        except UrdfError as e:
            raise ModelFileError(f"{path}: urdf: {e}") from None
        for j, cname in mapping.items():
            if cname in configs:
                c.fail(f"urdf.rename.{j}", f"configuration '{cname}' is used by two joints")
            configs[cname] = f"urdf joint '{j}'"
        frames.update(created)

    # kinematic configurations that no URDF joint introduced are declared now, so frames can use them
    for k in kin_list:
        if k not in configs:
            b.config(k, kinematic=True)

    # --- frames ---
    for i, fr in enumerate(c.list(data.get("frames", []), "frames")):
        key = f"frames[{i}]"
        c.mapping(fr, key, required=("name", "parent"),
                  optional=("transform", "config", "value", "translation", "rpy", "mass", "inertia"))
        fr = patch.apply_frame(fr, key)
        fname = c.name(fr["name"], f"{key}.name")
        key = f"frames[{i}] ('{fname}')"
        if fname in frames:
            c.fail(f"{key}.name", f"frame '{fname}' is defined twice")
        parent = c.name(fr["parent"], f"{key}.parent")
        if parent not in frames:
            c.fail(f"{key}.parent", f"unknown frame '{parent}' (parents must be defined before their children)")
        transform = fr.get("transform", "const")
        if transform not in PRIMITIVES + ("const",):
            c.fail(f"{key}.transform", f"expected one of {', '.join(PRIMITIVES)} or const, got {transform!r}")
        mass = c.number(fr["mass"], f"{key}.mass", minimum=0.0) if "mass" in fr else None
        inertia = c.vector(fr["inertia"], f"{key}.inertia", 3, minimum=0.0) if "inertia" in fr else np.zeros(3)
        if "inertia" in fr and mass is None:
            c.fail(f"{key}.inertia", "inertia given without a mass")
        if transform == "const":
            for bad in ("config", "value"):
                if bad in fr:
                    c.fail(f"{key}.{bad}", "a constant SE(3) frame takes translation and rpy; "
                                           f"'{bad}' needs a primitive transform (tx, ty, tz, rx, ry, rz)")
            t = c.vector(fr.get("translation", [0, 0, 0]), f"{key}.translation", 3)
            rpy = c.vector(fr.get("rpy", [0, 0, 0]), f"{key}.rpy", 3)
            b.const_frame(fname, parent, translation=t, rotation=rotation_rpy(*rpy), mass=mass, inertia=inertia)
        else:
            for bad in ("translation", "rpy"):
                if bad in fr:
                    c.fail(f"{key}.{bad}", f"'{bad}' belongs to constant frames; a '{transform}' frame takes "
                                           "config or value")
            if "config" in fr and "value" in fr:
                c.fail(key, "give either config (driven transform) or value (constant), not both")
            if "config" in fr:
                cname = c.name(fr["config"], f"{key}.config")
                if cname in configs:
                    c.fail(f"{key}.config", f"configuration '{cname}' already drives {configs[cname]} "
                                            "(each configuration drives exactly one transform, thesis R2)")
                configs[cname] = f"frame '{fname}'"
                b.frame(fname, parent, transform, config=cname, mass=mass, inertia=inertia)
            else:
                value = c.number(fr.get("value", 0.0), f"{key}.value")
                b.frame(fname, parent, transform, value=value, mass=mass, inertia=inertia)
        frames.add(fname)

    for k in kin_list:
        configs.setdefault(k, "kinematic list")

    # --- strings ---
    strings: list[StringSpec] = []
    names: set[str] = set()

    def unique(n: str, key: str) -> None:
        if n in names:
            c.fail(key, f"the name '{n}' is used twice")
        names.add(n)

    def frame_ref(value, key: str) -> str:
        n = c.name(value, key)
        if n not in frames:
            c.fail(key, f"unknown frame '{n}'")
        return n

    def config_ref(value, key: str, dynamic: bool = False) -> str:
        n = c.name(value, key)
        if n not in configs:
            c.fail(key, f"unknown configuration '{n}' (configurations: {', '.join(sorted(configs))})")
        if dynamic and n in kinematic:
            c.fail(key, f"'{n}' is kinematic (prescribed): it takes no forces or damping")
        return n

    for i, s in enumerate(c.list(data.get("strings", []), "strings")):
        key = f"strings[{i}]"
        c.mapping(s, key, required=("name", "from", "to", "length"), optional=("min_tension",))
        sname = c.name(s["name"], f"{key}.name")
        unique(sname, f"{key}.name")
        f1 = frame_ref(s["from"], f"{key}.from")
        f2 = frame_ref(s["to"], f"{key}.to")
        if f1 == f2:
            c.fail(f"{key}.to", f"a string joins two different frames (both are '{f1}')")
        length = s["length"]
        if isinstance(length, str):
            if length in configs and length not in kinematic:
                c.fail(f"{key}.length", f"configuration '{length}' is dynamic; a string length must be kinematic")
            if length not in configs:
                b.config(length, kinematic=True)
                configs[length] = f"string '{sname}'"
                kinematic.add(length)
        else:
            length = c.number(length, f"{key}.length", positive=True)
        min_tension = None
        if "min_tension" in s:
            if not isinstance(length, str):
                c.fail(f"{key}.min_tension", "a minimum tension applies to a string whose length is a kinematic "
                                             "configuration (a fixed-length link can push as well as pull)")
            min_tension = c.number(s["min_tension"], f"{key}.min_tension", minimum=0.0)
        b.distance_constraint(f1, f2, length, name=sname)
        strings.append(StringSpec(sname, f1, f2, length, min_tension))

    # kinematic names that nothing introduced are declared configurations of their own (allowed: an input)
    for k in kinematic:
        configs.setdefault(k, "kinematic list")

    for i, sp in enumerate(c.list(data.get("springs", []), "springs")):
        key = f"springs[{i}]"
        c.mapping(sp, key, required=("frame1", "frame2", "stiffness"), optional=("name", "rest_length"))
        sname = c.name(sp.get("name", f"spring{i}"), f"{key}.name")
        unique(sname, f"{key}.name")
        b.linear_spring(frame_ref(sp["frame1"], f"{key}.frame1"), frame_ref(sp["frame2"], f"{key}.frame2"),
                        c.number(sp["stiffness"], f"{key}.stiffness", minimum=0.0),
                        c.number(sp.get("rest_length", 0.0), f"{key}.rest_length", minimum=0.0), name=sname)

    for i, sp in enumerate(c.list(data.get("config_springs", []), "config_springs")):
        key = f"config_springs[{i}]"
        c.mapping(sp, key, required=("config", "stiffness"), optional=("name", "neutral"))
        sname = c.name(sp.get("name", f"config_spring{i}"), f"{key}.name")
        unique(sname, f"{key}.name")
        b.config_spring(config_ref(sp["config"], f"{key}.config"),
                        c.number(sp["stiffness"], f"{key}.stiffness", minimum=0.0),
                        c.number(sp.get("neutral", 0.0), f"{key}.neutral"), name=sname)

    for cname in patch.damping:
        oc, key = patch.where[("damping", cname)]
        if cname not in configs or cname in kinematic:
            oc.fail(key, f"'{cname}' is not a dynamic configuration (dynamic configurations: "
                         f"{', '.join(sorted(set(configs) - kinematic))})")
    damping = c.table(data.get("damping", {}) or {}, "damping")
    for cname, coef in damping.items():   # an overridden coefficient replaces the file's in place
        b.damping(config_ref(cname, f"damping.{cname}", dynamic=True),
                  patch.damping.get(cname, c.number(coef, f"damping.{cname}", minimum=0.0)))
    for cname, coef in patch.damping.items():
        if cname not in damping and coef:
            b.damping(cname, coef)
    patch.check_used()

    for i, fo in enumerate(c.list(data.get("forces", []), "forces")):
        key = f"forces[{i}]"
        c.mapping(fo, key, required=("config",), optional=("input", "name"))
        cname = config_ref(fo["config"], f"{key}.config", dynamic=True)
        inp = c.name(fo.get("input", f"{cname}_force"), f"{key}.input")
        fname = c.name(fo.get("name", f"{cname}_force"), f"{key}.name")
        unique(fname, f"{key}.name")
        b.config_force(cname, input=inp, name=fname)

    for i, pc in enumerate(c.list(data.get("plane_constraints", []), "plane_constraints")):
        key = f"plane_constraints[{i}]"
        c.mapping(pc, key, required=("plane_frame", "axis", "point_frame"), optional=("name",))
        pname = c.name(pc.get("name", f"plane{i}"), f"{key}.name")
        unique(pname, f"{key}.name")
        axis = pc["axis"]
        if isinstance(axis, bool) or axis not in _AXIS:
            c.fail(f"{key}.axis", f"expected x, y, z (or 0, 1, 2), got {axis!r}")
        b.plane_constraint(frame_ref(pc["plane_frame"], f"{key}.plane_frame"), _AXIS[axis],
                           frame_ref(pc["point_frame"], f"{key}.point_frame"), name=pname)

    # --- hardware names and actuators (metadata; checked against the model) ---
    hw = c.mapping(data.get("hardware", {}) or {}, "hardware", optional=("joint_names",))
    jn = c.table(hw.get("joint_names", {}) or {}, "hardware.joint_names")
    hardware = {n: n for n in configs}
    if jn:
        hardware = {}
        for hname, cname in jn.items():
            c.name(hname, f"hardware.joint_names.{hname}")
            config_ref(cname, f"hardware.joint_names.{hname}")
            if cname in hardware.values():
                c.fail(f"hardware.joint_names.{hname}", f"configuration '{cname}' is named by two hardware joints")
            hardware[hname] = cname
        missing = sorted(set(configs) - set(hardware.values()))
        if missing:
            c.fail("hardware.joint_names", f"no hardware joint name for configuration(s) {', '.join(missing)}")

    actuators: dict[str, ActuatorLimits] = {}
    act = c.table(data.get("actuators", {}) or {}, "actuators")
    for cname, spec in act.items():
        key = f"actuators.{cname}"
        config_ref(cname, key)
        if cname not in kinematic:
            c.fail(key, f"'{cname}' is dynamic; actuator limits apply to kinematic (prescribed) configurations")
        c.mapping(spec, key, required=("min", "max", "max_velocity"), optional=("max_acceleration",))
        lo, hi = c.number(spec["min"], f"{key}.min"), c.number(spec["max"], f"{key}.max")
        if lo >= hi:
            c.fail(f"{key}.max", f"must be > min ({lo}), got {hi}")
        acc = spec.get("max_acceleration")
        actuators[cname] = ActuatorLimits(
            lo, hi, c.number(spec["max_velocity"], f"{key}.max_velocity", positive=True),
            None if acc is None else c.number(acc, f"{key}.max_acceleration", positive=True))

    unknown_kin = sorted(k for k in kinematic if k not in configs)
    if unknown_kin:  # pragma: no cover - every kinematic name is a configuration by now
        c.fail("kinematic", f"unknown configuration(s) {', '.join(unknown_kin)}")
    try:
        model = b.build()
    except Exception as e:
        raise ModelFileError(f"{path}: {e}") from e
    desc = ModelDescription(name, path, model, description, strings, hardware, actuators, robot, data)
    try:
        from_description(desc)     # the limits it states must read as one set (a drive's URDF <limit> = its actuators)
    except ValueError as e:
        raise ModelFileError(str(e)) from None
    return desc


def load_packaged_model(name: str | os.PathLike) -> ModelDescription:
    """The model file ``name``: an absolute path, or a name relative to the package's ``config/``
    (:func:`~marionette_control.resources.config_file`), as every node's ``model_file`` parameter names it."""
    return load_model_file(config_file(name))


def load_model(path: str | os.PathLike, **overrides) -> _core.Model:
    """The core model of a YAML model file (see :func:`load_model_file`)."""
    return load_model_file(path, **overrides).model


__all__ = ["ModelFileError", "ModelDescription", "StringSpec", "ActuatorLimits", "load_model_file",
           "load_model", "read_yaml", "StrictLoader", "Checker", "MAX_BASE_DEPTH"]
