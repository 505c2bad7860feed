// The stand-in GPU libraries' queues (tests/hip/fake_hip.cc,
// tests/cuda/fake_cuda.cc): a thread runs each queue's operations in order,
// as a GPU's hardware queue would, and a wait on memory gives up when its
// queue goes.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace tessel::fake {

class Queue {
 public:
  Queue() : worker_([this] { run(); }) {}
  ~Queue() {
    {
      std::lock_guard<std::mutex> hold(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  void push(std::function<void()> op) {
    {
      std::lock_guard<std::mutex> hold(mu_);
      ops_.push_back(std::move(op));
    }
    cv_.notify_all();
  }
  // Until every operation pushed so far has run.
  void sync() {
    std::unique_lock<std::mutex> hold(mu_);
    cv_.wait(hold, [&] { return ops_.empty() && !busy_; });
  }
  bool idle() {
    std::lock_guard<std::mutex> hold(mu_);
    return ops_.empty() && !busy_;
  }
  bool stopping() const { return stop_.load(); }

 private:
  void run() {
    for (;;) {
      std::function<void()> op;
      {
        std::unique_lock<std::mutex> hold(mu_);
        cv_.wait(hold, [&] { return stop_ || !ops_.empty(); });
        if (stop_) return;
        op = std::move(ops_.front());
        ops_.pop_front();
        busy_ = true;
      }
      op();
      {
        std::lock_guard<std::mutex> hold(mu_);
        busy_ = false;
      }
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> ops_;
  bool busy_ = false;
  std::atomic<bool> stop_{false};
  std::thread worker_;
};

// Polls `done` until it holds or `queue` (where not null) goes.
inline void wait_until(const Queue* queue, const std::function<bool()>& done) {
  while (!done()) {
    if (queue != nullptr && queue->stopping()) return;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

}  // namespace tessel::fake
