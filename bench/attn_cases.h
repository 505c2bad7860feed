// What attn_bench and attn_bwd_bench share: the shapes (4 x 32 heads,
// lengths 1024 to 16384, d 64 and 128, causal or not; and Llama 3 8B's
// grouped heads, 4 x 32 query heads on 4 x 8 KV heads at d 128, lengths
// 4096 and 16384), their inputs, and the line and JSON entry each case
// reports.
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "report.h"

namespace bench {

inline constexpr int64_t kAttnHeads = 4 * 32;

struct AttnCase {
  int64_t len, d;
  bool causal;
  int64_t group;     // query heads per KV head
  std::string name;  // "len 4096, d 128, causal", "len 4096, d 128, group 4"
};

// The cases in their order, those whose name contains `only`.
inline std::vector<AttnCase> attn_cases(const std::string& only) {
  std::vector<AttnCase> out;
  auto add = [&](int64_t len, int64_t d, bool causal, int64_t group) {
    std::string name = "len " + std::to_string(len) + ", d " + std::to_string(d) +
                       (group > 1 ? ", group " + std::to_string(group) : "") + (causal ? ", causal" : "");
    if (name.find(only) != std::string::npos) out.push_back({len, d, causal, group, std::move(name)});
  };
  for (int64_t d : {64, 128}) {
    for (int64_t len : {1024, 4096, 16384}) {
      for (bool causal : {false, true}) add(len, d, causal, 1);
    }
  }
  for (int64_t len : {4096, 16384}) {
    for (bool causal : {false, true}) add(len, 128, causal, 4);
  }
  return out;
}

// Reports each case (its fastest configuration beside the first one
// tried) and collects the JSON the comparison scripts read.
class AttnLog {
 public:
  AttnLog(std::string program, const std::string& device) : program_(std::move(program)) {
    json_ = "{\n  \"device\": \"" + device + "\",\n  \"heads\": " + std::to_string(kAttnHeads) + ",\n  \"cases\": [";
  }
  // `flops` of the case; times in ms; `error` against `tolerance`.
  void add(const std::string& title, const AttnCase& c, double flops, double best_ms, const std::string& best,
           double default_ms, const std::string& first, double error, double tolerance) {
    const bool ok = error <= tolerance;
    failures_ += ok ? 0 : 1;
    const double tflops = flops / (best_ms * 1e9);
    char note[200];
    std::snprintf(note, sizeof note, "%.1f us; config %s (default %s: %.1f us); error %.1e%s", best_ms * 1e3,
                  best.c_str(), first.c_str(), default_ms * 1e3, error, ok ? "" : " FAILED");
    report(title + ", " + c.name, tflops, "TFLOP/s", note);
    char entry[400];
    std::snprintf(entry, sizeof entry,
                  "%s\n    {\"len\": %lld, \"d\": %lld, \"causal\": %s, \"group\": %lld, \"us\": %.3f, "
                  "\"default_us\": %.3f, "
                  "\"config\": \"%s\", \"tflops\": %.1f, \"max_error\": %.3g, \"ok\": %s}",
                  entries_ == 0 ? "" : ",", static_cast<long long>(c.len), static_cast<long long>(c.d),
                  c.causal ? "true" : "false", static_cast<long long>(c.group), best_ms * 1e3, default_ms * 1e3,
                  best.c_str(), tflops, error, ok ? "true" : "false");
    json_ += entry;
    ++entries_;
  }
  // Writes the JSON where asked; the exit code: 1 if a result was outside
  // its tolerance.
  int finish(const std::string& json_path) {
    if (!json_path.empty()) std::ofstream(json_path) << json_ << "\n  ]\n}\n";
    if (failures_ > 0) std::printf("%s: %d results outside their tolerance\n", program_.c_str(), failures_);
    return failures_ > 0 ? 1 : 0;
  }

 private:
  std::string program_, json_;
  int entries_ = 0, failures_ = 0;
};

}  // namespace bench
