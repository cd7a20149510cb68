"""URDF import (marionette_control.model.urdf): the mapping onto frames and masses, and the error cases.

Values are compared with closed forms (exact to rounding, 1e-12); the independent-library
comparison is in test_pinocchio_crosscheck.py. Every rejected construct must name the joint
(or link) and say what is supported.
"""

from __future__ import annotations

import numpy as np
import pytest

from marionette_control import _core
from marionette_control.model import rotation_rpy
from marionette_control.model.urdf import UrdfError, load_urdf, parse_urdf, without_length_joint


def robot(body: str, name: str = "r") -> str:
    return f'<?xml version="1.0"?><robot name="{name}"><link name="base"/>{body}</robot>'


def link(name: str, inertial: str = "") -> str:
    return f'<link name="{name}">{inertial}</link>'


def inertial(mass=1.0, xyz="0 0 0", rpy="0 0 0", ixx=0.1, ixy=0.0, ixz=0.0, iyy=0.1, iyz=0.0, izz=0.1) -> str:
    return (f'<inertial><origin xyz="{xyz}" rpy="{rpy}"/><mass value="{mass}"/><inertia ixx="{ixx}" ixy="{ixy}" '
            f'ixz="{ixz}" iyy="{iyy}" iyz="{iyz}" izz="{izz}"/></inertial>')


def joint(name: str, jtype: str = "revolute", parent: str = "base", child: str = "a", axis: str | None = "1 0 0",
          origin: str = "", extra: str = "") -> str:
    ax = "" if axis is None else f'<axis xyz="{axis}"/>'
    return (f'<joint name="{name}" type="{jtype}"><parent link="{parent}"/><child link="{child}"/>{origin}{ax}'
            f'{extra}</joint>')


ONE_LINK = robot(joint("j") + link("a", inertial(xyz="0 0 -1")))


# ----------------------------------------------------------------------------------------------- mapping


def test_joint_names_become_configurations_and_fixed_joints_add_none():
    urdf = robot(joint("shoulder") + link("a", inertial(xyz="0 0 -0.5"))
                 + joint("mount", "fixed", parent="a", child="b", axis=None, origin='<origin xyz="0 0 -1"/>')
                 + link("b") + joint("elbow", "continuous", parent="b", child="c", axis="0 1 0")
                 + link("c", inertial(xyz="0 0 -0.5"))
                 + joint("slide", "prismatic", parent="base", child="d", axis="0 0 1") + link("d", inertial()))
    m = load_urdf(urdf)
    assert m.config_names == ["shoulder", "elbow", "slide"]
    assert m.frame_transforms[m.frame_index("a")] == "rx"
    assert m.frame_transforms[m.frame_index("c")] == "ry"
    assert m.frame_transforms[m.frame_index("d")] == "tz"
    assert m.name == "r"


def test_rename_and_kinematic():
    urdf = robot(joint("j") + link("a", inertial(xyz="0 0 -1"))
                 + joint("rail", "prismatic", child="c", axis="0 1 0") + link("c"))
    m = load_urdf(urdf, kinematic=["rail"], rename={"j": "theta"})
    assert m.config_names == ["theta", "rail"]
    assert list(m.kinematic) == [False, True]


def test_origin_and_axis_give_the_closed_form_placement():
    xyz, rpy = np.array([0.1, -0.2, 0.3]), np.array([0.3, -0.4, 0.5])
    urdf = robot(joint("j", axis="0 0 1", origin=f'<origin xyz="{" ".join(map(str, xyz))}" '
                                                f'rpy="{" ".join(map(str, rpy))}"/>') + link("a", inertial()))
    m = load_urdf(urdf)
    q = 0.7
    c, s = np.cos(q), np.sin(q)
    expected = np.eye(4)
    expected[:3, :3] = rotation_rpy(*rpy) @ np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])
    expected[:3, 3] = xyz
    np.testing.assert_allclose(m.placements(np.array([q]))[m.frame_index("a")], expected, atol=1e-14)


@pytest.mark.parametrize("axis", ["x", "y", "z"])
@pytest.mark.parametrize("jtype", ["revolute", "prismatic"])
def test_negative_axis_is_exact(axis, jtype):
    """A joint about -a at q is the joint about +a at -q: same child placement (to rounding)."""
    vec = {"x": "1 0 0", "y": "0 1 0", "z": "0 0 1"}[axis]
    neg = " ".join(str(-float(v)) for v in vec.split())
    origin = '<origin xyz="0.1 0.2 0.3" rpy="0.2 0.1 -0.3"/>'
    plus = load_urdf(robot(joint("j", jtype, axis=vec, origin=origin) + link("a", inertial(xyz="0.1 0 -1"))))
    minus = load_urdf(robot(joint("j", jtype, axis=neg, origin=origin) + link("a", inertial(xyz="0.1 0 -1"))))
    for q in (0.0, 0.4, -1.3):
        ga = plus.placements(np.array([q]))[plus.frame_index("a")]
        gb = minus.placements(np.array([-q]))[minus.frame_index("a")]
        np.testing.assert_allclose(gb, ga, atol=1e-14)
    np.testing.assert_allclose(_core.mass_matrix(minus, np.array([0.3])), _core.mass_matrix(plus, np.array([-0.3])),
                               atol=1e-14)


def test_inertia_rotated_to_principal_axes():
    """The mass frame's principal inertia, rotated back into the link frame, is R_o I R_o^T."""
    rpy = np.array([0.3, -0.2, 0.6])
    tensor = np.array([[0.04, 0.005, -0.003], [0.005, 0.05, 0.002], [-0.003, 0.002, 0.03]])
    urdf = robot(joint("j", axis="0 0 1") + link("a", inertial(
        mass=2.0, xyz="0.1 0.2 -0.3", rpy=" ".join(map(str, rpy)), ixx=tensor[0, 0], ixy=tensor[0, 1],
        ixz=tensor[0, 2], iyy=tensor[1, 1], iyz=tensor[1, 2], izz=tensor[2, 2])))
    m = load_urdf(urdf)
    (name, inertia), = m.masses.items()
    assert name == "a_inertial"
    g = m.placements(np.zeros(1))
    r_link = g[m.frame_index("a"), :3, :3]
    r_mass = g[m.frame_index(name), :3, :3]
    rel = r_link.T @ r_mass
    np.testing.assert_allclose(rel @ np.diag(inertia[3:]) @ rel.T, rotation_rpy(*rpy) @ tensor @ rotation_rpy(*rpy).T,
                               atol=1e-15)
    np.testing.assert_allclose(r_link.T @ (g[m.frame_index(name), :3, 3] - g[m.frame_index("a"), :3, 3]),
                               [0.1, 0.2, -0.3], atol=1e-15)
    assert inertia[0] == 2.0
    # Rotation about z of this body: M = Izz_link + m (x^2 + y^2)
    r = rotation_rpy(*rpy) @ tensor @ rotation_rpy(*rpy).T
    np.testing.assert_allclose(_core.mass_matrix(m, np.array([0.2]))[0, 0], r[2, 2] + 2.0 * (0.1**2 + 0.2**2),
                               rtol=1e-14)


def test_diagonal_inertia_at_origin_sits_on_the_link_frame():
    m = load_urdf(robot(joint("j") + link("a", inertial(ixx=0.1, iyy=0.2, izz=0.3))
                        + joint("k", parent="a", child="b") + link("b", inertial(xyz="0 0 -1"))))
    assert set(m.masses) == {"a", "b_inertial"}
    np.testing.assert_array_equal(m.masses["a"], [1, 1, 1, 0.1, 0.2, 0.3])


def test_root_named_world_is_the_world_frame():
    urdf = ('<robot name="w"><link name="world"/>' + joint("j", parent="world") + link("a", inertial(xyz="0 0 -1"))
            + "</robot>")
    m = load_urdf(urdf)
    assert m.frame_names.count("world") == 1
    assert m.frame_parents[m.frame_index("a")] == 0


def test_damping_limits_and_ignored_elements():
    urdf = robot(joint("j", extra='<limit lower="-1" upper="2" velocity="3" effort="0"/>'
                       '<dynamics damping="0.25" friction="0"/><calibration rising="0"/>'
                       '<safety_controller k_velocity="1"/>')
                 + link("a", inertial(xyz="0 0 -1") + '<visual><geometry><box size="1 1 1"/></geometry></visual>')
                 + '<transmission name="t"/><gazebo/>')
    r = parse_urdf(urdf)
    assert r.joint("j").limits == {"lower": -1.0, "upper": 2.0, "velocity": 3.0, "effort": 0.0}
    m = load_urdf(urdf)
    qdd0, _ = _core.forward_dynamics(m, np.zeros(1), np.zeros(1), np.zeros(0), np.zeros(0))
    qdd1, _ = _core.forward_dynamics(m, np.zeros(1), np.ones(1), np.zeros(0), np.zeros(0))
    mass = _core.mass_matrix(m, np.zeros(1))[0, 0]
    np.testing.assert_allclose((qdd1 - qdd0) * mass, -0.25, rtol=1e-13)


def test_file_path_and_arm_urdf():
    from marionette_control.resources import config_file

    r = parse_urdf(config_file("marionette_arm.urdf"))
    assert r.name == "marionette_arm"
    assert r.moving_joints == ["shoulder", "elbow", "carriage", "string_length"]
    m = load_urdf(config_file("marionette_arm.urdf"), kinematic=["carriage", "string_length"])
    assert m.config_names == ["shoulder", "elbow", "carriage", "string_length"]
    tree = without_length_joint(r, "string_length")
    assert tree.moving_joints == ["shoulder", "elbow", "carriage"] and "string_end" not in tree.links
    assert set(tree.links) == set(r.links) - {"string_end"}


@pytest.mark.parametrize("body, message", [
    (joint("winch", "revolute", child="end") + link("end"), "must be prismatic"),
    (joint("winch", "prismatic", child="end", axis="0 0 -1") + link("end", inertial()), "must carry no mass"),
    (joint("winch", "prismatic", child="end", axis="0 0 -1") + link("end")
     + joint("j", parent="end", child="a") + link("a", inertial()), "must be a leaf, but joints j hang from it"),
])
def test_a_length_joint_is_a_massless_prismatic_leaf(body, message):
    with pytest.raises(UrdfError, match=rf"joint 'winch' \(the length of a string\).*{message}"):
        without_length_joint(parse_urdf(robot(body)), "winch")


def test_axis_tolerance_accepts_rounding_noise_only():
    load_urdf(robot(joint("j", axis="1e-17 1 0") + link("a", inertial(xyz="0 0 -1"))))
    with pytest.raises(UrdfError, match="joint 'j'.*not along a coordinate axis"):
        load_urdf(robot(joint("j", axis="1e-6 1 0") + link("a", inertial(xyz="0 0 -1"))))


# ----------------------------------------------------------------------------------------------- errors

A = link("a", inertial(xyz="0 0 -1"))


@pytest.mark.parametrize("urdf, pattern", [
    (robot(joint("free", "floating", axis=None) + A),
     r"joint 'free': type 'floating' is not supported; supported joint types are revolute, continuous, prismatic, "
     r"fixed"),
    (robot(joint("pl", "planar", axis="0 0 1") + A), r"joint 'pl': type 'planar' is not supported"),
    (robot(joint("sc", "screw") + A), r"joint 'sc': type 'screw' is not supported"),
    (robot(joint("tilted", axis="0.6 0.8 0") + A),
     r"joint 'tilted' \(type revolute\): axis \[0.6, 0.8, 0.0\] is not along a coordinate axis.*supported axes are "
     r"\+-x, \+-y, \+-z"),
    (robot(joint("zero", axis="0 0 0") + A), r"joint 'zero' <axis xyz>: the axis is the zero vector"),
    (robot(joint("j") + A + joint("m", parent="a", child="b", extra='<mimic joint="j" multiplier="2"/>')
           + link("b", inertial())), r"joint 'm': <mimic> is not supported"),
    (robot(joint("fr", extra='<dynamics damping="0.1" friction="0.5"/>') + A),
     r"joint 'fr' <dynamics friction=0.5>: Coulomb friction is not modelled"),
    (robot(joint("d", extra='<dynamics damping="-1"/>') + A), r"joint 'd' <dynamics damping>: must be >= 0"),
    (robot(joint("j", parent="nowhere") + A), r"joint 'j': parent link 'nowhere' is not defined"),
    (robot(joint("j", child="ghost") + A), r"joint 'j': child link 'ghost' is not defined"),
    (robot(joint("j") + A + joint("k", child="a")), r"joint 'k': link 'a' is already the child of joint 'j'"),
    (robot(A + link("b")), r"exactly one root link.*found 3: base, a, b"),
    (robot(joint("j") + A + joint("k", parent="a", child="b") + link("b", inertial())
           + joint("c", parent="b", child="base")), r"found 0: none \(there is a cycle\)"),
    (robot(joint("j") + link("a", '<inertial><inertia ixx="1" iyy="1" izz="1"/></inertial>')),
     r"link 'a' <inertial>: missing <mass"),
    (robot(joint("j") + link("a", inertial(mass=-1))), r"link 'a' <inertial><mass>: mass must be >= 0"),
    (robot(joint("j") + link("a", inertial(ixx=1.0, iyy=1.0, izz=-3.0))),
     r"link 'a' <inertial><inertia>: the inertia tensor must be positive semi-definite"),
    (robot(joint("j") + link("a", inertial(xyz="0 0 abc"))),
     r"link 'a' <inertial> <origin xyz>: expected 3 numbers, got '0 0 abc'"),
    (robot(joint("j", origin='<origin xyz="0 0"/>') + A), r"joint 'j' <origin xyz>: expected 3 numbers, got 2"),
    (robot(joint("j", origin='<origin rpy="0 nan 0"/>') + A), r"joint 'j' <origin rpy>: numbers must be finite"),
    (robot(joint("j") + A + link("a")), r"link 'a' is defined twice"),
    (robot(joint("j") + A + joint("j", parent="a", child="b") + link("b")), r"joint 'j' is defined twice"),
    ("<robot><link name='a'>", r"not well-formed XML"),
    ("<model name='x'/>", r"the root element must be <robot>"),
])
def test_rejected_constructs_name_the_element(urdf, pattern):
    with pytest.raises(UrdfError, match=pattern) as info:
        load_urdf(urdf)
    assert "<urdf string>" in str(info.value)


def test_errors_name_the_file(tmp_path):
    p = tmp_path / "bad.urdf"
    p.write_text(robot(joint("free", "floating", axis=None) + A))
    with pytest.raises(UrdfError, match=r"bad\.urdf: joint 'free'"):
        load_urdf(p)
    with pytest.raises(UrdfError, match=r"missing\.urdf: cannot read"):
        load_urdf(tmp_path / "missing.urdf")


def test_kinematic_and_rename_must_name_moving_joints():
    urdf = robot(joint("j") + A + joint("f", "fixed", parent="a", child="b", axis=None) + link("b"))
    with pytest.raises(UrdfError, match=r"kinematic names joint 'f', which is not a revolute, continuous or "
                                        r"prismatic joint"):
        load_urdf(urdf, kinematic=["f"])
    with pytest.raises(UrdfError, match=r"rename names joint 'nope'"):
        load_urdf(urdf, rename={"nope": "x"})


def test_damping_on_a_kinematic_joint_is_rejected():
    urdf = robot(joint("j", extra='<dynamics damping="0.1"/>') + A
                 + joint("k", "prismatic", child="b", axis="0 1 0") + link("b", inertial()))
    load_urdf(urdf, kinematic=["k"])
    with pytest.raises(UrdfError, match=r"joint 'j' is kinematic \(prescribed\) and cannot have <dynamics damping>"):
        load_urdf(urdf, kinematic=["j"])


def test_a_joint_moving_no_mass_is_reported_with_the_file():
    with pytest.raises(UrdfError, match=r"<urdf string>: .*'j' moves no mass"):
        load_urdf(robot(joint("j") + link("a")))


def test_forcing_option_of_the_load_path():
    """URDF says nothing about the integrator: ``load_urdf(..., forcing=)`` chooses the forcing discretization of the
    joints' damping (thesis (4.12); default thesis), a bad name is refused with the choices."""
    urdf = robot(joint("j", extra='<dynamics damping="0.25"/>') + link("a", inertial(xyz="0 0 -1")))
    assert load_urdf(urdf).forcing == "thesis"
    m = load_urdf(urdf, forcing="symmetric")
    assert m.forcing == "symmetric" and m.hash != load_urdf(urdf).hash
    with pytest.raises(ValueError, match="forcing must be one of thesis, symmetric"):
        load_urdf(urdf, forcing="euler")
