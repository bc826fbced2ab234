// Turns cudaError_t into perfcore exceptions with the call, CUDA's message and what to do.
#include "cuda_check.h"

namespace perfcore {

namespace {
// The likely cause where perfcore most often meets no GPU: a Colab notebook left on a CPU runtime.
constexpr const char* kNoGpuFix = "run on a GPU machine (on Colab: Runtime > Change runtime type > a GPU), or use device='cpu'";

bool meansNoDevice(cudaError_t err) {
  switch (err) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInitializationError:
    case cudaErrorNotSupported:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
      return true;
    default:
      return false;
  }
}
}  // namespace

void throwCudaError(cudaError_t err, const char* call) {
  // Clear the sticky-less error so the next, unrelated call does not report it again.
  cudaGetLastError();
  std::string msg = std::string(call) + " failed: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
  if (meansNoDevice(err)) {
    throw DeviceUnavailableError(msg + "; no usable CUDA GPU here: " + kNoGpuFix);
  }
  throw CudaError(msg);
}

void requireDevice(cudaError_t (*count)(int*)) {
  int n = 0;
  cudaError_t err = count ? count(&n) : cudaGetDeviceCount(&n);
  if (err != cudaSuccess) throwCudaError(err, "cudaGetDeviceCount");
  if (n == 0) {
    throw DeviceUnavailableError(std::string("cudaGetDeviceCount found 0 devices; ") + kNoGpuFix);
  }
}

}  // namespace perfcore
