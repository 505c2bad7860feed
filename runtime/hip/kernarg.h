// Internal: the explicit part of an AMDGPU kernel's kernarg segment, as the
// AMDGPU target lays it out (codegen/amdgpu/): each parameter at its
// natural alignment in order, tensor maps as their 128 bytes aligned to
// 64, pointers and triggered views as 8 bytes, i1 as one byte. Pure data,
// so it is tested without HIP against the code object's metadata.
#pragma once

#include <cstdint>
#include <vector>

#include "dsl/builder.h"

namespace tessel::hip {

struct KernargLayout {
  struct Slot {
    int64_t offset, size;
  };
  std::vector<Slot> slots;  // one per kernel parameter
  int64_t size = 0;         // bytes of explicit arguments
  int64_t align = 1;        // the largest alignment among them
};

KernargLayout kernarg_layout(const Kernel& kernel);

// The explicit arguments packed: params[i] points to parameter i's value
// (a tensor map's 128 bytes, a pointer, a scalar).
std::vector<uint8_t> pack_kernargs(const KernargLayout& layout, void* const* params);

}  // namespace tessel::hip
