// Queue: a device's in-order, asynchronous stream of work -- program launches, copies between the
// host and the device, and host tasks ordered with them (events, collectives). Every backend
// implements it; runtime/worker_queue.h is the implementation both backends share (one worker
// thread running the backend's Executor).
//
// Errors (Note [Task errors]): a failed task's error is kept with its op and the user's line and
// the thread that issued it. Its results are marked failed (Note [Failed buffers]); a task that
// reads a failed buffer does not run, and its results fail with the same origin. A sync point
// raises the errors that concern it: the error of the data it reads, or one its thread issued;
// Synchronize() raises any. None is dropped: an error is kept until some sync point reports it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/buffer.h"
#include "runtime/executable.h"

namespace tpu {

// Where one op of a program came from, for error messages.
struct OpOrigin {
  const char* op = "";   // the ATen op's schema name (outlives the process)
  std::string location;  // "file.py:42" when captured, else empty
  int thread = 0;        // the thread that issued it (a fused window holds several threads' ops)
};

// What a queued task carries for error reports.
struct TaskContext {
  TaskContext() = default;
  explicit TaskContext(const char* op_name, std::string loc = {}) : op(op_name), location(std::move(loc)) {}
  const char* op = "";   // points at a name that outlives the process (the op's schema name)
  std::string location;  // "file.py:42" when captured, else empty
  int thread = 0;        // the issuing thread's id (ThreadId())
  uint64_t profile_id = 0;  // what a profiler links the task to (the issuing op's), 0: none
  // For a program of many ops (a fused window): the origin of each op of its source graph.
  std::shared_ptr<const std::vector<OpOrigin>> origins;
};

// A small id for the calling thread (1, 2, ...), stable for its lifetime.
int ThreadId();

// A launch of an Executable with its arguments.
struct Launch {
  ExecutablePtr executable;
  std::vector<Binding> params;
  std::vector<Binding> results;
};

// How a failed launch ended: which op failed, and which results hold no valid value.
struct RunReport {
  int failed_op = -1;  // the executed program's op that failed (-1: unknown)
  // Per result, nonzero when it was not computed. Empty: none was (a backend that cannot run
  // part of a program). A backend that can runs on past a failed op, computing every result that
  // does not depend on it, as if the program's ops had run one by one.
  std::vector<uint8_t> failed_results;
};

// What a backend runs on its queue, in submission order. Buffers are materialized before any of
// these is called.
class Executor {
 public:
  virtual ~Executor() = default;
  // On failure, fills `report` (it arrives cleared).
  virtual Status Run(const Launch& launch, RunReport* report) = 0;
  virtual Status Write(Buffer* dst, int64_t offset, const void* src, int64_t nbytes) = 0;
  virtual Status Read(Buffer* src, int64_t offset, int64_t nbytes, void* dst) = 0;
  virtual Status Copy(Buffer* src, int64_t src_offset, Buffer* dst, int64_t dst_offset, int64_t nbytes) = 0;
};

class Queue {
 public:
  using Task = std::function<Status()>;
  virtual ~Queue() = default;

  // Queues a launch over the bindings (moved into the queue) and marks every bound buffer as
  // used by it. With `may_run_inline` a small launch submitted while the queue is idle may run at
  // once on the calling thread (same order, same error reporting). Returns its sequence number.
  virtual uint64_t Launch(ExecutablePtr exe, Binding* params, size_t num_params, Binding* results,
                          size_t num_results, TaskContext ctx, bool may_run_inline) = 0;
  // Host -> device: `nbytes` from `src` into `dst` at byte `offset`. `src` is copied (or written)
  // before this returns, so the caller may reuse it.
  virtual uint64_t Write(Buffer* dst, int64_t offset, const void* src, int64_t nbytes, TaskContext ctx) = 0;
  // Device -> host: waits for the tasks that write `src`, then copies. Returns the error of the
  // data (Note [Task errors]) if it has one.
  virtual Status Read(Buffer* src, int64_t offset, int64_t nbytes, void* dst) = 0;
  // Device -> device, ordered with everything else.
  virtual uint64_t Copy(Buffer* src, int64_t src_offset, Buffer* dst, int64_t dst_offset, int64_t nbytes,
                        TaskContext ctx) = 0;
  // Device <-> host copies that touch host memory when the task runs, in queue order -- not when
  // it is enqueued: `host` must stay valid until then, and the queue holds `keep` (its owner)
  // until the task has run. For host work ordered between device tasks (collectives' staging):
  // ReadInto a staging area, Enqueue the host work on it, WriteFrom it back, without a host sync.
  virtual uint64_t ReadInto(Buffer* src, int64_t offset, int64_t nbytes, void* host, std::shared_ptr<void> keep,
                            TaskContext ctx) = 0;
  virtual uint64_t WriteFrom(Buffer* dst, int64_t offset, const void* host, int64_t nbytes, std::shared_ptr<void> keep,
                             TaskContext ctx) = 0;
  // A host task ordered with the device's work (events; collectives).
  virtual uint64_t Enqueue(Task task, TaskContext ctx) = 0;
  // A host task that decides whether `results` hold a value: when it fails they are failed (Note
  // [Failed buffers]), so the work that reads them does not run. A collective ends with one, after
  // the WriteFrom tasks that filled its outputs from host memory, returning the exchange's status.
  virtual uint64_t Enqueue(Task task, Binding* results, size_t num_results, TaskContext ctx) = 0;
  // Records `error` as a task's, in order, failing `results` (Note [Failed buffers]): work that
  // could not even be launched (a program that did not compile).
  virtual uint64_t Fail(Status error, Binding* results, size_t num_results, TaskContext ctx) = 0;

  // Waits for task `seq` (and everything before it); returns that task's own error, or the
  // error that kept it from running.
  virtual Status WaitFor(uint64_t seq) = 0;
  // Waits for the tasks that write `buffer`; returns its error, else an unreported error the
  // calling thread issued.
  virtual Status SyncBuffer(const Buffer* buffer) = 0;
  // Waits for everything; returns an unreported error (the calling thread's first, else any).
  virtual Status Synchronize() = 0;
  // The first unreported error, without waiting (reported at exit).
  virtual Status TakeAnyError() = 0;

  // Waits up to `timeout_us` microseconds for task `seq` (and everything before it); returns
  // whether it has finished. For a wait that stays interruptible: the caller wakes to check for
  // a signal between calls (csrc/torch/interrupt.h).
  virtual bool WaitDone(uint64_t seq, int64_t timeout_us) = 0;
  // Cancels every queued task that has not started (the running one finishes): each is skipped,
  // its new results fail with `why` (Code::kCancelled), already reported -- whoever cancels tells
  // the user -- and what it was to update in place keeps its value (Note [Cancellation]).
  // Returns the number of tasks it cancelled, at most.
  virtual uint64_t Cancel(Status why) = 0;

  virtual bool Done(uint64_t seq) const = 0;
  virtual uint64_t submitted() const = 0;  // sequence number of the last task submitted
  virtual uint64_t completed() const = 0;  // ... and of the last one finished
  // Destroys finished tasks (releasing the buffers they held) on the calling thread.
  virtual void CollectGarbage() = 0;
  // Waits until every queued task has run and collects them, leaving errors in place.
  virtual void Drain() = 0;
};

}  // namespace tpu
