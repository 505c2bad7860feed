// CUDA graphs: tessel launches captured on a stream and replayed, including
// kernels that take tensor maps by value (the reason they must be by value:
// a by-reference descriptor would need a copy the capture cannot see).
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/device.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/sample_kernels.h"

namespace tessel::gpu_test {
namespace {

using ::testing::HasSubstr;

TEST(CudaGraph, ReplaysAHundredCapturedLaunches) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  absl::StatusOr<Kernel> k = accumulate_kernel();
  ASSERT_TRUE(k.ok()) << k.status();
  absl::StatusOr<Function> acc = device.compile(*k);
  ASSERT_TRUE(acc.ok()) << acc.status();

  const int n = rng.uniform_int(1, 100000);
  std::vector<int32_t> x(n), y0(n);
  for (int i = 0; i < n; ++i) x[i] = rng.uniform_int(-1000, 1000), y0[i] = rng.uniform_int(-100000, 100000);
  absl::StatusOr<Buffer> bx = upload(device, x), by = upload(device, y0);
  ASSERT_TRUE(bx.ok() && by.ok());
  absl::StatusOr<Stream> stream = device.create_stream();
  ASSERT_TRUE(stream.ok()) << stream.status();

  ASSERT_TRUE(stream->begin_capture().ok());
  EXPECT_EQ(TestDriver::capture_status(stream->native()), TestDriver::kCaptureActive);
  EXPECT_THAT(stream->begin_capture().message(), HasSubstr("already capturing"));
  const int grid = (n + kAddBlock - 1) / kAddBlock;
  constexpr int kLaunches = 100;
  for (int i = 0; i < kLaunches; ++i) {
    absl::Status s = acc->launch({.grid = grid, .stream = &*stream}, *bx, *by, n);
    ASSERT_TRUE(s.ok()) << "launch " << i << ": " << s;
  }
  absl::StatusOr<Graph> graph = stream->end_capture();
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(TestDriver::capture_status(stream->native()), TestDriver::kCaptureNone);

  // Captured, not run: y is untouched until the graph is launched.
  ASSERT_TRUE(device.synchronize().ok());
  absl::StatusOr<std::vector<int32_t>> got = download<int32_t>(device, *by, n);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(bit_equal(*got, y0)) << "the capture ran launches";

  auto want_after = [&](int replays) {
    std::vector<int32_t> want(n);
    for (int i = 0; i < n; ++i) want[i] = y0[i] + replays * kLaunches * x[i];
    return want;
  };
  ASSERT_TRUE(graph->launch(&*stream).ok());
  ASSERT_TRUE(stream->synchronize().ok());
  got = download<int32_t>(device, *by, n);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(bit_equal(*got, want_after(1)));

  // Replays again, on the default stream too, with the captured arguments.
  ASSERT_TRUE(graph->launch(&*stream).ok());
  ASSERT_TRUE(stream->synchronize().ok());
  ASSERT_TRUE(graph->launch().ok());
  ASSERT_TRUE(device.synchronize().ok());
  got = download<int32_t>(device, *by, n);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(bit_equal(*got, want_after(3)));
}

TEST(CudaGraph, CapturesTensorMapsByValue) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  absl::StatusOr<Kernel> k = tile_copy_kernel();
  ASSERT_TRUE(k.ok()) << k.status();
  absl::StatusOr<Function> copy = device.compile(*k);
  ASSERT_TRUE(copy.ok()) << copy.status();
  const int m = rng.uniform_int(1, 700), n = 8 * rng.uniform_int(1, 150);  // rows 16-byte aligned
  std::vector<uint16_t> src(static_cast<size_t>(m) * n);
  for (uint16_t& v : src) v = float_to_bf16(rng.uniform(-4, 4));
  absl::StatusOr<Buffer> bsrc = upload(device, src);
  absl::StatusOr<Buffer> bdst = device.allocate(src.size() * 2);
  ASSERT_TRUE(bsrc.ok() && bdst.ok());
  ASSERT_TRUE(poison<uint16_t>(device, *bdst, src.size(), 0xFFFF).ok());
  absl::StatusOr<Stream> stream = device.create_stream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  absl::StatusOr<Graph> graph;
  {
    // The maps die before the replay: the graph holds copies of their bytes.
    absl::StatusOr<TensorMap> ms = device.tensor_map(bf16, *bsrc, {m, n}, {kCopyBM, kCopyBN});
    absl::StatusOr<TensorMap> md = device.tensor_map(bf16, *bdst, {m, n}, {kCopyBM, kCopyBN});
    ASSERT_TRUE(ms.ok() && md.ok()) << ms.status() << md.status();
    ASSERT_TRUE(stream->begin_capture().ok());
    ASSERT_TRUE(copy->launch({.grid = device.num_compute_units(), .stream = &*stream}, *ms, *md, m, n).ok());
    graph = stream->end_capture();
    ASSERT_TRUE(graph.ok()) << graph.status();
  }
  ASSERT_TRUE(graph->launch(&*stream).ok());
  ASSERT_TRUE(stream->synchronize().ok());
  absl::StatusOr<std::vector<uint16_t>> got = download<uint16_t>(device, *bdst, src.size());
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(bit_equal(*got, src)) << m << "x" << n;
}

TEST(CudaGraph, TheHostHasNoGraphs) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  EXPECT_EQ(device.kind(), DeviceKind::kCuda);
  absl::StatusOr<Device> host = Device::open("host:1");
  ASSERT_TRUE(host.ok());
  absl::StatusOr<Stream> stream = host->create_stream();
  ASSERT_TRUE(stream.ok());
  EXPECT_EQ(stream->native(), nullptr);
  EXPECT_TRUE(stream->synchronize().ok());
  absl::Status s = stream->begin_capture();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("capture needs a CUDA device"));
}

}  // namespace
}  // namespace tessel::gpu_test
