"""Invalid models, wrong array shapes, NaN inputs and non-convergence each raise a specific error."""

import numpy as np
import pytest

from marionette_control import _core
from marionette_control.model import library
from marionette_control.model import SystemBuilder


def pendulum_builder():
    b = SystemBuilder("p")
    b.frame("arm", "world", "rx", config="theta")
    b.frame("bob", "arm", "tz", value=-1.0, mass=1.0)
    return b


@pytest.mark.parametrize("mutate, message", [
    (lambda b: b.frame("x", "nowhere", "rx", config="a"), "unknown parent frame 'nowhere'"),
    (lambda b: b.frame("arm", "world", "ry", config="b"), "frame 'arm' is defined twice"),
    (lambda b: b.frame("x", "bob", "ry", config="theta"), "configuration 'theta' drives two frames"),
    (lambda b: b.frame("x", "bob", "rz", config="spin"), "dynamic configuration 'spin' moves no mass"),
    (lambda b: b.config("free"), "dynamic configuration 'free' drives no frame"),
    (lambda b: b.damping("nope", 0.1), "unknown configuration 'nope'"),
    (lambda b: b.distance_constraint("bob", "ghost", 1.0), "unknown frame 'ghost'"),
    (lambda b: b.distance_constraint("bob", "bob", 1.0), "joins frame 'bob' to itself"),
    (lambda b: b.config("rho", kinematic=True).damping("rho", 0.1), "damping on kinematic configuration 'rho'"),
    (lambda b: b.config("rho", kinematic=True).config_force("rho"), "acts on kinematic configuration 'rho'"),
    (lambda b: b.coupling_constraint("theta", "ghost"), "coupling constraint 'theta_coupling': unknown configuration "
                                                        "'ghost'"),
    (lambda b: b.config("rho", kinematic=True).coupling_constraint("rho", "theta"),
     "coupling constraint 'rho_coupling': the follower 'rho' must be a dynamic configuration"),
    (lambda b: b.frame("x", "world", "ry", config="spin").frame("y", "world", "rz", config="spun")
     .coupling_constraint("spun", "spin"),
     "dynamic configuration 'spin' moves no mass .*, nor does any configuration coupled to it"),
])
def test_invalid_models_are_rejected_with_the_offending_name(mutate, message):
    b = pendulum_builder()
    with pytest.raises(ValueError, match=message):
        mutate(b)
        b.build()


@pytest.mark.parametrize("call, message", [
    (lambda: pendulum_builder().frame("x", "bob", "rw", config="a"), "transform must be one of"),
    (lambda: pendulum_builder().mass("bob", 1.0), "already has a mass"),
    (lambda: pendulum_builder().mass("arm", -1.0), "must be >= 0"),
    (lambda: pendulum_builder().mass("arm", float("nan")), "must be a finite number"),
    (lambda: pendulum_builder().distance_constraint("bob", "world", 0.0), "fixed length must be > 0"),
    (lambda: pendulum_builder().const_frame("c", "bob", rotation=np.ones((3, 3))), "not a proper rotation"),
    (lambda: pendulum_builder().damping("theta", -0.5), "must be >= 0"),
    (lambda: pendulum_builder().coupling_constraint("theta", "theta"), "couples configuration 'theta' to itself"),
    (lambda: pendulum_builder().coupling_constraint("theta", "a", float("inf")), "multiplier of coupling constraint "
                                                                                 "'theta_coupling' must be a finite"),
    (lambda: SystemBuilder("g", gravity=(0, 0)), "gravity must have 3 entries"),
])
def test_invalid_builder_calls_raise_immediately(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_more_constraints_than_dynamic_configurations_is_rejected():
    b = pendulum_builder()
    b.distance_constraint("bob", "world", 1.0, name="c1")
    b.plane_constraint("world", 1, "bob", name="c2")
    with pytest.raises(ValueError, match="2 constraints but only 1 dynamic"):
        b.build()


@pytest.fixture(scope="module")
def pendulum_system():
    return _core.DiscreteSystem(library.get("pendulum"), 0.1)


def test_wrong_shapes_name_the_expected_shape(pendulum_system):
    with pytest.raises(ValueError, match=r"x \(state \[q; p; v\] of model 'pendulum'\) has shape \(3,\), expected \(2,\)"):
        pendulum_system.step(np.zeros(3), np.zeros(1))
    with pytest.raises(ValueError, match=r"u .* has shape \(1, 1\), expected \(1,\)"):
        pendulum_system.step(np.zeros(2), np.zeros((1, 1)))
    with pytest.raises(ValueError, match=r"X \(states, N\+1 rows"):
        pendulum_system.linearize_trajectory(np.zeros((3, 2)), np.zeros((3, 1)))


def test_nan_inputs_are_rejected_by_name(pendulum_system):
    with pytest.raises(ValueError, match=r"u .* contains nan .*\['torque'\]"):
        pendulum_system.step(np.zeros(2), np.array([np.nan]))
    with pytest.raises(ValueError, match=r"x0 .* contains inf .*\['p_theta'\]"):
        pendulum_system.simulate(np.array([0.0, np.inf]), np.zeros((2, 1)))


def test_non_convergence_raises_step_error_with_details():
    system = _core.DiscreteSystem(library.get("pendulum"), 0.1, tolerance=1e-10, max_iterations=1)
    with pytest.raises(_core.StepError, match="midpoint VI step 0 failed \\(no_convergence\\)") as info:
        system.step(np.array([0.2, 50.0]), np.array([0.8]))
    assert info.value.reason == "no_convergence"
    assert info.value.step == 0 and info.value.iterations == 1 and info.value.residual > 1e-10


def test_singular_constraint_matrix_is_diagnosed():
    # A string of fixed length pulled straight along the direction the bob cannot move:
    # at theta = 0 the distance constraint's gradient with respect to theta vanishes.
    b = pendulum_builder()
    b.frame("anchor", "world", "tz", value=-2.0)
    b.distance_constraint("bob", "anchor", 1.0, name="string")
    system = _core.DiscreteSystem(b.build(), 0.01)
    with pytest.raises(_core.StepError) as info:
        system.step(np.array([0.0, 0.5]), np.zeros(0))
    assert info.value.reason == "singular_constraint_matrix"
    assert "Dh(q_{k+1}) M^-1 Dh(q_k)^T is singular" in str(info.value)


def test_invalid_integrator_options():
    with pytest.raises(ValueError, match="dt must be finite and > 0"):
        _core.DiscreteSystem(library.get("pendulum"), 0.0)
    with pytest.raises(ValueError, match="tolerance must be finite and > 0"):
        _core.MidpointVI(library.get("pendulum"), 0.1, tolerance=-1.0)


def test_unknown_model_name_lists_the_available_ones():
    with pytest.raises(KeyError, match="unknown model 'robot'; available: .*humanoid_marionette.*pendulum"):
        library.get("robot")


def test_step_before_initialization_is_an_error():
    vi = _core.MidpointVI(library.get("pendulum"), 0.1)
    with pytest.raises(RuntimeError, match="before initialize"):
        vi.step(np.zeros(1), np.zeros(0))


def test_singular_mass_matrix_is_diagnosed():
    # A point mass on the axis of its own rotation has no inertia about it.
    b = SystemBuilder("spinner")
    b.frame("spin", "world", "rz", config="phi")
    b.frame("bob", "spin", "tz", value=-1.0, mass=1.0)
    system = _core.DiscreteSystem(b.build(), 0.01)
    with pytest.raises(_core.StepError) as info:
        system.step(np.array([0.0, 0.3]), np.zeros(0))
    assert info.value.reason == "singular_mass_matrix"
    assert "M_{k+1} = D2D1Ld + D2f- is singular" in str(info.value)
