// The CUPTI record struct versions perfcore decodes, pinned in one place.
//
// CUPTI writes each record in the layout of the library that is loaded, and that layout is the
// newest struct version of that library's headers. setup.py compiles against the headers of the
// libcupti that will be loaded (torch's own, when torch ships one), and _native checks
// cuptiGetVersion() against PERFCORE_CUPTI_COMPILED_VERSION at import. The decoder only reads
// fields that sit in the stable prefix shared by every version listed here.
#pragma once

// Only the headers the tracer and decoder use, never <cupti.h>: it pulls generated_cuda_meta.h,
// which needs a cuda.h as new as that CUPTI, and torch's CUPTI is often a newer minor than the
// user's toolkit (setup.py stages exactly these, with cuda_stdint.h and what they include).
#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_driver_cbid.h>  // the call ids whose API records are turned off
#include <cupti_result.h>
#include <cupti_version.h>
#include <cupti_runtime_cbid.h>

namespace perfcore {

#if CUPTI_API_VERSION >= 130000
using KernelRecord = CUpti_ActivityKernel10;
using MemcpyRecord = CUpti_ActivityMemcpy6;
using SyncRecord = CUpti_ActivitySynchronization2;
using OverheadRecord = CUpti_ActivityOverhead3;
#else  // CUDA 12.x (Colab's toolkits and torch's cu12x wheels)
using KernelRecord = CUpti_ActivityKernel9;
using MemcpyRecord = CUpti_ActivityMemcpy5;
using SyncRecord = CUpti_ActivitySynchronization;
using OverheadRecord = CUpti_ActivityOverhead;
#endif
using MemsetRecord = CUpti_ActivityMemset4;
using ExternalCorrelationRecord = CUpti_ActivityExternalCorrelation;
using ApiRecord = CUpti_ActivityAPI;  // RUNTIME and DRIVER records share it (unversioned)

}  // namespace perfcore
