"""Optimal control: the problem description and its solvers (thesis ch. 6; seed 002).

Cost and constraint terms (:mod:`.terms`, :mod:`.cost`, :mod:`.constraints`), the problem and its defaults
(:mod:`.problem`, :mod:`.tracking_problem`), its front ends (:mod:`.spec` for YAML specs, :mod:`.request`
for ROS requests), the solvers (:mod:`.projection`, the projection-operator optimizer; :mod:`.dmocc` with
:mod:`.transcription`), initial trajectories (:mod:`.embedding`) and receding-horizon re-planning
(:mod:`.mpc`).

Imports the tracking layer only for the receding horizon's view of the controller (its plans, law and
commands in flight); nothing of ROS (``docs/architecture.md``, "Layers").
"""
