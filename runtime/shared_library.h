// A vendor library tessel loads at run time (the CUDA driver, HIP, the KFD
// thunk): tessel links none of them, so it builds and runs where they are
// absent, and a test may point it at a stand-in.
#pragma once

#include <initializer_list>
#include <string>

#include "absl/status/statusor.h"

namespace tessel {

struct Library {
  void* handle = nullptr;
  std::string path;  // as loaded: the environment's path or the soname
};

// The file the environment variable `env` names (an error if it does not
// load), else the first of `sonames` the process has or can load;
// kUnavailable `absent` where none is there. The handle is never closed:
// the pointers resolved from it outlive every user.
absl::StatusOr<Library> open_library(const char* env, std::initializer_list<const char*> sonames, const char* absent);

}  // namespace tessel
