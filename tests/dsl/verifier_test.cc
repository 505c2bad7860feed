// The verifier on hand-made malformed IR, and on every kind of kernel the
// builder makes (before and after the pass that drops unchanged carried values).
#include "dsl/verifier.h"

#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dsl/builder.h"
#include "dsl/ops.h"
#include "dsl/state.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;

// Kernel IR written op by op, with no checks: the verifier's job.
class HandIr {
 public:
  explicit HandIr(std::string name) {
    ir_.name = std::move(name);
    ir_.blocks.emplace_back();
  }

  int param(const Type& type, std::string name) {
    int v = new_value(type, -1, 0, static_cast<int>(ir_.blocks[0].args.size()));
    ir_.blocks[0].args.push_back(v);
    ir_.params.push_back(Param{std::move(name), type, v});
    return v;
  }
  // Appends an op to `block`; returns its index.
  int op(int block, OpCode code, std::vector<int> operands, const std::vector<Type>& results = {}) {
    int index = static_cast<int>(ir_.ops.size());
    Op o{code, std::move(operands), {}, {}, {}, 0, std::source_location::current()};
    for (size_t i = 0; i < results.size(); ++i) {
      o.results.push_back(new_value(results[i], index, block, static_cast<int>(i)));
    }
    ir_.ops.push_back(std::move(o));
    ir_.blocks[block].ops.push_back(index);
    return index;
  }
  // Appends an op with one result; returns the result.
  int value(int block, OpCode code, std::vector<int> operands, const Type& type) {
    return ir_.ops[op(block, code, std::move(operands), {type})].results[0];
  }
  // A block nested in `parent`, owned by op `owner`.
  int block(int owner, int parent) {
    ir_.blocks.push_back(Block{{}, {}, parent});
    int b = static_cast<int>(ir_.blocks.size()) - 1;
    ir_.ops[owner].blocks.push_back(b);
    return b;
  }
  int block_arg(int block, const Type& type) {
    int v = new_value(type, -1, block, static_cast<int>(ir_.blocks[block].args.size()));
    ir_.blocks[block].args.push_back(v);
    return v;
  }
  int result(int op, int i = 0) const { return ir_.ops[op].results[i]; }
  void set_ints(int op, std::vector<int64_t> ints) { ir_.ops[op].ints = std::move(ints); }
  const KernelIR& ir() const { return ir_; }

 private:
  int new_value(const Type& type, int def_op, int def_block, int index) {
    ir_.values.push_back(ValueInfo{type, def_op, def_block, index});
    return static_cast<int>(ir_.values.size()) - 1;
  }

  KernelIR ir_;
};

// A loop `for i in [0, n) step 1` in the kernel body carrying `inits`, with
// results of `result_types`; returns the op and its body through `body`.
int ForLoop(HandIr& h, int n, const std::vector<int>& inits, const std::vector<Type>& result_types, int& body) {
  int lo = h.value(0, OpCode::kConstant, {}, i32);
  int step = h.value(0, OpCode::kConstant, {}, i32);
  std::vector<int> operands = {lo, n, step};
  operands.insert(operands.end(), inits.begin(), inits.end());
  int loop = h.op(0, OpCode::kFor, operands, result_types);
  body = h.block(loop, 0);
  h.block_arg(body, i32);
  for (const Type& t : result_types) h.block_arg(body, t);
  return loop;
}

void ExpectInvalid(const HandIr& h, absl::string_view words) {
  absl::Status s = verify(h.ir());
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("verifier: kernel '", h.ir().name, "': ", words)));
}

TEST(Verifier, AcceptsAWellFormedLoop) {
  HandIr h("k");
  int n = h.param(i32, "n");
  int zero = h.value(0, OpCode::kConstant, {}, f32);
  int body;
  int loop = ForLoop(h, n, {zero}, {f32}, body);
  int next = h.value(body, OpCode::kAdd, {h.ir().blocks[body].args[1], zero}, f32);
  h.op(body, OpCode::kYield, {next});
  h.value(0, OpCode::kAdd, {h.result(loop), zero}, f32);
  EXPECT_TRUE(verify(h.ir()).ok()) << verify(h.ir());
}

TEST(Verifier, RejectsAnOperandUsedAfterItsLoop) {
  HandIr h("k");
  int n = h.param(i32, "n");
  int body;
  ForLoop(h, n, {}, {}, body);
  int inner = h.value(body, OpCode::kAdd, {n, n}, i32);
  h.op(body, OpCode::kYield, {});
  h.value(0, OpCode::kAdd, {inner, n}, i32);
  ExpectInvalid(h, absl::StrCat("add: operand %", inner, " is not defined in scope"));
}

TEST(Verifier, RejectsAnOperandUsedBeforeItsDefinition) {
  HandIr h("k");
  int n = h.param(i32, "n");
  int later = static_cast<int>(h.ir().values.size()) + 1;
  h.value(0, OpCode::kMul, {n, later}, i32);
  h.value(0, OpCode::kConstant, {}, i32);
  ExpectInvalid(h, absl::StrCat("mul: operand %", later, " is not defined in scope"));
}

TEST(Verifier, RejectsAnOperandThatIsNoValue) {
  HandIr h("k");
  int n = h.param(i32, "n");
  h.value(0, OpCode::kSub, {n, 99}, i32);
  ExpectInvalid(h, "sub: operand %99 is not defined in scope");
}

TEST(Verifier, RejectsAThenValueUsedInElse) {
  HandIr h("k");
  int c = h.param(i1, "c");
  int branch = h.op(0, OpCode::kIf, {c});
  int then_block = h.block(branch, 0);
  int t = h.value(then_block, OpCode::kConstant, {}, i32);
  h.op(then_block, OpCode::kYield, {});
  int else_block = h.block(branch, 0);
  h.value(else_block, OpCode::kNeg, {t}, i32);
  h.op(else_block, OpCode::kYield, {});
  ExpectInvalid(h, absl::StrCat("neg: operand %", t, " is not defined in scope"));
}

TEST(Verifier, RejectsAYieldBeforeTheEndOfABlock) {
  HandIr h("k");
  int n = h.param(i32, "n");
  int body;
  ForLoop(h, n, {}, {}, body);
  h.op(body, OpCode::kYield, {});
  h.value(body, OpCode::kAdd, {n, n}, i32);
  ExpectInvalid(h, "yield: yield must end a nested block");
}

TEST(Verifier, RejectsAYieldInTheKernelBody) {
  HandIr h("k");
  h.op(0, OpCode::kYield, {});
  ExpectInvalid(h, "yield: yield must end a nested block");
}

TEST(Verifier, RejectsANestedBlockWithoutYield) {
  HandIr h("k");
  int n = h.param(i32, "n");
  int body;
  ForLoop(h, n, {}, {}, body);
  h.value(body, OpCode::kAdd, {n, n}, i32);
  ExpectInvalid(h, "for: nested block does not end in yield");
}

TEST(Verifier, RejectsACarriedValueChangingType) {
  HandIr h("k");
  int n = h.param(i32, "n");
  int zero = h.value(0, OpCode::kConstant, {}, f32);
  int body;
  ForLoop(h, n, {zero}, {i32}, body);
  h.op(body, OpCode::kYield, {h.ir().blocks[body].args[1]});
  ExpectInvalid(h, "for: carried value 0 changes type");
}

// A while loop carrying `inits` as `types`: its test and body blocks, each
// with an argument per carried value.
int WhileLoop(HandIr& h, const std::vector<int>& inits, const std::vector<Type>& types, int& test, int& body) {
  int loop = h.op(0, OpCode::kWhile, inits, types);
  test = h.block(loop, 0);
  body = h.block(loop, 0);
  for (const Type& t : types) {
    h.block_arg(test, t);
    h.block_arg(body, t);
  }
  return loop;
}

TEST(Verifier, ChecksWhileLoops) {
  {
    HandIr h("k");
    int n = h.param(i32, "n");
    int test, body;
    WhileLoop(h, {n}, {i32}, test, body);
    const int arg = h.ir().blocks[test].args[0];
    h.op(test, OpCode::kYield, {h.value(test, OpCode::kGt, {arg, arg}, i1)});
    h.op(body, OpCode::kYield, {h.ir().blocks[body].args[0]});
    EXPECT_TRUE(verify(h.ir()).ok()) << verify(h.ir());
  }
  {
    HandIr h("k");
    int n = h.param(i32, "n");
    int test, body;
    WhileLoop(h, {n}, {i32}, test, body);
    h.op(test, OpCode::kYield, {h.ir().blocks[test].args[0]});
    h.op(body, OpCode::kYield, {h.ir().blocks[body].args[0]});
    ExpectInvalid(h, "yield: a while's condition must be a scalar i1");
  }
  {
    HandIr h("k");
    int n = h.param(i32, "n");
    int c = h.value(0, OpCode::kConstant, {}, i1);
    int test, body;
    WhileLoop(h, {n}, {i32}, test, body);
    h.op(test, OpCode::kYield, {c});
    h.op(body, OpCode::kYield, {c});
    ExpectInvalid(h, "yield: value 0 changes type");
  }
  {
    HandIr h("k");
    int n = h.param(i32, "n");
    int loop = h.op(0, OpCode::kWhile, {n}, {i32});
    h.block(loop, 0);
    ExpectInvalid(h, "while: malformed");
  }
}

TEST(Verifier, RejectsAYieldOfAnotherType) {
  HandIr h("k");
  int n = h.param(i32, "n");
  int zero = h.value(0, OpCode::kConstant, {}, f32);
  int body;
  ForLoop(h, n, {zero}, {f32}, body);
  h.op(body, OpCode::kYield, {n});
  ExpectInvalid(h, "yield: value 0 changes type");
}

TEST(Verifier, RejectsAYieldOfTheWrongCount) {
  HandIr h("k");
  int n = h.param(i32, "n");
  int body;
  ForLoop(h, n, {}, {}, body);
  h.op(body, OpCode::kYield, {n});
  ExpectInvalid(h, "yield: yields a different number of values");
}

TEST(Verifier, RejectsLoopBoundsOfDifferentTypes) {
  HandIr h("k");
  int n = h.param(i64, "n");
  int body;
  ForLoop(h, n, {}, {}, body);
  h.op(body, OpCode::kYield, {});
  ExpectInvalid(h, "for: bounds must be integers of one type");
}

TEST(Verifier, RejectsAComparisonWithANonI1Result) {
  HandIr h("k");
  int n = h.param(i32, "n");
  h.value(0, OpCode::kLt, {n, n}, i32);
  ExpectInvalid(h, "lt: comparison types are inconsistent");
}

TEST(Verifier, RejectsATileComparisonWithAScalarResult) {
  HandIr h("k");
  Type tile = Type::tile(i32, {64});
  int a = h.value(0, OpCode::kArange, {}, tile);
  h.value(0, OpCode::kEq, {a, a}, i1);
  ExpectInvalid(h, "eq: comparison types are inconsistent");
}

TEST(Verifier, RejectsArithmeticOnMismatchedTypes) {
  HandIr h("k");
  int x = h.param(f32, "x");
  int n = h.param(i32, "n");
  h.value(0, OpCode::kAdd, {x, n}, f32);
  ExpectInvalid(h, "add: operands and result must have one type");
}

TEST(Verifier, RejectsAnIfOnANonI1Condition) {
  HandIr h("k");
  int n = h.param(i32, "n");
  int branch = h.op(0, OpCode::kIf, {n});
  h.op(h.block(branch, 0), OpCode::kYield, {});
  h.op(h.block(branch, 0), OpCode::kYield, {});
  ExpectInvalid(h, "if: malformed");
}

TEST(Verifier, RejectsADotWhoseResultIsNotTheAccumulatorType) {
  HandIr h("k");
  int a = h.value(0, OpCode::kConstant, {}, Type::tile(bf16, {64, 64}));
  int acc = h.value(0, OpCode::kConstant, {}, Type::tile(f32, {64, 64}));
  h.value(0, OpCode::kDot, {a, a, acc}, Type::tile(bf16, {64, 64}));
  ExpectInvalid(h, "dot: malformed");
}

TEST(Verifier, RejectsMalformedNarrows) {
  const Type tile = Type::tile(f32, {4, 8});
  for (auto [ints, result, ok] : std::vector<std::tuple<std::vector<int64_t>, Type, bool>>{
           {{1, 2}, Type::tile(f32, {4, 6}), true},
           {{0, 0}, Type::tile(f32, {1, 8}), true},
           {{1, 3}, Type::tile(f32, {4, 6}), false},  // past the end
           {{1, -1}, Type::tile(f32, {4, 2}), false},
           {{2, 0}, Type::tile(f32, {4, 8}), false},
           {{0, 0}, Type::tile(f32, {2, 4}), false},  // another axis changed
           {{0, 0}, Type::tile(i32, {2, 8}), false},
           {{0}, Type::tile(f32, {2, 8}), false},
       }) {
    HandIr h("k");
    int x = h.value(0, OpCode::kConstant, {}, tile);
    h.set_ints(h.op(0, OpCode::kNarrow, {x}, {result}), ints);
    if (ok) {
      EXPECT_TRUE(verify(h.ir()).ok()) << verify(h.ir());
    } else {
      ExpectInvalid(h, "narrow: malformed");
    }
  }
}

TEST(Verifier, RejectsMalformedConcats) {
  const Type a = Type::tile(f32, {4, 8}), b = Type::tile(f32, {4, 3});
  for (auto [ints, second, result, ok] : std::vector<std::tuple<std::vector<int64_t>, Type, Type, bool>>{
           {{1}, b, Type::tile(f32, {4, 11}), true},
           {{1}, b, Type::tile(f32, {4, 12}), false},
           {{0}, b, Type::tile(f32, {8, 8}), false},  // b differs along the other axis
           {{1}, Type::tile(i32, {4, 3}), Type::tile(f32, {4, 11}), false},
           {{2}, b, Type::tile(f32, {4, 11}), false},
           {{}, b, Type::tile(f32, {4, 11}), false},
       }) {
    HandIr h("k");
    int x = h.value(0, OpCode::kConstant, {}, a), y = h.value(0, OpCode::kConstant, {}, second);
    h.set_ints(h.op(0, OpCode::kConcat, {x, y}, {result}), ints);
    if (ok) {
      EXPECT_TRUE(verify(h.ir()).ok()) << verify(h.ir());
    } else {
      ExpectInvalid(h, "concat: malformed");
    }
  }
}

TEST(Verifier, RejectsMalformedScans) {
  const int64_t add = static_cast<int64_t>(OpCode::kAdd), sub = static_cast<int64_t>(OpCode::kSub);
  const Type tile = Type::tile(f32, {4, 8});
  const char* kNeeds = "scan: needs an axis of its operand, a combiner of add, mul, max or min, and a reverse flag";
  for (auto [ints, result, error] : std::vector<std::tuple<std::vector<int64_t>, Type, const char*>>{
           {{1, add, 1}, tile, nullptr},
           {{1, add}, tile, "scan: malformed"},
           {{0, add, 0}, Type::tile(f32, {8}), "scan: malformed"},
           {{2, add, 0}, tile, kNeeds},
           {{0, sub, 0}, tile, kNeeds},
           {{0, add, 2}, tile, kNeeds},
       }) {
    HandIr h("k");
    int x = h.value(0, OpCode::kConstant, {}, tile);
    h.set_ints(h.op(0, OpCode::kScan, {x}, {result}), ints);
    if (error == nullptr) {
      EXPECT_TRUE(verify(h.ir()).ok()) << verify(h.ir());
    } else {
      ExpectInvalid(h, error);
    }
  }
}

TEST(Verifier, RejectsMalformedSorts) {
  const Type tile = Type::tile(i32, {4, 8});
  const Type floats = Type::tile(f32, {4, 8});
  const char* kNeeds = "sort: needs an axis of its operand, a descending flag and a positions flag";
  for (auto [ints, operand, result, error] : std::vector<std::tuple<std::vector<int64_t>, Type, Type, const char*>>{
           {{1, 1, 0}, tile, tile, nullptr},
           {{1, 0, 1}, floats, tile, nullptr},  // positions: i32
           {{1, 1}, tile, tile, "sort: malformed"},
           {{0, 0, 0}, tile, Type::tile(i32, {4, 4}), "sort: malformed"},
           {{0, 0, 1}, floats, floats, "sort: malformed"},
           {{2, 0, 0}, tile, tile, kNeeds},
           {{-1, 0, 0}, tile, tile, kNeeds},
           {{0, 2, 0}, tile, tile, kNeeds},
           {{0, 0, 2}, tile, tile, kNeeds},
       }) {
    HandIr h("k");
    int x = h.value(0, OpCode::kConstant, {}, operand);
    h.set_ints(h.op(0, OpCode::kSort, {x}, {result}), ints);
    if (error == nullptr) {
      EXPECT_TRUE(verify(h.ir()).ok()) << verify(h.ir());
    } else {
      ExpectInvalid(h, error);
    }
  }
}

TEST(Verifier, MathFormsOnlyWhereTheFunctionHasOne) {
  const int64_t fast = static_cast<int64_t>(MathForm::kFast);
  for (auto [code, ints, error] : std::vector<std::tuple<OpCode, std::vector<int64_t>, const char*>>{
           {OpCode::kExp, {fast}, nullptr},
           {OpCode::kTanh, {fast}, nullptr},
           {OpCode::kSigmoid, {fast}, "sigmoid: malformed math form"},
           {OpCode::kExp, {7}, "exp: malformed math form"},
           {OpCode::kSin, {fast, fast}, "sin: malformed math form"},
       }) {
    HandIr h("k");
    int x = h.value(0, OpCode::kConstant, {}, f32);
    h.set_ints(h.op(0, code, {x}, {f32}), ints);
    if (error == nullptr) {
      EXPECT_TRUE(verify(h.ir()).ok()) << verify(h.ir());
    } else {
      ExpectInvalid(h, error);
    }
  }
  HandIr h("k");
  int x = h.value(0, OpCode::kConstant, {}, f32);
  h.value(0, OpCode::kErf, {x}, f64);
  ExpectInvalid(h, "erf: operand and result must have one type");
  // Division has a fast form, for floats only; other binary ops have none.
  for (auto [code, type, error] : std::vector<std::tuple<OpCode, DType, const char*>>{
           {OpCode::kDiv, f32, nullptr},
           {OpCode::kDiv, i32, "div: malformed math form"},
           {OpCode::kMul, f32, "mul: malformed math form"},
       }) {
    HandIr b("k");
    int v = b.value(0, OpCode::kConstant, {}, type);
    b.set_ints(b.op(0, code, {v, v}, {type}), {fast});
    if (error == nullptr) {
      EXPECT_TRUE(verify(b.ir()).ok()) << verify(b.ir());
    } else {
      ExpectInvalid(b, error);
    }
  }
}

TEST(Verifier, RejectsAKernelWithoutBody) {
  KernelIR ir;
  ir.name = "k";
  EXPECT_THAT(verify(ir).message(), HasSubstr("verifier: kernel 'k': kernel has no body"));
}

// Builders of kernels with every kind of structure.
using KernelMaker = std::function<void(KernelBuilder&)>;

std::vector<std::pair<std::string, KernelMaker>> Makers() {
  return {
      {"vector_add",
       [](KernelBuilder& k) {
         Value x = k.arg(ptr(f32), "x");
         Value n = k.arg(i32, "n");
         Value offs = k.program_id(0) * 64 + k.arange(0, 64);
         Value mask = offs < n;
         store(x + offs, load(x + offs, mask, 0.0) * 2.0, mask);
       }},
      {"vars_in_nested_loops_and_ifs",
       [](KernelBuilder& k) {
         Value out = k.arg(ptr(f32), "out");
         Value n = k.arg(i32, "n");
         Var acc = k.var(k.zeros({16}, f32));
         Var count = k.var(0);
         Var unused = k.var(n);
         k.for_range(0, n, 1, [&](Value i) {
           k.for_range(0, i, 2, [&](Value j) {
             k.if_(
                 j < 4, [&] { acc = acc + cast(j, f32); }, [&] { count = count + 1; });
           });
           k.if_(i == 0, [&] { count = unused; });
         });
         store(out + k.arange(0, 16), acc + cast(count, f32));
       }},
      {"explicit_carried_values",
       [](KernelBuilder& k) {
         Value out = k.arg(ptr(i64), "out");
         Value init = k.constant(1, i64);
         std::vector<Value> r = k.for_range(0, 10, 1, {init, init}, [](Value, std::span<const Value> c) {
           return std::vector<Value>{c[0] * 2, c[1]};
         });
         store(out, r[0] + r[1]);
       }},
      {"persistent_tma_gemm",
       [](KernelBuilder& k) {
         Value a = k.tensor_map(bf16, {64, 32}, "a");
         Value b = k.tensor_map(bf16, {32, 64}, "b");
         Value c = k.tensor_map(f32, {64, 64}, "c");
         Value kk = k.arg(i32, "k");
         k.for_each_tile(16, [&](Value t) {
           Var acc = k.var(k.zeros({64, 64}, f32));
           k.for_range(0, kk, 32, [&](Value s) { acc = dot(tma_load(a, {t * 64, s}), tma_load(b, {s, 0}), acc); });
           tma_store(c, {t * 64, 0}, acc);
         });
       }},
      {"scans",
       [](KernelBuilder& k) {
         Value x = k.arg(ptr(f32), "x");
         Value t = load(x + k.arange(0, 64));
         store(x + k.arange(0, 64), cumsum(t, 0) + reshape(cummax(reshape(t, {8, 8}), 1, true), {64}));
       }},
      {"triggered_view",
       [](KernelBuilder& k) {
         TriggeredView view = k.triggered_view("plan");
         Value flag = k.arg(ptr(i32), "flag");
         view.wait(0);
         k.if_(view.arrived(1) & view.reusable(1), [&] { atomic_add(flag, 1); });
         view.publish(2);
       }},
  };
}

TEST(Verifier, AcceptsEveryKernelTheBuilderMakes) {
  for (const auto& [name, make] : Makers()) {
    SCOPED_TRACE(name);
    KernelBuilder k(name);
    make(k);
    EXPECT_TRUE(verify(k.state()->ir).ok()) << verify(k.state()->ir);
    absl::StatusOr<Kernel> kernel = k.build();
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_TRUE(verify(kernel->ir()).ok()) << verify(kernel->ir());
  }
}

}  // namespace
}  // namespace tessel
