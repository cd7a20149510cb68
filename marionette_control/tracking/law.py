"""The tracking law: feed-forward plus time-varying LQR feedback along a trajectory with gains.

    u(j) = u_d(j) − K(j) (x − x_d(j)),   j < N;       u(j) = [u_d(N−1) forces; ρ_d(N)],   j >= N

(thesis §6.7.2; the projection operator's feedback, thesis (6.10)). x is the state the
command acts on: with a command delay of d steps the controller evaluates the law at
j = k + d on the predicted state x̂_{k+d} (:mod:`.prediction`). Past the end of the
trajectory the final configuration is held. Without feedback (``feedback=False``, the
feed-forward-only mode used to measure what the feedback adds) u(j) = u_d(j).

The law knows nothing of limits, estimates or timing: :class:`~.controller.ControllerCore`
composes it with those parts.
"""

from __future__ import annotations

import numpy as np

from marionette_control.trajectory import Trajectory


class TrackingLaw:
    """u(j) for a trajectory with gains (module docstring).

    Parameters
    ----------
    model : _core.Model
        The trajectory must belong to it (name, hash, names) and carry gains K (N, nU, nx).
    trajectory : Trajectory
    feedback : bool
        False: feed-forward only (K is not used).
    """

    def __init__(self, model, trajectory: Trajectory, feedback: bool = True):
        trajectory.check_model(model)
        if trajectory.K is None:
            raise ValueError("the trajectory has no tracking gains K; compute them with "
                             "marionette_control.lq.gains.design_gains")
        self.trajectory = trajectory
        self.feedback = bool(feedback)
        self.nd, self.nq, self.nu = model.nd, model.nq, model.nu
        self._hold = np.concatenate([trajectory.U[-1, :self.nu], trajectory.X[-1, self.nd:self.nq]])
        self._rest = np.concatenate([trajectory.U[0, :self.nu], trajectory.X[0, self.nd:self.nq]])
        self._dx = np.empty(model.nx)

    @property
    def N(self) -> int:
        return self.trajectory.N

    def reference(self, k: int) -> np.ndarray:
        """x_d(k) (nx,); the final state for k >= N."""
        X = self.trajectory.X
        return X[k] if k < len(X) else X[-1]

    def feedforward(self, j: int) -> np.ndarray:
        """u_d(j) (nU,): the law's command on x_d(j) — the hold past the end, and before the start (j < 0) the drives
        at rest at x_d(0) — a view, not to be changed."""
        if j < 0:
            return self._rest
        return self._hold if j >= self.trajectory.N else self.trajectory.U[j]

    def command(self, j: int, x: np.ndarray) -> np.ndarray:
        """u(j) (nU,), a new array, for the state x (nx,) at step j >= 0."""
        tr = self.trajectory
        if j >= tr.N:
            return self._hold.copy()
        if not self.feedback:
            return tr.U[j].copy()
        np.subtract(x, tr.X[j], out=self._dx)
        return tr.U[j] - tr.K[j] @ self._dx


def open_and_closed_loop(system, trajectory: Trajectory, x0: np.ndarray):
    """Simulates a trajectory's inputs open loop and with its gains closed loop from x0.

    Returns (X_open, X_closed, U_closed); the closed loop uses the true state.
    """
    X_open, _ = system.simulate(x0, trajectory.U)
    X_closed, U_closed = system.project(x0, trajectory.X, trajectory.U, trajectory.K)
    return X_open, X_closed, U_closed
