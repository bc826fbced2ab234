// perfcore._C: the only file that knows pybind11. Native tables become dicts of numpy arrays;
// native exceptions become perfcore.errors classes (py_errors); the hot hook types are plain
// CPython types (hooks/) added to the module here.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "clock.h"
#include "columns.h"
#include "errors.h"
#include "hooks/hooks.h"
#include "py_errors.h"
#include "py_tables.h"
#include "spans.h"

#ifdef PERFCORE_WITH_CUDA
#include <cuda_runtime.h>

#include "calib.h"
#include "cuda_check.h"
#include "cupti/buffers.h"
#include "cupti/tracer.h"
#include "events.h"
#include "transfer.h"
#endif

namespace py = pybind11;
using namespace perfcore;

#ifdef PERFCORE_WITH_CUDA
namespace perfcore {
py::dict activityToDict(ActivityColumns&& a) {
  py::dict d;
  d["kernels"] = tableToDict(std::move(a.kernels));
  d["memcpy"] = tableToDict(std::move(a.memcpy));
  d["memset"] = tableToDict(std::move(a.memset));
  d["sync"] = tableToDict(std::move(a.sync));
  d["external_correlation"] = tableToDict(std::move(a.external));
  d["overhead"] = tableToDict(std::move(a.overhead));
  d["api"] = tableToDict(std::move(a.api));
  d["names"] = py::cast(a.names);
  d["records"] = a.records;
  d["other_records"] = a.otherRecords;
  d["invalid_timestamps"] = a.invalidTimestamps;
  d["zero_timestamps"] = a.zeroTimestamps;
  return d;
}

py::dict bufferStatsToDict(const BufferStats& b) {
  py::dict d;
  d["buffers_allocated"] = b.buffersAllocated;
  d["buffers_completed"] = b.buffersCompleted;
  d["buffers_denied"] = b.buffersDenied;
  d["buffers_undecodable"] = b.buffersUndecodable;
  d["buffers_incomplete"] = b.buffersIncomplete;
  d["bytes_unwalked"] = b.bytesUnwalked;
  d["zero_timestamps"] = b.zeroTimestamps;
  d["records"] = b.records;
  d["dropped_records"] = b.droppedRecords;
  d["overflow_records"] = b.overflowRecords;
  d["invalid_timestamps"] = b.invalidTimestamps;
  d["other_records"] = b.otherRecords;
  d["decode_ns"] = b.decodeNs;
  d["discarded_records"] = b.discardedRecords;
  return d;
}
}  // namespace perfcore
#endif

namespace {

#ifdef PERFCORE_WITH_CUDA

uintptr_t streamArg(py::object s) { return s.is_none() ? 0 : s.cast<uintptr_t>(); }

// The current-stream source of phases that follow the current stream: a Python callable
// device -> cudaStream_t as int (torch._C._cuda_getCurrentRawStream, a C function that reads
// torch's per-thread current stream). Phases open with the GIL held; without it, no answer.
PyObject* currentStreamCallable = nullptr;

bool currentStreamFromPython(int device, uintptr_t* out) {
  PyObject* fn = currentStreamCallable;
  if (fn == nullptr || !PyGILState_Check()) return false;
  // Called at every phase entry and exit: one argument, no format string to parse.
  PyObject* arg = PyLong_FromLong(device);
  if (arg == nullptr) {
    PyErr_Clear();
    return false;
  }
  PyObject* r = PyObject_CallOneArg(fn, arg);
  Py_DECREF(arg);
  if (r == nullptr) {
    PyErr_Clear();  // never into the user's phase: the timer counts it as unseen
    return false;
  }
  const unsigned long long v = PyLong_AsUnsignedLongLong(r);
  Py_DECREF(r);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  *out = static_cast<uintptr_t>(v);
  return true;
}
#endif

void registerExceptions() {
  if (!loadErrorClasses()) throw py::error_already_set();
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const NativeError&) {
      setPythonError();
    }
  });
}

// phase_scope(cls, recorder, phase_id, events=None, stream=None, tag_kernels=False).
py::object makePhaseScope(py::type cls, py::object recorder, int32_t phase, py::object events, py::object stream,
                          bool tagKernels) {
  EventTimer* ev = nullptr;
#ifdef PERFCORE_WITH_CUDA
  if (!events.is_none()) ev = events.cast<EventTimer*>();
#else
  if (tagKernels) throw DeviceUnavailableError("kernel tagging needs CUPTI, which this CPU-mode build leaves out");
  if (!events.is_none()) throw DeviceUnavailableError("CUDA event timing is not in this CPU-mode build");
#endif
  PyObject* obj = newPhaseScope(reinterpret_cast<PyTypeObject*>(cls.ptr()), recorder.cast<SpanRecorder*>(),
                                recorder.ptr(), ev, events.ptr(), stream.is_none() ? 0 : stream.cast<uintptr_t>(),
                                phase, tagKernels);
  if (!obj) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(obj);
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "perfcore native core (see docs/ARCHITECTURE.md)";
  registerExceptions();
  if (!addHookTypes(m.ptr())) throw py::error_already_set();

#ifdef PERFCORE_WITH_CUDA
  m.attr("CUDA_COMPILED") = true;
  m.attr("CUPTI_COMPILED") = true;
#else
  m.attr("CUDA_COMPILED") = false;
  m.attr("CUPTI_COMPILED") = false;
#endif

  m.def("phase_scope", &makePhaseScope, py::arg("cls"), py::arg("recorder"), py::arg("phase_id"),
        py::arg("events") = py::none(), py::arg("stream") = py::none(), py::arg("tag_kernels") = false);
  m.def("_set_scope_decorator", [](py::object fn) { setScopeDecorator(fn.ptr()); },
        "Registers fn(scope, f) -> timed f, used by `@scope` (perfcore.timing does this once).");
  m.def("now_ns", &nowNs, "The perfcore clock (CLOCK_MONOTONIC ns; same as time.perf_counter_ns).");
  m.def("thread_id", &currentThreadId, "OS id of the calling thread.");

  py::class_<SpanRecorder>(m, "SpanRecorder")
      .def(py::init<size_t>(), py::arg("max_chunks") = ThreadSpanBuffer::kDefaultMaxChunks,
           "max_chunks: chunks of 4096 spans a thread may hold undrained before new spans are dropped")
      .def("begin", &SpanRecorder::begin, py::arg("phase_id"))
      .def("cancel", &SpanRecorder::cancel, py::arg("phase_id"), "Take back the innermost open phase unrecorded.")
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
      .def(py::init<size_t, int>(), py::arg("max_pending") = 8192, py::arg("device") = -1)
      .def("set_device", &EventTimer::setDevice, py::arg("device"),
           "Move to another GPU; False while a phase is open (try again later).")
      .def_property_readonly("device", &EventTimer::device)
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
      .def("cancel", &EventTimer::cancel, py::arg("phase_id"))
      .def("clock_sync", [](EventTimer& t) {
        ClockSync c = t.clockSync();
        py::dict d;
        d["syncs"] = c.syncs;
        d["last_drift_ns"] = c.lastDriftNs;
        d["max_abs_drift_ns"] = c.maxAbsDriftNs;
        d["uncertainty_ns"] = c.lastUncertaintyNs;
        return d;
      })
      .def("stream_stats", [](EventTimer& t) {
        StreamStats st = t.streamStats();
        py::dict d;
        d["followed"] = st.followed;
        d["unseen"] = st.unseen;
        d["switched_inside"] = st.switchedInside;
        d["capturing"] = st.capturing;
        d["unreadable"] = st.unreadable;
        d["last_unreadable_error"] =
            st.unreadable ? cudaGetErrorName(static_cast<cudaError_t>(st.lastUnreadableError)) : "";
        return d;
      })
      .def_property_readonly("pending", &EventTimer::pending)
      .def_property_readonly("events_created", &EventTimer::eventsCreated);

  m.attr("FOLLOW_CURRENT_STREAM") = py::int_(static_cast<unsigned long long>(kCurrentStream));
  m.def("_set_current_stream_source", [](py::object fn) {
    PyObject* old = currentStreamCallable;
    currentStreamCallable = fn.is_none() ? nullptr : fn.inc_ref().ptr();
    setCurrentStreamSource(currentStreamCallable ? &currentStreamFromPython : nullptr);
    Py_XDECREF(old);
  }, py::arg("fn"), "fn(device) -> the calling thread's current cudaStream_t, for FOLLOW_CURRENT_STREAM phases.");
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
  m.def("measure_probe_launches", [](int device, int64_t count, int blocks) {
    py::gil_scoped_release nogil;
    return measureProbeLaunches(device, count, blocks);
  }, py::arg("device"), py::arg("count") = 256, py::arg("blocks") = 3,
        "Host ns per launch of perfcore::tracingProbe, a figure per block (the tracing calibration).");

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
  m.def("cupti_start", [](size_t bufferBytes, size_t maxBuffers, int64_t drainPeriodMs, int64_t maxPendingRecords,
                          size_t deviceBufferBytes, bool apiRecords) {
    TracerConfig c;
    c.bufferBytes = bufferBytes;
    c.deviceBufferBytes = deviceBufferBytes;
    c.maxBuffers = maxBuffers;
    c.drainPeriodMs = drainPeriodMs;
    c.maxPendingRecords = maxPendingRecords;
    c.apiRecords = apiRecords;
    ActivityTracer::instance().start(c);
  }, py::arg("buffer_bytes") = 8u << 20, py::arg("max_buffers") = 64, py::arg("drain_period_ms") = 200,
     py::arg("max_pending_records") = 8'000'000, py::arg("device_buffer_bytes") = 0, py::arg("api_records") = true);
  m.def("cupti_set_device_buffer_bytes", [](size_t bytes) { return ActivityTracer::setDeviceBufferBytes(bytes); },
        py::arg("bytes"), "CUPTI's device buffer size, for contexts made later (call before CUDA starts); 0: set.");
  m.def("cupti_guards", [](uint32_t loadedVersion, int64_t session) {
    py::dict d;
    d["graph_ids_untrusted"] = !graphIdsTrusted(loadedVersion, session);
    d["concurrent_kernel_left_on"] = !disableKernelSafe(loadedVersion);
    d["null_buffer_unsafe"] = !nullBufferSafe(loadedVersion);
    return d;
  }, py::arg("loaded_version"), py::arg("session"), "Which known-bug workarounds a CUPTI version needs.");
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
  m.def("cupti_hand_over", []() {
    ActivityColumns cols;
    {
      py::gil_scoped_release nogil;
      cols = ActivityTracer::instance().handOver();
    }
    return activityToDict(std::move(cols));
  }, "Stop, and leave CUPTI to the next client for good (finalized where safe): the rest of the records.");
  m.def("cupti_active", []() { return ActivityTracer::instance().active(); });
  m.def("cupti_pending_share", []() { return ActivityTracer::instance().pendingShare(); },
        "Decoded records not yet taken, as a share of the cap past which they are dropped (no lock).");
  m.def("cupti_set_tagging", [](bool on) { ActivityTracer::instance().setExternalTagging(on); }, py::arg("on"),
        "Phases push their id while another CUPTI client (the cupti-python backend) traces.");
  m.def("cupti_stats", []() {
    TracerStats s = ActivityTracer::instance().stats();
    py::dict d = bufferStatsToDict(s.buffers);
    d["flushes"] = s.flushes;
    d["flush_ns"] = s.flushNs;
    d["forced_flush_ns"] = s.forcedFlushNs;
    d["timestamp_callback"] = s.timestampCallback;
    d["clock_offset_ns"] = s.clockOffsetNs;
    d["clock_drift_ns"] = s.clockDriftNs;
    d["device_buffer_bytes"] = s.deviceBufferBytes;
    d["session"] = s.session;
    d["api_calls_filtered"] = s.apiCallsFiltered;
    d["graph_ids_untrusted"] = s.graphIdsUntrusted;
    d["concurrent_kernel_left_on"] = s.concurrentKernelLeftOn;
    d["handed_over"] = s.handedOver;
    d["finalized"] = s.finalized;
    d["api_records"] = s.apiRecords;
    d["stale_dropped"] = s.staleDropped;
    d["captures_watched"] = s.capturesWatched;
    d["captures_seen"] = s.capturesSeen;
    d["flushes_held"] = s.flushesHeld;
    return d;
  });
  m.def("cupti_push_external_id", [](uint64_t id) { ActivityTracer::instance().pushExternalId(id); });
  m.def("cupti_pop_external_id", []() { ActivityTracer::instance().popExternalId(); });
#endif
  addTestBindings(m);
}
