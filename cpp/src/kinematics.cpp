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
///
/// Every operation acts on a contiguous run of derivative entries, so the kind
/// of transform is dispatched once per run and the loops stay branch-free (the
/// packed layouts of types.hpp make every run of the recursion contiguous).
class LocalTransform {
 public:
  // A constant primitive is stored as its constant offset (R0, p0).
  LocalTransform(const Frame& f, const double* q) {
    if (!f.driven()) {
      kind_ = f.R0 == Mat3::Identity() ? Kind::CONST_TRANSLATION : Kind::CONST_GENERAL;
      R0_ = &f.R0;
      p0_ = f.p0;
      return;
    }
    kind_ = f.is_rotation() ? Kind::ROTATION : Kind::TRANSLATION;
    a_ = f.axis();
    b_ = (a_ + 1) % 3;
    e_ = (a_ + 2) % 3;
    x_ = q[f.config];
    if (kind_ == Kind::ROTATION) {
      const double cx = std::cos(x_), sx = std::sin(x_);
      // cos(x + m pi/2), sin(x + m pi/2)
      c_[0] = cx; s_[0] = sx;
      c_[1] = -sx; s_[1] = cx;
      c_[2] = -cx; s_[2] = -sx;
      c_[3] = sx; s_[3] = -cx;
    }
  }

  /// Whether Ad^(m) (and with it R^(m) and p^(m)) vanishes identically.
  bool zero(int m) const {
    switch (kind_) {
      case Kind::ROTATION: return false;
      case Kind::TRANSLATION: return m > 1;
      default: return m > 0;
    }
  }

  /// The body twist xi of the joint (dV / dqdot of the own configuration).
  Vec6 twist() const {
    Vec6 xi = Vec6::Zero();
    xi[kind_ == Kind::ROTATION ? 3 + a_ : a_] = 1.0;
    return xi;
  }

  /// out[i] = Ad^(m)_{g^{-1}} in[i], i < count, with Ad_{g^{-1}}[v; w] = [R^T (v + w x p); R^T w].
  void ad(int m, const Vec6* in, Vec6* out, int count) const {
    if (count <= 0) return;
    if (zero(m)) {
      for (int i = 0; i < count; ++i) out[i].setZero();
      return;
    }
    switch (kind_) {
      case Kind::CONST_TRANSLATION: {
        const double p0 = p0_[0], p1 = p0_[1], p2 = p0_[2];
        for (int i = 0; i < count; ++i) {
          const double* x = in[i].data();
          double* y = out[i].data();
          const double w0 = x[3], w1 = x[4], w2 = x[5];
          y[0] = x[0] + (w1 * p2 - w2 * p1);
          y[1] = x[1] + (w2 * p0 - w0 * p2);
          y[2] = x[2] + (w0 * p1 - w1 * p0);
          y[3] = w0;
          y[4] = w1;
          y[5] = w2;
        }
        return;
      }
      case Kind::CONST_GENERAL: {
        const Mat3 Rt = R0_->transpose();
        for (int i = 0; i < count; ++i) {
          const Vec3 w = in[i].tail<3>();
          out[i].head<3>().noalias() = Rt * (in[i].head<3>() + w.cross(p0_));
          out[i].tail<3>().noalias() = Rt * w;
        }
        return;
      }
      case Kind::TRANSLATION: {
        // w x (x e_a) has components (a: 0, b: x w_e, e: -x w_b); its x-derivative drops the x.
        const int a = a_, b = b_, e = e_;
        if (m == 0) {
          const double xv = x_;
          for (int i = 0; i < count; ++i) {
            const double* x = in[i].data();
            double* y = out[i].data();
            for (int j = 0; j < 6; ++j) y[j] = x[j];
            y[b] += xv * x[3 + e];
            y[e] -= xv * x[3 + b];
          }
        } else {
          for (int i = 0; i < count; ++i) {
            const double* x = in[i].data();
            double* y = out[i].data();
            y[a] = 0.0;
            y[b] = x[3 + e];
            y[e] = -x[3 + b];
            y[3] = y[4] = y[5] = 0.0;
          }
        }
        return;
      }
      case Kind::ROTATION: {
        // Both halves rotate by (R^(m))^T; the axis component survives only for m = 0.
        const int a = a_, b = b_, e = e_;
        const double cm = c_[m], sm = s_[m], ka = m == 0 ? 1.0 : 0.0;
        for (int i = 0; i < count; ++i) {
          const double* x = in[i].data();
          double* y = out[i].data();
          const double vb = x[b], ve = x[e], wb = x[3 + b], we = x[3 + e];
          y[a] = ka * x[a];
          y[b] = cm * vb + sm * ve;
          y[e] = -sm * vb + cm * ve;
          y[3 + a] = ka * x[3 + a];
          y[3 + b] = cm * wb + sm * we;
          y[3 + e] = -sm * wb + cm * we;
        }
        return;
      }
    }
  }

  /// Rc[i] = Rp[i] R^(m) and pc[i] = [m = 0] pp[i] + Rp[i] p^(m), i < count: the entries
  /// d_I d_x^m g of g_{s,k} = g_{s,par} g_k(x) from the parent's d_I g_{s,par}.
  void place(int m, const Mat3* Rp, const Vec3* pp, Mat3* Rc, Vec3* pc, int count) const {
    if (count <= 0) return;
    if (zero(m)) {
      for (int i = 0; i < count; ++i) {
        Rc[i].setZero();
        pc[i].setZero();
      }
      return;
    }
    switch (kind_) {
      case Kind::CONST_TRANSLATION:
        for (int i = 0; i < count; ++i) {
          Rc[i] = Rp[i];
          pc[i] = pp[i];
          pc[i].noalias() += Rp[i] * p0_;
        }
        return;
      case Kind::CONST_GENERAL:
        for (int i = 0; i < count; ++i) {
          Rc[i].noalias() = Rp[i] * (*R0_);
          pc[i] = pp[i];
          pc[i].noalias() += Rp[i] * p0_;
        }
        return;
      case Kind::TRANSLATION:
        // p = x e_a: p^(0) = x e_a, p^(1) = e_a; R^(m) = [m = 0] I.
        for (int i = 0; i < count; ++i) {
          if (m == 0) {
            Rc[i] = Rp[i];
            pc[i] = pp[i] + x_ * Rp[i].col(a_);
          } else {
            Rc[i].setZero();
            pc[i] = Rp[i].col(a_);
          }
        }
        return;
      case Kind::ROTATION: {
        const double cm = c_[m], sm = s_[m];
        for (int i = 0; i < count; ++i) {
          const Mat3& A = Rp[i];
          Mat3& out = Rc[i];
          if (m == 0) out.col(a_) = A.col(a_);
          else out.col(a_).setZero();
          out.col(b_) = cm * A.col(b_) + sm * A.col(e_);
          out.col(e_) = -sm * A.col(b_) + cm * A.col(e_);
          if (m == 0) pc[i] = pp[i];
          else pc[i].setZero();
        }
        return;
      }
    }
  }

 private:
  enum class Kind { CONST_TRANSLATION, CONST_GENERAL, TRANSLATION, ROTATION };
  Kind kind_;
  int a_ = 0, b_ = 1, e_ = 2;  // axis and the two others in cyclic order
  double x_ = 0.0;
  const Mat3* R0_ = nullptr;
  Vec3 p0_ = Vec3::Zero();
  double c_[4] = {}, s_[4] = {};
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
    const int c = static_cast<int>(model.frames[par].anc.size());  // local index of the own configuration
    const bool driven = fr.driven();
    L.place(0, &C.R[par], &C.p[par], &C.R[f], &C.p[f], 1);
    if (order < 1) continue;
    // Parent-range entries transform with the local transform itself; the entries
    // involving the own configuration (contiguous runs of the packed layout) with its
    // derivatives.
    {
      Mat3* Rc = &C.dR[model.off1[f]];
      Vec3* pc = &C.dp[model.off1[f]];
      L.place(0, &C.dR[model.off1[par]], &C.dp[model.off1[par]], Rc, pc, c);
      if (driven) L.place(1, &C.R[par], nullptr, Rc + c, pc + c, 1);
    }
    if (order < 2) continue;
    {
      Mat3* Rc = &C.ddR[model.off2[f]];
      Vec3* pc = &C.ddp[model.off2[f]];
      L.place(0, &C.ddR[model.off2[par]], &C.ddp[model.off2[par]], Rc, pc, packed2_size(c));
      if (driven) {
        L.place(1, &C.dR[model.off1[par]], nullptr, Rc + packed2(0, c), pc + packed2(0, c), c);
        L.place(2, &C.R[par], nullptr, Rc + packed2(c, c), pc + packed2(c, c), 1);
      }
    }
    if (order < 3) continue;
    {
      Mat3* Rc = &C.dddR[model.off3[f]];
      Vec3* pc = &C.dddp[model.off3[f]];
      L.place(0, &C.dddR[model.off3[par]], &C.dddp[model.off3[par]], Rc, pc, packed3_size(c));
      if (driven) {
        L.place(1, &C.ddR[model.off2[par]], nullptr, Rc + packed3(0, 0, c), pc + packed3(0, 0, c), packed2_size(c));
        L.place(2, &C.dR[model.off1[par]], nullptr, Rc + packed3(0, c, c), pc + packed3(0, c, c), c);
        L.place(3, &C.R[par], nullptr, Rc + packed3(c, c, c), pc + packed3(c, c, c), 1);
      }
    }
  }
  C.position_order = order;
}

void compute_velocities(const Model& model, FrameCache& C, const double* q, const double* qdot, int order) {
  const int nf = static_cast<int>(model.frames.size());
  const bool with_dJ = order >= 3 || !model.wrenches.empty();  // kinematics.hpp
  for (int f = 1; f < nf; ++f) {
    const Frame& fr = model.frames[f];
    if (!fr.need_velocity) continue;
    const int par = fr.parent;
    const LocalTransform L(fr, q);
    const int c = static_cast<int>(model.frames[par].anc.size());  // parent's depth = own local index
    const int d = static_cast<int>(fr.anc.size());
    const bool driven = fr.driven();
    L.ad(0, &C.V[par], &C.V[f], 1);
    if (driven) C.V[f] += L.twist() * qdot[fr.config];
    if (order < 1) continue;
    {
      Vec6* Jc = &C.J[model.off1[f]];
      L.ad(0, &C.J[model.off1[par]], Jc, c);
      if (driven) Jc[c] = L.twist();
      Vec6* Vc = &C.dV[model.off1[f]];
      L.ad(0, &C.dV[model.off1[par]], Vc, c);
      if (driven) L.ad(1, &C.V[par], Vc + c, 1);
    }
    if (order < 2) continue;
    if (with_dJ) {
      const Vec6* Jp = &C.dJ[model.offJ1[par]];
      Vec6* Jc = &C.dJ[model.offJ1[f]];
      for (int i = 0; i < c; ++i) L.ad(0, Jp + i * c, Jc + i * d, c);
      if (driven) {
        L.ad(1, &C.J[model.off1[par]], Jc + c * d, c);
        for (int i = 0; i < d; ++i) Jc[i * d + c].setZero();
      }
    }
    {
      Vec6* Vc = &C.ddV[model.off2[f]];
      L.ad(0, &C.ddV[model.off2[par]], Vc, packed2_size(c));
      if (driven) {
        L.ad(1, &C.dV[model.off1[par]], Vc + packed2(0, c), c);
        L.ad(2, &C.V[par], Vc + packed2(c, c), 1);
      }
    }
    if (order < 3) continue;
    {
      const Vec6* Jp = &C.ddJ[model.offJ2[par]];
      const Vec6* J1 = &C.dJ[model.offJ1[par]];
      Vec6* Jc = &C.ddJ[model.offJ2[f]];
      const int n2p = packed2_size(c);
      for (int ik = 0; ik < n2p; ++ik) L.ad(0, Jp + ik * c, Jc + ik * d, c);
      if (driven) {
        for (int i = 0; i < c; ++i) L.ad(1, J1 + i * c, Jc + packed2(i, c) * d, c);
        L.ad(2, &C.J[model.off1[par]], Jc + packed2(c, c) * d, c);
        const int n2 = packed2_size(d);
        for (int ik = 0; ik < n2; ++ik) Jc[ik * d + c].setZero();
      }
      Vec6* Vc = &C.dddV[model.off3[f]];
      L.ad(0, &C.dddV[model.off3[par]], Vc, packed3_size(c));
      if (driven) {
        L.ad(1, &C.ddV[model.off2[par]], Vc + packed3(0, 0, c), packed2_size(c));
        L.ad(2, &C.dV[model.off1[par]], Vc + packed3(0, c, c), c);
        L.ad(3, &C.V[par], Vc + packed3(c, c, c), 1);
      }
    }
  }
  C.velocity_order = order;
}

}  // namespace mc
