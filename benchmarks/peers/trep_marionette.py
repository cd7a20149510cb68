"""Peer timings: trep 1.0.2 on the humanoid marionette, seed-001 scenario (run with the peer venv's python).

    .venv-peer-trep/bin/python benchmarks/peers/trep_marionette.py [--quick] [--steps N]

Prints one JSON object on stdout (progress on stderr): versions, machine load,
the check of our hand-built trep model against trep.puppets.Puppet, and
figures named like marionette_control's (benchmarks/core.py) so the runner can
put them side by side:

  humanoid.vi_step                     mvi.step(t2, (), rho) per step, simulating the scenario
  humanoid.vi_step.from_simulate       the whole Python loop over mvi.step / N (trep has no batch simulate)
  humanoid.first_order                 DSystem.set(x_k, u_k, k) + fdx() + fdu() per step (incl. the step, as ours)
  humanoid.first_order.from_linearize_trajectory   DSystem.linearize_trajectory(X, U) / N
  humanoid.second_order_contracted     DSystem.set + fdxdx(z) + fdxdu(z) + fdudu(z) per step (trep computes
                                       the full second-derivative tensors, then contracts), trep's default
                                       thread pool (num_threads = cpu count); variant @threads=1
  humanoid.simulate_N, humanoid.linearize_N   whole-trajectory totals
  humanoid.newton_iterations.cold      median Newton iterations of mvi.step (guess q2 = q1)
  humanoid.trep.*_derivatives_only     the derivative work alone (after a step), for reference

All medians, after warm-up; Newton tolerance 1e-10 (trep's default), dt = 0.01.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time

import numpy as np
import trep
import trep.discopt as discopt

import trep_humanoid as th


def log(msg):
    print(f"[trep peer] {msg}", file=sys.stderr, flush=True)


def timed(fn, items, warmup=3):
    for i in list(items)[:warmup]:
        fn(i)
    out = []
    gc.disable()
    try:
        for i in items:
            t0 = time.perf_counter()
            fn(i)
            out.append(time.perf_counter() - t0)
    finally:
        gc.enable()
    return out


def ms(samples, per=1):
    return 1e3 * statistics.median(samples) / per


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer steps and repetitions")
    ap.add_argument("--steps", type=int, help="trajectory length (default 1000, quick 200)")
    ap.add_argument("--no-check", action="store_true", help="skip the trep.puppets.Puppet model check")
    a = ap.parse_args()
    N = a.steps or (200 if a.quick else 1000)
    reps = 1 if a.quick else 3
    so_samples = 20 if a.quick else 200
    dt = th.DT
    load_before = os.getloadavg()
    out = {"peer": "trep", "versions": {"trep": trep.__version__, "python": platform.python_version(),
                                        "numpy": np.__version__},
           "scenario": {"steps": N, "dt": dt, "tolerance": 1e-10}}
    if not a.no_check:
        log("checking the model against trep.puppets.Puppet")
        out["model_check_vs_trep_puppets"] = th.puppet_check()

    system = th.build_model()
    q0 = th.set_initial_pose(system)
    U = th.walk_inputs(system, q0, dt, N)
    figs = []

    def fig(name, value, unit, notes):
        figs.append({"name": name, "value": value, "unit": unit, "notes": notes})

    # VI step: simulate the scenario, timing every mvi.step (warm-up run first).
    log(f"VI step, {N} steps")
    th.simulate(system, th.make_mvi(system, q0, dt, num_threads=1), U[:20], dt)
    mvi = th.make_mvi(system, q0, dt, num_threads=1)
    X = np.zeros((N + 1, system.nQ + system.nQd + system.nQk))
    X[0, :system.nQ], X[0, system.nQ:system.nQ + system.nQd] = mvi.q2, mvi.p2
    iters = []

    def one_step(k):
        iters.append(mvi.step((k + 1) * dt, (), U[k]))
        X[k + 1] = np.concatenate([mvi.q2, mvi.p2, mvi.v2])

    t = timed(one_step, range(N), warmup=0)
    fig("humanoid.vi_step", ms(t), "ms", f"mvi.step per step while simulating; median over {N} steps")
    fig("humanoid.newton_iterations.cold", float(statistics.median(iters)), "iterations",
        "median Newton iterations of mvi.step (guess q2 = q1)")

    def sim():
        th.simulate(system, th.make_mvi(system, q0, dt, num_threads=1), U, dt)

    t_sim = timed(lambda _: sim(), range(reps), warmup=0)
    fig("humanoid.vi_step.from_simulate", ms(t_sim, N), "ms",
        f"Python loop over mvi.step (trep has no batch simulate) / {N}; median of {reps}")
    fig(f"humanoid.simulate_{N}", ms(t_sim), "ms", f"Python loop over mvi.step, {N} steps; median of {reps}")

    # First order through DSystem, as trep's own optimizer uses it.
    log("first-order linearization")
    mvi1 = trep.MidpointVI(system, tolerance=1e-10, num_threads=1)
    dsys = discopt.DSystem(mvi1, dt * np.arange(N + 1))

    def first(k):
        dsys.set(X[k], U[k], k)
        return dsys.fdx(), dsys.fdu()

    t = timed(first, range(N))
    fig("humanoid.first_order", ms(t), "ms",
        f"DSystem.set(x_k, u_k, k) + fdx() + fdu(), incl. the step; median over {N} steps")
    t_lin = timed(lambda _: dsys.linearize_trajectory(X, U), range(reps), warmup=0)
    fig("humanoid.first_order.from_linearize_trajectory", ms(t_lin, N), "ms",
        f"DSystem.linearize_trajectory(X, U) / {N}; median of {reps}")
    fig(f"humanoid.linearize_{N}", ms(t_lin), "ms", f"DSystem.linearize_trajectory(X, U), {N} steps; median of {reps}")

    # Derivative work alone (after the step), for reference.
    d1, d2 = [], []
    for k in range(0, N, max(1, N // so_samples)):
        dsys.set(X[k], U[k], k)
        t0 = time.perf_counter(); mvi1._calc_deriv1(); t1 = time.perf_counter()
        mvi1._calc_deriv2(); t2 = time.perf_counter()
        d1.append(t1 - t0)
        d2.append(t2 - t1)
    fig("humanoid.trep.first_derivatives_only", ms(d1), "ms",
        f"MidpointVI._calc_deriv1() after a step (no A, B assembly); median over {len(d1)} steps")
    fig("humanoid.trep.second_derivatives_only", ms(d2), "ms",
        f"MidpointVI._calc_deriv2() after deriv1, 1 thread; median over {len(d2)} steps")

    # Contracted second order, default thread pool and 1 thread.
    rng = np.random.default_rng(1)
    Z = rng.standard_normal((N, dsys.nX))
    ks = list(range(0, N, max(1, N // so_samples)))
    for threads, suffix in ((None, ""), (1, "@threads=1")):
        log(f"second order ({len(ks)} steps, num_threads={threads or os.cpu_count()})")
        mvi2 = trep.MidpointVI(system, tolerance=1e-10, num_threads=threads)
        ds2 = discopt.DSystem(mvi2, dt * np.arange(N + 1))

        def second(k):
            ds2.set(X[k], U[k], k)
            return ds2.fdxdx(Z[k]), ds2.fdxdu(Z[k]), ds2.fdudu(Z[k])

        t = timed(second, ks, warmup=2)
        fig("humanoid.second_order_contracted" + suffix, ms(t), "ms",
            f"DSystem.set + fdxdx(z) + fdxdu(z) + fdudu(z) (full tensors, then contracted), "
            f"num_threads={threads or os.cpu_count()}; median over {len(ks)} steps (every {ks[1] - ks[0]}th)")

    out["figures"] = figs
    out["loadavg_before"] = list(load_before)
    out["loadavg_after"] = list(os.getloadavg())
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
