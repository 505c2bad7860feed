// Shared by the samples: command line, device choice, random data, checks.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tessel/tessel.h"

namespace samples {

// --device=host|host:N|cuda:N|best (default best), --emit=DIR (write the
// kernels' stages there and do not run), --target=sm_90a, sm_80 to sm_89,
// or gfx942 (with --emit: compile for that GPU without needing one),
// --seed=N, --ranks=N.
struct Args {
  std::string device = "best";
  std::string emit_dir;
  std::string target;
  unsigned seed = std::random_device{}();
  int ranks = 0;  // --ranks=N, for samples over several devices; 0: the sample's default
};
Args parse_args(int argc, char** argv);

absl::StatusOr<tessel::Device> open_device(const Args& args);

// With --target: writes each kernel's IR, LLVM IR and assembly (PTX, or
// AMDGCN and the .hsaco code object) into the --emit directory and returns
// true (the sample then stops); else returns false.
bool emit_for_target(const Args& args, const std::vector<tessel::Kernel>& kernels,
                     tessel::CompileOptions options = {});
tessel::CompileOptions compile_options(const Args& args);

// Largest |got - want| / max(1, |want|), printed with the sample's name.
bool check_close(const char* what, const std::vector<float>& got, const std::vector<double>& want, double tol);

// Exits with a message if `s` is not OK.
void ok_or_die(const absl::Status& s, const char* what);
template <class T>
T value_or_die(absl::StatusOr<T> v, const char* what) {
  ok_or_die(v.status(), what);
  return *std::move(v);
}

}  // namespace samples
