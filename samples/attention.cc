// Attention forward (flash attention): O = softmax(Q K^T / sqrt(d)) V over
// several heads, bf16 in and out, with and without the causal mask, at a
// length that leaves each head a ragged last block. On NVIDIA GPUs both
// products run on the tensor cores and the online softmax stays in their
// registers (samples/kernels.h attention_kernel); the sample checks sampled
// rows of every head against a double reference.
#include <cmath>
#include <cstdio>
#include <random>

#include "base/float16.h"
#include "common.h"
#include "kernels.h"

using namespace tessel;

int main(int argc, char** argv) {
  samples::Args args = samples::parse_args(argc, argv);
  const bool amd = args.target.rfind("gfx", 0) == 0;  // AMD: blocks that fit in 64 KiB of LDS
  const int64_t heads = 6, len = 1000, d = 64;
  std::vector<samples::AttnConfig> configs;
  for (bool causal : {false, true}) {
    samples::AttnConfig c = samples::attention_config(d, causal);
    if (amd) c = {.d = d, .bm = 32, .bn = 64, .causal = causal, .stages = 1};
    configs.push_back(c);
  }
  std::vector<Kernel> kernels;
  for (const samples::AttnConfig& c : configs) {
    kernels.push_back(
        samples::value_or_die(samples::attention_kernel(c, c.causal ? "attention_causal" : "attention"), "build"));
  }
  CompileOptions options = samples::compile_options(args);
  options.num_warps = samples::attention_warps(configs[0]);
  if (samples::emit_for_target(args, kernels, options)) return 0;
  Device device = samples::value_or_die(samples::open_device(args), "device");

  std::mt19937 gen(args.seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  const int64_t n = heads * len * d;
  std::vector<uint16_t> q(n), k(n), v(n);
  std::vector<double> qd(n), kd(n), vd(n);
  for (auto [bits, values] : {std::pair{&q, &qd}, std::pair{&k, &kd}, std::pair{&v, &vd}}) {
    for (int64_t i = 0; i < n; ++i) (*values)[i] = bf16_to_float((*bits)[i] = float_to_bf16(dist(gen)));
  }
  Buffer bq = samples::value_or_die(device.allocate(n * 2), "allocate");
  Buffer bk = samples::value_or_die(device.allocate(n * 2), "allocate");
  Buffer bv = samples::value_or_die(device.allocate(n * 2), "allocate");
  Buffer bo = samples::value_or_die(device.allocate(n * 2), "allocate");
  samples::ok_or_die(device.copy_to_device(bq, q.data(), n * 2), "copy");
  samples::ok_or_die(device.copy_to_device(bk, k.data(), n * 2), "copy");
  samples::ok_or_die(device.copy_to_device(bv, v.data(), n * 2), "copy");
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::printf("attention on %s: %lld heads of %lld x %lld\n", device.name().c_str(), static_cast<long long>(heads),
              static_cast<long long>(len), static_cast<long long>(d));
  bool ok = true;
  for (size_t i = 0; i < configs.size(); ++i) {
    const samples::AttnConfig& c = configs[i];
    CompileOptions o = options;
    o.num_warps = samples::attention_warps(c);
    Function fn = samples::value_or_die(device.compile(kernels[i], o), "compile");
    if (!args.emit_dir.empty()) continue;
    samples::AttnMaps maps =
        samples::value_or_die(samples::attention_maps(device, c, bq, bk, bv, bo, heads, len), "maps");
    const LaunchConfig launch = samples::value_or_die(samples::attention_launch(fn, c, heads, len), "grid");
    samples::ok_or_die(samples::launch_attention(fn, launch, maps, heads, len, scale), "launch");
    std::vector<uint16_t> out(n);
    samples::ok_or_die(device.copy_to_host(out.data(), bo, n * 2), "copy back");
    std::vector<float> got;
    std::vector<double> want;
    std::vector<double> row(d);
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t at = h * len * d;
      for (int64_t r : {int64_t{0}, int64_t{1}, len / 2, len - 1}) {
        samples::attention_row(&qd[at], &kd[at], &vd[at], len, d, scale, c.causal, r, row.data());
        for (int64_t j = 0; j < d; ++j) {
          got.push_back(bf16_to_float(out[at + r * d + j]));
          want.push_back(row[j]);
        }
      }
    }
    // P is rounded to bf16 before P V, and O once more.
    ok = samples::check_close(c.causal ? "causal attention, sampled rows" : "attention, sampled rows", got, want,
                              8e-3) &&
         ok;
  }
  return ok ? 0 : 1;
}
