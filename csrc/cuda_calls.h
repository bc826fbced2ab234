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
  // cudaThreadExchangeStreamCaptureMode: sets the calling thread's capture mode, writes the old one.
  cudaError_t (*exchangeCaptureMode)(cudaStreamCaptureMode* mode);
};

// The table in use: one atomic load, then a plain indirect call.
const CudaCalls& cudaCalls();
// Installs `calls` (which must outlive its use); nullptr puts the real runtime back. For tests:
// a timer keeps the events and streams it made with the table it made them with.
void setCudaCalls(const CudaCalls* calls);

// The calling thread in cudaStreamCaptureModeRelaxed for a scope, its own mode put back after. Under
// the default global mode, a query or synchronize made while *any* thread captures a graph in global
// mode (torch.cuda.graph's default) is refused and invalidates that capture, even for an event the
// capture has nothing to do with (torch's NCCL watchdog met it: pytorch #104555, #105182). Relaxed,
// such a call is allowed; one that truly conflicts (querying an event recorded inside the capture) is
// still refused. Construct it with the device current whose context the calls use: on a thread
// without one, a runtime call would make a primary context on device 0.
class RelaxedCapture {
 public:
  explicit RelaxedCapture(const CudaCalls& rt) : rt_(rt) {
    ok_ = rt_.exchangeCaptureMode(&mode_) == cudaSuccess;
  }
  ~RelaxedCapture() {
    if (ok_) rt_.exchangeCaptureMode(&mode_);
  }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  const CudaCalls& rt_;
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
  bool ok_ = false;
};

}  // namespace perfcore
