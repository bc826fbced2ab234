// SyncLog and CountedCall: the sync-call counter's hot path (perfcore/capture/sync_calls.py).
// A Python wrapper around Tensor.item/.cpu/.tolist/.numpy cost ~5 us a call inside a host-heavy loop
// (a frame, sys._getframe, a tuple key and its dict lookup, two appends); here a counted call is a
// thread check, one frame read, one hash lookup on (code, instruction offset) and two appends.
//   - Only calls on the log's thread are counted, and only while it is armed.
//   - The caller's (code, offset) is resolved to a site id once, by the Python `slow(frame, caller)`
//     (it walks out to the user's frame); it returns sid >= 0 when the caller itself is that user
//     frame, so later calls from it take the map, or -(sid + 1) when the walk went further (not kept:
//     the caller is library code, whose user frame differs call by call).
//   - At `cap` calls counting stops: `dropped` becomes 1 and `on_full()` is called (it takes the
//     wrappers off).
// The map's keys are code addresses: the Python side holds each user code object it resolved (its
// _sites), so an address in the map cannot be reused by another code object while the log lives.
// Python >= 3.11 (PyFrame_GetLasti); before it the Python wrapper is used.
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "../clock.h"
#include "hooks.h"

#if PY_VERSION_HEX >= 0x030B0000

namespace perfcore {

namespace {

struct CallerKey {
  uintptr_t code;
  int lasti;
  bool operator==(const CallerKey& o) const noexcept { return code == o.code && lasti == o.lasti; }
};

struct CallerHash {
  size_t operator()(const CallerKey& k) const noexcept {
    return static_cast<size_t>(k.code * 0x9E3779B97F4A7C15ull) ^ static_cast<size_t>(k.lasti);
  }
};

struct SyncLogObject {
  PyObject_HEAD
  std::vector<int64_t>* t;
  std::vector<int32_t>* site;  // sid * 8 + method index
  std::unordered_map<CallerKey, int32_t, CallerHash>* direct;
  PyObject* slow;    // slow(frame, (id(code), offset)) -> int
  PyObject* onFull;  // on_full() or nullptr
  unsigned long threadId;
  Py_ssize_t cap;
  int dropped;
  bool armed;
};


// Records one call from the current Python frame; errors in perfcore's own code are counted and
// cleared (the user's call goes on).
void countCall(SyncLogObject* log, int index) {
  if (static_cast<Py_ssize_t>(log->t->size()) >= log->cap) {
    // on_full may raise the cap (too few steps seen yet to know calls per step); if it did not, counting
    // ends here and this call goes uncounted.
    if (log->onFull) {
      PyObject* r = PyObject_CallNoArgs(log->onFull);
      if (r) {
        Py_DECREF(r);
      } else {
        hookError();
      }
    }
    if (static_cast<Py_ssize_t>(log->t->size()) >= log->cap) {
      log->armed = false;
      log->dropped = 1;
      return;
    }
  }
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed: the caller's frame (a C call pushes none)
  if (frame == nullptr) return;
  PyCodeObject* code = PyFrame_GetCode(frame);
  const CallerKey key{reinterpret_cast<uintptr_t>(code), PyFrame_GetLasti(frame)};
  Py_DECREF(code);
  int32_t sid;
  auto it = log->direct->find(key);
  if (it != log->direct->end()) {
    sid = it->second;
  } else {
    PyObject* r = PyObject_CallFunction(log->slow, "O(Ki)", reinterpret_cast<PyObject*>(frame),
                                        static_cast<unsigned long long>(key.code), key.lasti);
    if (r == nullptr) {
      hookError();
      return;
    }
    long v = PyLong_AsLong(r);
    Py_DECREF(r);
    if (v == -1 && PyErr_Occurred()) {
      hookError();
      return;
    }
    if (v >= 0) {
      sid = static_cast<int32_t>(v);
      try {
        log->direct->emplace(key, sid);
      } catch (...) {  // out of memory: this caller takes the slow path again next time
      }
    } else {
      sid = static_cast<int32_t>(-(v + 1));
    }
  }
  try {
    log->t->push_back(nowNs());
    log->site->push_back(sid * 8 + index);
  } catch (...) {
    if (log->t->size() > log->site->size()) log->t->pop_back();
  }
}

// ---- SyncLog ----
PyObject* syncLogNew(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"slow", "on_full", "cap", "thread_id", nullptr};
  PyObject* slow = nullptr;
  PyObject* onFull = Py_None;
  Py_ssize_t cap = 0;
  unsigned long long tid = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOnK:SyncLog", const_cast<char**>(kw), &slow, &onFull, &cap,
                                   &tid)) {
    return nullptr;
  }
  if (!PyCallable_Check(slow) || (onFull != Py_None && !PyCallable_Check(onFull)) || cap < 0) {
    PyErr_SetString(PyExc_TypeError, "SyncLog(slow, on_full, cap, thread_id): callables and a cap >= 0");
    return nullptr;
  }
  auto* log = reinterpret_cast<SyncLogObject*>(type->tp_alloc(type, 0));
  if (!log) return nullptr;
  try {
    log->t = new std::vector<int64_t>();
    log->site = new std::vector<int32_t>();
    log->direct = new std::unordered_map<CallerKey, int32_t, CallerHash>();
  } catch (...) {
    Py_DECREF(log);
    return PyErr_NoMemory();
  }
  log->slow = Py_NewRef(slow);
  log->onFull = onFull == Py_None ? nullptr : Py_NewRef(onFull);
  log->cap = cap;
  log->threadId = static_cast<unsigned long>(tid);
  log->dropped = 0;
  log->armed = false;
  return reinterpret_cast<PyObject*>(log);
}

using SyncLogRefs = HeldRefs<SyncLogObject, &SyncLogObject::slow, &SyncLogObject::onFull>;

void syncLogDealloc(PyObject* self) {
  auto* log = reinterpret_cast<SyncLogObject*>(self);
  delete log->t;
  delete log->site;
  delete log->direct;
  log->t = nullptr;
  log->site = nullptr;
  log->direct = nullptr;
  SyncLogRefs::dealloc(self);
}

Py_ssize_t syncLogLen(PyObject* self) {
  auto* log = reinterpret_cast<SyncLogObject*>(self);
  return static_cast<Py_ssize_t>(log->site->size());
}

// columns() -> (t_ns bytes of int64, site bytes of int32): the calls so far, copied.
PyObject* syncLogColumns(PyObject* self, PyObject*) {
  auto* log = reinterpret_cast<SyncLogObject*>(self);
  const size_t n = log->site->size();
  PyObject* t = PyBytes_FromStringAndSize(reinterpret_cast<const char*>(log->t->data()),
                                          static_cast<Py_ssize_t>(n * sizeof(int64_t)));
  PyObject* s = PyBytes_FromStringAndSize(reinterpret_cast<const char*>(log->site->data()),
                                          static_cast<Py_ssize_t>(n * sizeof(int32_t)));
  if (!t || !s) {
    Py_XDECREF(t);
    Py_XDECREF(s);
    return nullptr;
  }
  return Py_BuildValue("(NN)", t, s);
}

PyObject* syncLogGetArmed(PyObject* self, void*) { return PyBool_FromLong(reinterpret_cast<SyncLogObject*>(self)->armed); }

int syncLogSetArmed(PyObject* self, PyObject* value, void*) {
  int v = value ? PyObject_IsTrue(value) : 0;
  if (v < 0) return -1;
  reinterpret_cast<SyncLogObject*>(self)->armed = v != 0;
  return 0;
}

PyObject* syncLogGetDropped(PyObject* self, void*) {
  return PyLong_FromLong(reinterpret_cast<SyncLogObject*>(self)->dropped);
}

PyObject* syncLogGetCap(PyObject* self, void*) { return PyLong_FromSsize_t(reinterpret_cast<SyncLogObject*>(self)->cap); }

int syncLogSetCap(PyObject* self, PyObject* value, void*) {
  if (value == nullptr) {
    PyErr_SetString(PyExc_AttributeError, "cap cannot be deleted");
    return -1;
  }
  Py_ssize_t v = PyLong_AsSsize_t(value);
  if (v == -1 && PyErr_Occurred()) return -1;
  if (v < 0) {
    PyErr_SetString(PyExc_ValueError, "cap must be >= 0");
    return -1;
  }
  reinterpret_cast<SyncLogObject*>(self)->cap = v;
  return 0;
}

PyMethodDef syncLogMethods[] = {
    {"columns", syncLogColumns, METH_NOARGS, "(t_ns int64 bytes, site*8+method int32 bytes) of the calls so far."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef syncLogGetSet[] = {
    {"armed", syncLogGetArmed, syncLogSetArmed, "Counting on the log's thread.", nullptr},
    {"dropped", syncLogGetDropped, nullptr, "1 once the cap was reached and counting stopped, else 0.", nullptr},
    {"cap", syncLogGetCap, syncLogSetCap, "Calls kept at most (on_full may raise it).", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PySequenceMethods syncLogSequence = [] {
  PySequenceMethods s{};
  s.sq_length = syncLogLen;
  return s;
}();

// ---- CountedCall ----
struct CountedCallObject {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* wrapped;
  PyObject* log;  // SyncLog
  int index;      // the method's index in METHODS
};

PyObject* countedCallVectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* c = reinterpret_cast<CountedCallObject*>(self);
  auto* log = reinterpret_cast<SyncLogObject*>(c->log);
  if (log->armed && PyThread_get_thread_ident() == log->threadId) {
    Py_INCREF(c->wrapped);  // on_full may take this wrapper off the class (and drop its last reference)
    Py_INCREF(self);
    countCall(log, c->index);
    PyObject* r = PyObject_Vectorcall(c->wrapped, args, nargsf, kwnames);
    Py_DECREF(c->wrapped);
    Py_DECREF(self);
    return r;
  }
  return PyObject_Vectorcall(c->wrapped, args, nargsf, kwnames);
}

PyObject* countedCallDescrGet(PyObject* self, PyObject* obj, PyObject*) {
  if (obj == nullptr || obj == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, obj);
}

using CountedCallRefs = HeldRefs<CountedCallObject, &CountedCallObject::wrapped, &CountedCallObject::log>;

PyObject* countedCallNew(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"wrapped", "log", "index", nullptr};
  PyObject* wrapped = nullptr;
  PyObject* log = nullptr;
  int index = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!i:CountedCall", const_cast<char**>(kw), &wrapped, &SyncLogType,
                                   &log, &index)) {
    return nullptr;
  }
  if (!PyCallable_Check(wrapped) || index < 0 || index > 7) {
    PyErr_SetString(PyExc_TypeError, "CountedCall(wrapped, log, index): a callable and 0 <= index < 8");
    return nullptr;
  }
  auto* c = reinterpret_cast<CountedCallObject*>(type->tp_alloc(type, 0));
  if (!c) return nullptr;
  c->vectorcall = countedCallVectorcall;
  c->wrapped = Py_NewRef(wrapped);
  c->log = Py_NewRef(log);
  c->index = index;
  return reinterpret_cast<PyObject*>(c);
}

// __name__, __qualname__, __doc__, __module__ come from the wrapped method, as TimedCall's do.
PyObject* countedCallGetAttro(PyObject* self, PyObject* name) {
  PyObject* r = nullptr;
  if (wrappedNameAttr(reinterpret_cast<CountedCallObject*>(self)->wrapped, name, &r)) return r;
  return PyObject_GenericGetAttr(self, name);
}

PyObject* countedCallGetWrapped(PyObject* self, void*) {
  return Py_NewRef(reinterpret_cast<CountedCallObject*>(self)->wrapped);
}

PyObject* countedCallRepr(PyObject* self) {
  return PyUnicode_FromFormat("<perfcore.CountedCall of %R>", reinterpret_cast<CountedCallObject*>(self)->wrapped);
}

PyGetSetDef countedCallGetSet[] = {
    {"__wrapped__", countedCallGetWrapped, nullptr, "The original method.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

}  // namespace

PyTypeObject SyncLogType = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "perfcore._C.SyncLog";
  t.tp_basicsize = sizeof(SyncLogObject);
  t.tp_dealloc = syncLogDealloc;
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  t.tp_doc = "SyncLog(slow, on_full, cap, thread_id): the calls CountedCall wrappers count.";
  t.tp_traverse = SyncLogRefs::traverse;
  t.tp_clear = SyncLogRefs::clear;
  t.tp_methods = syncLogMethods;
  t.tp_getset = syncLogGetSet;
  t.tp_as_sequence = &syncLogSequence;
  t.tp_new = syncLogNew;
  return t;
}();

PyTypeObject CountedCallType = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "perfcore._C.CountedCall";
  t.tp_basicsize = sizeof(CountedCallObject);
  t.tp_dealloc = CountedCallRefs::dealloc;
  t.tp_vectorcall_offset = offsetof(CountedCallObject, vectorcall);
  t.tp_call = PyVectorcall_Call;
  t.tp_repr = countedCallRepr;
  t.tp_getattro = countedCallGetAttro;
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR;
  t.tp_doc = "CountedCall(wrapped, log, index): wrapped, each call on the log's thread counted at its caller.";
  t.tp_traverse = CountedCallRefs::traverse;
  t.tp_clear = CountedCallRefs::clear;
  t.tp_getset = countedCallGetSet;
  t.tp_descr_get = countedCallDescrGet;
  t.tp_new = countedCallNew;
  return t;
}();

}  // namespace perfcore

#endif  // PY_VERSION_HEX >= 0x030B0000
