// What ptxas's notes in a JIT log say about the code it made.
#pragma once

#include <string_view>

namespace tessel::cuda {

// Whether ptxas says it serialized the kernel's wgmma instructions (its
// "Potential Performance Loss: wgmma.mma_async instructions are serialized
// due to ..." notes, whatever the cause: ignored setmaxnreg, a call to a
// routine of its own, too few registers).
bool wgmma_serialized(std::string_view notes);

}  // namespace tessel::cuda
