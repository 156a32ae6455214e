// WorkerQueue: the Queue both backends use -- an in-order ring of tasks run by one worker thread
// through the backend's Executor (host kernels, or PJRT calls).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/queue.h"

namespace tpu {

// Note [Task observer]: an optional, process-wide observer of the tasks every WorkerQueue runs,
// for profilers (the torch profiler's device timeline). It is called on the thread that ran the
// task (the queue worker, or the submitting thread for an inline run) right after the task, with
// the task's wall-clock interval; tasks skipped after a failed input are not reported. With no
// observer set a task costs one extra relaxed atomic load.
struct TaskRecord {
  enum class Kind : uint8_t { kTask, kLaunch, kWrite, kCopy, kReadInto, kWriteFrom };
  Kind kind = Kind::kTask;
  int device = 0;
  uint64_t seq = 0;
  const TaskContext* ctx = nullptr;
  const Executable* executable = nullptr;  // kLaunch
  int64_t nbytes = 0;                       // copies
  int64_t start_ns = 0, end_ns = 0;         // system_clock, since the epoch
  bool ok = true;
  bool ran_inline = false;
};
class TaskObserver {
 public:
  virtual ~TaskObserver() = default;
  virtual void OnTaskRun(const TaskRecord& record) = 0;
};

class WorkerQueue final : public Queue {
 public:
  // With `allocator` and `max_held_bytes` > 0: Note [Queue-held memory].
  WorkerQueue(int device, Executor* executor, const Allocator* allocator = nullptr, int64_t max_held_bytes = 0);
  ~WorkerQueue() override;

  uint64_t Launch(ExecutablePtr exe, Binding* params, size_t num_params, Binding* results, size_t num_results,
                  TaskContext ctx, bool may_run_inline) override;
  uint64_t Write(Buffer* dst, int64_t offset, const void* src, int64_t nbytes, TaskContext ctx) override;
  Status Read(Buffer* src, int64_t offset, int64_t nbytes, void* dst) override;
  uint64_t Copy(Buffer* src, int64_t src_offset, Buffer* dst, int64_t dst_offset, int64_t nbytes,
                TaskContext ctx) override;
  uint64_t ReadInto(Buffer* src, int64_t offset, int64_t nbytes, void* host, std::shared_ptr<void> keep,
                    TaskContext ctx) override;
  uint64_t WriteFrom(Buffer* dst, int64_t offset, const void* host, int64_t nbytes, std::shared_ptr<void> keep,
                     TaskContext ctx) override;
  uint64_t Enqueue(Task task, TaskContext ctx) override;
  uint64_t Enqueue(Task task, Binding* results, size_t num_results, TaskContext ctx) override;
  uint64_t Fail(Status error, Binding* results, size_t num_results, TaskContext ctx) override;

  Status WaitFor(uint64_t seq) override;
  Status SyncBuffer(const Buffer* buffer) override;
  Status Synchronize() override;
  Status TakeAnyError() override;
  bool WaitDone(uint64_t seq, int64_t timeout_us) override;
  uint64_t Cancel(Status why) override;

  bool Done(uint64_t seq) const override { return completed_.load(std::memory_order_acquire) >= seq; }
  uint64_t submitted() const override { return seq_.load(std::memory_order_acquire); }
  uint64_t completed() const override { return completed_.load(std::memory_order_acquire); }
  void CollectGarbage() override;
  void Drain() override;

  // Most tasks a producer may have queued before it waits (bounded memory).
  static constexpr uint64_t kMaxInFlight = 4096;

  // Note [Task observer]: installs (null: removes) the observer; the caller keeps it alive.
  static void SetTaskObserver(TaskObserver* observer);

 private:
  enum class Kind : uint8_t { kTask, kLaunch, kWrite, kCopy, kReadInto, kWriteFrom };
  struct Item {
    Kind kind = Kind::kTask;
    Task task;
    // kLaunch: the program and its bindings. kWrite: results[0] is the destination. kCopy:
    // params[0] the source, results[0] the destination. (Bindings keep their buffers alive.)
    struct Launch launch;
    std::vector<char> bytes;  // kWrite: the host data
    int64_t src_offset = 0, dst_offset = 0, nbytes = 0;
    void* host = nullptr;           // kReadInto / kWriteFrom: the caller's memory ...
    std::shared_ptr<void> keep;     // ... and its owner, held until the task has run
    TaskContext ctx;
    uint64_t seq = 0;
  };
  // Note [Task errors]: one record per failed task, kept until a sync point reports it.
  struct ErrorRecord {
    uint64_t seq = 0;
    Status status;
    int thread = 0;
    bool reported = false;
    uint64_t reported_at = 0;  // the last task issued when it was reported
    // Buffers a skipped task was to update in place: their contents are still the values from
    // before the failure, so once the error is reported they are valid again.
    std::vector<Buffer*> restore;
  };

  // Claims the ring slot for the next task (waiting for room), under `lock` on mu_.
  Item& BeginEnqueue(std::unique_lock<std::mutex>& lock);
  uint64_t FinishEnqueue(std::unique_lock<std::mutex>& lock);
  void ReclaimLocked();
  uint64_t NextSeqLocked() {
    uint64_t seq = seq_.load(std::memory_order_relaxed) + 1;
    seq_.store(seq, std::memory_order_release);
    return seq;
  }
  // Runs one item (on the worker, or inline under mu_), applying Note [Failed buffers].
  void RunItem(Item& item);
  void ReportTask(const Item& item, TaskObserver* observer, int64_t start_ns, bool ok);
  Status Execute(Item& item, RunReport* report);
  // Both mark the item's failed results under errors_mu_, so a sync point reporting the error at
  // the same time restores what it should.
  void RecordError(const Item& item, const Status& st, const RunReport& report);
  void RecordSkip(const Item& item, size_t failed_param, uint64_t origin);
  // A task Cancel() reached before it started.
  void SkipCancelled(const Item& item);
  // Waits (spin, then block) until task `seq` has finished.
  void WaitUntilDone(uint64_t seq);
  // Marks `record` reported and returns its status (restoring the buffers it kept). Under mu_.
  Status ReportLocked(ErrorRecord& record);
  ErrorRecord* FindLocked(uint64_t seq);
  // The error of reading a buffer whose failure `rec` (reported) explains.
  static Status NoValue(const ErrorRecord& rec);
  void WorkerLoop();
  void WakeWaiters();
  // Blocks (mu_ held by `lock`) until completed_ >= seq, or until `deadline` if given; true if done.
  bool WaitForSeqLocked(std::unique_lock<std::mutex>& lock, uint64_t seq,
                        const std::chrono::steady_clock::time_point* deadline);

  // Layout: the producer's fields, the two counters, and the rarely written fields each get their
  // own cache line, so the worker polling `submitted_` and publishing `completed_` never makes the
  // producer's lock miss the cache.
  const int device_;
  Executor* const executor_;
  const Allocator* const held_allocator_;
  const int64_t max_held_bytes_;
  // Note [Queue memory]: a fixed ring of task slots, so queueing allocates nothing. The worker
  // runs a task in its slot and publishes `ring_done_`; it never touches the slot again. Producers
  // (under mu_) reclaim finished slots -- destroying the launch's bindings, which releases buffers
  // -- before they queue the next task, so memory is freed on the thread that allocated it.
  std::vector<Item> ring_;
  alignas(64) std::mutex mu_;  // producers; also guards stop_, the error records and the waits
  uint64_t tail_ = 0;          // ring tasks written (== submitted_)
  std::atomic<uint64_t> reclaimed_{0};
  std::atomic<uint64_t> seq_{0};  // last sequence number given out (written under mu_)
  bool stop_ = false;
  Item inline_item_;  // a launch run on the submitting thread (under mu_)
  RunReport report_;  // reused by RunItem (items run one at a time: the worker, or inline under mu_)
  alignas(64) std::mutex errors_mu_;
  std::deque<ErrorRecord> errors_;  // in sequence order
  std::deque<std::pair<uint64_t, uint64_t>> skipped_;  // (task, origin) of tasks that did not run (bounded)
  std::atomic<int> unreported_{0};
  // Note [Cancellation]: tasks up to this sequence number that have not started are skipped, and
  // their results fail with the error record `cancel_origin_` (under errors_mu_). Record ids of
  // cancellations carry kCancelTag, so they never equal a task's sequence number.
  std::atomic<uint64_t> cancel_upto_{0};
  uint64_t cancel_origin_ = 0;
  uint64_t cancels_ = 0;
  static constexpr uint64_t kCancelTag = uint64_t{1} << 63;
  alignas(64) std::atomic<uint64_t> submitted_{0};  // ring tasks published to the worker
  alignas(64) std::atomic<uint64_t> completed_{0};  // sequence number of the last finished task
  std::atomic<uint64_t> ring_done_{0};              // ring tasks finished
  alignas(64) std::atomic<bool> worker_sleeping_{false};
  // Note [Targeted wakes] (worker_queue.cc): threads waiting on done_cv_ for the ring's progress
  // (room in it, or its drain: ring_waiters_) are woken at every finished task; those waiting for a task's completion
  // (seq_waiters_) only once completed_ reaches wake_seq_, the smallest sequence number they await.
  std::atomic<int> ring_waiters_{0}, seq_waiters_{0};
  std::atomic<uint64_t> wake_seq_{~uint64_t{0}};
  std::condition_variable work_cv_, done_cv_;
  alignas(64) std::thread worker_;
};

}  // namespace tpu
