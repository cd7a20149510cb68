#!/usr/bin/env bash
# Put marionette_control's console scripts on a virtual environment's PATH.
#
#   VENV=/path/to/venv scripts/link_tools.sh      # default VENV: <repo>/.venv
#
# setup.cfg installs the console scripts (the nodes, marionette_bringup, the
# marionette-* tools) into <prefix>/lib/marionette_control/, where `ros2 run
# marionette_control <name>` finds them on a colcon install; a venv has no
# `ros2 run`, so ./run's set-up links each of them into <venv>/bin/ as well
# (relative links: the venv can move). setup.cfg stays as it is, so a colcon
# install is unchanged. Links whose target is gone are removed.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$REPO/.venv}"
SCRIPTS="$VENV/lib/marionette_control"
[[ -d "$VENV/bin" ]] || { echo "link_tools: no $VENV/bin (create the venv first: ./run setup)" >&2; exit 1; }
for link in "$VENV"/bin/*; do
  if [[ -L "$link" && "$(readlink "$link")" == ../lib/marionette_control/* && ! -e "$link" ]]; then
    rm -f "$link"
  fi
done
[[ -d "$SCRIPTS" ]] || exit 0
for script in "$SCRIPTS"/*; do
  name="$(basename "$script")"
  [[ -f "$script" && -x "$script" ]] || continue
  ln -sfn "../lib/marionette_control/$name" "$VENV/bin/$name"
done
