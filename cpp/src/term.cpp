// Local-support derivative tensors of frame points and of scalar products.
#include "marionette/term.hpp"

#include <algorithm>

namespace mc {

namespace {

/// Adds val to every distinct permutation of (a, b, c) of an s^3 tensor.
template <typename T>
void add_sym3(std::vector<T>& t, int s, int a, int b, int c, const T& val) {
  int k[3] = {a, b, c};
  std::sort(k, k + 3);
  do {
    t[(k[0] * s + k[1]) * s + k[2]] += val;
  } while (std::next_permutation(k, k + 3));
}

template <typename T>
void add_sym2(std::vector<T>& t, int s, int a, int b, const T& val) {
  t[a * s + b] += val;
  if (a != b) t[b * s + a] += val;
}

void map_support(const std::vector<int>& anc, const std::vector<int>& support, int* out) {
  for (size_t k = 0; k < anc.size(); ++k) {
    auto it = std::lower_bound(support.begin(), support.end(), anc[k]);
    out[k] = static_cast<int>(it - support.begin());
  }
}

template <typename Get0, typename Get1, typename Get2, typename Get3>
void add_frame_quantity(const Model& model, int frame, const std::vector<int>& support, int order, VecDerivs& out,
                        Get0 g0, Get1 g1, Get2 g2, Get3 g3) {
  const auto& anc = model.frames[frame].anc;
  const int d = static_cast<int>(anc.size());
  int mp[64];
  if (d > 64) throw ModelError("frame '" + model.frames[frame].name + "' is deeper than 64 configurations");
  map_support(anc, support, mp);
  const int s = out.s;
  out.v += g0();
  if (order < 1) return;
  for (int i = 0; i < d; ++i) out.d1[mp[i]] += g1(i);
  if (order < 2) return;
  for (int j = 0; j < d; ++j)
    for (int i = 0; i <= j; ++i) add_sym2(out.d2, s, mp[i], mp[j], g2(packed2(i, j)));
  if (order < 3) return;
  for (int l = 0; l < d; ++l)
    for (int j = 0; j <= l; ++j)
      for (int i = 0; i <= j; ++i) add_sym3(out.d3, s, mp[i], mp[j], mp[l], g3(packed3(i, j, l)));
}

}  // namespace

void TermDerivs::resize(const std::vector<int>& support, bool with_velocity) {
  idx = support;
  s = static_cast<int>(support.size());
  velocity = with_velocity;
  gq.setZero(s);
  hqq.setZero(s, s);
  tqqq.assign(s * s * s, 0.0);
  if (velocity) {
    gv.setZero(s);
    hqv.setZero(s, s);
    hvv.setZero(s, s);
  }
}

void VecDerivs::reset(int size, int order) {
  s = size;
  v.setZero();
  d1.assign(order >= 1 ? s : 0, Vec3::Zero());
  d2.assign(order >= 2 ? s * s : 0, Vec3::Zero());
  d3.assign(order >= 3 ? s * s * s : 0, Vec3::Zero());
}

void add_position(const Model& model, const FrameCache& C, int frame, const std::vector<int>& support, double sign,
                  int order, VecDerivs& out) {
  const int o1 = model.off1[frame], o2 = model.off2[frame], o3 = model.off3[frame];
  add_frame_quantity(
      model, frame, support, order, out, [&] { return Vec3(sign * C.p[frame]); },
      [&](int i) { return Vec3(sign * C.dp[o1 + i]); }, [&](int k) { return Vec3(sign * C.ddp[o2 + k]); },
      [&](int k) { return Vec3(sign * C.dddp[o3 + k]); });
}

void add_axis(const Model& model, const FrameCache& C, int frame, int axis, const std::vector<int>& support, int order,
              VecDerivs& out) {
  const int o1 = model.off1[frame], o2 = model.off2[frame], o3 = model.off3[frame];
  add_frame_quantity(
      model, frame, support, order, out, [&] { return Vec3(C.R[frame].col(axis)); },
      [&](int i) { return Vec3(C.dR[o1 + i].col(axis)); }, [&](int k) { return Vec3(C.ddR[o2 + k].col(axis)); },
      [&](int k) { return Vec3(C.dddR[o3 + k].col(axis)); });
}

namespace {

/// out.tqqq(i, j, l) and its permutations = t(i, j, l) for every sorted i <= j <= l of the support.
template <class Third>
void fill_third(TermDerivs& out, const Third& t) {
  const int s = out.s;
  for (int i = 0; i < s; ++i)
    for (int j = i; j < s; ++j)
      for (int l = j; l < s; ++l) {
        const double v = t(i, j, l);
        int k[3] = {i, j, l};
        do {
          out.tqqq[out.at(k[0], k[1], k[2])] = v;
        } while (std::next_permutation(k, k + 3));
      }
}

}  // namespace

void dot_product(const VecDerivs& u, const VecDerivs& w, int order, TermDerivs& out) {
  const int s = u.s;
  out.value = u.v.dot(w.v);
  if (order < 1) return;
  for (int i = 0; i < s; ++i) out.gq[i] = u.d1[i].dot(w.v) + u.v.dot(w.d1[i]);
  if (order < 2) return;
  for (int i = 0; i < s; ++i)
    for (int j = i; j < s; ++j) {
      const int ij = i * s + j;
      const double h = u.d2[ij].dot(w.v) + u.d1[i].dot(w.d1[j]) + u.d1[j].dot(w.d1[i]) + u.v.dot(w.d2[ij]);
      out.hqq(i, j) = h;
      out.hqq(j, i) = h;
    }
  if (order < 3) return;
  fill_third(out, [&](int i, int j, int l) {
    const int ij = i * s + j, il = i * s + l, jl = j * s + l, ijl = out.at(i, j, l);
    return u.d3[ijl].dot(w.v) + u.d2[ij].dot(w.d1[l]) + u.d2[il].dot(w.d1[j]) + u.d2[jl].dot(w.d1[i]) +
           u.d1[i].dot(w.d2[jl]) + u.d1[j].dot(w.d2[il]) + u.d1[l].dot(w.d2[ij]) + u.v.dot(w.d3[ijl]);
  });
}

void squared_norm(const VecDerivs& x, int order, TermDerivs& out) {
  // dot_product(x, x) with its symmetric pairs merged: d_i(x.x) = 2 x_i.x, d_ij = 2 (x_ij.x + x_i.x_j),
  // d_ijl = 2 (x_ijl.x + x_ij.x_l + x_il.x_j + x_jl.x_i): half the products (the distance constraints' third
  // derivatives are a tenth of a contracted second-order step of the humanoid marionette). Up to second order
  // the numbers are dot_product's, bit for bit.
  const int s = x.s;
  out.value = x.v.dot(x.v);
  if (order < 1) return;
  for (int i = 0; i < s; ++i) out.gq[i] = 2.0 * x.d1[i].dot(x.v);
  if (order < 2) return;
  for (int i = 0; i < s; ++i)
    for (int j = i; j < s; ++j) {  // summed in dot_product's order: its rounding (the recorded golden bag's)
      const double a = x.d2[i * s + j].dot(x.v), b = x.d1[i].dot(x.d1[j]);
      const double h = a + b + b + a;
      out.hqq(i, j) = h;
      out.hqq(j, i) = h;
    }
  if (order < 3) return;
  fill_third(out, [&](int i, int j, int l) {
    const int ij = i * s + j, il = i * s + l, jl = j * s + l, ijl = out.at(i, j, l);
    return 2.0 * (x.d3[ijl].dot(x.v) + x.d2[ij].dot(x.d1[l]) + x.d2[il].dot(x.d1[j]) + x.d2[jl].dot(x.d1[i]));
  });
}

}  // namespace mc
