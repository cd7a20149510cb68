// Generalized forces and their derivatives (see forces.hpp).
#include "marionette/forces.hpp"

namespace mc {

namespace {

Vec6 wrench_value(const BodyWrench& w, const double* u) {
  Vec6 W = w.constant;
  for (int k = 0; k < 6; ++k)
    if (w.input[k] >= 0) W[k] = u[w.input[k]];
  return W;
}

}  // namespace

ForceData::ForceData(const Model& model)
    : F(VecX::Zero(model.nq())),
      Fq(MatX::Zero(model.nq(), model.nq())),
      Fv(MatX::Zero(model.nq(), model.nq())),
      Fu(MatX::Zero(model.nq(), model.nu())) {}

void compute_forces(const Model& model, const FrameCache& C, const double* v, const double* u, int order,
                    ForceData& out) {
  out.F.setZero();
  if (order >= 1) {
    out.Fq.setZero();
    out.Fv.setZero();
    out.Fu.setZero();
  }
  for (const auto& d : model.dampings) {
    out.F[d.config] -= d.coefficient * v[d.config];
    if (order >= 1) out.Fv(d.config, d.config) -= d.coefficient;
  }
  for (const auto& f : model.config_forces) {
    out.F[f.config] += u[f.input];
    if (order >= 1) out.Fu(f.config, f.input) += 1.0;
  }
  for (const auto& w : model.wrenches) {
    const auto& anc = model.frames[w.frame].anc;
    const int d = static_cast<int>(anc.size());
    const Vec6 W = wrench_value(w, u);
    const Vec6* J = &C.J[model.off1[w.frame]];
    for (int a = 0; a < d; ++a) out.F[anc[a]] += J[a].dot(W);
    if (order < 1) continue;
    const Vec6* dJ = &C.dJ[model.offJ1[w.frame]];
    for (int a = 0; a < d; ++a) {
      for (int b = 0; b < d; ++b) out.Fq(anc[a], anc[b]) += dJ[b * d + a].dot(W);
      for (int k = 0; k < 6; ++k)
        if (w.input[k] >= 0) out.Fu(anc[a], w.input[k]) += J[a][k];
    }
  }
}

void force_weighted_hessian(const Model& model, const FrameCache& C, const double* u, const VecX& c, MatX& qq,
                            MatX& qu) {
  for (const auto& w : model.wrenches) {
    const auto& anc = model.frames[w.frame].anc;
    const int d = static_cast<int>(anc.size());
    const Vec6 W = wrench_value(w, u);
    // cJ_x = sum_a c_a d_x J_a: the covector-weighted Jacobian derivatives.
    const Vec6* dJ = &C.dJ[model.offJ1[w.frame]];
    const Vec6* ddJ = &C.ddJ[model.offJ2[w.frame]];
    for (int b = 0; b < d; ++b) {
      Vec6 cdJ = Vec6::Zero();
      for (int a = 0; a < d; ++a) cdJ += c[anc[a]] * dJ[b * d + a];
      for (int k = 0; k < 6; ++k)
        if (w.input[k] >= 0) qu(anc[b], w.input[k]) += cdJ[k];
      for (int e = 0; e < d; ++e) {
        Vec6 cddJ = Vec6::Zero();
        for (int a = 0; a < d; ++a) cddJ += c[anc[a]] * ddJ[sym2(b, e) * d + a];
        qq(anc[b], anc[e]) += cddJ.dot(W);
      }
    }
  }
}

void force_second_directional(const Model& model, const FrameCache& C, const double* u,
                              const Eigen::Ref<const VecX>& dq, const Eigen::Ref<const VecX>& du, Eigen::Ref<VecX> out) {
  out.setZero();
  for (const auto& w : model.wrenches) {
    const auto& anc = model.frames[w.frame].anc;
    const int d = static_cast<int>(anc.size());
    const Vec6 W = wrench_value(w, u);
    Vec6 dW = Vec6::Zero();
    for (int k = 0; k < 6; ++k)
      if (w.input[k] >= 0) dW[k] = du[w.input[k]];
    const Vec6* dJ = &C.dJ[model.offJ1[w.frame]];
    const Vec6* ddJ = &C.ddJ[model.offJ2[w.frame]];
    for (int a = 0; a < d; ++a) {
      double acc = 0.0;
      for (int b = 0; b < d; ++b) {
        acc += 2.0 * dJ[b * d + a].dot(dW) * dq[anc[b]];
        for (int e = 0; e < d; ++e) acc += ddJ[sym2(b, e) * d + a].dot(W) * dq[anc[b]] * dq[anc[e]];
      }
      out[anc[a]] += acc;
    }
  }
}

}  // namespace mc
