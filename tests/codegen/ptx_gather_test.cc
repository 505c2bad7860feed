// gather on NVPTX: with the index and the result in registers, the source is
// written to shared memory once, the program meets once, and each thread
// reads only the elements its slots pick. Assembles.
#include <string>

#include "codegen/compiler.h"
#include "dsl/ops.h"
#include "gtest/gtest.h"
#include "tests/codegen/ptx_test_util.h"

namespace tessel {
namespace {

TEST(PtxGather, TheSourceGoesThroughSharedMemoryOnce) {
  // x [16, 256] f32 over 128 threads (32 slots each), gathered along its
  // rows by idx [16, 8] (one slot each).
  KernelBuilder k("gather_rows");
  Value x = k.arg(ptr(f32), "x"), idx = k.arg(ptr(i32), "idx"), out = k.arg(ptr(f32), "out");
  Value rows = expand_dims(k.arange(0, 16), 1);
  Value src = load(x + rows * 256 + expand_dims(k.arange(0, 256), 0));
  Value offs = rows * 8 + expand_dims(k.arange(0, 8), 0);
  store(out + offs, gather(src, load(idx + offs), 1));
  const std::string ptx = ptx_of(k.build(), 4);
  EXPECT_EQ(count(ptx, "st.shared.f32"), 32);
  EXPECT_EQ(count(ptx, "bar.sync"), 1);
  EXPECT_EQ(count(ptx, "ld.shared.f32"), 1);
  EXPECT_EQ(count(ptx, "st.shared.u32") + count(ptx, "st.shared.b32"), 0);  // the index stays in registers
  expect_ptxas_accepts(ptx);
}

}  // namespace
}  // namespace tessel
