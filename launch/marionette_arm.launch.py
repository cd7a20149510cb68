"""The marionette arm on the hardware: marionette_optimizer + marionette_controller.

    ros2 launch marionette_control marionette_arm.launch.py [log_level:=info]

The arm's ros2_control driver (joint_state_broadcaster and a forward position controller,
whose commands the controller publishes) is started separately. The node set, parameter
files and remappings come from marionette_control.system_description.node_set("hardware"),
which marionette_bringup --hardware starts the same way on machines without ros2 launch.
"""

from marionette_control import system_description

VARIANT = "hardware"


def generate_launch_description():
    return system_description.generate_launch_description(VARIANT)
