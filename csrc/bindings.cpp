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

PyObject* scopeEnter(PyObject* self, PyObject*) {
  auto* s = reinterpret_cast<PhaseScopeObject*>(self);
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
    return nullptr;
  }
  Py_INCREF(self);
  return self;
}

PyObject* scopeExit(PyObject* self, PyObject* const*, Py_ssize_t) {
  auto* s = reinterpret_cast<PhaseScopeObject*>(self);
  try {
#ifdef PERFCORE_WITH_CUDA
    if (s->tagKernels && ActivityTracer::instance().active()) ActivityTracer::instance().popExternalId();
    if (s->events) static_cast<EventTimer*>(s->events)->end(s->phase, s->stream);
#endif
    s->recorder->end(s->phase);
  } catch (...) {
    setPythonError();
    return nullptr;
  }
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

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "perfcore native core (see docs/ARCHITECTURE.md)";
  registerExceptions();
  if (PyType_Ready(&PhaseScopeType) < 0) throw py::error_already_set();
  Py_INCREF(&PhaseScopeType);
  m.add_object("PhaseScope", reinterpret_cast<PyObject*>(&PhaseScopeType));

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
