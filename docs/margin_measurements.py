"""The measurements behind docs/margins.md and docs/motions.md: the feedback's spread, the reserve, the library.

    .venv/bin/python docs/margin_measurements.py [--out out/reproductions/margins.json] [--motions wave,bow]
                                                 [--seeds 0,1,2] [--no-reserve] [--retiming-curve]
    .venv/bin/python docs/margin_measurements.py --search [--start 0.05,0.3,0.3,0.15]

For every motion of the library (config/motions/), optimized with the package's own tool (the arm's spec,
``config/optimize/marionette_arm_wave.yaml``, with ``motion.name``; a motion drawn too fast re-timed uniformly),
it records the optimization (iterations, time, re-timing factor, worst margins to the reserved and to the
hardware's limits: the table of docs/motions.md; and the optimum straight from the initial trajectory,
``optimizer.start: initial``, against the default start from the unconstrained optimum) and tracks the result
offline on the realistic hardware profile (``marionette_control.sim.offline_loop.run_loop``: the controller node's
tick logic against the stand-in), closed loop and feed-forward only, for each noise seed. From the two runs it measures what the feedback adds:

* the commands' spread, per drive: δρ_k = u_closed(k) − u_open(k) (the command sent at tick k, the feed-forward
  alone in the open-loop run, so δρ is the feedback's correction after the controller's clamp), its speed
  δv_k = (δρ_k − δρ_{k−1})/Δt and acceleration δa_k = (δv_k − δv_{k−1})/Δt; p50, p99 and the largest |.|;
* the tension it takes: the plan's tension T_d(k) (from the optimum's multipliers, T = 2Lλ/Δt) minus the
  plant's string tension over tick k's step, in closed loop; p99 and largest, over the motion after its first
  0.1 s and where the plan is within 0.5 N of its floor, and the largest dip in the first 0.1 s (the start);
* the drives' own lag: |ρ_true(k + d + 1) − u_closed(k)|, the drive's position when the command is due (d the
  command delay) against the command (and its speed and acceleration); 0 when the drives follow the (clamped)
  stream exactly;
* what the closed loop did against the hardware's limits (``LoopResult.record``,
  :mod:`marionette_control.sim.margins`): the worst executed margins of the commands and the plant's string (its lowest tension, time slack) during the
  motion.

What the spreads would ask (``spread_need``, the explanation in docs/margins.md, not the rule): a drive family's
margin = max over the drives of (p99 of the feedback's spread in that family + the drive's lag) / the drive's limit
(the range width for ``range``), over every motion and seed whose closed loop did not abort, rounded up to the next
percent; the tension reserve = the p99 of the closed loop's dip below the plan where the plan is near its floor,
rounded up to the next 0.05 N. ``--no-reserve`` optimizes without any reserve (the spread measured on the
trajectories the reserve was not yet sized for).

``--search`` is the rule (docs/margins.md, "The rule"; :func:`search`): the smallest reserve on the grid of
``ocp.problem.RESERVE_STEPS``, at least one step in every family, at which every motion of the library, optimized
with that reserve, tracks on the realistic profile on every seed, and the plant family's motions on its plants (``sim.profile.PLANT_FAMILY`` but
damping ×3, on ``PLANT_FAMILY_SEEDS``), closed loop and feed-forward only, passing the library's checks
(``sim.margins.tracking_failures``: no abort, the string at or above its minimum throughout, the closed loop no
worse than feed-forward only on any joint, the drives within their limits) with every optimization trackable and
converged or re-timed; found by coordinate descent from the configured reserve (or ``--start``). It prints each
trial, the result, the largest tension reserve the library's poses leave (:func:`rest_pose_cap`) and the table of
docs/margins.md.

``--retiming-curve`` also optimizes the wave drawn twice as fast at a series of uniform slow-downs and prints,
for each, the RMS error of the optimum over the motion and at the keyframes alone (docs/motions.md: why
trackability is judged on the former), the verdict and the constraints it rides.

Every run is seeded (the profiles' seeds), so the figures repeat exactly on any machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from marionette_control import _core  # noqa: E402
from marionette_control.model.library import marionette_arm as arm  # noqa: E402
from marionette_control.model.library.source import ModelSource  # noqa: E402
from marionette_control.model.limits import load_limits  # noqa: E402
from marionette_control.model.motion import load_motion  # noqa: E402
from marionette_control.ocp.problem import DEFAULT_MARGINS, DEFAULT_TENSION_RESERVE, MARGIN_FAMILIES, RESERVE_STEPS  # noqa: E402,E501
from marionette_control.ocp.spec import load_spec  # noqa: E402
from marionette_control.ocp.spec_problem import solve_spec  # noqa: E402
from marionette_control.ocp.tracking_problem import default_motion_directories, find_motion, motion_names  # noqa: E402,E501
from marionette_control.sim.margins import tracking_failures  # noqa: E402
from marionette_control.sim.offline_loop import run_loop  # noqa: E402
from marionette_control.sim.profile import PLANT_FAMILY, PLANT_FAMILY_MOTIONS, PLANT_FAMILY_SEEDS, HardwareProfile  # noqa: E402,E501
from marionette_control.tracking.controller_options import controller_options, core_values  # noqa: E402

SPEC = ROOT / "config" / "optimize" / "marionette_arm_wave.yaml"
#: the reserve's families, in the order the search lowers them: the drives' margins, then the tension reserve [N]
FAMILIES = MARGIN_FAMILIES + ("tension",)
#: the plant family's members the rule checks (sim/profile.py, PLANT_FAMILY): all but damping ×3, where the LQ law
#: alone's shoulder is worse than feed-forward only whatever the reserve (docs/tracking.md, "Plant family")
FAMILY_CHECKED = tuple(p for p in PLANT_FAMILY if p != "damping_x3")
#: the configured reserve (ocp/problem.py), where the search starts, and a reserve above it in every family (the
#: tension reserve within what the library's poses leave, :func:`rest_pose_cap`), where it starts too
CONFIGURED = dict(DEFAULT_MARGINS, tension=DEFAULT_TENSION_RESERVE)
ABOVE = {"range": 0.05, "speed": 0.30, "acceleration": 0.30, "tension": 0.15}
DRIVES = ("carriage", "string_length")
#: s: the start, whose dip the controller's smooth start removes (issue 24, point 4), reported apart
START = 0.1
#: N: "near the floor": where the plan's tension is within this of its floor
NEAR_FLOOR = 0.5


def reserve_overrides(reserve: dict) -> dict:
    """The spec overrides keeping ``reserve`` ({family of :data:`FAMILIES`: value})."""
    return {"constraints.margins": {f: reserve[f] for f in MARGIN_FAMILIES}, "constraints.tension_reserve":
            reserve["tension"]}


def optimize(name: str, reserve: dict, compare_start: bool = True) -> tuple:
    """(result, record row) of motion ``name`` through the spec tool's run with ``reserve``; re-timed uniformly when
    needed; ``compare_start``: also the optimum straight from the initial trajectory (``start_initial``)."""
    overrides = dict(reserve_overrides(reserve), **{"motion.name": name, "retime.mode": "uniform",
                                                    "retime.precision": 0.02})
    res = solve_spec(load_spec(SPEC, overrides))
    info = res.trajectory.info
    rows = info["constraints"]["margins"]

    def worst(family: str, key: str) -> dict:
        return {d: min(r[key] / abs(r["hardware_limit"] if family != "range" else 1.0) for r in rows
                       if r["family"] == family and r["component"] == d) for d in DRIVES}

    record = {"motion": name, "iterations": res.result.iterations, "iterations_total": info["summary"]
              ["iterations_total"], "elapsed": info["summary"]["elapsed"], "converged": bool(res.result.converged),
              "trackable": info["summary"]["trackable"], "retime_factor": (info.get("retiming") or {}).get("factor",
                                                                                                           1.0),
              "retime_trials": len((info.get("retiming") or {}).get("trials", [])),
              "rms_deg": {j: math.degrees(e["rms"]) for j, e in info["summary"]["tracking_errors"].items()},
              "tension_min_margin": min(r["margin"] for r in rows if r["family"] == "tension"),
              "tension_min_hardware_margin": min(r["hardware_margin"] for r in rows if r["family"] == "tension"),
              "range_margin_m": worst("range", "margin"),
              "speed_margin": worst("speed", "margin"), "acceleration_margin": worst("acceleration", "margin"),
              "speed_hardware_margin": worst("speed", "hardware_margin"),
              "acceleration_hardware_margin": worst("acceleration", "hardware_margin"),
              "active": [[label, steps] for label, steps in info["trackability"]["limiting"]]}
    if not compare_start:
        return res, record
    direct = solve_spec(load_spec(SPEC, dict(overrides, **{"optimizer.start": "initial", "retime.mode": "off"})))
    record["start_initial"] = {"converged": bool(direct.result.converged), "reason": direct.result.reason,
                               "iterations": direct.result.iterations, "cost": float(direct.result.cost),
                               "rms_deg": {j: math.degrees(e["rms"]) for j, e in
                                           direct.summary["tracking_errors"].items()}}
    if res.retiming is None or res.retiming.factor == 1.0:   # the same problem both ways: compare the optima
        record["start_initial"]["cost_ratio"] = float(direct.result.cost / res.result.cost)
    return res, record


def spread(trajectory, desc, profile: HardwareProfile, hardware) -> dict:
    """The feedback's spread on ``profile`` (module docstring): closed loop against feed-forward only."""
    model = desc.model
    dt, N = trajectory.dt, trajectory.N
    system = _core.DiscreteSystem(model, dt)
    lam = np.asarray(system.constraint_forces_trajectory(trajectory.X, trajectory.U))[:, 0]
    plan = 2.0 * trajectory.X[:-1, model.nd + 1] * lam / dt        # T = 2 L λ / Δt, L = the string length
    options = controller_options(core_values({"command_delay_steps": profile.command_delay_steps}), desc)
    closed = run_loop(trajectory, profile, options, desc)
    opened = run_loop(trajectory, profile, dataclasses.replace(options, feedback=False), desc)
    n = min(len(closed.k), len(opened.k), N)
    dr = closed.commands[:n] - opened.commands[:n]
    dv = np.diff(dr, axis=0) / dt
    da = np.diff(dv, axis=0) / dt
    d = profile.command_delay_steps
    lag = closed.X_true[d + 1:n, model.nd:model.nq] - closed.commands[:n - d - 1]
    ticks = closed.k[:n]
    dip = plan[ticks] - closed.tension[:n, 0]
    after = ticks * dt >= START
    floor = float(np.min(plan))
    near = after & (plan[ticks] <= floor + NEAR_FLOOR)

    def stats(x):
        a = np.abs(x)
        return {"p50": np.percentile(a, 50, axis=0).tolist(), "p99": np.percentile(a, 99, axis=0).tolist(),
                "max": a.max(axis=0).tolist()}

    executed, executed_open = closed.record(hardware), opened.record(hardware)
    commands = executed["margins"]["motion"]["commands"]
    return {"seed": profile.seed, "aborted": bool(closed.aborted), "open_aborted": bool(opened.aborted),
            "abort_reason": closed.abort_reason,
            "failures": tracking_failures(executed, executed_open, float(hardware.min_tension[0])), "executed": {
                "tension_min_n": executed["tension_min_n"]["motion"], "slack_s": executed["slack_s"]["motion"],
                "tension_min_start_n": executed["tension_min_start_n"], "guarded_ticks": executed["guarded_ticks"],
                "acceleration_deviation_rms": {d: c["acceleration_deviation_rms"]
                                               for d, c in executed["commands"].items()},
                "commands": {d: {f: commands[d][f]["margin"] for f in commands[d]} for d in commands},
                "open_tension_min_n": executed_open["tension_min_n"]["motion"]},
            "closed_rms_deg": {k: v["rms_deg"] for k, v in closed.summary().items()},
            "open_rms_deg": {k: v["rms_deg"] for k, v in opened.summary().items()},
            "position": stats(dr), "speed": stats(dv), "acceleration": stats(da),
            "lag": {"position": np.abs(lag).max(axis=0).tolist(),
                    "speed": np.abs(np.diff(lag, axis=0) / dt).max(axis=0).tolist(),
                    "acceleration": np.abs(np.diff(lag, 2, axis=0) / dt ** 2).max(axis=0).tolist()},
            "tension_dip": {"p99": float(np.percentile(dip[after], 99)), "max": float(dip[after].max()),
                            "near_floor_p99": float(np.percentile(dip[near], 99)) if near.any() else 0.0,
                            "near_floor_max": float(dip[near].max()) if near.any() else 0.0,
                            "start_max": float(dip[~after].max()) if (~after).any() else 0.0},
            "tension_min": float(closed.tension[:n, 0].min()),
            "tension_min_after_start": float(closed.tension[:n, 0][after].min()),
            "plan_tension_min": floor}


def spread_need(runs: list, limits) -> dict:
    """The reserve the measured spreads would call for (module docstring; the explanation of what each family
    needs, not the rule), with the figures it rests on: over the runs that did not abort (an aborted loop's
    commands say what went wrong, not what tracking needs)."""
    runs = [r for r in runs if not r["aborted"]]
    width = limits.upper - limits.lower
    scale = {"range": width, "speed": limits.max_velocity, "acceleration": limits.max_acceleration}
    key = {"range": "position", "speed": "speed", "acceleration": "acceleration"}
    out = {}
    for family in ("range", "speed", "acceleration"):
        p99 = np.max([r[key[family]]["p99"] for r in runs], axis=0)
        lag_f = np.max([r["lag"][key[family]] for r in runs], axis=0)
        need = (p99 + lag_f) / scale[family]
        out[family] = {"p99": p99.tolist(), "lag": lag_f.tolist(), "fraction": need.tolist(),
                       "margin": math.ceil(100 * float(need.max()) - 1e-9) / 100}
    near = max(r["tension_dip"]["near_floor_p99"] for r in runs)
    out["tension"] = {"near_floor_p99": near, "reserve": math.ceil(max(near, 0.0) / 0.05 - 1e-9) * 0.05}
    return out


def retiming_curve(factors=(1.0, 1.05, 1.075, 1.1, 1.15, 1.2, 1.3, 1.5, 2.0)) -> list:
    """The wave drawn twice as fast, slowed uniformly by each of ``factors``: {factor, rms_deg, keyframe_rms_deg,
    trackable, limiting} per factor (module docstring)."""
    wave = yaml.safe_load((ROOT / "config" / "motions" / "wave.yaml").read_text())
    keys = np.array([k[0] for k in wave["keyframes"]]) / 2.0
    values = np.radians([k[1:] for k in wave["keyframes"]])
    rows = []
    for factor in factors:
        motion = {"joints": wave["joints"], "angle_unit": "deg", "interpolation": "clamped",
                  "keyframes": [[t * factor / 2.0] + v for t, *v in wave["keyframes"]]}
        res = solve_spec(load_spec(SPEC, {"motion": motion}))
        tr, p = res.trajectory, res.problem
        t = tr.t - tr.t[0]
        at_keys = np.column_stack([np.interp(keys * factor, t, tr.X[:, j]) for j in range(2)])
        verdict = tr.info["trackability"]
        rows.append({"factor": factor, "rms_deg": [math.degrees(v) for v in verdict["rms"].values()],
                     "keyframe_rms_deg": np.degrees(np.sqrt(np.mean((at_keys - values) ** 2, axis=0))).tolist(),
                     "trackable": verdict["trackable"], "limiting": [label for label, _ in verdict["limiting"]],
                     "steps": p.N})
        print(f"  x{factor:.3f}: RMS {rows[-1]['rms_deg'][0]:.3f}/{rows[-1]['rms_deg'][1]:.3f} deg, at the keys "
              f"{rows[-1]['keyframe_rms_deg'][0]:.3f}/{rows[-1]['keyframe_rms_deg'][1]:.3f} deg, "
              f"{'trackable' if verdict['trackable'] else 'not trackable'}; {', '.join(rows[-1]['limiting'][:4])}")
    return rows


def markdown(report: dict) -> str:
    """The per-motion table of docs/motions.md."""
    lines = ["| motion | iterations (with stages) | time [s] | re-timing factor | RMS shoulder / elbow [°] | "
             "worst margin to the reserved limit: carriage speed, acc., string speed, acc. (fraction of the hardware "
             "limit) | tension margin [N] (to the hardware's 0.5 N) | closed / feed-forward-only RMS [°], worst seed | "
             "plant's lowest tension [N] (first 0.1 s), guard ticks, worst seed | from the hanging start |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, m in report["motions"].items():
        o = m["optimization"]
        margins = ", ".join(f"{o[k][d]:.2f}" for d in DRIVES for k in ("speed_margin", "acceleration_margin"))
        runs = m["closed_loop"]
        if any(c["aborted"] or c["open_aborted"] for c in runs):
            closed = "abort: " + ", ".join(str(c["seed"]) for c in runs if c["aborted"] or c["open_aborted"])
        else:
            worst = lambda key: [max(c[key][j] for c in runs) for j in runs[0][key]]  # noqa: E731
            closed = " / ".join(f"{v:.2f}" for v in worst("closed_rms_deg")) + " (" + \
                " / ".join(f"{v:.2f}" for v in worst("open_rms_deg")) + ")"
        e = [c["executed"] for c in runs]
        string = (f"{min(x['tension_min_n'] for x in e):.3f} ({min(x['tension_min_start_n'] for x in e):.3f}), "
                  f"{max(x['guarded_ticks'] for x in e)}")
        s = o["start_initial"]
        start = (f"{s['reason']}, cost ×{s['cost_ratio']:.4f}" if "cost_ratio" in s else s["reason"]) + \
            f", RMS {' / '.join(f'{v:.2f}' for v in s['rms_deg'].values())}"
        lines.append(f"| {name} | {o['iterations']} ({o['iterations_total']}) | {o['elapsed']:.1f} | "
                     f"{o['retime_factor']:.3f} | {' / '.join(f'{v:.3f}' for v in o['rms_deg'].values())} | "
                     f"{margins} | "
                     f"{o['tension_min_margin']:.3f} ({o['tension_min_hardware_margin']:.3f}) | {closed} | {string} | {start} |")
    return "\n".join(lines)


def run_library(names: list, seeds: list, reserve: dict, desc, hardware, compare_start: bool = True,
                echo: bool = True) -> tuple:
    """({motion: {optimization, closed_loop: [spread per seed]}}, {motion: Trajectory}) of the library motions
    ``names`` optimized with ``reserve`` and tracked on the realistic profile with ``seeds``; ``echo``: print a line
    per motion and seed."""
    motions, trajectories = {}, {}
    for name in names:
        res, record = optimize(name, reserve, compare_start)
        measured = [spread(res.trajectory, desc, HardwareProfile.named("realistic", seed=seed), hardware)
                    for seed in seeds]
        motions[name], trajectories[name] = {"optimization": record, "closed_loop": measured}, res.trajectory
        if not echo:
            continue
        print(f"{name:13s} {record['iterations']:3d} it ({record['iterations_total']} with stages) "
              f"{record['elapsed']:5.1f} s  factor {record['retime_factor']:.3f}  RMS "
              + "/".join(f"{v:.3f}" for v in record["rms_deg"].values())
              + f"  tension margin {record['tension_min_margin']:.3f} N")
        for m in measured:
            print(f"   seed {m['seed']}: abort {m['aborted']}/{m['open_aborted']}  closed "
                  + "/".join(f"{v:.3f}" for v in m["closed_rms_deg"].values()) + "  open "
                  + "/".join(f"{v:.3f}" for v in m["open_rms_deg"].values())
                  + f"  dρ p99 {np.round(m['position']['p99'], 4)}  dv p99 {np.round(m['speed']['p99'], 3)}"
                  f"  da p99 {np.round(m['acceleration']['p99'], 2)}  dip p99 {m['tension_dip']['p99']:.3f}"
                  f" (near floor {m['tension_dip']['near_floor_p99']:.3f}, start {m['tension_dip']['start_max']:.3f})"
                  f"  T min {m['executed']['tension_min_n']:.3f} (open {m['executed']['open_tension_min_n']:.3f})"
                  f" (first 0.1 s {m['executed']['tension_min_start_n']:.3f}) slack {m['executed']['slack_s']:.2f} s"
                  f"  guard {m['executed']['guarded_ticks']}  lag {np.round(m['lag']['position'], 6)} m")
    return motions, trajectories


def optimization_failures(record: dict) -> list:
    """What an optimization fails of the rule's checks: the result trackable (ocp/trackability.py), and converged
    or re-timed (a motion drawn too fast for the reserved limits is slowed down, docs/motions.md)."""
    out = [] if record["trackable"] else ["not trackable"]
    if not (record["converged"] or record["retime_factor"] > 1.0):
        out.append("not converged")
    return out


def evaluate(reserve: dict, names: list, seeds: list, desc, hardware) -> dict:
    """The rule's checks of ``reserve``: the library ``names`` on the realistic profile with ``seeds``, and the
    plant family (:data:`FAMILY_CHECKED` on its motions and seeds); {reserve, failing: {"motion [plant] seed k":
    [reasons]}, runs, family_runs, tension_min (the plant's lowest over every closed loop of the library),
    family_tension_min (of the family), rms_ratio (the largest closed-loop RMS over feed-forward only's, over joints,
    motions and seeds of the library and the family), retime_factor {motion: factor}}; a motion whose optimization
    fails fails on every run."""
    motions, trajectories = run_library(names, seeds, reserve, desc, hardware, compare_start=False, echo=False)
    runs = {f"{name} seed {run['seed']}": (optimization_failures(m["optimization"]), run)
            for name, m in motions.items() for run in m["closed_loop"]}
    family = {}
    for name in PLANT_FAMILY_MOTIONS:
        if name not in trajectories:
            res, record = optimize(name, reserve, compare_start=False)
            trajectories[name], motions[name] = res.trajectory, {"optimization": record}
        bad = optimization_failures(motions[name]["optimization"])
        for plant in FAMILY_CHECKED:
            for seed in PLANT_FAMILY_SEEDS.get(plant, (0,)):
                profile = HardwareProfile.named("realistic", seed=seed, **PLANT_FAMILY[plant])
                family[f"{name} {plant} seed {seed}"] = (bad, spread(trajectories[name], desc, profile, hardware))
    every = dict(runs, **family)
    failing = {k: bad + run["failures"] for k, (bad, run) in every.items() if bad + run["failures"]}
    return {"reserve": dict(reserve), "failing": failing, "runs": len(runs), "family_runs": len(family),
            "tension_min": min(r["executed"]["tension_min_n"] for _, r in runs.values()),
            "family_tension_min": min(r["executed"]["tension_min_n"] for _, r in family.values()),
            "rms_ratio": max(r["closed_rms_deg"][j] / r["open_rms_deg"][j] for _, r in every.values()
                             for j in r["closed_rms_deg"]),
            "retime_factor": {n: m["optimization"]["retime_factor"] for n, m in motions.items()}}


def key(reserve: dict) -> tuple:
    """A reserve as a hashable point of the grid."""
    return tuple(round(reserve[f], 10) for f in FAMILIES)


def descend(start: dict, tried: dict, names: list, seeds: list, desc, hardware) -> dict:
    """Coordinate descent on the grid of ``RESERVE_STEPS`` from ``start`` (which must pass): each family of
    :data:`FAMILIES` in turn lowered one step at a time, the others held, while every run passes
    (:func:`evaluate`), never below its first step (the rule keeps a reserve in every family: issue 24 asks the
    default problem for margins on the drives' limits and a tension floor above the minimum); the last passing point
    kept; sweeps repeated until no family can be lowered one step. The result passes and each family above its first
    step fails one step below it. ``tried``: {key: evaluate(...)}, shared between starts.
    {start, result, cost (:func:`cost`), trials: [evaluate(...) with ``lowered``: the family, None at the start]}."""
    point, trials = {f: start[f] for f in FAMILIES}, []

    def check(reserve: dict, family) -> dict:
        if key(reserve) not in tried:
            tried[key(reserve)] = evaluate(reserve, names, seeds, desc, hardware)
        trials.append(dict(tried[key(reserve)], lowered=family))
        progress(trials[-1])
        return trials[-1]

    if check(point, None)["failing"]:
        raise SystemExit(f"the starting reserve {point} fails: start higher")
    lowered = True
    while lowered:
        lowered = False
        for family in FAMILIES:
            while point[family] > RESERVE_STEPS[family] + 1e-12:
                trial = dict(point, **{family: round(point[family] - RESERVE_STEPS[family], 10)})
                if check(trial, family)["failing"]:
                    break
                point, lowered = trial, True
    return {"start": dict(start), "result": point, "cost": list(cost(tried[key(point)])), "trials": trials}


def cost(trial: dict) -> tuple:
    """What a passing reserve costs the library (the rule's choice between the descents' results): the largest
    re-timing factor (how much slower than drawn the reserve makes a motion), then the reserve's grid steps."""
    return (max(trial["retime_factor"].values()), sum(trial["reserve"][f] / RESERVE_STEPS[f] for f in FAMILIES))


def search(starts: list, names: list, seeds: list, desc, hardware) -> dict:
    """The rule (docs/margins.md, "The rule"): :func:`descend` from each of ``starts``; of their results (each
    passing, each family one step below failing) the one of least :func:`cost`. {result, cost, descents}."""
    tried = {}
    descents = [descend(start, tried, names, seeds, desc, hardware) for start in starts]
    best = min(descents, key=lambda d: d["cost"])
    return {"result": best["result"], "cost": best["cost"], "descents": descents}


def progress(trial: dict) -> None:
    """One line of the search's progress."""
    r = trial["reserve"]
    print(f"  {', '.join(f'{r[f]:g}' for f in FAMILIES)} ({trial.get('lowered') or 'start'}): "
          f"{len(trial['failing'])} of {trial['runs']} + {trial['family_runs']} failing, lowest tension "
          f"{trial['tension_min']:.3f} N (the family {trial['family_tension_min']:.3f} N), "
          f"closed/open RMS at most {trial['rms_ratio']:.3f}"
          + "".join(f"; {k}: {', '.join(v)}" for k, v in list(trial["failing"].items())[:3]), flush=True)


def search_table(descent: dict) -> str:
    """A descent's table of docs/margins.md."""
    lines = ["| range, speed, acceleration; tension [N] | lowered | failing runs of the library + the family | "
             "lowest tension, the library (the family) [N] | "
             "closed / feed-forward-only RMS, largest | the swings' re-timing | what fails |",
             "|---|---|---|---|---|---|---|"]
    for t in descent["trials"]:
        r = t["reserve"]
        groups = {}
        for run, reasons in t["failing"].items():
            where, seed = run.rsplit(" seed ", 1)
            groups.setdefault(where, []).append((seed, reasons))
        fails = "; ".join(f"{where} seed{'s' if len(g) > 1 else ''} {', '.join(s for s, _ in g)} ("
                          + (f"seed {g[0][0]}: " if len(g) > 1 else "") + f"{', '.join(g[0][1])})"
                          for where, g in groups.items())
        lines.append(f"| {', '.join(f'{r[f]:g}' for f in MARGIN_FAMILIES)}; {r['tension']:g} | "
                     f"{t['lowered'] or '(start)'} | {len(t['failing'])} of {t['runs']} + {t['family_runs']} | "
                     f"{t['tension_min']:.3f} ({t['family_tension_min']:.3f}) | "
                     f"{t['rms_ratio']:.3f} | "
                     f"{t['retime_factor'].get('elbow_swings', 1.0):.3f} | {fails or '—'} |")
    return "\n".join(lines)


def rest_pose_cap(names: list, model, hardware) -> dict:
    """The largest tension reserve the library's poses leave (docs/margins.md): every pose of every motion, sampled
    every 20 ms, held as a static equilibrium (``static_equilibrium``); the reserve must stay at or below the
    lowest tension held minus the string's minimum, or the pose is outside the optimizer's floor.
    {cap_n, lowest_n, motion, time_s}."""
    lowest = (math.inf, None, None)
    for name in names:
        t, angles = load_motion(find_motion(name, default_motion_directories())).sample(0.02)
        for time, (s, e) in zip(t, angles):
            held = arm.static_equilibrium(model, s, e).tension
            lowest = min(lowest, (held, name, float(time)), key=lambda x: x[0])
    return {"cap_n": lowest[0] - float(hardware.min_tension[0]), "lowest_n": lowest[0], "motion": lowest[1],
            "time_s": lowest[2]}


def start_values(text: str) -> list:
    """The four values of ``--start`` (range, speed, acceleration, tension), each on the grid."""
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        values = []
    if len(values) != len(FAMILIES) or any(v < 0 or abs(v / RESERVE_STEPS[f] - round(v / RESERVE_STEPS[f])) > 1e-9
                                           for f, v in zip(FAMILIES, values)):
        raise SystemExit(f"--start: expected four numbers 'range,speed,acceleration,tension', each a non-negative "
                         f"multiple of its grid step {RESERVE_STEPS}, got {text!r}")
    return values


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "out" / "reproductions" / "margins.json"))
    ap.add_argument("--motions", help="comma-separated library names (default: all)")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--no-reserve", action="store_true", help="optimize without the reserve")
    ap.add_argument("--search", action="store_true", help="the rule: the smallest reserve on the grid that passes")
    ap.add_argument("--start", help="with --search: where it starts, 'range,speed,acceleration,tension', several "
                    "separated by ';' (default: the configured reserve and ABOVE)")
    ap.add_argument("--retiming-curve", action="store_true", help="also the wave at twice its speed, slowed down")
    args = ap.parse_args(argv)
    names = args.motions.split(",") if args.motions else motion_names(default_motion_directories())
    seeds = [int(s) for s in args.seeds.split(",")]
    desc = arm.load_description()
    hardware = load_limits(ModelSource.registered("marionette_arm"))
    if args.search:
        starts = [dict(zip(FAMILIES, start_values(t))) for t in args.start.split(";")] if args.start else \
            [CONFIGURED, ABOVE]
        found = search(starts, names, seeds, desc, hardware)
        found["rest_pose_cap"] = rest_pose_cap(names, arm.marionette_arm(), hardware)
        for d in found["descents"]:
            print(f"from {d['start']}: {d['result']}, cost {d['cost']}")
            print(search_table(d))
        print(f"the rule's reserve: {found['result']}, cost {found['cost']} (configured: {CONFIGURED}); the library's "
              f"poses allow a tension reserve of at most {found['rest_pose_cap']['cap_n']:.3f} N "
              f"({found['rest_pose_cap']})")
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(found, indent=1))
        return 0
    reserve = {f: 0.0 for f in FAMILIES} if args.no_reserve else CONFIGURED
    report = {"reserve": reserve, "motions": run_library(names, seeds, reserve, desc, hardware)[0], "seeds": seeds}
    runs = [r for m in report["motions"].values() for r in m["closed_loop"]]
    report["spread_need"] = spread_need(runs, hardware)
    print(json.dumps(report["spread_need"], indent=1))
    print(markdown(report))
    if args.retiming_curve:
        print("the wave drawn twice as fast, slowed uniformly:")
        report["retiming_curve"] = retiming_curve()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
