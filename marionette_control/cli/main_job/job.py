"""Main job: the whole loop on the simulated marionette arm, closed loop against feed-forward only.

    python -m marionette_control.cli.main_job [--out DIR] [--motion wave] [--profile realistic|perfect]
                                          [--plant FILE] [--seed N] [--push T [--push-force N] [--mpc [rti]]] [--calibrate]
                                          [--real-time-factor X] [--no-bag] [--timeout S]

Starts the simulator, optimizer and controller as separate processes (the bringup's ``--sim`` node set),
a second controller with its feedback switched off (``marionette_controller_feedforward``, ``feedback:
false``: the same feed-forward u_d(k+d), checks and limits, no gains) and a bag recorder; requests the
8-second wave from the optimizer's service; then runs the motion on the simulated arm once per run, the
simulator reset to its initial rest state before each (so every run starts from the same state):

``closed_loop``
    the controller with its gains;
``open_loop``
    the feed-forward-only controller;
``push_lqr`` (with ``--push T``)
    the controller with its gains (the LQR alone), the forearm pushed T seconds into the motion through the
    simulator's ``~/disturb`` (``offline_loop.scripted_push``: a 0.1 s half sine of ``--push-force`` N,
    default 0.6, in the arm's plane on ``forearm_inertial``; docs/mpc.md);
``push_mpc`` (with ``--push T --mpc``)
    the same push with receding-horizon re-planning: ``marionette_mpc`` (the bringup's ``--mpc``) plans for a
    controller of its own, ``marionette_controller_mpc``, which takes its plans (docs/mpc.md). The other
    controllers take none. With ``--mpc rti`` the planner re-plans at every tick (a real-time iteration, its
    ``method`` 'rti') in the process of that controller (:mod:`marionette_control.nodes.replanning`) instead.

``--calibrate`` closes the sim-to-real loop (docs/calibration.md): before the motion, the identification motion
(``config/motions/identify.yaml``) is optimized and tracked closed loop with a bag recorder of its own
(``identify_bag/``); after the runs, the nominal model file is calibrated from that bag
(:mod:`marionette_control.identification`, with the links' masses as a scale reads them: :mod:`.calibration`) into
``calibrated_model.yaml``, and a second node graph whose optimizer and controllers read that file re-optimizes the
motion (gains included) and tracks it closed loop and feed-forward only on the same stand-in, the closed loop's
Kalman filter trusting the calibrated model as far as the fit's standard errors say
(:mod:`marionette_control.identification.model_error`); with ``--push`` (and ``--mpc``) it repeats the pushed runs
there, the planner on the calibrated model as well (docs/mpc.md, "Plans on the calibrated model").

The hardware stand-in is the simulator's ``realistic`` profile by default (docs/simulator.md: its own plant
model, one period of command delay, servo drives, encoder counts and noise); ``--profile perfect`` is the
nominal model without any of these, where every run tracks exactly; ``--plant FILE`` replaces the profile's plant
model file (e.g. ``plants/damping_x3.yaml``, docs/simulator.md's plant family). The controllers compensate the profile's
command delay and the optimizer designs the gains it ships for that delay (docs/tracking.md). Every node runs
on the simulator's clock, and the simulator steps in lock-step with the controller (:data:`LOCKSTEP_TIMEOUT`):
a loaded machine slows the run down instead of delaying commands past their step, so the command timing is
exactly the profile's; the report gives the simulator's waits and time-outs per run.

Errors are the simulator's *true* angles (``~/true_joint_states``, never the controller's estimate) against
the optimized trajectory at every tick. Output in ``--out`` (default ``out/main/<time>/``):

* ``report.json`` / ``report.md`` — ``tracking.closed_loop`` and ``tracking.open_loop`` ({joint: {rms_deg,
  max_deg}}), issue 12's targets and which are met, every run's errors (also against the animator's motion),
  faults and controller timing, the executed constraint margins (commands and true drives against range,
  speed and acceleration, the plant's string tension against its minimum) next to the optimizer's, the
  optimization statistics, the simulated hardware (``simulated_hardware``) and what the simulator reported;
  with ``--push``: ``push`` and ``push_recovery.lqr_s`` (with ``--mpc`` also ``mpc_s``: seconds from the push
  until the arm stays within 1° of the motion to its end; null if never, an aborted run included); with
  ``--mpc``: ``mpc`` (the planner's method, update times — with ``rti`` also its preparations' —, updates, plans
  published, switched to and rejected, and the tick compute p99 of the re-planned and of the LQR-only run);
* ``angles.png`` (thesis Fig. 6.10: desired, optimized, closed- and open-loop true angles and errors),
  ``actuators.png`` (Fig. 6.11: drive positions, speeds and accelerations with their limits, the plant's string
  tension with its minimum); with ``--push``: ``push_error.png``, ``push_angles.png``, ``push_actuators.png``
  (the push runs: LQR only, and with ``--mpc`` re-planned);
* ``bag/`` (the recording), ``trajectory.npz`` (the optimized trajectory with its gains), ``logs/``;
* with ``--calibrate``: ``report.json``'s ``calibration`` (``parameters.<name>``: {nominal, estimate, std, truth,
  identifiable} in SI units, the truth the plant file's; ``tracking.<nominal|calibrated>.<closed_loop|open_loop>
  .<joint>.rms_deg`` and their ratios; the identification run, the fit, the calibrated optimization; with
  ``--push``: ``push_recovery`` as above and ``push_string_tension`` {run: {string: {lowest_N, minimum_N, ...}}}
  of the calibrated graph's pushed runs), the
  identification bag and trajectory, ``calibrated_model.yaml``, ``trajectory_calibrated.npz``,
  ``calibrated_angles.png`` and the second graph's logs (``logs/calibrated/``).

Nothing is retried silently: each request is sent once, and when the loop cannot run the job stops with the
node, what it reported last on ``/diagnostics`` and where the logs are (exit status 1). A process that exits,
a refused start, a controller that stops ticking (:data:`STALL_S` without a tick) or aborts on a tolerance
ends the job that way. ROS isolation (:func:`ros_graph`): a private domain id unless ``ROS_DOMAIN_ID`` is set, and
traffic on this machine (LOCALHOST) unless ``ROS_AUTOMATIC_DISCOVERY_RANGE`` is set; ``report.json``'s ``ros``
says which. Exit status 0 when every run tracked and the report was written.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from marionette_control.bags.summary import format_summary, summarize
from marionette_control.cli.common import stop_process_group
from marionette_control.cli.main_job import analysis as A
from marionette_control.cli.main_job import calibration as C
from marionette_control.cli.main_job import figures as F
from marionette_control.cli.main_job.observer import (
    COMMANDS,
    JOINT_STATES,
    OPTIMIZER,
    SIMULATOR,
    TRUE_STATES,
    MainJobError,
    Observer,
)
from marionette_control.cli.main_job.report import write_report
from marionette_control.cli.ros_isolation import (
    ISOLATION_VARIABLES,
    claim_domain_id,
    isolated_env,
)
from marionette_control.identification.excitation import MARGINS
from marionette_control.identification.parameters import ModelParameters
from marionette_control.model import library
from marionette_control.model.library import marionette_arm as arm
from marionette_control.model.limits import from_description
from marionette_control.model.motion import desired_states, load_motion
from marionette_control.model.yaml_model import load_packaged_model
from marionette_control.nodes.bag_recorder import RecorderProcess
from marionette_control.nodes.convert import disturb_request, trajectory_from_msg
from marionette_control.ocp.mpc_options import METHODS
from marionette_control.resources import config_file
from marionette_control.sim.offline_loop import recovery_time, scripted_push
from marionette_control.sim.plant import load_plant
from marionette_control.sim.profile import HardwareProfile
from marionette_interfaces.srv import Disturb, OptimizeTrajectory

CLOSED = "marionette_controller"
FEEDFORWARD = "marionette_controller_feedforward"
REPLANNED = "marionette_controller_mpc"
PLANNER = "marionette_mpc"
RECORDED = [JOINT_STATES, COMMANDS, TRUE_STATES, f"/{CLOSED}/tracking", f"/{FEEDFORWARD}/tracking",
            f"/{REPLANNED}/tracking", "/diagnostics", f"/{OPTIMIZER}/trajectory"]
NO_PLANS = "''"  # an empty plan_topic (rcl refuses "name:="): a controller that takes no plans
#: the simulator waits, before each step, for the command answering its last joint state (its lock-step,
#: ``lockstep_timeout`` wall seconds at most), so the command timing is the profile's however loaded the machine.
#: The lock-step engages once commands flow, so a run's first commands are paced only: the clock runs at half
#: real time, which leaves a controller 20 ms per step for them. Paced like a hardware driver at real time, a
#: 2-core machine doing other work delays commands past their step (jitter the simulated hardware does not
#: have): here 38 of the closed loop's first 352 commands were late and it aborted on the path tolerance.
REAL_TIME_FACTOR = 0.5
#: with re-planning, a quarter of real time: the planner's deadline is the tick its plan is due at on the
#: simulator's clock, so this gives an update four times the wall time it has on the robot (35 ms there), which
#: the update right after a push needs on two cores shared with the simulator, three controllers and the recorder
MPC_REAL_TIME_FACTOR = 0.25
LOCKSTEP_TIMEOUT = 1.0
SETTLE_STEPS = 50    # simulator steps after a reset before a run starts (the controllers see the arm at rest)
REST_TOLERANCE = 1e-4  # rad or m: how far a true position may move while the arm rests after a reset
RESET_ATTEMPTS = 3
HOLD_S = 0.5         # a run tracks this long past the trajectory's end (the final state held)
STALL_S = 5.0        # s without a new tick while tracking: the job stops and says why
READY_S = 30.0       # s for joint states to arrive and for a controller to take the trajectory
PUSH_LEAD_S = 0.5    # a push is requested this long (motion time) before it acts


def say(msg: str) -> None:
    print(f"[main] {msg}", flush=True)


@dataclass(frozen=True)
class RunSpec:
    """One run: its name, the controller node that tracks, whether it has feedback, the push time (None: none)."""

    name: str
    controller: str
    feedback: bool
    push_time: Optional[float] = None


def run_plan(push_time: Optional[float], mpc: Optional[str]) -> list[RunSpec]:
    runs = [RunSpec("closed_loop", CLOSED, True), RunSpec("open_loop", FEEDFORWARD, False)]
    if push_time is not None:
        runs.append(RunSpec("push_lqr", CLOSED, True, push_time))
        if mpc:
            runs.append(RunSpec("push_mpc", REPLANNED, True, push_time))
    return runs


# ============================================================================ processes


class Processes:
    """The processes of one job (name, Popen, log); :meth:`dead` names one that exited, with its log's tail."""

    def __init__(self, logs: Path, env: dict):
        self.logs, self.env = logs, env
        self.procs: list[tuple[str, subprocess.Popen, Path]] = []

    def start(self, name: str, args: list) -> subprocess.Popen:
        log = self.logs / f"{name}.log"
        with open(log, "w") as out:  # (the child keeps its own copy of the descriptor)
            p = subprocess.Popen([sys.executable, "-m", *args], env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True)
        self.procs.append((name, p, log))
        say(f"started {name} (pid {p.pid}, log {log})")
        return p

    def dead(self) -> Optional[str]:
        for name, p, log in self.procs:
            if p.poll() is not None:
                tail = log.read_text(errors="replace").strip().splitlines()[-6:] if log.exists() else []
                return (f"process '{name}' exited with status {p.returncode} (log {log}); its last lines:\n  "
                        + "\n  ".join(tail))
        return None

    def stop_all(self) -> None:
        for _, p, _ in reversed(self.procs):
            stop_process_group(p)


def command_lines(profile: str, delay: int, real_time_factor: float, out: Path, record: bool, mpc: Optional[str],
                  motion: str, plant: Optional[str] = None, model_file: Optional[str] = None,
                  seed: Optional[int] = None, estimator_momentum: Optional[float] = None) -> list[tuple[str, list]]:
    """[(name, ``python -m`` arguments)] of the job's processes: bringup --sim on the simulator's clock (simulator on
    ``profile``, its plant ``plant`` and its noise ``seed`` when given, optimizer
    saving into ``out`` and designing its gains for the command delay, controller compensating it, taking no plans;
    with ``mpc`` 'receding_horizon' the planner, planning for the re-planned controller), the feed-forward-only
    controller, with ``mpc`` the re-planned controller — with 'rti' in one process with its planner
    (:mod:`marionette_control.nodes.replanning`) —, and the bag recorder. ``model_file``: the model file of the optimizer, the
    controllers, the planner and the simulator's nominal model (default: theirs, ``config/marionette_arm.yaml``; the simulator's
    gives its joint names and the drives' positions at the initial pose, where the controllers' model holds the arm
    at rest: the start of their trajectories). The planner plans on the optimizer's problem for a request of
    ``motion`` (its ``motion`` parameter, ``ocp/mpc_options.planning_problem``): the problem of the optimum the job
    requests and tracks. ``estimator_momentum``: the closed-loop controller's ``estimator_noise.momentum`` (a
    calibration's, :mod:`marionette_control.identification.model_error`; default: its configured one)."""

    # the planner on the default scheduler, not niced: in lock-step no load delays a command, while a niced planner
    # on a machine busy with other jobs fell a whole second behind (its estimates too old to plan from)
    planner = ["--mpc", "-p", f"{PLANNER}:tracking_topic:=/{REPLANNED}/tracking", "-p", f"{PLANNER}:nice:=0",
               "-p", f"{PLANNER}:idle_scheduling:=false", "-p", f"{PLANNER}:motion:={motion}"] \
        if mpc == "receding_horizon" else []
    plant_args = ["-p", f"{SIMULATOR}:plant_model_file:={plant}"] if plant else []
    plant_args += ["-p", f"{SIMULATOR}:seed:={seed}"] if seed is not None else []
    on_model = ["-p", f"model_file:={model_file}"] if model_file else []
    bringup_nodes = (OPTIMIZER, CLOSED, SIMULATOR) + ((PLANNER,) if mpc == "receding_horizon" else ())
    model_args = [a for node in bringup_nodes for a in ("-p", f"{node}:model_file:={model_file}")] \
        if model_file else []
    model_args += ["-p", f"{CLOSED}:estimator_noise.momentum:={estimator_momentum:.6e}"] \
        if estimator_momentum is not None else []
    lines = [("bringup", ["marionette_control.cli.bringup", "--sim", "--use-sim-time",
                          "--real-time-factor", str(real_time_factor), *planner, *plant_args, *model_args,
                          "-p", f"{CLOSED}:plan_topic:={NO_PLANS}",
                          "-p", f"{SIMULATOR}:profile:={profile}",
                          # no RViz markers: nobody looks at them here, and their messages load the machine
                          "-p", f"{SIMULATOR}:marker_rate:=0.0",
                          "-p", f"{SIMULATOR}:lockstep_timeout:={LOCKSTEP_TIMEOUT}",
                          "-p", f"{OPTIMIZER}:save_directory:={out.resolve()}",
                          "-p", f"{OPTIMIZER}:tracking_gains.delay_steps:={delay}",
                          "-p", f"{CLOSED}:command_delay_steps:={delay}"])]
    controllers = {FEEDFORWARD: ["-p", "feedback:=false", "-p", f"plan_topic:={NO_PLANS}", *on_model]}
    if mpc:
        controllers[REPLANNED] = ["-p", f"plan_topic:=/{PLANNER}/plan", *on_model]
    for name, params in controllers.items():
        module, rename = "marionette_control.nodes.controller", f"__node:={name}"
        if name == REPLANNED and mpc == "rti":   # the planner in the controller's process: rename the controller only
            module, rename = "marionette_control.nodes.replanning", f"{CLOSED}:__node:={name}"
            params = [*params, "-p", f"tracking_topic:=/{name}/tracking", "-p", f"motion:={motion}"]
        lines.append((name, [module, "--ros-args", "--params-file", str(config_file("controller.yaml")), "-r", rename,
                             "-p", f"command_delay_steps:={delay}", "-p", "use_sim_time:=true", *params]))
    if record:
        lines.append(("recorder", ["marionette_control.cli.bag_record", "-o", str(out / "bag"), *RECORDED]))
    return lines


# ============================================================================ the job's steps


def wait_for_joint_states(obs: Observer) -> None:
    if not obs.spin_until(lambda: len(obs.joint_state_times) >= 10, READY_S):
        raise MainJobError(f"no joint states on {JOINT_STATES} within {READY_S:.0f} s; {obs.describe(SIMULATOR)}")
    say(f"joint states arriving on {JOINT_STATES} from {SIMULATOR}")


def optimize(obs: Observer, motion: str, model, timeout: float, save_path: str = "trajectory.npz",
             reserve: Optional[dict] = None):
    """The optimizer's answer (trajectory and statistics) to the motion's request, saved as ``save_path`` in the
    job's directory; ``reserve`` {range, speed, acceleration}: the fractions of the drive limits the request keeps
    in reserve (default: the optimizer's)."""

    t0 = time.monotonic()
    req = OptimizeTrajectory.Request(motion_name=motion, model_id=model.name, save_path=save_path)
    for family, fraction in (reserve or {}).items():
        setattr(req.options, f"{family}_margin", float(fraction))
    say(f"requesting the '{motion}' optimization from /{OPTIMIZER}/optimize ...")
    res = obs.call(obs.optimize, req, timeout, "optimization",
                   progress=lambda: say(f"  optimizing ... {time.monotonic() - t0:.0f} s"))
    if not res.success:
        raise MainJobError(f"optimization failed: {res.message}; {obs.describe(OPTIMIZER)}")
    traj = trajectory_from_msg(res.trajectory)
    traj.check_model(model)
    conv = res.convergence
    say(f"optimized in {conv.iterations} iterations ({conv.elapsed_s:.1f} s), cost {res.trajectory.cost:.5g}: "
        f"{res.message}")
    stats = {"iterations": int(conv.iterations), "cost": float(res.trajectory.cost), "converged": bool(conv.converged),
             "reason": conv.termination_reason, "elapsed_s": float(conv.elapsed_s), "methods": list(conv.methods),
             "message": res.message, "constraints_satisfied": bool(res.constraints_satisfied)}
    constraints = [{"label": c.label, "worst_margin": c.worst_margin, "unit": c.unit, "time_s": c.time_s,
                    "satisfied": c.satisfied, "active_steps": c.active_steps} for c in res.constraints]
    return traj, stats, constraints


def make_ready(obs: Observer, controller: str) -> None:
    """Configures a controller (it subscribes to the joint states and takes the optimizer's latched trajectory
    once the arm is at its start) and waits until it has the trajectory; says precisely why not."""
    obs.transition(controller, "configure")

    def ready():
        st = obs.status(controller)
        return st is not None and st[3].get("lifecycle_state") == "inactive" and st[3].get("state") == "idle"

    if not obs.spin_until(ready, READY_S):
        silent = obs.joint_states_silent_for()
        raise MainJobError(
            f"{controller} did not take the optimized trajectory within {READY_S:.0f} s: {obs.describe(controller)}; "
            f"{obs.describe(SIMULATOR)}"
            + ("" if silent is None or silent < 1.0 else f"; no joint state arrived here for {silent:.1f} s"))


def reset_arm(obs: Observer) -> int:
    """Resets the simulated arm to rest at its initial pose and waits SETTLE_STEPS of its steps; the index of the
    first true state after the reset (:meth:`Observer.truth_moved`)."""
    res = obs.trigger(obs.reset, "simulator reset")
    if not res.success:
        raise MainJobError(f"{SIMULATOR} refused the reset: {res.message}")
    seen = len(obs.truth)
    if not obs.spin_until(lambda: len(obs.truth) >= seen + SETTLE_STEPS, READY_S):
        raise MainJobError(f"no true states from {SIMULATOR} after its reset; {obs.describe(SIMULATOR)}")
    return seen


def prepare(obs: Observer, controller: str) -> None:
    """The arm reset to rest and ``controller`` ready with the trajectory (:func:`make_ready`). The controller of
    the run before sent its hold command as it stopped; on a loaded machine that command can reach the simulator
    after the reset and move the drives back to where that run ended (seen once: the carriage 3 cm from the next
    run's start, which its controller then refused). An arm that moved while it should have rested was moved by
    such a command: the reset is done again (at most RESET_ATTEMPTS times, each said)."""
    since = reset_arm(obs)
    make_ready(obs, controller)
    for attempt in range(RESET_ATTEMPTS):
        moved = obs.truth_moved(since)
        if moved <= REST_TOLERANCE:
            return
        say(f"  the arm moved {moved:.4f} (rad or m) after the reset: a command still in flight from the last run "
            f"reached the simulator; resetting again ({attempt + 1} of {RESET_ATTEMPTS})")
        since = reset_arm(obs)
    raise MainJobError(f"the arm does not rest after {RESET_ATTEMPTS + 1} resets (it moved {moved:.4f} rad or m): "
                       f"something keeps commanding it; {obs.describe(SIMULATOR)}")


def request_push(obs: Observer, stamp0_ns: int, push, dt: float) -> dict:
    """Schedules a scripted push (``offline_loop.Push``) at its tick on the simulator's clock (tick 0 stamped
    ``stamp0_ns``); what it scheduled."""

    at = stamp0_ns + push.tick * int(round(dt * 1e9))
    res = obs.call(obs.disturb, disturb_request(push, at, Disturb.Request), 10.0, "push")
    if not res.success:
        raise MainJobError(f"{SIMULATOR} refused the push: {res.message}")
    say(f"  push scheduled: {res.message}")
    return {"body": push.body, "profile": push.profile, "force": list(push.force), "duration": push.duration,
            "time_s": round(push.tick * dt, 9), "tick": push.tick, "message": res.message,
            "total_impulse": [res.total_impulse.x, res.total_impulse.y, res.total_impulse.z]}


def track(obs: Observer, spec: RunSpec, N: int, dt: float, model, push_force: Optional[float],
          recorder: Optional[RecorderProcess] = None):
    """One run (reset, start, track to N + hold, stop); its RunData. ``recorder``: a bag recorder started once the
    arm rests at the start (after the reset) and stopped when the run ends: the run's own bag."""
    say(f"run '{spec.name}' ({spec.controller}, feedback {'on' if spec.feedback else 'off'}): resetting the arm ...")
    prepare(obs, spec.controller)
    if recorder is not None:
        recorder.start()
        if not recorder.wait_recording():
            raise MainJobError(f"run '{spec.name}': the bag recorder did not subscribe to {', '.join(recorder.topics)} "
                               f"(log {recorder.log_path}): {recorder.output()[-500:]}")
        say(f"  recording {recorder.path}")
    if spec.controller == REPLANNED and not obs.spin_until(lambda: obs.values(PLANNER).get("motion"), READY_S):
        raise MainJobError(f"{PLANNER} has no motion to re-plan after {READY_S:.0f} s: {obs.describe(PLANNER)}")
    scripted = (None if spec.push_time is None else scripted_push(spec.push_time, dt) if push_force is None
                else scripted_push(spec.push_time, dt, push_force))
    ticks = obs.tracking[spec.controller]
    ticks.clear()
    t_from = time.time()
    faults_before = obs.fault_counts(spec.controller)
    # (nothing was commanded since the last run's counts were read)
    lockstep_before = {k: obs.counter(SIMULATOR, f"lockstep_{k}") for k in ("waits", "timeouts")}
    res = obs.trigger(obs.start[spec.controller], f"{spec.controller} start")
    if not res.success:
        raise MainJobError(f"{spec.controller} refused to start: {res.message}; {obs.describe(spec.controller)}; "
                           f"{obs.describe(SIMULATOR)}")
    end = N + int(round(HOLD_S / dt))
    push, aborted = None, False
    started = last = (-1, time.monotonic())

    def state():
        nonlocal last, push, aborted
        k = ticks[-1].tick if ticks else -1
        if k != last[0]:
            last = (k, time.monotonic())
        if scripted is not None and push is None and ticks and k >= scripted.tick - PUSH_LEAD_S / dt:
            first = ticks[0]
            stamp0 = first.header.stamp.sec * 1_000_000_000 + first.header.stamp.nanosec - first.tick * int(
                round(dt * 1e9))
            push = request_push(obs, stamp0, scripted, dt)
        st = obs.status(spec.controller)
        if st is not None and st[0] > started[1] and st[3].get("state") == "aborted":
            aborted = True
        return k >= end or aborted

    def progress():
        if ticks:
            r = ticks[-1]
            say(f"  tracking k = {r.tick}/{N}  |x - x_d| = {r.error_norm:.2e}  tick {1e6 * r.compute_time:.0f} us")

    while not obs.spin_until(state, 1.0):
        progress()
        if time.monotonic() - last[1] > STALL_S:
            silent = obs.joint_states_silent_for()
            raise MainJobError(
                f"run '{spec.name}': {spec.controller} published no tick for {STALL_S:.0f} s (last tick "
                f"{last[0]} of {N}); {obs.describe(spec.controller)}; {obs.describe(SIMULATOR)}"
                + ("" if silent is None else f"; last joint state arrived here {silent:.1f} s ago"))
    t_to = time.time()
    now = time.monotonic()
    lockstep = {k: (None if v is None or (after := obs.counter(SIMULATOR, f"lockstep_{k}", newer_than=now)) is None
                    else after - v) for k, v in lockstep_before.items()}
    message = ""
    if aborted:
        message = f"run '{spec.name}': {spec.controller} aborted tracking at tick {last[0]}: " \
                  f"{obs.describe(spec.controller)}"
        say(f"  {message}")
    else:
        obs.trigger(obs.stop[spec.controller], f"{spec.controller} stop")
        say(f"  tracked to tick {last[0]} ({N} steps + {HOLD_S:g} s held)")
    if recorder is not None and recorder.stop() != 0:
        raise MainJobError(f"run '{spec.name}': the bag recorder exited with status {recorder.returncode} (log "
                           f"{recorder.log_path})")
    data = obs.run_data(spec.name, spec.controller, spec.feedback, model, t_from, t_to, push, aborted,
                        faults_before, lockstep)
    data.message = message
    if spec.controller == REPLANNED:
        data.planner = obs.values(PLANNER, newer_than=now)
        data.plans["rejected_by_reason"] = {k[len("plans.rejected."):]: int(v) for k, v in
                                            obs.values(spec.controller, newer_than=now).items()
                                            if k.startswith("plans.rejected.") and v.isdigit() and int(v)}
    # unconfigured, a controller leaves the joint states alone: only the running one loads the machine
    obs.transition(spec.controller, "cleanup")
    return data


# ============================================================================ evaluation


def push_recoveries(pushed: dict, N: int, dt: float) -> dict:
    """{run name: seconds from the push until the arm stays within 1° of the motion (None: never, or aborted)} of
    the evaluated pushed runs ``pushed`` {name: Evaluated}."""
    return {n: None if e.run.aborted else recovery_time(e.k, e.errors, e.run.push["tick"], N, dt)
            for n, e in pushed.items()}


def evaluate_runs(runs: dict, traj, model, X_des, limits, delay: int, out: Path, report: dict) -> None:
    """Errors, margins, recovery and figures of the runs into ``report`` and ``out``."""

    nd, dt, N = model.nd, traj.dt, traj.N
    names = list(model.config_names[:nd])

    ev = {name: A.evaluate(r, traj.X, dt, nd, limits) for name, r in runs.items()}
    report["tracking"] = {n: A.error_summary(ev[n].errors, names) for n in ("closed_loop", "open_loop")}
    report["targets"] = A.issue_targets(report["tracking"]["closed_loop"], report["tracking"]["open_loop"])
    report["runs"], executed = {}, {}
    for name, e in ev.items():
        r = e.run
        _, err_des = A.angle_errors(X_des, e.k, e.q, nd)
        executed[name] = A.executed_margins(e, limits, delay, N)
        report["runs"][name] = {
            "controller": r.controller, "feedback": r.feedback, "ticks": int(r.k.size),
            "ticks_with_true_state": int(e.k.size), "ticks_with_faults": r.fault_ticks, "aborted": r.aborted,
            "vs_optimized": A.error_summary(e.errors, names), "vs_desired": A.error_summary(err_des, names),
            "faults": r.faults, "lockstep": r.lockstep,
            "string_tension_min_start_n": A.start_tension(e),
            "tick_compute": A.stats(r.compute_us, "us"),
            "joint_state_to_command_latency": A.stats(r.latency_ms, "ms")}
    report["constraint_margins"]["executed"] = executed
    closed = runs["closed_loop"]
    report["controller"] = {"tick_compute": A.stats(closed.compute_us, "us"),
                            "joint_state_to_command_latency": A.stats(closed.latency_ms, "ms")}
    hw = report["simulated_hardware"]["name"]
    F.plot_angles({"closed loop": ev["closed_loop"], "feed-forward only": ev["open_loop"]}, names, traj.X, X_des, dt,
                  out / "angles.png", f"{report['motion']} on the simulated arm ({hw} profile): "
                  "closed loop vs feed-forward only")
    F.plot_actuators({"closed loop": ev["closed_loop"], "feed-forward only": ev["open_loop"]}, model, limits, traj.X,
                     dt, delay, out / "actuators.png", f"drives and string on the simulated arm ({hw} profile)")
    report["files"].update(angles_plot=str(out / "angles.png"), actuators_plot=str(out / "actuators.png"))
    pushed = {n: e for n, e in ev.items() if e.run.push is not None}
    if pushed:
        push = next(iter(pushed.values())).run.push
        recovery = push_recoveries(pushed, N, dt)
        report["push"] = push
        report["push_recovery"] = {f"{n[len('push_'):]}_s": r for n, r in recovery.items()}
        if "push_mpc" in runs:
            report["mpc"] = mpc_statistics(runs["push_mpc"], runs["push_lqr"])
        labels = {"push_lqr": "LQR only", "push_mpc": "MPC (re-planned)"}
        t_push = push["time_s"]
        F.plot_push_error({labels.get(n, n): e for n, e in pushed.items()}, t_push,
                          {labels.get(n, n): r for n, r in recovery.items()}, out / "push_error.png",
                          f"after a push at {t_push:g} s ({push['profile']} {push['force']} N, {push['duration']:g} s "
                          f"on {push['body']})")
        F.plot_angles({labels.get(n, n): e for n, e in pushed.items()}, names, traj.X, X_des, dt,
                      out / "push_angles.png", f"arm angles after a push at {t_push:g} s")
        F.plot_actuators({labels.get(n, n): e for n, e in pushed.items()}, model, limits, traj.X, dt, delay,
                         out / "push_actuators.png", f"drives and string after a push at {t_push:g} s")
        report["files"].update(push_error_plot=str(out / "push_error.png"), push_angles_plot=str(out / "push_angles.png"),
                               push_actuators_plot=str(out / "push_actuators.png"))


def mpc_statistics(run, lqr_run) -> dict:
    """``report.json``'s ``mpc``: the planner's method, update times (wall clock: prediction, optimization, gains;
    with 'rti' the feedback step, its preparations apart in ``prepare_ms``; the thread's CPU time in
    ``update_cpu_ms``) and outcomes, the plans the controller
    switched to and rejected in the re-planned run, and the tick compute time's p99 [µs] of the re-planned run
    and of the LQR-only run ``lqr_run`` (its controller in a process without a planner)."""
    p = run.planner

    def number(key):
        try:
            return float(p[key])
        except (KeyError, ValueError):
            return None

    return {"method": p.get("method", "receding_horizon"),
            "update_ms": {q: number(f"update_ms.{q}") for q in ("median", "p99", "max")},
            "update_cpu_ms": {q: number(f"update_cpu_ms.{q}") for q in ("median", "p99", "max")},
            "prepare_ms": {q: number(f"prepare_ms.{q}") for q in ("median", "p99", "max")},
            "tick_compute_p99_us": {"replanned": A.stats(run.compute_us, "us").get("p99"),
                                    "lqr_only": A.stats(lqr_run.compute_us, "us").get("p99")},
            "updates": int(number("updates") or 0), "published": int(number("plans_published") or 0),
            "outcomes": {k[len("updates."):]: int(v) for k, v in p.items() if k.startswith("updates.") and v.isdigit()},
            "switched": run.plans.get("switched"), "rejected": run.plans.get("rejected"),
            "rejected_by_reason": run.plans.get("rejected_by_reason", {})}


# ============================================================================ the job


def ros_graph(environ) -> dict:
    """The environment of the job's nodes: the user's ``ROS_DOMAIN_ID`` when set (e.g. to watch the job from
    rviz), else a private domain no other process on this machine holds (a simulated arm's ``/joint_states``
    must never reach another graph — the real arm's controller on the default domain — nor another job's
    requests this one); localhost discovery unless ``ROS_AUTOMATIC_DISCOVERY_RANGE`` is set."""
    env = dict(environ)
    if env.get("ROS_DOMAIN_ID", "").strip():
        env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        env["PYTHONUNBUFFERED"] = "1"
        return env
    range_ = env.get("ROS_AUTOMATIC_DISCOVERY_RANGE")
    env = isolated_env(claim_domain_id(), env)
    if range_:
        env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = range_
    return env


#: the simulator's /diagnostics counters a report gives
SIMULATOR_COUNTERS = ("time_base_reanchors", "steps", "achieved_real_time_factor", "commands_accepted",
                      "commands_rejected", "lockstep_waits", "lockstep_timeouts", "commands_saturated", "step_errors",
                      "disturbances")
#: the identification motion (config/motions/identify.yaml) the job records for ``--calibrate``
IDENTIFY = "identify"
#: with ``--calibrate``, every optimization (the identification motion, the motion on the nominal and on the
#: calibrated model) keeps the identification motion's reserve of the drive limits for the feedback: at the drives'
#: acceleration limit from its first step, the wave's start outruns the stand-in's drives by up to 3 cm, a transient
#: feed-forward alone never corrects and that would hide what the calibration changes (docs/calibration.md)
CALIBRATION_RESERVE = dict(MARGINS)


@dataclass
class GraphRuns:
    """What one node graph did: the motion's optimized trajectory (``traj``) with its ``optimization`` statistics and
    ``constraints`` margins, the ``runs`` {name: RunData}, the ``simulator``'s counters, the joint states and
    commands the observer received; with the identification run, ``identification`` {trajectory, optimization,
    run, bag}."""

    traj: object
    optimization: dict
    constraints: list
    runs: dict
    simulator: dict
    joint_states: int
    commands: int
    identification: Optional[dict] = None


def run_graph(args, env: dict, out: Path, logs: Path, model, plan: list, delay: int, record: bool,
              mpc: Optional[str],
              plant: Optional[str] = None, model_file: Optional[str] = None, identify: bool = False,
              save_path: str = "trajectory.npz", estimator_momentum: Optional[float] = None) -> GraphRuns:
    """Starts the node graph (:func:`command_lines`: the simulator's ``plant``, the nodes' ``model_file``, the
    closed-loop controller's ``estimator_momentum``), with
    ``identify`` first records the identification run (:func:`identification_run`), then optimizes ``args.motion``
    and tracks it once per run of ``plan``; stops the graph."""
    logs.mkdir(parents=True, exist_ok=True)
    procs = Processes(logs, env)
    obs = None
    try:
        say(f"starting simulator ({args.profile} profile{', plant ' + plant if plant else ''}, real-time "
            f"factor {args.real_time_factor:g}), optimizer and controllers"
            + (f" on {model_file}" if model_file else "") + " ...")
        for name, command in command_lines(args.profile, delay, args.real_time_factor, out, record, mpc, args.motion,
                                           plant, model_file, args.seed, estimator_momentum):
            procs.start(name, command)
        obs = Observer(list(dict.fromkeys(spec.controller for spec in plan)), alive=procs.dead)
        wait_for_joint_states(obs)
        reserve = CALIBRATION_RESERVE if args.calibrate else None
        identification = identification_run(obs, env, out, logs, model, args.timeout, reserve) if identify else None
        traj, optimization, constraints = optimize(obs, args.motion, model, args.timeout, save_path, reserve)
        runs = {spec.name: track(obs, spec, traj.N, traj.dt, model, args.push_force) for spec in plan}
        st = obs.status(SIMULATOR)
        simulator = {k: st[3].get(k) for k in SIMULATOR_COUNTERS} if st else {}
        return GraphRuns(traj, optimization, constraints, runs, simulator, len(obs.joint_state_times),
                         len(obs.commands), identification)
    finally:
        if obs is not None:
            obs.close()
        procs.stop_all()


def identification_run(obs: Observer, env: dict, out: Path, logs: Path, model, timeout: float,
                       reserve: Optional[dict] = None) -> dict:
    """The identification motion optimized (``identify_trajectory.npz``) and tracked closed loop with a bag recorder
    of its own (``identify_bag/``: the joint states and commands, from the arm at rest before the start to the end
    of the run); {trajectory, optimization, constraints, run, bag}. MainJobError when the run aborts."""
    traj, optimization, constraints = optimize(obs, IDENTIFY, model, timeout, "identify_trajectory.npz", reserve)
    bag = out / "identify_bag"
    recorder = RecorderProcess(bag, [JOINT_STATES, COMMANDS], env=env, log_path=logs / "identify_recorder.log")
    run = track(obs, RunSpec("identification", CLOSED, True), traj.N, traj.dt, model, None, recorder)
    if run.aborted:
        raise MainJobError(f"the identification run aborted: {run.message}")
    return {"trajectory": traj, "optimization": optimization, "constraints": constraints, "run": run, "bag": bag}


def calibrate_and_track(args, env: dict, out: Path, hardware: HardwareProfile, first: GraphRuns, delay: int, limits,
                        nominal_tracking: dict) -> dict:
    """``--calibrate`` after the nominal runs: calibrates the nominal model file from the identification bag
    (:mod:`.calibration`: the links' masses weighed), writes ``calibrated_model.yaml``, and on a new node graph with
    that model file re-optimizes the motion (gains included) and tracks it closed loop — its Kalman filter's model
    noise the calibration's (``fit.estimator_noise``) — and feed-forward only; ``report.json``'s ``calibration``.
    With ``--push`` (and ``--mpc``) the pushed runs are repeated there, the planner on the calibrated model as well:
    ``calibration.push_recovery``."""
    ident = first.identification
    nominal = ModelParameters(config_file(arm.CONFIG_FILE))
    plant = ModelParameters(config_file(hardware.plant_model_file)) if hardware.plant_model_file else nominal
    weighed = C.weighed_masses(plant)
    say(f"calibrating {arm.CONFIG_FILE} from {ident['bag']} (the links weighed: "
        + ", ".join(f"{n} {w['reading']:.4f} kg ± {w['std'] * 1e3:g} g" for n, w in weighed.items()) + ") ...")
    t0 = time.monotonic()
    cal, fit, variant = C.calibrate_bag(nominal, ident["bag"], ident["trajectory"].dt, weighed,
                                        out / "calibrated_model.yaml")
    say(f"calibrated in {time.monotonic() - t0:.0f} s (chi^2/dof {fit['chi2_per_dof']:.3g}): wrote {variant}")
    model = load_packaged_model(variant.resolve()).model
    # the plant named explicitly: the profile's, or with none (perfect) the nominal model, not the calibrated one
    second = run_graph(args, env, out, out / "logs" / "calibrated", model, run_plan(args.push, args.mpc), delay,
                       record=False, mpc=args.mpc, plant=hardware.plant_model_file or arm.CONFIG_FILE,
                       model_file=str(variant.resolve()), save_path="trajectory_calibrated.npz",
                       estimator_momentum=fit["estimator_noise"]["momentum"])
    nd, dt = model.nd, second.traj.dt
    names = list(model.config_names[:nd])
    ev = {n: A.evaluate(r, second.traj.X, dt, nd, limits) for n, r in second.runs.items()}
    calibrated = {n: A.error_summary(ev[n].errors, names) for n in ("closed_loop", "open_loop")}
    _, X_des = desired_states(model, load_motion(config_file("motions", f"{args.motion}.yaml")), dt)
    F.plot_angles({"closed loop": ev["closed_loop"], "feed-forward only": ev["open_loop"]}, names, second.traj.X,
                  X_des, dt, out / "calibrated_angles.png", f"{args.motion} on the calibrated model "
                  f"({hardware.name} profile): closed loop vs feed-forward only")
    run = ident["run"]
    ev_ident = A.evaluate(run, ident["trajectory"].X, dt, nd, limits)
    pushed = {n: e for n, e in ev.items() if e.run.push is not None}
    push = {"push_recovery": {f"{n[len('push_'):]}_s": r for n, r in push_recoveries(pushed, second.traj.N,
                                                                                   dt).items()},
            "push_string_tension": {n: A.executed_margins(e, limits, delay, second.traj.N)["motion"]["string_tension"]
                                    for n, e in pushed.items()}} if pushed else {}
    return {
        "plant_model_file": hardware.plant_model_file or None, "bag": str(ident["bag"]), "model_file": str(variant),
        "weighed": weighed,
        "weighed_note": f"the plant's link masses as a scale reads them: the plant file's value plus an error drawn "
                        f"from N(0, ({C.SCALE_STD * 1e3:g} g)^2) with the fixed seed {C.SCALE_SEED}, given to the "
                        "calibrator with that uncertainty; the calibrator never reads the plant file (truth: for "
                        "this report only)",
        "identification": {"optimization": ident["optimization"], "constraints": ident["constraints"],
                           "tracking": A.error_summary(ev_ident.errors, names), "faults": run.faults,
                           "ticks": int(run.k.size), "executed": A.executed_margins(ev_ident, limits, delay,
                                                                                     ident["trajectory"].N)},
        "fit": {k: v for k, v in fit.items() if k != "parameters"},
        "parameters": C.parameter_record(cal, plant),
        "tracking": C.tracking_record(nominal_tracking, calibrated),
        "targets": A.issue_targets(calibrated["closed_loop"], calibrated["open_loop"]),
        "optimization": second.optimization, "constraints": second.constraints, **push,
        "runs": {n: {"aborted": r.aborted, "faults": r.faults, "ticks": int(r.k.size), "lockstep": r.lockstep,
                     "message": r.message, "pushed": r.push is not None} for n, r in second.runs.items()},
        "simulator": second.simulator,
        "files": {"trajectory": str(out / "trajectory_calibrated.npz"), "angles_plot": str(out / "calibrated_angles.png"),
                  "identify_trajectory": str(out / "identify_trajectory.npz")},
    }


def run(args) -> dict:
    out = args.out
    (out / "logs").mkdir(parents=True, exist_ok=True)
    env = ros_graph(os.environ)
    os.environ.update({k: env[k] for k in ISOLATION_VARIABLES})
    say(f"ROS graph: domain {env['ROS_DOMAIN_ID']}, discovery {env['ROS_AUTOMATIC_DISCOVERY_RANGE']}")
    model = library.get("marionette_arm")
    overrides = {"plant_model_file": args.plant, "seed": args.seed}
    hardware = HardwareProfile.named(args.profile, **{k: v for k, v in overrides.items() if v is not None})
    plant = load_plant(hardware, arm.load_description())
    limits = from_description(plant)
    delay = hardware.command_delay_steps
    plan = run_plan(args.push, args.mpc)
    report = {"started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "motion": args.motion,
              "simulated_hardware": hardware.as_dict(), "files": {},
              "ros": {k.lower(): env[k] for k in ISOLATION_VARIABLES}}
    first = run_graph(args, env, out, out / "logs", model, plan, delay, record=not args.no_bag, mpc=args.mpc,
                      plant=args.plant, identify=args.calibrate)
    traj, runs = first.traj, first.runs
    report["optimization"] = first.optimization
    report["constraint_margins"] = {"optimized": first.constraints}
    report["files"]["trajectory"] = str(out / "trajectory.npz")
    report["simulator"] = first.simulator
    report["joint_states_received"] = first.joint_states
    report["commands_received"] = first.commands
    say("evaluating the runs against the simulator's true state ...")
    _, X_des = desired_states(model, load_motion(config_file("motions", f"{args.motion}.yaml")), traj.dt)
    evaluate_runs(runs, traj, model, X_des, limits, delay, out, report)
    if not args.no_bag:
        report["files"]["bag"] = str(out / "bag")
        report["bag_complete"] = (out / "bag" / "metadata.yaml").exists()
        if report["bag_complete"]:

            report["bag_summary"] = format_summary(summarize(out / "bag"))
    write_report(report, out)
    failed = [r.message for r in runs.values() if r.aborted and r.push is None]
    if failed:
        raise MainJobError("; ".join(failed) + f" (report of what was recorded: {out / 'report.md'})")
    if args.calibrate:
        report["calibration"] = calibrate_and_track(args, env, out, hardware, first, delay, limits, report["tracking"])
        write_report(report, out)
        # a pushed run may abort (the LQR alone on its path tolerance): its recovery says so, as on the first graph
        failed = [r["message"] for r in report["calibration"]["runs"].values() if r["aborted"] and not r["pushed"]]
        if failed:
            raise MainJobError("; ".join(failed) + f" (report of what was recorded: {out / 'report.md'})")
    return report


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m marionette_control.cli.main_job", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    p.add_argument("--out", type=Path, default=Path("out") / "main" / stamp, help="report directory")
    p.add_argument("--motion", default="wave", help="named motion (config/motions/<name>.yaml), default wave")
    p.add_argument("--profile", choices=("realistic", "perfect"), default="realistic",
                   help="simulated hardware profile (docs/simulator.md), default realistic")
    p.add_argument("--push", type=float, metavar="T", help="also run the closed loop with a push T s into the motion")
    p.add_argument("--push-force", type=float, metavar="N", help="peak of the push's half sine [N], in the arm's "
                   "plane; default: offline_loop.scripted_push's (docs/mpc.md's push)")
    p.add_argument("--mpc", nargs="?", const=METHODS[0], choices=METHODS, metavar="METHOD",
                   help="also run the push with receding-horizon re-planning (marionette_mpc, docs/mpc.md): alone, "
                   "or 'receding_horizon', the 10 Hz planner in a process of its own; 'rti': a real-time iteration "
                   "every tick in the controller's process; needs --push")
    p.add_argument("--real-time-factor", type=float, metavar="X",
                   help="simulated seconds per wall-clock second (the simulator's clock; default "
                        f"{REAL_TIME_FACTOR:g}, with --mpc {MPC_REAL_TIME_FACTOR:g})")
    p.add_argument("--no-bag", action="store_true", help="do not record a bag")
    p.add_argument("--calibrate", action="store_true", help="also record the identification motion, calibrate the "
                   "nominal model from it, re-optimize and track the motion on the calibrated model "
                   "(docs/calibration.md)")
    p.add_argument("--plant", metavar="FILE", help="the simulator's plant model file (relative names under config/, "
                   "e.g. plants/damping_x3.yaml); default: the profile's")
    p.add_argument("--seed", type=int, help="the simulator's noise seed (encoders, jitter; -1: from the operating system); "
                   "default: the profile's")
    p.add_argument("--timeout", type=float, default=300.0, help="optimization timeout [s] (default 300)")
    args = p.parse_args(argv)
    if args.seed is not None and args.seed < -1:
        p.error(f"--seed must be an integer >= 0 (or -1: from the operating system), got {args.seed}")
    if args.push is not None and not args.push > 0:
        p.error(f"--push must be a time > 0 s into the motion, got {args.push}")
    if args.mpc and args.push is None:
        p.error("--mpc compares the recovery from a push with and without re-planning: give --push T as well")
    if args.real_time_factor is None:
        args.real_time_factor = MPC_REAL_TIME_FACTOR if args.mpc else REAL_TIME_FACTOR
    try:
        report = run(args)
    except MainJobError as e:
        say(f"error: {e} (logs in {args.out / 'logs'})")
        return 1
    for run_name, summary in report["tracking"].items():
        say(f"{run_name}: " + ", ".join(f"{j} RMS {v['rms_deg']:.3f}° (max {v['max_deg']:.2f}°)"
                                          for j, v in summary.items()))
    t = report["targets"]
    if t["open_to_closed_rms_ratio"] is not None:
        say(f"open/closed-loop RMS on the {t['worst_open_loop_joint']}: {t['open_to_closed_rms_ratio']:.2f}; targets "
            f"met: " + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in t["met"].items()))
    for name, r in report.get("push_recovery", {}).items():
        say(f"after the push ({name[:-2].upper()}): back within 1° {'never' if r is None else f'{r:.2f} s after it'}")
    if "mpc" in report:
        m = report["mpc"]
        tc = m["tick_compute_p99_us"]
        say(f"re-planning ({m['method']}): {m['updates']} updates (median {m['update_ms']['median']} ms, p99 "
            f"{m['update_ms']['p99']} ms), {m['published']} plans published, {m['switched']} switched to, "
            f"{m['rejected']} rejected; tick compute p99 {tc['replanned']:.0f} µs (LQR only: {tc['lqr_only']:.0f} µs)")
    missed = {n: r["lockstep"]["timeouts"] for n, r in report["runs"].items() if r["lockstep"]["timeouts"]}
    if missed:
        say("warning: the simulator stopped waiting for a command (" + ", ".join(f"{n}: {v}" for n, v in missed.items())
            + " time(s)): from there commands may have acted a step late, jitter the simulated hardware does not have")
    tc = report["controller"]["tick_compute"]
    say(f"controller tick compute: median {tc.get('median', float('nan')):.1f} µs, p99 {tc.get('p99', float('nan')):.1f} µs")
    if "calibration" in report:
        c = report["calibration"]
        for run_name in ("closed_loop", "open_loop"):
            say(f"{run_name}, nominal -> calibrated model: " + ", ".join(
                f"{j} RMS {c['tracking']['nominal'][run_name][j]['rms_deg']:.3f}° -> {v['rms_deg']:.3f}°"
                for j, v in c["tracking"]["calibrated"][run_name].items()))
        for name, r in c.get("push_recovery", {}).items():
            say(f"after the push on the calibrated model ({name[:-2].upper()}): back within 1° "
                f"{'never' if r is None else f'{r:.2f} s after it'}")
    say(f"report: {args.out / 'report.md'} (plots, bag, trajectory and logs beside it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
