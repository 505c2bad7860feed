// Triggered plans on CUDA GPUs (skipped without enough of them): symmetric
// VMM memory, chains of stream memory operations on copy engines, kernels
// publishing and waiting through views, releases and misuse. Runs at 2 ranks
// and, where 4 or 8 GPUs are present, at 4 and 8; a group of one as well.
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "dsl/builder.h"
#include "dsl/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/device_impl.h"
#include "runtime/plans/plan.h"
#include "samples/allgather.h"
#include "samples/kernels.h"
#include "tests/plan_test_util.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;
using plan_test::expect_delivered;
using plan_test::fill;

constexpr int64_t kChunk = 2 << 20;  // the H200's mapping granularity

// A group of cuda:0..world-1 into `group`, or skips without that many GPUs.
#define TESSEL_CUDA_GROUP_OR_SKIP(group, world)                                                   \
  std::vector<Device> group##_devices;                                                            \
  for (int r = 0; r < (world); ++r) {                                                             \
    absl::StatusOr<Device> d = Device::open(absl::StrCat("cuda:", r));                            \
    if (!d.ok() && (d.status().code() == absl::StatusCode::kUnavailable ||                        \
                    d.status().code() == absl::StatusCode::kNotFound)) {                          \
      GTEST_SKIP() << "needs " << (world) << " NVIDIA GPUs: " << d.status().message();            \
    }                                                                                             \
    ASSERT_TRUE(d.ok()) << d.status();                                                            \
    group##_devices.push_back(*d);                                                                \
  }                                                                                               \
  absl::StatusOr<Group> group##_or =                                                              \
      Group::create(group##_devices, {.reserve_bytes = int64_t{16} << 30, .chunk_bytes = kChunk}); \
  ASSERT_TRUE(group##_or.ok()) << group##_or.status();                                            \
  Group& group = *group##_or

class CudaPlan : public ::testing::TestWithParam<int> {};

TEST_P(CudaPlan, SymmetricMemoryGrowsWithoutMoving) {
  TESSEL_CUDA_GROUP_OR_SKIP(g, GetParam());
  SymmetricBuffer first = *g.allocate(1000);
  std::vector<int> v(250, 42), back(250);
  ASSERT_TRUE(first.write(1, v.data(), 1000).ok());
  void* at = first.data(1);
  std::vector<SymmetricBuffer> more;
  for (int i = 0; i < 4; ++i) more.push_back(*g.allocate(3 * kChunk / 2));
  EXPECT_GE(g.mapped_bytes(), 6 * kChunk);
  EXPECT_EQ(first.data(1), at);
  ASSERT_TRUE(first.read(1, back.data(), 1000).ok());
  EXPECT_EQ(back, v);
  ASSERT_TRUE(g.copy_to_peer(1, 0, first.data(0), first.data(1), 1000).ok());
  ASSERT_TRUE(first.read(0, back.data(), 1000).ok());
  EXPECT_EQ(back, v);
}

TEST_P(CudaPlan, RunDeliversLinearAndTwoDimensionalBatches) {
  const int world = GetParam();
  TESSEL_CUDA_GROUP_OR_SKIP(g, world);
  std::vector<Batch> linear = {{{{0, 1000}, {5000, 3000}}, 1}, {{{1000, 4000}, {8000, 2000}}, 1}};
  // The last has 300 batches per rank: run() opens each rank's gates in
  // batched commands of at most 255 writes, so two per rank.
  std::vector<Schedule> schedules = {Schedule(10000, std::vector<std::vector<Batch>>(world, linear)),
                                     *waves({77, 300, 4, 1216}, world, {32, 64}, 5),
                                     *split_linear(*chunks(ScheduleView::linear(3 << 20), world, 3), 1 << 20),
                                     *chunks(ScheduleView::linear(300 * 512), world, 300)};
  for (const Schedule& s : schedules) {
    SymmetricBuffer buf = *g.allocate(s.bytes());
    TriggeredPlan plan = *TriggeredPlan::create(g, buf, std::vector<Schedule>(world, s));
    for (uint64_t epoch = 1; epoch <= 3; ++epoch) {
      fill(buf, s, world, epoch);
      absl::Status ran = plan.run();
      ASSERT_TRUE(ran.ok()) << ran;
      expect_delivered(buf, s, world, epoch);
      ASSERT_TRUE(plan.next_epoch().ok());
    }
  }
}

// Runs `epochs` epochs of `ag`, each with some rounds of the benchmark's
// arithmetic (which must leave the values alone), and expects no wrong
// element; `what` names the run in failures.
void run_epochs(samples::AllGather& ag, int epochs, const std::string& what) {
  int64_t wrong = 0;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    ag.set_rounds(epoch % 4 * 3);
    absl::StatusOr<int64_t> w = ag.run_epoch();
    ASSERT_TRUE(w.ok()) << "epoch " << epoch << " (" << what << "): " << w.status();
    wrong += *w;
    ASSERT_TRUE(ag.plan().next_epoch().ok());
  }
  EXPECT_EQ(wrong, 0) << what;
}

// A group of one GPU has nothing to deliver: each batch completes once its
// gate opens.
TEST(CudaPlanOneRank, AllGatherKernelsCompleteEveryBatch) {
  TESSEL_CUDA_GROUP_OR_SKIP(g, 1);
  auto ag = samples::AllGather::create(g, {.rows = 300, .cols = 1000, .programs = 16, .check_programs = 32});
  ASSERT_TRUE(ag.ok()) << ag.status();
  ASSERT_TRUE((*ag)->arm({.spin_limit = 1 << 22, .timeout = absl::Seconds(5)}).ok());
  ASSERT_NO_FATAL_FAILURE(run_epochs(**ag, 50, "one rank"));
  ASSERT_TRUE((*ag)->disarm().ok());
}

// Two handles on one GPU are one device: a group of both is refused, and
// while one handle's plan has chains armed the other cannot load code either
// (it would wait forever behind their stream waits, as the first would).
TEST(CudaPlanOneRank, HandlesOnOneGpuShareWhatIsArmed) {
  TESSEL_CUDA_GROUP_OR_SKIP(g, 1);
  absl::StatusOr<Device> again = Device::open("cuda:0");
  ASSERT_TRUE(again.ok()) << again.status();
  absl::StatusOr<Group> twice = Group::create({g.device(0), *again});
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(twice.status().message(), HasSubstr("ranks 0 and 1 are the same device (cuda:0)"));

  Schedule s = *chunks(ScheduleView::linear(1 << 20), 1, 2);
  SymmetricBuffer buf = *g.allocate(s.bytes());
  TriggeredPlan plan = *TriggeredPlan::create(g, buf, {s});
  absl::StatusOr<Kernel> k = samples::vector_add_kernel("loaded_while_armed");
  ASSERT_TRUE(k.ok()) << k.status();
  absl::StatusOr<Function> refused = again->compile(*k);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("while a triggered plan has copy chains armed"));
  ASSERT_TRUE(plan.run().ok());
  EXPECT_TRUE(again->compile(*k).ok());
}

// A group's devices are all of one kind: a host rank beside a GPU is refused,
// naming both.
TEST(CudaPlanOneRank, GroupOfAGpuAndAHostRankIsRefused) {
  TESSEL_CUDA_GROUP_OR_SKIP(g, 1);
  const Device& gpu = g.device(0);
  absl::StatusOr<Device> host = Device::open("host:1");
  ASSERT_TRUE(host.ok()) << host.status();
  for (const auto& mixed : {std::vector<Device>{gpu, *host}, std::vector<Device>{*host, gpu}}) {
    absl::StatusOr<Group> both = Group::create(mixed);
    EXPECT_EQ(both.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(both.status().message(), HasSubstr("rank 1 is " + mixed[1].name() + " but rank 0 is " +
                                                   mixed[0].name() + "; a group's devices are all of one kind"));
  }
}

// 1000 epochs with each epoch armed by next_epoch(), then 1000 with each
// armed ahead by the previous end_device_epoch(), then 100 in batches of 3
// waves (the last short), each program publishing once per batch. The
// producers defer their publishes' fences, except in the last 100.
TEST_P(CudaPlan, AllGatherKernelsOverManyEpochs) {
  TESSEL_CUDA_GROUP_OR_SKIP(g, GetParam());
  // Short bounds: a lost batch fails the test within seconds, naming it.
  const PlanOptions bounded{.spin_limit = 1 << 22, .timeout = absl::Seconds(5)};
  auto ag = samples::AllGather::create(g, {.rows = 300, .cols = 1000, .programs = 16, .check_programs = 32});
  ASSERT_TRUE(ag.ok()) << ag.status();
  for (bool ahead : {false, true}) {
    PlanOptions options = bounded;
    options.arm_ahead = ahead;
    ASSERT_TRUE((*ag)->arm(options).ok());
    ASSERT_NO_FATAL_FAILURE(run_epochs(**ag, 1000, ahead ? "armed ahead" : "armed by next_epoch"));
  }
  ASSERT_TRUE((*ag)->disarm().ok());
  auto coarse = samples::AllGather::create(
      g, {.rows = 300, .cols = 1000, .programs = 16, .check_programs = 32, .waves_per_batch = 3, .defer = false});
  ASSERT_TRUE(coarse.ok()) << coarse.status();
  ASSERT_TRUE((*coarse)->arm(bounded).ok());
  ASSERT_NO_FATAL_FAILURE(run_epochs(**coarse, 100, "3 waves per batch, no deferred fences"));
}

// 8 programs each write an eighth of one 4 MiB batch; the 8th publish opens it.
TEST_P(CudaPlan, EightContributorsReleaseOneFourMiBGate) {
  const int world = GetParam();
  constexpr int kPrograms = 8, kCount = (4 << 20) / 4;
  TESSEL_CUDA_GROUP_OR_SKIP(g, world);
  Schedule s = *whole(ScheduleView::linear(kCount, 4), world, kPrograms);
  SymmetricBuffer buf = *g.allocate(s.bytes());
  std::vector<Function> fn;
  for (int r = 0; r < world; ++r) fn.push_back(*g.device(r).compile(plan_test::contributors_kernel(kCount, kPrograms)));
  TriggeredPlan plan = *TriggeredPlan::create(g, buf, std::vector<Schedule>(world, s));
  for (uint64_t e = 1; e <= 10; ++e) {
    std::vector<ViewHeader*> views = *plan.begin_device_epoch();
    for (int r = 0; r < world; ++r) {
      ASSERT_TRUE(fn[r].launch({.grid = kPrograms}, views[r], buf.as<int32_t>(r), static_cast<int32_t>(e),
                               static_cast<int32_t>(*plan.batch_id(r, 0)), r * kCount)
                      .ok());
    }
    absl::Status ended = plan.end_device_epoch();
    ASSERT_TRUE(ended.ok()) << ended;
    std::vector<int32_t> got(kCount);
    for (int p = 0; p < world; ++p) {
      for (int owner = 0; owner < world; ++owner) {
        ASSERT_TRUE(buf.read(p, got.data(), kCount * 4, int64_t{owner} * kCount * 4).ok());
        int64_t wrong = 0;
        for (int i = 0; i < kCount; ++i) wrong += got[i] != static_cast<int32_t>((e << 24) | i);
        ASSERT_EQ(wrong, 0) << "epoch " << e << ": rank " << owner << "'s shard on rank " << p;
      }
    }
    ASSERT_TRUE(plan.next_epoch().ok());
  }
}

// A buffer across two VMM chunks, and chunks mapped while the plan is armed.
TEST_P(CudaPlan, BufferSpanningChunksAndGrowthWhileArmed) {
  const int world = GetParam();
  TESSEL_CUDA_GROUP_OR_SKIP(g, world);
  SymmetricBuffer pad = *g.allocate(kChunk - 65536);
  Schedule s = *chunks(ScheduleView::linear(100000, 4), world, 4);
  SymmetricBuffer buf = *g.allocate(s.bytes());
  ASSERT_GT(buf.offset() + static_cast<int64_t>(buf.bytes()), kChunk);
  TriggeredPlan plan = *TriggeredPlan::create(g, buf, std::vector<Schedule>(world, s));
  std::vector<SymmetricBuffer> more;
  for (int i = 0; i < 3; ++i) more.push_back(*g.allocate(kChunk));
  fill(buf, s, world, 1);
  ASSERT_TRUE(plan.run().ok());
  expect_delivered(buf, s, world, 1);
}

// Chains run in arming order: a later batch opened first arrives after the
// earlier one, for direct chains (small batches) and pipelined ones (large).
TEST_P(CudaPlan, LaterBatchWaitsBehindEarlierOne) {
  const int world = GetParam();
  TESSEL_CUDA_GROUP_OR_SKIP(g, world);
  KernelBuilder k("open");
  TriggeredView view = k.triggered_view("plan");
  view.publish(k.arg(i32, "batch"));
  std::vector<Function> open;
  for (int r = 0; r < world; ++r) open.push_back(*g.device(r).compile(*k.build()));
  for (int64_t bytes : {int64_t{1} << 20, int64_t{8} << 20}) {
    SCOPED_TRACE(absl::StrCat(bytes / 2, "-byte batches"));
    Schedule s = *chunks(ScheduleView::linear(bytes), world, 2);
    SymmetricBuffer buf = *g.allocate(s.bytes());
    TriggeredPlan plan = *TriggeredPlan::create(g, buf, std::vector<Schedule>(world, s));
    std::vector<ViewHeader*> views = *plan.begin_device_epoch();
    auto arrival = [&](int64_t b) {
      ViewHeader h;
      EXPECT_TRUE(g.device(1).impl().copy_to_host(&h, views[1], sizeof(h)).ok());
      GateRow row;
      EXPECT_TRUE(g.device(1).impl().copy_to_host(&row, h.gates + b, sizeof(row)).ok());
      return row.arrival;
    };
    int64_t b0 = *plan.batch_id(0, 0), b1 = *plan.batch_id(0, 1);
    ASSERT_TRUE(open[0].launch({}, views[0], static_cast<int32_t>(b1)).ok());
    ASSERT_TRUE(g.device(0).synchronize().ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    EXPECT_EQ(arrival(b1), 0u) << "batch 1 overtook batch 0";
    ASSERT_TRUE(open[0].launch({}, views[0], static_cast<int32_t>(b0)).ok());
    for (int r = 1; r < world; ++r) {
      for (int i = 0; i < 2; ++i) {
        ASSERT_TRUE(open[r].launch({}, views[r], static_cast<int32_t>(*plan.batch_id(r, i))).ok());
      }
    }
    absl::Status ended = plan.end_device_epoch();
    ASSERT_TRUE(ended.ok()) << ended;
    EXPECT_EQ(arrival(b0), 1u);
    EXPECT_EQ(arrival(b1), 1u);
    ASSERT_TRUE(plan.destroy().ok());
  }
}

// Work on other streams runs while chains wait on gates, with more streams
// than the default 8 hardware queues: none waits behind an armed chain.
TEST_P(CudaPlan, OtherStreamsRunWhileChainsWait) {
  const int world = GetParam();
  TESSEL_CUDA_GROUP_OR_SKIP(g, world);
  constexpr int kStreams = 16, kN = 4096;
  Function add = *g.device(0).compile(*samples::vector_add_kernel());
  Buffer x = *g.device(0).allocate(kN * 4);
  std::vector<Stream> streams;
  for (int i = 0; i < kStreams; ++i) streams.push_back(*g.device(0).create_stream());
  Schedule s = *chunks(ScheduleView::linear(1 << 16), world, 2);
  SymmetricBuffer buf = *g.allocate(s.bytes());
  TriggeredPlan plan = *TriggeredPlan::create(g, buf, std::vector<Schedule>(world, s));
  ASSERT_TRUE(plan.begin_device_epoch().ok());
  for (Stream& st : streams) {
    float* p = x.as<float>();
    ASSERT_TRUE(add.launch({.grid = kN / samples::kAddBlock, .stream = &st}, p, p, p, kN).ok());
  }
  auto done = std::async(std::launch::async, [&] {
    for (Stream& st : streams) EXPECT_TRUE(st.synchronize().ok());
  });
  bool finished = done.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  EXPECT_TRUE(finished) << "a stream waited behind the plan's armed chains";
  ASSERT_TRUE(plan.abort().ok());  // releases the chains, so a stuck stream finishes too
  done.wait();
}

// Armed waits never hold Device::synchronize; a timed-out epoch fails, holds
// its queues until aborted, and the abort releases the chains.
TEST_P(CudaPlan, TimeoutAbortAndSynchronizeWhileArmed) {
  const int world = GetParam();
  TESSEL_CUDA_GROUP_OR_SKIP(g, world);
  Schedule s = *chunks(ScheduleView::linear(1 << 16), world, 2);
  SymmetricBuffer buf = *g.allocate(s.bytes());
  TriggeredPlan plan =
      *TriggeredPlan::create(g, buf, std::vector<Schedule>(world, s), {.name = "idle", .timeout = absl::Milliseconds(100)});
  for (int r = 0; r < world; ++r) ASSERT_TRUE(g.device(r).synchronize().ok());
  absl::Status copy = g.copy_to_peer(0, 1, buf.data(1), buf.data(0), 64);
  EXPECT_EQ(copy.code(), absl::StatusCode::kFailedPrecondition) << copy;
  ASSERT_TRUE(plan.begin_device_epoch().ok());
  absl::Status ended = plan.end_device_epoch();
  EXPECT_EQ(ended.code(), absl::StatusCode::kDeadlineExceeded) << ended;
  EXPECT_THAT(ended.message(), HasSubstr("was never opened"));
  EXPECT_EQ(plan.state(), PlanState::kFailed);
  absl::Status aborted = plan.abort();
  ASSERT_TRUE(aborted.ok()) << aborted;
  EXPECT_TRUE(g.copy_to_peer(0, 1, buf.data(1), buf.data(0), 64).ok());
  // A new plan on the same queues works after the aborted one.
  TriggeredPlan next = *TriggeredPlan::create(g, buf, std::vector<Schedule>(world, s));
  fill(buf, s, world, 1);
  ASSERT_TRUE(next.run().ok());
  expect_delivered(buf, s, world, 1);
}

// A stream takes only so many commands behind a closed gate before
// enqueueing blocks: arming past that is refused, counting the chains of
// every epoch still armed, instead of blocking until a gate opens. Plans of
// `batch_bytes` batches: 4 KiB ones are direct chains (a wait, a copy and a
// write on one stream), 1 MiB ones pipelined (events between streams, which
// take no place in a queue, so far more batches fit; were that wrong, arming
// would block and the test hang). With `check_data`, every epoch's bytes
// are checked; else only that each epoch ends.
void arm_past_what_a_stream_holds(const Group& g, int world, int64_t batch_bytes, int most, bool check_data) {
  auto small = [&](int batches) {
    return std::vector<Schedule>(world, *chunks(ScheduleView::linear(int64_t{batches} * batch_bytes), world, batches));
  };
  SymmetricBuffer buf = *g.allocate(small(most)[0].bytes());
  // The most batches one plan may arm.
  int fit = 0;
  for (int lo = 1, hi = most; lo <= hi;) {
    int mid = (lo + hi) / 2;
    absl::StatusOr<TriggeredPlan> p = TriggeredPlan::create(g, buf, small(mid));
    if (p.ok()) {
      fit = mid;
      lo = mid + 1;
    } else {
      ASSERT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted) << p.status();
      EXPECT_THAT(p.status().message(), HasSubstr("behind closed gates"));
      hi = mid - 1;
    }
  }
  ASSERT_GT(fit, 100);
  ASSERT_LT(fit, most);
  TriggeredPlan first = *TriggeredPlan::create(g, buf, small(fit), {.name = "first"});
  absl::StatusOr<TriggeredPlan> second = TriggeredPlan::create(g, buf, small(fit));
  ASSERT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted) << second.status();
  EXPECT_THAT(second.status().message(), HasSubstr("more are queued by chains armed earlier"));
  Schedule s = small(fit)[0];
  auto filled = [&](uint64_t epoch) {
    if (check_data) fill(buf, s, world, epoch);
  };
  auto delivered = [&](uint64_t epoch) {
    if (check_data) expect_delivered(buf, s, world, epoch);
  };
  filled(1);
  ASSERT_TRUE(first.run().ok());
  delivered(1);
  // Between the first plan's epochs its chains are gone, so the second fits,
  // and then the first cannot arm its next epoch until the second has run.
  second = TriggeredPlan::create(g, buf, small(fit));
  ASSERT_TRUE(second.ok()) << second.status();
  absl::Status next = first.next_epoch();
  EXPECT_EQ(next.code(), absl::StatusCode::kResourceExhausted) << next;
  EXPECT_EQ(first.state(), PlanState::kComplete);
  filled(2);
  ASSERT_TRUE(second->run().ok());
  delivered(2);
  ASSERT_TRUE(first.next_epoch().ok());
  filled(3);
  ASSERT_TRUE(first.run().ok());
  delivered(3);
}

TEST_P(CudaPlan, ArmingPastWhatAStreamHoldsIsRefused) {
  const int world = GetParam();
  TESSEL_CUDA_GROUP_OR_SKIP(g, world);
  arm_past_what_a_stream_holds(g, world, 4096, 4000, /*check_data=*/true);
}

TEST_P(CudaPlan, PipelinedArmingPastWhatAStreamHoldsIsRefused) {
  const int world = GetParam();
  TESSEL_CUDA_GROUP_OR_SKIP(g, world);
  arm_past_what_a_stream_holds(g, world, int64_t{1} << 20, 1200, /*check_data=*/false);
}

INSTANTIATE_TEST_SUITE_P(Ranks, CudaPlan, ::testing::Values(2, 4, 8), [](const auto& info) {
  return absl::StrCat(info.param, "Ranks");
});

}  // namespace
}  // namespace tessel
