r"""The hanging scissor lift of thesis §5.1 (Figs. 5.1–5.2): many closed kinematic chains, one degree of freedom.

Geometry (the x–z plane, z up, gravity along −z, every rotation about y): segment n = 1 … N is a pair of
links of length L crossed and pinned at their centres: ``a<n>`` runs down to the right, ``b<n>`` down to the
left. The top of ``a1`` is pinned to the world at the origin (the upper left of Fig. 5.2); the top of ``b1``
is pinned to the sliding block (``slider``, mass m_S, frictionless along x at z = 0). The bottom end of each
link is pinned to the top of the next segment's crossing link (``a<n>`` to ``b<n+1>`` on the right,
``b<n>`` to ``a<n+1>`` on the left). Each link carries m_L at its centre with rotational inertia I about y.

Tree and cut joints (the regular formulation): the pins at the ends of the links are the tree's joints —
two serial chains, world → a1 → b2 → a3 → … and world → slider → b1 → a2 → b3 → … — so every joint at the
end of a link is one rotation configuration (its joint angle), and the linear friction τ = −c φ̇ of thesis
§5.1.3 on those joints is the core's damping c on exactly those configurations. The N centre pins are
the cut joints, each closed by two point-on-plane constraints: the centre of ``b<n>`` lies on the planes
through the centre of ``a<n>`` normal to that link's x and z axes (thesis §3.1.4's plane constraint). A
pin written as one distance constraint of length 0, h = |p₁ − p₂|², would have Dh = 2(p₁ − p₂)ᵀ∂(p₁ − p₂)
= 0 on h = 0: a rank-deficient constraint that makes the VI's Newton matrix and the multiplier system
singular (seed 001 §VII). The two plane constraints are linear in the relative position in a's frame;
their 2N × (2N + 1) Jacobian has full rank wherever the mechanism itself is regular, 0 < θ < π/2
(``test/test_scissor_lift.py`` measures its smallest singular value). At θ = π/2 the links of a segment
coincide and the mechanism is singular (the segments below can turn together about a common point): no
formulation can be regular there, so the motions of the study stay away from it.

Configurations (in this order: ``config_names``): per segment n, ``a<n>``, (``slider`` after ``a1``),
``b<n>``. ``a1`` is the thesis's θ₁ (θ: the links' angle below the horizontal); ``b1`` is b1's absolute
angle, π − θ; for n ≥ 2 the joint angles are a<n> = 2θ − π (against b<n−1>) and b<n> = π − 2θ (against
a<n−1>); slider = L cos θ. Input: ``slider_force`` [N], a force along x on the block.
Discrete layout: x = [q (2N + 1); p (2N + 1)], u = [slider_force]; 2N constraints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from marionette_control import validation
from marionette_control.model import SystemBuilder

DESCRIPTION = (
    "Thesis §5.1's hanging scissor lift: N segments of two crossed links (length L, mass m_L at the centre, "
    "inertia I), the top pinned at the upper left and to a block m_S sliding freely along x; the end joints "
    "form the tree (two serial chains, damped by c per joint), the centre pins are cut joints closed by two "
    "plane constraints each; one degree of freedom (theta = a1). Force input on the block. 2N + 1 "
    "configurations, 2N constraints."
)


@dataclass(frozen=True)
class ScissorLift:
    """Physical parameters of the lift (SI). ``link_inertia`` None: a uniform rod, m_L L²/12.

    Defaults (the thesis gives none): N = 5 segments (§5.1.1's lift), L = 0.5 m, m_L = 0.5 kg,
    I = m_L L²/12, m_S = 1 kg, g = 9.81 m/s², no joint friction.
    """
    segments: int = 5
    link_length: float = 0.5
    link_mass: float = 0.5
    link_inertia: float | None = None
    slider_mass: float = 1.0
    gravity: float = 9.81
    damping: float = 0.0

    def __post_init__(self):
        validation.integer(self.segments, "scissor lift 'segments'", minimum=1)
        for name in ("link_length", "link_mass", "slider_mass"):
            validation.positive(getattr(self, name), f"scissor lift '{name}'")
        if self.link_inertia is not None:
            validation.nonnegative(self.link_inertia, "scissor lift 'link_inertia'")
        validation.nonnegative(self.gravity, "scissor lift 'gravity'")
        validation.nonnegative(self.damping, "scissor lift 'damping'")

    @property
    def inertia(self) -> float:
        """I [kg m²] about the link's centre, perpendicular to the plane."""
        return self.link_mass * self.link_length ** 2 / 12.0 if self.link_inertia is None else self.link_inertia

    @property
    def link_configs(self) -> list[str]:
        """The 2N joint configurations (the damped end joints), in model order."""
        return [c for c in config_names(self) if c != "slider"]


def config_names(p: ScissorLift) -> list[str]:
    """Configuration names in the model's order (module docstring)."""
    names = []
    for n in range(1, p.segments + 1):
        names += ["a1", "slider", "b1"] if n == 1 else [f"a{n}", f"b{n}"]
    return names


def build(p: ScissorLift):
    """The core model of ``p`` (module docstring)."""
    L, I = p.link_length, p.inertia
    b = SystemBuilder("scissor_lift", gravity=(0.0, 0.0, -p.gravity), forcing="thesis")
    for n in range(1, p.segments + 1):
        if n == 1:
            b.frame("a1", "world", "ry", config="a1")
            b.frame("slider", "world", "tx", config="slider", mass=p.slider_mass)
            b.frame("b1", "slider", "ry", config="b1")
        else:
            b.frame(f"a{n}", f"b{n - 1}_end", "ry", config=f"a{n}")
            b.frame(f"b{n}", f"a{n - 1}_end", "ry", config=f"b{n}")
        for link in (f"a{n}", f"b{n}"):
            b.frame(f"{link}_centre", link, "tx", value=L / 2, mass=p.link_mass, inertia=(0.0, I, I))
            b.frame(f"{link}_end", link, "tx", value=L)
        b.plane_constraint(f"a{n}_centre", 0, f"b{n}_centre", name=f"pin{n}_x")
        b.plane_constraint(f"a{n}_centre", 2, f"b{n}_centre", name=f"pin{n}_z")
    b.config_force("slider", input="slider_force")
    if p.damping:
        b.damping(p.link_configs, p.damping)
    return b.build()


def scissor_lift(segments: int = 5, link_length: float = 0.5, link_mass: float = 0.5,
                 link_inertia: float | None = None, slider_mass: float = 1.0, gravity: float = 9.81,
                 damping: float = 0.0):
    """Builds the scissor lift (``ScissorLift``'s parameters; module docstring)."""
    return build(ScissorLift(segments, link_length, link_mass, link_inertia, slider_mass, gravity, damping))


def joint_rates(p: ScissorLift) -> np.ndarray:
    """dq/dθ's joint part: (2N,) rates of the joint angles per unit θ̇, in ``link_configs`` order
    (a1: 1, b1: −1, a<n>: 2, b<n>: −2 for n ≥ 2)."""
    return np.array([{"a1": 1.0, "b1": -1.0}.get(c, 2.0 if c[0] == "a" else -2.0) for c in p.link_configs])


def configuration(p: ScissorLift, theta: float) -> np.ndarray:
    """q(θ) (2N + 1,), the lift's configuration at the links' angle θ (module docstring), model order."""
    values = {"a1": theta, "b1": math.pi - theta, "slider": p.link_length * math.cos(theta)}
    return np.array([values.get(c, 2.0 * theta - math.pi if c[0] == "a" else math.pi - 2.0 * theta)
                     for c in config_names(p)])


def tangent(p: ScissorLift, theta: float) -> np.ndarray:
    """dq/dθ (2N + 1,) at θ: q̇ = tangent(θ) θ̇ is the velocity of the one-DOF motion."""
    values = dict(zip(p.link_configs, joint_rates(p)))
    values["slider"] = -p.link_length * math.sin(theta)
    return np.array([values[c] for c in config_names(p)])
