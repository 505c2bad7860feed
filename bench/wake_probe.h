// How soon a stream waiting on a word (cuStreamWaitValue64) moves on once
// the word is written, by who writes it and where it lives: a kernel's
// st.release.sys (as a plan's publish opens a gate), the host's store, or
// another stream's cuStreamWriteValue64 (as publish() and run() open gates
// from the host) or cuMemcpyHtoDAsync; in device memory (where a plan keeps its gates) or pinned
// host memory. The waiting stream then writes a flag in host memory that
// the host spins on, so every case is timed on the host's clock from the
// moment the host sets things going. A kernel waits for that moment by
// spinning on a host word, and a baseline where it writes the flag itself
// measures what that spin and write cost. Each case also runs with the wait
// on a stream of its own handing off to the flag's stream by an event (as a
// plan's gate stream does), and with a 4 KiB copy to a peer before the flag
// (a small batch's delivery). Waits on device memory also run as 32-bit
// waits on the word's low half.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cuda_raw.h"
#include "report.h"

namespace bench {

// One program, one thread: waits until *start >= value, then stores value
// to *word with release semantics at system scope.
inline constexpr const char* kOpenWhenPtx = R"(
.version 8.0
.target sm_90
.address_size 64
.visible .entry open_when(.param .u64 start, .param .u64 word, .param .u64 value)
{
  .reg .pred %p<2>;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [start];
  ld.param.u64 %rd2, [word];
  ld.param.u64 %rd3, [value];
spin:
  ld.acquire.sys.global.u64 %rd4, [%rd1];
  setp.lt.u64 %p1, %rd4, %rd3;
  @%p1 bra spin;
  st.release.sys.global.u64 [%rd2], %rd3;
  ret;
}
)";

enum class Opener {
  kKernelWritesFlag,  // baseline: the kernel writes the flag, no stream waits
  kKernel,            // the kernel writes the word
  kHost,              // the host stores the word (host memory only)
  kStreamWrite,       // cuStreamWriteValue64 on another stream
  kStreamCopy,        // cuMemcpyHtoDAsync of the value from pinned host memory, on another stream
};

struct WakeCase {
  std::string name;
  Opener opener;
  bool host_word = false;  // the word is in pinned host memory, else device memory
  // A second stream waits on the word and records an event that the flag's
  // stream waits for (a plan's gate stream), instead of the flag's stream
  // waiting on the word itself.
  bool hand_off = false;
  bool copy = false;  // the flag's stream copies 4 KiB to the peer before it writes the flag
  bool wait32 = false;  // cuStreamWaitValue32 on the word's low half instead of cuStreamWaitValue64
};

inline std::vector<WakeCase> wake_cases() {
  std::vector<WakeCase> cases = {
      {"kernel writes the flag itself (baseline for kernel cases)", Opener::kKernelWritesFlag}};
  const std::pair<const char*, Opener> openers[] = {{"kernel st.release.sys", Opener::kKernel},
                                                    {"host store", Opener::kHost},
                                                    {"cuStreamWriteValue64 on another stream", Opener::kStreamWrite},
                                                    {"cuMemcpyHtoDAsync on another stream", Opener::kStreamCopy}};
  for (auto [what, opener] : openers) {
    for (bool host_word : {false, true}) {
      if (opener == Opener::kHost && !host_word) continue;
      if (opener == Opener::kStreamCopy && host_word) continue;
      for (bool hand_off : {false, true}) {
        for (bool copy : {false, true}) {
          cases.push_back({absl::StrCat(what, ", word in ", host_word ? "host" : "device", " memory",
                                        hand_off ? ", event hand-off" : "", copy ? ", 4 KiB copy" : ""),
                           opener, host_word, hand_off, copy});
        }
      }
    }
  }
  // The same waits on the low 32 bits (a gate compares only those), where
  // a plan keeps its gates.
  for (auto [what, opener] : {openers[0], openers[2]}) {
    for (bool hand_off : {false, true}) {
      for (bool copy : {false, true}) {
        cases.push_back({absl::StrCat(what, ", word in device memory, 32-bit wait", hand_off ? ", event hand-off" : "",
                                      copy ? ", 4 KiB copy" : ""),
                         opener, false, hand_off, copy, true});
      }
    }
  }
  return cases;
}

class WakeProbe {
 public:
  // Streams on `ctx`, at the context's highest priority where
  // `high_priority`; the 4 KiB copies go to `peer`'s memory.
  WakeProbe(CudaRaw& cu, CUcontext ctx, CUcontext peer, bool high_priority = false) : cu_(cu), ctx_(ctx) {
    cu.check(cu.cuCtxSetCurrent(peer), "cuCtxSetCurrent");
    cu.check(cu.cuMemAlloc(&far_, 4096), "cuMemAlloc");
    cu.check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    cu.enable_peer_access(peer);
    cu.check(cu.cuModuleLoadData(&module_, kOpenWhenPtx), "cuModuleLoadData(open_when)");
    cu.check(cu.cuModuleGetFunction(&open_when_, module_, "open_when"), "cuModuleGetFunction");
    int least = 0, greatest = 0;
    cu.check(cu.cuCtxGetStreamPriorityRange(&least, &greatest), "cuCtxGetStreamPriorityRange");
    for (CUstream* s : {&kernel_, &waiter_, &control_, &stage_}) {
      cu.check(cu.cuStreamCreateWithPriority(s, CU_STREAM_NON_BLOCKING, high_priority ? greatest : least),
               "cuStreamCreateWithPriority");
    }
    cu.check(cu.cuEventCreate(&opened_, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    start_ = cu.host_word(&start_dev_);
    CUdeviceptr unused = 0;  // copies read the source through its host address
    source_ = cu.host_word(&unused);
    flag_ = cu.host_word(&flag_dev_);
    host_word_ = cu.host_word(&host_word_dev_);
    cu.check(cu.cuMemAlloc(&device_word_, 8), "cuMemAlloc");
    cu.check(cu.cuMemAlloc(&payload_, 4096), "cuMemAlloc");
    const uint64_t zero = 0;
    cu.check(cu.cuMemcpyHtoD(device_word_, &zero, 8), "cuMemcpyHtoD");
  }

  // Median seconds from the host setting `c` going to the flag being seen.
  // `writer` (the stream a stream-write case opens the gate from) and
  // `waiter` (the stream that writes the flag), streams on the probe's
  // context, replace the probe's own where given: whether which streams
  // meet changes the wake-up.
  double seconds(const WakeCase& c, int reps, CUstream writer = nullptr, CUstream waiter = nullptr) {
    if (writer == nullptr) writer = control_;
    if (waiter == nullptr) waiter = waiter_;
    std::vector<double> t;
    cu_.check(cu_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
    const CUdeviceptr word = c.host_word ? host_word_dev_ : device_word_;
    for (int rep = 0; rep < reps + 3; ++rep) {
      const uint64_t v = ++value_;
      if (c.opener == Opener::kKernelWritesFlag) {
        launch(flag_dev_, v);
      } else {
        CUstream waits_word = c.hand_off ? stage_ : waiter;
        if (c.wait32) {  // little-endian: the low half is at the word's address
          cu_.check(cu_.cuStreamWaitValue32(waits_word, word, static_cast<cuuint32_t>(v), CU_STREAM_WAIT_VALUE_GEQ),
                    "cuStreamWaitValue32");
        } else {
          cu_.check(cu_.cuStreamWaitValue64(waits_word, word, v, CU_STREAM_WAIT_VALUE_GEQ), "cuStreamWaitValue64");
        }
        if (c.hand_off) {
          cu_.check(cu_.cuEventRecord(opened_, stage_), "cuEventRecord");
          cu_.check(cu_.cuStreamWaitEvent(waiter, opened_, 0), "cuStreamWaitEvent");
        }
        if (c.copy) cu_.check(cu_.cuMemcpyAsync(far_, payload_, 4096, waiter), "cuMemcpyAsync");
        cu_.check(cu_.cuStreamWriteValue64(waiter, flag_dev_, v, CU_STREAM_WRITE_VALUE_DEFAULT),
                  "cuStreamWriteValue64");
        if (c.opener == Opener::kKernel) launch(word, v);
      }
      // Let the kernel start spinning and the waits settle; spin rather
      // than sleep, as a core woken from sleep starts slowly.
      auto t0 = std::chrono::steady_clock::now();
      while (std::chrono::steady_clock::now() - t0 < std::chrono::microseconds(300)) {
      }
      t0 = std::chrono::steady_clock::now();
      switch (c.opener) {
        case Opener::kKernelWritesFlag:
        case Opener::kKernel:
          std::atomic_ref<uint64_t>(*start_).store(v, std::memory_order_release);
          break;
        case Opener::kHost:
          std::atomic_ref<uint64_t>(*host_word_).store(v, std::memory_order_release);
          break;
        case Opener::kStreamWrite:
          cu_.check(cu_.cuStreamWriteValue64(writer, word, v, CU_STREAM_WRITE_VALUE_DEFAULT), "cuStreamWriteValue64");
          break;
        case Opener::kStreamCopy:
          *source_ = v;
          cu_.check(cu_.cuMemcpyHtoDAsync(word, source_, 8, writer), "cuMemcpyHtoDAsync");
          break;
      }
      while (std::atomic_ref<uint64_t>(*flag_).load(std::memory_order_acquire) != v) {
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (rep >= 3) t.push_back(s);
      for (CUstream st : {kernel_, waiter, writer, stage_}) cu_.check(cu_.cuStreamSynchronize(st), "sync");
    }
    return median(t);
  }

  // Copies 4 KiB to the peer on `s` and waits for it.
  void copy_on(CUstream s) {
    cu_.check(cu_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
    cu_.check(cu_.cuMemcpyAsync(far_, payload_, 4096, s), "cuMemcpyAsync");
    cu_.check(cu_.cuStreamSynchronize(s), "sync");
  }

 private:
  void launch(CUdeviceptr word, uint64_t v) {
    CUdeviceptr start = start_dev_;
    uint64_t value = v;
    void* args[] = {&start, &word, &value};
    cu_.check(cu_.cuLaunchKernel(open_when_, 1, 1, 1, 1, 1, 1, 0, kernel_, args, nullptr), "cuLaunchKernel");
  }

  CudaRaw& cu_;
  CUcontext ctx_;
  CUmodule module_ = nullptr;
  CUfunction open_when_ = nullptr;
  CUstream kernel_ = nullptr, waiter_ = nullptr, control_ = nullptr, stage_ = nullptr;
  CUevent opened_ = nullptr;
  uint64_t *start_ = nullptr, *flag_ = nullptr, *host_word_ = nullptr, *source_ = nullptr;
  CUdeviceptr start_dev_ = 0, flag_dev_ = 0, host_word_dev_ = 0, device_word_ = 0, payload_ = 0, far_ = 0;
  uint64_t value_ = 0;
};

}  // namespace bench
