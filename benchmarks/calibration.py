"""Calibration group: the fit's time on an 8 s recording of the stand-in (issue 25), and what it recovered.

The recording: the optimized 8 s wave (``config/optimize/marionette_arm_wave.yaml``) sent open loop to the hardware
stand-in's realistic profile (its plant ``config/marionette_arm_plant.yaml``, drives, encoders and one-sided
string, seed 0), written as a rosbag2 directory the way the recorder writes ``/joint_states``; then
``marionette-calibrate``'s fit (:func:`marionette_control.identification.calibration.calibrate`: equation error,
output-error refinement, the default parameters) read from that bag. Figures: ``calibration.fit_time`` (s, wall,
median of repeated fits), ``calibration.fit_cpu`` (s of this process's CPU: the fit runs on one core),
``calibration.equation_error`` and ``calibration.output_error`` (s, the two stages of one fit), and the accuracy
against the plant's true values: ``calibration.damping_error`` (largest relative error of the joints' damping, %)
and ``calibration.hook_error`` (mm).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.registry import Context, Figure, benchmark_group


@benchmark_group("calibration", "marionette-calibrate's fit on an 8 s bag of the stand-in")
def calibration_group(ctx: Context) -> list[Figure]:
    from marionette_control.bags.stand_in import run_open_loop, write_bag
    from marionette_control.identification.calibration import calibrate
    from marionette_control.identification.parameters import ModelParameters
    from marionette_control.identification.recording import from_bag
    from marionette_control.ocp.spec import load_spec
    from marionette_control.ocp.spec_problem import solve_spec
    from marionette_control.resources import config_file

    wave = solve_spec(load_spec(config_file("optimize", "marionette_arm_wave.yaml"))).trajectory
    Q, C, _, _ = run_open_loop(wave, "marionette_arm_plant.yaml", seed=0)
    params = ModelParameters(config_file("marionette_arm.yaml"))
    truth = ModelParameters(config_file("marionette_arm_plant.yaml"))
    walls, cpus, stages = [], [], []
    with tempfile.TemporaryDirectory() as d:
        bag = write_bag(Path(d) / "bag", params.description, wave.dt, Q, C)
        for _ in range(1 if ctx.quick else 3):
            t0, c0 = time.perf_counter(), time.process_time()
            _, report = calibrate(params, from_bag(bag, params.description, wave.dt))
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
            stages.append(report["timing_s"])
    est = report["parameters"]
    damping = max(abs(est[n]["estimate"] / truth.nominal(truth.parameter(n)) - 1) for n in
                  ("shoulder.damping", "elbow.damping"))
    hook = max(abs(est[n]["estimate"] - truth.nominal(truth.parameter(n))) for n in
               ("hook.translation.y", "hook.translation.z"))
    ctx.log(f"  calibration: {statistics.median(walls):.2f} s wall, {statistics.median(cpus):.2f} s CPU; damping "
            f"error {100 * damping:.1f} %, hook {1e3 * hook:.3f} mm")
    return [Figure("calibration.fit_time", statistics.median(walls), "s", notes="8 s bag, default parameters"),
            Figure("calibration.fit_cpu", statistics.median(cpus), "s"),
            Figure("calibration.equation_error", statistics.median(s["equation_error"] for s in stages), "s"),
            Figure("calibration.output_error", statistics.median(s["output_error"] for s in stages), "s"),
            Figure("calibration.damping_error", 100 * damping, "%"),
            Figure("calibration.hook_error", 1e3 * hook, "mm")]
