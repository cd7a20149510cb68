"""LatestJobWorker (latest_worker.py): the newest job runs, an older waiting one is replaced and
returned, a running one finishes, errors are not lost. Every wait is on an event, none on a duration."""

from __future__ import annotations

import threading

import pytest

from marionette_control.latest_worker import LatestJobWorker


class Gate:
    """A job function that records its jobs and blocks on ``release`` for jobs named 'hold'."""

    def __init__(self):
        self.ran, self.started, self.release = [], threading.Event(), threading.Event()
        self.thread_ids = set()

    def __call__(self, job):
        self.thread_ids.add(threading.get_native_id())
        self.started.set()
        if job == "hold":
            assert self.release.wait(30.0)
        self.ran.append(job)


def test_jobs_run_in_turn_on_the_worker_thread():
    gate = Gate()
    started_on = []
    w = LatestJobWorker(gate, "test-worker", on_start=lambda: started_on.append(threading.get_native_id()))
    try:
        for job in ("a", "b", "c"):
            assert w.submit(job) is None
            assert w.wait_idle(30.0)
        assert gate.ran == ["a", "b", "c"]
        assert gate.thread_ids == set(started_on) == {w.native_id} != {threading.get_native_id()}
    finally:
        w.stop()


def test_a_waiting_job_is_replaced_by_a_newer_one_and_returned():
    gate = Gate()
    w = LatestJobWorker(gate, "test-worker")
    try:
        w.submit("hold")
        assert gate.started.wait(30.0)          # running: the next jobs wait
        assert w.submit("old") is None
        assert w.submit("new") == "old"         # replaced before it started
        assert not w.wait_idle(0.0)
        gate.release.set()
        assert w.wait_idle(30.0)
        assert gate.ran == ["hold", "new"]
    finally:
        gate.release.set()
        w.stop()


def test_stop_lets_the_running_job_finish_and_drops_the_waiting_one():
    gate = Gate()
    w = LatestJobWorker(gate, "test-worker")
    w.submit("hold")
    assert gate.started.wait(30.0)
    w.submit("dropped")
    stopper = threading.Thread(target=w.stop)
    stopper.start()
    gate.release.set()
    stopper.join(30.0)
    assert not stopper.is_alive() and gate.ran == ["hold"]
    with pytest.raises(RuntimeError, match="is stopped"):
        w.submit("late")


def test_an_error_ends_the_worker_and_is_raised_by_submit_and_stop():
    def run(job):
        raise ZeroDivisionError(f"job {job}")

    w = LatestJobWorker(run, "test-worker")
    w.submit("x")
    assert w.wait_idle(30.0)
    with pytest.raises(RuntimeError, match="ended with an error") as info:
        w.submit("y")
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    with pytest.raises(ZeroDivisionError, match="job x"):
        w.stop()


def test_none_is_not_a_job():
    w = LatestJobWorker(lambda job: None, "test-worker")
    try:
        with pytest.raises(ValueError, match="must not be None"):
            w.submit(None)
    finally:
        w.stop()
