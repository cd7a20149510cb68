"""The figures of docs/tracking.md's "Tension guard", "Start", "Quiet commands", "Anti-windup" and "Plant family"
sections.

    .venv/bin/python docs/tracking_safety.py [--motions wave,bow,figure_eight] [--seeds 0,1,2]
    .venv/bin/python docs/tracking_safety.py --anti-windup wave,bow,reach_point,figure_eight,beckon,elbow_swings
    .venv/bin/python docs/tracking_safety.py --quiet wave,bow,reach_point,figure_eight,beckon
    .venv/bin/python docs/tracking_safety.py --gains wave,bow,reach_point,figure_eight,beckon,elbow_swings

The motions are optimized with the arm's spec (``config/optimize/marionette_arm_wave.yaml`` with ``motion.name``)
and tracked offline (``marionette_control.sim.offline_loop.run_loop``: the controller node's tick logic against
the stand-in) on the realistic profile, closed loop and feed-forward only:

* start and guard: the wave on every seed with the default controller, without the start blend
  (``start_blend: 0``) and without the tension guard (the core built without the model's strings): the plant
  string's lowest tension during the motion and over its first 0.1 s, the ticks the guard moved, the RMS;
* quiet commands: the RMS of the commanded drive accelerations' deviation from the plan's
  (``LoopResult.commands_summary``) with the default and with the acceleration budget (``feedback_acceleration``)
  of 5 m/s², on the wave and with three times the encoder noise;
* a quieter estimate: the wave with the Kalman filter's σ_q raised, the integral weight raised (to keep the
  accuracy), and both: RMS, the carriage's acceleration deviation, aborts with 2 % and 10 % of late commands on
  every seed;
* the plant family: every motion on the realistic profile with the plant files of ``config/plants/``, three
  times the encoder noise and drives at 0.6 of their acceleration (``drive_acceleration``), seed 0: closed and
  feed-forward-only RMS per joint, aborts, the lowest plant tension;
* ``--quiet MOTIONS`` (only these tables; issue 24 item 4): where the chatter comes from (the wave, seed 0, with the
  stand-in's encoders switched off one part at a time, and the share of the deviation's power per frequency band;
  without and with the quiet feedback), then the Kalman filter's σ_q raised alone (:data:`QUIET_SIGMAS`, the integral
  weight kept) and the designs of :data:`QUIET_DESIGNS` (the quiet feedback at 10 Hz, its parts, the
  innovation-scheduled estimator of ``study/quiet_commands.py``): every motion and seed against the targets (closed
  RMS and max, feed-forward only over closed on the elbow, closed ≤ feed-forward on both joints, no abort, the plant's
  string ≥ its 0.5 N minimum during the motion and over its first 0.1 s), and the wave's robustness (the four pushes
  on six noise seeds, 10 % of commands late over twelve seeds, 2 % over six);
* ``--anti-windup MOTIONS`` (only these tables): every motion and seed on the realistic profile with the integral's
  anti-windup (the default) and integrating through saturation (``anti_windup: false``), against feed-forward
  only, with the ticks whose commanded drive acceleration sits at the drives' limit; then the wave's robustness
  with and without it, for the default gains and two faster designs (angle_integral 1e7, drive_acceleration
  5e-3): runs aborted with 10 % of commands a cycle late over twelve seeds, and the recovery from
  docs/tracking.md's four pushes (``docs/tracking_targets.py``'s scenarios).

* ``--gains MOTIONS`` (only this table; issue 24): the gain designs of :data:`GAIN_SCAN` — the previous default, one
  weight for both joints raised, the shoulder's own angle or integral weight raised (``GainDesign`` by joint), and
  with the elbow's loop made faster — each on every motion and seed against feed-forward only (the library's checks),
  the elbow swings' shoulder, the wave's elbow target (feed-forward only ≥ 3× closed) and its robustness (as
  ``--quiet``'s), 1 mrad of joint-encoder noise, and the plant family's checks (the wave, the bow and the
  figure-eight on every plant but damping ×3, seed 0).

The default gains are the arm's spec's (``tracking_gains``: the shoulder's angle weight 5e3, the elbow's 1e3, the
integral weight 3e6; :data:`ARM_GAINS`).

A motion drawn too fast for the drives (``elbow_swings``) is re-timed uniformly (precision 0.05, as
``test/test_motion_library.py`` does).

Every run is seeded, so the figures repeat exactly.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

import numpy as np

from marionette_control import _core
from marionette_control.lq.gains import GainDesign, design_gains
from marionette_control.model.library import marionette_arm as arm
from marionette_control.model.limits import from_description
from marionette_control.ocp.spec import load_spec
from marionette_control.ocp.spec_problem import solve_spec
from marionette_control.resources import config_file
from marionette_control.sim.offline_loop import run_loop, scripted_push
from marionette_control.sim.profile import PLANT_FAMILY, HardwareProfile
from marionette_control.study.quiet_commands import quiet_core
from marionette_control.tracking.command_limits import CommandLimits
from marionette_control.tracking.controller import ControllerCore, ControllerOptions
from marionette_control.tracking.estimation import EstimatorNoise
from marionette_control.tracking.quiet_feedback import QuietOptions
from marionette_control.tracking.sample_checks import SampleChecks

REALISTIC = HardwareProfile.named("realistic")
#: the plant family (``sim.profile.PLANT_FAMILY``) by the names the tables give its plants
FAMILY = {{"noise_x3": "encoder noise ×3", "drives_x0.6": "drives' acceleration ×0.6"}.get(name, name): changes
          for name, changes in PLANT_FAMILY.items()}


#: library motions drawn too fast for the drives: re-timed (docs/motions.md)
TOO_FAST = {"elbow_swings"}


def optimized(name: str):
    overrides = {"motion.name": name}
    if name in TOO_FAST:
        overrides.update({"retime.mode": "uniform", "retime.precision": 0.05})
    return solve_spec(load_spec(config_file("optimize", "marionette_arm_wave.yaml"), overrides)).trajectory


def unguarded_core(desc, options: ControllerOptions) -> ControllerCore:
    """The default core but for the tension guard (no strings given)."""
    limits = from_description(desc)
    return ControllerCore(desc.model, lambda q: np.asarray(q, dtype=float), CommandLimits.from_limits(limits),
                          SampleChecks(desc.model, limits, options.plausibility), options)


def run(trajectory, profile, desc, limits, guard: bool = True, **options) -> dict:
    opts = ControllerOptions(command_delay_steps=profile.command_delay_steps, **options)
    core = None
    if not guard:
        core = unguarded_core(desc, opts)
        core.load_trajectory(trajectory, "motion")
    loop = run_loop(trajectory, profile, opts, desc, core=core)
    record = loop.record(limits)
    record["saturated_ticks"] = saturated_ticks(loop, limits)
    return record


def saturated_ticks(loop, limits) -> int:
    """Ticks up to the motion's end whose command's drive acceleration sits at the drives' limit (within 1e-6 of it,
    from the commands sent: ``LoopResult.acceleration_deviation`` plus the plan's)."""
    nk = len(loop.drive_names)
    rho = loop.commands[:, -nk:]
    ok = np.flatnonzero((loop.k[2:] - loop.k[:-2] == 2) & (loop.k[2:] <= loop.N)) + 2
    acc = np.abs(rho[ok] - 2.0 * rho[ok - 1] + rho[ok - 2]) / loop.dt ** 2
    return int(np.count_nonzero(np.any(acc >= limits.max_acceleration * (1 - 1e-6), axis=1)))


def rms(record: dict) -> str:
    return " / ".join(f"{v['rms_deg']:.2f}" for v in record["errors"].values())


def start_and_guard(trajectory, desc, limits, seeds) -> None:
    print("| variant | seed | RMS shoulder / elbow [°] | lowest tension [N] (first 0.1 s) | guard ticks |")
    print("|---|---|---|---|---|")
    for label, kw in (("default", {}), ("no start blend", dict(start_blend=0.0)), ("no tension guard",
                                                                                 dict(guard=False)),
                      ("feed-forward only", dict(feedback=False))):
        for seed in seeds:
            r = run(trajectory, REALISTIC.replace(seed=seed), desc, limits, **kw)
            state = "abort" if r["aborted"] else rms(r)
            print(f"| {label} | {seed} | {state} | {r['tension_min_n']['motion']:.3f} "
                  f"({r['tension_min_start_n']:.3f}) | {r['guarded_ticks']} |", flush=True)


def quiet_commands(trajectory, desc, limits) -> None:
    print("| plant | acceleration budget | RMS shoulder / elbow [°] | carriage, string: acceleration - plan's, RMS "
          "(max) [m/s²] |")
    print("|---|---|---|---|")
    for plant, profile in (("realistic", REALISTIC), ("encoder noise ×3", REALISTIC.replace(**FAMILY[
            "encoder noise ×3"]))):
        for budget in (0.0, 5.0, 2.0):
            r = run(trajectory, profile, desc, limits, feedback_acceleration=budget)
            state = "abort" if r["aborted"] else rms(r)
            acc = ", ".join(f"{c['acceleration_deviation_rms']:.2f} ({c['acceleration_deviation_max']:.1f})"
                            for c in r["commands"].values())
            print(f"| {plant} | {budget:g} | {state} | {acc} |", flush=True)


#: the quieter estimate traded against the integral's weight (docs/tracking.md, "Quiet commands"): (label,
#: EstimatorNoise changes, GainDesign changes)
QUIETER = (("default", {}, {}),
           ("σ_q 8e-3, w_i 5e6", dict(measurement=8e-3), dict(angle_integral=5e6)),
           ("σ_q 8e-3", dict(measurement=8e-3), {}),
           ("σ_q 4e-3", dict(measurement=4e-3), {}),
           ("w_i 5e6", {}, dict(angle_integral=5e6)))
LATE = {"2 % late": dict(command_jitter_steps=1, command_jitter_probability=0.02),
        "10 % late": dict(command_jitter_steps=1, command_jitter_probability=0.10)}


def quieter_estimate(trajectory, desc, limits, seeds) -> None:
    """The wave with a Kalman filter that trusts the model more (a larger σ_q) and/or the integral weight raised:
    chatter, RMS, and aborts with late commands on every seed."""
    system = _core.DiscreteSystem(desc.model, trajectory.dt)
    print("| estimator and integral | realistic: RMS [°], carriage acceleration - plan's RMS [m/s²] | "
          + " | ".join(f"{k}: aborts of {len(seeds)}" for k in LATE) + " |")
    print("|---|---|" + "---|" * len(LATE))
    for label, noise, design in QUIETER:
        traj = design_gains(system, trajectory.X, trajectory.U, dataclasses.replace(
            GainDesign.of(trajectory), **design)).attach(trajectory)
        estimator = dataclasses.replace(EstimatorNoise(), **noise)
        r = run(traj, REALISTIC, desc, limits, noise=estimator)
        aborts = [sum(run(traj, REALISTIC.replace(seed=seed, **late), desc, limits, noise=estimator)["aborted"]
                      for seed in seeds) for late in LATE.values()]
        print(f"| {label} | {rms(r)}, {r['commands']['carriage']['acceleration_deviation_rms']:.2f} | "
              + " | ".join(str(a) for a in aborts) + " |", flush=True)


#: the stand-in's encoders with one part switched off (docs/tracking.md, "Quiet commands": where the chatter comes
#: from): (label, noise_std and encoder_resolution per configuration: shoulder, elbow, carriage, string)
_NS, _RES = REALISTIC.noise_std, REALISTIC.encoder_resolution
CHATTER_SOURCES = (("realistic", _NS, _RES), ("joint encoders only", _NS[:2] + (0, 0), _RES[:2] + (0, 0)),
                   ("drive encoders only", (0, 0) + _NS[2:], (0, 0) + _RES[2:]),
                   ("joint noise, no quantization", _NS[:2] + (0, 0), (0,) * 4),
                   ("joint quantization, no noise", (0,) * 4, _RES[:2] + (0, 0)), ("no encoder error", (0,) * 4, (0,) * 4))
BANDS_HZ = ((0, 5), (5, 10), (10, 20), (20, 35), (35, 51))
#: the law without the quiet feedback's lag (the default) and with it at 10 Hz
LOUD = ControllerOptions(quiet=QuietOptions(cutoff=0.0))
QUIET = ControllerOptions(quiet=QuietOptions(cutoff=10.0))
#: the Kalman filter's joint measurement σ_q tried for quieter commands (the first: the default)
QUIET_SIGMAS = (EstimatorNoise.measurement, 4e-3, 4.5e-3, 5e-3)


def chatter_sources(wave, desc) -> None:
    """The carriage's commanded acceleration minus the plan's (RMS, max) with parts of the encoder error switched off,
    and the share of its power in each frequency band (:data:`BANDS_HZ`), without and with the quiet feedback."""
    print("| law | encoders | RMS shoulder / elbow [°] | carriage deviation RMS (max) [m/s²] | power share "
          + " / ".join(f"{a}–{b}" for a, b in BANDS_HZ) + " Hz |")
    print("|---|---|---|---|---|")
    for law, options in (("without the lag", LOUD), ("quiet feedback", QUIET)):
        for label, noise, resolution in CHATTER_SOURCES:
            chatter_row(wave, desc, law, options, label, noise, resolution)


def chatter_row(wave, desc, law, options, label, noise, resolution) -> None:
    """One row of :func:`chatter_sources`."""
    r = run_loop(wave, REALISTIC.replace(noise_std=noise, encoder_resolution=resolution), options, desc)
    dev = r.acceleration_deviation()[:, 0]
    power = np.abs(np.fft.rfft(dev)) ** 2
    f = np.fft.rfftfreq(len(dev), wave.dt)
    shares = [power[(f >= a) & (f < b)].sum() / power.sum() for a, b in BANDS_HZ]
    c = r.commands_summary()["carriage"]
    errors = " / ".join(format(v["rms_deg"], ".3f") for v in r.summary().values())
    print(f"| {law} | {label} | {errors} | "
          f"{c['acceleration_deviation_rms']:.2f} ({c['acceleration_deviation_max']:.1f}) | "
          + " / ".join(f"{x:.2f}" for x in shares) + " |", flush=True)


def library_targets(record: dict, open_loop: dict) -> bool:
    """The library's checks of a closed-loop run against its feed-forward-only run (records of
    ``LoopResult.record``): no abort, closed ≤ feed-forward on every joint, the plant's string at or above its minimum
    (0.5 N: the arm's ``min_tension``) during the motion and over its first 0.1 s."""
    closed = [v["rms_deg"] for v in record["errors"].values()]
    opened = [v["rms_deg"] for v in open_loop["errors"].values()]
    return (not record["aborted"] and all(c <= o for c, o in zip(closed, opened))
            and min(record["tension_min_n"]["motion"], record["tension_min_start_n"]) >= 0.5)


def quieter_sigma(motions: dict, desc, limits, seeds) -> None:
    """Every motion and seed with the filter's σ_q of :data:`QUIET_SIGMAS` (the integral weight kept; the law without
    the quiet feedback's lag, :data:`LOUD`): RMS, max, the
    elbow's feed-forward-only over closed-loop RMS, the carriage's deviation RMS, the library's checks; then the wave's
    pushes and late commands."""
    print("| σ_q | motion | seed | RMS shoulder / elbow (max) [°] | feed-forward / closed, elbow | carriage deviation "
          "RMS [m/s²] | library checks |")
    print("|---|---|---|---|---|---|---|")
    for sigma in QUIET_SIGMAS:
        noise = dataclasses.replace(EstimatorNoise(), measurement=sigma)
        for name, trajectory in motions.items():
            for seed in seeds:
                profile = REALISTIC.replace(seed=seed)
                r = run(trajectory, profile, desc, limits, noise=noise, quiet=LOUD.quiet)
                o = run(trajectory, profile, desc, limits, feedback=False)
                worst = max(v["max_deg"] for v in r["errors"].values())
                ratio = o["errors"]["elbow"]["rms_deg"] / r["errors"]["elbow"]["rms_deg"]
                print(f"| {sigma:g} | {name} | {seed} | {rms(r)} ({worst:.2f}) | {ratio:.2f} | "
                      f"{r['commands']['carriage']['acceleration_deviation_rms']:.2f} | "
                      f"{'met' if library_targets(r, o) else 'NOT met'} |", flush=True)
    wave = motions.get("wave") or optimized("wave")
    print(f"\n{ROBUSTNESS_HEADER.replace('design', 'σ_q')}\n|---|---|---|---|")
    for sigma in QUIET_SIGMAS:
        options = dataclasses.replace(LOUD, noise=dataclasses.replace(EstimatorNoise(), measurement=sigma))
        print(f"| {sigma:g} | {wave_robustness(wave, desc, options, PUSH_SEEDS)} |", flush=True)


#: noise seeds of the pushes (the default's recovery from the largest one depends on the seed)
PUSH_SEEDS = tuple(range(6))
ROBUSTHEADER_CELLS = ("pushes (N at s): recovered (back within 1°) on how many seeds, the slowest [s] | 10 % late, "
                      "12 seeds: aborted, worst RMS of the others [°] | 2 % late, 6 seeds: aborted")
ROBUSTNESS_HEADER = f"| design | {ROBUSTHEADER_CELLS} |"


def wave_robustness(wave, desc, options: ControllerOptions, push_seeds, core=None) -> str:
    """The robustness cells of a design on the wave: each of :data:`PUSHES` on every seed of ``push_seeds``, 10 % of
    commands late over twelve seeds, 2 % over six. ``core(options)``: a ready core for a run (default: built from
    the options)."""
    def loop(profile, opts, **kw):
        return run_loop(wave, profile, opts, desc, core=None if core is None else core(opts), **kw)
    unbounded = dataclasses.replace(options, tolerances={"path": {n: 0.0 for n in desc.model.config_names}})
    cells = []
    for force, at in PUSHES:
        push = scripted_push(at, wave.dt, force)
        times = [loop(REALISTIC.replace(seed=s), unbounded, pushes=[push]).recovery_time(push.tick) for s in push_seeds]
        back = [t for t in times if t is not None]
        cells.append(f"{force:g} at {at:g}: {len(back)}/{len(times)}" + (f" ({max(back):.2f})" if back else ""))
    late = [loop(REALISTIC.replace(seed=s, **LATE["10 % late"]), options) for s in range(12)]
    worst = max((v["rms_deg"] for r in late if not r.aborted for v in r.summary().values()), default=np.nan)
    few = sum(loop(REALISTIC.replace(seed=s, **LATE["2 % late"]), options).aborted for s in range(6))
    return f"{'; '.join(cells)} | {sum(r.aborted for r in late)}, {worst:.2f} | {few}"


#: the designs of the "Quiet commands" comparison: (label, controller options, keywords of
#: :func:`marionette_control.study.quiet_commands.quiet_core`'s innovation-scheduled estimator or None)
QUIET_DESIGNS = (("quiet feedback, 10 Hz", QUIET, None),
                 ("without the lag (the default)", LOUD, None),
                 ("the lag never stepped aside", ControllerOptions(quiet=QuietOptions(cutoff=10.0, threshold=1.0,
                                                                                     drive_threshold=1.0)), None),
                 ("stepped aside on the innovation test only", ControllerOptions(quiet=QuietOptions(
                     cutoff=10.0, drive_threshold=1.0)), None),
                 ("innovation-scheduled estimator σ_q 8e-3 / 2e-3, test 2 mrad, no lag", LOUD,
                  dict(quiet=8e-3, threshold=2e-3, hold=20)))


def quiet_designs(motions: dict, desc, seeds) -> None:
    """The designs of :data:`QUIET_DESIGNS` on every motion and seed: RMS, the elbow's feed-forward-only over closed,
    the carriage's deviation RMS, the library's checks; then the wave's robustness (pushes on :data:`PUSH_SEEDS`)."""
    print("| design | motion | seed | RMS shoulder / elbow (max) [°] | feed-forward / closed, elbow | carriage "
          "deviation RMS [m/s²] | library checks |")
    print("|---|---|---|---|---|---|---|")
    limits = from_description(desc)
    for label, options, estimator in QUIET_DESIGNS:
        for name, trajectory in motions.items():
            for seed in seeds:
                profile = REALISTIC.replace(seed=seed)
                core = None if estimator is None else quiet_core(desc, options, trajectory, **estimator)
                loop = run_loop(trajectory, profile, options, desc, core=core)
                r = loop.record(limits)
                o = run(trajectory, profile, desc, limits, feedback=False)
                worst = max(v["max_deg"] for v in r["errors"].values())
                ratio = o["errors"]["elbow"]["rms_deg"] / r["errors"]["elbow"]["rms_deg"]
                errors = " / ".join(format(v["rms_deg"], ".3f") for v in r["errors"].values())
                print(f"| {label} | {name} | {seed} | {errors} ({worst:.2f}) | {ratio:.2f} | "
                      f"{r['commands']['carriage']['acceleration_deviation_rms']:.2f} | "
                      f"{'met' if library_targets(r, o) else 'NOT met'} |", flush=True)
    wave = motions.get("wave") or optimized("wave")
    print(f"\n{ROBUSTNESS_HEADER}\n|---|---|---|---|")
    for label, options, estimator in QUIET_DESIGNS:
        factory = None if estimator is None else (lambda opts: quiet_core(desc, opts, wave, **estimator))
        print(f"| {label} | {wave_robustness(wave, desc, options, PUSH_SEEDS, core=factory)} |", flush=True)


def anti_windup(motions: dict, desc, limits, seeds) -> None:
    print("| motion | seed | closed loop, anti-windup (default): RMS shoulder / elbow [°], lowest tension [N], "
          "ticks at the acceleration limit | integrating through saturation | feed-forward only |")
    print("|---|---|---|---|---|")
    for name, trajectory in motions.items():
        for seed in seeds:
            profile = REALISTIC.replace(seed=seed)
            cells = []
            for kw in (dict(), dict(anti_windup=False)):
                r = run(trajectory, profile, desc, limits, **kw)
                state = (f"abort at {r['ticks'] * trajectory.dt:.1f} s ({rms(r)})" if r["aborted"] else rms(r))
                cells.append(f"{state}, {r['tension_min_n']['motion']:.3f}, {r['saturated_ticks']}")
            o = run(trajectory, profile, desc, limits, feedback=False)
            print(f"| {name} | {seed} | {cells[0]} | {cells[1]} | {rms(o)} |", flush=True)


#: the arm's gain design (its spec's ``tracking_gains``, = config/optimizer.yaml's): the default of every run here
ARM_GAINS = load_spec(config_file("optimize", "marionette_arm_wave.yaml")).gains
#: GainDesign's model-agnostic defaults, the arm's default until the shoulder got its own weight (issue 24)
PREVIOUS = GainDesign()
#: designs of the robustness table: the default, the previous one and two that reject the swings' damping error on
#: the shoulder with one weight for both joints
DESIGNS = {"default (shoulder 5e3)": ARM_GAINS, "previous default": PREVIOUS,
           "angle_integral 1e7": GainDesign(angle_integral=1e7),
           "drive_acceleration 5e-3": GainDesign(drive_acceleration=5e-3)}


def _shoulder(angle: float = 1e3, integral: float = 2.5e6, elbow_integral: float = 2.5e6, **changes) -> GainDesign:
    """The previous default with the shoulder's angle and integral weights ``angle``, ``integral`` and the elbow's
    integral weight ``elbow_integral``; ``changes``: other fields."""
    return GainDesign(dynamic_configuration={"shoulder": angle, "elbow": 1e3},
                      angle_integral={"shoulder": integral, "elbow": elbow_integral}, **changes)


#: the designs of the gain scan (``--gains``): the previous default, one weight for both joints raised, the shoulder's
#: angle or integral weight raised alone, and with the elbow's loop made faster to keep the wave's elbow target
GAIN_SCAN = {"previous default (1e3, integral 2.5e6, acceleration 2e-2)": PREVIOUS,
             "integral 5e6": GainDesign(angle_integral=5e6),
             "acceleration 1e-2": GainDesign(drive_acceleration=1e-2),
             "integral 1e7": GainDesign(angle_integral=1e7),
             "acceleration 5e-3": GainDesign(drive_acceleration=5e-3),
             "shoulder 3e3": _shoulder(3e3),
             "shoulder 5e3": _shoulder(5e3),
             "shoulder 1e4": _shoulder(1e4),
             "shoulder integral 5e6": _shoulder(integral=5e6),
             "shoulder integral 1e7": _shoulder(integral=1e7),
             "shoulder 5e3, acceleration 1.8e-2": _shoulder(5e3, drive_acceleration=1.8e-2),
             "shoulder 5e3, acceleration 1.6e-2": _shoulder(5e3, drive_acceleration=1.6e-2),
             "shoulder 8e3, acceleration 1.2e-2": _shoulder(8e3, drive_acceleration=1.2e-2),
             "shoulder 6e3, elbow integral 3.5e6": _shoulder(6e3, elbow_integral=3.5e6),
             "integral shoulder 7e6, elbow 4e6": _shoulder(integral=7e6, elbow_integral=4e6),
             "shoulder 5e3, integral 3e6 (default)": ARM_GAINS}
#: the plants of the family checked by test/test_tracking_safety.py::test_the_plant_family (damping ×3 is not met)
FAMILY_CHECKED = [p for p in FAMILY if p != "damping_x3"]
ONE_MRAD = REALISTIC.replace(noise_std=(1e-3, 1e-3) + REALISTIC.noise_std[2:])
PUSHES = ((0.5, 5.6), (0.55, 5.6), (0.5, 3.0), (0.6, 5.6))


def robustness(wave, desc) -> None:
    print("| gains | anti-windup | 10 % late commands, 12 seeds: aborted, worst RMS of the others [°] | pushes (N at s): "
          "seconds until back within 1° ('-': never), largest error [°] |")
    print("|---|---|---|---|")
    system = _core.DiscreteSystem(desc.model, wave.dt)
    late = REALISTIC.replace(**LATE["10 % late"])
    unbounded = {"path": {n: 0.0 for n in desc.model.config_names}}
    for name, design in DESIGNS.items():
        t = design_gains(system, wave.X, wave.U, design).attach(wave)
        for aw in (True, False):
            runs = [run_loop(t, late.replace(seed=s), ControllerOptions(anti_windup=aw), desc) for s in range(12)]
            worst = max((v["rms_deg"] for r in runs if not r.aborted for v in r.summary().values()), default=np.nan)
            cells = []
            for force, at in PUSHES:
                push = scripted_push(at, t.dt, force)
                r = run_loop(t, REALISTIC, ControllerOptions(anti_windup=aw, tolerances=unbounded), desc, pushes=[push])
                back = r.recovery_time(push.tick)
                cells.append(f"{force:g} at {at:g}: {'-' if back is None else format(back, '.2f')} "
                             f"({np.degrees(np.abs(r.angle_errors()[push.tick:]).max()):.1f})")
            print(f"| {name} | {'on' if aw else 'off'} | {sum(r.aborted for r in runs)}, {worst:.2f} | "
                  f"{'; '.join(cells)} |", flush=True)


def gain_scan(motions: dict, desc, limits, seeds) -> None:
    """Every design of :data:`GAIN_SCAN` on every motion and seed of the realistic profile against feed-forward only,
    the wave's tracking targets and robustness, and the plant family's checks (module docstring)."""
    print("| design | library, seeds " + ",".join(map(str, seeds)) + ": runs failing its checks (worst closed / "
          "feed-forward RMS) | elbow swings' shoulder closed (feed-forward) [°] | wave: feed-forward / closed on the "
          "elbow (max error [°]) | lowest tension [N] | " + ROBUSTHEADER_CELLS + " | 1 mrad noise, 3 seeds: aborted | "
          "plant family (wave, bow, figure-eight; not damping ×3): runs failing |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    opened = {(n, s): run(t, REALISTIC.replace(seed=s), desc, limits, feedback=False)
              for n, t in motions.items() for s in seeds}
    for label, design in GAIN_SCAN.items():
        redesigned = {n: design_gains(_core.DiscreteSystem(desc.model, t.dt), t.X, t.U, design).attach(t)
                      for n, t in motions.items()}
        failing, ratio, swings, wave, wave_max, tension = 0, 0.0, [], [], 0.0, np.inf
        for (n, s), o in opened.items():
            r = run(redesigned[n], REALISTIC.replace(seed=s), desc, limits)
            failing += not library_targets(r, o)
            c = [v["rms_deg"] for v in r["errors"].values()]
            f = [v["rms_deg"] for v in o["errors"].values()]
            ratio = max(ratio, *(a / b for a, b in zip(c, f)))
            tension = min(tension, r["tension_min_n"]["motion"], r["tension_min_start_n"])
            if n == "elbow_swings":
                swings.append(f"{c[0]:.2f} ({f[0]:.2f})")
            if n == "wave":
                wave.append(f[1] / c[1])
                wave_max = max(wave_max, *(v["max_deg"] for v in r["errors"].values()))
        wave_t = redesigned["wave"]
        noisy = sum(run_loop(wave_t, ONE_MRAD.replace(seed=s), ControllerOptions(), desc).aborted for s in range(3))
        family = 0
        for n in ("wave", "bow", "figure_eight"):
            for plant in FAMILY_CHECKED:
                profile = REALISTIC.replace(**FAMILY[plant])
                family += not library_targets(run(redesigned[n], profile, desc, limits),
                                              run(redesigned[n], profile, desc, limits, feedback=False))
        print(f"| {label} | {failing} ({ratio:.2f}) | {', '.join(swings)} | {min(wave):.2f} ({wave_max:.2f}) | "
              f"{tension:.3f} | {wave_robustness(wave_t, desc, ControllerOptions(), PUSH_SEEDS)} | {noisy} | "
              f"{family} |", flush=True)


def plant_family(motions: dict, desc, limits) -> None:
    print("| motion | plant | closed loop RMS shoulder / elbow [°] | feed-forward only | lowest tension closed "
          "(feed-forward only) [N] | guard ticks |")
    print("|---|---|---|---|---|---|")
    for name, trajectory in motions.items():
        for plant, changes in FAMILY.items():
            profile = REALISTIC.replace(**changes)
            c = run(trajectory, profile, desc, limits)
            o = run(trajectory, profile, desc, limits, feedback=False)
            worse = [j for j in c["errors"] if c["errors"][j]["rms_deg"] > o["errors"][j]["rms_deg"]]
            state = "abort" if c["aborted"] else rms(c) + (f" (worse: {', '.join(worse)})" if worse else "")
            print(f"| {name} | {plant} | {state} | {'abort' if o['aborted'] else rms(o)} | "
                  f"{c['tension_min_n']['motion']:.3f} ({o['tension_min_n']['motion']:.3f}) | "
                  f"{c['guarded_ticks']} |", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--motions", default="wave,bow,figure_eight")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--quiet", default="", metavar="MOTIONS",
                    help="only the quiet-command tables (chatter sources, σ_q against the targets), of these motions")
    ap.add_argument("--anti-windup", default="", metavar="MOTIONS",
                    help="only the anti-windup table, of these motions (comma-separated)")
    ap.add_argument("--gains", default="", metavar="MOTIONS",
                    help="only the gain designs' scan, on these motions (comma-separated; the wave among them)")
    args = ap.parse_args(argv)
    desc = arm.load_description()
    limits = from_description(desc)
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.quiet:
        motions = {name: optimized(name) for name in args.quiet.split(",")}
        print("Where the chatter comes from, the wave, seed 0:")
        chatter_sources(motions.get("wave") or optimized("wave"), desc)
        print("\nThe filter's σ_q raised, the realistic profile:")
        quieter_sigma(motions, desc, limits, seeds)
        print("\nThe designs compared, the realistic profile:")
        quiet_designs(motions, desc, seeds)
        return 0
    if args.gains:
        print("Gain designs, the realistic profile:")
        gain_scan({name: optimized(name) for name in args.gains.split(",")}, desc, limits, seeds)
        return 0
    if args.anti_windup:
        print("Anti-windup, the realistic profile:")
        motions = {name: optimized(name) for name in args.anti_windup.split(",")}
        anti_windup(motions, desc, limits, seeds)
        print("\nRobustness, the wave:")
        robustness(motions.get("wave") or optimized("wave"), desc)
        return 0
    motions = {name: optimized(name) for name in args.motions.split(",")}
    wave = motions.get("wave") or optimized("wave")
    print("Start and tension guard, the wave on the realistic profile:")
    start_and_guard(wave, desc, limits, seeds)
    print("\nQuiet commands, the wave, seed 0:")
    quiet_commands(wave, desc, limits)
    print("\nA quieter estimate, the wave (late commands on every seed):")
    quieter_estimate(wave, desc, limits, seeds)
    print("\nThe plant family, seed 0:")
    plant_family(motions, desc, limits)
    return 0


if __name__ == "__main__":
    sys.exit(main())
