"""The 2-D marionette arm (thesis §6.7.2): the hardware this package drives.

A two-link arm (configurations ``shoulder`` and ``elbow``, rotations about x in the vertical
y-z plane, 0 = hanging straight down, positive = towards +y and up) hangs from a fixed
shoulder pivot. One string runs from a hook on the forearm near the wrist to a carriage on a
horizontal rail above the shoulder. The motors prescribe two kinematic configurations
(thesis §3.6): ``carriage`` (position along the rail, m) and ``string_length`` (m). The string
is the holonomic constraint h = |p_hook - p_carriage|^2 - string_length^2 = 0 (thesis (3.22)).

The description lives in ``config/``: ``marionette_arm.urdf`` (links, joints, masses, joint
damping: the file robot_state_publisher and RViz read) and ``marionette_arm.yaml`` (the
string, which configurations are kinematic, hardware joint names, actuator limits). The
parameters and why they were chosen are in those files and in ``docs/models.md``.

Configuration order (the core puts dynamic before kinematic): q = [shoulder, elbow, carriage,
string_length]; discrete state x = [q (4); p_shoulder, p_elbow; v_carriage, v_string_length]
(8), input u = [carriage_{k+1}, string_length_{k+1}] (2).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from marionette_control import _core
from marionette_control.model.yaml_model import ModelDescription, load_model_file
from marionette_control.resources import config_file

DESCRIPTION = (
    "The hardware's 2-D marionette arm (thesis §6.7.2): shoulder and elbow rotations in a vertical plane, "
    "driven only by one string from a hook near the wrist to a carriage on a horizontal rail 0.55 m above the "
    "shoulder; kinematic configurations carriage and string_length, the string a holonomic distance constraint, "
    "joint damping; from config/marionette_arm.urdf + .yaml. 8 states, 2 inputs."
)

DYNAMIC = ("shoulder", "elbow")
KINEMATIC = ("carriage", "string_length")
CONFIG_FILE = "marionette_arm.yaml"
HOOK_FRAME = "hook"
CARRIAGE_FRAME = "carriage"
STRING = "string"


def load_description(path: str | os.PathLike | None = None, **overrides) -> ModelDescription:
    """Loads the arm's model file (default ``config/marionette_arm.yaml``) and checks the names this module needs.

    ``overrides`` replace top-level keys of the file (see ``load_model_file``), e.g.
    ``hardware={"joint_names": {"arm_shoulder": "shoulder", ...}}`` for a driver with other joint names.
    """
    desc = load_model_file(path or config_file(CONFIG_FILE), **overrides)
    m = desc.model
    names = m.config_names
    expected = list(DYNAMIC + KINEMATIC)
    if names != expected or list(m.kinematic) != [False, False, True, True]:
        raise ValueError(f"{desc.path}: the marionette arm needs dynamic configurations shoulder, elbow and "
                         f"kinematic carriage, string_length (in this order); the file defines {names} "
                         f"(kinematic {list(m.kinematic)})")
    if m.constraint_names != [STRING]:
        raise ValueError(f"{desc.path}: the marionette arm needs exactly one constraint named '{STRING}', "
                         f"got {m.constraint_names}")
    for f in (HOOK_FRAME, CARRIAGE_FRAME):
        if f not in m.frame_names:
            raise ValueError(f"{desc.path}: the marionette arm needs a frame '{f}'")
    return desc


def marionette_arm(path: str | os.PathLike | None = None, gravity: float | None = None) -> _core.Model:
    """Registry factory: the arm's core model (``gravity`` overrides the file's |g| along -z)."""
    overrides = {} if gravity is None else {"gravity": [0.0, 0.0, -float(gravity)]}
    return load_description(path, **overrides).model


# --------------------------------------------------------------------------------------------- configurations


def _hook_and_carriage(model: _core.Model, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    g = model.placements(q)
    return g[model.frame_index(HOOK_FRAME), :3, 3], g[model.frame_index(CARRIAGE_FRAME), :3, 3]


def consistent_configuration(model: _core.Model, shoulder: float, elbow: float, carriage: float = 0.0) -> np.ndarray:
    """Configuration q (4,) with the given arm angles and carriage that satisfies the string constraint.

    The string length is set to the hook-carriage distance, so h(q) = 0 up to rounding (thesis §6.7.2:
    the desired initial condition "modified to satisfy the closed kinematic chain"; the desired
    trajectory's carriage is 0).
    """
    q = np.array([shoulder, elbow, carriage, 1.0], dtype=float)
    if not np.all(np.isfinite(q)):
        raise ValueError(f"arm angles and carriage must be finite, got {q[:3].tolist()}")
    hook, car = _hook_and_carriage(model, q)
    q[3] = float(np.linalg.norm(hook - car))
    if q[3] <= 0.0:
        raise ValueError("the hook is at the carriage: the string length would be 0 (singular constraint)")
    return q


@dataclass(frozen=True)
class Equilibrium:
    """A static equilibrium of the arm held by its string: configuration (4,) and string tension (N, > 0 = taut)."""

    q: np.ndarray
    tension: float


def _gravity_force(model: _core.Model, q: np.ndarray) -> np.ndarray:
    """dV/dq of the dynamic configurations (2,): the generalized force the string must supply, at rest."""
    return -np.asarray(model.lagrangian(q, np.zeros(model.nq), 1)["Lq"])[: model.nd]


def static_equilibrium(model: _core.Model, shoulder: float, elbow: float) -> Equilibrium:
    """Carriage and string length that hold the arm at rest at the given angles, and the string tension.

    At rest the string force balances gravity: dV/dq = Dh_d^T lam (dynamic part of the constraint
    Jacobian). Dh_d = 2 (p_hook - p_carriage)^T J_hook is affine in the carriage position, so
    "dV/dq parallel to Dh_d" is one linear equation for the carriage. The tension is
    T = -2 lam |p_hook - p_carriage| (positive when the string pulls the hook towards the carriage).
    Raises ValueError when gravity needs no string force (the hanging pose) or the string would push.
    """
    q0 = consistent_configuration(model, shoulder, elbow, 0.0)
    q1 = consistent_configuration(model, shoulder, elbow, 1.0)
    g = _gravity_force(model, q0)
    a = model.constraints(q0)[1][0, : model.nd]
    slope = model.constraints(q1)[1][0, : model.nd] - a

    def cross(u, v):
        return u[0] * v[1] - u[1] * v[0]

    den = cross(g, slope)
    if abs(den) < 1e-12 * max(np.linalg.norm(g) * np.linalg.norm(slope), 1e-300):
        raise ValueError(f"no carriage position holds the arm at shoulder={shoulder}, elbow={elbow}: the required "
                         "string force does not depend on the carriage (gravity torque is zero or the arm is "
                         "singular)")
    carriage = -cross(g, a) / den
    q = consistent_configuration(model, shoulder, elbow, carriage)
    dh = model.constraints(q)[1][0, : model.nd]
    lam = float(dh @ g / (dh @ dh))
    hook, car = _hook_and_carriage(model, q)
    tension = -2.0 * lam * float(np.linalg.norm(hook - car))
    if tension <= 0.0:
        raise ValueError(f"at shoulder={shoulder}, elbow={elbow} the string would have to push (tension "
                         f"{tension:.3g} N): a string cannot hold this pose")
    return Equilibrium(q, tension)


def string_tension(q: np.ndarray, lam: float, dt: float) -> float:
    """Mean string tension (N, > 0 = taut) over a midpoint-VI step from its multiplier lam.

    The step applies the impulse -Dh(q_k)^T lam (thesis (4.36)) with Dh = 2 (p_hook - p_carriage)^T J,
    i.e. a force 2 lam |p_hook - p_carriage| / dt pulling the hook towards the carriage; at h = 0 the
    distance is the string length q[3].
    """
    return 2.0 * float(np.asarray(lam).reshape(-1)[0]) * float(q[3]) / dt


def degrees(*angles: float) -> tuple[float, ...]:
    """Degrees to radians, for readable call sites."""
    return tuple(math.radians(a) for a in angles)


# Poses of the wave (config/motions/wave.yaml) that the string can hold at rest; see docs/models.md.
LOWERED = degrees(0.0, 35.0)
RAISED = degrees(80.0, 85.0)
