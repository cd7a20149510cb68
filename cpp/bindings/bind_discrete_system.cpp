// Bindings of discrete_system.hpp: the one-step map, its derivatives, batch
// loops (GIL released) and the stateful MidpointVI.
#include <optional>

#include "common.hpp"
#include "marionette/discrete_system.hpp"

namespace mcpy {

namespace {

using mc::DiscreteSystem;
using mc::MidpointVI;
using mc::Model;

struct Sizes {
  long nx, nU, n, nd, nk;
  explicit Sizes(const Model& m) : nx(m.nx()), nU(m.nU()), n(m.nq()), nd(m.nd), nk(m.nk) {}
};

py::array_t<double> empty(std::vector<long> shape) { return py::array_t<double>(shape); }

/// An output array only when asked for (an unused empty array would still be allocated).
std::optional<py::array_t<double>> optional_output(bool wanted, std::vector<long> shape) {
  if (!wanted) return std::nullopt;
  return empty(std::move(shape));
}
double* data(std::optional<py::array_t<double>>& a) { return a ? a->mutable_data() : nullptr; }

/// The outputs of a batch loop, of `shapes`: new arrays when `out` is None, else the arrays of the tuple `out`
/// (one per shape, each a writeable C-contiguous float64 array of exactly its shape), written in place. An
/// optimizer that calls the loop every iteration passes the same arrays each time: a new (1000, 80, 80) output
/// is 51 MB of fresh pages whose zeroing by the kernel cost a tenth of the humanoid tracking's solve.
std::vector<py::array_t<double>> batch_outputs(const py::object& out, const std::vector<std::vector<long>>& shapes,
                                               const char* names) {
  std::vector<py::array_t<double>> arrays;
  if (out.is_none()) {
    for (const auto& s : shapes) arrays.push_back(empty(s));
    return arrays;
  }
  const std::string what = std::string("out must be None or a tuple of ") + std::to_string(shapes.size()) +
                           " writeable C-contiguous float64 arrays (" + names + ")";
  if (!py::isinstance<py::tuple>(out) || py::len(out) != shapes.size()) throw py::value_error(what);
  const py::tuple t = py::reinterpret_borrow<py::tuple>(out);
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (!py::isinstance<py::array>(t[i])) throw py::value_error(what + "; item " + std::to_string(i) + " is not an array");
    py::array a = py::reinterpret_borrow<py::array>(t[i]);
    bool ok = a.dtype().is(py::dtype::of<double>()) && (a.flags() & py::array::c_style) && a.writeable() &&
              a.ndim() == static_cast<long>(shapes[i].size());
    for (size_t j = 0; ok && j < shapes[i].size(); ++j) ok = a.shape(j) == shapes[i][j];
    if (!ok)
      throw py::value_error(what + "; item " + std::to_string(i) + " has shape " + shape_str(a) + ", expected " +
                            shape_str(shapes[i]));
    arrays.push_back(py::reinterpret_borrow<py::array_t<double>>(a));
  }
  return arrays;
}

const double* state_arg(const Model& m, const Arr& x, const char* what) {
  check_array(x, {m.nx()}, std::string(what) + " (state [q; p; v] of model '" + m.name + "')", state_names(m));
  return x.data();
}
const double* input_arg(const Model& m, const Arr& u, const char* what) {
  check_array(u, {m.nU()}, std::string(what) + " (input [u; rho_next] of model '" + m.name + "')", input_names(m));
  return u.data();
}
const double* config_arg(const Model& m, const Arr& q, const char* what) {
  check_array(q, {m.nq()}, std::string(what) + " (configurations of model '" + m.name + "')", config_names(m));
  return q.data();
}

long horizon(const Model& m, const Arr& U) {
  check_array(U, {-1, m.nU()}, "U (inputs, one row per step, model '" + m.name + "')", input_names(m));
  return U.shape(0);
}

/// N of a configuration trajectory Q (N+1, nq), N >= 1.
long del_horizon(const Model& m, const Arr& Q) {
  check_array(Q, {-1, m.nq()}, "Q (configurations q_0..q_N, one row per node, model '" + m.name + "')",
              config_names(m));
  if (Q.shape(0) < 2) throw py::value_error("Q needs at least 2 rows (q_0 and q_1), got " + std::to_string(Q.shape(0)));
  return Q.shape(0) - 1;
}

std::vector<std::string> dynamic_names(const Model& m) {
  std::vector<std::string> out;
  for (int i = 0; i < m.nd; ++i) out.push_back(m.configs[i].name);
  return out;
}

/// The `threads` argument of the batch loops over independent steps (>= 1).
int thread_count(long threads) {
  if (threads < 1 || threads > 256)
    throw py::value_error("threads must be an integer in [1, 256] (worker threads of the batch loop), got " +
                          std::to_string(threads));
  return static_cast<int>(threads);
}

#define MC_THREADS_DOC \
  "threads > 1 splits the independent steps into that many chunks, each solved on a thread of its own with its " \
  "own workspace (the results agree with one thread's to rounding)."

#define MC_OUT_DOC \
  "out: None (new arrays) or a tuple of the outputs' arrays (writeable, C-contiguous float64, exactly their " \
  "shapes, not overlapping the inputs), overwritten and returned."

void check_states(const Model& m, const Arr& X, long N) {
  check_array(X, {N + 1, m.nx()}, "X (states, N+1 rows for N input rows, model '" + m.name + "')", state_names(m));
}

/// An optional array argument: None gives an empty array (the caller passes null to the core),
/// anything else is converted and checked like the required ones.
Arr optional_array(const py::object& a, const std::vector<long>& shape, const std::string& what,
                   const std::vector<std::string>& names) {
  if (a.is_none()) return Arr();
  Arr out = py::cast<Arr>(a);
  check_array(out, shape, what, names);
  return out;
}

/// The force inputs (nu) over the step that ends at the configuration a Legendre transform is taken
/// at (None: zero); they enter through f+ (model.hpp Forcing).
Arr previous_forces(const Model& m, const py::object& u, const char* what) {
  return optional_array(u, {m.nu()}, std::string(what) + " (force inputs of the step before, model '" + m.name + "')",
                        m.inputs);
}
const double* data_or_null(const py::object& given, const Arr& a) { return given.is_none() ? nullptr : a.data(); }

mc::VIOptions options(double dt, double tolerance, int max_iterations) {
  mc::VIOptions o;
  o.dt = dt;
  o.tolerance = tolerance;
  o.max_iterations = max_iterations;
  o.validate();
  return o;
}

}  // namespace

// Meaning, sign and units of the multipliers, shared by the docstrings that return them.
#define MC_LAMBDA_CONVENTION                                                                                  \
  "lambda_k is paired with Dh(q_k): step k applies the generalized impulse -Dh(q_k)^T lambda_k (thesis "      \
  "(4.36); the forces as the impulse f- + f+ = dt*F, (4.12)), i.e. the mean constraint force -Dh(q_k)^T "      \
  "lambda_k / dt. For a "                                                                                     \
  "distance constraint (a string) h = |p1 - p2|^2 - L^2 that is a force 2*lambda_k*|p1 - p2|/dt pulling "     \
  "p1 and p2 together: the string tension T_k = 2*L_k*lambda_k/dt [N] with L_k the length at q_k "          \
  "(h(q_k) = 0); T > 0 = taut, T < 0 = the string would have to push. For a plane constraint "               \
  "h = n.(p2 - p1) the force on p2 is -(lambda_k/dt)*n. docs/constraint_forces.md."

void bind_discrete_system(py::module_& m) {
  py::class_<DiscreteSystem, std::shared_ptr<DiscreteSystem>>(
      m, "DiscreteSystem",
      "One-step map x_{k+1} = f(x_k, u_k) of the midpoint VI with x = [q; p; v_kin], u = [u_force; rho_next].\n"
      "Methods lock an internal mutex: one object serves one thread at a time.")
      .def(py::init([](std::shared_ptr<mc::Model> model, double dt, double tolerance, int max_iterations) {
             return std::make_shared<DiscreteSystem>(std::move(model), options(dt, tolerance, max_iterations));
           }),
           py::arg("model"), py::arg("dt"), py::arg("tolerance") = 1e-10, py::arg("max_iterations") = 50)
      .def_property_readonly("model", [](const DiscreteSystem& s) { return std::const_pointer_cast<Model>(s.model_ptr()); })
      .def_property_readonly("dt", [](const DiscreteSystem& s) { return s.options().dt; })
      .def_property_readonly("tolerance", [](const DiscreteSystem& s) { return s.options().tolerance; })
      .def_property_readonly("max_iterations", [](const DiscreteSystem& s) { return s.options().max_iterations; })
      .def(
          "step",
          [](DiscreteSystem& s, const Arr& x, const Arr& u) {
            const Model& M = s.model();
            const double* xp = state_arg(M, x, "x");
            const double* up = input_arg(M, u, "u");
            auto out = empty({M.nx()});
            int it;
            {
              std::lock_guard<std::mutex> g(s.mutex());
              it = s.step(xp, up, out.mutable_data());
            }
            return py::make_tuple(out, it, s.last_lambda());
          },
          py::arg("x"), py::arg("u"), "x_next, Newton iterations, lambda.")
      .def(
          "constraint_forces",
          [](DiscreteSystem& s, const Arr& x, const Arr& u) {
            const Model& M = s.model();
            const double* xp = state_arg(M, x, "x");
            const double* up = input_arg(M, u, "u");
            auto lam = empty({M.nc()});
            std::lock_guard<std::mutex> g(s.mutex());
            s.constraint_forces(xp, up, lam.mutable_data());
            return lam;
          },
          py::arg("x"), py::arg("u"),
          "lam (m,): the multipliers lambda_k of the step (x_k, u_k) (thesis (4.36)), one per constraint "
          "(model.constraint_names).\n" MC_LAMBDA_CONVENTION)
      .def(
          "linearize",
          [](DiscreteSystem& s, const Arr& x, const Arr& u, bool constraint_forces) -> py::object {
            const Model& M = s.model();
            const double* xp = state_arg(M, x, "x");
            const double* up = input_arg(M, u, "u");
            auto xn = empty({M.nx()});
            auto A = empty({M.nx(), M.nx()});
            auto B = empty({M.nx(), M.nU()});
            std::lock_guard<std::mutex> g(s.mutex());
            if (!constraint_forces) {
              s.linearize(xp, up, xn.mutable_data(), A.mutable_data(), B.mutable_data());
              return py::make_tuple(xn, A, B);
            }
            auto lam = empty({M.nc()});
            auto lam_x = empty({M.nc(), M.nx()});
            auto lam_u = empty({M.nc(), M.nU()});
            s.linearize(xp, up, xn.mutable_data(), A.mutable_data(), B.mutable_data(), lam.mutable_data(),
                        lam_x.mutable_data(), lam_u.mutable_data());
            return py::make_tuple(xn, A, B, lam, lam_x, lam_u);
          },
          py::arg("x"), py::arg("u"), py::arg("constraint_forces") = false,
          "x_next, A = df/dx (nx, nx), B = df/du (nx, nU) (thesis (4.37)-(4.38)). With constraint_forces=True "
          "also lam (m,), lam_x = dlambda/dx (m, nx) and lam_u = dlambda/du (m, nU) of the same solve: the "
          "multiplier rows of the implicit derivative Y = -G_y^-1 G_w (thesis §A.2.5); lam_x is zero in the "
          "kinematic-velocity columns.\n" MC_LAMBDA_CONVENTION)
      .def(
          "second_order_contracted",
          [](DiscreteSystem& s, const Arr& x, const Arr& u, const Arr& z, const py::object& w) {
            const Model& M = s.model();
            const double* xp = state_arg(M, x, "x");
            const double* up = input_arg(M, u, "u");
            check_array(z, {M.nx()}, "z (covector of x_next)", state_names(M));
            const Arr wa = optional_array(w, {M.nc()}, "w (covector of lambda_k, one entry per constraint)",
                                          constraint_names(M));
            auto xx = empty({M.nx(), M.nx()});
            auto xu = empty({M.nx(), M.nU()});
            auto uu = empty({M.nU(), M.nU()});
            std::lock_guard<std::mutex> g(s.mutex());
            s.second_contracted(xp, up, z.data(), xx.mutable_data(), xu.mutable_data(), uu.mutable_data(),
                                w.is_none() ? nullptr : wa.data());
            return py::make_tuple(xx, xu, uu);
          },
          py::arg("x"), py::arg("u"), py::arg("z"), py::arg("w") = py::none(),
          "z^T D2f + w^T D2lambda as (xx (nx, nx), xu (nx, nU), uu (nU, nU)) without forming either tensor: "
          "one adjoint solve mu = -G_y^-T [P_q2^T z_p + z_q; w] (thesis (4.39)-(4.40), §A.2.6). z (nx,) is a "
          "covector of x_next, w (m,) of lambda_k (None = 0).")
      .def(
          "second_order_directional",
          [](DiscreteSystem& s, const Arr& x, const Arr& u, const Arr& dx, const Arr& du,
             bool constraint_forces) -> py::object {
            const Model& M = s.model();
            const double* xp = state_arg(M, x, "x");
            const double* up = input_arg(M, u, "u");
            const double* dxp = state_arg(M, dx, "dx");
            const double* dup = input_arg(M, du, "du");
            auto out = empty({M.nx()});
            auto lam_dd = optional_output(constraint_forces, {M.nc()});
            std::lock_guard<std::mutex> g(s.mutex());
            s.second_directional(xp, up, dxp, dup, out.mutable_data(), data(lam_dd));
            if (!constraint_forces) return std::move(out);
            return py::make_tuple(out, *lam_dd);
          },
          py::arg("x"), py::arg("u"), py::arg("dx"), py::arg("du"), py::arg("constraint_forces") = false,
          "D2f o ((dx, du), (dx, du)), shape (nx,); with constraint_forces=True the tuple (that, "
          "D2lambda o ((dx, du), (dx, du)) (m,)), from the same second-order solve.")
      .def(
          "second_order_full",
          [](DiscreteSystem& s, const Arr& x, const Arr& u) {
            const Model& M = s.model();
            const double* xp = state_arg(M, x, "x");
            const double* up = input_arg(M, u, "u");
            auto fxx = empty({M.nx(), M.nx(), M.nx()});
            auto fxu = empty({M.nx(), M.nx(), M.nU()});
            auto fuu = empty({M.nx(), M.nU(), M.nU()});
            std::lock_guard<std::mutex> g(s.mutex());
            s.second_full(xp, up, fxx.mutable_data(), fxu.mutable_data(), fuu.mutable_data());
            return py::make_tuple(fxx, fxu, fuu);
          },
          py::arg("x"), py::arg("u"),
          "Full second-order tensors (fxx (nx, nx, nx), fxu (nx, nx, nU), fuu (nx, nU, nU)); axis 0 is the output.")
      .def(
          "simulate",
          [](DiscreteSystem& s, const Arr& x0, const Arr& U, bool constraint_forces) -> py::object {
            const Model& M = s.model();
            const double* xp = state_arg(M, x0, "x0");
            const long N = horizon(M, U);
            auto X = empty({N + 1, M.nx()});
            py::array_t<int> it(N);
            auto Lam = optional_output(constraint_forces, {N, M.nc()});
            {
              py::gil_scoped_release release;
              std::lock_guard<std::mutex> g(s.mutex());
              s.simulate(xp, U.data(), static_cast<int>(N), X.mutable_data(), it.mutable_data(), data(Lam));
            }
            if (!constraint_forces) return py::make_tuple(X, it);
            return py::make_tuple(X, it, *Lam);
          },
          py::arg("x0"), py::arg("U"), py::arg("constraint_forces") = false,
          "X (N+1, nx), iterations (N,) from x0 under U (N, nU); with constraint_forces=True also Lam (N, m), "
          "the multipliers lambda_k of the computed steps (see constraint_forces).")
      .def(
          "constraint_forces_trajectory",
          [](DiscreteSystem& s, const Arr& X, const Arr& U, long threads) {
            const Model& M = s.model();
            const long N = horizon(M, U);
            check_states(M, X, N);
            const int T = thread_count(threads);
            auto Lam = empty({N, M.nc()});
            {
              py::gil_scoped_release release;
              std::lock_guard<std::mutex> g(s.mutex());
              s.constraint_forces_trajectory(X.data(), U.data(), static_cast<int>(N), Lam.mutable_data(), T);
            }
            return Lam;
          },
          py::arg("X"), py::arg("U"), py::arg("threads") = 1,
          "Lam (N, m): lambda_k of every step k of (X (N+1, nx), U (N, nU)), each solved from (X[k], U[k]) "
          "(at X[k+1] when it solves the step, by Newton from it otherwise); the same solves as "
          "linearize_trajectory. " MC_THREADS_DOC "\n"
          MC_LAMBDA_CONVENTION)
      .def(
          "linearize_trajectory",
          [](DiscreteSystem& s, const Arr& X, const Arr& U, bool constraint_forces, long threads,
             const py::object& out) -> py::object {
            const Model& M = s.model();
            const long N = horizon(M, U);
            check_states(M, X, N);
            const int T = thread_count(threads);
            std::vector<std::vector<long>> shapes = {{N, M.nx(), M.nx()}, {N, M.nx(), M.nU()}};
            if (constraint_forces) shapes.insert(shapes.end(), {{N, M.nc()}, {N, M.nc(), M.nx()}, {N, M.nc(), M.nU()}});
            auto o = batch_outputs(out, shapes, constraint_forces ? "A, B, Lam, Lam_x, Lam_u" : "A, B");
            double* p[5] = {nullptr, nullptr, nullptr, nullptr, nullptr};
            for (size_t i = 0; i < o.size(); ++i) p[i] = o[i].mutable_data();
            {
              py::gil_scoped_release release;
              std::lock_guard<std::mutex> g(s.mutex());
              s.linearize_trajectory(X.data(), U.data(), static_cast<int>(N), p[0], p[1], p[2], p[3], p[4], T);
            }
            py::tuple r(o.size());
            for (size_t i = 0; i < o.size(); ++i) r[i] = o[i];
            return r;
          },
          py::arg("X"), py::arg("U"), py::arg("constraint_forces") = false, py::arg("threads") = 1,
          py::arg("out") = py::none(),
          "A (N, nx, nx), B (N, nx, nU) along a trajectory, each step solved from (X[k], U[k]) (at X[k+1] when "
          "it solves the step, by Newton from it otherwise). With constraint_forces=True also Lam (N, m), Lam_x (N, m, nx) and Lam_u (N, m, nU) "
          "(dlambda_k/dx_k, dlambda_k/du_k) from the same solves (see linearize). " MC_THREADS_DOC " " MC_OUT_DOC)
      .def(
          "second_order_trajectory",
          [](DiscreteSystem& s, const Arr& X, const Arr& U, const Arr& Z, const py::object& W, long threads,
             const py::object& out) {
            const Model& M = s.model();
            const long N = horizon(M, U);
            check_states(M, X, N);
            const int T = thread_count(threads);
            check_array(Z, {N, M.nx()}, "Z (covectors of x_{k+1}, one row per step)", state_names(M));
            const Arr Wa = optional_array(W, {N, M.nc()}, "W (covectors of lambda_k, one row per step)",
                                          constraint_names(M));
            const double* Wp = W.is_none() ? nullptr : Wa.data();
            auto o = batch_outputs(out, {{N, M.nx(), M.nx()}, {N, M.nx(), M.nU()}, {N, M.nU(), M.nU()}}, "xx, xu, uu");
            {
              py::gil_scoped_release release;
              std::lock_guard<std::mutex> g(s.mutex());
              s.second_contracted_trajectory(X.data(), U.data(), Z.data(), static_cast<int>(N), o[0].mutable_data(),
                                             o[1].mutable_data(), o[2].mutable_data(), Wp, T);
            }
            return py::make_tuple(o[0], o[1], o[2]);
          },
          py::arg("X"), py::arg("U"), py::arg("Z"), py::arg("W") = py::none(), py::arg("threads") = 1,
          py::arg("out") = py::none(),
          "Z[k]^T D2f_k + W[k]^T D2lambda_k along a trajectory (see second_order_contracted): xx (N, nx, nx), "
          "xu (N, nx, nU), uu (N, nU, nU). Z (N, nx), W (N, m) or None. " MC_THREADS_DOC " " MC_OUT_DOC)
      .def(
          "project",
          [](DiscreteSystem& s, const Arr& x0, const Arr& Xbar, const Arr& Ubar, const Arr& K,
             bool constraint_forces) -> py::object {
            const Model& M = s.model();
            const double* xp = state_arg(M, x0, "x0");
            const long N = horizon(M, Ubar);
            check_array(Xbar, {N + 1, M.nx()}, "Xbar (reference states, N+1 rows)", state_names(M));
            check_array(K, {N, M.nU(), M.nx()}, "K (feedback gains, (N, nU, nx))");
            auto X = empty({N + 1, M.nx()});
            auto U = empty({N, M.nU()});
            auto Lam = optional_output(constraint_forces, {N, M.nc()});
            {
              py::gil_scoped_release release;
              std::lock_guard<std::mutex> g(s.mutex());
              s.project(xp, Xbar.data(), Ubar.data(), K.data(), static_cast<int>(N), X.mutable_data(),
                        U.mutable_data(), data(Lam));
            }
            if (!constraint_forces) return py::make_tuple(X, U);
            return py::make_tuple(X, U, *Lam);
          },
          py::arg("x0"), py::arg("Xbar"), py::arg("Ubar"), py::arg("K"), py::arg("constraint_forces") = false,
          "Projection operator (thesis (6.10)): the feasible trajectory (X, U) that tracks (Xbar, Ubar) with "
          "u = ubar - K (x - xbar) from x0; with constraint_forces=True also Lam (N, m), the multipliers "
          "lambda_k of its steps (see constraint_forces).")
      .def(
          "project_clamped",
          [](DiscreteSystem& s, const Arr& x0, const Arr& Xbar, const Arr& Ubar, const Arr& K, const Arr& lower,
             const Arr& upper, const Arr& rate, const Arr& acceleration, double dt) -> py::tuple {
            const Model& M = s.model();
            const Sizes z(M);
            const double* xp = state_arg(M, x0, "x0");
            const long N = horizon(M, Ubar);
            check_array(Xbar, {N + 1, z.nx}, "Xbar (reference states, N+1 rows)", state_names(M));
            check_array(K, {N, z.nU, z.nx}, "K (feedback gains, (N, nU, nx))");
            // a limit is a number or +-inf (none, as CommandLimits has it); NaN is refused
            auto check_limit = [](const Arr& a, long n, const std::string& what) {
              if (a.ndim() != 1 || a.shape(0) != n)
                throw py::value_error(what + " has shape " + shape_str(a) + ", expected (" + std::to_string(n) + ",)");
              for (long i = 0; i < n; ++i)
                if (std::isnan(a.data()[i]))
                  throw py::value_error(what + " contains nan at index " + std::to_string(i) +
                                        ": a limit is a number, or +-inf for none");
            };
            check_limit(lower, z.nU, "lower (input lower limits)");
            check_limit(upper, z.nU, "upper (input upper limits)");
            check_limit(rate, z.nk, "rate (drive speed limits)");
            check_limit(acceleration, z.nk, "acceleration (drive acceleration limits)");
            if (!(dt > 0)) throw py::value_error("dt (the clamp's time step) must be > 0, got " + std::to_string(dt));
            auto X = empty({N + 1, z.nx});
            auto U = empty({N, z.nU});
            auto Lam = empty({N, M.nc()});
            {
              py::gil_scoped_release release;
              std::lock_guard<std::mutex> g(s.mutex());
              double* Xo = X.mutable_data();
              double* Uo = U.mutable_data();
              double* Lo = Lam.mutable_data();
              const double *lo = lower.data(), *hi = upper.data(), *vmax = rate.data(), *amax = acceleration.data();
              const long nu = z.nU - z.nk;
              std::copy(xp, xp + z.nx, Xo);
              mc::VecX dx(z.nx);
              for (long k = 0; k < N; ++k) {
                const double* x = Xo + k * z.nx;
                Eigen::Map<mc::VecX> u(Uo + k * z.nU, z.nU);
                dx = Eigen::Map<const mc::VecX>(x, z.nx) - Eigen::Map<const mc::VecX>(Xbar.data() + k * z.nx, z.nx);
                u = Eigen::Map<const mc::VecX>(Ubar.data() + k * z.nU, z.nU);
                u.noalias() -= Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
                                   K.data() + k * z.nU * z.nx, z.nU, z.nx) * dx;
                // tracking.command_limits.CommandLimits.clamp from the drive state (rho, v) of x
                for (long i = 0; i < z.nk; ++i) {
                  const double r = x[z.nd + i], w = x[z.n + z.nd + i];
                  const double a_step = amax[i] * (dt * dt), v_step = vmax[i] * dt;
                  const double e_lo = w * dt - a_step, e_hi = w * dt + a_step;
                  double e = u[nu + i] - r;
                  e = e < e_lo ? e_lo : e > e_hi ? e_hi : e;
                  e = e < -v_step ? -v_step : e > v_step ? v_step : e;
                  u[nu + i] = r + e;
                }
                for (long i = 0; i < z.nU; ++i) u[i] = u[i] < lo[i] ? lo[i] : u[i] > hi[i] ? hi[i] : u[i];
                s.step(x, u.data(), Xo + (k + 1) * z.nx);
                Eigen::Map<mc::VecX>(Lo + k * M.nc(), M.nc()) = s.last_lambda();
              }
            }
            return py::make_tuple(X, U, Lam);
          },
          py::arg("x0"), py::arg("Xbar"), py::arg("Ubar"), py::arg("K"), py::arg("lower"), py::arg("upper"),
          py::arg("rate"), py::arg("acceleration"), py::arg("dt"),
          "The trajectory (X, U, Lam (N, m)) that tracks (Xbar, Ubar) from x0 with u = clamp(ubar - K (x - xbar)), "
          "the clamp of tracking.command_limits.CommandLimits from the drive state of x (the step limited around "
          "v dt by acceleration dt^2, then to rate dt, then u to [lower, upper]); each step solved as step(x, u) "
          "solves it (from q_k, with the last solve's multipliers).")
      .def(
          "del_residual",
          [](DiscreteSystem& s, const Arr& p0, const Arr& Q, const Arr& Uf, const Arr& Lam,
             bool jacobian) -> py::object {
            const Model& M = s.model();
            const long n = M.nq(), nd = M.nd, nu = M.nu(), m = M.nc();
            const long N = del_horizon(M, Q);
            check_array(p0, {nd}, "p0 (initial momentum, one entry per dynamic configuration)", dynamic_names(M));
            check_array(Uf, {N, nu}, "Uf (force inputs, one row per step)", M.inputs);
            check_array(Lam, {N, m}, "Lam (multipliers, one row per step)", constraint_names(M));
            auto R = empty({N, nd + m});
            auto P = empty({N, nd});
            auto J = optional_output(jacobian, {N, nd + m, 3 * n + 2 * nu + m});
            auto JP = optional_output(jacobian, {N, nd, 2 * n + nu});
            {
              py::gil_scoped_release release;
              std::lock_guard<std::mutex> g(s.mutex());
              s.del_residual(p0.data(), Q.data(), Uf.data(), Lam.data(), static_cast<int>(N), R.mutable_data(),
                             P.mutable_data(), data(J), data(JP));
            }
            if (!jacobian) return py::make_tuple(R, P);
            return py::make_tuple(R, P, *J, *JP);
          },
          py::arg("p0"), py::arg("Q"), py::arg("Uf"), py::arg("Lam"), py::arg("jacobian") = false,
          "The forced constrained discrete Euler-Lagrange equations of a configuration trajectory as residuals "
          "(seed 002 (3.6) with the midpoint L_d and the model's forcing f- = w- dt F, f+ = w+ dt F; the equality "
          "constraints of direct transcription, docs/dmocc.md). p0 (nd,) initial momentum, Q (N+1, nq) "
          "configurations q_0..q_N (kinematic columns included), Uf (N, nu) force inputs, Lam (N, m) multipliers "
          "lambda_k.\n"
          "Returns R (N, nd + m), row k = [p_k + D1 Ld(q_k, q_{k+1}) + f-_k - Dh(q_k)^T lambda_k (dynamic rows); "
          "h(q_{k+1})] with p_0 = p0 and p_k = P[k-1], and P (N, nd), P[k] = p_{k+1} = D2 Ld(q_k, q_{k+1}) + f+_k "
          "(the discrete Legendre transform). R = 0 is exactly what simulate's steps solve. With jacobian=True "
          "also J (N, nd + m, 3 nq + 2 nu + m): dR[k]/d(q_{k-1} | q_k | q_{k+1} | u_{k-1} | u_k | lambda_k) (the "
          "q_{-1} and u_{-1} blocks are zero, the u_{k-1} block is that of f+_{k-1}: zero under the thesis "
          "rule), and JP (N, nd, 2 nq + nu): dP[k]/d(q_k | q_{k+1} | u_k).")
      .def(
          "del_hessian",
          [](DiscreteSystem& s, const Arr& Q, const Arr& Uf, const Arr& Lam, const Arr& Y, const py::object& Z) {
            const Model& M = s.model();
            const long n = M.nq(), nd = M.nd, nu = M.nu(), m = M.nc();
            const long N = del_horizon(M, Q);
            check_array(Uf, {N, nu}, "Uf (force inputs, one row per step)", M.inputs);
            check_array(Lam, {N, m}, "Lam (multipliers, one row per step)", constraint_names(M));
            check_array(Y, {N, nd + m}, "Y (covectors of the DEL residual rows R[k], one row per step)");
            const Arr Za = optional_array(Z, {N, nd}, "Z (covectors of the momenta P[k], one row per step)",
                                          dynamic_names(M));
            const long nN = 2 * n + nu + m;
            auto H = empty({N, nN, nN});
            {
              py::gil_scoped_release release;
              std::lock_guard<std::mutex> g(s.mutex());
              s.del_hessian(Q.data(), Uf.data(), Lam.data(), Y.data(), Z.is_none() ? nullptr : Za.data(),
                            static_cast<int>(N), H.mutable_data());
            }
            return H;
          },
          py::arg("Q"), py::arg("Uf"), py::arg("Lam"), py::arg("Y"), py::arg("Z") = py::none(),
          "Hessian of sum_k Y[k].R[k] + Z[k].P[k] (R, P of del_residual; Y (N, nd + m), Z (N, nd) or None) as "
          "interval blocks H (N, 2 nq + nu + m, 2 nq + nu + m) over (q_j | q_{j+1} | u_j | lambda_j): the full "
          "Hessian is the sum of the blocks, each placed at its interval's variables (neighbouring blocks share "
          "q_{j+1}). p0 enters linearly and has no block. Only third derivatives of L and h contracted with one "
          "vector are formed (as in second_order_contracted).")
      .def(
          "discrete_momentum",
          [](DiscreteSystem& s, const Arr& q_prev, const Arr& q, const py::object& u_prev) {
            const Model& M = s.model();
            const double* a = config_arg(M, q_prev, "q_prev");
            const double* b = config_arg(M, q, "q");
            const Arr u = previous_forces(M, u_prev, "u_prev");
            auto p = empty({static_cast<long>(M.nd)});
            std::lock_guard<std::mutex> g(s.mutex());
            s.discrete_momentum(a, b, data_or_null(u_prev, u), p.mutable_data());
            return p;
          },
          py::arg("q_prev"), py::arg("q"), py::arg("u_prev") = py::none(),
          "Discrete Legendre transform p = D2 Ld(q_prev, q) + f+(q_prev, q, u_prev) (nd,); u_prev (nu,): the force "
          "inputs of the step from q_prev to q (None: zero; f+ = 0 under the thesis forcing).")
      .def(
          "state_from_configs",
          [](DiscreteSystem& s, const Arr& q_prev, const Arr& q, const py::object& u_prev) {
            const Model& M = s.model();
            const double* a = config_arg(M, q_prev, "q_prev");
            const double* b = config_arg(M, q, "q");
            const Arr u = previous_forces(M, u_prev, "u_prev");
            auto x = empty({M.nx()});
            std::lock_guard<std::mutex> g(s.mutex());
            s.state_from_configs(a, b, data_or_null(u_prev, u), x.mutable_data());
            return x;
          },
          py::arg("q_prev"), py::arg("q"), py::arg("u_prev") = py::none(),
          "x = [q; D2 Ld(q_prev, q) + f+(q_prev, q, u_prev); (rho - rho_prev)/dt] (see discrete_momentum).");

  py::class_<MidpointVI>(m, "MidpointVI", "Stateful midpoint variational integrator (thesis ch. 4).")
      .def(py::init([](std::shared_ptr<mc::Model> model, double dt, double tolerance, int max_iterations) {
             return new MidpointVI(std::move(model), options(dt, tolerance, max_iterations));
           }),
           py::arg("model"), py::arg("dt"), py::arg("tolerance") = 1e-10, py::arg("max_iterations") = 50)
      .def(
          "initialize_from_configs",
          [](MidpointVI& vi, const Arr& q0, const Arr& q1, double t1, const py::object& u0) {
            const Model& M = vi.system().model();
            const Arr u = previous_forces(M, u0, "u0");
            vi.initialize_from_configs(config_arg(M, q0, "q0"), config_arg(M, q1, "q1"), t1, data_or_null(u0, u));
          },
          py::arg("q0"), py::arg("q1"), py::arg("t1") = 0.0, py::arg("u0") = py::none(),
          "x_1 = [q1; D2 Ld(q0, q1) + f+(q0, q1, u0); (rho1 - rho0)/dt] at t1 (u0 (nu,): the force inputs from q0 to "
          "q1, None: zero).")
      .def(
          "initialize_from_state",
          [](MidpointVI& vi, const Arr& x, double t) {
            vi.initialize_from_state(state_arg(vi.system().model(), x, "x"), t);
          },
          py::arg("x"), py::arg("t") = 0.0)
      .def(
          "step",
          [](MidpointVI& vi, const Arr& u, const Arr& rho_next) {
            const Model& M = vi.system().model();
            check_array(u, {M.nu()}, "u (force inputs)", M.inputs);
            std::vector<std::string> kin;
            for (int i = M.nd; i < M.nq(); ++i) kin.push_back(M.configs[i].name);
            check_array(rho_next, {M.nk}, "rho_next (next kinematic configurations)", kin);
            return vi.step(u.data(), rho_next.data());
          },
          py::arg("u"), py::arg("rho_next"), "Advances one step; returns the Newton iteration count.")
      .def_property_readonly("x", [](const MidpointVI& vi) { return vi.x(); })
      .def_property_readonly("q", [](MidpointVI& vi) { return mc::VecX(vi.x().head(vi.system().layout().n)); })
      .def_property_readonly("p", [](MidpointVI& vi) {
        const auto& z = vi.system().layout();
        return mc::VecX(vi.x().segment(z.n, z.nd));
      })
      .def_property_readonly("v", [](MidpointVI& vi) { return mc::VecX(vi.x().tail(vi.system().layout().nk)); })
      .def_property_readonly("lambda_", [](const MidpointVI& vi) { return vi.lambda(); })
      .def_property_readonly("t", &MidpointVI::t)
      .def_property_readonly("k", &MidpointVI::k);
}

}  // namespace mcpy
