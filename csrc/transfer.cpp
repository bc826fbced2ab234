// measureCopies: the bandwidth sweep behind `perfcore transfer` and the pinned/pageable advice.
#include "transfer.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "clock.h"
#include "cuda_check.h"
#include "errors.h"

namespace perfcore {

namespace {
struct HostBuffer {
  void* ptr = nullptr;
  bool pinned = false;
  ~HostBuffer() {
    if (!ptr) return;
    if (pinned) cudaFreeHost(ptr); else std::free(ptr);
  }
};
struct DeviceBuffer {
  void* ptr = nullptr;
  ~DeviceBuffer() { if (ptr) cudaFree(ptr); }
};
struct EventPair {
  cudaEvent_t a = nullptr, b = nullptr;
  ~EventPair() {
    if (a) cudaEventDestroy(a);
    if (b) cudaEventDestroy(b);
  }
};
}  // namespace

CopyColumns measureCopies(const std::vector<int64_t>& sizes, CopyDirection dir, bool pinned, int repeats,
                          uintptr_t stream) {
  requireDevice();
  if (sizes.empty()) throw UsageError("measure_copies: no sizes given");
  if (repeats <= 0) throw UsageError("measure_copies: repeats must be > 0");
  for (auto s : sizes) {
    if (s <= 0) throw UsageError("measure_copies: sizes must be > 0 bytes, got " + std::to_string(s));
  }
  const size_t maxBytes = static_cast<size_t>(*std::max_element(sizes.begin(), sizes.end()));
  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);

  HostBuffer host;
  host.pinned = pinned;
  if (pinned) {
    PERFCORE_CUDA_CHECK(cudaHostAlloc(&host.ptr, maxBytes, cudaHostAllocDefault));
  } else {
    host.ptr = std::malloc(maxBytes);
    if (!host.ptr) throw NativeError("measure_copies: could not allocate " + std::to_string(maxBytes) + " host bytes");
  }
  std::memset(host.ptr, 1, maxBytes);  // fault the pages in before timing
  DeviceBuffer dev;
  PERFCORE_CUDA_CHECK(cudaMalloc(&dev.ptr, maxBytes));
  EventPair ev;
  PERFCORE_CUDA_CHECK(cudaEventCreate(&ev.a));
  PERFCORE_CUDA_CHECK(cudaEventCreate(&ev.b));

  CopyColumns out;
  for (int64_t bytes : sizes) {
    for (int r = -1; r < repeats; ++r) {  // r == -1: untimed warm-up copy
      void* dst = dir == CopyDirection::kHostToDevice ? dev.ptr : host.ptr;
      void* src = dir == CopyDirection::kHostToDevice ? host.ptr : dev.ptr;
      auto kind = dir == CopyDirection::kHostToDevice ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
      PERFCORE_CUDA_CHECK(cudaEventRecord(ev.a, s));
      const int64_t h0 = nowNs();
      PERFCORE_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), kind, s));
      PERFCORE_CUDA_CHECK(cudaEventRecord(ev.b, s));
      PERFCORE_CUDA_CHECK(cudaEventSynchronize(ev.b));
      const int64_t h1 = nowNs();
      if (r < 0) continue;
      float ms = 0.f;
      PERFCORE_CUDA_CHECK(cudaEventElapsedTime(&ms, ev.a, ev.b));
      out.size_bytes.push_back(bytes);
      out.repeat.push_back(r);
      out.gpu_ns.push_back(static_cast<int64_t>(static_cast<double>(ms) * 1e6));
      out.host_ns.push_back(h1 - h0);
    }
  }
  return out;
}

}  // namespace perfcore
