"""marionette_mpc: receding-horizon re-planning of the motion a marionette_controller tracks (issue 14).

A node of its own (not a mode of the optimizer, whose requests take seconds and would block
re-planning): it follows the controller's ``~/tracking`` output and, every ``period`` seconds of
ticks, re-optimizes the rest of the motion from the controller's state estimate and publishes the
plan on ``~/plan``, which the controller takes at the plan's first step
(:meth:`~marionette_control.tracking.controller.ControllerCore.offer_plan`). The computation is
:class:`~marionette_control.ocp.mpc.RecedingHorizon` (docs/mpc.md), ROS-free and the same the
offline loop runs.

What it needs
-------------
The motion: the trajectory the controller tracks, from ``trajectory_file`` or else the optimizer's
latched ``trajectory_topic`` (as the controller gets it). The problem it is the optimum of: the YAML
spec ``problem_spec`` (``marionette-optimize``'s format, e.g. ``optimize/marionette_arm_wave.yaml``)
or, when that is empty, the problem the optimizer node builds for a request of the motion library's
``motion`` with its default options. A motion whose steps, Δt or model differ from the problem's is
refused (logged, in /diagnostics) and nothing is planned. The plans' gains are designed the way the
motion's were (its design record: weights and the controller's command delay). The drives' limits the
controller clamps to and the hardware joint names of its commands come from ``model_file``.

One update
----------
For each ``~/tracking`` message (TrackingState) of tick k: the node keeps the commands the controller
sent (a CommandHistory in model order, from the message's ``command`` by joint name) and its law (the
motion and the plan in effect, ``plan``: the node's own plans by sequence number), both per ``run``.
When k is a multiple of the period (in ticks) and the plan would start within the motion, it
predicts x̂_k to step j = k + d + ``latency_steps`` and re-optimizes (RecedingHorizon.update); a plan
is published with the message's stamp, the run and j. The plan is due before the controller computes
tick k + ``latency_steps``, whose sample is stamped ``latency_steps``·Δt after the estimate's: the
update's deadline (:class:`~marionette_control.ocp.mpc.Deadline`) is that time less
``transport_margin``, at most ``deadline`` after the update starts, on the node's clock (ROS time: the
system clock on the robot, /clock under use_sim_time, so a simulation slower than real time gives the
update the wall time it gives the controller). The executor's one thread only records and predicts;
the optimization runs on a worker thread of its own (:mod:`~marionette_control.latest_worker`,
which says why not on an executor's), so the node's clock and the commands it records keep up while
one runs. An estimate due while an update still runs waits for it, replacing any older one waiting
(``superseded``, as is a plan finished after the controller started another run or the motion changed:
not published); one with less than 2 ms left when its update starts is skipped (``stale_estimate``:
the node fell behind). An update that misses its deadline publishes nothing (``deadline_missed``); a
plan that arrives late anyway is refused by the controller (``late``, in its counts).

Online identification (``identify``, off by default; docs/mpc.md)
----------------------------------------------------------------
With parameter names in ``identify`` the node also reads the measured joint states the controller reads
(``joint_states_topic``, by the model file's hardware joint names,
:class:`~marionette_control.tracking.joint_states.JointStateReader`; a sample missing by its stamp, or unreadable,
is a gap the window waits out) into an
:class:`~marionette_control.identification.online.OnlineIdentification`. After each update the fit runs on a
thread of its own (``mpc-identification``, with the updates' priority), so that a slow fit never holds an update
back; a model it adopts is taken when the next update's estimate arrives while no update runs, before its
prediction (:meth:`~marionette_control.ocp.mpc.RecedingHorizon.identify`), so that the prediction and the plan are
on one model. With ``method`` 'receding_horizon' only: the real-time iteration with identification let the string go
slack on damping ×3 offline (docs/mpc.md). /diagnostics adds the fits' counts by reason, the estimates in use and the fit times.

Re-planning every tick (``method`` 'rti', issue 28)
--------------------------------------------------
With ``method`` 'rti' an update is one real-time iteration (:class:`~marionette_control.ocp.rti.RealTimeIteration`,
docs/mpc.md "Re-planning every tick") from every tick's estimate: ``period`` is one tick, the estimate is predicted
and refused as above, and on the worker thread the feedback step (one LQ rollout and a projection from the predicted
state, on the linearization prepared before) makes the plan, published unless done after its due time or
``deadline`` (``deadline_missed``); then the preparation for the next tick's plan runs, before its estimate arrives.
The update's time is the feedback's; the preparations' times are in /diagnostics apart (``prepare_ms``), the
iterations' outcomes (``step_<γ>``, ``clamped_<γ>``, ``infeasible``) in ``updates.<reason>``.
:mod:`marionette_control.nodes.replanning` runs it in the controller's process.

Graph (names relative to the node's namespace)
----------------------------------------------
subscribes ``tracking_topic`` (TrackingState, reliable, depth 100), ``trajectory_topic``
(TrackedTrajectory, reliable + transient local) unless ``trajectory_file`` is set, ``joint_states_topic``
(sensor_msgs/JointState, sensor-data QoS) with ``identify`` only;
publishes ``~/plan`` (marionette_interfaces/Plan, reliable) and ``/diagnostics`` (one status
"marionette_mpc: planning" every ``diagnostics_period``: the motion, updates, plans published, the
outcome of every update by reason, the update time's median, p99 and max over the last 500 updates,
wall clock and thread CPU, skipped messages by reason, the last update).

Parameters: :data:`marionette_control.ocp.mpc_options.PARAMS` (with their descriptions) and ``config/mpc.yaml``. The process stops on
SIGINT/SIGTERM with status 0 (:mod:`marionette_control.nodes.process`).
"""

from __future__ import annotations

import collections
import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import Optional

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import JointState

from marionette_interfaces.msg import Plan as PlanMsg
from marionette_interfaces.msg import TrackedTrajectory, TrackingState
from marionette_control.tracking.command_limits import CommandLimits
from marionette_control.identification.online import planner_identification
from marionette_control.model.joint_map import JointMap
from marionette_control.resources import config_file
from marionette_control.tracking.joint_states import JointStateError, JointStateReader
from marionette_control import _core
from marionette_control.ocp import blas_threads
from marionette_control.ocp.mpc import Deadline, RecedingHorizon, Update
from marionette_control.ocp.mpc_options import PARAMS, command_inputs, mpc_options, planners, planning_problem
from marionette_control.ocp.rti import RealTimeIteration
from marionette_control.tracking.plan_switch import PlannedLaw
from marionette_control.tracking.prediction import CommandHistory
from marionette_control.tracking.law import TrackingLaw
from marionette_control.trajectory import Trajectory, TrajectoryError
from marionette_control.model.limits import from_description
from marionette_control.model.yaml_model import load_packaged_model
from marionette_control.nodes.convert import plan_to_msg, trajectory_from_msg
from marionette_control.latest_worker import LatestJobWorker
from marionette_control.nodes.names import status_name
from marionette_control.nodes.node_time import NodeTime
from marionette_control.nodes.params import declare
from marionette_control.nodes.process import run_node
from marionette_control.parameters import ParameterError

NODE_NAME = "marionette_mpc"
NS = 1_000_000_000
#: an estimate with less time than this left before its plan is due is not planned from [s]
MIN_BUDGET = 0.002
#: updates whose times the statistics cover
STATS_WINDOW = 500
#: why a tracking message was not planned from (diagnostics ``skipped.<reason>``)
SKIPS = ("no_motion", "invalid_message", "other_trajectory", "unknown_plan", "superseded", "stale_estimate")

RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
TRACKING_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)


@dataclass(frozen=True)
class _Job:
    """One update handed to the worker thread: the plan of run ``run`` from step ``start`` and its predicted state
    x0 (nx,), made from the estimate of tick ``tick`` stamped ``stamp`` (builtin_interfaces/Time), warm-started
    from ``previous``, due at ``due`` (s, the node's clock); with method 'rti' ``rti`` is the real-time iteration
    that makes it (None: ``mpc`` optimizes)."""

    mpc: RecedingHorizon
    run: int
    tick: int
    start: int
    x0: np.ndarray
    previous: object
    due: float
    stamp: object
    rti: Optional[RealTimeIteration] = None


class MPCNode(Node):
    """The ROS adapter of :class:`~marionette_control.ocp.mpc.RecedingHorizon` (module docstring)."""

    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        self.p = p = declare(self, PARAMS)
        self.options = mpc_options(p)
        try:
            desc = load_packaged_model(p["model_file"])
        except (OSError, ValueError) as e:
            raise ParameterError(f"parameter 'model_file': {e}") from None
        self.model = m = desc.model
        self.problem = planning_problem(p, desc)
        if self.problem.model.hash != m.hash:
            raise ParameterError(f"the problem's model '{self.problem.model.name}' is not model_file's '{m.name}'")
        try:
            self.options.check_timing(self.problem.dt)
        except ValueError as e:
            raise ParameterError(f"parameters 'deadline', 'latency_steps': {e}") from None
        self.limits = CommandLimits.from_limits(from_description(desc)).for_dt(self.problem.dt)
        # the command's entries by hardware joint name -> index into u (model order)
        self._input_of = command_inputs(desc)
        self.identifier = None
        if self.options.identify:
            if p["method"] != "receding_horizon":
                raise ParameterError(f"parameters 'identify', 'method': online identification is for method "
                                     f"'receding_horizon', not '{p['method']}' (docs/mpc.md, 'Online identification')")
            try:
                self.identifier = planner_identification(config_file(p["model_file"]), self.options, self.problem.dt)
            except (OSError, ValueError) as e:
                raise ParameterError(f"parameter 'identify': {e}") from None
        self.mpc: Optional[RecedingHorizon] = None
        self.rti: Optional[RealTimeIteration] = None     # method 'rti': the iteration (self.mpc its RecedingHorizon)
        self.motion_source = ""
        # the worker thread's results, counts and the plans it made, and what the executor's thread reads of them
        self._lock = threading.Lock()
        self.motion_error = ""
        self._reset_run(None)
        self.counts = collections.Counter()
        self.skipped = dict.fromkeys(SKIPS, 0)
        self.times = collections.deque(maxlen=STATS_WINDOW)
        self.prepare_times = collections.deque(maxlen=STATS_WINDOW)   # method 'rti': (wall, CPU) of preparations
        self.last_update = ""
        self._last_log: dict[str, float] = {}
        self._plan_pub = self.create_publisher(PlanMsg, "~/plan", RELIABLE)
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", RELIABLE)
        # updates run on a thread of their own, so that the executor keeps the node's clock (/clock under
        # use_sim_time) current and the commands recorded while one runs: its deadline is on that clock
        self._worker = LatestJobWorker(self._update, "mpc-updates", self._update_thread_priority)
        self._fitter = None
        if self.identifier is not None:
            self._reader = JointStateReader(JointMap.of(m, desc.hardware_joints))
            self._last_sample_ns: Optional[int] = None
            self._fitter = LatestJobWorker(lambda job: job[0].identify(job[1]), "mpc-identification",
                                           self._update_thread_priority)
            self.create_subscription(JointState, p["joint_states_topic"], self._on_joint_state,
                                     qos_profile_sensor_data)
        self.create_subscription(TrackingState, p["tracking_topic"], self._on_tracking, TRACKING_QOS)
        if p["trajectory_file"]:
            try:
                self._set_motion(Trajectory.load(p["trajectory_file"]), p["trajectory_file"])
            except TrajectoryError as e:
                raise ParameterError(f"parameter 'trajectory_file': {e}") from None
            if self.mpc is None:
                raise ParameterError(f"parameter 'trajectory_file': {self.motion_error}")
        else:
            self._traj_sub = self.create_subscription(TrackedTrajectory, p["trajectory_topic"], self._on_motion,
                                                      LATCHED)
        self._time = NodeTime(self)
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.create_timer(p["diagnostics_period"], self._publish_diagnostics, clock=steady)
        every = "tick (real-time iteration)" if p["method"] == "rti" else f"{self.options.period:g} s"
        self.get_logger().info(f"re-planning every {every} over {self.options.horizon:g} s; "
                               f"motion: {self.motion_source or 'waiting for ' + p['trajectory_topic']}")

    def _update_thread_priority(self) -> None:
        """``nice`` and ``idle_scheduling`` of the updates' thread (Linux sets both per thread)."""
        if self.p["nice"]:
            os.nice(self.p["nice"])
        if self.p["idle_scheduling"]:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))

    def wait_updates(self, timeout: float) -> bool:
        """Waits until no update runs or waits (False on timeout): tests that feed ``_on_tracking`` directly."""
        return self._worker.wait_idle(timeout)

    def worker_thread_ids(self) -> list:
        """The kernel ids of the threads the updates (and the fits) run on."""
        return [w.native_id for w in (self._worker, self._fitter) if w is not None]

    def stop_updates(self) -> None:
        """Ends the updates' thread (a running update finishes first) and the fits' if any; re-raises what ended
        them, if anything did."""
        self._worker.stop()
        if self._fitter is not None:
            self._fitter.stop()

    def _on_joint_state(self, msg) -> None:
        """A measured configuration for the online identification (module docstring): samples missing between
        this one and the last by their stamps, or unreadable, are gaps."""
        stamp = msg.header.stamp.sec * NS + msg.header.stamp.nanosec
        nq = self.model.nq
        if self._last_sample_ns is not None:
            missing = int(round((stamp - self._last_sample_ns) / (self.problem.dt * NS))) - 1
            for _ in range(min(max(missing, 0), int(self.options.identify_window / self.problem.dt) + 1)):
                self.identifier.record(np.full(nq, np.nan))
        self._last_sample_ns = stamp
        try:
            q = self._reader.read(msg)
        except JointStateError as e:
            q = np.full(nq, np.nan)
            self._log_throttled("joint_state", f"joint state for the online identification: {e}")
        self.identifier.record(q)

    # ------------------------------------------------------------------------------ the motion

    def _set_motion(self, motion: Trajectory, source: str) -> None:
        """Re-plans ``motion`` from now on if it is the problem's optimum's shape (model, steps, Δt); else keeps
        what it has and reports why."""
        try:
            mpc, rti = planners(self.p["method"], self.problem, motion, self.options, self.identifier)
        except (TrajectoryError, ValueError) as e:
            self.motion_error = f"{source}: {e}"
            self.get_logger().error(f"motion refused: {self.motion_error}")
            return
        with self._lock:
            self.mpc, self.rti, self.motion_source, self.motion_error = mpc, rti, source, ""
        self._reset_run(None)
        self.get_logger().info(f"motion {source}: {motion.N} steps of {motion.dt:g} s")

    def _on_motion(self, msg) -> None:
        try:
            motion = trajectory_from_msg(msg)
        except TrajectoryError as e:
            self.motion_error = f"from {self._traj_sub.topic_name}: {e}"
            self.get_logger().error(f"motion refused: {self.motion_error}")
            return
        self._set_motion(motion, f"from {self._traj_sub.topic_name}")

    def _reset_run(self, run: Optional[int]) -> None:
        """A new run of the controller: no commands known, the motion's own law, no plans."""
        with self._lock:
            self.run = run
            self.last_tick = -1
            self.plans: dict[int, object] = {}
            self.last_plan = None
        if self.mpc is not None:
            m = self.model
            self.history = CommandHistory(m.nU, m.nk, self.mpc.gains.delay_steps)
            self.law = PlannedLaw(TrackingLaw(m, self.mpc.motion))

    def _now(self) -> float:
        """The node's clock [s] (ROS time: /clock under use_sim_time; :mod:`.node_time`)."""
        return self._time.now_ns() / NS

    # ------------------------------------------------------------------------------ one tick of the controller

    def _skip(self, reason: str, message: str = "") -> None:
        with self._lock:
            self.skipped[reason] += 1
        if message:
            self._log_throttled(reason, message)

    def _log_throttled(self, key: str, message: str) -> None:
        now = time.monotonic()
        if now - self._last_log.get(key, -1e9) >= 5.0:
            self._last_log[key] = now
            self.get_logger().warning(message)

    def _on_tracking(self, msg) -> None:
        mpc = self.mpc
        if mpc is None:
            return self._skip("no_motion")
        m = self.model
        x_hat = np.asarray(msg.estimated, dtype=float)
        if list(msg.state_names) != list(m.state_names) or x_hat.shape != (m.nx,) or not np.all(np.isfinite(x_hat)):
            return self._skip("invalid_message", f"tracking message of tick {msg.tick}: state names "
                                                 f"{list(msg.state_names)} / {x_hat.size} finite values, expected "
                                                 f"{list(m.state_names)}")
        u = np.zeros(m.nU)
        try:
            for name, value in zip(msg.command_joints, msg.command, strict=True):
                u[self._input_of[name]] = value
        except (KeyError, ValueError):
            return self._skip("invalid_message", f"tracking message of tick {msg.tick}: command joints "
                                                 f"{list(msg.command_joints)} with {len(msg.command)} values, "
                                                 f"expected {sorted(self._input_of)}")
        if msg.num_steps != mpc.N:
            return self._skip("other_trajectory", f"the controller tracks {msg.num_steps} steps, the motion has "
                                                  f"{mpc.N}: not planning")
        k = int(msg.tick)
        if msg.run != self.run or k <= self.last_tick:
            self._reset_run(int(msg.run))
            hold = np.zeros(m.nU)
            hold[m.nu:] = x_hat[m.nd:m.nq]     # before the run's first command the drives hold where they are
            self.history.start(hold)
        self.last_tick = k
        self.history.sent(k, u)
        if msg.plan == 0:
            if k <= mpc.N and np.max(np.abs(np.asarray(msg.desired) - mpc.motion.X[k])) > 1e-9:
                return self._skip("other_trajectory", f"the controller's reference at tick {k} is not the motion's "
                                                      f"({self.motion_source}): not planning")
        elif self.law.active is None or self.law.active.sequence != msg.plan:
            with self._lock:
                plan = self.plans.get(int(msg.plan))
            if plan is None:
                return self._skip("unknown_plan", f"the controller follows plan {msg.plan}, which this node did not "
                                                  "make (another planner?): not planning")
            self.law.install(plan)
        d, opt = self.history.delay, self.options
        if k % mpc.period or k + d + opt.latency_steps > mpc.N - opt.min_steps:
            return
        with self._lock:
            pending = self.last_plan if (self.last_plan is not None and self.last_plan.start > k + d
                                         and self.last_plan is not self.law.active) else None
        if self._fitter is not None and self._worker.wait_idle(0.0):
            mpc.take_identified()   # no update runs: this one predicts and plans on the identified model
        try:
            j, x0 = mpc.predict(k, x_hat, self.history, self.law, self.limits, pending)
        except _core.StepError:
            return self._record(k, Update(None, "step_failed", k + d + opt.latency_steps))
        stamp = msg.header.stamp.sec * NS + msg.header.stamp.nanosec
        # due before the controller computes tick k + latency_steps, whose sample is stamped latency_steps·Δt after
        # this one, on the clock the graph runs on (simulated time under use_sim_time)
        due = stamp / NS + opt.latency_steps * mpc.dt - self.p["transport_margin"]
        replaced = self._worker.submit(_Job(mpc, self.run, k, j, x0, pending or self.law.active, due,
                                            msg.header.stamp, self.rti))
        if replaced is not None:
            self._skip("superseded", f"the estimate of tick {replaced.tick} was replaced by tick {k}'s before an "
                                     "update could start from it (the previous update is still running)")

    def _update(self, job: "_Job") -> None:
        """One update (on the worker thread): the plan of ``job`` under its deadline, published if there is one."""
        if job.rti is not None:
            return self._iterate(job)
        opt, deadline = self.options, None
        if opt.deadline is not None:
            now = self._now()
            if self._stale(job, now):
                return
            deadline = Deadline(min(job.due, now + opt.deadline), self._now)
        up = job.mpc.plan(job.start, job.x0, job.run, job.previous, job.tick, deadline=deadline)
        self._record(job.tick, up)
        self._publish(job, up)
        if self._fitter is not None:
            self._fitter.submit((job.mpc, job.tick))   # the next update takes a model it adopts

    def _iterate(self, job: "_Job") -> None:
        """One real-time iteration (method 'rti', on the worker thread; ocp/rti.py): the feedback from the job's
        state on the preparation made after the last plan, its plan published unless it is done after the job's due
        time or ``deadline`` after the start (``deadline_missed``: its iterate still starts the next tick), then the
        preparation for the next tick's plan, before its estimate arrives. The update's time is the feedback's; the
        preparation's is recorded apart. numpy's BLAS runs one thread meanwhile, as in the optimizer's solves
        (:func:`~marionette_control.ocp.blas_threads.single_threaded`: its products are small, and a threaded one
        leaves a worker spinning on the core the controller needs)."""
        with blas_threads.single_threaded():
            self._iterate_once(job)

    def _iterate_once(self, job: "_Job") -> None:
        rti, start = job.rti, self._now()
        if self._stale(job, start):
            return
        if rti.iterate is not None and rti.iterate.run != job.run:
            rti.reset()
        up = rti.feedback(job.start, job.x0, job.run, job.tick)
        due = min(job.due, start + self.options.deadline) if self.options.deadline is not None else job.due
        if up.plan is not None and self._now() > due:
            up.plan, up.reason = None, "deadline_missed"
        self._publish(job, up)
        t0, c0 = time.perf_counter(), time.thread_time()
        if job.start + 1 <= job.mpc.N:
            try:
                rti.prepare(job.start + 1)
            except _core.StepError:   # the next feedback prepares again and says why it cannot
                rti.prepared = None
        up.prepare, up.prepare_cpu = time.perf_counter() - t0, time.thread_time() - c0
        self._record(job.tick, up)

    def _stale(self, job: "_Job", now: float) -> bool:
        """True (and counted as ``stale_estimate``) when less than MIN_BUDGET is left at ``now`` before the job's
        plan is due. The time is at least the estimate's stamp: a node clock behind it (under use_sim_time, a /clock
        message not yet received when the estimate is) lags, and would grant a budget the graph does not have."""
        stamp = job.stamp.sec + job.stamp.nanosec / NS
        now = max(now, stamp)
        if job.due - now >= MIN_BUDGET:
            return False
        age = now - stamp
        self._skip("stale_estimate", f"the estimate of tick {job.tick} is {age * 1e3:.1f} ms old: too late to plan "
                                     "from (the node fell behind)")
        return True

    def _publish(self, job: "_Job", up: Update) -> None:
        """Publishes the plan of ``up`` (if any) made for ``job``, unless the run or the motion changed meanwhile."""
        if up.plan is None:
            return
        with self._lock:
            current = job.mpc is self.mpc and job.run == self.run
            if current:
                self._plan_pub.publish(plan_to_msg(up.plan, PlanMsg, job.stamp))
                self.counts["published"] += 1
                self.plans[up.plan.sequence] = self.last_plan = up.plan
                for old in [s for s in self.plans if s < up.plan.sequence - 8]:
                    del self.plans[old]
        if not current:
            self._skip("superseded", f"the plan from the estimate of tick {job.tick} of run {job.run} was not "
                                     "published: the controller started another run, or the motion changed, while "
                                     "it was computed")

    def _record(self, k: int, up: Update) -> None:
        """Counts and times of the update ``up`` from the estimate of tick k; logs (throttled) an update that
        planned nothing."""
        with self._lock:
            self.counts[up.reason] += 1
            self.counts["updates"] += 1
            self.times.append((up.elapsed, up.cpu))
            if self.rti is not None:
                self.prepare_times.append((up.prepare, up.prepare_cpu))
            self.last_update = (f"tick {k}: {up.reason}, {up.iterations} iterations, {up.elapsed * 1e3:.1f} ms"
                                + (f", plan {up.plan.sequence} for steps {up.plan.start}..{up.plan.end}" if up.plan
                                   else ""))
        if up.plan is None and up.reason not in ("end_of_motion", "awaiting_model"):
            self._log_throttled(up.reason, f"no plan from the estimate of tick {k}: {self.last_update}")

    # ------------------------------------------------------------------------------ diagnostics

    def statistics(self) -> dict:
        """{"update_ms": {median, p99, max}, "update_cpu_ms": {...}, "updates", "published", reasons, "skipped"}; with
        method 'rti' also "prepare_ms" and "prepare_cpu_ms" (the preparations after the plans)."""
        with self._lock:
            out = {"updates": self.counts["updates"], "published": self.counts["published"],
                   "reasons": {r: n for r, n in self.counts.items() if r not in ("updates", "published")},
                   "skipped": dict(self.skipped)}
            series = {("update_ms", "update_cpu_ms"): list(self.times),
                      ("prepare_ms", "prepare_cpu_ms"): list(self.prepare_times)}
        for keys, times in series.items():
            if times:
                t = 1e3 * np.array(times)
                for i, key in enumerate(keys):
                    out[key] = {"median": float(np.median(t[:, i])), "p99": float(np.percentile(t[:, i], 99)),
                                "max": float(t[:, i].max())}
        return out

    def _publish_diagnostics(self) -> None:
        stats = self.statistics()
        if self.mpc is None:
            level = DiagnosticStatus.WARN
            message = "no motion" + (f" (refused: {self.motion_error})" if self.motion_error else
                                     f": waiting for {self.p['trajectory_topic']}")
        else:
            level, message = DiagnosticStatus.OK, f"planning {self.motion_source}"
        period = self.problem.dt if self.p["method"] == "rti" else self.options.period
        values = [("motion", self.motion_source), ("motion_error", self.motion_error), ("method", self.p["method"]),
                  ("horizon_s", f"{self.options.horizon:g}"), ("period_s", f"{period:g}"),
                  ("latency_steps", str(self.options.latency_steps)),
                  ("deadline_s", "none" if self.options.deadline is None else f"{self.options.deadline:g}"),
                  ("run", "" if self.run is None else str(self.run)), ("last_tick", str(self.last_tick)),
                  ("updates", str(stats["updates"])), ("plans_published", str(stats["published"])),
                  ("last_update", self.last_update)]
        values += [(f"updates.{r}", str(n)) for r, n in sorted(stats["reasons"].items())]
        values += [(f"skipped.{r}", str(n)) for r, n in stats["skipped"].items()]
        if self.identifier is not None:
            ident = self.identifier.summary()
            values += [(f"identification.{r}", str(n)) for r, n in ident["counts"].items()]
            values += [(f"identified.{k}", f"{v:.6g}") for k, v in ident["current"].items()]
            values += [(f"identification.fit_ms.{q}", f"{1e3 * v:.3f}") for q, v in ident["fit_seconds"].items()
                       if v is not None]
        for key in ("update_ms", "update_cpu_ms", "prepare_ms", "prepare_cpu_ms"):
            if key in stats:
                values += [(f"{key}.{q}", f"{v:.3f}") for q, v in stats[key].items()]
        st = DiagnosticStatus(level=level, name=status_name(self, "planning"), message=message,
                              hardware_id=self.model.name, values=[KeyValue(key=k, value=v) for k, v in values])
        arr = DiagnosticArray(status=[st])
        arr.header.stamp = self.get_clock().now().to_msg()
        self._diag_pub.publish(arr)


def main(args=None) -> int:
    """Runs the node until SIGINT/SIGTERM (:func:`marionette_control.nodes.process.run_node`)."""
    # the executor's thread records and keeps the clock; updates run on the node's worker thread
    return run_node(NODE_NAME, MPCNode, args=args, cleanup=MPCNode.stop_updates)


if __name__ == "__main__":
    sys.exit(main())
