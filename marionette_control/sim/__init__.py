"""The hardware stand-in without ROS, and the offline closed loop that runs the tracking controller against it.

- :mod:`.simulator`: the simulated arm (:class:`~.simulator.SimulatedArm`): commands in, encoder readings out;
- :mod:`.profile`: the hardware profile, one field per effect (command delay, encoders, drive law, plant);
- :mod:`.plant`: the plant model and where it rests; :mod:`.drives`: the position drives' laws;
  :mod:`.setpoint_stream`: the drives' setpoint at each step from the commands received (one setpoint or a short
  trajectory each);
  :mod:`.disturbance`: pushes on the plant's bodies;
- :mod:`.simulator_options`, :mod:`.configure`, :mod:`.schedule`: the simulator node's parameters, its configure step
  and its time base, ROS-free (``nodes/simulator.py`` is their rclpy adapter);
- :mod:`.offline_loop`: the controller's tick logic against the simulated arm, cycle by cycle.

Imports every layer below it; nothing of ROS, nothing of ``nodes/`` (``docs/architecture.md``, "Layers").
"""
