// The runtime/driver API records the tracer turns off: calls torch makes constantly that launch
// nothing, each of which would be one more API record to drain (and one more external-correlation
// record inside a tagged phase), and earlier drops on a long run. As kineto does.
#include "tracer.h"

#include "records.h"

#include <iterator>

namespace perfcore {

namespace {
// Launches, copies, memsets, graph launches and synchronizations keep their records: they tag
// kernels with their phase and place graph kernels. cuptiActivityEnableRuntimeApi/DriverApi
// arrived in CUPTI 12.6.
#if CUPTI_API_VERSION >= 24
constexpr CUpti_CallbackId kQuietRuntime[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceCount_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaDeviceGetAttribute_v5000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceProperties_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaPointerGetAttributes_v4000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v10010,
    CUPTI_RUNTIME_TRACE_CBID_cudaThreadExchangeStreamCaptureMode_v10010,
    CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaFuncGetAttributes_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaDriverGetVersion_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaRuntimeGetVersion_v3020,
};
constexpr CUpti_CallbackId kQuietDriver[] = {
    CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent,
    CUPTI_DRIVER_TRACE_CBID_cuCtxSetCurrent,
    CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice,
    CUPTI_DRIVER_TRACE_CBID_cuCtxPushCurrent_v2,
    CUPTI_DRIVER_TRACE_CBID_cuCtxPopCurrent_v2,
    CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxGetState,
    CUPTI_DRIVER_TRACE_CBID_cuDeviceGetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress,
    CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress_v2,
    CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttributes,
    CUPTI_DRIVER_TRACE_CBID_cuStreamIsCapturing,
    CUPTI_DRIVER_TRACE_CBID_cuFuncGetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuGetErrorString,
};
#endif
}  // namespace

std::vector<uint32_t> quietRuntimeCbids() {
#if CUPTI_API_VERSION >= 24
  return std::vector<uint32_t>(std::begin(kQuietRuntime), std::end(kQuietRuntime));
#else
  return {};
#endif
}

std::vector<uint32_t> quietDriverCbids() {
#if CUPTI_API_VERSION >= 24
  return std::vector<uint32_t>(std::begin(kQuietDriver), std::end(kQuietDriver));
#else
  return {};
#endif
}

int64_t quietApiRecords() {
  int64_t accepted = 0;
#if CUPTI_API_VERSION >= 24
  // Compiled only against headers that declare the calls; setup.py builds against the headers
  // of the libcupti that loads, so the symbols resolve (a library without them would fail the
  // import of _C, not this call). A call the library refuses leaves that id's records on.
  for (auto cbid : kQuietRuntime) accepted += cuptiActivityEnableRuntimeApi(cbid, 0) == CUPTI_SUCCESS;
  for (auto cbid : kQuietDriver) accepted += cuptiActivityEnableDriverApi(cbid, 0) == CUPTI_SUCCESS;
#endif
  return accepted;
}

}  // namespace perfcore
