// Holonomic constraints h(q) = 0 and their exact derivatives up to third
// order (distance: thesis §3.1.4.1, (3.22)-(3.23); point on plane: §3.1.4.2; derivatives of the
// constrained dynamics: §3.5).
//   distance: h = |p1 - p2|^2 - L^2, L fixed or a configuration (string length)
//   plane:    h = (R_1 e_a) . (p_2 - p_1)
//   coupling: h = q_follower - m q_leader - o (linear; a URDF <mimic> joint, thesis §2.5)
#pragma once

#include <vector>

#include "marionette/term.hpp"

namespace mc {

struct ConstraintData {
  explicit ConstraintData(const Model& model);
  int order = -1;
  VecX h;    ///< (m)
  MatX Dh;   ///< (m, n)
  std::vector<TermDerivs> terms;  ///< per constraint, over its support
  VecDerivs u, w;
};

/// Evaluates h and its derivatives up to `order` at q (fills placements of `cache`).
void compute_constraints(const Model& model, FrameCache& cache, const double* q, int order, ConstraintData& out);
/// out (n, n) += sum_j weight_j D2h_j. Requires order >= 2.
void constraint_weighted_hessian(const ConstraintData& h, const double* weight, MatX& out);
/// out (m, n): row j = D2h_j c. Requires order >= 2.
void constraint_hessian_times(const ConstraintData& h, const Eigen::Ref<const VecX>& c, MatX& out);
/// out (n, n) += sum_j weight_j (D3h_j . c) (third derivative contracted with c). Requires order 3.
void constraint_weighted_third(const ConstraintData& h, const double* weight, const Eigen::Ref<const VecX>& c,
                               MatX& out);

}  // namespace mc
