// pybind11 module marionette_control._core: one binding file per core header.
#include "common.hpp"
#include "marionette/types.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_core, m) {
  m.doc() = "marionette_control core: tree mechanics, midpoint variational integrator, exact linearizations";
  static py::exception<mc::StepError> step_error(m, "StepError", PyExc_RuntimeError);
  step_error.doc() = "A variational-integrator step failed. Attributes: step, residual, reason, iterations.";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const mc::StepError& e) {
      py::object err = py::handle(step_error.ptr())(e.what());
      err.attr("step") = e.step;
      err.attr("residual") = e.residual;
      err.attr("reason") = mc::step_failure_name(e.reason);
      err.attr("iterations") = e.iterations;
      PyErr_SetObject(step_error.ptr(), err.ptr());
    } catch (const mc::ModelError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
  mcpy::bind_model(m);
  mcpy::bind_discrete_system(m);
  mcpy::bind_continuous(m);
  mcpy::bind_riccati(m);
  mcpy::bind_tick_kernel(m);
  mcpy::bind_sample_gate(m);
  mcpy::bind_tick_path(m);
}
