// Backward Riccati sweep with the sparsity of the VI linearization (see riccati.hpp).
#include "marionette/riccati.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <emmintrin.h>
#include <vector>

namespace mc {

namespace {

using ColMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
using OStride = Eigen::OuterStride<>;
using CMap = Eigen::Map<const ColMat, 0, OStride>;
using MMap = Eigen::Map<ColMat, 0, OStride>;

/// C (M x N, column-major, leading dimension ldc) = alpha op(A) op(B) + beta C.
struct Gemm {
  DgemmFn blas;

  void operator()(bool ta, bool tb, int M, int N, int K, double alpha, const double* A, int lda, const double* B,
                  int ldb, double beta, double* C, int ldc) const {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
      for (int j = 0; j < N; ++j)
        for (int i = 0; i < M; ++i) C[i + static_cast<long>(j) * ldc] *= beta;
      return;
    }
    if (blas != nullptr) {
      char a = ta ? 'T' : 'N', b = tb ? 'T' : 'N';
      blas(&a, &b, &M, &N, &K, &alpha, const_cast<double*>(A), &lda, const_cast<double*>(B), &ldb, &beta, C, &ldc);
      return;
    }
    CMap Am(A, ta ? K : M, ta ? M : K, OStride(lda));
    CMap Bm(B, tb ? N : K, tb ? K : N, OStride(ldb));
    MMap Cm(C, M, N, OStride(ldc));
    if (beta == 0.0)
      Cm.setZero();
    else if (beta != 1.0)
      Cm *= beta;
    if (ta && tb)
      Cm.noalias() += alpha * (Am.transpose() * Bm.transpose());
    else if (ta)
      Cm.noalias() += alpha * (Am.transpose() * Bm);
    else if (tb)
      Cm.noalias() += alpha * (Am * Bm.transpose());
    else
      Cm.noalias() += alpha * (Am * Bm);
  }
};

/// Which rows of [A(k) B(k)] are dense, which have at most one entry in A and one in B
/// ("sparse rows"), and the number nz of leading columns of A outside of which A is
/// zero (trailing zero columns; zero columns in the middle are kept as dense, so the
/// state order never changes). The dense pattern (every row dense, nz = n) fits
/// every step.
struct Pattern {
  std::vector<int> D;      // dense rows
  std::vector<int> S;      // sparse rows
  std::vector<int> s_col;  // per sparse row: its column of A or -1
  std::vector<int> s_b;    // ... its column of B or -1
  int nz = 0;

  int nD() const { return static_cast<int>(D.size()); }
  int nS() const { return static_cast<int>(S.size()); }

  static Pattern dense(int n) {
    Pattern p;
    for (int i = 0; i < n; ++i) p.D.push_back(i);
    p.nz = n;
    return p;
  }

  /// The pattern of the union of the nonzeros of a few sample steps.
  static Pattern detect(const RiccatiInputs& in) {
    const int n = static_cast<int>(in.n), m = static_cast<int>(in.m);
    const long N = in.N;
    std::vector<long> samples = {0, N / 4, N / 2, (3 * N) / 4, N - 1};
    std::sort(samples.begin(), samples.end());
    samples.erase(std::unique(samples.begin(), samples.end()), samples.end());
    std::vector<char> nzA(static_cast<size_t>(n) * n, 0), nzB(static_cast<size_t>(n) * m, 0);
    for (long k : samples) {
      const double* Ak = in.A + k * n * n;
      const double* Bk = in.B + k * n * m;
      for (long i = 0; i < static_cast<long>(n) * n; ++i) nzA[i] |= !(Ak[i] == 0.0);
      for (long i = 0; i < static_cast<long>(n) * m; ++i) nzB[i] |= !(Bk[i] == 0.0);
    }
    Pattern p;
    for (int i = 0; i < n; ++i)
      for (int c = 0; c < n; ++c)
        if (nzA[static_cast<size_t>(i) * n + c]) p.nz = std::max(p.nz, c + 1);
    for (int i = 0; i < n; ++i) {
      int ca = -1, cb = -1, na = 0, nb = 0;
      for (int c = 0; c < n; ++c)
        if (nzA[static_cast<size_t>(i) * n + c]) ++na, ca = c;
      for (int j = 0; j < m; ++j)
        if (nzB[static_cast<size_t>(i) * m + j]) ++nb, cb = j;
      if (na <= 1 && nb <= 1) {
        p.S.push_back(i);
        p.s_col.push_back(ca);
        p.s_b.push_back(cb);
      } else {
        p.D.push_back(i);
      }
    }
    return p;
  }

  bool is_dense(int n) const { return nS() == 0 && nz == n; }

  /// Whether step k's A, B have no nonzero outside the pattern. Tests the bit patterns
  /// (sign masked, so -0.0 is zero and NaN is not) with integer ORs, which vectorize;
  /// a floating-point comparison loop does not, and cost as much as a third of the sweep.
  bool fits(const double* Ak, const double* Bk, int n, int m) const {
    uint64_t acc = 0;
    if (nz < n)
      for (int d : D) acc |= or_bits(Ak + static_cast<long>(d) * n + nz, n - nz);
    for (int t = 0; t < nS(); ++t) {
      const double* rowA = Ak + static_cast<long>(S[t]) * n;
      const double* rowB = Bk + static_cast<long>(S[t]) * m;
      if (s_col[t] >= 0) {
        acc |= or_bits(rowA, s_col[t]) | or_bits(rowA + s_col[t] + 1, n - s_col[t] - 1);
      } else {
        acc |= or_bits(rowA, n);
      }
      if (s_b[t] >= 0) {
        acc |= or_bits(rowB, s_b[t]) | or_bits(rowB + s_b[t] + 1, m - s_b[t] - 1);
      } else {
        acc |= or_bits(rowB, m);
      }
    }
    return (acc & ~(uint64_t(1) << 63)) == 0;
  }

  static uint64_t or_bits(const double* x, int count) {
    uint64_t acc = 0;
    for (int i = 0; i < count; ++i) {
      uint64_t b;
      std::memcpy(&b, x + i, sizeof b);
      acc |= b;
    }
    return acc;
  }
};

/// Workspaces of one step, sized for the dense pattern (the largest).
struct Work {
  std::vector<double> MDt, PD, Z, ZD, G, H, L, Li, W, X, Mb, gu, w, Pcur, Pnext;
  Work(int n, int m) {
    const size_t p = static_cast<size_t>(n + m), nn = static_cast<size_t>(n) * n;
    Pcur.resize(nn);
    Pnext.resize(nn);
    MDt.resize(n * p);
    PD.resize(nn);
    Z.resize(n * p);
    ZD.resize(n * p);
    G.resize(p * p);
    H.resize(static_cast<size_t>(m) * n);
    L.resize(static_cast<size_t>(m) * m);
    Li.resize(static_cast<size_t>(m) * m);
    W.resize(static_cast<size_t>(m) * n);
    X.resize(nn);
    Mb.resize(nn);
    gu.resize(m);
    w.resize(m);
  }
};

/// In-place lower Cholesky of the column-major m x m matrix `a` (lower triangle read);
/// returns 0 or the order of the first leading minor that is not positive (LAPACK's info).
int cholesky_lower(double* a, int m) {
  for (int j = 0; j < m; ++j) {
    double* cj = a + static_cast<long>(j) * m;
    double d = cj[j];
    for (int k = 0; k < j; ++k) d -= a[j + static_cast<long>(k) * m] * a[j + static_cast<long>(k) * m];
    if (!(d > 0.0)) return j + 1;
    d = std::sqrt(d);
    cj[j] = d;
    for (int i = j + 1; i < m; ++i) {
      double s = cj[i];
      for (int k = 0; k < j; ++k) s -= a[i + static_cast<long>(k) * m] * a[j + static_cast<long>(k) * m];
      cj[i] = s / d;
    }
    for (int i = 0; i < j; ++i) cj[i] = 0.0;  // clean upper triangle
  }
  return 0;
}

/// li = l^{-1} for a lower-triangular column-major m x m l (upper triangle of li zero).
void invert_lower(const double* l, double* li, int m) {
  std::fill(li, li + static_cast<long>(m) * m, 0.0);
  for (int j = 0; j < m; ++j) {
    li[j + static_cast<long>(j) * m] = 1.0 / l[j + static_cast<long>(j) * m];
    for (int i = j + 1; i < m; ++i) {
      double s = 0.0;
      for (int k = j; k < i; ++k) s += l[i + static_cast<long>(k) * m] * li[k + static_cast<long>(j) * m];
      li[i + static_cast<long>(j) * m] = -s / l[i + static_cast<long>(i) * m];
    }
  }
}

/// dst[0..count) = src[0..count) with non-temporal stores where dst is 16-byte aligned.
void stream_copy(const double* src, double* dst, long count) {
  long i = 0;
  if ((reinterpret_cast<uintptr_t>(dst) & 15) != 0) {
    dst[0] = src[0];
    i = 1;
  }
  for (; i + 1 < count; i += 2) _mm_stream_pd(dst + i, _mm_loadu_pd(src + i));
  for (; i < count; ++i) dst[i] = src[i];
}

void prefetch(const double* p, long count) {
  for (long i = 0; i < count; i += 8) __builtin_prefetch(p + i, 0, 2);
}

/// One step k of the sweep with pattern `pt`; false (and `info`) when Gamma(k) is not PD.
///
/// With w = [x(0..nz); u] (p = nz + m) and M (n x p) the map w -> x(k+1), the step forms
/// G = M^T P(k+1) M, whose blocks are A^T P A (nz x nz), B^T P A and B^T P B: the dense
/// rows of M (M_D, nD x p) through two products Z = P(:, D) M_D and M_D^T Z(D, :), each
/// sparse row as rank-one corrections. Only G(:, 0..nz) and G(nz.., nz..) are formed
/// (G is symmetric).
bool step(const RiccatiInputs& in, const RiccatiOutputs& out, const Gemm& gemm, const Pattern& pt, Work& ws, long k,
          int& info) {
  const int n = static_cast<int>(in.n), m = static_cast<int>(in.m);
  const int nD = pt.nD(), nS = pt.nS(), nz = pt.nz, p = nz + m;
  const bool hasS = in.S != nullptr;
  const int nh = hasS ? n : nz;  // leading columns of H = B^T P A + S^T that may be nonzero
  const long nn = static_cast<long>(n) * n;
  const double* Ak = in.A + k * nn;
  const double* Bk = in.B + k * n * m;
  ws.Pcur.swap(ws.Pnext);  // P(k+1), computed by the previous step (or the terminal one)
  const double* Pn = ws.Pnext.data();
  double* MDt = ws.MDt.data();
  double* PD = ws.PD.data();
  double* Z = ws.Z.data();
  double* ZD = ws.ZD.data();
  double* G = ws.G.data();
  // The next step's A and B stream in while this one computes, a quarter at a time
  // (a burst of a thousand prefetches would only queue behind the fill buffers).
  const double* An = k > 1 ? in.A + (k - 2) * nn : nullptr;
  const long quarter = (nn + 31) / 32 * 8;
  auto prefetch_part = [&](int part) {
    if (An == nullptr) return;
    const long lo = part * quarter, hi = std::min(nn, lo + quarter);
    if (lo < hi) prefetch(An + lo, hi - lo);
    if (part == 3) prefetch(in.B + (k - 2) * n * m, static_cast<long>(n) * m);
  };
  prefetch_part(0);

  // M_D^T (p x nD, column r = [A(D[r], 0..nz) B(D[r], :)]) and P(:, D) (P is symmetric: rows).
  for (int r = 0; r < nD; ++r) {
    const long d = pt.D[r];
    std::copy(Ak + d * n, Ak + d * n + nz, MDt + static_cast<long>(r) * p);
    std::copy(Bk + d * m, Bk + d * m + m, MDt + static_cast<long>(r) * p + nz);
    std::copy(Pn + d * n, Pn + d * n + n, PD + static_cast<long>(r) * n);
  }
  // Z = P M (n x p): the dense rows by products (split so that OpenBLAS stays on one
  // thread: its threading costs more than it brings at these sizes), each sparse row
  // as a rank-one term.
  gemm(false, true, n, nz, nD, 1.0, PD, n, MDt, p, 0.0, Z, n);
  gemm(false, true, n, m, nD, 1.0, PD, n, MDt + nz, p, 0.0, Z + static_cast<long>(nz) * n, n);
  for (int t = 0; t < nS; ++t) {
    const double* prow = Pn + static_cast<long>(pt.S[t]) * n;
    if (pt.s_col[t] >= 0) {
      const double va = Ak[static_cast<long>(pt.S[t]) * n + pt.s_col[t]];
      double* zc = Z + static_cast<long>(pt.s_col[t]) * n;
      for (int i = 0; i < n; ++i) zc[i] += va * prow[i];
    }
    if (pt.s_b[t] >= 0) {
      const double vb = Bk[static_cast<long>(pt.S[t]) * m + pt.s_b[t]];
      double* zc = Z + static_cast<long>(nz + pt.s_b[t]) * n;
      for (int i = 0; i < n; ++i) zc[i] += vb * prow[i];
    }
  }
  prefetch_part(1);
  // G = M^T Z: columns 0..nz and the block (nz.., nz..).
  for (int j = 0; j < p; ++j) {
    const double* zc = Z + static_cast<long>(j) * n;
    double* zd = ZD + static_cast<long>(j) * nD;
    for (int r = 0; r < nD; ++r) zd[r] = zc[pt.D[r]];
  }
  gemm(false, false, p, nz, nD, 1.0, MDt, p, ZD, nD, 0.0, G, p);
  gemm(false, false, m, m, nD, 1.0, MDt + nz, p, ZD + static_cast<long>(nz) * nD, nD, 0.0,
       G + static_cast<long>(nz) * p + nz, p);
  for (int t = 0; t < nS; ++t) {
    const int s = pt.S[t];
    if (pt.s_col[t] >= 0) {
      const double va = Ak[static_cast<long>(s) * n + pt.s_col[t]];
      const int a = pt.s_col[t];
      for (int j = 0; j < nz; ++j) G[a + static_cast<long>(j) * p] += va * Z[s + static_cast<long>(j) * n];
    }
    if (pt.s_b[t] >= 0) {
      const double vb = Bk[static_cast<long>(s) * m + pt.s_b[t]];
      const int row = nz + pt.s_b[t];
      for (int j = 0; j < p; ++j) G[row + static_cast<long>(j) * p] += vb * Z[s + static_cast<long>(j) * n];
    }
  }

  prefetch_part(2);
  // Gamma = R + B^T P B (lower triangle) = L L^T; H = B^T P A + S^T (m x nh).
  const double* Rk = in.R + (in.R_stacked ? k * m * m : 0);
  double* L = ws.L.data();
  for (int j = 0; j < m; ++j)
    for (int i = j; i < m; ++i)
      L[i + static_cast<long>(j) * m] = G[(nz + i) + static_cast<long>(nz + j) * p] + Rk[static_cast<long>(i) * m + j];
  double* H = ws.H.data();
  for (int j = 0; j < nz; ++j) std::copy(G + nz + static_cast<long>(j) * p, G + p + static_cast<long>(j) * p, H + static_cast<long>(j) * m);
  std::fill(H + static_cast<long>(nz) * m, H + static_cast<long>(nh) * m, 0.0);
  if (hasS) {
    const double* Sk = in.S + (in.S_stacked ? k * n * m : 0);
    for (int c = 0; c < n; ++c)
      for (int i = 0; i < m; ++i) H[i + static_cast<long>(c) * m] += Sk[static_cast<long>(c) * m + i];
  }
  info = cholesky_lower(L, m);
  if (info != 0) return false;
  double* Li = ws.Li.data();
  invert_lower(L, Li, m);

  // W = L^-1 H; K = L^-T W written transposed straight into K(k) (row-major m x n =
  // column-major n x m): K^T = W^T L^-1.
  double* W = ws.W.data();
  gemm(false, false, m, nh, m, 1.0, Li, m, H, m, 0.0, W, m);
  double* Kk = out.K + k * m * n;
  gemm(true, false, nh, m, m, 1.0, W, m, Li, m, 0.0, Kk, n);
  for (int i = 0; i < m; ++i) std::fill(Kk + static_cast<long>(i) * n + nh, Kk + static_cast<long>(i + 1) * n, 0.0);

  // X = A^T P A - K^T Gamma K = G(0..nz, 0..nz) - W^T W (Gamma cancelled: K^T Gamma K =
  // H^T Gamma^-1 H = W^T W), as an nh x nh column-major block, zero beyond.
  double* X;
  int ldx;
  if (!hasS) {
    X = G;
    ldx = p;
  } else {
    X = ws.X.data();
    ldx = n;
    std::fill(X, X + nn, 0.0);
    for (int j = 0; j < nz; ++j) std::copy(G + static_cast<long>(j) * p, G + static_cast<long>(j) * p + nz, X + static_cast<long>(j) * n);
  }
  gemm(true, false, nh, nh, m, -1.0, W, m, W, m, 1.0, X, ldx);

  prefetch_part(3);
  // P(k) = sym(Q + X) (thesis L3119): Mb = Q + X^T, P = (Mb + Mb^T)/2, exactly symmetric.
  const double* Qk = in.Q + (in.Q_stacked ? k * nn : 0);
  double* Mb = ws.Mb.data();
  const int nx = hasS ? n : nz;
  for (int i = 0; i < n; ++i) {
    const double* qrow = Qk + static_cast<long>(i) * n;
    double* mrow = Mb + static_cast<long>(i) * n;
    if (i < nx) {
      const double* xcol = X + static_cast<long>(i) * ldx;
      for (int j = 0; j < nx; ++j) mrow[j] = qrow[j] + xcol[j];
      for (int j = nx; j < n; ++j) mrow[j] = qrow[j];
    } else {
      std::copy(qrow, qrow + n, mrow);
    }
  }
  // Into the cache-resident buffer the next step reads (a + b == b + a, so P(i, j) and
  // P(j, i) are bitwise equal), then streamed to the output without polluting the cache
  // or reading the destination first.
  double* Pk = ws.Pcur.data();
  for (int i = 0; i < n; ++i) {
    const double* mrow = Mb + static_cast<long>(i) * n;
    const double* mcol = Mb + i;
    double* prow = Pk + static_cast<long>(i) * n;
    for (int j = 0; j < n; ++j) prow[j] = 0.5 * (mrow[j] + mcol[static_cast<long>(j) * n]);
  }
  stream_copy(Pk, out.P + k * nn, nn);

  if (in.linear) {
    // g = B^T b(k+1) + r; C = Gamma^-1 g; b(k) = A^T b(k+1) + q - K^T g; c(k) = c(k+1) - |L^-1 g|^2.
    const double* bn = out.b + (k + 1) * n;
    double* gu = ws.gu.data();
    double* w = ws.w.data();
    if (in.r != nullptr) {
      const double* rk = in.r + (in.r_stacked ? k * m : 0);
      std::copy(rk, rk + m, gu);
    } else {
      std::fill(gu, gu + m, 0.0);
    }
    for (int row = 0; row < n; ++row) {
      const double br = bn[row];
      if (br == 0.0) continue;
      const double* rowB = Bk + static_cast<long>(row) * m;
      for (int i = 0; i < m; ++i) gu[i] += br * rowB[i];
    }
    double ww = 0.0;
    for (int i = 0; i < m; ++i) {
      double s = 0.0;
      for (int j = 0; j <= i; ++j) s += Li[i + static_cast<long>(j) * m] * gu[j];
      w[i] = s;
      ww += s * s;
    }
    double* Ck = out.C + k * m;
    for (int i = 0; i < m; ++i) {
      double s = 0.0;
      for (int j = i; j < m; ++j) s += Li[j + static_cast<long>(i) * m] * w[j];
      Ck[i] = s;
    }
    out.c[k] = out.c[k + 1] - ww;
    double* bk = out.b + k * n;
    if (in.q != nullptr) {
      const double* qk = in.q + (in.q_stacked ? k * n : 0);
      std::copy(qk, qk + n, bk);
    } else {
      std::fill(bk, bk + n, 0.0);
    }
    for (int row = 0; row < n; ++row) {
      const double br = bn[row];
      if (br == 0.0) continue;
      const double* rowA = Ak + static_cast<long>(row) * n;
      for (int c = 0; c < n; ++c) bk[c] += br * rowA[c];
    }
    for (int i = 0; i < m; ++i) {
      const double gi = gu[i];
      const double* rowK = Kk + static_cast<long>(i) * n;
      for (int c = 0; c < n; ++c) bk[c] -= gi * rowK[c];
    }
  }
  return true;
}

}  // namespace

RiccatiResult riccati_sweep(const RiccatiInputs& in, const RiccatiOutputs& out, DgemmFn blas) {
  const int n = static_cast<int>(in.n), m = static_cast<int>(in.m);
  const long N = in.N, nn = static_cast<long>(n) * n;
  RiccatiResult res;
  // Terminal conditions: P(N) = sym(Qf), b(N) = qf, c(N) = 0.
  double* PN = out.P + N * nn;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      PN[static_cast<long>(i) * n + j] = 0.5 * (in.Qf[static_cast<long>(i) * n + j] + in.Qf[static_cast<long>(j) * n + i]);
  if (in.linear) {
    double* bN = out.b + N * n;
    if (in.qf != nullptr)
      std::copy(in.qf, in.qf + n, bN);
    else
      std::fill(bN, bN + n, 0.0);
    out.c[N] = 0.0;
  }
  if (N == 0) return res;

  const Gemm gemm{blas};
  const Pattern dense = Pattern::dense(n);
  const Pattern detected = Pattern::detect(in);
  const bool structured = !detected.is_dense(n);
  res.dense_rows = structured ? detected.nD() : n;
  res.nonzero_columns = structured ? detected.nz : n;
  Work ws(n, m);
  std::copy(PN, PN + nn, ws.Pcur.data());  // swapped into Pnext by the first step
  for (long k = N - 1; k >= 0; --k) {
    const Pattern* pt = &dense;
    if (structured && detected.fits(in.A + k * nn, in.B + k * n * m, n, m)) {
      pt = &detected;
      ++res.structured_steps;
    }
    int info = 0;
    if (!step(in, out, gemm, *pt, ws, k, info)) {
      res.failed_step = k;
      res.failed_order = info;
      return res;
    }
  }
  _mm_sfence();  // the streamed stores are visible before the caller reads P
  return res;
}

}  // namespace mc
