// Calibration kernels: an empty kernel (launch overhead) and one that runs for a requested time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace perfcore {

// Launches `count` empty kernels on `stream` (a cudaStream_t as an integer).
void launchEmpty(int64_t count, uintptr_t stream);

// Launches one single-thread kernel that spins on %globaltimer until `durationNs` have passed.
void launchSpin(int64_t durationNs, uintptr_t stream);

struct LaunchOverhead {
  double hostNsPerLaunch;  // CPU time to enqueue one empty kernel
  double gpuNsPerKernel;   // device time per empty kernel back to back (events around the batch)
};
LaunchOverhead measureLaunchOverhead(int64_t count, uintptr_t stream);

// Host ns per launch of the empty kernel perfcore::tracingProbe on `device`, one figure per block of
// `count` launches, on a private non-blocking stream (synchronized between blocks): what one launch
// costs the launching thread now, measured with kernel tracing off and on to price the tracing.
std::vector<double> measureProbeLaunches(int device, int64_t count, int blocks);

}  // namespace perfcore
