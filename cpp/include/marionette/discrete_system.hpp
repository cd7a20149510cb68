// The one-step map x_{k+1} = f(x_k, u_k) of the midpoint VI in the shared
// state/input layout, its derivatives, whole-trajectory batch loops, and the
// stateful MidpointVI integrator (thesis ch. 4; trep's MidpointVI/DSystem
// vocabulary: (q1, p1) -> (q2, p2)).
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "marionette/del_equations.hpp"

namespace mc {

/// Row-major views used by the batch loops (numpy's C order).
using RowMap = Eigen::Map<MatXR>;
using ConstRowMap = Eigen::Map<const MatXR>;

class DiscreteSystem {
 public:
  DiscreteSystem(std::shared_ptr<const Model> model, VIOptions options);
  const Model& model() const { return *model_; }
  std::shared_ptr<const Model> model_ptr() const { return model_; }
  const VIOptions& options() const { return opt_; }
  const Layout& layout() const { return z_; }

  /// x_next = f(x, u). `guess` (n or null) initializes q2; returns Newton iterations.
  int step(const double* x, const double* u, double* x_next, const double* guess = nullptr, long index = 0);
  /// Multipliers of the last solved step (m).
  const VecX& last_lambda() const { return s_.lambda; }
  /// lambda_k (m) of the step (x, u): the constraint impulse over the step is -Dh(q_k)^T lambda_k
  /// (thesis (4.36)).
  void constraint_forces(const double* x, const double* u, double* lam);
  /// x_next, A (nx, nx), B (nx, nU) (row-major buffers); unless lam_x is null also lambda (m),
  /// d lambda/dx (m, nx) and d lambda/du (m, nU) of the same solve (thesis (4.37)-(4.38)).
  void linearize(const double* x, const double* u, double* x_next, double* A, double* B, double* lam = nullptr,
                 double* lam_x = nullptr, double* lam_u = nullptr);
  /// z^T D2f + w^T D2lambda blocks (row-major), after solving and linearizing at (x, u); w (m) may be null.
  void second_contracted(const double* x, const double* u, const double* z, double* xx, double* xu, double* uu,
                         const double* w = nullptr);
  /// D2f o (d, d) (nx) and, unless lam_dd is null, D2lambda o (d, d) (m).
  void second_directional(const double* x, const double* u, const double* dx, const double* du, double* out,
                          double* lam_dd = nullptr);
  /// Full tensors fxx (nx, nx, nx), fxu (nx, nx, nU), fuu (nx, nU, nU): index 0 is the output.
  void second_full(const double* x, const double* u, double* fxx, double* fxu, double* fuu);

  /// Batch loops over N steps; X (N+1, nx), U (N, nU), Lam (N, m), row-major. An optional
  /// output (null = not wanted) comes from the same solves as the others.
  void simulate(const double* x0, const double* U, int N, double* X, int* iterations, double* Lam = nullptr);
  /// The loops below solve every step k from (X[k], U[k]) with the guess X[k+1]: given the trajectory
  /// the steps are independent, and `threads` > 1 splits them into that many contiguous chunks, the
  /// first solved on the calling thread with this object's workspace, each other on a thread of its own
  /// with a worker's (a DiscreteSystem on the same immutable Model, made on first use and kept: Model
  /// / Data). Each step is solved by midpoint_step_at_solution from X[k+1] (one evaluation at the
  /// order the derivatives need when X[k+1] solves the step; Newton from there otherwise): nothing
  /// carries over from step to step but, on a model with constraints, the constraints at X[k+1] (step k's
  /// h(q2), evaluated to the loop's order, are step k+1's h(q1): midpoint_step_at_solution's `consecutive`),
  /// the same numbers as evaluated again, so the results are one thread's. The error of the earliest failing step is the one raised.
  /// lambda_k of every step k.
  void constraint_forces_trajectory(const double* X, const double* U, int N, double* Lam, int threads = 1);
  /// A (N, nx, nx), B (N, nx, nU); unless Lam_x is null also Lam (N, m), Lam_x (N, m, nx), Lam_u (N, m, nU).
  void linearize_trajectory(const double* X, const double* U, int N, double* A, double* B, double* Lam = nullptr,
                            double* Lam_x = nullptr, double* Lam_u = nullptr, int threads = 1);
  /// Z (N, nx): covector of x_{k+1} for step k; W (N, m, or null): covector of lambda_k.
  /// Outputs (N, nx, nx), (N, nx, nU), (N, nU, nU).
  void second_contracted_trajectory(const double* X, const double* U, const double* Z, int N, double* xx, double* xu,
                                    double* uu, const double* W = nullptr, int threads = 1);

  /// Projection operator of thesis (6.10): x(0) = x0, u(k) = ubar(k) - K(k)(x(k) - xbar(k)),
  /// x(k+1) = f(x(k), u(k)). Xbar (N+1, nx), Ubar (N, nU), K (N, nU, nx); writes X (N+1, nx), U (N, nU)
  /// and, unless null, the multipliers Lam (N, m) of the computed steps.
  void project(const double* x0, const double* Xbar, const double* Ubar, const double* K, int N, double* X, double* U,
               double* Lam = nullptr);

  /// The forced constrained DEL equations of a configuration trajectory as residuals
  /// (del_equations.hpp; seed 002 (3.6), the equality constraints of direct transcription).
  /// p0 (nd) initial momentum, Q (N+1, n) configurations q_0..q_N (kinematic columns included),
  /// Uf (N, nu) force inputs, Lam (N, m) multipliers. Writes R (N, nd + m): row k = [r_k; h(q_{k+1})],
  /// and P (N, nd): P[k] = p_{k+1} = [D_2 L_d(q_k, q_{k+1}) + f+_k]_dyn. Unless J is null also the Jacobians
  /// J (N, nd + m, 3n + 2nu + m) of row k with respect to (q_{k-1} | q_k | q_{k+1} | u_{k-1} | u_k | lambda_k)
  /// (q_{-1}, u_{-1} columns zero; the u_{k-1} columns are D_3 f+_{k-1}, zero under the thesis rule) and
  /// JP (N, nd, 2n + nu) of P[k] with respect to (q_k | q_{k+1} | u_k).
  void del_residual(const double* p0, const double* Q, const double* Uf, const double* Lam, int N, double* R,
                    double* P, double* J = nullptr, double* JP = nullptr);
  /// Hessian of sum_k Y[k].R[k] + Z[k].P[k] (Y (N, nd + m), Z (N, nd) or null) as interval blocks
  /// H (N, 2n + nu + m, 2n + nu + m) over (q_j | q_{j+1} | u_j | lambda_j): the full Hessian is their
  /// sum, each placed at its interval's variables (blocks of neighbouring intervals overlap in q).
  void del_hessian(const double* Q, const double* Uf, const double* Lam, const double* Y, const double* Z, int N,
                   double* H);

  /// Discrete Legendre transform p = [D_2 L_d(q_prev, q) + f+(q_prev, q, u_prev)]_dyn (nd); u_prev (nu):
  /// the force inputs over the step from q_prev to q (null: zero).
  void discrete_momentum(const double* q_prev, const double* q, const double* u_prev, double* p);
  /// Full state from two consecutive configurations: [q; p(q_prev, q, u_prev); (rho - rho_prev)/dt].
  void state_from_configs(const double* q_prev, const double* q, const double* u_prev, double* x);

  std::mutex& mutex() { return mutex_; }

 private:
  /// Loads and solves the step (x, u) from `guess` (null: q1).
  void solve_at(const double* x, const double* u, const double* guess, long index);
  /// Loads the step (x, u) of a trajectory whose next state is x_next and solves it by
  /// midpoint_step_at_solution to `order` (1: lambda, 2: first derivatives, 3: second-order forms);
  /// `consecutive`: step index - 1 was the last one solved (its h(q2) is handed on).
  void solve_on_trajectory(const double* x, const double* u, const double* x_next, long index, int order,
                           bool consecutive = false);
  /// Writes lambda of the solved step (m) to out, unless out is null.
  void store_lambda(double* out) const;
  /// work(system, k0, k1) over the steps [0, N) in `threads` chunks (see the batch loops above).
  template <class Work>
  void for_chunks(int N, int threads, const Work& work);
  std::vector<std::unique_ptr<DiscreteSystem>> workers_;  ///< workspaces of the batch loops' other threads
  std::shared_ptr<const Model> model_;
  VIOptions opt_;
  Layout z_;
  StepData s_;
  MatX xx_, xu_, uu_;
  VecX dx_;  ///< x - xbar in the projection loop
  VecX a_, b_, c_, alpha_, beta_;  ///< DEL interval functions and Hessian weights
  std::mutex mutex_;
};

/// Stateful integrator: holds (q_k, p_k, v_k) and advances with step(u, rho_{k+1}).
class MidpointVI {
 public:
  MidpointVI(std::shared_ptr<const Model> model, VIOptions options);
  /// From two configurations: p1 = D_2 L_d(q0, q1) + f+(q0, q1, u0) (thesis §4.2, the initialization
  /// after (4.15); u0 (nu) the force inputs between them, null: zero), v1 = (rho1 - rho0)/dt.
  void initialize_from_configs(const double* q0, const double* q1, double t1, const double* u0 = nullptr);
  /// From a state x = [q; p; v].
  void initialize_from_state(const double* x, double t);
  int step(const double* u, const double* rho_next);
  const VecX& x() const { return x_; }
  const VecX& lambda() const { return system_.last_lambda(); }
  double t() const { return t_; }
  long k() const { return k_; }
  DiscreteSystem& system() { return system_; }

 private:
  DiscreteSystem system_;
  VecX x_, xn_, uk_, q_prev_, guess_;
  double t_ = 0.0;
  long k_ = 0;
  bool initialized_ = false;
};

}  // namespace mc
