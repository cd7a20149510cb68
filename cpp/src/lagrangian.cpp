// Lagrangian terms and their derivatives (see lagrangian.hpp).
#include "marionette/lagrangian.hpp"

#include <algorithm>
#include <cmath>
#include <set>

namespace mc {

namespace {

inline double dotM(const Vec6& Ma, const Vec6& b) { return Ma.dot(b); }

/// Kinetic energy plus gravity of one mass frame over its ancestor configurations, to second order
/// (the third derivatives: mass_third_contract).
void mass_term(const Model& model, const FrameCache& C, int f, int order, TermDerivs& t) {
  const Frame& fr = model.frames[f];
  const int d = t.s;
  const Vec6& M = fr.inertia;
  const double m = M[0];
  const Vec3 mg = m * model.gravity;
  const Vec6 V = C.V[f];
  const Vec6 MV = M.cwiseProduct(V);
  const int o1 = model.off1[f], o2 = model.off2[f];
  const Vec6* J = &C.J[o1];
  const Vec6* dV = &C.dV[o1];
  const Vec6* ddV = &C.ddV[o2];
  t.value = 0.5 * V.dot(MV) + mg.dot(C.p[f]);
  if (order < 1) return;
  // Gravity's derivatives from the body Jacobian (lagrangian.hpp): m g . d_i p = gb . J_i^v and
  // m g . d_ij p = gb . (J_i^w x J_j^v + d_i J_j^v), gb = R^T m g.
  const Vec3 gb = C.R[f].transpose() * mg;
  Vec6 MdV[64], MJ[64];
  for (int i = 0; i < d; ++i) {
    MdV[i] = M.cwiseProduct(dV[i]);
    MJ[i] = M.cwiseProduct(J[i]);
    t.gq[i] = MV.dot(dV[i]) + gb.dot(J[i].head<3>());
    t.gv[i] = MV.dot(J[i]);
  }
  if (order < 2) return;
  // d_i J_j = ad_{J_j} J_i for i > j, 0 for i <= j (kinematics.hpp), so for i <= j gravity's
  // gb . (J_i^w x J_j^v + d_i J_j^v) = gb . (J_i^w x J_j^v), and MV . d_i J_j = Aj[j] . J_i (i > j) with
  // Aj = [m_v x w_j; m_v x v_j + m_w x w_j], MV = [m_v; m_w], J_j = [v_j; w_j] (the triple products of
  // MV . ad_{J_j} J_i = m_v . (w_j x v_i + v_j x w_i) + m_w . (w_j x w_i) rearranged).
  const Vec3 mv = MV.head<3>(), mw = MV.tail<3>();
  Vec6 Aj[64];
  for (int j = 0; j < d; ++j) {
    const Vec3 vj = J[j].head<3>(), wj = J[j].tail<3>();
    Aj[j].head<3>() = mv.cross(wj);
    Aj[j].tail<3>() = mv.cross(vj) + mw.cross(wj);
  }
  for (int i = 0; i < d; ++i) {
    const Vec3 wi = J[i].tail<3>();
    for (int j = i; j < d; ++j) {
      const int ij = packed2(i, j);
      const double h = MdV[i].dot(dV[j]) + MV.dot(ddV[ij]) + gb.dot(wi.cross(J[j].head<3>()));
      t.hqq(i, j) = h;
      t.hqq(j, i) = h;
      const double w = MJ[i].dot(J[j]);
      t.hvv(i, j) = w;
      t.hvv(j, i) = w;
    }
    for (int j = 0; j < d; ++j) t.hqv(i, j) = MdV[i].dot(J[j]) + (i > j ? Aj[j].dot(J[i]) : 0.0);
  }
  // Third order: never as tensors; lagrangian_third_contract contracts the kinematic derivatives directly.
}

/// out += sum_l eta_l d3T/dz dz dz_l of the mass term of frame f (z = (q, v), local support t.idx, eq / ev: eta's q and v
/// entries on it) straight from the kinematic derivatives of the third-order cache C, without forming the
/// tensors. With M d_ab V = MddV_ab, the third derivatives (as the tensors were formed before) are
///   T_qqq(i,j,l) = MddV_ij.dV_l + MddV_il.dV_j + MddV_jl.dV_i + MV.dddV_ijl + m g.dddp_ijl,
///   T_qqv(i,j,l) = MdV_j.d_iJ_l + MdV_i.d_jJ_l + MJ_l.ddV_ij + MV.d_ijJ_l,
///   T_qvv(i,j,l) = MJ_j.d_iJ_l + MJ_l.d_iJ_j,
/// and their contractions group into sums over l formed once per index (e = sum eq_l dV_l, a_i = sum eq_l
/// MddV_il, g_i = sum ev_l d_iJ_l, h_j = sum eq_l d_lJ_j, mJ = sum ev_l MJ_l): only MV.dddV + m g.dddp (per
/// sorted triple) and MV.d_ijJ_l (per i <= j and l) remain cubic in the support, a dot product each.
void mass_third_contract(const Model& model, const FrameCache& C, int f, const TermDerivs& t, const double* eq,
                         const double* ev, std::vector<double>& w3, std::vector<double>& wr, MatX& out) {
  const int n = model.nq(), d = t.s;
  const Frame& fr = model.frames[f];
  const Vec6& M = fr.inertia;
  const Vec3 mg = M[0] * model.gravity;
  const Vec6 MV = M.cwiseProduct(C.V[f]);
  const int o1 = model.off1[f], o2 = model.off2[f], o3 = model.off3[f], j1 = model.offJ1[f], j2 = model.offJ2[f];
  const Vec6* J = &C.J[o1];
  const Vec6* dV = &C.dV[o1];
  const Vec6* ddV = &C.ddV[o2];
  const Vec6* dddV = &C.dddV[o3];
  const Vec3* dddp = &C.dddp[o3];
  const Vec6* dJ = &C.dJ[j1];
  const Vec6* ddJ = &C.ddJ[j2];
  Vec6 e = Vec6::Zero(), mJ = Vec6::Zero(), a[64], ap[64], g[64], h[64], MdV[64], MJ[64];
  for (int i = 0; i < d; ++i) {
    MdV[i] = M.cwiseProduct(dV[i]);
    MJ[i] = M.cwiseProduct(J[i]);
    e += eq[i] * dV[i];
    mJ += ev[i] * MJ[i];
    ap[i].setZero();
    g[i].setZero();
    h[i].setZero();
    for (int l = 0; l < d; ++l) {
      ap[i] += eq[l] * ddV[sym2(i, l)];
      g[i] += ev[l] * dJ[i * d + l];
      h[i] += eq[l] * dJ[l * d + i];
    }
    a[i] = M.cwiseProduct(ap[i]);
  }
  const Vec6 Me = M.cwiseProduct(e);
  // s3 per sorted triple, r(ij, l) = MV.d_ijJ_l per sorted pair and l.
  w3.resize(packed3_size(d));
  for (int l = 0; l < d; ++l)
    for (int j = 0; j <= l; ++j)
      for (int i = 0; i <= j; ++i) {
        const int k = packed3(i, j, l);
        w3[k] = MV.dot(dddV[k]) + mg.dot(dddp[k]);
      }
  wr.resize(static_cast<size_t>(packed2_size(d)) * d);
  for (int k = 0; k < packed2_size(d) * d; ++k) wr[k] = MV.dot(ddJ[k]);
  for (int i = 0; i < d; ++i) {
    const int gi = t.idx[i];
    for (int j = 0; j < d; ++j) {
      const int gj = t.idx[j];
      const int ij = sym2(i, j);
      double qq = 0.0, qv = 0.0;
      if (i <= j) {
        qq = M.cwiseProduct(ddV[ij]).dot(e) + a[i].dot(dV[j]) + a[j].dot(dV[i]) + MdV[j].dot(g[i]) + MdV[i].dot(g[j]) +
             mJ.dot(ddV[ij]);
        for (int l = 0; l < d; ++l) qq += eq[l] * w3[sym3(i, j, l)] + ev[l] * wr[ij * d + l];
        out(gi, gj) += qq;
        if (i != j) out(gj, gi) += qq;
      }
      qv = Me.dot(dJ[i * d + j]) + MdV[i].dot(h[j]) + MJ[j].dot(ap[i]) + MJ[j].dot(g[i]) + mJ.dot(dJ[i * d + j]);
      for (int l = 0; l < d; ++l) qv += eq[l] * wr[sym2(i, l) * d + j];
      out(gi, n + gj) += qv;
      out(n + gj, gi) += qv;
      out(n + gi, n + gj) += MJ[i].dot(h[j]) + MJ[j].dot(h[i]);
    }
  }
}

/// -V of a linear spring V = phi(s), s = |p1 - p2|^2, phi = 1/2 k (sqrt(s) - x0)^2.
void spring_term(const Model& model, const FrameCache& C, const LinearSpring& sp, int order, VecDerivs& work,
                 TermDerivs& t) {
  work.reset(t.s, order);
  add_position(model, C, sp.frame1, t.idx, 1.0, order, work);
  add_position(model, C, sp.frame2, t.idx, -1.0, order, work);
  squared_norm(work, order, t);
  const double s = t.value, k = sp.stiffness, x0 = sp.rest_length;
  const double r = std::sqrt(s);
  // phi and its derivatives in s; with x0 = 0 phi = k s / 2 is smooth everywhere.
  const double phi = 0.5 * k * (r - x0) * (r - x0);
  const double p1 = 0.5 * k * (1.0 - x0 / r);
  const double p2 = 0.25 * k * x0 / (s * r);
  const double p3 = -0.375 * k * x0 / (s * s * r);
  const int n = t.s;
  // Chain rule for -phi(s(q)); overwrite in place from highest order down.
  if (order >= 3)
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        for (int l = 0; l < n; ++l) {
          double& v = t.tqqq[t.at(i, j, l)];
          v = -(p3 * t.gq[i] * t.gq[j] * t.gq[l] +
                p2 * (t.hqq(i, j) * t.gq[l] + t.hqq(i, l) * t.gq[j] + t.hqq(j, l) * t.gq[i]) + p1 * v);
        }
  if (order >= 2) t.hqq = -(p2 * t.gq * t.gq.transpose() + p1 * t.hqq);
  if (order >= 1) t.gq = -p1 * t.gq;
  t.value = -phi;
}

}  // namespace

LagrangianData::LagrangianData(const Model& model)
    : Lq(VecX::Zero(model.nq())),
      Lv(VecX::Zero(model.nq())),
      Lqq(MatX::Zero(model.nq(), model.nq())),
      Lqv(MatX::Zero(model.nq(), model.nq())),
      Lvv(MatX::Zero(model.nq(), model.nq())) {
  int deepest = 0;
  for (int f : model.mass_frames) {
    deepest = std::max(deepest, static_cast<int>(model.frames[f].anc.size()));
    terms.emplace_back();
    terms.back().resize(model.frames[f].anc, true);
  }
  for (const auto& sp : model.linear_springs) {
    std::set<int> sup(model.frames[sp.frame1].anc.begin(), model.frames[sp.frame1].anc.end());
    sup.insert(model.frames[sp.frame2].anc.begin(), model.frames[sp.frame2].anc.end());
    terms.emplace_back();
    terms.back().resize(std::vector<int>(sup.begin(), sup.end()), false);
  }
  if (deepest > 64) throw ModelError("a mass frame depends on more than 64 configurations");
  w3.reserve(packed3_size(deepest));
  wr.reserve(static_cast<size_t>(packed2_size(deepest)) * deepest);
}

void compute_lagrangian(const Model& model, FrameCache& cache, const double* q, const double* v, int order,
                        LagrangianData& out) {
  // Placements: to third order for the third derivatives of gravity; below that the springs' alone,
  // gravity's first and second derivatives coming from the body Jacobians (mass_term).
  if (order >= 3) {
    compute_placements(model, cache, q, order, &model.lagrangian_frames);
  } else {
    compute_placements(model, cache, q, 0, &model.lagrangian_frames);
    if (order >= 1 && !model.linear_springs.empty()) compute_placements(model, cache, q, order, &model.spring_frames);
  }
  compute_velocities(model, cache, q, v, order);
  out.order = order;
  out.value = 0.0;
  if (order >= 1) { out.Lq.setZero(); out.Lv.setZero(); }
  if (order >= 2) { out.Lqq.setZero(); out.Lqv.setZero(); out.Lvv.setZero(); }
  const int nm = static_cast<int>(model.mass_frames.size());
  for (size_t k = 0; k < out.terms.size(); ++k) {
    TermDerivs& t = out.terms[k];
    if (static_cast<int>(k) < nm) mass_term(model, cache, model.mass_frames[k], order, t);
    else spring_term(model, cache, model.linear_springs[k - nm], order, out.work, t);
    out.value += t.value;
    for (int i = 0; i < t.s && order >= 1; ++i) {
      const int gi = t.idx[i];
      out.Lq[gi] += t.gq[i];
      if (t.velocity) out.Lv[gi] += t.gv[i];
      if (order < 2) continue;
      for (int j = 0; j < t.s; ++j) {
        const int gj = t.idx[j];
        out.Lqq(gi, gj) += t.hqq(i, j);
        if (t.velocity) {
          out.Lqv(gi, gj) += t.hqv(i, j);
          out.Lvv(gi, gj) += t.hvv(i, j);
        }
      }
    }
  }
  for (const auto& cs : model.config_springs) {
    const double e = q[cs.config] - cs.neutral;
    out.value -= 0.5 * cs.stiffness * e * e;
    if (order >= 1) out.Lq[cs.config] -= cs.stiffness * e;
    if (order >= 2) out.Lqq(cs.config, cs.config) -= cs.stiffness;
  }
}

void lagrangian_third_contract(const Model& model, const FrameCache& cache, LagrangianData& L, const VecX& eta,
                               MatX& out) {
  const int n = model.nq();
  const int nm = static_cast<int>(model.mass_frames.size());
  for (size_t k = 0; k < L.terms.size(); ++k) {
    const TermDerivs& t = L.terms[k];
    const int s = t.s;
    double eq[128], ev[128];
    for (int i = 0; i < s; ++i) {
      eq[i] = eta[t.idx[i]];
      ev[i] = eta[n + t.idx[i]];
    }
    if (static_cast<int>(k) < nm) {
      mass_third_contract(model, cache, model.mass_frames[k], t, eq, ev, L.w3, L.wr, out);
      continue;
    }
    // A spring: q only, its tensor from spring_term.
    for (int i = 0; i < s; ++i)
      for (int j = 0; j < s; ++j) {
        double qq = 0.0;
        for (int l = 0; l < s; ++l) qq += eq[l] * t.tqqq[t.at(i, j, l)];
        out(t.idx[i], t.idx[j]) += qq;
      }
  }
}

}  // namespace mc
