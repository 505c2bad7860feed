// Devices, buffers and compiled functions. Device and Function are cheap,
// copyable handles.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
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
class FunctionVariants;
class StreamImpl;
class GraphImpl;
class Graph;

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
  // `bytes` of this buffer from `offset` on, sharing its memory (which the
  // slice keeps alive); an error past the buffer's end.
  absl::StatusOr<Buffer> slice(size_t offset, size_t bytes) const;

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

// An ordered queue of device work: launches on one stream run in order, and
// launches on different streams may overlap. A cheap, copyable handle from
// Device::create_stream(); the last handle destroys the queue.
//
// On CUDA a stream does not synchronise with the device's default stream
// (CU_STREAM_NON_BLOCKING, as PyTorch's streams), so that graph capture and
// copy-engine work elsewhere never serialise on it: call synchronize() before
// reading a result with Device::copy_to_host. The host runs every launch
// synchronously, so its streams have nothing to wait for.
class Stream {
 public:
  // An empty handle; launches given one use the device's default stream.
  Stream() = default;

  // Waits for the work queued so far, then reports any error a kernel
  // recorded in a bounded wait (like Device::synchronize).
  absl::Status synchronize() const;
  // The backend's handle: a CUstream on CUDA, nullptr on the host.
  void* native() const;

  // CUDA graphs: between begin_capture() and end_capture(), launches on this
  // stream are recorded instead of run; the graph replays them, with the
  // arguments they were given, at a fraction of their launch cost. Capture
  // is per thread: this thread must not synchronise or copy until it ends.
  absl::Status begin_capture() const;
  absl::StatusOr<Graph> end_capture() const;

  StreamImpl* impl() const { return impl_.get(); }

 private:
  friend class Device;
  explicit Stream(std::shared_ptr<StreamImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<StreamImpl> impl_;
};

// Launches captured from a stream, ready to replay (an instantiated CUDA
// graph). Keeps the functions it launches loaded.
class Graph {
 public:
  // Queues the captured launches on `stream` (nullptr: the device's default
  // stream).
  absl::Status launch(const Stream* stream = nullptr) const;

 private:
  friend class Stream;
  explicit Graph(std::shared_ptr<GraphImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<GraphImpl> impl_;
};

struct LaunchConfig {
  Grid grid;
  int num_warps = 4;  // GPUs only; must match CompileOptions::num_warps
  // Where to queue the launch; nullptr (or an empty Stream): the device's
  // default stream. Ignored by the host, which runs launches synchronously.
  const Stream* stream = nullptr;
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

  // What a launch with `args` lets the code assume (which variant it runs):
  // for tests and dumps. The arguments are not checked.
  template <class... Args>
  Specialization specialization(const Args&... args) const {
    const KernelArg packed[] = {KernelArg(args)..., KernelArg(0)};
    return specialization_packed(absl::MakeConstSpan(packed, sizeof...(Args)));
  }
  Specialization specialization_packed(absl::Span<const KernelArg> args) const;

  // Compiles (and on GPUs loads) the variant a launch with `args` runs, so
  // that its first launch does no JIT work. Needed before arming a triggered
  // plan on the device, or capturing a graph: then no code may be loaded and
  // launches run the best variant already loaded.
  template <class... Args>
  absl::Status prepare(const Args&... args) const {
    const KernelArg packed[] = {KernelArg(args)..., KernelArg(0)};
    return prepare_packed(absl::MakeConstSpan(packed, sizeof...(Args)));
  }
  absl::Status prepare_packed(absl::Span<const KernelArg> args) const;

  const Kernel& kernel() const;
  // Shared memory one program uses (in the variant that assumes nothing
  // about the arguments).
  int64_t shared_bytes() const;
  // The grid of a persistent kernel (one that loops over its tiles): as
  // many programs as the device runs at once, its compute units times the
  // programs of this function each holds (the driver's occupancy for the
  // variant that assumes nothing; on the host, one per worker thread), in
  // whole clusters for a kernel of clusters (at least one).
  absl::StatusOr<int> persistent_grid() const;

 private:
  friend absl::StatusOr<Function> compile_function(const std::shared_ptr<DeviceImpl>&, const Kernel&,
                                                   const CompileOptions&);
  explicit Function(std::shared_ptr<FunctionVariants> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<FunctionVariants> impl_;
};

class Device {
 public:
  // "host" (all cores), "host:N" (N worker threads), "cuda:N" (every
  // registered backend: see the error for an unknown name).
  static absl::StatusOr<Device> open(absl::string_view name);
  // cuda:0 if an NVIDIA GPU tessel compiles for (sm_80 or newer) is
  // present, else the host.
  static absl::StatusOr<Device> best();

  // "host:16", "cuda:0".
  std::string name() const;
  // The name and what the device is, for logs: "cuda:0 (NVIDIA H200, sm_90,
  // 132 SMs, 227 KiB shared memory per program)".
  std::string description() const;
  DeviceKind kind() const;
  // What its code is compiled for: "host", "sm_90a" (an H100 or H200), ...
  // (CompileOptions::arch, when left empty, becomes this).
  std::string arch() const;
  // Streaming multiprocessors, compute units, or host worker threads.
  int num_compute_units() const;

  absl::StatusOr<Buffer> allocate(size_t bytes) const;
  // Returns once the bytes are on the device, so work on any stream may read them.
  absl::Status copy_to_device(const Buffer& dst, const void* src, size_t bytes) const;
  // Runs after the work queued on the default stream; synchronize a Stream
  // first to read what its work wrote.
  absl::Status copy_to_host(void* dst, const Buffer& src, size_t bytes) const;
  // Waits for all work on the device (every stream), then reports any error a
  // kernel recorded in a bounded wait ("kernel 'x' timed out ...").
  absl::Status synchronize() const;
  // Seconds the device spends on the work `work` queues on `stream` (the
  // default stream where null), from the end of the work queued there
  // before it to the end of its own; returns once that work is done, with
  // `work`'s error, or the device's (as synchronize() reports it). On a
  // CUDA device, between events recorded on the stream around it: the
  // host's launch costs stay out wherever earlier work keeps the device
  // busy while `work` queues (an L2 flush before a benchmark's run does).
  // Elsewhere, the host's clock around `work` and a synchronize, after
  // waiting for the work before it.
  absl::StatusOr<double> time(const std::function<absl::Status()>& work, const Stream* stream = nullptr) const;

  // A new stream of this device.
  absl::StatusOr<Stream> create_stream() const;

  // A tensor map over a dense row-major tensor in `buffer`, encoded for
  // this device's kernels (dims and box outermost first).
  absl::StatusOr<TensorMap> tensor_map(DType dtype, const Buffer& buffer, Shape dims, Shape box,
                                       Swizzle swizzle = Swizzle::kNone) const;
  // The same through the device's cache of encoded maps, keyed by
  // everything that goes into them: for code that asks for a map at every
  // launch. The map lives as long as the device.
  absl::StatusOr<const TensorMap*> cached_tensor_map(DType dtype, const Buffer& buffer, const Shape& dims,
                                                     const Shape& box, Swizzle swizzle = Swizzle::kNone) const;

  // JIT-compiles for this device; repeats are answered from a cache. The
  // Function compiles further variants of the kernel for launches whose
  // pointers are 16-byte aligned or integers divisible by 16, where its
  // loads and stores can use that (vector accesses).
  absl::StatusOr<Function> compile(const Kernel& kernel, const CompileOptions& options = {}) const;

  DeviceImpl& impl() const { return *impl_; }

 private:
  explicit Device(std::shared_ptr<DeviceImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<DeviceImpl> impl_;
};

}  // namespace tessel
