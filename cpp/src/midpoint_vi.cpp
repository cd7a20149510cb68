// Midpoint variational integrator step and its exact derivatives (see midpoint_vi.hpp).
#include "marionette/midpoint_vi.hpp"

#include "marionette/del_equations.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace mc {

namespace {

std::string fmt(double v) {
  std::ostringstream s;
  s.precision(3);
  s << std::scientific << v;
  return s.str();
}

/// Cheap singularity test of an LU factorization without allocating: the
/// spread of |U_ii| (partial pivoting keeps |L_ij| <= 1).
bool lu_singular(const Eigen::PartialPivLU<MatX>& lu) {
  const auto d = lu.matrixLU().diagonal().cwiseAbs();
  if (d.size() == 0) return false;
  const double hi = d.maxCoeff(), lo = d.minCoeff();
  return !(std::isfinite(hi) && lo > 1e-14 * hi);
}

[[noreturn]] void fail(StepData& s, long step, StepFailure why, const std::string& detail) {
  std::ostringstream msg;
  msg << "midpoint VI step " << step << " failed (" << step_failure_name(why) << "): " << detail
      << "; residual " << fmt(s.residual) << " after " << s.iterations << " Newton iterations";
  throw StepError(msg.str(), step, s.residual, why, s.iterations);
}

/// Tells apart the two singular cases of the Newton matrix (seed 001 §VII).
[[noreturn]] void diagnose_singular(const Model& model, StepData& s, long step) {
  const int nd = model.nd, m = model.nc();
  const MatX M = s.kkt.topLeftCorner(nd, nd);
  Eigen::FullPivLU<MatX> luM(M);
  luM.setThreshold(1e-12);
  if (!M.allFinite() || !luM.isInvertible())
    fail(s, step, StepFailure::SINGULAR_MASS_MATRIX,
         "M_{k+1} = D2D1Ld + D2f- is singular (rank " + std::to_string(luM.rank()) + " of " + std::to_string(nd) + ")");
  const MatX S = s.kkt.bottomLeftCorner(m, nd) * luM.solve(MatX(-s.kkt.topRightCorner(nd, m)));
  Eigen::FullPivLU<MatX> luS(S);
  luS.setThreshold(1e-12);
  fail(s, step, StepFailure::SINGULAR_CONSTRAINT_MATRIX,
       "Dh(q_{k+1}) M^-1 Dh(q_k)^T is singular (rank " + std::to_string(luS.rank()) + " of " + std::to_string(m) +
           "): the constraints are degenerate at this configuration");
}

/// Builds and factorizes the Newton matrix [[M_{k+1}, -Dh_dyn(q1)^T], [Dh_dyn(q2), 0]] of (4.36)
/// from s.S12 = D2 D1 Ld + D2 f- (all rows) and the constraint Jacobians at q1 and q2.
void factorize_newton_matrix(const Model& model, StepData& s, long step) {
  const int nd = model.nd, m = model.nc();
  s.kkt.topLeftCorner(nd, nd) = s.S12.topLeftCorner(nd, nd);
  if (m > 0) {
    s.kkt.topRightCorner(nd, m) = -s.h1.Dh.leftCols(nd).transpose();
    s.kkt.bottomLeftCorner(m, nd) = s.h2.Dh.leftCols(nd);
    s.kkt.bottomRightCorner(m, m).setZero();
  }
  s.lu.compute(s.kkt);
  if (lu_singular(s.lu)) diagnose_singular(model, s, step);
}

}  // namespace

void VIOptions::validate() const {
  if (!(dt > 0) || !std::isfinite(dt)) throw ModelError("time step dt must be finite and > 0, got " + std::to_string(dt));
  if (!(tolerance > 0) || !std::isfinite(tolerance))
    throw ModelError("tolerance must be finite and > 0, got " + std::to_string(tolerance));
  if (max_iterations < 1) throw ModelError("max_iterations must be >= 1");
}

Layout::Layout(const Model& M)
    : n(M.nq()), nd(M.nd), nk(M.nk), nu(M.nu()), m(M.nc()), nx(M.nx()), nU(M.nU()),
      nw(M.nq() + M.nd + M.nu() + M.nk) {}

StepData::StepData(const Model& model)
    : mid(model), at1(model), at2(model), L(model), F(model), h1(model), h2(model) {
  const Layout z(model);
  const int ny = z.nd + z.m;
  q1.setZero(z.n); p1.setZero(z.nd); u.setZero(z.nu); rho2.setZero(z.nk);
  q2.setZero(z.n); p2.setZero(z.nd); lambda.setZero(z.m);
  qbar.setZero(z.n); qdot.setZero(z.n); r.setZero(ny); dy.setZero(ny);
  kkt.setZero(ny, ny);
  lu = Eigen::PartialPivLU<MatX>(ny);
  lu_t = Eigen::PartialPivLU<MatX>(ny);
  gram = Eigen::LLT<MatX>(z.m);
  gram_m.setZero(z.m, z.m);
  S11.setZero(z.n, z.n); scratch.setZero(z.n, z.n); S12.setZero(z.n, z.n); S22.setZero(z.n, z.n); S21.setZero(z.n, z.n);
  Kinv.setZero(ny, ny); Gq.setZero(z.nd, z.n); Y.setZero(ny, z.nw);
  const int nN = 2 * z.n + z.nu + z.m;
  eta.setZero(2 * z.n); nu.setZero(ny); mu.setZero(ny); cvec.setZero(z.n); evec.setZero(z.n); fvec.setZero(z.n);
  dw.setZero(z.nw); dN.setZero(nN);
  Hz.setZero(2 * z.n, 2 * z.n); Fqq.setZero(z.n, z.n); Fqu.setZero(z.n, z.nu);
  Psi.setZero(nN, nN); D.setZero(nN, z.nw); HD.setZero(nN, z.nw); Hw.setZero(z.nw, z.nw); hc.setZero(z.m, z.n);
}

void load_step(const Model& model, StepData& s, const double* x, const double* u) {
  const Layout z(model);
  s.q1 = Eigen::Map<const VecX>(x, z.n);
  s.p1 = Eigen::Map<const VecX>(x + z.n, z.nd);
  s.u = Eigen::Map<const VecX>(u, z.nu);
  s.rho2 = Eigen::Map<const VecX>(u + z.nu, z.nk);
}

void store_next_state(const Model& model, const VIOptions& opt, const StepData& s, double* x) {
  const Layout z(model);
  Eigen::Map<VecX>(x, z.n) = s.q2;
  Eigen::Map<VecX>(x + z.n, z.nd) = s.p2;
  Eigen::Map<VecX>(x + z.n + z.nd, z.nk) = (s.rho2 - s.q1.tail(z.nk)) / opt.dt;
}

namespace {

/// Evaluates L to `order`, F to `order_f` at the midpoint and h(q2) to `order_h2` at the step's current q2, and the
/// residual of (4.36) G = [p1 + (dt/2) Lq - Lv + w- dt F - Dh_dyn(q1)^T lambda (dynamic rows); h(q2)] into s.r, its
/// max-norm into s.residual. Needs h(q1) to order >= 1.
void evaluate_step(const Model& model, const VIOptions& opt, StepData& s, int order, int order_f, int order_h2) {
  const int nd = model.nd, m = model.nc();
  const double dt = opt.dt;
  s.qbar = 0.5 * (s.q1 + s.q2);
  s.qdot = (s.q2 - s.q1) / dt;
  compute_lagrangian(model, s.mid, s.qbar.data(), s.qdot.data(), order, s.L);
  compute_forces(model, s.mid, s.qdot.data(), s.u.data(), order_f, s.F);
  compute_constraints(model, s.at2, s.q2.data(), order_h2, s.h2);
  s.r.head(nd) = s.p1 + (0.5 * dt) * s.L.Lq.head(nd) - s.L.Lv.head(nd) + (model.forcing_minus() * dt) * s.F.F.head(nd);
  if (m > 0) {
    s.r.head(nd).noalias() -= s.h1.Dh.leftCols(nd).transpose() * s.lambda;
    s.r.tail(m) = s.h2.h;
  }
  s.residual = s.r.size() ? s.r.cwiseAbs().maxCoeff() : 0.0;
}

/// p2 = [D_2 L_d + f+]_dyn of the last evaluation (at the solution): the step is solved.
void finish_step(const Model& model, const VIOptions& opt, StepData& s) {
  const int nd = model.nd;
  s.p2 = (0.5 * opt.dt) * s.L.Lq.head(nd) + s.L.Lv.head(nd);
  if (model.forcing_plus() != 0.0) s.p2.noalias() += (model.forcing_plus() * opt.dt) * s.F.F.head(nd);
  s.solved = true;
}

/// Newton's iterations of midpoint_step from the current q2 and lambda; `evaluated`: the first evaluation
/// (evaluate_step to newton_order, F to 1, h(q2) to >= 1) is already in s.
void newton_solve(const Model& model, const VIOptions& opt, StepData& s, long step, int newton_order, bool evaluated) {
  const int nd = model.nd, m = model.nc();
  const double dt = opt.dt;
  const double wm = model.forcing_minus();
  // Newton with the Jacobian kept while it converges fast (chord steps): a residual needs only
  // first derivatives of L; the Newton matrix (second derivatives) is rebuilt when the residual
  // did not drop by at least kChordRate since the last step.
  constexpr double kChordRate = 0.05;
  constexpr double kPolish = 1e-3;
  bool have_jacobian = false;
  int polished = 0;
  double last_residual = 0.0;
  for (;;) {
    const bool reuse = have_jacobian;
    if (!evaluated) evaluate_step(model, opt, s, reuse ? 1 : newton_order, reuse ? 0 : 1, 1);
    evaluated = false;
    if (!std::isfinite(s.residual))
      fail(s, step, StepFailure::NON_FINITE, "the DEL residual became NaN or inf (the step diverged)");
    // Converged. Chord steps converge linearly: polish until the residual is also well below the
    // tolerance (as Newton's quadratic last step leaves it), so the map is smooth to FD accuracy.
    if (s.residual <= opt.tolerance && (!reuse || s.residual <= kPolish * opt.tolerance || polished >= 2)) break;
    if (s.residual <= opt.tolerance) ++polished;
    if (s.iterations >= opt.max_iterations)
      fail(s, step, StepFailure::NO_CONVERGENCE,
           "Newton did not reach the tolerance " + fmt(opt.tolerance) + " within " +
               std::to_string(opt.max_iterations) + " iterations (time step too large for this motion?)");
    if (reuse && s.residual > kChordRate * last_residual && s.residual > opt.tolerance) {
      have_jacobian = false;  // slow: re-evaluate with second derivatives at this point
      continue;
    }
    if (!reuse) {
      // M_{k+1} = D2 D1 Ld + D2 f- on the dynamic block.
      slot_matrix(dt, -1, 1, s.L.Lqq, s.L.Lqv, s.L.Lqv.transpose(), s.L.Lvv, s.S12);
      s.S12.noalias() += (0.5 * wm * dt) * s.F.Fq;
      s.S12.noalias() += wm * s.F.Fv;
      factorize_newton_matrix(model, s, step);
      have_jacobian = true;
    }
    last_residual = s.residual;
    s.dy.noalias() = s.lu.solve(s.r);
    s.q2.head(nd) -= s.dy.head(nd);
    if (m > 0) s.lambda -= s.dy.tail(m);
    ++s.iterations;
  }
  finish_step(model, opt, s);  // F of the last evaluation: at the solution
}

}  // namespace

namespace {

/// midpoint_step, with h(q1) evaluated first unless `h1_given`.
void solve_step(const Model& model, const VIOptions& opt, StepData& s, long step, int newton_order, bool h1_given) {
  const Layout z(model);
  const int nd = z.nd;
  s.solved = false;
  s.have_first = false;
  s.iterations = 0;
  s.residual = 0.0;
  if (!s.q1.allFinite() || !s.p1.allFinite() || !s.u.allFinite() || !s.rho2.allFinite())
    fail(s, step, StepFailure::NON_FINITE, "the step inputs (q, p, u, rho) contain NaN or inf");
  s.q2.tail(z.nk) = s.rho2;
  if (!s.q2.allFinite() || !s.lambda.allFinite()) {
    s.q2.head(nd) = s.q1.head(nd);
    s.lambda.setZero();
  }
  if (!h1_given || s.h1.order < 1) compute_constraints(model, s.at1, s.q1.data(), 1, s.h1);
  newton_solve(model, opt, s, step, newton_order, false);
}

}  // namespace

void midpoint_step(const Model& model, const VIOptions& opt, StepData& s, long step, int newton_order) {
  solve_step(model, opt, s, step, newton_order, false);
}

void midpoint_step_given_h1(const Model& model, const VIOptions& opt, StepData& s, long step) {
  solve_step(model, opt, s, step, 2, true);
}

void hand_on_constraints(StepData& s) {
  std::swap(s.h1, s.h2);
  std::swap(s.at1, s.at2);
}

void midpoint_step_at_solution(const Model& model, const VIOptions& opt, StepData& s, long step, int order,
                               bool consecutive) {
  const Layout z(model);
  const int nd = z.nd, m = z.m;
  const int newton_order = std::max(order, 2);
  s.q2.tail(z.nk) = s.rho2;
  if (!s.q1.allFinite() || !s.p1.allFinite() || !s.u.allFinite() || !s.rho2.allFinite() || !s.q2.allFinite())
    return midpoint_step(model, opt, s, step, newton_order);  // its errors name what is wrong
  s.solved = false;
  s.have_first = false;
  s.iterations = 0;
  // The orders midpoint_step's evaluations and the derivatives' caches have: F one below L (its
  // derivatives read the velocities one order up), h(q1) as L, h(q2) one below. The residual first
  // without the multipliers, which enter it linearly.
  if (!consecutive || s.h1.order < order) compute_constraints(model, s.at1, s.q1.data(), order, s.h1);
  s.lambda.setZero();
  evaluate_step(model, opt, s, order, std::min(order - 1, 1), consecutive ? order : std::max(order - 1, 0));
  if (m > 0) {
    const auto Dh = s.h1.Dh.leftCols(nd);
    s.gram_m.noalias() = Dh * Dh.transpose();
    s.gram.compute(s.gram_m);
    if (s.gram.info() == Eigen::Success) {  // else lambda = 0: Newton finds it (or diagnoses the singularity)
      s.lambda.noalias() = Dh * s.r.head(nd);
      s.gram.solveInPlace(s.lambda);
      s.r.head(nd).noalias() -= Dh.transpose() * s.lambda;
      s.residual = s.r.cwiseAbs().maxCoeff();
    }
  }
  if (s.residual <= opt.tolerance) return finish_step(model, opt, s);
  // q2 is not the solution: Newton from it, its first evaluation the one above when it has Newton's orders.
  if (order >= 2) return newton_solve(model, opt, s, step, newton_order, true);
  midpoint_step(model, opt, s, step, newton_order);
}

void discrete_momentum(const Model& model, const VIOptions& opt, StepData& s, const double* q1, const double* q2,
                       const double* u, double* p2) {
  const Layout z(model);
  const Eigen::Map<const VecX> a(q1, z.n), b(q2, z.n);
  s.solved = false;
  s.have_first = false;
  s.qbar = 0.5 * (a + b);
  s.qdot = (b - a) / opt.dt;
  compute_lagrangian(model, s.mid, s.qbar.data(), s.qdot.data(), 1, s.L);
  Eigen::Map<VecX> p(p2, z.nd);
  p = (0.5 * opt.dt) * s.L.Lq.head(z.nd) + s.L.Lv.head(z.nd);
  const double wp = model.forcing_plus();
  if (wp == 0.0) return;
  if (u != nullptr) s.u = Eigen::Map<const VecX>(u, z.nu);
  else s.u.setZero();
  compute_forces(model, s.mid, s.qdot.data(), s.u.data(), 0, s.F);
  p.noalias() += (wp * opt.dt) * s.F.F.head(z.nd);
}

void step_implicit_derivatives(const Model& model, const VIOptions& opt, StepData& s) {
  if (!s.solved) throw std::logic_error("step_implicit_derivatives needs a solved step");
  const Layout z(model);
  const int n = z.n, nd = z.nd, nk = z.nk, nu = z.nu, m = z.m;
  const double dt = opt.dt;
  // Second-order caches at the solution (a chord step may have stopped with first order only).
  if (s.L.order < 2) {
    compute_lagrangian(model, s.mid, s.qbar.data(), s.qdot.data(), 2, s.L);
    compute_forces(model, s.mid, s.qdot.data(), s.u.data(), 1, s.F);
  }
  if (s.h1.order < 2) compute_constraints(model, s.at1, s.q1.data(), 2, s.h1);  // this step's: every solve sets it
  interval_jacobian_blocks(model, opt, s);  // S11, S12, S21, S22 and Hz = sum lambda_i D2h_i(q1)

  factorize_newton_matrix(model, s, -1);  // at the solution
  s.have_lu_t = false;  // factorized by the second-order forms when asked for
  // G_y^{-1} = U^{-1} L^{-1} P: P written out (Eigen's in-place permutation would allocate), then the two
  // triangular solves in place.
  s.Kinv.setZero();
  const auto& perm = s.lu.permutationP().indices();
  for (int j = 0; j < s.Kinv.cols(); ++j) s.Kinv(perm[j], j) = 1.0;
  s.lu.matrixLU().triangularView<Eigen::UnitLower>().solveInPlace(s.Kinv);
  s.lu.matrixLU().triangularView<Eigen::Upper>().solveInPlace(s.Kinv);

  // Y = -G_y^{-1} G_w over the columns (q1 | p1 | u | rho2) of w. G_w's dynamic rows are
  // (S11 - Hz | I | w- dt Fu | S12 on rho2), its lambda rows (0 | 0 | 0 | Dh_kin(q2)).
  const int cq = 0, cp = n, cu = n + nd, cr = n + nd + nu;
  const auto Kd = s.Kinv.leftCols(nd);
  s.Gq = s.S11.topRows(nd);
  if (m > 0) s.Gq -= s.Hz.topLeftCorner(nd, n);
  s.Y.middleCols(cq, n).noalias() = -Kd * s.Gq;
  s.Y.middleCols(cp, nd) = -Kd;
  if (nu > 0) s.Y.middleCols(cu, nu).noalias() = -(model.forcing_minus() * dt) * Kd * s.F.Fu.topRows(nd);
  if (nk > 0) {
    s.Y.middleCols(cr, nk).noalias() = -Kd * s.S12.block(0, nd, nd, nk);
    if (m > 0) s.Y.middleCols(cr, nk).noalias() -= s.Kinv.rightCols(m) * s.h2.Dh.rightCols(nk);
  }
  s.have_first = true;
}

void step_first_derivatives(const Model& model, const VIOptions& opt, StepData& s, double* A_out, double* B_out) {
  step_implicit_derivatives(model, opt, s);
  const Layout z(model);
  const int n = z.n, nd = z.nd, nk = z.nk, nu = z.nu;
  const double dt = opt.dt;
  Eigen::Map<MatXR> A(A_out, z.nx, z.nx), B(B_out, z.nx, z.nU);
  // x = (q1, p1, v1) are the first n + nd columns of w (A's last nk columns vanish: v1 enters nothing
  // but v2's definition through rho1), u = (u, rho2) its last nu + nk.
  const int nqp = n + nd, nuk = nu + nk;
  A.setZero();
  B.setZero();
  // q2: the dynamic rows are Y's, the kinematic ones select rho2.
  A.topLeftCorner(nd, nqp) = s.Y.topLeftCorner(nd, nqp);
  B.topRows(nd) = s.Y.topRightCorner(nd, nuk);
  B.block(nd, nu, nk, nk).diagonal().setOnes();
  // p2 = [D2 Ld + f+]_dyn = dt C_2^T grad L + w+ dt F: (4.21)-(4.23), S21 and S22 carrying D_1 f+ and
  // D_2 f+; S22 dq2 from dq2's rows (the dynamic ones Y's, the kinematic ones rho2).
  const auto S22d = s.S22.topLeftCorner(nd, nd);
  A.block(n, 0, nd, nqp).noalias() = S22d * s.Y.topLeftCorner(nd, nqp);
  A.block(n, 0, nd, n) += s.S21.topRows(nd);
  B.middleRows(n, nd).noalias() = S22d * s.Y.topRightCorner(nd, nuk);
  B.block(n, nu, nd, nk) += s.S22.block(0, nd, nd, nk);
  if (model.forcing_plus() != 0.0 && nu > 0)
    B.block(n, 0, nd, nu).noalias() += (model.forcing_plus() * dt) * s.F.Fu.topRows(nd);
  // v2 = (rho2 - rho1) / dt.
  B.block(n + nd, nu, nk, nk).diagonal().setConstant(1.0 / dt);
  A.block(n + nd, nd, nk, nk).diagonal().setConstant(-1.0 / dt);
}

void store_constraint_force_derivatives(const Model& model, const StepData& s, double* lam_x, double* lam_u) {
  if (!s.have_first) throw std::logic_error("store_constraint_force_derivatives needs step_implicit_derivatives first");
  const Layout z(model);
  const int nqp = z.n + z.nd;
  Eigen::Map<MatXR> Lx(lam_x, z.m, z.nx), Lu(lam_u, z.m, z.nU);
  Lx.leftCols(nqp) = s.Y.bottomLeftCorner(z.m, nqp);
  Lx.rightCols(z.nk).setZero();
  Lu = s.Y.bottomRightCorner(z.m, z.nU);
}

namespace {

/// The map D = d(q1, q2, u, lambda)/dw used by both second-order forms.
void build_D(const Layout& z, StepData& s) {
  const int n = z.n, nu = z.nu, nd = z.nd, nk = z.nk, m = z.m;
  s.D.setZero();
  s.D.topLeftCorner(n, n).setIdentity();
  s.D.middleRows(n, nd) = s.Y.topRows(nd);                   // dynamic q2
  s.D.block(n + nd, n + nd + nu, nk, nk).setIdentity();      // kinematic q2 = rho2
  s.D.block(2 * n, n + nd, nu, nu).setIdentity();
  if (m > 0) s.D.bottomRows(m) = s.Y.bottomRows(m);
}

/// Psi's index of D's unit row on column j of w = (q1 | p1 | u | rho2) (build_D): q1 itself, u itself,
/// rho2 the kinematic rows of q2; -1 for the columns of p1, on which only Y's rows depend.
inline int unit_row(const Layout& z, int j) {
  if (j < z.n) return j;
  if (j < z.n + z.nd) return -1;
  if (j < z.n + z.nd + z.nu) return 2 * z.n + (j - z.n - z.nd);
  return z.n + z.nd + (j - z.n - z.nd - z.nu);
}

/// s.Hw = D^T Psi D (nw, nw) with D of build_D, from D's structure: every row of D is a unit row (one
/// column of w: E below) except the dynamic rows of q2 and the lambda rows, which are Y's (nd + m rows).
/// So Psi D = Psi E + Psi_{:,y} Y and D^T (Psi D) = E^T (Psi D) + Y^T (Psi D)_{y,:}: column and row
/// gathers and products nd + m deep, instead of two products over all 2n + nu + m rows of D.
void weighted_hessian_through_D(const Layout& z, StepData& s) {
  const int n = z.n, nd = z.nd, m = z.m, nw = z.nw, lam = 2 * z.n + z.nu;
  for (int j = 0; j < nw; ++j) {
    const int e = unit_row(z, j);
    if (e >= 0) s.HD.col(j) = s.Psi.col(e);
    else s.HD.col(j).setZero();
  }
  s.HD.noalias() += s.Psi.middleCols(n, nd) * s.Y.topRows(nd);
  if (m > 0) s.HD.noalias() += s.Psi.middleCols(lam, m) * s.Y.bottomRows(m);
  for (int j = 0; j < nw; ++j) {
    const int e = unit_row(z, j);
    if (e >= 0) s.Hw.row(j) = s.HD.row(e);
    else s.Hw.row(j).setZero();
  }
  s.Hw.noalias() += s.Y.topRows(nd).transpose() * s.HD.middleRows(n, nd);
  if (m > 0) s.Hw.noalias() += s.Y.bottomRows(m).transpose() * s.HD.middleRows(lam, m);
}

/// Second-order caches at the solved step (midpoint to order 3, h at q1 to 3, at q2 to 2).
void ensure_second_order_caches(const Model& model, StepData& s) {
  if (s.L.order < 3) compute_lagrangian(model, s.mid, s.qbar.data(), s.qdot.data(), 3, s.L);
  if (s.h1.order < 3) compute_constraints(model, s.at1, s.q1.data(), 3, s.h1);
  if (s.h2.order < 2) compute_constraints(model, s.at2, s.q2.data(), 2, s.h2);
}

}  // namespace

void step_second_contracted(const Model& model, const VIOptions& opt, StepData& s, const Eigen::Ref<const VecX>& zc, Eigen::Ref<MatX> xx,
                            Eigen::Ref<MatX> xu, Eigen::Ref<MatX> uu, const double* w) {
  if (!s.have_first) throw std::logic_error("step_second_contracted needs step_implicit_derivatives first");
  const Layout z(model);
  const int n = z.n, nd = z.nd, nu = z.nu, m = z.m, nk = z.nk;
  ensure_second_order_caches(model, s);
  const auto z_qd = zc.head(nd);
  const auto z_p = zc.segment(n, nd);
  // Adjoint of the implicit solve: mu = -G_y^{-T} [P_{q2,dyn}^T z_p + z_qd; w]. The covector w
  // of lambda needs nothing else: w^T lambda is linear in the unknowns y = (q2_dyn, lambda).
  s.nu.setZero();
  s.nu.head(nd).noalias() = s.S22.topLeftCorner(nd, nd).transpose() * z_p;
  s.nu.head(nd) += z_qd;
  if (w != nullptr && m > 0) s.nu.tail(m) = Eigen::Map<const VecX>(w, m);
  if (!s.have_lu_t) {
    s.lu_t.compute(s.kkt.transpose());
    s.have_lu_t = true;
  }
  s.mu.noalias() = s.lu_t.solve(s.nu);
  s.mu *= -1.0;
  s.cvec.setZero();
  s.cvec.head(nd) = s.mu.head(nd);
  s.evec.setZero();
  s.evec.head(nd) = z_p;
  // Psi = Hessian of z_p^T P + mu^T G over N = (q1, q2, u, lambda): the DEL interval's weighted
  // Hessian with the weights mu_dyn on G1, z_p on P = D_2 L_d and mu_h on G2 = h(q2).
  interval_weighted_hessian(model, opt, s, s.cvec, s.evec, s.mu.data() + nd, s.Psi);
  weighted_hessian_through_D(z, s);
  // Map w = (q1, p1, u, rho2) onto (x = (q1, p1, v1), u = (u, rho2)).
  const int nqp = n + nd;
  xx.setZero();
  xx.topLeftCorner(nqp, nqp) = s.Hw.topLeftCorner(nqp, nqp);
  xu.setZero();
  xu.topRows(nqp) = s.Hw.topRightCorner(nqp, nu + nk);
  uu = s.Hw.bottomRightCorner(nu + nk, nu + nk);
}

void step_second_directional(const Model& model, const VIOptions& opt, StepData& s, const Eigen::Ref<const VecX>& dx,
                             const Eigen::Ref<const VecX>& du, Eigen::Ref<VecX> out, double* lam_dd) {
  if (!s.have_first) throw std::logic_error("step_second_directional needs step_implicit_derivatives first");
  const Layout z(model);
  const int n = z.n, nd = z.nd, nu = z.nu, m = z.m, nk = z.nk;
  const double dt = opt.dt;
  ensure_second_order_caches(model, s);
  s.dw.head(n + nd) = dx.head(n + nd);
  s.dw.tail(nu + nk) = du;
  build_D(z, s);
  s.dN.noalias() = s.D * s.dw;
  const auto dq1 = s.dN.head(n);
  const auto dq2 = s.dN.segment(n, n);
  const auto dlam = s.dN.tail(m);
  // delta z = C1 dq1 + C2 dq2 in (q, v) space; L3[dz, dz] = (L3 . dz) dz.
  s.eta.head(n) = 0.5 * (dq1 + dq2);
  s.eta.tail(n) = (dq2 - dq1) / dt;
  s.Hz.setZero();
  lagrangian_third_contract(model, s.mid, s.L, s.eta, s.Hz);
  // Second derivatives along the line of the slot-1 residual G1, the momentum P and h(q2).
  const VecX L3dd = s.Hz * s.eta;
  VecX Fdd(n);
  force_second_directional(model, s.mid, s.u.data(), s.eta.head(n), du.head(nu), Fdd);
  VecX rr(nd + m);
  const double wm = model.forcing_minus(), wp = model.forcing_plus();
  rr.head(nd) = (0.5 * dt) * L3dd.head(nd) - L3dd.segment(n, nd) + (wm * dt) * Fdd.head(nd);
  if (m > 0) {
    // -d2/de2 [Dh(q1)^T lambda] = -(D3h[dq1, dq1])^T lambda - 2 (D2h[dq1])^T dlambda
    s.scratch.setZero();
    constraint_weighted_third(s.h1, s.lambda.data(), dq1, s.scratch);
    rr.head(nd).noalias() -= (s.scratch * dq1).head(nd);
    constraint_hessian_times(s.h1, dq1, s.hc);
    rr.head(nd).noalias() -= 2.0 * (s.hc.transpose() * dlam).head(nd);
    constraint_hessian_times(s.h2, dq2, s.hc);
    rr.tail(m).noalias() = s.hc * dq2;
  }
  const VecX ydd = -s.lu.solve(rr);
  out.setZero();
  out.head(nd) = ydd.head(nd);
  out.segment(n, nd) = (0.5 * dt) * L3dd.head(nd) + L3dd.segment(n, nd) + (wp * dt) * Fdd.head(nd);
  out.segment(n, nd).noalias() += s.S22.topLeftCorner(nd, nd) * ydd.head(nd);
  if (lam_dd != nullptr && m > 0) Eigen::Map<VecX>(lam_dd, m) = ydd.tail(m);
}

}  // namespace mc
