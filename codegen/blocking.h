// How a blocked layout (codegen/layout.h) spreads a tile over a program's
// threads: plain integers, so that plans and tests need no LLVM.
#pragma once

#include <compare>
#include <cstdint>

namespace tessel::codegen {

// A blocked layout sees a tile as rows of `inner` consecutive
// elements (the last dimension, or the whole tile): threads_inner threads
// (a power of two dividing the program's threads) share each row, taking
// runs of per_thread consecutive elements in turn; the other threads take
// further rows. inner = 0 and threads_inner = 0 mean the whole tile and
// every thread: then slot s of thread t holds element
// (s / per_thread * threads + t) * per_thread + s % per_thread, and a warp's
// accesses to consecutive elements coalesce. With threads_inner at most a
// warp, a row lies within one warp, and reducing it takes no shared memory.
struct Blocking {
  int per_thread = 1;
  int64_t inner = 0;
  int threads_inner = 0;

  bool operator==(const Blocking&) const = default;
  auto operator<=>(const Blocking&) const = default;
};

}  // namespace tessel::codegen
