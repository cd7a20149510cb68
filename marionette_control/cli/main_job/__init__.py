"""The main job's parts (``python -m marionette_control.cli.main_job``, :mod:`marionette_control.cli.main_job.job`).

* :mod:`.observer` — the in-process ROS client: services, what the run publishes, diagnostics;
* :mod:`.analysis` — ROS-free: a run's record, errors of the arm's true angles, executed constraint
  margins (commands, drives, the plant's string tension), recovery after a push;
* :mod:`.figures` — the plots (thesis Figs. 6.10 and 6.11, error after a push);
* :mod:`.report` — ``report.md`` from the ``report.json`` record.
"""
