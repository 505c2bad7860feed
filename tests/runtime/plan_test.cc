// Triggered plans on host ranks: delivery of 1-D and 2-D batches, kernels
// publishing and waiting through views, epochs, head-of-line order, the
// lifecycle and every misuse it must refuse.
#include "runtime/plans/plan.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "dsl/builder.h"
#include "dsl/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "samples/allgather.h"
#include "tests/plan_test_util.h"

namespace tessel {
namespace {

using plan_test::expect_delivered;
using plan_test::fill;

Group host_group(int ranks, int64_t chunk = 1 << 20) {
  return *Group::host(ranks, 2, {.reserve_bytes = int64_t{1} << 30, .chunk_bytes = chunk});
}

std::vector<Schedule> same(const Schedule& s, int world) { return std::vector<Schedule>(world, s); }

TEST(Plan, RunDeliversOneDimensionalBatchesOfSeveralSegments) {
  constexpr int kWorld = 3;
  Group g = host_group(kWorld);
  // Two batches of scattered segments; a gap at 300..399 stays uncovered.
  std::vector<Batch> batches = {{{{0, 100}, {500, 250}}, 1}, {{{100, 200}, {400, 100}, {750, 250}}, 1}};
  Schedule s(1000, std::vector<std::vector<Batch>>(kWorld, batches));
  SymmetricBuffer buf = *g.allocate(s.bytes());
  TriggeredPlan plan = *TriggeredPlan::create(g, buf, same(s, kWorld));
  EXPECT_EQ(plan.state(), PlanState::kArmed);
  for (uint64_t epoch = 1; epoch <= 3; ++epoch) {
    fill(buf, s, kWorld, epoch);
    ASSERT_TRUE(plan.run().ok());
    EXPECT_EQ(plan.state(), PlanState::kComplete);
    expect_delivered(buf, s, kWorld, epoch);
    if (epoch < 3) {
      ASSERT_TRUE(plan.next_epoch().ok());
    }
  }
  EXPECT_EQ(plan.epoch(), 3u);
}

TEST(Plan, RunDeliversTwoDimensionalWavesWithClippedEdgeTiles) {
  constexpr int kWorld = 2;
  Group g = host_group(kWorld);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 4; ++trial) {
    ScheduleView view{std::uniform_int_distribution<int64_t>(5, 70)(rng), std::uniform_int_distribution<int64_t>(3, 90)(rng),
                      4, 0};
    view.pitch = view.row_bytes() + 4 * std::uniform_int_distribution<int64_t>(0, 3)(rng);
    Schedule s = *waves(view, kWorld, {16, 8}, 3);
    SymmetricBuffer buf = *g.allocate(s.bytes());
    TriggeredPlan plan = *TriggeredPlan::create(g, buf, same(s, kWorld), {.name = "waves"});
    fill(buf, s, kWorld, 1);
    ASSERT_TRUE(plan.run().ok()) << view.rows << "x" << view.cols;
    expect_delivered(buf, s, kWorld, 1);
  }
}

// Full-width tiles make abutting linear segments, which chains join.
TEST(Plan, RunDeliversWavesOfFullWidthTiles) {
  Group g = host_group(3);
  Schedule s = *waves({100, 16, 4, 0}, 3, {8, 16}, 4);
  SymmetricBuffer buf = *g.allocate(s.bytes());
  TriggeredPlan plan = *TriggeredPlan::create(g, buf, same(s, 3));
  fill(buf, s, 3, 1);
  ASSERT_TRUE(plan.run().ok());
  expect_delivered(buf, s, 3, 1);
}

// Tiles side by side join into wider 2-D copies, full bands into linear
// ones; waves that start or end inside a band keep their partial rows apart.
TEST(Plan, RunDeliversWavesWhoseTilesJoin) {
  Group g = host_group(2);
  for (int programs : {2, 3, 5, 8}) {
    Schedule s = *waves({45, 48, 4, 0}, 2, {8, 16}, programs);
    SymmetricBuffer buf = *g.allocate(s.bytes());
    TriggeredPlan plan = *TriggeredPlan::create(g, buf, same(s, 2));
    fill(buf, s, 2, 1);
    ASSERT_TRUE(plan.run().ok());
    expect_delivered(buf, s, 2, 1);
  }
}

// Kernel-driven epochs: the all-gather of samples/allgather.h at 2, 4 and 8 ranks.
class AllGatherRanks : public ::testing::TestWithParam<int> {};

TEST_P(AllGatherRanks, KernelsPublishAndWaitThroughViews) {
  Group g = host_group(GetParam());
  // 3 x 3 tiles, 3 programs: 3 waves, in batches of 1 or 2 waves (the last
  // short), with the publishes' fences deferred or not.
  for (auto [per, defer] : {std::pair{1, true}, {2, true}, {1, false}, {2, false}}) {
    auto ag = *samples::AllGather::create(
        g, {.rows = 70, .cols = 150, .programs = 3, .check_programs = 2, .waves_per_batch = per, .defer = defer});
    ASSERT_TRUE(ag->arm().ok());
    EXPECT_EQ(ag->plan().schedule().batches(0).size(), per == 1 ? 3u : 2u);
    for (int epoch = 1; epoch <= 5; ++epoch) {
      // The producer's knobs for benchmarks must leave its values alone.
      ag->set_passes(1 + epoch % 2);
      ag->set_rounds(epoch % 3 * 7);
      absl::StatusOr<int64_t> wrong = ag->run_epoch();
      ASSERT_TRUE(wrong.ok()) << wrong.status();
      EXPECT_EQ(*wrong, 0) << "epoch " << epoch << ", waves per batch " << per << ", defer " << defer;
      ASSERT_TRUE(ag->plan().next_epoch().ok());
    }
    ASSERT_TRUE(ag->plan().destroy().ok());
  }
}

INSTANTIATE_TEST_SUITE_P(Plan, AllGatherRanks, ::testing::Values(2, 4, 8));

// Benchmarks time the producer's work without publishes against it: the
// same values, and no view read (none is given).
TEST(Plan, AllGatherProducerWithoutPublishesWritesTheSameValues) {
  absl::StatusOr<Device> d = Device::open("host:2");
  ASSERT_TRUE(d.ok()) << d.status();
  absl::StatusOr<Kernel> k = samples::allgather_producer_kernel(/*publishes=*/false);
  ASSERT_TRUE(k.ok()) << k.status();
  absl::StatusOr<Function> f = d->compile(*k);
  ASSERT_TRUE(f.ok()) << f.status();
  constexpr int kRank = 1, kRows = 70, kCols = 150, kEpoch = 3;
  std::vector<int32_t> buf(2 * kRows * kCols, -1);
  ViewHeader* no_view = nullptr;
  ASSERT_TRUE(f->launch({.grid = 3}, no_view, buf.data(), kRank, kRows, kCols, kEpoch, 0, 2, 7, 1, true).ok());
  for (int64_t i = 0; i < kRows * kCols; ++i) {
    ASSERT_EQ(buf[kRank * kRows * kCols + i], samples::allgather_value(kEpoch, kRank * kRows * kCols + i)) << i;
    ASSERT_EQ(buf[i], -1) << "rank 0's shard, element " << i;
  }
}

// 8 programs write (epoch << 24) | index into one 4 MiB batch and publish it;
// the gate opens on the 8th. Checked on the peer for 10 epochs.
TEST(Plan, EightContributorsReleaseOneFourMiBGate) {
  constexpr int kWorld = 2, kPrograms = 8;
  constexpr int kCount = (4 << 20) / 4;  // i32 elements of the shard
  Group g = host_group(kWorld, 8 << 20);
  Schedule s = *whole(ScheduleView::linear(kCount, 4), kWorld, kPrograms);
  SymmetricBuffer buf = *g.allocate(s.bytes());

  std::vector<Function> fn;
  for (int r = 0; r < kWorld; ++r) fn.push_back(*g.device(r).compile(plan_test::contributors_kernel(kCount, kPrograms)));
  TriggeredPlan plan = *TriggeredPlan::create(g, buf, same(s, kWorld));

  for (uint64_t e = 1; e <= 10; ++e) {
    std::vector<ViewHeader*> views = *plan.begin_device_epoch();
    std::vector<std::thread> ranks;
    for (int r = 0; r < kWorld; ++r) {
      ranks.emplace_back([&, r] {
        ASSERT_TRUE(fn[r].launch({.grid = kPrograms}, views[r], buf.as<int32_t>(r), static_cast<int32_t>(e),
                                 static_cast<int32_t>(*plan.batch_id(r, 0)), r * kCount)
                        .ok());
      });
    }
    for (std::thread& t : ranks) t.join();
    ASSERT_TRUE(plan.end_device_epoch().ok());
    for (int p = 0; p < kWorld; ++p) {
      for (int owner = 0; owner < kWorld; ++owner) {
        const int32_t* got = buf.as<int32_t>(p) + owner * kCount;
        int64_t wrong = 0;
        for (int i = 0; i < kCount; ++i) wrong += got[i] != static_cast<int32_t>((e << 24) | i);
        ASSERT_EQ(wrong, 0) << "epoch " << e << ": rank " << owner << "'s shard on rank " << p;
      }
    }
    ASSERT_TRUE(plan.next_epoch().ok());
  }
}

// Chains on one queue run in arming order: batch 1, opened first, waits
// behind batch 0 and arrives only after it.
TEST(Plan, LaterBatchWaitsBehindEarlierOneOnTheQueue) {
  Group g = host_group(2);
  Schedule s = *chunks(ScheduleView::linear(4096), 2, 2);
  SymmetricBuffer buf = *g.allocate(s.bytes());
  TriggeredPlan plan = *TriggeredPlan::create(g, buf, same(s, 2));
  std::vector<ViewHeader*> views = *plan.begin_device_epoch();
  auto word = [](uint64_t& w) { return std::atomic_ref<uint64_t>(w); };
  int64_t b0 = *plan.batch_id(0, 0), b1 = *plan.batch_id(0, 1);
  word(views[0]->gates[b1].ready).store(1, std::memory_order_release);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(word(views[1]->gates[b1].arrival).load(), 0u) << "batch 1 overtook batch 0";
  word(views[0]->gates[b0].ready).store(1, std::memory_order_release);
  // Rank 1's own batches open too, so the epoch can end.
  for (int i = 0; i < 2; ++i) word(views[1]->gates[*plan.batch_id(1, i)].ready).store(1, std::memory_order_release);
  ASSERT_TRUE(plan.end_device_epoch().ok());
  EXPECT_EQ(views[1]->gates[b0].arrival, 1u);
  EXPECT_EQ(views[1]->gates[b1].arrival, 1u);
  EXPECT_EQ(views[0]->gates[b1].completion, 1u);
}

// A buffer across two mapped chunks, and memory mapped while a plan is armed.
TEST(Plan, BufferSpanningChunksAndGrowthWhileArmed) {
  constexpr int64_t kChunk = 64 * 1024;
  Group g = host_group(2, kChunk);
  SymmetricBuffer pad = *g.allocate(kChunk - 4096);
  Schedule s = *chunks(ScheduleView::linear(40000, 1), 2, 3);  // 80 KB: over the boundary
  SymmetricBuffer buf = *g.allocate(s.bytes());
  ASSERT_LT(buf.offset(), kChunk);
  ASSERT_GT(buf.offset() + static_cast<int64_t>(buf.bytes()), kChunk);
  TriggeredPlan plan = *TriggeredPlan::create(g, buf, same(s, 2));
  void* before = buf.data(1);
  int64_t mapped = g.mapped_bytes();
  std::vector<SymmetricBuffer> more;
  for (int i = 0; i < 8; ++i) more.push_back(*g.allocate(kChunk));
  ASSERT_GT(g.mapped_bytes(), mapped);
  EXPECT_EQ(buf.data(1), before);
  fill(buf, s, 2, 1);
  ASSERT_TRUE(plan.run().ok());
  expect_delivered(buf, s, 2, 1);
  // Later epochs reuse the copies worked out when the plan was made, which
  // growth leaves where they were.
  for (int i = 0; i < 8; ++i) more.push_back(*g.allocate(kChunk));
  ASSERT_TRUE(plan.next_epoch().ok());
  fill(buf, s, 2, 2);
  ASSERT_TRUE(plan.run().ok());
  expect_delivered(buf, s, 2, 2);
}

// Epochs whose chains were armed ahead by the previous end deliver the same
// bytes as epochs armed by next_epoch().
TEST(Plan, EpochsArmedAheadDeliver) {
  constexpr int kWorld = 3;
  Group g = host_group(kWorld);
  Schedule s = *chunks(ScheduleView::linear(8192), kWorld, 4);
  SymmetricBuffer buf = *g.allocate(s.bytes());
  TriggeredPlan plan = *TriggeredPlan::create(g, buf, std::vector<Schedule>(kWorld, s), {.arm_ahead = true});
  for (uint64_t epoch = 1; epoch <= 20; ++epoch) {
    fill(buf, s, kWorld, epoch);
    ASSERT_TRUE(plan.run().ok()) << epoch;
    expect_delivered(buf, s, kWorld, epoch);
    ASSERT_TRUE(plan.next_epoch().ok());
    EXPECT_EQ(plan.epoch(), epoch + 1);
    EXPECT_EQ(plan.state(), PlanState::kArmed);
  }
  EXPECT_TRUE(plan.destroy().ok());
}

// 1000 kernel-driven epochs with no stale or misplaced element.
TEST(Plan, ThousandEpochSoak) {
  Group g = host_group(2);
  auto ag = *samples::AllGather::create(g, {.rows = 40, .cols = 100, .programs = 2, .check_programs = 1});
  ASSERT_TRUE(ag->arm().ok());
  int64_t wrong = 0;
  for (int epoch = 1; epoch <= 1000; ++epoch) {
    absl::StatusOr<int64_t> w = ag->run_epoch();
    ASSERT_TRUE(w.ok()) << "epoch " << epoch << ": " << w.status();
    wrong += *w;
    ASSERT_TRUE(ag->plan().next_epoch().ok());
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(ag->plan().epoch(), 1001u);
}

}  // namespace
}  // namespace tessel
