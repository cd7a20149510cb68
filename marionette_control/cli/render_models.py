"""Renders a picture of every registered model (for docs/models.md).

Usage::

    python -m marionette_control.cli.render_models [--out docs/img] [--dpi 100] [MODEL ...]

Each model is drawn by ``marionette_control.model.plot`` at a representative configuration
(listed in ``POSES`` below; zeros for a model not listed) and written to ``<out>/<model>.png``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable

import numpy as np

from marionette_control import _core
from marionette_control.model.library import (
    available,
    get,
    humanoid_marionette,
    marionette_arm,
    scissor_lift,
)
from marionette_control.model.plot import save_model_png


def _arm_pose(model: _core.Model) -> np.ndarray:
    return marionette_arm.static_equilibrium(model, *marionette_arm.RAISED).q


def _humanoid_pose(model: _core.Model) -> np.ndarray:
    return humanoid_marionette.initial_configuration(model)


def _scissor_pose(model: _core.Model) -> np.ndarray:
    return scissor_lift.configuration(scissor_lift.ScissorLift(), np.pi / 4)  # the registry's default lift


def _named(values: dict[str, float]) -> Callable[[_core.Model], np.ndarray]:
    def pose(model: _core.Model) -> np.ndarray:
        q = np.zeros(model.nq)
        for name, value in values.items():
            q[model.config_index(name)] = value
        return q

    return pose


#: model name -> (configuration function, view plane, caption)
POSES: dict[str, tuple[Callable[[_core.Model], np.ndarray], str, str]] = {
    "pendulum": (_named({"theta": 0.6}), "yz", "theta = 0.6 rad"),
    "double_pendulum": (_named({"theta1": 0.7, "theta2": 0.6}), "yz", "theta = (0.7, 0.6) rad"),
    "cart_pendulum": (_named({"theta": 2.2, "cart": 0.5}), "yz", "theta = 2.2 rad, cart = 0.5 m"),
    "humanoid_marionette": (_humanoid_pose, "xz", "seed 001 initial pose, front view"),
    "marionette_arm": (_arm_pose, "yz", "raised pose (80°, 85°) held by the string"),
    "scissor_lift": (_scissor_pose, "xz", "theta = 45°, 5 segments"),
}


def render(names, out: str, dpi: int = 100) -> list[str]:
    """Writes ``<out>/<name>.png`` for each model name; returns the paths."""
    paths = []
    for name in names:
        model = get(name)
        pose, view, caption = POSES.get(name, (lambda m: np.zeros(m.nq), "auto", "all configurations 0"))
        paths.append(save_model_png(model, f"{out}/{name}.png", pose(model), dpi=dpi, view=view,
                                    title=f"{name}\n{caption}"))
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m marionette_control.cli.render_models",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help="models to render (default: all registered)")
    parser.add_argument("--out", default="docs/img", help="output directory (default docs/img)")
    parser.add_argument("--dpi", type=int, default=100)
    args = parser.parse_args(argv)
    names = args.models or list(available())
    unknown = [n for n in names if n not in available()]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; available: {', '.join(available())}")
    for p in render(names, args.out, args.dpi):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())

