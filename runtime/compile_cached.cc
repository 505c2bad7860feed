#include "runtime/compile_cached.h"

#include <elf.h>
#include <link.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace tessel {
namespace {

// The build id note of the loaded object whose segments hold `address`.
struct BuildIdSearch {
  uintptr_t address;
  std::string id;
};

int find_build_id(dl_phdr_info* info, size_t, void* data) {
  auto* search = static_cast<BuildIdSearch*>(data);
  bool holds = false;
  for (int i = 0; i < info->dlpi_phnum && !holds; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    holds = ph.p_type == PT_LOAD && search->address >= start && search->address < start + ph.p_memsz;
  }
  if (!holds) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    const char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) note;
      std::memcpy(&note, p, sizeof note);
      const char* name = p + sizeof note;
      const char* desc = name + (note.n_namesz + 3) / 4 * 4;
      const char* next = desc + (note.n_descsz + 3) / 4 * 4;
      if (next > end) break;
      if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        for (uint32_t b = 0; b < note.n_descsz; ++b) {
          absl::StrAppend(&search->id, absl::Hex(static_cast<unsigned char>(desc[b]), absl::kZeroPad2));
        }
        return 1;
      }
      p = next;
    }
  }
  return 1;  // the object holding tessel has no build id
}

}  // namespace

const std::string& tessel_build_id() {
  static const std::string id = [] {
    BuildIdSearch search{reinterpret_cast<uintptr_t>(&find_build_id), ""};
    dl_iterate_phdr(&find_build_id, &search);
    return search.id;
  }();
  return id;
}

std::string kernel_cache_key(const Kernel& kernel, const CompileOptions& options, const std::string& arch) {
  const std::string& build = tessel_build_id();
  if (build.empty()) return "";
  // The first line versions the layout of the key and of the payload
  // (serialize_device_code): change it when either changes.
  return absl::StrCat("tessel kernel 1\nbuild ", build, "\ncompiler ", compiler_identity(arch), "\narch ", arch,
                      "\noptions ", options.cache_key(), "\n", kernel.str());
}

absl::StatusOr<DeviceCode> compile_cached(const DiskCache& cache, const Kernel& kernel, const CompileOptions& options,
                                          CompileArtifacts* artifacts) {
  if (!cache.enabled() || artifacts != nullptr || !options.dump_stages.empty()) {
    return compile(kernel, options, artifacts);
  }
  absl::StatusOr<std::string> arch = resolve_arch(options.arch);
  if (!arch.ok()) return compile(kernel, options);  // which says what is wrong
  std::string key = kernel_cache_key(kernel, options, *arch);
  if (key.empty()) return compile(kernel, options);
  if (std::optional<std::string> bytes = cache.read(kKernelCacheSpace, key)) {
    std::optional<DeviceCode> code = parse_device_code(*bytes);
    // Not this arch's code only if tessel wrote a wrong payload: compiled anew
    // and replaced.
    if (code && code->arch == *arch) return *std::move(code);
  }
  absl::StatusOr<DeviceCode> code = compile(kernel, options);
  if (code.ok()) cache.write(kKernelCacheSpace, key, serialize_device_code(*code)).IgnoreError();
  return code;
}

}  // namespace tessel
