"""The controller in closed loop with the simulated arm, offline: tuning and evaluation without a ROS graph.

:func:`run_loop` runs the tick logic the ``marionette_controller`` node runs
(:class:`~.controller_core.ControllerCore`, built by :func:`~.controller_core.make_core` from the
same model file) against the hardware stand-in the ``marionette_simulator`` node runs
(:class:`~.simulated_hardware.SimulatedArm` with a :class:`~.simulated_hardware.HardwareProfile`:
plant model, command delay, drives, encoders), cycle by cycle in the order of ros2_control's
loop::

    q_meas = arm.measure()                                    # joint state of cycle c, stamped t_c
    result = core.on_joint_state(q_meas, t_c, t_c)            # the controller's tick
    arm.receive_command(result.command)                       # if it sent one: received during cycle c
    arm.step()                                                # x_{c+1} = f(x_c, u_c) on the plant

Only the transport is missing: in the node graph a joint state reaches the controller and its
command the simulator within the same cycle (both run at Δt, the controller answers in well
under a millisecond), so the cross-process runs see the same sequence of commands unless the
machine delays a message by a whole cycle (then the simulator applies the command a step later,
as ``command_jitter`` models). The errors are those of the plant's *true* state against the
trajectory, x(c_0 + k) − x_d(k) for the k-th tick, c_0 the cycle of tick 0.

The arm rests at its initial pose for ``settle_cycles`` cycles (the controller idle, receiving
joint states), then tracking starts and runs N + ``hold_cycles`` ticks. ``feedback=False`` in the
options gives the feed-forward-only run (the same commands u_d(k+d) without K): "open loop".

``python -m marionette_control.cli.track_offline`` runs it from the command line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from marionette_control.control.controller_core import ControllerCore, ControllerOptions, make_core
from marionette_control.control.simulated_hardware import HardwareProfile, SimulatedArm
from marionette_control.control.trajectory import Trajectory

NS = 1_000_000_000


@dataclass
class LoopResult:
    """One offline run (arrays over the ticks k = 0 … n−1 of the run).

    k : (n,) tick index; X_true : (n, nx) the plant's true state at each tick's measurement;
    X_hat : (n, nx) the controller's estimate x̂_k; X_ref : (n, nx) x_d(k) (the final state past N);
    commands : (n, nU) the commands sent at the ticks; fault_counts, status : the core's at the end;
    profile : the hardware profile; options : the controller options; dynamic_names : names of the
    dynamic configurations; N : the trajectory's steps; aborted : a tolerance ended tracking early.
    """

    k: np.ndarray
    X_true: np.ndarray
    X_hat: np.ndarray
    X_ref: np.ndarray
    commands: np.ndarray
    fault_counts: dict
    status: tuple
    profile: HardwareProfile
    options: ControllerOptions
    dynamic_names: list
    N: int
    aborted: bool

    def angle_errors(self, upto_end: bool = True) -> np.ndarray:
        """(n, nd) true dynamic configurations minus x_d(k) (rad); over k <= N when ``upto_end``."""
        nd = len(self.dynamic_names)
        sel = self.k <= self.N if upto_end else slice(None)
        return (self.X_true[sel, :nd] - self.X_ref[sel, :nd])

    def estimator_errors(self) -> np.ndarray:
        """(n, nx) x̂_k − x_k: the estimate against the plant's true state."""
        return self.X_hat - self.X_true

    def summary(self) -> dict:
        """{name: {rms_deg, max_deg}} of every dynamic configuration over the trajectory (k <= N)."""
        e = np.degrees(self.angle_errors())
        return {n: {"rms_deg": float(np.sqrt(np.mean(e[:, i] ** 2))), "max_deg": float(np.max(np.abs(e[:, i])))}
                for i, n in enumerate(self.dynamic_names)}


def run_loop(trajectory: Trajectory, profile: HardwareProfile, options: Optional[ControllerOptions] = None,
             desc=None, settle_cycles: int = 20, hold_cycles: int = 50, core: Optional[ControllerCore] = None,
             q0: Optional[np.ndarray] = None) -> LoopResult:
    """Tracks ``trajectory`` on the simulated arm of ``profile`` with the controller of ``options``.

    desc : the nominal model description (default: ``config/marionette_arm.yaml``); the controller and the
        trajectory use its model, the arm's plant is the profile's.
    core : a ready ControllerCore (trajectory loaded, idle) instead of one built from ``options``.
    q0 : the arm's initial configuration (default: the trajectory's first one, settled on the plant).
    Raises RuntimeError when the controller refuses to start (the message says why).
    """
    from marionette_control.models import marionette_arm as arm

    desc = desc if desc is not None else arm.load_description()
    options = options or ControllerOptions()
    if core is None:
        core = make_core(desc, options)
        core.load_trajectory(trajectory, "offline")
    model = desc.model
    nq, nu = model.nq, model.nu
    sim = SimulatedArm(profile, trajectory.dt, nominal=desc,
                       q0=trajectory.X[0, :nq] if q0 is None else q0)
    dt_ns = int(round(trajectory.dt * NS))
    stamp = NS  # the clocks' origin is arbitrary; 1 s keeps stamps positive

    def cycle():
        nonlocal stamp
        q = sim.measure()
        x_true = sim.true_state()
        res = core.on_joint_state(q, stamp, stamp)
        if res.command is not None:
            sim.receive_command(res.command[nu:])
        sim.step()
        stamp += dt_ns
        return res, x_true

    for _ in range(settle_cycles):
        cycle()
    ok, message = core.start()
    if not ok:
        raise RuntimeError(f"the controller did not start: {message}")
    rows = []
    n_ticks = trajectory.N + 1 + hold_cycles
    while len(rows) < n_ticks:
        res, x_true = cycle()
        if res.kind == "tick":
            rows.append((res.k, x_true, res.x_hat, res.x_ref, res.command))
        elif not core.running:
            break  # aborted (a tolerance): the status says why
        elif stamp > NS + (settle_cycles + 4 * n_ticks) * dt_ns:
            break  # holding on a fault that does not clear
    if not rows:
        raise RuntimeError(f"no tick was computed: {core.status()[1]}")
    k, X_true, X_hat, X_ref, U = (np.array(a) for a in zip(*rows))
    return LoopResult(k.astype(int), X_true, X_hat, X_ref, U, dict(core.fault_counts), core.status(), profile,
                      options, list(model.config_names[:model.nd]), trajectory.N, core.aborted)
