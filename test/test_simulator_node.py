"""marionette_simulator: parameters and the time base in process, then the node across processes.

The ROS-free arm is tested in test_simulated_hardware.py. Here: configuration and parameter rules, the time base
(scripted clocks, and a real stall of the node's executor), and two simulator processes on isolated graphs
(test/ros_helpers.py), each with an in-process probe node:

* the 'perfect' profile, where exactness is what the tests check (stamps, the published positions are the
  integrator's configurations bit for bit, commands, faults, reset, markers, latency in steps);
* the default 'realistic' profile, where each effect is measured across processes: the command delay in steps,
  encoder noise and counts, acceleration-limited drives, the true-state topic and the ~/disturb service.

Every test that depends on the arm's state starts with the reset service. Nothing is asserted about wall-clock
rates or delays: events are counted and simulated time compared. Processes are stopped by their fixtures.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from marionette_control import _core
from marionette_control.resources import config_file
from marionette_control.sim import simulator_options
from marionette_control.sim.configure import configure
from marionette_control.sim.profile import HardwareProfile
from marionette_control.sim.schedule import AnswerGate, StepSchedule
from marionette_control.model.library import marionette_arm as arm
from marionette_control.nodes.params import ParameterError

import rclpy  # noqa: E402

from marionette_control.nodes import simulator as simmod  # noqa: E402
from ros_helpers import isolated_ros, ros_env, start_node, stop, wait_for  # noqa: E402

DT = 0.01
DT_NS = 10_000_000
CARRIAGE_VMAX, STRING_VMAX = 2.0, 1.5      # config/marionette_arm.yaml
CARRIAGE_AMAX = 15.0


def defaults(profile: str = "realistic", **overrides) -> dict:
    values = {p.name: (list(p.default) if isinstance(p.default, list) else p.default)
              for p in simulator_options.parameters(profile)}
    values["profile"] = profile
    values.update(overrides)
    return values


@pytest.fixture(scope="module")
def arm_system():
    desc = arm.load_description()
    return desc, _core.DiscreteSystem(desc.model, DT)


# ============================================================================ configuration


@pytest.mark.parametrize("overrides, match", [
    (dict(publish_rate=30.0), "publish_rate.*whole number"),
    (dict(real_time_factor=2.0), "real_time_factor.*publish_clock"),
    (dict(lockstep_timeout=1.0), "lockstep_timeout.*publish_clock"),
    (dict(command_joints=["carriage", "elbow"]), "command_joints.*carriage, string_length"),
    (dict(initial_pose="custom", initial_configuration=[0.0, 0.0]), "initial_configuration"),
    (dict(initial_pose="custom", initial_configuration=[0.0, 0.6, 0.1, 0.5]), "violates the constraints"),
    (dict(initial_pose="custom", initial_configuration=[0.1, 0.2, 0.3]), "must have 2 arm angles or 4 values"),
    (dict(model_file="no_such_model.yaml"), "model_file.*not found"),
    (dict(noise_std=[1e-3, 1e-3, 1e-3]), r"parameter 'noise_std': noise_std has 3 values; the model has 4 "
                                        r"configurations .*\(shoulder, elbow, carriage, string_length\)"),
    (dict(encoder_resolution=[0.0, 0.0]), r"parameter 'encoder_resolution': encoder_resolution has 2 values"),
    (dict(plant_model_file="no_such_plant.yaml"), r"parameter 'plant_model_file': cannot load the plant model: .*no_such_plant.yaml"),
])
def test_configuration_errors_name_the_parameter(overrides, match):
    with pytest.raises(ParameterError, match=match):
        configure(defaults(**overrides))
    with pytest.raises(ParameterError, match="use_sim_time.*publish_clock"):
        configure(defaults(), use_sim_time=True)


def test_the_profile_sets_the_hardware_parameters():
    for name in ("realistic", "perfect"):
        cfg = configure(defaults(name))
        assert cfg.profile == HardwareProfile.named(name) and cfg.arm.profile.name == name
    custom = configure(defaults("perfect", command_delay_steps=1))
    assert custom.profile.name == "custom" and custom.profile.command_delay_steps == 1
    assert custom.profile.drive_mode == "rate_limited"
    assert simulator_options.PROFILE_PARAMETER.validate("ideal") == ("parameter 'profile': must be one of realistic, perfect, "
                                                         "got 'ideal'")
    described = {p.name: p for p in simulator_options.PARAMETERS}
    assert "realistic: 1, perfect: 0" in described["command_delay_steps"].description
    assert described["plant_model_file"].read_only and not described["noise_std"].read_only


def test_custom_initial_angles_start_the_drives_at_the_nominal_equilibrium():
    cfg = configure(defaults(initial_pose="custom", initial_configuration=list(arm.RAISED)))
    m = cfg.description.model
    nominal = arm.static_equilibrium(m, *arm.RAISED).q
    np.testing.assert_allclose(cfg.q0, nominal)
    np.testing.assert_array_equal(cfg.arm.q[2:], nominal[2:])   # the drives where the nominal pose needs them
    assert 0 < np.abs(cfg.arm.q[:2] - nominal[:2]).max() < 0.02, "the plant rests a little elsewhere"
    assert cfg.joint_names == ["shoulder", "elbow", "carriage", "string_length"]
    swapped = configure(defaults(command_joints=["string_length", "carriage"]))
    assert swapped.command_index.tolist() == [1, 0]


def test_parameters_are_declared_with_descriptions_and_refuse_bad_runtime_values():
    from rclpy.parameter import Parameter

    with isolated_ros():
        context = rclpy.context.Context()
        rclpy.init(context=context)
        try:
            node = simmod.SimulatorNode(context=context)
            try:
                for spec in simulator_options.PARAMETERS:
                    d = node.describe_parameter(spec.name)
                    assert d.description == spec.description and len(d.description) > 20
                assert node.sim.profile.name == "realistic"
                assert not node.set_parameters([Parameter("noise_std", value=[-1.0])])[0].successful
                r = node.set_parameters([Parameter("noise_std", value=[0.1, 0.1])])[0]
                assert not r.successful and "noise_std has 2 values" in r.reason
                assert not node.set_parameters([Parameter("dt", value=0.02)])[0].successful  # read-only
                assert not node.set_parameters([Parameter("seed", value=3)])[0].successful  # read-only
                assert not node.set_parameters([Parameter("drive_mode", value="servo")])[0].successful
                r = node.set_parameters([Parameter("real_time_factor", value=3.0)])[0]
                assert not r.successful and "publish_clock" in r.reason
                assert node.set_parameters([Parameter("noise_std", value=[0.01])])[0].successful
                assert node.sim.profile.noise_std == (0.01,) and node.sim.profile.name == "custom"
                assert node.set_parameters([Parameter("command_delay_steps", value=2)])[0].successful
                assert node.sim.profile.command_delay_steps == 2
            finally:
                node.destroy_node()
            node = simmod.SimulatorNode(context=context, parameter_overrides=[Parameter("profile", value="perfect")])
            try:
                assert node.sim.profile == HardwareProfile.named("perfect")
                assert node.get_parameter("drive_mode").value == "rate_limited"
            finally:
                node.destroy_node()
            with pytest.raises(ParameterError, match="publish_rate"):
                simmod.SimulatorNode(context=context, parameter_overrides=[Parameter("publish_rate", value=30.0)])
        finally:
            context.try_shutdown()


# ============================================================================ the time base


def test_schedule_paces_steps_and_stamps_them():
    s = StepSchedule(DT_NS, 250_000_000, wall_stamps=True)
    t0 = 1_700_000_000_000_000_000
    s.anchor(0, t0)
    assert s.due(0, t0) == (0, 0) and s.due(0, t0 + DT_NS - 1) == (0, 0)
    assert s.due(0, t0 + DT_NS) == (1, 0) and s.due(0, t0 + 17 * DT_NS + 5) == (17, 0)   # catching up
    assert [s.stamp_ns(k) for k in (0, 1, 37)] == [t0, t0 + DT_NS, t0 + 37 * DT_NS]
    assert s.step_at(t0 + 37 * DT_NS) == 37 and s.step_at(t0 + 37 * DT_NS + 1) == 38
    fast = StepSchedule(DT_NS, 250_000_000, wall_stamps=False, real_time_factor=5.0)
    fast.anchor(0, 123)
    assert fast.due(0, 123 + 4 * DT_NS) == (20, 0), "five simulated seconds per wall second"
    assert fast.stamp_ns(500) == 500 * DT_NS and fast.step_at(DT_NS * 7) == 7
    fast.set_real_time_factor(1.0, 20, 123 + 4 * DT_NS)
    assert fast.due(20, 123 + 4 * DT_NS + 10 * DT_NS) == (10, 0)


@pytest.mark.parametrize("wall_stamps", [True, False])
def test_schedule_re_anchors_after_a_stall_and_stamps_track_the_clock(wall_stamps):
    """The run-1-in-4 failure of the main job: the simulator 0.31 s late, after which (before the fix) every stamp
    stayed 0.31 s older than the clock. Now the schedule re-anchors once and the stamps follow the clock."""
    s = StepSchedule(DT_NS, 250_000_000, wall_stamps=wall_stamps)
    t0 = 1_700_000_000_000_000_000
    s.anchor(0, t0)
    k, now = 0, t0
    for _ in range(10):   # on time
        now += DT_NS
        n, skipped = s.due(k, now)
        assert (n, skipped) == (1, 0)
        k += n
    now += 310_000_000    # the stall
    n, skipped = s.due(k, now)
    assert n == 1 and skipped == 310_000_000 - DT_NS and s.reanchors == 1
    k += n
    if wall_stamps:
        assert s.stamp_ns(k) == now, "the step after the stall carries the clock's time"
    else:
        assert s.stamp_ns(k) == k * DT_NS, "simulated time stays continuous: /clock is the graph's clock"
    for _ in range(100):  # and from then on the stamps stay with the clock
        now += DT_NS
        n, skipped = s.due(k, now)
        assert (n, skipped) == (1, 0)
        k += n
        if wall_stamps:
            assert s.stamp_ns(k) == now
    # a clock stepped back (wall stamps): re-anchored instead of waiting for the clock to catch up
    if wall_stamps:
        now -= 3_600 * 10**9
        assert s.due(k, now) == (1, -(3_600 * 10**9) - DT_NS) and s.stamp_ns(k + 1) == now


def test_answer_gate_waits_for_each_answer_while_commands_answer_and_once_after_they_stop():
    """The lock-step rule (AnswerGate): no wait before commands come or with the gate off; with commands answering,
    a published message holds the next step until its answer (resumed: the pacing restarts); a controller that
    stops answering is waited for ``timeout`` once, then not until commands resume. Scripted clock (ns)."""
    off = AnswerGate(0)
    off.command_received()
    off.sample_published()
    assert not off.pending and off.hold(0) == (False, False)
    g = AnswerGate(500)
    g.sample_published()
    assert not g.pending and g.hold(0) == (False, False), "no controller answering yet: paced as usual"
    g.command_received()
    g.sample_published()
    assert g.pending and g.hold(1000) == (True, False) and g.hold(1499) == (True, False) and g.waits == 1
    g.command_received()
    assert g.hold(1600) == (False, True), "answered: the wait ends, pacing restarts"
    assert g.hold(1700) == (False, False)
    g.sample_published()   # a message whose answer never comes
    assert g.hold(2000) == (True, False) and g.hold(2500) == (False, True) and (g.waits, g.timeouts) == (2, 1)
    g.sample_published()
    assert not g.pending and g.hold(3000) == (False, False), "stopped answering: not waited for again"
    g.command_received()   # commands resume
    g.sample_published()
    assert g.hold(4000) == (True, False) and g.waits == 3


def test_time_base_re_anchors_after_stalls_of_the_node(tmp_path):
    """A real stall of the node's executor, at start-up and while running (nothing spins it): the stamps published
    afterwards carry times after the stall, i.e. they track the clock the controller compares them with."""
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState

    with isolated_ros():
        context = rclpy.context.Context()
        rclpy.init(context=context)
        received = []   # (stamp ns, receipt ns)
        try:
            node = simmod.SimulatorNode(context=context, parameter_overrides=[
                Parameter("marker_rate", value=0.0), Parameter("profile", value="perfect")])
            probe = rclpy.create_node("time_base_probe", context=context)
            probe.create_subscription(JointState, "/joint_states", lambda m: received.append(
                (m.header.stamp.sec * 10**9 + m.header.stamp.nanosec, time.time_ns())), 100)
            ex = SingleThreadedExecutor(context=context)
            ex.add_node(node)
            ex.add_node(probe)

            def spin_for(seconds):
                end = time.monotonic() + seconds
                while time.monotonic() < end:
                    ex.spin_once(timeout_sec=0.005)

            time.sleep(0.5)                    # start-up stall: constructed, not spun
            first_spin = time.time_ns()
            spin_for(0.4)
            assert received, "no joint states"
            assert min(r[0] for r in received) >= first_spin, "the time base starts at the first tick"
            before = len(received)
            stall_begin = time.time_ns()
            time.sleep(0.6)                    # the executor stalls while running
            resume = time.time_ns()
            spin_for(0.4)
            assert node.schedule.reanchors >= 1   # more only if this machine itself stalls 0.25 s meanwhile
            stamps = [r[0] for r in received]
            late = [s for s in stamps if stall_begin + 2 * DT_NS < s < resume]
            assert not late, f"{len(late)} stamps fall inside the stall: the stamps lag the clock"
            assert len(received) > before + 5 and max(stamps) >= resume
            assert all(stamp <= receipt for stamp, receipt in received), "no stamp from the future"
            assert np.all(np.diff(stamps) > 0)
        finally:
            context.try_shutdown()


# ============================================================================ across processes


class Probe:
    """In-process test node: records joint states (with the latest /clock at receipt), true states, /clock and
    diagnostics; sends commands; calls reset, disturb and set_parameters."""

    def __init__(self, context):
        from diagnostic_msgs.msg import DiagnosticArray
        from marionette_interfaces.srv import Disturb
        from rcl_interfaces.srv import SetParameters
        from rclpy.executors import SingleThreadedExecutor
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray
        from std_srvs.srv import Trigger
        from trajectory_msgs.msg import JointTrajectory
        from visualization_msgs.msg import MarkerArray

        self.node = rclpy.create_node("sim_probe", context=context)
        self.lock = threading.Lock()
        self.joint_states: list = []   # (wall time, stamp ns, names, positions, source timestamp)
        self.true_states: list = []    # (stamp ns, names, positions, velocities, efforts)
        self.clock: list = []          # (wall time, clock ns, source timestamp)
        self.diagnostics: list = []    # {key: value}
        self.markers: list = []        # MarkerArray
        self.node.create_subscription(JointState, "/joint_states", self._js, 1000)
        self.node.create_subscription(JointState, "/marionette_simulator/true_joint_states", self._true, 1000)
        self.node.create_subscription(Clock, "/clock", self._clock, 1000)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._diag, 10)
        self.node.create_subscription(MarkerArray, "/marionette_simulator/markers", self.markers.append, 10)
        self.cmd_pub = self.node.create_publisher(Float64MultiArray, "/forward_position_controller/commands", 10)
        self.traj_pub = self.node.create_publisher(JointTrajectory, "/joint_trajectory_controller/joint_trajectory", 10)
        self.reset_client = self.node.create_client(Trigger, "/marionette_simulator/reset")
        self.disturb_client = self.node.create_client(Disturb, "/marionette_simulator/disturb")
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

    def _js(self, m, info):   # info: rclpy's MessageInfo (the publisher's source_timestamp)
        with self.lock:
            self.joint_states.append((time.monotonic(), m.header.stamp.sec * 10**9 + m.header.stamp.nanosec,
                                      list(m.name), np.array(m.position), info["source_timestamp"]))

    def _true(self, m):
        with self.lock:
            self.true_states.append((m.header.stamp.sec * 10**9 + m.header.stamp.nanosec, list(m.name),
                                     np.array(m.position), np.array(m.velocity), np.array(m.effort)))

    def _clock(self, m, info):
        with self.lock:
            self.clock.append((time.monotonic(), m.clock.sec * 10**9 + m.clock.nanosec, info["source_timestamp"]))

    def _diag(self, m):
        for s in m.status:
            if s.name.startswith("marionette_simulator"):
                with self.lock:
                    self.diagnostics.append({kv.key: kv.value for kv in s.values})

    def states_since(self, t_wall):
        with self.lock:
            return [s for s in self.joint_states if s[0] >= t_wall]

    def true_since(self, stamp_ns):
        with self.lock:
            return [s for s in self.true_states if s[0] >= stamp_ns]

    def latest(self):
        with self.lock:
            return self.joint_states[-1]

    def latest_true(self):
        with self.lock:
            return self.true_states[-1]

    def diagnostics_after(self, n, timeout=5.0):
        assert wait_for(lambda: len(self.diagnostics) > n, timeout), "no /diagnostics"
        return self.diagnostics[-1]

    def call(self, client, request, timeout=5.0):
        assert client.wait_for_service(timeout_sec=timeout), f"service {client.srv_name} not available"
        future = client.call_async(request)
        assert wait_for(future.done, timeout), f"no response from {client.srv_name}"
        return future.result()

    def reset(self):
        from std_srvs.srv import Trigger

        r = self.call(self.reset_client, Trigger.Request())
        assert r.success, r.message
        stamp = self.latest_true()[0]
        assert wait_for(lambda: len(self.true_since(stamp + DT_NS)) >= 3, 5.0)
        return r

    def set_parameter(self, name, value):
        from rcl_interfaces.srv import SetParameters
        from rclpy.parameter import Parameter

        req = SetParameters.Request(parameters=[Parameter(name, value=value).to_parameter_msg()])
        return self.call(self.param_client, req).results[0]

    def command(self, values):
        from std_msgs.msg import Float64MultiArray

        self.cmd_pub.publish(Float64MultiArray(data=[float(v) for v in values]))

    def trajectory(self, names, points, steps, stamp_ns=0):
        """A JointTrajectory command: positions ``points`` of the joints ``names`` at ``steps`` × dt after
        ``stamp_ns`` (0: now)."""
        from marionette_control.nodes.convert import joint_trajectory

        msg = joint_trajectory(names, DT, np.asarray(points, dtype=float))
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(int(stamp_ns), 10**9)
        for p, s in zip(msg.points, steps):
            p.time_from_start.sec, p.time_from_start.nanosec = divmod(int(round(s * DT_NS)), 10**9)
        self.traj_pub.publish(msg)

    def close(self):
        self.executor.shutdown()
        self.node.destroy_node()
        self.thread.join(timeout=5.0)


def simulator_process(tmp_path_factory, name, extra):
    """(probe, process, log) of a simulator (publish_clock, no command timeout) on an isolated graph."""
    log = tmp_path_factory.mktemp(name) / "simulator.log"
    with isolated_ros() as env:
        proc = start_node("marionette_control.nodes.simulator",
                          ["--ros-args", "--params-file", str(config_file("simulator.yaml")),
                           "-p", "publish_clock:=true", "-p", "command_timeout:=0.0", *extra], env, log)
        context = rclpy.context.Context()
        rclpy.init(context=context)
        probe = Probe(context)
        try:
            ok = wait_for(lambda: len(probe.true_states) > 5 or proc.poll() is not None, 20.0)
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


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """The simulator on the 'perfect' profile: these tests check exact values."""
    yield from simulator_process(tmp_path_factory, "perfect", ["-p", "profile:=perfect", "-p", "seed:=7"])


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """The simulator on its default profile ('realistic')."""
    yield from simulator_process(tmp_path_factory, "realistic", ["-p", "marker_rate:=0.0"])


# ---------------------------------------------------------------------------- perfect profile


def test_joint_states_names_and_stamps(sim):
    probe, _, _ = sim
    t = time.monotonic()
    assert wait_for(lambda: len(probe.states_since(t)) > 50, 5.0)
    msgs = probe.states_since(t)
    assert all(m[2] == ["shoulder", "elbow", "carriage", "string_length"] for m in msgs)
    stamps = np.array([m[1] for m in msgs])
    assert np.all(np.diff(stamps) == DT_NS), "one joint state per step, stamps exactly dt apart"
    # stamps are simulated time (publish_clock): every one is a /clock value published with it
    with probe.lock:
        clock_ns = [c[1] for c in probe.clock]
    assert set(stamps.tolist()) <= set(clock_ns)
    assert np.all(np.diff(clock_ns) == DT_NS), "/clock advances by dt per step"


def test_command_moves_the_actuators_within_their_rate_limits_and_states_are_the_integrators(sim, arm_system):
    probe, _, _ = sim
    desc, system = arm_system
    probe.reset()
    q0 = probe.latest()[3]
    target = [q0[2] + 0.3, q0[3] - 0.1]
    t = time.monotonic()
    probe.command(target)
    assert wait_for(lambda: np.allclose(probe.latest()[3][2:], target, atol=1e-12), 5.0), probe.latest()
    stamp = probe.latest()[1]
    assert wait_for(lambda: probe.latest()[1] > stamp + 30 * DT_NS, 5.0)   # let the arm swing
    msgs = probe.states_since(t)
    stamps = np.array([m[1] for m in msgs])
    assert np.all(np.diff(stamps) == DT_NS), "no joint state lost"
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
    # and the true state is what is published
    true = {s[0]: s[2] for s in probe.true_since(stamps[0])}
    for m in msgs:
        np.testing.assert_array_equal(true[m[1]], m[3])


def test_bad_commands_are_refused_and_the_node_keeps_serving(sim):
    probe, proc, log = sim
    probe.reset()
    q0 = probe.latest()[3]
    n_diag = len(probe.diagnostics)
    probe.command([q0[2] + 0.2])                    # wrong length
    probe.command([q0[2] + 0.2, float("nan")])      # NaN
    probe.command([float("inf"), q0[3]])            # inf
    assert wait_for(lambda: len(probe.diagnostics) > n_diag
                    and int(probe.diagnostics[-1]["commands_rejected"]) >= 3, 3.0), probe.diagnostics[-1:]
    np.testing.assert_array_equal(probe.latest()[3][2:], q0[2:])  # nothing moved
    target = [q0[2] + 0.1, q0[3]]
    probe.command(target)
    assert wait_for(lambda: np.allclose(probe.latest()[3][2:], target, atol=1e-12), 5.0)
    assert proc.poll() is None
    assert "refused a command" in log.read_text()


def test_trajectory_commands_set_the_drives_at_their_points_and_bad_ones_are_refused(sim):
    """trajectory_msgs/JointTrajectory (ros2_control joint_trajectory_controller): a point stamped for step s is the
    position the drives are at in the joint state of step s (perfect profile: no delay, exact drives); bad commands
    are refused (counted), the node keeps serving."""
    probe, proc, log = sim
    probe.reset()
    _, stamp, names, q0, _ = probe.latest()
    drives = [names[2], names[3]]
    points = q0[2:4] + np.outer([1, 2, 3, 4], [2e-3, -1e-3])
    first = stamp + 30 * DT_NS                 # a joint state is published for every step: its stamp is the step's
    probe.trajectory(drives[::-1], points[:, ::-1], [0, 1, 2, 3], first)   # by name: the order does not matter
    assert wait_for(lambda: probe.latest()[1] >= first + 5 * DT_NS, 5.0)
    at = {m[1]: m[3][2:4] for m in probe.states_since(0.0)}
    for i in range(4):
        np.testing.assert_array_equal(at[first + i * DT_NS], points[i])
    np.testing.assert_array_equal(at[first + 5 * DT_NS], points[-1])    # past the last point: hold
    n_diag = len(probe.diagnostics)
    rejected = int(probe.diagnostics[-1]["commands_rejected"]) if probe.diagnostics else 0
    probe.trajectory(["carriage", "elbow"], [[0.1, 0.2]], [1])                        # other joints
    probe.trajectory(drives, [[0.1, 0.9], [0.1, 0.9]], [2, 1])                        # times not increasing
    probe.trajectory(drives, [[0.1, float("nan")]], [1])                              # NaN
    probe.trajectory(drives, [q0[2:4]] * 101, range(1, 102))                          # too many points
    assert wait_for(lambda: len(probe.diagnostics) > n_diag
                    and int(probe.diagnostics[-1]["commands_rejected"]) >= rejected + 4, 3.0), probe.diagnostics[-1:]
    np.testing.assert_array_equal(probe.latest()[3][2:4], points[-1])   # nothing moved
    # (the warnings name what was wrong, sim.setpoint_stream's errors: test_command_lookahead.py; they are throttled)
    probe.trajectory(drives, [q0[2:4]], [1])    # stamp 0: from now
    assert wait_for(lambda: np.array_equal(probe.latest()[3][2:4], q0[2:4]), 5.0)
    # no points: a stop (joint_trajectory_controller's), the drives stay where they are, short of the points' end
    probe.trajectory(drives, q0[2:4] + np.outer(np.arange(1, 101), [1e-3, 0.0]), range(1, 101))
    assert wait_for(lambda: probe.latest()[3][2] > q0[2] + 5e-3, 5.0)
    probe.trajectory(drives, np.zeros((0, 2)), [])
    stamp = probe.latest()[1]
    assert wait_for(lambda: probe.latest()[1] > stamp + 120 * DT_NS, 5.0)
    assert probe.latest()[3][2] < q0[2] + 0.099 and probe.states_since(0.0)[-20][3][2] == probe.latest()[3][2]
    assert proc.poll() is None


def test_infeasible_command_is_reported_and_the_node_keeps_serving(sim):
    probe, proc, log = sim
    probe.reset()
    q0 = probe.latest()[3]
    stamp = probe.latest()[1]
    probe.command([q0[2], 1.1])  # the string cannot be that long at this carriage position
    assert wait_for(lambda: probe.latest()[1] > stamp + 50 * DT_NS, 5.0), "the node stopped publishing"
    assert proc.poll() is None
    Q = np.array([m[3] for m in probe.joint_states if m[1] > stamp])
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
    stamp = probe.latest()[1]
    assert wait_for(lambda: probe.latest()[1] >= stamp + 5 * DT_NS, 3.0)
    for m in probe.joint_states:
        if m[1] > stamp:
            np.testing.assert_allclose(m[3], q0, rtol=0, atol=1e-12)  # back at rest, and it stays there


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


def test_latency_in_steps_and_noise_set_at_run_time(sim):
    probe, _, _ = sim
    probe.reset()
    assert probe.set_parameter("noise_std", [0.01]).successful
    assert probe.set_parameter("latency", 0.05).successful
    try:
        stamp = probe.latest_true()[0] + 10 * DT_NS          # after both changes took effect
        assert wait_for(lambda: len([m for m in probe.joint_states if m[1] > stamp]) > 150, 10.0)
        msgs = [m for m in probe.joint_states if m[1] > stamp]
        true = {s[0]: s[2] for s in probe.true_since(stamp)}
        err = np.array([m[3] - true[m[1]] for m in msgs if m[1] in true])
        n = err.shape[0]
        assert n > 100
        np.testing.assert_allclose(err.std(axis=0), 0.01, rtol=4 / np.sqrt(2 * n))
        # a joint state is published with the /clock tick 5 steps after its stamp: the last /clock the simulator
        # published before it (publication order, the messages' source timestamps) is its stamp + 5 steps
        with probe.lock:
            clock = sorted((c[2], c[1]) for c in probe.clock)
        sent, value = np.array([c[0] for c in clock]), np.array([c[1] for c in clock])
        delays = [value[np.searchsorted(sent, m[4], side="right") - 1] - m[1] for m in msgs]
        assert set(delays) == {5 * DT_NS}, np.unique(delays, return_counts=True)
        assert probe.set_parameter("latency", -0.1).successful is False
    finally:
        probe.set_parameter("noise_std", [0.0])
        probe.set_parameter("latency", 0.0)


# ---------------------------------------------------------------------------- realistic profile


def test_realistic_command_delay_in_steps(real):
    """The step at which the node received the command (its diagnostics) and the first step at which the drives
    moved (the true state): one period apart by default, as with ros2_control; then three after a change."""
    probe, _, _ = real
    for delay in (1, 3):
        if delay != 1:
            assert probe.set_parameter("command_delay_steps", delay).successful
        probe.reset()
        rest = probe.latest_true()
        n = len(probe.diagnostics)
        probe.command([rest[2][2] + 0.01, rest[2][3]])
        d = probe.diagnostics_after(n)
        while d["last_command_step"] == "none" or int(d["last_command_step"]) < rest[0] // DT_NS:
            d = probe.diagnostics_after(len(probe.diagnostics))
        received = int(d["last_command_step"])
        moved = next(s for s in probe.true_since(rest[0]) if s[2][2] != rest[2][2])
        assert moved[0] // DT_NS - received - 1 == delay
        assert d["profile"] == ("realistic" if delay == 1 else "custom")
    assert probe.set_parameter("command_delay_steps", 1).successful


def test_realistic_encoders_read_counts_and_noise(real):
    probe, _, _ = real
    probe.reset()
    stamp = probe.latest_true()[0]
    assert wait_for(lambda: len([m for m in probe.joint_states if m[1] > stamp]) > 400, 20.0)
    true = {s[0]: s[2] for s in probe.true_since(stamp)}
    msgs = [m for m in probe.joint_states if m[1] > stamp and m[1] in true]
    p = HardwareProfile.named("realistic")
    res, sigma = np.array(p.encoder_resolution), np.array(p.noise_std)
    meas = np.array([m[3] for m in msgs])
    np.testing.assert_allclose(meas / res, np.round(meas / res), rtol=0, atol=1e-6)   # whole counts
    err = meas - np.array([true[m[1]] for m in msgs])
    n = err.shape[0]
    np.testing.assert_allclose(err.std(axis=0), np.sqrt(sigma ** 2 + res ** 2 / 12), rtol=0.05 + 4 / np.sqrt(2 * n))
    assert np.all(np.abs(err) < res / 2 + 6 * sigma)


def test_realistic_drives_keep_their_speed_and_acceleration_limits(real):
    probe, _, _ = real
    probe.reset()
    rest = probe.latest_true()
    target = rest[2][2] + 0.3
    probe.command([target, rest[2][3]])
    assert wait_for(lambda: probe.latest_true()[2][2] == target, 5.0), "the carriage arrives exactly"
    states = probe.true_since(rest[0])
    stamps = np.array([s[0] for s in states])
    assert np.all(np.diff(stamps) == DT_NS)
    carriage = np.array([s[2][2] for s in states])
    speed = np.diff(carriage) / DT
    assert np.all(np.abs(speed) <= CARRIAGE_VMAX * (1 + 1e-12))
    assert np.all(np.abs(np.diff(speed)) <= CARRIAGE_AMAX * DT * (1 + 1e-9))
    assert np.max(np.abs(np.diff(speed))) > 0.99 * CARRIAGE_AMAX * DT, "at the acceleration limit"
    assert np.all(np.diff(carriage) >= 0) and carriage.max() == target, "no overshoot"
    np.testing.assert_allclose([s[3][2] for s in states[1:]], speed, rtol=0, atol=1e-12)   # true velocities


def test_realistic_true_state_topic(real):
    probe, _, _ = real
    probe.reset()
    stamp = probe.latest_true()[0]
    assert wait_for(lambda: len(probe.true_since(stamp)) > 20, 5.0)
    states = probe.true_since(stamp)
    assert all(s[1] == ["shoulder", "elbow", "carriage", "string_length"] for s in states)
    assert all(len(s[2]) == 4 and len(s[3]) == 4 for s in states)
    # the plant at rest where its physics puts it: not the nominal model's pose at the same drive positions
    nominal = arm.static_equilibrium(arm.load_description().model, *arm.LOWERED).q
    q = states[-1][2]
    np.testing.assert_array_equal(q[2:], nominal[2:])
    assert 1e-4 < np.abs(q[:2] - nominal[:2]).max() < 0.02
    assert all(np.array_equal(s[2], q) and not np.any(s[3]) for s in states), "at rest, exactly"
    js = {m[1] for m in probe.joint_states}
    assert {s[0] for s in states} <= js, "the same stamps as joint_states"


def test_realistic_string_goes_slack_and_diagnostics_report_it(real):
    """The realistic plant's string is one-sided: string paid out 3 cm at once (the winch at its acceleration limit
    drops the hook faster than the arm can fall) goes slack, its tension on ~/true_joint_states is 0 while slack,
    the arm catches it again, and /diagnostics counts the episode, the time slack and the lowest tension."""
    probe, _, _ = real
    probe.reset()
    n_diag = len(probe.diagnostics)
    assert wait_for(lambda: len(probe.diagnostics) > n_diag, 3.0)
    before = probe.diagnostics[-1]
    assert before["string"] == "one_sided"
    rest = probe.latest_true()
    probe.command([rest[2][2], rest[2][3] + 0.03])
    assert wait_for(lambda: probe.latest_true()[0] > rest[0] + 60 * DT_NS, 5.0)
    tension = np.array([s[4][3] for s in probe.true_since(rest[0] + DT_NS)])
    assert tension[0] > 0.5 and np.any(tension == 0.0) and tension[-1] > 0.0 and tension.min() == 0.0
    n_diag = len(probe.diagnostics)
    assert wait_for(lambda: len(probe.diagnostics) > n_diag, 3.0)
    after = probe.diagnostics[-1]
    assert int(after["slack_episodes"]) == int(before["slack_episodes"]) + 1
    assert float(after["slack_s"]) - float(before["slack_s"]) == pytest.approx(np.sum(tension == 0.0) * DT, abs=1e-9)
    assert float(after["tension_min_n"]) == 0.0


def test_disturb_service_pushes_the_arm_and_refuses_bad_requests(real):
    from builtin_interfaces.msg import Time
    from geometry_msgs.msg import Vector3
    from marionette_interfaces.srv import Disturb

    probe, proc, log = real
    probe.reset()
    rest = probe.latest_true()
    start_ns = rest[0] + 30 * DT_NS
    req = Disturb.Request(body="forearm_inertial", profile="half_sine", force=Vector3(y=2.0), duration=0.1,
                          start_time=Time(sec=start_ns // 10**9, nanosec=start_ns % 10**9))
    r = probe.call(probe.disturb_client, req)
    assert r.success, r.message
    assert r.start.sec * 10**9 + r.start.nanosec == start_ns and r.end.sec * 10**9 + r.end.nanosec == start_ns + 0.1e9
    assert abs(r.total_impulse.y - 2 * 2.0 * 0.1 / np.pi) < 2.0 * 0.1 * 0.01 and r.total_impulse.x == 0.0
    assert wait_for(lambda: probe.latest_true()[0] > start_ns + 20 * DT_NS, 5.0)
    states = probe.true_since(rest[0])
    before = [s for s in states if s[0] <= start_ns]
    after = [s for s in states if s[0] > start_ns + 10 * DT_NS]
    assert all(np.array_equal(s[2], rest[2]) for s in before), "nothing moves before the push"
    assert after and after[-1][2][0] - rest[2][0] > 1e-3, "pushed towards +y: the shoulder swings up"
    bad = [
        (dict(body="hand", profile="impulse", impulse=Vector3(y=0.1)), "unknown body 'hand'"),
        (dict(body="forearm_inertial", profile="kick", force=Vector3(y=1.0), duration=0.1), "unknown profile"),
        (dict(body="forearm_inertial", profile="constant", force=Vector3(y=float("nan")), duration=0.1),
         "force must be 3 finite numbers"),
        (dict(body="forearm_inertial", profile="constant", force=Vector3(y=1e3), duration=0.1),
         "exceeds the plausible 50 N"),
        (dict(body="forearm_inertial", profile="constant", force=Vector3(y=1.0), duration=100.0),
         "exceeds the plausible 10 s"),
        (dict(body="forearm_inertial", profile="constant", force=Vector3(y=1.0), duration=0.0),
         "shorter than one step"),
        (dict(body="forearm_inertial", profile="impulse", impulse=Vector3(y=0.1), start_time=Time(sec=0, nanosec=5)),
         "is in the past"),
    ]
    for fields, match in bad:
        r = probe.call(probe.disturb_client, Disturb.Request(**fields))
        assert not r.success and match in r.message, (fields, r.message)
    assert proc.poll() is None and "~/disturb refused" in log.read_text()


def test_wall_clock_stamps_without_publish_clock(node_processes):
    env = ros_env()
    proc = node_processes("marionette_control.nodes.simulator", ["--ros-args", "-p", "marker_rate:=0.0"], env)
    with isolated_ros(int(env["ROS_DOMAIN_ID"])):
        context = rclpy.context.Context()
        rclpy.init(context=context)
        probe = Probe(context)
        started = time.time_ns()
        try:
            assert wait_for(lambda: len(probe.joint_states) > 20, 20.0), "no joint states"
            with probe.lock:
                stamps = [m[1] for m in probe.joint_states]
            received = time.time_ns()
            assert started - 30 * 10**9 < stamps[0] and stamps[-1] <= received, "stamps are wall-clock times"
            assert np.all(np.diff(stamps) == DT_NS)
            assert not probe.clock, "no /clock without publish_clock"
        finally:
            probe.close()
            context.try_shutdown()
    assert stop(proc) == 0


def test_lockstep_waits_for_a_slow_controller_and_not_for_one_that_stopped(node_processes):
    """lockstep_timeout across processes: a "controller" that takes three periods (30 ms of wall time, its
    callback sleeps) to answer each joint state gets every sample answered before the next step — simulated time
    (/clock) does not run on while it computes (without the gate it runs ~2 steps further per answer) — and
    when it stops answering the simulator waits once (counted) and goes on stepping."""
    from std_msgs.msg import Float64MultiArray
    from sensor_msgs.msg import JointState

    env = ros_env()
    proc = node_processes("marionette_control.nodes.simulator", [
        "--ros-args", "-p", "profile:=perfect", "-p", "marker_rate:=0.0", "-p", "publish_clock:=true",
        "-p", "command_timeout:=0.0", "-p", "lockstep_timeout:=0.5"], env)
    with isolated_ros(int(env["ROS_DOMAIN_ID"])):
        context = rclpy.context.Context()
        rclpy.init(context=context)
        probe = Probe(context)
        node = rclpy.create_node("slow_controller", context=context)
        pub = node.create_publisher(Float64MultiArray, "/forward_position_controller/commands", 10)
        events: list = []    # ("js", stamp ns) and ("cmd", stamp answered), in the order they happened
        answering = threading.Event()

        def on_js(m):
            stamp = m.header.stamp.sec * 10**9 + m.header.stamp.nanosec
            events.append(("js", stamp))
            if answering.is_set():
                time.sleep(0.03)   # the slow controller's computation, not a measurement
                pub.publish(Float64MultiArray(data=[float(m.position[2]), float(m.position[3])]))
                with probe.lock:
                    now = probe.clock[-1][1]   # simulated time the probe has seen so far
                events.append(("cmd", stamp, now - stamp))

        node.create_subscription(JointState, "/joint_states", on_js, 1000)
        executor = rclpy.executors.SingleThreadedExecutor(context=context)
        executor.add_node(node)
        try:
            spin = lambda: executor.spin_once(timeout_sec=0.05)  # noqa: E731  (no backlog before answering)
            assert wait_for(lambda: pub.get_subscription_count() > 0 and len(events) > 5, 20.0, spin=spin)
            answering.set()
            assert wait_for(lambda: sum(e[0] == "cmd" for e in events) >= 40, 30.0, spin=spin)
            answering.clear()
            first = next(i for i, e in enumerate(events) if e[0] == "cmd")
            run = events[first:]
            last = max(i for i, e in enumerate(run) if e[0] == "cmd")
            run = run[:last + 1]
            js = [e[1] for e in run if e[0] == "js"]
            lag = [e[2] for e in run if e[0] == "cmd"]
            assert np.all(np.diff(js) == DT_NS), "consecutive steps: every sample answered"
            # when each answer was sent, simulated time had not gone past the sample it answers (without the gate
            # the simulation runs on, about two steps more per answer)
            # how far simulated time had run past each sample when its answer was sent: constant (the samples that
            # were queued when the answering began, commands carry no stamp: AnswerGate) instead of growing by
            # about two steps per answer as without the gate; one step of slack for the probe's own clock reader
            assert max(lag) - min(lag) <= DT_NS, f"simulated time ran on while samples waited: lags {lag}"
            # stopped answering: one wait that times out, then the steps go on
            n = len(probe.diagnostics)
            assert wait_for(lambda: len(probe.diagnostics) > n and probe.diagnostics[-1]["lockstep_timeouts"] == "1",
                            10.0, spin=spin)
            seen = len(probe.joint_states)
            assert wait_for(lambda: len(probe.joint_states) > seen + 50, 10.0), "the simulator stopped stepping"
            d = probe.diagnostics[-1]
            assert int(d["lockstep_waits"]) >= 1 and d["lockstep_timeouts"] == "1"
        finally:
            executor.shutdown()
            node.destroy_node()
            probe.close()
            context.try_shutdown()
    assert stop(proc) == 0


def test_lifecycle_transitions_across_processes(node_processes):
    """The simulator started with autostart:=false, driven through the lifecycle_msgs services like a ros2_control
    hardware component: unconfigured publishes nothing but /diagnostics; configured (inactive) the arm is simulated
    and read (joint_states, /clock) with the drives braked and commands refused; active the drives follow them;
    deactivate brakes them and refuses commands again; cleanup stops everything and a new configure continues
    simulated time where it stopped, the arm back at rest in its initial pose; shutdown finalizes and the process
    still stops cleanly. Counted, not timed."""
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState, GetState

    env = ros_env()
    proc = node_processes("marionette_control.nodes.simulator", [
        "--ros-args", "-p", "autostart:=false", "-p", "profile:=perfect", "-p", "publish_clock:=true",
        "-p", "marker_rate:=0.0", "-p", "command_timeout:=0.0"], env)
    with isolated_ros(int(env["ROS_DOMAIN_ID"])):
        context = rclpy.context.Context()
        rclpy.init(context=context)
        probe = Probe(context)
        change = probe.node.create_client(ChangeState, "/marionette_simulator/change_state")
        get = probe.node.create_client(GetState, "/marionette_simulator/get_state")

        def transition(tid) -> bool:
            return probe.call(change, ChangeState.Request(transition=Transition(id=tid)), 10.0).success

        def state() -> str:
            return probe.call(get, GetState.Request(), 10.0).current_state.label

        def status(predicate, what):
            assert wait_for(lambda: any(predicate(d) for d in list(probe.diagnostics)), 10.0), what
            return [d for d in list(probe.diagnostics) if predicate(d)][-1]

        def count(what) -> int:
            with probe.lock:
                return len(getattr(probe, what))

        def carriage_after(n_states: int) -> float:
            """The carriage reading once n_states more joint states have arrived."""
            start = count("joint_states")
            assert wait_for(lambda: count("joint_states") >= start + n_states, 20.0), "joint states stopped"
            return float(probe.latest()[3][2])

        try:
            assert change.wait_for_service(timeout_sec=20.0) and state() == "unconfigured"
            status(lambda d: d.get("lifecycle_state") == "unconfigured", "unconfigured in /diagnostics")
            n = probe.node
            assert n.count_publishers("/joint_states") == 0 and n.count_publishers("/clock") == 0
            assert not probe.reset_client.service_is_ready() and not probe.joint_states

            # configure: simulated and read, the drives braked (commands refused)
            assert transition(Transition.TRANSITION_CONFIGURE) and state() == "inactive"
            rest = carriage_after(5)
            assert wait_for(lambda: probe.cmd_pub.get_subscription_count() > 0, 10.0)
            for _ in range(3):
                probe.command([rest + 0.2, 0.9])
            inactive = status(lambda d: d.get("commands_refused_inactive") == "3", "three commands refused")
            assert inactive["lifecycle_state"] == "inactive" and inactive["commands_accepted"] == "0"
            assert carriage_after(20) == rest, "the braked carriage does not move"

            # activate: the drives follow
            assert transition(Transition.TRANSITION_ACTIVATE) and state() == "active"
            probe.command([rest + 0.2, 0.9])
            status(lambda d: d.get("commands_accepted") == "1" and d.get("lifecycle_state") == "active", "accepted")
            moved = carriage_after(20)
            assert moved > rest + 0.05, f"the carriage follows the command: {rest} -> {moved}"

            # deactivate: braked (to a stop where the drive got to), commands refused again
            assert transition(Transition.TRANSITION_DEACTIVATE) and state() == "inactive"
            stopped = carriage_after(30)
            probe.command([rest - 0.2, 0.9])
            status(lambda d: d.get("commands_refused_inactive") == "4", "a command refused after deactivate")
            assert carriage_after(20) == stopped, "the braked carriage does not move"

            # cleanup: nothing published; configure again: time continues, the arm at rest where it started
            last_clock = probe.clock[-1][1]
            assert transition(Transition.TRANSITION_CLEANUP) and state() == "unconfigured"
            assert wait_for(lambda: n.count_publishers("/joint_states") == 0 and n.count_publishers("/clock") == 0,
                            10.0), "publishers released"
            before = count("clock")
            assert transition(Transition.TRANSITION_CONFIGURE) and state() == "inactive"
            assert wait_for(lambda: count("clock") > before + 5, 20.0), "no /clock after configure"
            with probe.lock:
                resumed = [c for _, c, _ in probe.clock[before:]]
            assert resumed[0] > last_clock and np.all(np.diff(resumed) > 0), "simulated time never runs back"
            assert carriage_after(5) == rest, "the new arm rests in the initial pose"

            # shutdown from inactive: finalized, silent; the process still stops cleanly
            assert transition(Transition.TRANSITION_INACTIVE_SHUTDOWN) and state() == "finalized"
            assert wait_for(lambda: n.count_publishers("/joint_states") == 0, 10.0)
            assert proc.poll() is None
        finally:
            probe.close()
            context.try_shutdown()
    assert stop(proc) == 0
