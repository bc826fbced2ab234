// CUDA runtime return-code checks: every call is checked, failures carry the call and the fix.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "errors.h"

namespace perfcore {

[[noreturn]] void throwCudaError(cudaError_t err, const char* call);

inline void checkCuda(cudaError_t err, const char* call) {
  if (err != cudaSuccess) throwCudaError(err, call);
}

// Throws DeviceUnavailableError with a one-line reason when no GPU can be used. `count` is the
// device count call to ask (the event timer's table of calls; the runtime's by default).
void requireDevice(cudaError_t (*count)(int*) = nullptr);

}  // namespace perfcore

#define PERFCORE_CUDA_CHECK(call) ::perfcore::checkCuda((call), #call)
