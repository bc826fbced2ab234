// The CUDA runtime calls the event timer makes, and its host clock, as one table of function
// pointers: the real runtime unless a test installs a fake (fake_runtime.cpp) that behaves as the
// runtime's documentation says, so the timer's choices are testable without a device.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace perfcore {

struct CudaCalls {
  int64_t (*nowNs)();  // the host clock the timer stamps with (nowNs() in clock.h)
  cudaError_t (*getDeviceCount)(int* count);
  cudaError_t (*getDevice)(int* device);
  cudaError_t (*setDevice)(int device);
  cudaError_t (*eventCreate)(cudaEvent_t* event);  // default flags: timing enabled
  cudaError_t (*eventDestroy)(cudaEvent_t event);
  cudaError_t (*eventRecord)(cudaEvent_t event, cudaStream_t stream);
  cudaError_t (*eventQuery)(cudaEvent_t event);
  cudaError_t (*eventSynchronize)(cudaEvent_t event);
  cudaError_t (*eventElapsedTime)(float* ms, cudaEvent_t start, cudaEvent_t end);
  cudaError_t (*streamCreateNonBlocking)(cudaStream_t* stream);
  cudaError_t (*streamDestroy)(cudaStream_t stream);
  // cudaStreamIsCapturing: *capturing = 1 while `stream` records into a graph. On the legacy
  // stream while another stream captures in global mode the runtime answers
  // cudaErrorStreamCaptureImplicit (using it would invalidate that capture).
  cudaError_t (*streamIsCapturing)(cudaStream_t stream, int* capturing);
};

// The table in use: one atomic load, then a plain indirect call.
const CudaCalls& cudaCalls();
// Installs `calls` (which must outlive its use); nullptr puts the real runtime back. For tests:
// a timer keeps the events and streams it made with the table it made them with.
void setCudaCalls(const CudaCalls* calls);

}  // namespace perfcore
