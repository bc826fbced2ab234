// Calibration kernels and their host launchers; the only device code in perfcore.
#include <cuda_runtime.h>

#include "calib.h"
#include "clock.h"
#include "cuda_calls.h"
#include "cuda_check.h"

namespace perfcore {

// The tracing calibration's kernel, outside the anonymous namespace so its demangled name is fixed
// ("perfcore::tracingProbe()"): traced, its records are told from the user's by it and left out.
__global__ void tracingProbe() {}

namespace {

__global__ void emptyKernel() {}

__device__ __forceinline__ uint64_t globalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spinKernel(uint64_t durationNs) {
  const uint64_t t0 = globalTimerNs();
  while (globalTimerNs() - t0 < durationNs) {
  }
}

cudaStream_t asStream(uintptr_t s) { return reinterpret_cast<cudaStream_t>(s); }

}  // namespace

// No requireDevice() in the two launchers: they may run inside CUDA Graph capture, and a failed
// launch without a device already reports itself as DeviceUnavailable through cudaGetLastError.
void launchEmpty(int64_t count, uintptr_t stream) {
  for (int64_t i = 0; i < count; ++i) emptyKernel<<<1, 1, 0, asStream(stream)>>>();
  PERFCORE_CUDA_CHECK(cudaGetLastError());
}

void launchSpin(int64_t durationNs, uintptr_t stream) {
  if (durationNs < 0) throw UsageError("launch_spin: duration must be >= 0 ns");
  spinKernel<<<1, 1, 0, asStream(stream)>>>(static_cast<uint64_t>(durationNs));
  PERFCORE_CUDA_CHECK(cudaGetLastError());
}

std::vector<double> measureProbeLaunches(int device, int64_t count, int blocks) {
  requireDevice();
  if (count <= 0 || blocks <= 0) throw UsageError("measure_probe_launches: count and blocks must be > 0");
  const CudaCalls& rt = cudaCalls();
  int prev = -1;
  PERFCORE_CUDA_CHECK(cudaGetDevice(&prev));
  if (prev != device) PERFCORE_CUDA_CHECK(cudaSetDevice(device));
  std::vector<double> out;
  cudaError_t err = cudaSuccess;
  {
    // A private non-blocking stream: the launches wait for no work of the script's, and its
    // synchronize cannot break a graph capture underway elsewhere (relaxed mode).
    RelaxedCapture relaxed(rt);
    cudaStream_t s = nullptr;
    err = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (err == cudaSuccess) {
      tracingProbe<<<1, 1, 0, s>>>();  // loads the module: no block pays that
      err = cudaStreamSynchronize(s);
      for (int b = 0; b < blocks && err == cudaSuccess; ++b) {
        const int64_t h0 = nowNs();
        for (int64_t i = 0; i < count; ++i) tracingProbe<<<1, 1, 0, s>>>();
        const int64_t h1 = nowNs();
        err = cudaGetLastError();
        if (err == cudaSuccess) err = cudaStreamSynchronize(s);  // the next block starts on an idle queue
        out.push_back(static_cast<double>(h1 - h0) / static_cast<double>(count));
      }
      cudaStreamDestroy(s);
    }
  }
  if (prev != device) cudaSetDevice(prev);
  PERFCORE_CUDA_CHECK(err);
  return out;
}

LaunchOverhead measureLaunchOverhead(int64_t count, uintptr_t stream) {
  requireDevice();
  if (count <= 0) throw UsageError("measure_launch_overhead: count must be > 0");
  cudaStream_t s = asStream(stream);
  // One warm-up launch loads the module, so the first timed launch is not a cold start.
  emptyKernel<<<1, 1, 0, s>>>();
  PERFCORE_CUDA_CHECK(cudaStreamSynchronize(s));

  cudaEvent_t e0, e1;
  PERFCORE_CUDA_CHECK(cudaEventCreate(&e0));
  PERFCORE_CUDA_CHECK(cudaEventCreate(&e1));
  PERFCORE_CUDA_CHECK(cudaEventRecord(e0, s));
  const int64_t h0 = nowNs();
  for (int64_t i = 0; i < count; ++i) emptyKernel<<<1, 1, 0, s>>>();
  const int64_t h1 = nowNs();
  PERFCORE_CUDA_CHECK(cudaEventRecord(e1, s));
  PERFCORE_CUDA_CHECK(cudaGetLastError());
  PERFCORE_CUDA_CHECK(cudaEventSynchronize(e1));
  float ms = 0.f;
  PERFCORE_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return LaunchOverhead{static_cast<double>(h1 - h0) / count, static_cast<double>(ms) * 1e6 / count};
}

}  // namespace perfcore
