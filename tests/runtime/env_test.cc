// TESSEL_DUMP / TESSEL_DUMP_DIR (every compilation then writes its stages)
// and TESSEL_CACHE_DIR / TESSEL_CACHE_MAX_BYTES (the disk cache): read in
// one place.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "dsl/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/device.h"
#include "runtime/device_impl.h"
#include "runtime/env.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Env, DumpWritesEachStageOfACompilation) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("tessel_dump_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  setenv("TESSEL_DUMP", "ir,llvm", 1);
  setenv("TESSEL_DUMP_DIR", dir.c_str(), 1);
  CompileOptions o = options_from_env({});
  EXPECT_EQ(o.dump_stages, "ir,llvm");
  EXPECT_EQ(o.dump_dir, dir.string());

  KernelBuilder k("dumped");
  Value x = k.arg(ptr(f32), "x");
  store(x + k.arange(0, 16), 1.0);
  Device d = *Device::open("host:1");
  ASSERT_TRUE(d.compile(*k.build()).ok());
  unsetenv("TESSEL_DUMP");
  unsetenv("TESSEL_DUMP_DIR");
  EXPECT_THAT(read(dir / "dumped.host.tessel"), HasSubstr("kernel dumped(%0 x: ptr<f32>)"));
  EXPECT_THAT(read(dir / "dumped.host.ll"), HasSubstr("define void @tessel_dumped"));
  std::filesystem::remove_all(dir);
}

TEST(Env, ExplicitOptionsWinOverTheEnvironment) {
  setenv("TESSEL_DUMP", "ptx", 1);
  CompileOptions mine;
  mine.dump_stages = "ir";
  mine.dump_dir = "/somewhere";
  CompileOptions o = options_from_env(mine);
  unsetenv("TESSEL_DUMP");
  EXPECT_EQ(o.dump_stages, "ir");
  EXPECT_EQ(o.dump_dir, "/somewhere");
}

TEST(Env, AnUnwritableDumpDirectoryIsAnError) {
  KernelBuilder k("undumpable");
  Value x = k.arg(ptr(f32), "x");
  store(x, 1.0);
  CompileOptions o;
  o.dump_stages = "ir";
  o.dump_dir = "/nonexistent/tessel/dir";
  absl::StatusOr<Function> f = Device::open("host:1")->compile(*k.build(), o);
  EXPECT_THAT(f.status().message(), HasSubstr("TESSEL_DUMP: cannot write /nonexistent/tessel/dir/undumpable.host.tessel"));
}

// Sets environment variables for one test and puts back what was there.
class ScopedEnv {
 public:
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }
  void set(const std::string& name, const char* value) {
    if (!saved_.contains(name)) {
      const char* old = std::getenv(name.c_str());
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    if (value) {
      setenv(name.c_str(), value, 1);
    } else {
      unsetenv(name.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

TEST(Env, TheCacheDirectoryAndItsBound) {
  ScopedEnv env;
  env.set("TESSEL_CACHE_DIR", "/tmp/mine");
  env.set("XDG_CACHE_HOME", "/xdg");
  env.set("HOME", "/home/me");
  env.set("TESSEL_CACHE_MAX_BYTES", nullptr);
  EXPECT_EQ(disk_cache_config_from_env().dir, "/tmp/mine");
  EXPECT_EQ(disk_cache_config_from_env().max_bytes, int64_t{1} << 30);
  env.set("TESSEL_CACHE_DIR", nullptr);
  EXPECT_EQ(disk_cache_config_from_env().dir, "/xdg/tessel");
  env.set("XDG_CACHE_HOME", "relative");  // the XDG spec says to ignore it
  EXPECT_EQ(disk_cache_config_from_env().dir, "/home/me/.cache/tessel");
  env.set("XDG_CACHE_HOME", nullptr);
  EXPECT_EQ(disk_cache_config_from_env().dir, "/home/me/.cache/tessel");
  env.set("HOME", nullptr);
  EXPECT_EQ(disk_cache_config_from_env().dir, "");

  for (auto [text, bytes] : {std::pair{"123", int64_t{123}}, std::pair{"64k", int64_t{64} << 10},
                             std::pair{"512M", int64_t{512} << 20}, std::pair{" 2G ", int64_t{2} << 30}}) {
    env.set("TESSEL_CACHE_MAX_BYTES", text);
    EXPECT_EQ(disk_cache_config_from_env().max_bytes, bytes) << text;
  }
  for (const char* bad : {"lots", "-5", "1T", "G", "99999999999999999999"}) {
    env.set("TESSEL_CACHE_MAX_BYTES", bad);
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(disk_cache_config_from_env().max_bytes, int64_t{1} << 30) << bad;
    EXPECT_EQ(::testing::internal::GetCapturedStderr(),
              absl::StrCat("tessel: warning: TESSEL_CACHE_MAX_BYTES='", bad,
                           "' is not a size (bytes, or a number with K, M or G); the cache keeps at most 1073741824 "
                           "bytes\n"));
  }
}

TEST(Env, AnEmptyCacheDirectoryTurnsTheCacheOff) {
  ScopedEnv env;
  env.set("TESSEL_CACHE_DIR", "");
  EXPECT_FALSE(DiskCache::from_env()->enabled());
  KernelBuilder k("uncached");
  Value x = k.arg(ptr(f32), "x");
  store(x + k.arange(0, 16), 2.0);
  Device d = *Device::open("host:1");
  ASSERT_TRUE(d.compile(*k.build()).ok());
  std::shared_ptr<const DiskCache> cache = d.impl().disk_cache();
  EXPECT_FALSE(cache->enabled());
  EXPECT_EQ(cache->stats().writes + cache->stats().misses, 0);
}

}  // namespace
}  // namespace tessel
