"""The offline closed loop (controller core + SimulatedArm, no ROS) and its command-line tool.

The cross-process runs are compared with it in test_closed_loop.py; here: on the ideal arm that is the
model the loop tracks a limit-respecting trajectory exactly, with and without command delay; each effect
of the stand-in shows in the errors the way physics says; the tool's options and errors.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from marionette_control.cli import track_offline
from marionette_control.tracking.controller import ControllerOptions
from marionette_control.sim.offline_loop import run_loop
from marionette_control.sim.profile import HardwareProfile
from marionette_control.trajectory import Trajectory
from marionette_control.model.library import marionette_arm as ma

from arm_helpers import bump_trajectory

DT = 0.01


@pytest.fixture(scope="module")
def bump(tmp_path_factory):
    """test/arm_helpers.py's limit-respecting sin² bump (3 s) with gains for 0 and 1 step of delay, as files."""
    d = tmp_path_factory.mktemp("bump")
    return {delay: bump_trajectory(DT, 300, delay=delay)[1].save(d / f"bump{delay}.npz") for delay in (0, 1)}


def test_the_ideal_arm_is_tracked_exactly_with_and_without_delay(bump):
    """The 'perfect' arm is the model: with the delay the controller compensates, every tick's estimate is the
    true state and the true angles follow the trajectory to the integrator's tolerance."""
    for delay in (0, 1):
        traj = Trajectory.load(bump[delay])
        r = run_loop(traj, HardwareProfile.named("perfect", command_delay_steps=delay),
                     ControllerOptions(command_delay_steps=delay))
        assert len(r.k) == traj.N + 51 and list(r.k) == list(range(traj.N + 51)) and not r.aborted
        assert r.fault_counts == {} and r.status[1] == "trajectory finished; holding the final state"
        np.testing.assert_allclose(r.X_hat, r.X_true, atol=1e-9)
        np.testing.assert_allclose(r.X_ref[:traj.N + 1], traj.X, atol=0)
        if delay == 0:
            assert np.max(np.abs(r.angle_errors())) < 1e-9
        else:  # step 0's input was commanded before tracking began (the drives held still): corrected after
            assert max(s["max_deg"] for s in r.summary().values()) < 0.05


def test_each_effect_shows_in_the_errors(bump):
    """Feed-forward only on the ideal arm is exact for this trajectory; the delay without compensation costs
    accuracy; the feedback removes most of a model error; encoder noise reaches the estimate, not garbage."""
    t0, t1 = Trajectory.load(bump[0]), Trajectory.load(bump[1])
    perfect = HardwareProfile.named("perfect")
    ff = run_loop(t0, perfect, ControllerOptions(command_delay_steps=0, feedback=False)).summary()
    assert all(s["max_deg"] < 1e-6 for s in ff.values()), ff
    late = run_loop(t0, perfect.replace(command_delay_steps=1), ControllerOptions(command_delay_steps=0)).summary()
    compensated = run_loop(t1, perfect.replace(command_delay_steps=1), ControllerOptions()).summary()
    assert all(compensated[n]["rms_deg"] < 0.2 * late[n]["rms_deg"] for n in late), (compensated, late)
    plant = perfect.replace(plant_model_file="marionette_arm_plant.yaml")
    closed = run_loop(t0, plant, ControllerOptions(command_delay_steps=0)).summary()
    opened = run_loop(t0, plant, ControllerOptions(command_delay_steps=0, feedback=False)).summary()
    worst = max(opened, key=lambda n: opened[n]["rms_deg"])
    assert closed[worst]["rms_deg"] < 0.5 * opened[worst]["rms_deg"], (closed, opened)
    noisy = run_loop(t0, perfect.replace(noise_std=(1e-3, 1e-3, 0.0, 0.0)), ControllerOptions(command_delay_steps=0))
    e = noisy.X_hat[:, :2] - noisy.X_true[:, :2]
    assert np.sqrt(np.mean(e ** 2)) < 1e-3 and noisy.fault_counts == {}


def test_a_start_far_from_the_trajectory_is_refused(bump):
    traj = Trajectory.load(bump[1])
    q0 = ma.static_equilibrium(ma.load_description().model, ma.LOWERED[0], ma.LOWERED[1] + 0.19).q
    with pytest.raises(RuntimeError, match="the controller did not start: refused: the arm is not where"):
        run_loop(traj, HardwareProfile.named("realistic"), ControllerOptions(), q0=q0)


def test_command_line_tool(bump, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert track_offline.main([str(bump[1]), "--open-loop", "--json", str(out), "--csv", str(tmp_path / "r.csv"),
                               "--hardware", "noise_std=0.001,0.001,0,0", "-p", "estimator_noise.momentum=0.002"]) == 0
    text = capsys.readouterr().out
    assert "closed loop: 351 ticks" in text and "feed-forward only" in text and "open / closed loop RMS" in text
    report = json.loads(out.read_text())
    assert report["profile"]["noise_std"] == [0.001, 0.001, 0.0, 0.0]
    assert report["controller"]["estimator_noise.momentum"] == 0.002 and report["controller"]["command_delay_steps"] == 1
    assert set(report["closed_loop"]) == {"shoulder", "elbow"} and report["ratio"]["open_over_closed"] > 1
    assert len((tmp_path / "r.csv").read_text().splitlines()) == 352
    # gains redesigned for the controller's delay on the command line; a file's gains for another delay refused
    assert track_offline.main([str(bump[0]), "--profile", "perfect", "--design", "dynamic_configuration=100"]) == 0
    assert track_offline.main([str(bump[0])]) == 2
    assert "designed for a command delay of 0 step(s)" in capsys.readouterr().err
    for bad, message in ((["--hardware", "bogus=1"], "unknown HardwareProfile field 'bogus'"),
                         (["-p", "nonsense=1"], "unknown controller parameter 'nonsense'"),
                         (["--design", "weight=1"], "unknown GainDesign field(s) weight"),
                         (["--design", "input=0"], "gain design weight 'input' must be > 0"),
                         (["-p", "feedback=maybe"], "expected true or false")):
        assert track_offline.main([str(bump[1]), *bad]) == 2
        assert message in capsys.readouterr().err
