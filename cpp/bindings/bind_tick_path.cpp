// Bindings of tick_path.hpp: the sample buffer, the sample/tick alignment and the controller's
// common tick in one call (the GIL released and the kernel's system locked while it may tick).
#include "common.hpp"
#include "marionette/tick_path.hpp"

namespace mcpy {

namespace {

using mc::SampleRing;
using mc::TickAlignment;
using mc::TickPath;

const double* configuration(const SampleRing& r, const Arr& q) {
  if (q.ndim() != 1 || q.shape(0) != r.nq())
    throw py::value_error("q has shape " + shape_str(q) + ", expected (" + std::to_string(r.nq()) + ",)");
  return q.data();
}

}  // namespace

void bind_tick_path(py::module_& m) {
  py::class_<SampleRing, std::shared_ptr<SampleRing>>(
      m, "SampleRing",
      "The controller's last `size` accepted samples (stamp in ns, q (nq,)), the oldest overwritten first "
      "(marionette_control.tracking.controller, 'Sample/tick alignment').")
      .def(py::init<int, int>(), py::arg("size"), py::arg("nq"))
      .def_property_readonly("size", &SampleRing::size)
      .def_property_readonly("count", &SampleRing::count, "Samples stored (at most size).")
      .def(
          "push", [](SampleRing& r, std::int64_t stamp, const Arr& q) { r.push(stamp, configuration(r, q)); },
          py::arg("stamp_ns"), py::arg("q"), "Stores q (nq,; copied) stamped stamp_ns.")
      .def_property_readonly(
          "last_stamp",
          [](const SampleRing& r) -> py::object { return r.count() ? py::object(py::int_(r.last_stamp())) : py::none(); },
          "The newest sample's stamp (ns), or None.")
      .def_property_readonly(
          "latest",
          [](const SampleRing& r) -> py::object { return r.count() ? py::object(copy_vector(r.latest(), r.nq())) : py::none(); },
          "A copy of the newest sample's q (nq,), or None.")
      .def_property_readonly(
          "oldest_stamp",
          [](const SampleRing& r) -> py::object { return r.count() ? py::object(py::int_(r.oldest_stamp())) : py::none(); },
          "The oldest stored sample's stamp (ns), or None.")
      .def(
          "at",
          [](const SampleRing& r, int i) {
            if (i < 0 || i >= r.size()) throw py::index_error("sample index " + std::to_string(i) + " out of range");
            return copy_vector(r.at(i), r.nq());
          },
          py::arg("index"), "A copy of q (nq,) at a buffer index (predecessor()'s).")
      .def("predecessor", &SampleRing::predecessor, py::arg("target_ns"), py::arg("tol_ns"),
           "The buffer index of the sample before the newest whose stamp is closest to target_ns within ±tol_ns "
           "(the newer of two equally close), or -1.");

  py::class_<TickAlignment>(m, "TickAlignment", "Which tick a sample is (controller_core, 'Sample/tick alignment').")
      .def(py::init([](std::int64_t dt_ns, std::int64_t tol_ns) {
             if (dt_ns <= 0 || tol_ns < 0 || 2 * tol_ns >= dt_ns)
               throw py::value_error("tick alignment needs dt_ns > 0 and 0 <= tol_ns < dt_ns / 2, got dt_ns " +
                                     std::to_string(dt_ns) + ", tol_ns " + std::to_string(tol_ns));
             return TickAlignment{dt_ns, tol_ns};
           }),
           py::arg("dt_ns"), py::arg("tol_ns"))
      .def_readonly("dt_ns", &TickAlignment::dt_ns)
      .def_readonly("tol_ns", &TickAlignment::tol_ns)
      .def(
          "align",
          [](const TickAlignment& a, std::int64_t stamp, const py::object& last, const py::object& tick_stamp,
             const py::object& k_last) {
            std::int64_t l = 0, t = 0, tol = 0;
            if (!last.is_none()) l = last.cast<std::int64_t>();
            if (!tick_stamp.is_none()) t = tick_stamp.cast<std::int64_t>();
            const long k = a.align(stamp, last.is_none() ? nullptr : &l, tick_stamp.is_none() ? nullptr : &t,
                                   tick_stamp.is_none() ? 0 : k_last.cast<long>(), &tol);
            return py::make_tuple(k, tol);
          },
          py::arg("stamp_ns"), py::arg("last_ns"), py::arg("tick_stamp_ns"), py::arg("k_last"),
          "(k, tol_ns) of a sample stamped stamp_ns while running: k the tick it is (-1: between ticks), tol_ns the "
          "tolerance its predecessor is looked up with. last_ns: the previous accepted sample's stamp, or None; "
          "tick_stamp_ns and k_last: the run's last tick, or None (the first tick: k = 0).");

  py::class_<TickPath, std::shared_ptr<TickPath>>(
      m, "TickPath",
      "The controller's common tick in one call (cpp/include/marionette/tick_path.hpp): a serialized JointState "
      "through the sample gate, the stamp checks, the buffer, the tick alignment, the fused tick and the command's "
      "record; all or nothing: only an ordinary tick is completed, anything else leaves no trace and the Python "
      "core (the reference) takes the sample from where the gate left it.")
      .def(py::init<std::shared_ptr<mc::SampleGate>, std::shared_ptr<SampleRing>>(), py::arg("gate"), py::arg("ring"))
      .def("set_timing", &TickPath::set_timing, py::arg("timeout_ns"), py::arg("alignment"),
           "The stale/future bound of a stamp against the clock (state_timeout, ns) and the tick alignment.")
      .def("track", &TickPath::track, py::arg("kernel"), py::arg("history"),
           "The tracking ticks go to: its fused kernel (made with tolerances) and command history; None, None: "
           "none (samples are only read).")
      .def(
          "tick",
          [](TickPath& t, const py::bytes& data, std::int64_t now_ns, const py::object& tick_stamp,
             const py::object& k_last) -> py::object {
            // (five arguments: pybind11 keeps up to six, self included, without allocating)
            char* p = nullptr;
            Py_ssize_t size = 0;
            if (PyBytes_AsStringAndSize(data.ptr(), &p, &size) != 0) throw py::error_already_set();
            const auto* bytes = reinterpret_cast<const std::uint8_t*>(p);
            std::int64_t stamp = 0;
            py::array_t<double> q = new_vector(t.nq());
            const bool may_tick = !tick_stamp.is_none() && t.kernel();
            if (!may_tick) {
              if (t.tick(bytes, static_cast<std::size_t>(size), now_ns, nullptr, 0, &stamp, q.mutable_data(), nullptr,
                         nullptr, nullptr, nullptr) == TickPath::Outcome::REFUSED)
                return py::none();
              return py::make_tuple(stamp, q);
            }
            const std::int64_t last_tick = tick_stamp.cast<std::int64_t>();
            const long k_prev = k_last.cast<long>();
            const mc::TickModel& M = t.kernel()->model();
            py::array_t<double> x_hat = new_vector(M.nx), x_ref = new_vector(M.nx), u = new_vector(M.nU);
            double *qp = q.mutable_data(), *xh = x_hat.mutable_data(), *xr = x_ref.mutable_data(), *up = u.mutable_data();
            long k = 0;
            TickPath::Outcome out;
            {
              py::gil_scoped_release nogil;
              std::lock_guard<std::mutex> g(t.kernel()->system().mutex());
              out = t.tick(bytes, static_cast<std::size_t>(size), now_ns, &last_tick, k_prev, &stamp, qp, &k, xh, xr, up);
            }
            if (out == TickPath::Outcome::REFUSED) return py::none();
            if (out == TickPath::Outcome::READ) return py::make_tuple(stamp, q);
            return py::make_tuple(stamp, k, x_hat, x_ref, u);
          },
          py::arg("data"), py::arg("now_ns"), py::arg("tick_stamp_ns"), py::arg("k_last"),
          "The serialized JointState `data` (bytes) received at now_ns: None when the gate refuses it (the reference "
          "path reads it and explains); (stamp_ns, q (nq,)) when it passed the gate but was not ticked here "
          "(nothing changed: the reference path takes it from there); (stamp_ns, k, x_hat_k (nx,), x_d(k) (nx,), "
          "u (nU,)) of an ordinary tick, stored and its command recorded. tick_stamp_ns and k_last: the run's last "
          "tick, or None, None when this call may only read (not running, before the first tick, a fault active, "
          "a switch or a plan pending or in effect).");
}

}  // namespace mcpy
