"""Library of named models.

``get(name, **params)`` builds a model by name (``forcing=`` chooses its forcing
discretization, ``builder.FORCING_RULES``); ``available()`` lists the names with a
one-line description; later modules add models with ``register``. Every factory
returns a core ``Model``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from marionette_control import _core
from marionette_control.model.builder import SystemBuilder
from marionette_control.model.library import (cart_pendulum, humanoid_marionette, marionette_arm, pendulum, scissor_lift,
                                              seed_models)


@dataclass(frozen=True)
class ModelEntry:
    name: str
    factory: Callable[..., _core.Model]
    description: str


_REGISTRY: dict[str, ModelEntry] = {}


def register(name: str, factory: Callable[..., _core.Model], description: str) -> None:
    """Adds a model factory under ``name`` (names are unique)."""
    if name in _REGISTRY:
        raise ValueError(f"a model named '{name}' is already registered")
    _REGISTRY[name] = ModelEntry(name, factory, description)


def available() -> dict[str, str]:
    """Registered model names and their descriptions."""
    return {k: v.description for k, v in sorted(_REGISTRY.items())}


def get(name: str, forcing: str | None = None, **params) -> _core.Model:
    """Builds the model registered as ``name`` with the factory's keyword parameters.

    ``forcing`` (one of ``builder.FORCING_RULES``) replaces the forcing discretization the model's
    description chose (None: keep it: the seed reproductions here use ``"thesis"``, the rule of the
    seeds' vectors and of the reference implementation; the marionette arm's file says ``symmetric``);
    a model with another rule has another identity (``Model.hash``).
    """
    try:
        entry = _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown model '{name}'; available: {', '.join(sorted(_REGISTRY))}") from None
    model = entry.factory(**params)
    if forcing is None or forcing == model.forcing:
        return model
    return SystemBuilder.from_model(model).forcing(forcing).build()


def _register_builtin() -> None:
    register("pendulum", pendulum.pendulum, pendulum.PENDULUM_DESCRIPTION)
    register("double_pendulum", pendulum.double_pendulum, pendulum.DOUBLE_PENDULUM_DESCRIPTION)
    register("humanoid_marionette", humanoid_marionette.humanoid_marionette, humanoid_marionette.DESCRIPTION)
    register("cart_pendulum", cart_pendulum.cart_pendulum, cart_pendulum.DESCRIPTION)
    register("marionette_arm", marionette_arm.marionette_arm, marionette_arm.DESCRIPTION)
    register("rigid_sphere", seed_models.rigid_sphere, seed_models.SPHERE_DESCRIPTION)
    register("two_link_arm", seed_models.two_link_arm, seed_models.TWO_LINK_DESCRIPTION)
    register("scissor_lift", scissor_lift.scissor_lift, scissor_lift.DESCRIPTION)


_register_builtin()
