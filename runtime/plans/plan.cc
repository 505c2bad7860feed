#include "runtime/plans/plan.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "base/status.h"
#include "runtime/device_impl.h"
#include "runtime/plans/exchange.h"
#include "runtime/plans/group_impl.h"

namespace tessel {

absl::string_view state_name(PlanState state) {
  switch (state) {
    case PlanState::kArmed: return "armed";
    case PlanState::kActive: return "active";
    case PlanState::kComplete: return "complete";
    case PlanState::kFailed: return "failed";
    case PlanState::kAborted: return "aborted";
    case PlanState::kDestroyed: return "destroyed";
  }
  return "?";
}

namespace {

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// Where a rank's control block keeps gates, view header and batch table.
struct ControlLayout {
  explicit ControlLayout(int64_t batches)
      : header(round_up(batches * int64_t{sizeof(GateRow)}, 64)),
        table(header + round_up(sizeof(ViewHeader), 64)),
        bytes(table + std::max<int64_t>(batches, 1) * int64_t{sizeof(ViewBatch)}) {}
  int64_t header;
  int64_t table;
  int64_t bytes;
};

// Polls before a kernel's wait gives up, about 10 s: a host poll is a few ns,
// a GPU poll of system-scope memory about half a microsecond.
uint64_t default_spin_limit(DeviceKind kind) { return kind == DeviceKind::kHost ? uint64_t{1} << 31 : uint64_t{1} << 24; }

// Appends `c`, joined with the previous copy where it continues it: tiles
// side by side in one band of rows become one wider 2-D copy, a 2-D copy as
// wide as its pitch becomes linear, and abutting linear copies join (up to
// `max_linear`). A wave of tiles then costs a few copies instead of one per
// tile: fewer commands queued behind each gate, and longer copies.
void append_copy(std::vector<ChainCopy>& copies, ChainCopy c, int64_t max_linear) {
  auto linear = [](ChainCopy& x) {
    if (x.height > 1 && x.width == x.src_pitch && x.width == x.dst_pitch) {
      x.width *= x.height;
      x.height = 1;
    }
  };
  linear(c);
  if (!copies.empty()) {
    ChainCopy& last = copies.back();
    bool follows = last.src + last.width == c.src && last.dst + last.width == c.dst;
    if (follows && last.height == 1 && c.height == 1 && last.width <= max_linear - c.width) {
      last.width += c.width;
      return;
    }
    if (follows && last.height > 1 && c.height == last.height && c.src_pitch == last.src_pitch &&
        c.dst_pitch == last.dst_pitch && last.width + c.width <= last.src_pitch) {
      last.width += c.width;
      linear(last);
      if (last.height == 1 && copies.size() >= 2) {
        ChainCopy joined = last;
        copies.pop_back();
        append_copy(copies, joined, max_linear);
      }
      return;
    }
  }
  copies.push_back(c);
}

// One armed epoch's chains, counted on the devices of the ranks that own
// batches while they live: no code may load on a device with armed chains
// (on a GPU it could wait forever behind their stream waits), so compiling
// there fails and launches use loaded variants. The rule is the same on
// every backend, so the host suites catch what would hang a GPU.
class ArmedChains {
 public:
  ArmedChains(std::unique_ptr<ArmedEpoch> chains, std::vector<DeviceImpl*> owners)
      : chains_(std::move(chains)), owners_(std::move(owners)) {
    for (DeviceImpl* d : owners_) d->add_armed(1);
  }
  ~ArmedChains() {
    for (DeviceImpl* d : owners_) d->add_armed(-1);
  }
  ArmedChains(const ArmedChains&) = delete;
  ArmedChains& operator=(const ArmedChains&) = delete;
  ArmedEpoch& chains() const { return *chains_; }

 private:
  std::unique_ptr<ArmedEpoch> chains_;
  std::vector<DeviceImpl*> owners_;
};

}  // namespace

class PlanImpl {
 public:
  PlanImpl(std::shared_ptr<GroupImpl> group, SymmetricBuffer buffer, Schedule schedule, PlanOptions options)
      : group_(std::move(group)), buffer_(std::move(buffer)), schedule_(std::move(schedule)),
        options_(std::move(options)), layout_(schedule_.num_batches()), epoch_(options_.first_epoch) {}
  ~PlanImpl();

  absl::Status init();
  absl::StatusOr<std::vector<ViewHeader*>> begin();
  absl::Status end();
  absl::Status next();
  absl::Status publish(int rank, int i);
  absl::Status run();
  absl::Status abort();
  absl::Status destroy();

  PlanState state() const {
    absl::MutexLock lock(&group_->plans_mu());
    return state_;
  }
  uint64_t epoch() const { return epoch_.load(std::memory_order_relaxed); }
  const Schedule& schedule() const { return schedule_; }
  const std::string& name() const { return options_.name; }
  bool uses_queue(int rank, int peer) const { return !schedule_.batches(rank).empty() && rank != peer; }

 private:
  GateRow* gates(int rank) const { return control_.as<GateRow>(rank); }
  ViewHeader* header(int rank) const {
    return reinterpret_cast<ViewHeader*>(control_.as<char>(rank) + layout_.header);
  }
  std::string where() const { return absl::StrCat("plan '", options_.name, "' (epoch ", epoch_.load(), ")"); }
  absl::Status wrong_state(absl::string_view call) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(group_->plans_mu());
  // OK in state `want`, else wrong_state(call).
  absl::Status require(PlanState want, absl::string_view call) const {
    absl::MutexLock lock(&group_->plans_mu());
    return state_ == want ? absl::OkStatus() : wrong_state(call);
  }
  // Refuses `call` while a plan armed earlier on the same queues has chains
  // that would hold this one's back: it has not begun, or it failed and its
  // chains are still queued.
  absl::Status check_order(absl::string_view call) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(group_->plans_mu());

  // The batches of this process's ranks as chains deliver them, in arming
  // order, with epoch 0: the same every epoch, since peer addresses never move.
  std::vector<ArmedBatch> deliveries() const;
  // In a joined group, whether every batch of a rank in another process has
  // reached this process's rank this epoch.
  absl::StatusOr<bool> arrived() const;
  // Arms `epoch`'s chains.
  absl::StatusOr<std::unique_ptr<ArmedChains>> arm_chains(uint64_t epoch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(op_mu_);
  absl::Status arm() ABSL_EXCLUSIVE_LOCKS_REQUIRED(op_mu_);
  // With arm_ahead, arms the next epoch into ahead_ where it may (best
  // effort: next() arms, and reports errors, where this did not).
  void arm_next_ahead() ABSL_EXCLUSIVE_LOCKS_REQUIRED(op_mu_);
  // Activates the armed epoch. With `for_kernels`, first stores its number
  // in every rank's view header, where kernels launched afterwards read it
  // (run() launches none).
  absl::Status begin_locked(bool for_kernels) ABSL_EXCLUSIVE_LOCKS_REQUIRED(op_mu_);
  absl::Status end_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(op_mu_);
  absl::Status open_locked(int rank, int i) ABSL_EXCLUSIVE_LOCKS_REQUIRED(op_mu_);
  // Waits until `chains` finish, and with `incoming` until arrived(); false
  // once `timeout` has passed since the first poll.
  absl::StatusOr<bool> drain(ArmedChains& chains, absl::Duration timeout, bool incoming)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(op_mu_);
  // Whether a kernel on any rank raised its view's alarm (recorded an error).
  bool alarmed() const {
    for (int r = 0; r < group_->size(); ++r) {
      if (std::atomic_ref<uint64_t>(alarms_[r]).load(std::memory_order_acquire) != 0) return true;
    }
    return false;
  }
  // Reads every rank's gate rows and view header: what failed, or OK.
  absl::Status check_gates(bool delivered) ABSL_EXCLUSIVE_LOCKS_REQUIRED(op_mu_);
  // Releases and drains the armed chains, leaving the queues to other plans.
  absl::Status release(bool in_order, absl::string_view call) ABSL_EXCLUSIVE_LOCKS_REQUIRED(op_mu_);
  void set_state(PlanState s) {
    absl::MutexLock lock(&group_->plans_mu());
    state_ = s;
  }

  const std::shared_ptr<GroupImpl> group_;
  SymmetricBuffer buffer_;
  const Schedule schedule_;
  const PlanOptions options_;
  const ControlLayout layout_;

  // deliveries(), made once: a wave's tiles cost a pass over thousands of
  // segments, which arming each epoch would repeat.
  std::vector<ArmedBatch> armed_batches_;
  // Gate numbers of the batches owned by ranks in other processes (joined groups).
  std::vector<int64_t> incoming_;
  mutable absl::Mutex op_mu_;  // one call at a time
  std::atomic<uint64_t> epoch_;  // changed under op_mu_, read by epoch() at any time
  SymmetricBuffer control_;
  uint64_t* alarms_ = nullptr;  // one per rank, in host memory (ViewHeader::alarm)
  std::unique_ptr<ArmedChains> armed_ ABSL_GUARDED_BY(op_mu_);
  std::unique_ptr<ArmedChains> ahead_ ABSL_GUARDED_BY(op_mu_);  // the next epoch's, armed by end (arm_ahead)
  PlanState state_ ABSL_GUARDED_BY(group_->plans_mu()) = PlanState::kArmed;
  bool armed_ahead_ ABSL_GUARDED_BY(group_->plans_mu()) = false;  // ahead_ is set
};

bool plan_uses_queue(const PlanImpl& plan, int rank, int peer) { return plan.uses_queue(rank, peer); }
const std::string& plan_name(const PlanImpl& plan) { return plan.name(); }

absl::Status PlanImpl::init() {
  int world = group_->size();
  TESSEL_ASSIGN_OR_RETURN(control_, group_->allocate(layout_.bytes));
  TESSEL_ASSIGN_OR_RETURN(alarms_, group_->backend().host_words(world));
  uint64_t spin = options_.spin_limit != 0 ? options_.spin_limit : default_spin_limit(group_->kind());
  std::vector<ViewBatch> table;
  for (int r = 0; r < world; ++r) {
    for (const Batch& b : schedule_.batches(r)) table.push_back({static_cast<uint32_t>(r), static_cast<uint32_t>(b.contributors)});
  }
  for (int r = 0; r < world; ++r) {
    if (!group_->is_local(r)) continue;
    ViewHeader h{kViewVersion,
                 static_cast<uint32_t>(table.size()),
                 static_cast<uint32_t>(r),
                 static_cast<uint32_t>(world),
                 epoch_.load(),
                 spin,
                 gates(r),
                 reinterpret_cast<ViewBatch*>(control_.as<char>(r) + layout_.table),
                 0,
                 alarms_ + r,
                 0};
    TESSEL_RETURN_IF_ERROR(control_.write(r, &h, sizeof(h), layout_.header));
    if (!table.empty()) {
      TESSEL_RETURN_IF_ERROR(control_.write(r, table.data(), table.size() * sizeof(ViewBatch), layout_.table));
    }
  }
  armed_batches_ = deliveries();
  for (int r = 0; r < world; ++r) {
    for (size_t i = 0; i < schedule_.batches(r).size() && !group_->is_local(r); ++i) {
      incoming_.push_back(*batch_id(schedule_, r, static_cast<int>(i)));
    }
  }
  absl::MutexLock op(&op_mu_);
  return arm();
}

std::vector<ArmedBatch> PlanImpl::deliveries() const {
  int world = group_->size();
  std::vector<ArmedBatch> batches;
  for (int r = 0; r < world; ++r) {
    for (size_t i = 0; i < schedule_.batches(r).size() && group_->is_local(r); ++i) {
      int64_t g = *batch_id(schedule_, r, static_cast<int>(i));
      ArmedBatch a;
      a.owner = r;
      a.ready = &gates(r)[g].ready;
      a.completion = &gates(r)[g].completion;
      for (int p = 0; p < world; ++p) {
        if (p == r) continue;
        ArmedBatch::Delivery d;
        d.peer = p;
        d.arrival = &gates(p)[g].arrival;
        for (const Segment& s : schedule_.batches(r)[i].segments) {
          uintptr_t at = schedule_.shard_offset(r) + s.offset;
          uintptr_t src = reinterpret_cast<uintptr_t>(buffer_.data(r)) + at;
          uintptr_t dst = reinterpret_cast<uintptr_t>(buffer_.data(p)) + at;
          int64_t pitch = s.is_linear() ? s.width : s.pitch;
          append_copy(d.copies, {src, dst, s.width, s.height, pitch, pitch}, group_->backend().max_linear_copy());
        }
        a.deliveries.push_back(std::move(d));
      }
      batches.push_back(std::move(a));
    }
  }
  return batches;
}

absl::StatusOr<std::unique_ptr<ArmedChains>> PlanImpl::arm_chains(uint64_t epoch) {
  int world = group_->size();
  std::vector<ArmedBatch> batches = armed_batches_;
  for (ArmedBatch& b : batches) b.epoch = epoch;
  TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<ArmedEpoch> chains, group_->backend().arm(std::move(batches)));
  std::vector<DeviceImpl*> owners;
  for (int r = 0; r < world; ++r) {
    if (group_->is_local(r) && !schedule_.batches(r).empty()) owners.push_back(&group_->device(r).impl());
  }
  return std::make_unique<ArmedChains>(std::move(chains), std::move(owners));
}

absl::Status PlanImpl::arm() {
  TESSEL_ASSIGN_OR_RETURN(armed_, arm_chains(epoch_));
  absl::MutexLock lock(&group_->plans_mu());
  state_ = PlanState::kArmed;
  group_->queued_plans().push_back(this);
  return absl::OkStatus();
}

void PlanImpl::arm_next_ahead() {
  if (!options_.arm_ahead || epoch_ >= kMaxEpoch) return;
  {
    // Its chains queue behind every plan's armed so far: only as the last
    // of them does this plan's place in the order stay right.
    absl::MutexLock lock(&group_->plans_mu());
    if (group_->queued_plans().empty() || group_->queued_plans().back() != this) return;
  }
  absl::StatusOr<std::unique_ptr<ArmedChains>> ahead = arm_chains(epoch_ + 1);
  if (!ahead.ok()) return;
  ahead_ = *std::move(ahead);
  absl::MutexLock lock(&group_->plans_mu());
  armed_ahead_ = true;
}

absl::Status PlanImpl::wrong_state(absl::string_view call) const {
  std::string why;
  switch (state_) {
    case PlanState::kArmed: why = "no epoch has begun (call begin_device_epoch() first)"; break;
    case PlanState::kActive: why = "its epoch is active (call end_device_epoch() first)"; break;
    case PlanState::kComplete: why = "its epoch is complete (call next_epoch() to arm the next)"; break;
    case PlanState::kFailed: why = "it failed (abort() or destroy() it)"; break;
    case PlanState::kAborted: why = "it was aborted"; break;
    case PlanState::kDestroyed: why = "it was destroyed"; break;
  }
  return absl::FailedPreconditionError(absl::StrCat(where(), ": cannot ", call, ": ", why));
}

absl::Status PlanImpl::check_order(absl::string_view call) const {
  for (const PlanImpl* p : group_->queued_plans()) {
    if (p == this) break;
    if (p->armed_ahead_) {
      return absl::FailedPreconditionError(absl::StrCat(
          where(), ": cannot ", call, " before plan '", p->name(), "', which armed its next epoch ahead on the same "
          "copy queues (arm_ahead); begin that epoch, or abort that plan, first"));
    }
    if (p->state_ == PlanState::kArmed) {
      return absl::FailedPreconditionError(absl::StrCat(
          where(), ": cannot ", call, " before plan '", p->name(), "', which was armed earlier on the same copy "
          "queues and has not begun (chains run in arming order: begin and abort plans in the order they were "
          "armed)"));
    }
    if (p->state_ == PlanState::kFailed) {
      return absl::FailedPreconditionError(absl::StrCat(
          where(), ": cannot ", call, " while plan '", p->name(), "', armed earlier on the same copy queues, has "
          "failed with its chains still queued ahead of this plan's; abort it first"));
    }
  }
  return absl::OkStatus();
}

absl::Status PlanImpl::begin_locked(bool for_kernels) {
  {
    absl::MutexLock lock(&group_->plans_mu());
    if (state_ != PlanState::kArmed) return wrong_state("begin an epoch");
    TESSEL_RETURN_IF_ERROR(check_order("begin"));
  }
  for (int r = 0; r < group_->size() && for_kernels; ++r) {
    if (!group_->is_local(r)) continue;
    uint64_t e = epoch_;
    TESSEL_RETURN_IF_ERROR(control_.write(r, &e, sizeof(e), layout_.header + offsetof(ViewHeader, epoch)));
  }
  set_state(PlanState::kActive);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ViewHeader*>> PlanImpl::begin() {
  absl::MutexLock op(&op_mu_);
  TESSEL_RETURN_IF_ERROR(begin_locked(/*for_kernels=*/true));
  std::vector<ViewHeader*> views;
  for (int r = 0; r < group_->size(); ++r) views.push_back(group_->is_local(r) ? header(r) : nullptr);
  return views;
}

absl::StatusOr<bool> PlanImpl::arrived() const {
  if (incoming_.empty()) return true;
  std::vector<GateRow> rows(schedule_.num_batches());
  TESSEL_RETURN_IF_ERROR(control_.read(group_->rank(), rows.data(), rows.size() * sizeof(GateRow), 0));
  for (int64_t g : incoming_) {
    if (!gate_open(rows[g].arrival, epoch_)) return false;
  }
  return true;
}

absl::StatusOr<bool> PlanImpl::drain(ArmedChains& chains, absl::Duration timeout, bool incoming) {
  // Chains that are done cost one poll and no clock read. Otherwise yield
  // between polls for the first 10 ms, so a transfer is seen within a
  // microsecond or two of its end; then sleep between them.
  using Clock = std::chrono::steady_clock;
  const Clock::duration limit = absl::ToChronoNanoseconds(timeout);
  Clock::time_point start;
  for (bool first = true;; first = false) {
    TESSEL_ASSIGN_OR_RETURN(bool done, chains.chains().done());
    if (done && incoming) {
      TESSEL_ASSIGN_OR_RETURN(done, arrived());
    }
    if (done) return true;
    const Clock::time_point now = Clock::now();
    if (first) start = now;
    if (now - start >= limit) return false;
    if (now - start < std::chrono::milliseconds(10)) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

absl::Status PlanImpl::check_gates(bool delivered) {
  int world = group_->size();
  int64_t n = schedule_.num_batches();
  auto local = [&](int r) { return group_->is_local(r); };
  // Gate rows and the view header lie together: one read per rank here.
  std::vector<std::vector<GateRow>> rows(world);
  std::vector<ViewHeader> headers(world);
  std::vector<char> block(layout_.header + sizeof(ViewHeader));
  for (int r = 0; r < world; ++r) {
    if (!local(r)) continue;
    TESSEL_RETURN_IF_ERROR(control_.read(r, block.data(), block.size(), 0));
    rows[r].resize(n);
    std::memcpy(rows[r].data(), block.data(), n * sizeof(GateRow));
    std::memcpy(&headers[r], block.data() + layout_.header, sizeof(ViewHeader));
  }
  const uint64_t epoch = epoch_;
  auto open = [&](uint64_t word) { return gate_open(word, epoch); };
  std::vector<std::string> problems;
  for (int r = 0; r < world; ++r) {
    if (local(r) && headers[r].status == kViewBadBatch) {
      problems.push_back(absl::StrCat("a kernel on rank ", r, " named a batch the plan does not have (it has ", n, ")"));
    }
  }
  for (int r = 0; r < world && problems.size() < 4; ++r) {
    for (size_t i = 0; i < schedule_.batches(r).size(); ++i) {
      int64_t g = *batch_id(schedule_, r, static_cast<int>(i));
      const Batch& b = schedule_.batches(r)[i];
      const std::string batch = absl::StrCat("batch ", g, " (rank ", r, "'s #", i, ")");
      for (int p = 0; p < world; ++p) {
        if (local(p) && rows[p][g].error == kGateTimeout) {
          problems.push_back(absl::StrCat("a kernel on rank ", p, " gave up waiting for batch ", g));
        }
      }
      if (delivered) continue;
      if (!local(r)) {
        for (int p = 0; p < world; ++p) {
          if (local(p) && !open(rows[p][g].arrival)) {
            problems.push_back(absl::StrCat(batch, " did not reach rank ", p, " (rank ", r,
                                            " is in another process, whose plan says why)"));
          }
        }
        continue;
      }
      if (!open(rows[r][g].ready)) {
        const std::string never = absl::StrCat(batch, " was never opened: ");
        if (headers[r].carry == carry_tag(epoch, g)) {
          problems.push_back(absl::StrCat(never,
                                          "its last contributor deferred the release and no later publish or "
                                          "wait on rank ",
                                          r,
                                          " carried it (a program that publishes with defer "
                                          "must publish again)"));
        } else {
          problems.push_back(absl::StrCat(never, rows[r][g].counter % b.contributors, " of ", b.contributors,
                                          " contributors published this epoch"));
        }
        continue;
      }
      bool remote_peers = false;
      for (int p = 0; p < world; ++p) {
        if (p == r) continue;
        if (!local(p)) {
          remote_peers = true;
        } else if (!open(rows[p][g].arrival)) {
          problems.push_back(absl::StrCat(batch, " did not reach rank ", p));
        }
      }
      if (remote_peers && !open(rows[r][g].completion)) {
        problems.push_back(absl::StrCat(batch, " did not reach every rank in other processes"));
      }
    }
  }
  if (problems.empty()) return absl::OkStatus();
  if (problems.size() > 4) problems.resize(4);
  // Delivered but reported by a kernel: the epoch's data cannot be trusted.
  return absl::Status(delivered ? absl::StatusCode::kAborted : absl::StatusCode::kDeadlineExceeded,
                      absl::StrCat(where(), ": ", absl::StrJoin(problems, "; ")));
}

absl::Status PlanImpl::end_locked() {
  TESSEL_RETURN_IF_ERROR(require(PlanState::kActive, "end an epoch"));
  arm_next_ahead();
  TESSEL_ASSIGN_OR_RETURN(bool done, drain(*armed_, options_.timeout, /*incoming=*/true));
  // Delivered with no alarm raised: nothing to read back from the devices.
  absl::Status gates = done && !alarmed() ? absl::OkStatus() : check_gates(done);
  if (!done && gates.ok()) {
    gates = absl::DeadlineExceededError(
        absl::StrCat(where(), ": chains did not finish within ", absl::FormatDuration(options_.timeout)));
  }
  absl::MutexLock lock(&group_->plans_mu());
  if (done && ahead_ == nullptr) group_->queued_plans().remove(this);
  if (done) armed_.reset();
  state_ = gates.ok() ? PlanState::kComplete : PlanState::kFailed;
  return gates;
}

absl::Status PlanImpl::end() {
  absl::MutexLock op(&op_mu_);
  return end_locked();
}

absl::Status PlanImpl::next() {
  absl::MutexLock op(&op_mu_);
  absl::Status ready = require(PlanState::kComplete, "arm the next epoch");
  if (ready.ok() && epoch_ >= kMaxEpoch) {
    ready = absl::OutOfRangeError(absl::StrCat(
        where(), ": epoch ", kMaxEpoch, " is the last a plan may run (gates compare 32 bits); create a new plan"));
  }
  // Across processes, no rank may publish the next epoch into a buffer that
  // a peer still reads: every process arrives here first.
  if (Bootstrap* boot = group_->bootstrap()) {
    TESSEL_RETURN_IF_ERROR(agree_ok(*boot, ready, absl::StrCat(where(), ": next_epoch")));
  }
  TESSEL_RETURN_IF_ERROR(ready);
  ++epoch_;
  if (ahead_ != nullptr) {
    armed_ = std::move(ahead_);
    absl::MutexLock lock(&group_->plans_mu());
    armed_ahead_ = false;
    state_ = PlanState::kArmed;
    return absl::OkStatus();
  }
  absl::Status armed = arm();
  if (!armed.ok()) --epoch_;  // still complete at the old epoch
  return armed;
}

absl::Status PlanImpl::publish(int rank, int i) {
  absl::MutexLock op(&op_mu_);
  TESSEL_RETURN_IF_ERROR(require(PlanState::kActive, "publish"));
  return open_locked(rank, i);
}

absl::Status PlanImpl::open_locked(int rank, int i) {
  absl::StatusOr<int64_t> g = batch_id(schedule_, rank, i);
  if (!g.ok()) return prefixed(absl::StrCat(where(), ": publish"), g.status());
  if (!group_->is_local(rank)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where(), ": publish: rank ", rank, " is in another process; its process publishes its batches"));
  }
  uint64_t* ready = &gates(rank)[*g].ready;
  return group_->backend().open_gates(rank, absl::MakeConstSpan(&ready, 1), epoch_);
}

absl::Status open_gates_by_owner(GroupBackend& backend, absl::Span<const ArmedBatch> batches, uint64_t epoch) {
  std::map<int, std::vector<uint64_t*>> readies;
  for (const ArmedBatch& b : batches) readies[b.owner].push_back(b.ready);
  for (const auto& [owner, words] : readies) TESSEL_RETURN_IF_ERROR(backend.open_gates(owner, words, epoch));
  return absl::OkStatus();
}

absl::Status PlanImpl::run() {
  absl::MutexLock op(&op_mu_);
  TESSEL_RETURN_IF_ERROR(begin_locked(/*for_kernels=*/false));
  TESSEL_RETURN_IF_ERROR(open_gates_by_owner(group_->backend(), armed_batches_, epoch_));
  return end_locked();
}

absl::Status PlanImpl::release(bool in_order, absl::string_view call) {
  if (armed_ == nullptr && ahead_ == nullptr) return absl::OkStatus();
  if (in_order) {
    absl::MutexLock lock(&group_->plans_mu());
    TESSEL_RETURN_IF_ERROR(check_order(call));
  }
  for (std::unique_ptr<ArmedChains>* chains : {&armed_, &ahead_}) {
    if (*chains != nullptr) TESSEL_RETURN_IF_ERROR((*chains)->chains().release());
  }
  for (std::unique_ptr<ArmedChains>* chains : {&armed_, &ahead_}) {
    if (*chains == nullptr) continue;
    TESSEL_ASSIGN_OR_RETURN(bool done, drain(**chains, options_.timeout, /*incoming=*/false));
    if (!done) {
      return absl::DeadlineExceededError(absl::StrCat(where(), ": released chains did not finish within ",
                                                      absl::FormatDuration(options_.timeout)));
    }
    chains->reset();
  }
  absl::MutexLock lock(&group_->plans_mu());
  armed_ahead_ = false;
  group_->queued_plans().remove(this);
  return absl::OkStatus();
}

absl::Status PlanImpl::abort() {
  absl::MutexLock op(&op_mu_);
  {
    absl::MutexLock lock(&group_->plans_mu());
    if (state_ == PlanState::kAborted || state_ == PlanState::kDestroyed) return wrong_state("abort");
  }
  TESSEL_RETURN_IF_ERROR(release(/*in_order=*/true, "abort"));
  set_state(PlanState::kAborted);
  return absl::OkStatus();
}

absl::Status PlanImpl::destroy() {
  absl::MutexLock op(&op_mu_);
  if (state() == PlanState::kDestroyed) return absl::OkStatus();
  TESSEL_RETURN_IF_ERROR(release(/*in_order=*/true, "destroy"));
  control_ = SymmetricBuffer();
  buffer_ = SymmetricBuffer();
  set_state(PlanState::kDestroyed);
  return absl::OkStatus();
}

PlanImpl::~PlanImpl() {
  absl::MutexLock op(&op_mu_);
  if (release(/*in_order=*/false, "destroy").ok()) return;
  // Chains still queued behind another plan's may yet write the gates: keep
  // them (and the chains' resources) for the life of the process rather
  // than let the memory be reused under them.
  absl::MutexLock lock(&group_->plans_mu());
  group_->queued_plans().remove(this);
  new SymmetricBuffer(std::move(control_));
  armed_.release();
  ahead_.release();
}

// --- Creation and the handle

namespace {

absl::Status check_plan(const std::string& where, const Group& group, const SymmetricBuffer& buffer,
                        const std::vector<Schedule>& schedules, const PlanOptions& options) {
  if (buffer.empty() || buffer.group() != &group.impl()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": the buffer is not in this group's symmetric allocation (allocate it with Group::allocate, whose "
        "peer addresses never move)"));
  }
  if (static_cast<int>(schedules.size()) != group.size()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", schedules.size(), " schedules for a group of ",
                                                   group.size(), " ranks; pass one per rank"));
  }
  absl::Status same = check_same(schedules);
  if (!same.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", same.message()));
  const Schedule& s = schedules[0];
  if (s.world_size() != group.size()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": the schedule has ", s.world_size(),
                                                   " ranks but the group ", group.size()));
  }
  absl::Status valid = validate(s);
  if (!valid.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", valid.message()));
  if (s.bytes() > static_cast<int64_t>(buffer.bytes())) {
    return absl::OutOfRangeError(absl::StrCat(where, ": the schedule spans ", s.bytes(), " bytes (", s.world_size(),
                                              " shards of ", s.shard_bytes(), ") but the buffer has ",
                                              buffer.bytes()));
  }
  if (options.first_epoch < 1 || options.first_epoch > kMaxEpoch) {
    return absl::OutOfRangeError(
        absl::StrCat(where, ": first_epoch ", options.first_epoch, " is not in [1, ", kMaxEpoch, "]"));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": the timeout must be positive"));
  }
  return absl::OkStatus();
}

// Across processes: every process checked its own arguments; all of them
// must hold the same schedule and start at the same epoch.
absl::Status agree_plan(Bootstrap& boot, const std::string& where, const absl::Status& valid, const Schedule& s,
                        const PlanOptions& options) {
  TESSEL_RETURN_IF_ERROR(agree_ok(boot, valid, where));
  struct Terms {
    uint64_t digest, first_epoch;
  };
  TESSEL_ASSIGN_OR_RETURN(std::vector<Terms> all, gather(boot, Terms{digest(s), options.first_epoch}, where));
  for (int r = 1; r < boot.size(); ++r) {
    if (all[r].digest != all[0].digest) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": rank ", r, "'s process holds another schedule than rank 0's (digest ",
                       absl::Hex(all[r].digest), " against ", absl::Hex(all[0].digest), ")"));
    }
    if (all[r].first_epoch != all[0].first_epoch) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": rank ", r, "'s process starts at epoch ",
                                                     all[r].first_epoch, " but rank 0's at ", all[0].first_epoch));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TriggeredPlan> TriggeredPlan::create(const Group& group, const SymmetricBuffer& buffer,
                                                    std::vector<Schedule> schedules, PlanOptions options) {
  std::string where = absl::StrCat("TriggeredPlan '", options.name, "'");
  absl::Status valid = check_plan(where, group, buffer, schedules, options);
  if (Bootstrap* boot = group.impl().bootstrap()) {
    TESSEL_RETURN_IF_ERROR(agree_plan(*boot, where, valid, valid.ok() ? schedules[0] : Schedule(), options));
  }
  TESSEL_RETURN_IF_ERROR(valid);
  auto impl = std::make_shared<PlanImpl>(group.shared_impl(), buffer, std::move(schedules[0]), std::move(options));
  TESSEL_RETURN_IF_ERROR(impl->init());
  return TriggeredPlan(std::move(impl));
}

PlanState TriggeredPlan::state() const { return impl_->state(); }
uint64_t TriggeredPlan::epoch() const { return impl_->epoch(); }
const Schedule& TriggeredPlan::schedule() const { return impl_->schedule(); }
const std::string& TriggeredPlan::name() const { return impl_->name(); }
absl::StatusOr<std::vector<ViewHeader*>> TriggeredPlan::begin_device_epoch() { return impl_->begin(); }
absl::Status TriggeredPlan::end_device_epoch() { return impl_->end(); }
absl::Status TriggeredPlan::next_epoch() { return impl_->next(); }
absl::Status TriggeredPlan::publish(int rank, int i) { return impl_->publish(rank, i); }
absl::Status TriggeredPlan::run() { return impl_->run(); }
absl::Status TriggeredPlan::abort() { return impl_->abort(); }
absl::Status TriggeredPlan::destroy() { return impl_->destroy(); }
absl::StatusOr<int64_t> TriggeredPlan::batch_id(int rank, int i) const {
  return tessel::batch_id(impl_->schedule(), rank, i);
}

}  // namespace tessel
