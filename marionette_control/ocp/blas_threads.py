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
solves run as before. threadpoolctl 3.8 lets one Python thread at a time set OpenBLAS's process-wide number (the
"controlling thread": the first to set it, while it lives; another thread's setting is silently dropped), and a
solve may start in one thread and the last overlapping one end in another: the thread that sets or restores the
numbers here takes that control first (``clear_controlling_thread(force=True)``) and gives it up after restoring
them, so the limit holds whichever threads the solves run in. ``OPENBLAS_NUM_THREADS=1`` in the environment of a process, before numpy loads, limits
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
            _set_numbers([(c, 1) for c, _ in _restore])
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0:
                _set_numbers(_restore, release=True)
                _restore = []


def _set_numbers(numbers: list, release: bool = False) -> None:
    """Sets each (controller, number of threads) from this thread, taking threadpoolctl's control of a
    process-wide pool first where it has one (module docstring); ``release``: gives that control up afterwards."""
    for c, n in numbers:
        clear = getattr(type(c), "clear_controlling_thread", None)  # threadpoolctl >= 3.8, OpenBLAS
        if clear is not None:
            clear(force=True)
        c.set_num_threads(n)
        if clear is not None and release:
            clear()
