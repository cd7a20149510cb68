#include "common.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace mcpy {

std::string shape_str(const std::vector<long>& s) {
  std::ostringstream o;
  o << "(";
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] < 0) o << "any";
    else o << s[i];
    if (s.size() == 1 || i + 1 < s.size()) o << (i + 1 < s.size() ? ", " : ",");
  }
  o << ")";
  return o.str();
}

std::string shape_str(const py::array& a) {
  std::vector<long> s(a.shape(), a.shape() + a.ndim());
  return shape_str(s);
}

void check_array(const Arr& a, const std::vector<long>& shape, const std::string& what,
                 const std::vector<std::string>& names) {
  bool ok = a.ndim() == static_cast<long>(shape.size());
  for (size_t i = 0; ok && i < shape.size(); ++i)
    if (shape[i] >= 0 && a.shape(i) != shape[i]) ok = false;
  if (!ok)
    throw py::value_error(what + " has shape " + shape_str(a) + ", expected " + shape_str(shape));
  const double* d = a.data();
  const long size = a.size();
  for (long i = 0; i < size; ++i)
    if (!std::isfinite(d[i])) {
      std::ostringstream o;
      o << what << " contains " << d[i] << " at flat index " << i;
      if (!names.empty()) {
        const long last = shape.empty() ? 1 : a.shape(a.ndim() - 1);
        const long j = i % last;
        if (a.ndim() > 1) o << " (row " << i / last << ", column " << j << ")";
        if (j < static_cast<long>(names.size())) o << " ['" << names[j] << "']";
      }
      o << ": inputs must be finite";
      throw py::value_error(o.str());
    }
}

std::vector<std::string> config_names(const mc::Model& m) {
  std::vector<std::string> r;
  for (const auto& c : m.configs) r.push_back(c.name);
  return r;
}

std::vector<std::string> constraint_names(const mc::Model& m) {
  std::vector<std::string> r;
  for (const auto& c : m.constraints) r.push_back(c.name);
  return r;
}

std::vector<std::string> state_names(const mc::Model& m) {
  std::vector<std::string> r = config_names(m);
  for (int i = 0; i < m.nd; ++i) r.push_back("p_" + m.configs[i].name);
  for (int i = m.nd; i < m.nq(); ++i) r.push_back("v_" + m.configs[i].name);
  return r;
}

std::vector<std::string> input_names(const mc::Model& m) {
  std::vector<std::string> r = m.inputs;
  for (int i = m.nd; i < m.nq(); ++i) r.push_back(m.configs[i].name + "_next");
  return r;
}

py::array_t<double> new_vector(long n) {
  auto& api = py::detail::npy_api::get();
  Py_intptr_t dims[1] = {n};
  PyObject* a = api.PyArray_NewFromDescr_(api.PyArray_Type_, api.PyArray_DescrFromType_(py::detail::npy_api::NPY_DOUBLE_),
                                          1, dims, nullptr, nullptr, 0, nullptr);
  if (a == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::array_t<double>>(a);
}

py::array_t<double> copy_vector(const double* p, long n) {
  py::array_t<double> out = new_vector(n);
  std::copy(p, p + n, out.mutable_data());
  return out;
}

}  // namespace mcpy
