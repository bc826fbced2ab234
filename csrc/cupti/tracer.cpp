// ActivityTracer implementation: lifecycle subscribe -> enable -> callbacks -> flush -> unsubscribe.
#include "tracer.h"

#include "records.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <iterator>
#include <string>
#include <utility>

#include "../clock.h"
#include "../errors.h"
#include "claim.h"

namespace perfcore {

namespace {

// The kinds the attribution needs: every kernel, copy and memset, with its GPU start and end.
constexpr CUpti_ActivityKind kWorkKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,  // never KIND_KERNEL: it serializes kernels
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,
};
// With apiRecords: one record per runtime and driver call as well. CUPTI writes an
// EXTERNAL_CORRELATION record only before an API activity record made while an id is pushed
// (cuptiActivityPushExternalCorrelationId), so tagging launches with their phase needs the API kinds
// on: RUNTIME for torch's launches, DRIVER for cuLaunchKernel (Triton) and for graph launches (a
// graph's kernels carry the correlation id of the driver call). Their records also give each
// launch's host time, which places launches made from threads with no pushed id (autograd's device
// threads) in the phase open at that time. Every launch then pays for two API records (and CUPTI's
// callbacks around both calls): without them the kernels are placed in their phases by the phases'
// CUDA events instead (capture/launches.py).
constexpr CUpti_ActivityKind kApiKinds[] = {
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_DRIVER,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
    CUPTI_ACTIVITY_KIND_OVERHEAD,
};

// Open while handOver() waits for a runtime call's exit callsite to detach CUPTI there.
DetachGate detachGate;

void CUPTIAPI detachAtExit(void*, CUpti_CallbackDomain domain, CUpti_CallbackId, const void* data) {
  const auto* info = static_cast<const CUpti_CallbackData*>(data);
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API || info->callbackSite != CUPTI_API_EXIT) return;
  if (detachGate.take()) detachGate.finished(cuptiFinalize() == CUPTI_SUCCESS);
}

std::string resultString(CUptiResult st) {
  const char* msg = nullptr;
  if (cuptiGetResultString(st, &msg) != CUPTI_SUCCESS || !msg) return "CUPTI error " + std::to_string(st);
  return msg;
}

// What the user can do about a failed call, keyed by the result.
std::string advice(CUptiResult st) {
  switch (st) {
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      return "CUPTI is already held by another profiler in this process (torch.profiler, nsys, DCGM), which "
             "keeps it until the process ends (torch.profiler does once it has run): restart the kernel or "
             "script without it to trace kernels, or time with CUDA events";
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
      return "GPU tracing is not permitted here (needs NVreg_RestrictProfilingToAdminUsers=0 or root, "
             "or a non-virtualized GPU); use the host backend";
    case CUPTI_ERROR_NOT_INITIALIZED:
    case CUPTI_ERROR_INVALID_DEVICE:
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_UNKNOWN:
      return "no usable CUDA device or driver for CUPTI; run on a GPU machine (on Colab: Runtime > Change "
             "runtime type > a GPU) or use the host backend";
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
  (void)size;
  ActivityTracer::instance().onBufferCompleted(ctx, streamId, buffer, validSize);
}

uint64_t CUPTIAPI timestampTrampoline() { return static_cast<uint64_t>(nowNs()); }

// Subscribing claims CUPTI's subscriber slot: the way to find out that torch.profiler or nsys
// already holds it, before we replace their buffer callbacks (claimSubscriber). The subscriber's
// callbacks are on for the graph capture calls only (CaptureWatch).
void CUPTIAPI captureCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  const auto* info = static_cast<const CUpti_CallbackData*>(data);
  const bool driver = domain == CUPTI_CB_DOMAIN_DRIVER_API;
  if (!driver && domain != CUPTI_CB_DOMAIN_RUNTIME_API) return;
  const bool atExit = info->callbackSite == CUPTI_API_EXIT;
  // CUresult and cudaError_t alike: 0 is success.
  const bool ok = atExit && info->functionReturnValue && *static_cast<const int*>(info->functionReturnValue) == 0;
  ActivityTracer::instance().captures().onCall(driver, cbid, atExit, ok);
}

// Turns the subscriber's callbacks on for the capture calls; false if CUPTI refused one (the drain
// then flushes whatever runs, as before the watch).
bool watchCaptures(CUpti_SubscriberHandle sub) {
  bool all = true;
  for (uint32_t id : CaptureWatch::kRuntimeBegin) all &= cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, id) == CUPTI_SUCCESS;
  for (uint32_t id : CaptureWatch::kRuntimeEnd) all &= cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, id) == CUPTI_SUCCESS;
  for (uint32_t id : CaptureWatch::kDriverBegin) all &= cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, id) == CUPTI_SUCCESS;
  for (uint32_t id : CaptureWatch::kDriverEnd) all &= cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, id) == CUPTI_SUCCESS;
  return all;
}

size_t readDropped() {
  size_t dropped = 0;
  return cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS ? dropped : 0;
}

CUptiResult subscribeNamed(CUpti_SubscriberHandle* sub, char* oldName, size_t oldSize) {
#ifdef CUpti_SubscriberParams_STRUCT_SIZE
  // cuptiSubscribe_v2 (CUDA 13): CUPTI names any other subscriber in oldSubscriberName.
  CUpti_SubscriberParams p;
  std::memset(&p, 0, sizeof(p));
  p.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  p.subscriberName = kSubscriberName;
  p.oldSubscriberName = oldName;
  p.oldSubscriberSize = oldSize;
  return cuptiSubscribe_v2(sub, reinterpret_cast<CUpti_CallbackFunc>(captureCallback), nullptr, &p);
#else
  (void)oldName;
  (void)oldSize;
  return cuptiSubscribe(sub, reinterpret_cast<CUpti_CallbackFunc>(captureCallback), nullptr);
#endif
}

}  // namespace

ActivityTracer& ActivityTracer::instance() {
  static ActivityTracer* tracer = new ActivityTracer();  // leaked: CUPTI may call back at exit
  return *tracer;
}

void ActivityTracer::onBufferRequested(uint8_t** buffer, size_t* size, size_t* maxNumRecords) {
  *maxNumRecords = 0;  // as many as fit
  if (refuseBuffers_.load()) {  // stopped, a kind left on: what CUPTI has no room for is lost
    buffers_.refuse(buffer, size);
    return;
  }
  buffers_.request(buffer, size);
}

int ActivityTracer::setDeviceBufferBytes(size_t bytes) {
  size_t attr = bytes, attrSize = sizeof(attr);
  return static_cast<int>(cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &attrSize, &attr));
}

void ActivityTracer::addDropped() {
  // Buffers have not been per context or stream since CUDA 6.0 (bufferCompleted's context and
  // stream are always NULL and 0): the one count is the global queue's, read after each flush.
  // CUPTI resets it to zero when it is read, so every read is added, never stored.
  drops_.afterFlush(readDropped, [this](int64_t n) { buffers_.addDropped(n); });
}

void ActivityTracer::onBufferCompleted(void* context, uint32_t streamId, uint8_t* buffer, size_t validSize) {
  (void)context;
  (void)streamId;
  buffers_.complete(buffer, validSize);
  drain_.wake();  // decode it soon, so the buffer goes back to the pool
}

void ActivityTracer::measureClockOffset() {
  uint64_t t = 0;
  const int64_t a = nowNs();
  if (cuptiGetTimestamp(&t) != CUPTI_SUCCESS) return;
  const int64_t b = nowNs();
  const int64_t offset = static_cast<int64_t>(t) - (a + (b - a) / 2);
  clockOffsetNs_.store(offset);
  buffers_.setClockOffset(offset);
}

void ActivityTracer::start(const TracerConfig& config) {
  if (active_.load()) {
    // One CUPTI subscriber per process: a second StepTimer(kernels=True), or a notebook cell run
    // twice, gets the same error as when another profiler holds CUPTI, and falls back the same way.
    throw CuptiError("perfcore's CUPTI tracer is already running in this process (another StepTimer with "
                     "kernels=True is open); close() it first, or time with CUDA events",
                     CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  }
  if (config.bufferBytes < 64 * 1024) throw UsageError("CUPTI buffer size must be at least 64 KiB");
  if (config.maxBuffers == 0) throw UsageError("CUPTI buffer cap must be at least 1");
  config_ = config;
  buffers_.reset(config.bufferBytes, config.maxBuffers, config.maxPendingRecords);
  buffers_.setNullSafe(nullBufferSafe(cuptiLoadedVersion()));
  flushes_.store(0);
  flushNs_.store(0);
  forcedFlushNs_.store(0);
  drainError_.store(0);

  CUpti_SubscriberHandle sub = nullptr;
  const Claim claim = claimSubscriber(&sub, subscribeNamed, cuptiUnsubscribe);
  CUptiResult st = claim.status;
  if (st != CUPTI_SUCCESS && !claim.other.empty()) {
    throw CuptiError("cuptiSubscribe failed: " + resultString(st) + " (in use by " + claim.other + "); " + advice(st),
                     st);
  }
  if (st != CUPTI_SUCCESS) throwCupti(st, "cuptiSubscribe");
  subscriber_ = sub;
  captures_.reset();
  capturesWatched_ = watchCaptures(sub);
  const auto giveUp = [this, sub](CUptiResult st, const char* call) {
    disableAll();
    // A kind kept on (the 13.0 deadlock guard) still asks for buffers, with no drain thread to
    // take them back: refused from here, as after stop().
    if (concurrentKernelOn_) refuseBuffers_.store(true);
    cuptiUnsubscribe(sub);
    subscriber_ = nullptr;
    throwCupti(st, call);
  };

  // Attributes and callbacks go in before any kind is enabled (CUPTI samples' order). The device
  // buffer size reaches only contexts created later; stats() reports what CUPTI holds.
  if (config_.deviceBufferBytes > 0) setDeviceBufferBytes(config_.deviceBufferBytes);  // best effort
  ++sessions_;
  const uint32_t loaded = cuptiLoadedVersion();
  graphIdsUntrusted_ = !graphIdsTrusted(loaded, sessions_);
  apiFiltered_ = 0;
  refuseBuffers_.store(false);
  st = cuptiActivityRegisterCallbacks(bufferRequestedTrampoline, bufferCompletedTrampoline);
  if (st != CUPTI_SUCCESS) giveUp(st, "cuptiActivityRegisterCallbacks");

  // One clock: have CUPTI stamp records with ours. If this CUPTI refuses, measure the offset
  // (again at every flush, and report how far it moved).
  timestampCallback_ = cuptiActivityRegisterTimestampCallback(timestampTrampoline) == CUPTI_SUCCESS;
  clockOffsetNs_.store(0);
  buffers_.setClockOffset(0);
  if (!timestampCallback_) measureClockOffset();
  clockOffsetStartNs_ = clockOffsetNs_.load();

  // A count CUPTI kept from before this session (13.0 GA reports one) is not this session's loss.
  drops_.start(readDropped);
  std::vector<CUpti_ActivityKind> kinds(std::begin(kWorkKinds), std::end(kWorkKinds));
  apiRecords_ = config_.apiRecords;
  if (apiRecords_) kinds.insert(kinds.end(), std::begin(kApiKinds), std::end(kApiKinds));
  for (auto kind : kinds) {
    if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && concurrentKernelOn_) continue;  // still on
    st = cuptiActivityEnable(kind);
    if (st != CUPTI_SUCCESS) giveUp(st, "cuptiActivityEnable");
    enabledKinds_.push_back(kind);
  }
  if (concurrentKernelOn_) enabledKinds_.push_back(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  // The noisy ids' records go off after the kinds are on (enabling a kind turns its ids back on).
  if (apiRecords_) apiFiltered_ = quietApiRecords();
  drain_.start(config_.drainPeriodMs, DrainThread::Pass{
                                          [this] { flushAndDecode(); },
                                          [this] { buffers_.decodeReady(); },
                                          [this] { return captures_.underway(); },
                                          [this] { return buffers_.hasReady(); },
                                      });
  active_.store(true);
}

void ActivityTracer::disableAll() {
  // In CUDA 13.0 before its Update 1, disabling CONCURRENT_KERNEL may deadlock (CUPTI release notes):
  // there it stays enabled, the pool refuses every later buffer (CUPTI drops and counts those
  // records, nothing is kept), and the next start() finds it still on.
  const bool keepKernels = !disableKernelSafe(cuptiLoadedVersion());
  for (int kind : enabledKinds_) {
    if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && keepKernels) {
      concurrentKernelOn_ = true;
      continue;
    }
    cuptiActivityDisable(static_cast<CUpti_ActivityKind>(kind));
  }
  enabledKinds_.clear();
}

void ActivityTracer::flushAndDecode() {
  // Default flush: buffers whose records are all complete, full or not; no forced flush, which
  // would also hand over buffers with incomplete records and is meant for the end of a session.
  const int64_t t0 = nowNs();
  const CUptiResult st = cuptiActivityFlushAll(0);
  flushNs_.fetch_add(nowNs() - t0);
  flushes_.fetch_add(1);
  if (st != CUPTI_SUCCESS) drainError_.store(static_cast<int>(st));
  if (!timestampCallback_) measureClockOffset();
  addDropped();
  buffers_.decodeReady();
}

ActivityColumns ActivityTracer::collect() {
  if (active_.load()) drain_.ask();
  if (const int st = drainError_.exchange(0)) throwCupti(static_cast<CUptiResult>(st), "cuptiActivityFlushAll");
  return buffers_.take();
}

ActivityColumns ActivityTracer::stop() {
  if (!active_.load()) throw UsageError("the CUPTI tracer is not running");
  drain_.stop();
  // Disable first, then the one forced flush: records already produced stay in their buffers
  // and are delivered, incomplete ones included.
  disableAll();
  const int64_t t0 = nowNs();
  const CUptiResult st = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  forcedFlushNs_.store(nowNs() - t0);
  addDropped();
  buffers_.decodeReady();
  if (concurrentKernelOn_) refuseBuffers_.store(true);
  if (subscriber_) cuptiUnsubscribe(static_cast<CUpti_SubscriberHandle>(subscriber_));
  subscriber_ = nullptr;
  active_.store(false);
  ActivityColumns out = buffers_.take();
  if (st != CUPTI_SUCCESS) throwCupti(st, "cuptiActivityFlushAll");
  return out;
}

bool ActivityTracer::finalizeAtApiExit() {
  CUpti_SubscriberHandle sub = nullptr;
  if (cuptiSubscribe(&sub, reinterpret_cast<CUpti_CallbackFunc>(detachAtExit), nullptr) != CUPTI_SUCCESS) return false;
  const CUpti_CallbackId cbid = CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020;
  bool detached = false;
  if (cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, cbid) == CUPTI_SUCCESS) {
    detachGate.open();
    int device = 0;
    cudaGetDevice(&device);  // its exit callsite detaches CUPTI (from whichever thread gets there first)
    detached = detachGate.close();  // waits for a finalize another thread is still inside
  }
  if (!detached) cuptiUnsubscribe(sub);  // finalize frees the subscriber with the rest
  return detached;
}

ActivityColumns ActivityTracer::handOver() {
  ActivityColumns out = stop();
  handedOver_ = true;
  finalized_ = !concurrentKernelOn_ && finalizeAtApiExit();
  if (finalized_) concurrentKernelOn_ = false;
  return out;
}

TracerStats ActivityTracer::stats() {
  TracerStats s;
  s.buffers = buffers_.stats();
  s.flushes = flushes_.load();
  s.flushNs = flushNs_.load();
  s.forcedFlushNs = forcedFlushNs_.load();
  s.timestampCallback = timestampCallback_;
  s.clockOffsetNs = clockOffsetNs_.load();
  s.clockDriftNs = timestampCallback_ ? 0 : s.clockOffsetNs - clockOffsetStartNs_;
  size_t attr = 0, attrSize = sizeof(attr);
  if (cuptiActivityGetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &attrSize, &attr) == CUPTI_SUCCESS) {
    s.deviceBufferBytes = static_cast<int64_t>(attr);
  }
  s.session = sessions_;
  s.apiCallsFiltered = apiFiltered_;
  s.graphIdsUntrusted = graphIdsUntrusted_;
  s.concurrentKernelLeftOn = concurrentKernelOn_;
  s.handedOver = handedOver_;
  s.finalized = finalized_;
  s.apiRecords = apiRecords_;
  s.staleDropped = drops_.stale();
  s.capturesWatched = capturesWatched_;
  s.capturesSeen = captures_.begun();
  s.flushesHeld = drain_.held();
  return s;
}

void ActivityTracer::pushExternalId(uint64_t id) {
  CUptiResult st = cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
  if (st != CUPTI_SUCCESS) throwCupti(st, "cuptiActivityPushExternalCorrelationId");
}

void ActivityTracer::popExternalId() {
  uint64_t id = 0;
  CUptiResult st = cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &id);
  if (st != CUPTI_SUCCESS && st != CUPTI_ERROR_QUEUE_EMPTY) throwCupti(st, "cuptiActivityPopExternalCorrelationId");
}

uint32_t cuptiCompiledVersion() { return CUPTI_API_VERSION; }

uint32_t cuptiLoadedVersion() {
  uint32_t v = 0;
  if (cuptiGetVersion(&v) != CUPTI_SUCCESS) return 0;
  return v;
}

}  // namespace perfcore
