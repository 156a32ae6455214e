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
  // Waits until every task up to `seq` has run. Returns (and clears) the first error raised.
  Status WaitFor(uint64_t seq);
  Status Synchronize() { return WaitFor(submitted_.load(std::memory_order_acquire)); }
  bool Done(uint64_t seq) const { return completed_.load(std::memory_order_acquire) >= seq; }
  uint64_t submitted() const { return submitted_.load(std::memory_order_acquire); }
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
    Task task;
    TaskContext ctx;
    uint64_t seq = 0;
  };
  void WorkerLoop();
  int device_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  // Note [Queue memory]: a fixed ring (no allocation per task), and finished tasks are handed
  // back to the producer side (graveyard_) to be destroyed there: the launch objects were
  // allocated by the producer, and freeing them on the worker thread made every op pay for
  // cross-thread malloc arena traffic.
  std::vector<Item> ring_;
  uint64_t head_ = 0, tail_ = 0;  // pop / push positions (monotonic; index = pos % ring size)
  std::vector<Task> graveyard_;
  std::atomic<size_t> graveyard_size_{0};
  std::atomic<uint64_t> submitted_{0}, completed_{0};
  std::atomic<bool> worker_sleeping_{false};
  std::atomic<int> waiters_{0};
  bool stop_ = false;
  Status error_;
  std::thread worker_;
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
