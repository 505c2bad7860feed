// sort and argsort along one axis of 2-D tiles on the device under test (cuda:0, or the
// device TESSEL_GPU_TEST_DEVICE names, e.g. host:1) against host:2 with the
// same random inputs (f32, i32, and bf16 as any bits): random block shapes
// (sides often not powers of two, sorted over a buffer; powers of two sort in
// registers on a GPU), random matrix sizes (masks cut blocks), 1, 4, 8 and 12
// warps, both ways. The order is total, so whatever network a target runs,
// they agree bit for bit, NaNs and zeros of both signs included.
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "dsl/ops.h"
#include "gtest/gtest.h"
#include "runtime/device.h"
#include "tests/gpu/gpu_test_util.h"

namespace tessel::gpu_test {
namespace {

// Program (i, j) sorts block [br, bc] at (i * br, j * bc) of x [rows, cols]
// along `axis` into out, and its argsort into pos (elements past the matrix
// read 0).
Kernel block_sort_kernel(DType d, int br, int bc, int axis, bool descending) {
  KernelBuilder k("block_sort");
  Value x = k.arg(ptr(d), "x"), out = k.arg(ptr(d), "out"), pos = k.arg(ptr(i32), "pos");
  Value rows = k.arg(i32, "rows"), cols = k.arg(i32, "cols");
  Value r = k.program_id(0) * br + k.arange(0, br);
  Value cs = k.program_id(1) * bc + k.arange(0, bc);
  Value offs = expand_dims(r, 1) * cols + expand_dims(cs, 0);
  Value mask = expand_dims(r < rows, 1) & expand_dims(cs < cols, 0);
  Value block = load(x + offs, mask, 0);
  store(out + offs, sort(block, axis, descending), mask);
  store(pos + offs, argsort(block, axis, descending), mask);
  absl::StatusOr<Kernel> kernel = k.build();
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return *kernel;
}

class Sort : public AgreeTest {
 protected:
  template <class T>
  void agree_on_random_shapes(DType d) {
    Rng rng;
    TESSEL_TRACE_SEED(rng);
    for (int trial = 0; trial < 24; ++trial) {
      const auto [br, bc, axis, num_warps, rows, cols] = random_block_case(rng);
      const bool descending = rng.uniform_int(0, 1) == 1;
      SCOPED_TRACE(::testing::Message() << d.name() << " block " << br << "x" << bc << " axis " << axis
                                        << (descending ? " descending" : "") << " warps " << num_warps << " matrix "
                                        << rows << "x" << cols);
      std::vector<T> x(size_t{1} * rows * cols);
      for (T& v : x) {
        const int pick = rng.uniform_int(0, 19);
        if constexpr (std::is_floating_point_v<T>) {
          v = pick == 0 ? NAN : pick == 1 ? -0.0f : pick == 2 ? 0.0f : pick == 3 ? INFINITY : rng.uniform(-1, 1);
        } else if constexpr (std::is_same_v<T, uint16_t>) {  // bf16 bits: zeros, NaNs of both signs, any
          v = pick < 4 ? std::vector<uint16_t>{0x0000, 0x8000, 0x7fc0, 0xffc1}[pick]
                       : static_cast<uint16_t>(rng.uniform_int(0, 0xffff));
        } else {
          v = static_cast<T>(pick < 4 ? pick : rng.uniform_int(-1000, 1000));
        }
      }
      const Kernel kernel = block_sort_kernel(d, br, bc, axis, descending);
      std::vector<std::vector<T>> outs;
      std::vector<std::vector<int32_t>> places;
      for (const Device& dev : devices_) {
        CompileOptions options;
        options.num_warps = num_warps;
        absl::StatusOr<Function> fn = dev.compile(kernel, options);
        ASSERT_TRUE(fn.ok()) << fn.status();
        absl::StatusOr<Buffer> bx = upload(dev, x), bout = dev.allocate(x.size() * sizeof(T)),
                               bpos = dev.allocate(x.size() * sizeof(int32_t));
        ASSERT_TRUE(bx.ok() && bout.ok() && bpos.ok());
        ASSERT_TRUE(poison<T>(dev, *bout, x.size(), T(-7)).ok());
        ASSERT_TRUE(poison<int32_t>(dev, *bpos, x.size(), -7).ok());
        const Grid grid((rows + br - 1) / br, (cols + bc - 1) / bc);
        absl::Status s = fn->launch({.grid = grid, .num_warps = num_warps}, *bx, *bout, *bpos, rows, cols);
        ASSERT_TRUE(s.ok()) << s;
        ASSERT_TRUE(dev.synchronize().ok());
        absl::StatusOr<std::vector<T>> got = download<T>(dev, *bout, x.size());
        absl::StatusOr<std::vector<int32_t>> got_pos = download<int32_t>(dev, *bpos, x.size());
        ASSERT_TRUE(got.ok() && got_pos.ok());
        outs.push_back(*std::move(got));
        places.push_back(*std::move(got_pos));
      }
      EXPECT_TRUE(bit_equal(outs[0], outs[1]));
      EXPECT_EQ(places[0], places[1]);
    }
  }
};

TEST_F(Sort, F32AlongEachAxisAgreesWithTheHost) { agree_on_random_shapes<float>(f32); }

TEST_F(Sort, I32AlongEachAxisAgreesWithTheHost) { agree_on_random_shapes<int32_t>(i32); }

TEST_F(Sort, BF16BitsAlongEachAxisAgreeWithTheHost) { agree_on_random_shapes<uint16_t>(bf16); }

}  // namespace
}  // namespace tessel::gpu_test
