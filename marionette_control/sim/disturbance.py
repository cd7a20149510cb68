"""Disturbances of the simulated plant: pushes on its bodies with a force fixed in world coordinates.

A push acts on a body (a frame of the plant with a mass, moved by a dynamic configuration) as an
``impulse`` (delivered within one step), a ``constant`` force or a ``half_sine`` F·sin(π t/T) over a
duration. :func:`with_disturbance_inputs` gives the plant model a body wrench with three force inputs on
every such body (thesis (3.19): F = J_bᵀ W, the impulse Δt F at the step's midpoint, split by the plant
model's forcing rule, thesis (4.12)); :class:`~marionette_control.sim.simulator.SimulatedArm` sets
W = [R_bᵀ F; 0] each step, R_b the body's
orientation at q_k. Without a disturbance these inputs are zero and the step is the plant's own, bit for
bit. :meth:`Disturbance.requested` checks a request against :class:`DisturbanceLimits` and samples its force
profile at the steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from marionette_control import _core, validation
from marionette_control.model.builder import SystemBuilder

DISTURBANCE_PROFILES = ("impulse", "constant", "half_sine")


@dataclass(frozen=True)
class DisturbanceLimits:
    """Bounds beyond which a disturbance request is refused as implausible (SI units)."""

    max_force: float = 50.0       # N, peak of a force profile
    max_impulse: float = 5.0      # N s
    max_duration: float = 10.0    # s


class DisturbanceError(ValueError):
    """A disturbance request that cannot be applied; the message says what was wrong and what is expected."""


@dataclass(frozen=True)
class Disturbance:
    """A scheduled push: body, world-frame forces (n, 3) for the steps start_step … start_step + n − 1."""

    body: str
    profile: str
    start_step: int
    forces: np.ndarray

    @property
    def end_step(self) -> int:
        return self.start_step + len(self.forces)

    def impulse(self, dt: float) -> np.ndarray:
        """Total impulse (3,) [N s]: Δt Σ F_j (the forcing's f⁻ + f⁺, thesis (4.12))."""
        return dt * self.forces.sum(axis=0)

    @classmethod
    def requested(cls, body: str, profile: str, force, duration: float, impulse, start_time: Optional[float], *,
                  bodies, k: int, dt: float, limits: DisturbanceLimits) -> "Disturbance":
        """The push a request asks for, at step ``k`` of a plant stepping ``dt`` whose pushable ``bodies`` these
        are (see :meth:`SimulatedArm.disturb <marionette_control.sim.simulator.SimulatedArm.disturb>` for the
        arguments). Raises DisturbanceError naming the problem."""
        if body not in bodies:
            raise DisturbanceError(f"unknown body {body!r}: disturbances act on a frame of the plant with a mass "
                                   f"moved by a dynamic configuration ({', '.join(bodies) or 'none'})")
        if profile not in DISTURBANCE_PROFILES:
            raise DisturbanceError(f"unknown profile {profile!r} (profiles: {', '.join(DISTURBANCE_PROFILES)})")
        force, impulse = (np.asarray(v, dtype=float) for v in (force, impulse))
        for name, v in (("force", force), ("impulse", impulse)):
            if v.shape != (3,) or not np.all(np.isfinite(v)):
                raise DisturbanceError(f"{name} must be 3 finite numbers (world x, y, z), got {v.tolist()}")
        duration = validation.nonnegative(duration, "duration", error=DisturbanceError)
        now = k * dt
        if start_time is not None:
            start_time = validation.number(start_time, "start_time", error=DisturbanceError)
            if start_time < now - 0.5 * dt:
                raise DisturbanceError(f"start_time {start_time:.6g} s is in the past (now {now:.6g} s); "
                                       "give a later time, or none to start at the next step")
        if profile == "impulse":
            if duration != 0.0 or np.any(force):
                raise DisturbanceError("an impulse is delivered within one step: give 'impulse' [N s], with force 0 "
                                       "and duration 0")
            size = float(np.linalg.norm(impulse))
            if size > limits.max_impulse:
                raise DisturbanceError(f"impulse {size:.4g} N s exceeds the plausible {limits.max_impulse:g} N s")
            forces = (impulse / dt)[None, :]
        else:
            if np.any(impulse):
                raise DisturbanceError(f"profile '{profile}' takes 'force' [N] and 'duration' [s]; 'impulse' must be 0")
            size = float(np.linalg.norm(force))
            if size > limits.max_force:
                raise DisturbanceError(f"force {size:.4g} N exceeds the plausible {limits.max_force:g} N")
            if duration > limits.max_duration:
                raise DisturbanceError(f"duration {duration:g} s exceeds the plausible {limits.max_duration:g} s")
            n = int(round(duration / dt))
            if n < 1:
                raise DisturbanceError(f"duration {duration:g} s is shorter than one step ({dt:g} s)")
            if profile == "constant":
                forces = np.tile(force, (n, 1))
            else:  # the half sine sampled at the step midpoints, where the forcing acts (thesis (4.12))
                forces = np.sin(np.pi * (np.arange(n) + 0.5) / n)[:, None] * force
        start = k if start_time is None else max(k, int(math.ceil(start_time / dt - 1e-6)))
        return cls(body, profile, start, forces)


def disturbance_inputs(plant: _core.Model) -> dict[str, tuple[int, list[str]]]:
    """{body frame: (frame index, [its three force input names])} for every frame with a mass moved by a
    dynamic configuration."""
    dynamic = set(range(plant.nd))
    bodies = {}
    for name in plant.masses:
        i = plant.frame_index(name)
        configs, j = set(), i
        while j >= 0:
            c = plant.frame_configs[j]
            if c >= 0:
                configs.add(c)
            j = plant.frame_parents[j]
        if configs & dynamic:
            bodies[name] = (i, [f"disturbance_{name}_f{axis}" for axis in "xyz"])
    return bodies


def with_disturbance_inputs(plant: _core.Model, bodies: dict) -> _core.Model:
    """``plant`` with a body wrench on each of ``bodies`` (:func:`disturbance_inputs`), its forces the inputs."""
    b = SystemBuilder.from_model(plant)
    for name, (_, inputs) in bodies.items():
        b.body_wrench(name, [*inputs, 0.0, 0.0, 0.0], name=f"disturbance_{name}")
    return b.build()
