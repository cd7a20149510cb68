// The tracking controller's common tick in one native call: a serialized joint state in, the
// command out — the sample's reading and checks (SampleGate), its stamp checks, the sample
// buffer, the sample/tick alignment, the fused tick (TickKernel) and the command's record.
//
// Readable reference (Python, which decides every sample this does not complete and explains
// every fault): marionette_control.tracking.controller.ControllerCore (on_serialized,
// _check_stamp, _accept, _tick); its module docstring states the rules ("Sample/tick
// alignment"). SampleRing and TickAlignment are those rules' only implementation: the Python
// core calls them for every sample it takes itself.
//
// Why: at 100 Hz the controller's code has been idle for 10 ms before every tick, and on a
// shared machine each distinct code path then starts cold (5-12 µs per Python function, 20-35 µs
// per call into the core); one call that does the whole ordinary tick touches far less.
//
// All or nothing: TickPath::tick completes a tick only when it is ordinary — the run has had
// its first tick, no fault is active, the sample passes the gate and the stamp checks, it is a
// tick before the trajectory's end with a predecessor in the buffer, and the kernel's estimate
// and command are finite and within the path tolerance. Anything else leaves no trace (the
// filter's state is restored) and the Python core takes the sample from where the gate left it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "marionette/sample_gate.hpp"
#include "marionette/tick_kernel.hpp"

namespace mc {

/// The last `size` accepted samples (stamp, q (nq)), oldest overwritten first.
class SampleRing {
 public:
  SampleRing(int size, int nq);
  int size() const { return static_cast<int>(stamps_.size()); }
  int nq() const { return static_cast<int>(Q_.cols()); }
  int count() const { return n_; }
  /// Stores q (nq, copied) stamped `stamp`.
  void push(std::int64_t stamp, const double* q);
  std::int64_t last_stamp() const { return stamps_[head_]; }  ///< requires count() > 0
  const double* latest() const { return Q_.row(head_).data(); }  ///< requires count() > 0
  std::int64_t oldest_stamp() const;                             ///< requires count() > 0
  const double* at(int i) const { return Q_.row(i).data(); }
  /// The index of the sample before the newest whose stamp is closest to `target` within ±tol (the newer
  /// of two equally close), or -1.
  int predecessor(std::int64_t target, std::int64_t tol) const { return search(head_, n_ - 1, target, tol); }

 private:
  friend class TickPath;
  /// predecessor() over the `count` samples stored before index `from`, newest first.
  int search(int from, int count, std::int64_t target, std::int64_t tol) const;

  std::vector<std::int64_t> stamps_;
  MatXR Q_;
  int n_ = 0, head_ = -1;
};

/// Which tick a sample is (controller_core's "Sample/tick alignment").
struct TickAlignment {
  std::int64_t dt_ns = 0;   ///< the time step
  std::int64_t tol_ns = 0;  ///< stamp_tolerance * dt
  /// The tick a sample stamped `stamp` is while running: k >= 0, or -1 between ticks. last: the stamp of the
  /// previous accepted sample (null: none); tick_stamp / k_last: the run's last tick (null: none yet, k = 0).
  /// *tol: the tolerance of its predecessor's stamp (tol_ns, at most half the spacing to the previous sample).
  long align(std::int64_t stamp, const std::int64_t* last, const std::int64_t* tick_stamp, long k_last,
             std::int64_t* tol) const;
};

/// The common tick in one call (file comment).
class TickPath {
 public:
  TickPath(std::shared_ptr<SampleGate> gate, std::shared_ptr<SampleRing> ring);
  SampleRing& ring() { return *ring_; }
  int nq() const { return ring_->nq(); }

  /// The stale/future bound of a stamp against the clock (state_timeout) and the alignment.
  void set_timing(std::int64_t timeout_ns, TickAlignment alignment);
  const TickAlignment& alignment() const { return align_; }
  /// The tracking the ticks go to: its kernel (with tolerances) and command history; null: none (every
  /// sample is only read).
  void track(std::shared_ptr<TickKernel> kernel, std::shared_ptr<CommandHistory> history);
  const std::shared_ptr<TickKernel>& kernel() const { return kernel_; }

  enum class Outcome {
    REFUSED,  ///< the gate refused the sample (the reference path reads it and explains)
    READ,     ///< *stamp_ns and q written; not ticked here (nothing else changed)
    TICKED,   ///< an ordinary tick: stored, ticked, its command recorded; everything written
  };
  /// The serialized JointState of `size` bytes at `data` received at now_ns. tick_stamp / k_last: the run's last
  /// tick, or null when this call may only read (not running, no tick yet, a fault active, a switch or a plan
  /// pending). Writes *stamp_ns and q (nq) unless REFUSED; when TICKED also *k, x_hat, x_ref (nx) and u (nU).
  /// The caller holds the kernel's system lock when it may tick. Throws only ModelError for a history misuse.
  Outcome tick(const std::uint8_t* data, std::size_t size, std::int64_t now_ns, const std::int64_t* tick_stamp,
               long k_last, std::int64_t* stamp_ns, double* q, long* k, double* x_hat, double* x_ref, double* u);

 private:
  std::shared_ptr<SampleGate> gate_;
  std::shared_ptr<SampleRing> ring_;
  std::int64_t timeout_ns_ = 0;
  TickAlignment align_;
  std::shared_ptr<TickKernel> kernel_;
  std::shared_ptr<CommandHistory> history_;
  std::optional<TickData> saved_;  ///< the filter's state before a tick (restored when it is not ordinary)
  VecX x_pred_;                    ///< x_hat_{k+d} of a tick (nx)
};

}  // namespace mc
