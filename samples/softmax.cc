// Row softmax of an [rows, cols] f32 matrix, one row per program, with the
// row's maximum subtracted for stability (a reduction, then a second one).
#include <cmath>
#include <cstdio>

#include "common.h"
#include "kernels.h"

using namespace tessel;

int main(int argc, char** argv) {
  samples::Args args = samples::parse_args(argc, argv);
  Kernel kernel = samples::value_or_die(samples::softmax_kernel(), "build");
  if (samples::emit_for_target(args, {kernel})) return 0;

  Device device = samples::value_or_die(samples::open_device(args), "device");
  Function fn = samples::value_or_die(device.compile(kernel, samples::compile_options(args)), "compile");
  if (!args.emit_dir.empty()) return 0;

  std::mt19937 gen(args.seed);
  const int r = 777, c = 1000;
  std::vector<float> hx(r * c), hy(r * c, NAN);
  std::normal_distribution<float> dist(0, 3);
  for (float& v : hx) v = dist(gen);
  size_t bytes = hx.size() * sizeof(float);
  Buffer bx = samples::value_or_die(device.allocate(bytes), "allocate");
  Buffer by = samples::value_or_die(device.allocate(bytes), "allocate");
  samples::ok_or_die(device.copy_to_device(bx, hx.data(), bytes), "copy");
  samples::ok_or_die(device.copy_to_device(by, hy.data(), bytes), "copy");
  samples::ok_or_die(fn.launch({.grid = device.num_compute_units()}, bx, by, r, c), "launch");
  samples::ok_or_die(device.copy_to_host(hy.data(), by, bytes), "copy back");

  std::vector<double> want(r * c);
  for (int i = 0; i < r; ++i) {
    double m = -INFINITY, s = 0;
    for (int j = 0; j < c; ++j) m = std::max(m, double{hx[i * c + j]});
    for (int j = 0; j < c; ++j) s += std::exp(hx[i * c + j] - m);
    for (int j = 0; j < c; ++j) want[i * c + j] = std::exp(hx[i * c + j] - m) / s;
  }
  std::printf("softmax on %s\n", device.name().c_str());
  return samples::check_close("softmax rows", hy, want, 1e-5) ? 0 : 1;
}
