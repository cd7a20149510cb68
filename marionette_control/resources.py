"""The package's files under ``config/`` (models, motions, specs, parameter files): the one lookup.

Search order, first match wins (:func:`config_dirs`):

1. the source tree, ``<repository>/config`` (editable installs, ``./run``, ``colcon build --symlink-install``);
2. the share directory of an installed package under each prefix of ``AMENT_PREFIX_PATH`` that has the package in
   its ament resource index (what ``ros2 pkg prefix marionette_control`` finds), ``<prefix>/share/marionette_control/config``;
3. the install prefix derived from this file (``<prefix>/lib/pythonX.Y/site-packages/marionette_control/``
   → ``<prefix>/share/marionette_control/config``, where ``setup.py`` installs it);
4. ``<sys.prefix>/share/marionette_control/config`` (a virtual environment's prefix).

So a source tree always reads its own files, and an installed package its installed ones. Every reader of a
packaged file (model files, the motion library, optimization specs, node parameter files, the launch
description) resolves names here; nothing else builds a path into ``config/``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

PACKAGE = "marionette_control"


def config_dirs() -> list[Path]:
    """The candidate ``config/`` directories in lookup order (module docstring); existing or not."""
    here = Path(__file__).resolve()
    dirs = [here.parents[1] / "config"]
    for prefix in filter(None, os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep)):
        if (Path(prefix) / "share" / "ament_index" / "resource_index" / "packages" / PACKAGE).is_file():
            dirs.append(Path(prefix) / "share" / PACKAGE / "config")
            break
    if len(here.parents) > 4:
        dirs.append(here.parents[4] / "share" / PACKAGE / "config")
    dirs.append(Path(sys.prefix) / "share" / PACKAGE / "config")
    unique = []
    for d in dirs:
        if d not in unique:
            unique.append(d)
    return unique


def config_dir() -> Path:
    """The first existing ``config/`` directory of :func:`config_dirs`."""
    tried = config_dirs()
    for d in tried:
        if d.is_dir():
            return d
    raise FileNotFoundError(f"no config/ directory of {PACKAGE} in {', '.join(map(str, tried))}")


def config_file(*parts: str | os.PathLike) -> Path:
    """The file ``config/<parts…>`` of the first directory of :func:`config_dirs` that has it.

    An absolute path is returned as it is (it must exist). Raises ``FileNotFoundError`` naming every
    directory tried.
    """
    if not parts:
        raise ValueError("config_file needs a file name")
    p = Path(*parts)
    if p.is_absolute():
        if not p.exists():
            raise FileNotFoundError(f"file {p} does not exist")
        return p
    tried = config_dirs()
    for d in tried:
        if (d / p).exists():
            return d / p
    raise FileNotFoundError(f"config file {p} not found in {', '.join(map(str, tried))}")
