"""marionette_optimizer: projection-operator trajectory optimization on request (ROS 2 node).

A thin adapter around the optimal-control layer: requests are turned into optimization problems
(:class:`~marionette_control.ocp.problem.Problem`) by :mod:`marionette_control.ocp.request`
(which validates them), solved by :func:`marionette_control.ocp.retiming.solve_retimed` (the projection-operator
optimizer, or DMOCC when a request asks for it, through :func:`marionette_control.ocp.optimizer.solve`; a motion
too fast for the arm re-timed when the request or the node's ``retime.mode`` asks), and answered with the
feasible trajectory, its time-varying LQR tracking gains, the convergence history, a report
of every inequality constraint (drive range, speed and acceleration, string tension: by default
the model file's limits are enforced, less the reserve kept for the feedback): its worst margin, where it occurs
and where it is active, its reserve; and ``retiming``: whether the result is trackable and how the motion was
re-timed.

Interfaces (with the default node name, in the root namespace)
--------------------------------------------------------------
``/marionette_optimizer/optimize`` (service, marionette_interfaces/srv/OptimizeTrajectory)
    Optimizes and answers when done. Invalid requests are answered at once with
    ``success = false`` and a message naming what is wrong.
``/marionette_optimizer/optimize_action`` (action, marionette_interfaces/action/OptimizeTrajectory)
    The long-running form: feedback after every iteration (the descent norm in the feedback
    is |Dh∘ζ| of the direction that iteration took, i.e. measured at the iterate it started
    from); cancel and ``options.deadline_s`` stop the run and the result holds the best
    feasible trajectory so far (status CANCELED with ``termination_reason = "canceled"``, or
    SUCCEEDED with ``"deadline"``). Invalid goals are accepted and then aborted with
    ``success = false`` and the message (a rejected goal could carry no message). With re-timing
    (``options.retime``) every timing tried is a solve of its own: the feedback's iteration count starts
    again at 1 for each, and the deadline covers the whole search.
Every result's trajectory (TrackedTrajectory) also carries the drives' feed-forward alone as a
``trajectory_msgs/JointTrajectory`` (``actuators``: the hardware joint names of the kinematic
configurations, positions and velocities per step), which a stock joint_trajectory_controller plays.

Requests are checked before anything runs (:mod:`marionette_control.ocp.request`): besides their
fields' own rules, the time grid must be plausible (parameters ``min_dt``, ``max_dt``,
``max_duration``, ``max_steps``; e.g. two desired points 1000 s apart are refused, not taken as one
1000 s step).

``/marionette_optimizer/trajectory`` (topic, marionette_interfaces/msg/TrackedTrajectory)
    The latest successful result, reliable and transient-local (depth 1), so a controller
    started later still receives it (parameter ``trajectory_topic``; ``marionette_controller``
    subscribes to the topic its own parameter names; it stages a new one while it tracks and takes it
    only when idle or asked to). Canceled runs are not published: their client abandoned them.

Concurrency policy (parameter ``concurrency``)
----------------------------------------------
One optimization runs at a time, in a dedicated worker thread (the core releases the GIL in
its batch loops, so the executor keeps serving meanwhile).

* ``reject`` (default): while one runs, a new service request is answered with
  ``success = false`` and a message starting with "busy", and a new action goal is rejected.
  Service requests are validated first, so an invalid request always gets its specific
  message.
* ``queue``: up to ``queue_size`` further requests wait in first-come order (a waiting goal
  can be canceled; it is then answered, when its turn comes, with the initial trajectory and
  0 iterations); beyond that they are refused as with ``reject``. The deadline counts from
  the start of a run, not from the request.

The deadline bounds the iterations; validating the request, building the initial trajectory
and computing the tracking gains of the result (one linearization and Riccati sweep) come on
top.

Service and action callbacks live in a reentrant callback group on a multi-threaded executor
with one thread per request the policy admits plus three spare, so cancel requests, parameter
services and refusals are processed while requests wait for the worker.

Every request is answered
-------------------------
Requests that arrive while the callbacks are busy wait in the middleware's queues, whose depths
are the parameters ``qos_depth.service`` (the service's requests and responses) and
``qos_depth.action`` (the action's goal, cancel and result services); the defaults (100) hold a
burst far beyond the largest ``queue_size``. A request the concurrency policy cannot admit gets
an explicit answer ("busy", a rejected goal), never silence. Only a burst deeper than the queue
can still lose requests in the middleware, unseen by the node.

Saving
------
``save_path`` in a request saves that result (the package's ``.npz`` trajectory format), confined
to ``save_directory`` (:mod:`marionette_control.save_path`: relative paths only, resolved
inside that directory; absolute paths only into ``allowed_save_directories``; an existing file
only with the request's ``overwrite``; directories created only inside; checked before the run,
each refusal answered with its reason). With ``save_directory`` empty nothing is saved and a
request with a ``save_path`` is refused. With ``save_directory`` set, results of requests without
``save_path`` are saved there as ``<model>_<UTC time>.npz``. Both parameters are read-only, so no
peer can widen them at run time.

Shutdown
--------
On SIGINT or SIGTERM the running optimization is stopped and its client still answered with
the best trajectory so far (``success = true``, reason "canceled", "shutting down" in the
message; an action goal ends ABORTED), waiting requests are answered "shutting down", and the
node exits 0 (a second signal skips waiting for the answers to be delivered).

Run: ``ros2 run marionette_control marionette_optimizer --ros-args --params-file
config/optimizer.yaml`` or ``python -m marionette_control.nodes.optimizer --ros-args -p
model:=pendulum``.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Optional

import rclpy
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rcl_interfaces.msg import SetParametersResult

from marionette_interfaces.action import OptimizeTrajectory as OptimizeAction
from marionette_interfaces.msg import ConstraintReport, ConvergenceData, Retiming, TrackedTrajectory
from marionette_interfaces.srv import OptimizeTrajectory as OptimizeService

from marionette_control.lq.gains import GainDesign
from marionette_control.nodes.convert import trajectory_to_msg
from marionette_control.nodes.params import declare
from marionette_control.nodes.process import StopFlag, run_node
from marionette_control.ocp.optimizer_options import gain_design, parameter_specs, problem_defaults
from marionette_control.ocp.problem import Problem, ProblemError
from marionette_control.ocp.projection import IterationRecord
from marionette_control.ocp.report import ConvergenceHistory, constraint_summary, describe
from marionette_control.ocp.request import DesiredMotion, RequestModels, RequestOptions, build_problem
from marionette_control.ocp.retiming import solve_retimed
from marionette_control.ocp.tracking_problem import ProblemDefaults
from marionette_control.parameters import ParameterError
from marionette_control.save_path import SavePathError, SavePolicy, SaveTarget, write_file

NODE_NAME = "marionette_optimizer"
SERVICE = "~/optimize"
ACTION = "~/optimize_action"

#: QoS of the result topic: the latest trajectory, kept for late subscribers.
TRAJECTORY_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE,
                            durability=DurabilityPolicy.TRANSIENT_LOCAL)


def request_qos(depth: int) -> QoSProfile:
    """Reliable, volatile, keep-last ``depth``: the service default with a queue deep enough for a burst."""
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.VOLATILE)


# --------------------------------------------------------------------------------------------- jobs


@dataclass
class Outcome:
    """What a run produced: success, message, the trajectory message (None unless success), history."""

    success: bool
    message: str
    trajectory: Optional[TrackedTrajectory] = None
    history: Optional[ConvergenceHistory] = None
    constraints: Optional[dict] = None       # the result record's constraints (ocp/report.py)
    info: Optional[dict] = None              # the result record (ocp/report.py): trackability, retiming
    duration: float = 0.0                    # s, the result's


@dataclass
class Job:
    """One optimization handed to the worker thread."""

    label: str
    problem: Problem
    save: Optional[SaveTarget]
    should_stop: Callable[[], bool]
    on_iteration: Optional[Callable[[IterationRecord], None]] = None
    done: threading.Event = field(default_factory=threading.Event)
    outcome: Optional[Outcome] = None


def _convergence_msg(h: Optional[ConvergenceHistory]) -> ConvergenceData:
    m = ConvergenceData()
    if h is None:
        m.termination_reason = ConvergenceData.REASON_ERROR
        return m
    m.iterations = h.iterations
    m.costs = [float(c) for c in h.costs]
    m.descent_norms = [float(c) for c in h.descent_norms]
    m.step_lengths = [float(c) for c in h.step_lengths]
    m.methods = list(h.methods)
    m.violations = [float(v) for v in h.violations]
    m.elapsed_s = float(h.elapsed)
    m.converged = h.converged
    m.termination_reason = h.reason
    return m


def constraint_reports(margins: list) -> list:
    """ConstraintReport messages of :func:`~marionette_control.ocp.problem.constraint_report` rows."""
    out = []
    for r in margins:
        m = ConstraintReport(family=r["family"], component=r["component"], side=r["side"], limit=float(r["limit"]),
                             unit=r["unit"], hardware_limit=float(r["hardware_limit"]), reserve=float(r["reserve"]),
                             label=r["label"], worst_margin=float(r["margin"]),
                             normalized_margin=float(r["normalized"]), step=int(r["step"]), time_s=float(r["time"]),
                             satisfied=bool(r["satisfied"]), active_steps=int(r["active_steps"]))
        m.active_from_s = [float(a) for a, _ in r["active_intervals"]]
        m.active_to_s = [float(b) for _, b in r["active_intervals"]]
        out.append(m)
    return out


def retiming_msg(info: dict, duration: float) -> Retiming:
    """The Retiming message of a result record (``trackability``, with re-timing ``retiming``; ocp/report.py,
    ocp/retiming.py) of a trajectory of ``duration`` s."""
    verdict = info["trackability"]
    names = list(verdict["rms"])
    r = info.get("retiming")
    drawn = r["drawn"] if r else verdict
    m = Retiming(trackable=bool(verdict["trackable"]), trackable_as_drawn=bool(drawn["trackable"]),
                 tolerance=float(verdict["tolerance"]), configurations=names,
                 rms_errors=[float(verdict["rms"][n]) for n in names],
                 rms_errors_as_drawn=[float(drawn["rms"][n]) for n in names], factor=1.0, duration_s=duration,
                 drawn_duration_s=duration, limited_by=[label for label, _ in drawn["limiting"]])
    if r:
        timing = r["timing"]
        m.mode, m.found, m.factor, m.message = r["mode"], bool(r["found"]), float(r["factor"]), r["message"]
        m.duration_s, m.drawn_duration_s = float(timing["duration"]), float(timing["drawn_duration"])
        m.keyframe_times = [float(v) for v in timing["keyframe_times"]]
        m.drawn_keyframe_times = [float(v) for v in timing["drawn_keyframe_times"]]
    else:
        m.message = f"the motion is {verdict['message']}"
    return m


def _fill(response, outcome: Outcome):
    """Fills a service response or an action result from an outcome."""
    response.success = outcome.success
    response.message = outcome.message
    if outcome.trajectory is not None:
        response.trajectory = outcome.trajectory
    response.convergence = _convergence_msg(outcome.history)
    c = outcome.constraints
    if c is not None:
        response.constraints_satisfied = bool(c["feasible"])
        response.max_violation = float(c["violation"])
        response.constraints = constraint_reports(c["margins"])
    if outcome.info is not None:
        response.retiming = retiming_msg(outcome.info, outcome.duration)
    return response


# --------------------------------------------------------------------------------------------- the node


class OptimizerNode(Node):
    """The optimizer node (see the module docstring for its interfaces and policy)."""

    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        # added first, so it runs after declare's checks of each value: the rules between values (dt within
        # [min_dt, max_dt]) are ProblemDefaults'
        self.add_on_set_parameters_callback(self._check_defaults)
        self._values = declare(self, parameter_specs())
        try:
            self._defaults()
        except ProblemError as e:
            raise ParameterError(str(e)) from None
        self._models = RequestModels()
        source = "model_file" if self._values["model_file"] else "model"
        try:
            self.default_model = (self._models.add_file(self._values["model_file"]) if source == "model_file"
                                  else self._values["model"])
            self._models.get(self.default_model)
        except ProblemError as e:
            raise ParameterError(f"parameter '{source}': {e}") from None
        self.policy = self._values["concurrency"]
        self.capacity = 1 if self.policy == "reject" else 1 + int(self._values["queue_size"])
        for name in ("qos_depth.service", "qos_depth.action"):
            if self._values[name] <= self.capacity:
                raise ParameterError(f"parameter '{name}' ({self._values[name]}) must exceed the {self.capacity} "
                                     f"request(s) concurrency '{self.policy}' admits at once, so a refusal still fits")
        try:
            self.save_policy = SavePolicy.from_parameters(self._values["save_directory"],
                                                          self._values["allowed_save_directories"])
        except ValueError as e:
            raise ParameterError(str(e)) from None
        self._reserved = 0
        self._slots_lock = threading.Lock()
        self._stopping = threading.Event()
        self._jobs: queue.Queue = queue.Queue()

        group = ReentrantCallbackGroup()
        self._publisher = self.create_publisher(TrackedTrajectory, self._values["trajectory_topic"], TRAJECTORY_QOS)
        self._service = self.create_service(OptimizeService, SERVICE, self._on_service, callback_group=group,
                                            qos_profile=request_qos(self._values["qos_depth.service"]))
        action_qos = request_qos(self._values["qos_depth.action"])
        self._action = ActionServer(self, OptimizeAction, ACTION, execute_callback=self._on_execute,
                                    goal_callback=self._on_goal, cancel_callback=self._on_cancel,
                                    callback_group=group, goal_service_qos_profile=action_qos,
                                    result_service_qos_profile=action_qos, cancel_service_qos_profile=action_qos)
        self._worker = threading.Thread(target=self._work, name="optimizer-worker", daemon=True)
        self._worker.start()
        self.get_logger().info(
            f"ready: model '{self.default_model}', service {self.resolve_service_name(SERVICE)}, action "
            f"{self.resolve_service_name(ACTION)}, results on {self._publisher.topic_name} (transient-local), "
            f"concurrency '{self.policy}'; "
            + (f"results saved only inside {self.save_policy.directory}" if self.save_policy.directory else
               "saving disabled (save_directory empty)"))

    @property
    def executor_threads(self) -> int:
        """Threads the executor needs: one per waiting request, plus some for cancels and parameters."""
        return self.capacity + 3

    # -- parameters --------------------------------------------------------------------------------

    def _defaults(self, override: Optional[dict] = None) -> ProblemDefaults:
        return problem_defaults(dict(self._values, **(override or {})))

    def _check_defaults(self, params) -> SetParametersResult:
        """Refuses a change that would make the request defaults inconsistent (ProblemDefaults' rules)."""
        if not hasattr(self, "_values"):  # declaring: declare validates each start-up value, then __init__ the set
            return SetParametersResult(successful=True)
        try:
            self._defaults({p.name: p.value for p in params if p.name in self._values})
        except ValueError as e:  # ProblemError, or a schedule that does not parse
            return SetParametersResult(successful=False, reason=str(e))
        return SetParametersResult(successful=True)

    def _gains(self) -> GainDesign:
        return gain_design(self._values)

    # -- requests ------------------------------------------------------------------------------------

    def _save_target(self, request, model_name: str) -> Optional[SaveTarget]:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S_%fZ")
        try:
            return self.save_policy.target(request.save_path, request.overwrite, f"{model_name}_{stamp}.npz")
        except SavePathError as e:
            raise ProblemError(str(e)) from None

    def prepare(self, request) -> tuple[Problem, Optional[SaveTarget]]:
        """Validates a request (service request or action goal) and builds its problem; raises ProblemError."""
        model, limits, _ = self._models.get(request.model_id or self.default_model)
        o = request.options
        options = RequestOptions(
            state_weight_names=list(o.state_weight_names), state_weights=list(o.state_weights),
            input_weight_names=list(o.input_weight_names), input_weights=list(o.input_weights),
            terminal_weight_names=list(o.terminal_weight_names), terminal_weights=list(o.terminal_weights),
            methods=list(o.methods), method_iterations=list(o.method_iterations), tolerance=o.tolerance,
            max_iterations=o.max_iterations, deadline_s=o.deadline_s, dt=o.dt, constraints=o.constraints,
            constraint_families=list(o.constraint_families), min_tension=o.min_tension,
            range_margin=o.range_margin, speed_margin=o.speed_margin, acceleration_margin=o.acceleration_margin,
            barrier_weight=o.barrier_weight, tension_reserve=o.tension_reserve, reserve=o.reserve, retime=o.retime,
            retime_tolerance=o.retime_tolerance, max_retime_factor=o.max_retime_factor)
        desired = None
        if not request.motion_name:
            d = request.desired
            desired = DesiredMotion(
                joint_names=list(d.joint_names),
                times=[p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in d.points],
                positions=[list(p.positions) for p in d.points])
        problem = build_problem(model, request.motion_name, desired, options, self._defaults(), self._gains(),
                                limits)
        return problem, self._save_target(request, model.name)

    def _reserve(self) -> bool:
        with self._slots_lock:
            if self._stopping.is_set() or self._reserved >= self.capacity:
                return False
            self._reserved += 1
            return True

    def _release(self) -> None:
        with self._slots_lock:
            self._reserved -= 1

    def _busy_message(self) -> str:
        if self._stopping.is_set():
            return "the optimizer node is shutting down"
        if self.policy == "reject":
            return "busy: another optimization is running (concurrency policy 'reject'); try again when it is done"
        return f"busy: the queue is full ({self.capacity - 1} waiting behind the running optimization)"

    def _run_job(self, job: Job) -> Outcome:
        job.done.clear()
        self._jobs.put(job)
        job.done.wait()
        return job.outcome

    # -- service -------------------------------------------------------------------------------------

    def _on_service(self, request, response):
        try:
            problem, save = self.prepare(request)
        except ProblemError as e:
            self.get_logger().warning(f"invalid optimization request: {e}")
            return _fill(response, Outcome(False, f"invalid request: {e}"))
        except Exception as e:  # answered, never swallowed: an exception here would end the executor
            self.get_logger().error(f"preparing a request failed: {type(e).__name__}: {e}")
            return _fill(response, Outcome(False, f"internal error while preparing the request: "
                                                  f"{type(e).__name__}: {e}"))
        if not self._reserve():
            self.get_logger().warning(f"request refused: {self._busy_message()}")
            return _fill(response, Outcome(False, self._busy_message()))
        try:
            job = Job("service request", problem, save, self._stopping.is_set)
            return _fill(response, self._run_job(job))
        finally:
            self._release()

    # -- action --------------------------------------------------------------------------------------

    def _on_goal(self, goal_request):
        if self._reserve():
            return GoalResponse.ACCEPT
        self.get_logger().warning(f"goal rejected: {self._busy_message()}")
        return GoalResponse.REJECT

    def _on_cancel(self, goal_handle):
        return CancelResponse.ACCEPT

    def _on_execute(self, goal_handle):
        result = OptimizeAction.Result()
        try:
            accepted = time.monotonic()
            try:
                problem, save = self.prepare(goal_handle.request)
            except ProblemError as e:
                self.get_logger().warning(f"invalid optimization goal: {e}")
                goal_handle.abort()
                return _fill(result, Outcome(False, f"invalid request: {e}"))
            except Exception as e:  # answered, never swallowed
                self.get_logger().error(f"preparing a goal failed: {type(e).__name__}: {e}")
                goal_handle.abort()
                return _fill(result, Outcome(False, f"internal error while preparing the request: "
                                                    f"{type(e).__name__}: {e}"))

            def feedback(record: IterationRecord):
                if record.step_length == 0.0:  # the convergence check, not an iteration
                    return
                fb = OptimizeAction.Feedback(iteration=record.iteration + 1, cost=float(record.cost),
                                             descent_norm=float(record.descent_norm),
                                             violation=float(record.violation),
                                             barrier_weight=float(record.barrier_weight),
                                             step_length=float(record.step_length), method=record.method,
                                             elapsed_s=time.monotonic() - accepted)
                goal_handle.publish_feedback(fb)

            def should_stop() -> bool:
                return self._stopping.is_set() or goal_handle.is_cancel_requested

            outcome = self._run_job(Job("goal", problem, save, should_stop, feedback))
            _fill(result, outcome)
            stopped = outcome.history is not None and outcome.history.reason == ConvergenceData.REASON_CANCELED
            if stopped and goal_handle.is_cancel_requested:
                goal_handle.canceled()
            elif outcome.success and not stopped:
                goal_handle.succeed()
            else:  # failed, or stopped by the node shutting down (the result still holds the trajectory)
                goal_handle.abort()
            return result
        finally:
            self._release()

    # -- worker --------------------------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                job.outcome = self._optimize(job)
            except Exception as e:  # reported to the client, never swallowed
                self.get_logger().error(f"{job.label} failed: {type(e).__name__}: {e}")
                job.outcome = Outcome(False, f"optimization failed: {type(e).__name__}: {e}")
            finally:
                job.done.set()

    def _optimize(self, job: Job) -> Outcome:
        p = job.problem
        if self._stopping.is_set():
            return Outcome(False, "the optimizer node is shutting down; the request was not run")
        self.get_logger().info(f"{job.label}: optimizing {p.source} on model '{p.model.name}' ({p.N} steps of "
                               f"{p.dt:g} s)")
        res = solve_retimed(p, p.X0, p.U0, callback=job.on_iteration, should_stop=job.should_stop)
        history, traj = res.history, res.trajectory
        constraints = traj.info["constraints"]
        # header.stamp stays zero: "start when the receiver starts it" (TrackedTrajectory.msg).
        msg = trajectory_to_msg(traj, TrackedTrajectory, list(p.model.config_names),
                                actuator_joints=self._models.get(p.model.name)[2])
        message = (f"{describe(res.problem, res.method, history, res.initial_cost, float(res.result.cost))}; "
                   f"{constraint_summary(constraints)}; "
                   + (res.retiming.describe() if res.retiming is not None else
                      f"the motion is {traj.info['trackability']['message']}"))
        if self._stopping.is_set() and history.reason == ConvergenceData.REASON_CANCELED:
            message += " (the node is shutting down)"
        if job.save is not None:
            try:
                path = write_file(job.save, traj.write)
                message += f"; saved to {path}"
            except (OSError, SavePathError) as e:
                message += f"; NOT saved to {job.save.path}: {e}"
                self.get_logger().error(f"could not save the result to {job.save.path}: {e}")
        if history.reason != ConvergenceData.REASON_CANCELED:
            self._publisher.publish(msg)
            message += f"; published on {self._publisher.topic_name}"
        self.get_logger().info(f"{job.label}: {message}")
        return Outcome(True, message, msg, history, constraints, traj.info, float(traj.t[-1] - traj.t[0]))

    @property
    def in_flight(self) -> int:
        """Requests running or waiting (service calls and goals not answered yet)."""
        with self._slots_lock:
            return self._reserved

    def stop(self) -> None:
        """Stops the running optimization (its client gets the best trajectory so far) and the worker.

        Idempotent; waiting requests are answered "shutting down" without running.
        """
        if not self._stopping.is_set():
            self._stopping.set()
            self._jobs.put(None)
        self._worker.join(timeout=30.0)
        while True:  # answer requests that were still waiting
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                job.outcome = Outcome(False, "the optimizer node is shutting down; the request was not run")
                job.done.set()


def main(args=None) -> int:
    """Runs the node until SIGINT/SIGTERM, then stops gracefully (see :func:`finish_requests`)."""
    return run_node(NODE_NAME, OptimizerNode,
                    lambda node: MultiThreadedExecutor(num_threads=node.executor_threads), args,
                    stopping=finish_requests, cleanup=OptimizerNode.stop)


def finish_requests(node: OptimizerNode, executor, stop: StopFlag, grace: float = 3.0) -> None:
    """After the first SIGINT/SIGTERM: stops the node and keeps spinning until its clients are answered.

    rclpy's own signal handler would shut the context down at once, so a client waiting for a
    running optimization would get nothing (:mod:`marionette_control.nodes.process` records
    signals instead). The first signal stops the running optimization (its client gets the best
    trajectory so far, termination reason "canceled", with "shutting down" in the message),
    answers waiting requests, and spins up to ``grace`` seconds more to deliver the answers. A
    second signal skips the wait.
    """
    node.get_logger().info("stopping: answering the running and waiting requests")
    stopper = threading.Thread(target=node.stop, name="optimizer-stop")
    stopper.start()
    end = time.monotonic() + grace
    idle_since = None
    while time.monotonic() < end and stop.count < 2 and rclpy.ok():
        executor.spin_once(timeout_sec=0.05)
        if node.in_flight == 0 and not stopper.is_alive():
            idle_since = idle_since or time.monotonic()
            if time.monotonic() - idle_since > 0.3:  # results are sent by executor tasks
                break
    stopper.join(timeout=max(0.0, end - time.monotonic()))


if __name__ == "__main__":
    sys.exit(main())
