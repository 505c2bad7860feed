// The CUDA device through tessel's public API: properties, memory, tensor
// maps encoded by the driver, streams, dumps, and the error of every
// driver-facing mistake a user can make.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "base/status.h"
#include "runtime/device.h"
#include "runtime/device_impl.h"
#include "samples/kernels.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/sample_kernels.h"
#include "tests/runtime/temp_dir.h"

namespace tessel::gpu_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

bool driver_present() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib != nullptr) dlclose(lib);
  return lib != nullptr;
}

// The one test that runs where there is no driver (and skips where there is):
// the message a user without a GPU sees, and best() falling back to the host.
TEST(CudaWithoutDriver, OpenSaysThereIsNoDriverAndBestIsTheHost) {
  if (driver_present()) GTEST_SKIP() << "an NVIDIA driver is installed; this checks the machine without one";
  absl::StatusOr<Device> d = Device::open("cuda:0");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(d.status().message(), "cuda:0: no NVIDIA driver (libcuda.so.1 not found)");
  absl::StatusOr<Device> best = Device::best();
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_EQ(best->kind(), DeviceKind::kHost);
}

TEST(CudaDevice, ReportsItsProperties) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  EXPECT_EQ(device.name(), "cuda:0");
  EXPECT_EQ(device.kind(), DeviceKind::kCuda);
  EXPECT_GT(device.num_compute_units(), 0);
  EXPECT_EQ(device.arch(), "sm_90a") << "the GPU machine has H200s";
  std::string description = device.description();
  EXPECT_THAT(description, HasSubstr("cuda:0 ("));
  EXPECT_THAT(description, HasSubstr(std::to_string(device.num_compute_units()) + " SMs"));
  EXPECT_THAT(description, HasSubstr("KiB shared memory per program"));
  std::printf("%s\n", description.c_str());
  absl::StatusOr<Device> best = Device::best();
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_EQ(best->name(), "cuda:0");
  absl::StatusOr<Device> plain = Device::open("cuda");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->name(), "cuda:0");
}

TEST(CudaDevice, CopiesRandomBytesThereAndBack) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  for (int round = 0; round < 8; ++round) {
    // Odd sizes up to 8 MiB, and 1 byte.
    size_t bytes = round == 0 ? 1 : static_cast<size_t>(rng.uniform_int(1, 8 << 20));
    SCOPED_TRACE(bytes);
    std::vector<uint8_t> in(bytes);
    for (uint8_t& b : in) b = static_cast<uint8_t>(rng.uniform_int(0, 255));
    absl::StatusOr<Buffer> buf = upload(device, in);
    ASSERT_TRUE(buf.ok()) << buf.status();
    std::vector<uint8_t> out(bytes, 0xA5);
    ASSERT_TRUE(device.copy_to_host(out.data(), *buf, bytes).ok());
    EXPECT_TRUE(bit_equal(out, in));
  }
}

TEST(CudaDevice, BuffersOutliveTheDeviceHandle) {
  Buffer kept;
  {
    TESSEL_OPEN_CUDA_OR_SKIP(device);
    absl::StatusOr<Buffer> b = device.allocate(4096);
    ASSERT_TRUE(b.ok()) << b.status();
    kept = *b;
  }
  // The buffer holds the context; freeing it now must neither crash nor leak
  // an error. Opening again sees the same GPU.
  kept = Buffer();
  TESSEL_OPEN_CUDA_OR_SKIP(again);
  EXPECT_TRUE(again.allocate(16).ok());
}

// Opening a GPU again after its last handle went finds its primary context
// still there: created anew each time, it cost about 0.8 s per GPU.
TEST(CudaDevice, KeepsThePrimaryContextAfterTheLastHandle) {
  {
    TESSEL_OPEN_CUDA_OR_SKIP(device);
    EXPECT_EQ(device.name(), "cuda:0");
  }
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr);
  using Get = int (*)(int*, int);
  using GetState = int (*)(int, unsigned*, int*);
  auto get = reinterpret_cast<Get>(dlsym(lib, "cuDeviceGet"));
  auto state = reinterpret_cast<GetState>(dlsym(lib, "cuDevicePrimaryCtxGetState"));
  ASSERT_TRUE(get != nullptr && state != nullptr);
  int dev = -1, active = 0;
  unsigned flags = 0;
  ASSERT_EQ(get(&dev, 0), 0);
  ASSERT_EQ(state(dev, &flags, &active), 0);
  EXPECT_EQ(active, 1);
  dlclose(lib);
}

TEST(CudaDevice, ErrorsNameTheProblem) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  absl::StatusOr<Device> none = Device::open("cuda:99");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(none.status().message(), HasSubstr("cuda:99: no such GPU: this machine has"));
  EXPECT_THAT(Device::open("cuda:x").status().message(), HasSubstr("the GPU index must be a number"));
  EXPECT_THAT(Device::open("cuda0").status().message(), HasSubstr("unknown device"));

  absl::StatusOr<Buffer> huge = device.allocate(size_t{1} << 50);
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(huge.status().message(), HasSubstr("cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY"));
}

TEST(CudaDevice, RejectsAnArchTheGpuCannotRun) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  absl::StatusOr<Kernel> k = vector_add_kernel("arch_probe");
  ASSERT_TRUE(k.ok()) << k.status();
  CompileOptions options;
  options.arch = "sm_100a";
  absl::StatusOr<Function> fn = device.compile(*k, options);
  EXPECT_EQ(fn.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(fn.status().message(), HasSubstr("cannot run code compiled for sm_100a"));
  options.arch = "host";
  fn = device.compile(*k, options);
  EXPECT_EQ(fn.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(fn.status().message(), HasSubstr("runs only code compiled for NVIDIA GPUs (sm_90a, ...), not for host"));
}

TEST(CudaTensorMap, BadBoxesGetTheValidationMessage) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  absl::StatusOr<Buffer> buf = device.allocate(size_t{256} * 512 * 2);
  ASSERT_TRUE(buf.ok()) << buf.status();
  absl::StatusOr<TensorMap> too_big = device.tensor_map(bf16, *buf, {256, 512}, {64, 512});
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_big.status().message(), HasSubstr("box[1] = 512 is outside [1, 256]"));
  absl::StatusOr<TensorMap> narrow = device.tensor_map(bf16, *buf, {256, 512}, {64, 4});
  EXPECT_THAT(narrow.status().message(), HasSubstr("box[1] * 2 bytes = 8 bytes is not a multiple of 16"));
  absl::StatusOr<TensorMap> swizzled = device.tensor_map(bf16, *buf, {256, 512}, {64, 40}, Swizzle::k64B);
  EXPECT_THAT(swizzled.status().message(), HasSubstr("80 bytes is not a whole number of them"));
  // A box of whole panels is one the driver takes, panel by panel.
  absl::StatusOr<TensorMap> panels = device.tensor_map(bf16, *buf, {256, 512}, {64, 128}, Swizzle::k64B);
  EXPECT_TRUE(panels.ok()) << panels.status();
}

TEST(CudaTensorMap, TheDriverEncodesValidSpecs) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  absl::StatusOr<Buffer> buf = device.allocate(size_t{1000} * 1496 * 4);
  ASSERT_TRUE(buf.ok()) << buf.status();
  absl::StatusOr<TensorMap> map = device.tensor_map(bf16, *buf, {1000, 1496}, {64, 128});
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->encoding(), TensorMapEncoding::kCuda);
  EXPECT_EQ(map->spec().strides, std::vector<int64_t>{1496 * 2});  // normalised
  absl::StatusOr<TensorMap> host = TensorMap::tiled(bf16, buf->data(), {1000, 1496}, {64, 128});
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_NE(map->bytes(), host->bytes()) << "the driver's form is not tessel's host form";
  // Deterministic, and sensitive to what it encodes.
  absl::StatusOr<TensorMap> again = device.tensor_map(bf16, *buf, {1000, 1496}, {64, 128});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(map->bytes(), again->bytes());
  absl::StatusOr<TensorMap> other = device.tensor_map(bf16, *buf, {1000, 1496}, {64, 64});
  ASSERT_TRUE(other.ok());
  EXPECT_NE(map->bytes(), other->bytes());

  // Through a full spec: rank 3, explicit padded strides, 128B swizzle, NaN fill.
  TensorMapSpec spec;
  spec.dtype = f32;
  spec.address = buf->data();
  spec.dims = {3, 100, 200};
  spec.strides = {100 * 256 * 4, 256 * 4};
  spec.box = {1, 16, 32};
  spec.swizzle = Swizzle::k128B;
  spec.oob_fill = TensorMapOobFill::kNan;
  absl::StatusOr<TensorMap> full = device.impl().encode_tensor_map(spec);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->encoding(), TensorMapEncoding::kCuda);
  EXPECT_EQ(full->spec().element_strides, (std::vector<int64_t>{1, 1, 1}));
}

// A new thread has no current CUDA context (an autotuner's prepares make their
// maps on such threads): the device encodes in its own, to the same bytes.
TEST(CudaTensorMap, ThreadsWithoutAContextEncodeMaps) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  absl::StatusOr<Buffer> buf = device.allocate(size_t{1000} * 1496 * 2);
  ASSERT_TRUE(buf.ok()) << buf.status();
  TensorMapSpec spec;
  spec.dtype = bf16;
  spec.address = buf->data();
  spec.dims = {1000, 1496};
  spec.box = {64, 128};
  spec.swizzle = Swizzle::k128B;
  std::optional<absl::StatusOr<TensorMap>> there;
  std::thread([&] { there = device.impl().encode_tensor_map(spec); }).join();
  ASSERT_TRUE(there->ok()) << there->status();
  absl::StatusOr<TensorMap> here = device.impl().encode_tensor_map(spec);
  ASSERT_TRUE(here.ok()) << here.status();
  EXPECT_EQ(here->bytes(), (*there)->bytes());
}

// SMs times the driver's occupancy: a small kernel fits many programs on
// an SM, the GEMM with its shared-memory ring one.
TEST(CudaLaunch, PersistentGridIsSmsTimesOccupancy) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  const int sms = device.num_compute_units();
  absl::StatusOr<Function> add = device.compile(*vector_add_kernel());
  ASSERT_TRUE(add.ok()) << add.status();
  absl::StatusOr<int> grid = add->persistent_grid();
  ASSERT_TRUE(grid.ok()) << grid.status();
  EXPECT_EQ(*grid % sms, 0);
  EXPECT_GE(*grid / sms, 2);
  EXPECT_LE(*grid / sms, 16);  // 2048 threads an SM, 128 a program
  CompileOptions options;
  options.num_warps = samples::kMatmulWarps;
  absl::StatusOr<Function> gemm = device.compile(*samples::gemm_kernel(samples::kMatmul), options);
  ASSERT_TRUE(gemm.ok()) << gemm.status();
  ASSERT_GT(gemm->shared_bytes(), 116 << 10);  // more than half an SM's shared memory
  EXPECT_EQ(*gemm->persistent_grid(), sms);
}

TEST(CudaLaunch, MisuseIsReportedBeforeTheDriverSeesIt) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  absl::StatusOr<Kernel> k = vector_add_kernel();
  ASSERT_TRUE(k.ok()) << k.status();
  absl::StatusOr<Function> fn = device.compile(*k);
  ASSERT_TRUE(fn.ok()) << fn.status();
  absl::StatusOr<Buffer> buf = device.allocate(4096);
  ASSERT_TRUE(buf.ok());
  absl::Status s = fn->launch({.grid = 1, .num_warps = 8}, *buf, *buf, *buf, 16);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("launch 'vector_add' on cuda:0: the launch asks for 8 warps (256 threads)"));
  EXPECT_THAT(s.message(), HasSubstr("compiled for 4 warps (128 threads)"));

  s = fn->launch({.grid = {1, 70000}}, *buf, *buf, *buf, 16);
  EXPECT_THAT(s.message(), HasSubstr("exceeds 65535 programs along axis 1 or 2"));

  // A host-encoded map handed to a CUDA kernel.
  absl::StatusOr<Kernel> copy = tile_copy_kernel();
  ASSERT_TRUE(copy.ok()) << copy.status();
  absl::StatusOr<Function> copy_fn = device.compile(*copy);
  ASSERT_TRUE(copy_fn.ok()) << copy_fn.status();
  absl::StatusOr<TensorMap> host_map = TensorMap::tiled(bf16, buf->data(), {8, 128}, {kCopyBM, kCopyBN});
  ASSERT_TRUE(host_map.ok()) << host_map.status();
  s = copy_fn->launch({}, *host_map, *host_map, 8, 128);
  EXPECT_THAT(s.message(), HasSubstr("encoded for another kind of device"));

  // A stream of another kind of device.
  absl::StatusOr<Device> host = Device::open("host:1");
  ASSERT_TRUE(host.ok());
  absl::StatusOr<Stream> host_stream = host->create_stream();
  ASSERT_TRUE(host_stream.ok());
  s = fn->launch({.grid = 1, .stream = &*host_stream}, *buf, *buf, *buf, 16);
  EXPECT_THAT(s.message(), HasSubstr("launch 'vector_add' on cuda:0: the stream belongs to a device of another kind"));
  EXPECT_TRUE(device.synchronize().ok());
}

TEST(CudaStream, LaunchesOnStreamsRunInOrder) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  absl::StatusOr<Kernel> k = vector_add_kernel();
  ASSERT_TRUE(k.ok()) << k.status();
  absl::StatusOr<Function> add = device.compile(*k);
  ASSERT_TRUE(add.ok()) << add.status();
  const int n = rng.uniform_int(1, 300000);
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) x[i] = rng.uniform(-1, 1), y[i] = rng.uniform(-1, 1);
  absl::StatusOr<Buffer> bx = upload(device, x), by = upload(device, y);
  absl::StatusOr<Buffer> b1 = device.allocate(n * 4), b2 = device.allocate(n * 4);
  ASSERT_TRUE(bx.ok() && by.ok() && b1.ok() && b2.ok());
  ASSERT_TRUE(poison(device, *b1, n, NAN).ok());
  ASSERT_TRUE(poison(device, *b2, n, NAN).ok());
  absl::StatusOr<Stream> s1 = device.create_stream(), s2 = device.create_stream();
  ASSERT_TRUE(s1.ok() && s2.ok()) << s1.status() << s2.status();
  EXPECT_NE(s1->native(), nullptr);
  EXPECT_NE(s1->native(), s2->native());
  const int grid = (n + kAddBlock - 1) / kAddBlock;
  // s1: b1 = x + y, then b1 = b1 + y (ordered on s1); s2: b2 = x + x.
  ASSERT_TRUE(add->launch({.grid = grid, .stream = &*s1}, *bx, *by, *b1, n).ok());
  ASSERT_TRUE(add->launch({.grid = grid, .stream = &*s2}, *bx, *bx, *b2, n).ok());
  ASSERT_TRUE(add->launch({.grid = grid, .stream = &*s1}, *b1, *by, *b1, n).ok());
  ASSERT_TRUE(s1->synchronize().ok());
  ASSERT_TRUE(s2->synchronize().ok());
  std::vector<float> want1(n), want2(n);
  for (int i = 0; i < n; ++i) want1[i] = (x[i] + y[i]) + y[i], want2[i] = x[i] + x[i];
  absl::StatusOr<std::vector<float>> got1 = download<float>(device, *b1, n);
  absl::StatusOr<std::vector<float>> got2 = download<float>(device, *b2, n);
  ASSERT_TRUE(got1.ok() && got2.ok());
  EXPECT_TRUE(bit_equal(*got1, want1));
  EXPECT_TRUE(bit_equal(*got2, want2));

  EXPECT_THAT(Stream().synchronize().message(), HasSubstr("the Stream is empty"));
  EXPECT_THAT(s1->end_capture().status().message(), HasSubstr("the stream is not capturing"));
}

// Device::time counts the device's time on the work queued inside it,
// from the end of the work queued before it: a small launch queued behind
// a long run of large ones takes microseconds, though the call waits for
// all of them. A stream of another device, and the work's own error, are
// reported.
TEST(CudaDevice, TimeStartsWhereTheWorkBeforeItEnds) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  absl::StatusOr<Kernel> acc_kernel = accumulate_kernel(), add_kernel = vector_add_kernel();
  ASSERT_TRUE(acc_kernel.ok() && add_kernel.ok());
  absl::StatusOr<Function> acc = device.compile(*acc_kernel), add = device.compile(*add_kernel);
  ASSERT_TRUE(acc.ok() && add.ok()) << acc.status() << add.status();
  const int n = 64 << 20, small = 4096;
  absl::StatusOr<Buffer> x = device.allocate(size_t{4} * n), y = device.allocate(size_t{4} * n);
  absl::StatusOr<Buffer> a = device.allocate(4 * small), b = device.allocate(4 * small);
  ASSERT_TRUE(x.ok() && y.ok() && a.ok() && b.ok());
  auto large = [&] { return acc->launch({.grid = n / kAddBlock}, *x, *y, n); };
  auto busy = [&] {
    for (int i = 0; i < 20; ++i) TESSEL_RETURN_IF_ERROR(large());
    return absl::OkStatus();
  };
  auto little = [&] { return add->launch({.grid = small / kAddBlock}, *a, *a, *b, small); };
  // The first launches compile the variants for aligned pointers.
  ASSERT_TRUE(large().ok() && little().ok() && device.synchronize().ok());
  absl::StatusOr<double> one = device.time(large), twenty = device.time(busy);
  ASSERT_TRUE(one.ok() && twenty.ok()) << one.status() << twenty.status();
  EXPECT_GT(*twenty, 10 * *one);
  ASSERT_TRUE(busy().ok());
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<double> behind = device.time(little);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(behind.ok()) << behind.status();
  EXPECT_GT(waited, *twenty / 2);  // the large launches were still running
  EXPECT_LT(*behind, *twenty / 20);
  EXPECT_GT(*behind, 0);
  // On a stream of this device; not on one of another.
  absl::StatusOr<Stream> stream = device.create_stream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  absl::StatusOr<double> on_stream =
      device.time([&] { return add->launch({.grid = small / kAddBlock, .stream = &*stream}, *a, *a, *b, small); },
                  &*stream);
  ASSERT_TRUE(on_stream.ok()) << on_stream.status();
  absl::StatusOr<Device> host = Device::open("host:1");
  ASSERT_TRUE(host.ok()) << host.status();
  absl::StatusOr<Stream> host_stream = host->create_stream();
  ASSERT_TRUE(host_stream.ok()) << host_stream.status();
  EXPECT_THAT(device.time(little, &*host_stream).status().message(),
              HasSubstr(": time: the stream belongs to a device of another kind"));
  EXPECT_THAT(device.time([] { return absl::DataLossError("the work broke"); }).status().message(),
              HasSubstr("the work broke"));
}

// vector_add's `fn` on n elements: 2 + 1 each, the sums downloaded.
absl::StatusOr<std::vector<float>> add_twos_and_ones(const Device& device, const Function& fn, int n) {
  TESSEL_ASSIGN_OR_RETURN(Buffer dx, upload(device, std::vector<float>(n, 2.0f)));
  TESSEL_ASSIGN_OR_RETURN(Buffer dy, upload(device, std::vector<float>(n, 1.0f)));
  TESSEL_ASSIGN_OR_RETURN(Buffer dz, device.allocate(n * sizeof(float)));
  TESSEL_RETURN_IF_ERROR(fn.launch({.grid = (n + samples::kAddBlock - 1) / samples::kAddBlock}, dx, dy, dz, n));
  TESSEL_RETURN_IF_ERROR(device.synchronize());
  return download<float>(device, dz, n);
}

// Threads compiling different kernels at once (as the autotuner's prepares
// do) each get a loaded function that computes the right thing.
TEST(CudaCompile, ThreadsCompileAndLoadAtOnce) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  constexpr int kThreads = 8, n = 1 << 16;
  std::vector<absl::StatusOr<std::vector<float>>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      got[t] = [&]() -> absl::StatusOr<std::vector<float>> {
        TESSEL_ASSIGN_OR_RETURN(Kernel k, samples::vector_add_kernel("threads_add_" + std::to_string(t)));
        TESSEL_ASSIGN_OR_RETURN(Function fn, device.compile(k));
        return add_twos_and_ones(device, fn, n);
      }();
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_TRUE(got[t].ok()) << t << ": " << got[t].status();
    if (got[t].ok()) {
      EXPECT_EQ(*got[t], std::vector<float>(n, 3.0f)) << t;
    }
  }
}

// The driver's cubin is cached beside the kernel's PTX: a later compile that
// misses the in-memory cache (a new process, as a second disk cache object
// stands for here) finds both on disk, compiles nothing and runs the kernel.
TEST(CudaCompile, ALaterCompileLoadsTheCachedCubin) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  TempDir dir("tessel_cubin_cache_");
  auto first = std::make_shared<DiskCache>(DiskCacheConfig{.dir = dir.str()});
  auto second = std::make_shared<DiskCache>(DiskCacheConfig{.dir = dir.str()});
  absl::StatusOr<Kernel> k = samples::vector_add_kernel("cubin_cached_add");
  ASSERT_TRUE(k.ok()) << k.status();
  device.impl().set_disk_cache(first);
  absl::StatusOr<std::shared_ptr<FunctionImpl>> uncached = device.impl().compile_uncached(*k, CompileOptions{});
  ASSERT_TRUE(uncached.ok()) << uncached.status();
  EXPECT_EQ(first->stats().writes, 2);  // the PTX and the cubin
  auto entries = [&](const char* space) -> int64_t {
    namespace fs = std::filesystem;
    if (!fs::exists(dir.path() / space)) return 0;
    return std::distance(fs::directory_iterator(dir.path() / space), fs::directory_iterator());
  };
  EXPECT_EQ(entries("kernels"), 1);
  EXPECT_EQ(entries("cubins"), 1);
  // A warp-specialized kernel (setmaxnreg) loads as a whole program, whose
  // cubin the driver keeps to itself.
  absl::StatusOr<Kernel> ws = samples::gemm_kernel(
      {.bm = 128, .bn = 128, .out = bf16, .stages = 4, .warp_specialize = true});
  ASSERT_TRUE(ws.ok()) << ws.status();
  CompileOptions twelve;
  twelve.num_warps = 12;
  absl::StatusOr<std::shared_ptr<FunctionImpl>> whole = device.impl().compile_uncached(*ws, twelve);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(entries("kernels"), 2);
  EXPECT_EQ(entries("cubins"), 1);
  // So does a kernel whose wgmma the linker's compile serialized, and the
  // cache remembers that it does. The stream-K GEMM's 64-bit divisions call
  // a routine of ptxas's in relocatable code; whether the driver's JIT then
  // serializes its wgmma (and says so) depends on the driver, so either
  // outcome holds, but only one.
  absl::StatusOr<Kernel> sk = samples::gemm_kernel({.bm = 128, .bn = 256, .out = bf16, .stages = 3, .stream_k = true});
  ASSERT_TRUE(sk.ok()) << sk.status();
  CompileOptions eight;
  eight.num_warps = 8;
  absl::StatusOr<std::shared_ptr<FunctionImpl>> stream_k = device.impl().compile_uncached(*sk, eight);
  ASSERT_TRUE(stream_k.ok()) << stream_k.status();
  const bool serialized = entries("whole-programs") == 1;
  SCOPED_TRACE(serialized ? "the link serialized the stream-K GEMM's wgmma" : "the stream-K GEMM linked as is");
  EXPECT_EQ(entries("kernels"), 3);
  EXPECT_EQ(entries("cubins"), serialized ? 1 : 2);
  EXPECT_EQ(entries("whole-programs"), serialized ? 1 : 0);

  device.impl().set_disk_cache(second);
  absl::StatusOr<Function> fn = device.compile(*k);
  ASSERT_TRUE(fn.ok()) << fn.status();
  EXPECT_EQ(second->stats().hits, 2);
  EXPECT_EQ(second->stats().misses, 0);  // a kernel with a cubin has no marker to look for
  EXPECT_EQ(second->stats().writes, 0);
  absl::StatusOr<Function> stream_k_again = device.compile(*sk, eight);
  ASSERT_TRUE(stream_k_again.ok()) << stream_k_again.status();
  // Its PTX, and its cubin or that it loads whole (after a miss for the cubin).
  EXPECT_EQ(second->stats().hits, 4);
  EXPECT_EQ(second->stats().misses, serialized ? 1 : 0);
  EXPECT_EQ(second->stats().writes, 0);
  absl::StatusOr<std::vector<float>> sums = add_twos_and_ones(device, *fn, 4096);
  ASSERT_TRUE(sums.ok()) << sums.status();
  EXPECT_EQ(*sums, std::vector<float>(4096, 3.0f));
  device.impl().set_disk_cache(nullptr);  // the environment's again
}

TEST(CudaCompile, DumpsEveryStageForTheGpu) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("tessel_dump_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                               "_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  KernelBuilder k("dump_probe");
  Value src = k.tensor_map(bf16, {kCopyBM, kCopyBN}, "src");
  Value dst = k.tensor_map(bf16, {kCopyBM, kCopyBN}, "dst");
  tma_store(dst, {0, 0}, tma_load(src, {0, 0}));
  absl::StatusOr<Kernel> kernel = k.build();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  CompileOptions options;
  options.dump_dir = dir.string();
  options.dump_stages = "ir,llvm,ptx";
  absl::StatusOr<Function> fn = device.compile(*kernel, options);
  ASSERT_TRUE(fn.ok()) << fn.status();
  auto read = [&](const std::string& file) {
    std::ifstream in(dir / file);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  EXPECT_THAT(read("dump_probe.sm_90a.tessel"), HasSubstr("dump_probe"));
  EXPECT_THAT(read("dump_probe.sm_90a.ll"), HasSubstr("nvptx64-nvidia-cuda"));
  std::string ptx = read("dump_probe.sm_90a.ptx");
  EXPECT_THAT(ptx, HasSubstr(".entry"));
  // By-value descriptors (docs/tma.md): a param the TMA reads in place.
  EXPECT_THAT(ptx, HasSubstr(".param .align 64 .b8"));
  EXPECT_THAT(ptx, Not(HasSubstr("__local_depot")));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessel::gpu_test
