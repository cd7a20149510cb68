"""``~/execute`` without ROS: a goal checked, its phases, what its ticks measure and its result.

The controller's action ``~/execute`` (``marionette_interfaces/action/ExecuteMotion.action``) is control_msgs'
FollowJointTrajectory for this arm: a goal is a trajectory, or a motion (a motion name, desired configurations)
that the optimizer turns into one; the controller tracks it from its first state, reports batches of ticks, and
ends with how well it tracked. The node (``nodes/controller.py``) translates messages; the rules are here, tested
without a graph (``test/test_execution.py``):

* :func:`goal_source`, :func:`check_trajectory_fields` and :func:`goal_tolerances` check a goal before anything
  moves and raise :class:`GoalError` with the result's error code and a message naming the goal's field
  (``trajectory.dt``, ``path_tolerance[1].position``, ...);
* :func:`start_refusal` says why the arm cannot start a trajectory (no joint state yet, away from x_d(0));
* :class:`Execution` is one goal from acceptance to its result: its phase (:data:`PHASES`), the measured
  configurations of its ticks, the goal's own tolerances on them, the end it reached (:data:`CODES`) and the result
  (:class:`ExecutionResult`: RMS and largest error per arm angle over the motion, the worst executed margins of
  the commands and of the string tension on the controller's estimate, the faults raised);
* :class:`GoalQueue` admits goals one after another as ``execute.concurrency`` says: ``reject`` (a second goal
  while one is admitted is rejected) or ``queue`` (up to ``execute.queue_size`` wait, first come first served);
  a goal never retargets the one that runs.

Tolerances, as FollowJointTrajectory's: on the *measured* configurations against the trajectory's, q_k − q_d(k),
per joint (0 = unchecked); the path tolerance at every tick k < N (violated: the run ends, hold,
``PATH_TOLERANCE_VIOLATED``), the goal tolerance from k = N on: within it, the goal succeeds; still outside
``goal_time`` after the end, ``GOAL_TOLERANCE_VIOLATED``. A goal's own tolerances only tighten the controller's
(``constraints.<joint>.*``: the safety limit its parameters set), which also keep acting on its estimate
(:mod:`.tolerances`): the core ending the run ends the goal with the core's reason.

Phases: ``queued`` (admitted, waiting for the goal before it), ``optimizing`` (the optimizer's action runs),
``waiting_for_start`` (the trajectory is taken, the first tick not yet computed), ``tracking`` (ticks 0 … N − 1),
``holding`` (k ≥ N: the final state held until the goal tolerance is met or missed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from marionette_control import _core, validation
from marionette_control.model.margins import drive_margins, string_tensions, tension_margins
from marionette_control.tracking.tolerances import Tolerances, check_tolerance
from marionette_control.trajectory import Trajectory

# The result's error codes (ExecuteMotion.action): FollowJointTrajectory's, then the controller's own.
SUCCESSFUL, INVALID_GOAL, INVALID_JOINTS, PATH_TOLERANCE_VIOLATED, GOAL_TOLERANCE_VIOLATED = 0, -1, -2, -4, -5
START_TOLERANCE_VIOLATED, OPTIMIZATION_FAILED, NOT_READY, CANCELED, ABORTED = -10, -11, -12, -13, -14
CODES = {SUCCESSFUL: "successful", INVALID_GOAL: "invalid goal", INVALID_JOINTS: "invalid joints",
         PATH_TOLERANCE_VIOLATED: "path tolerance violated", GOAL_TOLERANCE_VIOLATED: "goal tolerance violated",
         START_TOLERANCE_VIOLATED: "start tolerance violated", OPTIMIZATION_FAILED: "optimization failed",
         NOT_READY: "not ready", CANCELED: "canceled", ABORTED: "aborted"}

PHASES = ("queued", "optimizing", "waiting_for_start", "tracking", "holding")
#: the policies of ``execute.concurrency``
CONCURRENCY = ("reject", "queue")


class GoalError(ValueError):
    """A goal that cannot run: ``code`` (:data:`CODES`) and the message, which names the goal's field."""

    def __init__(self, message: str, code: int = INVALID_GOAL):
        super().__init__(message)
        self.code = code


def goal_source(trajectory: bool, motion_name: str, desired: bool) -> str:
    """Which of the goal's three sources is given ("trajectory", "motion_name" or "desired"); GoalError unless
    exactly one is."""
    given = [name for name, on in (("trajectory", trajectory), ("motion_name", bool(motion_name)),
                                   ("desired", desired)) if on]
    if len(given) != 1:
        raise GoalError("give exactly one of trajectory (num_steps > 0), motion_name or desired (points), got "
                        + (", ".join(given) if given else "none"))
    return given[0]


def check_trajectory_fields(model, model_id: str, model_hash: str, dt: float, stamp_ns: int,
                            arrays: dict) -> None:
    """The checks of a goal's TrackedTrajectory that name its fields, before it is read as a Trajectory.

    arrays : {field name: values} (``states``, ``inputs``, ``gains``). Another model: ``INVALID_JOINTS``;
    a time step that is not a finite number > 0, a non-finite value, a start time: ``INVALID_GOAL``.
    """
    if model_id != model.name:
        raise GoalError(f"trajectory.model_id '{model_id}' is not the controller's model '{model.name}'",
                        INVALID_JOINTS)
    if model_hash != model.hash:
        raise GoalError(f"trajectory.model_hash {model_hash} is not the hash of the controller's model "
                        f"'{model.name}' ({model.hash}): it was made for other parameters", INVALID_JOINTS)
    validation.positive(dt, "trajectory.dt (s)", error=GoalError)
    for name, values in arrays.items():
        validation.finite_array(values, f"trajectory.{name}", error=GoalError)
    if stamp_ns:
        raise GoalError("trajectory.header.stamp must be zero (start when the goal is accepted): a start at a "
                        "given time is not supported")


def goal_tolerances(own: Tolerances, hardware_names: Sequence[str], path: Sequence[tuple],
                    goal: Sequence[tuple], goal_time: float) -> Tolerances:
    """The tolerances a goal is judged by: the controller's ``own`` (nq,) tightened by the goal's.

    hardware_names : (nq,) the joint names of the configurations in model order; path, goal : the goal's
    (name, position) pairs (position > 0 tightens, 0 keeps the controller's); goal_time : s (0: the
    controller's). GoalError names the field of an unknown joint (``INVALID_JOINTS``), a repeated one or a
    tolerance that is not finite and >= 0.
    """
    vectors = {}
    for what, pairs, base in (("path_tolerance", path, own.path), ("goal_tolerance", goal, own.goal)):
        v = np.array(base, dtype=float)
        seen = set()
        for i, (name, position) in enumerate(pairs):
            if name not in hardware_names:
                raise GoalError(f"{what}[{i}].name '{name}' is no joint of the arm ({', '.join(hardware_names)})",
                                INVALID_JOINTS)
            if name in seen:
                raise GoalError(f"{what}[{i}].name '{name}' is given twice")
            seen.add(name)
            tol = validation.number(position, f"{what}[{i}].position (rad or m; 0: the controller's)",
                                    minimum=0.0, error=GoalError)
            j = list(hardware_names).index(name)
            if tol > 0.0:
                v[j] = tol if v[j] == 0.0 else min(v[j], tol)
        vectors[what] = v
    goal_time = validation.number(goal_time, "goal_time_tolerance (s)", minimum=0.0, error=GoalError)
    return Tolerances(own.start, vectors["path_tolerance"], vectors["goal_tolerance"],
                      goal_time if goal_time > 0.0 else own.goal_time, list(own.names))


def start_refusal(tolerances: Tolerances, q: Optional[np.ndarray], trajectory: Trajectory) -> Optional[str]:
    """Why the arm at ``q`` (nq,) (None: no joint state yet) cannot start ``trajectory`` (the start tolerance), or
    None."""
    if q is None:
        return "no joint state has arrived yet: the controller does not know where the arm is"
    far = tolerances.check("start", q - trajectory.X[0, :q.size])
    if far is None:
        return None
    return f"the arm is not where the trajectory starts: {far.describe('start')}; bring it there first"


def no_trajectory_reason(topic: str, publishers: int, received: int, refused: str, waited: float) -> str:
    """Why no trajectory could be taken from ``topic`` (``publishers`` discovered, ``received`` samples, the last
    refusal ``refused`` or "", after ``waited`` s): what the controller saw."""
    if refused:
        return f"no trajectory loaded: the last one was refused: {refused}"
    after = f" within {waited:g} s" if waited > 0.0 else ""
    if publishers == 0:
        return (f"no trajectory loaded: no publisher on {topic} was discovered{after} (is marionette_optimizer "
                "running in this namespace and on this ROS graph?) and trajectory_file is empty")
    if received == 0:
        return (f"no trajectory loaded: {publishers} publisher(s) on {topic} but no sample received{after} (nothing "
                "optimized yet? call the optimizer's ~/optimize or ~/optimize_action, or set trajectory_file)")
    return f"no trajectory loaded: {received} sample(s) from {topic}, none usable"


@dataclass
class ExecutionResult:
    """What a goal reached (ExecuteMotion.Result's fields): code and message, where its trajectory came from and
    the run; the ticks; per arm angle (``joint_names``) the RMS and largest |measured − desired| over ticks 0 … N
    (rad); ``margins`` (rows: family, component, side, limit, unit, margin, normalized, tick, time_s, satisfied);
    ``faults`` {kind: times raised during the goal}."""

    code: int
    message: str
    source: str = ""
    run: int = 0
    ticks: int = 0
    last_tick: int = 0
    num_steps: int = 0
    joint_names: list = field(default_factory=list)
    rms_error: list = field(default_factory=list)
    max_error: list = field(default_factory=list)
    margins: list = field(default_factory=list)
    faults: dict = field(default_factory=dict)

    @property
    def success(self) -> bool:
        return self.code == SUCCESSFUL


@dataclass
class Batch:
    """The ticks since the last feedback: k (n,), desired, actual, error (n, nd) of the arm angles [rad]."""

    ticks: np.ndarray
    desired: np.ndarray
    actual: np.ndarray

    @property
    def error(self) -> np.ndarray:
        return self.actual - self.desired


class Execution:
    """One goal from acceptance to its result (module docstring).

    The node calls :meth:`set_phase` as the goal goes (queued → optimizing → waiting_for_start), :meth:`begin` when
    its trajectory is taken and the run starts, :meth:`on_tick` after every tick of the run (the measured
    configuration q_k, the command sent, the estimate), :meth:`finish` when something else ends it (the core, a
    cancel, a stop), and :meth:`result` at the end.

    Parameters
    ----------
    names : (nd,) joint names of the arm angles (hardware names) in model order
    feedback_ticks : ticks per feedback batch
    """

    def __init__(self, names: Sequence[str], feedback_ticks: int = 10):
        self.names = list(names)
        self.nd = len(self.names)
        self.feedback_ticks = validation.integer(feedback_ticks, "execute.feedback_ticks", minimum=1)
        self.phase = "queued"
        self.code: Optional[int] = None
        self.message = ""
        self.source = ""
        self.trajectory: Optional[Trajectory] = None
        self.run = 0
        self._n = 0
        self._sent = 0
        self._faults_before: dict = {}
        self._faults: dict = {}

    @property
    def done(self) -> bool:
        return self.code is not None

    @property
    def tracking(self) -> bool:
        """Ticking: tracking or holding, not ended."""
        return not self.done and self.phase in ("tracking", "holding")

    def set_phase(self, phase: str) -> None:
        if phase not in PHASES:
            raise ValueError(f"phase must be one of {', '.join(PHASES)}, got {phase!r}")
        self.phase = phase

    def begin(self, trajectory: Trajectory, tolerances: Tolerances, source: str, run: int, delay: int,
              fault_counts: dict) -> None:
        """The run of ``trajectory`` starts (the core's ``run``): ``tolerances`` (nq) the goal's, ``delay`` the
        command delay in steps, ``fault_counts`` the core's counts so far (the result counts the goal's own)."""
        self.trajectory, self.tolerances, self.source, self.run = trajectory, tolerances, source, run
        self.delay = int(delay)
        self.dt = trajectory.dt
        self.N = trajectory.N
        nq = len(tolerances.names)
        self._goal_ticks = self.N + int(math.ceil(tolerances.goal_time / self.dt))
        rows = self._goal_ticks + 2
        self.k = np.zeros(rows, dtype=int)
        self.q = np.zeros((rows, nq))
        self.u = np.zeros((rows, trajectory.U.shape[1]))
        self.x_hat = np.zeros((rows, trajectory.X.shape[1]))
        self._n = self._sent = 0
        self._faults_before = dict(fault_counts)
        self.set_phase("waiting_for_start")

    def on_tick(self, k: int, q: np.ndarray, u: np.ndarray, x_hat: np.ndarray) -> bool:
        """Tick k of the run: the measured configuration q (nq,), the command sent u (nU,), the estimate x̂_k (nx,).
        Judges the goal's tolerances (ending it: :attr:`done`); True when a feedback batch is due (a full batch, a
        change of phase or the end)."""
        if self.done:
            return False
        n = self._n
        if n == self.k.size:
            self._grow()
        self.k[n], self.q[n], self.u[n], self.x_hat[n] = k, q, u, x_hat
        self._n = n + 1
        before = self.phase
        self.set_phase("tracking" if k < self.N else "holding")
        error = q - self.trajectory.X[min(k, self.N), :q.size]
        if k < self.N:
            v = check_tolerance(error, self.tolerances.path, self.tolerances.names)
            if v is not None:
                self.finish(PATH_TOLERANCE_VIOLATED, f"{v.describe(f'trajectory at tick {k}')} (measured)")
        elif check_tolerance(error, self.tolerances.goal, self.tolerances.names) is None:
            self.finish(SUCCESSFUL, "")
        elif k >= self._goal_ticks:
            v = check_tolerance(error, self.tolerances.goal, self.tolerances.names)
            self.finish(GOAL_TOLERANCE_VIOLATED, f"{v.describe('final state')} (measured) "
                                                 f"{self.tolerances.goal_time:g} s after the end")
        return self.done or self.phase != before or self._n - self._sent >= self.feedback_ticks

    def _grow(self) -> None:
        for name in ("k", "q", "u", "x_hat"):
            a = getattr(self, name)
            setattr(self, name, np.concatenate([a, np.zeros_like(a)]))

    def batch(self) -> Batch:
        """The ticks since the last batch (and marks them sent)."""
        s = slice(self._sent, self._n)
        self._sent = self._n
        k = self.k[s]
        return Batch(k, self.trajectory.X[np.minimum(k, self.N), :self.nd], self.q[s, :self.nd])

    def finish(self, code: int, message: str) -> None:
        """Ends the goal with ``code`` and ``message`` (the first end counts)."""
        if self.code is None:
            if code not in CODES:
                raise ValueError(f"unknown error code {code}")
            self.code, self.message = code, message

    def count_faults(self, fault_counts: dict) -> None:
        """The core's fault counts at the end: the goal's are the differences since :meth:`begin`."""
        self._faults = {kind: n - self._faults_before.get(kind, 0) for kind, n in fault_counts.items()
                        if n > self._faults_before.get(kind, 0)}

    def result(self, limits=None, system=None) -> ExecutionResult:
        """The :class:`ExecutionResult`; with ``limits`` (ModelLimits) the worst margins of the commands, and with
        ``system`` (the trajectory's DiscreteSystem) also of the string tension of the estimate."""
        res = ExecutionResult(SUCCESSFUL if self.code is None else self.code, self.message, self.source, self.run,
                              joint_names=list(self.names), faults=dict(self._faults))
        if self.trajectory is None or self._n == 0:
            res.num_steps = 0 if self.trajectory is None else self.N
            return res
        n = self._n
        k = self.k[:n]
        res.ticks, res.last_tick, res.num_steps = n, int(k[-1]), self.N
        motion = k <= self.N
        e = self.q[:n][motion, :self.nd] - self.trajectory.X[k[motion], :self.nd]
        if e.size:
            res.rms_error = np.sqrt(np.mean(e ** 2, axis=0)).tolist()
            res.max_error = np.abs(e).max(axis=0).tolist()
        if limits is not None:
            res.margins = self._margins(limits, system)
        return res

    def _margins(self, limits, system) -> list:
        """Worst margins of the commands (tick k's command acts from step k + d + 1 on) and of the string tension
        of the estimate x̂_k with the input in effect over step k (the command of tick k − d)."""
        n, nk, dt = self._n, len(limits.kinematic), self.dt
        k = self.k[:n]
        rows = []
        commands = drive_margins(limits, self.u[:n, -nk:], k + self.delay + 1, dt)
        for drive, entry in commands.items():
            for family, m in entry.items():
                rows.append(_row(family, drive, m, dt))
        if system is None or not limits.strings:
            return rows
        tick_of = {int(kk): i for i, kk in enumerate(k)}
        pairs = [(i, tick_of[int(kk) - self.delay]) for i, kk in enumerate(k) if int(kk) - self.delay in tick_of]
        if not pairs:
            return rows
        xi, ui = (np.array(a) for a in zip(*pairs))
        X = np.vstack([self.x_hat[xi], self.x_hat[xi[-1:]]])
        try:
            Lam = system.constraint_forces_trajectory(X, self.u[ui])
        except _core.StepError:
            return rows      # the estimate's steps do not solve: no tension to report
        for name, m in tension_margins(limits, k[xi], string_tensions(limits, X, Lam, dt), dt).items():
            rows.append(_row("tension", name, m, dt))
        return rows


def _row(family: str, component: str, m: dict, dt: float) -> dict:
    scale = {"tension": 1.0}.get(family)
    limit = m["limit"]
    normalized = m["margin"] / (scale or abs(limit) or 1.0)
    return {"family": family, "component": component, "side": m["side"], "limit": limit, "unit": m["unit"],
            "margin": m["margin"], "normalized": normalized, "tick": int(round(m["time_s"] / dt)),
            "time_s": m["time_s"], "satisfied": m["satisfied"]}


def run_outcome(aborted: bool, active_faults: dict, cancel_requested: bool) -> tuple[int, str]:
    """(code, message) of a goal whose run the core or the node ended before the goal did: the core left its
    start or path tolerance (``aborted``, the fault in ``active_faults``), the client canceled (hold), or the run
    was stopped from outside (~/stop, a lifecycle transition, shutdown)."""
    if aborted:
        for kind, code in (("path_tolerance", PATH_TOLERANCE_VIOLATED), ("start_tolerance", START_TOLERANCE_VIOLATED)):
            if kind in active_faults:
                return code, f"the controller ended the run: {active_faults[kind]}"
        return ABORTED, "the controller ended the run"
    if cancel_requested:
        return CANCELED, "canceled: holding the arm where it was"
    return ABORTED, "the run was stopped from outside the goal (~/stop, a lifecycle transition or shutdown); holding"


class GoalQueue:
    """Admission of goals by ``execute.concurrency`` (module docstring): ids in first-come order, the first runs."""

    def __init__(self, policy: str, queue_size: int):
        if policy not in CONCURRENCY:
            raise ValueError(f"execute.concurrency must be one of {', '.join(CONCURRENCY)}, got {policy!r}")
        self.policy = policy
        self.capacity = 1 if policy == "reject" else 1 + validation.integer(queue_size, "execute.queue_size",
                                                                            minimum=0)
        self.ids: list = []

    def admit(self, goal_id) -> Optional[str]:
        """Admits ``goal_id`` (None) or says why not."""
        if len(self.ids) < self.capacity:
            self.ids.append(goal_id)
            return None
        if self.policy == "reject":
            return "busy: a goal is being executed (execute.concurrency 'reject'); send it when that one is done"
        return f"busy: {len(self.ids) - 1} goal(s) wait behind the one being executed (execute.queue_size)"

    def first(self, goal_id) -> bool:
        """Whether ``goal_id`` is the one to run now."""
        return bool(self.ids) and self.ids[0] == goal_id

    def release(self, goal_id) -> None:
        if goal_id in self.ids:
            self.ids.remove(goal_id)
