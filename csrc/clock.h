// The one clock: CLOCK_MONOTONIC in nanoseconds, shared by host spans and CUPTI records.
#pragma once

#include <cstdint>
#include <ctime>

namespace perfcore {

// Python's time.perf_counter_ns() and time.monotonic_ns() read the same clock on Linux, so
// spans timed in Python, spans timed here and CUPTI records (through the timestamp callback
// registered in cupti/tracer.cpp) all land on one timeline without offsets.
inline int64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

// Id of the calling OS thread (gettid), the same number Perfetto and py-spy show.
int64_t currentThreadId();

}  // namespace perfcore
