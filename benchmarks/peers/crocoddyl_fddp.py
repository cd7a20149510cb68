"""Crocoddyl's FDDP on the dmocc group's problems where its model fits, run in the peer's own venv.

Prints one JSON object {"versions", "figures", "gravity_check"} (benchmarks/peers/__init__.py). Crocoddyl
models a problem its own way: a Pinocchio model, forward dynamics (ABA) and an integrator of its own
(``IntegratedActionModelEuler``: semi-implicit Euler; RK4 for comparison) — not the midpoint variational
integrator. The costs are the group's problems' definitions (Crocoddyl scales running costs by Δt, so the
running weights are divided by it), so the costs differ from ours by the discretization only:

* ``pendulum``: seed 001's swing-up (Δt = 0.1, N = 100, ½(x − x_d)ᵀdiag(1000, 1)(x − x_d) + ½·50u²,
  Q_f = Q; for m = l = 1 the momentum is θ̇). From u = 0 (the hanging trajectory) FDDP stalls near 95 000
  (its Gauss–Newton backward pass has no second derivatives of the dynamics); warm-started from the
  reference states with u = 0, an infeasible start, it converges.
* ``cartpole``: seed 004 App. A, its own cost definition natively ((q, v) states: ½ Σ Δt F² +
  ½ 10⁵|x_N − x_f|²), the mirrored reading (docs/reproductions.md §7a); an actuation model that maps the
  one input to the cart's force. From u = 0.
* ``two_link``: seed 004 §8's horizontal two-link arm (Table 8.1: m = 0.5, 0.5 kg, L = 2, 0.5 m, uniform
  links, viscous friction 0.2 on the shoulder; N = 1000, Δt = 0.01), its cost natively (½ Σ Δt (u₁² +
  0.5 u₂²) + ½ 10⁶|x_N − x_f|² on (q, v) — ours weighs the momentum at the end, the same at the rest target
  up to the mass matrix: the optima differ slightly). Crocoddyl's free forward dynamics has no joint friction:
  the shoulder's −0.2 q̇ is added by an actuation model (τ = u − c q̇). From the same start as ours: the
  arm at rest with u = 0 (ours: the fold-cruise-unfold keyframes made dynamically feasible; a start in its
  own discretization would need our package in the peer's venv). The friction's actuation model is Python, called
  at every node: its time per iteration includes those calls (without the friction, ``ActuationModelFull`` in
  C++, about a third: 1000 iterations in 28 s, still not converged). At most 300 iterations.

The constrained wave does not fit: its string is a holonomic constraint with a kinematic (prescribed)
length and its inputs are prescribed configurations, which Crocoddyl's contact and actuation models do not
express.

Before timing, the peer checks that gravity acts in Crocoddyl's C++ calc (pin 4.1.0 with the crocoddyl 3.2
wheel drops it; crocoddyl-requirements.txt pins 4.0.0).

    .venv-peer-crocoddyl/bin/python benchmarks/peers/crocoddyl_fddp.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import crocoddyl
import numpy as np
import pinocchio as pin

G_PENDULUM, G_CARTPOLE = 9.8, 9.81


def pendulum_model():
    m = pin.Model()
    m.gravity.linear = np.array([0.0, 0.0, -G_PENDULUM])
    j = m.addJoint(0, pin.JointModelRX(), pin.SE3.Identity(), "theta")
    m.appendBodyToJoint(j, pin.Inertia(1.0, np.array([0.0, 0.0, -1.0]), np.zeros((3, 3))), pin.SE3.Identity())
    return m


def cartpole_model():
    m = pin.Model()
    m.gravity.linear = np.array([0.0, 0.0, -G_CARTPOLE])
    cart = m.addJoint(0, pin.JointModelPY(), pin.SE3.Identity(), "cart")
    m.appendBodyToJoint(cart, pin.Inertia(2.0, np.zeros(3), np.zeros((3, 3))), pin.SE3.Identity())
    pole = m.addJoint(cart, pin.JointModelRX(), pin.SE3.Identity(), "theta")
    m.appendBodyToJoint(pole, pin.Inertia(1.0, np.array([0.0, 0.0, -1.0]), np.zeros((3, 3))), pin.SE3.Identity())
    return m


class CartActuation(crocoddyl.ActuationModelAbstract):
    """The one input is the force on the cart (the first joint); the pendulum is not actuated."""

    def __init__(self, state):
        crocoddyl.ActuationModelAbstract.__init__(self, state, 1)

    def calc(self, data, x, u):
        data.tau[0] = u[0]
        data.tau[1] = 0.0

    def calcDiff(self, data, x, u):
        data.dtau_du[0] = 1.0           # (nv, 1) arrives as a 1-D view
        data.dtau_du[1] = 0.0


TWO_LINK = dict(m=(0.5, 0.5), L=(2.0, 0.5), c1=0.2)
TWO_LINK_X0 = np.array([-1.5707963, 0.05, 0.0, 0.0])      # config/optimize/seed004_two_link.yaml
TWO_LINK_XF = np.array([1.5707963, 0.05, 0.0, 0.0])
#: FDDP's iterations on the two-link arm: it does not converge in 1000 (measured: stop 4e-5, 28 s without the friction).
TWO_LINK_MAX_ITER = 300


def two_link_model():
    """Seed 004 §8's arm (Table 8.1) in the horizontal plane: rotations about z, no gravity."""
    m = pin.Model()
    m.gravity.linear = np.zeros(3)
    (m1, m2), (L1, L2) = TWO_LINK["m"], TWO_LINK["L"]
    j1 = m.addJoint(0, pin.JointModelRZ(), pin.SE3.Identity(), "theta1")
    m.appendBodyToJoint(j1, pin.Inertia(m1, np.array([L1 / 2, 0.0, 0.0]), np.diag([0.0, 1.0, 1.0]) * m1 * L1 ** 2 / 12),
                        pin.SE3.Identity())
    j2 = m.addJoint(j1, pin.JointModelRZ(), pin.SE3(np.eye(3), np.array([L1, 0.0, 0.0])), "theta2")
    m.appendBodyToJoint(j2, pin.Inertia(m2, np.array([L2 / 2, 0.0, 0.0]), np.diag([0.0, 1.0, 1.0]) * m2 * L2 ** 2 / 12),
                        pin.SE3.Identity())
    return m


class FrictionActuation(crocoddyl.ActuationModelAbstract):
    """τ = u − c ⊙ q̇: the joints' torques with the model's viscous friction (not a Crocoddyl dynamics term)."""

    def __init__(self, state, c):
        crocoddyl.ActuationModelAbstract.__init__(self, state, state.nv)
        self.c = np.asarray(c, dtype=float)

    def calc(self, data, x, u):
        data.tau[:] = u - self.c * x[self.state.nq:]

    def calcDiff(self, data, x, u):
        data.dtau_dx[:, :] = 0.0
        data.dtau_dx[:, self.state.nq:] = -np.diag(self.c)
        data.dtau_du[:, :] = np.eye(self.state.nv)


def _integrated(dam, dt, scheme):
    if scheme == "euler":
        return crocoddyl.IntegratedActionModelEuler(dam, dt)
    return crocoddyl.IntegratedActionModelRK(dam, crocoddyl.RKType.four, dt)


def pendulum_problem(scheme):
    dt, N = 0.1, 100
    state = crocoddyl.StateMultibody(pendulum_model())
    act = crocoddyl.ActuationModelFull(state)

    def node(xref, terminal):
        scale = 1.0 if terminal else 1.0 / dt
        costs = crocoddyl.CostModelSum(state, 1)
        costs.addCost("x", crocoddyl.CostModelResidual(state, crocoddyl.ActivationModelWeightedQuad(
            np.array([1000.0, 1.0]) * scale), crocoddyl.ResidualModelState(state, xref, 1)), 1.0)
        if not terminal:
            costs.addCost("u", crocoddyl.CostModelResidual(state, crocoddyl.ActivationModelWeightedQuad(
                np.array([50.0]) * scale), crocoddyl.ResidualModelControl(state, 1)), 1.0)
        dam = crocoddyl.DifferentialActionModelFreeFwdDynamics(state, act, costs)
        return _integrated(dam, 0.0 if terminal else dt, scheme)

    def xref(k):
        return np.array([0.0 if k < N // 2 else np.pi, 0.0])

    problem = crocoddyl.ShootingProblem(np.zeros(2), [node(xref(k), False) for k in range(N)], node(xref(N), True))
    return problem, [xref(k) for k in range(N + 1)]


def cartpole_problem():
    dt, N = 0.01, 200
    state = crocoddyl.StateMultibody(cartpole_model())
    act = CartActuation(state)
    xf = np.array([0.0, np.pi, 0.0, 0.0])

    def node(terminal):
        costs = crocoddyl.CostModelSum(state, 1)
        if terminal:
            costs.addCost("x", crocoddyl.CostModelResidual(state, crocoddyl.ActivationModelWeightedQuad(
                1e5 * np.ones(4)), crocoddyl.ResidualModelState(state, xf, 1)), 1.0)
        else:                                                       # Δt · ½ F² = seed 004's ½ Δt F²
            costs.addCost("u", crocoddyl.CostModelResidual(state, crocoddyl.ResidualModelControl(state, 1)), 1.0)
        dam = crocoddyl.DifferentialActionModelFreeFwdDynamics(state, act, costs)
        return crocoddyl.IntegratedActionModelEuler(dam, 0.0 if terminal else dt)

    return crocoddyl.ShootingProblem(np.array([-1.0, 0.0, 0.0, 0.0]), [node(False)] * N, node(True))


def two_link_problem(x0, xf, N, dt=0.01):
    """``x0``, ``xf``: (θ₁, θ₂, θ̇₁, θ̇₂) at the start and the target; N steps of ``dt``."""
    state = crocoddyl.StateMultibody(two_link_model())
    act = FrictionActuation(state, [TWO_LINK["c1"], 0.0])

    def node(terminal):
        costs = crocoddyl.CostModelSum(state, 2)
        if terminal:
            costs.addCost("x", crocoddyl.CostModelResidual(state, crocoddyl.ActivationModelWeightedQuad(
                1e6 * np.ones(4)), crocoddyl.ResidualModelState(state, xf, 2)), 1.0)
        else:                                  # Δt·½(u₁² + 0.5u₂²) = ours ½(0.01u₁² + 0.005u₂²)
            costs.addCost("u", crocoddyl.CostModelResidual(state, crocoddyl.ActivationModelWeightedQuad(
                np.array([0.01, 0.005]) / dt), crocoddyl.ResidualModelControl(state, 2)), 1.0)
        dam = crocoddyl.DifferentialActionModelFreeFwdDynamics(state, act, costs)
        return crocoddyl.IntegratedActionModelEuler(dam, 0.0 if terminal else dt)

    return crocoddyl.ShootingProblem(np.asarray(x0, dtype=float), [node(False)] * N, node(True))


def gravity_check() -> float:
    """θ̈ of the hanging-horizontal pendulum (θ = π/2, at rest, no torque) from Crocoddyl's C++ calc: −g/l."""
    state = crocoddyl.StateMultibody(pendulum_model())
    dam = crocoddyl.DifferentialActionModelFreeFwdDynamics(state, crocoddyl.ActuationModelFull(state),
                                                           crocoddyl.CostModelSum(state, 1))
    data = dam.createData()
    dam.calc(data, np.array([np.pi / 2, 0.0]), np.zeros(1))
    acc = float(data.xout[0])
    if abs(acc + G_PENDULUM) > 1e-9:
        raise SystemExit(f"Crocoddyl's calc gives θ̈ = {acc} for the horizontal pendulum, not {-G_PENDULUM}: "
                         f"gravity is not applied (pin {pin.__version__}, crocoddyl {crocoddyl.__version__}; "
                         "see crocoddyl-requirements.txt)")
    return acc


def solve(problem, xs, us, feasible, reps, max_iter=1000):
    times, solver = [], None
    for _ in range(reps):
        solver = crocoddyl.SolverFDDP(problem)
        solver.th_stop = 1e-9
        t = time.perf_counter()
        solver.solve(xs, us, max_iter, feasible)
        times.append(time.perf_counter() - t)
    converged = solver.stop < solver.th_stop
    return solver, statistics.median(times), times, converged


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    reps = 3 if a.quick else 9
    acc = gravity_check()
    figs = []

    def fig(name, value, unit, notes):
        figs.append({"name": name, "value": float(value), "unit": unit, "notes": notes})

    def spread(ts):
        return f"median of {len(ts)} runs (min {min(ts):.4g} s, max {max(ts):.4g} s)"

    for scheme in ("euler", "rk4"):
        problem, xref = pendulum_problem(scheme)
        N = problem.T
        tag = "" if scheme == "euler" else "_rk4"
        s, t, ts, ok = solve(problem, [np.zeros(2)] * (N + 1), [np.zeros(1)] * N, True, 1)
        note = (f"FDDP ({scheme}) from u = 0, the hanging trajectory: converged={ok} after {s.iter} iterations "
                f"(stop {s.stop:.2e}), cost {s.cost:.6g}; one run")
        fig(f"pendulum.fddp{tag}_from_rest.cost", s.cost, "cost", note)
        fig(f"pendulum.fddp{tag}_from_rest.iterations", s.iter, "iterations", note)
        s, t, ts, ok = solve(problem, xref, [np.zeros(1)] * N, False, reps)
        note = (f"FDDP ({scheme}) warm-started from the reference states with u = 0 (infeasible start): "
                f"converged={ok} after {s.iter} iterations, cost {s.cost:.10g} in its own discretization "
                f"(midpoint VI: 13297.37889); {spread(ts)}")
        if scheme == "euler":
            fig("pendulum.projection.time_to_solution@crocoddyl_fddp_warm", t, "s", note)
        fig(f"pendulum.fddp{tag}_warm.time_to_solution", t, "s", note)
        fig(f"pendulum.fddp{tag}_warm.iterations", s.iter, "iterations", note)
        fig(f"pendulum.fddp{tag}_warm.cost", s.cost, "cost", note)

    def from_rest(name, problem, reps, what, optimum, max_iter=1000):
        """FDDP from u = 0 on ``problem``: the problem's four figures, paired with ours as ``<name>.projection``."""
        N, nu = problem.T, problem.runningModels[0].nu
        x0 = np.array(problem.x0)
        s, t, ts, ok = solve(problem, [x0] * (N + 1), [np.zeros(nu)] * N, True, reps, max_iter)
        note = (f"FDDP (semi-implicit Euler{what}) from u = 0: converged={ok} after {s.iter} iterations (stop "
                f"{s.stop:.2e}), cost {s.cost:.8g} in its own discretization (midpoint VI: {optimum}); final state "
                f"{np.round(s.xs[-1], 5).tolist()}; {spread(ts)}")
        fig(f"{name}.projection.time_to_solution@crocoddyl_fddp", t, "s", note)
        for key, value, unit in (("time_to_solution", t, "s"), ("iterations", s.iter, "iterations"),
                                 ("cost", s.cost, "cost")):
            fig(f"{name}.fddp.{key}", value, unit, note)

    from_rest("cartpole", cartpole_problem(), reps, "", "308.8219")
    from_rest("two_link", two_link_problem(TWO_LINK_X0, TWO_LINK_XF, 1000), 1,
              ", shoulder friction by a Python actuation model; ours starts from the keyframes made feasible",
              "0.3220448", TWO_LINK_MAX_ITER)
    print(json.dumps({"versions": {"crocoddyl": crocoddyl.__version__, "pinocchio": pin.__version__},
                      "gravity_check": acc, "figures": figs}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
