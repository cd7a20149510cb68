"""The real-time controller without ROS: joint-state samples in, commands and diagnostics out.

:class:`ControllerCore` consumes joint-state samples ``(message, stamp, now)`` and watchdog calls ``(now)`` and
returns what to send to the actuators (:class:`~.tick.TickResult`). The ROS node
(``marionette_control.nodes.controller``) is a thin adapter around it; a deterministic bag replay
(``marionette_control.bags.replay``) and the offline closed loop over the simulated arm
(``marionette_control.sim.offline_loop``) drive exactly the same object (times are integer nanoseconds of
whatever clock the stamps use: ROS time, or ``/clock`` under ``use_sim_time``). :func:`make_core` builds it from a
model file the way all of them do; :func:`core_from_description` from the node's parameter values.

Composition
-----------
The core keeps the run (running, its last tick, the goal, the counters) and decides what each call sends;
each part has one job, documented and tested on its own:

==================  ===============================================================================================
:mod:`.controller_options` ControllerOptions and the node's parameters (specs, defaults, their options)
:mod:`.intake`      samples in: stamp checks, content (``read``) and plausibility (:mod:`.sample_checks`), the
                    buffer, the alignment of samples to ticks
:mod:`.staging`     trajectories and plans: checked, staged, taken, switched, refused
:mod:`.tick`        the parts that depend on one trajectory and their chain from the estimate to the clamped
                    command (:mod:`.estimation`, :mod:`.prediction`, :mod:`.law`, :mod:`.integral_action`,
                    :mod:`.command_limits`; fused: :mod:`.native_tick`), the hold command
:mod:`.tolerances`  start, path and goal tolerances
:mod:`.faults`      fault kinds and levels, the active ones and their counts
:mod:`.status`      the diagnostic status, compute-time statistics
==================  ===============================================================================================

One tick, for the sample q_k that is tick k of the run (:mod:`.tick`)::

    checks → x̂_k = estimate(q_k) → x̂_{k+d} = predict(x̂_k) → u = law(k+d, x̂_{k+d}) − K_z(k+d) z_k
           → u = clamp(u, the command stream) → tolerances(x̂_k − x_d(k)) → sent; remembered as the input of step k+d

A model step that fails anywhere in the chain holds as ``estimation_failed``; leaving the start or path tolerance
ends the run (hold), missing the goal ``goal_time`` after the end is reported while the final state is held
(:mod:`.faults`).

The tick path
-------------
A serialized sample (:meth:`ControllerCore.on_serialized`, the node's) goes to ``tick_path``
(``_core.TickPath``) first, which completes an *ordinary* tick in one native call: the sample read
and checked (the gate), its stamp checked, buffered, aligned, its predecessor found, the fused tick
(:mod:`.native_tick`) within the path tolerance and finite, the command recorded. It may tick only while
running past the run's first tick with no fault active and no switch or plan pending or in effect
(this class says so with each call); it declines a sample between ticks, past the end or without a
predecessor, and undoes the kernel's tick when the estimate leaves its tolerance or is not finite. A
declined sample is taken from where the gate left it by the rules of :mod:`.intake`, which decide and explain
(``test/test_tick_path.py`` holds a core with the tick path to one without, sample by sample).
"""

from __future__ import annotations

import time
from operator import attrgetter
from typing import Callable, Optional

import numpy as np

from marionette_control import _core
from marionette_control.model.joint_map import JointMap
from marionette_control.model.limits import from_description
from marionette_control.model.yaml_model import ModelDescription
from marionette_control.tracking.command_limits import CommandLimits
from marionette_control.tracking.faults import ERROR, OK, STALE, WARN, Faults
from marionette_control.tracking.intake import SampleIntake
from marionette_control.tracking.joint_states import NS, JointStateReader
from marionette_control.tracking.lookahead import Lookahead
from marionette_control.tracking.controller_options import ControllerOptions, controller_options
from marionette_control.tracking.plan_switch import Plan
from marionette_control.tracking.sample_checks import SampleChecks
from marionette_control.tracking.staging import StagedTrajectory, Staging
from marionette_control.tracking.status import ComputeTimes, status
from marionette_control.tracking.tick import TickResult, Tracking
from marionette_control.tracking.tolerances import make_tolerances
from marionette_control.trajectory import Trajectory

#: The controller's API: this module's and what its users take from its parts.
__all__ = ["ControllerCore", "make_core", "core_from_description", "ControllerOptions", "TickResult",
           "OK", "WARN", "ERROR", "STALE"]


def make_core(desc: ModelDescription, options: Optional[ControllerOptions] = None,
              reader: Optional[JointStateReader] = None, fused: bool = True) -> "ControllerCore":
    """The ControllerCore of a model description.

    The command clamp, the tension guard and the plausibility checks take the file's limits as
    :func:`marionette_control.model.limits.from_description` reads them (the drives' range, speed and
    acceleration; the strings' minimum tension; the URDF joints' range and speed), the same the optimizer and the
    simulator use.
    ``reader`` maps a sample to q (nq,) in model order by joint name (the node's; the core then also takes
    serialized samples through the native gate, :meth:`ControllerCore.on_serialized`); default: the sample *is* q
    in model order (offline loops feed configurations directly). ``fused``: see :class:`ControllerCore`.
    """
    model = desc.model
    options = options or ControllerOptions()
    limits = from_description(desc)
    checks = SampleChecks(model, limits, options.plausibility)
    return ControllerCore(model, _as_configuration if reader is None else reader.read,
                          CommandLimits.from_limits(limits), checks, options, fused=fused,
                          gate=None if reader is None else checks.gate(reader.hardware_names), strings=limits)


def core_from_description(desc: ModelDescription, values: Optional[dict] = None) -> "ControllerCore":
    """The ControllerCore the node runs for a model description and parameter values {name: value}
    (:func:`~.controller_options.controller_options`; also for replaying recorded joint states: feed
    ``core.on_joint_state(msg, stamp_ns, receive_ns)`` and ``core.on_watchdog(now_ns)`` in time order)."""
    reader = JointStateReader(JointMap.of(desc.model, desc.hardware_joints))
    return make_core(desc, controller_options(values or {}, desc), reader)


def _as_configuration(q) -> np.ndarray:
    return np.array(q, dtype=float)


def _part(path: str, doc: str) -> property:
    """A read-only attribute of the core that is an attribute of one of its parts (``"staging.run"``)."""
    return property(attrgetter(path), doc=doc)


class ControllerCore:
    """Tracking controller tick logic over joint-state samples (ROS-free; see the module docstring).

    Parameters
    ----------
    model : _core.Model
    read : callable(msg) -> ndarray (nq,)
        Maps a joint-state message (anything with ``name`` and ``position``) to the
        model's configurations by name, a new array per call (the core keeps it in its
        ring buffer); raises ValueError with a ``kind`` attribute for unusable messages
        (:meth:`.JointStateReader.read`).
    limits : CommandLimits, optional
        Limits of the discrete inputs (:meth:`CommandLimits.from_limits`).
    checks : SampleChecks, optional
        Plausibility checks (:func:`make_core` builds them from the model file); None: none.
    options : ControllerOptions
    fused : with the Kalman estimator, compute each tick in one native call (:mod:`.native_tick`; the
        default); False: call the Python parts one by one, the reference the fused tick is tested against
    gate : _core.SampleGate, optional
        ``read`` and ``checks`` compiled for serialized samples (:meth:`.SampleChecks.gate`): with it,
        :meth:`on_serialized` gives every sample to ``tick_path`` (``_core.TickPath``) first, which reads it and
        completes an ordinary tick in one call (module docstring, "The tick path"); None: serialized samples are
        parsed and go the Python way.
    strings : ModelLimits, optional
        The model's limits (:func:`marionette_control.model.limits.from_description`): the tension guard keeps its
        strings' tension at ``min_tension`` + ``options.tension_reserve`` (:mod:`.tension_guard`); None: no guard.
    """

    def __init__(self, model, read: Callable, limits: Optional[CommandLimits] = None,
                 checks: Optional[SampleChecks] = None, options: Optional[ControllerOptions] = None,
                 fused: bool = True, gate=None, strings=None):
        options = options or ControllerOptions()
        self.options = options
        self.fused = bool(fused)
        self.model = model
        self.nd, self.nk, self.nu, self.nq = model.nd, model.nk, model.nu, model.nq
        self.limits = limits or CommandLimits.unlimited(model.nU, model.nk)
        self.limits.check_sizes(model)
        self.checks = checks
        self.strings = strings
        self.delay = int(options.command_delay_steps)
        self.tolerances = make_tolerances(model, options.tolerances, options.goal_time)
        self.intake = SampleIntake(model.nq, read, checks, options.buffer_size)
        # the common tick in one call over the intake's buffer
        self.tick_path = None if gate is None else _core.TickPath(gate, self.intake.ring)
        self.staging = Staging(model, self.delay, options.feedback, options.switch_tolerance, self.tolerances,
                               self._build, self._installed)
        self.faults = Faults()
        # the run
        self.running = False
        self.aborted = False
        self.goal_reached = False
        self._k: Optional[int] = None
        self._tick_stamp: Optional[int] = None
        self.last_x_hat: Optional[np.ndarray] = None
        self.last_x_ref: Optional[np.ndarray] = None
        # counters and statistics
        self.samples = 0
        self.rejected = 0
        self.ticks = 0
        self.holds = 0
        self.missed_ticks = 0
        self.guarded_ticks = 0      # ticks whose command the tension guard moved, since start-up
        self.run_guarded_ticks = 0  # ... in the current run
        self._start_age: Optional[int] = None  # age of the run's last sample before its first tick (:meth:`_accept`)
        self.start_skipped = 0      # samples passed over at the run's start as queued (:meth:`_accept`)
        self.compute_times = ComputeTimes(options.stats_window)
        # the next setpoints of every tick's command (command_interface joint_trajectory), else None
        self.lookahead = (Lookahead(options.command_lookahead) if options.command_interface == "joint_trajectory"
                          else None)
        self.set_timing(options.state_timeout, options.stamp_tolerance)

    # what the node, the tools and the tests read of the parts
    tracking = _part("staging.tracking", "The Tracking of the trajectory taken (None: none yet).")
    trajectory_source = _part("staging.source", "Where the trajectory taken came from.")
    staged = _part("staging.staged", "The StagedTrajectory waiting to be taken (None: none).")
    trajectory_error = _part("staging.error", "Why the last trajectory was refused (\"\" once one is staged).")
    trajectory_event = _part("staging.last_event", "The message of the last trajectory event.")
    trajectory_counts = _part("staging.counts", "{event: count} of the trajectory events.")
    run = _part("staging.run", "The run, counted up at every start and trajectory switch.")
    plan_counts = _part("staging.plan_counts", "{\"offered\", \"switched\": count} of the plans.")
    plan_rejections = _part("staging.plan_rejections", "{reason: count} of the plans refused.")
    plan_rejection = _part("staging.plan_rejection", "The last plan refused: \"reason: message\".")
    pending_plan = _part("staging.pending_plan", "The plan scheduled to take over (None: none).")
    active_faults = _part("faults.active", "{kind: message} of the active faults, in the order raised.")
    fault_counts = _part("faults.counts", "{kind: count} of every fault raised since start-up.")
    fault = _part("faults.latest", "The latest active fault kind (None when healthy).")
    fault_message = _part("faults.message", "The message of the latest active fault.")

    @property
    def k(self) -> Optional[int]:
        """Index of the last computed tick in the current run (None before the first)."""
        return self._k

    @property
    def dt(self) -> Optional[float]:
        tracking = self.staging.tracking
        return None if tracking is None else tracking.system.dt

    @property
    def finished(self) -> bool:
        return self.running and self._k is not None and self._k >= self.staging.tracking.N

    def set_timing(self, state_timeout: Optional[float] = None, stamp_tolerance: Optional[float] = None) -> None:
        """Changes the stale-data timeout (s) and/or the sample-spacing tolerance (fraction of dt)."""
        self.intake.set_timing(state_timeout, stamp_tolerance)
        self._retime()

    def _retime(self) -> None:
        """The tick alignment for the trajectory's dt and stamp_tolerance, and the tick path's timing."""
        intake, tracking = self.intake, self.staging.tracking
        if tracking is not None:
            intake.retime(tracking.system.dt)
        if self.tick_path is not None and intake.align is not None:
            self.tick_path.set_timing(intake.timeout_ns, intake.align)

    def _build(self, staged: StagedTrajectory) -> Tracking:
        return Tracking.build(self.model, staged.law, staged.warning, self.options, self.limits, self.tolerances,
                              self.intake.gap_steps(staged.trajectory.dt), self.fused, self.strings)

    def _installed(self, tracking: Tracking) -> None:
        """A trajectory was taken or switched to: the timing follows its dt, the tick path its parts."""
        self._retime()
        if self.tick_path is not None:
            self.tick_path.track(tracking.kernel, tracking.history if tracking.kernel is not None else None)

    # ----------------------------------------------------------------------------------------- trajectories, plans

    def load_trajectory(self, trajectory: Trajectory, source: str = "") -> str:
        """Checks and stages a trajectory, taking it at once when idle and it starts where the arm is
        (:mod:`.staging`); returns what happened.

        Raises TrajectoryError/ValueError (with ``source`` in the message) for a trajectory of
        another model, without gains, with gains for another command delay, or otherwise unusable;
        nothing changes then (counted as refused).
        """
        return self.staging.load(trajectory, source, self.running, self.intake.latest)

    def refuse(self, source: str, error: Exception) -> None:
        """Records a trajectory refused before it could be staged (:meth:`.Staging.refuse`)."""
        self.staging.refuse(source, error)

    def check_trajectory(self, trajectory: Trajectory, source: str = "") -> StagedTrajectory:
        """The staged form of ``trajectory``, or TrajectoryError/ValueError (:meth:`.Staging.check`)."""
        return self.staging.check(trajectory, source)

    def switch_trajectory(self, at_tick: Optional[int] = None) -> tuple[bool, str]:
        """A client's request to take the staged trajectory, now when idle, at tick ``at_tick`` of the run when
        tracking (default: the next tick); (accepted, message) (:meth:`.Staging.request_switch`)."""
        return self.staging.request_switch(self.running, self._k, self.intake.latest, at_tick)

    def offer_plan(self, plan: Plan) -> tuple[bool, str]:
        """A re-optimized window of the motion being tracked; (accepted, message) (:meth:`.Staging.offer_plan`)."""
        return self.staging.offer_plan(plan, self.running, self._k)

    def refuse_plan(self, message: str) -> tuple[bool, str]:
        """A plan message that does not hold a plan: offered and refused as ``invalid``."""
        return self.staging.refuse_plan(message)

    # ----------------------------------------------------------------------------------------- start / stop

    def start(self) -> tuple[bool, str]:
        """Starts tracking from k = 0 at the next tick; (success, message).

        Refused while running, without a trajectory, or when the latest valid sample is outside the
        start tolerance of the trajectory's initial configuration.
        """
        if self.running:
            return False, "already running; stop first"
        staging = self.staging
        if staging.staged is not None:
            staging.take_if_idle(self.intake.latest)
        tracking = staging.tracking
        if tracking is None:
            why = f" (last refused: {staging.error})" if staging.error else ""
            return False, "no trajectory loaded: set trajectory_file or publish one on the trajectory topic" + why
        q = self.intake.latest
        if q is not None:
            far = self.tolerances.check("start", q - tracking.trajectory.X[0, :self.nq])
            if far is not None:
                return False, (f"refused: the arm is not where the trajectory starts: {far.describe('start')}; "
                               "bring it there first")
        self.faults.clear_run_faults()
        self.running = True
        staging.run += 1
        self.aborted = False
        self.goal_reached = False
        self._k = None
        self._tick_stamp = None
        self._start_age = None
        self.run_guarded_ticks = 0
        if self.lookahead is not None:
            self.lookahead.reset()
        tracking.reset_estimate()
        tracking.clear_plans()
        msg = f"started tracking {staging.source} ({tracking.N} steps, dt {self.dt:g} s)"
        if self.faults.active:
            msg += f"; holding until the joint-state fault clears ({self.fault}: {self.fault_message})"
        return True, msg

    def stop(self) -> tuple[bool, str, Optional[np.ndarray]]:
        """Stops tracking; (success, message, hold command to send once or None)."""
        self.faults.clear_run_faults()
        if not self.running:
            self.aborted = False
            return True, "was not running", None
        hold = self._end_run()
        k = self._k
        return True, f"stopped at tick {k if k is not None else 'none (no tick yet)'}; holding", hold

    def _end_run(self) -> Optional[np.ndarray]:
        """Ends the run (a requested switch with it); the hold command to send once. Idle from here, so a staged
        trajectory that starts where the arm is is taken."""
        hold = self._hold_command()
        self.running = False
        self._tick_stamp = None
        self.staging.end_run(self.intake.latest)
        return hold

    # ----------------------------------------------------------------------------------------- samples

    def on_joint_state(self, msg, stamp_ns: int, now_ns: int) -> TickResult:
        """Processes one joint-state sample stamped ``stamp_ns`` received at ``now_ns`` (same clock)."""
        t0 = time.perf_counter_ns()
        self.samples += 1
        return self._timed(self._sample(msg, stamp_ns, now_ns), t0)

    def on_serialized(self, data: bytes, now_ns: int, parse: Callable) -> TickResult:
        """Processes one serialized joint state (``data``, sensor_msgs/JointState) received at ``now_ns``.

        The gate (``gate``) reads and checks a plain sample in one native call; any other, and every one without
        a gate, is parsed by ``parse`` (bytes -> an object with ``stamp_ns``, ``name``, ``position``:
        :meth:`.JointStateParser.parse`) and goes through ``read`` and ``checks``, which decide and
        explain. Bytes ``parse`` cannot read are rejected as ``malformed``. compute_ns covers all of it.
        """
        t0 = time.perf_counter_ns()
        self.samples += 1
        path = self.tick_path
        got = None
        if path is not None:
            # it may tick when the tick is an ordinary one: running past the first tick, no fault, no switch or plan
            # pending or in effect (the law's reference is the motion's); it checks the rest itself
            staging = self.staging
            law = staging.tracking.law if self.running else None
            ordinary = (law is not None and self._tick_stamp is not None and not self.faults.active
                        and staging.switch is None and law.active is None and law.previous is None)
            got = path.tick(data, now_ns, self._tick_stamp if ordinary else None, self._k)
        if got is not None and len(got) == 5:  # ticked: (stamp, k, x̂_k, x_d(k), u), stored and recorded
            stamp_ns, k, x_hat, x_ref, u = got
            res = self._ticked(TickResult("tick", u, stamp_ns), k, stamp_ns, x_hat, x_ref, u)
        elif got is not None:  # read and checked: (stamp, q)
            stamp_ns, q = got
            fault = self.intake.stamp_fault(stamp_ns, now_ns)
            res = self._accept(q, stamp_ns, now_ns) if fault is None else self._reject(*fault, stamp_ns, now_ns)
        else:
            try:
                msg = parse(data)
            except Exception as e:  # bytes no deserializer reads (no publisher of the type writes them)
                res = self._reject("malformed", f"joint state could not be deserialized: {e}", 0, None)
            else:
                res = self._sample(msg, msg.stamp_ns, now_ns)
        return self._timed(res, t0)

    def _timed(self, res: TickResult, t0: int) -> TickResult:
        res.compute_ns = dt = time.perf_counter_ns() - t0
        if res.kind == "tick":
            self.compute_times.add(dt)
        return res

    def _sample(self, msg, stamp_ns: int, now_ns: int) -> TickResult:
        """The sample ``msg``: its stamp, its content and plausibility (:mod:`.intake`), then :meth:`_accept`."""
        fault = self.intake.stamp_fault(stamp_ns, now_ns)
        if fault is None:
            q, fault = self.intake.read_checked(msg, stamp_ns)
        if fault is not None:
            return self._reject(*fault, stamp_ns, now_ns)
        return self._accept(q, stamp_ns, now_ns)

    def _accept(self, q: np.ndarray, stamp_ns: int, now_ns: int) -> TickResult:
        """A valid sample q (nq,) stamped ``stamp_ns``, received at ``now_ns``: buffered; a tick if it is one
        (:mod:`.intake`).

        A run's first tick is a current sample: samples that queued while the node was busy starting (configure
        loads the trajectory and its filter, activation collects garbage: tens of ms, several periods) arrive back
        to back afterwards, and a first tick on the oldest would send a command that acts several steps after the
        state it answers (a simulator in lock-step takes any command as the answer to its latest sample). Such
        samples are buffered but not ticked (:meth:`.SampleIntake.queued_at_start`, counted in
        ``start_skipped``); a transport whose latency is a period or more but steady costs one sample.
        """
        last = self.intake.push(stamp_ns, q)
        res = TickResult("none", None, stamp_ns)
        staging = self.staging
        if not self.running:
            self.faults.clear_sample_faults(res)
            if staging.staged is not None:
                taken, message = staging.take_if_idle(q)
                if taken:
                    res.event = message
            return res
        k, q_prev, gap = self.intake.tick_of(stamp_ns, last, self._tick_stamp, self._k,
                                             staging.tracking.estimator.needs_predecessor)
        if gap is not None:
            return self._hold(res, "sample_gap", gap, k)
        if k < 0:
            return res
        if self._tick_stamp is None:
            previous, self._start_age = self._start_age, now_ns - stamp_ns
            if self.intake.queued_at_start(self._start_age, previous):
                self.start_skipped += 1
                return res
        sw = staging.due(k)
        if sw is None:
            return self._tick(res, k, q, q_prev, stamp_ns)
        if sw.plan is not None:  # the plan takes over at step k + d if it starts at the state predicted there
            if k > sw.at_tick:
                res.plan_event = staging.skipped(sw, k)
                return self._tick(res, k, q, q_prev, stamp_ns)
            return self._tick(res, k, q, q_prev, stamp_ns, plan=sw.plan)
        # tick k of the run becomes tick 0 of the switched-to trajectory, if the arm is still at its start
        switched, res.event = staging.switch_to(sw, k, q)
        if not switched:
            return self._tick(res, k, q, q_prev, stamp_ns)
        self.faults.clear_run_faults()
        self.goal_reached = False
        self._k = None
        return self._tick(res, 0, q, q_prev, stamp_ns, carried=True)

    # ----------------------------------------------------------------------------------------- the tick

    def _tick(self, res: TickResult, k: int, q: np.ndarray, q_prev: Optional[np.ndarray], stamp_ns: int,
              carried: bool = False, plan: Optional[Plan] = None):
        """Tick k of the run (``carried``: its first tick continues another run's commands: a switch; ``plan``: a
        plan due to take over at step k + d)."""
        tr = self.staging.tracking
        if k == 0 and not carried:
            tr.start_run(tr.limits.hold(q[self.nd:]))
        x_ref = tr.law.reference(k)
        which = tr.tolerance_at(k, self.goal_reached)
        within = None
        try:
            if plan is None:
                x_hat, x_pred, u, finite, within = tr.tick(k, q, q_prev, x_ref)
            else:  # the switch rule needs x̂_{k+d} before the law
                x_hat, x_pred = tr.estimate_predict(k, q, q_prev)
        except _core.StepError as e:
            return self._step_failed(res, k, e)
        if x_hat is None:  # a gap too long to bridge and no predecessor to restart from
            return self._hold(res, "sample_gap", f"no joint state one time step before the sample at "
                                                 f"{stamp_ns / NS:.6f} s to restart the estimate after a gap", k)
        if self._check_tolerances(res, k, which, None if within else (x_hat, x_ref)):
            return res
        if plan is not None:
            res.plan_event = self.staging.take_plan(plan, x_pred)
            try:
                u, finite = tr.command(k, q, x_ref, x_pred, x_hat)
            except _core.StepError as e:  # the tension guard's step
                return self._step_failed(res, k, e)
        if not finite:
            tr.reset_estimate()
            return self._hold(res, "invalid_command", f"non-finite estimate or command at tick {k}", k)
        tr.history.sent_by_tick(k, u)
        return self._ticked(res, k, stamp_ns, x_hat, x_ref, u)

    def _step_failed(self, res: TickResult, k: int, error: Exception) -> TickResult:
        """A model step of tick k failed (the estimate's, the prediction's or the tension guard's): hold."""
        self.staging.tracking.reset_estimate()
        return self._hold(res, "estimation_failed", f"the model could not step the estimate at tick {k}: {error}", k)

    def _ticked(self, res: TickResult, k: int, stamp_ns: int, x_hat: np.ndarray, x_ref: np.ndarray,
                u: np.ndarray) -> TickResult:
        """Tick k (the sample stamped ``stamp_ns``) done: its estimate x̂_k, x_d(k) and command u, recorded in the
        history; ``res`` becomes its result."""
        res.missed = 0 if self._k is None else k - self._k - 1
        self.missed_ticks += res.missed
        self._k = k
        self._tick_stamp = stamp_ns
        self.ticks += 1
        self.last_x_hat, self.last_x_ref = x_hat, x_ref
        res.kind, res.command, res.k, res.x_hat, res.x_ref = "tick", u, k, x_hat, x_ref
        if self.lookahead is not None:
            tr, j = self.staging.tracking, k + self.delay
            res.lookahead = self.lookahead.points(u, j, tr.law.feedforward, tr.law.active, tr.limits,
                                                  tr.history.stream_state(j, tr.system.dt)[0])
            tr.history.carries(res.lookahead)   # what the drives follow over a tick that sends nothing
        if self.staging.tracking.guarded:
            res.guarded = True
            self.guarded_ticks += 1
            self.run_guarded_ticks += 1
        if self.faults.active:
            self.faults.clear_sample_faults(res)
        return res

    def _check_tolerances(self, res: TickResult, k: int, which: Optional[str], states) -> bool:
        """What the ``which`` tolerance of tick k (:meth:`.Tracking.tolerance_at`) decides for ``states`` =
        (x̂_k, x_d(k)), or None when the fused tick found them within it; True when it ended the run (``res`` is its
        result)."""
        if which is None:
            return False
        v = None if states is None else self.staging.tracking.violation(which, *states)
        if which == "goal":
            if v is None:
                self.goal_reached = True
            elif (k >= self.staging.tracking.N + round(self.tolerances.goal_time / self.dt)
                  and "goal_tolerance" not in self.faults.active):
                self.faults.raise_fault(res, "goal_tolerance", f"{v.describe('final state')} "
                                                               f"{self.tolerances.goal_time:g} s after the end; "
                                                               "holding the final state")
            return False
        if v is None:
            return False
        what = "trajectory's start" if k == 0 else f"trajectory at tick {k}"
        self.faults.raise_fault(res, f"{which}_tolerance", f"{v.describe(what)}: tracking aborted, holding")
        res.command = self._end_run()
        if res.command is not None:
            res.kind = "hold"
            self.holds += 1
        self.aborted = True
        return True

    # ----------------------------------------------------------------------------------------- watchdog, holds

    def on_watchdog(self, now_ns: int) -> TickResult:
        """Periodic check (at about the tick rate): stale data → fault and, while running, the hold command."""
        res = TickResult("none", None, 0)
        fault = self.intake.staleness(now_ns)
        if fault is not None and fault[0] not in self.faults.active:
            self.faults.raise_fault(res, *fault)
        self.faults.report_active(res)
        if fault is not None:
            self._hold_if_running(res, self.intake.slot_at(now_ns, self._tick_stamp, self._k))
        return res

    def _hold_command(self) -> Optional[np.ndarray]:
        tracking = self.staging.tracking
        if tracking is None:
            return None
        return tracking.hold_command(self._tick_stamp is not None, self.intake.latest)

    def _hold_if_running(self, res: TickResult, slot: Optional[int]) -> None:
        """While tracking, make ``res`` the hold command (faults never send a computed command) and remember it."""
        if self.running:
            res.command = self._hold_command()
            if res.command is not None:
                res.kind = "hold"
                self.holds += 1
                if slot is not None and self.lookahead is not None:   # joint_trajectory: a stop
                    self.staging.tracking.stopped(slot, res.command)
                elif slot is not None:
                    self.staging.tracking.held(slot, res.command)

    def _reject(self, kind: str, message: str, stamp_ns: int, now_ns: Optional[int]) -> TickResult:
        """A rejected sample; its hold command (while running) is remembered at the slot of ``now_ns``."""
        self.rejected += 1
        res = TickResult("none", None, stamp_ns)
        self.faults.raise_fault(res, kind, message)
        slot = None if now_ns is None else self.intake.slot_at(now_ns, self._tick_stamp, self._k)
        self._hold_if_running(res, slot)
        return res

    def _hold(self, res: TickResult, kind: str, message: str, slot: Optional[int]) -> TickResult:
        self.faults.raise_fault(res, kind, message)
        self._hold_if_running(res, slot if self._tick_stamp is not None else None)
        return res

    # ----------------------------------------------------------------------------------------- diagnostics

    def compute_stats(self) -> dict:
        """Tick compute times (s) over the last ``stats_window`` ticks: median, p99, max (NaN before any)."""
        return self.compute_times.stats()

    def state_name(self) -> str:
        if self.staging.tracking is None:
            return "no_trajectory"
        if not self.running:
            return "aborted" if self.aborted else "idle"
        return "finished" if self.finished else "running"

    def status(self) -> tuple[int, str, list[tuple[str, str]]]:
        """(level, message, [(key, value)]) for a diagnostic_msgs/DiagnosticStatus (:func:`.status.status`)."""
        return status(self)
