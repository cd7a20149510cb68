"""Makes test/data/golden/: the golden bag of a simulator + controller run and the trajectory it tracked.

    .venv/bin/python test/data/make_golden_bag.py [--out test/data/golden] [--attempts 3] [--keep-logs DIR]

1. Optimizes ``golden/trajectory_spec.yaml`` (a 2 s lift of the marionette arm's forearm from
   the lowered pose and back) into ``golden/trajectory.npz``, with the tracking gains the
   controller's default design gives for one step of command delay
   (``marionette_control.lq.gains``).
2. On an isolated ROS graph (private ROS_DOMAIN_ID, localhost discovery) starts the recorder
   (``marionette_control.cli.bag_record``, on simulated time) and then the simulator and the
   controller through ``marionette_bringup --sim --sim-time`` (the launch files' node set), the
   simulator on its default ``realistic`` profile (plant model error, one period of command
   delay, drives within their limits, encoder counts and noise), the controller with its
   defaults (one step of delay compensated, Kalman filter, plausibility checks, tolerances) and
   ``trajectory_file`` = that trajectory.
3. Configures the controller (its lifecycle ``configure``: the command and ``~/tracking``
   publishers exist from then on); once the recorder records ``/joint_states``, ``/clock``, the
   controller's commands and its ``~/tracking``, calls ``/marionette_controller/start`` and waits
   until the trajectory has been tracked to its end plus 0.3 s of holding; then stops the recorder
   (SIGINT: clean close) and the nodes.
4. Checks the bag before accepting it: the deterministic offline replay
   (``marionette_control.bags.replay``) reproduces every recorded command to 1e-9 and every
   recorded tick, no fault was raised, and the bag is at most 2 MB; otherwise tries again.

The bag's metadata ``custom_data`` names the trajectory file (relative to ``golden/``) with its
SHA-256 and the controller parameters the replay needs.

Why the golden bag was re-recorded (issue 12): the control law changed — the controller now
compensates the command delay of ros2_control (prediction through the commands in flight, gains
indexed k + d), estimates the state with a Kalman filter that takes the measured drive positions
as inputs, and clamps commands to the drives' acceleration limits too — and the hardware
stand-in now has a realistic default (a plant other than the model, delay, noise), which this
recording exercises; a recording of the old law against the ideal arm could no longer be
reproduced by the new tick logic.

Why it was re-recorded again (issue 13): the controller's ``~/tracking`` topic changed type, from a
std_msgs/Float64MultiArray with its labels packed in a string to marionette_interfaces/TrackingState
(header stamp, tick, desired, estimated, error, the command as sent with its joint names, active
faults), and the replay tools read the recorded ticks from it; the control law is unchanged.

And again (issue 14): TrackingState gained the run, the plan in effect and the plans' counts
(receding-horizon re-planning, docs/mpc.md), so a bag with the old definition no longer decodes
as the current message; without plans the control law is unchanged.

And again (issue 12, integral action): the control law changed — the gains' design record now asks for
integral action on the measured arm angles (``angle_integral``), which the controller adds to the law
(``marionette_control.tracking.integral_action``), the default gains are designed with it and a larger
drive-acceleration weight, and the Kalman filter's joint measurement noise is 2 mrad — so the commands
recorded with the previous law are no longer what the controller computes from the same joint states.
The simulator now steps in lock-step with the controller (``lockstep_timeout``, docs/simulator.md), as the main
job's does: recorded without it on this loaded machine, commands that acted a cycle late made the new law's
last 0.2 s of the 2 s lift stray 14–19 cm from the feed-forward on the carriage (docs/tracking.md, "Not done
here"), and the bag-replay fault tests' runs, which compare final commands with the recording's, could not
settle on the same final hold within the 0.3 s recorded after the end.

And again (issue 12, the fused tick, merged with the integral action): the controller computes each tick
with the Kalman filter, the integral included, in one native call (``_core.TickKernel``,
tracking/native_tick.py) instead of the Python parts one by one. The law is the same (test_tick_kernel.py
holds the two to 1e-12 over closed loops), but its products round like Eigen's, not numpy's, and a replay
cannot absorb even that: the replayed joint states do not answer the commands, so a difference in a command
in flight grows by ~1.7× per tick through the prediction of the next ones (1e-16 became 1.4e-6 over the
last 40 ticks of a recording), where the recorded commands must be reproduced bit for bit.

And again (issue 24, a controller that never commands a slack string and starts smoothly): the feedback is faded
in over a run's first 0.5 s (``start_blend``, tracking/start_blend.py) and a command whose predicted string tension
falls below its floor is moved onto it (the tension guard, tracking/tension_guard.py), so the commands differ
from the first one on.

And again (issue 24, the elbow swings): the integral action leaves out a tick's error when its term would push the
command further along what the drives' limits or the guard cut off the last one (anti-windup,
tracking/integral_action.py); the run's first commands are clamped while the drives catch up with the plan, so the
commands differ from the fourth one on (by up to 4.5 mm).

And again (issue 28, the batch loops solve each step at its known solution): ``linearize_trajectory`` evaluates the
step once at the next state it is given, with the multipliers from the DEL residual, instead of re-solving it by a
Newton step from there; A and B along the trajectory, from which the Kalman gains are computed, change by 1e-12,
and a relative change of 1e-13 in them alone already moves a replayed command by 4 mm at tick 66.

And again (issue 28, a cheaper linearization): the second derivatives of gravity and of the kinetic energy come
from the body Jacobian (its Lie brackets instead of the placements' and the Jacobian's own derivative recursion),
the implicit derivatives from the explicit inverse of the Newton matrix; the same exact derivatives, rounded
otherwise (1e-15 relative in A, B and the multipliers' derivatives of the tick's linearization), and the replay
grows that by ~1.5x per tick from tick 44 on (4.5 mm by tick 90).

And again (issue 24, three times the encoder noise): the Kalman filter's drive-encoder noise
(``estimator_noise.actuator``) is 1e-4 m instead of 1e-5 (docs/tracking.md, "Issue 24's two dips"); its gains
change, and the live replay's controller, started with the default parameters, computed tick 1 5e-8 m off the
recording.

And again (issue 24, the elbow swings with three times the encoder noise): while the drive encoders confirm the
command record, the Kalman filter ends its last step at the record's drive positions instead of the measured ones
(tracking/estimation.py), so the estimates and the commands differ from the third command on (by up to 4.7 mm
replayed against the old recording).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))

from marionette_control.bags.bagio import bag_info  # noqa: E402
from marionette_control.nodes.bag_recorder import RecorderProcess  # noqa: E402
from marionette_control.bags.replay import (  # noqa: E402
    COMMANDS, CUSTOM_TRAJECTORY, CUSTOM_TRAJECTORY_SHA256, JOINT_STATES, TRACKING, ReplayConfig, compare_commands,
    file_sha256, recorded_commands, recorded_ticks, replay_bag)

TOPICS = [JOINT_STATES, "/clock", COMMANDS, TRACKING]
MAX_BYTES = 2 * 1024 * 1024
TOLERANCE = 1e-9
SPEC = """\
# Golden-bag trajectory (test/data/make_golden_bag.py): the marionette arm lifts its forearm from the
# lowered pose (0°, 35°) to (10°, 60°) and back in 2 s, optimized from a constant-input initial trajectory.
description: golden bag - marionette arm, 2 s forearm lift and back
model: marionette_arm
dt: 0.01
motion:
  joints: [shoulder, elbow]
  angle_unit: deg
  interpolation: cosine
  keyframes:
    - [0.0, 0.0, 35.0]
    - [0.3, 0.0, 35.0]
    - [1.0, 10.0, 60.0]
    - [1.7, 0.0, 35.0]
    - [2.0, 0.0, 35.0]
  momenta: zero
initial_state:
  consistent: [carriage, string_length]
  equilibrium: true
initial_trajectory:
  method: simulate
weights:
  state: {default: 0.01, shoulder: 100, elbow: 100}
  input: {default: 0.01}
optimizer:
  schedule: [[quasi_newton, 4], [newton, null]]
  tolerance: 1.0e-6
  max_iterations: 30
  deadline: 120
"""


def say(text: str) -> None:
    print(f"[golden] {text}", flush=True)


def optimize(out: Path) -> Path:
    from marionette_control import _core
    from marionette_control.lq.gains import GainDesign, design_gains
    from marionette_control.trajectory import Trajectory
    from marionette_control.model.library import marionette_arm as arm

    spec = out / "trajectory_spec.yaml"
    spec.write_text(SPEC)
    traj = out / "trajectory.npz"
    subprocess.run([sys.executable, "-m", "marionette_control.cli.optimize", str(spec), "-o", str(traj),
                    "--progress", "quiet"], check=True, cwd=ROOT)
    t = Trajectory.load(traj)
    system = _core.DiscreteSystem(arm.load_description().model, t.dt)
    design_gains(system, t.X, t.U, GainDesign(delay_steps=1)).attach(t).save(traj)
    return traj


def isolated_env() -> dict:
    env = dict(os.environ)
    env["ROS_DOMAIN_ID"] = str(200 + os.getpid() % 30)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env.pop("ROS_STATIC_PEERS", None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


#: wall seconds the simulator waits for the command answering a joint state (docs/simulator.md)
LOCKSTEP_TIMEOUT = 1.0


def node_processes(traj: Path, config: ReplayConfig, env: dict) -> dict:
    """{node name: argv} of the simulator and the controller, exactly as ``marionette_bringup --sim --sim-time``
    starts them (the launch files' node set), with the overrides of this run."""
    from marionette_control.cli import bringup

    args = bringup.build_parser().parse_args([
        "--sim", "--sim-time", "--only", "marionette_simulator", "marionette_controller",
        "-p", f"marionette_controller:trajectory_file:={traj}", "-p", "marionette_controller:autostart:=false",
        "-p", f"marionette_controller:state_timeout:={config.state_timeout}",
        "-p", f"marionette_controller:stamp_tolerance:={config.stamp_tolerance}",
        "-p", "marionette_simulator:profile:=realistic",
        # lock-step (docs/simulator.md): the command timing is the profile's however loaded the machine
        "-p", f"marionette_simulator:lockstep_timeout:={LOCKSTEP_TIMEOUT}"])
    return {spec.name: spec.argv for spec in bringup.child_specs(args).specs}


def _stop(proc: subprocess.Popen, timeout: float = 15.0) -> int:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode


def record_run(work: Path, traj: Path, env: dict, config: ReplayConfig, n_steps: int) -> Path:
    """One recorded run into work/bag; returns the bag path.

    Order: recorder, then the nodes; start tracking once the recorder has every topic; after the
    end, stop the simulator first (no more joint states or /clock, so the controller falls silent
    on simulated time), then the recorder (which drains what was delivered), then the controller.
    """
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from std_srvs.srv import Trigger

    from marionette_interfaces.msg import TrackingState

    bag = work / "bag"
    custom = [f"{CUSTOM_TRAJECTORY}=trajectory.npz", f"{CUSTOM_TRAJECTORY_SHA256}={file_sha256(traj)}"]
    custom += [f"{k}={v}" for k, v in config.custom_data().items()]
    extra = ["--use-sim-time", "--flush-interval", "0.5"] + [a for c in custom for a in ("--custom", c)]
    rec = RecorderProcess(bag, TOPICS, extra, env=env, log_path=work / "recorder.log").start()
    procs = {}
    for name, argv in node_processes(traj, config, env).items():
        log = open(work / f"{name}.log", "w")
        procs[name] = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       start_new_session=True, cwd=ROOT)
        log.close()
    saved = {k: os.environ.get(k) for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")}
    os.environ.update({k: env[k] for k in saved})
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("golden_bag_maker", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    ticks = []
    node.create_subscription(TrackingState, TRACKING, lambda m: ticks.append(m.tick),
                             QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE))
    start = node.create_client(Trigger, "/marionette_controller/start")
    change_state = node.create_client(ChangeState, "/marionette_controller/change_state")
    code = None
    try:
        if not change_state.wait_for_service(timeout_sec=20.0):
            raise RuntimeError("no /marionette_controller/change_state service")
        fut = change_state.call_async(ChangeState.Request(transition=Transition(id=Transition.TRANSITION_CONFIGURE)))
        executor.spin_until_future_complete(fut, timeout_sec=10.0)
        if not (fut.done() and fut.result().success):
            raise RuntimeError("the controller's configure transition failed")
        if not rec.wait_recording(TOPICS, timeout=40.0):
            raise RuntimeError(f"the recorder did not get every topic:\n{rec.output()}")
        if not start.wait_for_service(timeout_sec=20.0):
            raise RuntimeError("no /marionette_controller/start service")
        executor.spin_once(timeout_sec=1.0)  # let the start-up load settle before tracking
        fut = start.call_async(Trigger.Request())
        executor.spin_until_future_complete(fut, timeout_sec=10.0)
        if not (fut.done() and fut.result().success):
            raise RuntimeError(f"start failed: {fut.result() if fut.done() else 'no answer'}")
        say(f"started: {fut.result().message}")
        end = time.monotonic() + 60.0
        while time.monotonic() < end and (not ticks or ticks[-1] < n_steps + 30):
            executor.spin_once(timeout_sec=0.05)
        if not ticks or ticks[-1] < n_steps + 30:
            raise RuntimeError(f"the controller did not reach tick {n_steps + 30} (last {ticks[-1:]})")
        _stop(procs["marionette_simulator"])
        time.sleep(0.5)
    finally:
        executor.shutdown()
        node.destroy_node()
        context.try_shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        for name in ("marionette_simulator",):
            _stop(procs[name])
        code = rec.stop(signal.SIGINT)
        for p in procs.values():
            _stop(p)
    if code != 0:
        raise RuntimeError(f"recorder exit status {code}:\n{rec.output()}")
    return bag


def check(bag: Path, traj: Path) -> str:
    """Raises RuntimeError unless the bag is a valid golden bag; returns a summary."""
    size = sum(f.stat().st_size for f in bag.iterdir())
    if size > MAX_BYTES:
        raise RuntimeError(f"bag is {size} bytes > {MAX_BYTES}")
    res = replay_bag(bag, traj)
    cmp = compare_commands(res.commands(), recorded_commands(bag), TOLERANCE)
    if not cmp.ok:
        raise RuntimeError(f"replay does not reproduce the recorded commands: {cmp.describe()}")
    ticks = recorded_ticks(bag)
    mine = [(e.stamp_ns, e.k) for e in res.ticks]
    if mine != [(t.stamp_ns, t.k) for t in ticks]:
        raise RuntimeError("replayed ticks (stamp, k) differ from the recorded ~/tracking")
    if res.faults_raised() or res.holds or res.fault_counts:
        raise RuntimeError(f"faults in the golden run: {res.faults_raised()[:3]}")
    info = bag_info(bag)
    counts = ", ".join(f"{t} {v.count}" for t, v in info.topics.items())
    return f"{size} bytes, {info.duration:.2f} s, {counts}; {cmp.describe()}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(HERE / "golden"), help="output directory (default test/data/golden)")
    p.add_argument("--attempts", type=int, default=3)
    p.add_argument("--keep-logs", help="copy the node logs of the last attempt here")
    args = p.parse_args(argv)
    out = Path(args.out)
    with tempfile.TemporaryDirectory(prefix="golden-") as tmp:
        tmp = Path(tmp)
        stage = tmp / "golden"
        stage.mkdir()
        traj = optimize(stage)
        from marionette_control.trajectory import Trajectory

        n_steps = Trajectory.load(traj).N
        say(f"optimized {traj.name}: {n_steps} steps")
        # every parameter that shapes the commands is recorded (the node's defaults), so the replay does not
        # depend on defaults that may change later
        from marionette_control.model.library import marionette_arm as arm
        from marionette_control.tracking.controller_options import controller_param_defaults, core_values

        fixed = {"state_timeout", "stamp_tolerance"}
        config = ReplayConfig(parameters={k: v for k, v in core_values(controller_param_defaults(
            arm.load_description())).items() if k not in fixed})
        env = isolated_env()
        last_error = None
        for attempt in range(1, args.attempts + 1):
            work = tmp / f"attempt{attempt}"
            work.mkdir()
            try:
                bag = record_run(work, traj, env, config, n_steps)
                # the bag lives beside the trajectory in the output (custom_data refers to it relatively)
                final_bag = stage / "bag"
                if final_bag.exists():
                    shutil.rmtree(final_bag)
                shutil.copytree(bag, final_bag)
                # rosbags named the MCAP after the recording directory 'bag': unchanged by the copy
                summary = check(final_bag, traj)
                say(f"attempt {attempt}: accepted: {summary}")
                break
            except RuntimeError as e:
                last_error = e
                say(f"attempt {attempt} failed: {e}")
            finally:
                if args.keep_logs:
                    Path(args.keep_logs).mkdir(parents=True, exist_ok=True)
                    for f in work.glob("*.log"):
                        shutil.copy(f, Path(args.keep_logs) / f.name)
                    if (work / "bag").is_dir():
                        shutil.rmtree(Path(args.keep_logs) / "bag", ignore_errors=True)
                        shutil.copytree(work / "bag", Path(args.keep_logs) / "bag")
        else:
            say(f"giving up after {args.attempts} attempts: {last_error}")
            return 1
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(stage, out)
        say(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
