// tessel's tensor-core GEMM (samples/gemm.h gemm_kernel) on an NVIDIA GPU
// at the shapes DESIGN.md's targets name, in TFLOP/s: bf16 with B given as
// N x K for each tile configuration tried, then the two best-known
// configurations for f16 (C in f16) and for bf16 with B given as K x N, fp8
// (e4m3, per-tensor scales, C in bf16), i8 (C the exact i32 sum), fp8 and i8 scaled per row and per
// column (C in bf16), fp8 with block scales (C in bf16), the fused bias + GELU epilogue, the
// GEMM in Triton's tutorial form (samples::pointer_gemm_kernel: operands
// through pointers, loads copied into rings stages ahead or each in its own
// iteration), a mixture of experts' GEMM over gathered rows
// (samples::moe_gemm_kernel, bf16 and fp8), and the autotuner's pick (tessel::autotune) among the bf16 configurations
// and split-K ones on 3000 x 5000 x 712 (or the shapes --tune-shapes names, then alone) against the best of timing
// every configuration again, in turns (one run of each, then the next round). Its baselines, cuBLAS (torch.matmul,
// torch._scaled_mm for fp8, torch._int_mm for i8) and Triton's TMA persistent matmul, come from
// bench/triton_compare.py's matmul_tflops (matmul_rowwise and matmul_blockwise for the scaled ones) in the same run of
// scripts/gpu_bench.sh, on the same tensors: with
// --inputs=DIR this writes each shape's A (M x K) and B (N x K) bits to DIR/{a,b}_MxNxK_DTYPE.bin for that script to
// read. Timed as that script times its kernels: CUDA events around one launch, L2 flushed before each (a 256 MiB copy),
// median of 15.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/status.h"
#include "cuda_raw.h"
#include "report.h"
#include "samples/kernels.h"
#include "samples/moe.h"
#include "tessel/tessel.h"

using namespace tessel;
using bench::must;
using bench::report;

namespace {

struct Config {
  samples::GemmConfig gemm;
  int warps;
};

std::string label(const Config& c) {
  return std::to_string(c.gemm.bm) + "x" + std::to_string(c.gemm.bn) + "x" + std::to_string(c.gemm.bk) + " s" +
         std::to_string(c.gemm.stages) + " w" + std::to_string(c.warps) +
         (c.gemm.warp_specialize ? (c.gemm.cooperative ? " coop" : " ws") : "") +
         (c.gemm.split_k > 1 ? " split-K " + std::to_string(c.gemm.split_k) : "") +
         (c.gemm.stream_k ? " stream-K" : "") + (c.gemm.cluster_m > 1 ? " cluster 2x1" : "") +
         (c.gemm.cluster_n > 1 ? " cluster 1x2" : "") + (c.gemm.in.is_float8() && c.gemm.fast_accum ? " fast" : "") +
         (c.gemm.in == i8 ? " i8" : "") + (c.gemm.col_scales ? " rowwise" : "") +
         (c.gemm.block_scales ? " blockwise" : "");
}

// Parses "MxNxK,MxNxK,..." (positive sizes; K and N multiples of 8, as TMA's
// 16-byte strides need for 16-bit operands) into `shapes`; false on anything else.
bool parse_shapes(const std::string& text, std::vector<std::array<int64_t, 3>>& shapes) {
  shapes.clear();
  std::stringstream list(text);
  for (std::string item; std::getline(list, item, ',');) {
    std::array<int64_t, 3> s{};
    char x1 = 0, x2 = 0;
    std::stringstream one(item);
    if (!(one >> s[0] >> x1 >> s[1] >> x2 >> s[2]) || x1 != 'x' || x2 != 'x' || !one.eof()) return false;
    if (s[0] <= 0 || s[1] <= 0 || s[2] <= 0 || s[1] % 8 != 0 || s[2] % 8 != 0) return false;
    shapes.push_back(s);
  }
  return !shapes.empty();
}

}  // namespace

int main(int argc, char** argv) {
  std::string inputs;  // where to leave the inputs for the baselines
  std::string only;    // run only the configurations whose label holds this
  // The shapes the autotuner is measured on; given, they are all that runs.
  std::vector<std::array<int64_t, 3>> tune_shapes = {{3000, 5000, 712}};
  bool tune_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--inputs=", 0) == 0) {
      inputs = arg.substr(9);
    } else if (arg.rfind("--only=", 0) == 0) {
      only = arg.substr(7);
    } else if (arg.rfind("--tune-shapes=", 0) == 0 && parse_shapes(arg.substr(14), tune_shapes)) {
      tune_only = true;
    } else {
      std::fprintf(stderr, "usage: gemm_bench [--inputs=DIR] [--only=TEXT] [--tune-shapes=MxNxK,...]\n");
      return 2;
    }
  }
  bench::CudaRaw cu;
  std::optional<Device> opened = bench::open_cuda("gemm_bench", cu);
  if (!opened.has_value()) return 0;
  Device dev = *opened;
  std::printf("gemm_bench on %s\n", dev.description().c_str());
  Stream stream = must(dev.create_stream(), "stream");
  CUstream raw_stream = static_cast<CUstream>(stream.native());
  bench::FlushedTimer timer(cu, raw_stream);
  auto config = [](int64_t bm, int64_t bn, int stages, int warps, DType in, bool b_nk) {
    // Rows of 128 bytes per box: BK 64 for 16-bit operands, 128 for fp8 (C then bf16, scaled) and i8 (C
    // the exact i32 sum, as torch._int_mm's).
    const bool fp8 = in.is_float8();
    return Config{{.bm = bm,
                   .bn = bn,
                   .bk = in.bytes() == 1 ? 128 : 64,
                   .in = in,
                   .out = fp8        ? bf16
                          : in == i8 ? i32
                                     : in,
                   .b_nk = b_nk,
                   .stages = stages,
                   .scaled = fp8},
                  warps};
  };
  std::vector<Config> configs;
  for (auto [bm, bn, stages, warps] : std::vector<std::array<int, 4>>{{128, 128, 3, 8},
                                                                      {128, 128, 4, 8},
                                                                      {128, 256, 2, 8},
                                                                      {128, 256, 3, 8},
                                                                      {128, 256, 4, 8},
                                                                      {128, 128, 4, 4},
                                                                      {64, 128, 6, 4},
                                                                      {64, 128, 8, 4},
                                                                      {128, 192, 4, 8},
                                                                      {192, 128, 4, 12},
                                                                      {192, 192, 3, 12},
                                                                      {192, 192, 4, 12},
                                                                      {192, 256, 3, 12}}) {
    configs.push_back(config(bm, bn, stages, warps, bf16, true));
  }
  // Warp-specialized: a producer warpgroup and two consumers of bm x bn tiles each.
  for (auto [bm, bn, stages] : std::vector<std::array<int, 3>>{{128, 128, 4}, {128, 128, 5}, {64, 256, 4}}) {
    configs.push_back(config(bm, bn, stages, 12, bf16, true));
    configs.back().gemm.warp_specialize = true;
  }
  // Cooperative: one consumer of two warpgroups on every tile (of 128 x 256 with 3 stages, and 128 x 128
  // with 5, it was slower still).
  for (auto [bn, stages] : std::vector<std::array<int, 2>>{{256, 4}, {192, 4}}) {
    configs.push_back(config(128, bn, stages, 12, bf16, true));
    configs.back().gemm.warp_specialize = configs.back().gemm.cooperative = true;
  }
  for (auto [in, b_nk] : {std::pair{f16, true}, std::pair{bf16, false}}) {
    configs.push_back(config(128, 256, 3, 8, in, b_nk));
    configs.push_back(config(128, 128, 4, 8, in, b_nk));
  }
  // fp8 with fast accumulation (the tensor cores' sum over all of K), and with each K step added to
  // an f32 accumulator: two accumulators a thread, so no tile wider than 64 x 192 a warpgroup.
  for (auto [bn, stages, warps, fast] : std::vector<std::array<int, 4>>{
           {256, 3, 8, 1}, {128, 4, 8, 1}, {128, 4, 8, 0}, {128, 5, 8, 0}, {128, 4, 12, 0}, {192, 4, 12, 0}}) {
    configs.push_back(config(128, bn, stages, warps, f8e4m3, true));
    configs.back().gemm.fast_accum = fast != 0;
    configs.back().gemm.warp_specialize = configs.back().gemm.cooperative = warps == 12;
  }
  // i8 into i32 (exact): one accumulator a thread, as fp8 with fast accumulation.
  for (auto [bn, stages, warps] :
       std::vector<std::array<int, 3>>{{256, 3, 8}, {256, 4, 8}, {128, 4, 8}, {256, 4, 12}}) {
    configs.push_back(config(128, bn, stages, warps, i8, true));
    configs.back().gemm.warp_specialize = configs.back().gemm.cooperative = warps == 12;
  }
  // Rowwise scaling (per-row and per-column scales, C in bf16): fp8 with fast accumulation, and i8.
  for (auto [in, stages, warps] : std::vector<std::tuple<DType, int, int>>{
           {f8e4m3, 3, 8}, {f8e4m3, 4, 8}, {f8e4m3, 4, 12}, {i8, 3, 8}, {i8, 4, 8}, {i8, 4, 12}}) {
    configs.push_back(config(128, 256, stages, warps, in, true));
    Config& r = configs.back();
    r.gemm.out = bf16;
    r.gemm.scaled = false;
    r.gemm.fast_accum = r.gemm.row_scales = r.gemm.col_scales = true;
    r.gemm.warp_specialize = r.gemm.cooperative = warps == 12;
  }
  // Block scales (DeepSeek-V3's 1 x 128 and 128 x 128), fp8, C in bf16: each K step's product added in
  // f32 beside the running sum, so 128-wide tiles (two accumulators a thread).
  for (auto [stages, warps] : std::vector<std::array<int, 2>>{{4, 8}, {5, 8}, {4, 12}, {5, 12}}) {
    configs.push_back(config(128, 128, stages, warps, f8e4m3, true));
    Config& r = configs.back();
    r.gemm.scaled = false;
    r.gemm.block_scales = true;
    r.gemm.warp_specialize = r.gemm.cooperative = warps == 12;
  }
  // Split-K (partial tiles added into an f32 workspace, then rounded to bf16 by
  // samples::splitk_finish_kernel, both timed): for few tiles and a long K,
  // so the autotuner's shapes only.
  // (An f32 C's staging tile 256 wide goes a panel at a time beside 3 or 4 stages.)
  for (auto [bm, bn, stages, warps, split] : std::vector<std::array<int, 5>>{{128, 128, 4, 8, 2},
                                                                             {128, 128, 4, 8, 4},
                                                                             {128, 256, 3, 8, 4},
                                                                             {128, 256, 4, 8, 2},
                                                                             {128, 256, 4, 8, 4},
                                                                             {128, 128, 3, 12, 2},
                                                                             {128, 128, 4, 12, 2},
                                                                             {64, 128, 4, 4, 4},
                                                                             {64, 128, 4, 4, 8}}) {
    configs.push_back(config(bm, bn, stages, warps, bf16, true));
    configs.back().gemm.out = f32;
    configs.back().gemm.split_k = split;
    configs.back().gemm.warp_specialize = warps == 12;
  }
  // Stream-K (the last wave's K steps shared by every program, partial tiles
  // summed in a workspace the kernel leaves zero): the autotuner's shapes only.
  for (auto [bm, bn, stages, warps] :
       std::vector<std::array<int, 4>>{{128, 256, 3, 8}, {128, 256, 4, 8}, {128, 128, 4, 8}, {64, 128, 8, 4}}) {
    configs.push_back(config(bm, bn, stages, warps, bf16, true));
    configs.back().gemm.stream_k = true;
  }
  // Clusters of two programs whose tiles share an operand's, loaded once for both (TMA multicast): 2x1, two
  // tiles one above the other sharing B's; 1x2, side by side sharing A's.
  for (auto [bm, bn, stages, warps, cluster_m] : std::vector<std::array<int, 5>>{
           {128, 256, 4, 8, 2}, {256, 128, 4, 8, 1}, {128, 128, 4, 8, 2}, {128, 256, 4, 12, 2}, {128, 128, 4, 12, 2}}) {
    configs.push_back(config(bm, bn, stages, warps, bf16, true));
    (cluster_m > 1 ? configs.back().gemm.cluster_m : configs.back().gemm.cluster_n) = 2;
    // 12 warps: cooperative at 128 x 256, ping-pong at 128 x 128.
    configs.back().gemm.warp_specialize = warps == 12;
    configs.back().gemm.cooperative = warps == 12 && bn == 256;
  }
  // The fused epilogue (samples/matmul_gelu.cc), against the plain GEMM's first row above.
  for (auto [bn, stages] : std::vector<std::array<int, 2>>{{256, 3}, {256, 4}, {192, 4}}) {
    configs.push_back(config(128, bn, stages, 8, bf16, true));
    configs.back().gemm.bias_gelu = true;
  }
  configs.push_back(config(128, 128, 4, 12, bf16, true));
  configs.back().gemm.bias_gelu = configs.back().gemm.warp_specialize = true;
  configs.push_back(config(128, 192, 4, 12, bf16, true));
  configs.back().gemm.bias_gelu = configs.back().gemm.warp_specialize = configs.back().gemm.cooperative = true;
  std::erase_if(configs, [&](const Config& c) {
    return (label(c) + (c.gemm.bias_gelu ? " +bias+gelu" : "")).find(only) == std::string::npos;
  });
  // A launch of configuration `c` on the buffers, its kernel compiled and its maps made, and what compiles
  // the variant its launches take; or why not. It may run on any thread (the autotuner's prepares).
  struct Launch {
    std::function<void()> run;
    std::function<absl::Status()> ready;
  };
  auto prepare = [&](const Config& c, int64_t m, int64_t n, int64_t k, const Buffer& ab, const Buffer& bb,
                     const Buffer& cb, const Buffer& biasb, const Buffer& scaleb) -> absl::StatusOr<Launch> {
    CompileOptions options;
    options.num_warps = c.warps;
    TESSEL_ASSIGN_OR_RETURN(Kernel kernel, samples::gemm_kernel(c.gemm));
    TESSEL_ASSIGN_OR_RETURN(Function compiled, dev.compile(kernel, options));
    // Split-K adds into an f32 workspace, zero to start with; the finish rounds it into C and zeroes it again.
    const bool split = c.gemm.split_k > 1;
    Buffer acc = cb;
    std::optional<Function> finish;
    if (split) {
      TESSEL_ASSIGN_OR_RETURN(acc, dev.allocate(m * n * 4));
      TESSEL_RETURN_IF_ERROR(dev.copy_to_device(acc, std::vector<float>(m * n, 0.0f).data(), m * n * 4));
      TESSEL_ASSIGN_OR_RETURN(Kernel finish_kernel, samples::splitk_finish_kernel(bf16));
      TESSEL_ASSIGN_OR_RETURN(finish, dev.compile(finish_kernel));
    }
    TESSEL_ASSIGN_OR_RETURN(samples::GemmMaps maps, samples::gemm_maps(dev, c.gemm, ab, bb, acc, m, n, k));
    const int grid =
        c.gemm.stream_k ? dev.num_compute_units() : samples::gemm_grid(c.gemm, m, n, dev.num_compute_units());
    std::shared_ptr<const samples::GemmWorkspace> ws;
    if (c.gemm.stream_k) {
      TESSEL_ASSIGN_OR_RETURN(samples::GemmWorkspace w, samples::gemm_workspace(dev, c.gemm, m, n, grid));
      ws = std::make_shared<const samples::GemmWorkspace>(std::move(w));
    }
    const LaunchConfig lc = {.grid = grid, .num_warps = c.warps, .stream = &stream};
    const int64_t blocks = (m * n + samples::kFinishBlock - 1) / samples::kFinishBlock;
    const LaunchConfig finish_lc = {.grid = static_cast<int>(std::min<int64_t>(blocks, 4 * dev.num_compute_units())),
                                    .stream = &stream};
    const auto count = static_cast<int32_t>(m * n);
    auto args = [maps, m, n, k, c, biasb, scaleb, ws] {
      samples::GemmRows rows;
      rows.scales = scaleb;
      const samples::GemmBlockScales blocks = {scaleb, scaleb};
      return samples::gemm_args(c.gemm, maps, m, n, k, biasb, scaleb, scaleb, ws.get(), &rows, nullptr, &scaleb,
                                &blocks);
    };
    return Launch{[fn = compiled, lc, args, finish, finish_lc, acc, cb, count] {
                    must(fn.launch_packed(lc, args()), "launch");
                    if (finish) must(finish->launch(finish_lc, acc, cb, count), "finish");
                  },
                  [fn = compiled, args, finish, acc, cb, count]() -> absl::Status {
                    absl::Status done = finish ? finish->prepare(acc, cb, count) : absl::OkStatus();
                    return done.ok() ? fn.prepare_packed(args()) : done;
                  }};
  };
  // Median ms of 15 single launches, each after an L2 flush.
  auto time_ms = [&](const std::function<void()>& launch) { return timer.median_ms(launch); };
  std::vector<std::array<int64_t, 3>> shapes = {{4096, 4096, 4096}, {8192, 8192, 8192}, {8192, 8192, 1024}};
  if (tune_only) shapes.clear();
  std::mt19937 gen(1);
  // Per-tensor scales of 1 for the fp8 configurations (both scales read the same one).
  const float one = 1.0f;
  // Ones, also the rowwise configurations' row and column scales and the blockwise ones' block scales
  // (A's [K / 128, M]: 2^19 at 8192 x 8192).
  const std::vector<float> ones(1 << 19, one);
  Buffer scaleb = must(dev.allocate(ones.size() * 4), "allocate");
  must(dev.copy_to_device(scaleb, ones.data(), ones.size() * 4), "copy");
  for (const auto& [m, n, k] : shapes) {
    // Values in [1/128, 1] (bf16), [1, 2) (f16), [1/2, 1.875] (e4m3) or all of i8: no overflow in the sum or in C.
    std::map<ScalarKind, std::pair<std::vector<uint8_t>, std::vector<uint8_t>>> host;
    for (DType in : {bf16, f16, f8e4m3, i8}) {
      auto& [a, b] = host[in.kind];
      a.resize(m * k * in.bytes());
      b.resize(n * k * in.bytes());
      auto fill = [&](std::vector<uint8_t>& v) {
        if (in == i8) {  // every value: sums within 2^14 K, far inside i32
          std::uniform_int_distribution<int> bits(0, 255);
          for (auto& x : v) x = static_cast<uint8_t>(bits(gen));
          return;
        }
        if (in.is_float8()) {
          std::uniform_int_distribution<int> bits(0x30, 0x3F);
          for (auto& x : v) x = static_cast<uint8_t>(bits(gen));
          return;
        }
        std::uniform_int_distribution<int> bits(0x3C00, in == bf16 ? 0x3F80 : 0x3FFF);
        for (size_t i = 0; i < v.size(); i += 2) {
          const auto x = static_cast<uint16_t>(bits(gen));
          std::memcpy(&v[i], &x, 2);
        }
      };
      fill(a);
      fill(b);
      if (inputs.empty()) continue;
      const std::string shape =
          std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + "_" + std::string(in.name());
      for (auto [name, v] : {std::pair{"a", &a}, std::pair{"b", &b}}) {
        std::ofstream f(inputs + "/" + name + "_" + shape + ".bin", std::ios::binary);
        f.write(reinterpret_cast<const char*>(v->data()), static_cast<std::streamsize>(v->size()));
        if (!f) {
          std::fprintf(stderr, "gemm_bench: cannot write %s\n", (inputs + "/" + name + "_" + shape + ".bin").c_str());
          return 1;
        }
      }
    }
    Buffer ab = must(dev.allocate(m * k * 2), "allocate"), bb = must(dev.allocate(n * k * 2), "allocate");
    Buffer cb = must(dev.allocate(m * n * 4), "allocate");  // i32 for i8 operands
    Buffer biasb = must(dev.allocate(n * 2), "allocate");
    must(dev.copy_to_device(biasb, host[ScalarKind::kBF16].second.data(), n * 2), "copy");  // B's first row as bias
    DType loaded;
    bool loaded_nk = true;
    for (const Config& c : configs) {
      if (c.gemm.split_k > 1 || c.gemm.stream_k) continue;  // the autotuner's alone
      const DType in = c.gemm.in;
      if (!(loaded == in) || loaded_nk != c.gemm.b_nk) {
        const auto& [a, b] = host[in.kind];
        std::vector<uint8_t> bt;  // B as K x N: the same matrix, transposed (16-bit operands)
        if (!c.gemm.b_nk) {
          bt.resize(b.size());
          for (int64_t j = 0; j < n; ++j) {
            for (int64_t kk = 0; kk < k; ++kk) std::memcpy(&bt[(kk * n + j) * 2], &b[(j * k + kk) * 2], 2);
          }
        }
        must(dev.copy_to_device(ab, a.data(), a.size()), "copy");
        must(dev.copy_to_device(bb, c.gemm.b_nk ? b.data() : bt.data(), b.size()), "copy");
        loaded = in;
        loaded_nk = c.gemm.b_nk;
      }
      absl::StatusOr<Launch> launch = prepare(c, m, n, k, ab, bb, cb, biasb, scaleb);
      if (!launch.ok()) {
        std::printf("gemm %s: %s\n", label(c).c_str(), std::string(launch.status().message()).c_str());
        continue;
      }
      const double t = time_ms(launch->run);
      report("gemm " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " " +
                 std::string(in.name()) + (c.gemm.b_nk ? " B NxK, " : " B KxN, ") + label(c) +
                 (c.gemm.bias_gelu ? " +bias+gelu" : ""),
             2.0 * m * n * k / t / 1e9, "TFLOP/s", std::to_string(t) + " ms");
    }
    // The GEMM in the form of Triton's matmul tutorial (samples::pointer_gemm_kernel: operands through
    // pointers, no tensor maps), bf16 with B as N x K, with its loads copied into rings of the default
    // 3 and of 4 stages and (stages 1) each in its own iteration, and with 4 stages written as the tutorial's
    // loop literally (pointers stepped by BK: "stepped"); Triton's own tutorial kernel is triton_compare.py's
    // baseline.
    must(dev.copy_to_device(ab, host[ScalarKind::kBF16].first.data(), m * k * 2), "copy");
    must(dev.copy_to_device(bb, host[ScalarKind::kBF16].second.data(), n * k * 2), "copy");
    loaded = bf16;
    loaded_nk = true;
    for (auto [bm, bn, warps] :
         std::vector<std::array<int, 3>>{{128, 128, 8}, {128, 256, 8}, {128, 128, 4}, {64, 128, 4}}) {
      for (auto [stages, stepped] : std::vector<std::pair<int, bool>>{{0, false}, {4, false}, {4, true}, {1, false}}) {
        const samples::PointerGemmConfig g = {.bm = bm, .bn = bn, .bk = 64, .stages = stages, .stepped = stepped};
        const std::string name = "pointer gemm " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                                 std::to_string(k) + " bf16 B NxK, " + std::to_string(bm) + "x" + std::to_string(bn) +
                                 "x64 w" + std::to_string(warps) +
                                 (stages == 1  ? " loads in their iteration"
                                  : stages > 1 ? " s" + std::to_string(stages)
                                               : "") +
                                 (stepped ? " stepped" : "");
        if (name.find(only) == std::string::npos) continue;
        CompileOptions options;
        options.num_warps = warps;
        absl::StatusOr<Kernel> kernel = samples::pointer_gemm_kernel(g);
        absl::StatusOr<Function> fn = kernel.ok() ? dev.compile(*kernel, options) : kernel.status();
        if (!fn.ok()) {
          std::printf("%s: %s\n", name.c_str(), std::string(fn.status().message()).c_str());
          continue;
        }
        const LaunchConfig lc = {
            .grid = static_cast<int>(samples::pointer_gemm_grid(g, m, n)), .num_warps = warps, .stream = &stream};
        const auto [mi, ni, ki] =
            std::array<int32_t, 3>{static_cast<int32_t>(m), static_cast<int32_t>(n), static_cast<int32_t>(k)};
        const double t = time_ms([&] { must(fn->launch(lc, ab, bb, cb, mi, ni, ki), "launch"); });
        report(name, 2.0 * m * n * k / t / 1e9, "TFLOP/s", std::to_string(t) + " ms");
      }
    }
  }
  // A mixture of experts' GEMM over gathered rows (samples::moe_gemm_kernel over samples::MoeAlign's
  // grouping; the grouping itself is norm_bench's): useful TFLOP/s, 2 n N K for the n = tokens x top_k
  // choices, routed uniformly at random; bf16, and fp8 e4m3 with per-tensor scales (one for A, one per
  // expert's weights; C bf16). bench/triton_compare.py's moe_gemm times the same shapes in Triton (a
  // kernel of the same form), torch eager and cuBLAS.
  struct MoeGemm {
    int64_t bn, bk;
    int warps, stages;
    DType in;
    bool fast_accum = false;
  };
  for (const auto& [tokens, top_k, experts, ncols, kdim] :
       std::vector<std::array<int, 5>>{{4096, 2, 8, 14336, 4096}, {4096, 6, 64, 2816, 2048}}) {
    const int n = tokens * top_k;
    const std::string shape = "moe gemm " + std::to_string(tokens) + " tokens x " + std::to_string(top_k) + " of " +
                              std::to_string(experts) + " experts, " + std::to_string(ncols) + "x" +
                              std::to_string(kdim) + ", ";
    auto moe_label = [&](const MoeGemm& g) {
      return shape + "64x" + std::to_string(g.bn) + "x" + std::to_string(g.bk) + " s" + std::to_string(g.stages) +
             " w" + std::to_string(g.warps) +
             (g.in == bf16   ? ""
              : g.fast_accum ? " e4m3 fast"
                             : " e4m3");
    };
    std::vector<MoeGemm> tried;
    for (const MoeGemm& g :
         {MoeGemm{128, 64, 4, 3, bf16}, MoeGemm{128, 64, 4, 4, bf16}, MoeGemm{256, 64, 8, 3, bf16},
          MoeGemm{256, 64, 8, 4, bf16}, MoeGemm{128, 128, 4, 3, f8e4m3}, MoeGemm{128, 128, 4, 4, f8e4m3},
          MoeGemm{256, 128, 8, 3, f8e4m3}, MoeGemm{256, 128, 8, 4, f8e4m3}, MoeGemm{128, 128, 4, 4, f8e4m3, true},
          MoeGemm{256, 128, 8, 4, f8e4m3, true}}) {
      if (moe_label(g).find(only) != std::string::npos) tried.push_back(g);
    }
    // The same GEMM over the choices' rows already in expert order (A [rows, K] padded to blocks of
    // 128, as MoeAlign groups them): a grouped TMA GEMM (GemmConfig::grouped), the gathering not
    // timed; bf16, and fp8 with f32 sums and with fast accumulation.
    std::vector<Config> grouped;
    for (auto [bn, stages, warps, in, fast] :
         std::vector<std::tuple<int, int, int, DType, bool>>{{256, 3, 8, bf16, false},
                                                             {256, 4, 8, bf16, false},
                                                             {256, 4, 12, bf16, false},
                                                             {192, 4, 12, bf16, false},
                                                             {192, 4, 12, f8e4m3, false},
                                                             {256, 3, 8, f8e4m3, true},
                                                             {256, 4, 12, f8e4m3, true}}) {
      Config c = config(128, bn, stages, warps, in, true);
      c.gemm.out = bf16;
      c.gemm.grouped = true;
      c.gemm.fast_accum = fast;
      c.gemm.warp_specialize = c.gemm.cooperative = warps == 12;
      if ((shape + "grouped " + label(c)).find(only) != std::string::npos) grouped.push_back(c);
    }
    if (tried.empty() && grouped.empty()) continue;
    std::uniform_int_distribution<int> bits(0x3C00, 0x3F80), fp8(0x30, 0x3F), expert(0, experts - 1);
    // `count` random values of `d` on the device: bf16 in [1, 2], e4m3 in [0.5, 1).
    auto random = [&](int64_t count, DType d) {
      std::vector<uint8_t> bytes(count * d.bytes());
      for (int64_t i = 0; i < count; ++i) {
        if (d != bf16) {
          bytes[i] = static_cast<uint8_t>(fp8(gen));
          continue;
        }
        const auto v = static_cast<uint16_t>(bits(gen));
        std::memcpy(&bytes[i * 2], &v, 2);
      }
      Buffer b = must(dev.allocate(bytes.size()), "allocate");
      must(dev.copy_to_device(b, bytes.data(), bytes.size()), "copy");
      return b;
    };
    // A and W in bf16 and in e4m3, each made when a configuration first takes it.
    std::optional<std::pair<Buffer, Buffer>> operands[2];
    auto operands_of = [&](DType in) -> const std::pair<Buffer, Buffer>& {
      std::optional<std::pair<Buffer, Buffer>>& o = operands[in == bf16 ? 0 : 1];
      if (!o) o = {random(int64_t{tokens} * kdim, in), random(int64_t{experts} * ncols * kdim, in)};
      return *o;
    };
    std::vector<int32_t> ids(n);
    for (auto& e : ids) e = expert(gen);
    Buffer cb = must(dev.allocate(int64_t{n} * ncols * 2), "allocate"), idb = must(dev.allocate(n * 4), "allocate");
    const std::vector<float> ones(experts, 1.0f);
    Buffer scale_a = must(dev.allocate(4), "allocate"), scale_w = must(dev.allocate(experts * 4), "allocate");
    must(dev.copy_to_device(idb, ids.data(), n * 4), "copy");
    must(dev.copy_to_device(scale_a, ones.data(), 4), "copy");
    must(dev.copy_to_device(scale_w, ones.data(), experts * 4), "copy");
    const samples::MoeAlign align = must(samples::MoeAlign::compile(dev, experts, 64), "moe_align");
    const samples::MoeAlignBuffers al = must(align.buffers(dev, n), "allocate");
    must(align.launch(idb, n, al), "moe_align");
    for (const MoeGemm& m : tried) {
      const samples::MoeGemmConfig g = {.bm = 64,
                                        .bn = m.bn,
                                        .bk = m.bk,
                                        .in = m.in,
                                        .scaled = m.in != bf16,
                                        .stages = m.stages,
                                        .fast_accum = m.fast_accum};
      CompileOptions options;
      options.num_warps = m.warps;
      const Function fn = must(dev.compile(must(samples::moe_gemm_kernel(g), "build"), options), "compile");
      const LaunchConfig lc = {.grid = static_cast<int>(samples::moe_gemm_grid(g, n, experts, ncols)),
                               .num_warps = m.warps,
                               .stream = &stream};
      const auto& [ab, wb] = operands_of(m.in);
      const double t = time_ms([&] {
        if (g.scaled) {
          must(fn.launch(lc, ab, wb, cb, al.sorted, al.block_experts, al.offsets, scale_a, scale_w, n, top_k, experts,
                         ncols, kdim),
               "launch");
        } else {
          must(fn.launch(lc, ab, wb, cb, al.sorted, al.block_experts, al.offsets, n, top_k, experts, ncols, kdim),
               "launch");
        }
      });
      report(moe_label(m), 2.0 * n * ncols * kdim / t / 1e9, "TFLOP/s", std::to_string(t) + " ms");
    }
    if (grouped.empty()) continue;
    const samples::MoeAlign align128 = must(samples::MoeAlign::compile(dev, experts, 128), "moe_align");
    const int64_t rows = samples::moe_align_capacity(n, experts, 128);
    const samples::MoeAlignBuffers al128 = must(align128.buffers(dev, n), "allocate");
    must(align128.launch(idb, n, al128), "moe_align");
    const samples::GemmRows groups = {
        .groups = al128.block_experts, .total = must(al128.offsets.slice(4 * experts, 4), "slice"), .scales = {}};
    Buffer c128 = must(dev.allocate(rows * ncols * 2), "allocate");
    for (const Config& c : grouped) {
      const Buffer a_rows = random(rows * kdim, c.gemm.in);
      CompileOptions options;
      options.num_warps = c.warps;
      const Function fn = must(dev.compile(must(samples::gemm_kernel(c.gemm), "build"), options), "compile");
      const samples::GemmMaps maps =
          must(samples::gemm_maps(dev, c.gemm, a_rows, operands_of(c.gemm.in).second, c128, rows, ncols, kdim, experts),
               "maps");
      const std::vector<KernelArg> args =
          samples::gemm_args(c.gemm, maps, rows, ncols, kdim, scale_a, scale_a, scale_w, nullptr, &groups);
      const LaunchConfig lc = {.grid = samples::gemm_grid(c.gemm, rows, ncols, dev.num_compute_units()),
                               .num_warps = c.warps,
                               .stream = &stream};
      const double t = time_ms([&] { must(fn.launch_packed(lc, args), "launch"); });
      report(shape + "grouped " + label(c) + (c.gemm.in == bf16 ? "" : " e4m3"), 2.0 * n * ncols * kdim / t / 1e9,
             "TFLOP/s", std::to_string(t) + " ms");
    }
  }
  // The autotuner on a shape none of the configurations was chosen for (K = 712: rows of 16-byte
  // multiples, as TMA needs), bf16 with B as N x K: its pick against the best of timing them all.
  for (const auto& [m, n, k] : tune_shapes) {
    const std::string shape = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
    std::uniform_int_distribution<int> bits(0x3C00, 0x3F80);
    std::vector<uint16_t> a(m * k), b(n * k);
    for (auto& x : a) x = static_cast<uint16_t>(bits(gen));
    for (auto& x : b) x = static_cast<uint16_t>(bits(gen));
    Buffer ab = must(dev.allocate(a.size() * 2), "allocate"), bb = must(dev.allocate(b.size() * 2), "allocate");
    Buffer cb = must(dev.allocate(m * n * 2), "allocate"), biasb = must(dev.allocate(n * 2), "allocate");
    must(dev.copy_to_device(ab, a.data(), a.size() * 2), "copy");
    must(dev.copy_to_device(bb, b.data(), b.size() * 2), "copy");
    // The candidates compile in the autotuner's prepares, on every core at once.
    std::vector<Config> tried;
    for (const Config& c : configs) {
      if (c.gemm.in == bf16 && c.gemm.b_nk && !c.gemm.bias_gelu) tried.push_back(c);
    }
    // 256-row tiles fitted to the shape (samples::fitted_widths), where --only keeps them and they are not
    // among the above. (Fitted widths for 128 and 192 rows were the pick at none of the benchmark's shapes:
    // their narrower tiles cost more per product than the waves they fill save.)
    for (int64_t bn : samples::fitted_widths(m, n, 256, dev.num_compute_units(), 1, 160)) {
      for (int stages : {3, 4}) {
        // Plain, and in 1x2 clusters sharing A's 256 rows. (Cooperative, as cuBLAS runs 3000 x 5000, its
        // staging tile and the ring do not fit in shared memory.)
        for (int cluster_n : {1, 2}) {
          Config c = config(256, bn, stages, 8, bf16, true);
          c.gemm.cluster_n = cluster_n;
          const std::string l = label(c);
          if (l.find(only) != std::string::npos &&
              std::none_of(tried.begin(), tried.end(), [&](const Config& t) { return label(t) == l; })) {
            tried.push_back(c);
          }
        }
      }
    }
    if (tried.empty()) return 0;  // --only left none
    std::vector<std::optional<Launch>> launches(tried.size());
    std::vector<TuneCandidate> candidates;
    for (size_t i = 0; i < tried.size(); ++i) {
      candidates.push_back({label(tried[i]),
                            [&launches, i] {
                              launches[i]->run();
                              return absl::OkStatus();
                            },
                            [&, i]() -> absl::Status {
                              TESSEL_ASSIGN_OR_RETURN(launches[i],
                                                      prepare(tried[i], m, n, k, ab, bb, cb, biasb, scaleb));
                              return launches[i]->ready();
                            }});
    }
    const AutotuneResult pick =
        must(autotune(dev, "gemm_bench " + shape + " bf16", candidates,
                      {.reps = 15,  // as many as time_ms below
                       .memory = false,
                       .disk = false,
                       .before_each =
                           [&] {
                             timer.flush();  // timed from a cold L2, as the comparison below times them
                             return absl::OkStatus();
                           },
                       .stream = &stream}),
             "autotune");
    report("gemm " + shape + " bf16, the autotuner's compiles of " + std::to_string(tried.size()) + " configurations",
           pick.prepare_seconds * 1e3, "ms");
    std::printf("gemm %s bf16, the autotuner timed %zu close configurations again in turns\n", shape.c_str(),
                pick.retimed.size());
    for (size_t i = 0; i < pick.errors.size(); ++i) {
      if (!pick.errors[i].empty()) {
        std::printf("gemm %s %s: %s\n", shape.c_str(), label(tried[i]).c_str(), pick.errors[i].c_str());
      }
    }
    // Every configuration timed again, in turns, as the judge of the pick.
    std::vector<std::function<void()>> runs;
    for (const std::optional<Launch>& l : launches) {
      if (l) runs.push_back(l->run);
    }
    const std::vector<double> timed = timer.median_ms_in_turns(runs);
    std::vector<double> ms;
    for (size_t i = 0, t = 0; i < launches.size(); ++i) {
      ms.push_back(launches[i] ? timed[t++] : std::numeric_limits<double>::infinity());
      if (!launches[i]) continue;
      report("gemm " + shape + " bf16, " + label(tried[i]), 2.0 * m * n * k / ms.back() / 1e9, "TFLOP/s",
             std::to_string(ms.back()) + " ms");
    }
    const size_t best = std::min_element(ms.begin(), ms.end()) - ms.begin();
    report("gemm " + shape + " bf16, best of all (" + label(tried[best]) + ")", 2.0 * m * n * k / ms[best] / 1e9,
           "TFLOP/s", std::to_string(ms[best]) + " ms");
    char ratio[64];
    std::snprintf(ratio, sizeof ratio, "ratio %.3f (target <= 1.05 x best)", ms[pick.index] / ms[best]);
    report("gemm " + shape + " bf16, autotuned (" + label(tried[pick.index]) + ")",
           2.0 * m * n * k / ms[pick.index] / 1e9, "TFLOP/s", ratio);
  }
  return 0;
}
