"""rosbag2 directories without ROS: reading and writing, deterministic offline replay, summaries.

* :mod:`.bagio` — bag directories (metadata.yaml + MCAP) through ``rosbags``: writer with periodic
  flushes, reader, message definitions, QoS conversions, repair of a killed recording;
* :mod:`.replay` — feeds recorded ``/joint_states`` through the controller's tick logic without ROS;
* :mod:`.summary` — topics, counts, rates, gaps; plots of recorded joint trajectories.

Nothing here imports rclpy or ROS messages (``test/test_layers.py``): the recorder and the live player,
which need a graph, are nodes (:mod:`marionette_control.nodes.bag_recorder`,
:mod:`marionette_control.nodes.bag_player`).
"""
