#include "runtime/env.h"

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tessel {
namespace {

// "1073741824", "512M", "1G", "64k": bytes, or binary multiples.
std::optional<int64_t> parse_size(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  char unit = text.empty() ? '\0' : absl::ascii_toupper(text.back());
  int shift = unit == 'K' ? 10 : unit == 'M' ? 20 : unit == 'G' ? 30 : 0;
  if (shift != 0) text.remove_suffix(1);
  int64_t n = 0;
  if (text.empty() || !absl::ascii_isdigit(text.front()) || !absl::SimpleAtoi(text, &n) ||
      n > (std::numeric_limits<int64_t>::max() >> shift)) {
    return std::nullopt;
  }
  return n << shift;
}

}  // namespace

CompileOptions options_from_env(CompileOptions options) {
  if (options.dump_stages.empty()) {
    if (const char* stages = std::getenv("TESSEL_DUMP")) options.dump_stages = stages;
  }
  if (const char* debug = std::getenv("TESSEL_DEBUG");
      debug != nullptr && debug[0] != '\0' && absl::string_view(debug) != "0") {
    options.debug = true;
  }
  if (options.dump_dir.empty() && !options.dump_stages.empty()) {
    const char* dir = std::getenv("TESSEL_DUMP_DIR");
    options.dump_dir = dir != nullptr ? dir : ".";
  }
  return options;
}

DiskCacheConfig disk_cache_config_from_env() {
  DiskCacheConfig config;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  if (const char* dir = std::getenv("TESSEL_CACHE_DIR")) {
    config.dir = dir;
  } else if (xdg != nullptr && xdg[0] == '/') {  // the XDG spec ignores a relative path
    config.dir = absl::StrCat(xdg, "/tessel");
  } else if (home != nullptr && home[0] != '\0') {
    config.dir = absl::StrCat(home, "/.cache/tessel");
  }
  if (const char* max = std::getenv("TESSEL_CACHE_MAX_BYTES"); max != nullptr && max[0] != '\0') {
    if (std::optional<int64_t> bytes = parse_size(max)) {
      config.max_bytes = *bytes;
    } else {
      std::fprintf(stderr,
                   "tessel: warning: TESSEL_CACHE_MAX_BYTES='%s' is not a size (bytes, or a number with K, M or G); "
                   "the cache keeps at most %lld bytes\n",
                   max, static_cast<long long>(config.max_bytes));
    }
  }
  return config;
}

}  // namespace tessel
