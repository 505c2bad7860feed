// Internal to the CUDA backend: the commands an armed batch puts on its
// owner's streams, as data. The backend counts them per stream before it
// enqueues any, because a stream holds only so many commands behind a closed
// gate: past that, enqueueing blocks until a gate opens, and a gate that
// only a kernel launched after arming can open never does.
//
// A small delivery is one direct chain on its copy stream: wait until
// ready >= epoch, copy each segment, write the peer's arrival word. A large
// one is pipelined over streams tied by events:
//   gate stream (one per owner):      wait until ready >= epoch, record opened
//   copy stream (one per peer):       wait opened, copy each segment, record copied
//   arrival stream (one per owner):   wait copied (each peer), then one batched
//                                     write of every peer's arrival word
// The owner's completion word is written once every peer has the batch: by
// the arrival stream, in the same batched write, or where a batch is one
// direct chain (one peer), by that chain, in the arrival's write.
//
// Each event hand-off adds about 3 us from gate to arrival. After an
// epoch's last copy on a stream no other copy queues behind that stream's
// own write, so an owner's last batch writes the arrivals on its copy
// streams (and, to one peer, the completion too). The gate stream stays at
// the start: waiting on the gate on the copy stream itself helped when every
// gate was open already (+2.5 % at 64 MiB) but cost 4-7 % when gates open
// one by one, as producers open them (plan_bench on 2 H200s). Doing so for
// an owner's first batch only gained 2-3 % on 64 MiB epochs of 2-8 batches
// opened by a kernel, yet every later batch paid for it where gates open
// one by one: a producer's 128 batches of 1 MiB moved in 991-1011 us
// instead of 866-873 us, and host-opened epochs of 32 batches lost 6 % on
// both machines where the gate stream did not also wait for that gate. Why
// one wait on a copy stream slows the copies after it is not known. For an
// owner's last batch, after which no copy follows, it gained nothing either
// (64 MiB epochs 0.919-0.936 against 0.922-0.942; overlap unchanged). Nor
// did a lead copy stream per peer for an owner's first batch, waiting on the
// gate itself while the copy streams only wait on events: every copy to
// that peer got slower (a producer's 128 batches 1000-1023 us instead of
// 877-885), so the wait slows the copy engine's other streams too.
// measured (docs/triggered.md): a stream waiting on a gate a kernel opens moves on
// about 6 us after the store; a hand-off by event adds up to 2.5 us more,
// yet a 4 KiB copy after it finished no later than after a direct wait.
//
// Every stream whose last command no other stream waits for afterwards ends
// the epoch by writing a token to a word of host memory that the host polls,
// in its last batched write where it has one.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/plans/plan_backend.h"

namespace tessel::cuda {

// One of an owner's streams: the copy stream to a peer (key = the peer's
// rank), the gate stream or the arrival stream.
struct Lane {
  static constexpr int kGate = -2;
  static constexpr int kArrival = -3;
  int owner = 0;
  int key = 0;
  auto operator<=>(const Lane&) const = default;
};

// One word written by a kWrite.
struct WordWrite {
  uint64_t* word = nullptr;
  uint64_t value = 0;
  auto operator<=>(const WordWrite&) const = default;
};

struct ChainOp {
  enum class Kind {
    kWait,       // until *word >= value (cyclic compare)
    kWrite,      // each of writes, in order, one batched command
    kCopy,       // copy
    kRecord,     // record the stage event of `event` on lane
    kWaitEvent,  // wait on lane for the last record of the stage event of `event`
  };
  Kind kind = Kind::kWait;
  Lane lane;
  uint64_t* word = nullptr;  // kWait
  uint64_t value = 0;        // kWait
  std::vector<WordWrite> writes;
  ChainCopy copy;
  Lane event;  // stage events: (owner, kGate) gate opened, (owner, peer) copies to peer done
};

// Deliveries of at least this many bytes are pipelined: at ~350 GB/s a
// 1 MiB copy takes about as long as the hand-offs pipelining adds.
inline constexpr int64_t kPipelineBytes = int64_t{1} << 20;

// Commands per lane that take a place in its stream's queue.
using LaneCounts = std::map<Lane, int64_t>;

// Where a batch stands among its owner's batches in an epoch.
struct ChainPlace {
  bool last = false;  // no batch of its owner is armed after it in the epoch
};

// The commands of one batch, in the order they are enqueued.
std::vector<ChainOp> chain_ops(const ArmedBatch& batch, ChainPlace place);

// Each batch's commands (chain_ops), in arming order.
std::vector<std::vector<ChainOp>> epoch_ops(const std::vector<ArmedBatch>& batches);

// The lanes of `batches` whose last command no other lane waits for
// afterwards: each must say itself when it is done.
std::vector<Lane> finishing_lanes(const std::vector<std::vector<ChainOp>>& batches);

// Has each lane in `done` write `token` to its word last: in the lane's last
// command where that is a write, else in a command of its own (returned).
std::vector<ChainOp> finish(std::vector<std::vector<ChainOp>>& batches, const std::map<Lane, uint64_t*>& done,
                            uint64_t token);

// Adds the commands of `ops` that take a place in their stream's queue:
// copies, waits and writes. Event records and event waits take none (on an
// H200 a stream behind a closed gate took 200 000 of them, event waits on
// records still queued elsewhere included, and still 1020 copies after
// them; docs/triggered.md).
void count_ops(const std::vector<ChainOp>& ops, LaneCounts& counts);

// OK if every lane's `queued` commands plus those `adding` fit in
// `capacity`; else ResourceExhausted naming the first lane that overflows
// (described by `name`).
absl::Status check_capacity(const LaneCounts& queued, const LaneCounts& adding, int64_t capacity,
                            const std::function<std::string(Lane)>& name);

}  // namespace tessel::cuda
