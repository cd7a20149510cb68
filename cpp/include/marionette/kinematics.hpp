// Forward kinematics of the frame tree and its exact derivatives by the tree
// recursion of thesis ch. 2.
//
// Placement (2.1):      g_{s,k} = g_{s,par(k)} g_k(q_k)
// Body velocity (2.5):  V_k = Ad_{g_k^{-1}} V_{par(k)} + xi_k qdot_k,   V = [v; w]
// Body Jacobian:        J_k[:, j] = dV_k / dqdot_j
//
// A derivative with respect to the multi-index I of ancestor configurations
// splits by the m entries of I equal to the frame's own configuration c:
//   d_I g_{s,k} = d_{I\c} g_{s,par} . g_k^{(m)},  d_I V_k = Ad^{(m)} d_{I\c} V_par,
// zero if I contains a configuration that is not an ancestor (thesis (2.2),
// (2.3), (2.11); the body-velocity derivatives (2.6)-(2.15) with the
// corrections of docs/thesis_corrections.md §1).
#pragma once

#include <vector>

#include "marionette/model.hpp"

namespace mc {

/// Cached frame quantities at one point (q, qdot), up to a derivative order.
/// Derivative blocks of frame f live at the Model's offsets; indices are local
/// to the frame's ancestor list `anc` and packed symmetric (types.hpp).
struct FrameCache {
  explicit FrameCache(const Model& model);
  int position_order = -1;  ///< highest order of placement derivatives computed (-1: none)
  int velocity_order = -1;  ///< highest order of velocity derivatives computed (-1: none)
  std::vector<Mat3> R;      ///< world rotation of each frame
  std::vector<Vec3> p;      ///< world position of each frame origin
  std::vector<Mat3> dR, ddR, dddR;  ///< d_i R, d_ij R (packed), d_ijl R (packed)
  std::vector<Vec3> dp, ddp, dddp;
  std::vector<Vec6> V;                 ///< body velocity of each frame
  std::vector<Vec6> dV, ddV, dddV;     ///< q-derivatives of V (packed)
  std::vector<Vec6> J;                 ///< body Jacobian columns J[off + j]
  std::vector<Vec6> dJ;                ///< d_i J_j at [offJ1 + i*d + j] (compute_velocities: when it is formed)
  std::vector<Vec6> ddJ;               ///< d_ik J_j at [offJ2 + packed2(i,k)*d + j]
};

/// Computes placements and their q-derivatives up to `order` (0..3) for every
/// frame flagged need_position, or only for the frames flagged in `mask`
/// (e.g. Model::constraint_frames). q has the model's nq entries.
void compute_placements(const Model& model, FrameCache& cache, const double* q, int order,
                        const std::vector<char>* mask = nullptr);

/// Computes body velocities for frames flagged need_velocity:
///  order 0: V; order 1: + J, dV; order 2: + ddV (+ dJ when the model has body wrenches, whose
///  generalized forces' q-derivatives read it); order 3: + dJ, ddJ, dddV.
/// The Lagrangian's second derivatives need no dJ: a body Jacobian column J_j depends only on the
/// configurations below j's frame, and for a deeper configuration i the derivative is the Lie bracket
///   d_i J_j = ad_{J_j} J_i  (i > j, local indices; 0 for i <= j),  ad_{[v; w]} [v'; w'] = [w x v' + v x w'; w x w']
/// (differentiate J_j = Ad_{h^-1} xi_j, h the transforms from j's frame down, through g_i^-1 d_i g_i = xi_i).
void compute_velocities(const Model& model, FrameCache& cache, const double* q, const double* qdot, int order);

}  // namespace mc
