// Native tables as Python dicts of numpy arrays, shared by bindings.cpp and test_bindings.cpp
// (the files that know pybind11).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <utility>
#include <vector>

#ifdef PERFCORE_WITH_CUDA
#include "cupti/activity_columns.h"
#include "cupti/buffers.h"
#endif

namespace perfcore {

namespace py = pybind11;

// Hands a vector to numpy without copying: the array owns it through a capsule.
template <class T>
py::array toNumpy(std::vector<T>&& v) {
  auto* owned = new std::vector<T>(std::move(v));
  py::capsule free(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>({static_cast<py::ssize_t>(owned->size())}, {static_cast<py::ssize_t>(sizeof(T))},
                        owned->data(), free);
}

template <class Table>
py::dict tableToDict(Table&& table) {
  py::dict d;
  table.visit([&d](const char* name, auto& col) { d[name] = toNumpy(std::move(col)); });
  return d;
}

#ifdef PERFCORE_WITH_CUDA
py::dict activityToDict(ActivityColumns&& a);
py::dict bufferStatsToDict(const BufferStats& b);
#endif

// The test-only classes and functions (fake CUPTI buffers, the fake CUDA runtime, the tracer's
// API-record filter), added to the module by bindings.cpp.
void addTestBindings(py::module_& m);

}  // namespace perfcore
