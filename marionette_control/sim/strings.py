"""The plant's step with its strings: holonomic (they pull and push) or one-sided (they pull, never push).

The optimizer's and the controller's model hold every string at its length: a holonomic constraint
h(q) = |p_1 − p_2|² − L² = 0 (thesis (3.22)) whose multiplier λ may take either sign, so the tension
T = 2 L λ/Δt (docs/constraint_forces.md) may be negative: a string that pushes. A real string goes slack
instead. :class:`PlantStep` takes the plant's step x_{k+1} = f(x_k, u_k) (the midpoint DEL step, thesis
(4.36)) in one of two modes (``HardwareProfile.string``):

* ``holonomic``: the constrained step of the model as it is, T of either sign (the nominal model's physics).
* ``one_sided``: each string is *taut* (its constraint in the step) or *slack* (the step of the same model
  without it, :func:`~marionette_control.model.builder.without_constraints`: same configurations, states and
  inputs, the arm in free flight under gravity, damping and disturbances). Each step is a complementarity
  choice λ ≥ 0, h(q_{k+1}) ≤ 0, λ·h = 0, found by an active set that starts from the strings' state at q_k:

  1. taut strings are constrained, slack ones free; the step is taken;
  2. a taut string whose tension came out negative (T < 0: the step needed a push) is released: it goes
     slack and the step is retaken without it;
  3. a slack string whose free step ends stretched (h(q_{k+1}) > 0: the hook farther from its anchor than
     the string is long) *catches*: the step is retaken with its constraint, h(q_{k+1}) = 0. That is the DEL
     step from the slack state onto the constraint set, an inelastic re-tensioning: its impulse
     −Dh(q_k)ᵀλ_k removes the velocity that would stretch the string (the jerk of a string pulled taut),
     and the energy it takes out is the kinetic energy of that stretching velocity.

  Each string changes at most once per step (no cycling), so a step takes at most 1 + strings solves; a
  string released in a step whose free step then ends slightly stretched is caught at the next step. A slack
  string's tension is 0. While no string is released (T ≥ 0 at every step) the one-sided step *is* the
  holonomic one: the same call of the same system, bit for bit.

The free flight of a slack step is the plant's own variational integrator without the constraint, so it
conserves the energy of the free arm up to its damping (the midpoint rule's energy error is bounded, not
drifting); ``test/test_simulated_hardware.py`` measures that, the energy a catch dissipates, and a slack
episode provoked by paying out string faster than the arm can fall. ``docs/simulator.md`` ("A string that
goes slack") has the figures.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from marionette_control import _core
from marionette_control.model.builder import without_constraints

STRING_MODES = ("one_sided", "holonomic")


@dataclass(frozen=True)
class StringStep:
    """One plant step: x (nx,) the state x_{k+1}; tension (strings,) [N] over the step (0 for a slack string);
    slack (strings,) bool: which strings were slack over it; released, caught (strings,) bool: which went slack
    in it and which caught in it."""

    x: np.ndarray
    tension: np.ndarray
    slack: np.ndarray
    released: np.ndarray
    caught: np.ndarray


class PlantStep:
    """The step of ``model`` (the plant, constraints and all) with its strings ``holonomic`` or ``one_sided``.

    model : _core.Model; dt [s]; string_index (strings,) the strings' constraint indices (into λ);
    string_length (strings,) their length configurations (into q); mode : one of :data:`STRING_MODES`;
    newton_tolerance, newton_max_iterations : every step's Newton settings.
    ``system`` is the DiscreteSystem of the model with every constraint (the holonomic plant).
    """

    def __init__(self, model: _core.Model, dt: float, string_index, string_length, mode: str,
                 newton_tolerance: float = 1e-10, newton_max_iterations: int = 50):
        if mode not in STRING_MODES:
            raise ValueError(f"string mode must be one of {', '.join(STRING_MODES)}, got {mode!r}")
        self.model, self.dt, self.mode = model, float(dt), mode
        self.string_index = np.asarray(string_index, dtype=int)
        self.string_length = np.asarray(string_length, dtype=int)
        self._newton = (newton_tolerance, newton_max_iterations)
        self.system = _core.DiscreteSystem(model, self.dt, *self._newton)
        self._systems = {(): (self.system, self.string_index)}   # slack strings → (system, taut strings' λ index)

    @property
    def strings(self) -> int:
        return int(self.string_index.size)

    def _system(self, slack: np.ndarray):
        """The DiscreteSystem without the constraints of the ``slack`` strings and the λ index of each string
        (−1: slack), built on first use."""
        key = tuple(np.flatnonzero(slack).tolist())
        if key not in self._systems:
            names = list(self.model.constraint_names)
            removed = [names[i] for i in self.string_index[list(key)]]
            variant = without_constraints(self.model, removed)
            kept = list(variant.constraint_names)
            index = np.array([-1 if slack[s] else kept.index(names[c]) for s, c in enumerate(self.string_index)])
            self._systems[key] = (_core.DiscreteSystem(variant, self.dt, *self._newton), index)
        return self._systems[key]

    def stretch(self, q: np.ndarray) -> np.ndarray:
        """h(q) of every string (strings,) [m²]: > 0 when the hook is farther from its anchor than the length."""
        return np.asarray(self.model.constraints(q)[0])[self.string_index]

    def step(self, x: np.ndarray, u: np.ndarray, slack: np.ndarray) -> StringStep:
        """x_{k+1} = f(x_k, u_k) (the module docstring's active set; ``slack`` (strings,) bool: the strings slack
        at x_k, ignored in ``holonomic`` mode). Raises the core's StepError when a solve fails."""
        nq = self.model.nq
        slack = np.array(slack, dtype=bool) if self.mode == "one_sided" else np.zeros(self.strings, dtype=bool)
        released = np.zeros(self.strings, dtype=bool)
        caught = np.zeros(self.strings, dtype=bool)
        length = x[self.string_length]
        while True:
            system, index = self._system(slack)
            x_next, _, lam = system.step(x, u)
            taut = index >= 0
            tension = np.zeros(self.strings)
            tension[taut] = 2.0 * length[taut] * np.asarray(lam)[index[taut]] / self.dt
            if self.mode == "holonomic":
                break
            release = ~slack & ~caught & (tension < 0.0)
            catch = slack & ~released & (self.stretch(x_next[:nq]) > 0.0) if slack.any() else np.zeros_like(slack)
            if not (release.any() or catch.any()):
                break
            released |= release
            caught |= catch
            slack = slack & ~catch | release
        return StringStep(x_next, tension, slack, released, caught)
