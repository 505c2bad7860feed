// Every misuse of a triggered plan returns a clear error instead of hanging
// or corrupting: one test per misuse, each checking code and message.
#include <algorithm>
#include <iterator>
#include <vector>

#include "dsl/builder.h"
#include "dsl/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/plans/plan.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;

struct Fixture {
  explicit Fixture(int world = 2) : group(*Group::host(world, 1, {.reserve_bytes = 1 << 28, .chunk_bytes = 1 << 20})) {
    schedule = *chunks(ScheduleView::linear(4096), world, 2);
    buffer = *group.allocate(schedule.bytes());
  }
  absl::StatusOr<TriggeredPlan> plan(PlanOptions options = {}) {
    return TriggeredPlan::create(group, buffer, std::vector<Schedule>(group.size(), schedule), options);
  }
  Group group;
  Schedule schedule;
  SymmetricBuffer buffer;
};

void expect_error(const absl::Status& s, absl::StatusCode code, const std::string& text) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_THAT(s.message(), HasSubstr(text));
}

TEST(PlanErrors, HostCopyToAPeerWhoseQueueHoldsArmedChains) {
  Fixture f;
  TriggeredPlan p = *f.plan({.name = "ag"});
  auto copy = [&] { return f.group.copy_to_peer(0, 1, f.buffer.data(1), f.buffer.data(0), 64); };
  expect_error(copy(), absl::StatusCode::kFailedPrecondition, "plan 'ag' has chains armed on this queue");
  ASSERT_TRUE(p.run().ok());
  EXPECT_TRUE(copy().ok());
}

TEST(PlanErrors, EndingAnEpochNeverBegun) {
  Fixture f;
  TriggeredPlan p = *f.plan();
  expect_error(p.end_device_epoch(), absl::StatusCode::kFailedPrecondition, "no epoch has begun");
}

TEST(PlanErrors, BeginningOutOfArmingOrder) {
  Fixture f;
  TriggeredPlan first = *f.plan({.name = "first"}), second = *f.plan({.name = "second"});
  expect_error(second.begin_device_epoch().status(), absl::StatusCode::kFailedPrecondition,
               "cannot begin before plan 'first'");
  ASSERT_TRUE(first.run().ok());
  EXPECT_TRUE(second.run().ok());
}

TEST(PlanErrors, AbortingOutOfArmingOrder) {
  Fixture f;
  TriggeredPlan first = *f.plan({.name = "first"}), second = *f.plan({.name = "second"});
  expect_error(second.abort(), absl::StatusCode::kFailedPrecondition, "cannot abort before plan 'first'");
  expect_error(second.destroy(), absl::StatusCode::kFailedPrecondition, "cannot destroy before plan 'first'");
  ASSERT_TRUE(first.abort().ok());
  EXPECT_EQ(first.state(), PlanState::kAborted);
  ASSERT_TRUE(second.abort().ok());
  EXPECT_EQ(second.state(), PlanState::kAborted);
  expect_error(second.begin_device_epoch().status(), absl::StatusCode::kFailedPrecondition, "it was aborted");
}

// A failed plan's chains stay queued ahead of later plans' until it is aborted.
TEST(PlanErrors, BeginningBehindAFailedPlan) {
  Fixture f;
  TriggeredPlan first = *f.plan({.name = "first", .timeout = absl::Milliseconds(30)});
  TriggeredPlan second = *f.plan({.name = "second"});
  ASSERT_TRUE(first.begin_device_epoch().ok());
  ASSERT_FALSE(first.end_device_epoch().ok());
  expect_error(second.begin_device_epoch().status(), absl::StatusCode::kFailedPrecondition,
               "plan 'first', armed earlier on the same copy queues, has failed with its chains still queued");
  expect_error(second.abort(), absl::StatusCode::kFailedPrecondition, "abort it first");
  ASSERT_TRUE(first.abort().ok());
  EXPECT_TRUE(second.run().ok());
}

// A plan that armed its next epoch ahead holds later plans until that
// epoch begins; it arms ahead only as the last plan armed.
TEST(PlanErrors, BeginningBehindAPlanArmedAhead) {
  Fixture f;
  TriggeredPlan first = *f.plan({.name = "first", .arm_ahead = true});
  ASSERT_TRUE(first.run().ok());
  TriggeredPlan second = *f.plan({.name = "second"});
  expect_error(second.begin_device_epoch().status(), absl::StatusCode::kFailedPrecondition,
               "plan 'first', which armed its next epoch ahead");
  expect_error(second.abort(), absl::StatusCode::kFailedPrecondition, "armed its next epoch ahead");
  ASSERT_TRUE(first.next_epoch().ok());
  ASSERT_TRUE(first.run().ok());  // second is armed after it now: nothing armed ahead
  EXPECT_TRUE(second.run().ok());
  ASSERT_TRUE(first.next_epoch().ok());
  EXPECT_TRUE(first.run().ok());
}

// A failed epoch's chains and those armed ahead are both released by abort.
TEST(PlanErrors, AbortingAFailedPlanArmedAhead) {
  Fixture f;
  TriggeredPlan first = *f.plan({.name = "first", .timeout = absl::Milliseconds(30), .arm_ahead = true});
  ASSERT_TRUE(first.begin_device_epoch().ok());
  ASSERT_FALSE(first.end_device_epoch().ok());
  TriggeredPlan second = *f.plan({.name = "second"});
  expect_error(second.begin_device_epoch().status(), absl::StatusCode::kFailedPrecondition, "first");
  ASSERT_TRUE(first.abort().ok());
  EXPECT_TRUE(second.run().ok());
  EXPECT_TRUE(f.group.copy_to_peer(0, 1, f.buffer.data(1), f.buffer.data(0), 64).ok());
}

TEST(PlanErrors, BeginningACompletedPlanAgain) {
  Fixture f;
  TriggeredPlan p = *f.plan();
  ASSERT_TRUE(p.run().ok());
  expect_error(p.begin_device_epoch().status(), absl::StatusCode::kFailedPrecondition, "call next_epoch()");
  expect_error(p.run(), absl::StatusCode::kFailedPrecondition, "call next_epoch()");
}

TEST(PlanErrors, BeginningTwiceAndArmingWhileActive) {
  Fixture f;
  TriggeredPlan p = *f.plan();
  ASSERT_TRUE(p.begin_device_epoch().ok());
  expect_error(p.begin_device_epoch().status(), absl::StatusCode::kFailedPrecondition, "call end_device_epoch()");
  expect_error(p.next_epoch(), absl::StatusCode::kFailedPrecondition, "its epoch is active");
  ASSERT_TRUE(p.abort().ok());
}

TEST(PlanErrors, MismatchedSchedules) {
  Fixture f;
  Schedule other = *chunks(ScheduleView::linear(4096), 2, 3);
  absl::StatusOr<TriggeredPlan> p = TriggeredPlan::create(f.group, f.buffer, {f.schedule, other});
  expect_error(p.status(), absl::StatusCode::kInvalidArgument, "rank 1");
}

TEST(PlanErrors, OneSchedulePerRank) {
  Fixture f;
  expect_error(TriggeredPlan::create(f.group, f.buffer, {f.schedule}).status(), absl::StatusCode::kInvalidArgument,
               "1 schedules for a group of 2 ranks");
  Schedule three = *chunks(ScheduleView::linear(1024), 3, 2);
  expect_error(TriggeredPlan::create(f.group, f.buffer, {three, three}).status(),
               absl::StatusCode::kInvalidArgument, "the schedule has 3 ranks but the group 2");
}

TEST(PlanErrors, BufferOutsideTheSymmetricAllocation) {
  Fixture f, other;
  expect_error(TriggeredPlan::create(f.group, other.buffer, {f.schedule, f.schedule}).status(),
               absl::StatusCode::kInvalidArgument, "not in this group's symmetric allocation");
  expect_error(TriggeredPlan::create(f.group, SymmetricBuffer(), {f.schedule, f.schedule}).status(),
               absl::StatusCode::kInvalidArgument, "not in this group's symmetric allocation");
}

TEST(PlanErrors, ScheduleLargerThanTheBuffer) {
  Fixture f;
  SymmetricBuffer small = *f.group.allocate(1000);
  expect_error(TriggeredPlan::create(f.group, small, {f.schedule, f.schedule}).status(),
               absl::StatusCode::kOutOfRange, "spans 8192 bytes");
}

// A delivery of 20 000 scattered bytes is 20 000 COPY_LINEAR packets, more
// than half the host queue's ring: refused before any chain is armed.
TEST(PlanErrors, ChainsPastWhatAHostQueueHoldsAreRefused) {
  Fixture f;
  std::vector<Segment> scattered;
  for (int64_t i = 0; i < 20000; ++i) scattered.push_back({2 * i, 1});
  Schedule s(40000, std::vector<std::vector<Batch>>(2, {{scattered, 1}}));
  SymmetricBuffer buf = *f.group.allocate(s.bytes());
  expect_error(TriggeredPlan::create(f.group, buf, {s, s}).status(), absl::StatusCode::kResourceExhausted,
               "host group: the chains of this epoch need 560056 bytes on the queue from rank 0 to rank 1, which "
               "holds 524288 (0 armed already)");
  // Smaller epochs still arm on the same queues.
  EXPECT_TRUE(f.plan().ok());
}

TEST(PlanErrors, InvalidSchedule) {
  Fixture f;
  Schedule bad(4096, {{{{{0, 5000}}, 1}}, {{{{0, 10}}, 1}}});
  expect_error(TriggeredPlan::create(f.group, f.buffer, {bad, bad}).status(), absl::StatusCode::kInvalidArgument,
               "TriggeredPlan 'plan'");
}

TEST(PlanErrors, EpochOverflow) {
  Fixture f;
  TriggeredPlan p = *f.plan({.first_epoch = kMaxEpoch});
  ASSERT_TRUE(p.run().ok());
  expect_error(p.next_epoch(), absl::StatusCode::kOutOfRange, "4294967295 is the last");
  expect_error(f.plan({.first_epoch = 0}).status(), absl::StatusCode::kOutOfRange, "first_epoch 0");
  expect_error(f.plan({.first_epoch = kMaxEpoch + 1}).status(), absl::StatusCode::kOutOfRange, "first_epoch");
}

TEST(PlanErrors, EpochThatNeverPublishesTimesOutAndFails) {
  Fixture f;
  TriggeredPlan p = *f.plan({.name = "slow", .timeout = absl::Milliseconds(50)});
  ASSERT_TRUE(p.begin_device_epoch().ok());
  absl::Status s = p.end_device_epoch();
  expect_error(s, absl::StatusCode::kDeadlineExceeded, "was never opened: 0 of 1 contributors");
  EXPECT_EQ(p.state(), PlanState::kFailed);
  expect_error(p.next_epoch(), absl::StatusCode::kFailedPrecondition, "it failed");
  // The failed plan's chains still hold the queue until it is aborted.
  expect_error(f.group.copy_to_peer(0, 1, f.buffer.data(1), f.buffer.data(0), 8),
               absl::StatusCode::kFailedPrecondition, "plan 'slow'");
  ASSERT_TRUE(p.abort().ok());
  EXPECT_TRUE(f.group.copy_to_peer(0, 1, f.buffer.data(1), f.buffer.data(0), 8).ok());
}

TEST(PlanErrors, DeferredReleaseNothingCarriedIsNamed) {
  Fixture f;
  KernelBuilder k("defers_its_last_publish");
  TriggeredView view = k.triggered_view("plan");
  view.publish(k.arg(i32, "batch"), true);
  Function fn = *f.group.device(0).compile(*k.build());
  TriggeredPlan p = *f.plan({.timeout = absl::Milliseconds(50)});
  std::vector<ViewHeader*> views = *p.begin_device_epoch();
  ASSERT_TRUE(fn.launch({}, views[0], static_cast<int32_t>(*p.batch_id(0, 0))).ok());
  absl::Status s = p.end_device_epoch();
  expect_error(s, absl::StatusCode::kDeadlineExceeded,
               "batch 0 (rank 0's #0) was never opened: its last contributor deferred the release and no later "
               "publish or wait on rank 0 carried it");
  EXPECT_THAT(s.message(), HasSubstr("batch 1 (rank 0's #1) was never opened: 0 of 1 contributors"));
}

TEST(PlanErrors, KernelErrorsReachEndDeviceEpoch) {
  Fixture f;
  KernelBuilder k("misuse");
  TriggeredView view = k.triggered_view("plan");
  Value batch = k.arg(i32, "batch");
  view.wait(batch);
  Function fn = *f.group.device(1).compile(*k.build());
  TriggeredPlan p = *f.plan({.spin_limit = 1000, .timeout = absl::Milliseconds(100)});
  std::vector<ViewHeader*> views = *p.begin_device_epoch();
  ASSERT_TRUE(fn.launch({}, views[1], int32_t{0}).ok());   // rank 0's batch 0: never published
  ASSERT_TRUE(fn.launch({}, views[1], int32_t{99}).ok());  // no such batch
  absl::Status s = p.end_device_epoch();
  EXPECT_THAT(s.message(), HasSubstr("a kernel on rank 1 named a batch the plan does not have"));
  EXPECT_THAT(s.message(), HasSubstr("a kernel on rank 1 gave up waiting for batch 0"));
  EXPECT_EQ(p.state(), PlanState::kFailed);
}

// Every batch arrives, but a kernel misused the view: its alarm makes
// end_device_epoch read the gates back and fail, and a misuse after an
// epoch ended is reported at the next one.
TEST(PlanErrors, KernelErrorsInADeliveredEpoch) {
  Fixture f;
  KernelBuilder k("misuse");
  TriggeredView view = k.triggered_view("plan");
  view.wait(k.arg(i32, "batch"));
  Function fn = *f.group.device(1).compile(*k.build());
  auto publish_all = [&](TriggeredPlan& p) {
    for (int r = 0; r < 2; ++r) {
      for (int i = 0; i < 2; ++i) ASSERT_TRUE(p.publish(r, i).ok());
    }
  };
  TriggeredPlan p = *f.plan();
  std::vector<ViewHeader*> views = *p.begin_device_epoch();
  publish_all(p);
  ASSERT_TRUE(fn.launch({}, views[1], int32_t{99}).ok());
  expect_error(p.end_device_epoch(), absl::StatusCode::kAborted,
               "a kernel on rank 1 named a batch the plan does not have");
  ASSERT_TRUE(p.abort().ok());

  TriggeredPlan q = *f.plan();
  views = *q.begin_device_epoch();
  publish_all(q);
  ASSERT_TRUE(q.end_device_epoch().ok());
  ASSERT_TRUE(fn.launch({}, views[1], int32_t{-1}).ok());
  ASSERT_TRUE(q.next_epoch().ok());
  ASSERT_TRUE(q.begin_device_epoch().ok());
  publish_all(q);
  expect_error(q.end_device_epoch(), absl::StatusCode::kAborted, "named a batch the plan does not have");
}

// No code may load on a device while chains are armed there (on a GPU it
// could wait forever behind their stream waits): compiling fails, and a
// launch needing a variant not loaded yet runs the generic one.
TEST(PlanErrors, CompilingWhileChainsAreArmed) {
  Fixture f;
  KernelBuilder k("copy");
  Value src = k.arg(ptr(f32), "src"), dst = k.arg(ptr(f32), "dst"), n = k.arg(i32, "n");
  Value offs = k.arange(0, 256);
  store(dst + offs, load(src + offs, offs < n, 0.0f), offs < n);
  Kernel kernel = *k.build();
  Function fn = *f.group.device(0).compile(kernel);
  TriggeredPlan p = *f.plan({.name = "ag"});
  KernelBuilder other("other");
  store(other.arg(ptr(i32), "x"), 1);
  expect_error(f.group.device(0).compile(*other.build()).status(), absl::StatusCode::kFailedPrecondition,
               "cannot compile 'other' while a triggered plan has copy chains armed");
  alignas(16) static float in[256], out[256];
  std::fill(std::begin(in), std::end(in), 2.0f);
  ASSERT_NE(fn.specialization(in, out, 256).multiple_of_16, 0u);  // wants a variant not compiled yet
  expect_error(fn.prepare(in, out, 256), absl::StatusCode::kFailedPrecondition,
               "prepare 'copy': host:1: cannot compile");
  ASSERT_TRUE(fn.launch({}, in, out, 256).ok());
  EXPECT_EQ(out[255], 2.0f);
  ASSERT_TRUE(p.run().ok());
  // Complete: nothing armed, so code loads again.
  EXPECT_TRUE(fn.prepare(in, out, 256).ok());
  EXPECT_TRUE(f.group.device(0).compile(*other.build()).ok());
}

TEST(PlanErrors, CallsAfterDestroy) {
  Fixture f;
  TriggeredPlan p = *f.plan();
  ASSERT_TRUE(p.destroy().ok());
  EXPECT_EQ(p.state(), PlanState::kDestroyed);
  EXPECT_TRUE(p.destroy().ok());
  expect_error(p.begin_device_epoch().status(), absl::StatusCode::kFailedPrecondition, "it was destroyed");
  expect_error(p.abort(), absl::StatusCode::kFailedPrecondition, "it was destroyed");
  expect_error(p.run(), absl::StatusCode::kFailedPrecondition, "it was destroyed");
  // Its queues are free again.
  EXPECT_TRUE(f.group.copy_to_peer(0, 1, f.buffer.data(1), f.buffer.data(0), 8).ok());
}

TEST(PlanErrors, PublishFromTheHostOutsideAnEpochOrOfNoBatch) {
  Fixture f;
  TriggeredPlan p = *f.plan();
  expect_error(p.publish(0, 0), absl::StatusCode::kFailedPrecondition, "cannot publish: no epoch has begun");
  ASSERT_TRUE(p.begin_device_epoch().ok());
  expect_error(p.publish(0, 5), absl::StatusCode::kOutOfRange, "publish");
  for (int r = 0; r < 2; ++r) {
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(p.publish(r, i).ok());
  }
  EXPECT_TRUE(p.end_device_epoch().ok());
}

TEST(PlanErrors, BatchIdOutOfRange) {
  Fixture f;
  TriggeredPlan p = *f.plan();
  EXPECT_EQ(*p.batch_id(1, 1), 3);
  EXPECT_FALSE(p.batch_id(2, 0).ok());
  EXPECT_FALSE(p.batch_id(0, 2).ok());
}

}  // namespace
}  // namespace tessel
