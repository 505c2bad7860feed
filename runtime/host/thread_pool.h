// Worker threads that run the programs of a host launch.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <pthread.h>
#include <vector>

namespace tessel {

class ThreadPool {
 public:
  // Threads get large stacks: host kernels keep their tiles on the stack.
  explicit ThreadPool(int threads, size_t stack_bytes = size_t{64} << 20);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(threads_.size()); }
  // Runs task(i, worker) for i in [0, n) across the workers; returns when all
  // are done. One run at a time.
  void run(int64_t n, const std::function<void(int64_t, int)>& task);

 private:
  static void* main(void* arg);
  void work(int worker);

  std::vector<pthread_t> threads_;
  std::mutex run_mu_;  // serializes run()
  std::mutex mu_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int)>* task_ = nullptr;
  int64_t total_ = 0;
  int64_t next_ = 0;
  int64_t finished_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  struct Start {
    ThreadPool* pool;
    int worker;
  };
  std::vector<Start> starts_;
};

}  // namespace tessel
