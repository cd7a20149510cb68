"""Command-line tools: marionette-optimize, marionette-simulate, marionette-plot, and the progress display."""

import io
import json
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from marionette_control.model import library
from marionette_control.cli import optimize, plot, simulate
from marionette_control.cli.progress import Progress
from marionette_control.trajectory import Trajectory

# Swing the forced pendulum up to inverted and hold it there: open loop, a perturbation grows.
SWINGUP = """\
model: pendulum
dt: 0.02
motion:
  joints: [theta]
  angle_unit: deg
  interpolation: cosine
  keyframes: [[0.0, 0.0], [0.4, 0.0], [1.6, 180.0], [3.0, 180.0]]
  momenta: legendre
weights:
  state: {default: 0.01, theta: 100}
  input: {torque: 0.01}
optimizer:
  max_iterations: 60
"""


@pytest.fixture(scope="module")
def optimized(tmp_path_factory):
    """(directory, trajectory file, stdout of the run) of the swing-up optimized once for the module."""
    d = tmp_path_factory.mktemp("cli")
    spec = d / "swingup.yaml"
    spec.write_text(SWINGUP)
    out = d / "swingup.npz"
    buf = io.StringIO()
    from contextlib import redirect_stdout

    with redirect_stdout(buf):
        code = optimize.main([str(spec), "-o", str(out), "--summary-json", str(d / "summary.json"),
                              "--progress", "plain"])
    assert code == 0, buf.getvalue()
    return d, out, buf.getvalue()


def test_optimize_writes_the_trajectory_with_gains_and_statistics(optimized):
    d, out, text = optimized
    tr = Trajectory.load(out, library.get("pendulum"))
    assert tr.K.shape == (tr.N, 1, 2) and tr.N == 150
    info = tr.info
    assert info["converged"] and info["iterations"] == len(info["history"]) >= 2
    assert info["history"][-1]["descent_norm"] < 1e-6
    assert abs(np.degrees(tr.X[-1, 0]) - 180.0) < 5.0
    summary = json.loads((d / "summary.json").read_text())
    assert summary["cost"] == pytest.approx(info["cost"]) and summary["output"] == str(out)
    # plain progress: one line per iteration, then the summary
    iter_lines = [line for line in text.splitlines() if " iter " in line]
    assert len(iter_lines) == info["iterations"]
    assert "|Dh.dxi|" in iter_lines[0] and "\r" not in text
    assert "theta: RMS error" in text and f"wrote {out}" in text


def test_optimize_reports_bad_specs_and_arguments(tmp_path, capsys):
    spec = tmp_path / "bad.yaml"
    spec.write_text(SWINGUP.replace("dt: 0.02", "dt: -0.02"))
    assert optimize.main([str(spec)]) == 2
    assert f"{spec}: dt: must be > 0" in capsys.readouterr().err
    spec.write_text(SWINGUP)
    assert optimize.main([str(spec), "--set", "weights.state.thta=1"]) == 2
    assert "weights.state.thta: matches no name" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        optimize.main([str(spec), "--set", "no_equals_sign"])
    assert "--set expects KEY=VALUE" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        optimize.main([str(spec), "--deadline", "0"])


def test_optimize_stops_at_the_deadline_and_still_writes(tmp_path, capsys):
    spec = tmp_path / "s.yaml"
    spec.write_text(SWINGUP)
    out = tmp_path / "s.npz"
    assert optimize.main([str(spec), "-o", str(out), "--deadline", "0.0001", "--progress", "quiet"]) == 0
    tr = Trajectory.load(out)
    assert tr.info["reason"] == "deadline" and not tr.info["converged"] and tr.K is not None
    assert "stopped (deadline)" in capsys.readouterr().out


def test_simulate_closed_loop_recovers_where_open_loop_falls(optimized, capsys):
    d, out, _ = optimized
    sim_file = d / "sim.npz"
    assert simulate.main([str(out), "--perturb", "theta=0.05", "-o", str(sim_file),
                          "--summary-json", str(d / "sim.json")]) == 0
    s = json.loads((d / "sim.json").read_text())
    assert s["closed"]["final"] < 0.01 and s["open"]["final"] > 0.5
    assert s["closed"]["rms"] < 0.3 * s["open"]["rms"]
    data, meta = simulate.load_simulation(sim_file)
    assert data["X_closed"].shape == data["X_ref"].shape and meta["perturbation"]["theta"] == 0.05
    assert data["X_closed"][0, 0] == pytest.approx(data["X_ref"][0, 0] + 0.05)
    assert "closed loop" in capsys.readouterr().out


def test_simulate_refuses_a_trajectory_of_another_model_or_with_bad_shapes(optimized, tmp_path, capsys):
    _, out, _ = optimized
    assert simulate.main([str(out), "--model", "double_pendulum"]) == 2
    assert "made for model 'pendulum', not 'double_pendulum'" in capsys.readouterr().err
    assert simulate.main([str(out), "--perturb", "phi=1"]) == 2
    assert "'phi' is not a state of model 'pendulum'" in capsys.readouterr().err
    with np.load(out) as f:
        arrays = {k: f[k] for k in f.files}
    arrays["K"] = arrays["K"][:-1]
    bad = tmp_path / "bad.npz"
    np.savez(bad, **arrays)
    assert simulate.main([str(bad)]) == 2
    assert "K has shape (149, 1, 2), expected (150, 1, 2)" in capsys.readouterr().err


def test_perturbed_state_keeps_strings_taut():
    from marionette_control.model.library import marionette_arm as ma

    m = library.get("marionette_arm")
    q = ma.static_equilibrium(m, *ma.LOWERED).q
    x0 = np.concatenate([q, np.zeros(4)])
    x = simulate.perturbed_state(m, x0, {"shoulder": 0.1})
    assert x[0] == pytest.approx(0.1) and abs(m.constraints(x[:4])[0][0]) < 1e-12
    assert x[3] != pytest.approx(q[3])                       # the string length followed the arm


def test_plot_writes_every_figure(optimized, tmp_path, capsys):
    d, out, _ = optimized
    sim_file = d / "sim_plot.npz"
    assert simulate.main([str(out), "--perturb", "theta=0.05", "-o", str(sim_file)]) == 0
    assert plot.main([str(out), "--simulation", str(sim_file), "-o", str(tmp_path)]) == 0
    for name in ("convergence", "configurations", "inputs", "error"):
        png = tmp_path / f"swingup_{name}.png"
        assert png.stat().st_size > 10_000, name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(SystemExit):
        plot.main([str(out), "--only", "error"])
    assert "needs --simulation" in capsys.readouterr().err
    assert plot.main([str(d / "missing.npz")]) == 2


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


def record(i, cost=1.0, method="newton"):
    return SimpleNamespace(iteration=i, cost=cost, descent_norm=1e-3 / (i + 1), step_length=1.0, method=method,
                           elapsed=0.1 * i)


def test_progress_is_live_on_a_terminal_and_plain_otherwise():
    tty = FakeTTY()
    p = Progress(tty, "auto", use_rich=False)
    assert p.mode == "live"
    p.update("embedding 1/3", record(0))
    p.update("embedding 1/3", record(1))
    p.update("optimization", record(0))
    p.log("done")
    p.close()
    out = tty.getvalue()
    assert out.count("\r\x1b[K") == 3
    # the last line of a stage stays: a newline before the next stage and before a message
    assert "embedding 1/3  iter   1" in out.split("\n")[0] and "optimization  iter   0" in out.split("\n")[1]
    assert out.split("\n")[2] == "[optimize] done"

    pipe = io.StringIO()
    p = Progress(pipe, "auto")
    assert p.mode == "plain"
    for i in range(3):
        p.update("optimization", record(i))
    p.close()
    lines = pipe.getvalue().splitlines()
    assert len(lines) == 3 and all(line.startswith("[optimize] optimization  iter") for line in lines)
    assert "\r" not in pipe.getvalue() and "\x1b" not in pipe.getvalue()

    quiet = io.StringIO()
    p = Progress(quiet, "quiet")
    p.update("optimization", record(0))
    p.log("only this")
    assert quiet.getvalue() == "[optimize] only this\n"
    with pytest.raises(ValueError, match="progress mode"):
        Progress(quiet, "loud")


def test_progress_with_rich_when_installed():
    pytest.importorskip("rich")
    tty = FakeTTY()
    p = Progress(tty, "live", use_rich=True)
    p.update("optimization", record(0, cost=123.5))
    p.update("optimization", record(1, cost=99.25))
    p.close()
    assert "9.925000e+01" in tty.getvalue()


@pytest.mark.parametrize("tool", ["optimize", "simulate", "plot"])
def test_tools_run_as_modules(tool):
    res = subprocess.run([sys.executable, "-m", f"marionette_control.cli.{tool}", "--help"], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert f"marionette-{tool}" in res.stdout


def test_parse_set_reads_yaml_values():
    assert optimize.parse_set(["a.b=1e-3", "c=[1, 2]", "d=null", "e=text"]) == {
        "a.b": 1e-3, "c": [1, 2], "d": None, "e": "text"}
    with pytest.raises(ValueError, match="bad key"):
        optimize.parse_set(["a..b=1"])


def test_constrained_wave_reports_margins_and_plots_drives_and_tension(tmp_path):
    """marionette-optimize on the wave (constraints on by default): progress lines carry the violation next to
    the cost (the first iterates' is not zero: the approximate barrier lets them leave the limits), the summary
    lists the reserve kept for the feedback, every constraint's worst margin with its limit less the reserve
    (the carriage's 15 m/s^2 less the default acceleration margin; the string's 0.5 N plus the tension reserve)
    and the hardware's limit, and says the wave is trackable; marionette-plot draws the drives' speed and
    acceleration and the string tension (recomputed from the model: at least the 0.5 N minimum and the
    reserve)."""
    from marionette_control.ocp.problem import DEFAULT_MARGINS, DEFAULT_TENSION_RESERVE
    from marionette_control.resources import config_dir

    out = tmp_path / "wave.npz"
    buf = io.StringIO()
    from contextlib import redirect_stdout

    with redirect_stdout(buf):
        code = optimize.main([str(config_dir() / "optimize" / "marionette_arm_wave.yaml"), "-o", str(out),
                              "--progress", "plain"])
    text = buf.getvalue()
    assert code == 0, text
    iters = [line for line in text.splitlines() if "optimization  iter" in line]
    assert iters and all(" viol " in line and " mu " in line for line in iters)
    assert " viol 0.0e+00 " in iters[-1]          # the first iterates may leave the limits, the last is inside
    assert "constraints: all satisfied" in text
    acc = 15.0 * (1 - DEFAULT_MARGINS["acceleration"])
    floor = 0.5 + DEFAULT_TENSION_RESERVE
    assert f"carriage acceleration >= {-acc:g} m/s^2: worst margin" in text and "(hardware -15 m/s^2" in text
    assert f"string tension >= {floor:g} N" in text and "(hardware 0.5 N" in text
    assert f"reserve for the feedback: range {100 * DEFAULT_MARGINS['range']:g} %" in text
    assert "the motion is trackable: " in text
    tr = Trajectory.load(out, library.get("marionette_arm"))
    assert tr.info["constraints"]["feasible"] and len(tr.info["constraints"]["margins"]) == 13
    assert tr.info["constraints"]["set"]["limits"]["min_tension"] == {"string": 0.5}
    assert tr.info["constraints"]["set"]["reserved"]["min_tension"] == {"string": pytest.approx(floor)}
    tension = plot.string_tensions(tr)["string"]
    assert tension.shape == (tr.N,) and tension.min() >= floor - 1e-6
    speed, acc = plot.drive_motion(tr)["carriage"]
    assert np.abs(acc).max() <= 15.0 * (1 + 1e-6) and np.abs(speed).max() <= 2.0
    assert plot.main([str(out), "-o", str(tmp_path)]) == 0
    for name in ("convergence", "configurations", "inputs", "drives", "tension"):
        assert (tmp_path / f"wave_{name}.png").stat().st_size > 10_000, name
