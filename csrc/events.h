// CUDA-event timer: event pairs recorded on a stream and resolved later by query, so timing a
// phase never forces a per-step synchronize.
//
// Threading: phases may open on any thread (a DataLoader pin-memory thread, autograd's device
// threads, the user's own), and resolve() runs with the GIL released while another thread opens
// phases, so one mutex guards the pairs; each thread has its own stack of open pairs.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cuda_calls.h"

namespace perfcore {

struct EventColumns {
  std::vector<int32_t> phase_id;
  std::vector<int64_t> step;
  std::vector<int64_t> host_start_ns;  // host clock when the start event was recorded
  std::vector<int64_t> gpu_ns;         // device time between the two events
  std::vector<int64_t> gpu_start_ns;   // when the GPU reached the start event, on the perfcore clock
  std::vector<int64_t> gpu_end_ns;     // when it reached the stop event (= gpu_start_ns + gpu_ns)
  std::vector<int64_t> thread_id;      // the thread that opened the phase

  template <class F>
  void visit(F&& f) {
    f("phase_id", phase_id);
    f("step", step);
    f("host_start_ns", host_start_ns);
    f("gpu_ns", gpu_ns);
    f("gpu_start_ns", gpu_start_ns);
    f("gpu_end_ns", gpu_end_ns);
    f("thread_id", thread_id);
  }
  size_t size() const { return step.size(); }
};

// How the event clock is tied to the host clock (see EventTimer::sync).
struct ClockSync {
  int64_t syncs = 0;             // anchors taken
  int64_t lastDriftNs = 0;       // event-clock prediction minus host time at the last re-sync
  int64_t maxAbsDriftNs = 0;
  int64_t lastUncertaintyNs = 0;  // half the host window the anchor event completed in
};

// The stream argument that means "the stream current on the calling thread when the phase
// opens" (torch's current stream: a pool stream under `with torch.cuda.stream(s):`), read through
// the source set by setCurrentStreamSource. The phase's stop event goes on the same stream.
constexpr uintptr_t kCurrentStream = ~static_cast<uintptr_t>(0);
// Writes the current stream of `device` for the calling thread; false when it cannot say.
using CurrentStreamFn = bool (*)(int device, uintptr_t* stream);
void setCurrentStreamSource(CurrentStreamFn fn);

// float ms from cudaEventElapsedTime -> integer ns, rounded (never truncated toward zero).
inline int64_t msToNs(float ms) { return static_cast<int64_t>(static_cast<double>(ms) * 1e6 + (ms < 0 ? -0.5 : 0.5)); }

struct StreamStats {
  int64_t followed = 0;       // phases whose events went on the stream current at their start
  int64_t unseen = 0;         // ... whose current stream could not be read (legacy default used)
  int64_t switchedInside = 0;  // phases that ended on another current stream than they began on
  // Phases opened or closed on a stream recording into a CUDA graph: not timed. Events recorded
  // there belong to the graph, and querying them is an error (cudaErrorCapturedEvent).
  int64_t capturing = 0;
  // Pairs the runtime refused to query or time at resolve: dropped, so the queue moves on.
  int64_t unreadable = 0;
  int lastUnreadableError = 0;  // the cudaError_t of the latest of them
};

class EventTimer {
 public:
  // maxPending bounds the pairs alive at once; past it, begin() waits for the oldest one.
  // device: the GPU whose stream the events are recorded on; -1: whichever is current when the
  // timer is made. Events are recorded there whatever device is current at begin()/end().
  explicit EventTimer(size_t maxPending = 8192, int device = -1);
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  // stream is a cudaStream_t as an integer (torch.cuda.current_stream().cuda_stream); 0 = legacy
  // default; kCurrentStream = the current one at begin(). Pairs nest per thread and close in
  // reverse order on the thread that opened them.
  void begin(int32_t phase, int64_t step, uintptr_t stream);
  void end(int32_t phase, uintptr_t stream);
  // Takes back the calling thread's innermost open pair without a result (a phase whose other
  // parts failed to open). Never throws.
  void cancel(int32_t phase) noexcept;

  // Moves every finished pair into the result. wait=true first waits for all pending pairs.
  // Re-ties the event clock to the host clock when the last sync is resyncNs old.
  EventColumns resolve(bool wait);
  size_t pending();
  size_t eventsCreated() const { return created_; }
  // Moves the timer to another GPU (a script that moved its model there without set_device):
  // waits for the pairs in flight, then re-anchors there. False (nothing changes) while a
  // phase is open.
  bool setDevice(int device);
  int device() const { return device_; }
  ClockSync clockSync();
  StreamStats streamStats();

  // A new anchor is taken at the first begin() or resolve() this long after the last: the float
  // ms of an event interval from its anchor then stays under ~1 s (float32 ulp there: ~61 ns),
  // and drift between anchors is bounded by time, not by how often the run settles.
  static constexpr int64_t kResyncNs = 1000000000LL;  // 1 s

 private:
  struct Pair {
    uint64_t seq;
    int32_t phase;
    int64_t step;
    int64_t hostStartNs;
    int64_t threadId;
    cudaEvent_t start;
    cudaEvent_t stop;
    bool closed;
    uint64_t anchor;   // the anchor (by number) current when the pair began
    uintptr_t stream;  // where both events were recorded
    bool timed;        // false: opened on a capturing stream, no events (start/stop null)
  };
  struct Anchor {
    uint64_t id;
    cudaEvent_t ev;
    int64_t hostNs;
  };
  const Anchor& anchorOf(const Pair& p) const { return anchors_[p.anchor - anchors_.front().id]; }
  void dropUnusedAnchors();
  cudaEvent_t take();
  void release(cudaEvent_t ev) { free_.push_back(ev); }
  bool collect(Pair& p, bool wait, EventColumns& out);
  void popFront();
  Pair* findOpen(int64_t tid, int32_t phase, const char* what);
  void sync();
  // The anchor policy: a new anchor once the newest is kResyncNs old on the timer's clock (the
  // table's nowNs, so a test can drive it), however often the run resolves.
  bool anchorDue() const { return anchor_ == nullptr || rt_->nowNs() - anchorNs_ >= kResyncNs; }
  // True while `stream` records into a graph (or is the legacy stream, which a global capture
  // forbids). A query the runtime cannot answer counts as not capturing.
  bool capturing(uintptr_t stream) const;
  // True while the capture a phase last met is still going: the runtime forbids synchronizing
  // or querying events then (a global-mode capture is invalidated by it), so the anchor and
  // resolve() wait until it ends.
  bool captureUnderway();
  uintptr_t captureStream_ = 0;
  bool captureSeen_ = false;

  const CudaCalls* rt_;  // the runtime the timer's events and stream were made with

  // Events measure intervals between events only, so an "anchor" event with a known host time
  // places every event on the perfcore clock. The anchor is recorded on a private idle stream
  // (never the user's: no wait for their work), so it completes as soon as the GPU reaches it and
  // the host window [t0, t1] around it bounds its time. It is re-taken every kResyncNs at
  // resolve(): the gap between where the old anchor predicts the new one and the host time is
  // the drift of the event clock, reported in clockSync().
  cudaStream_t syncStream_ = nullptr;
  cudaEvent_t anchor_ = nullptr;  // the newest anchor (also anchors_.back())
  int64_t anchorNs_ = 0;
  std::deque<Anchor> anchors_;  // every anchor a pending pair still uses, oldest first
  uint64_t nextAnchor_ = 0;
  ClockSync clock_;
  StreamStats streams_;

  int device_ = -1;

  std::mutex mutex_;  // guards everything below
  size_t maxPending_;
  size_t created_ = 0;
  uint64_t nextSeq_ = 0;
  std::vector<cudaEvent_t> free_;
  std::deque<Pair> pending_;  // FIFO by seq
  EventColumns ready_;        // resolved early because of the cap, returned by the next resolve()
  std::unordered_map<int64_t, std::vector<uint64_t>> open_;  // thread id -> seqs of its open pairs
};

}  // namespace perfcore
