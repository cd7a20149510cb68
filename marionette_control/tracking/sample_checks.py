"""Plausibility checks of a measured configuration before it reaches the state estimate.

A joint-state sample that is well formed (finite, every joint named; :mod:`.joint_states`) can
still be impossible for the arm. :class:`SampleChecks` rejects, with a specific fault kind:

``out_of_limits``
    a configuration outside its range widened by ``limit_margin`` — the URDF ``<limit>`` of
    a joint, the ``actuators`` range of a drive
    (:meth:`~marionette_control.model.limits.ModelLimits.configuration_limits`);
``implausible_jump``
    a change since the last accepted sample larger than the arm can make in that time,
    ``velocity_factor`` · v_max · Δt + ``jump_margin`` (v_max: the URDF ``velocity`` limit of
    a joint, ``max_velocity`` of a drive; the margin covers encoder noise and quantization);
``chain_inconsistent``
    the closed chain (the string) violated: a constraint h_i(q) (thesis (3.22); for a string
    h = |p_hook − p_carriage|² − L²) whose first-order distance from q to the constraint
    surface, |h_i(q)| / ‖Dh_i(q)‖, exceeds ``chain_tolerance`` (for the arm's string
    ‖Dh‖ ≈ 2L, so this is the string's slack or stretch in metres): a slack string, a
    slipped encoder or a wrong joint mapping.

Configurations without a known range or speed are not checked for it. Shapes: (nq,), model order.

:meth:`SampleChecks.gate` is the same checks compiled into the controller's sample path
(``_core.SampleGate``: a serialized joint state to its checked q in one native call); a sample it
does not pass comes here, which decides and explains.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from marionette_control import _core, validation
from marionette_control.model.limits import ModelLimits


@dataclass(frozen=True)
class PlausibilityOptions:
    """Margins of the checks (module docstring); SI units (rad or m)."""

    limit_margin: float = 0.05
    velocity_factor: float = 2.0
    jump_margin: float = 0.02
    chain_tolerance: float = 0.01

    def __post_init__(self):
        for name, rule in (("limit_margin", ">= 0"), ("jump_margin", ">= 0"), ("velocity_factor", "> 0"),
                           ("chain_tolerance", "> 0")):
            v = getattr(self, name)
            if validation.problem(v, minimum=0.0, positive=rule == "> 0"):
                raise ValueError(f"plausibility option '{name}' must be finite and {rule}, got {v}")


class SampleChecks:
    """The plausibility checks of one model (module docstring).

    Parameters
    ----------
    model : _core.Model
    limits : ModelLimits
        The model's limits (:mod:`marionette_control.model.limits`); the range and speed of each
        configuration are its :meth:`~.ModelLimits.configuration_limits` (inf: unchecked).
    options : PlausibilityOptions
    """

    def __init__(self, model, limits: ModelLimits, options: PlausibilityOptions = PlausibilityOptions()):
        self.model = model
        self.names = list(model.config_names)
        if limits.model_name != model.name or limits.config_lower.shape != (model.nq,):
            raise ValueError(f"the limits of model '{limits.model_name}' ({limits.config_lower.size} configurations) "
                             f"do not fit model '{model.name}' ({model.nq})")
        lower, upper, max_velocity = limits.configuration_limits()
        self.options = options
        self.lower = np.asarray(lower, dtype=float) - options.limit_margin
        self.upper = np.asarray(upper, dtype=float) + options.limit_margin
        self.speed = options.velocity_factor * np.asarray(max_velocity, dtype=float)
        self.check_chain = model.nc > 0
        self._distance = _core.ConstraintDistance(model) if self.check_chain else None
        # the tick path works on Python floats: for a handful of configurations that is several times faster
        # than a dozen numpy calls
        self._bounds = list(zip(self.lower.tolist(), self.upper.tolist()))
        self._speed = self.speed.tolist()

    def check(self, q: np.ndarray, q_last: Optional[np.ndarray], elapsed: float) -> Optional[tuple[str, str]]:
        """(fault kind, message) for an implausible q (nq,), else None.

        ``q_last`` : the last accepted configuration, ``elapsed`` seconds before q (None: no jump check).
        """
        qs = q.tolist()
        for i, (v, (lo, hi)) in enumerate(zip(qs, self._bounds)):
            if not lo <= v <= hi:
                return "out_of_limits", (f"{self.names[i]} = {v:.6g} is outside its range "
                                         f"[{lo + self.options.limit_margin:g}, {hi - self.options.limit_margin:g}] "
                                         f"(+- limit_margin {self.options.limit_margin:g})")
        if q_last is not None:
            margin = self.options.jump_margin
            for i, (v, w, vmax) in enumerate(zip(qs, q_last.tolist(), self._speed)):
                allowed = vmax * elapsed + margin
                if abs(v - w) > allowed:
                    return "implausible_jump", (f"{self.names[i]} moved {v - w:+.6g} in {elapsed:.4g} s; at most "
                                                f"{allowed:.4g} is possible (velocity_factor x max velocity "
                                                f"{vmax / self.options.velocity_factor:g} + jump_margin {margin:g})")
        if self.check_chain:
            tol = self.options.chain_tolerance
            for i, dist in enumerate(self._distance.distances(q)):
                if not dist <= tol:
                    return "chain_inconsistent", (f"the configuration violates constraint "
                                                  f"'{self.model.constraint_names[i]}' by {dist:.4g} (first-order "
                                                  f"distance |h|/|Dh|; chain_tolerance {tol:g}): a slack string, a "
                                                  "slipped encoder or a wrong joint mapping")
        return None

    def gate(self, hardware_names) -> "_core.SampleGate":
        """These checks, with the reading of a serialized JointState by ``hardware_names`` (the hardware joint
        of each configuration, model order: ``.joint_states.JointStateReader.hardware_names``), in one native
        call: ``gate.read(data, last_stamp, q_last)`` is (stamp_ns, q) of a plain sample that passes them, else
        None (this class and the reader then decide; ``cpp/include/marionette/sample_gate.hpp``)."""
        return _core.SampleGate(self.model, list(hardware_names), self.lower, self.upper, self.speed,
                                self.options.jump_margin, self.options.chain_tolerance if self.check_chain else 0.0)
