"""Names a node shows the graph, namespace included (two arms on one graph must be told apart).

Imports nothing of ROS: takes any rclpy node.
"""

from __future__ import annotations


def status_name(node, task: str) -> str:
    """The name of a node's ``/diagnostics`` status: ``"<node name>: <task>"``, with the namespace in front when
    the node has one (``"arm1/marionette_controller: tracking"``), the way diagnostic_updater qualifies
    namespaced nodes. ``/diagnostics`` itself stays global: one aggregator watches every robot."""
    namespace = node.get_namespace().strip("/")
    return f"{namespace + '/' if namespace else ''}{node.get_name()}: {task}"
