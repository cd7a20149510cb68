// ModelBuilder validation and the derived structure of Model (ancestor
// configuration lists, storage offsets, which frames each component needs).
#include "marionette/model.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <sstream>

namespace mc {

namespace {

const char* kTransformNames[] = {"tx", "ty", "tz", "rx", "ry", "rz", "const"};
const char* kForcingNames[] = {"thesis", "symmetric"};

void require_finite(double v, const std::string& what) {
  if (!std::isfinite(v)) throw ModelError(what + " must be a finite number, got " + std::to_string(v));
}

Mat3 axis_rotation(int axis, double angle) {
  return Eigen::AngleAxisd(angle, Vec3::Unit(axis)).toRotationMatrix();
}

}  // namespace

const char* transform_name(TransformType t) { return kTransformNames[static_cast<int>(t)]; }

TransformType transform_from_name(const std::string& s) {
  for (int i = 0; i < 7; ++i)
    if (s == kTransformNames[i]) return static_cast<TransformType>(i);
  throw ModelError("unknown transform '" + s + "': expected one of tx, ty, tz, rx, ry, rz, const");
}

const char* forcing_name(Forcing f) { return kForcingNames[static_cast<int>(f)]; }

Forcing forcing_from_name(const std::string& s) {
  for (int i = 0; i < 2; ++i)
    if (s == kForcingNames[i]) return static_cast<Forcing>(i);
  throw ModelError("unknown forcing '" + s + "': expected thesis (f- = dt F, f+ = 0, thesis (4.12a)) or "
                   "symmetric (f- = f+ = dt F / 2)");
}

const char* step_failure_name(StepFailure f) {
  switch (f) {
    case StepFailure::NO_CONVERGENCE: return "no_convergence";
    case StepFailure::SINGULAR_MASS_MATRIX: return "singular_mass_matrix";
    case StepFailure::SINGULAR_CONSTRAINT_MATRIX: return "singular_constraint_matrix";
    case StepFailure::NON_FINITE: return "non_finite";
  }
  return "unknown";
}

int Frame::axis() const {
  switch (type) {
    case TransformType::TX: case TransformType::RX: return 0;
    case TransformType::TY: case TransformType::RY: return 1;
    case TransformType::TZ: case TransformType::RZ: return 2;
    default: return -1;
  }
}

bool Frame::is_rotation() const {
  return type == TransformType::RX || type == TransformType::RY || type == TransformType::RZ;
}

int Model::frame_index(const std::string& n) const {
  for (size_t i = 0; i < frames.size(); ++i)
    if (frames[i].name == n) return static_cast<int>(i);
  throw ModelError("model '" + name + "' has no frame named '" + n + "'");
}

int Model::config_index(const std::string& n) const {
  for (size_t i = 0; i < configs.size(); ++i)
    if (configs[i].name == n) return static_cast<int>(i);
  throw ModelError("model '" + name + "' has no configuration named '" + n + "'");
}

std::string Model::hash() const {
  // FNV-1a over a canonical text description of the model.
  std::ostringstream s;
  s.precision(17);
  s << name << "|g" << gravity.transpose() << "|";
  // The thesis rule adds nothing, so the identities of models (and of the trajectories made for
  // them) from before the rule was a choice stay what they were.
  if (forcing != Forcing::THESIS) s << "forcing " << forcing_name(forcing) << "|";
  for (const Frame& f : frames) {
    s << f.name << ">" << f.parent << ":" << transform_name(f.type) << ":" << f.config << ":"
      << f.R0.reshaped().transpose() << ":" << f.p0.transpose();
    if (f.has_mass) s << ":m" << f.inertia.transpose();
    s << ";";
  }
  for (const Config& c : configs) s << c.name << (c.kinematic ? "K" : "D") << ";";
  for (const auto& i : inputs) s << "u" << i << ";";
  for (const auto& x : linear_springs) s << "ls" << x.frame1 << "," << x.frame2 << "," << x.stiffness << "," << x.rest_length << ";";
  for (const auto& x : config_springs) s << "cs" << x.config << "," << x.stiffness << "," << x.neutral << ";";
  for (const auto& x : dampings) s << "d" << x.config << "," << x.coefficient << ";";
  for (const auto& x : config_forces) s << "cf" << x.config << "," << x.input << ";";
  for (const auto& x : wrenches) {
    s << "w" << x.frame << "," << x.constant.transpose();
    for (int i : x.input) s << "," << i;
    s << ";";
  }
  for (const auto& c : constraints) {
    s << "h" << static_cast<int>(c.type) << "," << c.frame1 << "," << c.frame2 << "," << c.length << ","
      << c.length_config << "," << c.axis;
    if (c.type == ConstraintType::COUPLING) s << "," << c.follower << "," << c.leader << "," << c.multiplier << "," << c.offset;
    s << ";";
  }
  std::string text = s.str();
  unsigned long long h = 1469598103934665603ULL;
  for (unsigned char ch : text) { h ^= ch; h *= 1099511628211ULL; }
  std::ostringstream out;
  out << std::hex;
  out.width(16);
  out.fill('0');
  out << h;
  return out.str();
}

ModelBuilder::ModelBuilder(std::string name) : name_(std::move(name)) {
  if (name_.empty()) throw ModelError("a model needs a non-empty name");
}

void ModelBuilder::set_gravity(const Vec3& g) {
  for (int i = 0; i < 3; ++i) require_finite(g[i], "gravity component " + std::to_string(i));
  gravity_ = g;
}

void ModelBuilder::set_forcing(const std::string& rule) { forcing_ = forcing_from_name(rule); }

void ModelBuilder::add_config(const std::string& name, bool kinematic) {
  if (name.empty()) throw ModelError("configuration names must be non-empty");
  for (const auto& c : configs_)
    if (c.name == name) throw ModelError("configuration '" + name + "' is declared twice");
  configs_.push_back({name, kinematic});
}

void ModelBuilder::add_frame(const std::string& name, const std::string& parent,
                             const std::string& transform, const std::string& config, double value) {
  FrameSpec f;
  f.name = name;
  f.parent = parent;
  f.transform = transform;
  if (transform == "const")
    throw ModelError("frame '" + name + "': use add_const_frame for a constant SE(3) offset");
  transform_from_name(transform);
  f.config = config;
  if (config.empty()) require_finite(value, "value of constant frame '" + name + "'");
  f.value = value;
  frames_.push_back(f);
}

void ModelBuilder::add_const_frame(const std::string& name, const std::string& parent, const Mat3& R,
                                   const Vec3& p) {
  for (int i = 0; i < 9; ++i) require_finite(R.data()[i], "rotation of frame '" + name + "'");
  for (int i = 0; i < 3; ++i) require_finite(p[i], "translation of frame '" + name + "'");
  if ((R.transpose() * R - Mat3::Identity()).norm() > 1e-9 || R.determinant() < 0)
    throw ModelError("frame '" + name + "': the constant rotation is not a proper rotation matrix");
  FrameSpec f;
  f.name = name;
  f.parent = parent;
  f.transform = "const";
  f.R = R;
  f.p = p;
  frames_.push_back(f);
}

void ModelBuilder::set_mass(const std::string& frame, double mass, const Vec3& inertia) {
  require_finite(mass, "mass of frame '" + frame + "'");
  for (int i = 0; i < 3; ++i) require_finite(inertia[i], "inertia of frame '" + frame + "'");
  if (mass < 0 || (inertia.array() < 0).any())
    throw ModelError("frame '" + frame + "': mass and principal inertias must be >= 0");
  for (auto& f : frames_)
    if (f.name == frame) {
      if (f.has_mass) throw ModelError("frame '" + frame + "' already has a mass");
      f.has_mass = true;
      f.mass = mass;
      f.inertia = inertia;
      return;
    }
  throw ModelError("set_mass: no frame named '" + frame + "' (frames must be added before their mass)");
}

void ModelBuilder::add_linear_spring(const std::string& name, const std::string& f1, const std::string& f2,
                                     double k, double x0) {
  require_finite(k, "stiffness of spring '" + name + "'");
  require_finite(x0, "rest length of spring '" + name + "'");
  if (x0 < 0) throw ModelError("spring '" + name + "': rest length must be >= 0");
  springs_.push_back({name, f1, f2, k, x0});
}

void ModelBuilder::add_config_spring(const std::string& name, const std::string& config, double k, double q0) {
  require_finite(k, "stiffness of configuration spring '" + name + "'");
  require_finite(q0, "neutral value of configuration spring '" + name + "'");
  csprings_.push_back({name, config, k, q0});
}

void ModelBuilder::add_damping(const std::string& config, double c) {
  require_finite(c, "damping coefficient of '" + config + "'");
  if (c < 0) throw ModelError("damping coefficient of '" + config + "' must be >= 0 (got " + std::to_string(c) + ")");
  dampings_.push_back({config, c});
}

void ModelBuilder::declare_input(const std::string& name) {
  if (name.empty()) throw ModelError("input names must be non-empty");
  if (std::find(inputs_.begin(), inputs_.end(), name) == inputs_.end()) inputs_.push_back(name);
}

void ModelBuilder::add_config_force(const std::string& name, const std::string& config, const std::string& input) {
  declare_input(input);
  cforces_.push_back({name, config, input});
}

void ModelBuilder::add_body_wrench(const std::string& name, const std::string& frame, const Vec6& constant,
                                   const std::array<std::string, 6>& inputs) {
  for (int i = 0; i < 6; ++i) {
    require_finite(constant[i], "wrench '" + name + "' component " + std::to_string(i));
    if (!inputs[i].empty()) declare_input(inputs[i]);
  }
  wrenches_.push_back({name, frame, constant, inputs});
}

void ModelBuilder::add_distance_constraint(const std::string& name, const std::string& f1, const std::string& f2,
                                           double length, const std::string& length_config) {
  if (length_config.empty()) {
    require_finite(length, "length of constraint '" + name + "'");
    if (length <= 0)
      throw ModelError("distance constraint '" + name + "': a fixed length must be > 0 (h = |p1-p2|^2 - L^2 "
                       "has a singular derivative at L = 0, thesis (3.22)-(3.23))");
  }
  constraints_.push_back({ConstraintType::DISTANCE, name, f1, f2, length_config, length, 2});
}

void ModelBuilder::add_plane_constraint(const std::string& name, const std::string& plane_frame, int axis,
                                        const std::string& point_frame) {
  if (axis < 0 || axis > 2) throw ModelError("plane constraint '" + name + "': axis must be 0, 1 or 2");
  constraints_.push_back({ConstraintType::PLANE, name, plane_frame, point_frame, "", 0.0, axis});
}

void ModelBuilder::add_coupling_constraint(const std::string& name, const std::string& follower,
                                           const std::string& leader, double multiplier, double offset) {
  require_finite(multiplier, "multiplier of coupling constraint '" + name + "'");
  require_finite(offset, "offset of coupling constraint '" + name + "'");
  if (follower == leader)
    throw ModelError("coupling constraint '" + name + "' couples configuration '" + follower + "' to itself");
  ConstraintSpec c{ConstraintType::COUPLING, name, "", "", "", 0.0, 2};
  c.follower = follower;
  c.leader = leader;
  c.multiplier = multiplier;
  c.offset = offset;
  constraints_.push_back(c);
}

void ModelBuilder::remove_constraint(const std::string& name) {
  for (auto it = constraints_.begin(); it != constraints_.end(); ++it)
    if (it->name == name) {
      constraints_.erase(it);
      return;
    }
  throw ModelError("model '" + name_ + "' has no constraint named '" + name + "'");
}

std::shared_ptr<Model> ModelBuilder::build() const {
  auto model = std::make_shared<Model>();
  Model& M = *model;
  M.name = name_;
  M.gravity = gravity_;
  M.forcing = forcing_;

  // ---- configurations: explicit declarations plus those named by frames ----
  std::vector<ConfigSpec> cspecs = configs_;
  auto find_cspec = [&](const std::string& n) -> int {
    for (size_t i = 0; i < cspecs.size(); ++i)
      if (cspecs[i].name == n) return static_cast<int>(i);
    return -1;
  };
  for (const auto& f : frames_)
    if (!f.config.empty() && find_cspec(f.config) < 0) cspecs.push_back({f.config, false});
  // Dynamic first, then kinematic (the state layout of docs/architecture.md).
  std::vector<int> order;
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = 0; i < cspecs.size(); ++i)
      if (cspecs[i].kinematic == (pass == 1)) order.push_back(static_cast<int>(i));
  std::map<std::string, int> cidx;
  for (int i : order) {
    cidx[cspecs[i].name] = static_cast<int>(M.configs.size());
    M.configs.push_back({cspecs[i].name, cspecs[i].kinematic, -1});
    (cspecs[i].kinematic ? M.nk : M.nd)++;
  }
  auto config_of = [&](const std::string& n, const std::string& who) {
    auto it = cidx.find(n);
    if (it == cidx.end()) throw ModelError(who + ": unknown configuration '" + n + "'");
    return it->second;
  };

  // ---- frames ----
  Frame world;
  world.name = "world";
  M.frames.push_back(world);
  std::map<std::string, int> fidx{{"world", 0}};
  for (const auto& fs : frames_) {
    if (fs.name.empty()) throw ModelError("frame names must be non-empty");
    if (fidx.count(fs.name)) throw ModelError("frame '" + fs.name + "' is defined twice");
    auto pit = fidx.find(fs.parent);
    if (pit == fidx.end())
      throw ModelError("frame '" + fs.name + "': unknown parent frame '" + fs.parent +
                       "' (parents must be added before their children)");
    Frame f;
    f.name = fs.name;
    f.parent = pit->second;
    f.type = transform_from_name(fs.transform);
    if (f.type == TransformType::CONST) {
      f.R0 = fs.R;
      f.p0 = fs.p;
    } else if (fs.config.empty()) {
      // A constant primitive is stored as a constant offset.
      const int a = f.axis();
      if (f.is_rotation()) f.R0 = axis_rotation(a, fs.value);
      else f.p0[a] = fs.value;
    } else {
      f.config = config_of(fs.config, "frame '" + fs.name + "'");
      Config& c = M.configs[f.config];
      if (c.frame >= 0)
        throw ModelError("configuration '" + c.name + "' drives two frames ('" + M.frames[c.frame].name + "' and '" +
                         fs.name + "'); each configuration drives exactly one transform (thesis R2)");
      c.frame = static_cast<int>(M.frames.size());
    }
    if (fs.has_mass) {
      f.has_mass = true;
      f.inertia << fs.mass, fs.mass, fs.mass, fs.inertia;
    }
    f.anc = M.frames[f.parent].anc;
    if (f.config >= 0) f.anc.push_back(f.config);
    fidx[f.name] = static_cast<int>(M.frames.size());
    M.frames.push_back(f);
  }
  auto frame_of = [&](const std::string& n, const std::string& who) {
    auto it = fidx.find(n);
    if (it == fidx.end()) throw ModelError(who + ": unknown frame '" + n + "'");
    return it->second;
  };
  M.inputs = inputs_;
  auto input_of = [&](const std::string& n) {
    return static_cast<int>(std::find(M.inputs.begin(), M.inputs.end(), n) - M.inputs.begin());
  };

  // ---- components ----
  std::set<std::string> component_names;
  auto unique_name = [&](const std::string& n, const char* kind) {
    if (n.empty()) return;
    if (!component_names.insert(n).second)
      throw ModelError(std::string(kind) + " name '" + n + "' is used twice");
  };
  for (const auto& s : springs_) {
    unique_name(s.name, "spring");
    M.linear_springs.push_back({frame_of(s.f1, "spring '" + s.name + "'"), frame_of(s.f2, "spring '" + s.name + "'"),
                                s.k, s.x0, s.name});
  }
  for (const auto& s : csprings_) {
    unique_name(s.name, "configuration spring");
    M.config_springs.push_back({config_of(s.config, "configuration spring '" + s.name + "'"), s.k, s.q0, s.name});
  }
  M.damping_coefficient.assign(M.nq(), 0.0);
  for (const auto& d : dampings_) {
    const int c = config_of(d.config, "damping");
    if (M.configs[c].kinematic)
      throw ModelError("damping on kinematic configuration '" + d.config +
                       "': kinematic configurations are prescribed and take no forces");
    if (M.damping_coefficient[c] != 0.0) throw ModelError("configuration '" + d.config + "' is damped twice");
    M.damping_coefficient[c] = d.c;
    M.dampings.push_back({c, d.c});
  }
  for (const auto& f : cforces_) {
    unique_name(f.name, "configuration force");
    const int c = config_of(f.config, "configuration force '" + f.name + "'");
    if (M.configs[c].kinematic)
      throw ModelError("configuration force '" + f.name + "' acts on kinematic configuration '" + f.config +
                       "': kinematic configurations are prescribed and take no forces");
    M.config_forces.push_back({c, input_of(f.input), f.name});
  }
  for (const auto& w : wrenches_) {
    unique_name(w.name, "body wrench");
    BodyWrench b{frame_of(w.frame, "body wrench '" + w.name + "'"), w.constant, {}, w.name};
    for (int i = 0; i < 6; ++i) b.input[i] = w.inputs[i].empty() ? -1 : input_of(w.inputs[i]);
    M.wrenches.push_back(b);
  }
  for (const auto& cs : constraints_) {
    unique_name(cs.name, "constraint");
    Constraint c;
    c.type = cs.type;
    c.name = cs.name;
    if (cs.type == ConstraintType::COUPLING) {
      const std::string who = "coupling constraint '" + cs.name + "'";
      c.frame1 = c.frame2 = -1;
      c.follower = config_of(cs.follower, who);
      c.leader = config_of(cs.leader, who);
      if (M.configs[c.follower].kinematic)
        throw ModelError(who + ": the follower '" + cs.follower + "' must be a dynamic configuration (it follows " +
                         "'" + cs.leader + "'; a kinematic one is prescribed)");
      c.multiplier = cs.multiplier;
      c.offset = cs.offset;
      c.support = {std::min(c.follower, c.leader), std::max(c.follower, c.leader)};
      M.constraints.push_back(c);
      continue;
    }
    c.frame1 = frame_of(cs.f1, "constraint '" + cs.name + "'");
    c.frame2 = frame_of(cs.f2, "constraint '" + cs.name + "'");
    if (c.frame1 == c.frame2)
      throw ModelError("constraint '" + cs.name + "' joins frame '" + cs.f1 + "' to itself");
    c.length = cs.length;
    c.axis = cs.axis;
    if (!cs.length_config.empty()) c.length_config = config_of(cs.length_config, "constraint '" + cs.name + "'");
    std::set<int> sup(M.frames[c.frame1].anc.begin(), M.frames[c.frame1].anc.end());
    sup.insert(M.frames[c.frame2].anc.begin(), M.frames[c.frame2].anc.end());
    if (c.length_config >= 0) sup.insert(c.length_config);
    c.support.assign(sup.begin(), sup.end());
    M.constraints.push_back(c);
  }
  if (M.nc() > M.nd)
    throw ModelError("model '" + M.name + "' has " + std::to_string(M.nc()) + " constraints but only " +
                     std::to_string(M.nd) + " dynamic configurations");

  // ---- what each frame must provide ----
  auto mark = [&](int f, bool vel) {
    for (int k = f; k >= 0; k = M.frames[k].parent) {
      M.frames[k].need_position = true;
      if (vel) M.frames[k].need_velocity = true;
    }
  };
  for (size_t f = 0; f < M.frames.size(); ++f)
    if (M.frames[f].has_mass) {
      mark(static_cast<int>(f), true);
      M.mass_frames.push_back(static_cast<int>(f));
    }
  for (const auto& s : M.linear_springs) { mark(s.frame1, false); mark(s.frame2, false); }
  auto flag = [&](std::vector<char>& mask, int f) {
    for (int k = f; k >= 0; k = M.frames[k].parent) mask[k] = 1;
  };
  M.lagrangian_frames.assign(M.frames.size(), 0);
  M.spring_frames.assign(M.frames.size(), 0);
  for (int f : M.mass_frames) flag(M.lagrangian_frames, f);
  for (const auto& s : M.linear_springs)
    for (int f : {s.frame1, s.frame2}) {
      flag(M.lagrangian_frames, f);
      flag(M.spring_frames, f);
    }
  for (const auto& w : M.wrenches) mark(w.frame, true);
  M.constraint_frames.assign(M.frames.size(), 0);
  for (const auto& c : M.constraints) {
    if (c.type == ConstraintType::COUPLING) continue;  // joins configurations, not frames
    mark(c.frame1, false);
    mark(c.frame2, false);
    for (int f : {c.frame1, c.frame2}) flag(M.constraint_frames, f);
  }

  // ---- every dynamic configuration must carry inertia ----
  // ... or be coupled (a URDF mimic joint, transitively through coupling constraints) to a
  // configuration that carries inertia or is kinematic: a leader whose followers carry the mass
  // has a regular Newton matrix [[M, -Dh^T], [Dh, 0]] though M alone is singular (the step checks
  // that matrix: singular_mass_matrix, seed 001 §VII).
  const int nq = M.nq();
  std::vector<char> carries(nq, 0);
  for (int c = 0; c < nq; ++c) {
    const int f = M.configs[c].frame;
    std::function<void(int)> visit = [&](int k) {
      if (M.frames[k].has_mass && M.frames[k].inertia.norm() > 0) carries[c] = 1;
      for (size_t j = k + 1; j < M.frames.size() && !carries[c]; ++j)
        if (M.frames[j].parent == k) visit(static_cast<int>(j));
    };
    if (M.configs[c].kinematic) carries[c] = 1;
    else if (f >= 0) visit(f);
  }
  std::vector<int> group(nq);
  for (int c = 0; c < nq; ++c) group[c] = c;
  std::function<int(int)> root = [&](int c) { return group[c] == c ? c : group[c] = root(group[c]); };
  for (const auto& k : M.constraints)
    if (k.type == ConstraintType::COUPLING) group[root(k.follower)] = root(k.leader);
  std::vector<char> group_carries(nq, 0);
  for (int c = 0; c < nq; ++c)
    if (carries[c]) group_carries[root(c)] = 1;
  for (int c = 0; c < M.nd; ++c) {
    if (carries[c] || group_carries[root(c)]) continue;
    const int f = M.configs[c].frame;
    bool in_coupling = false;
    for (int o = 0; o < nq; ++o)
      if (o != c && root(o) == root(c)) in_coupling = true;
    const std::string also = in_coupling ? ", nor does any configuration coupled to it" : "";
    if (f < 0)
      throw ModelError("dynamic configuration '" + M.configs[c].name +
                       "' drives no frame: it has no inertia" + also + " (declare it kinematic, or use it in a frame)");
    throw ModelError("dynamic configuration '" + M.configs[c].name + "' moves no mass (no frame with mass at or below '" +
                     M.frames[f].name + "')" + also +
                     ": the mass matrix would be singular; add a mass or declare it kinematic");
  }

  // ---- storage offsets of the derivative caches ----
  for (const Frame& f : M.frames) {
    const int d = static_cast<int>(f.anc.size());
    M.off1.push_back(M.size1);
    M.off2.push_back(M.size2);
    M.off3.push_back(M.size3);
    M.offJ1.push_back(M.sizeJ1);
    M.offJ2.push_back(M.sizeJ2);
    M.size1 += d;
    M.size2 += packed2_size(d);
    M.size3 += packed3_size(d);
    M.sizeJ1 += d * d;
    M.sizeJ2 += packed2_size(d) * d;
  }
  M.source = std::make_shared<ModelBuilder>(*this);
  return model;
}

}  // namespace mc
