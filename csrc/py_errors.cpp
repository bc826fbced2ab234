// perfcore.errors lookup and the C++ -> Python exception mapping.
#include "py_errors.h"

#include <exception>

#include "errors.h"

namespace perfcore {

namespace {

// perfcore.errors classes, looked up once at import; leaked on purpose (no teardown at exit).
struct ErrorClasses {
  PyObject* usage = nullptr;
  PyObject* device = nullptr;
  PyObject* cuda = nullptr;
  PyObject* cupti = nullptr;
  PyObject* base = nullptr;
};
ErrorClasses errorClasses;

}  // namespace

bool loadErrorClasses() {
  PyObject* errors = PyImport_ImportModule("perfcore.errors");
  if (!errors) return false;
  // Held for the life of the process on purpose (no teardown at exit).
  errorClasses.usage = PyObject_GetAttrString(errors, "UsageError");
  errorClasses.device = PyObject_GetAttrString(errors, "DeviceUnavailable");
  errorClasses.cuda = PyObject_GetAttrString(errors, "CudaError");
  errorClasses.cupti = PyObject_GetAttrString(errors, "CuptiError");
  errorClasses.base = PyObject_GetAttrString(errors, "PerfcoreError");
  Py_DECREF(errors);
  return errorClasses.usage && errorClasses.device && errorClasses.cuda && errorClasses.cupti && errorClasses.base;
}

// Sets the Python error for the exception in flight. Call only inside a catch block.
void setPythonError() {
  try {
    throw;
  } catch (const UsageError& e) {
    PyErr_SetString(errorClasses.usage, e.what());
  } catch (const DeviceUnavailableError& e) {
    PyErr_SetString(errorClasses.device, e.what());
  } catch (const CudaError& e) {
    PyErr_SetString(errorClasses.cuda, e.what());
  } catch (const CuptiError& e) {
    // Carry CUPTI's result code: perfcore.errors.CuptiError(message, code).
    PyObject* exc = PyObject_CallFunction(errorClasses.cupti, "si", e.what(), e.code());
    if (exc) {
      PyErr_SetObject(errorClasses.cupti, exc);
      Py_DECREF(exc);
    }
  } catch (const NativeError& e) {
    PyErr_SetString(errorClasses.base, e.what());
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
}

}  // namespace perfcore
