// dot on Hopper's tensor cores where its operands come through pointers
// (samples::pointer_gemm_kernel, samples::moe_gemm_kernel): the copy rings
// they take, C's 16-byte stores, and the wgmma descriptors' arithmetic.
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ptx_test_util.h"
#include "samples/kernels.h"
#include "samples/moe.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The GEMM through pointers (samples::pointer_gemm_kernel): with row
// strides known to be multiples of 16 elements, both operands are copied
// 16 bytes at a time into rings of swizzled tiles the products read by
// descriptor, stages - 1 iterations ahead, with a product left in flight;
// nothing is staged through registers. So too where the loop steps its
// pointers (Triton's tutorial literally).
TEST(Wgmma, PointerOperandsAreCopiedIntoRings) {
  auto compiled = [](int64_t bn, int warps, int stages, bool aligned, bool stepped = false) {
    CompileOptions o;
    o.num_warps = warps;
    if (aligned) o.specialization.multiple_of_16 = 0x3f;  // every pointer aligned, m, n and k multiples of 16
    return compile_ptx(
        *samples::pointer_gemm_kernel({.bm = 128, .bn = bn, .bk = 64, .stages = stages, .stepped = stepped}), o);
  };
  for (const auto& [bn, warps, stepped] :
       std::vector<std::tuple<int64_t, int, bool>>{{128, 8, false}, {256, 8, false}, {128, 4, false}, {256, 8, true}}) {
    SCOPED_TRACE(absl::StrCat(bn, " columns, ", warps, " warps", stepped ? ", pointers stepped" : ""));
    absl::StatusOr<DeviceCode> code = compiled(bn, warps, 0, true, stepped);
    ASSERT_TRUE(code.ok()) << code.status();
    const std::string& ptx = code->binary;
    EXPECT_THAT(ptx, HasSubstr("cp.async.cg.shared.global"));
    EXPECT_THAT(ptx, HasSubstr("cp.async.wait_group 1;"));
    EXPECT_THAT(ptx, HasSubstr("fence.proxy.async.shared::cta"));
    EXPECT_THAT(ptx, HasSubstr("wgmma.wait_group.sync.aligned 1"));
    // The only matrix stores are C's, staged for 16-byte stores (below).
    EXPECT_EQ(count(ptx, "stmatrix"), 128 * bn / (warps * 32 * 8));
    // Three stages of a 128 x 64 A tile and a bn x 64 B tile.
    EXPECT_EQ(code->shared_bytes, 3 * (128 + bn) * 64 * 2);
    expect_ptxas_clean(ptx);
  }
  absl::StatusOr<DeviceCode> four = compiled(128, 8, 4, true);
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_THAT(four->binary, HasSubstr("cp.async.wait_group 2;"));
  EXPECT_EQ(four->shared_bytes, 4 * 2 * 128 * 64 * 2);
  // Two stages: the next iteration's copies fly while this one multiplies.
  absl::StatusOr<DeviceCode> two = compiled(128, 8, 2, true);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_THAT(two->binary, HasSubstr("cp.async.wait_group 0;"));
  expect_ptxas_clean(two->binary);
  // Stages of 192 KiB (K tiles of 256): two do not fit, so the default
  // falls to one, copied at the top of each iteration and waited for there.
  CompileOptions aligned;
  aligned.num_warps = 8;
  aligned.specialization.multiple_of_16 = 0x3f;
  absl::StatusOr<DeviceCode> one =
      compile_ptx(*samples::pointer_gemm_kernel({.bm = 128, .bn = 256, .bk = 256}), aligned);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->shared_bytes, (128 + 256) * 256 * 2);
  EXPECT_THAT(one->binary, HasSubstr("cp.async.wait_group 0;"));
  EXPECT_THAT(one->binary, Not(HasSubstr("wgmma.wait_group.sync.aligned 1")));
  EXPECT_TRUE(ptxas_accepts_if_present(one->binary));
  // Rows of unknown alignment move an element at a time, narrower than a
  // copy: they keep to registers, and B is staged. So with rings off.
  for (const auto& [stages, aligned] : std::vector<std::pair<int, bool>>{{0, false}, {1, true}}) {
    absl::StatusOr<DeviceCode> plain = compiled(128, 8, stages, aligned);
    ASSERT_TRUE(plain.ok()) << plain.status();
    EXPECT_THAT(plain->binary, Not(HasSubstr("cp.async.cg")));
    EXPECT_THAT(plain->binary, Not(HasSubstr("cp.async.wait_group")));
  }
}

// A product stored through pointers whose rows allow 16-byte accesses
// leaves in them: written with stmatrix into a swizzled tile (in the
// rings' memory, free after the loop), read back 16 bytes a thread. Not
// where the pointers allow less, nor f32 products (no 16-bit matrix
// stores); and where the tile would not fit beside what is live (a store
// in the loop, beside its rings), the product leaves from its registers.
TEST(Wgmma, ProductsStoredThroughPointersLeaveIn16ByteStores) {
  auto compiled = [](const samples::PointerGemmConfig& g, bool aligned) {
    CompileOptions o;
    o.num_warps = 8;
    if (aligned) o.specialization.multiple_of_16 = 0x3f;
    return compile_ptx(*samples::pointer_gemm_kernel(g), o);
  };
  absl::StatusOr<DeviceCode> staged = compiled({.bm = 128, .bn = 256}, true);
  ASSERT_TRUE(staged.ok()) << staged.status();
  EXPECT_EQ(count(staged->binary, "stmatrix.sync.aligned.m8n8.x4"), 16);
  EXPECT_EQ(count(staged->binary, "ld.shared.v4"), 16);
  EXPECT_EQ(count(staged->binary, "st.global.v4.b32"), 16);
  EXPECT_THAT(staged->binary, Not(HasSubstr("st.global.b32")));
  EXPECT_EQ(staged->shared_bytes, 3 * (128 + 256) * 64 * 2);
  expect_ptxas_clean(staged->binary);
  for (const auto& [g, aligned] : std::vector<std::pair<samples::PointerGemmConfig, bool>>{
           {{.bm = 128, .bn = 256, .out = f32}, true}, {{.bm = 128, .bn = 256}, false}}) {
    SCOPED_TRACE(aligned ? "f32 out" : "rows of unknown alignment");
    absl::StatusOr<DeviceCode> code = compiled(g, aligned);
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_THAT(code->binary, Not(HasSubstr("stmatrix")));
    EXPECT_THAT(code->binary, Not(HasSubstr("st.global.v4")));
  }
  // Each iteration stores its partial product, beside the rings.
  KernelBuilder k("partial_products");
  Value a = k.arg(ptr(bf16), "a"), b = k.arg(ptr(bf16), "b"), c = k.arg(ptr(bf16), "c"), kdim = k.arg(i32, "k");
  Value rows = expand_dims(k.arange(0, 128), 1), cols = expand_dims(k.arange(0, 128), 0);
  Value ks = expand_dims(k.arange(0, 64), 0);
  Var acc = k.var(k.zeros({128, 128}, f32));
  k.for_range(0, kdim, 64, [&](Value kk) {
    acc = dot(load(a + rows * kdim + kk + ks), trans(load(b + rows * kdim + kk + ks)), acc);
    store(c + kk * 256 + rows * 128 + cols, cast(acc, bf16));
  });
  absl::StatusOr<Kernel> partial = k.build();
  ASSERT_TRUE(partial.ok()) << partial.status();
  for (int programs : {1, 2}) {
    SCOPED_TRACE(absl::StrCat(programs, " programs a unit"));
    CompileOptions o;
    o.num_warps = 8;
    o.specialization.multiple_of_16 = 0xf;
    o.min_programs = programs;
    absl::StatusOr<DeviceCode> code = compile_ptx(*partial, o);
    ASSERT_TRUE(code.ok()) << code.status();
    const int64_t rings = 3 * (128 + 128) * 64 * 2;
    EXPECT_EQ(code->shared_bytes, programs == 1 ? rings + 128 * 128 * 2 : rings);
    EXPECT_EQ(count(code->binary, "st.global.v4.b32") > 0, programs == 1);
    EXPECT_TRUE(ptxas_accepts_if_present(code->binary));
  }
}

// The MoE GEMM (samples::moe_gemm_kernel): A's rows gathered through
// pointers made before the loop and broadcast along K. Their pointers and
// mask are converted into the copies' layout once, before the loop: the
// loop reads nothing from shared memory but its rings (by descriptor), and
// C leaves in 16-byte stores.
TEST(Wgmma, GatheredRowsAreHeldInTheCopiesLayoutAcrossTheLoop) {
  CompileOptions o;
  o.num_warps = 8;
  o.specialization.multiple_of_16 = 0xe3f;  // pointers, N and K
  absl::StatusOr<DeviceCode> code = compile_ptx(*samples::moe_gemm_kernel({.bn = 256, .stages = 4}), o);
  ASSERT_TRUE(code.ok()) << code.status();
  const std::string& ptx = code->binary;
  const size_t top = ptx.find("cp.async.wait_group 2;"), end = ptx.find("wgmma.wait_group.sync.aligned 0;", top);
  ASSERT_NE(top, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  const std::string loop = ptx.substr(top, end - top);
  EXPECT_THAT(loop, HasSubstr("cp.async.cg.shared.global"));
  EXPECT_THAT(loop, Not(HasSubstr("ld.shared")));
  EXPECT_EQ(count(ptx, "st.global.v4.b32"), 8);
  expect_ptxas_clean(ptx);
}

// The MoE GEMM on fp8 operands (e4m3, rows of 128 bytes) with their
// scales and routed weights: the same rings, products of k 32 in e4m3.
TEST(Wgmma, Fp8GatheredRowsTakeRingsAndE4m3Products) {
  CompileOptions o;
  o.num_warps = 8;
  o.specialization.multiple_of_16 = 0x31ff;  // pointers, N and K
  const samples::MoeGemmConfig g = {
      .bn = 256, .bk = 128, .in = f8e4m3, .routed_weights = true, .scaled = true, .stages = 4};
  absl::StatusOr<DeviceCode> code = compile_ptx(*samples::moe_gemm_kernel(g), o);
  ASSERT_TRUE(code.ok()) << code.status();
  const std::string& ptx = code->binary;
  EXPECT_EQ(count(ptx, "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"), 4);
  const size_t top = ptx.find("cp.async.wait_group 2;"), end = ptx.find("wgmma.wait_group.sync.aligned 0;", top);
  ASSERT_NE(end, std::string::npos);
  EXPECT_THAT(ptx.substr(top, end - top), Not(HasSubstr("ld.shared")));
  expect_ptxas_clean(ptx);
}

// Where K is not a multiple of 16, fp8 rows are not aligned for cp.async:
// W's tile, larger than registers hold, is still copied into its ring,
// element by element, each thread's run of 16 elements leaving in 4-byte
// stores (before, its pointers went through shared memory: 745 KB, more
// than a program may have). A's, smaller, keeps to registers.
TEST(Wgmma, UnalignedFp8RowsAreCopiedIntoRingsElementByElement) {
  CompileOptions o;
  o.num_warps = 8;
  o.specialization.multiple_of_16 = 0x8ff;  // pointers and N
  const samples::MoeGemmConfig g = {.bn = 256, .bk = 128, .in = f8e4m3, .scaled = true, .stages = 4};
  absl::StatusOr<DeviceCode> code = compile_ptx(*samples::moe_gemm_kernel(g), o);
  ASSERT_TRUE(code.ok()) << code.status();
  const std::string& ptx = code->binary;
  EXPECT_LE(code->shared_bytes, 227 * 1024);
  EXPECT_EQ(count(ptx, "cp.async.cg"), 0);
  // Four stages' copies of 256 rows of 128 bytes over 256 threads.
  EXPECT_EQ(count(ptx, "st.shared.u32"), 4 * 256 * 128 / 256 / 4);
  EXPECT_TRUE(ptxas_accepts_if_present(ptx));
}

// A warpgroup's descriptors start from its index as lane 0 of each warp
// holds it (one shfl.sync.idx of tid / 128), which ptxas takes to be the
// same across the warp: descriptors built from it stay in uniform
// registers. One warpgroup has none to take.
TEST(Wgmma, DescriptorsStartFromTheWarpgroupAsItsWarpHoldsIt) {
  auto pointer_gemm = [](int64_t bn, int warps) {
    CompileOptions o;
    o.num_warps = warps;
    o.specialization.multiple_of_16 = 0x3f;
    return compile_ptx(*samples::pointer_gemm_kernel({.bm = 128, .bn = bn, .bk = 64}), o);
  };
  for (const auto& [bn, warps] : std::vector<std::pair<int64_t, int>>{{256, 8}, {128, 4}}) {
    SCOPED_TRACE(absl::StrCat(bn, " columns, ", warps, " warps"));
    absl::StatusOr<DeviceCode> code = pointer_gemm(bn, warps);
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(count(code->binary, "shfl.sync.idx.b32"), warps == 8 ? 1 : 0);
    expect_ptxas_clean(code->binary);
  }
  // The MoE GEMM's 64 rows on two warpgroups: each its own columns of b.
  CompileOptions o;
  o.num_warps = 8;
  o.specialization.multiple_of_16 = 0xe3f;
  absl::StatusOr<DeviceCode> code = compile_ptx(*samples::moe_gemm_kernel({.bn = 256, .stages = 4}), o);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(count(code->binary, "shfl.sync.idx.b32"), 1);
  expect_ptxas_clean(code->binary);
}

// Each operand's descriptor is made once a product (its start address,
// shifted and masked, with the leading byte offset): each k step adds its
// offset to that word, instead of shifting and masking again.
TEST(Wgmma, DescriptorsOfAProductShareTheOperandsStart) {
  CompileOptions o;
  o.num_warps = 8;
  o.specialization.multiple_of_16 = 0x3f;
  absl::StatusOr<DeviceCode> code = compile_ptx(*samples::pointer_gemm_kernel({.bm = 128, .bn = 256, .bk = 64}), o);
  ASSERT_TRUE(code.ok()) << code.status();
  const std::string& ptx = code->binary;
  const size_t fence = ptx.find("wgmma.fence.sync.aligned;"), commit = ptx.find("wgmma.commit_group", fence);
  ASSERT_NE(commit, std::string::npos);
  const std::string product = ptx.substr(fence, commit - fence);
  EXPECT_EQ(count(product, "wgmma.mma_async"), 4);
  EXPECT_EQ(count(product, "bfe.u32"), 2);
}

}  // namespace
}  // namespace tessel
