// Graph captures underway in the process, counted from CUPTI's API callbacks on the calls that
// begin and end one: the runtime's and the driver's (the runtime's cudaStreamBeginCapture runs the
// driver's inside it, as cudaGraphLaunch runs cuGraphLaunch; each path is counted on both sides, so
// the count returns to 0 either way). The drain thread makes no CUPTI flush while one is underway:
// whether a flush during a capture makes a call the capture forbids is not documented, and in
// global mode such a call from any thread would invalidate the user's graph.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace perfcore {

class CaptureWatch {
 public:
  // The callback ids by number (the names vary across the 12.x headers perfcore builds against; the
  // numbers never change). Runtime (cupti_runtime_cbid.h): cudaStreamBeginCapture(_ptsz) 315/316,
  // cudaStreamBeginCaptureToGraph(_ptsz) 452/453, cudaStreamEndCapture(_ptsz) 319/320. Driver
  // (cupti_driver_cbid.h): cuStreamBeginCapture(_ptsz) 495/496, _v2(_ptsz) 539/540,
  // cuStreamBeginCaptureToGraph(_ptsz) 720/721, cuStreamEndCapture(_ptsz) 497/498.
  static constexpr uint32_t kRuntimeBegin[] = {315, 316, 452, 453};
  static constexpr uint32_t kRuntimeEnd[] = {319, 320};
  static constexpr uint32_t kDriverBegin[] = {495, 496, 539, 540, 720, 721};
  static constexpr uint32_t kDriverEnd[] = {497, 498};

  // At an API call's callback (driver: the driver domain, else the runtime's): a begin that returned
  // success starts a capture, an end (whatever it returned: an invalidated capture ends too) ends one.
  // Enter callbacks change nothing.
  void onCall(bool driver, uint32_t cbid, bool atExit, bool succeeded) {
    if (!atExit) return;
    const bool begin = driver ? contains(kDriverBegin, cbid) : contains(kRuntimeBegin, cbid);
    const bool end = driver ? contains(kDriverEnd, cbid) : contains(kRuntimeEnd, cbid);
    if (begin) {
      if (succeeded) {
        underway_.fetch_add(1);
        begun_.fetch_add(1);
      }
    } else if (end) {
      int64_t n = underway_.load();
      // A capture begun before the watch started ends without having been counted: never below 0.
      while (n > 0 && !underway_.compare_exchange_weak(n, n - 1)) {
      }
    }
  }
  bool underway() const { return underway_.load(std::memory_order_relaxed) > 0; }
  int64_t begun() const { return begun_.load(); }  // begin calls seen (a runtime one counts twice)
  void reset() {
    underway_.store(0);
    begun_.store(0);
  }

 private:
  template <size_t N>
  static bool contains(const uint32_t (&ids)[N], uint32_t cbid) {
    for (uint32_t id : ids) {
      if (id == cbid) return true;
    }
    return false;
  }
  std::atomic<int64_t> underway_{0};
  std::atomic<int64_t> begun_{0};
};

}  // namespace perfcore
