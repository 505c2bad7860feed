#include "runtime/device.h"

#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "dsl/status.h"
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

absl::StatusOr<Function> DeviceImpl::compile(const Kernel& kernel, const CompileOptions& options) {
  CompileOptions resolved = options_from_env(options);
  std::string key = absl::StrCat(resolved.cache_key(), "\n", kernel.str());
  {
    absl::MutexLock lock(&mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
  }
  TESSEL_ASSIGN_OR_RETURN(std::shared_ptr<FunctionImpl> impl, compile_uncached(kernel, resolved));
  Function fn(std::move(impl));
  absl::MutexLock lock(&mu_);
  return cache_.try_emplace(key, fn).first->second;
}

absl::StatusOr<Device> Device::open(absl::string_view name) {
  absl::string_view rest = name;
  if (absl::ConsumePrefix(&rest, "host")) {
    int threads = static_cast<int>(std::thread::hardware_concurrency());
    if (absl::ConsumePrefix(&rest, ":")) {
      if (!absl::SimpleAtoi(rest, &threads) || threads < 1 || threads > 1024) {
        return absl::InvalidArgumentError(
            absl::StrCat("Device::open('", name, "'): the host thread count must be 1 to 1024"));
      }
    } else if (!rest.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("Device::open('", name, "'): unknown device"));
    }
    TESSEL_ASSIGN_OR_RETURN(std::shared_ptr<DeviceImpl> impl, open_host_device(threads < 1 ? 1 : threads));
    return Device(std::move(impl));
  }
  if (absl::StartsWith(name, "cuda") || absl::StartsWith(name, "hip")) {
    return absl::UnavailableError(absl::StrCat("Device::open('", name,
                                               "'): this build of tessel runs kernels on the host only so far"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("Device::open('", name, "'): unknown device; use host, host:N, cuda:N or hip:N"));
}

absl::StatusOr<Device> Device::best() { return open("host"); }

std::string Device::name() const { return impl_->name(); }
DeviceKind Device::kind() const { return impl_->kind(); }
int Device::num_compute_units() const { return impl_->num_compute_units(); }
absl::StatusOr<Buffer> Device::allocate(size_t bytes) const { return impl_->allocate(bytes); }
absl::Status Device::synchronize() const { return impl_->synchronize(); }

absl::Status Device::copy_to_device(const Buffer& dst, const void* src, size_t bytes) const {
  if (bytes > dst.bytes()) {
    return absl::OutOfRangeError(absl::StrCat("copy_to_device: ", bytes, " bytes into a buffer of ", dst.bytes()));
  }
  return impl_->copy_to_device(dst.data(), src, bytes);
}

absl::Status Device::copy_to_host(void* dst, const Buffer& src, size_t bytes) const {
  if (bytes > src.bytes()) {
    return absl::OutOfRangeError(absl::StrCat("copy_to_host: ", bytes, " bytes from a buffer of ", src.bytes()));
  }
  return impl_->copy_to_host(dst, src.data(), bytes);
}

absl::StatusOr<TensorMap> Device::tensor_map(DType dtype, const Buffer& buffer, Shape dims, Shape box,
                                             Swizzle swizzle) const {
  int64_t bytes = dtype.bytes();
  for (int64_t d : dims) bytes *= d;
  if (buffer.data() == nullptr || bytes > static_cast<int64_t>(buffer.bytes())) {
    return absl::OutOfRangeError(absl::StrCat("tensor_map: a ", dtype.name(), " tensor of shape ", shape_str(dims),
                                              " needs ", bytes, " bytes; the buffer holds ", buffer.bytes()));
  }
  TensorMapSpec spec;
  spec.dtype = dtype;
  spec.address = buffer.data();
  spec.dims = std::move(dims);
  spec.box = std::move(box);
  spec.swizzle = swizzle;
  return impl_->encode_tensor_map(spec);
}

absl::StatusOr<Function> Device::compile(const Kernel& kernel, const CompileOptions& options) const {
  return impl_->compile(kernel, options);
}

}  // namespace tessel
