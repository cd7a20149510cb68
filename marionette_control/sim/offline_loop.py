"""The controller in closed loop with the simulated arm, offline: tuning and evaluation without a ROS graph.

:func:`run_loop` runs the tick logic the ``marionette_controller`` node runs
(:class:`~marionette_control.tracking.controller.ControllerCore`, built by :func:`~marionette_control.tracking.controller.make_core` from the
same model file) against the hardware stand-in the ``marionette_simulator`` node runs
(:class:`~marionette_control.sim.simulator.SimulatedArm` with a :class:`~marionette_control.sim.profile.HardwareProfile`:
plant model, command delay, drives, encoders), cycle by cycle in the order of ros2_control's
loop::

    q_meas = arm.measure()                                    # joint state of cycle c, stamped t_c
    result = core.on_joint_state(q_meas, t_c, t_c)            # the controller's tick
    arm.receive_command(result.command)                       # if it sent one: received during cycle c
                                                              # (with its next points: joint_trajectory)
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

Scripted pushes (:class:`Push`: ``SimulatedArm.disturb`` at a tick) and receding-horizon
re-planning (``mpc``: a :class:`~marionette_control.ocp.mpc.RecedingHorizon`) compose into the same cycle. With
``mpc``, every ``period`` ticks, right after tick k, an update predicts the estimate x̂_k to the
step j = k + d + ``latency_steps`` its plan starts at (:func:`~marionette_control.ocp.mpc.predict_start`: the commands
in flight, then the controller's law) and re-optimizes; the plan arrives ``latency_steps`` cycles
later, before the sample of tick k + ``latency_steps``, whose command is the first for step j, and
is offered to the controller (:meth:`~marionette_control.tracking.controller.ControllerCore.offer_plan`) — as a planner
in another process that answers within its deadline::

    [plans due] → core.offer_plan(plan)                        # arrived during the previous cycle
    q_meas = arm.measure(); result = core.on_joint_state(...)  # tick k (a plan due takes over)
    [push due at tick k] → arm.disturb(...)
    [update due at tick k] → plan from x̂_k, due at cycle + latency_steps; then mpc.identify(k)
    arm.receive_command(...); arm.step()

With online identification (``MPCOptions.identify``) the planner is given every measured configuration
(``mpc.observe(q)``, before the tick) and fits after each update (when its ``identify_period`` is due); a model it
adopts is taken by the next update (:mod:`marionette_control.ocp.mpc`, "Online identification").

The plan's arrival is simulated time, so a run is reproducible; the update itself runs in wall
clock under its own deadline (``MPCOptions.deadline``; None: an iteration budget only, what the
tests use), and an update that overran it is not delivered (``deadline_missed``).

``python -m marionette_control.cli.track_offline`` runs it from the command line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from marionette_control.tracking.controller import ControllerCore, ControllerOptions, make_core
from marionette_control.model.library import marionette_arm as arm
from marionette_control.ocp.mpc import RecedingHorizon
from marionette_control.sim.margins import PARTS, executed_margins, start_tension
from marionette_control.sim.profile import HardwareProfile
from marionette_control.sim.simulator import SimulatedArm
from marionette_control.trajectory import Trajectory

NS = 1_000_000_000


@dataclass(frozen=True)
class Push:
    """A scripted push: ``SimulatedArm.disturb(body, profile, force, duration, impulse)`` right after tick
    ``tick`` (it acts from that tick's step on)."""

    tick: int
    body: str = "forearm_inertial"
    profile: str = "half_sine"
    force: tuple = (0.0, 0.0, 0.0)
    duration: float = 0.1
    impulse: tuple = (0.0, 0.0, 0.0)

    def apply(self, arm: SimulatedArm) -> None:
        arm.disturb(self.body, self.profile, force=self.force, duration=self.duration, impulse=self.impulse)


def scripted_push(t: float, dt: float, force: float = 0.6) -> Push:
    """The push of docs/mpc.md at ``t`` seconds into the motion (tick round(t/dt)): a 0.1 s half sine of ``force``
    N on the forearm's centre of mass, in the arm's plane (+y). 0.6 N: the LQR alone does not bring the wave back
    from it at 5.6 s, receding-horizon plans do in about 0.35 s; 0.5 N is about the largest it recovers from."""
    return Push(int(round(t / dt)), "forearm_inertial", "half_sine", force=(0.0, float(force), 0.0), duration=0.1)


def recovery_time(k: np.ndarray, errors: np.ndarray, tick: int, N: int, dt: float,
                  bound: float = math.radians(1.0)) -> Optional[float]:
    """Seconds from ``tick`` until every error stays within ``bound`` up to the motion's end N (0: it never left;
    None: not back by the end): the recovery time of a push at ``tick``. k (n,) ticks (increasing; missing ticks
    are unknown, not within bound), errors (n, m) the angle errors at them [rad] against the motion."""
    k = np.asarray(k)
    sel = (k >= tick) & (k <= N)
    ks = k[sel]
    out = np.any(np.abs(np.asarray(errors)[sel]) > bound, axis=1)
    if ks.size == 0 or ks[-1] < N:
        return None
    if not out.any():
        return 0.0
    last = int(ks[np.flatnonzero(out)[-1]])
    return None if last >= N else (last + 1 - tick) * dt


@dataclass
class LoopResult:
    """One offline run (arrays over the ticks k = 0 … n−1 of the run).

    k : (n,) tick index; X_true : (n, nx) the plant's true state at each tick's measurement;
    Q_measured : (n, nq) the joint state the controller read at each tick (the encoders': counts and noise); X_hat : (n, nx) the controller's estimate x̂_k; X_ref : (n, nx) x_d(k) (the final state past N);
    commands : (n, nU) the commands sent at the ticks; fault_counts, status : the core's at the end;
    profile : the hardware profile; options : the controller options; dynamic_names : names of the
    dynamic configurations; N : the trajectory's steps; aborted : a tolerance ended tracking early.
    dt : the time step; X_motion : (n, nx) the tracked trajectory's x_d(k); with re-planning X_ref is the
    reference of the plan in effect (without: X_motion); ``tension`` (n, strings) the plant's string tension
    over each tick's step [N] (``SimulatedArm.tension``: 0 while slack) and ``slack`` (n, strings) whether the
    string was slack over it (``SimulatedArm.slack``); ``guarded`` (n,) whether the tension guard moved the
    tick's command (``TickResult.guarded``); ``U_motion`` (N, nU) the tracked trajectory's inputs u_d;
    ``drive_names`` the kinematic configurations; ``mpc``: with re-planning, ``updates`` (each
    update's ``Update.to_dict``), the core's plan counts (``offered``, ``switched``, ``rejected`` by reason)
    and its ``last_rejection``.
    """

    k: np.ndarray
    X_true: np.ndarray
    Q_measured: np.ndarray
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
    dt: float
    X_motion: np.ndarray
    tension: np.ndarray
    slack: np.ndarray
    guarded: np.ndarray
    U_motion: np.ndarray
    drive_names: list
    mpc: dict = field(default_factory=dict)

    def angle_errors(self, upto_end: bool = True) -> np.ndarray:
        """(n, nd) true dynamic configurations minus the tracked trajectory's, x_d(k) (rad; the final state past N);
        over k <= N when ``upto_end``."""
        nd = len(self.dynamic_names)
        sel = self.k <= self.N if upto_end else slice(None)
        return self.X_true[sel, :nd] - self.X_motion[sel, :nd]

    def recovery_time(self, tick: int, bound: float = math.radians(1.0)) -> Optional[float]:
        """:func:`recovery_time` of this run's true angles from ``tick`` (None as well when tracking aborted)."""
        if self.aborted:
            return None
        return recovery_time(self.k, self.angle_errors(upto_end=False), tick, self.N, self.dt, bound)

    def estimator_errors(self) -> np.ndarray:
        """(n, nx) x̂_k − x_k: the estimate against the plant's true state."""
        return self.X_hat - self.X_true

    def summary(self) -> dict:
        """{name: {rms_deg, max_deg}} of every dynamic configuration over the trajectory (k <= N)."""
        e = np.degrees(self.angle_errors())
        return {n: {"rms_deg": float(np.sqrt(np.mean(e[:, i] ** 2))), "max_deg": float(np.max(np.abs(e[:, i])))}
                for i, n in enumerate(self.dynamic_names)}

    @property
    def abort_reason(self) -> str:
        """Why tracking ended early (the controller's status), or '' when it did not."""
        return self.status[1] if self.aborted else ""

    def margins(self, limits) -> dict:
        """The executed margins of the run (:func:`marionette_control.sim.margins.executed_margins`: the commands sent,
        the plant's true drive motion, its string's tension and time slack) during the motion (ticks and steps up
        to N) and after its end. limits : ModelLimits of the nominal model (the controller's)."""
        nd, nk = len(self.dynamic_names), len(limits.kinematic)
        return executed_margins(limits, self.dt, self.N, self.options.command_delay_steps, self.k,
                                self.commands[:, -nk:], self.k, self.X_true[:, nd:nd + nk], self.k, self.tension,
                                self.slack)

    def record(self, limits) -> dict:
        """The run as a report (``marionette-track-offline --json``): ``errors`` (:meth:`summary`), ``aborted``,
        ``abort_reason``, ``ticks``, and for ``motion`` and ``after_end``: ``tension_min_n`` (the plant's lowest
        string tension [N]), ``slack_s`` (time [s] a string was slack, the longest of the strings) and the executed
        ``margins`` (:meth:`margins`); ``tension_min_start_n`` (:meth:`start_tension`), ``guarded_ticks`` (the
        commands the tension guard moved) and ``commands`` (:meth:`commands_summary`: the feedback's share of the
        drives' acceleration). limits : ModelLimits of the nominal model."""
        margins = self.margins(limits)
        strings = {part: margins[part]["string_tension"].values() for part in PARTS}
        return {"errors": self.summary(), "aborted": bool(self.aborted), "abort_reason": self.abort_reason,
                "ticks": int(self.k.size),
                "tension_min_n": {p: min((s["lowest_N"] for s in v), default=None) for p, v in strings.items()},
                "slack_s": {p: max((s["slack_s"] for s in v), default=0.0) for p, v in strings.items()},
                "tension_min_start_n": self.start_tension(), "guarded_ticks": int(np.count_nonzero(self.guarded)),
                "commands": self.commands_summary(), "margins": margins}

    def acceleration_deviation(self) -> np.ndarray:
        """(m, nk) the commanded drive accelerations minus the plan's [m/s² or rad/s²], at the ticks k whose command
        and the two before it are of consecutive ticks within the motion: the command of tick k is ρ_{j+1}, j = k + d,
        its acceleration (ρ_{j+1} − 2ρ_j + ρ_{j−1})/Δt² from the commands of ticks k, k−1, k−2, the plan's from
        u_d(j), u_d(j−1), u_d(j−2) (the drives' positions one step ahead, thesis §3.6)."""
        d, N, nk = self.options.command_delay_steps, self.N, len(self.drive_names)
        rho, plan = self.commands[:, -nk:], self.U_motion[:, -nk:]
        i = np.flatnonzero((self.k[2:] - self.k[:-2] == 2) & (self.k[2:] >= 2 - d) & (self.k[2:] + d < N)) + 2
        j = self.k[i] + d
        a = (rho[i] - 2.0 * rho[i - 1] + rho[i - 2]) / self.dt ** 2
        return a - (plan[j] - 2.0 * plan[j - 1] + plan[j - 2]) / self.dt ** 2

    def commands_summary(self) -> dict:
        """{drive: {acceleration_deviation_rms, acceleration_deviation_max}} of :meth:`acceleration_deviation`: the
        high-frequency content the feedback adds to the plan's commands (encoder noise through the estimate and the
        gains; docs/tracking.md, "Quiet commands")."""
        dev = self.acceleration_deviation()
        return {n: {"acceleration_deviation_rms": float(np.sqrt(np.mean(dev[:, i] ** 2))) if len(dev) else 0.0,
                    "acceleration_deviation_max": float(np.max(np.abs(dev[:, i]))) if len(dev) else 0.0}
                for i, n in enumerate(self.drive_names)}

    def start_tension(self) -> Optional[float]:
        """The plant's lowest string tension [N] over the motion's first 0.1 s
        (:func:`marionette_control.sim.margins.start_tension`); None without a string."""
        sel = self.k <= self.N
        return start_tension(self.k[sel] * self.dt, self.tension[sel])


def run_loop(trajectory: Trajectory, profile: HardwareProfile, options: Optional[ControllerOptions] = None,
             desc=None, settle_cycles: int = 20, hold_cycles: int = 50, core: Optional[ControllerCore] = None,
             q0: Optional[np.ndarray] = None, pushes: Sequence[Push] = (),
             mpc: Optional[RecedingHorizon] = None, observers: Sequence = ()) -> LoopResult:
    """Tracks ``trajectory`` on the simulated arm of ``profile`` with the controller of ``options``.

    desc : the nominal model description (default: ``config/marionette_arm.yaml``); the controller and the
        trajectory use its model, the arm's plant is the profile's.
    core : a ready ControllerCore (trajectory loaded, idle) instead of one built from ``options``.
    q0 : the arm's initial configuration (default: the trajectory's first one, settled on the plant).
    pushes : scripted disturbances (module docstring).
    mpc : re-plan with this receding horizon (its motion must be ``trajectory``; module docstring), or with a
        :class:`~marionette_control.ocp.rti.RealTimeIteration` (the same interface: a plan after every tick, taken
        at the next); the plans' switch tolerance is ``options.switch_tolerance``.
    observers : callables given every joint state the controller receives, q (nq,) in model order, before its
        tick (e.g. an estimator of the plant's parameters from the run's own data, ``study/plant_model.py``).
    Raises RuntimeError when the controller refuses to start (the message says why).
    """
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
    pushes = {p.tick: p for p in pushes}
    d = core.delay
    if mpc is not None:
        if mpc.motion.X.shape != trajectory.X.shape or not np.array_equal(mpc.motion.X, trajectory.X):
            raise ValueError("the receding horizon re-plans another motion than the trajectory tracked")
        mpc.options.check_timing(trajectory.dt)
    latency = mpc.options.latency_steps if mpc is not None else 0
    in_transit: list = []   # (cycle at which it arrives, plan)
    updates = []
    cycles = 0

    def replan(k: int, x_hat: np.ndarray) -> None:
        tr = core.tracking
        up = mpc.update(k, x_hat, tr.history, tr.law, core.run, tr.limits, core.pending_plan)
        updates.append(up.to_dict())
        if up.plan is not None:
            in_transit.append((cycles + latency, up.plan))
        mpc.identify(k)   # between updates: a model the identification adopts is taken by the next

    def cycle():
        nonlocal stamp, cycles
        while in_transit and in_transit[0][0] <= cycles:
            core.offer_plan(in_transit.pop(0)[1])
        q = sim.measure()
        for observe in observers:
            observe(q)
        if mpc is not None:
            mpc.observe(q)
        x_true = sim.true_state()
        res = core.on_joint_state(q, stamp, stamp)
        if res.kind == "tick":
            if res.k in pushes:
                pushes[res.k].apply(sim)
            if mpc is not None and res.k % mpc.period == 0 and res.k + d + latency < trajectory.N:
                replan(res.k, res.x_hat)
        if res.lookahead is not None:   # joint_trajectory: the command and its next points, for steps c + d, …
            points = np.vstack([res.command[nu:], res.lookahead[:, nu:]])
            sim.receive_command(points, sim.k + d + np.arange(len(points)))
        elif res.command is not None and core.lookahead is not None:   # a hold: joint_trajectory's stop
            sim.receive_stop()
        elif res.command is not None:
            sim.receive_command(res.command[nu:])
        sim.step()
        stamp += dt_ns
        cycles += 1
        return res, q, x_true, sim.tension(), sim.slack()

    for _ in range(settle_cycles):
        cycle()
    ok, message = core.start()
    if not ok:
        raise RuntimeError(f"the controller did not start: {message}")
    rows = []
    n_ticks = trajectory.N + 1 + hold_cycles
    while len(rows) < n_ticks:
        res, q, x_true, tension, slack = cycle()
        if res.kind == "tick":
            ref = trajectory.X[min(res.k, trajectory.N)]
            rows.append((res.k, x_true, q, res.x_hat, res.x_ref, res.command, ref, tension, slack, res.guarded))
        elif not core.running:
            break  # aborted (a tolerance): the status says why
        elif stamp > NS + (settle_cycles + 4 * n_ticks) * dt_ns:
            break  # holding on a fault that does not clear
    if not rows:
        raise RuntimeError(f"no tick was computed: {core.status()[1]}")
    k, X_true, Q_meas, X_hat, X_ref, U, X_motion, T, slack, guarded = (np.array(a) for a in zip(*rows))
    record = {}
    if mpc is not None:
        record = {"updates": updates, **core.plan_counts, "rejected": dict(core.plan_rejections),
                  "last_rejection": core.plan_rejection, "options": mpc.options}
        if mpc.options.identify:
            record["identification"] = [{"tick": t, "adopted": a, "seconds": s} for t, a, s in mpc.identifications]
    return LoopResult(k.astype(int), X_true, Q_meas, X_hat, X_ref, U, dict(core.fault_counts), core.status(), profile,
                      options, list(model.config_names[:model.nd]), trajectory.N, core.aborted, trajectory.dt,
                      X_motion, T, slack, guarded.astype(bool), trajectory.U, list(model.config_names[model.nd:]),
                      record)
