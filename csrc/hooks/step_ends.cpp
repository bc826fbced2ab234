// StepEnds: the end time of every step, in order, as int64 ns. Appended by the native step clock
// (optimizer hooks) or by Python (timer.step()), read by the settling in slices. Steps that are
// settled no longer need their ends, so the owner lets the old ones go (`trim`): memory is the
// unsettled tail, however long the run, while len() and negative indices still count every step.
#include <algorithm>
#include <new>
#include <vector>

#include "hooks.h"

namespace perfcore {

namespace {

PyObject* trimmedError(long long i, long long base) {
  PyErr_Format(PyExc_IndexError,
               "step end %lld was let go once its step was settled (the ends of steps %lld and later are kept)", i,
               base);
  return nullptr;
}

// Index i of the whole sequence (negative from the end) -> position in ends, or -1 with the error set.
Py_ssize_t position(StepEndsObject* o, Py_ssize_t i) {
  const Py_ssize_t n = stepEndsCount(o);
  if (i < 0) i += n;
  if (i < 0 || i >= n) {
    PyErr_SetString(PyExc_IndexError, "step end index out of range");
    return -1;
  }
  if (i < o->base) {
    trimmedError(i, o->base);
    return -1;
  }
  return i - o->base;
}

Py_ssize_t stepEndsLen(PyObject* self) { return stepEndsCount(reinterpret_cast<StepEndsObject*>(self)); }

PyObject* stepEndsItem(PyObject* self, Py_ssize_t i) {
  auto* o = reinterpret_cast<StepEndsObject*>(self);
  const Py_ssize_t p = position(o, i);
  return p < 0 ? nullptr : PyLong_FromLongLong((*o->ends)[p]);
}

PyObject* stepEndsSubscript(PyObject* self, PyObject* key) {
  auto* o = reinterpret_cast<StepEndsObject*>(self);
  if (!PySlice_Check(key)) {
    const Py_ssize_t i = PyNumber_AsSsize_t(key, PyExc_IndexError);
    if (i == -1 && PyErr_Occurred()) return nullptr;
    return stepEndsItem(self, i);
  }
  Py_ssize_t start, stop, step;
  if (PySlice_Unpack(key, &start, &stop, &step) < 0) return nullptr;
  const Py_ssize_t len = PySlice_AdjustIndices(stepEndsCount(o), &start, &stop, step);
  PyObject* out = PyList_New(len);
  if (!out) return nullptr;
  for (Py_ssize_t k = 0, i = start; k < len; ++k, i += step) {
    if (i < o->base) {
      Py_DECREF(out);
      return trimmedError(i, o->base);
    }
    PyObject* v = PyLong_FromLongLong((*o->ends)[i - o->base]);
    if (!v) {
      Py_DECREF(out);
      return nullptr;
    }
    PyList_SET_ITEM(out, k, v);
  }
  return out;
}

PyObject* stepEndsIter(PyObject* self) {
  auto* o = reinterpret_cast<StepEndsObject*>(self);
  if (o->base > 0) return trimmedError(0, o->base);
  return PySeqIter_New(self);
}

PyObject* stepEndsAppendPy(PyObject* self, PyObject* arg) {
  const long long t = PyLong_AsLongLong(arg);
  if (t == -1 && PyErr_Occurred()) return nullptr;
  if (!stepEndsAppend(reinterpret_cast<StepEndsObject*>(self), t)) return PyErr_NoMemory();
  Py_RETURN_NONE;
}

// since(k): the ends of steps k, k+1, ... as the bytes of an int64 array (numpy.frombuffer reads them).
PyObject* stepEndsSince(PyObject* self, PyObject* arg) {
  auto* o = reinterpret_cast<StepEndsObject*>(self);
  long long k = PyLong_AsLongLong(arg);
  if (k == -1 && PyErr_Occurred()) return nullptr;
  const long long n = stepEndsCount(o);
  k = std::min(std::max(k, 0LL), n);
  if (k < o->base) return trimmedError(k, o->base);
  const auto* first = o->ends->data() + (k - o->base);
  return PyBytes_FromStringAndSize(reinterpret_cast<const char*>(first),
                                   static_cast<Py_ssize_t>((n - k) * sizeof(int64_t)));
}

// trim(k): let go of the ends of steps before k (clipped to what is kept); len() is unchanged.
PyObject* stepEndsTrim(PyObject* self, PyObject* arg) {
  auto* o = reinterpret_cast<StepEndsObject*>(self);
  long long k = PyLong_AsLongLong(arg);
  if (k == -1 && PyErr_Occurred()) return nullptr;
  k = std::min(k, static_cast<long long>(stepEndsCount(o)));
  if (k > o->base) {
    o->ends->erase(o->ends->begin(), o->ends->begin() + (k - o->base));
    o->base = k;
    // Keep the allocation proportional to what is kept: a long unsettled stretch must not pin its peak.
    if (o->ends->capacity() > 4 * std::max<size_t>(o->ends->size(), 1024)) o->ends->shrink_to_fit();
  }
  Py_RETURN_NONE;
}

// replace(iterable): every end anew, before any was let go (a step source chosen after the run began).
PyObject* stepEndsReplace(PyObject* self, PyObject* arg) {
  auto* o = reinterpret_cast<StepEndsObject*>(self);
  if (o->base > 0) {
    PyErr_SetString(PyExc_ValueError, "replace: step ends were already let go after settling");
    return nullptr;
  }
  PyObject* seq = PySequence_Fast(arg, "replace: an iterable of ints");
  if (!seq) return nullptr;
  std::vector<int64_t> fresh;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  try {
    fresh.reserve(static_cast<size_t>(n));
  } catch (const std::bad_alloc&) {
    Py_DECREF(seq);
    return PyErr_NoMemory();
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    const long long t = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
    if (t == -1 && PyErr_Occurred()) {
      Py_DECREF(seq);
      return nullptr;
    }
    fresh.push_back(t);
  }
  Py_DECREF(seq);
  o->ends->swap(fresh);
  Py_RETURN_NONE;
}

PyObject* stepEndsBase(PyObject* self, void*) {
  return PyLong_FromSsize_t(reinterpret_cast<StepEndsObject*>(self)->base);
}

PyObject* stepEndsRepr(PyObject* self) {
  auto* o = reinterpret_cast<StepEndsObject*>(self);
  return PyUnicode_FromFormat("StepEnds(%zd steps, %zd kept)", stepEndsCount(o), static_cast<Py_ssize_t>(o->ends->size()));
}

PyObject* stepEndsNew(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  if (!PyArg_ParseTuple(args, ":StepEnds") || (kwargs && PyDict_Size(kwargs))) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "StepEnds() takes no arguments");
    return nullptr;
  }
  auto* o = reinterpret_cast<StepEndsObject*>(type->tp_alloc(type, 0));
  if (!o) return nullptr;
  o->ends = new (std::nothrow) std::vector<int64_t>();
  o->base = 0;
  if (!o->ends) {
    Py_DECREF(o);
    return PyErr_NoMemory();
  }
  return reinterpret_cast<PyObject*>(o);
}

void stepEndsDealloc(PyObject* self) {
  delete reinterpret_cast<StepEndsObject*>(self)->ends;
  Py_TYPE(self)->tp_free(self);
}

PyMethodDef stepEndsMethods[] = {
    {"append", stepEndsAppendPy, METH_O, "append(t_ns): the end of the next step."},
    {"since", stepEndsSince, METH_O, "since(k) -> bytes: the ends of steps k.. as int64 (numpy.frombuffer)."},
    {"trim", stepEndsTrim, METH_O, "trim(k): let go of the ends of steps before k; len() is unchanged."},
    {"replace", stepEndsReplace, METH_O, "replace(iterable): every end anew (only before any trim)."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef stepEndsGetSet[] = {
    {"base", stepEndsBase, nullptr, "The first step whose end is still kept.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PySequenceMethods stepEndsSequence = [] {
  PySequenceMethods m{};
  m.sq_length = stepEndsLen;
  m.sq_item = stepEndsItem;
  return m;
}();

PyMappingMethods stepEndsMapping = [] {
  PyMappingMethods m{};
  m.mp_length = stepEndsLen;
  m.mp_subscript = stepEndsSubscript;
  return m;
}();

}  // namespace

bool stepEndsAppend(StepEndsObject* o, int64_t t) noexcept {
  try {
    o->ends->push_back(t);
    return true;
  } catch (const std::bad_alloc&) {
    return false;
  }
}

PyTypeObject StepEndsType = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "perfcore._C.StepEnds";
  t.tp_basicsize = sizeof(StepEndsObject);
  t.tp_dealloc = stepEndsDealloc;
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = "StepEnds(): step end times (int64 ns) in order; settled ones can be let go (trim).";
  t.tp_as_sequence = &stepEndsSequence;
  t.tp_as_mapping = &stepEndsMapping;
  t.tp_iter = stepEndsIter;
  t.tp_repr = stepEndsRepr;
  t.tp_methods = stepEndsMethods;
  t.tp_getset = stepEndsGetSet;
  t.tp_new = stepEndsNew;
  return t;
}();

}  // namespace perfcore
