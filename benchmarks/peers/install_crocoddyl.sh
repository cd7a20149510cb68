#!/usr/bin/env bash
# Sets up the benchmark peer Crocoddyl (FDDP) in its own virtual environment from
# benchmarks/peers/crocoddyl-requirements.txt (wheels from PyPI; about 1 GB). Idempotent: does
# nothing when the venv holds what the requirements file names (a stamp records its hash).
#
# usage: benchmarks/peers/install_crocoddyl.sh [VENV_DIR]   (default: <repo>/.venv-peer-crocoddyl)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
VENV="${1:-$ROOT/.venv-peer-crocoddyl}"
REQ="$HERE/crocoddyl-requirements.txt"
STAMP="$VENV/.crocoddyl-peer.stamp"

log() { echo "[install_crocoddyl] $*" >&2; }
want="$(sha256sum "$REQ" | cut -c1-16)"
if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] &&
   (cd / && "$VENV/bin/python" -c "import crocoddyl, pinocchio") 2>/dev/null; then
  log "crocoddyl peer up to date in $VENV"
  exit 0
fi
log "creating $VENV"
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --upgrade pip >&2
"$VENV/bin/pip" install --quiet -r "$REQ" >&2 || {
  echo "[install_crocoddyl] error: pip could not install $REQ; run the benchmarks with --no-peer to skip the peers" >&2
  exit 1
}
echo "$want" > "$STAMP"
log "crocoddyl peer ready in $VENV"
