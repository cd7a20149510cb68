"""Runs the benchmarks: ``python -m benchmarks.run [--quick] [--out FILE] [--no-peer] [--only NAME...]``.

Runs every registered group (benchmarks/registry.py; ``--only`` selects some),
measures the peers they ask for in the same run (installing a peer's venv on
first use; ``--no-peer`` skips them), and prints one JSON document on stdout,
also written to ``--out FILE`` or ``out/benchmarks/<UTC timestamp>.json``:

    {"machine": {cpu, cores, load average before/after, python, numpy, git commit, date, ...},
     "figures": [{"name", "value", "unit", "group", "peer": null | "trep", "notes"}, ...],
     "ratios":  [{"name", "peer", "peer_figure", "unit", "ours", "peer_value",
                  "ours_over_peer", "peer_over_ours"}, ...],
     "peers":   {"trep": {"status", "versions", ...}}, "groups": [...], "options": {...}}

Times are medians (time.perf_counter) after warm-up. The figures are for
comparing runs and ours against the peers measured at the same moment on the
same machine; they are not tests and nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

from benchmarks import registry
from benchmarks.peers import PEERS, PeerError, run_peer

ROOT = Path(__file__).resolve().parent.parent


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def _cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git(*args: str) -> str | None:
    try:
        r = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=20)
        return r.stdout.strip() if r.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def machine_info() -> dict:
    import numpy

    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "cores_usable": usable,
        "platform": platform.platform(),
        "hostname": platform.node(),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": bool(status) if status is not None else None,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "loadavg_before": list(os.getloadavg()),
        # OpenBLAS's threads (numpy's and scipy's libraries each) idle-spin after a threaded call: on the
        # 2-core machines they take a core from the work (docs/benchmarks.md, issue 28).
        "openblas_num_threads_env": os.environ.get("OPENBLAS_NUM_THREADS"),
    }


def ratios(figures: list[dict]) -> list[dict]:
    """Ours / peer for every peer figure whose base name (before '@') is one of our figures in its group."""
    ours = {(f["group"], f["name"]): f for f in figures if f["peer"] is None}
    out = []
    for f in figures:
        if f["peer"] is None:
            continue
        o = ours.get((f["group"], f["name"].split("@")[0]))
        if o is None or o["unit"] != f["unit"] or not f["value"] or not o["value"]:
            continue
        out.append({"name": o["name"], "peer": f["peer"], "peer_figure": f["name"], "unit": o["unit"],
                    "ours": o["value"], "peer_value": f["value"],
                    "ours_over_peer": o["value"] / f["value"], "peer_over_ours": f["value"] / o["value"]})
    return out


def main(argv: list[str] | None = None) -> int:
    all_groups = registry.groups()
    ap = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer steps and repetitions (a smoke run)")
    ap.add_argument("--out", type=Path, help="JSON file to write (default out/benchmarks/<UTC timestamp>.json)")
    ap.add_argument("--no-peer", action="store_true", help="do not install or run the peers")
    ap.add_argument("--only", nargs="+", metavar="NAME", help=f"groups to run (of: {', '.join(all_groups)})")
    a = ap.parse_args(argv)
    names = a.only or list(all_groups)
    unknown = [n for n in names if n not in all_groups]
    if unknown:
        ap.error(f"unknown group(s) {', '.join(unknown)}; available: {', '.join(all_groups)}")

    machine = machine_info()
    log(f"{machine['cpu']}, {machine['cores']} cores, load average {machine['loadavg_before']}")
    peer_results: dict[str, dict] = {}
    peer_status: dict[str, dict] = {n: {"status": "not requested"} for n in PEERS}
    if a.no_peer:
        peer_status = {n: {"status": "skipped (--no-peer)"} for n in PEERS}

    def peer_runner(name: str) -> dict | None:
        if name not in peer_results:
            try:
                res = run_peer(name, a.quick, log)
                peer_results[name] = res
                peer_status[name] = {"status": "ok", "description": PEERS[name].description,
                                     **{k: v for k, v in res.items() if k != "figures"}}
            except PeerError as e:
                log(f"peer {name}: {e}; continuing without it")
                peer_results[name] = None
                peer_status[name] = {"status": f"failed: {e}"}
        return peer_results[name]

    ctx = registry.Context(quick=a.quick, use_peers=not a.no_peer, peer_runner=peer_runner, log=log)
    figures: list[dict] = []
    for name in names:
        log(f"group {name}: {all_groups[name].description}")
        for f in all_groups[name].fn(ctx):
            f.group = f.group or name
            figures.append(f.as_dict())
    machine["loadavg_after"] = list(os.getloadavg())
    doc = {"machine": machine, "figures": figures, "ratios": ratios(figures), "peers": peer_status,
           "groups": names, "options": {"quick": a.quick, "no_peer": a.no_peer}}
    text = json.dumps(doc, indent=1)
    print(text)
    out = a.out or ROOT / "out" / "benchmarks" / (_dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
                                                  + ".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n")
    log(f"wrote {out}")
    for r in doc["ratios"]:
        log(f"{r['peer_figure']:<58} ours {r['ours']:10.4g} {r['unit']:<10} {r['peer']} {r['peer_value']:10.4g}"
            f"  ({r['peer_over_ours']:.1f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
