// Where the time of an armed copy chain goes, with raw driver calls on
// cuda:0 and cuda:1: both send `pieces` copies of `piece` bytes to the other
// (an all-gather of two), each copy dressed in more of what a triggered
// plan's chain adds around it. Everything is queued behind one start word
// first and timed from the host opening it, so only the GPUs' side counts.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cuda_raw.h"
#include "report.h"

namespace bench {

struct ChainShape {
  std::string name;
  bool wait = false;   // cuStreamWaitValue64 on an open gate before each copy
  bool flag = false;   // cuStreamWriteValue64 of the peer's arrival word after it
  bool event = false;  // event after the chain, waited on by a completion stream
  int lanes = 1;       // copy streams per direction, chain k on stream k % lanes
  bool ordered = true;  // with lanes > 1, each chain starts behind the previous one's start
  // Gate waits and arrival writes on streams of their own, tied to the copy
  // stream by events (each event recorded anew per chain; a wait takes the
  // record made just before it).
  bool pipelined = false;
};

class ChainAnatomy {
 public:
  ChainAnatomy(CudaRaw& cu, int64_t piece, int pieces) : cu_(cu), piece_(piece), pieces_(pieces) {
    for (int r = 0; r < 2; ++r) ctx_[r] = cu.retain(r);
    for (int r = 0; r < 2; ++r) {
      cu.check(cu.cuCtxSetCurrent(ctx_[r]), "cuCtxSetCurrent");
      cu.enable_peer_access(ctx_[1 - r]);
      cu.check(cu.cuMemAlloc(&data_[r], 2 * piece * pieces), "cuMemAlloc");
      cu.check(cu.cuMemAlloc(&words_[r], (2 + pieces) * 8), "cuMemAlloc");  // start, gate, arrivals
      uint64_t open[2] = {0, 1};
      cu.check(cu.cuMemcpyHtoD(words_[r], open, sizeof(open)), "cuMemcpyHtoD");
      for (int l = 0; l < kMaxLanes; ++l) {
        cu.check(cu.cuStreamCreate(&lane_[r][l], CU_STREAM_NON_BLOCKING), "cuStreamCreate");
        cu.check(cu.cuEventCreate(&started_[r][l], CU_EVENT_DISABLE_TIMING), "cuEventCreate");
      }
      for (CUstream* st : {&completion_[r], &gate_[r], &flag_[r]}) {
        cu.check(cu.cuStreamCreate(st, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
      }
      for (CUevent* e : {&opened_[r], &copied_[r], &arrived_[r]}) {
        cu.check(cu.cuEventCreate(e, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
      }
      done_[r].resize(pieces);
      for (CUevent& e : done_[r]) cu.check(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    }
  }

  // Median seconds for every chain of both GPUs to finish.
  double seconds(const ChainShape& c, int reps) {
    std::vector<double> t;
    for (int rep = 0; rep < reps + 2; ++rep) {
      const uint64_t start = ++epoch_;
      for (int r = 0; r < 2; ++r) {
        cu_.check(cu_.cuCtxSetCurrent(ctx_[r]), "cuCtxSetCurrent");
        for (int l = 0; l < c.lanes; ++l) {
          cu_.check(cu_.cuStreamWaitValue64(lane_[r][l], words_[r], start, CU_STREAM_WAIT_VALUE_GEQ), "wait start");
        }
        if (c.pipelined) {
          cu_.check(cu_.cuStreamWaitValue64(gate_[r], words_[r], start, CU_STREAM_WAIT_VALUE_GEQ), "wait start");
        }
        for (int k = 0; k < pieces_; ++k) {
          CUstream s = lane_[r][k % c.lanes];
          CUdeviceptr at = r * piece_ * pieces_ + k * piece_;
          if (c.pipelined) {
            pipelined_chain(c, r, k, at, start);
            continue;
          }
          if (c.lanes > 1 && c.ordered && k > 0)
            cu_.check(cu_.cuStreamWaitEvent(s, started_[r][(k - 1) % c.lanes], 0), "wait event");
          if (c.wait) cu_.check(cu_.cuStreamWaitValue64(s, words_[r] + 8, 1, CU_STREAM_WAIT_VALUE_GEQ), "wait gate");
          if (c.lanes > 1 && c.ordered) cu_.check(cu_.cuEventRecord(started_[r][k % c.lanes], s), "record");
          cu_.check(cu_.cuMemcpyAsync(data_[1 - r] + at, data_[r] + at, piece_, s), "cuMemcpyAsync");
          if (c.flag) {
            cu_.check(cu_.cuStreamWriteValue64(s, words_[1 - r] + 16 + 8 * k, start, CU_STREAM_WRITE_VALUE_DEFAULT),
                      "write arrival");
          }
          if (c.event) {
            cu_.check(cu_.cuEventRecord(done_[r][k], s), "record");
            cu_.check(cu_.cuStreamWaitEvent(completion_[r], done_[r][k], 0), "wait event");
          }
        }
      }
      cu_.check(cu_.cuCtxSetCurrent(ctx_[0]), "cuCtxSetCurrent");
      auto t0 = Clock::now();
      for (int r = 0; r < 2; ++r) cu_.check(cu_.cuMemcpyHtoD(words_[r], &start, 8), "open start");
      for (int r = 0; r < 2; ++r) {
        for (int l = 0; l < c.lanes; ++l) cu_.check(cu_.cuStreamSynchronize(lane_[r][l]), "sync");
        cu_.check(cu_.cuStreamSynchronize(gate_[r]), "sync");
        cu_.check(cu_.cuStreamSynchronize(flag_[r]), "sync");
        cu_.check(cu_.cuStreamSynchronize(completion_[r]), "sync");
      }
      if (rep >= 2) t.push_back(seconds_since(t0));
    }
    return median(t);
  }

  // Host cost of the calls end_device_epoch makes once the chains are done:
  // one event query per rank, and with `read`, the small device-to-host read
  // per rank it made before views had alarms.
  double end_seconds(int reps, bool read) {
    std::vector<double> t;
    std::vector<char> block(1024);
    for (int rep = 0; rep < reps; ++rep) {
      auto t0 = Clock::now();
      for (int r = 0; r < 2; ++r) {
        cu_.check(cu_.cuCtxSetCurrent(ctx_[r]), "cuCtxSetCurrent");
        cu_.check(cu_.cuEventQuery(done_[r][0]), "cuEventQuery");
        if (read) cu_.check(cu_.cuMemcpyDtoH(block.data(), data_[r], block.size()), "cuMemcpyDtoH");
      }
      t.push_back(seconds_since(t0));
    }
    return median(t);
  }

 private:
  // Gate stream: wait, record opened. Copy stream: wait opened, copy, record
  // copied. Flag stream: wait copied, write the arrival, record arrived.
  void pipelined_chain(const ChainShape& c, int r, int k, CUdeviceptr at, uint64_t start) {
    CUstream s = lane_[r][k % c.lanes];
    if (c.wait) {
      cu_.check(cu_.cuStreamWaitValue64(gate_[r], words_[r] + 8, 1, CU_STREAM_WAIT_VALUE_GEQ), "wait gate");
      cu_.check(cu_.cuEventRecord(opened_[r], gate_[r]), "record");
      cu_.check(cu_.cuStreamWaitEvent(s, opened_[r], 0), "wait event");
    }
    cu_.check(cu_.cuMemcpyAsync(data_[1 - r] + at, data_[r] + at, piece_, s), "cuMemcpyAsync");
    if (!c.flag && !c.event) return;
    cu_.check(cu_.cuEventRecord(copied_[r], s), "record");
    CUevent last = copied_[r];
    if (c.flag) {
      cu_.check(cu_.cuStreamWaitEvent(flag_[r], copied_[r], 0), "wait event");
      cu_.check(cu_.cuStreamWriteValue64(flag_[r], words_[1 - r] + 16 + 8 * k, start, CU_STREAM_WRITE_VALUE_DEFAULT),
                "write arrival");
      cu_.check(cu_.cuEventRecord(arrived_[r], flag_[r]), "record");
      last = arrived_[r];
    }
    if (c.event) cu_.check(cu_.cuStreamWaitEvent(completion_[r], last, 0), "wait event");
  }

  static constexpr int kMaxLanes = 4;
  CudaRaw& cu_;
  const int64_t piece_;
  const int pieces_;
  uint64_t epoch_ = 0;
  CUcontext ctx_[2] = {};
  CUdeviceptr data_[2] = {}, words_[2] = {};
  CUstream lane_[2][kMaxLanes] = {}, completion_[2] = {}, gate_[2] = {}, flag_[2] = {};
  CUevent opened_[2] = {}, copied_[2] = {}, arrived_[2] = {};
  CUevent started_[2][kMaxLanes] = {};
  std::vector<CUevent> done_[2];
};

// The shapes measured, each adding one thing to the one before.
inline std::vector<ChainShape> chain_shapes() {
  return {
      {.name = "copies only"},
      {.name = "+ gate wait before each", .wait = true},
      {.name = "+ arrival write after each", .wait = true, .flag = true},
      {.name = "copies and arrival writes, no gate waits", .flag = true},
      {.name = "+ event to a completion stream (a plan's chain)", .wait = true, .flag = true, .event = true},
      {.name = "  the same on 2 lanes", .wait = true, .flag = true, .event = true, .lanes = 2},
      {.name = "copies only, 2 lanes", .lanes = 2},
      {.name = "copies only, 2 lanes, unordered", .lanes = 2, .ordered = false},
      {.name = "copies only, 4 lanes, unordered", .lanes = 4, .ordered = false},
      {.name = "pipelined: copies, each waiting on a gate stream's event", .wait = true, .pipelined = true},
      {.name = "pipelined: copies, each recording an event", .event = true, .pipelined = true},
      {.name = "pipelined: gate, copy and arrival streams (a whole chain)",
       .wait = true,
       .flag = true,
       .event = true,
       .pipelined = true},
      {.name = "  the same, copies on 2 lanes",
       .wait = true,
       .flag = true,
       .event = true,
       .lanes = 2,
       .pipelined = true},
      {.name = "  the same, copies on 4 lanes",
       .wait = true,
       .flag = true,
       .event = true,
       .lanes = 4,
       .pipelined = true},
  };
}

}  // namespace bench
