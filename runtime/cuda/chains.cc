#include "runtime/cuda/chains.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tessel::cuda {
namespace {

int64_t delivery_bytes(const ArmedBatch::Delivery& d) {
  int64_t bytes = 0;
  for (const ChainCopy& c : d.copies) bytes += c.width * c.height;
  return bytes;
}

ChainOp make(ChainOp::Kind kind, Lane lane) {
  ChainOp op;
  op.kind = kind;
  op.lane = lane;
  return op;
}
ChainOp wait(Lane lane, uint64_t* word, uint64_t value) {
  ChainOp op = make(ChainOp::Kind::kWait, lane);
  op.word = word;
  op.value = value;
  return op;
}
ChainOp write(Lane lane, std::vector<uint64_t*> words, uint64_t value) {
  ChainOp op = make(ChainOp::Kind::kWrite, lane);
  op.words = std::move(words);
  op.value = value;
  return op;
}
ChainOp copy(Lane lane, const ChainCopy& c) {
  ChainOp op = make(ChainOp::Kind::kCopy, lane);
  op.copy = c;
  return op;
}
// kRecord or kWaitEvent of the stage event of `event`.
ChainOp stage(ChainOp::Kind kind, Lane lane, Lane event) {
  ChainOp op = make(kind, lane);
  op.event = event;
  return op;
}

}  // namespace

std::vector<ChainOp> chain_ops(const ArmedBatch& b) {
  using Kind = ChainOp::Kind;
  const Lane gate{b.owner, Lane::kGate}, arrivals{b.owner, Lane::kArrival};
  const bool pipelined = std::any_of(b.deliveries.begin(), b.deliveries.end(),
                                     [](const ArmedBatch::Delivery& d) { return delivery_bytes(d) >= kPipelineBytes; });
  std::vector<ChainOp> ops;
  if (!pipelined && b.deliveries.size() == 1) {
    // One direct chain does it all, the completion in the arrival's write.
    const ArmedBatch::Delivery& d = b.deliveries[0];
    const Lane copies{b.owner, d.peer};
    ops.push_back(wait(copies, b.ready, b.epoch));
    for (const ChainCopy& c : d.copies) ops.push_back(copy(copies, c));
    ops.push_back(write(copies, {d.arrival, b.completion}, b.epoch));
    return ops;
  }
  if (pipelined || b.deliveries.empty()) {
    ops.push_back(wait(gate, b.ready, b.epoch));
    ops.push_back(stage(Kind::kRecord, gate, gate));
  }
  ChainOp writes = write(arrivals, {}, b.epoch);
  for (const ArmedBatch::Delivery& d : b.deliveries) {
    const Lane copies{b.owner, d.peer};
    if (pipelined) {
      ops.push_back(stage(Kind::kWaitEvent, copies, gate));
    } else {
      ops.push_back(wait(copies, b.ready, b.epoch));
    }
    for (const ChainCopy& c : d.copies) ops.push_back(copy(copies, c));
    // Direct, the copy stream writes the arrival itself and the arrival
    // stream only follows it; pipelined, the arrival stream writes it.
    if (pipelined) {
      writes.words.push_back(d.arrival);
    } else {
      ops.push_back(write(copies, {d.arrival}, b.epoch));
    }
    ops.push_back(stage(Kind::kRecord, copies, copies));
  }
  for (const ArmedBatch::Delivery& d : b.deliveries) {
    ops.push_back(stage(Kind::kWaitEvent, arrivals, Lane{b.owner, d.peer}));
  }
  if (b.deliveries.empty()) ops.push_back(stage(Kind::kWaitEvent, arrivals, gate));
  writes.words.push_back(b.completion);
  ops.push_back(std::move(writes));
  return ops;
}

std::vector<ChainOp> tail_ops(const std::vector<std::vector<ChainOp>>& batches, const std::map<int, uint64_t*>& done,
                              uint64_t token) {
  // A copy stream is covered when its last command is a record that its
  // owner's arrival stream waited for afterwards.
  std::map<Lane, bool> last_is_record, covered;
  for (const std::vector<ChainOp>& ops : batches) {
    for (const ChainOp& op : ops) {
      if (op.lane.key >= 0) {
        last_is_record[op.lane] = op.kind == ChainOp::Kind::kRecord;
        covered[op.lane] = false;
      }
      if (op.kind == ChainOp::Kind::kWaitEvent && op.lane.key == Lane::kArrival && op.event.key >= 0 &&
          last_is_record[op.event]) {
        covered[op.event] = true;
      }
    }
  }
  std::vector<ChainOp> ops;
  for (const auto& [lane, is_covered] : covered) {
    if (is_covered) continue;
    ops.push_back(stage(ChainOp::Kind::kRecord, lane, lane));
    ops.push_back(stage(ChainOp::Kind::kWaitEvent, Lane{lane.owner, Lane::kArrival}, lane));
  }
  for (const auto& [owner, word] : done) ops.push_back(write(Lane{owner, Lane::kArrival}, {word}, token));
  return ops;
}

void count_ops(const std::vector<ChainOp>& ops, LaneCounts& counts) {
  for (const ChainOp& op : ops) ++counts[op.lane];
}

absl::Status check_capacity(const LaneCounts& queued, const LaneCounts& adding, int64_t capacity,
                            const std::function<std::string(Lane)>& name) {
  for (const auto& [lane, n] : adding) {
    auto it = queued.find(lane);
    int64_t already = it == queued.end() ? 0 : it->second;
    if (already + n <= capacity) continue;
    std::string others = already == 0 ? "" : absl::StrCat(" (", already, " more are queued by chains armed earlier)");
    return absl::ResourceExhaustedError(absl::StrCat(
        "arming would queue ", n, " commands on ", name(lane), others, " behind closed gates, but a stream takes at "
        "most ", capacity, " before enqueueing blocks until a gate opens; use fewer batches, or batches with fewer "
        "segments, or end the epochs of plans armed earlier"));
  }
  return absl::OkStatus();
}

}  // namespace tessel::cuda
