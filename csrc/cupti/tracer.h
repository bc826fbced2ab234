// CUPTI activity tracer: CUPTI's lifecycle (subscribe -> enable -> callbacks -> flush ->
// unsubscribe) around an ActivityBuffers pool, drained continuously by a thread of its own.
//
// Threading rules (after kineto): CUPTI's C callbacks are tiny trampolines into this object;
// they never throw, print, or decode. The drain thread makes the periodic default flush
// (cuptiActivityFlushAll(0): completed buffers only, no stall of the threads launching work)
// and decodes; it never holds a lock across the flush, which calls bufferCompleted on it.
// The forced flush happens once, at stop().
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "activity_columns.h"
#include "buffers.h"
#include "capture_watch.h"
#include "claim.h"
#include "drain.h"

namespace perfcore {

struct TracerConfig {
  size_t bufferBytes = 8u << 20;  // host buffers handed to CUPTI
  // CUPTI's per-context device buffer (CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE); 0 leaves CUPTI's
  // own default. It applies only to device buffers allocated later (new contexts), so it is its
  // own setting, best made with setDeviceBufferBytes() before CUDA is initialised.
  size_t deviceBufferBytes = 0;
  size_t maxBuffers = 64;
  int64_t drainPeriodMs = 200;
  int64_t maxPendingRecords = 8'000'000;  // decoded but not yet collected (~0.5 GB of columns)
  // Runtime and driver API records (and external correlation) beside the kernels, copies and
  // memsets: what tags launches with their phase by correlation id (tracer.cpp, kApiKinds).
  bool apiRecords = true;
};

struct TracerStats {
  BufferStats buffers;
  int64_t flushes = 0;
  int64_t flushNs = 0;  // time spent in cuptiActivityFlushAll, all on the drain thread but the last
  int64_t forcedFlushNs = 0;
  bool timestampCallback = false;  // true: CUPTI stamps records with perfcore's clock directly
  int64_t clockOffsetNs = 0;       // else: cupti_time - perfcore_time, re-measured at each flush
  int64_t clockDriftNs = 0;        // how far that offset moved since start
  int64_t deviceBufferBytes = 0;   // CUPTI's device buffer size as it reads back (0: unknown)
  int64_t session = 0;             // this process's tracing sessions so far, this one included
  int64_t apiCallsFiltered = 0;    // runtime/driver callback ids whose records were turned off
  // Workarounds for known bugs of the loaded CUPTI (release notes), by name: see guards().
  bool graphIdsUntrusted = false;       // graph kernels' correlation ids wrong after the first session
  bool concurrentKernelLeftOn = false;  // disabling CONCURRENT_KERNEL may deadlock: not disabled
  bool handedOver = false;              // handOver() ran: CUPTI is the next client's
  bool finalized = false;               // ... and cuptiFinalize detached CUPTI before that
  bool apiRecords = false;              // API and external-correlation records were on
  int64_t staleDropped = 0;             // a dropped count CUPTI held from before the session: not ours
  bool capturesWatched = false;         // the capture calls' callbacks are on (no flush during a capture)
  int64_t capturesSeen = 0;             // capture begin calls seen
  int64_t flushesHeld = 0;              // drain passes that made no flush: a graph capture was underway
};

class ActivityTracer {
 public:
  static ActivityTracer& instance();

  // Enables the activity kinds, claims CUPTI for this process and starts the drain thread.
  // Throws CuptiError (with the CUptiResult) if CUPTI is held by another profiler (perfcore's
  // own tracer included: one per process), privileges are missing, or there is no device.
  void start(const TracerConfig& config);
  // What was drained so far (after one more default flush); tracing goes on.
  ActivityColumns collect();
  // Disable, forced flush, stop the drain thread, release CUPTI; returns the rest.
  ActivityColumns stop();
  bool active() const { return active_.load(); }
  // Hands CUPTI to the next client (torch.profiler's kineto, which subscribes once per process)
  // for good: stop(), then cuptiFinalize so that client finds CUPTI as if never used (no
  // timestamp callback or buffer callbacks of ours left). Finalize runs at the exit callsite of
  // a runtime call made here, where CUPTI's documentation calls it safe, after the caller has
  // synchronized the GPUs; where disabling CONCURRENT_KERNEL may deadlock (kept on, see
  // disableAll) it is skipped. Returns the rest of the records; stats().finalized says if it ran.
  ActivityColumns handOver();
  TracerStats stats();
  double pendingShare() const { return buffers_.pendingShare(); }  // see ActivityBuffers::pendingShare
  // Sets CUPTI's device buffer size now (before CUDA initialises, so the first context gets it).
  // Returns the CUptiResult; 0 is success.
  static int setDeviceBufferBytes(size_t bytes);

  // Tag the work launched by this thread until pop with `id` (EXTERNAL_CORRELATION records).
  // The id stack lives in libcupti, so it serves whichever client traces: this tracer, or the
  // cupti-python backend in the same process (setExternalTagging).
  void pushExternalId(uint64_t id);
  void popExternalId();  // a pop with nothing pushed (tagging switched on mid-phase) is ignored
  // Only with API records on: CUPTI writes no external-correlation record without them.
  bool tagging() const {
    return (active_.load(std::memory_order_relaxed) && apiRecords_) || externalTagging_.load(std::memory_order_relaxed);
  }
  CaptureWatch& captures() { return captures_; }
  void setExternalTagging(bool on) { externalTagging_.store(on); }

  // CUPTI trampolines (public so the C callbacks can reach them).
  void onBufferRequested(uint8_t** buffer, size_t* size, size_t* maxNumRecords);
  void onBufferCompleted(void* context, uint32_t streamId, uint8_t* buffer, size_t validSize);

 private:
  ActivityTracer() = default;
  void disableAll();
  void flushAndDecode();
  void measureClockOffset();
  void addDropped();
  bool finalizeAtApiExit();

  ActivityBuffers buffers_;
  TracerConfig config_;
  std::atomic<bool> active_{false};
  std::atomic<bool> externalTagging_{false};
  std::vector<int> enabledKinds_;
  int64_t sessions_ = 0;
  int64_t apiFiltered_ = 0;
  bool handedOver_ = false;
  bool finalized_ = false;
  bool graphIdsUntrusted_ = false;
  bool concurrentKernelOn_ = false;  // left enabled past a stop (see kDisableKernelSafeVersion)
  std::atomic<bool> refuseBuffers_{false};  // after stop, while a kind stays on: CUPTI drops, we keep nothing
  void* subscriber_ = nullptr;
  bool timestampCallback_ = false;
  int64_t clockOffsetStartNs_ = 0;
  std::atomic<int64_t> clockOffsetNs_{0};

  std::atomic<bool> apiRecords_{true};
  DroppedCount drops_;
  CaptureWatch captures_;
  bool capturesWatched_ = false;
  DrainThread drain_;  // declared after what its passes use, so it stops (is destroyed) first
  std::atomic<int64_t> flushes_{0}, flushNs_{0}, forcedFlushNs_{0};
  std::atomic<int> drainError_{0};  // a CUptiResult the drain thread met, raised by the next collect
};

// Which workarounds a loaded CUPTI API version needs (pure, for tests): graph kernels'
// correlation ids are wrong in sessions after the first (fixed in CUDA 13.1 Update 1), and
// disabling CONCURRENT_KERNEL may deadlock in 13.0 (fixed in 13.0 Update 1; 12.x CUPTIs report
// API versions below 130000, and kineto disables the kind at every profiler stop there).
// Decided by the API version cuptiGetVersion reports, as cupti_version.h numbers it from 13.0
// (xxyyzz, zz CUPTI's own update): v130000 is 13.0 GA, v130001 13.0 Update 1 (the library
// nvidia-cuda-cupti 13.0.85 ships, and the H200's torch 2.11+cu130), so the deadlock guard
// lifts at 130001. Where the fixed release's number is not documented yet (13.1 Update 1's), the
// guard lifts at the next minor.
constexpr uint32_t kGraphIdsFixedVersion = 130200;
constexpr uint32_t kDisableKernelUnsafeFrom = 130000;
constexpr uint32_t kDisableKernelSafeVersion = 130001;
inline bool graphIdsTrusted(uint32_t loadedVersion, int64_t session) {
  return session <= 1 || loadedVersion >= kGraphIdsFixedVersion;
}
inline bool disableKernelSafe(uint32_t loadedVersion) {
  return loadedVersion < kDisableKernelUnsafeFrom || loadedVersion >= kDisableKernelSafeVersion;
}
// A null buffer answers a buffer request safely from API 27 (CUDA 12.9; 13.x numbers its API
// 130000 and up): CUPTI then drops the records and counts them. Before, libcupti crashes on it
// (kineto gates the refusal the same way and otherwise hands out a buffer and discards it).
constexpr uint32_t kNullBufferSafeVersion = 27;
inline bool nullBufferSafe(uint32_t loadedVersion) { return loadedVersion >= kNullBufferSafeVersion; }

// The runtime and driver callback ids whose API records the tracer turns off: calls torch makes
// constantly that launch nothing. Empty where this CUPTI has no per-id switch (before 12.6).
std::vector<uint32_t> quietRuntimeCbids();
std::vector<uint32_t> quietDriverCbids();
// Turns those records off (after the API kinds are enabled); returns how many ids CUPTI accepted.
int64_t quietApiRecords();

// Compiled-against and loaded CUPTI API versions.
uint32_t cuptiCompiledVersion();
uint32_t cuptiLoadedVersion();

}  // namespace perfcore
