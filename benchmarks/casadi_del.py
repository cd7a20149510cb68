"""The CasADi + IPOPT peer of the ``dmocc`` group: the same discrete problem transcribed symbolically.

What a user would write instead of this package: the tree model's midpoint discrete Lagrangian (seed 002
(3.2)) in CasADi symbols — placements as products of primitive transforms, L = kinetic − potential
energy of every mass, the forcing split between the step's ends as the model's rule says (thesis (4.12):
f⁻ = Δt F, f⁺ = 0 for ``thesis``, f⁻ = f⁺ = ½Δt F for ``symmetric``) with joint damping and configuration
forces, the holonomic constraints — and the forced constrained DEL equations (seed 002 (3.6)) with
this package's pairing of λ_k with Dh(q_k) as equality constraints; the cost and the inequality rows of
the same :class:`~marionette_control.ocp.problem.Problem` built from CasADi expressions; IPOPT with
CasADi's automatic derivatives (exact Hessian). The variables, their order, the start and the IPOPT
options are those of :class:`~marionette_control.ocp.transcription.Transcription` and
:class:`~marionette_control.ocp.dmocc.DmoccSolver`, so the two differ only in where the derivatives
come from (CasADi's AD on an expression graph here, the core's exact derivatives through Python
callbacks there).

Before it is timed, :func:`check_against_core` compares the peer's placements and DEL residuals with the
core's on the start trajectory and on a perturbed one: a peer that solved another problem would be
caught there. Damping coefficients and the configuration each force input drives are passed in (the core
model does not expose them); the check would fail if they were wrong.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

PRIMITIVE_AXES = {"tx": 0, "ty": 1, "tz": 2, "rx": 0, "ry": 1, "rz": 2}


def _primitive(ca, kind: str, q):
    T = ca.SX.eye(4)
    i = PRIMITIVE_AXES[kind]
    if kind[0] == "t":
        T[i, 3] = q
        return T
    c, s = ca.cos(q), ca.sin(q)
    j, k = (i + 1) % 3, (i + 2) % 3
    T[j, j], T[j, k], T[k, j], T[k, k] = c, -s, s, c
    return T


@dataclass
class SymbolicModel:
    """Placements, discrete Lagrangian's slot derivatives, forcing and constraints as CasADi Functions."""

    nq: int
    nd: int
    nu: int
    m: int
    dt: float
    placements: object      # q -> [g_0 (4x4), ...] (every frame)
    D1: object              # (q0, q1, u_force) -> D1 Ld + f⁻ (dynamic rows)
    D2: object              # (q0, q1, u_force) -> D2 Ld + f⁺ (dynamic rows): p_{k+1}
    h: object               # q -> h (m)
    Dh: object              # q -> Dh[:, dynamic] (m, nd)


def symbolic_model(ca, model, dt: float, damping: dict, forces: dict) -> SymbolicModel:
    """``damping``: {configuration: c} (F = −c q̇); ``forces``: {configuration: force-input index}."""
    nq, nd, nu = model.nq, model.nd, model.nu
    q, v, u = ca.SX.sym("q", nq), ca.SX.sym("v", nq), ca.SX.sym("u", nu)
    G0 = np.asarray(model.placements(np.zeros(nq)))
    G: list = []
    for i, (kind, c, parent) in enumerate(zip(model.frame_transforms, model.frame_configs, model.frame_parents)):
        if parent < 0:
            G.append(ca.SX(G0[i]))
            continue
        rel = np.linalg.solve(G0[parent], G0[i])          # the constant part (the configuration at 0)
        T = ca.SX(rel)
        if c >= 0:
            T = ca.mtimes(T, _primitive(ca, kind, q[c]))
        G.append(ca.mtimes(G[parent], T))
    g = np.asarray(model.gravity, dtype=float)
    L = 0
    for name, mi in model.masses.items():
        gi = G[model.frame_index(name)]
        p, R = gi[:3, 3], gi[:3, :3]
        pdot = ca.jtimes(p, q, v)
        Rdot = ca.reshape(ca.jtimes(ca.vec(R), q, v), 3, 3)
        W = ca.mtimes(R.T, Rdot)
        w = ca.vertcat(W[2, 1], W[0, 2], W[1, 0])
        L += 0.5 * mi[0] * ca.dot(pdot, pdot) + 0.5 * (mi[3] * w[0] ** 2 + mi[4] * w[1] ** 2 + mi[5] * w[2] ** 2)
        L += mi[0] * ca.dot(ca.DM(g), p)
    F = ca.SX.zeros(nq)
    for name, cval in damping.items():
        F[model.config_index(name)] -= cval * v[model.config_index(name)]
    for name, j in forces.items():
        F[model.config_index(name)] += u[j]
    Lf = ca.Function("L", [q, v], [L])
    Ff = ca.Function("F", [q, v, u], [F])
    q0, q1 = ca.SX.sym("q0", nq), ca.SX.sym("q1", nq)
    Ld = dt * Lf(0.5 * (q0 + q1), (q1 - q0) / dt)
    fm, fp = model.forcing_weights                                   # f⁻ = fm Δt F, f⁺ = fp Δt F
    impulse = dt * Ff(0.5 * (q0 + q1), (q1 - q0) / dt, u)[:nd]
    d1 = ca.gradient(Ld, q0)[:nd] + fm * impulse
    d2 = ca.gradient(Ld, q1)[:nd] + fp * impulse
    hs = []
    for name, kind, f1, f2, length in model.constraint_frames:
        if kind != "distance":
            raise NotImplementedError(f"constraint '{name}' of kind {kind}: only distance constraints here")
        d = G[model.frame_index(f1)][:3, 3] - G[model.frame_index(f2)][:3, 3]
        ell = q[model.config_index(length)] if isinstance(length, str) and length else None
        if ell is None:
            raise NotImplementedError("a fixed-length distance constraint (not needed by the benchmark's models)")
        hs.append(ca.dot(d, d) - ell ** 2)
    h = ca.vertcat(*hs) if hs else ca.SX.zeros(0)
    Dh = ca.jacobian(h, q)[:, :nd] if hs else ca.SX.zeros(0, nd)
    return SymbolicModel(nq, nd, nu, len(hs), dt, ca.Function("g", [q], G), ca.Function("D1", [q0, q1, u], [d1]),
                         ca.Function("D2", [q0, q1, u], [d2]), ca.Function("h", [q], [h]),
                         ca.Function("Dh", [q], [Dh]))


def check_against_core(ca, sm: SymbolicModel, model, system, X, U, Lam, tol: float = 1e-9) -> float:
    """Largest difference of placements (3 configurations) and DEL residuals (X, U, Lam and a perturbed copy)
    between the peer and the core; raises if above ``tol`` (relative to the rows' size)."""
    nq, nd = sm.nq, sm.nd
    worst = 0.0
    for k in (0, X.shape[0] // 2, X.shape[0] - 1):
        core = np.asarray(model.placements(X[k, :nq]))
        peer = np.array([np.asarray(gi) for gi in sm.placements(X[k, :nq])])
        worst = max(worst, float(np.abs(core - peer).max()))
    rng = np.random.default_rng(0)
    Q = X[:, :nq].copy()
    for trial in range(2):
        if trial:
            Q[1:, :nd] += 1e-3 * rng.normal(size=Q[1:, :nd].shape)
        R, _ = system.del_residual(X[0, nq:nq + nd], Q, U[:, :sm.nu], Lam)[:2]
        p = X[0, nq:nq + nd]
        for k in range(U.shape[0]):
            row = p + np.asarray(sm.D1(Q[k], Q[k + 1], U[k, :sm.nu])).ravel()
            if sm.m:
                row -= np.asarray(sm.Dh(Q[k])).T @ Lam[k]
            p = np.asarray(sm.D2(Q[k], Q[k + 1], U[k, :sm.nu])).ravel()
            worst = max(worst, float(np.abs(row - R[k, :nd]).max() / max(1.0, np.abs(p).max())))
    if worst > tol:
        raise RuntimeError(f"the CasADi transcription differs from the core's by {worst:.3g}: not the same problem")
    return worst


@dataclass
class PeerResult:
    cost: float
    iterations: int
    status: str
    setup: float        # s: expression graph and nlpsol
    solve: float        # s: IPOPT
    del_residual: float
    violation: float
    X: np.ndarray
    U: np.ndarray


def solve(ca, sm: SymbolicModel, problem, X0, U0, Lam0, ipopt: dict) -> PeerResult:
    """The problem's NLP in CasADi symbols (module docstring), solved by IPOPT from (X0, U0, Lam0)."""
    from marionette_control.ocp.constraints import LinearConstraints, TensionConstraints

    t0 = time.perf_counter()
    N, nq, nd, nu, m, dt = problem.N, sm.nq, sm.nd, sm.nu, sm.m, sm.dt
    nU = problem.model.nU
    x0 = problem.x0
    qd = ca.SX.sym("qd", nd, N)
    U = ca.SX.sym("u", nU, N)
    lam = ca.SX.sym("lam", m, N)
    Q = ca.horzcat(ca.DM(x0[:nq]), ca.vertcat(qd, U[nu:, :]))                     # (nq, N+1)
    D1 = sm.D1.map(N)(Q[:, :-1], Q[:, 1:], U[:nu, :])                              # (nd, N)
    P = sm.D2.map(N)(Q[:, :-1], Q[:, 1:], U[:nu, :])                               # p_1 .. p_N
    Pprev = ca.horzcat(ca.DM(x0[nq:nq + nd]), P[:, :-1])
    rows = Pprev + D1
    g = []
    if m:
        Dh = sm.Dh.map(N)(Q[:, :-1])                                               # (m, nd*N)
        for k in range(N):
            rows[:, k] -= ca.mtimes(Dh[:, k * nd:(k + 1) * nd].T, lam[:, k])
        hN = sm.h.map(N)(Q[:, 1:])
        g_eq = ca.vec(ca.vertcat(rows, hN))
    else:
        g_eq = ca.vec(rows)
    g.append(g_eq)
    V = ca.horzcat(ca.DM(x0[nq + nd:]), (Q[nd:, 1:] - Q[nd:, :-1]) / dt)
    X = ca.vertcat(Q, ca.horzcat(ca.DM(x0[nq:nq + nd]), P), V)                      # (nx, N+1)
    ex = X - ca.DM(problem.Xd.T)
    eu = U - ca.DM(problem.Ud.T)
    Qw, Rw, Qf = (np.diag(w) if np.ndim(w) == 1 else np.asarray(w) for w in (problem.Q, problem.R, problem.Qf))
    J = 0.5 * ca.sum2(ca.sum1(ex[:, :-1] * ca.mtimes(ca.DM(Qw), ex[:, :-1])))
    J += 0.5 * ca.sum2(ca.sum1(eu * ca.mtimes(ca.DM(Rw), eu)))
    J += 0.5 * ca.dot(ex[:, -1], ca.mtimes(ca.DM(Qf), ex[:, -1]))
    n_ineq = 0
    for c in problem.constraints:
        if isinstance(c, LinearConstraints):
            M = (ca.mtimes(ca.DM(c.Gx), X[:, :-1]) + ca.mtimes(ca.DM(c.Gu), U) + ca.DM(c.g0)) / ca.DM(c.scale)
            Mt = (ca.mtimes(ca.DM(c.Gx), X[:, -1]) + ca.DM(c.g0)) / ca.DM(c.scale)
        elif isinstance(c, TensionConstraints):
            M = (c.c * Q[c.lidx.tolist(), :-1] * lam[c.cidx.tolist(), :] - ca.DM(c.min_tension)) / ca.DM(c.scale)
            Mt = None
        else:
            raise NotImplementedError(type(c).__name__)
        use = np.ones((len(c), N), bool)                  # the rows the transcription keeps (docs/dmocc.md)
        use[:, 0] = ~c.terminal
        for k in range(N):
            idx = np.flatnonzero(use[:, k]).tolist()
            if idx:
                g.append(M[idx, k])
                n_ineq += len(idx)
        t_rows = np.flatnonzero(c.terminal).tolist()
        if Mt is not None and t_rows:
            g.append(Mt[t_rows])
            n_ineq += len(t_rows)
    w = ca.vertcat(ca.vec(qd), ca.vec(U), ca.vec(lam))
    gg = ca.vertcat(*g)
    n_eq = g_eq.shape[0]
    lbg = np.r_[np.zeros(n_eq), np.zeros(n_ineq)]
    ubg = np.r_[np.zeros(n_eq), np.full(n_ineq, np.inf)]
    solver = ca.nlpsol("peer", "ipopt", {"x": w, "f": J, "g": gg},
                       {"ipopt": dict(ipopt), "print_time": False})
    w0 = np.r_[X0[1:, :nd].T.ravel(order="F"), U0.T.ravel(order="F"),
               (Lam0.T.ravel(order="F") if m else np.zeros(0))]
    setup = time.perf_counter() - t0
    t1 = time.perf_counter()
    sol = solver(x0=w0, lbg=lbg, ubg=ubg)
    solve_time = time.perf_counter() - t1
    st = solver.stats()
    wopt = np.asarray(sol["x"]).ravel()
    gval = np.asarray(sol["g"]).ravel()
    Xo = np.asarray(ca.Function("X", [w], [X])(wopt)).T
    Uo = np.asarray(ca.Function("U", [w], [U])(wopt)).T
    return PeerResult(float(sol["f"]), int(st.get("iter_count", -1)), str(st.get("return_status", "")), setup,
                      solve_time, float(np.abs(gval[:n_eq]).max()),
                      float(max(0.0, -gval[n_eq:].min())) if n_ineq else 0.0, Xo, Uo)
