// Fuzz target: kernels built from random op sequences. The bytes choose
// parameters (pointers, scalars, tensor maps), sometimes a cluster size,
// then up to 48 builder calls (tiles, arithmetic, math, random numbers,
// casts, shape ops, reductions, scans, sorts, argsorts, gathers, histograms, reductions by combine functions and
// arg-reductions, dot, loads and stores, atomics, TMA loads, stores, reductions and multicasts, loops with their
// pipelining and warp-specialization options, persistent tile loops, while loops, branches, vars) on values made
// earlier, many of them ill-typed on purpose. build() must answer with a kernel that verified or with a Status; nothing
// may crash, abort or hang. A kernel that builds prints, and the same bytes build it again to the same text and hash.
// Where the harness links the whole library (the regression replay, TESSEL_FUZZ_HOST defined) each kernel that builds
// is also compiled for the host, sm_90a, sm_80, sm_89 and gfx942.
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dsl/builder.h"
#include "dsl/ops.h"
#include "dsl/random.h"
#include "fuzz/reader.h"
#ifdef TESSEL_FUZZ_HOST
#include "tessel/tessel.h"
#endif

namespace tessel::fuzz {
namespace {

constexpr DType kDtypes[] = {i1, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64, f8e4m3, f8e5m2};
constexpr int64_t kSizes[] = {1, 2, 4, 8, 16, 32, 64, 128, 3, 0};
constexpr int kMaxOps = 48;

class Program {
 public:
  explicit Program(Reader& r) : r_(r), k_("fuzz") {}

  absl::StatusOr<Kernel> build() {
    const int params = static_cast<int>(r_.below(5));
    for (int i = 0; i < params; ++i) param(i);
    if (r_.below(4) == 0) k_.cluster(static_cast<int>(r_.below(10)));  // 0, 1 and 9 are refused
    ops(kMaxOps, 0);
    return k_.build();
  }

 private:
  DType dtype() { return kDtypes[r_.below(std::size(kDtypes))]; }
  Shape shape() {
    Shape s(r_.below(4));
    for (int64_t& d : s) d = kSizes[r_.below(std::size(kSizes))];
    return s;
  }
  // A value made earlier, or a literal.
  Operand operand() {
    if (values_.empty() || r_.below(5) == 0) {
      return r_.flip() ? Operand(static_cast<int64_t>(r_.number())) : Operand(static_cast<double>(r_.number()) / 3);
    }
    return values_[r_.below(static_cast<uint32_t>(values_.size()))];
  }
  Value value() {
    if (values_.empty()) return k_.program_id(0);
    return values_[r_.below(static_cast<uint32_t>(values_.size()))];
  }
  void keep(const Value& v) {
    if (values_.size() < 64) values_.push_back(v);
  }

  void param(int i) {
    const std::string name = absl::StrCat("p", i);
    switch (r_.below(3)) {
      case 0:
        keep(k_.arg(Type::pointer(dtype()), name));
        break;
      case 1:
        keep(k_.arg(Type(dtype()), name));
        break;
      default: {
        const DType d = dtype();
        const Shape box = shape();
        maps_.push_back(k_.tensor_map(d, box, name, static_cast<Swizzle>(r_.below(5))));
        break;
      }
    }
  }

  LoopOptions loop_options() {
    LoopOptions options;
    options.stages = static_cast<int>(r_.below(10));  // 9 is refused
    options.warp_specialize = r_.below(4) == 0;
    options.cooperative = r_.below(4) == 0;
    return options;
  }

  void ops(int budget, int depth) {
    for (int n = 0; n < budget && !r_.done(); ++n) op(depth);
  }

  // Every choice is read in a statement of its own: the order in which a
  // call's arguments are evaluated differs between compilers, and an input
  // must mean the same program to the fuzzer's build and the replay's.
  void op(int depth) {
    switch (r_.below(27)) {
      case 0: {
        const int64_t lo = r_.number();
        keep(k_.arange(lo, r_.number()));
        break;
      }
      case 1: {
        const Shape s = shape();
        const Operand v = operand();
        keep(k_.full(s, v, dtype()));
        break;
      }
      case 2: {
        const Operand v = operand();
        keep(k_.constant(v, dtype()));
        break;
      }
      case 3:
        keep(k_.program_id(static_cast<int>(r_.below(4))));
        break;
      case 4:
        keep(k_.num_programs(static_cast<int>(r_.below(4))));
        break;
      case 5: {
        const Operand a = operand(), b = operand();
        switch (r_.below(13)) {
          case 0:
            keep(a + b);
            break;
          case 1:
            keep(a - b);
            break;
          case 2:
            keep(a * b);
            break;
          case 3:
            keep(a / b);
            break;
          case 4:
            keep(a % b);
            break;
          case 5:
            keep(a & b);
            break;
          case 6:
            keep(a << b);
            break;
          case 7:
            keep(a < b);
            break;
          case 8:
            keep(a == b);
            break;
          case 9:
            keep(minimum(a, b));
            break;
          case 10:
            keep(cdiv(a, b));
            break;
          default:
            keep(a >> b);
            break;
        }
        break;
      }
      case 6: {
        const Operand a = operand();
        switch (r_.below(13)) {
          case 0: {
            const MathForm form = r_.below(2) == 0 ? MathForm::kAccurate : MathForm::kFast;
            keep(exp(a, form));
            break;
          }
          case 1: {
            const MathForm form = r_.below(2) == 0 ? MathForm::kAccurate : MathForm::kFast;
            keep(log(a, form));
            break;
          }
          case 8: {
            const MathForm form = r_.below(2) == 0 ? MathForm::kAccurate : MathForm::kFast;
            switch (r_.below(5)) {
              case 0:
                keep(exp2(a, form));
                break;
              case 1:
                keep(log2(a, form));
                break;
              case 2:
                keep(tanh(a, form));
                break;
              case 3:
                keep(sin(a, form));
                break;
              default:
                keep(cos(a, form));
                break;
            }
            break;
          }
          case 9:
            switch (r_.below(4)) {
              case 0:
                keep(sigmoid(a));
                break;
              case 1:
                keep(erf(a));
                break;
              case 2:
                keep(sinh(a));
                break;
              default:
                keep(cosh(a));
                break;
            }
            break;
          case 10: {
            const bool up = r_.below(2) == 0;
            keep(up ? ceil(a) : round(a));
            break;
          }
          case 11: {
            const Operand b = operand();
            const Operand c = operand();
            const int rounds = static_cast<int>(r_.below(12));  // 0 is refused
            switch (r_.below(8)) {
              case 0:
                keep(pow(a, b));
                break;
              case 1:
                keep(clamp(a, b, c));
                break;
              case 2:
                keep(div(a, b, r_.below(2) == 0 ? MathForm::kAccurate : MathForm::kFast));
                break;
              case 3:
                keep(umulhi(a, b));
                break;
              case 4:
                keep(rand(a, b, rounds));
                break;
              case 5:
                keep(randn(a, b, rounds));
                break;
              case 6:
                keep(randint4x(a, b, rounds)[r_.below(4)]);
                break;
              default:
                keep(where(a, b, c));
                break;
            }
            break;
          }
          case 2:
            keep(sqrt(a));
            break;
          case 3:
            keep(rsqrt(a));
            break;
          case 4:
            keep(abs(a));
            break;
          case 5:
            keep(floor(a));
            break;
          case 6:
            keep(-a);
            break;
          default:
            keep(!a);
            break;
        }
        break;
      }
      case 7: {
        const Operand x = operand();
        keep(cast(x, dtype()));
        break;
      }
      case 8: {
        const Operand c = operand(), a = operand();
        keep(select(c, a, operand()));
        break;
      }
      case 9: {
        const Operand a = operand(), b = operand();
        keep(fma(a, b, operand()));
        break;
      }
      case 10: {
        const Value x = value();
        keep(reshape(x, shape()));
        break;
      }
      case 11: {
        std::vector<int64_t> perm(r_.below(4));
        for (int64_t& p : perm) p = r_.below(4);
        const Value x = value();
        keep(trans(x, perm));
        break;
      }
      case 12: {
        const Value x = value();
        keep(expand_dims(x, static_cast<int>(r_.below(5)) - 1));
        break;
      }
      case 13: {
        const Value x = value();
        keep(broadcast_to(x, shape()));
        break;
      }
      case 14: {
        const Value x = value();
        const int axis = static_cast<int>(r_.below(4)) - 1;
        const bool reverse = r_.flip();
        const auto which = r_.below(14);
        switch (which) {
          case 0:
            keep(sum(x, axis));
            break;
          case 1:
            keep(max(x, axis));
            break;
          case 2:
            keep(argmax(x, axis));
            break;
          case 3:
            keep(argmin(x, axis));
            break;
          case 4:
            keep(cumsum(x, axis, reverse));
            break;
          case 5:
            keep(cumprod(x, axis, reverse));
            break;
          case 6:
            keep(cummax(x, axis, reverse));
            break;
          case 7:
            keep(cummin(x, axis, reverse));
            break;
          case 8:
            keep(r_.flip() ? sort(x, axis, reverse) : argsort(x, axis, reverse));
            break;
          case 9:
            keep(gather(x, value(), axis));
            break;
          case 10: {
            const int64_t bins = static_cast<int64_t>(r_.below(300)) - 2;
            keep(r_.flip() ? histogram(x, bins) : histogram(x, bins, value()));
            break;
          }
          case 11:
          case 12: {
            // A combine of one or two tiles from ops on its arguments and
            // earlier values (a tile among them is refused), reduced or
            // scanned.
            std::vector<Value> xs = {x};
            if (r_.flip()) xs.push_back(value());
            const Value outside = value();
            const bool flip = r_.flip();
            const CombineFn combine = [&](std::span<const Value> a, std::span<const Value> b) {
              std::vector<Value> out;
              for (size_t i = 0; i < a.size(); ++i) out.push_back(flip ? maximum(a[i], b[i]) : a[i] + b[i] * outside);
              return out;
            };
            for (const Value& v :
                 which == 11 ? reduce(xs, axis, combine) : associative_scan(xs, axis, combine, reverse)) {
              keep(v);
            }
            break;
          }
          default:
            keep(min(x, axis));
            break;
        }
        break;
      }
      case 15: {
        const Value a = value(), b = value();
        keep(dot(a, b, value()));
        break;
      }
      case 16: {
        const bool masked = r_.flip();
        const Operand ptrs = operand();
        if (!masked) {
          keep(load(ptrs));
          break;
        }
        const Operand mask = operand();
        keep(load(ptrs, mask, operand()));
        break;
      }
      case 17: {
        const bool masked = r_.flip();
        const Operand ptrs = operand(), v = operand();
        if (masked) {
          store(ptrs, v, operand());
        } else {
          store(ptrs, v);
        }
        break;
      }
      case 18: {
        const auto how = static_cast<AtomicOp>(r_.below(8));  // 7: not an operation
        const auto order = static_cast<MemoryOrder>(r_.below(5));  // 4: not an order
        const Operand ptrs = operand();
        keep(atomic_rmw(how, ptrs, operand(), order));
        break;
      }
      case 19: {
        const auto order = static_cast<MemoryOrder>(r_.below(5));
        const Operand ptr = operand(), compare = operand();
        keep(atomic_cas(ptr, compare, operand(), order));
        break;
      }
      case 20: {
        if (maps_.empty()) break;
        const Value map = maps_[r_.below(static_cast<uint32_t>(maps_.size()))];
        std::vector<Operand> coords;
        for (uint32_t c = r_.below(6); c > 0; --c) coords.push_back(operand());
        if (r_.flip()) {
          keep(tma_load(map, coords));
        } else {
          const Value tile = value();
          tma_store(map, coords, tile);
        }
        break;
      }
      case 21:
        if (depth < 3) {
          const LoopOptions options = loop_options();
          const Operand lo = operand(), hi = operand(), step = operand();
          k_.for_range(
              lo, hi, step,
              [&](Value i) {
                keep(i);
                ops(static_cast<int>(r_.below(6)), depth + 1);
              },
              options);
        }
        break;
      case 22:
        if (depth < 3) {
          const Operand cond = operand();
          k_.if_(
              cond, [&] { ops(static_cast<int>(r_.below(4)), depth + 1); },
              [&] { ops(static_cast<int>(r_.below(4)), depth + 1); });
        }
        break;
      case 23: {
        switch (r_.below(4)) {
          case 0:
            keep(k_.cluster_rank());
            break;
          case 1:
            k_.cluster(static_cast<int>(r_.below(10)));  // after other ops: refused
            break;
          default: {
            if (maps_.empty()) break;
            const Value map = maps_[r_.below(static_cast<uint32_t>(maps_.size()))];
            std::vector<Operand> coords;
            for (uint32_t c = r_.below(6); c > 0; --c) coords.push_back(operand());
            if (r_.flip()) {
              keep(tma_multicast(map, coords));
              break;
            }
            const auto how = static_cast<AtomicOp>(r_.below(8));  // 7: not an operation
            tma_reduce(how, map, coords, value());
            break;
          }
        }
        break;
      }
      case 24:
        if (depth < 3) {
          const LoopOptions options = loop_options();
          const Operand tiles = operand();
          k_.for_each_tile(
              tiles,
              [&](Value t) {
                keep(t);
                ops(static_cast<int>(r_.below(8)), depth + 1);
              },
              options);
        }
        break;
      case 25: {
        const Value a = value(), b = value();
        const Value acc = value();
        keep(dot(a, b, acc, r_.flip() ? Precision::kTf32 : Precision::kIeee));
        break;
      }
      default:
        if (depth < 3) {
          Var v = k_.var(operand());
          if (r_.below(4) == 0) {
            // A test of the Var (at times a tile's, or one that assigns it:
            // refused), and a body that assigns it.
            k_.while_(
                [&] {
                  if (r_.below(8) == 0) v = operand();
                  return r_.flip() ? v.get() < operand() : value();
                },
                [&] {
                  v = operand();
                  ops(static_cast<int>(r_.below(3)), depth + 1);
                });
          } else {
            const Operand hi = operand();
            k_.for_range(0, hi, 1, [&](Value) {
              v = operand();
              ops(static_cast<int>(r_.below(3)), depth + 1);
            });
          }
          keep(v.get());
        }
        break;
    }
  }

  Reader& r_;
  KernelBuilder k_;
  std::vector<Value> values_;
  std::vector<Value> maps_;
};

}  // namespace
}  // namespace tessel::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tessel::fuzz::Reader r(data, size);
  tessel::fuzz::Program program(r);
  absl::StatusOr<tessel::Kernel> kernel = program.build();
  if (!kernel.ok()) {
    if (kernel.status().message().empty()) std::abort();
    return 0;
  }
  // The same bytes build the same kernel again: its text and hash, which key the caches.
  tessel::fuzz::Reader again_bytes(data, size);
  tessel::fuzz::Program again_program(again_bytes);
  absl::StatusOr<tessel::Kernel> again = again_program.build();
  if (kernel->str().empty() || !again.ok() || again->str() != kernel->str() || again->hash() != kernel->hash()) {
    std::abort();
  }
#ifdef TESSEL_FUZZ_HOST
  // Every kernel that builds goes through each target's compiler, NVIDIA's
  // at a width the hash picks: a Status or code.
  static absl::StatusOr<tessel::Device> host = tessel::Device::open("host");
  if (host.ok()) (void)host->compile(*kernel);
  for (const char* arch : {"sm_90a", "sm_80", "sm_89", "gfx942"}) {
    tessel::CompileOptions options;
    options.arch = arch;
    options.num_warps = static_cast<int>(4 * (1 + kernel->hash() % 3));  // 4, 8 or 12
    (void)tessel::compile(*kernel, options);
  }
#endif
  return 0;
}
