// The first compile in a new process, with the disk cache empty (cold) and
// filled by an earlier process (warm): the persistent GEMM of
// samples/matmul.cc, timed from the builder call to a loaded Function
// (Device::compile), on the host and on cuda:0 when there is one. Each
// measurement is a process of its own (this program, run with --child).
// On CUDA the driver's own cache of PTX compiled to SASS (CUDA_CACHE_PATH)
// starts empty for each cold process too, and is kept for the warm ones, as
// it would be for a user.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "report.h"
#include "runtime/device_impl.h"
#include "samples/kernels.h"
#include "tessel/tessel.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using bench::Clock;
using bench::must;
using bench::seconds_since;

constexpr int kRuns = 5;
constexpr int kNoDevice = 2;

// One measurement, in this process: prints "ms=... hits=... writes=...".
int child(const std::string& device_name) {
  absl::StatusOr<tessel::Device> device = tessel::Device::open(device_name);
  if (!device.ok()) {
    std::printf("%s\n", std::string(device.status().message()).c_str());
    return kNoDevice;
  }
  Clock::time_point t0 = Clock::now();
  tessel::Kernel kernel = must(samples::matmul_kernel(), "build");
  tessel::CompileOptions options;
  options.num_warps = samples::kMatmulWarps;
  tessel::Function fn = must(device->compile(kernel, options), "compile");
  double ms = seconds_since(t0) * 1e3;
  tessel::DiskCache::Stats stats = device->impl().disk_cache()->stats();
  std::printf("ms=%.3f hits=%lld writes=%lld\n", ms, static_cast<long long>(stats.hits),
              static_cast<long long>(stats.writes));
  return 0;
}

struct Run {
  int status = -1;
  std::string output;
  double ms = 0;
  long long hits = 0, writes = 0;
};

// This program run with --child=DEVICE in a new process, with `env` added
// to its environment.
Run spawn_child(const std::string& device, const std::vector<std::string>& env) {
  std::string self = fs::read_symlink("/proc/self/exe").string();
  std::string flag = "--child=" + device;
  std::vector<char*> argv = {self.data(), flag.data(), nullptr};
  std::vector<std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    bool replaced = false;
    for (const std::string& mine : env) replaced |= absl::StartsWith(*e, mine.substr(0, mine.find('=') + 1));
    if (!replaced) vars.emplace_back(*e);
  }
  vars.insert(vars.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (std::string& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);

  int pipe_fds[2];
  Run run;
  if (pipe(pipe_fds) != 0) return run;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  pid_t pid = 0;
  int spawned = posix_spawn(&pid, self.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  char buf[4096];
  for (ssize_t n; (n = read(pipe_fds[0], buf, sizeof buf)) > 0;) run.output.append(buf, static_cast<size_t>(n));
  close(pipe_fds[0]);
  if (spawned != 0) return run;
  int status = 0;
  waitpid(pid, &status, 0);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (run.status == 0) std::sscanf(run.output.c_str(), "ms=%lf hits=%lld writes=%lld", &run.ms, &run.hits, &run.writes);
  return run;
}

// Median cold and warm times on `device`, or nothing without one.
std::optional<std::pair<double, double>> measure(const std::string& device, const fs::path& root) {
  std::vector<double> cold, warm;
  auto check = [&](const Run& r, const char* what) {
    if (r.status != 0) {
      std::fprintf(stderr, "cache_bench: the %s process on %s failed (%d): %s\n", what, device.c_str(), r.status,
                   r.output.c_str());
      std::exit(1);
    }
  };
  for (int i = 0; i < kRuns; ++i) {
    fs::path dir = root / absl::StrCat(device, "-cold-", i);
    Run r = spawn_child(device, {absl::StrCat("TESSEL_CACHE_DIR=", (dir / "tessel").string()),
                                 absl::StrCat("CUDA_CACHE_PATH=", (dir / "nv").string())});
    if (r.status == kNoDevice) {
      std::printf("%-8s no device (%s)\n", device.c_str(), std::string(absl::StripSuffix(r.output, "\n")).c_str());
      return std::nullopt;
    }
    check(r, "cold");
    if (r.hits != 0 || r.writes == 0) {
      std::fprintf(stderr, "cache_bench: a cold process on %s found the cache filled\n", device.c_str());
      std::exit(1);
    }
    cold.push_back(r.ms);
  }
  fs::path dir = root / absl::StrCat(device, "-warm");
  std::vector<std::string> env = {absl::StrCat("TESSEL_CACHE_DIR=", (dir / "tessel").string()),
                                  absl::StrCat("CUDA_CACHE_PATH=", (dir / "nv").string())};
  check(spawn_child(device, env), "filling");
  for (int i = 0; i < kRuns; ++i) {
    Run r = spawn_child(device, env);
    check(r, "warm");
    if (r.hits == 0 || r.writes != 0) {
      std::fprintf(stderr, "cache_bench: a warm process on %s missed the cache\n", device.c_str());
      std::exit(1);
    }
    warm.push_back(r.ms);
  }
  return std::pair{bench::median(cold), bench::median(warm)};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && absl::StartsWith(argv[1], "--child=")) return child(argv[1] + std::strlen("--child="));
  if (argc != 1) {
    std::fprintf(stderr, "cache_bench: unknown argument '%s' (it takes none)\n", argv[1]);
    return 1;
  }
  std::string templ = (fs::temp_directory_path() / "tessel_cache_bench_XXXXXX").string();
  if (mkdtemp(templ.data()) == nullptr) {
    std::fprintf(stderr, "cache_bench: cannot make a directory in %s\n", fs::temp_directory_path().c_str());
    return 1;
  }
  fs::path root = templ;
  std::printf("first compile of the persistent GEMM in a new process (builder -> loaded Function), median of %d\n",
              kRuns);
  std::printf("%-8s %12s %12s %10s  %s\n", "device", "cold ms", "warm ms", "warm/cold", "target");
  for (const char* device : {"host", "cuda:0"}) {
    std::optional<std::pair<double, double>> t = measure(device, root);
    if (!t) continue;
    double ratio = t->second / t->first;
    std::printf("%-8s %12.3f %12.3f %10.4f  <= 0.100 %s\n", device, t->first, t->second, ratio,
                ratio <= 0.1 ? "" : "(missed)");
    std::fflush(stdout);
  }
  std::error_code ec;
  fs::remove_all(root, ec);
  return 0;
}
