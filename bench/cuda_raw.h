// The few CUDA driver calls the GPU benchmarks make themselves, to measure
// the raw baselines tessel is compared with. Loaded with dlopen like tessel.
#pragma once

#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace bench {

struct CudaRaw {
#define TESSEL_RAW_FN(name) decltype(&::name) name = nullptr
  TESSEL_RAW_FN(cuInit);
  TESSEL_RAW_FN(cuDeviceGet);
  TESSEL_RAW_FN(cuDevicePrimaryCtxRetain);
  TESSEL_RAW_FN(cuCtxSetCurrent);
  TESSEL_RAW_FN(cuCtxSynchronize);
  TESSEL_RAW_FN(cuModuleLoadData);
  TESSEL_RAW_FN(cuModuleGetFunction);
  TESSEL_RAW_FN(cuLaunchKernel);
  TESSEL_RAW_FN(cuMemAlloc);
  TESSEL_RAW_FN(cuMemAllocHost);
  TESSEL_RAW_FN(cuMemcpyHtoDAsync);
  TESSEL_RAW_FN(cuMemcpyDtoDAsync);
  TESSEL_RAW_FN(cuStreamCreate);
  TESSEL_RAW_FN(cuStreamCreateWithPriority);
  TESSEL_RAW_FN(cuCtxGetStreamPriorityRange);
  TESSEL_RAW_FN(cuStreamSynchronize);
  TESSEL_RAW_FN(cuStreamQuery);
  TESSEL_RAW_FN(cuStreamBeginCapture);
  TESSEL_RAW_FN(cuStreamEndCapture);
  TESSEL_RAW_FN(cuGraphInstantiateWithFlags);
  TESSEL_RAW_FN(cuGraphLaunch);
  TESSEL_RAW_FN(cuEventCreate);
  TESSEL_RAW_FN(cuEventRecord);
  TESSEL_RAW_FN(cuEventSynchronize);
  TESSEL_RAW_FN(cuEventElapsedTime);
  TESSEL_RAW_FN(cuMemcpyPeerAsync);
  TESSEL_RAW_FN(cuCtxEnablePeerAccess);
  TESSEL_RAW_FN(cuMemcpyAsync);
  TESSEL_RAW_FN(cuMemcpyHtoD);
  TESSEL_RAW_FN(cuMemcpyDtoH);
  TESSEL_RAW_FN(cuStreamWaitValue32);
  TESSEL_RAW_FN(cuStreamWaitValue64);
  TESSEL_RAW_FN(cuStreamWriteValue64);
  TESSEL_RAW_FN(cuStreamWaitEvent);
  TESSEL_RAW_FN(cuEventQuery);
  TESSEL_RAW_FN(cuMemHostAlloc);
  TESSEL_RAW_FN(cuMemHostGetDevicePointer);
  TESSEL_RAW_FN(cuMemcpy2DAsync);
  TESSEL_RAW_FN(cuStreamBatchMemOp);
#undef TESSEL_RAW_FN

  // Loads the driver and makes device 0's primary context current; false
  // when there is no driver.
  bool open() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return false;
    auto get = [&](auto& fn, const char* name) { fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name)); };
    get(cuInit, "cuInit");
    get(cuDeviceGet, "cuDeviceGet");
    get(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    get(cuCtxSetCurrent, "cuCtxSetCurrent");
    get(cuCtxSynchronize, "cuCtxSynchronize");
    get(cuModuleLoadData, "cuModuleLoadData");
    get(cuModuleGetFunction, "cuModuleGetFunction");
    get(cuLaunchKernel, "cuLaunchKernel");
    get(cuMemAlloc, "cuMemAlloc_v2");
    get(cuMemAllocHost, "cuMemAllocHost_v2");
    get(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    get(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
    get(cuStreamCreate, "cuStreamCreate");
    get(cuStreamCreateWithPriority, "cuStreamCreateWithPriority");
    get(cuCtxGetStreamPriorityRange, "cuCtxGetStreamPriorityRange");
    get(cuStreamSynchronize, "cuStreamSynchronize");
    get(cuStreamQuery, "cuStreamQuery");
    get(cuStreamBeginCapture, "cuStreamBeginCapture_v2");
    get(cuStreamEndCapture, "cuStreamEndCapture");
    get(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags");
    get(cuGraphLaunch, "cuGraphLaunch");
    get(cuEventCreate, "cuEventCreate");
    get(cuEventRecord, "cuEventRecord");
    get(cuEventSynchronize, "cuEventSynchronize");
    get(cuEventElapsedTime, "cuEventElapsedTime");
    get(cuMemcpyPeerAsync, "cuMemcpyPeerAsync");
    get(cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess");
    get(cuMemcpyAsync, "cuMemcpyAsync");
    get(cuMemcpyHtoD, "cuMemcpyHtoD_v2");
    get(cuMemcpyDtoH, "cuMemcpyDtoH_v2");
    get(cuStreamWaitValue32, "cuStreamWaitValue32_v2");
    get(cuStreamWaitValue64, "cuStreamWaitValue64_v2");
    get(cuStreamWriteValue64, "cuStreamWriteValue64_v2");
    get(cuStreamWaitEvent, "cuStreamWaitEvent");
    get(cuEventQuery, "cuEventQuery");
    get(cuMemHostAlloc, "cuMemHostAlloc");
    get(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2");
    get(cuMemcpy2DAsync, "cuMemcpy2DAsync_v2");
    get(cuStreamBatchMemOp, "cuStreamBatchMemOp_v2");
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
};

}  // namespace bench
