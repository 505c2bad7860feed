// Reads back what the AMDGPU tests check in an HSA code object, written
// against the ELF64 and AMDHSA layouts directly (no LLVM): the ELF header,
// symbols, a kernel's 64-byte descriptor (symbol "<kernel>.kd") and integers
// of the msgpack metadata note.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

namespace tessel::code_object {

template <class T>
inline T read(const std::string& bytes, uint64_t at) {
  T v{};
  if (at + sizeof(T) <= bytes.size()) std::memcpy(&v, bytes.data() + at, sizeof(T));
  return v;
}

struct Header {
  uint8_t os_abi = 0, abi_version = 0;
  uint16_t type = 0, machine = 0;
  uint32_t flags = 0;
};
inline Header header(const std::string& elf) {
  return {read<uint8_t>(elf, 7), read<uint8_t>(elf, 8), read<uint16_t>(elf, 16), read<uint16_t>(elf, 18),
          read<uint32_t>(elf, 48)};
}

// The kernel descriptor's fields tessel's runtime relies on.
struct KernelDescriptor {
  uint32_t group_segment_fixed_size = 0;    // static LDS
  uint32_t private_segment_fixed_size = 0;  // scratch per thread
  uint32_t kernarg_size = 0;
};

// An ELF symbol: where its bytes are in the file, how many, and its
// binding, type and visibility.
struct Symbol {
  uint64_t offset = 0, size = 0;
  uint8_t binding = 0, type = 0, visibility = 0;
};

// `name` in the dynamic symbol table (what a loader finds by name), or also
// in the static one unless `dynamic_only`.
inline std::optional<Symbol> symbol(const std::string& elf, const std::string& name, bool dynamic_only = false) {
  const uint64_t shoff = read<uint64_t>(elf, 40);
  const uint16_t shentsize = read<uint16_t>(elf, 58), shnum = read<uint16_t>(elf, 60);
  auto section = [&](uint64_t i, uint64_t field) { return shoff + i * shentsize + field; };
  for (uint16_t s = 0; s < shnum; ++s) {
    const uint32_t type = read<uint32_t>(elf, section(s, 4));
    if (type != 11 && (dynamic_only || type != 2)) continue;  // SHT_DYNSYM, SHT_SYMTAB
    const uint64_t offset = read<uint64_t>(elf, section(s, 24)), size = read<uint64_t>(elf, section(s, 32));
    const uint32_t strtab = read<uint32_t>(elf, section(s, 40));
    const uint64_t strings = read<uint64_t>(elf, section(strtab, 24));
    for (uint64_t sym = offset; sym + 24 <= offset + size && sym + 24 <= elf.size(); sym += 24) {
      const uint64_t at_name = strings + read<uint32_t>(elf, sym);
      if (at_name >= elf.size() || name != elf.c_str() + at_name) continue;
      const uint8_t info = read<uint8_t>(elf, sym + 4);
      const uint16_t shndx = read<uint16_t>(elf, sym + 6);
      const uint64_t value = read<uint64_t>(elf, sym + 8);
      return Symbol{value - read<uint64_t>(elf, section(shndx, 16)) + read<uint64_t>(elf, section(shndx, 24)),
                    read<uint64_t>(elf, sym + 16), static_cast<uint8_t>(info >> 4), static_cast<uint8_t>(info & 15),
                    static_cast<uint8_t>(read<uint8_t>(elf, sym + 5) & 3)};
    }
  }
  return std::nullopt;
}

// The descriptor of `kernel` (symbol "<kernel>.kd").
inline std::optional<KernelDescriptor> descriptor(const std::string& elf, const std::string& kernel) {
  std::optional<Symbol> kd = symbol(elf, kernel + ".kd");
  if (!kd) return std::nullopt;
  return KernelDescriptor{read<uint32_t>(elf, kd->offset), read<uint32_t>(elf, kd->offset + 4),
                          read<uint32_t>(elf, kd->offset + 8)};
}

// The unsigned integer that follows the msgpack string `key` in the
// metadata (the first occurrence; per-kernel keys are unique in a
// one-kernel object).
inline std::optional<uint64_t> metadata_uint(const std::string& elf, const std::string& key) {
  std::string packed(1, static_cast<char>(0xA0 | key.size()));  // fixstr
  packed += key;
  const size_t at = elf.find(packed);
  if (at == std::string::npos) return std::nullopt;
  const uint64_t v = at + packed.size();
  const uint8_t tag = read<uint8_t>(elf, v);
  if (tag < 0x80) return tag;                                             // positive fixint
  if (tag == 0xCC) return read<uint8_t>(elf, v + 1);                      // uint8
  if (tag == 0xCD) return __builtin_bswap16(read<uint16_t>(elf, v + 1));  // uint16, big-endian
  if (tag == 0xCE) return __builtin_bswap32(read<uint32_t>(elf, v + 1));  // uint32
  return std::nullopt;
}

}  // namespace tessel::code_object
