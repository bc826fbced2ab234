// Span recorder implementation (see spans.h for the threading contract).
#include "spans.h"

#include <new>
#include <string>
#include <unordered_map>

#include "clock.h"
#include "errors.h"

namespace perfcore {

ThreadSpanBuffer::ThreadSpanBuffer(int64_t tid, size_t maxChunks)
    : tid_(tid), maxChunks_(maxChunks < 2 ? 2 : maxChunks), chunks_(new std::atomic<Span*>[maxChunks_]) {
  for (size_t i = 0; i < maxChunks_; ++i) chunks_[i].store(nullptr, std::memory_order_relaxed);
}

ThreadSpanBuffer::~ThreadSpanBuffer() {
  for (size_t i = 0; i < maxChunks_; ++i) delete[] chunks_[i].load(std::memory_order_relaxed);
}

void ThreadSpanBuffer::append(int32_t phase, int64_t step, int64_t startNs, int64_t endNs) {
  const size_t idx = published_.load(std::memory_order_relaxed);
  std::atomic<Span*>& slot = chunks_[(idx / kChunkSpans) % maxChunks_];
  Span* c = slot.load(std::memory_order_acquire);
  if (idx % kChunkSpans == 0) {
    // A new chunk. Its slot still holds the chunk one ring earlier while the reader has not
    // consumed that one: then this span is dropped (reported by SpanRecorder::dropped()).
    if (c != nullptr) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    c = new (std::nothrow) Span[kChunkSpans];
    if (c == nullptr) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    slot.store(c, std::memory_order_release);
  }
  c[idx % kChunkSpans] = Span{step, startNs, endNs, phase};
  published_.store(idx + 1, std::memory_order_release);
}

void ThreadSpanBuffer::drainInto(SpanColumns& out) {
  const size_t end = published_.load(std::memory_order_acquire);
  for (size_t i = drained_; i < end; ++i) {
    const Span& s = chunks_[(i / kChunkSpans) % maxChunks_].load(std::memory_order_acquire)[i % kChunkSpans];
    out.phase_id.push_back(s.phase);
    out.step.push_back(s.step);
    out.start_ns.push_back(s.startNs);
    out.end_ns.push_back(s.endNs);
    out.thread_id.push_back(tid_);
  }
  // The writer only touches chunk published_/kChunkSpans and later ones, so every chunk wholly
  // below `end` is ours to free.
  for (size_t c = drained_ / kChunkSpans; c < end / kChunkSpans; ++c) {
    delete[] chunks_[c % maxChunks_].exchange(nullptr, std::memory_order_acq_rel);
  }
  drained_ = end;
}

namespace {
std::atomic<uint64_t> nextRecorderId{1};

// Per-thread cache of "which buffer is mine in recorder N"; misses go to the registry.
struct LocalCache {
  uint64_t lastId = 0;
  ThreadSpanBuffer* last = nullptr;
  std::unordered_map<uint64_t, ThreadSpanBuffer*> all;
};
// initial-exec: a direct %fs-relative load instead of a __tls_get_addr call on every span
// (the model a dlopen'ed library may use for a few bytes of TLS; glibc reserves room for it).
__attribute__((tls_model("initial-exec"))) thread_local LocalCache tlsCache;
}  // namespace

SpanRecorder::SpanRecorder(size_t maxChunks) : id_(nextRecorderId.fetch_add(1)), maxChunks_(maxChunks) {}

ThreadSpanBuffer& SpanRecorder::local() {
  if (tlsCache.lastId == id_) return *tlsCache.last;
  auto it = tlsCache.all.find(id_);
  ThreadSpanBuffer* buf = nullptr;
  if (it != tlsCache.all.end()) {
    buf = it->second;
  } else {
    std::lock_guard<std::mutex> lock(mutex_);
    buffers_.push_back(std::make_unique<ThreadSpanBuffer>(currentThreadId(), maxChunks_));
    buf = buffers_.back().get();
    tlsCache.all.emplace(id_, buf);
  }
  tlsCache.lastId = id_;
  tlsCache.last = buf;
  return *buf;
}

void SpanRecorder::begin(int32_t phase) {
  local().openStack().emplace_back(phase, nowNs());
}

int64_t SpanRecorder::end(int32_t phase) {
  const int64_t t1 = nowNs();
  ThreadSpanBuffer& buf = local();
  auto& open = buf.openStack();
  if (open.empty()) {
    throw UsageError("phase " + std::to_string(phase) + " was closed but no phase is open on this thread");
  }
  if (open.back().first != phase) {
    throw UsageError("phase " + std::to_string(phase) + " was closed while phase " +
                     std::to_string(open.back().first) + " is the innermost open one");
  }
  const int64_t t0 = open.back().second;
  open.pop_back();
  buf.append(phase, step(), t0, t1);
  return t1 - t0;
}

void SpanRecorder::cancel(int32_t phase) noexcept {
  auto& open = local().openStack();
  if (!open.empty() && open.back().first == phase) open.pop_back();
}

void SpanRecorder::record(int32_t phase, int64_t startNs, int64_t endNs) {
  if (endNs < startNs) throw UsageError("span ends before it starts");
  local().append(phase, step(), startNs, endNs);
}

int64_t SpanRecorder::stepBoundary() {
  if (!local().openStack().empty()) return -1;
  const int64_t t = nowNs();
  step_.fetch_add(1, std::memory_order_relaxed);
  return t;
}

std::vector<int32_t> SpanRecorder::openPhases() {
  std::vector<int32_t> out;
  for (auto& p : local().openStack()) out.push_back(p.first);
  return out;
}

SpanColumns SpanRecorder::drain() {
  SpanColumns out;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& b : buffers_) b->drainInto(out);
  return out;
}

uint64_t SpanRecorder::dropped() {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t n = 0;
  for (auto& b : buffers_) n += b->dropped();
  return n;
}

size_t SpanRecorder::threadCount() {
  std::lock_guard<std::mutex> lock(mutex_);
  return buffers_.size();
}

}  // namespace perfcore
