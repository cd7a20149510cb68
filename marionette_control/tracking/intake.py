"""Joint-state samples in: stamps checked, content read and checked, buffered, aligned to the ticks.

A sample is ``(message, stamp, now)``, times in integer nanoseconds of one clock. :class:`SampleIntake`
finds what is wrong with it, as a fault ``(kind, message)`` (:mod:`.faults`): its stamp
(:meth:`~SampleIntake.stamp_fault`: stale, future, duplicate, out of order), its content (the injected
``read``: names, finiteness; :class:`~.joint_states.JointStateReader`) and its plausibility
(:mod:`.sample_checks`: limits, jumps, closed chain); the watchdog's ``stale`` and ``no_data``
(:meth:`~SampleIntake.staleness`). It keeps the accepted samples and says which of them is a tick.

Sample/tick alignment
---------------------
Ticks are *driven by samples* (the command leaves in the same callback as the sample that
completes it; a timer-driven tick would add up to Δt of latency and beat against the sample
phase):

* every valid sample goes into a ring buffer (the last ``buffer_size`` samples);
* while running, a valid sample with stamp s is a **tick** when it is at least
  Δt − tol after the previous tick's sample (the first valid sample after start is
  tick k = 0); its index is k = k_prev + max(1, round((s − s_prev)/Δt)), so the
  trajectory index follows the samples' clock (jitter and slow drift are absorbed,
  skipped slots are counted as missed ticks);
* the estimate's predecessor is the buffered sample whose stamp is closest to s − Δt and
  within ±tol. The Legendre estimator needs it at every tick; the Kalman filter only to
  initialise (first tick of a run, or after a gap longer than it bridges). Without one the
  tick is not computed: the hold command is sent and a ``sample_gap`` warning raised; the
  next tick with a predecessor recovers. Before the first tick of a run, a sample whose
  history is shorter than Δt just waits (no fault).

tol = ``stamp_tolerance`` · Δt, but at most half the spacing of the sample to the
previous one: samples faster than 1/Δt are allowed (only those on the tick grid
become ticks, at most one per slot). Samples at exactly 1/Δt (the simulator, a
ros2_control loop) tick on every sample.

The buffer (``_core.SampleRing``) and the alignment (``_core.TickAlignment``) are these rules' only
implementation, shared by this class and the tick path (:meth:`~.controller.ControllerCore.on_serialized`).
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from marionette_control import _core, validation
from marionette_control.tracking.joint_states import NS
from marionette_control.tracking.sample_checks import SampleChecks

#: A sample's fault: (kind, message).
Fault = tuple[str, str]


class SampleIntake:
    """The samples of one controller (module docstring).

    Parameters
    ----------
    nq : configurations per sample
    read : callable(msg) -> ndarray (nq,), a new array per call; raises ValueError with a ``kind`` attribute for an
        unusable message (:meth:`.JointStateReader.read`)
    checks : SampleChecks, or None: no plausibility checks
    buffer_size : samples kept to find a tick's predecessor (>= 2)

    Attributes
    ----------
    ring : ``_core.SampleRing``, the accepted samples
    align : ``_core.TickAlignment`` for the tracked trajectory's Δt (None before one: :meth:`retime`)
    timeout_ns, stamp_tolerance : :meth:`set_timing`
    """

    def __init__(self, nq: int, read: Callable, checks: Optional[SampleChecks], buffer_size: int):
        self.read = read
        self.checks = checks
        self.ring = _core.SampleRing(buffer_size, nq)
        self.align: Optional[_core.TickAlignment] = None
        self.timeout_ns = 0
        self.stamp_tolerance = 0.0

    def set_timing(self, state_timeout: Optional[float] = None, stamp_tolerance: Optional[float] = None) -> None:
        """The stale-data timeout (s) and/or the sample-spacing tolerance (fraction of Δt, in [0, 0.5)); call
        :meth:`retime` for the alignment to take the tolerance."""
        if state_timeout is not None:
            self.timeout_ns = int(round(validation.positive(state_timeout, "state_timeout (s)") * NS))
        if stamp_tolerance is not None:
            tol = validation.nonnegative(stamp_tolerance, "stamp_tolerance")
            if not tol < 0.5:
                raise ValueError(f"stamp_tolerance must be in [0, 0.5) (a fraction of the time step), "
                                 f"got {stamp_tolerance}")
            self.stamp_tolerance = tol

    def retime(self, dt: float) -> None:
        """The alignment to ticks of ``dt`` s with the current stamp tolerance."""
        self.align = _core.TickAlignment(int(round(dt * NS)), int(round(self.stamp_tolerance * dt * NS)))

    def gap_steps(self, dt: float) -> int:
        """Steps of ``dt`` s within the state timeout (at least 1): the longest gap an estimator bridges."""
        return max(1, int(self.timeout_ns // max(1, int(round(dt * NS)))))

    @property
    def latest(self) -> Optional[np.ndarray]:
        """The latest accepted configuration (a copy), or None."""
        return self.ring.latest

    def stamp_fault(self, stamp_ns: int, now_ns: int) -> Optional[Fault]:
        """What is wrong with a sample stamped ``stamp_ns`` received at ``now_ns`` (stale, future, duplicate, out of
        order), or None."""
        age = now_ns - stamp_ns
        if age > self.timeout_ns:
            return "stale", f"joint state is {age / NS:.3f} s old (state_timeout {self.timeout_ns / NS:g} s)"
        if -age > self.timeout_ns:
            return "future_stamp", (f"joint state is stamped {-age / NS:.3f} s ahead of this clock (now "
                                    f"{now_ns / NS:.3f} s): are both sides on the same clock (use_sim_time)?")
        last = self.ring.last_stamp
        if last is not None and stamp_ns <= last:
            if stamp_ns == last:
                return "duplicate_stamp", f"joint state stamp {stamp_ns / NS:.6f} s repeats the previous one"
            return "out_of_order", (f"joint state stamp {stamp_ns / NS:.6f} s precedes the previous one "
                                    f"({last / NS:.6f} s) by {(last - stamp_ns) / NS:.6f} s")
        return None

    def read_checked(self, msg, stamp_ns: int) -> tuple[Optional[np.ndarray], Optional[Fault]]:
        """(q (nq,), None) of the sample ``msg`` stamped ``stamp_ns`` when ``read`` reads it and it is plausible after
        the latest accepted one; else (None, what is wrong)."""
        try:
            q = self.read(msg)
        except ValueError as e:
            return None, (getattr(e, "kind", "invalid"), str(e))
        if self.checks is not None:
            last = self.ring.last_stamp
            bad = self.checks.check(q, self.ring.latest, 0.0 if last is None else (stamp_ns - last) / NS)
            if bad is not None:
                return None, bad
        return q, None

    def staleness(self, now_ns: int) -> Optional[Fault]:
        """The watchdog's fault at ``now_ns``: ``no_data`` before the first accepted sample, ``stale`` when the latest
        is older than the state timeout; else None."""
        last = self.ring.last_stamp
        if last is None:
            return "no_data", "no valid joint state received yet"
        age = now_ns - last
        if age > self.timeout_ns:
            return "stale", f"no valid joint state for {age / NS:.3f} s (state_timeout {self.timeout_ns / NS:g} s)"
        return None

    def queued_at_start(self, age_ns: int, previous_age_ns: Optional[int]) -> bool:
        """Whether a sample at a run's start, ``age_ns`` old when received (clock minus stamp), waited in a queue: it
        is a period old or older (Δt − tol) and either the run's first sample (``previous_age_ns`` None) or a period
        younger than the sample before it — a burst of samples that queued while the node was busy (configure,
        activate) delivered back to back. Two samples of one age are a steady transport latency: current."""
        period = self.align.dt_ns - self.align.tol_ns
        return age_ns >= period and (previous_age_ns is None or previous_age_ns - age_ns >= period)

    def push(self, stamp_ns: int, q: np.ndarray) -> Optional[int]:
        """Buffers the accepted sample q (nq,) stamped ``stamp_ns``; the stamp of the one before it (None: none)."""
        last = self.ring.last_stamp
        self.ring.push(stamp_ns, q)
        return last

    def tick_of(self, stamp_ns: int, last_ns: Optional[int], tick_stamp: Optional[int], k_last: Optional[int],
                needs_predecessor: bool) -> tuple[int, Optional[np.ndarray], Optional[str]]:
        """(k, q_prev, gap) of the sample just buffered, stamped ``stamp_ns`` (``last_ns``: the stamp before it),
        while running (module docstring): k its tick index, -1 when it is no tick (between ticks, or waiting for a
        history of Δt before the first tick); q_prev its predecessor (nq,) or None; gap: why tick k cannot be
        computed without one when the estimator ``needs_predecessor`` (a ``sample_gap``), else None. ``tick_stamp``,
        ``k_last`` : the run's last tick (None: none yet)."""
        k, tol = self.align.align(stamp_ns, last_ns, tick_stamp, k_last)
        if k < 0:
            return -1, None, None  # oversampled: between ticks
        ring, dt_ns = self.ring, self.align.dt_ns
        p = ring.predecessor(stamp_ns - dt_ns, tol)
        if p < 0 and needs_predecessor:
            if ring.oldest_stamp > stamp_ns - dt_ns + tol:  # history shorter than dt: not a gap
                if ring.count < ring.size:
                    return -1, None, None  # just started receiving: wait for a sample with a predecessor
                return k, None, (f"the {ring.size} buffered joint states span less than dt: samples arrive too fast "
                                 "for buffer_size")
            return k, None, (f"no joint state within {tol / NS:.4f} s of {(stamp_ns - dt_ns) / NS:.6f} s (one time "
                             f"step before the sample at {stamp_ns / NS:.6f} s): the estimate needs two samples dt "
                             "apart")
        return k, (ring.at(p) if p >= 0 else None), None

    def slot_at(self, t_ns: int, tick_stamp: Optional[int], k_last: Optional[int]) -> Optional[int]:
        """The tick slot time ``t_ns`` falls in, after the run's last tick ``k_last`` at the sample stamped
        ``tick_stamp`` (None before the run's first tick)."""
        if tick_stamp is None:
            return None
        dt_ns = self.align.dt_ns
        return k_last + max(0, (t_ns - tick_stamp + dt_ns // 2) // dt_ns)
