#include "runtime/env.h"

#include <cstdlib>

namespace tessel {

CompileOptions options_from_env(CompileOptions options) {
  if (options.dump_stages.empty()) {
    if (const char* stages = std::getenv("TESSEL_DUMP")) options.dump_stages = stages;
  }
  if (options.dump_dir.empty() && !options.dump_stages.empty()) {
    const char* dir = std::getenv("TESSEL_DUMP_DIR");
    options.dump_dir = dir != nullptr ? dir : ".";
  }
  return options;
}

}  // namespace tessel
