"""Optimal control: the problem description and its solvers (thesis ch. 6; seed 002).

Cost and constraint terms (:mod:`.terms`, :mod:`.cost`, :mod:`.constraints`), the problem and its defaults
(:mod:`.problem`, :mod:`.tracking_problem`), its front ends (:mod:`.spec` reads YAML specs and
:mod:`.spec_problem` builds and runs them; :mod:`.request` for ROS requests), the solvers (:mod:`.projection`,
the projection-operator optimizer; :mod:`.dmocc` with :mod:`.transcription`) behind the one
:func:`~.optimizer.solve` and its result record (:mod:`.report`), initial trajectories (:mod:`.embedding`) and
receding-horizon re-planning (:mod:`.mpc`). The ROS-free halves of the optimizer and planner nodes: their
parameters and set-up (:mod:`.optimizer_options`, :mod:`.mpc_options`).

Imports the tracking layer only for the receding horizon's view of the controller (its plans, law and
commands in flight); nothing of ROS (``docs/architecture.md``, "Layers").
"""
