"""The real-time tracking controller without ROS (thesis §6.7.2).

:mod:`.controller` (``ControllerCore``) composes the parts the ``marionette_controller`` node drives, each in its
own module: the options and parameters (:mod:`.controller_options`), joint states in (:mod:`.joint_states`), sample intake
(:mod:`.intake`, :mod:`.sample_checks`), the staging of trajectories and plans (:mod:`.staging`,
:mod:`.plan_switch`), the tick over one trajectory (:mod:`.tick`: :mod:`.estimation`, :mod:`.prediction`,
:mod:`.law`, :mod:`.integral_action`, :mod:`.command_limits`, fused in :mod:`.native_tick`), tolerances
(:mod:`.tolerances`), faults (:mod:`.faults`) and the status (:mod:`.status`).

Imports the LQ and mechanics layers and the shared modules; nothing of ROS, nothing of ``ocp/``, ``sim/`` or
``nodes/`` (``docs/architecture.md``, "Layers").
"""
