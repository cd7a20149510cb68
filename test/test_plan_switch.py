"""Plan hand-over in the controller core: offered, scheduled, taken at its first step or refused, counted.

The core runs on the simulated arm (``perfect`` profile: the plant is the model, one step of command
delay, which the controller compensates), one cycle at a time, beside a second core that gets no plan:
a plan that is the motion's own window changes no command; a re-optimized plan (ocp/mpc.py) takes
over at its first step with the command it was made for and the drives' limits met without clamping;
every refusal leaves the commands exactly those of the plan the core has, and is counted by reason.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from marionette_control import _core
from marionette_control.model import library
from marionette_control.tracking.controller import ControllerOptions, make_core
from marionette_control.lq.gains import GAIN_DESIGN, GainDesign, design_gains
from marionette_control.ocp.mpc import MPCOptions, RecedingHorizon
from marionette_control.tracking.plan_switch import REJECTIONS, Plan, PlannedLaw, SwitchTolerance
from marionette_control.sim.profile import HardwareProfile
from marionette_control.sim.simulator import SimulatedArm
from marionette_control.tracking.law import TrackingLaw
from marionette_control.trajectory import Trajectory
from marionette_control.model.library import marionette_arm as ma

from arm_helpers import bump_trajectory, wave_motion

NS = 1_000_000_000


class Loop:
    """A controller core tracking ``traj`` on the simulated arm, one control cycle per :meth:`cycle` (the offline
    loop's cycle by hand: sample, tick, command, plant step)."""

    def __init__(self, traj: Trajectory, profile: str = "perfect", delay: int = 1):
        desc = ma.load_description()
        self.model = desc.model
        self.core = make_core(desc, ControllerOptions(command_delay_steps=delay))
        self.core.load_trajectory(traj, "motion")
        self.arm = SimulatedArm(HardwareProfile.named(profile, command_delay_steps=delay), traj.dt, nominal=desc,
                                q0=traj.X[0, :self.model.nq])
        self.stamp, self.dt_ns = NS, int(round(traj.dt * NS))
        for _ in range(5):
            self.cycle()
        assert self.core.start()[0]

    def cycle(self, skip: bool = False):
        """One cycle; ``skip``: the sample is lost (the arm steps on the command it has)."""
        res = None
        if not skip:
            q = self.arm.measure()
            res = self.core.on_joint_state(q, self.stamp, self.stamp)
            if res.command is not None:
                self.arm.receive_command(res.command[self.model.nu:])
        self.arm.step()
        self.stamp += self.dt_ns
        return res

    def tick(self):
        """Cycles until a tick; its result."""
        for _ in range(10):
            res = self.cycle()
            if res is not None and res.kind == "tick":
                return res
        raise AssertionError(f"no tick: {self.core.status()[1]}")


def window(traj: Trajectory, start: int, steps: int, run: int = 1, sequence: int = 1, **changes) -> Plan:
    """The plan that is ``traj``'s own window start … start + steps (its gains and their record)."""
    s = slice(start, start + steps)
    part = Trajectory.for_model(ma.load_description().model, traj.dt, traj.X[start:start + steps + 1], traj.U[s],
                                K=traj.K[s], t0=traj.t0 + start * traj.dt, info={GAIN_DESIGN: traj.info[GAIN_DESIGN]})
    return Plan(start, dataclasses.replace(part, **changes) if changes else part, run, sequence)


@pytest.fixture(scope="module")
def bump():
    """The bump with gains for one step of delay, without integral action: the controller suspends its integral
    while a plan is in effect (tracking/integral_action.py), so with it a plan that is the motion's own window would
    change the commands by the integral's term; the switching itself is what these tests are about."""
    ds, traj = bump_trajectory(0.01, 200)
    return design_gains(ds, traj.X, traj.U, GainDesign(angle_integral=0.0)).attach(traj)


def lockstep(traj, offers: dict, ticks: int, skip: tuple = (), profile: str = "perfect"):
    """Two loops in lockstep, one offered ``offers`` {tick after which: [plans]}; (plain results, planned results,
    planned loop). ``skip``: ticks whose sample the planned loop loses (both loops lose them); ``profile``: the
    simulated arm's (seeded: both loops see the same noise while their commands agree)."""
    plain, planned = Loop(traj, profile), Loop(traj, profile)
    a, b = [], []
    k = 0
    while len(b) < ticks:
        if k in skip:
            plain.cycle(skip=True), planned.cycle(skip=True)
            ra = rb = None
        else:
            ra, rb = plain.tick(), planned.tick()
            assert ra.k == rb.k == k
        a.append(ra), b.append(rb)
        k += 1
        if rb is None:
            continue
        for plan in offers.get(rb.k, ()):
            planned.core.offer_plan(plan)
    return a, b, planned


def test_the_motions_own_window_changes_no_command_and_is_counted(bump):
    """A plan that is the motion's own window is switched to at its first step and every command stays what the
    motion's law gives; after its last step the law is the motion's again (the commands still agree)."""
    plan = window(bump, 50, 40)
    a, b, loop = lockstep(bump, {30: [plan]}, 120)
    for ra, rb in zip(a, b):
        np.testing.assert_allclose(rb.command, ra.command, rtol=0, atol=1e-12)
        np.testing.assert_allclose(rb.x_ref, ra.x_ref, rtol=0, atol=0)
    core = loop.core
    assert core.plan_counts == {"offered": 1, "switched": 1} and sum(core.plan_rejections.values()) == 0
    assert core.tracking.law.active is plan
    status = dict(core.status()[2])
    assert status["plans.switched"] == "1" and status["plans.rejected"] == "0" and status["run"] == "1"
    assert status["plan"] == "plan 1 (run 1, steps 50..90)"


def test_a_plan_every_tick_changes_no_command_from_the_runs_start(bump):
    """Re-planning every tick (ocp/rti.py): after each tick k the motion's own window from step k + 1 + d, taken at
    tick k + 1, from the run's first tick on (through the 0.5 s start blend, which runs on the run's step index) to
    past the last plan's end, on the realistic arm (model error and noise: the feedback acts, so anything a plan
    restarted — the estimate, the blend, the commands in flight — would change the commands; a plan that reset the
    estimate fails this): every plan is taken and every command stays what the motion's law gives."""
    d = 1
    offers = {k: [window(bump, k + 1 + d, 40, sequence=k + 1)] for k in range(0, 150)}
    a, b, loop = lockstep(bump, offers, 200, profile="realistic")
    feedback = max(np.abs(ra.command - bump.U[min(ra.k + d, bump.N - 1)]).max() for ra in a[60:150])
    assert feedback > 1e-4, feedback   # (m: the feedback's share of the drives' commands after the blend)
    for ra, rb in zip(a, b):
        np.testing.assert_allclose(rb.command, ra.command, rtol=0, atol=1e-12)
    core = loop.core
    assert core.plan_counts == {"offered": 150, "switched": 150} and sum(core.plan_rejections.values()) == 0
    assert core.tracking.law.active.sequence == 150


def test_a_reoptimized_plan_takes_over_with_the_command_it_was_made_for():
    """On the wave: an update from the estimate of tick k (ocp/mpc.py) plans from step j = k + d + latency; the
    core switches at tick j − d and its command is the plan's first input (the predicted state is the plan's
    first state on the exact plant), within the drives' limits without the clamp's help: no jump."""
    problem, motion = wave_motion()
    mpc = RecedingHorizon(problem, motion, MPCOptions(horizon=1.0, deadline=None, latency_steps=4))
    loop = Loop(motion)
    core = loop.core
    while (res := loop.tick()).k < 200:
        pass
    tr = core.tracking
    up = mpc.update(res.k, res.x_hat, tr.history, tr.law, core.run, tr.limits)
    assert up.plan is not None and up.start == 205 and up.iterations <= 2, up.to_dict()
    ok, message = core.offer_plan(up.plan)
    assert ok and message == "plan 1 (run 1, steps 205..305) scheduled for tick 204", message
    commands = [res.command]
    while (res := loop.tick()).k < 215:
        commands.append(res.command)
        if res.k == 204:
            assert core.plan_counts["switched"] == 1 and core.tracking.law.active is up.plan
            np.testing.assert_allclose(res.command, up.plan.trajectory.U[0], rtol=0, atol=1e-6)
    # the stream of drive setpoints through the switch: within speed and acceleration limits
    lim = problem.limits
    rho = np.array(commands)[:, problem.model.nu:]
    v = np.diff(rho, axis=0) / motion.dt
    a = np.diff(v, axis=0) / motion.dt
    assert np.all(np.abs(v) <= lim.max_velocity * (1 + 1e-9)) and np.all(np.abs(a) <= lim.max_acceleration * (1 + 1e-6))


def test_refusals_keep_the_plan_the_core_has(bump):
    """Each refusal is counted by reason with a message that says what was wrong, and the commands stay those of
    the law the core has (here: the motion's)."""
    pendulum = Trajectory.for_model(library.get("pendulum"), 0.01, np.zeros((3, 2)), np.zeros((2, 1)),
                                    K=np.zeros((2, 1, 2)))
    shifted = window(bump, 60, 30, sequence=7)
    X = shifted.trajectory.X.copy()
    X[0, 0] += 0.1  # the shoulder 0.1 rad from where the arm will be
    off = Plan(60, dataclasses.replace(shifted.trajectory, X=X), 1, 7)
    gains0 = design_gains(_core.DiscreteSystem(ma.load_description().model, 0.01), bump.X[80:111], bump.U[80:110],
                          GainDesign(delay_steps=0))
    offers = {
        10: [window(bump, 11, 20, sequence=1),                     # its first command (step 11) was tick 10's: late
             window(bump, 40, 20, run=2, sequence=2),              # another run
             Plan(40, pendulum, 1, 3),                             # another model
             Plan(80, gains0.attach(window(bump, 80, 30).trajectory), 1, 4),   # gains for another delay
             window(bump, 180, 20, sequence=5),                    # waits for tick 179
             Plan(181, window(bump, 180, 20).trajectory, 1, 6)],   # ends after the motion
        20: [window(bump, 40, 20, sequence=8), off],              # 5, then 8 superseded; 7 off_state at tick 59
        70: [window(bump, 90, 10, sequence=9)],                   # its tick is lost: late there
    }
    a, b, loop = lockstep(bump, offers, 130, skip=(89,))
    for ra, rb in zip(a, b):
        if ra is not None:
            np.testing.assert_array_equal(rb.command, ra.command)
    core = loop.core
    assert core.plan_rejections == {"not_running": 0, "run": 1, "invalid": 3, "late": 2, "off_state": 1,
                                    "superseded": 2}, core.plan_rejections
    assert core.plan_counts == {"offered": 9, "switched": 0}
    assert core.plan_rejection.startswith("late: plan 9 (run 1, steps 90..100): tick 89, which computes its first "
                                          "command, was skipped (tick 90)"), core.plan_rejection
    assert [r for r in b if r is not None and r.plan_event][0].plan_event.startswith(
        "off_state: plan 7 (run 1, steps 60..90) starts at shoulder = ")


def test_refusal_messages_say_what_was_wrong(bump):
    loop = Loop(bump)
    core = loop.core
    for _ in range(10):
        loop.tick()
    ok, msg = core.offer_plan(window(bump, 5, 20))
    assert not ok and msg == ("late: plan 1 (run 1, steps 5..25) arrived after tick 9, which computed the command "
                              "for step 10: its first command (step 5) was due at tick 4")
    ok, msg = core.offer_plan(window(bump, 40, 20, run=3))
    assert not ok and msg == "run: plan 1 (run 3, steps 40..60) is for run 3, this is run 1"
    ok, msg = core.offer_plan(Plan(190, window(bump, 180, 20).trajectory, 1, 2))
    assert not ok and msg == ("invalid: plan 2 (run 1, steps 190..210) ends at step 210, after the motion's last "
                              "step 200")
    ok, msg = core.offer_plan(window(bump, 40, 20, dt=0.02))
    assert not ok and "has dt 0.02 s, the tracked motion 0.01 s" in msg
    no_record = window(bump, 40, 20, info={})
    ok, msg = core.offer_plan(no_record)
    assert not ok and msg.endswith("its gains carry no design record")
    ok, msg = core.offer_plan(Plan(-1, window(bump, 40, 20).trajectory, 1))
    assert not ok and "has start step -1, expected an integer >= 0" in msg
    # a trajectory switch pending wins over plans; a plan pending is superseded by a trajectory switch
    assert core.offer_plan(window(bump, 50, 20, sequence=3))[0]
    core.load_trajectory(bump, "again")
    assert core.switch_trajectory(at_tick=100)[0]
    assert core.plan_rejection == ("superseded: plan 3 (run 1, steps 50..70) was replaced by a switch to trajectory "
                                   "again (200 steps, dt 0.01 s, model 'marionette_arm')")
    ok, msg = core.offer_plan(window(bump, 60, 20, sequence=4))
    assert not ok and msg.startswith("superseded: plan 4 (run 1, steps 60..80) arrived while a switch to again")
    core.stop()
    ok, msg = core.offer_plan(window(bump, 60, 20, sequence=5))
    assert not ok and msg == "not_running: plan 5 (run 1, steps 60..80) arrived while not tracking"
    status = dict(core.status()[2])
    assert status["plans.offered"] == "9" and status["plans.rejected"] == "9"
    assert {k: status[f"plans.rejected.{k}"] for k in REJECTIONS} == {
        "not_running": "1", "run": "1", "invalid": "4", "late": "1", "off_state": "0", "superseded": "2"}


def test_planned_law_evaluates_the_active_plan_and_falls_back_to_the_motion(bump):
    """u(j) = U_p(j−s) − K_p(j−s)(x − X_p(j−s)) inside the active plan, the motion's law elsewhere; references of the
    ticks before the active plan's start come from the plan before it; preview uses a pending plan from its start."""
    model = ma.load_description().model
    base = TrackingLaw(model, bump)
    law = PlannedLaw(base)
    rng = np.random.default_rng(3)
    p1 = window(bump, 20, 30, sequence=1)
    Xp = p1.trajectory.X + 1e-3 * rng.standard_normal(p1.trajectory.X.shape)
    Up = p1.trajectory.U + 1e-3 * rng.standard_normal(p1.trajectory.U.shape)
    p1 = Plan(20, dataclasses.replace(p1.trajectory, X=Xp, U=Up), 1, 1)
    p2 = window(bump, 40, 30, sequence=2)
    x = bump.X[45] + 1e-3 * rng.standard_normal(model.nx)
    law.install(p1)
    u = law.command(45, x)
    np.testing.assert_allclose(u, Up[25] - p1.trajectory.K[25] @ (x - Xp[25]), rtol=1e-13)
    np.testing.assert_array_equal(law.command(10, x), base.command(10, x))
    np.testing.assert_array_equal(law.command(50, x), base.command(50, x))      # after its last input (step 49)
    np.testing.assert_array_equal(law.reference(50), Xp[30])                    # its last state
    preview = law.preview(p2)
    np.testing.assert_allclose(preview(45, x), p2.trajectory.U[5] - p2.trajectory.K[5] @ (x - bump.X[45]), rtol=1e-13)
    np.testing.assert_array_equal(preview(30, x), law.command(30, x))
    law.install(p2)
    np.testing.assert_array_equal(law.reference(30), Xp[10])                    # before p2's start: p1's reference
    np.testing.assert_array_equal(law.reference(40), bump.X[40])
    law.clear()
    assert law.active is None and law.previous is None
    np.testing.assert_array_equal(law.reference(30), bump.X[30])


def test_switch_tolerance_checks_its_values():
    with pytest.raises(ValueError, match="switch tolerance 'momentum' must be a finite number > 0, got -1"):
        SwitchTolerance(momentum=-1)
    with pytest.raises(ValueError, match="'kinematic_velocity' must be a finite number > 0, got nan"):
        SwitchTolerance(kinematic_velocity=float("nan"))
    model = ma.load_description().model
    np.testing.assert_array_equal(SwitchTolerance().vector(model), [0.05, 0.05, 0.005, 0.005, 0.05, 0.05, 0.1, 0.1])
