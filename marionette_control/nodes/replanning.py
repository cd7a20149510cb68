"""marionette_controller and its planner in one process: re-planning at every tick (issue 28, docs/mpc.md).

    python -m marionette_control.nodes.replanning --ros-args [-r marionette_controller:__node:=NAME]
        -p plan_topic:=/marionette_mpc/plan -p tracking_topic:=/NAME/tracking [controller and planner parameters]

The controller node (:mod:`.controller`, with its executor, start-up and shutdown) and a ``marionette_mpc`` node
(:mod:`.mpc`) with ``method`` 'rti' (a real-time iteration every tick) on the same executor. Nothing between them
is private: the controller publishes ``~/tracking`` and takes plans from ``plan_topic`` exactly as from a planner
in a process of its own, so its checks of a plan (late, off the predicted state, another run, ...) apply unchanged;
the messages stay in the process. The process's arguments go to both nodes: a parameter applies to each node that
declares it (``model_file``, ``trajectory_file``, ``trajectory_topic`` and ``diagnostics_period`` to both, with the
same meaning), a name remapping is aimed at one node with its node name (``marionette_controller:__node:=NAME``).

What the process fixes for the planner (:data:`PLANNER_OVERRIDES`): ``method`` 'rti', a plan used from the next
tick (``latency_steps`` 1) with no deadline but that tick, and its updates' thread on the default scheduler,
neither niced nor under SCHED_IDLE. The controller's tick does not wait for an iteration: the iteration runs on the
planner's worker thread (:mod:`marionette_control.latest_worker`), the executor's thread only predicts the plan's
start from each ``~/tracking`` message after the tick's command is out. The two threads share the interpreter's
lock, though, and a thread that holds it while the kernel does not run it holds up the other: a SCHED_IDLE or niced
planner thread preempted in the middle of its Python work would stall the controller's next tick (priority
inversion). So with the controller's ``realtime_priority`` (SCHED_FIFO for every thread of the process) the planner's
threads run one level below it (:func:`~marionette_control.nodes.process.set_realtime_priority`): above every
ordinary process, so that nothing but the controller's own threads preempts them while they hold the lock, and
never ahead of the controller's threads, which take a core from them when both are ready. Python's switch interval
(5 ms) is kept: with 0.2 ms the tick's p99 was no lower (docs/mpc.md).
"""

from __future__ import annotations

import sys

from rclpy.parameter import Parameter

from marionette_control.nodes import controller
from marionette_control.nodes.mpc import NODE_NAME as PLANNER_NAME
from marionette_control.nodes.mpc import MPCNode
from marionette_control.nodes.process import run_node

#: what the planner of this process is set to, whatever the arguments say (module docstring)
PLANNER_OVERRIDES = {"method": "rti", "latency_steps": 1, "deadline": 0.0, "nice": 0, "idle_scheduling": False}


def make_planners(_controller) -> list:
    """The planner of the controller's process (:data:`PLANNER_OVERRIDES` over the process's arguments)."""
    return [MPCNode(parameter_overrides=[Parameter(k, value=v) for k, v in PLANNER_OVERRIDES.items()])]


def main(args=None) -> int:
    """Runs both nodes until SIGINT/SIGTERM (:func:`marionette_control.nodes.process.run_node`): the controller's
    shutdown (the hold command), then the planner's updates stopped."""
    planners: list = []

    def companions(node) -> list:
        planners.extend(make_planners(node))
        return planners

    def cleanup(node) -> None:
        controller.shutdown(node)
        for planner in planners:
            planner.stop_updates()

    def started(node, executor) -> None:
        controller.apply_realtime_priority(node, executor,
                                           below=[tid for planner in planners for tid in planner.worker_thread_ids()])

    return run_node(f"{controller.NODE_NAME} + {PLANNER_NAME}", controller.make_node, controller.make_executor,
                    args, started=started, cleanup=cleanup, companions=companions)


if __name__ == "__main__":
    sys.exit(main())
