#include "runtime/worker_queue.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include "base/cpu_relax.h"
#include "base/metrics.h"
#include "base/thread_pool.h"

namespace tpu {
namespace {

std::atomic<int> g_next_thread_id{1};
std::atomic<TaskObserver*> g_task_observer{nullptr};

int64_t WallNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void WorkerQueue::SetTaskObserver(TaskObserver* observer) {
  g_task_observer.store(observer, std::memory_order_release);
}

int ThreadId() {
  thread_local int id = g_next_thread_id.fetch_add(1, std::memory_order_relaxed);
  return id;
}

WorkerQueue::WorkerQueue(int device, Executor* executor, const Allocator* allocator, int64_t max_held_bytes)
    : device_(device),
      executor_(executor),
      held_allocator_(allocator),
      max_held_bytes_(max_held_bytes),
      ring_(kMaxInFlight + 1) {
  worker_ = std::thread([this] { WorkerLoop(); });
  // Named so profilers and debuggers show which thread is the device.
  pthread_setname_np(worker_.native_handle(), ("tpu-queue-" + std::to_string(device_)).c_str());
}

WorkerQueue::~WorkerQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  worker_.join();
  CollectGarbage();
  std::lock_guard<std::mutex> lock(errors_mu_);
  for (ErrorRecord& r : errors_)
    for (Buffer* b : r.restore) b->Release();
}

void WorkerQueue::ReclaimLocked() {
  uint64_t done = ring_done_.load(std::memory_order_acquire);
  uint64_t r = reclaimed_.load(std::memory_order_relaxed);
  for (; r < done; ++r) {
    Item& item = ring_[r % ring_.size()];
    item.task = nullptr;
    item.launch.params.clear();  // releases the buffers; the vectors keep their capacity
    item.launch.results.clear();
    item.launch.executable.reset();
    item.bytes.clear();
    item.keep.reset();
    item.ctx.location.clear();
    item.ctx.origins.reset();
  }
  reclaimed_.store(r, std::memory_order_relaxed);
}

void WorkerQueue::CollectGarbage() {
  if (reclaimed_.load(std::memory_order_relaxed) == ring_done_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(mu_);
  ReclaimLocked();
}

WorkerQueue::Item& WorkerQueue::BeginEnqueue(std::unique_lock<std::mutex>& lock) {
  // Back-pressure: a producer far ahead of the device would pile up queued buffers. The ring
  // has room for kMaxInFlight + 1 tasks, so below that bound the next slot is always finished.
  if (tail_ - ring_done_.load(std::memory_order_seq_cst) >= kMaxInFlight) {
    ThreadPool::ProducerWait waiting;
    ring_waiters_.fetch_add(1, std::memory_order_seq_cst);
    done_cv_.wait(lock, [&] { return tail_ - ring_done_.load(std::memory_order_seq_cst) <= kMaxInFlight / 2; });
    ring_waiters_.fetch_sub(1, std::memory_order_seq_cst);
  }
  // Note [Queue-held memory]: where freed buffers' memory must stay until the queued tasks that
  // use them have run (an allocator without stream-ordered frees, Note [Stream-ordered frees]), a
  // producer that never syncs would keep up to kMaxInFlight tasks' worth of dead tensors. Past
  // `max_held_bytes_` of them it waits for the queue to drain, then reclaims them.
  if (max_held_bytes_ > 0 && held_allocator_->held_by_queue() > max_held_bytes_) {
    static Counter* waits = GetCounter("queue_held_memory_waits");
    waits->Add();
    ThreadPool::ProducerWait waiting;
    ring_waiters_.fetch_add(1, std::memory_order_seq_cst);
    done_cv_.wait(lock, [&] { return tail_ == ring_done_.load(std::memory_order_seq_cst); });
    ring_waiters_.fetch_sub(1, std::memory_order_seq_cst);
  }
  ReclaimLocked();
  Item& slot = ring_[tail_ % ring_.size()];
  slot.seq = NextSeqLocked();
  return slot;
}

uint64_t WorkerQueue::FinishEnqueue(std::unique_lock<std::mutex>& lock) {
  Item& slot = ring_[tail_ % ring_.size()];
  uint64_t seq = slot.seq;
  // Marks first, then the queue takes the references over (Note [Stream-ordered frees]): a buffer
  // whose owners let go from now on is released knowing this task uses it. Only this device's
  // buffers: another device's memory is not ordered by this queue.
  for (std::vector<Binding>* list : {&slot.launch.params, &slot.launch.results})
    for (Binding& b : *list)
      if (Buffer* buf = b.buffer()) {
        buf->MarkUse(seq);
        if (buf->device() == device_) b.AdoptIntoQueue();
      }
  submitted_.store(++tail_, std::memory_order_release);
  lock.unlock();
  ThreadPool::NoteProducerActive();
  if (worker_sleeping_.load(std::memory_order_acquire)) work_cv_.notify_one();
  return seq;
}

uint64_t WorkerQueue::Enqueue(Task task, TaskContext ctx) {
  std::unique_lock<std::mutex> lock(mu_);
  Item& slot = BeginEnqueue(lock);
  slot.kind = Kind::kTask;
  slot.task = std::move(task);
  slot.ctx = std::move(ctx);
  return FinishEnqueue(lock);
}

uint64_t WorkerQueue::Enqueue(Task task, Binding* results, size_t num_results, TaskContext ctx) {
  std::unique_lock<std::mutex> lock(mu_);
  Item& slot = BeginEnqueue(lock);
  slot.kind = Kind::kTask;
  slot.task = std::move(task);
  for (size_t i = 0; i < num_results; ++i) slot.launch.results.push_back(std::move(results[i]));
  slot.ctx = std::move(ctx);
  return FinishEnqueue(lock);
}

uint64_t WorkerQueue::Fail(Status error, Binding* results, size_t num_results, TaskContext ctx) {
  return Enqueue([error = std::move(error)] { return error; }, results, num_results, std::move(ctx));
}

uint64_t WorkerQueue::Launch(ExecutablePtr exe, Binding* params, size_t num_params, Binding* results,
                             size_t num_results, TaskContext ctx, bool may_run_inline) {
  static Counter* inline_runs = GetCounter("inline_executions");
  std::unique_lock<std::mutex> lock(mu_);
  bool idle = ring_done_.load(std::memory_order_acquire) == tail_;
  Item& slot = may_run_inline && idle ? inline_item_ : BeginEnqueue(lock);
  if (&slot == &inline_item_) {
    // Idle: every earlier task has finished (the worker publishes completed_ before ring_done_),
    // and holding mu_ keeps later ones out until this one is done.
    ReclaimLocked();
    slot.seq = NextSeqLocked();
  }
  slot.kind = Kind::kLaunch;
  slot.launch.executable = std::move(exe);
  for (size_t i = 0; i < num_params; ++i) slot.launch.params.push_back(std::move(params[i]));
  for (size_t i = 0; i < num_results; ++i) slot.launch.results.push_back(std::move(results[i]));
  slot.ctx = std::move(ctx);
  if (&slot != &inline_item_) return FinishEnqueue(lock);
  // Buffer use marks are skipped: they tell a sync point what to wait for, and this is done.
  uint64_t seq = slot.seq;
  RunItem(slot);
  slot.launch.params.clear();
  slot.launch.results.clear();
  slot.launch.executable.reset();
  slot.ctx.origins.reset();
  completed_.store(seq, std::memory_order_seq_cst);
  lock.unlock();
  inline_runs->Add();
  return seq;
}

uint64_t WorkerQueue::Write(Buffer* dst, int64_t offset, const void* src, int64_t nbytes, TaskContext ctx) {
  std::unique_lock<std::mutex> lock(mu_);
  if (ring_done_.load(std::memory_order_acquire) == tail_) {
    // Idle: write now, straight from the caller's memory (no snapshot).
    ReclaimLocked();
    Item& item = inline_item_;
    item.seq = NextSeqLocked();
    item.kind = Kind::kWrite;
    item.launch.results.emplace_back(dst, offset, DType::kU8, Dims{nbytes});
    item.dst_offset = offset;
    item.nbytes = nbytes;
    item.ctx = std::move(ctx);
    const void* saved = src;
    item.task = [this, dst, offset, saved, nbytes] { return executor_->Write(dst, offset, saved, nbytes); };
    uint64_t seq = item.seq;
    RunItem(item);
    item.task = nullptr;
    item.launch.results.clear();
    completed_.store(seq, std::memory_order_seq_cst);
    return seq;
  }
  Item& slot = BeginEnqueue(lock);
  slot.kind = Kind::kWrite;
  slot.bytes.assign(static_cast<const char*>(src), static_cast<const char*>(src) + nbytes);
  slot.launch.results.emplace_back(dst, offset, DType::kU8, Dims{nbytes});
  slot.dst_offset = offset;
  slot.nbytes = nbytes;
  slot.ctx = std::move(ctx);
  return FinishEnqueue(lock);
}

uint64_t WorkerQueue::ReadInto(Buffer* src, int64_t offset, int64_t nbytes, void* host, std::shared_ptr<void> keep,
                               TaskContext ctx) {
  std::unique_lock<std::mutex> lock(mu_);
  Item& slot = BeginEnqueue(lock);
  slot.kind = Kind::kReadInto;
  slot.launch.params.emplace_back(src, offset, DType::kU8, Dims{nbytes});  // a read: failed data skips it
  slot.src_offset = offset;
  slot.nbytes = nbytes;
  slot.host = host;
  slot.keep = std::move(keep);
  slot.ctx = std::move(ctx);
  return FinishEnqueue(lock);
}

uint64_t WorkerQueue::WriteFrom(Buffer* dst, int64_t offset, const void* host, int64_t nbytes,
                                std::shared_ptr<void> keep, TaskContext ctx) {
  std::unique_lock<std::mutex> lock(mu_);
  Item& slot = BeginEnqueue(lock);
  slot.kind = Kind::kWriteFrom;
  slot.launch.results.emplace_back(dst, offset, DType::kU8, Dims{nbytes});
  slot.dst_offset = offset;
  slot.nbytes = nbytes;
  slot.host = const_cast<void*>(host);
  slot.keep = std::move(keep);
  slot.ctx = std::move(ctx);
  return FinishEnqueue(lock);
}

uint64_t WorkerQueue::Copy(Buffer* src, int64_t src_offset, Buffer* dst, int64_t dst_offset, int64_t nbytes,
                           TaskContext ctx) {
  std::unique_lock<std::mutex> lock(mu_);
  Item& slot = BeginEnqueue(lock);
  slot.kind = Kind::kCopy;
  slot.launch.params.emplace_back(src, src_offset, DType::kU8, Dims{nbytes});
  slot.launch.results.emplace_back(dst, dst_offset, DType::kU8, Dims{nbytes});
  slot.src_offset = src_offset;
  slot.dst_offset = dst_offset;
  slot.nbytes = nbytes;
  slot.ctx = std::move(ctx);
  return FinishEnqueue(lock);
}

Status WorkerQueue::Execute(Item& item, RunReport* report) {
  switch (item.kind) {
    case Kind::kTask: return item.task();
    case Kind::kLaunch: return executor_->Run(item.launch, report);
    case Kind::kWrite:
      if (item.task) return item.task();  // inline: from the caller's memory
      return executor_->Write(item.launch.results[0].buffer(), item.dst_offset, item.bytes.data(), item.nbytes);
    case Kind::kCopy:
      return executor_->Copy(item.launch.params[0].buffer(), item.src_offset, item.launch.results[0].buffer(),
                             item.dst_offset, item.nbytes);
    case Kind::kReadInto:
      return executor_->Read(item.launch.params[0].buffer(), item.src_offset, item.nbytes, item.host);
    case Kind::kWriteFrom:
      return executor_->Write(item.launch.results[0].buffer(), item.dst_offset, item.host, item.nbytes);
  }
  return Internal("unknown queue item");
}

void WorkerQueue::RunItem(Item& item) {
  if (item.seq <= cancel_upto_.load(std::memory_order_acquire)) {
    SkipCancelled(item);
    return;
  }
  // Note [Failed buffers]: a task that reads a failed buffer does not run on its garbage.
  for (size_t p = 0; p < item.launch.params.size(); ++p) {
    const Binding& b = item.launch.params[p];
    uint64_t origin = b.buffer() ? b.buffer()->failed() : 0;
    if (origin) {
      RecordSkip(item, p, origin);
      return;
    }
  }
  RunReport& report = report_;  // worker or inline, never both at once for one item
  report.failed_op = -1;
  report.failed_results.clear();
  TaskObserver* observer = g_task_observer.load(std::memory_order_relaxed);  // Note [Task observer]
  int64_t start_ns = observer ? WallNs() : 0;
  Status st = Execute(item, &report);
  if (observer) ReportTask(item, observer, start_ns, st.ok());
  if (!st.ok()) {
    RecordError(item, st, report);
    return;
  }
  // A result that overwrote its whole buffer holds a valid value again.
  for (const Binding& r : item.launch.results)
    if (r.buffer() && r.buffer()->failed() && r.CoversBuffer()) r.buffer()->set_failed(0);
}

void WorkerQueue::ReportTask(const Item& item, TaskObserver* observer, int64_t start_ns, bool ok) {
  static_assert(static_cast<int>(TaskRecord::Kind::kWriteFrom) == static_cast<int>(Kind::kWriteFrom));
  TaskRecord r;
  r.kind = static_cast<TaskRecord::Kind>(item.kind);
  r.device = device_;
  r.seq = item.seq;
  r.ctx = &item.ctx;
  r.executable = item.kind == Kind::kLaunch ? item.launch.executable.get() : nullptr;
  r.nbytes = item.nbytes;
  r.ran_inline = &item == &inline_item_;
  r.start_ns = start_ns;
  r.end_ns = WallNs();
  r.ok = ok;
  observer->OnTaskRun(r);
}

namespace {
// Results written in place over one of the task's own inputs.
template <typename F>
void ForEachInPlaceResult(const Launch& launch, F f) {
  for (const Binding& r : launch.results) {
    if (!r.buffer()) continue;
    for (const Binding& p : launch.params)
      if (p.buffer() == r.buffer()) {
        f(r.buffer());
        break;
      }
  }
}
}  // namespace

namespace {
// The origin of op `op` of the launch's source program (a fused window's ops), or null.
const OpOrigin* OriginOfSourceOp(const TaskContext& ctx, int op) {
  if (!ctx.origins || op < 0 || op >= static_cast<int>(ctx.origins->size())) return nullptr;
  return &(*ctx.origins)[op];
}
// The first op of the source program that reads parameter `param` (-1: none).
int FirstReader(const Launch& launch, size_t param) {
  if (!launch.executable) return -1;
  const Graph& g = launch.executable->source();
  for (size_t i = 0; i < g.ops.size(); ++i)
    for (int v : g.ops[i].operands)
      if (v == static_cast<int>(param)) return static_cast<int>(i);
  return -1;
}
std::string Where(const char* op, const std::string& location) {
  return std::string(op) + (location.empty() ? "" : " (issued at " + location + ")");
}
}  // namespace

void WorkerQueue::RecordError(const Item& item, const Status& st, const RunReport& report) {
  const int failed_op = report.failed_op;
  static Counter* device_errors = GetCounter("device_errors");
  device_errors->Add();
  const char* op = item.ctx.op;
  const std::string* location = &item.ctx.location;
  int thread = item.ctx.thread;
  if (failed_op >= 0 && item.launch.executable)
    if (const OpOrigin* o = OriginOfSourceOp(item.ctx, item.launch.executable->SourceOp(failed_op))) {
      op = o->op;
      location = &o->location;
      if (o->thread) thread = o->thread;  // a fused window: the thread that issued the op
    }
  ErrorRecord rec;
  rec.seq = item.seq;
  rec.status = Status(st.code(), Where(op, *location) + ": " + st.message());
  rec.thread = thread;
  const auto& results = item.launch.results;
  // Note [A failed op fails all its results]: a program of one op (no origins: strict and debug
  // mode) fails as a whole, as on a backend that cannot run part of a program, so an output that
  // does not itself depend on the failed check (nll_loss's total_weight beside its loss) is not
  // handed on as if the op had succeeded. A window's ops each fail or succeed on their own.
  bool all = report.failed_results.size() != results.size() || !item.ctx.origins;
  ForEachInPlaceResult(item.launch, [&](Buffer* b) {
    for (size_t i = 0; i < results.size(); ++i)
      if (results[i].buffer() == b && (all || report.failed_results[i])) {
        b->Retain();
        rec.restore.push_back(b);
        return;
      }
  });
  std::lock_guard<std::mutex> lock(errors_mu_);
  for (size_t i = 0; i < results.size(); ++i) {
    Buffer* b = results[i].buffer();
    if (!b) continue;
    if (all || report.failed_results[i]) b->set_failed(item.seq);
    else if (b->failed() && results[i].CoversBuffer()) b->set_failed(0);
  }
  errors_.push_back(std::move(rec));
  unreported_.fetch_add(1, std::memory_order_release);
  // Reported records stay a while (a failed buffer read later names its origin); bound them.
  while (errors_.size() > 256 && errors_.front().reported) errors_.pop_front();
}

void WorkerQueue::RecordSkip(const Item& item, size_t failed_param, uint64_t origin) {
  static Counter* skipped = GetCounter("tasks_skipped_after_error");
  skipped->Add();
  std::lock_guard<std::mutex> lock(errors_mu_);
  ErrorRecord* rec = FindLocked(origin);
  // A task issued before its input's error was reported belongs to what that error reported
  // (the rest of a failed training step): it joins the error. One issued after it -- work that
  // goes on using a value known to have none -- is a new error of its own, reported once at
  // the sync points that concern it, so none is silent.
  bool joins = rec && (!rec->reported || item.seq <= rec->reported_at);
  uint64_t cause = origin;
  if (!joins) {
    const char* op = item.ctx.op;
    const std::string* location = &item.ctx.location;
    int thread = item.ctx.thread;
    if (const OpOrigin* o = OriginOfSourceOp(item.ctx, FirstReader(item.launch, failed_param))) {
      op = o->op;
      location = &o->location;
      if (o->thread) thread = o->thread;
    }
    ErrorRecord fresh;
    fresh.seq = cause = item.seq;
    std::string why = !rec                       ? " failed (its error was reported earlier)"
                      : (origin & kCancelTag) ? " was cancelled (" + rec->status.message() + ")"
                                              : " failed earlier with: " + rec->status.message();
    fresh.status = Status(rec ? rec->status.code() : Code::kFailedPrecondition,
                          Where(op, *location) + ": this op did not run: an input has no value, because the device "
                          "op that was to compute it" + why);
    fresh.thread = thread;
    errors_.push_back(std::move(fresh));
    unreported_.fetch_add(1, std::memory_order_release);
    rec = &errors_.back();
  }
  skipped_.emplace_back(item.seq, cause);
  if (skipped_.size() > 1024) skipped_.pop_front();
  // What the task was to update in place still holds its value from before: failed until the
  // error is reported, then valid again (at once, when it already was reported). One that had no
  // value before either (a skipped op's new result, now updated in place by the next skipped
  // op) keeps its failure: the report must not make its stale memory a value.
  std::vector<Buffer*> in_place;
  ForEachInPlaceResult(item.launch, [&](Buffer* b) { in_place.push_back(b); });
  auto restored_by = [&](ErrorRecord* holder, Buffer* b) {
    return holder && std::find(holder->restore.begin(), holder->restore.end(), b) != holder->restore.end();
  };
  for (const Binding& r : item.launch.results) {
    Buffer* b = r.buffer();
    if (!b) continue;
    if (std::find(in_place.begin(), in_place.end(), b) != in_place.end()) {
      ErrorRecord* holder = b->failed() ? FindLocked(b->failed()) : nullptr;
      bool had_value = !b->failed() || restored_by(holder, b);
      if (had_value) {
        if (rec->reported || (holder && holder != rec)) continue;  // valid, or another report restores it
        if (!holder) {
          b->Retain();
          rec->restore.push_back(b);
        }
      }
    }
    b->set_failed(cause);
  }
}

// Note [Cancellation]: Cancel() marks every task issued so far that has not started (the worker
// checks the mark before it runs a task); one error record, already reported, explains them all.
// A cancelled task's new results fail with it; what it was to update in place keeps the value it
// had, as when a CPU program is interrupted before those ops: the device's state is that of a
// point before the interrupt, and a value the program holds that was never computed says so when
// it is read (or used: work issued after the cancel that reads it fails with its own error).
uint64_t WorkerQueue::Cancel(Status why) {
  static Counter* cancels = GetCounter("queue_cancels");
  cancels->Add();
  std::lock_guard<std::mutex> lock(mu_);  // no task is issued meanwhile
  uint64_t upto = seq_.load(std::memory_order_acquire);
  {
    std::lock_guard<std::mutex> elock(errors_mu_);
    ErrorRecord rec;
    rec.seq = cancel_origin_ = kCancelTag | ++cancels_;
    rec.status = std::move(why);
    rec.reported = true;
    rec.reported_at = upto;
    errors_.push_back(std::move(rec));
    while (errors_.size() > 256 && errors_.front().reported) errors_.pop_front();
  }
  cancel_upto_.store(upto, std::memory_order_release);
  uint64_t done = completed_.load(std::memory_order_acquire);
  return upto > done ? upto - done : 0;
}

void WorkerQueue::SkipCancelled(const Item& item) {
  static Counter* cancelled = GetCounter("tasks_cancelled");
  cancelled->Add();
  std::lock_guard<std::mutex> lock(errors_mu_);
  skipped_.emplace_back(item.seq, cancel_origin_);
  if (skipped_.size() > 1024) skipped_.pop_front();
  std::vector<Buffer*> in_place;
  ForEachInPlaceResult(item.launch, [&](Buffer* b) { in_place.push_back(b); });
  for (const Binding& r : item.launch.results)
    if (Buffer* b = r.buffer(); b && std::find(in_place.begin(), in_place.end(), b) == in_place.end())
      b->set_failed(cancel_origin_);
}

bool WorkerQueue::WaitDone(uint64_t seq, int64_t timeout_us) {
  if (completed_.load(std::memory_order_acquire) >= seq) return true;
  ThreadPool::ProducerWait waiting;
  std::unique_lock<std::mutex> lock(mu_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(timeout_us);
  return WaitForSeqLocked(lock, seq, &deadline);
}

// Note [Targeted wakes]: a thread waiting for a task (a sync point after a burst of queued ops)
// was woken by every task that finished before it, a futex wake on the worker and a context switch
// for nothing per op. It now registers the sequence number it awaits in wake_seq_ (the minimum
// over all such waiters) and the worker wakes them when completed_ reaches it. Registration and
// the check of completed_ come in that order (seq_cst), against the worker's store of completed_
// and load of wake_seq_: either the waiter sees its task done, or the worker sees the
// registration and takes mu_ (which the waiter holds until it waits) before it notifies. A wake
// resets wake_seq_; waiters for later tasks register again.
bool WorkerQueue::WaitForSeqLocked(std::unique_lock<std::mutex>& lock, uint64_t seq,
                                   const std::chrono::steady_clock::time_point* deadline) {
  seq_waiters_.fetch_add(1, std::memory_order_seq_cst);
  bool done;
  while (true) {
    uint64_t cur = wake_seq_.load(std::memory_order_seq_cst);
    while (seq < cur && !wake_seq_.compare_exchange_weak(cur, seq, std::memory_order_seq_cst)) {
    }
    done = completed_.load(std::memory_order_seq_cst) >= seq;
    if (done) break;
    if (deadline == nullptr) {
      done_cv_.wait(lock);
    } else if (done_cv_.wait_until(lock, *deadline) == std::cv_status::timeout) {
      done = completed_.load(std::memory_order_seq_cst) >= seq;
      break;
    }
  }
  seq_waiters_.fetch_sub(1, std::memory_order_seq_cst);
  return done;
}

Status WorkerQueue::NoValue(const ErrorRecord& rec) {
  if (rec.seq & kCancelTag)
    return Status(rec.status.code(), "this tensor has no value: the device op that was to compute it was cancelled (" +
                                         rec.status.message() + ")");
  return Status(rec.status.code(),
                "this tensor has no value: the device op that was to compute it failed earlier with: " +
                    rec.status.message());
}

WorkerQueue::ErrorRecord* WorkerQueue::FindLocked(uint64_t seq) {
  for (ErrorRecord& r : errors_)
    if (r.seq == seq) return &r;
  return nullptr;
}

Status WorkerQueue::ReportLocked(ErrorRecord& rec) {
  if (!rec.reported) {
    rec.reported = true;
    rec.reported_at = seq_.load(std::memory_order_acquire);
    unreported_.fetch_sub(1, std::memory_order_acq_rel);
    for (Buffer* b : rec.restore) {
      if (b->failed() == rec.seq) b->set_failed(0);
      b->Release();
    }
    rec.restore.clear();
  }
  return rec.status;
}

void WorkerQueue::WakeWaiters() {
  // Pairs with the waiters' seq_cst registration before they test their condition: either they
  // see the new progress, or we see them and notify under the lock (Note [Targeted wakes]).
  bool wake = ring_waiters_.load(std::memory_order_seq_cst) > 0;
  if (!wake && seq_waiters_.load(std::memory_order_seq_cst) > 0)
    wake = completed_.load(std::memory_order_seq_cst) >= wake_seq_.load(std::memory_order_seq_cst);
  if (wake) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      wake_seq_.store(~uint64_t{0}, std::memory_order_seq_cst);
    }
    done_cv_.notify_all();
  }
}

void WorkerQueue::WorkerLoop() {
  ThreadPool::MarkQueueWorker();
  for (uint64_t next = 1;; ++next) {
    if (submitted_.load(std::memory_order_acquire) < next) {
      // Spin briefly (~20 us) before sleeping: the next op usually arrives within microseconds.
      for (int i = 0; i < 2000 && submitted_.load(std::memory_order_acquire) < next; ++i) CpuRelax();
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
    RunItem(item);
    // completed_ first: a producer that sees the ring drained may run the next task inline and
    // advance completed_ past this one. After ring_done_ the slot belongs to the producers.
    completed_.store(seq, std::memory_order_seq_cst);
    ring_done_.store(next, std::memory_order_seq_cst);
    WakeWaiters();
  }
}

void WorkerQueue::WaitUntilDone(uint64_t seq) {
  if (completed_.load(std::memory_order_acquire) >= seq) return;
  ThreadPool::ProducerWait waiting;
  for (int i = 0; i < 1000 && completed_.load(std::memory_order_acquire) < seq; ++i) CpuRelax();
  std::unique_lock<std::mutex> lock(mu_);
  if (completed_.load(std::memory_order_seq_cst) < seq) WaitForSeqLocked(lock, seq, nullptr);
}

void WorkerQueue::Drain() {
  WaitUntilDone(seq_.load(std::memory_order_acquire));
  std::lock_guard<std::mutex> lock(mu_);
  ReclaimLocked();
}

Status WorkerQueue::WaitFor(uint64_t seq) {
  WaitUntilDone(seq);
  CollectGarbage();
  std::lock_guard<std::mutex> lock(errors_mu_);
  if (errors_.empty()) return Status::Ok();
  if (ErrorRecord* rec = FindLocked(seq)) return ReportLocked(*rec);
  // A task that did not run because its input had failed: that failure explains it.
  for (auto it = skipped_.rbegin(); it != skipped_.rend(); ++it) {
    if (it->first != seq) continue;
    ErrorRecord* rec = FindLocked(it->second);
    if (rec && !rec->reported) return ReportLocked(*rec);
    if (it->second & kCancelTag) return rec ? rec->status : Cancelled("this op was cancelled");
    return FailedPrecondition("this op did not run: an input has no value, because the device op that was to "
                              "compute it failed" + (rec ? " earlier with: " + rec->status.message() : std::string()));
  }
  return Status::Ok();
}

Status WorkerQueue::SyncBuffer(const Buffer* buffer) {
  WaitUntilDone(buffer ? buffer->last_use() : seq_.load(std::memory_order_acquire));
  CollectGarbage();
  uint64_t origin = buffer ? buffer->failed() : 0;
  if (!origin && unreported_.load(std::memory_order_acquire) == 0) return Status::Ok();
  std::lock_guard<std::mutex> lock(errors_mu_);
  if (origin) {
    ErrorRecord* rec = FindLocked(origin);
    if (!rec) return FailedPrecondition("this tensor has no value: the device op that was to compute it failed "
                                        "(its error was reported earlier)");
    if (rec->reported) return NoValue(*rec);
    return ReportLocked(*rec);
  }
  int me = ThreadId();
  uint64_t done = completed_.load(std::memory_order_acquire);
  for (ErrorRecord& r : errors_)
    if (!r.reported && r.thread == me && r.seq <= done) return ReportLocked(r);
  return Status::Ok();
}

Status WorkerQueue::Synchronize() {
  WaitUntilDone(seq_.load(std::memory_order_acquire));
  CollectGarbage();
  if (unreported_.load(std::memory_order_acquire) == 0) return Status::Ok();
  std::lock_guard<std::mutex> lock(errors_mu_);
  int me = ThreadId();
  for (ErrorRecord& r : errors_)
    if (!r.reported && r.thread == me) return ReportLocked(r);
  for (ErrorRecord& r : errors_)
    if (!r.reported) return ReportLocked(r);
  return Status::Ok();
}

Status WorkerQueue::TakeAnyError() {
  if (unreported_.load(std::memory_order_acquire) == 0) return Status::Ok();
  std::lock_guard<std::mutex> lock(errors_mu_);
  for (ErrorRecord& r : errors_)
    if (!r.reported) return ReportLocked(r);
  return Status::Ok();
}

Status WorkerQueue::Read(Buffer* src, int64_t offset, int64_t nbytes, void* dst) {
  WaitUntilDone(src->last_use());
  if (uint64_t origin = src->failed()) {
    std::lock_guard<std::mutex> lock(errors_mu_);
    ErrorRecord* rec = FindLocked(origin);
    if (rec && !rec->reported) return ReportLocked(*rec);
    if (rec) return NoValue(*rec);
    return FailedPrecondition("this tensor has no value: the device op that was to compute it failed");
  }
  if (nbytes == 0) return Status::Ok();
  TaskObserver* observer = g_task_observer.load(std::memory_order_relaxed);
  if (!observer) return executor_->Read(src, offset, nbytes, dst);
  // Note [Task observer]: a read runs on the reading thread, as a task would.
  static const TaskContext kReadContext("copy to host");
  TaskRecord r;
  r.kind = TaskRecord::Kind::kReadInto;
  r.device = device_;
  r.ctx = &kReadContext;
  r.nbytes = nbytes;
  r.ran_inline = true;
  r.start_ns = WallNs();
  Status st = executor_->Read(src, offset, nbytes, dst);
  r.end_ns = WallNs();
  r.ok = st.ok();
  observer->OnTaskRun(r);
  return st;
}

}  // namespace tpu
