// What the hook types share: the error count, optional references, and their registration.
#include "hooks.h"

namespace perfcore {

namespace {
long long hookErrors = 0;  // changed with the GIL held
long long tagErrors = 0;   // likewise

PyObject* hookDepthNow(PyObject*, PyObject*) { return PyLong_FromLong(hookDepth); }

PyObject* hookErrorsNow(PyObject*, PyObject*) { return PyLong_FromLongLong(hookErrors); }

PyObject* tagErrorsNow(PyObject*, PyObject*) { return PyLong_FromLongLong(tagErrors); }

PyMethodDef hookFunctions[] = {
    {"hook_depth", hookDepthNow, METH_NOARGS, "How many perfcore hooks are open on the calling thread."},
    {"hook_errors", hookErrorsNow, METH_NOARGS,
     "Hook failures counted instead of raised into the user's code (phases left untimed, upkeep errors)."},
    {"tag_errors", tagErrorsNow, METH_NOARGS, "Phases that opened without their CUPTI tag (the push failed)."},
    {nullptr, nullptr, 0, nullptr}};

bool addType(PyObject* module, PyTypeObject* type, const char* name) {
  if (PyType_Ready(type) < 0) return false;
  Py_INCREF(type);
  if (PyModule_AddObject(module, name, reinterpret_cast<PyObject*>(type)) < 0) {
    Py_DECREF(type);
    return false;
  }
  return true;
}
}  // namespace

void hookError() {
  PyErr_Clear();
  ++hookErrors;
}

void tagError() { ++tagErrors; }

bool wrappedNameAttr(PyObject* wrapped, PyObject* name, PyObject** out) {
  static const char* const forwarded[] = {"__doc__", "__name__", "__qualname__", "__module__"};
  for (const char* f : forwarded) {
    if (PyUnicode_CompareWithASCIIString(name, f) == 0) {
      *out = PyObject_GetAttr(wrapped, name);
      return true;
    }
  }
  return false;
}

PyObject* getOptional(PyObject* slot) { return Py_NewRef(slot ? slot : Py_None); }

void setOptional(PyObject*& slot, PyObject* value) {
  Py_XSETREF(slot, (value == nullptr || value == Py_None) ? nullptr : Py_NewRef(value));
}

bool addHookTypes(PyObject* module) {
  return addType(module, &PhaseScopeType, "PhaseScope") && addType(module, &TimedCallType, "TimedCall") &&
         addType(module, &StepClockType, "StepClock") &&
         addType(module, &StepClosureType, "StepClosure") &&
         addType(module, &StepEndsType, "StepEnds") &&
#if PY_VERSION_HEX >= 0x030B0000
         addType(module, &SyncLogType, "SyncLog") && addType(module, &CountedCallType, "CountedCall") &&
         PyModule_AddFunctions(module, lineStackFunctions) == 0 &&
#endif
         PyModule_AddFunctions(module, hookFunctions) == 0;
}

}  // namespace perfcore
