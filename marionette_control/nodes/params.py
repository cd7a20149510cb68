"""Node parameters declared once, with description, default and validation (ros2_controllers style).

A node lists :class:`ParamSpec` entries; :func:`declare` declares each with a
``ParameterDescriptor`` (description, read-only flag, numeric range),
validates the start-up values in one place (raising :class:`ParameterError`
naming the parameter and what was expected), and installs an
on-set-parameters callback that refuses invalid runtime changes with the
same messages and refuses changes to read-only parameters.

Validation and side effects are separate, as rclpy's parameter callbacks are: the on-set
callbacks (every node's, in rclpy's order) only judge a change; what a change does (the
``on_change`` of :func:`declare`) runs in a post-set callback, once every on-set callback has
accepted it and the value is set. So a node's own checks (e.g. that a trajectory file fits
its model) always run before anything acts on the value.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from rclpy.exceptions import InvalidParameterValueException
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, SetParametersResult
from rclpy.parameter import Parameter

from marionette_control.parameters import ParameterError, ParamSpec


def descriptor(spec: ParamSpec) -> ParameterDescriptor:
    """The ParameterDescriptor of ``spec``: its description, read-only flag and numeric range."""
    d = ParameterDescriptor(description=spec.description, read_only=spec.read_only)
    if isinstance(spec.default, bool):
        return d
    if isinstance(spec.default, int) and (spec.minimum is not None or spec.maximum is not None):
        d.integer_range = [IntegerRange(from_value=int(spec.minimum if spec.minimum is not None else -2**31),
                                        to_value=int(spec.maximum if spec.maximum is not None else 2**31 - 1),
                                        step=0)]
    elif isinstance(spec.default, float) and spec.minimum is not None and spec.maximum is not None:
        d.floating_point_range = [FloatingPointRange(from_value=float(spec.minimum),
                                                     to_value=float(spec.maximum), step=0.0)]
    return d


def declare(node, specs: list[ParamSpec], on_change: Optional[Callable[[str, Any], None]] = None) -> dict:
    """Declares and validates ``specs`` on ``node``; returns {name: value}.

    Raises ParameterError at start-up for an invalid value. At runtime, invalid
    values and changes to read-only parameters are refused (on-set callback); changes the
    node accepted are recorded in the returned dict and passed to ``on_change(name, value)``
    (post-set callback: after every on-set callback of the node has accepted them).
    """
    by_name = {s.name: s for s in specs}
    values = {}
    for s in specs:
        default = list(s.default) if isinstance(s.default, list) else s.default
        try:
            if isinstance(default, list) and not default:
                # rclpy cannot infer a type from an empty list: empty defaults are string arrays,
                # declared by type and initialized to [] unless an override gave a value (which a
                # read-only descriptor would refuse, so read-only is applied after that).
                first = descriptor(s)
                first.read_only = False
                param = node.declare_parameter(s.name, Parameter.Type.STRING_ARRAY, first)
                if param.type_ == Parameter.Type.NOT_SET:
                    node.set_parameters([Parameter(s.name, Parameter.Type.STRING_ARRAY, [])])
                if s.read_only:
                    final = descriptor(s)
                    final.type = first.type
                    node.set_descriptor(s.name, final)
                value = list(node.get_parameter(s.name).value)
            else:
                value = node.declare_parameter(s.name, default, descriptor(s)).value
        except InvalidParameterValueException as e:  # outside the descriptor's range
            raise ParameterError(f"parameter '{s.name}': {e}") from None
        if isinstance(s.default, float) and isinstance(value, int):
            value = float(value)
        error = s.validate(value)
        if error:
            raise ParameterError(error)
        values[s.name] = value

    def callback(params):
        for p in params:
            spec = by_name.get(p.name)
            if spec is None:
                continue
            if spec.read_only:
                return SetParametersResult(successful=False, reason=f"parameter '{p.name}' is read-only")
            error = spec.validate(p.value)
            if error:
                return SetParametersResult(successful=False, reason=error)
        return SetParametersResult(successful=True)

    def changed(params):
        for p in params:
            if p.name in by_name:
                # arrays set through the parameter services arrive as array.array: kept as lists, like the defaults
                values[p.name] = list(p.value) if isinstance(by_name[p.name].default, list) else p.value
                if on_change is not None:
                    on_change(p.name, p.value)

    node.add_on_set_parameters_callback(callback)
    node.add_post_set_parameters_callback(changed)
    return values
