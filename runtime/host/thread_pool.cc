#include "runtime/host/thread_pool.h"

#include "base/status.h"

namespace tessel {

ThreadPool::ThreadPool(int threads, size_t stack_bytes) : starts_(threads) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, stack_bytes);
  threads_.resize(threads);
  for (int i = 0; i < threads; ++i) {
    starts_[i] = {this, i};
    int rc = pthread_create(&threads_[i], &attr, &ThreadPool::main, &starts_[i]);
    TESSEL_CHECK(rc == 0, "pthread_create failed");
  }
  pthread_attr_destroy(&attr);
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (pthread_t t : threads_) pthread_join(t, nullptr);
}

void* ThreadPool::main(void* arg) {
  auto* start = static_cast<Start*>(arg);
  start->pool->work(start->worker);
  return nullptr;
}

void ThreadPool::run(int64_t n, const std::function<void(int64_t, int)>& task) {
  std::lock_guard<std::mutex> serial(run_mu_);
  std::unique_lock<std::mutex> lock(mu_);
  task_ = &task;
  total_ = n;
  next_ = 0;
  finished_ = 0;
  ++generation_;
  wake_.notify_all();
  done_.wait(lock, [&] { return finished_ == total_; });
  task_ = nullptr;
}

void ThreadPool::work(int worker) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || (generation_ != seen && next_ < total_); });
    if (stop_) return;
    seen = generation_;
    // Take programs one at a time; the lock is held only to count.
    while (next_ < total_) {
      int64_t i = next_++;
      const auto* task = task_;
      lock.unlock();
      (*task)(i, worker);
      lock.lock();
      if (++finished_ == total_) done_.notify_all();
    }
  }
}

}  // namespace tessel
