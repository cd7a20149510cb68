"""marionette-simulate: run a trajectory file open- and closed-loop from a perturbed initial state.

    marionette-simulate TRAJ.npz [--perturb NAME=VALUE ...] [--perturb-random SCALE] [--seed N]
                        [--model NAME | --model-file PATH] [-o SIM.npz] [--summary-json PATH]
    python -m marionette_control.cli.simulate ...     (same)

The initial state is the trajectory's x(0) plus the perturbation: ``--perturb`` adds VALUE to the
state component NAME (a configuration such as ``theta``, a momentum ``p_theta`` or a kinematic
velocity ``v_carriage``); ``--perturb-random SCALE`` adds normal noise of standard deviation SCALE
to every dynamic configuration. For a model with constraints (strings) the kinematic
configurations are then adjusted so that h(q(0)) = 0. From that state

* open loop applies the trajectory's inputs U(k) unchanged;
* closed loop applies u(k) = U(k) - K(k) (x(k) - X(k)) with the file's tracking gains K
  (the projection operator, thesis (6.10)).

Prints the RMS and final error of each, and with ``-o`` writes an ``.npz`` (arrays t, X_ref,
X_closed, X_open, U_closed, U_open; ``meta`` JSON with names, perturbation, failures) that
``marionette-plot --simulation`` draws. An open-loop run that diverges until a step fails is
reported and kept up to the failure (the rest is NaN). The model is rebuilt from the file's
``info.model_source`` (written by marionette-optimize) unless ``--model``/``--model-file`` is given;
a file made for another model or another version of it is refused.

Exit status: 0 simulated, 1 failure (e.g. the closed loop failed), 2 bad arguments or file.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from marionette_control import _core
from marionette_control.ocp.tracking_problem import consistent_configuration
from marionette_control.trajectory import Trajectory, TrajectoryError
from marionette_control.model.library.source import ModelSource

SIM_FORMAT = "marionette_control.simulation"


def model_for(path, info: dict, name=None, model_file=None):
    """The model of a trajectory file: ``--model``/``--model-file`` or the file's ``info.model_source``."""
    if name:
        return ModelSource.registered(name).build()
    if model_file:
        return ModelSource.file(model_file).build()
    src = info.get("model_source")
    if not src:
        raise TrajectoryError(f"{path}: the file does not say how to build its model (no info.model_source); "
                              "give --model NAME or --model-file PATH")
    try:
        return ModelSource.from_dict(src).build()
    except (KeyError, ValueError, OSError) as e:
        raise TrajectoryError(f"{path}: cannot rebuild the model from info.model_source {src}: {e}") from None


def load_with_model(path, name=None, model_file=None):
    """(trajectory, model): the file validated against its model."""
    raw = Trajectory.load(path)
    model = model_for(path, raw.info, name, model_file)
    return Trajectory.load(path, model), model


def perturbed_state(model, x0: np.ndarray, perturb: dict, random_scale: float = 0.0, seed: int = 0) -> np.ndarray:
    """x0 plus the perturbation, made consistent with the constraints through the kinematic configurations."""
    x = np.array(x0, dtype=float)
    names = list(model.state_names)
    for name, v in perturb.items():
        if name not in names:
            raise ValueError(f"--perturb: '{name}' is not a state of model '{model.name}' (states: {', '.join(names)})")
        x[names.index(name)] += v
    if random_scale:
        rng = np.random.default_rng(seed)
        dyn = [i for i, k in enumerate(model.kinematic) if not k]
        x[dyn] += random_scale * rng.standard_normal(len(dyn))
    if model.nc:
        kin = [i for i, k in enumerate(model.kinematic) if k]
        x[:model.nq] = consistent_configuration(model, x[:model.nq], free=kin)
    return x


def run_open_loop(system, x0: np.ndarray, U: np.ndarray):
    """(X (N+1, nx) with NaN after a failed step, failure message or None)."""
    N, nx = U.shape[0], system.model.nx
    try:
        X, _ = system.simulate(x0, U)
        return X, None
    except _core.StepError as e:
        step = int(getattr(e, "step", 0))
        X = np.full((N + 1, nx), np.nan)
        X[0] = x0
        if step > 0:
            X[:step + 1] = system.simulate(x0, U[:step])[0]
        return X, f"open loop failed at step {step}: {e}"


def error_stats(X: np.ndarray, X_ref: np.ndarray, cols: list) -> dict:
    e = X[:, cols] - X_ref[:, cols]
    norm = np.linalg.norm(e, axis=1)
    ok = np.isfinite(norm)
    return {"rms": float(np.sqrt(np.mean(norm[ok] ** 2))) if ok.any() else float("nan"),
            "final": float(norm[-1]) if ok[-1] else float("nan"),
            "max": float(norm[ok].max()) if ok.any() else float("nan"),
            "steps_completed": int(ok.sum()) - 1}


def parse_perturb(items) -> dict:
    out = {}
    for item in items or ():
        if "=" not in item:
            raise ValueError(f"--perturb expects NAME=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        try:
            out[k.strip()] = out.get(k.strip(), 0.0) + float(v)
        except ValueError:
            raise ValueError(f"--perturb {k}: {v!r} is not a number") from None
    return out


def simulate(traj: Trajectory, model, x0: np.ndarray) -> dict:
    """Open- and closed-loop runs of ``traj`` from x0; returns arrays and statistics."""
    system = _core.DiscreteSystem(model, traj.dt)
    if traj.K is None:
        raise TrajectoryError("the trajectory file has no tracking gains K: closed loop needs them "
                              "(files written by marionette-optimize have them)")
    Xc, Uc = system.project(x0, traj.X, traj.U, traj.K)
    Xo, failure = run_open_loop(system, x0, traj.U)
    dyn = [i for i, k in enumerate(model.kinematic) if not k]
    # Error in the dynamic configurations (what the controller cannot set directly), thesis seed 001 Fig. 6.
    return {"X_closed": Xc, "U_closed": Uc, "X_open": Xo, "U_open": traj.U.copy(), "open_failure": failure,
            "closed": error_stats(Xc, traj.X, dyn), "open": error_stats(Xo, traj.X, dyn),
            "error_configs": [model.config_names[i] for i in dyn]}


def save_simulation(path, traj: Trajectory, x0, sim: dict, perturbation: dict, source: str) -> Path:
    path = Path(path)
    if path.suffix != ".npz":
        path = path.with_suffix(".npz")
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {"format": SIM_FORMAT, "format_version": 1, "trajectory": str(source), "model_name": traj.model_name,
            "model_hash": traj.model_hash, "dt": traj.dt, "state_names": traj.state_names,
            "input_names": traj.input_names, "perturbation": perturbation, "x0": np.asarray(x0).tolist(),
            "open_failure": sim["open_failure"], "closed": sim["closed"], "open": sim["open"],
            "error_configs": sim["error_configs"], "desired": traj.info.get("desired"),
            "config_units": traj.info.get("config_units")}
    np.savez_compressed(path, t=traj.t, X_ref=traj.X, U_ref=traj.U, X_closed=sim["X_closed"], X_open=sim["X_open"],
                        U_closed=sim["U_closed"], U_open=sim["U_open"], meta=np.array(json.dumps(meta)))
    return path


def load_simulation(path) -> tuple:
    """(arrays dict, meta dict) of a file written by :func:`save_simulation`; ValueError if it is not one."""
    try:
        with np.load(path, allow_pickle=False) as f:
            data = {k: f[k] for k in f.files}
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a readable simulation file ({e})") from None
    if "meta" not in data:
        raise ValueError(f"{path}: not a {SIM_FORMAT} file (no meta)")
    meta = json.loads(str(data["meta"]))
    if meta.get("format") != SIM_FORMAT:
        raise ValueError(f"{path}: not a {SIM_FORMAT} file")
    missing = [k for k in ("t", "X_ref", "X_closed", "X_open") if k not in data]
    if missing:
        raise ValueError(f"{path}: missing array(s) {', '.join(missing)}")
    return data, meta


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="marionette-simulate", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trajectory", help="trajectory file (.npz, from marionette-optimize)")
    p.add_argument("--perturb", action="append", default=[], metavar="NAME=VALUE",
                   help="add VALUE to state component NAME of x(0); repeatable")
    p.add_argument("--perturb-random", type=float, default=0.0, metavar="SCALE",
                   help="add normal noise (std SCALE) to every dynamic configuration of x(0)")
    p.add_argument("--seed", type=int, default=0, help="seed of --perturb-random (default 0)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--model", help="registered model name (default: the file's info.model_source)")
    g.add_argument("--model-file", help="YAML model file (default: the file's info.model_source)")
    p.add_argument("-o", "--output", help="write the runs to this .npz (for marionette-plot --simulation)")
    p.add_argument("--summary-json", help="write the statistics as JSON to this file")
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        perturb = parse_perturb(args.perturb)
    except ValueError as e:
        parser.error(str(e))
    if not (np.isfinite(args.perturb_random) and args.perturb_random >= 0):
        parser.error("--perturb-random must be >= 0")
    try:
        traj, model = load_with_model(args.trajectory, args.model, args.model_file)
        x0 = perturbed_state(model, traj.X[0], perturb, args.perturb_random, args.seed)
    except (TrajectoryError, ValueError, KeyError) as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else str(e)   # KeyError's str() adds quotes
        print(f"marionette-simulate: error: {msg}", file=sys.stderr)
        return 2
    try:
        sim = simulate(traj, model, x0)
    except TrajectoryError as e:
        print(f"marionette-simulate: error: {e}", file=sys.stderr)
        return 2
    except _core.StepError as e:
        print(f"marionette-simulate: error: the closed loop failed: {e}", file=sys.stderr)
        return 1
    say = lambda m: print(f"[simulate] {m}", flush=True)  # noqa: E731
    say(f"{args.trajectory}: model '{model.name}', {traj.N} steps of {traj.dt} s; |x(0) - X(0)| = "
        f"{np.linalg.norm(x0 - traj.X[0]):.4g}")
    cfgs = ", ".join(sim["error_configs"])
    for kind in ("closed", "open"):
        s = sim[kind]
        say(f"{kind:6s} loop: error in ({cfgs}) RMS {s['rms']:.4g}, max {s['max']:.4g}, final {s['final']:.4g}"
            + (f" ({s['steps_completed']} of {traj.N} steps)" if s["steps_completed"] < traj.N else ""))
    if sim["open_failure"]:
        say(sim["open_failure"])
    summary = {"trajectory": args.trajectory, "perturbation": perturb, "perturb_random": args.perturb_random,
               "seed": args.seed, "closed": sim["closed"], "open": sim["open"], "open_failure": sim["open_failure"]}
    if args.output:
        path = save_simulation(args.output, traj, x0, sim, dict(perturb, random=args.perturb_random), args.trajectory)
        say(f"wrote {path}")
        summary["output"] = str(path)
    if args.summary_json:
        Path(args.summary_json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.summary_json).write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
