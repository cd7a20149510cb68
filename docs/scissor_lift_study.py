"""Thesis §5.1.3 reproduced (docs/reproductions.md, "Thesis §5.1.3"): the scissor lift's damping identified.

    .venv/bin/python docs/scissor_lift_study.py           # every figure and number (several minutes, one core)
    .venv/bin/python docs/scissor_lift_study.py --quick   # fewer noise seeds, no continuous-time data fit

Writes docs/img/scissor_lift_identification.png and out/scissor_lift/summary.json (--img-dir, --out-dir to
change) and prints the numbers the document quotes. The model is ``library.get("scissor_lift")``, the
methods are in marionette_control.study.scissor_lift.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from marionette_control.model.library import scissor_lift as lift_model  # noqa: E402
from marionette_control.model.library.scissor_lift import ScissorLift  # noqa: E402
from marionette_control.study import scissor_lift as SL  # noqa: E402

VI_DT = 0.01                   # s, the thesis's trep step and the sampling period of the data
BAUMGARTE_DT = 0.00125         # s, the thesis's ODE step was 0.0013 s; 0.00125 = VI_DT / 8 samples the data exactly
COARSE_BAUMGARTE_DT = VI_DT    # the same integrator at the VI's step (alpha = 0.1 / dt = 10 1/s)
HORIZON = 40.0                 # s from rest to the end of every run
WINDOW = 20.0                  # s, the data and the amplitudes are taken after this (steady state)
SIGMA_JOINT = 2e-4             # rad: about half a count of a 14-bit joint encoder (the arm's, docs/simulator.md)
SIGMA_SLIDER = 5e-6            # m: about half a count of a 4096-count encoder on a 40 mm belt pulley
NOISE_LEVELS = (0.0, 1e-4, 2e-4, 5e-4, 1e-3)   # rad on the joints (the block's noise scaled alike)


@dataclass(frozen=True)
class Case:
    """A lift, the angle its block's bias force holds, the sinusoid on top, and the true joint friction."""
    name: str
    lift: ScissorLift
    theta: float
    amplitude: float        # N
    omega: float            # rad/s
    damping: float          # N m s/rad per joint

    @property
    def forcing(self) -> SL.Forcing:
        return SL.Forcing(SL.holding_force(self.lift, self.theta), self.amplitude, self.omega)


CASES = (
    Case("N5", ScissorLift(), math.pi / 4, 20.0, 4.0, 0.2),
    Case("N3", ScissorLift(segments=3, link_length=0.4, link_mass=0.3, slider_mass=0.5), 0.9, 6.0, 5.0, 0.1),
)


def say(msg):
    print(f"[scissor_lift_study] {msg}", flush=True)


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def sampled(motion: SL.Motion, t) -> np.ndarray:
    """θ of ``motion`` at the times ``t`` (its steps must divide the sampling period)."""
    index = np.rint((t - motion.t[0]) / (motion.t[1] - motion.t[0])).astype(int)
    if not np.allclose(motion.t[index], t, atol=1e-9):
        raise ValueError("the model's steps do not divide the sampling period")
    return motion.theta[index]


def model_checks(case: Case, t, theta, theta_dot) -> dict:
    """The tree against the one-DOF Lagrangian along the benchmark; the constraint Jacobian's rank."""
    model, one = lift_model.build(case.lift), SL.OneDof(case.lift)
    e_tree = np.array([model.energy(lift_model.configuration(case.lift, a), lift_model.tangent(case.lift, a) * b)
                       for a, b in zip(theta, theta_dot)])
    e_one = one.energy(theta, theta_dot)
    smallest = {}
    for angle in (0.05, 0.3, case.theta, 1.2, 1.5, math.pi / 2):
        Dh = model.constraints(lift_model.configuration(case.lift, angle))[1]
        smallest[f"{angle:.4f}"] = float(np.linalg.svd(Dh, compute_uv=False).min())
    one_dof_check = {"max_abs_energy_difference": float(np.abs(e_tree - e_one).max()),
                     "energy_scale": float(np.abs(e_one).max()), "smallest_singular_value_of_Dh": smallest,
                     "D": one.D, "natural_frequency": math.sqrt(one.stiffness(case.theta, case.forcing.bias)
                                                                / one.mass(case.theta))}
    say(f"  model check: {one_dof_check}")
    return one_dof_check


def amplitude_matches(case: Case, target: float, models: dict) -> dict:
    out = {}
    forcing, start = case.forcing, SL.Start(case.theta)
    for name, simulate in models.items():
        def amplitude(c):
            m = simulate(case.lift, forcing, c, start, HORIZON)
            return SL.steady_amplitude(m.t, m.theta, forcing.period)

        begun = time.perf_counter()
        match = SL.match_amplitude(amplitude, target, (0.5 * case.damping, 2.0 * case.damping), xtol=1e-6)
        at_true = dict(match.samples).get(case.damping)
        at_true = amplitude(case.damping) / target - 1.0 if at_true is None else at_true
        out[name] = {"damping": match.damping, "relative_error": match.damping / case.damping - 1.0,
                     "one_percent": match.one_percent, "amplitude_error_at_true_c": at_true,
                     "samples": match.samples, "seconds": time.perf_counter() - begun}
        say(f"  {name}: c = {match.damping:.6f} ({out[name]['relative_error']:+.3%}), amplitude error at "
            f"c = {case.damping}: {at_true:+.4%}, 1 % band {match.one_percent}")
    return out


def equation_error(case: Case, t, theta, seeds: int) -> dict:
    out = {}
    for sigma in NOISE_LEVELS:
        data = [SL.measure(case.lift, case.forcing, t, theta, sigma, sigma * SIGMA_SLIDER / SIGMA_JOINT, seed)
                for seed in range(seeds if sigma else 1)]
        begun = time.perf_counter()
        fits = [SL.equation_error_fit(case.lift, d) for d in data]
        seconds = (time.perf_counter() - begun) / len(fits)
        ls, iv = np.array([f.least_squares for f in fits]), np.array([f.instrumental for f in fits])
        out[f"{sigma:g}"] = {"sigma_joint": sigma, "sigma_slider": sigma * SIGMA_SLIDER / SIGMA_JOINT,
                             "seeds": len(fits), "least_squares": ls.tolist(), "instrumental": iv.tolist(),
                             "ls_mean_relative_error": float(ls.mean() / case.damping - 1.0),
                             "ls_std": float(ls.std()),
                             "iv_mean_relative_error": float(iv.mean() / case.damping - 1.0), "iv_std": float(iv.std()),
                             "ls_max_abs_relative_error": float(np.abs(ls / case.damping - 1).max()),
                             "iv_max_abs_relative_error": float(np.abs(iv / case.damping - 1).max()),
                             "rows": fits[0].rows, "rms": fits[0].rms, "seconds_per_fit": seconds}
        say(f"  sigma {sigma:g}: LS {ls.mean():.5f} +- {ls.std():.5f}, IV {iv.mean():.5f} +- {iv.std():.5f}")
    return out


def output_error(case: Case, t, theta, seeds, simulate, dt: float) -> dict:
    start, window = SL.Start(case.theta), t >= WINDOW
    fits, seconds = [], []
    for seed in seeds:
        data = SL.measure(case.lift, case.forcing, t[window], theta[window], SIGMA_JOINT, SIGMA_SLIDER, seed)
        begun = time.perf_counter()
        fit = SL.output_error_fit(lambda c: sampled(simulate(case.lift, case.forcing, c, start, HORIZON, dt=dt),
                                                    t[window]), data.q[:, SL.THETA_INDEX], case.damping)
        fits.append(fit)
        seconds.append(time.perf_counter() - begun)
        say(f"  seed {seed}: c = {fit.damping:.6f} ({fit.damping / case.damping - 1:+.3%}), rms {fit.rms:.3g} rad, "
            f"{fit.simulations} simulations")
    c = np.array([f.damping for f in fits])
    return {"dt": dt, "seeds": list(seeds), "damping": c.tolist(),
            "mean_relative_error": float(c.mean() / case.damping - 1), "rms": [f.rms for f in fits], "simulations": [f.simulations for f in fits], "seconds": seconds}


def run_case(case: Case, seeds: int, data_fit_baumgarte: bool) -> dict:
    say(f"case {case.name}: {asdict(case.lift)}, theta* = {case.theta:.4f}, forcing {case.forcing}, c = {case.damping}")
    t = VI_DT * np.arange(int(round(HORIZON / VI_DT)) + 1)
    theta, theta_dot = SL.benchmark(case.lift, case.forcing, case.damping, SL.Start(case.theta), t)
    period = case.forcing.period
    target = SL.steady_amplitude(t, theta, period)
    earlier = SL.steady_amplitude(t[t <= HORIZON - 3 * period], theta[t <= HORIZON - 3 * period], period)
    out = {"lift": asdict(case.lift), "inertia": case.lift.inertia, "theta_star": case.theta,
           "forcing": asdict(case.forcing), "true_damping": case.damping,
           "benchmark": {"amplitude": target, "previous_window_relative_change": earlier / target - 1.0,
                         "theta_range": [float(theta.min()), float(theta.max())]},
           "model_check": model_checks(case, t, theta, theta_dot)}
    say(f"  benchmark amplitude {target:.6f} rad (3 periods earlier: {earlier / target - 1:+.2e})")
    vi = SL.simulate_vi(case.lift, case.forcing, case.damping, SL.Start(case.theta), HORIZON)
    out["vi_constraint_residual_max"] = float(SL.constraint_residuals(case.lift, vi.q).max())
    models = {"vi": SL.simulate_vi,
              "baumgarte": SL.simulate_baumgarte,
              "baumgarte_coarse": lambda *a: SL.simulate_baumgarte(*a, dt=COARSE_BAUMGARTE_DT)}
    out["amplitude_match"] = amplitude_matches(case, target, models)
    window = t >= WINDOW
    out["equation_error"] = equation_error(case, t[window], theta[window], seeds)
    say("  output-error fit through the VI")
    out["output_error"] = {"vi": output_error(case, t, theta, range(seeds), SL.simulate_vi, VI_DT)}
    if data_fit_baumgarte:
        say("  output-error fit through the Baumgarte integrator")
        out["output_error"]["baumgarte"] = output_error(case, t, theta, range(2), SL.simulate_baumgarte, BAUMGARTE_DT)
    out["vi_order"] = vi_order(case, t, target)
    out["force_timing"] = force_timing(case, t, theta)
    last = t >= HORIZON - 3 * period
    out["steady_state"] = {"t": t[last], "benchmark": theta[last]}
    for name, simulate in models.items():
        m = simulate(case.lift, case.forcing, case.damping, SL.Start(case.theta), HORIZON)
        out["steady_state"][name] = sampled(m, t[last])
        out["steady_state"][f"{name}_max_abs_error"] = float(np.abs(out["steady_state"][name] - theta[last]).max())
    return out


def force_timing(case: Case, t, theta) -> dict:
    """u_k = F(t_k) (force_at 0, used everywhere) against F(t_k + dt/2): the VI's steady waveform error at the
    true c (max |θ − θ_b| over the last 3 periods) and the noise-free DEL least-squares estimate."""
    out, last, window = {}, t >= HORIZON - 3 * case.forcing.period, t >= WINDOW
    for force_at in (0.0, 0.5):
        m = SL.simulate_vi(case.lift, case.forcing, case.damping, SL.Start(case.theta), HORIZON, force_at=force_at)
        fit = SL.equation_error_fit(case.lift, SL.measure(case.lift, case.forcing, t[window], theta[window], 0.0, 0.0,
                                                          0, force_at=force_at))
        out[f"{force_at:g}"] = {"vi_max_abs_error": float(np.abs(sampled(m, t[last]) - theta[last]).max()),
                                "equation_error_relative": fit.least_squares / case.damping - 1.0}
        say(f"  force at {force_at:g} dt: VI steady error {out[f'{force_at:g}']['vi_max_abs_error']:.3g} rad, "
            f"noise-free DEL fit {out[f'{force_at:g}']['equation_error_relative']:+.3%}")
    return out


def vi_order(case: Case, t, target: float) -> dict:
    """The VI's steady amplitude error at the true c for three steps, against the benchmark and against the
    benchmark with the added mass c D dt/2 of the one-sided friction impulse (study module docstring)."""
    out, start = {}, SL.Start(case.theta)
    for dt in (VI_DT, VI_DT / 2, VI_DT / 4):
        m = SL.simulate_vi(case.lift, case.forcing, case.damping, start, HORIZON, dt=dt)
        amplitude = SL.steady_amplitude(m.t, m.theta, case.forcing.period)
        added = SL.vi_added_mass(case.lift, case.damping, dt)
        shifted = SL.benchmark(case.lift, case.forcing, case.damping, start, t, added_mass=added)[0]
        out[f"{dt:g}"] = {"amplitude_error": amplitude / target - 1.0, "added_mass": added,
                          "amplitude_error_vs_added_mass_benchmark":
                              amplitude / SL.steady_amplitude(t, shifted, case.forcing.period) - 1.0}
        say(f"  VI dt = {dt:g}: amplitude error {out[f'{dt:g}']['amplitude_error']:+.4%}, against the benchmark "
            f"with M + {added:.4g}: {out[f'{dt:g}']['amplitude_error_vs_added_mass_benchmark']:+.4%}")
    return out


def public(d):
    """The JSON-worthy part (no arrays)."""
    if isinstance(d, dict):
        return {k: public(v) for k, v in d.items() if not isinstance(v, np.ndarray)}
    return d


LABELS = {"vi": f"midpoint VI (Δt = {VI_DT} s)", "baumgarte": f"semi-impl. Euler + Baumgarte (Δt = {BAUMGARTE_DT} s)",
          "baumgarte_coarse": f"semi-impl. Euler + Baumgarte (Δt = {COARSE_BAUMGARTE_DT} s)"}
COLORS = {"vi": "tab:blue", "baumgarte": "tab:red", "baumgarte_coarse": "tab:orange"}
SHORT = {"vi": f"VI, Δt = {VI_DT} s", "baumgarte": f"Baumgarte, Δt = {BAUMGARTE_DT} s",
         "baumgarte_coarse": f"Baumgarte, Δt = {COARSE_BAUMGARTE_DT} s"}
MARKERS = {CASES[0].name: "o", CASES[1].name: "s"}


def identified(result: dict) -> list[tuple[str, float, float, float, str]]:
    """(label, relative error, lower, upper, color) of every identification of one case, in %: amplitude
    matching with its ±1 % band, the data fits with ± one standard deviation over the seeds."""
    c0, rows = result["true_damping"], []
    for name, m in result["amplitude_match"].items():
        lo, hi = m["one_percent"]
        rows.append((f"amplitude match, {SHORT[name]}", m["relative_error"], lo / c0 - 1, hi / c0 - 1, COLORS[name]))
    ee = result["equation_error"][f"{SIGMA_JOINT:g}"]
    for key, label, color in (("least_squares", "DEL eq. error, least squares", "tab:cyan"),
                              ("instrumental", "DEL eq. error, instr. variables", "tab:green")):
        v = np.array(ee[key]) / c0 - 1
        rows.append((f"{label}, σ = {SIGMA_JOINT:g} rad", v.mean(), v.mean() - v.std(), v.mean() + v.std(), color))
    for name, oe in result["output_error"].items():
        v = np.array(oe["damping"]) / c0 - 1
        rows.append((f"output error, {SHORT[name]}", v.mean(), v.mean() - v.std(), v.mean() + v.std(), COLORS[name]))
    return rows


def plot(img: Path, results: dict):
    plt = pyplot()
    fig, ax = plt.subplots(2, 2, figsize=(15, 10), layout="constrained")
    main = results[CASES[0].name]
    ss = main["steady_state"]
    a = ax[0, 0]
    for name in LABELS:
        a.plot(ss["t"], 1e3 * (ss[name] - ss["benchmark"]), color=COLORS[name], lw=1, label=LABELS[name])
    a.set_xlabel("t [s]")
    a.set_ylabel("θ − θ_benchmark [mrad]")
    a.set_title(f"(a) Steady state at the true c = {main['true_damping']} (N = {main['lift']['segments']}; "
                f"amplitude {main['benchmark']['amplitude']:.3f} rad)", fontsize=10)
    a.legend(fontsize=8)
    a.grid(alpha=0.3)
    a = ax[0, 1]
    for name, r in results.items():
        dts = np.array([float(k) for k in r["vi_order"]])
        plain = [abs(v["amplitude_error"]) for v in r["vi_order"].values()]
        heavy = [abs(v["amplitude_error_vs_added_mass_benchmark"]) for v in r["vi_order"].values()]
        a.loglog(dts, 100 * np.array(plain), MARKERS[name] + "-", color="tab:blue",
                 label=f"{name}: VI against the benchmark")
        a.loglog(dts, 100 * np.array(heavy), MARKERS[name] + "--", color="tab:purple",
                 label=f"{name}: VI against the benchmark with M + cDΔt/2")
        for model, dt in (("baumgarte", BAUMGARTE_DT), ("baumgarte_coarse", COARSE_BAUMGARTE_DT)):
            a.loglog([dt], [100 * abs(r["amplitude_match"][model]["amplitude_error_at_true_c"])], MARKERS[name],
                     color=COLORS[model], ms=8, label=f"{name}: {SHORT[model]}")
    a.set_xlabel("Δt [s]")
    a.set_ylabel("|steady amplitude error| at the true c [%]")
    a.set_title("(b) Order: the VI's friction impulse adds cDΔt/2 to the mass (first order)", fontsize=10)
    a.legend(fontsize=7, loc="lower right")
    a.grid(alpha=0.3, which="both")
    a = ax[1, 0]
    rows = {name: identified(r) for name, r in results.items()}
    labels = [row[0] for row in rows[CASES[0].name]]
    for j, (name, rs) in enumerate(rows.items()):
        for i, (label, value, lo, hi, color) in enumerate(rs):
            a.errorbar([100 * value], [i + 0.15 * (1 - 2 * j)], xerr=[[100 * (value - lo)], [100 * (hi - value)]],
                       fmt=MARKERS[name], color=color, ms=5, capsize=3)
    a.axvline(0.0, color="k", ls=":", lw=1)
    a.set_yticks(range(len(labels)), labels, fontsize=8)
    a.invert_yaxis()
    a.set_xlabel("identified c / true c − 1 [%]\n"
                 "(bars: amplitude match, the ±1 % amplitude band; data fits, ± std over seeds)")
    a.set_title("(c) Identified damping (○ N = 5, c = 0.2;  □ N = 3, c = 0.1)", fontsize=10)
    a.grid(alpha=0.3)
    a = ax[1, 1]
    for name, r in results.items():
        c0, ee = r["true_damping"], r["equation_error"]
        sig = np.array([v["sigma_joint"] for v in ee.values()])
        for key, color, dx in (("least_squares", "tab:cyan", 0.96), ("instrumental", "tab:green", 1.04)):
            vals = [100 * (np.array(v[key]) / c0 - 1) for v in ee.values()]
            a.errorbar(np.maximum(sig, 3e-5) * dx, [v.mean() for v in vals], yerr=[v.std() for v in vals],
                       fmt=MARKERS[name] + "-", color=color, ms=4, capsize=3,
                       label=f"{name}: {'least squares' if key == 'least_squares' else 'instrumental variables'}")
    a.axhline(0.0, color="k", ls=":", lw=1)
    a.axvline(SIGMA_JOINT, color="0.6", ls="--", lw=1)
    a.set_xscale("log")
    a.set_xlabel("joint encoder noise σ [rad] (σ = 0 plotted at 3e-5; dashed: the stated level)")
    a.set_ylabel("identified c / true c − 1 [%]")
    a.set_title(f"(d) DEL equation error from noisy samples (Δt = {VI_DT} s, {WINDOW:g}–{HORIZON:g} s)", fontsize=10)
    a.legend(fontsize=8)
    a.grid(alpha=0.3)
    fig.savefig(img / "scissor_lift_identification.png", dpi=100)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 noise seeds, no output-error fit through Baumgarte")
    ap.add_argument("--img-dir", type=Path, default=ROOT / "docs" / "img")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "out" / "scissor_lift")
    args = ap.parse_args(argv)
    args.img_dir.mkdir(parents=True, exist_ok=True)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    begun = time.perf_counter()
    results = {case.name: run_case(case, 3 if args.quick else 10, not args.quick)
               for case in CASES}
    plot(args.img_dir, results)
    summary = {"vi_dt": VI_DT, "baumgarte_dt": BAUMGARTE_DT, "coarse_baumgarte_dt": COARSE_BAUMGARTE_DT,
               "horizon": HORIZON, "window": WINDOW, "sigma_joint": SIGMA_JOINT, "sigma_slider": SIGMA_SLIDER,
               "iv_lag": SL.IV_LAG, "cases": public(results), "seconds": time.perf_counter() - begun}
    path = args.out_dir / "summary.json"
    path.write_text(json.dumps(summary, indent=1))
    say(f"wrote {path} and {args.img_dir / 'scissor_lift_identification.png'} in {summary['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
