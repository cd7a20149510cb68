#!/usr/bin/env bash
# Sets up the benchmark peer trep 1.0.2 (the thesis's reference implementation)
# in its own virtual environment. Idempotent: does nothing when the venv already
# holds the trep built by this script and patch_trep.py (a stamp records them).
#
# usage: benchmarks/peers/install_trep.sh [VENV_DIR]     (default: <repo>/.venv-peer-trep)
# env:   PEER_PYTHON  interpreter for the venv (default: python3.11, python3.12,
#                     python3.10, python3 - the first with 3.8 <= version <= 3.12,
#                     since patch_trep.py needs lib2to3, gone in 3.13)
#        PEER_NUMPY, PEER_SCIPY   pip specs (default numpy==2.4.6, scipy==1.17.1)
# needs: a C compiler, the Python headers (python3-dev), PyPI.
#
# trep's source is never part of this repository: the sdist is fetched from
# PyPI by name here and patched at install time. Why the dance: `pip download
# trep==1.0.2 --no-binary :all:` unpacks the sdist and then fails while
# preparing its metadata (setup.py is Python 2), deleting the archive; with
# --no-clean pip leaves the unpacked sdist in $TMPDIR/pip-download-*/trep_*,
# which we take, patch with patch_trep.py, and build with --no-build-isolation
# (setup.py imports numpy).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
VENV="${1:-$ROOT/.venv-peer-trep}"
NUMPY_SPEC="${PEER_NUMPY:-numpy==2.4.6}"
SCIPY_SPEC="${PEER_SCIPY:-scipy==1.17.1}"
STAMP="$VENV/.trep-peer.stamp"

log() { echo "[install_trep] $*" >&2; }
fail() {
  echo "[install_trep] error: $*" >&2
  echo "[install_trep] the trep peer is optional: run the benchmarks with --no-peer to skip it." >&2
  exit 1
}

want="$(cat "$HERE/install_trep.sh" "$HERE/patch_trep.py" | sha256sum | cut -c1-16) $NUMPY_SPEC $SCIPY_SPEC"
if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] &&
   (cd / && "$VENV/bin/python" -c "import trep, trep.discopt; assert '1.0.2' in trep.__version__") 2>/dev/null; then
  log "trep peer up to date in $VENV"
  exit 0
fi

py_ok() {  # usable interpreter: 3.8 <= version <= 3.12 with venv and headers
  "$1" - <<'PY' 2>/dev/null
import os, sys, sysconfig, venv  # noqa: F401
assert (3, 8) <= sys.version_info[:2] <= (3, 12)
assert os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))
PY
}
PY=""
for cand in ${PEER_PYTHON:-} python3.11 python3.12 python3.10 python3; do
  if command -v "$cand" >/dev/null 2>&1 && py_ok "$cand"; then PY="$cand"; break; fi
done
[ -n "$PY" ] || fail "no Python 3.8-3.12 with the venv module and its headers (Python.h) found; set PEER_PYTHON"
command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || fail "no C compiler (cc/gcc) found"

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "" 2>/dev/null; then
  log "creating $VENV with $PY ($("$PY" --version 2>&1))"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV" || fail "could not create the venv $VENV"
fi
VPY="$VENV/bin/python"
rm -f "$STAMP"

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
mkdir "$WORK/tmp"
pipq() { "$VPY" -m pip --disable-pip-version-check -q "$@" 2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2); }

log "installing $NUMPY_SPEC $SCIPY_SPEC setuptools wheel"
pipq install "$NUMPY_SPEC" "$SCIPY_SPEC" setuptools wheel >"$WORK/deps.log" 2>&1 ||
  { tail -20 "$WORK/deps.log" >&2; fail "pip could not install numpy/scipy/setuptools into $VENV"; }

log "fetching the trep 1.0.2 sdist from PyPI"
TMPDIR="$WORK/tmp" pipq download --no-clean --no-deps --no-binary :all: trep==1.0.2 -d "$WORK/dl" \
  >"$WORK/download.log" 2>&1 || true  # expected to fail at the metadata stage (see above)
SRC="$(ls -d "$WORK"/tmp/pip-download-*/trep_* 2>/dev/null | head -1 || true)"
if [ -z "$SRC" ] || ! grep -q '^Version: 1.0.2$' "$SRC/PKG-INFO" 2>/dev/null; then
  tail -20 "$WORK/download.log" >&2
  fail "could not obtain the trep 1.0.2 sdist from PyPI (network? pip's output above)"
fi
cp -a "$SRC" "$WORK/trep-1.0.2"

log "patching for Python 3 ($(basename "$HERE")/patch_trep.py)"
"$VPY" "$HERE/patch_trep.py" "$WORK/trep-1.0.2" >"$WORK/patch.log" 2>&1 ||
  { tail -20 "$WORK/patch.log" >&2; fail "patch_trep.py failed"; }

log "building and installing trep (C extension; about a minute)"
(cd "$WORK/trep-1.0.2" && pipq install --no-build-isolation --no-deps .) >"$WORK/build.log" 2>&1 ||
  { grep -E 'error|Error' "$WORK/build.log" | head -20 >&2; tail -5 "$WORK/build.log" >&2; fail "building trep failed"; }

(cd / && "$VPY" -c "import trep, trep.discopt, numpy; print('[install_trep] trep', trep.__version__, 'numpy', numpy.__version__)") >&2 ||
  fail "trep was installed but does not import"
echo "$want" >"$STAMP"
log "trep peer ready in $VENV"
