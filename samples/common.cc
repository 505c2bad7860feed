#include "common.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/numbers.h"

namespace samples {

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (absl::ConsumePrefix(&arg, "--device=")) {
      a.device = std::string(arg);
    } else if (absl::ConsumePrefix(&arg, "--emit=")) {
      a.emit_dir = std::string(arg);
    } else if (absl::ConsumePrefix(&arg, "--target=")) {
      a.target = std::string(arg);
    } else if (absl::ConsumePrefix(&arg, "--seed=") && absl::SimpleAtoi(arg, &a.seed)) {
    } else if (absl::ConsumePrefix(&arg, "--ranks=") && absl::SimpleAtoi(arg, &a.ranks) && a.ranks >= 1) {
    } else {
      std::fprintf(stderr, "usage: %s [--device=best|host|host:N|cuda:N] [--emit=DIR [--target=sm_90a|sm_80..sm_89|gfx942|host]] [--seed=N] [--ranks=N]\n",
                   argv[0]);
      std::exit(2);
    }
  }
  std::printf("seed %u\n", a.seed);
  return a;
}

absl::StatusOr<tessel::Device> open_device(const Args& args) {
  return args.device == "best" ? tessel::Device::best() : tessel::Device::open(args.device);
}

bool emit_for_target(const Args& args, const std::vector<tessel::Kernel>& kernels, tessel::CompileOptions options) {
  if (args.target.empty()) return false;
  std::string dir = args.emit_dir.empty() ? "." : args.emit_dir;
  options.arch = args.target;
  for (const tessel::Kernel& k : kernels) {
    tessel::CompileArtifacts a;
    tessel::DeviceCode code = value_or_die(tessel::compile(k, options, &a), "compile");
    const char* assembly = absl::StartsWith(args.target, "sm_") ? ".ptx" : ".s";
    std::vector<std::pair<const char*, const std::string*>> files = {
        {".tessel", &a.ir}, {".ll", &a.llvm}, {assembly, &a.assembly}};
    if (code.format == tessel::CodeFormat::kHsaco) files.push_back({".hsaco", &code.binary});  // the code object
    for (auto [ext, text] : files) {
      std::string path = dir + "/" + k.name() + "." + args.target + ext;
      std::ofstream out(path, std::ios::binary);
      out << *text;
      if (!out.flush()) {
        std::fprintf(stderr, "cannot write %s (does the directory %s exist?)\n", path.c_str(), dir.c_str());
        std::exit(1);
      }
      std::printf("wrote %s\n", path.c_str());
    }
  }
  return true;
}

tessel::CompileOptions compile_options(const Args& args) {
  tessel::CompileOptions o;
  if (!args.emit_dir.empty()) {
    o.dump_dir = args.emit_dir;
    o.dump_stages = "ir,llvm,ptx";
  }
  return o;
}

bool check_close(const char* what, const std::vector<float>& got, const std::vector<double>& want, double tol) {
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double err = std::abs(got[i] - want[i]) / std::max(1.0, std::abs(want[i]));
    if (!(err <= worst)) {  // also catches NaN
      worst = std::isnan(err) ? INFINITY : err;
      at = i;
    }
  }
  bool ok = worst <= tol;
  std::printf("%s: %zu values, worst relative error %.3g at %zu (tolerance %.1g): %s\n", what, got.size(), worst, at,
              tol, ok ? "OK" : "FAILED");
  return ok;
}

void ok_or_die(const absl::Status& s, const char* what) {
  if (s.ok()) return;
  std::fprintf(stderr, "%s: %s\n", what, std::string(s.message()).c_str());
  std::exit(1);
}

}  // namespace samples
