// HIP groups: AMD GPUs of one process. Symmetric memory comes from HIP's
// virtual memory API (an address range reserved per GPU, chunks created,
// mapped and opened to every peer as the group grows, never moved).
//
// Plans are armed on the copy engines themselves where the KFD thunk gives
// user-mode SDMA queues (runtime/hip/kfd.h): the same packet chains as
// host plans (runtime/sdma/armer.h), one queue per (owner, peer). Where it
// does not, or TESSEL_HIP_PLANS=streams asks, they are armed with stream
// memory operations, exactly as the CUDA backend's: the commands are
// runtime/cuda/chains.h's data (a copy stream per (owner, peer), a gate and
// an arrival stream per owner), issued as hipStreamWaitValue64 (>=),
// hipMemcpyAsync / hipMemcpy2DAsync, hipStreamWriteValue64, and event
// records and waits. How many commands a HIP stream holds behind a closed
// gate is not known: they are not counted.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/status.h"
#include "runtime/cuda/chains.h"
#include "runtime/hip/hip_device.h"
#include "runtime/hip/kfd.h"
#include "runtime/plans/plan_backend.h"
#include "runtime/sdma/armer.h"

namespace tessel::hip {
namespace {

using cuda::ChainOp;
using cuda::Lane;
using cuda::WordWrite;

// hipDeviceEnablePeerAccess on a pair already enabled.
constexpr hipError_t kPeerAccessAlreadyEnabled = 704;

// Each SDMA queue's ring (ROCm's own SDMA rings are this size): half of it
// may be armed at once.
constexpr int64_t kRingBytes = int64_t{1} << 20;

hipMemAllocationProp allocation_prop(int device) {
  hipMemAllocationProp prop{};
  prop.type = hipMemAllocationTypePinned;
  prop.location.type = hipMemLocationTypeDevice;
  prop.location.id = device;
  return prop;
}

class HipGroupBackend;

class HipArmedEpoch final : public ArmedEpoch {
 public:
  HipArmedEpoch(HipGroupBackend& backend, std::vector<ArmedBatch> batches)
      : backend_(backend), batches_(std::move(batches)) {}
  ~HipArmedEpoch() override;
  absl::StatusOr<bool> done() override;
  absl::Status release() override;

  // Per stream that ends the epoch: the word its last write sets to
  // `token`, and an event recorded after it (queried for device errors).
  std::map<Lane, uint64_t*> done_words;
  uint64_t token = 0;
  std::vector<std::pair<int, hipEvent_t>> finals;

 private:
  HipGroupBackend& backend_;
  std::vector<ArmedBatch> batches_;
  int polls_ = 0;
};

class HipGroupBackend final : public GroupBackend {
 public:
  HipGroupBackend(const Runtime& runtime, std::vector<int> devices) : r_(runtime), devices_(std::move(devices)) {}
  ~HipGroupBackend() override;

  absl::Status init();
  // Arms on SDMA queues where the KFD gives them and TESSEL_HIP_PLANS lets it.
  absl::Status choose_engines();
  int64_t granularity() const override { return granularity_; }
  int64_t max_linear_copy() const override {
    return armer_ != nullptr ? static_cast<int64_t>(sdma::kMaxLinearCopy) : GroupBackend::max_linear_copy();
  }
  absl::StatusOr<std::vector<uintptr_t>> reserve(int64_t bytes) override;
  absl::Status map(int64_t offset, int64_t bytes) override;
  absl::Status zero(int rank, void* p, size_t bytes) override;
  absl::StatusOr<uint64_t*> host_words(int count) override;
  absl::StatusOr<std::unique_ptr<ArmedEpoch>> arm(std::vector<ArmedBatch> batches) override;
  absl::Status open_gates(int owner, absl::Span<uint64_t* const> readies, uint64_t epoch) override;
  absl::Status copy(int rank, int peer, void* dst, const void* src, size_t bytes) override;

  const Runtime& runtime() const { return r_; }
  void retire(const HipArmedEpoch& epoch);

 private:
  static constexpr int kControl = -1;  // the stream of host-opened gates and releases
  absl::Status on(int rank) const { return r_.set_device(devices_[rank]); }
  absl::Status prefix(int rank, absl::string_view what, absl::Status s) const {
    if (s.ok()) return s;
    return prefixed(absl::StrCat("hip:", devices_[rank], ": ", what), s);
  }
  absl::StatusOr<hipStream_t> stream(int owner, int key) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<hipEvent_t> stage_event(Lane lane) ABSL_EXCLUSIVE_LOCKS_REQUIRED(arm_mu_);
  absl::StatusOr<hipEvent_t> take_event(int rank);
  absl::StatusOr<uint64_t*> take_word();
  absl::Status issue(const ChainOp& op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(arm_mu_);
  absl::Status write_words(hipStream_t s, absl::Span<const WordWrite> writes) const;

  const Runtime& r_;
  const std::vector<int> devices_;  // HIP device index per rank
  int64_t granularity_ = 0;
  int64_t reserved_ = 0;
  std::vector<uintptr_t> bases_;
  struct Chunk {
    int rank;
    void* at;
    size_t bytes;
    hipMemGenericAllocationHandle_t handle;
  };
  std::vector<Chunk> chunks_;
  absl::Mutex arm_mu_;  // one epoch's chains are consecutive on every stream
  std::map<Lane, hipEvent_t> stage_events_ ABSL_GUARDED_BY(arm_mu_);
  absl::Mutex mu_;
  std::map<std::pair<int, int>, hipStream_t> streams_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<hipEvent_t>> free_events_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t*> free_words_ ABSL_GUARDED_BY(mu_);
  std::vector<void*> host_blocks_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> tokens_{0};
  std::unique_ptr<Kfd> kfd_;
  std::unique_ptr<sdma::Armer> armer_;  // set where plans arm on SDMA queues
};

absl::Status HipGroupBackend::init() {
  const int n = static_cast<int>(devices_.size());
  {
    absl::MutexLock lock(&mu_);
    free_events_.resize(n);
  }
  for (int r = 0; r < n; ++r) {
    TESSEL_RETURN_IF_ERROR(on(r));
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      int can = 0;
      TESSEL_RETURN_IF_ERROR(
          prefix(r, "hipDeviceCanAccessPeer", r_.device_can_access_peer(&can, devices_[r], devices_[p])));
      if (can == 0) {
        return absl::FailedPreconditionError(
            absl::StrCat("hip:", devices_[r], " cannot access the memory of hip:", devices_[p], " (no peer access)"));
      }
      const hipError_t e = r_.device_enable_peer_access.raw(devices_[p], 0);
      if (e != hipSuccess && e != kPeerAccessAlreadyEnabled) {
        return prefix(r, "enabling peer access", runtime_error(r_, "hipDeviceEnablePeerAccess", e));
      }
    }
    hipMemAllocationProp prop = allocation_prop(devices_[r]);
    size_t g = 0;
    TESSEL_RETURN_IF_ERROR(
        prefix(r, "granularity", r_.mem_get_allocation_granularity(&g, &prop, hipMemAllocationGranularityRecommended)));
    granularity_ = std::max<int64_t>(granularity_, static_cast<int64_t>(g));
  }
  return absl::OkStatus();
}

absl::Status HipGroupBackend::choose_engines() {
  const char* asked = getenv("TESSEL_HIP_PLANS");
  const std::string how = asked != nullptr ? asked : "";
  if (how == "streams") return absl::OkStatus();
  if (!how.empty() && how != "sdma" && how != "auto") {
    return absl::InvalidArgumentError(
        absl::StrCat("TESSEL_HIP_PLANS is \"", how, "\": it takes sdma, streams or auto (the default)"));
  }
  absl::StatusOr<std::unique_ptr<Kfd>> kfd = Kfd::open(r_, devices_);
  if (!kfd.ok()) {
    if (how != "sdma") return absl::OkStatus();  // stream memory operations
    return absl::FailedPreconditionError(absl::StrCat(
        "TESSEL_HIP_PLANS=sdma, but user-mode SDMA queues are unavailable: ", kfd.status().message()));
  }
  kfd_ = std::move(*kfd);
  armer_ = std::make_unique<sdma::Armer>("HIP group", [this](int rank, int peer) {
    return kfd_->queue(rank, peer, kRingBytes, absl::StrCat("hip:", devices_[rank], " -> hip:", devices_[peer]));
  });
  return absl::OkStatus();
}

HipGroupBackend::~HipGroupBackend() {
  if (armer_ != nullptr) armer_->close();  // the queues stop before the memory goes
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, s] : streams_) {
      r_.set_device.raw(devices_[key.first]);
      r_.stream_synchronize.raw(s);
      r_.stream_destroy.raw(s);
    }
    for (size_t rank = 0; rank < free_events_.size(); ++rank) {
      for (hipEvent_t e : free_events_[rank]) r_.event_destroy.raw(e);
    }
    for (void* p : host_blocks_) r_.host_free.raw(p);
  }
  {
    absl::MutexLock arm(&arm_mu_);
    for (auto& [lane, e] : stage_events_) r_.event_destroy.raw(e);
  }
  for (const Chunk& c : chunks_) {
    r_.set_device.raw(devices_[c.rank]);
    r_.mem_unmap.raw(c.at, c.bytes);
    r_.mem_release.raw(c.handle);
  }
  for (size_t rank = 0; rank < bases_.size(); ++rank) {
    r_.mem_address_free.raw(reinterpret_cast<void*>(bases_[rank]), reserved_);
  }
}

absl::StatusOr<std::vector<uintptr_t>> HipGroupBackend::reserve(int64_t bytes) {
  for (size_t rank = 0; rank < devices_.size(); ++rank) {
    TESSEL_RETURN_IF_ERROR(on(rank));
    void* base = nullptr;
    TESSEL_RETURN_IF_ERROR(prefix(rank, absl::StrCat("reserving ", bytes, " bytes of address space"),
                                  r_.mem_address_reserve(&base, bytes, granularity_, nullptr, 0)));
    bases_.push_back(reinterpret_cast<uintptr_t>(base));
  }
  reserved_ = bytes;
  return bases_;
}

absl::Status HipGroupBackend::map(int64_t offset, int64_t bytes) {
  std::vector<hipMemAccessDesc> access(devices_.size());
  for (size_t p = 0; p < devices_.size(); ++p) {
    access[p].location = {hipMemLocationTypeDevice, devices_[p]};
    access[p].flags = hipMemAccessFlagsProtReadWrite;
  }
  for (size_t rank = 0; rank < devices_.size(); ++rank) {
    TESSEL_RETURN_IF_ERROR(on(rank));
    hipMemAllocationProp prop = allocation_prop(devices_[rank]);
    hipMemGenericAllocationHandle_t handle = nullptr;
    const std::string what = absl::StrCat("mapping ", bytes, " bytes of symmetric memory");
    TESSEL_RETURN_IF_ERROR(prefix(rank, what, r_.mem_create(&handle, bytes, &prop, 0)));
    void* at = reinterpret_cast<void*>(bases_[rank] + offset);
    absl::Status s = r_.mem_map(at, bytes, 0, handle, 0);
    if (!s.ok()) {
      r_.mem_release.raw(handle);
      return prefix(rank, what, s);
    }
    chunks_.push_back({static_cast<int>(rank), at, static_cast<size_t>(bytes), handle});
    TESSEL_RETURN_IF_ERROR(prefix(rank, what, r_.mem_set_access(at, bytes, access.data(), access.size())));
  }
  return absl::OkStatus();
}

absl::Status HipGroupBackend::zero(int rank, void* p, size_t bytes) {
  TESSEL_RETURN_IF_ERROR(on(rank));
  absl::Status s = r_.memset_d8(p, 0, bytes);
  if (s.ok()) s = r_.stream_synchronize(nullptr);
  if (s.ok() && armer_ != nullptr) armer_->zeroed(p, bytes);
  return prefix(rank, "zero-filling symmetric memory", s);
}

absl::StatusOr<uint64_t*> HipGroupBackend::host_words(int count) {
  TESSEL_RETURN_IF_ERROR(on(0));
  void* p = nullptr;
  const size_t bytes = static_cast<size_t>(count) * sizeof(uint64_t);
  // Portable and mapped: every GPU reaches it at the host's address.
  TESSEL_RETURN_IF_ERROR(
      prefix(0, "hipHostMalloc", r_.host_malloc(&p, bytes, hipHostMallocPortable | hipHostMallocMapped)));
  {
    absl::MutexLock lock(&mu_);
    host_blocks_.push_back(p);
  }
  std::memset(p, 0, bytes);
  return static_cast<uint64_t*>(p);
}

absl::StatusOr<hipStream_t> HipGroupBackend::stream(int owner, int key) {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find({owner, key});
  if (it == streams_.end()) {
    TESSEL_RETURN_IF_ERROR(on(owner));
    // Non-blocking: a stream behind a closed gate must not hold up the null stream.
    hipStream_t s = nullptr;
    TESSEL_RETURN_IF_ERROR(
        prefix(owner, "hipStreamCreateWithFlags", r_.stream_create_with_flags(&s, hipStreamNonBlocking)));
    it = streams_.emplace(std::pair{owner, key}, s).first;  // kept only once made
  }
  return it->second;
}

absl::StatusOr<hipEvent_t> HipGroupBackend::take_event(int rank) {
  {
    absl::MutexLock lock(&mu_);
    if (!free_events_[rank].empty()) {
      hipEvent_t e = free_events_[rank].back();
      free_events_[rank].pop_back();
      return e;
    }
  }
  TESSEL_RETURN_IF_ERROR(on(rank));
  hipEvent_t e = nullptr;
  TESSEL_RETURN_IF_ERROR(prefix(rank, "hipEventCreateWithFlags", r_.event_create(&e, hipEventDisableTiming)));
  return e;
}

absl::StatusOr<uint64_t*> HipGroupBackend::take_word() {
  {
    absl::MutexLock lock(&mu_);
    if (!free_words_.empty()) {
      uint64_t* w = free_words_.back();
      free_words_.pop_back();
      return w;
    }
  }
  constexpr int kBlock = 64;
  TESSEL_ASSIGN_OR_RETURN(uint64_t * block, host_words(kBlock));
  absl::MutexLock lock(&mu_);
  for (int i = 1; i < kBlock; ++i) free_words_.push_back(block + i);
  return block;
}

void HipGroupBackend::retire(const HipArmedEpoch& epoch) {
  absl::MutexLock lock(&mu_);
  for (const auto& [rank, e] : epoch.finals) free_events_[rank].push_back(e);
  for (const auto& [lane, w] : epoch.done_words) free_words_.push_back(w);
}

absl::StatusOr<hipEvent_t> HipGroupBackend::stage_event(Lane lane) {
  hipEvent_t& e = stage_events_[lane];
  if (e == nullptr) {
    TESSEL_RETURN_IF_ERROR(on(lane.owner));
    TESSEL_RETURN_IF_ERROR(prefix(lane.owner, "hipEventCreateWithFlags", r_.event_create(&e, hipEventDisableTiming)));
  }
  return e;
}

absl::Status HipGroupBackend::write_words(hipStream_t s, absl::Span<const WordWrite> writes) const {
  for (const WordWrite& w : writes) TESSEL_RETURN_IF_ERROR(r_.stream_write_value64(s, w.word, w.value, 0));
  return absl::OkStatus();
}

absl::Status HipGroupBackend::issue(const ChainOp& op) {
  using Kind = ChainOp::Kind;
  TESSEL_ASSIGN_OR_RETURN(hipStream_t s, stream(op.lane.owner, op.lane.key));
  switch (op.kind) {
    case Kind::kWait:
      return r_.stream_wait_value64(s, op.word, op.value, hipStreamWaitValueGte, ~uint64_t{0});
    case Kind::kWrite:
      return write_words(s, op.writes);
    case Kind::kCopy: {
      const ChainCopy& c = op.copy;
      auto* dst = reinterpret_cast<void*>(c.dst);
      const auto* src = reinterpret_cast<const void*>(c.src);
      if (c.height == 1) return r_.memcpy_async(dst, src, c.width, hipMemcpyDeviceToDevice, s);
      return r_.memcpy_2d_async(dst, c.dst_pitch, src, c.src_pitch, c.width, c.height, hipMemcpyDeviceToDevice, s);
    }
    case Kind::kRecord: {
      TESSEL_ASSIGN_OR_RETURN(hipEvent_t e, stage_event(op.event));
      return r_.event_record(e, s);
    }
    case Kind::kWaitEvent: {
      TESSEL_ASSIGN_OR_RETURN(hipEvent_t e, stage_event(op.event));
      return r_.stream_wait_event(s, e, 0);
    }
  }
  return absl::InternalError("unknown chain command");
}

absl::StatusOr<std::unique_ptr<ArmedEpoch>> HipGroupBackend::arm(std::vector<ArmedBatch> batches) {
  if (armer_ != nullptr) {
    std::vector<ArmedBatch> gates;  // what release needs: owners and ready words
    for (const ArmedBatch& b : batches) {
      ArmedBatch& g = gates.emplace_back();
      g.owner = b.owner;
      g.epoch = b.epoch;
      g.ready = b.ready;
    }
    auto release = [this, gates = std::move(gates)] {
      return gates.empty() ? absl::OkStatus() : open_gates_by_owner(*this, gates, gates.front().epoch);
    };
    return armer_->arm(std::move(batches), std::move(release));
  }
  std::vector<std::vector<ChainOp>> ops = cuda::epoch_ops(batches);
  auto epoch = std::make_unique<HipArmedEpoch>(*this, std::move(batches));
  epoch->token = ++tokens_;
  const std::vector<Lane> finishing = cuda::finishing_lanes(ops);
  for (Lane lane : finishing) {
    TESSEL_ASSIGN_OR_RETURN(epoch->done_words[lane], take_word());
  }
  ops.push_back(cuda::finish(ops, epoch->done_words, epoch->token));
  absl::MutexLock arm(&arm_mu_);
  std::set<Lane> touched;
  auto issue_all = [&]() -> absl::Status {
    for (const std::vector<ChainOp>& batch : ops) {
      for (const ChainOp& op : batch) {
        touched.insert(op.lane);
        absl::Status issued = on(op.lane.owner);
        if (issued.ok()) issued = issue(op);
        TESSEL_RETURN_IF_ERROR(prefix(op.lane.owner, "arming a triggered plan", issued));
      }
    }
    for (Lane lane : finishing) {
      TESSEL_ASSIGN_OR_RETURN(hipStream_t s, stream(lane.owner, lane.key));
      TESSEL_ASSIGN_OR_RETURN(hipEvent_t e, take_event(lane.owner));
      epoch->finals.push_back({lane.owner, e});
      TESSEL_RETURN_IF_ERROR(prefix(lane.owner, "arming a triggered plan", r_.event_record(e, s)));
    }
    return absl::OkStatus();
  };
  if (absl::Status issued = issue_all(); !issued.ok()) {
    // Commands already queued wait on gates no plan will open: open them,
    // so that the streams drain instead of holding their waits forever.
    if (epoch->release().ok()) {
      for (Lane lane : touched) {
        absl::StatusOr<hipStream_t> s = stream(lane.owner, lane.key);
        if (s.ok() && on(lane.owner).ok()) r_.stream_synchronize.raw(*s);
      }
    }
    return issued;
  }
  return std::unique_ptr<ArmedEpoch>(std::move(epoch));
}

absl::Status HipGroupBackend::open_gates(int owner, absl::Span<uint64_t* const> readies, uint64_t epoch) {
  if (readies.empty()) return absl::OkStatus();
  TESSEL_RETURN_IF_ERROR(on(owner));
  TESSEL_ASSIGN_OR_RETURN(hipStream_t control, stream(owner, kControl));
  std::vector<WordWrite> writes;
  for (uint64_t* ready : readies) writes.push_back({ready, epoch});
  return prefix(owner, readies.size() == 1 ? "opening a gate" : "opening gates", write_words(control, writes));
}

absl::Status HipGroupBackend::copy(int rank, int peer, void* dst, const void* src, size_t bytes) {
  if (armer_ != nullptr) {
    // A hung engine is reported, not waited on forever: 10 s and 1 s per GiB.
    const absl::Duration limit = absl::Seconds(10) + absl::Seconds(static_cast<int64_t>(bytes >> 30));
    return prefix(rank, absl::StrCat("copy to hip:", devices_[peer]), armer_->copy(rank, peer, dst, src, bytes, limit));
  }
  TESSEL_RETURN_IF_ERROR(on(rank));
  TESSEL_ASSIGN_OR_RETURN(hipStream_t s, stream(rank, peer));
  absl::Status status = r_.memcpy_async(dst, src, bytes, hipMemcpyDeviceToDevice, s);
  if (status.ok()) status = r_.stream_synchronize(s);
  return prefix(rank, absl::StrCat("copy to hip:", devices_[peer]), status);
}

HipArmedEpoch::~HipArmedEpoch() { backend_.retire(*this); }

absl::StatusOr<bool> HipArmedEpoch::done() {
  bool all = true;
  for (auto& [lane, w] : done_words) {
    all = all && std::atomic_ref<uint64_t>(*w).load(std::memory_order_acquire) == token;
  }
  if (all) return true;
  // A device that faulted never writes the word: its events say so.
  if (++polls_ % 16 != 0) return false;
  const Runtime& r = backend_.runtime();
  for (auto& [rank, e] : finals) {
    const hipError_t status = r.event_query.raw(e);
    if (status != hipSuccess && status != hipErrorNotReady) return runtime_error(r, "hipEventQuery", status);
  }
  return false;
}

absl::Status HipArmedEpoch::release() {
  if (batches_.empty()) return absl::OkStatus();
  return open_gates_by_owner(backend_, batches_, batches_.front().epoch);
}

}  // namespace

absl::StatusOr<std::unique_ptr<GroupBackend>> make_group_backend(const std::vector<Device>& devices) {
  const Runtime* runtime = nullptr;
  std::vector<int> indices;
  for (const Device& d : devices) {
    TESSEL_ASSIGN_OR_RETURN(Rank rank, rank_of(d));
    runtime = rank.runtime;
    indices.push_back(rank.index);
  }
  auto backend = std::make_unique<HipGroupBackend>(*runtime, std::move(indices));
  TESSEL_RETURN_IF_ERROR(backend->init());
  TESSEL_RETURN_IF_ERROR(backend->choose_engines());
  return std::unique_ptr<GroupBackend>(std::move(backend));
}

}  // namespace tessel::hip
