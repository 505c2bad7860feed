// tessel's attention forward (samples::attention_kernel) on an NVIDIA GPU at
// the shapes of Triton's fused-attention tutorial: 4 x 32 heads, sequence
// lengths 1024 to 16384, head dimensions 64 and 128, bf16, with and without
// the causal mask, and grouped query heads (32 on 8 KV heads, Llama 3 8B's,
// at d 128; bench/attn_cases.h). Each case runs every configuration of `configs()` and
// reports the fastest beside the default's; TFLOP/s count 4 * heads * len^2
// * d (half of it with the mask). Results are checked against a double
// reference on a sample of heads and rows. The baselines (torch's
// scaled_dot_product_attention on each backend, and a Triton kernel) come
// from bench/attn_compare.py, which reads the JSON this writes
// (--json=PATH) and prints the ratios. With --only=TEXT it runs the cases
// whose name ("len 4096, d 128, causal") contains TEXT; with --default,
// the default configuration alone, and with --config=LABEL the one of that
// label ("128x128 s2 w12 coop"), for profilers.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "attn_cases.h"
#include "base/float16.h"
#include "cuda_raw.h"
#include "report.h"
#include "samples/kernels.h"
#include "tessel/tessel.h"

using namespace tessel;
using bench::must;
using samples::AttnConfig;

namespace {

constexpr int64_t kHeads = bench::kAttnHeads;

std::string label(const AttnConfig& c) {
  const char* form = c.cooperative ? " coop" : c.warp_specialize ? " ws" : "";
  return std::to_string(c.bm) + "x" + std::to_string(c.bn) + " s" + std::to_string(c.stages) + " w" +
         std::to_string(samples::attention_warps(c)) + form;
}

// samples::attention_config's first.
std::vector<AttnConfig> configs(int64_t d, bool causal, int64_t group) {
  std::vector<AttnConfig> out = {samples::attention_config(d, causal)};
  out[0].group = group;
  enum Form { kPlain, kPingPong, kCooperative };
  for (auto [bm, bn, stages, warps, form] :
       {std::tuple{128, 128, 2, 0, kPlain}, std::tuple{128, 64, 2, 0, kPlain}, std::tuple{128, 128, 3, 0, kPlain},
        std::tuple{64, 64, 3, 0, kPlain}, std::tuple{128, 128, 2, 4, kPlain}, std::tuple{128, 128, 3, 4, kPlain},
        std::tuple{128, 64, 3, 4, kPlain}, std::tuple{128, 64, 4, 0, kPlain}, std::tuple{128, 128, 4, 0, kPlain},
        std::tuple{64, 128, 2, 0, kPingPong}, std::tuple{128, 128, 2, 0, kCooperative},
        std::tuple{128, 128, 3, 0, kCooperative}, std::tuple{128, 128, 4, 0, kCooperative},
        std::tuple{128, 64, 4, 0, kCooperative}}) {
    // 128 x d accumulators beside 128 x bn scores on one warpgroup spill past d = 64.
    if (warps == 4 && d > 64) continue;
    AttnConfig c{.d = d,
                 .group = group,
                 .bm = bm,
                 .bn = bn,
                 .causal = causal,
                 .stages = stages,
                 .warp_specialize = form != kPlain,
                 .cooperative = form == kCooperative,
                 .warps = warps};
    // K's and V's rings and Q's block within shared memory (the output's
    // staging may reuse them).
    if (2 * d * (bm + 2 * stages * bn) <= 227 * 1024 && label(c) != label(out[0])) out.push_back(c);
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
  flags.takes_config = true;
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
  bench::AttnLog log("attn_bench", dev.description());
  for (const bench::AttnCase& ac : bench::attn_cases(only)) {
    const int64_t len = ac.len, d = ac.d, group = ac.group;
    const bool causal = ac.causal;
    const size_t n = static_cast<size_t>(kHeads * len * d), bytes = n * 2, kv_bytes = bytes / group;
    const std::vector<uint16_t> hq = bench::random_bf16(n, 1), hk = bench::random_bf16(n / group, 2),
                                hv = bench::random_bf16(n / group, 3);
    Buffer q = must(dev.allocate(bytes), "allocate"), k = must(dev.allocate(kv_bytes), "allocate");
    Buffer v = must(dev.allocate(kv_bytes), "allocate"), o = must(dev.allocate(bytes), "allocate");
    must(dev.copy_to_device(q, hq.data(), bytes), "upload");
    must(dev.copy_to_device(k, hk.data(), kv_bytes), "upload");
    must(dev.copy_to_device(v, hv.data(), kv_bytes), "upload");
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    // The reference at a sample of heads and rows (computed once for every
    // configuration), and the largest error there.
    struct Row {
      int64_t at;  // its first element in O
      std::vector<double> want;
    };
    std::vector<Row> sampled;
    for (int64_t h : {int64_t{0}, kHeads / 2 + 1, kHeads - 1}) {
      const std::vector<double> qh = head_of(hq, h, len, d), kh = head_of(hk, h / group, len, d),
                                vh = head_of(hv, h / group, len, d);
      for (int64_t i : {int64_t{0}, int64_t{1}, len / 3, len / 2 + 7, len - 2, len - 1}) {
        sampled.push_back({(h * len + i) * d, std::vector<double>(d)});
        samples::attention_row(qh.data(), kh.data(), vh.data(), len, d, scale, causal, i, sampled.back().want.data());
      }
    }
    auto check = [&] {
      must(stream.synchronize(), "sync");
      std::vector<uint16_t> got(n);
      must(dev.copy_to_host(got.data(), o, bytes), "download");
      double worst = 0;
      for (const Row& r : sampled) {
        for (int64_t c = 0; c < d; ++c) {
          const double e = std::fabs(bf16_to_float(got[r.at + c]) - r.want[c]);
          worst = std::isnan(e) ? INFINITY : std::max(worst, e);
        }
      }
      return worst;
    };
    const double flops = 4.0 * kHeads * len * len * d * (causal ? 0.5 : 1.0);
    double best_ms = INFINITY, default_ms = INFINITY, worst = 0;
    AttnConfig best;
    std::vector<AttnConfig> tried = configs(d, causal, group);
    if (default_only) tried.resize(1);
    if (!bench::keep_config("attn_bench", flags, ac.name, tried, label)) return 2;
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
    log.add("attention", ac, flops, best_ms, label(best), default_ms, label(tried[0]), worst, 1.5e-2);
  }
  return log.finish(json_path);
}
