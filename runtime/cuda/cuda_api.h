// The part of the CUDA driver API that tessel calls, declared by tessel so
// that it builds without NVIDIA's toolkit: libcuda.so.1 is loaded at run time
// (driver.h), so only types, values and prototypes are needed, never cuda.h.
//
// Names, values and layouts are those of cuda.h and cudaTypedefs.h, declared
// inside tessel::cuda so that they never clash with NVIDIA's (a file may
// include both, cuda.h last: see CU_MEMHOSTALLOC_*).
// tests/runtime/cuda_api_check.cc compares every declaration here with the
// real headers where they are installed. Only what tessel uses is declared:
// an enum lists the values tessel passes or reads, a struct has every field
// (its layout is the driver's), and a prototype is the one of the CUDA
// version named in its PFN_..._vNNNN name.
#pragma once

#include <cstddef>
#include <cstdint>

// Entry points' calling convention: empty on Linux. Defined as cuda.h defines
// it, so either header may come first.
#ifndef CUDAAPI
#define CUDAAPI
#endif

namespace tessel::cuda {

using cuuint32_t = std::uint32_t;
using cuuint64_t = std::uint64_t;

// A device address is an integer, not a pointer: it means nothing on the host.
using CUdeviceptr = unsigned long long;
using CUdevice = int;
using CUmemGenericAllocationHandle = unsigned long long;

// Opaque handles (cuda.h's struct tags, never defined).
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUarray_st;
struct CUevent_st;
struct CUstream_st;
struct CUgraph_st;
struct CUgraphExec_st;
struct CUlinkState_st;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUarray = CUarray_st*;
using CUevent = CUevent_st*;
using CUstream = CUstream_st*;
using CUgraph = CUgraph_st*;
using CUgraphExec = CUgraphExec_st*;
using CUlinkState = CUlinkState_st*;

// Every enum has int as its underlying type, the size of a C enum: the driver
// may hand back values tessel does not list (a newer error code), and those
// must stay valid values of the type.

enum CUresult : int {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_DEINITIALIZED = 4,
  CUDA_ERROR_DEVICE_UNAVAILABLE = 46,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803,
  CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804,
  CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
  CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
  CUDA_ERROR_STREAM_CAPTURE_MERGE = 902,
  CUDA_ERROR_STREAM_CAPTURE_UNMATCHED = 903,
  CUDA_ERROR_STREAM_CAPTURE_UNJOINED = 904,
  CUDA_ERROR_STREAM_CAPTURE_ISOLATION = 905,
  CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906,
  CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD = 908,
};

enum CUdevice_attribute : int {
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
  CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
  CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS = 122,
};

enum CUfunction_attribute : int {
  CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
  CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
};

enum CUjit_option : int {
  CU_JIT_INFO_LOG_BUFFER = 3,
  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
};

enum CUjitInputType : int {
  CU_JIT_INPUT_PTX = 1,
};

// Flags of cuStreamCreate, cuEventCreate, cuStreamWaitValue64 and
// cuStreamWriteValue64 (unsigned int parameters; cuda.h names them in enums).
enum CUstream_flags : int {
  CU_STREAM_NON_BLOCKING = 0x1,
};
enum CUevent_flags : int {
  CU_EVENT_DEFAULT = 0x0,
  CU_EVENT_DISABLE_TIMING = 0x2,
};
enum CUstreamWaitValue_flags : int {
  CU_STREAM_WAIT_VALUE_GEQ = 0x0,  // cyclic: (int64_t)(*addr - value) >= 0
};
enum CUstreamWriteValue_flags : int {
  CU_STREAM_WRITE_VALUE_DEFAULT = 0x0,  // fenced
};

// cuda.h defines these two as macros; here they are constants, so they stay in
// tessel::cuda. A file that includes cuda.h as well must include it after this
// header, or the macros would replace these names.
inline constexpr unsigned int CU_MEMHOSTALLOC_PORTABLE = 0x01;
inline constexpr unsigned int CU_MEMHOSTALLOC_DEVICEMAP = 0x02;

enum CUstreamCaptureStatus : int {
  CU_STREAM_CAPTURE_STATUS_NONE = 0,
  CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
  CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2,
};
enum CUstreamCaptureMode : int {
  CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
};

// cuGetProcAddress's flags (a cuuint64_t) and what it says it found.
enum CUdriverProcAddress_flags : int {
  CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1 << 0,
};
enum CUdriverProcAddressQueryResult : int {
  CU_GET_PROC_ADDRESS_SUCCESS = 0,
  CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
};

// ---------------------------------------------------------------------------
// Copies and stream memory operations

enum CUmemorytype : int {
  CU_MEMORYTYPE_DEVICE = 0x02,
};

struct CUDA_MEMCPY2D {
  size_t srcXInBytes;
  size_t srcY;
  CUmemorytype srcMemoryType;
  const void* srcHost;
  CUdeviceptr srcDevice;
  CUarray srcArray;
  size_t srcPitch;
  size_t dstXInBytes;
  size_t dstY;
  CUmemorytype dstMemoryType;
  void* dstHost;
  CUdeviceptr dstDevice;
  CUarray dstArray;
  size_t dstPitch;
  size_t WidthInBytes;
  size_t Height;
};

enum CUstreamBatchMemOpType : int {
  CU_STREAM_MEM_OP_WRITE_VALUE_64 = 5,
};

// One operation of cuStreamBatchMemOp. tessel only writes; `pad` gives the
// union the driver's size (48 bytes), which arrays of it are strided by.
union CUstreamBatchMemOpParams {
  struct CUstreamMemOpWriteValueParams_st {
    CUstreamBatchMemOpType operation;
    CUdeviceptr address;
    union {
      cuuint32_t value;
      cuuint64_t value64;
    };
    unsigned int flags;  // CUstreamWriteValue_flags
    CUdeviceptr alias;   // the driver's own; need not be set
  } writeValue;
  cuuint64_t pad[6];
};

// ---------------------------------------------------------------------------
// Virtual memory management

enum CUmemAllocationType : int {
  CU_MEM_ALLOCATION_TYPE_PINNED = 0x1,
};
// A zero-initialised CUmemAllocationProp asks for no exportable handle;
// groups joined across processes export theirs as file descriptors.
enum CUmemAllocationHandleType : int {
  CU_MEM_HANDLE_TYPE_NONE = 0x0,
  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 0x1,
};
enum CUmemLocationType : int {
  CU_MEM_LOCATION_TYPE_DEVICE = 0x1,
};
enum CUmemAccess_flags : int {
  CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 0x3,
};
enum CUmemAllocationGranularity_flags : int {
  CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 0x1,
};

struct CUmemLocation {
  CUmemLocationType type;
  int id;  // the device ordinal, for CU_MEM_LOCATION_TYPE_DEVICE
};

struct CUmemAllocationProp {
  CUmemAllocationType type;
  CUmemAllocationHandleType requestedHandleTypes;
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;  // all zero: no compression, no special usage
};

struct CUmemAccessDesc {
  CUmemLocation location;
  CUmemAccess_flags flags;
};

// ---------------------------------------------------------------------------
// Tensor maps

// What a kernel receives by value. The driver needs 64-byte alignment (as
// CUDA 12's cuda.h declares; CUDA 13's declares 128, which also satisfies it).
struct CUtensorMap {
  alignas(64) cuuint64_t opaque[16];
};

enum CUtensorMapDataType : int {
  CU_TENSOR_MAP_DATA_TYPE_UINT8 = 0,
  CU_TENSOR_MAP_DATA_TYPE_UINT16 = 1,
  CU_TENSOR_MAP_DATA_TYPE_UINT32 = 2,
  CU_TENSOR_MAP_DATA_TYPE_INT32 = 3,
  CU_TENSOR_MAP_DATA_TYPE_UINT64 = 4,
  CU_TENSOR_MAP_DATA_TYPE_INT64 = 5,
  CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6,
  CU_TENSOR_MAP_DATA_TYPE_FLOAT32 = 7,
  CU_TENSOR_MAP_DATA_TYPE_FLOAT64 = 8,
  CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9,
};
enum CUtensorMapInterleave : int {
  CU_TENSOR_MAP_INTERLEAVE_NONE = 0,
  CU_TENSOR_MAP_INTERLEAVE_16B = 1,
  CU_TENSOR_MAP_INTERLEAVE_32B = 2,
};
enum CUtensorMapSwizzle : int {
  CU_TENSOR_MAP_SWIZZLE_NONE = 0,
  CU_TENSOR_MAP_SWIZZLE_32B = 1,
  CU_TENSOR_MAP_SWIZZLE_64B = 2,
  CU_TENSOR_MAP_SWIZZLE_128B = 3,
};
enum CUtensorMapL2promotion : int {
  CU_TENSOR_MAP_L2_PROMOTION_L2_128B = 2,
};
enum CUtensorMapFloatOOBfill : int {
  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0,
  CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA = 1,
};

// ---------------------------------------------------------------------------
// Entry points, as cuGetProcAddress (or dlsym, for the benchmarks' baselines)
// returns them: PFN_<name>_v<CUDA version whose prototype this is>.

using PFN_cuGetProcAddress_v12000 = CUresult(CUDAAPI*)(const char* symbol, void** pfn, int cudaVersion,
                                                       cuuint64_t flags, CUdriverProcAddressQueryResult* symbolStatus);

// Initialisation, errors, devices and contexts
using PFN_cuInit_v2000 = CUresult(CUDAAPI*)(unsigned int Flags);
using PFN_cuDriverGetVersion_v2020 = CUresult(CUDAAPI*)(int* driverVersion);
using PFN_cuGetErrorName_v6000 = CUresult(CUDAAPI*)(CUresult error, const char** pStr);
using PFN_cuGetErrorString_v6000 = CUresult(CUDAAPI*)(CUresult error, const char** pStr);
using PFN_cuDeviceGet_v2000 = CUresult(CUDAAPI*)(CUdevice* device, int ordinal);
using PFN_cuDeviceGetCount_v2000 = CUresult(CUDAAPI*)(int* count);
using PFN_cuDeviceGetAttribute_v2000 = CUresult(CUDAAPI*)(int* pi, CUdevice_attribute attrib, CUdevice dev);
using PFN_cuDeviceGetName_v2000 = CUresult(CUDAAPI*)(char* name, int len, CUdevice dev);
using PFN_cuDeviceCanAccessPeer_v4000 = CUresult(CUDAAPI*)(int* canAccessPeer, CUdevice dev, CUdevice peerDev);
using PFN_cuDevicePrimaryCtxRetain_v7000 = CUresult(CUDAAPI*)(CUcontext* pctx, CUdevice dev);
using PFN_cuDevicePrimaryCtxRelease_v11000 = CUresult(CUDAAPI*)(CUdevice dev);
using PFN_cuCtxGetCurrent_v4000 = CUresult(CUDAAPI*)(CUcontext* pctx);
using PFN_cuCtxSetCurrent_v4000 = CUresult(CUDAAPI*)(CUcontext ctx);
// The CUDA 12 form; CUDA 13's cuCtxSynchronize (v13000) takes a context.
using PFN_cuCtxSynchronize_v2000 = CUresult(CUDAAPI*)();
using PFN_cuCtxEnablePeerAccess_v4000 = CUresult(CUDAAPI*)(CUcontext peerContext, unsigned int Flags);
using PFN_cuCtxGetStreamPriorityRange_v5050 = CUresult(CUDAAPI*)(int* leastPriority, int* greatestPriority);

// Memory
using PFN_cuMemAlloc_v3020 = CUresult(CUDAAPI*)(CUdeviceptr* dptr, size_t bytesize);
using PFN_cuMemFree_v3020 = CUresult(CUDAAPI*)(CUdeviceptr dptr);
using PFN_cuMemGetInfo_v3020 = CUresult(CUDAAPI*)(size_t* free, size_t* total);
using PFN_cuMemAllocHost_v3020 = CUresult(CUDAAPI*)(void** pp, size_t bytesize);
using PFN_cuMemHostAlloc_v2020 = CUresult(CUDAAPI*)(void** pp, size_t bytesize, unsigned int Flags);
using PFN_cuMemFreeHost_v2000 = CUresult(CUDAAPI*)(void* p);
using PFN_cuMemHostGetDevicePointer_v3020 = CUresult(CUDAAPI*)(CUdeviceptr* pdptr, void* p, unsigned int Flags);
using PFN_cuMemcpyHtoD_v3020 = CUresult(CUDAAPI*)(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount);
using PFN_cuMemcpyDtoH_v3020 = CUresult(CUDAAPI*)(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount);
using PFN_cuMemcpyDtoD_v3020 = CUresult(CUDAAPI*)(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount);
using PFN_cuMemcpyHtoDAsync_v3020 = CUresult(CUDAAPI*)(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount,
                                                       CUstream hStream);
using PFN_cuMemcpyDtoHAsync_v3020 = CUresult(CUDAAPI*)(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                                       CUstream hStream);
using PFN_cuMemcpyDtoDAsync_v3020 = CUresult(CUDAAPI*)(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                                       CUstream hStream);
using PFN_cuMemcpyAsync_v4000 = CUresult(CUDAAPI*)(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                                                   CUstream hStream);
using PFN_cuMemcpy2DAsync_v3020 = CUresult(CUDAAPI*)(const CUDA_MEMCPY2D* pCopy, CUstream hStream);
using PFN_cuMemcpyPeerAsync_v4000 = CUresult(CUDAAPI*)(CUdeviceptr dstDevice, CUcontext dstContext,
                                                       CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount,
                                                       CUstream hStream);
using PFN_cuMemsetD8_v3020 = CUresult(CUDAAPI*)(CUdeviceptr dstDevice, unsigned char uc, size_t N);
using PFN_cuMemAddressReserve_v10020 = CUresult(CUDAAPI*)(CUdeviceptr* ptr, size_t size, size_t alignment,
                                                          CUdeviceptr addr, unsigned long long flags);
using PFN_cuMemAddressFree_v10020 = CUresult(CUDAAPI*)(CUdeviceptr ptr, size_t size);
using PFN_cuMemCreate_v10020 = CUresult(CUDAAPI*)(CUmemGenericAllocationHandle* handle, size_t size,
                                                  const CUmemAllocationProp* prop, unsigned long long flags);
using PFN_cuMemRelease_v10020 = CUresult(CUDAAPI*)(CUmemGenericAllocationHandle handle);
using PFN_cuMemExportToShareableHandle_v10020 = CUresult(CUDAAPI*)(void* shareableHandle,
                                                                   CUmemGenericAllocationHandle handle,
                                                                   CUmemAllocationHandleType handleType,
                                                                   unsigned long long flags);
using PFN_cuMemImportFromShareableHandle_v10020 = CUresult(CUDAAPI*)(CUmemGenericAllocationHandle* handle,
                                                                     void* osHandle,
                                                                     CUmemAllocationHandleType shHandleType);
using PFN_cuMemMap_v10020 = CUresult(CUDAAPI*)(CUdeviceptr ptr, size_t size, size_t offset,
                                               CUmemGenericAllocationHandle handle, unsigned long long flags);
using PFN_cuMemUnmap_v10020 = CUresult(CUDAAPI*)(CUdeviceptr ptr, size_t size);
using PFN_cuMemSetAccess_v10020 = CUresult(CUDAAPI*)(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                                     size_t count);
using PFN_cuMemGetAllocationGranularity_v10020 = CUresult(CUDAAPI*)(size_t* granularity,
                                                                    const CUmemAllocationProp* prop,
                                                                    CUmemAllocationGranularity_flags option);

// Streams, events and stream memory operations
using PFN_cuStreamCreate_v2000 = CUresult(CUDAAPI*)(CUstream* phStream, unsigned int Flags);
using PFN_cuStreamCreateWithPriority_v5050 = CUresult(CUDAAPI*)(CUstream* phStream, unsigned int flags, int priority);
using PFN_cuStreamDestroy_v4000 = CUresult(CUDAAPI*)(CUstream hStream);
using PFN_cuStreamSynchronize_v2000 = CUresult(CUDAAPI*)(CUstream hStream);
using PFN_cuStreamQuery_v2000 = CUresult(CUDAAPI*)(CUstream hStream);
using PFN_cuStreamWaitEvent_v3020 = CUresult(CUDAAPI*)(CUstream hStream, CUevent hEvent, unsigned int Flags);
using PFN_cuEventCreate_v2000 = CUresult(CUDAAPI*)(CUevent* phEvent, unsigned int Flags);
using PFN_cuEventRecord_v2000 = CUresult(CUDAAPI*)(CUevent hEvent, CUstream hStream);
using PFN_cuEventQuery_v2000 = CUresult(CUDAAPI*)(CUevent hEvent);
using PFN_cuEventSynchronize_v2000 = CUresult(CUDAAPI*)(CUevent hEvent);
using PFN_cuEventElapsedTime_v2000 = CUresult(CUDAAPI*)(float* pMilliseconds, CUevent hStart, CUevent hEnd);
using PFN_cuEventDestroy_v4000 = CUresult(CUDAAPI*)(CUevent hEvent);
using PFN_cuStreamWaitValue32_v11070 = CUresult(CUDAAPI*)(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                                          unsigned int flags);
using PFN_cuStreamWaitValue64_v11070 = CUresult(CUDAAPI*)(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                                                          unsigned int flags);
using PFN_cuStreamWriteValue64_v11070 = CUresult(CUDAAPI*)(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                                                           unsigned int flags);
using PFN_cuStreamBatchMemOp_v11070 = CUresult(CUDAAPI*)(CUstream stream, unsigned int count,
                                                         CUstreamBatchMemOpParams* paramArray, unsigned int flags);

// Modules, functions and launches
using PFN_cuModuleLoadData_v2000 = CUresult(CUDAAPI*)(CUmodule* module, const void* image);
using PFN_cuModuleLoadDataEx_v2010 = CUresult(CUDAAPI*)(CUmodule* module, const void* image, unsigned int numOptions,
                                                        CUjit_option* options, void** optionValues);
using PFN_cuLinkCreate_v6050 = CUresult(CUDAAPI*)(unsigned int numOptions, CUjit_option* options, void** optionValues,
                                                   CUlinkState* stateOut);
using PFN_cuLinkAddData_v6050 = CUresult(CUDAAPI*)(CUlinkState state, CUjitInputType type, void* data, size_t size,
                                                    const char* name, unsigned int numOptions, CUjit_option* options,
                                                    void** optionValues);
using PFN_cuLinkComplete_v5050 = CUresult(CUDAAPI*)(CUlinkState state, void** cubinOut, size_t* sizeOut);
using PFN_cuLinkDestroy_v5050 = CUresult(CUDAAPI*)(CUlinkState state);
using PFN_cuModuleGetFunction_v2000 = CUresult(CUDAAPI*)(CUfunction* hfunc, CUmodule hmod, const char* name);
using PFN_cuModuleGetGlobal_v3020 = CUresult(CUDAAPI*)(CUdeviceptr* dptr, size_t* bytes, CUmodule hmod,
                                                       const char* name);
using PFN_cuModuleUnload_v2000 = CUresult(CUDAAPI*)(CUmodule hmod);
using PFN_cuFuncLoad_v12040 = CUresult(CUDAAPI*)(CUfunction function);
using PFN_cuFuncGetAttribute_v2020 = CUresult(CUDAAPI*)(int* pi, CUfunction_attribute attrib, CUfunction hfunc);
using PFN_cuOccupancyMaxActiveBlocksPerMultiprocessor_v6050 = CUresult(CUDAAPI*)(int* numBlocks, CUfunction func,
                                                                                 int blockSize,
                                                                                 size_t dynamicSMemSize);
using PFN_cuFuncSetAttribute_v9000 = CUresult(CUDAAPI*)(CUfunction hfunc, CUfunction_attribute attrib, int value);
using PFN_cuLaunchKernel_v4000 = CUresult(CUDAAPI*)(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                                    unsigned int gridDimZ, unsigned int blockDimX,
                                                    unsigned int blockDimY, unsigned int blockDimZ,
                                                    unsigned int sharedMemBytes, CUstream hStream, void** kernelParams,
                                                    void** extra);
using PFN_cuTensorMapEncodeTiled_v12000 =
    CUresult(CUDAAPI*)(CUtensorMap* tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
                       void* globalAddress, const cuuint64_t* globalDim, const cuuint64_t* globalStrides,
                       const cuuint32_t* boxDim, const cuuint32_t* elementStrides, CUtensorMapInterleave interleave,
                       CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill);

// Graphs
using PFN_cuStreamBeginCapture_v10010 = CUresult(CUDAAPI*)(CUstream hStream, CUstreamCaptureMode mode);
using PFN_cuStreamEndCapture_v10000 = CUresult(CUDAAPI*)(CUstream hStream, CUgraph* phGraph);
using PFN_cuStreamIsCapturing_v10000 = CUresult(CUDAAPI*)(CUstream hStream, CUstreamCaptureStatus* captureStatus);
using PFN_cuGraphInstantiateWithFlags_v11040 = CUresult(CUDAAPI*)(CUgraphExec* phGraphExec, CUgraph hGraph,
                                                                  unsigned long long flags);
using PFN_cuGraphLaunch_v10000 = CUresult(CUDAAPI*)(CUgraphExec hGraphExec, CUstream hStream);
using PFN_cuGraphExecDestroy_v10000 = CUresult(CUDAAPI*)(CUgraphExec hGraphExec);
using PFN_cuGraphDestroy_v10000 = CUresult(CUDAAPI*)(CUgraph hGraph);

}  // namespace tessel::cuda
