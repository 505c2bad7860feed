// What a kernel's debug buffer (base/debug_abi.h) says: device_print's
// lines and the first failed device_assert. Pure functions of the buffer's
// bytes, so every backend reads it the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "dsl/builder.h"

namespace tessel {

struct DebugReport {
  std::string lines;       // each ending in '\n'
  absl::Status assertion;  // the first failed assert, or OK
};

// How many bytes of records follow `header` (kDebugHeaderBytes / 8 words):
// those the programs wrote, at most the buffer's room.
int64_t debug_records_written(absl::Span<const uint64_t> header);

// The report of `kernel`'s buffer on `device` (which the assert's error
// names first, unless empty): `records` holds debug_records_written(header) bytes.
DebugReport read_debug(const Kernel& kernel, absl::string_view device, absl::Span<const uint64_t> header,
                       absl::Span<const uint64_t> records);

// Writes `lines` to stdout at once.
void print_debug_lines(const std::string& lines);

// A GPU's drain of `kernel`'s debug buffer once its work is done: the
// header and the records written, read through `read` (`bytes` from
// `offset` into the buffer, into `dst`), the header cleared through
// `clear_header` so that the next drain reports only what is new, the lines
// printed. Returns the failed assert (OK for none), or the error of a read
// or of the clearing.
absl::StatusOr<absl::Status> drain_debug_buffer(
    const Kernel& kernel, absl::string_view device,
    const std::function<absl::Status(int64_t offset, void* dst, int64_t bytes)>& read,
    const std::function<absl::Status()>& clear_header);

}  // namespace tessel
