// perfcore._C: the only file that knows pybind11. Native tables become dicts of numpy arrays;
// native exceptions become perfcore.errors classes.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <utility>
#include <vector>

#include "clock.h"
#include "columns.h"
#include "errors.h"
#include "spans.h"

#ifdef PERFCORE_WITH_CUDA
#include <cuda_runtime.h>

#include "calib.h"
#include "cuda_check.h"
#include "cupti/fake_buffer.h"
#include "cupti/tracer.h"
#include "events.h"
#include "transfer.h"
#endif

namespace py = pybind11;
using namespace perfcore;

namespace {

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
py::dict activityToDict(ActivityColumns&& a) {
  py::dict d;
  d["kernels"] = tableToDict(std::move(a.kernels));
  d["memcpy"] = tableToDict(std::move(a.memcpy));
  d["memset"] = tableToDict(std::move(a.memset));
  d["sync"] = tableToDict(std::move(a.sync));
  d["external_correlation"] = tableToDict(std::move(a.external));
  d["overhead"] = tableToDict(std::move(a.overhead));
  d["names"] = py::cast(a.names);
  d["records"] = a.records;
  d["other_records"] = a.otherRecords;
  return d;
}

uintptr_t streamArg(py::object s) { return s.is_none() ? 0 : s.cast<uintptr_t>(); }
#endif

// perfcore.errors classes, looked up once at import; leaked on purpose (no teardown at exit).
struct ErrorClasses {
  PyObject* usage = nullptr;
  PyObject* device = nullptr;
  PyObject* cuda = nullptr;
  PyObject* cupti = nullptr;
  PyObject* base = nullptr;
};
ErrorClasses errorClasses;

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

void registerExceptions() {
  py::module_ errors = py::module_::import("perfcore.errors");
  errorClasses.usage = py::object(errors.attr("UsageError")).release().ptr();
  errorClasses.device = py::object(errors.attr("DeviceUnavailable")).release().ptr();
  errorClasses.cuda = py::object(errors.attr("CudaError")).release().ptr();
  errorClasses.cupti = py::object(errors.attr("CuptiError")).release().ptr();
  errorClasses.base = py::object(errors.attr("PerfcoreError")).release().ptr();
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const NativeError&) {
      setPythonError();
    }
  });
}

// ---- PhaseScope: the `with timer.compute():` object, written against the C API ----
// It is entered and exited once per phase per step, so it skips pybind11's argument dispatch:
// __enter__ is METH_NOARGS and __exit__ METH_FASTCALL, each a couple of tens of ns, and the
// timer hands out one cached scope per phase (no allocation per use).
struct PhaseScopeObject {
  PyObject_HEAD
  SpanRecorder* recorder;
  PyObject* recorderOwner;  // keeps the recorder alive as long as the scope
  void* events;             // EventTimer* in CUDA builds, or nullptr: host clock only
  PyObject* eventsOwner;
  uintptr_t stream;
  int32_t phase;
  bool tagKernels;  // push the phase id as CUPTI's external correlation id while open
};

// Opens / closes the scope's phase; false with the Python error set on failure.
bool scopeBegin(PhaseScopeObject* s) {
  try {
    s->recorder->begin(s->phase);
#ifdef PERFCORE_WITH_CUDA
    if (s->events) static_cast<EventTimer*>(s->events)->begin(s->phase, s->recorder->step(), s->stream);
    // Kernels launched inside the phase carry its id (EXTERNAL_CORRELATION records), so the
    // GPU time of forward / backward / optimizer can be told apart.
    if (s->tagKernels && ActivityTracer::instance().active()) {  // after close(): plain phase
      ActivityTracer::instance().pushExternalId(static_cast<uint64_t>(s->phase));
    }
#endif
  } catch (...) {
    setPythonError();
    return false;
  }
  return true;
}

bool scopeFinish(PhaseScopeObject* s) {
  try {
#ifdef PERFCORE_WITH_CUDA
    if (s->tagKernels && ActivityTracer::instance().active()) ActivityTracer::instance().popExternalId();
    if (s->events) static_cast<EventTimer*>(s->events)->end(s->phase, s->stream);
#endif
    s->recorder->end(s->phase);
  } catch (...) {
    setPythonError();
    return false;
  }
  return true;
}

PyObject* scopeEnter(PyObject* self, PyObject*) {
  if (!scopeBegin(reinterpret_cast<PhaseScopeObject*>(self))) return nullptr;
  Py_INCREF(self);
  return self;
}

PyObject* scopeExit(PyObject* self, PyObject* const*, Py_ssize_t) {
  if (!scopeFinish(reinterpret_cast<PhaseScopeObject*>(self))) return nullptr;
  Py_RETURN_FALSE;  // never swallow the body's exception
}

// Python function (scope, fn) -> timed fn, set once by perfcore.timing.
PyObject* scopeDecorator = nullptr;

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

// phase_scope(cls, recorder, phase_id, events=None, stream=None); cls is PhaseScope or a subclass.
py::object makePhaseScope(py::type cls, py::object recorder, int32_t phase, py::object events, py::object stream,
                          bool tagKernels) {
  auto* type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  if (!PyType_IsSubtype(type, &PhaseScopeType)) throw UsageError("phase_scope: cls must subclass PhaseScope");
  PyObject* obj = type->tp_alloc(type, 0);
  if (!obj) throw py::error_already_set();
  auto* s = reinterpret_cast<PhaseScopeObject*>(obj);
  s->recorder = recorder.cast<SpanRecorder*>();
  s->recorderOwner = recorder.inc_ref().ptr();
  s->events = nullptr;
  s->eventsOwner = nullptr;
  s->stream = stream.is_none() ? 0 : stream.cast<uintptr_t>();
  s->phase = phase;
  s->tagKernels = false;
  if (tagKernels) {
#ifdef PERFCORE_WITH_CUDA
    s->tagKernels = true;
#else
    Py_DECREF(obj);
    throw DeviceUnavailableError("kernel tagging needs CUPTI, which this CPU-mode build leaves out");
#endif
  }
  if (!events.is_none()) {
#ifdef PERFCORE_WITH_CUDA
    s->events = events.cast<EventTimer*>();
    s->eventsOwner = events.inc_ref().ptr();
#else
    Py_DECREF(obj);
    throw DeviceUnavailableError("CUDA event timing is not in this CPU-mode build");
#endif
  }
  return py::reinterpret_steal<py::object>(obj);
}


// The Python references an object of ours holds, for the GC (traverse, clear) and dealloc:
// one definition for every type below that holds references.
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

// ---- TimedCall: a callable timed as a phase, for the zero-code hooks of `perfcore run` ----
// It replaces functions such as nn.Module.__call__ or Tensor.to that run many times a step;
// as a Python wrapper each one cost a frame (and, right after an optimizer step has flushed the
// caches, microseconds), so the hot path is here: vectorcall in, vectorcall out, no frame.
//   - Only the outermost hooked call on a thread is timed: a hook entered while another is open
//     on the same thread (a submodule's forward, a .to() inside forward) just calls through.
//   - Until a scope is set, `fallback` is called instead (perfcore sets the scopes when it
//     makes its timer; the fallback is what decides whether and when to make it).
//   - `on_enter`, when set, is called before each timed call (it may raise, e.g. SystemExit
//     for --steps: then nothing is timed and the call is not made).
// Used as a class attribute it binds like a method (a method descriptor: no bound object is
// made for `obj.method(...)` or `obj(...)`).
thread_local int hookDepth = 0;
long long hookErrors = 0;  // changed with the GIL held

void hookError() {
  PyErr_Clear();
  ++hookErrors;
}

struct TimedCallObject {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* wrapped;
  PyObject* scope;     // PhaseScope or nullptr
  PyObject* fallback;  // called while scope is unset
  PyObject* onEnter;   // nullptr or callable()
};

PyObject* timedCallVectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* t = reinterpret_cast<TimedCallObject*>(self);
  if (hookDepth > 0) return PyObject_Vectorcall(t->wrapped, args, nargsf, kwnames);
  if (t->scope == nullptr) return PyObject_Vectorcall(t->fallback, args, nargsf, kwnames);
  if (t->onEnter) {
    PyObject* r = PyObject_CallNoArgs(t->onEnter);
    if (!r) return nullptr;
    Py_DECREF(r);
  }
  auto* s = reinterpret_cast<PhaseScopeObject*>(t->scope);
  Py_INCREF(t->scope);  // a hook re-armed during the call must not free the scope under us
  // Timing never breaks the user's call: a phase that cannot open or close is counted
  // (hook_errors(), reported by perfcore run) and the call goes on untimed.
  const bool timed = scopeBegin(s);
  if (!timed) hookError();
  ++hookDepth;
  PyObject* result = PyObject_Vectorcall(t->wrapped, args, nargsf, kwnames);
  --hookDepth;
  if (timed && result) {
    if (!scopeFinish(s)) hookError();
  } else if (timed) {
    // Close the phase at the exception, keeping the body's exception (not ours) in flight.
    PyObject *tp, *val, *tb;
    PyErr_Fetch(&tp, &val, &tb);
    if (!scopeFinish(s)) hookError();
    PyErr_Restore(tp, val, tb);
  }
  Py_DECREF(reinterpret_cast<PyObject*>(s));
  return result;
}

PyObject* timedCallDescrGet(PyObject* self, PyObject* obj, PyObject*) {
  if (obj == nullptr || obj == Py_None) {
    Py_INCREF(self);
    return self;
  }
  return PyMethod_New(self, obj);
}

using TimedCallRefs = HeldRefs<TimedCallObject, &TimedCallObject::wrapped, &TimedCallObject::scope,
                                &TimedCallObject::fallback, &TimedCallObject::onEnter>;

// TimedCall(wrapped, fallback=None): fallback defaults to wrapped (untimed until armed).
PyObject* timedCallNew(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"wrapped", "fallback", nullptr};
  PyObject* wrapped = nullptr;
  PyObject* fallback = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:TimedCall", const_cast<char**>(kw), &wrapped, &fallback)) {
    return nullptr;
  }
  if (!PyCallable_Check(wrapped) || (fallback != Py_None && !PyCallable_Check(fallback))) {
    PyErr_SetString(PyExc_TypeError, "TimedCall(wrapped, fallback=None): both must be callable");
    return nullptr;
  }
  auto* t = reinterpret_cast<TimedCallObject*>(type->tp_alloc(type, 0));
  if (!t) return nullptr;
  t->vectorcall = timedCallVectorcall;
  t->wrapped = Py_NewRef(wrapped);
  t->fallback = Py_NewRef(fallback == Py_None ? wrapped : fallback);
  t->scope = nullptr;
  t->onEnter = nullptr;
  return reinterpret_cast<PyObject*>(t);
}

// An optional reference: nullptr inside, None outside.
PyObject* getOptional(PyObject* slot) { return Py_NewRef(slot ? slot : Py_None); }

void setOptional(PyObject*& slot, PyObject* value) {
  Py_XSETREF(slot, (value == nullptr || value == Py_None) ? nullptr : Py_NewRef(value));
}

PyObject* timedCallGetScope(PyObject* self, void*) {
  return getOptional(reinterpret_cast<TimedCallObject*>(self)->scope);
}

int timedCallSetScope(PyObject* self, PyObject* value, void*) {
  if (value != nullptr && value != Py_None && !PyObject_TypeCheck(value, &PhaseScopeType)) {
    PyErr_SetString(PyExc_TypeError, "TimedCall.scope must be a PhaseScope or None");
    return -1;
  }
  setOptional(reinterpret_cast<TimedCallObject*>(self)->scope, value);
  return 0;
}

PyObject* timedCallGetOnEnter(PyObject* self, void*) {
  return getOptional(reinterpret_cast<TimedCallObject*>(self)->onEnter);
}

int timedCallSetOnEnter(PyObject* self, PyObject* value, void*) {
  if (value != nullptr && value != Py_None && !PyCallable_Check(value)) {
    PyErr_SetString(PyExc_TypeError, "TimedCall.on_enter must be callable or None");
    return -1;
  }
  setOptional(reinterpret_cast<TimedCallObject*>(self)->onEnter, value);
  return 0;
}

PyObject* timedCallGetWrapped(PyObject* self, void*) {
  return Py_NewRef(reinterpret_cast<TimedCallObject*>(self)->wrapped);
}

// __name__, __qualname__, __doc__, __module__ (and anything else the type lacks) come from the
// wrapped callable, so introspection (inspect.signature follows __wrapped__) sees the original.
PyObject* timedCallGetAttro(PyObject* self, PyObject* name) {
  static const char* const forwarded[] = {"__doc__", "__name__", "__qualname__", "__module__"};
  for (const char* f : forwarded) {
    if (PyUnicode_CompareWithASCIIString(name, f) == 0) {
      return PyObject_GetAttr(reinterpret_cast<TimedCallObject*>(self)->wrapped, name);
    }
  }
  PyObject* r = PyObject_GenericGetAttr(self, name);
  if (r || !PyErr_ExceptionMatches(PyExc_AttributeError)) return r;
  PyErr_Clear();
  return PyObject_GetAttr(reinterpret_cast<TimedCallObject*>(self)->wrapped, name);
}

PyObject* timedCallRepr(PyObject* self) {
  return PyUnicode_FromFormat("<perfcore.TimedCall of %R>", reinterpret_cast<TimedCallObject*>(self)->wrapped);
}

PyObject* hookDepthNow(PyObject*, PyObject*) { return PyLong_FromLong(hookDepth); }

PyObject* hookErrorsNow(PyObject*, PyObject*) { return PyLong_FromLongLong(hookErrors); }

PyMethodDef hookFunctions[] = {
    {"hook_depth", hookDepthNow, METH_NOARGS, "How many perfcore hooks are open on the calling thread."},
    {"hook_errors", hookErrorsNow, METH_NOARGS, "Phases the hooks could not open or close (left untimed)."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef timedCallGetSet[] = {
    {"scope", timedCallGetScope, timedCallSetScope, "PhaseScope timing each outermost call, or None.", nullptr},
    {"on_enter", timedCallGetOnEnter, timedCallSetOnEnter, "Called before each timed call, or None.", nullptr},
    {"__wrapped__", timedCallGetWrapped, nullptr, "The original callable.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject TimedCallType = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "perfcore._C.TimedCall";
  t.tp_basicsize = sizeof(TimedCallObject);
  t.tp_dealloc = TimedCallRefs::dealloc;
  t.tp_vectorcall_offset = offsetof(TimedCallObject, vectorcall);
  t.tp_call = PyVectorcall_Call;
  t.tp_repr = timedCallRepr;
  t.tp_getattro = timedCallGetAttro;
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR;
  t.tp_doc = "TimedCall(wrapped, fallback=None): wrapped, timed as a phase when it is the outermost hook.";
  t.tp_traverse = TimedCallRefs::traverse;
  t.tp_clear = TimedCallRefs::clear;
  t.tp_getset = timedCallGetSet;
  t.tp_descr_get = timedCallDescrGet;
  t.tp_new = timedCallNew;
  return t;
}();

// ---- StepClock: the optimizer hooks of `perfcore run`, and the step boundary they make ----
// torch calls a global pre- and post-step hook around every optimizer.step(). As Python
// functions these were the costliest part of the zero-code hooks (five Python frames a step,
// right after an optimizer step has flushed the caches: ~20 us on a 2 ms CPU step). Here
// `pre` opens the optimizer phase (the TimedCall rule: only when no other hook is open on the
// thread), `post` closes it and, for the first optimizer that steps (the clock), ends the step:
// the boundary is appended to `boundaries` (the StepTimer's list), and Python is called back
// only on the steps that need it: (n - 1) % every == 0, n % compact_every == 0, n >= stop_at.
struct StepClockObject {
  PyObject_HEAD
  PyObject* scope;       // PhaseScope of the optimizer phase, or nullptr (disarmed)
  PyObject* boundaries;  // list of boundary ns
  PyObject* callback;    // callable(n) or nullptr
  uintptr_t inOpt;       // the optimizer whose step is being timed (by identity), or 0
  uintptr_t clockOpt;    // the optimizer whose steps end a step, or 0 until one has stepped
  long long every, compactEvery, stopAt, skipped;
};

PyObject* stepClockPre(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  auto* c = reinterpret_cast<StepClockObject*>(self);
  if (nargs < 1) {
    PyErr_SetString(PyExc_TypeError, "StepClock.pre(optimizer, args, kwargs)");
    return nullptr;
  }
  if (c->scope == nullptr || hookDepth > 0) Py_RETURN_NONE;  // e.g. an optimizer stepped in forward
  if (!scopeBegin(reinterpret_cast<PhaseScopeObject*>(c->scope))) {
    hookError();  // never fail the user's optimizer.step(): this one goes untimed
    Py_RETURN_NONE;
  }
  ++hookDepth;
  c->inOpt = reinterpret_cast<uintptr_t>(args[0]);
  Py_RETURN_NONE;
}

PyObject* stepClockPost(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  auto* c = reinterpret_cast<StepClockObject*>(self);
  if (nargs < 1) {
    PyErr_SetString(PyExc_TypeError, "StepClock.post(optimizer, args, kwargs)");
    return nullptr;
  }
  const auto opt = reinterpret_cast<uintptr_t>(args[0]);
  if (c->inOpt != opt || c->scope == nullptr) Py_RETURN_NONE;
  c->inOpt = 0;
  auto* s = reinterpret_cast<PhaseScopeObject*>(c->scope);
  if (hookDepth > 0) --hookDepth;
  if (!scopeFinish(s)) hookError();  // the boundary below then finds the phase open and skips
  if (c->clockOpt == 0) c->clockOpt = opt;
  if (opt != c->clockOpt) Py_RETURN_NONE;
  const int64_t t = s->recorder->stepBoundary();
  if (t < 0) {  // a phase is still open: the optimizer stepped inside another phase, not a loop step
    ++c->skipped;
    Py_RETURN_NONE;
  }
  PyObject* ts = PyLong_FromLongLong(t);
  if (!ts || PyList_Append(c->boundaries, ts) < 0) {
    Py_XDECREF(ts);
    return nullptr;
  }
  Py_DECREF(ts);
  const long long n = PyList_GET_SIZE(c->boundaries);
  if (c->callback && ((n - 1) % c->every == 0 || n % c->compactEvery == 0 || n >= c->stopAt)) {
    PyObject* nobj = PyLong_FromLongLong(n);
    if (!nobj) return nullptr;
    PyObject* r = PyObject_CallOneArg(c->callback, nobj);  // may raise SystemExit (--steps reached)
    Py_DECREF(nobj);
    if (!r) return nullptr;
    Py_DECREF(r);
  }
  Py_RETURN_NONE;
}

using StepClockRefs = HeldRefs<StepClockObject, &StepClockObject::scope, &StepClockObject::boundaries,
                                &StepClockObject::callback>;

PyObject* stepClockNew(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"boundaries", nullptr};
  PyObject* boundaries = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!:StepClock", const_cast<char**>(kw), &PyList_Type, &boundaries)) {
    return nullptr;
  }
  auto* c = reinterpret_cast<StepClockObject*>(type->tp_alloc(type, 0));
  if (!c) return nullptr;
  c->boundaries = Py_NewRef(boundaries);
  c->scope = nullptr;
  c->callback = nullptr;
  c->inOpt = c->clockOpt = 0;
  c->every = 1;
  c->compactEvery = 1024;
  c->stopAt = PY_LLONG_MAX;
  c->skipped = 0;
  return reinterpret_cast<PyObject*>(c);
}

// arm(scope, boundaries, callback, every, compact_every, stop_at): a new timer's phase and list.
PyObject* stepClockArm(PyObject* self, PyObject* args) {
  auto* c = reinterpret_cast<StepClockObject*>(self);
  PyObject *scope, *boundaries, *callback;
  long long every, compactEvery, stopAt;
  if (!PyArg_ParseTuple(args, "O!O!OLLL:arm", &PhaseScopeType, &scope, &PyList_Type, &boundaries, &callback, &every,
                        &compactEvery, &stopAt)) {
    return nullptr;
  }
  if (every < 1 || compactEvery < 1 || (callback != Py_None && !PyCallable_Check(callback))) {
    PyErr_SetString(PyExc_ValueError, "arm: every and compact_every must be >= 1, callback callable or None");
    return nullptr;
  }
  setOptional(c->scope, scope);
  Py_XSETREF(c->boundaries, Py_NewRef(boundaries));
  setOptional(c->callback, callback);
  c->every = every;
  c->compactEvery = compactEvery;
  c->stopAt = stopAt;
  c->inOpt = c->clockOpt = 0;
  c->skipped = 0;
  Py_RETURN_NONE;
}

PyObject* stepClockDisarm(PyObject* self, PyObject*) {
  auto* c = reinterpret_cast<StepClockObject*>(self);
  Py_CLEAR(c->scope);
  Py_CLEAR(c->callback);
  c->inOpt = 0;
  Py_RETURN_NONE;
}

PyObject* stepClockClocked(PyObject* self, void*) {
  return PyBool_FromLong(reinterpret_cast<StepClockObject*>(self)->clockOpt != 0);
}

PyObject* stepClockSkipped(PyObject* self, void*) {
  return PyLong_FromLongLong(reinterpret_cast<StepClockObject*>(self)->skipped);
}

PyObject* stepClockArmed(PyObject* self, void*) {
  return PyBool_FromLong(reinterpret_cast<StepClockObject*>(self)->scope != nullptr);
}

PyMethodDef stepClockMethods[] = {
    {"pre", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(stepClockPre)), METH_FASTCALL,
     "Global optimizer pre-step hook: opens the optimizer phase."},
    {"post", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(stepClockPost)), METH_FASTCALL,
     "Global optimizer post-step hook: closes the phase; the clock optimizer ends the step."},
    {"arm", stepClockArm, METH_VARARGS, "arm(scope, boundaries, callback, every, compact_every, stop_at)"},
    {"disarm", stepClockDisarm, METH_NOARGS, "Stop timing: pre and post do nothing until armed again."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef stepClockGetSet[] = {
    {"clocked", stepClockClocked, nullptr, "Whether an optimizer has become the step clock.", nullptr},
    {"skipped", stepClockSkipped, nullptr, "Clock steps made inside another phase (not loop steps).", nullptr},
    {"armed", stepClockArmed, nullptr, "Whether a scope is set.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject StepClockType = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "perfcore._C.StepClock";
  t.tp_basicsize = sizeof(StepClockObject);
  t.tp_dealloc = StepClockRefs::dealloc;
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  t.tp_doc = "StepClock(boundaries): optimizer pre/post hooks that time the optimizer and end steps.";
  t.tp_traverse = StepClockRefs::traverse;
  t.tp_clear = StepClockRefs::clear;
  t.tp_methods = stepClockMethods;
  t.tp_getset = stepClockGetSet;
  t.tp_new = stepClockNew;
  return t;
}();

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "perfcore native core (see docs/ARCHITECTURE.md)";
  registerExceptions();
  if (PyType_Ready(&PhaseScopeType) < 0) throw py::error_already_set();
  Py_INCREF(&PhaseScopeType);
  m.add_object("PhaseScope", reinterpret_cast<PyObject*>(&PhaseScopeType));
  if (PyType_Ready(&TimedCallType) < 0) throw py::error_already_set();
  Py_INCREF(&TimedCallType);
  m.add_object("TimedCall", reinterpret_cast<PyObject*>(&TimedCallType));
  if (PyType_Ready(&StepClockType) < 0) throw py::error_already_set();
  Py_INCREF(&StepClockType);
  m.add_object("StepClock", reinterpret_cast<PyObject*>(&StepClockType));
  if (PyModule_AddFunctions(m.ptr(), hookFunctions) < 0) throw py::error_already_set();

#ifdef PERFCORE_WITH_CUDA
  m.attr("CUDA_COMPILED") = true;
  m.attr("CUPTI_COMPILED") = true;
#else
  m.attr("CUDA_COMPILED") = false;
  m.attr("CUPTI_COMPILED") = false;
#endif

  m.def("phase_scope", &makePhaseScope, py::arg("cls"), py::arg("recorder"), py::arg("phase_id"),
        py::arg("events") = py::none(), py::arg("stream") = py::none(), py::arg("tag_kernels") = false);
  m.def("_set_scope_decorator", [](py::object fn) { scopeDecorator = fn.inc_ref().ptr(); },
        "Registers fn(scope, f) -> timed f, used by `@scope` (perfcore.timing does this once).");
  m.def("now_ns", &nowNs, "The perfcore clock (CLOCK_MONOTONIC ns; same as time.perf_counter_ns).");
  m.def("thread_id", &currentThreadId, "OS id of the calling thread.");

  py::class_<SpanRecorder>(m, "SpanRecorder")
      .def(py::init<>())
      .def("begin", &SpanRecorder::begin, py::arg("phase_id"))
      .def("end", &SpanRecorder::end, py::arg("phase_id"), "Close the innermost phase; returns its ns.")
      .def("record", &SpanRecorder::record, py::arg("phase_id"), py::arg("start_ns"), py::arg("end_ns"))
      .def_property("step", &SpanRecorder::step, &SpanRecorder::setStep)
      .def("boundary", &SpanRecorder::stepBoundary,
           "End the step: its time in ns, or -1 (and no change) if a phase is open on this thread.")
      .def("open_phases", &SpanRecorder::openPhases, "Phases open on the calling thread, outermost first.")
      .def("drain", [](SpanRecorder& r) { return tableToDict(r.drain()); }, "New spans since the last drain, as columns.")
      .def_property_readonly("dropped", &SpanRecorder::dropped)
      .def_property_readonly("thread_count", &SpanRecorder::threadCount);

#ifdef PERFCORE_WITH_CUDA
  m.def("device_count", []() {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return std::make_pair(0, std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err));
    }
    return std::make_pair(n, std::string());
  }, "(count, reason): reason says why count is 0.");

  py::class_<EventTimer>(m, "EventTimer")
      .def(py::init<size_t>(), py::arg("max_pending") = 8192)
      .def("begin", [](EventTimer& t, int32_t phase, int64_t step, py::object stream) {
        t.begin(phase, step, streamArg(stream));
      }, py::arg("phase_id"), py::arg("step"), py::arg("stream") = py::none())
      .def("end", [](EventTimer& t, int32_t phase, py::object stream) { t.end(phase, streamArg(stream)); },
           py::arg("phase_id"), py::arg("stream") = py::none())
      .def("resolve", [](EventTimer& t, bool wait) {
        EventColumns cols;
        {
          py::gil_scoped_release nogil;
          cols = t.resolve(wait);
        }
        return tableToDict(std::move(cols));
      }, py::arg("wait") = false)
      .def_property_readonly("pending", &EventTimer::pending)
      .def_property_readonly("events_created", &EventTimer::eventsCreated);

  m.def("launch_empty", [](int64_t count, py::object stream) { launchEmpty(count, streamArg(stream)); },
        py::arg("count") = 1, py::arg("stream") = py::none());
  m.def("launch_spin", [](int64_t ns, py::object stream) { launchSpin(ns, streamArg(stream)); },
        py::arg("duration_ns"), py::arg("stream") = py::none());
  m.def("measure_launch_overhead", [](int64_t count, py::object stream) {
    LaunchOverhead o;
    {
      uintptr_t s = streamArg(stream);
      py::gil_scoped_release nogil;
      o = measureLaunchOverhead(count, s);
    }
    py::dict d;
    d["host_ns_per_launch"] = o.hostNsPerLaunch;
    d["gpu_ns_per_kernel"] = o.gpuNsPerKernel;
    return d;
  }, py::arg("count") = 1000, py::arg("stream") = py::none());

  m.def("measure_copies", [](std::vector<int64_t> sizes, const std::string& direction, bool pinned, int repeats,
                             py::object stream) {
    CopyDirection dir;
    if (direction == "h2d") dir = CopyDirection::kHostToDevice;
    else if (direction == "d2h") dir = CopyDirection::kDeviceToHost;
    else throw UsageError("direction must be 'h2d' or 'd2h', got '" + direction + "'");
    CopyColumns cols;
    {
      uintptr_t s = streamArg(stream);
      py::gil_scoped_release nogil;
      cols = measureCopies(sizes, dir, pinned, repeats, s);
    }
    return tableToDict(std::move(cols));
  }, py::arg("sizes"), py::arg("direction"), py::arg("pinned"), py::arg("repeats") = 10,
     py::arg("stream") = py::none());

  m.def("cupti_compiled_version", &cuptiCompiledVersion);
  m.def("cupti_loaded_version", &cuptiLoadedVersion);
  m.def("cupti_start", [](size_t bufferBytes, size_t maxBuffers) {
    ActivityTracer::instance().start(bufferBytes, maxBuffers);
  }, py::arg("buffer_bytes") = 8u << 20, py::arg("max_buffers") = 64);
  m.def("cupti_collect", []() {
    ActivityColumns cols;
    {
      py::gil_scoped_release nogil;
      cols = ActivityTracer::instance().collect();
    }
    return activityToDict(std::move(cols));
  });
  m.def("cupti_stop", []() {
    ActivityColumns cols;
    {
      py::gil_scoped_release nogil;
      cols = ActivityTracer::instance().stop();
    }
    return activityToDict(std::move(cols));
  });
  m.def("cupti_active", []() { return ActivityTracer::instance().active(); });
  m.def("cupti_stats", []() {
    TracerStats s = ActivityTracer::instance().stats();
    py::dict d;
    d["buffers_allocated"] = s.buffersAllocated;
    d["buffers_completed"] = s.buffersCompleted;
    d["buffers_denied"] = s.buffersDenied;
    d["dropped_records"] = s.droppedRecords;
    d["records"] = s.records;
    d["timestamp_callback"] = s.timestampCallback;
    d["clock_offset_ns"] = s.clockOffsetNs;
    return d;
  });
  m.def("cupti_push_external_id", [](uint64_t id) { ActivityTracer::instance().pushExternalId(id); });
  m.def("cupti_pop_external_id", []() { ActivityTracer::instance().popExternalId(); });

  py::class_<FakeActivityBuffer>(m, "_FakeActivityBuffer", "Test-only: CUPTI records built in memory.")
      .def(py::init<>())
      .def("add_kernel", &FakeActivityBuffer::addKernel, py::arg("start_ns"), py::arg("end_ns"), py::arg("device_id"),
           py::arg("stream_id"), py::arg("correlation_id"), py::arg("name"), py::arg("grid_x"), py::arg("block_x"))
      .def("add_memcpy", &FakeActivityBuffer::addMemcpy, py::arg("start_ns"), py::arg("end_ns"), py::arg("size_bytes"),
           py::arg("copy_kind"), py::arg("src_kind"), py::arg("dst_kind"), py::arg("device_id"), py::arg("stream_id"),
           py::arg("correlation_id"))
      .def("add_memset", &FakeActivityBuffer::addMemset, py::arg("start_ns"), py::arg("end_ns"), py::arg("size_bytes"),
           py::arg("value"), py::arg("device_id"), py::arg("stream_id"), py::arg("correlation_id"))
      .def("add_sync", &FakeActivityBuffer::addSync, py::arg("start_ns"), py::arg("end_ns"), py::arg("sync_type"),
           py::arg("stream_id"), py::arg("correlation_id"))
      .def("add_external_correlation", &FakeActivityBuffer::addExternalCorrelation, py::arg("external_id"),
           py::arg("correlation_id"))
      .def("add_overhead", &FakeActivityBuffer::addOverhead, py::arg("start_ns"), py::arg("end_ns"),
           py::arg("overhead_kind"))
      .def_property_readonly("size_bytes", &FakeActivityBuffer::sizeBytes)
      .def("decode", [](FakeActivityBuffer& b) { return activityToDict(b.decode()); });
#endif
}
