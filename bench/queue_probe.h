// How much work one CUDA stream takes behind a closed gate before the call
// that enqueues more blocks: the most commands a triggered plan may arm on
// one stream before arming itself would wait for a gate that no kernel can
// open yet (tessel's kQueueCapacity). And what each enqueueing call costs
// the host, which is what arming an epoch costs. The gate is a word of pinned host
// memory, so opening it needs no driver call (which could queue behind the
// same full stream).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "cuda_raw.h"

namespace bench {

// The kinds of command a plan's chains enqueue.
enum class Command {
  kCopy,
  kCopy2D,
  kRecord,
  kWaitEvent,
  kWrite,
  kWrite8,
  kWait,
  kPeerCopy,
  kPeerCopyDtoD,
  kPeerCopyPeer,
  kPendingWait,
  kPendingWaitCopy
};

inline const char* command_name(Command c) {
  switch (c) {
    case Command::kCopy: return "linear copies";
    case Command::kCopy2D: return "2-D copies of 16 rows";
    case Command::kRecord: return "event records";
    case Command::kWaitEvent: return "event waits";
    case Command::kWrite: return "64-bit writes";
    case Command::kWrite8: return "batches of 8 writes";
    case Command::kWait:
      return "64-bit waits on an open word";
    case Command::kPeerCopy:
      return "linear copies to a peer";
    case Command::kPeerCopyDtoD:
      return "linear copies to a peer, cuMemcpyDtoDAsync";
    case Command::kPeerCopyPeer:
      return "linear copies to a peer, cuMemcpyPeerAsync";
    case Command::kPendingWait:
      return "event waits on records queued behind the gate elsewhere";
    case Command::kPendingWaitCopy:
      return "those event waits, each followed by a linear copy";
  }
  return "?";
}

struct QueueProbe {
  int64_t taken = 0;            // commands enqueued
  double seconds_per_call = 0;  // host time per enqueueing call, over the first `timed`
};

// Commands of kind `c` enqueued on a stream waiting on a closed gate, until
// enqueueing stalls for half a second or `limit` are queued: how many went
// in, and what the first `timed` of them cost the host per call. Peer
// copies go to `peer`'s memory.
inline QueueProbe probe_queue(CudaRaw& cu, CUcontext ctx, CUcontext peer, Command c, int64_t limit, int64_t timed) {
  CUdeviceptr gate_dev = 0, buf = 0, words = 0, far = 0;
  volatile uint64_t* gate = cu.host_word(&gate_dev);
  constexpr int kRows = 16;
  cu.check(cu.cuCtxSetCurrent(peer), "cuCtxSetCurrent");
  cu.check(cu.cuMemAlloc(&far, 256), "cuMemAlloc");
  cu.check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  if (peer != ctx) cu.enable_peer_access(peer);
  cu.check(cu.cuMemAlloc(&buf, 2 * 256 * kRows), "cuMemAlloc");
  cu.check(cu.cuMemAlloc(&words, 8 * 8), "cuMemAlloc");
  CUstream s = nullptr, other = nullptr;
  cu.check(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  cu.check(cu.cuStreamCreate(&other, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  CUevent event = nullptr;
  cu.check(cu.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  cu.check(cu.cuEventRecord(event, other), "cuEventRecord");
  cu.check(cu.cuStreamWaitValue64(s, gate_dev, 1, CU_STREAM_WAIT_VALUE_GEQ), "wait gate");
  // A second stream behind the same gate, whose records are still to come
  // when `s` waits for them (as a copy stream waits for the gate stream's).
  CUstream blocked = nullptr;
  CUevent pending = nullptr;
  cu.check(cu.cuStreamCreate(&blocked, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  cu.check(cu.cuEventCreate(&pending, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  cu.check(cu.cuStreamWaitValue64(blocked, gate_dev, 1, CU_STREAM_WAIT_VALUE_GEQ), "wait gate");
  std::vector<CUstreamBatchMemOpParams> writes(8);
  for (int i = 0; i < 8; ++i) {
    writes[i] = {};
    writes[i].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    writes[i].writeValue.address = words + 8 * i;
    writes[i].writeValue.value64 = 1;
  }
  std::atomic<int64_t> queued{0};
  std::atomic<bool> stop{false};
  double timed_s = 0;
  std::thread feeder([&] {
    cu.check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    CUDA_MEMCPY2D m{};
    m.srcMemoryType = m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    m.srcDevice = buf;
    m.dstDevice = buf + 256 * kRows;
    m.srcPitch = m.dstPitch = 256;
    m.WidthInBytes = 256;
    m.Height = kRows;
    CUevent mine = nullptr;
    cu.check(cu.cuEventCreate(&mine, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    const auto t0 = std::chrono::steady_clock::now();
    while (!stop.load() && queued.load() < limit) {
      if (queued.load() == timed)
        timed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      switch (c) {
        case Command::kCopy: cu.check(cu.cuMemcpyAsync(m.dstDevice, m.srcDevice, 256, s), "cuMemcpyAsync"); break;
        case Command::kCopy2D: cu.check(cu.cuMemcpy2DAsync(&m, s), "cuMemcpy2DAsync"); break;
        case Command::kRecord: cu.check(cu.cuEventRecord(mine, s), "cuEventRecord"); break;
        case Command::kWaitEvent: cu.check(cu.cuStreamWaitEvent(s, event, 0), "cuStreamWaitEvent"); break;
        case Command::kWrite: cu.check(cu.cuStreamWriteValue64(s, words, 1, 0), "cuStreamWriteValue64"); break;
        case Command::kWrite8: cu.check(cu.cuStreamBatchMemOp(s, 8, writes.data(), 0), "cuStreamBatchMemOp"); break;
        case Command::kWait:
          cu.check(cu.cuStreamWaitValue64(s, words, 0, CU_STREAM_WAIT_VALUE_GEQ), "cuStreamWaitValue64");
          break;
        case Command::kPeerCopy:
          cu.check(cu.cuMemcpyAsync(far, m.srcDevice, 256, s), "cuMemcpyAsync");
          break;
        case Command::kPeerCopyDtoD:
          cu.check(cu.cuMemcpyDtoDAsync(far, m.srcDevice, 256, s), "cuMemcpyDtoDAsync");
          break;
        case Command::kPeerCopyPeer:
          cu.check(cu.cuMemcpyPeerAsync(far, peer, m.srcDevice, ctx, 256, s), "cuMemcpyPeerAsync");
          break;
        case Command::kPendingWait:
        case Command::kPendingWaitCopy:
          cu.check(cu.cuEventRecord(pending, blocked), "cuEventRecord");
          cu.check(cu.cuStreamWaitEvent(s, pending, 0), "cuStreamWaitEvent");
          if (c == Command::kPendingWaitCopy) cu.check(cu.cuMemcpyAsync(m.dstDevice, m.srcDevice, 256, s), "copy");
          break;
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
  cu.check(cu.cuStreamSynchronize(blocked), "cuStreamSynchronize");
  return {taken, taken >= timed ? timed_s / static_cast<double>(timed) : 0};
}

}  // namespace bench
