#include "runtime/host/host_checks.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "dsl/opcode_traits.h"

namespace tessel {

bool host_check(const HostProgram* program, int32_t param, const void* address, int64_t bytes, int32_t op) {
  if (bytes == 0) return true;  // a masked-off lane
  HostChecks& checks = *program->checks;
  const auto a = reinterpret_cast<uintptr_t>(address);
  auto within = [&](const HostRegion& r) {
    return r.bytes >= 0 && a >= r.base && a - r.base <= static_cast<uint64_t>(r.bytes) &&
           static_cast<uint64_t>(bytes) <= r.base + r.bytes - a;
  };
  const bool ok = param >= 0 && param < static_cast<int>(checks.regions.size())
                      ? within(checks.regions[param])
                      : std::any_of(checks.regions.begin(), checks.regions.end(), within);
  if (ok) return true;
  bool expected = false;
  if (checks.failed.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
    checks.first.op = op;
    checks.first.param = param;
    std::memcpy(checks.first.program, program->program_id, sizeof(checks.first.program));
    checks.first.address = a;
  }
  return false;
}

absl::Status host_regions(const Kernel& kernel, absl::Span<const KernelArg> args, std::vector<HostRegion>& out) {
  out.assign(args.size(), HostRegion{});
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].kind() != KernelArg::Kind::kPointer) continue;
    if (args[i].extent() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("launch '", kernel.name(), "' on a checked host: argument ", i, " '", kernel.params()[i].name,
                       "' is a pointer of unknown extent; pass a Buffer or a span (absl::MakeSpan(v), std::span) so "
                       "that its accesses can be checked"));
    }
    out[i] = HostRegion{reinterpret_cast<uintptr_t>(args[i].pointer()), args[i].extent()};
  }
  return absl::OkStatus();
}

absl::Status host_violation(const HostChecks& checks, const Kernel& kernel, absl::string_view device) {
  const HostChecks::Violation& v = checks.first;
  const Op& op = kernel.ir().ops[v.op];
  const char* verb = op.op == OpCode::kLoad ? "reads" : op.op == OpCode::kStore ? "writes" : "updates";
  std::string what;
  if (v.param >= 0) {
    const Param& p = kernel.params()[v.param];
    const HostRegion& r = checks.regions[v.param];
    const int64_t size = p.type.dtype().bytes();
    const auto offset = static_cast<int64_t>(v.address - r.base);
    what = absl::StrCat("element ", offset / size, " of argument '", p.name, "' (", r.bytes / size, " elements of ",
                        p.type.dtype().name(), "), ", offset < 0 ? "before its start" : "past its end");
  } else {
    what = absl::StrCat("address 0x", absl::Hex(v.address), ", outside every argument");
  }
  return absl::OutOfRangeError(absl::StrCat(
      op.loc.file_name(), ":", op.loc.line(), ": kernel '", kernel.name(), "' on ", device, ": ", op_traits(op.op).name,
      " out of bounds: program (", v.program[0], ", ", v.program[1], ", ", v.program[2], ") ", verb, " ", what));
}

}  // namespace tessel
