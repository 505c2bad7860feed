#include "runtime/debug_output.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/debug_abi.h"
#include "base/status.h"

namespace tessel {
namespace {

// The op whose text is `text` (each print and assert has its own).
const Op* op_of_text(const KernelIR& ir, uint64_t text) {
  for (const Op& o : ir.ops) {
    if ((o.op == OpCode::kPrint || o.op == OpCode::kAssert) && static_cast<uint64_t>(o.ints[0]) == text) return &o;
  }
  return nullptr;
}

std::string format_value(uint64_t bits, const Type& t) {
  if (t.is_pointer() || (t.is_tile() && t.elements_are_pointers())) return absl::StrFormat("0x%x", bits);
  const DType d = t.dtype();
  if (d.is_float()) {
    double v;
    std::memcpy(&v, &bits, sizeof(v));
    const int digits = d == f64 ? 17 : d == f32 ? 9 : 5;
    return absl::StrFormat("%.*g", digits, v);
  }
  if (d.is_signed() && !d.is_bool()) return absl::StrCat(static_cast<int64_t>(bits));
  return absl::StrCat(bits);
}

// "(i, j)": row-major `linear` in `shape`.
std::string index_of(int64_t linear, const Shape& shape) {
  std::vector<int64_t> dims(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    dims[d] = linear % shape[d];
    linear /= shape[d];
  }
  return absl::StrCat("(", absl::StrJoin(dims, ", "), ")");
}

std::string program_of(const uint64_t* words) {
  return absl::StrCat("(", static_cast<int64_t>(words[0]), ", ", static_cast<int64_t>(words[1]), ", ",
                      static_cast<int64_t>(words[2]), ")");
}

}  // namespace

int64_t debug_records_written(absl::Span<const uint64_t> header) {
  const uint64_t room = kDebugBytes - kDebugHeaderBytes;
  return static_cast<int64_t>(std::min<uint64_t>(header[kDebugCursor], room)) / 8 * 8;
}

DebugReport read_debug(const Kernel& kernel, absl::string_view device, absl::Span<const uint64_t> header,
                       absl::Span<const uint64_t> records) {
  DebugReport report;
  const KernelIR& ir = kernel.ir();
  for (size_t at = 0; at < records.size();) {
    const Op* o = op_of_text(ir, records[at]);
    const size_t words = o == nullptr ? 0 : kDebugRecordFixedWords + o->operands.size();
    if (o == nullptr || o->op != OpCode::kPrint || at + words > records.size()) {
      absl::StrAppend(&report.lines, "tessel: kernel '", kernel.name(), "' left a malformed print record\n");
      break;
    }
    const uint64_t* r = &records[at];
    std::string line = absl::StrCat("pid ", program_of(r + 1));
    const auto element = static_cast<int64_t>(r[4]);
    if (element >= 0 && !o->operands.empty()) {
      absl::StrAppend(&line, " idx ", index_of(element, ir.type(o->operands[0]).shape()));
    }
    const std::string& prefix = ir.texts[o->ints[0]];
    if (!prefix.empty()) absl::StrAppend(&line, " ", prefix);
    std::vector<std::string> values;
    for (size_t k = 0; k < o->operands.size(); ++k) {
      values.push_back(format_value(r[kDebugRecordFixedWords + k], ir.type(o->operands[k])));
    }
    if (!values.empty()) absl::StrAppend(&line, " ", absl::StrJoin(values, ", "));
    absl::StrAppend(&report.lines, line, "\n");
    at += words;
  }
  if (header[kDebugDropped] > 0) {
    absl::StrAppend(&report.lines, "tessel: kernel '", kernel.name(), "' printed ", header[kDebugDropped],
                    " more lines than its buffer of ", kDebugBytes >> 20, " MiB holds; they were dropped\n");
  }
  if (header[kDebugAssert] > 0) {
    const std::string on = device.empty() ? "" : absl::StrCat(device, ": ");
    const Op* o = op_of_text(ir, header[kDebugAssert] - 1);
    if (o == nullptr || o->op != OpCode::kAssert) {
      report.assertion = absl::InternalError(
          absl::StrCat(on, "kernel '", kernel.name(), "' recorded a failed assert that it does not hold"));
      return report;
    }
    const auto element = static_cast<int64_t>(header[kDebugElement]);
    const std::string where =
        element >= 0 ? absl::StrCat(", element ", index_of(element, ir.type(o->operands[0]).shape())) : "";
    report.assertion = absl::InternalError(absl::StrCat(
        on, "kernel '", kernel.name(), "': device_assert failed at ", o->loc.file_name(), ":", o->loc.line(),
        " in program ", program_of(&header[kDebugProgram]), where, ": ", ir.texts[o->ints[0]]));
  }
  return report;
}

void print_debug_lines(const std::string& lines) {
  if (lines.empty()) return;
  std::fwrite(lines.data(), 1, lines.size(), stdout);
  std::fflush(stdout);
}

absl::StatusOr<absl::Status> drain_debug_buffer(
    const Kernel& kernel, absl::string_view device,
    const std::function<absl::Status(int64_t offset, void* dst, int64_t bytes)>& read,
    const std::function<absl::Status()>& clear_header) {
  uint64_t header[kDebugHeaderBytes / 8];
  TESSEL_RETURN_IF_ERROR(read(0, header, sizeof(header)));
  std::vector<uint64_t> records(debug_records_written(header) / 8);
  if (!records.empty()) {
    TESSEL_RETURN_IF_ERROR(
        read(kDebugHeaderBytes, records.data(), static_cast<int64_t>(records.size() * sizeof(uint64_t))));
  }
  TESSEL_RETURN_IF_ERROR(clear_header());
  DebugReport report = read_debug(kernel, device, header, records);
  print_debug_lines(report.lines);
  return report.assertion;
}

}  // namespace tessel
