// Binding of riccati.hpp: the backward sweep behind control/riccati.py's tv_lqr/tv_lq.
// Internal API (leading underscore): the Python layer validates the problem, allocates
// the outputs and supplies scipy's dgemm; this layer checks only what could corrupt
// memory (dtypes, shapes, layouts) and releases the GIL for the sweep.
#include <Python.h>

#include <cmath>

#include "common.hpp"
#include "marionette/riccati.hpp"

namespace mcpy {

namespace {

using CArr = py::array_t<double, py::array::c_style>;

/// A per-step input: (N, *shape) stacked or `shape` constant; null for None if optional.
const double* per_step(const py::object& o, long N, const std::vector<long>& shape, const char* name, bool optional,
                       bool& stacked, std::vector<Arr>& keep) {
  stacked = false;
  if (o.is_none()) {
    if (optional) return nullptr;
    throw py::value_error(std::string(name) + " is required");
  }
  Arr a = Arr::ensure(o);
  if (!a) throw py::value_error(std::string(name) + " must be a float64 array");
  std::vector<long> st = {N};
  st.insert(st.end(), shape.begin(), shape.end());
  auto same = [&](const std::vector<long>& s) {
    if (a.ndim() != static_cast<long>(s.size())) return false;
    for (size_t i = 0; i < s.size(); ++i)
      if (a.shape(i) != s[i]) return false;
    return true;
  };
  if (same(st))
    stacked = true;
  else if (!same(shape))
    throw py::value_error(std::string(name) + " has shape " + shape_str(a) + ", expected " + shape_str(st) + " or " +
                          shape_str(shape));
  keep.push_back(a);
  return a.data();
}

double* output(const py::object& o, const std::vector<long>& shape, const char* name) {
  if (!py::isinstance<py::array>(o)) throw py::value_error(std::string("output ") + name + " must be a numpy array");
  py::array a = py::reinterpret_borrow<py::array>(o);
  bool ok = a.dtype().is(py::dtype::of<double>()) && (a.flags() & py::array::c_style) && a.writeable() &&
            a.ndim() == static_cast<long>(shape.size());
  for (size_t i = 0; ok && i < shape.size(); ++i) ok = a.shape(i) == shape[i];
  if (!ok)
    throw py::value_error(std::string("output ") + name + " must be a writeable C-contiguous float64 array of shape " +
                          shape_str(shape) + ", got " + shape_str(a));
  return static_cast<double*>(a.mutable_data());
}

/// A C-contiguous float64 array of exactly `shape` (no conversion: the Python layer passes its own arrays).
const double* exact(const py::object& o, const std::vector<long>& shape, const char* name) {
  if (!py::isinstance<py::array>(o)) throw py::value_error(std::string(name) + " must be a numpy array");
  py::array a = py::reinterpret_borrow<py::array>(o);
  bool ok = a.dtype().is(py::dtype::of<double>()) && (a.flags() & py::array::c_style) &&
            a.ndim() == static_cast<long>(shape.size());
  for (size_t i = 0; ok && i < shape.size(); ++i) ok = a.shape(i) == shape[i];
  if (!ok)
    throw py::value_error(std::string(name) + " must be a C-contiguous float64 array of shape " + shape_str(shape) +
                          ", got " + shape_str(a));
  return static_cast<const double*>(a.data());
}

/// (N, n, m) of A (N, n, n) and B (N, n, m), checked like `exact`.
std::vector<long> lq_sizes(const py::object& A, const py::object& B) {
  if (!py::isinstance<py::array>(A) || !py::isinstance<py::array>(B))
    throw py::value_error("A and B must be numpy arrays");
  py::array a = py::reinterpret_borrow<py::array>(A), b = py::reinterpret_borrow<py::array>(B);
  if (a.ndim() != 3 || b.ndim() != 3) throw py::value_error("A and B must have shapes (N, n, n) and (N, n, m)");
  return {static_cast<long>(a.shape(0)), static_cast<long>(a.shape(1)), static_cast<long>(b.shape(2))};
}

}  // namespace

void bind_riccati(py::module_& m) {
  m.def(
      "_lq_rollout",
      [](const py::object& A_, const py::object& B_, const py::object& K_, const py::object& C_,
         const py::object& x0_) {
        const auto s = lq_sizes(A_, B_);
        const long N = s[0], n = s[1], mm = s[2];
        const double* A = exact(A_, {N, n, n}, "A");
        const double* B = exact(B_, {N, n, mm}, "B");
        const double* K = exact(K_, {N, mm, n}, "K");
        const double* C = C_.is_none() ? nullptr : exact(C_, {N, mm}, "C");
        const double* x0 = exact(x0_, {n}, "x0");
        py::array_t<double> X({N + 1, n}), U({N, mm});
        double* Xp = X.mutable_data();
        double* Up = U.mutable_data();
        {
          py::gil_scoped_release nogil;
          mc::lq_rollout(N, n, mm, A, B, K, C, x0, Xp, Up);
        }
        return py::make_tuple(X, U);
      },
      py::arg("A"), py::arg("B"), py::arg("K"), py::arg("C"), py::arg("x0"),
      "(X (N+1, n), U (N, m)) of the closed loop u = -K x - C, x' = A x + B u from x0 (internal; use "
      "marionette_control.lq.riccati.LQSolution.rollout).");
  m.def(
      "_closed_loop_adjoint",
      [](const py::object& A_, const py::object& B_, const py::object& K_, const py::object& q_,
         const py::object& r_, const py::object& zN_) {
        const auto s = lq_sizes(A_, B_);
        const long N = s[0], n = s[1], mm = s[2];
        const double* A = exact(A_, {N, n, n}, "A");
        const double* B = exact(B_, {N, n, mm}, "B");
        const double* K = exact(K_, {N, mm, n}, "K");
        const double* q = exact(q_, {N, n}, "q");
        const double* r = exact(r_, {N, mm}, "r");
        const double* zN = exact(zN_, {n}, "zN");
        py::array_t<double> z({N + 1, n});
        double* zp = z.mutable_data();
        {
          py::gil_scoped_release nogil;
          mc::closed_loop_adjoint(N, n, mm, A, B, K, q, r, zN, zp);
        }
        return z;
      },
      py::arg("A"), py::arg("B"), py::arg("K"), py::arg("q"), py::arg("r"), py::arg("zN"),
      "z (N+1, n): z(N) = zN, z(k) = (A - B K)^T z(k+1) + q(k) - K^T r(k) (internal; the optimizer's adjoint, "
      "thesis Prop. 7).");

  m.def(
      "_riccati_sweep",
      [](const py::object& A_, const py::object& B_, const py::object& Q_, const py::object& R_, const py::object& Qf_,
         const py::object& S_, const py::object& q_, const py::object& r_, const py::object& qf_, const py::object& K_,
         const py::object& P_, const py::object& C_, const py::object& b_, const py::object& c_, bool linear,
         const py::object& dgemm) {
        Arr A = Arr::ensure(A_), B = Arr::ensure(B_);
        if (!A || A.ndim() != 3 || A.shape(1) != A.shape(2)) throw py::value_error("A must have shape (N, n, n)");
        const long N = A.shape(0), n = A.shape(1);
        if (!B || B.ndim() != 3 || B.shape(0) != N || B.shape(1) != n) throw py::value_error("B must have shape (N, n, m)");
        const long m = B.shape(2);
        if (n < 1 || m < 1) throw py::value_error("n and m must be >= 1");
        std::vector<Arr> keep;
        mc::RiccatiInputs in;
        in.N = N;
        in.n = n;
        in.m = m;
        in.A = A.data();
        in.B = B.data();
        in.Q = per_step(Q_, N, {n, n}, "Q", false, in.Q_stacked, keep);
        in.R = per_step(R_, N, {m, m}, "R", false, in.R_stacked, keep);
        in.S = per_step(S_, N, {n, m}, "S", true, in.S_stacked, keep);
        bool qf_stacked = false, Qf_stacked = false;
        in.Qf = per_step(Qf_, 0, {n, n}, "Qf", false, Qf_stacked, keep);
        in.linear = linear;
        mc::RiccatiOutputs out;
        out.K = output(K_, {N, m, n}, "K");
        // P (N + 1, n, n), or (1, n, n) for P(0) only.
        const bool history = !(py::isinstance<py::array>(P_) && N > 0 &&
                               py::reinterpret_borrow<py::array>(P_).ndim() >= 1 &&
                               py::reinterpret_borrow<py::array>(P_).shape(0) == 1);
        out.P = output(P_, {history ? N + 1 : 1, n, n}, "P");
        out.P_history = history;
        if (linear) {
          in.q = per_step(q_, N, {n}, "q", true, in.q_stacked, keep);
          in.r = per_step(r_, N, {m}, "r", true, in.r_stacked, keep);
          in.qf = per_step(qf_, 0, {n}, "qf", true, qf_stacked, keep);
          out.C = output(C_, {N, m}, "C");
          out.b = output(b_, {N + 1, n}, "b");
          out.c = output(c_, {N + 1}, "c");
        }
        mc::DgemmFn gemm = nullptr;
        if (!dgemm.is_none()) {
          if (!PyCapsule_CheckExact(dgemm.ptr()))
            throw py::value_error("dgemm must be a PyCapsule holding a Fortran-interface dgemm (or None)");
          void* f = PyCapsule_GetPointer(dgemm.ptr(), PyCapsule_GetName(dgemm.ptr()));
          if (f == nullptr) throw py::error_already_set();
          gemm = reinterpret_cast<mc::DgemmFn>(f);
        }
        mc::RiccatiResult res;
        {
          py::gil_scoped_release nogil;
          res = mc::riccati_sweep(in, out, gemm);
        }
        // P(0), b(0), c(0) finite (the recursion did not overflow), read here rather than by a numpy
        // pass per array in Python: on small problems that pass costs as much as the sweep.
        const auto finite = [](const double* p, long count) {
          for (long i = 0; i < count; ++i)
            if (!std::isfinite(p[i])) return false;
          return true;
        };
        const bool ok = res.failed_step >= 0 || (finite(out.P, n * n) && (!linear || (finite(out.b, n) &&
                                                                                        finite(out.c, 1))));
        py::dict d;
        d["finite"] = ok;
        d["failed_step"] = res.failed_step;
        d["failed_order"] = res.failed_order;
        d["structured_steps"] = res.structured_steps;
        d["dense_rows"] = res.dense_rows;
        d["nonzero_columns"] = res.nonzero_columns;
        return d;
      },
      py::arg("A"), py::arg("B"), py::arg("Q"), py::arg("R"), py::arg("Qf"), py::arg("S"), py::arg("q"), py::arg("r"),
      py::arg("qf"), py::arg("K"), py::arg("P"), py::arg("C"), py::arg("b"), py::arg("c"), py::arg("linear"),
      py::arg("dgemm"),
      "Backward Riccati sweep of thesis (B.4) into the given output arrays (internal; use "
      "marionette_control.lq.riccati.tv_lq / tv_lqr). P of shape (1, n, n) receives P(0) only (P(k+1) of "
      "a failed step k). Returns {finite (P(0), b(0), c(0) finite; True when a step failed), failed_step, "
      "failed_order, structured_steps, dense_rows, nonzero_columns}.");
}

}  // namespace mcpy
