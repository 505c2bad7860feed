#include "runtime/disk_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "runtime/env.h"

namespace tessel {
namespace {

constexpr char kMagic[8] = {'T', 'S', 'L', 'C', 'A', 'C', 'H', 'E'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8;
constexpr size_t kChecksumBytes = 32;
constexpr const char* kEntrySuffix = ".entry";
constexpr const char* kTempSuffix = ".tmp";
// A temporary this old belongs to a writer that died before renaming it.
constexpr int64_t kStaleTempSeconds = 3600;

// ---------------------------------------------------------------------------
// SHA-256 (FIPS 180-4): a strong hash for file names and checksums without a
// crypto library in the dependencies.

constexpr std::array<uint32_t, 64> kSha256K = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

void sha256_block(std::array<uint32_t, 8>& h, const unsigned char* p) {
  std::array<uint32_t, 64> w;
  for (int i = 0; i < 16; ++i) {
    w[i] = uint32_t{p[4 * i]} << 24 | uint32_t{p[4 * i + 1]} << 16 | uint32_t{p[4 * i + 2]} << 8 | p[4 * i + 3];
  }
  for (int i = 16; i < 64; ++i) {
    uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
  for (int i = 0; i < 64; ++i) {
    uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kSha256K[i] + w[i];
    uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    hh = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
}

std::array<unsigned char, 32> sha256(absl::string_view bytes) {
  std::array<uint32_t, 8> h = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                               0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t n = bytes.size(), full = n / 64 * 64;
  for (size_t i = 0; i < full; i += 64) sha256_block(h, p + i);
  // The tail, a 1 bit, zeros, and the length in bits: one or two blocks.
  std::array<unsigned char, 128> tail{};
  size_t rest = n - full;
  std::memcpy(tail.data(), p + full, rest);
  tail[rest] = 0x80;
  size_t blocks = rest + 9 <= 64 ? 1 : 2;
  uint64_t bits = uint64_t{n} * 8;
  for (int i = 0; i < 8; ++i) tail[blocks * 64 - 1 - i] = static_cast<unsigned char>(bits >> (8 * i));
  for (size_t i = 0; i < blocks; ++i) sha256_block(h, tail.data() + 64 * i);
  std::array<unsigned char, 32> out;
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 4; ++j) out[4 * i + j] = static_cast<unsigned char>(h[i] >> (24 - 8 * j));
  }
  return out;
}

// ---------------------------------------------------------------------------
// Little-endian fields.

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void put_str(std::string& out, absl::string_view s) {
  put_u64(out, s.size());
  out.append(s.data(), s.size());
}

// Reads fields off the front of `bytes`; any read past the end leaves it failed.
class Reader {
 public:
  explicit Reader(absl::string_view bytes) : rest_(bytes) {}
  bool ok() const { return ok_; }
  bool done() const { return ok_ && rest_.empty(); }
  uint64_t u(int bytes) {
    if (!take(bytes)) return 0;
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<unsigned char>(taken_[i])} << (8 * i);
    return v;
  }
  absl::string_view raw(uint64_t n) { return take(n) ? taken_ : absl::string_view(); }
  std::string str() {
    uint64_t n = u(8);
    return std::string(raw(n));
  }

 private:
  bool take(uint64_t n) {
    if (!ok_ || n > rest_.size()) return ok_ = false;
    taken_ = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return true;
  }
  absl::string_view rest_, taken_;
  bool ok_ = true;
};

bool valid_space(absl::string_view space) {
  return !space.empty() && std::all_of(space.begin(), space.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

std::string encode_entry(absl::string_view key, absl::string_view payload) {
  std::string out;
  out.reserve(kHeaderBytes + key.size() + payload.size() + kChecksumBytes);
  out.append(kMagic, sizeof kMagic);
  put_u32(out, kFormatVersion);
  put_u32(out, static_cast<uint32_t>(key.size()));
  put_u64(out, payload.size());
  out.append(key.data(), key.size());
  out.append(payload.data(), payload.size());
  std::array<unsigned char, 32> sum = sha256(out);
  out.append(reinterpret_cast<const char*>(sum.data()), sum.size());
  return out;
}

// The payload of `entry` if it is a whole, intact entry for `key`.
std::optional<absl::string_view> decode_entry(absl::string_view entry, absl::string_view key) {
  if (entry.size() < kHeaderBytes + kChecksumBytes) return std::nullopt;
  Reader r(entry);
  absl::string_view magic = r.raw(sizeof kMagic);
  uint64_t version = r.u(4), key_bytes = r.u(4), payload_bytes = r.u(8);
  if (magic != absl::string_view(kMagic, sizeof kMagic) || version != kFormatVersion) return std::nullopt;
  if (key_bytes != key.size() || payload_bytes > entry.size() ||
      kHeaderBytes + key_bytes + payload_bytes + kChecksumBytes != entry.size()) {
    return std::nullopt;
  }
  absl::string_view body = entry.substr(0, entry.size() - kChecksumBytes);
  std::array<unsigned char, 32> sum = sha256(body);
  if (entry.substr(body.size()) != absl::string_view(reinterpret_cast<const char*>(sum.data()), sum.size())) {
    return std::nullopt;
  }
  if (r.raw(key_bytes) != key) return std::nullopt;
  return r.raw(payload_bytes);
}

std::string errno_text(int err) { return std::strerror(err); }

bool read_all(int fd, std::string& out) {
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

bool write_all(int fd, absl::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

struct Found {
  timespec mtime;
  int64_t bytes;
  std::string path;
};

bool older(const timespec& a, const timespec& b) {
  return a.tv_sec != b.tv_sec ? a.tv_sec < b.tv_sec : a.tv_nsec < b.tv_nsec;
}

}  // namespace

std::string sha256_hex(absl::string_view bytes) {
  std::array<unsigned char, 32> sum = sha256(bytes);
  std::string out;
  for (unsigned char c : sum) absl::StrAppend(&out, absl::Hex(c, absl::kZeroPad2));
  return out;
}

std::shared_ptr<DiskCache> DiskCache::from_env() { return std::make_shared<DiskCache>(disk_cache_config_from_env()); }

std::string DiskCache::entry_path(absl::string_view space, absl::string_view key) const {
  return absl::StrCat(config_.dir, "/", space, "/", sha256_hex(key), kEntrySuffix);
}

DiskCache::Stats DiskCache::stats() const {
  return {.hits = hits_.load(),
          .misses = misses_.load(),
          .rejected = rejected_.load(),
          .writes = writes_.load(),
          .evicted = evicted_.load()};
}

void DiskCache::warn_once(absl::string_view problem) const {
  if (warned_.exchange(true)) return;
  std::fprintf(stderr,
               "tessel: warning: the cache in %s is skipped: %.*s; set TESSEL_CACHE_DIR to a writable directory, "
               "or to nothing (TESSEL_CACHE_DIR=) to turn the cache off\n",
               config_.dir.c_str(), static_cast<int>(problem.size()), problem.data());
}

std::optional<std::string> DiskCache::read(absl::string_view space, absl::string_view key) const {
  TESSEL_CHECK(valid_space(space), "a disk cache space is named with a-z, 0-9, '_' and '-'");
  if (!enabled()) return std::nullopt;
  std::string path = entry_path(space, key);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    // A missing folder is a miss; a path through a file is reported by the
    // write that follows the miss.
    if (errno != ENOENT && errno != ENOTDIR) {
      warn_once(absl::StrCat("cannot read ", path, " (", errno_text(errno), ")"));
    }
    misses_.fetch_add(1);
    return std::nullopt;
  }
  struct stat st {};
  std::string entry;
  bool whole = false;
  // An entry larger than the bound was never written by tessel.
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= std::max<int64_t>(config_.max_bytes, 0)) {
    entry.resize(static_cast<size_t>(st.st_size));
    whole = read_all(fd, entry);
  }
  std::optional<absl::string_view> payload;
  if (whole) payload = decode_entry(entry, key);
  // Marks the entry used now: eviction removes the oldest first.
  if (payload) ::futimens(fd, nullptr);
  ::close(fd);
  if (!payload) {
    rejected_.fetch_add(1);
    return std::nullopt;
  }
  hits_.fetch_add(1);
  return std::string(*payload);
}

absl::Status DiskCache::write(absl::string_view space, absl::string_view key, absl::string_view bytes) const {
  TESSEL_CHECK(valid_space(space), "a disk cache space is named with a-z, 0-9, '_' and '-'");
  if (!enabled()) return absl::FailedPreconditionError("the disk cache is off (no directory)");
  std::string entry = encode_entry(key, bytes);
  if (static_cast<int64_t>(entry.size()) > config_.max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("a cache entry of ", entry.size(),
                                                     " bytes exceeds the cache's bound of ", config_.max_bytes,
                                                     " bytes (TESSEL_CACHE_MAX_BYTES)"));
  }
  std::string folder = absl::StrCat(config_.dir, "/", space);
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) {
    std::string problem = absl::StrCat("cannot create ", folder, " (", ec.message(), ")");
    warn_once(problem);
    return absl::PermissionDeniedError(problem);
  }
  std::string hash = sha256_hex(key);
  std::string final_path = absl::StrCat(folder, "/", hash, kEntrySuffix);
  // Unique among threads (the counter), objects (the address) and processes
  // (the pid); O_EXCL catches what is left, such as another host's writer
  // on a shared file system.
  std::string temp;
  int fd = -1;
  for (int attempt = 0; attempt < 4 && fd < 0; ++attempt) {
    temp = absl::StrCat(folder, "/.", hash.substr(0, 16), ".", ::getpid(), ".",
                        absl::Hex(reinterpret_cast<uintptr_t>(this)), ".", temp_counter_.fetch_add(1), kTempSuffix);
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) break;
  }
  bool written = fd >= 0 && write_all(fd, entry);
  int err = errno;
  if (fd >= 0 && ::close(fd) != 0 && written) written = false, err = errno;
  if (written && ::rename(temp.c_str(), final_path.c_str()) != 0) written = false, err = errno;
  if (!written) {
    if (fd >= 0) ::unlink(temp.c_str());
    std::string problem = absl::StrCat("cannot write in ", folder, " (", errno_text(err), ")");
    warn_once(problem);
    return absl::PermissionDeniedError(problem);
  }
  writes_.fetch_add(1);
  evict();
  return absl::OkStatus();
}

void DiskCache::evict() const {
  namespace fs = std::filesystem;
  std::vector<Found> entries;
  int64_t total = 0;
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  std::error_code ec;
  for (fs::directory_iterator space(config_.dir, ec), end; !ec && space != end; space.increment(ec)) {
    if (!valid_space(space->path().filename().string())) continue;
    std::error_code inner;
    for (fs::directory_iterator file(space->path(), inner); !inner && file != end; file.increment(inner)) {
      std::string name = file->path().filename().string();
      std::string path = file->path().string();
      struct stat st {};
      if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      if (absl::StartsWith(name, ".") && absl::EndsWith(name, kTempSuffix)) {
        if (now.tv_sec - st.st_mtim.tv_sec > kStaleTempSeconds) ::unlink(path.c_str());
      } else if (absl::EndsWith(name, kEntrySuffix)) {
        entries.push_back({st.st_mtim, static_cast<int64_t>(st.st_size), std::move(path)});
        total += st.st_size;
      }
    }
  }
  if (total <= config_.max_bytes) return;
  std::sort(entries.begin(), entries.end(), [](const Found& a, const Found& b) { return older(a.mtime, b.mtime); });
  for (const Found& e : entries) {
    if (total <= config_.max_bytes) break;
    // Another process may have evicted or replaced it already; either way
    // its bytes no longer count.
    if (::unlink(e.path.c_str()) == 0) evicted_.fetch_add(1);
    total -= e.bytes;
  }
}

std::string serialize_device_code(const DeviceCode& code) {
  std::string out;
  out.reserve(code.binary.size() + code.arch.size() + code.entry.size() + code.error_symbol.size() + 64);
  put_str(out, code.arch);
  out.push_back(static_cast<char>(code.format));
  put_str(out, code.entry);
  put_u64(out, static_cast<uint64_t>(code.shared_bytes));
  put_u32(out, static_cast<uint32_t>(code.threads));
  put_str(out, code.error_symbol);
  put_str(out, code.binary);
  return out;
}

std::optional<DeviceCode> parse_device_code(absl::string_view bytes) {
  Reader r(bytes);
  DeviceCode code;
  code.arch = r.str();
  uint64_t format = r.u(1);
  code.entry = r.str();
  code.shared_bytes = static_cast<int64_t>(r.u(8));
  code.threads = static_cast<int>(static_cast<int32_t>(r.u(4)));
  code.error_symbol = r.str();
  code.binary = r.str();
  if (!r.done() || format > static_cast<uint64_t>(CodeFormat::kHostObject) || code.entry.empty() ||
      code.shared_bytes < 0 || code.threads < 1) {
    return std::nullopt;
  }
  code.format = static_cast<CodeFormat>(format);
  return code;
}

}  // namespace tessel
