"""Vectors over the discrete state and input by kind of component, and the drives' acceleration map.

The state and input layout every layer shares (thesis §4.3, §A.2; ``docs/architecture.md``)::

    x = [q_dyn (nd); ρ (nk); p (nd); v (nk)]        nx = 2 nd + 2 nk
    u = [force inputs (nu); ρ_next (nk)]            nU = nu + nk

Weights, tolerances and noise levels are given per kind of component; :func:`state_by_kind` and
:func:`input_by_kind` lay them out (the one place that knows the order), for the cost defaults, the tracking
gains' design and the plan switch's tolerance alike.
"""

from __future__ import annotations

import numpy as np

#: the kinds of state components, in layout order
STATE_KINDS = ("dynamic_configuration", "kinematic_configuration", "momentum", "kinematic_velocity")


def state_by_kind(model, *, dynamic_configuration: float, kinematic_configuration: float, momentum: float,
                  kinematic_velocity: float) -> np.ndarray:
    """(nx,): each component of the state layout set to the value of its kind."""
    return np.r_[np.full(model.nd, float(dynamic_configuration)), np.full(model.nk, float(kinematic_configuration)),
                 np.full(model.nd, float(momentum)), np.full(model.nk, float(kinematic_velocity))]


def input_by_kind(model, *, force_input: float, kinematic_input: float) -> np.ndarray:
    """(nU,): the force inputs set to ``force_input``, the next kinematic configurations to ``kinematic_input``."""
    return np.r_[np.full(model.nu, float(force_input)), np.full(model.nk, float(kinematic_input))]


def drive_acceleration(model, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """(Mx (nk, nx), Mu (nk, nU)): the drives' acceleration over step k, a_k = (ρ_{k+1} − ρ_k − Δt v_k)/Δt²
    = Mx x_k + Mu u_k (ρ_{k+1} = the kinematic part of u_k, thesis §3.6; v_k the drives' velocity in x_k)."""
    nd, nk, nq, nu = model.nd, model.nk, model.nq, model.nu
    Mx = np.zeros((nk, model.nx))
    Mx[:, nd:nq] = -np.eye(nk) / dt ** 2
    Mx[:, nq + nd:] = -np.eye(nk) / dt
    Mu = np.zeros((nk, model.nU))
    Mu[:, nu:] = np.eye(nk) / dt ** 2
    return Mx, Mu
