#include "runtime/cuda/jit_notes.h"

namespace tessel::cuda {

bool wgmma_serialized(std::string_view notes) {
  return notes.find("wgmma.mma_async instructions are serialized") != std::string_view::npos;
}

}  // namespace tessel::cuda
