#include "runtime/shared_library.h"

#include <dlfcn.h>
#include <stdlib.h>

#include "absl/strings/str_cat.h"

namespace tessel {

absl::StatusOr<Library> open_library(const char* env, std::initializer_list<const char*> sonames, const char* absent) {
  // RTLD_LOCAL: the library's symbols are reached only through the pointers
  // resolved from the handle, so they cannot clash with another user's.
  if (const char* named = getenv(env); named != nullptr && *named != '\0') {
    void* lib = dlopen(named, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      return absl::UnavailableError(absl::StrCat(env, " names ", named, ", which does not load: ", dlerror()));
    }
    return Library{lib, named};
  }
  for (const char* name : sonames) {
    void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (lib == nullptr) lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) return Library{lib, name};
  }
  return absl::UnavailableError(absent);
}

}  // namespace tessel
