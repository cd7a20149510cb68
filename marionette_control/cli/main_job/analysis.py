"""What the main job computes from a run, without ROS: errors of the true angles, executed margins, recovery.

A run (:class:`RunData`) is what one controller did on the simulated arm between its start and stop:
its ticks (``~/tracking``: tick k, stamp, estimate x̂_k, the command as sent) and the simulator's true
configurations (``~/true_joint_states``, one per integrator step, stamped like ``/joint_states``). The
tick of stamp s and the true state of stamp s are the same instant, so every error here is the plant's
*true* angle against the optimized trajectory at that tick, x_true(k) − x_d(k) — never the controller's
estimate.

Executed constraint margins (the optimizer reports its own on the plan; these are what happened) are
:mod:`marionette_control.sim.margins`' (the same function serves the offline loop): the commands sent, the plant's
true drive positions, and the *plant's* string tension (the simulator's model file, not the nominal one),
T = 2 L λ/Δt of each of its steps, published as the effort of the string's length joint on
``~/true_joint_states`` (docs/simulator.md), against the string's minimum.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from marionette_control.sim import margins

NS = 1_000_000_000


@dataclass
class RunData:
    """One run of a controller on the simulated arm (arrays over its n ticks, or its m simulator steps).

    name : "closed_loop", "open_loop", "push_lqr", ...;  controller : the node's name;  feedback : its gains on
    k (n,) : tick index;  stamp_ns (n,) : the joint state's stamp of each tick;  x_hat (n, nx) : the estimate
    u (n, nU) : the command as sent (model input order);  compute_us (n,) : the tick's compute time
    fault_ticks : ticks published with an active fault
    truth_stamp_ns (m,), truth_q (m, nq), truth_effort (m, nq) : the plant's true configurations and joint efforts
    (a string length's: the string's tension), every simulator step of the run
    latency_ms : /joint_states → command arrival differences in the observer
    push : what ``~/disturb`` scheduled (None: no push);  aborted : a tolerance ended tracking early
    faults : {fault kind: times the controller raised it during the run};  message : why it aborted
    plans : {switched, rejected[, rejected_by_reason]}: the receding-horizon plans the controller took and refused
    in the run;  planner : the planner's /diagnostics values after a re-planned run
    lockstep : {waits, timeouts} of the simulator's lock-step during the run (a time-out: it stepped without the
    command answering its last joint state, which then acts a step late; None: unknown)
    """

    name: str
    controller: str
    feedback: bool
    k: np.ndarray
    stamp_ns: np.ndarray
    x_hat: np.ndarray
    u: np.ndarray
    compute_us: np.ndarray
    fault_ticks: int
    truth_stamp_ns: np.ndarray
    truth_q: np.ndarray
    truth_effort: np.ndarray
    latency_ms: np.ndarray
    push: Optional[dict] = None
    aborted: bool = False
    faults: dict = field(default_factory=dict)
    message: str = ""
    lockstep: dict = field(default_factory=dict)
    plans: dict = field(default_factory=dict)
    planner: dict = field(default_factory=dict)

    def true_at_ticks(self) -> tuple[np.ndarray, np.ndarray]:
        """(k (n',), q_true (n', nq)) for the ticks whose stamp has a true state (the same instant)."""
        index = {int(s): i for i, s in enumerate(self.truth_stamp_ns)}
        pairs = [(i, index[int(s)]) for i, s in enumerate(self.stamp_ns) if int(s) in index]
        if not pairs:
            return np.zeros(0, dtype=int), np.zeros((0, self.truth_q.shape[1]))
        ticks, truth = (np.array(a) for a in zip(*pairs))
        return self.k[ticks], self.truth_q[truth]


def angle_errors(X_ref: np.ndarray, k: np.ndarray, q: np.ndarray, nd: int) -> tuple[np.ndarray, np.ndarray]:
    """(k (n',), e (n', nd)): true dynamic configurations minus X_ref's (rad) at the ticks 0 <= k <= N
    (X_ref (N+1, ≥nd): the optimized trajectory's states, or the animator's)."""
    sel = (k >= 0) & (k < len(X_ref))
    return k[sel], q[sel, :nd] - X_ref[k[sel], :nd]


def error_summary(errors: np.ndarray, names) -> dict:
    """{joint: {rms_deg, max_deg}} of errors (n, nd) [rad]."""
    e = np.degrees(errors)
    return {n: {"rms_deg": float(np.sqrt(np.mean(e[:, i] ** 2))), "max_deg": float(np.max(np.abs(e[:, i])))}
            for i, n in enumerate(names)}


def tension_series(limits, effort: np.ndarray, step: np.ndarray, dt: float) -> dict:
    """{string: (t (m,), T (m,))}: the plant's tension over each step from the true states' efforts (m, nq) (the
    effort of a string's length joint at step k is its tension over step k−1 → k, timed at its start)."""
    return {name: ((step - 1) * dt, effort[:, j]) for name, j in zip(limits.strings, limits.string_length)}


def start_tension(ev: "Evaluated") -> Optional[float]:
    """The plant's lowest string tension [N] over the first 0.1 s of the run's motion (tick time,
    :func:`marionette_control.sim.margins.start_tension`), the strings' lowest; None without a string."""
    lows = [v for v in (margins.start_tension(t, T) for t, T in ev.tension.values()) if v is not None]
    return min(lows) if lows else None


def stats(values: np.ndarray, unit: str) -> dict:
    """{count, median, p99, max, unit} of a sample (only count and unit when empty)."""
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return {"count": 0, "unit": unit}
    return {"count": int(values.size), "median": float(np.median(values)), "p99": float(np.percentile(values, 99)),
            "max": float(values.max()), "unit": unit}


def latencies(joint_state_times: np.ndarray, command_times: np.ndarray, window: float = 0.05) -> np.ndarray:
    """Arrival-time differences (ms) between each command and the joint state that arrived just before it
    (within ``window`` s; both in one clock, seconds)."""
    i = np.searchsorted(joint_state_times, command_times) - 1
    ok = i >= 0
    d = command_times[ok] - joint_state_times[i[ok]]
    return 1e3 * d[d < window]


@dataclass
class Evaluated:
    """A run against the optimized trajectory: run (RunData); dt [s]; k (n',) ticks 0 … N with a true state;
    q (n', nq) the true configurations there; errors (n', nd) true angles minus the optimized ones [rad];
    step (m,) the index of every true state in tick time (tick k's stamp is step k's); tension
    {string: (t, T)} of the plant."""

    run: RunData
    dt: float
    k: np.ndarray
    q: np.ndarray
    errors: np.ndarray
    step: np.ndarray
    tension: dict

    @property
    def t(self) -> np.ndarray:
        """Times of the ticks k [s] (k·Δt)."""
        return self.k * self.dt


def evaluate(run: RunData, X_opt: np.ndarray, dt: float, nd: int, limits) -> Evaluated:
    """:class:`Evaluated` of a run: true angles against the optimized states X_opt (N+1, nx) at every tick
    0 … N, the true states' step indices and the plant's string tension (limits : ModelLimits)."""
    k, q = run.true_at_ticks()
    sel = (k >= 0) & (k < len(X_opt))
    k, q = k[sel], q[sel]
    if k.size == 0:
        raise ValueError(f"run {run.name}: no tick of the trajectory has a true state of the simulator")
    errors = q[:, :nd] - X_opt[k, :nd]
    dt_ns = int(round(dt * NS))
    origin = int(run.stamp_ns[0]) - int(run.k[0]) * dt_ns   # the stamp tick 0 had (or would have had)
    step = np.round((run.truth_stamp_ns - origin) / dt_ns).astype(int)
    tension = tension_series(limits, run.truth_effort, step, dt)
    return Evaluated(run, dt, k, q, errors, step, tension)


#: issue 12's targets for the realistic stand-in: closed-loop RMS and max per joint, and the ratio of open- to
#: closed-loop RMS on the joint where open loop errs most
TARGET_RMS_DEG = 0.5
TARGET_MAX_DEG = 2.0
TARGET_RATIO = 3.0


def issue_targets(closed: dict, opened: dict) -> dict:
    """The targets against a closed- and an open-loop summary ({joint: {rms_deg, max_deg}}): the bounds, the
    measured ratio on the joint where open loop errs most, and which are met (``feedback_not_worse``: on every
    joint the closed-loop RMS is at most the open-loop one)."""
    worst = max(opened, key=lambda n: opened[n]["rms_deg"])
    ratio = opened[worst]["rms_deg"] / closed[worst]["rms_deg"] if closed[worst]["rms_deg"] > 0 else None
    return {"closed_loop_rms_deg_at_most": TARGET_RMS_DEG, "closed_loop_max_deg_at_most": TARGET_MAX_DEG,
            "open_to_closed_rms_ratio_at_least": TARGET_RATIO, "worst_open_loop_joint": worst,
            "open_to_closed_rms_ratio": ratio,
            "met": {"rms": all(v["rms_deg"] <= TARGET_RMS_DEG for v in closed.values()),
                    "max": all(v["max_deg"] <= TARGET_MAX_DEG for v in closed.values()),
                    "ratio": ratio is not None and ratio >= TARGET_RATIO,
                    "feedback_not_worse": all(closed[n]["rms_deg"] <= opened[n]["rms_deg"] for n in closed)}}


def executed_margins(ev: Evaluated, limits, delay: int, N: int) -> dict:
    """The executed margins of a run (:func:`marionette_control.sim.margins.executed_margins`: the commands it sent,
    the plant's true drive motion and string tension) during the motion (ticks and steps up to N) and after its
    end (the final state held). delay : the command delay (the command of tick k ends step k + delay at its
    value); a lost sample breaks the speeds and accelerations across it."""
    r, nk = ev.run, len(limits.kinematic)
    return margins.executed_margins(limits, ev.dt, N, delay, r.k, r.u[:, -nk:], ev.step, r.truth_q[:, -nk:],
                                    ev.step - 1, r.truth_effort[:, list(limits.string_length)])
