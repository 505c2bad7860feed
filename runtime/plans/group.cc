#include "runtime/plans/group.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "runtime/backend.h"
#include "runtime/device_impl.h"
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

}  // namespace

SymmetricBlock::~SymmetricBlock() { group->free(offset, bytes); }

absl::StatusOr<std::shared_ptr<GroupImpl>> GroupImpl::create(std::vector<Device> devices,
                                                             const GroupOptions& options) {
  TESSEL_RETURN_IF_ERROR(check_devices(devices));
  if (options.reserve_bytes <= 0 || options.chunk_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("Group::create: reserve_bytes (", options.reserve_bytes,
                                                   ") and chunk_bytes (", options.chunk_bytes, ") must be > 0"));
  }
  const Backend* kind = find_backend(devices[0].name());
  if (kind == nullptr || kind->make_group == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("Group::create: ", devices[0].name(), " has no triggered-plan groups (its backend offers none)"));
  }
  TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<GroupBackend> backend, kind->make_group(devices));
  std::shared_ptr<GroupImpl> group(new GroupImpl(std::move(devices), options, std::move(backend)));
  group->chunk_ = round_up(options.chunk_bytes, group->backend_->granularity());
  int64_t reserve = round_up(options.reserve_bytes, group->chunk_);
  TESSEL_ASSIGN_OR_RETURN(group->bases_, group->backend_->reserve(reserve));
  return group;
}

GroupImpl::~GroupImpl() = default;

absl::Status GroupImpl::grow(int64_t at_least) {
  int64_t reserved = round_up(options_.reserve_bytes, chunk_);
  int64_t target = round_up(at_least, chunk_);
  if (target > reserved) {
    return absl::ResourceExhaustedError(absl::StrCat("symmetric allocation: ", at_least,
                                                     " bytes would pass the group's reserved ", reserved,
                                                     " bytes per rank (GroupOptions::reserve_bytes)"));
  }
  TESSEL_RETURN_IF_ERROR(backend_->map(mapped_, target - mapped_));
  int64_t start = mapped_, bytes = target - mapped_;
  mapped_ = target;
  // Merge with a free range ending where the new chunks start.
  if (!free_.empty()) {
    auto last = std::prev(free_.end());
    if (last->first + last->second == start) {
      last->second += bytes;
      return absl::OkStatus();
    }
  }
  free_[start] = bytes;
  return absl::OkStatus();
}

absl::StatusOr<SymmetricBuffer> GroupImpl::allocate(int64_t bytes) {
  if (bytes <= 0) return absl::InvalidArgumentError("Group::allocate: 0 bytes requested");
  int64_t rounded = round_up(bytes, kAlignment);
  int64_t offset = -1;
  {
    absl::MutexLock lock(&mu_);
    auto fit = std::find_if(free_.begin(), free_.end(), [&](const auto& range) { return range.second >= rounded; });
    if (fit == free_.end()) {
      // Only the free range at the end of the mapped space can be extended.
      int64_t tail = 0;
      if (!free_.empty()) {
        auto last = std::prev(free_.end());
        if (last->first + last->second == mapped_) tail = last->second;
      }
      TESSEL_RETURN_IF_ERROR(grow(mapped_ - tail + rounded));
      fit = std::prev(free_.end());
    }
    offset = fit->first;
    int64_t left = fit->second - rounded;
    free_.erase(fit);
    if (left > 0) free_[offset + rounded] = left;
  }
  auto block = std::make_shared<SymmetricBlock>();
  block->group = shared_from_this();
  block->offset = offset;
  block->bytes = bytes;
  for (int r = 0; r < size(); ++r) {
    TESSEL_RETURN_IF_ERROR(backend_->zero(r, reinterpret_cast<void*>(bases_[r] + offset), bytes));
  }
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

int Group::size() const { return impl_->size(); }
const Device& Group::device(int rank) const { return impl_->device(rank); }
absl::StatusOr<SymmetricBuffer> Group::allocate(size_t bytes) const {
  return impl_->allocate(static_cast<int64_t>(bytes));
}
int64_t Group::mapped_bytes() const { return impl_->mapped_bytes(); }
absl::Status Group::copy_to_peer(int rank, int peer, void* dst, const void* src, size_t bytes) const {
  return impl_->copy_to_peer(rank, peer, dst, src, bytes);
}

}  // namespace tessel
