// The memory-bound sample kernels (samples/kernels.h) on the device under
// test and on host:2, each against the other and against a double
// reference: row softmax, layer norm, RMS norm, prefix sums and sorts in
// f32 and bf16 with rows of 768 to 16 384 elements, sums and maxima of a
// matrix along either axis, a mixture-of-experts router's top k, rotary
// embeddings, and per-token quantization to i8 and fp8.
#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "base/float16.h"
#include "base/status.h"
#include "gtest/gtest.h"
#include "samples/kernels.h"
#include "tests/gpu/gpu_test_util.h"

namespace tessel::gpu_test {
namespace {

using samples::RowOp;

class RowKernels : public AgreeTest {};

// Values rounded to `d` (f32 or bf16), as floats and as the bytes a kernel reads.
struct Matrix {
  std::vector<float> values;
  std::vector<uint16_t> bits;  // bf16 only

  Matrix(DType d, size_t n, Rng& rng, float lo, float hi) : values(n) {
    for (float& v : values) v = rng.uniform(lo, hi);
    if (d == f32) return;
    for (float& v : values) {
      bits.push_back(float_to_bf16(v));
      v = bf16_to_float(bits.back());
    }
  }
  absl::StatusOr<Buffer> upload_to(const Device& dev) const {
    return bits.empty() ? upload(dev, values) : upload(dev, bits);
  }
};

// The kernel's output on `dev`, as floats.
absl::StatusOr<std::vector<float>> run_row_kernel(const Device& dev, RowOp op, DType d, samples::RowBlock block,
                                                  const Matrix& x, const Matrix& w, const Matrix& b, int rows,
                                                  int cols) {
  TESSEL_ASSIGN_OR_RETURN(Kernel kernel, samples::row_kernel(op, block, d));
  CompileOptions options;
  options.num_warps = block.warps;
  TESSEL_ASSIGN_OR_RETURN(Function fn, dev.compile(kernel, options));
  const size_t n = x.values.size();
  TESSEL_ASSIGN_OR_RETURN(Buffer bx, x.upload_to(dev));
  TESSEL_ASSIGN_OR_RETURN(Buffer bw, w.upload_to(dev));
  TESSEL_ASSIGN_OR_RETURN(Buffer bb, b.upload_to(dev));
  TESSEL_ASSIGN_OR_RETURN(Buffer by, dev.allocate(n * d.bytes()));
  TESSEL_RETURN_IF_ERROR(poison<uint16_t>(dev, by, n * d.bytes() / 2, 0x7FC1));  // NaN in f32 and bf16
  const LaunchConfig lc = {.grid = (rows + block.rows - 1) / block.rows, .num_warps = block.warps};
  TESSEL_RETURN_IF_ERROR(samples::launch_row_kernel(fn, lc, op, bx, by, bw, bb, rows, cols));
  TESSEL_RETURN_IF_ERROR(dev.synchronize());
  if (d == f32) return download<float>(dev, by, n);
  TESSEL_ASSIGN_OR_RETURN(std::vector<uint16_t> bits, download<uint16_t>(dev, by, n));
  std::vector<float> out;
  for (uint16_t v : bits) out.push_back(bf16_to_float(v));
  return out;
}

TEST_F(RowKernels, RowOpsAgreeWithTheHostAndADoubleReference) {
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  for (RowOp op :
       {RowOp::kSoftmax, RowOp::kLayerNorm, RowOp::kRmsNorm, RowOp::kCumsum, RowOp::kRecurrence, RowOp::kSort}) {
    for (DType d : {f32, bf16}) {
      // row_block's power-of-two blocks, and blocks whose sides are not powers of two.
      for (auto [cols, block] :
           std::vector<std::pair<int, samples::RowBlock>>{{1000, samples::row_block(1000)},
                                                          {1024, samples::row_block(1024)},
                                                          {4096, samples::row_block(4096)},
                                                          {16384, samples::row_block(16384)},
                                                          {768, {.rows = 5, .cols = 768, .warps = 4}},
                                                          {1000, {.rows = 3, .cols = 1000, .warps = 8}}}) {
        const int rows = rng.uniform_int(1, 3 * block.rows + 5);
        SCOPED_TRACE(::testing::Message() << samples::row_op_name(op) << " " << d.name() << " " << rows << "x" << cols
                                          << " in blocks of " << block.rows << "x" << block.cols);
        Matrix x(d, size_t{1} * rows * cols, rng, -4, 4), w(d, cols, rng, 0.5f, 1.5f), b(d, cols, rng, -1, 1);
        std::vector<std::vector<float>> outs;
        for (const Device& dev : devices_) {
          absl::StatusOr<std::vector<float>> got = run_row_kernel(dev, op, d, block, x, w, b, rows, cols);
          ASSERT_TRUE(got.ok()) << dev.name() << ": " << got.status();
          outs.push_back(*std::move(got));
        }
        std::vector<double> want;
        for (int r = 0; r < rows; ++r) {
          std::vector<double> row = samples::row_reference(op, x.values.data() + size_t{1} * r * cols, w.values.data(),
                                                           b.values.data(), cols);
          want.insert(want.end(), row.begin(), row.end());
        }
        // bf16 results round the f32 arithmetic once: within 2^-8 of the
        // reference, and a rounding apart between devices. Prefix sums of
        // up to 16384 terms (partial sums in the hundreds) carry the f32
        // error of that many adds, in different orders on the two devices;
        // so do recurrences, whose decays below 1 on average keep the
        // states small.
        const double f32_tol = op == RowOp::kCumsum || op == RowOp::kRecurrence ? 1e-6 * cols : 1e-5;
        const double tol = d == f32 ? f32_tol : 1.0 / 128;
        EXPECT_TRUE(all_close(outs[0], outs[1], tol)) << "device under test against host:2";
        EXPECT_TRUE(all_close(outs[0], want, d == f32 ? std::max(f32_tol, 1e-4) : 1.0 / 128))
            << "against the double reference";
      }
    }
  }
}

TEST_F(RowKernels, SumsAndMaximaAlongEitherAxisAgree) {
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  for (int axis : {0, 1}) {
    for (samples::Reduction how : {samples::Reduction::kSum, samples::Reduction::kMax}) {
      for (DType d : {f32, bf16}) {
        const int rows = rng.uniform_int(1, 300), cols = rng.uniform_int(1, 2000);
        const samples::RowBlock block =
            axis == 1 ? samples::row_block(cols) : samples::RowBlock{.rows = 32, .cols = 128, .warps = 4};
        SCOPED_TRACE(::testing::Message() << "axis " << axis << (how == samples::Reduction::kSum ? " sum " : " max ")
                                          << d.name() << " " << rows << "x" << cols);
        Matrix x(d, size_t{1} * rows * cols, rng, -1, 1);
        const int n = axis == 1 ? rows : cols;
        absl::StatusOr<Kernel> kernel = samples::matrix_reduce_kernel(axis, how, block, d);
        ASSERT_TRUE(kernel.ok()) << kernel.status();
        std::vector<std::vector<float>> outs;
        for (const Device& dev : devices_) {
          CompileOptions options;
          options.num_warps = block.warps;
          absl::StatusOr<Function> fn = dev.compile(*kernel, options);
          ASSERT_TRUE(fn.ok()) << fn.status();
          absl::StatusOr<Buffer> bx = x.upload_to(dev), bo = dev.allocate(n * sizeof(float));
          ASSERT_TRUE(bx.ok() && bo.ok());
          ASSERT_TRUE(poison<float>(dev, *bo, n, NAN).ok());
          const int grid = axis == 1 ? (rows + block.rows - 1) / block.rows : (cols + block.cols - 1) / block.cols;
          ASSERT_TRUE(fn->launch({.grid = grid, .num_warps = block.warps}, *bx, *bo, rows, cols).ok());
          ASSERT_TRUE(dev.synchronize().ok());
          absl::StatusOr<std::vector<float>> got = download<float>(dev, *bo, n);
          ASSERT_TRUE(got.ok());
          outs.push_back(*std::move(got));
        }
        std::vector<double> want(n, how == samples::Reduction::kSum ? 0.0 : -INFINITY);
        for (int r = 0; r < rows; ++r) {
          for (int c = 0; c < cols; ++c) {
            double& acc = want[axis == 1 ? r : c];
            const double v = x.values[size_t{1} * r * cols + c];
            acc = how == samples::Reduction::kSum ? acc + v : std::max(acc, v);
          }
        }
        if (how == samples::Reduction::kMax) {
          EXPECT_TRUE(bit_equal(outs[0], outs[1])) << "device under test against host:2";
          EXPECT_TRUE(all_close(outs[0], want, 0)) << "against the double reference";
        } else {
          // Up to 2000 terms below 1 in magnitude, summed in other orders.
          EXPECT_TRUE(all_close(outs[0], outs[1], 1e-4)) << "device under test against host:2";
          EXPECT_TRUE(all_close(outs[0], want, 1e-4)) << "against the double reference";
        }
      }
    }
  }
}

// The router of samples::router_top_k_kernel: each token's top 8 experts
// and their softmax weights, f32 and bf16 logits, 64 to 256 experts (160:
// rows sorted over a buffer), blocks of 1 to 16 tokens.
TEST_F(RowKernels, RouterTopKAgreesWithTheHostAndADoubleReference) {
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  constexpr int kTop = 8, kTokens = 300;
  for (DType d : {f32, bf16}) {
    for (const auto& [experts, block_rows, warps] :
         std::vector<std::tuple<int, int, int>>{{64, 16, 4}, {128, 4, 4}, {256, 1, 1}, {160, 2, 4}, {256, 8, 8}}) {
      SCOPED_TRACE(::testing::Message() << d.name() << " " << experts << " experts, blocks of " << block_rows << ", "
                                        << warps << " warps");
      const Matrix x(d, size_t{kTokens} * experts, rng, -4, 4);
      absl::StatusOr<Kernel> kernel = samples::router_top_k_kernel(block_rows, experts, kTop, d);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      const size_t n = size_t{kTokens} * kTop;
      std::vector<std::vector<float>> weights;
      std::vector<std::vector<int32_t>> ids;
      for (const Device& dev : devices_) {
        CompileOptions options;
        options.num_warps = warps;
        absl::StatusOr<Function> fn = dev.compile(*kernel, options);
        ASSERT_TRUE(fn.ok()) << fn.status();
        absl::StatusOr<Buffer> bx = x.upload_to(dev), bw = dev.allocate(n * 4), bi = dev.allocate(n * 4);
        ASSERT_TRUE(bx.ok() && bw.ok() && bi.ok());
        const LaunchConfig lc = {.grid = (kTokens + block_rows - 1) / block_rows, .num_warps = warps};
        ASSERT_TRUE(fn->launch(lc, *bx, *bw, *bi, kTokens).ok());
        ASSERT_TRUE(dev.synchronize().ok());
        absl::StatusOr<std::vector<float>> w = download<float>(dev, *bw, n);
        absl::StatusOr<std::vector<int32_t>> i = download<int32_t>(dev, *bi, n);
        ASSERT_TRUE(w.ok() && i.ok());
        weights.push_back(*std::move(w));
        ids.push_back(*std::move(i));
      }
      EXPECT_EQ(ids[0], ids[1]) << "device under test against host:2";
      EXPECT_TRUE(all_close(weights[0], weights[1], 1e-6)) << "device under test against host:2";
      std::vector<double> want_weights;
      std::vector<int32_t> want_ids;
      for (int t = 0; t < kTokens; ++t) {
        const samples::RouterPick want =
            samples::router_reference(x.values.data() + size_t{1} * t * experts, experts, kTop);
        want_ids.insert(want_ids.end(), want.ids.begin(), want.ids.end());
        want_weights.insert(want_weights.end(), want.weights.begin(), want.weights.end());
      }
      EXPECT_EQ(ids[0], want_ids) << "against the stable order of the logits";
      EXPECT_TRUE(all_close(weights[0], want_weights, 1e-6)) << "against the double reference";
    }
  }
}

// Rotary embeddings (samples::rope_kernel): f32 and bf16, head dimensions
// of 64 and 128 (rotate_half by shuffles) and 80 (through shared memory),
// rows in blocks that leave the last one part empty.
TEST_F(RowKernels, RopeAgreesWithTheHostAndADoubleReference) {
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  for (DType d : {f32, bf16}) {
    for (const samples::RowBlock& block :
         {samples::row_block(128), samples::row_block(64), samples::RowBlock{.rows = 3, .cols = 80, .warps = 4}}) {
      const int heads = rng.uniform_int(1, 8), tokens = rng.uniform_int(1, 40), rows = heads * tokens;
      const int dim = block.cols;
      SCOPED_TRACE(::testing::Message() << d.name() << " head dimension " << dim << ", " << tokens << " tokens of "
                                        << heads << " heads");
      const size_t n = size_t{1} * rows * dim, table = size_t{1} * tokens * dim;
      const Matrix x(d, n, rng, -2, 2), cos(d, table, rng, -1, 1), sin(d, table, rng, -1, 1);
      absl::StatusOr<Kernel> kernel = samples::rope_kernel(block, d);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      std::vector<std::vector<float>> got;
      for (const Device& dev : devices_) {
        CompileOptions options;
        options.num_warps = block.warps;
        absl::StatusOr<Function> fn = dev.compile(*kernel, options);
        ASSERT_TRUE(fn.ok()) << fn.status();
        absl::StatusOr<Buffer> bx = x.upload_to(dev), bc = cos.upload_to(dev), bs = sin.upload_to(dev),
                               by = dev.allocate(n * d.bytes());
        ASSERT_TRUE(bx.ok() && bc.ok() && bs.ok() && by.ok());
        ASSERT_TRUE(poison<uint16_t>(dev, *by, n * d.bytes() / 2, 0x7FC1).ok());
        const LaunchConfig lc = {.grid = (rows + block.rows - 1) / block.rows, .num_warps = block.warps};
        ASSERT_TRUE(fn->launch(lc, *bx, *by, *bc, *bs, rows, heads).ok());
        ASSERT_TRUE(dev.synchronize().ok());
        if (d == f32) {
          absl::StatusOr<std::vector<float>> y = download<float>(dev, *by, n);
          ASSERT_TRUE(y.ok());
          got.push_back(*std::move(y));
        } else {
          absl::StatusOr<std::vector<uint16_t>> y = download<uint16_t>(dev, *by, n);
          ASSERT_TRUE(y.ok());
          std::vector<float>& out = got.emplace_back();
          for (uint16_t v : *y) out.push_back(bf16_to_float(v));
        }
      }
      // One rounding of the f32 arithmetic (which a device may contract into
      // fmas) to bf16: a step apart between devices, half a step from the reference.
      EXPECT_TRUE(all_close(got[0], got[1], d == f32 ? 1e-6 : 1.0 / 128)) << "device under test against host:2";
      std::vector<double> want;
      for (int r = 0; r < rows; ++r) {
        const size_t t = r / heads;
        const std::vector<double> row =
            samples::rope_reference(&x.values[size_t{1} * r * dim], &cos.values[t * dim], &sin.values[t * dim], dim);
        want.insert(want.end(), row.begin(), row.end());
      }
      EXPECT_TRUE(all_close(got[0], want, d == f32 ? 1e-6 : 1.0 / 256)) << "against the double reference";
    }
  }
}

// Per-token quantization, and per group of 128 (the last of a row what is
// left of it): the device's bytes and scales are the host's, bit for bit
// (a division, a maximum and one rounding an element).
TEST_F(RowKernels, QuantizedRowsAgreeBitForBit) {
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  for (auto [from, to, cols, groups] : {std::tuple{f32, i8, 4096, false},
                                        {bf16, i8, 1000, false},
                                        {f32, f8e4m3, 272, false},
                                        {bf16, f8e4m3, 8192, false},
                                        {bf16, f8e4m3, 7000, true},
                                        {f32, i8, 1024, true}}) {
    SCOPED_TRACE(::testing::Message() << from.name() << " to " << to.name() << ", rows of " << cols
                                      << (groups ? " in groups of 128" : ""));
    const int rows = rng.uniform_int(1, 300);
    const size_t n = size_t{1} * rows * cols;
    const int scales = groups ? (cols + 127) / 128 * rows : rows;
    const Matrix x(from, n, rng, -8, 8);
    const samples::RowBlock block =
        groups ? samples::RowBlock{.rows = 32, .cols = 128, .warps = 2} : samples::row_block(cols);
    absl::StatusOr<Kernel> kernel =
        groups ? samples::quantize_groups_kernel(block, from, to) : samples::quantize_rows_kernel(block, from, to);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    std::vector<std::pair<std::vector<uint8_t>, std::vector<float>>> got;
    for (const Device& dev : devices_) {
      CompileOptions options;
      options.num_warps = block.warps;
      absl::StatusOr<Function> fn = dev.compile(*kernel, options);
      ASSERT_TRUE(fn.ok()) << fn.status();
      absl::StatusOr<Buffer> bx = x.upload_to(dev), bq = dev.allocate(n), bs = dev.allocate(scales * 4);
      ASSERT_TRUE(bx.ok() && bq.ok() && bs.ok());
      const LaunchConfig lc = {.grid = (scales + block.rows - 1) / block.rows, .num_warps = block.warps};
      ASSERT_TRUE(fn->launch(lc, *bx, *bq, *bs, rows, cols).ok());
      ASSERT_TRUE(dev.synchronize().ok());
      absl::StatusOr<std::vector<uint8_t>> q = download<uint8_t>(dev, *bq, n);
      absl::StatusOr<std::vector<float>> s = download<float>(dev, *bs, scales);
      ASSERT_TRUE(q.ok() && s.ok());
      got.emplace_back(*std::move(q), *std::move(s));
    }
    EXPECT_EQ(got[0].second, got[1].second) << "scales, device under test against host:2";
    EXPECT_EQ(got[0].first, got[1].first) << "quantized values, device under test against host:2";
  }
}

}  // namespace
}  // namespace tessel::gpu_test
