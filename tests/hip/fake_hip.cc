// A stand-in for libamdhip64 that records the calls tessel makes: two AMD
// GPUs (gfx942, 304 CUs) whose memory is host memory and whose launches run
// nothing. Streams are threads that run their copies, 64-bit waits and
// writes and event records in order, as a GPU's queues would; the virtual
// memory API reserves and maps host address space. FAKE_HIP_FAIL=<call>
// makes that call fail; FAKE_HIP_GLOBAL_BYTES misreports a global's size;
// FAKE_HIP_NO_PEER denies peer access; FAKE_HIP_BUS_ID replaces the GPUs'
// PCI addresses. The tests read the record through fake_hip_log() and
// fake_hip_kernarg().
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tests/codegen/code_object_reader.h"
#include "tests/fake_queue.h"

namespace {

constexpr int kDevices = 2;
std::mutex log_mu;
std::string calls;
std::vector<uint8_t> kernarg;

int enter(const char* call, int failure) {
  {
    std::lock_guard<std::mutex> hold(log_mu);
    calls += call;
    calls += '\n';
  }
  const char* fail = std::getenv("FAKE_HIP_FAIL");
  return fail != nullptr && std::strcmp(fail, call) == 0 ? failure : 0;
}

using Stream = tessel::fake::Queue;

// Runs `op` on `stream`, or at once on the null stream.
void on(void* stream, std::function<void()> op) {
  if (stream == nullptr) {
    op();
  } else {
    static_cast<Stream*>(stream)->push(std::move(op));
  }
}
// Polls `done` until it holds or the stream goes.
void wait_until(void* stream, const std::function<bool()>& done) {
  tessel::fake::wait_until(static_cast<const Stream*>(stream), done);
}

struct Event {
  std::atomic<uint64_t> records{0}, completed{0};
};
struct Allocation {
  size_t bytes;
};

// A loaded code object, its globals (zeroed host memory) made on request.
struct Module {
  std::string image;
  std::vector<std::unique_ptr<uint8_t[]>> globals;
};
void* last_global = nullptr;
struct Function {
  std::string name;
};

}  // namespace

extern "C" {

const char* fake_hip_log() {
  std::lock_guard<std::mutex> hold(log_mu);
  static std::string copy;
  copy = calls;
  return copy.c_str();
}
const uint8_t* fake_hip_kernarg(size_t* size) {
  *size = kernarg.size();
  return kernarg.data();
}
// The memory of the global hipModuleGetGlobal last handed out.
void* fake_hip_last_global() { return last_global; }
void fake_hip_reset() {
  std::lock_guard<std::mutex> hold(log_mu);
  calls.clear();
  kernarg.clear();
}

const char* hipGetErrorName(int error) {
  switch (error) {
    case 1:
      return "hipErrorInvalidValue";
    case 2:
      return "hipErrorOutOfMemory";
    case 100:
      return "hipErrorNoDevice";
    case 200:
      return "hipErrorInvalidImage";
    case 500:
      return "hipErrorNotFound";
    case 600:
      return "hipErrorNotReady";
    default:
      return "hipErrorUnknown";
  }
}
const char* hipGetErrorString(int) { return "reported by the fake HIP runtime"; }

int hipInit(unsigned) { return enter("hipInit", 100); }
int hipGetDeviceCount(int* count) {
  *count = kDevices;
  return enter("hipGetDeviceCount", 100);
}
int hipSetDevice(int device) { return device >= 0 && device < kDevices ? 0 : 101; }
int hipDeviceGetAttribute(int* value, int attribute, int) {
  *value = attribute == 63 ? 304 : 0;
  return enter("hipDeviceGetAttribute", 1);
}
int hipDeviceGetName(char* name, int length, int) {
  std::strncpy(name, "AMD Instinct MI300X (fake)", length);
  return enter("hipDeviceGetName", 1);
}
// The GPUs' PCI addresses (fake_hsakmt.cc's topology lists the same).
int hipDeviceGetPCIBusId(char* bus, int length, int device) {
  if (device < 0 || device >= kDevices) return 101;
  // FAKE_HIP_BUS_ID replaces the address with its own text.
  if (const char* text = std::getenv("FAKE_HIP_BUS_ID"); text != nullptr) {
    std::snprintf(bus, length, "%s", text);
  } else {
    std::snprintf(bus, length, "0000:%02x:00.0", device == 0 ? 0x03 : 0x43);
  }
  return enter("hipDeviceGetPCIBusId", 1);
}
// ROCm 6's properties layout: gcnArchName at byte 1160.
int hipGetDevicePropertiesR0600(void* properties, int) {
  std::strcpy(static_cast<char*>(properties) + 1160, "gfx942:sramecc+:xnack-");
  return enter("hipGetDevicePropertiesR0600", 1);
}
int hipGetDeviceProperties(void* properties, int) {
  std::strcpy(static_cast<char*>(properties) + 396, "gfx942:sramecc+:xnack-");
  return enter("hipGetDeviceProperties", 1);
}
int hipDeviceSynchronize() { return enter("hipDeviceSynchronize", 1); }
int hipMalloc(void** ptr, size_t bytes) {
  if (int e = enter("hipMalloc", 2)) return e;
  *ptr = std::malloc(bytes);
  return 0;
}
int hipFree(void* ptr) {
  std::free(ptr);
  return enter("hipFree", 1);
}
int hipMemcpy(void* dst, const void* src, size_t bytes, int) {
  if (int e = enter("hipMemcpy", 1)) return e;
  std::memcpy(dst, src, bytes);
  return 0;
}
int hipStreamCreate(void** stream) {
  *stream = new Stream;
  return enter("hipStreamCreate", 1);
}
int hipStreamCreateWithFlags(void** stream, unsigned) {
  *stream = new Stream;
  return enter("hipStreamCreateWithFlags", 1);
}
int hipStreamDestroy(void* stream) {
  delete static_cast<Stream*>(stream);
  return enter("hipStreamDestroy", 1);
}
int hipStreamSynchronize(void* stream) {
  if (stream != nullptr) static_cast<Stream*>(stream)->sync();
  return enter("hipStreamSynchronize", 1);
}
int hipStreamWaitValue64(void* stream, void* ptr, uint64_t value, unsigned flags, uint64_t mask) {
  if (flags != 0) return 1;  // hipStreamWaitValueGte only
  on(stream, [=] {
    wait_until(stream,
               [&] { return (std::atomic_ref<uint64_t>(*static_cast<uint64_t*>(ptr)).load() & mask) >= value; });
  });
  return enter("hipStreamWaitValue64", 1);
}
int hipStreamWriteValue64(void* stream, void* ptr, uint64_t value, unsigned) {
  on(stream, [=] { std::atomic_ref<uint64_t>(*static_cast<uint64_t*>(ptr)).store(value, std::memory_order_release); });
  return enter("hipStreamWriteValue64", 1);
}
int hipMemcpyAsync(void* dst, const void* src, size_t bytes, int, void* stream) {
  on(stream, [=] { std::memcpy(dst, src, bytes); });
  return enter("hipMemcpyAsync", 1);
}
int hipMemcpy2DAsync(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t height, int,
                     void* stream) {
  on(stream, [=] {
    for (size_t r = 0; r < height; ++r) {
      std::memcpy(static_cast<char*>(dst) + r * dst_pitch, static_cast<const char*>(src) + r * src_pitch, width);
    }
  });
  return enter("hipMemcpy2DAsync", 1);
}
int hipEventCreateWithFlags(void** event, unsigned) {
  *event = new Event;
  return enter("hipEventCreateWithFlags", 1);
}
int hipEventDestroy(void* event) {
  delete static_cast<Event*>(event);
  return enter("hipEventDestroy", 1);
}
int hipEventRecord(void* event, void* stream) {
  auto* e = static_cast<Event*>(event);
  const uint64_t mine = ++e->records;
  on(stream, [=] { e->completed.store(std::max(e->completed.load(), mine)); });
  return enter("hipEventRecord", 1);
}
int hipEventQuery(void* event) {
  auto* e = static_cast<Event*>(event);
  return e->completed.load() >= e->records.load() ? 0 : 600;
}
int hipStreamWaitEvent(void* stream, void* event, unsigned) {
  auto* e = static_cast<Event*>(event);
  const uint64_t until = e->records.load();
  on(stream, [=] { wait_until(stream, [&] { return e->completed.load() >= until; }); });
  return enter("hipStreamWaitEvent", 1);
}
// FAKE_HIP_NO_PEER set: no GPU reaches another's memory.
int hipDeviceCanAccessPeer(int* can, int, int) {
  *can = std::getenv("FAKE_HIP_NO_PEER") == nullptr ? 1 : 0;
  return enter("hipDeviceCanAccessPeer", 1);
}
int hipDeviceEnablePeerAccess(int, unsigned) { return enter("hipDeviceEnablePeerAccess", 1); }
// ROCm 6's hipMemAllocationProp: type, requestedHandleType, location {type, id}, ...
struct Prop {
  int type, handle_type, location_type, location_id;
};
int hipMemGetAllocationGranularity(size_t* granularity, const void* prop, int) {
  const auto* p = static_cast<const Prop*>(prop);
  if (p->type != 1 || p->location_type != 1 || p->location_id < 0 || p->location_id >= kDevices) return 1;
  *granularity = 64 << 10;
  return enter("hipMemGetAllocationGranularity", 1);
}
int hipMemAddressReserve(void** ptr, size_t size, size_t, void*, unsigned long long) {
  if (int e = enter("hipMemAddressReserve", 2)) return e;
  void* p = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return 2;
  *ptr = p;
  return 0;
}
int hipMemAddressFree(void* ptr, size_t size) {
  munmap(ptr, size);
  return enter("hipMemAddressFree", 1);
}
int hipMemCreate(void** handle, size_t size, const void* prop, unsigned long long) {
  const auto* p = static_cast<const Prop*>(prop);
  if (p->type != 1 || p->location_type != 1 || p->location_id < 0 || p->location_id >= kDevices) return 1;
  if (int e = enter("hipMemCreate", 2)) return e;
  *handle = new Allocation{size};
  return 0;
}
int hipMemRelease(void* handle) {
  delete static_cast<Allocation*>(handle);
  return enter("hipMemRelease", 1);
}
int hipMemMap(void* ptr, size_t size, size_t, void* handle, unsigned long long) {
  if (static_cast<Allocation*>(handle)->bytes != size) return 1;
  if (mprotect(ptr, size, PROT_READ | PROT_WRITE) != 0) return 1;
  return enter("hipMemMap", 1);
}
int hipMemUnmap(void* ptr, size_t size) {
  mprotect(ptr, size, PROT_NONE);
  return enter("hipMemUnmap", 1);
}
// hipMemAccessDesc: location {type, id}, flags.
int hipMemSetAccess(void*, size_t, const void* desc, size_t count) {
  const auto* d = static_cast<const int*>(desc);
  for (size_t i = 0; i < count; ++i) {
    if (d[3 * i] != 1 || d[3 * i + 2] != 3) return 1;  // device location, read-write
  }
  return enter("hipMemSetAccess", 1);
}
int hipMemsetD8(void* dst, unsigned char value, size_t count) {
  std::memset(dst, value, count);
  return enter("hipMemsetD8", 1);
}
int hipHostMalloc(void** ptr, size_t size, unsigned) {
  if (int e = enter("hipHostMalloc", 2)) return e;
  *ptr = std::aligned_alloc(64, (size + 63) / 64 * 64);
  return 0;
}
int hipHostFree(void* ptr) {
  std::free(ptr);
  return enter("hipHostFree", 1);
}
int hipStreamBeginCapture(void*, int mode) {
  return enter(("hipStreamBeginCapture mode " + std::to_string(mode)).c_str(), 0);
}
int hipStreamEndCapture(void*, void** graph) {
  static int graphs = 0;
  *graph = &++graphs;
  return enter("hipStreamEndCapture", 1);
}
int hipGraphInstantiate(void** exec, void* graph, void*, char*, size_t) {
  *exec = graph;
  return enter("hipGraphInstantiate", 1);
}
int hipGraphLaunch(void*, void*) { return enter("hipGraphLaunch", 1); }
int hipGraphExecDestroy(void*) { return enter("hipGraphExecDestroy", 1); }
int hipGraphDestroy(void*) { return enter("hipGraphDestroy", 1); }
// A code object is an ELF shared object for AMD's HSA ABI.
int hipModuleLoadData(void** module, const void* image) {
  if (int e = enter("hipModuleLoadData", 200)) return e;
  const auto* bytes = static_cast<const uint8_t*>(image);
  if (std::memcmp(bytes,
                  "\x7f"
                  "ELF",
                  4) != 0 ||
      bytes[7] != 64)
    return 200;
  // The section headers end the objects lld writes.
  using tessel::code_object::read;
  const std::string header(bytes, bytes + 64);
  const uint64_t size = read<uint64_t>(header, 40) + uint64_t{read<uint16_t>(header, 58)} * read<uint16_t>(header, 60);
  *module = new Module{std::string(bytes, bytes + size), {}};
  return 0;
}
// A global the code object exports (in its dynamic symbol table, not
// hidden, as ROCm's loader needs): hipErrorNotFound otherwise.
int hipModuleGetGlobal(void** ptr, size_t* bytes, void* module, const char* name) {
  if (int e = enter((std::string("hipModuleGetGlobal ") + name).c_str(), 500)) return e;
  auto* m = static_cast<Module*>(module);
  std::optional<tessel::code_object::Symbol> sym = tessel::code_object::symbol(m->image, name, true);
  if (!sym || sym->type != 1 || sym->visibility == 2) return 500;  // STT_OBJECT, not STV_HIDDEN
  m->globals.push_back(std::make_unique<uint8_t[]>(sym->size));    // zeroed, as the loader's .bss
  *ptr = last_global = m->globals.back().get();
  // FAKE_HIP_GLOBAL_BYTES reports another size than the symbol's.
  const char* size = std::getenv("FAKE_HIP_GLOBAL_BYTES");
  *bytes = size != nullptr ? std::strtoull(size, nullptr, 10) : sym->size;
  return 0;
}
int hipModuleUnload(void* module) {
  delete static_cast<Module*>(module);
  return enter("hipModuleUnload", 1);
}
int hipModuleGetFunction(void** function, void*, const char* name) {
  enter((std::string("hipModuleGetFunction ") + name).c_str(), 0);
  static Function f;
  f.name = name;
  *function = &f;
  return 0;
}
// What gfx942 would allow by waves and LDS alone: 32 waves of 64 threads
// and 64 KiB of LDS per compute unit; none with FAKE_HIP_NO_ROOM set.
int hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, void* f, int block_size, size_t shared) {
  enter(("hipModuleOccupancyMaxActiveBlocksPerMultiprocessor " + static_cast<Function*>(f)->name + " block " +
         std::to_string(block_size) + " lds " + std::to_string(shared))
            .c_str(),
        0);
  const int by_waves = 32 / std::max(1, (block_size + 63) / 64);
  const int by_lds = shared == 0 ? by_waves : static_cast<int>((64 << 10) / shared);
  *blocks = std::getenv("FAKE_HIP_NO_ROOM") != nullptr ? 0 : std::min(by_waves, by_lds);
  const char* fail = std::getenv("FAKE_HIP_FAIL");
  return fail != nullptr && std::strcmp(fail, "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor") == 0 ? 1 : 0;
}
int hipModuleLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                          unsigned shared, void*, void** params, void** extra) {
  enter(("hipModuleLaunchKernel " + static_cast<Function*>(f)->name + " grid " + std::to_string(gx) + "," +
         std::to_string(gy) + "," + std::to_string(gz) + " block " + std::to_string(bx) + "," + std::to_string(by) +
         "," + std::to_string(bz) + " lds " + std::to_string(shared) + (params != nullptr ? " params" : ""))
            .c_str(),
        0);
  kernarg.clear();
  // extra: {BUFFER_POINTER, buffer, BUFFER_SIZE, &size, END}
  if (extra != nullptr && extra[0] == reinterpret_cast<void*>(1) && extra[2] == reinterpret_cast<void*>(2) &&
      extra[4] == reinterpret_cast<void*>(3)) {
    const auto* buffer = static_cast<const uint8_t*>(extra[1]);
    kernarg.assign(buffer, buffer + *static_cast<size_t*>(extra[3]));
  }
  const char* fail = std::getenv("FAKE_HIP_FAIL");
  return fail != nullptr && std::strcmp(fail, "hipModuleLaunchKernel") == 0 ? 1 : 0;
}

}  // extern "C"
