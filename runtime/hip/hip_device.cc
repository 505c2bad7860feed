// The HIP device: kernels compiled to HSA code objects (codegen/amdgpu/),
// loaded through libamdhip64 and launched with a packed kernarg buffer,
// tensor maps in it by value in tessel's host form (AMD has no TMA).
#include "runtime/hip/hip_device.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/debug_abi.h"
#include "base/status.h"
#include "codegen/compiler.h"
#include "runtime/backend.h"
#include "runtime/compile_cached.h"
#include "runtime/debug_output.h"
#include "runtime/device_impl.h"
#include "runtime/hip/hip_runtime.h"
#include "runtime/hip/kernarg.h"
#include "runtime/pending_launches.h"
#include "runtime/plans/plan_backend.h"
#include "runtime/tensor_map.h"

namespace tessel {
namespace {

using hip::Runtime;

constexpr int kWave = 64;

// A loaded code object; unloaded when the last function made from it goes.
class Module {
 public:
  Module(const Runtime& runtime, hip::hipModule_t module) : runtime_(runtime), module_(module) {}
  ~Module() { runtime_.module_unload.raw(module_); }
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  hip::hipModule_t get() const { return module_; }

  // Its debug buffer (base/debug_abi.h) and the kernel, whose ops say what
  // the records hold; null and empty where it has none.
  void* debug_buffer = nullptr;
  std::optional<Kernel> debug_kernel;

  // Noted by every launch on `stream`, taken by the debug drain after a
  // synchronize of the device (no `done`) or of stream `done`, so that it
  // reads only the buffers of kernels that ran since the last read, once
  // all of them are done.
  void mark_launched(hip::hipStream_t stream) {
    if (debug_buffer != nullptr) pending_.add(stream);
  }
  bool take_launched(std::optional<hip::hipStream_t> done) { return pending_.take(done); }

 private:
  const Runtime& runtime_;
  hip::hipModule_t module_;
  PendingLaunches pending_;
};

// The modules of one device that have a debug buffer: each synchronize
// prints what the ones launched since the last wrote, and reports the first
// failed assert.
class DebugModules {
 public:
  DebugModules(const Runtime& runtime, int device) : runtime_(runtime), device_(device) {}

  void add(const std::shared_ptr<Module>& module) {
    absl::MutexLock lock(&mu_);
    std::erase_if(modules_, [](const std::weak_ptr<Module>& m) { return m.expired(); });
    modules_.push_back(module);
  }

  // Called once the device's work is done, or with `done` once that
  // stream's is (Module::take_launched).
  absl::Status drain(std::optional<hip::hipStream_t> done = std::nullopt) {
    std::vector<std::shared_ptr<Module>> launched;
    {
      absl::MutexLock lock(&mu_);
      for (const std::weak_ptr<Module>& weak : modules_) {
        std::shared_ptr<Module> m = weak.lock();
        if (m != nullptr && m->take_launched(done)) launched.push_back(std::move(m));
      }
    }
    absl::Status first = absl::OkStatus();
    for (const std::shared_ptr<Module>& m : launched) {
      TESSEL_ASSIGN_OR_RETURN(absl::Status assertion, read(*m));
      if (first.ok()) first = assertion;
    }
    return first;
  }

 private:
  absl::StatusOr<absl::Status> read(const Module& m) {
    const std::string what =
        absl::StrCat("hip:", device_, ": reading the debug buffer of '", m.debug_kernel->name(), "'");
    auto status = [&](absl::Status s) { return s.ok() ? s : prefixed(what, s); };
    TESSEL_RETURN_IF_ERROR(status(runtime_.set_device(device_)));
    auto* buffer = static_cast<char*>(m.debug_buffer);
    // hipMemcpy returns once the zeros are there.
    const uint64_t zeros[kDebugHeaderBytes / 8] = {};
    return drain_debug_buffer(
        *m.debug_kernel, absl::StrCat("hip:", device_),
        [&](int64_t offset, void* dst, int64_t bytes) {
          return status(runtime_.memcpy(dst, buffer + offset, bytes, hip::hipMemcpyDeviceToHost));
        },
        [&] { return status(runtime_.memcpy(buffer, zeros, sizeof(zeros), hip::hipMemcpyHostToDevice)); });
  }

  const Runtime& runtime_;
  const int device_;
  absl::Mutex mu_;
  std::vector<std::weak_ptr<Module>> modules_ ABSL_GUARDED_BY(mu_);
};

// A captured graph, ready to replay; it keeps the modules it launches loaded.
class HipGraph final : public GraphImpl {
 public:
  HipGraph(const Runtime& runtime, hip::hipGraphExec_t exec, std::vector<std::shared_ptr<Module>> modules)
      : runtime_(runtime), exec_(exec), modules_(std::move(modules)) {}
  ~HipGraph() override { runtime_.graph_exec_destroy.raw(exec_); }
  absl::Status launch(StreamImpl* stream) override {
    hip::hipStream_t s = stream == nullptr ? nullptr : static_cast<hip::hipStream_t>(stream->native());
    TESSEL_RETURN_IF_ERROR(runtime_.graph_launch(exec_, s));
    for (const std::shared_ptr<Module>& m : modules_) m->mark_launched(s);
    return absl::OkStatus();
  }

 private:
  const Runtime& runtime_;
  const hip::hipGraphExec_t exec_;
  const std::vector<std::shared_ptr<Module>> modules_;
};

class HipStream final : public StreamImpl {
 public:
  HipStream(const Runtime& runtime, hip::hipStream_t stream, std::shared_ptr<DebugModules> debug)
      : StreamImpl(DeviceKind::kHip), runtime_(runtime), stream_(stream), debug_(std::move(debug)) {}
  ~HipStream() override { runtime_.stream_destroy.raw(stream_); }
  void* native() const override { return stream_; }
  absl::Status synchronize() override {
    TESSEL_RETURN_IF_ERROR(runtime_.stream_synchronize(stream_));
    return debug_->drain(stream_);
  }
  bool capturing() const override { return capturing_.load(std::memory_order_acquire); }

  absl::Status begin_capture() override {
    absl::MutexLock lock(&mu_);
    if (capturing_.load()) {
      return absl::FailedPreconditionError("Stream::begin_capture on a HIP stream: the stream is already capturing");
    }
    captured_.clear();
    capturing_.store(true);  // first, so that no launch racing with the call goes unrecorded
    absl::Status status = runtime_.stream_begin_capture(stream_, hip::hipStreamCaptureModeThreadLocal);
    if (!status.ok()) capturing_.store(false);
    return status;
  }
  absl::StatusOr<std::shared_ptr<GraphImpl>> end_capture() override {
    std::vector<std::shared_ptr<Module>> modules;
    {
      absl::MutexLock lock(&mu_);
      if (!capturing_.load()) {
        return absl::FailedPreconditionError(
            "Stream::end_capture on a HIP stream: the stream is not capturing; call begin_capture() first");
      }
      capturing_.store(false);
      modules.swap(captured_);
    }
    hip::hipGraph_t graph = nullptr;
    absl::Status status = runtime_.stream_end_capture(stream_, &graph);
    if (!status.ok()) {
      if (graph != nullptr) runtime_.graph_destroy.raw(graph);
      return status;
    }
    hip::hipGraphExec_t exec = nullptr;
    status = runtime_.graph_instantiate(&exec, graph, nullptr, nullptr, 0);
    runtime_.graph_destroy.raw(graph);  // the executable graph does not need it
    if (!status.ok()) return status;
    return std::make_shared<HipGraph>(runtime_, exec, std::move(modules));
  }
  // Every launch on the stream: while capturing, the graph keeps the module loaded.
  void note_launch(const std::shared_ptr<Module>& module) {
    if (!capturing_.load(std::memory_order_relaxed)) return;
    absl::MutexLock lock(&mu_);
    if (std::find(captured_.begin(), captured_.end(), module) == captured_.end()) captured_.push_back(module);
  }

 private:
  const Runtime& runtime_;
  hip::hipStream_t stream_;
  const std::shared_ptr<DebugModules> debug_;
  std::atomic<bool> capturing_{false};
  absl::Mutex mu_;
  std::vector<std::shared_ptr<Module>> captured_ ABSL_GUARDED_BY(mu_);
};

class HipFunction final : public FunctionImpl {
 public:
  HipFunction(Kernel kernel, const Runtime& runtime, int device, std::shared_ptr<Module> module,
              hip::hipFunction_t function, int threads, int64_t shared_bytes)
      : FunctionImpl(kernel, TensorMapEncoding::kHost),
        runtime_(runtime),
        device_(device),
        module_(std::move(module)),
        function_(function),
        threads_(threads),
        shared_bytes_(shared_bytes),
        layout_(hip::kernarg_layout(kernel)) {}

  int64_t shared_bytes() const override { return shared_bytes_; }

  absl::StatusOr<int> programs_per_compute_unit() const override {
    int blocks = 0;
    absl::Status status = runtime_.set_device(device_);
    if (status.ok()) status = runtime_.occupancy(&blocks, function_, threads_, static_cast<size_t>(shared_bytes_));
    if (!status.ok()) return prefixed(absl::StrCat("occupancy of '", kernel().name(), "' on hip:", device_), status);
    return blocks;
  }

  absl::Status run(const LaunchConfig& config, void** params) override {
    const std::string what = absl::StrCat("launch '", kernel().name(), "' on hip:", device_);
    if (config.num_warps * kWave != threads_) [[unlikely]] {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": the launch asks for ", config.num_warps, " wavefronts (", config.num_warps * kWave,
                       " threads) but the kernel was compiled for ", threads_ / kWave, " (", threads_,
                       " threads); compile with CompileOptions::num_warps = ", config.num_warps));
    }
    hip::hipStream_t stream = nullptr;
    HipStream* hip_stream = nullptr;
    if (config.stream != nullptr && config.stream->impl() != nullptr) {
      if (config.stream->impl()->kind() != DeviceKind::kHip) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": the stream belongs to another kind of device"));
      }
      hip_stream = static_cast<HipStream*>(config.stream->impl());
      stream = static_cast<hip::hipStream_t>(hip_stream->native());
    }
    std::vector<uint8_t> args = hip::pack_kernargs(layout_, params);
    size_t size = args.size();
    void* extra[] = {hip::HIP_LAUNCH_PARAM_BUFFER_POINTER, args.data(), hip::HIP_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     hip::HIP_LAUNCH_PARAM_END};
    const std::array<int, 3>& g = config.grid.dims;
    absl::Status status = runtime_.set_device(device_);
    if (status.ok()) {
      status = runtime_.module_launch_kernel(function_, g[0], g[1], g[2], threads_, 1, 1,
                                             static_cast<unsigned>(shared_bytes_), stream, nullptr,
                                             size > 0 ? extra : nullptr);
    }
    if (!status.ok()) return prefixed(what, status);
    module_->mark_launched(stream);
    if (hip_stream != nullptr) hip_stream->note_launch(module_);
    return absl::OkStatus();
  }

 private:
  const Runtime& runtime_;
  const int device_;
  const std::shared_ptr<Module> module_;
  const hip::hipFunction_t function_;
  const int threads_;
  const int64_t shared_bytes_;
  const hip::KernargLayout layout_;
};

class HipDevice final : public DeviceImpl {
 public:
  static absl::StatusOr<std::shared_ptr<HipDevice>> open(const Runtime& runtime, int index) {
    auto device = std::shared_ptr<HipDevice>(new HipDevice(runtime, index));
    TESSEL_RETURN_IF_ERROR(device->query());
    return device;
  }

  std::string name() const override { return absl::StrCat("hip:", index_); }
  DeviceKind kind() const override { return DeviceKind::kHip; }
  hip::Rank rank() const { return {&runtime_, index_}; }
  int num_compute_units() const override { return compute_units_; }
  std::string arch() const override { return arch_; }
  std::string details() const override { return absl::StrCat(product_, ", ", arch_, ", ", compute_units_, " CUs"); }
  TensorMapEncoding tensor_map_encoding() const override { return TensorMapEncoding::kHost; }

  absl::StatusOr<std::shared_ptr<void>> raw_allocate(size_t bytes) override {
    TESSEL_RETURN_IF_ERROR(runtime_.set_device(index_));
    void* ptr = nullptr;
    if (absl::Status s = runtime_.malloc(&ptr, bytes); !s.ok()) {
      return prefixed(absl::StrCat(name(), ": allocating ", bytes, " bytes"), s);
    }
    const Runtime* runtime = &runtime_;
    return std::shared_ptr<void>(ptr, [runtime](void* p) { runtime->free.raw(p); });
  }
  absl::Status copy_to_device(void* dst, const void* src, size_t bytes) override {
    TESSEL_RETURN_IF_ERROR(runtime_.set_device(index_));
    return runtime_.memcpy(dst, src, bytes, hip::hipMemcpyHostToDevice);
  }
  absl::Status copy_to_host(void* dst, const void* src, size_t bytes) override {
    TESSEL_RETURN_IF_ERROR(runtime_.set_device(index_));
    return runtime_.memcpy(dst, src, bytes, hip::hipMemcpyDeviceToHost);
  }
  absl::Status synchronize() override {
    TESSEL_RETURN_IF_ERROR(runtime_.set_device(index_));
    TESSEL_RETURN_IF_ERROR(runtime_.device_synchronize());
    return debug_->drain();
  }
  absl::StatusOr<std::shared_ptr<StreamImpl>> create_stream() override {
    TESSEL_RETURN_IF_ERROR(runtime_.set_device(index_));
    hip::hipStream_t stream = nullptr;
    TESSEL_RETURN_IF_ERROR(runtime_.stream_create(&stream));
    return std::make_shared<HipStream>(runtime_, stream, debug_);
  }
  absl::StatusOr<TensorMap> encode_tensor_map(const TensorMapSpec& spec) override {
    return TensorMap::encode_host(spec);
  }

  absl::StatusOr<std::shared_ptr<FunctionImpl>> compile_uncached(const Kernel& kernel,
                                                                 const CompileOptions& options) override {
    CompileOptions resolved = options;
    if (resolved.arch.empty()) resolved.arch = arch_;
    const std::string prefix = absl::StrCat(name(), ": compile '", kernel.name(), "' for ", resolved.arch);
    if (resolved.arch != arch_) {
      return absl::InvalidArgumentError(absl::StrCat(prefix, ": ", name(), " runs only code compiled for ", arch_));
    }
    absl::StatusOr<DeviceCode> code = compile_cached(*disk_cache(), kernel, resolved);
    if (!code.ok()) return prefixed(prefix, code.status());
    TESSEL_RETURN_IF_ERROR(runtime_.set_device(index_));
    hip::hipModule_t module = nullptr;
    if (absl::Status s = runtime_.module_load_data(&module, code->binary.data()); !s.ok()) return prefixed(prefix, s);
    auto held = std::make_shared<Module>(runtime_, module);
    hip::hipFunction_t function = nullptr;
    if (absl::Status s = runtime_.module_get_function(&function, module, code->entry.c_str()); !s.ok()) {
      return prefixed(prefix, s);
    }
    if (writes_debug_buffer(kernel, resolved.debug)) {
      size_t bytes = 0;
      if (absl::Status s = runtime_.module_get_global(&held->debug_buffer, &bytes, module, kDebugSymbol); !s.ok()) {
        return prefixed(absl::StrCat(prefix, ": the debug buffer"), s);
      }
      if (bytes != static_cast<size_t>(kDebugBytes)) {
        return absl::InternalError(
            absl::StrCat(prefix, ": the debug buffer has ", bytes, " bytes; expected ", kDebugBytes));
      }
      held->debug_kernel = kernel;
      debug_->add(held);
    }
    return std::make_shared<HipFunction>(kernel, runtime_, index_, std::move(held), function, code->threads,
                                         code->shared_bytes);
  }

 private:
  HipDevice(const Runtime& runtime, int index)
      : runtime_(runtime), index_(index), debug_(std::make_shared<DebugModules>(runtime, index)) {}

  absl::Status query() {
    TESSEL_RETURN_IF_ERROR(runtime_.set_device(index_));
    TESSEL_RETURN_IF_ERROR(
        runtime_.device_get_attribute(&compute_units_, hip::hipDeviceAttributeMultiprocessorCount, index_));
    std::array<char, 256> product{};
    TESSEL_RETURN_IF_ERROR(runtime_.device_get_name(product.data(), static_cast<int>(product.size()), index_));
    product_ = product.data();
    // gcnArchName ("gfx942:sramecc+:xnack-"), from whichever properties
    // layout the runtime has; the target features after ':' do not change
    // the code tessel makes.
    std::vector<char> properties(hip::kDevicePropertiesBytes, 0);
    size_t at = hip::kArchNameOffsetR0000;
    if (runtime_.get_device_properties_r0600.present()) {
      TESSEL_RETURN_IF_ERROR(runtime_.get_device_properties_r0600(properties.data(), index_));
      at = hip::kArchNameOffsetR0600;
    } else {
      TESSEL_RETURN_IF_ERROR(runtime_.get_device_properties(properties.data(), index_));
    }
    const std::string gcn(properties.data() + at, strnlen(properties.data() + at, 256));
    arch_ = gcn.substr(0, gcn.find(':'));
    if (arch_.rfind("gfx", 0) != 0) {
      return absl::InternalError(absl::StrCat(name(), ": the HIP runtime reports architecture '", gcn, "'"));
    }
    return absl::OkStatus();
  }

  const Runtime& runtime_;
  const int index_;
  const std::shared_ptr<DebugModules> debug_;
  int compute_units_ = 0;
  std::string product_;
  std::string arch_;
};

absl::StatusOr<std::shared_ptr<DeviceImpl>> open_hip(absl::string_view name, absl::string_view suffix) {
  TESSEL_ASSIGN_OR_RETURN(int index, parse_device_index(name, suffix, "GPU index"));
  absl::StatusOr<const Runtime*> runtime = Runtime::get();
  if (!runtime.ok()) {
    return absl::UnavailableError(absl::StrCat("Device::open('", name, "'): ", runtime.status().message()));
  }
  int count = 0;
  TESSEL_RETURN_IF_ERROR((*runtime)->get_device_count(&count));
  if (index >= count) {
    return absl::NotFoundError(
        absl::StrCat("Device::open('", name, "'): ", count, " AMD GPU", count == 1 ? "" : "s", " present"));
  }
  TESSEL_ASSIGN_OR_RETURN(std::shared_ptr<HipDevice> device, HipDevice::open(**runtime, index));
  return device;
}

[[maybe_unused]] const bool registered = register_backend({.prefix = "hip",
                                                           .usage = "hip:N",
                                                           .open = &open_hip,
                                                           .make_group = &hip::make_group_backend,
                                                           .make_joined_group = nullptr});

}  // namespace

namespace hip {

absl::StatusOr<Rank> rank_of(const Device& device) {
  auto* d = dynamic_cast<HipDevice*>(&device.impl());
  if (d == nullptr) return absl::InvalidArgumentError(absl::StrCat(device.name(), " is not a HIP device"));
  return d->rank();
}

}  // namespace hip
}  // namespace tessel
