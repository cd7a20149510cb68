// Shared helpers of the pybind11 bindings: numpy argument checks with
// specific messages (shape expected vs given, first non-finite entry by name).
#pragma once

#include <pybind11/eigen.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "marionette/model.hpp"

namespace mcpy {

namespace py = pybind11;
using Arr = py::array_t<double, py::array::c_style | py::array::forcecast>;

std::string shape_str(const py::array& a);
std::string shape_str(const std::vector<long>& s);

/// Checks a's shape against `shape` (-1 = any) and that every entry is finite;
/// `names` (may be empty) names the entries of the last axis.
void check_array(const Arr& a, const std::vector<long>& shape, const std::string& what,
                 const std::vector<std::string>& names = {});

/// A new float64 vector (n,) from numpy's own allocator: numpy serves small arrays from its cache, where
/// pybind11's array constructors first build shape and stride vectors on the heap (the tick paths).
py::array_t<double> new_vector(long n);
/// A new float64 vector (n,) with a copy of p[0..n) (new_vector's allocation).
py::array_t<double> copy_vector(const double* p, long n);

std::vector<std::string> state_names(const mc::Model& m);
std::vector<std::string> input_names(const mc::Model& m);
std::vector<std::string> config_names(const mc::Model& m);
std::vector<std::string> constraint_names(const mc::Model& m);

void bind_model(py::module_& m);
void bind_discrete_system(py::module_& m);
void bind_continuous(py::module_& m);
void bind_riccati(py::module_& m);
void bind_tick_kernel(py::module_& m);
void bind_sample_gate(py::module_& m);
void bind_tick_path(py::module_& m);

}  // namespace mcpy
