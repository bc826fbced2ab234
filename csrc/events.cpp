// EventTimer implementation: a free list of events, a FIFO of pairs, cudaEventQuery to resolve.
#include "events.h"

#include <string>
#include <utility>

#include "clock.h"
#include "cuda_check.h"
#include "errors.h"

namespace perfcore {

EventTimer::EventTimer(size_t maxPending) : maxPending_(maxPending) { requireDevice(); }

EventTimer::~EventTimer() {
  // Destructors must not throw; a failed destroy only leaks an event.
  if (anchor_) cudaEventDestroy(anchor_);
  for (auto ev : free_) cudaEventDestroy(ev);
  for (auto& p : pending_) {
    cudaEventDestroy(p.start);
    cudaEventDestroy(p.stop);
  }
}

cudaEvent_t EventTimer::take() {
  if (!free_.empty()) {
    cudaEvent_t ev = free_.back();
    free_.pop_back();
    return ev;
  }
  cudaEvent_t ev;
  // Default flags: timing enabled. Not blocking-sync: we never wait on these per step.
  PERFCORE_CUDA_CHECK(cudaEventCreate(&ev));
  ++created_;
  return ev;
}

void EventTimer::anchorOn(cudaStream_t stream) {
  PERFCORE_CUDA_CHECK(cudaStreamSynchronize(stream));
  anchor_ = take();
  const int64_t t0 = nowNs();
  PERFCORE_CUDA_CHECK(cudaEventRecord(anchor_, stream));
  PERFCORE_CUDA_CHECK(cudaEventSynchronize(anchor_));
  const int64_t t1 = nowNs();
  // The idle stream reached the event between t0 and t1; the midpoint errs by at most half that.
  anchorNs_ = t0 + (t1 - t0) / 2;
}

void EventTimer::begin(int32_t phase, int64_t step, uintptr_t stream) {
  if (anchor_ == nullptr) anchorOn(reinterpret_cast<cudaStream_t>(stream));
  // Bounded memory: at the cap, wait for the oldest pair (recorded long ago, so normally already
  // done) and keep its result for the next resolve().
  while (pending_.size() >= maxPending_ && collect(pending_.front(), true, ready_)) {
    pending_.pop_front();
    for (auto& i : openIdx_) --i;
  }
  Pair p{phase, step, nowNs(), take(), take(), false};
  PERFCORE_CUDA_CHECK(cudaEventRecord(p.start, reinterpret_cast<cudaStream_t>(stream)));
  pending_.push_back(p);
  openIdx_.push_back(pending_.size() - 1);
}

void EventTimer::end(int32_t phase, uintptr_t stream) {
  if (openIdx_.empty()) throw UsageError("EventTimer.end(" + std::to_string(phase) + ") with no open phase");
  Pair& p = pending_[openIdx_.back()];
  if (p.phase != phase) {
    throw UsageError("EventTimer.end(" + std::to_string(phase) + ") while phase " + std::to_string(p.phase) +
                     " is the innermost open one");
  }
  PERFCORE_CUDA_CHECK(cudaEventRecord(p.stop, reinterpret_cast<cudaStream_t>(stream)));
  p.closed = true;
  openIdx_.pop_back();
}

bool EventTimer::collect(Pair& p, bool wait, EventColumns& out) {
  if (!p.closed) return false;
  if (wait) {
    PERFCORE_CUDA_CHECK(cudaEventSynchronize(p.stop));
  } else {
    cudaError_t q = cudaEventQuery(p.stop);
    if (q == cudaErrorNotReady) return false;
    checkCuda(q, "cudaEventQuery");
  }
  float ms = 0.f, fromAnchor = 0.f;
  PERFCORE_CUDA_CHECK(cudaEventElapsedTime(&ms, p.start, p.stop));
  PERFCORE_CUDA_CHECK(cudaEventElapsedTime(&fromAnchor, anchor_, p.start));
  const int64_t gpuNs = static_cast<int64_t>(static_cast<double>(ms) * 1e6);
  const int64_t startNs = anchorNs_ + static_cast<int64_t>(static_cast<double>(fromAnchor) * 1e6);
  out.phase_id.push_back(p.phase);
  out.step.push_back(p.step);
  out.host_start_ns.push_back(p.hostStartNs);
  out.gpu_ns.push_back(gpuNs);
  out.gpu_start_ns.push_back(startNs);
  out.gpu_end_ns.push_back(startNs + gpuNs);
  release(p.start);
  if (startNs + gpuNs - anchorNs_ > 1000000000LL) {  // move the anchor forward (see events.h)
    release(anchor_);
    anchor_ = p.stop;
    anchorNs_ = startNs + gpuNs;
  } else {
    release(p.stop);
  }
  return true;
}

EventColumns EventTimer::resolve(bool wait) {
  EventColumns out = std::move(ready_);
  ready_ = EventColumns{};
  // Pairs resolve in FIFO order: stop at the first unfinished one so indices in openIdx_ stay valid
  // (open pairs are never collected, and they are always at the back).
  while (!pending_.empty()) {
    if (!collect(pending_.front(), wait, out)) break;
    pending_.pop_front();
    for (auto& i : openIdx_) --i;
  }
  return out;
}

}  // namespace perfcore
