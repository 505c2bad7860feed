// A persistent TMA tile copy (and transpose) of a bf16 matrix whose sizes
// are not multiples of the box: out-of-bounds parts of edge boxes read zeros
// and are clipped on store.
#include <cstdio>

#include "common.h"

using namespace tessel;

namespace {

constexpr int kBM = 64, kBN = 128;

Kernel tile_copy() {
  KernelBuilder k("tile_copy");
  Value src = k.tensor_map(bf16, {kBM, kBN}, "src");  // by-value descriptor
  Value dst = k.tensor_map(bf16, {kBM, kBN}, "dst");
  Value m = k.arg(i32, "m"), n = k.arg(i32, "n");
  Value tiles_n = cdiv(n, kBN);
  k.for_each_tile(cdiv(m, kBM) * tiles_n, [&](Value t) {
    Value row = t / tiles_n * kBM, col = t % tiles_n * kBN;
    tma_store(dst, {row, col}, tma_load(src, {row, col}));  // [kBM, kBN] bf16, smem
  });
  return samples::value_or_die(k.build(), "build tile_copy");
}

// dst[n, m] = src[m, n]: load a [kBM, kBN] box, store its transpose as a [kBN, kBM] box.
Kernel tile_transpose() {
  KernelBuilder k("tile_transpose");
  Value src = k.tensor_map(bf16, {kBM, kBN}, "src");
  Value dst = k.tensor_map(bf16, {kBN, kBM}, "dst");
  Value m = k.arg(i32, "m"), n = k.arg(i32, "n");
  Value tiles_n = cdiv(n, kBN);
  k.for_each_tile(cdiv(m, kBM) * tiles_n, [&](Value t) {
    Value row = t / tiles_n * kBM, col = t % tiles_n * kBN;
    Value tile = tma_load(src, {row, col});    // [kBM, kBN] bf16, smem
    tma_store(dst, {col, row}, trans(tile));  // [kBN, kBM] bf16
  });
  return samples::value_or_die(k.build(), "build tile_transpose");
}

}  // namespace

int main(int argc, char** argv) {
  samples::Args args = samples::parse_args(argc, argv);
  if (samples::emit_for_target(args, {tile_copy(), tile_transpose()})) return 0;
  Device device = samples::value_or_die(samples::open_device(args), "device");
  Function copy = samples::value_or_die(device.compile(tile_copy(), samples::compile_options(args)), "compile");
  Function transpose =
      samples::value_or_die(device.compile(tile_transpose(), samples::compile_options(args)), "compile");
  if (!args.emit_dir.empty()) return 0;

  std::mt19937 gen(args.seed);
  const int m = 1000, n = 1496;  // neither a multiple of the box; rows 16-byte aligned as TMA needs
  std::vector<uint16_t> host(size_t{m} * n);
  std::uniform_real_distribution<float> dist(-4, 4);
  for (uint16_t& v : host) v = samples::to_bf16(dist(gen));
  size_t bytes = host.size() * 2;
  Buffer src = samples::value_or_die(device.allocate(bytes), "allocate");
  Buffer dst = samples::value_or_die(device.allocate(bytes), "allocate");
  samples::ok_or_die(device.copy_to_device(src, host.data(), bytes), "copy");
  std::vector<uint16_t> out(host.size(), 0xFFFF);  // poison: a NaN pattern no input has

  TensorMap src_map = samples::value_or_die(device.tensor_map(bf16, src, {m, n}, {kBM, kBN}), "src map");
  TensorMap dst_map = samples::value_or_die(device.tensor_map(bf16, dst, {m, n}, {kBM, kBN}), "dst map");
  samples::ok_or_die(device.copy_to_device(dst, out.data(), bytes), "poison");
  samples::ok_or_die(copy.launch({.grid = device.num_compute_units()}, src_map, dst_map, m, n), "launch copy");
  samples::ok_or_die(device.copy_to_host(out.data(), dst, bytes), "copy back");
  size_t bad = 0;
  for (size_t i = 0; i < host.size(); ++i) bad += out[i] != host[i];
  std::printf("tile_copy %dx%d bf16 on %s: %zu wrong elements\n", m, n, device.name().c_str(), bad);

  TensorMap t_map = samples::value_or_die(device.tensor_map(bf16, dst, {n, m}, {kBN, kBM}), "transposed map");
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
