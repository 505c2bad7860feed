// z = x + y over n floats (samples/kernels.h has the kernel).
#include <cstdio>

#include "common.h"
#include "kernels.h"

using namespace tessel;

int main(int argc, char** argv) {
  samples::Args args = samples::parse_args(argc, argv);
  Kernel kernel = samples::value_or_die(samples::vector_add_kernel(), "build");
  if (samples::emit_for_target(args, {kernel})) return 0;

  Device device = samples::value_or_die(samples::open_device(args), "device");
  Function fn = samples::value_or_die(device.compile(kernel, samples::compile_options(args)), "compile");
  if (!args.emit_dir.empty()) return 0;

  std::mt19937 gen(args.seed);
  const int count = 1'000'003;
  std::vector<float> hx(count), hy(count), hz(count, -1.0f);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int i = 0; i < count; ++i) hx[i] = dist(gen), hy[i] = dist(gen);
  size_t bytes = count * sizeof(float);
  Buffer bx = samples::value_or_die(device.allocate(bytes), "allocate");
  Buffer by = samples::value_or_die(device.allocate(bytes), "allocate");
  Buffer bz = samples::value_or_die(device.allocate(bytes), "allocate");
  samples::ok_or_die(device.copy_to_device(bx, hx.data(), bytes), "copy");
  samples::ok_or_die(device.copy_to_device(by, hy.data(), bytes), "copy");
  samples::ok_or_die(device.copy_to_device(bz, hz.data(), bytes), "copy");
  samples::ok_or_die(fn.launch({.grid = (count + samples::kAddBlock - 1) / samples::kAddBlock}, bx, by, bz, count), "launch");
  samples::ok_or_die(device.copy_to_host(hz.data(), bz, bytes), "copy back");

  std::vector<double> want(count);
  for (int i = 0; i < count; ++i) want[i] = double{hx[i]} + double{hy[i]};
  std::printf("vector_add on %s\n", device.name().c_str());
  return samples::check_close("z = x + y", hz, want, 1e-7) ? 0 : 1;
}
