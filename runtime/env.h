// The one place where tessel reads environment variables:
//   TESSEL_DUMP=ir,llvm,ptx   stages of every compilation to write
//   TESSEL_DUMP_DIR=DIR       where to write them (default: the working directory)
#pragma once

#include "codegen/compile_options.h"

namespace tessel {

// `options` with what the environment asks for filled in where unset.
CompileOptions options_from_env(CompileOptions options);

}  // namespace tessel
