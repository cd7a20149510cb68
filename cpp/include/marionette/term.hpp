// Derivatives of scalar terms (Lagrangian pieces, constraint functions) over
// a small local support of configurations, and of frame points over such a
// support. Terms keep dense local tensors: supports are the ancestor sets of
// one or two frames (thesis §2.5: exploit that a frame depends only on its
// ancestors), so s is small even when the model is large.
#pragma once

#include <vector>

#include "marionette/kinematics.hpp"

namespace mc {

/// Value and derivatives of a scalar term f(q, v) over the support configurations idx (size s), up to
/// second order and, for the q-only terms (constraints, springs), third order in tqqq. v-derivatives exist
/// when `velocity` (the mass terms, whose third derivatives lagrangian_third_contract forms contracted).
/// Index conventions: hqv(i, j) = d2f/dq_i dv_j; tqqq[(i*s + j)*s + l].
struct TermDerivs {
  std::vector<int> idx;
  int s = 0;
  bool velocity = false;
  double value = 0.0;
  VecX gq, gv;
  MatX hqq, hqv, hvv;
  std::vector<double> tqqq;
  void resize(const std::vector<int>& support, bool with_velocity);
  int at(int i, int j, int l) const { return (i * s + j) * s + l; }
};

/// Dense derivatives of a 3-vector quantity of frames over a support list.
/// d1[i], d2[i*s + j], d3[(i*s + j)*s + l].
struct VecDerivs {
  int s = 0;
  Vec3 v = Vec3::Zero();
  std::vector<Vec3> d1, d2, d3;
  void reset(int size, int order);
};

/// Adds sign * (position of `frame`) and its derivatives up to `order` to out,
/// mapping the frame's ancestor configurations into `support` (sorted).
void add_position(const Model& model, const FrameCache& cache, int frame, const std::vector<int>& support, double sign,
                  int order, VecDerivs& out);
/// Adds column `axis` of the world rotation of `frame` and its derivatives.
void add_axis(const Model& model, const FrameCache& cache, int frame, int axis, const std::vector<int>& support,
              int order, VecDerivs& out);
/// Derivatives of the squared norm s = x.x of a vector quantity x (into a
/// q-only term, replacing its contents).
void squared_norm(const VecDerivs& x, int order, TermDerivs& out);
/// Derivatives of the scalar product u.w (into a q-only term).
void dot_product(const VecDerivs& u, const VecDerivs& w, int order, TermDerivs& out);

}  // namespace mc
