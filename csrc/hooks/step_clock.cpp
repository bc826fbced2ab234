// StepClock: the optimizer hooks of `perfcore run`, and the step boundary they make.
// torch calls a global pre- and post-step hook around every optimizer.step(). As Python
// functions these were the costliest part of the zero-code hooks (five Python frames a step,
// right after an optimizer step has flushed the caches: ~20 us on a 2 ms CPU step). Here
// `pre` opens the optimizer phase (the TimedCall rule: only when no other hook is open on the
// thread), `post` closes it and, for the first optimizer that steps (the clock), ends the step:
// the boundary is appended to `ends` (the StepTimer's StepEnds), and Python is called back
// only on the steps that need it: (n - 1) % every == 0, n % compact_every == 0, n >= stop_at.
#include "hooks.h"

namespace perfcore {

namespace {

struct StepClockObject {
  PyObject_HEAD
  PyObject* scope;       // PhaseScope of the optimizer phase, or nullptr (disarmed)
  PyObject* ends;        // StepEnds the step ends go to, or nullptr (the optimizer is timed, ends no step)
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
  if (c->ends == nullptr) Py_RETURN_NONE;
  auto* ends = reinterpret_cast<StepEndsObject*>(c->ends);
  if (!stepEndsAppend(ends, t)) {
    hookError();  // out of memory: this boundary is lost, the user's step goes on
    Py_RETURN_NONE;
  }
  const long long n = stepEndsCount(ends);
  if (c->callback && ((n - 1) % c->every == 0 || n % c->compactEvery == 0 || n >= c->stopAt)) {
    PyObject* nobj = PyLong_FromLongLong(n);
    PyObject* r = nobj ? PyObject_CallOneArg(c->callback, nobj) : nullptr;
    Py_XDECREF(nobj);
    if (r) {
      Py_DECREF(r);
    } else if (!PyErr_ExceptionMatches(PyExc_Exception)) {
      return nullptr;  // SystemExit (--steps reached) or KeyboardInterrupt: meant for the program
    } else {
      hookError();  // a failure in perfcore's own upkeep never reaches the user's optimizer.step()
    }
  }
  Py_RETURN_NONE;
}

using StepClockRefs = HeldRefs<StepClockObject, &StepClockObject::scope, &StepClockObject::ends,
                                &StepClockObject::callback>;

PyObject* stepClockNew(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"ends", nullptr};
  PyObject* ends = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:StepClock", const_cast<char**>(kw), &ends)) return nullptr;
  if (ends != Py_None && !PyObject_TypeCheck(ends, &StepEndsType)) {
    PyErr_SetString(PyExc_TypeError, "StepClock(ends): a StepEnds or None");
    return nullptr;
  }
  auto* c = reinterpret_cast<StepClockObject*>(type->tp_alloc(type, 0));
  if (!c) return nullptr;
  c->ends = nullptr;
  setOptional(c->ends, ends);
  c->scope = nullptr;
  c->callback = nullptr;
  c->inOpt = c->clockOpt = 0;
  c->every = 1;
  c->compactEvery = 1024;
  c->stopAt = PY_LLONG_MAX;
  c->skipped = 0;
  return reinterpret_cast<PyObject*>(c);
}

// arm(scope, ends, callback, every, compact_every, stop_at): a new timer's phase and step ends
// (None: the optimizer is timed but ends no step).
PyObject* stepClockArm(PyObject* self, PyObject* args) {
  auto* c = reinterpret_cast<StepClockObject*>(self);
  PyObject *scope, *ends, *callback;
  long long every, compactEvery, stopAt;
  if (!PyArg_ParseTuple(args, "O!OOLLL:arm", &PhaseScopeType, &scope, &ends, &callback, &every, &compactEvery,
                        &stopAt)) {
    return nullptr;
  }
  if (ends != Py_None && !PyObject_TypeCheck(ends, &StepEndsType)) {
    PyErr_SetString(PyExc_TypeError, "arm: ends must be a StepEnds or None");
    return nullptr;
  }
  if (every < 1 || compactEvery < 1 || (callback != Py_None && !PyCallable_Check(callback))) {
    PyErr_SetString(PyExc_ValueError, "arm: every and compact_every must be >= 1, callback callable or None");
    return nullptr;
  }
  setOptional(c->scope, scope);
  setOptional(c->ends, ends);
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
    {"arm", stepClockArm, METH_VARARGS, "arm(scope, ends, callback, every, compact_every, stop_at)"},
    {"disarm", stepClockDisarm, METH_NOARGS, "Stop timing: pre and post do nothing until armed again."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef stepClockGetSet[] = {
    {"clocked", stepClockClocked, nullptr, "Whether an optimizer has become the step clock.", nullptr},
    {"skipped", stepClockSkipped, nullptr, "Clock steps made inside another phase (not loop steps).", nullptr},
    {"armed", stepClockArmed, nullptr, "Whether a scope is set.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

}  // namespace

PyTypeObject StepClockType = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "perfcore._C.StepClock";
  t.tp_basicsize = sizeof(StepClockObject);
  t.tp_dealloc = StepClockRefs::dealloc;
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  t.tp_doc = "StepClock(ends=None): optimizer pre/post hooks that time the optimizer and end steps.";
  t.tp_traverse = StepClockRefs::traverse;
  t.tp_clear = StepClockRefs::clear;
  t.tp_methods = stepClockMethods;
  t.tp_getset = stepClockGetSet;
  t.tp_new = stepClockNew;
  return t;
}();


}  // namespace perfcore
