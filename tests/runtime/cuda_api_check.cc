// tessel's declarations of the CUDA driver API (runtime/cuda/cuda_api.h)
// against NVIDIA's cuda.h and cudaTypedefs.h: every value, every struct's
// size, alignment and field offsets and types, and every entry point's
// prototype. The checks are static_asserts, so compiling this file is the
// test; running it only says which headers it was checked against. Built
// where cuda.h is found (tests/CMakeLists.txt).

// clang-format off
// tessel's header first: cuda.h defines CU_MEMHOSTALLOC_* as macros, which
// would replace tessel's names for them.
#include "runtime/cuda/cuda_api.h"
#include <cuda.h>
#include <cudaTypedefs.h>
// clang-format on

#include <cstddef>
#include <cstdio>
#include <type_traits>

namespace {

namespace t = ::tessel::cuda;

// The real type each of tessel's types stands for. tessel's enums, structs
// and handle tags map to cuda.h's of the same name; every other type (int,
// size_t, cuuint64_t, CUdeviceptr) is one type in both. A tessel prototype
// matches when mapping each type in it gives exactly the real prototype.
template <class T>
struct Real {
  using type = T;
};
template <class T>
using real_t = typename Real<T>::type;
template <class T>
struct Real<T*> {
  using type = real_t<T>*;
};
template <class T>
struct Real<const T> {
  using type = const real_t<T>;
};
template <class T, size_t N>
struct Real<T[N]> {
  using type = real_t<T>[N];
};
template <class R, class... Args>
struct Real<R(Args...)> {
  using type = real_t<R>(real_t<Args>...);
};

#define TESSEL_MAP(tessel_type, real_type) \
  template <>                              \
  struct Real<tessel_type> {               \
    using type = real_type;                \
  };

// Handles: pointers to never-defined tags, so only the tag is mapped.
#define TESSEL_SAME_HANDLE(name, tag) \
  TESSEL_MAP(t::tag, ::tag)           \
  static_assert(std::is_same_v<real_t<t::name>, ::name>, #name);

// A type of the same size and alignment, mapped.
#define TESSEL_SAME_LAYOUT(tessel_type, real_type)                             \
  TESSEL_MAP(tessel_type, real_type)                                           \
  static_assert(sizeof(tessel_type) == sizeof(real_type), #real_type " size"); \
  static_assert(alignof(tessel_type) == alignof(real_type), #real_type " alignment");
#define TESSEL_SAME_ENUM(name) TESSEL_SAME_LAYOUT(t::name, ::name)
#define TESSEL_SAME_STRUCT(name) TESSEL_SAME_LAYOUT(t::name, ::name)

// An enumerator: the same value, of the corresponding enum.
#define TESSEL_SAME_VALUE(name)                                                                     \
  static_assert(static_cast<long long>(t::name) == static_cast<long long>(::name), #name " value"); \
  static_assert(std::is_same_v<real_t<decltype(t::name)>, std::remove_cv_t<decltype(::name)>>, #name " type");

// A field: the same offset and (mapped) type.
#define TESSEL_SAME_FIELD_OF(tessel_type, real_type, field)                                    \
  static_assert(offsetof(tessel_type, field) == offsetof(real_type, field), #field " offset"); \
  static_assert(std::is_same_v<real_t<decltype(tessel_type::field)>, decltype(real_type::field)>, #field " type");
#define TESSEL_SAME_FIELD(name, field) TESSEL_SAME_FIELD_OF(t::name, ::name, field)

#define TESSEL_SAME_PFN(name) static_assert(std::is_same_v<real_t<t::name>, ::name>, #name);

// ---------------------------------------------------------------------------
// Scalars and handles

static_assert(std::is_same_v<t::cuuint32_t, ::cuuint32_t>);
static_assert(std::is_same_v<t::cuuint64_t, ::cuuint64_t>);
static_assert(std::is_same_v<t::CUdeviceptr, ::CUdeviceptr>);
static_assert(std::is_same_v<t::CUdevice, ::CUdevice>);
static_assert(std::is_same_v<t::CUmemGenericAllocationHandle, ::CUmemGenericAllocationHandle>);

TESSEL_SAME_HANDLE(CUcontext, CUctx_st)
TESSEL_SAME_HANDLE(CUmodule, CUmod_st)
TESSEL_SAME_HANDLE(CUfunction, CUfunc_st)
TESSEL_SAME_HANDLE(CUarray, CUarray_st)
TESSEL_SAME_HANDLE(CUevent, CUevent_st)
TESSEL_SAME_HANDLE(CUstream, CUstream_st)
TESSEL_SAME_HANDLE(CUgraph, CUgraph_st)
TESSEL_SAME_HANDLE(CUgraphExec, CUgraphExec_st)
TESSEL_SAME_HANDLE(CUlinkState, CUlinkState_st)

// ---------------------------------------------------------------------------
// Enums and their values

TESSEL_SAME_ENUM(CUresult)
TESSEL_SAME_VALUE(CUDA_SUCCESS)
TESSEL_SAME_VALUE(CUDA_ERROR_INVALID_VALUE)
TESSEL_SAME_VALUE(CUDA_ERROR_OUT_OF_MEMORY)
TESSEL_SAME_VALUE(CUDA_ERROR_NOT_INITIALIZED)
TESSEL_SAME_VALUE(CUDA_ERROR_DEINITIALIZED)
TESSEL_SAME_VALUE(CUDA_ERROR_DEVICE_UNAVAILABLE)
TESSEL_SAME_VALUE(CUDA_ERROR_NO_DEVICE)
TESSEL_SAME_VALUE(CUDA_ERROR_INVALID_DEVICE)
TESSEL_SAME_VALUE(CUDA_ERROR_NOT_FOUND)
TESSEL_SAME_VALUE(CUDA_ERROR_NOT_READY)
TESSEL_SAME_VALUE(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
TESSEL_SAME_VALUE(CUDA_ERROR_NOT_SUPPORTED)
TESSEL_SAME_VALUE(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)
TESSEL_SAME_VALUE(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE)
TESSEL_SAME_VALUE(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
TESSEL_SAME_VALUE(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
TESSEL_SAME_VALUE(CUDA_ERROR_STREAM_CAPTURE_MERGE)
TESSEL_SAME_VALUE(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED)
TESSEL_SAME_VALUE(CUDA_ERROR_STREAM_CAPTURE_UNJOINED)
TESSEL_SAME_VALUE(CUDA_ERROR_STREAM_CAPTURE_ISOLATION)
TESSEL_SAME_VALUE(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)
TESSEL_SAME_VALUE(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD)

TESSEL_SAME_ENUM(CUdevice_attribute)
TESSEL_SAME_VALUE(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
TESSEL_SAME_VALUE(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
TESSEL_SAME_VALUE(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
TESSEL_SAME_VALUE(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
TESSEL_SAME_VALUE(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)
TESSEL_SAME_VALUE(CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS)

TESSEL_SAME_ENUM(CUfunction_attribute)
TESSEL_SAME_VALUE(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
TESSEL_SAME_VALUE(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
TESSEL_SAME_VALUE(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)

TESSEL_SAME_ENUM(CUjit_option)
TESSEL_SAME_VALUE(CU_JIT_INFO_LOG_BUFFER)
TESSEL_SAME_VALUE(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES)
TESSEL_SAME_VALUE(CU_JIT_ERROR_LOG_BUFFER)
TESSEL_SAME_VALUE(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
TESSEL_SAME_ENUM(CUjitInputType)
TESSEL_SAME_VALUE(CU_JIT_INPUT_PTX)

TESSEL_SAME_ENUM(CUstream_flags)
TESSEL_SAME_VALUE(CU_STREAM_NON_BLOCKING)
TESSEL_SAME_ENUM(CUevent_flags)
TESSEL_SAME_VALUE(CU_EVENT_DEFAULT)
TESSEL_SAME_VALUE(CU_EVENT_DISABLE_TIMING)
TESSEL_SAME_ENUM(CUstreamWaitValue_flags)
TESSEL_SAME_VALUE(CU_STREAM_WAIT_VALUE_GEQ)
TESSEL_SAME_ENUM(CUstreamWriteValue_flags)
TESSEL_SAME_VALUE(CU_STREAM_WRITE_VALUE_DEFAULT)

TESSEL_SAME_ENUM(CUstreamCaptureStatus)
TESSEL_SAME_VALUE(CU_STREAM_CAPTURE_STATUS_NONE)
TESSEL_SAME_VALUE(CU_STREAM_CAPTURE_STATUS_ACTIVE)
TESSEL_SAME_VALUE(CU_STREAM_CAPTURE_STATUS_INVALIDATED)
TESSEL_SAME_ENUM(CUstreamCaptureMode)
TESSEL_SAME_VALUE(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)

TESSEL_SAME_ENUM(CUdriverProcAddress_flags)
TESSEL_SAME_VALUE(CU_GET_PROC_ADDRESS_LEGACY_STREAM)
TESSEL_SAME_ENUM(CUdriverProcAddressQueryResult)
TESSEL_SAME_VALUE(CU_GET_PROC_ADDRESS_SUCCESS)
TESSEL_SAME_VALUE(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND)

TESSEL_SAME_ENUM(CUmemorytype)
TESSEL_SAME_VALUE(CU_MEMORYTYPE_DEVICE)
TESSEL_SAME_ENUM(CUstreamBatchMemOpType)
TESSEL_SAME_VALUE(CU_STREAM_MEM_OP_WRITE_VALUE_64)

TESSEL_SAME_ENUM(CUmemAllocationType)
TESSEL_SAME_VALUE(CU_MEM_ALLOCATION_TYPE_PINNED)
TESSEL_SAME_ENUM(CUmemAllocationHandleType)
TESSEL_SAME_VALUE(CU_MEM_HANDLE_TYPE_NONE)
TESSEL_SAME_VALUE(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
TESSEL_SAME_ENUM(CUmemLocationType)
TESSEL_SAME_VALUE(CU_MEM_LOCATION_TYPE_DEVICE)
TESSEL_SAME_ENUM(CUmemAccess_flags)
TESSEL_SAME_VALUE(CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
TESSEL_SAME_ENUM(CUmemAllocationGranularity_flags)
TESSEL_SAME_VALUE(CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)

TESSEL_SAME_ENUM(CUtensorMapDataType)
TESSEL_SAME_VALUE(CU_TENSOR_MAP_DATA_TYPE_UINT8)
TESSEL_SAME_VALUE(CU_TENSOR_MAP_DATA_TYPE_UINT16)
TESSEL_SAME_VALUE(CU_TENSOR_MAP_DATA_TYPE_UINT32)
TESSEL_SAME_VALUE(CU_TENSOR_MAP_DATA_TYPE_INT32)
TESSEL_SAME_VALUE(CU_TENSOR_MAP_DATA_TYPE_UINT64)
TESSEL_SAME_VALUE(CU_TENSOR_MAP_DATA_TYPE_INT64)
TESSEL_SAME_VALUE(CU_TENSOR_MAP_DATA_TYPE_FLOAT16)
TESSEL_SAME_VALUE(CU_TENSOR_MAP_DATA_TYPE_FLOAT32)
TESSEL_SAME_VALUE(CU_TENSOR_MAP_DATA_TYPE_FLOAT64)
TESSEL_SAME_VALUE(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16)
TESSEL_SAME_ENUM(CUtensorMapInterleave)
TESSEL_SAME_VALUE(CU_TENSOR_MAP_INTERLEAVE_NONE)
TESSEL_SAME_VALUE(CU_TENSOR_MAP_INTERLEAVE_16B)
TESSEL_SAME_VALUE(CU_TENSOR_MAP_INTERLEAVE_32B)
TESSEL_SAME_ENUM(CUtensorMapSwizzle)
TESSEL_SAME_VALUE(CU_TENSOR_MAP_SWIZZLE_NONE)
TESSEL_SAME_VALUE(CU_TENSOR_MAP_SWIZZLE_32B)
TESSEL_SAME_VALUE(CU_TENSOR_MAP_SWIZZLE_64B)
TESSEL_SAME_VALUE(CU_TENSOR_MAP_SWIZZLE_128B)
TESSEL_SAME_ENUM(CUtensorMapL2promotion)
TESSEL_SAME_VALUE(CU_TENSOR_MAP_L2_PROMOTION_L2_128B)
TESSEL_SAME_ENUM(CUtensorMapFloatOOBfill)
TESSEL_SAME_VALUE(CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
TESSEL_SAME_VALUE(CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)

// Macros in cuda.h: read before they are undefined to reach tessel's names.
constexpr unsigned int kRealMemHostAllocPortable = CU_MEMHOSTALLOC_PORTABLE;
constexpr unsigned int kRealMemHostAllocDeviceMap = CU_MEMHOSTALLOC_DEVICEMAP;
#undef CU_MEMHOSTALLOC_PORTABLE
#undef CU_MEMHOSTALLOC_DEVICEMAP
static_assert(t::CU_MEMHOSTALLOC_PORTABLE == kRealMemHostAllocPortable);
static_assert(t::CU_MEMHOSTALLOC_DEVICEMAP == kRealMemHostAllocDeviceMap);

// ---------------------------------------------------------------------------
// Structs

TESSEL_SAME_STRUCT(CUDA_MEMCPY2D)
TESSEL_SAME_FIELD(CUDA_MEMCPY2D, srcXInBytes)
TESSEL_SAME_FIELD(CUDA_MEMCPY2D, srcY)
TESSEL_SAME_FIELD(CUDA_MEMCPY2D, srcMemoryType)
TESSEL_SAME_FIELD(CUDA_MEMCPY2D, srcHost)
TESSEL_SAME_FIELD(CUDA_MEMCPY2D, srcDevice)
TESSEL_SAME_FIELD(CUDA_MEMCPY2D, srcArray)
TESSEL_SAME_FIELD(CUDA_MEMCPY2D, srcPitch)
TESSEL_SAME_FIELD(CUDA_MEMCPY2D, dstXInBytes)
TESSEL_SAME_FIELD(CUDA_MEMCPY2D, dstY)
TESSEL_SAME_FIELD(CUDA_MEMCPY2D, dstMemoryType)
TESSEL_SAME_FIELD(CUDA_MEMCPY2D, dstHost)
TESSEL_SAME_FIELD(CUDA_MEMCPY2D, dstDevice)
TESSEL_SAME_FIELD(CUDA_MEMCPY2D, dstArray)
TESSEL_SAME_FIELD(CUDA_MEMCPY2D, dstPitch)
TESSEL_SAME_FIELD(CUDA_MEMCPY2D, WidthInBytes)
TESSEL_SAME_FIELD(CUDA_MEMCPY2D, Height)

using TesselWriteValue = decltype(t::CUstreamBatchMemOpParams::writeValue);
using RealWriteValue = decltype(::CUstreamBatchMemOpParams::writeValue);
TESSEL_SAME_LAYOUT(TesselWriteValue, RealWriteValue)
TESSEL_SAME_FIELD_OF(TesselWriteValue, RealWriteValue, operation)
TESSEL_SAME_FIELD_OF(TesselWriteValue, RealWriteValue, address)
TESSEL_SAME_FIELD_OF(TesselWriteValue, RealWriteValue, value)
TESSEL_SAME_FIELD_OF(TesselWriteValue, RealWriteValue, value64)
TESSEL_SAME_FIELD_OF(TesselWriteValue, RealWriteValue, flags)
TESSEL_SAME_FIELD_OF(TesselWriteValue, RealWriteValue, alias)
TESSEL_SAME_STRUCT(CUstreamBatchMemOpParams)
TESSEL_SAME_FIELD(CUstreamBatchMemOpParams, writeValue)
TESSEL_SAME_FIELD(CUstreamBatchMemOpParams, pad)

TESSEL_SAME_STRUCT(CUmemLocation)
TESSEL_SAME_FIELD(CUmemLocation, type)
TESSEL_SAME_FIELD(CUmemLocation, id)

using TesselAllocFlags = decltype(t::CUmemAllocationProp::allocFlags);
using RealAllocFlags = decltype(::CUmemAllocationProp::allocFlags);
TESSEL_SAME_LAYOUT(TesselAllocFlags, RealAllocFlags)
TESSEL_SAME_FIELD_OF(TesselAllocFlags, RealAllocFlags, compressionType)
TESSEL_SAME_FIELD_OF(TesselAllocFlags, RealAllocFlags, gpuDirectRDMACapable)
TESSEL_SAME_FIELD_OF(TesselAllocFlags, RealAllocFlags, usage)
TESSEL_SAME_FIELD_OF(TesselAllocFlags, RealAllocFlags, reserved)
TESSEL_SAME_STRUCT(CUmemAllocationProp)
TESSEL_SAME_FIELD(CUmemAllocationProp, type)
TESSEL_SAME_FIELD(CUmemAllocationProp, requestedHandleTypes)
TESSEL_SAME_FIELD(CUmemAllocationProp, location)
TESSEL_SAME_FIELD(CUmemAllocationProp, win32HandleMetaData)
TESSEL_SAME_FIELD(CUmemAllocationProp, allocFlags)

TESSEL_SAME_STRUCT(CUmemAccessDesc)
TESSEL_SAME_FIELD(CUmemAccessDesc, location)
TESSEL_SAME_FIELD(CUmemAccessDesc, flags)

// The driver needs 64-byte alignment, which CUDA 12's cuda.h declares; CUDA
// 13's declares 128. tessel's maps are 64-byte aligned, like TensorMap.
TESSEL_MAP(t::CUtensorMap, ::CUtensorMap)
static_assert(sizeof(t::CUtensorMap) == sizeof(::CUtensorMap));
static_assert(alignof(t::CUtensorMap) == 64 && alignof(::CUtensorMap) % 64 == 0);
TESSEL_SAME_FIELD(CUtensorMap, opaque)

// ---------------------------------------------------------------------------
// Entry points

TESSEL_SAME_PFN(PFN_cuGetProcAddress_v12000)
TESSEL_SAME_PFN(PFN_cuInit_v2000)
TESSEL_SAME_PFN(PFN_cuDriverGetVersion_v2020)
TESSEL_SAME_PFN(PFN_cuGetErrorName_v6000)
TESSEL_SAME_PFN(PFN_cuGetErrorString_v6000)
TESSEL_SAME_PFN(PFN_cuDeviceGet_v2000)
TESSEL_SAME_PFN(PFN_cuDeviceGetCount_v2000)
TESSEL_SAME_PFN(PFN_cuDeviceGetAttribute_v2000)
TESSEL_SAME_PFN(PFN_cuDeviceGetName_v2000)
TESSEL_SAME_PFN(PFN_cuDeviceCanAccessPeer_v4000)
TESSEL_SAME_PFN(PFN_cuDevicePrimaryCtxRetain_v7000)
TESSEL_SAME_PFN(PFN_cuDevicePrimaryCtxRelease_v11000)
TESSEL_SAME_PFN(PFN_cuCtxGetCurrent_v4000)
TESSEL_SAME_PFN(PFN_cuCtxSetCurrent_v4000)
TESSEL_SAME_PFN(PFN_cuCtxSynchronize_v2000)
TESSEL_SAME_PFN(PFN_cuCtxEnablePeerAccess_v4000)
TESSEL_SAME_PFN(PFN_cuCtxGetStreamPriorityRange_v5050)
TESSEL_SAME_PFN(PFN_cuMemAlloc_v3020)
TESSEL_SAME_PFN(PFN_cuMemFree_v3020)
TESSEL_SAME_PFN(PFN_cuMemGetInfo_v3020)
TESSEL_SAME_PFN(PFN_cuMemAllocHost_v3020)
TESSEL_SAME_PFN(PFN_cuMemHostAlloc_v2020)
TESSEL_SAME_PFN(PFN_cuMemFreeHost_v2000)
TESSEL_SAME_PFN(PFN_cuMemHostGetDevicePointer_v3020)
TESSEL_SAME_PFN(PFN_cuMemcpyHtoD_v3020)
TESSEL_SAME_PFN(PFN_cuMemcpyDtoH_v3020)
TESSEL_SAME_PFN(PFN_cuMemcpyDtoD_v3020)
TESSEL_SAME_PFN(PFN_cuMemcpyHtoDAsync_v3020)
TESSEL_SAME_PFN(PFN_cuMemcpyDtoHAsync_v3020)
TESSEL_SAME_PFN(PFN_cuMemcpyDtoDAsync_v3020)
TESSEL_SAME_PFN(PFN_cuMemcpyAsync_v4000)
TESSEL_SAME_PFN(PFN_cuMemcpy2DAsync_v3020)
TESSEL_SAME_PFN(PFN_cuMemcpyPeerAsync_v4000)
TESSEL_SAME_PFN(PFN_cuMemsetD8_v3020)
TESSEL_SAME_PFN(PFN_cuMemAddressReserve_v10020)
TESSEL_SAME_PFN(PFN_cuMemAddressFree_v10020)
TESSEL_SAME_PFN(PFN_cuMemCreate_v10020)
TESSEL_SAME_PFN(PFN_cuMemRelease_v10020)
TESSEL_SAME_PFN(PFN_cuMemExportToShareableHandle_v10020)
TESSEL_SAME_PFN(PFN_cuMemImportFromShareableHandle_v10020)
TESSEL_SAME_PFN(PFN_cuMemMap_v10020)
TESSEL_SAME_PFN(PFN_cuMemUnmap_v10020)
TESSEL_SAME_PFN(PFN_cuMemSetAccess_v10020)
TESSEL_SAME_PFN(PFN_cuMemGetAllocationGranularity_v10020)
TESSEL_SAME_PFN(PFN_cuStreamCreate_v2000)
TESSEL_SAME_PFN(PFN_cuStreamCreateWithPriority_v5050)
TESSEL_SAME_PFN(PFN_cuStreamDestroy_v4000)
TESSEL_SAME_PFN(PFN_cuStreamSynchronize_v2000)
TESSEL_SAME_PFN(PFN_cuStreamQuery_v2000)
TESSEL_SAME_PFN(PFN_cuStreamWaitEvent_v3020)
TESSEL_SAME_PFN(PFN_cuEventCreate_v2000)
TESSEL_SAME_PFN(PFN_cuEventRecord_v2000)
TESSEL_SAME_PFN(PFN_cuEventQuery_v2000)
TESSEL_SAME_PFN(PFN_cuEventSynchronize_v2000)
TESSEL_SAME_PFN(PFN_cuEventElapsedTime_v2000)
TESSEL_SAME_PFN(PFN_cuEventDestroy_v4000)
TESSEL_SAME_PFN(PFN_cuStreamWaitValue32_v11070)
TESSEL_SAME_PFN(PFN_cuStreamWaitValue64_v11070)
TESSEL_SAME_PFN(PFN_cuStreamWriteValue64_v11070)
TESSEL_SAME_PFN(PFN_cuStreamBatchMemOp_v11070)
TESSEL_SAME_PFN(PFN_cuModuleLoadData_v2000)
TESSEL_SAME_PFN(PFN_cuModuleLoadDataEx_v2010)
TESSEL_SAME_PFN(PFN_cuLinkCreate_v6050)
TESSEL_SAME_PFN(PFN_cuLinkAddData_v6050)
TESSEL_SAME_PFN(PFN_cuLinkComplete_v5050)
TESSEL_SAME_PFN(PFN_cuLinkDestroy_v5050)
TESSEL_SAME_PFN(PFN_cuModuleGetFunction_v2000)
TESSEL_SAME_PFN(PFN_cuModuleGetGlobal_v3020)
TESSEL_SAME_PFN(PFN_cuModuleUnload_v2000)
TESSEL_SAME_PFN(PFN_cuFuncLoad_v12040)
TESSEL_SAME_PFN(PFN_cuFuncGetAttribute_v2020)
TESSEL_SAME_PFN(PFN_cuOccupancyMaxActiveBlocksPerMultiprocessor_v6050)
TESSEL_SAME_PFN(PFN_cuFuncSetAttribute_v9000)
TESSEL_SAME_PFN(PFN_cuLaunchKernel_v4000)
TESSEL_SAME_PFN(PFN_cuTensorMapEncodeTiled_v12000)
TESSEL_SAME_PFN(PFN_cuStreamBeginCapture_v10010)
TESSEL_SAME_PFN(PFN_cuStreamEndCapture_v10000)
TESSEL_SAME_PFN(PFN_cuStreamIsCapturing_v10000)
TESSEL_SAME_PFN(PFN_cuGraphInstantiateWithFlags_v11040)
TESSEL_SAME_PFN(PFN_cuGraphLaunch_v10000)
TESSEL_SAME_PFN(PFN_cuGraphExecDestroy_v10000)
TESSEL_SAME_PFN(PFN_cuGraphDestroy_v10000)

}  // namespace

int main() {
  std::printf("runtime/cuda/cuda_api.h matches cuda.h and cudaTypedefs.h of CUDA %d.%d\n", CUDA_VERSION / 1000,
              CUDA_VERSION % 1000 / 10);
  return 0;
}
