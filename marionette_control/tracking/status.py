"""The controller's status for diagnostics, and the statistics of its tick compute times.

:func:`status` is the ``(level, message, [(key, value)])`` of a diagnostic_msgs/DiagnosticStatus (the node publishes
it on /diagnostics; a bag replay and the offline loop return it): the state, every active fault (``faults.active``,
``fault.<kind>`` with its message; the level is the highest of theirs, :mod:`.faults`) and the count of every kind
raised since start-up (``faults.<kind>``), the trajectories and plans (:mod:`.staging`), the tick, the goal, the
counters (``tension_guard.ticks``: the run's commands the tension guard moved, :mod:`.tension_guard`), the
compute times (:class:`ComputeTimes`) and the last tracking error and estimate by state name.
"""

from __future__ import annotations

import math

import numpy as np

from marionette_control.tracking.faults import OK, WARN
from marionette_control.tracking.joint_states import NS


class ComputeTimes:
    """The compute times (ns) of the last ``window`` ticks."""

    def __init__(self, window: int):
        self._ns = np.zeros(window, dtype=np.int64)
        self._count = 0

    def add(self, ns: int) -> None:
        self._ns[self._count % self._ns.size] = ns
        self._count += 1

    def stats(self) -> dict:
        """Median, p99 and max (s) over the window, and the count of ticks in it (NaN before any)."""
        n = min(self._count, self._ns.size)
        if n == 0:
            return {"median": math.nan, "p99": math.nan, "max": math.nan, "count": 0}
        # one sort and numpy's default (linear) interpolation by hand: this runs with every /diagnostics message,
        # in the executor that also runs the ticks, and np.median + np.percentile took twice as long (cold)
        c = np.sort(self._ns[:n]).tolist()

        def quantile(q: float) -> float:
            x = q * (n - 1)
            i = int(x)
            j = min(i + 1, n - 1)
            return (c[i] + (c[j] - c[i]) * (x - i)) / NS

        return {"median": quantile(0.5), "p99": quantile(0.99), "max": c[-1] / NS, "count": n}


def status(core) -> tuple[int, str, list[tuple[str, str]]]:
    """(level, message, [(key, value)]) of a :class:`~.controller.ControllerCore` (module docstring)."""
    state = core.state_name()
    faults, staging, tr = core.faults, core.staging, core.staging.tracking
    if faults.active:
        level = faults.level()
        message = faults.describe() + (" (holding)" if core.running else "")
    elif tr is None:
        level = WARN
        message = "no trajectory" + (f" (refused: {staging.error})" if staging.error else "")
    else:
        level = OK
        message = {"idle": "idle", "running": "tracking", "aborted": "tracking aborted",
                   "finished": "trajectory finished; holding the final state"}[state]
        if staging.error:
            message += f" (last trajectory refused: {staging.error})"
    stats = core.compute_stats()
    k = core.k
    values = [
        ("state", state),
        ("fault", faults.latest or ""),
        ("fault_message", faults.message),
        ("faults.active", ", ".join(faults.active)),
        ("trajectory", staging.source),
        ("trajectory_staged", staging.staged.source if staging.staged else
         (staging.switch.describe() if staging.switch and staging.switch.plan is None else "")),
        ("trajectory_event", staging.last_event),
        ("trajectory_error", staging.error),
        ("trajectory_warning", tr.warning or "" if tr is not None else ""),
        ("dt", "" if tr is None else f"{tr.system.dt:g}"),
        ("steps", "" if tr is None else str(tr.N)),
        ("tick", "" if k is None else str(k)),
        ("goal", "" if k is None or tr is None or k < tr.N else
         ("reached" if core.goal_reached else "missed" if "goal_tolerance" in faults.active else "settling")),
        ("command_delay_steps", str(core.delay)),
        ("estimator", core.options.estimator),
        ("feedback", "on" if core.options.feedback else "off (feed-forward only)"),
        ("samples_received", str(core.samples)),
        ("samples_rejected", str(core.rejected)),
        ("ticks", str(core.ticks)),
        ("hold_commands", str(core.holds)),
        ("tension_guard", "off" if tr is None or tr.guard is None else
         f"reserve {tr.guard.reserve:g} N above " + ", ".join(f"{m:g}" for m in tr.guard.minimum) + " N"),
        ("tension_guard.ticks", str(core.run_guarded_ticks)),
        ("tension_guard.ticks_total", str(core.guarded_ticks)),
        ("start_blend_s", f"{core.options.start_blend:g}"),
        ("start_skipped", str(core.start_skipped)),
        ("missed_ticks", str(core.missed_ticks)),
        ("compute_time_median_us", f"{stats['median'] * 1e6:.1f}"),
        ("compute_time_p99_us", f"{stats['p99'] * 1e6:.1f}"),
        ("compute_time_max_us", f"{stats['max'] * 1e6:.1f}"),
    ]
    values += [(f"fault.{kind}", m) for kind, m in faults.active.items()]
    values += [(f"faults.{kind}", str(v)) for kind, v in sorted(faults.counts.items())]
    values += [(f"trajectories.{kind}", str(v)) for kind, v in staging.counts.items()]
    active = tr.law.active if tr is not None else None
    values += [("run", str(staging.run)),
               ("plan", "" if active is None else active.describe()),
               ("plan_pending", "" if staging.pending_plan is None else staging.switch.describe()),
               ("plan_last_rejection", staging.plan_rejection)]
    values += [(f"plans.{kind}", str(v)) for kind, v in staging.plan_counts.items()]
    values.append(("plans.rejected", str(sum(staging.plan_rejections.values()))))
    values += [(f"plans.rejected.{kind}", str(v)) for kind, v in staging.plan_rejections.items()]
    if core.last_x_hat is not None:
        err = core.last_x_hat - core.last_x_ref
        eq = err[:core.nq]
        values.append(("tracking_error_norm", f"{math.sqrt(float(err @ err)):.6g}"))
        values.append(("tracking_error_q_norm", f"{math.sqrt(float(eq @ eq)):.6g}"))
        names = core.model.state_names
        values += [(f"error.{n}", f"{e:.6g}") for n, e in zip(names, err)]
        values += [(f"estimate.{n}", f"{e:.6g}") for n, e in zip(names, core.last_x_hat)]
    return level, message, values
