// Continuous-time dynamics of thesis ch. 3, used to cross-check the
// variational integrator (agreement as dt -> 0).
//   M(q) = d2L/dqdot dqdot (3.10)
//   Euler-Lagrange with forcing and constraints, kinematic accelerations
//   prescribed (thesis (A.1)-(A.3), with the A_d^T lambda term that (A.1) omits):
//     [M_dd  -Dh_d^T] [qddot_d]   [(dL/dq + F - L_vq qdot)_d - M_dk rhoddot]
//     [Dh_d     0   ] [lambda ] = [-Dh_k rhoddot - (qdot^T D2h_j qdot)_j     ]
#pragma once

#include "marionette/constraints.hpp"
#include "marionette/forces.hpp"
#include "marionette/lagrangian.hpp"

namespace mc {

struct ContinuousData {
  explicit ContinuousData(const Model& model);
  FrameCache cache, cache_h;
  LagrangianData L;
  ForceData F;
  ConstraintData h;
  VecX qddot, lambda;  ///< (n), (m)
};

/// Mass matrix d2L/dqdot2 (n, n) at q.
void mass_matrix(const Model& model, ContinuousData& d, const double* q, Eigen::Ref<MatX> out);
/// Constrained forward dynamics: fills d.qddot (kinematic entries = rhoddot) and d.lambda.
void forward_dynamics(const Model& model, ContinuousData& d, const double* q, const double* qdot, const double* u,
                      const double* rhoddot);

}  // namespace mc
