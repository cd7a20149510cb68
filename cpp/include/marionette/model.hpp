// Model: the immutable description of a mechanical system as a tree of frames
// (thesis ch. 2) with configurations, masses, potentials, forces and holonomic
// constraints (thesis ch. 3). Built once by ModelBuilder, validated, then
// shared read-only by any number of Data workspaces (Model/Data split as in
// Pinocchio).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "marionette/types.hpp"

namespace mc {

/// The primitive transforms of thesis §2 (R1): translation along / rotation
/// about one axis of the parent frame, plus a constant SE(3) offset.
enum class TransformType { TX, TY, TZ, RX, RY, RZ, CONST };

const char* transform_name(TransformType t);
TransformType transform_from_name(const std::string& s);

/// One frame of the tree. Frame 0 is the world frame.
struct Frame {
  std::string name;
  int parent = -1;               ///< index of the parent frame (-1 for world)
  TransformType type = TransformType::CONST;
  int config = -1;               ///< driving configuration (-1: constant)
  Mat3 R0 = Mat3::Identity();    ///< constant rotation (CONST or constant primitive)
  Vec3 p0 = Vec3::Zero();        ///< constant translation (CONST or constant primitive)
  bool has_mass = false;
  Vec6 inertia = Vec6::Zero();   ///< diag(m, m, m, Ixx, Iyy, Izz) in this frame
  // Derived at build time.
  std::vector<int> anc;          ///< configurations the frame depends on, root first (own last)
  bool need_position = false;    ///< some component needs this frame's placement
  bool need_velocity = false;    ///< some component needs this frame's body velocity
  int axis() const;              ///< 0, 1, 2 for primitives, -1 for CONST
  bool is_rotation() const;
  bool driven() const { return config >= 0; }
};

/// A configuration variable. Dynamic ones have momentum; kinematic ones are
/// prescribed inputs (thesis §3.6).
struct Config {
  std::string name;
  bool kinematic = false;
  int frame = -1;                ///< the frame it drives (-1: drives none, e.g. a string length)
};

struct LinearSpring { int frame1, frame2; double stiffness, rest_length; std::string name; };
struct ConfigSpring { int config; double stiffness, neutral; std::string name; };
struct Damping { int config; double coefficient; };
struct ConfigForce { int config; int input; std::string name; };
/// Body wrench [force; torque] in the frame's own coordinates; each component
/// is a constant or one force input (input[i] >= 0).
struct BodyWrench { int frame; Vec6 constant; std::array<int, 6> input; std::string name; };

/// How the impulse of the forces F(q, qdot, u) over a step is split between its two ends
/// (thesis (4.12)): f- = w- dt F(qbar, qdot, u_k) enters the step's DEL equation (4.14),
/// f+ = w+ dt F(qbar, qdot, u_k) the momentum p_{k+1} = D_2 L_d + f+ (and the discrete Legendre
/// transform), with qbar, qdot the midpoint values of the midpoint discrete Lagrangian (4.8).
///  THESIS:    w- = 1, w+ = 0, thesis (4.12a)-(4.12b) and the reference implementation: the whole
///             impulse at the start of the step. The configurations are then first order in dt
///             whenever F != 0 (the force acts half a step early).
///  SYMMETRIC: w- = w+ = 1/2: the virtual work of F along the linear interpolation of q over the
///             step by the midpoint rule, dt F(qbar) . (dq_k + dq_{k+1})/2. For L = 1/2 qdot^T M qdot
///             - V with constant M the step is the implicit midpoint rule M (q_{k+1} - q_k)/dt =
///             (p_k + p_{k+1})/2, p_{k+1} - p_k = dt (F - grad V)(qbar): second order with forces.
enum class Forcing { THESIS, SYMMETRIC };

const char* forcing_name(Forcing f);
/// "thesis" or "symmetric"; throws ModelError naming the expected values otherwise.
Forcing forcing_from_name(const std::string& s);

enum class ConstraintType { DISTANCE, PLANE, COUPLING };
/// Holonomic constraint h(q) = 0 (thesis §3.5).
///  DISTANCE: h = |p1 - p2|^2 - L^2 with L fixed (length_config < 0) or
///            L = q[length_config] (the string, thesis §6.7.2).
///  PLANE:    h = (R_frame1 e_axis) . (p_frame2 - p_frame1) (point frame2 on
///            the plane through frame1 normal to its axis).
///  COUPLING: h = q[follower] - multiplier q[leader] - offset (a URDF <mimic>
///            joint: thesis §2.5 models a configuration shared by several
///            transforms as open chains with a holonomic constraint, R2 kept);
///            no frames (frame1 = frame2 = -1), Dh constant, D2h = D3h = 0.
struct Constraint {
  ConstraintType type;
  std::string name;
  int frame1, frame2;
  double length = 0.0;
  int length_config = -1;
  int axis = 2;
  int follower = -1, leader = -1;  ///< COUPLING only
  double multiplier = 1.0, offset = 0.0;
  // Derived: union of the configurations h depends on.
  std::vector<int> support;
};

class ModelBuilder;

/// Immutable model. Configuration order: all dynamic configurations (in the
/// order they were declared), then all kinematic ones.
class Model {
 public:
  std::string name;
  Vec3 gravity = Vec3(0, 0, -9.8);
  Forcing forcing = Forcing::THESIS;
  /// w- and w+ of the forcing rule: f- = w- dt F, f+ = w+ dt F.
  double forcing_minus() const { return forcing == Forcing::THESIS ? 1.0 : 0.5; }
  double forcing_plus() const { return forcing == Forcing::THESIS ? 0.0 : 0.5; }
  std::vector<Frame> frames;
  std::vector<Config> configs;
  std::vector<std::string> inputs;  ///< force inputs
  std::vector<LinearSpring> linear_springs;
  std::vector<ConfigSpring> config_springs;
  std::vector<Damping> dampings;
  std::vector<ConfigForce> config_forces;
  std::vector<BodyWrench> wrenches;
  std::vector<Constraint> constraints;

  int nq() const { return static_cast<int>(configs.size()); }
  int nd = 0;  ///< dynamic configurations
  int nk = 0;  ///< kinematic configurations
  int nu() const { return static_cast<int>(inputs.size()); }
  int nc() const { return static_cast<int>(constraints.size()); }
  int nx() const { return nq() + nd + nk; }       ///< discrete state [q; p; v]
  int nU() const { return nu() + nk; }            ///< discrete input [u; rho_next]

  int frame_index(const std::string& name) const;   ///< throws if unknown
  int config_index(const std::string& name) const;  ///< throws if unknown
  std::vector<int> mass_frames;                     ///< frames with mass, in tree order
  std::vector<char> constraint_frames;              ///< frames the constraints need (with ancestors)
  /// Frames whose placements the Lagrangian reads (mass frames: gravity; linear springs; with ancestors),
  /// and among them those of the linear springs, which need the placements' derivatives too (gravity's
  /// come from the body Jacobians up to second order, lagrangian.hpp).
  std::vector<char> lagrangian_frames, spring_frames;
  std::vector<double> damping_coefficient;          ///< per configuration (0 if none)

  /// Storage offsets of each frame's derivative blocks in a FrameCache.
  std::vector<int> off1, off2, off3, offJ1, offJ2;
  int size1 = 0, size2 = 0, size3 = 0, sizeJ1 = 0, sizeJ2 = 0;

  /// A stable fingerprint of everything that defines the dynamics.
  std::string hash() const;

  /// The description this model was built from: a copy can be extended or
  /// trimmed to build variants (e.g. dynamic embedding, string relaxation).
  std::shared_ptr<const ModelBuilder> source;
};

/// Collects a description, validates it and produces a Model. Names must be
/// unique among frames, among configurations and among inputs.
class ModelBuilder {
 public:
  explicit ModelBuilder(std::string name);
  void set_gravity(const Vec3& g);
  /// The forcing discretization by name ("thesis", the default, or "symmetric"; see Forcing).
  void set_forcing(const std::string& rule);
  /// Declares a configuration before or after the frame that uses it.
  void add_config(const std::string& name, bool kinematic);
  /// Adds a frame driven by configuration `config` (declared on the fly as
  /// dynamic unless already declared) or, with config empty, a constant
  /// primitive transform by `value`.
  void add_frame(const std::string& name, const std::string& parent, const std::string& transform,
                 const std::string& config, double value);
  /// Adds a frame with a constant SE(3) offset (rotation R, translation p).
  void add_const_frame(const std::string& name, const std::string& parent, const Mat3& R,
                       const Vec3& p);
  void set_mass(const std::string& frame, double mass, const Vec3& inertia);
  void add_linear_spring(const std::string& name, const std::string& frame1, const std::string& frame2,
                         double stiffness, double rest_length);
  void add_config_spring(const std::string& name, const std::string& config, double stiffness,
                         double neutral);
  void add_damping(const std::string& config, double coefficient);
  void add_config_force(const std::string& name, const std::string& config, const std::string& input);
  /// components: 6 entries, each either a number (constant) or an input name.
  void add_body_wrench(const std::string& name, const std::string& frame, const Vec6& constant,
                       const std::array<std::string, 6>& inputs);
  void add_distance_constraint(const std::string& name, const std::string& frame1,
                               const std::string& frame2, double length,
                               const std::string& length_config);
  void add_plane_constraint(const std::string& name, const std::string& plane_frame, int axis,
                            const std::string& point_frame);
  /// h = q[follower] - multiplier q[leader] - offset; the follower must be dynamic.
  void add_coupling_constraint(const std::string& name, const std::string& follower, const std::string& leader,
                               double multiplier, double offset);
  /// Removes the constraint named `name` (throws if there is none).
  void remove_constraint(const std::string& name);
  /// The returned model is never modified afterwards (held as const everywhere).
  std::shared_ptr<Model> build() const;

 private:
  struct FrameSpec {
    std::string name, parent, transform, config;
    double value = 0.0;
    Mat3 R = Mat3::Identity();
    Vec3 p = Vec3::Zero();
    bool has_mass = false;
    double mass = 0.0;
    Vec3 inertia = Vec3::Zero();
  };
  struct ConfigSpec { std::string name; bool kinematic; };
  struct SpringSpec { std::string name, f1, f2; double k, x0; };
  struct CSpringSpec { std::string name, config; double k, q0; };
  struct DampSpec { std::string config; double c; };
  struct CForceSpec { std::string name, config, input; };
  struct WrenchSpec { std::string name, frame; Vec6 constant; std::array<std::string, 6> inputs; };
  struct ConstraintSpec {
    ConstraintType type; std::string name, f1, f2, length_config; double length; int axis;
    std::string follower = "", leader = ""; double multiplier = 1.0, offset = 0.0;
  };
  std::string name_;
  Vec3 gravity_ = Vec3(0, 0, -9.8);
  Forcing forcing_ = Forcing::THESIS;
  std::vector<FrameSpec> frames_;
  std::vector<ConfigSpec> configs_;
  std::vector<SpringSpec> springs_;
  std::vector<CSpringSpec> csprings_;
  std::vector<DampSpec> dampings_;
  std::vector<CForceSpec> cforces_;
  std::vector<WrenchSpec> wrenches_;
  std::vector<ConstraintSpec> constraints_;
  std::vector<std::string> inputs_;
  void declare_input(const std::string& name);
};

}  // namespace mc
