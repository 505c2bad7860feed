// How a blocked layout (codegen/layout.h) spreads a tile over a program's
// threads: plain integers, so that plans and tests need no LLVM.
#pragma once

#include <compare>
#include <cstdint>
#include <vector>

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

// How the threads of a layout (codegen/layout.h) hold the lines of a tile
// along the axis of a scan (each line: the elements that differ only in
// their index along it), where they do so regularly enough to scan them in
// registers: every slot of every thread holds an element, and each line is
// cut into chunks of `run` consecutive elements that its holders (the
// threads that differ from one another only in `holder_bits`) take in
// turn, lowest holder first, `rounds` times over. So slot slots[g][r][i] of
// thread t holds element i of chunk r * H + rank(t) of the thread's g-th
// line, where H is the number of holders and rank(t) is t's holder bits
// packed together (the lowest bit lowest).
struct ScanPlan {
  int holder_bits = 0;
  int64_t run = 1;
  int64_t rounds = 1;
  std::vector<std::vector<std::vector<int64_t>>> slots;  // [line][round][i]
};

}  // namespace tessel::codegen
