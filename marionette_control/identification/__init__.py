"""Calibration of a model from the arm's own data: system identification on the discrete dynamics.

The variational integrator is a discrete-time model with exact derivatives, so its parameters can be identified
from sampled trajectories directly (thesis §5.1.3): the residual of the forced constrained discrete
Euler–Lagrange equations (thesis (4.36); seed 002 (3.6)) along the measured configurations is the equation
error, and the simulation of short windows from measured states the output error.

* :mod:`.parameters` — the physical parameters a fit may select (masses, centres of mass, inertias, joint
  damping, constant placements such as the hook), read from and substituted into a model file while it is built;
* :mod:`.recording` — measured configurations and commands on the tick grid, from a bag or a table, with the
  checks a fit needs (gaps, holds, length);
* :mod:`.equation_error` — the DEL residual along a recording with its exact Jacobian with respect to the
  parameters (linear parameters by the linearity of the Lagrangian, placements through kinematic
  configurations; the string's unknown multipliers eliminated);
* :mod:`.output_error` — the simulation error over short windows with exact sensitivities;
* :mod:`.fit` — the fit (prior, Gauss–Newton, uncertainty, identifiability, physical consistency);
* :mod:`.excitation` — an identification motion the optimizer makes feasible;
* :mod:`.variant` — the calibrated model as a variant model file (``base:`` + ``overrides:``);
* :mod:`.online` — the receding-horizon planner's online identification: the last seconds of joint states, fitted
  on request, an estimate adopted only when the fit can be trusted.

Imports the layers below it (``docs/architecture.md``, "Layers"); nothing of ROS (bags are read through
:mod:`marionette_control.bags.bagio`).
"""
