// The controller's common tick in one call (tick_path.hpp).
#include "marionette/tick_path.hpp"

#include <algorithm>
#include <cstdlib>

namespace mc {

SampleRing::SampleRing(int size, int nq) : stamps_(static_cast<std::size_t>(size), 0), Q_(MatXR::Zero(size, nq)) {
  if (size < 2) throw ModelError("the sample buffer needs at least 2 samples, got " + std::to_string(size));
}

void SampleRing::push(std::int64_t stamp, const double* q) {
  head_ = (head_ + 1) % size();
  stamps_[head_] = stamp;
  Q_.row(head_) = Eigen::Map<const Eigen::RowVectorXd>(q, nq());
  n_ = std::min(n_ + 1, size());
}

std::int64_t SampleRing::oldest_stamp() const { return stamps_[((head_ - n_ + 1) % size() + size()) % size()]; }

int SampleRing::search(int from, int count, std::int64_t target, std::int64_t tol) const {
  int best = -1;
  std::int64_t best_err = tol + 1;
  int i = from;
  for (int c = 0; c < count; ++c) {
    i = (i - 1 + size()) % size();
    const std::int64_t s = stamps_[i];
    const std::int64_t err = std::llabs(s - target);
    if (err < best_err) best = i, best_err = err;
    if (s < target - tol) break;  // older samples only get further away
  }
  return best;
}

long TickAlignment::align(std::int64_t stamp, const std::int64_t* last, const std::int64_t* tick_stamp, long k_last,
                          std::int64_t* tol) const {
  *tol = tol_ns;
  if (last && 2 * tol_ns > stamp - *last) *tol = (stamp - *last) / 2;  // oversampled: at most one sample per slot
  if (!tick_stamp) return 0;
  const std::int64_t since = stamp - *tick_stamp;
  if (since < dt_ns - *tol) return -1;  // oversampled: between ticks
  return k_last + std::max<long>(1, static_cast<long>((since + dt_ns / 2) / dt_ns));
}

TickPath::TickPath(std::shared_ptr<SampleGate> gate, std::shared_ptr<SampleRing> ring)
    : gate_(std::move(gate)), ring_(std::move(ring)) {
  if (gate_->nq() != ring_->nq())
    throw ModelError("the sample gate reads " + std::to_string(gate_->nq()) + " configurations, the buffer holds " +
                     std::to_string(ring_->nq()));
}

void TickPath::set_timing(std::int64_t timeout_ns, TickAlignment alignment) {
  timeout_ns_ = timeout_ns;
  align_ = alignment;
}

void TickPath::track(std::shared_ptr<TickKernel> kernel, std::shared_ptr<CommandHistory> history) {
  if (kernel && kernel->model().nq != ring_->nq())
    throw ModelError("the kernel's model has " + std::to_string(kernel->model().nq) + " configurations, the buffer " +
                     std::to_string(ring_->nq()));
  if (kernel && !history) throw ModelError("a kernel to tick needs its command history");
  kernel_ = std::move(kernel);
  history_ = std::move(history);
  saved_.reset();
  if (kernel_) {
    saved_.emplace(kernel_->data());
    x_pred_ = VecX::Zero(kernel_->model().nx);
  }
}

TickPath::Outcome TickPath::tick(const std::uint8_t* data, std::size_t size, std::int64_t now_ns,
                                 const std::int64_t* tick_stamp, long k_last, std::int64_t* stamp_ns, double* q,
                                 long* k, double* x_hat, double* x_ref, double* u) {
  SampleRing& r = *ring_;
  const bool have_last = r.count() > 0;
  const std::int64_t last = have_last ? r.last_stamp() : 0;
  if (!gate_->read(data, size, have_last ? &last : nullptr, have_last ? r.latest() : nullptr, stamp_ns, q))
    return Outcome::REFUSED;
  if (!tick_stamp || !kernel_) return Outcome::READ;
  const std::int64_t s = *stamp_ns, age = now_ns - s;
  if (age > timeout_ns_ || -age > timeout_ns_) return Outcome::READ;  // stale or ahead: the reference rejects it
  std::int64_t tol = 0;
  const long kk = align_.align(s, have_last ? &last : nullptr, tick_stamp, k_last, &tol);
  const TickModel& M = kernel_->model();
  if (kk < 1 || kk >= M.motion.N || M.tolerance.rows() == 0) return Outcome::READ;  // between ticks, past the end
  // the predecessor among the samples before this one, as SampleRing::predecessor finds it once it is stored
  const int p = r.search((r.head_ + 1) % r.size(), std::min(r.n_ + 1, r.size()) - 1, s - align_.dt_ns, tol);
  if (p < 0) return Outcome::READ;
  Eigen::Map<VecX>(x_ref, M.nx) = M.motion.X.row(kk).transpose();  // x_d(k): no plan (the caller's condition)
  *saved_ = kernel_->data();
  TickStatus status;
  try {
    status = kernel_->tick(kk, q, r.at(p), *history_, x_ref, x_hat, x_pred_.data(), u);
  } catch (const StepError&) {
    status = TickStatus::NON_FINITE;
  }
  if (status != TickStatus::OK || !kernel_->within(kk, x_hat, x_ref)) {
    kernel_->restore(*saved_);  // the reference path ticks it again from the same state and decides
    return Outcome::READ;
  }
  history_->sent_by_tick(kk, u);
  r.push(s, q);
  *k = kk;
  return Outcome::TICKED;
}

}  // namespace mc
