"""numpy's and scipy's BLAS on one thread while a solve runs (issue 28, ``docs/benchmarks.md``).

numpy and scipy each load their own OpenBLAS, each with a worker thread per core. After a threaded call the
workers busy-wait for the next one; the optimizer's numpy products on (N, nx) arrays are large enough to be
threaded, so on a 2-core machine a worker spins beside the solve and takes the core the compiled loops need
(measured: the humanoid's N = 200 tracking solve 1.81 s with the default, 0.69 s with one BLAS thread). Inside
:func:`single_threaded` the BLAS libraries of the process run one thread each (the products of a solve are
small: (N, nx) arrays and nx-sized blocks; the core's loops have their own ``threads``), and their own numbers
come back when the last solve that limited them ends (overlapping solves in several threads nest: the first to
enter sets the limit, the last to leave restores the numbers).

The limit is set with threadpoolctl (a dependency of the package, ``requirements/core.txt``), which finds the
BLAS libraries loaded in the process; without it (an installation that lacks it) nothing is limited and the
solves run as before. ``OPENBLAS_NUM_THREADS=1`` in the environment of a process, before numpy loads, limits
every BLAS call of that process instead (``docs/benchmarks.md``, "OpenBLAS's threads").
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

try:
    from threadpoolctl import ThreadpoolController
except ImportError:  # pragma: no cover - an installation without the dependency: nothing is limited
    ThreadpoolController = None

_lock = threading.Lock()
_controllers = None   # the BLAS libraries' threadpoolctl controllers, found once (finding them takes ~10 ms)
_active = 0           # solves inside limited() now
_restore = []         # (controller, its number of threads before the first of them)


def _blas_controllers() -> list:
    """threadpoolctl's controllers of the BLAS libraries loaded now (under _lock; found at the first call)."""
    global _controllers
    if _controllers is None:
        _controllers = list(ThreadpoolController().select(user_api="blas").lib_controllers)
    return _controllers


@contextlib.contextmanager
def single_threaded() -> Iterator[None]:
    """The process's BLAS libraries run one thread each inside the block (module docstring); without
    threadpoolctl: unchanged."""
    if ThreadpoolController is None:
        yield
        return
    global _active, _restore
    with _lock:
        if _active == 0:
            _restore = [(c, c.get_num_threads()) for c in _blas_controllers()]
            for c, _ in _restore:
                c.set_num_threads(1)
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0:
                for c, before in _restore:
                    c.set_num_threads(before)
                _restore = []
