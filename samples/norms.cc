// Row softmax, layer norm and RMS norm (samples/kernels.h) of [rows, cols]
// matrices in f32 and bf16, with rows of 1 000 and 16 384 elements, each
// checked against a double reference.
#include <cstdio>
#include <random>
#include <vector>

#include "base/float16.h"
#include "common.h"
#include "kernels.h"

using namespace tessel;
using samples::RowOp;

namespace {

// `n` values of `d` on the device and, as the kernel reads them, in floats.
struct Input {
  std::vector<float> values;
  Buffer buffer;
};
Input upload(const Device& device, DType d, size_t n, float mean, float stddev, std::mt19937& gen) {
  std::normal_distribution<float> normal(mean, stddev);
  Input in{std::vector<float>(n), samples::value_or_die(device.allocate(n * d.bytes()), "allocate")};
  std::vector<uint16_t> bits;
  for (float& v : in.values) {
    v = normal(gen);
    if (d == bf16) bits.push_back(float_to_bf16(v)), v = bf16_to_float(bits.back());
  }
  const void* data = d == f32 ? static_cast<const void*>(in.values.data()) : bits.data();
  samples::ok_or_die(device.copy_to_device(in.buffer, data, n * d.bytes()), "copy");
  return in;
}

}  // namespace

int main(int argc, char** argv) {
  samples::Args args = samples::parse_args(argc, argv);
  const RowOp ops[] = {RowOp::kSoftmax, RowOp::kLayerNorm, RowOp::kRmsNorm};
  std::vector<Kernel> kernels;
  for (RowOp op : ops)
    kernels.push_back(samples::value_or_die(samples::row_kernel(op, samples::row_block(1000), bf16), "build"));
  if (samples::emit_for_target(args, kernels)) return 0;

  Device device = samples::value_or_die(samples::open_device(args), "device");
  std::printf("norms on %s\n", device.name().c_str());
  std::mt19937 gen(args.seed);
  bool ok = true;
  for (auto [rows, cols] : {std::pair{333, 1000}, std::pair{20, 16384}}) {
    const samples::RowBlock block = samples::row_block(cols);
    CompileOptions options = samples::compile_options(args);
    options.num_warps = block.warps;
    for (DType d : {f32, bf16}) {
      const size_t n = size_t{1} * rows * cols;
      Input x = upload(device, d, n, 0, 2, gen), w = upload(device, d, cols, 1, 0.1f, gen);
      Input b = upload(device, d, cols, 0, 0.1f, gen);
      Buffer y = samples::value_or_die(device.allocate(n * d.bytes()), "allocate");
      for (RowOp op : ops) {
        Function fn = samples::value_or_die(
            device.compile(samples::value_or_die(samples::row_kernel(op, block, d), "build"), options), "compile");
        if (!args.emit_dir.empty()) continue;
        const LaunchConfig lc = {.grid = (rows + block.rows - 1) / block.rows, .num_warps = block.warps};
        samples::ok_or_die(samples::launch_row_kernel(fn, lc, op, x.buffer, y, w.buffer, b.buffer, rows, cols),
                           "launch");
        std::vector<float> got(n);
        if (d == f32) {
          samples::ok_or_die(device.copy_to_host(got.data(), y, n * 4), "copy back");
        } else {
          std::vector<uint16_t> bits(n);
          samples::ok_or_die(device.copy_to_host(bits.data(), y, n * 2), "copy back");
          for (size_t i = 0; i < n; ++i) got[i] = bf16_to_float(bits[i]);
        }
        std::vector<double> want;
        for (int r = 0; r < rows; ++r) {
          std::vector<double> row = samples::row_reference(op, x.values.data() + size_t{1} * r * cols, w.values.data(),
                                                           b.values.data(), cols);
          want.insert(want.end(), row.begin(), row.end());
        }
        char what[96];
        std::snprintf(what, sizeof what, "%s %dx%d %s", samples::row_op_name(op), rows, cols,
                      std::string(d.name()).c_str());
        ok = samples::check_close(what, got, want, d == f32 ? 1e-4 : 1.0 / 128) && ok;
      }
    }
  }
  return ok ? 0 : 1;
}
