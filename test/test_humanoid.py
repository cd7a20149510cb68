"""Seed 001 §VIII-B scenario on the 40-configuration humanoid marionette."""

import numpy as np

from marionette_control import _core
from marionette_control.model import library
from marionette_control.model.library import humanoid_marionette as hm


def test_dimensions_and_mass():
    m = library.get("humanoid_marionette")
    assert (m.nq, m.nd, m.nk, m.nc) == (40, 22, 18, 6)
    assert (m.nx, m.nU, m.nu) == (80, 18, 0)
    assert abs(sum(v[0] for v in m.masses.values()) - 18.75) < 1e-12
    assert m.config_names[m.nd:][:3] == ["left_leg_string-x", "left_leg_string-y", "left_leg_string-length"]


def test_string_walk_keeps_every_constraint_within_1e9():
    """1000 steps at dt = 0.01: |h_i(q_k)| <= 1e-9 for every string and step."""
    m = library.get("humanoid_marionette")
    ds = _core.DiscreteSystem(m, 0.01)
    q0 = hm.initial_configuration(m)
    assert np.abs(m.constraints(q0)[0]).max() < 1e-12
    U = hm.string_walk_inputs(m, q0, 0.01, 1000)
    X, iterations = ds.simulate(ds.state_from_configs(q0, q0), U)
    h = np.array([m.constraints(x[:m.nq])[0] for x in X])
    assert np.abs(h).max() <= 1e-9
    assert iterations.max() <= 5
    # The walk does move the puppet: the leg strings changed the hip angles.
    assert np.ptp(X[:, m.config_index("lhip_rx")]) > 0.05
