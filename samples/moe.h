// A mixture-of-experts layer's token permutation (vLLM's
// moe_align_block_size): the router's choices grouped by expert, each
// expert's group padded to whole blocks, so that a grouped GEMM reads one
// expert's weights per block of rows. Built from histogram, cumsum, argsort,
// gather and cummax; deterministic, so every target gives the same bits.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "dsl/builder.h"
#include "dsl/ops.h"

namespace samples {

using namespace tessel;  // NOLINT: kernels read like the DSL's documentation

// The most positions the padded order of n choices over `experts` takes:
// each expert's group is padded by less than a block.
inline int64_t moe_align_capacity(int64_t n, int experts, int block) { return n + int64_t{experts} * (block - 1); }

// One program groups n choices: args ids [n] i32 (token t's j-th choice at
// t * k + j), n; sorted [moe_align_capacity] i32: the choices' indices,
// expert by expert and in order within each, each group padded with n to a
// multiple of `block`; block_experts [capacity / block] i32: each block's
// expert; offsets [experts + 1] i32: where each group starts, and the
// padded total last. Choices outside [0, experts) are dropped (an expert
// another rank holds). `chunk` choices at a time (a power of two, for the
// sort in registers).
inline absl::StatusOr<Kernel> moe_align_kernel(int experts, int block, int chunk = 1024) {
  KernelBuilder k("moe_align");
  Value ids = k.arg(ptr(i32), "ids"), n = k.arg(i32, "n");
  Value sorted = k.arg(ptr(i32), "sorted"), block_experts = k.arg(ptr(i32), "block_experts");
  Value offsets = k.arg(ptr(i32), "offsets");
  Value lane = k.arange(0, chunk);  // [C] i32

  Var counts = k.var(k.zeros({experts}, i32));  // [E] i32: choices per expert
  k.for_range(0, n, chunk, [&](Value i) {
    Value at = i + lane;  // [C] i32
    counts = counts + histogram(load(ids + at, at < n, 0), experts, at < n);
  });
  Value padded = (Value(counts) + (block - 1)) / block * block;  // [E] i32
  Value ends = cumsum(padded, 0);                                // [E] i32
  Value starts = ends - padded;                                  // [E] i32
  Value total = sum(padded, 0);                                  // i32
  store(offsets + k.arange(0, experts), starts);
  store(offsets + experts, total);

  // Each block's expert: how many groups end at or before its start. Its
  // positions past the expert's choices hold n.
  // Tiles of [rows, experts] and [rows, block]: at most 4096 elements each.
  const int rows = std::clamp(4096 / std::max(experts, block), 1, 128);
  Value pad_from = starts + counts;  // [E] i32
  Value blocks = total / block;
  k.for_range(0, blocks, rows, [&](Value b0) {
    Value b = b0 + k.arange(0, rows);                                                    // [R] i32
    Value owner = sum(cast(expand_dims(b * block, 1) >= expand_dims(ends, 0), i32), 1);  // [R] i32
    store(block_experts + b, owner, b < blocks);
    Value p = expand_dims(b * block, 1) + expand_dims(k.arange(0, block), 0);  // [R, B] i32
    store(sorted + p, n, expand_dims(b < blocks, 1) & (p >= expand_dims(gather(pad_from, owner, 0), 1)));
  });

  // Each chunk's choices in expert order (a stable sort), each written at
  // its group's next free position plus its place in its run.
  Var next = k.var(starts);  // [E] i32
  k.for_range(0, n, chunk, [&](Value i) {
    Value at = i + lane;                   // [C] i32
    Value v = load(ids + at, at < n, -1);  // [C] i32: past n, dropped
    Value order = argsort(v, 0);           // [C] i32
    Value s = gather(v, order, 0);         // [C] i32: v in order
    Value first = (lane == 0) | (s != gather(s, lane - 1, 0));
    Value place = lane - cummax(select(first, lane, 0), 0);  // [C] i32: within its run
    Value kept = (s >= 0) & (s < experts);
    store(sorted + gather(Value(next), s, 0) + place, i + order, kept);
    next = Value(next) + histogram(v, experts);
  });
  return k.build();
}

// The same grouping, on the host.
struct MoeAlignment {
  std::vector<int32_t> sorted;         // the padded total
  std::vector<int32_t> block_experts;  // total / block
  std::vector<int32_t> offsets;        // experts + 1
};
inline MoeAlignment moe_align_reference(const std::vector<int32_t>& ids, int experts, int block) {
  std::vector<std::vector<int32_t>> groups(experts);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= 0 && ids[i] < experts) groups[ids[i]].push_back(static_cast<int32_t>(i));
  }
  MoeAlignment out;
  for (int e = 0; e < experts; ++e) {
    out.offsets.push_back(static_cast<int32_t>(out.sorted.size()));
    std::vector<int32_t>& g = groups[e];
    out.sorted.insert(out.sorted.end(), g.begin(), g.end());
    while (out.sorted.size() % block != 0) out.sorted.push_back(static_cast<int32_t>(ids.size()));
    out.block_experts.resize(out.sorted.size() / block, e);
  }
  out.offsets.push_back(static_cast<int32_t>(out.sorted.size()));
  return out;
}

}  // namespace samples
