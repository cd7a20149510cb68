"""Running a node process: start-up, spinning until SIGINT/SIGTERM, clean shutdown (every node's ``main()``).

Imports nothing of ROS at module level (the bag tools use :class:`StopFlag` too).

Why not rclpy's signal handling: with rclpy's handlers (``rclpy.init()``'s default) a SIGINT
both shuts the context down from a signal thread and raises ``KeyboardInterrupt`` in the main
thread at whatever Python bytecode runs next. That is often inside rclpy's own C++ code calling
back into Python, e.g. the generated message conversion in ``Subscription.take_message``, where
the interrupted conversion returns NULL and pybind11 reports ``RuntimeError: Unable to convert
call argument '0' to Python object`` instead of the KeyboardInterrupt: the process then exits
with status 1 and a traceback on an ordinary stop (2 of ~70 bringup stops under load: once in
the controller's EventsExecutor, once in the simulator's single-threaded executor). So :func:`run_node` installs Python
handlers that only *record* the signal (:class:`StopFlag`, installed before ``rclpy.init`` so
a signal during start-up is recorded too), initializes rclpy without its handlers
(``SignalHandlerOptions.NO``) and spins in short ``spin_once`` slices until a signal was
recorded or the context was shut down; only then are the executor, the node and the context
shut down, from the main thread, in that order. A stop therefore ends with status 0 and no
traceback wherever the signal lands.

:func:`set_realtime_priority` puts a node's process under the real-time scheduler (the controller's
``realtime_priority``), some of its threads one level below the rest.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Callable, Iterable, Optional

from marionette_control.parameters import ParameterError

#: Longest a stop request waits for the spin loop to notice it (s).
SPIN_SLICE = 0.1


class StopFlag:
    """SIGINT/SIGTERM handlers that only record the request (count and last signal name).

    Installed on construction; :meth:`restore` puts the previous handlers back. True once a
    signal arrived.
    """

    def __init__(self, signals=(signal.SIGINT, signal.SIGTERM)):
        self.count = 0
        self.name = ""
        self._previous = {}
        for s in signals:
            self._previous[s] = signal.signal(s, self._handle)

    def _handle(self, signum, frame):
        self.count += 1
        self.name = signal.Signals(signum).name

    def restore(self) -> None:
        for s, h in self._previous.items():
            signal.signal(s, h)
        self._previous = {}

    def __bool__(self):
        return self.count > 0


def run_node(name: str, make_node: Callable, make_executor: Optional[Callable] = None, args=None, *,
             started: Optional[Callable] = None, stopping: Optional[Callable] = None,
             cleanup: Optional[Callable] = None, companions: Optional[Callable] = None) -> int:
    """Runs one node until SIGINT/SIGTERM or an external shutdown; returns the exit status.

    name : the node's name, for the configuration-error line on stderr.
    make_node() -> Node; a :class:`~marionette_control.nodes.params.ParameterError` from it (or
        from any hook) prints ``[name] configuration error: ...`` and returns 2.
    make_executor(node) -> executor (default: ``SingleThreadedExecutor``); the node is added here.
    started(node, executor) : called once after the executor's first (non-blocking) spin, when its
        threads exist (e.g. the controller's realtime priority).
    stopping(node, executor, stop) : called after a signal while the context is still up, to finish
        work before the shutdown (it may keep spinning; ``stop.count`` tells a second signal).
    cleanup(node) : always called before the executor is shut down (e.g. joining worker threads).
    companions(node) -> [Node]: nodes made after the node and spun on its executor in this process (the
        controller's planner: :mod:`.replanning`); destroyed after it. ``cleanup`` is the place to stop their work.

    Returns 0 after a signal or an external shutdown (status 0, no traceback), 2 on a
    configuration error; other exceptions propagate (a bug: traceback, status 1).
    """
    import rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    stop = StopFlag()
    node = executor = None
    others = []
    try:
        rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
        if stop:
            return 0  # stopped during start-up
        node = make_node()
        if companions is not None:
            others = list(companions(node))
        executor = make_executor(node) if make_executor is not None else SingleThreadedExecutor()
        for n in [node, *others]:
            executor.add_node(n)
        executor.spin_once(timeout_sec=0.0)  # the executor's own threads exist from here
        if started is not None:
            started(node, executor)
        while not stop and rclpy.ok():
            executor.spin_once(timeout_sec=SPIN_SLICE)
        if stop and stopping is not None and rclpy.ok():
            stopping(node, executor, stop)
        return 0
    except ExternalShutdownException:  # the context was shut down while spinning (EventsExecutor raises this)
        return 0
    except ParameterError as e:
        print(f"[{name}] configuration error: {e}", file=sys.stderr, flush=True)
        return 2
    finally:
        try:
            if node is not None and cleanup is not None:
                cleanup(node)
            if executor is not None:
                executor.shutdown(timeout_sec=5.0)
            for n in [node, *others]:
                if n is not None:
                    n.destroy_node()
            rclpy.try_shutdown()
        finally:
            stop.restore()


def set_realtime_priority(priority: int, below: Iterable[int] = ()) -> Optional[str]:
    """Puts every thread of this process under SCHED_FIFO at ``priority``, the threads of kernel ids ``below`` at
    ``priority`` − 1 (at least 1): work that must not preempt the others (the planner's updates beside the controller,
    :mod:`.replanning`); returns an error text or None.

    Threads created later keep the default scheduler (call after the executor has spun once).
    """
    below = set(below)
    failed = []
    for tid in os.listdir("/proc/self/task"):
        level = max(1, priority - 1) if int(tid) in below else priority
        try:
            os.sched_setscheduler(int(tid), os.SCHED_FIFO, os.sched_param(level))
        except ProcessLookupError:
            continue  # the thread ended meanwhile
        except OSError as e:
            failed.append(f"thread {tid}: {e.strerror}")
    if failed:
        return (f"could not set SCHED_FIFO priority {priority} ({'; '.join(failed[:2])}"
                f"{', ...' if len(failed) > 2 else ''}): needs CAP_SYS_NICE or an rtprio limit (ulimit -r)")
    return None
