// perfcore._C's test-only part: CUPTI records built in memory, the tracer's buffer pool fed by
// hand, the CUDA runtime the event timer calls replaced by one that follows the runtime docs, and
// the tracer's API-record filter by callback id. Nothing here runs in a user's process.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <vector>

#include "errors.h"
#include "py_tables.h"

#ifdef PERFCORE_WITH_CUDA
#include "cupti/buffers.h"
#include "cupti/claim.h"
#include "cupti/fake_buffer.h"
#include "cupti/tracer.h"
#include "fake_runtime.h"
#endif

namespace perfcore {

#ifdef PERFCORE_WITH_CUDA
namespace {
// The tracer's drain thread with a counting flush in place of CUPTI's, held by a capture watch fed
// the callback ids a test gives: the drain's schedule around graph captures, without CUPTI.
struct DrainModel {
  CaptureWatch watch;
  std::atomic<int64_t> flushes{0}, decodes{0};
  DrainThread drain;
  explicit DrainModel(int64_t periodMs) {
    drain.start(periodMs, DrainThread::Pass{[this] { flushes.fetch_add(1); }, [this] { decodes.fetch_add(1); },
                                            [this] { return watch.underway(); }, [] { return false; }});
  }
};
}  // namespace
#endif

void addTestBindings(py::module_& m) {
#ifdef PERFCORE_WITH_CUDA
  m.def("_cupti_record_bytes", &loadedRecordBytes, py::arg("kind"),
        "Test-only: the bytes the loaded libcupti gives one record of this CUpti_ActivityKind (0: unknown).");
  py::class_<FakeActivityBuffer>(m, "_FakeActivityBuffer", "Test-only: CUPTI records built in memory.")
      .def(py::init<>())
      .def("add_kernel", &FakeActivityBuffer::addKernel, py::arg("start_ns"), py::arg("end_ns"), py::arg("device_id"),
           py::arg("stream_id"), py::arg("correlation_id"), py::arg("name"), py::arg("grid_x"), py::arg("block_x"),
           py::arg("graph_id") = 0, py::arg("graph_node_id") = 0)
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
      .def("add_api", &FakeActivityBuffer::addApi, py::arg("driver"), py::arg("start_ns"), py::arg("end_ns"),
           py::arg("correlation_id"), py::arg("thread_id"), py::arg("cbid"))
      .def_property_readonly("size_bytes", &FakeActivityBuffer::sizeBytes)
      .def("decode", [](FakeActivityBuffer& b) { return activityToDict(b.decode()); });

  // Test-only: the tracer's buffer pool and decode path, fed with fabricated buffers in place of
  // CUPTI (which asks for a buffer, fills it, and hands it back complete).
  py::class_<ActivityBuffers>(m, "_ActivityBuffers")
      .def(py::init([](size_t bufferBytes, size_t maxBuffers, int64_t maxPendingRecords, int64_t cuptiVersion) {
        auto b = std::make_unique<ActivityBuffers>();
        b->reset(bufferBytes, maxBuffers, maxPendingRecords);
        b->setNullSafe(nullBufferSafe(static_cast<uint32_t>(cuptiVersion)));
        return b;
      }), py::arg("buffer_bytes"), py::arg("max_buffers"), py::arg("max_pending_records") = 8'000'000,
      py::arg("cupti_version") = 130001, "cupti_version: the loaded CUPTI API version the pool serves.")
      .def("deliver", [](ActivityBuffers& b, const FakeActivityBuffer& f, int64_t invalidAt) {
        uint8_t* buf = nullptr;
        size_t size = 0;
        b.request(&buf, &size);
        if (buf == nullptr) return false;  // pool at its cap: CUPTI would drop these records
        if (f.sizeBytes() > size) {
          b.complete(buf, 0);
          throw UsageError("fabricated buffer is larger than the pool's buffers");
        }
        std::memcpy(buf, f.data(), f.sizeBytes());
        if (invalidAt >= 0 && static_cast<size_t>(invalidAt) + sizeof(uint32_t) <= f.sizeBytes()) {
          // The record starting there reads as CUPTI_ACTIVITY_KIND_INVALID (its kind is the
          // first field), which cuptiActivityGetNextRecord refuses as it does an incomplete one.
          const uint32_t invalidKind = 0;
          std::memcpy(buf + invalidAt, &invalidKind, sizeof(invalidKind));
        }
        b.complete(buf, f.sizeBytes());
        return true;
      }, py::arg("buffer"), py::arg("invalid_at") = -1,
      "Request a buffer, copy the records in (the record at byte invalid_at made invalid), complete "
      "it; False at the pool cap.")
      .def("lend", [](ActivityBuffers& b) {
        uint8_t* buf = nullptr;
        size_t size = 0;
        b.request(&buf, &size);
        return py::make_tuple(reinterpret_cast<uintptr_t>(buf), size);
      }, "Request a buffer as CUPTI does and keep it out: (address, size).")
      .def("give_back", [](ActivityBuffers& b, uintptr_t address, const FakeActivityBuffer& f) {
        auto* buf = reinterpret_cast<uint8_t*>(address);
        std::memcpy(buf, f.data(), f.sizeBytes());
        b.complete(buf, f.sizeBytes());
      }, py::arg("address"), py::arg("buffer"), "Fill a lent buffer with the records and complete it.")
      .def("reset", &ActivityBuffers::reset, py::arg("buffer_bytes"), py::arg("max_buffers"),
           py::arg("max_pending_records") = 8'000'000)
      .def("add_dropped", [](ActivityBuffers& b, int64_t n) { b.addDropped(n); })
      .def("decode_ready", &ActivityBuffers::decodeReady)
      .def("take", [](ActivityBuffers& b) { return activityToDict(b.take()); })
      .def("stats", [](ActivityBuffers& b) { return bufferStatsToDict(b.stats()); });

  py::class_<FakeRuntime>(m, "_FakeCudaRuntime",
                          "Test-only: the event timer's CUDA calls answered as the runtime docs define them.")
      .def(py::init<bool, double, int>(), py::arg("manual_clock") = false, py::arg("drift_ppm") = 0.0,
           py::arg("devices") = 1)
      .def("install", &FakeRuntime::install, "Event timers made from now on use this runtime.")
      .def("uninstall", &FakeRuntime::uninstall)
      .def("create_stream", &FakeRuntime::createStream, py::arg("non_blocking"))
      .def("launch", &FakeRuntime::launch, py::arg("stream"), py::arg("duration_ns"),
           "Queue work of duration_ns on stream now; returns when it ends (host ns).")
      .def("begin_capture", &FakeRuntime::beginCapture, py::arg("stream"), py::arg("mode") = 0,
           "cudaStreamBeginCapture(stream, mode) from the calling thread (0 global, 1 thread-local, 2 relaxed).")
      .def("thread_mode", &FakeRuntime::threadMode, "The calling thread's capture mode (0 global ... 2 relaxed).")
      .def("end_capture", &FakeRuntime::endCapture, "False when a forbidden call invalidated the capture.")
      .def("advance", &FakeRuntime::advance, py::arg("ns"))
      .def("synchronize", [](FakeRuntime& f) {
        py::gil_scoped_release nogil;
        f.synchronize();
      })
      .def("now", &FakeRuntime::now)
      .def("recorded_streams", &FakeRuntime::recordedStreams, "The stream of each cudaEventRecord, in order.")
      .def("recorded_count", &FakeRuntime::recordedCount)
      .def("recorded_times", &FakeRuntime::recordedTimes, "(host ns, device ns) each recorded event completes at.");

  m.def("_claim_subscriber", [](int status, const std::string& named) {
    // CUPTI answers the subscribe with `status` and names `named` as the first subscriber.
    int unsubscribed = 0;
    CUpti_SubscriberHandle out = nullptr;
    const Claim c = claimSubscriber(
        &out,
        [&](CUpti_SubscriberHandle* sub, char* oldName, size_t oldSize) {
          *sub = reinterpret_cast<CUpti_SubscriberHandle>(uintptr_t{0x1234});
          std::strncpy(oldName, named.c_str(), oldSize);
          return static_cast<CUptiResult>(status);
        },
        [&](CUpti_SubscriberHandle) {
          ++unsubscribed;
          return CUPTI_SUCCESS;
        });
    py::dict d;
    d["status"] = static_cast<int>(c.status);
    d["other"] = c.other;
    d["kept"] = out != nullptr;
    d["unsubscribed"] = unsubscribed;
    return d;
  }, py::arg("status"), py::arg("named"), "Test-only: the tracer's subscribe step against a fake CUPTI answer.");
  py::class_<DetachGate>(m, "_DetachGate", "Test-only: the hand-over's finalize hand-shake.")
      .def(py::init<>())
      .def("open", &DetachGate::open)
      .def("take", &DetachGate::take)
      .def("finished", &DetachGate::finished, py::arg("detached"))
      .def("close", &DetachGate::close, py::call_guard<py::gil_scoped_release>());

  py::class_<DrainModel>(m, "_DrainModel", "Test-only: the tracer's drain thread with a counting flush.")
      .def(py::init<int64_t>(), py::arg("period_ms"))
      .def("on_call", [](DrainModel& d, bool driver, uint32_t cbid, bool atExit, bool ok) {
        d.watch.onCall(driver, cbid, atExit, ok);
      }, py::arg("driver"), py::arg("cbid"), py::arg("at_exit"), py::arg("succeeded"),
           "A CUPTI API callback on the watch (driver or runtime domain).")
      .def("ask", [](DrainModel& d) { d.drain.ask(); }, py::call_guard<py::gil_scoped_release>(),
           "Ask for a pass and wait until it is served.")
      .def("underway", [](DrainModel& d) { return d.watch.underway(); })
      .def("counts", [](DrainModel& d) {
        py::dict out;
        out["flushes"] = d.flushes.load();
        out["decodes"] = d.decodes.load();
        out["held"] = d.drain.held();
        out["begun"] = d.watch.begun();
        return out;
      })
      .def("stop", [](DrainModel& d) { d.drain.stop(); }, py::call_guard<py::gil_scoped_release>());
  m.def("_dropped_session", [](std::vector<int64_t> reads) {
    // CUPTI answers the dropped-count reads with `reads`: the first at start(), one after each flush.
    DroppedCount d;
    size_t i = 0;
    auto read = [&] { return i < reads.size() ? reads[i++] : int64_t{0}; };
    int64_t total = 0;
    d.start(read);
    while (i < reads.size()) d.afterFlush(read, [&](int64_t n) { total += n; });
    py::dict out;
    out["stale"] = d.stale();
    out["dropped"] = total;
    return out;
  }, py::arg("reads"), "Test-only: the tracer's dropped-record count over a session of fake reads.");
  m.def("_cupti_quiet_api", []() {
    py::dict d;
    d["runtime"] = quietRuntimeCbids();
    d["driver"] = quietDriverCbids();
    return d;
  }, "Test-only: the runtime and driver callback ids whose API records the tracer turns off.");
#else
  (void)m;
#endif
}

}  // namespace perfcore
