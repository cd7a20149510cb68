"""rosbag2 recording and replay (issue 6): recorder, live player, deterministic offline replay, summary.

* :mod:`.bagio` — bag directories (metadata.yaml + MCAP) through ``rosbags``: writer with periodic
  flushes, reader, message definitions, QoS conversions, repair of a killed recording;
* :mod:`.recorder` — records topics of the live graph (raw subscriptions, offered QoS);
* :mod:`.player` — publishes a bag on the live graph with its original timing;
* :mod:`.replay` — feeds recorded ``/joint_states`` through the controller's tick logic without ROS;
* :mod:`.summary` — topics, counts, rates, gaps; plots of recorded joint trajectories.

Nothing here imports rclpy at module level: the offline parts run without ROS.
"""
