// The controller's sample path (see sample_gate.hpp). Each rule names its Python reference; the
// comparisons are written the same way (a NaN fails every bound there and here).
#include "marionette/sample_gate.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace mc {

// ------------------------------------------------------------------------------------- ConstraintDistance

ConstraintDistance::ConstraintDistance(std::shared_ptr<const Model> model)
    : model_(std::move(model)), cache_(*model_), h_(*model_), distance_(VecX::Zero(model_->nc())) {}

const VecX& ConstraintDistance::compute(const double* q) {
  compute_constraints(*model_, cache_, q, 1, h_);
  for (int i = 0; i < model_->nc(); ++i) distance_[i] = std::abs(h_.h[i]) / std::max(h_.Dh.row(i).norm(), 1e-12);
  return distance_;
}

// ------------------------------------------------------------------------------------- SampleGate

namespace {

constexpr std::int64_t NS = 1000000000;

/// Little-endian reads at any alignment (the encapsulation says LE; the host may be either).
std::uint32_t u32(const std::uint8_t* p) {
  return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 | std::uint32_t(p[3]) << 24;
}

double f64(const std::uint8_t* p) {
  std::uint64_t bits = 0;
  for (int i = 7; i >= 0; --i) bits = bits << 8 | p[i];
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

/// Strict UTF-8 (what Python's bytes.decode() accepts: no overlong forms, no surrogates, <= U+10FFFF).
bool valid_utf8(const std::uint8_t* s, std::size_t n) {
  std::size_t i = 0;
  while (i < n) {
    const std::uint8_t c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len;
    std::uint32_t cp, min;
    if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07, min = 0x10000;
    else return false;
    if (i + len > n) return false;
    for (int j = 1; j < len; ++j) {
      if ((s[i + j] & 0xC0) != 0x80) return false;
      cp = cp << 6 | (s[i + j] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

std::size_t align4(std::size_t off) { return (off + 3) & ~std::size_t(3); }

}  // namespace

SampleGate::SampleGate(std::shared_ptr<const Model> model, std::vector<std::string> hardware_names,
                       SampleBounds bounds)
    : names_(std::move(hardware_names)), bounds_(std::move(bounds)), order_(names_.size(), 0) {
  const long n = static_cast<long>(names_.size());
  if (n != model->nq())
    throw ModelError("sample gate: " + std::to_string(n) + " hardware joint names for the " +
                     std::to_string(model->nq()) + " configurations of model '" + model->name + "'");
  if (bounds_.lower.size() != n || bounds_.upper.size() != n || bounds_.speed.size() != n)
    throw ModelError("sample gate: the bounds must have one entry per configuration (" + std::to_string(n) + ")");
  for (long i = 0; i < n; ++i)
    for (long j = 0; j < i; ++j)
      if (names_[i] == names_[j]) throw ModelError("sample gate: hardware joint '" + names_[i] + "' named twice");
  if (bounds_.chain_tolerance > 0 && model->nc() > 0) distance_ = std::make_unique<ConstraintDistance>(std::move(model));
}

bool SampleGate::map_names(const std::uint8_t* data, std::size_t begin, std::size_t end, std::uint32_t count) {
  const std::size_t bytes = end - begin;
  if (have_order_ && names_raw_.size() == bytes && std::memcmp(names_raw_.data(), data + begin, bytes) == 0)
    return true;
  // JointStateReader._read_by_name: names unique, every hardware joint present; JointStateParser: UTF-8
  std::vector<std::pair<const std::uint8_t*, std::size_t>> names;
  names.reserve(count);
  for (std::size_t off = begin; names.size() < count;) {
    const std::uint32_t n = u32(data + off);
    const std::size_t len = n ? n - 1 : 0;  // without the terminating NUL
    if (!valid_utf8(data + off + 4, len)) return false;
    names.emplace_back(data + off + 4, len);
    off = align4(off + 4 + n);
  }
  for (std::size_t a = 0; a < names.size(); ++a)
    for (std::size_t b = 0; b < a; ++b)
      if (names[a].second == names[b].second && std::memcmp(names[a].first, names[b].first, names[a].second) == 0)
        return false;
  for (std::size_t i = 0; i < names_.size(); ++i) {
    const std::string& want = names_[i];
    auto it = std::find_if(names.begin(), names.end(), [&](const auto& s) {
      return s.second == want.size() && std::memcmp(s.first, want.data(), want.size()) == 0;
    });
    if (it == names.end()) return false;
    order_[i] = static_cast<std::uint32_t>(it - names.begin());
  }
  names_raw_.assign(data + begin, data + end);
  have_order_ = true;
  return true;
}

bool SampleGate::plausible(const double* q, const double* q_last, double elapsed) {
  const long n = nq();
  for (long i = 0; i < n; ++i)  // out_of_limits
    if (!(bounds_.lower[i] <= q[i] && q[i] <= bounds_.upper[i])) return false;
  if (q_last != nullptr)
    for (long i = 0; i < n; ++i)  // implausible_jump
      if (std::abs(q[i] - q_last[i]) > bounds_.speed[i] * elapsed + bounds_.jump_margin) return false;
  if (distance_) {  // chain_inconsistent
    const VecX& d = distance_->compute(q);
    for (long i = 0; i < d.size(); ++i)
      if (!(d[i] <= bounds_.chain_tolerance)) return false;
  }
  return true;
}

bool SampleGate::read(const std::uint8_t* data, std::size_t size, const std::int64_t* last_stamp,
                      const double* q_last, std::int64_t* stamp_ns, double* q) {
  // JointStateParser's layout: 4-byte encapsulation header, then (offsets from data) int32 sec @4,
  // uint32 nanosec @8, string frame_id @12, sequence<string> name, sequence<float64> position
  if (size < 16 || data[0] != 0x00 || data[1] != 0x01) return false;
  const std::int64_t sec = static_cast<std::int32_t>(u32(data + 4));
  const std::int64_t stamp = sec * NS + u32(data + 8);
  std::size_t off = align4(16 + std::size_t(u32(data + 12)));
  if (off + 4 > size) return false;
  const std::uint32_t count = u32(data + off);
  if (count > (size - off) / 4) return false;
  const std::size_t names_begin = off += 4;
  for (std::uint32_t c = 0; c < count; ++c) {
    if (off + 4 > size) return false;
    const std::size_t n = u32(data + off);
    if (n > size - off - 4) return false;
    off = align4(off + 4 + n);
  }
  const std::size_t names_end = off;
  if (off + 4 > size) return false;
  const std::uint32_t npos = u32(data + off);
  off += 4;
  off += (8 - (off - 4) % 8) % 8;  // doubles aligned to 8 within the payload
  if (npos != count || off > size || npos > (size - off) / 8) return false;  // reader: "malformed"
  if (!map_names(data, names_begin, names_end, count)) return false;
  for (long i = 0; i < nq(); ++i) {
    q[i] = f64(data + off + 8 * std::size_t(order_[i]));
    if (!std::isfinite(q[i])) return false;  // reader: "non_finite"
  }
  double elapsed = 0.0;
  if (last_stamp != nullptr) {
    if (stamp <= *last_stamp) return false;  // the core: duplicate_stamp, out_of_order
    elapsed = static_cast<double>(stamp - *last_stamp) / static_cast<double>(NS);
  }
  if (!plausible(q, last_stamp != nullptr ? q_last : nullptr, elapsed)) return false;
  *stamp_ns = stamp;
  return true;
}

}  // namespace mc
