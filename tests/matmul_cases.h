// The GEMM (samples::gemm_kernel, every operand dtype dot multiplies on
// tensor cores) and the attention kernel run on any device, with random
// operands and double-precision references: shared by the host suite (CI)
// and the GPU suite, which also compares the two devices.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/float16.h"
#include "base/float8.h"
#include "base/status.h"
#include "codegen/compiler.h"
#include "dsl/types.h"
#include "runtime/device.h"
#include "samples/kernels.h"
#include "samples/moe.h"

namespace tessel::matmul_cases {

// f32 rounded to tf32's 10 mantissa bits, to nearest even (as the host
// target reads operands of a Precision::kTf32 dot).
inline float round_to_tf32(float x) {
  if (!std::isfinite(x)) return x;
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits = (bits + 0xFFF + ((bits >> 13) & 1)) & ~uint32_t{0x1FFF};
  std::memcpy(&x, &bits, 4);
  return x;
}

// `count` values of dtype `d` drawn from [-1, 1] (i8: from [-128, 127]): as stored (bytes, the
// layout a tensor map reads) and as the kernel reads them (values). f32
// values are exact in tf32 where `tf32_exact`, so that a tf32 product of
// them is an f32 one.
struct Operand {
  std::vector<uint8_t> bytes;
  std::vector<double> values;
};
inline Operand random_operand(DType d, int64_t count, std::mt19937& gen, bool tf32_exact = false) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Operand op;
  op.bytes.resize(count * d.bytes());
  op.values.resize(count);
  for (int64_t i = 0; i < count; ++i) {
    float x = dist(gen);
    uint8_t* at = op.bytes.data() + i * d.bytes();
    if (d == bf16) {
      const uint16_t b = float_to_bf16(x);
      std::memcpy(at, &b, 2);
      op.values[i] = bf16_to_float(b);
    } else if (d == f16) {
      const _Float16 h = static_cast<_Float16>(x);
      std::memcpy(at, &h, 2);
      op.values[i] = static_cast<double>(h);
    } else if (d.is_float8()) {
      const Float8 f = d == f8e4m3 ? Float8::kE4M3 : Float8::kE5M2;
      *at = float_to_float8(x, f);
      op.values[i] = float8_to_float(*at, f);
    } else if (d == i8) {  // every value of i8, from x
      const auto v = static_cast<int8_t>(std::clamp(static_cast<int>(std::floor(x * 128.0f)), -128, 127));
      std::memcpy(at, &v, 1);
      op.values[i] = v;
    } else {
      if (tf32_exact) x = round_to_tf32(x);
      std::memcpy(at, &x, 4);
      op.values[i] = x;
    }
  }
  return op;
}

// `count` scales j / denominator, j uniform in 1 ... 64: exact in f32, so
// that scaling a result rounds it once.
inline std::vector<float> random_scales(int64_t count, float denominator, std::mt19937& gen) {
  std::uniform_int_distribution<int> step(1, 64);
  std::vector<float> scales(count);
  for (float& s : scales) s = static_cast<float>(step(gen)) / denominator;
  return scales;
}

// sum_k a[i, k] b[k, j] in double, and the sum of |a b| (the scale of the
// rounding errors an f32 accumulation may make), with A stored [m, k] (or
// [k, m] without a_mk) and B stored [n, k] (or [k, n] without b_nk).
struct Dot {
  double sum = 0, size = 0;
};
inline Dot dot_at(const std::vector<double>& a, const std::vector<double>& b, int64_t m, int64_t n, int64_t k,
                  bool a_mk, bool b_nk, int64_t i, int64_t j) {
  Dot d;
  for (int64_t kk = 0; kk < k; ++kk) {
    const double x = a_mk ? a[i * k + kk] : a[kk * m + i];
    const double y = b_nk ? b[j * k + kk] : b[kk * n + j];
    d.sum += x * y;
    d.size += std::abs(x * y);
  }
  return d;
}

// Block scales for an m x n x k GEMM (samples::GemmConfig::block_scales):
// a [ceil(k / 128), m] and b [ceil(n / 128), ceil(k / 128)] (a set for
// each of `groups`), random multiples of 1/256 in (0, 1/4].
struct BlockScales {
  std::vector<float> a, b;
};
inline BlockScales random_block_scales(int64_t m, int64_t n, int64_t k, std::mt19937& gen, int groups = 1) {
  const int64_t kb = (k + samples::kScaleBlock - 1) / samples::kScaleBlock;
  const int64_t nb = (n + samples::kScaleBlock - 1) / samples::kScaleBlock;
  return {random_scales(kb * m, 256, gen), random_scales(groups * nb * kb, 256, gen)};
}
// dot_at of A as M x K and B as N x K, each term times its block scales.
inline Dot block_scaled_dot_at(const std::vector<double>& a, const std::vector<double>& b, const BlockScales& s,
                               int64_t m, int64_t k, int64_t i, int64_t j) {
  const int64_t kb = (k + samples::kScaleBlock - 1) / samples::kScaleBlock;
  Dot d;
  for (int64_t p = 0; p < k; ++p) {
    const int64_t block = p / samples::kScaleBlock;
    const double term = a[i * k + p] * b[j * k + p] * s.a[block * m + i] * s.b[j / samples::kScaleBlock * kb + block];
    d.sum += term;
    d.size += std::abs(term);
  }
  return d;
}

// softmax(Q K^T * scale) V in double for Q [heads, len, d] and K, V
// [heads / group, len, d] row-major (with `causal`, query i over keys
// 0..i).
inline std::vector<double> attention(const std::vector<double>& q, const std::vector<double>& k,
                                     const std::vector<double>& v, int64_t heads, int64_t len, int64_t d, double scale,
                                     bool causal = false, int64_t group = 1) {
  std::vector<double> out(heads * len * d);
  for (int64_t h = 0; h < heads; ++h) {
    const int64_t at = h * len * d, kv = h / group * len * d;
    for (int64_t i = 0; i < len; ++i) {
      samples::attention_row(&q[at], &k[kv], &v[kv], len, d, scale, causal, i, &out[at + i * d]);
    }
  }
  return out;
}

// Attention's gradients in double for Q and dO [heads, len, d] and K and V
// [heads / group, len, d] row-major (a KV head's dK and dV summed over its
// group), with log2 sum_j exp(q_i k_j * scale) per query (lse2).
struct AttnGrads {
  std::vector<double> dq, dk, dv, lse2;
};
inline AttnGrads attention_grads(const std::vector<double>& q, const std::vector<double>& k,
                                 const std::vector<double>& v, const std::vector<double>& dout, int64_t heads,
                                 int64_t len, int64_t d, double scale, bool causal, int64_t group = 1) {
  const int64_t kv_size = heads / group * len * d;
  AttnGrads g{std::vector<double>(heads * len * d), std::vector<double>(kv_size), std::vector<double>(kv_size),
              std::vector<double>(heads * len)};
  std::vector<double> p(len * len), ds(len * len);
  for (int64_t h = 0; h < heads; ++h) {
    const int64_t at = h * len * d, kv_at = h / group * len * d;
    auto row = [&](const std::vector<double>& x, int64_t i) { return &x[at + i * d]; };        // of Q and dO
    auto kv_row = [&](const std::vector<double>& x, int64_t j) { return &x[kv_at + j * d]; };  // of K and V
    auto dot = [&](const double* a, const double* b) {
      double s = 0;
      for (int64_t c = 0; c < d; ++c) s += a[c] * b[c];
      return s;
    };
    for (int64_t i = 0; i < len; ++i) {
      const int64_t keys = causal ? i + 1 : len;
      double top = -INFINITY, total = 0;
      for (int64_t j = 0; j < keys; ++j) top = std::max(top, p[i * len + j] = dot(row(q, i), kv_row(k, j)) * scale);
      for (int64_t j = 0; j < keys; ++j) total += p[i * len + j] = std::exp(p[i * len + j] - top);
      for (int64_t j = 0; j < len; ++j) p[i * len + j] = j < keys ? p[i * len + j] / total : 0;
      g.lse2[h * len + i] = (top + std::log(total)) / std::log(2.0);
      // D_i = dO_i . O_i, O_i = sum_j P_ij v_j.
      double di = 0;
      for (int64_t c = 0; c < d; ++c) {
        double o = 0;
        for (int64_t j = 0; j < keys; ++j) o += p[i * len + j] * kv_row(v, j)[c];
        di += row(dout, i)[c] * o;
      }
      for (int64_t j = 0; j < len; ++j) ds[i * len + j] = p[i * len + j] * (dot(row(dout, i), kv_row(v, j)) - di);
    }
    for (int64_t i = 0; i < len; ++i) {
      for (int64_t j = 0; j < len; ++j) {
        for (int64_t c = 0; c < d; ++c) {
          g.dq[at + i * d + c] += ds[i * len + j] * kv_row(k, j)[c] * scale;
          g.dk[kv_at + j * d + c] += ds[i * len + j] * row(q, i)[c] * scale;
          g.dv[kv_at + j * d + c] += p[i * len + j] * row(dout, i)[c];
        }
      }
    }
  }
  return g;
}

// The largest |got - want| over the largest |want|: NaN (a value the
// kernel did not write) counts as infinite.
inline double relative_error(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = 0, size = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double e = std::abs(got[i] - want[i]);
    worst = std::isnan(e) ? INFINITY : std::max(worst, e);
    size = std::max(size, std::abs(want[i]));
  }
  return worst / size;
}

// The largest relative_error of three gradients.
inline double gradient_error(const std::vector<float>& dq, const std::vector<float>& dk, const std::vector<float>& dv,
                             const AttnGrads& want) {
  return std::max({relative_error(dq, want.dq), relative_error(dk, want.dk), relative_error(dv, want.dv)});
}
// What gradient_error may reach: P and dS are rounded to c.in before their
// products, O (which D reads) too: 8 bits of bf16, 11 of f16 (a bf16
// gradient rounds once more). Errors seen on the host: 4.4e-3 with bf16,
// 3.2e-4 with f16.
inline double gradient_tolerance(DType in) { return in == bf16 ? 1e-2 : 1e-3; }

// The kernel's grid on `device`: one program per tile, at most one per SM.
inline int grid_for(const Device& device, int64_t tiles) {
  return static_cast<int>(std::min<int64_t>(tiles, device.num_compute_units()));
}

inline absl::StatusOr<Buffer> put(const Device& device, const void* data, size_t bytes) {
  TESSEL_ASSIGN_OR_RETURN(Buffer b, device.allocate(bytes));
  TESSEL_RETURN_IF_ERROR(device.copy_to_device(b, data, bytes));
  return b;
}
inline absl::StatusOr<Buffer> put(const Device& device, const Operand& x) {
  return put(device, x.bytes.data(), x.bytes.size());
}

// Maps for code compiled for `arch` (empty: the device's own) on
// `device`: the device's encoding, or where that code copies boxes in
// software (sm_80 to sm_89 on a Hopper GPU), tessel's host form.
inline samples::MapEncoder maps_for(const Device& device, const std::string& arch) {
  const bool software = device.kind() == DeviceKind::kCuda && !arch.empty() && !copies_boxes_with_tma(arch);
  return software ? samples::host_form_maps() : samples::device_maps(device);
}

// `kernel`, built, compiled on `device` for programs of `warps` warps.
inline absl::StatusOr<Function> compile_for(const Device& device, absl::StatusOr<Kernel> kernel,
                                            const CompileOptions& options) {
  if (!kernel.ok()) return kernel.status();
  return device.compile(*kernel, options);
}
inline absl::StatusOr<Function> compile_for(const Device& device, absl::StatusOr<Kernel> kernel, int warps) {
  CompileOptions options;
  options.num_warps = warps;
  return compile_for(device, std::move(kernel), options);
}

// `n` NaNs of `dtype` (f32 or bf16) in a new buffer: a value a kernel does
// not write shows.
inline absl::StatusOr<Buffer> nan_buffer(const Device& device, DType dtype, int64_t n) {
  if (dtype == f8e4m3) {
    const std::vector<uint8_t> bits(n, 0x7F);  // e4m3's NaN
    return put(device, bits.data(), n);
  }
  if (dtype == bf16) {
    const std::vector<uint16_t> bits(n, 0x7FC0);  // bf16's quiet NaN
    return put(device, bits.data(), n * 2);
  }
  const std::vector<float> values(n, std::nanf(""));
  return put(device, values.data(), n * 4);
}

// `n` values of `dtype` (f32, bf16, f8e4m3 or i32: exact below 2^24) from
// `src`, as f32.
inline absl::StatusOr<std::vector<float>> download_f32(const Device& device, const Buffer& src, DType dtype,
                                                       int64_t n) {
  std::vector<float> out(n);
  if (dtype == i32) {
    std::vector<int32_t> ints(n);
    TESSEL_RETURN_IF_ERROR(device.copy_to_host(ints.data(), src, n * 4));
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(ints[i]);
    return out;
  }
  if (dtype == f8e4m3) {
    std::vector<uint8_t> bits(n);
    TESSEL_RETURN_IF_ERROR(device.copy_to_host(bits.data(), src, n));
    for (int64_t i = 0; i < n; ++i) out[i] = float8_to_float(bits[i], Float8::kE4M3);
    return out;
  }
  if (dtype != bf16) {
    TESSEL_RETURN_IF_ERROR(device.copy_to_host(out.data(), src, n * 4));
    return out;
  }
  std::vector<uint16_t> bits(n);
  TESSEL_RETURN_IF_ERROR(device.copy_to_host(bits.data(), src, n * 2));
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(bits[i]);
  return out;
}

// Products whose operand the program computed: per block of r rows
// (A and C [rows, 64], E [rows, r], B [r, 64], all bf16; Y f32), X = A B^T
// [r, r] rounded to bf16, then Y = X^T C ([r, 64]: dS K when the registers
// hold dS^T), E X or E X^T ([r, r]). On tensor cores the computed operand
// is staged through shared memory for the second product.
enum class Computed { kTransposedA, kB, kTransposedB };
struct StagedProduct {
  Computed form = Computed::kTransposedA;
  int64_t r = 64;   // rows a block: 64 on one warpgroup, 128 on two
  int threads = 0;  // the program's (0: 2 r, a warpgroup per 64 rows)
  int64_t y_cols() const { return form == Computed::kTransposedA ? 64 : r; }
  int warps() const { return threads > 0 ? threads / 32 : static_cast<int>(r / 16); }
  std::string name() const { return absl::StrCat("form ", static_cast<int>(form), " r ", r, " threads ", threads); }
};
// The products the tests run: each form on 64- and 128-row blocks, and on
// 64-row blocks with two warpgroups (which split the product's columns).
inline std::vector<StagedProduct> staged_products() {
  std::vector<StagedProduct> out;
  for (Computed form : {Computed::kTransposedA, Computed::kB, Computed::kTransposedB}) {
    for (auto [r, threads] : {std::pair{64, 0}, {128, 0}, {64, 256}}) out.push_back({form, r, threads});
  }
  return out;
}
inline absl::StatusOr<Kernel> staged_product_kernel(const StagedProduct& p) {
  KernelBuilder k("staged_product");
  Value a = k.tensor_map(bf16, {p.r, 64}, "a", Swizzle::k128B);
  Value b = k.tensor_map(bf16, {p.r, 64}, "b", Swizzle::k128B);
  Value c = k.tensor_map(bf16, {p.r, 64}, "c", Swizzle::k128B);
  Value e = k.tensor_map(bf16, {p.r, p.r}, "e", Swizzle::k128B);
  Value y = k.tensor_map(f32, {p.r, p.y_cols()}, "y");
  Value rows = k.arg(i32, "rows");
  k.for_each_tile(cdiv(rows, p.r), [&](Value t) {
    Value row = t * p.r;
    Value x = cast(dot(tma_load(a, {row, 0}), trans(tma_load(b, {0, 0})), k.zeros({p.r, p.r}, f32)), bf16);
    Value out;
    switch (p.form) {
      case Computed::kTransposedA:
        out = dot(trans(x), tma_load(c, {row, 0}), k.zeros({p.r, 64}, f32));
        break;
      case Computed::kB:
        out = dot(tma_load(e, {row, 0}), x, k.zeros({p.r, p.r}, f32));
        break;
      case Computed::kTransposedB:
        out = dot(tma_load(e, {row, 0}), trans(x), k.zeros({p.r, p.r}, f32));
        break;
    }
    tma_store(y, {row, 0}, out);
  });
  return k.build();
}

// The operands of a StagedProduct over `rows` rows.
struct StagedOperands {
  Operand a, b, c, e;
};
inline StagedOperands staged_operands(const StagedProduct& p, int64_t rows, std::mt19937& gen) {
  return {random_operand(bf16, rows * 64, gen), random_operand(bf16, p.r * 64, gen),
          random_operand(bf16, rows * 64, gen), random_operand(bf16, rows * p.r, gen)};
}

// staged_product_kernel(p) on `device`: Y [rows, y_cols()].
inline absl::StatusOr<std::vector<float>> run_staged_product(const Device& device, const StagedProduct& p, int64_t rows,
                                                             const StagedOperands& in) {
  TESSEL_ASSIGN_OR_RETURN(Function fn, compile_for(device, staged_product_kernel(p), p.warps()));
  TESSEL_ASSIGN_OR_RETURN(Buffer ab, put(device, in.a));
  TESSEL_ASSIGN_OR_RETURN(Buffer bb, put(device, in.b));
  TESSEL_ASSIGN_OR_RETURN(Buffer cb, put(device, in.c));
  TESSEL_ASSIGN_OR_RETURN(Buffer eb, put(device, in.e));
  TESSEL_ASSIGN_OR_RETURN(Buffer yb, nan_buffer(device, f32, rows * p.y_cols()));
  auto map = [&](DType dtype, const Buffer& buf, int64_t cols, Swizzle swizzle, int64_t box_rows) {
    return device.tensor_map(dtype, buf, {rows, cols}, {box_rows, cols}, swizzle);
  };
  TESSEL_ASSIGN_OR_RETURN(TensorMap am, map(bf16, ab, 64, Swizzle::k128B, p.r));
  TESSEL_ASSIGN_OR_RETURN(TensorMap bm, device.tensor_map(bf16, bb, {p.r, 64}, {p.r, 64}, Swizzle::k128B));
  TESSEL_ASSIGN_OR_RETURN(TensorMap cm, map(bf16, cb, 64, Swizzle::k128B, p.r));
  TESSEL_ASSIGN_OR_RETURN(TensorMap em, map(bf16, eb, p.r, Swizzle::k128B, p.r));
  TESSEL_ASSIGN_OR_RETURN(TensorMap ym, map(f32, yb, p.y_cols(), Swizzle::kNone, p.r));
  TESSEL_RETURN_IF_ERROR(fn.launch({.grid = grid_for(device, (rows + p.r - 1) / p.r), .num_warps = p.warps()}, am, bm,
                                   cm, em, ym, static_cast<int32_t>(rows)));
  TESSEL_RETURN_IF_ERROR(device.synchronize());
  return download_f32(device, yb, f32, rows * p.y_cols());
}

// Y of a StagedProduct in doubles, X's elements rounded to bf16 from their
// exact sums.
inline std::vector<double> staged_product_reference(const StagedProduct& p, int64_t rows, const StagedOperands& in) {
  const int64_t r = p.r, cols = p.y_cols();
  std::vector<double> y(rows * cols);
  for (int64_t blk = 0; blk < rows; blk += r) {
    const int64_t n = std::min(r, rows - blk);  // the block's rows inside; the rest of A and E read as zeros
    std::vector<double> x(r * r, 0.0);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < r; ++j) {
        double sum = 0;
        for (int64_t e = 0; e < 64; ++e) sum += double{in.a.values[(blk + i) * 64 + e]} * in.b.values[j * 64 + e];
        x[i * r + j] = bf16_to_float(float_to_bf16(static_cast<float>(sum)));
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        double sum = 0;
        for (int64_t l = 0; l < (p.form == Computed::kTransposedA ? n : r); ++l) {
          switch (p.form) {
            case Computed::kTransposedA:
              sum += x[l * r + i] * in.c.values[(blk + l) * 64 + j];
              break;
            case Computed::kB:
              sum += in.e.values[(blk + i) * r + l] * x[l * r + j];
              break;
            case Computed::kTransposedB:
              sum += in.e.values[(blk + i) * r + l] * x[j * r + l];
              break;
          }
        }
        y[(blk + i) * cols + j] = sum;
      }
    }
  }
  return y;
}

// C = gemm_kernel(g) on `device` (g.out f32, i32, or bf16, returned as
// f32), with `scales` (scale_a, scale_b) where g.scaled, `bias` ([n] of
// g.bias_type()) where g.bias_gelu, and `row_scales` [m] and `col_scales`
// [n] where g takes them, and `blocks` where g.block_scales; C starts as NaN, so an element the kernel misses
// shows (with split-K, which adds into C, as zero). On `programs` programs where
// given, else one a tile (stream-K: one a compute unit) up to the device's
// compute units. Stream-K launches twice, C back to NaN in between, and
// returns the second C: its workspace is the one the first launch left.
inline absl::StatusOr<std::vector<float>> run_gemm(
    const Device& device, const samples::GemmConfig& g, const CompileOptions& options, int64_t m, int64_t n, int64_t k,
    const Operand& a, const Operand& b, std::pair<float, float> scales = {1, 1}, const Operand* bias = nullptr,
    int programs = 0, const std::vector<float>& row_scales = {}, const std::vector<float>& col_scales = {},
    const BlockScales* blocks = nullptr) {
  if ((g.row_scales && static_cast<int64_t>(row_scales.size()) != m) ||
      (g.col_scales && static_cast<int64_t>(col_scales.size()) != n)) {
    return absl::InvalidArgumentError("run_gemm: row_scales [m] and col_scales [n] where the configuration takes them");
  }
  if (g.block_scales && blocks == nullptr) return absl::InvalidArgumentError("run_gemm: block_scales needs blocks");
  if (g.bias_gelu && bias == nullptr) return absl::InvalidArgumentError("run_gemm: bias_gelu needs a bias");
  if (!(g.out == f32 || g.out == bf16 || g.out == i32)) {
    return absl::InvalidArgumentError("run_gemm: C must be f32, bf16 or i32");
  }
  const bool half = g.out == bf16;
  TESSEL_ASSIGN_OR_RETURN(Function fn, compile_for(device, samples::gemm_kernel(g), options));
  TESSEL_ASSIGN_OR_RETURN(Buffer ab, put(device, a));
  TESSEL_ASSIGN_OR_RETURN(Buffer bb, put(device, b));
  std::vector<float> c(m * n, g.split_k > 1 ? 0.0f : std::nanf(""));
  std::vector<uint16_t> c16(half ? m * n : 0, 0x7FC0);  // bf16's quiet NaN
  TESSEL_ASSIGN_OR_RETURN(Buffer cb, half ? put(device, c16.data(), c16.size() * 2) : put(device, c.data(), c.size() * 4));
  TESSEL_ASSIGN_OR_RETURN(Buffer sa, put(device, &scales.first, 4));
  TESSEL_ASSIGN_OR_RETURN(Buffer sb, put(device, &scales.second, 4));
  TESSEL_ASSIGN_OR_RETURN(Buffer biasb, g.bias_gelu ? put(device, *bias) : device.allocate(4));
  samples::GemmRows rows;
  TESSEL_ASSIGN_OR_RETURN(rows.scales, g.row_scales ? put(device, row_scales.data(), m * 4) : device.allocate(4));
  TESSEL_ASSIGN_OR_RETURN(Buffer colb, g.col_scales ? put(device, col_scales.data(), n * 4) : device.allocate(4));
  samples::GemmBlockScales blockb;
  TESSEL_ASSIGN_OR_RETURN(blockb.a,
                          g.block_scales ? put(device, blocks->a.data(), blocks->a.size() * 4) : device.allocate(4));
  TESSEL_ASSIGN_OR_RETURN(blockb.b,
                          g.block_scales ? put(device, blocks->b.data(), blocks->b.size() * 4) : device.allocate(4));
  TESSEL_ASSIGN_OR_RETURN(samples::GemmMaps maps,
                          samples::gemm_maps(maps_for(device, options.arch), g, ab, bb, cb, m, n, k));
  const int grid = programs > 0 ? programs
                   : g.stream_k ? device.num_compute_units()
                                : samples::gemm_grid(g, m, n, device.num_compute_units());
  std::optional<samples::GemmWorkspace> ws;
  if (g.stream_k) {
    TESSEL_ASSIGN_OR_RETURN(ws, samples::gemm_workspace(device, g, m, n, grid));
  }
  const LaunchConfig launch = {.grid = ws ? ws->programs : grid, .num_warps = options.num_warps};
  for (int launches = g.stream_k ? 2 : 1; launches > 0; --launches) {
    if (launches == 1 && g.stream_k) {
      TESSEL_RETURN_IF_ERROR(half ? device.copy_to_device(cb, c16.data(), c16.size() * 2)
                                  : device.copy_to_device(cb, c.data(), c.size() * 4));
    }
    TESSEL_RETURN_IF_ERROR(fn.launch_packed(
        launch,
        samples::gemm_args(g, maps, m, n, k, biasb, sa, sb, ws ? &*ws : nullptr, &rows, nullptr, &colb, &blockb)));
    TESSEL_RETURN_IF_ERROR(device.synchronize());
  }
  return download_f32(device, cb, g.out, m * n);
}
// The same on programs of `warps` warps, for the device's own chip.
inline absl::StatusOr<std::vector<float>> run_gemm(const Device& device, const samples::GemmConfig& g, int warps,
                                                   int64_t m, int64_t n, int64_t k, const Operand& a, const Operand& b,
                                                   std::pair<float, float> scales = {1, 1},
                                                   const Operand* bias = nullptr, int programs = 0,
                                                   const std::vector<float>& row_scales = {},
                                                   const std::vector<float>& col_scales = {},
                                                   const BlockScales* blocks = nullptr) {
  CompileOptions options;
  options.num_warps = warps;
  return run_gemm(device, g, options, m, n, k, a, b, scales, bias, programs, row_scales, col_scales, blocks);
}

// A grouped GEMM's problem (samples::GemmConfig::grouped): blocks of bm
// rows, each block's group, the blocks in use (the rest computes nothing),
// and its operands: A [blocks * bm, k], B [groups, n, k] ([groups, 2n, k]
// with a SwiGLU epilogue), A's scale and one per group (where g.scaled),
// C's row scales (where g.row_scales), C's scale (an fp8 C), and block
// scales (where g.block_scales: B's [groups, ceil(n / 128), ceil(k / 128)]).
struct GroupedGemmInputs {
  int64_t n = 0, k = 0;
  int groups = 0;
  std::vector<int32_t> block_groups;  // [blocks]
  int used_blocks = 0;
  Operand a, b;
  float scale_a = 1, scale_c = 1;
  std::vector<float> scale_b;     // [groups]
  std::vector<float> row_scales;  // [blocks * bm]
  BlockScales blocks;
};
// Random inputs for a grouped GEMM of `blocks` blocks (`used` in use) of
// g.bm rows over `groups` groups, N x K each: operands of g.in in [-1, 1],
// scales where g takes them.
inline GroupedGemmInputs random_grouped_gemm(const samples::GemmConfig& g, int blocks, int used, int groups, int64_t n,
                                             int64_t k, std::mt19937& gen) {
  GroupedGemmInputs in;
  in.n = n;
  in.k = k;
  in.groups = groups;
  in.used_blocks = used;
  std::uniform_int_distribution<int> pick(0, groups - 1), step(1, 64);
  for (int i = 0; i < blocks; ++i) in.block_groups.push_back(pick(gen));
  in.a = random_operand(g.in, blocks * g.bm * k, gen);
  in.b = random_operand(g.in, groups * (g.swiglu ? 2 : 1) * n * k, gen);
  if (g.out.is_float8()) in.scale_c = static_cast<float>(step(gen)) / 256;
  if (g.scaled) {
    in.scale_a = static_cast<float>(step(gen)) / 32;
    for (int i = 0; i < groups; ++i) in.scale_b.push_back(static_cast<float>(step(gen)) / 32);
  }
  if (g.row_scales) {
    for (int64_t r = 0; r < blocks * g.bm; ++r) in.row_scales.push_back(static_cast<float>(step(gen)) / 64);
  }
  if (g.block_scales) {
    in.blocks = random_block_scales(blocks * g.bm, n, k, gen, groups);
  }
  return in;
}
// samples::gemm_kernel(g) for a grouped g on `device`: C [blocks * bm, n]
// as f32 (NaN where nothing was written).
inline absl::StatusOr<std::vector<float>> run_grouped_gemm(const Device& device, const samples::GemmConfig& g,
                                                           int warps, const GroupedGemmInputs& in) {
  if (!(g.out == f32 || g.out == bf16 || g.out == f8e4m3)) {
    return absl::InvalidArgumentError("run_grouped_gemm: C must be f32, bf16 or f8e4m3");
  }
  const int64_t m = static_cast<int64_t>(in.block_groups.size()) * g.bm;
  const int32_t total = in.used_blocks * static_cast<int32_t>(g.bm);
  TESSEL_ASSIGN_OR_RETURN(Function fn, compile_for(device, samples::gemm_kernel(g), warps));
  TESSEL_ASSIGN_OR_RETURN(Buffer ab, put(device, in.a));
  TESSEL_ASSIGN_OR_RETURN(Buffer bb, put(device, in.b));
  TESSEL_ASSIGN_OR_RETURN(Buffer cb, nan_buffer(device, g.out, m * in.n));
  // (One value where an input is not taken: the kernel reads none.)
  auto floats = [&](const std::vector<float>& v) {
    return v.empty() ? put(device, &in.scale_a, 4) : put(device, v.data(), v.size() * 4);
  };
  TESSEL_ASSIGN_OR_RETURN(Buffer sa, put(device, &in.scale_a, 4));
  TESSEL_ASSIGN_OR_RETURN(Buffer sb, floats(in.scale_b));
  TESSEL_ASSIGN_OR_RETURN(Buffer sc, put(device, &in.scale_c, 4));
  samples::GemmRows rows;
  TESSEL_ASSIGN_OR_RETURN(rows.groups, put(device, in.block_groups.data(), in.block_groups.size() * 4));
  TESSEL_ASSIGN_OR_RETURN(rows.total, put(device, &total, 4));
  TESSEL_ASSIGN_OR_RETURN(rows.scales, floats(in.row_scales));
  samples::GemmBlockScales blocks;
  TESSEL_ASSIGN_OR_RETURN(blocks.a, floats(in.blocks.a));
  TESSEL_ASSIGN_OR_RETURN(blocks.b, floats(in.blocks.b));
  TESSEL_ASSIGN_OR_RETURN(samples::GemmMaps maps, samples::gemm_maps(device, g, ab, bb, cb, m, in.n, in.k, in.groups));
  const LaunchConfig launch = {.grid = samples::gemm_grid(g, m, in.n, device.num_compute_units()), .num_warps = warps};
  TESSEL_RETURN_IF_ERROR(fn.launch_packed(
      launch, samples::gemm_args(g, maps, m, in.n, in.k, sa, sa, sb, nullptr, &rows, &sc, nullptr, &blocks)));
  TESSEL_RETURN_IF_ERROR(device.synchronize());
  return download_f32(device, cb, g.out, m * in.n);
}
// The first element of `got` off its double reference (rows past the
// blocks in use: zero), or empty: within `tol` of sum |a b| times the
// scales (with a SwiGLU epilogue, that error carried through silu(g) u,
// and 2^-10 of the result for the fast exponential and division), plus
// C's rounding.
inline std::string grouped_gemm_mismatch(const samples::GemmConfig& g, const GroupedGemmInputs& in,
                                         const std::vector<float>& got, double tol) {
  const int64_t m = static_cast<int64_t>(in.block_groups.size()) * g.bm, b_rows = g.swiglu ? 2 * in.n : in.n;
  for (int64_t r = 0; r < m; ++r) {
    const int64_t grp = in.block_groups[r / g.bm];
    const bool used = r < in.used_blocks * g.bm;
    const double scale = g.scaled ? double{in.scale_a} * in.scale_b[grp] : 1.0;
    const double after = (g.row_scales ? double{in.row_scales[r]} : 1.0) / in.scale_c;
    // Row `row` of B's group times row r of A, with the scales, and its bound.
    const int64_t kb = (in.k + samples::kScaleBlock - 1) / samples::kScaleBlock;
    const int64_t group_blocks = (in.n + samples::kScaleBlock - 1) / samples::kScaleBlock * kb;
    auto product = [&](int64_t row) {
      Dot d;
      for (int64_t kk = 0; used && kk < in.k; ++kk) {
        double term = in.a.values[r * in.k + kk] * in.b.values[(grp * b_rows + row) * in.k + kk];
        if (g.block_scales) {
          const int64_t block = kk / samples::kScaleBlock;
          term *= double{in.blocks.a[block * m + r]} *
                  in.blocks.b[grp * group_blocks + row / samples::kScaleBlock * kb + block];
        }
        d.sum += term;
        d.size += std::abs(term);
      }
      return samples::Bounded{d.sum * scale, tol * d.size * std::abs(scale)};
    };
    for (int64_t col = 0; col < in.n; ++col) {
      samples::Bounded v = product(col);
      if (g.swiglu) {
        const samples::Bounded gate = v, up = product(in.n + col);
        v = samples::swiglu_reference(gate.value, up.value, gate.bound, up.bound);
        v.bound += std::ldexp(std::abs(v.value), -10);
      }
      double want = v.value * after;
      if (g.out == f8e4m3) want = std::clamp(want, -448.0, 448.0);
      const double bound =
          v.bound * std::abs(after) + samples::half_step(g.out, std::abs(want) + v.bound * std::abs(after)) + 1e-6;
      const float x = got[r * in.n + col];
      if (!(std::abs(x - want) <= bound)) return absl::StrCat("C[", r, ", ", col, "] = ", x, ", want ", want);
    }
  }
  return "";
}

// Pointer GEMMs whose rings fit sm_80's shared memory, with their warps.
inline constexpr std::pair<samples::PointerGemmConfig, int> kAmperePointerGemms[] = {
    {{.out = bf16, .stages = 2}, 8},
    {{.bm = 64, .out = f32, .stages = 3}, 4},
    {{.bn = 256, .in = f16, .out = f32, .stages = 2}, 8}};

// samples::pointer_gemm_kernel(g) on `device`: A [m, k] and B [n, k] of
// g.in, C [m, n] of g.out (f32 or bf16) returned as f32, NaN where the
// kernel wrote nothing.
inline absl::StatusOr<std::vector<float>> run_pointer_gemm(const Device& device, const samples::PointerGemmConfig& g,
                                                           const CompileOptions& options, int64_t m, int64_t n,
                                                           int64_t k, const Operand& a, const Operand& b) {
  if (!(g.out == f32 || g.out == bf16)) return absl::InvalidArgumentError("run_pointer_gemm: C must be f32 or bf16");
  TESSEL_ASSIGN_OR_RETURN(Function fn, compile_for(device, samples::pointer_gemm_kernel(g), options));
  TESSEL_ASSIGN_OR_RETURN(Buffer ab, put(device, a));
  TESSEL_ASSIGN_OR_RETURN(Buffer bb, put(device, b));
  TESSEL_ASSIGN_OR_RETURN(Buffer cb, nan_buffer(device, g.out, m * n));
  const LaunchConfig launch = {.grid = static_cast<int>(samples::pointer_gemm_grid(g, m, n)),
                               .num_warps = options.num_warps};
  TESSEL_RETURN_IF_ERROR(
      fn.launch(launch, ab, bb, cb, static_cast<int32_t>(m), static_cast<int32_t>(n), static_cast<int32_t>(k)));
  TESSEL_RETURN_IF_ERROR(device.synchronize());
  return download_f32(device, cb, g.out, m * n);
}
inline absl::StatusOr<std::vector<float>> run_pointer_gemm(const Device& device, const samples::PointerGemmConfig& g,
                                                           int warps, int64_t m, int64_t n, int64_t k, const Operand& a,
                                                           const Operand& b) {
  CompileOptions options;
  options.num_warps = warps;
  return run_pointer_gemm(device, g, options, m, n, k, a, b);
}

// A mixture of experts' GEMM on `device`: the n = tokens * top_k router
// choices `ids` grouped by samples::MoeAlign (blocks of g.bm), then
// samples::moe_gemm_kernel(g) over A [tokens, k] and W [experts, n_cols,
// k], with `weights` [n] f32 where g.routed_weights and the scales where
// g.scaled; C [n, n_cols] of g.out (f32, or bf16 returned as f32), NaN in
// the rows of dropped choices.
struct MoeProblem {
  int tokens, top_k, experts;
  int64_t n_cols, k;
};
struct MoeGemmInputs {
  std::vector<int32_t> ids;
  Operand a, w;
  std::vector<float> weights;  // [n], where g.routed_weights
  float scale_a = 1;           // where g.scaled
  std::vector<float> scale_w;  // [experts], where g.scaled
};
inline absl::StatusOr<std::vector<float>> run_moe_gemm(const Device& device, const samples::MoeGemmConfig& g, int warps,
                                                       const MoeProblem& p, const MoeGemmInputs& in) {
  if (!(g.out == f32 || g.out == bf16)) return absl::InvalidArgumentError("run_moe_gemm: C must be f32 or bf16");
  const int32_t n = p.tokens * p.top_k;
  TESSEL_ASSIGN_OR_RETURN(samples::MoeAlign align,
                          samples::MoeAlign::compile(device, p.experts, static_cast<int>(g.bm)));
  TESSEL_ASSIGN_OR_RETURN(Buffer bids, put(device, in.ids.data(), in.ids.size() * 4));
  TESSEL_ASSIGN_OR_RETURN(samples::MoeAlignBuffers al, align.buffers(device, n));
  TESSEL_RETURN_IF_ERROR(align.launch(bids, n, al));
  TESSEL_ASSIGN_OR_RETURN(Function fn, compile_for(device, samples::moe_gemm_kernel(g), warps));
  TESSEL_ASSIGN_OR_RETURN(Buffer ab, put(device, in.a));
  TESSEL_ASSIGN_OR_RETURN(Buffer wb, put(device, in.w));
  TESSEL_ASSIGN_OR_RETURN(Buffer cb, nan_buffer(device, g.out, n * p.n_cols));
  std::vector<KernelArg> args = {ab, wb, cb, al.sorted, al.block_experts, al.offsets};
  std::vector<Buffer> held;  // what the arguments point to, until the launch is done
  for (const auto& [wanted, values] :
       {std::pair{g.routed_weights, in.weights}, std::pair{g.scaled, std::vector<float>{in.scale_a}},
        std::pair{g.scaled, in.scale_w}}) {
    if (!wanted) continue;
    TESSEL_ASSIGN_OR_RETURN(held.emplace_back(), put(device, values.data(), values.size() * 4));
    args.push_back(held.back());
  }
  args.insert(args.end(), {n, p.top_k, p.experts, static_cast<int32_t>(p.n_cols), static_cast<int32_t>(p.k)});
  const LaunchConfig launch = {.grid = static_cast<int>(samples::moe_gemm_grid(g, n, p.experts, p.n_cols)),
                               .num_warps = warps};
  TESSEL_RETURN_IF_ERROR(fn.launch_packed(launch, args));
  TESSEL_RETURN_IF_ERROR(device.synchronize());
  return download_f32(device, cb, g.out, n * p.n_cols);
}

// The first element of run_moe_gemm's C off a double reference (the
// inputs' values, scaled and weighted as the kernel scales them), or a
// written row of a dropped choice; "" when there is none. The tolerance is
// C's dtype's, relative to 1 + |C|.
inline std::string moe_gemm_mismatch(const samples::MoeGemmConfig& g, const MoeProblem& p, const MoeGemmInputs& in,
                                     const std::vector<float>& got) {
  const int n = p.tokens * p.top_k;
  for (int i = 0; i < n; ++i) {
    const int32_t e = in.ids[i];
    for (int64_t col = 0; col < p.n_cols; ++col) {
      const float x = got[i * p.n_cols + col];
      if (e < 0 || e >= p.experts) {  // dropped: not written
        if (!std::isnan(x)) return absl::StrCat("C[", i, ", ", col, "], of a dropped choice, is ", x);
        continue;
      }
      double want = 0, magnitude = 0;
      for (int64_t kk = 0; kk < p.k; ++kk) {
        const double product = in.a.values[(i / p.top_k) * p.k + kk] * in.w.values[(e * p.n_cols + col) * p.k + kk];
        want += product;
        magnitude += std::abs(product);
      }
      double scale = 1;
      if (g.scaled) scale *= double{in.scale_a} * in.scale_w[e];
      if (g.routed_weights) scale *= in.weights[i];
      want *= scale;
      // Hopper's tensor cores sum fp8 products keeping about 14 bits, so
      // their error grows with the sum of |a * w|, not with the result.
      const double summing = g.in.is_float8() ? 0x1p-12 * magnitude * scale : 0;
      if (!(std::abs(x - want) <= (g.out == bf16 ? 1e-2 : 1e-4) * (std::abs(want) + 1) + summing)) {
        return absl::StrCat("C[", i, ", ", col, "] = ", x, ", want ", want);
      }
    }
  }
  return "";
}

// A whole MoE layer (samples::MoeLayer) on `device`, on random inputs
// scaled so that its activations stay near 1 (an fp8 layer's weights e4m3
// with a random scale per expert): the inputs as the kernels read them, and
// what the layer left (the router's logits, and its choices, weights,
// workspace and output).
struct MoeLayerRun {
  std::vector<float> x, gate, w1, w2;
  samples::MoeFp8Reference scales;  // an fp8 layer's
  std::vector<float> logits;
  samples::MoeLayerOutputs outputs;
};
inline absl::StatusOr<MoeLayerRun> run_moe_layer(const Device& device, const samples::MoeLayerConfig& c, int64_t tokens,
                                                 std::mt19937& gen) {
  TESSEL_ASSIGN_OR_RETURN(samples::MoeLayer layer, samples::MoeLayer::compile(device, c));
  TESSEL_ASSIGN_OR_RETURN(samples::MoeLayer::Workspace ws, layer.workspace(tokens));
  const int64_t e = c.experts, hid = c.hidden, inter = c.intermediate;
  const bool fp8 = c.up.in == f8e4m3;
  MoeLayerRun run;
  // `count` values of `d` uniform in [-scale, scale] (bf16 where scale is not 1).
  auto random = [&](std::vector<float>& values, DType d, int64_t count, double scale) -> absl::StatusOr<Buffer> {
    Operand op = random_operand(d, std::max<int64_t>(count, 1), gen);
    if (scale != 1) {
      for (size_t i = 0; i < op.values.size(); ++i) {
        const uint16_t bits = float_to_bf16(static_cast<float>(op.values[i] * scale));
        std::memcpy(&op.bytes[i * 2], &bits, 2);
        op.values[i] = bf16_to_float(bits);
      }
    }
    values.assign(op.values.begin(), op.values.begin() + count);
    return put(device, op);
  };
  // An fp8 layer's weights are e4m3 in [-1, 1], their experts' scales as
  // the bf16 layer's ranges; x and a are quantized to steps of 1/64 and
  // 1/32.
  const double w1_range = 2 * std::sqrt(3.0 / hid), w2_range = std::sqrt(3.0 / inter);
  const DType wd = fp8 ? f8e4m3 : bf16;
  TESSEL_ASSIGN_OR_RETURN(Buffer x, random(run.x, bf16, tokens * hid, 1.0));
  TESSEL_ASSIGN_OR_RETURN(Buffer gate, random(run.gate, bf16, e * hid, 0.5));
  TESSEL_ASSIGN_OR_RETURN(Buffer w1, random(run.w1, wd, e * 2 * inter * hid, fp8 ? 1.0 : w1_range));
  TESSEL_ASSIGN_OR_RETURN(Buffer w2, random(run.w2, wd, e * hid * inter, fp8 ? 1.0 : w2_range));
  TESSEL_ASSIGN_OR_RETURN(Buffer out, nan_buffer(device, bf16, std::max<int64_t>(tokens * hid, 1)));
  if (fp8) {
    std::uniform_real_distribution<float> around(0.5f, 1.5f);
    run.scales = {.x = 1.0f / 64, .a = 1.0f / 32, .w1 = {}, .w2 = {}};
    for (int64_t i = 0; i < e; ++i) {
      run.scales.w1.push_back(static_cast<float>(w1_range) * around(gen));
      run.scales.w2.push_back(static_cast<float>(w2_range) * around(gen));
    }
    samples::MoeLayer::Fp8Scales scales;
    TESSEL_ASSIGN_OR_RETURN(scales.x, put(device, &run.scales.x, 4));
    TESSEL_ASSIGN_OR_RETURN(scales.a, put(device, &run.scales.a, 4));
    TESSEL_ASSIGN_OR_RETURN(scales.w1, put(device, run.scales.w1.data(), e * 4));
    TESSEL_ASSIGN_OR_RETURN(scales.w2, put(device, run.scales.w2.data(), e * 4));
    TESSEL_RETURN_IF_ERROR(layer.launch(x, static_cast<int32_t>(tokens), gate, w1, w2, scales, out, ws));
  } else {
    TESSEL_RETURN_IF_ERROR(layer.launch(x, static_cast<int32_t>(tokens), gate, w1, w2, out, ws));
  }
  TESSEL_RETURN_IF_ERROR(device.synchronize());
  TESSEL_ASSIGN_OR_RETURN(run.logits, download_f32(device, ws.logits, f32, tokens * e));
  TESSEL_ASSIGN_OR_RETURN(run.outputs, samples::moe_layer_outputs(device, c, tokens, ws, out));
  return run;
}

// The first thing wrong with `run` (a logit off the double reference, a
// choice or weight other than the host router's from the run's own logits,
// a stage of a token's pass off samples::moe_check_layer's bounds), or
// empty.
inline std::string moe_layer_mismatch(const samples::MoeLayerConfig& c, int64_t tokens, const MoeLayerRun& run) {
  const int64_t e = c.experts, hid = c.hidden;
  const std::vector<double> logits = samples::moe_logits_reference(run.x, run.gate, tokens, e, hid);
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!(std::abs(run.logits[i] - logits[i]) <= 1e-4 * (std::abs(logits[i]) + 1))) {
      return absl::StrCat("logit ", i / e, ", ", i % e, " = ", run.logits[i], ", want ", logits[i]);
    }
  }
  for (int64_t t = 0; t < tokens; ++t) {
    const samples::RouterPick pick = samples::router_reference(&run.logits[t * e], c.experts, c.top_k);
    for (int j = 0; j < c.top_k; ++j) {
      const int64_t i = t * c.top_k + j;
      if (run.outputs.ids[i] != pick.ids[j] || !(std::abs(run.outputs.weights[i] - pick.weights[j]) <= 1e-5)) {
        return absl::StrCat("token ", t, "'s choice ", j, " is expert ", run.outputs.ids[i], " at ",
                            run.outputs.weights[i], ", want ", pick.ids[j], " at ", pick.weights[j]);
      }
    }
  }
  return samples::moe_check_layer(c, run.x, run.outputs, run.w1, run.w2, c.up.in == f8e4m3 ? &run.scales : nullptr)
      .first;
}

// Attention on `device` (samples::attention_kernel(c), as many warps as it
// takes, compiled for `arch` where given): O [heads, len, d] of c.out (f32, or bf16 returned as f32), NaN
// where the kernel wrote nothing.
inline absl::StatusOr<std::vector<float>> run_attention(const Device& device, const samples::AttnConfig& c,
                                                        int64_t heads, int64_t len, float scale, const Operand& q,
                                                        const Operand& k, const Operand& v,
                                                        const std::string& arch = "") {
  if (!(c.out == f32 || c.out == bf16)) return absl::InvalidArgumentError("run_attention: O must be f32 or bf16");
  CompileOptions options;
  options.num_warps = samples::attention_warps(c);
  options.arch = arch;
  TESSEL_ASSIGN_OR_RETURN(Function fn, compile_for(device, samples::attention_kernel(c), options));
  TESSEL_ASSIGN_OR_RETURN(Buffer qb, put(device, q));
  TESSEL_ASSIGN_OR_RETURN(Buffer kb, put(device, k));
  TESSEL_ASSIGN_OR_RETURN(Buffer vb, put(device, v));
  const int64_t n = heads * len * c.d;
  TESSEL_ASSIGN_OR_RETURN(Buffer ob, nan_buffer(device, c.out, n));
  TESSEL_ASSIGN_OR_RETURN(samples::AttnMaps maps,
                          samples::attention_maps(maps_for(device, arch), c, qb, kb, vb, ob, heads, len));
  TESSEL_ASSIGN_OR_RETURN(LaunchConfig launch, samples::attention_launch(fn, c, heads, len));
  TESSEL_RETURN_IF_ERROR(samples::launch_attention(fn, launch, maps, heads, len, scale));
  TESSEL_RETURN_IF_ERROR(device.synchronize());
  return download_f32(device, ob, c.out, n);
}

// The backward pass on `device` as a framework runs it: the forward
// (attention_config's, with c's dtypes, O rounded to c.in and the
// log2-sum-exp kept), D from O and dO, then the gradients (c.out, returned
// as f32; NaN where the kernel wrote nothing) and the forward's lse.
struct AttnGradsF {
  std::vector<float> dq, dk, dv, lse2;
};
inline absl::StatusOr<AttnGradsF> run_attention_bwd(const Device& device, const samples::AttnBwdConfig& c,
                                                    int64_t heads, int64_t len, float scale, const Operand& q,
                                                    const Operand& k, const Operand& v, const Operand& dout) {
  if (!(c.out == f32 || c.out == bf16)) return absl::InvalidArgumentError("run_attention_bwd: dQ must be f32 or bf16");
  const int64_t n = heads * len * c.d, kv_n = n / c.group;
  samples::AttnConfig fc = samples::attention_config(c.d, c.causal);
  fc.in = fc.out = c.in;
  fc.group = c.group;
  fc.lse = true;
  TESSEL_ASSIGN_OR_RETURN(Function forward,
                          compile_for(device, samples::attention_kernel(fc), samples::attention_warps(fc)));
  TESSEL_ASSIGN_OR_RETURN(samples::AttnBwdKernels backward, samples::compile_attention_bwd(device, c));

  TESSEL_ASSIGN_OR_RETURN(Buffer qb, put(device, q));
  TESSEL_ASSIGN_OR_RETURN(Buffer kb, put(device, k));
  TESSEL_ASSIGN_OR_RETURN(Buffer vb, put(device, v));
  TESSEL_ASSIGN_OR_RETURN(Buffer dob, put(device, dout));
  TESSEL_ASSIGN_OR_RETURN(Buffer ob, device.allocate(n * c.in.bytes()));
  TESSEL_ASSIGN_OR_RETURN(Buffer lseb, nan_buffer(device, f32, heads * len));
  std::vector<Buffer> grads;
  for (int g = 0; g < 3; ++g) {
    TESSEL_ASSIGN_OR_RETURN(Buffer b, nan_buffer(device, c.out, g == 0 ? n : kv_n));
    grads.push_back(std::move(b));
  }

  TESSEL_ASSIGN_OR_RETURN(samples::AttnMaps fmaps, samples::attention_maps(device, fc, qb, kb, vb, ob, heads, len));
  TESSEL_ASSIGN_OR_RETURN(LaunchConfig flaunch, samples::attention_launch(forward, fc, heads, len));
  TESSEL_RETURN_IF_ERROR(samples::launch_attention(forward, flaunch, fmaps, heads, len, scale, &lseb));
  TESSEL_ASSIGN_OR_RETURN(
      samples::AttnBwdPlan plan,
      samples::plan_attention_bwd(device, backward, {&qb, &kb, &vb, &ob, &lseb, &dob, &grads[0], &grads[1], &grads[2]},
                                  heads, len, scale));
  TESSEL_RETURN_IF_ERROR(samples::launch_attention_bwd(backward, plan));
  TESSEL_RETURN_IF_ERROR(device.synchronize());

  AttnGradsF out;
  TESSEL_ASSIGN_OR_RETURN(out.lse2, download_f32(device, lseb, f32, heads * len));
  TESSEL_ASSIGN_OR_RETURN(out.dq, download_f32(device, grads[0], c.out, n));
  TESSEL_ASSIGN_OR_RETURN(out.dk, download_f32(device, grads[1], c.out, kv_n));
  TESSEL_ASSIGN_OR_RETURN(out.dv, download_f32(device, grads[2], c.out, kv_n));
  return out;
}

}  // namespace tessel::matmul_cases
