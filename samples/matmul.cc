// The main sample: a persistent bf16 GEMM, C = A @ B with f32 accumulation.
// Each program walks output tiles; per tile it loads [BM, BK] and [BK, BN]
// boxes with TMA (zeros past the edges) and accumulates with dot.
#include <cstdio>

#include "common.h"
#include "kernels.h"

using namespace tessel;

using samples::kMmBK;
using samples::kMmBM;
using samples::kMmBN;

int main(int argc, char** argv) {
  samples::Args args = samples::parse_args(argc, argv);
  Kernel kernel = samples::value_or_die(samples::matmul_kernel(), "build");
  if (samples::emit_for_target(args, {kernel})) return 0;
  Device device = samples::value_or_die(samples::open_device(args), "device");
  Function fn = samples::value_or_die(device.compile(kernel, samples::compile_options(args)), "compile");
  if (!args.emit_dir.empty()) return 0;

  const int m = 1000, n = 712, k = 600;  // not multiples of the tiles; rows 16-byte aligned as TMA needs
  std::mt19937 gen(args.seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<uint16_t> ha(size_t{m} * k), hb(size_t{k} * n);
  for (uint16_t& v : ha) v = samples::to_bf16(dist(gen));
  for (uint16_t& v : hb) v = samples::to_bf16(dist(gen));
  std::vector<float> hc(size_t{m} * n, NAN);

  Buffer da = samples::value_or_die(device.allocate(ha.size() * 2), "allocate");
  Buffer db = samples::value_or_die(device.allocate(hb.size() * 2), "allocate");
  Buffer dc = samples::value_or_die(device.allocate(hc.size() * 4), "allocate");
  samples::ok_or_die(device.copy_to_device(da, ha.data(), ha.size() * 2), "copy");
  samples::ok_or_die(device.copy_to_device(db, hb.data(), hb.size() * 2), "copy");
  samples::ok_or_die(device.copy_to_device(dc, hc.data(), hc.size() * 4), "poison");
  TensorMap ma = samples::value_or_die(device.tensor_map(bf16, da, {m, k}, {kMmBM, kMmBK}), "map a");
  TensorMap mb = samples::value_or_die(device.tensor_map(bf16, db, {k, n}, {kMmBK, kMmBN}), "map b");
  TensorMap mc = samples::value_or_die(device.tensor_map(f32, dc, {m, n}, {kMmBM, kMmBN}), "map c");
  samples::ok_or_die(fn.launch({.grid = device.num_compute_units()}, ma, mb, mc, m, n, k), "launch");
  samples::ok_or_die(device.copy_to_host(hc.data(), dc, hc.size() * 4), "copy back");

  std::vector<double> want(size_t{m} * n, 0.0);
  for (int i = 0; i < m; ++i) {
    for (int p = 0; p < k; ++p) {
      double av = samples::from_bf16(ha[static_cast<size_t>(i) * k + p]);
      for (int j = 0; j < n; ++j) want[static_cast<size_t>(i) * n + j] += av * samples::from_bf16(hb[static_cast<size_t>(p) * n + j]);
    }
  }
  std::printf("matmul %dx%dx%d bf16 -> f32 on %s\n", m, n, k, device.name().c_str());
  return samples::check_close("C = A @ B", hc, want, 1e-4) ? 0 : 1;
}
