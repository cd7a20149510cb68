"""The package-wide rules that live in one place: number and array checks, the state layout by kind, the
hardware joint map, the config lookup."""

import math

import numpy as np
import pytest

from marionette_control import resources, validation
from marionette_control.model import library
from marionette_control.model.joint_map import JointMap, JointMapError
from marionette_control.model.state_layout import drive_acceleration, input_by_kind, state_by_kind


class KeyedError(ValueError):
    def __init__(self, message, key=None):
        super().__init__(message)
        self.key = key


@pytest.mark.parametrize("value", [math.nan, math.inf, -1.0, 0.0, "1", None, True, [1.0]])
def test_positive_refuses_with_what_and_value(value):
    with pytest.raises(KeyedError, match=r"^weight 'x' must be a finite number > 0, got ") as e:
        validation.positive(value, "weight 'x'", error=KeyedError, key="weights.x")
    assert e.value.key == "weights.x"


def test_number_bounds_and_integers():
    assert validation.number(3, "n", minimum=0.0) == 3.0 and isinstance(validation.number(3, "n"), float)
    assert validation.nonnegative(0.0, "w") == 0.0
    with pytest.raises(ValueError, match="must be a finite number >= 0 and <= 2, got 3"):
        validation.number(3.0, "w", minimum=0.0, maximum=2.0)
    assert validation.integer(np.int64(4), "k", minimum=1) == 4
    for bad in (2.0, True, -1, "3"):
        with pytest.raises(ValueError, match="k must be an integer"):
            validation.integer(bad, "k", minimum=0)
    assert validation.problem(1.5, positive=True) is None
    assert validation.problem(math.nan) == "a finite number, got nan"


def test_finite_array_names_shape_and_the_bad_entry():
    a = validation.finite_array([[1, 2], [3, 4]], "X", (None, 2))
    assert a.dtype == float and a.shape == (2, 2)
    with pytest.raises(ValueError, match=r"X must have shape \(any, 3\), got \(2, 2\)"):
        validation.finite_array(a, "X", (None, 3))
    a[1, 0] = np.nan
    with pytest.raises(ValueError, match=r"X\[1, 0\] is nan, expected finite values"):
        validation.finite_array(a, "X")


def test_state_layout_by_kind_on_the_arm():
    m = library.get("marionette_arm")
    x = state_by_kind(m, dynamic_configuration=1, kinematic_configuration=2, momentum=3, kinematic_velocity=4)
    names = m.state_names
    expect = {"shoulder": 1, "elbow": 1, "carriage": 2, "string_length": 2, "p_shoulder": 3, "p_elbow": 3,
              "v_carriage": 4, "v_string_length": 4}
    assert dict(zip(names, x)) == expect
    u = input_by_kind(m, force_input=5, kinematic_input=6)
    assert list(u) == [6, 6] and m.nu == 0
    # the drives' acceleration against its definition (rho_next - rho - dt v) / dt^2 on a random point
    rng = np.random.default_rng(0)
    xk, uk, dt = rng.normal(size=m.nx), rng.normal(size=m.nU), 0.01
    Mx, Mu = drive_acceleration(m, dt)
    rho, v = xk[m.nd:m.nq], xk[m.nq + m.nd:]
    assert np.allclose(Mx @ xk + Mu @ uk, (uk[m.nu:] - rho - dt * v) / dt ** 2, rtol=1e-13)


def test_joint_map_of_the_arm_file_and_command_order():
    from marionette_control.model.library.marionette_arm import load_description

    desc = load_description()
    jm = JointMap.of(desc.model, desc.hardware_joints)
    assert jm.hardware_names == [desc.config_to_hardware[c] for c in desc.model.config_names]
    kin = jm.kinematic_hardware_names
    assert list(jm.command_order(kin[::-1])) == [1, 0]
    with pytest.raises(JointMapError, match="each kinematic joint once"):
        jm.command_order([kin[0], kin[0]])
    with pytest.raises(JointMapError, match="unknown configurations: nope"):
        JointMap(["a", "b"], 1, {"x": "a", "y": "nope"})
    with pytest.raises(JointMapError, match="no hardware joint is mapped to configuration"):
        JointMap(["a", "b"], 1, {"x": "a"})
    assert JointMap(["a", "b"], 1).hardware_names == ["a", "b"]


def test_config_lookup_order_source_tree_first_then_installed(monkeypatch, tmp_path):
    dirs = resources.config_dirs()
    assert dirs[0] == resources.Path(resources.__file__).resolve().parents[1] / "config"
    assert resources.config_file("marionette_arm.yaml") == dirs[0] / "marionette_arm.yaml"
    # a file only an installed share directory has is found there
    share = tmp_path / "share" / "config"
    share.mkdir(parents=True)
    (share / "only_installed.yaml").write_text("x: 1\n")
    monkeypatch.setattr(resources, "config_dirs", lambda: [dirs[0], share])
    assert resources.config_file("only_installed.yaml") == share / "only_installed.yaml"
    with pytest.raises(FileNotFoundError, match="missing.yaml not found in"):
        resources.config_file("missing.yaml")
    absolute = share / "only_installed.yaml"
    assert resources.config_file(absolute) == absolute
