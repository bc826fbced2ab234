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
  // default. Pairs nest per thread and close in reverse order on the thread that opened them.
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
  };
  cudaEvent_t take();
  void release(cudaEvent_t ev) { free_.push_back(ev); }
  bool collect(Pair& p, bool wait, EventColumns& out);
  void popFront();
  Pair* findOpen(int64_t tid, int32_t phase, const char* what);
  void sync();

  // Events measure intervals between events only, so an "anchor" event with a known host time
  // places every event on the perfcore clock. The anchor is recorded on a private idle stream
  // (never the user's: no wait for their work), so it completes as soon as the GPU reaches it and
  // the host window [t0, t1] around it bounds its time. It is re-taken every kResyncNs at
  // resolve(): the gap between where the old anchor predicts the new one and the host time is
  // the drift of the event clock, reported in clockSync().
  cudaStream_t syncStream_ = nullptr;
  cudaEvent_t anchor_ = nullptr;
  int64_t anchorNs_ = 0;
  ClockSync clock_;

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
