// tessel on an NVIDIA GPU against raw driver baselines measured in the same
// run: host cost per launch (3 tensor maps by value vs 3 pointers vs maps
// by reference), CUDA graph replay, cold JIT (the sample GEMM, and the same
// GEMM at the tiles of Triton's cold compile) and cache hits, and the TMA
// tile copy's and vector add's bandwidth against a device-to-device copy.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

#include "cuda_raw.h"
#include "report.h"
#include "codegen/compiler.h"
#include "samples/kernels.h"
#include "tessel/tessel.h"

using namespace tessel;
using bench::Clock;
using bench::median;
using bench::must;
using bench::ratio;
using bench::report;
using bench::seconds_since;

namespace {

Kernel empty_with_maps() {
  KernelBuilder k("empty_maps");
  for (const char* name : {"a", "b", "c"}) k.tensor_map(bf16, {64, 64}, name);
  return must(k.build(), "build");
}

Kernel empty_with_pointers() {
  KernelBuilder k("empty_ptrs");
  for (const char* name : {"a", "b", "c"}) k.arg(ptr(bf16), name);
  return must(k.build(), "build");
}

}  // namespace

int main() {
  bench::CudaRaw cu;
  std::optional<Device> opened = bench::open_cuda("gpu_bench", cu);
  if (!opened.has_value()) return 0;
  Device dev = *opened;
  std::printf("gpu_bench on %s\n", dev.name().c_str());

  // ---- Launch cost -------------------------------------------------------
  constexpr int kLaunches = 20000;
  Buffer scratch = must(dev.allocate(size_t{1} << 24), "allocate");
  TensorMap maps[3] = {must(dev.tensor_map(bf16, scratch, {1024, 1024}, {64, 64}), "map"),
                       must(dev.tensor_map(bf16, scratch, {1024, 1024}, {64, 64}), "map"),
                       must(dev.tensor_map(bf16, scratch, {1024, 1024}, {64, 64}), "map")};
  Function fmaps = must(dev.compile(empty_with_maps()), "compile");
  CompileOptions sm90;
  sm90.arch = "sm_90a";
  DeviceCode ptx = must(compile(empty_with_pointers(), sm90), "compile");
  CUmodule module;
  CUfunction fptrs;
  cu.check(cu.cuModuleLoadData(&module, ptx.binary.c_str()), "cuModuleLoadData");
  cu.check(cu.cuModuleGetFunction(&fptrs, module, ptx.entry.c_str()), "cuModuleGetFunction");
  CUdeviceptr dptr = reinterpret_cast<CUdeviceptr>(scratch.data());
  CUdeviceptr pa = dptr, pb = dptr + 256, pc = dptr + 512;
  void* ptr_params[] = {&pa, &pb, &pc};
  auto raw_launch = [&] {
    cu.check(cu.cuLaunchKernel(fptrs, 1, 1, 1, ptx.threads, 1, 1, 0, nullptr, ptr_params, nullptr), "launch");
  };
  // By reference: the 3 maps go to device memory through a pinned staging
  // buffer before each launch, and the kernel takes pointers to them.
  void* pinned;
  cu.check(cu.cuMemAllocHost(&pinned, 3 * 128), "cuMemAllocHost");
  CUdeviceptr dmaps;
  cu.check(cu.cuMemAlloc(&dmaps, 3 * 128), "cuMemAlloc");
  CUdeviceptr ra = dmaps, rb = dmaps + 128, rc = dmaps + 256;
  void* ref_params[] = {&ra, &rb, &rc};
  auto by_ref_launch = [&] {
    std::memcpy(pinned, maps[0].data(), 128);
    std::memcpy(static_cast<char*>(pinned) + 128, maps[1].data(), 128);
    std::memcpy(static_cast<char*>(pinned) + 256, maps[2].data(), 128);
    cu.check(cu.cuMemcpyHtoDAsync(dmaps, pinned, 3 * 128, nullptr), "copy maps");
    cu.check(cu.cuLaunchKernel(fptrs, 1, 1, 1, ptx.threads, 1, 1, 0, nullptr, ref_params, nullptr), "launch");
  };
  auto tessel_launch = [&] { must(fmaps.launch({.grid = 1}, maps[0], maps[1], maps[2]), "launch"); };
  auto per_launch_us = [&](auto&& launch) {
    for (int i = 0; i < 1000; ++i) launch();
    must(dev.synchronize(), "sync");
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      Clock::time_point t0 = Clock::now();
      for (int i = 0; i < kLaunches; ++i) launch();
      must(dev.synchronize(), "sync");
      best = std::min(best, seconds_since(t0) * 1e6 / kLaunches);
    }
    return best;
  };
  double raw_us = per_launch_us(raw_launch);
  double tessel_us = per_launch_us(tessel_launch);
  double ref_us = per_launch_us(by_ref_launch);
  report("launch: raw cuLaunchKernel, 3 pointers", raw_us, "us");
  report("launch: tessel, 3 tensor maps by value", tessel_us, "us", ratio(tessel_us / raw_us, "<= 1.10 x raw"));
  report("launch: maps by reference (pinned copy + launch)", ref_us, "us",
         ratio(ref_us / tessel_us, "by-ref / tessel"));

  // ---- CUDA graph replay -------------------------------------------------
  constexpr int kCaptured = 100, kReplays = 200;
  Stream stream = must(dev.create_stream(), "stream");
  must(stream.begin_capture(), "begin_capture");
  for (int i = 0; i < kCaptured; ++i) {
    must(fmaps.launch({.grid = 1, .stream = &stream}, maps[0], maps[1], maps[2]), "captured launch");
  }
  Graph graph = must(stream.end_capture(), "end_capture");
  CUstream raw_stream = static_cast<CUstream>(stream.native());
  CUgraph raw_graph;
  CUgraphExec raw_exec;
  cu.check(cu.cuStreamBeginCapture(raw_stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "capture");
  for (int i = 0; i < kCaptured; ++i) {
    cu.check(cu.cuLaunchKernel(fptrs, 1, 1, 1, ptx.threads, 1, 1, 0, raw_stream, ptr_params, nullptr), "launch");
  }
  cu.check(cu.cuStreamEndCapture(raw_stream, &raw_graph), "end capture");
  cu.check(cu.cuGraphInstantiateWithFlags(&raw_exec, raw_graph, 0), "instantiate");
  auto replay_us = [&](auto&& replay) {
    for (int i = 0; i < 10; ++i) replay();
    must(stream.synchronize(), "sync");
    Clock::time_point t0 = Clock::now();
    for (int i = 0; i < kReplays; ++i) replay();
    must(stream.synchronize(), "sync");
    return seconds_since(t0) * 1e6 / (kReplays * kCaptured);
  };
  double graph_tessel = replay_us([&] { must(graph.launch(&stream), "replay"); });
  double graph_raw = replay_us([&] { cu.check(cu.cuGraphLaunch(raw_exec, raw_stream), "replay"); });
  report("graph replay: raw, per kernel", graph_raw, "us");
  report("graph replay: tessel (3 maps), per kernel", graph_tessel, "us", ratio(graph_tessel / graph_raw, "~1.0"));

  // ---- JIT -----------------------------------------------------------------
  CompileOptions matmul_options;
  matmul_options.num_warps = samples::kMatmulWarps;
  // Builder to loaded function, median of 5, each kernel new to the caches.
  auto cold_ms = [&](const samples::GemmConfig& config, const CompileOptions& options, const std::string& tag) {
    std::vector<double> ms;
    for (int i = 0; i < 5; ++i) {
      Clock::time_point t0 = Clock::now();
      Kernel k = must(samples::gemm_kernel(config, tag + std::to_string(i)), "build");
      Function f = must(dev.compile(k, options), "compile");
      ms.push_back(seconds_since(t0) * 1e3);
    }
    return median(ms);
  };
  report("cold JIT of the persistent GEMM (builder -> loaded), median",
         cold_ms(samples::kMatmul, matmul_options, "matmul_cold_"), "ms");
  // Like for like with bench/triton_compare.py's cold compile, whose kernel
  // has 128x128x64 tiles, 3 stages and 8 warps: the same here.
  CompileOptions eight_warps;
  eight_warps.num_warps = 8;
  report("cold JIT of the GEMM at Triton's 128x128x64 tiles, 3 stages, median",
         cold_ms({.bm = 128, .bn = 128, .bk = 64, .out = bf16, .stages = 3}, eight_warps, "matmul_128_cold_"), "ms");
  // Where that time goes: tessel's codegen (builder -> PTX), the rest is the driver's PTX compile and load.
  std::vector<double> codegen;
  CompileOptions ptx_options = matmul_options;
  ptx_options.arch = "sm_90a";
  for (int i = 0; i < 5; ++i) {
    Clock::time_point t0 = Clock::now();
    Kernel k = must(samples::matmul_kernel("matmul_codegen_" + std::to_string(i)), "build");
    must(tessel::compile(k, ptx_options), "codegen");
    codegen.push_back(seconds_since(t0) * 1e3);
  }
  report("  of which codegen (builder -> PTX), median", median(codegen), "ms");
  Kernel hot = must(samples::matmul_kernel("matmul_cold_0"), "build");
  constexpr int kHits = 2000;
  Clock::time_point t0 = Clock::now();
  for (int i = 0; i < kHits; ++i) must(dev.compile(hot, matmul_options), "compile");
  report("JIT cache hit (compile of a built kernel)", seconds_since(t0) * 1e6 / kHits, "us", "target <= 20 us");
  t0 = Clock::now();
  for (int i = 0; i < 200; ++i) {
    must(dev.compile(must(samples::matmul_kernel("matmul_cold_0"), "build"), matmul_options), "compile");
  }
  report("JIT cache hit including the builder", seconds_since(t0) * 1e6 / 200, "us");

  // The autotuner's compiles: the GEMM's bf16 tile configurations (those
  // gemm_bench tunes over, stream-K and split-K aside), each kernel new to
  // the caches, compiled by tessel::autotune's prepares one after another
  // and then on every core at once (its default); and the three that
  // bench/triton_compare.py's cold compile times Triton on, one after
  // another as Triton's autotuner compiles them.
  struct TileConfig {
    int64_t bm, bn;
    int stages, warps;
  };
  auto compile_ms = [&](const std::vector<TileConfig>& tiles, int threads, const std::string& tag) {
    std::vector<TuneCandidate> candidates;
    for (const TileConfig& c : tiles) {
      const std::string name = absl::StrCat("gemm_", c.bm, "x", c.bn, "_s", c.stages, "_w", c.warps, "_", tag);
      candidates.push_back({name, [] { return absl::OkStatus(); }, [&dev, c, name]() -> absl::Status {
                              samples::GemmConfig g = {.bm = c.bm, .bn = c.bn, .bk = 64, .out = bf16,
                                                       .stages = c.stages, .warp_specialize = c.warps == 12};
                              absl::StatusOr<Kernel> k = samples::gemm_kernel(g, name);
                              if (!k.ok()) return k.status();
                              CompileOptions options;
                              options.num_warps = c.warps;
                              return dev.compile(*k, options).status();
                            }});
    }
    AutotuneResult r = must(autotune(dev, "gpu_bench compiles " + tag, candidates,
                                     {.warmup = 0, .reps = 1, .memory = false, .disk = false,
                                      .prepare_threads = threads}),
                            "autotune");
    for (const std::string& e : r.errors) {
      if (!e.empty()) std::printf("  a candidate failed: %s\n", e.c_str());
    }
    return r.prepare_seconds * 1e3;
  };
  const std::vector<TileConfig> tiles = {{128, 128, 3, 8},  {128, 128, 4, 8},  {128, 256, 2, 8}, {128, 256, 3, 8},
                                         {128, 256, 4, 8},  {128, 128, 4, 4},  {64, 128, 6, 4},  {64, 128, 8, 4},
                                         {128, 128, 4, 12}, {128, 128, 5, 12}, {64, 256, 4, 12}};
  const double one = compile_ms(tiles, 1, "serial"), all = compile_ms(tiles, 0, "all");
  const std::string cores = absl::StrCat(std::thread::hardware_concurrency(), " cores");
  report(absl::StrCat("autotune's compiles of ", tiles.size(), " GEMM configurations, one after another"), one, "ms");
  report(absl::StrCat("  the same on every core (", cores, ")"), all, "ms", ratio(all / one, "< 1"));
  report("autotune's compiles of Triton's 3 configurations, every core (compare Triton's compiles of them)",
         compile_ms({{128, 128, 3, 8}, {128, 128, 4, 8}, {128, 256, 3, 8}}, 0, "triton"), "ms");

  // ---- TMA tile copy bandwidth ------------------------------------------
  constexpr int kM = 16384, kN = 16384;
  size_t bytes = size_t{kM} * kN * 2;
  Buffer src = must(dev.allocate(bytes), "allocate"), dst = must(dev.allocate(bytes), "allocate");
  {
    std::vector<uint16_t> host(size_t{kM} * kN);
    std::mt19937 gen(1);
    for (uint16_t& v : host) v = static_cast<uint16_t>(gen() & 0x7F7F);  // finite bf16 patterns
    must(dev.copy_to_device(src, host.data(), bytes), "upload");
  }
  CUevent e0, e1;
  cu.check(cu.cuEventCreate(&e0, 0), "event");
  cu.check(cu.cuEventCreate(&e1, 0), "event");
  auto time_ms = [&](auto&& work) {
    for (int i = 0; i < 3; ++i) work();
    std::vector<double> ms;
    for (int i = 0; i < 10; ++i) {
      ms.push_back(cu.event_ms(raw_stream, e0, e1, work));
    }
    return median(ms);
  };
  double memcpy_ms = time_ms([&] {
    cu.check(cu.cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(dst.data()), reinterpret_cast<CUdeviceptr>(src.data()),
                                  bytes, raw_stream),
             "memcpy");
  });
  double memcpy_gbs = 2.0 * bytes / (memcpy_ms * 1e6);
  report("device-to-device copy, 512 MiB", memcpy_gbs, "GB/s");
  double best_gbs = 0;
  std::string best_cfg;
  for (auto [bm, bn] : {std::pair{64, 128}, std::pair{128, 128}, std::pair{128, 64}}) {
    std::string name = "tile_copy_" + std::to_string(bm) + "x" + std::to_string(bn);
    Function copy = must(dev.compile(must(samples::tile_copy_kernel(bm, bn, name), "build")), "compile copy");
    TensorMap ms = must(dev.tensor_map(bf16, src, {kM, kN}, {bm, bn}), "map");
    TensorMap md = must(dev.tensor_map(bf16, dst, {kM, kN}, {bm, bn}), "map");
    for (int per_sm : {4, 8, 16}) {
      int grid = dev.num_compute_units() * per_sm;
      double ms_t = time_ms([&] { must(copy.launch({.grid = grid, .stream = &stream}, ms, md, kM, kN), "copy"); });
      double gbs = 2.0 * bytes / (ms_t * 1e6);
      std::string cfg = "box " + std::to_string(bm) + "x" + std::to_string(bn) + ", " + std::to_string(per_sm) + "/SM";
      report("TMA tile copy, " + cfg, gbs, "GB/s");
      if (gbs > best_gbs) best_gbs = gbs, best_cfg = cfg;
    }
  }
  must(stream.synchronize(), "sync");
  {
    std::vector<uint16_t> a(size_t{kM} * kN), b(size_t{kM} * kN);
    must(dev.copy_to_host(a.data(), src, bytes), "download");
    must(dev.copy_to_host(b.data(), dst, bytes), "download");
    size_t bad = 0;
    for (size_t i = 0; i < a.size(); ++i) bad += a[i] != b[i];
    std::printf("tile copy check: %zu wrong elements\n", bad);
    if (bad != 0) return 1;
  }
  report("TMA tile copy, best (" + best_cfg + ")", best_gbs, "GB/s", ratio(best_gbs / memcpy_gbs, ">= 0.92 x memcpy"));

  // ---- Elementwise bandwidth ------------------------------------------------
  // The size triton_compare.py's elementwise_bandwidth gives torch.add:
  // z = x + y over 64 Mi f32, reading inputs written above as bf16 bit
  // patterns, finite as f32 too. Row kernels (softmax, norms) are
  // bench/norm_bench's.
  {
    constexpr int kAdd = 64 << 20;
    Function add = must(dev.compile(must(samples::vector_add_kernel(), "build add")), "compile add");
    float* x = src.as<float>();
    float* y = x + kAdd;
    float* z = dst.as<float>();
    int grid = kAdd / samples::kAddBlock;
    must(add.prepare(x, y, z, kAdd), "prepare add");
    double add_ms = time_ms([&] { must(add.launch({.grid = grid, .stream = &stream}, x, y, z, kAdd), "add"); });
    double add_gbs = 3.0 * kAdd * 4 / (add_ms * 1e6);
    report("vector_add, 64 Mi f32 (3 arrays)", add_gbs, "GB/s", ratio(add_gbs / memcpy_gbs, "vs memcpy"));
    must(stream.synchronize(), "sync");
  }
  return 0;
}
