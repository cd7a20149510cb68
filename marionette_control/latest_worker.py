"""A worker thread that runs the newest job handed to it (the planner's updates: nodes/mpc.py).

Why a thread of its own and not an executor's: rclpy's MultiThreadedExecutor, while a callback of a
mutually exclusive group runs, keeps waking up for the messages that group's subscription has queued
and finds nothing it may run: its spinning thread took ~90 % of a core and, holding the GIL most of
that time, stretched 8 ms updates to 400 ms of wall clock (marionette_mpc in test_mpc_ros, measured
with ``top -H``). Here the node's executor is single-threaded and only records; the long computation
runs on this thread, which waits on a condition variable when there is nothing to do.

Jobs are not queued: an update computed from an estimate that a newer one has replaced is wasted
work, and late. :meth:`LatestJobWorker.submit` replaces a job that has not started yet and returns
it, so the caller can count it.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional


class LatestJobWorker:
    """Runs ``run(job)`` for the newest submitted job on a daemon thread named ``name``.

    ``on_start()`` runs first on that thread (e.g. its scheduling policy: Linux sets it per thread).
    An exception from ``run`` or ``on_start`` ends the thread and is re-raised by :meth:`stop`, and
    :attr:`error` holds it from then on (a bug: nothing is run after it).
    """

    def __init__(self, run: Callable[[Any], None], name: str, on_start: Optional[Callable[[], None]] = None):
        self._run, self._on_start = run, on_start
        self._cv = threading.Condition()
        self._job: Any = None
        self._busy = False
        self._stopping = False
        self.error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, job: Any) -> Any:
        """Hands ``job`` (not None) over; returns the job it replaced (not started yet), or None."""
        if job is None:
            raise ValueError("a job must not be None")
        with self._cv:
            if self.error is not None:
                raise RuntimeError(f"worker {self._thread.name} ended with an error") from self.error
            if self._stopping:
                raise RuntimeError(f"worker {self._thread.name} is stopped")
            replaced, self._job = self._job, job
            self._cv.notify()
        return replaced

    @property
    def native_id(self) -> int:
        """The thread's id in the kernel (e.g. for ``os.sched_getscheduler``)."""
        return self._thread.native_id

    def wait_idle(self, timeout: float) -> bool:
        """Waits until no job runs or waits (or the thread ended); False on timeout."""
        with self._cv:
            return self._cv.wait_for(lambda: not (self._busy or self._job is not None) or not self._thread.is_alive()
                                     or self.error is not None, timeout)

    def stop(self, timeout: float = 5.0) -> None:
        """Drops a waiting job, lets a running one finish (at most ``timeout`` s) and ends the thread; re-raises
        the error that ended it, if any."""
        with self._cv:
            self._stopping = True
            self._job = None
            self._cv.notify_all()
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"worker {self._thread.name} did not finish its job within {timeout:g} s")
        if self.error is not None:
            raise self.error

    def _loop(self) -> None:
        try:
            if self._on_start is not None:
                self._on_start()
            while True:
                with self._cv:
                    self._cv.wait_for(lambda: self._stopping or self._job is not None)
                    if self._stopping:
                        return
                    job, self._job, self._busy = self._job, None, True
                try:
                    self._run(job)
                finally:
                    with self._cv:
                        self._busy = False
                        self._cv.notify_all()
        except BaseException as e:  # noqa: BLE001  (kept for stop(), which re-raises it)
            with self._cv:
                self.error = e
                self._cv.notify_all()
