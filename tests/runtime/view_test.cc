// Triggered-view ops on the host target against hand-made gates: the
// contributor counter, the release of ready, arrival and completion reads,
// bounded waits and bad batch numbers, and the alarm word errors raise.
#include <random>
#include <vector>

#include "base/view_abi.h"
#include "dsl/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/device.h"

namespace tessel {
namespace {

struct Gates {
  explicit Gates(std::vector<ViewBatch> b, uint32_t rank, uint64_t epoch) : rows(b.size()), batches(std::move(b)) {
    header = {kViewVersion, static_cast<uint32_t>(batches.size()), rank, 2, epoch, 1000, rows.data(),
              batches.data(), 0, &alarm, 0};
  }
  std::vector<GateRow> rows;
  std::vector<ViewBatch> batches;
  uint64_t alarm = 0;
  ViewHeader header;
};

// Each program writes its element, then publishes batch pid / per_batch.
Kernel producer(int per_batch) {
  KernelBuilder k("producer");
  TriggeredView view = k.triggered_view("plan");
  Value out = k.arg(ptr(i32), "out");
  Value epoch = k.arg(i32, "epoch");
  Value pid = k.program_id();
  store(out + pid, epoch * 1000 + pid);
  view.publish(pid / per_batch);
  return *k.build();
}

TEST(TriggeredView, LastContributorOpensTheGate) {
  constexpr int kBatches = 3, kPerBatch = 8;
  Gates g({{0, kPerBatch}, {0, kPerBatch}, {0, kPerBatch}}, 0, 0);
  Device d = *Device::open("host:2");
  Function fn = *d.compile(producer(kPerBatch));
  std::vector<int32_t> out(kBatches * kPerBatch, -1);
  for (uint64_t epoch = 1; epoch <= 10; ++epoch) {
    g.header.epoch = epoch;
    ASSERT_TRUE(fn.launch({.grid = kBatches * kPerBatch}, &g.header, out.data(), static_cast<int32_t>(epoch)).ok());
    for (int b = 0; b < kBatches; ++b) {
      EXPECT_EQ(g.rows[b].ready, epoch) << b;
      EXPECT_EQ(g.rows[b].counter, epoch * kPerBatch) << b;
    }
    for (int i = 0; i < kBatches * kPerBatch; ++i) ASSERT_EQ(out[i], static_cast<int32_t>(epoch) * 1000 + i);
  }
  EXPECT_EQ(g.header.status, 0u);
  EXPECT_EQ(g.alarm, 0u);
}

// A persistent producer: program p writes element t of each batch t / P
// for its tiles t = p, p + P, ..., and publishes each batch, deferring all
// but its last publish.
Kernel deferring_producer() {
  KernelBuilder k("deferring_producer");
  TriggeredView view = k.triggered_view("plan");
  Value out = k.arg(ptr(i32), "out");
  Value epoch = k.arg(i32, "epoch"), tiles = k.arg(i32, "tiles");
  k.for_each_tile(tiles, [&](Value t) {
    store(out + t, epoch * 1000 + t);
    view.publish(t / k.num_programs(), t + k.num_programs() < tiles);
  });
  return *k.build();
}

TEST(TriggeredView, DeferredReleasesAreAllCarried) {
  constexpr int kPrograms = 4, kBatches = 6;
  std::vector<ViewBatch> batches(kBatches, {0, kPrograms});
  Gates g(batches, 0, 0);
  Device d = *Device::open("host:3");
  Function fn = *d.compile(deferring_producer());
  std::vector<int32_t> out(kPrograms * kBatches, -1);
  for (uint64_t epoch = 1; epoch <= 20; ++epoch) {
    g.header.epoch = epoch;
    ASSERT_TRUE(fn.launch({.grid = kPrograms}, &g.header, out.data(), static_cast<int32_t>(epoch),
                          kPrograms * kBatches)
                    .ok());
    for (int b = 0; b < kBatches; ++b) EXPECT_EQ(g.rows[b].ready, epoch) << "batch " << b << ", epoch " << epoch;
    EXPECT_EQ(g.header.carry, 0u) << epoch;
    for (int i = 0; i < kPrograms * kBatches; ++i) ASSERT_EQ(out[i], static_cast<int32_t>(epoch) * 1000 + i);
  }
}

// One program, one publish, deferred: nothing carries it.
TEST(TriggeredView, ADeferredReleaseNothingCarriesLeavesTheGateClosed) {
  KernelBuilder k("defers_once");
  TriggeredView view = k.triggered_view("plan");
  view.publish(1, true);
  Device d = *Device::open("host:1");
  Function fn = *d.compile(*k.build());
  Gates g({{0, 1}, {0, 1}}, 0, 9);
  ASSERT_TRUE(fn.launch({}, &g.header).ok());
  EXPECT_EQ(g.rows[1].ready, 0u);
  EXPECT_EQ(g.rows[1].counter, 1u);
  EXPECT_EQ(g.header.carry, (uint64_t{9} << 32) | 2);
  EXPECT_EQ(g.header.carry, carry_tag(9, 1));
}

// A later publish, or a wait, opens what an earlier one deferred; a carry
// left from another epoch is dropped.
TEST(TriggeredView, PublishesAndWaitsCarryDeferredReleases) {
  KernelBuilder k("carriers");
  TriggeredView view = k.triggered_view("plan");
  Value wait_instead = k.arg(i1, "wait_instead");
  view.publish(0, true);
  k.if_(wait_instead, [&] { view.wait(0); }, [&] { view.publish(1); });
  Device d = *Device::open("host:1");
  Function fn = *d.compile(*k.build());
  for (bool wait_instead : {false, true}) {
    Gates g({{0, 1}, {0, 1}}, 0, 4);
    ASSERT_TRUE(fn.launch({}, &g.header, wait_instead).ok());
    EXPECT_EQ(g.rows[0].ready, 4u) << wait_instead;
    EXPECT_EQ(g.rows[1].ready, wait_instead ? 0u : 4u) << wait_instead;
    EXPECT_EQ(g.rows[0].error, 0u) << wait_instead;
    EXPECT_EQ(g.header.carry, 0u) << wait_instead;
  }
  Gates stale({{0, 1}, {0, 1}}, 0, 5);
  stale.header.carry = carry_tag(4, 1);  // left in epoch 4
  ASSERT_TRUE(fn.launch({}, &stale.header, false).ok());
  EXPECT_EQ(stale.rows[0].ready, 5u);
  EXPECT_EQ(stale.rows[1].ready, 5u);  // by its own publish, this epoch
  EXPECT_EQ(stale.header.carry, 0u);
}

TEST(TriggeredView, ArrivedReadsReadyForOwnBatchesAndArrivalForOthers) {
  KernelBuilder k("probe");
  TriggeredView view = k.triggered_view("plan");
  Value dst = k.arg(ptr(i32), "out");
  for (int b = 0; b < 2; ++b) {
    store(dst + b, cast(view.arrived(b), i32));
    store(dst + 2 + b, cast(view.reusable(b), i32));
  }
  Device d = *Device::open("host:1");
  Function fn = *d.compile(*k.build());
  Gates g({{0, 1}, {1, 1}}, 0, 5);  // batch 0 is ours, batch 1 rank 1's
  g.rows[0] = {5, 0, 4, 0, 5, {}};  // published this epoch; copies done for epoch 4 only
  g.rows[1] = {0, 5, 0, 0, 0, {}};  // rank 1's batch arrived here
  std::vector<int32_t> out(4, -1);
  ASSERT_TRUE(fn.launch({}, &g.header, out.data()).ok());
  EXPECT_EQ(out, (std::vector<int32_t>{1, 1, 0, 0}));
  g.header.epoch = 6;
  ASSERT_TRUE(fn.launch({}, &g.header, out.data()).ok());
  EXPECT_EQ(out, (std::vector<int32_t>{0, 0, 0, 0}));
}

TEST(TriggeredView, EpochsCompareOnTheLow32Bits) {
  KernelBuilder k("probe32");
  TriggeredView view = k.triggered_view("plan");
  Value dst = k.arg(ptr(i32), "out");
  store(dst, cast(view.arrived(0), i32));
  Device d = *Device::open("host:1");
  Function fn = *d.compile(*k.build());
  Gates g({{0, 1}}, 0, 7);
  g.rows[0].ready = (uint64_t{3} << 32) | 7;  // high bits are not part of the epoch
  int32_t out = -1;
  ASSERT_TRUE(fn.launch({}, &g.header, &out).ok());
  EXPECT_EQ(out, 1);
}

TEST(TriggeredView, WaitIsBoundedAndRecordsTimeout) {
  KernelBuilder k("waiter");
  TriggeredView view = k.triggered_view("plan");
  Value dst = k.arg(ptr(i32), "out");
  view.wait(1);
  store(dst, 42);
  Device d = *Device::open("host:1");
  Function fn = *d.compile(*k.build());
  Gates g({{1, 1}, {1, 1}}, 0, 3);
  int32_t out = 0;
  ASSERT_TRUE(fn.launch({}, &g.header, &out).ok());  // returns although nothing arrives
  EXPECT_EQ(out, 42);
  EXPECT_EQ(g.rows[1].error, kGateTimeout);
  EXPECT_EQ(g.rows[0].error, 0u);
  EXPECT_EQ(g.alarm, kGateTimeout);

  g.rows[1] = {0, 3, 0, 0, 0, {}};
  ASSERT_TRUE(fn.launch({}, &g.header, &out).ok());
  EXPECT_EQ(g.rows[1].error, 0u);
}

TEST(TriggeredView, BadBatchSetsTheViewStatus) {
  Gates g({{0, 1}}, 0, 1);
  Device d = *Device::open("host:1");
  Function fn = *d.compile(producer(1));
  int32_t out[2] = {};
  ASSERT_TRUE(fn.launch({.grid = 2}, &g.header, out, 1).ok());  // program 1 publishes batch 1 of 1
  EXPECT_EQ(g.header.status, kViewBadBatch);
  EXPECT_EQ(g.alarm, kViewBadBatch);
  EXPECT_EQ(g.rows[0].ready, 1u);
}

TEST(TriggeredView, LaunchChecksTheViewArgument) {
  Device d = *Device::open("host:1");
  Function fn = *d.compile(producer(1));
  int32_t out = 0;
  EXPECT_THAT(std::string(fn.launch({}, &out, &out, 1).message()),
              ::testing::HasSubstr("argument 0 'plan' expects triggered_view, got a pointer to i32"));
}

}  // namespace
}  // namespace tessel
