"""The physical parameters a calibration fits, and the models built with chosen values of them.

A parameter is named the way a variant model file overrides it (``docs/models.md``, "Variants of a model file"):

==================================  ========================================================================
name                                what it is (SI units)
==================================  ========================================================================
``<body>.mass``                     the mass of a body (a URDF link with an ``<inertial>``, or a model-file
                                    frame with a mass), kg
``<body>.center_of_mass.<x|y|z>``   its centre of mass in the link frame (the translation of the constant
                                    frame ``<body>_inertial``), m
``<body>.inertia.<xx|yy|zz>``       its principal moment of inertia about the centre of mass, kg m²
``<config>.damping``                the viscous damping coefficient of a dynamic configuration, N m s/rad
``<frame>.translation.<x|y|z>``     the translation of a constant frame (a URDF link under a fixed joint, such
                                    as the string's ``hook``), m
``<config>.offset``                 a constant offset of a configuration's sensor: measured = true + offset
==================================  ========================================================================

The Lagrangian is linear in masses and inertias (thesis (3.7)–(3.12): T = ½ m |v|² + ½ ωᵀ I ω, V = m g·p) and
the forcing in the damping coefficients (thesis (3.19)); the placements enter through the kinematics. The model
file itself is the one place that says where each parameter sits: :class:`ParametrizedBuilder` builds it as
:class:`~marionette_control.model.builder.SystemBuilder` does while it records the file's values
(:meth:`ModelParameters.nominal`), substitutes chosen ones, or turns the selected translations into kinematic
configurations (thesis §3.6: a configuration the motion prescribes), so that the core's exact derivatives with
respect to configurations are the derivatives with respect to those placements.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Optional, Sequence

import numpy as np

from marionette_control.model.builder import SystemBuilder
from marionette_control.model.yaml_model import ModelDescription, load_model_file

KINDS = ("mass", "center_of_mass", "inertia", "damping", "translation", "offset")
LINEAR_KINDS = ("mass", "inertia", "damping")
AXES = "xyz"
INERTIA_AXES = ("xx", "yy", "zz")
UNITS = {"mass": "kg", "center_of_mass": "m", "inertia": "kg m^2", "damping": "N m s/rad", "translation": "m",
         "offset": "rad or m"}


class ParameterError(ValueError):
    """A parameter name that does not fit the model; the message says which names exist."""


@dataclass(frozen=True)
class Parameter:
    """One physical parameter (module docstring).

    name : as a user writes it (``forearm.mass``); kind : one of :data:`KINDS`; target : the frame (mass,
    centre of mass, inertia, translation) or configuration (damping, offset) it belongs to; axis : 0..2 for
    vector kinds, -1 otherwise.
    """

    name: str
    kind: str
    target: str
    axis: int = -1

    @property
    def linear(self) -> bool:
        """The equation error is linear in this parameter (mass, inertia, damping)."""
        return self.kind in LINEAR_KINDS

    @property
    def unit(self) -> str:
        return UNITS[self.kind]


@dataclass
class _Recorded:
    """What a model file put into the builder: constant frames (translation (3,), rotation (3, 3), parent),
    masses ((mass, inertia (3,)) by frame), damping by configuration (summed)."""

    translations: dict = field(default_factory=dict)
    rotations: dict = field(default_factory=dict)
    parents: dict = field(default_factory=dict)
    masses: dict = field(default_factory=dict)
    damping: dict = field(default_factory=dict)


class ParametrizedBuilder(SystemBuilder):
    """A :class:`SystemBuilder` that substitutes parameter values while a model file is built (module docstring).

    values : {Parameter: value} for masses, centres of mass, inertias, damping and translations;
    kinematic : {frame: [axis, ...]}: those translations become kinematic configurations named
        :func:`translation_config` (the frame keeps its rotation and mass, now behind them);
    record : a :class:`_Recorded` to fill with the file's own values.
    """

    def __init__(self, name: str, gravity=(0.0, 0.0, -9.81), values: Optional[Mapping] = None,
                 kinematic: Optional[Mapping[str, Sequence[int]]] = None, record: Optional[_Recorded] = None):
        super().__init__(name, gravity=gravity)
        self._values = dict(values or {})
        self._kinematic = dict(kinematic or {})
        self._record = record if record is not None else _Recorded()

    def _value(self, kind: str, target: str, axis: int, default: float) -> float:
        for p, v in self._values.items():
            if p.kind == kind and p.target == target and p.axis == axis:
                return float(v)
        return float(default)

    def const_frame(self, name, parent, translation=(0.0, 0.0, 0.0), rotation=None, mass=None,
                    inertia=(0.0, 0.0, 0.0)):
        t = np.array(translation, dtype=float)
        self._record.translations[name] = t.copy()
        self._record.rotations[name] = np.eye(3) if rotation is None else np.array(rotation, dtype=float)
        self._record.parents[name] = parent
        kind = "center_of_mass" if mass is not None else "translation"
        t = np.array([self._value(kind, name, i, t[i]) for i in range(3)])
        axes = self._kinematic.get(name, ())
        for i in axes:
            link = f"{name}__t{AXES[i]}"
            super().frame(link, parent, f"t{AXES[i]}", config=translation_config(name, i), kinematic=True)
            parent = link
            t[i] = 0.0
        return super().const_frame(name, parent, translation=t, rotation=rotation, mass=mass, inertia=inertia)

    def frame(self, name, parent, transform, config=None, value=0.0, mass=None, inertia=(0.0, 0.0, 0.0),
              kinematic=False):
        super().frame(name, parent, transform, config=config, value=value, kinematic=kinematic)
        if mass is not None:
            self.mass(name, mass, inertia)
        return self

    def mass(self, frame, mass, inertia=(0.0, 0.0, 0.0)):
        inertia = np.array(inertia, dtype=float)
        self._record.masses[frame] = (float(mass), inertia.copy())
        m = self._value("mass", frame, -1, mass)
        inertia = np.array([self._value("inertia", frame, i, inertia[i]) for i in range(3)])
        return super().mass(frame, m, inertia)

    def damping(self, configs, coefficient):
        for c in [configs] if isinstance(configs, str) else configs:
            self._record.damping[c] = self._record.damping.get(c, 0.0) + float(coefficient)
        return self

    def build(self):
        for c, coef in self._record.damping.items():
            coef = self._value("damping", c, -1, coef)
            if coef:
                super().damping(c, coef)
        return super().build()


def translation_config(frame: str, axis: int) -> str:
    """The kinematic configuration that carries ``frame``'s translation along ``axis`` in a model built with
    ``kinematic`` translations (:class:`ParametrizedBuilder`)."""
    return f"{frame}__t{AXES[axis]}"


class ModelParameters:
    """The parameters of one model file: their names, the file's values, and models built with other values.

    Parameters
    ----------
    path : the model file (a variant file works too; its overrides are its values)
    """

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self._recorded = _Recorded()
        self.description: ModelDescription = load_model_file(
            self.path, builder=functools.partial(ParametrizedBuilder, record=self._recorded))
        m = self.description.model
        self.dynamic = list(m.config_names[:m.nd])
        self.configs = list(m.config_names)

    # ------------------------------------------------------------------ names

    def _mass_frame(self, body: str) -> str:
        for f in (f"{body}_inertial", body):
            if f in self._recorded.masses:
                return f
        bodies = sorted({f.removesuffix("_inertial") for f in self._recorded.masses})
        raise ParameterError(f"'{body}' has no mass in {self.path} (bodies with a mass: {', '.join(bodies)})")

    def parameter(self, name: str) -> Parameter:
        """The :class:`Parameter` called ``name`` (module docstring); ParameterError naming what exists."""
        parts = name.split(".")
        if len(parts) == 2 and parts[1] == "mass":
            return Parameter(name, "mass", self._mass_frame(parts[0]))
        if len(parts) == 3 and parts[1] == "center_of_mass" and parts[2] in AXES:
            frame = f"{parts[0]}_inertial"
            if frame not in self._recorded.translations or frame not in self._recorded.masses:
                raise ParameterError(f"{name}: '{parts[0]}' has no centre-of-mass frame '{frame}' in {self.path} "
                                     "(its centre of mass is its frame's origin: name the frame's translation)")
            return Parameter(name, "center_of_mass", frame, AXES.index(parts[2]))
        if len(parts) == 3 and parts[1] == "inertia" and parts[2] in INERTIA_AXES:
            return Parameter(name, "inertia", self._mass_frame(parts[0]), INERTIA_AXES.index(parts[2]))
        if len(parts) == 2 and parts[1] == "damping":
            if parts[0] not in self.dynamic:
                raise ParameterError(f"{name}: '{parts[0]}' is not a dynamic configuration "
                                     f"({', '.join(self.dynamic)})")
            return Parameter(name, "damping", parts[0])
        if len(parts) == 3 and parts[1] == "translation" and parts[2] in AXES:
            if parts[0] not in self._recorded.translations or parts[0] in self._recorded.masses:
                frames = sorted(f for f in self._recorded.translations if f not in self._recorded.masses)
                raise ParameterError(f"{name}: '{parts[0]}' is not a constant frame of {self.path} "
                                     f"(constant frames: {', '.join(frames)})")
            return Parameter(name, "translation", parts[0], AXES.index(parts[2]))
        if len(parts) == 2 and parts[1] == "offset":
            if parts[0] not in self.configs:
                raise ParameterError(f"{name}: '{parts[0]}' is not a configuration ({', '.join(self.configs)})")
            return Parameter(name, "offset", parts[0])
        raise ParameterError(f"'{name}' is not a parameter name: <body>.mass, <body>.center_of_mass.<x|y|z>, "
                             "<body>.inertia.<xx|yy|zz>, <config>.damping, <frame>.translation.<x|y|z>, "
                             "<config>.offset")

    def parameters(self, names: Iterable[str]) -> list[Parameter]:
        out = [self.parameter(n) for n in names]
        if len({p.name for p in out}) != len(out):
            raise ParameterError("a parameter is named twice")
        return out

    def body_extent(self, frame: str) -> tuple[np.ndarray, np.ndarray]:
        """(lower (3,), upper (3,)): the box of a body's own origin and the constant frames attached to it, in its
        link frame — where its centre of mass can be (``frame`` is its ``<body>_inertial`` frame)."""
        link = self._recorded.parents[frame]
        points = [np.zeros(3)] + [t for f, t in self._recorded.translations.items()
                                  if self._recorded.parents.get(f) == link and f != frame]
        pts = np.array(points)
        return pts.min(axis=0), pts.max(axis=0)

    def frame_rotation(self, frame: str) -> np.ndarray:
        """The constant rotation (3, 3) of a constant frame relative to its parent."""
        return self._recorded.rotations[frame]

    def frame_translation(self, frame: str) -> np.ndarray:
        """The model file's translation (3,) of a constant frame."""
        return self._recorded.translations[frame].copy()

    def mass_of(self, frame: str) -> tuple[float, np.ndarray]:
        """The model file's (mass, principal inertias (3,)) at a frame."""
        m, inertia = self._recorded.masses[frame]
        return m, inertia.copy()

    def nominal(self, p: Parameter) -> float:
        """The model file's value of ``p`` (an offset's is 0)."""
        if p.kind == "mass":
            return self._recorded.masses[p.target][0]
        if p.kind == "inertia":
            return float(self._recorded.masses[p.target][1][p.axis])
        if p.kind == "damping":
            return self._recorded.damping.get(p.target, 0.0)
        if p.kind in ("center_of_mass", "translation"):
            return float(self._recorded.translations[p.target][p.axis])
        return 0.0

    # ------------------------------------------------------------------ models

    def model(self, values: Mapping[Parameter, float], kinematic: Optional[Mapping[str, Sequence[int]]] = None):
        """The core model of the file with ``values`` substituted (offsets are not model parameters and are
        ignored here); ``kinematic`` as :class:`ParametrizedBuilder` takes it."""
        model_values = {p: v for p, v in values.items() if p.kind != "offset"}
        return load_model_file(self.path, builder=functools.partial(
            ParametrizedBuilder, values=model_values, kinematic=kinematic)).model
