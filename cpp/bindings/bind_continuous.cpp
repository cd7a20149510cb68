// Bindings of continuous.hpp (mass matrix and constrained forward dynamics).
#include "common.hpp"
#include "marionette/continuous.hpp"

namespace mcpy {

void bind_continuous(py::module_& m) {
  m.def(
      "mass_matrix",
      [](std::shared_ptr<mc::Model> model, const Arr& q) {
        check_array(q, {model->nq()}, "q", config_names(*model));
        mc::ContinuousData d(*model);
        mc::MatX M(model->nq(), model->nq());
        mc::mass_matrix(*model, d, q.data(), M);
        return M;
      },
      py::arg("model"), py::arg("q"), "d2L/dqdot2 (nq, nq) at q (thesis (3.10)).");
  m.def(
      "forward_dynamics",
      [](std::shared_ptr<mc::Model> model, const Arr& q, const Arr& qdot, const Arr& u, const Arr& rhoddot) {
        const auto names = config_names(*model);
        check_array(q, {model->nq()}, "q", names);
        check_array(qdot, {model->nq()}, "qdot", names);
        check_array(u, {model->nu()}, "u (force inputs)", model->inputs);
        check_array(rhoddot, {model->nk}, "rhoddot (kinematic accelerations)");
        mc::ContinuousData d(*model);
        mc::forward_dynamics(*model, d, q.data(), qdot.data(), u.data(), rhoddot.data());
        return py::make_tuple(d.qddot, d.lambda);
      },
      py::arg("model"), py::arg("q"), py::arg("qdot"), py::arg("u"), py::arg("rhoddot"),
      "Constrained forward dynamics: (qddot (nq,), lambda (nc,)).");
}

}  // namespace mcpy
