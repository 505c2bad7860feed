// The CUDA device: kernels compiled to PTX, loaded eagerly through the driver
// and launched with tensor maps by value.
#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <optional>
#include <span>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "base/debug_abi.h"
#include "base/status.h"
#include "base/tma_rules.h"
#include "codegen/compiler.h"
#include "runtime/backend.h"
#include "runtime/compile_cached.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/jit_notes.h"
#include "runtime/cuda/tiled_encoding.h"
#include "runtime/device_impl.h"
#include "runtime/plans/plan_backend.h"
#include "runtime/tensor_map.h"

namespace tessel {
namespace {

using cuda::Context;
using cuda::ContextScope;
using cuda::Driver;
using cuda::Module;

// The driver API's names, as cuda.h spells them (cuda_api.h).
using cuda::CUdeviceptr;
using cuda::CUfunction;
using cuda::CUjit_option;
using cuda::CUlinkState;
using cuda::CUmodule;
using cuda::CUstream;
using cuda::CUtensorMap;
using cuda::CUtensorMapDataType;
using cuda::CUtensorMapInterleave;
using cuda::CUtensorMapSwizzle;
using cuda::cuuint32_t;
using cuda::cuuint64_t;
using enum cuda::CUdevice_attribute;
using enum cuda::CUfunction_attribute;
using enum cuda::CUjit_option;
using enum cuda::CUjitInputType;
using enum cuda::CUtensorMapDataType;
using enum cuda::CUtensorMapFloatOOBfill;
using enum cuda::CUtensorMapInterleave;
using enum cuda::CUtensorMapL2promotion;
using enum cuda::CUtensorMapSwizzle;

// Without the opt-in attribute a program may use this much dynamic shared memory.
constexpr int64_t kDefaultSharedLimit = 48 * 1024;
constexpr size_t kJitLogBytes = 16 * 1024;

// ---------------------------------------------------------------------------
// Compilation helpers

// The chip to compile for when the options name none: sm_90a on Hopper
// (wgmma and TMA need the "a" features), else the device's own sm_XY, which
// codegen accepts or rejects with its own message.
std::string default_arch(int cc) { return cc == 90 ? "sm_90a" : absl::StrCat("sm_", cc); }

// Rejects an arch the device cannot run, before the driver answers with a
// bare CUDA_ERROR_NO_BINARY_FOR_GPU: "a" (arch-specific) code runs only on its
// own compute capability, other code on that one or newer.
absl::Status check_arch(const std::string& arch, int cc, const std::string& device) {
  absl::string_view rest = arch;
  int number = 0;
  if (!absl::ConsumePrefix(&rest, "sm_")) {
    return absl::InvalidArgumentError(
        absl::StrCat(device, " runs only code compiled for NVIDIA GPUs (sm_90a, ...), not for ", arch));
  }
  bool specific = absl::ConsumeSuffix(&rest, "a");
  if (!absl::SimpleAtoi(rest, &number)) return absl::OkStatus();  // codegen names the problem
  if ((specific && number != cc) || number > cc) {
    return absl::InvalidArgumentError(absl::StrCat(device, " is sm_", cc, " and cannot run code compiled for ", arch,
                                                   specific ? " (arch-specific code runs only on its own GPU)" : ""));
  }
  return absl::OkStatus();
}

// The tensor maps code for `arch` reads: the driver's on sm_90 and after,
// whose TMA copies the boxes; tessel's host form before, whose boxes the
// program's threads copy.
TensorMapEncoding maps_for(const std::string& arch) {
  return copies_boxes_with_tma(arch) ? TensorMapEncoding::kCuda : TensorMapEncoding::kHost;
}

absl::Status write_dumps(const Kernel& kernel, const CompileOptions& options, const std::string& arch,
                         const CompileArtifacts& artifacts, const std::string& ptx) {
  std::string base = absl::StrCat(options.dump_dir, "/", kernel.name(), ".", arch);
  for (absl::string_view stage : absl::StrSplit(options.dump_stages, ',', absl::SkipEmpty())) {
    const std::string* text = nullptr;
    const char* ext = nullptr;
    if (stage == "ir") text = &artifacts.ir, ext = ".tessel";
    if (stage == "llvm") text = &artifacts.llvm, ext = ".ll";
    if (stage == "ptx") text = &ptx, ext = ".ptx";
    if (text == nullptr) continue;  // stages of other targets
    std::string path = absl::StrCat(base, ext);
    std::ofstream out(path);
    out << *text;
    if (!out) return absl::PermissionDeniedError(absl::StrCat("TESSEL_DUMP: cannot write ", path));
  }
  return absl::OkStatus();
}

// The JIT log ends in NULs and newlines; an empty log adds nothing.
std::string jit_log(const std::array<char, kJitLogBytes>& log) {
  std::string text(log.data(), strnlen(log.data(), log.size()));
  return std::string(absl::StripTrailingAsciiWhitespace(text));
}

// The JIT options that collect the driver's error log into `log`, and
// where given its information log (ptxas's notes) into `info`.
struct JitLogOptions {
  explicit JitLogOptions(std::array<char, kJitLogBytes>& log, std::array<char, kJitLogBytes>* info = nullptr)
      : values{log.data(), size_of(log)} {
    if (info != nullptr) {
      keys.insert(keys.end(), {cuda::CU_JIT_INFO_LOG_BUFFER, cuda::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES});
      values.insert(values.end(), {info->data(), size_of(*info)});
    }
  }
  unsigned count() const { return static_cast<unsigned>(keys.size()); }
  static void* size_of(const std::array<char, kJitLogBytes>& log) {
    return reinterpret_cast<void*>(static_cast<uintptr_t>(log.size()));
  }
  std::vector<CUjit_option> keys = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  std::vector<void*> values;
};

// `status` with the driver's error log appended, where it wrote one.
absl::Status with_log(const absl::Status& status, const std::array<char, kJitLogBytes>& log) {
  std::string text = jit_log(log);
  if (text.empty()) return status;
  return absl::Status(status.code(), absl::StrCat(status.message(), ": ", text));
}

// PTX compiled to a cubin by the driver's JIT linker, in the current
// context; nullopt where ptxas serialized the kernel's wgmma in the
// relocatable code the linker compiles (wgmma_serialized of its notes),
// which a whole-program compile does not. The linker places dynamic shared
// memory right after the static (codegen rounds tiles up at run time).
absl::StatusOr<std::optional<std::string>> link_ptx(const Driver& d, const std::string& ptx, const std::string& name) {
  std::array<char, kJitLogBytes> log{}, info{};
  JitLogOptions options(log, &info);
  CUlinkState link = nullptr;
  TESSEL_RETURN_IF_ERROR(d.link_create(options.count(), options.keys.data(), options.values.data(), &link));
  absl::Cleanup destroy = [&] { d.link_destroy.raw(link); };
  absl::Status status = d.link_add_data(link, CU_JIT_INPUT_PTX, const_cast<char*>(ptx.c_str()), ptx.size() + 1,
                                        name.c_str(), 0, nullptr, nullptr);
  void* cubin = nullptr;
  size_t bytes = 0;
  if (status.ok()) status = d.link_complete(link, &cubin, &bytes);
  if (!status.ok()) return with_log(status, log);
  if (cuda::wgmma_serialized(jit_log(info))) return std::nullopt;
  return std::string(static_cast<const char*>(cubin), bytes);
}

// The cache spaces of the linker's cubins, and of the PTX that loads as a
// whole program because the linker's compile serialized its wgmma.
constexpr const char* kCubinCacheSpace = "cubins";
constexpr const char* kWholeProgramCacheSpace = "whole-programs";

// `ptx` compiled and loaded as one whole program (under the driver's lock).
absl::StatusOr<CUmodule> load_whole_program(const Driver& d, const std::string& ptx) {
  CUmodule module = nullptr;
  std::array<char, kJitLogBytes> log{};
  JitLogOptions options(log);
  absl::Status status =
      d.module_load_data_ex(&module, ptx.c_str(), options.count(), options.keys.data(), options.values.data());
  if (!status.ok()) return with_log(status, log);
  return module;
}

// `ptx` loaded as a module of the current context (the device's `arch`).
//
// Most kernels go through the driver's JIT linker: a module load of PTX
// compiles under a lock of the driver's, so threads compiling at once take
// turns, while the linker's compiles run side by side. The linker's cubin is
// kept in the disk cache (its key names the PTX, the arch and the driver's
// version), so a process that finds the kernel's PTX there skips the
// driver's compile too. The linker compiles relocatable code, in which ptxas
// serializes a kernel's wgmma (at a fraction of the speed) where it ignores
// setmaxnreg and where it calls a routine of its own (for a 64-bit integer
// division or an IEEE f32 reciprocal): kernels with setmaxnreg load as
// whole programs, and so do kernels whose link says it serialized wgmma,
// which the disk cache then remembers.
absl::StatusOr<CUmodule> load_module(const DiskCache& cache, const Driver& d, const std::string& arch,
                                     const std::string& ptx, const std::string& name) {
  const std::string key = absl::StrCat("cubin of ptx ", sha256_hex(ptx), " for ", arch, " by driver ", d.version());
  if (ptx.find("setmaxnreg") != std::string::npos) return load_whole_program(d, ptx);
  std::optional<std::string> cubin = cache.read(kCubinCacheSpace, key);
  if (!cubin.has_value()) {
    // The marker is written in place of a cubin, so a kernel with a cubin has none.
    if (cache.read(kWholeProgramCacheSpace, key).has_value()) return load_whole_program(d, ptx);
    TESSEL_ASSIGN_OR_RETURN(cubin, link_ptx(d, ptx, name));
    if (!cubin.has_value()) {
      // A cache problem never fails the load.
      cache.write(kWholeProgramCacheSpace, key, "wgmma serialized in relocatable code").IgnoreError();
      return load_whole_program(d, ptx);
    }
    cache.write(kCubinCacheSpace, key, *cubin).IgnoreError();
  }
  CUmodule module = nullptr;
  TESSEL_RETURN_IF_ERROR(d.module_load_data_ex(&module, cubin->data(), 0, nullptr, nullptr));
  return module;
}

// The driver's CUtensorMap is what kernels receive by value; its bytes are
// copied into TensorMap, whose own storage is 128 bytes as well.
static_assert(sizeof(CUtensorMap) == kTensorMapBytes);

// ---------------------------------------------------------------------------
// Functions

class CudaFunction final : public FunctionImpl {
 public:
  CudaFunction(Kernel kernel, std::shared_ptr<Module> module, CUfunction function, int threads, int64_t shared_bytes,
               TensorMapEncoding maps)
      : FunctionImpl(std::move(kernel), maps),
        module_(std::move(module)),
        function_(function),
        threads_(threads),
        shared_bytes_(shared_bytes) {}

  int64_t shared_bytes() const override { return shared_bytes_; }

  absl::StatusOr<int> programs_per_compute_unit() const override {
    const Context& context = *module_->context();
    ContextScope scope(context);
    TESSEL_RETURN_IF_ERROR(scope.status());
    int blocks = 0;
    absl::Status status = context.driver().occupancy_max_active_blocks(&blocks, function_, threads_,
                                                                       static_cast<size_t>(shared_bytes_));
    if (!status.ok()) return prefixed(absl::StrCat("occupancy of '", kernel().name(), "' on ", context.name()), status);
    return blocks;
  }

  absl::Status run(const LaunchConfig& config, void** params) override {
    const Context& context = *module_->context();
    if (config.num_warps * 32 != threads_) [[unlikely]] {
      return absl::InvalidArgumentError(
          absl::StrCat("launch '", kernel().name(), "' on ", context.name(), ": the launch asks for ", config.num_warps,
                       " warps (", config.num_warps * 32, " threads) but the kernel was compiled for ", threads_ / 32,
                       " warps (", threads_, " threads); compile with CompileOptions::num_warps = ", config.num_warps));
    }
    const std::array<int, 3>& g = config.grid.dims;
    if (g[1] > 65535 || g[2] > 65535) [[unlikely]] {
      return absl::InvalidArgumentError(absl::StrCat("launch '", kernel().name(), "' on ", context.name(), ": grid (",
                                                     g[0], ", ", g[1], ", ", g[2],
                                                     ") exceeds 65535 programs along axis 1 or 2"));
    }
    cuda::DeviceStream* device_stream = nullptr;
    absl::StatusOr<CUstream> stream =
        cuda::resolve_stream(context, config.stream == nullptr ? nullptr : config.stream->impl(), &device_stream);
    absl::Status status = stream.status();
    ContextScope scope(context);
    if (status.ok()) status = scope.status();
    if (status.ok()) {
      status = context.driver().launch_kernel(function_, g[0], g[1], g[2], threads_, 1, 1,
                                              static_cast<unsigned>(shared_bytes_), *stream, params, nullptr);
    }
    if (!status.ok()) [[unlikely]] {
      return prefixed(absl::StrCat("launch '", kernel().name(), "' on ", context.name()), status);
    }
    module_->mark_launched(*stream);
    if (device_stream != nullptr) device_stream->note_launch(module_);
    return absl::OkStatus();
  }

 private:
  const std::shared_ptr<Module> module_;  // unloaded when the last function or graph goes
  const CUfunction function_;
  const int threads_;
  const int64_t shared_bytes_;
};

// ---------------------------------------------------------------------------
// The device

class CudaDevice final : public DeviceImpl {
 public:
  static absl::StatusOr<std::shared_ptr<CudaDevice>> open(const Driver& driver, int ordinal) {
    TESSEL_ASSIGN_OR_RETURN(std::shared_ptr<Context> context, Context::open(driver, ordinal));
    auto device = std::shared_ptr<CudaDevice>(new CudaDevice(std::move(context)));
    TESSEL_RETURN_IF_ERROR(device->query());
    return device;
  }

  std::string name() const override { return context_->name(); }
  DeviceKind kind() const override { return DeviceKind::kCuda; }
  int num_compute_units() const override { return sm_count_; }
  std::string arch() const override { return default_arch(cc_); }
  TensorMapEncoding tensor_map_encoding() const override { return maps_for(arch()); }
  std::string details() const override {
    return absl::StrCat(product_, ", sm_", cc_, ", ", sm_count_, " SMs, ", shared_optin_ / 1024,
                        " KiB shared memory per program");
  }

  absl::StatusOr<std::shared_ptr<void>> raw_allocate(size_t bytes) override {
    ContextScope scope(*context_);
    TESSEL_RETURN_IF_ERROR(scope.status());
    CUdeviceptr ptr = 0;
    absl::Status status = context_->driver().mem_alloc(&ptr, bytes);
    if (!status.ok()) return prefixed(absl::StrCat(name(), ": allocating ", bytes, " bytes"), status);
    // The deleter holds the context: a Buffer may outlive every Device handle.
    std::shared_ptr<Context> context = context_;
    return std::shared_ptr<void>(reinterpret_cast<void*>(ptr), [context](void* p) {
      context->run_or_defer([context, p] {
        ContextScope scope(*context);
        // cuMemFree waits for work using the memory; it fails only at process
        // exit, when the driver has already released everything.
        context->driver().mem_free.raw(reinterpret_cast<CUdeviceptr>(p));
      });
    });
  }

  absl::Status copy_to_device(void* dst, const void* src, size_t bytes) override {
    ContextScope scope(*context_);
    TESSEL_RETURN_IF_ERROR(scope.status());
    const Driver& d = context_->driver();
    absl::Status status = d.memcpy_htod(reinterpret_cast<CUdeviceptr>(dst), src, bytes);
    // From pageable memory cuMemcpyHtoD may return before the DMA lands; wait
    // for it, so that launches on streams that do not order behind the default
    // stream see the data.
    if (status.ok()) status = d.stream_synchronize(nullptr);
    return status.ok() ? status : prefixed(absl::StrCat(name(), ": copy_to_device"), status);
  }

  absl::Status copy_to_host(void* dst, const void* src, size_t bytes) override {
    ContextScope scope(*context_);
    TESSEL_RETURN_IF_ERROR(scope.status());
    absl::Status status = context_->driver().memcpy_dtoh(dst, reinterpret_cast<CUdeviceptr>(src), bytes);
    return status.ok() ? status : prefixed(absl::StrCat(name(), ": copy_to_host"), status);
  }

  // Waits for the default stream and every stream made by create_stream(),
  // not the whole context: copy queues of triggered plans live in it too, and
  // their armed waits would hold cuCtxSynchronize until a kernel opens them.
  absl::Status synchronize() override {
    ContextScope scope(*context_);
    TESSEL_RETURN_IF_ERROR(scope.status());
    absl::Status status = context_->driver().stream_synchronize(nullptr);
    std::vector<std::shared_ptr<cuda::DeviceStream>> live;
    {
      absl::MutexLock lock(&streams_mu_);
      std::erase_if(streams_, [](const std::weak_ptr<cuda::DeviceStream>& w) { return w.expired(); });
      for (const auto& w : streams_) {
        if (std::shared_ptr<cuda::DeviceStream> s = w.lock()) live.push_back(std::move(s));
      }
    }
    for (const auto& s : live) {
      if (status.ok()) status = context_->driver().stream_synchronize(s->get());
    }
    if (!status.ok()) return prefixed(absl::StrCat(name(), ": synchronize"), status);
    return context_->check_device_errors();
  }

  // Between two events recorded on the stream around `work`.
  absl::StatusOr<double> time(const std::function<absl::Status()>& work, StreamImpl* stream) override {
    absl::StatusOr<CUstream> on = cuda::resolve_stream(*context_, stream, nullptr);
    if (!on.ok()) return prefixed(absl::StrCat(name(), ": time"), on.status());
    ContextScope scope(*context_);
    TESSEL_RETURN_IF_ERROR(scope.status());
    const Driver& d = context_->driver();
    std::array<cuda::CUevent, 2> events = {nullptr, nullptr};
    absl::Cleanup destroy = [&] {
      for (cuda::CUevent e : events) {
        if (e != nullptr) d.event_destroy.raw(e);
      }
    };
    float ms = 0;
    absl::Status status = d.event_create(&events[0], cuda::CU_EVENT_DEFAULT);
    if (status.ok()) status = d.event_create(&events[1], cuda::CU_EVENT_DEFAULT);
    if (status.ok()) status = d.event_record(events[0], *on);
    if (!status.ok()) return prefixed(absl::StrCat(name(), ": time"), status);
    TESSEL_RETURN_IF_ERROR(work());
    status = d.event_record(events[1], *on);
    if (status.ok()) status = d.event_synchronize(events[1]);
    if (status.ok()) status = d.event_elapsed_time(&ms, events[0], events[1]);
    if (!status.ok()) return prefixed(absl::StrCat(name(), ": time"), status);
    TESSEL_RETURN_IF_ERROR(synchronize());  // the device's own errors
    return ms / 1e3;
  }

  absl::StatusOr<std::shared_ptr<StreamImpl>> create_stream() override {
    absl::StatusOr<std::shared_ptr<cuda::DeviceStream>> stream = cuda::DeviceStream::create(context_);
    if (!stream.ok()) return prefixed(absl::StrCat(name(), ": create_stream"), stream.status());
    absl::MutexLock lock(&streams_mu_);
    streams_.push_back(*stream);
    return std::shared_ptr<StreamImpl>(*std::move(stream));
  }

  const std::shared_ptr<Context>& context() const { return context_; }
  void armed_added(int delta) override { context_->add_armed(delta); }

  absl::StatusOr<TensorMap> encode_tensor_map(const TensorMapSpec& spec) override;
  absl::StatusOr<std::shared_ptr<FunctionImpl>> compile_uncached(const Kernel& kernel,
                                                                 const CompileOptions& options) override;

 private:
  explicit CudaDevice(std::shared_ptr<Context> context) : context_(std::move(context)) {}

  absl::Status query() {
    TESSEL_ASSIGN_OR_RETURN(sm_count_, context_->attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT));
    TESSEL_ASSIGN_OR_RETURN(int major, context_->attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR));
    TESSEL_ASSIGN_OR_RETURN(int minor, context_->attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR));
    cc_ = major * 10 + minor;
    TESSEL_ASSIGN_OR_RETURN(shared_optin_, context_->attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN));
    std::array<char, 256> product{};
    TESSEL_RETURN_IF_ERROR(
        context_->driver().device_get_name(product.data(), static_cast<int>(product.size()), context_->device()));
    product_ = product.data();
    return absl::OkStatus();
  }

  // Loads `code` and makes its function ready to launch.
  absl::StatusOr<std::shared_ptr<FunctionImpl>> load(const Kernel& kernel, const DeviceCode& code, bool debug);

  const std::shared_ptr<Context> context_;
  int sm_count_ = 0;
  int cc_ = 0;
  int shared_optin_ = 0;  // bytes of shared memory a program may opt in to
  std::string product_;   // "NVIDIA H200"
  absl::Mutex streams_mu_;
  std::vector<std::weak_ptr<cuda::DeviceStream>> streams_ ABSL_GUARDED_BY(streams_mu_);
};

absl::StatusOr<TensorMap> CudaDevice::encode_tensor_map(const TensorMapSpec& spec) {
  // Before sm_90 the program's threads copy boxes from tessel's host form.
  if (tensor_map_encoding() == TensorMapEncoding::kHost) {
    absl::StatusOr<TensorMap> map = TensorMap::encode_host(spec);
    if (!map.ok()) return prefixed(name(), map.status());
    return map;
  }
  // Our checks name the rule that failed; the driver only says INVALID_VALUE.
  TESSEL_RETURN_IF_ERROR(validate(spec, cc_));
  const TensorMapSpec s = normalize(spec);
  // The driver encodes in the current context: a thread of the caller's
  // (an autotuner's prepare) may have none.
  ContextScope scope(*context_);
  TESSEL_RETURN_IF_ERROR(scope.status());
  CUtensorMap map;
  absl::Status status = cuda::encode_tiled(context_->driver(), cuda::tiled_encoding(s), &map);
  if (!status.ok()) {
    // validate() mirrors every documented rule, so this is a rule it lacks.
    return prefixed(absl::StrCat(name(), ": tensor map of ", std::string(s.dtype.name()), " ", shape_str(s.dims),
                                 " with box ", shape_str(s.box), " passed tessel's checks but the driver refused it"),
                    status);
  }
  auto bytes = std::as_bytes(std::span<const CUtensorMap, 1>(&map, 1));
  return TensorMap::from_encoded(s, TensorMapEncoding::kCuda, std::span<const std::byte, kTensorMapBytes>(bytes));
}

absl::StatusOr<std::shared_ptr<FunctionImpl>> CudaDevice::compile_uncached(const Kernel& kernel,
                                                                           const CompileOptions& options) {
  CompileOptions resolved = options;
  if (resolved.arch.empty()) resolved.arch = default_arch(cc_);
  std::string prefix = absl::StrCat(name(), ": compile '", kernel.name(), "' for ", resolved.arch);
  if (absl::Status s = check_arch(resolved.arch, cc_, name()); !s.ok()) return prefixed(prefix, s);
  CompileArtifacts artifacts;
  const bool dump = !resolved.dump_stages.empty();
  absl::StatusOr<DeviceCode> code = compile_cached(*disk_cache(), kernel, resolved, dump ? &artifacts : nullptr);
  if (!code.ok()) return prefixed(prefix, code.status());
  // Dumped before loading: PTX the driver refuses is what one wants to read.
  if (dump) TESSEL_RETURN_IF_ERROR(write_dumps(kernel, resolved, resolved.arch, artifacts, code->binary));
  if (code->threads != resolved.num_warps * 32) {
    return absl::InternalError(absl::StrCat(prefix, ": codegen made ", code->threads, " threads per program for ",
                                            resolved.num_warps, " warps"));
  }
  if (code->shared_bytes > shared_optin_) {
    return absl::ResourceExhaustedError(absl::StrCat(prefix, ": the kernel needs ", code->shared_bytes,
                                                     " bytes of shared memory per program; ", name(),
                                                     " allows at most ", shared_optin_));
  }
  absl::StatusOr<std::shared_ptr<FunctionImpl>> fn = load(kernel, *code, resolved.debug);
  if (!fn.ok()) return prefixed(prefix, fn.status());
  return fn;
}

absl::StatusOr<std::shared_ptr<FunctionImpl>> CudaDevice::load(const Kernel& kernel, const DeviceCode& code,
                                                               bool debug) {
  const Driver& d = context_->driver();
  ContextScope scope(*context_);
  TESSEL_RETURN_IF_ERROR(scope.status());

  TESSEL_ASSIGN_OR_RETURN(CUmodule raw_module, load_module(*disk_cache(), d, arch(), code.binary, kernel.name()));
  auto module = std::make_shared<Module>(context_, raw_module, kernel.name());

  CUfunction function = nullptr;
  TESSEL_RETURN_IF_ERROR(d.module_get_function(&function, raw_module, code.entry.c_str()));
  // Eager loading: under CUDA's default lazy loading a kernel is loaded at its
  // first launch, and that launch never starts if a stream of the device holds
  // an armed cuStreamWaitValue64 (a triggered plan): a deadlock. Drivers
  // before 12.4 have no cuFuncLoad; querying an attribute loads the function
  // there.
  if (d.func_load.present()) TESSEL_RETURN_IF_ERROR(d.func_load(function));
  int max_threads = 0, static_shared = 0;
  TESSEL_RETURN_IF_ERROR(d.func_get_attribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function));
  TESSEL_RETURN_IF_ERROR(d.func_get_attribute(&static_shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function));
  // Said here rather than as CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES at every launch.
  if (code.threads > max_threads) {
    return absl::ResourceExhaustedError(absl::StrCat("the kernel uses too many registers for ", code.threads,
                                                     " threads per program (at most ", max_threads,
                                                     " fit); compile with fewer warps"));
  }
  if (code.shared_bytes + static_shared > shared_optin_) {
    return absl::ResourceExhaustedError(absl::StrCat("the kernel needs ", code.shared_bytes, " bytes of dynamic and ",
                                                     static_shared, " of static shared memory per program; ", name(),
                                                     " allows at most ", shared_optin_, " in all"));
  }
  if (code.shared_bytes > kDefaultSharedLimit) {
    TESSEL_RETURN_IF_ERROR(d.func_set_attribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                static_cast<int>(code.shared_bytes)));
  }
  if (!code.error_symbol.empty()) {
    size_t bytes = 0;
    absl::Status found = d.module_get_global(&module->error_word, &bytes, raw_module, code.error_symbol.c_str());
    if (!found.ok()) return prefixed(absl::StrCat("the error word '", code.error_symbol, "'"), found);
    if (bytes != sizeof(uint32_t)) {
      return absl::InternalError(
          absl::StrCat("the error word '", code.error_symbol, "' has ", bytes, " bytes; expected 4"));
    }
  }
  if (writes_debug_buffer(kernel, debug)) {
    size_t bytes = 0;
    absl::Status found = d.module_get_global(&module->debug_buffer, &bytes, raw_module, kDebugSymbol);
    if (!found.ok()) return prefixed("the debug buffer", found);
    if (bytes != static_cast<size_t>(kDebugBytes)) {
      return absl::InternalError(absl::StrCat("the debug buffer has ", bytes, " bytes; expected ", kDebugBytes));
    }
    module->debug_kernel = kernel;
  }
  if (module->error_word != 0 || module->debug_buffer != 0) context_->add_module(module);
  return std::make_shared<CudaFunction>(kernel, std::move(module), function, code.threads, code.shared_bytes,
                                        maps_for(code.arch));
}

}  // namespace

namespace cuda {

std::shared_ptr<Context> context_of(DeviceImpl& device) {
  auto* cuda = dynamic_cast<CudaDevice*>(&device);
  return cuda != nullptr ? cuda->context() : nullptr;
}

}  // namespace cuda

namespace {

// Unavailable with "cuda:N: no NVIDIA driver ..." where there is no driver,
// NotFound where there is no such GPU.
absl::StatusOr<std::shared_ptr<DeviceImpl>> open_cuda(absl::string_view requested, absl::string_view suffix) {
  TESSEL_ASSIGN_OR_RETURN(int ordinal, parse_device_index(requested, suffix, "GPU index"));
  std::string name = absl::StrCat("cuda:", ordinal);
  absl::StatusOr<const Driver*> driver = Driver::get();
  if (!driver.ok()) return prefixed(name, driver.status());
  // Every handle on a GPU shares its device, so that what is armed there is
  // known to all: one handle compiling (loading code) or freeing while
  // another's plan has chains armed would wait forever behind them.
  static absl::Mutex mu(absl::kConstInit);
  static auto* open = new absl::flat_hash_map<int, std::weak_ptr<CudaDevice>>();
  absl::MutexLock lock(&mu);
  if (std::shared_ptr<CudaDevice> known = (*open)[ordinal].lock()) return known;
  absl::StatusOr<std::shared_ptr<CudaDevice>> device = CudaDevice::open(**driver, ordinal);
  if (!device.ok()) return prefixed(name, device.status());
  (*open)[ordinal] = *device;
  return std::shared_ptr<DeviceImpl>(*std::move(device));
}

[[maybe_unused]] const bool registered = register_backend({.prefix = "cuda",
                                                           .usage = "cuda:N",
                                                           .open = &open_cuda,
                                                           .make_group = &make_cuda_group_backend,
                                                           .make_joined_group = &make_cuda_joined_group_backend});

}  // namespace

}  // namespace tessel
