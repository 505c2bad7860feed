#include "runtime/cuda/chains.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessel::cuda {
namespace {

using Kind = ChainOp::Kind;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Gate words of one batch owned by rank 0; deliveries to ranks 1.. of
// `bytes` each, in `pieces` linear copies.
struct Words {
  uint64_t ready = 0, completion = 0, arrival[8] = {};
};

ArmedBatch batch(Words& w, int peers, int64_t bytes, int pieces = 1) {
  ArmedBatch b;
  b.owner = 0;
  b.epoch = 7;
  b.ready = &w.ready;
  b.completion = &w.completion;
  for (int p = 1; p <= peers; ++p) {
    ArmedBatch::Delivery d;
    d.peer = p;
    d.arrival = &w.arrival[p];
    for (int i = 0; i < pieces; ++i) d.copies.push_back({.src = 0, .dst = 0, .width = bytes / pieces});
    b.deliveries.push_back(d);
  }
  return b;
}

std::vector<Kind> kinds_on(const std::vector<ChainOp>& ops, Lane lane) {
  std::vector<Kind> kinds;
  for (const ChainOp& op : ops) {
    if (op.lane == lane) kinds.push_back(op.kind);
  }
  return kinds;
}

std::vector<uint64_t*> words(const ChainOp& op) {
  std::vector<uint64_t*> w;
  for (const WordWrite& x : op.writes) w.push_back(x.word);
  return w;
}

constexpr Lane kGate{0, Lane::kGate}, kArrival{0, Lane::kArrival};

// The kinds of commands rank 0's batch puts on its gate stream, on each copy
// stream to ranks 1..peers, and on its arrival stream.
void expect_lanes(const std::vector<ChainOp>& ops, int peers, const std::vector<Kind>& gate,
                  const std::vector<Kind>& copies, const std::vector<Kind>& arrivals) {
  EXPECT_EQ(kinds_on(ops, kGate), gate);
  for (int p = 1; p <= peers; ++p) EXPECT_EQ(kinds_on(ops, Lane{0, p}), copies) << "copy stream to " << p;
  EXPECT_EQ(kinds_on(ops, kArrival), arrivals);
}
constexpr ChainPlace kMiddle{}, kLast{.last = true};

TEST(Chains, SmallDeliveryToOnePeerIsOneDirectChainOnItsCopyStream) {
  Words w;
  std::vector<ChainOp> ops = chain_ops(batch(w, 1, 4096, 2), kMiddle);
  expect_lanes(ops, 1, {}, {Kind::kWait, Kind::kCopy, Kind::kCopy, Kind::kWrite}, {});
  EXPECT_EQ(ops[0].word, &w.ready);
  EXPECT_EQ(ops[0].value, 7u);
  EXPECT_THAT(words(ops.back()), ElementsAre(&w.arrival[1], &w.completion));
  EXPECT_EQ(ops.back().writes[0].value, 7u);
}

TEST(Chains, SmallDeliveriesToSeveralPeersCompleteOnTheArrivalStream) {
  Words w;
  std::vector<ChainOp> ops = chain_ops(batch(w, 2, 4096), kMiddle);
  expect_lanes(ops, 2, {}, {Kind::kWait, Kind::kCopy, Kind::kWrite, Kind::kRecord},
               {Kind::kWaitEvent, Kind::kWaitEvent, Kind::kWrite});
  EXPECT_THAT(words(ops.back()), ElementsAre(&w.completion));
}

TEST(Chains, LargeDeliveriesArePipelinedAndTheirArrivalsWrittenInOneCommand) {
  Words w;
  std::vector<ChainOp> ops = chain_ops(batch(w, 3, kPipelineBytes), kMiddle);
  expect_lanes(ops, 3, {Kind::kWait, Kind::kRecord}, {Kind::kWaitEvent, Kind::kCopy, Kind::kRecord},
               {Kind::kWaitEvent, Kind::kWaitEvent, Kind::kWaitEvent, Kind::kWrite});
  EXPECT_THAT(words(ops.back()), ElementsAre(&w.arrival[1], &w.arrival[2], &w.arrival[3], &w.completion));
}

TEST(Chains, AnOwnersLastPipelinedBatchWritesArrivalsOnTheCopyStreams) {
  Words w;
  std::vector<ChainOp> ops = chain_ops(batch(w, 2, kPipelineBytes), kLast);
  expect_lanes(ops, 2, {Kind::kWait, Kind::kRecord}, {Kind::kWaitEvent, Kind::kCopy, Kind::kWrite, Kind::kRecord},
               {Kind::kWaitEvent, Kind::kWaitEvent, Kind::kWrite});
  EXPECT_THAT(words(ops.back()), ElementsAre(&w.completion));
}

TEST(Chains, AnOwnersLastPipelinedBatchToOnePeerIsOneChainAfterTheGateStream) {
  Words w;
  std::vector<ChainOp> ops = chain_ops(batch(w, 1, kPipelineBytes), kLast);
  expect_lanes(ops, 1, {Kind::kWait, Kind::kRecord}, {Kind::kWaitEvent, Kind::kCopy, Kind::kWrite}, {});
  EXPECT_THAT(words(ops.back()), ElementsAre(&w.arrival[1], &w.completion));
}

TEST(Chains, EpochPlacesEachOwnersLastBatch) {
  Words w[4];
  std::vector<ArmedBatch> batches;
  for (int i = 0; i < 4; ++i) {
    batches.push_back(batch(w[i], 1, kPipelineBytes));
    batches.back().owner = i % 2;  // 0, 1, 0, 1
    batches.back().deliveries[0].peer = 1 - i % 2;
  }
  std::vector<std::vector<ChainOp>> ops = epoch_ops(batches);
  ASSERT_EQ(ops.size(), 4u);
  for (int owner = 0; owner < 2; ++owner) {
    const Lane copies{owner, 1 - owner};
    EXPECT_THAT(kinds_on(ops[owner], copies), ElementsAre(Kind::kWaitEvent, Kind::kCopy, Kind::kRecord)) << owner;
    EXPECT_THAT(kinds_on(ops[owner + 2], copies), ElementsAre(Kind::kWaitEvent, Kind::kCopy, Kind::kWrite)) << owner;
  }
}

// Events are re-recorded per batch: every wait must come after the record
// it waits for and before that event's next record.
TEST(Chains, EveryEventWaitFollowsItsRecord) {
  Words w[3];
  for (int64_t bytes : {int64_t{4096}, kPipelineBytes}) {
    std::vector<std::vector<ChainOp>> ops =
        epoch_ops({batch(w[0], 3, bytes), batch(w[1], 3, bytes), batch(w[2], 3, bytes)});
    std::vector<Lane> recorded;
    for (const std::vector<ChainOp>& b : ops) {
      for (const ChainOp& op : b) {
        if (op.kind == Kind::kRecord) recorded.push_back(op.event);
        if (op.kind == Kind::kWaitEvent) {
          EXPECT_NE(std::find(recorded.begin(), recorded.end(), op.event), recorded.end()) << bytes;
        }
      }
    }
  }
}

TEST(Chains, BatchWithoutPeersCompletesAfterItsGate) {
  Words w;
  for (ChainPlace place : {kMiddle, kLast}) {
    std::vector<ChainOp> ops = chain_ops(batch(w, 0, 0), place);
    EXPECT_THAT(kinds_on(ops, kGate), ElementsAre(Kind::kWait, Kind::kRecord));
    EXPECT_THAT(kinds_on(ops, kArrival), ElementsAre(Kind::kWaitEvent, Kind::kWrite));
    EXPECT_THAT(words(ops.back()), ElementsAre(&w.completion));
  }
}

// Copies, waits and writes fill a stream's queue; event records and event
// waits do not.
TEST(Chains, CountsCommandsThatFillAStreamPerLane) {
  Words w;
  LaneCounts counts;
  for (int i = 0; i < 10; ++i) count_ops(chain_ops(batch(w, 2, kPipelineBytes, 2), kMiddle), counts);
  EXPECT_EQ(counts[kGate], 10);
  EXPECT_EQ((counts[Lane{0, 1}]), 20);
  EXPECT_EQ((counts[Lane{0, 2}]), 20);
  EXPECT_EQ(counts[kArrival], 10);
  // A direct chain: the wait, the copy and the write, on its copy stream.
  LaneCounts direct;
  count_ops(chain_ops(batch(w, 1, 4096), kMiddle), direct);
  EXPECT_EQ((direct[Lane{0, 1}]), 3);
}

// A lane whose last record another lane waited for finishes before that
// lane; the rest must each say when they are done.
TEST(Chains, LanesNoOtherLaneWaitsForFinishTheEpoch) {
  Words w[3];
  // Rank 0: three pipelined batches to 1 and 2; the last writes the
  // arrivals on the copy streams, which then record for the arrival stream.
  std::vector<std::vector<ChainOp>> ops = epoch_ops(
      {batch(w[0], 2, kPipelineBytes), batch(w[1], 2, kPipelineBytes), batch(w[2], 2, kPipelineBytes)});
  EXPECT_THAT(finishing_lanes(ops), ElementsAre(kArrival));
  // To one peer the last batch is a chain of its own: the copy stream ends
  // too, and no stream follows the gate stream's last record but it.
  ops = epoch_ops({batch(w[0], 1, kPipelineBytes), batch(w[1], 1, kPipelineBytes), batch(w[2], 1, kPipelineBytes)});
  EXPECT_THAT(finishing_lanes(ops), ElementsAre(kArrival, (Lane{0, 1})));
}

TEST(Chains, FinishingLanesWriteTheirTokenInTheirLastWriteOrAfterIt) {
  Words w[2];
  uint64_t done_copies = 0, done_arrivals = 0, done_gate = 0;
  std::vector<std::vector<ChainOp>> ops = epoch_ops({batch(w[0], 1, kPipelineBytes), batch(w[1], 1, kPipelineBytes)});
  std::vector<ChainOp> tail =
      finish(ops, {{Lane{0, 1}, &done_copies}, {kArrival, &done_arrivals}, {kGate, &done_gate}}, 42);
  // The copy stream's and the arrival stream's last commands are writes.
  EXPECT_THAT(words(ops[1].back()), ElementsAre(&w[1].arrival[1], &w[1].completion, &done_copies));
  EXPECT_EQ(ops[1].back().writes.back().value, 42u);
  EXPECT_THAT(words(ops[0].back()), ElementsAre(&w[0].arrival[1], &w[0].completion, &done_arrivals));
  // The gate stream's is a record: the token comes after it.
  ASSERT_EQ(tail.size(), 1u);
  EXPECT_EQ(tail[0].lane, kGate);
  EXPECT_THAT(words(tail[0]), ElementsAre(&done_gate));
}

std::string name(Lane lane) { return absl::StrCat("lane ", lane.owner, "/", lane.key); }

TEST(Chains, CapacityCountsWhatIsQueuedAlready) {
  LaneCounts queued{{Lane{0, 1}, 601}}, adding{{Lane{0, 1}, 400}, {kGate, 900}};
  EXPECT_TRUE(check_capacity({}, adding, 1000, name).ok());
  absl::Status s = check_capacity(queued, adding, 1000, name);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("queue 400 commands on lane 0/1 (601 more are queued"));
  EXPECT_THAT(s.message(), HasSubstr("at most 1000"));
  EXPECT_TRUE(check_capacity(queued, adding, 1001, name).ok());
}

}  // namespace
}  // namespace tessel::cuda
