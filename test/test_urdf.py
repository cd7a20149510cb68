"""URDF import (marionette_control.model.urdf): the mapping onto frames and masses, and the error cases.

Values are compared with closed forms (exact to rounding, 1e-12); the independent-library
comparisons are in test_pinocchio_crosscheck.py and test_example_robot_data.py. Every rejected construct must name the joint
(or link) and say what is supported.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from marionette_control import _core
from marionette_control.model import SystemBuilder, rotation_rpy
from marionette_control.model.urdf import (UrdfError, UrdfWarning, add_urdf, joint_friction, load_urdf, parse_urdf,
                                           without_length_joint)
from random_trees import EPS, assert_close, central_fd, richardson_fd, step_fn


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
A = link("a", inertial(xyz="0 0 -1"))


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


def axis_angle(axis: np.ndarray, q: float) -> np.ndarray:
    """Rotation by q about the unit axis (Rodrigues), the closed form a general revolute joint must give."""
    k = np.array([[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]], [-axis[1], axis[0], 0.0]])
    return np.eye(3) + np.sin(q) * k + (1.0 - np.cos(q)) * k @ k


@pytest.mark.parametrize("axis", ["0.6 0.8 0", "1e-9 0 1", "0.121869 -0.992546 -4.37114e-08", "-1 -2 0.5",
                                  "0 -0.3 -2"])
@pytest.mark.parametrize("jtype", ["revolute", "prismatic"])
def test_any_axis_is_exact(axis, jtype):
    """A joint about/along a unit axis a moves its link by Rot_a(q) (or q a) after the joint origin, to rounding,
    whether a is near a coordinate axis (1e-9 off it), far from every one, or a stock description's (Romeo's LHand)."""
    a = np.array([float(v) for v in axis.split()])
    a /= np.linalg.norm(a)
    xyz, rpy = np.array([0.1, 0.2, -0.3]), np.array([0.3, -0.2, 0.1])
    origin = f'<origin xyz="{" ".join(map(str, xyz))}" rpy="{" ".join(map(str, rpy))}"/>'
    m = load_urdf(robot(joint("j", jtype, axis=axis, origin=origin) + link("a", inertial(xyz="0.1 0 -1"))))
    for q in (0.0, 0.7, -2.1):
        g = m.placements(np.array([q]))[m.frame_index("a")]
        motion = np.eye(4)
        if jtype == "revolute":
            motion[:3, :3] = axis_angle(a, q)
        else:
            motion[:3, 3] = q * a
        expected = np.eye(4)
        expected[:3, :3], expected[:3, 3] = rotation_rpy(*rpy), xyz
        np.testing.assert_allclose(g, expected @ motion, rtol=0, atol=1e-15)


def test_axis_within_rounding_of_a_coordinate_axis_is_that_axis():
    """Off-axis components up to AXIS_TOLERANCE (1e-12 of the length) are rounding: the joint is a primitive on the
    link frame itself, no constant frames around it."""
    m = load_urdf(robot(joint("j", axis="1e-17 1 0") + link("a", inertial(xyz="0 0 -1"))))
    assert m.frame_transforms[m.frame_index("a")] == "ry" and "j_motion" not in m.frame_names
    r = parse_urdf(robot(joint("j", axis="0 -2 1e-13") + link("a", inertial(xyz="0 0 -1"))))
    np.testing.assert_array_equal(r.joint("j").axis, [0.0, -1.0, 0.0])
    m = load_urdf(robot(joint("j", axis="1e-11 1 0") + link("a", inertial(xyz="0 0 -1"))))
    assert "j_motion" in m.frame_names  # beyond the tolerance: the exact general axis


# ------------------------------------------------------------------------------------- inertia tolerances


def test_round_off_inertia_is_accepted_and_indefinite_refused_with_its_moments():
    # iCub's head: every entry 0 but ixz = 2.40741e-35 (principal moments -2.4e-35, 0, 2.4e-35).
    m = load_urdf(robot(joint("j") + link("a", inertial(xyz="0 0 -1", ixx=0, iyy=0, izz=0, ixz=2.40741e-35))))
    assert np.all(next(iter(m.masses.values()))[3:] >= 0.0)
    # The absolute floor, 1e-12 kg m^2: a moment of -0.9e-12 of an otherwise zero tensor passes, -1.1e-12 does not.
    load_urdf(robot(joint("j") + link("a", inertial(xyz="0 0 -1", ixx=-0.9e-12, iyy=0, izz=0))))
    with pytest.raises(UrdfError, match=r"link 'a' <inertial><inertia>: the inertia tensor must be positive "
                                        r"semi-definite \(principal moments >= -1e-12 kg m\^2\), its principal "
                                        r"moments are \[-1.1e-12, 0.0, 0.0\]"):
        load_urdf(robot(joint("j") + link("a", inertial(xyz="0 0 -1", ixx=-1.1e-12, iyy=0, izz=0))))
    # The relative part, 1e-9 of the largest moment: 0.5e-9 of 10 passes, 2e-9 of it does not.
    load_urdf(robot(joint("j") + link("a", inertial(xyz="0 0 -1", ixx=10, iyy=10, izz=-5e-9))))
    with pytest.raises(UrdfError, match=r"principal moments are \[-2e-08, 10.0, 10.0\]"):
        load_urdf(robot(joint("j") + link("a", inertial(xyz="0 0 -1", ixx=10, iyy=10, izz=-2e-8))))


# ------------------------------------------------------------------------------------------ dynamics, mimic


def test_fixed_joint_dynamics_and_mimic_are_ignored():
    base = robot(joint("j") + A + joint("f", "fixed", parent="a", child="b", axis=None) + link("b", inertial()))
    noted = robot(joint("j") + A + joint("f", "fixed", parent="a", child="b", axis=None,
                                         extra='<dynamics damping="0.7" friction="2"/><mimic joint="j"/>')
                  + link("b", inertial()))
    assert load_urdf(noted).hash == load_urdf(base).hash
    assert parse_urdf(noted).joint("f").damping == 0.0 and parse_urdf(noted).joint("f").friction == 0.0


FRICTIONAL = robot(joint("j", extra='<dynamics damping="0.1" friction="0.5"/>') + A
                   + joint("k", parent="a", child="b", extra='<dynamics friction="0.25"/>') + link("b", inertial()))


def test_friction_is_kept_ignored_with_one_warning_or_refused():
    assert joint_friction(parse_urdf(FRICTIONAL)) == {"j": 0.5, "k": 0.25}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = load_urdf(FRICTIONAL)
    assert [str(w.message) for w in caught] == [
        "<urdf string>: Coulomb <dynamics friction> of 2 joint(s) (j 0.5, k 0.25 N m or N) is kept in the "
        "description but not simulated (friction='ignore')"]
    assert caught[0].category is UrdfWarning
    assert m.hash == load_urdf(FRICTIONAL.replace(' friction="0.5"', "").replace(' friction="0.25"', "")).hash
    with pytest.raises(UrdfError, match=r"joint 'j' <dynamics friction=0.5>: Coulomb friction is not modelled and "
                                        r"friction='refuse'"):
        load_urdf(FRICTIONAL, friction="refuse")
    with pytest.raises(UrdfError, match=r"friction must be one of ignore, refuse, got 'simulate'"):
        load_urdf(FRICTIONAL, friction="simulate")


def mimic_robot(multiplier="-2", offset="0.3", follower_extra="") -> str:
    return robot(joint("lead") + A + joint("follow", parent="a", child="b", axis="0 1 0",
                                           extra=f'<mimic joint="lead" multiplier="{multiplier}" offset="{offset}"/>'
                                                 f'{follower_extra}')
                 + link("b", inertial(xyz="0 0 -0.5")))


def test_mimic_is_a_coupling_constraint_kept_by_the_integrator():
    m = load_urdf(mimic_robot(), rename={"lead": "theta"})
    assert m.config_names == ["theta", "follow"]
    assert m.constraint_frames == [("follow_mimic", "coupling", "follow", "theta", (-2.0, 0.3))]
    h, Dh = m.constraints(np.array([0.4, 0.1]))
    np.testing.assert_allclose(h, [0.1 + 2 * 0.4 - 0.3], rtol=0, atol=1e-16)
    np.testing.assert_array_equal(Dh, [[2.0, 1.0]])
    np.testing.assert_array_equal(m.constraint_hessian(np.array([0.4, 0.1]), np.ones(1)), np.zeros((2, 2)))
    system = _core.DiscreteSystem(m, 0.01)
    q0 = np.array([0.5, 0.3 - 2 * 0.5])
    X = system.simulate(np.concatenate([q0, np.zeros(2)]), np.zeros((100, 0)))[0]
    assert np.abs(X[:, 1] + 2 * X[:, 0] - 0.3).max() <= 1e-9 and np.ptp(X[:, 0]) > 0.1


@pytest.mark.parametrize("urdf, kwargs, pattern", [
    (mimic_robot(), {"kinematic": ["follow"]},
     r"joint 'follow' mimics joint 'lead' and cannot be kinematic \(it follows its leader"),
    (robot(joint("j") + A + joint("m", parent="a", child="b", extra='<mimic joint="ghost"/>')
           + link("b", inertial())), {},
     r"joint 'm' <mimic joint=\"ghost\">: joint 'ghost' is not a joint of the robot"),
    (robot(joint("j") + A + joint("f", "fixed", parent="a", child="c", axis=None) + link("c")
           + joint("m", parent="c", child="b", extra='<mimic joint="f"/>') + link("b", inertial())), {},
     r"joint 'm' <mimic joint=\"f\">: joint 'f' is a fixed joint"),
    (robot(joint("p", extra='<mimic joint="q"/>') + A
           + joint("q", parent="a", child="b", extra='<mimic joint="p"/>') + link("b", inertial())), {},
     r"the mimic joints p -> q -> p follow each other in a cycle"),
    (mimic_robot(multiplier="x"), {}, r"joint 'follow' <mimic> attribute 'multiplier': expected 1 numbers"),
])
def test_bad_mimics_name_the_joint(urdf, kwargs, pattern):
    with pytest.raises(UrdfError, match=pattern):
        load_urdf(urdf, **kwargs)


@pytest.mark.parametrize("kinematic_leader", [False, True])
def test_step_derivatives_with_a_coupling_match_finite_differences(kinematic_leader):
    """The step's A, B and second derivatives with a mimic coupling (a dynamic or a kinematic leader) beside a
    distance constraint, a force input and damping, against finite differences of the step (random_trees' stencils:
    the same tolerances as the random-tree tests)."""
    urdf = robot(joint("lead", axis="0.3 1 0.2")
                 + link("a", inertial(xyz="0.1 0 -0.6", ixx=0.02, iyy=0.03, izz=0.01))
                 + joint("follow", parent="a", child="b", axis="0 0 1", origin='<origin xyz="0 0 -0.7"/>',
                         extra='<mimic joint="lead" multiplier="-0.7" offset="0.2"/>')
                 + link("b", inertial(mass=0.5, xyz="0.3 0 -0.2", ixx=0.01, iyy=0.02, izz=0.015))
                 + joint("free", "continuous", parent="b", child="c", axis="1 0 0", origin='<origin xyz="0.4 0 0"/>',
                         extra='<dynamics damping="0.2"/>')
                 + link("c", inertial(mass=0.4, xyz="0 0.2 -0.3", ixx=0.01, iyy=0.01, izz=0.01)))
    b = SystemBuilder("coupled", gravity=(0.0, 0.0, -9.81))
    add_urdf(b, parse_urdf(urdf), kinematic=["lead"] if kinematic_leader else [])
    b.config_force("free", input="torque")
    q0 = {"lead": 0.3, "follow": 0.2 - 0.7 * 0.3, "free": 0.5}
    m0 = b.build()
    tip = m0.placements(np.array([q0[c] for c in m0.config_names]))[m0.frame_index("c_inertial"), :3, 3]
    b.const_frame("anchor", "world", translation=tip + np.array([0.0, 0.3, 0.4]))
    b.distance_constraint("anchor", "c_inertial", 0.5, name="rod")
    m = b.build()
    assert m.constraint_names == ["follow_mimic", "rod"]
    q = np.array([q0[c] for c in m.config_names])
    system = _core.DiscreteSystem(m, 0.02, tolerance=1e-13)
    rho_next = [0.32] if kinematic_leader else []
    x = system.state_from_configs(q, q)
    u = np.concatenate([[0.4], rho_next])
    x_next, _, _ = system.step(x, u)
    assert np.abs(m.constraints(x_next[:m.nq])[0]).max() <= 1e-12
    _, A, B = system.linearize(x, u)
    assert_close(A, richardson_fd(step_fn(system, u=u), x), 1e-7, "A")
    assert_close(B, richardson_fd(step_fn(system, x=x), u), 1e-7, "B")
    fxx, fxu, fuu = system.second_order_full(x, u)
    assert_close(fxx, central_fd(lambda xx: system.linearize(xx, u)[1], x, EPS, 5), 1e-6, "fxx")
    assert_close(fuu, central_fd(lambda uu: system.linearize(x, uu)[2], u, EPS, 5), 1e-6, "fuu")


def test_a_massless_leader_is_carried_by_its_followers():
    """A mimic leader that moves no mass is a regular model when a joint coupled to it does (M alone is singular, the
    constrained step's Newton matrix is not); a coupled group that moves no mass at all is refused."""
    leader = joint("lead", child="l") + link("l")
    carried = robot(leader + joint("follow", child="b", extra='<mimic joint="lead" multiplier="-1"/>')
                    + link("b", inertial(xyz="0 0 -1")))
    m = load_urdf(carried)
    assert np.linalg.matrix_rank(_core.mass_matrix(m, np.zeros(2))) == 1
    X = _core.DiscreteSystem(m, 0.01).simulate(np.array([-0.4, 0.4, 0.0, 0.0]), np.zeros((50, 0)))[0]
    assert np.abs(X[:, 0] + X[:, 1]).max() <= 1e-9 and np.ptp(X[:, 1]) > 0.1
    empty = robot(leader + joint("follow", child="b", extra='<mimic joint="lead"/>') + link("b") + joint("k", child="c")
                  + link("c", inertial(xyz="0 0 -1")))
    with pytest.raises(UrdfError, match=r"dynamic configuration 'lead' moves no mass \(no frame with mass at or below "
                                        r"'l'\), nor does any configuration coupled to it"):
        load_urdf(empty)


def test_a_mimic_may_follow_a_mimic():
    urdf = robot(joint("j") + A + joint("m1", parent="a", child="b", extra='<mimic joint="j" multiplier="2"/>')
                 + link("b", inertial()) + joint("m2", parent="b", child="c", extra='<mimic joint="m1" offset="1"/>')
                 + link("c", inertial()))
    m = load_urdf(urdf)
    assert [c[2:] for c in m.constraint_frames] == [("m1", "j", (2.0, 0.0)), ("m2", "m1", (1.0, 1.0))]


# ----------------------------------------------------------------------------------------------- errors


@pytest.mark.parametrize("urdf, pattern", [
    (robot(joint("free", "floating", axis=None) + A),
     r"joint 'free': type 'floating' is not supported; supported joint types are revolute, continuous, prismatic, "
     r"fixed"),
    (robot(joint("pl", "planar", axis="0 0 1") + A), r"joint 'pl': type 'planar' is not supported"),
    (robot(joint("sc", "screw") + A), r"joint 'sc': type 'screw' is not supported"),
    (robot(joint("zero", axis="0 0 0") + A), r"joint 'zero' <axis xyz>: the axis is the zero vector"),
    (robot(joint("d", extra='<dynamics damping="-1"/>') + A), r"joint 'd' <dynamics damping>: must be >= 0"),
    (robot(joint("d", extra='<dynamics friction="-0.2"/>') + A), r"joint 'd' <dynamics friction>: must be >= 0"),
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
     r"link 'a' <inertial><inertia>: the inertia tensor must be positive semi-definite .*principal moments are "
     r"\[-3.0, 1.0, 1.0\]"),
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
