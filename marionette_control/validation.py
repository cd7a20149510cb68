"""Checks of numbers and arrays shared by every loader, option class and parameter: one wording per rule.

Each check returns the value in its checked form (a float, an int, a float array) or raises ``error`` (a
``ValueError`` class, the caller's own: ``ProblemError``, ``ParameterError``, ``TrajectoryError`` …) with a
message that names ``what`` was wrong and what was expected, e.g. ``"switch tolerance 'momentum' must be a
finite number > 0, got nan"``. ``key`` (optional) is passed to an error class that takes one (the option's
name in a front end's vocabulary, :class:`~marionette_control.ocp.tracking_problem.ProblemError`).

:func:`problem` gives the same texts without raising, for callers that collect them (parameter callbacks).
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np


def _raise(error: type, message: str, key: Optional[str]):
    raise (error(message, key=key) if key is not None else error(message))


def problem(value, *, minimum: Optional[float] = None, positive: bool = False, maximum: Optional[float] = None,
            integer: bool = False) -> Optional[str]:
    """What is wrong with ``value`` as a finite number (an integer if ``integer``) within the bounds, or None.

    The text completes "<what> must be …": e.g. ``"a finite number > 0, got -1"``.
    """
    want = "an integer" if integer else "a finite number"
    if positive:
        want += " > 0"
    elif minimum is not None:
        want += f" >= {minimum:g}"
    if maximum is not None:
        want += f" and <= {maximum:g}"
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return f"{want}, got {value!r}"
    v = float(value)
    if not math.isfinite(v) or (integer and v != int(v)):
        return f"{want}, got {value!r}"
    if (positive and v <= 0) or (minimum is not None and v < minimum) or (maximum is not None and v > maximum):
        return f"{want}, got {value!r}"
    return None


def number(value, what: str, *, minimum: Optional[float] = None, positive: bool = False,
           maximum: Optional[float] = None, error: type = ValueError, key: Optional[str] = None) -> float:
    """``value`` as a float: finite, > 0 if ``positive``, within [minimum, maximum] where given."""
    msg = problem(value, minimum=minimum, positive=positive, maximum=maximum)
    if msg:
        _raise(error, f"{what} must be {msg}", key)
    return float(value)


def positive(value, what: str, *, error: type = ValueError, key: Optional[str] = None) -> float:
    """``value`` as a float, finite and > 0."""
    return number(value, what, positive=True, error=error, key=key)


def nonnegative(value, what: str, *, error: type = ValueError, key: Optional[str] = None) -> float:
    """``value`` as a float, finite and >= 0."""
    return number(value, what, minimum=0.0, error=error, key=key)


def integer(value, what: str, *, minimum: Optional[int] = None, maximum: Optional[int] = None,
            error: type = ValueError, key: Optional[str] = None) -> int:
    """``value`` as an int (a bool is not one; a float with an integer value is not one either)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        want = "an integer" + (f" >= {minimum}" if minimum is not None else "")
        _raise(error, f"{what} must be {want}, got {value!r}", key)
    msg = problem(value, minimum=minimum, maximum=maximum, integer=True)
    if msg:
        _raise(error, f"{what} must be {msg}", key)
    return int(value)


def finite_array(value, what: str, shape: Optional[tuple] = None, *, error: type = ValueError,
                 key: Optional[str] = None) -> np.ndarray:
    """``value`` as a float array of ``shape`` (None entries: any size) with finite entries.

    The message of a non-finite entry names its index, e.g. ``"X[3, 1] is nan"``.
    """
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        _raise(error, f"{what} must be an array of numbers, got {type(value).__name__}", key)
    if shape is not None and (arr.ndim != len(shape) or any(s is not None and s != n for s, n in zip(shape, arr.shape))):
        want = "(" + ", ".join("any" if s is None else str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
        _raise(error, f"{what} must have shape {want}, got {arr.shape}", key)
    if arr.size and not np.isfinite(arr).all():
        i = tuple(int(j) for j in np.argwhere(~np.isfinite(arr))[0])
        at = f"[{', '.join(map(str, i))}]" if i else ""
        _raise(error, f"{what}{at} is {arr[i]}, expected finite values", key)
    return arr
