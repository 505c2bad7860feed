// Specialization on the host: which facts a launch's arguments give, and
// that every variant computes the same as a plain loop — with pointers off
// 16-byte alignment by an element, bounds not divisible by 16, each subset
// of the facts compiled directly, and launches racing for new variants.
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "codegen/compiler.h"
#include "dsl/ops.h"
#include "gtest/gtest.h"
#include "runtime/device.h"

namespace tessel {
namespace {

constexpr int kBlock = 256;
constexpr uint64_t kX = 1, kY = 2, kZ = 4, kN = 8;

// z = x + y over n elements of `d`, in blocks of kBlock, masked past n.
Kernel add_kernel(DType d) {
  KernelBuilder k("add");
  Value x = k.arg(ptr(d), "x"), y = k.arg(ptr(d), "y"), z = k.arg(ptr(d), "z"), n = k.arg(i32, "n");
  Value offs = k.program_id() * kBlock + k.arange(0, kBlock);  // [kBlock] i32
  Value mask = offs < n;                                        // [kBlock] i1
  store(z + offs, load(x + offs, mask, 0) + load(y + offs, mask, 0), mask);
  return *k.build();
}

int grid(int n) { return (n + kBlock - 1) / kBlock; }

TEST(KernelArg, MultipleOf16LooksAtTheLowBits) {
  alignas(16) float data[8];
  EXPECT_TRUE(KernelArg(&data[0]).multiple_of_16());
  EXPECT_FALSE(KernelArg(&data[1]).multiple_of_16());
  EXPECT_TRUE(KernelArg(&data[4]).multiple_of_16());
  EXPECT_TRUE(KernelArg(int32_t{4096}).multiple_of_16());
  EXPECT_TRUE(KernelArg(int32_t{0}).multiple_of_16());
  EXPECT_TRUE(KernelArg(int32_t{-32}).multiple_of_16());
  EXPECT_FALSE(KernelArg(int32_t{-17}).multiple_of_16());
  EXPECT_FALSE(KernelArg(int64_t{(int64_t{1} << 40) + 8}).multiple_of_16());
  EXPECT_TRUE(KernelArg(uint8_t{48}).multiple_of_16());
}

TEST(Specialization, FollowsTheArgumentsAndWhatTheKernelCanUse) {
  Device d = *Device::open("host:2");
  Function fn = *d.compile(add_kernel(f32));
  alignas(16) float x[64], y[64], z[64];
  EXPECT_EQ(fn.specialization(x, y, z, 64).multiple_of_16, kX | kY | kZ | kN);
  EXPECT_EQ(fn.specialization(x + 1, y, z, 64).multiple_of_16, kY | kZ | kN);
  EXPECT_EQ(fn.specialization(x, y + 2, z + 4, 63).multiple_of_16, kX | kZ);
  // A kernel whose only tile access is scattered has nothing to specialize on.
  KernelBuilder k("gather");
  Value px = k.arg(ptr(f32), "x"), pidx = k.arg(ptr(i32), "idx"), n = k.arg(i32, "n");
  Value offs = k.arange(0, 64);
  store(px + load(pidx + offs, offs < n, 0), 1.0f);
  Function gather = *d.compile(*k.build());
  EXPECT_EQ(gather.specialization(x, reinterpret_cast<int32_t*>(y), 64).multiple_of_16, kY | 4);
}

// Launches fn on n elements at the given element offsets into fresh
// buffers with guards, and checks z = x + y exactly, guards untouched.
template <class T>
void check_add(const Function& fn, int n, int off_x, int off_y, int off_z, std::mt19937& gen) {
  constexpr int kGuard = 37;
  std::uniform_int_distribution<int> dist(-1000, 1000);
  std::vector<T> x(n + 2 * kGuard), y(n + 2 * kGuard), z(n + 2 * kGuard, T(-7));
  for (T& v : x) v = static_cast<T>(dist(gen));
  for (T& v : y) v = static_cast<T>(dist(gen));
  // std::vector's storage is 16-byte aligned; kGuard + off elements in.
  T* px = x.data() + kGuard + off_x - (kGuard % 4);
  T* py = y.data() + kGuard + off_y - (kGuard % 4);
  T* pz = z.data() + kGuard + off_z - (kGuard % 4);
  ASSERT_TRUE(fn.launch({.grid = grid(n)}, px, py, pz, n).ok());
  for (T* p = z.data(); p < z.data() + z.size(); ++p) {
    int64_t i = p - pz;
    T want = i >= 0 && i < n ? static_cast<T>(px[i] + py[i]) : T(-7);
    ASSERT_EQ(*p, want) << "element " << i << " of " << n << " at offsets " << off_x << ", " << off_y << ", "
                        << off_z;
  }
}

TEST(Specialization, EveryAlignmentAndBoundComputesTheSame) {
  Device d = *Device::open("host:4");
  Function f32_add = *d.compile(add_kernel(f32));
  Function f64_add = *d.compile(add_kernel(f64));
  Function i32_add = *d.compile(add_kernel(i32));
  std::mt19937 gen(std::random_device{}());
  for (int n : {16, 1000, 4096, 4099, 777, 64 * kBlock}) {
    for (int off : {0, 1, 2, 3}) {
      check_add<float>(f32_add, n, off, 0, 0, gen);
      check_add<float>(f32_add, n, 0, 0, off, gen);
      check_add<double>(f64_add, n, off, off, 0, gen);
      check_add<int32_t>(i32_add, n, 0, off, off, gen);
    }
  }
}

TEST(Specialization, EachSubsetOfTrueFactsCompilesToTheSameResults) {
  Kernel kernel = add_kernel(f32);
  const int n = 4096;
  std::vector<float> x(n), y(n);  // malloc aligns to 16 bytes
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(i) * 0.5f, y[i] = static_cast<float>(n - i);
  for (uint64_t facts = 0; facts < 16; ++facts) {
    CompileOptions options;
    options.specialization.multiple_of_16 = facts;
    absl::StatusOr<DeviceCode> object = compile(kernel, options);
    ASSERT_TRUE(object.ok()) << object.status();
    absl::StatusOr<std::unique_ptr<HostCode>> code = load_host_code(*object, {});
    ASSERT_TRUE(code.ok()) << code.status();
    std::vector<float> z(n, -1.0f);
    float *px = x.data(), *py = y.data(), *pz = z.data();
    int32_t count = n;
    void* args[] = {&px, &py, &pz, &count};
    std::vector<std::byte> arena((*code)->shared_bytes() + 128);
    for (int p = 0; p < grid(n); ++p) {
      HostProgram program{{p, 0, 0}, {grid(n), 1, 1}, arena.data(), nullptr};
      (*code)->entry()(args, &program);
    }
    for (int i = 0; i < n; ++i) ASSERT_EQ(z[i], x[i] + y[i]) << "facts " << facts << ", element " << i;
  }
}

TEST(Specialization, LaunchesRacingForNewVariantsAllComputeTheSame) {
  Device d = *Device::open("host:2");
  Function fn = *d.compile(add_kernel(f32));
  std::vector<std::thread> threads;
  std::vector<int> failures(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 gen(t);
      for (int rep = 0; rep < 4; ++rep) {
        int n = t % 2 == 0 ? 1024 : 1000;
        std::vector<float> x(n + 8), y(n + 8), z(n + 8, 0.0f);
        for (int i = 0; i < n + 8; ++i) x[i] = static_cast<float>(gen() % 100), y[i] = static_cast<float>(gen() % 100);
        int off = (t / 2) % 4;
        if (!fn.launch({.grid = grid(n)}, x.data() + off, y.data(), z.data() + off, n).ok()) ++failures[t];
        for (int i = 0; i < n; ++i) failures[t] += z[off + i] != x[off + i] + y[i];
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace tessel
