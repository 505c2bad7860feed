// The debug buffer of kernels that print or assert (device_print,
// device_assert), shared by codegen and runtime. A kernel with such ops
// holds one zero-initialized global of kDebugBytes, `tessel_debug`, in
// device memory: a header of u64 words, then records that the programs
// append. The runtime reads it once the kernel's work is done (after a host
// launch, at a GPU's synchronize), prints the records, reports a failed
// assert and zeroes the header.
#pragma once

#include <cstdint>

namespace tessel {

inline constexpr const char* kDebugSymbol = "tessel_debug";
inline constexpr int64_t kDebugBytes = int64_t{1} << 20;

// Header words.
enum DebugWord : int {
  kDebugCursor = 0,   // bytes of records reserved so far (may pass the room)
  kDebugDropped = 1,  // records that found no room
  kDebugAssert = 2,   // 1 + the text index (KernelIR::texts) of the first failed assert; 0 for none
  kDebugProgram = 3,  // its program: x, y, z in words 3, 4, 5
  kDebugElement = 6,  // its element's row-major index (-1 for a scalar condition)
};
inline constexpr int64_t kDebugHeaderBytes = 64;

// A print record: u64 words {the op's text index, program x, y, z, element (-1 for
// scalars), then one word per printed value}: integers sign- or
// zero-extended to 64 bits, floats as the bits of a double, pointers as
// their address.
inline constexpr int kDebugRecordFixedWords = 5;
inline constexpr int64_t debug_record_bytes(int values) { return 8 * (kDebugRecordFixedWords + values); }

// The most values one device_print takes.
inline constexpr int kMaxPrintValues = 16;

}  // namespace tessel
