"""What the package's lifecycle nodes share (``rclpy.lifecycle``): the controller and the simulator.

Both are managed the way ros2_control manages controllers and hardware components: the
``lifecycle_msgs`` services (``~/change_state``, ``~/get_state``, ...; ``ros2 lifecycle set <node>
configure``) move them through ``unconfigured`` → ``inactive`` → ``active`` and back, and an
``autostart`` parameter runs configure and activate at start-up. :class:`ManagedNode` adds to
rclpy's ``LifecycleNode``:

* the outcome of the last transition (``transition_message``; failed or not), logged and shown in
  the node's ``/diagnostics`` status (the node's ``_publish_diagnostics`` is called after each);
* the entities a configure creates (publishers, subscriptions, services, timers), destroyed in
  reverse order by :meth:`ManagedNode._release_entities` at cleanup;
* :func:`logged_transition`: a transition callback's exception is logged with its traceback (rclpy
  turns it into the ERROR outcome without a word).
"""

from __future__ import annotations

import functools
import traceback

from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn

from marionette_control.parameters import ParameterError

SUCCESS, FAILURE, ERROR = (TransitionCallbackReturn.SUCCESS, TransitionCallbackReturn.FAILURE,
                           TransitionCallbackReturn.ERROR)


def logged_transition(callback):
    """A transition callback whose exceptions are logged with their traceback and then give ERROR."""

    @functools.wraps(callback)
    def run(node, state):
        try:
            return callback(node, state)
        except Exception:
            node.get_logger().error(f"{callback.__name__} failed:\n{traceback.format_exc()}")
            return ERROR
    return run


class ManagedNode(LifecycleNode):
    """A LifecycleNode that reports its transitions and releases what its configure created (module docstring).

    Subclasses define ``_publish_diagnostics()`` and create what configure makes through :meth:`_keep`.
    """

    def __init__(self, node_name: str, **kwargs):
        super().__init__(node_name, **kwargs)
        self._entities: list = []  # what configure creates and cleanup destroys: (destroy function, entity)
        self.transition_message = ""  # what the last transition did, or why it failed
        self._transition_failed = False

    @property
    def lifecycle_state(self) -> str:
        """The lifecycle state's label: unconfigured, inactive, active, finalized (or a transition's)."""
        return self._state_machine.current_state[1]

    def _start_up(self, autostart: bool, on_inactive: str, waiting: str) -> None:
        """At the end of construction: with ``autostart``, configure and activate (a failed configure is a
        configuration error the process ends with; a failed activation leaves the node inactive and logs
        ``on_inactive``); without, log ``waiting`` (how to bring the node up)."""
        if not autostart:
            self.get_logger().info(f"unconfigured: {waiting}")
            return
        if self.trigger_configure() != SUCCESS:
            raise ParameterError(f"autostart: {self.transition_message}")
        if self.trigger_activate() != SUCCESS:
            self.get_logger().info(f"autostart: {on_inactive} ({self.transition_message})")

    def _done(self, message: str, ok: bool = True, level: str = "info") -> TransitionCallbackReturn:
        """Records and logs a transition's outcome and publishes diagnostics; SUCCESS or FAILURE."""
        self.transition_message, self._transition_failed = message, not ok
        log = self.get_logger()
        # (rclpy refuses different severities from one call site)
        if level == "error":
            log.error(message)
        elif level == "warning":
            log.warning(message)
        else:
            log.info(message)
        self._publish_diagnostics()
        return SUCCESS if ok else FAILURE

    def _keep(self, destroy, entity):
        """Remembers an entity configure created (``destroy(entity)`` at cleanup); returns it."""
        self._entities.append((destroy, entity))
        return entity

    def _release_entities(self) -> None:
        for destroy, entity in reversed(self._entities):
            destroy(entity)
        self._entities = []

    def _publish_diagnostics(self) -> None:
        raise NotImplementedError
