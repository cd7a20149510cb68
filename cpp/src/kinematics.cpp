// Tree recursion for placements and body velocities with derivatives
// (thesis ch. 2; see kinematics.hpp for the equations).
#include "marionette/kinematics.hpp"

#include <cmath>

namespace mc {

namespace {

/// The local transform g_k(x) of one frame and its x-derivatives of order m:
/// rotation part R^(m), translation part p^(m) and the adjoint action
/// Ad^(m)_{g^{-1}} on a body twist [v; w] (thesis §2.3: rotation derivatives
/// cycle, translation derivatives vanish from the second on).
struct LocalTransform {
  TransformType type;
  int a = 0, b = 1, e = 2;  // axis and the two others in cyclic order
  double x = 0.0;
  const Mat3* R0 = nullptr;
  const Vec3* p0 = nullptr;
  bool identity_rotation = false;  // constant offsets are mostly pure translations
  double c[4], s[4];

  // A constant primitive is stored as its constant offset (R0, p0).
  LocalTransform(const Frame& f, const double* q) : type(f.driven() ? f.type : TransformType::CONST) {
    if (type == TransformType::CONST) {
      R0 = &f.R0;
      p0 = &f.p0;
      identity_rotation = f.R0 == Mat3::Identity();
      return;
    }
    a = f.axis();
    b = (a + 1) % 3;
    e = (a + 2) % 3;
    x = q[f.config];
    const double cx = std::cos(x), sx = std::sin(x);
    // cos(x + m pi/2), sin(x + m pi/2)
    c[0] = cx; s[0] = sx;
    c[1] = -sx; s[1] = cx;
    c[2] = -cx; s[2] = -sx;
    c[3] = sx; s[3] = -cx;
  }
  bool rotation() const { return type == TransformType::RX || type == TransformType::RY || type == TransformType::RZ; }
  bool translation() const { return type == TransformType::TX || type == TransformType::TY || type == TransformType::TZ; }

  /// out = A * R^(m)
  void rot(int m, const Mat3& A, Mat3& out) const {
    if (type == TransformType::CONST) {
      if (m > 0) out.setZero();
      else if (identity_rotation) out = A;
      else out.noalias() = A * (*R0);
      return;
    }
    if (translation()) {
      if (m == 0) out = A;
      else out.setZero();
      return;
    }
    const double cm = c[m], sm = s[m];
    out.col(a) = (m == 0) ? Vec3(A.col(a)) : Vec3::Zero();
    out.col(b) = cm * A.col(b) + sm * A.col(e);
    out.col(e) = -sm * A.col(b) + cm * A.col(e);
  }
  bool rot_zero(int m) const { return m > 0 && !rotation(); }

  /// p^(m) (zero vector when it vanishes)
  bool trans_zero(int m) const {
    if (type == TransformType::CONST) return m > 0 || p0->isZero(0.0);
    if (translation()) return m > 1 || (m == 0 && x == 0.0);
    return true;
  }
  Vec3 trans(int m) const {
    if (type == TransformType::CONST) return *p0;
    Vec3 r = Vec3::Zero();
    r[a] = (m == 0) ? x : 1.0;
    return r;
  }

  /// Rotates w by (R^(m))^T.
  Vec3 rotT(int m, const Vec3& w) const {
    Vec3 r;
    r[a] = (m == 0) ? w[a] : 0.0;
    r[b] = c[m] * w[b] + s[m] * w[e];
    r[e] = -s[m] * w[b] + c[m] * w[e];
    return r;
  }

  /// out = Ad^(m)_{g^{-1}} in, where Ad_{g^{-1}}[v; w] = [R^T (v + w x p); R^T w].
  void ad(int m, const Vec6& in, Vec6& out) const {
    if (type == TransformType::CONST) {
      if (m > 0) { out.setZero(); return; }
      const Vec3 w = in.tail<3>();
      if (identity_rotation) {
        out.head<3>() = in.head<3>() + w.cross(*p0);
        out.tail<3>() = w;
        return;
      }
      out.head<3>().noalias() = R0->transpose() * (in.head<3>() + w.cross(*p0));
      out.tail<3>().noalias() = R0->transpose() * w;
      return;
    }
    if (translation()) {
      // w x (x e_a) has components (a: 0, b: x w_e, e: -x w_b).
      if (m == 0) {
        out = in;
        out[b] += x * in[3 + e];
        out[e] -= x * in[3 + b];
      } else if (m == 1) {
        out.setZero();
        out[b] = in[3 + e];
        out[e] = -in[3 + b];
      } else {
        out.setZero();
      }
      return;
    }
    out.head<3>() = rotT(m, in.head<3>());
    out.tail<3>() = rotT(m, in.tail<3>());
  }
  bool ad_zero(int m) const {
    if (type == TransformType::CONST) return m > 0;
    if (translation()) return m > 1;
    return false;
  }
  Vec6 twist() const {
    Vec6 xi = Vec6::Zero();
    xi[rotation() ? 3 + a : a] = 1.0;
    return xi;
  }
};

}  // namespace

FrameCache::FrameCache(const Model& m)
    : R(m.frames.size(), Mat3::Identity()),
      p(m.frames.size(), Vec3::Zero()),
      dR(m.size1), ddR(m.size2), dddR(m.size3),
      dp(m.size1), ddp(m.size2), dddp(m.size3),
      V(m.frames.size(), Vec6::Zero()),
      dV(m.size1), ddV(m.size2), dddV(m.size3),
      J(m.size1), dJ(m.sizeJ1), ddJ(m.sizeJ2) {}

void compute_placements(const Model& model, FrameCache& C, const double* q, int order, const std::vector<char>* mask) {
  const int nf = static_cast<int>(model.frames.size());
  for (int f = 1; f < nf; ++f) {
    const Frame& fr = model.frames[f];
    if (mask ? !(*mask)[f] : !fr.need_position) continue;
    const int par = fr.parent;
    const LocalTransform L(fr, q);
    const int dp_ = static_cast<int>(model.frames[par].anc.size());
    const bool driven = fr.driven();
    const int c = dp_;  // local index of the own configuration
    const bool t0 = !L.trans_zero(0);
    const Vec3 p0 = t0 ? L.trans(0) : Vec3::Zero();
    L.rot(0, C.R[par], C.R[f]);
    C.p[f] = C.p[par];
    if (t0) C.p[f].noalias() += C.R[par] * p0;
    if (order < 1) continue;

    // Parent-range entries transform with the constant local transform; the
    // entries involving the own configuration use its derivatives.
    auto propagate = [&](const Mat3* Rp, const Vec3* pp, Mat3* Rc, Vec3* pc, int count) {
      for (int i = 0; i < count; ++i) {
        L.rot(0, Rp[i], Rc[i]);
        pc[i] = pp[i];
        if (t0) pc[i].noalias() += Rp[i] * p0;
      }
    };
    auto own = [&](int m, const Mat3& Rp, Mat3& Rc, Vec3& pc) {
      L.rot(m, Rp, Rc);
      if (L.trans_zero(m)) pc.setZero();
      else pc.noalias() = Rp * L.trans(m);
    };
    {
      const Mat3* Rp = &C.dR[model.off1[par]];
      const Vec3* pp = &C.dp[model.off1[par]];
      Mat3* Rc = &C.dR[model.off1[f]];
      Vec3* pc = &C.dp[model.off1[f]];
      propagate(Rp, pp, Rc, pc, dp_);
      if (driven) own(1, C.R[par], Rc[c], pc[c]);
    }
    if (order < 2) continue;
    {
      const Mat3* Rp = &C.ddR[model.off2[par]];
      const Vec3* pp = &C.ddp[model.off2[par]];
      Mat3* Rc = &C.ddR[model.off2[f]];
      Vec3* pc = &C.ddp[model.off2[f]];
      propagate(Rp, pp, Rc, pc, packed2_size(dp_));
      if (driven) {
        const Mat3* R1 = &C.dR[model.off1[par]];
        for (int i = 0; i < c; ++i) own(1, R1[i], Rc[packed2(i, c)], pc[packed2(i, c)]);
        own(2, C.R[par], Rc[packed2(c, c)], pc[packed2(c, c)]);
      }
    }
    if (order < 3) continue;
    {
      const Mat3* Rp = &C.dddR[model.off3[par]];
      const Vec3* pp = &C.dddp[model.off3[par]];
      Mat3* Rc = &C.dddR[model.off3[f]];
      Vec3* pc = &C.dddp[model.off3[f]];
      propagate(Rp, pp, Rc, pc, packed3_size(dp_));
      if (driven) {
        const Mat3* R1 = &C.dR[model.off1[par]];
        const Mat3* R2 = &C.ddR[model.off2[par]];
        for (int j = 0; j < c; ++j)
          for (int i = 0; i <= j; ++i) own(1, R2[packed2(i, j)], Rc[packed3(i, j, c)], pc[packed3(i, j, c)]);
        for (int i = 0; i < c; ++i) own(2, R1[i], Rc[packed3(i, c, c)], pc[packed3(i, c, c)]);
        own(3, C.R[par], Rc[packed3(c, c, c)], pc[packed3(c, c, c)]);
      }
    }
  }
  C.position_order = order;
}

void compute_velocities(const Model& model, FrameCache& C, const double* q, const double* qdot, int order) {
  const int nf = static_cast<int>(model.frames.size());
  for (int f = 1; f < nf; ++f) {
    const Frame& fr = model.frames[f];
    if (!fr.need_velocity) continue;
    const int par = fr.parent;
    const LocalTransform L(fr, q);
    const int dp_ = static_cast<int>(model.frames[par].anc.size());
    const int d = static_cast<int>(fr.anc.size());
    const bool driven = fr.driven();
    const int c = dp_;
    L.ad(0, C.V[par], C.V[f]);
    if (driven) C.V[f] += L.twist() * qdot[fr.config];
    if (order < 1) continue;

    auto apply = [&](int m, const Vec6& in, Vec6& out) {
      if (L.ad_zero(m)) out.setZero();
      else L.ad(m, in, out);
    };
    {
      const Vec6* Jp = &C.J[model.off1[par]];
      Vec6* Jc = &C.J[model.off1[f]];
      for (int j = 0; j < dp_; ++j) L.ad(0, Jp[j], Jc[j]);
      if (driven) Jc[c] = L.twist();
      const Vec6* Vp = &C.dV[model.off1[par]];
      Vec6* Vc = &C.dV[model.off1[f]];
      for (int i = 0; i < dp_; ++i) L.ad(0, Vp[i], Vc[i]);
      if (driven) apply(1, C.V[par], Vc[c]);
    }
    if (order < 2) continue;
    {
      const Vec6* Jp = &C.dJ[model.offJ1[par]];
      const Vec6* J0 = &C.J[model.off1[par]];
      Vec6* Jc = &C.dJ[model.offJ1[f]];
      for (int i = 0; i < dp_; ++i)
        for (int j = 0; j < dp_; ++j) L.ad(0, Jp[i * dp_ + j], Jc[i * d + j]);
      if (driven) {
        for (int j = 0; j < dp_; ++j) apply(1, J0[j], Jc[c * d + j]);
        for (int i = 0; i < d; ++i) Jc[i * d + c].setZero();
      }
      const Vec6* Vp = &C.ddV[model.off2[par]];
      const Vec6* V1 = &C.dV[model.off1[par]];
      Vec6* Vc = &C.ddV[model.off2[f]];
      const int n2 = packed2_size(dp_);
      for (int i = 0; i < n2; ++i) L.ad(0, Vp[i], Vc[i]);
      if (driven) {
        for (int i = 0; i < c; ++i) apply(1, V1[i], Vc[packed2(i, c)]);
        apply(2, C.V[par], Vc[packed2(c, c)]);
      }
    }
    if (order < 3) continue;
    {
      const Vec6* Jp = &C.ddJ[model.offJ2[par]];
      const Vec6* J1 = &C.dJ[model.offJ1[par]];
      const Vec6* J0 = &C.J[model.off1[par]];
      Vec6* Jc = &C.ddJ[model.offJ2[f]];
      const int n2p = packed2_size(dp_);
      for (int ik = 0; ik < n2p; ++ik)
        for (int j = 0; j < dp_; ++j) L.ad(0, Jp[ik * dp_ + j], Jc[ik * d + j]);
      if (driven) {
        for (int i = 0; i < c; ++i)
          for (int j = 0; j < dp_; ++j) apply(1, J1[i * dp_ + j], Jc[packed2(i, c) * d + j]);
        for (int j = 0; j < dp_; ++j) apply(2, J0[j], Jc[packed2(c, c) * d + j]);
        const int n2 = packed2_size(d);
        for (int ik = 0; ik < n2; ++ik) Jc[ik * d + c].setZero();
      }
      const Vec6* Vp = &C.dddV[model.off3[par]];
      const Vec6* V1 = &C.dV[model.off1[par]];
      const Vec6* V2 = &C.ddV[model.off2[par]];
      Vec6* Vc = &C.dddV[model.off3[f]];
      const int n3 = packed3_size(dp_);
      for (int i = 0; i < n3; ++i) L.ad(0, Vp[i], Vc[i]);
      if (driven) {
        for (int j = 0; j < c; ++j)
          for (int i = 0; i <= j; ++i) apply(1, V2[packed2(i, j)], Vc[packed3(i, j, c)]);
        for (int i = 0; i < c; ++i) apply(2, V1[i], Vc[packed3(i, c, c)]);
        apply(3, C.V[par], Vc[packed3(c, c, c)]);
      }
    }
  }
  C.velocity_order = order;
}

}  // namespace mc
