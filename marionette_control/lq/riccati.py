r"""Discrete-time Riccati recursions: time-varying LQR, LQ with linear terms, DARE.

These are the linear-quadratic workhorses of the projection-operator optimizer:

* :func:`tv_lqr` gives the feedback gains :math:`\mathcal{K}(k)` of the discrete
  projection operator, thesis (6.10) (§6.2.2), by the discrete LQR recursion of
  thesis app. B.2.2.
* :func:`tv_lq` solves the discrete LQ problem with cross and linear terms, thesis
  (B.4) (app. B.2.3).  The descent direction of every model (steepest descent,
  quasi-Newton, Newton) is the solution of one such problem, thesis (6.29)-(6.30)
  (§6.5.1), with :math:`q(k) = \partial\ell/\partial x^T`,
  :math:`r(k) = \partial\ell/\partial u^T`, :math:`q(k_f) = Dm^T`.
* :func:`find_indefinite_step` (and :class:`IndefiniteGammaError`) is the
  positive-definiteness check the Newton model needs (thesis §6.3.2 after (6.17):
  the model must be positive definite; Newton model: §6.5.2, Prop. 6).
* :func:`dlqr` is the infinite-horizon regulator about an equilibrium
  (``scipy.linalg.solve_discrete_are``).

Conventions
-----------
Horizon :math:`N = k_f - k_0` steps, :math:`n` states, :math:`m` inputs, dynamics
:math:`x(k+1) = A(k)x(k) + B(k)u(k)`.  Per-step arrays are stacked along the first
axis: ``A[k]`` is :math:`A(k)`, shape ``(N, n, n)``; ``P[k]`` is :math:`P(k)` for
:math:`k = 0 \dots N`, shape ``(N + 1, n, n)``.  A weight given without the step axis
(``Q`` of shape ``(n, n)``) is used at every step.  The optimal input is
:math:`u(k) = -\mathcal{K}(k)x(k)` (LQR) or :math:`-\mathcal{K}(k)x(k) - C(k)` (LQ):
note the minus sign, as in the thesis.

Numerics
--------
As thesis app. B.2.3 prescribes after (B.4), the :math:`\Gamma` factors are cancelled
explicitly and :math:`P(k)` is projected onto the symmetric matrices after every step.  With the
Cholesky factor :math:`\Gamma = LL^T` and :math:`H = B^TP(k+1)A + S^T = \Gamma\mathcal{K}`,

.. math::
    \mathcal{K} = L^{-T}(L^{-1}H), \qquad \mathcal{K}^T\Gamma\mathcal{K} = H^T\mathcal{K},

so :math:`\Gamma` itself never multiplies anything; likewise
:math:`C^T\Gamma C = |w|^2` with :math:`w = L^{-1}[B^Tb(k+1) + r]`, subtracted as a
non-negative number.  (In numpy, :math:`H^T\mathcal{K}` measured 2 us per step faster
than the Gram form :math:`W^TW`, :math:`W = L^{-1}H`; the symmetric projection that
follows removes their only difference, roundoff asymmetry.)

In the numpy reference sweep the triangular inverse :math:`L^{-1}` is formed
(``dtrtri``, :math:`m^3/3` flops) instead of calling ``dpotrs``/``cho_solve``: for :math:`m = 18`, :math:`n = 80`,
OpenBLAS's small triangular solves measured 6-18 us per call on this machine (and
``cho_solve``'s Python wrapper 27 us) versus about 4 us for ``dtrtri`` plus two small
products; the accuracy of applying a computed triangular inverse is comparable to that
of a triangular solve (Higham, *Accuracy and Stability of Numerical Algorithms*,
ch. 8 and 14).

Implementation
--------------
The sweep runs in the core (``cpp/src/riccati.cpp``, ``_core._riccati_sweep``, GIL
released) with the same algebra (with the Gram form
:math:`\mathcal{K}^T\Gamma\mathcal{K} = W^TW`, :math:`W = L^{-1}H`, which saves it a
product, and :math:`\mathcal{K} = L^{-T}W` by substitution on whole rows).  It exploits
the structure of linearizations with kinematic configurations (docs/architecture.md, state
layout): the rows of the kinematic configurations and velocities in :math:`[A\ B]` have
one entry each (:math:`\rho_{k+1} = u`, :math:`v_{k+1} = (u - \rho_k)/\Delta t`) and the
velocity columns of :math:`A` are zero, so :math:`A^TPA`, :math:`B^TPA`, :math:`B^TPB` are
formed from the dense rows only (humanoid marionette: 44 of 80 rows, 62 of 80 columns)
plus rank-one terms, skipping the rows of :math:`P(k+1)` that are zero on the dense
columns (the velocities' under block-diagonal weights) and forming only lower
triangles, from which :math:`P(k)` is assembled exactly symmetric.  The pattern is
detected from the data and checked at every step (a step that does not fit is computed
densely), so any ``A``, ``B`` gives the same result as the dense recursion
:func:`_sweep_numpy` (kept as the reference).  Products go to scipy's BLAS ``dgemm``
(run-time dispatched AVX2/AVX-512 kernels), the loops around them to an AVX2 clone
picked at load time (the core itself is compiled for the baseline ISA).

``full_P=False`` keeps only :math:`P(0)`, as trep's ``solve_tv_lqr`` does: the gains and
:math:`P(0)` are all the optimizer and the controllers use.  1000 steps, n = 80,
m = 18, as called (validation, new outputs): about 37-43 ms (every :math:`P(k)`
kept: 41-45 ms; the numpy sweep 88 ms; trep's ``solve_tv_lqr`` 125 ms, measured
together on this project's machine, ``python -m benchmarks.run --only optimizer``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple, Optional

import numpy as np
import scipy.linalg
from scipy.linalg import cython_blas
from scipy.linalg import lapack as _lapack

from marionette_control import _core

__all__ = [
    "IndefiniteGammaError",
    "NotStabilizableError",
    "LQRSolution",
    "LQSolution",
    "DLQRSolution",
    "tv_lqr",
    "tv_lq",
    "find_indefinite_step",
    "dlqr",
]

# Relative tolerance of the symmetry check: |M - M^T| <= _SYM_RTOL * max|M| per matrix.
# Loose enough for weights assembled in floating point (Hessians, z^T D^2 f contractions),
# tight enough to catch a transposed or mis-indexed block.
_SYM_RTOL = 1e-9

_dpotrf = _lapack.dpotrf
_dtrtri = _lapack.dtrtri


# --------------------------------------------------------------------------- errors


class IndefiniteGammaError(np.linalg.LinAlgError):
    r"""``Gamma(k) = R(k) + B(k)^T P(k+1) B(k)`` is not positive definite at step ``k``.

    Raised by the backward sweep of :func:`tv_lqr` / :func:`tv_lq`.  For the LQ
    problem with fixed :math:`x(k_0)` the cost is a quadratic in the stacked inputs
    :math:`(u(k_0), \dots, u(k_f - 1))`, and the :math:`\Gamma(k)` are exactly the
    pivots of its Hessian eliminated from the last step backwards: the problem has a
    unique minimiser iff every :math:`\Gamma(k)` is positive definite.  So this error
    means "this quadratic model is not convex" -- for the Newton model of thesis
    §6.5.2, Prop. 6, the cue to fall back to the quasi-Newton model (thesis §6.3.2.2:
    steepest descent or quasi-Newton first, Newton near the solution).

    Attributes
    ----------
    step : int
        The step :math:`k` (0-based, ``0 <= k < N``) whose :math:`\Gamma(k)` failed.
        Steps ``k + 1 ... N - 1`` were fine.
    order : int
        The order of the leading minor of :math:`\Gamma(k)` that was not positive
        (LAPACK ``dpotrf`` ``info``), ``1 <= order <= m``.
    """

    def __init__(self, step: int, order: int, m: int):
        self.step = int(step)
        self.order = int(order)
        super().__init__(
            f"Gamma(k) = R(k) + B(k)^T P(k+1) B(k) is not positive definite at step "
            f"k={self.step}: its leading minor of order {self.order} (of {m}) is not "
            f"positive, so the quadratic model has no unique minimiser in u({self.step}) "
            f"(thesis app. B.2.3 requires R(k) > 0; for a Newton model use a "
            f"positive-definite model, e.g. quasi-Newton, at this iterate)"
        )


class NotStabilizableError(np.linalg.LinAlgError):
    """``(A, B)`` has a mode with ``|lambda| >= 1`` that no input can move.

    Attributes
    ----------
    eigenvalues : numpy.ndarray
        The eigenvalues of ``A`` that fail the PBH rank test
        ``rank [A - lambda I, B] = n``.
    """

    def __init__(self, eigenvalues: np.ndarray):
        self.eigenvalues = np.asarray(eigenvalues)
        listed = ", ".join(f"{complex(v):.6g}" if np.iscomplexobj(v) and v.imag != 0
                           else f"{float(np.real(v)):.6g}" for v in self.eigenvalues)
        super().__init__(
            f"(A, B) is not stabilizable: eigenvalue(s) {listed} of A have "
            f"|lambda| >= 1 and are uncontrollable (PBH test: rank [A - lambda I, B] < n); "
            f"no feedback u = -Kx can stabilize them and the DARE has no stabilizing "
            f"solution. Check that B has a column acting on these modes."
        )


# ------------------------------------------------------------------------ solutions


@dataclass(frozen=True, eq=False)
class LQRSolution:
    r"""Solution of the time-varying discrete LQR problem (thesis app. B.2.2).

    Attributes
    ----------
    K : numpy.ndarray, shape (N, m, n)
        Gains; the optimal input is :math:`u(k) = -\mathcal{K}(k) x(k)`.
    P : numpy.ndarray, shape (N + 1, n, n), or (1, n, n)
        Symmetric cost-to-go matrices, :math:`V^*(x, k) = x^T P(k) x`,
        :math:`P(N) = Q_f`; only :math:`P(0)` when solved with ``full_P=False``.
    """

    K: np.ndarray
    P: np.ndarray

    @property
    def horizon(self) -> int:
        """Number of steps ``N``."""
        return self.K.shape[0]


@dataclass(frozen=True, eq=False)
class LQSolution:
    r"""Solution of the discrete LQ problem with linear terms, thesis (B.4).

    Attributes
    ----------
    K : numpy.ndarray, shape (N, m, n)
        Feedback gains :math:`\mathcal{K}(k)`.
    C : numpy.ndarray, shape (N, m)
        Affine terms; the optimal input is :math:`u(k) = -\mathcal{K}(k)x(k) - C(k)`.
    P : numpy.ndarray, shape (N + 1, n, n), or (1, n, n)
        Symmetric quadratic cost-to-go, :math:`P(N) = Q_f`; only :math:`P(0)` when
        solved with ``full_P=False``.
    b : numpy.ndarray, shape (N + 1, n)
        Linear cost-to-go, :math:`b(N) = q_f`.
    c : numpy.ndarray, shape (N + 1,)
        Constant cost-to-go, :math:`c(N) = 0`.  The optimal cost from :math:`x` at
        step :math:`k` is :math:`x^T P(k) x + 2 b(k)^T x + c(k)`.
    A, B : numpy.ndarray
        The dynamics the problem was solved for (references, not copies), shapes
        ``(N, n, n)`` and ``(N, n, m)``; used by :meth:`rollout`.
    """

    K: np.ndarray
    C: np.ndarray
    P: np.ndarray
    b: np.ndarray
    c: np.ndarray
    A: np.ndarray = field(repr=False)
    B: np.ndarray = field(repr=False)

    @property
    def horizon(self) -> int:
        """Number of steps ``N``."""
        return self.K.shape[0]

    def value(self, x0, k: int = 0) -> float:
        r"""Optimal cost-to-go :math:`V^*(x, k) = x^TP(k)x + 2b(k)^Tx + c(k)` (B.4).

        Parameters
        ----------
        x0 : array_like, shape (n,)
            State at step ``k``.
        k : int, optional
            Step, ``0 <= k <= N`` (default 0; only 0 when solved with
            ``full_P=False``).
        """
        x = _state_vector(x0, self.P.shape[1])
        if k != 0 and self.P.shape[0] == 1 and self.horizon > 0:
            raise ValueError(f"this solution kept P(0) only (full_P=False): the value at step k={k} "
                             f"needs tv_lq(..., full_P=True)")
        return float(x @ self.P[k] @ x + 2.0 * (self.b[k] @ x) + self.c[k])

    def rollout(self, x0):
        r"""Simulate the optimal closed loop from ``x0``.

        :math:`u(k) = -\mathcal{K}(k)x(k) - C(k)`,
        :math:`x(k+1) = A(k)x(k) + B(k)u(k)`, :math:`x(0) = x_0`.  In the optimizer
        this turns the LQ solution into the descent direction
        :math:`\delta\xi = (\delta x, \delta u)` (thesis §6.5.1, after (6.30)), with
        :math:`\delta x(0) = 0` when the initial state is fixed.

        Parameters
        ----------
        x0 : array_like, shape (n,)

        Returns
        -------
        X : numpy.ndarray, shape (N + 1, n)
        U : numpy.ndarray, shape (N, m)
        """
        x = np.ascontiguousarray(_state_vector(x0, self.K.shape[2]))
        return _core._lq_rollout(np.ascontiguousarray(self.A), np.ascontiguousarray(self.B), self.K, self.C, x)


class DLQRSolution(NamedTuple):
    r"""Infinite-horizon discrete LQR: :math:`u = -Kx`, :math:`V^*(x) = x^TPx`.

    Attributes
    ----------
    K : numpy.ndarray, shape (m, n)
    P : numpy.ndarray, shape (n, n)
        Stabilizing solution of the DARE, symmetric.
    """

    K: np.ndarray
    P: np.ndarray


# ----------------------------------------------------------------------- validation


def _state_vector(x0, n: int) -> np.ndarray:
    x = np.asarray(x0, dtype=np.float64)
    if x.shape != (n,):
        raise ValueError(f"x0 has shape {x.shape}, expected ({n},)")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"x0 contains non-finite entries: {x}")
    return x


def _as_float(name: str, value) -> np.ndarray:
    """``value`` as a float64 array whose matrices BLAS can use in place.

    Ragged lists of per-step arrays are reported by step.
    """
    if type(value) is np.ndarray and value.dtype == np.float64 and (value.ndim < 2 or _blas_compatible(value)):
        return value    # what the conversions below return for it, without their ~2 µs per argument
    if value is None:
        raise ValueError(f"{name} is required (got None)")
    try:
        arr = np.asarray(value)
    except ValueError:  # ragged nested sequence
        arr = None
    if arr is None or arr.dtype == object:
        # A list of per-step arrays whose shapes disagree: name the first odd one.
        if isinstance(value, (list, tuple)) and len(value) > 0:
            shapes = [np.shape(v) for v in value]
            ref = max(set(shapes), key=shapes.count)
            for k, s in enumerate(shapes):
                if s != ref:
                    raise ValueError(
                        f"{name}[{k}] has shape {s}, but most steps of {name} have "
                        f"shape {ref}; every step must have the same shape")
        raise ValueError(f"{name} could not be converted to a numeric array")
    if np.iscomplexobj(arr):
        raise ValueError(f"{name} is complex; these solvers take real arrays only")
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise ValueError(f"{name} has non-numeric dtype {arr.dtype}")
    arr = np.asarray(arr, dtype=np.float64)
    if arr.ndim >= 2 and not _blas_compatible(arr):
        arr = np.ascontiguousarray(arr)
    return arr


def _blas_compatible(arr: np.ndarray) -> bool:
    """Whether every 2-D slice ``arr[..., :, :]`` goes to BLAS without a copy.

    True for C- and Fortran-ordered slices with any leading dimension, e.g. ``A`` and
    ``B`` as views ``AB[:, :, :n]`` and ``AB[:, :, n:]`` of one stacked ``[A B]``
    linearization: those are used in place instead of being copied.
    """
    item = arr.itemsize
    rs, cs = arr.strides[-2], arr.strides[-1]
    rows, cols = arr.shape[-2], arr.shape[-1]
    if rows <= 1 or cols <= 1:
        return arr.flags.c_contiguous or arr.flags.f_contiguous
    return (cs == item and rs >= cols * item and rs % item == 0) or (
        rs == item and cs >= rows * item and cs % item == 0)


def _per_step(name: str, value, N: int, shape: tuple, optional: bool = False):
    """Validate the shape of a per-step quantity; returns ``(array, stacked)``.

    Accepts ``(N, *shape)`` (one value per step) or ``shape`` (the same every step).
    A list of ``N`` per-step arrays is accepted too; a step whose shape disagrees is
    named (``"Q[3] has shape (4, 5), expected (4, 4)"``).
    """
    if value is None:
        if optional:
            return None, False
        raise ValueError(f"{name} is required (got None)")
    if isinstance(value, (list, tuple)) and len(value) == N > 0:
        # A list of per-step matrices (each with len(shape) axes) rather than one
        # nested list for a constant value: check every step's shape.
        try:
            per_step = all(np.ndim(v) == len(shape) for v in value)
        except ValueError:  # a ragged element
            per_step = False
        if per_step:
            for k, v in enumerate(value):
                if np.shape(v) != shape:
                    raise ValueError(
                        f"{name}[{k}] has shape {np.shape(v)}, expected {shape}")
    arr = _as_float(name, value)
    if arr.shape == (N,) + shape:
        return arr, True
    if arr.shape == shape:
        return arr, False
    if arr.ndim == len(shape) + 1 and arr.shape[1:] == shape:
        raise ValueError(
            f"{name} has {arr.shape[0]} steps (shape {arr.shape}) but the horizon "
            f"from A is N={N}: expected {(N,) + shape} or {shape}")
    if arr.ndim == len(shape) + 1 and arr.shape[0] == N:
        raise ValueError(
            f"{name}[k] has shape {arr.shape[1:]}, expected {shape} "
            f"({name} has shape {arr.shape}; expected {(N,) + shape} or {shape})")
    raise ValueError(
        f"{name} has shape {arr.shape}, expected {(N,) + shape} (one per step) "
        f"or {shape} (the same at every step)")


def _check_finite(name: str, arr: np.ndarray, stacked: bool) -> None:
    # A float sum is finite only if every term is: one O(size) pass with no temporary
    # on the common path; the exact scan runs only to locate a problem (or after an
    # overflow of a sum of finite values, which the scan then clears).
    if arr.size == 0 or np.isfinite(arr.sum()):
        return
    bad = np.argwhere(~np.isfinite(arr))
    if bad.size == 0:
        return
    idx = tuple(int(i) for i in bad[0])
    v = arr[idx]
    what = "NaN" if np.isnan(v) else ("+inf" if v > 0 else "-inf")
    more = f" ({len(bad) - 1} more non-finite entries)" if len(bad) > 1 else ""
    if stacked:
        where = f"at step {idx[0]}" + (f" (entry {list(idx[1:])})" if len(idx) > 1 else "")
    else:
        where = f"at entry {list(idx)}" if idx else ""
    raise ValueError(f"{name} contains {what} {where}{more}".rstrip())


def _check_symmetric(name: str, arr: np.ndarray, stacked: bool) -> None:
    M = arr if stacked else arr[None]
    Mt = M.transpose(0, 2, 1)
    if np.array_equal(M, Mt):
        return
    asym = np.abs(M - Mt).max(axis=(1, 2))
    scale = np.abs(M).max(axis=(1, 2))
    bad = np.flatnonzero(asym > _SYM_RTOL * scale)
    if bad.size:
        k = int(bad[0])
        label = f"{name}[{k}]" if stacked else name
        raise ValueError(
            f"{label} must be symmetric: max |{label} - {label}^T| = {asym[k]:.3g} "
            f"exceeds {_SYM_RTOL:g} x max |{label}| = {_SYM_RTOL * scale[k]:.3g} "
            f"(only the symmetric part of a weight enters the cost; pass "
            f"(M + M^T)/2 if that is what you meant)")


def _validate_problem(A, B, Q, R, Qf, S=None, q=None, r=None, qf=None, *,
                      check_values: bool = True):
    """The single validation point for every time-varying solver in this module.

    Checks shapes always (O(1)); when ``check_values`` is true also that every entry is
    finite and that ``Q``, ``R``, ``Qf`` are symmetric (relative tolerance
    ``_SYM_RTOL``).  Returns float64 arrays (copied only when a matrix's layout is
    not one BLAS takes, see :func:`_blas_compatible`), the per-step weights
    broadcast to ``(N, ...)`` as read-only views (no copy), and ``(N, n, m)``.
    """
    A = _as_float("A", A)
    if A.ndim != 3 or A.shape[1] != A.shape[2]:
        raise ValueError(
            f"A has shape {A.shape}, expected (N, n, n): one square matrix per step")
    N, n = A.shape[0], A.shape[1]
    if n == 0:
        raise ValueError("A has n=0 states")
    B = _as_float("B", B)
    if B.ndim != 3 or B.shape[:2] != (N, n):
        raise ValueError(
            f"B has shape {B.shape}, expected (N, n, m) = ({N}, {n}, m) to match A "
            f"of shape {A.shape}")
    m = B.shape[2]
    if m == 0:
        raise ValueError("B has m=0 inputs")

    Qa, Q_st = _per_step("Q", Q, N, (n, n))
    Ra, R_st = _per_step("R", R, N, (m, m))
    Sa, S_st = _per_step("S", S, N, (n, m), optional=True)
    qa, q_st = _per_step("q", q, N, (n,), optional=True)
    ra, r_st = _per_step("r", r, N, (m,), optional=True)
    Qfa = _as_float("Qf", Qf)
    if Qfa.shape != (n, n):
        raise ValueError(f"Qf has shape {Qfa.shape}, expected ({n}, {n})")
    qfa = None
    if qf is not None:
        qfa = _as_float("qf", qf)
        if qfa.shape != (n,):
            raise ValueError(f"qf has shape {qfa.shape}, expected ({n},)")

    if check_values:
        _check_finite("A", A, True)
        _check_finite("B", B, True)
        for name, arr, st in (("Q", Qa, Q_st), ("R", Ra, R_st), ("S", Sa, S_st),
                              ("q", qa, q_st), ("r", ra, r_st), ("Qf", Qfa, False),
                              ("qf", qfa, False)):
            if arr is not None:
                _check_finite(name, arr, st)
        _check_symmetric("Q", Qa, Q_st)
        _check_symmetric("R", Ra, R_st)
        _check_symmetric("Qf", Qfa, False)

    def steps(arr, st, shape):
        if arr is None or st:
            return arr
        if not arr.flags.c_contiguous:
            return np.broadcast_to(arr, (N,) + shape)
        # np.broadcast_to's view, built directly (a quarter of its cost, which counts on small problems)
        view = np.ndarray((N,) + shape, np.float64, arr, 0, (0,) + arr.strides)
        view.flags.writeable = False
        return view

    return (A, B, steps(Qa, Q_st, (n, n)), steps(Ra, R_st, (m, m)), Qfa,
            steps(Sa, S_st, (n, m)), steps(qa, q_st, (n,)), steps(ra, r_st, (m,)),
            qfa, (N, n, m))


# ------------------------------------------------------------------- backward sweep


def _dgemm_capsule():
    """scipy's BLAS dgemm (Fortran interface) as a PyCapsule for the core's sweep, or None."""
    try:
        return cython_blas.__pyx_capi__["dgemm"]
    except (AttributeError, KeyError):  # pragma: no cover - scipy always has it
        return None


_DGEMM = _dgemm_capsule()


def _core_arg(arr):
    """A per-step input as the core takes it: the single matrix of a broadcast (constant) weight, else
    the input itself (the core's binding converts what is not a C-contiguous float64 array)."""
    if type(arr) is np.ndarray and arr.ndim >= 1 and arr.shape[0] > 0 and arr.strides[0] == 0:
        return arr[0]
    return arr


def _sweep(A, B, Q, R, Qf, S, q, r, qf, linear: bool, out=None, blas=True, full_P=True):
    """Backward Riccati sweep of (B.4) in the core (``_core._riccati_sweep``).

    Same contract as :func:`_sweep_numpy` (the reference implementation in numpy,
    kept for cross-checks), except that ``full_P=False`` returns P of shape
    (1, n, n) holding P(0) only, and that the inputs may also be unvalidated arrays
    (``check_inputs=False``: the core's binding checks their shapes and converts
    what is not C-contiguous float64; ``B`` must be an array). The core exploits the sparsity of A and B that
    linearizations with kinematic configurations have (trivial rows of the
    kinematic configurations and velocities, zero columns of the velocities;
    checked at every step, dense steps otherwise) and runs its products on scipy's
    BLAS dgemm (``blas=False``: on Eigen, slower, for tests).
    """
    N, n, m = B.shape[0], B.shape[1], B.shape[2]
    K = _output_array(out, "K", (N, m, n))
    P = _output_array(out, "P", ((N + 1) if full_P else 1, n, n))
    if linear:
        C = _output_array(out, "C", (N, m))
        b = _output_array(out, "b", (N + 1, n))
        c = _output_array(out, "c", (N + 1,))
    else:
        C = b = c = None
    res = _core._riccati_sweep(A, B, _core_arg(Q), _core_arg(R), Qf, _core_arg(S), _core_arg(q) if linear else None,
                               _core_arg(r) if linear else None, qf if linear else None, K, P, C, b, c, linear,
                               _DGEMM if blas else None)
    k = res["failed_step"]
    if k >= 0:
        _raise_gamma_failure(k, res["failed_order"], m, P[k + 1] if full_P else P[0])
    if not res["finite"]:
        _raise_overflow(P, b, c, full_P)
    return K, P, C, b, c


def _sweep_numpy(A, B, Q, R, Qf, S, q, r, qf, linear: bool, out=None):
    """Backward Riccati sweep of (B.4); the LQR recursion when ``S``/``linear`` are off.

    Inputs are validated per-step stacks (possibly broadcast or strided views).
    Returns ``(K, P, C, b, c)``; the last three are ``None`` unless ``linear``.
    Raises :class:`IndefiniteGammaError` at the first (largest) step whose Gamma is
    not positive definite.  ``out``: a previous solution whose arrays are
    overwritten instead of allocating new ones (see :func:`_output_array`).
    """
    N, n, m = B.shape[0], B.shape[1], B.shape[2]
    K = _output_array(out, "K", (N, m, n))
    P = _output_array(out, "P", (N + 1, n, n))
    np.add(Qf, Qf.T, out=P[N])
    P[N] *= 0.5

    # Step workspaces, allocated once: the loop body allocates nothing of size n x n.
    PA = np.empty((n, n))
    PB = np.empty((n, m))
    T = np.empty((n, n))
    HtK = np.empty((n, n))
    G = np.empty((m, m))
    H = np.empty((m, n))
    W = np.empty((m, n))
    mm = np.matmul
    potrf, trtri = _dpotrf, _dtrtri
    has_S = S is not None

    if linear:
        C = _output_array(out, "C", (N, m))
        b = _output_array(out, "b", (N + 1, n))
        c = _output_array(out, "c", (N + 1,))
        b[N] = 0.0 if qf is None else qf
        c[N] = 0.0
        g = np.empty(m)
        w = np.empty(m)
        tn = np.empty(n)
        has_q, has_r = q is not None, r is not None
    else:
        C = b = c = None

    # Overflow is detected and reported below with the step; numpy's warnings would
    # only duplicate it.
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(N - 1, -1, -1):
            Pn = P[k + 1]
            Ak = A[k]
            Bk = B[k]
            mm(Pn, Ak, out=PA)
            mm(Pn, Bk, out=PB)
            mm(Bk.T, PB, out=G)
            G += R[k]
            mm(Bk.T, PA, out=H)                         # B^T P(k+1) A
            if has_S:
                H += S[k].T                             # ... + S^T
            # Gamma = L L^T in place; G is C-ordered and symmetric, so G.T is the
            # Fortran-ordered view LAPACK can overwrite without a copy.
            L, info = potrf(G.T, 1, 1, 1)               # lower, clean, overwrite_a
            if info != 0:
                _raise_gamma_failure(k, info, m, Pn)
            Li, info = trtri(L, 1, 0, 1)                # lower, unitdiag, overwrite_c
            if info != 0:  # a zero pivot in L: Gamma is numerically singular
                _raise_gamma_failure(k, info, m, Pn)
            mm(Li, H, out=W)                            # L^{-1} H
            Kk = K[k]
            mm(Li.T, W, out=Kk)                         # K = L^{-T} L^{-1} H = Gamma^{-1} H
            mm(H.T, Kk, out=HtK)                        # K^T Gamma K = H^T K, Gamma cancelled
            mm(Ak.T, PA, out=T)
            T -= HtK
            T += Q[k]
            Pk = P[k]
            np.add(T, T.T, out=Pk)                      # symmetric projection, thesis app. B.2.3
            Pk *= 0.5

            if linear:
                bn = b[k + 1]
                mm(bn, Bk, out=g)                       # B^T b(k+1)
                if has_r:
                    g += r[k]                           # g = B^T b(k+1) + r = Gamma C
                mm(Li, g, out=w)
                mm(Li.T, w, out=C[k])                   # C = Gamma^{-1} g
                bk = b[k]
                mm(bn, Ak, out=bk)                      # A^T b(k+1)
                mm(g, Kk, out=tn)                       # K^T (B^T b + r)
                bk -= tn
                if has_q:
                    bk += q[k]
                c[k] = c[k + 1] - float(w @ w)          # C^T Gamma C = |L^{-1} g|^2

    if not np.all(np.isfinite(P[0])) or (linear and not (
            np.all(np.isfinite(b[0])) and np.isfinite(c[0]))):
        _raise_overflow(P, b, c)
    return K, P, C, b, c


def _output_array(out, name: str, shape: tuple) -> np.ndarray:
    """``out.<name>`` to be overwritten, or a new array.

    Reusing the arrays of a previous solution matters at the optimizer's sizes: a new
    (1001, 80, 80) array is 51 MB whose first touch costs ~10 ms of page faults, a
    tenth of the sweep itself.
    """
    if out is None:
        return np.empty(shape)
    arr = getattr(out, name)
    if arr.shape != shape or arr.dtype != np.float64 or not arr.flags.c_contiguous \
            or not arr.flags.writeable:
        raise ValueError(
            f"out.{name} has shape {arr.shape} (dtype {arr.dtype}), expected a "
            f"writeable C-contiguous float64 array of shape {shape}: out must be a "
            f"solution of a problem with the same N, n, m")
    return arr


def _raise_gamma_failure(k: int, info: int, m: int, Pn: np.ndarray):
    if info < 0:  # an argument error inside LAPACK: a bug here, not a user error
        raise RuntimeError(f"LAPACK reported illegal argument {-info} at step k={k}")
    if not np.all(np.isfinite(Pn)):
        raise FloatingPointError(
            f"P(k+1) is not finite at step k={k}: the Riccati recursion overflowed "
            f"(the horizon is long for an unstable, weakly penalised system; scale "
            f"the problem or shorten the horizon)")
    raise IndefiniteGammaError(k, info, m)


def _raise_overflow(P, b, c, full_P: bool = True):
    """FloatingPointError naming the largest step with a non-finite value (not when
    only P(0) was kept)."""
    if not full_P:
        where = "(P(0) is not finite; solve with full_P=True to find the step)"
    else:
        bad = [k for k in range(P.shape[0]) if not np.all(np.isfinite(P[k]))
               or (b is not None and not (np.all(np.isfinite(b[k])) and np.isfinite(c[k])))]
        where = f"at step k={max(bad)}"
    raise FloatingPointError(
        f"the Riccati recursion produced non-finite values {where} "
        f"(overflow: the horizon is long for an unstable, weakly penalised system, "
        f"or the inputs were not checked; call with check_inputs=True)")


# ------------------------------------------------------------------------ solvers


def tv_lqr(A, B, Q, R, Qf, *, check_inputs: bool = True,
           out: Optional[LQRSolution] = None, full_P: bool = True) -> LQRSolution:
    r"""Time-varying discrete LQR over a finite horizon (thesis app. B.2.2).

    Minimises

    .. math::
        V = \sum_{k=0}^{N-1}\left[x^T(k)Q(k)x(k) + u^T(k)R(k)u(k)\right]
            + x^T(N)\,Q_f\,x(N)

    subject to :math:`x(k+1) = A(k)x(k) + B(k)u(k)`, :math:`x(0)` given.  The solution
    is :math:`u^*(k) = -\mathcal{K}(k)x(k)`, :math:`V^* = x^T(0)P(0)x(0)`, with
    :math:`P(N) = Q_f` and, for :math:`k = N-1, \dots, 0`,

    .. math::
        \Gamma(k) &= R(k) + B^T(k)P(k+1)B(k) \\
        \mathcal{K}(k) &= \Gamma^{-1}(k)B^T(k)P(k+1)A(k) \\
        P(k) &= Q(k) + A^T(k)P(k+1)A(k) - \mathcal{K}^T(k)\Gamma(k)\mathcal{K}(k),

    followed by :math:`P(k) \leftarrow \tfrac12(P(k) + P^T(k))` (thesis app. B.2.3, after (B.4)).  This
    is :func:`tv_lq` with :math:`S = 0`, :math:`q = r = q_f = 0`.  In the optimizer it
    supplies the projection gains of thesis (6.10) (usually :math:`Q = R = I`, thesis §6.3.1).

    Parameters
    ----------
    A : array_like, shape (N, n, n)
    B : array_like, shape (N, n, m)
    Q : array_like, shape (N, n, n) or (n, n)
        Symmetric state weights (the same at every step if 2-D).
    R : array_like, shape (N, m, m) or (m, m)
        Symmetric input weights.  Need not be positive definite itself; every
        :math:`\Gamma(k)` must be.
    Qf : array_like, shape (n, n)
        Symmetric terminal weight, :math:`Q(k_f)` in the thesis.
    check_inputs : bool, optional
        Convert the inputs, check their shapes (naming the array and the step), that
        every entry is finite and the weights symmetric (default).  Pass ``False`` in
        inner loops on numpy arrays whose values were checked where they entered (a
        problem's weights at its construction, the core's linearizations): then only
        the core's binding checks shapes (without per-step detail), and a non-finite
        input surfaces as the overflow error.  The full checks read every input once
        (about 25 ms for N=1000, n=80 with a time-varying Q; ~5 ms with a constant
        one) and cost about 10 us per call on small problems, as much as the sweep of
        100 steps of a pendulum.
    out : LQRSolution, optional
        A previous solution of a problem of the same sizes (and the same
        ``full_P``) whose arrays are overwritten and returned in the new solution
        (saves the allocation and page faults of 51 MB at N=1000, n=80).  Its old
        contents are lost, also when an error is raised part-way.
    full_P : bool, optional
        Keep every :math:`P(k)` (default).  ``False`` keeps :math:`P(0)` only, in
        ``P`` of shape (1, n, n): what gain schedules and the optimizer use (and what
        trep's ``solve_tv_lqr`` returns), without writing :math:`(N+1)n^2` numbers
        (51 MB at N = 1000, n = 80).

    Returns
    -------
    LQRSolution
        ``K`` of shape (N, m, n) and ``P`` of shape (N + 1, n, n) (``full_P=False``:
        (1, n, n)).

    Raises
    ------
    ValueError
        Wrong shape, non-finite entry or asymmetric weight; the message names the
        array, the step and the expected value.
    IndefiniteGammaError
        :math:`\Gamma(k)` not positive definite; ``.step`` is :math:`k`.
    FloatingPointError
        The recursion overflowed.
    """
    if check_inputs:
        A, B, Q, R, Qf, _, _, _, _, _ = _validate_problem(A, B, Q, R, Qf)
    K, P, _, _, _ = _sweep(A, B, Q, R, Qf, None, None, None, None, linear=False,
                           out=out, full_P=full_P)
    return LQRSolution(K=K, P=P)


def tv_lq(A, B, Q, S, R, q, r, Qf, qf, *, check_inputs: bool = True,
          out: Optional[LQSolution] = None, full_P: bool = True) -> LQSolution:
    r"""Discrete LQ problem with cross and linear terms, exactly thesis (B.4).

    Minimises (thesis app. B.2.3)

    .. math::
        V = \sum_{k=0}^{N-1}\left(
            \begin{bmatrix}x(k)\\u(k)\end{bmatrix}^T
            \begin{bmatrix}Q(k) & S(k)\\ S^T(k) & R(k)\end{bmatrix}
            \begin{bmatrix}x(k)\\u(k)\end{bmatrix}
            + 2\begin{bmatrix}q(k)\\r(k)\end{bmatrix}^T
            \begin{bmatrix}x(k)\\u(k)\end{bmatrix}\right)
            + x^T(N)Q_f x(N) + 2q_f^T x(N)

    subject to :math:`x(k+1) = A(k)x(k) + B(k)u(k)`, :math:`x(0)` given.  Solution:
    :math:`u^*(k) = -\mathcal{K}(k)x(k) - C(k)`,
    :math:`V^* = x^T(0)P(0)x(0) + 2b^T(0)x(0) + c(0)`, where, backwards from
    :math:`P(N) = Q_f`, :math:`b(N) = q_f`, :math:`c(N) = 0`,

    .. math::
        \Gamma &= R + B^TP(k+1)B \\
        \mathcal{K} &= \Gamma^{-1}\left[B^TP(k+1)A + S^T\right] \\
        C &= \Gamma^{-1}\left[B^Tb(k+1) + r\right] \\
        P(k) &= Q + A^TP(k+1)A - \mathcal{K}^T\Gamma\mathcal{K} \\
        b(k) &= \left[A^T - \mathcal{K}^TB^T\right]b(k+1) + q - \mathcal{K}^Tr \\
        c(k) &= c(k+1) - C^T\Gamma C.

    Implemented with :math:`\Gamma` cancelled as thesis app. B.2.3 asks after (B.4):
    :math:`b(k) = A^Tb(k+1) + q - \mathcal{K}^T[B^Tb(k+1) + r]` and
    :math:`C^T\Gamma C = C^T[B^Tb(k+1) + r]` (formed as :math:`|L^{-1}(B^Tb + r)|^2`).

    The descent direction of thesis (6.30) is this problem with
    :math:`q(k) = \partial\ell/\partial x(k)^T`, :math:`r(k) = \partial\ell/\partial u(k)^T`,
    :math:`q_f = Dm(x(k_f))^T` and the model's :math:`Q, S, R, Q_f`
    (steepest descent, quasi-Newton or Newton, thesis §6.5.2-6.5.4).

    Parameters
    ----------
    A : array_like, shape (N, n, n)
    B : array_like, shape (N, n, m)
    Q : array_like, shape (N, n, n) or (n, n)
        Symmetric; may be indefinite (Newton model) as long as every Gamma is PD.
    S : array_like, shape (N, n, m) or (n, m), or None
        Cross weights; ``None`` means zero.
    R : array_like, shape (N, m, m) or (m, m)
        Symmetric.
    q : array_like, shape (N, n) or (n,), or None
        State linear terms; ``None`` means zero.
    r : array_like, shape (N, m) or (m,), or None
        Input linear terms; ``None`` means zero.
    Qf : array_like, shape (n, n)
        Symmetric terminal weight.
    qf : array_like, shape (n,), or None
        Terminal linear term; ``None`` means zero.
    check_inputs : bool, optional
        As in :func:`tv_lqr`.
    out : LQSolution, optional
        As in :func:`tv_lqr`.
    full_P : bool, optional
        As in :func:`tv_lqr`; ``b`` and ``c`` are always kept whole.

    Returns
    -------
    LQSolution
        ``K`` (N, m, n), ``C`` (N, m), ``P`` (N + 1, n, n) (``full_P=False``:
        (1, n, n)), ``b`` (N + 1, n), ``c`` (N + 1,), with
        :meth:`LQSolution.rollout` and :meth:`LQSolution.value`.

    Raises
    ------
    ValueError
        Wrong shape, non-finite entry or asymmetric weight.
    IndefiniteGammaError
        :math:`\Gamma(k)` not positive definite (the model is not convex);
        ``.step`` is :math:`k`.  Use :func:`find_indefinite_step` to test a model
        without solving it.
    FloatingPointError
        The recursion overflowed.
    """
    if check_inputs:
        A, B, Q, R, Qf, S, q, r, qf, _ = _validate_problem(A, B, Q, R, Qf, S, q, r, qf)
    K, P, C, b, c = _sweep(A, B, Q, R, Qf, S, q, r, qf, linear=True, out=out, full_P=full_P)
    return LQSolution(K=K, C=C, P=P, b=b, c=c, A=A, B=B)


def find_indefinite_step(A, B, Q, S, R, Qf, *, check_inputs: bool = True) -> Optional[int]:
    r"""The step whose :math:`\Gamma(k)` is not positive definite, or ``None``.

    :math:`\Gamma(k)` depends on :math:`A, B, Q, S, R, Q_f` only (not on the linear
    terms), so this decides whether :func:`tv_lq` has a unique minimiser for every
    :math:`x(0)` -- the check the Newton model of thesis Prop. 6 (§6.5.2) needs before
    it is used (the model must be positive definite, thesis §6.3.2 after (6.17); steepest
    descent or quasi-Newton serve until Newton's method is near the solution, §6.3.2.2).
    It runs the same backward sweep as :func:`tv_lqr` and so costs as much; when the
    solution is wanted anyway, call :func:`tv_lq` and catch :class:`IndefiniteGammaError`
    instead.

    Parameters
    ----------
    A, B, Q, S, R, Qf :
        As in :func:`tv_lq`; ``S`` may be ``None``.
    check_inputs : bool, optional
        As in :func:`tv_lqr`.

    Returns
    -------
    int or None
        The largest :math:`k` (the sweep runs backwards, so the first one met) with
        :math:`\Gamma(k)` not positive definite; ``None`` if all are.
    """
    A, B, Q, R, Qf, S, _, _, _, _ = _validate_problem(
        A, B, Q, R, Qf, S, check_values=check_inputs)
    try:
        _sweep(A, B, Q, R, Qf, S, None, None, None, linear=False, full_P=False)
    except IndefiniteGammaError as err:
        return err.step
    return None


def dlqr(A, B, Q, R) -> DLQRSolution:
    r"""Infinite-horizon discrete LQR about an equilibrium.

    Minimises :math:`\sum_{k\ge0} x^T(k)Qx(k) + u^T(k)Ru(k)` for
    :math:`x(k+1) = Ax(k) + Bu(k)`.  :math:`P` is the stabilizing solution of the
    discrete algebraic Riccati equation -- the fixed point of the recursion of
    :func:`tv_lqr` --

    .. math::
        P = Q + A^TPA - A^TPB(R + B^TPB)^{-1}B^TPA,

    from ``scipy.linalg.solve_discrete_are``, and
    :math:`K = (R + B^TPB)^{-1}B^TPA`; the law is :math:`u = -Kx`.

    Parameters
    ----------
    A : array_like, shape (n, n)
    B : array_like, shape (n, m)
    Q : array_like, shape (n, n)
        Symmetric positive semidefinite.
    R : array_like, shape (m, m)
        Symmetric positive definite.

    Returns
    -------
    DLQRSolution
        Named tuple ``(K, P)``: ``K`` of shape (m, n), ``P`` of shape (n, n).

    Raises
    ------
    ValueError
        Wrong shapes, non-finite entries, Q not symmetric PSD, R not symmetric PD.
    NotStabilizableError
        No stabilizing solution because ``(A, B)`` has an uncontrollable mode with
        :math:`|\lambda| \ge 1` (diagnosed by the PBH test after the DARE fails).
    numpy.linalg.LinAlgError
        No stabilizing solution for another reason (a mode on the unit circle that
        Q does not see).
    """
    A = _as_float("A", A)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A has shape {A.shape}, expected (n, n)")
    n = A.shape[0]
    B = _as_float("B", B)
    if B.ndim != 2 or B.shape[0] != n:
        raise ValueError(f"B has shape {B.shape}, expected ({n}, m) to match A")
    m = B.shape[1]
    Q = _as_float("Q", Q)
    if Q.shape != (n, n):
        raise ValueError(f"Q has shape {Q.shape}, expected ({n}, {n})")
    R = _as_float("R", R)
    if R.shape != (m, m):
        raise ValueError(f"R has shape {R.shape}, expected ({m}, {m})")
    for name, arr in (("A", A), ("B", B), ("Q", Q), ("R", R)):
        _check_finite(name, arr, False)
    _check_symmetric("Q", Q, False)
    _check_symmetric("R", R, False)
    _, info = _dpotrf(R, lower=1)
    if info != 0:
        raise ValueError(
            f"R must be symmetric positive definite (its leading minor of order "
            f"{info} is not positive)")
    qeig = np.linalg.eigvalsh(Q)
    if qeig[0] < -1e-12 * max(1.0, abs(qeig[-1])):
        raise ValueError(
            f"Q must be symmetric positive semidefinite (smallest eigenvalue "
            f"{qeig[0]:.3g})")

    try:
        P = scipy.linalg.solve_discrete_are(A, B, Q, R)
    except (np.linalg.LinAlgError, ValueError) as err:
        _diagnose_dare_failure(A, B, err)
    P = 0.5 * (P + P.T)
    PB = P @ B
    c_and_lower = scipy.linalg.cho_factor(R + B.T @ PB)
    K = scipy.linalg.cho_solve(c_and_lower, PB.T @ A)
    rho = np.max(np.abs(np.linalg.eigvals(A - B @ K)))
    if not rho < 1.0:
        _diagnose_dare_failure(A, B, np.linalg.LinAlgError(
            f"the DARE solution is not stabilizing: spectral radius of A - BK is "
            f"{rho:.6g} >= 1"))
    return DLQRSolution(K=K, P=P)


def _diagnose_dare_failure(A: np.ndarray, B: np.ndarray, err: Exception):
    """Raise the most specific error for a DARE without a stabilizing solution."""
    bad = _pbh_unstabilizable(A, B)
    if bad.size:
        raise NotStabilizableError(bad) from err
    raise np.linalg.LinAlgError(
        f"the DARE has no stabilizing solution although (A, B) passes the PBH "
        f"stabilizability test: A probably has an eigenvalue on the unit circle that "
        f"Q does not penalise (unobservable through Q); cause: {err}") from err


def _pbh_unstabilizable(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Eigenvalues with |lambda| >= 1 failing the PBH rank test rank [A - lambda I, B] = n.

    Only used to explain a failure, so the rank tolerance errs towards "rank
    deficient": sqrt(eps) relative, the accuracy of a defective eigenvalue.
    """
    n = A.shape[0]
    eig = np.linalg.eigvals(A)
    scale = max(1.0, np.linalg.norm(A, 2), np.linalg.norm(B, 2))
    tol = np.sqrt(np.finfo(float).eps) * scale
    out = []
    for lam in eig:
        if abs(lam) < 1.0 - 1e-9:
            continue
        M = np.hstack([A - lam * np.eye(n), B.astype(complex)])
        if np.linalg.svd(M, compute_uv=False)[-1] <= tol:
            out.append(lam)
    return np.array(out)
