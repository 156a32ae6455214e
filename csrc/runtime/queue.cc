#include "runtime/device.h"

#include <chrono>

namespace tpu {

Queue::Queue(int device) : device_(device) { worker_ = std::thread([this] { WorkerLoop(); }); }

Queue::~Queue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  worker_.join();
}

uint64_t Queue::Enqueue(Task task, TaskContext ctx) {
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(mu_);
    seq = submitted_.load(std::memory_order_relaxed) + 1;
    items_.push_back(Item{std::move(task), std::move(ctx), seq});
    submitted_.store(seq, std::memory_order_release);
  }
  if (worker_sleeping_.load(std::memory_order_acquire)) work_cv_.notify_one();
  return seq;
}

void Queue::WorkerLoop() {
  while (true) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (items_.empty()) {
        // Spin briefly before sleeping: the next op usually arrives within microseconds.
        lock.unlock();
        auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
        while (std::chrono::steady_clock::now() < until) {
          if (submitted_.load(std::memory_order_acquire) != completed_.load(std::memory_order_relaxed))
            break;
        }
        lock.lock();
        worker_sleeping_.store(true, std::memory_order_release);
        work_cv_.wait(lock, [&] { return stop_ || !items_.empty(); });
        worker_sleeping_.store(false, std::memory_order_release);
        if (stop_ && items_.empty()) return;
      }
      item = std::move(items_.front());
      items_.pop_front();
    }
    Status st = item.task();
    item.task = nullptr;  // drop bindings (buffer references) before signalling completion
    std::lock_guard<std::mutex> lock(mu_);
    if (!st.ok() && error_.ok()) {
      std::string where = item.ctx.location.empty() ? "" : " (issued at " + item.ctx.location + ")";
      error_ = Status(st.code(), std::string(item.ctx.op) + where + ": " + st.message());
    }
    completed_.store(item.seq, std::memory_order_release);
    if (waiters_.load(std::memory_order_acquire) > 0) done_cv_.notify_all();
  }
}

Status Queue::WaitFor(uint64_t seq) {
  if (completed_.load(std::memory_order_acquire) < seq) {
    // Short spin, then block.
    auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
    while (completed_.load(std::memory_order_acquire) < seq &&
           std::chrono::steady_clock::now() < until) {
    }
    if (completed_.load(std::memory_order_acquire) < seq) {
      std::unique_lock<std::mutex> lock(mu_);
      waiters_.fetch_add(1);
      done_cv_.wait(lock, [&] { return completed_.load(std::memory_order_acquire) >= seq; });
      waiters_.fetch_sub(1);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  Status st = std::move(error_);
  error_ = Status::Ok();
  return st;
}

}  // namespace tpu
