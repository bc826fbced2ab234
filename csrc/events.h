// CUDA-event timer: event pairs recorded on a stream and resolved later by query, so timing a
// phase never forces a per-step synchronize.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <deque>
#include <vector>

namespace perfcore {

struct EventColumns {
  std::vector<int32_t> phase_id;
  std::vector<int64_t> step;
  std::vector<int64_t> host_start_ns;  // host clock when the start event was recorded
  std::vector<int64_t> gpu_ns;         // device time between the two events
  std::vector<int64_t> gpu_start_ns;   // when the GPU reached the start event, on the perfcore clock
  std::vector<int64_t> gpu_end_ns;     // when it reached the stop event (= gpu_start_ns + gpu_ns)

  template <class F>
  void visit(F&& f) {
    f("phase_id", phase_id);
    f("step", step);
    f("host_start_ns", host_start_ns);
    f("gpu_ns", gpu_ns);
    f("gpu_start_ns", gpu_start_ns);
    f("gpu_end_ns", gpu_end_ns);
  }
  size_t size() const { return step.size(); }
};

class EventTimer {
 public:
  // maxPending bounds the pairs alive at once; past it, begin() waits for the oldest one.
  explicit EventTimer(size_t maxPending = 8192);
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  // stream is a cudaStream_t as an integer (torch.cuda.current_stream().cuda_stream); 0 = legacy default.
  void begin(int32_t phase, int64_t step, uintptr_t stream);
  void end(int32_t phase, uintptr_t stream);

  // Moves every finished pair into the result. wait=true first waits for all pending pairs.
  EventColumns resolve(bool wait);
  size_t pending() const { return pending_.size(); }
  size_t eventsCreated() const { return created_; }

 private:
  struct Pair {
    int32_t phase;
    int64_t step;
    int64_t hostStartNs;
    cudaEvent_t start;
    cudaEvent_t stop;
    bool closed;
  };
  cudaEvent_t take();
  void release(cudaEvent_t ev) { free_.push_back(ev); }
  bool collect(Pair& p, bool wait, EventColumns& out);
  void anchorOn(cudaStream_t stream);

  // Events only measure intervals between events, so one "anchor" event with a known host time
  // places every event on the perfcore clock. It is taken once, on an idle stream (one sync per
  // timer), then moved forward to a resolved event at most once a second, so elapsed times stay
  // short and float32 milliseconds keep sub-microsecond precision however long the run.
  cudaEvent_t anchor_ = nullptr;
  int64_t anchorNs_ = 0;

  size_t maxPending_;
  size_t created_ = 0;
  std::vector<cudaEvent_t> free_;
  std::deque<Pair> pending_;
  EventColumns ready_;           // resolved early because of the cap, returned by the next resolve()
  std::vector<size_t> openIdx_;  // indices into pending_ of pairs begun but not ended (a stack)
};

}  // namespace perfcore
