#include "runtime/hip/kernarg.h"

#include <algorithm>
#include <cstring>

#include "base/tma_rules.h"
#include "runtime/tensor_map.h"

namespace tessel::hip {

KernargLayout kernarg_layout(const Kernel& kernel) {
  KernargLayout layout;
  for (const Param& p : kernel.params()) {
    int64_t size = 8, align = 8;  // pointers and triggered views
    if (p.type.is_tensor_map()) {
      size = kTensorMapBytes;
      align = tma::kMapAlignment;
    } else if (!p.type.is_pointer() && !p.type.is_triggered_view()) {
      size = align = p.type.is_bool() ? 1 : p.type.dtype().bytes();
    }
    const int64_t offset = (layout.size + align - 1) / align * align;
    layout.slots.push_back({offset, size});
    layout.size = offset + size;
    layout.align = std::max(layout.align, align);
  }
  return layout;
}

std::vector<uint8_t> pack_kernargs(const KernargLayout& layout, void* const* params) {
  std::vector<uint8_t> bytes(layout.size, 0);
  for (size_t i = 0; i < layout.slots.size(); ++i) {
    std::memcpy(bytes.data() + layout.slots[i].offset, params[i], layout.slots[i].size);
  }
  return bytes;
}

}  // namespace tessel::hip
