"""The optimizer's save_path confinement (marionette_control.save_path), without ROS.

Each rule of the module docstring is tried with the path a hostile peer would send; a refusal must
name the rule and leave the file system untouched. The black-box form (the node across processes)
is test/test_adversarial_client.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from marionette_control.trajectory import Trajectory
from marionette_control.save_path import SavePathError, SavePolicy, write_file


def tree(root: Path) -> set:
    """Every path under root (to show that a refusal created or changed nothing)."""
    return {(p.relative_to(root), p.stat().st_mtime_ns if p.is_file() else None) for p in root.rglob("*")}


@pytest.fixture
def dirs(tmp_path):
    results, outside = tmp_path / "results", tmp_path / "outside"
    outside.mkdir()
    return SavePolicy.from_parameters(str(results)), results, outside, tmp_path


def save(policy, path, overwrite=False, payload=b"result"):
    target = policy.target(path, overwrite)
    return write_file(target, lambda f: f.write(payload))


def test_relative_paths_inside_the_directory_are_saved_and_subdirectories_created_there(dirs):
    policy, results, _, _ = dirs
    assert results.is_dir(), "save_directory is created at start-up (the operator's setting)"
    assert save(policy, "a.npz") == results / "a.npz"
    assert save(policy, "runs/2026/b") == results / "runs" / "2026" / "b.npz", ".npz appended to a bare name"
    assert save(policy, "runs/../c.npz") == results / "c.npz", "'..' that stays inside is fine"
    assert (results / "runs" / "2026" / "b.npz").read_bytes() == b"result"
    assert sorted(p.name for p in results.rglob("*")) == ["2026", "a.npz", "b.npz", "c.npz", "runs"], (
        "no temporary file left behind")
    assert oct((results / "a.npz").stat().st_mode & 0o777) == oct(0o644)


@pytest.mark.parametrize("path, message", [
    ("../escaped.npz", "outside the directory"),
    ("runs/../../escaped.npz", "outside the directory"),
    ("../../../../../../../../tmp/escaped.npz", "outside the directory"),
    ("../outside/new/deep/x.npz", "outside the directory"),
    ("/etc/escaped.npz", "absolute paths are not allowed"),
    ("x.sh", "must end in .npz"),
    ("evil.pth", "must end in .npz"),
    ("a\0b.npz", "NUL character"),
])
def test_paths_leaving_the_directory_are_refused_and_nothing_is_written(dirs, path, message):
    policy, results, outside, root = dirs
    before = tree(root)
    with pytest.raises(SavePathError, match=message) as e:
        save(policy, path)
    assert "refused" in str(e.value) or "NUL" in str(e.value)
    assert tree(root) == before


def test_symbolic_links_are_resolved_before_the_check(dirs):
    policy, results, outside, root = dirs
    (results / "link").symlink_to(outside, target_is_directory=True)
    (outside / "victim.npz").write_bytes(b"precious")
    (results / "file_link.npz").symlink_to(outside / "victim.npz")
    before = tree(root)
    for path in ("link/x.npz", "link/sub/x.npz", "file_link.npz"):
        with pytest.raises(SavePathError, match=rf"resolves to '{outside}.*outside the directory"):
            save(policy, path, overwrite=True)
    assert tree(root) == before and (outside / "victim.npz").read_bytes() == b"precious"


def test_existing_files_are_replaced_only_when_the_request_says_so(dirs):
    policy, results, _, _ = dirs
    save(policy, "a.npz", payload=b"first")
    with pytest.raises(SavePathError, match="exists; set overwrite"):
        save(policy, "a.npz", payload=b"second")
    assert (results / "a.npz").read_bytes() == b"first"
    save(policy, "a.npz", overwrite=True, payload=b"second")
    assert (results / "a.npz").read_bytes() == b"second"
    (results / "d.npz").mkdir()
    with pytest.raises(SavePathError, match="exists and is not a regular file"):
        save(policy, "d.npz", overwrite=True)


def test_a_file_created_between_check_and_write_is_not_replaced(dirs):
    policy, results, _, _ = dirs
    target = policy.target("race.npz")
    (results / "race.npz").write_bytes(b"someone else's")
    with pytest.raises(SavePathError, match="created by someone else"):
        write_file(target, lambda f: f.write(b"ours"))
    assert (results / "race.npz").read_bytes() == b"someone else's"
    assert [p.name for p in results.iterdir()] == ["race.npz"]


def test_a_directory_swapped_for_a_link_after_the_check_is_refused(dirs):
    policy, results, outside, _ = dirs
    target = policy.target("sub/x.npz")
    (results / "sub").symlink_to(outside, target_is_directory=True)
    with pytest.raises(SavePathError, match="changed after the request was checked"):
        write_file(target, lambda f: f.write(b"ours"))
    assert list(outside.iterdir()) == []


def test_absolute_paths_only_into_the_allowed_directories(tmp_path):
    shared, other = tmp_path / "shared", tmp_path / "other"
    shared.mkdir()
    other.mkdir()
    policy = SavePolicy.from_parameters(str(tmp_path / "results"), [str(shared)])
    assert save(policy, str(shared / "a.npz")) == shared / "a.npz"
    for path in (other / "a.npz", shared / ".." / "other" / "a.npz", Path("/etc/x.npz")):
        with pytest.raises(SavePathError, match="not inside the allowed_save_directories"):
            save(policy, str(path))
    assert list(other.iterdir()) == []
    with pytest.raises(ValueError, match="entries must be absolute paths"):
        SavePolicy.from_parameters(str(tmp_path / "results"), ["relative/dir"])


def test_saving_disabled_without_save_directory(tmp_path):
    policy = SavePolicy.from_parameters("")
    with pytest.raises(SavePathError, match="saving is disabled on this node"):
        policy.target("a.npz")
    assert policy.target("", default_name="auto.npz") is None


def test_default_names_go_into_the_directory(dirs):
    policy, results, _, _ = dirs
    target = policy.target("", default_name="pendulum_20260101T000000_000000Z.npz")
    assert target.path == results / "pendulum_20260101T000000_000000Z.npz" and not target.overwrite


def test_unwritable_directory_is_refused_before_the_run(dirs):
    policy, results, _, _ = dirs
    if os.geteuid() == 0:
        pytest.skip("root may write into any directory: the permission check cannot be shown as root")
    results.chmod(0o500)
    try:
        with pytest.raises(SavePathError, match="is not writable"):
            policy.target("a.npz")
    finally:
        results.chmod(0o700)


def test_trajectory_written_through_the_policy_loads_back(dirs):
    policy, results, _, _ = dirs
    from marionette_control.model import library

    model = library.get("pendulum")
    X = np.zeros((3, model.nx))
    U = np.zeros((2, model.nU))
    traj = Trajectory.for_model(model, 0.1, X, U, K=np.zeros((2, model.nU, model.nx)))
    path = write_file(policy.target("t.npz"), traj.write)
    back = Trajectory.load(path, model)
    np.testing.assert_array_equal(back.X, X)
    np.testing.assert_array_equal(back.K, traj.K)
