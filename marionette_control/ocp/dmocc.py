"""DMOCC: direct transcription of the trajectory-optimization problem, solved by IPOPT (seed 002 §3).

The competitor of the projection operator (thesis ch. 6): instead of keeping every iterate a
simulated trajectory, the configurations, inputs and multipliers of all steps are the unknowns
of one nonlinear program whose equality constraints are the forced constrained discrete
Euler–Lagrange equations (seed 002 (3.6)) — :mod:`.transcription` builds it from the same
:class:`~.problem.Problem` (cost terms, inequality constraints, initial state) the projection
optimizer solves. Its strengths: hard final conditions (a fixed final configuration or state,
seed 002 (3.26)) and inequality constraints handled by the interior-point method itself; its
iterates satisfy the dynamics only at convergence.

The NLP is solved by IPOPT from CasADi's wheel (``casadi`` on PyPI, which bundles IPOPT and
MUMPS; ``requirements/dmocc.txt``). CasADi only relays: the objective, constraints, gradient,
constraint Jacobian and Hessian of the Lagrangian are Python callbacks with declared sparsity
(``grad_f``, ``jac_g``, ``hess_lag``) whose values are the core's exact derivatives — CasADi's
own differentiation is never used. casadi is imported when a solve starts, so the package
imports and the projection optimizer run without it.

Usage::

    from marionette_control.ocp.dmocc import DmoccOptions, solve_problem
    result = solve_problem(problem, X0, U0, DmoccOptions(final="rest"))
    trajectory = problem.with_gains(result.X, result.U, info=result.info())

``result`` is an :class:`~.projection.OptimizationResult` (X, U, cost, converged, reason,
history, elapsed, feasible, violation, Lam) plus the solver's statistics (:class:`DmoccResult`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

import numpy as np

from marionette_control import validation
from marionette_control.ocp.projection import IterationRecord, OptimizationResult
from marionette_control.ocp.transcription import FINAL_CONDITIONS, FinalCondition, Transcription

HESSIANS = ("exact", "limited_memory")

#: IPOPT return statuses → the optimizer's termination reasons.
_REASONS = {"Solve_Succeeded": "converged", "Solved_To_Acceptable_Level": "converged",
            "Maximum_Iterations_Exceeded": "max_iterations", "Maximum_WallTime_Exceeded": "deadline",
            "Maximum_CpuTime_Exceeded": "deadline"}


class DmoccUnavailable(ImportError):
    """casadi (which bundles IPOPT) is not installed."""


@dataclass
class DmoccOptions:
    """Settings of the DMOCC solve.

    tolerance : IPOPT's ``tol``, the scaled KKT error at which it stops (> 0).
    constraint_tolerance : IPOPT's ``constr_viol_tol``: the largest DEL residual, final-condition
        error and normalized margin violation accepted at convergence (> 0).
    max_iterations : IPOPT iterations at most (≥ 0).
    deadline : seconds of wall time (IPOPT's ``max_wall_time``); None: none.
    final : final condition (:data:`~.transcription.FINAL_CONDITIONS`): ``free`` (as the projection
        optimizer), ``configuration`` (q_N = q^N), ``state`` (x_N = ``final_state``), ``rest`` (at the
        discrete rest of q^N).
    final_state : x^N (nx,) for ``configuration``/``state``/``rest``; None: the problem's desired final state.
    hessian : ``exact`` (the core's) or ``limited_memory`` (IPOPT's L-BFGS; first derivatives only).
    print_level : IPOPT's output level 0..12 (0: silent).
    ipopt : further IPOPT options by name (e.g. ``mu_strategy``), passed as given.
    """

    tolerance: float = 1e-8
    constraint_tolerance: float = 1e-9
    max_iterations: int = 500
    deadline: Optional[float] = None
    final: str = "free"
    final_state: Optional[np.ndarray] = None
    hessian: str = "exact"
    print_level: int = 0
    ipopt: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self):
        for name in ("tolerance", "constraint_tolerance"):
            validation.positive(getattr(self, name), f"dmocc {name}")
        if isinstance(self.max_iterations, bool) or int(self.max_iterations) != self.max_iterations \
                or self.max_iterations < 0:
            raise ValueError(f"dmocc max_iterations must be an integer >= 0, got {self.max_iterations!r}")
        self.max_iterations = int(self.max_iterations)
        if self.deadline is not None:
            validation.scalar(self.deadline, "dmocc deadline", positive=True, reason=" seconds (or None)")
        if self.final not in FINAL_CONDITIONS:
            raise ValueError(f"dmocc final must be one of {', '.join(FINAL_CONDITIONS)}, got {self.final!r}")
        if self.final_state is not None and self.final == "free":
            raise ValueError("dmocc final_state is given but final is 'free': set final to configuration, state or "
                             "rest")
        if self.hessian not in HESSIANS:
            raise ValueError(f"dmocc hessian must be one of {', '.join(HESSIANS)}, got {self.hessian!r}")
        if isinstance(self.print_level, bool) or self.print_level not in range(13):
            raise ValueError(f"dmocc print_level must be an integer in 0..12, got {self.print_level!r}")
        if not isinstance(self.ipopt, Mapping) or not all(isinstance(k, str) for k in self.ipopt):
            raise ValueError(f"dmocc ipopt options must be a mapping of option names to values, got {self.ipopt!r}")


    def ipopt_options(self) -> dict:
        """IPOPT's options: these settings and the ones that make the start work (the ``dmocc`` benchmark
        gives its CasADi peer the same)."""
        opt = self
        ipopt = {"tol": opt.tolerance, "constr_viol_tol": opt.constraint_tolerance, "max_iter": opt.max_iterations,
                 "print_level": opt.print_level, "sb": "yes",
                 "hessian_approximation": "limited-memory" if opt.hessian == "limited_memory" else "exact",
                 # The start is a simulated (feasible) trajectory: IPOPT's least-squares multiplier estimate
                 # there is the adjoint, large when the cost is; its default cap (1000) would zero it and
                 # leave the first iterations without the dynamics' curvature.
                 "constr_mult_init_max": 1e20,
                 # IPOPT scales the objective by 100/|grad f(w0)|; a start far from a heavily weighted target
                 # (terminal weights of 1e8, seed 002's sphere) would shrink it by 1e-8, which makes `tol`
                 # meaningless (it stopped at 536.3 for an optimum of 533.58). Bounded at 1e-4.
                 "nlp_scaling_min_value": 1e-4}
        if opt.deadline is not None:
            ipopt["max_wall_time"] = float(opt.deadline)
        ipopt.update(dict(opt.ipopt))
        return ipopt

    #: Keys of a spec's ``dmocc`` section (everything but ``final_state``: the spec's x^N is its desired final state).
    SPEC_KEYS = ("tolerance", "constraint_tolerance", "max_iterations", "final", "hessian", "print_level", "ipopt")

    @classmethod
    def from_mapping(cls, data, key: str = "dmocc") -> "DmoccOptions":
        """Options from a spec's ``dmocc`` mapping; ValueError names the offending ``key.entry``."""
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise ValueError(f"{key}: expected a mapping of {', '.join(cls.SPEC_KEYS)}, got {data!r}")
        unknown = [k for k in data if k not in cls.SPEC_KEYS]
        if unknown:
            raise ValueError(f"{key}.{unknown[0]}: unknown key (keys: {', '.join(cls.SPEC_KEYS)})")
        try:
            return cls(**{k: v for k, v in data.items() if v is not None})
        except (TypeError, ValueError) as e:
            raise ValueError(f"{key}: {str(e).replace('dmocc ', '')}") from None


#: The optimization methods a spec or request can name: the projection operator (thesis ch. 6) or DMOCC.
OPTIMIZATION_METHODS = ("projection", "dmocc")


@dataclass
class DmoccResult(OptimizationResult):
    """An :class:`~.projection.OptimizationResult` with the solver's statistics.

    ``iterations`` (property) counts IPOPT iterations (one history record each: cost = the
    objective, descent_norm = IPOPT's dual infeasibility, step_length = its primal step α,
    violation = its primal infeasibility); ``status``: IPOPT's return status; ``del_residual``:
    the largest |DEL row| of (X, U, Lam) (the dynamics' defect; 0 for a simulated trajectory up to
    the Newton tolerance); ``final_error``: the largest error of the final condition; ``violation``:
    the largest normalized inequality violation.
    """

    status: str = ""
    del_residual: float = 0.0
    final_error: float = 0.0
    final: str = "free"

    def info(self) -> dict:
        """The statistics for a trajectory file's ``info`` (JSON-able)."""
        return {"method": "dmocc", "cost": float(self.cost), "iterations": self.iterations,
                "converged": bool(self.converged), "termination_reason": self.reason, "ipopt_status": self.status,
                "elapsed": float(self.elapsed), "del_residual": self.del_residual, "final_condition": self.final,
                "final_error": self.final_error, "violation": float(self.violation), "feasible": bool(self.feasible)}


def _casadi():
    try:
        import casadi  # optional dependency (requirements/dmocc.txt): only DMOCC needs it
    except ImportError as e:  # pragma: no cover - exercised only where casadi is missing
        raise DmoccUnavailable("method dmocc needs the casadi package (it bundles IPOPT): pip install -r "
                               "requirements/dmocc.txt") from e
    return casadi


class DmoccSolver:
    """IPOPT on a :class:`~.transcription.Transcription` (module docstring)."""

    def __init__(self, transcription: Transcription, options: Optional[DmoccOptions] = None):
        self.nlp = transcription
        self.options = options or DmoccOptions()

    def _functions(self, ca):
        """The NLP's callbacks: f, g (with Jacobians, which CasADi asks for the final multipliers), grad_f,
        jac_g, hess_lag, all on the transcription's exact derivatives."""
        nlp = self.nlp
        x_sp = ca.Sparsity.dense(nlp.nw, 1)
        p_sp = ca.Sparsity.dense(0, 1)
        f_sp = ca.Sparsity.dense(1, 1)
        g_sp = ca.Sparsity.dense(nlp.ng, 1)
        jp, hp = nlp.jac_pattern, nlp.hess_pattern
        jac_sp = ca.Sparsity.triplet(nlp.ng, nlp.nw, jp.rows.tolist(), jp.cols.tolist())
        hess_sp = ca.Sparsity.triplet(nlp.nw, nlp.nw, hp.rows.tolist(), hp.cols.tolist())
        grad_row_sp = ca.Sparsity.dense(1, nlp.nw)

        keep = []   # CasADi holds Callbacks by reference: keep them alive with the solver

        def fn(name, ins, outs, body, jac=None):
            cb = _Callback(ca, name, ins, outs, body, jac)
            keep.append(cb)
            return cb

        # Inputs arrive as float vectors (views of CasADi's buffers); outputs are nonzeros in the sparsity's order.
        f = fn("dmocc_f", [x_sp, p_sp], [f_sp], lambda w, p: [nlp.objective(w)], jac=(grad_row_sp, nlp.gradient))
        g = fn("dmocc_g", [x_sp, p_sp], [g_sp], lambda w, p: [nlp.constraints_value(w)],
               jac=(jac_sp, nlp.jacobian_values))
        grad_f = fn("dmocc_grad_f", [x_sp, p_sp], [f_sp, x_sp], lambda w, p: [nlp.objective(w), nlp.gradient(w)])
        jac_g = fn("dmocc_jac_g", [x_sp, p_sp], [g_sp, jac_sp],
                   lambda w, p: [nlp.constraints_value(w), nlp.jacobian_values(w)])
        hess = fn("dmocc_hess_lag", [x_sp, p_sp, f_sp, g_sp], [hess_sp],
                  lambda w, p, s, y: [nlp.hessian_values(w, float(s[0]), y)])
        return f, g, grad_f, jac_g, hess, keep

    def solve(self, X0: np.ndarray, U0: np.ndarray, Lam0: Optional[np.ndarray] = None,
              callback: Optional[Callable[[IterationRecord], None]] = None,
              should_stop: Optional[Callable[[], bool]] = None) -> DmoccResult:
        """Solves the NLP from the trajectory (X0 (N+1, nx), U0 (N, nU)) and multipliers Lam0 (N, m)
        (default: the constraint forces of (X0, U0) from the core). ``callback`` receives an
        :class:`~.projection.IterationRecord` per IPOPT iteration (cost, violation = primal
        infeasibility); ``should_stop()`` is polled there (cancel: reason ``cancelled``)."""
        ca = _casadi()
        nlp, opt = self.nlp, self.options
        t_start = time.perf_counter()
        X0, U0 = np.asarray(X0, dtype=float), np.asarray(U0, dtype=float)
        if X0.shape != (nlp.N + 1, nlp.nx) or U0.shape != (nlp.N, nlp.nU):
            raise ValueError(f"the initial guess has shapes X {X0.shape}, U {U0.shape}; the problem needs "
                             f"({nlp.N + 1}, {nlp.nx}) and ({nlp.N}, {nlp.nU})")
        if not (np.all(np.isfinite(X0)) and np.all(np.isfinite(U0))):
            raise ValueError("the initial guess contains NaN or inf")
        if Lam0 is None and nlp.m:
            Lam0 = nlp.system.constraint_forces_trajectory(X0, U0)
        w0 = nlp.pack(X0, U0, Lam0)
        f, g, grad_f, jac_g, hess, keep = self._functions(ca)
        w = ca.MX.sym("w", nlp.nw)
        p = ca.MX.sym("p", 0)
        ipopt = opt.ipopt_options()
        stopped = {"why": None}

        def on_iteration(f_val, g_val, k):
            if should_stop is not None and should_stop():
                stopped["why"] = "cancelled"
                return 1
            if callback is not None:
                callback(IterationRecord(k, f_val, math.nan, math.nan, "dmocc", time.perf_counter() - t_start,
                                         violation=_infeasibility(g_val, nlp.lbg, nlp.ubg)))
            return 0

        options = {"grad_f": grad_f, "jac_g": jac_g, "ipopt": ipopt, "print_time": False, "calc_lam_p": False}
        # Only when someone listens: CasADi then converts x, g and the multipliers for Python every iteration.
        it_cb = None
        if callback is not None or should_stop is not None:
            it_cb = options["iteration_callback"] = _IterationCallback(ca, nlp.nw, nlp.ng, on_iteration)
        if opt.hessian == "exact":
            options["hess_lag"] = hess
        solver = ca.nlpsol("dmocc", "ipopt", {"x": w, "p": p, "f": f(w, p), "g": g(w, p)}, options)
        sol = solver(x0=w0, lbx=nlp.lbw, ubx=nlp.ubw, lbg=nlp.lbg, ubg=nlp.ubg)
        stats = solver.stats()
        elapsed = time.perf_counter() - t_start
        del keep, it_cb
        w_opt = np.asarray(sol["x"], dtype=float).ravel()
        status = str(stats.get("return_status", ""))
        reason = stopped["why"] or _REASONS.get(status, "solver_failed")
        ev = nlp.evaluate(w_opt)
        res = nlp.residuals(w_opt)
        history = _history(stats, t_start, elapsed)
        feasible_tol = opt.constraint_tolerance
        return DmoccResult(X=ev["X"], U=ev["U"], cost=nlp.objective(w_opt), converged=reason == "converged",
                           reason=reason, history=history, elapsed=elapsed,
                           feasible=res["violation"] <= max(feasible_tol, 1e-6), violation=res["violation"],
                           Lam=ev["Lam"], status=status, del_residual=res["del_residual"], final_error=res["final"],
                           final=nlp.final.kind)


def _infeasibility(g, lbg, ubg) -> float:
    g = np.asarray(g, dtype=float).ravel()
    return float(np.max(np.maximum(lbg - g, g - ubg), initial=0.0))


def _history(stats: dict, t_start: float, elapsed: float) -> list:
    """IterationRecords from IPOPT's per-iteration statistics (objective, dual and primal infeasibility, α)."""
    its = stats.get("iterations") or {}
    obj = list(its.get("obj", []))
    n = len(obj)
    inf_du = list(its.get("inf_du", [math.nan] * n))
    inf_pr = list(its.get("inf_pr", [math.nan] * n))
    alpha = list(its.get("alpha_pr", [math.nan] * n))
    # CasADi records the starting point as iteration 0: IPOPT's iterations are the entries after it.
    return [IterationRecord(k, float(obj[k]), float(inf_du[k]), float(alpha[k]), "dmocc", elapsed,
                            violation=float(inf_pr[k])) for k in range(1, n)]


_EMPTY = np.zeros(0)    # an input CasADi passes as NULL (an empty parameter vector)


class _Callback:
    """A CasADi function evaluated in Python (``casadi.Callback``), optionally with its Jacobian."""

    def __new__(cls, ca, name, ins, outs, body, jac=None):
        class Fn(ca.Callback):
            def __init__(self):
                ca.Callback.__init__(self)
                self._jac_fn = None
                self.construct(name, {})

            def get_n_in(self):
                return len(ins)

            def get_n_out(self):
                return len(outs)

            def get_sparsity_in(self, i):
                return ins[i]

            def get_sparsity_out(self, i):
                return outs[i]

            def has_eval_buffer(self):
                return True

            def eval_buffer(self, args, res):
                # Zero-copy: CasADi's input and output nonzeros as numpy views (a DM round trip per argument
                # cost as much as the derivatives on small problems).
                values = body(*[_EMPTY if a is None else np.frombuffer(a, dtype=float) for a in args])
                for r, v in zip(res, values):
                    if r is not None and len(r):
                        np.frombuffer(r, dtype=float)[:] = np.ravel(v)
                return 0

            def has_jacobian(self):
                return jac is not None

            def get_jacobian(self, jname, inames, onames, opts):
                # Inputs (nominal inputs, nominal outputs); outputs d(out)/d(each input).
                jsp, jfun = jac
                out_n = outs[0].numel()
                self._jac_fn = _Callback(ca, jname, list(ins) + list(outs), [jsp, ca.Sparsity(out_n, ins[1].numel())],
                                         lambda *a: [jfun(a[0]), ()])
                return self._jac_fn

        return Fn()


class _IterationCallback:
    """CasADi's ``iteration_callback``: calls ``fn(f, g, k)`` each IPOPT iteration; a nonzero return stops."""

    def __new__(cls, ca, nw, ng, fn):
        class It(ca.Callback):
            def __init__(self):
                ca.Callback.__init__(self)
                self.k = 0
                self.construct("dmocc_iteration", {})

            def get_n_in(self):
                return ca.nlpsol_n_out()

            def get_n_out(self):
                return 1

            def get_name_in(self, i):
                return ca.nlpsol_out(i)

            def get_name_out(self, i):
                return "ret"

            def get_sparsity_in(self, i):
                name = ca.nlpsol_out(i)
                if name == "f":
                    return ca.Sparsity.dense(1, 1)
                if name in ("x", "lam_x"):
                    return ca.Sparsity.dense(nw, 1)
                if name in ("g", "lam_g"):
                    return ca.Sparsity.dense(ng, 1)
                return ca.Sparsity(0, 0)

            def eval(self, args):
                self.k += 1
                f = float(np.asarray(args[ca.nlpsol_out().index("f")]).ravel()[0])
                g = np.asarray(args[ca.nlpsol_out().index("g")], dtype=float)
                return [fn(f, g, self.k)]

        return It()


def solve_problem(problem, X0: np.ndarray, U0: np.ndarray, options: Optional[DmoccOptions] = None,
                  callback=None, should_stop=None) -> DmoccResult:
    """DMOCC on a :class:`~.problem.Problem` from the initial trajectory (X0, U0) (e.g. the projection
    optimizer's start, so both methods begin at the same point): its cost without barriers, its
    inequality constraints, its x(0), and the final condition of ``options`` (x^N default: the
    problem's desired final state)."""
    options = options or DmoccOptions()
    final = None
    if options.final != "free":
        xN = problem.Xd[-1] if options.final_state is None else np.asarray(options.final_state, dtype=float)
        final = FinalCondition(options.final, xN)
    nlp = Transcription(problem.system, problem.cost.without_barriers(), problem.x0, problem.N,
                        problem.constraints, final)
    return DmoccSolver(nlp, options).solve(X0, U0, callback=callback, should_stop=should_stop)


__all__ = ["OPTIMIZATION_METHODS", "DmoccOptions", "DmoccResult", "DmoccSolver", "DmoccUnavailable", "solve_problem", "HESSIANS"]
