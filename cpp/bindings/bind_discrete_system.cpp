// Bindings of discrete_system.hpp: the one-step map, its derivatives, batch
// loops (GIL released) and the stateful MidpointVI.
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

void check_states(const Model& m, const Arr& X, long N) {
  check_array(X, {N + 1, m.nx()}, "X (states, N+1 rows for N input rows, model '" + m.name + "')", state_names(m));
}

mc::VIOptions options(double dt, double tolerance, int max_iterations) {
  mc::VIOptions o;
  o.dt = dt;
  o.tolerance = tolerance;
  o.max_iterations = max_iterations;
  o.validate();
  return o;
}

}  // namespace

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
          "linearize",
          [](DiscreteSystem& s, const Arr& x, const Arr& u) {
            const Model& M = s.model();
            const double* xp = state_arg(M, x, "x");
            const double* up = input_arg(M, u, "u");
            auto xn = empty({M.nx()});
            auto A = empty({M.nx(), M.nx()});
            auto B = empty({M.nx(), M.nU()});
            std::lock_guard<std::mutex> g(s.mutex());
            s.linearize(xp, up, xn.mutable_data(), A.mutable_data(), B.mutable_data());
            return py::make_tuple(xn, A, B);
          },
          py::arg("x"), py::arg("u"), "x_next, A = df/dx (nx, nx), B = df/du (nx, nU).")
      .def(
          "second_order_contracted",
          [](DiscreteSystem& s, const Arr& x, const Arr& u, const Arr& z) {
            const Model& M = s.model();
            const double* xp = state_arg(M, x, "x");
            const double* up = input_arg(M, u, "u");
            check_array(z, {M.nx()}, "z (covector of x_next)", state_names(M));
            auto xx = empty({M.nx(), M.nx()});
            auto xu = empty({M.nx(), M.nU()});
            auto uu = empty({M.nU(), M.nU()});
            std::lock_guard<std::mutex> g(s.mutex());
            s.second_contracted(xp, up, z.data(), xx.mutable_data(), xu.mutable_data(), uu.mutable_data());
            return py::make_tuple(xx, xu, uu);
          },
          py::arg("x"), py::arg("u"), py::arg("z"), "z^T D2f as (xx, xu, uu) without forming the tensor.")
      .def(
          "second_order_directional",
          [](DiscreteSystem& s, const Arr& x, const Arr& u, const Arr& dx, const Arr& du) {
            const Model& M = s.model();
            const double* xp = state_arg(M, x, "x");
            const double* up = input_arg(M, u, "u");
            const double* dxp = state_arg(M, dx, "dx");
            const double* dup = input_arg(M, du, "du");
            auto out = empty({M.nx()});
            std::lock_guard<std::mutex> g(s.mutex());
            s.second_directional(xp, up, dxp, dup, out.mutable_data());
            return out;
          },
          py::arg("x"), py::arg("u"), py::arg("dx"), py::arg("du"), "D2f o ((dx, du), (dx, du)), shape (nx,).")
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
          [](DiscreteSystem& s, const Arr& x0, const Arr& U) {
            const Model& M = s.model();
            const double* xp = state_arg(M, x0, "x0");
            const long N = horizon(M, U);
            auto X = empty({N + 1, M.nx()});
            py::array_t<int> it(N);
            {
              py::gil_scoped_release release;
              std::lock_guard<std::mutex> g(s.mutex());
              s.simulate(xp, U.data(), static_cast<int>(N), X.mutable_data(), it.mutable_data());
            }
            return py::make_tuple(X, it);
          },
          py::arg("x0"), py::arg("U"), "X (N+1, nx), iterations (N,) from x0 under U (N, nU).")
      .def(
          "linearize_trajectory",
          [](DiscreteSystem& s, const Arr& X, const Arr& U) {
            const Model& M = s.model();
            const long N = horizon(M, U);
            check_states(M, X, N);
            auto A = empty({N, M.nx(), M.nx()});
            auto B = empty({N, M.nx(), M.nU()});
            {
              py::gil_scoped_release release;
              std::lock_guard<std::mutex> g(s.mutex());
              s.linearize_trajectory(X.data(), U.data(), static_cast<int>(N), A.mutable_data(), B.mutable_data());
            }
            return py::make_tuple(A, B);
          },
          py::arg("X"), py::arg("U"), "A (N, nx, nx), B (N, nx, nU) along a trajectory.")
      .def(
          "second_order_trajectory",
          [](DiscreteSystem& s, const Arr& X, const Arr& U, const Arr& Z) {
            const Model& M = s.model();
            const long N = horizon(M, U);
            check_states(M, X, N);
            check_array(Z, {N, M.nx()}, "Z (covectors of x_{k+1}, one row per step)", state_names(M));
            auto xx = empty({N, M.nx(), M.nx()});
            auto xu = empty({N, M.nx(), M.nU()});
            auto uu = empty({N, M.nU(), M.nU()});
            {
              py::gil_scoped_release release;
              std::lock_guard<std::mutex> g(s.mutex());
              s.second_contracted_trajectory(X.data(), U.data(), Z.data(), static_cast<int>(N), xx.mutable_data(),
                                             xu.mutable_data(), uu.mutable_data());
            }
            return py::make_tuple(xx, xu, uu);
          },
          py::arg("X"), py::arg("U"), py::arg("Z"),
          "Z[k]^T D2f_k along a trajectory: xx (N, nx, nx), xu (N, nx, nU), uu (N, nU, nU).")
      .def(
          "project",
          [](DiscreteSystem& s, const Arr& x0, const Arr& Xbar, const Arr& Ubar, const Arr& K) {
            const Model& M = s.model();
            const double* xp = state_arg(M, x0, "x0");
            const long N = horizon(M, Ubar);
            check_array(Xbar, {N + 1, M.nx()}, "Xbar (reference states, N+1 rows)", state_names(M));
            check_array(K, {N, M.nU(), M.nx()}, "K (feedback gains, (N, nU, nx))");
            auto X = empty({N + 1, M.nx()});
            auto U = empty({N, M.nU()});
            {
              py::gil_scoped_release release;
              std::lock_guard<std::mutex> g(s.mutex());
              s.project(xp, Xbar.data(), Ubar.data(), K.data(), static_cast<int>(N), X.mutable_data(),
                        U.mutable_data());
            }
            return py::make_tuple(X, U);
          },
          py::arg("x0"), py::arg("Xbar"), py::arg("Ubar"), py::arg("K"),
          "Projection operator (thesis (6.10)): the feasible trajectory (X, U) that tracks (Xbar, Ubar) with "
          "u = ubar - K (x - xbar) from x0.")
      .def(
          "discrete_momentum",
          [](DiscreteSystem& s, const Arr& q_prev, const Arr& q) {
            const Model& M = s.model();
            const double* a = config_arg(M, q_prev, "q_prev");
            const double* b = config_arg(M, q, "q");
            auto p = empty({static_cast<long>(M.nd)});
            std::lock_guard<std::mutex> g(s.mutex());
            s.discrete_momentum(a, b, p.mutable_data());
            return p;
          },
          py::arg("q_prev"), py::arg("q"), "Discrete Legendre transform p = D2 Ld(q_prev, q) (nd,).")
      .def(
          "state_from_configs",
          [](DiscreteSystem& s, const Arr& q_prev, const Arr& q) {
            const Model& M = s.model();
            const double* a = config_arg(M, q_prev, "q_prev");
            const double* b = config_arg(M, q, "q");
            auto x = empty({M.nx()});
            std::lock_guard<std::mutex> g(s.mutex());
            s.state_from_configs(a, b, x.mutable_data());
            return x;
          },
          py::arg("q_prev"), py::arg("q"), "x = [q; D2 Ld(q_prev, q); (rho - rho_prev)/dt].");

  py::class_<MidpointVI>(m, "MidpointVI", "Stateful midpoint variational integrator (thesis ch. 4).")
      .def(py::init([](std::shared_ptr<mc::Model> model, double dt, double tolerance, int max_iterations) {
             return new MidpointVI(std::move(model), options(dt, tolerance, max_iterations));
           }),
           py::arg("model"), py::arg("dt"), py::arg("tolerance") = 1e-10, py::arg("max_iterations") = 50)
      .def(
          "initialize_from_configs",
          [](MidpointVI& vi, const Arr& q0, const Arr& q1, double t1) {
            const Model& M = vi.system().model();
            vi.initialize_from_configs(config_arg(M, q0, "q0"), config_arg(M, q1, "q1"), t1);
          },
          py::arg("q0"), py::arg("q1"), py::arg("t1") = 0.0)
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
