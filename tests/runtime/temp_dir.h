// A directory of the running test's own, removed at the end of the test.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace tessel {

class TempDir {
 public:
  // <tmp>/<prefix><pid>_<test name>
  explicit TempDir(const std::string& prefix) {
    const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() / absl::StrCat(prefix, getpid(), "_", test->name());
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string str(const std::string& sub = "") const { return sub.empty() ? path_.string() : (path_ / sub).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace tessel
