// CUPTI activity tracer: buffers, enabled kinds, flush, and decode into columns.
//
// Threading rules (after kineto): CUPTI's C callbacks are tiny trampolines into this object;
// they never throw, print, or decode. mutex_ guards the buffer pool and the ready queue only,
// and is never held across cuptiActivityFlushAll (which calls bufferCompleted on this thread).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "activity_columns.h"
#include "decoder.h"

namespace perfcore {

struct TracerStats {
  int64_t buffersAllocated = 0;
  int64_t buffersCompleted = 0;
  int64_t buffersDenied = 0;   // requests refused because the pool cap was reached
  int64_t droppedRecords = 0;  // as CUPTI reports them (buffer full, or no buffer given)
  int64_t records = 0;
  bool timestampCallback = false;  // true: CUPTI stamps records with perfcore's clock directly
  int64_t clockOffsetNs = 0;       // else: cupti_time - perfcore_time, subtracted when decoding
};

class ActivityTracer {
 public:
  static ActivityTracer& instance();

  // Enables the activity kinds and claims CUPTI for this process. Throws CuptiError (with the
  // CUptiResult) if CUPTI is held by another profiler, privileges are missing, or no device.
  void start(size_t bufferBytes, size_t maxBuffers);
  // Flushes CUPTI and decodes every completed buffer on the calling thread.
  ActivityColumns collect();
  // collect(), then disable everything and release CUPTI.
  ActivityColumns stop();
  bool active() const { return active_.load(); }
  TracerStats stats();

  // Tag the kernels launched by this thread until pop with `id` (EXTERNAL_CORRELATION records).
  void pushExternalId(uint64_t id);
  void popExternalId();

  // CUPTI trampolines (public so the C callbacks can reach them).
  void onBufferRequested(uint8_t** buffer, size_t* size, size_t* maxNumRecords);
  void onBufferCompleted(uint8_t* buffer, size_t validSize);

 private:
  ActivityTracer() = default;
  void drainReady(ActivityColumns& out);
  void disableAll();

  std::mutex mutex_;  // guards free_, ready_, allocated_
  std::vector<uint8_t*> free_;
  struct Ready {
    uint8_t* buffer;
    size_t validSize;
  };
  std::vector<Ready> ready_;
  size_t allocated_ = 0;

  size_t bufferBytes_ = 0;
  size_t maxBuffers_ = 0;
  std::atomic<bool> active_{false};
  std::atomic<int64_t> buffersCompleted_{0};
  std::atomic<int64_t> buffersDenied_{0};
  std::atomic<int64_t> droppedRecords_{0};
  int64_t records_ = 0;
  bool timestampCallback_ = false;
  int64_t clockOffsetNs_ = 0;
  std::vector<int> enabledKinds_;
  void* subscriber_ = nullptr;
  NameTable names_;
};

// Compiled-against and loaded CUPTI API versions.
uint32_t cuptiCompiledVersion();
uint32_t cuptiLoadedVersion();


}  // namespace perfcore
