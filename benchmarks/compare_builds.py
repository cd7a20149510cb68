"""Before/after in the same run: one scenario timed on two source trees, alternating.

``python -m benchmarks.compare_builds BASE [--base-label REV] [--rounds 7] [--repeats 15] [--scenarios NAME...]
[--out FILE]``

``BASE`` is another source tree of this package with its core built in place, e.g. the commit
before a change::

    git archive <rev> | tar -x -C /tmp/base && (cd /tmp/base && .venv/bin/python setup.py build_ext --inplace)

Every round starts one fresh process per tree (base first, then this tree), each importing its
own ``marionette_control`` and timing every scenario ``--repeats`` times after a warm-up
(median); load changes during the run hit both alike. Scenarios (their results are printed so
that a change that alters them shows):

* ``swing_up``: seed 001 §VIII-A, 4 quasi-Newton then Newton (benchmarks/optimizer.py);
* ``wave.unconstrained`` / ``wave.constrained``: ``config/optimize/marionette_arm_wave.yaml``
  without and with the model file's limits (benchmarks/constraints.py), from its initial
  trajectory;
* ``cartpole``: seed 004 App. A, ``config/optimize/seed004_cartpole.yaml`` (N = 200) from its initial
  trajectory (benchmarks/dmocc.py's problem);
* ``humanoid.tracking`` / ``humanoid.tracking_1000`` (not run unless named in ``--scenarios``): thesis
  §6.7.3's tracking of the humanoid marionette's string walk, N = 200 and 1000 (benchmarks/optimizer.py),
  ``--repeats`` / 5 and one timed run per process (at least one);
* ``humanoid.linearization`` (likewise): ``linearize_trajectory`` over the core group's 1000-step string walk
  (benchmarks/core.py), per step, ``--repeats`` / 3 timed runs per process.

Each scenario's wall time and the process's CPU time (``time.process_time``: every thread of the process,
also BLAS workers that spin beside the solve) are recorded, medians over the repeats.

Writes JSON like ``benchmarks.run`` (machine, both trees' git revisions, per-round medians,
the median over the rounds, base / this) to ``--out`` or ``out/benchmarks/<UTC>-compare.json``.
Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks.run import ROOT, machine_info

SCENARIOS = ("swing_up", "wave.unconstrained", "wave.constrained", "cartpole", "humanoid.tracking",
             "humanoid.tracking_1000", "humanoid.linearization")
DEFAULT_SCENARIOS = SCENARIOS[:3]

# Runs in the tree given as argv[1] the scenarios named in argv[3] (comma-separated):
# {scenario: [median seconds, iterations, cost]}.
_CHILD = r'''
import json, statistics, sys, time
sys.path.insert(0, sys.argv[1])
repeats, wanted = int(sys.argv[2]), sys.argv[3].split(",")
from marionette_control.ocp.projection import OptimizerOptions, ProjectionOptimizer
from marionette_control.ocp.spec import load_spec
from marionette_control.ocp.spec_problem import build_problem, initial_trajectory
from benchmarks.optimizer import humanoid_tracking_problem, swing_up_problem

def timed(opt, X0, U0, repeats=repeats):
    r = opt.optimize(X0, U0)
    ts, cs = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        opt.optimize(X0, U0)
        ts.append(time.perf_counter() - t); cs.append(time.process_time() - c)
    return [statistics.median(ts), r.iterations, r.cost, statistics.median(cs)]

out = {}
if "swing_up" in wanted:
    p, X0, U0 = swing_up_problem()
    out["swing_up"] = timed(ProjectionOptimizer(p.system, p.cost, OptimizerOptions(
        schedule=(("quasi_newton", 4), ("newton", None)), max_iterations=3000)), X0, U0)
wave = sys.argv[1] + "/config/optimize/marionette_arm_wave.yaml"
cartpole = sys.argv[1] + "/config/optimize/seed004_cartpole.yaml"
for name, path, over in (("wave.unconstrained", wave, {"constraints.enabled": False}), ("wave.constrained", wave, {}),
                         ("cartpole", cartpole, {})):
    if name in wanted:
        spec = load_spec(path, over)
        p = build_problem(spec)
        X0, U0, _ = initial_trajectory(spec, p)
        out[name] = timed(ProjectionOptimizer(p.system, p.cost, p.options), X0, U0)
for name, N, reps in (("humanoid.tracking", 200, max(1, repeats // 5)), ("humanoid.tracking_1000", 1000, 1)):
    if name in wanted:
        p, X0, U0 = humanoid_tracking_problem(N, OptimizerOptions(max_iterations=40))
        out[name] = timed(ProjectionOptimizer(p.system, p.cost, p.options), X0, U0, reps)
if "humanoid.linearization" in wanted:
    from benchmarks.core import humanoid_setup
    m, ds, x0, U = humanoid_setup(1000)
    X = ds.simulate(x0, U)[0]
    ds.linearize_trajectory(X, U)
    ts, cs = [], []
    for _ in range(max(1, repeats // 3)):
        t, c = time.perf_counter(), time.process_time()
        ds.linearize_trajectory(X, U)
        ts.append((time.perf_counter() - t) / len(U)); cs.append((time.process_time() - c) / len(U))
    out["humanoid.linearization"] = [statistics.median(ts), 0, 0.0, statistics.median(cs)]
print(json.dumps(out))
'''


def _git_revision(tree: Path) -> str | None:
    r = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tree, capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.compare_builds", description=__doc__.split("\n")[0])
    ap.add_argument("base", type=Path, help="the other source tree, its core built in place")
    ap.add_argument("--rounds", type=int, default=7, help="alternating process pairs (default 7)")
    ap.add_argument("--repeats", type=int, default=15, help="timed runs per scenario and process (default 15)")
    ap.add_argument("--base-label", default="", help="what BASE is (e.g. the commit it was exported from)")
    ap.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(DEFAULT_SCENARIOS), metavar="NAME",
                    help=f"scenarios to time (of: {', '.join(SCENARIOS)}; default: {', '.join(DEFAULT_SCENARIOS)})")
    ap.add_argument("--out", type=Path, help="JSON file (default out/benchmarks/<UTC>-compare.json)")
    a = ap.parse_args(argv)
    scenarios = list(dict.fromkeys(a.scenarios))
    trees = {"base": a.base.resolve(), "this": ROOT}
    if not list((trees["base"] / "marionette_control").glob("_core*.so")):
        ap.error(f"{trees['base']}: no built core in marionette_control/ (build it in place first)")
    machine = machine_info()
    rounds = {k: [] for k in trees}
    for i in range(a.rounds):
        for k, tree in trees.items():
            res = subprocess.run([sys.executable, "-c", _CHILD, str(tree), str(a.repeats), ",".join(scenarios)],
                                 capture_output=True, text=True, cwd="/tmp")
            if res.returncode != 0:
                print(res.stderr, file=sys.stderr)
                return 1
            rounds[k].append(json.loads(res.stdout.splitlines()[-1]))
        print(f"round {i + 1}/{a.rounds}: " + "; ".join(
            f"{s} {rounds['base'][-1][s][0] * 1e3:.1f} / {rounds['this'][-1][s][0] * 1e3:.1f} ms" for s in scenarios),
            file=sys.stderr)
    summary = {}
    for s in scenarios:
        med = {k: statistics.median(r[s][0] for r in rounds[k]) for k in trees}
        cpu = {k: statistics.median(r[s][3] for r in rounds[k]) for k in trees}
        summary[s] = {"base_s": med["base"], "this_s": med["this"], "base_over_this": med["base"] / med["this"],
                      "base_cpu_s": cpu["base"], "this_cpu_s": cpu["this"], "base_over_this_cpu": cpu["base"] / cpu["this"],
                      "base_range_s": [min(r[s][0] for r in rounds["base"]), max(r[s][0] for r in rounds["base"])],
                      "this_range_s": [min(r[s][0] for r in rounds["this"]), max(r[s][0] for r in rounds["this"])],
                      "base_iterations": rounds["base"][0][s][1], "this_iterations": rounds["this"][0][s][1],
                      "base_cost": rounds["base"][0][s][2], "this_cost": rounds["this"][0][s][2]}
        print(f"{s:<20} base {med['base'] * 1e3:8.2f} ms ({summary[s]['base_iterations']} it, cost "
              f"{summary[s]['base_cost']:.13g})  this {med['this'] * 1e3:8.2f} ms ({summary[s]['this_iterations']} it, "
              f"cost {summary[s]['this_cost']:.13g})  base/this {summary[s]['base_over_this']:.2f} "
              f"(CPU {cpu['base'] * 1e3:.2f} / {cpu['this'] * 1e3:.2f} ms: {summary[s]['base_over_this_cpu']:.2f})")
    machine["loadavg_after"] = list(os.getloadavg())
    # trees by revision only: where they sat on the measuring machine says nothing to a reader of the record
    doc = {"machine": machine, "trees": {k: {"git_commit": _git_revision(v)} for k, v in trees.items()},
           "base_label": a.base_label,
           "options": {"rounds": a.rounds, "repeats": a.repeats, "scenarios": scenarios}, "summary": summary,
           "rounds": rounds}
    out = a.out or ROOT / "out" / "benchmarks" / (_dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
                                                  + "-compare.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
