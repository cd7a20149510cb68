"""Constraint forces of the midpoint VI: the multipliers lambda_k and their exact derivatives.

lambda_k (m,) is the multiplier of step k (thesis (4.36)), paired with Dh(q_k): the step applies
the impulse -Dh(q_k)^T lambda_k. Its first derivatives are the multiplier rows of the implicit
derivative Y = -G_y^{-1} G_w ((4.37)-(4.38), §A.2.5); a covector w of lambda enters the contracted
second order through the adjoint's right-hand side ((4.39)-(4.40), §A.2.6). docs/constraint_forces.md.

Evidence:

1. Random constrained trees (``random_trees.systems()``, the strategy of test_derivatives.py, kept
   to nc >= 1; kinematic carriages and string lengths among them; Newton tolerance
   ``random_trees.newton_tolerance``): lambda and dlambda/dx, dlambda/du against central
   differences of ``constraint_forces``; z^T D2f + w^T D2lambda against central differences of
   z^T A + w^T lambda_x (and of the B / lambda_u pair); D2lambda o (d, d) against a second
   difference of lambda along d and against the contracted form.
2. The humanoid marionette (6 strings) on seed 001's string walk and the marionette arm on a
   carriage swing: the same first- and second-order checks.
3. Batch entry points: outputs that come from the same solves are identical (the Lam of
   ``linearize_trajectory`` and ``constraint_forces_trajectory``; A, B with and without the
   multipliers; W = None and W = 0); the per-step calls start Newton from another guess, so
   they agree to the Newton noise; Lam from ``simulate`` and ``project`` equals
   ``constraint_forces_trajectory`` on the trajectory they computed.
4. Physics: the marionette arm held at rest (``tracking_problem.static_equilibrium``); the string
   tension T = 2 L lambda / dt (> 0 = pulling) equals the tension that balances gravity by
   moments about the elbow, computed from the URDF's numbers in the arm's plane, to 1e-6 relative;
   the moments about the shoulder then balance too. On a string with a moving top and a changing
   length, lambda_k / dt converges to minus the continuous multiplier of ``forward_dynamics`` at
   t_k with order 2 (measured slope 1.99; 1.3e-5 relative at dt = 2.5 ms).
5. Models without constraints return empty arrays of the right shapes; failed steps raise
   StepError naming the step; bad covectors get a ValueError naming the argument.

Tolerances (one norm, as in test_derivatives.py: max|E - C| <= rtol * max(1, max|E|)):

==========================================================  ======  =======================
check                                                       rtol    FD
==========================================================  ======  =======================
lambda_x, lambda_u vs FD of lambda                          1e-7    5-point, steps 1e-4 and
                                                                    5e-5, Richardson
z^T D2f + w^T D2lambda vs FD of z^T A + w^T lambda_x, ...   1e-6    the same
D2lambda o (d, d) vs second difference of lambda along d    1e-6    as test_derivatives.py
D2lambda o (d, d) vs the contracted form, (z, w) linearity  1e-10   -
batch vs per-step calls (different Newton guesses)          1e-11   -
batch outputs of the same solves                            0       (bit for bit)
arm at rest: T from lambda vs T from moments                1e-6    (relative)
==========================================================  ======  =======================

Measured over 1,000 drawn systems per test, the worst FD error was below 0.02 of its tolerance
and the worst batch vs per-step difference 0.08 of its tolerance (8e-13): a batch loop and a
per-step call solve the DEL from different Newton guesses, and two solves that each stop at
the Newton tolerance (about 1e-13 here) agree to it times the conditioning of the Newton
matrix, not bit for bit.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings

from marionette_control import _core
from marionette_control.model import library
from marionette_control.ocp.tracking_problem import static_equilibrium
from marionette_control.model.library import humanoid_marionette as hm
from marionette_control.model.library import marionette_arm as arm
from marionette_control.resources import config_file
import physics_helpers as ph
from random_trees import assert_close, newton_tolerance, richardson_fd, second_difference, systems

SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
BATCH_RTOL = 1e-11  # two Newton solves of one step from different guesses (measured worst 8e-13)


# ------------------------------------------------------------------ checks shared by every model


def check_first_order(sys, x, u):
    """lambda, lambda_x, lambda_u of ``linearize`` against ``constraint_forces`` and its central differences."""
    model = sys.model
    n, nd = model.nq, model.nd
    lam = sys.constraint_forces(x, u)
    xn, A, B, lam1, lam_x, lam_u = sys.linearize(x, u, constraint_forces=True)
    assert lam.shape == (model.nc,) and lam_x.shape == (model.nc, model.nx) and lam_u.shape == (model.nc, model.nU)
    assert_close(lam, lam1, BATCH_RTOL, "lambda of linearize vs constraint_forces")
    assert_close(lam, sys.step(x, u)[2], BATCH_RTOL, "constraint_forces vs the multiplier of step")
    xn0, A0, B0 = sys.linearize(x, u)
    for a, b, what in ((xn, xn0, "x_next"), (A, A0, "A"), (B, B0, "B")):
        assert_close(a, b, BATCH_RTOL, f"linearize {what} with vs without constraint forces")
    assert np.all(lam_x[:, n + nd:] == 0.0), "lambda_k does not depend on the kinematic velocities v_k"
    assert_close(lam_x, richardson_fd(lambda xx: sys.constraint_forces(xx, u), x), 1e-7, "dlambda/dx")
    assert_close(lam_u, richardson_fd(lambda uu: sys.constraint_forces(x, uu), u), 1e-7, "dlambda/du")


def check_second_order(sys, x, u, rng):
    """z^T D2f + w^T D2lambda against central differences of the first-order pair (z^T A + w^T lambda_x, ...)."""
    model = sys.model
    z = rng.normal(size=model.nx)
    w = rng.normal(size=model.nc)
    xx, xu, uu = sys.second_order_contracted(x, u, z, w)

    def gx(xv, uv):
        _, A, B, _, lx, lu = sys.linearize(xv, uv, constraint_forces=True)
        return z @ A + w @ lx

    def gu(xv, uv):
        _, A, B, _, lx, lu = sys.linearize(xv, uv, constraint_forces=True)
        return z @ B + w @ lu

    assert_close(xx, richardson_fd(lambda xv: gx(xv, u), x), 1e-6, "xx vs FD of z^T A + w^T lambda_x in x")
    assert_close(xu, richardson_fd(lambda uv: gx(x, uv), u), 1e-6, "xu vs FD of z^T A + w^T lambda_x in u")
    assert_close(xu, richardson_fd(lambda xv: gu(xv, u), x).T, 1e-6, "xu vs FD of z^T B + w^T lambda_u in x")
    assert_close(uu, richardson_fd(lambda uv: gu(x, uv), u), 1e-6, "uu vs FD of z^T B + w^T lambda_u in u")
    assert_close(xx, xx.T, 1e-10, "xx symmetric")
    assert_close(uu, uu.T, 1e-10, "uu symmetric")
    # Linear in (z, w): the w part alone is w^T D2lambda.
    only_z = sys.second_order_contracted(x, u, z)
    only_w = sys.second_order_contracted(x, u, np.zeros(model.nx), w)
    for i, name in enumerate(("xx", "xu", "uu")):
        assert_close((xx, xu, uu)[i], only_z[i] + only_w[i], 1e-10, f"{name} linear in (z, w)")


# ------------------------------------------------------------------ random constrained trees


@SETTINGS
@given(case=systems())
def test_constraint_force_derivatives_match_finite_differences(case):
    assume(case.model.nc > 0)
    check_first_order(case.sys, case.x, case.u)


@SETTINGS
@given(case=systems())
def test_lambda_covector_second_order_matches_finite_differences(case):
    assume(case.model.nc > 0)
    check_second_order(case.sys, case.x, case.u, case.rng)


@SETTINGS
@given(case=systems())
def test_lambda_directional_second_order(case):
    assume(case.model.nc > 0)
    sys, x, u, rng, m = case.sys, case.x, case.u, case.rng, case.model
    dx = rng.uniform(-1.0, 1.0, m.nx)
    du = rng.uniform(-1.0, 1.0, m.nU)
    d2f, d2lam = sys.second_order_directional(x, u, dx, du, constraint_forces=True)
    assert d2lam.shape == (m.nc,)
    assert_close(d2f, sys.second_order_directional(x, u, dx, du), BATCH_RTOL, "D2f o (d, d) with vs without lambda")
    along = second_difference(lambda h: sys.constraint_forces(x + h * dx, u + h * du))
    assert_close(d2lam, along, 1e-6, "D2lambda o (d, d) vs second central difference of lambda along d")
    quad = []
    for i in range(m.nc):
        xx, xu, uu = sys.second_order_contracted(x, u, np.zeros(m.nx), np.eye(m.nc)[i])
        quad.append(dx @ xx @ dx + 2.0 * dx @ xu @ du + du @ uu @ du)
    assert_close(d2lam, np.array(quad), 1e-10, "D2lambda o (d, d) vs e_i^T D2lambda from the contracted form")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(case=systems())
def test_batch_constraint_forces_equal_per_step(case):
    model, sys, rng = case.model, case.sys, case.rng
    m, N = model.nc, len(case.U)
    U = case.U
    X, iters, Lam_sim = sys.simulate(case.X[0], U, constraint_forces=True)
    X0, iters0 = sys.simulate(case.X[0], U)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(iters, iters0)
    assert Lam_sim.shape == (N, m)

    Lam = sys.constraint_forces_trajectory(X, U)
    A, B, Lam_l, Lam_x, Lam_u = sys.linearize_trajectory(X, U, constraint_forces=True)
    A0, B0 = sys.linearize_trajectory(X, U)
    assert Lam_x.shape == (N, m, model.nx) and Lam_u.shape == (N, m, model.nU)
    # The same solves: identical.
    np.testing.assert_array_equal(Lam_l, Lam)
    np.testing.assert_array_equal(A, A0)
    np.testing.assert_array_equal(B, B0)
    # simulate solved each step from another guess.
    assert_close(Lam, Lam_sim, BATCH_RTOL, "Lam of simulate vs constraint_forces_trajectory")

    Z = rng.normal(size=(N, model.nx))
    W = rng.normal(size=(N, m))
    so = sys.second_order_trajectory(X, U, Z, W)
    so_none = sys.second_order_trajectory(X, U, Z)
    so_zero = sys.second_order_trajectory(X, U, Z, np.zeros((N, m)))
    for a, b in zip(so_none, so_zero):
        np.testing.assert_array_equal(a, b)
    for k in range(N):
        _, _, _, lam, lx, lu = sys.linearize(X[k], U[k], constraint_forces=True)
        assert_close(Lam[k], lam, BATCH_RTOL, f"Lam[{k}] vs linearize")
        assert_close(Lam_x[k], lx, BATCH_RTOL, f"Lam_x[{k}] vs linearize")
        assert_close(Lam_u[k], lu, BATCH_RTOL, f"Lam_u[{k}] vs linearize")
        c = sys.second_order_contracted(X[k], U[k], Z[k], W[k])
        for i, name in enumerate(("xx", "xu", "uu")):
            assert_close(so[i][k], c[i], BATCH_RTOL, f"second_order_trajectory {name}[{k}] with W vs per step")

    # The projection with feedback around a perturbed reference: Lam belongs to the computed (X, U).
    # (Gains and perturbation small: random gains can destabilize a string that fixes a coordinate.)
    K = 0.01 * rng.normal(size=(N, model.nU, model.nx))
    Ubar = U + 1e-4 * rng.normal(size=U.shape)
    Xp, Up, Lam_p = sys.project(X[0], X, Ubar, K, constraint_forces=True)
    Xq, Uq = sys.project(X[0], X, Ubar, K)
    np.testing.assert_array_equal(Xp, Xq)
    np.testing.assert_array_equal(Up, Uq)
    assert_close(sys.constraint_forces_trajectory(Xp, Up), Lam_p, BATCH_RTOL,
                 "Lam of project vs constraint_forces_trajectory")


# ------------------------------------------------------------------ the humanoid marionette and the arm


def humanoid_walk(steps):
    model = library.get("humanoid_marionette")
    q0 = hm.initial_configuration(model)
    sys = _core.DiscreteSystem(model, 0.01, tolerance=newton_tolerance(model, q0, 0.01))
    U = hm.string_walk_inputs(model, q0, 0.01, steps)
    X, _ = sys.simulate(sys.state_from_configs(q0, q0), U)
    return sys, X, U


@pytest.fixture(scope="module")
def humanoid():
    return humanoid_walk(60)


@pytest.mark.parametrize("k", [3, 59])
def test_humanoid_constraint_force_derivatives(humanoid, k):
    sys, X, U = humanoid
    assert sys.model.nc == 6
    check_first_order(sys, X[k], U[k])


def test_humanoid_lambda_covector_second_order(humanoid):
    sys, X, U = humanoid
    check_second_order(sys, X[40], U[40], np.random.default_rng(11))


def arm_swing(steps, dt=0.01):
    """The arm held at rest in the raised pose, then the carriage swung by 5 cm and the string wound by 2 cm."""
    model = library.get("marionette_arm")
    q = arm.static_equilibrium(model, *arm.RAISED).q
    sys = _core.DiscreteSystem(model, dt, tolerance=newton_tolerance(model, q, dt))
    t = dt * np.arange(1, steps + 1)
    U = np.column_stack([q[2] + 0.05 * np.sin(2.0 * math.pi * t), q[3] - 0.02 * np.sin(math.pi * t)])
    X, _ = sys.simulate(sys.state_from_configs(q, q), U)
    return sys, X, U


@pytest.mark.parametrize("k", [0, 25, 79])
def test_marionette_arm_constraint_force_derivatives(k):
    sys, X, U = arm_swing(80)
    check_first_order(sys, X[k], U[k])
    check_second_order(sys, X[k], U[k], np.random.default_rng(k))


# ------------------------------------------------------------------ physics: the arm held at rest


def _planar_arm():
    """The arm's numbers in its (y, z) plane, read from the URDF and the model file (not from the core)."""
    root = ET.parse(config_file("marionette_arm.urdf")).getroot()

    def yz(element):
        x, y, z = (float(v) for v in element.find("origin").get("xyz").split())
        return np.array([y, z])

    joint = {j.get("name"): j for j in root.iter("joint")}
    link = {ln.get("name"): ln for ln in root.iter("link")}
    g = -yaml.safe_load(config_file("marionette_arm.yaml").read_text())["gravity"][2]
    assert all(yz(joint[n]).tolist() == [0.0, 0.0] for n in ("shoulder", "carriage"))
    return {"elbow": yz(joint["elbow"]), "hook": yz(joint["hook_mount"]), "rail": yz(joint["rail_mount"]),
            "com1": yz(link["upper_arm"].find("inertial")), "com2": yz(link["forearm"].find("inertial")),
            "m1": float(link["upper_arm"].find("inertial/mass").get("value")),
            "m2": float(link["forearm"].find("inertial/mass").get("value")), "g": g}


def _rot(angle, v):
    """Rotation about x by ``angle`` acting on (y, z)."""
    c, s = math.cos(angle), math.sin(angle)
    return np.array([c * v[0] - s * v[1], s * v[0] + c * v[1]])


def _moment(r, f):
    """x-component of r x f for r, f in the (y, z) plane."""
    return r[0] * f[1] - r[1] * f[0]


def moment_tension(q):
    """String tension that holds the forearm at rest by moments about the elbow, and the shoulder's residual moment.

    Points in the (y, z) plane from the shoulder (origin): elbow, centres of mass, hook and carriage
    (on the rail, along y); gravity -m g along z; the string pulls the hook towards the carriage.
    """
    a = _planar_arm()
    s, e, c = q[0], q[1], q[2]
    elbow = _rot(s, a["elbow"])
    com1 = _rot(s, a["com1"])
    com2 = elbow + _rot(s + e, a["com2"])
    hook = elbow + _rot(s + e, a["hook"])
    carriage = a["rail"] + np.array([c, 0.0])
    pull = (carriage - hook) / np.linalg.norm(carriage - hook)
    w1, w2 = np.array([0.0, -a["m1"] * a["g"]]), np.array([0.0, -a["m2"] * a["g"]])
    T = -_moment(com2 - elbow, w2) / _moment(hook - elbow, pull)
    shoulder = _moment(com1, w1) + _moment(com2, w2) + _moment(hook, T * pull)
    scale = abs(_moment(com1, w1)) + abs(_moment(com2, w2))
    return T, shoulder / scale


@pytest.mark.parametrize("pose", [arm.LOWERED, arm.RAISED, arm.degrees(20.0, 100.0), arm.degrees(60.0, 80.0)])
def test_arm_at_rest_string_tension_balances_gravity(pose):
    """Poses of the wave's range whose holding carriage and string length are within the actuator ranges."""
    model = library.get("marionette_arm")
    dt = 0.01
    guess = arm.consistent_configuration(model, *pose, carriage=0.3)
    q = static_equilibrium(model, guess, free=[model.config_index("carriage"), model.config_index("string_length")],
                           tolerance=1e-12)
    sys = _core.DiscreteSystem(model, dt, tolerance=1e-13)
    x = sys.state_from_configs(q, q)
    lam = sys.constraint_forces(x, q[2:])  # hold the carriage and the string
    x_next = sys.step(x, q[2:])[0]
    assert np.abs(x_next - x).max() <= 1e-9, "the equilibrium is held at rest"
    T_vi = 2.0 * q[3] * lam[0] / dt
    T_moments, shoulder_residual = moment_tension(q)
    assert arm.load_description().actuators["carriage"].contains(q[2])
    assert T_moments > 0.5  # N: taut
    assert abs(shoulder_residual) <= 1e-8, "the shoulder's moments balance with the same tension"
    assert T_vi == pytest.approx(T_moments, rel=1e-6)
    # Same tension and sign through the batch path, and the arm module's helper.
    Lam = sys.constraint_forces_trajectory(np.array([x, x_next]), q[2:][None, :])
    assert 2.0 * q[3] * Lam[0, 0] / dt == pytest.approx(T_moments, rel=1e-6)
    assert arm.string_tension(q, lam, dt) == pytest.approx(T_moments, rel=1e-6)


# ------------------------------------------------------------------ physics: the continuous limit


def test_multiplier_converges_to_the_continuous_one():
    """lambda_k / dt -> -lambda(t_k) of the continuous constrained dynamics, second order in dt.

    The carriage pendulum of physics_helpers (a body on a string whose top rides on a prescribed
    carriage and whose length is prescribed), from a consistent start, to t = 0.4 s; the continuous
    multiplier comes from ``_core.forward_dynamics`` (thesis (A.1)-(A.3), checked against closed
    forms in test_physics.py), whose constraint force is +Dh^T lambda: hence the sign.
    """
    model = ph.carriage()
    q0, qdot0 = ph.carriage_start(model)
    rho = (ph.carriage_rho, ph.carriage_rhod, ph.carriage_rhodd)
    T = 0.4
    qT, vT = ph.integrate_continuous(model, q0, qdot0, T, rho_fns=rho)
    _, lam_c = _core.forward_dynamics(model, np.concatenate([qT, ph.carriage_rho(T)]),
                                      np.concatenate([vT, ph.carriage_rhod(T)]), np.zeros(0), ph.carriage_rhodd(T))
    dts, errors = (0.01, 0.005, 0.0025), []
    for dt in dts:
        sys = _core.DiscreteSystem(model, dt, tolerance=1e-13)
        q1 = np.concatenate([ph.integrate_continuous(model, q0, qdot0, dt, rho_fns=rho)[0], ph.carriage_rho(dt)])
        N = int(round(T / dt))
        U = np.array([ph.carriage_rho((k + 2) * dt) for k in range(N)])
        _, _, Lam = sys.simulate(sys.state_from_configs(q0, q1), U, constraint_forces=True)  # X[0] at t = dt
        errors.append(abs(Lam[-1, 0] / dt + lam_c[0]))  # step N - 1 starts at t = T
    assert -lam_c[0] > 1.0  # N m^-1 (the string pulls: lambda_k > 0)
    assert 1.8 <= ph.loglog_slope(dts, errors) <= 2.2, errors
    assert errors[-1] <= 3e-5 * abs(lam_c[0]), errors  # measured 1.3e-5


# ------------------------------------------------------------------ shapes without constraints, errors


def test_models_without_constraints_return_empty_arrays():
    model = library.get("pendulum")
    sys = _core.DiscreteSystem(model, 0.1)
    x, u, N = np.array([0.2, 0.5]), np.array([0.8]), 4
    U = np.full((N, 1), 0.8)
    assert sys.constraint_forces(x, u).shape == (0,)
    assert [a.shape for a in sys.linearize(x, u, constraint_forces=True)[3:]] == [(0,), (0, 2), (0, 1)]
    assert sys.second_order_directional(x, u, x, u, constraint_forces=True)[1].shape == (0,)
    X, _, Lam = sys.simulate(x, U, constraint_forces=True)
    assert Lam.shape == (N, 0)
    assert sys.constraint_forces_trajectory(X, U).shape == (N, 0)
    assert [a.shape for a in sys.linearize_trajectory(X, U, constraint_forces=True)[2:]] == \
        [(N, 0), (N, 0, 2), (N, 0, 1)]
    xx = sys.second_order_trajectory(X, U, np.ones((N, 2)), np.zeros((N, 0)))[0]
    np.testing.assert_array_equal(xx, sys.second_order_trajectory(X, U, np.ones((N, 2)))[0])
    assert sys.project(x, X, U, np.zeros((N, 1, 2)), constraint_forces=True)[2].shape == (N, 0)


def test_failed_step_in_the_new_batch_paths_names_the_step():
    """The string cannot reach 3 m at step 3: every batch path reports step 3."""
    sys, X, U = arm_swing(6)
    U = U.copy()
    U[3, 1] = 3.0
    Z, W, K = np.zeros((6, 8)), np.ones((6, 1)), np.zeros((6, 2, 8))
    calls = {
        "simulate": lambda: sys.simulate(X[0], U, constraint_forces=True),
        "constraint_forces_trajectory": lambda: sys.constraint_forces_trajectory(X, U),
        "linearize_trajectory": lambda: sys.linearize_trajectory(X, U, constraint_forces=True),
        "second_order_trajectory": lambda: sys.second_order_trajectory(X, U, Z, W),
        "project": lambda: sys.project(X[0], X, U, K, constraint_forces=True),
    }
    for name, call in calls.items():
        with pytest.raises(_core.StepError, match="step 3 failed") as info:
            call()
        assert info.value.step == 3, name


def test_bad_lambda_covectors_get_specific_errors():
    sys, X, U = arm_swing(4)
    Z = np.zeros((4, 8))
    with pytest.raises(ValueError, match=r"W \(covectors of lambda_k, one row per step\) has shape \(4, 2\), "
                                         r"expected \(4, 1\)"):
        sys.second_order_trajectory(X, U, Z, np.zeros((4, 2)))
    with pytest.raises(ValueError, match=r"w \(covector of lambda_k.*contains nan.*\['string'\]"):
        sys.second_order_contracted(X[0], U[0], Z[0], np.array([np.nan]))
