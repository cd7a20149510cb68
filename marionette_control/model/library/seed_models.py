"""Models of the seeds' optimal-control benchmarks: seed 002's rigid sphere (§7.1) and seed 004's two-link
arm (§8.2). Seed 004's cart-pole (App. A) is the ``cart_pendulum`` model with a dynamic cart.

``rigid_sphere``: a free rigid body in this package's coordinates — a tree of primitive transforms,
three translations ``x, y, z`` (the centre of mass in the world frame) and then a rotation chain.
The chain is a yaw–pitch–roll triple ``psi, beta, gamma`` about the axes of a constant frame whose
z axis is ``axis`` (seed 002's axis of rotation (−1, 1, 1)/√3 by default), closed by the inverse
constant rotation so that all angles zero is the world orientation. Why the constant frame: any
Euler chain is singular where its first and third axes align (here β = ±π/2), and a rotation about
(−1, 1, 1)/√3 drives every world-aligned chain through that set — with z–y–x angles R₂₀ =
−sin θ/√3 − (1 − cos θ)/3 reaches −1 (β = π/2) at θ = 2π/3 of every turn. Aligned with the axis,
the rotation is ψ alone and β = γ = 0, the middle of the chart. Inputs: the force on the centre of
mass (``f_x, f_y, f_z``, world frame, generalized forces on x, y, z) and the torque in the body
frame (``tau_x, tau_y, tau_z``, a body wrench): ‖τ‖ is the seed's, whatever the chart (a body torque
and the world torque differ by a rotation). Mass ρ·4/3·πr³ and the sphere's inertia 2/5·m·r² at the
centre; no gravity (the seed's sphere moves freely in space).

``two_link_arm``: seed 004 §8.2's planar arm in a horizontal plane (no gravity): ``theta1`` (the first
link against the world) and ``theta2`` (the second against the first; 0 = fully extended), rotations
about z, uniform links of mass m_i and length L_i with their centres of mass at L_i/2 and I_Gi =
m_i L_i²/12, viscous friction c_i on each joint, torques ``u1``, ``u2``. Its mass matrix is seed 004
(8.2) with the consistent off-diagonal (m₂/4)(L₂² + 2L₁L₂cos θ₂) + I_G2 (the seed prints L₁L₂cos θ₂
without the 2; its diagonal and (8.3) imply the 2) — ``test/test_seed_benchmarks.py`` checks it.
"""

from __future__ import annotations

import numpy as np

from marionette_control.model import SystemBuilder

SPHERE_AXIS = (-1.0, 1.0, 1.0)

SPHERE_DESCRIPTION = (
    "Seed 002 §7.1's rigid sphere (r = 0.05 m, density 27000 kg/m³) free in space: translations x, y, z of "
    "the centre, then yaw-pitch-roll psi, beta, gamma about a frame aligned with the axis of rotation "
    "(-1, 1, 1)/sqrt(3) (so that the rotation stays away from the Euler singularity); inputs: the force on "
    "the centre (world) and the body torque. 12 states, 6 inputs."
)

TWO_LINK_DESCRIPTION = (
    "Seed 004 §8.2's two-link arm in a horizontal plane: theta1 (absolute), theta2 (relative, 0 = extended), "
    "uniform links m1 = m2 = 0.5 kg, L1 = 2 m, L2 = 0.5 m, viscous friction 0.2 on theta1, torques u1, u2. "
    "4 states, 2 inputs."
)


def axis_frame(axis) -> np.ndarray:
    """A rotation C (3, 3) whose third column is the unit vector of ``axis``: C e_z = axis/|axis|."""
    a = np.asarray(axis, dtype=float)
    n = np.linalg.norm(a)
    if a.shape != (3,) or not np.isfinite(n) or n == 0.0:
        raise ValueError(f"the axis of rotation must be a non-zero 3-vector, got {axis!r}")
    a = a / n
    helper = np.eye(3)[int(np.argmin(np.abs(a)))]
    x = np.cross(helper, a)
    x /= np.linalg.norm(x)
    return np.column_stack([x, np.cross(a, x), a])


def rigid_sphere(radius: float = 0.05, density: float = 27000.0, axis=SPHERE_AXIS):
    """Seed 002 §7.1's sphere (module docstring); SI units."""
    if not (radius > 0 and density > 0):
        raise ValueError(f"radius and density must be > 0, got {radius}, {density}")
    mass = density * 4.0 / 3.0 * np.pi * radius ** 3
    inertia = 0.4 * mass * radius ** 2
    C = axis_frame(axis)
    b = SystemBuilder("rigid_sphere", gravity=(0.0, 0.0, 0.0), forcing="thesis")
    b.frame("px", "world", "tx", config="x")
    b.frame("py", "px", "ty", config="y")
    b.frame("centre", "py", "tz", config="z")
    b.const_frame("axis_frame", "centre", rotation=C)
    b.frame("yaw", "axis_frame", "rz", config="psi")
    b.frame("pitch", "yaw", "ry", config="beta")
    b.frame("roll", "pitch", "rx", config="gamma")
    b.const_frame("body", "roll", rotation=C.T, mass=mass, inertia=(inertia, inertia, inertia))
    for c in ("x", "y", "z"):
        b.config_force(c, input=f"f_{c}")
    b.body_wrench("body", [0.0, 0.0, 0.0, "tau_x", "tau_y", "tau_z"], name="torque")
    return b.build()


def two_link_arm(m1: float = 0.5, m2: float = 0.5, L1: float = 2.0, L2: float = 0.5, c1: float = 0.2,
                 c2: float = 0.0):
    """Seed 004 §8.2's horizontal two-link arm (module docstring; Table 8.1's parameters by default)."""
    b = SystemBuilder("two_link_arm", gravity=(0.0, 0.0, 0.0), forcing="thesis")
    b.frame("link1", "world", "rz", config="theta1")
    b.frame("centre1", "link1", "tx", value=L1 / 2, mass=m1, inertia=(0.0, m1 * L1 ** 2 / 12, m1 * L1 ** 2 / 12))
    b.frame("elbow", "link1", "tx", value=L1)
    b.frame("link2", "elbow", "rz", config="theta2")
    b.frame("centre2", "link2", "tx", value=L2 / 2, mass=m2, inertia=(0.0, m2 * L2 ** 2 / 12, m2 * L2 ** 2 / 12))
    b.config_force("theta1", input="u1")
    b.config_force("theta2", input="u2")
    if c1:
        b.damping("theta1", c1)
    if c2:
        b.damping("theta2", c2)
    return b.build()
