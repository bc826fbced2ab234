// ActivityTracer implementation: lifecycle subscribe -> enable -> callbacks -> flush -> unsubscribe.
#include "tracer.h"

#include <cupti.h>

#include <cstdlib>
#include <exception>
#include <string>
#include <utility>

#include "../clock.h"
#include "../errors.h"

namespace perfcore {

namespace {

constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,  // never KIND_KERNEL: it serializes kernels
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
    CUPTI_ACTIVITY_KIND_OVERHEAD,
};

std::string resultString(CUptiResult st) {
  const char* msg = nullptr;
  if (cuptiGetResultString(st, &msg) != CUPTI_SUCCESS || !msg) return "CUPTI error " + std::to_string(st);
  return msg;
}

// What the user can do about a failed call, keyed by the result.
std::string advice(CUptiResult st) {
  switch (st) {
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      return "CUPTI is already held by another profiler in this process (torch.profiler, nsys, DCGM); "
             "stop it, or use the host backend";
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
      return "GPU tracing is not permitted here (needs NVreg_RestrictProfilingToAdminUsers=0 or root, "
             "or a non-virtualized GPU); use the host backend";
    case CUPTI_ERROR_NOT_INITIALIZED:
    case CUPTI_ERROR_INVALID_DEVICE:
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_UNKNOWN:
      return "no usable CUDA device or driver for CUPTI; run on a GPU machine or use the host backend";
    default:
      return "see CUPTI's message";
  }
}

[[noreturn]] void throwCupti(CUptiResult st, const char* call) {
  throw CuptiError(std::string(call) + " failed: " + resultString(st) + "; " + advice(st), st);
}

void CUPTIAPI bufferRequestedTrampoline(uint8_t** buffer, size_t* size, size_t* maxNumRecords) {
  ActivityTracer::instance().onBufferRequested(buffer, size, maxNumRecords);
}

void CUPTIAPI bufferCompletedTrampoline(CUcontext ctx, uint32_t streamId, uint8_t* buffer, size_t size,
                                        size_t validSize) {
  (void)ctx;
  (void)streamId;
  (void)size;
  ActivityTracer::instance().onBufferCompleted(buffer, validSize);
}

uint64_t CUPTIAPI timestampTrampoline() { return static_cast<uint64_t>(nowNs()); }

// Subscribing claims CUPTI's single subscriber slot: the reliable way to find out that
// torch.profiler or nsys already holds it, before we replace their buffer callbacks.
void CUPTIAPI noopCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

}  // namespace

ActivityTracer& ActivityTracer::instance() {
  static ActivityTracer* tracer = new ActivityTracer();  // leaked: CUPTI may call back at exit
  return *tracer;
}

void ActivityTracer::onBufferRequested(uint8_t** buffer, size_t* size, size_t* maxNumRecords) {
  *maxNumRecords = 0;  // as many as fit
  std::lock_guard<std::mutex> lock(mutex_);
  if (!free_.empty()) {
    *buffer = free_.back();
    free_.pop_back();
    *size = bufferBytes_;
    return;
  }
  if (allocated_ >= maxBuffers_) {
    // Cap reached: give CUPTI nothing; it drops records and counts them, and stats() reports it.
    buffersDenied_.fetch_add(1);
    *buffer = nullptr;
    *size = 0;
    return;
  }
  void* p = std::aligned_alloc(8, bufferBytes_);  // CUPTI needs ACTIVITY_RECORD_ALIGNMENT (8)
  if (!p) {
    buffersDenied_.fetch_add(1);
    *buffer = nullptr;
    *size = 0;
    return;
  }
  ++allocated_;
  *buffer = static_cast<uint8_t*>(p);
  *size = bufferBytes_;
}

void ActivityTracer::onBufferCompleted(uint8_t* buffer, size_t validSize) {
  buffersCompleted_.fetch_add(1);
  std::lock_guard<std::mutex> lock(mutex_);
  if (buffer) ready_.push_back(Ready{buffer, validSize});
}

void ActivityTracer::start(size_t bufferBytes, size_t maxBuffers) {
  if (active_.load()) throw UsageError("the CUPTI tracer is already running in this process");
  if (bufferBytes < 64 * 1024) throw UsageError("CUPTI buffer size must be at least 64 KiB");
  if (maxBuffers == 0) throw UsageError("CUPTI buffer cap must be at least 1");
  bufferBytes_ = bufferBytes;
  maxBuffers_ = maxBuffers;

  CUpti_SubscriberHandle sub = nullptr;
  CUptiResult st = cuptiSubscribe(&sub, reinterpret_cast<CUpti_CallbackFunc>(noopCallback), nullptr);
  if (st != CUPTI_SUCCESS) throwCupti(st, "cuptiSubscribe");
  subscriber_ = sub;

  // Attributes and callbacks go in before any kind is enabled (CUPTI samples' order).
  size_t attr = bufferBytes_;
  size_t attrSize = sizeof(attr);
  cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &attrSize, &attr);  // best effort
  st = cuptiActivityRegisterCallbacks(bufferRequestedTrampoline, bufferCompletedTrampoline);
  if (st != CUPTI_SUCCESS) {
    cuptiUnsubscribe(sub);
    subscriber_ = nullptr;
    throwCupti(st, "cuptiActivityRegisterCallbacks");
  }

  // One clock: have CUPTI stamp records with ours. If this CUPTI refuses, measure the offset.
  timestampCallback_ = cuptiActivityRegisterTimestampCallback(timestampTrampoline) == CUPTI_SUCCESS;
  clockOffsetNs_ = 0;
  if (!timestampCallback_) {
    uint64_t t = 0;
    const int64_t a = nowNs();
    if (cuptiGetTimestamp(&t) == CUPTI_SUCCESS) {
      const int64_t b = nowNs();
      clockOffsetNs_ = static_cast<int64_t>(t) - (a + (b - a) / 2);
    }
  }

  for (auto kind : kKinds) {
    st = cuptiActivityEnable(kind);
    if (st != CUPTI_SUCCESS) {
      disableAll();
      cuptiUnsubscribe(sub);
      subscriber_ = nullptr;
      throwCupti(st, "cuptiActivityEnable");
    }
    enabledKinds_.push_back(kind);
  }
  active_.store(true);
}

void ActivityTracer::disableAll() {
  for (int kind : enabledKinds_) cuptiActivityDisable(static_cast<CUpti_ActivityKind>(kind));
  enabledKinds_.clear();
}

void ActivityTracer::drainReady(ActivityColumns& out) {
  std::vector<Ready> ready;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ready.swap(ready_);
  }
  // Decode outside the lock: CUPTI may be asking for buffers meanwhile.
  std::exception_ptr failure;
  for (auto& r : ready) {
    if (!failure) {
      try {
        records_ += decodeBuffer(r.buffer, r.validSize, out, names_, clockOffsetNs_);
      } catch (...) {
        failure = std::current_exception();
      }
    }
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(r.buffer);
  }
  out.names = names_.names();
  if (failure) std::rethrow_exception(failure);
}

ActivityColumns ActivityTracer::collect() {
  ActivityColumns out;
  if (active_.load()) {
    // Never under mutex_: the flush calls bufferCompleted on this thread, which takes it.
    CUptiResult st = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (st != CUPTI_SUCCESS) throwCupti(st, "cuptiActivityFlushAll");
  }
  drainReady(out);
  return out;
}

ActivityColumns ActivityTracer::stop() {
  if (!active_.load()) throw UsageError("the CUPTI tracer is not running");
  // Disable first, then flush: records already produced stay in their buffers and are delivered.
  disableAll();
  const CUptiResult st = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (subscriber_) cuptiUnsubscribe(static_cast<CUpti_SubscriberHandle>(subscriber_));
  subscriber_ = nullptr;
  active_.store(false);
  ActivityColumns out;
  drainReady(out);
  if (st != CUPTI_SUCCESS) throwCupti(st, "cuptiActivityFlushAll");
  return out;
}

TracerStats ActivityTracer::stats() {
  TracerStats s;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    s.buffersAllocated = static_cast<int64_t>(allocated_);
  }
  s.buffersCompleted = buffersCompleted_.load();
  s.buffersDenied = buffersDenied_.load();
  size_t dropped = 0;
  // Context nullptr / stream 0: CUPTI's global count of records it had no buffer room for.
  if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS) {
    droppedRecords_.store(static_cast<int64_t>(dropped));
  }
  s.droppedRecords = droppedRecords_.load();
  s.records = records_;
  s.timestampCallback = timestampCallback_;
  s.clockOffsetNs = clockOffsetNs_;
  return s;
}

void ActivityTracer::pushExternalId(uint64_t id) {
  CUptiResult st = cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
  if (st != CUPTI_SUCCESS) throwCupti(st, "cuptiActivityPushExternalCorrelationId");
}

void ActivityTracer::popExternalId() {
  uint64_t id = 0;
  CUptiResult st = cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &id);
  if (st != CUPTI_SUCCESS) throwCupti(st, "cuptiActivityPopExternalCorrelationId");
}

uint32_t cuptiCompiledVersion() { return CUPTI_API_VERSION; }

uint32_t cuptiLoadedVersion() {
  uint32_t v = 0;
  if (cuptiGetVersion(&v) != CUPTI_SUCCESS) return 0;
  return v;
}

}  // namespace perfcore
