"""marionette_simulator: the actuator model and integration without ROS, then the node across processes.

The cross-process tests share one simulator process (module fixture, publish_clock on) and
one in-process probe node, each on an isolated graph (test/ros_helpers.py); every test that
depends on the arm's state starts with the reset service. The process is stopped by the
fixture (SIGINT, then SIGTERM, SIGKILL).
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from marionette_control import _core
from marionette_control.models import marionette_arm as arm
from marionette_control.nodes.params import ParameterError

rclpy = pytest.importorskip("rclpy", reason="ROS 2 Python stack not installed (requirements/ros.txt or a ROS install)")

from marionette_control.nodes import simulator as simmod  # noqa: E402
from ros_helpers import isolated_ros, node_processes, ros_env, start_node, stop, wait_for  # noqa: E402,F401

DT = 0.01
CARRIAGE_VMAX, STRING_VMAX = 2.0, 1.5  # config/marionette_arm.yaml


def defaults(**overrides) -> dict:
    values = {p.name: (list(p.default) if isinstance(p.default, list) else p.default) for p in simmod.PARAMETERS}
    values.update(overrides)
    return values


@pytest.fixture(scope="module")
def arm_system():
    desc = arm.load_description()
    return desc, _core.DiscreteSystem(desc.model, DT)


# ============================================================================ without ROS


def test_actuator_rate_and_range_limits_and_exact_reachable_targets(arm_system):
    desc, _ = arm_system
    act = simmod.ActuatorModel.from_description(desc)
    np.testing.assert_array_equal(act.max_velocity, [CARRIAGE_VMAX, STRING_VMAX])
    rho, v = np.array([0.1, 0.5]), np.zeros(2)
    far = act.next_positions(rho, v, np.array([0.8, 0.2]), DT)
    np.testing.assert_allclose(far, rho + [CARRIAGE_VMAX * DT, -STRING_VMAX * DT], rtol=0, atol=1e-15)
    near = np.array([0.1 + 0.0123, 0.5 - 0.0077])
    assert np.array_equal(act.next_positions(rho, v, near, DT), near), "a reachable target is applied exactly"
    edge = act.next_positions(np.array([0.895, 1.099]), v, np.array([5.0, 5.0]), DT)
    np.testing.assert_array_equal(edge, [0.9, 1.1])  # range applied last
    assert act.saturate(np.array([-1.0, 9.0])).tolist() == [-0.3, 1.1]


def test_acceleration_limit_ramps_up_and_stops_at_the_target(arm_system):
    desc, _ = arm_system
    act = simmod.ActuatorModel.from_description(desc, limit_acceleration=True)
    rho, v, target = np.array([0.0, 0.5]), np.zeros(2), np.array([0.5, 0.5])
    traj = [rho]
    for _ in range(200):
        nxt = act.next_positions(rho, v, target, DT)
        v_new = (nxt - rho) / DT
        assert np.all(np.abs(v_new - v) <= act.max_acceleration * DT + 1e-9)
        assert np.all(np.abs(v_new) <= act.max_velocity + 1e-9)
        rho, v = nxt, v_new
        traj.append(rho)
    traj = np.array(traj)
    assert traj[:, 0].max() <= 0.5 + 1e-3, "no overshoot beyond a millimetre"
    assert abs(rho[0] - 0.5) < 1e-9 and abs(v[0]) < 1e-6


def test_simulation_keeps_the_discrete_rest_state_exactly(arm_system):
    desc, system = arm_system
    q0 = arm.static_equilibrium(desc.model, *arm.LOWERED).q
    sim = simmod.Simulation(system, q0, simmod.ActuatorModel.from_description(desc))
    for _ in range(300):
        assert sim.step() is None
    np.testing.assert_allclose(sim.x, sim.x0, rtol=0, atol=1e-12)


def _max_jump(states):
    Q = np.array(states)
    return np.abs(np.diff(Q[:, :2], axis=0)).max()


def test_infeasible_target_is_held_short_of_the_edge(arm_system):
    """A string commanded longer than the arm reaches: the step fails, the actuators hold, the run goes on."""
    desc, system = arm_system
    q0 = arm.static_equilibrium(desc.model, *arm.LOWERED).q
    act = simmod.ActuatorModel.from_description(desc)
    act.max_velocity = np.array([CARRIAGE_VMAX, 0.5])  # slow winch: holding works
    sim = simmod.Simulation(system, q0, act, on_step_error="hold")
    sim.set_target(np.array([q0[2], 1.1]))
    states, faults = [sim.q.copy()], []
    for _ in range(150):
        f = sim.step()
        faults += [f] if f else []
        states.append(sim.q.copy())
    assert faults and faults[0].action == "held" and "no_convergence" in faults[0].message
    assert sim.step_errors == len(faults)
    np.testing.assert_array_equal(sim.target, sim.rho)  # target replaced by where the actuators stopped
    assert q0[3] < sim.rho[1] < 1.1
    assert np.max(np.abs(desc.model.constraints(sim.q)[0])) < 1e-8, "the string constraint still holds"
    assert _max_jump(states) < 0.5


def test_spurious_roots_are_faults_and_recovery_keeps_the_state_plausible(arm_system):
    """At full winch speed Newton can 'converge' radians away near the stretched pose: never accepted."""
    desc, system = arm_system
    q0 = arm.static_equilibrium(desc.model, *arm.LOWERED).q
    for policy in ("hold", "reset"):
        sim = simmod.Simulation(system, q0, simmod.ActuatorModel.from_description(desc), on_step_error=policy)
        sim.set_target(np.array([q0[2], 1.1]))
        states, faults = [sim.q.copy()], []
        for _ in range(100):
            f = sim.step()
            faults += [f] if f else []
            states.append(sim.q.copy())
        assert faults, policy
        assert all(f.action in ("held", "backed_off", "reset") for f in faults)
        if policy == "reset":
            assert faults[0].action == "reset"
        resets = [i for i, q in enumerate(states) if i and np.array_equal(q, q0)]
        plausible = [np.abs(states[i][:2] - states[i - 1][:2]).max() < 0.5
                     for i in range(1, len(states)) if i not in resets]
        assert all(plausible), "no accepted step jumps by more than max_configuration_change"
        assert np.max(np.abs(desc.model.constraints(sim.q)[0])) < 1e-8


def test_measurement_queue_and_publish_period():
    q = simmod.MeasurementQueue()
    q.push(30, 0, [1.0])
    q.push(40, 10, [2.0])
    assert list(q.pop_due(29)) == []
    assert list(q.pop_due(35)) == [(0, [1.0])]
    assert list(q.pop_due(100)) == [(10, [2.0])] and len(q) == 0
    assert simmod.steps_per_period(100.0, 0.01) == 1 and simmod.steps_per_period(20.0, 0.01) == 5
    with pytest.raises(ValueError, match="whole number"):
        simmod.steps_per_period(30.0, 0.01)


@pytest.mark.parametrize("overrides, match", [
    (dict(publish_rate=30.0), "publish_rate.*whole number"),
    (dict(real_time_factor=2.0), "real_time_factor.*publish_clock"),
    (dict(command_joints=["carriage", "elbow"]), "command_joints.*carriage, string_length"),
    (dict(initial_pose="custom", initial_configuration=[0.0, 0.0]), "initial_configuration"),
    (dict(initial_pose="custom", initial_configuration=[0.0, 0.6, 0.1, 0.5]), "violates the constraints"),
    (dict(initial_pose="custom", initial_configuration=[0.1, 0.2, 0.3]), "must have 2 arm angles or 4 values"),
    (dict(model_file="no_such_model.yaml"), "model_file.*not found"),
])
def test_configuration_errors_name_the_parameter(overrides, match):
    with pytest.raises(ParameterError, match=match):
        simmod.configure(defaults(**overrides))
    with pytest.raises(ParameterError, match="use_sim_time.*publish_clock"):
        simmod.configure(defaults(), use_sim_time=True)


def test_custom_initial_angles_start_at_the_static_equilibrium():
    cfg = simmod.configure(defaults(initial_pose="custom", initial_configuration=list(arm.RAISED)))
    m = cfg.description.model
    np.testing.assert_allclose(cfg.q0, arm.static_equilibrium(m, *arm.RAISED).q)
    assert cfg.joint_names == ["shoulder", "elbow", "carriage", "string_length"]
    swapped = simmod.configure(defaults(command_joints=["string_length", "carriage"]))
    assert swapped.command_index.tolist() == [1, 0]


def test_parameters_are_declared_with_descriptions_and_refuse_bad_runtime_values():
    from rclpy.parameter import Parameter

    with isolated_ros():
        context = rclpy.context.Context()
        rclpy.init(context=context)
        try:
            node = simmod.SimulatorNode(context=context)
            try:
                for spec in simmod.PARAMETERS:
                    d = node.describe_parameter(spec.name)
                    assert d.description == spec.description and len(d.description) > 20
                assert not node.set_parameters([Parameter("noise_std", value=-1.0)])[0].successful
                assert not node.set_parameters([Parameter("dt", value=0.02)])[0].successful  # read-only
                r = node.set_parameters([Parameter("real_time_factor", value=3.0)])[0]
                assert not r.successful and "publish_clock" in r.reason
                assert node.set_parameters([Parameter("noise_std", value=0.01)])[0].successful
            finally:
                node.destroy_node()
            with pytest.raises(ParameterError, match="publish_rate"):
                simmod.SimulatorNode(context=context, parameter_overrides=[Parameter("publish_rate", value=30.0)])
        finally:
            context.try_shutdown()


# ============================================================================ across processes


class Probe:
    """In-process test node: records joint states, /clock and diagnostics; sends commands, resets, parameters."""

    def __init__(self, context):
        from diagnostic_msgs.msg import DiagnosticArray
        from rcl_interfaces.srv import SetParameters
        from rclpy.executors import SingleThreadedExecutor
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray
        from std_srvs.srv import Trigger

        self.node = rclpy.create_node("sim_probe", context=context)
        self.lock = threading.Lock()
        self.joint_states: list = []   # (wall time, stamp ns, names, positions)
        self.clock: list = []          # (wall time, clock ns)
        self.diagnostics: list = []    # {key: value}
        self.markers: list = []        # MarkerArray
        self.node.create_subscription(JointState, "/joint_states", self._js, 100)
        self.node.create_subscription(Clock, "/clock", self._clock, 100)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._diag, 10)
        from visualization_msgs.msg import MarkerArray

        self.node.create_subscription(MarkerArray, "/marionette_simulator/markers", self.markers.append, 10)
        self.cmd_pub = self.node.create_publisher(Float64MultiArray, "/forward_position_controller/commands", 10)
        self.reset_client = self.node.create_client(Trigger, "/marionette_simulator/reset")
        self.param_client = self.node.create_client(SetParameters, "/marionette_simulator/set_parameters")
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self):
        try:
            self.executor.spin()
        except Exception:  # shut down under us
            pass

    def _js(self, m):
        with self.lock:
            self.joint_states.append((time.monotonic(), m.header.stamp.sec * 10**9 + m.header.stamp.nanosec,
                                      list(m.name), np.array(m.position)))

    def _clock(self, m):
        with self.lock:
            self.clock.append((time.monotonic(), m.clock.sec * 10**9 + m.clock.nanosec))

    def _diag(self, m):
        for s in m.status:
            if s.name.startswith("marionette_simulator"):
                with self.lock:
                    self.diagnostics.append({kv.key: kv.value for kv in s.values})

    def states_since(self, t_wall):
        with self.lock:
            return [s for s in self.joint_states if s[0] >= t_wall]

    def latest(self):
        with self.lock:
            return self.joint_states[-1]

    def call(self, client, request, timeout=5.0):
        assert client.wait_for_service(timeout_sec=timeout), f"service {client.srv_name} not available"
        future = client.call_async(request)
        assert wait_for(future.done, timeout), f"no response from {client.srv_name}"
        return future.result()

    def reset(self):
        from std_srvs.srv import Trigger

        r = self.call(self.reset_client, Trigger.Request())
        assert r.success, r.message
        t = time.monotonic()
        assert wait_for(lambda: len(self.states_since(t)) >= 3, 5.0)
        return r

    def set_parameter(self, name, value):
        from rcl_interfaces.srv import SetParameters
        from rclpy.parameter import Parameter

        req = SetParameters.Request(parameters=[Parameter(name, value=value).to_parameter_msg()])
        return self.call(self.param_client, req).results[0]

    def command(self, values):
        from std_msgs.msg import Float64MultiArray

        self.cmd_pub.publish(Float64MultiArray(data=[float(v) for v in values]))

    def close(self):
        self.executor.shutdown()
        self.node.destroy_node()
        self.thread.join(timeout=5.0)


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """One simulator process (publish_clock, real-time factor 1) and a probe node on an isolated graph."""
    log = tmp_path_factory.mktemp("simulator") / "simulator.log"
    with isolated_ros() as env:
        proc = start_node("marionette_control.nodes.simulator",
                          ["--ros-args", "--params-file", str(simmod.config_file("simulator.yaml")),
                           "-p", "publish_clock:=true", "-p", "noise_seed:=7", "-p", "command_timeout:=0.0"],
                          env, log)
        context = rclpy.context.Context()
        rclpy.init(context=context)
        probe = Probe(context)
        try:
            ok = wait_for(lambda: len(probe.joint_states) > 5 or proc.poll() is not None, 20.0)
            assert ok and proc.poll() is None, f"simulator did not publish:\n{log.read_text()}"
            assert wait_for(lambda: probe.cmd_pub.get_subscription_count() > 0, 5.0)
            assert probe.node.count_publishers("/joint_states") == 1, (
                f"another /joint_states publisher on ROS_DOMAIN_ID {env['ROS_DOMAIN_ID']} (a concurrent test?)")
            yield probe, proc, log
        finally:
            probe.close()
            context.try_shutdown()
            code = stop(proc)
            assert code == 0, f"simulator exit status {code}:\n{log.read_text()}"


def test_joint_states_rate_names_and_stamps(sim):
    probe, _, _ = sim
    t = time.monotonic()
    time.sleep(1.0)
    msgs = probe.states_since(t)
    assert 70 <= len(msgs) <= 130, f"{len(msgs)} joint states in 1 s, expected about 100"
    assert all(m[2] == ["shoulder", "elbow", "carriage", "string_length"] for m in msgs)
    stamps = np.array([m[1] for m in msgs])
    assert np.all(np.diff(stamps) == 10_000_000), "consecutive stamps are exactly dt apart"
    # stamps are simulated time (publish_clock): they match the /clock published with them
    with probe.lock:
        clock_ns = {c[1] for c in probe.clock}
    assert set(stamps.tolist()) <= clock_ns


def test_command_moves_the_actuators_within_their_rate_limits_and_states_are_the_integrators(sim, arm_system):
    probe, _, _ = sim
    desc, system = arm_system
    probe.reset()
    q0 = probe.latest()[3]
    target = [q0[2] + 0.3, q0[3] - 0.1]
    t = time.monotonic()
    probe.command(target)
    assert wait_for(lambda: np.allclose(probe.latest()[3][2:], target, atol=1e-12), 5.0), probe.latest()
    time.sleep(0.3)  # let the arm swing
    msgs = probe.states_since(t)
    stamps = np.array([m[1] for m in msgs])
    assert np.all(np.diff(stamps) == 10_000_000), "no joint state lost"
    Q = np.array([m[3] for m in msgs])
    steps = np.abs(np.diff(Q[:, 2:], axis=0))
    assert steps[:, 0].max() <= CARRIAGE_VMAX * DT + 1e-12 and steps[:, 1].max() <= STRING_VMAX * DT + 1e-12
    assert steps[:, 0].max() > 0.9 * CARRIAGE_VMAX * DT, "the carriage moved at its rate limit"
    assert np.ptp(Q[:, 0]) > 1e-3, "the arm moved"
    # the published configurations are the integrator's: one step from the Legendre-transform state
    # x_k = [q_k; D2Ld(q_{k-1}, q_k); (rho_k - rho_{k-1})/dt] under u_k = rho_{k+1} gives q_{k+1}
    for k in range(1, len(Q) - 1):
        x = system.state_from_configs(Q[k - 1], Q[k])
        x_next, _, _ = system.step(x, Q[k + 1, 2:])
        np.testing.assert_allclose(x_next[:4], Q[k + 1], rtol=0, atol=1e-12)


def test_bad_commands_are_refused_and_the_node_keeps_serving(sim):
    probe, proc, log = sim
    probe.reset()
    q0 = probe.latest()[3]
    n_diag = len(probe.diagnostics)
    probe.command([q0[2] + 0.2])                    # wrong length
    probe.command([q0[2] + 0.2, float("nan")])      # NaN
    probe.command([float("inf"), q0[3]])            # inf
    time.sleep(0.3)
    np.testing.assert_array_equal(probe.latest()[3][2:], q0[2:])  # nothing moved
    assert wait_for(lambda: len(probe.diagnostics) > n_diag
                    and int(probe.diagnostics[-1]["commands_rejected"]) >= 3, 3.0), probe.diagnostics[-1:]
    target = [q0[2] + 0.1, q0[3]]
    probe.command(target)
    assert wait_for(lambda: np.allclose(probe.latest()[3][2:], target, atol=1e-12), 5.0)
    assert proc.poll() is None
    assert "refused a command" in log.read_text()


def test_infeasible_command_is_reported_and_the_node_keeps_serving(sim):
    probe, proc, log = sim
    probe.reset()
    q0 = probe.latest()[3]
    t = time.monotonic()
    probe.command([q0[2], 1.1])  # the string cannot be that long at this carriage position
    time.sleep(0.5)
    assert proc.poll() is None
    assert wait_for(lambda: len(probe.states_since(t)) > 40, 3.0), "the node stopped publishing"
    Q = np.array([m[3] for m in probe.states_since(t)])
    assert np.all(Q[:, 3] < 1.1 - 1e-3), "the string never reached the infeasible length"
    jumps = np.abs(np.diff(Q[:, :2], axis=0)).max(axis=1)
    reset_rows = np.flatnonzero(np.all(Q[1:] == q0, axis=1))
    assert np.all(np.delete(jumps, reset_rows) < 0.5), "no implausible state was published"
    assert wait_for(lambda: probe.diagnostics and int(probe.diagnostics[-1]["step_errors"]) >= 1, 3.0)
    assert "integrator step at" in log.read_text()


def test_reset_restores_the_initial_state(sim):
    probe, _, _ = sim
    probe.reset()
    q0 = probe.latest()[3].copy()
    probe.command([q0[2] - 0.2, q0[3] + 0.02])
    assert wait_for(lambda: abs(probe.latest()[3][2] - q0[2]) > 0.1, 5.0)
    r = probe.reset()
    assert "reset to the initial configuration" in r.message
    t = time.monotonic()
    assert wait_for(lambda: len(probe.states_since(t)) >= 5, 3.0)
    for m in probe.states_since(t):
        np.testing.assert_allclose(m[3], q0, rtol=0, atol=1e-12)  # back at rest, and it stays there


def test_clock_advances_and_runs_faster_than_real_time(sim):
    probe, _, _ = sim

    def rate_over(seconds):
        with probe.lock:
            n0 = len(probe.clock)
        time.sleep(seconds)
        with probe.lock:
            c = probe.clock[n0 + 1:]
        assert len(c) > 10
        ns = np.array([x[1] for x in c])
        assert np.all(np.diff(ns) == 10_000_000), "/clock advances by dt per step"
        return (ns[-1] - ns[0]) / 1e9 / (c[-1][0] - c[0][0])

    assert 0.8 < rate_over(0.6) < 1.2
    assert probe.set_parameter("real_time_factor", 5.0).successful
    try:
        assert 3.0 < rate_over(0.8) < 5.5  # below 5 only when the machine is too busy to keep up
    finally:
        assert probe.set_parameter("real_time_factor", 1.0).successful


def test_markers_draw_links_and_the_string_at_the_published_configuration(sim, arm_system):
    probe, _, _ = sim
    desc, _ = arm_system
    m = desc.model
    n0 = len(probe.markers)
    assert wait_for(lambda: len(probe.markers) > n0 + 2, 3.0), "no MarkerArray on ~/markers"
    msg = probe.markers[-1]
    by_ns = {mk.ns: mk for mk in msg.markers}
    assert set(by_ns) == {"links", "strings", "masses"}
    stamp = msg.markers[0].header.stamp.sec * 10**9 + msg.markers[0].header.stamp.nanosec
    assert all(mk.header.frame_id == "base_link" for mk in msg.markers)
    with probe.lock:
        q = next(s[3] for s in probe.joint_states if s[1] == stamp)
    g = m.placements(q)
    ends = [[p.x, p.y, p.z] for p in by_ns["strings"].points]
    np.testing.assert_allclose(ends, [g[m.frame_index("hook"), :3, 3], g[m.frame_index("carriage"), :3, 3]],
                               atol=1e-12)
    assert len(by_ns["links"].points) % 2 == 0 and len(by_ns["links"].points) >= 6
    assert len(by_ns["masses"].points) == len(m.masses)


def test_noise_and_latency(sim):
    probe, _, _ = sim
    probe.reset()
    assert probe.set_parameter("noise_std", 0.01).successful
    assert probe.set_parameter("latency", 0.05).successful
    try:
        time.sleep(0.2)
        t = time.monotonic()
        time.sleep(0.5)
        msgs = probe.states_since(t)
        Q = np.array([m[3] for m in msgs])
        assert 0.005 < np.std(Q[:, 1]) < 0.02, "noise of the configured size"
        with probe.lock:
            clock = list(probe.clock)
        # a joint state arrives 50 ms (simulated = wall here) after the /clock tick of its stamp
        clock_arrival = {ns: wall for wall, ns in clock}
        delays = [wall - clock_arrival[stamp] for wall, stamp, _, _ in msgs if stamp in clock_arrival]
        assert len(delays) > 20
        assert 0.04 < np.median(delays) < 0.08, f"median delay {np.median(delays):.3f} s"
        assert probe.set_parameter("latency", -0.1).successful is False
    finally:
        probe.set_parameter("noise_std", 0.0)
        probe.set_parameter("latency", 0.0)


def test_wall_clock_stamps_without_publish_clock(node_processes):
    env = ros_env()
    proc = node_processes("marionette_control.nodes.simulator", ["--ros-args", "-p", "marker_rate:=0.0"], env)
    with isolated_ros(int(env["ROS_DOMAIN_ID"])):
        context = rclpy.context.Context()
        rclpy.init(context=context)
        probe = Probe(context)
        try:
            assert wait_for(lambda: len(probe.joint_states) > 20, 20.0), "no joint states"
            wall = time.time()
            stamp = probe.latest()[1] / 1e9
            assert abs(wall - stamp) < 0.2, f"stamp {stamp} vs wall clock {wall}"
            assert not probe.clock, "no /clock without publish_clock"
        finally:
            probe.close()
            context.try_shutdown()
    assert stop(proc) == 0
