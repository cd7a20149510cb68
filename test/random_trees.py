"""Random constrained trees and finite-difference helpers shared by the derivative tests.

Random trees drawn by hypothesis (``systems()``): 2-5 dynamic configurations, 0-2 kinematic
ones (a carriage: a chain of primitive transforms from the world driven by kinematic
configurations, which may carry masses and parent the dynamic tree; and/or a string whose
length is a kinematic configuration), random primitive transforms (driven or constant),
constant SE(3) offsets, masses with full inertia on every driven frame (so every dynamic
configuration moves inertia) and point or full masses on offset tips, gravity, linear
springs, configuration springs, damping, configuration forces and body wrenches with input
and constant components, and up to min(3, nd - 1) constraints: the string (kinematic or fixed
length, anchored on the carriage or the world), a fixed-length distance constraint and a
point-on-plane constraint; either forcing rule (thesis (4.12a), or the symmetric split with
f+ != 0 whose D F+ terms only it exercises). ``make_case`` places anchors and the plane from the start
configuration so that h(q0) = 0 with well-conditioned Dh, starts at rest (q0 = q1) and
simulates a few steps, dt in {0.01, 0.02, 0.03, 0.05}, so the checked state lies on the
constraint manifold and Newton converges. Structure comes from hypothesis, numbers from a
seeded RNG (generic angles and offsets); a failing case prints as the SystemBuilder code
that rebuilds it, plus x and u (a ready reproducer). ``--hypothesis-show-statistics``
shows the mix of (nk, nc) that ran.

Newton tolerance of every step that is differentiated: 1e-13, raised only where rounding of
M (q_{k+1} - q_k)/dt alone exceeds it (``newton_tolerance``: 1e-13 * max(1, max|M| max|q| /
(100 dt))); with the seed's pendulum and most trees it is exactly 1e-13.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from hypothesis import assume, event
from hypothesis import strategies as st

from marionette_control import _core
from marionette_control.model import FORCING_RULES, SystemBuilder, rotation_rpy

PRIMITIVES = ("tx", "ty", "tz", "rx", "ry", "rz")
TOL = 1e-13  # Newton tolerance of every step the checks differentiate
EPS = 1e-4   # step of the 5-point stencils through the step map and its linearization


# ------------------------------------------------------------------ helpers


def assert_close(exact, check, rtol, what):
    """max|exact - check| <= rtol * max(1, max|exact|); the message names the worst entry."""
    exact = np.asarray(exact, dtype=float)
    check = np.asarray(check, dtype=float)
    assert exact.shape == check.shape, f"{what}: shapes {exact.shape} vs {check.shape}"
    if exact.size == 0:
        return
    scale = max(1.0, float(np.max(np.abs(exact))))
    diff = np.abs(exact - check)
    err = float(np.max(diff))
    if not err <= rtol * scale:
        idx = np.unravel_index(int(np.argmax(diff)), diff.shape)
        raise AssertionError(
            f"{what}: max|exact - check| = {err:.3e} > {rtol:.0e} * {scale:.3e} "
            f"(worst at {tuple(int(i) for i in idx)}: exact {exact[idx]!r}, check {check[idx]!r})")


def central_fd(fun, x, eps, points=3):
    """d fun / d x by central differences (3- or 5-point stencil); the differentiation axis is appended last.

    The 5-point stencil (error O(eps^4)) lets a larger eps be used, which keeps the Newton
    noise of a differentiated step (about tolerance / eps) small.
    """
    x = np.asarray(x, dtype=float)
    cols = []
    for j in range(x.size):
        e = np.zeros_like(x)
        e[j] = eps
        d1 = np.asarray(fun(x + e)) - np.asarray(fun(x - e))
        if points == 3:
            cols.append(d1 / (2.0 * eps))
        else:
            d2 = np.asarray(fun(x + 2 * e)) - np.asarray(fun(x - 2 * e))
            cols.append((8.0 * d1 - d2) / (12.0 * eps))
    if not cols:
        return np.zeros(np.shape(fun(x)) + (0,))
    return np.stack(cols, axis=-1)


def richardson_fd(fun, x, eps=EPS):
    """d fun / d x: 5-point central differences at eps and eps/2, Richardson-extrapolated (error O(eps^6)).

    For the rare strongly curved step map (seen: a stiff tree at dt = 0.05 whose 5-point
    truncation error at eps = 1e-4 was 5e-7 relative) at twice the Newton noise of eps/2.
    """
    return (16.0 * central_fd(fun, x, 0.5 * eps, 5) - central_fd(fun, x, eps, 5)) / 15.0


def second_difference(fun, h_ladder=(0.128, 0.064, 0.032, 0.016)):
    """d2/dh2 fun(h) at h = 0 by second central differences, Richardson-extrapolated twice.

    D(h) = (fun(h) - 2 fun(0) + fun(-h)) / h^2 = f'' + c1 h^2 + c2 h^4 + ...; two Richardson
    levels over (h, h/2, h/4) give R(h) = f'' + O(h^6). The estimate returned is the finer one
    of the neighbouring pair on the ladder that agrees best: large h suffer truncation, small h
    the Newton noise of the step (the constraint residual, up to the tolerance, moves p_{k+1}
    by about tolerance * M / (dt |Dh|)), amplified by 1/h^2. A step that fails to converge at a
    large h only removes the estimates that need it.
    """
    f0 = np.asarray(fun(0.0))
    cache = {}

    def D(h):
        if h not in cache:
            try:
                cache[h] = (np.asarray(fun(h)) - 2.0 * f0 + np.asarray(fun(-h))) / h**2
            except _core.StepError:
                cache[h] = None
        return cache[h]

    est = []
    for h in h_ladder:
        d = [D(h), D(h / 2), D(h / 4)]
        if any(v is None for v in d):
            est.append(None)
            continue
        r1 = [(4.0 * d[1] - d[0]) / 3.0, (4.0 * d[2] - d[1]) / 3.0]
        est.append((16.0 * r1[1] - r1[0]) / 15.0)
    pairs = [(float(np.max(np.abs(est[i] - est[i + 1]))), i + 1)
             for i in range(len(est) - 1) if est[i] is not None and est[i + 1] is not None]
    assert pairs, "no second difference could be formed (steps failed)"
    return est[min(pairs)[1]]


# ------------------------------------------------------------------ random trees


def _rotation(v):
    if isinstance(v, tuple) and v and v[0] == "rpy":
        return rotation_rpy(*v[1])
    if isinstance(v, tuple) and v and v[0] == "matrix":
        return np.asarray(v[1])
    return v


@dataclass
class Recipe:
    """A random tree model as data; ``build`` replays it into a SystemBuilder."""
    dt: float = 0.02
    gravity: tuple = (0.0, 0.0, -9.8)
    forcing: str = "thesis"
    # ("const", name, parent, translation, rpy, mass, inertia) or
    # ("prim", name, parent, transform, config, value, kinematic, mass, inertia)
    frames: list = field(default_factory=list)
    dynamic: list = field(default_factory=list)     # dynamic configuration names
    kinematic: list = field(default_factory=list)   # kinematic configuration names (carriage), plus "length"
    tree_frames: list = field(default_factory=list)  # frames below dynamic configurations
    q0: dict = field(default_factory=dict)          # start configuration by name
    rho_rate: dict = field(default_factory=dict)    # kinematic velocity during the warm-up and the step
    config_springs: list = field(default_factory=list)
    dampings: list = field(default_factory=list)
    config_forces: list = field(default_factory=list)
    wrenches: list = field(default_factory=list)
    springs: list = field(default_factory=list)
    # Constraints; their geometry (anchor points, lengths, the plane's pose) is placed by
    # make_case from the start configuration, so that h(q0) = 0 and Dh is well conditioned.
    string: tuple | None = None       # (anchor's parent: last carriage frame or world, attached frame, kinematic?)
    distance: tuple | None = None     # (attached frame,): to a fixed world point
    plane: tuple | None = None        # (attached frame, axis of the plane frame that is the normal)
    lengths: tuple = (0.6, 0.6)       # string length and distance at the start
    warmup: int = 3
    seed: int = 0                     # numbers of the recipe; inputs, directions and covectors

    def calls(self, geometry):
        """The SystemBuilder calls as (method, args, kwargs)."""
        out = [("__init__", ("random_tree",), {"gravity": self.gravity, "forcing": self.forcing})]
        if self.string is not None and self.string[2]:
            out.append(("config", ("length",), {"kinematic": True}))
        for f in self.frames:
            if f[0] == "const":
                _, name, parent, tr, rpy, mass, inertia = f
                kw = {"translation": tr, "rotation": ("rpy", rpy)}
                if mass is not None:
                    kw.update(mass=mass, inertia=inertia)
                out.append(("const_frame", (name, parent), kw))
            else:
                _, name, parent, tf, config, value, kin, mass, inertia = f
                kw = {"config": config} if config else {"value": value}
                if kin:
                    kw["kinematic"] = True
                if mass is not None:
                    kw.update(mass=mass, inertia=inertia)
                out.append(("frame", (name, parent, tf), kw))
        if self.string is not None:
            out.append(("const_frame", ("anchor", self.string[0]), {"translation": geometry["anchor"]}))
        if self.distance is not None:
            out.append(("const_frame", ("dpoint", "world"), {"translation": geometry["dpoint"]}))
        if self.plane is not None:
            out.append(("const_frame", ("plane", "world"),
                        {"translation": geometry["plane_p"], "rotation": ("matrix", geometry["plane_R"])}))
        for c, k, q0 in self.config_springs:
            out.append(("config_spring", (c, k, q0), {}))
        for c, d in self.dampings:
            out.append(("damping", (c, d), {}))
        for c, inp in self.config_forces:
            out.append(("config_force", (c,), {"input": inp}))
        for frame, wrench in self.wrenches:
            out.append(("body_wrench", (frame, wrench), {}))
        for f1, f2, k, x0 in self.springs:
            out.append(("linear_spring", (f1, f2, k, x0), {}))
        if self.string is not None:
            _, attached, kin = self.string
            out.append(("distance_constraint", ("anchor", attached, "length" if kin else self.lengths[0]), {}))
        if self.distance is not None:
            out.append(("distance_constraint", ("dpoint", self.distance[0], self.lengths[1]), {}))
        if self.plane is not None:
            out.append(("plane_constraint", ("plane", self.plane[1], self.plane[0]), {}))
        return out

    def build(self, geometry):
        b = None
        for method, args, kw in self.calls(geometry):
            kw = {k: _rotation(v) for k, v in kw.items()}
            if method == "__init__":
                b = SystemBuilder(*args, **kw)
            else:
                getattr(b, method)(*args, **kw)
        return b.build()

    def code(self, geometry):
        """Python source that rebuilds the model (printed with a failing example)."""
        def arg(v):
            if isinstance(v, tuple) and v and v[0] == "rpy":
                return "rotation_rpy(%s)" % ", ".join(repr(float(a)) for a in v[1])
            if isinstance(v, tuple) and v and v[0] == "matrix":
                return "np.array(%r)" % np.asarray(v[1]).tolist()
            if isinstance(v, (tuple, list, np.ndarray)):
                return "(" + ", ".join(arg(a) for a in v) + ("," if len(v) == 1 else "") + ")"
            return repr(float(v)) if isinstance(v, (float, np.floating)) else repr(v)
        lines = []
        for method, args, kw in self.calls(geometry):
            a = [arg(v) for v in args] + [f"{k}={arg(v)}" for k, v in kw.items()]
            if method == "__init__":
                lines.append(f"b = SystemBuilder({', '.join(a)})")
            else:
                lines.append(f"b.{method}({', '.join(a)})")
        lines.append("model = b.build()")
        return "\n".join(lines)


class Case:
    """A built random system at a state reached by simulation, with an input for the checked step.

    X (warmup + 1, nx) and U (warmup, nU) are the warm-up trajectory; x = X[-1]; u is the
    input of the checked step; rng draws the directions and covectors of the checks.
    """

    def __init__(self, recipe, geometry, model, sys, q0, x, u, X, U, rng):
        self.recipe, self.geometry, self.model, self.sys = recipe, geometry, model, sys
        self.q0, self.x, self.u, self.X, self.U, self.rng = q0, x, u, X, U, rng

    def __repr__(self):
        m = self.model
        return (f"Case(nd={m.nd}, nk={m.nk}, nu={m.nu}, nc={m.nc}, dt={self.recipe.dt!r}, forcing={m.forcing}, "
                f"seed={self.recipe.seed})\n"
                f"{self.recipe.code(self.geometry)}\n"
                f"sys = _core.DiscreteSystem(model, {self.recipe.dt!r}, tolerance={self.sys.tolerance!r})\n"
                f"x = np.array({self.x.tolist()!r})\nu = np.array({self.u.tolist()!r})")


@st.composite
def recipes(draw):
    """Structure (sizes, transforms, parents, components) from hypothesis, numbers from a seeded RNG.

    Continuous values come from ``numpy`` so that angles, offsets and inertias are generic
    (hypothesis' own floats favour 0 and the bounds, which hide missing trigonometric terms);
    the structure still shrinks, and a failing case prints as the builder code that rebuilds it.
    """
    r = Recipe()
    r.seed = draw(st.integers(0, 2**32 - 1))
    g = np.random.default_rng(r.seed)

    def vec(lo, hi, n=3):
        return tuple(float(v) for v in g.uniform(lo, hi, n))

    def num(lo, hi):
        return float(g.uniform(lo, hi))

    r.dt = draw(st.sampled_from([0.01, 0.02, 0.03, 0.05]))
    r.forcing = draw(st.sampled_from(FORCING_RULES))
    r.gravity = vec(-10.0, 10.0) if draw(st.booleans()) else (0.0, 0.0, -9.8)
    nd = draw(st.integers(2, 5))
    nk = draw(st.integers(0, 2))
    n_constraints = draw(st.integers(0, min(3, nd - 1)))
    kinds = draw(st.permutations(["string", "distance", "plane"]))[:n_constraints]
    kin_length = "string" in kinds and nk >= 1 and draw(st.booleans())
    n_carriage = nk - int(kin_length)
    if n_carriage and "string" not in kinds and draw(st.booleans()):
        kinds = ["string"] + kinds[: max(0, min(3, nd - 1) - 1)]  # the carriage usually holds a string

    # Carriage: a chain of kinematic primitives from the world (mostly translations).
    parent = "world"
    carriage = []
    for j in range(n_carriage):
        if draw(st.booleans()):
            r.frames.append(("const", f"car_off{j}", parent, vec(-0.5, 0.5), vec(-math.pi, math.pi), None, None))
            parent = f"car_off{j}"
        tf = draw(st.sampled_from(["tx", "ty", "tz", "rz"]))
        name = f"rho{j}"
        mass = num(0.2, 1.0) if draw(st.booleans()) else None
        r.frames.append(("prim", f"carriage{j}", parent, tf, name, 0.0, True, mass, vec(0.05, 0.5)))
        r.kinematic.append(name)
        r.q0[name] = num(-0.5, 0.5)
        r.rho_rate[name] = num(-0.5, 0.5)
        carriage.append(f"carriage{j}")
        parent = f"carriage{j}"
    if kin_length:
        r.kinematic.append("length")
        r.rho_rate["length"] = num(-0.3, 0.3)

    # Dynamic tree: every driven frame carries a mass with full inertia, which makes the mass
    # matrix positive definite (the topmost moving configuration moves its own inertia).
    parents = ["world"] + carriage
    for i in range(nd):
        parent = draw(st.sampled_from(parents))
        if draw(st.booleans()):
            r.frames.append(("const", f"off{i}", parent, vec(-0.6, 0.6), vec(-math.pi, math.pi), None, None))
            parent = f"off{i}"
        if draw(st.booleans()):
            tf = draw(st.sampled_from(PRIMITIVES))
            r.frames.append(("prim", f"cst{i}", parent, tf, None, num(-0.8, 0.8), False, None, None))
            parent = f"cst{i}"
        name = f"q{i}"
        tf = draw(st.sampled_from(PRIMITIVES))
        r.frames.append(("prim", f"link{i}", parent, tf, name, 0.0, False, num(0.3, 2.0), vec(0.05, 0.5)))
        r.dynamic.append(name)
        r.q0[name] = num(-1.0, 1.0)
        r.tree_frames.append(f"link{i}")
        parents.append(f"link{i}")
        if draw(st.booleans()):  # a tip at a constant offset, sometimes a point mass
            tip_mass = draw(st.sampled_from(["none", "point", "full"]))
            mass = None if tip_mass == "none" else num(0.1, 1.0)
            inertia = vec(0.05, 0.5) if tip_mass == "full" else (0.0, 0.0, 0.0)
            r.frames.append(("const", f"tip{i}", f"link{i}", vec(-0.6, 0.6), vec(-1.0, 1.0), mass, inertia))
            r.tree_frames.append(f"tip{i}")
            parents.append(f"tip{i}")

    all_configs = r.dynamic + [c for c in r.kinematic if c != "length"]
    for c in draw(st.lists(st.sampled_from(all_configs), max_size=3, unique=True)):
        r.config_springs.append((c, num(0.5, 5.0), num(-1.0, 1.0)))
    for c in draw(st.lists(st.sampled_from(r.dynamic), max_size=3, unique=True)):
        r.dampings.append((c, num(0.05, 1.0)))
    for c in draw(st.lists(st.sampled_from(r.dynamic), min_size=1, max_size=3, unique=True)):
        r.config_forces.append((c, f"force_{c}"))
    for j in range(draw(st.integers(0, 2))):
        comps = []
        for k in range(6):
            kind = draw(st.sampled_from(["input", "const", "zero"]))
            comps.append(f"w{j}_{k}" if kind == "input" else num(-1.0, 1.0) if kind == "const" else 0.0)
        r.wrenches.append((draw(st.sampled_from(r.tree_frames)), comps))
    frames_all = ["world"] + carriage + r.tree_frames
    for _ in range(draw(st.integers(0, 2))):
        f1, f2 = draw(st.lists(st.sampled_from(frames_all), min_size=2, max_size=2, unique=True))
        r.springs.append((f1, f2, num(0.5, 5.0), num(0.0, 1.0)))

    if "string" in kinds:
        r.string = (carriage[-1] if carriage else "world", draw(st.sampled_from(r.tree_frames)), kin_length)
    if "distance" in kinds:
        r.distance = (draw(st.sampled_from(r.tree_frames)),)
    if "plane" in kinds:
        r.plane = (draw(st.sampled_from(r.tree_frames)), draw(st.integers(0, 2)))
    r.lengths = (num(0.3, 1.2), num(0.3, 1.2))
    return r


def _config_vector(model, values):
    return np.array([values[n] for n in model.config_names])


def newton_tolerance(model, q, dt):
    """TOL, raised where rounding alone keeps the DEL residual above it.

    The residual holds L_v = M (q_{k+1} - q_k) / dt, whose rounding is about
    eps * max|M| * max|q| / dt: with heavy trees, |q| ~ 1 and dt = 0.01 that reaches 1e-13,
    and Newton stalls just above a fixed 1e-13 (seen: residual 1.003e-13 after 50 iterations).
    """
    M = _core.mass_matrix(model, q)
    return TOL * max(1.0, float(np.max(np.abs(M))) * max(1.0, float(np.max(np.abs(q)))) / (100.0 * dt))


def _unit(v):
    return v / np.linalg.norm(v)


def make_case(r: Recipe) -> Case:
    """Places the constraint geometry from the start configuration q0, rejects degenerate cases, warms up.

    For each constraint in turn (string, distance, plane; the order of the rows of h) the
    direction n along which it acts (string direction, plane normal) is the one in which the
    attached point moves most under the dynamic configurations, after removing what the
    previous constraints already constrain. The anchor / world point then sits at the drawn
    length along n, the plane passes through the point, so h(q0) = 0 and the rows of Dh are
    well conditioned. Positional Jacobians come from central differences of ``placements``
    (test-side only).
    """
    geometry = {"anchor": (0.0, 0.0, 0.0), "dpoint": (0.0, 0.0, 0.0), "plane_p": (0.0, 0.0, 0.0),
                "plane_R": np.eye(3)}
    probe = r.build(geometry)
    q0 = dict(r.q0)
    if r.string is not None and r.string[2]:
        q0["length"] = r.lengths[0]
    q0v = _config_vector(probe, q0)
    names = list(probe.frame_names)
    G = probe.placements(q0v)
    nd = probe.nd

    def position(frame, q):
        return probe.placements(q)[names.index(frame), :3, 3]

    def jacobian(frame):  # d p / d q_dyn (3, nd)
        return central_fd(lambda qd: position(frame, np.concatenate([qd, q0v[nd:]])), q0v[:nd], 1e-6)

    g = np.random.default_rng(r.seed + 1)
    rows = np.zeros((0, nd))
    for kind, spec in (("string", r.string), ("distance", r.distance), ("plane", r.plane)):
        if spec is None:
            continue
        # The drawn attached frame, or the next tree frame whose point can still move off the
        # constraints imposed so far (a frame at a joint axis may not move at all).
        drawn = spec[1] if kind == "string" else spec[0]
        i0 = r.tree_frames.index(drawn)
        P = np.eye(nd) - (np.linalg.pinv(rows) @ rows if len(rows) else 0.0)
        for attached in r.tree_frames[i0:] + r.tree_frames[:i0]:
            J = jacobian(attached)
            U_, S_, _ = np.linalg.svd(J @ P)
            if S_[0] > 0.3:
                break
        assume(S_[0] > 0.3)
        if kind == "string":
            r.string = (r.string[0], attached, r.string[2])
        elif kind == "distance":
            r.distance = (attached,)
        else:
            r.plane = (attached, r.plane[1])
        n = U_[:, 0]
        rows = np.vstack([rows, n @ J])
        p = position(attached, q0v)
        if kind == "string":
            target = p + r.lengths[0] * n
            Ra, pa = G[names.index(r.string[0]), :3, :3], G[names.index(r.string[0]), :3, 3]
            geometry["anchor"] = tuple(float(v) for v in Ra.T @ (target - pa))
        elif kind == "distance":
            geometry["dpoint"] = tuple(float(v) for v in p + r.lengths[1] * n)
        else:
            # A proper rotation whose column `axis` is n; the spin about n is random.
            t = _unit(np.cross(n, g.normal(size=3)))
            R = np.empty((3, 3))
            a = r.plane[1]
            R[:, a], R[:, (a + 1) % 3], R[:, (a + 2) % 3] = n, t, np.cross(n, t)
            geometry["plane_R"] = R
            geometry["plane_p"] = tuple(float(v) for v in p)
    # |p1 - p2| is not differentiable at 0: springs between (nearly) coincident points are dropped.
    r.springs = [sp for sp in r.springs
                 if np.linalg.norm(G[names.index(sp[0]), :3, 3] - G[names.index(sp[1]), :3, 3]) > 0.2]

    model = r.build(geometry)
    if model.nc:
        h, Dh = model.constraints(q0v)
        assert np.max(np.abs(h)) < 1e-10, f"start not on the constraints: h = {h}\n{r.code(geometry)}"
        # A distance row is 2 d (unit direction . J), a plane row (unit normal . J).
        scale = [2.0 * r.lengths[0]] * (r.string is not None) + [2.0 * r.lengths[1]] * (r.distance is not None) \
            + [1.0] * (r.plane is not None)
        assume(np.linalg.svd(Dh[:, :nd] / np.array(scale)[:, None], compute_uv=False)[-1] > 0.2)

    rng = np.random.default_rng(r.seed)
    sys = _core.DiscreteSystem(model, r.dt, tolerance=newton_tolerance(model, q0v, r.dt), max_iterations=50)
    nu = model.nu
    kin_names = model.config_names[model.nd:]
    rate = np.array([r.rho_rate[n] for n in kin_names])

    def inputs(rho):
        return np.concatenate([rng.uniform(-1.0, 1.0, nu), rho + r.dt * rate])

    X = [sys.state_from_configs(q0v, q0v)]
    U = []
    for k in range(r.warmup + 1):  # warm-up steps, then the input of the checked step
        U.append(inputs(X[-1][model.nd: model.nq]))
        try:
            X.append(sys.step(X[-1], U[-1])[0])
        except _core.StepError as e:
            raise AssertionError(f"step {k} failed from a consistent start: {e}\n{r.code(geometry)}") from e
    X, U = np.array(X[:-1]), np.array(U).reshape(r.warmup + 1, model.nU)
    x, u = X[-1], U[-1]
    U = U[:-1]
    return Case(r, geometry, model, sys, q0v, x, u, X, U, rng)


@st.composite
def systems(draw):
    case = make_case(draw(recipes()))
    m = case.model
    event(f"nk={m.nk} nc={m.nc} forcing={m.forcing}")  # coverage shows with --hypothesis-show-statistics
    return case


def step_fn(sys, u=None, x=None):
    if u is not None:
        return lambda xx: sys.step(xx, u)[0]
    return lambda uu: sys.step(x, uu)[0]
