// Interval functions of the forced constrained DEL equations and their exact derivatives
// (see del_equations.hpp).
#include "marionette/del_equations.hpp"

namespace mc {

void load_interval(const Model& model, const VIOptions& opt, StepData& s, const double* q1, const double* q2,
                   const double* u, const double* lambda, int order) {
  const Layout z(model);
  s.q1 = Eigen::Map<const VecX>(q1, z.n);
  s.q2 = Eigen::Map<const VecX>(q2, z.n);
  s.u = Eigen::Map<const VecX>(u, z.nu);
  s.lambda = Eigen::Map<const VecX>(lambda, z.m);
  s.qbar = 0.5 * (s.q1 + s.q2);
  s.qdot = (s.q2 - s.q1) / opt.dt;
  compute_lagrangian(model, s.mid, s.qbar.data(), s.qdot.data(), order + 1, s.L);
  compute_forces(model, s.mid, s.qdot.data(), s.u.data(), order > 0 ? 1 : 0, s.F);
  compute_constraints(model, s.at1, s.q1.data(), order + 1, s.h1);
  compute_constraints(model, s.at2, s.q2.data(), order, s.h2);
  s.solved = false;
  s.have_first = false;
}

void interval_residual(const Model& model, const VIOptions& opt, const StepData& s, Eigen::Ref<VecX> a,
                       Eigen::Ref<VecX> b, Eigen::Ref<VecX> c) {
  const int nd = model.nd;
  const double dt = opt.dt;
  // D_1 L_d = dt C_1^T grad L = (dt/2) Lq - Lv,  D_2 L_d = (dt/2) Lq + Lv;  f-+ = w-+ dt F.
  a = (0.5 * dt) * s.L.Lq.head(nd) - s.L.Lv.head(nd) + (model.forcing_minus() * dt) * s.F.F.head(nd);
  if (model.nc() > 0) a.noalias() -= s.h1.Dh.leftCols(nd).transpose() * s.lambda;
  b = (0.5 * dt) * s.L.Lq.head(nd) + s.L.Lv.head(nd);
  if (model.forcing_plus() != 0.0) b.noalias() += (model.forcing_plus() * dt) * s.F.F.head(nd);
  c = s.h2.h;
}

void interval_jacobian_blocks(const Model& model, const VIOptions& opt, StepData& s) {
  const int n = model.nq(), nd = model.nd;
  const double dt = opt.dt;
  // The dynamic rows of the four slot matrices (slot_matrix's sums) in one pass over Lqq, Lqv, Lvv:
  // S_ab = P_ab + (s_b Lqv + s_a Lvq)/2, P_ab = (dt/4) Lqq + s_a s_b Lvv / dt. With f- = w- dt F(qbar, qdot, u)
  // in the slot-1 rows (D_b f- of (4.15)-(4.20)) and f+ = w+ dt F in the slot-2 rows (D_b f+ of
  // (4.21)-(4.23)): D_b (dt F) = (dt/2) Fq + s_b Fv, s_1 = -1, s_2 = +1.
  const double wm = model.forcing_minus(), wp = model.forcing_plus();
  const MatX &Lqq = s.L.Lqq, &Lqv = s.L.Lqv, &Lvv = s.L.Lvv, &Fq = s.F.Fq, &Fv = s.F.Fv;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < nd; ++i) {
      const double same = 0.25 * dt * Lqq(i, j) + Lvv(i, j) / dt, other = 0.25 * dt * Lqq(i, j) - Lvv(i, j) / dt;
      const double qv = 0.5 * Lqv(i, j), vq = 0.5 * Lqv(j, i);
      const double fq = 0.5 * dt * Fq(i, j), fv = Fv(i, j);
      s.S11(i, j) = same - qv - vq + wm * (fq - fv);
      s.S12(i, j) = other + qv - vq + wm * (fq + fv);
      s.S21(i, j) = other - qv + vq + wp * (fq - fv);
      s.S22(i, j) = same + qv + vq + wp * (fq + fv);
    }
  s.Hz.topLeftCorner(n, n).setZero();
  if (model.nc() > 0) constraint_weighted_hessian(s.h1, s.lambda.data(), s.Hz);
}

void interval_weighted_hessian(const Model& model, const VIOptions& opt, StepData& s, const VecX& alpha, const VecX& beta,
                               const double* gamma, MatX& Psi) {
  const int n = model.nq(), nu = model.nu(), m = model.nc();
  const double dt = opt.dt;
  // The Lagrangian part is dt [C1 C2]^T (L3 . eta) [C1 C2] with eta = C1 alpha + C2 beta.
  s.eta.head(n) = 0.5 * (alpha + beta);
  s.eta.tail(n) = (beta - alpha) / dt;
  s.Hz.setZero();
  lagrangian_third_contract(model, s.mid, s.L, s.eta, s.Hz);
  // The forcing: dt (w- alpha + w+ beta)^T F(qbar, qdot, u) (F is linear in qdot and u: only Fqq, Fqu).
  s.Fqq.setZero();
  s.Fqu.setZero();
  s.fvec.noalias() = model.forcing_minus() * alpha;
  if (model.forcing_plus() != 0.0) s.fvec.noalias() += model.forcing_plus() * beta;
  force_weighted_hessian(model, s.mid, s.u.data(), s.fvec, s.Fqq, s.Fqu);
  s.Hz.topLeftCorner(n, n) += s.Fqq;  // contributes dt C_a^T [[Fqq, 0], [0, 0]] C_b
  Psi.setZero();
  {
    const auto Hqq = s.Hz.topLeftCorner(n, n);
    const auto Hqv = s.Hz.topRightCorner(n, n);
    const auto Hvq = s.Hz.bottomLeftCorner(n, n);
    const auto Hvv = s.Hz.bottomRightCorner(n, n);
    MatX& blk = s.scratch;
    const int sgn[2] = {-1, 1};
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) {
        slot_matrix(dt, sgn[i], sgn[j], Hqq, Hqv, Hvq, Hvv, blk);
        Psi.block(i * n, j * n, n, n) = blk;
      }
  }
  // Force inputs: d2(c^T dt F)/dq_a du = dt * 1/2 Fqu (c = fvec).
  for (int i = 0; i < 2; ++i) {
    Psi.block(i * n, 2 * n, n, nu) = (0.5 * dt) * s.Fqu;
    Psi.block(2 * n, i * n, nu, n) = (0.5 * dt) * s.Fqu.transpose();
  }
  if (m > 0) {
    // -alpha^T Dh(q1)^T lambda and gamma^T h(q2).
    MatX& blk = s.scratch;
    blk.setZero();
    constraint_weighted_third(s.h1, s.lambda.data(), alpha, blk);
    Psi.topLeftCorner(n, n) -= blk;
    constraint_hessian_times(s.h1, alpha, s.hc);
    Psi.block(0, 2 * n + nu, n, m) -= s.hc.transpose();
    Psi.block(2 * n + nu, 0, m, n) -= s.hc;
    blk.setZero();
    constraint_weighted_hessian(s.h2, gamma, blk);
    Psi.block(n, n, n, n) += blk;
  }
}

}  // namespace mc
