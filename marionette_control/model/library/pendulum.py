"""Pendulums: seed 001's forced pendulum and a planar double pendulum."""

from __future__ import annotations

from marionette_control.model import SystemBuilder

PENDULUM_DESCRIPTION = (
    "Seed 001's forced planar pendulum: one rotation theta about x (theta = 0 hangs down), a point mass m at "
    "distance l, gravity g along -z, a torque input 'torque' on theta. State [theta, p_theta], input [torque]."
)

DOUBLE_PENDULUM_DESCRIPTION = (
    "Planar double pendulum of point masses (Tedrake's appendix form): rotations theta1, theta2 about x "
    "(0 = hanging down), masses m1, m2 at lengths l1, l2, gravity along -z, optional torques on both joints "
    "and optional joint damping."
)


def pendulum(mass: float = 1.0, length: float = 1.0, gravity: float = 9.8, damping: float = 0.0):
    """Seed 001 §II-A pendulum (its regression vectors, §II-A and §IV-A: test/test_derivatives.py)."""
    b = SystemBuilder("pendulum", gravity=(0.0, 0.0, -gravity), forcing="thesis")
    b.frame("pendulum", "world", "rx", config="theta")
    b.frame("bob", "pendulum", "tz", value=-length, mass=mass)
    b.config_force("theta", input="torque")
    if damping:
        b.damping("theta", damping)
    return b.build()


def double_pendulum(m1: float = 1.0, m2: float = 1.0, l1: float = 1.0, l2: float = 1.0, gravity: float = 9.8,
                    torques: bool = True, damping: float = 0.0):
    """Double pendulum; with ``torques`` the inputs are 'torque1', 'torque2'."""
    b = SystemBuilder("double_pendulum", gravity=(0.0, 0.0, -gravity), forcing="thesis")
    b.frame("link1", "world", "rx", config="theta1")
    b.frame("mass1", "link1", "tz", value=-l1, mass=m1)
    b.frame("link2", "mass1", "rx", config="theta2")
    b.frame("mass2", "link2", "tz", value=-l2, mass=m2)
    if torques:
        b.config_force("theta1", input="torque1")
        b.config_force("theta2", input="torque2")
    if damping:
        b.damping(["theta1", "theta2"], damping)
    return b.build()
