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
from marionette_control.model.limits import from_description
from marionette_control.sim.offline_loop import Push, run_loop
from marionette_control.sim.profile import HardwareProfile
from marionette_control.trajectory import Trajectory
from marionette_control.model.library import marionette_arm as ma
from marionette_control.resources import config_file

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
    assert set(report["closed_loop"]["errors"]) == {"shoulder", "elbow"} and report["ratio"]["open_over_closed"] > 1
    # the tension guard's count, the string over the first 0.1 s, the feedback's share of the drives' acceleration
    closed, opened = report["closed_loop"], report["open_loop"]
    assert closed["guarded_ticks"] >= 0 and opened["guarded_ticks"] == 0  # no guard without feedback
    assert closed["tension_min_start_n"] >= closed["tension_min_n"]["motion"]
    assert set(closed["commands"]) == {"carriage", "string_length"}
    assert closed["commands"]["carriage"]["acceleration_deviation_rms"] > 0
    assert opened["commands"]["carriage"]["acceleration_deviation_rms"] == 0  # feed-forward only: the plan's own
    assert f"tension guard acted on {closed['guarded_ticks']} ticks" in text
    assert len((tmp_path / "r.csv").read_text().splitlines()) == 352
    # gains redesigned for the controller's delay on the command line; a file's gains for another delay refused
    assert track_offline.main([str(bump[0]), "--profile", "perfect", "--design", "dynamic_configuration=100"]) == 0
    assert track_offline.main([str(bump[0])]) == 2
    assert "designed for a command delay of 0 step(s)" in capsys.readouterr().err
    # the controller's model file: a trajectory made for another model (here the damping x3 variant, the plant too:
    # a calibrated model) runs with it and is refused without it; --model and -p model_file name the same parameter
    variant = ma.load_description(config_file("plants", "damping_x3.yaml"))
    other = bump_trajectory(DT, 300, model=variant.model, delay=1)[1].save(tmp_path / "variant.npz")
    plant = ["--plant", "plants/damping_x3.yaml"]
    assert track_offline.main([str(other), "--model", "plants/damping_x3.yaml", *plant, "--json", str(out)]) == 0
    assert json.loads(out.read_text())["model_file"] == str(variant.path)
    assert "closed loop: 351 ticks" in capsys.readouterr().out
    assert track_offline.main([str(other), "-p", "model_file=plants/damping_x3.yaml", *plant]) == 0
    capsys.readouterr()
    for args, message in ((["--model", "plants/damping_x3.yaml", "-p", "model_file=plants/damping_x3.yaml"],
                           "--model and -p model_file=... both name the controller's model"),
                          ([], "trajectory was made for model 'marionette_arm_damping_x3', not 'marionette_arm'"),
                          (["--model", "plants/no_such.yaml"], "plants/no_such.yaml not found")):
        assert track_offline.main([str(other), *args]) == 2
        assert message in capsys.readouterr().err
    for bad, message in ((["--hardware", "bogus=1"], "unknown HardwareProfile field 'bogus'"),
                         (["-p", "nonsense=1"], "unknown controller parameter 'nonsense'"),
                         (["--design", "weight=1"], "unknown GainDesign field(s) weight"),
                         (["--design", "input=0"], "gain design weight 'input' must be > 0"),
                         (["-p", "feedback=maybe"], "expected true or false")):
        assert track_offline.main([str(bump[1]), *bad]) == 2
        assert message in capsys.readouterr().err


def test_json_report_of_each_run_and_the_plant_shorthand(bump, tmp_path, capsys):
    """--json carries per run what the main job reports: abort, the plant string's lowest tension and time slack
    during the motion and after it, the executed worst margins of the commands and the drives' true motion (checked
    here against the CSV's commands and the run itself); --plant FILE is --hardware plant_model_file=FILE."""
    out, csv = tmp_path / "r.json", tmp_path / "r.csv"
    args = [str(bump[1]), "--open-loop", "--plant", "plants/damping_x3.yaml", "--json", str(out), "--csv", str(csv)]
    assert track_offline.main(args) == 0
    text = capsys.readouterr().out
    assert "plant_model_file=plants/damping_x3.yaml" in text and text.count("  string: lowest tension ") == 2
    report = json.loads(out.read_text())
    assert report["profile"]["plant_model_file"] == "plants/damping_x3.yaml"
    assert report["profile"]["string"] == "one_sided"
    limits = from_description(ma.load_description())
    N = Trajectory.load(bump[1]).N
    for run in ("closed_loop", "open_loop"):
        r = report[run]
        assert r["aborted"] is False and r["abort_reason"] == "" and r["ticks"] == N + 51
        assert set(r["tension_min_n"]) == set(r["slack_s"]) == set(r["margins"]) == {"motion", "after_end"}
        assert 0.5 < r["tension_min_n"]["motion"] < 2.0 and r["slack_s"] == {"motion": 0.0, "after_end": 0.0}
        for part in ("motion", "after_end"):
            m = r["margins"][part]
            assert set(m) == {"commands", "drives", "string_tension"} and set(m["drives"]) == {"carriage",
                                                                                               "string_length"}
            assert all(set(d) == {"range", "speed", "acceleration"} for d in (*m["commands"].values(),
                                                                             *m["drives"].values()))
            assert m["string_tension"]["string"]["lowest_N"] == r["tension_min_n"][part]
    # the closed loop's commands as the CSV has them: the range margin of the carriage during the motion
    rows = np.loadtxt(csv, delimiter=",", skiprows=1)
    carriage = rows[rows[:, 0] <= N, -2]
    expected = min((carriage - limits.lower[0]).min(), (limits.upper[0] - carriage).min())
    assert report["closed_loop"]["margins"]["motion"]["commands"]["carriage"]["range"]["margin"] == expected
    # the same run as --hardware plant_model_file=...; both at once, or a plant that is not the arm, refused
    assert track_offline.main([str(bump[1]), "--hardware", "plant_model_file=plants/damping_x3.yaml", "--json",
                               str(tmp_path / "h.json")]) == 0
    assert json.loads((tmp_path / "h.json").read_text())["closed_loop"] == report["closed_loop"]
    capsys.readouterr()
    for bad, message in ((["--plant", "plants/damping_x3.yaml", "--hardware", "plant_model_file=x.yaml"],
                          "--plant and --hardware plant_model_file=... both name the plant"),
                         (["--plant", "plants/none.yaml"], "cannot load the plant model")):
        assert track_offline.main([str(bump[1]), *bad]) == 2
        assert message in capsys.readouterr().err
    # an aborted run says so and why (a path tolerance far below the realistic arm's errors)
    assert track_offline.main([str(bump[1]), "-p", "constraints.elbow.trajectory=0.0001", "--json", str(out)]) == 1
    closed = json.loads(out.read_text())["closed_loop"]
    assert closed["aborted"] is True and "elbow" in closed["abort_reason"] and closed["ticks"] < N


def test_a_push_up_slackens_the_string_and_the_record_shows_it(bump):
    """A 3 N push upward on the forearm for 0.2 s lifts the arm off its string on the realistic (one-sided) plant:
    the record shows the time slack (the ticks whose step was slack) and a lowest tension of 0 during the motion,
    and the holonomic plant instead holds the arm down with a negative tension."""
    traj = Trajectory.load(bump[1])
    push = Push(100, "forearm_inertial", "constant", force=(0.0, 0.0, 3.0), duration=0.2)
    limits = from_description(ma.load_description())
    records = {}
    for string in ("one_sided", "holonomic"):
        r = run_loop(traj, HardwareProfile.named("realistic", string=string), ControllerOptions(), pushes=[push],
                     hold_cycles=5)
        records[string] = (r, r.record(limits))
    r, rec = records["one_sided"]
    slack = r.slack[:, 0]
    assert slack[100:120].any() and not slack[:100].any() and np.all(r.tension[slack, 0] == 0.0)
    assert rec["slack_s"]["motion"] == pytest.approx(np.count_nonzero(slack[r.k < traj.N]) * DT)
    assert rec["tension_min_n"]["motion"] == 0.0 and not rec["margins"]["motion"]["string_tension"]["string"][
        "satisfied"]
    r_h, rec_h = records["holonomic"]
    assert not r_h.slack.any() and rec_h["slack_s"]["motion"] == 0.0 and rec_h["tension_min_n"]["motion"] < -0.5
