// StepClock: the optimizer hooks of `perfcore run`, and the step boundary they make.
// torch calls a global pre- and post-step hook around every optimizer.step(). As Python
// functions these were the costliest part of the zero-code hooks (five Python frames a step,
// right after an optimizer step has flushed the caches: ~20 us on a 2 ms CPU step). Here
// `pre` opens the optimizer phase (the TimedCall rule: only when no other hook is open on the
// thread), `post` closes it and, for the clock optimizer, ends the step:
// the boundary is appended to `ends` (the StepTimer's StepEnds), and Python is called back
// only on the steps that need it (callback_due.h).
// A step given a closure (`optimizer.step(closure)`: LBFGS, PyTorch Lightning, which runs
// training_step and backward inside it) gets the closure back wrapped in a StepClosure: while it
// runs, the optimizer phase steps aside (closed, the hook depth back to zero), so the forward,
// backward, loads and copies inside are timed as themselves and the optimizer keeps only its own
// time; the step still ends at the optimizer step's end. A step without a closure pays two size
// checks for this.
// Which optimizer is the clock follows whichever is stepping (clock_follower.h). The open step
// (which optimizer, open, paused) is per thread: threads that each step their own optimizer at
// once never close one another's phase.
#include <cstddef>
#include <new>

#include "../clock.h"
#include "callback_due.h"
#include "clock_follower.h"
#include "hooks.h"

namespace perfcore {

namespace {

struct StepClockObject {
  PyObject_HEAD
  PyObject* scope;       // PhaseScope of the optimizer phase, or nullptr (disarmed)
  PyObject* ends;        // StepEnds the step ends go to, or nullptr (the optimizer is timed, ends no step)
  PyObject* callback;    // callable(n) or nullptr
  ClockFollower follow;  // which optimizer's steps end a step
  CallbackDue callbackDue;  // when Python is called back
  long long skipped;
  unsigned long long generation;  // bumped by arm/disarm: a thread's open step from before is dropped
};

// The step open on this thread: whose clock, of which arming, and which optimizer.
struct OpenStep {
  const void* clock = nullptr;
  unsigned long long generation = 0;
  uintptr_t inOpt = 0;  // the optimizer whose step is being timed (by identity), or 0
  bool open = false;    // the optimizer phase of inOpt's step is open (not stepped aside for its closure)
  bool paused = false;  // that step's closure is running
};
thread_local OpenStep tOpen;

OpenStep& openStep(StepClockObject* c) {
  if (tOpen.clock != c || tOpen.generation != c->generation) {
    tOpen = OpenStep{};
    tOpen.clock = c;
    tOpen.generation = c->generation;
  }
  return tOpen;
}

// The closure of a timed optimizer step: while it runs, the optimizer phase is closed and the
// thread's hook depth is what it was outside the step, then both are restored.
struct StepClosureObject {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* clock;    // the StepClock that opened the step
  PyObject* closure;  // the user's closure
  uintptr_t opt;      // the optimizer whose step it belongs to
};

PyObject* stepClosureVectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* w = reinterpret_cast<StepClosureObject*>(self);
  auto* c = reinterpret_cast<StepClockObject*>(w->clock);
  OpenStep& o = openStep(c);
  // Only the step's own closure, called by the step itself (depth 1: the clock's), steps aside.
  if (o.inOpt != w->opt || !o.open || o.paused || hookDepth != 1 || c->scope == nullptr) {
    return PyObject_Vectorcall(w->closure, args, nargsf, kwnames);
  }
  PyObject* scope = Py_NewRef(c->scope);  // a re-arm during the closure must not free it under us
  auto* s = reinterpret_cast<PhaseScopeObject*>(scope);
  if (!scopeFinish(s)) hookError();
  o.open = false;
  o.paused = true;
  --hookDepth;
  PyObject* result = PyObject_Vectorcall(w->closure, args, nargsf, kwnames);
  OpenStep& after = openStep(c);  // a re-arm meanwhile starts this thread's state afresh
  after.paused = false;
  if (result == nullptr || after.inOpt != w->opt || c->scope != scope) {
    // The closure raised (the step ends with it and no post hook comes), or the clock was re-armed
    // or disarmed meanwhile: the step is given up, nothing stays open on this thread.
    if (after.inOpt == w->opt) after.inOpt = 0;
    Py_DECREF(scope);
    return result;
  }
  ++hookDepth;
  if (scopeBegin(s)) {
    after.open = true;
  } else {
    hookError();  // the rest of the step goes untimed; post still ends it
  }
  Py_DECREF(scope);
  return result;
}

using StepClosureRefs = HeldRefs<StepClosureObject, &StepClosureObject::clock, &StepClosureObject::closure>;

PyObject* stepClosureWrapped(PyObject* self, void*) {
  return Py_NewRef(reinterpret_cast<StepClosureObject*>(self)->closure);
}

PyGetSetDef stepClosureGetSet[] = {
    {"__wrapped__", stepClosureWrapped, nullptr, "The user's closure.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};


// Where the step's closure is in torch's (args, kwargs) of optimizer.step (args start with the
// optimizer itself): a borrowed reference, or nullptr when the step has none.
PyObject* findClosure(PyObject* opt, PyObject* args, PyObject* kwargs, Py_ssize_t* index) {
  *index = -1;
  // step(self, closure): positionally only after the optimizer itself, as torch passes them.
  if (PyTuple_Check(args) && PyTuple_GET_SIZE(args) > 1 && PyTuple_GET_ITEM(args, 0) == opt) {
    *index = 1;
    return PyTuple_GET_ITEM(args, 1);
  }
  if (PyDict_Check(kwargs) && PyDict_GET_SIZE(kwargs) > 0) {
    static PyObject* key = PyUnicode_InternFromString("closure");
    if (key) return PyDict_GetItem(kwargs, key);  // borrowed; never raises
  }
  return nullptr;
}

// (args, kwargs) with the closure replaced by a StepClosure, for torch to call the step with;
// nullptr (no error set) when it cannot be made: the step then runs as the user wrote it.
PyObject* withStepClosure(PyObject* clock, PyObject* opt, PyObject* args, PyObject* kwargs, PyObject* closure,
                          Py_ssize_t index) {
  auto* w = PyObject_GC_New(StepClosureObject, &StepClosureType);
  if (!w) {
    PyErr_Clear();
    return nullptr;
  }
  w->vectorcall = stepClosureVectorcall;
  w->clock = Py_NewRef(clock);
  w->closure = Py_NewRef(closure);
  w->opt = reinterpret_cast<uintptr_t>(opt);
  PyObject_GC_Track(reinterpret_cast<PyObject*>(w));
  PyObject* wrapped = reinterpret_cast<PyObject*>(w);
  PyObject* out = nullptr;
  if (index >= 0) {
    // A new tuple (a full slice of a tuple is the tuple itself): the user's stays untouched.
    const Py_ssize_t n = PyTuple_GET_SIZE(args);
    PyObject* a = PyTuple_New(n);
    if (a) {
      for (Py_ssize_t i = 0; i < n; ++i) {
        PyTuple_SET_ITEM(a, i, i == index ? wrapped : Py_NewRef(PyTuple_GET_ITEM(args, i)));
      }
      wrapped = nullptr;  // the tuple took our reference
      out = PyTuple_Pack(2, a, kwargs);
      Py_DECREF(a);
    }
  } else {
    PyObject* kw = PyDict_Copy(kwargs);
    if (kw && PyDict_SetItemString(kw, "closure", wrapped) == 0) out = PyTuple_Pack(2, args, kw);
    Py_XDECREF(kw);
  }
  Py_XDECREF(wrapped);
  if (!out) PyErr_Clear();
  return out;
}

PyObject* stepClockPre(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  auto* c = reinterpret_cast<StepClockObject*>(self);
  if (nargs < 1) {
    PyErr_SetString(PyExc_TypeError, "StepClock.pre(optimizer, args, kwargs)");
    return nullptr;
  }
  OpenStep& o = openStep(c);
  // Not timed: an optimizer stepped in forward, or inside the closure of another step.
  if (c->scope == nullptr || hookDepth > 0 || o.paused) Py_RETURN_NONE;
  if (!scopeBegin(reinterpret_cast<PhaseScopeObject*>(c->scope))) {
    hookError();  // never fail the user's optimizer.step(): this one goes untimed
    Py_RETURN_NONE;
  }
  ++hookDepth;
  o.inOpt = reinterpret_cast<uintptr_t>(args[0]);
  o.open = true;
  if (nargs < 3) Py_RETURN_NONE;
  Py_ssize_t index;
  PyObject* closure = findClosure(args[0], args[1], args[2], &index);
  if (closure == nullptr || closure == Py_None || !PyCallable_Check(closure)) Py_RETURN_NONE;
  PyObject* replaced = withStepClosure(self, args[0], args[1], args[2], closure, index);
  if (replaced) return replaced;
  Py_RETURN_NONE;  // out of memory: the closure's work is timed as optimizer, as it was
}

// Appends t to the clock's step ends; whether the callback is due for the count reached.
// false with nothing appended when out of memory (counted as a hook error).
bool appendEnd(StepClockObject* c, int64_t t, bool* due) {
  auto* ends = reinterpret_cast<StepEndsObject*>(c->ends);
  if (!stepEndsAppend(ends, t)) {
    hookError();  // out of memory: this boundary is lost, the user's step goes on
    return false;
  }
  const long long n = stepEndsCount(ends);
  *due = c->callbackDue.due(n, t) || *due;
  return true;
}

PyObject* stepClockPost(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  auto* c = reinterpret_cast<StepClockObject*>(self);
  if (nargs < 1) {
    PyErr_SetString(PyExc_TypeError, "StepClock.post(optimizer, args, kwargs)");
    return nullptr;
  }
  const auto opt = reinterpret_cast<uintptr_t>(args[0]);
  OpenStep& o = openStep(c);
  if (o.inOpt != opt || c->scope == nullptr) Py_RETURN_NONE;
  o.inOpt = 0;
  auto* s = reinterpret_cast<PhaseScopeObject*>(c->scope);
  if (hookDepth > 0) --hookDepth;
  // A failed close: the boundary below then finds the phase open and skips.
  if (o.open && !scopeFinish(s)) hookError();
  o.open = false;
  int64_t pending = -1;
  const bool clock = c->follow.clockOpt == 0 || c->follow.clockOpt == opt;
  // Where another optimizer's step would end one if it took the clock over later: now, unless a
  // phase is open.
  const int64_t when = clock ? -1 : (s->recorder->openPhases().empty() ? nowNs() : -1);
  if (!c->follow.stepped(opt, when, &pending)) Py_RETURN_NONE;
  if (pending >= 0 && c->ends != nullptr) {
    // The earlier step of the optimizer that took the clock over ended a step as well. No clock
    // step came between, so it is later than every end appended so far.
    s->recorder->setStep(s->recorder->step() + 1);
  }
  const int64_t t = s->recorder->stepBoundary();
  if (t < 0) {  // a phase is still open: the optimizer stepped inside another phase, not a loop step
    ++c->skipped;
    Py_RETURN_NONE;
  }
  if (c->ends == nullptr) Py_RETURN_NONE;
  bool due = false;
  if (pending >= 0 && !appendEnd(c, pending, &due)) Py_RETURN_NONE;
  if (!appendEnd(c, t, &due)) Py_RETURN_NONE;
  if (c->callback && due) {
    PyObject* nobj = PyLong_FromLongLong(stepEndsCount(reinterpret_cast<StepEndsObject*>(c->ends)));
    const int64_t t0 = nowNs();
    PyObject* r = nobj ? PyObject_CallOneArg(c->callback, nobj) : nullptr;
    c->callbackDue.ran(t0, nowNs());
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
  new (&c->follow) ClockFollower();
  new (&c->callbackDue) CallbackDue();
  c->skipped = 0;
  c->generation = 0;
  return reinterpret_cast<PyObject*>(c);
}

// arm(scope, ends, callback, every, compact_every, stop_at, min_gap_ns=0): a new timer's phase and step
// ends (None: the optimizer is timed but ends no step).
PyObject* stepClockArm(PyObject* self, PyObject* args) {
  auto* c = reinterpret_cast<StepClockObject*>(self);
  PyObject *scope, *ends, *callback;
  long long every, compactEvery, stopAt, minGap = 0;
  if (!PyArg_ParseTuple(args, "O!OOLLL|L:arm", &PhaseScopeType, &scope, &ends, &callback, &every, &compactEvery,
                        &stopAt, &minGap)) {
    return nullptr;
  }
  if (ends != Py_None && !PyObject_TypeCheck(ends, &StepEndsType)) {
    PyErr_SetString(PyExc_TypeError, "arm: ends must be a StepEnds or None");
    return nullptr;
  }
  if (every < 1 || compactEvery < 1 || minGap < 0 || (callback != Py_None && !PyCallable_Check(callback))) {
    PyErr_SetString(PyExc_ValueError,
                    "arm: every and compact_every must be >= 1, min_gap_ns >= 0, callback callable or None");
    return nullptr;
  }
  setOptional(c->scope, scope);
  setOptional(c->ends, ends);
  setOptional(c->callback, callback);
  c->callbackDue.arm(every, compactEvery, stopAt, minGap);
  c->follow.reset();
  ++c->generation;
  c->skipped = 0;
  Py_RETURN_NONE;
}

PyObject* stepClockDisarm(PyObject* self, PyObject*) {
  auto* c = reinterpret_cast<StepClockObject*>(self);
  Py_CLEAR(c->scope);
  Py_CLEAR(c->callback);
  ++c->generation;
  c->follow.nOthers = 0;
  Py_RETURN_NONE;
}

PyObject* stepClockClocked(PyObject* self, void*) {
  return PyBool_FromLong(reinterpret_cast<StepClockObject*>(self)->follow.clockOpt != 0);
}

PyObject* stepClockSkipped(PyObject* self, void*) {
  return PyLong_FromLongLong(reinterpret_cast<StepClockObject*>(self)->skipped);
}

PyObject* stepClockHandovers(PyObject* self, void*) {
  return PyLong_FromLongLong(reinterpret_cast<StepClockObject*>(self)->follow.handovers);
}

PyObject* stepClockOthers(PyObject* self, void*) {
  return PyLong_FromLongLong(reinterpret_cast<StepClockObject*>(self)->follow.others);
}

PyObject* stepClockArmed(PyObject* self, void*) {
  return PyBool_FromLong(reinterpret_cast<StepClockObject*>(self)->scope != nullptr);
}

PyMethodDef stepClockMethods[] = {
    {"pre", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(stepClockPre)), METH_FASTCALL,
     "Global optimizer pre-step hook: opens the optimizer phase."},
    {"post", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(stepClockPost)), METH_FASTCALL,
     "Global optimizer post-step hook: closes the phase; the clock optimizer ends the step."},
    {"arm", stepClockArm, METH_VARARGS, "arm(scope, ends, callback, every, compact_every, stop_at, min_gap_ns=0)"},
    {"disarm", stepClockDisarm, METH_NOARGS, "Stop timing: pre and post do nothing until armed again."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef stepClockGetSet[] = {
    {"clocked", stepClockClocked, nullptr, "Whether an optimizer has become the step clock.", nullptr},
    {"skipped", stepClockSkipped, nullptr, "Clock steps made inside another phase (not loop steps).", nullptr},
    {"handovers", stepClockHandovers, nullptr, "How often another optimizer took the clock over.", nullptr},
    {"others", stepClockOthers, nullptr, "Timed steps of other optimizers that ended no step (a GAN's generator).", nullptr},
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

PyTypeObject StepClosureType = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "perfcore._C.StepClosure";
  t.tp_basicsize = sizeof(StepClosureObject);
  t.tp_dealloc = StepClosureRefs::dealloc;
  t.tp_vectorcall_offset = offsetof(StepClosureObject, vectorcall);
  t.tp_call = PyVectorcall_Call;
  // Made only by StepClock.pre.
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_DISALLOW_INSTANTIATION;
  t.tp_doc = "An optimizer step's closure, run with the optimizer phase stepped aside.";
  t.tp_traverse = StepClosureRefs::traverse;
  t.tp_clear = StepClosureRefs::clear;
  t.tp_getset = stepClosureGetSet;
  return t;
}();

}  // namespace perfcore
