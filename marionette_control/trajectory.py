"""Discrete trajectories with names, time step and model identity, and their file format.

File format (``.npz``, written by :meth:`Trajectory.save`):

========== ===================== ==============================================
array      shape                 meaning
========== ===================== ==============================================
``t``      (N+1,)                times of the states, ``t0 + k dt``
``X``      (N+1, nx)             states [q (dynamic, kinematic); p; v]
``U``      (N, nU)               inputs [force inputs; next kinematic configs]
``K``      (N, nU, nx)           tracking gains (optional)
``meta``   ()                    JSON text: format, format_version, dt, t0,
                                 model_name, model_hash, state_names,
                                 input_names, and free-form ``info`` (cost,
                                 optimizer statistics, ...)
========== ===================== ==============================================

Loading validates shapes and names against each other and, given a model,
refuses a trajectory made for another model (different name, hash or names).

Optimization results (``marionette-optimize``, the optimizer node) record in ``info``, besides
the optimizer's statistics, ``gain_design`` (how K was designed: ``method``, the
:class:`~marionette_control.lq.gains.GainDesign` fields with ``delay_steps``, which the
controller checks against its command delay, and the diagonals ``state_weights``,
``input_weights``) and ``constraints``: the inequality constraints the trajectory was
optimized under and how it meets them —

* ``feasible`` (bool: every constraint satisfied within the feasibility tolerance) and
  ``violation`` (the largest normalized violation, 0 when feasible);
* ``set``: ``options`` (enabled, families, min_tension, margins, barrier_weight, tolerance),
  ``limits`` (the limits enforced: ``drives`` {configuration: {min, max, max_velocity,
  max_acceleration}} and ``min_tension`` {string: N}) and ``rows`` (family, component, side,
  limit, unit of every constraint);
* ``margins``: per row the worst margin and where (``margin`` in the limit's unit,
  ``normalized``, ``step``, ``time``), ``satisfied``, ``active_steps`` and ``active_intervals``
  ([t_from, t_to] where the trajectory rides the limit) —
  :func:`marionette_control.ocp.problem.constraint_report`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from marionette_control import validation

FORMAT = "marionette_control.trajectory"
FORMAT_VERSION = 1


class TrajectoryError(ValueError):
    """A trajectory is malformed or does not belong to the model it is used with."""


@dataclass(frozen=True)
class ModelIdentity:
    """What :meth:`Trajectory.check_model` compares, read once from a model: a model computes its ``hash`` at every
    read (0.15 ms for the arm), which a controller checking ten plans a second beside its ticks does not repeat."""

    name: str
    hash: str
    state_names: tuple
    discrete_input_names: tuple

    @classmethod
    def of(cls, model) -> "ModelIdentity":
        return cls(model.name, model.hash, tuple(model.state_names), tuple(model.discrete_input_names))


@dataclass
class Trajectory:
    """A discrete trajectory ξ = (X, U) of one model.

    Attributes
    ----------
    dt : float
        Time step.
    X : ndarray, shape (N+1, nx)
    U : ndarray, shape (N, nU)
    state_names, input_names : list of str
    model_name, model_hash : str
        Identity of the model the trajectory was made for.
    K : ndarray, shape (N, nU, nx), optional
        Tracking gains, u = U[k] - K[k] (x - X[k]).
    t0 : float
        Time of X[0].
    info : dict
        JSON-serializable extras (cost, optimizer statistics).
    """

    dt: float
    X: np.ndarray
    U: np.ndarray
    state_names: list
    input_names: list
    model_name: str
    model_hash: str
    K: Optional[np.ndarray] = None
    t0: float = 0.0
    info: dict = field(default_factory=dict)

    def __post_init__(self):
        self.X = np.asarray(self.X, dtype=float)
        self.U = np.asarray(self.U, dtype=float)
        if self.K is not None:
            self.K = np.asarray(self.K, dtype=float)
        self.state_names = list(self.state_names)
        self.input_names = list(self.input_names)
        self.validate()

    @classmethod
    def for_model(cls, model, dt: float, X, U, K=None, t0: float = 0.0, info: Optional[dict] = None):
        """A trajectory of ``model`` (names and identity taken from it; a :class:`ModelIdentity` read once serves
        where trajectories are made every few milliseconds: a model computes its hash at every read)."""
        return cls(dt=float(dt), X=X, U=U, state_names=model.state_names, input_names=model.discrete_input_names,
                   model_name=model.name, model_hash=model.hash, K=K, t0=float(t0), info=dict(info or {}))

    @property
    def N(self) -> int:
        """Number of steps."""
        return self.U.shape[0]

    @property
    def t(self) -> np.ndarray:
        """Times of the states, shape (N+1,)."""
        return self.t0 + self.dt * np.arange(self.N + 1)

    def validate(self) -> None:
        """Checks shapes, finiteness and names; raises TrajectoryError naming what is wrong."""
        validation.positive(self.dt, "trajectory time step", error=TrajectoryError)
        if self.X.ndim != 2 or self.U.ndim != 2:
            raise TrajectoryError(f"X and U must be 2-D, got shapes {self.X.shape} and {self.U.shape}")
        N, nx, nU = self.U.shape[0], len(self.state_names), len(self.input_names)
        if self.X.shape != (N + 1, nx):
            raise TrajectoryError(f"X has shape {self.X.shape}, expected ({N + 1}, {nx}) for {N} input rows and "
                                  f"{nx} state names")
        if self.U.shape != (N, nU):
            raise TrajectoryError(f"U has shape {self.U.shape}, expected ({N}, {nU}) for {nU} input names")
        if self.K is not None and self.K.shape != (N, nU, nx):
            raise TrajectoryError(f"K has shape {self.K.shape}, expected ({N}, {nU}, {nx})")
        for name, arr in (("X", self.X), ("U", self.U), ("K", self.K)):
            if arr is not None and not np.all(np.isfinite(arr)):
                bad = np.argwhere(~np.isfinite(arr))[0]
                raise TrajectoryError(f"{name} contains a non-finite value at index {tuple(int(i) for i in bad)}")
        if len(set(self.state_names)) != nx or len(set(self.input_names)) != nU:
            raise TrajectoryError("state and input names must be unique")

    def check_model(self, model) -> None:
        """Raises TrajectoryError unless this trajectory was made for ``model``."""
        if self.model_name != model.name:
            raise TrajectoryError(f"trajectory was made for model '{self.model_name}', not '{model.name}'")
        if self.state_names != list(model.state_names) or self.input_names != list(model.discrete_input_names):
            raise TrajectoryError(f"trajectory state/input names do not match model '{model.name}'")
        if self.model_hash != model.hash:
            raise TrajectoryError(f"trajectory was made for a different version of model '{model.name}' "
                                  f"(hash {self.model_hash}, model has {model.hash}): its parameters differ")

    def save(self, path) -> Path:
        """Writes the ``.npz`` file (see module docstring) and returns its path."""
        path = Path(path)
        if path.suffix != ".npz":
            path = path.with_suffix(".npz")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp.npz")
        with open(tmp, "wb") as f:
            self.write(f)
        tmp.replace(path)
        return path

    def write(self, file) -> None:
        """Writes the ``.npz`` content (see module docstring) to an open binary file."""
        meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "dt": self.dt, "t0": self.t0,
                "model_name": self.model_name, "model_hash": self.model_hash, "state_names": self.state_names,
                "input_names": self.input_names, "info": self.info}
        arrays = {"t": self.t, "X": self.X, "U": self.U, "meta": np.array(json.dumps(meta))}
        if self.K is not None:
            arrays["K"] = self.K
        np.savez_compressed(file, **arrays)

    @classmethod
    def load(cls, path, model=None) -> "Trajectory":
        """Reads a trajectory file; with ``model``, also checks it belongs to that model."""
        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as f:
                data = {k: f[k] for k in f.files}
        except FileNotFoundError:
            raise TrajectoryError(f"{path}: no such trajectory file") from None
        except (OSError, ValueError) as e:
            raise TrajectoryError(f"{path}: not a readable .npz trajectory file ({e})") from None
        missing = [k for k in ("X", "U", "meta") if k not in data]
        if missing:
            raise TrajectoryError(f"{path}: missing array(s) {', '.join(missing)}")
        try:
            meta = json.loads(str(data["meta"]))
        except json.JSONDecodeError as e:
            raise TrajectoryError(f"{path}: metadata is not valid JSON ({e})") from None
        if meta.get("format") != FORMAT or meta.get("format_version") != FORMAT_VERSION:
            raise TrajectoryError(f"{path}: not a {FORMAT} file of version {FORMAT_VERSION}")
        keys = ("dt", "t0", "model_name", "model_hash", "state_names", "input_names")
        absent = [k for k in keys if k not in meta]
        if absent:
            raise TrajectoryError(f"{path}: metadata lacks {', '.join(absent)}")
        try:
            traj = cls(dt=meta["dt"], X=data["X"], U=data["U"], state_names=meta["state_names"],
                       input_names=meta["input_names"], model_name=meta["model_name"],
                       model_hash=meta["model_hash"], K=data.get("K"), t0=meta["t0"], info=meta.get("info", {}))
        except TrajectoryError as e:
            raise TrajectoryError(f"{path}: {e}") from None
        if model is not None:
            try:
                traj.check_model(model)
            except TrajectoryError as e:
                raise TrajectoryError(f"{path}: {e}") from None
        return traj
