"""The real-time controller's tick logic, without ROS: samples in, commands and diagnostics out.

:class:`ControllerCore` consumes joint-state samples ``(message, stamp, now)`` and
watchdog calls ``(now)`` and returns what to send to the actuators. The ROS node
(``marionette_control.nodes.controller``) is a thin adapter around it, and a
deterministic bag replay feeds recorded joint states through exactly the same
object (times are integer nanoseconds of whatever clock the stamps use: ROS time,
or ``/clock`` under ``use_sim_time``).

Tracking law (thesis §6.7.2, :class:`~marionette_control.control.tracking.TrackingController`)::

    x̂(k) = [q_k; D₂L_d(q_{k−1}, q_k); (ρ_k − ρ_{k−1})/Δt]     (discrete Legendre transform, compiled core)
    u(k)  = u_d(k) − K(k) (x̂(k) − x_d(k)),  clamped to the actuator range and rate;  k ≥ N: hold x_d(N).

Sample/tick alignment
---------------------
The estimate needs configurations measured Δt apart (Δt = the trajectory's time
step). Ticks are *driven by samples* (the command leaves in the same callback as
the sample that completes it; a timer-driven tick would add up to Δt of latency
and beat against the sample phase):

* every valid sample goes into a ring buffer (the last ``buffer_size`` samples);
* while running, a valid sample with stamp s is a **tick** when it is at least
  Δt − tol after the previous tick's sample (the first valid sample after start is
  tick k = 0); its index is k = k_prev + max(1, round((s − s_prev)/Δt)), so the
  trajectory index follows the samples' clock (jitter and slow drift are absorbed,
  skipped slots are counted as missed ticks);
* its predecessor is the buffered sample whose stamp is closest to s − Δt and
  within ±tol. Without one (a dropped or invalid previous sample) the tick is not
  computed: the hold command is sent and a ``sample_gap`` warning raised; the next
  tick with a predecessor recovers. Before the first tick of a run, a sample whose
  history is shorter than Δt just waits (no fault).

tol = ``stamp_tolerance`` · Δt, but at most half the spacing of the sample to the
previous one: samples faster than 1/Δt are allowed (only those on the tick grid
become ticks, at most one per slot). Samples at exactly 1/Δt (the simulator, a
ros2_control loop) tick on every sample.

Faults (never reach the actuators as garbage)
---------------------------------------------
A sample is rejected, with a specific ``kind``, when its stamp is older than
``state_timeout`` (``stale``) or ahead of the clock by more than that
(``future_stamp``: e.g. ``use_sim_time`` set on one side only), equals the previous
accepted stamp (``duplicate_stamp``) or precedes it (``out_of_order``), or its
content is unusable — the injected ``read`` raises a ValueError with a ``kind``
(``nodes.convert.JointStateReader``: ``non_finite``, ``missing_names``,
``duplicate_names``, ``malformed`` = names/positions of different length). Joint
names are mapped by *name*, so a reordered message is valid and gives the same q.
The watchdog reports ``stale`` when no sample arrived within ``state_timeout``
(``no_data`` before the first one). An estimate or command that is not finite is
``invalid_command``.

On a fault while running, the core returns the **hold command**: force inputs 0 and
the kinematic configurations held at the last command sent (where the position-
controlled actuators are going), or at the last valid measurement when nothing has
been sent yet — clipped to the actuator range (``TrackingController.safe_command``).
It is returned on every rejected sample and every watchdog call while stale. The
fault clears (``recovered``) on the next computed tick (while idle: the next valid
sample). Trajectory time does not pause during a fault: the tick index keeps
following the samples' stamps.
"""

from __future__ import annotations

import math
import time
from typing import Callable, Optional

import numpy as np

from marionette_control import _core
from marionette_control.control.tracking import ActuatorLimits, TrackingController
from marionette_control.control.trajectory import Trajectory, TrajectoryError

# Levels of diagnostic_msgs/DiagnosticStatus (the control layer does not import ROS).
OK, WARN, ERROR, STALE = 0, 1, 2, 3

#: Fault kinds and their diagnostic level.
FAULT_LEVELS = {
    "stale": ERROR, "future_stamp": ERROR, "duplicate_stamp": ERROR, "out_of_order": ERROR,
    "non_finite": ERROR, "missing_names": ERROR, "duplicate_names": ERROR, "malformed": ERROR,
    "invalid": ERROR, "invalid_command": ERROR, "no_data": STALE, "sample_gap": WARN,
}

NS = 1_000_000_000


def actuator_limits(model, actuators: Optional[dict] = None) -> ActuatorLimits:
    """Discrete-input limits from a model file's ``actuators`` section.

    actuators : {kinematic configuration name: object with min, max, max_velocity}
        (``yaml_model.ActuatorLimits``); configurations without an entry and force
        inputs are unlimited.
    """
    lim = ActuatorLimits.unlimited(model.nU, model.nk)
    names = list(model.config_names)
    for name, a in (actuators or {}).items():
        i = names.index(name) - model.nd
        if not 0 <= i < model.nk:
            raise ValueError(f"actuator limits given for '{name}', which is not a kinematic configuration")
        lim.lower[model.nu + i], lim.upper[model.nu + i], lim.rate[i] = a.min, a.max, a.max_velocity
    return lim


class TickResult:
    """What one call of the core produced.

    kind : "tick" (tracking command computed), "hold" (hold command after a fault or gap),
           "none" (nothing to send: idle, not a tick slot, or no command possible yet).
    command : ndarray (nU,) [force inputs; ρ_next] in model order, or None.
    k : tick index of a "tick" (k ≥ N: holding the final state), else -1.
    x_hat, x_ref : ndarray (nx,) estimate and reference of a "tick", else None.
    fault, fault_message : the active fault kind and text (None when healthy).
    new_fault : this call raised a fault kind that was not active before (log it).
    recovered : this call cleared a fault (log it).
    missed : tick slots skipped just before this tick.
    compute_ns : time spent in the call (perf_counter_ns).
    """

    __slots__ = ("kind", "command", "k", "stamp_ns", "x_hat", "x_ref", "fault", "fault_message", "new_fault",
                 "recovered", "missed", "compute_ns")

    def __init__(self, kind="none", command=None, stamp_ns=0):
        self.kind = kind
        self.command = command
        self.k = -1
        self.stamp_ns = stamp_ns
        self.x_hat = None
        self.x_ref = None
        self.fault = None
        self.fault_message = ""
        self.new_fault = False
        self.recovered = False
        self.missed = 0
        self.compute_ns = 0


class ControllerCore:
    """Tracking controller tick logic over joint-state samples (ROS-free; see the module docstring).

    Parameters
    ----------
    model : _core.Model
    read : callable(msg) -> ndarray (nq,)
        Maps a joint-state message (anything with ``name`` and ``position``) to the
        model's configurations by name, a new array per call (the core keeps it in its
        ring buffer); raises ValueError with a ``kind`` attribute for unusable messages
        (``nodes.convert.JointStateReader(...).read``).
    limits : ActuatorLimits, optional
        Limits of the discrete inputs (see :func:`actuator_limits`).
    state_timeout : float
        Seconds after which a joint state is stale (> 0).
    stamp_tolerance : float
        Tolerance of sample spacing as a fraction of Δt, in [0, 0.5).
    buffer_size : int
        Samples kept for finding a tick's predecessor (≥ 2; enough for Δt at the sample rate).
    stats_window : int
        Ticks over which compute-time statistics are reported.
    """

    def __init__(self, model, read: Callable, limits: Optional[ActuatorLimits] = None, state_timeout: float = 0.05,
                 stamp_tolerance: float = 0.1, buffer_size: int = 64, stats_window: int = 2048):
        if buffer_size < 2:
            raise ValueError(f"buffer_size must be >= 2, got {buffer_size}")
        self.model = model
        self.nd, self.nk, self.nu, self.nq = model.nd, model.nk, model.nu, model.nq
        self._read = read
        self.limits = limits or ActuatorLimits.unlimited(model.nU, model.nk)
        if self.limits.lower.shape != (model.nU,) or self.limits.rate.shape != (model.nk,):
            raise ValueError(f"actuator limits sized {self.limits.lower.shape}/{self.limits.rate.shape}, expected "
                             f"({model.nU},)/({model.nk},)")
        self.timeout_ns = 0
        self.stamp_tolerance = 0.0
        # ring buffer of accepted samples: stamps (Python ints, read one by one on the tick path) and the
        # configuration arrays the reader returned (fresh per sample, never written: kept, not copied)
        self._stamps = [0] * buffer_size
        self._Q: list[np.ndarray] = [np.zeros(model.nq)] * buffer_size
        self._n = 0  # samples stored (saturates at buffer_size)
        self._head = -1  # index of the newest
        self._last_stamp: Optional[int] = None
        # trajectory
        self.controller: Optional[TrackingController] = None
        self.trajectory_source = ""
        self._pending: Optional[tuple[TrackingController, str]] = None
        self.trajectory_error = ""
        self._dt_ns = 0
        self._tol_ns = 0
        # run state
        self.running = False
        self._k: Optional[int] = None
        self._tick_stamp: Optional[int] = None
        self._last_command: Optional[np.ndarray] = None
        self.last_x_hat: Optional[np.ndarray] = None
        self.last_x_ref: Optional[np.ndarray] = None
        # fault state
        self.fault: Optional[str] = None
        self.fault_message = ""
        self.fault_counts: dict[str, int] = {}
        # counters and statistics
        self.samples = 0
        self.rejected = 0
        self.ticks = 0
        self.holds = 0
        self.missed_ticks = 0
        self._compute = np.zeros(stats_window, dtype=np.int64)
        self._ncompute = 0
        self.set_timing(state_timeout, stamp_tolerance)

    def set_timing(self, state_timeout: Optional[float] = None, stamp_tolerance: Optional[float] = None) -> None:
        """Changes the stale-data timeout (s) and/or the sample-spacing tolerance (fraction of dt)."""
        if state_timeout is not None:
            if not (math.isfinite(state_timeout) and state_timeout > 0):
                raise ValueError(f"state_timeout must be a finite number of seconds > 0, got {state_timeout}")
            self.timeout_ns = int(round(state_timeout * NS))
        if stamp_tolerance is not None:
            if not 0.0 <= stamp_tolerance < 0.5:
                raise ValueError(f"stamp_tolerance must be in [0, 0.5) (a fraction of the time step), "
                                 f"got {stamp_tolerance}")
            self.stamp_tolerance = float(stamp_tolerance)
            if self.controller is not None:
                self._tol_ns = int(round(self.stamp_tolerance * self.controller.system.dt * NS))

    # ----------------------------------------------------------------------------------------- trajectory

    def load_trajectory(self, trajectory: Trajectory, source: str = "") -> str:
        """Checks and installs a trajectory (pending until the next start while running); returns a message.

        Raises TrajectoryError/ValueError (with ``source`` in the message) for a trajectory of
        another model, without gains, or otherwise unusable; the current one stays.
        """
        try:
            controller = self.check_trajectory(trajectory)
        except (TrajectoryError, ValueError) as e:
            self.trajectory_error = f"{source}: {e}" if source else str(e)
            raise type(e)(self.trajectory_error) from None
        self.trajectory_error = ""
        what = f"trajectory {source} ({trajectory.N} steps, dt {trajectory.dt:g} s, model '{trajectory.model_name}')"
        if self.running:
            self._pending = (controller, source)
            return f"{what} is pending: it replaces the running one at the next start"
        self._install(controller, source)
        return f"loaded {what}"

    def check_trajectory(self, trajectory: Trajectory) -> TrackingController:
        """The TrackingController of ``trajectory``; raises TrajectoryError/ValueError when it is unusable here."""
        trajectory.check_model(self.model)
        system = _core.DiscreteSystem(self.model, trajectory.dt)
        return TrackingController(system, trajectory, self.limits)

    def _install(self, controller: TrackingController, source: str) -> None:
        self.controller = controller
        self.trajectory_source = source
        dt = controller.system.dt
        self._dt_ns = int(round(dt * NS))
        self._tol_ns = int(round(self.stamp_tolerance * dt * NS))

    @property
    def dt(self) -> Optional[float]:
        return None if self.controller is None else self.controller.system.dt

    # ----------------------------------------------------------------------------------------- start / stop

    def start(self) -> tuple[bool, str]:
        """Starts tracking from k = 0 at the next tick; (success, message)."""
        if self.running:
            return False, "already running; stop first"
        if self._pending is not None:
            self._install(*self._pending)
            self._pending = None
        if self.controller is None:
            why = f" (last refused: {self.trajectory_error})" if self.trajectory_error else ""
            return False, "no trajectory loaded: set trajectory_file or publish one on the trajectory topic" + why
        self.running = True
        self._k = None
        self._tick_stamp = None
        self._last_command = None
        msg = f"started tracking {self.trajectory_source} ({self.controller.N} steps, dt {self.dt:g} s)"
        if self.fault is not None:
            msg += f"; holding until the joint-state fault clears ({self.fault}: {self.fault_message})"
        return True, msg

    def stop(self) -> tuple[bool, str, Optional[np.ndarray]]:
        """Stops tracking; (success, message, hold command to send once or None)."""
        if not self.running:
            return True, "was not running", None
        self.running = False
        hold = self._hold_command()
        k = self._k
        self._k = None
        self._tick_stamp = None
        return True, f"stopped at tick {k if k is not None else 'none (no tick yet)'}; holding", hold

    @property
    def finished(self) -> bool:
        return self.running and self._k is not None and self._k >= self.controller.N

    @property
    def k(self) -> Optional[int]:
        """Index of the last computed tick in the current run (None before the first)."""
        return self._k

    # ----------------------------------------------------------------------------------------- samples

    def on_joint_state(self, msg, stamp_ns: int, now_ns: int) -> TickResult:
        """Processes one joint-state sample stamped ``stamp_ns`` received at ``now_ns`` (same clock)."""
        t0 = time.perf_counter_ns()
        self.samples += 1
        res = self._sample(msg, stamp_ns, now_ns)
        res.compute_ns = dt = time.perf_counter_ns() - t0
        if res.kind == "tick":
            self._compute[self._ncompute % self._compute.size] = dt
            self._ncompute += 1
        return res

    def on_undecodable(self, message: str) -> TickResult:
        """A sample whose bytes could not be decoded at all (no stamp, no content): rejected as ``malformed``."""
        self.samples += 1
        return self._reject("malformed", message, 0)

    def _sample(self, msg, stamp_ns: int, now_ns: int) -> TickResult:
        age = now_ns - stamp_ns
        if age > self.timeout_ns:
            return self._reject("stale", f"joint state is {age / NS:.3f} s old (state_timeout "
                                         f"{self.timeout_ns / NS:g} s)", stamp_ns)
        if -age > self.timeout_ns:
            return self._reject("future_stamp", f"joint state is stamped {-age / NS:.3f} s ahead of this clock "
                                                f"(now {now_ns / NS:.3f} s): are both sides on the same clock "
                                                "(use_sim_time)?", stamp_ns)
        last = self._last_stamp
        if last is not None and stamp_ns <= last:
            if stamp_ns == last:
                return self._reject("duplicate_stamp", f"joint state stamp {stamp_ns / NS:.6f} s repeats the "
                                                       "previous one", stamp_ns)
            return self._reject("out_of_order", f"joint state stamp {stamp_ns / NS:.6f} s precedes the previous "
                                                f"one ({last / NS:.6f} s) by {(last - stamp_ns) / NS:.6f} s", stamp_ns)
        try:
            q = self._read(msg)
        except ValueError as e:
            return self._reject(getattr(e, "kind", "invalid"), str(e), stamp_ns)
        size = len(self._stamps)
        h = (self._head + 1) % size
        self._stamps[h] = stamp_ns
        self._Q[h] = q
        self._head = h
        self._n = min(self._n + 1, size)
        self._last_stamp = stamp_ns
        res = TickResult("none", None, stamp_ns)
        if not self.running:
            if self.fault is not None:
                self._clear(res)
            return res
        # --- is this sample a tick? (module docstring: sample/tick alignment)
        dt_ns, tol = self._dt_ns, self._tol_ns
        if last is not None and 2 * tol > stamp_ns - last:
            tol = (stamp_ns - last) // 2  # oversampled: at most one sample per slot qualifies
        if self._tick_stamp is None:
            k = 0
        else:
            since = stamp_ns - self._tick_stamp
            if since < dt_ns - tol:
                return res  # oversampled: between ticks
            k = self._k + max(1, (since + dt_ns // 2) // dt_ns)
        p = self._predecessor(stamp_ns - dt_ns, tol)
        if p < 0:
            oldest = self._stamps[(h - self._n + 1) % size]
            if oldest > stamp_ns - dt_ns + tol:  # history shorter than dt: not a gap
                if self._n < size:
                    return res  # just started receiving: wait for a sample with a predecessor
                return self._hold(res, "sample_gap", f"the {size} buffered joint states span less than dt: "
                                                     "samples arrive too fast for buffer_size")
            return self._hold(res, "sample_gap", f"no joint state within {tol / NS:.4f} s of "
                                                 f"{(stamp_ns - dt_ns) / NS:.6f} s (one time step before the sample "
                                                 f"at {stamp_ns / NS:.6f} s): the estimate needs two samples dt apart")
        ctrl = self.controller
        u, x_hat = ctrl.command(k, self._Q[p], q)
        if not (all(map(math.isfinite, u.tolist())) and all(map(math.isfinite, x_hat.tolist()))):
            return self._hold(res, "invalid_command", f"non-finite estimate or command at tick {k}")
        res.missed = 0 if self._k is None else k - self._k - 1
        self.missed_ticks += res.missed
        self._k = k
        self._tick_stamp = stamp_ns
        self._last_command = u
        self.ticks += 1
        tr = ctrl.trajectory
        x_ref = tr.X[k] if k < tr.N else tr.X[-1]
        self.last_x_hat, self.last_x_ref = x_hat, x_ref
        res.kind, res.command, res.k, res.x_hat, res.x_ref = "tick", u, k, x_hat, x_ref
        if self.fault is not None:
            self._clear(res)
        return res

    def _predecessor(self, target: int, tol: int) -> int:
        """Ring index of the buffered sample closest to ``target`` within ±tol (strictly before the newest), or -1."""
        stamps = self._stamps
        size = len(stamps)
        best, best_err = -1, tol + 1
        i = self._head
        for _ in range(self._n - 1):
            i = (i - 1) % size
            s = stamps[i]
            err = abs(s - target)
            if err < best_err:
                best, best_err = i, err
            if s < target - tol:
                break  # older samples only get further away
        return best

    # ----------------------------------------------------------------------------------------- watchdog

    def _hold_if_running(self, res: TickResult) -> None:
        """While tracking, make ``res`` the hold command (faults never send a computed command)."""
        if self.running:
            res.command = self._hold_command()
            if res.command is not None:
                res.kind = "hold"
                self.holds += 1

    def on_watchdog(self, now_ns: int) -> TickResult:
        """Periodic check (at about the tick rate): stale data → fault and, while running, the hold command."""
        res = TickResult("none", None, 0)
        if self._last_stamp is None:
            if self.fault != "no_data":
                self._set_fault(res, "no_data", "no valid joint state received yet")
            else:
                res.fault, res.fault_message = self.fault, self.fault_message
            self._hold_if_running(res)
            return res
        age = now_ns - self._last_stamp
        if age > self.timeout_ns:
            if self.fault != "stale":
                self._set_fault(res, "stale", f"no valid joint state for {age / NS:.3f} s (state_timeout "
                                              f"{self.timeout_ns / NS:g} s)")
            else:
                res.fault, res.fault_message = self.fault, self.fault_message
            self._hold_if_running(res)
        elif self.fault is not None:
            res.fault, res.fault_message = self.fault, self.fault_message
        return res

    # ----------------------------------------------------------------------------------------- faults

    def _hold_command(self) -> Optional[np.ndarray]:
        if self.controller is None:
            return None
        if self._last_command is not None:
            return self.controller.safe_command(self._last_command[self.nu:])
        if self._n:
            return self.controller.safe_command(self._Q[self._head][self.nd:])
        return None

    def _set_fault(self, res: TickResult, kind: str, message: str) -> None:
        res.new_fault = kind != self.fault
        self.fault, self.fault_message = kind, message
        self.fault_counts[kind] = self.fault_counts.get(kind, 0) + 1
        res.fault, res.fault_message = kind, message

    def _reject(self, kind: str, message: str, stamp_ns: int) -> TickResult:
        self.rejected += 1
        return self._hold(TickResult("none", None, stamp_ns), kind, message)

    def _hold(self, res: TickResult, kind: str, message: str) -> TickResult:
        self._set_fault(res, kind, message)
        self._hold_if_running(res)
        return res

    def _clear(self, res: TickResult) -> None:
        res.recovered = True
        res.fault_message = f"recovered from {self.fault}: {self.fault_message}"
        self.fault, self.fault_message = None, ""

    # ----------------------------------------------------------------------------------------- diagnostics

    def compute_stats(self) -> dict:
        """Tick compute times (s) over the last ``stats_window`` ticks: median, p99, max (NaN before any)."""
        n = min(self._ncompute, self._compute.size)
        if n == 0:
            return {"median": math.nan, "p99": math.nan, "max": math.nan, "count": 0}
        # one sort and numpy's default (linear) interpolation by hand: this runs with every /diagnostics message,
        # in the executor that also runs the ticks, and np.median + np.percentile took twice as long (cold)
        c = np.sort(self._compute[:n]).tolist()

        def quantile(q: float) -> float:
            x = q * (n - 1)
            i = int(x)
            j = min(i + 1, n - 1)
            return (c[i] + (c[j] - c[i]) * (x - i)) / NS

        return {"median": quantile(0.5), "p99": quantile(0.99), "max": c[-1] / NS, "count": n}

    def state_name(self) -> str:
        if self.controller is None:
            return "no_trajectory"
        if not self.running:
            return "idle"
        return "finished" if self.finished else "running"

    def status(self) -> tuple[int, str, list[tuple[str, str]]]:
        """(level, message, [(key, value)]) for a diagnostic_msgs/DiagnosticStatus."""
        state = self.state_name()
        if self.fault is not None:
            level = FAULT_LEVELS.get(self.fault, ERROR)
            message = f"{self.fault}: {self.fault_message}"
            if self.running:
                message += " (holding)"
        elif self.controller is None:
            level = WARN
            message = "no trajectory" + (f" (refused: {self.trajectory_error})" if self.trajectory_error else "")
        else:
            level = OK
            message = {"idle": "idle", "running": "tracking",
                       "finished": "trajectory finished; holding the final state"}[state]
            if self.trajectory_error:
                message += f" (last trajectory refused: {self.trajectory_error})"
        stats = self.compute_stats()
        values = [
            ("state", state),
            ("fault", self.fault or ""),
            ("fault_message", self.fault_message),
            ("trajectory", self.trajectory_source),
            ("trajectory_pending", self._pending[1] if self._pending else ""),
            ("trajectory_error", self.trajectory_error),
            ("dt", "" if self.dt is None else f"{self.dt:g}"),
            ("steps", "" if self.controller is None else str(self.controller.N)),
            ("tick", "" if self._k is None else str(self._k)),
            ("samples_received", str(self.samples)),
            ("samples_rejected", str(self.rejected)),
            ("ticks", str(self.ticks)),
            ("hold_commands", str(self.holds)),
            ("missed_ticks", str(self.missed_ticks)),
            ("compute_time_median_us", f"{stats['median'] * 1e6:.1f}"),
            ("compute_time_p99_us", f"{stats['p99'] * 1e6:.1f}"),
            ("compute_time_max_us", f"{stats['max'] * 1e6:.1f}"),
        ]
        values += [(f"faults.{k}", str(v)) for k, v in sorted(self.fault_counts.items())]
        if self.last_x_hat is not None:
            err = self.last_x_hat - self.last_x_ref
            eq = err[:self.nq]
            values.append(("tracking_error_norm", f"{math.sqrt(float(err @ err)):.6g}"))
            values.append(("tracking_error_q_norm", f"{math.sqrt(float(eq @ eq)):.6g}"))
            names = self.model.state_names
            values += [(f"error.{n}", f"{e:.6g}") for n, e in zip(names, err)]
            values += [(f"estimate.{n}", f"{e:.6g}") for n, e in zip(names, self.last_x_hat)]
        return level, message, values
