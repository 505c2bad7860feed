// A stand-in for libcuda.so.1 that records the calls tessel makes: two
// Hopper GPUs (sm_90, 132 SMs) whose memory is host memory and whose kernels
// run nothing. It exports only cuGetProcAddress_v2, as tessel resolves every
// entry through it. Streams are queues (tests/fake_queue.h) that run their
// copies, 64-bit waits and writes, event records and launches in order; a
// launch "runs" by adding "ran <kernel>" to the record. A capturing stream
// keeps its operations for the graph, which runs them at each launch.
//
// The JIT linker keeps the PTX it is given as its "cubin"; modules find their
// globals, entries and parameters by reading that PTX. The environment
// shapes it:
//   FAKE_CUDA_FAIL=<call>        that call fails (a call's first word, or the
//                                whole line the record shows);
//   FAKE_CUDA_MISSING=<symbol>   cuGetProcAddress does not find it;
//   FAKE_CUDA_VERSION=<n>        what cuDriverGetVersion says (12080);
//   FAKE_CUDA_CC=<n>             the GPUs' compute capability (90; 80 is an
//                                A100's, with its 163 KiB of shared memory);
//   FAKE_CUDA_GLOBAL_BYTES=<n>   cuModuleGetGlobal misreports sizes;
//   FAKE_CUDA_MAX_THREADS=<n>    a function's most threads per block (1024);
//   FAKE_CUDA_JIT_ERROR=<text>   cuLinkAddData refuses the PTX, logging text;
//   FAKE_CUDA_SERIALIZED         the link's notes say ptxas serialized wgmma.
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_api.h"
#include "tests/fake_queue.h"

using namespace tessel::cuda;

namespace {

constexpr int kDevices = 2;
constexpr const char* kCubinMagic = "fake cubin\n";

std::mutex log_mu;
std::string calls;
std::vector<uint8_t> params;

void note(const std::string& line) {
  std::lock_guard<std::mutex> hold(log_mu);
  calls += line;
  calls += '\n';
}

// Records `call`; `failure` where FAKE_CUDA_FAIL names the call.
CUresult enter(const std::string& call, CUresult failure = CUDA_ERROR_INVALID_VALUE) {
  note(call);
  const char* fail = std::getenv("FAKE_CUDA_FAIL");
  if (fail == nullptr) return CUDA_SUCCESS;
  const std::string first = call.substr(0, call.find(' '));
  return call == fail || first == fail ? failure : CUDA_SUCCESS;
}

size_t env_size(const char* name, size_t otherwise) {
  const char* text = std::getenv(name);
  return text != nullptr ? std::strtoull(text, nullptr, 10) : otherwise;
}

struct Graph {
  std::vector<std::function<void()>> ops;
};
struct Stream {
  tessel::fake::Queue queue;
  std::unique_ptr<Graph> capture;  // while capturing; a destroyed stream drops it
};
std::mutex streams_mu;
std::set<Stream*> streams;

Stream* stream_of(CUstream s) { return reinterpret_cast<Stream*>(s); }

// Runs `op` on `s`, at once on the null stream, or into the capture.
void on(CUstream s, std::function<void()> op) {
  if (s == nullptr) {
    op();
  } else if (Stream* st = stream_of(s); st->capture != nullptr) {
    st->capture->ops.push_back(std::move(op));
  } else {
    st->queue.push(std::move(op));
  }
}
void wait_until(CUstream s, const std::function<bool()>& done) {
  tessel::fake::wait_until(s == nullptr ? nullptr : &stream_of(s)->queue, done);
}

struct Event {
  std::atomic<uint64_t> records{0}, completed{0};
  std::atomic<int64_t> at_ns{0};
};
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Context {
  int device = 0;
  int retains = 0;
};
Context contexts[kDevices] = {{0, 0}, {1, 0}};
thread_local CUcontext current = nullptr;

void* at(CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }
CUdeviceptr address(const void* p) { return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)); }

std::mutex memory_mu;
std::map<CUdeviceptr, size_t> allocations;
size_t created_bytes = 0;  // by cuMemCreate
constexpr size_t kMemoryBytes = size_t{80} << 30;

// Bytes of a PTX declaration's type (".u32", ".b8") times its count ("[256]").
size_t declared_bytes(const std::string& type, const std::string& count) {
  const size_t bits = std::stoul(type.substr(2));
  return bits / 8 * (count.empty() ? 1 : std::stoul(count));
}

struct Function {
  std::string name;
  std::vector<size_t> param_bytes;
  size_t static_shared = 0;
};

// A loaded module: its PTX, its globals (zeroed host memory, made on
// request) and its functions.
struct Module {
  std::string ptx;
  std::map<std::string, std::unique_ptr<uint8_t[]>> globals;
  std::map<std::string, std::unique_ptr<Function>> functions;
};
std::mutex globals_mu;
std::map<std::string, void*> last_globals;

struct Link {
  char* error_log = nullptr;
  size_t error_bytes = 0;
  char* info_log = nullptr;
  size_t info_bytes = 0;
  std::string ptx;
  std::string cubin;
};
void write_log(char* log, size_t bytes, const std::string& text) {
  if (log != nullptr && bytes > 0) std::snprintf(log, bytes, "%s", text.c_str());
}

// cuMemCreate's allocation: a memfd, so that a shareable handle is a file
// descriptor another process could map.
struct Allocation {
  int fd;
  size_t bytes;
};

// ---------------------------------------------------------------------------
// The driver's entries

CUresult get_error_name(CUresult error, const char** text) {
  static const auto* names = new std::map<int, const char*>{
      {CUDA_SUCCESS, "CUDA_SUCCESS"},
      {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"},
      {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"},
      {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE"},
      {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE"},
      {200, "CUDA_ERROR_INVALID_IMAGE"},
      {218, "CUDA_ERROR_INVALID_PTX"},
      {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND"},
      {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY"},
  };
  auto it = names->find(error);
  *text = it != names->end() ? it->second : nullptr;
  return it != names->end() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CUresult get_error_string(CUresult error, const char** text) {
  *text = error == CUDA_SUCCESS ? "no error" : "reported by the fake CUDA driver";
  return CUDA_SUCCESS;
}

CUresult init(unsigned) { return enter("cuInit", CUDA_ERROR_NO_DEVICE); }
CUresult driver_get_version(int* version) {
  *version = static_cast<int>(env_size("FAKE_CUDA_VERSION", 12080));
  return CUDA_SUCCESS;
}
CUresult device_get_count(int* count) {
  *count = kDevices;
  return enter("cuDeviceGetCount");
}
CUresult device_get(CUdevice* device, int ordinal) {
  if (ordinal < 0 || ordinal >= kDevices) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return enter("cuDeviceGet");
}
CUresult device_get_attribute(int* value, CUdevice_attribute attribute, CUdevice) {
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *value = 132;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *value = static_cast<int>(env_size("FAKE_CUDA_CC", 90) / 10);
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *value = static_cast<int>(env_size("FAKE_CUDA_CC", 90) % 10);
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
      *value = env_size("FAKE_CUDA_CC", 90) >= 90 ? 227 << 10 : 163 << 10;
      break;
    default:
      *value = 1;
  }
  return enter("cuDeviceGetAttribute " + std::to_string(attribute));
}
CUresult device_get_name(char* name, int length, CUdevice) {
  std::snprintf(name, length, "NVIDIA H100 80GB HBM3 (fake)");
  return enter("cuDeviceGetName");
}
CUresult device_can_access_peer(int* can, CUdevice, CUdevice) {
  *can = 1;
  return enter("cuDeviceCanAccessPeer");
}
CUresult primary_ctx_retain(CUcontext* context, CUdevice device) {
  if (device < 0 || device >= kDevices) return CUDA_ERROR_INVALID_DEVICE;
  if (CUresult e = enter("cuDevicePrimaryCtxRetain")) return e;
  ++contexts[device].retains;
  *context = reinterpret_cast<CUcontext>(&contexts[device]);
  return CUDA_SUCCESS;
}
CUresult primary_ctx_release(CUdevice device) {
  if (device < 0 || device >= kDevices) return CUDA_ERROR_INVALID_DEVICE;
  --contexts[device].retains;
  return enter("cuDevicePrimaryCtxRelease");
}
CUresult ctx_get_current(CUcontext* context) {
  *context = current;
  return CUDA_SUCCESS;
}
CUresult ctx_set_current(CUcontext context) {
  current = context;
  return CUDA_SUCCESS;
}
CUresult ctx_synchronize() {
  std::vector<Stream*> live;
  {
    std::lock_guard<std::mutex> hold(streams_mu);
    live.assign(streams.begin(), streams.end());
  }
  for (Stream* s : live) s->queue.sync();
  return enter("cuCtxSynchronize");
}

CUresult mem_alloc(CUdeviceptr* ptr, size_t bytes) {
  if (CUresult e = enter("cuMemAlloc", CUDA_ERROR_OUT_OF_MEMORY)) return e;
  void* p = std::aligned_alloc(256, std::max<size_t>(256, (bytes + 255) / 256 * 256));
  if (p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  *ptr = address(p);
  std::lock_guard<std::mutex> hold(memory_mu);
  allocations[*ptr] = bytes;
  return CUDA_SUCCESS;
}
CUresult mem_free(CUdeviceptr ptr) {
  {
    std::lock_guard<std::mutex> hold(memory_mu);
    if (allocations.erase(ptr) == 0) return CUDA_ERROR_INVALID_VALUE;
  }
  std::free(at(ptr));
  return enter("cuMemFree");
}
CUresult mem_get_info(size_t* free, size_t* total) {
  size_t used = 0;
  {
    std::lock_guard<std::mutex> hold(memory_mu);
    used = created_bytes;
    for (const auto& [ptr, bytes] : allocations) used += bytes;
  }
  *total = kMemoryBytes;
  *free = kMemoryBytes - used;
  return enter("cuMemGetInfo");
}
CUresult mem_host_alloc(void** ptr, size_t bytes, unsigned) {
  if (CUresult e = enter("cuMemHostAlloc", CUDA_ERROR_OUT_OF_MEMORY)) return e;
  *ptr = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  return *ptr != nullptr ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult mem_free_host(void* ptr) {
  std::free(ptr);
  return enter("cuMemFreeHost");
}
CUresult mem_host_get_device_pointer(CUdeviceptr* device, void* host, unsigned) {
  *device = address(host);
  return enter("cuMemHostGetDevicePointer");
}
CUresult memcpy_htod(CUdeviceptr dst, const void* src, size_t bytes) {
  if (CUresult e = enter("cuMemcpyHtoD")) return e;
  std::memcpy(at(dst), src, bytes);
  return CUDA_SUCCESS;
}
CUresult memcpy_dtoh(void* dst, CUdeviceptr src, size_t bytes) {
  if (CUresult e = enter("cuMemcpyDtoH")) return e;
  std::memcpy(dst, at(src), bytes);
  return CUDA_SUCCESS;
}
CUresult memcpy_dtod(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  if (CUresult e = enter("cuMemcpyDtoD")) return e;
  std::memmove(at(dst), at(src), bytes);
  return CUDA_SUCCESS;
}
CUresult copy_on(const char* call, CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  if (CUresult e = enter(call)) return e;
  on(stream, [=] { std::memcpy(at(dst), at(src), bytes); });
  return CUDA_SUCCESS;
}
CUresult memcpy_htod_async(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream) {
  return copy_on("cuMemcpyHtoDAsync", dst, address(src), bytes, stream);
}
CUresult memcpy_dtoh_async(void* dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  return copy_on("cuMemcpyDtoHAsync", address(dst), src, bytes, stream);
}
CUresult memcpy_dtod_async(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  return copy_on("cuMemcpyDtoDAsync", dst, src, bytes, stream);
}
CUresult memcpy_async(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  return copy_on("cuMemcpyAsync", dst, src, bytes, stream);
}
CUresult memcpy_peer_async(CUdeviceptr dst, CUcontext, CUdeviceptr src, CUcontext, size_t bytes, CUstream stream) {
  return copy_on("cuMemcpyPeerAsync", dst, src, bytes, stream);
}
CUresult memcpy_2d_async(const CUDA_MEMCPY2D* copy, CUstream stream) {
  if (copy->srcMemoryType != CU_MEMORYTYPE_DEVICE || copy->dstMemoryType != CU_MEMORYTYPE_DEVICE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult e = enter("cuMemcpy2DAsync")) return e;
  const CUDA_MEMCPY2D c = *copy;
  on(stream, [=] {
    for (size_t r = 0; r < c.Height; ++r) {
      std::memcpy(static_cast<char*>(at(c.dstDevice)) + (c.dstY + r) * c.dstPitch + c.dstXInBytes,
                  static_cast<const char*>(at(c.srcDevice)) + (c.srcY + r) * c.srcPitch + c.srcXInBytes,
                  c.WidthInBytes);
    }
  });
  return CUDA_SUCCESS;
}
CUresult memset_d8(CUdeviceptr dst, unsigned char value, size_t count) {
  if (CUresult e = enter("cuMemsetD8")) return e;
  std::memset(at(dst), value, count);
  return CUDA_SUCCESS;
}

CUresult stream_create(CUstream* stream, unsigned) {
  if (CUresult e = enter("cuStreamCreate")) return e;
  auto* s = new Stream;
  {
    std::lock_guard<std::mutex> hold(streams_mu);
    streams.insert(s);
  }
  *stream = reinterpret_cast<CUstream>(s);
  return CUDA_SUCCESS;
}
CUresult stream_destroy(CUstream stream) {
  {
    std::lock_guard<std::mutex> hold(streams_mu);
    streams.erase(stream_of(stream));
  }
  delete stream_of(stream);
  return enter("cuStreamDestroy");
}
CUresult stream_synchronize(CUstream stream) {
  if (stream != nullptr) stream_of(stream)->queue.sync();
  return enter("cuStreamSynchronize");
}
CUresult stream_query(CUstream stream) {
  return stream == nullptr || stream_of(stream)->queue.idle() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult event_create(CUevent* event, unsigned) {
  *event = reinterpret_cast<CUevent>(new Event);
  return enter("cuEventCreate");
}
CUresult event_destroy(CUevent event) {
  delete reinterpret_cast<Event*>(event);
  return enter("cuEventDestroy");
}
CUresult event_record(CUevent event, CUstream stream) {
  auto* e = reinterpret_cast<Event*>(event);
  const uint64_t mine = ++e->records;
  on(stream, [=] {
    e->at_ns.store(now_ns());
    e->completed.store(std::max(e->completed.load(), mine));
  });
  return enter("cuEventRecord");
}
bool event_done(const Event* e) { return e->completed.load() >= e->records.load(); }
CUresult event_query(CUevent event) {
  return event_done(reinterpret_cast<Event*>(event)) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult event_synchronize(CUevent event) {
  auto* e = reinterpret_cast<Event*>(event);
  tessel::fake::wait_until(nullptr, [&] { return event_done(e); });
  return enter("cuEventSynchronize");
}
CUresult event_elapsed_time(float* ms, CUevent start, CUevent end) {
  auto* s = reinterpret_cast<Event*>(start);
  auto* e = reinterpret_cast<Event*>(end);
  if (!event_done(s) || !event_done(e)) return CUDA_ERROR_NOT_READY;
  *ms = static_cast<float>(e->at_ns.load() - s->at_ns.load()) / 1e6f;
  return enter("cuEventElapsedTime");
}
CUresult stream_wait_event(CUstream stream, CUevent event, unsigned) {
  auto* e = reinterpret_cast<Event*>(event);
  const uint64_t until = e->records.load();
  on(stream, [=] { wait_until(stream, [&] { return e->completed.load() >= until; }); });
  return enter("cuStreamWaitEvent");
}
std::atomic_ref<uint64_t> word(CUdeviceptr p) { return std::atomic_ref<uint64_t>(*static_cast<uint64_t*>(at(p))); }
CUresult stream_wait_value64(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned flags) {
  if (flags != CU_STREAM_WAIT_VALUE_GEQ) return CUDA_ERROR_INVALID_VALUE;
  // Cyclic: (int64_t)(*addr - value) >= 0.
  on(stream, [=] { wait_until(stream, [&] { return static_cast<int64_t>(word(addr).load() - value) >= 0; }); });
  return enter("cuStreamWaitValue64");
}
CUresult stream_write_value64(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned) {
  on(stream, [=] { word(addr).store(value, std::memory_order_release); });
  return enter("cuStreamWriteValue64");
}
CUresult stream_batch_mem_op(CUstream stream, unsigned count, CUstreamBatchMemOpParams* ops, unsigned) {
  std::vector<std::pair<CUdeviceptr, uint64_t>> writes;
  for (unsigned i = 0; i < count; ++i) {
    if (ops[i].writeValue.operation != CU_STREAM_MEM_OP_WRITE_VALUE_64) return CUDA_ERROR_INVALID_VALUE;
    writes.emplace_back(ops[i].writeValue.address, ops[i].writeValue.value64);
  }
  on(stream, [=] {
    for (const auto& [addr, value] : writes) word(addr).store(value, std::memory_order_release);
  });
  return enter("cuStreamBatchMemOp " + std::to_string(count));
}

CUresult stream_begin_capture(CUstream stream, CUstreamCaptureMode) {
  if (stream == nullptr || stream_of(stream)->capture != nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (CUresult e = enter("cuStreamBeginCapture")) return e;
  stream_of(stream)->capture = std::make_unique<Graph>();
  return CUDA_SUCCESS;
}
CUresult stream_end_capture(CUstream stream, CUgraph* graph) {
  Graph* g = stream != nullptr ? stream_of(stream)->capture.release() : nullptr;
  if (g == nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
  *graph = reinterpret_cast<CUgraph>(g);
  return enter("cuStreamEndCapture " + std::to_string(g->ops.size()) + " ops");
}
CUresult stream_is_capturing(CUstream stream, CUstreamCaptureStatus* status) {
  *status = stream != nullptr && stream_of(stream)->capture != nullptr ? CU_STREAM_CAPTURE_STATUS_ACTIVE
                                                                       : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
CUresult graph_instantiate(CUgraphExec* exec, CUgraph graph, unsigned long long) {
  if (CUresult e = enter("cuGraphInstantiateWithFlags")) return e;
  *exec = reinterpret_cast<CUgraphExec>(new Graph(*reinterpret_cast<Graph*>(graph)));
  return CUDA_SUCCESS;
}
CUresult graph_launch(CUgraphExec exec, CUstream stream) {
  if (CUresult e = enter("cuGraphLaunch")) return e;
  for (const auto& op : reinterpret_cast<Graph*>(exec)->ops) on(stream, op);
  return CUDA_SUCCESS;
}
CUresult graph_exec_destroy(CUgraphExec exec) {
  delete reinterpret_cast<Graph*>(exec);
  return enter("cuGraphExecDestroy");
}
CUresult graph_destroy(CUgraph graph) {
  delete reinterpret_cast<Graph*>(graph);
  return enter("cuGraphDestroy");
}

// The JIT linker: FAKE_CUDA_JIT_ERROR refuses the PTX with that log;
// FAKE_CUDA_SERIALIZED writes ptxas's note on serialized wgmma.
CUresult link_create(unsigned count, CUjit_option* keys, void** values, CUlinkState* state) {
  if (CUresult e = enter("cuLinkCreate")) return e;
  auto* link = new Link;
  for (unsigned i = 0; i < count; ++i) {
    const auto bytes = static_cast<size_t>(reinterpret_cast<uintptr_t>(values[i]));
    if (keys[i] == CU_JIT_ERROR_LOG_BUFFER) link->error_log = static_cast<char*>(values[i]);
    if (keys[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) link->error_bytes = bytes;
    if (keys[i] == CU_JIT_INFO_LOG_BUFFER) link->info_log = static_cast<char*>(values[i]);
    if (keys[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES) link->info_bytes = bytes;
  }
  *state = reinterpret_cast<CUlinkState>(link);
  return CUDA_SUCCESS;
}
CUresult link_add_data(CUlinkState state, CUjitInputType type, void* data, size_t bytes, const char* name, unsigned,
                       CUjit_option*, void**) {
  if (CUresult e = enter(std::string("cuLinkAddData ") + name)) return e;
  auto* link = reinterpret_cast<Link*>(state);
  if (type != CU_JIT_INPUT_PTX) return CUDA_ERROR_INVALID_VALUE;
  if (const char* error = std::getenv("FAKE_CUDA_JIT_ERROR"); error != nullptr) {
    write_log(link->error_log, link->error_bytes, error);
    return static_cast<CUresult>(218);  // CUDA_ERROR_INVALID_PTX
  }
  link->ptx.assign(static_cast<const char*>(data), strnlen(static_cast<const char*>(data), bytes));
  return CUDA_SUCCESS;
}
CUresult link_complete(CUlinkState state, void** cubin, size_t* bytes) {
  if (CUresult e = enter("cuLinkComplete")) return e;
  auto* link = reinterpret_cast<Link*>(state);
  if (std::getenv("FAKE_CUDA_SERIALIZED") != nullptr) {
    write_log(link->info_log, link->info_bytes,
              "ptxas info: Potential Performance Loss: wgmma.mma_async instructions are serialized due to the "
              "presence of Extern calls in the function");
  }
  link->cubin = kCubinMagic + link->ptx;
  *cubin = link->cubin.data();
  *bytes = link->cubin.size();
  return CUDA_SUCCESS;
}
CUresult link_destroy(CUlinkState state) {
  delete reinterpret_cast<Link*>(state);
  return enter("cuLinkDestroy");
}

// A "cubin" of the fake linker or PTX text (a whole-program load).
CUresult module_load_data_ex(CUmodule* module, const void* image, unsigned, CUjit_option*, void**) {
  const auto* text = static_cast<const char*>(image);
  const bool cubin = std::strncmp(text, kCubinMagic, std::strlen(kCubinMagic)) == 0;
  const bool ptx = std::strstr(text, ".version") != nullptr;
  if (CUresult e = enter(std::string("cuModuleLoadDataEx ") + (cubin ? "cubin"
                                                               : ptx ? "ptx"
                                                                     : "other"),
                         static_cast<CUresult>(200))) {
    return e;
  }
  if (!cubin && !ptx) return static_cast<CUresult>(200);  // CUDA_ERROR_INVALID_IMAGE
  *module = reinterpret_cast<CUmodule>(new Module{cubin ? text + std::strlen(kCubinMagic) : text, {}, {}});
  return CUDA_SUCCESS;
}
CUresult module_unload(CUmodule module) {
  delete reinterpret_cast<Module*>(module);
  return enter("cuModuleUnload");
}
// A global the PTX declares (".global .align 4 .u32 name;", "... .b8 name[N];").
CUresult module_get_global(CUdeviceptr* ptr, size_t* bytes, CUmodule module, const char* name) {
  if (CUresult e = enter(std::string("cuModuleGetGlobal ") + name, CUDA_ERROR_NOT_FOUND)) return e;
  auto* m = reinterpret_cast<Module*>(module);
  const std::regex declared(std::string(R"(\.global\s+(?:\.align\s+\d+\s+)?(\.[bsuf](?:8|16|32|64))\s+)") + name +
                            R"((?:\[(\d+)\])?\s*;)");
  std::smatch match;
  if (!std::regex_search(m->ptx, match, declared)) return CUDA_ERROR_NOT_FOUND;
  const size_t size = declared_bytes(match[1], match[2]);
  auto& memory = m->globals[name];
  if (memory == nullptr) memory = std::make_unique<uint8_t[]>(size);
  *ptr = address(memory.get());
  *bytes = env_size("FAKE_CUDA_GLOBAL_BYTES", size);
  std::lock_guard<std::mutex> hold(globals_mu);
  last_globals[name] = memory.get();
  return CUDA_SUCCESS;
}
// An entry the PTX defines, with its parameters' sizes.
CUresult module_get_function(CUfunction* function, CUmodule module, const char* name) {
  if (CUresult e = enter(std::string("cuModuleGetFunction ") + name, CUDA_ERROR_NOT_FOUND)) return e;
  auto* m = reinterpret_cast<Module*>(module);
  const std::string head = std::string(".entry ") + name + "(";
  const size_t begin = m->ptx.find(head);
  if (begin == std::string::npos) return CUDA_ERROR_NOT_FOUND;
  const size_t end = m->ptx.find(')', begin);
  const std::string list = m->ptx.substr(begin + head.size(), end - begin - head.size());
  auto f = std::make_unique<Function>();
  f->name = name;
  const std::regex param(R"(\.param\s+(?:\.align\s+\d+\s+)?(\.[bsuf](?:8|16|32|64))\s+\w+(?:\[(\d+)\])?)");
  for (auto it = std::sregex_iterator(list.begin(), list.end(), param); it != std::sregex_iterator(); ++it) {
    f->param_bytes.push_back(declared_bytes((*it)[1], (*it)[2]));
  }
  const std::regex shared(R"(\.shared\s+(?:\.align\s+\d+\s+)?(\.[bsuf](?:8|16|32|64))\s+\w+(?:\[(\d+)\])?\s*;)");
  for (auto it = std::sregex_iterator(m->ptx.begin(), m->ptx.end(), shared); it != std::sregex_iterator(); ++it) {
    f->static_shared += declared_bytes((*it)[1], (*it)[2]);
  }
  *function = reinterpret_cast<CUfunction>(f.get());
  m->functions[name] = std::move(f);
  return CUDA_SUCCESS;
}
Function* function_of(CUfunction f) { return reinterpret_cast<Function*>(f); }
CUresult func_load(CUfunction f) { return enter("cuFuncLoad " + function_of(f)->name); }
CUresult func_get_attribute(int* value, CUfunction_attribute attribute, CUfunction f) {
  if (attribute == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK) {
    *value = static_cast<int>(env_size("FAKE_CUDA_MAX_THREADS", 1024));
  } else if (attribute == CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES) {
    *value = static_cast<int>(function_of(f)->static_shared);
  } else {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return enter("cuFuncGetAttribute " + std::to_string(attribute));
}
CUresult func_set_attribute(CUfunction f, CUfunction_attribute attribute, int value) {
  return enter("cuFuncSetAttribute " + function_of(f)->name + " " + std::to_string(attribute) + " " +
               std::to_string(value));
}
// What sm_90 allows by threads and shared memory alone.
CUresult occupancy_max_active_blocks(int* blocks, CUfunction f, int threads, size_t shared) {
  const int by_threads = 2048 / std::max(1, threads);
  const size_t total = shared + function_of(f)->static_shared;
  const int by_shared = total == 0 ? by_threads : static_cast<int>((size_t{228} << 10) / total);
  *blocks = std::min({by_threads, by_shared, 32});
  return enter("cuOccupancyMaxActiveBlocksPerMultiprocessor " + function_of(f)->name);
}
CUresult launch_kernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                       unsigned shared, CUstream stream, void** kernel_params, void** extra) {
  Function* fn = function_of(f);
  const std::string call = "cuLaunchKernel " + fn->name + " grid " + std::to_string(gx) + "," + std::to_string(gy) +
                           "," + std::to_string(gz) + " block " + std::to_string(bx) + "," + std::to_string(by) + "," +
                           std::to_string(bz) + " shared " + std::to_string(shared);
  if (CUresult e = enter(call)) return e;
  if (kernel_params == nullptr || extra != nullptr) return CUDA_ERROR_INVALID_VALUE;
  {
    std::lock_guard<std::mutex> hold(log_mu);
    params.clear();
    for (size_t i = 0; i < fn->param_bytes.size(); ++i) {
      const auto* bytes = static_cast<const uint8_t*>(kernel_params[i]);
      params.insert(params.end(), bytes, bytes + fn->param_bytes[i]);
    }
  }
  on(stream, [name = fn->name] { note("ran " + name); });
  return CUDA_SUCCESS;
}

// The map's words hold what it was encoded from, so that a test can find
// them in a launch's parameters.
CUresult tensor_map_encode_tiled(CUtensorMap* map, CUtensorMapDataType dtype, cuuint32_t rank, void* base,
                                 const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                                 const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
                                 CUtensorMapSwizzle swizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill fill) {
  std::string call = "cuTensorMapEncodeTiled dtype " + std::to_string(dtype) + " rank " + std::to_string(rank);
  std::string dim_list, box_list;
  for (cuuint32_t i = 0; i < rank; ++i) {
    dim_list += (i ? "," : "") + std::to_string(dims[i]);
    box_list += (i ? "," : "") + std::to_string(box[i]);
    if (element_strides[i] != 1) return CUDA_ERROR_INVALID_VALUE;
  }
  call += " dims " + dim_list + " box " + box_list + " swizzle " + std::to_string(swizzle);
  if (CUresult e = enter(call)) return e;
  if (rank == 0 || rank > 5 || interleave != CU_TENSOR_MAP_INTERLEAVE_NONE) return CUDA_ERROR_INVALID_VALUE;
  *map = CUtensorMap{};
  map->opaque[0] = address(base);
  map->opaque[1] = (uint64_t{static_cast<uint32_t>(dtype)} << 32) | rank;
  map->opaque[2] = (uint64_t{static_cast<uint32_t>(swizzle)} << 32) | static_cast<uint32_t>(fill);
  for (cuuint32_t i = 0; i < rank; ++i) {
    map->opaque[3 + i] = dims[i];
    map->opaque[8 + i] = box[i];
    if (i + 1 < rank && 13 + i < 16) map->opaque[13 + i] = strides[i];
  }
  return CUDA_SUCCESS;
}

// The virtual memory API reserves and maps host address space.
bool device_location(const CUmemLocation& location) {
  return location.type == CU_MEM_LOCATION_TYPE_DEVICE && location.id >= 0 && location.id < kDevices;
}
CUresult mem_get_allocation_granularity(size_t* granularity, const CUmemAllocationProp* prop,
                                        CUmemAllocationGranularity_flags) {
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || !device_location(prop->location)) return CUDA_ERROR_INVALID_VALUE;
  *granularity = size_t{2} << 20;
  return enter("cuMemGetAllocationGranularity");
}
CUresult mem_address_reserve(CUdeviceptr* ptr, size_t size, size_t, CUdeviceptr, unsigned long long) {
  if (CUresult e = enter("cuMemAddressReserve", CUDA_ERROR_OUT_OF_MEMORY)) return e;
  void* p = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  *ptr = address(p);
  return CUDA_SUCCESS;
}
CUresult mem_address_free(CUdeviceptr ptr, size_t size) {
  munmap(at(ptr), size);
  return enter("cuMemAddressFree");
}
CUresult mem_create(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                    unsigned long long) {
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || !device_location(prop->location)) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult e = enter("cuMemCreate", CUDA_ERROR_OUT_OF_MEMORY)) return e;
  const int fd = static_cast<int>(syscall(SYS_memfd_create, "fake_cuda", 0));
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  *handle = reinterpret_cast<uintptr_t>(new Allocation{fd, size});
  std::lock_guard<std::mutex> hold(memory_mu);
  created_bytes += size;
  return CUDA_SUCCESS;
}
Allocation* allocation_of(CUmemGenericAllocationHandle handle) {
  return reinterpret_cast<Allocation*>(static_cast<uintptr_t>(handle));
}
CUresult mem_release(CUmemGenericAllocationHandle handle) {
  {
    std::lock_guard<std::mutex> hold(memory_mu);
    created_bytes -= allocation_of(handle)->bytes;
  }
  close(allocation_of(handle)->fd);
  delete allocation_of(handle);
  return enter("cuMemRelease");
}
CUresult mem_export_to_shareable_handle(void* shareable, CUmemGenericAllocationHandle handle,
                                        CUmemAllocationHandleType type, unsigned long long) {
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
  *static_cast<int*>(shareable) = dup(allocation_of(handle)->fd);
  return enter("cuMemExportToShareableHandle");
}
CUresult mem_import_from_shareable_handle(CUmemGenericAllocationHandle* handle, void* os_handle,
                                          CUmemAllocationHandleType type) {
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
  const int fd = dup(static_cast<int>(reinterpret_cast<intptr_t>(os_handle)));
  const off_t size = lseek(fd, 0, SEEK_END);
  *handle = reinterpret_cast<uintptr_t>(new Allocation{fd, static_cast<size_t>(size)});
  {
    std::lock_guard<std::mutex> hold(memory_mu);
    created_bytes += static_cast<size_t>(size);
  }
  return enter("cuMemImportFromShareableHandle");
}
CUresult mem_map(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle, unsigned long long) {
  if (offset != 0 || allocation_of(handle)->bytes != size) return CUDA_ERROR_INVALID_VALUE;
  void* p = mmap(at(ptr), size, PROT_NONE, MAP_SHARED | MAP_FIXED, allocation_of(handle)->fd, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  return enter("cuMemMap");
}
CUresult mem_unmap(CUdeviceptr ptr, size_t size) {
  mmap(at(ptr), size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  return enter("cuMemUnmap");
}
CUresult mem_set_access(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    if (!device_location(desc[i].location) || desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  if (mprotect(at(ptr), size, PROT_READ | PROT_WRITE) != 0) return CUDA_ERROR_INVALID_VALUE;
  return enter("cuMemSetAccess");
}

const std::map<std::string, void*>& entries() {
  static const auto* table = new std::map<std::string, void*>{
      {"cuInit", reinterpret_cast<void*>(&init)},
      {"cuDriverGetVersion", reinterpret_cast<void*>(&driver_get_version)},
      {"cuGetErrorName", reinterpret_cast<void*>(&get_error_name)},
      {"cuGetErrorString", reinterpret_cast<void*>(&get_error_string)},
      {"cuDeviceGet", reinterpret_cast<void*>(&device_get)},
      {"cuDeviceGetCount", reinterpret_cast<void*>(&device_get_count)},
      {"cuDeviceGetAttribute", reinterpret_cast<void*>(&device_get_attribute)},
      {"cuDeviceGetName", reinterpret_cast<void*>(&device_get_name)},
      {"cuDeviceCanAccessPeer", reinterpret_cast<void*>(&device_can_access_peer)},
      {"cuDevicePrimaryCtxRetain", reinterpret_cast<void*>(&primary_ctx_retain)},
      {"cuDevicePrimaryCtxRelease", reinterpret_cast<void*>(&primary_ctx_release)},
      {"cuCtxGetCurrent", reinterpret_cast<void*>(&ctx_get_current)},
      {"cuCtxSetCurrent", reinterpret_cast<void*>(&ctx_set_current)},
      {"cuCtxSynchronize", reinterpret_cast<void*>(&ctx_synchronize)},
      {"cuMemAlloc", reinterpret_cast<void*>(&mem_alloc)},
      {"cuMemFree", reinterpret_cast<void*>(&mem_free)},
      {"cuMemGetInfo", reinterpret_cast<void*>(&mem_get_info)},
      {"cuMemHostAlloc", reinterpret_cast<void*>(&mem_host_alloc)},
      {"cuMemFreeHost", reinterpret_cast<void*>(&mem_free_host)},
      {"cuMemHostGetDevicePointer", reinterpret_cast<void*>(&mem_host_get_device_pointer)},
      {"cuMemcpyHtoD", reinterpret_cast<void*>(&memcpy_htod)},
      {"cuMemcpyDtoH", reinterpret_cast<void*>(&memcpy_dtoh)},
      {"cuMemcpyDtoD", reinterpret_cast<void*>(&memcpy_dtod)},
      {"cuMemcpyHtoDAsync", reinterpret_cast<void*>(&memcpy_htod_async)},
      {"cuMemcpyDtoHAsync", reinterpret_cast<void*>(&memcpy_dtoh_async)},
      {"cuMemcpyDtoDAsync", reinterpret_cast<void*>(&memcpy_dtod_async)},
      {"cuMemcpyAsync", reinterpret_cast<void*>(&memcpy_async)},
      {"cuMemcpy2DAsync", reinterpret_cast<void*>(&memcpy_2d_async)},
      {"cuMemcpyPeerAsync", reinterpret_cast<void*>(&memcpy_peer_async)},
      {"cuMemsetD8", reinterpret_cast<void*>(&memset_d8)},
      {"cuStreamCreate", reinterpret_cast<void*>(&stream_create)},
      {"cuStreamDestroy", reinterpret_cast<void*>(&stream_destroy)},
      {"cuStreamSynchronize", reinterpret_cast<void*>(&stream_synchronize)},
      {"cuStreamQuery", reinterpret_cast<void*>(&stream_query)},
      {"cuStreamWaitEvent", reinterpret_cast<void*>(&stream_wait_event)},
      {"cuEventCreate", reinterpret_cast<void*>(&event_create)},
      {"cuEventRecord", reinterpret_cast<void*>(&event_record)},
      {"cuEventQuery", reinterpret_cast<void*>(&event_query)},
      {"cuEventSynchronize", reinterpret_cast<void*>(&event_synchronize)},
      {"cuEventElapsedTime", reinterpret_cast<void*>(&event_elapsed_time)},
      {"cuEventDestroy", reinterpret_cast<void*>(&event_destroy)},
      {"cuStreamWaitValue64", reinterpret_cast<void*>(&stream_wait_value64)},
      {"cuStreamWriteValue64", reinterpret_cast<void*>(&stream_write_value64)},
      {"cuStreamBatchMemOp", reinterpret_cast<void*>(&stream_batch_mem_op)},
      {"cuStreamBeginCapture", reinterpret_cast<void*>(&stream_begin_capture)},
      {"cuStreamEndCapture", reinterpret_cast<void*>(&stream_end_capture)},
      {"cuStreamIsCapturing", reinterpret_cast<void*>(&stream_is_capturing)},
      {"cuGraphInstantiateWithFlags", reinterpret_cast<void*>(&graph_instantiate)},
      {"cuGraphLaunch", reinterpret_cast<void*>(&graph_launch)},
      {"cuGraphExecDestroy", reinterpret_cast<void*>(&graph_exec_destroy)},
      {"cuGraphDestroy", reinterpret_cast<void*>(&graph_destroy)},
      {"cuLinkCreate", reinterpret_cast<void*>(&link_create)},
      {"cuLinkAddData", reinterpret_cast<void*>(&link_add_data)},
      {"cuLinkComplete", reinterpret_cast<void*>(&link_complete)},
      {"cuLinkDestroy", reinterpret_cast<void*>(&link_destroy)},
      {"cuModuleLoadDataEx", reinterpret_cast<void*>(&module_load_data_ex)},
      {"cuModuleUnload", reinterpret_cast<void*>(&module_unload)},
      {"cuModuleGetGlobal", reinterpret_cast<void*>(&module_get_global)},
      {"cuModuleGetFunction", reinterpret_cast<void*>(&module_get_function)},
      {"cuFuncLoad", reinterpret_cast<void*>(&func_load)},
      {"cuFuncGetAttribute", reinterpret_cast<void*>(&func_get_attribute)},
      {"cuFuncSetAttribute", reinterpret_cast<void*>(&func_set_attribute)},
      {"cuOccupancyMaxActiveBlocksPerMultiprocessor", reinterpret_cast<void*>(&occupancy_max_active_blocks)},
      {"cuLaunchKernel", reinterpret_cast<void*>(&launch_kernel)},
      {"cuTensorMapEncodeTiled", reinterpret_cast<void*>(&tensor_map_encode_tiled)},
      {"cuMemGetAllocationGranularity", reinterpret_cast<void*>(&mem_get_allocation_granularity)},
      {"cuMemAddressReserve", reinterpret_cast<void*>(&mem_address_reserve)},
      {"cuMemAddressFree", reinterpret_cast<void*>(&mem_address_free)},
      {"cuMemCreate", reinterpret_cast<void*>(&mem_create)},
      {"cuMemRelease", reinterpret_cast<void*>(&mem_release)},
      {"cuMemExportToShareableHandle", reinterpret_cast<void*>(&mem_export_to_shareable_handle)},
      {"cuMemImportFromShareableHandle", reinterpret_cast<void*>(&mem_import_from_shareable_handle)},
      {"cuMemMap", reinterpret_cast<void*>(&mem_map)},
      {"cuMemUnmap", reinterpret_cast<void*>(&mem_unmap)},
      {"cuMemSetAccess", reinterpret_cast<void*>(&mem_set_access)},
  };
  return *table;
}

}  // namespace

extern "C" {

CUresult cuGetProcAddress_v2(const char* symbol, void** fn, int, cuuint64_t, CUdriverProcAddressQueryResult* found) {
  const char* missing = std::getenv("FAKE_CUDA_MISSING");
  auto it = entries().find(symbol);
  if (it == entries().end() || (missing != nullptr && std::strcmp(missing, symbol) == 0)) {
    *fn = nullptr;
    *found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
  }
  *fn = it->second;
  *found = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

const char* fake_cuda_log() {
  std::lock_guard<std::mutex> hold(log_mu);
  static std::string copy;
  copy = calls;
  return copy.c_str();
}
// The bytes of the last launch's parameters, one after another.
const uint8_t* fake_cuda_params(size_t* size) {
  std::lock_guard<std::mutex> hold(log_mu);
  static std::vector<uint8_t> copy;
  copy = params;
  *size = copy.size();
  return copy.data();
}
// The memory of the global of that name cuModuleGetGlobal last handed out.
void* fake_cuda_global(const char* name) {
  std::lock_guard<std::mutex> hold(globals_mu);
  auto it = last_globals.find(name);
  return it != last_globals.end() ? it->second : nullptr;
}
void fake_cuda_reset() {
  std::lock_guard<std::mutex> hold(log_mu);
  calls.clear();
  params.clear();
}

}  // extern "C"
