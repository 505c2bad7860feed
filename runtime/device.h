// Devices, buffers and compiled functions. Device and Function are cheap,
// copyable handles.
#pragma once

#include <array>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "codegen/compile_options.h"
#include "dsl/builder.h"
#include "runtime/kernel_arg.h"
#include "runtime/tensor_map.h"

namespace tessel {

enum class DeviceKind { kHost, kCuda, kHip };

class DeviceImpl;
class FunctionImpl;

// Device memory, freed when the last handle goes.
class Buffer {
 public:
  Buffer() = default;
  void* data() const { return data_.get(); }
  size_t bytes() const { return bytes_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data());
  }

 private:
  friend class DeviceImpl;
  std::shared_ptr<void> data_;
  size_t bytes_ = 0;
};

// The number of programs along up to three axes.
struct Grid {
  Grid(int x = 1, int y = 1, int z = 1) : dims{x, y, z} {}  // NOLINT: a plain int is a 1-D grid
  std::array<int, 3> dims;
  int64_t total() const { return int64_t{dims[0]} * dims[1] * dims[2]; }
};

struct LaunchConfig {
  Grid grid;
  int num_warps = 4;  // GPUs only
};

class Function {
 public:
  // Checks the arguments against the kernel's signature and runs the grid.
  template <class... Args>
  absl::Status launch(const LaunchConfig& config, const Args&... args) const {
    const KernelArg packed[] = {KernelArg(args)..., KernelArg(0)};
    return launch_packed(config, absl::MakeConstSpan(packed, sizeof...(Args)));
  }
  absl::Status launch_packed(const LaunchConfig& config, absl::Span<const KernelArg> args) const;

  const Kernel& kernel() const;
  // Shared memory one program uses.
  int64_t shared_bytes() const;

 private:
  friend class DeviceImpl;
  explicit Function(std::shared_ptr<FunctionImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<FunctionImpl> impl_;
};

class Device {
 public:
  // "host" (all cores), "host:N" (N worker threads), "cuda:N", "hip:N".
  static absl::StatusOr<Device> open(absl::string_view name);
  // The first GPU present, else the host.
  static absl::StatusOr<Device> best();

  std::string name() const;
  DeviceKind kind() const;
  // Streaming multiprocessors, compute units, or host worker threads.
  int num_compute_units() const;

  absl::StatusOr<Buffer> allocate(size_t bytes) const;
  absl::Status copy_to_device(const Buffer& dst, const void* src, size_t bytes) const;
  absl::Status copy_to_host(void* dst, const Buffer& src, size_t bytes) const;
  absl::Status synchronize() const;

  // A tensor map over a dense row-major tensor in `buffer`, encoded for
  // this device's kernels (dims and box outermost first).
  absl::StatusOr<TensorMap> tensor_map(DType dtype, const Buffer& buffer, Shape dims, Shape box,
                                       Swizzle swizzle = Swizzle::kNone) const;

  // JIT-compiles for this device; repeats are answered from a cache.
  absl::StatusOr<Function> compile(const Kernel& kernel, const CompileOptions& options = {}) const;

  DeviceImpl& impl() const { return *impl_; }

 private:
  explicit Device(std::shared_ptr<DeviceImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<DeviceImpl> impl_;
};

}  // namespace tessel
