#include "runtime/device.h"

#include <bit>
#include <chrono>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "codegen/compiler.h"
#include "base/status.h"
#include "runtime/backend.h"
#include "runtime/device_impl.h"
#include "runtime/env.h"

namespace tessel {

absl::StatusOr<Buffer> DeviceImpl::allocate(size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("allocate: 0 bytes requested");
  TESSEL_ASSIGN_OR_RETURN(std::shared_ptr<void> data, raw_allocate(bytes));
  Buffer b;
  b.data_ = std::move(data);
  b.bytes_ = bytes;
  return b;
}

absl::StatusOr<Buffer> Buffer::slice(size_t offset, size_t bytes) const {
  if (offset > bytes_ || bytes > bytes_ - offset) {
    return absl::OutOfRangeError(
        absl::StrCat("Buffer::slice: ", bytes, " bytes at offset ", offset, " pass the buffer's ", bytes_));
  }
  Buffer b;
  b.data_ = std::shared_ptr<void>(data_, static_cast<char*>(data()) + offset);
  b.bytes_ = bytes;
  return b;
}

absl::StatusOr<std::shared_ptr<FunctionImpl>> DeviceImpl::compile_variant(const Kernel& kernel,
                                                                          const CompileOptions& options) {
  std::string key = absl::StrCat(options.cache_key(), "\n", kernel.str());
  {
    absl::MutexLock lock(&mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
  }
  if (armed()) {
    return absl::FailedPreconditionError(absl::StrCat(
        name(), ": cannot compile '", kernel.name(), "' while a triggered plan has copy chains armed here (code "
        "loaded then can wait forever behind their stream waits); compile kernels before creating or re-arming "
        "plans"));
  }
  TESSEL_ASSIGN_OR_RETURN(std::shared_ptr<FunctionImpl> impl, compile_uncached(kernel, options));
  absl::MutexLock lock(&mu_);
  return cache_.try_emplace(key, std::move(impl)).first->second;
}

absl::StatusOr<Function> compile_function(const std::shared_ptr<DeviceImpl>& device, const Kernel& kernel,
                                          const CompileOptions& options) {
  CompileOptions resolved = options_from_env(options);
  resolved.specialization = {};  // launches choose theirs
  TESSEL_ASSIGN_OR_RETURN(std::shared_ptr<FunctionImpl> generic, device->compile_variant(kernel, resolved));
  return Function(std::make_shared<FunctionVariants>(device, std::move(resolved),
                                                     specializable(kernel), std::move(generic)));
}

FunctionVariants::~FunctionVariants() {
  for (const Variant* v = head_.load(std::memory_order_acquire); v != nullptr;) delete std::exchange(v, v->next);
}

absl::StatusOr<FunctionImpl*> FunctionVariants::add(Specialization key, const StreamImpl* stream) {
  absl::MutexLock lock(&mu_);
  if (FunctionImpl* known = find(key)) return known;  // another launch compiled it meanwhile
  if ((stream != nullptr && stream->capturing()) || device_->armed()) {
    FunctionImpl* best = generic_.get();
    int assumed = 0;
    for (const Variant* v = head_.load(std::memory_order_acquire); v != nullptr; v = v->next) {
      int n = std::popcount(v->key.multiple_of_16);
      if ((v->key.multiple_of_16 & ~key.multiple_of_16) == 0 && n > assumed) best = v->impl.get(), assumed = n;
    }
    return best;
  }
  return compile_locked(key);
}

absl::StatusOr<FunctionImpl*> FunctionVariants::compile_locked(Specialization key) {
  CompileOptions options = options_;
  options.specialization = key;
  TESSEL_ASSIGN_OR_RETURN(std::shared_ptr<FunctionImpl> impl, device_->compile_variant(generic_->kernel(), options));
  FunctionImpl* raw = impl.get();
  head_.store(new Variant{key, std::move(impl), head_.load(std::memory_order_acquire)}, std::memory_order_release);
  return raw;
}

absl::Status FunctionVariants::prepare(Specialization key) {
  if (key.multiple_of_16 == 0) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  if (find(key) != nullptr) return absl::OkStatus();
  return compile_locked(key).status();
}

absl::StatusOr<Device> Device::open(absl::string_view name) {
  const Backend* backend = find_backend(name);
  if (backend == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("Device::open('", name, "'): unknown device; use ", backend_usage()));
  }
  absl::string_view suffix = name.substr(backend->prefix.size());
  absl::ConsumePrefix(&suffix, ":");
  TESSEL_ASSIGN_OR_RETURN(std::shared_ptr<DeviceImpl> impl, backend->open(name, suffix));
  return Device(std::move(impl));
}

absl::StatusOr<Device> Device::best() {
  // A GPU tessel cannot compile every kernel for (before sm_80) would fail
  // some, so the host serves better.
  absl::StatusOr<Device> gpu = open("cuda:0");
  if (gpu.ok() && runs_every_kernel(gpu->arch())) return gpu;
  return open("host");
}

std::string Device::name() const { return impl_->name(); }
std::string Device::description() const {
  std::string details = impl_->details();
  return details.empty() ? impl_->name() : absl::StrCat(impl_->name(), " (", details, ")");
}
DeviceKind Device::kind() const { return impl_->kind(); }
std::string Device::arch() const { return impl_->arch(); }
int Device::num_compute_units() const { return impl_->num_compute_units(); }
absl::StatusOr<Buffer> Device::allocate(size_t bytes) const { return impl_->allocate(bytes); }
absl::Status Device::synchronize() const { return impl_->synchronize(); }
absl::StatusOr<double> Device::time(const std::function<absl::Status()>& work, const Stream* stream) const {
  if (!work) return absl::InvalidArgumentError(absl::StrCat("Device::time on ", impl_->name(), ": no work to time"));
  return impl_->time(work, stream == nullptr ? nullptr : stream->impl());
}

absl::StatusOr<Stream> Device::create_stream() const {
  TESSEL_ASSIGN_OR_RETURN(std::shared_ptr<StreamImpl> impl, impl_->create_stream());
  return Stream(std::move(impl));
}

// ---------------------------------------------------------------------------
// Streams and graphs

namespace {

// The stream of a backend that runs every launch before returning.
class SynchronousStream final : public StreamImpl {
 public:
  SynchronousStream(DeviceKind kind, std::string device) : StreamImpl(kind), device_(std::move(device)) {}
  void* native() const override { return nullptr; }
  absl::Status synchronize() override { return absl::OkStatus(); }
  absl::Status begin_capture() override {
    return absl::UnimplementedError(absl::StrCat("begin_capture: ", device_,
                                                 " runs launches synchronously and has no graphs; "
                                                 "capture needs a CUDA device"));
  }
  absl::StatusOr<std::shared_ptr<GraphImpl>> end_capture() override {
    return absl::FailedPreconditionError(absl::StrCat("end_capture: ", device_, " has no capture to end"));
  }

 private:
  std::string device_;
};

absl::Status empty_stream(absl::string_view what) {
  return absl::FailedPreconditionError(
      absl::StrCat(what, ": the Stream is empty; make one with Device::create_stream()"));
}

}  // namespace

absl::StatusOr<std::shared_ptr<StreamImpl>> DeviceImpl::create_stream() {
  return std::make_shared<SynchronousStream>(kind(), name());
}

absl::StatusOr<double> DeviceImpl::time(const std::function<absl::Status()>& work, StreamImpl*) {
  using Clock = std::chrono::steady_clock;
  TESSEL_RETURN_IF_ERROR(synchronize());
  const Clock::time_point t0 = Clock::now();
  TESSEL_RETURN_IF_ERROR(work());
  TESSEL_RETURN_IF_ERROR(synchronize());
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

absl::Status Stream::synchronize() const {
  if (impl_ == nullptr) return empty_stream("Stream::synchronize");
  return impl_->synchronize();
}

void* Stream::native() const { return impl_ == nullptr ? nullptr : impl_->native(); }

absl::Status Stream::begin_capture() const {
  if (impl_ == nullptr) return empty_stream("Stream::begin_capture");
  return impl_->begin_capture();
}

absl::StatusOr<Graph> Stream::end_capture() const {
  if (impl_ == nullptr) return empty_stream("Stream::end_capture");
  TESSEL_ASSIGN_OR_RETURN(std::shared_ptr<GraphImpl> graph, impl_->end_capture());
  return Graph(std::move(graph));
}

absl::Status Graph::launch(const Stream* stream) const {
  return impl_->launch(stream == nullptr ? nullptr : stream->impl());
}

absl::Status Device::copy_to_device(const Buffer& dst, const void* src, size_t bytes) const {
  if (bytes > dst.bytes()) {
    return absl::OutOfRangeError(absl::StrCat("copy_to_device: ", bytes, " bytes into a buffer of ", dst.bytes()));
  }
  if (bytes == 0) return absl::OkStatus();  // `src` may then be null, as an empty vector's data() is.
  return impl_->copy_to_device(dst.data(), src, bytes);
}

absl::Status Device::copy_to_host(void* dst, const Buffer& src, size_t bytes) const {
  if (bytes > src.bytes()) {
    return absl::OutOfRangeError(absl::StrCat("copy_to_host: ", bytes, " bytes from a buffer of ", src.bytes()));
  }
  if (bytes == 0) return absl::OkStatus();  // `dst` may then be null.
  return impl_->copy_to_host(dst, src.data(), bytes);
}

namespace {

// A dense row-major tensor in (part of) `buffer`: it must fit.
absl::StatusOr<TensorMapSpec> buffer_spec(DType dtype, const Buffer& buffer, Shape dims, Shape box, Swizzle swizzle) {
  int64_t bytes = dtype.bytes();
  for (int64_t d : dims) bytes *= d;
  if (buffer.data() == nullptr || bytes > static_cast<int64_t>(buffer.bytes())) {
    return absl::OutOfRangeError(absl::StrCat("tensor_map: a ", dtype.name(), " tensor of shape ", shape_str(dims),
                                              " needs ", bytes, " bytes; the buffer holds ", buffer.bytes()));
  }
  return dense_spec(dtype, buffer.data(), std::move(dims), std::move(box), swizzle);
}

}  // namespace

absl::StatusOr<TensorMap> Device::tensor_map(DType dtype, const Buffer& buffer, Shape dims, Shape box,
                                             Swizzle swizzle) const {
  TESSEL_ASSIGN_OR_RETURN(TensorMapSpec spec, buffer_spec(dtype, buffer, std::move(dims), std::move(box), swizzle));
  return impl_->encode_tensor_map(spec);
}

absl::StatusOr<const TensorMap*> Device::cached_tensor_map(DType dtype, const Buffer& buffer, const Shape& dims,
                                                           const Shape& box, Swizzle swizzle) const {
  TESSEL_ASSIGN_OR_RETURN(TensorMapSpec spec, buffer_spec(dtype, buffer, dims, box, swizzle));
  return impl_->tensor_maps().get_or_encode(spec);
}

absl::StatusOr<Function> Device::compile(const Kernel& kernel, const CompileOptions& options) const {
  return compile_function(impl_, kernel, options);
}

}  // namespace tessel
