// EventTimer implementation: a free list of events, a FIFO of pairs, cudaEventQuery to resolve.
#include "events.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>
#include <utility>

#include "clock.h"
#include "cuda_check.h"
#include "errors.h"

namespace perfcore {

namespace {
// Makes `device` current for a scope and puts the caller's device back after (no-op when it is
// current already: one cudaGetDevice, which the runtime answers from thread state).
class OnDevice {
 public:
  OnDevice(const CudaCalls& rt, int device) : rt_(rt) {
    if (rt_.getDevice(&prev_) == cudaSuccess && prev_ != device) {
      switched_ = rt_.setDevice(device) == cudaSuccess;
    }
  }
  ~OnDevice() {
    if (switched_) rt_.setDevice(prev_);
  }

 private:
  const CudaCalls& rt_;
  int prev_ = -1;
  bool switched_ = false;
};
}  // namespace

namespace {
std::atomic<CurrentStreamFn> currentStreamSource{nullptr};
}  // namespace

void setCurrentStreamSource(CurrentStreamFn fn) { currentStreamSource.store(fn); }

EventTimer::EventTimer(size_t maxPending, int device) : rt_(&cudaCalls()), maxPending_(maxPending) {
  requireDevice(rt_->getDeviceCount);
  if (device < 0) checkCuda(rt_->getDevice(&device), "cudaGetDevice");
  device_ = device;
}

EventTimer::~EventTimer() {
  // Destructors must not throw; a failed destroy only leaks an event.
  for (auto& a : anchors_) rt_->eventDestroy(a.ev);
  for (auto ev : free_) rt_->eventDestroy(ev);
  for (auto& p : pending_) {
    rt_->eventDestroy(p.start);
    rt_->eventDestroy(p.stop);
  }
  if (syncStream_) rt_->streamDestroy(syncStream_);
}

cudaEvent_t EventTimer::take() {
  if (!free_.empty()) {
    cudaEvent_t ev = free_.back();
    free_.pop_back();
    return ev;
  }
  cudaEvent_t ev;
  // Default flags: timing enabled. Not blocking-sync: we never wait on these per step.
  checkCuda(rt_->eventCreate(&ev), "cudaEventCreate");
  ++created_;
  return ev;
}

void EventTimer::sync() {
  RelaxedCapture relaxed(*rt_);  // its synchronize must not break another thread's graph capture
  if (syncStream_ == nullptr) checkCuda(rt_->streamCreateNonBlocking(&syncStream_), "cudaStreamCreateWithFlags");
  cudaEvent_t ev = take();
  const int64_t t0 = rt_->nowNs();
  checkCuda(rt_->eventRecord(ev, syncStream_), "cudaEventRecord");
  checkCuda(rt_->eventSynchronize(ev), "cudaEventSynchronize");
  const int64_t t1 = rt_->nowNs();
  const int64_t hostNs = t0 + (t1 - t0) / 2;  // errs by at most half the window
  if (anchor_ != nullptr) {
    float ms = 0.f;
    checkCuda(rt_->eventElapsedTime(&ms, anchor_, ev), "cudaEventElapsedTime");
    const int64_t drift = anchorNs_ + msToNs(ms) - hostNs;
    clock_.lastDriftNs = drift;
    clock_.maxAbsDriftNs = std::max<int64_t>(clock_.maxAbsDriftNs, drift < 0 ? -drift : drift);
  }
  // Older anchors stay while pending pairs were measured from them (dropUnusedAnchors).
  anchors_.push_back(Anchor{nextAnchor_++, ev, hostNs});
  anchor_ = ev;
  anchorNs_ = hostNs;
  dropUnusedAnchors();
  clock_.lastUncertaintyNs = (t1 - t0) / 2;
  ++clock_.syncs;
}

void EventTimer::dropUnusedAnchors() {
  const uint64_t oldestUsed = pending_.empty() ? anchors_.back().id : pending_.front().anchor;
  while (anchors_.size() > 1 && anchors_.front().id < oldestUsed) {
    release(anchors_.front().ev);
    anchors_.pop_front();
  }
}

bool EventTimer::capturing(uintptr_t stream) const {
  int on = 0;
  const cudaError_t err = rt_->streamIsCapturing(reinterpret_cast<cudaStream_t>(stream), &on);
  return err == cudaErrorStreamCaptureImplicit || (err == cudaSuccess && on != 0);
}

bool EventTimer::captureUnderway() {
  if (captureSeen_ && !capturing(captureStream_)) captureSeen_ = false;
  return captureSeen_;
}

void EventTimer::begin(int32_t phase, int64_t step, uintptr_t stream) {
  const int64_t tid = currentThreadId();
  const bool follow = stream == kCurrentStream;
  bool seen = false;
  if (follow) {
    // Read before the lock: the source may call into Python (torch's current stream).
    CurrentStreamFn fn = currentStreamSource.load();
    uintptr_t cur = 0;
    seen = fn != nullptr && fn(device_, &cur);
    stream = seen ? cur : 0;
  }
  std::lock_guard<std::mutex> lock(mutex_);  // one lock a phase entry
  if (follow) ++(seen ? streams_.followed : streams_.unseen);
  OnDevice on(*rt_, device_);
  if (capturing(stream)) {
    // Under graph capture (torch.cuda.graph, make_graphed_callables) the phase is not timed: an
    // event recorded here would be part of the graph and could never be queried. It stays on
    // the thread's stack so its end() pairs with it.
    ++streams_.capturing;
    captureStream_ = stream;
    captureSeen_ = true;
    const uint64_t seq = nextSeq_++;
    const uint64_t anchor = anchors_.empty() ? nextAnchor_ : anchors_.back().id;
    pending_.push_back(Pair{seq, phase, step, rt_->nowNs(), tid, nullptr, nullptr, false, anchor, stream, false});
    open_[tid].push_back(seq);
    return;
  }
  if (anchorDue() && !captureUnderway()) sync();
  // Bounded memory: at the cap, wait for the oldest pair (recorded long ago, so normally already
  // done) and keep its result for the next resolve().
  if (pending_.size() >= maxPending_ && !captureUnderway()) {
    RelaxedCapture relaxed(*rt_);
    while (pending_.size() >= maxPending_ && collect(pending_.front(), true, ready_)) popFront();
  }
  if (anchor_ == nullptr) {  // first phase during another stream's capture: timed once an anchor exists
    ++streams_.capturing;
    const uint64_t seq = nextSeq_++;
    pending_.push_back(Pair{seq, phase, step, rt_->nowNs(), tid, nullptr, nullptr, false, nextAnchor_, stream, false});
    open_[tid].push_back(seq);
    return;
  }
  cudaEvent_t a = take();
  cudaEvent_t b = take();
  const cudaError_t err = rt_->eventRecord(a, reinterpret_cast<cudaStream_t>(stream));
  if (err != cudaSuccess) {  // nothing is left open: the events go back to the pool
    release(a);
    release(b);
    checkCuda(err, "cudaEventRecord(start)");
  }
  const uint64_t seq = nextSeq_++;
  pending_.push_back(Pair{seq, phase, step, rt_->nowNs(), tid, a, b, false, anchors_.back().id, stream, true});
  open_[tid].push_back(seq);
}

EventTimer::Pair* EventTimer::findOpen(int64_t tid, int32_t phase, const char* what) {
  auto it = open_.find(tid);
  if (it == open_.end() || it->second.empty()) {
    throw UsageError(std::string(what) + "(" + std::to_string(phase) + ") with no open phase on this thread");
  }
  Pair& p = pending_[it->second.back() - pending_.front().seq];
  if (p.phase != phase) {
    throw UsageError(std::string(what) + "(" + std::to_string(phase) + ") while phase " + std::to_string(p.phase) +
                     " is the innermost open one on this thread");
  }
  return &p;
}

void EventTimer::end(int32_t phase, uintptr_t stream) {
  const int64_t tid = currentThreadId();
  uintptr_t cur = 0;
  bool curSeen = false;
  if (stream == kCurrentStream) {
    CurrentStreamFn fn = currentStreamSource.load();
    curSeen = fn != nullptr && fn(device_, &cur);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  OnDevice on(*rt_, device_);
  Pair* p = findOpen(tid, phase, "EventTimer.end");
  open_[tid].pop_back();  // closed even if the record fails: the stack stays usable
  if (stream == kCurrentStream) {
    // The stop goes where the start went. Work moved to another stream inside the phase is not
    // ordered with these events: counted, so the run can say its GPU time is not seen.
    if (curSeen && cur != p->stream) ++streams_.switchedInside;
    stream = p->stream;
  }
  if (!p->timed || capturing(stream)) {
    // Opened under capture, or closing under one (a stop event here would join the graph, or
    // on the legacy stream invalidate the capture): no result. An unrecorded stop counts as
    // complete, so the pair never holds resolve() back.
    if (p->timed) {
      ++streams_.capturing;
      captureStream_ = stream;
      captureSeen_ = true;
    }
    p->phase = -1;
    p->closed = true;
    return;
  }
  const cudaError_t err = rt_->eventRecord(p->stop, reinterpret_cast<cudaStream_t>(stream));
  p->closed = true;
  if (err != cudaSuccess) {
    p->phase = -1;  // no result; an unrecorded event counts as complete, so it never blocks resolve()
    checkCuda(err, "cudaEventRecord(stop)");
  }
}

void EventTimer::cancel(int32_t phase) noexcept {
  const int64_t tid = currentThreadId();
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = open_.find(tid);
  if (it == open_.end() || it->second.empty()) return;
  Pair& p = pending_[it->second.back() - pending_.front().seq];
  if (p.phase != phase) return;
  it->second.pop_back();
  // resolve() drops pairs marked -1; the unrecorded stop event counts as complete.
  p.phase = -1;
  p.closed = true;
}

void EventTimer::popFront() { pending_.pop_front(); }

bool EventTimer::collect(Pair& p, bool wait, EventColumns& out) {
  if (!p.closed) return false;
  if (!p.timed) return true;  // no events to read or give back
  const cudaError_t q = wait ? rt_->eventSynchronize(p.stop) : rt_->eventQuery(p.stop);
  if (q == cudaErrorNotReady && !wait) return false;
  float ms = 0.f, fromAnchor = 0.f;
  cudaError_t err = q;
  if (err == cudaSuccess && p.phase >= 0) {
    err = rt_->eventElapsedTime(&ms, p.start, p.stop);
    if (err == cudaSuccess) err = rt_->eventElapsedTime(&fromAnchor, anchorOf(p).ev, p.start);
  }
  if (err != cudaSuccess) {
    // A pair the runtime will not answer for (an event that joined a graph, a context error)
    // never will: dropped and counted, so the pairs behind it still resolve.
    ++streams_.unreadable;
    streams_.lastUnreadableError = static_cast<int>(err);
    p.phase = -1;
  }
  if (p.phase >= 0) {
    const Anchor& an = anchorOf(p);
    const int64_t gpuNs = msToNs(ms);
    const int64_t startNs = an.hostNs + msToNs(fromAnchor);
    out.phase_id.push_back(p.phase);
    out.step.push_back(p.step);
    out.host_start_ns.push_back(p.hostStartNs);
    out.gpu_ns.push_back(gpuNs);
    out.gpu_start_ns.push_back(startNs);
    out.gpu_end_ns.push_back(startNs + gpuNs);
    out.thread_id.push_back(p.threadId);
  }
  release(p.start);
  release(p.stop);
  return true;
}

EventColumns EventTimer::resolve(bool wait) {
  std::lock_guard<std::mutex> lock(mutex_);
  OnDevice on(*rt_, device_);
  EventColumns out = std::move(ready_);
  ready_ = EventColumns{};
  if (captureUnderway()) return out;  // querying events now would break the capture
  // A capture the phases never met (another thread's, on its own stream) is not known here: the
  // queries below run in relaxed mode so they cannot break it.
  RelaxedCapture relaxed(*rt_);
  // Pairs resolve in FIFO order and stop at the first unfinished one (open pairs included), so
  // every open pair stays in pending_ and seq - front.seq indexes it.
  while (!pending_.empty()) {
    if (!collect(pending_.front(), wait, out)) break;
    popFront();
  }
  // Each pair keeps the anchor it began under; a new one serves the pairs begun from now on.
  if (anchor_ != nullptr && anchorDue()) sync();
  if (!anchors_.empty()) dropUnusedAnchors();
  return out;
}

bool EventTimer::setDevice(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (device == device_) return true;
  for (auto& kv : open_) {
    if (!kv.second.empty()) return false;
  }
  {
    OnDevice on(*rt_, device_);
    RelaxedCapture relaxed(*rt_);
    // Every pair is closed: finish them on the old device (kept for the next resolve()), then
    // let go of its events, anchor and stream.
    while (!pending_.empty() && collect(pending_.front(), true, ready_)) popFront();
    for (auto ev : free_) rt_->eventDestroy(ev);
    free_.clear();
    for (auto& a : anchors_) rt_->eventDestroy(a.ev);
    anchors_.clear();
    anchor_ = nullptr;
    if (syncStream_) rt_->streamDestroy(syncStream_);
    syncStream_ = nullptr;
  }
  device_ = device;  // the next begin() anchors on the new device
  return true;
}

size_t EventTimer::pending() {
  std::lock_guard<std::mutex> lock(mutex_);
  return pending_.size();
}

StreamStats EventTimer::streamStats() {
  std::lock_guard<std::mutex> lock(mutex_);
  return streams_;
}

ClockSync EventTimer::clockSync() {
  std::lock_guard<std::mutex> lock(mutex_);
  return clock_;
}

}  // namespace perfcore
