// Argument checking and packing for launches, common to every backend.
#include <algorithm>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "runtime/device.h"
#include "runtime/device_impl.h"
#include "runtime/tensor_map.h"

namespace tessel {

KernelArg::KernelArg(const Buffer& b) : kind_(Kind::kPointer), extent_(static_cast<int64_t>(b.bytes())) {
  set_pointer(b.data());
}
KernelArg::KernelArg(const TensorMap& m) : kind_(Kind::kTensorMap), dtype_(m.spec().dtype), map_(&m) {}

void* KernelArg::slot() const {
  if (kind_ == Kind::kTensorMap) return const_cast<void*>(map_->data());
  return storage_;
}

std::string KernelArg::describe() const {
  switch (kind_) {
    case Kind::kScalar: return std::string(dtype_.name());
    case Kind::kPointer: return typed_ ? absl::StrCat("a pointer to ", dtype_.name()) : "an untyped pointer";
    case Kind::kTensorMap:
      return absl::StrCat("a tensor map of ", dtype_.name(), " with box ", shape_str(map_->spec().box));
    case Kind::kView: return "a triggered view";
  }
  return "?";
}

namespace {

// Whether argument i of a launch adds its fact to the variant's key.
bool adds_fact(uint64_t specializable, size_t i, const KernelArg& a) {
  return i < 64 && (specializable >> i & 1) != 0 && a.multiple_of_16();
}

absl::Status check_arg(const Param& p, size_t index, const KernelArg& a, TensorMapEncoding encoding) {
  const Type& t = p.type;
  auto mismatch = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("argument ", index, " '", p.name, "' expects ", t.str(), ", got ", a.describe()));
  };
  switch (a.kind()) {
    case KernelArg::Kind::kScalar:
      if (!t.is_scalar() || t.dtype() != a.dtype()) return mismatch();
      return absl::OkStatus();
    case KernelArg::Kind::kPointer:
      if (!t.is_pointer() || (a.typed() && a.dtype() != t.dtype())) return mismatch();
      return absl::OkStatus();
    case KernelArg::Kind::kView:
      if (!t.is_triggered_view()) return mismatch();
      return absl::OkStatus();
    case KernelArg::Kind::kTensorMap: {
      if (!t.is_tensor_map()) return mismatch();
      const TensorMap& m = *a.tensor_map();
      if (m.spec().dtype != t.dtype() || m.spec().box != t.shape() || m.spec().swizzle != t.swizzle()) {
        return mismatch();
      }
      if (m.encoding() != encoding) {
        return absl::InvalidArgumentError(absl::StrCat("argument ", index, " '", p.name,
                                                       "': the tensor map was encoded for another kind of device"));
      }
      return absl::OkStatus();
    }
  }
  return mismatch();
}

}  // namespace

absl::Status Function::launch_packed(const LaunchConfig& config, absl::Span<const KernelArg> args) const {
  const Kernel& k = impl_->generic().kernel();
  const std::vector<Param>& params = k.params();
  if (args.size() != params.size()) {
    return absl::InvalidArgumentError(absl::StrCat("launch '", k.name(), "': expected ", params.size(),
                                                   " arguments, got ", args.size()));
  }
  for (int d : config.grid.dims) {
    if (d < 1) {
      return absl::InvalidArgumentError(absl::StrCat("launch '", k.name(), "': every grid dimension must be >= 1"));
    }
  }
  if (const int c = k.ir().cluster; config.grid.dims[0] % c != 0) {
    return absl::InvalidArgumentError(absl::StrCat("launch '", k.name(), "': the kernel runs clusters of ", c,
                                                   " programs, so its grid along axis 0 must be a multiple of ", c,
                                                   ", got ", config.grid.dims[0]));
  }
  FunctionImpl& generic = impl_->generic();
  const uint64_t specializable = impl_->specializable().multiple_of_16;
  Specialization key;
  absl::InlinedVector<void*, 16> slots(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    absl::Status s = check_arg(params[i], i, args[i], generic.tensor_map_encoding());
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("launch '", k.name(), "': ", s.message()));
    slots[i] = args[i].slot();
    if (adds_fact(specializable, i, args[i])) key.multiple_of_16 |= uint64_t{1} << i;
  }
  absl::StatusOr<FunctionImpl*> variant = impl_->get(key, config.stream == nullptr ? nullptr : config.stream->impl());
  if (!variant.ok()) [[unlikely]] {
    return prefixed(absl::StrCat("launch '", k.name(), "': compiling a variant"), variant.status());
  }
  return (*variant)->run_with(config, slots.data(), args);
}

Specialization Function::specialization_packed(absl::Span<const KernelArg> args) const {
  const uint64_t specializable = impl_->specializable().multiple_of_16;
  Specialization key;
  for (size_t i = 0; i < args.size(); ++i) {
    if (adds_fact(specializable, i, args[i])) key.multiple_of_16 |= uint64_t{1} << i;
  }
  return key;
}

absl::Status Function::prepare_packed(absl::Span<const KernelArg> args) const {
  absl::Status s = impl_->prepare(specialization_packed(args));
  if (s.ok()) return s;
  return prefixed(absl::StrCat("prepare '", kernel().name(), "'"), s);
}

const Kernel& Function::kernel() const { return impl_->generic().kernel(); }
int64_t Function::shared_bytes() const { return impl_->generic().shared_bytes(); }

absl::StatusOr<int> Function::persistent_grid() const {
  TESSEL_ASSIGN_OR_RETURN(int per_unit, impl_->generic().programs_per_compute_unit());
  if (per_unit < 1) {
    return absl::ResourceExhaustedError(absl::StrCat("persistent_grid of '", kernel().name(), "' on ",
                                                     impl_->device().name(), ": no program fits on a compute unit (",
                                                     shared_bytes(), " bytes of shared memory per program)"));
  }
  // Whole clusters, at least one.
  const int c = kernel().ir().cluster;
  return std::max(per_unit * impl_->device().num_compute_units() / c * c, c);
}

}  // namespace tessel
