"""Checks of numbers and arrays shared by every loader, option class and parameter: one wording per rule.

Each check returns the value in its checked form (a float, an int, a float array) or raises ``error`` (a
``ValueError`` class, the caller's own: ``ProblemError``, ``ParameterError``, ``TrajectoryError`` …) with a
message that names ``what`` was wrong and what was expected, e.g. ``"switch tolerance 'momentum' must be a
finite number > 0, got nan"``. ``key`` (optional) is passed to an error class that takes one: an
:class:`InvalidOption` (the option's name in a front end's vocabulary, e.g. ``constraints.min_tension``).

:func:`problem` gives the same texts without raising, for callers that collect them (parameter callbacks); with
``short`` it words the requirement the way the optimizer's options, requests and parameters always have
(``"finite and > 0"``, which clients match). :func:`scalar` refuses at the first rule a value breaks, each rule
with its own text (``"must be finite"``, ``"must be > 0"``): the wording of constraint options and of
:func:`weight`, the rule of every diagonal cost and LQR weight.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np


class InvalidOption(ValueError):
    """An option (a setting, a weight, a field of a request) breaks its rule; the message says what was wrong and
    what was expected.

    ``key`` (optional) names the offending option in the vocabulary of the module that raised it
    (``constraints.min_tension``, ``tracking_gains.input``, ``tolerance``), for front ends (a YAML spec, a
    request, a node parameter) to word in their own terms. The optimizer's errors derive from it
    (``ProblemError``, ``OptionError``, ``GainDesignError``), so a front end may catch them all at once.
    """

    def __init__(self, message: str, key: Optional[str] = None):
        super().__init__(message)
        self.key = key


def _raise(error: type, message: str, key: Optional[str]):
    raise (error(message, key=key) if key is not None else error(message))


def problem(value, *, minimum: Optional[float] = None, positive: bool = False, maximum: Optional[float] = None,
            integer: bool = False, short: bool = False, note: str = "") -> Optional[str]:
    """What is wrong with ``value`` as a finite number (an integer if ``integer``) within the bounds, or None.

    The text completes "<what> must be …": e.g. ``"a finite number > 0, got -1"``; with ``short``
    ``"finite and > 0, got -1"`` (module docstring); ``note`` follows the requirement (``" (0: default)"``).
    """
    want = "an integer" if integer else "finite" if short else "a finite number"
    joint = " and" if short and not integer else ""
    if positive:
        want += f"{joint} > 0"
    elif minimum is not None:
        want += f"{joint} >= {minimum:g}"
    if maximum is not None:
        want += f" and <= {maximum:g}"
    want += note
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return f"{want}, got {value!r}"
    v = float(value)
    if not math.isfinite(v) or (integer and v != int(v)):
        return f"{want}, got {value!r}"
    if (positive and v <= 0) or (minimum is not None and v < minimum) or (maximum is not None and v > maximum):
        return f"{want}, got {value!r}"
    return None


def number(value, what: str, *, minimum: Optional[float] = None, positive: bool = False,
           maximum: Optional[float] = None, error: type = ValueError, key: Optional[str] = None,
           short: bool = False, note: str = "") -> float:
    """``value`` as a float: finite, > 0 if ``positive``, within [minimum, maximum] where given (``short``, ``note``:
    the requirement's wording, :func:`problem`)."""
    msg = problem(value, minimum=minimum, positive=positive, maximum=maximum, short=short, note=note)
    if msg:
        _raise(error, f"{what} must be {msg}", key)
    return float(value)


def scalar(value, what: str, *, minimum: Optional[float] = None, positive: bool = False, reason: str = "",
           error: type = ValueError, key: Optional[str] = None) -> float:
    """``value`` as a float (anything ``float()`` takes but a bool), refused at the first rule it breaks:
    ``"<what> must be a number, got 'x'"``, ``"… must be finite, got nan"``, ``"… must be > 0<reason>, got 0"``
    (with ``positive``), ``"… must be >= <minimum>, got -1"``."""
    try:
        if isinstance(value, bool):
            raise TypeError
        v = float(value)
    except (TypeError, ValueError):
        _raise(error, f"{what} must be a number, got {value!r}", key)
    if not math.isfinite(v):
        _raise(error, f"{what} must be finite, got {v}", key)
    if positive and v <= 0:
        _raise(error, f"{what} must be > 0{reason}, got {v}", key)
    if minimum is not None and v < minimum:
        _raise(error, f"{what} must be >= {minimum:g}, got {v}", key)
    return v


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


def weight(value, what: str, *, positive: bool = False, error: type = ValueError, key: Optional[str] = None) -> float:
    """A diagonal cost or LQR weight as a float: finite and >= 0, > 0 if ``positive`` (an input weight: every LQ
    subproblem needs R positive definite), in :func:`scalar`'s wording."""
    return scalar(value, what, minimum=0.0, positive=positive,
                  reason=" (the LQ subproblems need R positive definite)" if positive else "", error=error, key=key)
