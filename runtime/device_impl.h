// Internal: what each backend implements behind Device and Function.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "codegen/compile_options.h"
#include "runtime/device.h"
#include "runtime/disk_cache.h"
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
  // How many programs of this function one compute unit runs at once (its
  // threads, registers and shared memory against the unit's).
  virtual absl::StatusOr<int> programs_per_compute_unit() const = 0;
  // Runs the grid; the arguments have been checked, params[i] points to the
  // value of parameter i.
  virtual absl::Status run(const LaunchConfig& config, void** params) = 0;
  // The same, with the arguments as passed, for backends that look at more
  // than their values (the host's checked mode: their extents).
  virtual absl::Status run_with(const LaunchConfig& config, void** params, absl::Span<const KernelArg>) {
    return run(config, params);
  }

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
  // Whether launches on the stream are being captured into a graph (when
  // loading a module is forbidden).
  virtual bool capturing() const { return false; }

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
  // The arch its code is compiled for (Device::arch).
  virtual std::string arch() const = 0;
  // Which encoding of tensor maps this device's kernels read.
  virtual TensorMapEncoding tensor_map_encoding() const = 0;

  virtual absl::StatusOr<std::shared_ptr<void>> raw_allocate(size_t bytes) = 0;
  virtual absl::Status copy_to_device(void* dst, const void* src, size_t bytes) = 0;
  virtual absl::Status copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  virtual absl::Status synchronize() = 0;
  // Device::time; by default the host's clock around `work` and a
  // synchronize, once the work queued before it is done.
  virtual absl::StatusOr<double> time(const std::function<absl::Status()>& work, StreamImpl* stream);
  // By default a stream whose work is already done when it is queued, for
  // backends that run launches synchronously (the host).
  virtual absl::StatusOr<std::shared_ptr<StreamImpl>> create_stream();
  virtual absl::StatusOr<TensorMap> encode_tensor_map(const TensorMapSpec& spec) = 0;
  virtual absl::StatusOr<std::shared_ptr<FunctionImpl>> compile_uncached(const Kernel& kernel,
                                                                         const CompileOptions& options) = 0;

  absl::StatusOr<Buffer> allocate(size_t bytes);
  // Compiles one variant through an in-memory cache keyed by the kernel's
  // text and the options (the specialization included).
  absl::StatusOr<std::shared_ptr<FunctionImpl>> compile_variant(const Kernel& kernel, const CompileOptions& options);

  TensorMapCache& tensor_maps() { return tensor_maps_; }

  // The disk cache compile_uncached compiles through (compile_cached.h): the
  // one the environment names, made at the first compile, unless set.
  std::shared_ptr<const DiskCache> disk_cache() {
    absl::MutexLock lock(&disk_cache_mu_);
    if (disk_cache_ == nullptr) disk_cache_ = DiskCache::from_env();
    return disk_cache_;
  }
  void set_disk_cache(std::shared_ptr<const DiskCache> cache) {
    absl::MutexLock lock(&disk_cache_mu_);
    disk_cache_ = std::move(cache);
  }

  // Epochs of triggered plans with copy chains armed on this device. While
  // any is, no code may be loaded: a module loaded then can wait forever
  // behind the chains' stream waits (docs/triggered.md), so compiling
  // fails and launches make do with the variants already loaded.
  void add_armed(int delta) {
    armed_.fetch_add(delta, std::memory_order_acq_rel);
    armed_added(delta);
  }
  bool armed() const { return armed_.load(std::memory_order_acquire) > 0; }
  // Told each change (not the new count, which concurrent changes could
  // report out of order): backends that defer work while chains are armed
  // keep their own count and run it when theirs reaches 0.
  virtual void armed_added(int /*delta*/) {}

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<FunctionImpl>> cache_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> armed_{0};
  absl::Mutex disk_cache_mu_;
  std::shared_ptr<const DiskCache> disk_cache_ ABSL_GUARDED_BY(disk_cache_mu_);
  TensorMapCache tensor_maps_{[this](const TensorMapSpec& spec) { return encode_tensor_map(spec); }};
};

// What a Function holds: a kernel's variants, one per Specialization that
// its launches have needed (Triton's specialization on divisibility by 16).
// The generic variant assumes nothing and is compiled with the Function, so
// that compile errors show at Device::compile; the others are compiled at
// the first launch that needs them, through the device's cache. Launches
// find compiled variants without taking a lock.
class FunctionVariants {
 public:
  FunctionVariants(std::shared_ptr<DeviceImpl> device, CompileOptions options, Specialization specializable,
                   std::shared_ptr<FunctionImpl> generic)
      : device_(std::move(device)),
        options_(std::move(options)),
        specializable_(specializable),
        generic_(std::move(generic)) {}
  ~FunctionVariants();
  FunctionVariants(const FunctionVariants&) = delete;
  FunctionVariants& operator=(const FunctionVariants&) = delete;

  FunctionImpl& generic() const { return *generic_; }
  const DeviceImpl& device() const { return *device_; }
  // The parameters whose facts the kernel's code can use; launches key
  // variants on these only.
  Specialization specializable() const { return specializable_; }
  // The variant for `key` (facts of specializable parameters that hold for
  // a launch on `stream`, null for the default stream). While the stream
  // captures a graph or a triggered plan is armed on the device, which both
  // forbid loading code, a variant not compiled yet is stood in for by the
  // compiled one that assumes the most of `key`.
  absl::StatusOr<FunctionImpl*> get(Specialization key, const StreamImpl* stream) {
    if (key.multiple_of_16 == 0) return generic_.get();
    if (FunctionImpl* known = find(key)) return known;
    return add(key, stream);
  }
  // Compiles the variant for `key` now, if it is not yet: errors instead of
  // standing in another.
  absl::Status prepare(Specialization key);

 private:
  struct Variant {
    Specialization key;
    std::shared_ptr<FunctionImpl> impl;
    const Variant* next;
  };
  // The compiled variant for `key`, or null; takes no lock.
  FunctionImpl* find(Specialization key) const {
    for (const Variant* v = head_.load(std::memory_order_acquire); v != nullptr; v = v->next) {
      if (v->key == key) return v->impl.get();
    }
    return nullptr;
  }
  absl::StatusOr<FunctionImpl*> add(Specialization key, const StreamImpl* stream);
  absl::StatusOr<FunctionImpl*> compile_locked(Specialization key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<DeviceImpl> device_;
  const CompileOptions options_;
  const Specialization specializable_;
  const std::shared_ptr<FunctionImpl> generic_;
  // A list that only grows while the Function lives: readers walk it
  // without the lock; writers prepend under it.
  std::atomic<const Variant*> head_{nullptr};
  absl::Mutex mu_;
};

// Compiles the generic variant of `kernel` for `device` (Device::compile).
absl::StatusOr<Function> compile_function(const std::shared_ptr<DeviceImpl>& device, const Kernel& kernel,
                                          const CompileOptions& options);

}  // namespace tessel
