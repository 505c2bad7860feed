#include "dsl/printer.h"

#include <unordered_map>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "dsl/ops.h"

namespace tessel {

namespace {

// Prints values renumbered in order of definition, so that the text does not
// depend on values the builder made and passes dropped.
class Printer {
 public:
  explicit Printer(const KernelIR& ir) : ir_(ir) {}

  std::string run() {
    std::vector<std::string> params;
    for (const Param& p : ir_.params) {
      params.push_back(absl::StrCat(def(p.value), " ", p.name, ": ", p.type.str()));
    }
    absl::StrAppend(&out_, "kernel ", ir_.name, "(", absl::StrJoin(params, ", "), ")");
    if (ir_.cluster > 1) absl::StrAppend(&out_, " cluster(", ir_.cluster, ")");
    out_ += " {\n";
    block(0, 1);
    out_ += "}\n";
    return out_;
  }

 private:
  std::string def(int value) {
    auto [it, fresh] = names_.try_emplace(value, static_cast<int>(names_.size()));
    return absl::StrCat("%", it->second);
  }
  std::string use(int value) {
    auto it = names_.find(value);
    return it == names_.end() ? absl::StrCat("%?", value) : absl::StrCat("%", it->second);
  }

  void block(int b, int depth) {
    for (int o : ir_.blocks[b].ops) op(ir_.ops[o], depth);
  }

  void op(const Op& o, int depth) {
    std::string indent(2 * depth, ' ');
    std::vector<std::string> operands, results, types;
    for (int v : o.operands) operands.push_back(use(v));
    for (int v : o.results) {
      results.push_back(def(v));
      types.push_back(ir_.type(v).str());
    }
    out_ += indent;
    if (!results.empty()) absl::StrAppend(&out_, absl::StrJoin(results, ", "), " = ");
    absl::StrAppend(&out_, opcode_name(o.op));
    if (!operands.empty()) absl::StrAppend(&out_, " ", absl::StrJoin(operands, ", "));
    if (o.op == OpCode::kConstant && ir_.type(o.results[0]).dtype().is_float()) {
      absl::StrAppend(&out_, " ", absl::StrFormat("%.17g", o.fval));
    } else if (o.op == OpCode::kReduce || o.op == OpCode::kScan) {
      absl::StrAppend(&out_, " axis=", o.ints[0], " ",
                      opcode_name(static_cast<OpCode>(o.ints[1])));
      if (o.op == OpCode::kScan && o.ints[2] != 0) absl::StrAppend(&out_, " reverse");
    } else if (o.op == OpCode::kSort) {
      absl::StrAppend(&out_, " axis=", o.ints[0], o.ints[1] != 0 ? " descending" : "",
                      o.ints[2] != 0 ? " positions" : "");
    } else if (o.op == OpCode::kAtomic) {
      absl::StrAppend(&out_, " ", atomic_op_name(static_cast<AtomicOp>(o.ints[0])), " ",
                      memory_order_name(static_cast<MemoryOrder>(o.ints[1])));
    } else if (o.op == OpCode::kAtomicCas) {
      absl::StrAppend(&out_, " ", memory_order_name(static_cast<MemoryOrder>(o.ints[0])));
    } else if (o.op == OpCode::kPrint || o.op == OpCode::kAssert) {
      absl::StrAppend(&out_, " \"", absl::CEscape(ir_.texts[o.ints[0]]), "\"");
    } else if (!o.ints.empty()) {
      absl::StrAppend(&out_, " [", absl::StrJoin(o.ints, ","), "]");
    }
    if (!types.empty()) absl::StrAppend(&out_, " : ", absl::StrJoin(types, ", "));
    if (o.blocks.empty()) {
      out_ += "\n";
      return;
    }
    out_ += " {\n";
    for (size_t i = 0; i < o.blocks.size(); ++i) {
      const Block& b = ir_.blocks[o.blocks[i]];
      if (i > 0) absl::StrAppend(&out_, indent, "} else {\n");
      if (!b.args.empty()) {
        std::vector<std::string> args;
        for (int v : b.args) args.push_back(absl::StrCat(def(v), ": ", ir_.type(v).str()));
        absl::StrAppend(&out_, indent, "^(", absl::StrJoin(args, ", "), "):\n");
      }
      block(o.blocks[i], depth + 1);
    }
    absl::StrAppend(&out_, indent, "}\n");
  }

  const KernelIR& ir_;
  std::unordered_map<int, int> names_;
  std::string out_;
};

}  // namespace

std::string print(const KernelIR& ir) { return Printer(ir).run(); }

uint64_t stable_hash(absl::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace tessel
