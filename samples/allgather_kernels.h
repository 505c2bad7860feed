// The triggered all-gather's kernels: each rank's producer, which writes
// its shard and publishes it wave by wave, and the check that counts wrong
// elements once every batch has come.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "dsl/builder.h"
#include "dsl/ops.h"
#include "tessel/tessel.h"

namespace samples {

using namespace tessel;  // NOLINT: kernels read like the DSL's documentation

// --- Triggered all-gather. The gathered buffer is i32 [world * rows, cols]:
// rank r's shard is rows [r * rows, (r + 1) * rows), written by r's producer
// and carried to every peer by a plan with a waves() schedule.
inline constexpr int kAgBM = 32, kAgBN = 64, kAgCheckBlock = 1024;

// What element `index` of the gathered buffer holds in `epoch`: an element
// left from an older epoch or copied to the wrong place differs from it.
inline int32_t allgather_value(uint64_t epoch, int64_t index) {
  return static_cast<int32_t>(((epoch & 0xFF) << 24) | (static_cast<uint64_t>(index) & 0xFFFFFF));
}

// Persistent over the shard's [kAgBM, kAgBN] tiles in row-major order. A
// batch holds W waves of tiles, as waves(view, world, {kAgBM, kAgBN}, P,
// kRowMajor, W) numbers them: a program publishes batch first_batch + t /
// (P * W) after its last tile in it. So that benchmarks can make the
// producer as slow as the transfer it overlaps, each element first goes
// through `rounds` multiply-adds and as many that undo them (work on the
// chip, in registers), and each tile is written `passes` times, the last
// pass with the final values (work on the GPU's memory, which the transfer
// shares). With `defer`, every publish but a program's last leaves the
// system-scope fence to the rank's next publish (TriggeredView::publish).
// Without `publishes`, the same work with no publish at all (the view is
// not read): what the producer costs a program that hands nothing off.
inline absl::StatusOr<Kernel> allgather_producer_kernel(bool publishes = true) {
  // x * kMix + kStep, undone by (x - kStep) * kUnmix (mod 2^32).
  constexpr int32_t kMix = -1640531535, kUnmix = 244002641, kStep = 12345;
  KernelBuilder k(publishes ? "allgather_producer" : "allgather_producer_alone");
  TriggeredView view = k.triggered_view("plan");
  Value buf = k.arg(ptr(i32), "buf");
  Value rank = k.arg(i32, "rank"), rows = k.arg(i32, "rows"), cols = k.arg(i32, "cols");
  Value epoch = k.arg(i32, "epoch"), first_batch = k.arg(i32, "first_batch"), passes = k.arg(i32, "passes");
  Value rounds = k.arg(i32, "rounds"), waves_per_batch = k.arg(i32, "waves_per_batch");
  Value defer = k.arg(i1, "defer");
  Value tiles_n = cdiv(cols, kAgBN), num_tiles = cdiv(rows, kAgBM) * tiles_n;
  k.for_each_tile(num_tiles, [&](Value t) {
    Value r = expand_dims(t / tiles_n * kAgBM + k.arange(0, kAgBM), 1);  // [BM, 1] i32
    Value c = expand_dims(t % tiles_n * kAgBN + k.arange(0, kAgBN), 0);  // [1, BN] i32
    Value index = (rank * rows + r) * cols + c;                           // [BM, BN] i32
    Value value = ((epoch & 0xFF) << 24) | (index & 0xFFFFFF);            // [BM, BN] i32
    auto write = [&](Value v) {
      k.for_range(0, passes, 1, [&](Value pass) {
        store(buf + index, v + (pass - (passes - 1)), (r < rows) & (c < cols));
      });
    };
    // Without rounds the values are written as computed: through the two
    // empty loops the write passes measured 17 % slower.
    k.if_(
        rounds > 0,
        [&] {
          Var x = k.var(value);
          k.for_range(0, rounds, 1, [&](Value) { x = x * kMix + kStep; });
          k.for_range(0, rounds, 1, [&](Value) { x = (x - kStep) * kUnmix; });
          write(x);
        },
        [&] { write(value); });
    if (!publishes) return;
    Value wave = t / k.num_programs();
    k.if_((wave % waves_per_batch == waves_per_batch - 1) | (t + k.num_programs() >= num_tiles),
          [&] { view.publish(first_batch + wave / waves_per_batch, defer & (t + k.num_programs() < num_tiles)); });
  });
  return k.build();
}

// Waits for every batch (its own ones read ready, the others arrival), then
// counts elements of the gathered buffer that differ from allgather_value.
inline absl::StatusOr<Kernel> allgather_check_kernel() {
  KernelBuilder k("allgather_check");
  TriggeredView view = k.triggered_view("plan");
  Value buf = k.arg(ptr(i32), "buf");
  Value total = k.arg(i32, "total"), batches = k.arg(i32, "batches"), epoch = k.arg(i32, "epoch");
  Value errors = k.arg(ptr(i32), "errors");
  k.for_range(0, batches, 1, [&](Value b) { view.wait(b); });
  k.for_each_tile(cdiv(total, kAgCheckBlock), [&](Value block) {
    Value offs = block * kAgCheckBlock + k.arange(0, kAgCheckBlock);  // [B] i32
    Value mask = offs < total;                                         // [B] i1
    Value v = load(buf + offs, mask, 0);                               // [B] i32
    Value bad = (v != (((epoch & 0xFF) << 24) | (offs & 0xFFFFFF))) & mask;
    atomic_add(errors, sum(cast(bad, i32), 0));
  });
  return k.build();
}

}  // namespace samples
