#include "tests/tma_cases.h"

#include <algorithm>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/tma_rules.h"

namespace tessel::tma_cases {
namespace {

// splitmix64: the same numbers on every platform and standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
  bool percent(int p) { return below(100) < p; }
  template <typename T, size_t N>
  T pick(const T (&options)[N]) {
    return options[below(N)];
  }

 private:
  uint64_t state_;
};

constexpr ScalarKind kKinds[] = {ScalarKind::kI8,     ScalarKind::kU8,    ScalarKind::kI16, ScalarKind::kU16,
                                 ScalarKind::kI32,    ScalarKind::kU32,   ScalarKind::kI64, ScalarKind::kU64,
                                 ScalarKind::kF16,    ScalarKind::kBF16,  ScalarKind::kF32, ScalarKind::kF64,
                                 ScalarKind::kF8E4M3, ScalarKind::kF8E5M2};

int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

int64_t wrapping_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}

int64_t round_up(int64_t x, int64_t to) { return x > INT64_MAX - to ? INT64_MAX : (x + to - 1) / to * to; }

int64_t dim(Rng& r) {
  const int64_t roll = r.below(100);
  if (roll < 40) return 1 + r.below(300);
  if (roll < 60) return int64_t{1} << r.below(21);
  if (roll < 75) return 1 + r.below(100000);
  if (roll < 90) return 1 + r.below(8);
  if (roll < 93) return int64_t{1} << 32;
  if (roll < 94) return (int64_t{1} << 32) + 1;
  if (roll < 95) return 0;
  return (int64_t{1} << 31) + r.below(1000);
}

int64_t outer_box(Rng& r) {
  const int64_t roll = r.below(100);
  if (roll < 50) return 1 + r.below(256);
  if (roll < 70) return int64_t{1} << r.below(9);
  if (roll < 80) return 1;
  if (roll < 86) return 256;
  if (roll < 88) return 257;
  if (roll < 89) return 0;
  return 1 + r.below(32);
}

// The innermost box: mostly whole multiples of 16 bytes, often one or more
// swizzle widths; sometimes anything.
int64_t inner_box(Rng& r, int64_t elem, Swizzle swizzle) {
  const int64_t width = swizzle_bytes(swizzle);
  const int64_t roll = r.below(100);
  int64_t bytes;
  if (roll < 30 && width != 0) {
    const int64_t widths = 1 + r.below(4);
    bytes = r.percent(20) ? width * widths / 2 : width * widths;
  } else if (roll < 70) {
    bytes = 16 * (1 + r.below(16));
  } else if (roll < 80) {
    return 1 + r.below(300);
  } else {
    bytes = elem * (1 + r.below(256));
  }
  return std::max<int64_t>(1, bytes / elem);
}

std::vector<int64_t> strides(Rng& r, const Shape& dims, int64_t elem) {
  const size_t rank = dims.size();
  if (rank < 2) return {};
  std::vector<int64_t> s(rank - 1);
  const int64_t mode = r.below(6);
  int64_t next = saturating_mul(elem, dims[rank - 1]);  // one row of the dimension inside
  for (size_t j = rank - 1; j-- > 0;) {
    switch (mode) {
      case 0:
      case 1:  // dense
        s[j] = next;
        break;
      case 2: {  // padded
        const int64_t to = r.percent(50) ? 16 : 32;
        const int64_t pad = 16 * r.below(4);
        // Past INT64_MAX the padding wraps, as it did when the corpus was
        // recorded (two's complement, now without overflowing).
        s[j] = wrapping_add(round_up(next, to), pad);
        break;
      }
      case 3:  // any multiple of 16: rows may overlap
        s[j] = 16 * (1 + r.below(int64_t{1} << 16));
        break;
      case 4: {  // odd
        const int64_t roll = r.below(3);
        s[j] = roll == 0 ? 8 * (1 + 2 * r.below(1000)) : roll == 1 ? 1 + r.below(100000) : 32 * (1 + r.below(4096));
        break;
      }
      default: {  // near the 2^40 limit
        const int64_t near[] = {(int64_t{1} << 40) - 16, int64_t{1} << 40, (int64_t{1} << 40) + 16, int64_t{1} << 39,
                                (int64_t{1} << 40) - 32};
        s[j] = r.pick(near);
        break;
      }
    }
    if (r.percent(2)) s[j] = r.percent(50) ? 0 : -16;
    next = saturating_mul(s[j], dims[j]);
  }
  return s;
}

void mix(uint64_t& h, uint64_t v) { h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2); }

}  // namespace

TensorMapSpec make(uint64_t seed, uint64_t index, uintptr_t base) {
  Rng r(seed ^ ((index + 1) * 0xD1B54A32D192ED03ull));
  TensorMapSpec spec;
  spec.dtype = DType{r.pick(kKinds)};
  const int64_t elem = spec.dtype.bytes();
  const int rank = r.percent(3) ? (r.percent(50) ? 0 : kMaxCaseRank) : 1 + static_cast<int>(r.below(5));
  // Interleave mostly where its rank rule allows it.
  const int64_t interleave = r.below(100);
  spec.interleave = interleave < (rank >= 3 ? 60 : 95) ? TensorMapInterleave::kNone
                    : interleave % 2 == 0              ? TensorMapInterleave::k16B
                                                       : TensorMapInterleave::k32B;
  spec.swizzle = static_cast<Swizzle>(r.below(4));
  spec.oob_fill = r.percent(8) ? TensorMapOobFill::kNan : TensorMapOobFill::kZero;
  const int64_t offsets[] = {16, 32, 48, 64, 96, 8, 4, 1};
  const int64_t offset = r.percent(90) ? 0 : r.pick(offsets);
  spec.address = r.percent(1) ? nullptr : reinterpret_cast<const void*>(base + offset);
  for (int d = 0; d < rank; ++d) spec.dims.push_back(dim(r));
  for (int d = 0; d < rank; ++d) {
    spec.box.push_back(d + 1 == rank ? inner_box(r, elem, spec.swizzle) : outer_box(r));
  }
  spec.strides = strides(r, spec.dims, elem);
  spec.element_strides.assign(rank, 1);
  if (r.percent(30)) {
    for (int64_t& e : spec.element_strides) {
      const int64_t roll = r.below(100);
      e = roll < 60 ? 1 : roll < 95 ? 2 + r.below(7) : (r.percent(50) ? 0 : 9);
    }
  }
  return spec;
}

uint64_t fingerprint(const TensorMapSpec& spec, uintptr_t base) {
  uint64_t h = 0;
  mix(h, static_cast<uint64_t>(spec.dtype.kind));
  mix(h, spec.address == nullptr ? ~uint64_t{0} : reinterpret_cast<uintptr_t>(spec.address) - base);
  mix(h, static_cast<uint64_t>(spec.swizzle) << 8 | static_cast<uint64_t>(spec.interleave) << 4 |
             static_cast<uint64_t>(spec.oob_fill));
  for (const auto* v : {&spec.dims, &spec.strides, &spec.box, &spec.element_strides}) {
    mix(h, v->size());
    for (int64_t x : *v) mix(h, static_cast<uint64_t>(x));
  }
  return h;
}

std::optional<std::string> deliberate_refusal(const TensorMapSpec& spec) {
  const size_t rank = spec.dims.size();
  if (spec.address == nullptr) {
    return "a null address: the driver encodes it, but no tensor lives there and every copy through it faults";
  }
  if (rank < 1 || spec.box.size() != rank) return std::nullopt;
  if (spec.interleave == TensorMapInterleave::kNone && spec.element_strides.size() == rank &&
      spec.element_strides.back() != 1) {
    return "an innermost element stride other than 1 without interleave: the hardware ignores it, so the host "
           "emulation and the GPU would disagree";
  }
  const int64_t span = swizzle_bytes(spec.swizzle), inner_bytes = spec.box.back() * spec.dtype.bytes();
  if (span != 0 && inner_bytes > span) {
    if (spec.interleave != TensorMapInterleave::kNone) {
      return "an interleaved box wider than its swizzle: tessel's kernels copy wide swizzled boxes as panels, "
             "which interleaved layouts do not have";
    }
    if (inner_bytes % span != 0 || spec.box.back() > tma::kMaxBoxDim) {
      return "a box wider than its swizzle that is not whole panels of at most 256 elements in all: the driver "
             "sees one panel, but tessel's kernels copy every panel";
    }
  }
  return std::nullopt;
}

Verdict judge(const TensorMapSpec& spec, bool driver_accepted, absl::Status* ours) {
  *ours = validate(spec, 90);
  if (driver_accepted == ours->ok()) return Verdict::kAgree;
  return !ours->ok() && deliberate_refusal(spec) ? Verdict::kDeliberate : Verdict::kDisagree;
}

std::vector<uint64_t> block_fingerprints(uint64_t seed, int64_t count, uintptr_t base) {
  std::vector<uint64_t> blocks((count + Corpus::kBlock - 1) / Corpus::kBlock);
  for (int64_t i = 0; i < count; ++i) {
    mix(blocks[i / Corpus::kBlock], fingerprint(make(seed, i, base), base));
  }
  return blocks;
}

std::string Corpus::serialize() const {
  std::string out = absl::StrCat(
      "# tessel tensor-map corpus: the CUDA driver's verdict on each case of tests/tma_cases.cc's generator\n",
      "# (1 = cuTensorMapEncodeTiled accepted it), recorded by tests/gpu/tma_driver_test.cc.\n", "seed ", seed,
      "\ncount ", accepted.size(), "\ndriver ", driver, "\n");
  for (uint64_t b : blocks) absl::StrAppend(&out, "block ", absl::Hex(b, absl::kZeroPad16), "\n");
  // 64 cases per line, as hex nibbles (case 4k + i at bit i of nibble k).
  for (size_t line = 0; line < accepted.size(); line += 256) {
    absl::StrAppend(&out, "verdicts ");
    for (size_t k = line; k < std::min(accepted.size(), line + 256); k += 4) {
      int nibble = 0;
      for (size_t i = 0; i < 4 && k + i < accepted.size(); ++i) nibble |= accepted[k + i] << i;
      out += "0123456789abcdef"[nibble];
    }
    out += '\n';
  }
  return out;
}

absl::StatusOr<Corpus> Corpus::parse(const std::string& text) {
  Corpus c;
  int64_t count = -1;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (line.front() == '#') continue;
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(line, absl::MaxSplits(' ', 1));
    auto bad = [&] { return absl::InvalidArgumentError(absl::StrCat("tensor-map corpus: bad line: ", line)); };
    if (kv.first == "seed") {
      if (!absl::SimpleAtoi(kv.second, &c.seed)) return bad();
    } else if (kv.first == "count") {
      if (!absl::SimpleAtoi(kv.second, &count)) return bad();
    } else if (kv.first == "driver") {
      c.driver = std::string(kv.second);
    } else if (kv.first == "block") {
      uint64_t b = 0;
      if (!absl::SimpleHexAtoi(kv.second, &b)) return bad();
      c.blocks.push_back(b);
    } else if (kv.first == "verdicts") {
      for (char ch : kv.second) {
        int nibble = 0;
        if (!absl::SimpleHexAtoi(absl::string_view(&ch, 1), &nibble)) return bad();
        for (int i = 0; i < 4; ++i) c.accepted.push_back(nibble >> i & 1);
      }
    } else {
      return bad();
    }
  }
  if (count < 0 || static_cast<int64_t>(c.accepted.size()) < count ||
      static_cast<int64_t>(c.accepted.size()) >= count + 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor-map corpus: ", c.accepted.size(), " verdicts for a count of ", count));
  }
  c.accepted.resize(count);
  if (static_cast<int64_t>(c.blocks.size()) != (count + kBlock - 1) / kBlock) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor-map corpus: ", c.blocks.size(), " block fingerprints for ", count, " cases"));
  }
  return c;
}

std::string describe(const TensorMapSpec& spec, uintptr_t base) {
  auto list = [](const std::vector<int64_t>& v) { return absl::StrCat("{", absl::StrJoin(v, ", "), "}"); };
  const char* interleave[] = {"none", "16B", "32B"};
  return absl::StrCat(
      std::string(spec.dtype.name()), " rank ", spec.dims.size(), " dims ", list(spec.dims), " strides ",
      list(spec.strides), " box ", list(spec.box), " element_strides ", list(spec.element_strides), " swizzle ",
      std::string(swizzle_name(spec.swizzle)), " interleave ", interleave[static_cast<int>(spec.interleave) % 3],
      " fill ", spec.oob_fill == TensorMapOobFill::kNan ? "nan" : "zero", " address ",
      spec.address == nullptr ? std::string("null")
                              : absl::StrCat("base+", reinterpret_cast<uintptr_t>(spec.address) - base));
}

}  // namespace tessel::tma_cases
