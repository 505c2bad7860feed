// AMD's HIP runtime, loaded at run time: tessel links no ROCm library and
// declares the calls it makes itself (hip_api.h). Like the CUDA driver
// (runtime/cuda/driver.h), every call returns an absl::Status naming the
// call and HIP's error; `.raw(...)` returns the hipError_t where a caller
// must ignore failures (destructors). Under fault injection
// (runtime/faults.h) each Status-form call is a site.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/faults.h"
#include "runtime/hip/hip_api.h"
#include "runtime/shared_library.h"

namespace tessel::hip {

class Runtime;

// "hipMalloc: hipErrorOutOfMemory (out of memory)", with a status code for
// the kind of failure (no device: kUnavailable; out of memory:
// kResourceExhausted; bad value: kInvalidArgument; ...).
absl::Status runtime_error(const Runtime& runtime, const char* call, hipError_t error);

template <class Fn>
class Entry;
template <class... Args>
class Entry<hipError_t (*)(Args...)> {
 public:
  using Fn = hipError_t (*)(Args...);

  absl::Status operator()(Args... args) const {
    if (faults::injecting()) [[unlikely]] {
      if (faults::fail_now(name_)) return runtime_error(*runtime_, name_, hipErrorOutOfMemory);
    }
    hipError_t error = fn_(args...);
    if (error == hipSuccess) [[likely]]
      return absl::OkStatus();
    return runtime_error(*runtime_, name_, error);
  }
  hipError_t raw(Args... args) const { return fn_(args...); }
  bool present() const { return fn_ != nullptr; }
  const char* name() const { return name_; }

 private:
  friend class Runtime;
  Fn fn_ = nullptr;
  const char* name_ = "";
  const Runtime* runtime_ = nullptr;
};

// X(member, symbol, required): every entry the backend uses.
#define TESSEL_HIP_ENTRIES(X)                                             \
  X(init, hipInit, true)                                                  \
  X(get_device_count, hipGetDeviceCount, true)                            \
  X(set_device, hipSetDevice, true)                                       \
  X(device_get_attribute, hipDeviceGetAttribute, true)                    \
  X(device_get_name, hipDeviceGetName, true)                              \
  X(device_get_pci_bus_id, hipDeviceGetPCIBusId, true)                    \
  X(get_device_properties, hipGetDeviceProperties, true)                  \
  X(get_device_properties_r0600, hipGetDevicePropertiesR0600, false)      \
  X(device_synchronize, hipDeviceSynchronize, true)                       \
  X(malloc, hipMalloc, true)                                              \
  X(free, hipFree, true)                                                  \
  X(memcpy, hipMemcpy, true)                                              \
  X(stream_create, hipStreamCreate, true)                                 \
  X(stream_create_with_flags, hipStreamCreateWithFlags, true)             \
  X(stream_destroy, hipStreamDestroy, true)                               \
  X(stream_synchronize, hipStreamSynchronize, true)                       \
  X(stream_begin_capture, hipStreamBeginCapture, true)                    \
  X(stream_end_capture, hipStreamEndCapture, true)                        \
  X(graph_instantiate, hipGraphInstantiate, true)                         \
  X(graph_launch, hipGraphLaunch, true)                                   \
  X(graph_exec_destroy, hipGraphExecDestroy, true)                        \
  X(graph_destroy, hipGraphDestroy, true)                                 \
  X(module_load_data, hipModuleLoadData, true)                            \
  X(module_unload, hipModuleUnload, true)                                 \
  X(module_get_function, hipModuleGetFunction, true)                      \
  X(module_get_global, hipModuleGetGlobal, true)                          \
  X(module_launch_kernel, hipModuleLaunchKernel, true)                    \
  X(occupancy, hipModuleOccupancyMaxActiveBlocksPerMultiprocessor, true)  \
  X(device_can_access_peer, hipDeviceCanAccessPeer, true)                 \
  X(device_enable_peer_access, hipDeviceEnablePeerAccess, true)           \
  X(mem_get_allocation_granularity, hipMemGetAllocationGranularity, true) \
  X(mem_address_reserve, hipMemAddressReserve, true)                      \
  X(mem_address_free, hipMemAddressFree, true)                            \
  X(mem_create, hipMemCreate, true)                                       \
  X(mem_release, hipMemRelease, true)                                     \
  X(mem_map, hipMemMap, true)                                             \
  X(mem_unmap, hipMemUnmap, true)                                         \
  X(mem_set_access, hipMemSetAccess, true)                                \
  X(memset_d8, hipMemsetD8, true)                                         \
  X(host_malloc, hipHostMalloc, true)                                     \
  X(host_free, hipHostFree, true)                                         \
  X(memcpy_async, hipMemcpyAsync, true)                                   \
  X(memcpy_2d_async, hipMemcpy2DAsync, true)                              \
  X(stream_wait_value64, hipStreamWaitValue64, true)                      \
  X(stream_write_value64, hipStreamWriteValue64, true)                    \
  X(event_create, hipEventCreateWithFlags, true)                          \
  X(event_destroy, hipEventDestroy, true)                                 \
  X(event_record, hipEventRecord, true)                                   \
  X(event_query, hipEventQuery, true)                                     \
  X(stream_wait_event, hipStreamWaitEvent, true)

// The process's HIP runtime: loaded and initialised (hipInit) on first use,
// then immutable, so any thread may call it.
class Runtime {
 public:
  // The runtime, or kUnavailable naming what is missing: no libamdhip64
  // (TESSEL_HIP_LIBRARY names another file to load), a library without a
  // call tessel needs, or hipInit's error (no AMD GPU). The outcome of the
  // first call is kept for the life of the process.
  static absl::StatusOr<const Runtime*> get();

  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // The library loaded.
  const std::string& library() const { return library_; }

#define TESSEL_HIP_DECLARE_ENTRY(member, symbol, required) Entry<PFN_##symbol> member;
  TESSEL_HIP_ENTRIES(TESSEL_HIP_DECLARE_ENTRY)
#undef TESSEL_HIP_DECLARE_ENTRY
  PFN_hipGetErrorName get_error_name = nullptr;
  PFN_hipGetErrorString get_error_string = nullptr;

 private:
  Runtime() = default;
  static absl::StatusOr<const Runtime*> load();

  std::string library_;
};

}  // namespace tessel::hip
