// Bindings of tick_kernel.hpp: the command history and the fused controller tick (GIL released
// while it computes). The tick path checks only sizes (the controller checked the sample's
// content); the kernel's outputs are new arrays the caller keeps (results, records).
#include "common.hpp"
#include "marionette/tick_kernel.hpp"

namespace mcpy {

namespace {

using mc::CommandHistory;
using mc::TickKernel;

const double* sized(const Arr& a, long n, const char* what) {
  if (a.ndim() != 1 || a.shape(0) != n)
    throw py::value_error(std::string(what) + " has shape " + shape_str(a) + ", expected (" + std::to_string(n) + ",)");
  return a.data();
}

mc::MatXR rows(const Arr& a, const std::vector<long>& shape, const std::string& what) {
  check_array(a, shape, what);
  long cols = 1;
  for (size_t i = 1; i < shape.size(); ++i) cols *= shape[i];
  return Eigen::Map<const mc::MatXR>(a.data(), shape[0], cols);
}

mc::VecX vec(const Arr& a, long n, const char* what) {
  sized(a, n, what);
  return Eigen::Map<const mc::VecX>(a.data(), n);
}

/// x as a C-contiguous float64 array: x itself when it is one (the tick path: no conversion, nothing allocated;
/// pybind11's converting caster allocates even then), else a converted copy.
Arr doubles(const py::handle& x) {
  if (py::isinstance<Arr>(x)) return py::reinterpret_borrow<Arr>(x);
  return py::cast<Arr>(x);
}

/// The data of a vector argument x (n) that may be None (null), kept alive with the object (an empty Arr would
/// allocate its shape).
struct OptionalVector {
  py::object keep;
  const double* data = nullptr;
  OptionalVector(const py::handle& x, long n, const char* what) {
    if (x.is_none()) return;
    Arr a = doubles(x);
    data = sized(a, n, what);
    keep = std::move(a);
  }
};

/// A tick's samples: q (nq), q_prev (nq, or None: null) and x_ref (nx; None only without an integral, or
/// when the law is not computed: estimate_predict).
struct Samples {
  OptionalVector q_in, prev_in, ref_in;
  const double* q;
  const double* q_prev;
  const double* x_ref;
  Samples(const TickKernel& t, const py::handle& q_obj, const py::handle& prev, const py::handle& ref,
          bool law = true)
      : q_in(q_obj.is_none() ? throw py::value_error("q is None") : q_obj, t.model().nq, "q"),
        prev_in(prev, t.model().nq, "q_prev"),
        ref_in(law && ref.is_none() && t.model().Kz.rows()
                   ? throw py::value_error("x_ref is None: the integral action needs x_d(k)")
                   : ref,
               t.model().nx, "x_ref"),
        q(q_in.data), q_prev(prev_in.data), x_ref(ref_in.data) {}
};

/// f() without the GIL, under the system's lock (the model steps).
template <class F>
auto unlocked(TickKernel& t, F f) {
  py::gil_scoped_release nogil;
  std::lock_guard<std::mutex> g(t.system().mutex());
  return f();
}

}  // namespace

void bind_tick_kernel(py::module_& m) {
  py::class_<CommandHistory, std::shared_ptr<CommandHistory>>(
      m, "CommandHistory",
      "The commands sent, by tick slot, and the input in effect over each step "
      "(marionette_control.tracking.prediction): a command sent at slot s is the input from step s + d on, until "
      "a later one replaces it; before the first command of a run the drives hold start()'s input. Keeps the "
      "last `size` commands (>= d + the longest gap bridged + 2).")
      .def(py::init<int, int, int, int>(), py::arg("nU"), py::arg("nk"), py::arg("delay_steps"), py::arg("size") = 32)
      .def_property_readonly("delay", &CommandHistory::delay)
      .def(
          "start", [](CommandHistory& h, const Arr& hold) { h.start(sized(hold, h.nU(), "hold")); }, py::arg("hold"),
          "Forgets every command; until the first one the drives hold `hold` (nU,).")
      .def(
          "sent", [](CommandHistory& h, long slot, const py::handle& u) { h.sent(slot, sized(doubles(u), h.nU(), "u")); },
          py::arg("slot"), py::arg("u"),
          "Records command u (nU,; copied) sent at `slot` (slots never decrease: ValueError otherwise).")
      .def(
          "sent_by_tick",
          [](CommandHistory& h, long k, const py::handle& u) { h.sent_by_tick(k, sized(doubles(u), h.nU(), "u")); },
          py::arg("k"), py::arg("u"),
          "Records command u (nU,) of tick k at slot max(k, last_slot): a hold the watchdog sent at its own clock's "
          "slot can lie past the tick (joint states late under load); this command reaches the drives after it.")
      .def(
          "carries",
          [](CommandHistory& h, const Arr& points) {
            check_array(points, {-1, h.nU()}, "command points");
            h.carries(points.data(), static_cast<int>(points.shape(0)));
          },
          py::arg("points"),
          "Attaches to the last command sent the inputs (m, nU) it carries after its first (a joint_trajectory "
          "command: the inputs of steps s + d + 1 ... s + d + m, then its last point held): applied() of the steps "
          "no later command reached returns them, as the drives follow them. An (0, nU) array detaches them.")
      .def(
          "applied", [](const CommandHistory& h, long j) { return copy_vector(h.applied(j), h.nU()); }, py::arg("j"),
          "The input u_j (nU,) in effect over step j: the last command sent at a slot <= j - d.")
      .def(
          "stream_state",
          [](const CommandHistory& h, long j, double dt) {
            std::vector<double> rho(h.nk()), v(h.nk());
            h.stream_state(j, dt, rho.data(), v.data());
            return py::make_tuple(rho, v);
          },
          py::arg("j"), py::arg("dt"),
          "(rho_j, v_j) (nk floats each) of the setpoint stream a command for step j continues: rho_j = the "
          "kinematic part of u_{j-1}, v_j = (rho_j - rho_{j-1})/dt. The limits are applied to this stream: a drive "
          "that follows setpoints within its limits follows a stream that respects them exactly, and one that fell "
          "behind (a command that came a cycle late) catches up with a stream that stayed smooth.")
      .def("carry_over", &CommandHistory::carry_over, py::arg("other"), py::arg("shift"),
           "Starts from `other`'s commands, each at its slot - shift: a run that begins at tick `shift` of another "
           "one keeps that run's commands in flight (a switch of trajectory; slots may be negative).")
      .def(
          "copy", [](const CommandHistory& h) { return std::make_shared<CommandHistory>(h); },
          "An independent history with the same commands (a planner continues it with the commands it predicts).")
      .def_property_readonly(
          "last_slot",
          [](const CommandHistory& h) -> py::object { return h.count() ? py::object(py::int_(h.last_slot())) : py::object(py::none()); },
          "The slot of the last command sent, or None.")
      .def_property_readonly(
          "last",
          [](const CommandHistory& h) -> py::object {
            return h.count() ? py::object(copy_vector(h.last(), h.nU())) : py::none();
          },
          "The last command sent (nU,), or None.");

  py::class_<TickKernel, std::shared_ptr<TickKernel>>(
      m, "TickKernel",
      "The tracking controller's tick in one call (marionette_control.tracking.native_tick): the Kalman filter's "
      "steps and update, the delay predictor, the tracking law on the motion or the plan in effect, the stream "
      "clamp and the finiteness check. Sized once; a tick allocates nothing but its outputs and runs without the "
      "GIL, under the system's lock.")
      .def(py::init([](std::shared_ptr<mc::DiscreteSystem> system, const Arr& X, const Arr& U, const Arr& K,
                       bool feedback, const Arr& L, int max_gap_steps, const Arr& lower, const Arr& upper,
                       const Arr& rate, const Arr& acceleration, int delay, const py::object& K_z,
                       int hand_over_steps, const py::object& tolerances, long start_steps,
                       const py::object& min_tension, const py::object& reserve, const py::object& string_index,
                       const py::object& string_length, double budget_step, double saturation,
                       const py::object& quiet, const py::object& record) {
             const mc::Layout& z = system->layout();
             mc::TickModel M;
             M.nx = z.nx, M.nU = z.nU, M.nq = z.n, M.nd = z.nd, M.nu = z.nu, M.nk = z.nk;
             M.delay = delay;
             M.feedback = feedback;
             if (U.ndim() != 2) throw py::value_error("U must be (N, nU), got " + shape_str(U));
             const long N = U.shape(0);
             M.motion.N = N;
             M.motion.X = rows(X, {N + 1, M.nx}, "X (the trajectory's states)");
             M.motion.U = rows(U, {N, M.nU}, "U (the trajectory's inputs)");
             M.motion.K = rows(K, {N, M.nU, M.nx}, "K (the trajectory's gains)");
             M.L = rows(L, {N + 1, M.nx, M.nd}, "L (the filter's gains)");
             M.rest = M.motion.X.row(0).tail(M.nx - M.nq).transpose();
             M.max_gap_steps = max_gap_steps;
             M.hold.resize(M.nU);
             M.hold << M.motion.U.row(N - 1).head(M.nu).transpose(), M.motion.X.row(N).segment(M.nd, M.nk).transpose();
             M.lower = vec(lower, M.nU, "lower");
             M.upper = vec(upper, M.nU, "upper");
             M.dt = system->options().dt;
             // the per-step bounds as limits.CommandLimits computes them: a_max dt^2, v_max dt
             M.a_step = vec(acceleration, M.nk, "acceleration") * (M.dt * M.dt);
             M.v_step = vec(rate, M.nk, "rate") * M.dt;
             if (!K_z.is_none()) M.Kz = rows(py::cast<Arr>(K_z), {N, M.nU, M.nd}, "K_z (the integral's gains)");
             M.hand_over_steps = hand_over_steps;
             M.saturation = saturation;
             if (!tolerances.is_none()) M.tolerance = rows(py::cast<Arr>(tolerances), {3, M.nq}, "tolerances");
             M.start_steps = start_steps;
             M.budget_step = budget_step;
             M.start_input.resize(M.nU);
             M.start_input << M.motion.U.row(0).head(M.nu).transpose(), M.motion.X.row(0).segment(M.nd, M.nk).transpose();
             if (!min_tension.is_none()) {
               const Arr f = py::cast<Arr>(min_tension);
               if (f.ndim() != 1) throw py::value_error("min_tension must be (S,), got " + shape_str(f));
               const long S = f.shape(0);
               M.min_tension = vec(f, S, "min_tension");
               if (reserve.is_none() || string_index.is_none() || string_length.is_none())
                 throw py::value_error("a tension guard (min_tension) needs its reserve and the strings' constraint and "
                                       "length indices");
               M.reserve = py::cast<double>(reserve);
               M.string_index = py::cast<std::vector<int>>(string_index);
               M.string_length = py::cast<std::vector<int>>(string_length);
               if (record.is_none()) throw py::value_error("a tension guard (min_tension) needs its record check");
               const py::tuple r = py::cast<py::tuple>(record);
               if (r.size() != 2) throw py::value_error("record must be (tolerance, hold_ticks)");
               M.record_tolerance = py::cast<double>(r[0]);
               M.record_hold = py::cast<long>(r[1]);
               if (!(M.record_tolerance >= 0.0) || M.record_hold < 0)
                 throw py::value_error("record must be (tolerance >= 0, hold_ticks >= 0)");
             }
             if (!quiet.is_none()) {
               const py::tuple t = py::cast<py::tuple>(quiet);
               if (t.size() != 7)
                 throw py::value_error("quiet must be (Ls, alpha, beta, threshold, drive_threshold, hold_steps, "
                                       "armed_from)");
               M.Ls = rows(py::cast<Arr>(t[0]), {N + 1, M.nx, M.nd}, "Ls (the surprise detector's gains)");
               M.quiet_alpha = py::cast<double>(t[1]);
               M.quiet_beta = py::cast<double>(t[2]);
               M.quiet_threshold = py::cast<double>(t[3]);
               M.quiet_drive_threshold = py::cast<double>(t[4]);
               M.quiet_hold = py::cast<long>(t[5]);
               M.quiet_armed = py::cast<long>(t[6]);
             }
             return std::make_shared<TickKernel>(std::move(system), std::move(M));
           }),
           py::arg("system"), py::arg("X"), py::arg("U"), py::arg("K"), py::arg("feedback"), py::arg("L"),
           py::arg("max_gap_steps"), py::arg("lower"), py::arg("upper"), py::arg("rate"), py::arg("acceleration"),
           py::arg("delay"), py::arg("K_z") = py::none(), py::arg("hand_over_steps") = 1,
           py::arg("tolerances") = py::none(), py::arg("start_steps") = 0, py::arg("min_tension") = py::none(),
           py::arg("reserve") = py::none(), py::arg("string_index") = py::none(),
           py::arg("string_length") = py::none(),
           py::arg("budget_step") = std::numeric_limits<double>::infinity(),
           py::arg("saturation") = std::numeric_limits<double>::infinity(), py::arg("quiet") = py::none(),
           py::arg("record") = py::none(),
           "Over `system` (its model and dt) for the trajectory X (N+1, nx), U (N, nU), K (N, nU, nx), the filter "
           "gains L (N+1, nx, nd), the drives' limits (lower/upper (nU,), rate/acceleration (nk,)) and the integral "
           "action's gains K_z (N, nU, nd; None: none) with its hand-over past the end in steps "
           "(marionette_control.tracking.integral_action) and the start, path and goal tolerances (3, nq) of "
           "x_hat_k - x_d(k) (marionette_control.tracking.tolerances; None: tick() does not check them), the start "
           "blend's steps (marionette_control.tracking.start_blend; 0: none) and the tension guard's strings: their "
           "minimum tension (S,) [N], the reserve [N], each string's constraint index (into lambda) and length "
           "configuration index (into x) "
           "(marionette_control.tracking.tension_guard; None: no guard), and the acceleration budget's b dt^2 "
           "(marionette_control.tracking.acceleration_budget; inf: none), and the integral's anti-windup threshold: "
           "a command sent farther than this from the law's is saturated, and the next tick's error is left out when "
           "it would push further along the cut (marionette_control.tracking.integral_action.SATURATION; inf: never), and "
           "the quiet feedback (marionette_control.tracking.quiet_feedback; None: none): (Ls (N+1, nx, nd) the "
           "surprise detector's filter gains, alpha of the dynamic feedback's lag, beta of the innovation's mean, the "
           "innovation and the drive tests' thresholds, the steps without the lag after a surprise, the tick from "
           "which the innovation test counts), and the guard's check of its command record (with a guard): "
           "(tolerance [m or rad] of |measured - recorded drive position|, ticks unconfirmed after a disagreement).")
      .def_property_readonly("delay", [](const TickKernel& t) { return t.model().delay; })
      .def("reset", &TickKernel::reset, "The filter forgets its estimate (the next one initialises).")
      .def(
          "set_plan",
          [](TickKernel& t, long start, const Arr& X, const Arr& U, const Arr& K) {
            const mc::TickModel& M = t.model();
            if (U.ndim() != 2) throw py::value_error("plan U must be (N, nU), got " + shape_str(U));
            const long N = U.shape(0);
            check_array(X, {N + 1, M.nx}, "plan X");
            check_array(U, {N, M.nU}, "plan U");
            check_array(K, {N, M.nU, M.nx}, "plan K");
            t.set_plan(start, N, X.data(), U.data(), K.data());
          },
          py::arg("start"), py::arg("X"), py::arg("U"), py::arg("K"),
          "The plan in effect from step `start` on (a window of the motion: X (N+1, nx), U (N, nU), K (N, nU, nx); "
          "copied).")
      .def("clear_plan", &TickKernel::clear_plan, "No plan in effect: the motion's law everywhere.")
      .def("reset_integral", &TickKernel::reset_integral, "A new run: the integral z = 0, no hand-over begun.")
      .def("carry_integral", &TickKernel::carry_integral, py::arg("other"),
           "z continues `other`'s (a switch of trajectory mid-run).")
      .def("carry_blend", &TickKernel::carry_blend, py::arg("other"), py::arg("shift"),
           "A switch from `other` at its tick `shift`: the run's start blend goes on where it was.")
      .def("start_run", &TickKernel::start_run, py::arg("new_run"),
           "A run begins: new_run (True), the feedback is faded in over the start blend's steps; False: no blend.")
      .def_property_readonly("guarded", &TickKernel::guarded,
                             "Whether the tension guard moved the last command computed.")
      .def_property_readonly("surprises", &TickKernel::surprises,
                             "The quiet feedback's surprises: ticks whose detector test failed.")
      .def_property_readonly(
          "z", [](const TickKernel& t) { return copy_vector(t.z().data(), t.z().size()); },
          "The integral of the measured angles' error (nd,), a copy.")
      .def(
          "tick",
          [](TickKernel& t, long k, const py::handle& q, const py::handle& q_prev, const CommandHistory& h,
             const py::handle& x_ref) -> py::tuple {
            // (five arguments: pybind11 keeps up to six, self included, without allocating)
            const Samples in(t, q, q_prev, x_ref);
            const mc::TickModel& M = t.model();
            const bool check = M.tolerance.rows() > 0 && in.x_ref != nullptr;
            py::array_t<double> x_hat = new_vector(M.nx), x_pred = new_vector(M.nx), u = new_vector(M.nU);
            double *xh = x_hat.mutable_data(), *xp = x_pred.mutable_data(), *up = u.mutable_data();
            const mc::TickStatus status =
                unlocked(t, [&] { return t.tick(k, in.q, in.q_prev, h, in.x_ref, xh, xp, up); });
            if (status == mc::TickStatus::NO_PREDECESSOR)
              return py::make_tuple(py::none(), py::none(), py::none(), false, py::none());
            py::object within = check ? py::object(py::bool_(t.within(k, xh, in.x_ref))) : py::object(py::none());
            return py::make_tuple(x_hat, x_pred, u, status == mc::TickStatus::OK, within);
          },
          py::arg("k"), py::arg("q"), py::arg("q_prev"), py::arg("history"), py::arg("x_ref") = py::none(),
          "Tick k on the measured q (nq,) (q_prev: the sample one step before, or None) with the commands in "
          "`history` and x_ref = x_d(k) (nx,; the integral's reference, None only without one): (x_hat_k, "
          "x_hat_{k+d}, u, finite, within); within: whether x_hat_k - x_ref is within the tolerance of tick k "
          "(start at k = 0, path before the end, goal after; True: every checked error is, False: one may not be "
          "and the Python check decides; None: no tolerances or no x_ref); (None, None, None, False, None) when "
          "the estimate needs q_prev and there is none. Raises StepError when a model step fails.")
      .def(
          "estimate_predict",
          [](TickKernel& t, long k, const py::handle& q, const py::handle& q_prev, const CommandHistory& h) -> py::tuple {
            const Samples in(t, q, q_prev, py::none(), false);
            py::array_t<double> x_hat = new_vector(t.model().nx), x_pred = new_vector(t.model().nx);
            double *xh = x_hat.mutable_data(), *xp = x_pred.mutable_data();
            if (!unlocked(t, [&] { return t.estimate_predict(k, in.q, in.q_prev, h, xh, xp); }))
              return py::make_tuple(py::none(), py::none());
            return py::make_tuple(x_hat, x_pred);
          },
          py::arg("k"), py::arg("q"), py::arg("q_prev"), py::arg("history"),
          "The first half of tick(): (x_hat_k, x_hat_{k+d}), or (None, None) without the predecessor needed.")
      .def(
          "command",
          [](TickKernel& t, long k, const py::handle& q, const py::handle& x_ref, const py::handle& x,
             const CommandHistory& h, const py::handle& x_hat) -> py::tuple {
            const mc::TickModel& M = t.model();
            const Samples in(t, q, py::none(), x_ref);
            const Arr xa = doubles(x);
            const double* xp = sized(xa, M.nx, "x");
            const OptionalVector hv(x_hat, M.nx, "x_hat");
            const double* hp = hv.data;
            py::array_t<double> u = new_vector(M.nU);
            const bool finite = t.command(k, in.q, in.x_ref, xp, h, hp, u.mutable_data());
            return py::make_tuple(u, finite);
          },
          py::arg("k"), py::arg("q"), py::arg("x_ref"), py::arg("x"), py::arg("history"), py::arg("x_hat") = py::none(),
          "The second half of tick(): (u, finite) of tick k, for step k + d, on the state x (nx,) it acts on: the "
          "law, the integral of q (nq,) against x_ref (nx,; None only without an integral), then the stream clamp; "
          "finite: u and x_hat (if given) are finite.")
      .def(
          "within",
          [](const TickKernel& t, long k, const Arr& x_hat, const Arr& x_ref) {
            const mc::TickModel& M = t.model();
            if (M.tolerance.rows() == 0) throw py::value_error("this kernel was made without tolerances");
            return t.within(k, sized(x_hat, M.nx, "x_hat"), sized(x_ref, M.nx, "x_ref"));
          },
          py::arg("k"), py::arg("x_hat"), py::arg("x_ref"),
          "The tolerance check of tick(): whether x_hat - x_ref (nx,) is within the tolerance of tick k.")
      .def(
          "law",
          [](TickKernel& t, long j, const Arr& x) {
            py::array_t<double> u(t.model().nU);
            t.law(j, sized(x, t.model().nx, "x"), u.mutable_data());
            return u;
          },
          py::arg("j"), py::arg("x"), "u(j) (nU,) of the law alone on the state x (nx,).")
      .def(
          "clamp",
          [](const TickKernel& t, const Arr& u, const Arr& rho, const Arr& v) {
            const mc::TickModel& M = t.model();
            py::array_t<double> out = copy_vector(sized(u, M.nU, "u"), M.nU);
            t.clamp(out.mutable_data(), sized(rho, M.nk, "rho"), sized(v, M.nk, "v"));
            return out;
          },
          py::arg("u"), py::arg("rho"), py::arg("v"), "A copy of u (nU,) clamped from the drive state (rho, v).")
      .def(
          "box",
          [](const TickKernel& t, const Arr& rho, const Arr& v) {
            const mc::TickModel& M = t.model();
            py::array_t<double> lo = new_vector(M.nU), hi = new_vector(M.nU);
            t.box(sized(rho, M.nk, "rho"), sized(v, M.nk, "v"), lo.mutable_data(), hi.mutable_data());
            return py::make_tuple(lo, hi);
          },
          py::arg("rho"), py::arg("v"), "(lo, hi) (nU,) of the clamp's box from the drive state (rho, v).")
      .def(
          "guard",
          [](TickKernel& t, const Arr& u, const Arr& u_ff, const Arr& x, const Arr& rho, const Arr& v) {
            const mc::TickModel& M = t.model();
            py::array_t<double> out = copy_vector(sized(u, M.nU, "u"), M.nU);
            const double *fp = sized(u_ff, M.nU, "u_ff"), *xp = sized(x, M.nx, "x"), *rp = sized(rho, M.nk, "rho"),
                         *vp = sized(v, M.nk, "v");
            double* up = out.mutable_data();
            const bool acted = unlocked(t, [&] { return t.guard(fp, xp, rp, vp, up); });
            return py::make_tuple(out, acted);
          },
          py::arg("u"), py::arg("u_ff"), py::arg("x"), py::arg("rho"), py::arg("v"),
          "(u', acted): the tension guard alone on a copy of the command u (nU,) against the feed-forward u_ff (nU,) "
          "on the state x (nx,) it acts on, with the drive state (rho, v). Raises StepError when the model cannot "
          "take the step.")
      .def(
          "budget",
          [](TickKernel& t, long j, const Arr& u, const Arr& rho, const Arr& v) {
            const mc::TickModel& M = t.model();
            py::array_t<double> out = copy_vector(sized(u, M.nU, "u"), M.nU);
            t.budget(j, sized(rho, M.nk, "rho"), sized(v, M.nk, "v"), out.mutable_data());
            return out;
          },
          py::arg("j"), py::arg("u"), py::arg("rho"), py::arg("v"),
          "A copy of the command u (nU,) of step j with its drive positions within the acceleration budget from the "
          "drive state (rho, v).");
}

}  // namespace mcpy
