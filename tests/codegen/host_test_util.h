// Shared helpers of the host-target op tests: seeded random inputs, an
// independent f16/bf16 reference conversion (round to nearest even from f64),
// poisoned outputs, guarded memory, index tiles and a compile-and-launch helper.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dsl/ops.h"
#include "gtest/gtest.h"
#include "runtime/device.h"

namespace tessel::testing {

#define TESSEL_ASSERT_OK(expr)                \
  do {                                        \
    const ::absl::Status tessel_s_ = (expr);  \
    ASSERT_TRUE(tessel_s_.ok()) << tessel_s_; \
  } while (0)

// ---- Random numbers ----------------------------------------------------------
// A generator seeded per run from std::random_device (or TESSEL_TEST_SEED, to
// replay a failure); tests SCOPED_TRACE(rng.trace()).
struct Rng {
  Rng() : seed(initial_seed()), gen(seed) {}
  static unsigned initial_seed() {
    const char* env = std::getenv("TESSEL_TEST_SEED");
    return env != nullptr ? static_cast<unsigned>(std::strtoul(env, nullptr, 10)) : std::random_device{}();
  }
  std::string trace() const { return absl::StrCat("seed ", seed, " (rerun with TESSEL_TEST_SEED=", seed, ")"); }
  int64_t uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(gen); }
  double real(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(gen); }
  bool chance(double p) { return std::bernoulli_distribution(p)(gen); }

  unsigned seed;
  std::mt19937_64 gen;
};

// ---- f16 / bf16 reference conversions ------------------------------------------
struct FloatFormat {
  int precision;  // significand bits, the implicit one included
  int emin;       // exponent of the smallest normal number
  int emax;       // exponent of the largest finite number
};
inline constexpr FloatFormat kF16Format{11, -14, 15};
inline constexpr FloatFormat kBF16Format{8, -126, 127};

// Rounds x to the nearest value of `f`, ties to even; `residual` is the sign of
// (exact value - x) when x is itself a rounded stand-in for an exact value, so
// that a tie in x is broken toward the exact value. Overflow gives infinity.
inline double round_to_format(double x, const FloatFormat& f, int residual = 0) {
  if (std::isnan(x) || std::isinf(x) || x == 0) return x;
  int exp = std::max(std::ilogb(x), f.emin);
  double quantum = std::ldexp(1.0, exp - (f.precision - 1));
  double t = x / quantum;  // exact: a power-of-two scaling
  double r = std::nearbyint(t);
  if (t - std::floor(t) == 0.5 && residual != 0) r = residual > 0 ? std::ceil(t) : std::floor(t);
  double out = r * quantum;
  double overflow = std::ldexp(1.0, f.emax + 1);
  return std::fabs(out) >= overflow ? std::copysign(INFINITY, x) : out;
}

inline uint16_t f64_to_bf16_bits(double x, int residual = 0) {
  if (std::isnan(x)) return 0x7FC0;
  float f = static_cast<float>(round_to_format(x, kBF16Format, residual));  // exact
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>(bits >> 16);
}

inline uint16_t f64_to_f16_bits(double x, int residual = 0) {
  if (std::isnan(x)) return 0x7E00;
  double r = round_to_format(x, kF16Format, residual);
  uint16_t sign = std::signbit(r) ? 0x8000 : 0;
  double a = std::fabs(r);
  if (std::isinf(a)) return sign | 0x7C00;
  if (a < std::ldexp(1.0, -14)) return sign | static_cast<uint16_t>(std::ldexp(a, 24));  // subnormal or zero
  int e = std::ilogb(a);
  auto mantissa = static_cast<uint16_t>(std::ldexp(a, 10 - e) - 1024);
  return sign | static_cast<uint16_t>((e + 15) << 10) | mantissa;
}

inline double bf16_bits_to_f64(uint16_t b) {
  uint32_t bits = uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline double f16_bits_to_f64(uint16_t b) {
  double sign = (b & 0x8000) != 0 ? -1.0 : 1.0;
  int e = (b >> 10) & 0x1F;
  int m = b & 0x3FF;
  if (e == 0x1F) return m != 0 ? NAN : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024 + m, e - 25);
}

// ---- Element types -------------------------------------------------------------
// Test element types are the C++ scalars plus tessel::Half and tessel::BFloat16.
template <class T>
inline constexpr bool kIsNarrow = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <class T>
inline constexpr bool kIsFloat = kIsNarrow<T> || std::is_floating_point_v<T>;

template <class T>
constexpr DType dtype_v() {
  if constexpr (std::is_same_v<T, Half>)
    return f16;
  else if constexpr (std::is_same_v<T, BFloat16>)
    return bf16;
  else
    return *dtype_of<T>();
}

template <class T>
double to_f64(T v) {
  if constexpr (std::is_same_v<T, Half>)
    return f16_bits_to_f64(v.bits);
  else if constexpr (std::is_same_v<T, BFloat16>)
    return bf16_bits_to_f64(v.bits);
  else
    return static_cast<double>(v);
}

// Floats: x rounded to nearest even; for f16 and bf16 a tie is broken by
// `residual` (see round_to_format). Integers: x must be exact.
template <class T>
T from_f64(double x, int residual = 0) {
  if constexpr (std::is_same_v<T, Half>)
    return Half{f64_to_f16_bits(x, residual)};
  else if constexpr (std::is_same_v<T, BFloat16>)
    return BFloat16{f64_to_bf16_bits(x, residual)};
  else
    return static_cast<T>(x);
}

template <class T>
bool is_nan(T v) {
  if constexpr (kIsFloat<T>)
    return std::isnan(to_f64(v));
  else
    return false;
}

template <class T>
std::string show(T v) {
  if constexpr (kIsNarrow<T>)
    return absl::StrCat(to_f64(v), " (0x", absl::Hex(v.bits), ")");
  else if constexpr (kIsFloat<T>)
    return absl::StrFormat("%a (%.17g)", static_cast<double>(v), static_cast<double>(v));
  else
    return absl::StrCat(static_cast<int64_t>(v), " (0x", absl::Hex(static_cast<uint64_t>(v)), ")");
}

// Bitwise equality; any NaN equals any NaN. With `zero_sign_matters` false,
// +0 and -0 are equal too (min and max may return either).
template <class T>
bool same(T got, T want, bool zero_sign_matters = true) {
  if (is_nan(want)) return is_nan(got);
  if (!zero_sign_matters && kIsFloat<T> && to_f64(want) == 0) return to_f64(got) == 0;
  return std::memcmp(&got, &want, sizeof(T)) == 0;
}

// Distance in units in the last place between two floats of type T (NaNs
// are 0 apart from each other and far from everything else).
template <class T>
int64_t ulp_distance(T a, T b) {
  if (is_nan(a) || is_nan(b)) return is_nan(a) && is_nan(b) ? 0 : std::numeric_limits<int64_t>::max();
  using Bits = std::conditional_t<sizeof(T) == 2, uint16_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>;
  auto ordered = [](T v) {
    Bits bits;
    std::memcpy(&bits, &v, sizeof(T));
    constexpr Bits kSign = Bits{1} << (8 * sizeof(T) - 1);
    __int128 magnitude = bits & ~kSign;
    return (bits & kSign) != 0 ? -magnitude : magnitude;
  };
  __int128 d = ordered(a) - ordered(b);
  return static_cast<int64_t>(d < 0 ? -d : d);
}

// ---- Random values ---------------------------------------------------------------
// Integers: a mix of edge values, small values and the full range.
template <class T>
T random_int(Rng& rng) {
  using L = std::numeric_limits<T>;
  switch (rng.uniform(0, 7)) {
    case 0: {
      const T edges[] = {T(0), T(1), L::min(), L::max(), T(L::min() + 1), T(L::max() - 1), static_cast<T>(-1)};
      return edges[rng.uniform(0, std::size(edges) - 1)];
    }
    case 1:
    case 2:
      return static_cast<T>(rng.uniform(L::is_signed ? -9 : 0, 9));
    default:
      return static_cast<T>(rng.gen());  // keeps the low bits: uniform over T
  }
}

// Floats: sign * 2^[min_exp, max_exp) * random significand, rounded to T.
template <class T>
T random_float(Rng& rng, int min_exp, int max_exp, bool negatives = true) {
  double x = std::ldexp(rng.real(1.0, 2.0), static_cast<int>(rng.uniform(min_exp, max_exp - 1)));
  return from_f64<T>(negatives && rng.chance(0.5) ? -x : x);
}

// Floats with edge values mixed in: zeros, infinities, NaN and subnormals.
template <class T>
T random_float_with_edges(Rng& rng, int min_exp, int max_exp) {
  if (!rng.chance(0.1)) return random_float<T>(rng, min_exp, max_exp);
  const double denorm = std::is_same_v<T, Half> ? std::ldexp(3.0, -24) : std::is_same_v<T, double> ? 5e-320 : 1e-39;
  const double edges[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, denorm, -denorm, 1.0, -1.0};
  return from_f64<T>(edges[rng.uniform(0, std::size(edges) - 1)]);
}

template <class T>
T random_value(Rng& rng) {
  if constexpr (kIsFloat<T>)
    return random_float_with_edges<T>(rng, -6, 7);
  else if constexpr (std::is_same_v<T, bool>)
    return rng.chance(0.5);
  else
    return random_int<T>(rng);
}

template <class T, class F>
std::vector<T> make_vector(size_t n, F&& f) {
  std::vector<T> v(n);
  for (T& x : v) x = f();
  return v;
}

// ---- Poisoned memory -----------------------------------------------------------
inline constexpr unsigned char kPoison = 0xA5;

template <class T>
std::vector<T> poisoned(size_t n) {
  std::vector<T> v(n);
  std::memset(static_cast<void*>(v.data()), kPoison, n * sizeof(T));
  return v;
}

template <class T>
bool is_poison(const T& v) {
  const auto* p = reinterpret_cast<const unsigned char*>(&v);
  for (size_t i = 0; i < sizeof(T); ++i) {
    if (p[i] != kPoison) return false;
  }
  return true;
}

// `count` elements of T that end exactly where an inaccessible page begins, so
// that a kernel touching an element past them crashes.
template <class T>
class GuardedArray {
 public:
  explicit GuardedArray(size_t count) {
    const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    bytes_ = ((count * sizeof(T) + page - 1) / page + 1) * page;
    base_ = static_cast<char*>(mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    mprotect(base_ + bytes_ - page, page, PROT_NONE);
    data_ = reinterpret_cast<T*>(base_ + bytes_ - page - count * sizeof(T));
  }
  ~GuardedArray() { munmap(base_, bytes_); }
  GuardedArray(const GuardedArray&) = delete;
  GuardedArray& operator=(const GuardedArray&) = delete;

  T* data() const { return data_; }
  T& operator[](size_t i) const { return data_[i]; }

 private:
  size_t bytes_;
  char* base_;
  T* data_;
};

// ---- Kernels ---------------------------------------------------------------------
inline const Device& host() {
  static const Device* device = new Device(*Device::open("host:4"));
  return *device;
}

inline absl::StatusOr<Function> compile(KernelBuilder& k) {
  absl::StatusOr<Kernel> kernel = k.build();
  if (!kernel.ok()) return kernel.status();
  return host().compile(*kernel);
}

// Builds, compiles and launches `k` once on the host.
template <class... Args>
absl::Status run(KernelBuilder& k, Grid grid, const Args&... args) {
  absl::StatusOr<Function> fn = compile(k);
  if (!fn.ok()) return fn.status();
  return fn->launch({.grid = grid}, args...);
}

// The row-major linear index of each element of a tile of `shape` (i32).
inline Value index_tile(KernelBuilder& k, const Shape& shape) {
  Value idx;
  int64_t stride = 1;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    Value r = k.arange(0, shape[d]) * static_cast<int>(stride);
    for (int e = 0; e < d; ++e) r = expand_dims(r, 0);
    for (int e = d + 1; e < static_cast<int>(shape.size()); ++e) r = expand_dims(r, e);
    idx = idx.valid() ? idx + r : r;
    stride *= shape[d];
  }
  return broadcast_to(idx, shape);
}

// Each line of a tile of shape `in` along `axis`: its elements' row-major
// indices in order.
inline std::vector<std::vector<int64_t>> lines_of(const Shape& in, int axis) {
  int64_t inner = 1;
  for (size_t d = axis + 1; d < in.size(); ++d) inner *= in[d];
  const int64_t n = in[axis], total = numel(in);
  std::vector<std::vector<int64_t>> lines;
  for (int64_t outer = 0; outer < total / (n * inner); ++outer) {
    for (int64_t j = 0; j < inner; ++j) {
      std::vector<int64_t>& line = lines.emplace_back();
      for (int64_t i = 0; i < n; ++i) line.push_back((outer * n + i) * inner + j);
    }
  }
  return lines;
}

}  // namespace tessel::testing
