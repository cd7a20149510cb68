"""Numerical studies behind ``docs/`` (not part of the package's API).

Nothing in ``marionette_control.control``, the nodes or the command-line tools
imports this package; its modules exist so that the figures and numbers of a
study document can be regenerated and tested. ``integrators`` holds the
explicit schemes of seed 004 §5.2 that ``docs/integrator_study.md`` compares
with the core's midpoint variational integrator; ``scissor_lift`` the damping
identification of thesis §5.1.3 (``docs/reproductions.md`` §10); ``seed_costs``
the seeds' benchmark costs.
"""
