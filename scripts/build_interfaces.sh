#!/usr/bin/env bash
# Build and install the ROS 2 interface package marionette_interfaces into a
# virtual environment that holds the ROS 2 wheels from PyPI
# (requirements/ros.txt), on a machine without a ROS installation.
#
#   VENV=/path/to/venv scripts/build_interfaces.sh      # default VENV: <repo>/.venv
#   FORCE=1 scripts/build_interfaces.sh                 # rebuild even if up to date
#
# Called by ./run's set-up after pip installed the requirements. On a ROS
# installation do not use this: colcon builds marionette_interfaces as is.
#
# The package is configured with plain cmake against the venv prefix and
# installed into it, so `from marionette_interfaces.msg import ...` then works
# from the venv's Python with no environment changes. The wheels' exported
# CMake targets need one repair, injected without touching the package:
# scripts/cmake/fix_pypi_ros_targets.cmake (see the comment there).
#
# Skipped (in well under a second) when a stamp shows that the interface
# sources, this script, the CMake fix, the Python and the installed ROS wheels
# are all unchanged since the last successful build.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$REPO/.venv}"
PKG_DIR="$REPO/marionette_interfaces"
FIX_CMAKE="$REPO/scripts/cmake/fix_pypi_ros_targets.cmake"
PY="$VENV/bin/python3"
WORK_DIR="$VENV/var/marionette_interfaces"   # build tree, log, stamp, lock
BUILD_DIR="$WORK_DIR/build"
LOG="$WORK_DIR/build.log"
STAMP="$WORK_DIR/stamp"

say() { printf 'build_interfaces: %s\n' "$*"; }
die() { printf 'build_interfaces: ERROR: %s\n' "$*" >&2; exit 1; }

# --- preconditions, each with what to do about it ---------------------------
[[ -x "$PY" ]] || die "no Python at $PY. Create the venv first (./run's set-up does), or set VENV=<venv>."
[[ -f "$PKG_DIR/package.xml" ]] || die "interface package not found at $PKG_DIR."
[[ -f "$FIX_CMAKE" ]] || die "missing $FIX_CMAKE."
command -v cmake >/dev/null 2>&1 || [[ -x "$VENV/bin/cmake" ]] \
  || die "cmake not found (need >= 3.19). Install it: apt-get install cmake, or pip install cmake into the venv."
CMAKE="$(command -v cmake 2>/dev/null || echo "$VENV/bin/cmake")"
[[ -x "$VENV/bin/cmake" ]] && CMAKE="$VENV/bin/cmake"   # a venv cmake wins: it is the one the project chose
command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 \
  || die "no C++ compiler found. Install one: apt-get install g++."
for share in rosidl_default_generators ament_cmake std_msgs trajectory_msgs action_msgs rclpy; do
  [[ -d "$VENV/share/$share" ]] \
    || die "ROS package '$share' is not installed in $VENV. Install the ROS wheels first: $PY -m pip install -r $REPO/requirements/ros.txt"
done

# --- up to date? -------------------------------------------------------------
# The stamp covers: interface sources, this script, the CMake fix, the
# interpreter, and the names (with versions) of the installed ROS wheels.
compute_stamp() {
  {
    (cd "$REPO" && find marionette_interfaces -type f \
        \( -name '*.msg' -o -name '*.srv' -o -name '*.action' -o -name '*.idl' \
           -o -name 'CMakeLists.txt' -o -name 'package.xml' -o -name '*.cmake' \) \
        -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    sha256sum "$REPO/scripts/build_interfaces.sh" "$FIX_CMAKE"
    "$PY" -c 'import sys; print(sys.version)'
    ls -d "$VENV"/lib/python3*/site-packages/ros_*.dist-info 2>/dev/null | sed 's|.*/||' | LC_ALL=C sort
  } | sha256sum | cut -d' ' -f1
}

mkdir -p "$WORK_DIR"
exec 9>"$WORK_DIR/lock"
flock 9 2>/dev/null || true   # serialize concurrent set-ups on one venv

want="$(compute_stamp)"
if [[ "${FORCE:-0}" != 1 && -f "$STAMP" && "$(cat "$STAMP")" == "$want" \
      && -f "$VENV/share/marionette_interfaces/package.xml" ]]; then
  say "up to date in $VENV (FORCE=1 to rebuild)."
  exit 0
fi

# --- build -------------------------------------------------------------------
rm -f "$STAMP"
rm -rf "$BUILD_DIR"
: >"$LOG"
jobs="$(nproc 2>/dev/null || echo 2)"
start=$SECONDS

run_step() {  # run_step <description> <command...>: log output; on failure show its tail
  local what="$1"; shift
  say "$what ..."
  if ! "$@" >>"$LOG" 2>&1; then
    printf '%s\n' "----- last 40 lines of $LOG -----" >&2
    tail -n 40 "$LOG" >&2
    die "$what failed (full log: $LOG)."
  fi
}

say "building marionette_interfaces into $VENV (log: $LOG)"
# CMAKE_INSTALL_PREFIX must be the venv (or AMENT_PREFIX_PATH must name it):
# ament finds the type-support generators through the ament index under the
# install prefix, and fails with "No 'rosidl_typesupport_c' found" otherwise.
run_step "configure" "$CMAKE" -S "$PKG_DIR" -B "$BUILD_DIR" \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$VENV" \
  -DCMAKE_INSTALL_PREFIX="$VENV" \
  -DPython3_EXECUTABLE="$PY" \
  -DPython3_FIND_VIRTUALENV=ONLY \
  -DBUILD_TESTING=OFF \
  -DCMAKE_PROJECT_INCLUDE="$FIX_CMAKE"
run_step "build (-j$jobs)" "$CMAKE" --build "$BUILD_DIR" -j "$jobs"
run_step "install" "$CMAKE" --install "$BUILD_DIR"

# The install must be importable from the venv's Python as it is.
run_step "import check" "$PY" -c '
from marionette_interfaces.msg import ConvergenceData, OptimizationOptions, TrackedTrajectory
from marionette_interfaces.srv import OptimizeTrajectory
from marionette_interfaces.action import OptimizeTrajectory as OptimizeTrajectoryAction
TrackedTrajectory(); OptimizeTrajectory.Request(); OptimizeTrajectoryAction.Feedback()'

printf '%s\n' "$want" >"$STAMP"
say "done in $((SECONDS - start)) s."
