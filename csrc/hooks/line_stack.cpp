// stack_key: the line sampler's walk of another thread's Python stack (perfcore/capture/line_sampler.py).
// In Python the walk is ~3k instructions a frame (attribute reads, a tuple of ids, the list), all of it with
// the GIL held while the training thread may be waiting for it; here it is a lookup of the thread's state and
// a pointer chase. It returns (key, codes) or None (no such thread, or no Python frame on it):
//   key    bytes of (code address, instruction offset) per frame, innermost first: hashed once, compared
//          as bytes, so the sampler's dict lookup costs no attribute reads and no code-object hashes
//   codes  the frames' code objects, same order: the sampler keeps them for a key it has not seen, so an
//          address in a kept key cannot be reused by another code object
// Called with the GIL held (a Python call); the frames it reads cannot change under it.
// Python >= 3.11 (PyFrame_GetLasti); before it the sampler walks in Python.
#include <cstdint>
#include <cstring>
#include <vector>

#include "hooks.h"

#if PY_VERSION_HEX >= 0x030B0000

namespace perfcore {

namespace {

struct FrameKey {
  uintptr_t code;
  int64_t lasti;
};

PyThreadState* threadState(unsigned long threadId) {
  PyInterpreterState* interp = PyThreadState_GetInterpreter(PyThreadState_Get());
  for (PyThreadState* ts = PyInterpreterState_ThreadHead(interp); ts != nullptr; ts = PyThreadState_Next(ts)) {
    if (ts->thread_id == threadId) return ts;
  }
  return nullptr;
}

PyObject* stackKey(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "stack_key(thread_id, max_depth)");
    return nullptr;
  }
  const unsigned long threadId = PyLong_AsUnsignedLong(args[0]);
  const Py_ssize_t maxDepth = PyLong_AsSsize_t(args[1]);
  if (PyErr_Occurred()) return nullptr;
  PyThreadState* ts = threadState(threadId);
  PyFrameObject* frame = ts ? PyThreadState_GetFrame(ts) : nullptr;  // a new reference
  if (frame == nullptr) Py_RETURN_NONE;
  std::vector<FrameKey> keys;
  std::vector<PyObject*> codes;  // new references until they move into the tuple
  while (frame != nullptr && static_cast<Py_ssize_t>(keys.size()) < maxDepth) {
    PyCodeObject* code = PyFrame_GetCode(frame);  // a new reference
    keys.push_back({reinterpret_cast<uintptr_t>(code), PyFrame_GetLasti(frame)});
    codes.push_back(reinterpret_cast<PyObject*>(code));
    PyFrameObject* back = PyFrame_GetBack(frame);  // a new reference, or nullptr at the bottom
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  PyObject* key = PyBytes_FromStringAndSize(reinterpret_cast<const char*>(keys.data()),
                                            static_cast<Py_ssize_t>(keys.size() * sizeof(FrameKey)));
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(codes.size()));
  if (key == nullptr || tuple == nullptr) {
    Py_XDECREF(key);
    Py_XDECREF(tuple);
    for (PyObject* c : codes) Py_DECREF(c);
    return nullptr;
  }
  for (size_t i = 0; i < codes.size(); ++i) PyTuple_SET_ITEM(tuple, static_cast<Py_ssize_t>(i), codes[i]);
  PyObject* out = PyTuple_Pack(2, key, tuple);
  Py_DECREF(key);
  Py_DECREF(tuple);
  return out;
}

}  // namespace

PyMethodDef lineStackFunctions[] = {
    {"stack_key", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(stackKey)), METH_FASTCALL,
     "stack_key(thread_id, max_depth) -> (key bytes, code objects) of that thread's Python stack, or None."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace perfcore

#endif
