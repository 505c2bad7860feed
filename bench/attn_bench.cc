// tessel's attention forward (samples::attention_kernel) on an NVIDIA GPU at
// the shapes of Triton's fused-attention tutorial: 4 x 32 heads, sequence
// lengths 1024 to 16384, head dimensions 64 and 128, bf16, with and without
// the causal mask. Each case runs every configuration of `configs()` and
// reports the fastest beside the default's; TFLOP/s count 4 * heads * len^2
// * d (half of it with the mask). Results are checked against a double
// reference on a sample of heads and rows. The baselines (torch's
// scaled_dot_product_attention on each backend, and a Triton kernel) come
// from bench/attn_compare.py, which reads the JSON this writes
// (--json=PATH) and prints the ratios. With --only=TEXT it runs the cases
// whose name ("len 4096, d 128, causal") contains TEXT; with --default,
// the default configuration alone (for profilers).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "base/float16.h"
#include "cuda_raw.h"
#include "report.h"
#include "samples/kernels.h"
#include "tessel/tessel.h"

using namespace tessel;
using bench::must;
using samples::AttnConfig;

namespace {

constexpr int64_t kHeads = 4 * 32;

std::string label(const AttnConfig& c) {
  return std::to_string(c.bm) + "x" + std::to_string(c.bn) + " s" + std::to_string(c.stages) + " w" +
         std::to_string(samples::attention_warps(c)) + (c.warp_specialize ? " ws" : "");
}

// samples::attention_config's first.
std::vector<AttnConfig> configs(int64_t d, bool causal) {
  std::vector<AttnConfig> out = {samples::attention_config(d, causal)};
  for (auto [bm, bn, stages, warps, ws] :
       {std::tuple{128, 128, 2, 0, false}, std::tuple{128, 64, 2, 0, false}, std::tuple{128, 128, 3, 0, false},
        std::tuple{64, 64, 3, 0, false}, std::tuple{128, 128, 2, 4, false}, std::tuple{128, 128, 3, 4, false},
        std::tuple{128, 64, 3, 4, false}, std::tuple{128, 64, 4, 0, false}, std::tuple{128, 128, 4, 0, false},
        std::tuple{64, 128, 2, 0, true}}) {
    // 128 x d accumulators beside 128 x bn scores on one warpgroup spill past d = 64.
    if (warps == 4 && d > 64) continue;
    AttnConfig c{.d = d, .bm = bm, .bn = bn, .causal = causal, .stages = stages, .warp_specialize = ws, .warps = warps};
    // K's and V's rings and Q's block within shared memory (the output's
    // staging may reuse them).
    if (2 * d * (bm + 2 * stages * bn) <= 227 * 1024 && label(c) != label(out[0])) out.push_back(c);
  }
  return out;
}

// Deterministic values in [-1, 1), rounded to bf16 (splitmix64 of the index).
std::vector<uint16_t> random_bf16(size_t n, uint64_t seed) {
  std::vector<uint16_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    uint64_t z = (i + seed * 0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 31)) * 0x94D049BB133111EBull;
    out[i] = float_to_bf16(static_cast<float>((z >> 40) & 0xFFFFFF) / 8388608.0f - 1.0f);
  }
  return out;
}

std::vector<double> head_of(const std::vector<uint16_t>& bits, int64_t h, int64_t len, int64_t d) {
  std::vector<double> out(len * d);
  for (int64_t i = 0; i < len * d; ++i) out[i] = bf16_to_float(bits[h * len * d + i]);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  bench::Flags flags;  // --default: attention_config's configuration alone
  if (!bench::parse_flags("attn_bench", "default", argc, argv, flags)) return 2;
  const std::string &json_path = flags.json, &only = flags.only;
  const bool default_only = flags.on;
  bench::CudaRaw cu;
  std::optional<Device> opened = bench::open_cuda("attn_bench", cu);
  if (!opened.has_value()) return 0;
  Device dev = *opened;
  std::printf("attn_bench on %s\n", dev.description().c_str());
  Stream stream = must(dev.create_stream(), "stream");
  bench::FlushedTimer timer(cu, static_cast<CUstream>(stream.native()));
  std::string json =
      "{\n  \"device\": \"" + dev.description() + "\",\n  \"heads\": " + std::to_string(kHeads) + ",\n  \"cases\": [";
  bool first_case = true;
  int failures = 0;
  for (int64_t d : {64, 128}) {
    for (int64_t len : {1024, 4096, 16384}) {
      for (bool causal : {false, true}) {
        const std::string name = "len " + std::to_string(len) + ", d " + std::to_string(d) + (causal ? ", causal" : "");
        if (name.find(only) == std::string::npos) continue;
        const size_t n = static_cast<size_t>(kHeads * len * d), bytes = n * 2;
        const std::vector<uint16_t> hq = random_bf16(n, 1), hk = random_bf16(n, 2), hv = random_bf16(n, 3);
        Buffer q = must(dev.allocate(bytes), "allocate"), k = must(dev.allocate(bytes), "allocate");
        Buffer v = must(dev.allocate(bytes), "allocate"), o = must(dev.allocate(bytes), "allocate");
        must(dev.copy_to_device(q, hq.data(), bytes), "upload");
        must(dev.copy_to_device(k, hk.data(), bytes), "upload");
        must(dev.copy_to_device(v, hv.data(), bytes), "upload");
        const float scale = 1.0f / std::sqrt(static_cast<float>(d));
        // The largest error over a sample of heads and rows.
        auto check = [&] {
          must(stream.synchronize(), "sync");
          std::vector<uint16_t> got(n);
          must(dev.copy_to_host(got.data(), o, bytes), "download");
          double worst = 0;
          std::vector<double> want(d);
          for (int64_t h : {int64_t{0}, kHeads / 2 + 1, kHeads - 1}) {
            const std::vector<double> qh = head_of(hq, h, len, d), kh = head_of(hk, h, len, d),
                                      vh = head_of(hv, h, len, d);
            for (int64_t i : {int64_t{0}, int64_t{1}, len / 3, len / 2 + 7, len - 2, len - 1}) {
              samples::attention_row(qh.data(), kh.data(), vh.data(), len, d, scale, causal, i, want.data());
              for (int64_t c = 0; c < d; ++c) {
                const double e = std::fabs(bf16_to_float(got[(h * len + i) * d + c]) - want[c]);
                worst = std::isnan(e) ? INFINITY : std::max(worst, e);
              }
            }
          }
          return worst;
        };
        const double flops = 4.0 * kHeads * len * len * d * (causal ? 0.5 : 1.0);
        double best_ms = INFINITY, default_ms = INFINITY, worst = 0;
        AttnConfig best;
        std::vector<AttnConfig> tried = configs(d, causal);
        if (default_only) tried.resize(1);
        for (const AttnConfig& c : tried) {
          CompileOptions options;
          options.num_warps = samples::attention_warps(c);
          absl::StatusOr<Function> compiled = dev.compile(must(samples::attention_kernel(c), "build"), options);
          // (A configuration over the shared memory a program may have is skipped.)
          if (absl::IsResourceExhausted(compiled.status())) {
            std::printf("  %-24s skipped: %s\n", label(c).c_str(), std::string(compiled.status().message()).c_str());
            continue;
          }
          Function fn = must(std::move(compiled), "compile");
          const samples::AttnMaps maps = must(samples::attention_maps(dev, c, q, k, v, o, kHeads, len), "maps");
          const LaunchConfig lc = must(samples::attention_launch(fn, c, kHeads, len, &stream), "grid");
          must(dev.synchronize(), "sync");
          cu.check(cu.cuMemsetD8(reinterpret_cast<CUdeviceptr>(o.data()), 0xFF, bytes), "clear o");
          const double ms =
              timer.median_ms([&] { must(samples::launch_attention(fn, lc, maps, kHeads, len, scale), "launch"); });
          worst = std::max(worst, check());
          std::printf("  %-24s %.1f us\n", label(c).c_str(), ms * 1e3);
          if (default_ms == INFINITY) default_ms = ms;
          if (ms < best_ms) best_ms = ms, best = c;
        }
        // bf16 output of values within [-1, 1), P rounded to bf16.
        const bool ok = worst <= 1.5e-2;
        failures += ok ? 0 : 1;
        const double tflops = flops / (best_ms * 1e9);
        char note[200];
        std::snprintf(note, sizeof note, "%.1f us; config %s (default %s: %.1f us); error %.1e%s", best_ms * 1e3,
                      label(best).c_str(), label(tried[0]).c_str(), default_ms * 1e3, worst, ok ? "" : " FAILED");
        bench::report("attention, " + name, tflops, "TFLOP/s", note);
        char entry[400];
        std::snprintf(entry, sizeof entry,
                      "%s\n    {\"len\": %lld, \"d\": %lld, \"causal\": %s, \"us\": %.3f, \"default_us\": %.3f, "
                      "\"config\": \"%s\", \"tflops\": %.1f, \"max_error\": %.3g, \"ok\": %s}",
                      first_case ? "" : ",", static_cast<long long>(len), static_cast<long long>(d),
                      causal ? "true" : "false", best_ms * 1e3, default_ms * 1e3, label(best).c_str(), tflops, worst,
                      ok ? "true" : "false");
        json += entry;
        first_case = false;
      }
    }
  }
  json += "\n  ]\n}\n";
  if (!json_path.empty()) std::ofstream(json_path) << json;
  if (failures > 0) std::printf("attn_bench: %d results outside their tolerance\n", failures);
  return failures > 0 ? 1 : 0;
}
