// A persistent TMA tile copy (and transpose) of a bf16 matrix whose sizes
// are not multiples of the box: out-of-bounds parts of edge boxes read zeros
// and are clipped on store.
#include <cstdio>

#include "common.h"
#include "kernels.h"

using namespace tessel;

using samples::kCopyBM;
using samples::kCopyBN;

int main(int argc, char** argv) {
  samples::Args args = samples::parse_args(argc, argv);
  Kernel copy_kernel = samples::value_or_die(samples::tile_copy_kernel(), "build tile_copy");
  Kernel transpose_kernel = samples::value_or_die(samples::tile_transpose_kernel(), "build tile_transpose");
  if (samples::emit_for_target(args, {copy_kernel, transpose_kernel})) return 0;
  Device device = samples::value_or_die(samples::open_device(args), "device");
  Function copy = samples::value_or_die(device.compile(copy_kernel, samples::compile_options(args)), "compile");
  Function transpose =
      samples::value_or_die(device.compile(transpose_kernel, samples::compile_options(args)), "compile");
  if (!args.emit_dir.empty()) return 0;

  std::mt19937 gen(args.seed);
  const int m = 1000, n = 1496;  // neither a multiple of the box; rows 16-byte aligned as TMA needs
  std::vector<uint16_t> host(size_t{m} * n);
  std::uniform_real_distribution<float> dist(-4, 4);
  for (uint16_t& v : host) v = float_to_bf16(dist(gen));
  size_t bytes = host.size() * 2;
  Buffer src = samples::value_or_die(device.allocate(bytes), "allocate");
  Buffer dst = samples::value_or_die(device.allocate(bytes), "allocate");
  samples::ok_or_die(device.copy_to_device(src, host.data(), bytes), "copy");
  std::vector<uint16_t> out(host.size(), 0xFFFF);  // poison: a NaN pattern no input has

  TensorMap src_map = samples::value_or_die(device.tensor_map(bf16, src, {m, n}, {kCopyBM, kCopyBN}), "src map");
  TensorMap dst_map = samples::value_or_die(device.tensor_map(bf16, dst, {m, n}, {kCopyBM, kCopyBN}), "dst map");
  samples::ok_or_die(device.copy_to_device(dst, out.data(), bytes), "poison");
  samples::ok_or_die(copy.launch({.grid = device.num_compute_units()}, src_map, dst_map, m, n), "launch copy");
  samples::ok_or_die(device.copy_to_host(out.data(), dst, bytes), "copy back");
  size_t bad = 0;
  for (size_t i = 0; i < host.size(); ++i) bad += out[i] != host[i];
  std::printf("tile_copy %dx%d bf16 on %s: %zu wrong elements\n", m, n, device.name().c_str(), bad);

  TensorMap t_map = samples::value_or_die(device.tensor_map(bf16, dst, {n, m}, {kCopyBN, kCopyBM}), "transposed map");
  std::fill(out.begin(), out.end(), 0xFFFF);
  samples::ok_or_die(device.copy_to_device(dst, out.data(), bytes), "poison");
  samples::ok_or_die(transpose.launch({.grid = device.num_compute_units()}, src_map, t_map, m, n), "launch transpose");
  samples::ok_or_die(device.copy_to_host(out.data(), dst, bytes), "copy back");
  size_t bad_t = 0;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) bad_t += out[static_cast<size_t>(j) * m + i] != host[static_cast<size_t>(i) * n + j];
  }
  std::printf("tile_transpose: %zu wrong elements\n", bad_t);
  return bad == 0 && bad_t == 0 ? 0 : 1;
}
