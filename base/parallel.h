// Independent work spread over threads of the calling process.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <functional>
#include <thread>
#include <vector>

namespace tessel {

// Runs body(0), ..., body(n - 1), each once, on up to `threads` threads
// (0: one a core), the calling thread among them; returns when all are done.
inline void parallel_for(size_t n, size_t threads, const std::function<void(size_t)>& body) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = std::min(threads, n);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) body(i);
  };
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < threads; ++t) helpers.emplace_back(work);
  work();
  for (std::thread& h : helpers) h.join();
}

}  // namespace tessel
