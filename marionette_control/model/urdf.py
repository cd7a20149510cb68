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
fixed                         the constant origin only; its ``<dynamics>`` and ``<mimic>`` are
                              ignored (URDF gives them meaning on moving joints only)
any other axis                exactly: the motion about/along the unit axis a is
                              R Prim_k(q) R^T with R e_k = a for the nearest coordinate axis
                              k (a half-turn for -x, -y, -z; otherwise the rotation of least
                              angle onto a from +-e_k, after that half-turn for -e_k): a
                              constant frame ``<joint>_origin`` rotated by R, the driven frame
                              ``<joint>_motion`` and the link rotated back by R^T
``<inertial>``                a mass at the centre of mass on principal axes: a constant
                              frame ``<link>_inertial`` at the inertial origin rotated onto
                              the eigenvectors of the inertia tensor when it is not diagonal
                              (the core's masses are principal, thesis §3.1.1)
``<dynamics damping>``        viscous damping on the joint's configuration
``<dynamics friction>``       kept in :class:`UrdfJoint` (``friction``, :func:`joint_friction`)
                              and not simulated: ``friction="ignore"`` (the default) warns
                              once per file (:class:`UrdfWarning`), ``friction="refuse"``
                              refuses the file naming the joint
``<mimic joint multiplier     the joint keeps its own configuration and a coupling
offset>``                     constraint ``<joint>_mimic``: h = q_joint - multiplier q_leader
                              - offset = 0 (thesis §2.5: a configuration driving several
                              transforms is modelled as open chains with a holonomic
                              constraint; R2 stays)
============================  ==============================================================

Tolerances (stated, module constants): an axis whose off-axis components are at most
``AXIS_TOLERANCE`` = 1e-12 of its length is taken as that coordinate axis; an inertia tensor is
accepted when its smallest principal moment is >= -(``INERTIA_ABSOLUTE_TOLERANCE`` = 1e-12 kg m^2
+ ``INERTIA_RELATIVE_TOLERANCE`` = 1e-9 x its largest), so round-off of an all-zero tensor
(``ixz="2.40741e-35"``) passes and negative moments within the tolerance become 0, while an
indefinite tensor is refused with its principal moments.

Rejected with an error naming the joint (never approximated): floating and planar joints,
damping on a joint declared kinematic, a mimic joint declared kinematic, mimicking a joint that is
not a moving joint of the tree, or in a cycle of mimic joints. ``<limit>`` is read and kept in :class:`UrdfJoint` (actuator
ranges) but does not enter the dynamics; ``<visual>``, ``<collision>``, ``<calibration>``,
``<safety_controller>``, ``<transmission>``, ``<gazebo>`` and materials are ignored because they
carry no dynamics.

Configuration names are the joint names (``rename`` maps a joint name to another
configuration name), so the joint names that a robot publishes on ``/joint_states`` are the
model's configuration names. Joints named in ``kinematic`` become kinematic configurations
(prescribed, thesis §3.6).

Gravity: URDF carries none; the default is (0, 0, -9.81), the value ROS tools and Pinocchio use.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

from marionette_control import _core
from marionette_control.model.builder import DEFAULT_FORCING, SystemBuilder, rotation_rpy

SUPPORTED_JOINTS = ("revolute", "continuous", "prismatic", "fixed")
#: Relative size of an axis component off the coordinate axis that still counts as zero.
AXIS_TOLERANCE = 1e-12
#: An inertia tensor's smallest principal moment may be as low as -(absolute + relative x largest).
INERTIA_ABSOLUTE_TOLERANCE = 1e-12  # kg m^2
INERTIA_RELATIVE_TOLERANCE = 1e-9
#: What the import does with ``<dynamics friction>`` (Coulomb friction, not modelled by the core).
FRICTION_OPTIONS = ("ignore", "refuse")
_AXES = "xyz"
# Half-turn that reverses axis a: Rz(pi) reverses x and y, Rx(pi) reverses z.
_FLIP = {0: np.diag([-1.0, -1.0, 1.0]), 1: np.diag([-1.0, -1.0, 1.0]), 2: np.diag([1.0, -1.0, -1.0])}


class UrdfError(ValueError):
    """A URDF that cannot be imported; the message names the file, the element and what is supported."""


class UrdfWarning(UserWarning):
    """Something of a URDF that the model keeps but does not simulate (Coulomb friction)."""


def inertia_problem(tensor: np.ndarray) -> str | None:
    """Why a symmetric (3, 3) inertia tensor is not positive semi-definite within the module's tolerances, or
    None when it is (see the module docstring)."""
    moments = np.linalg.eigvalsh(tensor)
    floor = INERTIA_ABSOLUTE_TOLERANCE + INERTIA_RELATIVE_TOLERANCE * float(np.abs(moments).max())
    if moments.min() >= -floor:
        return None
    return (f"the inertia tensor must be positive semi-definite (principal moments >= -{floor:.3g} kg m^2), its "
            f"principal moments are {moments.tolist()}")


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
            return r_origin, np.maximum(np.diag(tensor), 0.0)
        moments, v = np.linalg.eigh(tensor)
        if np.linalg.det(v) < 0:
            v[:, 2] = -v[:, 2]
        # Negative moments are round-off within the tolerance checked at parsing (inertia_problem).
        return r_origin @ v, np.maximum(moments, 0.0)


@dataclass(frozen=True)
class UrdfLink:
    name: str
    inertial: Inertial | None


@dataclass(frozen=True)
class Mimic:
    """A joint's ``<mimic>``: q_joint = multiplier q_leader + offset."""

    leader: str
    multiplier: float = 1.0
    offset: float = 0.0


@dataclass(frozen=True)
class UrdfJoint:
    """One ``<joint>``; ``axis`` is the unit axis (3,) in the joint frame for moving joints (exactly a coordinate
    axis when within ``AXIS_TOLERANCE`` of one), ``damping`` and ``friction`` are the ``<dynamics>`` of a moving
    joint (0 for fixed joints), ``limits`` has the ``<limit>`` attributes that were given (lower, upper, velocity,
    effort)."""

    name: str
    type: str
    parent: str
    child: str
    xyz: np.ndarray
    rpy: np.ndarray
    axis: np.ndarray | None
    damping: float
    limits: dict = field(default_factory=dict)
    friction: float = 0.0
    mimic: Mimic | None = None


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
    problem = inertia_problem(tensor)
    if problem is not None:
        raise UrdfError(f"{w}: {problem}")
    return Inertial(mass, xyz, rpy, tensor)


def _parse_axis(elem: ET.Element, where: str) -> np.ndarray:
    """The joint's unit axis (3,); a coordinate axis exactly when the others are within AXIS_TOLERANCE."""
    a = elem.find("axis")
    axis = _floats(None if a is None else a.get("xyz"), 3, (1.0, 0.0, 0.0), f"{where} <axis xyz>")
    norm = float(np.linalg.norm(axis))
    if norm == 0.0:
        raise UrdfError(f"{where} <axis xyz>: the axis is the zero vector")
    unit = axis / norm
    k = int(np.argmax(np.abs(unit)))
    if np.all(np.abs(np.delete(unit, k)) <= AXIS_TOLERANCE):
        unit = np.zeros(3)
        unit[k] = 1.0 if axis[k] > 0 else -1.0
    return unit


def _parse_mimic(elem: ET.Element, where: str, jtype: str) -> Mimic | None:
    me = elem.find("mimic")
    if me is None or jtype == "fixed":  # a fixed joint has no configuration to couple: its <mimic> says nothing
        return None
    leader = me.get("joint")
    if not leader:
        raise UrdfError(f"{where} <mimic>: needs joint=\"<the joint it follows>\"")
    return Mimic(leader, _float_attr(me, "multiplier", f"{where} <mimic>", 1.0),
                 _float_attr(me, "offset", f"{where} <mimic>", 0.0))


#: parsed files by (path, modification time, size): a model file is often built many times (the calibration
#: builds one per parameter change); the parsed robot is immutable, so it is shared
_PARSED: dict[tuple, UrdfRobot] = {}


def parse_urdf(source: str | os.PathLike) -> UrdfRobot:
    """Parses a URDF file (a path) or URDF text (a string starting with ``<``) and checks that it is a tree. A file
    unchanged since it was last parsed (same modification time and size) is not parsed again."""
    text_given = isinstance(source, str) and source.lstrip().startswith("<")
    if text_given:
        return _parse_urdf(source)
    try:
        st = os.stat(source)
    except OSError as e:
        raise UrdfError(f"{os.fspath(source)}: cannot read: {e}") from None
    key = (os.path.abspath(source), st.st_mtime_ns, st.st_size)
    if key not in _PARSED:
        _PARSED[key] = _parse_urdf(source)
    return _PARSED[key]


def _parse_urdf(source: str | os.PathLike) -> UrdfRobot:
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
        axis = None if jtype == "fixed" else _parse_axis(je, where)
        damping = friction = 0.0
        de = je.find("dynamics")
        if de is not None and jtype != "fixed":  # URDF gives dynamics to moving joints only
            damping = _float_attr(de, "damping", f"{where} <dynamics>", 0.0)
            friction = _float_attr(de, "friction", f"{where} <dynamics>", 0.0)
            for what, value in (("damping", damping), ("friction", friction)):
                if value < 0:
                    raise UrdfError(f"{where} <dynamics {what}>: must be >= 0, got {value}")
        limits = {}
        lim = je.find("limit")
        if lim is not None:
            for k in ("lower", "upper", "velocity", "effort"):
                if lim.get(k) is not None:
                    limits[k] = _float_attr(lim, k, f"{where} <limit>")
        joints[name] = UrdfJoint(name, jtype, parent, child, xyz, rpy, axis, damping, limits, friction,
                                 _parse_mimic(je, where, jtype))

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
    for j in result:
        if j.mimic is not None:
            _check_mimic(label, j, joints)
    root_link = links[roots[0]]
    if roots[0] == "world" and root_link.inertial is not None and root_link.inertial.mass > 0:
        raise UrdfError(f"{label}: the root link 'world' is the world frame and cannot carry an <inertial>")
    return UrdfRobot(robot_name, label, roots[0], links, result)


def _check_mimic(label: str, joint: UrdfJoint, joints: Mapping[str, UrdfJoint]) -> None:
    """The leader of a mimic joint is another moving joint, and following leaders never comes back."""
    where = f"{label}: joint '{joint.name}' <mimic joint=\"{joint.mimic.leader}\">"
    seen = [joint.name]
    j = joint
    while j.mimic is not None:
        leader = joints.get(j.mimic.leader)
        if leader is None or leader.type == "fixed":
            what = "not a joint of the robot" if leader is None else "a fixed joint"
            raise UrdfError(f"{where}: joint '{j.mimic.leader}' is {what}; a mimic joint follows a revolute, "
                            "continuous or prismatic joint")
        if leader.name in seen:
            raise UrdfError(f"{where}: the mimic joints {' -> '.join(seen + [leader.name])} follow each other in "
                            "a cycle; one of them must be a joint of its own")
        seen.append(leader.name)
        j = leader


# --------------------------------------------------------------------------------------------- building


def _axis_rotation(axis: np.ndarray) -> tuple[int, np.ndarray | None]:
    """(k, R) with R e_k = axis (unit, (3,)): a motion about or along ``axis`` is R Prim_k(q) R^T exactly.

    k is the coordinate axis nearest to ``axis``; R is None for +e_k, contains the half-turn _FLIP[k]
    for an axis nearer -e_k, and otherwise the rotation of least angle taking +-e_k onto ``axis``
    (Rodrigues, I + [v]x + [v]x^2 / (1 + c) with v = b x axis, c = b . axis >= 1/sqrt(3)).
    """
    k = int(np.argmax(np.abs(axis)))
    b = np.zeros(3)
    b[k] = 1.0 if axis[k] > 0 else -1.0
    flip = np.eye(3) if axis[k] > 0 else _FLIP[k]
    if np.array_equal(axis, b):
        return k, None if axis[k] > 0 else flip
    v = np.cross(b, axis)
    vx = np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])
    turn = np.eye(3) + vx + vx @ vx / (1.0 + float(b @ axis))
    return k, turn @ flip




def _is_identity(xyz: np.ndarray, rpy: np.ndarray) -> bool:
    return not np.any(xyz) and not np.any(rpy)


def add_urdf(builder: SystemBuilder, robot: UrdfRobot, kinematic: Iterable[str] = (),
             rename: Mapping[str, str] | None = None, existing_frames: Iterable[str] = (),
             created: set[str] | None = None, friction: str = "ignore") -> dict[str, str]:
    """Adds the robot's frames, masses, damping and mimic couplings to ``builder``; returns {joint name:
    configuration name}.

    ``kinematic`` lists joint names whose configurations are kinematic (prescribed); ``rename`` maps joint
    names to configuration names. ``existing_frames`` are frame names already in the builder (the generated
    names must not collide with them); ``created``, if given, receives every frame name added. ``friction``
    (one of FRICTION_OPTIONS) says what to do with ``<dynamics friction>``: ``ignore`` warns once
    (UrdfWarning) and builds without it, ``refuse`` raises UrdfError naming the first joint.
    """
    if friction not in FRICTION_OPTIONS:
        raise UrdfError(f"{robot.source}: friction must be one of {', '.join(FRICTION_OPTIONS)}, got {friction!r}")
    existing_frames = set(existing_frames)
    rename = dict(rename or {})
    kinematic = set(kinematic)
    moving = set(robot.moving_joints)
    for what, names in (("kinematic", kinematic), ("rename", rename)):
        for n in names:
            if n not in moving:
                raise UrdfError(f"{robot.source}: {what} names joint '{n}', which is not a revolute, continuous or "
                                f"prismatic joint of the robot (moving joints: {', '.join(sorted(moving)) or 'none'})")
    _handle_friction(robot, friction)
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
        if not np.any(inertial.xyz) and np.array_equal(rot, np.eye(3)):
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
        if is_kin and j.mimic is not None:
            raise UrdfError(f"{robot.source}: joint '{j.name}' mimics joint '{j.mimic.leader}' and cannot be "
                            "kinematic (it follows its leader; declare the leader kinematic instead)")
        index, turn = _axis_rotation(j.axis)
        prim = ("r" if j.type in ("revolute", "continuous") else "t") + _AXES[index]
        if turn is None:
            if _is_identity(j.xyz, j.rpy):
                base = parent
            else:
                base = fresh(f"{j.name}_origin")
                builder.const_frame(base, parent, translation=j.xyz, rotation=rotation_rpy(*j.rpy))
            builder.frame(child, base, prim, config=config, kinematic=is_kin)
        else:
            base = fresh(f"{j.name}_origin")
            builder.const_frame(base, parent, translation=j.xyz, rotation=rotation_rpy(*j.rpy) @ turn)
            moved = fresh(f"{j.name}_motion")
            builder.frame(moved, base, prim, config=config, kinematic=is_kin)
            builder.const_frame(child, moved, rotation=turn.T)
        if j.damping:
            builder.damping(config, j.damping)
        add_link(j.child)
    for j in robot.joints:
        if j.mimic is None:
            continue
        if j.mimic.leader not in configs:
            raise UrdfError(f"{robot.source}: joint '{j.name}' mimics joint '{j.mimic.leader}', which is not a "
                            "moving joint of the tree")
        builder.coupling_constraint(configs[j.name], configs[j.mimic.leader], j.mimic.multiplier, j.mimic.offset,
                                    name=f"{j.name}_mimic")
    if created is not None:
        created.update(used - set(existing_frames) - {"world"})
    return configs


def _handle_friction(robot: UrdfRobot, friction: str) -> None:
    """Refuses or warns about the robot's Coulomb friction (see add_urdf)."""
    rubbing = joint_friction(robot)
    if not rubbing:
        return
    if friction == "refuse":
        name, value = next(iter(rubbing.items()))
        raise UrdfError(f"{robot.source}: joint '{name}' <dynamics friction={value}>: Coulomb friction is not "
                        f"modelled and friction='refuse' (friction='ignore' builds the model without it)")
    listed = ", ".join(f"{n} {v:g}" for n, v in list(rubbing.items())[:3])
    more = f" and {len(rubbing) - 3} more" if len(rubbing) > 3 else ""
    warnings.warn(f"{robot.source}: Coulomb <dynamics friction> of {len(rubbing)} joint(s) ({listed}{more} N m or "
                  "N) is kept in the description but not simulated (friction='ignore')", UrdfWarning, stacklevel=3)


def load_urdf(source: str | os.PathLike, kinematic: Iterable[str] = (), rename: Mapping[str, str] | None = None,
              gravity: Sequence[float] = (0.0, 0.0, -9.81), name: str | None = None,
              friction: str = "ignore", forcing: str = DEFAULT_FORCING) -> _core.Model:
    """Builds the core model of a URDF (a path or URDF text); see the module docstring for the mapping and
    add_urdf for ``friction``. URDF says nothing about the integrator: ``forcing`` is the forcing
    discretization of the model (``builder.FORCING_RULES``; the joints' damping is a force)."""
    robot = parse_urdf(source)
    b = SystemBuilder(name or robot.name, gravity=gravity, forcing=forcing)
    add_urdf(b, robot, kinematic=kinematic, rename=rename, friction=friction)
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


def joint_friction(robot: UrdfRobot) -> dict[str, float]:
    """{joint name: Coulomb friction (N m or N)} of the moving joints whose ``<dynamics friction>`` is not 0, in
    tree order: the values the model keeps but does not simulate."""
    return {j.name: j.friction for j in robot.joints if j.friction}


__all__ = ["UrdfError", "UrdfWarning", "UrdfRobot", "UrdfJoint", "UrdfLink", "Inertial", "Mimic", "parse_urdf",
           "add_urdf", "load_urdf", "without_length_joint", "joint_limits", "joint_friction", "inertia_problem",
           "SUPPORTED_JOINTS", "AXIS_TOLERANCE", "INERTIA_ABSOLUTE_TOLERANCE", "INERTIA_RELATIVE_TOLERANCE",
           "FRICTION_OPTIONS"]
