// How a blocked layout (codegen/layout.h) spreads a tile over a program's
// threads: plain integers, so that plans and tests need no LLVM.
#pragma once

#include <compare>
#include <cstdint>
#include <utility>
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

// How the threads of a layout hold the lines of a tile along the axis of a
// sort, for a bitonic network of compare-exchanges run in registers: lines
// of 2^m positions, every slot of every thread holding one element. For
// each bit h of a position (lowest first), where the element whose position
// differs from an element's in bit h alone is held:
//  - threads == 0: in another slot of the same thread, the same in every
//    thread: `pairs` lists the (lower, upper) slots, lower holding the
//    position whose bit h is clear;
//  - otherwise: in the same slot of the thread whose index differs in the
//    bits `threads`, the thread without them holding the lower position.
struct SortBit {
  int threads = 0;
  std::vector<std::pair<int64_t, int64_t>> pairs;
};
struct SortPlan {
  std::vector<SortBit> bits;  // m of them
};

}  // namespace tessel::codegen
