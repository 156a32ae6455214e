#include "runtime/device.h"

#include <pthread.h>

#include <chrono>
#include <string>

namespace tpu {

Queue::Queue(int device) : device_(device) {
  worker_ = std::thread([this] { WorkerLoop(); });
  // Named so profilers and debuggers show which thread is the device.
  pthread_setname_np(worker_.native_handle(), ("tpu-queue-" + std::to_string(device_)).c_str());
}

Queue::~Queue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  worker_.join();
}

uint64_t Queue::Enqueue(Task task, TaskContext ctx) {
  // Back-pressure: a producer far ahead of the device would pile up queued buffers.
  constexpr uint64_t kMaxInFlight = 4096;
  if (submitted_.load(std::memory_order_relaxed) - completed_.load(std::memory_order_acquire) > kMaxInFlight) {
    std::unique_lock<std::mutex> lock(mu_);
    waiters_.fetch_add(1);
    done_cv_.wait(lock, [&] {
      return submitted_.load(std::memory_order_relaxed) - completed_.load(std::memory_order_acquire) <= kMaxInFlight / 2;
    });
    waiters_.fetch_sub(1);
  }
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
        // Spin briefly (~20 us) before sleeping: the next op usually arrives within microseconds.
        lock.unlock();
        for (int i = 0; i < 2000; ++i) {
          if (submitted_.load(std::memory_order_acquire) != completed_.load(std::memory_order_relaxed)) break;
          __builtin_ia32_pause();
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
    for (int i = 0; i < 1000 && completed_.load(std::memory_order_acquire) < seq; ++i) __builtin_ia32_pause();
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
