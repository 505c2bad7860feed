// Groups joined across processes: forked processes, one host rank each,
// share symmetric memory, run triggered plans whose chains carry batches
// into peers' processes, and refuse what every process must agree on.
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/faults.h"
#include "runtime/plans/group.h"
#include "runtime/plans/plan.h"
#include "samples/allgather.h"
#include "tests/multiprocess/join_cases.h"
#include "tests/multiprocess/ranks.h"

namespace tessel {
namespace {

using multiprocess::run_ranks;

const GroupOptions kOptions{.reserve_bytes = int64_t{1} << 30, .chunk_bytes = int64_t{1} << 20};

// Fails with `what` where `ok` is false.
absl::Status expect(bool ok, const std::string& what) { return ok ? absl::OkStatus() : absl::InternalError(what); }

// OK where `s` failed with `code` and a message containing `text`.
absl::Status expect_error(const absl::Status& s, absl::StatusCode code, absl::string_view text) {
  if (s.code() == code && absl::StrContains(s.message(), text)) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("expected ", absl::StatusCodeToString(code), " with '", text, "', got ", s.ToString()));
}

absl::StatusOr<Group> join_host(std::shared_ptr<Bootstrap> boot, const GroupOptions& options = kOptions) {
  absl::StatusOr<Device> d = Device::open("host:1");
  if (!d.ok()) return d.status();
  return Group::join(*d, std::move(boot), options);
}

TEST(Join, RanksShareSymmetricMemoryAndCopyToPeers) {
  std::string failures = run_ranks(3, [](std::shared_ptr<Bootstrap> boot) -> absl::Status {
    const int self = boot->rank();
    absl::StatusOr<Group> g = join_host(boot);
    if (!g.ok()) return g.status();
    TESSEL_RETURN_IF_ERROR(expect(g->size() == 3 && g->rank() == self, "size and rank"));
    for (int r = 0; r < 3; ++r) {
      TESSEL_RETURN_IF_ERROR(expect(g->is_local(r) == (r == self), absl::StrCat("is_local(", r, ")")));
    }
    // Past one chunk, so the memory grows while every process maps it.
    constexpr int kWords = 3 << 18;
    absl::StatusOr<SymmetricBuffer> small = g->allocate(64), buf = g->allocate(kWords * sizeof(uint32_t));
    if (!small.ok()) return small.status();
    if (!buf.ok()) return buf.status();
    std::vector<uint32_t> mine(kWords);
    for (int i = 0; i < kWords; ++i) mine[i] = self * 1000003u + i;
    TESSEL_RETURN_IF_ERROR(buf->write(self, mine.data(), mine.size() * sizeof(uint32_t)));
    TESSEL_RETURN_IF_ERROR(boot->barrier());
    // Every peer's copy is mapped here: its words read as it wrote them.
    for (int p = 0; p < 3; ++p) {
      for (int i = 0; i < kWords; i += 4099) {
        uint32_t want = p * 1000003u + i;
        TESSEL_RETURN_IF_ERROR(expect(buf->as<uint32_t>(p)[i] == want, absl::StrCat("rank ", p, "'s word ", i)));
      }
    }
    TESSEL_RETURN_IF_ERROR(boot->barrier());
    // Through the copy queue: rank r sends the first word of its small block
    // into the second of rank r + 1's.
    const int next = (self + 1) % 3, prev = (self + 2) % 3;
    uint64_t tag = 77 + self;
    TESSEL_RETURN_IF_ERROR(small->write(self, &tag, sizeof(tag)));
    TESSEL_RETURN_IF_ERROR(g->copy_to_peer(self, next, small->as<uint64_t>(next) + 1, small->data(self), sizeof(tag)));
    TESSEL_RETURN_IF_ERROR(boot->barrier());
    uint64_t got = 0;
    TESSEL_RETURN_IF_ERROR(small->read(self, &got, sizeof(got), sizeof(uint64_t)));
    return expect(got == 77u + prev, absl::StrCat("copied tag ", got));
  });
  EXPECT_EQ(failures, "");
}

TEST(Join, RunDeliversBatchesIntoEveryProcess) {
  std::string failures = run_ranks(3, [](std::shared_ptr<Bootstrap> boot) -> absl::Status {
    absl::StatusOr<Group> g = join_host(boot);
    if (!g.ok()) return g.status();
    absl::StatusOr<Schedule> s = waves({37, 29, 4, 0}, boot->size(), {8, 8}, 3);
    if (!s.ok()) return s.status();
    return multiprocess::deliver_epochs(*g, *boot, *s, 3);
  });
  EXPECT_EQ(failures, "");
}

// The sample's producers publish wave by wave and its checks wait for every
// batch: kernels in each process, chains into the others.
TEST(Join, KernelsPublishAndWaitAcrossProcesses) {
  std::string failures = run_ranks(3, [](std::shared_ptr<Bootstrap> boot) -> absl::Status {
    absl::StatusOr<Group> g = join_host(boot);
    if (!g.ok()) return g.status();
    auto ag = samples::AllGather::create(
        *g, {.rows = 70, .cols = 150, .programs = 3, .check_programs = 2, .waves_per_batch = 1});
    if (!ag.ok()) return ag.status();
    TESSEL_RETURN_IF_ERROR((*ag)->arm());
    for (int epoch = 1; epoch <= 4; ++epoch) {
      absl::StatusOr<int64_t> wrong = (*ag)->run_epoch();
      if (!wrong.ok()) return wrong.status();
      TESSEL_RETURN_IF_ERROR(expect(*wrong == 0, absl::StrCat(*wrong, " wrong elements in epoch ", epoch)));
      TESSEL_RETURN_IF_ERROR((*ag)->plan().next_epoch());
    }
    return (*ag)->disarm();
  });
  EXPECT_EQ(failures, "");
}

TEST(Join, AllocationsThatDifferFailOnEveryProcess) {
  std::string failures = run_ranks(2, [](std::shared_ptr<Bootstrap> boot) -> absl::Status {
    absl::StatusOr<Group> g = join_host(boot);
    if (!g.ok()) return g.status();
    absl::StatusOr<SymmetricBuffer> odd = g->allocate(boot->rank() == 0 ? 1024 : 4096);
    TESSEL_RETURN_IF_ERROR(expect_error(odd.status(), absl::StatusCode::kFailedPrecondition,
                                        "rank 0 asks for 1024 bytes at offset 0 but rank 1 for 4096"));
    // Freed in different orders, the free lists differ until both are gone.
    absl::StatusOr<SymmetricBuffer> a = g->allocate(256), b = g->allocate(256);
    if (!a.ok() || !b.ok()) return absl::InternalError("allocating two blocks");
    (boot->rank() == 0 ? a : b) = SymmetricBuffer();
    absl::StatusOr<SymmetricBuffer> early = g->allocate(256);
    TESSEL_RETURN_IF_ERROR(expect_error(early.status(), absl::StatusCode::kFailedPrecondition,
                                        "every process allocates and frees the same sizes in the same order"));
    (boot->rank() == 0 ? b : a) = SymmetricBuffer();
    absl::StatusOr<SymmetricBuffer> again = g->allocate(256);
    if (!again.ok()) return again.status();
    return expect(again->offset() == 0, "offsets agree once both blocks are free");
  });
  EXPECT_EQ(failures, "");
}

TEST(Join, OptionsAndPlansThatDifferFailOnEveryProcess) {
  std::string failures = run_ranks(2, [](std::shared_ptr<Bootstrap> boot) -> absl::Status {
    const int self = boot->rank();
    GroupOptions options = kOptions;
    if (self == 1) options.chunk_bytes *= 2;
    TESSEL_RETURN_IF_ERROR(expect_error(join_host(boot, options).status(), absl::StatusCode::kInvalidArgument,
                                        "rank 1's options (reserve_bytes"));
    // A bad option on one process fails every process's join.
    options = kOptions;
    if (self == 0) options.chunk_bytes = 0;
    absl::Status bad = join_host(boot, options).status();
    TESSEL_RETURN_IF_ERROR(self == 0 ? expect_error(bad, absl::StatusCode::kInvalidArgument, "must be > 0")
                                     : expect_error(bad, absl::StatusCode::kFailedPrecondition, "rank 0 failed"));
    absl::StatusOr<Group> g = join_host(boot);
    if (!g.ok()) return g.status();
    absl::StatusOr<SymmetricBuffer> buf = g->allocate(4096);
    if (!buf.ok()) return buf.status();
    // Each process holds its own schedule: here they differ.
    Schedule s = *chunks({8, 32, 4, 0}, 2, self == 0 ? 2 : 4);
    absl::Status differ = TriggeredPlan::create(*g, *buf, {s, s}).status();
    TESSEL_RETURN_IF_ERROR(
        expect_error(differ, absl::StatusCode::kInvalidArgument, "rank 1's process holds another schedule"));
    Schedule same = *chunks({8, 32, 4, 0}, 2, 2);
    absl::Status epochs = TriggeredPlan::create(*g, *buf, {same, same}, {.first_epoch = 1u + self}).status();
    TESSEL_RETURN_IF_ERROR(
        expect_error(epochs, absl::StatusCode::kInvalidArgument, "rank 1's process starts at epoch 2"));
    absl::StatusOr<TriggeredPlan> plan =
        TriggeredPlan::create(*g, *buf, {same, same}, {.timeout = absl::Milliseconds(300)});
    if (!plan.ok()) return plan.status();
    // A rank in another process is out of reach here.
    const int peer = 1 - self;
    std::vector<char> bytes(16);
    TESSEL_RETURN_IF_ERROR(expect_error(buf->write(peer, bytes.data(), bytes.size()),
                                        absl::StatusCode::kInvalidArgument, "is in another process"));
    TESSEL_RETURN_IF_ERROR(expect_error(g->copy_to_peer(peer, self, buf->data(self), buf->data(peer), 16),
                                        absl::StatusCode::kInvalidArgument, "is in another process"));
    absl::StatusOr<std::vector<ViewHeader*>> views = plan->begin_device_epoch();
    if (!views.ok()) return views.status();
    TESSEL_RETURN_IF_ERROR(expect((*views)[self] != nullptr && (*views)[peer] == nullptr, "views"));
    TESSEL_RETURN_IF_ERROR(
        expect_error(plan->publish(peer, 0), absl::StatusCode::kInvalidArgument, "its process publishes"));
    // Rank 0 never publishes its second batch: both processes time out, each
    // naming what it can see.
    TESSEL_RETURN_IF_ERROR(plan->publish(self, 0));
    if (self == 1) TESSEL_RETURN_IF_ERROR(plan->publish(self, 1));
    absl::Status ended = plan->end_device_epoch();
    TESSEL_RETURN_IF_ERROR(self == 0
                               ? expect_error(ended, absl::StatusCode::kDeadlineExceeded, "was never opened")
                               : expect_error(ended, absl::StatusCode::kDeadlineExceeded,
                                              "(rank 0's #1) did not reach rank 1 (rank 0 is in another process"));
    // next_epoch is collective and fails everywhere while a plan has failed.
    TESSEL_RETURN_IF_ERROR(expect_error(plan->next_epoch(), absl::StatusCode::kFailedPrecondition, "failed"));
    return plan->destroy();
  });
  EXPECT_EQ(failures, "");
}

// Each of rank 1's allocation sites in joining and growing fails in turn:
// rank 1 returns that failure, and rank 0 an error naming rank 1, both
// without waiting out a timeout.
TEST(Join, AFailureInOneProcessFailsTheCollectiveEverywhere) {
  std::string failures = run_ranks(2, [](std::shared_ptr<Bootstrap> boot) -> absl::Status {
    const int self = boot->rank();
    absl::StatusOr<Device> d = Device::open("host:1");
    if (!d.ok()) return d.status();
    for (int n = 1;; ++n) {
      if (self == 1) faults::arm(n);
      absl::StatusOr<Group> g = Group::join(*d, boot, kOptions);
      absl::Status s = g.ok() ? g->allocate(int64_t{3} << 20).status() : g.status();
      const std::string site = self == 1 ? faults::failed_site() : "";
      faults::arm(0);
      // Rank 1 tells whether its n-th site came before the end.
      char fired = !site.empty();
      char both[2];
      TESSEL_RETURN_IF_ERROR(boot->all_gather(&fired, both, 1));
      // Two reservations, the memfd and a growth at least.
      if (!both[1]) return expect(s.ok() && n > 4, absl::StrCat("no fault at site ", n, ", yet ", s.ToString()));
      if (self == 1) {
        TESSEL_RETURN_IF_ERROR(expect_error(s, absl::StatusCode::kResourceExhausted, ""));
      } else {
        TESSEL_RETURN_IF_ERROR(expect_error(s, absl::StatusCode::kFailedPrecondition, "rank 1 failed"));
      }
    }
  });
  EXPECT_EQ(failures, "");
}

}  // namespace
}  // namespace tessel
