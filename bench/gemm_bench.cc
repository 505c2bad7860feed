// tessel's tensor-core GEMM (samples/kernels.h gemm_kernel) on an NVIDIA GPU:
// bf16 in, bf16 out, B given as N x K, at the shapes DESIGN.md's targets
// name, for each tile configuration tried, in TFLOP/s. Its baselines,
// cuBLAS (torch.matmul(a, b.T)) and Triton's TMA persistent matmul on the
// same shapes, come from bench/triton_compare.py's matmul_tflops in the same
// run of scripts/gpu_bench.sh. Timed as that script times its kernels: CUDA
// events around one launch, L2 flushed before each (a 256 MiB copy), median
// of 15.
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cuda_raw.h"
#include "report.h"
#include "samples/kernels.h"
#include "tessel/tessel.h"

using namespace tessel;
using bench::median;
using bench::must;
using bench::report;

namespace {

struct Config {
  samples::GemmConfig gemm;
  int warps;
};

std::string label(const Config& c) {
  return std::to_string(c.gemm.bm) + "x" + std::to_string(c.gemm.bn) + "x" + std::to_string(c.gemm.bk) + " s" +
         std::to_string(c.gemm.stages) + " w" + std::to_string(c.warps);
}

}  // namespace

int main() {
  bench::CudaRaw cu;
  absl::StatusOr<Device> opened = Device::open("cuda:0");
  if (!opened.ok() || !cu.open()) {
    std::printf("gemm_bench: no CUDA device (%s); nothing to measure\n", std::string(opened.status().message()).c_str());
    return 0;
  }
  Device dev = *opened;
  std::printf("gemm_bench on %s\n", dev.description().c_str());
  Stream stream = must(dev.create_stream(), "stream");
  CUstream raw_stream = static_cast<CUstream>(stream.native());
  constexpr size_t kFlushBytes = size_t{256} << 20;
  Buffer flush_src = must(dev.allocate(kFlushBytes), "allocate"), flush_dst = must(dev.allocate(kFlushBytes), "allocate");
  CUevent e0, e1;
  cu.check(cu.cuEventCreate(&e0, 0), "event");
  cu.check(cu.cuEventCreate(&e1, 0), "event");
  const std::vector<Config> configs = {
      {{.bm = 128, .bn = 128, .out = bf16, .stages = 3}, 8}, {{.bm = 128, .bn = 128, .out = bf16, .stages = 4}, 8},
      {{.bm = 128, .bn = 256, .out = bf16, .stages = 2}, 8}, {{.bm = 128, .bn = 256, .out = bf16, .stages = 3}, 8},
      {{.bm = 128, .bn = 128, .out = bf16, .stages = 4}, 4}};
  const std::vector<std::array<int64_t, 3>> shapes = {{4096, 4096, 4096}, {8192, 8192, 8192}, {8192, 8192, 1024}};
  std::mt19937 gen(1);
  for (const auto& [m, n, k] : shapes) {
    std::vector<uint16_t> a(m * k), b(n * k);
    std::uniform_int_distribution<int> bits(0x3C00, 0x3F80);  // bf16 in [1/128, 1]: no overflow in the sum
    for (auto& x : a) x = static_cast<uint16_t>(bits(gen));
    for (auto& x : b) x = static_cast<uint16_t>(bits(gen));
    Buffer ab = must(dev.allocate(a.size() * 2), "allocate"), bb = must(dev.allocate(b.size() * 2), "allocate");
    Buffer cb = must(dev.allocate(m * n * 2), "allocate");
    must(dev.copy_to_device(ab, a.data(), a.size() * 2), "copy");
    must(dev.copy_to_device(bb, b.data(), b.size() * 2), "copy");
    for (const Config& c : configs) {
      CompileOptions options;
      options.num_warps = c.warps;
      absl::StatusOr<Function> compiled = dev.compile(must(samples::gemm_kernel(c.gemm), "build"), options);
      if (!compiled.ok()) {
        std::printf("gemm %s: %s\n", label(c).c_str(), std::string(compiled.status().message()).c_str());
        continue;
      }
      Function fn = *compiled;
      TensorMap am = must(dev.tensor_map(bf16, ab, {m, k}, {c.gemm.bm, c.gemm.bk}, Swizzle::k128B), "map a");
      TensorMap bm = must(dev.tensor_map(bf16, bb, {n, k}, {c.gemm.bn, c.gemm.bk}, Swizzle::k128B), "map b");
      TensorMap cm = must(dev.tensor_map(bf16, cb, {m, n}, {c.gemm.bm, c.gemm.bn}), "map c");
      const int64_t tiles = (m + c.gemm.bm - 1) / c.gemm.bm * ((n + c.gemm.bn - 1) / c.gemm.bn);
      const int grid = static_cast<int>(std::min<int64_t>(tiles, dev.num_compute_units()));
      auto launch = [&] {
        must(fn.launch({.grid = grid, .num_warps = c.warps, .stream = &stream}, am, bm, cm, static_cast<int32_t>(m),
                       static_cast<int32_t>(n), static_cast<int32_t>(k)),
             "launch");
      };
      launch();
      must(stream.synchronize(), "sync");
      std::vector<double> ms;
      for (int rep = 0; rep < 15; ++rep) {
        cu.check(cu.cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(flush_dst.data()),
                                      reinterpret_cast<CUdeviceptr>(flush_src.data()), kFlushBytes, raw_stream),
                 "flush L2");
        cu.check(cu.cuEventRecord(e0, raw_stream), "record");
        launch();
        cu.check(cu.cuEventRecord(e1, raw_stream), "record");
        cu.check(cu.cuEventSynchronize(e1), "sync");
        float t;
        cu.check(cu.cuEventElapsedTime(&t, e0, e1), "elapsed");
        ms.push_back(t);
      }
      const double t = median(ms);
      report("gemm " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " bf16, " + label(c),
             2.0 * m * n * k / t / 1e9, "TFLOP/s", std::to_string(t) + " ms");
    }
  }
  return 0;
}
