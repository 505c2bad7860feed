// The main sample's GEMM with its epilogue fused: C = gelu(A @ B^T + bias),
// bf16 out. The bias add and the GELU run on the accumulator in registers
// between the last wgmma and the TMA store (samples/kernels.h gemm_kernel
// with bias_gelu), so they cost no trip through memory. It checks C against
// a double reference.
#include <cstdio>

#include "common.h"
#include "kernels.h"

using namespace tessel;

int main(int argc, char** argv) {
  samples::Args args = samples::parse_args(argc, argv);
  const bool amd = args.target.rfind("gfx", 0) == 0;  // AMD: tiles for 64 KiB of LDS, MFMA
  samples::GemmConfig g = amd ? samples::kMatmulAmd : samples::kMatmul;
  g.bias_gelu = true;
  Kernel kernel = samples::value_or_die(samples::gemm_kernel(g, "matmul_gelu"), "build");
  CompileOptions options = samples::compile_options(args);
  options.num_warps = amd ? samples::kMatmulAmdWarps : samples::kMatmulWarps;
  if (samples::emit_for_target(args, {kernel}, options)) return 0;
  Device device = samples::value_or_die(samples::open_device(args), "device");
  Function fn = samples::value_or_die(device.compile(kernel, options), "compile");
  if (!args.emit_dir.empty()) return 0;

  const int m = 777, n = 520, k = 328;  // not multiples of the tiles; rows 16-byte aligned as TMA needs
  std::mt19937 gen(args.seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  auto random_bf16 = [&](size_t count) {
    std::vector<uint16_t> v(count);
    for (uint16_t& x : v) x = float_to_bf16(dist(gen));
    return v;
  };
  const std::vector<uint16_t> ha = random_bf16(size_t{m} * k), hb = random_bf16(size_t{n} * k),
                              hbias = random_bf16(n);
  auto upload = [&](const std::vector<uint16_t>& host) {
    Buffer b = samples::value_or_die(device.allocate(host.size() * 2), "allocate");
    samples::ok_or_die(device.copy_to_device(b, host.data(), host.size() * 2), "copy");
    return b;
  };
  Buffer da = upload(ha), db = upload(hb), dbias = upload(hbias);
  Buffer dc = upload(std::vector<uint16_t>(size_t{m} * n, 0x7FC0));  // C poisoned with NaN
  samples::GemmMaps maps = samples::value_or_die(samples::gemm_maps(device, g, da, db, dc, m, n, k), "maps");
  samples::ok_or_die(fn.launch({.grid = device.num_compute_units(), .num_warps = options.num_warps}, maps.a, maps.b,
                               maps.c, m, n, k, dbias),
                     "launch");
  std::vector<uint16_t> hc(size_t{m} * n);
  samples::ok_or_die(device.copy_to_host(hc.data(), dc, hc.size() * 2), "copy back");

  std::vector<double> want(hc.size());
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double sum = bf16_to_float(hbias[j]);
      for (int p = 0; p < k; ++p) {
        sum += double{bf16_to_float(ha[size_t{1} * i * k + p])} * bf16_to_float(hb[size_t{1} * j * k + p]);
      }
      want[size_t{1} * i * n + j] = samples::gelu_reference(sum);
    }
  }
  std::vector<float> got(hc.size());
  for (size_t i = 0; i < hc.size(); ++i) got[i] = bf16_to_float(hc[i]);
  std::printf("matmul_gelu %dx%dx%d bf16 (B as NxK, bias [N]) -> bf16 on %s\n", m, n, k, device.name().c_str());
  // C is rounded to bf16 once (2^-8 of its magnitude); exp on GPUs is an approximation.
  return samples::check_close("C = gelu(A @ B^T + bias)", got, want, 1e-2) ? 0 : 1;
}
