"""Strings of a model: distance constraints whose length is a kinematic configuration (thesis §3.6, (3.22)).

A string joins two frames, h = |p_1 - p_2|^2 - L^2 = 0, with its length L prescribed by a
motor. Read from the core model's ``constraint_frames``, so it works for every model however it
was described (builder, YAML, URDF). The tension of a string over a step and its exact derivatives
(:func:`string_tensions`, :func:`tension_gradients`) are read here by the optimizer's tension constraints and the
controller's tension guard alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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


def string_tensions(X: np.ndarray, Lam: np.ndarray, constraint_index, length_index, dt: float) -> np.ndarray:
    """T (n, S) [N]: the tension of each string s over the steps of the states X (n, nx) with multipliers Lam (n, m),

        T = (2/Δt) L λ,    L = X[:, length_index[s]],  λ = Lam[:, constraint_index[s]]

    (docs/constraint_forces.md: λ_k is paired with q_k; T > 0 the string pulls)."""
    return (2.0 / dt) * X[:, length_index] * Lam[:, constraint_index]


def tension_gradients(X: np.ndarray, Lam: np.ndarray, Lam_x: np.ndarray, Lam_u: np.ndarray, constraint_index,
                      length_index, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """(∂T/∂x (n, S, nx), ∂T/∂u (n, S, nU)) of :func:`string_tensions` from the exact multiplier derivatives
    Lam_x (n, m, nx), Lam_u (n, m, nU) of the step (thesis §A.2.5, ``DiscreteSystem.linearize_trajectory`` with
    ``constraint_forces=True``): ∇T = (2/Δt)(λ e_L + L ∇λ) (docs/constraint_forces.md)."""
    j, li = np.asarray(constraint_index, dtype=int), np.asarray(length_index, dtype=int)
    c = 2.0 / dt
    L = X[:, li, None]                                 # (n, S, 1)
    Tx = L * Lam_x[:, j, :]
    Tx[:, np.arange(len(j)), li] += Lam[:, j]
    return c * Tx, c * L * Lam_u[:, j, :]
