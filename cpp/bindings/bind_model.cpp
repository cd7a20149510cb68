// Bindings of model.hpp (ModelBuilder, Model) and model-level evaluations
// (placements, constraints, Lagrangian derivatives, energy).
#include "common.hpp"
#include "marionette/constraints.hpp"
#include "marionette/lagrangian.hpp"

namespace mcpy {

namespace {

using mc::Model;
using ModelPtr = std::shared_ptr<Model>;

const double* config_arg(const Model& m, const Arr& q, const char* what) {
  check_array(q, {m.nq()}, std::string(what) + " (configurations of model '" + m.name + "')", config_names(m));
  return q.data();
}

py::dict lagrangian_derivatives(const Model& m, const Arr& q, const Arr& v, int order) {
  if (order < 0 || order > 2) throw py::value_error("order must be 0, 1 or 2");
  const double* qp = config_arg(m, q, "q");
  const double* vp = config_arg(m, v, "v");
  mc::FrameCache cache(m);
  mc::LagrangianData L(m);
  {
    py::gil_scoped_release release;
    mc::compute_lagrangian(m, cache, qp, vp, order, L);
  }
  py::dict out;
  out["L"] = L.value;
  if (order >= 1) { out["Lq"] = L.Lq; out["Lv"] = L.Lv; }
  if (order >= 2) { out["Lqq"] = L.Lqq; out["Lqv"] = L.Lqv; out["Lvv"] = L.Lvv; }
  return out;
}

py::tuple constraint_derivatives(const Model& m, const Arr& q) {
  const double* qp = config_arg(m, q, "q");
  mc::FrameCache cache(m);
  mc::ConstraintData h(m);
  mc::compute_constraints(m, cache, qp, 1, h);
  return py::make_tuple(h.h, h.Dh);
}

/// sum_j weights_j D2h_j(q) (nq, nq): the curvature of a weighted sum of the constraint functions
/// (the exact Hessian of a penalty on h, thesis §6.6.2, needs it).
mc::MatX constraint_hessian(const Model& m, const Arr& q, const Arr& weights) {
  const double* qp = config_arg(m, q, "q");
  check_array(weights, {m.nc()}, "weights (one per constraint of model '" + m.name + "')");
  mc::FrameCache cache(m);
  mc::ConstraintData h(m);
  mc::compute_constraints(m, cache, qp, 2, h);
  mc::MatX H = mc::MatX::Zero(m.nq(), m.nq());
  mc::constraint_weighted_hessian(h, weights.data(), H);
  return H;
}

py::array placements(const Model& m, const Arr& q) {
  const double* qp = config_arg(m, q, "q");
  // Placements of every frame (not only those the dynamics needs).
  Model all = m;
  for (auto& f : all.frames) f.need_position = true;
  mc::FrameCache cache(all);
  mc::compute_placements(all, cache, qp, 0);
  const long nf = static_cast<long>(m.frames.size());
  py::array_t<double> out({nf, 4L, 4L});
  auto r = out.mutable_unchecked<3>();
  for (long f = 0; f < nf; ++f) {
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) r(f, i, j) = 0.0;
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) r(f, i, j) = cache.R[f](i, j);
      r(f, i, 3) = cache.p[f][i];
    }
    r(f, 3, 3) = 1.0;
  }
  return out;
}

}  // namespace

void bind_model(py::module_& m) {
  m.attr("FORCING_RULES") = py::make_tuple(mc::forcing_name(mc::Forcing::THESIS), mc::forcing_name(mc::Forcing::SYMMETRIC));
  py::class_<mc::ModelBuilder>(m, "ModelBuilder",
                               "Collects a tree description; build() validates it and returns an immutable Model.")
      .def(py::init<std::string>(), py::arg("name"))
      .def("set_gravity", &mc::ModelBuilder::set_gravity, py::arg("gravity"))
      .def("set_forcing", &mc::ModelBuilder::set_forcing, py::arg("rule"),
           "The forcing discretization (thesis (4.12)): 'thesis' (f- = dt F, f+ = 0, the default) or 'symmetric' "
           "(f- = f+ = dt F / 2), F at the step's midpoint.")
      .def("add_config", &mc::ModelBuilder::add_config, py::arg("name"), py::arg("kinematic") = false)
      .def("add_frame", &mc::ModelBuilder::add_frame, py::arg("name"), py::arg("parent"), py::arg("transform"),
           py::arg("config") = "", py::arg("value") = 0.0,
           "Frame attached to `parent` by a primitive transform (tx, ty, tz, rx, ry, rz) driven by configuration "
           "`config`, or constant by `value` when config is empty.")
      .def("add_const_frame", &mc::ModelBuilder::add_const_frame, py::arg("name"), py::arg("parent"),
           py::arg("rotation"), py::arg("translation"))
      .def("set_mass", &mc::ModelBuilder::set_mass, py::arg("frame"), py::arg("mass"), py::arg("inertia"))
      .def("add_linear_spring", &mc::ModelBuilder::add_linear_spring, py::arg("name"), py::arg("frame1"),
           py::arg("frame2"), py::arg("stiffness"), py::arg("rest_length"))
      .def("add_config_spring", &mc::ModelBuilder::add_config_spring, py::arg("name"), py::arg("config"),
           py::arg("stiffness"), py::arg("neutral"))
      .def("add_damping", &mc::ModelBuilder::add_damping, py::arg("config"), py::arg("coefficient"))
      .def("add_config_force", &mc::ModelBuilder::add_config_force, py::arg("name"), py::arg("config"),
           py::arg("input"))
      .def("add_body_wrench", &mc::ModelBuilder::add_body_wrench, py::arg("name"), py::arg("frame"),
           py::arg("constant"), py::arg("inputs"))
      .def("add_distance_constraint", &mc::ModelBuilder::add_distance_constraint, py::arg("name"), py::arg("frame1"),
           py::arg("frame2"), py::arg("length") = 0.0, py::arg("length_config") = "")
      .def("add_plane_constraint", &mc::ModelBuilder::add_plane_constraint, py::arg("name"), py::arg("plane_frame"),
           py::arg("axis"), py::arg("point_frame"))
      .def("add_coupling_constraint", &mc::ModelBuilder::add_coupling_constraint, py::arg("name"),
           py::arg("follower"), py::arg("leader"), py::arg("multiplier"), py::arg("offset"),
           "h = q[follower] - multiplier q[leader] - offset (a URDF <mimic> joint); the follower is dynamic.")
      .def("remove_constraint", &mc::ModelBuilder::remove_constraint, py::arg("name"))
      .def("build", &mc::ModelBuilder::build);

  py::class_<Model, ModelPtr>(m, "Model", "Immutable tree model (frames, configurations, components).")
      .def_readonly("name", &Model::name)
      .def_property_readonly("hash", &Model::hash)
      .def_property_readonly("gravity", [](const Model& s) { return mc::Vec3(s.gravity); })
      .def_property_readonly("forcing", [](const Model& s) { return std::string(mc::forcing_name(s.forcing)); },
                             "The forcing discretization: 'thesis' or 'symmetric' (ModelBuilder.set_forcing).")
      .def_property_readonly(
          "forcing_weights", [](const Model& s) { return py::make_tuple(s.forcing_minus(), s.forcing_plus()); },
          "(w-, w+): f- = w- dt F, f+ = w+ dt F.")
      .def_property_readonly("nq", &Model::nq)
      .def_readonly("nd", &Model::nd)
      .def_readonly("nk", &Model::nk)
      .def_property_readonly("nu", &Model::nu)
      .def_property_readonly("nc", &Model::nc)
      .def_property_readonly("nx", &Model::nx)
      .def_property_readonly("nU", &Model::nU)
      .def_property_readonly("config_names", [](const Model& s) { return config_names(s); })
      .def_property_readonly("kinematic", [](const Model& s) {
        std::vector<bool> r;
        for (const auto& c : s.configs) r.push_back(c.kinematic);
        return r;
      })
      .def_readonly("input_names", &Model::inputs)
      .def_property_readonly("state_names", [](const Model& s) { return state_names(s); })
      .def_property_readonly("discrete_input_names", [](const Model& s) { return input_names(s); })
      .def_property_readonly("frame_names", [](const Model& s) {
        std::vector<std::string> r;
        for (const auto& f : s.frames) r.push_back(f.name);
        return r;
      })
      .def_property_readonly("frame_parents", [](const Model& s) {
        std::vector<int> r;
        for (const auto& f : s.frames) r.push_back(f.parent);
        return r;
      })
      .def_property_readonly("frame_transforms", [](const Model& s) {
        std::vector<std::string> r;
        for (const auto& f : s.frames) r.push_back(mc::transform_name(f.type));
        return r;
      })
      .def_property_readonly("frame_configs", [](const Model& s) {
        std::vector<int> r;
        for (const auto& f : s.frames) r.push_back(f.config);
        return r;
      })
      .def_property_readonly("masses", [](const Model& s) {
        py::dict d;
        for (int f : s.mass_frames) d[py::str(s.frames[f].name)] = s.frames[f].inertia;
        return d;
      })
      .def_property_readonly("constraint_names", [](const Model& s) { return constraint_names(s); })
      .def_property_readonly(
          "constraint_frames",
          [](const Model& s) {
            py::list r;
            for (const auto& c : s.constraints) {
              if (c.type == mc::ConstraintType::COUPLING) {
                r.append(py::make_tuple(c.name, "coupling", s.configs[c.follower].name, s.configs[c.leader].name,
                                        py::make_tuple(c.multiplier, c.offset)));
                continue;
              }
              const bool dist = c.type == mc::ConstraintType::DISTANCE;
              py::object length = py::none();
              if (dist) length = c.length_config >= 0 ? py::object(py::str(s.configs[c.length_config].name))
                                                      : py::object(py::float_(c.length));
              r.append(py::make_tuple(c.name, dist ? "distance" : "plane", s.frames[c.frame1].name,
                                      s.frames[c.frame2].name, dist ? length : py::object(py::int_(c.axis))));
            }
            return r;
          },
          "Per constraint: (name, 'distance' | 'plane', frame1, frame2, length (number or configuration name) "
          "| plane axis), or (name, 'coupling', follower configuration, leader configuration, (multiplier, "
          "offset)).")
      .def(
          "to_builder", [](const Model& s) { return mc::ModelBuilder(*s.source); },
          "A copy of the description this model was built from, to build variants of it.")
      .def("frame_index", &Model::frame_index, py::arg("name"))
      .def("config_index", &Model::config_index, py::arg("name"))
      .def("placements", &placements, py::arg("q"), "World transforms of every frame, shape (n_frames, 4, 4).")
      .def("constraints", &constraint_derivatives, py::arg("q"), "(h (m,), Dh (m, nq)) at q.")
      .def("constraint_hessian", &constraint_hessian, py::arg("q"), py::arg("weights"),
           "sum_j weights[j] D2h_j(q), shape (nq, nq), weights (m,) in constraint order.")
      .def("lagrangian", &lagrangian_derivatives, py::arg("q"), py::arg("v"), py::arg("order") = 2,
           "L and its derivatives (Lq, Lv, Lqq, Lqv[i,j] = d2L/dq_i dv_j, Lvv) at (q, v).")
      .def(
          "energy",
          [](const Model& s, const Arr& q, const Arr& v) {
            auto d = lagrangian_derivatives(s, q, v, 1);
            const mc::VecX Lv = d["Lv"].cast<mc::VecX>();
            return Lv.dot(Eigen::Map<const mc::VecX>(v.data(), s.nq())) - d["L"].cast<double>();
          },
          py::arg("q"), py::arg("v"), "Total energy v.dL/dv - L.");
}

}  // namespace mcpy
