// The tracking controller's sample path in one native call: the serialized sensor_msgs/JointState
// a sample arrives as, to the model's configuration q, checked for plausibility.
//
// Readable reference (Python, which decides every sample this does not pass and explains the
// refusal): marionette_control.nodes.convert.JointStateParser (the CDR fields read),
// JointStateReader (joint names to configurations, finiteness) and
// marionette_control.tracking.sample_checks.SampleChecks (range, jump, closed chain); the rules
// are written here in the same order with the same comparisons (test/test_sample_gate.py holds
// the two to each other, sample by sample, over valid, reordered, truncated and implausible ones).
//
// Why: at 100 Hz the controller's code is cold at every tick, and the Python path (struct
// unpacking, a name lookup, three loops of checks) costs ~80 µs then; one call touches far less.
//
// What passes: plain little-endian CDR (encapsulation CDR_LE, what ROS 2's rmw implementations
// write on the machines this runs on), well formed, every hardware joint named once, names valid
// UTF-8, as many positions as names, the mapped positions finite, and the configuration inside
// SampleChecks' range, jump and chain bounds, stamped after the last accepted sample. Anything
// else is refused (read() returns false) without a reason: the reference path gives it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "marionette/constraints.hpp"
#include "marionette/model.hpp"

namespace mc {

/// The first-order distance |h_i(q)| / |Dh_i(q)| of a configuration to each holonomic constraint
/// (thesis §3.5): how far a measured configuration is off the closed chain, in the units of q
/// (the controller's plausibility check, marionette_control.tracking.sample_checks). Workspaces
/// sized once.
class ConstraintDistance {
 public:
  explicit ConstraintDistance(std::shared_ptr<const Model> model);
  const Model& model() const { return *model_; }
  /// The distances (m) at q (nq); |Dh_i| below 1e-12 counts as 1e-12. Valid until the next call.
  const VecX& compute(const double* q);

 private:
  std::shared_ptr<const Model> model_;
  FrameCache cache_;
  ConstraintData h_;
  VecX distance_;
};

/// SampleChecks' bounds (marionette_control.tracking.sample_checks), per configuration (nq each).
struct SampleBounds {
  VecX lower, upper;           ///< the range, already widened by limit_margin (-inf/inf: unchecked)
  VecX speed;                  ///< velocity_factor * v_max (inf: unchecked)
  double jump_margin = 0.0;    ///< added to speed * elapsed
  double chain_tolerance = 0;  ///< largest constraint distance; <= 0: the chain is not checked
};

/// The serialized JointState of one sample to its checked configuration (file comment).
class SampleGate {
 public:
  /// hardware_names: the hardware joint of each configuration, in model order (nq).
  SampleGate(std::shared_ptr<const Model> model, std::vector<std::string> hardware_names, SampleBounds bounds);
  int nq() const { return static_cast<int>(names_.size()); }

  /// The sample of `size` bytes at `data`: true and *stamp_ns, q (nq) written when it passes; false
  /// (q unspecified) otherwise. last_stamp / q_last (nq): the last accepted sample, or null (none yet).
  bool read(const std::uint8_t* data, std::size_t size, const std::int64_t* last_stamp, const double* q_last,
            std::int64_t* stamp_ns, double* q);

 private:
  /// order_ for the name block [begin, end) of `count` strings (cached by its bytes); false: not usable.
  bool map_names(const std::uint8_t* data, std::size_t begin, std::size_t end, std::uint32_t count);
  bool plausible(const double* q, const double* q_last, double elapsed);

  std::vector<std::string> names_;
  SampleBounds bounds_;
  std::unique_ptr<ConstraintDistance> distance_;  ///< null: the chain is not checked
  std::vector<std::uint8_t> names_raw_;          ///< the name block order_ was found for
  std::vector<std::uint32_t> order_;             ///< per configuration, its index in that block
  bool have_order_ = false;
};

}  // namespace mc
