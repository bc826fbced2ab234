// TimedCall: a callable timed as a phase, for the zero-code hooks of `perfcore run`.
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
#include <cstddef>

#include "hooks.h"

namespace perfcore {

namespace {

struct TimedCallObject {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* wrapped;
  PyObject* scope;     // PhaseScope or nullptr
  PyObject* fallback;  // called while scope is unset
  PyObject* onEnter;   // nullptr or callable()
  // Calls that went straight through (inside another hook, or before a scope was set): each still
  // pays this call layer, which the run's overhead counts at its measured cost.
  unsigned long long passed;
};

PyObject* timedCallVectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* t = reinterpret_cast<TimedCallObject*>(self);
  if (hookDepth > 0) {
    ++t->passed;
    return PyObject_Vectorcall(t->wrapped, args, nargsf, kwnames);
  }
  if (t->scope == nullptr) {
    ++t->passed;
    return PyObject_Vectorcall(t->fallback, args, nargsf, kwnames);
  }
  if (t->onEnter) {
    PyObject* r = PyObject_CallNoArgs(t->onEnter);
    if (r) {
      Py_DECREF(r);
    } else if (!PyErr_ExceptionMatches(PyExc_Exception)) {
      return nullptr;  // SystemExit (--steps reached) or KeyboardInterrupt: meant for the program
    } else {
      hookError();  // perfcore's own failure: counted, and the user's call goes on
    }
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
  t->passed = 0;
  return reinterpret_cast<PyObject*>(t);
}

// An optional reference: nullptr inside, None outside.
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
  PyObject* r = nullptr;
  if (wrappedNameAttr(reinterpret_cast<TimedCallObject*>(self)->wrapped, name, &r)) return r;
  r = PyObject_GenericGetAttr(self, name);
  if (r || !PyErr_ExceptionMatches(PyExc_AttributeError)) return r;
  PyErr_Clear();
  return PyObject_GetAttr(reinterpret_cast<TimedCallObject*>(self)->wrapped, name);
}

PyObject* timedCallGetPassed(PyObject* self, void*) {
  return PyLong_FromUnsignedLongLong(reinterpret_cast<TimedCallObject*>(self)->passed);
}

PyObject* timedCallRepr(PyObject* self) {
  return PyUnicode_FromFormat("<perfcore.TimedCall of %R>", reinterpret_cast<TimedCallObject*>(self)->wrapped);
}


PyGetSetDef timedCallGetSet[] = {
    {"scope", timedCallGetScope, timedCallSetScope, "PhaseScope timing each outermost call, or None.", nullptr},
    {"on_enter", timedCallGetOnEnter, timedCallSetOnEnter, "Called before each timed call, or None.", nullptr},
    {"__wrapped__", timedCallGetWrapped, nullptr, "The original callable.", nullptr},
    {"passed", timedCallGetPassed, nullptr, "Calls that went straight through, untimed (inside another hook, or unarmed).",
     nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

}  // namespace

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

}  // namespace perfcore
