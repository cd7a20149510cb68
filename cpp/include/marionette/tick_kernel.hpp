// The tracking controller's tick in one native call: the commands in flight, and the Kalman
// filter's update, the delay predictor, the tracking law and the stream clamp of one tick
// (marionette_control.tracking: estimation.KalmanEstimator, prediction.DelayPredictor,
// law.TrackingLaw / plan_switch.PlannedLaw, command_limits.CommandLimits.clamp; those Python parts
// are the readable reference, test/test_tick_kernel.py holds this kernel to them).
//
// Why: at 100 Hz the controller's code has been idle for 10 ms before every tick, and on a
// shared machine each distinct code path then pays its cold start again (tens of µs per numpy
// call or core call); the same ticks back to back take a fifth of the time. One call that does
// the numerics touches far less.
//
// Model/Data split as in the rest of the core: TickModel is what a loaded trajectory fixes
// (references, gains, filter gains, limits, delay; sized and copied once), TickData the state
// and workspaces of one controller (the filter's estimate and the buffers of a tick; sized once).
// A plan (a re-optimized window) is copied into storage sized for the whole motion, so
// installing one allocates nothing either.
//
// One tick k with delay d (thesis §6.7.2; estimation/prediction docstrings):
//   x^-_k = f(...f(x_{k'}, u_{k'})..., [u_{k-1} forces; rho measured])     filter prediction (4.36)
//   x_k   = x^-_k + L(k) (q_dyn,k - x^-_dyn,k)                               measurement update
//   x_{k+d} = f(...f(x_k, clamp(u_k))..., clamp(u_{k+d-1}))                  commands in flight
//   u     = u_d(k+d) - K(k+d)(x_{k+d} - x_d(k+d))                            the law (plan or motion)
//   u    += g - y,  g = K_dyn(k+d) dx_dyn,  y += alpha (g - y)                the dynamic feedback lagged, unless a
//                                                                            surprise detector's test failed lately
//   z    += dt (q_dyn,k - x_d,dyn(k));  u -= K_z(k+d) z                      integral action (LQI), held while it
//                                                                            would push into a saturation (anti-windup)
//   u     = u_d + (1 - s(k+d)) (u - u_d)                                     a run's start: the feedback faded in
//   rho   = clip(rho, budget)                                                the drives' acceleration near the plan's
//   u     = guard(u, x_{k+d})                                                the predicted string tension kept
//                                                                            at its floor within the clamp's box
//   u     = clamp(u, rho_{k+d}, v_{k+d})                                     the command stream
#pragma once

#include <limits>
#include <memory>
#include <vector>

#include "marionette/discrete_system.hpp"

namespace mc {

/// The commands sent, by tick slot, and the input in effect over each step
/// (marionette_control.tracking.prediction): a command sent at slot s is the input from step
/// s + d on until a later one replaces it; before the first one the drives hold `initial`.
/// A ring of the last `size` commands.
class CommandHistory {
 public:
  CommandHistory(int nU, int nk, int delay, int size = 32);
  int nU() const { return nU_; }
  int nk() const { return nk_; }
  int delay() const { return delay_; }
  int count() const { return n_; }
  /// Forgets every command; until the first one the input in effect is `hold` (nU).
  void start(const double* hold);
  /// Records u (nU, copied) sent at `slot`; throws ModelError when slot precedes the last one's.
  void sent(long slot, const double* u);
  /// Attaches to the last command sent the m inputs (m, nU row-major, copied) it carries after its first: a
  /// joint_trajectory command sent at slot s is the input of step s + d and then, if no later command has arrived,
  /// points(i - 1) that of step s + d + i (i = 1 … m) and points(m - 1) past them (the drives hold its last point).
  /// Requires count() > 0; m = 0 detaches them (a forward position command).
  void carries(const double* points, int m);
  /// The input (nU) in effect over step j: the last command sent at a slot s <= j - d, or the point of it that
  /// step j falls on (carries()).
  const double* applied(long j) const;
  /// The drives' stream state a command for step j continues: rho_j = applied(j-1)[nu:],
  /// v_j = (rho_j - applied(j-2)[nu:]) / dt (nk each).
  void stream_state(long j, double dt, double* rho, double* v) const;
  /// Starts from `other`'s commands, each at its slot - shift (a trajectory switch at tick `shift`).
  void carry_over(const CommandHistory& other, long shift);
  /// Records u (nU) as the command of tick k, at slot max(k, last_slot()): a hold the watchdog sent at its own
  /// clock's slot can lie past the tick (joint states reaching the controller late under load); this command
  /// reaches the drives after that hold, so it is in effect from there on.
  void sent_by_tick(long k, const double* u) { sent(n_ && slots_[head_] > k ? slots_[head_] : k, u); }
  long last_slot() const { return slots_[head_]; }  ///< requires count() > 0
  const double* last() const { return cmds_.row(head_).data(); }  ///< requires count() > 0

 private:
  int nU_, nk_, delay_;
  std::vector<long> slots_;
  MatXR cmds_;
  MatXR points_;              ///< row i: the points of slot i's command (counts_[i] of them, nU each)
  std::vector<int> counts_;
  VecX initial_;
  int n_ = 0, head_ = -1;
};

/// Per-step arrays of a trajectory window, row-major: X (N+1, nx), U (N, nU), K (N, nU, nx), for
/// the steps start ... start + N of the run.
struct TickReference {
  long start = 0, N = 0;
  MatXR X, U, K;
};

/// What a loaded trajectory fixes (see the file comment); sizes from the model.
struct TickModel {
  int nx, nU, nq, nd, nu, nk;
  int delay = 1;
  bool feedback = true;
  TickReference motion;    ///< the tracked trajectory (start 0)
  MatXR L;                 ///< filter gains (N+1, nx * nd), L(k) row-major (nx, nd)
  VecX rest;               ///< momenta and velocities of x_d(0) (nx - nq): a run's first estimate
  int max_gap_steps = 1;   ///< longest gap bridged by prediction alone
  VecX hold;               ///< the command past the end: [u_d(N-1) forces; rho_d(N)] (nU)
  /// The quiet feedback (marionette_control.tracking.quiet_feedback): the surprise detector's filter gains
  /// (N+1, nx * nd; no rows: no quiet feedback), the lag's alpha, the innovation mean's beta, the innovation and drive
  /// tests' thresholds, the steps without the lag after a surprise and the tick from which the innovation test
  /// counts (the drive test counts from the first update).
  MatXR Ls;
  double quiet_alpha = 0.0, quiet_beta = 0.0, quiet_threshold = 0.0, quiet_drive_threshold = 0.0;
  long quiet_hold = 0, quiet_armed = 0;
  VecX lower, upper;       ///< input range (nU)
  VecX a_step, v_step;     ///< a_max dt^2 and v_max dt of each drive (nk)
  double dt = 0.0;
  /// The integral action's gains (N, nU * nd), K_z(j) row-major (nU, nd); no rows: no integral
  /// (marionette_control.tracking.integral_action).
  MatXR Kz;
  int hand_over_steps = 1;  ///< past the end, steps from the last command to the law's hold
  /// Anti-windup (integral_action, "Anti-windup"): a command sent more than this from the law's (|u_law - u_sent|_inf)
  /// is saturated, and the next tick's error is left out when it would push further along the cut (+inf: never).
  double saturation = std::numeric_limits<double>::infinity();
  /// The start, path and goal tolerances of x_hat_k - x_d(k) (3, nq; 0: unchecked); no rows: none.
  MatXR tolerance;
  /// The start blend's steps n (marionette_control.tracking.start_blend; 0: none).
  long start_steps = 0;
  /// The acceleration budget's b dt^2 (marionette_control.tracking.acceleration_budget; +inf: none).
  double budget_step = std::numeric_limits<double>::infinity();
  VecX start_input;  ///< the command before the start: [u_d(0) forces; rho_d(0)] (nU)
  /// The tension guard (marionette_control.tracking.tension_guard): each string's minimum tension (S) [N] (empty:
  /// no guard), the reserve above it, its constraint index (into lambda) and its length configuration index (into x).
  VecX min_tension;
  double reserve = 0.0;
  std::vector<int> string_index, string_length;
  /// The guard's check of the command record: the largest |rho_k measured - rho_k of the record| of a drive that
  /// confirms it [m or rad], and the ticks it stays unconfirmed after a disagreement (its floor is then the
  /// feed-forward's; confirmed, never below the minimum).
  double record_tolerance = 0.0;
  long record_hold = 0;
};

/// The filter's estimate and the workspaces of one tick (sized once from the model).
struct TickData {
  explicit TickData(const TickModel& M);
  VecX x;          ///< the filter's estimate x_k' of its last tick k'
  long k = 0;      ///< k'
  bool have_x = false;
  VecX xa, xb;     ///< states stepped through (nx)
  VecX dx;         ///< x - x_d of the law (nx)
  VecX dy;         ///< the filter's innovation q_dyn - x^-_dyn (nd)
  VecX u;          ///< an input in effect, clamped (nU)
  VecX rho, v;     ///< the drives' stream state (nk)
  VecX rho_k;      ///< the command record's drive positions at the tick (nk; the guard's record check)
  VecX z;          ///< the integral of the measured angles' error (nd)
  VecX cut;        ///< c = u_law - u_sent of the last command, 0 below the saturation threshold (nU)
  bool held = false;  ///< the last tick's error was left out (anti-windup)
  VecX ulaw;       ///< the law's command of the tick, before the budget, the guard and the clamp (nU)
  VecX dz;         ///< the integral's increment of a tick (nd)
  VecX end;        ///< past the end: the drives' last command of the trajectory (nk), once have_end
  bool have_end = false;
  bool blending = false;  ///< a new run's start: the feedback faded in (start_steps)
  long blend_offset = 0;  ///< the run's steps before this trajectory's step 0 (a switch during the blend)
  VecX lo, hi, y, yc, uf;  ///< the guard's box, command, the command moved and the clamped feed-forward (nU)
  VecX c;          ///< the guard's c_s = T_s - a_s . clip(u) (S)
  VecX breaks;     ///< the guard's breaks (2 nU)
  VecX blo, bhi;   ///< the acceleration budget's bounds of the drives' positions (nk)
  MatXR A, B;      ///< the guard's step linearization (nx, nx), (nx, nU) (not used beyond the solve)
  VecX lam;        ///< the guard's step multipliers (m)
  MatXR lam_x, lam_u;  ///< their derivatives (m, nx), (m, nU)
  VecX T;          ///< the strings' tensions of the step (S)
  VecX floor;      ///< their floors at the step (S)
  MatXR Tu;        ///< their derivatives in u (S, nU)
  bool guarded = false;  ///< the guard moved the last command
  long record_since;     ///< ticks since the command record last disagreed with the drive encoders (guard)
  VecX xs, xs_next;  ///< the surprise detector's estimate (nx; its tick and initialisation are the filter's), its next
  VecX dys;        ///< its innovation (nd)
  VecX mean;       ///< its innovation's mean (nd), once have_mean
  bool have_mean = false;
  long since = 0;  ///< ticks since the last surprise (capped at quiet_hold + 1)
  VecX g, yq;      ///< the dynamic feedback and its lag (nU), yq once have_y
  bool have_y = false;
  long jy = -2;    ///< the step of yq
  long surprises = 0;  ///< ticks whose surprise test failed
};

/// What one tick reports besides its vectors.
enum class TickStatus { OK, NO_PREDECESSOR, NON_FINITE };

/// The fused tick over a DiscreteSystem (whose mutex the caller holds while it runs).
class TickKernel {
 public:
  TickKernel(std::shared_ptr<DiscreteSystem> system, TickModel model);
  const TickModel& model() const { return M_; }
  DiscreteSystem& system() { return *system_; }

  /// The filter forgets its estimate: the next one initialises (k = 0: [q; rest], else from q_prev, q).
  void reset() { D_.have_x = false; D_.have_mean = false; }
  /// The plan in effect from its step `start` on (X (N+1, nx), U (N, nU), K (N, nU, nx), N <= the
  /// motion's); copied into storage sized for the motion. clear_plan: the motion's law everywhere.
  void set_plan(long start, long N, const double* X, const double* U, const double* K);
  void clear_plan() { have_plan_ = false; }
  bool has_plan() const { return have_plan_; }
  /// A new run: z = 0, no cut, no hand-over begun. carry_integral: z and the last command's cut continue `other`'s
  /// (a trajectory switch).
  void reset_integral();
  void carry_integral(const TickKernel& other);
  /// A run begins: new_run, the feedback is faded in over start_steps; a switch's (false): no blend.
  void start_run(bool new_run);
  /// A switch from `other` at its tick `shift`: the run's blend goes on (this trajectory's step j is its j + shift).
  void carry_blend(const TickKernel& other, long shift);
  /// Whether the tension guard moved the last command computed.
  bool guarded() const { return D_.guarded; }
  /// The quiet feedback's surprises counted (ticks whose test failed).
  long surprises() const { return D_.surprises; }
  const VecX& z() const { return D_.z; }
  /// The filter's estimate, the integral and the workspaces; restore: back to a copy of them (a tick undone).
  const TickData& data() const { return D_; }
  void restore(const TickData& d) { D_ = d; }

  /// The whole tick k: estimate(), then predict() and command() (file comment). q (nq) measured,
  /// q_prev (nq) the sample one step before or null, x_ref (nx) x_d(k) of the law in effect (the
  /// integral's reference); writes x_hat, x_pred (nx) and u (nU).
  /// NO_PREDECESSOR: the estimate needs q_prev and there is none (nothing else written);
  /// NON_FINITE: u or x_hat has a non-finite entry. Throws StepError when a model step fails.
  TickStatus tick(long k, const double* q, const double* q_prev, const CommandHistory& h, const double* x_ref,
                  double* x_hat, double* x_pred, double* u);
  /// Whether x_hat_k is within the tolerance of tick k (start at k = 0, path for k < N, goal after: the rows of
  /// TickModel::tolerance, which it requires) of x_ref = x_d(k): |x_hat_i - x_ref_i| <= tolerance_i for every
  /// configuration i with tolerance_i > 0 (a NaN error is not). The Python check (control.tolerances, which
  /// finds the worst violation) decides when it is not.
  bool within(long k, const double* x_hat, const double* x_ref) const;
  /// x_k (filter) and x_{k+d} (through the commands in flight); false: no predecessor (nothing written).
  bool estimate_predict(long k, const double* q, const double* q_prev, const CommandHistory& h, double* x_hat,
                        double* x_pred);
  /// u of tick k, for step j = k + d, on the state x (nx) it acts on: the law, the integral of q (nq)
  /// against x_ref (nx), then the stream clamp; false if u or x_hat (nx, or null) is not finite.
  bool command(long k, const double* q, const double* x_ref, const double* x, const CommandHistory& h,
               const double* x_hat, double* u);

  /// The law alone: u(j) on x (nx) (plan in effect, the motion, or the hold past its end).
  void law(long j, const double* x, double* u);
  /// limits.CommandLimits.clamp: u (nU) in place from the drive state (rho, v) (nk each).
  void clamp(double* u, const double* rho, const double* v) const;
  /// limits.CommandLimits.box: the clamp's box (lo, hi) (nU each) from the drive state (rho, v), of the drives'
  /// positions inner_lo, inner_hi (nk each, or null: unbounded).
  void box(const double* rho, const double* v, double* lo, double* hi, const double* inner_lo = nullptr,
           const double* inner_hi = nullptr) const;
  /// tension_guard.TensionGuard.project: u (nU) on the predicted state x (nx) it acts on, in place, against the
  /// law's feed-forward u_ff (nU), within the box of the stream state (rho, v) and the budget's bounds (inner_lo,
  /// inner_hi, or null); whether it moved u. Throws StepError when the model cannot take the step.
  bool guard(const double* u_ff, const double* x, const double* rho, const double* v, double* u,
             const double* inner_lo = nullptr, const double* inner_hi = nullptr);
  /// acceleration_budget.AccelerationBudget.bounds and apply: u's drive positions (nU) of step j clipped to the
  /// budget around the plan's acceleration from the stream state (rho, v); false (nothing done) without a budget.
  bool budget(long j, const double* rho, const double* v, double* u);

 private:
  /// rho (nk): the drive positions the filter's last step ends at (the measured q's, or the confirmed record's).
  bool estimate(long k, const double* q, const double* rho, const double* q_prev, const CommandHistory& h,
                double* x_hat);
  void predict(long k, const double* x_hat, const CommandHistory& h, double* x_pred);
  void integral(long k, const double* q, const double* x_ref, const CommandHistory& h, double* u);
  /// The filter's step k from the state `from` of its last tick (D_.k; gap steps with the inputs in effect, the last
  /// at the drive positions rho (nk)) into `out`, its innovation into `innovation` and the update with gains L.
  void filter_update(long k, const double* q, const double* rho, const CommandHistory& h, const VecX& from,
                     const MatXR& L, double* out, VecX& innovation);
  /// quiet_feedback.QuietFeedback.observe after the filter's estimate x_hat of tick k (initialised: whether it did).
  void detect(long k, const double* q, const double* rho, const CommandHistory& h, const double* x_hat,
              bool initialised);
  /// quiet_feedback.QuietFeedback.apply: u of step j on x, the dynamic feedback lagged.
  void quiet(long j, const double* x, double* u);
  /// tension_guard.raise_to_floor: D_.y moved onto a^T y = b within (D_.lo, D_.hi).
  void raise_to_floor(const double* a, double b);
  /// start_blend.start_weight: s(j + blend_offset), 0 from start_steps on.
  double start_weight(long j) const;
  /// u_d(j) (nU) of the law in effect at step j: the plan's, the motion's, the hold past the end.
  const double* feedforward(long j) const;

  std::shared_ptr<DiscreteSystem> system_;
  TickModel M_;
  TickReference plan_;
  bool have_plan_ = false;
  TickData D_;
};

}  // namespace mc
