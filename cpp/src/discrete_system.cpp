// One-step map, batch loops and the stateful integrator (see discrete_system.hpp).
#include "marionette/discrete_system.hpp"

#include <algorithm>
#include <exception>
#include <thread>

namespace mc {

DiscreteSystem::DiscreteSystem(std::shared_ptr<const Model> model, VIOptions options)
    : model_(std::move(model)), opt_(options), z_(*model_), s_(*model_) {
  opt_.validate();
  xx_.setZero(z_.nx, z_.nx);
  xu_.setZero(z_.nx, z_.nU);
  uu_.setZero(z_.nU, z_.nU);
  dx_.setZero(z_.nx);
  a_.setZero(z_.nd);
  b_.setZero(z_.nd);
  c_.setZero(z_.m);
  alpha_.setZero(z_.n);
  beta_.setZero(z_.n);
}

void DiscreteSystem::solve_at(const double* x, const double* u, const double* guess, long index) {
  load_step(*model_, s_, x, u);
  if (guess) s_.q2 = Eigen::Map<const VecX>(guess, z_.n);
  else s_.q2 = s_.q1;
  midpoint_step(*model_, opt_, s_, index);
}

void DiscreteSystem::solve_on_trajectory(const double* x, const double* u, const double* x_next, long index,
                                         int order, bool consecutive) {
  load_step(*model_, s_, x, u);
  s_.q2 = Eigen::Map<const VecX>(x_next, z_.n);
  if (consecutive) hand_on_constraints(s_);
  midpoint_step_at_solution(*model_, opt_, s_, index, order, consecutive);
}

void DiscreteSystem::store_lambda(double* out) const {
  if (out != nullptr) Eigen::Map<VecX>(out, z_.m) = s_.lambda;
}

int DiscreteSystem::step(const double* x, const double* u, double* x_next, const double* guess, long index) {
  solve_at(x, u, guess, index);
  store_next_state(*model_, opt_, s_, x_next);
  return s_.iterations;
}

void DiscreteSystem::constraint_forces(const double* x, const double* u, double* lam) {
  solve_at(x, u, nullptr, 0);
  store_lambda(lam);
}

void DiscreteSystem::linearize(const double* x, const double* u, double* x_next, double* A, double* B, double* lam,
                               double* lam_x, double* lam_u) {
  solve_at(x, u, nullptr, 0);
  store_next_state(*model_, opt_, s_, x_next);
  step_first_derivatives(*model_, opt_, s_, A, B);
  store_lambda(lam);
  if (lam_x != nullptr) store_constraint_force_derivatives(*model_, s_, lam_x, lam_u);
}

void DiscreteSystem::second_contracted(const double* x, const double* u, const double* z, double* xx, double* xu,
                                       double* uu, const double* w) {
  solve_at(x, u, nullptr, 0);
  step_implicit_derivatives(*model_, opt_, s_);
  step_second_contracted(*model_, opt_, s_, Eigen::Map<const VecX>(z, z_.nx), xx_, xu_, uu_, w);
  RowMap(xx, z_.nx, z_.nx) = xx_;
  RowMap(xu, z_.nx, z_.nU) = xu_;
  RowMap(uu, z_.nU, z_.nU) = uu_;
}

void DiscreteSystem::second_directional(const double* x, const double* u, const double* dx, const double* du,
                                        double* out, double* lam_dd) {
  solve_at(x, u, nullptr, 0);
  step_implicit_derivatives(*model_, opt_, s_);
  VecX o(z_.nx);
  step_second_directional(*model_, opt_, s_, Eigen::Map<const VecX>(dx, z_.nx), Eigen::Map<const VecX>(du, z_.nU), o,
                          lam_dd);
  Eigen::Map<VecX>(out, z_.nx) = o;
}

void DiscreteSystem::second_full(const double* x, const double* u, double* fxx, double* fxu, double* fuu) {
  solve_at(x, u, nullptr, 0);
  step_implicit_derivatives(*model_, opt_, s_);
  const int nx = z_.nx, nU = z_.nU;
  VecX e = VecX::Zero(nx);
  for (int i = 0; i < nx; ++i) {
    e.setZero();
    e[i] = 1.0;
    step_second_contracted(*model_, opt_, s_, e, xx_, xu_, uu_);
    RowMap(fxx + static_cast<long>(i) * nx * nx, nx, nx) = xx_;
    RowMap(fxu + static_cast<long>(i) * nx * nU, nx, nU) = xu_;
    RowMap(fuu + static_cast<long>(i) * nU * nU, nU, nU) = uu_;
  }
}

void DiscreteSystem::simulate(const double* x0, const double* U, int N, double* X, int* iterations, double* Lam) {
  const int nx = z_.nx, nU = z_.nU, n = z_.n;
  std::copy(x0, x0 + nx, X);
  s_.lambda.setZero();
  for (int k = 0; k < N; ++k) {
    const double* xk = X + static_cast<long>(k) * nx;
    load_step(*model_, s_, xk, U + static_cast<long>(k) * nU);
    // Guess: linear extrapolation of the configuration (q_k + dt v_k over dynamic rows is unknown; use q_k - q_{k-1}).
    s_.q2 = s_.q1;
    if (k > 0) s_.q2.head(z_.nd) += s_.q1.head(z_.nd) - Eigen::Map<const VecX>(xk - nx, n).head(z_.nd);
    if (k > 0 && z_.m > 0) {
      hand_on_constraints(s_);  // h(q_k): step k-1's last evaluation
      midpoint_step_given_h1(*model_, opt_, s_, k);
    } else {
      midpoint_step(*model_, opt_, s_, k);
    }
    store_next_state(*model_, opt_, s_, X + static_cast<long>(k + 1) * nx);
    if (iterations) iterations[k] = s_.iterations;
    if (Lam) store_lambda(Lam + static_cast<long>(k) * z_.m);
  }
}

template <class Work>
void DiscreteSystem::for_chunks(int N, int threads, const Work& work) {
  threads = std::max(1, std::min(threads, N));
  if (threads == 1) {
    work(*this, 0, N);
    return;
  }
  while (static_cast<int>(workers_.size()) < threads - 1) workers_.push_back(std::make_unique<DiscreteSystem>(model_, opt_));
  auto start = [N, threads](int j) { return static_cast<int>(static_cast<long>(N) * j / threads); };
  std::vector<std::exception_ptr> errors(threads);
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (int j = 1; j < threads; ++j) {
    pool.emplace_back([&, j] {
      try {
        work(*workers_[j - 1], start(j), start(j + 1));
      } catch (...) {
        errors[j] = std::current_exception();
      }
    });
  }
  try {
    work(*this, 0, start(1));
  } catch (...) {
    errors[0] = std::current_exception();
  }
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

void DiscreteSystem::constraint_forces_trajectory(const double* X, const double* U, int N, double* Lam, int threads) {
  const int nx = z_.nx, nU = z_.nU, m = z_.m;
  for_chunks(N, threads, [&](DiscreteSystem& ds, int k0, int k1) {
    for (int k = k0; k < k1; ++k) {
      ds.solve_on_trajectory(X + static_cast<long>(k) * nx, U + static_cast<long>(k) * nU,
                             X + static_cast<long>(k + 1) * nx, k, 1, k > k0 && m > 0);
      ds.store_lambda(Lam + static_cast<long>(k) * m);
    }
  });
}

void DiscreteSystem::linearize_trajectory(const double* X, const double* U, int N, double* A, double* B, double* Lam,
                                          double* Lam_x, double* Lam_u, int threads) {
  const int nx = z_.nx, nU = z_.nU, m = z_.m;
  for_chunks(N, threads, [&](DiscreteSystem& ds, int k0, int k1) {
    StepData& s = ds.s_;
    for (int k = k0; k < k1; ++k) {
      ds.solve_on_trajectory(X + static_cast<long>(k) * nx, U + static_cast<long>(k) * nU,
                             X + static_cast<long>(k + 1) * nx, k, 2, k > k0 && m > 0);
      step_first_derivatives(*model_, opt_, s, A + static_cast<long>(k) * nx * nx, B + static_cast<long>(k) * nx * nU);
      if (Lam) ds.store_lambda(Lam + static_cast<long>(k) * m);
      if (Lam_x)
        store_constraint_force_derivatives(*model_, s, Lam_x + static_cast<long>(k) * m * nx,
                                           Lam_u + static_cast<long>(k) * m * nU);
    }
  });
}

void DiscreteSystem::second_contracted_trajectory(const double* X, const double* U, const double* Z, int N, double* xx,
                                                  double* xu, double* uu, const double* W, int threads) {
  const int nx = z_.nx, nU = z_.nU, m = z_.m;
  for_chunks(N, threads, [&](DiscreteSystem& ds, int k0, int k1) {
    StepData& s = ds.s_;
    for (int k = k0; k < k1; ++k) {
      ds.solve_on_trajectory(X + static_cast<long>(k) * nx, U + static_cast<long>(k) * nU,
                             X + static_cast<long>(k + 1) * nx, k, 3, k > k0 && m > 0);
      step_implicit_derivatives(*model_, opt_, s);
      step_second_contracted(*model_, opt_, s, Eigen::Map<const VecX>(Z + static_cast<long>(k) * nx, nx), ds.xx_,
                             ds.xu_, ds.uu_, W ? W + static_cast<long>(k) * m : nullptr);
      RowMap(xx + static_cast<long>(k) * nx * nx, nx, nx) = ds.xx_;
      RowMap(xu + static_cast<long>(k) * nx * nU, nx, nU) = ds.xu_;
      RowMap(uu + static_cast<long>(k) * nU * nU, nU, nU) = ds.uu_;
    }
  });
}

void DiscreteSystem::project(const double* x0, const double* Xbar, const double* Ubar, const double* K, int N,
                             double* X, double* U, double* Lam) {
  const int nx = z_.nx, nU = z_.nU, n = z_.n, nd = z_.nd;
  std::copy(x0, x0 + nx, X);
  s_.lambda.setZero();
  for (int k = 0; k < N; ++k) {
    const long kx = static_cast<long>(k) * nx, ku = static_cast<long>(k) * nU;
    Eigen::Map<VecX> u(U + ku, nU);
    const Eigen::Map<const VecX> x(X + kx, nx), xbar(Xbar + kx, nx);
    u = Eigen::Map<const VecX>(Ubar + ku, nU);
    dx_ = x - xbar;
    u.noalias() -= ConstRowMap(K + static_cast<long>(k) * nU * nx, nU, nx) * dx_;
    // Newton guess: the reference's next configuration shifted by the current deviation from
    // the reference, q̄_{k+1} + (q_k - q̄_k) on the dynamic rows: q̄_{k+1} itself near
    // convergence, and it follows a trajectory that has drifted from a far-off reference (an
    // early Armijo trial) instead of starting Newton from that reference.
    load_step(*model_, s_, X + kx, U + ku);
    s_.q2 = Eigen::Map<const VecX>(Xbar + kx + nx, n);
    s_.q2.head(nd) += x.head(nd) - xbar.head(nd);
    if (k > 0 && z_.m > 0) {
      hand_on_constraints(s_);  // h(q_k): step k-1's last evaluation, at its solution q_k
      midpoint_step_given_h1(*model_, opt_, s_, k);
    } else {
      midpoint_step(*model_, opt_, s_, k);
    }
    store_next_state(*model_, opt_, s_, X + kx + nx);
    if (Lam) store_lambda(Lam + static_cast<long>(k) * z_.m);
  }
}

void DiscreteSystem::del_residual(const double* p0, const double* Q, const double* Uf, const double* Lam, int N,
                                  double* R, double* P, double* J, double* JP) {
  const int n = z_.n, nd = z_.nd, nu = z_.nu, m = z_.m;
  const int nr = nd + m, nc = 3 * n + 2 * nu + m, np = 2 * n + nu;
  const int cu0 = 3 * n, cu = 3 * n + nu, cl = 3 * n + 2 * nu;  // columns of u_{k-1}, u_k, lambda_k
  const double fm = model_->forcing_minus() * opt_.dt, fp = model_->forcing_plus() * opt_.dt;
  const int order = J != nullptr ? 1 : 0;
  if (J != nullptr) std::fill(J, J + static_cast<long>(N) * nr * nc, 0.0);
  for (int k = 0; k < N; ++k) {
    load_interval(*model_, opt_, s_, Q + static_cast<long>(k) * n, Q + static_cast<long>(k + 1) * n,
                  Uf + static_cast<long>(k) * nu, Lam + static_cast<long>(k) * m, order);
    interval_residual(*model_, opt_, s_, a_, b_, c_);
    // r_k = p_k + a_k with p_k = P[k-1] = b_{k-1} (k >= 1) or p0; then P[k] = b_k.
    Eigen::Map<VecX> r(R + static_cast<long>(k) * nr, nr);
    r.head(nd) = a_ + (k == 0 ? Eigen::Map<const VecX>(p0, nd) : Eigen::Map<const VecX>(P + static_cast<long>(k - 1) * nd, nd));
    r.tail(m) = c_;
    Eigen::Map<VecX>(P + static_cast<long>(k) * nd, nd) = b_;
    if (J == nullptr) continue;
    interval_jacobian_blocks(*model_, opt_, s_);
    RowMap Jk(J + static_cast<long>(k) * nr * nc, nr, nc);
    Jk.block(0, n, nd, n) += s_.S11.topRows(nd) - s_.Hz.topLeftCorner(nd, n);
    Jk.block(0, 2 * n, nd, n) = s_.S12.topRows(nd);
    Jk.block(0, cu, nd, nu) = fm * s_.F.Fu.topRows(nd);
    if (m > 0) {
      Jk.block(0, cl, nd, m) = -s_.h1.Dh.leftCols(nd).transpose();
      Jk.block(nd, 2 * n, m, n) = s_.h2.Dh;
    }
    RowMap JPk(JP + static_cast<long>(k) * nd * np, nd, np);
    JPk.leftCols(n) = s_.S21.topRows(nd);
    JPk.middleCols(n, n) = s_.S22.topRows(nd);
    JPk.rightCols(nu) = fp * s_.F.Fu.topRows(nd);
    if (k + 1 < N) {  // b_k is p_{k+1} in node k+1's residual: its (q_k | q_{k+1} | u_k) columns
      RowMap Jn(J + static_cast<long>(k + 1) * nr * nc, nr, nc);
      Jn.block(0, 0, nd, n) = s_.S21.topRows(nd);
      Jn.block(0, n, nd, n) += s_.S22.topRows(nd);
      Jn.block(0, cu0, nd, nu) = fp * s_.F.Fu.topRows(nd);
    }
  }
}

void DiscreteSystem::del_hessian(const double* Q, const double* Uf, const double* Lam, const double* Y, const double* Z,
                                 int N, double* H) {
  const int n = z_.n, nd = z_.nd, nu = z_.nu, m = z_.m;
  const int nr = nd + m, nN = 2 * n + nu + m;
  for (int j = 0; j < N; ++j) {
    load_interval(*model_, opt_, s_, Q + static_cast<long>(j) * n, Q + static_cast<long>(j + 1) * n,
                  Uf + static_cast<long>(j) * nu, Lam + static_cast<long>(j) * m, 2);
    // Weights: alpha = Y_j on a_j; beta = Y_{j+1} + Z_j on b_j = p_{j+1}; gamma = Y_j's h rows on c_j.
    const double* yj = Y + static_cast<long>(j) * nr;
    alpha_.head(nd) = Eigen::Map<const VecX>(yj, nd);
    beta_.head(nd).setZero();
    if (j + 1 < N) beta_.head(nd) = Eigen::Map<const VecX>(yj + nr, nd);
    if (Z != nullptr) beta_.head(nd) += Eigen::Map<const VecX>(Z + static_cast<long>(j) * nd, nd);
    interval_weighted_hessian(*model_, opt_, s_, alpha_, beta_, yj + nd, s_.Psi);
    RowMap(H + static_cast<long>(j) * nN * nN, nN, nN) = s_.Psi;
  }
}

void DiscreteSystem::discrete_momentum(const double* q_prev, const double* q, const double* u_prev, double* p) {
  mc::discrete_momentum(*model_, opt_, s_, q_prev, q, u_prev, p);
}

void DiscreteSystem::state_from_configs(const double* q_prev, const double* q, const double* u_prev, double* x) {
  const int n = z_.n, nd = z_.nd, nk = z_.nk;
  std::copy(q, q + n, x);
  mc::discrete_momentum(*model_, opt_, s_, q_prev, q, u_prev, x + n);
  for (int i = 0; i < nk; ++i) x[n + nd + i] = (q[nd + i] - q_prev[nd + i]) / opt_.dt;
}

MidpointVI::MidpointVI(std::shared_ptr<const Model> model, VIOptions options)
    : system_(std::move(model), options) {
  const Layout& z = system_.layout();
  x_.setZero(z.nx);
  xn_.setZero(z.nx);
  uk_.setZero(z.nU);
  q_prev_.setZero(z.n);
  guess_.setZero(z.n);
}

void MidpointVI::initialize_from_configs(const double* q0, const double* q1, double t1, const double* u0) {
  system_.state_from_configs(q0, q1, u0, x_.data());
  q_prev_ = Eigen::Map<const VecX>(q0, system_.layout().n);
  t_ = t1;
  k_ = 1;
  initialized_ = true;
}

void MidpointVI::initialize_from_state(const double* x, double t) {
  const Layout& z = system_.layout();
  x_ = Eigen::Map<const VecX>(x, z.nx);
  q_prev_ = x_.head(z.n);
  t_ = t;
  k_ = 0;
  initialized_ = true;
}

int MidpointVI::step(const double* u, const double* rho_next) {
  if (!initialized_) throw std::logic_error("MidpointVI.step called before initialize_from_configs/initialize_from_state");
  const Layout& z = system_.layout();
  uk_.head(z.nu) = Eigen::Map<const VecX>(u, z.nu);
  uk_.tail(z.nk) = Eigen::Map<const VecX>(rho_next, z.nk);
  // Guess q_{k+1} by extrapolating the configuration.
  guess_ = 2.0 * x_.head(z.n) - q_prev_;
  const int it = system_.step(x_.data(), uk_.data(), xn_.data(), guess_.data(), k_);
  q_prev_ = x_.head(z.n);
  x_ = xn_;
  t_ += system_.options().dt;
  ++k_;
  return it;
}

}  // namespace mc
