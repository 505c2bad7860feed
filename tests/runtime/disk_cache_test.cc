// The disk cache of compiled kernels: hits return the code a compile made
// without compiling (in this process, through another Device, in a child
// process); entries that cannot be trusted are recompiled and replaced; the
// bound evicts the least recently used; problems with the directory never
// fail a compile. Each test has a cache directory of its own.
#include "runtime/disk_cache.h"

#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dsl/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/compile_cached.h"
#include "runtime/device.h"
#include "runtime/device_impl.h"
#include "tests/runtime/temp_dir.h"

extern char** environ;

namespace tessel {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// y = a * x + y over n floats.
Kernel axpy(const std::string& name = "axpy") {
  KernelBuilder k(name);
  Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(f32), "y"), a = k.arg(f32, "a"), n = k.arg(i32, "n");
  Value offs = k.program_id() * 256 + k.arange(0, 256);  // [256] i32
  Value mask = offs < n;                                 // [256] i1
  store(y + offs, a * load(x + offs, mask, 0.0f) + load(y + offs, mask, 0.0f), mask);
  return *k.build();
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

void expect_same_code(const DeviceCode& a, const DeviceCode& b) {
  EXPECT_EQ(a.arch, b.arch);
  EXPECT_EQ(a.format, b.format);
  EXPECT_EQ(a.entry, b.entry);
  EXPECT_EQ(a.shared_bytes, b.shared_bytes);
  EXPECT_EQ(a.threads, b.threads);
  EXPECT_EQ(a.error_symbol, b.error_symbol);
  EXPECT_TRUE(a.binary == b.binary) << "binaries of " << a.binary.size() << " and " << b.binary.size() << " bytes";
}

CompileOptions host_options() {
  CompileOptions o;
  o.arch = "host";
  return o;
}

// Runs the compiled axpy on the host and checks it.
void expect_axpy_runs(const Function& fn) {
  constexpr int n = 1000;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(i), y[i] = 1.0f;
  ASSERT_TRUE(fn.launch({.grid = (n + 255) / 256}, x.data(), y.data(), 2.0f, n).ok());
  for (int i = 0; i < n; ++i) ASSERT_EQ(y[i], 2.0f * i + 1.0f) << i;
}

TEST(Sha256, MatchesKnownDigests) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // Lengths on each side of the padding's block boundaries.
  EXPECT_EQ(sha256_hex(std::string(55, 'a')), "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(sha256_hex(std::string(56, 'a')), "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(sha256_hex(std::string(63, 'a')), "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34");
  EXPECT_EQ(sha256_hex(std::string(64, 'a')), "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
  EXPECT_EQ(sha256_hex(std::string(119, 'a')), "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb");
  EXPECT_EQ(sha256_hex(std::string(120, 'a')), "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c");
  EXPECT_EQ(sha256_hex(std::string(1000, 'a')), "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

TEST(DeviceCodeBytes, RoundTripAndRejectWhatIsNotOne) {
  DeviceCode code{.arch = "sm_90a",
                  .format = CodeFormat::kPtx,
                  .binary = std::string("ptx\0text", 8),
                  .entry = "tessel_k",
                  .shared_bytes = 99328,
                  .threads = 128,
                  .error_symbol = "tessel_error"};
  std::string bytes = serialize_device_code(code);
  std::optional<DeviceCode> back = parse_device_code(bytes);
  ASSERT_TRUE(back.has_value());
  expect_same_code(*back, code);
  EXPECT_FALSE(parse_device_code(bytes.substr(0, bytes.size() - 1)).has_value());
  EXPECT_FALSE(parse_device_code(bytes + "x").has_value());
  EXPECT_FALSE(parse_device_code("").has_value());
}

TEST(CompileCached, TheKeyNamesEverythingThatChangesTheCode) {
  const std::string& build = tessel_build_id();
  EXPECT_EQ(build.size(), 40u) << build;  // --build-id=sha1
  EXPECT_EQ(build.find_first_not_of("0123456789abcdef"), std::string::npos) << build;
  Kernel k = axpy();
  CompileOptions o = host_options();
  std::string key = kernel_cache_key(k, o, "host");
  EXPECT_THAT(key, HasSubstr(absl::StrCat("build ", build)));
  EXPECT_THAT(key, HasSubstr("compiler LLVM "));
  EXPECT_THAT(key, HasSubstr("\narch host\n"));
  EXPECT_THAT(key, HasSubstr(o.cache_key()));
  EXPECT_THAT(key, HasSubstr(k.str()));
  CompileOptions warps = o, special = o, level = o;
  warps.num_warps = 8;
  special.specialization.multiple_of_16 = 3;
  level.opt_level = 1;
  for (const CompileOptions& other : {warps, special, level}) EXPECT_NE(kernel_cache_key(k, other, "host"), key);
  EXPECT_NE(kernel_cache_key(axpy("other"), o, "host"), key);
  EXPECT_NE(kernel_cache_key(k, o, "sm_90a"), key);
  // Only the host's code depends on the CPU it runs on.
  EXPECT_THAT(compiler_identity("host"), HasSubstr("; "));
  EXPECT_THAT(compiler_identity("sm_90a"), ::testing::Not(HasSubstr("; ")));
}

TEST(CompileCached, AHitReturnsTheSameCodeWithoutCompiling) {
  TempDir dir("tessel_disk_cache_");
  DiskCache cache({.dir = dir.str()});
  Kernel k = axpy();
  absl::StatusOr<DeviceCode> cold = compile_cached(cache, k, host_options());
  ASSERT_TRUE(cold.ok()) << cold.status();
  EXPECT_EQ(cache.stats().misses, 1);
  EXPECT_EQ(cache.stats().writes, 1);
  std::string path = cache.entry_path(kKernelCacheSpace, kernel_cache_key(k, host_options(), "host"));
  EXPECT_TRUE(fs::exists(path)) << path;
  EXPECT_EQ(fs::path(path).parent_path(), dir.path() / "kernels");

  absl::StatusOr<DeviceCode> warm = compile_cached(cache, k, host_options());
  ASSERT_TRUE(warm.ok()) << warm.status();
  EXPECT_EQ(cache.stats().hits, 1);
  EXPECT_EQ(cache.stats().writes, 1);
  expect_same_code(*warm, *cold);

  // What the entry holds is what is returned: another kernel's code planted
  // under this key comes back, so nothing was compiled.
  absl::StatusOr<DeviceCode> other = compile(axpy("planted"), host_options());
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_TRUE(
      cache.write(kKernelCacheSpace, kernel_cache_key(k, host_options(), "host"), serialize_device_code(*other)).ok());
  absl::StatusOr<DeviceCode> planted = compile_cached(cache, k, host_options());
  ASSERT_TRUE(planted.ok()) << planted.status();
  EXPECT_EQ(planted->entry, other->entry);
  EXPECT_EQ(cache.stats().hits, 2);
}

TEST(CompileCached, ASecondDeviceHitsAndRunsTheCode) {
  TempDir dir("tessel_disk_cache_");
  auto first = std::make_shared<DiskCache>(DiskCacheConfig{.dir = dir.str()});
  auto second = std::make_shared<DiskCache>(DiskCacheConfig{.dir = dir.str()});
  Device d1 = *Device::open("host:1"), d2 = *Device::open("host:2");
  d1.impl().set_disk_cache(first);
  d2.impl().set_disk_cache(second);
  absl::StatusOr<Function> f1 = d1.compile(axpy());
  ASSERT_TRUE(f1.ok()) << f1.status();
  EXPECT_EQ(first->stats().writes, 1);
  absl::StatusOr<Function> f2 = d2.compile(axpy());
  ASSERT_TRUE(f2.ok()) << f2.status();
  EXPECT_EQ(second->stats().hits, 1);
  EXPECT_EQ(second->stats().writes, 0);
  expect_axpy_runs(*f2);
}

// The child's half of CompileCached.AChildProcessHits: a process of its own
// with TESSEL_CACHE_DIR set, which writes what its cache saw.
TEST(DiskCacheChild, CompilesThroughTheCacheTheEnvironmentNames) {
  const char* result = std::getenv("TESSEL_DISK_CACHE_TEST_RESULT");
  if (result == nullptr) GTEST_SKIP() << "runs as the child of CompileCached.AChildProcessHits";
  Device d = *Device::open("host:1");
  absl::StatusOr<Function> fn = d.compile(axpy());
  ASSERT_TRUE(fn.ok()) << fn.status();
  expect_axpy_runs(*fn);
  std::shared_ptr<const DiskCache> cache = d.impl().disk_cache();
  write_file(result, absl::StrCat("dir=", cache->config().dir, " hits=", cache->stats().hits,
                                  " writes=", cache->stats().writes));
}

TEST(CompileCached, AChildProcessHits) {
  TempDir dir("tessel_disk_cache_");
  // The generic variant, and the one the launch specializes for its
  // arguments (aligned pointers).
  auto cache = std::make_shared<DiskCache>(DiskCacheConfig{.dir = dir.str("cache")});
  Device d = *Device::open("host:1");
  d.impl().set_disk_cache(cache);
  absl::StatusOr<Function> fn = d.compile(axpy());
  ASSERT_TRUE(fn.ok()) << fn.status();
  expect_axpy_runs(*fn);
  ASSERT_EQ(cache->stats().writes, 2);

  std::string result = dir.str("result");
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!absl::StartsWith(*e, "TESSEL_CACHE_DIR=")) env.emplace_back(*e);
  }
  env.push_back(absl::StrCat("TESSEL_CACHE_DIR=", dir.str("cache")));
  env.push_back(absl::StrCat("TESSEL_DISK_CACHE_TEST_RESULT=", result));
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string self = fs::read_symlink("/proc/self/exe").string();
  std::string filter = "--gtest_filter=DiskCacheChild.CompilesThroughTheCacheTheEnvironmentNames";
  std::vector<char*> argv = {self.data(), filter.data(), nullptr};
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv.data(), envp.data()), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child failed: " << status;
  EXPECT_EQ(read_file(result), absl::StrCat("dir=", dir.str("cache"), " hits=2 writes=0"));
}

TEST(CompileCached, EntriesThatCannotBeTrustedAreRecompiledAndReplaced) {
  TempDir dir("tessel_disk_cache_");
  DiskCache cache({.dir = dir.str()});
  Kernel k = axpy();
  std::string key = kernel_cache_key(k, host_options(), "host");
  absl::StatusOr<DeviceCode> fresh = compile_cached(cache, k, host_options());
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  std::string path = cache.entry_path(kKernelCacheSpace, key);
  const std::string good = read_file(path);
  ASSERT_GT(good.size(), 100u);

  // An entry for another key at this key's name (a hash collision, or a file
  // copied there).
  ASSERT_TRUE(cache.write(kKernelCacheSpace, "another key", serialize_device_code(*fresh)).ok());
  const std::string foreign = read_file(cache.entry_path(kKernelCacheSpace, "another key"));
  std::string flipped = good, magic = good, version = good;
  flipped[good.size() / 2] ^= 0x10;
  magic[0] = 'X';
  version[8] = 2;
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"truncated", good.substr(0, good.size() / 2)},
      {"cut before the checksum", good.substr(0, good.size() - 32)},
      {"empty", ""},
      {"a bit flipped", flipped},
      {"another magic", magic},
      {"another format version", version},
      {"another key", foreign},
  };
  for (const auto& [what, bytes] : bad) {
    SCOPED_TRACE(what);
    write_file(path, bytes);
    DiskCache::Stats before = cache.stats();
    absl::StatusOr<DeviceCode> code = compile_cached(cache, k, host_options());
    ASSERT_TRUE(code.ok()) << code.status();
    expect_same_code(*code, *fresh);
    EXPECT_EQ(cache.stats().rejected, before.rejected + 1);
    EXPECT_EQ(cache.stats().writes, before.writes + 1);
    std::optional<std::string> replaced = cache.read(kKernelCacheSpace, key);
    ASSERT_TRUE(replaced.has_value());
    std::optional<DeviceCode> back = parse_device_code(*replaced);
    ASSERT_TRUE(back.has_value());
    expect_same_code(*back, *fresh);
  }
}

void age(const std::string& path, int seconds) {
  fs::last_write_time(path, fs::file_time_type::clock::now() - std::chrono::seconds(seconds));
}

TEST(DiskCache, TheBoundEvictsTheLeastRecentlyUsed) {
  TempDir dir("tessel_disk_cache_");
  const std::string payload(1000, 'p');
  DiskCache probe({.dir = dir.str("probe")});
  ASSERT_TRUE(probe.write("tuning", "a", payload).ok());
  const int64_t entry = static_cast<int64_t>(fs::file_size(probe.entry_path("tuning", "a")));

  // Room for three entries and a half, over two spaces.
  DiskCache cache({.dir = dir.str("cache"), .max_bytes = entry * 7 / 2});
  for (const char* key : {"a", "b"}) ASSERT_TRUE(cache.write("tuning", key, payload).ok());
  ASSERT_TRUE(cache.write("kernels", "c", payload).ok());
  EXPECT_EQ(cache.stats().evicted, 0);
  age(cache.entry_path("tuning", "a"), 300);
  age(cache.entry_path("tuning", "b"), 200);
  age(cache.entry_path("kernels", "c"), 100);
  // Reading "a" makes it the most recently used, so "b" is now the oldest.
  EXPECT_EQ(cache.read("tuning", "a"), payload);
  ASSERT_TRUE(cache.write("kernels", "d", payload).ok());
  EXPECT_EQ(cache.stats().evicted, 1);
  EXPECT_TRUE(fs::exists(cache.entry_path("tuning", "a")));
  EXPECT_FALSE(fs::exists(cache.entry_path("tuning", "b")));
  EXPECT_TRUE(fs::exists(cache.entry_path("kernels", "c")));
  EXPECT_TRUE(fs::exists(cache.entry_path("kernels", "d")));

  // An entry that alone passes the bound is not kept.
  absl::Status big = cache.write("tuning", "big", std::string(entry * 4, 'b'));
  EXPECT_EQ(big.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(big.message(), HasSubstr(absl::StrCat(" bytes exceeds the cache's bound of ", entry * 7 / 2,
                                                    " bytes (TESSEL_CACHE_MAX_BYTES)")));
  EXPECT_FALSE(fs::exists(cache.entry_path("tuning", "big")));
}

TEST(DiskCache, TemporariesOfWritersThatDiedAreRemoved) {
  TempDir dir("tessel_disk_cache_");
  DiskCache cache({.dir = dir.str()});
  ASSERT_TRUE(cache.write("tuning", "a", "x").ok());
  fs::path stale = dir.path() / "tuning" / ".0123456789abcdef.1.0.0.tmp";
  fs::path fresh = dir.path() / "tuning" / ".0123456789abcdef.2.0.0.tmp";
  write_file(stale, "half an entry");
  write_file(fresh, "an entry being written");
  age(stale.string(), 2 * 3600);
  ASSERT_TRUE(cache.write("tuning", "b", "y").ok());
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(fresh));
}

TEST(DiskCache, ConcurrentWritersOfOneKeyLeaveAValidEntry) {
  TempDir dir("tessel_disk_cache_");
  DiskCache cache({.dir = dir.str()});
  constexpr int kThreads = 8, kWrites = 25, kBytes = 64 << 10;
  std::atomic<int> torn{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string mine(kBytes, static_cast<char>('a' + t));
      for (int i = 0; i < kWrites; ++i) {
        if (!cache.write("tuning", "one key", mine).ok()) torn.fetch_add(1);
        // Whatever a reader finds is one writer's whole value.
        std::optional<std::string> seen = cache.read("tuning", "one key");
        if (seen && (seen->size() != kBytes || seen->find_first_not_of(seen->front()) != std::string::npos)) {
          torn.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(torn.load(), 0);
  EXPECT_EQ(cache.stats().rejected, 0);
  std::optional<std::string> last = cache.read("tuning", "one key");
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->size(), static_cast<size_t>(kBytes));
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(dir.path() / "tuning")) {
    names.push_back(e.path().filename().string());
  }
  EXPECT_THAT(names, ::testing::ElementsAre(sha256_hex("one key") + ".entry"));  // no temporaries left
}

TEST(CompileCached, ThreadsCompilingOneKernelAtOnceAllGetItsCode) {
  TempDir dir("tessel_disk_cache_");
  DiskCache cache({.dir = dir.str()});
  absl::StatusOr<DeviceCode> reference = compile(axpy(), host_options());
  ASSERT_TRUE(reference.ok()) << reference.status();
  std::vector<absl::StatusOr<DeviceCode>> got(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t) {
    threads.emplace_back([&, t] { got[t] = compile_cached(cache, axpy(), host_options()); });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::StatusOr<DeviceCode>& code : got) {
    ASSERT_TRUE(code.ok()) << code.status();
    expect_same_code(*code, *reference);
  }
  std::optional<std::string> entry = cache.read(kKernelCacheSpace, kernel_cache_key(axpy(), host_options(), "host"));
  ASSERT_TRUE(entry.has_value());
  expect_same_code(*parse_device_code(*entry), *reference);
}

TEST(CompileCached, DumpsBypassTheCache) {
  TempDir dir("tessel_disk_cache_");
  DiskCache cache({.dir = dir.str("cache")});
  CompileOptions o = host_options();
  o.dump_stages = "ir";
  o.dump_dir = dir.str();
  CompileArtifacts artifacts;
  absl::StatusOr<DeviceCode> code = compile_cached(cache, axpy(), o, &artifacts);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_THAT(artifacts.ir, HasSubstr("kernel axpy("));
  ASSERT_TRUE(compile_cached(cache, axpy(), o).ok());
  EXPECT_EQ(cache.stats().writes + cache.stats().misses + cache.stats().hits, 0);
  EXPECT_FALSE(fs::exists(dir.path() / "cache"));
}

TEST(DiskCache, WithoutADirectoryItIsOff) {
  DiskCache cache({.dir = ""});
  EXPECT_FALSE(cache.enabled());
  absl::StatusOr<DeviceCode> code = compile_cached(cache, axpy(), host_options());
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(cache.stats().writes + cache.stats().misses + cache.stats().hits, 0);
  EXPECT_FALSE(cache.read("tuning", "k").has_value());
  absl::Status s = cache.write("tuning", "k", "v");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "the disk cache is off (no directory)");
}

TEST(DiskCache, AnUnusableDirectoryNeverFailsACompileAndWarnsOnce) {
  TempDir dir("tessel_disk_cache_");
  // A path through a file: unusable even by root.
  write_file(dir.path() / "file", "not a directory");
  const std::string bad = dir.str("file") + "/cache";
  auto cache = std::make_shared<DiskCache>(DiskCacheConfig{.dir = bad});
  Device d = *Device::open("host:1");
  d.impl().set_disk_cache(cache);
  ::testing::internal::CaptureStderr();
  absl::StatusOr<Function> f1 = d.compile(axpy("first"));
  absl::StatusOr<Function> f2 = d.compile(axpy("second"));
  std::string warnings = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(f1.ok()) << f1.status();
  ASSERT_TRUE(f2.ok()) << f2.status();
  expect_axpy_runs(*f2);
  EXPECT_EQ(warnings, absl::StrCat("tessel: warning: the cache in ", bad, " is skipped: cannot create ", bad,
                                   "/kernels (Not a directory); set TESSEL_CACHE_DIR to a writable directory, or to "
                                   "nothing (TESSEL_CACHE_DIR=) to turn the cache off\n"));
  absl::Status s = cache->write("tuning", "k", "v");
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("cannot create ", bad, "/tuning (Not a directory)")));
}

TEST(DiskCache, AnEntryThatCannotBeReadOrReplacedIsSkippedWithAWarning) {
  TempDir dir("tessel_disk_cache_");
  DiskCache cache({.dir = dir.str()});
  ASSERT_TRUE(cache.write("tuning", "other", "x").ok());
  // A directory where the entry would go: the rename that replaces it fails.
  std::string path = cache.entry_path("tuning", "k");
  fs::create_directories(fs::path(path) / "inside");
  ::testing::internal::CaptureStderr();
  absl::Status s = cache.write("tuning", "k", "v");
  std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), absl::StrCat("cannot write in ", dir.str("tuning"), " (Is a directory)"));
  EXPECT_EQ(warning, absl::StrCat("tessel: warning: the cache in ", dir.str(), " is skipped: ", s.message(),
                                  "; set TESSEL_CACHE_DIR to a writable directory, or to nothing "
                                  "(TESSEL_CACHE_DIR=) to turn the cache off\n"));
  std::vector<std::string> left;
  for (const fs::directory_entry& e : fs::directory_iterator(dir.path() / "tuning")) {
    if (absl::EndsWith(e.path().string(), ".tmp")) left.push_back(e.path().string());
  }
  EXPECT_THAT(left, ::testing::IsEmpty());

  // An entry that cannot be opened (a symbolic link to itself).
  DiskCache reader({.dir = dir.str()});
  std::string loop = reader.entry_path("tuning", "loop");
  fs::create_symlink(loop, loop);
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(reader.read("tuning", "loop").has_value());
  warning = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(warning, absl::StrCat("tessel: warning: the cache in ", dir.str(), " is skipped: cannot read ", loop,
                                  " (Too many levels of symbolic links); set TESSEL_CACHE_DIR to a writable "
                                  "directory, or to nothing (TESSEL_CACHE_DIR=) to turn the cache off\n"));
}

TEST(DiskCacheDeathTest, SpacesAreNamedPlainly) {
  DiskCache cache({.dir = "/tmp"});
  EXPECT_DEATH(cache.read("../escape", "k"), "a disk cache space is named with a-z, 0-9, '_' and '-'");
}

}  // namespace
}  // namespace tessel
