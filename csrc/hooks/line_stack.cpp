// stack_key: the line sampler's walk of another thread's Python stack (perfcore/capture/line_sampler.py).
// In Python the walk is ~3k instructions a frame (attribute reads, a tuple of ids, the list), all of it with
// the GIL held while the training thread may be waiting for it; here it is a pointer chase from the thread's
// innermost frame, which the caller takes from sys._current_frames() (that reads the thread list under the
// runtime's lock, which the C API does not offer: a thread state may be freed without the GIL). It returns
// (key, codes):
//   key    bytes of (code address, instruction offset) per frame, innermost first: hashed once, compared
//          as bytes, so the sampler's dict lookup costs no attribute reads and no code-object hashes
//   codes  the frames' code objects, same order: the sampler keeps them for a key it has not seen, so an
//          address in a kept key cannot be reused by another code object
// Called with the GIL held (a Python call); the frames it reads cannot change under it.
// Python >= 3.11 (PyFrame_GetLasti); before it the sampler walks in Python.
#include <cstdint>
#include <vector>

#include "hooks.h"

#if PY_VERSION_HEX >= 0x030B0000

namespace perfcore {

namespace {

struct FrameKey {
  uintptr_t code;
  int64_t lasti;
};

PyObject* stackKey(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 || !PyFrame_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "stack_key(frame, max_depth)");
    return nullptr;
  }
  const Py_ssize_t maxDepth = PyLong_AsSsize_t(args[1]);
  if (maxDepth == -1 && PyErr_Occurred()) return nullptr;
  PyFrameObject* frame = reinterpret_cast<PyFrameObject*>(Py_NewRef(args[0]));
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
     "stack_key(frame, max_depth) -> (key bytes, code objects) of the stack from that frame outwards."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace perfcore

#endif
