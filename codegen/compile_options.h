// Options of one compilation. Environment variables never reach codegen
// directly: the runtime reads them in one place and fills this struct.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace tessel {

// Facts about a launch's arguments that code may assume (Triton's
// specialization on divisibility by 16): bit i says that parameter i is a
// pointer to a 16-byte-aligned address or an integer divisible by 16.
// Parameters past the 64th are never specialized. Any subset of the facts
// that hold is a correct assumption; the empty set assumes nothing.
struct Specialization {
  uint64_t multiple_of_16 = 0;

  bool has(int param) const { return param < 64 && (multiple_of_16 >> param & 1) != 0; }
  bool operator==(const Specialization&) const = default;
};

struct CompileOptions {
  int opt_level = 3;  // LLVM's pipeline level, 0 to 3
  int num_warps = 4;  // programs' width on GPUs
  // The chip: "sm_90a" (Hopper) or "sm_80" to "sm_89" for NVIDIA, "gfx942"
  // for AMD; empty for the host.
  std::string arch;
  // Where to write each stage (ir, llvm, ptx/asm) of the compilation; empty
  // for nowhere. `dump_stages` is a comma list such as "ir,llvm,ptx".
  std::string dump_dir;
  std::string dump_stages;
  // What the code may assume about the arguments. The runtime sets this for
  // each variant of a Function from the arguments of its launches.
  Specialization specialization;
  // Host only (Device "host:checked"): every load, store and atomic asks
  // the runtime whether it lies within its argument first.
  bool checked = false;
  // GPUs: programs that should run at once on one compute unit (1 to 32).
  // The program's shared memory (LDS) is kept within that share of the
  // unit's, giving up first what it holds only to overlap copies with work
  // (store tiles held across the kernel, rings that run across loops), and
  // the register allocator is told (.minnctapersm for ptxas,
  // amdgpu-waves-per-eu for AMDGPU) so that registers fit that many too. A
  // kernel that does not fit is an error naming what it needs.
  int min_programs = 1;
  // Compiles device_asserts in (TESSEL_DEBUG=1); without it they are dropped.
  bool debug = false;

  // Whether the options change generated code (they key the JIT cache).
  std::string cache_key() const {
    return absl::StrCat("O", opt_level, ";w", num_warps, ";", arch, ";s", absl::Hex(specialization.multiple_of_16),
                        checked ? ";checked" : "", debug ? ";debug" : "",
                        min_programs != 1 ? absl::StrCat(";p", min_programs) : "");
  }
};

}  // namespace tessel
