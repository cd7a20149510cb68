// The fused controller tick (see tick_kernel.hpp). Every rule here has its readable Python
// form in marionette_control.tracking (named at each function); the operations are written in
// the same order, so the two agree to rounding (test/test_tick_kernel.py: 1e-12 over closed loops).
#include "marionette/tick_kernel.hpp"

#include <cmath>
#include <string>

namespace mc {

// ------------------------------------------------------------------------------------- CommandHistory

CommandHistory::CommandHistory(int nU, int nk, int delay, int size)
    : nU_(nU), nk_(nk), delay_(delay), slots_(static_cast<size_t>(size), 0), cmds_(MatXR::Zero(size, nU)),
      initial_(VecX::Zero(nU)) {
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
  n_ = std::min(n_ + 1, size);
}

const double* CommandHistory::applied(long j) const {
  const long last = j - delay_;
  const int size = static_cast<int>(slots_.size());
  int i = head_;
  for (int c = 0; c < n_; ++c) {
    if (slots_[i] <= last) return cmds_.row(i).data();
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
  }
}

// ------------------------------------------------------------------------------------- TickKernel

TickData::TickData(const TickModel& M)
    : x(VecX::Zero(M.nx)), xa(VecX::Zero(M.nx)), xb(VecX::Zero(M.nx)), dx(VecX::Zero(M.nx)), dy(VecX::Zero(M.nd)),
      u(VecX::Zero(M.nU)), rho(VecX::Zero(M.nk)), v(VecX::Zero(M.nk)), z(VecX::Zero(M.nd)), end(VecX::Zero(M.nk)) {}

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

// estimation.KalmanEstimator.estimate: the first estimate of a run from x_d(0)'s momenta, after a
// gap longer than max_gap_steps the Legendre estimate, otherwise the filter's steps and update.
bool TickKernel::estimate(long k, const double* q, const double* q_prev, const CommandHistory& h, double* x_hat) {
  const int nd = M_.nd, nq = M_.nq, nx = M_.nx;
  Eigen::Map<VecX> out(x_hat, nx);
  TickData& D = D_;
  if (!D.have_x && k == 0) {
    out.head(nq) = Eigen::Map<const VecX>(q, nq);
    out.tail(nx - nq) = M_.rest;
  } else if (!D.have_x || !(0 < k - D.k && k - D.k <= M_.max_gap_steps)) {
    if (q_prev == nullptr) return false;
    system_->state_from_configs(q_prev, q, h.applied(k - 1), x_hat);  // the force inputs lead the input
  } else {
    const double* x = D.x.data();
    for (long j = D.k; j < k - 1; ++j) {  // steps of a gap bridged with the inputs in effect
      double* next = x == D.xa.data() ? D.xb.data() : D.xa.data();
      system_->step(x, h.applied(j), next);
      x = next;
    }
    D.u = Eigen::Map<const VecX>(h.applied(k - 1), M_.nU);
    D.u.tail(M_.nk) = Eigen::Map<const VecX>(q + nd, M_.nk);  // the last step ends where the drives were measured
    system_->step(x, D.u.data(), x_hat);
    const long i = std::min<long>(k, M_.L.rows() - 1);
    D.dy = Eigen::Map<const VecX>(q, nd) - out.head(nd);
    out.noalias() += Eigen::Map<const MatXR>(M_.L.row(i).data(), nx, nd) * D.dy;
  }
  D.x = out;
  D.k = k;
  D.have_x = true;
  return true;
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
  D_.have_end = false;
}

void TickKernel::carry_integral(const TickKernel& other) {
  if (other.M_.nd != M_.nd) throw ModelError("carry_integral: the kernels are for different models");
  D_.z = other.D_.z;
}

// integral_action.AngleIntegral.update and apply, suspended while the plan in effect covers j
// (controller_core.Tracking.command): z += dt (q_dyn - x_ref,dyn) while k <= N; u -= K_z(j) z
// for j < N; past the end the drives handed over from the last command sent to the law's hold.
void TickKernel::integral(long k, const double* q, const double* x_ref, const CommandHistory& h, double* u) {
  const long j = k + M_.delay, N = M_.motion.N;
  if (M_.Kz.rows() == 0 || (have_plan_ && plan_.start <= j && j < plan_.start + plan_.N)) return;
  TickData& D = D_;
  const int nd = M_.nd, nu = M_.nu, nk = M_.nk;
  if (k <= N)
    for (int i = 0; i < nd; ++i) D.z[i] += M_.dt * (q[i] - x_ref[i]);
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
  if (!estimate(k, q, q_prev, h, x_hat)) return false;
  predict(k, x_hat, h, x_pred);
  return true;
}

bool TickKernel::command(long k, const double* q, const double* x_ref, const double* x, const CommandHistory& h,
                         const double* x_hat, double* u) {
  const long j = k + M_.delay;
  law(j, x, u);
  integral(k, q, x_ref, h, u);
  h.stream_state(j, M_.dt, D_.rho.data(), D_.v.data());
  clamp(u, D_.rho.data(), D_.v.data());
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
