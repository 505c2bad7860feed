// The stable printed form of kernel IR: one op per line, values as %N.
#pragma once

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "dsl/ir.h"

namespace tessel {

std::string print(const KernelIR& ir);
// FNV-1a 64 of a string: stable across runs and machines (unlike absl::Hash).
uint64_t stable_hash(absl::string_view text);

}  // namespace tessel
