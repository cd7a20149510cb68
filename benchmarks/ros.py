"""ROS group: marionette_controller's tick cost, end-to-end latency and sustained joint-state rate (issue 5).

Scenario: the marionette arm tracking a trajectory simulated from rest at its lowered
equilibrium with smooth carriage/string inputs (gains by ``gains.design_gains``), joint
states on the trajectory plus a small perturbation. Figures:

* ``controller.tick_compute.{median,p99}`` — :meth:`ControllerCore.on_joint_state` on
  sensor_msgs/JointState messages (name mapping, stamp and content checks, ring buffer,
  discrete Legendre transform in the compiled core, feedback law, clamping), in process,
  one call per tick over the whole trajectory (GC paused). Target p99 ≤ 100 µs.
* ``controller.tick_callback.{median,p99}`` — the node's whole joint-state callback in
  process, on the serialized message its raw subscription takes (parsing, clock read, the
  core, command and ~/tracking publication; no subscribers).
* ``controller.tick_compute_in_node.{median,p99}`` — the core's time as the node process
  measured it during the latency run (its /diagnostics), i.e. under transport load.
* ``controller.end_to_end_latency.{median,p99}`` — across processes: from this process
  publishing a /joint_states message (100 Hz, stamped now; ``time.time_ns()`` just before
  ``publish``) to the command it produced *arriving in this process*: the middleware's
  ``received_timestamp`` of the command (rclpy's MessageInfo; Fast DDS stamps it in its receive
  thread on CLOCK_REALTIME, the clock of ``time.time_ns()``). Reliable, localhost, isolated
  domain; both sides rclpy, the controller with its default EventsExecutor. Target p99 ≤ 2 ms.
  The same measurement against a minimal rclpy echo process (JointState in → Float64MultiArray
  out, same QoS and executor, rclpy's usual message conversion) is given as the peer
  ``rclpy_echo``: the floor of a plain rclpy node, so the ratio is the controller's overhead (the
  controller takes /joint_states serialized and parses only what it needs, which the plain echo
  does not: that part of the floor it avoids). Echo and controller take turns, three rounds of 500 samples
  each, every round a fresh process of each (the machine's state drifts between runs). Two more figures of the same samples, so nothing is hidden:
  ``controller.end_to_end_latency_callback.*`` — to this process's subscription callback running
  (the figure reported before: it adds this measuring process's own Python executor dispatch,
  ~0.15 ms) and ``controller.end_to_end_latency_sent.*`` — to the other process *publishing* the
  command (the command's ``source_timestamp``: incoming transport and that process's callback).
  ``*_rt`` variants: this process, the echo and the controller all SCHED_FIFO 50 (the
  controller's ``realtime_priority``), when permitted.
* ``controller.sustained_rate`` — the highest joint-state rate (of the tried ones) at which,
  with a trajectory of Δt = 1/rate so that *every* sample is a tick, the node received every
  sample and computed a command for every one after the first (no drop, hold or missed
  tick) for the whole run. Target ≥ 500 Hz. Per-rate counts are in the notes.

Times include Python call overhead, as the node pays it. Nothing here asserts a time.
"""

from __future__ import annotations

import gc
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.registry import Context, Figure, benchmark_group
from marionette_control.cli.ros_isolation import claim_domain_id, in_graph, isolated_env

ROOT = Path(__file__).resolve().parent.parent
NS = 1_000_000_000
NAMES = ["shoulder", "elbow", "carriage", "string_length"]
COMMANDS = "/forward_position_controller/commands"


# --------------------------------------------------------------------------------------------- scenario


def arm_trajectory(dt: float, steps: int):
    """(model description, DiscreteSystem, Trajectory with gains) of the arm (module docstring)."""
    from marionette_control import _core
    from marionette_control.lq.gains import design_gains
    from marionette_control.trajectory import Trajectory
    from marionette_control.model.library import marionette_arm as ma

    desc = ma.load_description()
    m = desc.model
    ds = _core.DiscreteSystem(m, dt)
    q0 = ma.static_equilibrium(m, *ma.LOWERED).q
    s = np.sin(np.pi * np.arange(1, steps + 1) / steps) ** 2
    U = np.stack([q0[2] + 0.10 * s, q0[3] - 0.08 * s], axis=1)
    X, _ = ds.simulate(ds.state_from_configs(q0, q0), U)
    return desc, ds, design_gains(ds, X, U).attach(Trajectory.for_model(m, dt, X, U))


def measured(traj, i: int) -> np.ndarray:
    return traj.X[min(i, traj.N), :4] + 1e-3 * np.array([1.0, -0.5, 0.3, -0.2]) * np.cos(0.3 * i)


def joint_state(q, stamp: int):
    from sensor_msgs.msg import JointState

    m = JointState()
    m.header.stamp.sec, m.header.stamp.nanosec = divmod(int(stamp), NS)
    m.name = NAMES
    m.position = [float(v) for v in q]
    return m


def pct(samples, p: float) -> float:
    return float(np.percentile(np.asarray(samples), p))


# --------------------------------------------------------------------------------------------- processes


_domain: list[int] = []


def ros_env() -> dict:
    """Environment of an isolated graph: localhost discovery, a private domain id in 101-200 (apart from the
    tests' 1-100), the same for every graph of this run, held until it exits."""
    if not _domain:
        _domain.append(claim_domain_id(101, 200))
    return isolated_env(_domain[0])


def isolated_graph():
    """This process on an isolated graph (:func:`ros_env`'s) for the duration; yields the environment for the
    node processes it starts."""
    return in_graph(ros_env())


class Process:
    """A node process in its own process group, always stopped (SIGINT, SIGTERM, SIGKILL)."""

    def __init__(self, args: list[str], env: dict, log: Path):
        self.log = log
        self._f = open(log, "w")
        self.proc = subprocess.Popen([sys.executable, *args], env=env, cwd=ROOT, stdout=self._f,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> int:
        for sig, wait in ((signal.SIGINT, 10.0), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            if self.proc.poll() is not None:
                break
            try:
                os.killpg(self.proc.pid, sig)
                self.proc.wait(wait)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                continue
        self._f.close()
        return self.proc.wait(5.0)


def with_message_info(callback):
    """``callback(msg, info)`` as a subscription callback that gets rclpy's MessageInfo under every executor.

    rclpy 9.1's EventsExecutor calls a subscription callback that asks for the message info (a callable
    of two positional arguments) with *one* argument, the ``(msg, info)`` tuple (the Python executors
    pass two), so the callback declares two parameters (what rclpy inspects) and accepts both forms.
    """
    import inspect

    def receive(*args):
        msg, info = args if len(args) == 2 else args[0]
        callback(msg, info)

    P = inspect.Parameter
    receive.__signature__ = inspect.Signature([P("msg", P.POSITIONAL_ONLY), P("info", P.POSITIONAL_ONLY)])
    return receive


class Rig:
    """This process's side: joint states out, commands and diagnostics in, start/stop, parameters."""

    def __init__(self, context, node_name: str = "/marionette_controller"):
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from rcl_interfaces.srv import SetParameters
        from rclpy.experimental import EventsExecutor
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray
        from std_srvs.srv import Trigger

        self.node = rclpy.create_node("bench_rig", context=context)
        self.executor = EventsExecutor(context=context)
        self.executor.add_node(self.node)
        reliable = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        self.pub = self.node.create_publisher(JointState, "/joint_states", reliable)
        # per command received: (perf_counter in the callback, its source_timestamp, its received_timestamp);
        # the two timestamps are the middleware's, in ns of CLOCK_REALTIME (time.time_ns)
        self.recv: list[tuple[float, int, int]] = []
        self.diag: dict = {}
        self.node.create_subscription(Float64MultiArray, COMMANDS, with_message_info(self._on_command), reliable)

        def on_diag(msg):
            for st in msg.status:
                if st.name.startswith("marionette_controller"):
                    self.diag = {kv.key: kv.value for kv in st.values}

        self.node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, reliable)
        from lifecycle_msgs.srv import ChangeState

        self.start_client = self.node.create_client(Trigger, f"{node_name}/start")
        self.stop_client = self.node.create_client(Trigger, f"{node_name}/stop")
        self.param_client = self.node.create_client(SetParameters, f"{node_name}/set_parameters")
        self.change_state_client = self.node.create_client(ChangeState, f"{node_name}/change_state")
        self._trigger = Trigger

    def _on_command(self, _msg, info) -> None:
        self.recv.append((time.perf_counter(), info["source_timestamp"], info["received_timestamp"]))

    def spin_for(self, seconds: float) -> None:
        end = time.perf_counter() + seconds
        while True:
            left = end - time.perf_counter()
            if left <= 0:
                return
            self.executor.spin_once(timeout_sec=min(left, 0.05))

    def spin_until(self, predicate, timeout: float) -> bool:
        end = time.perf_counter() + timeout
        while not predicate():
            left = end - time.perf_counter()
            if left <= 0:
                return False
            self.executor.spin_once(timeout_sec=min(left, 0.05))
        return True

    def connect(self, timeout: float = 20.0, service: bool = True) -> bool:
        """Waits for the node (the controller: configures it, a lifecycle node starts unconfigured) and for its
        joint-state subscription and command publisher."""
        if service:
            from lifecycle_msgs.msg import Transition
            from lifecycle_msgs.srv import ChangeState

            if not self.spin_until(lambda: self.start_client.service_is_ready()
                                   and self.change_state_client.service_is_ready(), timeout):
                return False
            request = ChangeState.Request(transition=Transition(id=Transition.TRANSITION_CONFIGURE))
            if not self.call(self.change_state_client, request, timeout).success:
                return False
        return self.spin_until(lambda: self.pub.get_subscription_count() > 0
                               and self.node.count_publishers(COMMANDS) > 0, timeout)

    def call(self, client, request, timeout: float = 5.0):
        fut = client.call_async(request)
        self.spin_until(fut.done, timeout)
        if not fut.done():
            raise RuntimeError(f"no answer from {client.srv_name}")
        return fut.result()

    def trigger(self, client):
        res = self.call(client, self._trigger.Request())
        return res.success, res.message

    def set_param(self, name: str, value):
        from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
        from rcl_interfaces.srv import SetParameters

        if isinstance(value, str):
            pv = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=value)
        else:
            pv = ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=float(value))
        req = SetParameters.Request(parameters=[Parameter(name=name, value=pv)])
        res = self.call(self.param_client, req).results[0]
        if not res.successful:
            raise RuntimeError(f"setting {name} failed: {res.reason}")

    def fresh_diag(self, timeout: float = 2.0) -> dict:
        self.diag = {}
        self.spin_until(lambda: bool(self.diag), timeout)
        return self.diag

    def close(self):
        self.node.destroy_node()
        self.executor.shutdown()


# --------------------------------------------------------------------------------------------- measurements


def tick_compute(steps: int, sweeps: int) -> list[float]:
    """Seconds per ControllerCore.on_joint_state call, every sample a tick, GC paused."""
    from marionette_control.tracking.controller import core_from_description

    desc, _, traj = arm_trajectory(0.01, steps)
    msgs = [joint_state(measured(traj, i), 0) for i in range(steps + 1)]
    out: list[float] = []
    pc = time.perf_counter_ns
    for sweep in range(sweeps):
        core = core_from_description(desc)  # the node's defaults: Kalman filter, one step of command delay
        core.load_trajectory(traj, "bench")
        core.start()
        t0 = (100 + 1000 * sweep) * NS
        core.on_joint_state(msgs[0], t0, t0)
        gc_was = gc.isenabled()
        gc.disable()
        try:
            for i in range(1, steps + 1):
                s = t0 + i * 10_000_000
                a = pc()
                res = core.on_joint_state(msgs[i], s, s)
                out.append((pc() - a) / NS)
                if res.kind != "tick":
                    raise RuntimeError(f"benchmark sample {i} was not a tick: {res.fault_message}")
        finally:
            if gc_was:
                gc.enable()
    return out


def tick_callback(steps: int, traj_file: Path) -> list[float]:
    """Seconds per node joint-state callback on serialized messages (in process, publishers without subscribers)."""
    import rclpy
    from rclpy.parameter import Parameter
    from rclpy.lifecycle import TransitionCallbackReturn
    from rclpy.serialization import serialize_message

    from marionette_control.trajectory import Trajectory
    from marionette_control.nodes.controller import ControllerNode

    traj = Trajectory.load(traj_file)  # the samples follow the node's trajectory (its path tolerance would abort)
    context = rclpy.context.Context()
    with isolated_graph():
        rclpy.init(context=context)
        node = None
        try:
            node = ControllerNode(context=context, parameter_overrides=[
                Parameter("trajectory_file", value=str(traj_file)), Parameter("state_timeout", value=60.0)])
            if not (node.trigger_configure() == node.trigger_activate() == TransitionCallbackReturn.SUCCESS):
                raise RuntimeError(node.transition_message)
            # stamped from a second ahead: the first sample is current however long building the messages takes (a
            # run's first tick passes over samples that queued, ControllerCore._accept; state_timeout covers it)
            now = node.get_clock().now().nanoseconds + NS
            # the callback's argument: the serialized message, as its raw subscription takes it
            msgs = [serialize_message(joint_state(measured(traj, i), now + i * 10_000_000)) for i in range(steps + 1)]
            node._on_joint_state(msgs[0])
            out = []
            pc = time.perf_counter_ns
            gc.disable()
            try:
                for m in msgs[1:]:
                    a = pc()
                    node._on_joint_state(m)
                    out.append((pc() - a) / NS)
            finally:
                gc.enable()
            if node.core.ticks != steps + 1:  # (the first sample is tick 0 too)
                raise RuntimeError(f"in-process node computed {node.core.ticks} ticks of {steps + 1}: "
                                   f"{node.core.status()}")
            return out
        finally:
            if node is not None:
                node.destroy_node()
            context.try_shutdown()


def _extend(into: dict, samples: dict) -> None:
    """Appends each list of ``samples`` ({figure: latencies}) to ``into``'s."""
    for kind, values in samples.items():
        into.setdefault(kind, []).extend(values)


def latency_run(rig: Rig, n: int, rate: float, traj, positions=measured) -> tuple[dict, int]:
    """Lock-step: publish a joint state stamped now, wait for its command; ({figure: latencies (s)}, lost).
    The i-th joint state's positions are ``positions(traj, i)`` (default: :func:`measured`).

    Per sample, from the publication of the joint state (``time.time_ns()`` and ``perf_counter`` just before
    ``publish``) to
    ``received``: the command's arrival in this process (the middleware's ``received_timestamp``, set by its
        receive thread on CLOCK_REALTIME: what this process's executor and Python callback add is not in it);
    ``callback``: this process's subscription callback running (``perf_counter``; the figure measured before,
        which adds this process's executor dispatch);
    ``sent``: the command's publication by the other process (its ``source_timestamp``, same clock, same
        machine): incoming transport plus the other process's whole callback.
    """
    period = 1.0 / rate
    lat: dict[str, list[float]] = {"received": [], "callback": [], "sent": []}
    lost = 0
    pc = time.perf_counter
    next_t = pc() + period
    for i in range(n + 1):
        while pc() < next_t:
            rig.executor.spin_once(timeout_sec=max(0.0, min(next_t - pc(), 0.01)))
        next_t += period
        msg = joint_state(positions(traj, i), 0)
        count = len(rig.recv)
        stamp = rig.node.get_clock().now().nanoseconds
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp, NS)
        t_pub_ns = time.time_ns()
        t_pub = pc()
        rig.pub.publish(msg)
        if i == 0:
            continue  # the first sample after start has no predecessor: no command
        if rig.spin_until(lambda: len(rig.recv) > count, 0.5 * period):
            t_cb, source_ns, received_ns = rig.recv[count]
            lat["received"].append((received_ns - t_pub_ns) / NS)
            lat["callback"].append(t_cb - t_pub)
            lat["sent"].append((source_ns - t_pub_ns) / NS)
        else:
            lost += 1  # (a late command must not be taken for the next sample's: drain it)
            rig.spin_until(lambda: len(rig.recv) > count, 0.05)
    return lat, lost


def rate_run(rig: Rig, rate: float, seconds: float, traj) -> dict:
    """Starts the controller and publishes stamps on an exact 1/rate grid, paced by the wall clock; counts what
    the node did (from its /diagnostics counters, before and after)."""
    period_ns = int(round(NS / rate))
    n = int(rate * seconds)
    msgs = [joint_state(measured(traj, i), 0) for i in range(-1, n)]
    pc = time.perf_counter_ns
    # the grid starts after the start request and the diagnostics snapshot below: while no samples flow, the node
    # publishes /diagnostics within two of its periods (0.1 s here), and a grid already begun would make the
    # first samples late and send them in a burst
    base = rig.node.get_clock().now().nanoseconds + 300_000_000
    # one sample on the grid before start: fresh data (clears a stale fault while idle) and the predecessor
    # of the first tick
    msgs[0].header.stamp.sec, msgs[0].header.stamp.nanosec = divmod(base - period_ns, NS)
    rig.pub.publish(msgs[0])
    rig.spin_for(0.02)
    ok, text = rig.trigger(rig.start_client)
    if not ok:
        raise RuntimeError(f"start refused at {rate} Hz: {text}")
    before = rig.fresh_diag()
    recv0 = len(rig.recv)
    t0_wall = pc() + (base - rig.node.get_clock().now().nanoseconds)
    max_lag = 0
    for i, msg in enumerate(msgs[1:]):
        due = t0_wall + i * period_ns
        while True:
            left = due - pc()
            if left <= 0:
                break
            rig.executor.spin_once(timeout_sec=min(left / NS, 0.002))
        max_lag = max(max_lag, pc() - due)
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(base + i * period_ns, NS)
        rig.pub.publish(msg)
    rig.spin_for(0.3)
    after = rig.fresh_diag()
    back = len(rig.recv) - recv0
    rig.trigger(rig.stop_client)

    def delta(key):
        return int(after.get(key, 0)) - int(before.get(key, 0))

    r = {"rate": rate, "sent": n, "received": delta("samples_received"), "ticks": delta("ticks"),
         "holds": delta("hold_commands"), "missed": delta("missed_ticks"), "rejected": delta("samples_rejected"),
         "commands_back": back, "publisher_max_lag_ms": max_lag / 1e6}
    r["clean"] = (r["received"] == n and r["ticks"] == n and r["holds"] == 0 and r["missed"] == 0
                  and r["rejected"] == 0)
    return r


def set_priority(priority: int) -> None:
    """SCHED_FIFO at ``priority`` (0: back to the default scheduler) for every thread of this process."""
    from marionette_control.nodes.process import set_realtime_priority

    if priority:
        error = set_realtime_priority(priority)
        if error:
            raise RuntimeError(error)
        return
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setscheduler(int(tid), os.SCHED_OTHER, os.sched_param(0))
        except OSError:
            pass


def realtime_permitted() -> bool:
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except (OSError, AttributeError):
        return False
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    return True


def echo_main(priority: int = 0) -> None:
    """Minimal rclpy echo (the peer): each JointState → one Float64MultiArray, same QoS and executor."""
    import rclpy
    from rclpy.executors import ExternalShutdownException
    from rclpy.experimental import EventsExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    rclpy.init()
    node = rclpy.create_node("marionette_controller_echo")
    pub = node.create_publisher(Float64MultiArray, COMMANDS, QoSProfile(depth=10,
                                                                         reliability=ReliabilityPolicy.RELIABLE))
    out = Float64MultiArray()

    def on_js(msg):
        out.data = [msg.position[2], msg.position[3]]
        pub.publish(out)

    node.create_subscription(JointState, "/joint_states", on_js, qos_profile_sensor_data)
    ex = EventsExecutor()
    ex.add_node(node)
    try:
        ex.spin_once(timeout_sec=0.0)
        if priority:
            set_priority(priority)
        while rclpy.ok():
            ex.spin_once(timeout_sec=0.2)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


# --------------------------------------------------------------------------------------------- group


@benchmark_group("ros", "marionette_controller: per-tick compute, end-to-end latency across processes, "
                        "sustained joint-state rate")
def ros(ctx: Context) -> list[Figure]:
    try:
        import rclpy
    except ImportError:
        ctx.log("ros: rclpy not installed; group skipped")
        return []
    quick = ctx.quick
    figs: list[Figure] = []

    def fig(name, value, unit, notes, peer=None):
        figs.append(Figure(name, value, unit, "ros", peer, notes))

    steps = 500 if quick else 2000
    sweeps = 2 if quick else 5
    ctx.log(f"ros: ControllerCore tick, {steps} ticks x {sweeps} sweeps")
    t = tick_compute(steps, sweeps)
    note = f"ControllerCore.on_joint_state back to back, every call a tick; {steps} ticks x {sweeps} sweeps, GC paused"
    fig("controller.tick_compute.median", 1e6 * statistics.median(t), "us", note)
    fig("controller.tick_compute.p99", 1e6 * pct(t, 99), "us", note + "; target <= 100 us")
    fig("controller.tick_compute.max", 1e6 * max(t), "us", note)

    tmp = Path(tempfile.mkdtemp(prefix="bench_ros_"))
    _, _, traj100 = arm_trajectory(0.01, 3000)
    f100 = traj100.save(tmp / "arm_100hz.npz")
    ctx.log("ros: node callback in process")
    t = tick_callback(steps, f100)
    note = (f"whole /joint_states callback of the node in process, back to back (clock, core, command + ~/tracking "
            f"publish, no subscribers); {steps} ticks, GC paused")
    fig("controller.tick_callback.median", 1e6 * statistics.median(t), "us", note)
    fig("controller.tick_callback.p99", 1e6 * pct(t, 99), "us", note)

    rt = 50 if realtime_permitted() else 0
    if not rt:
        ctx.log("ros: SCHED_FIFO not permitted here: the realtime_priority variant is skipped")
    with isolated_graph() as env:
        context = rclpy.context.Context()
        rclpy.init(context=context)
        procs: list[Process] = []
        rig = None
        n_lat = 300 if quick else 1500
        rounds = 1 if quick else 3
        try:
            rig = Rig(context)
            variants = [("", 0)] + ([("_rt", rt)] if rt else [])
            for suffix, prio in variants:
                set_priority(prio)
                how = (f"both processes and this one SCHED_FIFO {prio} (controller parameter realtime_priority)" if prio
                       else "default scheduler")
                lat_echo, lat = {}, {}
                lost_echo = lost = 0
                # echo and controller in turns, each round a fresh process of each: the machine's state drifts (other
                # jobs, the host), and what one took while it was quiet and the other while it was not is no ratio
                for r in range(rounds):
                    ctx.log(f"ros: rclpy echo round trip (transport floor), {how}, round {r + 1}/{rounds}")
                    echo = Process(["-m", "benchmarks.ros", "echo", str(prio)], env, tmp / f"echo{suffix}.log")
                    procs.append(echo)
                    if not rig.connect(service=False):
                        raise RuntimeError(f"echo process did not connect; log: {echo.log.read_text()}")
                    rig.spin_for(0.2)
                    got, missed = latency_run(rig, n_lat // rounds, 100.0, traj100)
                    _extend(lat_echo, got)
                    lost_echo += missed
                    echo.stop()
                    rig.spin_until(lambda: rig.node.count_publishers(COMMANDS) == 0, 5.0)

                    ctx.log(f"ros: controller end-to-end latency at 100 Hz, {how}, round {r + 1}/{rounds}")
                    ctrl = Process(["-m", "marionette_control.nodes.controller", "--ros-args", "-p",
                                    f"trajectory_file:={f100}", "-p", "diagnostics_period:=0.1", "-p",
                                    f"realtime_priority:={prio}"], env, tmp / f"controller{suffix}.log")
                    procs.append(ctrl)
                    if not rig.connect():
                        raise RuntimeError(f"controller did not come up; log: {ctrl.log.read_text()}")
                    ok, msg = rig.trigger(rig.start_client)
                    if not ok:
                        raise RuntimeError(f"start refused: {msg}")
                    got, missed = latency_run(rig, n_lat // rounds, 100.0, traj100)
                    _extend(lat, got)
                    lost += missed
                    diag = rig.fresh_diag()
                    rig.trigger(rig.stop_client)
                    last = suffix == variants[-1][0] and r == rounds - 1
                    if not last:   # (the last controller goes on to the sustained rate)
                        ctrl.stop()
                        rig.spin_until(lambda: rig.node.count_publishers(COMMANDS) == 0, 5.0)
                what = {
                    "": "/joint_states published (stamped now) -> the command's arrival in this process (the "
                        "middleware's received_timestamp; this process's executor and callback not included)",
                    "_callback": "/joint_states published -> this process's subscription callback running (the figure "
                                 "measured before: adds this process's Python executor dispatch)",
                    "_sent": "/joint_states published -> the command published by the other process (its "
                             "source_timestamp: incoming transport and the other process's whole callback)",
                }
                for kind, fig_suffix in (("received", ""), ("callback", "_callback"), ("sent", "_sent")):
                    ours, echo_lat = lat[kind], lat_echo[kind]
                    lat_note = (f"{what[fig_suffix]}; across processes, lock-step at 100 Hz, {how}; {len(ours)} "
                                f"samples in {rounds} round(s) interleaved with the echo's, {lost} without a command "
                                "within half a period")
                    echo_note = (f"{what[fig_suffix]}; the same measurement against a minimal rclpy echo process "
                                 f"(EventsExecutor), {how}; {len(echo_lat)} samples in {rounds} round(s), {lost_echo} "
                                 "lost")
                    for q, fn in (("median", statistics.median), ("p99", lambda v: pct(v, 99))):
                        target = "; target p99 <= 2 ms" if q == "p99" and not fig_suffix else ""
                        name = f"controller.end_to_end_latency{fig_suffix}{suffix}.{q}"
                        fig(name, 1e3 * fn(ours), "ms", lat_note + target)
                        if echo_lat:
                            fig(name, 1e3 * fn(echo_lat), "ms", echo_note, peer="rclpy_echo")
                in_node = "the core's per-tick time as the node process measured it during the latency run's last " \
                          f"round (its /diagnostics): ticks 10 ms apart, {how}"
                fig(f"controller.tick_compute_in_node{suffix}.median", float(diag.get("compute_time_median_us", "nan")),
                    "us", in_node)
                fig(f"controller.tick_compute_in_node{suffix}.p99", float(diag.get("compute_time_p99_us", "nan")), "us",
                    in_node)

            # --- sustained rate (the last controller): every sample is a tick (trajectory dt = 1/rate)
            rates = [500.0, 1000.0, 2000.0] if quick else [250.0, 500.0, 1000.0, 1500.0, 2000.0, 3000.0]
            seconds = 1.0 if quick else 2.0
            results = []
            best = 0.0
            # a long timeout keeps the watchdog's stale holds between runs out of the counts (the publisher's lag
            # behind its stamps is reported instead)
            rig.set_param("state_timeout", 5.0)
            for rate in rates:
                _, _, tr = arm_trajectory(1.0 / rate, int(rate * seconds) + 10)
                rig.set_param("trajectory_file", str(tr.save(tmp / f"arm_{int(rate)}hz.npz")))
                ctx.log(f"ros: sustained rate {rate:g} Hz for {seconds:g} s")
                r = rate_run(rig, rate, seconds, tr)
                results.append(r)
                ctx.log(f"ros:   {r}")
                if not r["clean"]:
                    break
                best = rate
            notes = "; ".join(f"{r['rate']:g} Hz: sent {r['sent']}, received {r['received']}, ticks {r['ticks']}, "
                              f"holds {r['holds']}, missed {r['missed']}, commands back {r['commands_back']}, "
                              f"publisher max lag {r['publisher_max_lag_ms']:.1f} ms" for r in results)
            fig("controller.sustained_rate", best, "Hz",
                f"highest rate (of {', '.join(f'{r:g}' for r in rates)}) before the first with a lost, rejected or "
                f"unticked sample (trajectory dt = 1/rate, every sample a tick), {seconds:g} s each, {how}; target >= "
                f"500 Hz; {notes}")
            if not ctrl.alive():
                raise RuntimeError(f"controller died; log: {ctrl.log.read_text()}")
        finally:
            set_priority(0)
            if rig is not None:
                rig.close()
            for p in procs:
                p.stop()
            context.try_shutdown()
    return figs


if __name__ == "__main__":
    if len(sys.argv) in (2, 3) and sys.argv[1] == "echo":
        echo_main(int(sys.argv[2]) if len(sys.argv) == 3 else 0)
    else:
        sys.exit("usage: python -m benchmarks.ros echo [priority]   (the benchmark: python -m benchmarks.run --only ros)")
