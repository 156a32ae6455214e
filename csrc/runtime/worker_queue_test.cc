#include <atomic>
#include <cstring>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/allocator.h"
#include "runtime/worker_queue.h"

namespace tpu {
namespace {

// For queues that only run host tasks.
class NoExecutor : public Executor {
 public:
  Status Run(const Launch&, RunReport*) override { return Internal("no launches here"); }
  Status Write(Buffer*, int64_t, const void*, int64_t) override { return Internal("no writes here"); }
  Status Read(Buffer*, int64_t, int64_t, void*) override { return Internal("no reads here"); }
  Status Copy(Buffer*, int64_t, Buffer*, int64_t, int64_t) override { return Internal("no copies here"); }
};
NoExecutor g_none;

TEST(QueueTest, TasksRunInOrder) {
  WorkerQueue q(0, &g_none);
  std::mutex mu;
  std::vector<int> order;
  uint64_t last = 0;
  for (int i = 0; i < 200; ++i) {
    uint64_t seq = q.Enqueue(
        [&, i] {
          std::lock_guard<std::mutex> lock(mu);
          order.push_back(i);
          return Status::Ok();
        },
        TaskContext{"task", ""});
    EXPECT_EQ(seq, last + 1);
    last = seq;
  }
  EXPECT_EQ(q.submitted(), 200u);
  EXPECT_TRUE(q.Synchronize().ok());
  EXPECT_EQ(q.completed(), 200u);
  ASSERT_EQ(order.size(), 200u);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(order[i], i);
}

TEST(QueueTest, WaitForWaitsForThatTask) {
  WorkerQueue q(0, &g_none);
  std::atomic<bool> first_done{false}, release{false};
  uint64_t s1 = q.Enqueue(
      [&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        first_done = true;
        return Status::Ok();
      },
      {});
  uint64_t s2 = q.Enqueue(
      [&] {
        while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return Status::Ok();
      },
      {});
  EXPECT_TRUE(q.WaitFor(s1).ok());
  EXPECT_TRUE(first_done);
  EXPECT_TRUE(q.Done(s1));
  EXPECT_FALSE(q.Done(s2));  // still blocked on `release`
  release = true;
  EXPECT_TRUE(q.WaitFor(s2).ok());
  EXPECT_TRUE(q.Done(s2));
}

TEST(QueueTest, WaitersForDifferentTasksWakeAsTheirOwnFinish) {
  // Note [Targeted wakes]: each waiter is woken once its own task is done -- not before, and not
  // held until the queue drains (the last task waits until every other waiter has returned).
  WorkerQueue q(0, &g_none);
  constexpr int kTasks = 6;
  std::atomic<int> returned{0};
  std::atomic<bool> release{false};
  std::vector<uint64_t> seqs;
  for (int i = 0; i < kTasks; ++i)
    seqs.push_back(q.Enqueue(
        [&, i] {
          if (i == kTasks - 1)
            while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
          else
            std::this_thread::sleep_for(std::chrono::milliseconds(3));
          return Status::Ok();
        },
        {}));
  std::vector<std::thread> waiters;
  std::atomic<int> early_done{0};
  for (int i = kTasks - 2; i >= 0; --i)  // later tasks' waiters first: the smallest registers last
    waiters.emplace_back([&, i] {
      EXPECT_TRUE(q.WaitFor(seqs[i]).ok());
      if (q.Done(seqs[i])) ++early_done;
      ++returned;
    });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (returned < kTasks - 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(returned.load(), kTasks - 1);  // all before the last task was released
  EXPECT_FALSE(q.Done(seqs.back()));
  release = true;
  for (auto& t : waiters) t.join();
  EXPECT_EQ(early_done.load(), kTasks - 1);
  EXPECT_TRUE(q.WaitFor(seqs.back()).ok());
}

TEST(QueueTest, ErrorIsReturnedWithContextThenCleared) {
  WorkerQueue q(0, &g_none);
  std::atomic<int> ran{0};
  q.Enqueue([&] { ++ran; return Status::Ok(); }, TaskContext{"aten::mul", "a.py:1"});
  q.Enqueue([&] { ++ran; return OutOfRange("index 9 is out of bounds"); },
            TaskContext{"aten::index_select", "model.py:42"});
  q.Enqueue([&] { ++ran; return Internal("second error"); }, TaskContext{"aten::add", "model.py:43"});
  uint64_t last = q.Enqueue([&] { ++ran; return Status::Ok(); }, TaskContext{"aten::sum", ""});
  Status s = q.Synchronize();
  EXPECT_EQ(ran.load(), 4);  // tasks after the failing one still ran (they read none of its results)
  EXPECT_TRUE(q.Done(last));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kOutOfRange);  // errors are reported in order ...
  EXPECT_EQ(s.message(), "aten::index_select (issued at model.py:42): index 9 is out of bounds");
  Status s2 = q.Synchronize();  // ... and none is dropped
  EXPECT_EQ(s2.code(), Code::kInternal);
  EXPECT_EQ(s2.message(), "aten::add (issued at model.py:43): second error");
  EXPECT_TRUE(q.Synchronize().ok());  // cleared once reported

  q.Enqueue([&] { return InvalidArgument("bad"); }, TaskContext{"aten::view", ""});
  Status t = q.Synchronize();
  EXPECT_EQ(t.code(), Code::kInvalidArgument);
  EXPECT_EQ(t.message(), "aten::view: bad");  // no location captured
  EXPECT_TRUE(q.Synchronize().ok());
}

TEST(QueueTest, EnqueueFromSeveralThreads) {
  WorkerQueue q(1, &g_none);
  std::atomic<int> count{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 250; ++i) q.Enqueue([&] { ++count; return Status::Ok(); }, {});
    });
  for (auto& t : threads) t.join();
  EXPECT_TRUE(q.Synchronize().ok());
  EXPECT_EQ(count.load(), 1000);
  EXPECT_EQ(q.completed(), 1000u);
}

TEST(QueueTest, IdleWorkerWakesUp) {
  WorkerQueue q(0, &g_none);
  for (int round = 0; round < 5; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // let the worker go to sleep
    std::atomic<bool> ran{false};
    uint64_t s = q.Enqueue([&] { ran = true; return Status::Ok(); }, {});
    EXPECT_TRUE(q.WaitFor(s).ok());
    EXPECT_TRUE(ran);
  }
}

TEST(QueueTest, DestructorRunsPendingTasks) {
  std::atomic<int> count{0};
  {
    WorkerQueue q(0, &g_none);
    for (int i = 0; i < 50; ++i)
      q.Enqueue([&] {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        ++count;
        return Status::Ok();
      }, {});
  }
  EXPECT_EQ(count.load(), 50);
}

// An executor that records which thread ran each launch, in order; a launch whose program is
// named "fail" returns an error, one named "slow" sleeps first.
class RecordingExecutor : public NoExecutor {
 public:
  Status Run(const Launch& launch, RunReport*) override {
    if (launch.executable->name() == "slow") std::this_thread::sleep_for(std::chrono::milliseconds(30));
    std::lock_guard<std::mutex> lock(mu);
    runs.emplace_back(launch.executable->name(), std::this_thread::get_id());
    if (launch.executable->name() == "fail") return OutOfRange("index 7 is out of bounds");
    return Status::Ok();
  }
  std::mutex mu;
  std::vector<std::pair<std::string, std::thread::id>> runs;
};

ExecutablePtr Named(const std::string& name, uint64_t fingerprint = 0) {
  auto exe = std::make_shared<Executable>();
  exe->set_identity(fingerprint, name, 0);
  return exe;
}

uint64_t Submit(Queue& q, const std::string& name, bool may_run_inline) {
  return q.Launch(Named(name), nullptr, 0, nullptr, 0, TaskContext{"test::op", "t.py:1"}, may_run_inline);
}

TEST(QueueTest, IdleQueueRunsSmallLaunchesOnTheCallingThread) {
  RecordingExecutor ex;
  WorkerQueue q(0, &ex);
  uint64_t s1 = Submit(q, "a", /*may_run_inline=*/true);
  EXPECT_TRUE(q.Done(s1));  // ran before Launch returned
  uint64_t s2 = Submit(q, "b", /*may_run_inline=*/false);
  EXPECT_EQ(s2, s1 + 1);
  EXPECT_TRUE(q.Synchronize().ok());
  ASSERT_EQ(ex.runs.size(), 2u);
  EXPECT_EQ(ex.runs[0].second, std::this_thread::get_id());
  EXPECT_NE(ex.runs[1].second, std::this_thread::get_id());  // the worker
}

TEST(QueueTest, InlineLaunchWaitsItsTurnBehindQueuedWork) {
  RecordingExecutor ex;
  WorkerQueue q(0, &ex);
  Submit(q, "slow", false);
  uint64_t s = Submit(q, "small", true);  // the queue is busy: this one is queued too
  EXPECT_TRUE(q.WaitFor(s).ok());
  ASSERT_EQ(ex.runs.size(), 2u);
  EXPECT_EQ(ex.runs[0].first, "slow");
  EXPECT_EQ(ex.runs[1].first, "small");
  EXPECT_NE(ex.runs[1].second, std::this_thread::get_id());
  EXPECT_EQ(q.completed(), s);
}

TEST(QueueTest, InlineErrorIsKeptForTheNextSyncPoint) {
  RecordingExecutor ex;
  WorkerQueue q(0, &ex);
  uint64_t s = Submit(q, "fail", true);
  EXPECT_TRUE(q.Done(s));
  Submit(q, "later", true);  // later work still runs
  Status st = q.Synchronize();
  EXPECT_EQ(st.code(), Code::kOutOfRange);
  EXPECT_EQ(st.message(), "test::op (issued at t.py:1): index 7 is out of bounds");
  EXPECT_TRUE(q.Synchronize().ok());
  EXPECT_EQ(ex.runs.size(), 2u);
}

TEST(QueueTest, MixedInlineAndQueuedFromSeveralThreadsKeepSequenceOrder) {
  std::mutex mu;
  std::vector<uint64_t> seen;  // sequence numbers in the order they ran
  class SeqExecutor : public NoExecutor {
   public:
    SeqExecutor(std::mutex& mu, std::vector<uint64_t>& seen) : mu_(mu), seen_(seen) {}
    Status Run(const Launch& launch, RunReport*) override {
      std::lock_guard<std::mutex> lock(mu_);
      seen_.push_back(launch.executable->fingerprint());
      return Status::Ok();
    }
    std::mutex& mu_;
    std::vector<uint64_t>& seen_;
  } ex(mu, seen);
  WorkerQueue q(0, &ex);
  // The sequence number a launch gets is only known from Launch's result, so each
  // launch records the order it was submitted in, taken under the same lock as the call.
  std::mutex submit_mu;
  uint64_t submitted = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        std::lock_guard<std::mutex> lock(submit_mu);
        uint64_t seq = q.Launch(Named("x", ++submitted), nullptr, 0, nullptr, 0, {}, /*may_run_inline=*/(i + t) % 3 != 0);
        EXPECT_EQ(seq, submitted);
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_TRUE(q.Synchronize().ok());
  ASSERT_EQ(seen.size(), 900u);
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], i + 1);
}

// ---- Note [Failed buffers] ---------------------------------------------------------------------

// Buffers whose "memory" is a vector (contents point at it); freeing deletes both.
class VectorAllocator : public Allocator {
 public:
  StatusOr<Buffer*> Allocate(int64_t nbytes, bool) override {
    auto* b = new Buffer(nbytes, this, 0);
    b->set_contents(new std::vector<char>(static_cast<size_t>(nbytes)));
    return b;
  }
  Status Materialize(Buffer*) override { return Status::Ok(); }
  void Free(Buffer* b) override {
    delete static_cast<std::vector<char>*>(b->contents());
    delete b;
  }
  MemoryStats stats() const override { return {}; }
  void ResetPeak() override {}
  void ResetAccumulated() override {}
  void EmptyCache() override {}
  int64_t capacity() const override { return 0; }
};

// Launch "copy" copies byte 0 of params[0] to results[0]; "add1" writes params[0] + 1; "fail" fails.
class ByteExecutor : public NoExecutor {
 public:
  static char& At(const Binding& b) { return (*static_cast<std::vector<char>*>(b.buffer()->contents()))[0]; }
  Status Run(const Launch& launch, RunReport* report) override {
    ++runs;
    const std::string& n = launch.executable->name();
    if (n == "fail") {
      report->failed_op = 1;
      return OutOfRange("index 5 is out of bounds");
    }
    if (n == "copy") At(launch.results[0]) = At(launch.params[0]);
    if (n == "add1") At(launch.results[0]) = static_cast<char>(At(launch.params[0]) + 1);
    return Status::Ok();
  }
  static char* Bytes(Buffer* b) { return static_cast<std::vector<char>*>(b->contents())->data(); }
  Status Read(Buffer* src, int64_t offset, int64_t n, void* dst) override {
    std::memcpy(dst, Bytes(src) + offset, static_cast<size_t>(n));
    return Status::Ok();
  }
  Status Write(Buffer* dst, int64_t offset, const void* src, int64_t n) override {
    std::memcpy(Bytes(dst) + offset, src, static_cast<size_t>(n));
    return Status::Ok();
  }
  std::atomic<int> runs{0};
};

class FailedBufferTest : public ::testing::Test {
 protected:
  Buffer* New(char v) {
    Buffer* b = alloc.Allocate(1, true).value();
    (*static_cast<std::vector<char>*>(b->contents()))[0] = v;
    return b;
  }
  // `extra`: a second input (the launch reads it too).
  uint64_t Run(const char* name, Buffer* in, Buffer* out, const char* op, const char* line, Buffer* extra = nullptr) {
    Binding p[] = {Binding(in, 0, DType::kU8, {1}), Binding(extra, 0, DType::kU8, {1})};
    Binding r[] = {Binding(out, 0, DType::kU8, {1})};
    TaskContext ctx(op, line);
    ctx.thread = ThreadId();
    return q.Launch(Named(name), p, extra ? 2 : 1, r, 1, std::move(ctx), false);
  }
  static char Value(Buffer* b) { return (*static_cast<std::vector<char>*>(b->contents()))[0]; }
  VectorAllocator alloc;
  ByteExecutor ex;
  WorkerQueue q{0, &ex};
};

TEST_F(FailedBufferTest, ConsumersOfAFailedResultDoNotRun) {
  Buffer *x = New(1), *loss = New(0), *grad = New(0), *w = New(10);
  Run("fail", x, loss, "aten::nll_loss", "train.py:7");       // loss never computed
  Run("copy", loss, grad, "aten::nll_loss_backward", "train.py:8");
  Run("add1", w, w, "aten::add_", "train.py:9", grad);        // the optimizer step: w += f(grad)
  uint64_t last = Run("add1", x, x, "aten::add_", "train.py:10");  // unrelated: still runs
  q.WaitFor(last).IgnoreError();
  EXPECT_EQ(ex.runs.load(), 2);  // only the failing op and the unrelated one ran
  EXPECT_EQ(Value(x), 2);
  EXPECT_EQ(Value(w), 10);       // the weights keep their values from before the failure
  EXPECT_EQ(loss->failed(), grad->failed());
  EXPECT_NE(loss->failed(), 0u);
  // Reading the gradient raises the loss's error, naming the op and line that failed.
  Status st = q.SyncBuffer(grad);
  EXPECT_EQ(st.code(), Code::kOutOfRange);
  EXPECT_EQ(st.message(), "aten::nll_loss (issued at train.py:7): index 5 is out of bounds");
  EXPECT_EQ(w->failed(), 0u);     // reported: the untouched in-place target is valid again
  EXPECT_TRUE(q.Synchronize().ok());  // reported once
  Status again = q.SyncBuffer(loss);  // a value that was never computed stays unreadable
  EXPECT_EQ(again.code(), Code::kOutOfRange);
  EXPECT_NE(again.message().find("has no value"), std::string::npos) << again.message();
  char byte;
  EXPECT_FALSE(q.Read(grad, 0, 1, &byte).ok());
  // Work on valid data runs again, and a full overwrite makes a failed buffer valid.
  Run("add1", w, w, "aten::add_", "train.py:9");
  Run("copy", x, loss, "aten::copy_", "train.py:11");
  EXPECT_TRUE(q.SyncBuffer(loss).ok());
  EXPECT_EQ(Value(w), 11);
  EXPECT_EQ(Value(loss), 2);
  for (Buffer* b : {x, loss, grad, w}) b->Release();
}

TEST_F(FailedBufferTest, HostStagingRunsInQueueOrder) {
  // ReadInto a staging area, a host task on it, WriteFrom it back: all in order behind the
  // device work, with no host wait in between.
  Buffer *a = New(5), *b = New(0);
  auto staging = std::make_shared<std::vector<char>>(1, 0);
  Run("add1", a, a, "aten::add_", "s.py:1");  // a = 6 when the read runs
  q.ReadInto(a, 0, 1, staging->data(), staging, TaskContext("stage"));
  q.Enqueue([staging] { (*staging)[0] *= 7; return Status::Ok(); }, TaskContext("reduce"));
  q.WriteFrom(b, 0, staging->data(), 1, staging, TaskContext("unstage"));
  Run("add1", b, b, "aten::add_", "s.py:2");
  EXPECT_TRUE(q.SyncBuffer(b).ok());
  EXPECT_EQ(Value(b), 43);
  // A read of failed data does not run; the write of a staging area makes its target valid.
  Buffer* c = New(0);
  Run("fail", a, c, "aten::take", "s.py:3");
  auto st2 = std::make_shared<std::vector<char>>(1, 99);
  q.ReadInto(c, 0, 1, st2->data(), st2, TaskContext("stage"));
  q.Drain();
  EXPECT_EQ((*st2)[0], 99);
  EXPECT_FALSE(q.SyncBuffer(c).ok());
  for (Buffer* x : {a, b, c}) x->Release();
}

TEST_F(FailedBufferTest, HostTaskWithResultsFailsThem) {
  // A collective's last task: the host work failed, so what the WriteFrom before it wrote is no
  // value; readers of it do not run, and a sync point raises the task's error.
  Buffer *out = New(0), *next = New(0);
  auto staging = std::make_shared<std::vector<char>>(1, 7);
  q.WriteFrom(out, 0, staging->data(), 1, staging, TaskContext("unstage"));
  Binding r[] = {Binding(out, 0, DType::kU8, {1})};
  uint64_t verdict = q.Enqueue([] { return Cancelled("rank 1 died"); }, r, 1, TaskContext("c10d::allreduce", "t.py:4"));
  Run("add1", out, next, "aten::add", "t.py:5");
  EXPECT_EQ(q.WaitFor(verdict).message(), "c10d::allreduce (issued at t.py:4): rank 1 died");
  EXPECT_FALSE(q.SyncBuffer(next).ok());
  EXPECT_EQ(Value(next), 0);
  // A successful one leaves (or makes) them valid.
  Binding r2[] = {Binding(out, 0, DType::kU8, {1})};
  q.Enqueue([] { return Status::Ok(); }, r2, 1, TaskContext("c10d::allreduce"));
  Run("add1", out, next, "aten::add", "t.py:6");
  EXPECT_TRUE(q.SyncBuffer(next).ok());
  EXPECT_EQ(Value(next), 8);
  for (Buffer* x : {out, next}) x->Release();
}

TEST_F(FailedBufferTest, ErrorsReachTheThreadThatIssuedThem) {
  Buffer *a = New(1), *b = New(0), *c = New(5), *d = New(0);
  std::thread other([&] { Run("fail", a, b, "aten::gather", "worker.py:3"); });  // nothing syncs there
  other.join();
  // An unrelated sync on this thread does not take the other thread's error...
  Run("copy", c, d, "aten::copy_", "main.py:1");
  EXPECT_TRUE(q.SyncBuffer(d).ok());
  EXPECT_EQ(Value(d), 5);
  // ... a device-wide sync does.
  Status st = q.Synchronize();
  EXPECT_EQ(st.message(), "aten::gather (issued at worker.py:3): index 5 is out of bounds");
  for (Buffer* x : {a, b, c, d}) x->Release();
}

TEST_F(FailedBufferTest, WaitForReturnsThatTasksOwnError) {
  Buffer *a = New(1), *b = New(0), *c = New(0);
  uint64_t bad = Run("fail", a, b, "aten::index_select", "m.py:1");
  uint64_t good = Run("copy", a, c, "aten::copy_", "m.py:2");
  EXPECT_TRUE(q.WaitFor(good).ok());  // its own task did not fail
  Status st = q.WaitFor(bad);
  EXPECT_EQ(st.code(), Code::kOutOfRange);
  EXPECT_EQ(st.message(), "aten::index_select (issued at m.py:1): index 5 is out of bounds");
  EXPECT_TRUE(q.TakeAnyError().ok());
  // A task that could not run because its input failed says so at its own wait.
  uint64_t bad2 = Run("fail", a, b, "aten::index_select", "m.py:3");
  uint64_t skipped = Run("copy", b, c, "aten::copy_", "m.py:4");
  Status why = q.WaitFor(skipped);
  EXPECT_EQ(why.message(), "aten::index_select (issued at m.py:3): index 5 is out of bounds");
  EXPECT_EQ(q.WaitFor(bad2).code(), Code::kOutOfRange);  // a task's own error, whenever asked
  EXPECT_TRUE(q.TakeAnyError().ok());                    // but reported to sync points once
  Status again = q.WaitFor(skipped);
  EXPECT_EQ(again.code(), Code::kFailedPrecondition);
  for (Buffer* x : {a, b, c}) x->Release();
}

TEST_F(FailedBufferTest, AnErrorNothingSyncsIsKeptForExit) {
  Buffer *a = New(1), *b = New(0);
  q.WaitFor(Run("fail", a, b, "aten::take", "m.py:4")).IgnoreError();  // reported to that wait...
  Run("fail", a, b, "aten::take", "m.py:5");
  q.Drain();
  Status st = q.TakeAnyError();  // ... the second one to nobody yet
  EXPECT_EQ(st.message(), "aten::take (issued at m.py:5): index 5 is out of bounds");
  EXPECT_TRUE(q.TakeAnyError().ok());
  for (Buffer* x : {a, b}) x->Release();
}


TEST_F(FailedBufferTest, WorkIssuedBeforeTheReportJoinsTheError) {
  // Strict mode's training step, with the sync point reporting the loss's error before the
  // worker has reached the update: the update (issued before the report) is part of what was
  // reported -- its in-place target keeps its value, valid, and nothing is reported twice.
  Buffer *x = New(1), *loss = New(0), *grad = New(0), *w = New(10);
  std::atomic<bool> go{false};
  Run("fail", x, loss, "aten::nll_loss", "t.py:1");
  Run("copy", loss, grad, "aten::nll_loss_backward", "t.py:2");
  q.Enqueue([&] { while (!go.load()) std::this_thread::yield(); return Status::Ok(); }, TaskContext("hold"));
  uint64_t update = Run("add1", w, w, "aten::add_", "t.py:3", grad);
  EXPECT_EQ(q.SyncBuffer(loss).code(), Code::kOutOfRange);  // loss.item(): the update has not run yet
  go = true;
  q.WaitFor(update).IgnoreError();
  EXPECT_EQ(Value(w), 10);
  EXPECT_EQ(w->failed(), 0u);
  EXPECT_TRUE(q.Synchronize().ok());
  for (Buffer* b : {x, loss, grad, w}) b->Release();
}

TEST_F(FailedBufferTest, AnInPlaceUpdateOfAValueThatNeverHadOneLeavesItFailed) {
  // Adam's denominator: sqrt of a failed moment is skipped (no value), then updated in place
  // (div_, add_: skipped too). The report of the error must not make it valid: it never held a
  // value, so the parameter update that reads it (issued before the report, run after it) is
  // skipped and the weights keep their values -- not updated from garbage.
  Buffer *x = New(1), *loss = New(0), *denom = New(0x7f), *w = New(10);
  std::atomic<bool> reached{false}, go{false};
  Run("fail", x, loss, "aten::nll_loss", "t.py:1");
  Run("copy", loss, denom, "aten::sqrt", "t.py:2");
  Run("add1", denom, denom, "aten::add_", "t.py:3");  // skipped before the report
  q.Enqueue([&] { reached = true; while (!go.load()) std::this_thread::yield(); return Status::Ok(); }, TaskContext("hold"));
  uint64_t update = Run("add1", w, w, "aten::addcdiv_", "t.py:4", denom);
  while (!reached.load()) std::this_thread::yield();
  EXPECT_EQ(q.SyncBuffer(loss).code(), Code::kOutOfRange);  // loss.item(), with the update still queued
  go = true;
  q.WaitFor(update).IgnoreError();
  EXPECT_NE(denom->failed(), 0u);
  EXPECT_EQ(Value(w), 10);
  EXPECT_EQ(w->failed(), 0u);
  EXPECT_TRUE(q.Synchronize().ok());
  for (Buffer* b : {x, loss, denom, w}) b->Release();
}

TEST_F(FailedBufferTest, WorkIssuedAfterTheReportIsAnErrorOfItsOwn) {
  // Using a value known to have no value after its error was reported: the op does not run,
  // its in-place target keeps its value, and the next sync point that concerns it says why, once.
  Buffer *x = New(1), *grad = New(0), *w = New(10), *z = New(0);
  Run("fail", x, grad, "aten::nll_loss", "t.py:1");
  EXPECT_EQ(q.Synchronize().code(), Code::kOutOfRange);
  Run("add1", w, w, "aten::add_", "t.py:5", grad);
  Run("copy", w, z, "aten::copy_", "t.py:6");  // reads w: skipped too, part of the same error
  Status st = q.SyncBuffer(z);
  EXPECT_EQ(st.code(), Code::kOutOfRange);
  EXPECT_EQ(st.message(), "aten::add_ (issued at t.py:5): this op did not run: an input has no value, because the "
                          "device op that was to compute it failed earlier with: aten::nll_loss (issued at t.py:1): "
                          "index 5 is out of bounds");
  EXPECT_EQ(w->failed(), 0u);  // reported: the weights are valid, unchanged
  EXPECT_EQ(Value(w), 10);
  EXPECT_TRUE(q.Synchronize().ok());
  for (Buffer* b : {x, grad, w, z}) b->Release();
}

TEST_F(FailedBufferTest, CancelSkipsWhatHasNotStarted) {
  Buffer *a = New(1), *b = New(0), *w = New(10);
  std::atomic<bool> go{false}, started{false};
  q.Enqueue([&] { started = true; while (!go.load()) std::this_thread::yield(); return Status::Ok(); },
            TaskContext("long"));
  while (!started.load()) std::this_thread::yield();
  uint64_t copy = Run("copy", a, b, "aten::copy_", "c.py:1");
  Run("add1", w, w, "aten::add_", "c.py:2");
  EXPECT_FALSE(q.WaitDone(copy, 1000));  // a timed wait returns while the work is queued
  EXPECT_EQ(q.Cancel(Cancelled("interrupted")), 3u);  // the running task and the two queued
  go = true;
  EXPECT_TRUE(q.WaitDone(copy + 1, 10 * 1000 * 1000));
  EXPECT_EQ(ex.runs.load(), 0);
  EXPECT_EQ(Value(w), 10);   // updated in place: keeps its value, valid
  EXPECT_EQ(w->failed(), 0u);
  EXPECT_TRUE(q.Synchronize().ok());  // the canceller reported it: nothing left to raise
  EXPECT_EQ(q.WaitFor(copy).code(), Code::kCancelled);
  Status read = q.SyncBuffer(b);  // a new value that was never computed
  EXPECT_EQ(read.code(), Code::kCancelled);
  EXPECT_EQ(read.message(), "this tensor has no value: the device op that was to compute it was cancelled "
                            "(interrupted)");
  // Work issued afterwards runs; what reads the cancelled value fails with its own error.
  Run("add1", w, w, "aten::add_", "c.py:3");
  Run("copy", b, a, "aten::copy_", "c.py:4");
  Status st = q.Synchronize();
  EXPECT_EQ(st.message(), "aten::copy_ (issued at c.py:4): this op did not run: an input has no value, because the "
                          "device op that was to compute it was cancelled (interrupted)");
  EXPECT_EQ(Value(w), 11);
  EXPECT_TRUE(q.Synchronize().ok());
  for (Buffer* x : {a, b, w}) x->Release();
}

}  // namespace
}  // namespace tpu
