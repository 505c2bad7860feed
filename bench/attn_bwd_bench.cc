// tessel's attention backward pass (samples::launch_attention_bwd: D's
// kernel, the gradients', and with AttnBwdConfig::split dQ's) on an NVIDIA
// GPU at attn_bench's shapes: 4 x 32 heads, lengths 1024 to 16384, d 64 and
// 128, bf16, with and without the causal mask, and grouped query heads (32
// on 8 KV heads at d 128, a KV head's dK and dV summed over its group). The forward
// (attention_config's, keeping its log2-sum-exp) runs once per case; each
// configuration's kernels are then timed together and the fastest is
// reported beside the first's. TFLOP/s count 10 * heads * len^2 * d (half
// of it with the mask): the five products of FlashAttention-2's backward,
// which is how its figures are quoted (the kernel without `split` does
// seven). Sampled rows of dQ, dK and
// dV are checked in double (dK's and dV's from the device's log2-sum-exp
// and D, which are checked at the sampled query rows). The baselines
// (torch's scaled_dot_product_attention backward on each backend) come
// from bench/attn_bwd_compare.py, which reads the JSON this writes
// (--json=PATH). --only=TEXT runs the cases whose name contains TEXT;
// --default, the first configuration (attention_bwd_config's) alone;
// --config=LABEL, the one of that label (as printed).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "attn_cases.h"
#include "base/float16.h"
#include "cuda_raw.h"
#include "report.h"
#include "samples/kernels.h"
#include "tessel/tessel.h"

using namespace tessel;
using bench::must;
using samples::AttnBwdConfig;

namespace {

constexpr int64_t kHeads = bench::kAttnHeads;

std::string label(const AttnBwdConfig& c) {
  return std::to_string(c.block) + "x" + std::to_string(samples::attention_bwd_step(c)) + " s" +
         std::to_string(c.stages) + " w" + std::to_string(samples::attention_bwd_warps(c)) +
         (c.programs > 1 ? " p" + std::to_string(c.programs) : "") + (c.split ? " split" : "");
}

// attention_bwd_config's pick first.
std::vector<AttnBwdConfig> configs(int64_t d, bool causal, int64_t len, int64_t group) {
  std::vector<AttnBwdConfig> out = {samples::attention_bwd_config(d, causal, len)};
  out[0].group = group;
  for (auto [block, step, stages, programs, split] : {std::tuple{64, 64, 2, 1, false},
                                                      {64, 64, 3, 1, false},
                                                      {128, 128, 2, 1, false},
                                                      {64, 64, 2, 2, false},
                                                      {128, 64, 2, 1, false},
                                                      {128, 64, 3, 1, false},
                                                      {64, 64, 3, 1, true},
                                                      {128, 128, 2, 1, true},
                                                      {128, 128, 3, 1, true},
                                                      {128, 64, 2, 1, true},
                                                      {128, 64, 3, 1, true},
                                                      {128, 64, 4, 1, true}}) {
    const AttnBwdConfig c = {.d = d,
                             .group = group,
                             .block = block,
                             .step = step,
                             .causal = causal,
                             .stages = stages,
                             .programs = programs,
                             .split = split};
    // (A 64-row share of dQ splits d between the two warpgroups, a whole
    // 64-column panel each: not at d = 64, where it would not run on wgmma.)
    if (split && step < block && d < 128) continue;
    if (label(c) != label(out[0])) out.push_back(c);
  }
  return out;
}

// One head's tensors as doubles, and its device-side statistics.
struct Head {
  int64_t len, d;
  double scale;
  bool causal;
  std::vector<double> q, k, v, dout;
  std::vector<float> lse2, delta;  // from the device
  const double* row(const std::vector<double>& x, int64_t i) const { return &x[i * d]; }
  double dot(const double* a, const double* b) const {
    double s = 0;
    for (int64_t c = 0; c < d; ++c) s += a[c] * b[c];
    return s;
  }
  bool sees(int64_t i, int64_t j) const { return !causal || j <= i; }
  // P_ij from the device's log2-sum-exp.
  double p(int64_t i, int64_t j) const {
    return sees(i, j) ? std::exp2(dot(row(q, i), row(k, j)) * scale * M_LOG2E - lse2[i]) : 0.0;
  }
};

// dQ of query i in double, with its exact log2-sum-exp and D; the largest
// differences of those two from the device's go to `stats_error`.
std::vector<double> dq_row(const Head& h, int64_t i, double& stats_error) {
  std::vector<double> s(h.len, -INFINITY);
  double top = -INFINITY, total = 0, di = 0;
  for (int64_t j = 0; j < h.len; ++j) {
    if (h.sees(i, j)) top = std::max(top, s[j] = h.dot(h.row(h.q, i), h.row(h.k, j)) * h.scale);
  }
  for (int64_t j = 0; j < h.len; ++j) total += s[j] = std::exp(s[j] - top);
  std::vector<double> o(h.d, 0.0), dq(h.d, 0.0);
  for (int64_t j = 0; j < h.len; ++j) {
    for (int64_t c = 0; c < h.d; ++c) o[c] += s[j] / total * h.row(h.v, j)[c];
  }
  for (int64_t c = 0; c < h.d; ++c) di += h.row(h.dout, i)[c] * o[c];
  stats_error =
      std::max({stats_error, std::abs((top + std::log(total)) / std::log(2.0) - h.lse2[i]), std::abs(di - h.delta[i])});
  for (int64_t j = 0; j < h.len; ++j) {
    const double ds = s[j] / total * (h.dot(h.row(h.dout, i), h.row(h.v, j)) - di);
    for (int64_t c = 0; c < h.d; ++c) dq[c] += ds * h.row(h.k, j)[c] * h.scale;
  }
  return dq;
}

// dK and dV of key j in double, from the device's statistics.
std::pair<std::vector<double>, std::vector<double>> dkv_row(const Head& h, int64_t j) {
  std::vector<double> dk(h.d, 0.0), dv(h.d, 0.0);
  for (int64_t i = 0; i < h.len; ++i) {
    const double p = h.p(i, j);
    if (p == 0) continue;
    const double ds = p * (h.dot(h.row(h.dout, i), h.row(h.v, j)) - h.delta[i]);
    for (int64_t c = 0; c < h.d; ++c) {
      dv[c] += p * h.row(h.dout, i)[c];
      dk[c] += ds * h.row(h.q, i)[c] * h.scale;
    }
  }
  return {dk, dv};
}

}  // namespace

int main(int argc, char** argv) {
  bench::Flags flags;  // --default: the first configuration alone
  flags.takes_config = true;
  if (!bench::parse_flags("attn_bwd_bench", "default", argc, argv, flags)) return 2;
  bench::CudaRaw cu;
  std::optional<Device> opened = bench::open_cuda("attn_bwd_bench", cu);
  if (!opened.has_value()) return 0;
  Device dev = *opened;
  std::printf("attn_bwd_bench on %s\n", dev.description().c_str());
  Stream stream = must(dev.create_stream(), "stream");
  bench::FlushedTimer timer(cu, static_cast<CUstream>(stream.native()));
  bench::AttnLog log("attn_bwd_bench", dev.description());
  for (const bench::AttnCase& ac : bench::attn_cases(flags.only)) {
    const int64_t len = ac.len, d = ac.d, group = ac.group;
    const bool causal = ac.causal;
    const size_t n = static_cast<size_t>(kHeads * len * d), bytes = n * 2, kv_bytes = bytes / group,
                 rows = kHeads * len;
    const std::vector<uint16_t> hq = bench::random_bf16(n, 1), hk = bench::random_bf16(n / group, 2),
                                hv = bench::random_bf16(n / group, 3), hdo = bench::random_bf16(n, 4);
    auto upload = [&](const std::vector<uint16_t>& host) {
      Buffer b = must(dev.allocate(host.size() * 2), "allocate");
      must(dev.copy_to_device(b, host.data(), host.size() * 2), "upload");
      return b;
    };
    Buffer q = upload(hq), k = upload(hk), v = upload(hv), dout = upload(hdo);
    Buffer o = must(dev.allocate(bytes), "allocate"), dq = must(dev.allocate(bytes), "allocate");
    Buffer dk = must(dev.allocate(kv_bytes), "allocate"), dv = must(dev.allocate(kv_bytes), "allocate");
    Buffer lse = must(dev.allocate(rows * 4), "allocate");
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));

    samples::AttnConfig fc = samples::attention_config(d, causal);
    fc.lse = true;
    fc.group = group;
    CompileOptions options;
    options.num_warps = samples::attention_warps(fc);
    Function forward = must(dev.compile(must(samples::attention_kernel(fc), "build"), options), "compile");
    const samples::AttnMaps fmaps = must(samples::attention_maps(dev, fc, q, k, v, o, kHeads, len), "maps");
    const LaunchConfig flc = must(samples::attention_launch(forward, fc, kHeads, len, &stream), "grid");
    must(samples::launch_attention(forward, flc, fmaps, kHeads, len, scale, &lse), "forward");

    // D from the first configuration's pass (its own kernel; every pass
    // computes it again).
    const samples::AttnBwdBuffers io{&q, &k, &v, &o, &lse, &dout, &dq, &dk, &dv};
    std::vector<AttnBwdConfig> tried = configs(d, causal, len, group);
    const samples::AttnBwdKernels first = must(samples::compile_attention_bwd(dev, tried[0]), "compile");
    const samples::AttnBwdPlan first_plan =
        must(samples::plan_attention_bwd(dev, first, io, kHeads, len, scale, &stream), "plan");
    must(samples::launch_attention_bwd(first, first_plan), "backward");
    must(stream.synchronize(), "sync");

    // The reference at sampled rows of heads 0 and the last (computed once
    // for every configuration); the statistics' own error goes to `worst`.
    std::vector<float> all_lse(rows), all_delta(rows);
    must(dev.copy_to_host(all_lse.data(), lse, rows * 4), "download");
    must(dev.copy_to_host(all_delta.data(), first_plan.delta, rows * 4), "download");
    struct Row {
      int64_t at, kv_at;  // its first element in dQ, and in dK and dV
      std::vector<double> dq, dk, dv;
    };
    // Query head hi: its Q, dO and statistics, and its KV head's K and V.
    auto head_of = [&](int64_t hi) {
      Head h{len, d, scale, causal, {}, {}, {}, {}, {}, {}};
      for (auto [bits, at, values] : {std::tuple{&hq, hi, &h.q}, std::tuple{&hk, hi / group, &h.k},
                                      std::tuple{&hv, hi / group, &h.v}, std::tuple{&hdo, hi, &h.dout}}) {
        for (int64_t i = 0; i < len * d; ++i) values->push_back(bf16_to_float((*bits)[at * len * d + i]));
      }
      h.lse2.assign(all_lse.begin() + hi * len, all_lse.begin() + (hi + 1) * len);
      h.delta.assign(all_delta.begin() + hi * len, all_delta.begin() + (hi + 1) * len);
      return h;
    };
    std::vector<Row> sampled;
    double worst = 0;
    for (int64_t hi : {int64_t{0}, kHeads - 1}) {
      std::vector<Head> group_heads;  // a KV head's dK and dV sum its group's shares
      for (int64_t g = 0; g < group; ++g) group_heads.push_back(head_of(hi / group * group + g));
      for (int64_t r : {int64_t{0}, int64_t{1}, len / 3, len / 2 + 7, len - 1}) {
        Row row{(hi * len + r) * d, (hi / group * len + r) * d, dq_row(group_heads[hi % group], r, worst),
                std::vector<double>(d), std::vector<double>(d)};
        for (const Head& h : group_heads) {
          auto [wk, wv] = dkv_row(h, r);
          for (int64_t c = 0; c < d; ++c) row.dk[c] += wk[c], row.dv[c] += wv[c];
        }
        sampled.push_back(std::move(row));
      }
    }

    const double flops = 10.0 * kHeads * len * len * d * (causal ? 0.5 : 1.0);
    double best_ms = INFINITY, default_ms = INFINITY;
    AttnBwdConfig best;
    if (flags.on) tried.resize(1);
    if (!bench::keep_config("attn_bwd_bench", flags, ac.name, tried, label)) return 2;
    for (const AttnBwdConfig& c : tried) {
      absl::StatusOr<samples::AttnBwdKernels> compiled = samples::compile_attention_bwd(dev, c);
      if (absl::IsResourceExhausted(compiled.status())) {
        std::printf("  %-22s skipped: %s\n", label(c).c_str(), std::string(compiled.status().message()).c_str());
        continue;
      }
      const samples::AttnBwdKernels backward = must(std::move(compiled), "compile");
      const samples::AttnBwdPlan plan =
          must(samples::plan_attention_bwd(dev, backward, io, kHeads, len, scale, &stream), "plan");
      const double ms = timer.median_ms([&] { must(samples::launch_attention_bwd(backward, plan), "backward"); });
      must(stream.synchronize(), "sync");
      // The largest error at the sampled rows, relative to the largest
      // reference value.
      std::vector<uint16_t> gq(n), gk(n / group), gv(n / group);
      for (auto [host, grad] : {std::pair{&gq, &dq}, {&gk, &dk}, {&gv, &dv}}) {
        must(dev.copy_to_host(host->data(), *grad, host->size() * 2), "download");
      }
      double err = 0, size = 0;
      auto compare = [&](const std::vector<uint16_t>& grad, int64_t at, const std::vector<double>& want) {
        for (int64_t col = 0; col < d; ++col) {
          const double e = std::abs(bf16_to_float(grad[at + col]) - want[col]);
          err = std::isnan(e) ? INFINITY : std::max(err, e);
          size = std::max(size, std::abs(want[col]));
        }
      };
      for (const Row& r : sampled) {
        compare(gq, r.at, r.dq);
        compare(gk, r.kv_at, r.dk);
        compare(gv, r.kv_at, r.dv);
      }
      worst = std::max(worst, err / size);
      std::printf("  %-22s %.1f us\n", label(c).c_str(), ms * 1e3);
      if (default_ms == INFINITY) default_ms = ms;
      if (ms < best_ms) best_ms = ms, best = c;
    }
    // bf16 gradients from P and dS rounded to bf16 (matmul_cases::gradient_tolerance).
    log.add("attention backward", ac, flops, best_ms, label(best), default_ms, label(tried[0]), worst, 2e-2);
  }
  return log.finish(flags.json);
}
