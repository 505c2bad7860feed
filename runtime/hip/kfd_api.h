// The part of AMD's KFD thunk API (libhsakmt, hsakmt.h) tessel calls,
// declared here so that tessel builds without ROCm. The calls, their
// structs' leading fields and the values below are the same in ROCm 5.2
// (Debian 12's libhsakmt-dev) and ROCm 6 and 7; tests/hip/kfd_api_check.cc
// checks them against hsakmt.h where it is installed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessel::hip {

using HSAKMT_STATUS = int;
inline constexpr HSAKMT_STATUS HSAKMT_STATUS_SUCCESS = 0;

// HSA_QUEUE_TYPE (an int) and HSA_QUEUE_PRIORITY, whose values run from -3
// to 0xFFFFFFFF: a 64-bit enum, passed in a whole register.
using HSA_QUEUE_PRIORITY = int64_t;
inline constexpr int HSA_QUEUE_SDMA = 2;       // PCIe-optimized
inline constexpr int HSA_QUEUE_SDMA_XGMI = 5;  // xGMI-optimized
inline constexpr HSA_QUEUE_PRIORITY HSA_QUEUE_PRIORITY_NORMAL = 0;

struct HsaSystemProperties {
  uint32_t NumNodes;
  uint32_t PlatformOem;
  uint32_t PlatformId;
  uint32_t PlatformRev;
};

// HsaNodeProperties: ROCm 6 put new fields where 5.2 kept reserved bytes at
// its end. tessel reads the fields below at their offsets, from a buffer
// larger than any version of the struct.
inline constexpr size_t kNodeNumFComputeCores = 4;      // uint32: 0 on a CPU-only node
inline constexpr size_t kNodeLocationId = 76;           // uint32: (bus << 8) | (device << 3) | function
inline constexpr size_t kNodeNumSdmaXgmiEngines = 316;  // uint32
inline constexpr size_t kNodeDomain = 324;              // uint32: the PCI domain
inline constexpr size_t kNodePropertiesBytes = 1024;

// HsaMemFlags bits (one 32-bit word).
inline constexpr uint32_t kMemNonPaged = 1u << 0;
inline constexpr uint32_t kMemUncached = 1u << 1;  // CachePolicy (bits 1-2) HSA_CACHING_NONCACHED
inline constexpr uint32_t kMemHostAccess = 1u << 6;
inline constexpr uint32_t kMemExecuteAccess = 1u << 12;
inline constexpr uint32_t kMemNoNumaBind = 1u << 16;

struct HsaQueueResource {
  uint64_t QueueId;
  uint64_t* Queue_DoorBell;  // 64-bit doorbells on gfx9 and later
  uint64_t* Queue_write_ptr;
  uint64_t* Queue_read_ptr;
  volatile int64_t* ErrorReason;
};

extern "C" {
using PFN_hsaKmtOpenKFD = HSAKMT_STATUS (*)();
using PFN_hsaKmtCloseKFD = HSAKMT_STATUS (*)();
using PFN_hsaKmtAcquireSystemProperties = HSAKMT_STATUS (*)(HsaSystemProperties* properties);
using PFN_hsaKmtReleaseSystemProperties = HSAKMT_STATUS (*)();
using PFN_hsaKmtGetNodeProperties = HSAKMT_STATUS (*)(uint32_t node, void* properties);
using PFN_hsaKmtAllocMemory = HSAKMT_STATUS (*)(uint32_t node, uint64_t bytes, uint32_t flags, void** address);
using PFN_hsaKmtFreeMemory = HSAKMT_STATUS (*)(void* address, uint64_t bytes);
using PFN_hsaKmtMapMemoryToGPU = HSAKMT_STATUS (*)(void* address, uint64_t bytes, uint64_t* gpu_address);
using PFN_hsaKmtUnmapMemoryToGPU = HSAKMT_STATUS (*)(void* address);
using PFN_hsaKmtCreateQueue = HSAKMT_STATUS (*)(uint32_t node, int type, uint32_t percentage,
                                                HSA_QUEUE_PRIORITY priority, void* ring, uint64_t ring_bytes,
                                                void* event, HsaQueueResource* resource);
using PFN_hsaKmtDestroyQueue = HSAKMT_STATUS (*)(uint64_t queue);
}

// X(member, symbol): every entry tessel uses.
#define TESSEL_KFD_ENTRIES(X)                                 \
  X(open_kfd, hsaKmtOpenKFD)                                  \
  X(close_kfd, hsaKmtCloseKFD)                                \
  X(acquire_system_properties, hsaKmtAcquireSystemProperties) \
  X(release_system_properties, hsaKmtReleaseSystemProperties) \
  X(get_node_properties, hsaKmtGetNodeProperties)             \
  X(alloc_memory, hsaKmtAllocMemory)                          \
  X(free_memory, hsaKmtFreeMemory)                            \
  X(map_memory_to_gpu, hsaKmtMapMemoryToGPU)                  \
  X(unmap_memory_to_gpu, hsaKmtUnmapMemoryToGPU)              \
  X(create_queue, hsaKmtCreateQueue)                          \
  X(destroy_queue, hsaKmtDestroyQueue)

}  // namespace tessel::hip
