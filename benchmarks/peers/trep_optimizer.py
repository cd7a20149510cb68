"""Peer timings: trep 1.0.2's discrete optimizer (trep.discopt) on the optimizer group's problems.

    .venv-peer-trep/bin/python benchmarks/peers/trep_optimizer.py [--quick] [--steps N]

Run with the peer venv's interpreter (install_trep.sh); nothing here imports
marionette_control. Prints one JSON object on stdout (progress on stderr) whose
figure names match benchmarks/optimizer.py:

  pendulum.swing_up.{newton,steepest}.time_to_convergence   DOptimizer.optimize from the hanging
        trajectory, first_method = 'quasi' for 4 iterations, then second_method (seed 001 §VIII-A,
        the reference's own tase2012/pend-optimization.py set-up; descent tolerance 1e-6)
  pendulum.swing_up.{newton,steepest}.steps / .cost          iterations taken and the converged cost
  humanoid.tracking.{quasi_newton,newton,newton_fallback}_iteration   seconds per DOptimizer.step of the
        thesis §6.7.3-style problem (desired = configurations of the simulated walk, momenta,
        velocities and inputs zero; weights of trep's examples/puppet-optimization.py: 100 on the
        dynamic configurations, 1 on the rest, 0.1 on the inputs), N steps of 0.01 s, from the
        pose with the strings held still; 4 'quasi' steps then 'newton' steps (fallbacks recorded)
  humanoid.tv_lqr_1000 / humanoid.tv_lq_1000   trep.discopt.dlqr.solve_tv_lqr / solve_tv_lq on the
        1000-step walk's linearization (80 states, 18 inputs), Q = R = I (the projection weights)

Medians after a warm-up where a figure is repeated.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time

import numpy as np
import trep
import trep.discopt as discopt
import trep.discopt.dlqr as dlqr

import trep_humanoid as th


def log(msg):
    print(f"[trep optimizer peer] {msg}", file=sys.stderr, flush=True)


class Recorder(discopt.DOptimizerMonitor):
    """Silent monitor that records every step: requested method, method used, cost, seconds."""

    def __init__(self):
        self.steps = []
        self._t0 = None
        self._fallback = None
        self.terminated = False

    def step_begin(self, iteration):
        if self._t0 is None:  # a fallback re-enters step_begin for the same iteration
            self._t0 = time.perf_counter()

    def step_method_failure(self, method, cost, dcost, fallback_method):
        self._fallback = (method, fallback_method)

    def step_termination(self, cost, dcost):
        self.terminated = True
        self.final = {"cost": float(cost), "dcost": float(dcost)}
        self._t0, self._fallback = None, None

    def step_completed(self, method, cost, nX, nU):
        self.steps.append({"method": method, "requested": self._fallback[0] if self._fallback else method,
                           "cost": float(cost), "seconds": time.perf_counter() - self._t0})
        self._t0, self._fallback = None, None


# ------------------------------------------------------------------------------ pendulum


def pendulum_problem():
    """Seed 001's pendulum (theta about x, the bob at 1 m on -z, gravity -z, torque on theta)."""
    system = trep.System()
    system.import_frames([trep.rx("theta", name="pendulum"), [trep.tz(-1.0, name="bob", mass=1.0)]])
    trep.potentials.Gravity(system, (0.0, 0.0, -9.8))
    trep.forces.ConfigForce(system, "theta", "torque")
    N, dt = 100, 0.1
    dsys = discopt.DSystem(trep.MidpointVI(system), dt * np.arange(N + 1))
    X0, U0 = dsys.build_trajectory()  # hanging at rest, u = 0
    Qref = np.zeros((N + 1, 1))
    Qref[N // 2:] = math.pi
    Xd, Ud = dsys.build_trajectory(Q=Qref, u=np.zeros((N, 1)))
    cost = discopt.DCost(Xd, Ud, np.diag([1000.0, 1.0]), np.diag([50.0]))
    return dsys, cost, X0, U0


def swing_up(method):
    dsys, cost, X0, U0 = pendulum_problem()
    mon = Recorder()
    opt = discopt.DOptimizer(dsys, cost, first_method_iterations=4, monitor=mon)
    opt.second_method = method
    opt.descent_tolerance = 1e-6
    t = time.perf_counter()
    converged, X, U = opt.optimize(X0, U0, max_steps=3000)
    seconds = time.perf_counter() - t
    return {"converged": bool(converged), "seconds": seconds, "steps": len(mon.steps),
            "cost": float(opt.calc_cost(X, U)), "methods": [s["method"] for s in mon.steps]}


# ------------------------------------------------------------------------------ humanoid


def weights(system):
    Q = np.diag([100.0] * system.nQd + [1.0] * system.nQk + [1.0] * system.nQd + [1.0] * system.nQk)
    R = 0.1 * np.eye(system.nQk)
    return Q, R


def humanoid_tracking(N, newton_steps):
    system = th.build_model()
    q0 = th.set_initial_pose(system)
    dt = th.DT
    Xw, _ = th.simulate(system, th.make_mvi(system, q0, dt), th.walk_inputs(system, q0, dt, N), dt)
    Xd = np.zeros_like(Xw)
    Xd[:, :system.nQ] = Xw[:, :system.nQ]
    Ud = np.zeros((N, system.nQk))
    U0 = np.tile(q0[system.nQd:], (N, 1))  # strings held still
    X0, _ = th.simulate(system, th.make_mvi(system, q0, dt), U0, dt)
    Q, R = weights(system)
    dsys = discopt.DSystem(trep.MidpointVI(system, tolerance=1e-10), dt * np.arange(N + 1))
    cost = discopt.DCost(Xd, Ud, Q, R)
    mon = Recorder()
    opt = discopt.DOptimizer(dsys, cost, first_method_iterations=4, monitor=mon)
    opt.second_method = "newton"
    start_cost = float(opt.calc_cost(X0, U0))
    t = time.perf_counter()
    try:
        converged, X, U = opt.optimize(X0, U0, max_steps=4 + newton_steps)
    except trep.ConvergenceError as e:  # Armijo failure: report what was done
        log(f"humanoid optimization stopped: {e}")
        converged = False
    return {"start_cost": start_cost, "steps": mon.steps, "converged": bool(converged),
            "seconds": time.perf_counter() - t}


def lqr_timings(reps):
    system = th.build_model()
    q0 = th.set_initial_pose(system)
    dt, N = th.DT, 1000
    U = th.walk_inputs(system, q0, dt, N)
    X, _ = th.simulate(system, th.make_mvi(system, q0, dt), U, dt)
    dsys = discopt.DSystem(trep.MidpointVI(system, tolerance=1e-10), dt * np.arange(N + 1))
    log("linearizing the 1000-step walk (untimed)")
    A, B = dsys.linearize_trajectory(X, U)
    nX, nU = dsys.nX, dsys.nU
    I_x, I_u, S0 = np.eye(nX), np.eye(nU), np.zeros((nX, nU))
    q = np.ones((N + 1, nX))
    r = np.ones((N, nU))
    out = {}
    for name, fn in (("tv_lqr", lambda: dlqr.solve_tv_lqr(A, B, lambda k: I_x, lambda k: I_u)),
                     ("tv_lq", lambda: dlqr.solve_tv_lq(A, B, q, r, lambda k: I_x, lambda k: S0, lambda k: I_u))):
        fn()
        samples = []
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t)
        out[name] = 1e3 * statistics.median(samples)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller humanoid problem, no steepest-descent run")
    ap.add_argument("--steps", type=int, help="humanoid horizon N (default 200, quick 60)")
    a = ap.parse_args()
    N = a.steps or (60 if a.quick else 200)
    newton_steps = 1 if a.quick else 3
    out = {"peer": "trep", "versions": {"trep": trep.__version__, "python": platform.python_version(),
                                        "numpy": np.__version__},
           "loadavg_before": list(os.getloadavg())}
    figs = []

    def fig(name, value, unit, notes):
        figs.append({"name": name, "value": value, "unit": unit, "notes": notes})

    methods = ("newton",) if a.quick else ("newton", "steepest")
    for method in methods:
        log(f"pendulum swing-up, 4 quasi then {method}")
        r = swing_up(method)
        out[f"swing_up_{method}"] = {k: v for k, v in r.items() if k != "methods"}
        out[f"swing_up_{method}"]["fallbacks_or_methods"] = sorted(set(r["methods"][4:]))
        note = (f"DOptimizer.optimize, 4 'quasi' then '{method}', tolerance 1e-6; converged={r['converged']}, "
                f"{r['steps']} steps, cost {r['cost']:.10f}")
        fig(f"pendulum.swing_up.{method}.time_to_convergence", r["seconds"], "s", note)
        fig(f"pendulum.swing_up.{method}.steps", r["steps"], "iterations", note)
        fig(f"pendulum.swing_up.{method}.cost", r["cost"], "cost", note)

    log(f"humanoid tracking, N = {N}, 4 quasi then {newton_steps} newton steps")
    h = humanoid_tracking(N, newton_steps)
    out["humanoid_tracking"] = {"N": N, **h}
    kinds = {"quasi_newton": lambda st: st["requested"] == st["method"] == "quasi",
             "newton": lambda st: st["method"] == "newton",
             "newton_fallback": lambda st: st["requested"] == "newton" and st["method"] != "newton"}
    for label, sel in kinds.items():
        secs = [st["seconds"] for st in h["steps"] if sel(st)]
        if secs:
            kind = ("a Newton step whose direction ascended, redone as quasi" if label == "newton_fallback"
                    else label)
            fig(f"humanoid.tracking.{label}_iteration", statistics.mean(secs), "s",
                f"DOptimizer.step, thesis §6.7.3-style tracking, N = {N} steps of 0.01 s; mean over "
                f"{len(secs)} steps ({kind})")
    if h["steps"]:
        fig("humanoid.tracking.cost_after_first_iteration", h["steps"][0]["cost"], "cost",
            f"cost after the first 'quasi' step (start {h['start_cost']:.6f}), N = {N}")

    log("1000-step LQR / LQ sweeps")
    lq = lqr_timings(2 if a.quick else 5)
    fig("humanoid.tv_lqr_1000", lq["tv_lqr"], "ms",
        "dlqr.solve_tv_lqr(A, B, Q(k) = I, R(k) = I) on the 1000-step walk's linearization (80 states, "
        "18 inputs); returns K(k) and P(0); median")
    fig("humanoid.tv_lq_1000", lq["tv_lq"], "ms",
        "dlqr.solve_tv_lq(A, B, q, r, Q = I, S = 0, R = I), same linearization; returns K, C, P(0), b(0); median")
    out["figures"] = figs
    out["loadavg_after"] = list(os.getloadavg())
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
