"""Every robot description that ``example-robot-data`` (PyPI, requirements/test.txt) ships, imported by
marionette_control.model.urdf and checked against Pinocchio (PyPI ``pin``) on the same file.

For each accepted file, at SAMPLES random states (q, qdot uniform in [-1, 1] per configuration), this
project's mass matrix (``_core.mass_matrix``, thesis (3.10)), gravity forces (dV/dq = -dL/dq at qdot = 0)
and bias forces (Coriolis, centrifugal and gravity: (d2L/dqdot dq) qdot - dL/dq) equal Pinocchio's
``crba``, ``computeGeneralizedGravity`` and ``nonLinearEffects`` to REL_TOL relative to the largest entry
of Pinocchio's. Both libraries take the root link as fixed (Pinocchio without a root joint) and gravity
(0, 0, -9.81); configurations are matched by joint name (Pinocchio stores a continuous joint as (cos,
sin)). Pinocchio is built without ``mimic=True``, so a mimic joint is a joint of its own there as in
this model, whose coupling is a separate constraint (checked against Pinocchio's mimic model below).

Every refused file is listed in REFUSED with the reason its error must give; docs/models.md says why
each is refused. Measured when written: 62 of 69 files accepted (0 to 44 configurations), largest
relative differences 2.3e-15 (M), 2.5e-15 (gravity), 2.5e-15 (bias).
"""

from __future__ import annotations

import functools
import warnings
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import numpy as np
import pytest

from marionette_control import _core
from marionette_control.model.urdf import UrdfError, UrdfWarning, joint_friction, load_urdf, parse_urdf
from pinocchio_coordinates import PinCoordinates

pin = pytest.importorskip("pinocchio", reason="Pinocchio (PyPI 'pin', requirements/test.txt) is the independent peer")
try:
    ROBOTS = Path(distribution("example-robot-data").locate_file("cmeel.prefix/share/example-robot-data/robots"))
except PackageNotFoundError:
    pytest.skip("example-robot-data (PyPI, requirements/test.txt) is not installed", allow_module_level=True)

FILES = sorted(p.relative_to(ROBOTS).as_posix() for p in ROBOTS.rglob("*.urdf"))
REL_TOL = 1e-12
SAMPLES = 2

#: file -> the reason its refusal gives (docs/models.md, "Stock descriptions")
REFUSED = {
    # the mimic names 'index_q1', a joint this file does not have (its joints are 'Left_index_q1', ...)
    "alex_description/urdf/alex_psyonic_hands.urdf":
        r"joint 'Left_index_q2' <mimic joint=\"index_q1\">: joint 'index_q1' is not a joint of the robot",
    # the hands LHand, RHand and their 22 mimic finger joints carry no mass (no finger link has an <inertial>): the
    # mass matrix is singular in those 24 directions (Pinocchio's too), and so on the coupled subspace
    "romeo_description/urdf/romeo.urdf":
        r"dynamic configuration 'LHand' moves no mass \(.*\), nor does any configuration coupled to it",
    # indefinite inertia tensors: a principal moment of -41 % (Romeo's body), -39 % (Tiago's antennas) of the largest
    "romeo_description/urdf/romeo_laas_small.urdf":
        r"link 'body' <inertial><inertia>: the inertia tensor must be positive semi-definite .*principal moments are "
        r"\[-0\.0213",
    **{f"tiago_description/robots/{name}.urdf":
       r"link 'base_antenna_left_link' <inertial><inertia>: the inertia tensor must be positive semi-definite .*"
       r"principal moments are \[-3\.53" for name in ("tiago", "tiago_dual", "tiago_no_hand")},
    # an empty <robot> (the xacro output without its macros)
    "ur_description/urdf/ur3.urdf": r"the robot has no links",
}


class Pair(PinCoordinates):
    """One file in both libraries, with the maps between their coordinates."""

    def __init__(self, path: Path, mimic: bool = False, names: list[str] | None = None):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UrdfWarning)  # friction: test_talos_friction_is_kept_and_announced
            self.model = load_urdf(path)
        self.pin = pin.buildModelFromUrdf(str(path), mimic=mimic)
        self.data = self.pin.createData()
        super().__init__(self.model.config_names if names is None else names, self.pin)


@functools.lru_cache(maxsize=None)
def pair(name: str) -> Pair:
    return Pair(ROBOTS / name)


def relative(ours: np.ndarray, theirs: np.ndarray) -> float:
    return float(np.abs(ours - theirs).max() / max(np.abs(theirs).max(), 1e-300))


def test_the_package_ships_what_the_list_names():
    assert len(FILES) >= 60
    assert set(REFUSED) <= set(FILES)
    assert len(REFUSED) <= 7


@pytest.mark.parametrize("name", FILES)
def test_description_matches_pinocchio_or_is_refused_for_its_reason(name):
    if name in REFUSED:
        with pytest.raises(UrdfError, match=REFUSED[name]):
            pair(name)
        return
    p = pair(name)
    n = p.model.nq
    assert n == len(p.iv) == p.pin.nv and p.model.nk == 0
    rng = np.random.default_rng(sum(map(ord, name)))
    for _ in range(SAMPLES if n else 0):
        q, v = rng.uniform(-1.0, 1.0, n), rng.uniform(-1.0, 1.0, n)
        pq = p.pin_q(q)
        M = pin.crba(p.pin, p.data, pq)
        M = np.triu(M) + np.triu(M, 1).T  # crba fills the upper triangle
        assert relative(_core.mass_matrix(p.model, q), p.ours(M)) <= REL_TOL, f"{name}: mass matrix"
        gravity = -np.asarray(p.model.lagrangian(q, np.zeros(n), 1)["Lq"])
        theirs = p.ours(pin.computeGeneralizedGravity(p.pin, p.data, pq))
        assert relative(gravity, theirs) <= REL_TOL, f"{name}: gravity"
        d = p.model.lagrangian(q, v, 2)
        bias = np.asarray(d["Lqv"]).T @ v - np.asarray(d["Lq"])
        theirs = p.ours(pin.nonLinearEffects(p.pin, p.data, pq, p.pin_v(v)))
        assert relative(bias, theirs) <= REL_TOL, f"{name}: bias forces"


# ------------------------------------------------------------------------------------------------ mimic

def mimic_check(name: str, followers: dict[str, tuple[str, float]]) -> _core.Model:
    """The coupling constraints of ``name`` (follower -> (leader, multiplier), offsets 0) are h = q_f - m q_leader,
    and on the coupled subspace q = G z the model's mass matrix and bias forces, G^T M G and G^T b, equal those of
    Pinocchio's mimic model (mimic=True), whose coordinates are z (the followers removed)."""
    p = pair(name)
    model = p.model
    couplings = {f: (lead, mo) for _, kind, f, lead, mo in model.constraint_frames if kind == "coupling"}
    assert couplings == {f: (lead, (m, 0.0)) for f, (lead, m) in followers.items()}
    n = model.nq
    rng = np.random.default_rng(5)
    q = rng.uniform(-1.0, 1.0, n)
    h, Dh = model.constraints(q)
    rows = {name: k for k, name in enumerate(model.constraint_names)}
    for f, (lead, m) in followers.items():
        i, j = model.config_index(lead), model.config_index(f)
        row = rows[f"{f}_mimic"]
        assert h[row] == pytest.approx(q[j] - m * q[i], abs=1e-15)
        expected = np.zeros(n)
        expected[j], expected[i] = 1.0, -m
        np.testing.assert_array_equal(Dh[row], expected)
    free = [c for c in model.config_names if c not in followers]
    coupled = Pair(ROBOTS / name, mimic=True, names=free)
    G = np.zeros((n, len(free)))
    for k, c in enumerate(free):
        G[model.config_index(c), k] = 1.0
    for f, (lead, m) in followers.items():
        G[model.config_index(f), free.index(lead)] = m
    z, w = rng.uniform(-1.0, 1.0, len(free)), rng.uniform(-1.0, 1.0, len(free))
    q, v = G @ z, G @ w
    assert np.abs(model.constraints(q)[0]).max() <= 1e-15
    assert sorted(coupled.iv) == list(range(coupled.pin.nv))  # z is all of the mimic model's coordinates
    pz, pw = coupled.pin_q(z), coupled.pin_v(w)
    M = pin.crba(coupled.pin, coupled.data, pz)
    M = coupled.ours(np.triu(M) + np.triu(M, 1).T)
    assert relative(G.T @ _core.mass_matrix(model, q) @ G, M) <= REL_TOL
    d = model.lagrangian(q, v, 2)
    bias = G.T @ (np.asarray(d["Lqv"]).T @ v - np.asarray(d["Lq"]))
    assert relative(bias, coupled.ours(pin.nonLinearEffects(coupled.pin, coupled.data, pz, pw))) <= REL_TOL
    return model


def test_panda_mimic_fingers_are_coupled_like_pinocchios_mimic_joint():
    model = mimic_check("panda_description/urdf/panda.urdf", {"panda_finger_joint2": ("panda_finger_joint1", 1.0)})
    # The midpoint VI keeps the coupling while the arm falls under gravity.
    system = _core.DiscreteSystem(model, 0.01)
    q = np.zeros(model.nq)
    q[model.config_index("panda_finger_joint1")] = q[model.config_index("panda_finger_joint2")] = 0.02
    X = system.simulate(np.concatenate([q, np.zeros(model.nd)]), np.zeros((50, 0)))[0]
    h = np.array([model.constraints(x[:model.nq])[0] for x in X])
    assert np.abs(h).max() <= 1e-9
    assert np.abs(X[-1, :model.nq] - q).max() > 1e-2  # it moved


def test_pr2_gripper_mimics_in_chains_and_with_negative_multipliers():
    """PR2's grippers: five followers of each finger joint, two of them children of another follower (finger tips),
    one with multiplier -1."""
    followers = {}
    for side in "rl":
        lead = f"{side}_gripper_l_finger_joint"
        for f, m in (("r_finger", 1.0), ("l_parallel_root", 1.0), ("r_parallel_root", -1.0), ("l_finger_tip", 1.0),
                     ("r_finger_tip", 1.0)):
            followers[f"{side}_gripper_{f}_joint"] = (lead, m)
    mimic_check("pr2_description/urdf/pr2.urdf", followers)


def followers_of(name: str) -> dict[str, tuple[str, float]]:
    """{mimic joint: (leader, multiplier)} as the file states them (every stock offset is 0)."""
    joints = [j for j in parse_urdf(ROBOTS / name).joints if j.mimic is not None]
    assert all(j.mimic.offset == 0.0 for j in joints)
    return {j.name: (j.mimic.leader, j.mimic.multiplier) for j in joints}


@pytest.mark.parametrize("name", ["baxter_description/urdf/baxter.urdf", "tiago_pro_description/robots/tiago_pro.urdf"])
def test_other_mimic_joints_match_pinocchios_mimic_model(name):
    assert followers_of(name)
    mimic_check(name, followers_of(name))


def test_talos_gripper_mimics_pinocchio_cannot_couple_are_kept_by_the_integrator():
    """Pinocchio's mimic model refuses Talos's grippers ("the parent joint of the mimic joint is not in the kinematic
    tree"); here they build, and the midpoint VI keeps each coupling (multipliers +1 and -1) while the robot falls."""
    name = "talos_data/robots/talos_full_v2.urdf"
    model = pair(name).model
    followers = followers_of(name)
    leaders = ("gripper_left_joint", "gripper_right_joint")
    assert {lead for lead, _ in followers.values()} == set(leaders) and len(followers) == 12
    q = np.zeros(model.nq)
    for lead in leaders:
        q[model.config_index(lead)] = 0.3
    for f, (lead, m) in followers.items():
        q[model.config_index(f)] = m * 0.3
    system = _core.DiscreteSystem(model, 0.01)
    X = system.simulate(np.concatenate([q, np.zeros(model.nd)]), np.zeros((10, 0)))[0]
    assert max(np.abs(model.constraints(x[:model.nq])[0]).max() for x in X) <= 1e-9
    assert np.abs(X[-1, :model.nq] - q).max() > 1e-3


# --------------------------------------------------------------------------------------------- friction

TALOS = "talos_data/robots/talos_reduced.urdf"


def test_talos_friction_is_kept_and_announced():
    """Talos's Coulomb friction: the values are the description's (Pinocchio reads the same numbers), the model is
    built without them with one warning, and friction='refuse' refuses the file naming the first joint."""
    path = ROBOTS / TALOS
    robot = parse_urdf(path)
    friction = joint_friction(robot)
    theirs = pin.buildModelFromUrdf(str(path))
    by_name = {name: theirs.friction[theirs.joints[i].idx_v] for i, name in enumerate(theirs.names) if i > 0}
    assert friction == {name: f for name, f in by_name.items() if f} and len(friction) >= 14
    with pytest.warns(UrdfWarning, match=rf"talos_reduced\.urdf: Coulomb <dynamics friction> of {len(friction)} "
                                         r"joint\(s\) \(torso_1_joint 1, .*not simulated \(friction='ignore'\)"):
        model = load_urdf(path)
    assert model.hash == pair(TALOS).model.hash  # the model without friction is the one checked above
    with pytest.raises(UrdfError, match=r"joint 'torso_1_joint' <dynamics friction=1.0>: Coulomb friction is not "
                                        r"modelled and friction='refuse'"):
        load_urdf(path, friction="refuse")
