// tessel's paged decoding attention (samples::Decode) on an NVIDIA GPU:
// Llama 3 8B's heads (32 query heads on 8 KV heads, d 128), bf16, pages of
// 16 keys shuffled through the cache, at batches of 1 to 128 sequences of
// 1024 to 32768 keys. Each case runs every configuration of `configs()`
// and reports the fastest beside the default's, in GB/s of the keys, values,
// queries and outputs moved; the first and last sequences are checked
// against a double reference. The baselines (torch's
// scaled_dot_product_attention over the same keys stored densely, and a
// Triton paged flash-decoding kernel) come from bench/decode_compare.py,
// which reads the JSON this writes (--json=PATH) and prints the ratios.
// --only=TEXT runs the cases whose name ("batch 16, len 4096") contains
// TEXT; --default the default configuration alone; --config=LABEL the one
// of that label ("bn64 s0 w4 x1"), for profilers.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/float16.h"
#include "cuda_raw.h"
#include "report.h"
#include "samples/decode.h"
#include "tessel/tessel.h"

using namespace tessel;
using bench::must;

namespace {

constexpr int64_t kKvHeads = 8, kGroup = 4, kD = 128, kPage = 16;

struct Case {
  int64_t batch, len;
  std::string name;
};
std::vector<Case> cases(const std::string& only) {
  std::vector<Case> out;
  for (auto [batch, len] : {std::pair<int64_t, int64_t>{1, 8192},
                            {1, 32768},
                            {16, 4096},
                            {16, 16384},
                            {64, 2048},
                            {128, 1024},
                            {128, 4096}}) {
    std::string name = "batch " + std::to_string(batch) + ", len " + std::to_string(len);
    if (name.find(only) != std::string::npos) out.push_back({batch, len, std::move(name)});
  }
  return out;
}

struct Config {
  samples::DecodeConfig c;
  int more_splits = 1;  // times decode_splits' choice
};
std::string label(const Config& x) {
  return "bn" + std::to_string(x.c.bn) + " s" + std::to_string(x.c.stages) + " w" + std::to_string(x.c.warps) + " x" +
         std::to_string(x.more_splits);
}
// The default first.
std::vector<Config> configs() {
  std::vector<Config> out;
  for (auto [bn, stages, warps, more] :
       {std::tuple{64, 0, 4, 1}, std::tuple{32, 0, 4, 1}, std::tuple{128, 0, 4, 1}, std::tuple{64, 4, 4, 1},
        std::tuple{32, 6, 4, 1}, std::tuple{64, 0, 8, 1}, std::tuple{128, 2, 8, 1}, std::tuple{64, 0, 4, 2}}) {
    out.push_back({{.d = kD, .group = kGroup, .page = kPage, .bn = bn, .stages = stages, .warps = warps}, more});
  }
  return out;
}

// o of query head h of sequence b, in doubles, from the bf16 bits.
std::vector<double> reference(const std::vector<uint16_t>& q, const std::vector<uint16_t>& k,
                              const std::vector<uint16_t>& v, const std::vector<int32_t>& table, int64_t max_pages,
                              int64_t len, int64_t b, int64_t h, double scale) {
  auto at = [&](int64_t key) {
    return (samples::decode_slot(table, b, max_pages, kPage, key) * kKvHeads + h / kGroup) * kD;
  };
  std::vector<double> o(kD);
  samples::decode_row(
      &q[(b * kKvHeads * kGroup + h) * kD], [&](int64_t j) { return &k[at(j)]; }, [&](int64_t j) { return &v[at(j)]; },
      len, kD, scale, [](uint16_t x) { return bf16_to_float(x); }, o.data());
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  bench::Flags flags;  // --default: the default configuration alone
  flags.takes_config = true;
  if (!bench::parse_flags("decode_bench", "default", argc, argv, flags)) return 2;
  bench::CudaRaw cu;
  std::optional<Device> opened = bench::open_cuda("decode_bench", cu);
  if (!opened.has_value()) return 0;
  Device dev = *opened;
  std::printf("decode_bench on %s\n", dev.description().c_str());
  Stream stream = must(dev.create_stream(), "stream");
  bench::FlushedTimer timer(cu, static_cast<CUstream>(stream.native()));
  std::string json = "{\n  \"device\": \"" + dev.description() + "\",\n  \"cases\": [";
  int failures = 0, entries = 0;
  const int64_t heads = kKvHeads * kGroup;
  for (const Case& cs : cases(flags.only)) {
    const int64_t max_pages = cs.len / kPage, pages = cs.batch * max_pages;
    // Each sequence's pages, shuffled through the cache.
    std::vector<int32_t> table(pages);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), std::mt19937(7));
    const std::vector<int32_t> lens(cs.batch, static_cast<int32_t>(cs.len));
    const size_t cache = static_cast<size_t>(pages * kPage * kKvHeads * kD), qn = cs.batch * heads * kD;
    const std::vector<uint16_t> hq = bench::random_bf16(qn, 1), hk = bench::random_bf16(cache, 2),
                                hv = bench::random_bf16(cache, 3);
    auto put = [&](const void* data, size_t bytes) {
      Buffer b = must(dev.allocate(bytes), "allocate");
      must(dev.copy_to_device(b, data, bytes), "upload");
      return b;
    };
    Buffer q = put(hq.data(), qn * 2), k = put(hk.data(), cache * 2), v = put(hv.data(), cache * 2);
    Buffer tb = put(table.data(), table.size() * 4), lb = put(lens.data(), lens.size() * 4);
    Buffer o = must(dev.allocate(qn * 2), "allocate");
    const float scale = 1.0f / std::sqrt(static_cast<float>(kD));
    std::vector<std::vector<double>> want;
    const std::vector<int64_t> checked = {0, cs.batch - 1};
    for (int64_t b : checked) {
      for (int64_t h = 0; h < heads; ++h) want.push_back(reference(hq, hk, hv, table, max_pages, cs.len, b, h, scale));
    }
    auto worst_error = [&] {
      must(stream.synchronize(), "sync");
      std::vector<uint16_t> got(qn);
      must(dev.copy_to_host(got.data(), o, qn * 2), "download");
      double worst = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        const int64_t at = (checked[i / heads] * heads + static_cast<int64_t>(i % heads)) * kD;
        for (int64_t x = 0; x < kD; ++x) {
          const double e = std::fabs(bf16_to_float(got[at + x]) - want[i][x]);
          worst = std::isnan(e) ? INFINITY : std::max(worst, e);
        }
      }
      return worst;
    };
    const double bytes = 2.0 * cache * 2 + 2.0 * qn * 2;  // keys and values; q and o
    double best_ms = INFINITY, default_ms = INFINITY, worst = 0;
    Config best;
    std::vector<Config> tried = configs();
    if (flags.on) tried.resize(1);
    if (!bench::keep_config("decode_bench", flags, cs.name, tried, label)) return 2;
    for (const Config& x : tried) {
      const int splits = std::min(samples::kMaxDecodeSplits,
                                  x.more_splits * samples::decode_splits(x.c, cs.batch, kKvHeads, cs.len,
                                                                         4 * int64_t{dev.num_compute_units()}));
      absl::StatusOr<samples::Decode> compiled =
          samples::Decode::compile(dev, x.c, cs.batch, kKvHeads, max_pages, splits);
      if (absl::IsResourceExhausted(compiled.status())) {
        std::printf("  %-20s skipped: %s\n", label(x).c_str(), std::string(compiled.status().message()).c_str());
        continue;
      }
      const samples::Decode decode = must(std::move(compiled), "compile");
      cu.check(cu.cuMemsetD8(reinterpret_cast<CUdeviceptr>(o.data()), 0xFF, qn * 2), "clear o");
      const double ms = timer.median_ms([&] { must(decode.run(q, k, v, tb, lb, o, scale, &stream), "run"); });
      worst = std::max(worst, worst_error());
      std::printf("  %-20s %d splits %9.1f us %7.0f GB/s\n", label(x).c_str(), decode.splits(), ms * 1e3,
                  bytes / (ms * 1e6));
      if (default_ms == INFINITY) default_ms = ms;
      if (ms < best_ms) best_ms = ms, best = x;
    }
    // bf16 output of values within [-1, 1), P rounded to bf16.
    const bool ok = worst <= 1.5e-2;
    failures += ok ? 0 : 1;
    char note[200];
    std::snprintf(note, sizeof note, "%.1f us; config %s (default %s: %.1f us); error %.1e%s", best_ms * 1e3,
                  label(best).c_str(), label(tried[0]).c_str(), default_ms * 1e3, worst, ok ? "" : " FAILED");
    bench::report("decode, " + cs.name, bytes / (best_ms * 1e6), "GB/s", note);
    char entry[300];
    std::snprintf(entry, sizeof entry,
                  "%s\n    {\"batch\": %lld, \"len\": %lld, \"us\": %.3f, \"default_us\": %.3f, \"config\": \"%s\", "
                  "\"gbps\": %.1f, \"max_error\": %.3g, \"ok\": %s}",
                  entries++ == 0 ? "" : ",", static_cast<long long>(cs.batch), static_cast<long long>(cs.len),
                  best_ms * 1e3, default_ms * 1e3, label(best).c_str(), bytes / (best_ms * 1e6), worst,
                  ok ? "true" : "false");
    json += entry;
  }
  if (!flags.json.empty()) std::ofstream(flags.json) << json << "\n  ]\n}\n";
  if (failures > 0) std::printf("decode_bench: %d results outside their tolerance\n", failures);
  return failures > 0 ? 1 : 0;
}
