"""Every cost term's value and derivatives against its finite-difference twin (one generic test).

The cases register every term kind of marionette_control.ocp.terms and .constraints on
random trajectories (random states and inputs near a simulation, so the string steps solve):
tracking, terminal, terminal value (cost-to-go), input, linear output, initial-state, the h² constraint penalty (thesis §6.6.2), and the
barrier of each constraint family (thesis ref. [16]) — linear families in both regimes of the
Hauser–Saccon barrier (log above δ, quadratic below, infeasible points included) and with the
exact logarithm, the string tension through the core's λ on the arm and the humanoid marionette.

Checked: gradients against central differences of the value (rel. 1e-6 of the largest entry),
exact Hessian blocks (+ the core's Wᵀ D²λ for λ-terms) against central differences of the
analytic gradient (rel. 1e-5), symmetry, and the Gauss–Newton blocks positive semi-definite.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from marionette_control import _core
from marionette_control.model import library
from marionette_control.ocp.constraints import (
    BarrierTerm,
    barrier,
    linear_constraints,
    tension_constraints,
)
from marionette_control.ocp.problem import config_units
from marionette_control.ocp.terms import (
    ConstraintPenalty,
    InitialState,
    InputTracking,
    OutputTracking,
    Point,
    StateTracking,
    TerminalState,
    TerminalValue,
)
from marionette_control.model.limits import ActuatorLimits, limits_of
from marionette_control.model.library import humanoid_marionette as hm
from marionette_control.model.library import marionette_arm as ma

from term_numdiff import NumDiffTerm

N = 4


def _psd(n, rng):
    a = rng.standard_normal((n, n))
    return a @ a.T / n


def arm_trajectory(rng, spread=0.02, dt=0.01):
    """Random arm states and inputs near a simulation from the raised pose held at rest."""
    m = library.get("marionette_arm")
    ds = _core.DiscreteSystem(m, dt)
    eq = ma.static_equilibrium(m, *ma.RAISED)
    x0 = ds.state_from_configs(eq.q, eq.q)
    U = eq.q[2:] + spread * rng.standard_normal((N, 2)).cumsum(axis=0)
    X, _ = ds.simulate(x0, U)
    X = X + 1e-3 * rng.standard_normal(X.shape)
    return m, ds, X, U


def humanoid_trajectory(rng, dt=0.01):
    m = library.get("humanoid_marionette")
    ds = _core.DiscreteSystem(m, dt)
    q0 = hm.initial_configuration(m)
    x0 = ds.state_from_configs(q0, q0)
    U = hm.string_walk_inputs(m, q0, dt, N) + 1e-3 * rng.standard_normal((N, m.nU))
    X, _ = ds.simulate(x0, U)
    return m, ds, X + 1e-4 * rng.standard_normal(X.shape), U


def pendulum_trajectory(rng, name="cart_pendulum", dt=0.05):
    m = library.get(name)
    ds = _core.DiscreteSystem(m, dt)
    X = 0.3 * rng.standard_normal((N + 1, m.nx))
    U = 0.5 * rng.standard_normal((N, m.nU))
    return m, ds, X, U


def tight_arm_limits(m):
    """Drive limits the random trajectory straddles: some margins negative, some small, some large."""
    return limits_of(m, {"carriage": ActuatorLimits(0.2, 0.75, 0.9, 40.0),
                         "string_length": ActuatorLimits(0.5, 1.0, 0.8, 30.0)})


def _cases():
    c = {}

    def case(name):
        def reg(fn):
            c[name] = fn
            return fn
        return reg

    @case("state_tracking")
    def _(rng):
        m, ds, X, U = arm_trajectory(rng)
        return StateTracking(X + rng.standard_normal(X.shape), _psd(m.nx, rng)), ds, X, U

    @case("terminal_state")
    def _(rng):
        m, ds, X, U = arm_trajectory(rng)
        return TerminalState(rng.standard_normal(m.nx), _psd(m.nx, rng), N), ds, X, U

    @case("terminal_value")
    def _(rng):
        m, ds, X, U = arm_trajectory(rng)
        return TerminalValue(rng.standard_normal(m.nx), rng.standard_normal(m.nx), _psd(m.nx, rng), N), ds, X, U

    @case("input_tracking")
    def _(rng):
        m, ds, X, U = arm_trajectory(rng)
        return InputTracking(rng.standard_normal(U.shape), _psd(m.nU, rng)), ds, X, U

    @case("output_tracking")
    def _(rng):
        m, ds, X, U = arm_trajectory(rng)
        r = 3
        return OutputTracking(rng.standard_normal((r, m.nx)), rng.standard_normal((r, m.nU)),
                              rng.standard_normal((N, r)), _psd(r, rng)), ds, X, U

    @case("initial_state")
    def _(rng):
        m, ds, X, U = pendulum_trajectory(rng, "pendulum")
        return InitialState(rng.standard_normal(m.nx), _psd(m.nx, rng), N), ds, X, U

    @case("penalty_arm")
    def _(rng):
        m, ds, X, U = arm_trajectory(rng)
        X[:, :m.nq] += 0.05 * rng.standard_normal((N + 1, m.nq))   # h clearly nonzero
        return ConstraintPenalty(m, ["string"], 3.0), ds, X, U

    @case("penalty_humanoid")
    def _(rng):
        m, ds, X, U = humanoid_trajectory(rng)
        X[:, :m.nq] += 0.01 * rng.standard_normal((N + 1, m.nq))
        return ConstraintPenalty(m, ["left_arm_string", "lower_torso_string"], 2.0), ds, X, U

    @case("barrier_drives_quadratic_extension")
    def _(rng):
        m, ds, X, U = arm_trajectory(rng, spread=0.03)
        lc = linear_constraints(m, tight_arm_limits(m), ds.dt, ("range", "speed", "acceleration"))
        C = lc.margins(Point(X, U))[:-1] / lc.scale
        assert (C < 0).any() and ((C > 0) & (C < 0.4)).any() and (C > 0.4).any()   # all three regimes
        return BarrierTerm(lc, 0.7, 0.4, ds.dt), ds, X, U

    @case("barrier_drives_log")
    def _(rng):
        m, ds, X, U = arm_trajectory(rng)
        lc = linear_constraints(m, limits_of(m, {"carriage": ActuatorLimits(-1, 2, 20.0, 5000.0),
                                                 "string_length": ActuatorLimits(0.1, 2, 20.0, 5000.0)}),
                                ds.dt, ("range", "speed", "acceleration"))
        return BarrierTerm(lc, 0.7, 0.0, ds.dt), ds, X, U

    @case("barrier_joints_and_forces")
    def _(rng):
        m, ds, X, U = pendulum_trajectory(rng)
        lim = limits_of(m).with_config_bounds([-0.5, -1.0], [0.5, 1.0]).with_force_bounds([-0.6], [0.6])
        lc = linear_constraints(m, lim, ds.dt, ("configuration", "force"))
        return BarrierTerm(lc, 1.3, 0.3, ds.dt), ds, X, U

    @case("barrier_tension_arm")
    def _(rng):
        m, ds, X, U = arm_trajectory(rng)
        lim = limits_of(m).with_min_tension(1.0)
        return BarrierTerm(tension_constraints(lim, ds.dt), 0.5, 0.6, ds.dt), ds, X, U

    @case("barrier_tension_humanoid")
    def _(rng):
        m, ds, X, U = humanoid_trajectory(rng)
        lim = limits_of(m).with_min_tension(2.0)
        return BarrierTerm(tension_constraints(lim, ds.dt), 0.5, 1.0, ds.dt), ds, X, U

    return c


CASES = _cases()


def _needs_core_lambda(term):
    return term.needs_lambda and not hasattr(_core.DiscreteSystem, "constraint_forces_trajectory")


@pytest.mark.parametrize("name", sorted(CASES))
def test_term_derivatives_match_finite_differences(name):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    term, ds, X, U = CASES[name](rng)
    nd = NumDiffTerm(term, ds)
    data = term.create_data()
    point = nd.point(X, U, derivatives=True)
    v = term.calc(data, point)
    assert np.isfinite(v) and v == data.value
    term.calc_diff(data, point, exact=True)
    lx = np.zeros_like(X) if data.lx is None else data.lx
    lu = np.zeros_like(U) if data.lu is None else data.lu
    fx, fu = nd.gradients(X, U)
    scale = max(np.abs(fx).max(), np.abs(fu).max(), 1e-12)
    np.testing.assert_allclose(lx, fx, rtol=0, atol=1e-6 * scale, err_msg=f"{name}: lx")
    np.testing.assert_allclose(lu, fu, rtol=0, atol=1e-6 * scale, err_msg=f"{name}: lu")

    nx, nU = X.shape[1], U.shape[1]

    def steps(block, shape):
        if block is None:
            return np.zeros((N,) + shape)
        return np.broadcast_to(block, (N,) + shape).copy()

    Hxx, Hxu, Huu = steps(data.Lxx, (nx, nx)), steps(data.Lxu, (nx, nU)), steps(data.Luu, (nU, nU))
    HxxN = np.zeros((nx, nx)) if data.Lxx_N is None else data.Lxx_N
    if data.w is not None:   # λ's own curvature, contracted by the core
        cxx, cxu, cuu = ds.second_order_trajectory(X, U, np.zeros((N, nx)), data.w)
        Hxx, Hxu, Huu = Hxx + cxx, Hxu + cxu, Huu + cuu
    Fxx, Fxu, Fuu, Fux = nd.hessians(X, U)
    hscale = max(np.abs(Fxx).max(), np.abs(Fuu).max(), np.abs(Fxu).max(), 1e-12)
    for got, want, what in ((Hxx, Fxx[:-1], "Lxx"), (HxxN, Fxx[-1], "Lxx_N"), (Hxu, Fxu, "Lxu"), (Huu, Fuu, "Luu"),
                            (Hxu, Fux.transpose(0, 2, 1), "Lxu vs d(lu)/dx")):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * hscale, err_msg=f"{name}: {what}")
    np.testing.assert_allclose(Hxx, Hxx.transpose(0, 2, 1), atol=1e-12 * hscale)

    # Gauss-Newton form (quasi-Newton model): same gradients, positive semi-definite blocks.
    gn = term.create_data()
    term.calc_diff(gn, point, exact=False)
    np.testing.assert_array_equal(lx, np.zeros_like(X) if gn.lx is None else gn.lx)
    assert gn.w is None
    G = np.zeros((N, nx + nU, nx + nU))
    G[:, :nx, :nx] = steps(gn.Lxx, (nx, nx))
    G[:, :nx, nx:] = steps(gn.Lxu, (nx, nU))
    G[:, nx:, :nx] = G[:, :nx, nx:].transpose(0, 2, 1)
    G[:, nx:, nx:] = steps(gn.Luu, (nU, nU))
    assert np.linalg.eigvalsh(G).min() >= -1e-9 * max(1.0, np.abs(G).max()), name


@pytest.mark.parametrize("delta", [0.0, 0.25])
def test_barrier_function_is_c2_and_the_log_above_delta(delta):
    """β_δ = −log c above δ (all c for δ = 0); value, slope and curvature continuous at c = δ; finite
    below δ (Hauser & Saccon's extension), +inf at c ≤ 0 for δ = 0."""
    c = np.array([0.3, 0.7, 2.0])
    v, d1, d2 = barrier(c, delta, 2)
    np.testing.assert_allclose(v, -np.log(c))
    np.testing.assert_allclose(d1, -1 / c)
    np.testing.assert_allclose(d2, 1 / c ** 2)
    if delta:
        e = 1e-9
        below, above = barrier(np.array([delta - e]), delta, 2), barrier(np.array([delta + e]), delta, 2)
        for a, b in zip(below, above):
            assert a[0] == pytest.approx(b[0], rel=1e-6)
        v, d1, d2 = barrier(np.array([-3.0, 0.0]), delta, 2)
        assert np.all(np.isfinite(v)) and np.all(d1 < 0) and np.all(d2 == 1 / delta ** 2)
    else:
        assert np.all(np.isinf(barrier(np.array([-1.0, 0.0]), 0.0)))


def test_linear_constraint_rows_are_the_physical_quantities():
    """Margins of range, speed and acceleration rows equal the limits minus the commanded quantities of
    a hand-made trajectory: ρ_{k+1} = u_k, s_k = (ρ_{k+1} − ρ_k)/Δt, a_k = (s_k − v_k)/Δt."""
    m = library.get("marionette_arm")
    dt = 0.01
    lim = limits_of(m, {"carriage": ActuatorLimits(-0.3, 0.9, 2.0, 15.0)})
    lc = linear_constraints(m, lim, dt, ("range", "speed", "acceleration"), config_units(m))
    X = np.zeros((3, m.nx))
    X[0, 2], X[0, 6] = 0.1, 0.0          # ρ_0 = 0.1 at rest
    X[1, 2], X[1, 6] = 0.11, 1.0         # ρ_1, v_1 = (0.11 - 0.1)/dt
    U = np.array([[0.11, 0.5], [0.125, 0.5]])
    M = lc.margins(Point(X, U))
    labels = [r.label for r in lc.rows]
    s = np.array([(0.11 - 0.1) / dt, (0.125 - 0.11) / dt])
    a = np.array([(s[0] - 0.0) / dt, (s[1] - 1.0) / dt])
    want = {"carriage >= -0.3 m": 0.3 + U[:, 0], "carriage <= 0.9 m": 0.9 - U[:, 0],
            "carriage speed >= -2 m/s": 2 + s, "carriage speed <= 2 m/s": 2 - s,
            "carriage acceleration >= -15 m/s^2": 15 + a, "carriage acceleration <= 15 m/s^2": 15 - a}
    assert set(labels) == set(want)
    for j, lab in enumerate(labels):
        np.testing.assert_allclose(M[:-1, j], want[lab], atol=1e-9, err_msg=lab)
