// The host device: kernels JIT-compiled for this CPU, programs run as tasks
// on a thread pool, each with its own shared-memory arena.
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/debug_abi.h"
#include "base/status.h"
#include "codegen/compiler.h"
#include "runtime/backend.h"
#include "runtime/compile_cached.h"
#include "runtime/debug_output.h"
#include "runtime/device_impl.h"
#include "runtime/faults.h"
#include "runtime/host/host_checks.h"
#include "runtime/host/host_tma.h"
#include "runtime/host/thread_pool.h"
#include "runtime/plans/plan_backend.h"
#include "runtime/tensor_map.h"

namespace tessel {
namespace {

void tma_load_entry(const void* map, const int32_t* coords, void* smem) { host_tma_load(map, coords, smem); }
void tma_store_entry(const void* map, const int32_t* coords, void* smem) { host_tma_store(map, coords, smem); }

absl::Status write_dumps(const Kernel& kernel, const CompileOptions& options, const CompileArtifacts& a) {
  std::string base = absl::StrCat(options.dump_dir, "/", kernel.name(), ".host");
  for (absl::string_view stage : absl::StrSplit(options.dump_stages, ',', absl::SkipEmpty())) {
    const std::string* text = stage == "ir" ? &a.ir : stage == "llvm" ? &a.llvm : nullptr;
    if (text == nullptr) continue;  // stages of other targets
    std::string path = absl::StrCat(base, stage == "ir" ? ".tessel" : ".ll");
    std::ofstream out(path);
    out << *text;
    if (!out) return absl::PermissionDeniedError(absl::StrCat("TESSEL_DUMP: cannot write ", path));
  }
  return absl::OkStatus();
}

class HostFunction final : public FunctionImpl {
 public:
  HostFunction(Kernel kernel, std::unique_ptr<HostCode> code, std::shared_ptr<ThreadPool> pool, std::string device,
               bool checked, uint64_t* debug)
      : FunctionImpl(std::move(kernel), TensorMapEncoding::kHost),
        code_(std::move(code)),
        pool_(std::move(pool)),
        device_(std::move(device)),
        checked_(checked),
        debug_(debug) {}

  int64_t shared_bytes() const override { return code_->shared_bytes(); }
  // A worker thread runs one program at a time.
  absl::StatusOr<int> programs_per_compute_unit() const override { return 1; }

  absl::Status run(const LaunchConfig& config, void** params) override {
    return drained([&] { return run_programs(config, params, nullptr); });
  }

  absl::Status run_with(const LaunchConfig& config, void** params, absl::Span<const KernelArg> args) override {
    if (!checked_) return run(config, params);
    return drained([&]() -> absl::Status {
      HostChecks checks;
      TESSEL_RETURN_IF_ERROR(host_regions(kernel(), args, checks.regions));
      TESSEL_RETURN_IF_ERROR(run_programs(config, params, &checks));
      if (checks.failed.load(std::memory_order_acquire)) return host_violation(checks, kernel(), device_);
      return absl::OkStatus();
    });
  }

 private:
  // Runs `launch`; where the code has a debug buffer, then prints its lines,
  // clears it and returns a failed assert (after `launch`'s own error).
  absl::Status drained(const std::function<absl::Status()>& launch) {
    if (debug_ == nullptr) return launch();
    // One launch at a time writes the buffer, which is read after it.
    absl::MutexLock lock(&debug_mu_);
    absl::Status ran = launch();
    const absl::Span<const uint64_t> header(debug_, kDebugHeaderBytes / 8);
    DebugReport report = read_debug(kernel(), device_, header,
                                    {debug_ + header.size(), static_cast<size_t>(debug_records_written(header) / 8)});
    std::memset(debug_, 0, kDebugHeaderBytes);
    print_debug_lines(report.lines);
    return ran.ok() ? report.assertion : ran;
  }

  absl::Status run_programs(const LaunchConfig& config, void** params, HostChecks* checks) {
    const std::array<int, 3>& g = config.grid.dims;
    int64_t arena = (code_->shared_bytes() + 127) / 128 * 128;
    std::vector<std::byte*> arenas(pool_->size(), nullptr);
    std::unique_ptr<std::byte, decltype(&std::free)> storage(nullptr, &std::free);
    if (arena > 0) {
      if (!faults::fail_allocation("host launch: shared arenas")) {
        storage.reset(static_cast<std::byte*>(std::aligned_alloc(128, arena * pool_->size())));
      }
      if (storage == nullptr) return absl::ResourceExhaustedError("host launch: no memory for shared arenas");
      for (int w = 0; w < pool_->size(); ++w) arenas[w] = storage.get() + w * arena;
    }
    HostEntry entry = code_->entry();
    pool_->run(config.grid.total(), [&](int64_t i, int worker) {
      HostProgram p{{static_cast<int32_t>(i % g[0]), static_cast<int32_t>(i / g[0] % g[1]),
                     static_cast<int32_t>(i / (int64_t{g[0]} * g[1]))},
                    {g[0], g[1], g[2]},
                    arenas[worker],
                    checks};
      entry(params, &p);
    });
    return absl::OkStatus();
  }

  std::unique_ptr<HostCode> code_;
  std::shared_ptr<ThreadPool> pool_;  // shared with the device, which may go first
  const std::string device_;
  const bool checked_;
  uint64_t* const debug_;  // the code's debug buffer, where it has one
  absl::Mutex debug_mu_;
};

class HostDevice final : public DeviceImpl {
 public:
  HostDevice(int threads, bool checked) : pool_(std::make_shared<ThreadPool>(threads)), checked_(checked) {}

  std::string name() const override { return absl::StrCat("host:", pool_->size(), checked_ ? ":checked" : ""); }
  DeviceKind kind() const override { return DeviceKind::kHost; }
  std::string arch() const override { return "host"; }
  int num_compute_units() const override { return pool_->size(); }
  TensorMapEncoding tensor_map_encoding() const override { return TensorMapEncoding::kHost; }

  absl::StatusOr<std::shared_ptr<void>> raw_allocate(size_t bytes) override {
    void* p = faults::fail_allocation("host allocation") ? nullptr : std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (p == nullptr) return absl::ResourceExhaustedError(absl::StrCat("host allocation of ", bytes, " bytes failed"));
    return std::shared_ptr<void>(p, &std::free);
  }
  absl::Status copy_to_device(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status copy_to_host(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status synchronize() override { return absl::OkStatus(); }

  absl::StatusOr<TensorMap> encode_tensor_map(const TensorMapSpec& spec) override {
    return TensorMap::encode_host(spec);
  }

  absl::StatusOr<std::shared_ptr<FunctionImpl>> compile_uncached(const Kernel& kernel,
                                                                 const CompileOptions& options) override {
    if (!options.arch.empty() && options.arch != "host") {
      return absl::InvalidArgumentError(absl::StrCat(name(), ": compile '", kernel.name(), "' for ", options.arch,
                                                     ": the host runs only code compiled for it (arch host)"));
    }
    CompileOptions resolved = options;
    resolved.arch = "host";
    resolved.checked = checked_;
    CompileArtifacts artifacts;
    bool dump = !options.dump_stages.empty();
    TESSEL_ASSIGN_OR_RETURN(DeviceCode device_code,
                            compile_cached(*disk_cache(), kernel, resolved, dump ? &artifacts : nullptr));
    if (dump) TESSEL_RETURN_IF_ERROR(write_dumps(kernel, options, artifacts));
    std::vector<HostSymbol> symbols = {{kHostTmaLoad, reinterpret_cast<void*>(&tma_load_entry)},
                                       {kHostTmaStore, reinterpret_cast<void*>(&tma_store_entry)},
                                       {kHostCheck, reinterpret_cast<void*>(&host_check)}};
    TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<HostCode> code, load_host_code(device_code, symbols));
    uint64_t* debug = nullptr;
    if (writes_debug_buffer(kernel, resolved.debug)) {
      debug = static_cast<uint64_t*>(code->global(kDebugSymbol));
      if (debug == nullptr) {
        return absl::InternalError(absl::StrCat("kernel '", kernel.name(), "': its code has no debug buffer"));
      }
    }
    return std::make_shared<HostFunction>(kernel, std::move(code), pool_, name(), checked_, debug);
  }

 private:
  std::shared_ptr<ThreadPool> pool_;
  const bool checked_;
};

// "host", "host:N", "host:checked", "host:N:checked".
absl::StatusOr<std::shared_ptr<DeviceImpl>> open_host(absl::string_view name, absl::string_view suffix) {
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  const bool checked = suffix == "checked" || absl::EndsWith(suffix, ":checked");
  if (checked) suffix.remove_suffix(suffix == "checked" ? suffix.size() : std::string_view(":checked").size());
  if (!suffix.empty() && (!absl::SimpleAtoi(suffix, &threads) || threads < 1 || threads > 1024)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Device::open('", name, "'): the host thread count must be 1 to 1024"));
  }
  return std::make_shared<HostDevice>(std::max(threads, 1), checked);
}

[[maybe_unused]] const bool registered = register_backend({.prefix = "host",
                                                           .usage = "host, host:N, host:checked, host:N:checked",
                                                           .open = &open_host,
                                                           .make_group = &make_host_group_backend,
                                                           .make_joined_group = &make_host_joined_group_backend});

}  // namespace

}  // namespace tessel
