// Continuous dynamics for cross-checks (see continuous.hpp).
#include "marionette/continuous.hpp"

namespace mc {

ContinuousData::ContinuousData(const Model& model)
    : cache(model), cache_h(model), L(model), F(model), h(model),
      qddot(VecX::Zero(model.nq())), lambda(VecX::Zero(model.nc())) {}

void mass_matrix(const Model& model, ContinuousData& d, const double* q, Eigen::Ref<MatX> out) {
  const VecX zero = VecX::Zero(model.nq());
  compute_lagrangian(model, d.cache, q, zero.data(), 2, d.L);
  out = d.L.Lvv;
}

void forward_dynamics(const Model& model, ContinuousData& d, const double* q, const double* qdot, const double* u,
                      const double* rhoddot) {
  const int n = model.nq(), nd = model.nd, nk = model.nk, m = model.nc();
  compute_lagrangian(model, d.cache, q, qdot, 2, d.L);
  compute_forces(model, d.cache, qdot, u, 0, d.F);
  compute_constraints(model, d.cache_h, q, 2, d.h);
  const Eigen::Map<const VecX> v(qdot, n), rdd(rhoddot, nk);
  MatX K = MatX::Zero(nd + m, nd + m);
  VecX rhs(nd + m);
  K.topLeftCorner(nd, nd) = d.L.Lvv.topLeftCorner(nd, nd);
  rhs.head(nd) = (d.L.Lq + d.F.F - d.L.Lqv.transpose() * v).head(nd) - d.L.Lvv.topRightCorner(nd, nk) * rdd;
  if (m > 0) {
    K.topRightCorner(nd, m) = -d.h.Dh.leftCols(nd).transpose();
    K.bottomLeftCorner(m, nd) = d.h.Dh.leftCols(nd);
    MatX Hv(m, n);
    constraint_hessian_times(d.h, v, Hv);
    rhs.tail(m) = -d.h.Dh.rightCols(nk) * rdd - Hv * v;
  }
  const VecX sol = K.fullPivLu().solve(rhs);
  d.qddot.head(nd) = sol.head(nd);
  d.qddot.tail(nk) = rdd;
  d.lambda = sol.tail(m);
}

}  // namespace mc
