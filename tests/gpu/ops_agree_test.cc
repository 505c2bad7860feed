// Every op family on the device under test (cuda:0, or the device that
// TESSEL_GPU_TEST_DEVICE names, e.g. host:1, to try these without a GPU) and
// on host:2 with the same fresh random inputs. Results agree bit for bit,
// except that any NaN matches any NaN (GPUs canonicalise NaN payloads, x86
// propagates them), and except exp, log and rsqrt (SFU approximations on
// NVIDIA) and float sums in reductions, dot products and atomics (their
// order of summation may differ), which agree within a relative tolerance
// per dtype. Every array is followed by a poisoned guard that must survive
// on both devices, so masks and TMA clipping are checked too.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "dsl/builder.h"
#include "dsl/ops.h"
#include "dsl/random.h"
#include "gtest/gtest.h"
#include "runtime/device.h"
#include "tests/gpu/gpu_test_util.h"

namespace tessel::gpu_test {
namespace {

using Bytes = std::vector<uint8_t>;
constexpr uint8_t kPoison = 0xA5;
constexpr size_t kGuardBytes = 4096;

uint64_t random_bits(Rng& rng) { return (uint64_t{rng.gen()()} << 32) | rng.gen()(); }

// Element i of an array of `d`, as the low bits of a u64 (little-endian).
uint64_t get_bits(DType d, const Bytes& b, size_t i) {
  uint64_t v = 0;
  std::memcpy(&v, &b[i * d.bytes()], d.bytes());
  return v;
}
void set_bits(DType d, Bytes& b, size_t i, uint64_t v) { std::memcpy(&b[i * d.bytes()], &v, d.bytes()); }

struct FloatFormat {
  int exp_bits, frac_bits;
};
FloatFormat format_of(DType d) {
  if (d == f16) return {5, 10};
  if (d == bf16) return {8, 7};
  if (d == f32) return {8, 23};
  return {11, 52};
}

double to_double(DType d, uint64_t bits) {
  const auto [eb, fb] = format_of(d);
  const int max_field = (1 << eb) - 1, bias = max_field / 2;
  const int e = static_cast<int>(bits >> fb) & max_field;
  const uint64_t frac = bits & ((uint64_t{1} << fb) - 1);
  const double magnitude = e == max_field ? (frac != 0 ? NAN : INFINITY)
                                          : std::ldexp(static_cast<double>(frac | (e != 0 ? uint64_t{1} << fb : 0)),
                                                       std::max(e, 1) - bias - fb);
  return (bits >> (eb + fb)) & 1 ? -magnitude : magnitude;
}

// How random elements are drawn. Floats: magnitudes in [2^min_exp, 2^max_exp)
// (clipped to the normal range), random fractions, with `edges` one in ten a
// signed zero, an infinity, a NaN or a subnormal. Integers: one in eight an
// extreme (0, 1, all ones, the signed minimum or maximum), two in [-9, 9],
// the rest uniform over the width.
struct Draw {
  int min_exp = -6, max_exp = 7;
  bool edges = true;
  bool negatives = true;
};

uint64_t random_element(DType d, Rng& rng, const Draw& draw) {
  const uint64_t r = random_bits(rng);
  if (d.is_int()) {
    const uint64_t top = uint64_t{1} << (d.bits() - 1), extremes[] = {0, 1, ~uint64_t{0}, top, top - 1};
    const int kind = rng.uniform_int(0, 7);
    if (kind == 0) return extremes[r % 5];
    return kind <= 2 ? static_cast<uint64_t>(rng.uniform_int(-9, 9)) : r;
  }
  const auto [eb, fb] = format_of(d);
  const int max_field = (1 << eb) - 1, bias = max_field / 2;
  const uint64_t frac = r & ((uint64_t{1} << fb) - 1), inf = uint64_t(max_field) << fb;
  const uint64_t sign = draw.negatives && (r >> 63) != 0 ? uint64_t{1} << (eb + fb) : 0;
  if (draw.edges && rng.uniform_int(0, 9) == 0) {
    const uint64_t edges[] = {sign, sign | inf, sign | inf | uint64_t{1} << (fb - 1) | frac, sign | frac | 1};
    return edges[rng.uniform_int(0, 3)];
  }
  const int e = std::clamp(rng.uniform_int(draw.min_exp, draw.max_exp - 1), 1 - bias, bias);
  return sign | uint64_t(e + bias) << fb | frac;
}

Bytes random_array(DType d, int64_t n, Rng& rng, const Draw& draw = {}) {
  Bytes b(n * d.bytes());
  for (int64_t i = 0; i < n; ++i) set_bits(d, b, i, random_element(d, rng, draw));
  return b;
}

// A launch argument of dtype `d` holding `bits`.
KernelArg scalar_arg(DType d, uint64_t bits) {
  auto as = [&]<class T>(T v) {
    std::memcpy(&v, &bits, sizeof(T));
    return KernelArg(v);
  };
  if (d == i8) return as(int8_t{});
  if (d == i32) return as(int32_t{});
  if (d == u32) return as(uint32_t{});
  if (d == i64) return as(int64_t{});
  if (d == u64) return as(uint64_t{});
  if (d == f16) return KernelArg(Half{static_cast<uint16_t>(bits)});
  if (d == bf16) return KernelArg(BFloat16{static_cast<uint16_t>(bits)});
  if (d == f32) return as(float{});
  return as(double{});
}

// How closely two results must agree: bit for bit, except that any NaN
// matches any NaN; `any_zero_sign` lets +0 match -0 (min and max may return
// either); `rel` > 0 accepts |got - want| <= rel * max(|want|, floor). A
// poisoned element never matches a written one.
struct Tolerance {
  double rel = 0, floor = 0;
  bool any_zero_sign = false;
};

// Exp, log and rsqrt: a few f32 ulps, then one rounding to narrow dtypes.
Tolerance approximate(DType d) { return {.rel = d == f16 ? 1e-3 : d == bf16 ? 8e-3 : d == f32 ? 1e-5 : 1e-12}; }
// Sums of terms below 2 in magnitude, accumulated in f32 (f64 for f64) and
// rounded once to narrow dtypes; the floor keeps cancellation from failing.
Tolerance summed(DType d) {
  return {.rel = d == f16 ? 2e-3 : d == bf16 ? 1.6e-2 : d == f32 ? 1e-5 : 1e-12, .floor = 1};
}

::testing::AssertionResult agree(DType d, const Bytes& got, const Bytes& want, const Tolerance& tol = {}) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "sizes differ: " << got.size() << " vs " << want.size() << " bytes";
  }
  uint64_t poison = 0;
  std::memset(&poison, kPoison, d.bytes());
  const size_t n = got.size() / d.bytes();
  size_t bad = 0;
  ::testing::Message first;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t g = get_bits(d, got, i), w = get_bits(d, want, i);
    if (g == w) continue;
    if (d.is_float() && g != poison && w != poison) {
      const double gv = to_double(d, g), wv = to_double(d, w);
      if (std::isnan(gv) && std::isnan(wv)) continue;
      if (tol.any_zero_sign && gv == 0 && wv == 0) continue;
      if (std::abs(gv - wv) <= tol.rel * std::max(std::abs(wv), tol.floor)) continue;
    }
    if (bad++ >= 5) continue;
    first << " [" << i << "] 0x" << std::hex << g << " vs 0x" << w << std::dec;
    if (d.is_float()) first << " (" << to_double(d, g) << " vs " << to_double(d, w) << ")";
    first << ";";
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << n << " " << d.name() << " elements differ:" << first;
}

// The row-major index of each element of a tile of `shape` (i32).
Value index_tile(KernelBuilder& k, const Shape& shape) {
  Value idx;
  int64_t stride = 1;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    Value r = k.arange(0, shape[d]) * static_cast<int>(stride);
    for (int e = 0; e < static_cast<int>(shape.size()); ++e) {
      if (e != d) r = expand_dims(r, e);
    }
    idx = idx.valid() ? idx + r : r;
    stride *= shape[d];
  }
  return broadcast_to(idx, shape);
}

// A tile dimension up to 2^max_log2, often not a power of two.
int tile_dim(Rng& rng, int max_log2) { return tile_side(rng, 1 << rng.uniform_int(0, max_log2)); }

// A result that must agree between the devices: array `index` of the runs.
struct Check {
  std::string what;
  DType dtype;
  int index;
  Tolerance tol;
};

// A kernel under test with its launch arguments, declared together so that
// they follow its signature, and the results to compare. Arrays travel with
// a poisoned guard behind them that must survive the kernel.
class Case {
 public:
  explicit Case(std::string name) : k_(std::move(name)) {}
  KernelBuilder& k() { return k_; }
  const std::vector<Check>& checks() const { return checks_; }

  // A pointer to an array holding `init`; with `what`, its final contents
  // must agree between the devices.
  Value array(DType d, Bytes init, std::string what = "", Tolerance tol = {}) {
    return add(d, std::move(init), k_.arg(ptr(d), name()), std::move(what), tol, {}, {});
  }
  // `count` poisoned elements whose final contents must agree.
  Value output(DType d, int64_t count, std::string what, Tolerance tol = {}) {
    return array(d, Bytes(count * d.bytes(), kPoison), std::move(what), tol);
  }
  // A tensor map of `box` over an array holding a row-major tensor of `dims`.
  Value tensor_map(DType d, Bytes init, Shape dims, const Shape& box, std::string what = "",
                   Swizzle swizzle = Swizzle::kNone, Tolerance tol = {}) {
    Value map = add(d, std::move(init), k_.tensor_map(d, box, name(), swizzle), std::move(what), tol, std::move(dims),
                    box);
    args_.back().swizzle = swizzle;
    return map;
  }
  Value scalar(KernelArg v) {
    Value arg = k_.arg(v.dtype(), name());
    args_.push_back({.arg = arg, .scalar = v});
    return arg;
  }
  // Stores `v` into an output of its own that must agree: a tile whole, in
  // row-major order.
  void out(std::string what, const Value& v, Tolerance tol = {}) {
    const Type t = v.type();
    Value o = output(t.dtype(), t.is_tile() ? t.numel() : 1, std::move(what), tol);
    store(t.is_tile() ? o + index_tile(k_, t.shape()) : o, v);
  }
  // Where run() returns the array behind the argument `arg`.
  int index(const Value& arg) const {
    for (const Arg& a : args_) {
      if (a.arg.id() == arg.id()) return a.array;
    }
    return -1;
  }

  // Every array's contents after running `kernel` (built from k()) on `device`.
  absl::StatusOr<std::vector<Bytes>> run(const Device& device, const Kernel& kernel, Grid grid) const {
    TESSEL_ASSIGN_OR_RETURN(Function fn, device.compile(kernel));
    std::vector<Buffer> buffers;
    for (Bytes a : arrays_) {
      a.resize(a.size() + kGuardBytes, kPoison);
      TESSEL_ASSIGN_OR_RETURN(Buffer b, upload(device, a));
      buffers.push_back(std::move(b));
    }
    std::vector<TensorMap> maps;
    maps.reserve(args_.size());  // the packed arguments point into it
    std::vector<KernelArg> packed;
    for (const Arg& a : args_) {
      if (a.scalar.has_value()) {
        packed.push_back(*a.scalar);
      } else if (a.box.empty()) {
        packed.emplace_back(buffers[a.array]);
      } else {
        TESSEL_ASSIGN_OR_RETURN(TensorMap m,
                                device.tensor_map(a.dtype, buffers[a.array], a.dims, a.box, a.swizzle));
        packed.emplace_back(maps.emplace_back(std::move(m)));
      }
    }
    TESSEL_RETURN_IF_ERROR(fn.launch_packed({.grid = grid}, packed));
    TESSEL_RETURN_IF_ERROR(device.synchronize());
    std::vector<Bytes> out;
    for (size_t i = 0; i < arrays_.size(); ++i) {
      const size_t n = arrays_[i].size();
      TESSEL_ASSIGN_OR_RETURN(Bytes all, download<uint8_t>(device, buffers[i], n + kGuardBytes));
      auto past = std::find_if(all.begin() + n, all.end(), [](uint8_t b) { return b != kPoison; });
      if (past != all.end()) {
        return absl::InternalError(absl::StrCat("the kernel wrote byte ", past - all.begin() - n,
                                                " past the end of array ", i, " (", n, " bytes)"));
      }
      all.resize(n);
      out.push_back(std::move(all));
    }
    return out;
  }

 private:
  struct Arg {
    Value arg;
    int array = -1;
    std::optional<KernelArg> scalar{};
    DType dtype{};
    Shape dims{}, box{};  // tensor maps
    Swizzle swizzle = Swizzle::kNone;
  };
  std::string name() const { return absl::StrCat("a", args_.size()); }
  Value add(DType d, Bytes init, Value arg, std::string what, Tolerance tol, Shape dims, Shape box) {
    const int index = static_cast<int>(arrays_.size());
    arrays_.push_back(std::move(init));
    args_.push_back({.arg = arg, .array = index, .dtype = d, .dims = std::move(dims), .box = std::move(box)});
    if (!what.empty()) checks_.push_back({std::move(what), d, index, tol});
    return arg;
  }

  KernelBuilder k_;
  std::vector<Bytes> arrays_;
  std::vector<Arg> args_;
  std::vector<Check> checks_;
};

constexpr int kBlock = 128;

// An elementwise kernel over n elements, n in [1, 5 blocks] and not a
// multiple of the block, one block per program; the block 128 elements,
// or one of a size that is not a power of two.
class Elementwise : public Case {
 public:
  Elementwise(std::string name, Rng& rng)
      : Elementwise(std::move(name), rng, std::array{kBlock, kBlock, 96, 200}[rng.uniform_int(0, 3)]) {}

  int n() const { return n_; }
  int block() const { return block_; }
  Grid grid() const { return (n_ + block_ - 1) / block_; }
  const Value& offs() const { return offs_; }
  const Value& mask() const { return mask_; }
  // The block of an array of n elements holding `init`; `other` past n.
  Value in(DType d, Bytes init, const Operand& other) { return load(array(d, std::move(init)) + offs_, mask_, other); }
  // Stores the block `v` into an output of n elements that must agree.
  void out(std::string what, const Value& v, Tolerance tol = {}) {
    store(output(v.type().dtype(), n_, std::move(what), tol) + offs_, v, mask_);
  }

 private:
  // The kernel's name says the block.
  Elementwise(std::string name, Rng& rng, int block)
      : Case(absl::StrCat(name, "_block", block)), block_(block), n_(rng.uniform_int(1, 5 * block)) {
    if (n_ % block_ == 0) --n_;
    offs_ = k().program_id() * block_ + k().arange(0, block_);  // [B] i32
    mask_ = offs_ < scalar(n_);
  }

  int block_, n_;
  Value offs_, mask_;
};

class OpsAgree : public gpu_test::AgreeTest {
 protected:
  // The arrays of a case after running on each device (the one under test first).
  using Runs = std::array<std::vector<Bytes>, 2>;

  // Runs `c` on the device under test and on the host and compares its
  // checks; nothing after a failure.
  std::optional<Runs> run(Case& c, Grid grid) const {
    absl::StatusOr<Kernel> kernel = c.k().build();
    EXPECT_TRUE(kernel.ok()) << kernel.status();
    if (!kernel.ok()) return std::nullopt;
    Runs arrays;
    for (int i = 0; i < 2; ++i) {
      absl::StatusOr<std::vector<Bytes>> r = c.run(devices_[i], *kernel, grid);
      EXPECT_TRUE(r.ok()) << devices_[i].name() << ": " << r.status();
      if (!r.ok()) return std::nullopt;
      arrays[i] = *std::move(r);
    }
    for (const Check& check : c.checks()) {
      EXPECT_TRUE(agree(check.dtype, arrays[0][check.index], arrays[1][check.index], check.tol))
          << check.what << ": " << devices_[0].name() << " against host:2";
    }
    return arrays;
  }

  Rng rng_;
};

// The elementwise families and reductions, once per dtype.
class PerDtype : public OpsAgree, public ::testing::WithParamInterface<DType> {};
INSTANTIATE_TEST_SUITE_P(OpsAgree, PerDtype, ::testing::Values(i8, i32, u32, i64, f16, bf16, f32, f64),
                         [](const ::testing::TestParamInfo<DType>& info) { return std::string(info.param.name()); });

// Arithmetic, min/max, bitwise ops, shifts by up to the width + 3, select,
// a scalar splat and the comparisons. x / 0, x % 0 and MIN / -1 are among
// the operands, and for f32 and f64 a remainder whose quotient rounds up.
TEST_P(PerDtype, BinaryOpsSelectAndComparisons) {
  const DType d = GetParam();
  TESSEL_TRACE_SEED(rng_);
  Elementwise e("binary", rng_);
  const int n = e.n();
  Bytes xs = random_array(d, n, rng_), ys = random_array(d, n, rng_), amounts(n * d.bytes()), picks(n);
  for (int i = 0; i < n; ++i) {
    picks[i] = rng_.uniform_int(0, 1);
    if (d.is_int()) set_bits(d, amounts, i, rng_.uniform_int(0, d.bits() + 3));
  }
  if (n > 2) {
    set_bits(d, ys, 0, 0);
    if (d.is_int()) {
      set_bits(d, xs, 1, uint64_t{1} << (d.bits() - 1));
      set_bits(d, ys, 1, ~uint64_t{0});
    }
    if (d == f32 || d == f64) {  // 5.5 / 1.1 rounds up to 5, which x - trunc(x / y) * y gets wrong
      set_bits(d, xs, 2, d == f32 ? std::bit_cast<uint32_t>(5.5f) : std::bit_cast<uint64_t>(5.5));
      set_bits(d, ys, 2, d == f32 ? std::bit_cast<uint32_t>(1.1f) : std::bit_cast<uint64_t>(1.1));
    }
  }
  Value x = e.in(d, xs, 1), y = e.in(d, ys, 1), pick = e.in(i1, picks, 0);  // [B]
  Value s = e.scalar(scalar_arg(d, random_element(d, rng_, {})));
  e.out("x + y", x + y);
  e.out("x - y", x - y);
  e.out("x * y", x * y);
  e.out("x / y", x / y);
  e.out("x % y", x % y);
  e.out("minimum", minimum(x, y), {.any_zero_sign = true});
  e.out("maximum", maximum(x, y), {.any_zero_sign = true});
  e.out("select(pick, x, y)", select(pick, x, y));
  e.out("select(x < y, y, x)", select(x < y, y, x));
  e.out("x - scalar", x - s);
  e.out("x == y", x == y);
  e.out("x != y", x != y);
  e.out("x < y", x < y);
  e.out("x <= y", x <= y);
  e.out("x > y", x > y);
  e.out("x >= y", x >= y);
  if (d.is_int()) {
    Value a = e.in(d, amounts, 0);  // [B]
    e.out("x & y", x & y);
    e.out("x | y", x | y);
    e.out("x ^ y", x ^ y);
    e.out("x << a", x << a);
    e.out("x >> a", x >> a);
  }
  run(e, e.grid());
}

// neg, not and abs; floor, sqrt, fma, and the approximated rsqrt, exp and
// log (exp of |x| < 4, log away from 1 where its relative error would be
// large); f64 exp and log are one expansion on every target (math_f64.cc).
TEST_P(PerDtype, UnaryOpsAndMathFunctions) {
  const DType d = GetParam();
  TESSEL_TRACE_SEED(rng_);
  Elementwise e("unary", rng_);
  Value x = e.in(d, random_array(d, e.n(), rng_, {.min_exp = -12, .max_exp = 12}), 1);  // [B]
  e.out("-x", -x);
  e.out("abs", abs(x));
  if (d.is_int()) {
    e.out("~x", ~x);
  } else {
    Bytes logs(e.n() * d.bytes());
    for (int i = 0; i < e.n(); ++i) {
      set_bits(d, logs, i,
               random_element(d, rng_, i % 2 == 0 ? Draw{1, 14, false, false} : Draw{-14, -1, false, false}));
    }
    Value exps = e.in(d, random_array(d, e.n(), rng_, {.max_exp = 2, .edges = false}), 0);  // [B]
    e.out("floor", floor(x));
    e.out("sqrt", sqrt(x));
    e.out("fma", fma(x, exps, e.in(d, random_array(d, e.n(), rng_), 0)));
    e.out("rsqrt", rsqrt(x), approximate(d));
    e.out("exp", exp(exps), approximate(d));
    e.out("log", log(e.in(d, logs, 1)), approximate(d));
  }
  run(e, e.grid());
}

// The dtype to every dtype (and i1). Float sources reach past the i64 range
// (saturating casts) and hold NaN, infinities and exact ties of every
// narrower float format (rounding to nearest even).
TEST_P(PerDtype, CastsToEveryDtype) {
  const DType from = GetParam();
  TESSEL_TRACE_SEED(rng_);
  Elementwise e("cast", rng_);
  Bytes xs = random_array(from, e.n(), rng_, {.min_exp = -10, .max_exp = 70});
  if (from.is_float()) {
    std::vector<int> dropped;  // fraction bits that a narrower format drops
    for (DType to : {f16, bf16, f32}) {
      const int drop = format_of(from).frac_bits - format_of(to).frac_bits;
      if (drop > 0) dropped.push_back(drop);
    }
    for (int i = 0; !dropped.empty() && i < e.n(); i += 2) {
      const int drop = dropped[i / 2 % dropped.size()];
      const uint64_t low = (uint64_t{1} << drop) - 1;
      set_bits(from, xs, i, (get_bits(from, xs, i) & ~low) | (uint64_t{1} << (drop - 1)));
    }
  }
  Value x = e.in(from, xs, 0);  // [B]
  for (DType to : {i1, i8, i32, u32, i64, f16, bf16, f32, f64}) e.out(absl::StrCat("cast to ", to.name()), cast(x, to));
  for (DType to : {i8, i16, u16, i32, u32, i64, f16, bf16, f32, f64}) {
    if (to != from && to.bits() == from.bits()) e.out(absl::StrCat("bitcast to ", to.name()), bitcast(x, to));
  }
  run(e, e.grid());
}

// sum, max, min, argmax and argmin of a random [P, Q, R] tile along each of
// its axes, of its [P*Q, R] reshape and of its flattened form (to a scalar).
TEST_P(PerDtype, ReductionsAlongEveryAxis) {
  const DType d = GetParam();
  TESSEL_TRACE_SEED(rng_);
  const Shape shape = {tile_dim(rng_, 3), tile_dim(rng_, 4), tile_dim(rng_, 4)};
  const int64_t count = numel(shape);
  SCOPED_TRACE(shape_str(shape));
  Case c("reduce");
  // Sums get finite terms below 2; max and min see NaN and infinities too.
  Value xs = c.array(d, random_array(d, count, rng_, {.max_exp = 1, .edges = false}));
  Value ms = c.array(d, random_array(d, count, rng_));
  for (const Shape& s : {Shape{count}, Shape{shape[0] * shape[1], shape[2]}, shape}) {
    Value x = load(xs + index_tile(c.k(), s)), m = load(ms + index_tile(c.k(), s));  // s
    for (int axis = 0; axis < static_cast<int>(s.size()); ++axis) {
      const std::string where = absl::StrCat(" of ", shape_str(s), " along axis ", axis);
      c.out("sum" + where, sum(x, axis), d.is_float() ? summed(d) : Tolerance{});
      c.out("max" + where, max(m, axis), {.any_zero_sign = true});
      c.out("min" + where, min(m, axis), {.any_zero_sign = true});
      c.out("argmax" + where, argmax(m, axis));
      c.out("argmin" + where, argmin(m, axis));
    }
  }
  run(c, 1);
}

// Masked loads with a literal and a tile `other`, and masked stores: lanes
// past n read `other`; masked-off elements and all past n keep their poison.
TEST_P(PerDtype, MaskedLoadsAndStores) {
  const DType d = GetParam();
  TESSEL_TRACE_SEED(rng_);
  Elementwise e("masked", rng_);
  const int lanes = e.grid().dims[0] * e.block();
  Bytes picks(lanes);
  for (uint8_t& p : picks) p = rng_.uniform_int(0, 1);
  Value x = e.array(d, random_array(d, e.n(), rng_)), other = e.array(d, random_array(d, lanes, rng_));
  Value both = e.mask() & load(e.array(i1, picks) + e.offs());
  Value v = load(x + e.offs(), e.mask(), 7), u = load(x + e.offs(), both, load(other + e.offs()));  // [B]
  store(e.output(d, lanes, "literal other") + e.offs(), v);
  store(e.output(d, lanes, "tile other") + e.offs(), u);
  e.out("store masked past n", v);
  store(e.output(d, e.n(), "store masked per lane") + e.offs(), u, both);
  run(e, e.grid());
}

// [N, 1] against [1, M] tiles, a scalar splat, full, expand_dims, reshape,
// and trans of a 2-D tile and of a 3-D tile in every other axis order.
TEST_F(OpsAgree, BroadcastExpandDimsReshapeTrans) {
  TESSEL_TRACE_SEED(rng_);
  for (DType d : {i8, bf16, f32, f64}) {
    const int rows = tile_dim(rng_, 6), cols = tile_dim(rng_, 6);
    const Shape cube = {tile_dim(rng_, 3), tile_dim(rng_, 4), tile_dim(rng_, 4)};
    SCOPED_TRACE(absl::StrCat(d.name(), " ", rows, "x", cols, ", ", shape_str(cube)));
    Case c("shapes");
    KernelBuilder& k = c.k();
    Value col = expand_dims(load(c.array(d, random_array(d, rows, rng_)) + k.arange(0, rows)), 1);  // [N, 1]
    Value row = expand_dims(load(c.array(d, random_array(d, cols, rng_)) + k.arange(0, cols)), 0);  // [1, M]
    Value x = load(c.array(d, random_array(d, rows * cols, rng_)) + index_tile(k, {rows, cols}));   // [N, M]
    Value t = load(c.array(d, random_array(d, numel(cube), rng_)) + index_tile(k, cube));           // [P, Q, R]
    Value s = c.scalar(scalar_arg(d, random_element(d, rng_, {})));
    c.out("col - row", col - row);
    c.out("maximum(row, col)", maximum(row, col), {.any_zero_sign = true});
    c.out("row * scalar", row * s);
    c.out("broadcast_to", broadcast_to(col, {rows, cols}));
    c.out("full", k.full({rows, cols}, s, d));
    c.out("trans", trans(x));
    c.out("reshape + scalar", reshape(x, {cols, rows}) + s);
    c.out("reshape to 1-D", reshape(x, {rows * cols}));
    c.out("expand_dims", expand_dims(x, 1));
    for (const std::vector<int64_t>& perm :
         {std::vector<int64_t>{0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}) {
      c.out(absl::StrCat("trans ", perm[0], perm[1], perm[2]), trans(t, perm));
    }
    run(c, 1);
  }
}

// narrow along each axis of 2-D and 3-D tiles (in registers, a choice of
// the operand's slots), split's halves combined elementwise and joined
// again the other way round (concat), and the halves
// of a product's accumulator (on sm_90a, wgmma's fragment narrowed to its
// column blocks) multiplied, as a SwiGLU epilogue does.
TEST_F(OpsAgree, NarrowAndSplitInRegisters) {
  TESSEL_TRACE_SEED(rng_);
  const Draw small = {.min_exp = -4, .max_exp = 0, .edges = false};
  for (DType d : {i8, bf16, f32}) {
    const int rows = tile_dim(rng_, 6), cols = 2 * tile_dim(rng_, 5);
    const Shape cube = {tile_dim(rng_, 3), tile_dim(rng_, 4), tile_dim(rng_, 4)};
    const int axis = rng_.uniform_int(0, 2);
    const int64_t size = rng_.uniform_int(1, static_cast<int>(cube[axis])),
                  start = rng_.uniform_int(0, static_cast<int>(cube[axis] - size));
    SCOPED_TRACE(absl::StrCat(d.name(), " ", rows, "x", cols, ", ", shape_str(cube), " axis ", axis, " part ", start,
                              " + ", size));
    Case c("narrow");
    KernelBuilder& k = c.k();
    Value x = load(c.array(d, random_array(d, rows * cols, rng_)) + index_tile(k, {rows, cols}));  // [N, M]
    Value t = load(c.array(d, random_array(d, numel(cube), rng_)) + index_tile(k, cube));          // [P, Q, R]
    c.out("narrow rows", narrow(x, 0, rows / 2, rows - rows / 2));
    c.out("narrow columns", narrow(x, 1, 1, cols - 1));
    auto [left, right] = split(x, 1);
    c.out("max of the halves", maximum(left, right), {.any_zero_sign = true});
    c.out("the halves swapped", concat(right, left, 1));
    c.out("rotary", x * x + concat(-right, left, 1) * x, {.any_zero_sign = true});
    const Value pairs = reshape(x, {rows, cols / 2, 2});
    auto [even, odd] = split(pairs, 2);
    c.out("rotary in pairs", reshape(pairs * pairs + concat(-odd, even, 2) * pairs, {rows, cols}),
          {.any_zero_sign = true});
    c.out("a row and the tile", concat(narrow(x, 0, 0, 1), x, 0));
    c.out("narrow 3-D", narrow(t, axis, start, size));
    run(c, 1);
  }
  for (DType d : {bf16, f16}) {
    SCOPED_TRACE(d.name());
    Case c("split_product");
    KernelBuilder& k = c.k();
    Value a = load(c.array(d, random_array(d, 64 * 64, rng_, small)) + index_tile(k, {64, 64}));    // [M, K]
    Value b = load(c.array(d, random_array(d, 64 * 128, rng_, small)) + index_tile(k, {64, 128}));  // [K, N]
    auto [gate, up] = split(dot(a, b, k.zeros({64, 128}, f32)), 1);
    const Tolerance products = {.rel = 1e-4, .floor = 1};  // of two sums, each in another order
    c.out("gate * up", gate * up, products);
    c.out("the right half's right half", split(up, 1).second, products);
    run(c, 1);
  }
}

// Every lane of many programs adds into one of four counters (i32 and u64
// wrap, so any order gives one answer; f32 within the bound below), and one
// scalar atomic per program counts programs.
TEST_F(OpsAgree, AtomicAddFromManyProgramsIntoFewCounters) {
  constexpr int kCounters = 4;
  TESSEL_TRACE_SEED(rng_);
  const int grid = rng_.uniform_int(8, 32), lanes = grid * kBlock;
  // Each device's f32 sum of n positive terms is within (n - 1) 2^-24 of the exact one.
  const double rel = 2.0 * (lanes / kCounters) * std::ldexp(1.0, -24);
  const Draw positive = {.max_exp = 0, .edges = false, .negatives = false};
  Case c("atomic_add");
  KernelBuilder& k = c.k();
  Value lane = k.program_id() * kBlock + k.arange(0, kBlock);  // [B] i32
  for (DType d : {i32, u64, f32}) {
    Value counters = c.array(d, random_array(d, kCounters, rng_, positive), absl::StrCat(d.name(), " counters"),
                             {.rel = d.is_float() ? rel : 0});
    atomic_add(counters + lane % kCounters, load(c.array(d, random_array(d, lanes, rng_, positive)) + lane));
  }
  atomic_add(c.array(i32, Bytes(kCounters * 4, 0), "scalar atomics") + k.program_id() % kCounters, 1);
  run(c, grid);
}

// Programs race to claim slots with compare-and-swap. Which program wins may
// differ, so each device's result is checked: one winner per slot, whose id
// the slot holds and every loser saw. A CAS that fails changes nothing.
TEST_F(OpsAgree, AtomicCasHasOneWinnerPerSlot) {
  constexpr int kSlots = 3;
  TESSEL_TRACE_SEED(rng_);
  const int grid = rng_.uniform_int(kSlots, 100);
  for (DType d : {i32, u64}) {
    SCOPED_TRACE(d.name());
    Case c("atomic_cas");
    Bytes word(d.bytes());
    set_bits(d, word, 0, random_bits(rng_) | 1);  // never the 0 that the CAS below expects
    Value slots = c.array(d, Bytes(kSlots * d.bytes(), 0)), olds = c.array(d, Bytes(grid * d.bytes(), kPoison));
    Value fixed = c.array(d, word, "word of failed CASes");
    Value pid = c.k().program_id();
    store(olds + pid, atomic_cas(slots + pid % kSlots, 0, cast(pid + 1, d)));
    store(c.output(d, grid, "failed CASes") + pid, atomic_cas(fixed, 0, 9));
    std::optional<Runs> runs = run(c, grid);
    ASSERT_TRUE(runs.has_value());
    for (const std::vector<Bytes>& r : *runs) {
      for (int s = 0; s < kSlots; ++s) {
        const uint64_t claimed = get_bits(d, r[c.index(slots)], s);
        int winners = 0;
        for (int p = s; p < grid; p += kSlots) {
          const uint64_t old = get_bits(d, r[c.index(olds)], p);
          winners += old == 0;
          EXPECT_EQ(old == 0 ? uint64_t(p + 1) : old, claimed) << "slot " << s << ", program " << p;
        }
        EXPECT_EQ(winners, 1) << "slot " << s;
      }
    }
  }
}

// Each program writes a tile with tma_store (on NVIDIA still on its way to
// memory when the store returns) and another with plain stores from all its
// threads, then counts itself in with a scalar atomic; the last one to count
// reads every program's tiles. A scalar atomic orders all the program's
// writes before it and its reads after it, so the sums hold every tile.
TEST_F(OpsAgree, LastProgramToCountReadsEveryProgramsTiles) {
  constexpr int kRows = 64, kCols = 64;
  TESSEL_TRACE_SEED(rng_);
  for (int run_index = 0; run_index < 4; ++run_index) {
    const int grid = rng_.uniform_int(132, 400);
    SCOPED_TRACE(absl::StrCat(grid, " programs"));
    Case c("last_program");
    KernelBuilder& k = c.k();
    const Bytes zeros(size_t{4} * grid * kRows * kCols, 0);
    Value staged = c.tensor_map(f32, zeros, {grid * kRows, kCols}, {kRows, kCols});
    Value plain = c.array(f32, zeros);
    Value counter = c.array(i32, Bytes(4, 0), "counter");
    Value sums = c.output(f32, 2 * kRows * kCols, "the last program's sums");
    Value pid = k.program_id(), idx = index_tile(k, {kRows, kCols});
    Value tile = cast(idx % 7 + pid, f32);  // exact sums
    tma_store(staged, {pid * kRows, 0}, tile);
    store(plain + pid * (kRows * kCols) + idx, tile + 1);
    Value old = atomic_add(counter, 1);
    k.if_(old == grid - 1, [&] {
      Var from_tma = k.var(k.zeros({kRows, kCols}, f32)), from_stores = k.var(k.zeros({kRows, kCols}, f32));
      k.for_range(0, grid, 1, [&](Value p) {
        from_tma = from_tma + tma_load(staged, {p * kRows, 0});
        from_stores = from_stores + load(plain + p * (kRows * kCols) + idx);
      });
      store(sums + idx, from_tma);
      store(sums + kRows * kCols + idx, from_stores);
    });
    run(c, grid);
  }
}

// A program reads back, transposed, what it stored (other threads' elements
// mostly), then overwrites what it read, transposed again: its loads see its
// earlier stores and not its later ones, as on the host.
TEST_F(OpsAgree, ProgramsReadTheirOwnStoresAndNotTheirLaterOnes) {
  constexpr int kN = 64;
  TESSEL_TRACE_SEED(rng_);
  const int grid = rng_.uniform_int(1, 8);
  Case c("read_after_write");
  KernelBuilder& k = c.k();
  Value scratch = c.array(f32, Bytes(size_t{4} * grid * kN * kN, kPoison), "scratch");
  Value base = scratch + k.program_id() * (kN * kN);
  Value idx = index_tile(k, {kN, kN}), transposed = trans(idx);
  store(base + idx, cast(idx, f32));
  Value back = load(base + transposed);  // mostly other threads' stores
  store(base + idx, back * 2);           // over elements other threads read
  store(base + idx, load(base + transposed) + 1);
  run(c, grid);
}

// for_range with a scalar and a tile Var, an if_ with an else inside it, a
// nested loop whose trip count (0 to 3) depends on the outer index, and a
// loop that runs only when the main one runs zero times; launched with
// several bounds, empty ranges among them.
TEST_F(OpsAgree, LoopsWithVarsNestedLoopsAndBranches) {
  constexpr int kRows = 64, kCols = 16, kGrid = 3;
  TESSEL_TRACE_SEED(rng_);
  const Bytes xs = random_array(f32, kRows * kCols, rng_, {.max_exp = 1, .edges = false});
  const std::vector<std::array<int, 3>> bounds = {
      {0, kRows, 1},
      {5, 5, 1},
      {9, 3, 2},
      {rng_.uniform_int(0, kRows), rng_.uniform_int(0, kRows), rng_.uniform_int(1, 5)}};
  for (const auto& [lo, hi, step] : bounds) {
    SCOPED_TRACE(absl::StrCat("for i in [", lo, " + program, ", hi, ") step ", step));
    Case c("loops");
    KernelBuilder& k = c.k();
    Value x = c.array(f32, xs);
    Value first = c.scalar(lo) + k.program_id(), last = c.scalar(hi), stride = c.scalar(step);
    Value pid = k.program_id(), cols = k.arange(0, kCols);
    Var acc = k.var(k.constant(0.0, f32));
    Var negatives = k.var(0), empty = k.var(0);
    Var rows = k.var(k.zeros({kCols}, f32));  // [16] f32
    k.for_range(first, last, stride, [&](Value i) {
      Value row = load(x + i * kCols + cols);  // [16] f32
      k.if_(
          load(x + i * kCols) > 0, [&] { rows = rows + row; },
          [&] {
            rows = rows - row;
            negatives = negatives + 1;
          });
      k.for_range(0, i % 4, 1, [&](Value j) { acc = acc * 0.5 + load(x + i * kCols + j); });
    });
    k.for_range(last, first, 1, [&](Value) { empty = empty + 1; });
    store(c.output(f32, kGrid, "scalar Var") + pid, acc);
    Value counts = c.output(i32, 2 * kGrid, "Vars assigned in a branch and in an empty loop");
    store(counts + 2 * pid, negatives);
    store(counts + 2 * pid + 1, empty);
    store(c.output(f32, kGrid * kCols, "tile Var") + pid * kCols + cols, rows);
    run(c, kGrid);
  }
}

// Loads issued an iteration ahead (codegen/prefetch.h): row blocks read
// through a carried pointer and an index made from the loop's, masked at
// the matrix's end, with a store to another array in the loop; then a loop
// that reads what its last iteration stored (left in order), launched with
// empty ranges and steps over 1 among the bounds.
TEST_F(OpsAgree, LoadsIssuedAnIterationAhead) {
  constexpr int kRows = 45, kCols = 32, kBlock = 4, kGrid = 2;
  TESSEL_TRACE_SEED(rng_);
  const Bytes xs = random_array(f32, kRows * kCols, rng_, {.max_exp = 1, .edges = false});
  const std::vector<std::array<int, 3>> bounds = {
      {0, kRows, kBlock}, {7, 7, kBlock}, {3, kRows, 2 * kBlock}, {rng_.uniform_int(0, kRows), kRows, kBlock}};
  for (const auto& [lo, hi, step] : bounds) {
    SCOPED_TRACE(absl::StrCat("for i in [", lo, ", ", hi, ") step ", step));
    Case c("prefetched_loads");
    KernelBuilder& k = c.k();
    Value x = c.array(f32, xs);
    Value pid = k.program_id(), cols = k.arange(0, kCols), rows = k.arange(0, kBlock);
    Value seen = c.output(f32, kGrid * kRows, "each row's sum, stored in the loop", summed(f32));
    Value first = c.scalar(lo), last = c.scalar(hi);
    Var p = k.var(x + first * kCols);
    Var acc = k.var(k.zeros({kCols}, f32)), peak = k.var(k.constant(-1e30, f32));
    k.for_range(first, last, c.scalar(step), [&](Value i) {
      Value r = i + rows;  // [B] i32
      Value inside = expand_dims(r < kRows, 1) & expand_dims(cols >= 0, 0);
      Value block = load(Value(p) + expand_dims(rows, 1) * kCols + expand_dims(cols, 0), inside, 0.0f);
      Value again = load(x + expand_dims(r, 1) * kCols + expand_dims(cols, 0), inside, 0.0f);
      acc = acc + sum(block * (pid + 1), 0);
      peak = maximum(Value(peak), max(max(again, 1), 0));
      store(seen + pid * kRows + r, sum(block, 1), r < kRows);
      p = Value(p) + step * kCols;
    });
    Value chain = c.output(f32, kGrid * kCols, "a running sum through memory");
    store(chain + pid * kCols + cols, k.zeros({kCols}, f32));
    k.for_range(first, last, 1, [&](Value i) {
      Value at = chain + pid * kCols + cols;
      store(at, load(at) + load(x + (i % kRows) * kCols + cols));
    });
    store(c.output(f32, kGrid * kCols, "the column sums", summed(f32)) + pid * kCols + cols, acc);
    store(c.output(f32, kGrid, "the maximum") + pid, peak);
    run(c, kGrid);
  }
}

// Operands through pointers that only products read, copied into rings of
// shared-memory stages (codegen/lower_copies.cc): a K loop over [64, 32]
// tiles of A and of B (given as N x K) with K ending within a tile or
// running no iteration, on rings of 2, 3 and 4 stages (and loops shorter
// than the ring); and one where A is also multiplied by a 4-column tile,
// which the tensor cores do not take: A keeps to registers, B its ring.
TEST_F(OpsAgree, DotOperandsCopiedIntoRings) {
  constexpr int kM = 64, kN = 64, kBk = 32, kMaxK = 160;
  TESSEL_TRACE_SEED(rng_);
  const Draw draw = {.min_exp = -4, .max_exp = 0, .edges = false};
  const Bytes as = random_array(bf16, kM * kMaxK, rng_, draw), bs = random_array(bf16, kN * kMaxK, rng_, draw);
  const Bytes ws = random_array(bf16, kMaxK * 4, rng_, draw);
  for (const auto& [kdim, stages, narrow] : std::vector<std::tuple<int, int, bool>>{
           {160, 0, false}, {48, 4, false}, {112, 2, false}, {0, 0, false}, {144, 0, true}}) {
    SCOPED_TRACE(absl::StrCat("K = ", kdim, ", ", stages, " stages", narrow ? ", A read by a narrow product too" : ""));
    Case c("copy_rings");
    KernelBuilder& k = c.k();
    Value a = c.array(bf16, as), b = c.array(bf16, bs), w = c.array(bf16, ws), kk_end = c.scalar(kdim);
    Value rows = expand_dims(k.arange(0, kM), 1), cols = expand_dims(k.arange(0, kN), 1);
    Var acc = k.var(k.zeros({kM, kN}, f32)), side = k.var(k.zeros({kM, 4}, f32));
    k.for_range(0, kk_end, kBk,
                [&](Value kk) {
                  Value ks = expand_dims(kk + k.arange(0, kBk), 0);  // [1, BK]
                  Value at = load(a + rows * kk_end + ks, ks < kk_end, 0.0);
                  acc = dot(at, trans(load(b + cols * kk_end + ks, ks < kk_end, 0.0)), acc);
                  if (!narrow) return;
                  Value kr = expand_dims(kk + k.arange(0, kBk), 1);  // [BK, 1]
                  side = dot(at, load(w + kr * 4 + expand_dims(k.arange(0, 4), 0), kr < kk_end, 0.0), side);
                },
                {.stages = stages});
    c.out("the product", acc, summed(f32));
    if (narrow) c.out("the narrow product", side, summed(f32));
    run(c, 1);
  }
}

// Tiles carried through loops and branches in registers: two [32, 32] Vars
// swapped each iteration (a parallel assignment of the loop's phis), one
// updated in a branch, and a transpose and a row reduction inside the loop
// that read them in other layouts.
TEST_F(OpsAgree, TilesCarriedThroughLoopsSwapAndChangeLayout) {
  constexpr int kN = 32;
  TESSEL_TRACE_SEED(rng_);
  const Bytes xs = random_array(i32, 2 * kN * kN, rng_, {.max_exp = 1, .edges = false});
  for (int trips : {0, 1, rng_.uniform_int(2, 9)}) {
    SCOPED_TRACE(absl::StrCat(trips, " iterations"));
    Case c("carried_tiles");
    KernelBuilder& k = c.k();
    Value x = c.array(i32, xs);
    Value idx = expand_dims(k.arange(0, kN), 1) * kN + expand_dims(k.arange(0, kN), 0);  // [32, 32]
    Var a = k.var(load(x + idx)), b = k.var(load(x + kN * kN + idx));
    k.for_range(0, c.scalar(trips), 1, [&](Value i) {
      Value old_a = a;
      a = b * 3 + trans(a) + i;
      b = old_a;
      k.if_(i % 2 == 0, [&] { b = b - expand_dims(sum(a, 1), 1); }, [&] { b = b ^ 5; });
    });
    Value out = c.output(i32, 2 * kN * kN, "the carried tiles after the loop");
    store(out + idx, a);
    store(out + kN * kN + idx, b);
    run(c, 1);
  }
}

// while_ loops: a Collatz walk per program whose trip count differs
// between programs, and [32, 32] tiles carried in registers (one swapped
// with a transpose of the other) until a row reduction of one falls below
// a bound, nested in a for_range, with a branch in the body.
TEST_F(OpsAgree, WhileLoopsCarryScalarsAndTiles) {
  constexpr int kN = 32, kGrid = 4;
  TESSEL_TRACE_SEED(rng_);
  const Bytes xs = random_array(i32, 2 * kN * kN, rng_, {.max_exp = 1, .edges = false});
  for (int bound : {0, 1 << 20, rng_.uniform_int(1, 1 << 16)}) {
    SCOPED_TRACE(absl::StrCat("bound ", bound));
    Case c("while_loops");
    KernelBuilder& k = c.k();
    Value x = c.array(i32, xs);
    Value pid = k.program_id();
    Var v = k.var(pid * 7 + 27), steps = k.var(0);
    k.while_([&] { return Value(v) > 1; },
             [&] {
               k.if_(
                   v % 2 == 0, [&] { v = v / 2; }, [&] { v = v * 3 + 1; });
               steps = steps + 1;
             });
    Value idx = expand_dims(k.arange(0, kN), 1) * kN + expand_dims(k.arange(0, kN), 0);  // [32, 32]
    Var a = k.var(load(x + idx) & 0xffff), b = k.var(load(x + kN * kN + idx) & 0xffff), turns = k.var(0);
    Value limit = c.scalar(bound);
    k.for_range(0, 2, 1, [&](Value round) {
      k.while_([&] { return max(sum(a, 1), 0) > limit; },
               [&] {
                 Value old_a = a;
                 a = trans(b) / 2;
                 b = old_a / 3 + round;
                 turns = turns + 1;
               });
      a = a + pid;
    });
    store(c.output(i32, 2 * kGrid, "the walks' steps and ends") + 2 * pid + k.arange(0, 2),
          where(k.arange(0, 2) == 0, Value(steps), Value(v)));
    Value out = c.output(i32, kGrid * (2 * kN * kN + 1), "the carried tiles and turns");
    Value mine = out + pid * (2 * kN * kN + 1);
    store(mine + idx, a);
    store(mine + kN * kN + idx, b);
    store(mine + 2 * kN * kN, turns);
    run(c, kGrid);
  }
}

// Each program of a 2-D and a 3-D grid records its ids and the grid's size.
TEST_F(OpsAgree, ProgramIdsOn2DAnd3DGrids) {
  TESSEL_TRACE_SEED(rng_);
  for (Grid g : {Grid(rng_.uniform_int(1, 9), rng_.uniform_int(2, 9)),
                 Grid(rng_.uniform_int(1, 5), rng_.uniform_int(1, 5), rng_.uniform_int(2, 5))}) {
    SCOPED_TRACE(absl::StrCat("grid ", g.dims[0], "x", g.dims[1], "x", g.dims[2]));
    Case c("program_ids");
    KernelBuilder& k = c.k();
    Value p0 = k.program_id(0), p1 = k.program_id(1), p2 = k.program_id(2);
    Value n0 = k.num_programs(0), n1 = k.num_programs(1), n2 = k.num_programs(2);
    Value base = c.output(i32, 6 * g.total(), "ids and sizes") + (p0 + n0 * (p1 + n1 * p2)) * 6;
    const Value fields[] = {p0, p1, p2, n0, n1, n2};
    for (int f = 0; f < 6; ++f) store(base + f, fields[f]);
    run(c, g);
  }
}

// Philox's words (i32 and i64 offsets, a full 64-bit seed), the uniform
// floats and the normals (the accurate log, sqrt, cos and sin) are the
// same bits on both devices.
TEST_F(OpsAgree, RandomNumbersAreTheSameBits) {
  TESSEL_TRACE_SEED(rng_);
  Elementwise c("random", rng_);
  Value seed = c.scalar(KernelArg(random_bits(rng_)));
  Value wide = cast(c.offs(), i64) + c.scalar(KernelArg(static_cast<int64_t>(random_bits(rng_) >> 1)));
  std::array<Value, 4> w = randint4x(seed, c.offs()), u = rand4x(seed, wide), n = randn4x(seed, c.offs(), 7);
  for (int i = 0; i < 4; ++i) {
    c.out(absl::StrCat("randint4x word ", i), w[i]);
    c.out(absl::StrCat("rand4x ", i), u[i]);
    c.out(absl::StrCat("randn4x (7 rounds) ", i), n[i]);
  }
  run(c, c.grid());
}

// dot(a, b, acc) into f32 accumulators from f32, bf16 and f16 operands.
TEST_F(OpsAgree, DotAccumulatesInF32) {
  TESSEL_TRACE_SEED(rng_);
  const Draw draw = {.min_exp = -4, .max_exp = 0, .edges = false};
  for (DType d : {f32, bf16, f16}) {
    for (const auto& [m, kk, n] :
         std::vector<std::array<int, 3>>{{16, 16, 16}, {64, 32, 64}, {48, 24, 40}, {3, 96, 5}}) {
      SCOPED_TRACE(absl::StrCat(d.name(), " [", m, ", ", kk, "] @ [", kk, ", ", n, "]"));
      Case c("dot");
      KernelBuilder& k = c.k();
      Value a = load(c.array(d, random_array(d, m * kk, rng_, draw)) + index_tile(k, {m, kk}));      // [M, K]
      Value b = load(c.array(d, random_array(d, kk * n, rng_, draw)) + index_tile(k, {kk, n}));      // [K, N]
      Value acc = load(c.array(f32, random_array(f32, m * n, rng_, draw)) + index_tile(k, {m, n}));  // [M, N]
      c.out("dot", dot(a, b, acc), summed(f32));
      run(c, 1);
    }
  }
}

// A persistent copy through tma_load and tma_store of a matrix whose sizes
// are not multiples of the box (rows a multiple of 16 bytes, as TMA needs).
// Each box is also stored through pointers, as is the box half a box up and
// left (negative coordinates): out-of-bounds parts read zero; stores clip.
// Boxes of 32 rows of 128 bytes, or sides that are not powers of two.
TEST_F(OpsAgree, TmaPersistentCopyOverRaggedEdges) {
  TESSEL_TRACE_SEED(rng_);
  for (DType d : {i8, bf16, f32}) {
    const bool odd = rng_.uniform_int(0, 1) == 1;
    const int box_rows = odd ? 24 : 32, box_cols = (odd ? 96 : 128) / d.bytes(), col_step = 16 / d.bytes();
    const int box_size = box_rows * box_cols;
    int rows = rng_.uniform_int(1, 4 * box_rows), cols = col_step * rng_.uniform_int(1, 4 * box_cols / col_step);
    if (rows % box_rows == 0) --rows;
    if (cols % box_cols == 0) cols -= col_step;
    const int tiles = (rows + box_rows - 1) / box_rows * ((cols + box_cols - 1) / box_cols);
    const int grid = rng_.uniform_int(1, 6);
    SCOPED_TRACE(absl::StrCat(d.name(), " ", rows, "x", cols, " in boxes of ", box_rows, "x", box_cols, " on ", grid,
                              " programs"));
    const Shape dims = {rows, cols}, box = {box_rows, box_cols};
    Case c("tma_copy");
    KernelBuilder& k = c.k();
    Value src = c.tensor_map(d, random_array(d, rows * cols, rng_), dims, box);
    Value dst = c.tensor_map(d, Bytes(rows * cols * d.bytes(), kPoison), dims, box, "tma_store");
    Value boxes = c.output(d, tiles * box_size, "boxes"), shifted = c.output(d, tiles * box_size, "shifted boxes");
    Value m = c.scalar(rows), n = c.scalar(cols);
    Value col_tiles = cdiv(n, box_cols), in_box = index_tile(k, box);  // [R, C] i32
    k.for_each_tile(cdiv(m, box_rows) * col_tiles, [&](Value t) {
      Value row = t / col_tiles * box_rows, col = t % col_tiles * box_cols;
      Value tile = tma_load(src, {row, col});  // [R, C], shared memory
      tma_store(dst, {row, col}, tile);
      store(boxes + t * box_size + in_box, tile);
      store(shifted + t * box_size + in_box, tma_load(src, {row - box_rows / 2, col - box_cols / 2}));
    });
    run(c, grid);
  }
}

// tma_reduce: programs add every box of a matrix into it `repeats` times
// over (on the GPU the copy engine adds, in dtype of the map), through
// plain and swizzled maps, clipped at the ragged edges. Positive terms, so
// that any order of the float sums is within the bound below.
TEST_F(OpsAgree, TmaReduceAddsBoxesFromManyPrograms) {
  constexpr int kBoxRows = 16, kBoxBytes = 128;
  TESSEL_TRACE_SEED(rng_);
  const Draw positive = {.max_exp = 0, .edges = false, .negatives = false};
  for (Swizzle swizzle : {Swizzle::kNone, Swizzle::k128B}) {
    for (DType d : {i32, f32, f16, bf16}) {
      const int box_cols = kBoxBytes / d.bytes(), col_step = 16 / d.bytes();
      const int rows = rng_.uniform_int(kBoxRows + 1, 4 * kBoxRows),
                cols = col_step * rng_.uniform_int(box_cols / col_step + 1, 3 * box_cols / col_step);
      const int repeats = rng_.uniform_int(2, 5), grid = rng_.uniform_int(4, 24);
      SCOPED_TRACE(absl::StrCat(swizzle_name(swizzle), " ", d.name(), " ", rows, "x", cols, ", ", repeats,
                                " adds of each box on ", grid, " programs"));
      // Each device's sum of 1 + repeats positive terms, rounded each time, is
      // within `repeats` roundings of the exact one.
      const double ulp = d == f32 ? std::ldexp(1.0, -23) : d == f16 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -7);
      const Shape dims = {rows, cols}, box = {kBoxRows, box_cols};
      Case c("tma_reduce");
      KernelBuilder& k = c.k();
      Value src = c.tensor_map(d, random_array(d, rows * cols, rng_, positive), dims, box, "", swizzle);
      Value dst = c.tensor_map(d, random_array(d, rows * cols, rng_, positive), dims, box, "tma_reduce", swizzle,
                               {.rel = d.is_int() ? 0 : 2 * repeats * ulp});
      Value m = c.scalar(rows), n = c.scalar(cols), times = c.scalar(repeats);
      Value col_tiles = cdiv(n, box_cols), tiles = cdiv(m, kBoxRows) * col_tiles;
      k.for_each_tile(tiles * times, [&](Value t) {
        Value at = t % tiles;
        Value row = at / col_tiles * kBoxRows, col = at % col_tiles * box_cols;
        tma_reduce(AtomicOp::kAdd, dst, {row, col}, tma_load(src, {row, col}));
      });
      run(c, grid);
    }
  }
}

// The same through swizzled maps: the GPU's copy engine swizzles the boxes
// it leaves in shared memory, which codegen reads and writes through the
// pattern; the host keeps them plain. Boxes whose rows span the swizzle
// width (narrower ones are refused on NVIDIA GPUs: see the PTX tests).
TEST_F(OpsAgree, TmaSwizzledBoxesReadAndWriteLikePlainOnes) {
  constexpr int kBoxRows = 16;
  TESSEL_TRACE_SEED(rng_);
  for (auto [swizzle, row_bytes] : {std::pair{Swizzle::k128B, 128}, std::pair{Swizzle::k64B, 64},
                                    std::pair{Swizzle::k32B, 32}}) {
    for (auto [d, panels] : {std::pair{bf16, 1}, std::pair{f32, 1}, std::pair{bf16, 2}, std::pair{f32, 4}}) {
      // Boxes wider than the swizzle are copied as panels of its width.
      const int box_cols = panels * row_bytes / d.bytes(), col_step = 16 / d.bytes(), box_size = kBoxRows * box_cols;
      const int rows = rng_.uniform_int(kBoxRows + 1, 5 * kBoxRows),
                cols = col_step * rng_.uniform_int(box_cols / col_step + 1, 3 * box_cols / col_step);
      const int tiles = (rows + kBoxRows - 1) / kBoxRows * ((cols + box_cols - 1) / box_cols);
      SCOPED_TRACE(absl::StrCat(swizzle_name(swizzle), " ", d.name(), " ", rows, "x", cols, " box ", kBoxRows, "x",
                                box_cols));
      const Shape dims = {rows, cols}, box = {kBoxRows, box_cols};
      Case c("tma_swizzled");
      KernelBuilder& k = c.k();
      Value src = c.tensor_map(d, random_array(d, rows * cols, rng_), dims, box, "", swizzle);
      Value dst = c.tensor_map(d, Bytes(rows * cols * d.bytes(), kPoison), dims, box, "tma_store", swizzle);
      Value boxes = c.output(d, tiles * box_size, "boxes");
      Value m = c.scalar(rows), n = c.scalar(cols);
      Value col_tiles = cdiv(n, box_cols), in_box = index_tile(k, box);  // [R, C] i32
      k.for_each_tile(cdiv(m, kBoxRows) * col_tiles, [&](Value t) {
        Value row = t / col_tiles * kBoxRows, col = t % col_tiles * box_cols;
        Value tile = tma_load(src, {row, col});  // [R, C], shared memory, swizzled on the GPU
        store(boxes + t * box_size + in_box, tile);
        tma_store(dst, {row, col}, tile + tile);
      });
      run(c, 3);
    }
  }
}

// Two stores of a 64 x 256 f32 box under the 128B swizzle (eight panels):
// the box's ring (two stages, the most of the default that fit), its plain
// copy and two whole staging tiles (64 KiB each) do not fit in shared
// memory, so each store stages its panels two at a time, copied from the
// plain tile; at three programs, each stores several boxes.
TEST_F(OpsAgree, TmaStoresTooLargeToStageWholeGoAPanelAtATime) {
  TESSEL_TRACE_SEED(rng_);
  constexpr int kBoxRows = 64, kBoxCols = 256;
  const int rows = rng_.uniform_int(kBoxRows + 1, 6 * kBoxRows), cols = 4 * rng_.uniform_int(kBoxCols / 4 + 1, 200);
  SCOPED_TRACE(absl::StrCat(rows, "x", cols));
  const Shape dims = {rows, cols}, box = {kBoxRows, kBoxCols};
  Case c("tma_panels");
  KernelBuilder& k = c.k();
  Value src = c.tensor_map(f32, random_array(f32, rows * cols, rng_), dims, box, "", Swizzle::k128B);
  Value dst = c.tensor_map(f32, Bytes(rows * cols * 4, kPoison), dims, box, "tma_store", Swizzle::k128B);
  Value dst2 = c.tensor_map(f32, Bytes(rows * cols * 4, kPoison), dims, box, "tma_store", Swizzle::k128B);
  Value m = c.scalar(rows), n = c.scalar(cols);
  Value col_tiles = cdiv(n, kBoxCols);
  k.for_each_tile(cdiv(m, kBoxRows) * col_tiles, [&](Value t) {
    Value row = t / col_tiles * kBoxRows, col = t % col_tiles * kBoxCols;
    Value tile = tma_load(src, {row, col});
    tma_store(dst, {row, col}, tile);
    tma_store(dst2, {row, col}, tile);
  });
  run(c, 3);
}

}  // namespace
}  // namespace tessel::gpu_test
