#include "runtime/plans/group.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "runtime/backend.h"
#include "runtime/device_impl.h"
#include "runtime/plans/exchange.h"
#include "runtime/plans/group_impl.h"

namespace tessel {
namespace {

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

absl::Status check_devices(const std::vector<Device>& devices) {
  if (devices.empty()) return absl::InvalidArgumentError("Group::create: no devices");
  for (size_t r = 0; r < devices.size(); ++r) {
    if (find_backend(devices[r].name()) != find_backend(devices[0].name())) {
      return absl::InvalidArgumentError(absl::StrCat("Group::create: rank ", r, " is ", devices[r].name(),
                                                     " but rank 0 is ", devices[0].name(),
                                                     "; a group's devices are all of one kind"));
    }
    for (size_t q = 0; q < r; ++q) {
      if (&devices[q].impl() == &devices[r].impl()) {
        return absl::InvalidArgumentError(
            absl::StrCat("Group::create: ranks ", q, " and ", r, " are the same device (", devices[r].name(), ")"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status check_options(absl::string_view call, const GroupOptions& options) {
  if (options.reserve_bytes <= 0 || options.chunk_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(call, ": reserve_bytes (", options.reserve_bytes,
                                                   ") and chunk_bytes (", options.chunk_bytes, ") must be > 0"));
  }
  return absl::OkStatus();
}

// What each process of a joined group brings, compared with rank 0's.
struct JoinHello {
  char backend[16] = {};
  int64_t reserve_bytes = 0;
  int64_t chunk_bytes = 0;
};

absl::Status check_hellos(const std::vector<JoinHello>& all) {
  for (size_t r = 1; r < all.size(); ++r) {
    if (std::strncmp(all[r].backend, all[0].backend, sizeof(JoinHello::backend)) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("Group::join: rank ", r, " joins with a '", all[r].backend,
                                                     "' device but rank 0 with a '", all[0].backend,
                                                     "' one; a group's devices are all of one kind"));
    }
    if (all[r].reserve_bytes != all[0].reserve_bytes || all[r].chunk_bytes != all[0].chunk_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Group::join: rank ", r, "'s options (reserve_bytes ", all[r].reserve_bytes, ", chunk_bytes ",
          all[r].chunk_bytes, ") differ from rank 0's (", all[0].reserve_bytes, ", ", all[0].chunk_bytes, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

SymmetricBlock::~SymmetricBlock() { group->free(offset, bytes); }

absl::StatusOr<std::shared_ptr<GroupImpl>> GroupImpl::create(std::vector<Device> devices,
                                                             const GroupOptions& options) {
  TESSEL_RETURN_IF_ERROR(check_devices(devices));
  TESSEL_RETURN_IF_ERROR(check_options("Group::create", options));
  const Backend* kind = find_backend(devices[0].name());
  if (kind == nullptr || kind->make_group == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("Group::create: ", devices[0].name(), " has no triggered-plan groups (its backend offers none)"));
  }
  TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<GroupBackend> backend, kind->make_group(devices));
  DeviceKind device_kind = devices[0].kind();
  std::shared_ptr<GroupImpl> group(
      new GroupImpl({devices.begin(), devices.end()}, device_kind, options, std::move(backend), nullptr));
  TESSEL_RETURN_IF_ERROR(group->reserve());
  return group;
}

absl::StatusOr<std::shared_ptr<GroupImpl>> GroupImpl::join(Device device, std::shared_ptr<Bootstrap> bootstrap,
                                                           const GroupOptions& options) {
  if (bootstrap == nullptr) return absl::InvalidArgumentError("Group::join: no bootstrap");
  const int rank = bootstrap->rank(), size = bootstrap->size();
  if (size < 1 || size > 64 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("Group::join: the bootstrap says rank ", rank, " of ", size, "; ranks lie in [0, size), 1 to 64"));
  }
  // Every process checks its own input, then all compare what they brought:
  // a process that stops early would leave the others waiting.
  const Backend* kind = find_backend(device.name());
  absl::Status mine = check_options("Group::join", options);
  if (mine.ok() && (kind == nullptr || kind->make_joined_group == nullptr)) {
    mine = absl::UnimplementedError(absl::StrCat("Group::join: ", device.name(),
                                                 " cannot join a group across processes (host and CUDA devices can)"));
  }
  TESSEL_RETURN_IF_ERROR(agree_ok(*bootstrap, mine, "Group::join"));
  JoinHello hello;
  std::strncpy(hello.backend, kind->prefix.c_str(), sizeof(hello.backend) - 1);
  hello.reserve_bytes = options.reserve_bytes;
  hello.chunk_bytes = options.chunk_bytes;
  TESSEL_ASSIGN_OR_RETURN(std::vector<JoinHello> all, gather(*bootstrap, hello, "Group::join"));
  TESSEL_RETURN_IF_ERROR(check_hellos(all));
  absl::StatusOr<std::unique_ptr<GroupBackend>> backend = kind->make_joined_group(device, bootstrap);
  TESSEL_RETURN_IF_ERROR(agree_ok(*bootstrap, backend.status(), "Group::join"));
  std::vector<std::optional<Device>> devices(size);
  DeviceKind device_kind = device.kind();
  devices[rank] = std::move(device);
  std::shared_ptr<GroupImpl> group(
      new GroupImpl(std::move(devices), device_kind, options, *std::move(backend), std::move(bootstrap)));
  TESSEL_RETURN_IF_ERROR(group->reserve());
  return group;
}

absl::Status GroupImpl::reserve() {
  chunk_ = round_up(options_.chunk_bytes, backend_->granularity());
  TESSEL_ASSIGN_OR_RETURN(bases_, backend_->reserve(round_up(options_.reserve_bytes, chunk_)));
  return absl::OkStatus();
}

const Device& GroupImpl::device(int rank) const {
  // A precondition, as an index is: the handle has no error to return.
  if (rank < 0 || rank >= size() || !devices_[rank].has_value()) {
    std::fprintf(stderr, "tessel: Group::device(%d): rank %d of %d has no device in this process (Group::is_local)\n",
                 rank, rank, size());
    std::abort();
  }
  return *devices_[rank];
}

GroupImpl::~GroupImpl() = default;

GroupImpl::Placement GroupImpl::place(int64_t rounded) const {
  for (const auto& [offset, bytes] : free_) {
    if (bytes >= rounded) return {offset, mapped_};
  }
  // Only the free range at the end of the mapped space can be extended.
  int64_t start = mapped_;
  if (!free_.empty()) {
    auto last = std::prev(free_.end());
    if (last->first + last->second == mapped_) start = last->first;
  }
  return {start, round_up(start + rounded, chunk_)};
}

absl::Status GroupImpl::agree(int64_t bytes, const Placement& p) {
  if (bootstrap_ == nullptr) return absl::OkStatus();
  struct Ask {
    int64_t bytes, offset, mapped;
  };
  TESSEL_ASSIGN_OR_RETURN(std::vector<Ask> all, gather(*bootstrap_, Ask{bytes, p.offset, p.mapped}, "Group::allocate"));
  for (int r = 1; r < size(); ++r) {
    if (all[r].bytes != all[0].bytes || all[r].offset != all[0].offset || all[r].mapped != all[0].mapped) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Group::allocate: rank 0 asks for ", all[0].bytes, " bytes at offset ", all[0].offset, " but rank ", r,
          " for ", all[r].bytes, " at offset ", all[r].offset,
          "; in a group joined across processes every process allocates and frees the same sizes in the same "
          "order"));
    }
  }
  return absl::OkStatus();
}

absl::Status GroupImpl::take(int64_t rounded, const Placement& p) {
  if (p.mapped > mapped_) {
    int64_t reserved = round_up(options_.reserve_bytes, chunk_);
    if (p.mapped > reserved) {
      return absl::ResourceExhaustedError(absl::StrCat("symmetric allocation: ", p.offset + rounded,
                                                       " bytes would pass the group's reserved ", reserved,
                                                       " bytes per rank (GroupOptions::reserve_bytes)"));
    }
    TESSEL_RETURN_IF_ERROR(backend_->map(mapped_, p.mapped - mapped_));
    // The new chunks join a free range ending where they start.
    int64_t start = mapped_, bytes = p.mapped - mapped_;
    mapped_ = p.mapped;
    auto last = free_.empty() ? free_.end() : std::prev(free_.end());
    if (last != free_.end() && last->first + last->second == start) {
      last->second += bytes;
    } else {
      free_[start] = bytes;
    }
  }
  auto fit = free_.find(p.offset);
  TESSEL_CHECK(fit != free_.end() && fit->second >= rounded, "symmetric allocation: placed outside a free range");
  int64_t left = fit->second - rounded;
  free_.erase(fit);
  if (left > 0) free_[p.offset + rounded] = left;
  return absl::OkStatus();
}

absl::StatusOr<SymmetricBuffer> GroupImpl::allocate(int64_t bytes) {
  int64_t rounded = round_up(std::max<int64_t>(bytes, 1), kAlignment);
  int64_t offset = -1;
  {
    absl::MutexLock lock(&mu_);
    Placement p = place(rounded);
    // Every process of a joined group asks alike (or all fail) before any
    // maps memory, which is collective.
    TESSEL_RETURN_IF_ERROR(agree(bytes, p));
    if (bytes <= 0) return absl::InvalidArgumentError("Group::allocate: 0 bytes requested");
    TESSEL_RETURN_IF_ERROR(take(rounded, p));
    offset = p.offset;
  }
  auto block = std::make_shared<SymmetricBlock>();
  block->group = shared_from_this();
  block->offset = offset;
  block->bytes = bytes;
  for (int r = 0; r < size(); ++r) {
    TESSEL_RETURN_IF_ERROR(backend_->zero(r, reinterpret_cast<void*>(bases_[r] + offset), bytes));
  }
  // No peer's copy chain may write into the block before its owner has zeroed it.
  if (bootstrap_ != nullptr) TESSEL_RETURN_IF_ERROR(prefixed("Group::allocate", bootstrap_->barrier()));
  return SymmetricBuffer(std::move(block));
}

void GroupImpl::free(int64_t offset, int64_t bytes) {
  int64_t size = round_up(bytes, kAlignment);
  absl::MutexLock lock(&mu_);
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + size == next->first) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += size;
      return;
    }
  }
  free_[offset] = size;
}

int64_t GroupImpl::mapped_bytes() const {
  absl::MutexLock lock(&mu_);
  return mapped_;
}

bool GroupImpl::contains(int rank, uintptr_t p, int64_t bytes) const {
  absl::MutexLock lock(&mu_);
  return p >= bases_[rank] && bytes >= 0 && p + bytes <= bases_[rank] + static_cast<uintptr_t>(mapped_);
}

absl::Status GroupImpl::copy_to_peer(int rank, int peer, void* dst, const void* src, size_t bytes) {
  auto where = [&] { return absl::StrCat("Group::copy_to_peer(", rank, " -> ", peer, ")"); };
  if (rank < 0 || rank >= size() || peer < 0 || peer >= size() || rank == peer) {
    return absl::InvalidArgumentError(absl::StrCat(where(), ": ranks must differ and lie in [0, ", size(), ")"));
  }
  if (!is_local(rank)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where(), ": rank ", rank, " is in another process; copy from there"));
  }
  if (!contains(rank, reinterpret_cast<uintptr_t>(src), bytes) ||
      !contains(peer, reinterpret_cast<uintptr_t>(dst), bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where(), ": source and destination must lie in the group's symmetric allocation"));
  }
  {
    absl::MutexLock lock(&plans_mu_);
    for (PlanImpl* plan : queued_plans_) {
      if (plan_uses_queue(*plan, rank, peer)) {
        return absl::FailedPreconditionError(absl::StrCat(
            where(), ": plan '", plan_name(*plan), "' has chains armed on this queue; the copy would wait behind "
            "its gates. End, abort or destroy the plan first"));
      }
    }
  }
  return backend_->copy(rank, peer, dst, src, bytes);
}

// --- Handles

int64_t SymmetricBuffer::offset() const { return block_ ? block_->offset : 0; }
size_t SymmetricBuffer::bytes() const { return block_ ? static_cast<size_t>(block_->bytes) : 0; }
const GroupImpl* SymmetricBuffer::group() const { return block_ ? block_->group.get() : nullptr; }

void* SymmetricBuffer::data(int rank) const {
  if (!block_ || rank < 0 || rank >= block_->group->size()) return nullptr;
  return reinterpret_cast<void*>(block_->group->base(rank) + block_->offset);
}

namespace {

absl::Status check_range(const char* what, const std::shared_ptr<SymmetricBlock>& block, int rank, size_t bytes,
                         size_t offset) {
  if (!block) return absl::FailedPreconditionError(absl::StrCat("SymmetricBuffer::", what, ": empty buffer"));
  if (rank < 0 || rank >= block->group->size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("SymmetricBuffer::", what, ": rank ", rank, " is not in [0, ", block->group->size(), ")"));
  }
  if (!block->group->is_local(rank)) {
    return absl::InvalidArgumentError(absl::StrCat("SymmetricBuffer::", what, ": rank ", rank,
                                                   " is in another process; its own process reads and writes it"));
  }
  if (offset > static_cast<size_t>(block->bytes) || bytes > static_cast<size_t>(block->bytes) - offset) {
    return absl::OutOfRangeError(absl::StrCat("SymmetricBuffer::", what, ": ", bytes, " bytes at offset ", offset,
                                              " pass the buffer's ", block->bytes, " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SymmetricBuffer::write(int rank, const void* src, size_t bytes, size_t offset) const {
  TESSEL_RETURN_IF_ERROR(check_range("write", block_, rank, bytes, offset));
  return block_->group->device(rank).impl().copy_to_device(static_cast<char*>(data(rank)) + offset, src, bytes);
}

absl::Status SymmetricBuffer::read(int rank, void* dst, size_t bytes, size_t offset) const {
  TESSEL_RETURN_IF_ERROR(check_range("read", block_, rank, bytes, offset));
  return block_->group->device(rank).impl().copy_to_host(dst, static_cast<const char*>(data(rank)) + offset, bytes);
}

absl::StatusOr<Group> Group::create(std::vector<Device> devices, const GroupOptions& options) {
  TESSEL_ASSIGN_OR_RETURN(std::shared_ptr<GroupImpl> impl, GroupImpl::create(std::move(devices), options));
  return Group(std::move(impl));
}

absl::StatusOr<Group> Group::host(int ranks, int threads, const GroupOptions& options) {
  if (ranks < 1 || ranks > 64) return absl::InvalidArgumentError(absl::StrCat("Group::host: ", ranks, " ranks; 1 to 64"));
  std::vector<Device> devices;
  for (int r = 0; r < ranks; ++r) {
    TESSEL_ASSIGN_OR_RETURN(Device d, Device::open(absl::StrCat("host:", threads)));
    devices.push_back(std::move(d));
  }
  return create(std::move(devices), options);
}

absl::StatusOr<Group> Group::join(Device device, std::shared_ptr<Bootstrap> bootstrap, const GroupOptions& options) {
  TESSEL_ASSIGN_OR_RETURN(std::shared_ptr<GroupImpl> impl,
                          GroupImpl::join(std::move(device), std::move(bootstrap), options));
  return Group(std::move(impl));
}

int Group::size() const { return impl_->size(); }
bool Group::is_local(int rank) const { return rank >= 0 && rank < impl_->size() && impl_->is_local(rank); }
int Group::rank() const { return impl_->rank(); }
const Device& Group::device(int rank) const { return impl_->device(rank); }
absl::StatusOr<SymmetricBuffer> Group::allocate(size_t bytes) const {
  return impl_->allocate(static_cast<int64_t>(bytes));
}
int64_t Group::mapped_bytes() const { return impl_->mapped_bytes(); }
absl::Status Group::copy_to_peer(int rank, int peer, void* dst, const void* src, size_t bytes) const {
  return impl_->copy_to_peer(rank, peer, dst, src, bytes);
}

}  // namespace tessel
