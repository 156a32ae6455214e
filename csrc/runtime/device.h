// Runtime interface, split by lifetime: Backend -> Device -> (Allocator, Queue); Event.
// The host executor (runtime/host) implements it; a PJRT backend will implement the same.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "runtime/allocator.h"
#include "runtime/buffer.h"
#include "runtime/executable.h"

namespace tpu {

struct DeviceProperties {
  std::string name;       // "TPU v6e (host executor)"
  std::string chip;       // "v6e"
  int64_t memory_capacity = 0;
  int64_t hbm_bytes = 0;  // what the real chip has
  int index = 0;
};

// What a queued task carries for error reports: the op that issued it and the user's line.
struct TaskContext {
  const char* op = "";   // points at a name that outlives the process (the op's schema name)
  std::string location;  // "file.py:42" when captured, else empty
};

// A launch of an Executable with its arguments.
struct Launch {
  ExecutablePtr executable;
  std::vector<Binding> params;
  std::vector<Binding> results;
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual Status Run(const Launch& launch) = 0;
};

// In-order asynchronous queue with one worker thread. Errors raised by a task are kept with the
// task's context and returned by the next Synchronize(); later tasks still run.
class Queue {
 public:
  using Task = std::function<Status()>;
  explicit Queue(int device);
  ~Queue();
  // Returns the task's sequence number.
  uint64_t Enqueue(Task task, TaskContext ctx);
  // Queues `executor->Run(...)` of `exe` over the bindings, which are moved into the queue's own
  // launch slot, and marks every bound buffer as used by it. The hot path of eager mode: it
  // allocates nothing (a slot's vectors keep their capacity from one launch to the next).
  //
  // With `may_run_inline`, a launch submitted while the queue is idle runs at once on the calling
  // thread instead (for a tiny program the hand-off to the worker costs more than the program).
  // Nothing observable changes: it still gets the next sequence number, runs after everything
  // queued before it and before anything queued after it, and an error it raises is kept for the
  // next sync point exactly like a queued task's.
  uint64_t EnqueueLaunch(Executor* executor, ExecutablePtr exe, Binding* params, size_t num_params,
                         Binding* results, size_t num_results, TaskContext ctx, bool may_run_inline = false);
  // Waits until every task up to `seq` has run. Returns (and clears) the first error raised.
  Status WaitFor(uint64_t seq);
  Status Synchronize() { return WaitFor(seq_.load(std::memory_order_acquire)); }
  bool Done(uint64_t seq) const { return completed_.load(std::memory_order_acquire) >= seq; }
  // Sequence numbers: of the last task submitted, of the last one finished.
  uint64_t submitted() const { return seq_.load(std::memory_order_acquire); }
  uint64_t completed() const { return completed_.load(std::memory_order_acquire); }
  // Destroys finished tasks (releasing the buffers they held) on the calling thread.
  void CollectGarbage();
  // Waits until every queued task has run and collects them, leaving a pending error in place
  // for the next sync point (used to reclaim memory before reporting out-of-memory).
  void Drain();

  // Most programs a producer may have queued before Enqueue waits (bounded memory).
  static constexpr uint64_t kMaxInFlight = 4096;

 private:
  struct Item {
    Task task;                    // a general task, or (when empty) executor->Run(launch)
    Executor* executor = nullptr;
    Launch launch;
    TaskContext ctx;
    uint64_t seq = 0;
  };
  // Claims the ring slot for the next task (waiting for room), under `lock` on mu_.
  Item& BeginEnqueue(std::unique_lock<std::mutex>& lock);
  uint64_t FinishEnqueue(std::unique_lock<std::mutex>& lock);
  void ReclaimLocked();
  // Gives out the next sequence number (under mu_: numbers follow submission order).
  uint64_t NextSeqLocked() {
    uint64_t seq = seq_.load(std::memory_order_relaxed) + 1;
    seq_.store(seq, std::memory_order_release);
    return seq;
  }
  void RecordErrorLocked(const Status& st, const TaskContext& ctx);
  void WorkerLoop();
  void WakeWaiters();
  // Layout: the producer's fields, the two counters, and the rarely written fields each get their
  // own cache line, so the worker polling `submitted_` and publishing `completed_` never makes the
  // producer's lock miss the cache (and nothing else on the device's object shares those lines).
  const int device_;
  // Note [Queue memory]: a fixed ring of task slots, so queueing allocates nothing. The worker
  // runs a task in its slot and publishes `ring_done_`; it never touches the slot again. Producers
  // (under mu_) reclaim finished slots -- destroying the launch's bindings, which releases buffers
  // -- before they queue the next task, so memory is freed on the thread that allocated it
  // (freeing on the worker made every op pay for cross-thread malloc traffic) and promptly.
  std::vector<Item> ring_;
  alignas(64) std::mutex mu_;  // producers; also guards error_, stop_ and the condition variables' waits
  uint64_t tail_ = 0;          // ring tasks written (== submitted_)
  std::atomic<uint64_t> reclaimed_{0};  // finished ring tasks whose slots were reclaimed (written under mu_)
  std::atomic<uint64_t> seq_{0};        // last sequence number given out (written under mu_)
  bool stop_ = false;
  Status error_;
  Launch inline_launch_;  // the bindings of a launch run on the submitting thread (under mu_)
  alignas(64) std::atomic<uint64_t> submitted_{0};  // ring tasks published to the worker
  alignas(64) std::atomic<uint64_t> completed_{0};  // sequence number of the last finished task
  std::atomic<uint64_t> ring_done_{0};              // ring tasks finished
  alignas(64) std::atomic<bool> worker_sleeping_{false};
  std::atomic<int> waiters_{0};
  std::condition_variable work_cv_, done_cv_;
  alignas(64) std::thread worker_;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceProperties& properties() const = 0;
  virtual Allocator& allocator() = 0;
  virtual Queue& queue() = 0;
  virtual Executor& executor() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual int device_count() const = 0;
  virtual Device& device(int index) = 0;
};

// The process's backend (the host executor unless another is configured).
Backend& GetBackend();

// HBM per chip kind; 0 for an unknown kind.
int64_t ChipHbmBytes(const std::string& chip);

}  // namespace tpu
