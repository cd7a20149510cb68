"""URDF import: a robot description (the file robot_state_publisher and RViz read) as a tree model.

What maps onto what (thesis ch. 2: primitive transforms and constant offsets):

============================  ==============================================================
URDF                          model
============================  ==============================================================
link                          a frame of the same name (the root link hangs from ``world``
                              at the identity; a root link named ``world`` *is* the world)
joint ``<origin xyz rpy>``    a constant SE(3) frame ``<joint>_origin`` (omitted when the
                              origin is the identity), R = Rz(yaw) Ry(pitch) Rx(roll)
revolute / continuous         a primitive rotation rx/ry/rz driven by a configuration named
                              after the joint
prismatic                     a primitive translation tx/ty/tz, likewise
fixed                         the constant origin only
axis along -x, -y or -z       exactly: the motion is wrapped in a constant half-turn about a
                              perpendicular axis, R_f Rot_a(q) R_f^T = Rot_{-a}(q)
``<inertial>``                a mass at the centre of mass on principal axes: a constant
                              frame ``<link>_inertial`` at the inertial origin rotated onto
                              the eigenvectors of the inertia tensor when it is not diagonal
                              (the core's masses are principal, thesis §3.1.1)
``<dynamics damping>``        viscous damping on the joint's configuration
============================  ==============================================================

Rejected with an error naming the joint (never approximated): floating and planar joints,
axes not along a coordinate axis of the joint frame (components off the axis larger than
1e-12 of the norm), ``<mimic>``, non-zero ``<dynamics friction>`` (Coulomb friction is not
modelled), damping on a joint declared kinematic. ``<limit>`` is read and kept in
:class:`UrdfJoint` (actuator ranges) but does not enter the dynamics; ``<visual>``,
``<collision>``, ``<calibration>``, ``<safety_controller>``, ``<transmission>``, ``<gazebo>``
and materials are ignored because they carry no dynamics.

Configuration names are the joint names (``rename`` maps a joint name to another
configuration name), so the joint names that a robot publishes on ``/joint_states`` are the
model's configuration names. Joints named in ``kinematic`` become kinematic configurations
(prescribed, thesis §3.6).

Gravity: URDF carries none; the default is (0, 0, -9.81), the value ROS tools and Pinocchio use.
"""

from __future__ import annotations

import dataclasses
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

from marionette_control import _core
from marionette_control.model.builder import FORCING_RULES, SystemBuilder, rotation_rpy

SUPPORTED_JOINTS = ("revolute", "continuous", "prismatic", "fixed")
#: Relative size of an axis component off the coordinate axis that still counts as zero.
AXIS_TOLERANCE = 1e-12
_AXES = "xyz"
# Half-turn that reverses axis a: Rz(pi) reverses x and y, Rx(pi) reverses z.
_FLIP = {0: np.diag([-1.0, -1.0, 1.0]), 1: np.diag([-1.0, -1.0, 1.0]), 2: np.diag([1.0, -1.0, -1.0])}


class UrdfError(ValueError):
    """A URDF that cannot be imported; the message names the file, the element and what is supported."""


@dataclass(frozen=True)
class Inertial:
    """A link's ``<inertial>``: mass, centre-of-mass pose in the link frame, inertia tensor (3, 3) about the COM
    in the inertial frame."""

    mass: float
    xyz: np.ndarray
    rpy: np.ndarray
    inertia: np.ndarray

    def principal(self) -> tuple[np.ndarray, np.ndarray]:
        """(R, moments): rotation of the principal frame in the link frame (3, 3) and principal moments (3,).

        ``I = V diag(moments) V^T`` in the inertial frame, so the principal frame is ``R_origin V``
        (V with det +1). A diagonal tensor keeps its axes (V = identity), so nothing is reordered.
        """
        r_origin = rotation_rpy(*self.rpy)
        tensor = self.inertia
        if np.count_nonzero(tensor - np.diag(np.diag(tensor))) == 0:
            return r_origin, np.diag(tensor).copy()
        moments, v = np.linalg.eigh(tensor)
        if np.linalg.det(v) < 0:
            v[:, 2] = -v[:, 2]
        return r_origin @ v, moments


@dataclass(frozen=True)
class UrdfLink:
    name: str
    inertial: Inertial | None


@dataclass(frozen=True)
class UrdfJoint:
    """One ``<joint>``; ``axis`` is (index 0/1/2, sign +-1) for moving joints, ``limits`` has the ``<limit>``
    attributes that were given (lower, upper, velocity, effort)."""

    name: str
    type: str
    parent: str
    child: str
    xyz: np.ndarray
    rpy: np.ndarray
    axis: tuple[int, int] | None
    damping: float
    limits: dict = field(default_factory=dict)


@dataclass(frozen=True)
class UrdfRobot:
    """A parsed URDF: links, joints in a parent-before-child order, the root link, the source."""

    name: str
    source: str
    root: str
    links: dict[str, UrdfLink]
    joints: list[UrdfJoint]

    def joint(self, name: str) -> UrdfJoint:
        for j in self.joints:
            if j.name == name:
                return j
        raise KeyError(f"{self.source}: no joint named '{name}' (joints: {', '.join(j.name for j in self.joints)})")

    @property
    def moving_joints(self) -> list[str]:
        return [j.name for j in self.joints if j.type != "fixed"]


# --------------------------------------------------------------------------------------------- parsing


def _floats(text: str | None, n: int, default: Sequence[float] | None, where: str) -> np.ndarray:
    if text is None:
        if default is None:
            raise UrdfError(f"{where}: missing (expected {n} numbers)")
        return np.array(default, dtype=float)
    parts = text.split()
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise UrdfError(f"{where}: expected {n} numbers, got {text!r}") from None
    if len(values) != n:
        raise UrdfError(f"{where}: expected {n} numbers, got {len(values)} ({text!r})")
    arr = np.array(values)
    if not np.all(np.isfinite(arr)):
        raise UrdfError(f"{where}: numbers must be finite, got {text!r}")
    return arr


def _float_attr(elem: ET.Element, attr: str, where: str, default: float | None = None) -> float:
    text = elem.get(attr)
    if text is None and default is not None:
        return default
    return float(_floats(text, 1, None, f"{where} attribute '{attr}'")[0])


def _origin(elem: ET.Element, where: str) -> tuple[np.ndarray, np.ndarray]:
    o = elem.find("origin")
    if o is None:
        return np.zeros(3), np.zeros(3)
    return (_floats(o.get("xyz"), 3, (0, 0, 0), f"{where} <origin xyz>"),
            _floats(o.get("rpy"), 3, (0, 0, 0), f"{where} <origin rpy>"))


def _parse_inertial(elem: ET.Element, where: str) -> Inertial:
    xyz, rpy = _origin(elem, f"{where} <inertial>")
    m = elem.find("mass")
    if m is None:
        raise UrdfError(f"{where} <inertial>: missing <mass value=...>")
    mass = _float_attr(m, "value", f"{where} <inertial><mass>")
    if mass < 0:
        raise UrdfError(f"{where} <inertial><mass>: mass must be >= 0, got {mass}")
    i = elem.find("inertia")
    if i is None:
        raise UrdfError(f"{where} <inertial>: missing <inertia ixx ixy ixz iyy iyz izz>")
    w = f"{where} <inertial><inertia>"
    v = {k: _float_attr(i, k, w, 0.0 if k in ("ixy", "ixz", "iyz") else None)
         for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
    tensor = np.array([[v["ixx"], v["ixy"], v["ixz"]], [v["ixy"], v["iyy"], v["iyz"]], [v["ixz"], v["iyz"], v["izz"]]])
    moments = np.linalg.eigvalsh(tensor)
    scale = max(np.abs(moments).max(), 1e-300)
    if moments.min() < -1e-12 * scale:
        raise UrdfError(f"{w}: the inertia tensor must be positive semi-definite, its principal moments are "
                        f"{moments.tolist()}")
    return Inertial(mass, xyz, rpy, tensor)


def _parse_axis(elem: ET.Element, where: str, jtype: str) -> tuple[int, int]:
    a = elem.find("axis")
    axis = _floats(None if a is None else a.get("xyz"), 3, (1.0, 0.0, 0.0), f"{where} <axis xyz>")
    norm = float(np.linalg.norm(axis))
    if norm == 0.0:
        raise UrdfError(f"{where} <axis xyz>: the axis is the zero vector")
    k = int(np.argmax(np.abs(axis)))
    off = np.delete(axis, k)
    if np.any(np.abs(off) > AXIS_TOLERANCE * norm):
        raise UrdfError(
            f"{where} (type {jtype}): axis {axis.tolist()} is not along a coordinate axis of the joint frame; "
            "supported axes are +-x, +-y, +-z (rotate the joint frame with <origin rpy> so that the axis is one "
            "of them)")
    return k, 1 if axis[k] > 0 else -1


def parse_urdf(source: str | os.PathLike) -> UrdfRobot:
    """Parses a URDF file (a path) or URDF text (a string starting with ``<``) and checks that it is a tree."""
    text_given = isinstance(source, str) and source.lstrip().startswith("<")
    label = "<urdf string>" if text_given else os.fspath(source)
    try:
        root = ET.fromstring(source) if text_given else ET.parse(label).getroot()
    except ET.ParseError as e:
        raise UrdfError(f"{label}: not well-formed XML: {e}") from None
    except OSError as e:
        raise UrdfError(f"{label}: cannot read: {e}") from None
    if root.tag != "robot":
        raise UrdfError(f"{label}: the root element must be <robot>, got <{root.tag}>")
    robot_name = root.get("name") or "robot"

    links: dict[str, UrdfLink] = {}
    for le in root.findall("link"):
        name = le.get("name")
        if not name:
            raise UrdfError(f"{label}: a <link> has no name")
        if name in links:
            raise UrdfError(f"{label}: link '{name}' is defined twice")
        ie = le.find("inertial")
        links[name] = UrdfLink(name, None if ie is None else _parse_inertial(ie, f"{label}: link '{name}'"))
    if not links:
        raise UrdfError(f"{label}: the robot has no links")

    joints: dict[str, UrdfJoint] = {}
    child_of: dict[str, str] = {}
    for je in root.findall("joint"):
        name = je.get("name")
        if not name:
            raise UrdfError(f"{label}: a <joint> has no name")
        where = f"{label}: joint '{name}'"
        if name in joints:
            raise UrdfError(f"{label}: joint '{name}' is defined twice")
        jtype = je.get("type")
        if jtype not in SUPPORTED_JOINTS:
            raise UrdfError(f"{where}: type '{jtype}' is not supported; supported joint types are "
                            f"{', '.join(SUPPORTED_JOINTS)} (a floating or planar joint can be written as a chain of "
                            "prismatic and revolute joints through massless links)")
        if je.find("mimic") is not None:
            raise UrdfError(f"{where}: <mimic> is not supported (each configuration drives exactly one transform, "
                            "thesis R2); model the coupling as a constraint or remove the mimic joint")
        parent_e, child_e = je.find("parent"), je.find("child")
        if parent_e is None or child_e is None or not parent_e.get("link") or not child_e.get("link"):
            raise UrdfError(f"{where}: needs <parent link=...> and <child link=...>")
        parent, child = parent_e.get("link"), child_e.get("link")
        for role, ln in (("parent", parent), ("child", child)):
            if ln not in links:
                raise UrdfError(f"{where}: {role} link '{ln}' is not defined")
        if child in child_of:
            raise UrdfError(f"{where}: link '{child}' is already the child of joint '{child_of[child]}' "
                            "(a URDF is a tree; closed chains are constraints)")
        child_of[child] = name
        xyz, rpy = _origin(je, where)
        axis = None if jtype == "fixed" else _parse_axis(je, where, jtype)
        damping = 0.0
        de = je.find("dynamics")
        if de is not None:
            damping = _float_attr(de, "damping", f"{where} <dynamics>", 0.0)
            friction = _float_attr(de, "friction", f"{where} <dynamics>", 0.0)
            if damping < 0:
                raise UrdfError(f"{where} <dynamics damping>: must be >= 0, got {damping}")
            if friction != 0.0:
                raise UrdfError(f"{where} <dynamics friction={friction}>: Coulomb friction is not modelled; "
                                "only viscous damping is supported (set friction=\"0\")")
            if damping and jtype == "fixed":
                raise UrdfError(f"{where}: a fixed joint cannot have damping")
        limits = {}
        lim = je.find("limit")
        if lim is not None:
            for k in ("lower", "upper", "velocity", "effort"):
                if lim.get(k) is not None:
                    limits[k] = _float_attr(lim, k, f"{where} <limit>")
        joints[name] = UrdfJoint(name, jtype, parent, child, xyz, rpy, axis, damping, limits)

    roots = [n for n in links if n not in child_of]
    if len(roots) != 1:
        raise UrdfError(f"{label}: a URDF tree has exactly one root link (a link that is no joint's child), found "
                        f"{len(roots)}: {', '.join(roots) or 'none (there is a cycle)'}")
    # Parent-before-child order: depth first from the root, siblings in document order.
    by_parent: dict[str, list[UrdfJoint]] = {}
    for j in joints.values():
        by_parent.setdefault(j.parent, []).append(j)
    result: list[UrdfJoint] = []
    stack = list(reversed(by_parent.get(roots[0], [])))
    while stack:
        j = stack.pop()
        result.append(j)
        stack.extend(reversed(by_parent.get(j.child, [])))
    if len(result) != len(joints):
        lost = sorted(set(joints) - {j.name for j in result})
        raise UrdfError(f"{label}: joints {', '.join(lost)} are not connected to the root link '{roots[0]}' "
                        "(they form a cycle)")
    root_link = links[roots[0]]
    if roots[0] == "world" and root_link.inertial is not None and root_link.inertial.mass > 0:
        raise UrdfError(f"{label}: the root link 'world' is the world frame and cannot carry an <inertial>")
    return UrdfRobot(robot_name, label, roots[0], links, result)


# --------------------------------------------------------------------------------------------- building


def _is_identity(xyz: np.ndarray, rpy: np.ndarray) -> bool:
    return not np.any(xyz) and not np.any(rpy)


def add_urdf(builder: SystemBuilder, robot: UrdfRobot, kinematic: Iterable[str] = (),
             rename: Mapping[str, str] | None = None, existing_frames: Iterable[str] = (),
             created: set[str] | None = None) -> dict[str, str]:
    """Adds the robot's frames, masses and damping to ``builder``; returns {joint name: configuration name}.

    ``kinematic`` lists joint names whose configurations are kinematic (prescribed); ``rename`` maps joint
    names to configuration names. ``existing_frames`` are frame names already in the builder (the generated
    names must not collide with them); ``created``, if given, receives every frame name added.
    """
    existing_frames = set(existing_frames)
    rename = dict(rename or {})
    kinematic = set(kinematic)
    moving = set(robot.moving_joints)
    for what, names in (("kinematic", kinematic), ("rename", rename)):
        for n in names:
            if n not in moving:
                raise UrdfError(f"{robot.source}: {what} names joint '{n}', which is not a revolute, continuous or "
                                f"prismatic joint of the robot (moving joints: {', '.join(sorted(moving)) or 'none'})")
    used = set(existing_frames) | {"world"}
    link_frame = {}
    for ln in robot.links:
        if ln == robot.root and ln == "world":
            link_frame[ln] = "world"
            continue
        if ln in used:
            raise UrdfError(f"{robot.source}: link '{ln}' has the name of a frame that already exists")
        link_frame[ln] = ln
        used.add(ln)

    def fresh(base: str) -> str:
        name, i = base, 1
        while name in used or name in robot.links:
            name, i = f"{base}_{i}", i + 1
        used.add(name)
        return name

    def add_link(ln: str) -> None:
        inertial = robot.links[ln].inertial
        if inertial is None:
            return
        rot, moments = inertial.principal()
        moments = np.maximum(moments, 0.0)  # round-off of a zero moment (checked >= -1e-12 scale at parsing)
        if not np.any(inertial.xyz) and np.allclose(rot, np.eye(3), rtol=0.0, atol=0.0):
            builder.mass(link_frame[ln], inertial.mass, moments)
        else:
            builder.const_frame(fresh(f"{ln}_inertial"), link_frame[ln], translation=inertial.xyz, rotation=rot,
                                mass=inertial.mass, inertia=moments)

    if robot.root != "world":
        builder.const_frame(link_frame[robot.root], "world")
    add_link(robot.root)
    configs: dict[str, str] = {}
    for j in robot.joints:
        parent = link_frame[j.parent]
        child = link_frame[j.child]
        if j.type == "fixed":
            builder.const_frame(child, parent, translation=j.xyz, rotation=rotation_rpy(*j.rpy))
            add_link(j.child)
            continue
        config = rename.get(j.name, j.name)
        configs[j.name] = config
        is_kin = j.name in kinematic
        if is_kin and j.damping:
            raise UrdfError(f"{robot.source}: joint '{j.name}' is kinematic (prescribed) and cannot have "
                            "<dynamics damping>")
        index, sign = j.axis
        prim = ("r" if j.type in ("revolute", "continuous") else "t") + _AXES[index]
        if sign > 0:
            if _is_identity(j.xyz, j.rpy):
                base = parent
            else:
                base = fresh(f"{j.name}_origin")
                builder.const_frame(base, parent, translation=j.xyz, rotation=rotation_rpy(*j.rpy))
            builder.frame(child, base, prim, config=config, kinematic=is_kin)
        else:
            flip = _FLIP[index]
            base = fresh(f"{j.name}_origin")
            builder.const_frame(base, parent, translation=j.xyz, rotation=rotation_rpy(*j.rpy) @ flip)
            moved = fresh(f"{j.name}_motion")
            builder.frame(moved, base, prim, config=config, kinematic=is_kin)
            builder.const_frame(child, moved, rotation=flip.T)
        if j.damping:
            builder.damping(config, j.damping)
        add_link(j.child)
    if created is not None:
        created.update(used - set(existing_frames) - {"world"})
    return configs


def load_urdf(source: str | os.PathLike, kinematic: Iterable[str] = (), rename: Mapping[str, str] | None = None,
              gravity: Sequence[float] = (0.0, 0.0, -9.81), name: str | None = None,
              forcing: str = FORCING_RULES[0]) -> _core.Model:
    """Builds the core model of a URDF (a path or URDF text); see the module docstring for the mapping.

    URDF says nothing about the integrator: ``forcing`` is the forcing discretization of the model
    (``builder.FORCING_RULES``; the joints' damping is a force)."""
    robot = parse_urdf(source)
    b = SystemBuilder(name or robot.name, gravity=gravity, forcing=forcing)
    add_urdf(b, robot, kinematic=kinematic, rename=rename)
    try:
        return b.build()
    except Exception as e:  # the core's ModelError names the element; add the file
        raise UrdfError(f"{robot.source}: {e}") from e


def without_length_joint(robot: UrdfRobot, name: str) -> UrdfRobot:
    """The robot without the prismatic joint ``name`` and its child link: a joint that stands for a length
    outside the tree (a winch's string length, which closes a chain) rather than a motion of it.

    The child must be a leaf without mass, so that removing it changes no frame, mass or configuration of the
    tree; raises UrdfError naming the joint otherwise.
    """
    joint = robot.joint(name)
    where = f"{robot.source}: joint '{name}' (the length of a string)"
    if joint.type != "prismatic":
        raise UrdfError(f"{where} must be prismatic (a length in m), got type {joint.type}")
    inertial = robot.links[joint.child].inertial
    if inertial is not None and inertial.mass > 0:
        raise UrdfError(f"{where}: its child link '{joint.child}' must carry no mass (it marks the string's end)")
    children = [j.name for j in robot.joints if j.parent == joint.child]
    if children:
        raise UrdfError(f"{where}: its child link '{joint.child}' must be a leaf, but joints {', '.join(children)} "
                        "hang from it")
    links = {k: v for k, v in robot.links.items() if k != joint.child}
    return dataclasses.replace(robot, links=links, joints=[j for j in robot.joints if j.name != name])


def joint_limits(robot: UrdfRobot) -> dict[str, dict]:
    """{joint name: <limit> attributes} of the moving joints that have limits."""
    return {j.name: dict(j.limits) for j in robot.joints if j.type != "fixed" and j.limits}


__all__ = ["UrdfError", "UrdfRobot", "UrdfJoint", "UrdfLink", "Inertial", "parse_urdf", "add_urdf", "load_urdf",
           "without_length_joint", "joint_limits", "SUPPORTED_JOINTS", "AXIS_TOLERANCE"]
