#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/device.h"

namespace tpu {
namespace {

TEST(QueueTest, TasksRunInOrder) {
  Queue q(0);
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
  Queue q(0);
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

TEST(QueueTest, ErrorIsReturnedWithContextThenCleared) {
  Queue q(0);
  std::atomic<int> ran{0};
  q.Enqueue([&] { ++ran; return Status::Ok(); }, TaskContext{"aten::mul", "a.py:1"});
  q.Enqueue([&] { ++ran; return OutOfRange("index 9 is out of bounds"); },
            TaskContext{"aten::index_select", "model.py:42"});
  q.Enqueue([&] { ++ran; return Internal("second error"); }, TaskContext{"aten::add", "model.py:43"});
  uint64_t last = q.Enqueue([&] { ++ran; return Status::Ok(); }, TaskContext{"aten::sum", ""});
  Status s = q.Synchronize();
  EXPECT_EQ(ran.load(), 4);  // tasks after the failing one still ran
  EXPECT_TRUE(q.Done(last));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kOutOfRange);  // the first error is kept
  EXPECT_EQ(s.message(), "aten::index_select (issued at model.py:42): index 9 is out of bounds");
  EXPECT_TRUE(q.Synchronize().ok());  // cleared once reported

  q.Enqueue([&] { return InvalidArgument("bad"); }, TaskContext{"aten::view", ""});
  Status t = q.Synchronize();
  EXPECT_EQ(t.code(), Code::kInvalidArgument);
  EXPECT_EQ(t.message(), "aten::view: bad");  // no location captured
  EXPECT_TRUE(q.Synchronize().ok());
}

TEST(QueueTest, EnqueueFromSeveralThreads) {
  Queue q(1);
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
  Queue q(0);
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
    Queue q(0);
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
class RecordingExecutor : public Executor {
 public:
  Status Run(const Launch& launch) override {
    if (launch.executable->name == "slow") std::this_thread::sleep_for(std::chrono::milliseconds(30));
    std::lock_guard<std::mutex> lock(mu);
    runs.emplace_back(launch.executable->name, std::this_thread::get_id());
    if (launch.executable->name == "fail") return OutOfRange("index 7 is out of bounds");
    return Status::Ok();
  }
  std::mutex mu;
  std::vector<std::pair<std::string, std::thread::id>> runs;
};

ExecutablePtr Named(const std::string& name) {
  auto exe = std::make_shared<Executable>();
  exe->name = name;
  return exe;
}

uint64_t Submit(Queue& q, Executor& ex, const std::string& name, bool may_run_inline) {
  return q.EnqueueLaunch(&ex, Named(name), nullptr, 0, nullptr, 0, TaskContext{"test::op", "t.py:1"}, may_run_inline);
}

TEST(QueueTest, IdleQueueRunsSmallLaunchesOnTheCallingThread) {
  Queue q(0);
  RecordingExecutor ex;
  uint64_t s1 = Submit(q, ex, "a", /*may_run_inline=*/true);
  EXPECT_TRUE(q.Done(s1));  // ran before EnqueueLaunch returned
  uint64_t s2 = Submit(q, ex, "b", /*may_run_inline=*/false);
  EXPECT_EQ(s2, s1 + 1);
  EXPECT_TRUE(q.Synchronize().ok());
  ASSERT_EQ(ex.runs.size(), 2u);
  EXPECT_EQ(ex.runs[0].second, std::this_thread::get_id());
  EXPECT_NE(ex.runs[1].second, std::this_thread::get_id());  // the worker
}

TEST(QueueTest, InlineLaunchWaitsItsTurnBehindQueuedWork) {
  Queue q(0);
  RecordingExecutor ex;
  Submit(q, ex, "slow", false);
  uint64_t s = Submit(q, ex, "small", true);  // the queue is busy: this one is queued too
  EXPECT_TRUE(q.WaitFor(s).ok());
  ASSERT_EQ(ex.runs.size(), 2u);
  EXPECT_EQ(ex.runs[0].first, "slow");
  EXPECT_EQ(ex.runs[1].first, "small");
  EXPECT_NE(ex.runs[1].second, std::this_thread::get_id());
  EXPECT_EQ(q.completed(), s);
}

TEST(QueueTest, InlineErrorIsKeptForTheNextSyncPoint) {
  Queue q(0);
  RecordingExecutor ex;
  uint64_t s = Submit(q, ex, "fail", true);
  EXPECT_TRUE(q.Done(s));
  Submit(q, ex, "later", true);  // later work still runs
  Status st = q.Synchronize();
  EXPECT_EQ(st.code(), Code::kOutOfRange);
  EXPECT_EQ(st.message(), "test::op (issued at t.py:1): index 7 is out of bounds");
  EXPECT_TRUE(q.Synchronize().ok());
  EXPECT_EQ(ex.runs.size(), 2u);
}

TEST(QueueTest, MixedInlineAndQueuedFromSeveralThreadsKeepSequenceOrder) {
  Queue q(0);
  std::mutex mu;
  std::vector<uint64_t> seen;  // sequence numbers in the order they ran
  class SeqExecutor : public Executor {
   public:
    SeqExecutor(std::mutex& mu, std::vector<uint64_t>& seen) : mu_(mu), seen_(seen) {}
    Status Run(const Launch& launch) override {
      std::lock_guard<std::mutex> lock(mu_);
      seen_.push_back(launch.executable->fingerprint);
      return Status::Ok();
    }
    std::mutex& mu_;
    std::vector<uint64_t>& seen_;
  } ex(mu, seen);
  // The sequence number a launch gets is only known from EnqueueLaunch's result, so each
  // launch records the order it was submitted in, taken under the same lock as the call.
  std::mutex submit_mu;
  uint64_t submitted = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        std::lock_guard<std::mutex> lock(submit_mu);
        auto exe = std::make_shared<Executable>();
        exe->fingerprint = ++submitted;
        uint64_t seq = q.EnqueueLaunch(&ex, exe, nullptr, 0, nullptr, 0, {}, /*may_run_inline=*/(i + t) % 3 != 0);
        EXPECT_EQ(seq, submitted);
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_TRUE(q.Synchronize().ok());
  ASSERT_EQ(seen.size(), 900u);
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], i + 1);
}

}  // namespace
}  // namespace tpu
