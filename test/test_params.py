"""Node parameter declaration: descriptors, start-up validation, runtime refusal, empty-list defaults."""

import pytest
import rclpy
from rclpy.parameter import Parameter

from marionette_control.nodes.params import declare
from marionette_control.parameters import ParameterError, ParamSpec
from ros_helpers import isolated_ros


@pytest.fixture
def node():
    with isolated_ros():
        rclpy.init()
        n = rclpy.create_node("params_test")
        yield n
        n.destroy_node()
        rclpy.shutdown()


def specs():
    return [ParamSpec("rate", 100.0, "publish rate [Hz]", minimum=1.0, maximum=1000.0),
            ParamSpec("names", [], "joint names (empty = model names)"),
            ParamSpec("mode", "hold", "fault behaviour", check=lambda v: None if v in ("hold", "reset") else
                      "must be hold or reset"),
            ParamSpec("model", "arm", "model name", read_only=True)]


def test_declares_with_descriptions_and_defaults(node):
    values = declare(node, specs())
    assert values == {"rate": 100.0, "names": [], "mode": "hold", "model": "arm"}
    d = node.describe_parameter("rate")
    assert d.description == "publish rate [Hz]" and d.floating_point_range[0].to_value == 1000.0


def test_runtime_changes_are_validated(node):
    seen = []
    declare(node, specs(), on_change=lambda n, v: seen.append((n, v)))
    bad = node.set_parameters([Parameter("rate", value=0.5)])[0]
    assert not bad.successful and "rate" in bad.reason and "range" in bad.reason
    assert not node.set_parameters([Parameter("model", value="x")])[0].successful
    assert not node.set_parameters([Parameter("mode", value="explode")])[0].successful
    assert node.set_parameters([Parameter("mode", value="reset")])[0].successful
    assert node.set_parameters([Parameter("names", value=["a", "b"])])[0].successful
    assert seen == [("mode", "reset"), ("names", ["a", "b"])]


def test_invalid_start_up_value_names_the_parameter(node):
    with pytest.raises(ParameterError, match="parameter 'rate'.*out of range"):
        declare(node, [ParamSpec("rate", 5000.0, "publish rate", minimum=1.0, maximum=1000.0)])
    with pytest.raises(ParameterError, match="parameter 'mode': must be hold or reset"):
        declare(node, [ParamSpec("mode", "explode", "fault behaviour",
                                 check=lambda v: None if v in ("hold", "reset") else "must be hold or reset")])
