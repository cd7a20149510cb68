"""A node's ROS time in integer nanoseconds, read the cheapest correct way on the tick path.

ROS time is the system clock (``CLOCK_REALTIME``: rcl's ROS clock reads the system time while ROS time is not
active) unless the node follows ``/clock`` (``use_sim_time``). rclpy's ``Clock.now()`` builds and validates a
``Time`` per call, and even its handle's ``get_now().nanoseconds`` is two calls into the bindings, 20-35 µs when
the code has been idle for a tick (the controller's case at 100 Hz); ``time.time_ns()`` reads the same clock in
about a microsecond. Under ``use_sim_time`` the node's clock is read. The parameter may change at run time: the
post-set callback follows it.
"""

from __future__ import annotations

import time


USE_SIM_TIME = "use_sim_time"


class NodeTime:
    """``now_ns()``: the ROS time of ``node`` (its clock's), integer ns."""

    def __init__(self, node):
        self._handle = node.get_clock().handle
        self.system = not node.get_parameter(USE_SIM_TIME).value
        node.add_post_set_parameters_callback(self._on_set)

    def _on_set(self, parameters) -> None:
        for p in parameters:
            if p.name == USE_SIM_TIME:
                self.system = not p.value

    def now_ns(self) -> int:
        """The node's ROS time (ns): the system clock, or its clock under use_sim_time."""
        return time.time_ns() if self.system else self._handle.get_now().nanoseconds


__all__ = ["NodeTime"]
