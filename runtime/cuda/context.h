// Internal to the CUDA backend: a device's primary context and what lives in
// it (loaded modules and their error words, streams, graphs).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "runtime/cuda/driver.h"
#include "runtime/device_impl.h"
#include "runtime/pending_launches.h"

namespace tessel::cuda {

class Module;

// A GPU's primary context, retained for as long as a device handle, buffer,
// stream, graph or function of it lives (each holds a shared_ptr), so that
// releasing any of them never finds the context gone. Thread-safe.
class Context {
 public:
  // NotFound for an ordinal past the GPUs present.
  static absl::StatusOr<std::shared_ptr<Context>> open(const Driver& driver, int ordinal);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Driver& driver() const { return driver_; }
  CUdevice device() const { return device_; }
  CUcontext get() const { return context_; }
  // "cuda:0"
  const std::string& name() const { return name_; }

  absl::StatusOr<int> attribute(CUdevice_attribute attribute) const;

  // While triggered-plan chains are armed on the GPU, frees and unloads
  // (cuMemFree, cuModuleUnload, cuMemUnmap synchronize the device, so they
  // would wait forever behind the chains' stream waits) are deferred until
  // the last armed epoch ends. `fn` runs now when nothing is armed.
  void run_or_defer(std::function<void()> fn);
  void add_armed(int delta);

  // Error words of the modules below are read by check_device_errors().
  void add_module(const std::shared_ptr<Module>& module);
  // Reads (and clears) the error word of every module launched since the last
  // check: "kernel 'x' timed out in a bounded wait (code 1)"; and its debug
  // buffer: device_print's lines go to stdout, a failed device_assert is an
  // error. Call after the device's work has finished, or with `done` after
  // that stream's: then only modules with no launch pending on another
  // stream are read (Module::take_launched).
  absl::Status check_device_errors(std::optional<CUstream> done = std::nullopt);

 private:
  // Prints the lines of `m`'s debug buffer and clears it; returns its
  // failed assert (OK for none), or the error of reading it.
  absl::StatusOr<absl::Status> read_debug_buffer(const Module& m);

  Context(const Driver& driver, CUdevice device, CUcontext context, int ordinal)
      : driver_(driver), device_(device), context_(context), name_("cuda:" + std::to_string(ordinal)) {}

  const Driver& driver_;
  const CUdevice device_;
  const CUcontext context_;
  const std::string name_;
  absl::Mutex mu_;
  std::vector<std::weak_ptr<Module>> modules_ ABSL_GUARDED_BY(mu_);
  absl::Mutex armed_mu_;
  int armed_ ABSL_GUARDED_BY(armed_mu_) = 0;
  std::vector<std::function<void()>> deferred_ ABSL_GUARDED_BY(armed_mu_);
};

// Makes `context` current on this thread for the scope. The previous context
// is restored only if there was one: a thread that had none keeps ours, so
// that back-to-back calls cost one cuCtxGetCurrent, not two switches, while a
// thread where another library (PyTorch) made its context current gets it
// back, because the CUDA runtime follows the current context.
class ContextScope {
 public:
  explicit ContextScope(const Context& context);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;
  // Not OK if the context could not be made current.
  const absl::Status& status() const { return status_; }

 private:
  const Driver& driver_;
  CUcontext previous_ = nullptr;
  absl::Status status_;
};

// A loaded module holding one kernel, unloaded when the last function or
// graph using it goes.
class Module {
 public:
  Module(std::shared_ptr<Context> context, CUmodule module, std::string kernel_name)
      : context_(std::move(context)), module_(module), kernel_name_(std::move(kernel_name)) {}
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::shared_ptr<Context>& context() const { return context_; }
  CUmodule get() const { return module_; }
  const std::string& kernel_name() const { return kernel_name_; }

  // The device u32 in which the kernel's bounded waits record an error
  // (PtxCode::error_symbol); 0 if it has none.
  CUdeviceptr error_word = 0;
  // Its debug buffer (base/debug_abi.h) and the kernel, whose ops say what
  // the records hold; 0 and empty where it has none.
  CUdeviceptr debug_buffer = 0;
  std::optional<Kernel> debug_kernel;

  // Noted by every launch on `stream`, taken by the error check after a
  // synchronize of the device (no `done`) or of stream `done`, so that it
  // reads only the buffers of kernels that ran since the last read, once
  // all of them are done.
  void mark_launched(CUstream stream) {
    if (error_word != 0 || debug_buffer != 0) pending_.add(stream);
  }
  bool take_launched(std::optional<CUstream> done) { return pending_.take(done); }

 private:
  const std::shared_ptr<Context> context_;
  const CUmodule module_;
  const std::string kernel_name_;
  PendingLaunches pending_;
};

// A stream created on a context (CU_STREAM_NON_BLOCKING; see tessel::Stream).
class DeviceStream final : public StreamImpl {
 public:
  static absl::StatusOr<std::shared_ptr<DeviceStream>> create(std::shared_ptr<Context> context);
  ~DeviceStream() override;

  const Context& context() const { return *context_; }
  CUstream get() const { return stream_; }
  void* native() const override { return stream_; }
  absl::Status synchronize() override;
  absl::Status begin_capture() override;
  absl::StatusOr<std::shared_ptr<GraphImpl>> end_capture() override;
  bool capturing() const override { return capturing_.load(std::memory_order_acquire); }

  // Called by every launch on this stream: while capturing, the graph must
  // keep the launched module loaded and check its error word when replayed.
  void note_launch(const std::shared_ptr<Module>& module);

 private:
  DeviceStream(std::shared_ptr<Context> context, CUstream stream)
      : StreamImpl(DeviceKind::kCuda), context_(std::move(context)), stream_(stream) {}

  const std::shared_ptr<Context> context_;
  const CUstream stream_;
  std::atomic<bool> capturing_{false};  // read without the lock on every launch
  absl::Mutex mu_;
  std::vector<std::shared_ptr<Module>> captured_ ABSL_GUARDED_BY(mu_);
};

// The CUstream a launch on `context` goes to: null (the legacy default
// stream) for a null `stream`; kInvalidArgument if the stream belongs to
// another device, for the caller to prefix. `device_stream` (if not null)
// receives the stream when there is one.
// The context of a CUDA device; null for devices of other backends.
std::shared_ptr<Context> context_of(DeviceImpl& device);

absl::StatusOr<CUstream> resolve_stream(const Context& context, StreamImpl* stream, DeviceStream** device_stream);

}  // namespace tessel::cuda
