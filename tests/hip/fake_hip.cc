// A stand-in for libamdhip64 that records the calls tessel makes: one AMD
// GPU (gfx942, 304 CUs) whose memory is host memory and whose launches run
// nothing. FAKE_HIP_FAIL=<call> makes that call fail. The tests read the
// record through fake_hip_log() and fake_hip_kernarg().
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::string calls;
std::vector<uint8_t> kernarg;

int enter(const char* call, int failure) {
  calls += call;
  calls += '\n';
  const char* fail = std::getenv("FAKE_HIP_FAIL");
  return fail != nullptr && std::strcmp(fail, call) == 0 ? failure : 0;
}

struct Module {
  int id;
};
struct Function {
  std::string name;
};

}  // namespace

extern "C" {

const char* fake_hip_log() { return calls.c_str(); }
const uint8_t* fake_hip_kernarg(size_t* size) {
  *size = kernarg.size();
  return kernarg.data();
}
void fake_hip_reset() {
  calls.clear();
  kernarg.clear();
}

const char* hipGetErrorName(int error) {
  switch (error) {
    case 1: return "hipErrorInvalidValue";
    case 2: return "hipErrorOutOfMemory";
    case 200: return "hipErrorInvalidImage";
    case 500: return "hipErrorNotFound";
    default: return "hipErrorUnknown";
  }
}
const char* hipGetErrorString(int) { return "reported by the fake HIP runtime"; }

int hipInit(unsigned) { return enter("hipInit", 100); }
int hipGetDeviceCount(int* count) {
  *count = 1;
  return enter("hipGetDeviceCount", 100);
}
int hipSetDevice(int device) { return device == 0 ? 0 : 101; }
int hipDeviceGetAttribute(int* value, int attribute, int) {
  *value = attribute == 63 ? 304 : 0;
  return enter("hipDeviceGetAttribute", 1);
}
int hipDeviceGetName(char* name, int length, int) {
  std::strncpy(name, "AMD Instinct MI300X (fake)", length);
  return enter("hipDeviceGetName", 1);
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
  static int streams = 0;
  *stream = &++streams;
  return enter("hipStreamCreate", 1);
}
int hipStreamDestroy(void*) { return enter("hipStreamDestroy", 1); }
int hipStreamSynchronize(void*) { return enter("hipStreamSynchronize", 1); }
int hipStreamBeginCapture(void*, int mode) {
  calls += "hipStreamBeginCapture mode " + std::to_string(mode) + "\n";
  return 0;
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
  if (std::memcmp(bytes, "\x7f" "ELF", 4) != 0 || bytes[7] != 64) return 200;
  *module = new Module{1};
  return 0;
}
int hipModuleUnload(void* module) {
  delete static_cast<Module*>(module);
  return enter("hipModuleUnload", 1);
}
int hipModuleGetFunction(void** function, void*, const char* name) {
  calls += std::string("hipModuleGetFunction ") + name + "\n";
  static Function f;
  f.name = name;
  *function = &f;
  return 0;
}
int hipModuleLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                          unsigned shared, void*, void** params, void** extra) {
  calls += "hipModuleLaunchKernel " + static_cast<Function*>(f)->name + " grid " + std::to_string(gx) + "," +
           std::to_string(gy) + "," + std::to_string(gz) + " block " + std::to_string(bx) + "," +
           std::to_string(by) + "," + std::to_string(bz) + " lds " + std::to_string(shared) +
           (params != nullptr ? " params" : "") + "\n";
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
