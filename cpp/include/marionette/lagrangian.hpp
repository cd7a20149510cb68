// The Lagrangian L(q, qdot) = sum_k T_k - sum V (thesis (3.7)) and its exact
// derivatives up to third order.
//
// Kinetic energy of a mass frame (principal axes at the centre of mass):
//   T_k = 1/2 V_k^T M_k V_k,  M_k = diag(m, m, m, Ixx, Iyy, Izz)
// so that with a, b, c ranging over q and qdot,
//   d_a T = V^T M d_a V,  d_ab T = d_a V^T M d_b V + V^T M d_ab V,
//   d_abc T = d_ab V^T M d_c V + d_ac V^T M d_b V + d_bc V^T M d_a V + V^T M d_abc V
// with d_qdot_j V = J_j and d_qdot d_qdot V = 0 (thesis (3.8)-(3.12), §A.1.1).
// Gravity's first and second derivatives come from the body Jacobian J_j = [J_j^v; J_j^w] and its
// derivatives d_i J_j, which the kinetic terms compute anyway: with pdot = R v and Rdot = R hat(w)
// (the body velocity (2.5)), d_j p = R J_j^v and d_i d_j p = R (J_i^w x J_j^v + d_i J_j^v), so
//   d_j (m g.p) = gb.J_j^v,  d_ij (m g.p) = gb.(J_i^w x J_j^v + d_i J_j^v) = gb.(J_i^w x J_j^v) (i <= j),
// gb = R^T m g, and the placements' own derivatives are needed only by the springs and at third order.
// The kinetic energy's d_qi d_vj T = d_i V^T M J_j + V^T M d_i J_j takes d_i J_j from the Lie bracket
// (kinematics.hpp, zero for i <= j), as the gravity term above: below third order no dJ is formed.
// Potentials: gravity V = -m g.p_k on every mass; linear spring
// V = 1/2 k (|p1 - p2| - x0)^2 (thesis §3.1.2.2; differentiated through s = |p1 - p2|^2, which
// avoids the misprinted x_ij, docs/thesis_corrections.md §3);
// configuration spring V = 1/2 k (q_i - q0)^2.
#pragma once

#include <vector>

#include "marionette/term.hpp"

namespace mc {

/// Lagrangian derivatives at one point z = (q, v). Dense first and second
/// derivatives over all n configurations; third derivatives stay per term.
struct LagrangianData {
  explicit LagrangianData(const Model& model);
  int order = -1;
  double value = 0.0;
  VecX Lq, Lv;        ///< (n)
  MatX Lqq, Lqv, Lvv; ///< (n, n); Lqv(i, j) = d2L / dq_i dv_j
  std::vector<TermDerivs> terms;  ///< one per mass frame, then one per linear spring
  VecDerivs work;
  std::vector<double> w3, wr;  ///< lagrangian_third_contract's workspaces (MV.dddV + m g.dddp, MV.ddJ of one mass term)
};

/// Evaluates L and its derivatives up to `order` (0..3) at (q, v); fills the
/// velocity/placement caches of `cache` at the same point.
void compute_lagrangian(const Model& model, FrameCache& cache, const double* q, const double* v, int order,
                        LagrangianData& out);

/// out (2n x 2n, z = (q, v) ordering) += sum_c eta_c d3L/dz_a dz_b dz_c. Requires L at order 3 and `cache`, the
/// cache compute_lagrangian filled (the mass terms' contraction is formed from its kinematic derivatives, their
/// third-derivative tensors never are; L's workspaces are used).
void lagrangian_third_contract(const Model& model, const FrameCache& cache, LagrangianData& L, const VecX& eta,
                               MatX& out);

}  // namespace mc
