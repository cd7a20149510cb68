// Constraint functions and their derivatives (see constraints.hpp).
#include "marionette/constraints.hpp"

#include <algorithm>

namespace mc {

ConstraintData::ConstraintData(const Model& model)
    : h(VecX::Zero(model.nc())), Dh(MatX::Zero(model.nc(), model.nq())) {
  for (const auto& c : model.constraints) {
    terms.emplace_back();
    terms.back().resize(c.support, false);
  }
}

void compute_constraints(const Model& model, FrameCache& cache, const double* q, int order, ConstraintData& out) {
  compute_placements(model, cache, q, order, &model.constraint_frames);
  out.order = order;
  if (order >= 1) out.Dh.setZero();
  for (int j = 0; j < model.nc(); ++j) {
    const Constraint& c = model.constraints[j];
    TermDerivs& t = out.terms[j];
    if (c.type == ConstraintType::DISTANCE) {
      out.w.reset(t.s, order);
      add_position(model, cache, c.frame1, t.idx, 1.0, order, out.w);
      add_position(model, cache, c.frame2, t.idx, -1.0, order, out.w);
      squared_norm(out.w, order, t);
      if (c.length_config >= 0) {
        const int l = static_cast<int>(std::lower_bound(t.idx.begin(), t.idx.end(), c.length_config) - t.idx.begin());
        const double L = q[c.length_config];
        t.value -= L * L;
        if (order >= 1) t.gq[l] -= 2.0 * L;
        if (order >= 2) t.hqq(l, l) -= 2.0;
      } else {
        t.value -= c.length * c.length;
      }
    } else if (c.type == ConstraintType::COUPLING) {
      // Linear: gq is constant and hqq, tqqq stay the zeros TermDerivs::resize put there.
      t.value = q[c.follower] - c.multiplier * q[c.leader] - c.offset;
      if (order >= 1) {
        const bool follower_first = c.follower < c.leader;
        t.gq[follower_first ? 0 : 1] = 1.0;
        t.gq[follower_first ? 1 : 0] = -c.multiplier;
      }
    } else {
      out.u.reset(t.s, order);
      out.w.reset(t.s, order);
      add_axis(model, cache, c.frame1, c.axis, t.idx, order, out.u);
      add_position(model, cache, c.frame2, t.idx, 1.0, order, out.w);
      add_position(model, cache, c.frame1, t.idx, -1.0, order, out.w);
      dot_product(out.u, out.w, order, t);
    }
    out.h[j] = t.value;
    if (order >= 1)
      for (int i = 0; i < t.s; ++i) out.Dh(j, t.idx[i]) = t.gq[i];
  }
}

void constraint_weighted_hessian(const ConstraintData& h, const double* weight, MatX& out) {
  for (size_t j = 0; j < h.terms.size(); ++j) {
    const TermDerivs& t = h.terms[j];
    if (weight[j] == 0.0) continue;
    for (int a = 0; a < t.s; ++a)
      for (int b = 0; b < t.s; ++b) out(t.idx[a], t.idx[b]) += weight[j] * t.hqq(a, b);
  }
}

void constraint_hessian_times(const ConstraintData& h, const Eigen::Ref<const VecX>& c, MatX& out) {
  out.setZero();
  for (size_t j = 0; j < h.terms.size(); ++j) {
    const TermDerivs& t = h.terms[j];
    for (int a = 0; a < t.s; ++a) {
      double acc = 0.0;
      for (int b = 0; b < t.s; ++b) acc += t.hqq(a, b) * c[t.idx[b]];
      out(j, t.idx[a]) = acc;
    }
  }
}

void constraint_weighted_third(const ConstraintData& h, const double* weight, const Eigen::Ref<const VecX>& c,
                               MatX& out) {
  for (size_t j = 0; j < h.terms.size(); ++j) {
    const TermDerivs& t = h.terms[j];
    if (weight[j] == 0.0) continue;
    for (int a = 0; a < t.s; ++a)
      for (int b = 0; b < t.s; ++b) {
        double acc = 0.0;
        for (int l = 0; l < t.s; ++l) acc += t.tqqq[t.at(a, b, l)] * c[t.idx[l]];
        out(t.idx[a], t.idx[b]) += weight[j] * acc;
      }
  }
}

}  // namespace mc
