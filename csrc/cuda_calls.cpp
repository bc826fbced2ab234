// The real CUDA runtime behind the event timer's table of calls.
#include "cuda_calls.h"

#include <atomic>

#include "clock.h"

namespace perfcore {

namespace {
const CudaCalls kRuntime = {
    &nowNs,
    [](int* n) { return cudaGetDeviceCount(n); },
    [](int* d) { return cudaGetDevice(d); },
    [](int d) { return cudaSetDevice(d); },
    [](cudaEvent_t* e) { return cudaEventCreate(e); },
    [](cudaEvent_t e) { return cudaEventDestroy(e); },
    [](cudaEvent_t e, cudaStream_t s) { return cudaEventRecord(e, s); },
    [](cudaEvent_t e) { return cudaEventQuery(e); },
    [](cudaEvent_t e) { return cudaEventSynchronize(e); },
    [](float* ms, cudaEvent_t a, cudaEvent_t b) { return cudaEventElapsedTime(ms, a, b); },
    [](cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamNonBlocking); },
    [](cudaStream_t s) { return cudaStreamDestroy(s); },
    [](cudaStream_t s, int* capturing) {
      cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
      const cudaError_t err = cudaStreamIsCapturing(s, &st);
      *capturing = st != cudaStreamCaptureStatusNone;
      return err;
    },
    [](cudaStreamCaptureMode* mode) { return cudaThreadExchangeStreamCaptureMode(mode); },
};
std::atomic<const CudaCalls*> installed{&kRuntime};
}  // namespace

const CudaCalls& cudaCalls() { return *installed.load(std::memory_order_acquire); }

void setCudaCalls(const CudaCalls* calls) { installed.store(calls ? calls : &kRuntime, std::memory_order_release); }

}  // namespace perfcore
