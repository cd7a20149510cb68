r"""The start of a run: the feedback faded in over the first ``start_blend`` seconds.

A run starts with the arm at rest where the trajectory starts, within the start tolerance — but neither on it nor
where the trajectory is when the first command acts:

* the arm as built rests elsewhere than the model says (on the realistic stand-in the elbow 0.4° off x_d(0) for
  the drives' positions of x_d(0));
* the first command acts d steps after the first sample (the command delay), so the drives hold still over the
  trajectory's first d steps, which already move them — and an optimized motion starts with its drives at their
  acceleration limit (the wave's carriage at −15 m/s² over its first five steps), so the drives stay behind it
  until it eases off, whatever the commands.

The full law answered both from the first tick: its correction, on top of a plan already at the drives' limit,
took the string below its minimum 0.04–0.06 s into the wave (0.40–0.52 N against 0.5 N on three noise seeds;
docs/tracking.md, "Start"). Feed-forward alone does not (0.77 N). So the feedback — the gains' term and the integral's — is faded in over n steps
(``start_blend`` seconds):

    u(j) = u_d(j) + (1 − s(j)) (u_law(j) − u_d(j)),     s(j) = 1 − τ³(10 − 15τ + 6τ²),  τ = j/n  (j < n),

u_law(j) the law's command with the integral's term (:mod:`.tick`), u_d(j) its feed-forward (the motion's, the
plan's in effect, the hold past the end); from j = n on u = u_law. s is a quintic from 1 to 0 with zero first and
second derivatives at both ends: the feedback's share of the command starts and ends without a jump in the drives'
acceleration. The estimate, the integral (which integrates from the first tick) and the tolerances are those of
the full law; only what the commands carry of the feedback is faded in. The drives' lag and the arm's offset are
then corrected over the blend, when the plan has left its acceleration limit.

The blend belongs to the run, not to the trajectory: a switch to another trajectory during it
(:meth:`.tick.Tracking.carry_over`) continues it where it was (the new trajectory's step j is the run's j + the
switch's tick), so switching to the remainder of the same motion changes no command. n = 0: no blend. The compiled tick (:mod:`.native_tick`) computes the same; this class is its readable reference.
"""

from __future__ import annotations

import numpy as np


def start_weight(j: int, steps: int) -> float:
    """s(j) of a blend over ``steps`` steps (module docstring): 1 at j = 0, 0 from j = steps on (and for steps = 0)."""
    if j >= steps or steps <= 0:
        return 0.0
    t = j / steps
    return 1.0 - t * t * t * (10.0 - 15.0 * t + 6.0 * t * t)


class StartBlend:
    """The fade-in of the feedback at a run's start (module docstring). ``steps`` : n (>= 0)."""

    def __init__(self, steps: int):
        self.steps = int(steps)
        self.active = False
        self.offset = 0  # the run's steps before this trajectory's step 0

    def arm(self, new_run: bool) -> None:
        """A run begins: a new one (``new_run``) is blended from its start; False: no blend."""
        self.active = new_run and self.steps > 0
        self.offset = 0

    def carry_over(self, other: "StartBlend", shift: int) -> None:
        """A switch from ``other``'s trajectory at its tick ``shift``: the run's blend goes on where it was."""
        self.active = other.active and self.steps > 0
        self.offset = other.offset + int(shift)

    def apply(self, j: int, u: np.ndarray, u_ff: np.ndarray) -> None:
        """The command u (nU,) of step j in place: u_ff + (1 − s)(u − u_ff), s = s(j + offset), u_ff (nU,) the law's
        feed-forward."""
        if self.active and j + self.offset < self.steps:
            w = 1.0 - start_weight(j + self.offset, self.steps)
            u[:] = u_ff + w * (u - u_ff)


__all__ = ["StartBlend", "start_weight"]
