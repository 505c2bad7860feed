#include "runtime/hip/kfd.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace tessel::hip {
namespace {

const char* status_name(HSAKMT_STATUS status) {
  switch (status) {
    case 1:
      return "HSAKMT_STATUS_ERROR";
    case 2:
      return "HSAKMT_STATUS_DRIVER_MISMATCH";
    case 3:
      return "HSAKMT_STATUS_INVALID_PARAMETER";
    case 4:
      return "HSAKMT_STATUS_INVALID_HANDLE";
    case 5:
      return "HSAKMT_STATUS_INVALID_NODE_UNIT";
    case 6:
      return "HSAKMT_STATUS_NO_MEMORY";
    case 7:
      return "HSAKMT_STATUS_BUFFER_TOO_SMALL";
    case 10:
      return "HSAKMT_STATUS_NOT_IMPLEMENTED";
    case 11:
      return "HSAKMT_STATUS_NOT_SUPPORTED";
    case 12:
      return "HSAKMT_STATUS_UNAVAILABLE";
    case 13:
      return "HSAKMT_STATUS_OUT_OF_RESOURCES";
    case 20:
      return "HSAKMT_STATUS_KERNEL_IO_CHANNEL_NOT_OPENED";
    case 21:
      return "HSAKMT_STATUS_KERNEL_COMMUNICATION_ERROR";
    case 22:
      return "HSAKMT_STATUS_KERNEL_ALREADY_OPENED";
    case 23:
      return "HSAKMT_STATUS_HSAMMU_UNAVAILABLE";
    default:
      return nullptr;
  }
}

absl::StatusCode code_for(HSAKMT_STATUS status) {
  switch (status) {
    case 6:
    case 13:
      return absl::StatusCode::kResourceExhausted;
    case 3:
    case 4:
    case 5:
      return absl::StatusCode::kInvalidArgument;
    case 10:
    case 11:
      return absl::StatusCode::kUnimplemented;
    case 2:
    case 12:
    case 20:
    case 21:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::StatusOr<const Thunk*> load() {
  TESSEL_ASSIGN_OR_RETURN(const Library library, open_library("TESSEL_HSAKMT_LIBRARY",
                                                              {"libhsakmt.so.1", "libhsakmt.so"},
                                                              "no KFD thunk (libhsakmt.so.1 not found)"));
  void* const lib = library.handle;
  const std::string& path = library.path;
  auto* t = new Thunk();
  t->library = path;
  std::string missing;
  auto resolve = [&](auto& entry, const char* symbol) {
    entry = reinterpret_cast<std::remove_reference_t<decltype(entry)>>(dlsym(lib, symbol));
    if (entry == nullptr) absl::StrAppend(&missing, missing.empty() ? "" : ", ", symbol);
  };
#define TESSEL_KFD_RESOLVE_ENTRY(member, symbol) resolve(t->member, #symbol);
  TESSEL_KFD_ENTRIES(TESSEL_KFD_RESOLVE_ENTRY)
#undef TESSEL_KFD_RESOLVE_ENTRY
  if (!missing.empty()) {
    delete t;
    return absl::UnavailableError(absl::StrCat("the KFD thunk ", path, " lacks ", missing));
  }
  return t;
}

uint32_t node_field(const unsigned char* properties, size_t offset) {
  uint32_t v = 0;
  std::memcpy(&v, properties + offset, sizeof(v));
  return v;
}

// A queue the KFD made: its ring and positions are the thunk's; closing it
// destroys the queue, then unmaps and frees the ring.
class KfdQueue final : public sdma::Queue {
 public:
  KfdQueue(const Thunk& thunk, const HsaQueueResource& resource, void* ring, int64_t ring_bytes, std::string name)
      : Queue({static_cast<uint32_t*>(ring), ring_bytes, resource.Queue_read_ptr, resource.Queue_write_ptr,
               resource.Queue_DoorBell},
              std::move(name)),
        thunk_(thunk),
        id_(resource.QueueId),
        ring_(ring),
        ring_bytes_(ring_bytes) {}
  ~KfdQueue() override {
    thunk_.destroy_queue(id_);
    thunk_.unmap_memory_to_gpu(ring_);
    thunk_.free_memory(ring_, ring_bytes_);
  }

 private:
  const Thunk& thunk_;
  const uint64_t id_;
  void* const ring_;
  const int64_t ring_bytes_;
};

}  // namespace

absl::Status thunk_error(const char* call, HSAKMT_STATUS status) {
  const char* name = status_name(status);
  return absl::Status(code_for(status), name != nullptr ? absl::StrCat(call, ": ", name)
                                                        : absl::StrCat(call, ": HSAKMT_STATUS ", status));
}

absl::StatusOr<const Thunk*> Thunk::get() {
  static const absl::StatusOr<const Thunk*> thunk = load();
  return thunk;
}

absl::StatusOr<std::unique_ptr<Kfd>> Kfd::open(const Runtime& hip, const std::vector<int>& devices) {
  TESSEL_ASSIGN_OR_RETURN(const Thunk* t, Thunk::get());
  auto call = [](const char* name, HSAKMT_STATUS s) {
    return s == HSAKMT_STATUS_SUCCESS ? absl::OkStatus() : thunk_error(name, s);
  };
  if (absl::Status s = call("hsaKmtOpenKFD", t->open_kfd()); !s.ok()) {
    return absl::UnavailableError(absl::StrCat("the KFD did not open (", t->library, "): ", s.message()));
  }
  std::unique_ptr<Kfd> kfd(new Kfd(*t));
  HsaSystemProperties system{};
  TESSEL_RETURN_IF_ERROR(call("hsaKmtAcquireSystemProperties", t->acquire_system_properties(&system)));
  // GPU nodes by PCI location: (domain << 32) | LocationId.
  std::vector<std::pair<uint64_t, uint32_t>> gpus;
  std::vector<bool> xgmi;
  absl::Status listed;
  for (uint32_t node = 0; node < system.NumNodes && listed.ok(); ++node) {
    alignas(8) unsigned char p[kNodePropertiesBytes] = {};
    listed = call("hsaKmtGetNodeProperties", t->get_node_properties(node, p));
    if (!listed.ok() || node_field(p, kNodeNumFComputeCores) == 0) continue;
    gpus.push_back({uint64_t{node_field(p, kNodeDomain)} << 32 | node_field(p, kNodeLocationId), node});
    xgmi.push_back(node_field(p, kNodeNumSdmaXgmiEngines) > 0);
  }
  t->release_system_properties();
  TESSEL_RETURN_IF_ERROR(listed);
  for (int d : devices) {
    char bus[64] = {};
    TESSEL_RETURN_IF_ERROR(hip.device_get_pci_bus_id(bus, sizeof(bus), d));
    unsigned domain = 0, b = 0, dev = 0, fn = 0;
    if (std::sscanf(bus, "%x:%x:%x.%x", &domain, &b, &dev, &fn) != 4) {
      return absl::InternalError(
          absl::StrCat("hipDeviceGetPCIBusId: hip:", d, " is at \"", bus, "\", which is not a PCI address"));
    }
    const uint64_t where = uint64_t{domain} << 32 | (b << 8 | dev << 3 | fn);
    size_t i = 0;
    while (i < gpus.size() && gpus[i].first != where) ++i;
    if (i == gpus.size()) {
      return absl::UnavailableError(
          absl::StrCat("hip:", d, " (PCI ", bus, ") is not among the ", gpus.size(), " GPUs of the KFD topology"));
    }
    kfd->nodes_.push_back(gpus[i].second);
    kfd->xgmi_.push_back(xgmi[i]);
  }
  return kfd;
}

Kfd::~Kfd() { thunk_.close_kfd(); }

absl::StatusOr<std::unique_ptr<sdma::Queue>> Kfd::queue(int rank, int peer, int64_t ring_bytes,
                                                        std::string name) const {
  TESSEL_RETURN_IF_ERROR(sdma::check_ring_bytes(ring_bytes, name));
  const uint32_t node = nodes_[rank];
  auto failed = [&](const char* call, HSAKMT_STATUS s) {
    return prefixed(absl::StrCat("SDMA queue ", name, " on KFD node ", node), thunk_error(call, s));
  };
  // The ring: host memory the engine reads without caching, as ROCm's own
  // SDMA rings are.
  const uint32_t flags = kMemNonPaged | kMemUncached | kMemHostAccess | kMemExecuteAccess | kMemNoNumaBind;
  void* ring = nullptr;
  if (HSAKMT_STATUS s = thunk_.alloc_memory(0, ring_bytes, flags, &ring); s != HSAKMT_STATUS_SUCCESS) {
    return failed("hsaKmtAllocMemory", s);
  }
  std::memset(ring, 0, ring_bytes);
  uint64_t gpu_address = 0;
  if (HSAKMT_STATUS s = thunk_.map_memory_to_gpu(ring, ring_bytes, &gpu_address); s != HSAKMT_STATUS_SUCCESS) {
    thunk_.free_memory(ring, ring_bytes);
    return failed("hsaKmtMapMemoryToGPU", s);
  }
  const int type = peer != rank && xgmi_[rank] ? HSA_QUEUE_SDMA_XGMI : HSA_QUEUE_SDMA;
  HsaQueueResource resource{};
  if (HSAKMT_STATUS s =
          thunk_.create_queue(node, type, 100, HSA_QUEUE_PRIORITY_NORMAL, ring, ring_bytes, nullptr, &resource);
      s != HSAKMT_STATUS_SUCCESS) {
    thunk_.unmap_memory_to_gpu(ring);
    thunk_.free_memory(ring, ring_bytes);
    return failed("hsaKmtCreateQueue", s);
  }
  return std::unique_ptr<sdma::Queue>(new KfdQueue(thunk_, resource, ring, ring_bytes, std::move(name)));
}

}  // namespace tessel::hip
