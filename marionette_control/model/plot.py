"""Pictures of any model at a configuration: frames, parent-child segments, masses, strings.

``plot_model(model, q)`` draws the world positions of every frame's origin projected onto a
plane: a solid segment from each frame to its parent (the tree), a dot per mass (area
proportional to mass^(2/3)), a small dot per frame, and each distance constraint (a string) as
a dashed line between its two frames. The view plane is chosen automatically (the two world
axes along which the drawing extends most; z stays vertical when it is kept) or given as
``view="yz"`` (horizontal axis first). ``save_model_png`` writes a PNG.

Plane constraints are not drawn.
"""

from __future__ import annotations

import os
from typing import Iterable, Sequence

import numpy as np

from marionette_control import _core

_AXES = "xyz"


def _frame_positions(model: _core.Model, q: np.ndarray) -> np.ndarray:
    return np.asarray(model.placements(q))[:, :3, 3]


def distance_constraints(model: _core.Model) -> list[tuple[str, str, str]]:
    """(constraint name, frame1, frame2) of every distance constraint (string) of the model."""
    return [(name, a, b) for name, kind, a, b, _ in model.constraint_frames if kind == "distance"]


def choose_view(points: np.ndarray) -> tuple[int, int]:
    """Axes (horizontal, vertical) of the plane on which ``points`` (n, 3) extend most; z vertical if kept."""
    extent = points.max(axis=0) - points.min(axis=0)
    drop = int(np.argmin(extent + 1e-12 * np.arange(3)))  # ties: drop x, then y
    kept = [a for a in range(3) if a != drop]
    return kept[0], kept[1]


def _parse_view(view: str) -> tuple[int, int]:
    if len(view) != 2 or view[0] not in _AXES or view[1] not in _AXES or view[0] == view[1]:
        raise ValueError(f"view must be 'auto' or two different axes among x, y, z (e.g. 'yz'), got {view!r}")
    return _AXES.index(view[0]), _AXES.index(view[1])


def plot_model(model: _core.Model, q: Sequence[float] | None = None, ax=None, view: str = "auto",
               strings: Iterable[tuple[str, str]] | None = None, title: str | None = None,
               labels: bool = False):
    """Draws the model at q (default zeros); returns the matplotlib Axes.

    ``strings``: (frame1, frame2) pairs to draw dashed; default: every distance constraint.
    ``labels``: write frame names next to masses and string ends.
    """
    if ax is None:  # a bare Figure: no pyplot, no global backend state
        from matplotlib.figure import Figure

        ax = Figure(figsize=(5.0, 5.0)).subplots()
    q = np.zeros(model.nq) if q is None else np.asarray(q, dtype=float)
    if q.shape != (model.nq,):
        raise ValueError(f"q must have shape ({model.nq},) for model '{model.name}' "
                         f"(configurations {model.config_names}), got {q.shape}")
    p = _frame_positions(model, q)
    index = {n: i for i, n in enumerate(model.frame_names)}
    if strings is None:
        pairs = [(a, b) for _, a, b in distance_constraints(model)]
    else:
        pairs = [tuple(s) for s in strings]
        for a, b in pairs:
            for f in (a, b):
                if f not in index:
                    raise ValueError(f"strings: unknown frame '{f}' in model '{model.name}'")
    h, v = choose_view(p) if view == "auto" else _parse_view(view)

    parents = model.frame_parents
    for f, par in enumerate(parents):
        if par >= 0 and np.linalg.norm(p[f] - p[par]) > 1e-12:
            ax.plot([p[par, h], p[f, h]], [p[par, v], p[f, v]], color="0.25", lw=2.0, solid_capstyle="round",
                    zorder=2)
    ax.scatter(p[:, h], p[:, v], s=8, color="0.25", zorder=3)
    masses = model.masses
    if masses:
        idx = [index[n] for n in masses]
        m = np.array([masses[n][0] for n in masses])
        size = 40.0 + 260.0 * (m / max(m.max(), 1e-12)) ** (2.0 / 3.0)
        ax.scatter(p[idx, h], p[idx, v], s=size, color="tab:orange", edgecolor="k", zorder=4, label="masses")
        if labels:
            for n, i in zip(masses, idx):
                ax.annotate(n, (p[i, h], p[i, v]), fontsize=7, xytext=(4, 4), textcoords="offset points")
    for k, (a, b) in enumerate(pairs):
        ia, ib = index[a], index[b]
        ax.plot([p[ia, h], p[ib, h]], [p[ia, v], p[ib, v]], "--", color="tab:blue", lw=1.3, zorder=1,
                label="strings" if k == 0 else None)
        if labels:
            ax.annotate(b, (p[ib, h], p[ib, v]), fontsize=7, xytext=(4, -10), textcoords="offset points")
    ax.scatter([0.0], [0.0], marker="x", color="k", s=30, zorder=5, label="world origin")
    ax.set_xlabel(f"{_AXES[h]} [m]")
    ax.set_ylabel(f"{_AXES[v]} [m]")
    ax.set_aspect("equal", adjustable="datalim")
    ax.grid(True, lw=0.4, alpha=0.5)
    ax.set_title(title if title is not None else model.name, fontsize=10)
    ax.legend(loc="best", fontsize=7, framealpha=0.8)
    return ax


def save_model_png(model: _core.Model, path: str | os.PathLike, q: Sequence[float] | None = None,
                   dpi: int = 100, **kwargs) -> str:
    """Renders ``plot_model(model, q, **kwargs)`` to a PNG file; returns the path."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.0, 5.0))
    plot_model(model, q, ax=fig.subplots(), **kwargs)
    fig.tight_layout()
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=dpi)
    return path


__all__ = ["plot_model", "save_model_png", "distance_constraints", "choose_view"]
