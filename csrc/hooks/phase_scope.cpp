// PhaseScope: the `with timer.compute():` object. It is entered and exited once per phase per
// step, so __enter__ is METH_NOARGS and __exit__ METH_FASTCALL (a couple of tens of ns each), and
// the timer hands out one cached scope per phase (no allocation per use).
#include <cstdint>
#include <exception>
#include <vector>

#include "../errors.h"
#include "../py_errors.h"
#include "hooks.h"

#ifdef PERFCORE_WITH_CUDA
#include "../cupti/tracer.h"
#include "../events.h"
#endif

namespace perfcore {

namespace {
// Python function (scope, fn) -> timed fn, set once by perfcore.timing.
PyObject* scopeDecorator = nullptr;
}  // namespace

void setScopeDecorator(PyObject* fn) {
  Py_XINCREF(fn);
  Py_XSETREF(scopeDecorator, fn);
}

#ifdef PERFCORE_WITH_CUDA
namespace {
// Whether each open tagged scope on this thread pushed its id: a push that failed (or was off)
// must not be popped, or it would pop an outer phase's id.
thread_local std::vector<uint8_t> tagPushed;

// Kernels launched inside the phase on this thread carry its id: CUPTI writes an
// EXTERNAL_CORRELATION record before each runtime/driver API record made while it is pushed.
// Tagging is an aid, not the phase: a failed push is counted and the phase opens untagged (its
// kernels are then placed by their launch time).
void pushTag(PhaseScopeObject* s) {
  bool pushed = false;
  if (ActivityTracer::instance().tagging()) {  // after close(): a plain phase
    try {
      ActivityTracer::instance().pushExternalId(static_cast<uint64_t>(s->phase));
      pushed = true;
    } catch (...) {
      tagError();
    }
  }
  tagPushed.push_back(pushed ? 1 : 0);
}

void popTag() {
  if (tagPushed.empty()) return;
  const bool pushed = tagPushed.back() != 0;
  tagPushed.pop_back();
  if (!pushed) return;
  try {
    ActivityTracer::instance().popExternalId();
  } catch (...) {
    tagError();
  }
}
}  // namespace
#endif

bool scopeBegin(PhaseScopeObject* s) {
  // The host span and the CUDA event pair open together or not at all: when the second fails,
  // the first is taken back, so a failed open leaves nothing half-open on this thread (which
  // would break every later close).
  bool opened = false;
  try {
    s->recorder->begin(s->phase);
    opened = true;
#ifdef PERFCORE_WITH_CUDA
    if (s->events) s->events->begin(s->phase, s->recorder->step(), s->stream);
#endif
  } catch (...) {
    setPythonError();
    if (opened) s->recorder->cancel(s->phase);
    return false;
  }
#ifdef PERFCORE_WITH_CUDA
  if (s->tagKernels) pushTag(s);
#endif
  return true;
}

bool scopeFinish(PhaseScopeObject* s) {
  // Every part closes even when one fails (the first failure is the one raised), so one bad
  // close never leaves the others open.
  std::exception_ptr failure;
#ifdef PERFCORE_WITH_CUDA
  if (s->tagKernels) popTag();
  if (s->events) {
    try {
      s->events->end(s->phase, s->stream);
    } catch (...) {
      failure = std::current_exception();
    }
  }
#endif
  try {
    s->recorder->end(s->phase);
  } catch (...) {
    if (!failure) failure = std::current_exception();
  }
  if (!failure) return true;
  try {
    std::rethrow_exception(failure);
  } catch (...) {
    setPythonError();
  }
  return false;
}

namespace {

PyObject* scopeEnter(PyObject* self, PyObject*) {
  if (!scopeBegin(reinterpret_cast<PhaseScopeObject*>(self))) return nullptr;
  Py_INCREF(self);
  return self;
}

PyObject* scopeExit(PyObject* self, PyObject* const*, Py_ssize_t) {
  if (!scopeFinish(reinterpret_cast<PhaseScopeObject*>(self))) return nullptr;
  Py_RETURN_FALSE;  // never swallow the body's exception
}

// scope() returns the scope itself, so `with timer.compute():` costs one C call, not a Python
// method; scope(fn) decorates fn through the helper perfcore.timing registered.
PyObject* scopeCall(PyObject* self, PyObject* args, PyObject* kwargs) {
  const Py_ssize_t n = PyTuple_GET_SIZE(args);
  if (n == 0 && (kwargs == nullptr || PyDict_GET_SIZE(kwargs) == 0)) {
    Py_INCREF(self);
    return self;
  }
  if (n == 1 && kwargs == nullptr && PyCallable_Check(PyTuple_GET_ITEM(args, 0)) && scopeDecorator) {
    return PyObject_CallFunctionObjArgs(scopeDecorator, self, PyTuple_GET_ITEM(args, 0), nullptr);
  }
  PyErr_SetString(PyExc_TypeError, "a phase is used as `with timer.phase(...):` or as a decorator `@timer.phase(...)`");
  return nullptr;
}

PyObject* scopePhase(PyObject* self, void*) {
  return PyLong_FromLong(reinterpret_cast<PhaseScopeObject*>(self)->phase);
}

void scopeDealloc(PyObject* self) {
  auto* s = reinterpret_cast<PhaseScopeObject*>(self);
  Py_XDECREF(s->recorderOwner);
  Py_XDECREF(s->eventsOwner);
  Py_TYPE(self)->tp_free(self);
}

PyMethodDef scopeMethods[] = {
    {"__enter__", scopeEnter, METH_NOARGS, "Open the phase (host clock; CUDA event on the timer's stream)."},
    {"__exit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(scopeExit)), METH_FASTCALL,
     "Close the phase."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef scopeGetSet[] = {{"phase_id", scopePhase, nullptr, "The phase this scope times.", nullptr},
                             {nullptr, nullptr, nullptr, nullptr, nullptr}};

}  // namespace

PyTypeObject PhaseScopeType = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "perfcore._C.PhaseScope";
  t.tp_basicsize = sizeof(PhaseScopeObject);
  t.tp_dealloc = scopeDealloc;
  t.tp_call = scopeCall;
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE;
  t.tp_doc = "Context manager timing one phase; made by perfcore._C.phase_scope().";
  t.tp_methods = scopeMethods;
  t.tp_getset = scopeGetSet;
  return t;
}();

PyObject* newPhaseScope(PyTypeObject* cls, SpanRecorder* recorder, PyObject* recorderOwner, EventTimer* events,
                        PyObject* eventsOwner, uintptr_t stream, int32_t phase, bool tagKernels) {
  if (!PyType_IsSubtype(cls, &PhaseScopeType)) {
    PyErr_SetString(PyExc_TypeError, "phase_scope: cls must subclass PhaseScope");
    return nullptr;
  }
  PyObject* obj = cls->tp_alloc(cls, 0);
  if (!obj) return nullptr;
  auto* s = reinterpret_cast<PhaseScopeObject*>(obj);
  s->recorder = recorder;
  s->recorderOwner = Py_NewRef(recorderOwner);
  s->events = events;
  s->eventsOwner = events ? Py_NewRef(eventsOwner) : nullptr;
  s->stream = stream;
  s->phase = phase;
  s->tagKernels = tagKernels;
  return obj;
}

}  // namespace perfcore
