// Turns a fuzzer's bytes into choices: each call takes what it needs from
// the front and answers zero once the bytes run out, so every input, even
// an empty one, is a whole program of choices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tessel::fuzz {

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool done() const { return size_ == 0; }
  template <typename T>
  T take() {
    T v{};
    const size_t n = sizeof(T) < size_ ? sizeof(T) : size_;
    if (n == 0) return v;  // an empty input may come as a null pointer
    std::memcpy(&v, data_, n);
    data_ += n;
    size_ -= n;
    return v;
  }
  // In [0, n) (n > 0).
  uint32_t below(uint32_t n) { return take<uint8_t>() % n; }
  bool flip() { return (take<uint8_t>() & 1) != 0; }
  // A 64-bit value of a width the next byte picks: small numbers, limits and
  // their neighbours come up often.
  int64_t number() {
    switch (take<uint8_t>() % 8) {
      case 0:
        return take<uint8_t>();
      case 1:
        return take<uint16_t>();
      case 2:
        return take<uint32_t>();
      case 3:
        return take<int64_t>();
      case 4:
        return -static_cast<int64_t>(take<uint8_t>());
      case 5:
        return (int64_t{1} << (take<uint8_t>() % 63)) + take<int8_t>();
      case 6:
        return 16 * static_cast<int64_t>(take<uint16_t>());
      default:
        return 1 + take<uint8_t>() % 8;
    }
  }
  const uint8_t* rest(size_t* size) const {
    *size = size_;
    return data_;
  }

 private:
  const uint8_t* data_;
  size_t size_;
};

}  // namespace tessel::fuzz
