// CUDA groups: GPUs of one process, or one GPU per process of a joined
// group. Symmetric memory comes from the virtual memory API (an address
// range reserved per GPU, chunks created, mapped and opened to every peer as
// the group grows, never moved). Across processes each process creates its
// own GPU's chunk, exports it as a file descriptor, and maps every rank's
// chunk, imported from the descriptors the others sent, into its own
// reservation for that rank; every rank's range then lives in this process's
// context, which is the only one a joined group holds.
//
// A batch's chains to its peers run on its owner's streams: a copy stream per
// (owner, peer) queue, a gate stream and an arrival stream (chains.h says
// which command goes where). Each stream runs its work in arming order, so
// chains start in order on every queue.
//
// Why two chain forms (measured on an H200, docs/triggered.md): a wait and a write
// on the copy stream itself cost about 5 us of copy-engine time per chain,
// 15 % of an 8 MiB copy; pipelined, copy streams hold only copies and event
// waits and move data as fast as bare copies, but each event hand-off adds
// about 3 us from gate to arrival. Small deliveries are latency-bound, large
// ones bandwidth-bound. Events are recorded anew for every batch; a wait
// takes the record made just before it.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/status.h"
#include "runtime/cuda/chains.h"
#include "runtime/cuda/context.h"
#include "runtime/plans/exchange.h"
#include "runtime/plans/plan_backend.h"

namespace tessel {
namespace {

using cuda::Context;
using cuda::ChainOp;
using cuda::ContextScope;
using cuda::DeviceStream;
using cuda::Driver;
using cuda::Lane;
using cuda::LaneCounts;
using cuda::WordWrite;

// The driver API's names, as cuda.h spells them (cuda_api.h).
using cuda::CU_MEMHOSTALLOC_DEVICEMAP;
using cuda::CU_MEMHOSTALLOC_PORTABLE;
using cuda::CUDA_MEMCPY2D;
using cuda::CUdeviceptr;
using cuda::CUevent;
using cuda::CUmemAccessDesc;
using cuda::CUmemAllocationProp;
using cuda::CUmemGenericAllocationHandle;
using enum cuda::CUmemAllocationHandleType;
using cuda::CUresult;
using cuda::CUstream;
using cuda::CUstreamBatchMemOpParams;
using enum cuda::CUdevice_attribute;
using enum cuda::CUevent_flags;
using enum cuda::CUmemAccess_flags;
using enum cuda::CUmemAllocationGranularity_flags;
using enum cuda::CUmemAllocationType;
using enum cuda::CUmemLocationType;
using enum cuda::CUmemorytype;
using enum cuda::CUresult;
using enum cuda::CUstreamBatchMemOpType;
using enum cuda::CUstreamWaitValue_flags;
using enum cuda::CUstreamWriteValue_flags;

CUdeviceptr dptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

// Commands one stream takes behind a closed gate before enqueueing blocks,
// measured on an H200 with CUDA 13.0 (docs/triggered.md): 1020
// copies (linear or 2-D), 64-bit writes or batched writes after the wait;
// event records and waits on finished events seemed not to count, but a wait
// on a pending one may, so chains count every command.
constexpr int64_t kQueueCapacity = 1000;

// `exported`: the chunk can be handed to another process as a descriptor.
CUmemAllocationProp allocation_prop(const Context& c, bool exported) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = exported ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = static_cast<int>(c.device());
  return prop;
}

class CudaGroupBackend;

// Events handed out for one epoch's chains, returned when it is dropped.
class CudaArmedEpoch final : public ArmedEpoch {
 public:
  CudaArmedEpoch(CudaGroupBackend& backend, std::vector<ArmedBatch> batches)
      : backend_(backend), batches_(std::move(batches)) {}
  ~CudaArmedEpoch() override;
  absl::StatusOr<bool> done() override;
  absl::Status release() override;

  // Per stream that ends the epoch: its last write, of `token` to a word in
  // host memory, polled without a driver call; and (with the stream's owner)
  // an event recorded after it, queried now and then for errors the device
  // raised.
  std::map<Lane, uint64_t*> done_words;
  uint64_t token = 0;
  std::vector<std::pair<int, CUevent>> finals;
  LaneCounts queued;  // commands enqueued per lane, counted against its capacity until the chains finish

 private:
  CudaGroupBackend& backend_;
  std::vector<ArmedBatch> batches_;
  int polls_ = 0;
};

class CudaGroupBackend final : public GroupBackend {
 public:
  // One context per rank; in a joined group (`bootstrap`), this process's
  // context at every rank, since every rank's memory is mapped here.
  explicit CudaGroupBackend(std::vector<std::shared_ptr<Context>> contexts,
                            std::shared_ptr<Bootstrap> bootstrap = nullptr)
      : contexts_(std::move(contexts)),
        d_(contexts_[0]->driver()),
        bootstrap_(std::move(bootstrap)),
        self_(bootstrap_ != nullptr ? bootstrap_->rank() : -1) {}
  ~CudaGroupBackend() override;

  absl::Status init();
  // What every local rank's GPU must offer; sets the granularity.
  absl::Status check_devices();
  int64_t granularity() const override { return granularity_; }
  absl::StatusOr<std::vector<uintptr_t>> reserve(int64_t bytes) override;
  absl::Status map(int64_t offset, int64_t bytes) override;
  absl::Status zero(int rank, void* p, size_t bytes) override;
  absl::StatusOr<uint64_t*> host_words(int count) override;
  absl::StatusOr<std::unique_ptr<ArmedEpoch>> arm(std::vector<ArmedBatch> batches) override;
  absl::Status open_gates(int owner, absl::Span<uint64_t* const> readies, uint64_t epoch) override;
  absl::Status copy(int rank, int peer, void* dst, const void* src, size_t bytes) override;

  const Driver& driver() const { return d_; }
  const Context& context(int rank) const { return *contexts_[rank]; }
  absl::StatusOr<CUevent> take_event(int rank);
  // Words of host memory every GPU can write, for chains' done words.
  absl::StatusOr<uint64_t*> take_word();
  // What a dropped epoch held: its events and done words go back to the
  // pools, and its commands no longer fill their lanes. One lock for each,
  // since end_device_epoch pays for it.
  void retire(const CudaArmedEpoch& epoch);
  // (owner, peer): the copy stream of that queue; (owner, Lane::kGate),
  // (owner, Lane::kArrival): the gate and arrival streams; (owner,
  // kControl): control writes (host-opened gates, releases).
  static constexpr int kControl = -1;
  absl::StatusOr<CUstream> stream(int owner, int key);

 private:
  // The event a pipeline stage records for the next (chains.h).
  absl::StatusOr<CUevent> stage_event(Lane lane) ABSL_EXCLUSIVE_LOCKS_REQUIRED(arm_mu_);
  absl::Status prefix(int rank, absl::string_view what, absl::Status s) const {
    if (s.ok()) return s;
    return prefixed(absl::StrCat(name(rank), ": ", what), s);
  }
  bool local(int rank) const { return self_ < 0 || rank == self_; }
  // "cuda:1", or for a rank in another process "rank 1".
  std::string name(int rank) const { return local(rank) ? contexts_[rank]->name() : absl::StrCat("rank ", rank); }
  // map() in a joined group: this rank's chunk made and sent, every rank's mapped.
  absl::Status map_joined(int64_t offset, int64_t bytes);
  std::string lane_name(Lane lane) const;
  // Enqueues `op` on its lane's stream; the owner's context is current.
  absl::Status issue(const ChainOp& op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(arm_mu_);
  // The writes, in order, as one command on `s`.
  absl::Status write_words(CUstream s, absl::Span<const WordWrite> writes) const;

  const std::vector<std::shared_ptr<Context>> contexts_;
  const Driver& d_;
  const std::shared_ptr<Bootstrap> bootstrap_;
  const int self_;  // this process's rank in a joined group, else -1
  int64_t granularity_ = 0;
  int64_t reserved_ = 0;
  std::vector<uintptr_t> bases_;
  struct Chunk {
    int rank;
    CUdeviceptr at;
    size_t bytes;
    CUmemGenericAllocationHandle handle;
  };
  std::vector<Chunk> chunks_;
  std::vector<void*> host_blocks_ ABSL_GUARDED_BY(mu_);  // cuMemHostAlloc'd
  // Held while one epoch's chains are appended, so each epoch's chains are
  // consecutive on every stream.
  absl::Mutex arm_mu_;
  std::map<Lane, CUevent> stage_events_ ABSL_GUARDED_BY(arm_mu_);
  LaneCounts queued_ ABSL_GUARDED_BY(arm_mu_);
  absl::Mutex mu_;
  std::map<std::pair<int, int>, std::shared_ptr<DeviceStream>> streams_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<CUevent>> free_events_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t*> free_words_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> tokens_{0};
};

absl::Status CudaGroupBackend::init() {
  int n = static_cast<int>(contexts_.size());
  {
    absl::MutexLock lock(&mu_);
    free_events_.resize(n);
  }
  absl::Status checked = check_devices();
  if (bootstrap_ == nullptr) return checked;
  // Chunks are a multiple of every rank's granularity.
  TESSEL_RETURN_IF_ERROR(agree_ok(*bootstrap_, checked, "cuda group"));
  TESSEL_ASSIGN_OR_RETURN(std::vector<int64_t> all, gather(*bootstrap_, granularity_, "cuda group"));
  for (int64_t g : all) granularity_ = std::max(granularity_, g);
  return absl::OkStatus();
}

absl::Status CudaGroupBackend::check_devices() {
  int n = static_cast<int>(contexts_.size());
  for (int r = 0; r < n; ++r) {
    if (!local(r)) continue;
    const Context& c = *contexts_[r];
    TESSEL_ASSIGN_OR_RETURN(int memops, c.attribute(CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS));
    if (memops == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          c.name(), " cannot run 64-bit stream memory operations (CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS "
          "is 0), which arm triggered plans"));
    }
    TESSEL_ASSIGN_OR_RETURN(int vmm, c.attribute(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED));
    if (vmm == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(c.name(), " has no virtual memory management, which symmetric allocations need"));
    }
    // Across processes, mapping a peer's chunk is the test of peer access.
    for (int p = 0; p < n && bootstrap_ == nullptr; ++p) {
      if (p == r) continue;
      int can = 0;
      TESSEL_RETURN_IF_ERROR(prefix(r, "cuDeviceCanAccessPeer",
                                    d_.device_can_access_peer(&can, c.device(), contexts_[p]->device())));
      if (can == 0) {
        return absl::FailedPreconditionError(
            absl::StrCat(c.name(), " cannot access the memory of ", name(p), " (no peer access)"));
      }
    }
    CUmemAllocationProp prop = allocation_prop(c, bootstrap_ != nullptr);
    size_t g = 0;
    TESSEL_RETURN_IF_ERROR(prefix(
        r, "granularity", d_.mem_get_allocation_granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)));
    granularity_ = std::max<int64_t>(granularity_, static_cast<int64_t>(g));
  }
  return absl::OkStatus();
}

CudaGroupBackend::~CudaGroupBackend() {
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, s] : streams_) {
      ContextScope scope(s->context());
      d_.stream_synchronize.raw(s->get());
    }
    streams_.clear();
    for (size_t r = 0; r < free_events_.size(); ++r) {
      ContextScope scope(*contexts_[r]);
      for (CUevent e : free_events_[r]) d_.event_destroy.raw(e);
    }
  }
  {
    absl::MutexLock arm(&arm_mu_);
    for (auto& [lane, e] : stage_events_) {
      ContextScope scope(*contexts_[lane.owner]);
      d_.event_destroy.raw(e);
    }
  }
  // Unmapping and freeing pinned memory wait for the device: deferred while
  // another group's chains are armed there.
  std::vector<void*> blocks;
  {
    absl::MutexLock lock(&mu_);
    blocks.swap(host_blocks_);
  }
  if (!blocks.empty()) {
    std::shared_ptr<Context> context = contexts_[0];
    context->run_or_defer([context, blocks] {
      ContextScope scope(*context);
      for (void* p : blocks) context->driver().mem_free_host.raw(p);
    });
  }
  for (size_t r = 0; r < bases_.size(); ++r) {
    std::vector<Chunk> mine;
    for (const Chunk& c : chunks_) {
      if (c.rank == static_cast<int>(r)) mine.push_back(c);
    }
    std::shared_ptr<Context> context = contexts_[r];
    context->run_or_defer([context, mine, base = bases_[r], reserved = reserved_] {
      ContextScope scope(*context);
      const Driver& d = context->driver();
      for (const Chunk& c : mine) {
        d.mem_unmap.raw(c.at, c.bytes);
        d.mem_release.raw(c.handle);
      }
      d.mem_address_free.raw(base, reserved);
    });
  }
}

absl::StatusOr<std::vector<uintptr_t>> CudaGroupBackend::reserve(int64_t bytes) {
  for (size_t r = 0; r < contexts_.size(); ++r) {
    ContextScope scope(*contexts_[r]);
    TESSEL_RETURN_IF_ERROR(scope.status());
    CUdeviceptr base = 0;
    TESSEL_RETURN_IF_ERROR(prefix(r, absl::StrCat("reserving ", bytes, " bytes of address space"),
                                  d_.mem_address_reserve(&base, bytes, granularity_, 0, 0)));
    bases_.push_back(base);
  }
  reserved_ = bytes;
  return bases_;
}

absl::Status CudaGroupBackend::map(int64_t offset, int64_t bytes) {
  if (bootstrap_ != nullptr) return map_joined(offset, bytes);
  std::vector<CUmemAccessDesc> access(contexts_.size());
  for (size_t p = 0; p < contexts_.size(); ++p) {
    access[p].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access[p].location.id = static_cast<int>(contexts_[p]->device());
    access[p].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  }
  for (size_t r = 0; r < contexts_.size(); ++r) {
    ContextScope scope(*contexts_[r]);
    TESSEL_RETURN_IF_ERROR(scope.status());
    CUmemAllocationProp prop = allocation_prop(*contexts_[r], false);
    CUmemGenericAllocationHandle handle = 0;
    std::string what = absl::StrCat("mapping ", bytes, " bytes of symmetric memory");
    TESSEL_RETURN_IF_ERROR(prefix(r, what, d_.mem_create(&handle, bytes, &prop, 0)));
    CUdeviceptr at = bases_[r] + offset;
    absl::Status s = d_.mem_map(at, bytes, 0, handle, 0);
    if (!s.ok()) {
      d_.mem_release.raw(handle);
      return prefix(r, what, s);
    }
    chunks_.push_back({static_cast<int>(r), at, static_cast<size_t>(bytes), handle});
    TESSEL_RETURN_IF_ERROR(prefix(r, what, d_.mem_set_access(at, bytes, access.data(), access.size())));
  }
  return absl::OkStatus();
}

absl::Status CudaGroupBackend::map_joined(int64_t offset, int64_t bytes) {
  const Context& c = *contexts_[self_];
  ContextScope scope(c);
  const std::string what = absl::StrCat("mapping ", bytes, " bytes of symmetric memory");
  CUmemGenericAllocationHandle mine = 0;
  int fd = -1;
  absl::Status made = scope.status();
  if (made.ok()) {
    CUmemAllocationProp prop = allocation_prop(c, true);
    made = prefix(self_, what, d_.mem_create(&mine, bytes, &prop, 0));
    if (!made.ok()) mine = 0;
  }
  if (made.ok()) {
    made = prefix(self_, "cuMemExportToShareableHandle",
                  d_.mem_export_to_shareable_handle(&fd, mine, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    if (!made.ok()) fd = -1;
  }
  absl::StatusOr<std::vector<int>> fds = exchange_fds(*bootstrap_, made.ok() ? fd : -1, "cuda group: " + what);
  if (!fds.ok()) {
    if (fd >= 0) close(fd);
    if (mine != 0) d_.mem_release.raw(mine);
    return made.ok() ? fds.status() : made;
  }
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = static_cast<int>(c.device());
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  absl::Status status = absl::OkStatus();
  for (int r = 0; r < static_cast<int>(fds->size()) && status.ok(); ++r) {
    CUmemGenericAllocationHandle handle = mine;
    if (r != self_) {
      void* os_handle = reinterpret_cast<void*>(static_cast<uintptr_t>((*fds)[r]));
      status =
          prefix(self_, absl::StrCat("importing rank ", r, "'s memory"),
                 d_.mem_import_from_shareable_handle(&handle, os_handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
      if (!status.ok()) break;
    }
    CUdeviceptr at = bases_[r] + offset;
    status = d_.mem_map(at, bytes, 0, handle, 0);
    if (!status.ok()) {
      if (r != self_) d_.mem_release.raw(handle);
      status = prefix(self_, absl::StrCat(what, " of rank ", r), status);
      break;
    }
    chunks_.push_back({r, at, static_cast<size_t>(bytes), handle});
    if (r == self_) mine = 0;  // the chunk list owns it now
    status = prefix(self_, absl::StrCat(what, " of rank ", r), d_.mem_set_access(at, bytes, &access, 1));
  }
  // The imported handles and the mappings hold the memory; the descriptors are spent.
  for (int f : *fds) close(f);
  if (mine != 0) d_.mem_release.raw(mine);
  return status;
}

absl::Status CudaGroupBackend::zero(int rank, void* p, size_t bytes) {
  if (!local(rank)) return absl::OkStatus();  // its own process zeroes it
  ContextScope scope(*contexts_[rank]);
  TESSEL_RETURN_IF_ERROR(scope.status());
  absl::Status s = d_.memset_d8(dptr(p), 0, bytes);
  if (s.ok()) s = d_.stream_synchronize(nullptr);
  return prefix(rank, "zero-filling symmetric memory", s);
}

absl::StatusOr<uint64_t*> CudaGroupBackend::host_words(int count) {
  ContextScope scope(*contexts_[0]);
  TESSEL_RETURN_IF_ERROR(scope.status());
  void* p = nullptr;
  const size_t bytes = static_cast<size_t>(count) * sizeof(uint64_t);
  TESSEL_RETURN_IF_ERROR(prefix(0, "cuMemHostAlloc", d_.mem_host_alloc(&p, bytes, CU_MEMHOSTALLOC_PORTABLE |
                                                                                      CU_MEMHOSTALLOC_DEVICEMAP)));
  {
    absl::MutexLock lock(&mu_);
    host_blocks_.push_back(p);
  }
  std::memset(p, 0, bytes);
  // Kernels get the host address: with unified addressing every GPU maps
  // portable pinned memory there.
  for (size_t r = 0; r < contexts_.size(); ++r) {
    ContextScope on(*contexts_[r]);
    TESSEL_RETURN_IF_ERROR(on.status());
    CUdeviceptr at = 0;
    TESSEL_RETURN_IF_ERROR(prefix(r, "cuMemHostGetDevicePointer", d_.mem_host_get_device_pointer(&at, p, 0)));
    if (at != dptr(p)) {
      return absl::FailedPreconditionError(absl::StrCat(
          contexts_[r]->name(), " maps pinned host memory at another address than the host's (no unified addressing)"));
    }
  }
  return static_cast<uint64_t*>(p);
}

absl::StatusOr<CUstream> CudaGroupBackend::stream(int owner, int key) {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find({owner, key});
  if (it == streams_.end()) {
    // Kept only once made: the destructor reads every stream it holds.
    TESSEL_ASSIGN_OR_RETURN(std::shared_ptr<DeviceStream> s, DeviceStream::create(contexts_[owner]));
    it = streams_.emplace(std::pair{owner, key}, std::move(s)).first;
  }
  return it->second->get();
}

absl::StatusOr<CUevent> CudaGroupBackend::take_event(int rank) {
  {
    absl::MutexLock lock(&mu_);
    if (!free_events_[rank].empty()) {
      CUevent e = free_events_[rank].back();
      free_events_[rank].pop_back();
      return e;
    }
  }
  CUevent e = nullptr;
  TESSEL_RETURN_IF_ERROR(prefix(rank, "cuEventCreate", d_.event_create(&e, CU_EVENT_DISABLE_TIMING)));
  return e;
}

absl::StatusOr<uint64_t*> CudaGroupBackend::take_word() {
  {
    absl::MutexLock lock(&mu_);
    if (!free_words_.empty()) {
      uint64_t* w = free_words_.back();
      free_words_.pop_back();
      return w;
    }
  }
  constexpr int kBlock = 64;
  TESSEL_ASSIGN_OR_RETURN(uint64_t* block, host_words(kBlock));
  absl::MutexLock lock(&mu_);
  for (int i = 1; i < kBlock; ++i) free_words_.push_back(block + i);
  return block;
}

void CudaGroupBackend::retire(const CudaArmedEpoch& epoch) {
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [rank, e] : epoch.finals) free_events_[rank].push_back(e);
    for (const auto& [lane, w] : epoch.done_words) free_words_.push_back(w);
  }
  absl::MutexLock arm(&arm_mu_);
  for (const auto& [lane, n] : epoch.queued) queued_[lane] -= n;
}

absl::StatusOr<CUevent> CudaGroupBackend::stage_event(Lane lane) {
  CUevent& e = stage_events_[lane];
  if (e == nullptr) {
    ContextScope scope(*contexts_[lane.owner]);  // events belong to the context current at creation
    TESSEL_RETURN_IF_ERROR(prefix(lane.owner, "cuEventCreate", scope.status()));
    TESSEL_RETURN_IF_ERROR(prefix(lane.owner, "cuEventCreate", d_.event_create(&e, CU_EVENT_DISABLE_TIMING)));
  }
  return e;
}

std::string CudaGroupBackend::lane_name(Lane lane) const {
  const std::string& owner = contexts_[lane.owner]->name();
  if (lane.key == Lane::kGate) return absl::StrCat(owner, "'s gate stream");
  if (lane.key == Lane::kArrival) return absl::StrCat(owner, "'s arrival stream");
  return absl::StrCat(owner, "'s copy stream to ", name(lane.key));
}

absl::Status CudaGroupBackend::write_words(CUstream s, absl::Span<const WordWrite> writes) const {
  if (writes.size() == 1) {
    return d_.stream_write_value64(s, dptr(writes[0].word), writes[0].value, CU_STREAM_WRITE_VALUE_DEFAULT);
  }
  // A call takes fewer than 256 operations.
  std::vector<CUstreamBatchMemOpParams> ops(writes.size());
  for (size_t i = 0; i < writes.size(); ++i) {
    ops[i].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    ops[i].writeValue.address = dptr(writes[i].word);
    ops[i].writeValue.value64 = writes[i].value;
    ops[i].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
  }
  for (size_t at = 0; at < ops.size(); at += 255) {
    unsigned n = static_cast<unsigned>(std::min<size_t>(255, ops.size() - at));
    TESSEL_RETURN_IF_ERROR(d_.stream_batch_mem_op(s, n, ops.data() + at, 0));
  }
  return absl::OkStatus();
}

absl::Status CudaGroupBackend::issue(const ChainOp& op) {
  using Kind = ChainOp::Kind;
  TESSEL_ASSIGN_OR_RETURN(CUstream s, stream(op.lane.owner, op.lane.key));
  switch (op.kind) {
    case Kind::kWait:
      return d_.stream_wait_value64(s, dptr(op.word), op.value, CU_STREAM_WAIT_VALUE_GEQ);
    case Kind::kWrite:
      return write_words(s, op.writes);
    case Kind::kCopy: {
      const ChainCopy& c = op.copy;
      if (c.height == 1) return d_.memcpy_async(c.dst, c.src, c.width, s);
      CUDA_MEMCPY2D m{};
      m.srcMemoryType = CU_MEMORYTYPE_DEVICE;
      m.srcDevice = c.src;
      m.srcPitch = c.src_pitch;
      m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
      m.dstDevice = c.dst;
      m.dstPitch = c.dst_pitch;
      m.WidthInBytes = c.width;
      m.Height = c.height;
      return d_.memcpy_2d_async(&m, s);
    }
    case Kind::kRecord: {
      TESSEL_ASSIGN_OR_RETURN(CUevent e, stage_event(op.event));
      return d_.event_record(e, s);
    }
    case Kind::kWaitEvent: {
      TESSEL_ASSIGN_OR_RETURN(CUevent e, stage_event(op.event));
      return d_.stream_wait_event(s, e, 0);
    }
  }
  return absl::InternalError("unknown chain command");
}

absl::StatusOr<std::unique_ptr<ArmedEpoch>> CudaGroupBackend::arm(std::vector<ArmedBatch> batches) {
  std::vector<std::vector<ChainOp>> ops = cuda::epoch_ops(batches);
  auto epoch = std::make_unique<CudaArmedEpoch>(*this, std::move(batches));
  // Each stream that ends the epoch writes a token to its done word last
  // (chains.h); an event recorded after it reports errors.
  epoch->token = ++tokens_;
  const std::vector<Lane> finishing = cuda::finishing_lanes(ops);
  for (Lane lane : finishing) {
    TESSEL_ASSIGN_OR_RETURN(epoch->done_words[lane], take_word());
  }
  ops.push_back(cuda::finish(ops, epoch->done_words, epoch->token));
  LaneCounts adding;
  for (const std::vector<ChainOp>& batch : ops) cuda::count_ops(batch, adding);
  absl::MutexLock arm(&arm_mu_);
  TESSEL_RETURN_IF_ERROR(cuda::check_capacity(queued_, adding, kQueueCapacity,
                                               [this](Lane lane) { return lane_name(lane); }));
  for (const auto& [lane, n] : adding) queued_[lane] += n;
  epoch->queued = adding;
  std::set<Lane> touched;
  auto issue_all = [&]() -> absl::Status {
    // In arming order, each command with its owner's context current.
    std::optional<ContextScope> scope;
    int current = -1;
    for (const std::vector<ChainOp>& batch : ops) {
      for (const ChainOp& op : batch) {
        const int owner = op.lane.owner;
        if (owner != current) {
          scope.reset();
          scope.emplace(*contexts_[owner]);
          current = owner;
        }
        touched.insert(op.lane);
        absl::Status issued = scope->status();
        if (issued.ok()) issued = issue(op);
        TESSEL_RETURN_IF_ERROR(prefix(owner, "arming a triggered plan", issued));
      }
    }
    scope.reset();
    for (Lane lane : finishing) {
      ContextScope in_owner(*contexts_[lane.owner]);
      TESSEL_RETURN_IF_ERROR(prefix(lane.owner, "arming a triggered plan", in_owner.status()));
      TESSEL_ASSIGN_OR_RETURN(CUstream s, stream(lane.owner, lane.key));
      TESSEL_ASSIGN_OR_RETURN(CUevent e, take_event(lane.owner));
      epoch->finals.push_back({lane.owner, e});
      TESSEL_RETURN_IF_ERROR(prefix(lane.owner, "arming a triggered plan", d_.event_record(e, s)));
    }
    return absl::OkStatus();
  };
  if (absl::Status issued = issue_all(); !issued.ok()) {
    // Commands already queued wait on gates no plan will open: open them,
    // so that the streams drain instead of holding their waits forever.
    if (epoch->release().ok()) {
      for (Lane lane : touched) {
        ContextScope in_owner(*contexts_[lane.owner]);
        absl::StatusOr<CUstream> s = stream(lane.owner, lane.key);
        if (in_owner.status().ok() && s.ok()) d_.stream_synchronize.raw(*s);
      }
    }
    return issued;
  }
  return std::unique_ptr<ArmedEpoch>(std::move(epoch));
}

absl::Status CudaGroupBackend::open_gates(int owner, absl::Span<uint64_t* const> readies, uint64_t epoch) {
  if (readies.empty()) return absl::OkStatus();
  ContextScope scope(*contexts_[owner]);
  TESSEL_RETURN_IF_ERROR(scope.status());
  TESSEL_ASSIGN_OR_RETURN(CUstream control, stream(owner, kControl));
  std::vector<WordWrite> writes;
  for (uint64_t* ready : readies) writes.push_back({ready, epoch});
  // Fenced like every write, though nothing on the control stream needs it:
  // CUDA 13's cuStreamWriteValue64 refuses CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER
  // (CUDA_ERROR_INVALID_VALUE on an H200).
  return prefix(owner, readies.size() == 1 ? "opening a gate" : "opening gates", write_words(control, writes));
}

absl::Status CudaGroupBackend::copy(int rank, int peer, void* dst, const void* src, size_t bytes) {
  ContextScope scope(*contexts_[rank]);
  TESSEL_RETURN_IF_ERROR(scope.status());
  TESSEL_ASSIGN_OR_RETURN(CUstream s, stream(rank, peer));
  absl::Status status = d_.memcpy_async(dptr(dst), dptr(src), bytes, s);
  if (status.ok()) status = d_.stream_synchronize(s);
  return prefix(rank, absl::StrCat("copy to ", name(peer)), status);
}

CudaArmedEpoch::~CudaArmedEpoch() {
  backend_.retire(*this);
}

absl::StatusOr<bool> CudaArmedEpoch::done() {
  bool all = true;
  for (auto& [lane, w] : done_words) {
    all = all && std::atomic_ref<uint64_t>(*w).load(std::memory_order_acquire) == token;
  }
  if (all) return true;
  // A device that faulted never writes the word: its events say so.
  if (++polls_ % 16 != 0) return false;
  const Driver& d = backend_.driver();
  for (auto& [rank, e] : finals) {
    CUresult r = d.event_query.raw(e);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY) return cuda::driver_error(d, "cuEventQuery", r);
  }
  return false;
}

absl::Status CudaArmedEpoch::release() {
  // The batches of one arm() call share its epoch.
  if (batches_.empty()) return absl::OkStatus();
  return open_gates_by_owner(backend_, batches_, batches_.front().epoch);
}

}  // namespace

absl::StatusOr<std::unique_ptr<GroupBackend>> make_cuda_group_backend(const std::vector<Device>& devices) {
  std::vector<std::shared_ptr<Context>> contexts;
  for (const Device& d : devices) contexts.push_back(cuda::context_of(d.impl()));
  auto backend = std::make_unique<CudaGroupBackend>(std::move(contexts));
  TESSEL_RETURN_IF_ERROR(backend->init());
  return std::unique_ptr<GroupBackend>(std::move(backend));
}

absl::StatusOr<std::unique_ptr<GroupBackend>> make_cuda_joined_group_backend(const Device& device,
                                                                             std::shared_ptr<Bootstrap> bootstrap) {
  std::vector<std::shared_ptr<Context>> contexts(bootstrap->size(), cuda::context_of(device.impl()));
  auto backend = std::make_unique<CudaGroupBackend>(std::move(contexts), std::move(bootstrap));
  TESSEL_RETURN_IF_ERROR(backend->init());
  return std::unique_ptr<GroupBackend>(std::move(backend));
}

}  // namespace tessel
