// Shared by the GPU benchmarks: exit on errors, wall time, and one printed
// line per measurement.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/float16.h"

namespace bench {

using Clock = std::chrono::steady_clock;

template <class T>
T must(absl::StatusOr<T> v, const char* what) {
  if (!v.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, std::string(v.status().message()).c_str());
    std::exit(1);
  }
  return *std::move(v);
}
inline void must(const absl::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, std::string(s.message()).c_str());
    std::exit(1);
  }
}

// The middle value (the upper one of an even count).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

inline void report(const std::string& what, double value, const std::string& unit, const std::string& note = "") {
  std::printf("%-58s %12.3f %-8s %s\n", what.c_str(), value, unit.c_str(), note.c_str());
  std::fflush(stdout);
}

// The flags a benchmark takes: --json=PATH and --only=TEXT, one switch
// (--NAME), and --config=LABEL where the caller set `takes_config`. False,
// after printing "PROGRAM: unknown argument '...'" with the usage, for
// anything else.
struct Flags {
  std::string json, only, config;
  bool on = false;
  bool takes_config = false;
};
inline bool parse_flags(const char* program, const char* switch_name, int argc, char** argv, Flags& flags) {
  const std::string toggle = std::string("--") + switch_name;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--json=", 0) == 0) {
      flags.json = arg.substr(7);
    } else if (arg.rfind("--only=", 0) == 0) {
      flags.only = arg.substr(7);
    } else if (flags.takes_config && arg.rfind("--config=", 0) == 0) {
      flags.config = arg.substr(9);
    } else if (arg == toggle) {
      flags.on = true;
    } else {
      std::fprintf(stderr, "%s: unknown argument '%s' (usage: %s [--json=PATH] [--only=TEXT] [%s]%s)\n", program,
                   arg.c_str(), program, toggle.c_str(), flags.takes_config ? " [--config=LABEL]" : "");
      return false;
    }
  }
  return true;
}

// With --config=LABEL, keeps the configurations of `tried` whose label(c)
// is LABEL; false (and a message naming the case) when none is.
template <class Config, class Label>
bool keep_config(const char* program, const Flags& flags, const std::string& case_name, std::vector<Config>& tried,
                 Label label) {
  if (flags.config.empty()) return true;
  std::erase_if(tried, [&](const Config& c) { return label(c) != flags.config; });
  if (!tried.empty()) return true;
  std::fprintf(stderr, "%s: no configuration '%s' at %s\n", program, flags.config.c_str(), case_name.c_str());
  return false;
}

// Deterministic values in [-scale, scale), as bf16 bits (splitmix64 of the
// index).
inline std::vector<uint16_t> random_bf16(size_t n, uint64_t seed, float scale = 1.0f) {
  std::vector<uint16_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    uint64_t z = (i + seed * 0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 31)) * 0x94D049BB133111EBull;
    out[i] = tessel::float_to_bf16(scale * (static_cast<float>((z >> 40) & 0xFFFFFF) / 8388608.0f - 1.0f));
  }
  return out;
}

inline std::string ratio(double r, const char* target) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "ratio %.3f (target %s)", r, target);
  return buf;
}

}  // namespace bench
