// Midpoint variational integrator with holonomic constraints and kinematic
// configurations, and the exact first and second derivatives of its one-step
// map (thesis ch. 4, §A.2; seed 001 §II-VI).
//
// Discrete Lagrangian (4.8):  L_d(q1, q2) = dt L((q1 + q2)/2, (q2 - q1)/dt)
// Forcing (4.12):             f- = w- dt F(qbar, qdot, u),  f+ = w+ dt F(qbar, qdot, u)
//                             (the model's rule, model.hpp Forcing: thesis (4.12a) w- = 1, w+ = 0;
//                             symmetric w- = w+ = 1/2)
// Slot derivatives:           D_a L_d = dt C_a^T grad L,  C_1 = [I/2; -I/dt], C_2 = [I/2; I/dt]
//                             (so D_a D_b L_d = dt C_a^T H C_b, and likewise to third order; the
//                             forcing's D_b f = w dt [Fq/2 + s_b Fv/dt], s_1 = -1, s_2 = +1)
// Constrained step (4.36), solved for (q2_dyn, lambda) by Newton's method whose Jacobian is
// kept while the residual drops at least 20x per step (chord steps need only first derivatives
// of L; a slower step re-evaluates the Jacobian), and polished below 1e-3 x tolerance:
//   G1 = p1 + [D_1 L_d(q1, q2) + f-]_dyn - Dh_dyn(q1)^T lambda = 0
//   G2 = h(q2) = 0,          q2 = (q2_dyn, rho2)
// then p2 = [D_2 L_d(q1, q2) + f+]_dyn.  Newton Jacobian
//   [[M_{k+1}, -Dh_dyn(q1)^T], [Dh_dyn(q2), 0]],  M_{k+1} = [D_2 D_1 L_d + D_2 f-]_dyn,dyn  (4.16).
//
// Discrete state and input (docs/architecture.md; thesis §A.2, with rho for q in v_k):
//   x = [q (dynamic, then kinematic); p (dynamic); v (kinematic velocities)]
//   u = [force inputs; rho_{k+1}],  v_{k+1} = (rho_{k+1} - rho_k)/dt.
// Derivatives of the step follow from the implicit function theorem on
// G(w, y) = 0 with parameters w = (q1, p1, u_force, rho2) and unknowns
// y = (q2_dyn, lambda): Y = dy/dw = -G_y^{-1} G_w (4.37)-(4.38), and
// dp2/dw = D_1 P + D_2 P dq2/dw + D_3 P with P = D_2 L_d + f+ ((4.21)-(4.23): the D F+ terms).
// The second derivative contracted with a covector z of x_{k+1} is
//   z^T D2f = D^T Hess(z_p^T P + mu^T G) D,   mu = -G_y^{-T} [P_{q2}^T z_p + z_q; 0],
// D = d(q1, q2, u, lambda)/dw: only third derivatives of L and h contracted
// with one vector are ever formed (thesis Prop. 6/7 need nothing else); the forcing enters
// Hess(...) as dt (w- mu_dyn + w+ z_p)^T F ((4.24)-(4.35), whose D F+ terms are this z_p part).
//
// Constraint forces: lambda_k is the multiplier of step k, paired with Dh(q_k): the
// step applies the impulse -Dh(q_k)^T lambda_k (and the forces the impulse f- + f+ = dt F).
// Its first derivatives are the bottom m rows of Y ((4.37)-(4.38), §A.2.5); a covector
// w on lambda enters the second-order form only through the adjoint's right-hand side,
// mu = -G_y^{-T} [P_{q2}^T z_p + z_q; w] ((4.39)-(4.40), §A.2.6): D2 lambda is never formed.
#pragma once

#include <Eigen/Cholesky>
#include <Eigen/LU>

#include "marionette/constraints.hpp"
#include "marionette/forces.hpp"
#include "marionette/lagrangian.hpp"

namespace mc {

/// Integrator settings. The step stops when the DEL residual (max-norm over
/// dynamic rows) and every |h_i(q2)| are <= tolerance (and, after a chord step,
/// <= 1e-3 x tolerance or two polishing steps were taken). max_iterations counts
/// all Newton and chord updates.
struct VIOptions {
  double dt = 0.01;
  double tolerance = 1e-10;
  int max_iterations = 50;
  void validate() const;
};

/// Workspace and results of one step (q1, p1, u, rho2) -> (q2, p2, lambda).
struct StepData {
  explicit StepData(const Model& model);
  // Inputs of the step.
  VecX q1, p1, u, rho2;
  // Solution (q2 and lambda also hold the initial guess before the solve).
  VecX q2, p2, lambda;
  int iterations = 0;
  double residual = 0.0;
  bool solved = false;
  // Caches at the midpoint, at q1 and at q2.
  FrameCache mid, at1, at2;
  LagrangianData L;
  ForceData F;
  ConstraintData h1, h2;
  // Newton system and derivative workspaces.
  VecX qbar, qdot, r, dy;
  MatX kkt;
  Eigen::PartialPivLU<MatX> lu, lu_t;  ///< Newton matrix and its transpose (adjoint solves)
  Eigen::LLT<MatX> gram;               ///< Dh_dyn(q1) Dh_dyn(q1)^T (midpoint_step_at_solution's lambda)
  MatX gram_m;                         ///< (m, m) workspace of gram
  bool have_lu_t = false;              ///< lu_t holds the transpose of the solved step's Newton matrix
  MatX S11, S12, S22, S21;  ///< dt C_a^T H C_b (+ forcing), dynamic rows (interval_jacobian_blocks)
  MatX Kinv;                ///< (nd + m, nd + m) inverse of the Newton matrix at the solution
  MatX Gq, Y;               ///< (nd, n) d G1 / d q1; Y = dy/dw (nd + m, nw)
  bool have_first = false;
  // Second order workspaces.
  VecX eta, nu, mu, cvec, evec, fvec, dw, dN;  ///< fvec: the forcing's covector (n)
  MatX Hz, Fqq, Fqu, Psi, D, HD, Hw, hc, scratch;
};

/// Sizes of the shared layout.
struct Layout {
  int n, nd, nk, nu, m, nx, nU, nw;
  explicit Layout(const Model& model);
};

/// Solves the constrained DEL equations for the inputs stored in `s`
/// (q1, p1, u, rho2), starting from the guess in s.q2 and s.lambda.
/// Throws StepError (naming `step_index`) on failure. `newton_order` (2 or 3) is the
/// order of the Lagrangian's derivatives at an evaluation that (re)builds the Newton
/// matrix: 3 when the step is solved for the second-order forms from a guess that (nearly)
/// solves it (midpoint_step_at_solution), so that the Lagrangian is evaluated once instead of
/// at order 2 and again at order 3 (the same numbers: the lower orders are computed identically
/// at any order). Not from a poor guess: every full Newton iteration would then pay order 3.
void midpoint_step(const Model& model, const VIOptions& opt, StepData& s, long step_index, int newton_order = 2);

/// Consecutive steps of a trajectory: midpoint_step's last evaluation is at the solution q2, and so holds
/// h(q2) to order 1 in s.h2 (its cache s.at2), which is h(q1) of the next step. hand_on_constraints(s) after a
/// solved step moves it to s.h1 (s.at1; the two swap, nothing is copied), and midpoint_step_given_h1 then solves
/// the next step, loaded with q1 = that q2, without evaluating h(q1) again: the numbers midpoint_step gives (the
/// same function of the same q). The projection and simulation loops of a model with constraints save one of a
/// step's four or so evaluations of the constraints (without constraints the hand-on would cost more than the
/// nothing it saves: the pendulum's linearized step takes 0.6 us).
void hand_on_constraints(StepData& s);
void midpoint_step_given_h1(const Model& model, const VIOptions& opt, StepData& s, long step_index);

/// The step whose solution q2 is known (the next configuration of a trajectory of this system, loaded
/// into s.q2 with the inputs): the derivatives along a trajectory need the solved step's caches, not a
/// new solve. Evaluates L and F at the midpoint and h at q1 once, to `order` (2: first derivatives,
/// 3: the second-order forms; h at q2 to order - 1), takes lambda from the DEL residual, in which it
/// enters linearly: the least-squares solution of Dh_dyn(q1)^T lambda = p1 + [D_1 L_d + f-]_dyn, and
/// accepts the step when the residual (the max-norm of midpoint_step's) is <= the tolerance. Otherwise
/// (q2 is not the solution: the trajectory is not one of this system) it solves by midpoint_step from
/// q2 and that lambda. Either way the step is solved to the tolerance and its caches hold the orders
/// the derivatives below need: one evaluation instead of Newton's (re-evaluating the point it started
/// from) followed by the derivatives' own. Throws StepError as midpoint_step. `consecutive`: the step follows
/// the previous one of the same trajectory and hand_on_constraints moved that step's h(q2) to s.h1 (taken when
/// it has `order`; after a Newton solve, whose evaluations are to order 1, it is evaluated again), and h(q2) is
/// evaluated to `order` too, for the next step: one evaluation of the constraints per step instead of two.
void midpoint_step_at_solution(const Model& model, const VIOptions& opt, StepData& s, long step_index, int order = 2,
                               bool consecutive = false);

/// The implicit derivatives Y = dy/dw = -G_y^{-1} G_w (4.37)-(4.38) of the solved step (s.Y), all the
/// first-order terms the constraint forces' derivatives and the second-order forms need. G_w's columns
/// of p1 are unit columns and its lambda rows vanish outside rho2, so Y is formed from the explicit
/// inverse of G_y (nd + m columns solved instead of nw) by products over the dynamic rows of G_w.
void step_implicit_derivatives(const Model& model, const VIOptions& opt, StepData& s);

/// First derivatives of the one-step map at the solved step, written row-major: A (nx, nx), B (nx, nU)
/// (step_implicit_derivatives, then x_{k+1} = (q2, p2, v2) of (4.21)-(4.23) through Y).
void step_first_derivatives(const Model& model, const VIOptions& opt, StepData& s, double* A, double* B);

/// d lambda / dx (m, nx) and d lambda / du (m, nU) of the solved step, written row-major:
/// the bottom m rows of Y mapped from w = (q1, p1, u, rho2) onto x = (q1, p1, v1) (lambda
/// does not depend on v1: zero columns) and u = (u, rho2). Requires step_implicit_derivatives.
void store_constraint_force_derivatives(const Model& model, const StepData& s, double* lam_x, double* lam_u);

/// z^T D2f + w^T D2lambda as blocks xx (nx, nx), xu (nx, nU), uu (nU, nU), for a covector z
/// of x_{k+1} (nx) and w of lambda_k (m; null = 0). Requires step_implicit_derivatives at this step.
void step_second_contracted(const Model& model, const VIOptions& opt, StepData& s, const Eigen::Ref<const VecX>& z, Eigen::Ref<MatX> xx,
                            Eigen::Ref<MatX> xu, Eigen::Ref<MatX> uu, const double* w = nullptr);

/// D2f o (d, d) (nx) for the direction d = (dx, du), and D2lambda o (d, d) into lam_dd (m)
/// unless null. Requires step_implicit_derivatives.
void step_second_directional(const Model& model, const VIOptions& opt, StepData& s, const Eigen::Ref<const VecX>& dx,
                             const Eigen::Ref<const VecX>& du,
                             Eigen::Ref<VecX> out, double* lam_dd = nullptr);

/// Discrete Legendre transform p2 = [D_2 L_d(q1, q2) + f+(q1, q2, u)]_dyn (thesis (4.13), the
/// initialization after (4.15)): the momentum at q2 implied by two consecutive configurations and
/// the force inputs u (nu) applied between them (null: zero; f+ = 0 under the thesis rule).
/// Leaves s unsolved.
void discrete_momentum(const Model& model, const VIOptions& opt, StepData& s, const double* q1, const double* q2,
                       const double* u, double* p2);

/// Loads x (nx) and u (nU) into the step inputs.
void load_step(const Model& model, StepData& s, const double* x, const double* u);
/// Writes x_{k+1} (nx) of the solved step.
void store_next_state(const Model& model, const VIOptions& opt, const StepData& s, double* x_next);

}  // namespace mc
