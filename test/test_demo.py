"""The core's demonstration on the humanoid marionette runs end to end and the LQR beats open loop (seed 001 §VIII-B)."""

import json

from marionette_control.cli import demo


def test_demo_writes_plot_and_summary(tmp_path):
    assert demo.main(["--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert (tmp_path / "humanoid_lqr.png").stat().st_size > 10_000
    assert summary["max_constraint_residual"] <= 1e-9
    # Closed-loop tracking error far below open loop over the second half (the yaw error persists open loop).
    assert summary["error_ratio_second_half"] > 10.0


def test_demo_rejects_bad_arguments(capsys):
    import pytest

    with pytest.raises(SystemExit):
        demo.main(["--dt", "-1"])
    assert "--dt > 0" in capsys.readouterr().err
