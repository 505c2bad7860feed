// Small passes over built kernel IR.
#pragma once

#include "dsl/ir.h"

namespace tessel {

// Drops the values for and while loops carry and if_ results that the body
// leaves unchanged (the builder carries every live Var; most are never
// assigned).
void drop_unchanged_carried(KernelIR& ir);

}  // namespace tessel
