"""Cross-check against an independent library: Pinocchio (PyPI ``pin``) on the same URDFs.

For each URDF (a double pendulum; a 3-D chain with revolute/continuous/prismatic/fixed joints,
positive and negative axes along x, y and z, joint origins with rotations, an inertia tensor
that is not diagonal in a rotated inertial frame, joint damping; the marionette arm without
its string and its winch joint, every joint dynamic) and random configurations and velocities, this project's
continuous quantities equal Pinocchio's to 1e-9 (absolute, entries of order 0.01..10):

* mass matrix: ``_core.mass_matrix`` (d2L/dqdot2, thesis (3.10)) vs ``pin.crba``;
* gravity generalized forces: dV/dq = -dL/dq at qdot = 0 vs ``pin.computeGeneralizedGravity``;
* constraint-free forward dynamics: ``_core.forward_dynamics`` (damping included) vs ``pin.aba``
  with tau = -diag(damping) qdot (Pinocchio reads <dynamics damping> but ABA does not apply it).

Configurations are matched by joint name; Pinocchio stores a continuous joint as (cos, sin).
Measured when written (12 samples per URDF): largest differences 1.1e-14 (M), 1.4e-14 (gravity),
1.0e-13 (qddot). Link placements are compared too (``pin.framesForwardKinematics``), to 1e-12.
"""

from __future__ import annotations

import numpy as np
import pytest

from marionette_control import _core
from marionette_control.model.urdf import load_urdf, parse_urdf
from marionette_control.resources import config_file
from pinocchio_coordinates import PinCoordinates

pin = pytest.importorskip("pinocchio", reason="Pinocchio (PyPI 'pin', requirements/test.txt) is the independent peer")

TOL = 1e-9
SAMPLES = 12

DOUBLE_PENDULUM = """<?xml version="1.0"?>
<robot name="double_pendulum">
  <link name="base"/>
  <joint name="theta1" type="continuous">
    <parent link="base"/><child link="link1"/><axis xyz="1 0 0"/>
  </joint>
  <link name="link1">
    <inertial><origin xyz="0 0 -0.5"/><mass value="1.0"/>
      <inertia ixx="0.0833" ixy="0" ixz="0" iyy="0.0833" iyz="0" izz="0.001"/></inertial>
  </link>
  <joint name="theta2" type="revolute">
    <parent link="link1"/><child link="link2"/><origin xyz="0 0 -1.0"/><axis xyz="1 0 0"/>
    <limit lower="-3" upper="3" effort="0" velocity="10"/>
  </joint>
  <link name="link2">
    <inertial><origin xyz="0 0 -0.4"/><mass value="0.7"/>
      <inertia ixx="0.05" ixy="0" ixz="0" iyy="0.05" iyz="0" izz="0.002"/></inertial>
  </link>
</robot>
"""

MIXED_CHAIN = """<?xml version="1.0"?>
<robot name="mixed_chain">
  <link name="world"/>
  <joint name="yaw" type="revolute">
    <parent link="world"/><child link="turret"/>
    <origin xyz="0.1 -0.2 0.3" rpy="0.1 -0.2 0.3"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="10" velocity="5"/>
    <dynamics damping="0.3"/>
  </joint>
  <link name="turret">
    <inertial><origin xyz="0.02 0.01 0.1" rpy="0.3 0.2 -0.1"/><mass value="2.0"/>
      <inertia ixx="0.04" ixy="0.005" ixz="-0.003" iyy="0.05" iyz="0.002" izz="0.03"/></inertial>
  </link>
  <joint name="slide" type="prismatic">
    <parent link="turret"/><child link="slider"/>
    <origin xyz="0 0.05 0.2" rpy="0 0.4 0"/><axis xyz="0 -1 0"/>
    <limit lower="-1" upper="1" effort="10" velocity="1"/>
    <dynamics damping="1.5" friction="0"/>
  </joint>
  <link name="slider">
    <inertial><origin xyz="0.03 0 -0.02"/><mass value="0.8"/>
      <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.015"/></inertial>
  </link>
  <joint name="roll" type="continuous">
    <parent link="slider"/><child link="upper"/>
    <origin xyz="0.1 0 0" rpy="-0.5 0 0.7"/><axis xyz="1 0 0"/>
  </joint>
  <link name="upper">
    <inertial><origin xyz="0 0.05 -0.2" rpy="0 0 0.25"/><mass value="1.2"/>
      <inertia ixx="0.03" ixy="-0.004" ixz="0.001" iyy="0.025" iyz="0.006" izz="0.01"/></inertial>
  </link>
  <joint name="bracket" type="fixed">
    <parent link="upper"/><child link="bracket_link"/>
    <origin xyz="0 0.02 -0.4" rpy="0.2 0.1 -0.3"/>
  </joint>
  <link name="bracket_link">
    <inertial><origin xyz="0.01 0 0"/><mass value="0.3"/>
      <inertia ixx="0.001" ixy="0" ixz="0" iyy="0.002" iyz="0" izz="0.001"/></inertial>
  </link>
  <joint name="twist" type="revolute">
    <parent link="bracket_link"/><child link="lower"/>
    <origin xyz="0 0 -0.05"/><axis xyz="0 0 -1"/>
    <limit lower="-2" upper="2" effort="10" velocity="5"/>
    <dynamics damping="0.05"/>
  </joint>
  <link name="lower">
    <inertial><origin xyz="0.1 0 -0.1" rpy="0.5 -0.3 0.2"/><mass value="0.9"/>
      <inertia ixx="0.02" ixy="0.003" ixz="0.002" iyy="0.018" iyz="-0.001" izz="0.012"/></inertial>
  </link>
  <joint name="wrist" type="revolute">
    <parent link="lower"/><child link="hand"/>
    <origin xyz="0.2 0 -0.2" rpy="0 0 0"/><axis xyz="0 1 0"/>
    <limit lower="-2" upper="2" effort="10" velocity="5"/>
  </joint>
  <link name="hand">
    <inertial><origin xyz="0.05 0 0"/><mass value="0.4"/>
      <inertia ixx="0.002" ixy="0" ixz="0" iyy="0.003" iyz="0" izz="0.002"/></inertial>
  </link>
  <joint name="finger" type="prismatic">
    <parent link="hand"/><child link="fingertip"/>
    <origin xyz="0.1 0 0" rpy="0 0 1.0"/><axis xyz="-1 0 0"/>
    <limit lower="0" upper="0.1" effort="1" velocity="1"/>
  </joint>
  <link name="fingertip">
    <inertial><mass value="0.05"/>
      <inertia ixx="1e-4" ixy="0" ixz="0" iyy="1e-4" iyz="0" izz="1e-4"/></inertial>
  </link>
</robot>
"""


def _arm_urdf() -> str:
    """The arm's URDF without the winch joint string_length: the string's length, a massless leaf that the model
    does not take as a tree joint (it would be a zero row of the mass matrix in both libraries)."""
    urdf = config_file("marionette_arm.urdf").read_text()
    start, end = urdf.index('  <joint name="string_length"'), urdf.index('<link name="string_end"/>')
    return urdf[:start] + urdf[end + len('<link name="string_end"/>'):]


CASES = {"double_pendulum": lambda: DOUBLE_PENDULUM, "mixed_chain": lambda: MIXED_CHAIN,
         "marionette_arm": _arm_urdf}


class Pair(PinCoordinates):
    """The same URDF in both libraries, with the configuration maps between them."""

    def __init__(self, urdf: str):
        self.model = load_urdf(urdf)  # every joint dynamic, gravity (0, 0, -9.81) like Pinocchio's default
        self.pin = pin.buildModelFromXML(urdf)
        self.data = self.pin.createData()
        np.testing.assert_allclose(self.pin.gravity.linear, self.model.gravity, atol=0)
        assert self.model.nk == 0 and self.model.nq == self.pin.nv
        super().__init__(self.model.config_names, self.pin)
        self.damping = _damping_from_urdf(urdf, self.model.config_names)


def _damping_from_urdf(urdf: str, config_names) -> np.ndarray:
    robot = parse_urdf(urdf)
    return np.array([robot.joint(c).damping for c in config_names])


@pytest.fixture(params=sorted(CASES), scope="module")
def pair(request):
    urdf = CASES[request.param]()
    p = Pair(urdf)
    p.label = request.param
    return p


def _samples(p: Pair, seed: int):
    rng = np.random.default_rng(seed)
    for _ in range(SAMPLES):
        yield rng.uniform(-np.pi, np.pi, p.model.nq), rng.uniform(-2.0, 2.0, p.model.nq)


def test_mass_matrix_equals_pinocchio(pair):
    worst = 0.0
    for q, _ in _samples(pair, 1):
        ours = _core.mass_matrix(pair.model, q)
        M = pin.crba(pair.pin, pair.data, pair.pin_q(q))
        M = np.triu(M) + np.triu(M, 1).T  # crba fills the upper triangle
        theirs = pair.ours(M)
        worst = max(worst, np.abs(ours - theirs).max())
    assert worst <= TOL, f"{pair.label}: mass matrices differ by {worst:.2e}"


def test_gravity_equals_pinocchio(pair):
    worst = 0.0
    for q, _ in _samples(pair, 2):
        ours = -np.asarray(pair.model.lagrangian(q, np.zeros(pair.model.nq), 1)["Lq"])
        theirs = pair.ours(pin.computeGeneralizedGravity(pair.pin, pair.data, pair.pin_q(q)))
        worst = max(worst, np.abs(ours - theirs).max())
        assert np.abs(theirs).max() > 1e-3  # not comparing zeros
    assert worst <= TOL, f"{pair.label}: gravity forces differ by {worst:.2e}"


def test_forward_dynamics_equals_pinocchio(pair):
    worst = 0.0
    for q, v in _samples(pair, 3):
        qdd, lam = _core.forward_dynamics(pair.model, q, v, np.zeros(pair.model.nu), np.zeros(0))
        assert lam.size == 0
        tau = pair.pin_v(-pair.damping * v)
        theirs = pair.ours(pin.aba(pair.pin, pair.data, pair.pin_q(q), pair.pin_v(v), tau))
        worst = max(worst, np.abs(qdd - theirs).max())
    assert worst <= TOL, f"{pair.label}: forward dynamics differ by {worst:.2e}"


def test_link_placements_equal_pinocchio(pair):
    """Every URDF link's world pose (origin rpy/xyz, axis signs) agrees with Pinocchio's frame placements."""
    worst = 0.0
    links = [f.name for f in pair.pin.frames if f.type == pin.FrameType.BODY]
    assert links
    for q, _ in _samples(pair, 4):
        pin.framesForwardKinematics(pair.pin, pair.data, pair.pin_q(q))
        ours = pair.model.placements(q)
        for name in links:
            if name == "world":
                continue
            theirs = pair.data.oMf[pair.pin.getFrameId(name, pin.FrameType.BODY)].homogeneous
            worst = max(worst, np.abs(ours[pair.model.frame_index(name)] - theirs).max())
    assert worst <= 1e-12, f"{pair.label}: link placements differ by {worst:.2e}"


def test_damping_was_compared():
    """The mixed chain really exercises damping, so the forward-dynamics check covers it."""
    d = _damping_from_urdf(MIXED_CHAIN, load_urdf(MIXED_CHAIN).config_names)
    assert np.count_nonzero(d) == 3


def test_configurations_match_joint_names():
    for name, urdf in CASES.items():
        p = Pair(urdf())
        assert sorted(p.model.config_names) == sorted(n for n in p.pin.names if n != "universe"), name
