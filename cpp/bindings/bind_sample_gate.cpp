// Bindings of sample_gate.hpp: the constraint distance of the plausibility checks and the
// controller's sample path in one call (the GIL held: it is shorter than releasing it).
#include "common.hpp"
#include "marionette/sample_gate.hpp"

namespace mcpy {

void bind_sample_gate(py::module_& m) {
  py::class_<mc::ConstraintDistance, std::shared_ptr<mc::ConstraintDistance>>(
      m, "ConstraintDistance",
      "The first-order distance |h_i(q)| / |Dh_i(q)| of a configuration to each holonomic constraint (thesis "
      "§3.5): how far a measured configuration is off the closed chain (the controller's plausibility check). "
      "Workspaces sized once: one object serves one thread.")
      .def(py::init([](std::shared_ptr<mc::Model> model) {
             return std::make_shared<mc::ConstraintDistance>(std::move(model));
           }),
           py::arg("model"))
      .def(
          "distances",
          [](mc::ConstraintDistance& c, const Arr& q) {
            if (q.ndim() != 1 || q.shape(0) != c.model().nq())
              throw py::value_error("q has shape " + shape_str(q) + ", expected (" + std::to_string(c.model().nq()) +
                                    ",)");
            const mc::VecX& d = c.compute(q.data());
            py::list out(d.size());
            for (long i = 0; i < d.size(); ++i) out[i] = py::float_(d[i]);
            return out;
          },
          py::arg("q"), "The distances (a list of m floats, constraint order) at q (nq,).");

  py::class_<mc::SampleGate, std::shared_ptr<mc::SampleGate>>(
      m, "SampleGate",
      "The controller's sample path in one call (marionette_control.tracking.sample_checks.SampleChecks.gate): "
      "a serialized sensor_msgs/JointState (plain little-endian CDR) to the configuration q in model order, by "
      "joint name, finite and within the plausibility checks' range, jump and chain bounds. Anything else is "
      "refused without a reason: the Python path (JointStateParser, JointStateReader, SampleChecks), the "
      "reference, decides and explains it. One object serves one thread (it caches the last name order).")
      .def(py::init([](std::shared_ptr<mc::Model> model, std::vector<std::string> hardware_names, const Arr& lower,
                       const Arr& upper, const Arr& speed, double jump_margin, double chain_tolerance) {
             const long n = model->nq();
             mc::SampleBounds b;
             // (the range and speed may be infinite: unchecked; NaN would refuse every sample)
             for (const auto* a : {&lower, &upper, &speed})
               if (a->ndim() != 1 || a->shape(0) != n)
                 throw py::value_error("sample gate bounds have shape " + shape_str(*a) + ", expected (" +
                                       std::to_string(n) + ",)");
             b.lower = Eigen::Map<const mc::VecX>(lower.data(), n);
             b.upper = Eigen::Map<const mc::VecX>(upper.data(), n);
             b.speed = Eigen::Map<const mc::VecX>(speed.data(), n);
             if (b.lower.hasNaN() || b.upper.hasNaN() || b.speed.hasNaN())
               throw py::value_error("sample gate bounds must not be NaN");
             b.jump_margin = jump_margin;
             b.chain_tolerance = chain_tolerance;
             return std::make_shared<mc::SampleGate>(std::move(model), std::move(hardware_names), std::move(b));
           }),
           py::arg("model"), py::arg("hardware_names"), py::arg("lower"), py::arg("upper"), py::arg("speed"),
           py::arg("jump_margin"), py::arg("chain_tolerance"),
           "For `model`: the hardware joint of each configuration (model order), the range lower/upper (nq,; "
           "widened by the margin), the largest speed (nq,; velocity_factor x v_max), the jump margin and the "
           "chain tolerance (<= 0: unchecked).")
      .def(
          "read",
          [](mc::SampleGate& g, const py::bytes& data, const py::object& last_stamp, const py::object& q_last)
              -> py::object {
            char* p = nullptr;
            Py_ssize_t size = 0;
            if (PyBytes_AsStringAndSize(data.ptr(), &p, &size) != 0) throw py::error_already_set();
            std::int64_t last = 0, stamp = 0;
            const bool have_last = !last_stamp.is_none();
            if (have_last) last = last_stamp.cast<std::int64_t>();
            const double* prev = nullptr;
            py::object keep;  // (an empty Arr would allocate its shape on every call)
            if (have_last) {
              Arr prev_arr = py::isinstance<Arr>(q_last) ? py::reinterpret_borrow<Arr>(q_last) : py::cast<Arr>(q_last);
              if (prev_arr.ndim() != 1 || prev_arr.shape(0) != g.nq())
                throw py::value_error("q_last has shape " + shape_str(prev_arr) + ", expected (" +
                                      std::to_string(g.nq()) + ",)");
              prev = prev_arr.data();
              keep = std::move(prev_arr);
            }
            py::array_t<double> q = new_vector(g.nq());
            if (!g.read(reinterpret_cast<const std::uint8_t*>(p), static_cast<std::size_t>(size),
                        have_last ? &last : nullptr, prev, &stamp, q.mutable_data()))
              return py::none();
            return py::make_tuple(stamp, q);
          },
          py::arg("data"), py::arg("last_stamp"), py::arg("q_last"),
          "(stamp_ns, q (nq,)) of the serialized JointState `data` (bytes) when it passes, else None (the "
          "reference path decides). last_stamp (ns) and q_last (nq,): the last accepted sample, or None, None.");
}

}  // namespace mcpy
