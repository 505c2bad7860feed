// A whole mixture-of-experts layer (samples::MoeLayer: router, top k,
// grouping, up projection, SwiGLU, down projection with routed weights,
// combine) on an NVIDIA GPU: Mixtral's experts (8, top 2, H 4096, I 14336)
// at 4096 tokens and at 256, bf16 and fp8 (e4m3 weights and activations,
// static scales; sums promoted to f32 each K step, and the tensor cores'
// fast accumulation), and 64 small experts (top 6, H 2048, I 1408) at 4096
// tokens, bf16. Each case runs the layer with both GEMMs in each form and
// tile configuration of `kGemms` (gathering through pointers, or grouped
// over x's rows copied into expert order) and reports the fastest beside
// the default's;
// TFLOP/s count the experts' GEMMs alone, 2 n (2I H + H I) for the n =
// tokens x top_k choices. A sample of tokens is checked stage by stage
// (samples::moe_check_token: each of h, a, y and the output against a
// double reference from the stage before it, as the device left it). The baselines (torch
// eager as Mixtral's reference implementation writes the layer, and the
// same layer composed from Triton kernels) come from bench/moe_compare.py,
// which reads the JSON this writes (--json=PATH) and prints the ratios.
// Timed as the other benchmarks time: CUDA events around one layer, L2
// flushed before each, median of 15. With --only=TEXT it runs the cases
// whose name contains TEXT; with --default, the default configuration alone.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/float16.h"
#include "base/float8.h"
#include "cuda_raw.h"
#include "report.h"
#include "samples/moe.h"
#include "tessel/tessel.h"

using namespace tessel;
using bench::must;

namespace {

struct MoeCase {
  std::string name;
  int64_t tokens;
  int experts, top_k;
  int64_t hidden, inter;
  bool fp8;
  bool fast_accum = false;  // fp8: the tensor cores' sums over all of K (MoeGemmConfig::fast_accum)
};
const std::vector<MoeCase> kCases = {
    {"mixtral, 4096 tokens", 4096, 8, 2, 4096, 14336, false},
    {"mixtral, 256 tokens", 256, 8, 2, 4096, 14336, false},
    {"mixtral fp8, 4096 tokens", 4096, 8, 2, 4096, 14336, true},
    {"mixtral fp8, 256 tokens", 256, 8, 2, 4096, 14336, true},
    {"mixtral fp8 fast accumulation, 4096 tokens", 4096, 8, 2, 4096, 14336, true, true},
    {"mixtral fp8 fast accumulation, 256 tokens", 256, 8, 2, 4096, 14336, true, true},
    {"64 experts, 4096 tokens", 4096, 64, 6, 2048, 1408, false}};

// Both GEMMs' form, tiles and warps (rows of 128 bytes: bk 64 for bf16,
// 128 for fp8), and whether SwiGLU is fused into the up projection; the
// first is MoeLayerConfig's default (bn 0: the operands' default,
// samples::with_default_tiles), and a later one the same as it is not
// timed again. Grouped GEMMs on 12 warps are warp-specialized.
struct Gemm {
  bool grouped;
  int64_t bm, bn;
  int stages, warps;
  bool fused = false;
  bool operator==(const Gemm&) const = default;
};
constexpr Gemm kGemms[] = {{true, 128, 0, 4, 12, true},   {true, 128, 192, 4, 12, true}, {true, 128, 192, 4, 12},
                           {true, 128, 256, 4, 12, true}, {true, 128, 256, 4, 12},       {true, 128, 128, 4, 12, true},
                           {true, 128, 256, 3, 8, true},  {false, 64, 256, 4, 8},        {false, 64, 256, 3, 8},
                           {false, 64, 128, 4, 4},        {false, 64, 128, 3, 4}};

std::string label(const Gemm& g, bool fp8) {
  return std::string(g.grouped ? "grouped " : "") + std::to_string(g.bm) + "x" + std::to_string(g.bn) +
         (fp8 ? "x128 s" : "x64 s") + std::to_string(g.stages) + " w" + std::to_string(g.warps) +
         (g.fused ? " swiglu fused" : "");
}

// `n` e4m3 values uniform in [-1, 1) (bench::random_bf16's, rounded again).
std::vector<uint8_t> random_e4m3(size_t n, uint64_t seed) {
  const std::vector<uint16_t> bits = bench::random_bf16(n, seed);
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = float_to_float8(bf16_to_float(bits[i]), Float8::kE4M3);
  return out;
}

template <class T>
Buffer upload(const Device& dev, const std::vector<T>& v) {
  Buffer b = must(dev.allocate(v.size() * sizeof(T)), "allocate");
  must(dev.copy_to_device(b, v.data(), v.size() * sizeof(T)), "upload");
  return b;
}

// The layer's weights for one shape, as bits on the host and on the
// device: scales that keep h, a and the output near 1 (samples/moe.cc's);
// fp8 weights in [-1, 1) with those ranges as their experts' scales, x and
// a quantized to steps of 1/64 and 1/32.
struct Weights {
  std::vector<uint16_t> w1, w2;   // bf16
  std::vector<uint8_t> w18, w28;  // e4m3
  samples::MoeFp8Reference scales;
  Buffer gate, dw1, dw2;
  samples::MoeLayer::Fp8Scales dscales;
};
Weights make_weights(const Device& dev, const MoeCase& c) {
  const int64_t e = c.experts, hid = c.hidden, inter = c.inter;
  const float w1_range = 2 * std::sqrt(3.0f / hid), w2_range = std::sqrt(3.0f / inter);
  Weights w;
  w.gate = upload(dev, bench::random_bf16(e * hid, 4, 0.2f));
  if (!c.fp8) {
    w.w1 = bench::random_bf16(e * 2 * inter * hid, 2, w1_range);
    w.w2 = bench::random_bf16(e * hid * inter, 3, w2_range);
    w.dw1 = upload(dev, w.w1);
    w.dw2 = upload(dev, w.w2);
    return w;
  }
  w.w18 = random_e4m3(e * 2 * inter * hid, 2);
  w.w28 = random_e4m3(e * hid * inter, 3);
  w.dw1 = upload(dev, w.w18);
  w.dw2 = upload(dev, w.w28);
  w.scales = {
      .x = 1.0f / 64, .a = 1.0f / 32, .w1 = std::vector<float>(e, w1_range), .w2 = std::vector<float>(e, w2_range)};
  w.dscales = {upload(dev, std::vector<float>{w.scales.x}), upload(dev, w.scales.w1),
               upload(dev, std::vector<float>{w.scales.a}), upload(dev, w.scales.w2)};
  return w;
}

// Rows [first, first + count) of `width` values of `d` (i32, f32, bf16 or
// e4m3) from `b`, as T.
template <class T>
std::vector<T> rows(const bench::CudaRaw& cu, const Buffer& b, int64_t first, int64_t count, int64_t width, DType d) {
  const int64_t n = count * width;
  std::vector<uint8_t> bytes(n * d.bytes());
  cu.check(
      cu.cuMemcpyDtoH(bytes.data(), reinterpret_cast<CUdeviceptr>(b.data()) + first * width * d.bytes(), bytes.size()),
      "download");
  return samples::moe_values<T>(bytes, d);
}

}  // namespace

int main(int argc, char** argv) {
  bench::Flags flags;  // --default: the default configuration alone
  if (!bench::parse_flags("moe_bench", "default", argc, argv, flags)) return 2;
  bench::CudaRaw cu;
  std::optional<Device> opened = bench::open_cuda("moe_bench", cu);
  if (!opened.has_value()) return 0;
  Device dev = *opened;
  std::printf("moe_bench on %s\n", dev.description().c_str());
  Stream stream = must(dev.create_stream(), "stream");
  bench::FlushedTimer timer(cu, static_cast<CUstream>(stream.native()));
  std::string json = "{\n  \"device\": \"" + dev.description() + "\",\n  \"cases\": [";
  int entries = 0, failures = 0;
  // One shape's weights at a time (Mixtral's take 2.8 GB), kept for the
  // cases that follow on the same: (experts, H, I, fp8).
  std::optional<std::tuple<int, int64_t, int64_t, bool>> made;
  Weights w;
  for (const MoeCase& mc : kCases) {
    if (mc.name.find(flags.only) == std::string::npos) continue;
    const int64_t hid = mc.hidden, tokens = mc.tokens, n = tokens * mc.top_k;
    const auto shape = std::make_tuple(mc.experts, hid, mc.inter, mc.fp8);
    if (made != shape) {
      w = Weights();  // (freed before the next are made)
      w = make_weights(dev, mc);
      made = shape;
    }
    const std::vector<uint16_t> hx = bench::random_bf16(tokens * hid, 1);
    Buffer x = must(dev.allocate(hx.size() * 2), "allocate"), out = must(dev.allocate(hx.size() * 2), "allocate");
    must(dev.copy_to_device(x, hx.data(), hx.size() * 2), "upload");
    // A sample of tokens, each checked stage by stage (samples::moe_check_token).
    const std::vector<int64_t> sampled = {0, 1, tokens / 2, tokens - 1};
    std::vector<float> xf(tokens * hid);
    for (size_t i = 0; i < xf.size(); ++i) xf[i] = bf16_to_float(hx[i]);
    samples::MoeStageErrors errors;
    double best_ms = INFINITY, default_ms = INFINITY;
    Gemm best{};
    std::vector<Gemm> tried;
    for (Gemm g : kGemms) {
      if (g.bn == 0) {
        samples::MoeLayerConfig defaults;
        defaults.up.in = defaults.down.in = mc.fp8 ? f8e4m3 : bf16;
        g.bn = samples::with_default_tiles(defaults).up.bn;
      }
      if (std::find(tried.begin(), tried.end(), g) == tried.end()) tried.push_back(g);
    }
    if (flags.on) tried.resize(1);
    for (const Gemm& g : tried) {
      samples::MoeLayerConfig c = {.experts = mc.experts, .top_k = mc.top_k, .hidden = hid, .intermediate = mc.inter};
      c.up = c.down = {.bm = g.bm,
                       .bn = g.bn,
                       .bk = mc.fp8 ? 128 : 64,
                       .in = mc.fp8 ? f8e4m3 : bf16,
                       .stages = g.stages,
                       .fast_accum = mc.fast_accum};
      c.gemm_warps = g.warps;
      c.grouped = g.grouped;
      c.fused_swiglu = g.fused;
      const samples::MoeLayer layer = must(samples::MoeLayer::compile(dev, c), "compile");
      const samples::MoeLayer::Workspace ws = must(layer.workspace(tokens), "workspace");
      const auto t32 = static_cast<int32_t>(tokens);
      auto run = [&] {
        if (mc.fp8) {
          must(layer.launch(x, t32, w.gate, w.dw1, w.dw2, w.dscales, out, ws, &stream), "launch");
        } else {
          must(layer.launch(x, t32, w.gate, w.dw1, w.dw2, out, ws, &stream), "launch");
        }
      };
      must(dev.synchronize(), "sync");
      cu.check(cu.cuMemsetD8(reinterpret_cast<CUdeviceptr>(out.data()), 0xFF, hx.size() * 2), "clear out");
      const double ms = timer.median_ms(run);
      must(stream.synchronize(), "sync");
      for (const int64_t t : sampled) {
        const int64_t k = mc.top_k;
        const auto ids = rows<int32_t>(cu, ws.ids, t * k, k, 1, i32);
        const auto routed = rows<float>(cu, ws.weights, t * k, k, 1, f32);
        // The token's choices' rows: at their positions in a grouped layer.
        const auto at = c.grouped ? rows<int32_t>(cu, ws.align.positions, t * k, k, 1, i32) : std::vector<int32_t>{};
        auto choice_rows = [&](const Buffer& b, int64_t width, DType d) {
          if (!c.grouped) return rows<float>(cu, b, t * k, k, width, d);
          std::vector<float> out;
          for (int32_t p : at) {
            const auto row = rows<float>(cu, b, p, 1, width, d);
            out.insert(out.end(), row.begin(), row.end());
          }
          return out;
        };
        const auto h = g.fused ? std::vector<float>{} : choice_rows(ws.h, 2 * mc.inter, bf16);
        const auto a = choice_rows(ws.a, mc.inter, c.up.in);
        const auto y = choice_rows(ws.y, hid, bf16), o = rows<float>(cu, out, t, 1, hid, bf16);
        const samples::MoeTokenRun run = {&xf[t * hid], ids.data(), routed.data(), g.fused ? nullptr : h.data(),
                                          a.data(),     y.data(),   o.data()};
        if (mc.fp8) {
          samples::moe_check_token(c, t, run, w.w18, w.w28, &w.scales, errors);
        } else {
          samples::moe_check_token(c, t, run, w.w1, w.w2, nullptr, errors);
        }
      }
      std::printf("  %-24s %.1f us\n", label(g, mc.fp8).c_str(), ms * 1e3);
      if (default_ms == INFINITY) default_ms = ms;
      if (ms < best_ms) best_ms = ms, best = g;
    }
    const bool ok = errors.first.empty();
    if (!ok) std::printf("  %s\n", errors.first.c_str());
    failures += ok ? 0 : 1;
    const double flops = 2.0 * n * 3 * mc.inter * hid, tflops = flops / (best_ms * 1e9);
    char note[200];
    std::snprintf(note, sizeof note, "%.1f us; config %s (default %s: %.1f us); error/bound %.2f%s", best_ms * 1e3,
                  label(best, mc.fp8).c_str(), label(tried[0], mc.fp8).c_str(), default_ms * 1e3, errors.worst(),
                  ok ? "" : " FAILED");
    bench::report("moe layer, " + mc.name, tflops, "TFLOP/s", note);
    char entry[500];
    std::snprintf(entry, sizeof entry,
                  "%s\n    {\"name\": \"%s\", \"tokens\": %lld, \"experts\": %d, \"top_k\": %d, \"hidden\": %lld, "
                  "\"intermediate\": %lld, \"us\": %.3f, \"default_us\": %.3f, \"config\": \"%s\", \"tflops\": %.1f, "
                  "\"worst_error_over_bound\": %.3g, \"ok\": %s}",
                  entries++ == 0 ? "" : ",", mc.name.c_str(), static_cast<long long>(tokens), mc.experts, mc.top_k,
                  static_cast<long long>(hid), static_cast<long long>(mc.inter), best_ms * 1e3, default_ms * 1e3,
                  label(best, mc.fp8).c_str(), tflops, errors.worst(), ok ? "true" : "false");
    json += entry;
  }
  if (!flags.json.empty()) std::ofstream(flags.json) << json << "\n  ]\n}\n";
  if (failures > 0) std::printf("moe_bench: %d results outside their tolerance\n", failures);
  return failures > 0 ? 1 : 0;
}
