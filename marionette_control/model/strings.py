"""Strings of a model: distance constraints whose length is a kinematic configuration (thesis §3.6, (3.22)).

A string joins two frames, h = |p_1 - p_2|^2 - L^2 = 0, with its length L prescribed by a
motor. Read from the core model's ``constraint_frames``, so it works for every model however it
was described (builder, YAML, URDF).
"""

from __future__ import annotations

from dataclasses import dataclass

from marionette_control import _core


@dataclass(frozen=True)
class StringConstraint:
    """A string constraint ``name`` between ``frame1`` and ``frame2`` with length configuration ``length``."""

    name: str
    frame1: str
    frame2: str
    length: str


def string_constraints(model: _core.Model) -> list[StringConstraint]:
    """The model's strings in constraint order (fixed-length distance constraints and planes are not strings)."""
    kinematic = {c for c, k in zip(model.config_names, model.kinematic) if k}
    return [StringConstraint(name, frame1, frame2, length)
            for name, kind, frame1, frame2, length in model.constraint_frames
            if kind == "distance" and isinstance(length, str) and length in kinematic]
