// Lock-free per-thread span recorder: (phase id, step, start_ns, end_ns, thread) appended on the
// hot path without locks, drained to columns by any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "columns.h"

namespace perfcore {

struct Span {
  int64_t step;
  int64_t startNs;
  int64_t endNs;
  int32_t phase;
};

// One writer (its thread), one reader at a time (drain, under the registry mutex).
// Spans live in fixed-size chunks that never move, so the writer publishes with a single
// release store and the reader never sees a half-written span. Chunks the reader has fully
// consumed are freed, and their slots in the ring of chunk pointers are reused: memory stays
// flat however long the run, and spans are dropped only while the reader is a whole ring
// (maxChunks * kChunkSpans spans, 67M by default) behind.
class ThreadSpanBuffer {
 public:
  static constexpr size_t kChunkSpans = 4096;
  static constexpr size_t kDefaultMaxChunks = 16384;

  ThreadSpanBuffer(int64_t tid, size_t maxChunks);
  ~ThreadSpanBuffer();

  // Writer side (owning thread only).
  void append(int32_t phase, int64_t step, int64_t startNs, int64_t endNs);
  std::vector<std::pair<int32_t, int64_t>>& openStack() { return open_; }

  // Reader side (registry mutex held).
  void drainInto(SpanColumns& out);

  int64_t threadId() const { return tid_; }
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  const int64_t tid_;
  const size_t maxChunks_;
  std::unique_ptr<std::atomic<Span*>[]> chunks_;  // ring: chunk k lives in slot k % maxChunks_
  std::atomic<size_t> published_{0};
  size_t drained_ = 0;
  std::atomic<uint64_t> dropped_{0};
  std::vector<std::pair<int32_t, int64_t>> open_;  // (phase, start) of phases open on this thread
};

class SpanRecorder {
 public:
  // maxChunks: how many chunks of spans each thread may hold undrained (tests make it small).
  explicit SpanRecorder(size_t maxChunks = ThreadSpanBuffer::kDefaultMaxChunks);
  SpanRecorder(const SpanRecorder&) = delete;
  SpanRecorder& operator=(const SpanRecorder&) = delete;

  // Open/close a phase on the calling thread; phases nest, and close in reverse order.
  void begin(int32_t phase);
  // Returns the closed span's duration in ns.
  int64_t end(int32_t phase);
  // Takes back the innermost open phase (if it is `phase`) without recording it: used when a
  // phase's other parts (CUDA events, CUPTI tag) fail to open. Never throws.
  void cancel(int32_t phase) noexcept;
  // A span measured elsewhere (e.g. in Python with time.perf_counter_ns, the same clock).
  void record(int32_t phase, int64_t startNs, int64_t endNs);

  void setStep(int64_t step) { step_.store(step, std::memory_order_relaxed); }
  // Ends the step: -1 if a phase is still open on the calling thread (nothing changes), else the
  // boundary's time, and later spans belong to the next step. One call per step from Python.
  int64_t stepBoundary();
  int64_t step() const { return step_.load(std::memory_order_relaxed); }

  // Phases open on the calling thread, outermost first.
  std::vector<int32_t> openPhases();
  SpanColumns drain();
  uint64_t dropped();
  size_t threadCount();

 private:
  ThreadSpanBuffer& local();

  const uint64_t id_;  // never reused, so a thread's cached buffer can't outlive its recorder unseen
  const size_t maxChunks_;
  std::atomic<int64_t> step_{0};
  std::mutex mutex_;  // guards buffers_ (registration and drain), never taken on the hot path
  std::vector<std::unique_ptr<ThreadSpanBuffer>> buffers_;
};

}  // namespace perfcore
