// Internal: what each backend implements behind Device and Function.
#pragma once

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "runtime/device.h"
#include "runtime/tensor_map.h"

namespace tessel {

class FunctionImpl {
 public:
  FunctionImpl(Kernel kernel, TensorMapEncoding encoding) : kernel_(std::move(kernel)), encoding_(encoding) {}
  virtual ~FunctionImpl() = default;
  const Kernel& kernel() const { return kernel_; }
  // The encoding of tensor maps this function's kernel reads.
  TensorMapEncoding tensor_map_encoding() const { return encoding_; }
  virtual int64_t shared_bytes() const = 0;
  // Runs the grid; the arguments have been checked, params[i] points to the
  // value of parameter i.
  virtual absl::Status run(const LaunchConfig& config, void** params) = 0;

 private:
  Kernel kernel_;
  TensorMapEncoding encoding_;
};

// A stream of one backend. `kind` tells backends whose stream they were
// handed before they downcast it.
class StreamImpl {
 public:
  explicit StreamImpl(DeviceKind kind) : kind_(kind) {}
  virtual ~StreamImpl() = default;
  DeviceKind kind() const { return kind_; }
  virtual void* native() const = 0;
  virtual absl::Status synchronize() = 0;
  virtual absl::Status begin_capture() = 0;
  virtual absl::StatusOr<std::shared_ptr<GraphImpl>> end_capture() = 0;

 private:
  DeviceKind kind_;
};

class GraphImpl {
 public:
  virtual ~GraphImpl() = default;
  // `stream` is null for the device's default stream.
  virtual absl::Status launch(StreamImpl* stream) = 0;
};

class DeviceImpl {
 public:
  virtual ~DeviceImpl() = default;
  virtual std::string name() const = 0;
  virtual DeviceKind kind() const = 0;
  virtual int num_compute_units() const = 0;
  // What Device::description() adds to the name; empty for nothing.
  virtual std::string details() const { return ""; }
  // 90 for sm_90; 0 for devices that are not NVIDIA GPUs.
  virtual int compute_capability() const { return 0; }
  // Which encoding of tensor maps this device's kernels read.
  virtual TensorMapEncoding tensor_map_encoding() const = 0;

  virtual absl::StatusOr<std::shared_ptr<void>> raw_allocate(size_t bytes) = 0;
  virtual absl::Status copy_to_device(void* dst, const void* src, size_t bytes) = 0;
  virtual absl::Status copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  virtual absl::Status synchronize() = 0;
  // By default a stream whose work is already done when it is queued, for
  // backends that run launches synchronously (the host).
  virtual absl::StatusOr<std::shared_ptr<StreamImpl>> create_stream();
  virtual absl::StatusOr<TensorMap> encode_tensor_map(const TensorMapSpec& spec) = 0;
  virtual absl::StatusOr<std::shared_ptr<FunctionImpl>> compile_uncached(const Kernel& kernel,
                                                                         const CompileOptions& options) = 0;

  absl::StatusOr<Buffer> allocate(size_t bytes);
  // Compiles through an in-memory cache keyed by the kernel's text and the options.
  absl::StatusOr<Function> compile(const Kernel& kernel, const CompileOptions& options);

  TensorMapCache& tensor_maps() { return tensor_maps_; }

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Function> cache_ ABSL_GUARDED_BY(mu_);
  TensorMapCache tensor_maps_{[this](const TensorMapSpec& spec) { return encode_tensor_map(spec); }};
};

// Backends' factories.
absl::StatusOr<std::shared_ptr<DeviceImpl>> open_host_device(int threads);
// Unavailable with "cuda:N: no NVIDIA driver ..." where there is no driver,
// NotFound where there is no such GPU.
absl::StatusOr<std::shared_ptr<DeviceImpl>> open_cuda_device(int ordinal);

}  // namespace tessel
