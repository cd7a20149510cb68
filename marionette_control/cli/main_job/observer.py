"""The main job's in-process ROS client: it calls the services and records what the run publishes.

Everything it records carries the middleware's receive time in this process (``received_timestamp``:
CLOCK_REALTIME, so a late callback does not shift it) or the publisher's stamp; the runs are cut out
of these records afterwards (:meth:`Observer.run_data`). The last ``/diagnostics`` status of every node
is kept, so an error can say what the node said last (:meth:`Observer.describe`).

Waiting never retries a request: :meth:`Observer.call` sends once and raises :class:`MainJobError`
naming the service when it is not there or does not answer; a refusal is the caller's to report.
"""

from __future__ import annotations

import time
from typing import Callable, Optional

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Trigger

from marionette_control.cli.main_job.analysis import RunData, latencies
from marionette_interfaces.msg import TrackingState
from marionette_interfaces.srv import Disturb, OptimizeTrajectory

NS = 1_000_000_000
SIMULATOR = "marionette_simulator"
OPTIMIZER = "marionette_optimizer"
JOINT_STATES = "/joint_states"
COMMANDS = "/forward_position_controller/commands"
TRUE_STATES = f"/{SIMULATOR}/true_joint_states"


class MainJobError(RuntimeError):
    """The main job cannot go on; the message says which node, what it reported and where the logs are."""


def _stamp_ns(stamp) -> int:
    return stamp.sec * NS + stamp.nanosec


class Observer:
    """ROS client of one main job: services of the simulator, optimizer and controllers; records of joint states,
    commands, true states, each controller's ~/tracking and every node's last /diagnostics status.

    controllers : node names of the controllers the run uses (their ``~/tracking``, services and diagnostics).
    alive : called while waiting; returns an error text when a process the run needs has exited (else None).
    """

    def __init__(self, controllers: list[str], alive: Callable[[], Optional[str]] = lambda: None):
        import rclpy
        from rclpy.node import Node
        from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data

        self.rclpy = rclpy
        self.alive = alive
        rclpy.init()
        self.node = Node("marionette_main_job")
        reliable = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        self.optimize = self.node.create_client(OptimizeTrajectory, f"/{OPTIMIZER}/optimize")
        self.reset = self.node.create_client(Trigger, f"/{SIMULATOR}/reset")
        self.disturb = self.node.create_client(Disturb, f"/{SIMULATOR}/disturb")
        self.controllers = list(controllers)
        self.start = {c: self.node.create_client(Trigger, f"/{c}/start") for c in controllers}
        self.stop = {c: self.node.create_client(Trigger, f"/{c}/stop") for c in controllers}
        self.change_state = {c: self.node.create_client(ChangeState, f"/{c}/change_state") for c in controllers}
        self.joint_state_times: list[float] = []   # receive times [s]
        self.commands: list[tuple[float, list]] = []  # (receive time [s], data)
        self.truth: dict[int, tuple] = {}             # stamp [ns] -> (true positions, efforts), message order
        self.truth_names: Optional[list] = None
        self.tracking: dict[str, list] = {c: [] for c in controllers}
        self.diagnostics: dict[str, tuple[float, int, str, dict]] = {}  # status name -> (monotonic, level, msg, values)
        self.node.create_subscription(JointState, JOINT_STATES, self._on_joint_state, qos_profile_sensor_data)
        self.node.create_subscription(Float64MultiArray, COMMANDS, self._on_command, reliable)
        self.node.create_subscription(JointState, TRUE_STATES, self._on_truth, reliable)
        for c in controllers:
            self.node.create_subscription(TrackingState, f"/{c}/tracking", self.tracking[c].append, reliable)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, reliable)

    # ------------------------------------------------------------------------------ callbacks

    def _on_joint_state(self, msg, info):
        self.joint_state_times.append(info["received_timestamp"] / NS)

    def _on_command(self, msg, info):
        self.commands.append((info["received_timestamp"] / NS, list(msg.data)))

    def _on_truth(self, msg):
        if self.truth_names is None:
            self.truth_names = list(msg.name)
        self.truth[_stamp_ns(msg.header.stamp)] = (np.asarray(msg.position, dtype=float),
                                                   np.asarray(msg.effort, dtype=float))

    def _on_diagnostics(self, msg):
        now = time.monotonic()
        for st in msg.status:
            self.diagnostics[st.name] = (now, st.level[0] if isinstance(st.level, bytes) else int(st.level),
                                         st.message, {kv.key: kv.value for kv in st.values})

    # ------------------------------------------------------------------------------ waiting and calling

    def spin_until(self, done: Callable[[], bool], timeout: float, progress=None, every: float = 1.0) -> bool:
        """Spins until ``done()`` or ``timeout`` s; raises MainJobError when a process of the run has exited."""
        end = time.monotonic() + timeout
        last = time.monotonic()
        while time.monotonic() < end:
            self.rclpy.spin_once(self.node, timeout_sec=0.05)
            if done():
                return True
            dead = self.alive()
            if dead:
                raise MainJobError(dead)
            if progress is not None and time.monotonic() - last >= every:
                progress()
                last = time.monotonic()
        return done()

    def call(self, client, request, timeout: float, what: str, progress=None):
        """The response of one request (never repeated); MainJobError when the service is absent or silent."""
        node = client.srv_name.strip("/").split("/")[0]
        if not self.spin_until(client.service_is_ready, 30.0):
            raise MainJobError(f"{what}: service {client.srv_name} not available after 30 s; {self.describe(node)}")
        future = client.call_async(request)
        if not self.spin_until(future.done, timeout, progress):
            raise MainJobError(f"{what}: no answer from {client.srv_name} within {timeout:.0f} s; "
                               f"{self.describe(node)}")
        return future.result()

    def trigger(self, client, what: str):
        return self.call(client, Trigger.Request(), 10.0, what)

    def transition(self, controller: str, name: str) -> None:
        """Lifecycle transition ``name`` (configure, cleanup) of a controller; MainJobError with its reason if
        refused."""

        req = ChangeState.Request(transition=Transition(id=getattr(Transition, f"TRANSITION_{name.upper()}")))
        if not self.call(self.change_state[controller], req, 30.0, f"{controller} {name}").success:
            raise MainJobError(f"{controller} refused to {name}: {self.describe(controller)}")

    # ------------------------------------------------------------------------------ diagnostics

    def status(self, node: str) -> Optional[tuple[float, int, str, dict]]:
        """The last /diagnostics status of a node (any of its statuses; None before one arrived)."""
        for name, st in self.diagnostics.items():
            if name.split(":")[0].strip("/") == node:
                return st
        return None

    def truth_moved(self, since: int) -> float:
        """The largest change of any true position [rad or m] over the true states received from the ``since``-th
        on (message order), against the first of them; 0 without two."""
        samples = [q for q, _ in list(self.truth.values())[since:]]
        return float(np.max(np.abs(np.array(samples) - samples[0]))) if len(samples) > 1 else 0.0

    def describe(self, node: str) -> str:
        """What a node said last on /diagnostics, in one line (for error messages)."""
        st = self.status(node)
        silent = self.joint_states_silent_for() if node == SIMULATOR else None
        heard = "" if silent is None else f"; its last joint state arrived here {silent:.1f} s ago"
        if st is None:
            return f"{node}: no /diagnostics status received{heard}"
        when, level, message, values = st
        level_name = {0: "OK", 1: "WARN", 2: "ERROR", 3: "STALE"}.get(level, str(level))
        keys = ("lifecycle_state", "state", "faults.active", "tick", "transition", "trajectory_staged",
                "trajectory_error", "sim_time", "steps", "time_base_reanchors", "commands_accepted",
                "last_command_step")
        detail = ", ".join(f"{k}={values[k]}" for k in keys if values.get(k))
        faults = "; ".join(f"{k[6:]}: {v}" for k, v in values.items() if k.startswith("fault.") and v)
        return (f"{node} ({time.monotonic() - when:.1f} s ago): {level_name} '{message}'" + (f" [{detail}]" if detail
                else "") + (f"; active faults: {faults}" if faults else "") + heard)

    def fault_counts(self, node: str) -> dict:
        """{fault kind: times raised since the node started} from its last /diagnostics status (``faults.<kind>``)."""
        st = self.status(node)
        values = st[3] if st else {}
        return {k[len("faults."):]: int(v) for k, v in values.items()
                if k.startswith("faults.") and k != "faults.active" and v.isdigit()}

    def values(self, node: str, newer_than: Optional[float] = None, timeout: float = 5.0) -> dict:
        """A node's last /diagnostics values; with ``newer_than`` (time.monotonic()) from a status received after it
        (waiting up to ``timeout`` s for one); {} when there is none."""
        if newer_than is not None:
            self.spin_until(lambda: (self.status(node) or (0.0,))[0] > newer_than, timeout)
        st = self.status(node)
        return dict(st[3]) if st else {}

    def counter(self, node: str, key: str, newer_than: Optional[float] = None, timeout: float = 5.0) -> Optional[int]:
        """An integer of a node's /diagnostics values (:meth:`values`); None when there is none."""
        value = self.values(node, newer_than, timeout).get(key, "")
        return int(value) if value.isdigit() else None

    def joint_states_silent_for(self) -> Optional[float]:
        """Seconds since the last /joint_states arrived here (None: none yet)."""
        if not self.joint_state_times:
            return None
        return time.time() - self.joint_state_times[-1]

    # ------------------------------------------------------------------------------ a run's record

    def run_data(self, name: str, controller: str, feedback: bool, model, t_from: float, t_to: float,
                 push: Optional[dict], aborted: bool, faults_before: dict, lockstep: dict) -> RunData:
        """The record of a run: ``controller``'s ticks, the true states from its first tick to its last, the
        command latencies between ``t_from`` and ``t_to`` (receive times, s), the faults raised since
        ``faults_before`` (:meth:`fault_counts` at its start) and the simulator's lock-step waits and time-outs."""
        msgs = self.tracking[controller]
        if not msgs:
            raise MainJobError(f"{controller} published no ~/tracking data: {self.describe(controller)}")
        joints = list(msgs[0].command_joints)
        cfg = model.config_names[model.nd:]
        C = np.array([m.command for m in msgs])
        u = np.zeros((len(msgs), model.nU))
        u[:, model.nu:] = C[:, [joints.index(n) for n in cfg]]
        stamps = np.array([_stamp_ns(m.header.stamp) for m in msgs], dtype=np.int64)
        truth_stamps = np.array(sorted(s for s in self.truth if stamps[0] <= s <= stamps[-1]), dtype=np.int64)
        order = [self.truth_names.index(n) for n in model.config_names] if self.truth_names else []
        truth_q, truth_effort = ((np.array([self.truth[int(s)][i][order] for s in truth_stamps]) for i in (0, 1))
                                 if truth_stamps.size else (np.zeros((0, model.nq)),) * 2)
        js = np.array(self.joint_state_times)
        cmd = np.array([c[0] for c in self.commands if t_from <= c[0] <= t_to])
        faults = {k: n - faults_before.get(k, 0) for k, n in self.fault_counts(controller).items()
                  if n > faults_before.get(k, 0)}
        last = msgs[-1]
        return RunData(name=name, controller=controller, feedback=feedback,
                       k=np.array([m.tick for m in msgs]), stamp_ns=stamps,
                       x_hat=np.array([m.estimated for m in msgs]), u=u,
                       compute_us=1e6 * np.array([m.compute_time for m in msgs]),
                       fault_ticks=sum(1 for m in msgs if m.active_faults),
                       truth_stamp_ns=truth_stamps, truth_q=truth_q, truth_effort=truth_effort,
                       latency_ms=latencies(js, cmd) if js.size and cmd.size else np.zeros(0),
                       push=push, aborted=aborted, faults=faults, lockstep=lockstep,
                       plans={"switched": int(last.plan_switches), "rejected": int(last.plan_rejections)})

    def close(self) -> None:
        self.node.destroy_node()
        self.rclpy.try_shutdown()
