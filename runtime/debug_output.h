// What a kernel's debug buffer (base/debug_abi.h) says: device_print's
// lines and the first failed device_assert. Pure functions of the buffer's
// bytes, so every backend reads it the same way.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
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

}  // namespace tessel
