"""Dynamic embedding and string relaxation (thesis §6.6): model variants, trajectory maps, staged runs."""

import numpy as np
import pytest

from marionette_control import _core
from marionette_control.model import library
from marionette_control.ocp.cost import tracking_cost
from marionette_control.ocp.terms import Point
from marionette_control.ocp.embedding import (
    EmbeddingError,
    EmbeddingOptions,
    RelaxationOptions,
    embed,
    project_onto,
    relax_strings,
    run_dynamic_embedding,
    run_string_relaxation,
)
from marionette_control.ocp.projection import OptimizerOptions, ProjectionOptimizer
from marionette_control.ocp.tracking_problem import hold_inputs
from marionette_control.model import SystemBuilder


# --------------------------------------------------------------------------------------------- models


def string_arm():
    """A two-link arm held by one string from its forearm to a carriage on a rail (like §6.7.2)."""
    b = SystemBuilder("string_arm", gravity=(0, 0, -9.81))
    b.frame("upper", "world", "rx", config="shoulder")
    b.frame("upper_mass", "upper", "tz", value=-0.15, mass=0.2, inertia=(1.5e-3, 1.5e-3, 1e-4))
    b.frame("elbow_frame", "upper", "tz", value=-0.3)
    b.frame("fore", "elbow_frame", "rx", config="elbow")
    b.frame("fore_mass", "fore", "tz", value=-0.15, mass=0.15, inertia=(1e-3, 1e-3, 1e-4))
    b.frame("hook", "fore", "tz", value=-0.2)
    b.const_frame("rail", "world", translation=(0, 0, 0.55))
    b.frame("carriage_frame", "rail", "ty", config="carriage", kinematic=True)
    b.config("string_length", kinematic=True)
    b.damping(["shoulder", "elbow"], 0.02)
    b.distance_constraint("hook", "carriage_frame", "string_length", name="string")
    return b.build()


def force_cart_pendulum():
    return library.get("cart_pendulum", kinematic_cart=False, cart_mass=10.0, damping=0.01)


THETA = 1  # state order of the force-driven cart pendulum: cart, theta, p_cart, p_theta


def arm_start(model, dt):
    """A consistent configuration of the string arm with the string pulling up, and its rest state."""
    q = np.array([0.3, 0.5, 0.0, 0.0])
    g = model.placements(q)
    q[2] = g[model.frame_index("hook"), 1, 3] + 0.05
    g = model.placements(q)
    q[3] = np.linalg.norm(g[model.frame_index("hook"), :3, 3] - g[model.frame_index("carriage_frame"), :3, 3])
    return q, _core.DiscreteSystem(model, dt).state_from_configs(q, q)


# --------------------------------------------------------------------------------------------- embedding


def test_embedding_adds_one_force_per_dynamic_configuration_and_keeps_the_states():
    emb = embed(library.get("double_pendulum"))
    assert emb.fictitious_inputs == ("theta1_fictitious", "theta2_fictitious")
    assert emb.embedded.discrete_input_names == ["torque1", "torque2", "theta1_fictitious", "theta2_fictitious"]
    assert emb.embedded.state_names == emb.original.state_names
    assert emb.embedded.name == emb.original.name and emb.embedded.hash != emb.original.hash
    U = np.arange(6.0).reshape(3, 2)
    Ue = emb.to_variant(U, extra=np.full((3, 2), 7.0))
    np.testing.assert_array_equal(emb.to_original(Ue), U)
    np.testing.assert_array_equal(emb.extra(Ue), np.full((3, 2), 7.0))


def test_fictitious_force_acts_as_a_generalized_force_on_its_configuration():
    # The pendulum's own torque input and the fictitious torque on theta enter identically.
    emb = embed(library.get("pendulum"))
    dt, N = 0.01, 150
    u = 2.0 * np.sin(np.linspace(0, 3, N))[:, None]
    x0 = np.array([0.2, 0.0])
    X_orig, _ = _core.DiscreteSystem(emb.original, dt).simulate(x0, u)
    X_emb, _ = _core.DiscreteSystem(emb.embedded, dt).simulate(x0, emb.to_variant(np.zeros((N, 1)), extra=u))
    np.testing.assert_allclose(X_emb, X_orig, rtol=0, atol=1e-12)
    assert np.abs(X_orig[:, 0] - X_orig[0, 0]).max() > 0.1  # the force did move it


def test_embedding_rejects_kinematic_unknown_and_clashing_configurations():
    with pytest.raises(EmbeddingError, match="'cart' is kinematic"):
        embed(library.get("cart_pendulum"), configs=["cart"])
    with pytest.raises(EmbeddingError, match="'nope' is not a configuration"):
        embed(library.get("pendulum"), configs=["nope"])
    with pytest.raises(EmbeddingError, match="already has input"):
        embed(_pendulum_with_input("theta_fictitious"))


def _pendulum_with_input(name):
    b = SystemBuilder("p")
    b.frame("arm", "world", "rx", config="theta")
    b.frame("bob", "arm", "tz", value=-1.0, mass=1.0)
    b.config_force("theta", input=name)
    return b.build()


def test_variants_of_a_urdf_and_yaml_model_leave_the_model_untouched():
    # The hardware arm is described by a URDF and a YAML file, not through SystemBuilder calls.
    arm = library.get("marionette_arm")
    rel = relax_strings(arm)
    emb = embed(rel.relaxed)
    assert rel.relaxed.nc == 0 and [s.name for s in rel.strings] == ["string"]
    assert (rel.strings[0].hook, rel.strings[0].control, rel.strings[0].carriage) == ("hook", "carriage",
                                                                                        ("carriage",))
    assert emb.embedded.discrete_input_names == ["string_fx", "string_fy", "string_fz", "shoulder_fictitious",
                                                 "elbow_fictitious", "carriage_next", "string_length_next"]
    assert arm.constraint_names == ["string"] and arm.discrete_input_names == ["carriage_next", "string_length_next"]
    assert arm.hash == library.get("marionette_arm").hash


def test_variant_cost_puts_the_weight_on_the_fictitious_inputs_only():
    emb = embed(library.get("double_pendulum"))
    cost = tracking_cost(np.zeros((3, 4)), np.ones((2, 2)), np.ones(4), np.array([2.0, 3.0]))
    vc = emb.variant_cost(cost, 50.0)
    d = vc.calc_diff(vc.create_data(), Point(np.zeros((3, 4)), np.zeros((2, 4))))
    np.testing.assert_array_equal(d.Luu, np.diag([2.0, 3.0, 50.0, 50.0]))
    Ud = vc.reference()[1]
    np.testing.assert_array_equal(Ud[:, :2], 1.0)
    np.testing.assert_array_equal(Ud[:, 2:], 0.0)


def cart_problem(N=1000, dt=0.01, amp=np.radians(130)):
    """The reference implementation's pendulum-on-a-cart problem (thesis §6.7.1)."""
    t = dt * np.arange(N + 1)
    Xd = np.zeros((N + 1, 4))
    bump = (t >= 3) & (t <= 7)
    Xd[bump, THETA] = (1 - np.cos(2 * np.pi / 4 * (t[bump] - 3))) * amp / 2
    w = np.full(4, 0.01)
    w[THETA] = 100.0
    return tracking_cost(Xd, np.zeros((N, 1)), w, [0.01]), dt


def test_dynamic_embedding_crosses_the_singularity_that_stops_direct_optimization():
    model = force_cart_pendulum()
    assert model.state_names[THETA] == "theta"
    cost, dt = cart_problem()
    system = _core.DiscreteSystem(model, dt)
    x0 = np.zeros(4)
    U0 = hold_inputs(model, x0, cost.N)

    # Direct: from the hanging pendulum the optimizer converges below the horizontal (thesis §6.7.1).
    direct = ProjectionOptimizer(system, cost, OptimizerOptions(max_iterations=60)).optimize(
        system.simulate(x0, U0)[0], U0)
    assert direct.converged and np.degrees(direct.X[:, THETA].max()) < 90.0

    seen = []
    init = run_dynamic_embedding(embed(model), dt, cost, x0,
                                 callback=lambda stage, rec: seen.append(stage))
    assert init.unused and init.reason == "fictitious forces unused"
    weights = [s.extra_weight for s in init.stages]
    forces = [s.max_extra for s in init.stages]
    assert weights == [1e-2, 1e2, 1e6] and forces[-1] <= 1e-3 and forces[0] > 1.0
    assert all(b < a for a, b in zip(forces, forces[1:]))   # raising the weight retires the forces
    assert len(set(seen)) == 3
    # The result is a feasible trajectory of the original model from x0 ...
    np.testing.assert_array_equal(init.X[0], x0)
    np.testing.assert_allclose(system.simulate(x0, init.U)[0], init.X, rtol=0, atol=1e-8)
    # ... from which the original problem converges past the horizontal, far below the direct optimum.
    final = ProjectionOptimizer(system, cost, OptimizerOptions(max_iterations=60)).optimize(init.X, init.U)
    assert final.converged and np.degrees(final.X[:, THETA].max()) > 120.0
    assert final.cost < 0.6 * direct.cost


def test_dynamic_embedding_returns_a_feasible_trajectory_at_the_deadline():
    model = force_cart_pendulum()
    cost, dt = cart_problem(N=600)
    init = run_dynamic_embedding(embed(model), dt, cost, np.zeros(4),
                                 EmbeddingOptions(weights=[1e-2, 1e2]), deadline=1e-3)
    assert not init.unused and init.reason == "deadline"
    system = _core.DiscreteSystem(model, dt)
    np.testing.assert_allclose(system.simulate(np.zeros(4), init.U)[0], init.X, rtol=0, atol=1e-8)


@pytest.mark.parametrize("bad, message", [
    (dict(weights=[]), "non-empty"), (dict(weights=[1.0, 1.0]), "increase"), (dict(weights=[-1.0]), "positive"),
    (dict(unused_tolerance=0.0), "unused_tolerance"), (dict(start="sideways"), "start"),
])
def test_embedding_options_are_checked(bad, message):
    with pytest.raises(ValueError, match=message):
        EmbeddingOptions(**bad)


# --------------------------------------------------------------------------------------------- relaxation


def test_relaxation_replaces_the_string_by_a_wrench_on_the_hook():
    rel = relax_strings(string_arm())
    (s,) = rel.strings
    assert (s.name, s.hook, s.control, s.length, s.carriage) == ("string", "hook", "carriage_frame",
                                                                  "string_length", ("carriage",))
    assert rel.relaxed.nc == 0 and rel.original.nc == 1
    assert rel.relaxed.discrete_input_names == ["string_fx", "string_fy", "string_fz", "carriage_next",
                                                "string_length_next"]
    assert rel.relaxed.state_names == rel.original.state_names


def _forces_along_strings(rel, X, strings_frames, scale=5.0):
    """Wrench inputs of the relaxed model that pull each hook along its string at every configuration."""
    m = rel.original
    Ur = np.zeros((X.shape[0] - 1, rel.relaxed.nU))
    names = rel.relaxed.discrete_input_names
    for k in range(X.shape[0] - 1):
        g = m.placements(X[k, :m.nq])
        for s in rel.strings:
            d = g[m.frame_index(s.control), :3, 3] - g[m.frame_index(s.hook), :3, 3]
            cols = [names.index(i) for i in s.inputs]
            Ur[k, cols] = g[m.frame_index(s.hook), :3, :3].T @ d * scale
    return Ur


def test_restoring_forces_along_the_string_recovers_carriage_and_length_exactly():
    rel = relax_strings(string_arm())
    m = rel.original
    dt, N = 0.01, 120
    q, x0 = arm_start(m, dt)
    system = _core.DiscreteSystem(m, dt)
    U = np.tile(q[2:], (N, 1))
    U[:, 0] += 0.1 * np.sin(np.arange(N) * dt * 3)
    U[:, 1] -= 0.05 * np.sin(np.arange(N) * dt * 2)
    X, _ = system.simulate(x0, U)
    Xc, Uc = rel.restore(X, _forces_along_strings(rel, X, None), dt)
    # Every configuration but the last (whose force is the previous step's) comes back exactly.
    np.testing.assert_allclose(Xc[:-1, :m.nq], X[:-1, :m.nq], rtol=0, atol=1e-9)
    np.testing.assert_allclose(Uc[:-1], U[:-1], rtol=0, atol=1e-9)
    for k in range(N + 1):
        assert abs(m.constraints(Xc[k, :m.nq])[0][0]) < 1e-12


def test_restore_on_the_humanoid_with_six_strings_and_planar_carriages():
    rel = relax_strings(library.get("humanoid_marionette"))
    assert len(rel.strings) == 6 and rel.relaxed.nc == 0
    assert all(len(s.carriage) == 2 for s in rel.strings)          # x and y of each string's top point
    from marionette_control.model.library import humanoid_marionette as hm

    m = rel.original
    dt, N = 0.01, 15
    q0 = hm.initial_configuration(m)
    X, _ = _core.DiscreteSystem(m, dt).simulate(_core.DiscreteSystem(m, dt).state_from_configs(q0, q0),
                                                hm.string_walk_inputs(m, q0, dt, N))
    Xc, _ = rel.restore(X, _forces_along_strings(rel, X, None, scale=20.0), dt)
    np.testing.assert_allclose(Xc[:-1, :m.nq], X[:-1, :m.nq], rtol=0, atol=1e-8)


def test_restore_keeps_the_carriage_where_the_force_would_need_a_string_to_push():
    rel = relax_strings(string_arm())
    m = rel.original
    dt = 0.01
    q, x0 = arm_start(m, dt)
    X = np.tile(x0, (3, 1))
    Ur = _forces_along_strings(rel, X, None)
    Ur[1, :3] *= -1.0                                    # pushing: no carriage position realizes it
    Xc, _ = rel.restore(X, Ur, dt)
    assert Xc[1, 2] == pytest.approx(Xc[0, 2], abs=1e-12)
    assert abs(m.constraints(Xc[1, :m.nq])[0][0]) < 1e-12
    Xb, _ = rel.restore(X, _forces_along_strings(rel, X, None), dt, bounds={"carriage": (-1.0, q[2] - 0.01)})
    assert Xb[1, 2] == pytest.approx(q[2] - 0.01)       # clipped to the actuator range


def test_string_relaxation_gives_a_feasible_start_near_the_optimum():
    rel = relax_strings(string_arm())
    m = rel.original
    dt, N = 0.01, 200
    q, x0 = arm_start(m, dt)
    system = _core.DiscreteSystem(m, dt)
    t = dt * np.arange(N + 1)
    Ud = np.tile(q[2:], (N, 1))
    Ud[:, 0] += 0.15 * np.sin(np.pi * t[1:] / t[-1])
    Ud[:, 1] -= 0.1 * np.sin(np.pi * t[1:] / t[-1]) ** 2
    Xd = np.zeros((N + 1, m.nx))
    Xd[:, :2] = system.simulate(x0, Ud)[0][:, :2]       # a reachable arm motion; the rest of x_d is 0
    w = np.full(m.nx, 0.01)
    w[:2] = 100.0
    cost = tracking_cost(Xd, np.zeros((N, m.nU)), w, np.full(m.nU, 0.01))

    init = run_string_relaxation(rel, dt, cost, x0)
    np.testing.assert_array_equal(init.X[0], x0)
    assert max(abs(m.constraints(init.X[k, :m.nq])[0][0]) for k in range(N + 1)) < 1e-9
    np.testing.assert_allclose(system.simulate(x0, init.U)[0], init.X, rtol=0, atol=1e-8)
    U_const = hold_inputs(m, x0, N)
    c_const = cost.value(system.simulate(x0, U_const)[0], U_const)
    c_relax = cost.value(init.X, init.U)
    assert c_relax < 0.01 * c_const
    final = ProjectionOptimizer(system, cost, OptimizerOptions(max_iterations=40)).optimize(init.X, init.U)
    assert final.converged and final.cost <= c_relax


def test_relaxation_with_embedding_builds_both_variants():
    rel = relax_strings(string_arm())
    emb = embed(rel.relaxed)
    assert emb.embedded.nc == 0
    assert emb.embedded.discrete_input_names == ["string_fx", "string_fy", "string_fz", "shoulder_fictitious",
                                                 "elbow_fictitious", "carriage_next", "string_length_next"]
    m = rel.original
    dt, N = 0.01, 60
    q, x0 = arm_start(m, dt)
    Xd = np.tile(x0, (N + 1, 1))
    Xd[:, 0] += np.linspace(0, 0.2, N + 1)
    w = np.full(m.nx, 0.01)
    w[:2] = 100.0
    cost = tracking_cost(Xd, np.tile(q[2:], (N, 1)), w, np.full(m.nU, 0.01))
    opts = RelaxationOptions(embedding=EmbeddingOptions(weights=[1e-2, 1e4], unused_tolerance=1e-2),
                             optimizer=OptimizerOptions(max_iterations=20))
    init = run_string_relaxation(rel, dt, cost, x0, opts)
    assert [s.stage for s in init.stages][-1] == "relaxed strings"
    assert len(init.stages) >= 2
    assert max(abs(m.constraints(init.X[k, :m.nq])[0][0]) for k in range(N + 1)) < 1e-9


def test_relaxation_errors_name_the_string():
    with pytest.raises(EmbeddingError, match="no string"):
        relax_strings(library.get("pendulum"))
    with pytest.raises(EmbeddingError, match="no string named rope"):
        relax_strings(string_arm(), strings=["rope"])


def test_projection_failure_is_reported_with_what_was_projected():
    model = string_arm()
    q, x0 = arm_start(model, 0.01)
    X = np.tile(x0, (3, 1))
    U = np.tile(q[2:], (2, 1))
    U[:, 0] += 5.0                                     # the carriage jumps 5 m in one step
    with pytest.raises(EmbeddingError, match="projecting the guess onto model 'string_arm' failed: midpoint VI step"):
        project_onto(_core.DiscreteSystem(model, 0.01), x0, X, U, "the guess")


FOUR_BAR = """\
name: four_bar
gravity: [0, 0, -9.81]
frames:
  - {name: link1, parent: world, transform: rx, config: theta1}
  - {name: mass1, parent: link1, transform: tz, value: -1.0, mass: 1.0}
  - {name: link2, parent: mass1, transform: rx, config: theta2}
  - {name: mass2, parent: link2, transform: tz, value: -1.0, mass: 1.0}
  - {name: anchor, parent: world, translation: [0, 1.0, -1.0]}
strings:
  - {name: rod, from: mass2, to: anchor, length: 1.4142135623730951}
damping: {theta1: 0.2, theta2: 0.2}
forces:
  - {config: theta1, input: torque}
"""


def test_constraint_penalty_relaxes_a_closed_chain_and_projects_back(tmp_path):
    """Thesis §6.6.2: a closed kinematic chain (a four-bar linkage: a double pendulum whose tip is tied to the
    ground by a rod) optimized with the rod replaced by ½ w Σ h², w raised until |h| is negligible, then
    projected onto the linkage: the stages' constraint errors fall, the projected trajectory keeps the rod
    exactly, and the final optimization converges to the optimum it reaches from a simulation."""
    from marionette_control.ocp.spec import load_spec
    from marionette_control.ocp.spec_problem import solve_spec

    (tmp_path / "four_bar.yaml").write_text(FOUR_BAR)
    spec = tmp_path / "spec.yaml"
    base = ("model: {file: four_bar.yaml}\ndt: 0.02\nmotion: {joints: [theta1], keyframes: [[0, 0], [0.6, 0.4], "
            "[1.2, 0.4]], interpolation: cosine}\nweights: {state: {default: 0.01, theta1: 100}, input: {torque: "
            "0.01}}\n")
    spec.write_text(base + "initial_trajectory: {method: penalty, penalty: {constraints: [rod], weights: [1.0e+2, "
                           "1.0e+4, 1.0e+6, 1.0e+8], error_tolerance: 1.0e-4}}\n")
    res = solve_spec(load_spec(spec))
    stages = res.trajectory.info["stages"]
    errors = [s["max_constraint_error"] for s in stages]
    assert stages[0]["stage"].startswith("penalty 1/4") and errors == sorted(errors, reverse=True)
    assert errors[-1] <= 1e-4 < errors[0] and len(errors) == 4   # |h| falls about as 1/w
    m = res.problem.model
    assert max(abs(m.constraints(x[:m.nq])[0][0]) for x in res.trajectory.X) < 1e-9
    assert res.result.converged
    spec.write_text(base)
    plain = solve_spec(load_spec(spec))
    assert plain.result.converged
    assert res.result.cost == pytest.approx(plain.result.cost, rel=1e-6)
