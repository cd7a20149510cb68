"""The measurements behind docs/tracking.md: delay compensation, estimator, gain weights, final figures.

    .venv/bin/python docs/tracking_measurements.py [--out out/reproductions/tracking.json] [--quick]

Optimizes the wave (config/motions/wave.yaml) on the nominal arm and tracks it on the hardware stand-in
(``SimulatedArm``) with the controller, offline (``marionette_control.sim.offline_loop``: the node's
tick logic cycle by cycle), and prints the tables quoted in docs/tracking.md:

1. delay compensation: no compensation, the predictor through the commands in flight (the controller), and
   the LQR of the delay-augmented system [x_k; u_k] (written out here, it is not part of the package);
2. estimators: the Kalman filter against the discrete Legendre transform, errors against the true state;
3. gain weights: the thesis's Q = R = I, heavier arm angles without and with the drive-acceleration weight;
4. the realistic default: closed loop against feed-forward only, the whole wave.

Every run is seeded (the profiles' seeds), so the figures repeat exactly on any machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from marionette_control import _core  # noqa: E402
from marionette_control.model import library  # noqa: E402
from marionette_control.ocp import request as P  # noqa: E402
from marionette_control.tracking.controller import ControllerOptions  # noqa: E402
from marionette_control.tracking.estimation import KalmanEstimator  # noqa: E402
from marionette_control.lq.gains import GainDesign, design_gains  # noqa: E402
from marionette_control.tracking.command_limits import CommandLimits  # noqa: E402
from marionette_control.sim.offline_loop import run_loop  # noqa: E402
from marionette_control.ocp.projection import ProjectionOptimizer  # noqa: E402
from marionette_control.tracking.prediction import CommandHistory  # noqa: E402
from marionette_control.lq.riccati import tv_lq  # noqa: E402
from marionette_control.sim.profile import HardwareProfile  # noqa: E402
from marionette_control.sim.simulator import SimulatedArm  # noqa: E402
from marionette_control.trajectory import Trajectory  # noqa: E402
from marionette_control.model.limits import from_description  # noqa: E402
from marionette_control.model.library import marionette_arm as arm  # noqa: E402

REALISTIC = HardwareProfile.named("realistic")
JOINT_NOISE = (1e-3, 1e-3) + REALISTIC.noise_std[2:]  # 1 mrad on the joint encoders
SCENARIOS = {
    "delay alone": HardwareProfile.named("perfect", command_delay_steps=1),
    "realistic": REALISTIC,
    "realistic, 1 mrad joint noise": REALISTIC.replace(noise_std=JOINT_NOISE),
    "realistic, 10 % late commands": REALISTIC.replace(command_jitter_steps=1, command_jitter_probability=0.1),
}


def wave() -> Trajectory:
    m = library.get("marionette_arm")
    prob = P.build_problem(m, motion_name="wave")
    res = ProjectionOptimizer(prob.system, prob.cost, prob.options).optimize(prob.X0, prob.U0)
    return Trajectory.for_model(m, prob.dt, res.X, res.U)


def summary(e_deg: np.ndarray) -> dict:
    return {n: {"rms_deg": float(np.sqrt(np.mean(e_deg[:, i] ** 2))), "max_deg": float(np.max(np.abs(e_deg[:, i])))}
            for i, n in enumerate(("shoulder", "elbow"))}


def fmt(s: dict) -> str:
    return " / ".join(f"{v['rms_deg']:.3f} ({v['max_deg']:.2f})" for v in s.values())


# --------------------------------------------------------------------------------------------- 1. delay


def augmented_gains(system, traj: Trajectory, design: GainDesign) -> np.ndarray:
    """LQR gains K_z (N−1, nU, nx+nU) of the delay-augmented system z_k = [x_k; u_k] (u_k: the input in flight,
    sent a step earlier), decision c_k = u_{k+1}: z_{k+1} = [f(x_k, u_k); c_k], with the design's weights on x,
    the input weight on c and the drive-acceleration weight on (c_k − 2u_k + ρ_k)/Δt² (step k+1's)."""
    m = system.model
    A, B = (np.asarray(a) for a in system.linearize_trajectory(traj.X, traj.U))
    nx, nU, nk, nd, nq, dt = m.nx, m.nU, m.nk, m.nd, m.nq, system.dt
    n = traj.N - 1  # c_k = u_{k+1}, k = 0 .. N−2
    Az = np.zeros((n, nx + nU, nx + nU))
    Bz = np.zeros((n, nx + nU, nU))
    Az[:, :nx, :nx], Az[:, :nx, nx:] = A[:n], B[:n]
    Bz[:, nx:] = np.eye(nU)
    Q, R = design.weights(m)
    Mz = np.zeros((nk, nx + nU))
    Mz[:, nd:nq], Mz[:, nx + m.nu:] = np.eye(nk) / dt ** 2, -2 * np.eye(nk) / dt ** 2
    Mc = np.zeros((nk, nU))
    Mc[:, m.nu:] = np.eye(nk) / dt ** 2
    w = design.drive_acceleration
    Qz = np.zeros((nx + nU, nx + nU))
    Qz[:nx, :nx] = np.diag(Q)
    Qf = np.pad(np.diag(design.terminal_scale * Q), ((0, nU), (0, nU)))
    return np.asarray(tv_lq(Az, Bz, Qz + w * Mz.T @ Mz, w * Mz.T @ Mc, np.diag(R) + w * Mc.T @ Mc, None, None, Qf,
                            None).K)


def augmented_loop(traj: Trajectory, Kz: np.ndarray, profile: HardwareProfile, desc) -> dict:
    """The controller with the delay-augmented LQR instead of the predictor (delay 1): the same Kalman filter,
    command history and limits; c_k = u_d(k+1) − K_z(k) [x̂_k − x_d(k); u_k − u_d(k)]."""
    m = desc.model
    nd, nq, nu, N, dt = m.nd, m.nq, m.nu, traj.N, traj.dt
    system = _core.DiscreteSystem(m, dt)
    estimator = KalmanEstimator(system, traj, ControllerOptions().noise)
    limits = CommandLimits.from_limits(from_description(desc)).for_dt(dt)
    history = CommandHistory(m.nU, m.nk, 1)
    sim = SimulatedArm(profile, dt, nominal=desc, q0=traj.X[0, :nq])
    for _ in range(20):
        sim.measure()
        sim.step()
    errors = []
    for k in range(N + 50):
        q, x_true = sim.measure(), sim.true_state()
        if k == 0:
            history.start(limits.hold(q[nd:]))
        x_hat = estimator.estimate(k, q, None, history.applied)
        if k < N - 1:
            z = np.r_[x_hat - traj.X[k], history.applied(k) - traj.U[k]]
            c = traj.U[k + 1] - Kz[k] @ z
        else:
            c = np.r_[traj.U[-1, :nu], traj.X[-1, nd:nq]]
        limits.clamp(c, *history.stream_state(k + 1, dt))
        history.sent(k, c)
        sim.receive_command(c[nu:])
        sim.step()
        if k <= N:
            errors.append(np.degrees(x_true[:nd] - traj.X[k, :nd]))
    return summary(np.array(errors))


def delay_table(traj: Trajectory, desc) -> dict:
    system = _core.DiscreteSystem(desc.model, traj.dt)
    design = GainDesign(delay_steps=1)
    with_gains = design_gains(system, traj.X, traj.U, design).attach(traj)
    uncompensated = design_gains(system, traj.X, traj.U, dataclasses.replace(design, delay_steps=0)).attach(traj)
    Kz = augmented_gains(system, traj, design)
    out = {}
    for name, profile in list(SCENARIOS.items())[:2]:
        row = {"no compensation (d = 0 assumed)": run_loop(uncompensated, profile, ControllerOptions(
                   command_delay_steps=0)).summary(),
               "predictor (the controller)": run_loop(with_gains, profile, ControllerOptions()).summary(),
               "delay-augmented LQR": augmented_loop(traj, Kz, profile, desc),
               "feed-forward only": run_loop(with_gains, profile, ControllerOptions(feedback=False)).summary()}
        out[name] = row
        print(f"\n1. delay compensation, {name} (RMS (max) shoulder / elbow, deg)")
        for k, v in row.items():
            print(f"   {k:34s} {fmt(v)}")
    return out


# --------------------------------------------------------------------------------------------- 2. estimator


def estimator_table(traj: Trajectory, desc) -> dict:
    """Estimate minus what the nominal model says the true motion is (Legendre transform of true configurations)."""
    m = desc.model
    system = _core.DiscreteSystem(m, traj.dt)
    gains = {d: design_gains(system, traj.X, traj.U, GainDesign(delay_steps=d)).attach(traj) for d in (0, 1)}
    out = {}
    print("\n2. estimators: RMS of x̂ − x (angles mrad; momenta 1e-3 N m s) and the tracking RMS (deg)")
    for name, profile in (("perfect, no noise", HardwareProfile.named("perfect")),
                          ("perfect, 1 mrad joint noise", HardwareProfile.named("perfect", noise_std=JOINT_NOISE)),
                          ("realistic", REALISTIC), ("realistic, 1 mrad joint noise", SCENARIOS[
                              "realistic, 1 mrad joint noise"])):
        d = profile.command_delay_steps
        for est in ("kalman", "legendre"):
            r = run_loop(gains[d], profile, ControllerOptions(command_delay_steps=d, estimator=est))
            consecutive = np.flatnonzero(np.diff(r.k) == 1) + 1
            ref = np.array([system.state_from_configs(r.X_true[i - 1, :m.nq], r.X_true[i, :m.nq])
                            for i in consecutive])
            e = r.X_hat[consecutive] - ref
            rms = np.sqrt(np.mean(e ** 2, axis=0))
            row = {"angle_mrad": (1e3 * rms[:m.nd]).tolist(), "momentum_1e-3": (1e3 * rms[m.nq:m.nq + m.nd]).tolist(),
                   "tracking": r.summary(), "aborted": r.aborted}
            out[f"{name}: {est}"] = row
            print(f"   {name:30s} {est:8s} angles {np.round(row['angle_mrad'], 3)}  momenta "
                  f"{np.round(row['momentum_1e-3'], 3)}  tracking {fmt(r.summary())}{' ABORTED' if r.aborted else ''}")
    return out


# --------------------------------------------------------------------------------------------- 3. weights


DESIGNS = {
    "thesis Q = R = I": dict(dynamic_configuration=1.0, kinematic_configuration=1.0, momentum=1.0,
                             kinematic_velocity=1.0, input=1.0, drive_acceleration=0.0),
    "angles 1000, no acceleration weight": dict(drive_acceleration=0.0),
    "angles 1000, acceleration 1e-4": dict(drive_acceleration=1e-4),
    "angles 1000, acceleration 3e-4 (default)": dict(),
    "angles 3000, acceleration 3e-4": dict(dynamic_configuration=3000.0),
    "angles 300, acceleration 3e-4": dict(dynamic_configuration=300.0),
}


def weights_table(traj: Trajectory, desc, quick: bool) -> dict:
    system = _core.DiscreteSystem(desc.model, traj.dt)
    out = {}
    print("\n3. gain weights: worst RMS over shoulder and elbow (max), deg; 'x' = aborted (path tolerance)")
    scenarios = {k: v for k, v in SCENARIOS.items() if k != "delay alone"}
    print("   " + " " * 42 + " | ".join(f"{s[:26]:26s}" for s in scenarios))
    for name, changes in DESIGNS.items():
        t = design_gains(system, traj.X, traj.U, GainDesign(delay_steps=1, **changes)).attach(traj)
        row = {}
        for s, profile in scenarios.items():
            worst = []
            for seed in ((0,) if quick else (0, 1, 2)):
                r = run_loop(t, profile.replace(seed=seed), ControllerOptions())
                sm = r.summary()
                worst.append((max(v["rms_deg"] for v in sm.values()), max(v["max_deg"] for v in sm.values()),
                              r.aborted))
            rms, mx, ab = max(w[0] for w in worst), max(w[1] for w in worst), any(w[2] for w in worst)
            row[s] = {"worst_rms_deg": rms, "worst_max_deg": mx, "aborted": ab}
        out[name] = row
        print(f"   {name:42s} " + " | ".join(
            f"{v['worst_rms_deg']:6.3f} ({v['worst_max_deg']:5.2f}){' x' if v['aborted'] else '  '}          "
            for v in row.values()))
    return out


# --------------------------------------------------------------------------------------------- 4. final


def final_table(traj: Trajectory, desc) -> dict:
    system = _core.DiscreteSystem(desc.model, traj.dt)
    t = design_gains(system, traj.X, traj.U, GainDesign()).attach(traj)
    closed = run_loop(t, REALISTIC, ControllerOptions()).summary()
    opened = run_loop(t, REALISTIC, ControllerOptions(feedback=False)).summary()
    worst = max(opened, key=lambda n: opened[n]["rms_deg"])
    ratio = opened[worst]["rms_deg"] / closed[worst]["rms_deg"]
    print(f"\n4. realistic default, whole wave: closed loop {fmt(closed)}; feed-forward only {fmt(opened)}; "
          f"open / closed RMS on {worst}: {ratio:.2f}")
    return {"closed_loop": closed, "open_loop": opened, "ratio": {"joint": worst, "open_over_closed": ratio}}


def write_json(path, report: dict) -> None:
    """Writes the figures (creating the directory) and says where."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(report, indent=2))
    print(f"\nwrote {path}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "out" / "reproductions" / "tracking.json"))
    ap.add_argument("--quick", action="store_true", help="one seed per scenario in the weights table")
    args = ap.parse_args(argv)
    desc = arm.load_description()
    traj = wave()
    report = {"delay": delay_table(traj, desc), "estimator": estimator_table(traj, desc),
              "weights": weights_table(traj, desc, args.quick), "final": final_table(traj, desc)}
    write_json(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
