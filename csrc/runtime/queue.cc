#include "runtime/device.h"

#include <pthread.h>

#include <chrono>
#include <string>

namespace tpu {

Queue::Queue(int device) : device_(device), ring_(2 * kMaxInFlight + 2) {
  graveyard_.reserve(256);
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
  CollectGarbage();
}

void Queue::CollectGarbage() {
  thread_local std::vector<Task> dead;
  if (graveyard_size_.load(std::memory_order_relaxed) == 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (graveyard_.empty()) return;
    std::swap(dead, graveyard_);
    graveyard_size_.store(0, std::memory_order_relaxed);
  }
  dead.clear();  // runs the destructors here, outside the lock
}

uint64_t Queue::Enqueue(Task task, TaskContext ctx) {
  // Collect in batches: one lock per 32 finished tasks rather than one per op.
  if (graveyard_size_.load(std::memory_order_relaxed) >= 32) CollectGarbage();
  // Back-pressure: a producer far ahead of the device would pile up queued buffers.
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
    Item& slot = ring_[tail_++ % ring_.size()];
    slot.task = std::move(task);
    slot.ctx = std::move(ctx);
    slot.seq = seq;
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
      if (head_ == tail_) {
        // Spin briefly (~20 us) before sleeping: the next op usually arrives within microseconds.
        lock.unlock();
        for (int i = 0; i < 2000; ++i) {
          if (submitted_.load(std::memory_order_acquire) != completed_.load(std::memory_order_relaxed)) break;
          __builtin_ia32_pause();
        }
        lock.lock();
        worker_sleeping_.store(true, std::memory_order_release);
        work_cv_.wait(lock, [&] { return stop_ || head_ != tail_; });
        worker_sleeping_.store(false, std::memory_order_release);
        if (stop_ && head_ == tail_) return;
      }
      item = std::move(ring_[head_++ % ring_.size()]);
    }
    Status st = item.task();
    std::lock_guard<std::mutex> lock(mu_);
    // Hand the finished task (and the buffers it holds) to the producer side; see Note [Queue memory].
    graveyard_.push_back(std::move(item.task));
    graveyard_size_.store(graveyard_.size(), std::memory_order_relaxed);
    if (!st.ok() && error_.ok()) {
      std::string where = item.ctx.location.empty() ? "" : " (issued at " + item.ctx.location + ")";
      error_ = Status(st.code(), std::string(item.ctx.op) + where + ": " + st.message());
    }
    completed_.store(item.seq, std::memory_order_release);
    if (waiters_.load(std::memory_order_acquire) > 0) done_cv_.notify_all();
  }
}

void Queue::Drain() {
  uint64_t seq = submitted_.load(std::memory_order_acquire);
  if (completed_.load(std::memory_order_acquire) < seq) {
    std::unique_lock<std::mutex> lock(mu_);
    waiters_.fetch_add(1);
    done_cv_.wait(lock, [&] { return completed_.load(std::memory_order_acquire) >= seq; });
    waiters_.fetch_sub(1);
  }
  CollectGarbage();
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
  Status st;
  {
    std::lock_guard<std::mutex> lock(mu_);
    st = std::move(error_);
    error_ = Status::Ok();
  }
  CollectGarbage();
  return st;
}

}  // namespace tpu
