"""Registry of benchmark groups, the figure record and the timing helpers.

A group is a function ``fn(ctx) -> list[Figure]`` registered with
``@benchmark_group("name")`` in a module listed in ``GROUP_MODULES``. It times
its own computations with :func:`time_calls` / :func:`time_once` and may ask
for a peer's figures with ``ctx.peer("trep")`` (measured once per run, in a
subprocess with the peer's own interpreter; ``None`` with ``--no-peer`` or when
the peer cannot be set up, the reason going to the JSON's ``peers`` entry).

Naming: a figure is ``<scenario>.<quantity>`` (e.g. ``humanoid.vi_step``). A
peer's figure for the same quantity carries the same name, or ``name@variant``
for a variant (e.g. ``...@threads=1``); the runner pairs each peer figure with
ours of the same base name and reports the ratio.
"""

from __future__ import annotations

import gc
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterable

# Modules whose import registers groups (later issues append theirs).
GROUP_MODULES = ["benchmarks.core", "benchmarks.ros", "benchmarks.optimizer", "benchmarks.constraints",
                 "benchmarks.dmocc", "benchmarks.mpc", "benchmarks.calibration"]


@dataclass
class Figure:
    name: str
    value: float
    unit: str
    group: str = ""
    peer: str | None = None
    notes: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Group:
    name: str
    fn: Callable
    description: str


_GROUPS: dict[str, Group] = {}


def benchmark_group(name: str, description: str = ""):
    """Decorator registering ``fn(ctx) -> list[Figure]`` as the group ``name``."""

    def wrap(fn):
        if name in _GROUPS:
            raise ValueError(f"benchmark group '{name}' is already registered")
        _GROUPS[name] = Group(name, fn, description or (fn.__doc__ or "").strip().split("\n")[0])
        return fn

    return wrap


def groups() -> dict[str, Group]:
    """Registered groups by name (imports GROUP_MODULES first)."""
    import importlib

    for mod in GROUP_MODULES:
        importlib.import_module(mod)
    return dict(_GROUPS)


@dataclass
class Context:
    """What a group gets: the run's options and access to peers."""

    quick: bool = False
    use_peers: bool = True
    peer_runner: Callable[[str], dict | None] | None = None
    log: Callable[[str], None] = print
    extra: dict = field(default_factory=dict)

    def peer(self, name: str) -> dict | None:
        """The peer's JSON result (figures + versions), or None when peers are off or it failed."""
        if not self.use_peers or self.peer_runner is None:
            return None
        return self.peer_runner(name)


def time_calls(fn: Callable[[int], object], indices: Iterable[int], sweeps: int = 1, warmup: int = 3) -> list[float]:
    """Per-call wall times in seconds of ``fn(i)`` for each index, ``sweeps`` times over (warm-up calls first).

    The garbage collector is paused while timing so a collection does not land in one sample.
    """
    indices = list(indices)
    for i in indices[:warmup]:
        fn(i)
    samples: list[float] = []
    pc = time.perf_counter
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(sweeps):
            for i in indices:
                t0 = pc()
                fn(i)
                samples.append(pc() - t0)
    finally:
        if gc_was:
            gc.enable()
    return samples


def time_once(fn: Callable[[], object], repeats: int, warmup: int = 1) -> list[float]:
    """Wall times in seconds of ``repeats`` calls of ``fn()`` after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    out = []
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    finally:
        if gc_was:
            gc.enable()
    return out


def median_ms(samples: list[float], per: int = 1) -> float:
    """Median of the samples in milliseconds, divided by ``per`` (e.g. steps in a whole-trajectory call)."""
    return 1e3 * statistics.median(samples) / per
