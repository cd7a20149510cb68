"""Optimization specs: the YAML file that says what to optimize and how, read and checked.

A spec names a model, a desired motion, the time step, the cost weights (per state and input
name), how to find the initial trajectory, the optimizer's method schedule and stopping rules
and the design of the tracking gains computed afterwards. :func:`load_spec` reads and checks
it into an :class:`OptimizationSpec` (every error names the file and the key, e.g. ``wave.yaml:
weights.state.shouldr: matches no state name (...)``); :func:`~.spec_problem.solve_spec` runs it and
returns the result with a :class:`~marionette_control.trajectory.Trajectory` carrying the tracking gains K and
the optimizer's statistics in its ``info``.

Format (``config/optimize/*.yaml`` are worked examples; only ``model``, ``dt`` and ``motion``
are required)::

    model: cart_pendulum            # registry name, or {name: ..., params: {...}}, or {file: model.yaml}
    dt: 0.01                        # time step, s
    motion:                         # the desired motion; exactly one of
      name: wave                    #   a motion file config/motions/<name>.yaml
      # file: my_motion.yaml        #   a motion file (path relative to the spec)
      # trajectory: desired.npz     #   a trajectory file of this model (its X, U are the desired ones)
      # keyframes: [[0, 0], [3, 0], [5, 130], [7, 0], [10, 0]]   # inline: rows [t, value per joint]
      # joints: [theta]             #   with inline keyframes: the configurations of the columns
      # angle_unit: deg             #   with inline keyframes: deg or rad (default rad)
      # interpolation: cosine       #   with inline keyframes: clamped (C2 spline, default), natural,
      #                             #   not-a-knot, linear, or cosine (eased, zero velocity at every key)
      momenta: zero                 # desired momenta and kinematic velocities: zero (thesis §6.7.2) or
                                    # legendre (from consecutive desired configurations)
    initial_state:                  # x(0); default: the desired configurations at t = 0, made
                                    # consistent, at the discrete rest [q0; D2Ld(q0, q0); 0]
      configs: {carriage: 0.1}      #   overrides of q(0)
      consistent: [string_length]   #   configurations adjusted so that h(q(0)) = 0 (default: the
                                    #   kinematic ones the motion does not name, then any unnamed)
      equilibrium: false            #   true: first solve the 'consistent' configurations for a
                                    #   static equilibrium (the arm held at rest by its string)
    initial_trajectory:             # how the first feasible trajectory is found
      method: simulate              #   simulate (constant inputs), desired (the desired trajectory
                                    #   projected with LQR feedback), embedding (§6.6.1),
                                    #   relaxation (strings as forces, §6.6.2), penalty (closed
                                    #   chains as the cost 1/2 w |h|^2, §6.6.2), file (warm start)
      inputs: {cart_next: 0.0}      #   simulate, embedding: constant inputs (default 0 forces,
                                    #   kinematic configurations held at x(0))
      file: previous.npz            #   file: a trajectory of this model
      embedding:                    #   embedding (and relaxation with embedding: true)
        weights: [1.0e-2, 1.0e+2, 1.0e+6]   # fictitious-force weights, rising
        unused_tolerance: 1.0e-3    #   forces below this are unused
        start: simulate             #   first round from: simulate (constant inputs) or desired
                                    #   (the desired trajectory projected with LQR feedback)
        max_iterations: 40          #   per round
        schedule: [[quasi_newton, 4], [newton, null]]
      relaxation:                   #   relaxation
        strings: [string]           #   default: every string
        force_weight: 1.0e-2        #   weight of the replacing force inputs
        embedding: false            #   embed the relaxed system too
        max_iterations: 40
      penalty:                      #   penalty
        constraints: [rod]          #   the constraints relaxed (required)
        weights: [1.0e+2, 1.0e+4, 1.0e+6]   # penalty weights, rising round after round
        error_tolerance: 1.0e-6     #   max |h| counted as negligible
        max_iterations: 40          #   per round
    weights:                        # cost weights (diagonal), by name; glob patterns allowed;
      state: {default: 0.01, theta: 100}   # 'default' for every entry not named (without it: the
      input: {default: 0.01}               # defaults by kind, tracking_problem.py); exact names
                                           # override patterns; input weights must be > 0
      terminal: {}                  #   overrides of the state weights at the final step
      terminal_velocity: {theta: 1.0e+5}   # weights on the final velocities of dynamic configurations
                                    #   (replace the momenta's terminal weights by M^-1 W M^-1 at the
                                    #   desired final configuration; seed004_cartpole.yaml)
    optimizer:                      # defaults: tracking_problem.py (ProblemDefaults)
      schedule: [[quasi_newton, 4], [newton, null]]   # (method, iterations); null = until convergence
      tolerance: 1.0e-6             # stop when |Dh o dxi| < tolerance (thesis §6.7.1)
      max_iterations: 100           #   (default 200)
      deadline: 600                 # s for the whole run (initial trajectory included); null = none
      armijo: {beta: 0.7, alpha: 1.0e-5, max_steps: 30}
      projection: {state: 1.0, input: 1.0}   # Q = R weights of the projection's LQR (thesis §6.3.1)
      start: unconstrained          # unconstrained (default): first the optimum without the inequality
                                    #   constraints (a stage of the run), then the constrained problem from
                                    #   it; initial: the constrained problem straight from the initial
                                    #   trajectory (ocp/optimizer.py, "Start")
    constraints:                    # inequality constraints (ocp/problem.py, ConstraintOptions)
      enabled: true                 #   default true: the model file's limits are enforced
      families: [range, speed, acceleration, tension]   # (default) also: configuration, force
      min_tension: 0.5              #   N, every string (or {string: N}); default: the model file's
      margins: {speed: 0.1, acceleration: 0.1}   # fractions of the drive limits kept in reserve for the
                                    #   feedback; families not named keep the default (problem.py,
                                    #   DEFAULT_MARGINS; docs/margins.md), 0: none
      tension_reserve: 0.2          #   N kept above min_tension for the feedback (default: DEFAULT_TENSION_RESERVE)
      joint_limits: {shoulder: [-0.5, 2.6]}      # with family configuration (default: the URDF's)
      force_bounds: {torque: [-2, 2]}            # with family force
      barrier_weight: 1.0e-3        #   final barrier weight μ (per constraint and second)
      tolerance: 1.0e-6             #   feasibility tolerance on normalized margins
    method: projection              # projection (thesis ch. 6, default) or dmocc (direct transcription
                                    # solved by IPOPT, seed 002 §3; ocp/dmocc.py, docs/dmocc.md),
                                    # started from the same initial trajectory
    dmocc:                          # with method dmocc (DmoccOptions): IPOPT tolerance, constraint
      final: free                   #   tolerance, max_iterations, hessian (exact, limited_memory),
      tolerance: 1.0e-8             #   print_level, ipopt (further IPOPT options); final: free,
                                    #   configuration, state or rest (x^N = the desired final state)
    tracking_gains:                 # the controller's LQR gains (lq/gains.py, GainDesign; its defaults, the
      dynamic_configuration: 1000   #   arm's spec sets its own, docs/tracking.md): weights by kind of component
      kinematic_configuration: 1    #   (without drives, dynamic_configuration weights every configuration;
      momentum: 1                   #   it and angle_integral may be {joint: weight} naming every one), input
      kinematic_velocity: 0.1       #   (> 0), drive_acceleration (on the drives' acceleration), terminal_scale,
      input: 1                      #   angle_integral (on the angle error's integral: LQI; 0: none), and the
      drive_acceleration: 2.0e-2
      terminal_scale: 1
      angle_integral: 2.5e6         #   controller's command delay in steps
      delay_steps: 1
    retime: off                     # a motion too fast for the arm (ocp/retiming.py): off (default: solved as
                                    # drawn; the result says whether it is trackable), uniform (the smallest
                                    # uniform slow-down at which it is), warp (slow only the keyframe intervals
                                    # that need it); or a mapping:
    # retime: {mode: uniform, tolerance: 0.0044, max_factor: 4, precision: 0.01}
                                    #   tolerance: RMS error (rad) each prescribed configuration may keep
                                    #   (ocp/trackability.py); max_factor: the largest slow-down tried;
                                    #   precision: relative width the smallest factor is found to. Needs the
                                    #   motion as keyframes (name, file, keyframes) and an initial trajectory
                                    #   made for any duration (not method file)
    output: out/cart_pendulum_swingup.npz   # default output (relative to the working directory)

Numbers may be written ``1e-3``; unknown keys are errors. The steps and defaults shared with
optimization requests (desired trajectory, weights by kind, optimizer options, initial state and
trajectory, tracking gains) are documented in :mod:`.tracking_problem`; the problem the spec
becomes is :class:`~.problem.Problem`, whose rules (constraints included) are checked there.

The spec's problem, initial trajectory and run are :mod:`.spec_problem`'s; the trajectory a run returns (and
``marionette-optimize`` saves) carries K (the tracking gains, time-varying LQR along the optimum designed by
``tracking_gains``, with their design record ``gain_design``) and in its ``info`` the record of
:mod:`.report`, with the spec (``spec``: path and content) and how to rebuild its model (``model_source``:
registry name and params, or model file).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from marionette_control import validation
from marionette_control.lq.gains import GainDesign
from marionette_control.model.library.source import ModelSource
from marionette_control.model.yaml_model import Checker, read_yaml
from marionette_control.ocp.dmocc import OPTIMIZATION_METHODS, DmoccOptions
from marionette_control.ocp.embedding import EmbeddingOptions, PenaltyOptions, RelaxationOptions
from marionette_control.ocp.problem import STARTS, ConstraintOptions, ProblemError, RetimeOptions
from marionette_control.ocp.projection import OptimizerOptions, OptionError
from marionette_control.ocp.tracking_problem import INTERPOLATIONS, MOMENTA, ProblemDefaults, find_motion, motion_names
from marionette_control.validation import InvalidOption

INITIAL_METHODS = ("simulate", "desired", "embedding", "relaxation", "penalty", "file")
_TOP = ("model", "dt", "motion", "initial_state", "initial_trajectory", "weights", "optimizer", "constraints",
        "tracking_gains", "output", "description", "method", "dmocc", "retime")
DEFAULTS = ProblemDefaults()


class SpecError(ValueError):
    """An invalid optimization spec; the message is ``<file>: <key>: <problem>``."""


# --------------------------------------------------------------------------------------------- spec data


@dataclass
class MotionSpec:
    kind: str                           # name | file | trajectory | keyframes
    path: str = ""                      # motion file or trajectory file
    joints: tuple = ()
    times: np.ndarray = None
    values: np.ndarray = None
    interpolation: str = "clamped"
    momenta: str = "zero"


@dataclass
class InitialSpec:
    method: str = "simulate"
    inputs: dict = field(default_factory=dict)
    file: str = ""
    embedding: Optional[EmbeddingOptions] = None
    relaxation: Optional[RelaxationOptions] = None
    relax_strings: Optional[list] = None
    penalty: Optional[PenaltyOptions] = None
    penalty_constraints: Optional[list] = None


@dataclass
class OptimizationSpec:
    """A checked spec (see the module docstring); ``raw`` is the file's content after overrides."""

    path: str
    raw: dict
    model: ModelSource
    dt: float
    motion: MotionSpec
    initial_configs: dict
    consistent: Optional[list]
    equilibrium: bool
    initial: InitialSpec
    weights: dict
    optimizer: OptimizerOptions
    deadline: Optional[float]
    gains: GainDesign
    output: Optional[str]
    constraints: ConstraintOptions = field(default_factory=ConstraintOptions)
    method: str = "projection"
    dmocc: DmoccOptions = field(default_factory=DmoccOptions)
    start: str = "unconstrained"
    retime: RetimeOptions = field(default_factory=RetimeOptions)

    def fail(self, key: str, problem: str):
        raise SpecError(f"{self.path}: {key}: {problem}")


# --------------------------------------------------------------------------------------------- reading


def _set_dotted(data: dict, dotted: str, value) -> None:
    keys = dotted.split(".")
    node = data
    for k in keys[:-1]:
        if not isinstance(node.get(k), dict):
            node[k] = {}
        node = node[k]
    node[keys[-1]] = value


def _resolve(base: str, p: str) -> str:
    return p if os.path.isabs(p) else os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(base)), p))


def _schedule(c: Checker, value, key: str):
    """A schedule's YAML shape ([method, iterations] or {method, iterations} entries); its rules are
    OptimizerOptions' (checked when the options are built)."""
    entries = []
    for i, e in enumerate(c.list(value, key)):
        k = f"{key}[{i}]"
        if isinstance(e, dict):
            c.mapping(e, k, required=("method",), optional=("iterations",))
            entries.append((e["method"], e.get("iterations")))
        elif isinstance(e, list) and len(e) in (1, 2):
            entries.append((e[0], e[1] if len(e) == 2 else None))
        else:
            c.fail(k, f"expected [method, iterations] or {{method: ..., iterations: ...}}, got {e!r}")
    return tuple(entries)


#: Spec keys (below an optimizer section) of the OptimizerOptions fields that have another name.
_OPTION_KEYS = {"armijo_beta": "armijo.beta", "armijo_alpha": "armijo.alpha", "armijo_max_steps": "armijo.max_steps",
                "projection_Q": "projection.state", "projection_R": "projection.input"}


def _optimizer_options(c: Checker, data: dict, key: str, base: OptimizerOptions,
                       allowed: tuple = ("schedule", "tolerance", "max_iterations")) -> OptimizerOptions:
    """The options of an optimizer section: the YAML shape here, the rules OptimizerOptions' (its OptionError's
    option worded as this section's key)."""
    kw = {}
    if "schedule" in data:
        kw["schedule"] = _schedule(c, data["schedule"], f"{key}.schedule")
    for name in ("tolerance", "max_iterations", "deadline"):
        if data.get(name) is not None and (name in allowed or name != "deadline"):
            kw[name] = c.number(data[name], f"{key}.{name}")
    if "armijo" in data and "armijo" in allowed:
        a = c.mapping(data["armijo"], f"{key}.armijo", optional=("beta", "alpha", "max_steps"))
        for name in ("beta", "alpha", "max_steps"):
            if name in a:
                kw[f"armijo_{name}"] = c.number(a[name], f"{key}.armijo.{name}")
    if "projection" in data and "projection" in allowed:
        p = c.mapping(data["projection"], f"{key}.projection", optional=("state", "input"))
        for name, attr in (("state", "projection_Q"), ("input", "projection_R")):
            if name in p:
                kw[attr] = c.number(p[name], f"{key}.projection.{name}")
    try:
        return dataclasses.replace(base, **kw)
    except OptionError as e:
        option = f"schedule[{e.entry}]" if e.entry is not None else _OPTION_KEYS.get(e.option, e.option)
        c.fail(f"{key}.{option}", e.message)      # (a schedule entry is one [method, iterations] item)


def _weights_map(c: Checker, value, key: str, positive: bool = False) -> dict:
    """{name or pattern: weight}; each weight checked by :func:`marionette_control.validation.weight` (> 0 with
    ``positive``: input weights)."""
    m = c.mapping(value if value is not None else {}, key, optional=tuple(value or {}))
    out = {}
    for name, w in m.items():
        if not isinstance(name, str):
            c.fail(key, f"weight keys are names or patterns, got {name!r}")
        try:
            out[name] = validation.weight(w, "the weight", positive=positive)
        except ValueError as e:
            c.fail(f"{key}.{name}", str(e))
    return out


def _motion(c: Checker, path: str, data) -> MotionSpec:
    key = "motion"
    m = c.mapping(data, key, optional=("name", "file", "trajectory", "keyframes", "joints", "angle_unit",
                                       "interpolation", "momenta"))
    kinds = [k for k in ("name", "file", "trajectory", "keyframes") if k in m]
    if len(kinds) != 1:
        c.fail(key, "give exactly one of name, file, trajectory, keyframes" + (f" (got {', '.join(kinds)})" if kinds
                                                                                else ""))
    kind = kinds[0]
    momenta = m.get("momenta", "zero")
    if momenta not in MOMENTA:
        c.fail(f"{key}.momenta", f"expected one of {', '.join(MOMENTA)}, got {momenta!r}")
    inline_only = [k for k in ("joints", "angle_unit", "interpolation") if k in m]
    if kind != "keyframes" and inline_only:
        c.fail(f"{key}.{inline_only[0]}", "only used with inline keyframes")
    if kind == "name":
        name = c.name(m["name"], f"{key}.name")
        p = find_motion(name, DEFAULTS.motion_library())
        if p is None:
            avail = motion_names(DEFAULTS.motion_library())
            c.fail(f"{key}.name", f"no motion named '{name}' (config/motions has: {', '.join(avail) or 'none'})")
        return MotionSpec("file", path=str(p), momenta=momenta)
    if kind in ("file", "trajectory"):
        p = _resolve(path, c.name(m[kind], f"{key}.{kind}"))
        if not os.path.isfile(p):
            c.fail(f"{key}.{kind}", f"no such file: {p}")
        return MotionSpec(kind, path=p, momenta=momenta)
    if "joints" not in m:
        c.fail(key, "inline keyframes need 'joints' (the configurations of the value columns)")
    joints = [c.name(j, f"{key}.joints[{i}]") for i, j in enumerate(c.list(m["joints"], f"{key}.joints"))]
    if not joints or len(set(joints)) != len(joints):
        c.fail(f"{key}.joints", f"expected distinct configuration names, got {joints}")
    unit = m.get("angle_unit", "rad")
    if unit not in ("deg", "rad"):
        c.fail(f"{key}.angle_unit", f"expected deg or rad, got {unit!r}")
    interp = m.get("interpolation", "clamped")
    if interp not in INTERPOLATIONS:
        c.fail(f"{key}.interpolation", f"expected one of {', '.join(INTERPOLATIONS)}, got {interp!r}")
    rows = c.list(m["keyframes"], f"{key}.keyframes")
    if len(rows) < 2:
        c.fail(f"{key}.keyframes", f"at least 2 keyframes are needed, got {len(rows)}")
    times, values = [], []
    for i, row in enumerate(rows):
        k = f"{key}.keyframes[{i}]"
        if not isinstance(row, list) or len(row) != len(joints) + 1:
            c.fail(k, f"expected [t, {', '.join(joints)}], got {row!r}")
        times.append(c.number(row[0], f"{k}[0]", minimum=0.0))
        values.append([c.number(v, f"{k}[{j + 1}]") for j, v in enumerate(row[1:])])
        if i and times[-1] <= times[-2]:
            c.fail(f"{k}[0]", f"times must increase strictly: {times[-1]} after {times[-2]}")
    scale = math.pi / 180.0 if unit == "deg" else 1.0
    t = np.array(times)
    return MotionSpec("keyframes", joints=tuple(joints), times=t - t[0], values=np.array(values) * scale,
                      interpolation=interp, momenta=momenta)


def _model_source(c: Checker, path: str, value) -> ModelSource:
    if isinstance(value, str):
        return ModelSource.registered(c.name(value, "model"))
    m = c.mapping(value, "model", optional=("name", "params", "file"))
    if ("name" in m) == ("file" in m):
        c.fail("model", "give either name (a registered model, with optional params) or file (a YAML model file)")
    if "file" in m:
        if "params" in m:
            c.fail("model.params", "params go with a registered model name, not a file")
        p = _resolve(path, c.name(m["file"], "model.file"))
        if not os.path.isfile(p):
            c.fail("model.file", f"no such file: {p}")
        return ModelSource.file(p)
    params = m.get("params") or {}
    c.mapping(params, "model.params", optional=tuple(params))
    return ModelSource.registered(c.name(m["name"], "model.name"), **params)


def load_spec(path, overrides: Optional[dict] = None) -> OptimizationSpec:
    """Reads and checks a spec file. ``overrides`` maps dotted keys (``optimizer.max_iterations``) to values
    that replace the file's before checking (command-line ``--set``)."""
    path = os.fspath(path)
    data = read_yaml(path, SpecError)
    if data is None:
        data = {}
    c = Checker(path, SpecError)
    if not isinstance(data, dict):
        c.fail("", f"the file must contain a mapping, got {type(data).__name__}")
    data = copy.deepcopy(data)
    for k, v in (overrides or {}).items():
        _set_dotted(data, k, v)
    return parse_spec(data, path)


def parse_spec(data: dict, path: str = "<spec>") -> OptimizationSpec:
    """Checks a spec given as a mapping (see :func:`load_spec`); ``path`` names it in errors and resolves
    relative file names."""
    c = Checker(path, SpecError)
    c.mapping(data, "", required=("model", "dt", "motion"), optional=_TOP)
    if "description" in data and not isinstance(data["description"], str):
        c.fail("description", "expected text")
    source = _model_source(c, path, data["model"])
    dt = c.number(data["dt"], "dt", positive=True)
    motion = _motion(c, path, data["motion"])

    ist = c.mapping(data.get("initial_state") or {}, "initial_state", optional=("configs", "consistent",
                                                                                "equilibrium"))
    configs = c.mapping(ist.get("configs") or {}, "initial_state.configs", optional=tuple(ist.get("configs") or {}))
    configs = {k: c.number(v, f"initial_state.configs.{k}") for k, v in configs.items()}
    consistent = None
    if "consistent" in ist:
        consistent = [c.name(n, f"initial_state.consistent[{i}]")
                      for i, n in enumerate(c.list(ist["consistent"], "initial_state.consistent"))]
    equilibrium = c.boolean(ist.get("equilibrium", False), "initial_state.equilibrium")

    it = c.mapping(data.get("initial_trajectory") or {}, "initial_trajectory",
                   optional=("method", "inputs", "file", "embedding", "relaxation", "penalty"))
    it = {k: v for k, v in it.items() if v is not None}       # null = absent (handy with --set)
    method = it.get("method", "simulate")
    if method not in INITIAL_METHODS:
        c.fail("initial_trajectory.method", f"expected one of {', '.join(INITIAL_METHODS)}, got {method!r}")
    for k in ("inputs", "file", "embedding", "relaxation", "penalty"):
        users = {"inputs": ("simulate", "embedding"), "file": ("file",), "embedding": ("embedding", "relaxation"),
                 "relaxation": ("relaxation",), "penalty": ("penalty",)}[k]
        if k in it and method not in users:
            c.fail(f"initial_trajectory.{k}", f"only used with method {' or '.join(users)} (method is {method})")
    init = InitialSpec(method)
    if "inputs" in it:
        inp = c.mapping(it["inputs"], "initial_trajectory.inputs", optional=tuple(it["inputs"] or {}))
        init.inputs = {k: c.number(v, f"initial_trajectory.inputs.{k}") for k, v in inp.items()}
    if method == "file":
        if "file" not in it:
            c.fail("initial_trajectory", "method file needs 'file'")
        init.file = _resolve(path, c.name(it["file"], "initial_trajectory.file"))
        if not os.path.isfile(init.file):
            c.fail("initial_trajectory.file", f"no such file: {init.file}")
    relax = it.get("relaxation") or {}
    if method == "relaxation":
        c.mapping(relax, "initial_trajectory.relaxation",
                  optional=("strings", "force_weight", "embedding", "max_iterations", "schedule", "tolerance"))
    if method == "embedding" or (method == "relaxation" and relax.get("embedding") is True):
        init.embedding = _embedding_options(c, it.get("embedding") or {}, "initial_trajectory.embedding")
    if method == "relaxation":
        r = relax
        if "strings" in r:
            init.relax_strings = [c.name(s, f"initial_trajectory.relaxation.strings[{i}]")
                                  for i, s in enumerate(c.list(r["strings"], "initial_trajectory.relaxation.strings"))]
        c.boolean(r.get("embedding", False), "initial_trajectory.relaxation.embedding")
        opts = _optimizer_options(c, r, "initial_trajectory.relaxation", OptimizerOptions(max_iterations=40))
        fw = c.number(r.get("force_weight", 1e-2), "initial_trajectory.relaxation.force_weight", positive=True)
        init.relaxation = RelaxationOptions(force_weight=fw, optimizer=opts, embedding=init.embedding)
    if method == "penalty":
        key = "initial_trajectory.penalty"
        pen = c.mapping(it.get("penalty") or {}, key, required=("constraints",),
                        optional=("constraints", "weights", "error_tolerance", "max_iterations", "schedule",
                                  "tolerance"))
        init.penalty_constraints = [c.name(n, f"{key}.constraints[{i}]")
                                    for i, n in enumerate(c.list(pen["constraints"], f"{key}.constraints"))]
        kw = {"optimizer": _optimizer_options(c, pen, key, OptimizerOptions(max_iterations=40))}
        if "weights" in pen:
            kw["weights"] = [c.number(v, f"{key}.weights[{i}]", positive=True)
                             for i, v in enumerate(c.list(pen["weights"], f"{key}.weights"))]
        if "error_tolerance" in pen:
            kw["tolerance"] = c.number(pen["error_tolerance"], f"{key}.error_tolerance", positive=True)
        try:
            init.penalty = PenaltyOptions(**kw)
        except ValueError as err:
            c.fail(key, str(err))
    if "embedding" in it and method == "relaxation" and init.embedding is None:
        c.fail("initial_trajectory.embedding", "set relaxation.embedding: true to embed the relaxed system")

    w = c.mapping(data.get("weights") or {}, "weights", optional=("state", "input", "terminal", "terminal_velocity"))
    weights = {k: _weights_map(c, w.get(k), f"weights.{k}", k == "input") for k in ("state", "input")}
    weights["terminal"] = _weights_map(c, w["terminal"], "weights.terminal") if "terminal" in w else None
    weights["terminal_velocity"] = (_weights_map(c, w["terminal_velocity"], "weights.terminal_velocity")
                                    if "terminal_velocity" in w else None)

    o = c.mapping(data.get("optimizer") or {}, "optimizer",
                  optional=("schedule", "tolerance", "max_iterations", "deadline", "armijo", "projection", "start"))
    start = o.get("start", "unconstrained")
    if start not in STARTS:
        c.fail("optimizer.start", f"expected one of {', '.join(STARTS)}, got {start!r}")
    options = _optimizer_options(c, o, "optimizer", DEFAULTS.optimizer_options(),
                                 allowed=("schedule", "tolerance", "max_iterations", "deadline", "armijo", "projection"))
    deadline, options = options.deadline, dataclasses.replace(options, deadline=None)   # the final optimization's

    gains = _gain_design(c, data.get("tracking_gains"))

    output = None
    if data.get("output") is not None:
        output = c.name(data["output"], "output")
    constraints = _constraint_options(c, data.get("constraints"))
    method = data.get("method", "projection")
    if method not in OPTIMIZATION_METHODS:
        c.fail("method", f"expected one of {', '.join(OPTIMIZATION_METHODS)}, got {method!r}")
    if data.get("dmocc") is not None and method != "dmocc":
        c.fail("dmocc", f"only used with method dmocc (method is {method})")
    try:
        dmocc = DmoccOptions.from_mapping(data.get("dmocc"))
    except ValueError as e:
        raise SpecError(f"{path}: {e}") from None
    retime = _retime_options(c, data.get("retime"))
    if retime.mode != "off":
        if motion.kind == "trajectory":
            c.fail("retime", "re-timing needs the motion as keyframes (motion.name, motion.file or motion.keyframes), "
                             "not a trajectory file")
        if init.method == "file":
            c.fail("retime", "re-timing needs an initial trajectory made for any duration, not initial_trajectory."
                             "method file")
    return OptimizationSpec(path, data, source, dt, motion, configs, consistent, equilibrium, init, weights,
                            options, deadline, gains, output, constraints, method, dmocc, start, retime)


def _retime_options(c: Checker, value) -> RetimeOptions:
    """The ``retime`` section: a mode, or {mode, tolerance, max_factor, precision} (its shape here; its rules
    :class:`~.problem.RetimeOptions`')."""
    if value is None:
        return RetimeOptions()
    kw = {"mode": value} if isinstance(value, (str, bool)) else \
        dict(c.mapping(value, "retime", optional=("mode", "tolerance", "max_factor", "precision")))
    if kw.get("mode") is False:   # YAML 1.1 reads a bare ``off`` as false
        kw["mode"] = "off"
    try:
        return RetimeOptions(**{k: v for k, v in kw.items() if v is not None})
    except ProblemError as e:
        c.fail(e.key or "retime", str(e))


def _constraint_options(c: Checker, value) -> ConstraintOptions:
    """The ``constraints`` section (its shape here; its rules in :class:`~.problem.ConstraintOptions`)."""
    keys = ("enabled", "families", "min_tension", "margins", "tension_reserve", "joint_limits", "force_bounds",
            "barrier_weight", "tolerance")
    m = c.mapping(value if value is not None else {}, "constraints", optional=keys)
    kw = {k: v for k, v in m.items() if v is not None}
    if "families" in kw:
        kw["families"] = [c.name(f, f"constraints.families[{i}]")
                          for i, f in enumerate(c.list(kw["families"], "constraints.families"))]
    for k in ("margins", "joint_limits", "force_bounds"):
        if k in kw:
            c.mapping(kw[k], f"constraints.{k}", optional=tuple(kw[k] or {}))
    if isinstance(kw.get("min_tension"), dict):
        c.mapping(kw["min_tension"], "constraints.min_tension", optional=tuple(kw["min_tension"]))
    try:
        return ConstraintOptions(**kw)
    except ProblemError as e:
        c.fail(e.key or "constraints", str(e))


def _gain_design(c: Checker, value) -> GainDesign:
    """The ``tracking_gains`` section: GainDesign's fields by name (its shape here; its rules GainDesign's)."""
    names = tuple(f.name for f in dataclasses.fields(GainDesign))
    m = c.mapping(value if value is not None else {}, "tracking_gains", optional=names)
    try:
        return GainDesign(**{k: v for k, v in m.items() if v is not None})
    except InvalidOption as e:
        c.fail(e.key, str(e))


def _embedding_options(c: Checker, e, key: str) -> EmbeddingOptions:
    c.mapping(e, key, optional=("weights", "unused_tolerance", "start", "max_iterations", "schedule", "tolerance"))
    kw = {}
    if "weights" in e:
        kw["weights"] = [c.number(v, f"{key}.weights[{i}]", positive=True)
                         for i, v in enumerate(c.list(e["weights"], f"{key}.weights"))]
    if "unused_tolerance" in e:
        kw["unused_tolerance"] = c.number(e["unused_tolerance"], f"{key}.unused_tolerance", positive=True)
    if "start" in e:
        starts = {"simulate": "given", "desired": "desired"}
        if e["start"] not in starts:
            c.fail(f"{key}.start", f"expected simulate or desired, got {e['start']!r}")
        kw["start"] = starts[e["start"]]
    kw["optimizer"] = _optimizer_options(c, e, key, OptimizerOptions(max_iterations=40))
    try:
        return EmbeddingOptions(**kw)
    except ValueError as err:
        c.fail(key, str(err))
