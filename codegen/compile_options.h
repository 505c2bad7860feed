// Options of one compilation. Environment variables never reach codegen
// directly: the runtime reads them in one place and fills this struct.
#pragma once

#include <string>

#include "absl/strings/str_cat.h"

namespace tessel {

struct CompileOptions {
  int opt_level = 3;  // LLVM's pipeline level, 0 to 3
  int num_warps = 4;  // programs' width on GPUs
  // The chip: "sm_90a" for NVIDIA, "gfx942" for AMD; empty for the host.
  std::string arch;
  // Where to write each stage (ir, llvm, ptx/asm) of the compilation; empty
  // for nowhere. `dump_stages` is a comma list such as "ir,llvm,ptx".
  std::string dump_dir;
  std::string dump_stages;

  // Whether the options change generated code (they key the JIT cache).
  std::string cache_key() const {
    return absl::StrCat("O", opt_level, ";w", num_warps, ";", arch);
  }
};

}  // namespace tessel
