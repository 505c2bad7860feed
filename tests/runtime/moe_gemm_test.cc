// The experts' GEMM (samples/moe.h moe_gemm_kernel) on the host target
// against a double reference with fp8 operands and their per-tensor
// scales (A's, and one for each expert's weights): e4m3 with routed
// weights on the tensor-core tiles and e5m2 on small ones, K not a
// multiple of the tile; and bf16 operands scaled.
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "samples/moe.h"
#include "tessel/tessel.h"
#include "tests/matmul_cases.h"
#include "tests/seeded.h"

namespace tessel {
namespace {

TEST(MoeGemm, ScaledOperandsMatchADoubleReference) {
  TESSEL_SEEDED_GEN(gen);
  absl::StatusOr<Device> dev = Device::open("host:2");
  ASSERT_TRUE(dev.ok()) << dev.status();
  struct Case {
    matmul_cases::MoeProblem p;
    samples::MoeGemmConfig g;
  };
  for (const Case& c :
       {Case{{30, 2, 4, 80, 200},
             {.bm = 64, .bn = 128, .bk = 128, .in = f8e4m3, .routed_weights = true, .scaled = true}},
        Case{{25, 3, 5, 40, 72}, {.bm = 16, .bn = 32, .bk = 32, .in = f8e5m2, .out = f32, .scaled = true}},
        Case{{25, 1, 3, 24, 40}, {.bm = 16, .bn = 32, .bk = 16, .scaled = true}}}) {
    const matmul_cases::MoeProblem& p = c.p;
    SCOPED_TRACE(::testing::Message() << p.tokens << " tokens x " << p.top_k << " of " << p.experts << " experts, N "
                                      << p.n_cols << ", K " << p.k << ", " << c.g.in.name());
    const int n = p.tokens * p.top_k;
    std::uniform_int_distribution<int> expert(0, p.experts), sixteenths(1, 64);
    matmul_cases::MoeGemmInputs in = {.ids = std::vector<int32_t>(n),
                                      .a = matmul_cases::random_operand(c.g.in, p.tokens * p.k, gen),
                                      .w = matmul_cases::random_operand(c.g.in, p.experts * p.n_cols * p.k, gen),
                                      .weights = std::vector<float>(c.g.routed_weights ? n : 0),
                                      .scale_a = sixteenths(gen) / 16.0f,
                                      .scale_w = std::vector<float>(p.experts)};
    for (int32_t& v : in.ids) v = expert(gen);  // (some of them `experts`: dropped)
    for (float& x : in.weights) x = sixteenths(gen) / 16.0f;
    for (float& x : in.scale_w) x = sixteenths(gen) / 16.0f;
    absl::StatusOr<std::vector<float>> got = matmul_cases::run_moe_gemm(*dev, c.g, 4, p, in);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(matmul_cases::moe_gemm_mismatch(c.g, p, in, *got), "");
  }
}

}  // namespace
}  // namespace tessel
