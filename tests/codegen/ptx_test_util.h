// FileCheck and ptxas for the PTX suites (TESSEL_FILECHECK and TESSEL_PTXAS
// name the tools; empty when they were not found).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "codegen/compiler.h"
#include "gtest/gtest.h"

namespace tessel {

// Compiles for NVIDIA: sm_90a unless `options` names another arch.
inline absl::StatusOr<DeviceCode> compile_ptx(const Kernel& kernel, CompileOptions options,
                                              CompileArtifacts* artifacts = nullptr) {
  if (options.arch.empty()) options.arch = "sm_90a";
  return compile(kernel, options, artifacts);
}

// The PTX (sm_90a) of `kernel` on `warps` warps; empty, with a test
// failure, where building or compiling it failed.
inline std::string ptx_of(const absl::StatusOr<Kernel>& kernel, int warps) {
  if (!kernel.ok()) {
    ADD_FAILURE() << kernel.status();
    return "";
  }
  CompileOptions options;
  options.num_warps = warps;
  absl::StatusOr<DeviceCode> code = compile_ptx(*kernel, options);
  if (!code.ok()) {
    ADD_FAILURE() << code.status();
    return "";
  }
  return code->binary;
}

inline std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tessel_ptx_test_" + std::to_string(getpid()) + "_" + name))
      .string();
}

inline void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// Runs FileCheck with `checks` over `ptx`; returns its exit code.
inline int file_check(const std::string& ptx, const std::string& checks) {
  std::string in = temp_path("in.ptx"), chk = temp_path("checks.txt");
  write(in, ptx);
  write(chk, checks);
  int rc = std::system((std::string(TESSEL_FILECHECK) + " --input-file=" + in + " " + chk).c_str());
  std::filesystem::remove(in);
  std::filesystem::remove(chk);
  return rc;
}

// Assembles `ptx` for `arch`; returns ptxas's exit code.
inline int ptxas(const std::string& ptx, const std::string& arch = "sm_90a") {
  std::string in = temp_path("asm.ptx"), out = temp_path("asm.cubin");
  write(in, ptx);
  int rc = std::system((std::string(TESSEL_PTXAS) + " -arch=" + arch + " " + in + " -o " + out).c_str());
  std::filesystem::remove(in);
  std::filesystem::remove(out);
  return rc;
}

// How many times `what` occurs in `text`.
inline int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}
// How many matches of the regular expression `pattern` `text` holds.
inline int count_matches(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  return static_cast<int>(std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

// The loops of `ptx`: for each branch back to a label above it, the text
// from the label to the branch.
inline std::vector<std::string> loop_bodies(const std::string& ptx) {
  std::vector<std::string> out;
  std::map<std::string, size_t> labels;  // label -> where its line starts
  const std::regex label(R"((\$L__BB\d+_\d+):)"), branch(R"(bra(?:\.uni)?\s+(\$L__BB\d+_\d+);)");
  size_t at = 0;
  while (at < ptx.size()) {
    const size_t end = std::min(ptx.find('\n', at), ptx.size());
    const std::string line = ptx.substr(at, end - at);
    std::smatch m;
    if (std::regex_search(line, m, label) && m.position(0) == 0) labels[m[1]] = at;
    if (std::regex_search(line, m, branch) && labels.contains(m[1])) {
      out.push_back(ptx.substr(labels.at(m[1]), end - labels.at(m[1])));
    }
    at = end + 1;
  }
  return out;
}

inline bool have_tool(const char* path) { return *path && std::filesystem::exists(path); }
inline bool have_ptxas() { return have_tool(TESSEL_PTXAS); }

// The test's last check: ptxas accepts `ptx` for `arch` (the test is
// skipped without ptxas).
inline void expect_ptxas_accepts(const std::string& ptx, const std::string& arch = "sm_90a") {
  if (!have_ptxas()) GTEST_SKIP() << "ptxas not found; PTX text checked only";
  EXPECT_EQ(ptxas(ptx, arch), 0);
}

// ptxas -v's report on `ptx` (stdout and stderr), and its exit code.
inline std::pair<int, std::string> ptxas_verbose(const std::string& ptx, const std::string& arch = "sm_90a") {
  std::string in = temp_path("v.ptx"), out = temp_path("v.cubin"), log = temp_path("v.log");
  write(in, ptx);
  int rc = std::system(
      (std::string(TESSEL_PTXAS) + " -v -arch=" + arch + " " + in + " -o " + out + " > " + log + " 2>&1").c_str());
  std::ifstream f(log);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (const std::string& p : {in, out, log}) std::filesystem::remove(p);
  return {rc, text};
}

// The test's last check: ptxas takes `ptx` with no spill and none of the
// messages that mean tensor-core work was serialized (C7515, C7519), a
// wait for it added where the PTX had none (C7517) or a register budget
// ignored (C7508), for `arch`. Skipped without ptxas.
inline void expect_ptxas_clean(const std::string& ptx, const std::string& arch = "sm_90a") {
  if (!have_ptxas()) GTEST_SKIP() << "ptxas not found; PTX text checked only";
  auto [rc, log] = ptxas_verbose(ptx, arch);
  EXPECT_EQ(rc, 0) << log;
  for (const char* bad : {"C7515", "C7517", "C7519", "C7508"}) EXPECT_EQ(log.find(bad), std::string::npos) << log;
  EXPECT_NE(log.find("0 bytes spill stores, 0 bytes spill loads"), std::string::npos) << log;
}

// For helpers that assemble along the way: ptxas's verdict on `ptx`, or true
// with a note in the test's output where ptxas is absent (PTX text checked only).
inline bool ptxas_accepts_if_present(const std::string& ptx) {
  if (!have_ptxas()) {
    ::testing::Test::RecordProperty("ptxas", "not found; PTX text checked only");
    return true;
  }
  return ptxas(ptx) == 0;
}

}  // namespace tessel
