// The fused controller tick (see tick_kernel.hpp). Every rule here has its readable Python
// form in marionette_control.tracking (named at each function); the operations are written in
// the same order, so the two agree to rounding (test/test_tick_kernel.py: 1e-12 over closed loops).
#include "marionette/tick_kernel.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace mc {

// ------------------------------------------------------------------------------------- CommandHistory

CommandHistory::CommandHistory(int nU, int nk, int delay, int size)
    : nU_(nU), nk_(nk), delay_(delay), slots_(static_cast<size_t>(size), 0), cmds_(MatXR::Zero(size, nU)),
      counts_(static_cast<size_t>(size), 0), initial_(VecX::Zero(nU)) {
  if (delay < 0) throw ModelError("command delay must be >= 0 steps, got " + std::to_string(delay));
  if (size < delay + 2)
    throw ModelError("command history size " + std::to_string(size) + " is too small for a delay of " +
                     std::to_string(delay) + " steps");
  if (nk < 0 || nk > nU) throw ModelError("command history: nk must be in 0..nU");
}

void CommandHistory::start(const double* hold) {
  n_ = 0;
  head_ = -1;
  initial_ = Eigen::Map<const VecX>(hold, nU_);
}

void CommandHistory::sent(long slot, const double* u) {
  const int size = static_cast<int>(slots_.size());
  if (n_ && slot < slots_[head_])
    throw ModelError("command for slot " + std::to_string(slot) + " after one for slot " +
                     std::to_string(slots_[head_]));
  head_ = (head_ + 1) % size;
  slots_[head_] = slot;
  cmds_.row(head_) = Eigen::Map<const Eigen::RowVectorXd>(u, nU_);
  counts_[head_] = 0;
  n_ = std::min(n_ + 1, size);
}

void CommandHistory::carries(const double* points, int m) {
  if (!n_) throw ModelError("command points without a command they belong to");
  if (m < 0) throw ModelError("a command's point count must be >= 0, got " + std::to_string(m));
  // grows once to the longest command a run sends; a tick then copies into the row in place
  if (points_.cols() < static_cast<Eigen::Index>(m) * nU_) {
    MatXR grown = MatXR::Zero(static_cast<Eigen::Index>(slots_.size()), static_cast<Eigen::Index>(m) * nU_);
    grown.leftCols(points_.cols()) = points_;
    points_.swap(grown);
  }
  points_.row(head_).head(static_cast<Eigen::Index>(m) * nU_) =
      Eigen::Map<const Eigen::RowVectorXd>(points, static_cast<Eigen::Index>(m) * nU_);
  counts_[head_] = m;
}

const double* CommandHistory::applied(long j) const {
  const long last = j - delay_;
  const int size = static_cast<int>(slots_.size());
  int i = head_;
  for (int c = 0; c < n_; ++c) {
    if (slots_[i] <= last) {
      const long ahead = std::min<long>(last - slots_[i], counts_[i]);
      return ahead > 0 ? points_.row(i).data() + (ahead - 1) * nU_ : cmds_.row(i).data();
    }
    i = (i - 1 + size) % size;
  }
  return initial_.data();
}

void CommandHistory::stream_state(long j, double dt, double* rho, double* v) const {
  const int nu = nU_ - nk_;
  const double* now = applied(j - 1) + nu;
  const double* before = applied(j - 2) + nu;
  for (int i = 0; i < nk_; ++i) {
    rho[i] = now[i];
    v[i] = (now[i] - before[i]) / dt;
  }
}

void CommandHistory::carry_over(const CommandHistory& other, long shift) {
  if (other.nU_ != nU_) throw ModelError("carry_over: the histories are for different inputs");
  start(other.initial_.data());
  const int size = static_cast<int>(other.slots_.size());
  for (int c = other.n_ - 1; c >= 0; --c) {
    const int j = ((other.head_ - c) % size + size) % size;
    sent(other.slots_[j] - shift, other.cmds_.row(j).data());
    if (other.counts_[j]) carries(other.points_.row(j).data(), other.counts_[j]);
  }
}

// ------------------------------------------------------------------------------------- TickKernel

TickData::TickData(const TickModel& M)
    : x(VecX::Zero(M.nx)), xa(VecX::Zero(M.nx)), xb(VecX::Zero(M.nx)), dx(VecX::Zero(M.nx)), dy(VecX::Zero(M.nd)),
      u(VecX::Zero(M.nU)), rho(VecX::Zero(M.nk)), v(VecX::Zero(M.nk)), rho_k(VecX::Zero(M.nk)), z(VecX::Zero(M.nd)), cut(VecX::Zero(M.nU)),
      ulaw(VecX::Zero(M.nU)), dz(VecX::Zero(M.nd)),
      end(VecX::Zero(M.nk)),
      lo(VecX::Zero(M.nU)), hi(VecX::Zero(M.nU)),
      y(VecX::Zero(M.nU)), yc(VecX::Zero(M.nU)), uf(VecX::Zero(M.nU)), breaks(VecX::Zero(2 * M.nU)), blo(VecX::Zero(M.nk)),
      bhi(VecX::Zero(M.nk)), xs(VecX::Zero(M.nx)), xs_next(VecX::Zero(M.nx)), dys(VecX::Zero(M.nd)),
      mean(VecX::Zero(M.nd)), since(M.quiet_hold + 1), g(VecX::Zero(M.nU)), yq(VecX::Zero(M.nU)),
      record_since(M.record_hold + 1) {}

namespace {

void check_rows(const MatXR& a, long rows, long cols, const std::string& what) {
  if (a.rows() != rows || a.cols() != cols)
    throw ModelError("tick kernel: " + what + " has shape (" + std::to_string(a.rows()) + ", " +
                     std::to_string(a.cols()) + "), expected (" + std::to_string(rows) + ", " + std::to_string(cols) +
                     ")");
}

}  // namespace

TickKernel::TickKernel(std::shared_ptr<DiscreteSystem> system, TickModel model)
    : system_(std::move(system)), M_(std::move(model)), D_(M_) {
  const Layout& z = system_->layout();
  if (M_.nx != z.nx || M_.nU != z.nU || M_.nq != z.n || M_.nd != z.nd || M_.nk != z.nk || M_.nu != z.nu)
    throw ModelError("tick kernel: sizes differ from the system's model");
  const long N = M_.motion.N;
  if (N < 1) throw ModelError("tick kernel: the trajectory needs at least one step");
  check_rows(M_.motion.X, N + 1, M_.nx, "X");
  check_rows(M_.motion.U, N, M_.nU, "U");
  check_rows(M_.motion.K, N, long(M_.nU) * M_.nx, "K");
  check_rows(M_.L, N + 1, long(M_.nx) * M_.nd, "L");
  if (M_.rest.size() != M_.nx - M_.nq || M_.hold.size() != M_.nU || M_.lower.size() != M_.nU ||
      M_.upper.size() != M_.nU || M_.a_step.size() != M_.nk || M_.v_step.size() != M_.nk)
    throw ModelError("tick kernel: rest, hold, limits sized wrongly");
  if (M_.delay < 0) throw ModelError("tick kernel: the command delay must be >= 0");
  if (M_.max_gap_steps < 1) throw ModelError("tick kernel: max_gap_steps must be >= 1");
  if (!(M_.dt > 0)) throw ModelError("tick kernel: dt must be > 0");
  if (M_.tolerance.rows() != 0) check_rows(M_.tolerance, 3, M_.nq, "tolerances");
  if (M_.Kz.rows() != 0) {
    check_rows(M_.Kz, N, long(M_.nU) * M_.nd, "K_z");
    if (!M_.feedback)
      throw ModelError("tick kernel: integral gains K_z without feedback (the integral action is part of the feedback "
                       "law; the feed-forward-only mode has none)");
  }
  if (M_.hand_over_steps < 1) throw ModelError("tick kernel: hand_over_steps must be >= 1");
  if (!(M_.saturation > 0)) throw ModelError("tick kernel: the saturation threshold must be > 0 (+inf: never held)");
  if (M_.start_steps < 0) throw ModelError("tick kernel: start_steps must be >= 0");
  if (!(M_.budget_step > 0)) throw ModelError("tick kernel: the acceleration budget must be > 0 (+inf: none)");
  if (M_.start_input.size() != M_.nU) throw ModelError("tick kernel: start_input sized wrongly");
  if (M_.Ls.rows() != 0) {
    check_rows(M_.Ls, N + 1, long(M_.nx) * M_.nd, "Ls (the surprise detector's gains)");
    if (!M_.feedback) throw ModelError("tick kernel: a quiet feedback without feedback (feed-forward only has none)");
    if (!(M_.quiet_alpha > 0 && M_.quiet_alpha <= 1 && M_.quiet_beta >= 0 && M_.quiet_beta < 1 &&
          M_.quiet_threshold > 0 && M_.quiet_drive_threshold > 0 && M_.quiet_hold >= 0))
      throw ModelError("tick kernel: the quiet feedback needs alpha in (0, 1], beta in [0, 1), thresholds > 0 and "
                       "hold >= 0");
  }
  const long S = M_.min_tension.size();
  if (S != 0) {
    if (!M_.feedback) throw ModelError("tick kernel: a tension guard without feedback (feed-forward only has none)");
    if (long(M_.string_index.size()) != S || long(M_.string_length.size()) != S)
      throw ModelError("tick kernel: the guard needs one constraint and one length index per string");
    const int m = system_->model().nc();
    for (long s = 0; s < S; ++s)
      if (M_.string_index[s] < 0 || M_.string_index[s] >= m || M_.string_length[s] < 0 || M_.string_length[s] >= M_.nq)
        throw ModelError("tick kernel: a string's constraint or length index is out of range");
    D_.A.resize(M_.nx, M_.nx);
    D_.B.resize(M_.nx, M_.nU);
    D_.lam.resize(m);
    D_.lam_x.resize(m, M_.nx);
    D_.lam_u.resize(m, M_.nU);
    D_.T.resize(S);
    D_.Tu.resize(S, M_.nU);
    D_.floor.resize(S);
    D_.c.resize(S);
  }
  // a plan is a window of the motion: storage for the longest one, so installing one allocates nothing
  plan_.X.resize(N + 1, M_.nx);
  plan_.U.resize(N, M_.nU);
  plan_.K.resize(N, long(M_.nU) * M_.nx);
}

void TickKernel::set_plan(long start, long N, const double* X, const double* U, const double* K) {
  if (start < 0 || N < 1 || N > M_.motion.N)
    throw ModelError("tick kernel: a plan must have 1.." + std::to_string(M_.motion.N) + " steps and start >= 0");
  plan_.start = start;
  plan_.N = N;
  plan_.X.topRows(N + 1) = Eigen::Map<const MatXR>(X, N + 1, M_.nx);
  plan_.U.topRows(N) = Eigen::Map<const MatXR>(U, N, M_.nU);
  plan_.K.topRows(N) = Eigen::Map<const MatXR>(K, N, long(M_.nU) * M_.nx);
  have_plan_ = true;
}

// limits.CommandLimits.clamp: the step limited around the stream's velocity (acceleration), then
// to the speed limit, then the whole input to its range.
void TickKernel::clamp(double* u, const double* rho, const double* v) const {
  const int nu = M_.nu;
  const double dt = M_.dt;
  for (int i = 0; i < M_.nk; ++i) {
    const double r = rho[i], w = v[i], a = M_.a_step[i], vs = M_.v_step[i];
    double e = u[nu + i] - r;
    const double lo = w * dt - a, hi = w * dt + a;
    e = e < lo ? lo : e > hi ? hi : e;
    e = e < -vs ? -vs : e > vs ? vs : e;
    u[nu + i] = r + e;
  }
  for (int i = 0; i < M_.nU; ++i) {
    const double lo = M_.lower[i], hi = M_.upper[i];
    u[i] = u[i] < lo ? lo : u[i] > hi ? hi : u[i];
  }
}

// limits.CommandLimits.box: the clamp of -inf and +inf, each component's bounds through the same clips.
void TickKernel::box(const double* rho, const double* v, double* lo, double* hi, const double* inner_lo,
                     const double* inner_hi) const {
  const int nu = M_.nu;
  const double dt = M_.dt;
  for (int i = 0; i < M_.nU; ++i) lo[i] = M_.lower[i], hi[i] = M_.upper[i];
  for (int i = 0; i < M_.nk; ++i) {
    const double r = rho[i], w = v[i], a = M_.a_step[i], vs = M_.v_step[i];
    double e_lo = w * dt - a, e_hi = w * dt + a;
    if (inner_lo != nullptr) {
      const double i_lo = inner_lo[i] - r, i_hi = inner_hi[i] - r, l = e_lo, h = e_hi;
      e_lo = i_lo < l ? l : i_lo > h ? h : i_lo;
      e_hi = i_hi < l ? l : i_hi > h ? h : i_hi;
    }
    e_lo = e_lo < -vs ? -vs : e_lo > vs ? vs : e_lo;
    e_hi = e_hi < -vs ? -vs : e_hi > vs ? vs : e_hi;
    const double lower = lo[nu + i], upper = hi[nu + i], x = r + e_lo, y = r + e_hi;
    lo[nu + i] = x < lower ? lower : x > upper ? upper : x;
    hi[nu + i] = y < lower ? lower : y > upper ? upper : y;
  }
}

namespace {

// tension_guard._dot: summed in order, as the reference does
double dot(const double* a, const double* b, int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// tension_guard._dot(a, _clip(y, a, mu, lo, hi)) and, with out, the clipped point
double clipped(const double* y, const double* a, double mu, const double* lo, const double* hi, int n,
               double* out = nullptr) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) {
    const double z = y[i] + mu * a[i];
    const double c = z < lo[i] ? lo[i] : z > hi[i] ? hi[i] : z;
    if (out) out[i] = c;
    s += a[i] * c;
  }
  return s;
}

}  // namespace

void TickKernel::raise_to_floor(const double* a, double b) {
  const int n = M_.nU;
  double* y = D_.y.data();
  const double *lo = D_.lo.data(), *hi = D_.hi.data();
  double* breaks = D_.breaks.data();
  int nb = 0;
  double tail = 0.0;
  for (int i = 0; i < n; ++i) {
    if (a[i] == 0.0) continue;
    if (std::isinf(a[i] > 0.0 ? hi[i] : lo[i])) tail += a[i] * a[i];
    for (const double m : {(lo[i] - y[i]) / a[i], (hi[i] - y[i]) / a[i]})
      if (0.0 < m && m < std::numeric_limits<double>::infinity()) breaks[nb++] = m;
  }
  std::sort(breaks, breaks + nb);
  double mu0 = 0.0, g0 = clipped(y, a, 0.0, lo, hi, n), mu = 0.0;
  bool found = false;
  for (int c = 0; c < nb && !found; ++c) {
    const double m = breaks[c], g = clipped(y, a, m, lo, hi, n);
    if (g >= b) {
      mu = mu0 + (b - g0) * (m - mu0) / (g - g0);
      found = true;
    } else {
      mu0 = m, g0 = g;
    }
  }
  if (!found) mu = tail > 0.0 ? mu0 + (b - g0) / tail : mu0;
  clipped(y, a, mu, lo, hi, n, D_.yc.data());
  D_.y = D_.yc;
}

bool TickKernel::budget(long j, const double* rho, const double* v, double* u) {
  if (!std::isfinite(M_.budget_step)) return false;
  const int nu = M_.nu;
  const double dt = M_.dt, step = M_.budget_step;
  const double *f0 = feedforward(j) + nu, *f1 = feedforward(j - 1) + nu, *f2 = feedforward(j - 2) + nu;
  for (int i = 0; i < M_.nk; ++i) {
    const double base = rho[i] + v[i] * dt, second = f0[i] - 2.0 * f1[i] + f2[i];
    const double lo = base + (second - step), hi = base + (second + step), z = u[nu + i];
    D_.blo[i] = lo;
    D_.bhi[i] = hi;
    u[nu + i] = z < lo ? lo : z > hi ? hi : z;
  }
  return true;
}

bool TickKernel::guard(const double* u_ff, const double* x, const double* rho, const double* v, double* u,
                       const double* inner_lo, const double* inner_hi) {
  const long S = M_.min_tension.size();
  if (S == 0) return false;
  const int nU = M_.nU;
  box(rho, v, D_.lo.data(), D_.hi.data(), inner_lo, inner_hi);
  D_.y = Eigen::Map<const VecX>(u, nU);
  for (int i = 0; i < nU; ++i) {  // the clamped command, where the step is solved and linearized, and feed-forward
    const double z = D_.y[i], f = u_ff[i], l = D_.lo[i], h = D_.hi[i];
    D_.yc[i] = z < l ? l : z > h ? h : z;
    D_.uf[i] = f < l ? l : f > h ? h : f;
  }
  system_->linearize(x, D_.yc.data(), D_.xb.data(), D_.A.data(), D_.B.data(), D_.lam.data(), D_.lam_x.data(),
                     D_.lam_u.data());
  // model.strings.string_tensions, tension_gradients: T = (2/dt) L lambda, dT/du = (2/dt) L dlambda/du; the floor
  // min(T_min + reserve, the feed-forward's predicted tension), that never below T_min while the record is confirmed
  for (long s = 0; s < S; ++s) {
    const double cL = (2.0 / M_.dt) * x[M_.string_length[s]];
    D_.T[s] = cL * D_.lam[M_.string_index[s]];
    for (int i = 0; i < nU; ++i) D_.Tu(s, i) = cL * D_.lam_u(M_.string_index[s], i);
    const double* a = D_.Tu.row(s).data();
    D_.c[s] = D_.T[s] - dot(a, D_.yc.data(), nU);
    const double feedforward = D_.c[s] + dot(a, D_.uf.data(), nU);
    D_.floor[s] = std::min(M_.min_tension[s] + M_.reserve, D_.record_since > M_.record_hold
                                                               ? std::max(M_.min_tension[s], feedforward)
                                                               : feedforward);
  }
  bool acted = false;
  for (long pass = 0; pass < S; ++pass) {
    bool moved = false;
    for (long s = 0; s < S; ++s) {
      const double* a = D_.Tu.row(s).data();
      const double b = D_.floor[s] - D_.c[s];
      if (clipped(D_.y.data(), a, 0.0, D_.lo.data(), D_.hi.data(), nU) >= b) continue;
      raise_to_floor(a, b);
      moved = true;
    }
    acted = acted || moved;
    if (!moved) break;
  }
  if (acted) Eigen::Map<VecX>(u, nU) = D_.y;
  return acted;
}

double TickKernel::start_weight(long j) const {
  j += D_.blend_offset;
  if (j >= M_.start_steps || M_.start_steps <= 0) return 0.0;
  const double t = double(j) / double(M_.start_steps);
  return 1.0 - t * t * t * (10.0 - 15.0 * t + 6.0 * t * t);
}

void TickKernel::carry_blend(const TickKernel& other, long shift) {
  D_.blending = other.D_.blending && M_.start_steps > 0;
  D_.blend_offset = other.D_.blend_offset + shift;
  D_.guarded = false;
}

void TickKernel::start_run(bool new_run) {
  if (new_run) {  // quiet_feedback.QuietFeedback.start_run; tension_guard.TensionGuard.start_run
    D_.since = M_.quiet_hold + 1;
    D_.have_y = false;
    D_.record_since = M_.record_hold + 1;
  }
  D_.blending = new_run && M_.start_steps > 0;
  D_.blend_offset = 0;
  D_.guarded = false;
}

const double* TickKernel::feedforward(long j) const {
  if (j < 0) return M_.start_input.data();
  if (have_plan_ && plan_.start <= j && j < plan_.start + plan_.N) return plan_.U.row(j - plan_.start).data();
  return j < M_.motion.N ? M_.motion.U.row(j).data() : M_.hold.data();
}

// estimation.KalmanEstimator.estimate: the first estimate of a run from x_d(0)'s momenta, after a
// gap longer than max_gap_steps the Legendre estimate, otherwise the filter's steps and update.
bool TickKernel::estimate(long k, const double* q, const double* rho, const double* q_prev, const CommandHistory& h,
                          double* x_hat) {
  const int nq = M_.nq, nx = M_.nx;
  Eigen::Map<VecX> out(x_hat, nx);
  TickData& D = D_;
  bool initialised = true;
  if (!D.have_x && k == 0) {
    out.head(nq) = Eigen::Map<const VecX>(q, nq);
    out.tail(nx - nq) = M_.rest;
  } else if (!D.have_x || !(0 < k - D.k && k - D.k <= M_.max_gap_steps)) {
    if (q_prev == nullptr) return false;
    system_->state_from_configs(q_prev, q, h.applied(k - 1), x_hat);  // the force inputs lead the input
  } else {
    filter_update(k, q, rho, h, D.x, M_.L, x_hat, D.dy);
    initialised = false;
  }
  if (M_.Ls.rows() != 0) detect(k, q, rho, h, x_hat, initialised);
  D.x = out;
  D.k = k;
  D.have_x = true;
  return true;
}

void TickKernel::filter_update(long k, const double* q, const double* rho, const CommandHistory& h, const VecX& from,
                               const MatXR& L, double* out, VecX& innovation) {
  const int nd = M_.nd, nx = M_.nx;
  TickData& D = D_;
  const double* x = from.data();
  for (long j = D.k; j < k - 1; ++j) {  // steps of a gap bridged with the inputs in effect
    double* next = x == D.xa.data() ? D.xb.data() : D.xa.data();
    system_->step(x, h.applied(j), next);
    x = next;
  }
  D.u = Eigen::Map<const VecX>(h.applied(k - 1), M_.nU);
  D.u.tail(M_.nk) = Eigen::Map<const VecX>(rho, M_.nk);  // the last step ends at rho (estimate_predict)
  system_->step(x, D.u.data(), out);
  const long i = std::min<long>(k, L.rows() - 1);
  Eigen::Map<VecX> o(out, nx);
  innovation = Eigen::Map<const VecX>(q, nd) - o.head(nd);
  o.noalias() += Eigen::Map<const MatXR>(L.row(i).data(), nx, nd) * innovation;
}

// quiet_feedback.QuietFeedback.observe: the detector's filter steps as the controller's (initialised with it), its
// innovation's test against the mean before this tick, and the drives' test.
void TickKernel::detect(long k, const double* q, const double* rho, const CommandHistory& h, const double* x_hat,
                        bool initialised) {
  TickData& D = D_;
  if (initialised) {
    D.xs = Eigen::Map<const VecX>(x_hat, M_.nx);
    D.have_mean = false;
    return;
  }
  filter_update(k, q, rho, h, D.xs, M_.Ls, D.xs_next.data(), D.dys);
  D.xs = D.xs_next;
  if (!D.have_mean) D.mean = D.dys;
  double s = 0.0, drive = 0.0;
  for (int i = 0; i < M_.nd; ++i) s = std::max(s, std::abs(D.dys[i] - D.mean[i]));
  const double* cmd = h.applied(k - 1) + M_.nu;
  for (int i = 0; i < M_.nk; ++i) drive = std::max(drive, std::abs(q[M_.nd + i] - cmd[i]));
  const bool failed = (k >= M_.quiet_armed && s > M_.quiet_threshold) || drive > M_.quiet_drive_threshold;
  for (int i = 0; i < M_.nd; ++i) D.mean[i] = M_.quiet_beta * D.mean[i] + (1.0 - M_.quiet_beta) * D.dys[i];
  D.have_mean = true;
  if (failed) {
    D.since = 0;
    ++D.surprises;
  } else {
    D.since = std::min(D.since + 1, M_.quiet_hold + 1);
  }
}

// quiet_feedback.QuietFeedback.apply: on the motion's law (j < N, no plan in effect) g = K_dyn(j) dx_dyn, its lag
// y (restarted at g at a run's first step, after a gap and while surprised), u += g - y.
void TickKernel::quiet(long j, const double* x, double* u) {
  TickData& D = D_;
  if (!M_.feedback || j >= M_.motion.N || (have_plan_ && plan_.start <= j && j < plan_.start + plan_.N)) {
    D.have_y = false;
    return;
  }
  const int nx = M_.nx, nd = M_.nd, nq = M_.nq;
  const double* K = M_.motion.K.row(j).data();
  const double* X = M_.motion.X.row(j).data();
  for (int r = 0; r < M_.nU; ++r) {
    double s = 0.0;
    for (int c = 0; c < nd; ++c) s += K[r * nx + c] * (x[c] - X[c]);
    for (int c = nq; c < nq + nd; ++c) s += K[r * nx + c] * (x[c] - X[c]);
    D.g[r] = s;
  }
  if (!D.have_y || j != D.jy + 1 || D.since <= M_.quiet_hold) {
    D.yq = D.g;
  } else {
    for (int r = 0; r < M_.nU; ++r) D.yq[r] = D.yq[r] + M_.quiet_alpha * (D.g[r] - D.yq[r]);
  }
  D.jy = j;
  D.have_y = true;
  for (int r = 0; r < M_.nU; ++r) u[r] += D.g[r] - D.yq[r];
}

// prediction.DelayPredictor.predict: each input in flight clamped from the predicted drive state.
void TickKernel::predict(long k, const double* x_hat, const CommandHistory& h, double* x_pred) {
  const int nd = M_.nd, nq = M_.nq, nx = M_.nx;
  Eigen::Map<VecX> out(x_pred, nx);
  out = Eigen::Map<const VecX>(x_hat, nx);
  for (long j = k; j < k + M_.delay; ++j) {
    D_.u = Eigen::Map<const VecX>(h.applied(j), M_.nU);
    clamp(D_.u.data(), x_pred + nd, x_pred + nq + nd);
    system_->step(x_pred, D_.u.data(), D_.xb.data());
    out = D_.xb;
  }
}

// tracking.TrackingLaw.command / plan_switch.PlannedLaw.command
void TickKernel::law(long j, const double* x, double* u) {
  const int nx = M_.nx, nU = M_.nU;
  Eigen::Map<VecX> out(u, nU);
  const TickReference* r = nullptr;
  long i = 0;
  if (have_plan_ && plan_.start <= j && j < plan_.start + plan_.N) {
    r = &plan_;
    i = j - plan_.start;
  } else if (j >= M_.motion.N) {
    out = M_.hold;
    return;
  } else {
    r = &M_.motion;
    i = j;
  }
  out = r->U.row(i).transpose();
  if (!M_.feedback) return;
  D_.dx = Eigen::Map<const VecX>(x, nx) - r->X.row(i).transpose();
  out.noalias() -= Eigen::Map<const MatXR>(r->K.row(i).data(), nU, nx) * D_.dx;
}

void TickKernel::reset_integral() {
  D_.z.setZero();
  D_.cut.setZero();
  D_.held = false;
  D_.have_end = false;
}

void TickKernel::carry_integral(const TickKernel& other) {
  if (other.M_.nd != M_.nd) throw ModelError("carry_integral: the kernels are for different models");
  D_.z = other.D_.z;
  D_.cut = other.D_.cut;
  D_.held = other.D_.held;
}

// integral_action.AngleIntegral.update and apply, suspended while the plan in effect covers j
// (controller_core.Tracking.command): z += dt (q_dyn - x_ref,dyn) while k <= N, unless (j < N) its term
// -K_z(j) dz would push further along the last command's cut (anti-windup); u -= K_z(j) z
// for j < N; past the end the drives handed over from the last command sent to the law's hold.
void TickKernel::integral(long k, const double* q, const double* x_ref, const CommandHistory& h, double* u) {
  const long j = k + M_.delay, N = M_.motion.N;
  if (M_.Kz.rows() == 0 || (have_plan_ && plan_.start <= j && j < plan_.start + plan_.N)) return;
  TickData& D = D_;
  const int nd = M_.nd, nu = M_.nu, nk = M_.nk;
  D.held = false;
  if (k <= N) {
    for (int i = 0; i < nd; ++i) D.dz[i] = M_.dt * (q[i] - x_ref[i]);
    if (j < N) {  // -(K_z(j) dz) . cut, without a temporary (a tick allocates nothing)
      const double* Kz = M_.Kz.row(j).data();
      double push = 0.0;
      for (int r = 0; r < M_.nU; ++r) {
        double s = 0.0;
        for (int c = 0; c < nd; ++c) s += Kz[r * nd + c] * D.dz[c];
        push -= s * D.cut[r];
      }
      D.held = push > 0.0;
    }
    if (!D.held) D.z += D.dz;
  }
  if (j < N) {
    Eigen::Map<VecX>(u, M_.nU).noalias() -= Eigen::Map<const MatXR>(M_.Kz.row(j).data(), M_.nU, nd) * D.z;
    return;
  }
  if (!D.have_end) {
    if (h.count() == 0) return;
    D.end = Eigen::Map<const VecX>(h.last() + nu, nk);
    D.have_end = true;
  }
  const double w = 1.0 - std::min(1.0, double(j - N + 1) / M_.hand_over_steps);
  for (int i = 0; i < nk; ++i) u[nu + i] += w * (D.end[i] - u[nu + i]);
}

bool TickKernel::estimate_predict(long k, const double* q, const double* q_prev, const CommandHistory& h,
                                  double* x_hat, double* x_pred) {
  const double* rho = q + M_.nd;  // where the last step of the estimate ends: the measured drives
  if (M_.min_tension.size() != 0) {  // tension_guard.TensionGuard.confirm: the measured drives against the record
    h.stream_state(k, M_.dt, D_.rho_k.data(), D_.v.data());
    bool agree = true;
    for (int i = 0; i < M_.nk; ++i) agree = agree && std::abs(q[M_.nd + i] - D_.rho_k[i]) <= M_.record_tolerance;
    D_.record_since = agree ? D_.record_since + 1 : 0;
    if (D_.record_since > M_.record_hold) rho = D_.rho_k.data();  // or the record the encoders confirm
  }
  if (!estimate(k, q, rho, q_prev, h, x_hat)) return false;
  predict(k, x_hat, h, x_pred);
  return true;
}

bool TickKernel::command(long k, const double* q, const double* x_ref, const double* x, const CommandHistory& h,
                         const double* x_hat, double* u) {
  const long j = k + M_.delay;
  law(j, x, u);
  if (M_.Ls.rows() != 0) quiet(j, x, u);
  integral(k, q, x_ref, h, u);
  if (D_.blending && j + D_.blend_offset < M_.start_steps) {  // start_blend.StartBlend.apply: the feedback faded in
    const double w = 1.0 - start_weight(j);
    const double* ff = feedforward(j);
    for (int i = 0; i < M_.nU; ++i) u[i] = ff[i] + w * (u[i] - ff[i]);
  }
  D_.ulaw = Eigen::Map<const VecX>(u, M_.nU);
  h.stream_state(j, M_.dt, D_.rho.data(), D_.v.data());
  const bool bounded = budget(j, D_.rho.data(), D_.v.data(), u);
  D_.guarded = guard(feedforward(j), x, D_.rho.data(), D_.v.data(), u, bounded ? D_.blo.data() : nullptr,
                     bounded ? D_.bhi.data() : nullptr);
  clamp(u, D_.rho.data(), D_.v.data());
  if (M_.Kz.rows() != 0) {  // integral_action.AngleIntegral.note_command: what the budget, guard and clamp cut
    D_.cut = D_.ulaw - Eigen::Map<const VecX>(u, M_.nU);
    if (!(D_.cut.cwiseAbs().maxCoeff() > M_.saturation)) D_.cut.setZero();
  }
  bool finite = Eigen::Map<const VecX>(u, M_.nU).allFinite();
  if (x_hat != nullptr) finite = finite && Eigen::Map<const VecX>(x_hat, M_.nx).allFinite();
  return finite;
}

bool TickKernel::within(long k, const double* x_hat, const double* x_ref) const {
  // controller_core.ControllerCore._tolerance_at: start (k = 0), path (k < N), goal
  const double* tolerance = M_.tolerance.row(k == 0 ? 0 : k < M_.motion.N ? 1 : 2).data();
  for (int i = 0; i < M_.nq; ++i)
    if (tolerance[i] > 0.0 && !(std::abs(x_hat[i] - x_ref[i]) <= tolerance[i])) return false;
  return true;
}

TickStatus TickKernel::tick(long k, const double* q, const double* q_prev, const CommandHistory& h,
                            const double* x_ref, double* x_hat, double* x_pred, double* u) {
  if (!estimate_predict(k, q, q_prev, h, x_hat, x_pred)) return TickStatus::NO_PREDECESSOR;
  return command(k, q, x_ref, x_pred, h, x_hat, u) ? TickStatus::OK : TickStatus::NON_FINITE;
}

}  // namespace mc
