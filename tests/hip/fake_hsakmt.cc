// A fake libhsakmt (the KFD thunk) for the hip suites. Its topology is a
// CPU node and two GPU nodes at the PCI addresses the fake libamdhip64
// reports; rings are host memory; and an SDMA queue's "hardware" is
// tessel's software engine (runtime/sdma/engine.h) running the ring, the
// positions and the doorbell word the thunk returned, polling the doorbell
// as an engine sees a doorbell write. It records the calls it receives
// (fake_hsakmt_log, fake_hsakmt_reset) and checks their arguments as the KFD would;
// FAKE_HSAKMT_FAIL=<call> makes that call fail, FAKE_HSAKMT_NO_XGMI=1
// gives the GPUs no xGMI SDMA engines, and FAKE_HSAKMT_MOVED=1 lists them on
// other PCI buses than the fake HIP's.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/hip/kfd_api.h"
#include "runtime/sdma/engine.h"

namespace {

using tessel::hip::HsaQueueResource;
using tessel::hip::HsaSystemProperties;
namespace hip = tessel::hip;

constexpr int kNodes = 3;                                     // node 0: the CPU
constexpr uint32_t kLocations[kNodes] = {0, 0x0300, 0x4300};  // buses 0x03 and 0x43, as fake_hip.cc says
constexpr int kNoMemory = 6, kInvalid = 3, kNotOpened = 20, kOutOfResources = 13;

std::mutex mu;
std::string calls;
int opened = 0;
std::map<void*, bool> rings;  // allocations, and whether mapped to the GPUs

struct FakeQueue {
  alignas(64) uint64_t read = 0;
  alignas(64) uint64_t write = 0;
  uint64_t doorbell = 0;
  std::unique_ptr<tessel::sdma::Engine> engine;
};
std::map<uint64_t, std::unique_ptr<FakeQueue>> queues;
uint64_t next_queue = 1;

// Logs `what` under `call`; the failure FAKE_HSAKMT_FAIL asks of it, or 0.
int enter(const char* call, const std::string& what, int failure) {
  calls += what.empty() ? std::string(call) : absl::StrCat(call, " ", what);
  calls += '\n';
  const char* fail = std::getenv("FAKE_HSAKMT_FAIL");
  return fail != nullptr && std::strcmp(fail, call) == 0 ? failure : 0;
}

void put32(void* properties, size_t offset, uint32_t v) {
  std::memcpy(static_cast<char*>(properties) + offset, &v, sizeof(v));
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) const char* fake_hsakmt_log() {
  std::lock_guard<std::mutex> hold(mu);
  static std::string copy;
  copy = calls;
  return copy.c_str();
}

__attribute__((visibility("default"))) void fake_hsakmt_reset() {
  std::lock_guard<std::mutex> hold(mu);
  calls.clear();
}

__attribute__((visibility("default"))) int hsaKmtOpenKFD() {
  std::lock_guard<std::mutex> hold(mu);
  if (int e = enter("hsaKmtOpenKFD", "", kNotOpened)) return e;
  ++opened;
  return 0;
}

__attribute__((visibility("default"))) int hsaKmtCloseKFD() {
  std::lock_guard<std::mutex> hold(mu);
  if (opened == 0) return kNotOpened;
  --opened;
  return enter("hsaKmtCloseKFD", "", 1);
}

__attribute__((visibility("default"))) int hsaKmtAcquireSystemProperties(HsaSystemProperties* p) {
  std::lock_guard<std::mutex> hold(mu);
  if (opened == 0) return kNotOpened;
  *p = {kNodes, 0, 0, 0};
  return enter("hsaKmtAcquireSystemProperties", "", 1);
}

__attribute__((visibility("default"))) int hsaKmtReleaseSystemProperties() {
  std::lock_guard<std::mutex> hold(mu);
  return enter("hsaKmtReleaseSystemProperties", "", 1);
}

__attribute__((visibility("default"))) int hsaKmtGetNodeProperties(uint32_t node, void* p) {
  std::lock_guard<std::mutex> hold(mu);
  if (opened == 0) return kNotOpened;
  if (node >= kNodes) return kInvalid;
  // Only the fields tessel reads; the rest of the real struct stays zero.
  std::memset(p, 0, 356);
  put32(p, hip::kNodeNumFComputeCores, node == 0 ? 0 : 1216);
  // FAKE_HSAKMT_MOVED puts the GPUs on other buses than the fake HIP's.
  put32(p, hip::kNodeLocationId, kLocations[node] + (std::getenv("FAKE_HSAKMT_MOVED") != nullptr ? 0x100 : 0));
  put32(p, hip::kNodeNumSdmaXgmiEngines, node == 0 || std::getenv("FAKE_HSAKMT_NO_XGMI") != nullptr ? 0 : 14);
  put32(p, hip::kNodeDomain, 0);
  return enter("hsaKmtGetNodeProperties", "", 1);
}

__attribute__((visibility("default"))) int hsaKmtAllocMemory(uint32_t node, uint64_t bytes, uint32_t flags,
                                                             void** address) {
  std::lock_guard<std::mutex> hold(mu);
  if (int e = enter("hsaKmtAllocMemory", absl::StrCat("node ", node, " bytes ", bytes, " flags ", absl::Hex(flags)),
                    kNoMemory)) {
    return e;
  }
  if (opened == 0) return kNotOpened;
  if (node >= kNodes || bytes == 0 || bytes % 4096 != 0) return kInvalid;
  *address = std::aligned_alloc(4096, bytes);
  rings[*address] = false;
  return 0;
}

__attribute__((visibility("default"))) int hsaKmtFreeMemory(void* address, uint64_t) {
  std::lock_guard<std::mutex> hold(mu);
  auto it = rings.find(address);
  if (it == rings.end() || it->second) return kInvalid;  // unknown, or still mapped
  rings.erase(it);
  std::free(address);
  return enter("hsaKmtFreeMemory", "", 1);
}

__attribute__((visibility("default"))) int hsaKmtMapMemoryToGPU(void* address, uint64_t, uint64_t* gpu_address) {
  std::lock_guard<std::mutex> hold(mu);
  if (int e = enter("hsaKmtMapMemoryToGPU", "", kNoMemory)) return e;
  auto it = rings.find(address);
  if (it == rings.end()) return kInvalid;
  it->second = true;
  *gpu_address = reinterpret_cast<uintptr_t>(address);
  return 0;
}

__attribute__((visibility("default"))) int hsaKmtUnmapMemoryToGPU(void* address) {
  std::lock_guard<std::mutex> hold(mu);
  auto it = rings.find(address);
  if (it == rings.end() || !it->second) return kInvalid;
  it->second = false;
  return enter("hsaKmtUnmapMemoryToGPU", "", 1);
}

__attribute__((visibility("default"))) int hsaKmtCreateQueue(uint32_t node, int type, uint32_t percentage,
                                                             int64_t priority, void* ring, uint64_t bytes, void* event,
                                                             HsaQueueResource* resource) {
  std::lock_guard<std::mutex> hold(mu);
  if (int e =
          enter("hsaKmtCreateQueue", absl::StrCat("node ", node, " type ", type, " bytes ", bytes), kOutOfResources)) {
    return e;
  }
  if (opened == 0) return kNotOpened;
  auto mapped = rings.find(ring);
  // An SDMA queue on a GPU node, over a ring of 2^n bytes mapped to the GPUs.
  if (node == 0 || node >= kNodes || (type != hip::HSA_QUEUE_SDMA && type != hip::HSA_QUEUE_SDMA_XGMI) ||
      percentage != 100 || priority != hip::HSA_QUEUE_PRIORITY_NORMAL || event != nullptr || mapped == rings.end() ||
      !mapped->second || bytes < 256 || (bytes & (bytes - 1)) != 0) {
    return kInvalid;
  }
  auto q = std::make_unique<FakeQueue>();
  const uint64_t id = next_queue++;
  q->engine = std::make_unique<tessel::sdma::Engine>(
      tessel::sdma::Ring{static_cast<uint32_t*>(ring), static_cast<int64_t>(bytes), &q->read, &q->write, &q->doorbell},
      absl::StrCat("fake KFD queue ", id), absl::Microseconds(20));
  *resource = {id, &q->doorbell, &q->write, &q->read, nullptr};
  queues[id] = std::move(q);
  return 0;
}

__attribute__((visibility("default"))) int hsaKmtDestroyQueue(uint64_t id) {
  std::unique_ptr<FakeQueue> q;
  {
    std::lock_guard<std::mutex> hold(mu);
    auto it = queues.find(id);
    if (it == queues.end()) return kInvalid;
    q = std::move(it->second);
    queues.erase(it);
    enter("hsaKmtDestroyQueue", "", 1);
  }
  q.reset();  // stops the engine outside the lock
  return 0;
}

}  // extern "C"
