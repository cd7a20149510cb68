"""Cross-check of the core against trep 1.0.2, the thesis's reference implementation (independent code).

The data were computed with trep by benchmarks/peers/make_trep_reference.py and
stored in test/data/trep_humanoid_reference.npz, so this test does not need trep
(regenerate: benchmarks/peers/install_trep.sh, then
.venv-peer-trep/bin/python benchmarks/peers/make_trep_reference.py). trep's
state order differs from ours (its kinematic configurations are x, y of every
string, then the lengths); everything is mapped by name.

Tolerances (trep's Newton tolerance was tightened to 1e-13 when generating, ours
is 1e-12 here, so both trajectories are converged far below them):
- humanoid trajectory, 120 steps of dt = 0.01 from rest: |x_ours - x_trep| <= 1e-9
  (absolute, every configuration, momentum and kinematic velocity);
- A, B at 3 steps: |ours - trep| <= 1e-8 * max|trep| elementwise (relative to the
  matrix's scale: entries that vanish by cancellation have no relative error);
- contracted second order z^T D2f (xx, xu, uu) at 2 steps: 1e-7 relative, likewise;
- pendulum (seed 001 §II-A): q2, p2, A, B to 1e-12 and the Hessians to 1e-10 relative.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from marionette_control import _core
from marionette_control.model import library
from marionette_control.model.library import humanoid_marionette as hm

DATA = Path(__file__).parent / "data" / "trep_humanoid_reference.npz"
TOL_TRAJECTORY = 1e-9
RTOL_FIRST = 1e-8
RTOL_SECOND = 1e-7
OUR_NEWTON_TOLERANCE = 1e-12


def assert_close_scaled(ours, theirs, rtol, what):
    """|ours - theirs| <= rtol * max|theirs| elementwise."""
    scale = max(float(np.max(np.abs(theirs))), 1e-300)
    err = float(np.max(np.abs(ours - theirs)))
    assert err <= rtol * scale, f"{what}: max |ours - trep| = {err:.3e} > {rtol:.0e} * {scale:.3e}"


@pytest.fixture(scope="module")
def ref():
    with np.load(DATA) as d:
        return {k: d[k] for k in d.files}


@pytest.fixture(scope="module")
def humanoid(ref):
    m = library.get("humanoid_marionette")
    dt = json.loads(str(ref["meta"]))["dt"]
    ts, ti = list(ref["h_state_names"]), list(ref["h_input_names"])
    assert sorted(ts) == sorted(m.state_names), "trep's and our state names differ"
    assert sorted(ti) == sorted(m.discrete_input_names), "trep's and our input names differ"
    P = np.array([ts.index(n) for n in m.state_names])  # ours[i] = trep[P[i]]
    Pu = np.array([ti.index(n) for n in m.discrete_input_names])
    q0 = hm.initial_configuration(m)
    U = hm.string_walk_inputs(m, q0, dt, len(ref["h_U"]))
    ds = _core.DiscreteSystem(m, dt, tolerance=OUR_NEWTON_TOLERANCE)
    return {"m": m, "ds": ds, "q0": q0, "U": U, "P": P, "Pu": Pu, "X_trep": ref["h_X"][:, P]}


def test_reference_data_is_what_it_claims(ref):
    meta = json.loads(str(ref["meta"]))
    assert "1.0.2" in meta["trep"]
    check = meta["model_check_vs_trep_puppets"]  # the hand-built trep model equals trep.puppets.Puppet
    assert check["same_config_names"] and check["max_frame_position_diff"] < 1e-12
    assert check["max_q_diff_after_50_steps"] < 1e-10
    assert DATA.stat().st_size < 500_000


def test_same_problem_start_and_inputs(ref, humanoid):
    """Same initial pose, same x0 (q0 = q1 = pose) and the same inputs with the same time convention."""
    h = humanoid
    np.testing.assert_allclose(h["q0"], ref["h_q0"][h["P"][: h["m"].nq]], rtol=0, atol=1e-14)
    x0 = h["ds"].state_from_configs(h["q0"], h["q0"])
    np.testing.assert_allclose(x0, h["X_trep"][0], rtol=0, atol=1e-13)
    np.testing.assert_allclose(h["U"], ref["h_U"][:, h["Pu"]], rtol=0, atol=1e-14)


def test_humanoid_trajectory_matches_trep(humanoid):
    h = humanoid
    Xt = h["X_trep"]
    assert np.max(np.abs(Xt[:, : h["m"].nd] - Xt[0, : h["m"].nd])) > 0.1  # it moves: the check is not trivial
    X, _ = h["ds"].simulate(Xt[0], h["U"])
    err = np.abs(X - Xt)
    worst = np.unravel_index(np.argmax(err), err.shape)
    assert err.max() <= TOL_TRAJECTORY, (
        f"trajectory differs from trep by {err.max():.3e} at step {worst[0]}, {h['m'].state_names[worst[1]]}")


def test_humanoid_first_order_matches_trep(ref, humanoid):
    h = humanoid
    P, Pu, Xt = h["P"], h["Pu"], h["X_trep"]
    for j, k in enumerate(ref["h_lin_steps"]):
        xn, A, B = h["ds"].linearize(Xt[k], h["U"][k])
        np.testing.assert_allclose(xn, Xt[k + 1], rtol=0, atol=TOL_TRAJECTORY)
        assert_close_scaled(A, ref["h_A"][j][np.ix_(P, P)], RTOL_FIRST, f"A at step {k}")
        assert_close_scaled(B, ref["h_B"][j][np.ix_(P, Pu)], RTOL_FIRST, f"B at step {k}")
    A_traj, B_traj = h["ds"].linearize_trajectory(Xt, h["U"])
    for j, k in enumerate(ref["h_lin_steps"]):
        assert_close_scaled(A_traj[k], ref["h_A"][j][np.ix_(P, P)], RTOL_FIRST, f"linearize_trajectory A[{k}]")
        assert_close_scaled(B_traj[k], ref["h_B"][j][np.ix_(P, Pu)], RTOL_FIRST, f"linearize_trajectory B[{k}]")


def test_humanoid_second_order_matches_trep(ref, humanoid):
    h = humanoid
    P, Pu, Xt = h["P"], h["Pu"], h["X_trep"]
    for j, k in enumerate(ref["h_so_steps"]):
        z = ref["h_so_z"][j][P]
        xx, xu, uu = h["ds"].second_order_contracted(Xt[k], h["U"][k], z)
        assert_close_scaled(xx, ref["h_so_xx"][j][np.ix_(P, P)], RTOL_SECOND, f"z^T f_xx at step {k}")
        assert_close_scaled(xu, ref["h_so_xu"][j][np.ix_(P, Pu)], RTOL_SECOND, f"z^T f_xu at step {k}")
        assert_close_scaled(uu, ref["h_so_uu"][j][np.ix_(Pu, Pu)], RTOL_SECOND, f"z^T f_uu at step {k}")


def test_pendulum_matches_trep(ref):
    m = library.get("pendulum")
    assert list(m.state_names) == ["theta", "p_theta"] and list(m.discrete_input_names) == ["torque"]
    ds = _core.DiscreteSystem(m, float(ref["p_dt"]), tolerance=1e-14)
    x, u = ref["p_x"], ref["p_u"]
    xn, A, B = ds.linearize(x, u)
    np.testing.assert_allclose(xn, [ref["p_q2"], ref["p_p2"]], rtol=0, atol=1e-12)
    np.testing.assert_allclose(A, ref["p_A"], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(B, ref["p_B"], rtol=1e-12, atol=1e-14)
    fxx, fxu, fuu = ds.second_order_full(x, u)
    for i in range(2):
        H = np.block([[fxx[i], fxu[i]], [fxu[i].T, fuu[i]]])
        assert_close_scaled(H, ref["p_H"][i], 1e-10, f"Hessian of output {i}")
