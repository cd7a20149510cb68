"""Where the optimizer node may write result files: a request's ``save_path`` confined to ``save_directory``.

ROS 2 has no authentication by default: any peer on the graph can call the optimizer, so a
request's ``save_path`` is untrusted input, and without these rules it would be a remote
file-write primitive with the node user's rights. ROS-free (pathlib and os only).

Rules (:meth:`SavePolicy.target`; each refusal raises :class:`SavePathError` saying which rule)
----------------------------------------------------------------------------------------------
1. Saving needs the node's ``save_directory``; when it is empty a request with a ``save_path`` is
   refused.
2. A relative ``save_path`` is taken relative to ``save_directory``. Its resolved path (``..`` and
   symbolic links resolved, :func:`os.path.realpath`) must lie inside the resolved
   ``save_directory``.
3. An absolute ``save_path`` is refused unless the node's ``allowed_save_directories`` lists
   directories; its resolved path must then lie inside one of them.
4. The file name ends in ``.npz`` (appended when the name has no suffix; another suffix is
   refused, so a request cannot write e.g. a ``.bashrc``).
5. An existing file is replaced only when the request says ``overwrite``; a directory, or anything
   else that is not a regular file, is never replaced.
6. Missing directories are created only below the directory the path was confined to, never above
   or beside it.

The write itself (:func:`write_file`) neither follows a symbolic link nor replaces a file that
appeared after the check: the data goes to a new temporary file in the target directory (created
exclusively, ``tempfile.mkstemp``), which is then linked to the final name (``link`` fails when the
name exists) or, with ``overwrite``, renamed over it (a rename replaces a directory entry, it never
writes through a link).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Optional, Sequence

SUFFIX = ".npz"


class SavePathError(ValueError):
    """A save_path that is refused; the message names the rule, the path and what is allowed."""


def _resolve(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _inside(path: Path, base: Path) -> bool:
    return path == base or base in path.parents


@dataclass(frozen=True)
class SaveTarget:
    """A checked destination: the resolved file path and the directory it is confined to."""

    path: Path
    base: Path
    overwrite: bool


@dataclass(frozen=True)
class SavePolicy:
    """The confinement rules of the module docstring, for one node's parameters.

    directory : resolved ``save_directory`` (None: saving disabled).
    allowed : resolved ``allowed_save_directories`` (where absolute save_paths may point).
    """

    directory: Optional[Path]
    allowed: tuple[Path, ...] = ()

    @classmethod
    def from_parameters(cls, save_directory: str, allowed_save_directories: Sequence[str] = ()) -> "SavePolicy":
        """The policy of the parameter values; creates ``save_directory`` when it is missing (the operator's
        setting, not a request's). Raises ValueError naming the parameter."""
        directory = None
        if save_directory:
            directory = _resolve(Path(save_directory))
            try:
                directory.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise ValueError(f"parameter 'save_directory': cannot create {str(directory)!r} "
                                 f"({e.strerror})") from None
            if not directory.is_dir():
                raise ValueError(f"parameter 'save_directory': {str(directory)!r} is not a directory")
        allowed = []
        for entry in allowed_save_directories:
            if not os.path.isabs(entry):
                raise ValueError(f"parameter 'allowed_save_directories': entries must be absolute paths, got "
                                 f"{entry!r}")
            allowed.append(_resolve(Path(entry)))
        return cls(directory, tuple(allowed))

    def target(self, requested: str, overwrite: bool = False, default_name: Optional[str] = None
               ) -> Optional[SaveTarget]:
        """The checked destination of a request's ``save_path`` (or of ``default_name`` in ``save_directory``
        when ``requested`` is empty); None when nothing is to be saved. Raises SavePathError."""
        if not requested:
            if self.directory is None or default_name is None:
                return None
            return self._check(self.directory / default_name, self.directory, requested=default_name,
                               overwrite=False)
        if "\0" in requested:
            raise SavePathError("save_path contains a NUL character")
        if self.directory is None:
            raise SavePathError(f"save_path {requested!r} refused: saving is disabled on this node (its "
                                "save_directory parameter is empty)")
        path = Path(requested)
        if path.suffix == "":
            path = path.with_name(path.name + SUFFIX)
        elif path.suffix != SUFFIX:
            raise SavePathError(f"save_path {requested!r} refused: the file name must end in {SUFFIX} (a trajectory "
                                "file)")
        if path.is_absolute():
            if not self.allowed:
                raise SavePathError(f"save_path {requested!r} refused: absolute paths are not allowed on this node; "
                                    f"give a path relative to its save_directory {str(self.directory)!r}")
            resolved = _resolve(path)
            for base in self.allowed:
                if _inside(resolved.parent, base):
                    return self._check(resolved, base, requested, overwrite, resolved=True)
            raise SavePathError(f"save_path {requested!r} refused: it resolves to {str(resolved)!r}, which is not "
                                f"inside the allowed_save_directories "
                                f"({', '.join(repr(str(a)) for a in self.allowed)})")
        return self._check(self.directory / path, self.directory, requested, overwrite)

    @staticmethod
    def _check(path: Path, base: Path, requested: str, overwrite: bool, resolved: bool = False) -> SaveTarget:
        real = path if resolved else _resolve(path)
        if not _inside(real.parent, base):
            raise SavePathError(f"save_path {requested!r} refused: it resolves to {str(real)!r}, outside the "
                                f"directory {str(base)!r} it must stay in ('..' and symbolic links are resolved)")
        if os.path.lexists(real):
            if not real.is_file():
                raise SavePathError(f"save_path {requested!r} refused: {str(real)!r} exists and is not a regular "
                                    "file")
            if not overwrite:
                raise SavePathError(f"save_path {requested!r} refused: {str(real)!r} exists; set overwrite in the "
                                    "request to replace it")
        if not base.is_dir():
            raise SavePathError(f"save_path {requested!r} refused: the directory {str(base)!r} it must stay in does "
                                "not exist")
        existing = real.parent
        while not existing.exists():
            existing = existing.parent
        if not existing.is_dir():
            raise SavePathError(f"save_path {requested!r} refused: {str(existing)!r} is not a directory")
        if not os.access(existing, os.W_OK | os.X_OK):
            raise SavePathError(f"save_path {requested!r} refused: directory {str(existing)!r} is not writable by "
                                "the optimizer node")
        return SaveTarget(real, base, overwrite)


def _check_unchanged(directory: Path, base: Path) -> None:
    """Refuses a directory that became a symbolic link or vanished between the check and the write."""
    if _resolve(directory) != directory or not directory.is_dir():
        raise SavePathError(f"not saved: the directory {str(directory)!r} changed after the request was checked (it "
                            f"is missing or a symbolic link now), so the path would not stay inside {str(base)!r}")


def write_file(target: SaveTarget, write: Callable[[BinaryIO], None]) -> Path:
    """Writes a file at a checked target through ``write(binary file)``; returns its path.

    Creates the missing directories below ``target.base`` only; refuses (SavePathError) when the
    directory changed since the check so that it now leads outside, or (without overwrite) when the
    name exists by now. Other OSErrors propagate.
    """
    parent = target.path.parent
    d = target.base
    _check_unchanged(d, target.base)
    for part in parent.relative_to(target.base).parts:
        d = d / part
        try:
            os.mkdir(d)
        except FileExistsError:
            pass
        _check_unchanged(d, target.base)
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{target.path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o644)  # mkstemp's 0600 would hide the result from the node user's group
            write(f)
        if target.overwrite:
            os.replace(tmp, target.path)
        else:
            try:
                os.link(tmp, target.path)
            except FileExistsError:
                raise SavePathError(f"not saved: {str(target.path)!r} was created by someone else after the request "
                                    "was checked; set overwrite to replace it") from None
            os.unlink(tmp)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return target.path


__all__ = ["SavePathError", "SavePolicy", "SaveTarget", "write_file", "SUFFIX"]
