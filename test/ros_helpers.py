"""Helpers for tests that start ROS 2 nodes: isolation, processes, in-process clients.

Every test gets its own ROS_DOMAIN_ID and ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST,
so no traffic leaves this machine and parallel tests do not see each other.
Processes started here are always stopped (SIGINT, then SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

from marionette_control.cli.common import stop_process_group
from marionette_control.cli.ros_isolation import claim_domain_id, in_graph, isolated_env


def allocate_domain_id() -> int:
    """A ROS domain id (1-100) no other process on this machine holds, kept until this process exits, so
    concurrent test suites (and the main job) never share a graph."""
    return claim_domain_id(1, 100)


def ros_env(domain_id: int | None = None) -> dict:
    """Environment of an isolated ROS graph (localhost only, private domain id)."""
    return isolated_env(allocate_domain_id() if domain_id is None else domain_id)


@contextlib.contextmanager
def isolated_ros(domain_id: int | None = None):
    """Sets the isolation variables in this process for the duration (for in-process rclpy)."""
    with in_graph(ros_env(domain_id)) as env:
        yield env


def start_node(module: str, args: list[str], env: dict, log_path) -> subprocess.Popen:
    """Starts `python -m <module> <args>` as its own process group, output to log_path (the process's
    ``log_path``)."""
    log = open(log_path, "w")
    proc = subprocess.Popen([sys.executable, "-m", module, *args], env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    proc.log_path = log_path
    return proc


def stop(proc: subprocess.Popen, timeout: float = 10.0) -> int:
    """Stops a process started by start_node (SIGINT, SIGTERM, SIGKILL); returns its exit code."""
    return stop_process_group(proc, timeout)


def interrupt(proc: subprocess.Popen, hang: float = 30.0) -> int | None:
    """Sends SIGINT only and returns the exit code, or None when the process did not exit on it within ``hang``
    seconds (a hang guard, not a timing requirement); the caller's fixture still stops it then."""
    os.killpg(proc.pid, signal.SIGINT)
    try:
        return proc.wait(hang)
    except subprocess.TimeoutExpired:
        return None


@pytest.fixture
def node_processes(tmp_path):
    """Yields a starter `start(module, args, env) -> Popen`; stops every started process afterwards."""
    procs = []

    def start(module: str, args: list[str], env: dict):
        p = start_node(module, args, env, tmp_path / f"{module.rsplit('.', 1)[-1]}_{len(procs)}.log")
        procs.append(p)
        return p

    yield start
    for p in procs:
        stop(p)


def wait_for(predicate, timeout: float, interval: float = 0.05, spin=None) -> bool:
    """Polls predicate (spinning `spin()` if given) until true or timeout."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if spin is not None:
            spin()
        if predicate():
            return True
        time.sleep(interval if spin is None else 0.0)
    return predicate()


class ProbeNode:
    """A test's own node on a private rclpy context, spun by a single-threaded executor in the test's thread:
    subscriptions and clients are added by the test; :meth:`spin_until` waits for a condition (a hang guard, not a
    timing requirement), :meth:`call` calls a service and checks its ``success``; :meth:`close` releases it all."""

    def __init__(self, name: str):
        import rclpy

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = rclpy.executors.SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)

    def spin_until(self, predicate, timeout: float, what: str) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.02)
            if predicate():
                return
        raise AssertionError(f"timed out waiting for {what}")

    def call(self, client, request, what: str, idempotent: bool = False):
        """The response of ``client`` to ``request``; fails the test unless it reports success.

        ``idempotent``: a request whose answer has not come within 10 s is sent once more, as a user repeats a call
        that does not answer. A service is "ready" once the client has discovered the server; a server that has
        not yet discovered the client's response reader drops its answer ("failed to send response (timeout)" in
        its log: seen once in CI, on a probe's first call, to the simulator's reset, which was carried out)."""
        self.spin_until(client.service_is_ready, 30.0, f"service {what}")
        future = client.call_async(request)
        if idempotent and not wait_for(future.done, 10.0, spin=lambda: self.executor.spin_once(timeout_sec=0.02)):
            future = client.call_async(request)
        self.spin_until(future.done, 10.0, f"an answer from {what}")
        assert future.result().success, f"{what}: {future.result().message}"
        return future.result()

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        self.context.try_shutdown()
