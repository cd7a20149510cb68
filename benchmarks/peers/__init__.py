"""Benchmark peers: other implementations measured in the same run, each in its own venv.

A peer has an installer (idempotent, creates ``.venv-peer-<name>`` in the repo
root) and a script run with that venv's interpreter that prints one JSON object
``{"versions": ..., "figures": [{"name", "value", "unit", "notes"}...], ...}``
whose figure names match ours (benchmarks/registry.py explains the naming).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


@dataclass(frozen=True)
class Peer:
    name: str
    installer: Path
    script: Path
    description: str
    env: str = ""  # venv suffix when the peer shares another's venv (default: its name)

    @property
    def venv(self) -> Path:
        return ROOT / f".venv-peer-{self.env or self.name}"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


PEERS = {
    "trep": Peer("trep", HERE / "install_trep.sh", HERE / "trep_marionette.py",
                 "trep 1.0.2 (PyPI), the thesis's reference implementation, patched for Python 3 at install time"),
    "trep-optimizer": Peer("trep-optimizer", HERE / "install_trep.sh", HERE / "trep_optimizer.py",
                           "trep 1.0.2's discrete optimizer trep.discopt (DOptimizer, dlqr) on the optimizer "
                           "group's problems; same venv as 'trep'", env="trep"),
    "crocoddyl": Peer("crocoddyl", HERE / "install_crocoddyl.sh", HERE / "crocoddyl_fddp.py",
                      "Crocoddyl 3.2.1 (pin 4.0.0) FDDP on the dmocc group's pendulum swing-up, cart-pole and two-link arm, its own "
                      "Pinocchio models and integrators"),
}


class PeerError(RuntimeError):
    pass


def run_peer(name: str, quick: bool, log=print, timeout: float = 3600.0) -> dict:
    """Installs the peer if needed, runs its script, returns its JSON (raises PeerError with the reason)."""
    peer = PEERS[name]
    log(f"peer {name}: checking/installing {peer.venv.name} ({peer.installer.relative_to(ROOT)})")
    r = subprocess.run(["bash", str(peer.installer), str(peer.venv)], cwd=ROOT, stdout=sys.stderr, stderr=sys.stderr)
    if r.returncode != 0:
        raise PeerError(f"installing the peer failed (exit {r.returncode}; see the installer's messages)")
    cmd = [str(peer.python), str(peer.script)] + (["--quick"] if quick else [])
    log(f"peer {name}: running {peer.script.relative_to(ROOT)}")
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    try:
        r = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=sys.stderr, text=True, timeout=timeout,
                           env=env)
    except subprocess.TimeoutExpired:
        raise PeerError(f"the peer script timed out after {timeout:.0f} s") from None
    if r.returncode != 0:
        raise PeerError(f"the peer script failed (exit {r.returncode})")
    try:
        return json.loads(r.stdout)
    except json.JSONDecodeError as e:
        raise PeerError(f"the peer script printed no valid JSON ({e})") from None
