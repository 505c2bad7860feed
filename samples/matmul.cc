// The main sample: the persistent GEMM C = A @ B^T on tensor cores. A is
// M x K row-major, B is given as N x K (K-major, the layout cuBLAS and
// Triton's persistent matmul are fastest with), C is M x N bf16 rounded once
// from an f32 accumulator. Programs walk output tiles in groups of 8 tile
// rows; the K loop loads swizzled TMA boxes three stages ahead and runs
// dot on wgmma on sm_90a (a loop on the host). On a GPU, tessel::autotune
// picks among three configurations for the shape (one warp-specialized),
// compiling them at once on several threads.
// It checks C against a double reference.
#include <cstdio>

#include "common.h"
#include "kernels.h"

using namespace tessel;

int main(int argc, char** argv) {
  samples::Args args = samples::parse_args(argc, argv);
  // Three configurations: on a GPU the autotuner picks one for this shape
  // (and remembers it on disk, so a second run times nothing); the host
  // runs the first.
  struct Form {
    samples::GemmConfig config;
    int warps;
    const char* name;
  };
  const std::vector<Form> forms = {{samples::kMatmul, samples::kMatmulWarps, "matmul"},
                                   {samples::kMatmulNarrow, samples::kMatmulWarps, "matmul_narrow"},
                                   {samples::kMatmulPingPong, samples::kMatmulPingPongWarps, "matmul_pingpong"}};
  std::vector<Kernel> kernels;
  for (const Form& f : forms) kernels.push_back(samples::value_or_die(samples::gemm_kernel(f.config, f.name), "build"));
  CompileOptions options = samples::compile_options(args);
  options.num_warps = samples::kMatmulWarps;  // two warpgroups, 64 rows of the tile each
  if (args.target.rfind("gfx", 0) == 0) {     // AMD: tiles for 64 KiB of LDS, MFMA
    CompileOptions amd = options;
    amd.num_warps = samples::kMatmulAmdWarps;
    samples::emit_for_target(args, {samples::value_or_die(samples::gemm_kernel(samples::kMatmulAmd, "matmul"), "build")},
                             amd);
    return 0;
  }
  if (samples::emit_for_target(args, {kernels[0]}, options)) return 0;
  Device device = samples::value_or_die(samples::open_device(args), "device");
  samples::value_or_die(device.compile(kernels[0], options), "compile");  // and its dumps, with --emit
  if (!args.emit_dir.empty()) return 0;

  const int m = 1000, n = 712, k = 600;  // not multiples of the tiles; rows 16-byte aligned as TMA needs
  std::mt19937 gen(args.seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<uint16_t> ha(size_t{m} * k), hb(size_t{n} * k), hc(size_t{m} * n, 0x7FC0);  // C poisoned with NaN
  for (uint16_t& v : ha) v = float_to_bf16(dist(gen));
  for (uint16_t& v : hb) v = float_to_bf16(dist(gen));

  Buffer da = samples::value_or_die(device.allocate(ha.size() * 2), "allocate");
  Buffer db = samples::value_or_die(device.allocate(hb.size() * 2), "allocate");
  Buffer dc = samples::value_or_die(device.allocate(hc.size() * 2), "allocate");
  samples::ok_or_die(device.copy_to_device(da, ha.data(), ha.size() * 2), "copy");
  samples::ok_or_die(device.copy_to_device(db, hb.data(), hb.size() * 2), "copy");
  // Configuration i's function (compiled once, then cached) and its maps;
  // `prepare` compiles the variant its launches take, `run` launches it.
  auto with = [&](size_t i, bool launch) -> absl::Status {
    CompileOptions with_warps = options;
    with_warps.num_warps = forms[i].warps;
    absl::StatusOr<Function> f = device.compile(kernels[i], with_warps);
    if (!f.ok()) return f.status();
    absl::StatusOr<samples::GemmMaps> maps = samples::gemm_maps(device, forms[i].config, da, db, dc, m, n, k);
    if (!maps.ok()) return maps.status();
    if (!launch) return f->prepare(maps->a, maps->b, maps->c, m, n, k);
    return f->launch({.grid = device.num_compute_units(), .num_warps = forms[i].warps}, maps->a, maps->b, maps->c, m,
                     n, k);
  };
  auto run = [&](size_t i) { return with(i, true); };
  size_t pick = 0;
  if (device.kind() == DeviceKind::kCuda) {
    // The candidates compile on several threads at once, then each is timed.
    std::vector<TuneCandidate> candidates;
    for (size_t i = 0; i < forms.size(); ++i) {
      candidates.push_back(
          {std::string(kernels[i].name()), [&run, i] { return run(i); }, [&with, i] { return with(i, false); }});
    }
    AutotuneResult tuned =
        samples::value_or_die(autotune(device, "samples/matmul 1000x712x600 bf16", candidates), "autotune");
    pick = static_cast<size_t>(tuned.index);
    std::printf("autotuned: %s%s\n", candidates[pick].label.c_str(), tuned.cached ? " (remembered)" : "");
  }
  samples::ok_or_die(device.copy_to_device(dc, hc.data(), hc.size() * 2), "poison");  // after tuning's runs
  samples::ok_or_die(run(pick), "launch");
  samples::ok_or_die(device.copy_to_host(hc.data(), dc, hc.size() * 2), "copy back");

  std::vector<double> want(size_t{m} * n, 0.0);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double sum = 0;
      for (int p = 0; p < k; ++p) {
        sum += double{bf16_to_float(ha[size_t{1} * i * k + p])} * bf16_to_float(hb[size_t{1} * j * k + p]);
      }
      want[size_t{1} * i * n + j] = sum;
    }
  }
  std::vector<float> got(hc.size());
  for (size_t i = 0; i < hc.size(); ++i) got[i] = bf16_to_float(hc[i]);
  std::printf("matmul %dx%dx%d bf16 (B as NxK) -> bf16 on %s\n", m, n, k, device.name().c_str());
  // C is rounded to bf16 once: up to 2^-8 of its magnitude.
  return samples::check_close("C = A @ B^T", got, want, 8e-3) ? 0 : 1;
}
