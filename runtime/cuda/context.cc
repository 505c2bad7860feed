#include "runtime/cuda/context.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/debug_abi.h"
#include "base/status.h"
#include "codegen/compiler.h"
#include "runtime/debug_output.h"

namespace tessel::cuda {

// ---------------------------------------------------------------------------
// Context

absl::StatusOr<std::shared_ptr<Context>> Context::open(const Driver& driver, int ordinal) {
  int count = 0;
  TESSEL_RETURN_IF_ERROR(driver.device_get_count(&count));
  if (ordinal < 0 || ordinal >= count) {
    std::string present = count == 0   ? ""
                          : count == 1 ? " (cuda:0)"
                                       : absl::StrCat(" (cuda:0 to cuda:", count - 1, ")");
    return absl::NotFoundError(
        absl::StrCat("no such GPU: this machine has ", count, " NVIDIA GPU", count == 1 ? "" : "s", present));
  }
  CUdevice device = 0;
  TESSEL_RETURN_IF_ERROR(driver.device_get(&device, ordinal));
  // The primary context is the one the CUDA runtime (and so PyTorch) uses:
  // sharing it lets buffers and streams pass between them.
  CUcontext context = nullptr;
  TESSEL_RETURN_IF_ERROR(driver.primary_ctx_retain(&context, device));
  // The first open of a GPU retains its primary context once more, for the
  // life of the process: created anew each time the last handle went, it
  // cost about 0.8 s per GPU on an H200 (the GPU test suite took 152 s with
  // that, 30 s without).
  static absl::Mutex mu(absl::kConstInit);
  static auto* kept = new absl::flat_hash_set<int>();
  absl::MutexLock lock(&mu);
  if (kept->insert(ordinal).second) {
    CUcontext again = nullptr;
    if (!driver.primary_ctx_retain(&again, device).ok()) kept->erase(ordinal);
  }
  return std::shared_ptr<Context>(new Context(driver, device, context, ordinal));
}

Context::~Context() {
  // Fails only when the driver is already shut down at process exit, when
  // there is nothing left to release.
  driver_.primary_ctx_release.raw(device_);
}

absl::StatusOr<int> Context::attribute(CUdevice_attribute attribute) const {
  int value = 0;
  TESSEL_RETURN_IF_ERROR(driver_.device_get_attribute(&value, attribute, device_));
  return value;
}

void Context::add_module(const std::shared_ptr<Module>& module) {
  absl::MutexLock lock(&mu_);
  // Forget unloaded modules here rather than in ~Module, which would need
  // the lock while a check may be reading.
  std::erase_if(modules_, [](const std::weak_ptr<Module>& m) { return m.expired(); });
  modules_.push_back(module);
}

absl::StatusOr<absl::Status> Context::read_debug_buffer(const Module& m) {
  return drain_debug_buffer(
      *m.debug_kernel, "",
      [&](int64_t offset, void* dst, int64_t bytes) {
        return driver_.memcpy_dtoh(dst, m.debug_buffer + offset, bytes);
      },
      [&] { return driver_.memset_d8(m.debug_buffer, 0, kDebugHeaderBytes); });
}

absl::Status Context::check_device_errors(std::optional<CUstream> done) {
  std::vector<std::shared_ptr<Module>> launched;
  {
    absl::MutexLock lock(&mu_);
    for (const std::weak_ptr<Module>& weak : modules_) {
      std::shared_ptr<Module> m = weak.lock();
      if (m != nullptr && m->take_launched(done)) {
        launched.push_back(std::move(m));
      }
    }
  }
  if (launched.empty()) return absl::OkStatus();
  ContextScope scope(*this);
  TESSEL_RETURN_IF_ERROR(scope.status());
  std::vector<std::string> errors;
  bool all_timeouts = true, cleared = false;
  for (const std::shared_ptr<Module>& m : launched) {
    if (m->debug_buffer != 0) {
      TESSEL_ASSIGN_OR_RETURN(absl::Status assertion, read_debug_buffer(*m));
      cleared = true;
      if (!assertion.ok()) {
        all_timeouts = false;
        errors.emplace_back(assertion.message());
      }
    }
    if (m->error_word == 0) continue;
    uint32_t code = 0;
    TESSEL_RETURN_IF_ERROR(driver_.memcpy_dtoh(&code, m->error_word, sizeof(code)));
    if (code == 0) continue;
    // Cleared so the next synchronize reports only new failures.
    TESSEL_RETURN_IF_ERROR(driver_.memset_d8(m->error_word, 0, sizeof(code)));
    if (code == kDeviceTimeout) {
      errors.push_back(absl::StrCat("kernel '", m->kernel_name(), "' timed out in a bounded wait (code ", code, ")"));
    } else {
      all_timeouts = false;
      errors.push_back(absl::StrCat("kernel '", m->kernel_name(), "' reported device error code ", code));
    }
  }
  if (errors.empty() && !cleared) return absl::OkStatus();
  // The memsets above are queued on the default stream: finish them so a
  // launch on another stream cannot have its fresh error cleared.
  TESSEL_RETURN_IF_ERROR(driver_.stream_synchronize(nullptr));
  if (errors.empty()) return absl::OkStatus();
  std::string message = absl::StrCat(name_, ": ", absl::StrJoin(errors, "; "));
  return all_timeouts ? absl::DeadlineExceededError(message) : absl::InternalError(message);
}

// ---------------------------------------------------------------------------
// ContextScope

ContextScope::ContextScope(const Context& context) : driver_(context.driver()) {
  CUcontext current = nullptr;
  status_ = driver_.ctx_get_current(&current);
  if (!status_.ok() || current == context.get()) return;
  status_ = driver_.ctx_set_current(context.get());
  if (status_.ok()) previous_ = current;
}

ContextScope::~ContextScope() {
  // Restoring can only fail if the other library's context is gone, and then
  // there is nothing to restore.
  if (previous_ != nullptr) driver_.ctx_set_current.raw(previous_);
}

void Context::run_or_defer(std::function<void()> fn) {
  {
    absl::MutexLock lock(&armed_mu_);
    if (armed_ > 0) {
      deferred_.push_back(std::move(fn));
      return;
    }
  }
  fn();
}

void Context::add_armed(int delta) {
  std::vector<std::function<void()>> ready;
  {
    absl::MutexLock lock(&armed_mu_);
    armed_ += delta;
    if (armed_ == 0) ready.swap(deferred_);
  }
  for (auto& fn : ready) fn();
}

// ---------------------------------------------------------------------------
// Module

Module::~Module() {
  context_->run_or_defer([context = context_, module = module_] {
    ContextScope scope(*context);
    // Fails only at process exit, after the driver shut down.
    context->driver().module_unload.raw(module);
  });
}

// ---------------------------------------------------------------------------
// Streams and graphs

namespace {

class DeviceGraph final : public GraphImpl {
 public:
  DeviceGraph(std::shared_ptr<Context> context, CUgraphExec exec, std::vector<std::shared_ptr<Module>> modules)
      : context_(std::move(context)), exec_(exec), modules_(std::move(modules)) {}
  ~DeviceGraph() override {
    ContextScope scope(*context_);
    context_->driver().graph_exec_destroy.raw(exec_);
  }

  absl::Status launch(StreamImpl* stream) override {
    absl::StatusOr<CUstream> s = resolve_stream(*context_, stream, nullptr);
    absl::Status status = s.status();
    ContextScope scope(*context_);
    if (status.ok()) status = scope.status();
    if (status.ok()) status = context_->driver().graph_launch(exec_, *s);
    if (!status.ok()) {
      return prefixed(absl::StrCat("Graph::launch on ", context_->name()), status);
    }
    for (const std::shared_ptr<Module>& m : modules_) m->mark_launched(*s);
    return absl::OkStatus();
  }

 private:
  const std::shared_ptr<Context> context_;
  const CUgraphExec exec_;
  // Kept loaded: the graph's kernel nodes call into them.
  const std::vector<std::shared_ptr<Module>> modules_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<DeviceStream>> DeviceStream::create(std::shared_ptr<Context> context) {
  ContextScope scope(*context);
  TESSEL_RETURN_IF_ERROR(scope.status());
  CUstream stream = nullptr;
  TESSEL_RETURN_IF_ERROR(context->driver().stream_create(&stream, CU_STREAM_NON_BLOCKING));
  return std::shared_ptr<DeviceStream>(new DeviceStream(std::move(context), stream));
}

DeviceStream::~DeviceStream() {
  ContextScope scope(*context_);
  // cuStreamDestroy returns at once and the driver frees the stream after its
  // work; it fails only at process exit.
  context_->driver().stream_destroy.raw(stream_);
}

absl::Status DeviceStream::synchronize() {
  ContextScope scope(*context_);
  TESSEL_RETURN_IF_ERROR(scope.status());
  absl::Status status = context_->driver().stream_synchronize(stream_);
  if (!status.ok()) {
    return prefixed(absl::StrCat("Stream::synchronize on ", context_->name()), status);
  }
  return context_->check_device_errors(stream_);
}

absl::Status DeviceStream::begin_capture() {
  ContextScope scope(*context_);
  TESSEL_RETURN_IF_ERROR(scope.status());
  absl::MutexLock lock(&mu_);
  if (capturing_.load()) {
    return absl::FailedPreconditionError(
        absl::StrCat("Stream::begin_capture on ", context_->name(), ": the stream is already capturing"));
  }
  captured_.clear();
  // Set first, so that no launch racing with the call goes unrecorded.
  capturing_.store(true);
  // THREAD_LOCAL: forbids this thread the calls that would break the capture
  // (synchronous copies, synchronize) without stopping other threads, which
  // may be driving other devices.
  absl::Status status = context_->driver().stream_begin_capture(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  if (!status.ok()) {
    capturing_.store(false);
    return prefixed(absl::StrCat("Stream::begin_capture on ", context_->name()), status);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<GraphImpl>> DeviceStream::end_capture() {
  ContextScope scope(*context_);
  TESSEL_RETURN_IF_ERROR(scope.status());
  std::vector<std::shared_ptr<Module>> modules;
  {
    absl::MutexLock lock(&mu_);
    if (!capturing_.load()) {
      return absl::FailedPreconditionError(absl::StrCat("Stream::end_capture on ", context_->name(),
                                                        ": the stream is not capturing; call begin_capture() first"));
    }
    capturing_.store(false);
    modules.swap(captured_);
  }
  const Driver& d = context_->driver();
  CUgraph graph = nullptr;
  absl::Status status = d.stream_end_capture(stream_, &graph);
  if (!status.ok()) {
    // An invalidated capture still hands back its (unusable) graph.
    if (graph != nullptr) d.graph_destroy.raw(graph);
    return absl::Status(status.code(), absl::StrCat("Stream::end_capture on ", context_->name(), ": ", status.message(),
                                                    status.code() == absl::StatusCode::kFailedPrecondition
                                                        ? "; the capturing thread must not synchronize or copy "
                                                          "synchronously before the capture ends"
                                                        : ""));
  }
  CUgraphExec exec = nullptr;
  status = d.graph_instantiate(&exec, graph, 0);
  // The executable graph is independent of the graph it came from.
  d.graph_destroy.raw(graph);
  if (!status.ok()) {
    return prefixed(absl::StrCat("Stream::end_capture on ", context_->name()), status);
  }
  return std::make_shared<DeviceGraph>(context_, exec, std::move(modules));
}

void DeviceStream::note_launch(const std::shared_ptr<Module>& module) {
  if (!capturing_.load(std::memory_order_relaxed)) return;
  absl::MutexLock lock(&mu_);
  if (std::find(captured_.begin(), captured_.end(), module) == captured_.end()) captured_.push_back(module);
}

absl::StatusOr<CUstream> resolve_stream(const Context& context, StreamImpl* stream, DeviceStream** device_stream) {
  if (device_stream != nullptr) *device_stream = nullptr;
  if (stream == nullptr) return nullptr;  // the legacy default stream
  if (stream->kind() != DeviceKind::kCuda) {
    return absl::InvalidArgumentError("the stream belongs to a device of another kind");
  }
  auto* s = static_cast<DeviceStream*>(stream);
  // Same primary context, same GPU: streams of another Device handle for the
  // same GPU are fine.
  if (s->context().get() != context.get()) {
    return absl::InvalidArgumentError(absl::StrCat("the stream belongs to ", s->context().name()));
  }
  if (device_stream != nullptr) *device_stream = s;
  return s->get();
}

}  // namespace tessel::cuda
