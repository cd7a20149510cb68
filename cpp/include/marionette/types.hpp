// Common types, packed symmetric index helpers and error types of the core.
#pragma once

#include <Eigen/Dense>
#include <stdexcept>
#include <string>

namespace mc {

using Mat3 = Eigen::Matrix3d;
using Vec3 = Eigen::Vector3d;
using Vec6 = Eigen::Matrix<double, 6, 1>;
using VecX = Eigen::VectorXd;
using MatX = Eigen::MatrixXd;
using MatXR = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// Packed storage of symmetric derivative tensors over a frame's ancestor
/// configurations (thesis §2.5.1: a frame depends only on its ancestors).
/// Entries are indexed by sorted multi-indices; the packed index does not
/// depend on the tensor's dimension, so a parent's packed block is a prefix of
/// its child's (the child's ancestor list extends the parent's by at most one).
inline int packed2(int i, int j) {  // requires i <= j
  return j * (j + 1) / 2 + i;
}
inline int packed3(int i, int j, int l) {  // requires i <= j <= l
  return l * (l + 1) * (l + 2) / 6 + j * (j + 1) / 2 + i;
}
inline int packed2_size(int d) { return d * (d + 1) / 2; }
inline int packed3_size(int d) { return d * (d + 1) * (d + 2) / 6; }
inline int sym2(int i, int j) { return i <= j ? packed2(i, j) : packed2(j, i); }
inline int sym3(int i, int j, int l) {
  if (i > j) std::swap(i, j);
  if (j > l) std::swap(j, l);
  if (i > j) std::swap(i, j);
  return packed3(i, j, l);
}

/// Invalid model description or argument (bound to Python's ValueError).
struct ModelError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// Why a variational-integrator step failed (seed 001 §VII for the singular cases).
enum class StepFailure { NO_CONVERGENCE, SINGULAR_MASS_MATRIX, SINGULAR_CONSTRAINT_MATRIX, NON_FINITE };

const char* step_failure_name(StepFailure f);

/// A step of the integrator could not be taken. Carries the step index, the
/// residual norm reached and the reason.
struct StepError : std::runtime_error {
  StepError(const std::string& msg, long step, double residual, StepFailure reason, int iterations)
      : std::runtime_error(msg), step(step), residual(residual), reason(reason), iterations(iterations) {}
  long step;
  double residual;
  StepFailure reason;
  int iterations;
};

}  // namespace mc
