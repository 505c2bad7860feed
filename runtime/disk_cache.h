// Internal: tessel's cache on disk, shared by the processes of one user, so
// that a new process need not JIT again what an earlier one compiled.
//
// Layout. The cache directory (DiskCacheConfig::dir: $TESSEL_CACHE_DIR,
// else $XDG_CACHE_HOME/tessel, else ~/.cache/tessel; runtime/env.h) holds
// one folder per *space* of entries, named like "kernels" ([a-z0-9_-]):
//
//   <dir>/kernels/<sha256 of the key, 64 hex digits>.entry   compiled kernels
//   <dir>/<space>/<sha256 of the key>.entry                 any other feature's
//   <dir>/<space>/.<...>.tmp                                 a write under way
//
// Rules, for every space (keep them when adding one, e.g. autotuning results):
// - An entry is written whole to a temporary name in its space's folder and
//   renamed over its final name (rename(2) is atomic), so a reader sees an
//   old entry, a new one or none; processes writing one key at once are safe.
// - An entry stores its full key and a checksum: one whose magic, format
//   version, lengths, checksum or key do not match is ignored (a miss) and
//   replaced by the next write, never trusted and never an error for users.
// - A key names everything that changes the bytes stored, tessel's own
//   build included (compile_cached.h), so no entry outlives what it depends
//   on; stale entries are simply never read again and age out.
// - The entries of all spaces together are kept under max_bytes: a write
//   that passes it removes the least recently used (oldest mtime; a hit
//   sets its entry's mtime to now). Temporaries left by crashed writers are
//   removed once an hour old.
// - Problems with the directory (unwritable, not a directory, ...) never fail
//   what uses the cache: the cache is skipped, with one warning on stderr
//   per DiskCache (the runtime makes one per device, at its first compile).
//
// Entry format (integers little-endian):
//   "TSLCACHE" magic (8 bytes), u32 format version, u32 key length,
//   u64 payload length, the key, the payload, and the SHA-256 of everything
//   before it (32 bytes).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "codegen/compiler.h"

namespace tessel {

inline constexpr int64_t kDefaultCacheMaxBytes = int64_t{1} << 30;

struct DiskCacheConfig {
  // The cache directory; empty turns the cache off.
  std::string dir;
  // The most the entries of all spaces may take together.
  int64_t max_bytes = kDefaultCacheMaxBytes;
};

class DiskCache {
 public:
  explicit DiskCache(DiskCacheConfig config) : config_(std::move(config)) {}
  // The cache the environment names (runtime/env.h).
  static std::shared_ptr<DiskCache> from_env();

  const DiskCacheConfig& config() const { return config_; }
  bool enabled() const { return !config_.dir.empty(); }

  // The bytes last written under `key` in `space`, or nullopt: none, or an
  // entry that cannot be trusted (see the rules above). A hit marks the
  // entry used now, for eviction.
  std::optional<std::string> read(absl::string_view space, absl::string_view key) const;
  // Stores `bytes` under `key` in `space`, replacing any entry, then evicts
  // to keep the bound. An error (also warned about once) leaves the cache as
  // it was; callers may ignore it.
  absl::Status write(absl::string_view space, absl::string_view key, absl::string_view bytes) const;
  // Where the entry for `key` lives.
  std::string entry_path(absl::string_view space, absl::string_view key) const;

  // What this object's reads and writes found, for tests and benchmarks.
  struct Stats {
    int64_t hits = 0;
    int64_t misses = 0;    // no entry
    int64_t rejected = 0;  // an entry that was truncated, corrupt or another key's
    int64_t writes = 0;
    int64_t evicted = 0;
  };
  Stats stats() const;

 private:
  void warn_once(absl::string_view problem) const;
  void evict() const;

  const DiskCacheConfig config_;
  mutable std::atomic<bool> warned_{false};
  mutable std::atomic<uint64_t> temp_counter_{0};
  mutable std::atomic<int64_t> hits_{0}, misses_{0}, rejected_{0}, writes_{0}, evicted_{0};
};

// SHA-256 of `bytes`, as 64 lowercase hex digits.
std::string sha256_hex(absl::string_view bytes);

// DeviceCode as the payload of an entry, and back; nullopt for bytes that
// are not such a payload.
std::string serialize_device_code(const DeviceCode& code);
std::optional<DeviceCode> parse_device_code(absl::string_view bytes);

}  // namespace tessel
