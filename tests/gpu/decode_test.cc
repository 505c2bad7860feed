// Paged decoding attention (samples/decode.h) on the GPU: keys and values
// through copy rings whose rows come from the block table, both products
// on mma.sync, the splits combined by the last to finish; against a double
// reference and the host, in the GPU's own code and in Ampere's (sm_80).
// Skips without a GPU.
#include "samples/decode.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/decode_cases.h"
#include "tests/gpu/gpu_test_util.h"

namespace tessel::gpu_test {
namespace {

TEST(DecodeGpu, AgreesWithADoubleReferenceAndTheHost) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  absl::StatusOr<Device> host = Device::open("host");
  ASSERT_TRUE(host.ok()) << host.status();
  std::mt19937 gen(21);
  struct Case {
    samples::DecodeConfig c;
    decode_cases::Problem p;
    int splits;
  };
  for (const Case& t : {
           // Llama 3 8B's heads at a batch of sequences of mixed lengths.
           Case{{}, {.lens = {3000, 1, 0, 4097, 700, 64, 1500, 2222}, .kv_heads = 8, .max_pages = 260}, 0},
           Case{{}, {.lens = {3000, 1, 0, 4097}, .kv_heads = 8, .max_pages = 260}, 7},
           Case{{.d = 64, .group = 8, .page = 64, .bn = 32, .in = f16, .out = f32},
                {.lens = {1000, 5000}, .kv_heads = 4, .max_pages = 80},
                0},
           Case{{.d = 128, .group = 1, .page = 1, .bn = 64}, {.lens = {513, 77}, .kv_heads = 16, .max_pages = 600}, 3},
           Case{{.d = 128, .group = 20, .page = 16, .bn = 64}, {.lens = {999}, .kv_heads = 2, .max_pages = 63}, 5},
       }) {
    SCOPED_TRACE(::testing::Message() << "d " << t.c.d << ", group " << t.c.group << ", pages of " << t.c.page << ", "
                                      << t.p.lens.size() << " sequences, " << t.splits << " splits");
    const decode_cases::Inputs in = decode_cases::random_inputs(t.c, t.p, gen);
    const float scale = 1.0f / std::sqrt(static_cast<float>(t.c.d));
    const std::vector<double> want = decode_cases::reference(t.c, t.p, in, scale);
    absl::StatusOr<std::vector<float>> on_gpu = decode_cases::run(device, t.c, t.p, in, scale, t.splits, 2);
    ASSERT_TRUE(on_gpu.ok()) << on_gpu.status();
    const double tol = t.c.out == bf16 ? 8e-3 : 2e-3;
    EXPECT_TRUE(all_close(*on_gpu, want, tol));
    absl::StatusOr<std::vector<float>> on_host = decode_cases::run(*host, t.c, t.p, in, scale, t.splits);
    ASSERT_TRUE(on_host.ok()) << on_host.status();
    EXPECT_TRUE(all_close(*on_gpu, *on_host, tol));
    // Ampere's code (the same mma.sync, cp.async rings without Hopper's TMA).
    absl::StatusOr<std::vector<float>> ampere = decode_cases::run(device, t.c, t.p, in, scale, t.splits, 1, "sm_80");
    ASSERT_TRUE(ampere.ok()) << ampere.status();
    EXPECT_TRUE(all_close(*ampere, want, tol));
  }
}

}  // namespace
}  // namespace tessel::gpu_test
