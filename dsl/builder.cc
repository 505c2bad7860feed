#include "dsl/builder.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dsl/passes.h"
#include "dsl/printer.h"
#include "dsl/state.h"
#include "base/status.h"
#include "base/tma_rules.h"
#include "dsl/verifier.h"

namespace tessel {
namespace detail {

std::string loc_str(std::source_location loc) { return absl::StrCat(loc.file_name(), ":", loc.line()); }

BuilderState::BuilderState(std::string name) {
  ir.name = std::move(name);
  open(new_block());
}

Value BuilderState::fail(std::source_location loc, absl::string_view msg) {
  if (error.ok()) error = absl::InvalidArgumentError(absl::StrCat(loc_str(loc), ": ", msg));
  return Value();
}

int BuilderState::new_block() {
  ir.blocks.emplace_back();
  ir.blocks.back().parent = open_blocks.empty() ? -1 : current_block();
  block_open.push_back(false);
  return static_cast<int>(ir.blocks.size()) - 1;
}

int BuilderState::add_block_arg(int block, const Type& type) {
  int id = static_cast<int>(ir.values.size());
  ir.values.push_back(ValueInfo{type, -1, block, static_cast<int>(ir.blocks[block].args.size())});
  ir.blocks[block].args.push_back(id);
  return id;
}

void BuilderState::open(int block) {
  open_blocks.push_back(block);
  block_open[block] = true;
}

void BuilderState::close(int block) {
  TESSEL_CHECK(open_blocks.back() == block, "blocks close innermost first");
  open_blocks.pop_back();
  block_open[block] = false;
  for (size_t slot = 0; slot < vars.size(); ++slot) {
    if (var_block[slot] == block) vars[slot] = -1;
  }
}

int BuilderState::emit(OpCode op, std::vector<int> operands, const std::vector<Type>& result_types,
                       std::source_location loc, std::vector<int64_t> ints, double fval) {
  int index = static_cast<int>(ir.ops.size());
  Op o{op, std::move(operands), {}, {}, std::move(ints), fval, loc};
  for (size_t i = 0; i < result_types.size(); ++i) {
    o.results.push_back(static_cast<int>(ir.values.size()));
    ir.values.push_back(ValueInfo{result_types[i], index, current_block(), static_cast<int>(i)});
  }
  ir.ops.push_back(std::move(o));
  ir.blocks[current_block()].ops.push_back(index);
  return index;
}

Value BuilderState::emit1(OpCode op, std::vector<int> operands, const Type& type, std::source_location loc,
                          std::vector<int64_t> ints, double fval) {
  int index = emit(op, std::move(operands), {type}, loc, std::move(ints), fval);
  return value(ir.ops[index].results[0]);
}

int BuilderState::use(const Value& v, absl::string_view what, std::source_location loc) {
  if (!v.valid()) {
    if (!failed()) fail(loc, absl::StrCat(what, ": operand is an empty Value (default-constructed)"));
    return -1;
  }
  if (v.state() != this) {
    fail(loc, absl::StrCat(what, ": operand belongs to another kernel (kernel '", v.state()->ir.name,
                           "'); values cannot be shared between kernels"));
    return -1;
  }
  const ValueInfo& info = ir.values[v.id()];
  if (!block_open[info.def_block]) {
    fail(loc, absl::StrCat(what, ": operand %", v.id(), " (", info.type.str(),
                           ") was defined inside a loop body or if_ branch that has ended; carry it out with a Var"));
    return -1;
  }
  return v.id();
}

int BuilderState::constant(const Operand& literal, DType dtype, absl::string_view what, std::source_location loc) {
  if (literal.is_float()) {
    if (!dtype.is_float()) {
      fail(loc, absl::StrCat(what, ": float literal ", literal.float_value(), " cannot combine with ", dtype.name(),
                             " (cast one side)"));
      return -1;
    }
    return emit1(OpCode::kConstant, {}, dtype, loc, {}, literal.float_value()).id();
  }
  int64_t v = literal.int_value();
  if (dtype.is_float()) return emit1(OpCode::kConstant, {}, dtype, loc, {}, static_cast<double>(v)).id();
  bool fits;
  if (dtype.is_bool()) {
    fits = v == 0 || v == 1;
  } else if (dtype.bits() == 64) {
    fits = dtype.is_signed() || v >= 0;
  } else if (dtype.is_signed()) {
    int64_t lim = int64_t{1} << (dtype.bits() - 1);
    fits = v >= -lim && v < lim;
  } else {
    fits = v >= 0 && v < (int64_t{1} << dtype.bits());
  }
  if (!fits) {
    fail(loc, absl::StrCat(what, ": integer literal ", v, " does not fit in ", dtype.name()));
    return -1;
  }
  return emit1(OpCode::kConstant, {}, dtype, loc, {v}).id();
}

int BuilderState::operand(const Operand& o, std::optional<DType> hint, absl::string_view what,
                          std::source_location loc) {
  if (o.is_value()) return use(o.value(), what, loc);
  if (failed()) return -1;
  DType dtype = hint.value_or(o.is_float() ? f32 : i32);
  return constant(o, dtype, what, loc);
}

bool BuilderState::check_shape(const Shape& shape, absl::string_view what, std::source_location loc) {
  if (shape.empty() || shape.size() > 5) {
    fail(loc, absl::StrCat(what, ": tile rank must be 1 to 5, got shape ", shape_str(shape)));
    return false;
  }
  for (int64_t d : shape) {
    if (d <= 0) {
      fail(loc, absl::StrCat(what, ": tile dimensions must be positive, got shape ", shape_str(shape)));
      return false;
    }
  }
  if (numel(shape) > (int64_t{1} << 20)) {
    fail(loc, absl::StrCat(what, ": tile ", shape_str(shape), " has more than 2^20 elements"));
    return false;
  }
  return true;
}

namespace {
// The builders alive on this thread, newest last: an op whose operands are
// all literals (splat(1.0f, {64})) belongs to the newest.
thread_local std::vector<BuilderState*> builders_in_scope;
}  // namespace

BuilderState* state_of(absl::Span<const Operand* const> operands) {
  for (const Operand* o : operands) {
    if (o->is_value() && o->value().state() != nullptr) return o->value().state();
  }
  return builders_in_scope.empty() ? nullptr : builders_in_scope.back();
}

}  // namespace detail

using detail::BuilderState;

Type Value::type() const { return valid() ? state_->type(id_) : Type(); }

Var& Var::operator=(const Operand& v) {
  BuilderState* s = state_;
  if (s->vars[slot_] < 0) {
    s->fail(v.loc(), "Var assignment: the variable's scope has ended");
    return *this;
  }
  Type current = s->type(s->vars[slot_]);  // a copy: materializing `v` may grow the value table
  int id = s->operand(v, current.dtype(), "Var assignment", v.loc());
  if (id < 0) return *this;
  if (!v.is_value() && current.is_tile()) {  // `acc = 0.0` fills a tile Var
    id = s->emit1(OpCode::kSplat, {id}, current, v.loc()).id();
  }
  if (s->type(id) != current) {
    s->fail(v.loc(), absl::StrCat("Var assignment: a Var of type ", current.str(), " cannot take a value of type ",
                                  s->type(id).str(), "; a Var keeps its type"));
    return *this;
  }
  s->vars[slot_] = id;
  return *this;
}

Var& Var::operator=(const Var& v) { return *this = Operand(v); }

Value Var::get() const {
  if (state_ == nullptr || slot_ < 0 || state_->vars[slot_] < 0) {
    if (state_ != nullptr) state_->fail(std::source_location::current(), "Var read after its scope ended");
    return Value();
  }
  return state_->value(state_->vars[slot_]);
}

KernelBuilder::KernelBuilder(std::string name) : state_(std::make_unique<BuilderState>(std::move(name))) {
  detail::builders_in_scope.push_back(state_.get());
}

KernelBuilder::~KernelBuilder() {
  std::vector<BuilderState*>& in_scope = detail::builders_in_scope;
  auto it = std::find(in_scope.rbegin(), in_scope.rend(), state_.get());
  if (it != in_scope.rend()) in_scope.erase(std::next(it).base());
}

Value KernelBuilder::arg(const Type& type, std::string name, std::source_location loc) {
  BuilderState& s = *state_;
  if (!(type.is_scalar() || type.is_pointer())) {
    return s.fail(loc, absl::StrCat("arg '", name, "': arguments are scalars or pointers, got ", type.str(),
                                    " (use tensor_map or triggered_view)"));
  }
  if (type.is_pointer() && type.space() != AddressSpace::kGlobal) {
    return s.fail(loc, absl::StrCat("arg '", name, "': pointer arguments point to global memory"));
  }
  if (name.empty()) return s.fail(loc, "arg: an argument needs a name");
  for (const Param& p : s.ir.params) {
    if (p.name == name) return s.fail(loc, absl::StrCat("arg '", name, "': the name is used by another argument"));
  }
  int id = s.add_block_arg(0, type);
  s.ir.params.push_back(Param{std::move(name), type, id});
  return s.value(id);
}

Value KernelBuilder::tensor_map(DType dtype, Shape box, std::string name, Swizzle swizzle, std::source_location loc) {
  BuilderState& s = *state_;
  std::string what = absl::StrCat("tensor_map '", name, "'");
  // A kernel parameter declares no interleave, so its box is held to the
  // rules of a plain tiled map.
  if (absl::Status rule = tma::check_box(dtype, box, swizzle, TensorMapInterleave::kNone); !rule.ok()) {
    return s.fail(loc, absl::StrCat(what, ": ", rule.message()));
  }
  if (!s.check_shape(box, what, loc)) return Value();
  Value v = arg(Type::pointer(dtype), name, loc);  // name checks
  if (!v.valid()) return v;
  Type t = Type::tensor_map(dtype, std::move(box), swizzle);
  s.ir.values[v.id()].type = t;
  s.ir.params.back().type = t;
  return v;
}

TriggeredView KernelBuilder::triggered_view(std::string name, std::source_location loc) {
  Value v = arg(i64, name, loc);
  if (v.valid()) {
    state_->ir.values[v.id()].type = Type::triggered_view();
    state_->ir.params.back().type = Type::triggered_view();
  }
  return TriggeredView(v);
}

Value KernelBuilder::program_id(int axis, std::source_location loc) {
  if (axis < 0 || axis > 2) return state_->fail(loc, absl::StrCat("program_id: axis ", axis, " is not 0, 1 or 2"));
  return state_->emit1(OpCode::kProgramId, {}, i32, loc, {axis});
}

Value KernelBuilder::num_programs(int axis, std::source_location loc) {
  if (axis < 0 || axis > 2) return state_->fail(loc, absl::StrCat("num_programs: axis ", axis, " is not 0, 1 or 2"));
  return state_->emit1(OpCode::kNumPrograms, {}, i32, loc, {axis});
}

void KernelBuilder::cluster(int programs, std::source_location loc) {
  BuilderState& s = *state_;
  if (programs < 2 || programs > kMaxCluster) {
    s.fail(loc, absl::StrCat("cluster: a cluster takes 2 to ", kMaxCluster, " programs, got ", programs));
  } else if (!s.ir.ops.empty() || s.ir.cluster != 1) {
    s.fail(loc, "cluster: must be set once, before any op is built");
  } else {
    s.ir.cluster = programs;
  }
}

Value KernelBuilder::cluster_rank(std::source_location loc) { return program_id(0, loc) % state_->ir.cluster; }

Value KernelBuilder::arange(int64_t lo, int64_t hi, std::source_location loc) {
  BuilderState& s = *state_;
  if (hi <= lo) return s.fail(loc, absl::StrCat("arange(", lo, ", ", hi, "): hi must exceed lo"));
  if (lo < std::numeric_limits<int32_t>::min() || hi > std::numeric_limits<int32_t>::max()) {
    return s.fail(loc, absl::StrCat("arange(", lo, ", ", hi, "): bounds must fit in i32"));
  }
  if (!s.check_shape({hi - lo}, "arange", loc)) return Value();
  return s.emit1(OpCode::kArange, {}, Type::tile(i32, {hi - lo}), loc, {lo, hi});
}

Value KernelBuilder::constant(const Operand& value, DType dtype, std::source_location loc) {
  if (value.is_value()) return state_->fail(loc, "constant: expects a literal, not a Value");
  int id = state_->constant(value, dtype, "constant", loc);
  return id < 0 ? Value() : state_->value(id);
}

Value KernelBuilder::full(const Shape& shape, const Operand& value, DType dtype, std::source_location loc) {
  BuilderState& s = *state_;
  if (!s.check_shape(shape, "full", loc)) return Value();
  int id = s.operand(value, dtype, "full", loc);
  if (id < 0) return Value();
  if (s.type(id) != Type(dtype)) {
    return s.fail(loc, absl::StrCat("full: value of type ", s.type(id).str(), " does not match dtype ", dtype.name()));
  }
  return s.emit1(OpCode::kSplat, {id}, Type::tile(dtype, shape), loc);
}

Value KernelBuilder::zeros(const Shape& shape, DType dtype, std::source_location loc) {
  return full(shape, 0, dtype, loc);
}

Var KernelBuilder::var(const Operand& init, std::source_location loc) {
  BuilderState& s = *state_;
  int id = s.operand(init, std::nullopt, "var", loc);
  int slot = static_cast<int>(s.vars.size());
  s.vars.push_back(id);
  s.var_block.push_back(s.current_block());
  if (id < 0) s.vars[slot] = -1;
  return Var(&s, slot);
}

namespace {

// The live Vars at a point: slot and value.
std::vector<int> live_slots(const BuilderState& s) {
  std::vector<int> slots;
  for (size_t i = 0; i < s.vars.size(); ++i) {
    if (s.vars[i] >= 0) slots.push_back(static_cast<int>(i));
  }
  return slots;
}

// Resolves three loop bounds to one integer type.
bool loop_bounds(BuilderState& s, const Operand& lo, const Operand& hi, const Operand& step, absl::string_view what,
                 std::source_location loc, int out[3]) {
  std::optional<DType> hint;
  for (const Operand* o : {&lo, &hi, &step}) {
    if (o->is_value() && o->value().valid() && !hint) hint = o->value().type().dtype();
  }
  const Operand* ops[3] = {&lo, &hi, &step};
  for (int i = 0; i < 3; ++i) {
    out[i] = s.operand(*ops[i], hint, what, loc);
    if (out[i] < 0) return false;
    const Type& t = s.type(out[i]);
    if (!t.is_scalar() || !t.dtype().is_int() || t.is_bool()) {
      s.fail(loc, absl::StrCat(what, ": loop bounds must be integer scalars, got ", t.str()));
      return false;
    }
    if (t != s.type(out[0])) {
      s.fail(loc, absl::StrCat(what, ": loop bounds have different types ", s.type(out[0]).str(), " and ", t.str()));
      return false;
    }
  }
  return true;
}

}  // namespace

std::vector<Value> KernelBuilder::for_range(const Operand& lo, const Operand& hi, const Operand& step,
                                            const std::vector<Value>& inits,
                                            const std::function<std::vector<Value>(Value, std::span<const Value>)>& body,
                                            const LoopOptions& options, std::source_location loc) {
  BuilderState& s = *state_;
  int bounds[3];
  // On failure the caller still gets one (invalid) Value per init to index.
  std::vector<Value> failed(inits.size());
  if (options.stages < 0 || options.stages > kMaxLoopStages) {
    s.fail(loc, absl::StrCat("for_range: stages = ", options.stages, " is outside [0, ", kMaxLoopStages,
                             "] (0 picks the default, 1 turns pipelining off)"));
    return failed;
  }
  if (options.cooperative && !options.warp_specialize) {
    s.fail(loc, "for_range: cooperative consumers need warp_specialize");
    return failed;
  }
  if (!loop_bounds(s, lo, hi, step, "for_range", loc, bounds)) return failed;
  std::vector<int> operands(bounds, bounds + 3);
  std::vector<int> init_ids;
  for (const Value& v : inits) {
    int id = s.use(v, "for_range init", loc);
    if (id < 0) return failed;
    init_ids.push_back(id);
  }
  // Vars live here are carried too; a pass drops the ones the body leaves alone.
  std::vector<int> slots = live_slots(s);
  for (int slot : slots) init_ids.push_back(s.vars[slot]);
  operands.insert(operands.end(), init_ids.begin(), init_ids.end());

  std::vector<Type> types;
  for (int id : init_ids) types.push_back(s.type(id));
  int op = s.emit(OpCode::kFor, operands, types, loc);
  // ints: [stages (0: the default), the warpgroups of a warp-specialized
  // loop's consumer (0: not specialized)], trailing defaults left out.
  if (options.stages != 0 || options.warp_specialize) s.ir.ops[op].ints.push_back(options.stages);
  if (options.warp_specialize) s.ir.ops[op].ints.push_back(options.cooperative ? 2 : 1);
  int block = s.new_block();
  s.ir.ops[op].blocks.push_back(block);
  Value iv = s.value(s.add_block_arg(block, s.type(bounds[0])));
  std::vector<Value> carried;
  for (size_t i = 0; i < init_ids.size(); ++i) {
    int arg = s.add_block_arg(block, types[i]);
    if (i < inits.size()) carried.push_back(s.value(arg));
    else s.vars[slots[i - inits.size()]] = arg;
  }
  s.open(block);
  std::vector<Value> next = body(iv, carried);
  std::vector<int> yields;
  if (!s.failed() && next.size() != inits.size()) {
    s.fail(loc, absl::StrCat("for_range: the body returned ", next.size(), " values for ", inits.size(),
                             " carried values"));
  }
  for (size_t i = 0; i < init_ids.size() && !s.failed(); ++i) {
    int id = i < inits.size() ? s.use(next[i], "for_range yield", loc) : s.vars[slots[i - inits.size()]];
    if (id < 0) break;
    if (s.type(id) != types[i]) {
      s.fail(loc, absl::StrCat("for_range: loop-carried value ", i, " changes type from ", types[i].str(), " to ",
                               s.type(id).str()));
      break;
    }
    yields.push_back(id);
  }
  if (!s.failed()) s.emit(OpCode::kYield, yields, {}, loc);
  s.close(block);
  const std::vector<int>& results = s.ir.ops[op].results;
  std::vector<Value> out;
  for (size_t i = 0; i < results.size(); ++i) {
    if (i < inits.size()) out.push_back(s.value(results[i]));
    else s.vars[slots[i - inits.size()]] = results[i];
  }
  return out;
}

void KernelBuilder::for_range(const Operand& lo, const Operand& hi, const Operand& step,
                              const std::function<void(Value)>& body, const LoopOptions& options,
                              std::source_location loc) {
  for_range(lo, hi, step, {}, [&](Value iv, std::span<const Value>) {
    body(iv);
    return std::vector<Value>{};
  }, options, loc);
}

void KernelBuilder::for_each_tile(const Operand& num_tiles, const std::function<void(Value)>& body,
                                  const LoopOptions& options, std::source_location loc) {
  Value pid = program_id(0, loc);
  Value n = num_programs(0, loc);
  const int c = state_->ir.cluster;
  if (c > 1) {
    pid = pid / c;
    n = n / c;
  }
  for_range(pid, num_tiles, n, body, options, loc);
}

void KernelBuilder::if_(const Operand& cond, const std::function<void()>& then_body,
                        const std::function<void()>& else_body, std::source_location loc) {
  BuilderState& s = *state_;
  int c = s.operand(cond, i1, "if_", loc);
  if (c < 0) return;
  if (s.type(c) != Type(i1)) {
    s.fail(loc, absl::StrCat("if_: the condition must be a scalar i1, got ", s.type(c).str()));
    return;
  }
  std::vector<int> slots = live_slots(s);
  std::vector<int> before;
  for (int slot : slots) before.push_back(s.vars[slot]);
  std::vector<Type> types;
  for (int id : before) types.push_back(s.type(id));
  int op = s.emit(OpCode::kIf, {c}, types, loc);

  std::vector<int> branch_values[2];
  const std::function<void()>* bodies[2] = {&then_body, &else_body};
  for (int b = 0; b < 2; ++b) {
    int block = s.new_block();
    s.ir.ops[op].blocks.push_back(block);
    for (size_t i = 0; i < slots.size(); ++i) s.vars[slots[i]] = before[i];
    s.open(block);
    if (*bodies[b]) (*bodies[b])();
    for (int slot : slots) branch_values[b].push_back(s.vars[slot]);
    for (size_t i = 0; i < slots.size() && !s.failed(); ++i) {
      if (s.type(branch_values[b][i]) != types[i]) {
        s.fail(loc, absl::StrCat("if_: a Var of type ", types[i].str(), " is assigned a value of type ",
                                 s.type(branch_values[b][i]).str(), " in the ", b == 0 ? "then" : "else",
                                 " branch; a Var keeps its type"));
      }
    }
    if (!s.failed()) s.emit(OpCode::kYield, branch_values[b], {}, loc);
    s.close(block);
  }
  const std::vector<int>& results = s.ir.ops[op].results;
  for (size_t i = 0; i < slots.size(); ++i) s.vars[slots[i]] = results[i];
}

void KernelBuilder::while_(const std::function<Value()>& cond, const std::function<void()>& body,
                           std::source_location loc) {
  BuilderState& s = *state_;
  if (s.failed()) return;
  // Every live Var is carried; a pass drops the ones the body leaves alone.
  std::vector<int> slots = live_slots(s);
  std::vector<int> before;
  for (int slot : slots) before.push_back(s.vars[slot]);
  std::vector<Type> types;
  for (int id : before) types.push_back(s.type(id));
  int op = s.emit(OpCode::kWhile, before, types, loc);
  // Block 0 tests, block 1 iterates; each sees the carried values as its
  // arguments.
  auto open_block = [&] {
    int block = s.new_block();
    s.ir.ops[op].blocks.push_back(block);
    for (size_t i = 0; i < slots.size(); ++i) s.vars[slots[i]] = s.add_block_arg(block, types[i]);
    s.open(block);
    return block;
  };
  int test = open_block();
  std::vector<int> args;
  for (int slot : slots) args.push_back(s.vars[slot]);
  Value c = cond();
  int cid = s.failed() ? -1 : s.use(c, "while_ condition", loc);
  if (cid >= 0 && s.type(cid) != Type(i1)) {
    s.fail(loc, absl::StrCat("while_: the condition must be a scalar i1, got ", s.type(cid).str()));
  }
  for (size_t i = 0; i < slots.size() && !s.failed(); ++i) {
    if (s.vars[slots[i]] != args[i]) s.fail(loc, "while_: the condition assigned a Var; assign Vars in the body");
  }
  if (!s.failed()) s.emit(OpCode::kYield, {cid}, {}, loc);
  s.close(test);
  int block = open_block();
  body();
  std::vector<int> next;
  for (int slot : slots) next.push_back(s.vars[slot]);  // a Var keeps its type (Var's assignment checks)
  if (!s.failed()) s.emit(OpCode::kYield, next, {}, loc);
  s.close(block);
  const std::vector<int>& results = s.ir.ops[op].results;
  for (size_t i = 0; i < slots.size(); ++i) s.vars[slots[i]] = results[i];
}

namespace {

// `defer`, where given, is publish's condition operand.
Value view_query(BuilderState* s, const Value& view, const Operand& batch, OpCode op, absl::string_view what,
                 bool has_result, std::source_location loc, const Operand* defer = nullptr) {
  if (s == nullptr) return Value();
  int b = s->operand(batch, i32, what, loc);
  int d = defer == nullptr ? 0 : s->operand(*defer, i1, what, loc);
  int v = s->use(view, what, loc);
  if (b < 0 || d < 0 || v < 0) return Value();
  if (s->type(b) != Type(i32)) {
    return s->fail(loc, absl::StrCat(what, ": the batch must be an i32 scalar, got ", s->type(b).str()));
  }
  std::vector<int> operands = {v, b};
  if (defer != nullptr) {
    if (s->type(d) != Type(i1)) {
      return s->fail(loc, absl::StrCat(what, ": defer must be an i1 scalar (a condition), got ", s->type(d).str()));
    }
    operands.push_back(d);
  }
  if (!has_result) {
    s->emit(op, operands, {}, loc);
    return Value();
  }
  return s->emit1(op, operands, i1, loc);
}

}  // namespace

void TriggeredView::publish(const Operand& batch, std::source_location loc) const {
  view_query(v_.state(), v_, batch, OpCode::kPublish, "publish", false, loc);
}
void TriggeredView::publish(const Operand& batch, const Operand& defer, std::source_location loc) const {
  view_query(v_.state(), v_, batch, OpCode::kPublish, "publish", false, loc, &defer);
}
Value TriggeredView::arrived(const Operand& batch, std::source_location loc) const {
  return view_query(v_.state(), v_, batch, OpCode::kArrived, "arrived", true, loc);
}
void TriggeredView::wait(const Operand& batch, std::source_location loc) const {
  view_query(v_.state(), v_, batch, OpCode::kWait, "wait", false, loc);
}
Value TriggeredView::reusable(const Operand& batch, std::source_location loc) const {
  return view_query(v_.state(), v_, batch, OpCode::kReusable, "reusable", true, loc);
}

absl::StatusOr<Kernel> KernelBuilder::build() {
  BuilderState& s = *state_;
  TESSEL_RETURN_IF_ERROR(s.error);
  auto ir = std::make_shared<KernelIR>(s.ir);
  drop_unchanged_carried(*ir);
  close_stepped_carried(*ir);
  TESSEL_RETURN_IF_ERROR(verify(*ir));
  Kernel k;
  k.text_ = print(*ir);
  k.hash_ = stable_hash(k.text_);
  k.ir_ = std::move(ir);
  return k;
}

}  // namespace tessel
