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
inline constexpr int hipMemcpyDeviceToDevice = 3;

using hipEvent_t = struct ihipEvent_t*;
inline constexpr hipError_t hipErrorNotReady = 600;
inline constexpr unsigned hipEventDisableTiming = 0x2;
inline constexpr unsigned hipHostMallocPortable = 0x1, hipHostMallocMapped = 0x2;
inline constexpr unsigned hipStreamWaitValueGte = 0x0;
inline constexpr unsigned hipStreamNonBlocking = 0x1;  // no implicit ordering with the null stream

// The virtual memory API, with ROCm 6's hipMemAllocationProp (5.x ordered
// its fields otherwise: tessel does not pass it to a 5.x runtime's VMM calls
// and expects ROCm 6 or newer for groups).
using hipMemGenericAllocationHandle_t = struct ihipMemGenericAllocationHandle*;
struct hipMemLocation {
  int type;  // hipMemLocationTypeDevice
  int id;
};
inline constexpr int hipMemLocationTypeDevice = 1;
inline constexpr int hipMemAllocationTypePinned = 1;
inline constexpr int hipMemAccessFlagsProtReadWrite = 3;
inline constexpr int hipMemAllocationGranularityRecommended = 1;
struct hipMemAllocationProp {
  int type;
  int requestedHandleType;
  hipMemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
  } allocFlags;
};
struct hipMemAccessDesc {
  hipMemLocation location;
  int flags;
};

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
using PFN_hipDeviceGetPCIBusId = hipError_t (*)(char* bus_id, int length, int device);
using PFN_hipGetDeviceProperties = hipError_t (*)(void* properties, int device);
using PFN_hipGetDevicePropertiesR0600 = PFN_hipGetDeviceProperties;
using PFN_hipDeviceSynchronize = hipError_t (*)();
using PFN_hipMalloc = hipError_t (*)(void** ptr, size_t bytes);
using PFN_hipFree = hipError_t (*)(void* ptr);
using PFN_hipMemcpy = hipError_t (*)(void* dst, const void* src, size_t bytes, int kind);
using PFN_hipStreamCreate = hipError_t (*)(hipStream_t* stream);
using PFN_hipStreamCreateWithFlags = hipError_t (*)(hipStream_t* stream, unsigned flags);
using PFN_hipStreamDestroy = hipError_t (*)(hipStream_t stream);
using PFN_hipStreamSynchronize = hipError_t (*)(hipStream_t stream);
using PFN_hipStreamBeginCapture = hipError_t (*)(hipStream_t stream, int mode);
using PFN_hipStreamEndCapture = hipError_t (*)(hipStream_t stream, hipGraph_t* graph);
using PFN_hipGraphInstantiate = hipError_t (*)(hipGraphExec_t* exec, hipGraph_t graph, void* error_node, char* log,
                                               size_t log_bytes);
using PFN_hipGraphLaunch = hipError_t (*)(hipGraphExec_t exec, hipStream_t stream);
using PFN_hipGraphExecDestroy = hipError_t (*)(hipGraphExec_t exec);
using PFN_hipGraphDestroy = hipError_t (*)(hipGraph_t graph);
using PFN_hipDeviceCanAccessPeer = hipError_t (*)(int* can, int device, int peer);
using PFN_hipDeviceEnablePeerAccess = hipError_t (*)(int peer, unsigned flags);
using PFN_hipMemGetAllocationGranularity = hipError_t (*)(size_t* granularity, const hipMemAllocationProp* prop,
                                                          int option);
using PFN_hipMemAddressReserve = hipError_t (*)(void** ptr, size_t size, size_t alignment, void* addr,
                                                unsigned long long flags);
using PFN_hipMemAddressFree = hipError_t (*)(void* ptr, size_t size);
using PFN_hipMemCreate = hipError_t (*)(hipMemGenericAllocationHandle_t* handle, size_t size,
                                        const hipMemAllocationProp* prop, unsigned long long flags);
using PFN_hipMemRelease = hipError_t (*)(hipMemGenericAllocationHandle_t handle);
using PFN_hipMemMap = hipError_t (*)(void* ptr, size_t size, size_t offset, hipMemGenericAllocationHandle_t handle,
                                     unsigned long long flags);
using PFN_hipMemUnmap = hipError_t (*)(void* ptr, size_t size);
using PFN_hipMemSetAccess = hipError_t (*)(void* ptr, size_t size, const hipMemAccessDesc* desc, size_t count);
using PFN_hipMemsetD8 = hipError_t (*)(hipDeviceptr_t dst, unsigned char value, size_t count);
using PFN_hipHostMalloc = hipError_t (*)(void** ptr, size_t size, unsigned flags);
using PFN_hipHostFree = hipError_t (*)(void* ptr);
using PFN_hipMemcpyAsync = hipError_t (*)(void* dst, const void* src, size_t bytes, int kind, hipStream_t stream);
using PFN_hipMemcpy2DAsync = hipError_t (*)(void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                                            size_t width, size_t height, int kind, hipStream_t stream);
using PFN_hipStreamWaitValue64 = hipError_t (*)(hipStream_t stream, void* ptr, uint64_t value, unsigned flags,
                                                uint64_t mask);
using PFN_hipStreamWriteValue64 = hipError_t (*)(hipStream_t stream, void* ptr, uint64_t value, unsigned flags);
using PFN_hipEventCreateWithFlags = hipError_t (*)(hipEvent_t* event, unsigned flags);
using PFN_hipEventDestroy = hipError_t (*)(hipEvent_t event);
using PFN_hipEventRecord = hipError_t (*)(hipEvent_t event, hipStream_t stream);
using PFN_hipEventQuery = hipError_t (*)(hipEvent_t event);
using PFN_hipStreamWaitEvent = hipError_t (*)(hipStream_t stream, hipEvent_t event, unsigned flags);
using PFN_hipModuleLoadData = hipError_t (*)(hipModule_t* module, const void* image);
using PFN_hipModuleUnload = hipError_t (*)(hipModule_t module);
using PFN_hipModuleGetFunction = hipError_t (*)(hipFunction_t* function, hipModule_t module, const char* name);
using PFN_hipModuleGetGlobal = hipError_t (*)(hipDeviceptr_t* ptr, size_t* bytes, hipModule_t module, const char* name);
using PFN_hipModuleOccupancyMaxActiveBlocksPerMultiprocessor = hipError_t (*)(int* num_blocks, hipFunction_t f,
                                                                               int block_size, size_t shared_bytes);
using PFN_hipModuleLaunchKernel = hipError_t (*)(hipFunction_t f, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                                                 unsigned block_x, unsigned block_y, unsigned block_z,
                                                 unsigned shared_bytes, hipStream_t stream, void** params,
                                                 void** extra);
}

}  // namespace tessel::hip
