// Host-target tile kernels against plain C++ loops (built -O2) on one and
// two threads. Prints a table of time ratios (tessel / C++) at the end.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <thread>

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

Kernel softmax_kernel() {
  KernelBuilder k("bench_softmax");
  Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(f32), "y");
  Value row = k.program_id();
  Value offs = row * kCols + k.arange(0, kCols);  // [kCols] i32
  Value v = load(x + offs);
  Value e = exp(v - max(v, 0));
  store(y + offs, e / sum(e, 0));
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

void BM_softmax_tessel(benchmark::State& state) {
  Device d = must(Device::open("host:" + std::to_string(state.range(0))));
  Function fn = must(d.compile(softmax_kernel()));
  std::vector<float> x = random_floats(size_t{kRows} * kCols, 3), y(x.size());
  for (auto _ : state) {
    absl::Status s = fn.launch({.grid = kRows}, x.data(), y.data());
    benchmark::DoNotOptimize(y.data());
  }
}

void BM_softmax_cpp(benchmark::State& state) {
  std::vector<float> x = random_floats(size_t{kRows} * kCols, 3), y(x.size());
  for (auto _ : state) {
    parallel(state.range(0), kRows, [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        const float* in = &x[r * kCols];
        float* out = &y[r * kCols];
        float m = -INFINITY, s = 0;
        for (int j = 0; j < kCols; ++j) m = std::max(m, in[j]);
        for (int j = 0; j < kCols; ++j) s += out[j] = std::exp(in[j] - m);
        for (int j = 0; j < kCols; ++j) out[j] /= s;
      }
    });
    benchmark::DoNotOptimize(y.data());
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
BENCHMARK(BM_softmax_tessel)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_softmax_cpp)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
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
    std::printf("\n%-10s %-8s %14s %14s %10s\n", "kernel", "threads", "tessel ms", "C++ -O2 ms", "ratio");
    for (const char* kernel : {"add", "softmax", "matmul"}) {
      for (int threads : {1, 2}) {
        std::string suffix = "/" + std::to_string(threads) + "/real_time";
        auto t = times_.find(std::string("BM_") + kernel + "_tessel" + suffix);
        auto c = times_.find(std::string("BM_") + kernel + "_cpp" + suffix);
        if (t == times_.end() || c == times_.end()) continue;
        std::printf("%-10s %-8d %14.3f %14.3f %9.2fx\n", kernel, threads, t->second, c->second, t->second / c->second);
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
