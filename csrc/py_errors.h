// Native exceptions -> perfcore.errors classes, in the CPython C API (no pybind11), so the hook
// types and the bindings raise the same Python errors.
#pragma once

#include <Python.h>

namespace perfcore {

// Looks up perfcore.errors' classes once (at module import); false with the Python error set.
bool loadErrorClasses();

// Sets the Python error for the C++ exception in flight. Call only inside a catch block.
void setPythonError();

}  // namespace perfcore
