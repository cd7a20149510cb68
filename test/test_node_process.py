"""Node processes stop cleanly wherever a signal lands (marionette_control/nodes/process.py).

With rclpy's own signal handling, SIGINT raised KeyboardInterrupt at whatever Python ran next in the
main thread; inside rclpy's message conversion (``take_message``) that surfaced as ``RuntimeError:
Unable to convert call argument '0'`` and the node exited with status 1 and a traceback (2 of ~70
bringup stops under load). :func:`run_node` records signals instead. These tests send the signal
from inside callbacks (where the KeyboardInterrupt used to be raised), during start-up, and check a
configuration error, each in a child process on an isolated graph.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

import rclpy  # noqa: E402

from ros_helpers import ros_env  # noqa: E402

from marionette_control.nodes.process import StopFlag  # noqa: E402

CHILD = textwrap.dedent("""
    import os, signal, sys, time
    from marionette_control.nodes.process import run_node
    from marionette_control.nodes.params import ParameterError

    how, executor_kind = sys.argv[1], sys.argv[2]

    def make_node():
        import rclpy
        from rclpy.qos import qos_profile_sensor_data
        from sensor_msgs.msg import JointState

        if how == "config":
            raise ParameterError("parameter 'x': bad")
        if how == "startup":
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)  # the signal arrives while the node is being built
        node = rclpy.create_node("process_test")
        pub = node.create_publisher(JointState, "/process_test", qos_profile_sensor_data)
        count = [0]

        def on_message(msg):  # a signal raised here, between message conversions, and stops later
            count[0] += 1
            if count[0] == 20 and how == "callback":
                os.kill(os.getpid(), signal.SIGINT)
                os.kill(os.getpid(), signal.SIGTERM)

        node.create_subscription(JointState, "/process_test", on_message, qos_profile_sensor_data)
        node.create_timer(0.001, lambda: pub.publish(JointState(name=["a", "b"], position=[1.0, 2.0])))
        return node

    def make_executor(node):
        if executor_kind == "events":
            from rclpy.experimental import EventsExecutor
            return EventsExecutor()
        from rclpy.executors import SingleThreadedExecutor
        return SingleThreadedExecutor()

    code = run_node("process_test", make_node, make_executor, stopping=lambda n, e, stop: print("stopping", stop.name),
                    cleanup=lambda n: print("cleanup"))
    print("exit", code, flush=True)
    sys.exit(code)
""")


def run_child(how: str, executor: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD, how, executor], env=ros_env(), capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("executor", ["events", "single_threaded"])
def test_signals_inside_callbacks_stop_the_node_with_status_0(executor):
    run = run_child("callback", executor)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "stopping SIGTERM" in run.stdout and "cleanup" in run.stdout and "exit 0" in run.stdout, out
    for bad in ("Traceback", "Exception in", "KeyboardInterrupt", "Unable to convert"):
        assert bad not in out, out


def test_a_signal_during_start_up_ends_the_run_cleanly():
    run = run_child("startup", "events")
    assert run.returncode == 0 and "exit 0" in run.stdout and "Traceback" not in run.stderr, run.stdout + run.stderr


def test_a_configuration_error_exits_with_status_2():
    run = run_child("config", "events")
    assert run.returncode == 2 and "[process_test] configuration error: parameter 'x': bad" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr


def test_stop_flag_records_signals_and_restores_the_handlers():
    before = signal.getsignal(signal.SIGTERM)
    stop = StopFlag()
    try:
        assert not stop
        signal.raise_signal(signal.SIGTERM)
        assert stop and stop.count == 1 and stop.name == "SIGTERM"
    finally:
        stop.restore()
    assert signal.getsignal(signal.SIGTERM) is before


PRIORITY_CHILD = textwrap.dedent("""
    import os, threading
    from marionette_control.nodes.process import set_realtime_priority

    go = threading.Event()
    worker = threading.Thread(target=go.wait)
    worker.start()
    error = set_realtime_priority(20, below=[worker.native_id])
    levels = [(os.sched_getscheduler(t), os.sched_getparam(t).sched_priority) for t in (0, worker.native_id)]
    go.set()
    worker.join()
    print("refused" if error else levels)
""")


def test_realtime_priority_puts_the_threads_below_one_level_lower():
    """The controller's process with its planner (nodes/replanning.py): every thread SCHED_FIFO at the priority, the
    planner's one level lower, so that they never preempt the controller's (in a child process: the scheduler is
    set per thread of the process that asks)."""
    run = subprocess.run([sys.executable, "-c", PRIORITY_CHILD], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    if run.stdout.strip() == "refused":
        pytest.skip("SCHED_FIFO is not permitted here (CAP_SYS_NICE or an rtprio limit)")
    fifo = int(os.SCHED_FIFO)
    assert run.stdout.strip() == str([(fifo, 20), (fifo, 19)]), run.stdout
