"""Node parameters as data, free of ROS: name, default, description and validation (ros2_controllers style).

Every node lists its parameters once as :class:`ParamSpec` entries in a ROS-free module (the controller's in
:mod:`marionette_control.tracking.controller_options`, the simulator's in :mod:`marionette_control.sim.simulator_options`, …), so
offline tools (bag replay, offline tracking) read the same defaults and rules as the nodes without importing
rclpy; :func:`marionette_control.nodes.params.declare` declares them on a node.
"""

from __future__ import annotations

import array
from dataclasses import dataclass, field
from typing import Any, Callable, Optional


class ParameterError(ValueError):
    """A parameter value is invalid; the message names the parameter."""


@dataclass
class ParamSpec:
    """One parameter: name, default (its type fixes the parameter's type), description.

    check : optional callable(value) -> str | None returning an error text for an invalid value.
    minimum/maximum : numeric range (inclusive), also published in the descriptor.
    read_only : may only be set at start-up.
    """

    name: str
    default: Any
    description: str
    check: Optional[Callable[[Any], Optional[str]]] = None
    minimum: Optional[float] = None
    maximum: Optional[float] = None
    read_only: bool = False
    extra: dict = field(default_factory=dict)

    def validate(self, value) -> Optional[str]:
        """Error text for an invalid value, or None."""
        if isinstance(self.default, float) and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if type(value) is not type(self.default) and not (
                isinstance(self.default, list) and isinstance(value, (list, tuple, array.array))):
            return f"parameter '{self.name}' must be of type {type(self.default).__name__}, got {value!r}"
        if isinstance(value, float) and value != value:
            return f"parameter '{self.name}' must not be NaN"
        if self.minimum is not None and value < self.minimum:
            return f"parameter '{self.name}' must be >= {self.minimum}, got {value}"
        if self.maximum is not None and value > self.maximum:
            return f"parameter '{self.name}' must be <= {self.maximum}, got {value}"
        if self.check is not None:
            msg = self.check(value)
            if msg:
                return f"parameter '{self.name}': {msg}"
        return None
