"""The repository stands on its own: its text cites the seeds by their numbering, and nothing outside it.

Code, comments, docs, messages, configuration and data records cite the seeds as "thesis (4.36)",
"thesis §6.5.4", "seed 001 §VII", "seed 002 (3.6)" (docs/architecture.md), never by line numbers of a
transcription of a seed, and never name files that are not in the repository (the design notes,
digests and seed files of the workspace the project was written in). Every text file git lists
(tracked, or new and not ignored) is read;
a file with a NUL byte in its first 8 KiB is binary (images, npz, mcap) and skipped. Outside a git
checkout (a colcon build from a source copy) the tree is walked instead, without the directories that
tools create (virtual environments, build output).

No allow-list: a legitimate text that a pattern catches means the pattern is too loose; make it
precise. The patterns are spelled so that this file does not match them itself.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: what a match means -> pattern
RULES = {
    "a line number of a seed's transcription (cite the equation, section or appendix)":
        re.compile(r"\bL\d{3,5}\b|\b[Ll]ines? \d{3,5}\b"),
    "a seed's transcription file (cite the seed by number: 'thesis', 'seed 001')":
        re.compile(r"\b00\d_[0-9a-f]{16}\b"),
    "the workspace outside the repository":
        re.compile(r"/wor[k]/|\bshared/(design|reference|seeds|hooks)\b"),
    "a design note outside the repository (docs/architecture.md is the project's)":
        re.compile(r"\bARCHITECTURE\.md\b|\bSTYLE-ANCHOR[S]\b|\bdesign/ARCHITECTURE"),
    "a digest outside the repository (cite the seed; corrections: docs/thesis_corrections.md)":
        re.compile(r"\breference/[\w-]+\.md\b|\b(thesis|background)-notes\b"
                   r"|\b(pendulum-vectors|humanoid-marionette|ros2-from-pypi)\.md\b|\bdigest of the (thesis|seeds?)\b"),
}

#: directories that tools create inside a source tree (only used where git cannot list the files)
GENERATED = {".git", ".venv", "build", "install", "log", "out", "__pycache__", ".pytest_cache", ".hypothesis"}


def tracked_files() -> list[Path]:
    try:
        # tracked files and new ones not yet added (but not the ignored: .venv, build output)
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                                capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return sorted(p for p in ROOT.rglob("*") if p.is_file() and not any(
            part in GENERATED or part.startswith(".venv") or part.endswith(".egg-info")
            for part in p.relative_to(ROOT).parts[:-1]))
    return [ROOT / name for name in listed.decode().split("\0") if name]


def text_of(path: Path):
    """The file's text, or None for a binary file (or a listed file missing from the work tree)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def violations(text: str) -> list[tuple[int, str, str]]:
    """(line number, rule, line) of every match in a text."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for rule, pattern in RULES.items():
            if pattern.search(line):
                found.append((number, rule, line.strip()))
    return found


def test_the_files_are_found():
    files = tracked_files()
    names = {p.relative_to(ROOT).as_posix() for p in files}
    # the kinds of text the rules are about: code, C++ comments, docs, messages, configuration
    for expected in ("README.md", "docs/architecture.md", "cpp/include/marionette/midpoint_vi.hpp",
                     "marionette_control/lq/riccati.py", "marionette_interfaces/msg/TrackedTrajectory.msg",
                     "config/controller.yaml", "test/test_citations.py"):
        assert expected in names
    assert sum(text_of(p) is not None for p in files) > 200


# (each example is split where the pattern would match this file's own text)
@pytest.mark.parametrize("line, rule", [
    ("the symmetric projection of thesis L" "3119", "line number"),
    ("thesis (6.10) (L" "1692-1702)", "line number"),
    ("see line " "1838 of the thesis", "line number"),
    ("000_" "7818ca9b5c82f931.txt", "transcription file"),
    ("see ``/wor" "k/sha" "red/de" "sign/ARCHITECTURE" ".md``", "workspace"),
    ("the seeds in ../sha" "red/seeds", "workspace"),
    ("the guide design/" "ARCHITECTURE", "design note"),
    ("(ARCHITECTURE" ".md, \"ROS graph\")", "design note"),
    ("STYLE-ANCHOR" "S.md", "design note"),
    ("regression vectors in reference/pendulum-vectors" ".md", "digest"),
    ("corrections listed in thesis" "-notes §1", "digest"),
])
def test_rules_catch_what_they_are_for(line, rule):
    assert [r for _, r, _ in violations(line) if rule in r], line


@pytest.mark.parametrize("line", [
    "thesis (4.36)", "thesis §6.5.4, Prop. 6", "seed 001 §VIII-A", "seed 002 (3.6)", "thesis app. B.2.3, (B.4)",
    "distance constraint: h = |p1-p2|^2 - L^2 has a singular derivative at L = 0",
    "L_d(q0, q1) = dt L(qbar, qdot)", "W = L^-1 H", "an L2 norm", "1000-step LQR", "hexdigest()",
    "docs/reproductions.md §1", "thesis_corrections.md", "reference implementation (trep 1.0.2)",
])
def test_rules_leave_citations_and_code_alone(line):
    assert violations(line) == []


def test_no_file_cites_a_transcription_or_a_file_outside_the_repository():
    report = [f"{path.relative_to(ROOT).as_posix()}:{number}: {rule}: {line}"
              for path in tracked_files() if (text := text_of(path)) is not None
              for number, rule, line in violations(text)]
    assert not report, f"{len(report)} citation(s) to fix:\n" + "\n".join(report)
