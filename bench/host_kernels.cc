// Host-target tile kernels against plain C++ loops (built -O2) on one and
// two threads: vector add, a tiled matmul, and the samples' row kernels
// (softmax, layer norm, RMS norm over 4096 x 1024 f32) and sums along
// either axis of the same matrix, whose loops are also built at -O3
// -march=native (host_loops.h). Prints a table of time
// ratios (tessel / C++) at the end.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <thread>

#define HOST_LOOPS_NS o2
#include "host_loops.h"
#include "samples/kernels.h"
#include "tessel/tessel.h"

using namespace tessel;

namespace {

constexpr int kAddN = 1 << 24;
constexpr int kRows = 4096, kCols = 1024;
constexpr int kMM = 512;
constexpr int kBlock = 4096;
constexpr int kBM = 64, kBN = 64, kBK = 32;

template <class T>
T must(absl::StatusOr<T> v) {
  if (!v.ok()) {
    std::fprintf(stderr, "%s\n", std::string(v.status().message()).c_str());
    std::abort();
  }
  return *std::move(v);
}

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

// Runs f(begin, end) over [0, n) split across `threads` threads.
template <class F>
void parallel(int threads, int64_t n, F f) {
  if (threads == 1) return f(int64_t{0}, n);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(f, n * t / threads, n * (t + 1) / threads);
  for (auto& th : pool) th.join();
}

Kernel add_kernel() {
  KernelBuilder k("bench_add");
  Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(f32), "y"), z = k.arg(ptr(f32), "z");
  Value offs = k.program_id() * kBlock + k.arange(0, kBlock);  // [kBlock] i32
  store(z + offs, load(x + offs) + load(y + offs));
  return must(k.build());
}

Kernel matmul_kernel() {
  KernelBuilder k("bench_matmul");
  Value a = k.tensor_map(f32, {kBM, kBK}, "a"), b = k.tensor_map(f32, {kBK, kBN}, "b");
  Value c = k.tensor_map(f32, {kBM, kBN}, "c");
  Value tiles_n = k.constant(kMM / kBN, i32);
  k.for_each_tile((kMM / kBM) * tiles_n, [&](Value t) {
    Value row = t / tiles_n * kBM, col = t % tiles_n * kBN;
    Var acc = k.var(k.zeros({kBM, kBN}, f32));
    k.for_range(0, kMM, kBK, [&](Value kk) { acc = dot(tma_load(a, {row, kk}), tma_load(b, {kk, col}), acc); });
    tma_store(c, {row, col}, acc);
  });
  return must(k.build());
}

void BM_add_tessel(benchmark::State& state) {
  Device d = must(Device::open("host:" + std::to_string(state.range(0))));
  Function fn = must(d.compile(add_kernel()));
  std::vector<float> x = random_floats(kAddN, 1), y = random_floats(kAddN, 2), z(kAddN);
  for (auto _ : state) {
    absl::Status s = fn.launch({.grid = kAddN / kBlock}, x.data(), y.data(), z.data());
    benchmark::DoNotOptimize(z.data());
  }
}

void BM_add_cpp(benchmark::State& state) {
  std::vector<float> x = random_floats(kAddN, 1), y = random_floats(kAddN, 2), z(kAddN);
  for (auto _ : state) {
    parallel(state.range(0), kAddN, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) z[i] = x[i] + y[i];
    });
    benchmark::DoNotOptimize(z.data());
  }
}

// The row kernels' inputs: x [kRows, kCols], weights near 1, biases near 0.
struct RowInputs {
  std::vector<float> x = random_floats(size_t{kRows} * kCols, 3), y = std::vector<float>(x.size());
  std::vector<float> w = random_floats(kCols, 6), b = random_floats(kCols, 7);
  RowInputs() {
    for (float& v : w) v = 1 + v / 8;
  }
};

// Args: the op (samples::RowOp), threads.
void BM_rows_tessel(benchmark::State& state) {
  const auto op = static_cast<samples::RowOp>(state.range(0));
  Device d = must(Device::open("host:" + std::to_string(state.range(1))));
  const samples::RowBlock block = samples::row_block(kCols);
  Function fn = must(d.compile(must(samples::row_kernel(op, block, f32))));
  RowInputs in;
  const LaunchConfig lc = {.grid = kRows / block.rows};
  for (auto _ : state) {
    absl::Status s = samples::launch_row_kernel(fn, lc, op, in.x.data(), in.y.data(), in.w.data(), in.b.data(), kRows,
                                                kCols);
    benchmark::DoNotOptimize(in.y.data());
  }
  state.SetLabel(samples::row_op_name(op));
}

// The same in plain C++ at -O2 (state.range(2) == 0) or -O3 -march=native.
void BM_rows_cpp(benchmark::State& state) {
  const int op = static_cast<int>(state.range(0));
  RowInputs in;
  for (auto _ : state) {
    parallel(state.range(1), kRows, [&](int64_t lo, int64_t hi) {
      if (state.range(2) == 0) {
        bench::o2::rows(op, in.x.data(), in.y.data(), in.w.data(), in.b.data(), lo, hi, kCols, samples::kNormEps);
      } else {
        bench::native_rows(op, in.x.data(), in.y.data(), in.w.data(), in.b.data(), lo, hi, kCols, samples::kNormEps);
      }
    });
    benchmark::DoNotOptimize(in.y.data());
  }
}

// The samples' matrix_reduce_kernel summing along axis state.range(0) of the
// row kernels' x on state.range(1) threads: rows in blocks of 4, columns in
// blocks of 128 over the rows 32 at a time.
samples::RowBlock sums_block(int axis) {
  return axis == 1 ? samples::row_block(kCols) : samples::RowBlock{.rows = 32, .cols = 128};
}

void BM_sums_tessel(benchmark::State& state) {
  const int axis = static_cast<int>(state.range(0));
  Device d = must(Device::open("host:" + std::to_string(state.range(1))));
  const samples::RowBlock block = sums_block(axis);
  Function fn = must(d.compile(must(samples::matrix_reduce_kernel(axis, samples::Reduction::kSum, block))));
  RowInputs in;
  const LaunchConfig lc = {.grid = axis == 1 ? kRows / block.rows : kCols / block.cols};
  for (auto _ : state) {
    absl::Status s = fn.launch(lc, in.x.data(), in.y.data(), kRows, kCols);
    benchmark::DoNotOptimize(in.y.data());
  }
}

// The same in plain C++ at -O2 (state.range(2) == 0) or -O3 -march=native.
void BM_sums_cpp(benchmark::State& state) {
  const int axis = static_cast<int>(state.range(0));
  RowInputs in;
  for (auto _ : state) {
    parallel(state.range(1), axis == 1 ? kRows : kCols, [&](int64_t lo, int64_t hi) {
      if (state.range(2) == 0) {
        bench::o2::sums(axis, in.x.data(), in.y.data(), lo, hi, kRows, kCols);
      } else {
        bench::native_sums(axis, in.x.data(), in.y.data(), lo, hi, kRows, kCols);
      }
    });
    benchmark::DoNotOptimize(in.y.data());
  }
}

void BM_matmul_tessel(benchmark::State& state) {
  Device d = must(Device::open("host:" + std::to_string(state.range(0))));
  Function fn = must(d.compile(matmul_kernel()));
  std::vector<float> a = random_floats(kMM * kMM, 4), b = random_floats(kMM * kMM, 5), c(kMM * kMM);
  TensorMap ma = must(TensorMap::tiled(f32, a.data(), {kMM, kMM}, {kBM, kBK}));
  TensorMap mb = must(TensorMap::tiled(f32, b.data(), {kMM, kMM}, {kBK, kBN}));
  TensorMap mc = must(TensorMap::tiled(f32, c.data(), {kMM, kMM}, {kBM, kBN}));
  for (auto _ : state) {
    absl::Status s = fn.launch({.grid = d.num_compute_units()}, ma, mb, mc);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * kMM * kMM * kMM, benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}

void BM_matmul_cpp(benchmark::State& state) {
  std::vector<float> a = random_floats(kMM * kMM, 4), b = random_floats(kMM * kMM, 5), c(kMM * kMM);
  for (auto _ : state) {
    parallel(state.range(0), kMM, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        float* ci = &c[i * kMM];
        for (int j = 0; j < kMM; ++j) ci[j] = 0;
        for (int p = 0; p < kMM; ++p) {
          float av = a[i * kMM + p];
          const float* bp = &b[p * kMM];
          for (int j = 0; j < kMM; ++j) ci[j] += av * bp[j];
        }
      }
    });
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * kMM * kMM * kMM, benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}

BENCHMARK(BM_add_tessel)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_add_cpp)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_rows_tessel)->ArgsProduct({{0, 1, 2}, {1, 2}})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_rows_cpp)->ArgsProduct({{0, 1, 2}, {1, 2}, {0, 1}})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_sums_tessel)->ArgsProduct({{1, 0}, {1, 2}})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_sums_cpp)->ArgsProduct({{1, 0}, {1, 2}, {0, 1}})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_matmul_tessel)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_matmul_cpp)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// Keeps each run's real time so that the ratios can be printed at the end.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.run_type == Run::RT_Iteration) times_[r.benchmark_name()] = r.GetAdjustedRealTime();
    }
    ConsoleReporter::ReportRuns(runs);
  }
  void print_ratios() const {
    std::printf("\n%-11s %-8s %11s %12s %7s %22s %7s\n", "kernel", "threads", "tessel ms", "C++ -O2 ms", "ratio",
                "C++ -O3 -march=native", "ratio");
    auto time = [&](const std::string& name) {
      auto it = times_.find(name + "/real_time");
      return it == times_.end() ? -1.0 : it->second;
    };
    auto row = [&](const char* kernel, int threads, double t, double o2, double native) {
      if (t < 0 || o2 < 0) return;
      std::printf("%-11s %-8d %11.3f %12.3f %6.2fx", kernel, threads, t, o2, t / o2);
      if (native > 0) std::printf(" %22.3f %6.2fx", native, t / native);
      std::printf("\n");
    };
    for (const char* kernel : {"add", "matmul"}) {
      for (int threads : {1, 2}) {
        const std::string suffix = "/" + std::to_string(threads);
        row(kernel, threads, time(std::string("BM_") + kernel + "_tessel" + suffix),
            time(std::string("BM_") + kernel + "_cpp" + suffix), -1);
      }
    }
    for (int op = 0; op < 3; ++op) {
      for (int threads : {1, 2}) {
        const std::string args = "/" + std::to_string(op) + "/" + std::to_string(threads);
        row(samples::row_op_name(static_cast<samples::RowOp>(op)), threads, time("BM_rows_tessel" + args),
            time("BM_rows_cpp" + args + "/0"), time("BM_rows_cpp" + args + "/1"));
      }
    }
    for (int axis : {1, 0}) {
      for (int threads : {1, 2}) {
        const std::string args = "/" + std::to_string(axis) + "/" + std::to_string(threads);
        row(axis == 1 ? "row sums" : "col sums", threads, time("BM_sums_tessel" + args),
            time("BM_sums_cpp" + args + "/0"), time("BM_sums_cpp" + args + "/1"));
      }
    }
  }

 private:
  std::map<std::string, double> times_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_ratios();
  return 0;
}
