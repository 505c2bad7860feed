// The few CUDA driver calls the GPU benchmarks make themselves, to measure
// the raw baselines tessel is compared with. Loaded with dlopen like tessel,
// and declared by tessel's own cuda_api.h: no CUDA toolkit is needed.
#pragma once

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>


#include "runtime/cuda/cuda_api.h"
#include "tessel/tessel.h"

// The benchmarks are programs of their own and name the driver API as cuda.h
// does (CUstream, CU_STREAM_NON_BLOCKING), unqualified, in every namespace.
using namespace ::tessel::cuda;

namespace bench {

// X(member, exported symbol, prototype): the symbol is the one whose
// prototype PFN_..._vNNNN names (cuMemAlloc_v2 is the CUDA 3.2 cuMemAlloc).
#define TESSEL_RAW_FUNCTIONS(X)                                                                       \
  X(cuInit, cuInit, PFN_cuInit_v2000)                                                                 \
  X(cuDeviceGet, cuDeviceGet, PFN_cuDeviceGet_v2000)                                                  \
  X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, PFN_cuDevicePrimaryCtxRetain_v7000)           \
  X(cuCtxSetCurrent, cuCtxSetCurrent, PFN_cuCtxSetCurrent_v4000)                                      \
  X(cuCtxSynchronize, cuCtxSynchronize, PFN_cuCtxSynchronize_v2000)                                   \
  X(cuModuleLoadData, cuModuleLoadData, PFN_cuModuleLoadData_v2000)                                   \
  X(cuModuleGetFunction, cuModuleGetFunction, PFN_cuModuleGetFunction_v2000)                          \
  X(cuLaunchKernel, cuLaunchKernel, PFN_cuLaunchKernel_v4000)                                         \
  X(cuMemAlloc, cuMemAlloc_v2, PFN_cuMemAlloc_v3020)                                                  \
  X(cuMemsetD8, cuMemsetD8_v2, PFN_cuMemsetD8_v3020)                                                  \
  X(cuMemAllocHost, cuMemAllocHost_v2, PFN_cuMemAllocHost_v3020)                                      \
  X(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2, PFN_cuMemcpyHtoDAsync_v3020)                             \
  X(cuMemcpyDtoDAsync, cuMemcpyDtoDAsync_v2, PFN_cuMemcpyDtoDAsync_v3020)                             \
  X(cuStreamCreate, cuStreamCreate, PFN_cuStreamCreate_v2000)                                         \
  X(cuStreamCreateWithPriority, cuStreamCreateWithPriority, PFN_cuStreamCreateWithPriority_v5050)     \
  X(cuCtxGetStreamPriorityRange, cuCtxGetStreamPriorityRange, PFN_cuCtxGetStreamPriorityRange_v5050)  \
  X(cuStreamSynchronize, cuStreamSynchronize, PFN_cuStreamSynchronize_v2000)                          \
  X(cuStreamQuery, cuStreamQuery, PFN_cuStreamQuery_v2000)                                            \
  X(cuStreamBeginCapture, cuStreamBeginCapture_v2, PFN_cuStreamBeginCapture_v10010)                   \
  X(cuStreamEndCapture, cuStreamEndCapture, PFN_cuStreamEndCapture_v10000)                            \
  X(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags, PFN_cuGraphInstantiateWithFlags_v11040) \
  X(cuGraphLaunch, cuGraphLaunch, PFN_cuGraphLaunch_v10000)                                           \
  X(cuEventCreate, cuEventCreate, PFN_cuEventCreate_v2000)                                            \
  X(cuEventRecord, cuEventRecord, PFN_cuEventRecord_v2000)                                            \
  X(cuEventSynchronize, cuEventSynchronize, PFN_cuEventSynchronize_v2000)                             \
  X(cuEventElapsedTime, cuEventElapsedTime, PFN_cuEventElapsedTime_v2000)                             \
  X(cuMemcpyPeerAsync, cuMemcpyPeerAsync, PFN_cuMemcpyPeerAsync_v4000)                                \
  X(cuCtxEnablePeerAccess, cuCtxEnablePeerAccess, PFN_cuCtxEnablePeerAccess_v4000)                    \
  X(cuMemcpyAsync, cuMemcpyAsync, PFN_cuMemcpyAsync_v4000)                                            \
  X(cuMemcpyHtoD, cuMemcpyHtoD_v2, PFN_cuMemcpyHtoD_v3020)                                            \
  X(cuMemcpyDtoH, cuMemcpyDtoH_v2, PFN_cuMemcpyDtoH_v3020)                                            \
  X(cuStreamWaitValue32, cuStreamWaitValue32_v2, PFN_cuStreamWaitValue32_v11070)                      \
  X(cuStreamWaitValue64, cuStreamWaitValue64_v2, PFN_cuStreamWaitValue64_v11070)                      \
  X(cuStreamWriteValue64, cuStreamWriteValue64_v2, PFN_cuStreamWriteValue64_v11070)                   \
  X(cuStreamWaitEvent, cuStreamWaitEvent, PFN_cuStreamWaitEvent_v3020)                                \
  X(cuEventQuery, cuEventQuery, PFN_cuEventQuery_v2000)                                               \
  X(cuMemHostAlloc, cuMemHostAlloc, PFN_cuMemHostAlloc_v2020)                                         \
  X(cuMemHostGetDevicePointer, cuMemHostGetDevicePointer_v2, PFN_cuMemHostGetDevicePointer_v3020)     \
  X(cuMemcpy2DAsync, cuMemcpy2DAsync_v2, PFN_cuMemcpy2DAsync_v3020)                                   \
  X(cuStreamBatchMemOp, cuStreamBatchMemOp_v2, PFN_cuStreamBatchMemOp_v11070)

struct CudaRaw {
#define TESSEL_RAW_DECLARE(member, symbol, pfn) pfn member = nullptr;
  TESSEL_RAW_FUNCTIONS(TESSEL_RAW_DECLARE)
#undef TESSEL_RAW_DECLARE

  // Loads the driver and makes device 0's primary context current; false
  // when there is no driver.
  bool open() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return false;
    auto get = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    };
#define TESSEL_RAW_RESOLVE(member, symbol, pfn) get(member, #symbol);
    TESSEL_RAW_FUNCTIONS(TESSEL_RAW_RESOLVE)
#undef TESSEL_RAW_RESOLVE
    CUdevice dev;
    CUcontext ctx;
    check(cuInit(0), "cuInit");
    check(cuDeviceGet(&dev, 0), "cuDeviceGet");
    check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    return true;
  }

  // Device `ordinal`'s primary context (retained for the process).
  CUcontext retain(int ordinal) {
    CUdevice dev;
    CUcontext ctx;
    check(cuDeviceGet(&dev, ordinal), "cuDeviceGet");
    check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    return ctx;
  }

  // A zeroed word of pinned host memory that every GPU can read, for stream
  // waits the host releases with a plain store: its host address, and in
  // `on_device` the address streams use.
  uint64_t* host_word(CUdeviceptr* on_device) {
    void* host = nullptr;
    check(cuMemHostAlloc(&host, sizeof(uint64_t), CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
          "cuMemHostAlloc");
    check(cuMemHostGetDevicePointer(on_device, host, 0), "cuMemHostGetDevicePointer");
    auto* word = static_cast<uint64_t*>(host);
    *word = 0;
    return word;
  }

  // Lets the current context read and write `peer`'s memory (again is fine).
  void enable_peer_access(CUcontext peer) {
    CUresult r = cuCtxEnablePeerAccess(peer, 0);
    if (r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) check(r, "cuCtxEnablePeerAccess");
  }

  static void check(CUresult r, const char* what) {
    if (r == CUDA_SUCCESS) return;
    std::fprintf(stderr, "%s failed: %d\n", what, static_cast<int>(r));
    std::exit(1);
  }

  // Milliseconds between events `e0` and `e1` recorded on `stream` around
  // what `work` queues there.
  template <class Work>
  double event_ms(CUstream stream, CUevent e0, CUevent e1, Work&& work) {
    check(cuEventRecord(e0, stream), "record");
    work();
    check(cuEventRecord(e1, stream), "record");
    check(cuEventSynchronize(e1), "sync");
    float ms;
    check(cuEventElapsedTime(&ms, e0, e1), "elapsed");
    return ms;
  }
};

// Times work as Triton's do_bench does: each run after an L2 flush (a 256
// MiB device-to-device copy), CUDA events around the run alone, the median
// of the runs.
class FlushedTimer {
 public:
  static constexpr size_t kFlushBytes = size_t{256} << 20;

  FlushedTimer(CudaRaw& cu, CUstream stream) : cu_(cu), stream_(stream) {
    cu.check(cu.cuMemAlloc(&src_, kFlushBytes), "cuMemAlloc");
    cu.check(cu.cuMemAlloc(&dst_, kFlushBytes), "cuMemAlloc");
    cu.check(cu.cuEventCreate(&e0_, 0), "cuEventCreate");
    cu.check(cu.cuEventCreate(&e1_, 0), "cuEventCreate");
  }

  // Queues a copy larger than L2 on the stream: what ran before leaves no
  // lines there for what runs next.
  void flush() { cu_.check(cu_.cuMemcpyDtoDAsync(dst_, src_, kFlushBytes, stream_), "flush L2"); }

  // Median milliseconds of `reps` runs of `work` (which queues on the
  // stream), after one untimed run.
  template <class Work>
  double median_ms(Work&& work, int reps = 15) {
    work();
    std::vector<double> ms;
    for (int rep = 0; rep < reps; ++rep) {
      flush();
      ms.push_back(cu_.event_ms(stream_, e0_, e1_, work));
    }
    return median(ms);
  }

  // Median milliseconds of each of `works`, `reps` runs each taken in turns
  // (one run of each, then the next round), after one untimed run of each:
  // a drift of the clocks falls on all of them alike.
  std::vector<double> median_ms_in_turns(const std::vector<std::function<void()>>& works, int reps = 15) {
    for (const auto& work : works) work();
    std::vector<std::vector<double>> ms(works.size());
    for (int rep = 0; rep < reps; ++rep) {
      for (size_t i = 0; i < works.size(); ++i) {
        flush();
        ms[i].push_back(cu_.event_ms(stream_, e0_, e1_, works[i]));
      }
    }
    std::vector<double> medians;
    for (std::vector<double>& m : ms) medians.push_back(median(m));
    return medians;
  }

 private:
  static double median(std::vector<double>& ms) {
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }

  CudaRaw& cu_;
  CUstream stream_;
  CUdeviceptr src_ = 0, dst_ = 0;
  CUevent e0_ = nullptr, e1_ = nullptr;
};

#undef TESSEL_RAW_FUNCTIONS

// The first CUDA device, with `cu` opened beside it; none where there is no
// GPU, after a line saying so under the benchmark's name (it then has
// nothing to measure and exits 0).
inline std::optional<tessel::Device> open_cuda(const char* bench, CudaRaw& cu) {
  absl::StatusOr<tessel::Device> opened = tessel::Device::open("cuda:0");
  if (!opened.ok() || !cu.open()) {
    std::printf("%s: no CUDA device (%s); nothing to measure\n", bench, std::string(opened.status().message()).c_str());
    return std::nullopt;
  }
  return *std::move(opened);
}

}  // namespace bench
