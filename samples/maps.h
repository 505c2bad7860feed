// How the samples' tensor maps are encoded: by a device for its own
// kernels, or in tessel's host form, which code for chips without TMA
// (sm_80 to sm_89) reads in software on any NVIDIA GPU.
#pragma once

#include <functional>

#include "absl/status/statusor.h"
#include "tessel/tessel.h"

namespace samples {

using MapEncoder = std::function<absl::StatusOr<tessel::TensorMap>(tessel::DType, const tessel::Buffer&, tessel::Shape,
                                                                   tessel::Shape, tessel::Swizzle)>;

// `device`'s encoding (it must outlive the encoder).
inline MapEncoder device_maps(const tessel::Device& device) {
  return [&device](tessel::DType t, const tessel::Buffer& b, tessel::Shape dims, tessel::Shape box, tessel::Swizzle s) {
    return device.tensor_map(t, b, std::move(dims), std::move(box), s);
  };
}
inline MapEncoder host_form_maps() {
  return [](tessel::DType t, const tessel::Buffer& b, tessel::Shape dims, tessel::Shape box, tessel::Swizzle s) {
    return tessel::TensorMap::tiled(t, b.data(), std::move(dims), std::move(box), s);
  };
}

}  // namespace samples
