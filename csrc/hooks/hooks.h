// The hot CPython hook types of perfcore._C (PhaseScope, TimedCall, StepClock, StepEnds), written against
// the C API so the per-phase path skips pybind11's dispatch. Nothing here knows pybind11.
#pragma once

#include <Python.h>

// Py_NewRef is Python 3.10's; torch 2.8 still runs on 3.9, where it is spelled out here.
#if PY_VERSION_HEX < 0x030A0000
static inline PyObject* Py_NewRef(PyObject* o) {
  Py_INCREF(o);
  return o;
}
// 3.10's flag; before it, a static type with no tp_new already refuses instances from Python.
#define Py_TPFLAGS_DISALLOW_INSTANTIATION 0
#endif

#include <cstdint>
#include <vector>

#include "../spans.h"

namespace perfcore {

class EventTimer;  // CUDA builds only; nullptr otherwise

// ---- PhaseScope (phase_scope.cpp) ----
struct PhaseScopeObject {
  PyObject_HEAD
  SpanRecorder* recorder;
  PyObject* recorderOwner;  // keeps the recorder alive as long as the scope
  EventTimer* events;       // or nullptr: host clock only
  PyObject* eventsOwner;
  uintptr_t stream;
  int32_t phase;
  bool tagKernels;  // push the phase id as CUPTI's external correlation id while open
};
extern PyTypeObject PhaseScopeType;

// Open / close the scope's phase; false with the Python error set on failure. Opening is atomic:
// the host span, the CUDA event pair and the CUPTI tag open together or not at all.
bool scopeBegin(PhaseScopeObject* s);
bool scopeFinish(PhaseScopeObject* s);

// A new scope of type cls (PhaseScope or a subclass); nullptr with the Python error set.
PyObject* newPhaseScope(PyTypeObject* cls, SpanRecorder* recorder, PyObject* recorderOwner, EventTimer* events,
                        PyObject* eventsOwner, uintptr_t stream, int32_t phase, bool tagKernels);
// fn(scope, f) -> timed f, used by `@scope`; perfcore.timing registers it once.
void setScopeDecorator(PyObject* fn);

// ---- shared by the hook types (hooks.cpp) ----
// How many perfcore hooks are open on this thread: only the outermost hooked call is timed.
// Defined here (constant-initialised, initial-exec) so each use is one %fs-relative access.
inline __attribute__((tls_model("initial-exec"))) thread_local int hookDepth = 0;

// A phase a hook could not open or close: the Python error is cleared and counted (hook_errors()),
// and the user's call goes on untimed.
void hookError();
// A phase that opened without its CUPTI tag (the push failed): counted (tag_errors()).
void tagError();

// A wrapper type's introspection: true (and *out set, or nullptr with the error set) when `name` is
// __doc__, __name__, __qualname__ or __module__, answered by the wrapped callable; false otherwise.
bool wrappedNameAttr(PyObject* wrapped, PyObject* name, PyObject** out);

// An optional reference: nullptr inside, None outside.
PyObject* getOptional(PyObject* slot);
void setOptional(PyObject*& slot, PyObject* value);

// The Python references an object of ours holds, for the GC (traverse, clear) and dealloc:
// one definition for every hook type that holds references.
inline void clearRef(PyObject*& p) {
  PyObject* old = p;
  p = nullptr;
  Py_XDECREF(old);
}

template <class T, PyObject* T::*... Refs>
struct HeldRefs {
  static int traverse(PyObject* self, visitproc visit, void* arg) {
    T* o = reinterpret_cast<T*>(self);
    for (PyObject* p : {(o->*Refs)...}) {
      if (p) {
        if (int r = visit(p, arg)) return r;
      }
    }
    return 0;
  }
  static int clear(PyObject* self) {
    T* o = reinterpret_cast<T*>(self);
    (clearRef(o->*Refs), ...);
    return 0;
  }
  static void dealloc(PyObject* self) {
    PyObject_GC_UnTrack(self);
    clear(self);
    Py_TYPE(self)->tp_free(self);
  }
};

extern PyTypeObject TimedCallType;  // timed_call.cpp
extern PyTypeObject StepClockType;    // step_clock.cpp
extern PyTypeObject StepClosureType;  // step_clock.cpp: what StepClock.pre hands torch for a closure
#if PY_VERSION_HEX >= 0x030B0000
extern PyTypeObject SyncLogType;      // sync_count.cpp: the sync-call counter's calls
extern PyTypeObject CountedCallType;  // sync_count.cpp: a Tensor method counted into a SyncLog
extern PyMethodDef lineStackFunctions[];  // line_stack.cpp: stack_key, the line sampler's walk
#endif

// ---- StepEnds (step_ends.cpp) ----
struct StepEndsObject {
  PyObject_HEAD
  std::vector<int64_t>* ends;  // the ends of steps base, base+1, ...
  Py_ssize_t base;             // steps before it were settled and their ends let go
};
extern PyTypeObject StepEndsType;
inline Py_ssize_t stepEndsCount(const StepEndsObject* o) { return o->base + static_cast<Py_ssize_t>(o->ends->size()); }
// false when out of memory (nothing appended, no Python error set).
bool stepEndsAppend(StepEndsObject* o, int64_t t) noexcept;

// Readies the hook types and adds them, with hook_depth() and hook_errors(), to `module`.
// false with the Python error set.
bool addHookTypes(PyObject* module);

}  // namespace perfcore
