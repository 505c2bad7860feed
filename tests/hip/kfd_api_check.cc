// tessel's declarations of the KFD thunk (runtime/hip/kfd_api.h) against
// libhsakmt's hsakmt.h: struct sizes and field offsets, the node fields
// tessel reads, the memory flag bits, queue types, and the status names
// tessel reports. Layouts are static_asserts; the bit-field flags and the
// names are checked when it runs. Built where hsakmt.h is found
// (tests/CMakeLists.txt).

// clang-format off
#include "runtime/hip/kfd.h"
#include <hsakmt.h>
// clang-format on

#include <cstddef>
#include <cstdio>
#include <string>

namespace {

namespace t = ::tessel::hip;

static_assert(sizeof(t::HsaSystemProperties) == sizeof(HsaSystemProperties));
static_assert(offsetof(t::HsaSystemProperties, NumNodes) == offsetof(HsaSystemProperties, NumNodes));
static_assert(sizeof(t::HsaQueueResource) == sizeof(HsaQueueResource));
static_assert(offsetof(t::HsaQueueResource, QueueId) == offsetof(HsaQueueResource, QueueId));
static_assert(offsetof(t::HsaQueueResource, Queue_DoorBell) == offsetof(HsaQueueResource, Queue_DoorBell));
static_assert(offsetof(t::HsaQueueResource, Queue_write_ptr) == offsetof(HsaQueueResource, Queue_write_ptr));
static_assert(offsetof(t::HsaQueueResource, Queue_read_ptr) == offsetof(HsaQueueResource, Queue_read_ptr));
static_assert(offsetof(t::HsaQueueResource, ErrorReason) == offsetof(HsaQueueResource, ErrorReason));
static_assert(t::kNodeNumFComputeCores == offsetof(HsaNodeProperties, NumFComputeCores));
static_assert(t::kNodeLocationId == offsetof(HsaNodeProperties, LocationId));
static_assert(t::kNodeNumSdmaXgmiEngines == offsetof(HsaNodeProperties, NumSdmaXgmiEngines));
static_assert(t::kNodeDomain == offsetof(HsaNodeProperties, Domain));
static_assert(sizeof(HsaNodeProperties) <= t::kNodePropertiesBytes);
static_assert(sizeof(HsaMemFlags) == sizeof(uint32_t));
static_assert(sizeof(HSA_QUEUE_TYPE) == sizeof(int) && sizeof(HSA_QUEUE_PRIORITY) == sizeof(t::HSA_QUEUE_PRIORITY));
static_assert(sizeof(HSAKMT_STATUS) == sizeof(t::HSAKMT_STATUS));
static_assert(sizeof(HSA_QUEUEID) == sizeof(uint64_t));
static_assert(t::HSA_QUEUE_SDMA == HSA_QUEUE_SDMA && t::HSA_QUEUE_SDMA_XGMI == HSA_QUEUE_SDMA_XGMI);
static_assert(t::HSA_QUEUE_PRIORITY_NORMAL == HSA_QUEUE_PRIORITY_NORMAL);
static_assert(t::HSAKMT_STATUS_SUCCESS == HSAKMT_STATUS_SUCCESS);

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "mismatch: %s\n", what.c_str());
  ++failures;
}

}  // namespace

int main() {
  auto flag = [](auto set) {
    HsaMemFlags f{};
    set(f);
    return f.Value;
  };
  expect(t::kMemNonPaged == flag([](HsaMemFlags& f) { f.ui32.NonPaged = 1; }), "NonPaged");
  expect(t::kMemUncached == flag([](HsaMemFlags& f) { f.ui32.CachePolicy = HSA_CACHING_NONCACHED; }), "Uncached");
  expect(t::kMemHostAccess == flag([](HsaMemFlags& f) { f.ui32.HostAccess = 1; }), "HostAccess");
  expect(t::kMemExecuteAccess == flag([](HsaMemFlags& f) { f.ui32.ExecuteAccess = 1; }), "ExecuteAccess");
  expect(t::kMemNoNumaBind == flag([](HsaMemFlags& f) { f.ui32.NoNUMABind = 1; }), "NoNUMABind");
#define TESSEL_CHECK_STATUS(name) expect(t::thunk_error("call", name).message() == "call: " #name, #name);
  TESSEL_CHECK_STATUS(HSAKMT_STATUS_ERROR)
  TESSEL_CHECK_STATUS(HSAKMT_STATUS_DRIVER_MISMATCH)
  TESSEL_CHECK_STATUS(HSAKMT_STATUS_INVALID_PARAMETER)
  TESSEL_CHECK_STATUS(HSAKMT_STATUS_INVALID_HANDLE)
  TESSEL_CHECK_STATUS(HSAKMT_STATUS_INVALID_NODE_UNIT)
  TESSEL_CHECK_STATUS(HSAKMT_STATUS_NO_MEMORY)
  TESSEL_CHECK_STATUS(HSAKMT_STATUS_BUFFER_TOO_SMALL)
  TESSEL_CHECK_STATUS(HSAKMT_STATUS_NOT_IMPLEMENTED)
  TESSEL_CHECK_STATUS(HSAKMT_STATUS_NOT_SUPPORTED)
  TESSEL_CHECK_STATUS(HSAKMT_STATUS_UNAVAILABLE)
  TESSEL_CHECK_STATUS(HSAKMT_STATUS_OUT_OF_RESOURCES)
  TESSEL_CHECK_STATUS(HSAKMT_STATUS_KERNEL_IO_CHANNEL_NOT_OPENED)
  TESSEL_CHECK_STATUS(HSAKMT_STATUS_KERNEL_COMMUNICATION_ERROR)
  TESSEL_CHECK_STATUS(HSAKMT_STATUS_KERNEL_ALREADY_OPENED)
  TESSEL_CHECK_STATUS(HSAKMT_STATUS_HSAMMU_UNAVAILABLE)
#undef TESSEL_CHECK_STATUS
  if (failures == 0) std::printf("runtime/hip/kfd_api.h agrees with hsakmt.h\n");
  return failures == 0 ? 0 : 1;
}
