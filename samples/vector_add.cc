// z = x + y over n floats, one block of 1024 per program.
#include <cstdio>

#include "common.h"

using namespace tessel;

int main(int argc, char** argv) {
  samples::Args args = samples::parse_args(argc, argv);
  constexpr int kBlock = 1024;
  KernelBuilder k("vector_add");
  Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(f32), "y"), z = k.arg(ptr(f32), "z");
  Value n = k.arg(i32, "n");
  Value offs = k.program_id() * kBlock + k.arange(0, kBlock);  // [kBlock] i32
  Value mask = offs < n;                                      // [kBlock] i1
  store(z + offs, load(x + offs, mask, 0.0) + load(y + offs, mask, 0.0), mask);
  Kernel kernel = samples::value_or_die(k.build(), "build");
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
  samples::ok_or_die(fn.launch({.grid = (count + kBlock - 1) / kBlock}, bx, by, bz, count), "launch");
  samples::ok_or_die(device.copy_to_host(hz.data(), bz, bytes), "copy back");

  std::vector<double> want(count);
  for (int i = 0; i < count; ++i) want[i] = double{hx[i]} + double{hy[i]};
  std::printf("vector_add on %s\n", device.name().c_str());
  return samples::check_close("z = x + y", hz, want, 1e-7) ? 0 : 1;
}
