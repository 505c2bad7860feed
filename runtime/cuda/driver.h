// The CUDA driver, loaded at run time: tessel links neither libcuda nor
// libcudart and declares the part of the driver API it uses itself
// (cuda_api.h), so it builds without NVIDIA's toolkit and runs (on the host)
// where no NVIDIA driver is installed.
//
// Every entry point is resolved through cuGetProcAddress with the CUDA version
// whose prototype tessel calls, so a newer driver that changed a signature
// (CUDA 13 gave cuCtxSynchronize a context argument) still hands back the
// 12.x form declared here. Calling an entry returns an absl::Status naming the
// call and the error; `.raw(...)` returns the CUresult where a caller must
// ignore failures (destructors). Under fault injection (runtime/faults.h)
// each Status-form call is a site: the one made to fail returns
// CUDA_ERROR_OUT_OF_MEMORY without reaching the driver.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/faults.h"

namespace tessel::cuda {

class Driver;

// "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (out of memory)", with a status code
// that says what kind of failure it is (out of memory: kResourceExhausted;
// no device or driver: kUnavailable; bad value: kInvalidArgument; ...).
absl::Status driver_error(const Driver& driver, const char* call, CUresult result);

// One resolved driver function and the name errors give it.
template <class Fn>
class Entry;
template <class... Args>
class Entry<CUresult(CUDAAPI*)(Args...)> {
 public:
  using Fn = CUresult(CUDAAPI*)(Args...);

  absl::Status operator()(Args... args) const {
    if (faults::injecting()) [[unlikely]] {
      if (faults::fail_now(name_)) return driver_error(*driver_, name_, CUDA_ERROR_OUT_OF_MEMORY);
    }
    CUresult result = fn_(args...);
    if (result == CUDA_SUCCESS) [[likely]]
      return absl::OkStatus();
    return driver_error(*driver_, name_, result);
  }
  CUresult raw(Args... args) const { return fn_(args...); }
  // Optional entries (cuFuncLoad, CUDA 12.4) are null on older drivers.
  bool present() const { return fn_ != nullptr; }
  const char* name() const { return name_; }

 private:
  friend class Driver;
  Fn fn_ = nullptr;
  const char* name_ = "";
  const Driver* driver_ = nullptr;
};

// X(member, symbol, prototype, cuda version, required): every entry the
// backend uses. The version is the one whose prototype `PFN_..._vNNNN`
// names; cuGetProcAddress returns the implementation with that ABI.
#define TESSEL_CUDA_DRIVER_ENTRIES(X)                                                                               \
  X(init, cuInit, PFN_cuInit_v2000, 12000, true)                                                                    \
  X(driver_get_version, cuDriverGetVersion, PFN_cuDriverGetVersion_v2020, 12000, true)                              \
  X(get_error_name, cuGetErrorName, PFN_cuGetErrorName_v6000, 12000, true)                                          \
  X(get_error_string, cuGetErrorString, PFN_cuGetErrorString_v6000, 12000, true)                                    \
  X(device_get, cuDeviceGet, PFN_cuDeviceGet_v2000, 12000, true)                                                    \
  X(device_get_count, cuDeviceGetCount, PFN_cuDeviceGetCount_v2000, 12000, true)                                    \
  X(device_get_attribute, cuDeviceGetAttribute, PFN_cuDeviceGetAttribute_v2000, 12000, true)                        \
  X(device_get_name, cuDeviceGetName, PFN_cuDeviceGetName_v2000, 12000, true)                                       \
  X(primary_ctx_retain, cuDevicePrimaryCtxRetain, PFN_cuDevicePrimaryCtxRetain_v7000, 12000, true)                  \
  X(primary_ctx_release, cuDevicePrimaryCtxRelease, PFN_cuDevicePrimaryCtxRelease_v11000, 12000, true)              \
  X(ctx_get_current, cuCtxGetCurrent, PFN_cuCtxGetCurrent_v4000, 12000, true)                                       \
  X(ctx_set_current, cuCtxSetCurrent, PFN_cuCtxSetCurrent_v4000, 12000, true)                                       \
  X(ctx_synchronize, cuCtxSynchronize, PFN_cuCtxSynchronize_v2000, 12000, true)                                     \
  X(mem_alloc, cuMemAlloc, PFN_cuMemAlloc_v3020, 12000, true)                                                       \
  X(mem_free, cuMemFree, PFN_cuMemFree_v3020, 12000, true)                                                          \
  X(mem_get_info, cuMemGetInfo, PFN_cuMemGetInfo_v3020, 12000, true)                                                \
  X(memcpy_htod, cuMemcpyHtoD, PFN_cuMemcpyHtoD_v3020, 12000, true)                                                 \
  X(memcpy_dtoh, cuMemcpyDtoH, PFN_cuMemcpyDtoH_v3020, 12000, true)                                                 \
  X(memcpy_dtod, cuMemcpyDtoD, PFN_cuMemcpyDtoD_v3020, 12000, true)                                                 \
  X(memcpy_htod_async, cuMemcpyHtoDAsync, PFN_cuMemcpyHtoDAsync_v3020, 12000, true)                                 \
  X(memcpy_dtoh_async, cuMemcpyDtoHAsync, PFN_cuMemcpyDtoHAsync_v3020, 12000, true)                                 \
  X(memcpy_dtod_async, cuMemcpyDtoDAsync, PFN_cuMemcpyDtoDAsync_v3020, 12000, true)                                 \
  X(memset_d8, cuMemsetD8, PFN_cuMemsetD8_v3020, 12000, true)                                                       \
  X(stream_create, cuStreamCreate, PFN_cuStreamCreate_v2000, 12000, true)                                           \
  X(stream_destroy, cuStreamDestroy, PFN_cuStreamDestroy_v4000, 12000, true)                                        \
  X(stream_synchronize, cuStreamSynchronize, PFN_cuStreamSynchronize_v2000, 12000, true)                            \
  X(event_create, cuEventCreate, PFN_cuEventCreate_v2000, 12000, true)                                              \
  X(event_record, cuEventRecord, PFN_cuEventRecord_v2000, 12000, true)                                              \
  X(event_synchronize, cuEventSynchronize, PFN_cuEventSynchronize_v2000, 12000, true)                               \
  X(event_elapsed_time, cuEventElapsedTime, PFN_cuEventElapsedTime_v2000, 12000, true)                              \
  X(event_destroy, cuEventDestroy, PFN_cuEventDestroy_v4000, 12000, true)                                           \
  X(module_load_data_ex, cuModuleLoadDataEx, PFN_cuModuleLoadDataEx_v2010, 12000, true)                             \
  X(link_create, cuLinkCreate, PFN_cuLinkCreate_v6050, 12000, true)                                                 \
  X(link_add_data, cuLinkAddData, PFN_cuLinkAddData_v6050, 12000, true)                                             \
  X(link_complete, cuLinkComplete, PFN_cuLinkComplete_v5050, 12000, true)                                           \
  X(link_destroy, cuLinkDestroy, PFN_cuLinkDestroy_v5050, 12000, true)                                              \
  X(module_get_function, cuModuleGetFunction, PFN_cuModuleGetFunction_v2000, 12000, true)                           \
  X(module_get_global, cuModuleGetGlobal, PFN_cuModuleGetGlobal_v3020, 12000, true)                                 \
  X(module_unload, cuModuleUnload, PFN_cuModuleUnload_v2000, 12000, true)                                           \
  X(func_load, cuFuncLoad, PFN_cuFuncLoad_v12040, 12040, false)                                                     \
  X(func_get_attribute, cuFuncGetAttribute, PFN_cuFuncGetAttribute_v2020, 12000, true)                              \
  X(func_set_attribute, cuFuncSetAttribute, PFN_cuFuncSetAttribute_v9000, 12000, true)                              \
  X(occupancy_max_active_blocks, cuOccupancyMaxActiveBlocksPerMultiprocessor,                                       \
    PFN_cuOccupancyMaxActiveBlocksPerMultiprocessor_v6050, 12000, true)                                             \
  X(launch_kernel, cuLaunchKernel, PFN_cuLaunchKernel_v4000, 12000, true)                                           \
  X(tensor_map_encode_tiled, cuTensorMapEncodeTiled, PFN_cuTensorMapEncodeTiled_v12000, 12000, true)                \
  X(stream_begin_capture, cuStreamBeginCapture, PFN_cuStreamBeginCapture_v10010, 12000, true)                       \
  X(stream_end_capture, cuStreamEndCapture, PFN_cuStreamEndCapture_v10000, 12000, true)                             \
  X(stream_is_capturing, cuStreamIsCapturing, PFN_cuStreamIsCapturing_v10000, 12000, true)                          \
  X(graph_instantiate, cuGraphInstantiateWithFlags, PFN_cuGraphInstantiateWithFlags_v11040, 12000, true)            \
  X(graph_launch, cuGraphLaunch, PFN_cuGraphLaunch_v10000, 12000, true)                                             \
  X(graph_exec_destroy, cuGraphExecDestroy, PFN_cuGraphExecDestroy_v10000, 12000, true)                             \
  X(graph_destroy, cuGraphDestroy, PFN_cuGraphDestroy_v10000, 12000, true)                                          \
  X(stream_query, cuStreamQuery, PFN_cuStreamQuery_v2000, 12000, true)                                              \
  X(stream_wait_event, cuStreamWaitEvent, PFN_cuStreamWaitEvent_v3020, 12000, true)                                 \
  X(event_query, cuEventQuery, PFN_cuEventQuery_v2000, 12000, true)                                                 \
  X(stream_wait_value64, cuStreamWaitValue64, PFN_cuStreamWaitValue64_v11070, 12000, true)                          \
  X(stream_write_value64, cuStreamWriteValue64, PFN_cuStreamWriteValue64_v11070, 12000, true)                       \
  X(stream_batch_mem_op, cuStreamBatchMemOp, PFN_cuStreamBatchMemOp_v11070, 12000, true)                            \
  X(memcpy_async, cuMemcpyAsync, PFN_cuMemcpyAsync_v4000, 12000, true)                                              \
  X(memcpy_2d_async, cuMemcpy2DAsync, PFN_cuMemcpy2DAsync_v3020, 12000, true)                                       \
  X(memcpy_peer_async, cuMemcpyPeerAsync, PFN_cuMemcpyPeerAsync_v4000, 12000, true)                                 \
  X(device_can_access_peer, cuDeviceCanAccessPeer, PFN_cuDeviceCanAccessPeer_v4000, 12000, true)                    \
  X(mem_address_reserve, cuMemAddressReserve, PFN_cuMemAddressReserve_v10020, 12000, true)                          \
  X(mem_address_free, cuMemAddressFree, PFN_cuMemAddressFree_v10020, 12000, true)                                   \
  X(mem_create, cuMemCreate, PFN_cuMemCreate_v10020, 12000, true)                                                   \
  X(mem_release, cuMemRelease, PFN_cuMemRelease_v10020, 12000, true)                                                \
  X(mem_export_to_shareable_handle, cuMemExportToShareableHandle, PFN_cuMemExportToShareableHandle_v10020, 12000,   \
    true)                                                                                                           \
  X(mem_import_from_shareable_handle, cuMemImportFromShareableHandle, PFN_cuMemImportFromShareableHandle_v10020,    \
    12000, true)                                                                                                    \
  X(mem_map, cuMemMap, PFN_cuMemMap_v10020, 12000, true)                                                            \
  X(mem_unmap, cuMemUnmap, PFN_cuMemUnmap_v10020, 12000, true)                                                      \
  X(mem_set_access, cuMemSetAccess, PFN_cuMemSetAccess_v10020, 12000, true)                                         \
  X(mem_get_allocation_granularity, cuMemGetAllocationGranularity, PFN_cuMemGetAllocationGranularity_v10020, 12000, \
    true)                                                                                                           \
  X(mem_host_alloc, cuMemHostAlloc, PFN_cuMemHostAlloc_v2020, 12000, true)                                          \
  X(mem_free_host, cuMemFreeHost, PFN_cuMemFreeHost_v2000, 12000, true)                                             \
  X(mem_host_get_device_pointer, cuMemHostGetDevicePointer, PFN_cuMemHostGetDevicePointer_v3020, 12000, true)

// The process's CUDA driver: loaded and initialised (cuInit) on first use,
// then immutable, so any thread may call it.
class Driver {
 public:
  // The driver, or kUnavailable: "no NVIDIA driver (libcuda.so.1 not found)",
  // a driver older than CUDA 12, or cuInit's error (no device, ...). The
  // outcome of the first call is kept for the life of the process.
  static absl::StatusOr<const Driver*> get();

  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // CUDA version the driver implements, e.g. 13000.
  int version() const { return version_; }

#define TESSEL_CUDA_DECLARE_ENTRY(member, symbol, pfn, cuda_version, required) Entry<pfn> member;
  TESSEL_CUDA_DRIVER_ENTRIES(TESSEL_CUDA_DECLARE_ENTRY)
#undef TESSEL_CUDA_DECLARE_ENTRY

 private:
  Driver() = default;
  static absl::StatusOr<const Driver*> load();

  int version_ = 0;
};

}  // namespace tessel::cuda
