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
ChainOp write(Lane lane, std::vector<WordWrite> writes) {
  ChainOp op = make(ChainOp::Kind::kWrite, lane);
  op.writes = std::move(writes);
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

std::vector<ChainOp> chain_ops(const ArmedBatch& b, ChainPlace place) {
  using Kind = ChainOp::Kind;
  const Lane gate{b.owner, Lane::kGate}, arrivals{b.owner, Lane::kArrival};
  const bool pipelined = std::any_of(b.deliveries.begin(), b.deliveries.end(),
                                     [](const ArmedBatch::Delivery& d) { return delivery_bytes(d) >= kPipelineBytes; });
  // Copy streams write the arrivals themselves, else the arrival stream does.
  const bool direct_arrival = !pipelined || place.last;
  const WordWrite completion{b.completion, b.epoch};
  std::vector<ChainOp> ops;
  if (pipelined || b.deliveries.empty()) {
    ops.push_back(wait(gate, b.ready, b.epoch));
    ops.push_back(stage(Kind::kRecord, gate, gate));
  }
  // On the delivery's copy stream: wait for the gate (or its stage event),
  // then copy; returns that stream.
  auto deliver = [&](const ArmedBatch::Delivery& d) {
    const Lane copies{b.owner, d.peer};
    ops.push_back(pipelined ? stage(Kind::kWaitEvent, copies, gate) : wait(copies, b.ready, b.epoch));
    for (const ChainCopy& c : d.copies) ops.push_back(copy(copies, c));
    return copies;
  };
  if (direct_arrival && b.deliveries.size() == 1) {
    // One direct chain does it all, the completion in the arrival's write.
    const ArmedBatch::Delivery& d = b.deliveries[0];
    const Lane copies = deliver(d);
    ops.push_back(write(copies, {{d.arrival, b.epoch}, completion}));
    return ops;
  }
  ChainOp writes = write(arrivals, {});
  for (const ArmedBatch::Delivery& d : b.deliveries) {
    const Lane copies = deliver(d);
    if (direct_arrival) {
      ops.push_back(write(copies, {{d.arrival, b.epoch}}));
    } else {
      writes.writes.push_back({d.arrival, b.epoch});
    }
    ops.push_back(stage(Kind::kRecord, copies, copies));
  }
  for (const ArmedBatch::Delivery& d : b.deliveries) {
    ops.push_back(stage(Kind::kWaitEvent, arrivals, Lane{b.owner, d.peer}));
  }
  if (b.deliveries.empty()) ops.push_back(stage(Kind::kWaitEvent, arrivals, gate));
  writes.writes.push_back(completion);
  ops.push_back(std::move(writes));
  return ops;
}

std::vector<std::vector<ChainOp>> epoch_ops(const std::vector<ArmedBatch>& batches) {
  std::map<int, size_t> last;  // per owner, the index of its last batch
  for (size_t i = 0; i < batches.size(); ++i) last[batches[i].owner] = i;
  std::vector<std::vector<ChainOp>> ops;
  for (size_t i = 0; i < batches.size(); ++i) {
    ops.push_back(chain_ops(batches[i], {.last = last[batches[i].owner] == i}));
  }
  return ops;
}

std::vector<Lane> finishing_lanes(const std::vector<std::vector<ChainOp>>& batches) {
  // A lane is covered when its last command is a record that another lane
  // waited for afterwards: that lane finishes after it.
  std::map<Lane, bool> last_is_record, covered;
  for (const std::vector<ChainOp>& ops : batches) {
    for (const ChainOp& op : ops) {
      last_is_record[op.lane] = op.kind == ChainOp::Kind::kRecord;
      covered[op.lane] = false;
      if (op.kind == ChainOp::Kind::kWaitEvent && op.event != op.lane && last_is_record[op.event]) {
        covered[op.event] = true;
      }
    }
  }
  std::vector<Lane> lanes;
  for (const auto& [lane, is_covered] : covered) {
    if (!is_covered) lanes.push_back(lane);
  }
  return lanes;
}

std::vector<ChainOp> finish(std::vector<std::vector<ChainOp>>& batches, const std::map<Lane, uint64_t*>& done,
                            uint64_t token) {
  std::map<Lane, ChainOp*> last;
  for (std::vector<ChainOp>& ops : batches) {
    for (ChainOp& op : ops) last[op.lane] = &op;
  }
  std::vector<ChainOp> ops;
  for (const auto& [lane, word] : done) {
    auto it = last.find(lane);
    if (it != last.end() && it->second->kind == ChainOp::Kind::kWrite) {
      it->second->writes.push_back({word, token});
    } else {
      ops.push_back(write(lane, {{word, token}}));
    }
  }
  return ops;
}

void count_ops(const std::vector<ChainOp>& ops, LaneCounts& counts) {
  for (const ChainOp& op : ops) {
    if (op.kind != ChainOp::Kind::kRecord && op.kind != ChainOp::Kind::kWaitEvent) ++counts[op.lane];
  }
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
