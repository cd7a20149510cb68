"""ROS 2 nodes: thin adapters (messages ⇄ numpy, parameters ⇄ options) around the control layer."""
