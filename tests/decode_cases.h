// Paged decoding attention (samples/decode.h) for the test suites: random
// sequences in shuffled pages, a run on any device, and the double
// reference.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/status.h"
#include "samples/decode.h"
#include "tests/matmul_cases.h"

namespace tessel::decode_cases {

struct Problem {
  std::vector<int32_t> lens;  // keys of each sequence
  int64_t kv_heads = 2, max_pages = 8;
  int64_t spare_pages = 3;  // pages of the cache no sequence holds
};

struct Inputs {
  matmul_cases::Operand q, k, v;
  std::vector<int32_t> table;
  int64_t pages = 0;  // of the cache
};

// Each sequence's pages drawn at random from the cache's, q and the caches
// uniform in [-1, 1) in c.in.
inline Inputs random_inputs(const samples::DecodeConfig& c, const Problem& p, std::mt19937& gen) {
  Inputs in;
  const int64_t batch = static_cast<int64_t>(p.lens.size());
  // (A sequence longer than its row of the table holds its row's pages.)
  auto held = [&](int32_t len) { return std::min<int64_t>((len + c.page - 1) / c.page, p.max_pages); };
  for (int32_t len : p.lens) in.pages += held(len);
  in.pages += p.spare_pages;
  std::vector<int32_t> order(in.pages);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), gen);
  // Entries past a sequence's pages point anywhere in the cache: the kernel must not read them.
  std::uniform_int_distribution<int32_t> any(0, static_cast<int32_t>(in.pages - 1));
  in.table.resize(batch * p.max_pages);
  for (int32_t& e : in.table) e = any(gen);
  int64_t next = 0;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t j = 0; j < held(p.lens[b]); ++j) in.table[b * p.max_pages + j] = order[next++];
  }
  const int64_t cache = in.pages * c.page * p.kv_heads * c.d;
  in.q = matmul_cases::random_operand(c.in, batch * p.kv_heads * c.group * c.d, gen);
  in.k = matmul_cases::random_operand(c.in, cache, gen);
  in.v = matmul_cases::random_operand(c.in, cache, gen);
  return in;
}

inline std::vector<double> reference(const samples::DecodeConfig& c, const Problem& p, const Inputs& in, float scale) {
  return samples::decode_reference(in.q.values, in.k.values, in.v.values, in.table, p.lens, p.kv_heads, c.group, c.d,
                                   c.page, p.max_pages, scale);
}

// o (bf16 or f32) of samples::Decode on `device` (compiled with `splits`,
// 0 to choose, for `arch`, empty for the device's own), as floats, from the
// last of `runs` runs over the same workspace.
inline absl::StatusOr<std::vector<float>> run(const Device& device, const samples::DecodeConfig& c, const Problem& p,
                                              const Inputs& in, float scale, int splits = 0, int runs = 1,
                                              const std::string& arch = "") {
  const int64_t batch = static_cast<int64_t>(p.lens.size());
  CompileOptions options;
  options.arch = arch;
  TESSEL_ASSIGN_OR_RETURN(samples::Decode decode,
                          samples::Decode::compile(device, c, batch, p.kv_heads, p.max_pages, splits, options));
  using matmul_cases::put;
  TESSEL_ASSIGN_OR_RETURN(Buffer q, put(device, in.q));
  TESSEL_ASSIGN_OR_RETURN(Buffer k, put(device, in.k));
  TESSEL_ASSIGN_OR_RETURN(Buffer v, put(device, in.v));
  TESSEL_ASSIGN_OR_RETURN(Buffer table, put(device, in.table.data(), in.table.size() * 4));
  TESSEL_ASSIGN_OR_RETURN(Buffer lens, put(device, p.lens.data(), p.lens.size() * 4));
  const int64_t n = batch * p.kv_heads * c.group * c.d;
  // Each run writes o afresh, at another scale before the last (so that a
  // split combined with an earlier run's parts shows).
  std::vector<float> got;
  for (int r = 0; r < runs; ++r) {
    TESSEL_ASSIGN_OR_RETURN(Buffer o, matmul_cases::nan_buffer(device, c.out, n));
    TESSEL_RETURN_IF_ERROR(decode.run(q, k, v, table, lens, o, scale * static_cast<float>(runs - r)));
    TESSEL_RETURN_IF_ERROR(device.synchronize());
    TESSEL_ASSIGN_OR_RETURN(got, matmul_cases::download_f32(device, o, c.out, n));
  }
  return got;
}

}  // namespace tessel::decode_cases
