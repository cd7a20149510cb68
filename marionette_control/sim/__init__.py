"""The hardware stand-in without ROS: the simulated arm (:mod:`.simulator`) and the offline closed loop
(:mod:`.offline_loop`) that runs the tracking controller against it.

Imports every layer below it; nothing of ROS (``docs/architecture.md``, "Layers").
"""
