"""Tracking gains designed for the arm and the command delay the controller runs with.

The controller applies u = u_d(j) − K(j)(x̂_j − x_d(j)) at j = k + d, on the state x̂_{k+d}
predicted through the commands in flight (:mod:`marionette_control.tracking.prediction`; d = the command delay in
steps). K(j) is the time-varying discrete LQR along the trajectory (thesis app. B.2.2 and (B.4),
:func:`~marionette_control.lq.riccati.tv_lq`) on the exact linearization (A(k), B(k))
(thesis (4.37)) with the stage cost

    δxᵀ Q δx + δuᵀ R δu + w_a |δa|²,    δa = (δρ_{k+1} − δρ_k − Δt δv_k)/Δt²

(Q, R diagonal by kind of component, δa the deviation of the drives' acceleration over the step:
a linear function of state and input, so the cost becomes Q + w_a Mxᵀ Mx, a cross term
S = w_a Mxᵀ Mu and R + w_a Muᵀ Mu). With an exact predictor the LQR of the delay-augmented
system [x_k; u_k, …] has the same gains on the predicted state (certainty equivalence), which
``docs/tracking.md`` measures too.

Why these weights (the measurements are in ``docs/tracking.md``): what the animator drew and
what the tracking targets are the arm angles, so the dynamic configurations carry the weight
(the thesis's Q = R = I, thesis §6.7, puts about 0.17 mm of carriage correction per degree of
arm error: far too little to correct a model error); the drives' positions and velocities are
weighted lightly (they are means, not ends); the acceleration weight w_a sets the loop's
bandwidth against the drives' acceleration limits and the encoder noise that reaches the
commands through the estimate — without it, heavy angle weights track best on a quiet arm but
the clamped loop goes unstable with noise or on a trajectory at the acceleration limit.

Integral action on the arm angles (LQI; ``angle_integral`` w_i > 0). The nominal model's errors
(hook position, masses, damping) leave a slowly varying offset between the measured angles and
any state the model predicts, which a state feedback on the model's estimate does not remove
(docs/tracking.md). The design augments the state with the integral of the angle error,

    z_{k+1} = z_k + Δt C δx_k,    C = [I_nd 0]                       (the dynamic configurations)

and adds w_i |z_k|² to the stage cost (terminal: terminal_scale · w_i |z_N|²); the LQR of the
augmented system gives u = u_d − K δx − K_z z, with K and K_z designed together (the angle
weight and w_i set the bandwidth jointly: K is not the K of the design without integral). K
travels in the trajectory's (N, nU, nx) gains as before; K_z (N, nU, nd) is recomputed from the
design record by the controller when it loads the trajectory (:func:`integral_gains`, the same
computation, which also checks that the record reproduces K), so no message or file carries it.

The gains travel with the trajectory (``Trajectory.info[GAIN_DESIGN]``: the method, delay and
weights) so the controller refuses gains designed for another command delay
(:func:`check_gains`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Mapping, Optional, Union

import numpy as np

from marionette_control import validation
from marionette_control.lq.riccati import tv_lq, tv_lqr
from marionette_control.model.state_layout import drive_acceleration, input_by_kind, state_by_kind
from marionette_control.trajectory import Trajectory
from marionette_control.validation import InvalidOption

#: the GainDesign fields that may be given by joint (a mapping {dynamic configuration name: weight})
PER_JOINT = ("dynamic_configuration", "angle_integral")
#: key of the design record in ``Trajectory.info``
GAIN_DESIGN = "gain_design"
METHOD = "tv_lqr_on_predicted_state"


class GainDesignError(InvalidOption):
    """A :class:`GainDesign` field breaks its rule; ``key`` is ``tracking_gains.<field>``."""


@dataclass(frozen=True)
class GainDesign:
    """Diagonal LQR weights by kind of state component, and the command delay (steps) the gains are for.

    dynamic_configuration : the dynamic configurations (the arm's joint angles: what the tracking is about;
        every configuration of a model without drives, e.g. the pendulum or the cart-pole)
    kinematic_configuration : the drives' positions (carriage, string length)
    momentum : the dynamic momenta
    kinematic_velocity : the drives' velocities
    input : every input (R = input · I)
    drive_acceleration : w_a, on the drives' acceleration deviation (s⁴/m² per unit of cost); sets the loop's
        bandwidth against the drives' acceleration limits and the encoder noise (no effect without drives)
    terminal_scale : Q_f = terminal_scale · Q (the acceleration term has no terminal part)
    angle_integral : w_i, on the integral of the dynamic configurations' error (1/(rad² s²) per unit of cost;
        0: no integral action); module docstring
    delay_steps : the command delay d the controller compensates (ros2_control: 1)

    ``dynamic_configuration`` and ``angle_integral`` are one value for every dynamic configuration or a mapping
    {configuration name: value} naming each of the model's dynamic configurations (the arm's ``shoulder`` and
    ``elbow``): the LQ law trades the joints against each other, and a joint whose model error the law must reject
    harder gets its own weight (docs/tracking.md, "Plant family").

    Every front end sets these by these names (the YAML spec's ``tracking_gains`` section, the optimizer
    node's ``tracking_gains.*`` parameters); a violated rule raises :class:`GainDesignError` with the key
    ``tracking_gains.<field>``.
    """

    dynamic_configuration: Union[float, Mapping[str, float]] = 1.0e3
    kinematic_configuration: float = 1.0
    momentum: float = 1.0
    kinematic_velocity: float = 0.1
    input: float = 1.0
    drive_acceleration: float = 2.0e-2
    terminal_scale: float = 1.0
    angle_integral: Union[float, Mapping[str, float]] = 2.5e6
    delay_steps: int = 1

    def __post_init__(self):
        for f in fields(self):
            if f.name == "delay_steps":
                continue
            value, key = getattr(self, f.name), f"tracking_gains.{f.name}"
            if f.name in PER_JOINT and isinstance(value, Mapping):
                if not value or not all(isinstance(n, str) for n in value):
                    raise GainDesignError(f"gain design weight '{f.name}' by joint must map configuration names to "
                                          f"weights, got {value!r}", key=key)
                value = {n: validation.weight(w, f"gain design weight '{f.name}' of '{n}'", error=GainDesignError,
                                              key=f"{key}.{n}") for n, w in value.items()}
            else:
                value = validation.weight(value, f"gain design weight '{f.name}'", positive=f.name == "input",
                                          error=GainDesignError, key=key)
            object.__setattr__(self, f.name, value)
        d = self.delay_steps
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0:
            raise GainDesignError(f"gain design delay_steps must be an integer >= 0 (control periods), got {d!r}",
                                  key="tracking_gains.delay_steps")
        object.__setattr__(self, "delay_steps", int(d))

    @classmethod
    def of(cls, trajectory: Trajectory) -> Optional["GainDesign"]:
        """The design a trajectory's gains were made with (its ``info[GAIN_DESIGN]`` record), None without one (a
        re-planner designs its windows' gains the same way, :mod:`~marionette_control.ocp.mpc`). Raises
        GainDesignError for a record whose fields break a rule."""
        rec = trajectory.info.get(GAIN_DESIGN)
        if not isinstance(rec, dict):
            return None
        # a record without angle_integral predates integral action: its gains were designed without it
        return cls(**{"angle_integral": 0.0, **{f.name: rec[f.name] for f in fields(cls) if f.name in rec}})

    def per_joint(self, model, name: str) -> np.ndarray:
        """(nd,): the weight ``name`` (one of :data:`PER_JOINT`) of each of ``model``'s dynamic configurations, in
        model order. Raises GainDesignError when a mapping does not name exactly those configurations."""
        value = getattr(self, name)
        joints = list(model.config_names[:model.nd])
        if not isinstance(value, Mapping):
            return np.full(model.nd, value)
        if sorted(value) != sorted(joints):
            raise GainDesignError(f"gain design weight '{name}' by joint must name the model's dynamic "
                                  f"configurations {joints}, got {sorted(value)}", key=f"tracking_gains.{name}")
        return np.array([value[n] for n in joints], dtype=float)

    def has_integral(self) -> bool:
        """Whether the design has integral action (some joint's ``angle_integral`` > 0)."""
        wi = self.angle_integral
        return any(v > 0 for v in wi.values()) if isinstance(wi, Mapping) else wi > 0

    def weights(self, model) -> tuple[np.ndarray, np.ndarray]:
        """(Q (nx,), R (nU,)) diagonals for ``model``, laid out by kind of component
        (:mod:`marionette_control.model.state_layout`), the dynamic configurations' by joint."""
        Q = state_by_kind(model, dynamic_configuration=0.0, kinematic_configuration=self.kinematic_configuration,
                          momentum=self.momentum, kinematic_velocity=self.kinematic_velocity)
        Q[:model.nd] = self.per_joint(model, "dynamic_configuration")
        return Q, input_by_kind(model, force_input=self.input, kinematic_input=self.input)


@dataclass(frozen=True, eq=False)
class TrackingGains:
    """Gains K (N, nU, nx) and the record that travels with them (``Trajectory.info[GAIN_DESIGN]``); K_z
    (N, nU, nd) the gains on the angle error's integral (None without integral action), which the controller
    recomputes from the record (module docstring)."""

    K: np.ndarray
    info: dict
    K_z: Optional[np.ndarray] = None

    def attach(self, trajectory: Trajectory) -> Trajectory:
        """A copy of ``trajectory`` carrying these gains and their record."""
        info = dict(trajectory.info)
        info[GAIN_DESIGN] = self.info
        return Trajectory(dt=trajectory.dt, X=trajectory.X, U=trajectory.U, state_names=trajectory.state_names,
                          input_names=trajectory.input_names, model_name=trajectory.model_name,
                          model_hash=trajectory.model_hash, K=self.K, t0=trajectory.t0, info=info)


def design_gains(system, X: np.ndarray, U: np.ndarray, design: GainDesign = GainDesign(),
                 linearization: Optional[tuple] = None) -> TrackingGains:
    """Time-varying LQR gains along (X (N+1, nx), U (N, nU)) with ``design``'s weights, with integral action when
    some joint's ``design.angle_integral`` > 0 (module docstring). ``linearization``: (A (N, nx, nx), B (N, nx, nU)) along (X, U)
    when the caller has it already (thesis (4.37); a real-time iteration's preparation, :mod:`marionette_control.ocp.rti`),
    else the core's."""
    model = system.model
    nx, nd = model.nx, model.nd
    Q, R = design.weights(model)
    A, B = (np.asarray(a) for a in (linearization or system.linearize_trajectory(X, U)))
    Qm, Rm, Qf = np.diag(Q), np.diag(R), np.diag(design.terminal_scale * Q)
    S = None
    if design.drive_acceleration > 0 and model.nk:
        # δa = Mx δx + Mu δu; the cost w |δa|² adds Mxᵀ w Mx, Mxᵀ w Mu, Muᵀ w Mu
        Mx, Mu = drive_acceleration(model, system.dt)
        w = design.drive_acceleration
        Qm, Rm, S = Qm + w * Mx.T @ Mx, Rm + w * Mu.T @ Mu, w * Mx.T @ Mu
    K_z = None
    integral = design.has_integral()
    if integral:  # the augmented system [δx; z], z_{k+1} = z_k + Δt C δx_k
        N, n = A.shape[0], nx + nd
        Aa = np.zeros((N, n, n))
        Aa[:, :nx, :nx] = A
        Aa[:, nx:, :nd] = system.dt * np.eye(nd)
        Aa[:, nx:, nx:] = np.eye(nd)
        Ba = np.zeros((N, n, B.shape[2]))
        Ba[:, :nx] = B
        A, B = Aa, Ba
        Wi = np.diag(design.per_joint(model, "angle_integral"))
        Qm, Qf = block_diag(Qm, Wi), block_diag(Qf, design.terminal_scale * Wi)
        S = np.zeros((n, B.shape[2])) if S is None else np.vstack([S, np.zeros((nd, S.shape[1]))])
        # terminal cost: the stationary cost-to-go at the last step, so that the gains do not fade out over the last
        # steps (a fading angle feedback with the integral's gains still on ends as an integral-only loop)
        M = TERMINAL_STEPS
        Qf = tv_lq(np.broadcast_to(A[-1], (M, n, n)), np.broadcast_to(B[-1], (M,) + B.shape[1:]), Qm, S, Rm,
                   None, None, Qf, None, full_P=False).P[0]
    # the weights are the design's, checked once by GainDesign, and (A, B) the core's: the sweep's own checks
    # (symmetry, definiteness: a third of the design's time on a 1 s window) would only repeat them
    if S is not None:
        K = np.asarray(tv_lq(A, B, Qm, S, Rm, None, None, Qf, None, full_P=False, check_inputs=False).K)
    else:
        K = np.asarray(tv_lqr(A, B, Qm, Rm, Qf, full_P=False, check_inputs=False).K)
    if integral:
        K, K_z = K[:, :, :nx], K[:, :, nx:]
    info = {"method": METHOD, **asdict(design), "state_weights": Q.tolist(), "input_weights": R.tolist()}
    return TrackingGains(np.ascontiguousarray(K), info, None if K_z is None else np.ascontiguousarray(K_z))


#: steps of the last step's dynamics over which the integral design's terminal cost-to-go is settled (30 s at 0.01 s)
TERMINAL_STEPS = 3000


def block_diag(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[[a, 0], [0, b]] of two square matrices."""
    out = np.zeros((a.shape[0] + b.shape[0],) * 2)
    out[:a.shape[0], :a.shape[0]] = a
    out[a.shape[0]:, a.shape[0]:] = b
    return out


def integral_gains(system, trajectory: Trajectory, rtol: float = 1e-6) -> Optional[np.ndarray]:
    """K_z (N, nU, nd) of a trajectory whose design record asks for integral action (``angle_integral`` > 0), None
    when it does not or has no record: :func:`design_gains` again with the record's design (module docstring).

    Raises ValueError when the record does not reproduce the trajectory's K (to ``rtol`` of its largest entry):
    the gains were not designed as the record says, so integral gains designed from it would not fit them.
    """
    design = GainDesign.of(trajectory)
    if design is None or not design.has_integral() or trajectory.K is None:
        return None
    gains = design_gains(system, trajectory.X, trajectory.U, design)
    K = np.asarray(trajectory.K)
    off = float(np.max(np.abs(gains.K - K)))
    if off > rtol * max(float(np.max(np.abs(K))), 1e-300):
        raise ValueError(f"the trajectory's gains K are not those of their design record (angle_integral "
                         f"{design.angle_integral}, ...): they differ by up to {off:.3g} from the design "
                         "recomputed here; recompute them with marionette_control.lq.gains.design_gains")
    return gains.K_z


def gain_delay(trajectory: Trajectory) -> Optional[int]:
    """The command delay (steps) the trajectory's gains were designed for; None when they carry no record."""
    rec = trajectory.info.get(GAIN_DESIGN)
    if not isinstance(rec, dict):
        return None
    d = rec.get("delay_steps")
    if isinstance(d, bool) or not isinstance(d, int) or d < 0:
        raise ValueError(f"the trajectory's gain design record has an invalid delay_steps {d!r}")
    return d


def check_gains(trajectory: Trajectory, delay_steps: int) -> Optional[str]:
    """Raises ValueError when the trajectory's gains were designed for another command delay.

    Returns a warning text for gains without a design record (older trajectory files and tools:
    they are used as they are), else None.
    """
    d = gain_delay(trajectory)
    if d is None:
        return (f"the trajectory's gains carry no design record ({GAIN_DESIGN}); they are used as they are for "
                f"a command delay of {delay_steps} step(s)")
    if d != delay_steps:
        raise ValueError(f"the trajectory's gains were designed for a command delay of {d} step(s), but this "
                         f"controller compensates {delay_steps} (command_delay_steps): recompute them with "
                         f"marionette_control.lq.gains.design_gains(..., GainDesign(delay_steps={delay_steps}))")
    return None
