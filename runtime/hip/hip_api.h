// The part of AMD's HIP runtime API tessel calls, declared here so that
// tessel builds without ROCm and loads libamdhip64 at run time. Values and
// prototypes are those of ROCm 6.x and 7.x (which MI300 machines run); the
// calls below kept their ABI from HIP 5.2 on, except the device properties,
// whose struct changed in 6.0 (hipGetDevicePropertiesR0600): tessel reads
// only the architecture name from it, at the offset of each layout.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessel::hip {

using hipError_t = int;
inline constexpr hipError_t hipSuccess = 0;
inline constexpr hipError_t hipErrorInvalidValue = 1;
inline constexpr hipError_t hipErrorOutOfMemory = 2;
inline constexpr hipError_t hipErrorNotInitialized = 3;
inline constexpr hipError_t hipErrorNoDevice = 100;
inline constexpr hipError_t hipErrorInvalidDevice = 101;
inline constexpr hipError_t hipErrorInvalidImage = 200;
inline constexpr hipError_t hipErrorNoBinaryForGpu = 209;
inline constexpr hipError_t hipErrorNotFound = 500;
inline constexpr hipError_t hipErrorNotSupported = 801;

using hipDeviceptr_t = void*;
using hipModule_t = struct ihipModule_t*;
using hipFunction_t = struct ihipModuleSymbol_t*;
using hipStream_t = struct ihipStream_t*;
using hipGraph_t = struct ihipGraph*;
using hipGraphExec_t = struct hipGraphExec*;

// hipStreamCaptureMode: this thread's calls that would break a capture are
// errors; other threads go on (CUDA's THREAD_LOCAL).
inline constexpr int hipStreamCaptureModeThreadLocal = 1;

// hipDeviceAttribute_t: the same value in HIP 5.2 and 6.x.
inline constexpr int hipDeviceAttributeMultiprocessorCount = 63;

// hipMemcpyKind
inline constexpr int hipMemcpyHostToDevice = 1;
inline constexpr int hipMemcpyDeviceToHost = 2;

// hipModuleLaunchKernel's `extra`: the packed explicit arguments.
inline void* const HIP_LAUNCH_PARAM_BUFFER_POINTER = reinterpret_cast<void*>(1);
inline void* const HIP_LAUNCH_PARAM_BUFFER_SIZE = reinterpret_cast<void*>(2);
inline void* const HIP_LAUNCH_PARAM_END = reinterpret_cast<void*>(3);

// Where hipDeviceProp_t keeps gcnArchName (char[256]): ROCm 6's layout
// (hipGetDevicePropertiesR0600) and the older one (hipGetDeviceProperties
// before 6.0, and R0000 after); tessel hands either call a buffer larger
// than both structs.
inline constexpr size_t kArchNameOffsetR0600 = 1160;
inline constexpr size_t kArchNameOffsetR0000 = 396;
inline constexpr size_t kDevicePropertiesBytes = 4096;

extern "C" {
using PFN_hipInit = hipError_t (*)(unsigned flags);
using PFN_hipGetErrorName = const char* (*)(hipError_t error);
using PFN_hipGetErrorString = const char* (*)(hipError_t error);
using PFN_hipGetDeviceCount = hipError_t (*)(int* count);
using PFN_hipSetDevice = hipError_t (*)(int device);
using PFN_hipDeviceGetAttribute = hipError_t (*)(int* value, int attribute, int device);
using PFN_hipDeviceGetName = hipError_t (*)(char* name, int length, int device);
using PFN_hipGetDeviceProperties = hipError_t (*)(void* properties, int device);
using PFN_hipGetDevicePropertiesR0600 = PFN_hipGetDeviceProperties;
using PFN_hipDeviceSynchronize = hipError_t (*)();
using PFN_hipMalloc = hipError_t (*)(void** ptr, size_t bytes);
using PFN_hipFree = hipError_t (*)(void* ptr);
using PFN_hipMemcpy = hipError_t (*)(void* dst, const void* src, size_t bytes, int kind);
using PFN_hipStreamCreate = hipError_t (*)(hipStream_t* stream);
using PFN_hipStreamDestroy = hipError_t (*)(hipStream_t stream);
using PFN_hipStreamSynchronize = hipError_t (*)(hipStream_t stream);
using PFN_hipStreamBeginCapture = hipError_t (*)(hipStream_t stream, int mode);
using PFN_hipStreamEndCapture = hipError_t (*)(hipStream_t stream, hipGraph_t* graph);
using PFN_hipGraphInstantiate = hipError_t (*)(hipGraphExec_t* exec, hipGraph_t graph, void* error_node, char* log,
                                               size_t log_bytes);
using PFN_hipGraphLaunch = hipError_t (*)(hipGraphExec_t exec, hipStream_t stream);
using PFN_hipGraphExecDestroy = hipError_t (*)(hipGraphExec_t exec);
using PFN_hipGraphDestroy = hipError_t (*)(hipGraph_t graph);
using PFN_hipModuleLoadData = hipError_t (*)(hipModule_t* module, const void* image);
using PFN_hipModuleUnload = hipError_t (*)(hipModule_t module);
using PFN_hipModuleGetFunction = hipError_t (*)(hipFunction_t* function, hipModule_t module, const char* name);
using PFN_hipModuleLaunchKernel = hipError_t (*)(hipFunction_t f, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                                                 unsigned block_x, unsigned block_y, unsigned block_z,
                                                 unsigned shared_bytes, hipStream_t stream, void** params,
                                                 void** extra);
}

}  // namespace tessel::hip
