// The main sample's GEMM with its epilogue fused: C = gelu(A @ B^T + bias),
// bf16 out. The bias add and the GELU run on the accumulator in registers
// between the last wgmma and the TMA store (samples/kernels.h gemm_kernel
// with bias_gelu), so they cost no trip through memory. On NVIDIA GPUs it
// runs the main sample's tiles and the warp-specialized (ping-pong) ones,
// where one consumer's epilogue runs under the other's products, and
// checks C against a double reference each time.
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
  samples::value_or_die(device.compile(kernel, options), "compile");  // and its dumps, with --emit
  if (!args.emit_dir.empty()) return 0;
  // The ping-pong form where the chip has it.
  std::vector<std::pair<samples::GemmConfig, int>> forms = {{g, options.num_warps}};
  if (device.kind() == DeviceKind::kCuda) {
    samples::GemmConfig pingpong = samples::kMatmulPingPong;
    pingpong.bias_gelu = true;
    forms.push_back({pingpong, samples::kMatmulPingPongWarps});
  }

  // Not multiples of the tiles, rows 16-byte aligned as TMA needs; more
  // 128 x 128 tiles than an H200 has SMs, so both consumers take some.
  const int m = 1800, n = 1160, k = 328;
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
  const std::vector<uint16_t> poison(size_t{m} * n, 0x7FC0);  // C poisoned with NaN before each run
  Buffer dc = upload(poison);

  std::vector<double> want(poison.size());
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double sum = bf16_to_float(hbias[j]);
      for (int p = 0; p < k; ++p) {
        sum += double{bf16_to_float(ha[size_t{1} * i * k + p])} * bf16_to_float(hb[size_t{1} * j * k + p]);
      }
      want[size_t{1} * i * n + j] = samples::gelu_reference(sum);
    }
  }
  std::printf("matmul_gelu %dx%dx%d bf16 (B as NxK, bias [N]) -> bf16 on %s\n", m, n, k, device.name().c_str());
  bool ok = true;
  for (const auto& [form, warps] : forms) {
    CompileOptions with_warps = options;
    with_warps.num_warps = warps;
    Kernel built = samples::value_or_die(samples::gemm_kernel(form, "matmul_gelu"), "build");
    Function fn = samples::value_or_die(device.compile(built, with_warps), "compile");
    samples::ok_or_die(device.copy_to_device(dc, poison.data(), poison.size() * 2), "poison");
    samples::GemmMaps maps = samples::value_or_die(samples::gemm_maps(device, form, da, db, dc, m, n, k), "maps");
    samples::ok_or_die(
        fn.launch({.grid = device.num_compute_units(), .num_warps = warps}, maps.a, maps.b, maps.c, m, n, k, dbias),
        "launch");
    std::vector<uint16_t> hc(poison.size());
    samples::ok_or_die(device.copy_to_host(hc.data(), dc, hc.size() * 2), "copy back");
    std::vector<float> got(hc.size());
    for (size_t i = 0; i < hc.size(); ++i) got[i] = bf16_to_float(hc[i]);
    // C is rounded to bf16 once (2^-8 of its magnitude); tanh on GPUs is an approximation.
    const std::string what = form.warp_specialize ? "C = gelu(A @ B^T + bias), ping-pong" : "C = gelu(A @ B^T + bias)";
    ok = samples::check_close(what.c_str(), got, want, 1e-2) && ok;
  }
  return ok ? 0 : 1;
}
