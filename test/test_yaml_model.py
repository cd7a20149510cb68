"""YAML model files (marionette_control.model.yaml_model): building, and errors that name the file and the key.

A YAML model must build the same core model as the equivalent builder calls (compared through
mass matrices, Lagrangian values and constraints at random configurations, exactly); every
invalid file must fail with ``<file>: <key>: <problem>``.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from marionette_control import _core
from marionette_control.model import SystemBuilder
from marionette_control.model.urdf import UrdfWarning
from marionette_control.model.yaml_model import ModelFileError, load_model, load_model_file
from marionette_control.resources import config_file

STRUNG_PENDULUM = """
name: strung_double_pendulum
description: a double pendulum whose second mass hangs from a string with a prescribed top point
gravity: [0, 0, -9.8]
kinematic: [top_y]
frames:
  - {name: link1, parent: world, transform: rx, config: theta1}
  - {name: mass1, parent: link1, transform: tz, value: -1.0, mass: 1.0, inertia: [1e-3, 1e-3, 1e-3]}
  - {name: link2, parent: mass1, transform: rx, config: theta2}
  - {name: mass2, parent: link2, transform: tz, value: -1.0, mass: 0.5}
  - {name: hook, parent: link2, translation: [0, 0.1, -0.9], rpy: [0.1, 0, 0]}
  - {name: top, parent: world, transform: tz, value: 1.0}
  - {name: top_slider, parent: top, transform: ty, config: top_y}
strings:
  - {name: string, from: hook, to: top_slider, length: string_length}
springs:
  - {name: spring, frame1: mass1, frame2: top, stiffness: 2.0, rest_length: 0.5}
config_springs:
  - {name: cspring, config: theta1, stiffness: 0.3, neutral: 0.1}
damping: {theta1: 0.1, theta2: 0.05}
forces:
  - {config: theta1, input: torque1}
"""


def write(tmp_path, text: str, name: str = "model.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def builder_equivalent():
    b = SystemBuilder("strung_double_pendulum", gravity=(0, 0, -9.8))
    b.config("top_y", kinematic=True)
    b.frame("link1", "world", "rx", config="theta1")
    b.frame("mass1", "link1", "tz", value=-1.0, mass=1.0, inertia=(1e-3, 1e-3, 1e-3))
    b.frame("link2", "mass1", "rx", config="theta2")
    b.frame("mass2", "link2", "tz", value=-1.0, mass=0.5)
    from marionette_control.model import rotation_rpy

    b.const_frame("hook", "link2", translation=(0, 0.1, -0.9), rotation=rotation_rpy(0.1, 0, 0))
    b.frame("top", "world", "tz", value=1.0)
    b.frame("top_slider", "top", "ty", config="top_y")
    b.config("string_length", kinematic=True)
    b.distance_constraint("hook", "top_slider", "string_length", name="string")
    b.linear_spring("mass1", "top", 2.0, 0.5, name="spring")
    b.config_spring("theta1", 0.3, 0.1, name="cspring")
    b.damping("theta1", 0.1).damping("theta2", 0.05)
    b.config_force("theta1", input="torque1")
    return b.build()


def test_yaml_builds_the_same_model_as_the_builder(tmp_path):
    desc = load_model_file(write(tmp_path, STRUNG_PENDULUM))
    m, ref = desc.model, builder_equivalent()
    assert m.config_names == ref.config_names == ["theta1", "theta2", "top_y", "string_length"]
    assert m.input_names == ["torque1"]
    assert m.constraint_names == ["string"]
    rng = np.random.default_rng(0)
    for _ in range(5):
        q, v = rng.normal(size=4), rng.normal(size=4)
        np.testing.assert_array_equal(_core.mass_matrix(m, q), _core.mass_matrix(ref, q))
        assert m.lagrangian(q, v, 0)["L"] == ref.lagrangian(q, v, 0)["L"]
        np.testing.assert_array_equal(m.constraints(q)[1], ref.constraints(q)[1])
        u = rng.normal(size=1)
        np.testing.assert_array_equal(_core.forward_dynamics(m, q, v, u, np.zeros(2))[0],
                                      _core.forward_dynamics(ref, q, v, u, np.zeros(2))[0])
    assert desc.strings[0].length == "string_length"
    assert desc.hardware_joints == {n: n for n in m.config_names}


def test_arm_file_loads_with_urdf_string_and_metadata():
    desc = load_model_file(config_file("marionette_arm.yaml"))
    assert desc.model.config_names == ["shoulder", "elbow", "carriage", "string_length"]
    assert desc.urdf is not None and desc.urdf.name == "marionette_arm"
    assert set(desc.actuators) == {"carriage", "string_length"}
    assert desc.actuators["carriage"].contains(0.0)


def test_scientific_notation_without_dot_is_a_number(tmp_path):
    m = load_model(write(tmp_path, """
        name: n
        frames:
          - {name: a, parent: world, transform: rx, config: q}
          - {name: b, parent: a, transform: tz, value: -1, mass: 2e-1}
    """))
    assert m.masses["b"][0] == 0.2


def test_overrides_replace_top_level_keys(tmp_path):
    p = write(tmp_path, STRUNG_PENDULUM)
    m = load_model(p, gravity=[0, 0, -1.0])
    np.testing.assert_array_equal(m.gravity, [0, 0, -1.0])
    with pytest.raises(ModelFileError, match="override 'bogus' is not a model-file key"):
        load_model(p, bogus=1)


def test_forcing_key_and_its_variants(tmp_path):
    """``forcing`` (thesis (4.12)): symmetric by default; a file's choice reaches the model and its builder; a
    variant inherits its base's choice and may change it; ``load_model(..., forcing=)`` overrides it."""
    p = write(tmp_path, STRUNG_PENDULUM, "nominal.yaml")
    sym = load_model(p)
    assert sym.forcing == "symmetric"
    thesis = load_model(write(tmp_path, STRUNG_PENDULUM + "forcing: thesis\n", "thesis.yaml"))
    assert thesis.forcing == "thesis" and sym.hash != thesis.hash
    b = SystemBuilder.from_model(sym)
    assert b.forcing("thesis").build().hash == load_model(p, forcing="thesis").hash
    assert load_model(write(tmp_path, "name: v\nbase: thesis.yaml\n", "v.yaml")).forcing == "thesis"
    assert load_model(write(tmp_path, "name: w\nbase: thesis.yaml\nforcing: symmetric\n", "w.yaml")).forcing == "symmetric"


def test_urdf_rename_and_extra_frames(tmp_path):
    (tmp_path / "one.urdf").write_text(
        '<robot name="one"><link name="base"/><joint name="j" type="continuous"><parent link="base"/>'
        '<child link="a"/><origin xyz="0 0 0.5"/><axis xyz="1 0 0"/></joint><link name="a"><inertial>'
        '<origin xyz="0 0 -1"/><mass value="1"/><inertia ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"/>'
        '</inertial></link></robot>')
    desc = load_model_file(write(tmp_path, """
        name: with_urdf
        urdf: {file: one.urdf, rename: {j: theta}}
        frames:
          - {name: tip, parent: a, transform: tz, value: -2.0, mass: 0.5}
          - {name: helper_child, parent: j_origin, transform: ty, value: 0.1}
        damping: {theta: 0.2}
    """))
    assert desc.model.config_names == ["theta"]
    assert "tip" in desc.model.frame_names


def test_urdf_friction_option(tmp_path):
    """urdf.friction: ignore (the default: one UrdfWarning, the value kept in the description) or refuse."""
    (tmp_path / "rubbing.urdf").write_text(
        '<robot name="r"><link name="base"/><joint name="j" type="continuous"><parent link="base"/>'
        '<child link="a"/><axis xyz="1 0 0"/><dynamics friction="0.3"/></joint><link name="a"><inertial>'
        '<origin xyz="0 0 -1"/><mass value="1"/><inertia ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"/>'
        '</inertial></link></robot>')
    for option in ("", ", friction: ignore"):
        with pytest.warns(UrdfWarning, match=r"rubbing.urdf: Coulomb <dynamics friction> of 1 joint\(s\) \(j 0.3 "):
            desc = load_model_file(write(tmp_path, f"name: r\nurdf: {{file: rubbing.urdf{option}}}\n"))
        assert desc.urdf.joint("j").friction == 0.3
    with pytest.raises(ModelFileError, match=r"model.yaml: urdf: .*rubbing.urdf: joint 'j' <dynamics friction=0.3>: "
                                             r"Coulomb friction is not modelled and friction='refuse'"):
        load_model(write(tmp_path, "name: r\nurdf: {file: rubbing.urdf, friction: refuse}\n"))
    with pytest.raises(ModelFileError, match=r"model.yaml: urdf.friction: expected one of ignore, refuse, got 'on'"):
        load_model(write(tmp_path, "name: r\nurdf: {file: rubbing.urdf, friction: 'on'}\n"))


# ----------------------------------------------------------------------------------------------- errors

BASE = """
name: m
frames:
  - {name: a, parent: world, transform: rx, config: q}
  - {name: b, parent: a, transform: tz, value: -1.0, mass: 1.0}
"""


@pytest.mark.parametrize("extra, pattern", [
    ("colour: red\n", r"colour: unknown key \(allowed: .*\)"),
    ("gravity: [0, 0]\n", r"gravity: expected a list of 3 numbers"),
    ("gravity: [0, 0, .nan]\n", r"gravity\[2\]: expected a finite number"),
    ("gravity: [0, 0, '9.8']\n", r"gravity\[2\]: expected a number, got '9.8'"),
    ("damping: {q: -0.1}\n", r"damping.q: must be >= 0"),
    ("damping: {q: true}\n", r"damping.q: expected a number, got True"),
    ("damping: {nope: 0.1}\n", r"damping.nope: unknown configuration 'nope'"),
    ("damping: 5\n", r"damping: expected a mapping, got int"),
    ("urdf: {file: x.urdf, rename: [a]}\n", r"urdf.rename: expected a mapping, got list"),
    ("strings: [{name: s, from: b, to: nowhere, length: 1.0}]\n", r"strings\[0\].to: unknown frame 'nowhere'"),
    ("strings: [{name: s, from: b, to: b, length: 1.0}]\n", r"strings\[0\].to: a string joins two different"),
    ("strings: [{name: s, from: b, to: world, length: 0}]\n", r"strings\[0\].length: must be > 0"),
    ("strings: [{name: s, from: b, to: world, length: q}]\n",
     r"strings\[0\].length: configuration 'q' is dynamic; a string length must be kinematic"),
    ("strings: [{name: s, from: b, to: world}]\n", r"strings\[0\]: missing key 'length'"),
    ("strings: [{name: s, from: b, to: world, length: 1, colour: red}]\n", r"strings\[0\].colour: unknown key"),
    ("springs: [{name: s, frame1: a, frame2: b, stiffness: -1}]\n", r"springs\[0\].stiffness: must be >= 0"),
    ("config_springs: [{name: s, config: zz, stiffness: 1}]\n", r"config_springs\[0\].config: unknown configuration"),
    ("forces: [{config: q, input: u}, {config: q, input: v}]\n", r"forces\[1\].name: the name 'q_force' is used twice"),
    ("kinematic: [k, k]\n", r"kinematic\[1\]: 'k' is listed twice"),
    ("kinematic: [k]\ndamping: {k: 0.1}\n", r"damping.k: 'k' is kinematic \(prescribed\)"),
    ("plane_constraints: [{plane_frame: world, axis: w, point_frame: b}]\n",
     r"plane_constraints\[0\].axis: expected x, y, z"),
    ("hardware: {joint_names: {hw_q: nope}}\n", r"hardware.joint_names.hw_q: unknown configuration 'nope'"),
    ("kinematic: [k]\nhardware: {joint_names: {hw_q: q}}\n",
     r"hardware.joint_names: no hardware joint name for configuration\(s\) k"),
    ("actuators: {q: {min: 0, max: 1, max_velocity: 1}}\n", r"actuators.q: 'q' is dynamic"),
    ("kinematic: [k]\nactuators: {k: {min: 1, max: 0, max_velocity: 1}}\n", r"actuators.k.max: must be > min"),
    ("kinematic: [k]\nactuators: {k: {min: 0, max: 1}}\n", r"actuators.k: missing key 'max_velocity'"),
    ("urdf: {file: missing.urdf}\n", r"urdf: .*missing.urdf: cannot read"),
    ("urdf: {path: x.urdf}\n", r"urdf.path: unknown key"),
    ("forcing: midpoint\n", r"forcing: expected one of thesis, symmetric, got 'midpoint'"),
])
def test_invalid_top_level_entries(tmp_path, extra, pattern):
    p = write(tmp_path, BASE + extra)
    with pytest.raises(ModelFileError, match=pattern) as info:
        load_model(p)
    assert str(info.value).startswith(str(p) + ": ")


@pytest.mark.parametrize("frame, pattern", [
    ("{name: c, parent: ghost, transform: rx, config: r}",
     r"frames\[2\] \('c'\).parent: unknown frame 'ghost' \(parents must be defined before their children\)"),
    ("{name: b, parent: a, transform: tz, value: -2.0}", r"frames\[2\] \('b'\).name: frame 'b' is defined twice"),
    ("{name: c, parent: a, transform: rw, value: 1}", r"frames\[2\] \('c'\).transform: expected one of tx, ty"),
    ("{name: c, parent: a, transform: rx, config: q}",
     r"frames\[2\] \('c'\).config: configuration 'q' already drives frame 'a'"),
    ("{name: c, parent: a, transform: rx, config: r, value: 1}", r"frames\[2\] \('c'\): give either config"),
    ("{name: c, parent: a, transform: tz, value: x}", r"frames\[2\] \('c'\).value: expected a number, got 'x'"),
    ("{name: c, parent: a, transform: tz, mass: -1}", r"frames\[2\] \('c'\).mass: must be >= 0"),
    ("{name: c, parent: a, transform: tz, mass: 1, inertia: [1, 2]}",
     r"frames\[2\] \('c'\).inertia: expected a list of 3 numbers"),
    ("{name: c, parent: a, transform: tz, inertia: [1, 2, 3]}", r"frames\[2\] \('c'\).inertia: inertia given without"),
    ("{name: c, parent: a, translation: [0, 0, 1], config: r}", r"frames\[2\] \('c'\).config: a constant SE\(3\)"),
    ("{name: c, parent: a, transform: rx, rpy: [0, 0, 1]}", r"frames\[2\] \('c'\).rpy: 'rpy' belongs to constant"),
    ("{name: c, parent: a, transform: tz, colour: red}", r"frames\[2\].colour: unknown key"),
    ("{parent: a, transform: tz}", r"frames\[2\]: missing key 'name'"),
    ("{name: '', parent: a}", r"frames\[2\].name: expected a non-empty name"),
])
def test_invalid_frames(tmp_path, frame, pattern):
    p = write(tmp_path, BASE + "  - " + frame + "\n")
    with pytest.raises(ModelFileError, match=pattern) as info:
        load_model(p)
    assert str(info.value).startswith(str(p) + ": ")


def test_duplicate_yaml_keys_are_errors(tmp_path):
    p = write(tmp_path, BASE + "damping: {q: 0.1, q: 0.2}\n")
    with pytest.raises(ModelFileError, match=r"model.yaml: invalid YAML: .*duplicate key 'q'"):
        load_model(p)


def test_missing_name_and_wrong_document(tmp_path):
    with pytest.raises(ModelFileError, match=r"missing key 'name'"):
        load_model(write(tmp_path, "frames: []\n"))
    with pytest.raises(ModelFileError, match=r"the file must contain a mapping, got list"):
        load_model(write(tmp_path, "- a\n- b\n"))
    with pytest.raises(ModelFileError, match=r"cannot read"):
        load_model(tmp_path / "absent.yaml")


def test_core_errors_carry_the_file_name(tmp_path):
    """A dynamic configuration that moves no mass is found by the core; the message still names the file."""
    p = write(tmp_path, "name: m\nframes:\n  - {name: a, parent: world, transform: rx, config: q}\n")
    with pytest.raises(ModelFileError, match=r"model.yaml: .*'q' moves no mass"):
        load_model(p)


def test_arm_file_errors_name_urdf(tmp_path):
    (tmp_path / "arm.urdf").write_text(config_file("marionette_arm.urdf").read_text()
                                       .replace('<axis xyz="1 0 0"/>', '<axis xyz="0 0 0"/>', 1))
    text = config_file("marionette_arm.yaml").read_text().replace("file: marionette_arm.urdf", "file: arm.urdf")
    p = write(tmp_path, text, "arm.yaml")
    with pytest.raises(ModelFileError, match=r"arm.yaml: urdf: .*arm.urdf: joint 'shoulder' <axis xyz>: the axis "
                                             r"is the zero vector"):
        load_model(p)


def test_the_winch_joint_of_the_urdf_is_the_string_length_not_a_tree_joint(tmp_path):
    """config/marionette_arm.urdf has a joint string_length (so every /joint_states name is a URDF joint); the
    model is the one built from the URDF without it: same frames, configurations and hash."""
    urdf = config_file("marionette_arm.urdf").read_text()
    start, end = urdf.index('  <joint name="string_length"'), urdf.index('<link name="string_end"/>')
    (tmp_path / "no_winch.urdf").write_text(urdf[:start] + urdf[end + len('<link name="string_end"/>'):])
    text = config_file("marionette_arm.yaml").read_text().replace("file: marionette_arm.urdf", "file: no_winch.urdf")
    without = load_model_file(write(tmp_path, text, "no_winch.yaml"))
    shipped = load_model_file(config_file("marionette_arm.yaml"))
    assert "string_length" in shipped.urdf.moving_joints and "string_length" not in without.urdf.moving_joints
    assert shipped.model.hash == without.model.hash
    assert shipped.model.frame_names == without.model.frame_names and "string_end" not in shipped.model.frame_names
    assert shipped.model.config_names == without.model.config_names
    assert shipped.model.kinematic == without.model.kinematic
    # a winch joint that carries something is refused, naming the joint
    (tmp_path / "heavy.urdf").write_text(urdf.replace('<link name="string_end"/>', '<link name="string_end"><inertial>'
                                                      '<mass value="0.1"/><inertia ixx="1e-4" iyy="1e-4" izz="1e-4"/>'
                                                      '</inertial></link>'))
    with pytest.raises(ModelFileError, match=r"joint 'string_length' \(the length of a string\).*no mass"):
        load_model_file(write(tmp_path, text.replace("no_winch.urdf", "heavy.urdf"), "heavy.yaml"))


# ----------------------------------------------------------------------------------------------- variants: base + overrides


def test_plant_file_equals_an_edited_copy_of_the_urdf(tmp_path):
    """config/marionette_arm_plant.yaml (base + overrides) builds the same model as a copy of the arm's URDF
    edited by hand with the same numbers (model hash: every number that defines the dynamics)."""
    urdf = config_file("marionette_arm.urdf").read_text()
    edits = [
        ('<origin xyz="0 0 -0.12" rpy="0 0 0"/>\n      <mass value="0.20"/>\n      <inertia ixx="1.05e-3" ixy="0" '
         'ixz="0" iyy="1.05e-3" iyz="0" izz="2.3e-5"/>',
         '<origin xyz="0 0 -0.127" rpy="0 0 0"/>\n      <mass value="0.212"/>\n      <inertia ixx="1.24e-3" ixy="0" '
         'ixz="0" iyy="1.24e-3" iyz="0" izz="2.4e-5"/>'),
        ('<origin xyz="0 0 -0.11" rpy="0 0 0"/>\n      <mass value="0.15"/>\n      <inertia ixx="8.0e-4" ixy="0" '
         'ixz="0" iyy="8.0e-4" iyz="0" izz="1.7e-5"/>',
         '<origin xyz="0 0 -0.116" rpy="0 0 0"/>\n      <mass value="0.160"/>\n      <inertia ixx="8.8e-4" ixy="0" '
         'ixz="0" iyy="8.8e-4" iyz="0" izz="1.8e-5"/>'),
        ('<child link="hook"/>\n    <origin xyz="0 0 -0.20" rpy="0 0 0"/>',
         '<child link="hook"/>\n    <origin xyz="0 0.001 -0.2015" rpy="0 0 0"/>'),
        ('<dynamics damping="0.02" friction="0"/>', '<dynamics damping="0.03" friction="0"/>'),
        ('<dynamics damping="0.01" friction="0"/>', '<dynamics damping="0.015" friction="0"/>'),
    ]
    for old, new in edits:
        assert urdf.count(old) == 1, old
        urdf = urdf.replace(old, new)
    (tmp_path / "edited.urdf").write_text(urdf)
    text = (config_file("marionette_arm.yaml").read_text().replace("file: marionette_arm.urdf", "file: edited.urdf")
            .replace("name: marionette_arm", "name: marionette_arm_plant"))
    edited = load_model_file(write(tmp_path, text, "edited.yaml"))
    plant = load_model_file(config_file("marionette_arm_plant.yaml"))
    nominal = load_model_file(config_file("marionette_arm.yaml"))
    assert plant.model.hash == edited.model.hash != nominal.model.hash
    assert plant.model.config_names == nominal.model.config_names
    assert plant.model.frame_names == nominal.model.frame_names
    assert plant.actuators == nominal.actuators and plant.hardware_joints == nominal.hardware_joints
    assert plant.name == "marionette_arm_plant" and "base" not in plant.raw and "overrides" not in plant.raw


def test_overrides_of_yaml_frames_and_chained_bases(tmp_path):
    """Overrides in a chain of bases (paths relative to each file, later files win) build the same model as the
    base file edited by hand."""
    write(tmp_path, STRUNG_PENDULUM, "nominal.yaml")
    (tmp_path / "sub").mkdir()
    write(tmp_path, """
        name: heavier
        base: ../nominal.yaml
        overrides:
          masses: {mass2: {mass: 0.6}, mass1: {inertia: [2e-3, 2e-3, 2e-3]}}
          placements: {hook: {translation: [0, 0.12, -0.9]}, mass2: {value: -1.1}}
          damping: {theta1: 0.2}
    """, "sub/heavier.yaml")
    chained = load_model_file(write(tmp_path, "name: heaviest\nbase: sub/heavier.yaml\n"
                                              "overrides: {masses: {mass2: {mass: 0.7}}}\n", "heaviest.yaml"))
    edits = [("name: strung_double_pendulum", "name: heaviest"),
             ("value: -1.0, mass: 0.5", "value: -1.1, mass: 0.7"),
             ("mass: 1.0, inertia: [1e-3, 1e-3, 1e-3]", "mass: 1.0, inertia: [2e-3, 2e-3, 2e-3]"),
             ("translation: [0, 0.1, -0.9]", "translation: [0, 0.12, -0.9]"),
             ("damping: {theta1: 0.1,", "damping: {theta1: 0.2,")]
    text = STRUNG_PENDULUM
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    edited = load_model(write(tmp_path, text, "edited.yaml"))
    assert chained.model.hash == edited.hash != load_model(tmp_path / "nominal.yaml").hash
    # the overrides through load_model_file's keyword work the same
    same = load_model(tmp_path / "nominal.yaml", overrides={"masses": {"mass2": {"mass": 0.6}}})
    assert same.masses["mass2"][0] == 0.6


def test_overridden_damping_replaces_the_base_value(tmp_path):
    """A free pendulum swing loses energy at the rate c·θ̇²: the overriding coefficient, not the sum."""
    base = write(tmp_path, """
        name: p
        frames:
          - {name: a, parent: world, transform: rx, config: q}
          - {name: b, parent: a, transform: tz, value: -1.0, mass: 1.0}
        damping: {q: 0.1}
    """, "p.yaml")
    variant = write(tmp_path, "name: p2\nbase: p.yaml\noverrides: {damping: {q: 0.3}}\n", "p2.yaml")

    def power(path):   # dE/dt at rest position with unit speed, from one short step
        m = load_model(path)
        s = _core.DiscreteSystem(m, 1e-5)
        x = np.array([0.0, 1.0])   # q = 0, p = 1 (m l² = 1: q̇ = 1)
        x1 = s.step(x, np.zeros(0))[0]
        return (m.energy(x1[:1], x1[1:]) - m.energy(x[:1], x[1:])) / 1e-5

    assert abs(power(variant) / power(base) - 3.0) < 1e-3


@pytest.mark.parametrize("overrides, pattern", [
    ("masses: {ghost: {mass: 1}}",
     r"overrides.masses.ghost: 'ghost' is neither a URDF link with an <inertial> nor a frame with a mass"),
    ("masses: {a: {mass: 1}}", r"overrides.masses.a: frames\[0\] has no mass to override"),
    ("masses: {b: {mass: -1}}", r"overrides.masses.b.mass: must be >= 0"),
    ("masses: {b: {center_of_mass: [0, 0, 1]}}", r"overrides.masses.b: a frame's mass sits at the frame's origin"),
    ("masses: {b: {inertia: [1, 2, 3, 4, 5, 6]}}", r"overrides.masses.b: a frame's inertia is its three principal"),
    ("masses: {b: {colour: red}}", r"overrides.masses.b.colour: unknown key"),
    ("placements: {a: {value: 1}}", r"overrides.placements.a: frames\[0\] is driven by configuration 'q'"),
    ("placements: {b: {translation: [0, 0, 1]}}", r"overrides.placements.b: frames\[1\] is a constant primitive"),
    ("placements: {ghost: {value: 1}}", r"overrides.placements.ghost: 'ghost' is neither a URDF link nor a frame"),
    ("damping: {k: 0.1}", r"overrides.damping.k: 'k' is not a dynamic configuration"),
    ("damping: {q: -1}", r"overrides.damping.q: must be >= 0"),
    ("springs: {s: 1}", r"overrides.springs: unknown key"),
])
def test_invalid_overrides_name_the_key(tmp_path, overrides, pattern):
    write(tmp_path, BASE + "kinematic: [k]\n", "base.yaml")
    p = write(tmp_path, f"name: v\nbase: base.yaml\noverrides: {{{overrides}}}\n", "variant.yaml")
    with pytest.raises(ModelFileError, match=pattern) as info:
        load_model(p)
    assert str(info.value).startswith(str(p) + ": ")


def test_invalid_bases_and_urdf_overrides(tmp_path):
    write(tmp_path, "name: a\nbase: b.yaml\n", "a.yaml")
    write(tmp_path, "name: b\nbase: a.yaml\n", "b.yaml")
    with pytest.raises(ModelFileError, match=r"b.yaml: base: 'a.yaml' is this file or one of its bases \(a cycle\)"):
        load_model(tmp_path / "a.yaml")
    with pytest.raises(ModelFileError, match=r"missing.yaml: cannot read"):
        load_model(write(tmp_path, "name: c\nbase: missing.yaml\n", "c.yaml"))
    arm = config_file("marionette_arm.yaml")
    for overrides, pattern in [
        ("masses: {hook: {mass: 1}}", r"overrides.masses.hook: URDF link 'hook' has no <inertial>"),
        ("masses: {forearm: {inertia: [1, 1]}}", r"overrides.masses.forearm.inertia: expected a list of 3 numbers"),
        ("masses: {forearm: {inertia: [1, 0.5, 0.5, 1, 0.5, -1]}}", r"must be positive semi-definite"),
        ("placements: {base_link: {translation: [0, 0, 1]}}", r"'base_link' is the URDF's root link"),
        ("placements: {hook: {value: 1}}", r"URDF link 'hook' hangs from joint 'hook_mount'"),
        ("damping: {carriage: 0.1}", r"overrides.damping.carriage: 'carriage' is not a dynamic configuration"),
    ]:
        p = write(tmp_path, f"name: v\nbase: {arm}\noverrides: {{{overrides}}}\n", "v.yaml")
        with pytest.raises(ModelFileError, match=pattern):
            load_model(p)
    with pytest.raises(ModelFileError, match="override 'base' is not a model-file key"):
        load_model(arm, base="x.yaml")
