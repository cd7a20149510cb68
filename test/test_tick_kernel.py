"""The fused tick (``_core.TickKernel``, tracking/native_tick.py) against the Python parts it fuses.

The controller core computes a Kalman-filter tick in one native call; ``fused=False`` makes it call
the parts one by one (KalmanEstimator, DelayPredictor, PlannedLaw, StartBlend, TensionGuard, CommandLimits.clamp): the
readable reference. Both cores take the same samples of one closed loop on the realistic stand-in
(the offline loop's cycle, sim/offline_loop.py, with the fused core's commands driving the
arm) through two steps of command delay with commands the drives apply a cycle late (jitter),
short gaps the filter bridges, a long one after which it restarts, the watchdog's holds, a
re-optimized plan taking over mid-run (the integral action suspended while it is in effect), the
end of the trajectory (the integral's hand-over to the final hold) and a switch to the remainder
of the trajectory (the integral carried over): every tick's estimate, command and integral agree
to 1e-12 (the same operations; only the rounding of the products differs), each tick from the same commands in
flight: the reference core's history takes the fused core's commands, those the arm received. (Left to its own
commands the reference core drifts away exponentially between saturations of the clamp: the command recursion
through the predictor, u_j = u_d − K(j)(f(x̂_k, u_{j−1}) − x_d(j)), has a gain |eig K(j) B(j)| ≈ 1.67 per tick on
this motion — a property of the LQ law with its delay compensation, open loop in its own commands, which only the
arm's measurements close: the last digits of two implementations grow past 1e-12 within tens of ticks.) Also on
the arm with the
symmetric forcing (its restart's Legendre estimate carries f+ of the joint damping). The law and the clamp
alone are checked on states far from the trajectory, where every branch of the clamp acts.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from marionette_control.tracking.controller import ControllerOptions, make_core
from marionette_control.tracking.estimation import KalmanEstimator
from marionette_control.tracking.native_tick import make_kernel, set_plan
from marionette_control.lq.gains import GAIN_DESIGN, integral_gains
from marionette_control.tracking.integral_action import AngleIntegral
from marionette_control.tracking.command_limits import CommandLimits
from marionette_control.tracking.plan_switch import Plan, PlannedLaw, SwitchTolerance
from marionette_control.tracking.prediction import CommandHistory
from marionette_control.sim.profile import HardwareProfile
from marionette_control.sim.simulator import SimulatedArm
from marionette_control.tracking.law import TrackingLaw
from marionette_control.tracking.tolerances import make_tolerances
from marionette_control.trajectory import Trajectory
from marionette_control.model.limits import from_description
from marionette_control.model.library import marionette_arm as ma

from arm_helpers import bump_trajectory

NS = 1_000_000_000
DT = 0.01
TOL = 1e-12


def plan_of(traj: Trajectory, start: int, steps: int, run: int = 1, model=None) -> Plan:
    """A re-optimized window start … start + steps of ``traj`` (of ``model``, default the arm's model file) as a
    planner might send: other inputs (ρ +2 mm), states and gains (K × 0.8) than the motion's, with the motion's
    gain record."""
    model = model or ma.load_description().model
    s = slice(start, start + steps)
    X = traj.X[start:start + steps + 1].copy()
    X[1:, :model.nd] += 1e-3
    U = traj.U[s] + np.r_[np.zeros(model.nu), np.full(model.nk, 2e-3)]
    part = Trajectory.for_model(model, traj.dt, X, U, K=0.8 * traj.K[s], t0=traj.t0 + start * traj.dt,
                                info={GAIN_DESIGN: traj.info[GAIN_DESIGN]})
    return Plan(start, part, run, 1)


def remainder(traj: Trajectory, j: int) -> Trajectory:
    """``traj`` from its step j on, gains and design record with it: a switch to it at tick j changes no law."""
    return Trajectory(dt=traj.dt, X=traj.X[j:], U=traj.U[j:], state_names=traj.state_names,
                      input_names=traj.input_names, model_name=traj.model_name, model_hash=traj.model_hash,
                      K=traj.K[j:], info=dict(traj.info))


def closed_loop(traj: Trajectory, delay: int, feedback: bool, drops: dict, plan_at: int, switch_at=None, desc=None):
    """The fused and the reference core on one arm (realistic profile, ``delay`` steps, jitter); per cycle both
    results, and per tick of the reference core its integral z after the tick (None without) and whether the tick's
    error was left out (anti-windup). ``drops`` {tick
    after which: cycles whose samples are lost}; after tick ``switch_at`` (None: never) a switch to the remainder
    of ``traj`` from the next tick on; after tick ``plan_at`` a plan (:func:`plan_of`, from step plan_at + 20) of
    the motion tracked then. ``desc``: the arm's description (default: the model file's). Returns the cores, the
    pairs, the z's and the plan."""
    desc = desc or ma.load_description()
    options = ControllerOptions(command_delay_steps=delay, feedback=feedback,
                                switch_tolerance=SwitchTolerance(1.0, 1.0, 1.0, 10.0))
    fused, parts = make_core(desc, options), make_core(desc, options, fused=False)
    for core in (fused, parts):
        core.load_trajectory(traj, "bump")
    assert fused.tracking.kernel is not None and parts.tracking.kernel is None
    # the realistic stand-in's one-sided string, the tension guard acting (test_tracking_safety has the guard's own
    # tests: no slack on the library's motions and the plant family). Here the string still goes slack for a few
    # steps, from what no command can foresee: a command applied a cycle late (20 % of them) holds a moving drive
    # for a step and then moves it two, and the test's plan (plan_of) starts and ends with a 2 mm jump of the drives
    profile = HardwareProfile.named("realistic", command_delay_steps=delay, command_jitter_steps=1,
                                    command_jitter_probability=0.2)
    arm = SimulatedArm(profile, traj.dt, nominal=desc, q0=traj.X[0, :desc.model.nq])
    nu = desc.model.nu
    stamp, dt_ns = NS, int(round(traj.dt * NS))
    pairs, integrals = [], []
    lost = 0
    started = False
    motion, plan = traj, None

    def send(res, ref):
        """The fused core's command to the arm, and into the reference core's history in place of its own."""
        if res.command is not None:
            arm.receive_command(res.command[nu:])
        if ref.command is not None:
            history = parts.tracking.history
            history.sent(history.last_slot, res.command)

    for cycle in range(traj.N + 60):
        if cycle == 10:
            assert fused.start()[0] and parts.start()[0]
            started = True
        if lost:
            lost -= 1
        else:
            q = arm.measure()
            a, b = fused.on_joint_state(q, stamp, stamp), parts.on_joint_state(q, stamp, stamp)
            pairs.append((a, b))
            send(a, b)
            if a.kind == "tick":
                integral = parts.tracking.integral
                integrals.append((q, b, None if integral is None else integral.z.copy(),
                                  integral is not None and integral.held))
                if integral is not None:
                    np.testing.assert_allclose(fused.tracking.kernel.z, integral.z, rtol=0, atol=TOL)
            if started and a.kind == "tick":
                lost = drops.get(a.k, 0)
                if a.k == switch_at and motion is traj:
                    motion = remainder(traj, switch_at + 1)
                    for core in (fused, parts):
                        core.load_trajectory(motion, "remainder")
                        assert core.switch_trajectory()[0]
                if a.k == plan_at:
                    plan = plan_of(motion, plan_at + 20, 60, run=fused.run, model=desc.model)
                    assert fused.offer_plan(plan)[0] and parts.offer_plan(plan)[0]
        # the node's watchdog, between samples: stale data → hold commands (remembered at their slots)
        w = fused.on_watchdog(stamp + dt_ns // 2), parts.on_watchdog(stamp + dt_ns // 2)
        pairs.append(w)
        send(*w)
        arm.step()
        stamp += dt_ns
    return fused, parts, pairs, integrals, plan


@pytest.mark.parametrize("delay, feedback, switch_at, forcing", [(2, True, None, "thesis"), (1, False, None, "thesis"),
                                                                 (0, True, None, "thesis"), (1, True, 40, "thesis"),
                                                                 (2, True, None, "symmetric")])
def test_the_fused_tick_is_the_parts_over_a_closed_loop(delay, feedback, switch_at, forcing):
    desc = ma.load_description(forcing=forcing)
    traj = bump_trajectory(DT, 300, model=desc.model, delay=delay)[1]
    # lost samples: 2 after tick 60 (bridged by the filter), 8 after tick 100 (longer than state_timeout: the
    # watchdog holds, the filter restarts from two samples)
    fused, parts, pairs, integrals, plan = closed_loop(traj, delay, feedback, {60: 2, 100: 8}, plan_at=130,
                                                       switch_at=switch_at, desc=desc)
    ticks = 0
    for a, b in pairs:
        assert (a.kind, a.k, a.fault) == (b.kind, b.k, b.fault), (a.fault_message, b.fault_message)
        if a.command is not None:
            np.testing.assert_allclose(a.command, b.command, rtol=0, atol=TOL)
        if a.kind == "tick":
            ticks += 1
            np.testing.assert_allclose(a.x_hat, b.x_hat, rtol=0, atol=TOL)
            np.testing.assert_allclose(a.x_ref, b.x_ref, rtol=0, atol=0)
    # everything the loop was meant to go through happened, to both
    for core in (fused, parts):
        assert core.fault_counts.get("stale", 0) >= 1 and core.fault_counts.get("sample_gap", 0) >= 1
        assert core.missed_ticks >= 10 and core.plan_counts["switched"] == 1 and not core.aborted
        assert core.tracking.law.active is plan
    assert ticks >= traj.N
    assert fused.status()[2] == parts.status()[2] or _same_status(fused, parts)
    # the integral action was on (the default design asks for it) and worked on the stand-in's offset; the loop
    # went past the end (hand-over) and through the plan's window (suspended: z did not move)
    z = [z for _, _, z, _ in integrals]
    if feedback:  # the guard acted, on the same ticks
        assert fused.guarded_ticks > 0 and fused.guarded_ticks == parts.guarded_ticks
        assert dict(fused.status()[2])["tension_guard.ticks_total"] == str(fused.guarded_ticks)
    if not feedback:
        assert all(zi is None for zi in z)
        return
    assert np.abs(z[-1]).max() > 1e-4
    assert max(r.k for _, r, _, _ in integrals if r.k is not None) + delay > parts.tracking.N
    during = [zi for (_, r, zi, _) in integrals if plan.start <= r.k + delay < plan.end]
    # the anti-windup left out ticks that would have pushed into a saturation (the guard's, the clamp's), alike in
    # both: z agreed at every tick
    assert any(held for _, _, _, held in integrals)
    assert len(during) > 30 and all(np.array_equal(zi, during[0]) for zi in during)
    if switch_at is not None:  # the switch's first tick continues the integral (z not reset)
        i = next(i for i, (_, r, _, _) in enumerate(integrals) if r.event.startswith("switched"))
        (_, _, before, _), (q, r, after, held) = integrals[i - 1], integrals[i]
        nd = fused.nd
        assert np.abs(before).max() > 1e-5
        np.testing.assert_allclose(after, before + (0.0 if held else DT) * (q[:nd] - r.x_ref[:nd]), rtol=0,
                                   atol=1e-15)


def _same_status(fused, parts) -> bool:
    """The diagnostics agree but for the compute times (and the estimate's last digits)."""
    a, b = dict(fused.status()[2]), dict(parts.status()[2])
    for key in a:
        if key.startswith("compute_time") or key.startswith(("error.", "estimate.", "tracking_error")):
            continue
        assert a[key] == b[key], key
    return True


@pytest.fixture(scope="module")
def bump():
    ds, traj = bump_trajectory(DT, 200, delay=1)
    return ds, traj


def test_law_and_clamp_agree_with_the_reference_everywhere(bump):
    """Far from the trajectory (every branch of the clamp acts), inside and outside a plan, past the end, without
    feedback; the drives' limits of the model file and infinite ones."""
    ds, traj = bump
    desc = ma.load_description()
    m = desc.model
    rng = np.random.default_rng(3)
    plan = plan_of(traj, 80, 50)
    for limits in (CommandLimits.from_limits(from_description(desc)).for_dt(DT),
                   CommandLimits.unlimited(m.nU, m.nk).for_dt(DT)):
        for feedback in (True, False):
            law = PlannedLaw(TrackingLaw(m, traj, feedback=feedback))
            kernel = make_kernel(ds, law.base, KalmanEstimator(ds, traj), limits, 1)
            law.install(plan)
            set_plan(kernel, plan)
            for j in (0, 79, 80, 100, 129, 130, 199, 200, 250):
                x = traj.X[min(j, traj.N)] + rng.normal(scale=0.05, size=m.nx)
                np.testing.assert_allclose(kernel.law(j, x), law.command(j, x), rtol=0, atol=TOL)
            for _ in range(200):
                u = rng.normal(scale=0.3, size=m.nU)
                rho, v = rng.normal(scale=0.3, size=m.nk), rng.normal(scale=2.0, size=m.nk)
                np.testing.assert_array_equal(kernel.clamp(u, rho, v), limits.clamp(u.copy(), rho, v))
            kernel.clear_plan()
            np.testing.assert_allclose(kernel.law(100, traj.X[100]), traj.U[100], rtol=0, atol=TOL)


def test_the_ticks_tolerance_check_agrees_with_the_python_check(bump):
    """within(k) of the kernel (start at k = 0, path before the end, goal after) against
    control.tolerances.check on errors inside, at and beyond each tolerance, NaN among them; "within" must never
    hide a violation (it alone lets a tick skip the Python check), and agrees with it off the boundary."""
    ds, traj = bump
    m = ds.model
    tolerances = make_tolerances(m, {"path": {"carriage": 0.01}, "goal": {"string_length": 2e-3}}, 1.0)
    kernel = make_kernel(ds, TrackingLaw(m, traj), KalmanEstimator(ds, traj), CommandLimits.unlimited(m.nU, m.nk),
                         1, None, tolerances)
    rng = np.random.default_rng(8)
    x_ref = np.zeros(m.nx)
    checked = {"start": 0, "path": 0, "goal": 0}
    for k, which in ((0, "start"), (1, "path"), (traj.N - 1, "path"), (traj.N, "goal"), (traj.N + 50, "goal")):
        tol = getattr(tolerances, which)
        for _ in range(300):
            e = tol * rng.choice([0.5, 1.0, np.nextafter(1.0, 2.0), 1.5], size=m.nq) * rng.choice([-1, 1], size=m.nq)
            e[tol == 0] = rng.normal(scale=10.0, size=int(np.sum(tol == 0)))  # unchecked: anything
            if rng.random() < 0.05:
                e[rng.integers(m.nq)] = np.nan
            x_hat = np.r_[e, rng.normal(size=m.nx - m.nq)]
            within, violation = kernel.within(k, x_hat, x_ref), tolerances.check(which, e)
            assert not (within and violation is not None), (k, e)
            if not np.any(np.isclose(np.abs(e), tol) & (tol > 0)):
                assert within == (violation is None), (k, e)
            checked[which] += not within
    assert min(checked.values()) > 100
    with pytest.raises(ValueError, match="tolerances"):
        make_kernel(ds, TrackingLaw(m, traj), KalmanEstimator(ds, traj), CommandLimits.unlimited(m.nU, m.nk),
                    1).within(0, x_ref, x_ref)


def test_the_kernel_refuses_what_does_not_fit(bump):
    ds, traj = bump
    m = ds.model
    kalman = KalmanEstimator(ds, traj)
    limits = CommandLimits.unlimited(m.nU, m.nk).for_dt(DT)
    kernel = make_kernel(ds, TrackingLaw(m, traj), kalman, limits, 1)
    with pytest.raises(ValueError, match=r"q has shape \(3,\), expected \(4,\)"):
        kernel.tick(0, np.zeros(3), None, CommandHistory(m.nU, m.nk, 1))
    X, U, K = np.vstack([traj.X, traj.X]), np.vstack([traj.U, traj.U]), np.concatenate([traj.K, traj.K])
    with pytest.raises(ValueError, match="a plan must have 1..200 steps"):
        kernel.set_plan(0, X[:202], U[:201], K[:201])
    with pytest.raises(ValueError, match="K"):
        kernel.set_plan(0, traj.X[:11], traj.U[:10], traj.K[:9])
    integral = AngleIntegral(integral_gains(ds, traj), DT, m.nk)
    with pytest.raises(ValueError, match=r"K_z \(the integral's gains\)"):
        make_kernel(ds, TrackingLaw(m, traj), kalman, limits, 1, AngleIntegral(integral.K_z[1:], DT, m.nk))
    with pytest.raises(ValueError, match="integral gains K_z without feedback"):
        make_kernel(ds, TrackingLaw(m, traj, feedback=False), kalman, limits, 1, integral)
    kernel = make_kernel(ds, TrackingLaw(m, traj), kalman, limits, 1, integral)
    with pytest.raises(ValueError, match="x_ref is None: the integral action needs x_d"):
        kernel.tick(0, traj.X[0, :m.nq], None, CommandHistory(m.nU, m.nk, 1))


KERNEL_PROBE = """
import ctypes, json, sys
import numpy as np
sys.path.insert(0, sys.argv[2])
from arm_helpers import bump_trajectory
from marionette_control.tracking.tolerances import make_tolerances
from marionette_control.tracking.estimation import KalmanEstimator
from marionette_control.tracking.native_tick import make_kernel
from marionette_control.lq.gains import integral_gains
from marionette_control.tracking.integral_action import AngleIntegral
from marionette_control.tracking.command_limits import CommandLimits
from marionette_control.tracking.prediction import CommandHistory
from marionette_control.tracking.law import TrackingLaw
lib = ctypes.CDLL(sys.argv[1])
lib.mc_alloc_count.restype = ctypes.c_ulong
ds, traj = bump_trajectory(0.01, 100, delay=2)
m = ds.model
limits = CommandLimits.unlimited(m.nU, m.nk).for_dt(0.01)
integral = AngleIntegral(integral_gains(ds, traj), 0.01, m.nk)
kernel = make_kernel(ds, TrackingLaw(m, traj), KalmanEstimator(ds, traj), limits, 2, integral,
                     make_tolerances(m, {}, 1.0))  # (the tick checks them too)
h = CommandHistory(m.nU, m.nk, 2)
# the integral's reference off the measured angles (z grows); past the end the final state (the hand-over)
Q = [np.ascontiguousarray(traj.X[min(k, traj.N), :m.nq]) for k in range(160)]
R = [traj.X[min(k, traj.N)] + np.r_[0.01, -0.01, np.zeros(m.nx - 2)] for k in range(160)]

def run(n):
    kernel.reset()
    kernel.reset_integral()
    h.start(traj.X[0, m.nd:m.nq].copy())
    for k in range(n):
        _, _, u, _, within = kernel.tick(k, Q[k], Q[k - 1] if k else None, h, R[k])
        assert within is True
        h.sent(k, u)

run(150)
growth = []
for _ in range(3):
    a = lib.mc_alloc_count(); run(30); b = lib.mc_alloc_count()
    c = lib.mc_alloc_count(); run(130); d = lib.mc_alloc_count()
    growth.append((d - c) - (b - a))
print(json.dumps(sorted(growth)[1]))
"""


@pytest.mark.skipif(shutil.which("gcc") is None or not sys.platform.startswith("linux"), reason="needs Linux and gcc")
def test_a_tick_allocates_nothing(tmp_path):
    """100 more ticks (the kernel with its integral action across the trajectory's end, its three output arrays, the
    history's record) cost no extra malloc: the kernel's workspaces are sized once, numpy serves its small outputs
    from its cache (test_no_allocation.py's shim)."""
    from test_no_allocation import run_counted

    assert run_counted(tmp_path, KERNEL_PROBE, str(Path(__file__).parent)) == 0
