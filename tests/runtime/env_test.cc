// TESSEL_DUMP / TESSEL_DUMP_DIR: read in one place, and every compilation
// then writes its stages.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "dsl/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/device.h"
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

}  // namespace
}  // namespace tessel
