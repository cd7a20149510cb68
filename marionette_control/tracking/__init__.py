"""The real-time tracking controller without ROS (thesis §6.7.2).

:mod:`.controller` composes the parts the ``marionette_controller`` node drives, each in its own module:
sample checks, estimation, prediction through the commands in flight, the tracking law, integral action,
command limits, tolerances, plan switching and the native tick.

Imports the LQ and mechanics layers and the shared modules; nothing of ROS (``docs/architecture.md``,
"Layers").
"""
