"""Builder for tree models (thesis ch. 2-3): named frames, configurations,
masses, potentials, forces and constraints, compiled into the immutable
core ``Model``.

Example (seed 001's forced pendulum)::

    b = SystemBuilder("pendulum", gravity=(0, 0, -9.8))
    b.frame("pendulum", "world", "rx", config="theta")
    b.frame("bob", "pendulum", "tz", value=-1.0, mass=1.0)
    b.config_force("theta", input="torque")
    model = b.build()

Conventions: SI units; a frame is attached to its parent by one primitive
transform (translation along / rotation about an axis of the parent frame)
driven by one configuration or constant, or by a constant SE(3) offset;
masses sit at the frame origin on principal axes. Configurations are dynamic
unless declared kinematic (prescribed, thesis §3.6). Each method returns the
builder so calls can be chained; every name is checked when ``build()`` runs
and errors name the offending element.

Forcing (``forcing=`` or :meth:`SystemBuilder.forcing`): how the impulse Δt·F(q̄, q̇, u_k) of the
forces over a step (F at the midpoint of the midpoint discrete Lagrangian, thesis (4.8)) is split
between the step's ends (thesis (4.12)): ``"thesis"`` f⁻ = Δt·F, f⁺ = 0, thesis (4.12a) and the
reference implementation, whose configurations are first order in Δt with any force; ``"symmetric"``
(``DEFAULT_FORCING``, the default of a new model) f⁻ = f⁺ = ½Δt·F, second order at the same cost
(``docs/integrator_study.md``, "Forcing discretization", has the measurements behind the choice). The
seed reproductions of the model library keep ``"thesis"``.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np

from marionette_control import _core

PRIMITIVES = ("tx", "ty", "tz", "rx", "ry", "rz")
#: The forcing discretizations (module docstring).
FORCING_RULES: tuple[str, ...] = tuple(_core.FORCING_RULES)
#: A new model's forcing discretization (module docstring).
DEFAULT_FORCING = "symmetric"


def rotation_rpy(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """Rotation matrix R = Rz(yaw) Ry(pitch) Rx(roll) (the URDF convention), shape (3, 3)."""
    cr, sr = math.cos(roll), math.sin(roll)
    cp, sp = math.cos(pitch), math.sin(pitch)
    cy, sy = math.cos(yaw), math.sin(yaw)
    rz = np.array([[cy, -sy, 0.0], [sy, cy, 0.0], [0.0, 0.0, 1.0]])
    ry = np.array([[cp, 0.0, sp], [0.0, 1.0, 0.0], [-sp, 0.0, cp]])
    rx = np.array([[1.0, 0.0, 0.0], [0.0, cr, -sr], [0.0, sr, cr]])
    return rz @ ry @ rx


def _vector(value, size: int, what: str) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if arr.shape != (size,):
        raise ValueError(f"{what} must have {size} entries, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what} must be finite, got {arr.tolist()}")
    return arr


class SystemBuilder:
    """Collects a model description; ``build()`` validates it in the core."""

    def __init__(self, name: str, gravity: Sequence[float] = (0.0, 0.0, -9.8), forcing: str = DEFAULT_FORCING):
        self._core = _core.ModelBuilder(name)
        self._core.set_gravity(_vector(gravity, 3, "gravity"))
        self.name = name
        self.forcing(forcing)

    @classmethod
    def from_model(cls, model: _core.Model) -> "SystemBuilder":
        """A builder holding the description ``model`` was built from, to build variants of it."""
        b = cls.__new__(cls)
        b._core = model.to_builder()
        b.name = model.name
        return b

    def forcing(self, rule: str) -> "SystemBuilder":
        """The forcing discretization, one of ``FORCING_RULES`` (module docstring)."""
        if rule not in FORCING_RULES:
            raise ValueError(f"model '{self.name}': forcing must be one of {', '.join(FORCING_RULES)}, got {rule!r}")
        self._core.set_forcing(rule)
        return self

    def remove_constraint(self, name: str) -> "SystemBuilder":
        """Removes a constraint by name (e.g. to relax a string into forces, thesis §6.6)."""
        self._core.remove_constraint(name)
        return self

    def config(self, name: str, kinematic: bool = False) -> "SystemBuilder":
        """Declares a configuration (needed for kinematic ones and for those that drive no frame)."""
        self._core.add_config(name, bool(kinematic))
        return self

    def frame(self, name: str, parent: str, transform: str, config: str | None = None, value: float = 0.0,
              mass: float | None = None, inertia: Sequence[float] = (0.0, 0.0, 0.0),
              kinematic: bool = False) -> "SystemBuilder":
        """Adds a frame attached by a primitive transform.

        ``transform`` is one of tx, ty, tz, rx, ry, rz. With ``config`` the
        transform is driven by that configuration (declared on the fly,
        kinematic if ``kinematic``); without it the transform is constant by
        ``value`` (metres or radians). ``mass``/``inertia`` put a mass at the
        frame origin.
        """
        if transform not in PRIMITIVES:
            raise ValueError(f"frame '{name}': transform must be one of {', '.join(PRIMITIVES)}, got {transform!r}"
                             " (use const_frame for a constant SE(3) offset)")
        if config is not None and kinematic:
            self._core.add_config(config, True)
        self._core.add_frame(name, parent, transform, config or "", float(value))
        if mass is not None:
            self.mass(name, mass, inertia)
        return self

    def const_frame(self, name: str, parent: str, translation: Sequence[float] = (0.0, 0.0, 0.0),
                    rotation=None, mass: float | None = None,
                    inertia: Sequence[float] = (0.0, 0.0, 0.0)) -> "SystemBuilder":
        """Adds a frame at a constant SE(3) offset (rotation matrix (3, 3), translation (3,))."""
        rot = np.eye(3) if rotation is None else np.asarray(rotation, dtype=float)
        if rot.shape != (3, 3):
            raise ValueError(f"frame '{name}': rotation must be a 3x3 matrix, got shape {rot.shape}")
        self._core.add_const_frame(name, parent, rot, _vector(translation, 3, f"translation of frame '{name}'"))
        if mass is not None:
            self.mass(name, mass, inertia)
        return self

    def mass(self, frame: str, mass: float, inertia: Sequence[float] = (0.0, 0.0, 0.0)) -> "SystemBuilder":
        """Mass and principal inertias (Ixx, Iyy, Izz) at the frame's origin."""
        self._core.set_mass(frame, float(mass), _vector(inertia, 3, f"inertia of frame '{frame}'"))
        return self

    def damping(self, configs: str | Iterable[str], coefficient: float) -> "SystemBuilder":
        """Viscous damping F_i = -c qdot_i on one or several dynamic configurations."""
        for c in [configs] if isinstance(configs, str) else configs:
            self._core.add_damping(c, float(coefficient))
        return self

    def config_force(self, config: str, input: str | None = None, name: str | None = None) -> "SystemBuilder":
        """Generalized force on a dynamic configuration equal to a force input (default name ``<config>_force``)."""
        inp = input or f"{config}_force"
        self._core.add_config_force(name or f"{config}_force", config, inp)
        return self

    def linear_spring(self, frame1: str, frame2: str, stiffness: float, rest_length: float = 0.0,
                      name: str = "") -> "SystemBuilder":
        """Spring V = 1/2 k (|p1 - p2| - x0)^2 between two frame origins."""
        self._core.add_linear_spring(name, frame1, frame2, float(stiffness), float(rest_length))
        return self

    def config_spring(self, config: str, stiffness: float, neutral: float = 0.0, name: str = "") -> "SystemBuilder":
        """Spring V = 1/2 k (q - q0)^2 on one configuration."""
        self._core.add_config_spring(name, config, float(stiffness), float(neutral))
        return self

    def body_wrench(self, frame: str, wrench: Sequence[float | str], name: str = "") -> "SystemBuilder":
        """Wrench [fx, fy, fz, tx, ty, tz] in the frame's coordinates; each entry a number or an input name."""
        if len(wrench) != 6:
            raise ValueError(f"body wrench on '{frame}' needs 6 entries [force; torque], got {len(wrench)}")
        const = np.zeros(6)
        inputs = [""] * 6
        for i, w in enumerate(wrench):
            if isinstance(w, str):
                inputs[i] = w
            else:
                const[i] = float(w)
        self._core.add_body_wrench(name, frame, const, inputs)
        return self

    def distance_constraint(self, frame1: str, frame2: str, length: float | str, name: str = "") -> "SystemBuilder":
        """h = |p1 - p2|^2 - L^2 with L a fixed length or the name of a configuration (a string's length)."""
        if isinstance(length, str):
            self._core.add_distance_constraint(name, frame1, frame2, 0.0, length)
        else:
            self._core.add_distance_constraint(name, frame1, frame2, float(length), "")
        return self

    def plane_constraint(self, plane_frame: str, axis: int, point_frame: str, name: str = "") -> "SystemBuilder":
        """Keeps ``point_frame``'s origin on the plane through ``plane_frame`` normal to its axis (0, 1, 2)."""
        self._core.add_plane_constraint(name, plane_frame, int(axis), point_frame)
        return self

    def coupling_constraint(self, follower: str, leader: str, multiplier: float = 1.0, offset: float = 0.0,
                            name: str = "") -> "SystemBuilder":
        """h = q_follower - multiplier q_leader - offset = 0 (a URDF ``<mimic>`` joint; thesis §2.5 keeps one
        configuration per transform and couples them by a holonomic constraint). The follower is dynamic; the
        default name is ``<follower>_coupling``."""
        self._core.add_coupling_constraint(name or f"{follower}_coupling", follower, leader, float(multiplier),
                                           float(offset))
        return self

    def build(self) -> _core.Model:
        """Validates the description and returns the immutable core model."""
        return self._core.build()


def without_constraints(model: _core.Model, names: Sequence[str]) -> _core.Model:
    """``model`` without the holonomic constraints ``names``: the same configurations, states, inputs and forces, the
    other constraints in their order (e.g. a string gone slack, or constraints relaxed into a penalty, thesis §6.6.2).
    Raises ValueError naming a constraint the model does not have."""
    missing = sorted(set(names) - set(model.constraint_names))
    if missing or not names:
        raise ValueError(f"model '{model.name}' has no constraint named {', '.join(missing) or '(none given)'} "
                         f"(constraints: {', '.join(model.constraint_names) or 'none'})")
    b = SystemBuilder.from_model(model)
    for n in names:
        b.remove_constraint(n)
    return b.build()
