"""How to build a model again: a registry name with parameters, or a YAML model file.

Optimization results record it (``info['model_source']`` of a trajectory file, written by
``marionette-optimize``) so ``marionette-simulate`` can rebuild the model the trajectory was
made for; an optimization spec names its model this way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from marionette_control import _core
from marionette_control.model import library
from marionette_control.model.yaml_model import load_model, load_model_file

KINDS = ("registry", "file")


class ModelSourceError(ValueError):
    """A serialized model source is malformed."""


@dataclass(frozen=True)
class ModelSource:
    """``kind`` ``"registry"``: ``library.get(name, **params)``; ``"file"``: the YAML model file at ``path``."""

    kind: str
    name: str = ""
    params: dict = field(default_factory=dict)
    path: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ModelSourceError(f"model source kind must be {' or '.join(KINDS)}, got {self.kind!r}")

    @classmethod
    def registered(cls, name: str, **params) -> "ModelSource":
        return cls("registry", name=name, params=dict(params))

    @classmethod
    def file(cls, path) -> "ModelSource":
        return cls("file", path=str(Path(path).resolve()))

    @classmethod
    def from_dict(cls, d: dict) -> "ModelSource":
        """Inverse of :meth:`to_dict` (as stored in a trajectory file's ``info``)."""
        if not isinstance(d, dict) or d.get("kind") not in KINDS:
            raise ModelSourceError(f"not a serialized model source (expected kind {' or '.join(KINDS)}): {d!r}")
        try:
            if d["kind"] == "registry":
                return cls.registered(d["name"], **dict(d.get("params") or {}))
            return cls.file(d["path"])
        except (KeyError, TypeError) as e:
            raise ModelSourceError(f"serialized model source {d!r} lacks or mistypes {e}") from None

    def to_dict(self) -> dict:
        """A JSON-able form: ``{"kind": "registry", "name", "params"}`` or ``{"kind": "file", "path"}``."""
        if self.kind == "registry":
            return {"kind": "registry", "name": self.name, "params": dict(self.params)}
        return {"kind": "file", "path": self.path}

    def description(self):
        """The model file that describes this model (``yaml_model.ModelDescription``: hardware joint names,
        actuator limits, strings, URDF), or None for a registered model described in Python only.

        A file source's file; for a registered model the file its module loads (``load_description()``,
        e.g. the marionette arm's ``config/marionette_arm.yaml``; registry parameters such as gravity do
        not change what the file says).
        """
        if self.kind == "file":

            return load_model_file(self.path)
        import importlib

        try:
            module = importlib.import_module(f"marionette_control.model.library.{self.name}")
        except ImportError:  # registered by a module of another name: described in Python only
            return None
        loader = getattr(module, "load_description", None)
        return None if loader is None else loader((self.params or {}).get("path"))

    def build(self) -> _core.Model:
        """The model (KeyError for an unknown registry name, ValueError/OSError for a bad model file)."""
        if self.kind == "registry":

            return library.get(self.name, **self.params)

        return load_model(self.path)
