// tessel's row kernels (samples/kernels.h: softmax, layer norm, RMS norm,
// prefix sums, linear recurrences, sorts) on an NVIDIA GPU at the shapes DESIGN.md's memory-bound
// targets name, 16384 x 1024 and 4096 x 8192 in f32 and bf16, against a
// device-to-device copy of the same matrix in the same run. GB/s count what
// each kernel must move: the matrix read once and written once, plus its
// weight and bias rows. Each kernel runs at the block samples::row_block
// picks and at the other blocks of 1 to 8 rows and 2 to 16 warps that give
// each thread 8 to 64 elements (those whose tiles fit in shared memory);
// the fastest is reported beside the pick.
// Timed as Triton's do_bench times (bench::FlushedTimer). Results are
// checked against a double reference on a sample of rows. The baselines
// (torch eager, torch.compile, Triton) come from bench/norm_compare.py,
// which reads the JSON this writes (--json=PATH) and prints the ratios.
// Then rotary embeddings (samples::rope_kernel) on queries of 4096 tokens
// of 32 heads of 128 and 16384 tokens of 16 heads of 64, per-token
// quantization (samples::quantize_rows_kernel) to i8 and e4m3, and per
// 1 x 128 group (quantize_groups_kernel) to e4m3. Last, a
// mixture-of-experts router (samples::router_top_k_kernel: softmax,
// argsort and gather) at 16384 tokens of 64, 128 and 256 experts, and the
// token permutation after it (samples::MoeAlign).
// With --only=TEXT it runs the cases whose name ("softmax, 4096x8192 bf16")
// contains TEXT; with --pick, at row_block's pick alone (for profilers).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "base/float16.h"
#include "cuda_raw.h"
#include "report.h"
#include "samples/kernels.h"
#include "samples/moe.h"
#include "tessel/tessel.h"

using namespace tessel;
using bench::must;

namespace {

using samples::RowOp;

std::string label(const samples::RowBlock& b) {
  return std::to_string(b.rows) + "x" + std::to_string(b.cols) + " w" + std::to_string(b.warps);
}

// The blocks tried for rows of `cols`: row_block's pick first.
std::vector<samples::RowBlock> blocks(int cols) {
  samples::RowBlock pick = samples::row_block(cols);
  std::vector<samples::RowBlock> out = {pick};
  for (int rows = 1; rows <= 8; rows *= 2) {
    for (int warps = 2; warps <= 16; warps *= 2) {
      const int per_thread = rows * pick.cols / (32 * warps);
      samples::RowBlock b{.rows = rows, .cols = pick.cols, .warps = warps};
      if (per_thread >= 8 && per_thread <= 64 && label(b) != label(pick)) out.push_back(b);
    }
  }
  return out;
}

// The host's copy of `n` elements of dtype `d` as floats, and the device's bits.
std::vector<float> to_float(const std::vector<uint16_t>& bits) {
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = bf16_to_float(bits[i]);
  return out;
}

// `n` elements of dtype `d` (f32 or bf16) from the device, as floats.
std::vector<float> download(const Device& dev, const Buffer& src, DType d, size_t n) {
  if (d == f32) {
    std::vector<float> got(n);
    must(dev.copy_to_host(got.data(), src, n * 4), "download");
    return got;
  }
  std::vector<uint16_t> bits(n);
  must(dev.copy_to_host(bits.data(), src, n * 2), "download");
  return to_float(bits);
}

// Random values of `d` (rounded to it), uploaded; returns what the device holds, as floats.
std::vector<float> upload(const Device& dev, const Buffer& dst, DType d, size_t n, float mean, float stddev,
                          std::mt19937& gen) {
  std::normal_distribution<float> normal(mean, stddev);
  std::vector<float> values(n);
  for (float& v : values) v = normal(gen);
  if (d == f32) {
    must(dev.copy_to_device(dst, values.data(), n * 4), "upload");
    return values;
  }
  std::vector<uint16_t> bits(n);
  for (size_t i = 0; i < n; ++i) bits[i] = float_to_bf16(values[i]);
  must(dev.copy_to_device(dst, bits.data(), n * 2), "upload");
  return to_float(bits);
}

// A row kernel's fastest block and time, and row_block's pick and its time.
struct Timed {
  double best_ms, pick_ms;
  samples::RowBlock best, pick;
};

}  // namespace

int main(int argc, char** argv) {
  bench::Flags flags;  // --pick: row_block's pick alone
  if (!bench::parse_flags("norm_bench", "pick", argc, argv, flags)) return 2;
  const std::string &json_path = flags.json, &only = flags.only;
  const bool pick_only = flags.on;
  bench::CudaRaw cu;
  std::optional<Device> opened = bench::open_cuda("norm_bench", cu);
  if (!opened.has_value()) return 0;
  Device dev = *opened;
  std::printf("norm_bench on %s\n", dev.description().c_str());
  Stream stream = must(dev.create_stream(), "stream");
  CUstream raw_stream = static_cast<CUstream>(stream.native());
  bench::FlushedTimer timer(cu, raw_stream);
  std::mt19937 gen(1);
  std::string json = "{\n  \"device\": \"" + dev.description() + "\",\n  \"cases\": [";
  bool first_case = true;
  int failures = 0;
  // The GB/s of a device-to-device copy of `bytes` from x to y (each byte read and written).
  auto copy_speed = [&](const Buffer& x, const Buffer& y, size_t bytes) {
    const double ms = timer.median_ms([&] {
      cu.check(cu.cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(y.data()), reinterpret_cast<CUdeviceptr>(x.data()),
                                    bytes, raw_stream),
               "copy");
    });
    return 2.0 * bytes / (ms * 1e6);
  };
  // A row kernel's result: printed, and a case in the JSON.
  auto record = [&](const std::string& case_name, const char* op, DType d, int rows, int cols, const Timed& t,
                    double moved, double copy_gbs, double worst, bool ok) {
    failures += ok ? 0 : 1;
    const double gbs = moved / (t.best_ms * 1e6);
    char note[160];
    std::snprintf(note, sizeof note, "%.2f us, %.3f x copy; block %s (row_block's %s: %.2f us); error %.1e%s",
                  t.best_ms * 1e3, gbs / copy_gbs, label(t.best).c_str(), label(t.pick).c_str(), t.pick_ms * 1e3, worst,
                  ok ? "" : " FAILED");
    bench::report(case_name, gbs, "GB/s", note);
    char entry[512];
    std::snprintf(entry, sizeof entry,
                  "%s\n    {\"op\": \"%s\", \"dtype\": \"%s\", \"rows\": %d, \"cols\": %d, \"us\": %.3f, "
                  "\"pick_us\": %.3f, \"block\": \"%s\", \"bytes\": %.0f, \"gb_per_s\": %.1f, "
                  "\"copy_gb_per_s\": %.1f, \"max_error\": %.3g, \"ok\": %s}",
                  first_case ? "" : ",", op, std::string(d.name()).c_str(), rows, cols, t.best_ms * 1e3,
                  t.pick_ms * 1e3, label(t.best).c_str(), moved, gbs, copy_gbs, worst, ok ? "true" : "false");
    json += entry;
    first_case = false;
  };
  for (auto [rows, cols] : {std::pair{16384, 1024}, std::pair{4096, 8192}}) {
    for (DType d : {f32, bf16}) {
      const size_t n = size_t{static_cast<size_t>(rows)} * cols, elem = d.bytes(), bytes = n * elem;
      Buffer x = must(dev.allocate(bytes), "allocate"), y = must(dev.allocate(bytes), "allocate");
      Buffer w = must(dev.allocate(cols * elem), "allocate"), b = must(dev.allocate(cols * elem), "allocate");
      std::vector<float> hx = upload(dev, x, d, n, 0, 1, gen);
      std::vector<float> hw = upload(dev, w, d, cols, 1, 0.1f, gen), hb = upload(dev, b, d, cols, 0, 0.1f, gen);
      const double copy_gbs = copy_speed(x, y, bytes);
      const std::string shape = std::to_string(rows) + "x" + std::to_string(cols) + " " + std::string(d.name());
      bench::report("device-to-device copy, " + shape, copy_gbs, "GB/s");
      for (RowOp op :
           {RowOp::kSoftmax, RowOp::kLayerNorm, RowOp::kRmsNorm, RowOp::kCumsum, RowOp::kRecurrence, RowOp::kSort}) {
        const std::string case_name = std::string(samples::row_op_name(op)) + ", " + shape;
        if (case_name.find(only) == std::string::npos) continue;
        const int weights = op == RowOp::kLayerNorm ? 2 : op == RowOp::kRmsNorm || op == RowOp::kRecurrence ? 1 : 0;
        const double moved = 2.0 * bytes + weights * cols * elem;
        // The largest error over a sample of rows of y, relative where |want| > 1.
        auto check = [&] {
          must(stream.synchronize(), "sync");
          const std::vector<float> got = download(dev, y, d, n);
          double worst = 0;
          for (int64_t r = 0; r < rows; r += rows / 64) {
            std::vector<double> want = samples::row_reference(op, hx.data() + r * cols, hw.data(), hb.data(), cols);
            for (int64_t j = 0; j < cols; ++j) {
              worst = std::max(worst, std::fabs(got[r * cols + j] - want[j]) / std::max(1.0, std::fabs(want[j])));
            }
          }
          return worst;
        };
        double best_ms = INFINITY, pick_ms = INFINITY, worst = 0;
        samples::RowBlock best;
        std::vector<samples::RowBlock> tried = blocks(cols);
        if (pick_only) tried.resize(1);
        for (const samples::RowBlock& block : tried) {
          CompileOptions options;
          options.num_warps = block.warps;
          absl::StatusOr<Function> compiled = dev.compile(must(samples::row_kernel(op, block, d), "build"), options);
          // A block whose tile does not fit in shared memory is passed over; row_block's pick must fit.
          if (absl::IsResourceExhausted(compiled.status()) && &block != &tried.front()) continue;
          Function fn = must(std::move(compiled), "compile");
          const LaunchConfig lc = {
              .grid = (rows + block.rows - 1) / block.rows, .num_warps = block.warps, .stream = &stream};
          must(dev.synchronize(), "sync");
          cu.check(cu.cuMemsetD8(reinterpret_cast<CUdeviceptr>(y.data()), 0xFF, bytes), "clear y");
          const double ms =
              timer.median_ms([&] { must(samples::launch_row_kernel(fn, lc, op, x, y, w, b, rows, cols), "launch"); });
          worst = std::max(worst, check());
          if (pick_ms == INFINITY) pick_ms = ms;
          if (ms < best_ms) best_ms = ms, best = block;
        }
        // Prefix sums and recurrences carry the f32 error of `cols` steps.
        const bool scan = op == RowOp::kCumsum || op == RowOp::kRecurrence;
        const bool ok = worst <= (d == f32 ? (scan ? 1e-6 * cols : 1e-4) : 2e-2);
        record(case_name, samples::row_op_name(op), d, rows, cols, {best_ms, pick_ms, best, samples::row_block(cols)},
               moved, copy_gbs, worst, ok);
      }
    }
  }
  // Rotary embeddings: x [tokens * heads, dim] and its cos and sin tables
  // [tokens, dim], at row_block's pick and the other blocks of 1 to 64 rows
  // and 1 to 16 warps that give each thread 8 to 64 elements. Moved: x
  // read, y written, both tables read. Checked on a sample of rows.
  for (auto [tokens, heads, dim] : {std::tuple{4096, 32, 128}, std::tuple{16384, 16, 64}}) {
    for (DType d : {f32, bf16}) {
      const int rows = tokens * heads;
      const std::string case_name = "rope, " + std::to_string(tokens) + "x" + std::to_string(heads) + "x" +
                                    std::to_string(dim) + " " + std::string(d.name());
      if (case_name.find(only) == std::string::npos) continue;
      const size_t n = size_t{1} * rows * dim, table = size_t{1} * tokens * dim, elem = d.bytes();
      Buffer x = must(dev.allocate(n * elem), "allocate"), y = must(dev.allocate(n * elem), "allocate");
      Buffer cos = must(dev.allocate(table * elem), "allocate"), sin = must(dev.allocate(table * elem), "allocate");
      std::vector<float> hx = upload(dev, x, d, n, 0, 1, gen);
      std::vector<float> hc = upload(dev, cos, d, table, 0, 0.7f, gen), hs = upload(dev, sin, d, table, 0, 0.7f, gen);
      const double copy_gbs = copy_speed(x, y, n * elem), moved = (2.0 * n + 2.0 * table) * elem;
      std::vector<samples::RowBlock> tried = {samples::row_block(dim)};
      for (int block_rows = 1; block_rows <= 64 && !pick_only; block_rows *= 2) {
        for (int warps = 1; warps <= 16; warps *= 2) {
          const int per_thread = block_rows * dim / (32 * warps);
          samples::RowBlock b{.rows = block_rows, .cols = dim, .warps = warps};
          if (per_thread >= 8 && per_thread <= 64 && label(b) != label(tried[0])) tried.push_back(b);
        }
      }
      double best_ms = INFINITY, pick_ms = INFINITY, worst = 0;
      samples::RowBlock best;
      for (const samples::RowBlock& block : tried) {
        CompileOptions options;
        options.num_warps = block.warps;
        Function fn = must(dev.compile(must(samples::rope_kernel(block, d), "build"), options), "compile");
        const LaunchConfig lc = {
            .grid = (rows + block.rows - 1) / block.rows, .num_warps = block.warps, .stream = &stream};
        must(dev.synchronize(), "sync");
        cu.check(cu.cuMemsetD8(reinterpret_cast<CUdeviceptr>(y.data()), 0xFF, n * elem), "clear y");
        const double ms = timer.median_ms([&] { must(fn.launch(lc, x, y, cos, sin, rows, heads), "launch"); });
        must(stream.synchronize(), "sync");
        const std::vector<float> got = download(dev, y, d, n);
        for (int r = 0; r < rows; r += rows / 64) {
          const size_t t = r / heads;
          std::vector<double> want =
              samples::rope_reference(hx.data() + size_t{1} * r * dim, hc.data() + t * dim, hs.data() + t * dim, dim);
          for (int j = 0; j < dim; ++j) {
            worst =
                std::max(worst, std::fabs(got[size_t{1} * r * dim + j] - want[j]) / std::max(1.0, std::fabs(want[j])));
          }
        }
        if (pick_ms == INFINITY) pick_ms = ms;
        if (ms < best_ms) best_ms = ms, best = block;
      }
      const bool ok = worst <= (d == f32 ? 1e-5 : 1.0 / 256);
      record(case_name, "rope", d, rows, dim, {best_ms, pick_ms, best, tried[0]}, moved, copy_gbs, worst, ok);
    }
  }
  // Per-token quantization (samples::quantize_rows_kernel) to i8 and e4m3 at
  // the norms' shapes, at the row kernels' blocks, and per 1 x 128 group
  // (quantize_groups_kernel) to e4m3, at blocks of 8 to 64 groups. Moved: x
  // read, q and the scales written. Checked on a sample of rows against
  // samples::quantize_row_reference.
  for (auto [rows, cols] : {std::pair{16384, 1024}, std::pair{4096, 8192}}) {
    for (DType d : {f32, bf16}) {
      for (auto [to, group] : {std::pair{i8, 0}, {f8e4m3, 0}, {f8e4m3, 128}}) {
        const std::string op = (group > 0 ? "quantize_groups_" : "quantize_") + std::string(to.name());
        const std::string case_name =
            op + ", " + std::to_string(rows) + "x" + std::to_string(cols) + " " + std::string(d.name());
        if (case_name.find(only) == std::string::npos) continue;
        const size_t n = size_t{1} * rows * cols, elem = d.bytes();
        Buffer x = must(dev.allocate(n * elem), "allocate"), y = must(dev.allocate(n * elem), "allocate");
        // A scale a row, or a group: [cols / group, rows].
        const int per_row = group > 0 ? cols / group : 1, scale_count = rows * per_row;
        Buffer q = must(dev.allocate(n), "allocate"), s = must(dev.allocate(scale_count * 4), "allocate");
        const std::vector<float> hx = upload(dev, x, d, n, 0, 1, gen);
        const double copy_gbs = copy_speed(x, y, n * elem), moved = n * elem + n + scale_count * 4.0;
        std::vector<samples::RowBlock> tried = blocks(cols);
        if (group > 0) {
          tried.clear();
          for (int groups = 8; groups <= 64; groups *= 2) {
            for (int warps = 1; warps <= 4; warps *= 2)
              tried.push_back({.rows = groups, .cols = group, .warps = warps});
          }
        }
        if (pick_only) tried.resize(1);
        double best_ms = INFINITY, pick_ms = INFINITY, wrong = 0;
        samples::RowBlock best;
        for (const samples::RowBlock& block : tried) {
          CompileOptions options;
          options.num_warps = block.warps;
          Function fn = must(dev.compile(must(group > 0 ? samples::quantize_groups_kernel(block, d, to)
                                                        : samples::quantize_rows_kernel(block, d, to),
                                              "build"),
                                         options),
                             "compile");
          const LaunchConfig lc = {
              .grid = (scale_count + block.rows - 1) / block.rows, .num_warps = block.warps, .stream = &stream};
          must(dev.synchronize(), "sync");
          const double ms = timer.median_ms([&] { must(fn.launch(lc, x, q, s, rows, cols), "launch"); });
          must(stream.synchronize(), "sync");
          std::vector<uint8_t> got(n);
          std::vector<float> scales(scale_count);
          must(dev.copy_to_host(got.data(), q, n), "download");
          must(dev.copy_to_host(scales.data(), s, scale_count * 4), "download");
          std::vector<uint8_t> want(cols);
          const int width = cols / per_row;
          for (int r = 0; r < rows; r += rows / 64) {
            for (int g = 0; g < per_row; ++g) {
              const size_t at = size_t{1} * r * cols + g * width;
              wrong += scales[g * rows + r] != samples::quantize_row_reference(&hx[at], width, to, want.data());
              for (int j = 0; j < width; ++j) wrong += got[at + j] != want[j];
            }
          }
          if (pick_ms == INFINITY) pick_ms = ms;
          if (ms < best_ms) best_ms = ms, best = block;
        }
        record(case_name, op.c_str(), d, rows, cols, {best_ms, pick_ms, best, tried[0]}, moved, copy_gbs, wrong,
               wrong == 0);
      }
    }
  }
  // A mixture-of-experts router: 16384 tokens' top 8 of 64 to 256 experts,
  // with their softmax weights; each block of 1 to 32 tokens and 1 to 8
  // warps that gives a thread 2 to 64 logits, the fastest reported. Moved:
  // the logits read, the weights and ids written.
  constexpr int kTokens = 16384, kTop = 8;
  for (int experts : {64, 128, 256}) {
    for (DType d : {f32, bf16}) {
      const std::string case_name =
          "router_top_k, " + std::to_string(kTokens) + "x" + std::to_string(experts) + " " + std::string(d.name());
      if (case_name.find(only) == std::string::npos) continue;
      const size_t n = size_t{kTokens} * experts, bytes = n * d.bytes(), out = size_t{kTokens} * kTop;
      Buffer x = must(dev.allocate(bytes), "allocate");
      Buffer weights = must(dev.allocate(out * 4), "allocate"), ids = must(dev.allocate(out * 4), "allocate");
      std::vector<float> hx = upload(dev, x, d, n, 0, 1, gen);
      double best_ms = INFINITY, worst = 0;
      std::string best;
      int wrong_ids = 0;
      for (int block_rows = 1; block_rows <= 32; block_rows *= 2) {
        for (int warps = 1; warps <= 8; warps *= 2) {
          const int per_thread = block_rows * experts / (32 * warps);
          if (per_thread < 2 || per_thread > 64) continue;
          CompileOptions options;
          options.num_warps = warps;
          absl::StatusOr<Function> compiled =
              dev.compile(must(samples::router_top_k_kernel(block_rows, experts, kTop, d), "build"), options);
          if (absl::IsResourceExhausted(compiled.status())) continue;
          Function fn = must(std::move(compiled), "compile");
          const LaunchConfig lc = {
              .grid = (kTokens + block_rows - 1) / block_rows, .num_warps = warps, .stream = &stream};
          const double ms = timer.median_ms([&] { must(fn.launch(lc, x, weights, ids, kTokens), "launch"); });
          must(stream.synchronize(), "sync");
          std::vector<float> got_w(out);
          std::vector<int32_t> got_i(out);
          must(dev.copy_to_host(got_w.data(), weights, out * 4), "download");
          must(dev.copy_to_host(got_i.data(), ids, out * 4), "download");
          for (int t = 0; t < kTokens; t += kTokens / 64) {
            const samples::RouterPick want =
                samples::router_reference(hx.data() + size_t{1} * t * experts, experts, kTop);
            for (int i = 0; i < kTop; ++i) {
              wrong_ids += got_i[t * kTop + i] != want.ids[i] ? 1 : 0;
              worst = std::max(worst, std::fabs(got_w[t * kTop + i] - want.weights[i]));
            }
          }
          if (ms < best_ms)
            best_ms = ms,
            best = std::to_string(block_rows) + "x" + std::to_string(experts) + " w" + std::to_string(warps);
        }
      }
      const bool ok = wrong_ids == 0 && worst <= 1e-5;
      failures += ok ? 0 : 1;
      const double moved = static_cast<double>(bytes) + out * 8.0, gbs = moved / (best_ms * 1e6);
      char note[160];
      std::snprintf(note, sizeof note, "%.2f us; block %s; %d ids wrong, weight error %.1e%s", best_ms * 1e3,
                    best.c_str(), wrong_ids, worst, ok ? "" : " FAILED");
      bench::report(case_name, gbs, "GB/s", note);
      char entry[512];
      std::snprintf(entry, sizeof entry,
                    "%s\n    {\"op\": \"router_top_k\", \"dtype\": \"%s\", \"rows\": %d, \"cols\": %d, \"us\": %.3f, "
                    "\"block\": \"%s\", \"bytes\": %.0f, \"gb_per_s\": %.1f, \"ok\": %s}",
                    first_case ? "" : ",", std::string(d.name()).c_str(), kTokens, experts, best_ms * 1e3, best.c_str(),
                    moved, gbs, ok ? "true" : "false");
      json += entry;
      first_case = false;
    }
  }
  // An MoE layer's token permutation (samples::MoeAlign: three kernels,
  // one program per chunk of choices): the router's 8 choices for each of
  // 16384 tokens grouped by expert and padded to blocks of 64, at chunks of
  // 256 to 4096 choices and 2 to 16 warps (1 to 32 choices a thread), the
  // fastest reported. Choices are skewed (a quarter of
  // them spread over every expert, the rest over the first eight), as a
  // router's hot experts make them. Checked whole against the host's
  // grouping. Moved: the choices read, the padded order, the blocks'
  // experts, the offsets and the choices' positions written.
  constexpr int kBlock = 64, kMinChunk = 256;
  for (int experts : {64, 128, 256}) {
    const std::string case_name = "moe_align, " + std::to_string(kTokens) + "x" + std::to_string(kTop) + " of " +
                                  std::to_string(experts) + " experts";
    if (case_name.find(only) == std::string::npos) continue;
    const int n = kTokens * kTop;
    std::vector<int32_t> hids(n);
    std::uniform_int_distribution<int> any(0, experts - 1), hot(0, 7), spread(0, 3);
    for (int32_t& v : hids) v = spread(gen) == 0 ? any(gen) : hot(gen);
    Buffer ids = must(dev.allocate(n * 4), "allocate");
    must(dev.copy_to_device(ids, hids.data(), n * 4), "upload");
    const samples::MoeAlignment want = samples::moe_align_reference(hids, experts, kBlock);
    double best_ms = INFINITY;
    std::string best;
    int wrong = 0;
    for (int chunk = kMinChunk; chunk <= 4096; chunk *= 2) {
      for (int warps = 2; warps <= 16; warps *= 2) {
        if (chunk < 32 * warps || chunk > 32 * 32 * warps) continue;  // 1 to 32 choices a thread
        absl::StatusOr<samples::MoeAlign> compiled = samples::MoeAlign::compile(dev, experts, kBlock, chunk, warps);
        if (absl::IsResourceExhausted(compiled.status())) continue;
        const samples::MoeAlign align = must(std::move(compiled), "compile");
        const samples::MoeAlignBuffers out = must(align.buffers(dev, n), "allocate");
        const double ms = timer.median_ms([&] { must(align.launch(ids, n, out, &stream), "launch"); });
        must(stream.synchronize(), "sync");
        const size_t total = want.sorted.size();
        std::vector<int32_t> got_sorted(total), got_blocks(total / kBlock), got_offsets(experts + 1), got_positions(n);
        must(dev.copy_to_host(got_sorted.data(), out.sorted, total * 4), "download");
        must(dev.copy_to_host(got_blocks.data(), out.block_experts, total / kBlock * 4), "download");
        must(dev.copy_to_host(got_offsets.data(), out.offsets, (experts + 1) * 4), "download");
        must(dev.copy_to_host(got_positions.data(), out.positions, n * 4), "download");
        wrong += got_sorted != want.sorted || got_blocks != want.block_experts || got_offsets != want.offsets ||
                 got_positions != want.positions;
        if (ms < best_ms) best_ms = ms, best = "chunk " + std::to_string(chunk) + " w" + std::to_string(warps);
      }
    }
    const bool ok = wrong == 0;
    failures += ok ? 0 : 1;
    const double moved = 4.0 * (2 * n + want.sorted.size() + want.block_experts.size() + want.offsets.size());
    const double gbs = moved / (best_ms * 1e6);
    char note[160];
    std::snprintf(note, sizeof note, "%.2f us; %s; %d configurations wrong%s", best_ms * 1e3, best.c_str(), wrong,
                  ok ? "" : " FAILED");
    bench::report(case_name, gbs, "GB/s", note);
    char entry[512];
    std::snprintf(entry, sizeof entry,
                  "%s\n    {\"op\": \"moe_align\", \"dtype\": \"i32\", \"rows\": %d, \"cols\": %d, \"us\": %.3f, "
                  "\"block\": \"%s\", \"bytes\": %.0f, \"gb_per_s\": %.1f, \"ok\": %s}",
                  first_case ? "" : ",", kTokens, experts, best_ms * 1e3, best.c_str(), moved, gbs,
                  ok ? "true" : "false");
    json += entry;
    first_case = false;
  }
  json += "\n  ]\n}\n";
  if (!json_path.empty()) std::ofstream(json_path) << json;
  if (failures > 0) std::printf("norm_bench: %d results outside their tolerance\n", failures);
  return failures > 0 ? 1 : 0;
}
