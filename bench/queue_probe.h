// How much work one CUDA stream takes behind a closed gate before the call
// that enqueues more blocks: the most copies a triggered plan may arm on one
// queue before arming itself would wait for a gate that no kernel can open
// yet. The gate is a word of pinned host memory, so opening it needs no
// driver call (which could queue behind the same full stream).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "cuda_raw.h"

namespace bench {

// Copies of 256 bytes (`rows` of them in one 2-D copy when rows > 1) enqueued
// on a stream waiting on a closed gate, until enqueueing stalls for half a
// second or `limit` copies are queued; returns how many went in.
inline int64_t queue_capacity(CudaRaw& cu, CUcontext ctx, int rows, int64_t limit) {
  cu.check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  void* host = nullptr;
  cu.check(cu.cuMemHostAlloc(&host, 8, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP), "cuMemHostAlloc");
  auto* gate = static_cast<volatile uint64_t*>(host);
  *gate = 0;
  CUdeviceptr gate_dev = 0, buf = 0;
  cu.check(cu.cuMemHostGetDevicePointer(&gate_dev, host, 0), "cuMemHostGetDevicePointer");
  cu.check(cu.cuMemAlloc(&buf, 2 * 256 * rows), "cuMemAlloc");
  CUstream s = nullptr;
  cu.check(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  cu.check(cu.cuStreamWaitValue64(s, gate_dev, 1, CU_STREAM_WAIT_VALUE_GEQ), "wait gate");
  std::atomic<int64_t> queued{0};
  std::atomic<bool> stop{false};
  std::thread feeder([&] {
    cu.check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    CUDA_MEMCPY2D m{};
    m.srcMemoryType = m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    m.srcDevice = buf;
    m.dstDevice = buf + 256 * rows;
    m.srcPitch = m.dstPitch = 256;
    m.WidthInBytes = 256;
    m.Height = rows;
    while (!stop.load() && queued.load() < limit) {
      if (rows == 1) {
        cu.check(cu.cuMemcpyAsync(m.dstDevice, m.srcDevice, 256, s), "cuMemcpyAsync");
      } else {
        cu.check(cu.cuMemcpy2DAsync(&m, s), "cuMemcpy2DAsync");
      }
      queued.fetch_add(1);
    }
  });
  int64_t last = -1;
  for (int still = 0; still < 5 && queued.load() < limit;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    int64_t now = queued.load();
    still = now == last ? still + 1 : 0;
    last = now;
  }
  const int64_t taken = queued.load();
  stop.store(true);
  *gate = 1;  // the stream drains, and a blocked enqueue returns
  feeder.join();
  cu.check(cu.cuStreamSynchronize(s), "cuStreamSynchronize");
  return taken;
}

}  // namespace bench
