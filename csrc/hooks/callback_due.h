// When the step clock calls Python back after a step end: the upkeep (memory samples, progress) every
// `every` steps, spaced at least minGapNs apart (on a 0.25 ms CPU step every 8th step was ~3 us a step
// of upkeep; a peak RSS that only rises needs no finer grid), settling every compactEvery steps, and
// the stop step. One per StepClock, changed with the GIL held.
#pragma once

#include <Python.h>

#include <cstdint>

namespace perfcore {

struct CallbackDue {
  long long every = 1, compactEvery = 1024, stopAt = PY_LLONG_MAX;
  int64_t minGapNs = 0, lastEveryNs = 0;

  void arm(long long e, long long compact, long long stop, int64_t gap) {
    every = e;
    compactEvery = compact;
    stopAt = stop;
    minGapNs = gap;
    lastEveryNs = 0;
  }

  // Step end n at t: is the callback due? (The first step always is.)
  bool due(long long n, int64_t t) {
    if ((n - 1) % every == 0 && (n == 1 || t - lastEveryNs >= minGapNs)) {
      lastEveryNs = t;
      return true;
    }
    return n % compactEvery == 0 || n >= stopAt;
  }
};

}  // namespace perfcore
