#include "runtime/device.h"

#include <pthread.h>

#include <chrono>
#include <string>

#include "base/metrics.h"

namespace tpu {

Queue::Queue(int device) : device_(device), ring_(kMaxInFlight + 1) {
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

void Queue::ReclaimLocked() {
  uint64_t done = ring_done_.load(std::memory_order_acquire);
  uint64_t r = reclaimed_.load(std::memory_order_relaxed);
  for (; r < done; ++r) {
    Item& item = ring_[r % ring_.size()];
    item.task = nullptr;
    item.executor = nullptr;
    item.launch.params.clear();  // releases the buffers; the vectors keep their capacity
    item.launch.results.clear();
    item.launch.executable.reset();
    item.ctx.location.clear();
  }
  reclaimed_.store(r, std::memory_order_relaxed);
}

void Queue::CollectGarbage() {
  if (reclaimed_.load(std::memory_order_relaxed) == ring_done_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(mu_);
  ReclaimLocked();
}

Queue::Item& Queue::BeginEnqueue(std::unique_lock<std::mutex>& lock) {
  // Back-pressure: a producer far ahead of the device would pile up queued buffers. The ring
  // has room for kMaxInFlight + 1 tasks, so below that bound the next slot is always finished.
  if (tail_ - ring_done_.load(std::memory_order_seq_cst) >= kMaxInFlight) {
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    done_cv_.wait(lock, [&] { return tail_ - ring_done_.load(std::memory_order_seq_cst) <= kMaxInFlight / 2; });
    waiters_.fetch_sub(1, std::memory_order_seq_cst);
  }
  ReclaimLocked();
  return ring_[tail_ % ring_.size()];
}

uint64_t Queue::FinishEnqueue(std::unique_lock<std::mutex>& lock) {
  uint64_t seq = ring_[tail_ % ring_.size()].seq;
  submitted_.store(++tail_, std::memory_order_release);
  lock.unlock();
  if (worker_sleeping_.load(std::memory_order_acquire)) work_cv_.notify_one();
  return seq;
}

uint64_t Queue::Enqueue(Task task, TaskContext ctx) {
  std::unique_lock<std::mutex> lock(mu_);
  Item& slot = BeginEnqueue(lock);
  slot.task = std::move(task);
  slot.ctx = std::move(ctx);
  slot.seq = NextSeqLocked();
  return FinishEnqueue(lock);
}

uint64_t Queue::EnqueueLaunch(Executor* executor, ExecutablePtr exe, Binding* params, size_t num_params,
                              Binding* results, size_t num_results, TaskContext ctx, bool may_run_inline) {
  static Counter* inline_runs = GetCounter("inline_executions");
  std::unique_lock<std::mutex> lock(mu_);
  if (may_run_inline && ring_done_.load(std::memory_order_acquire) == tail_) {
    // Idle: every earlier task has finished (the worker publishes completed_ before ring_done_),
    // and holding mu_ keeps later ones out until this one is done.
    ReclaimLocked();
    uint64_t seq = NextSeqLocked();
    // Buffer use marks are skipped: they tell a sync point what to wait for, and this is done.
    Launch& launch = inline_launch_;
    launch.executable = std::move(exe);
    for (size_t i = 0; i < num_params; ++i) launch.params.push_back(std::move(params[i]));
    for (size_t i = 0; i < num_results; ++i) launch.results.push_back(std::move(results[i]));
    Status st = executor->Run(launch);
    if (!st.ok()) RecordErrorLocked(st, ctx);
    launch.params.clear();
    launch.results.clear();
    launch.executable.reset();
    completed_.store(seq, std::memory_order_seq_cst);
    lock.unlock();
    inline_runs->Add();
    return seq;
  }
  Item& slot = BeginEnqueue(lock);
  uint64_t seq = NextSeqLocked();
  slot.seq = seq;
  slot.executor = executor;
  slot.launch.executable = std::move(exe);
  for (size_t i = 0; i < num_params; ++i) {
    if (Buffer* b = params[i].buffer()) b->MarkUse(seq);
    slot.launch.params.push_back(std::move(params[i]));
  }
  for (size_t i = 0; i < num_results; ++i) {
    if (Buffer* b = results[i].buffer()) b->MarkUse(seq);  // no buffer: memory we do not own
    slot.launch.results.push_back(std::move(results[i]));
  }
  slot.ctx = std::move(ctx);
  return FinishEnqueue(lock);
}

void Queue::RecordErrorLocked(const Status& st, const TaskContext& ctx) {
  if (!error_.ok()) return;  // the first error is the one reported
  std::string where = ctx.location.empty() ? "" : " (issued at " + ctx.location + ")";
  error_ = Status(st.code(), std::string(ctx.op) + where + ": " + st.message());
}

void Queue::WakeWaiters() {
  // Pairs with the waiters' seq_cst increment of waiters_ before they test completed_: either
  // they see the new completed_, or we see them and notify under the lock.
  if (waiters_.load(std::memory_order_seq_cst) > 0) {
    { std::lock_guard<std::mutex> lock(mu_); }
    done_cv_.notify_all();
  }
}

void Queue::WorkerLoop() {
  for (uint64_t next = 1;; ++next) {
    if (submitted_.load(std::memory_order_acquire) < next) {
      // Spin briefly (~20 us) before sleeping: the next op usually arrives within microseconds.
      for (int i = 0; i < 2000 && submitted_.load(std::memory_order_acquire) < next; ++i) __builtin_ia32_pause();
      if (submitted_.load(std::memory_order_acquire) < next) {
        std::unique_lock<std::mutex> lock(mu_);
        worker_sleeping_.store(true, std::memory_order_release);
        work_cv_.wait(lock, [&] { return stop_ || submitted_.load(std::memory_order_acquire) >= next; });
        worker_sleeping_.store(false, std::memory_order_release);
        if (submitted_.load(std::memory_order_acquire) < next) return;  // stopping, nothing left
      }
    }
    // The producer finished writing this slot before publishing `submitted_` (release/acquire),
    // and will not touch it again until `ring_done_` passes it.
    Item& item = ring_[(next - 1) % ring_.size()];
    uint64_t seq = item.seq;
    Status st = item.task ? item.task() : item.executor->Run(item.launch);
    if (!st.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      RecordErrorLocked(st, item.ctx);
    }
    // completed_ first: a producer that sees the ring drained may run the next task inline and
    // advance completed_ past this one. After ring_done_ the slot belongs to the producers.
    completed_.store(seq, std::memory_order_seq_cst);
    ring_done_.store(next, std::memory_order_seq_cst);
    WakeWaiters();
  }
}

void Queue::Drain() {
  uint64_t seq = seq_.load(std::memory_order_acquire);
  std::unique_lock<std::mutex> lock(mu_);
  if (completed_.load(std::memory_order_seq_cst) < seq) {
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    done_cv_.wait(lock, [&] { return completed_.load(std::memory_order_seq_cst) >= seq; });
    waiters_.fetch_sub(1, std::memory_order_seq_cst);
  }
  ReclaimLocked();
}

Status Queue::WaitFor(uint64_t seq) {
  if (completed_.load(std::memory_order_acquire) < seq) {
    // Short spin, then block.
    for (int i = 0; i < 1000 && completed_.load(std::memory_order_acquire) < seq; ++i) __builtin_ia32_pause();
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (completed_.load(std::memory_order_seq_cst) < seq) {
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    done_cv_.wait(lock, [&] { return completed_.load(std::memory_order_seq_cst) >= seq; });
    waiters_.fetch_sub(1, std::memory_order_seq_cst);
  }
  Status st = std::move(error_);
  error_ = Status::Ok();
  ReclaimLocked();
  return st;
}

}  // namespace tpu
