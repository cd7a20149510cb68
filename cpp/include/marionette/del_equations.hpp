// The forced constrained discrete Euler-Lagrange equations of a whole configuration
// trajectory, as residuals with exact derivatives: the equality constraints of direct
// transcription (DMOCC, seed 002 §3), in this package's discretization.
//
// Seed 002 (3.6) with the midpoint discrete Lagrangian (3.2) (= thesis (4.8)), the model's
// forcing f- = w- dt F(qbar, qdot, u), f+ = w+ dt F (thesis (4.12); model.hpp Forcing: the thesis
// rule w- = 1, w+ = 0, or the symmetric w- = w+ = 1/2: the halves of seed 002 (3.10), with F at the
// midpoint instead of the nodes) and this
// package's multiplier convention (lambda_k paired with Dh(q_k), no factor dt: the impulse
// -Dh(q_k)^T lambda_k), node k = 0..N-1:
//   r_k = p_k^+ + [D_1 L_d(q_k, q_{k+1}) + f-_k - Dh(q_k)^T lambda_k]_dyn = 0   (nd)
//   h(q_{k+1}) = 0                                                            (m)
// with p_k^+ = [D_2 L_d(q_{k-1}, q_k) + f+_{k-1}]_dyn for k >= 1 (the discrete Legendre transform,
// seed 002 (3.13)) and p_0^+ = p_0 the given initial momentum (the momentum boundary
// condition (3.21) at t_0 in the multiplier form (3.13)). Given (q_k, p_k), r_k = 0 and
// h(q_{k+1}) = 0 are exactly the equations one integrator step solves (thesis (4.36)).
//
// Every node's equations are sums of two interval functions of (q_j, q_{j+1}, u_j, lambda_j):
//   a_j = [D_1 L_d(q_j, q_{j+1}) + f-_j - Dh(q_j)^T lambda_j]_dyn,   b_j = [D_2 L_d(q_j, q_{j+1}) + f+_j]_dyn = p_{j+1},
//   c_j = h(q_{j+1});   r_k = b_{k-1} + a_k (b_{-1} = p_0).
// So node k's rows depend on (q_{k-1}, q_k, q_{k+1}, u_{k-1}, u_k, lambda_k) (on u_{k-1} through f+ only),
// and the Hessian of any weighted sum Y.R + Z.P is a sum of interval blocks over
// (q_j, q_{j+1}, u_j, lambda_j) with the weights alpha = Y_j (on a_j), beta = Y_{j+1} + Z_j (on b_j),
// gamma = the h rows of Y_j (on c_j). Only third derivatives of L and h contracted with one
// vector are formed (lagrangian_third_contract, constraint_weighted_third), as in the
// step's contracted second order (thesis (4.39)-(4.40)), which shares interval_weighted_hessian.
#pragma once

#include "marionette/midpoint_vi.hpp"

namespace mc {

/// dt C_a^T [[Hqq, Hqv], [Hvq, Hvv]] C_b, with C_1 = [I/2; -I/dt], C_2 = [I/2; I/dt] (sa, sb = -1 for
/// slot 1, +1 for slot 2): the slot derivatives D_a D_b L_d of the midpoint discrete Lagrangian
/// (thesis (4.8)) from the Hessian H of L, and likewise for any contracted third derivative.
template <typename A, typename B, typename C, typename D>
void slot_matrix(double dt, int sa, int sb, const A& Hqq, const B& Hqv, const C& Hvq, const D& Hvv, MatX& out) {
  out.noalias() = (0.25 * dt) * Hqq;
  out.noalias() += (0.5 * sb) * Hqv;
  out.noalias() += (0.5 * sa) * Hvq;
  out.noalias() += (sa * sb / dt) * Hvv;
}

/// Loads the interval (q1 (n), q2 (n), u (nu force inputs), lambda (m)) into s (q1, q2, u, lambda,
/// qbar, qdot) and evaluates L, F at the midpoint, h at q1 and q2 to what derivatives of
/// `order` need: 0 the functions, 1 their Jacobians, 2 the weighted Hessian. Allocates nothing.
void load_interval(const Model& model, const VIOptions& opt, StepData& s, const double* q1, const double* q2,
                   const double* u, const double* lambda, int order);

/// a (nd), b (nd), c (m) of the loaded interval (see the file comment). Needs load_interval order >= 0.
void interval_residual(const Model& model, const VIOptions& opt, const StepData& s, Eigen::Ref<VecX> a,
                       Eigen::Ref<VecX> b, Eigen::Ref<VecX> c);

/// Fills the dynamic rows (the top nd; the other rows are not used and left as they were) of s.S11,
/// s.S12, s.S21, s.S22 (slot matrices of L_d plus D_b f- in the slot-1 rows S1b and D_b f+ in the
/// slot-2 rows S2b) and s.Hz's top-left (n, n) block with sum_i lambda_i D2h_i(q1): then
///   da/dq1 = (S11 - Hz)_dyn rows, da/dq2 = S12_dyn, da/du = w- dt Fu_dyn, da/dlambda = -Dh_dyn(q1)^T,
///   db/dq1 = S21_dyn, db/dq2 = S22_dyn, db/du = w+ dt Fu_dyn, dc/dq2 = Dh(q2) (thesis (4.37)'s blocks).
/// Needs load_interval order >= 1.
void interval_jacobian_blocks(const Model& model, const VIOptions& opt, StepData& s);

/// Psi (2n + nu + m, 2n + nu + m) = Hessian over (q1, q2, u, lambda) of
///   alpha^T [D_1 L_d + f- - Dh(q1)^T lambda] + beta^T [D_2 L_d + f+] + gamma^T h(q2)
/// with alpha, beta (n; zero on kinematic rows) and gamma (m, may be null when m = 0). Uses
/// s.eta, s.Hz, s.Fqq, s.Fqu, s.fvec, s.scratch, s.hc as workspaces. Needs load_interval order >= 2
/// (or a solved step's caches to the same orders).
void interval_weighted_hessian(const Model& model, const VIOptions& opt, StepData& s, const VecX& alpha, const VecX& beta,
                               const double* gamma, MatX& Psi);

}  // namespace mc
