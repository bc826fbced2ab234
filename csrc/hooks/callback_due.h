// When the step clock calls Python back after a step end: the upkeep (memory samples, progress) every
// `every` steps, spaced at least minGapNs apart (on a 0.25 ms CPU step every 8th step was ~3 us a step
// of upkeep; a peak RSS that only rises needs no finer grid), settling every compactEvery steps, and
// the stop step. One per StepClock, changed with the GIL held.
#pragma once

#include <Python.h>

#include <algorithm>
#include <cstdint>

namespace perfcore {

struct CallbackDue {
  // A spaced call that took long (it wrote a checkpoint, or the machine preempted it) pushes the next one
  // further: at least kGapPerOwn times its own time after its end, so the spaced upkeep keeps under ~2%
  // of the training thread however slow one call was (counted from the step end, a callback of 20 ms or
  // more on a loaded machine made the next one due 8 steps later, every 8 steps). Capped at kMaxGapNs so
  // the progress file still moves.
  static constexpr int64_t kGapPerOwn = 50;
  static constexpr int64_t kMaxGapNs = 1'000'000'000;

  long long every = 1, compactEvery = 1024, stopAt = PY_LLONG_MAX;
  int64_t minGapNs = 0, gapNs = 0, lastEveryNs = 0;
  bool spaced = false;  // the latest due() was the spaced every-n call

  void arm(long long e, long long compact, long long stop, int64_t gap) {
    every = e;
    compactEvery = compact;
    stopAt = stop;
    minGapNs = gapNs = gap;
    lastEveryNs = 0;
    spaced = false;
  }

  // Step end n at t: is the callback due? (The first step always is.)
  bool due(long long n, int64_t t) {
    spaced = (n - 1) % every == 0 && (n == 1 || t - lastEveryNs >= gapNs);
    if (spaced) {
      lastEveryNs = t;
      return true;
    }
    return n % compactEvery == 0 || n >= stopAt;
  }

  // The callback ran from start to end (ns): a spaced one sets when the next may come. No spacing
  // (a GPU's per-step peaks): nothing changes.
  void ran(int64_t start, int64_t end) {
    if (!spaced || minGapNs <= 0) return;
    lastEveryNs = end;
    gapNs = std::max(minGapNs, std::min(kGapPerOwn * (end - start), std::max(minGapNs, kMaxGapNs)));
  }
};

}  // namespace perfcore
