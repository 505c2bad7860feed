#include "dsl/random.h"

#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "dsl/state.h"

namespace tessel {
namespace {

using detail::BuilderState;

// The key's Weyl sequence and the round multipliers of Philox4x32.
constexpr int64_t kKeyStep0 = 0x9E3779B9, kKeyStep1 = 0xBB67AE85;
constexpr int64_t kMul0 = 0xD2511F53, kMul1 = 0xCD9E8D57;

// `x` as a Value, checked to be an integer (scalar or tile, or only a scalar);
// an invalid Value, the error recorded, where it is not. A literal is an i64.
Value integer(BuilderState& s, const Operand& x, bool scalar_only, absl::string_view what, absl::string_view role,
              Loc loc) {
  const int i = s.operand(x, x.is_value() ? std::nullopt : std::optional<DType>(i64), what, loc);
  if (i < 0) return Value();
  const Type& t = s.type(i);
  if (!t.is_int() || t.is_bool() || (scalar_only && !t.is_scalar())) {
    return s.fail(loc, absl::StrCat(what, ": ", role, " must be ", scalar_only ? "an integer scalar" : "integers",
                                    ", got ", t.str()));
  }
  return s.value(i);
}

// The low and high 32-bit words of `x`'s value modulo 2^64.
std::array<Value, 2> words(const Value& x, Loc loc) {
  Value wide = cast(x, u64, loc);
  return {cast(wide, u32, loc), cast(wide >> 32, u32, loc)};
}

// The checked seed's key words, or nothing (the error recorded).
std::optional<std::array<Value, 2>> key_of(BuilderState& s, const Operand& seed, absl::string_view what, Loc loc) {
  Value v = integer(s, seed, true, what, "the seed", loc);
  if (!v.valid()) return std::nullopt;
  return words(v, loc);
}

// `rounds` rounds of the Philox4x32 bijection on the counter `c` under `key`.
std::array<Value, 4> rounds_of(BuilderState& s, std::array<Value, 2> key, std::array<Value, 4> c, int rounds,
                               absl::string_view what, Loc loc) {
  if (rounds < 1) {
    s.fail(loc, absl::StrCat(what, ": needs at least one Philox round, got ", rounds));
    return {};
  }
  for (int r = 0; r < rounds; ++r) {
    if (r > 0) {
      key[0] = key[0] + kKeyStep0;
      key[1] = key[1] + kKeyStep1;
    }
    Value hi0 = umulhi(c[0], kMul0, loc), hi1 = umulhi(c[2], kMul1, loc);
    c = {hi1 ^ c[1] ^ key[0], c[2] * kMul1, hi0 ^ c[3] ^ key[1], c[0] * kMul0};
  }
  return c;
}

// The block of each offset (the counter's first two words) under the seed.
std::array<Value, 4> block(const Operand& seed, const Operand& offsets, int rounds, absl::string_view what,
                           Loc loc) {
  BuilderState* s = detail::state_of({&seed, &offsets});
  if (s == nullptr) return {};
  std::optional<std::array<Value, 2>> key = key_of(*s, seed, what, loc);
  if (!key) return {};
  Value at = integer(*s, offsets, false, what, "the offsets", loc);
  if (!at.valid()) return {};
  auto [lo, hi] = words(at, loc);
  Value zero = lo & 0;  // zeros of the offsets' shape
  return rounds_of(*s, *key, {lo, hi, zero, zero}, rounds, what, loc);
}

// A word's top 24 bits times 2^-24: [0, 1) in steps of 2^-24.
Value uniform(const Value& w, Loc loc) { return cast(w >> 8, f32, loc) * std::ldexp(1.0, -24); }

std::array<Value, 4> uniforms(const std::array<Value, 4>& w, Loc loc) {
  if (!w[0].valid()) return {};
  return {uniform(w[0], loc), uniform(w[1], loc), uniform(w[2], loc), uniform(w[3], loc)};
}

// Two standard normals from two words: the radius from u in (0, 1] (never
// log 0) and the angle from v in [0, 1).
std::array<Value, 2> box_muller(const Value& a, const Value& b, Loc loc) {
  Value u = cast((a >> 8) + 1, f32, loc) * std::ldexp(1.0, -24);
  Value radius = sqrt(log(u, MathForm::kAccurate, loc) * -2.0, loc);
  Value angle = uniform(b, loc) * (2 * M_PI);
  return {radius * cos(angle, MathForm::kAccurate, loc), radius * sin(angle, MathForm::kAccurate, loc)};
}

}  // namespace

Value umulhi(const Operand& a, const Operand& b, Loc loc) {
  BuilderState* sp = detail::state_of({&a, &b});
  if (sp == nullptr) return Value();
  BuilderState& s = *sp;
  // A literal takes the other operand's dtype (the product commutes).
  const Operand& first = a.is_value() ? a : b;
  const Operand& second = a.is_value() ? b : a;
  const int ia = s.operand(first, std::nullopt, "umulhi", loc);
  if (ia < 0) return Value();
  const int ib = s.operand(second, s.type(ia).dtype(), "umulhi", loc);
  if (ib < 0) return Value();
  const DType da = s.type(ia).dtype(), db = s.type(ib).dtype();
  auto word = [](const Type& t) { return t.is_int() && (t.dtype() == i32 || t.dtype() == u32); };
  if (!word(s.type(ia)) || !word(s.type(ib)) || da != db) {
    return s.fail(loc, absl::StrCat("umulhi: needs two 32-bit integers of one dtype (i32 or u32), got ",
                                    s.type(ia).str(), " and ", s.type(ib).str()));
  }
  // Zero-extended (through u32, so an i32's bits are not sign-extended).
  Value x = cast(cast(s.value(ia), u32, loc), u64, loc), y = cast(cast(s.value(ib), u32, loc), u64, loc);
  return cast(cast((x * y) >> 32, u32, loc), da, loc);
}

std::array<Value, 4> philox(const Operand& seed, const std::array<Operand, 4>& counter, int rounds, Loc loc) {
  BuilderState* s = detail::state_of({&seed, &counter[0], &counter[1], &counter[2], &counter[3]});
  if (s == nullptr) return {};
  std::optional<std::array<Value, 2>> key = key_of(*s, seed, "philox", loc);
  if (!key) return {};
  std::array<Value, 4> c;
  for (int i = 0; i < 4; ++i) {
    Value w = integer(*s, counter[i], false, "philox", "the counter's words", loc);
    if (!w.valid()) return {};
    c[i] = cast(w, u32, loc);
  }
  // The words meet in one shape: a scalar word takes the others' tile shape.
  Value zero = c[0] & 0;
  for (int i = 1; i < 4; ++i) zero = zero & c[i];
  for (Value& w : c) w = w | zero;
  return rounds_of(*s, *key, c, rounds, "philox", loc);
}

std::array<Value, 4> randint4x(const Operand& seed, const Operand& offsets, int rounds, Loc loc) {
  return block(seed, offsets, rounds, "randint4x", loc);
}
Value randint(const Operand& seed, const Operand& offsets, int rounds, Loc loc) {
  return block(seed, offsets, rounds, "randint", loc)[0];
}

std::array<Value, 4> rand4x(const Operand& seed, const Operand& offsets, int rounds, Loc loc) {
  return uniforms(block(seed, offsets, rounds, "rand4x", loc), loc);
}
Value rand(const Operand& seed, const Operand& offsets, int rounds, Loc loc) {
  std::array<Value, 4> w = block(seed, offsets, rounds, "rand", loc);
  return w[0].valid() ? uniform(w[0], loc) : Value();
}

std::array<Value, 4> randn4x(const Operand& seed, const Operand& offsets, int rounds, Loc loc) {
  std::array<Value, 4> w = block(seed, offsets, rounds, "randn4x", loc);
  if (!w[0].valid()) return {};
  auto [n0, n1] = box_muller(w[0], w[1], loc);
  auto [n2, n3] = box_muller(w[2], w[3], loc);
  return {n0, n1, n2, n3};
}
Value randn(const Operand& seed, const Operand& offsets, int rounds, Loc loc) {
  std::array<Value, 4> w = block(seed, offsets, rounds, "randn", loc);
  return w[0].valid() ? box_muller(w[0], w[1], loc)[0] : Value();
}

}  // namespace tessel
