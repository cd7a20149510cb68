"""Simulator + controller across processes: closed loop against feed-forward only under each effect of the
hardware stand-in alone and combined, the estimator against the simulator's true state, and the offline loop
reproducing the cross-process figures.

One simulator process per scenario (its ``profile`` plus the effect's parameters) and controller processes
under their own node names — ``controller_closed`` (the gains), ``controller_open`` (``feedback: false``: the
same feed-forward u_d(k+d) without them) and, with encoder noise, ``controller_legendre`` (the plain discrete
Legendre estimate) — tracking the first 3 s of the optimized wave one after the other, the simulator reset
to its initial rest state in between. Errors are the plant's *true* angles (``~/true_joint_states``, never
seen by a controller) against the trajectory at each tick's stamp; nothing here depends on wall-clock rates
(ticks are counted, samples matched by stamp).

The trajectory is the wave as the optimizer makes it today, whose first steps ask the carriage for more
acceleration than its drive has (issue 11): the clamp and the drives deviate from it at the start in every
scenario, which is what the feed-forward-only errors of the ideal scenarios measure.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from rclpy.qos import QoSProfile, ReliabilityPolicy

from marionette_control import _core
from marionette_control.model import library
from marionette_control.ocp import request as P
from marionette_control.tracking.controller import ControllerOptions
from marionette_control.lq.gains import GainDesign, design_gains
from marionette_control.sim.offline_loop import run_loop
from marionette_control.ocp.projection import ProjectionOptimizer
from marionette_control.sim.profile import HardwareProfile
from marionette_control.trajectory import Trajectory
from ros_helpers import ProbeNode, isolated_ros

CONFIG = Path(__file__).resolve().parent.parent / "config"
STEPS = 250  # 2.5 s of the wave (raising the arm)
# The simulator is the graph's clock and waits for the command answering each joint state (lockstep_timeout,
# docs/simulator.md): however loaded the machine, a command acts exactly command_delay_steps after its sample
# (a command a cycle later still would be command jitter, an effect of its own: docs/tracking.md)
REAL_TIME_FACTOR = 1.0
LOCKSTEP_TIMEOUT = 1.0  # wall seconds a stopped controller is waited for, once
NS = 1_000_000_000
FLOOR_DEG = 0.05  # RMS the closed loop may add where the feed-forward alone is exact (measured 0.025 deg)
JOINT_NOISE = [1e-3, 1e-3, 0.0, 0.0]  # 1 mrad on the joint encoders, exact drive encoders: noise alone

#: scenario: (profile, simulator parameters, the HardwareProfile changes the offline loop applies)
SCENARIOS = {
    "delay": ("perfect", {"command_delay_steps": 1}),
    "noise": ("perfect", {"noise_std": JOINT_NOISE}),
    "drives": ("perfect", {"drive_mode": "cyclic_position"}),
    "plant": ("perfect", {"plant_model_file": "marionette_arm_plant.yaml"}),
    "combined": ("realistic", {}),
}


@pytest.fixture(scope="module")
def wave(tmp_path_factory):
    """The first STEPS of the optimized wave, with gains designed for 0 and for 1 step of command delay."""
    arm = library.get("marionette_arm")
    prob = P.build_problem(arm, motion_name="wave")
    res = ProjectionOptimizer(prob.system, prob.cost, prob.options).optimize(prob.X0, prob.U0)
    traj = Trajectory.for_model(arm, prob.dt, res.X[:STEPS + 1], res.U[:STEPS])
    system = _core.DiscreteSystem(arm, prob.dt)
    d = tmp_path_factory.mktemp("traj")
    files = {delay: design_gains(system, traj.X, traj.U, GainDesign(delay_steps=delay)).attach(traj).save(
        d / f"wave_delay{delay}.npz") for delay in (0, 1)}
    return traj, files


def _profile(scenario: str) -> HardwareProfile:
    name, changes = SCENARIOS[scenario]
    typed = {k: tuple(v) if isinstance(v, list) else v for k, v in changes.items()}
    return HardwareProfile.named(name, **typed)


def _param(name, value) -> str:
    if isinstance(value, list):
        return f"{name}:=[{', '.join(repr(float(v)) for v in value)}]"
    return f"{name}:={value}"


class Probe(ProbeNode):
    """The test's node: starts and stops controllers, resets the simulator, records ~/tracking and the true state."""

    def __init__(self, controllers):
        from sensor_msgs.msg import JointState
        from std_srvs.srv import Trigger

        from marionette_interfaces.msg import TrackingState

        super().__init__("closed_loop_probe")
        self.lock = threading.Lock()
        self.rows = {c: [] for c in controllers}
        self.truth: dict[int, np.ndarray] = {}
        qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        for c in controllers:
            self.node.create_subscription(TrackingState, f"/{c}/tracking", lambda m, c=c: self._row(c, m), qos)
        self.node.create_subscription(JointState, "/marionette_simulator/true_joint_states", self._true, qos)
        self.trigger = Trigger
        self.clients = {(c, s): self.node.create_client(Trigger, f"/{c}/{s}") for c in controllers
                        for s in ("start", "stop")}
        self.reset_client = self.node.create_client(Trigger, "/marionette_simulator/reset")

    def _row(self, c, msg):
        """(stamp ns, tick k, estimate x̂_k (nx,)) of a TrackingState."""
        row = (msg.header.stamp.sec * NS + msg.header.stamp.nanosec, msg.tick, np.asarray(msg.estimated))
        with self.lock:
            self.rows[c].append(row)

    def _true(self, msg):
        stamp = msg.header.stamp.sec * NS + msg.header.stamp.nanosec
        with self.lock:
            self.truth[stamp] = np.asarray(msg.position, dtype=float)

    def trigger_call(self, client, what: str) -> str:
        return self.call(client, self.trigger.Request(), what).message

    def track(self, controller: str, steps: int):
        """Starts ``controller``, waits for tick ``steps``, stops it; returns (stamps ns, ticks, estimates) of its
        ~/tracking up to that tick."""
        self.trigger_call(self.clients[(controller, "start")], f"{controller}/start")
        self.spin_until(lambda: self.rows[controller] and self.rows[controller][-1][1] >= steps, 60.0,
                        f"{controller} to reach tick {steps}")
        self.trigger_call(self.clients[(controller, "stop")], f"{controller}/stop")
        with self.lock:
            rows = [r for r in self.rows[controller] if r[1] <= steps]
        return (np.array([r[0] for r in rows], dtype=np.int64), np.array([r[1] for r in rows]),
                np.array([r[2] for r in rows]))


def run_scenario(scenario, wave, node_processes, estimators=("kalman",), controllers=None) -> dict:
    """{controller: (ticks k (n,), true configurations (n, nq), estimates (n, nx))} for one scenario; controllers:
    {node name: parameters} (default: controller_closed and controller_open, feedback true and false)."""
    traj, files = wave
    profile = _profile(scenario)
    name, sim_params = SCENARIOS[scenario]
    delay = profile.command_delay_steps
    controllers = controllers or {"controller_closed": {"feedback": "true"}, "controller_open": {"feedback": "false"}}
    if "legendre" in estimators:
        # feed-forward only: closed through the plain transform's noisy momenta the loop leaves the path tolerance
        # (offline, 1 mrad: at 1.1 s with the default gains, at 2.2 s with the gains before integral action); the
        # estimate is computed and published all the same
        controllers["controller_legendre"] = {"estimator": "legendre", "feedback": "false"}
    with isolated_ros() as env:
        node_processes("marionette_control.nodes.simulator", [
            "--ros-args", "--params-file", str(CONFIG / "simulator.yaml"), "-p", f"profile:={name}",
            "-p", "marker_rate:=0.0", "-p", "publish_clock:=true", "-p", f"real_time_factor:={REAL_TIME_FACTOR}",
            "-p", f"lockstep_timeout:={LOCKSTEP_TIMEOUT}",
            *[a for k, v in sim_params.items() for a in ("-p", _param(k, v))]], env)
        for c, params in controllers.items():
            node_processes("marionette_control.nodes.controller", [
                "--ros-args", "-r", f"__node:={c}", "-p", f"trajectory_file:={files[delay]}", "-p", "use_sim_time:=true",
                "-p", f"command_delay_steps:={delay}", *[a for k, v in params.items() for a in ("-p", f"{k}:={v}")]],
                env)
        probe = Probe(controllers)
        out = {}
        try:
            for c in controllers:
                probe.call(probe.reset_client, probe.trigger.Request(), "simulator reset", idempotent=True)
                seen = len(probe.truth)  # the controllers see the arm at rest again before one starts
                probe.spin_until(lambda: len(probe.truth) >= seen + 20, 10.0, "joint states after the reset")
                stamps, ticks, estimates = probe.track(c, STEPS)

                def matched():
                    with probe.lock:
                        known = np.array(sorted(probe.truth))
                    j = np.clip(np.searchsorted(known, stamps), 1, len(known) - 1)
                    near = np.where(stamps - known[j - 1] < known[j] - stamps, known[j - 1], known[j])
                    return near, np.abs(near - stamps) < 1_000_000
                probe.spin_until(lambda: len(probe.truth) > 1 and matched()[1][-5:].all(), 10.0, "the true states")
                near, ok = matched()
                have = np.flatnonzero(ok)
                with probe.lock:
                    true_q = np.array([probe.truth[int(near[i])] for i in have])
                out[c.removeprefix("controller_")] = (ticks[have], true_q, estimates[have])
        finally:
            probe.close()
    return out


def errors(traj, k, true_q) -> dict:
    """{joint: (rms_deg, max_deg)} of the true angles against the trajectory at the ticks k."""
    e = np.degrees(true_q[:, :2] - traj.X[k, :2])
    return {n: (float(np.sqrt(np.mean(e[:, i] ** 2))), float(np.max(np.abs(e[:, i]))))
            for i, n in enumerate(("shoulder", "elbow"))}


def offline(traj, files, scenario, command_interface="forward_position") -> dict:
    profile = _profile(scenario)
    t = Trajectory.load(files[profile.command_delay_steps])
    r = run_loop(t, profile, ControllerOptions(command_delay_steps=profile.command_delay_steps,
                                               command_interface=command_interface), hold_cycles=0)
    return {n: (s["rms_deg"], s["max_deg"]) for n, s in r.summary().items()}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_closed_loop_against_feed_forward_under_each_effect(scenario, wave, node_processes):
    """Every tick counted; closed loop not worse than feed-forward only on the joint where that errs most
    (with the delay alone: on both joints) — except with encoder noise alone, where feed-forward only is exact on
    the perfect plant (nothing to correct) and the test is that feedback does not amplify the noise (closed-loop
    RMS below 0.15°, under 3x the 1 mrad = 0.057° noise); the offline loop gives the same figures (stated
    tolerance)."""
    traj, files = wave
    runs = run_scenario(scenario, wave, node_processes)
    for c, (k, q, _) in runs.items():
        assert len(k) >= 0.98 * (STEPS + 1) and k[0] == 0 and k[-1] == STEPS, f"{c}: ticks {len(k)}"
    closed, opened = (errors(traj, *runs[c][:2]) for c in ("closed", "open"))
    print(f"{scenario}: closed {closed}, feed-forward only {opened}")
    worst = max(opened, key=lambda n: opened[n][0])
    # Not worse than feed-forward only, within the closed loop's own floor on an exact plant (FLOOR_DEG: where the
    # feed-forward alone is exact, as the drives scenario's can be in lock-step, the filter's estimate still moves
    # the command by a few hundredths of a degree)
    if scenario != "noise":
        assert closed[worst][0] <= opened[worst][0] + FLOOR_DEG, (closed, opened)
    if scenario == "delay":
        assert all(closed[n][0] <= opened[n][0] + FLOOR_DEG for n in closed), (closed, opened)
    if scenario not in ("plant", "combined"):  # model error: the one effect feedback only reduces (docs/tracking.md)
        assert max(v[0] for v in closed.values()) < 0.15, closed
    if scenario == "combined":  # the realistic default: issue 12's targets (the ratio: docs/tracking.md)
        assert all(rms <= 0.5 and mx <= 2.0 for rms, mx in closed.values()), closed
        assert opened[worst][0] >= 2.0 * closed[worst][0], (closed, opened)
    # the offline loop (same profile and controller, no transport) reproduces the figures within the runs' own
    # spread: the noise realisation and the tick a run starts at differ, and a command the loaded machine delays
    # acts a step late (repeated cross-process runs of one scenario differed by up to 0.06 degrees RMS)
    ref = offline(traj, files, scenario)
    for n in closed:
        assert abs(closed[n][0] - ref[n][0]) <= 0.08 + 0.15 * ref[n][0], (scenario, closed, ref)


@pytest.mark.slow
def test_joint_trajectory_commands_drive_the_simulator_node(wave, node_processes):
    """The controller with ``command_interface: joint_trajectory`` (trajectory_msgs/JointTrajectory, a command and
    its next setpoints) drives the simulator node on the realistic profile across processes: every tick counted,
    issue 12's targets met, and the offline loop's figures with the same interface reproduced (the tolerance of the
    test above) — the stamps and point times the simulator maps onto its steps are the offline loop's steps (late
    commands: test_command_lookahead.py offline; across processes this machine's own irregularities at a run's start
    dipped the string of either interface now and then, so the tension is not asserted here)."""
    traj, files = wave
    runs = run_scenario("combined", wave, node_processes,
                        controllers={"controller_trajectory": {"command_interface": "joint_trajectory"}})
    k, q, _ = runs["trajectory"]
    assert len(k) >= 0.98 * (STEPS + 1) and k[0] == 0 and k[-1] == STEPS, f"ticks {len(k)}"
    closed = errors(traj, k, q)
    ref = offline(traj, files, "combined", "joint_trajectory")
    print(f"joint_trajectory across processes {closed}, offline {ref}")
    assert all(rms <= 0.5 and mx <= 2.0 for rms, mx in closed.values()), closed
    for n in closed:
        assert abs(closed[n][0] - ref[n][0]) <= 0.08 + 0.15 * ref[n][0], (closed, ref)


def test_estimators_against_the_true_state_with_and_without_noise(wave, node_processes):
    """The estimate x̂_k against what the nominal model says the arm's true motion is (the discrete Legendre
    transform of the true configurations q_{k−1}, q_k): without noise both estimators are exact to the
    model error; with 1 mrad of joint-encoder noise the Kalman filter's momenta are far closer than the
    plain transform's, which differentiates the noise (measured ratio 0.2-0.3; the plain transform on a
    feed-forward-only run, see run_scenario)."""
    traj, _ = wave
    m = library.get("marionette_arm")
    ds = _core.DiscreteSystem(m, traj.dt)

    def momentum_errors(k, q, x_hat):
        consecutive = np.flatnonzero(np.diff(k) == 1) + 1
        ref = np.array([ds.state_from_configs(q[i - 1], q[i]) for i in consecutive])
        return np.sqrt(np.mean((x_hat[consecutive, m.nq:m.nq + m.nd] - ref[:, m.nq:m.nq + m.nd]) ** 2, axis=0))

    clean = run_scenario("delay", wave, node_processes)
    noisy = run_scenario("noise", wave, node_processes, estimators=("kalman", "legendre"))
    exact = momentum_errors(*clean["closed"])
    kalman, legendre = momentum_errors(*noisy["closed"]), momentum_errors(*noisy["legendre"])
    q_err = np.sqrt(np.mean((noisy["closed"][2][:, :2] - noisy["closed"][1][:, :2]) ** 2, axis=0))
    print(f"momentum RMS error [N m s]: no noise {exact}, 1 mrad: Kalman {kalman}, Legendre {legendre}; "
          f"Kalman angle error {q_err} rad")
    assert np.all(exact < 1e-6), exact  # the perfect plant is the model
    assert np.all(kalman < 0.5 * legendre), (kalman, legendre)
    assert np.all(q_err < 1e-3), q_err  # below the encoder noise
