// A CUDA runtime for tests, as its documentation defines streams and events, with no device:
// - work queued on a stream runs after the work queued there before it;
// - the legacy default stream (0, cudaStreamLegacy) waits for the work queued before on every
//   blocking stream, and blocking streams wait for its earlier work; a stream made with
//   cudaStreamNonBlocking (torch's pool streams) is ordered with neither;
// - cudaEventRecord: the event completes when the work queued before it on its stream has;
//   cudaEventQuery is cudaErrorNotReady until then (cudaSuccess for an event never recorded);
//   cudaEventSynchronize waits for it; cudaEventElapsedTime gives the ms between two completed
//   events on the device's clock, cudaErrorNotReady while one is pending.
// - stream capture (cudaStreamBeginCapture): cudaStreamIsCapturing says so for that stream, and
//   answers cudaErrorStreamCaptureImplicit for the legacy stream; an event recorded on the
//   capturing stream joins the graph, and querying, waiting on or timing it is
//   cudaErrorCapturedEvent; recording on the legacy stream while the capture runs is
//   cudaErrorStreamCaptureUnsupported and invalidates the capture.
// - capture modes (cudaThreadExchangeStreamCaptureMode; each thread's starts global): querying or
//   waiting on an event (a potentially unsafe call) is refused, and invalidates the capture, when
//   the calling thread is in global or thread-local mode and itself captures in a mode other than
//   relaxed, or is in global mode while another thread captures in global mode. A thread in relaxed
//   mode is never refused for it.
// The device clock may run at another rate than the host's (driftPpm). The host clock is
// perfcore's (synchronize then sleeps until the work is done), or a manual one that only
// advance() and waits move. Installed as the event timer's table of calls (cuda_calls.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace perfcore {

class FakeRuntime {
 public:
  FakeRuntime(bool manualClock, double driftPpm, int devices);
  ~FakeRuntime();  // uninstalls itself
  FakeRuntime(const FakeRuntime&) = delete;
  FakeRuntime& operator=(const FakeRuntime&) = delete;

  void install();    // the event timers made from now on use this runtime
  void uninstall();  // ... the real one
  uintptr_t createStream(bool nonBlocking);
  // Queues work of durationNs on `stream` now; returns when it will finish (host ns).
  int64_t launch(uintptr_t stream, int64_t durationNs);
  // mode: cudaStreamCaptureMode (0 global, 1 thread-local, 2 relaxed); the calling thread captures.
  void beginCapture(uintptr_t stream, int mode = 0);
  bool endCapture();  // false when the capture was invalidated (a forbidden call during it)
  int isCapturing(uintptr_t stream);  // 0 no, 1 yes, 2 implicit (the legacy stream, during capture)
  void advance(int64_t ns);  // manual clock only
  void synchronize();        // waits for every stream's work (cudaDeviceSynchronize)
  int64_t now();
  // The stream each cudaEventRecord went on, in call order.
  std::vector<uintptr_t> recordedStreams();
  // (host ns when it completes, device ns then) of every recorded event, in record order.
  std::vector<std::pair<int64_t, int64_t>> recordedTimes();
  size_t recordedCount();

  // The calls of the table (one fake is installed at a time).
  static FakeRuntime* active();
  int deviceCount() const { return devices_; }
  int currentDevice() const { return current_.load(); }
  void setCurrentDevice(int device) { current_.store(device); }
  uintptr_t newEvent();
  bool destroyEvent(uintptr_t ev);
  int record(uintptr_t ev, uintptr_t stream);
  // Results of the event calls: 0 done, 1 not ready, 2 bad handle, 3 captured event, 4 forbidden
  // during capture.
  int query(uintptr_t ev);
  int wait(uintptr_t ev);
  int elapsed(float* ms, uintptr_t a, uintptr_t b);
  void exchangeMode(int* mode);  // the calling thread's capture mode, swapped
  int threadMode();              // ... read

 private:
  enum class Kind { kLegacy, kBlocking, kNonBlocking };
  struct Stream {
    uintptr_t handle;
    Kind kind;
    int64_t tailNs;  // when its last queued work completes (host clock)
  };
  struct Event {
    bool alive = true;
    bool recorded = false;
    bool captured = false;
    int64_t doneNs = 0;
  };
  int forbiddenLocked();  // 4 (and the capture invalidated) while a capture runs, else 0
  int unsafeLocked();     // as forbiddenLocked, for a potentially unsafe call: by the modes
  Stream* find(uintptr_t handle);
  int64_t readyAt(const Stream& s) const;  // when work queued on s now may start
  int64_t nowLocked() const;
  int64_t deviceNs(int64_t hostNs) const;
  void waitUntil(int64_t hostNs);

  const bool manual_;
  const double driftPpm_;
  const int devices_;
  std::atomic<int> current_{0};
  std::mutex mutex_;
  int64_t manualNs_ = 1'000'000'000;
  int64_t epochNs_ = 0;
  std::vector<Stream> streams_;
  std::vector<Event> events_;
  std::vector<uintptr_t> recordedStreams_;
  std::vector<std::pair<int64_t, int64_t>> recordedTimes_;
  uintptr_t nextStream_ = 0x1000;
  uintptr_t capturing_ = 0;  // the stream capturing now (0: none)
  int captureMode_ = 0;
  std::thread::id captureThread_;
  std::map<std::thread::id, int> modes_;  // threads' capture modes other than global
  bool captureInvalid_ = false;
};

}  // namespace perfcore
