"""Coordinates of a model imported from a URDF matched with those of Pinocchio's model of the same file.

Shared by the Pinocchio cross-checks (test_pinocchio_crosscheck.py, test_example_robot_data.py). Joints
are matched by name; Pinocchio stores a continuous joint as (cos, sin) and orders its coordinates by its
own joint indices, so every array crosses through these maps.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


class PinCoordinates:
    """Maps between configurations ``names`` (this model's order) and a Pinocchio model's q and v."""

    def __init__(self, names: Sequence[str], pin_model):
        joint_names = list(pin_model.names)
        self.nq, self.nv = pin_model.nq, pin_model.nv
        self.joints = [pin_model.joints[joint_names.index(c)] for c in names]
        #: Pinocchio's velocity index of each configuration, in this model's order
        self.iv = [j.idx_v for j in self.joints]

    def pin_q(self, q: np.ndarray) -> np.ndarray:
        """Pinocchio's configuration (nq,) of ours q (len(names),)."""
        out = np.zeros(self.nq)
        for j, value in zip(self.joints, q):
            out[j.idx_q:j.idx_q + j.nq] = (np.cos(value), np.sin(value)) if j.nq == 2 else (value,)
        return out

    def pin_v(self, v: np.ndarray) -> np.ndarray:
        """Pinocchio's velocity (nv,) of ours v (len(names),)."""
        out = np.zeros(self.nv)
        out[self.iv] = v
        return out

    def ours(self, w: np.ndarray) -> np.ndarray:
        """A Pinocchio vector (nv,) or matrix (nv, nv) in this model's order."""
        w = np.asarray(w)
        return w[np.ix_(*[self.iv] * w.ndim)]
