// Turns cudaError_t into perfcore exceptions with the call, CUDA's message and what to do.
#include "cuda_check.h"

namespace perfcore {

namespace {
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
    throw DeviceUnavailableError(msg + "; no usable CUDA GPU here: run on a GPU machine, or use device='cpu'");
  }
  throw CudaError(msg);
}

void requireDevice(cudaError_t (*count)(int*)) {
  int n = 0;
  cudaError_t err = count ? count(&n) : cudaGetDeviceCount(&n);
  if (err != cudaSuccess) throwCudaError(err, "cudaGetDeviceCount");
  if (n == 0) {
    throw DeviceUnavailableError("cudaGetDeviceCount found 0 devices; run on a GPU machine, or use device='cpu'");
  }
}

}  // namespace perfcore
