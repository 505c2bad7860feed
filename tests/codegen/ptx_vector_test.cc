// 16-byte vector loads and stores on NVPTX: specializations that make
// accesses provably contiguous and aligned give ld/st.global.v4 (v2 for
// f64); any missing fact gives scalar accesses. Everything assembles.
#include "codegen/compiler.h"
#include "dsl/ops.h"
#include "gtest/gtest.h"
#include "samples/kernels.h"
#include "tests/codegen/ptx_test_util.h"

namespace tessel {
namespace {

// Parameters of add_kernel: x, y, z, n.
constexpr uint64_t kX = 1, kY = 2, kZ = 4, kN = 8, kAll = kX | kY | kZ | kN;

// z = x + y over blocks of 1024 elements of `d`, masked by offs < n.
Kernel add_kernel(DType d) {
  KernelBuilder k("add");
  Value x = k.arg(ptr(d), "x"), y = k.arg(ptr(d), "y"), z = k.arg(ptr(d), "z"), n = k.arg(i32, "n");
  Value offs = k.program_id() * 1024 + k.arange(0, 1024);  // [1024] i32
  Value mask = offs < n;                                    // [1024] i1
  store(z + offs, load(x + offs, mask, 0) + load(y + offs, mask, 0), mask);
  absl::StatusOr<Kernel> kernel = k.build();
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return *kernel;
}

std::string ptx(const Kernel& kernel, uint64_t facts) {
  CompileOptions options;
  options.specialization.multiple_of_16 = facts;
  absl::StatusOr<DeviceCode> code = compile_ptx(kernel, options);
  EXPECT_TRUE(code.ok()) << code.status();
  if (!code.ok()) return "";
  EXPECT_TRUE(ptxas_accepts_if_present(code->binary)) << "facts " << facts;
  return code->binary;
}

class PtxVector : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_tool(TESSEL_FILECHECK)) GTEST_SKIP() << "FileCheck not found (it comes with llvm-19-dev)";
  }
};

TEST_F(PtxVector, AlignedF32AddMovesSixteenBytesPerAccess) {
  // 1024 elements over 128 threads: two runs of four per thread, each one
  // predicated vector access (no branch); the mask is one comparison per run.
  std::string code = ptx(add_kernel(f32), kAll);
  EXPECT_EQ(file_check(code, R"(
CHECK-NOT: bra
CHECK: setp.lt.s32 [[P:%p[0-9]+]]
CHECK: @[[P]] ld.global.v4.b32 {{.*}}, [%rd{{[0-9]+}}];
CHECK: @[[P]] ld.global.v4.b32
CHECK: @[[P]] st.global.v4.b32 [%rd{{[0-9]+}}], {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}};
CHECK: st.global.v4.b32
CHECK-NOT: global.b32
CHECK-NOT: global.f32
)"),
            0);
  EXPECT_EQ(count(code, "setp.lt.s32"), 2);
}

TEST_F(PtxVector, SixteenBitTypesMoveEightElementsAndF64Two) {
  for (DType d : {f16, bf16}) {
    EXPECT_EQ(file_check(ptx(add_kernel(d), kAll), R"(
CHECK-COUNT-2: ld.global.v4.b32
CHECK: st.global.v4.b32
CHECK-NOT: ld.global.{{[bu]}}16
CHECK-NOT: st.global.{{[bu]}}16
)"),
              0)
        << d.name();
  }
  EXPECT_EQ(file_check(ptx(add_kernel(f64), kAll), R"(
CHECK: ld.global.v4.b32
CHECK: st.global.v4.b32
CHECK-NOT: global.f64
CHECK-NOT: global.v2.b32
)"),
            0);
}

TEST_F(PtxVector, AnUndivisibleBoundKeepsEveryAccessScalar) {
  // offs < n changes within a run of four: one coalesced element per thread
  // and step, each behind its own predicate.
  EXPECT_EQ(file_check(ptx(add_kernel(f32), kX | kY | kZ), R"(
CHECK-NOT: global.v
CHECK: @%p{{[0-9]+}} ld.global.b32
CHECK: @%p{{[0-9]+}} ld.global.b32
CHECK-NOT: global.v
)"),
            0);
  EXPECT_EQ(file_check(ptx(add_kernel(f32), 0), "CHECK-NOT: global.v\nCHECK: ld.global.b32\nCHECK-NOT: global.v\n"), 0);
}

TEST_F(PtxVector, AnUnalignedPointerKeepsItsOwnAccessesScalar) {
  // x unaligned: its elements load one by one (four consecutive ones per
  // thread, the layout the others' vectors want); y and z stay vectors.
  std::string code = ptx(add_kernel(f32), kAll & ~kX);
  EXPECT_EQ(count(code, "ld.global.b32"), 8);
  EXPECT_EQ(count(code, "ld.global.v4.b32"), 2);
  EXPECT_EQ(count(code, "st.global.v4.b32"), 2);
  code = ptx(add_kernel(f32), kAll & ~kZ);
  EXPECT_EQ(count(code, "ld.global.v4.b32"), 4);
  EXPECT_EQ(count(code, "st.global.b32"), 8);
  EXPECT_EQ(count(code, "st.global.v4"), 0);
}

TEST_F(PtxVector, RowsAtDivisibleStridesFeedReductionsFromVectors) {
  // Softmax: x + row * cols + offs is aligned when x is and cols divides by
  // 16; the max and the sum reduce runs of four per thread. The persistent
  // loop loads each next row an iteration ahead (codegen/prefetch.h): the
  // first row's loads go before the loop.
  absl::StatusOr<Kernel> softmax = samples::softmax_kernel();
  ASSERT_TRUE(softmax.ok()) << softmax.status();
  const uint64_t x = 1, y = 2, cols = 8;
  std::string code = ptx(*softmax, x | y | cols);
  EXPECT_EQ(count(code, "ld.global.v4.b32"), 2 * 2);
  EXPECT_EQ(count(code, "st.global.v4.b32"), 2);
  EXPECT_EQ(count(code, "shfl.sync.bfly.b32"), 2 * 5);
  EXPECT_EQ(file_check(ptx(*softmax, x | y), "CHECK-NOT: global.v4\nCHECK: ld.global.b32\nCHECK-NOT: global.v4\n"), 0);
}

TEST_F(PtxVector, GroupsAddressedThroughADivisionStillMoveVectors) {
  // quantize_groups_kernel: a group's columns are (index % groups) * 128 +
  // j, which has no affine form; its runs (and cols divisible by 16) keep
  // both the accesses and the mask c < cols whole over 16 bytes.
  for (DType d : {bf16, f32}) {
    absl::StatusOr<Kernel> groups = samples::quantize_groups_kernel({8, 128, 4}, d, f8e4m3);
    ASSERT_TRUE(groups.ok()) << groups.status();
    std::string code = ptx(*groups, ~uint64_t{0});
    EXPECT_EQ(count(code, "ld.global.v4.b32"), d == bf16 ? 1 : 2) << d.name();
    EXPECT_EQ(count(code, "ld.global.u16") + count(code, "ld.global.b32"), 0) << d.name();
    EXPECT_EQ(count(code, "st.global.u8"), 0) << d.name();
  }
}

}  // namespace
}  // namespace tessel
