"""``report.json`` and ``report.md`` of the main job: the record as JSON, and the same for reading."""

from __future__ import annotations

import json
from pathlib import Path


def _deg(v) -> str:
    return "—" if v is None else f"{v:.3f}°"


def _margin(m: dict) -> str:
    if not m:
        return "—"
    flag = "" if m["satisfied"] else " **VIOLATED**"
    return f"{m['margin']:.4g} {m['unit']} at {m['time_s']:.2f} s{flag}"


def _stats(s: dict, digits: int = 1) -> str:
    if not s.get("count"):
        return "—"
    return f"median {s['median']:.{digits}f}, p99 {s['p99']:.{digits}f}, max {s['max']:.{digits}f} {s['unit']} " \
           f"({s['count']})"


def _tracking_table(title: str, runs: dict, key: str) -> list[str]:
    names = list(next(iter(runs.values()))[key])
    lines = [f"### {title}", "", "| run | " + " | ".join(f"{n} RMS | {n} max" for n in names) + " |",
             "|---|" + "---|---|" * len(names)]
    for run, r in runs.items():
        lines.append(f"| {run} | " + " | ".join(f"{_deg(r[key][n]['rms_deg'])} | {_deg(r[key][n]['max_deg'])}"
                                               for n in names) + " |")
    return lines + [""]


def markdown(report: dict) -> str:
    hw = report.get("simulated_hardware", {})
    lines = [f"# Marionette arm: {report.get('motion', 'motion')} on the simulated arm", "",
             f"Run started {report['started']}. Simulated hardware: profile **{hw.get('name')}** (plant "
             f"`{hw.get('plant_model_file') or 'the nominal model'}`, command delay {hw.get('command_delay_steps')} "
             f"step(s), drives {hw.get('drive_mode')}, encoder noise {hw.get('noise_std')}, counts "
             f"{hw.get('encoder_resolution')}). Errors are the simulator's true angles (`~/true_joint_states`) "
             "against the optimized trajectory at every tick, never the controller's estimate.", ""]
    o = report.get("optimization", {})
    lines += ["## Optimization", "", f"- {o.get('iterations')} iterations, converged: {o.get('converged')} "
              f"({o.get('reason')}), cost {o.get('cost', float('nan')):.6g}, {o.get('elapsed_s', 0):.2f} s; "
              f"constraints {'all satisfied' if o.get('constraints_satisfied') else 'NOT all satisfied'}", ""]
    runs = report.get("runs", {})
    if runs:
        lines += ["## Tracking", ""]
        lines += _tracking_table("True angles against the optimized trajectory", runs, "vs_optimized")
        lines += _tracking_table("True angles against the animator's motion", runs, "vs_desired")
        t = report.get("targets", {})
        if t:
            met = t["met"]
            ratio = t["open_to_closed_rms_ratio"]
            lines += ["### Targets (issue 12, realistic stand-in)", "",
                      "| target | measured | met |", "|---|---|---|",
                      f"| closed-loop RMS ≤ {t['closed_loop_rms_deg_at_most']}° on every joint | "
                      + ", ".join(f"{n} {_deg(v['rms_deg'])}" for n, v in report['tracking']['closed_loop'].items())
                      + f" | {'yes' if met['rms'] else 'NO'} |",
                      f"| closed-loop max ≤ {t['closed_loop_max_deg_at_most']}° | "
                      + ", ".join(f"{n} {_deg(v['max_deg'])}" for n, v in report['tracking']['closed_loop'].items())
                      + f" | {'yes' if met['max'] else 'NO'} |",
                      f"| open/closed-loop RMS ≥ {t['open_to_closed_rms_ratio_at_least']}× on the joint where open "
                      f"loop errs most ({t['worst_open_loop_joint']}) | "
                      + ("—" if ratio is None else f"{ratio:.2f}×") + f" | {'yes' if met['ratio'] else 'NO'} |",
                      "| feedback not worse than none on any joint (closed ≤ open RMS) | "
                      + ", ".join(f"{n} {_deg(report['tracking']['closed_loop'][n]['rms_deg'])} vs "
                                  f"{_deg(report['tracking']['open_loop'][n]['rms_deg'])}"
                                  for n in report['tracking']['closed_loop'])
                      + f" | {'yes' if met['feedback_not_worse'] else 'NO'} |", ""]
        lines += ["### Runs", "", "Lock-step: the simulator waits before each step for the command answering its last "
                  "joint state; a time-out (it stepped without it) means that command acted a step late — jitter of "
                  "the machine, which the simulated hardware does not have.", "",
                  "| run | controller | ticks (with true state) | ticks with faults | faults raised | lock-step waits "
                  "/ time-outs | aborted |", "|---|---|---|---|---|---|---|"]
        for name, r in runs.items():
            faults = ", ".join(f"{k} {v}" for k, v in r["faults"].items()) or "none"
            ls = r["lockstep"]
            lines.append(f"| {name} | {r['controller']} (feedback {'on' if r['feedback'] else 'off'}) | {r['ticks']} "
                         f"({r['ticks_with_true_state']}) | {r['ticks_with_faults']} | {faults} | {ls.get('waits')} / "
                         f"{ls.get('timeouts')} | {r['aborted']} |")
        lines.append("")
    if "push_recovery" in report:
        p, rec = report["push"], report["push_recovery"]
        lines += ["## After a push", "", f"{p['profile']} push of peak {p['force']} N (world x, y, z) for "
                  f"{p['duration']:g} s on `{p['body']}` at {p['time_s']:g} s into the motion (total impulse "
                  f"{[round(v, 4) for v in p['total_impulse']]} N s). Time from the push until the arm stays within "
                  "1° of the motion to its end (null: never):", ""]
        lines += [f"- {k}: " + ("never" if v is None else f"{v:.2f} s") for k, v in rec.items()]
        lines.append("")
    if "mpc" in report:
        m = report["mpc"]
        ms = m["update_ms"]
        tc = m.get("tick_compute_p99_us", {})
        lines += ["## Receding-horizon re-planning", "", f"- method: {m.get('method', 'receding_horizon')}; the "
                  f"controller's tick compute p99: {tc.get('replanned')} µs (LQR-only run: {tc.get('lqr_only')} µs)",
                  f"- updates: {m['updates']} (outcomes: "
                  + ", ".join(f"{k} {v}" for k, v in m["outcomes"].items()) + "), wall time per update: median "
                  f"{ms['median']} ms, p99 {ms['p99']} ms, max {ms['max']} ms"
                  + ("; preparations: median {median} ms, p99 {p99} ms, max {max} ms".format(**m["prepare_ms"])
                     if m.get("prepare_ms", {}).get("p99") is not None else ""),
                  f"- plans published {m['published']}, switched to {m['switched']}, rejected {m['rejected']}"
                  + (" (" + ", ".join(f"{k} {v}" for k, v in m["rejected_by_reason"].items()) + ")"
                     if m["rejected_by_reason"] else ""), ""]
    cm = report.get("constraint_margins", {})
    if cm:
        lines += ["## Constraint margins", "", "Optimized trajectory (the optimizer's report):", "",
                  "| constraint | worst margin | at | active steps |", "|---|---|---|---|"]
        lines += [f"| {c['label']} | {c['worst_margin']:.4g} {c['unit']} | {c['time_s']:.2f} s | {c['active_steps']}"
                  f"{'' if c['satisfied'] else ' (VIOLATED)'} |" for c in cm.get("optimized", [])]
        lines += ["", "Executed, during the motion and while its final state is held after it (worst margin = limit "
                  "− |value|, or tension − minimum; negative: beyond the limit). Commands: the setpoints the "
                  "controller sent; drives: the plant's true drive motion; tension: the plant's string:", "",
                  "| run | part | what | range | speed | acceleration |", "|---|---|---|---|---|---|"]
        for run, parts in cm.get("executed", {}).items():
            for part, m in parts.items():
                for what in ("commands", "drives"):
                    for drive, d in m[what].items():
                        lines.append(f"| {run} | {part} | {what}: {drive} | {_margin(d.get('range'))} | "
                                     f"{_margin(d.get('speed'))} | {_margin(d.get('acceleration'))} |")
                for s, d in m["string_tension"].items():
                    lines.append(f"| {run} | {part} | tension: {s} (≥ {d['minimum_N']:g} N; lowest "
                                 f"{d['lowest_N']:.3g} N) | {_margin(d)} | | |")
        lines.append("")
    if "calibration" in report:
        lines += calibration_section(report["calibration"])
    c = report.get("controller", {})
    if c:
        lines += ["## Controller (closed loop)", "", f"- per-tick compute: {_stats(c['tick_compute'])}",
                  f"- /joint_states → command latency (arrival times in this client): "
                  f"{_stats(c['joint_state_to_command_latency'], 2)}", ""]
    sim = report.get("simulator")
    if sim:
        lines += ["## Simulator", "", ", ".join(f"{k}: {v}" for k, v in sim.items()), ""]
    lines += ["## Files", ""] + [f"- {k}: `{v}`" for k, v in report.get("files", {}).items()]
    if "bag_summary" in report:
        lines += ["", "## Recorded bag", "", "```", report["bag_summary"], "```"]
    return "\n".join(lines) + "\n"


def _value(v) -> str:
    return "—" if v is None else f"{v:.5g}"


def calibration_section(c: dict) -> list[str]:
    """``report.md``'s calibration: the parameters against the plant's, the motion's errors before and after."""
    ident = c["identification"]
    fit = c["fit"]
    lines = ["## Calibration", "",
             f"The identification motion (`config/motions/identify.yaml`, {ident['ticks']} ticks tracked closed loop: "
             + ", ".join(f"{j} RMS {_deg(v['rms_deg'])}" for j, v in ident["tracking"].items())
             + f") recorded into `{c['bag']}`; the nominal model calibrated from it ({fit['nodes']} nodes, χ²/dof "
             f"{fit['chi2_per_dof']:.3g}, {sum(fit['timing_s'].values()):.0f} s) and written to `{c['model_file']}`; "
             "the motion re-optimized (gains included) and tracked on it. Weighed masses: "
             + ", ".join(f"{n} {w['reading']:.4f} ± {w['std']:g} kg" for n, w in c["weighed"].items())
             + f" ({c['weighed_note']}).", "",
             "| parameter | nominal | estimate | std | truth (plant) | identifiable |", "|---|---|---|---|---|---|"]
    for name, p in c["parameters"].items():
        state = "known" if p["known"] else ("yes" if p["identifiable"] else "no")
        lines.append(f"| {name} [{p['unit']}] | {_value(p['nominal'])} | {_value(p['estimate'])} | {_value(p['std'])} | "
                     f"{_value(p['truth'])} | {state} |")
    if fit.get("scale_note"):
        lines += ["", f"Note: {fit['scale_note']}."]
    t = c["tracking"]
    joints = list(t["calibrated"]["closed_loop"])
    lines += ["", "True angles against the optimized trajectory of each model (RMS):", "",
              "| run | " + " | ".join(f"{j} nominal | {j} calibrated | {j} ratio" for j in joints) + " |",
              "|---|" + "---|---|---|" * len(joints)]
    for run in ("closed_loop", "open_loop"):
        lines.append(f"| {run} | " + " | ".join(
            f"{_deg(t['nominal'][run][j]['rms_deg'])} | {_deg(t['calibrated'][run][j]['rms_deg'])} | "
            + ("—" if t["rms_ratio"][run][j] is None else f"{t['rms_ratio'][run][j]:.2f}×") for j in joints) + " |")
    if "push_recovery" in c:
        lines += ["", "After the same push on the calibrated model (the planner on it too): time until the arm stays "
                  "within 1° of the motion, and the string's lowest tension during the motion:", ""]
        for k, v in c["push_recovery"].items():
            tension = c["push_string_tension"][f"push_{k[:-len('_s')]}"]
            lines.append(f"- {k}: " + ("never" if v is None else f"{v:.2f} s") + "; " + ", ".join(
                f"{name} {t['lowest_N']:.3f} N (minimum {t['minimum_N']:g} N)" for name, t in tension.items()))
    return lines + [""]


def write_report(report: dict, out: Path) -> None:
    (out / "report.json").write_text(json.dumps(report, indent=2))
    (out / "report.md").write_text(markdown(report))
