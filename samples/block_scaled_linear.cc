// A linear layer in DeepSeek-V3's fp8 form: Y = X W^T with X's activations
// quantized to e4m3 on the device per 1 x 128 group of a row
// (samples::quantize_groups_kernel) and W's weights per 128 x 128 block, as
// a checkpoint ships them (here on the host), the GEMM scaling each K step's
// product by both blocks' scales (GemmConfig::block_scales) into Y in bf16.
// It checks Y against the double product of the quantized operands times
// their scales (what the kernels compute), and prints how far that is from
// the f32 layer (the quantization's own error). For AMD's gfx942 (--emit
// --target=gfx942) it emits the same kernels with tiles for 64 KiB of LDS,
// the GEMM on MFMA.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common.h"
#include "kernels.h"

using namespace tessel;

namespace {

constexpr int64_t kBlock = samples::kScaleBlock;
constexpr samples::RowBlock kGroups = {.rows = 32, .cols = kBlock, .warps = 2};
constexpr samples::GemmConfig kLinear = {
    .bm = 128, .bn = 128, .bk = 128, .in = f8e4m3, .out = bf16, .stages = 4, .block_scales = true};
constexpr int kLinearWarps = 8;

}  // namespace

int main(int argc, char** argv) {
  samples::Args args = samples::parse_args(argc, argv);
  CompileOptions options = samples::compile_options(args);
  if (args.target.rfind("gfx", 0) == 0) {  // AMD: MFMA, tiles for 64 KiB of LDS
    samples::GemmConfig amd = samples::kMatmulAmd;
    amd.in = f8e4m3;
    amd.block_scales = true;
    options.num_warps = samples::kMatmulAmdWarps;
    samples::emit_for_target(args,
                             {samples::value_or_die(samples::quantize_groups_kernel(kGroups, bf16, f8e4m3), "build"),
                              samples::value_or_die(samples::gemm_kernel(amd, "block_scaled_linear"), "build")},
                             options);
    return 0;
  }
  Kernel quantize = samples::value_or_die(samples::quantize_groups_kernel(kGroups, bf16, f8e4m3), "build");
  Kernel linear = samples::value_or_die(samples::gemm_kernel(kLinear, "block_scaled_linear"), "build");
  options.num_warps = kLinearWarps;
  if (samples::emit_for_target(args, {quantize, linear}, options)) return 0;
  Device device = samples::value_or_die(samples::open_device(args), "device");
  CompileOptions small = samples::compile_options(args);
  small.num_warps = kGroups.warps;
  Function quantize_fn = samples::value_or_die(device.compile(quantize, small), "compile");
  Function linear_fn = samples::value_or_die(device.compile(linear, options), "compile");
  if (!args.emit_dir.empty()) return 0;

  // K not a multiple of the blocks (the last is 112 wide), rows 16-byte aligned as TMA needs.
  const int m = 1000, n = 712, k = 624;
  const int kb = (k + kBlock - 1) / kBlock;
  std::mt19937 gen(args.seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<uint16_t> hx(size_t{m} * k);
  std::vector<float> w(size_t{n} * k);
  for (uint16_t& v : hx) v = float_to_bf16(dist(gen));
  for (float& v : w) v = dist(gen);

  // W per 128 x 128 block, as a checkpoint ships it.
  std::vector<uint8_t> hw(w.size());
  const std::vector<float> w_scales = samples::quantize_blocks_reference(w.data(), n, k, f8e4m3, hw.data(), kBlock);

  auto upload = [&](const void* data, size_t bytes) {
    Buffer b = samples::value_or_die(device.allocate(bytes), "allocate");
    samples::ok_or_die(device.copy_to_device(b, data, bytes), "copy");
    return b;
  };
  Buffer dx = upload(hx.data(), hx.size() * 2), dw = upload(hw.data(), hw.size());
  Buffer dws = upload(w_scales.data(), w_scales.size() * 4);
  Buffer dq = samples::value_or_die(device.allocate(hx.size()), "allocate");
  Buffer dxs = samples::value_or_die(device.allocate(size_t{kb} * m * 4), "allocate");
  std::vector<uint16_t> hy(size_t{m} * n, 0x7FC0);  // Y poisoned with NaN
  Buffer dy = upload(hy.data(), hy.size() * 2);

  // X per 1 x 128 group, its scales [k / 128, m] as the GEMM reads A's.
  const int groups = kb * m;
  samples::ok_or_die(
      quantize_fn.launch({.grid = (groups + kGroups.rows - 1) / kGroups.rows, .num_warps = kGroups.warps}, dx, dq, dxs,
                         m, k),
      "quantize");
  samples::GemmMaps maps = samples::value_or_die(samples::gemm_maps(device, kLinear, dq, dw, dy, m, n, k), "maps");
  const samples::GemmBlockScales blocks = {dxs, dws};
  samples::ok_or_die(
      linear_fn.launch_packed(
          {.grid = samples::gemm_grid(kLinear, m, n, device.num_compute_units()), .num_warps = kLinearWarps},
          samples::gemm_args(kLinear, maps, m, n, k, dy, dy, dy, nullptr, nullptr, nullptr, nullptr, &blocks)),
      "linear");
  samples::ok_or_die(device.synchronize(), "synchronize");
  std::vector<uint8_t> hq(hx.size());
  std::vector<float> x_scales(groups);
  samples::ok_or_die(device.copy_to_host(hq.data(), dq, hq.size()), "copy back");
  samples::ok_or_die(device.copy_to_host(x_scales.data(), dxs, x_scales.size() * 4), "copy back");
  samples::ok_or_die(device.copy_to_host(hy.data(), dy, hy.size() * 2), "copy back");

  // What the kernels compute, in double; and the f32 layer.
  std::vector<double> want(size_t{m} * n);
  double worst_quantized = 0;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double sum = 0, exact = 0;
      for (int p = 0; p < k; ++p) {
        const size_t xi = size_t{1} * i * k + p, wi = size_t{1} * j * k + p;
        const double xs = x_scales[size_t{1} * (p / kBlock) * m + i],
                     ws = w_scales[size_t{1} * (j / kBlock) * kb + p / kBlock];
        sum += float8_to_float(hq[xi], Float8::kE4M3) * xs * float8_to_float(hw[wi], Float8::kE4M3) * ws;
        exact += double{bf16_to_float(hx[xi])} * w[wi];
      }
      want[size_t{1} * i * n + j] = sum;
      worst_quantized = std::max(worst_quantized, std::abs(sum - exact));
    }
  }
  std::vector<float> got(hy.size());
  for (size_t i = 0; i < hy.size(); ++i) got[i] = bf16_to_float(hy[i]);
  std::printf("block-scaled linear %dx%dx%d e4m3 -> bf16 on %s; the quantized layer is within %.3g of the f32 one\n", m,
              n, k, device.name().c_str(), worst_quantized);
  // Y is rounded to bf16 once (2^-8 of its magnitude), after the tensor cores' sums of each K step.
  return samples::check_close("Y = X W^T", got, want, 8e-3) ? 0 : 1;
}
